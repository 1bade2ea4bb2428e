/* SPDX-License-Identifier: GPL-2.0 */
/* Destination buffers for the benches: backings and cache states. */
#ifndef ZDLAB_BUFFER_H
#define ZDLAB_BUFFER_H

#include <stddef.h>

#include "cpu.h"

#define HUGE_2M		(2UL << 20)
#define HUGE_1G		(1UL << 30)

enum backing {
	B_ANON, B_THP, B_SHM, B_HUGETLB, B_HUGETLB_1G, NR_BACKINGS
};
extern const char *const backing_names[NR_BACKINGS];

/*
 * Map len bytes (rounded up to the backing's page size) and fault them
 * all in; NULL with the reason in why if this backing is not available
 * here.  A hugetlb backing never falls back to smaller pages.
 */
unsigned char *map_buffer(enum backing b, size_t len, char *why, size_t whylen);
void unmap_buffer(enum backing b, unsigned char *p, size_t len);

/* Bytes of [p, p + len) that /proc/self/smaps shows as AnonHugePages. */
size_t thp_bytes(const unsigned char *p, size_t len);

/*
 * Write back and evict [p, p + len) from every cache level (CLFLUSHOPT
 * where offered, else CLFLUSH), then MFENCE so no flush is still in
 * flight when the caller starts its clock.
 */
void flush_range(const struct cpu_features *f, unsigned char *p, size_t len);

#endif
