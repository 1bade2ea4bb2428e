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
	const char *name;		/* first, for find_row() */
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

/* Copy the template struct page of size bytes over the nr at dst. */
typedef void copy_fn(unsigned char *dst, size_t nr,
		     const unsigned char *template, size_t size);

/*
 * Streaming-store lines 64-byte lines at dst (line aligned), cycling
 * through period lines of pattern; the caller fences.
 */
typedef void stream_fn(unsigned char *dst, const unsigned char *pattern,
		       size_t lines, size_t period);

/* Streaming strategies' stores that 'zdlab clear' zeroes with (clear.c). */
stream_fn stream_movnti, stream_sse2, stream_avx2, stream_avx512;

/*
 * A store strategy, one row of strategies[] (memmap.c): its name, the CPU
 * feature it needs, and its stores of every struct page but those that
 * take the slow path in any strategy (the first of an order-0 range, the
 * head and first two tails of a compound page): a cached copy of the
 * template, or streaming stores of whole lines, weakly ordered and fenced
 * once per memmap_write().  With neither, the slow path writes every page.
 */
struct strategy {
	const char *name;		/* first, for find_row() */
	enum cpu_feature needs;
	copy_fn *copy;
	stream_fn *stream;
	/* Whether it has a form for a struct page of size bytes; NULL: all. */
	bool (*fits)(size_t size);
};

extern const struct strategy strategies[];
extern const size_t nr_strategies;
const struct strategy *strategy_find(const char *name);
bool strategy_supported(const struct strategy *s, const struct cpu_features *f);
bool strategy_fits(const struct strategy *s, size_t size);
bool strategy_streams(const struct strategy *s);
/* "\"strategies\": [...]": every row, and whether this CPU runs it. */
void print_strategies_json(const struct cpu_features *f);

/*
 * Write the memmap of pfns [first_pfn, first_pfn + nr_pfns) into memmap,
 * which holds the struct page of pfn 0 at offset 0, plus the pageblock
 * bytes the kernel sets in a separate pass.  Compound ranges must start
 * and end on compound boundaries, as device-dax guarantees.
 */
void memmap_write(const struct strategy *s, const struct images *img,
		  const struct geometry *g, unsigned char *memmap,
		  unsigned char *pageblocks, size_t first_pfn, size_t nr_pfns);

/* What the kernel's slow path leaves there: the reference for tests. */
void memmap_reference(const struct images *img, const struct geometry *g,
		      unsigned char *memmap, unsigned char *pageblocks,
		      size_t first_pfn, size_t nr_pfns);

/* The physical floor: stream the order-0 image over len bytes. */
void floor_fill(const struct strategy *s, unsigned char *dst, size_t len,
		const struct images *img);

int images_load(struct images *img, const char *path);
/* Synthetic images of another struct page size, for layout tests. */
void images_resize(struct images *img, size_t size);

#define MIGRATE_MOVABLE_BYTE	1

#endif
