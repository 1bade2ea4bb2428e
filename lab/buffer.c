// SPDX-License-Identifier: GPL-2.0
#define _GNU_SOURCE
#include "buffer.h"

#include <errno.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

const char *const backing_names[NR_BACKINGS] = {
	"anon-4k", "anon-thp", "shm-file", "hugetlb", "hugetlb-1G",
};

static size_t page_bytes(enum backing b)
{
	return b == B_HUGETLB_1G ? HUGE_1G : HUGE_2M;
}

static size_t rounded(enum backing b, size_t len)
{
	size_t page = page_bytes(b);

	return (len + page - 1) / page * page;
}

/* A hugetlb pool's state, for the reason a mapping failed. */
static void hugetlb_why(size_t page, size_t need, char *why, size_t whylen)
{
	unsigned long total = 0, avail = 0;
	char path[96];
	FILE *fh;

	snprintf(path, sizeof(path),
		 "/sys/kernel/mm/hugepages/hugepages-%zukB/nr_hugepages",
		 page >> 10);
	fh = fopen(path, "r");
	if (!fh) {
		snprintf(why, whylen, "no %zu kB hugetlb pool in this kernel",
			 page >> 10);
		return;
	}
	if (fscanf(fh, "%lu", &total) != 1)
		total = 0;
	fclose(fh);
	snprintf(path, sizeof(path),
		 "/sys/kernel/mm/hugepages/hugepages-%zukB/free_hugepages",
		 page >> 10);
	fh = fopen(path, "r");
	if (fh) {
		if (fscanf(fh, "%lu", &avail) != 1)
			avail = 0;
		fclose(fh);
	}
	snprintf(why, whylen, "hugetlb %zu kB pool has %lu of %lu pages free, "
		 "%zu needed (%s)", page >> 10, avail, total, need / page,
		 strerror(errno));
}

/* An anonymous mapping aligned to align, so huge pages can back it. */
static unsigned char *map_aligned(size_t len, size_t align)
{
	unsigned char *raw = mmap(NULL, len + align, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char *p;

	if (raw == MAP_FAILED)
		return MAP_FAILED;
	p = (unsigned char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	munmap(p + len, (size_t)(raw + align - p));
	return p;
}

unsigned char *map_buffer(enum backing b, size_t len, char *why, size_t whylen)
{
	size_t size = rounded(b, len);
	unsigned char *p = MAP_FAILED;

	snprintf(why, whylen, "mmap failed");
	switch (b) {
	case B_ANON:
		p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED)
			madvise(p, size, MADV_NOHUGEPAGE);
		break;
	case B_THP:
		p = map_aligned(size, HUGE_2M);
		if (p != MAP_FAILED)
			madvise(p, size, MADV_HUGEPAGE);
		break;
	case B_SHM: {
		char path[] = "/dev/shm/zdlab-XXXXXX";
		int fd = mkstemp(path);

		if (fd < 0)
			break;
		unlink(path);
		if (!ftruncate(fd, (off_t)size))
			p = mmap(NULL, size, PROT_READ | PROT_WRITE,
				 MAP_SHARED, fd, 0);
		close(fd);
		break;
	}
	case B_HUGETLB:
	case B_HUGETLB_1G: {
		/* mmap(2): log2 of the huge page size in the MAP_HUGE_SHIFT bits. */
		int log2 = b == B_HUGETLB_1G ? 30 : 21;

		p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB |
			 (log2 << MAP_HUGE_SHIFT), -1, 0);
		if (p == MAP_FAILED)
			hugetlb_why(page_bytes(b), size, why, whylen);
		break;
	}
	default:
		break;
	}
	if (p == MAP_FAILED)
		return NULL;
	/* Fault everything in now: the benches time stores, not faults. */
	memset(p, 0, size);
	return p;
}

void unmap_buffer(enum backing b, unsigned char *p, size_t len)
{
	munmap(p, rounded(b, len));
}

size_t thp_bytes(const unsigned char *p, size_t len)
{
	uintptr_t lo = (uintptr_t)p, hi = lo + len, start = 0, end = 0;
	char line[512];
	size_t total = 0;
	FILE *fh = fopen("/proc/self/smaps", "r");

	if (!fh)
		return 0;
	while (fgets(line, sizeof(line), fh)) {
		unsigned long a, b;
		size_t kb;

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2) {
			start = a;
			end = b;
		} else if (sscanf(line, "AnonHugePages: %zu kB", &kb) == 1 &&
			   start < hi && end > lo) {
			size_t overlap = (end < hi ? end : hi) -
					 (start > lo ? start : lo);

			total += kb << 10 < overlap ? kb << 10 : overlap;
		}
	}
	fclose(fh);
	return total;
}

__attribute__((target("clflushopt")))
static void flush_lines_opt(unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i += LINE)
		_mm_clflushopt(p + i);
}

void flush_range(const struct cpu_features *f, unsigned char *p, size_t len)
{
	if (cpu_has(f, CPU_CLFLUSHOPT)) {
		flush_lines_opt(p, len);
	} else {
		for (size_t i = 0; i < len; i += LINE)
			_mm_clflush(p + i);
	}
	_mm_mfence();
}
