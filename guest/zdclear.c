// SPDX-License-Identifier: GPL-2.0
/*
 * zdclear: demand-fault huge pages the way 'perf bench mem mmap -f demand'
 * does (that benchmark is not in 6.12's perf), check that the kernel hands
 * out zeroed huge pages, and measure how long a second task on the same CPU
 * waits while huge pages are cleared.  Built statically on the host and run
 * in the guest:
 *
 *   zdclear bench   2M|1G BYTES
 *       one mapping of BYTES, one write per huge page, timed;
 *       prints "zdclear: bench page=P bytes=B ns=T"
 *   zdclear zero    2M|1G BYTES ROUNDS
 *       fault every huge page at a different subpage, check every byte is
 *       zero, fill with a pattern, unmap (freeing the pages), repeat;
 *       prints "zdclear: zero page=P bytes=B rounds=R bad=N"
 *   zdclear latency 2M|1G BYTES
 *       a spinning task and the faulting task both pinned to CPU 0; prints
 *       "zdclear: latency page=P bytes=B fault_ns=T max_wait_ns=W"
 *
 * 2M pages are THP (MADV_HUGEPAGE; every page is checked to be huge through
 * AnonHugePages in /proc/meminfo), 1G pages come from hugetlb
 * (MAP_HUGETLB | MAP_HUGE_1GB; mmap fails if the pool is too small).
 * Exits 1 on a non-zero byte or a page that was not huge, 2 on a usage or
 * system error, with one line on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#define MAP_HUGE_1GB (30 << MAP_HUGE_SHIFT)
#define SUBPAGE 4096UL

static unsigned long huge;	/* bytes per huge page */
static const char *page_name;

static void die(const char *what)
{
	fprintf(stderr, "zdclear: %s: %s\n", what, strerror(errno));
	exit(2);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static long anon_huge_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		die("/proc/meminfo");
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* A mapping of bytes, aligned to the huge page size, not yet faulted. */
static char *map_huge(unsigned long bytes)
{
	char *p, *raw;

	if (huge == 1UL << 30) {
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_1GB,
			 -1, 0);
		if (p == MAP_FAILED)
			die("mmap of 1G hugetlb pages (pool too small?)");
		return p;
	}
	/* Over-map by one huge page, keep the aligned part. */
	raw = mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		die("mmap");
	p = (char *)(((uintptr_t)raw + huge - 1) & ~(huge - 1));
	if ((p > raw && munmap(raw, p - raw)) ||
	    (p < raw + huge && munmap(p + bytes, raw + huge - p)))
		die("munmap of the alignment slack");
	if (madvise(p, bytes, MADV_HUGEPAGE))
		die("madvise(MADV_HUGEPAGE)");
	return p;
}

static void unmap_huge(char *p, unsigned long bytes)
{
	if (munmap(p, bytes))
		die("munmap");
}

/* Every huge page of a faulted THP mapping must be huge. */
static void check_huge(long before_kb, unsigned long bytes)
{
	long got_kb;

	if (huge != 2UL << 20)
		return;
	got_kb = anon_huge_kb() - before_kb;
	if (got_kb < (long)(bytes >> 10)) {
		fprintf(stderr, "zdclear: only %ld of %lu kB were THP\n",
			got_kb, bytes >> 10);
		exit(1);
	}
}

/* Write-fault every huge page at subpage 'sub(i)'; return the time taken. */
static uint64_t fault_all(char *p, unsigned long bytes, unsigned int salt)
{
	unsigned long per = huge / SUBPAGE, i;
	uint64_t t0 = now_ns();

	for (i = 0; i < bytes / huge; i++)
		p[i * huge + ((i * 37 + salt) % per) * SUBPAGE] = 1;
	return now_ns() - t0;
}

static int cmd_bench(unsigned long bytes)
{
	long before = anon_huge_kb();
	char *p = map_huge(bytes);
	uint64_t ns = fault_all(p, bytes, 0);

	check_huge(before, bytes);
	unmap_huge(p, bytes);
	printf("zdclear: bench page=%s bytes=%lu ns=%" PRIu64 "\n",
	       page_name, bytes, ns);
	return 0;
}

static int cmd_zero(unsigned long bytes, unsigned int rounds)
{
	uint64_t bad = 0;
	unsigned int r;

	for (r = 0; r < rounds; r++) {
		unsigned long per = huge / SUBPAGE, i, w;
		long before = anon_huge_kb();
		char *p = map_huge(bytes);
		uint64_t *words = (uint64_t *)p;

		fault_all(p, bytes, r);
		check_huge(before, bytes);
		for (i = 0; i < bytes / huge; i++)
			p[i * huge + ((i * 37 + r) % per) * SUBPAGE] = 0;
		for (w = 0; w < bytes / 8; w++) {
			if (words[w] && !bad++)
				fprintf(stderr, "zdclear: round %u: byte %lu of %s page %lu not zero\n",
					r, w * 8 % huge, page_name, w * 8 / huge);
			words[w] = 0x5a5a5a5a5a5a5a5aULL ^ w;
		}
		unmap_huge(p, bytes);
	}
	printf("zdclear: zero page=%s bytes=%lu rounds=%u bad=%" PRIu64 "\n",
	       page_name, bytes, rounds, bad);
	return bad ? 1 : 0;
}

static volatile int spinning = 1;
static uint64_t max_wait_ns;

static void pin_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
}

/* The second task: the longest gap between two of its clock reads. */
static void *spin(void *arg)
{
	uint64_t last, t;

	pin_cpu0();
	last = now_ns();
	while (spinning) {
		t = now_ns();
		if (t - last > max_wait_ns)
			max_wait_ns = t - last;
		last = t;
	}
	return arg;
}

static int cmd_latency(unsigned long bytes)
{
	pthread_t spinner;
	uint64_t ns;
	char *p;

	pin_cpu0();
	p = map_huge(bytes);
	errno = pthread_create(&spinner, NULL, spin, NULL);
	if (errno)
		die("pthread_create");
	/* Let the spinner start and settle on CPU 0 first. */
	usleep(100000);
	max_wait_ns = 0;
	ns = fault_all(p, bytes, 0);
	spinning = 0;
	pthread_join(spinner, NULL);
	unmap_huge(p, bytes);
	printf("zdclear: latency page=%s bytes=%lu fault_ns=%" PRIu64
	       " max_wait_ns=%" PRIu64 "\n", page_name, bytes, ns, max_wait_ns);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long bytes;
	char *end;

	if (argc < 4 || (strcmp(argv[2], "2M") && strcmp(argv[2], "1G")))
		goto usage;
	page_name = argv[2];
	huge = strcmp(page_name, "1G") ? 2UL << 20 : 1UL << 30;
	bytes = strtoul(argv[3], &end, 0);
	if (*end || !bytes || bytes % huge) {
		fprintf(stderr, "zdclear: BYTES must be a non-zero multiple of %s\n",
			page_name);
		return 2;
	}
	if (!strcmp(argv[1], "bench") && argc == 4)
		return cmd_bench(bytes);
	if (!strcmp(argv[1], "zero") && argc == 5)
		return cmd_zero(bytes, strtoul(argv[4], NULL, 0));
	if (!strcmp(argv[1], "latency") && argc == 4)
		return cmd_latency(bytes);
usage:
	fprintf(stderr, "usage: zdclear bench|latency 2M|1G BYTES | zdclear zero 2M|1G BYTES ROUNDS\n");
	return 2;
}
