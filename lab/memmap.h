/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The struct page images memmap_init_zone_device() writes, the layouts it
 * writes them in, and the store strategies that can write them.
 */
#ifndef ZDLAB_MEMMAP_H
#define ZDLAB_MEMMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu.h"

#define MAX_PAGE_SIZE	256

/* One kernel's struct page images, from a file under lab/vectors/. */
struct images {
	size_t size;			/* sizeof(struct page) */
	size_t head_ptr_off;		/* word of a tail holding head | 1 */
	unsigned char order0[MAX_PAGE_SIZE];
	unsigned char head[MAX_PAGE_SIZE];
	/* First tail: folio fields, which depend on the order (2M, 1G). */
	unsigned char tail1[2][MAX_PAGE_SIZE];
	unsigned char tail[MAX_PAGE_SIZE];	/* second tail on */
	char source[128];
};

/*
 * A range the way the kernel lays out its memmap: order-0 pages, or
 * compound pages of 2^order with or without vmemmap tail reuse.  With
 * reuse only REUSE_PAGES struct pages per compound page are written; the
 * rest alias them, so the lab's buffer holds just those.
 */
#define REUSE_PAGES	128	/* VMEMMAP_RESERVE_NR (2) * PAGE_SIZE / 64 */
#define PAGEBLOCK_PAGES	512	/* pageblock_nr_pages with 2M huge pages */

struct geometry {
	const char *name;
	unsigned int order;
	bool reuse;
};

/* Index into images.tail1 for a compound order. */
static inline int tail1_index(unsigned int order)
{
	return order > 9;
}

extern const struct geometry geometries[];
extern const size_t nr_geometries;
const struct geometry *geometry_find(const char *name);

/* struct pages the kernel writes for a range of nr_pfns pfns. */
size_t geometry_written(const struct geometry *g, size_t nr_pfns);

enum strategy {
	S_SLOW,			/* replica of the slow path's stores */
	S_TEMPLATE_U64,		/* cached u64 copies, a loop over the words */
	S_TEMPLATE_MEMCPY,	/* cached memcpy() per page */
	S_TEMPLATE_RELOAD,	/* unrolled u64 copies (kernel before patch 7) */
	S_TEMPLATE_REGS,	/* unrolled u64 stores from registers (patch 7) */
	S_MOVNTI,		/* 8-byte streaming stores (the seeds' method) */
	S_SSE2,			/* 4 x 16-byte MOVNTDQ per line */
	S_AVX2,			/* 2 x 32-byte VMOVNTDQ per line */
	S_AVX512,		/* 1 x 64-byte VMOVNTDQ per line */
	S_MOVDIR64B,		/* 64-byte direct store */
	NR_STRATEGIES
};

extern const char *const strategy_names[NR_STRATEGIES];
int strategy_find(const char *name);
bool strategy_supported(enum strategy s, const struct cpu_features *f);
/* Whether s has a form for a struct page of size bytes. */
bool strategy_fits(enum strategy s, size_t size);
bool strategy_streams(enum strategy s);

/*
 * Write the memmap of pfns [first_pfn, first_pfn + nr_pfns) into memmap,
 * which holds the struct page of pfn 0 at offset 0, plus the pageblock
 * bytes the kernel sets in a separate pass.  Compound ranges must start
 * and end on compound boundaries, as device-dax guarantees.
 */
void memmap_write(enum strategy s, const struct images *img,
		  const struct geometry *g, unsigned char *memmap,
		  unsigned char *pageblocks, size_t first_pfn, size_t nr_pfns);

/* What the kernel's slow path leaves there: the reference for tests. */
void memmap_reference(const struct images *img, const struct geometry *g,
		      unsigned char *memmap, unsigned char *pageblocks,
		      size_t first_pfn, size_t nr_pfns);

/*
 * Streaming-store lines 64-byte lines at dst (line aligned), cycling
 * through period lines of pattern; the caller fences.
 */
void stream_lines(enum strategy s, unsigned char *dst,
		  const unsigned char *pattern, size_t lines, size_t period);

/* The physical floor: stream the order-0 image over len bytes. */
void floor_fill(enum strategy s, unsigned char *dst, size_t len,
		const struct images *img);

int images_load(struct images *img, const char *path);
/* Synthetic images of another struct page size, for layout tests. */
void images_resize(struct images *img, size_t size);

#define MIGRATE_MOVABLE_BYTE	1

#endif
