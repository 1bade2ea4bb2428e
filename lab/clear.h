/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The ways a kernel can zero a huge page: 6.12's clear_page() variants,
 * called once per 4 KB page by folio_zero_user(); upstream's clear_pages(),
 * one string instruction over a whole extent of pages; and the weakly
 * ordered alternatives (CLZERO, streaming stores), each with the fence the
 * kernel would need before it maps the page.
 */
#ifndef ZDLAB_CLEAR_H
#define ZDLAB_CLEAR_H

#include <stdbool.h>
#include <stddef.h>

#include "cpu.h"
#include "memmap.h"

#define PAGE_4K		4096

/*
 * The rows of clear_methods[] (clear.c), by name: an enum, unlike the
 * memmap strategies, because code names some of them (upstream's
 * clear_pages() for the neighbourhood cleared last, the mutant builds).
 */
enum clear_method {
	CM_PAGE_STOSB,
	CM_PAGE_STOSQ,
	CM_PAGE_MOVQ,
	CM_EXTENT_STOSB,
	CM_EXTENT_STOSQ,
	CM_CLZERO,
	CM_MOVNTI,
	CM_SSE2,
	CM_AVX2,
	CM_AVX512,
	NR_CLEAR_METHODS
};

enum clear_kind {
	CK_PER_PAGE,		/* 6.12's clear_page(): 4 KB per call */
	CK_CACHED_EXTENT,	/* one call per extent, cached stores */
	CK_STREAMING,		/* weakly ordered: SFENCE per extent */
	NR_CLEAR_KINDS
};

/*
 * A clearing method: its name, the CPU feature it needs, its kind, what
 * its core needs (a start aligned to align, a length that is a multiple
 * of unit), and its stores: clear() zeroes [dst, dst + len), or, for the
 * memmap lab's streaming stores, stream() writes zero lines.
 */
struct clear_method_row {
	const char *name;		/* first, for find_row() */
	enum cpu_feature needs;
	enum clear_kind kind;
	size_t align, unit;
	void (*clear)(unsigned char *dst, size_t len);
	stream_fn *stream;
};

extern const struct clear_method_row clear_methods[NR_CLEAR_METHODS];
/* The method of that name, or -1. */
int clear_method_find(const char *name);
bool clear_method_supported(enum clear_method m, const struct cpu_features *f);
/* 6.12's methods zero one 4 KB page per call whatever the extent. */
bool clear_method_per_page(enum clear_method m);
/* Weakly ordered: the lines bypass (or leave) the cache. */
bool clear_method_streams(enum clear_method m);
/* "\"clear_methods\": [...]": every row, and whether this CPU runs it. */
void print_clear_methods_json(const struct cpu_features *f);

/*
 * Zero [dst, dst + len) with m, one call per extent bytes (the last one
 * shorter), fencing after each extent where m is weakly ordered.  Any
 * alignment and length: where m needs an aligned start or whole lines or
 * pages, the partial head and tail are zeroed with REP STOSB, as a kernel
 * would zero a partial range.
 */
void clear_extents(enum clear_method m, unsigned char *dst, size_t len,
		   size_t extent);

/*
 * Zero a huge page of len bytes that faulted at byte fault the way
 * upstream's folio_zero_user() orders it: the parts farther than radius
 * pages from the faulting page with m first, then that neighbourhood
 * with the cached extent clear, so it is the part left in cache.
 */
void clear_neighbourhood_last(enum clear_method m,
			      const struct cpu_features *f, unsigned char *dst,
			      size_t len, size_t fault, size_t radius);

#endif
