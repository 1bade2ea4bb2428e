// SPDX-License-Identifier: GPL-2.0
/*
 * zdcheck: fill or verify a device-dax mapping with a pattern that encodes
 * each word's offset and a seed, so that any lost, moved or stale word is
 * found.  Built statically on the host and run in the guest:
 *
 *   zdcheck fill   /dev/dax0.0 BYTES SEED
 *   zdcheck verify /dev/dax0.0 BYTES SEED
 *   zdcheck hold   anon BYTES SEED
 *   zdcheck ends   /dev/dax0.0 BYTES SEED
 *   zdcheck fault  /dev/dax0.0 BYTES SEED
 *
 * "hold" fills BYTES of anonymous memory, prints "zdcheck: filled" and
 * keeps it until standard input reaches end of file or a line, then
 * verifies it: the pages stay mapped while the scenario offlines the memory
 * under them, so they must migrate intact.  "ends" fills and verifies only
 * the first and the last 2 MiB of the BYTES mapped: a fault on each end of
 * the device, and none between.  "fault" times the first write to the first
 * and to the last 2 MiB of the mapping, each a fault, and prints
 * "zdcheck: fault first_ns=N last_ns=N".
 *
 * Prints "zdcheck: <op> <bytes> bytes, <n> mismatches" and exits 1 on any
 * mismatch, 2 on a usage or system error.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* splitmix64 (Steele, Lea, Flood 2014): cheap, and no two offsets collide. */
static uint64_t pattern(uint64_t seed, uint64_t offset)
{
	uint64_t z = seed + offset * 0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* 2 MiB, the device-dax alignment the checks use, in words. */
#define END_WORDS	((2UL << 20) / 8)

/* The mismatches of words [first, last) of map, naming the first. */
static uint64_t mismatches_in(const uint64_t *map, uint64_t first,
			      uint64_t last, uint64_t seed)
{
	uint64_t mismatches = 0;

	for (uint64_t i = first; i < last; i++)
		if (map[i] != pattern(seed, i) && !mismatches++)
			fprintf(stderr, "zdcheck: first mismatch at byte %" PRIu64 "\n",
				i * 8);
	return mismatches;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Nanoseconds the first write to word i of map takes: a fault. */
static uint64_t fault_ns(volatile uint64_t *map, uint64_t i, uint64_t seed)
{
	uint64_t start = now_ns();

	map[i] = pattern(seed, i);
	return now_ns() - start;
}

int main(int argc, char **argv)
{
	uint64_t bytes, seed, mismatches = 0;
	/* The words to fill and verify: [0, words), or both ends alone. */
	uint64_t window[2][2];
	uint64_t *map;
	int fill, hold, verify, ends, fd = -1;
	char line[16];

	if (argc != 5 || (strcmp(argv[1], "fill") && strcmp(argv[1], "verify") &&
			  strcmp(argv[1], "hold") && strcmp(argv[1], "ends") &&
			  strcmp(argv[1], "fault"))) {
		fprintf(stderr, "usage: zdcheck fill|verify|ends|fault DEVICE BYTES SEED | "
			"zdcheck hold anon BYTES SEED\n");
		return 2;
	}
	hold = !strcmp(argv[1], "hold");
	ends = !strcmp(argv[1], "ends");
	fill = !strcmp(argv[1], "fill") || hold || ends;
	verify = !strcmp(argv[1], "verify") || hold || ends;
	bytes = strtoull(argv[3], NULL, 0);
	seed = strtoull(argv[4], NULL, 0);
	if (!bytes || bytes % (2UL << 20)) {
		fprintf(stderr, "zdcheck: BYTES must be a non-zero multiple of 2 MiB\n");
		return 2;
	}
	if (hold) {
		map = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	} else {
		fd = open(argv[2], O_RDWR);
		if (fd < 0) {
			perror(argv[2]);
			return 2;
		}
		map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	}
	if (map == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	if (!strcmp(argv[1], "fault")) {
		uint64_t first = fault_ns(map, 0, seed);
		uint64_t last = fault_ns(map, bytes / 8 - END_WORDS, seed);

		printf("zdcheck: fault first_ns=%" PRIu64 " last_ns=%" PRIu64 "\n",
		       first, last);
		munmap(map, bytes);
		close(fd);
		return 0;
	}
	window[0][0] = 0;
	window[0][1] = ends ? END_WORDS : bytes / 8;
	window[1][0] = ends ? bytes / 8 - END_WORDS : 0;
	window[1][1] = ends ? bytes / 8 : 0;
	if (fill)
		for (int w = 0; w < 2; w++)
			for (uint64_t i = window[w][0]; i < window[w][1]; i++)
				map[i] = pattern(seed, i);
	if (hold) {
		printf("zdcheck: filled\n");
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin) && ferror(stdin)) {
			perror("stdin");
			return 2;
		}
	}
	if (verify)
		for (int w = 0; w < 2; w++)
			mismatches += mismatches_in(map, window[w][0],
						    window[w][1], seed);
	/*
	 * device-dax has no msync(): the mapping is the media.  A rebind
	 * re-initialises the memmap, not the data, and leaves CPU caches as
	 * they are, so the verify pass reads what the fill pass wrote unless
	 * the memmap code touched the data.
	 */
	munmap(map, bytes);
	if (fd >= 0)
		close(fd);
	printf("zdcheck: %s %" PRIu64 " bytes, %" PRIu64 " mismatches\n",
	       argv[1], bytes, mismatches);
	return mismatches ? 1 : 0;
}
