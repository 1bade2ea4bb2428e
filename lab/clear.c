// SPDX-License-Identifier: GPL-2.0
#include "clear.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "memmap.h"

const char *const clear_method_names[NR_CLEAR_METHODS] = {
	[CM_PAGE_STOSB] = "page-stosb",
	[CM_PAGE_STOSQ] = "page-stosq",
	[CM_PAGE_MOVQ] = "page-movq",
	[CM_EXTENT_STOSB] = "extent-stosb",
	[CM_EXTENT_STOSQ] = "extent-stosq",
	[CM_CLZERO] = "clzero",
	[CM_MOVNTI] = "movnti",
	[CM_SSE2] = "sse2-movntdq",
	[CM_AVX2] = "avx2-vmovntdq",
	[CM_AVX512] = "avx512-vmovntdq",
};

/*
 * What each method's core needs: a start aligned to align and a length
 * that is a multiple of unit.  Quadword stores want 8-byte alignment;
 * CLZERO zeroes the whole line holding its address and the streaming
 * forms write whole lines, so they want lines.
 */
static const struct {
	size_t align, unit;
	enum strategy strategy;		/* streaming forms: the memmap lab's */
} methods[NR_CLEAR_METHODS] = {
	[CM_PAGE_STOSB] = { 1, PAGE_4K },
	[CM_PAGE_STOSQ] = { 8, PAGE_4K },
	[CM_PAGE_MOVQ] = { 8, PAGE_4K },
	[CM_EXTENT_STOSB] = { 1, 1 },
	[CM_EXTENT_STOSQ] = { 8, 8 },
	[CM_CLZERO] = { LINE, LINE },
	[CM_MOVNTI] = { LINE, LINE, S_MOVNTI },
	[CM_SSE2] = { LINE, LINE, S_SSE2 },
	[CM_AVX2] = { LINE, LINE, S_AVX2 },
	[CM_AVX512] = { LINE, LINE, S_AVX512 },
};

/* The kernel picks REP STOSB only with ERMS (its alternatives do so). */
bool clear_method_supported(enum clear_method m, const struct cpu_features *f)
{
	switch (m) {
	case CM_PAGE_STOSB:
	case CM_EXTENT_STOSB:
		return f->erms;
	case CM_PAGE_STOSQ:
	case CM_PAGE_MOVQ:
	case CM_EXTENT_STOSQ:
		return true;
	case CM_CLZERO:
		return f->clzero;
	default:
		return strategy_supported(methods[m].strategy, f);
	}
}

bool clear_method_per_page(enum clear_method m)
{
	return m <= CM_PAGE_MOVQ;
}

bool clear_method_streams(enum clear_method m)
{
	return m >= CM_CLZERO;
}

static inline void rep_stosb(unsigned char *dst, size_t len)
{
	__asm__ volatile("rep stosb"
			 : "+D"(dst), "+c"(len) : "a"(0) : "memory");
}

static inline void rep_stosq(unsigned char *dst, size_t qwords)
{
	__asm__ volatile("rep stosq"
			 : "+D"(dst), "+c"(qwords) : "a"(0UL) : "memory");
}

/*
 * 6.12's clear_page() is an out-of-line call per 4 KB page: keep these
 * out of line so the lab pays the same call and restart per page.
 */
__attribute__((noinline)) static void page_stosb(unsigned char *page)
{
	rep_stosb(page, PAGE_4K);
}

__attribute__((noinline)) static void page_stosq(unsigned char *page)
{
	rep_stosq(page, PAGE_4K / 8);
}

/* clear_page_orig's shape: eight 8-byte stores of a zeroed register per line. */
__attribute__((noinline)) static void page_movq(unsigned char *page)
{
	size_t lines = PAGE_4K / LINE;

	__asm__ volatile("1:\n\t"
			 "movq %%rax, 0x00(%0)\n\t"
			 "movq %%rax, 0x08(%0)\n\t"
			 "movq %%rax, 0x10(%0)\n\t"
			 "movq %%rax, 0x18(%0)\n\t"
			 "movq %%rax, 0x20(%0)\n\t"
			 "movq %%rax, 0x28(%0)\n\t"
			 "movq %%rax, 0x30(%0)\n\t"
			 "movq %%rax, 0x38(%0)\n\t"
			 "leaq 64(%0), %0\n\t"
			 "decq %1\n\t"
			 "jnz 1b"
			 : "+r"(page), "+r"(lines) : "a"(0UL) : "memory");
}

__attribute__((target("clzero")))
static void clzero_lines(unsigned char *dst, size_t lines)
{
	for (size_t i = 0; i < lines; i++)
		_mm_clzero(dst + i * LINE);
}

/* dst aligned and len a multiple of the method's unit. */
static void clear_core(enum clear_method m, unsigned char *dst, size_t len)
{
	static const unsigned char zero_line[LINE] __attribute__((aligned(LINE)));

	switch (m) {
	case CM_PAGE_STOSB:
		for (size_t off = 0; off < len; off += PAGE_4K)
			page_stosb(dst + off);
		break;
	case CM_PAGE_STOSQ:
		for (size_t off = 0; off < len; off += PAGE_4K)
			page_stosq(dst + off);
		break;
	case CM_PAGE_MOVQ:
		for (size_t off = 0; off < len; off += PAGE_4K)
			page_movq(dst + off);
		break;
	case CM_EXTENT_STOSB:
		rep_stosb(dst, len);
		break;
	case CM_EXTENT_STOSQ:
		rep_stosq(dst, len / 8);
		break;
	case CM_CLZERO:
		clzero_lines(dst, len / LINE);
		break;
	default:
		stream_lines(methods[m].strategy, dst, zero_line, len / LINE, 1);
		break;
	}
}

static void clear_span(enum clear_method m, unsigned char *dst, size_t len)
{
	size_t align = methods[m].align, unit = methods[m].unit;
	size_t head = (size_t)(-(uintptr_t)dst & (align - 1));
	size_t body, tail;

	if (head > len)
		head = len;
	body = (len - head) / unit * unit;
	tail = len - head - body;
	if (head)
		rep_stosb(dst, head);
	if (body) {
#ifdef CLEAR_MUTANT_DELTA
		/*
		 * Test builds only (lab/Makefile's mutant targets): one method
		 * stops a line short or runs a line over, so the tests can
		 * show that 'zdlab clear verify' catches both.
		 */
		if (m == CLEAR_MUTANT_METHOD)
			clear_core(m, dst + head, body + CLEAR_MUTANT_DELTA);
		else
#endif
		clear_core(m, dst + head, body);
	}
	if (tail)
		rep_stosb(dst + head + body, tail);
}

void clear_extents(enum clear_method m, unsigned char *dst, size_t len,
		   size_t extent)
{
	for (size_t off = 0; off < len; off += extent) {
		clear_span(m, dst + off, len - off < extent ? len - off : extent);
		if (clear_method_streams(m))
			_mm_sfence();
	}
}

void clear_neighbourhood_last(enum clear_method m,
			      const struct cpu_features *f, unsigned char *dst,
			      size_t len, size_t fault, size_t radius)
{
	size_t page = fault / PAGE_4K * PAGE_4K;
	size_t lo = page > radius * PAGE_4K ? page - radius * PAGE_4K : 0;
	size_t hi = page + (radius + 1) * PAGE_4K;
	enum clear_method cached = f->erms ? CM_EXTENT_STOSB : CM_EXTENT_STOSQ;

	if (hi > len)
		hi = len;
	clear_extents(m, dst + hi, len - hi, len);
	clear_extents(m, dst, lo, len);
	clear_extents(cached, dst + lo, hi - lo, len);
}
