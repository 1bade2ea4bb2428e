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

#define PAGE_4K		4096

enum clear_method {
	CM_PAGE_STOSB,		/* 6.12 clear_page_erms, per 4 KB */
	CM_PAGE_STOSQ,		/* 6.12 clear_page_rep, per 4 KB */
	CM_PAGE_MOVQ,		/* 6.12 clear_page_orig, per 4 KB */
	CM_EXTENT_STOSB,	/* upstream clear_pages() with ERMS */
	CM_EXTENT_STOSQ,	/* upstream clear_pages() with REP_GOOD only */
	CM_CLZERO,		/* AMD CLZERO per line, SFENCE per extent */
	CM_MOVNTI,		/* streaming stores, SFENCE per extent */
	CM_SSE2,
	CM_AVX2,
	CM_AVX512,
	NR_CLEAR_METHODS
};

extern const char *const clear_method_names[NR_CLEAR_METHODS];
bool clear_method_supported(enum clear_method m, const struct cpu_features *f);
/* 6.12's methods zero one 4 KB page per call whatever the extent. */
bool clear_method_per_page(enum clear_method m);
/* Weakly ordered: the lines bypass (or leave) the cache. */
bool clear_method_streams(enum clear_method m);

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
