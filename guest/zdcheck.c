// SPDX-License-Identifier: GPL-2.0
/*
 * zdcheck: fill or verify a device-dax mapping with a pattern that encodes
 * each word's offset and a seed, so that any lost, moved or stale word is
 * found.  Built statically on the host and run in the guest:
 *
 *   zdcheck fill   /dev/dax0.0 BYTES SEED
 *   zdcheck verify /dev/dax0.0 BYTES SEED
 *   zdcheck hold   anon BYTES SEED
 *
 * "hold" fills BYTES of anonymous memory, prints "zdcheck: filled" and
 * keeps it until standard input reaches end of file or a line, then
 * verifies it: the pages stay mapped while the scenario offlines the memory
 * under them, so they must migrate intact.
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
#include <unistd.h>

/* splitmix64 (Steele, Lea, Flood 2014): cheap, and no two offsets collide. */
static uint64_t pattern(uint64_t seed, uint64_t offset)
{
	uint64_t z = seed + offset * 0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The mismatches of words [0, words) of map, naming the first. */
static uint64_t mismatches_in(const uint64_t *map, uint64_t words, uint64_t seed)
{
	uint64_t mismatches = 0;

	for (uint64_t i = 0; i < words; i++)
		if (map[i] != pattern(seed, i) && !mismatches++)
			fprintf(stderr, "zdcheck: first mismatch at byte %" PRIu64 "\n",
				i * 8);
	return mismatches;
}

int main(int argc, char **argv)
{
	uint64_t bytes, seed, mismatches = 0;
	uint64_t *map;
	int fill, hold, verify, fd = -1;
	char line[16];

	if (argc != 5 || (strcmp(argv[1], "fill") && strcmp(argv[1], "verify") &&
			  strcmp(argv[1], "hold"))) {
		fprintf(stderr, "usage: zdcheck fill|verify DEVICE BYTES SEED | "
			"zdcheck hold anon BYTES SEED\n");
		return 2;
	}
	hold = !strcmp(argv[1], "hold");
	fill = !strcmp(argv[1], "fill") || hold;
	verify = !strcmp(argv[1], "verify") || hold;
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
	if (fill)
		for (uint64_t i = 0; i < bytes / 8; i++)
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
		mismatches = mismatches_in(map, bytes / 8, seed);
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
