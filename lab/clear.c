// SPDX-License-Identifier: GPL-2.0
#include "clear.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

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
 * The clearing functions are called through the table, out of line: 6.12's
 * clear_page() is an out-of-line call per 4 KB page, and the per-page
 * methods pay the same call and restart per page here.
 */
static void zero_stosb(unsigned char *dst, size_t len)
{
	rep_stosb(dst, len);
}

static void zero_stosq(unsigned char *dst, size_t len)
{
	rep_stosq(dst, len / 8);
}

/* clear_page_orig's shape: eight 8-byte stores of a zeroed register per line. */
static void zero_movq(unsigned char *dst, size_t len)
{
	size_t lines = len / LINE;

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
			 : "+r"(dst), "+r"(lines) : "a"(0UL) : "memory");
}

__attribute__((target("clzero")))
static void zero_clzero(unsigned char *dst, size_t len)
{
	for (size_t i = 0; i < len / LINE; i++)
		_mm_clzero(dst + i * LINE);
}

/*
 * Quadword stores want 8-byte alignment; CLZERO zeroes the whole line
 * holding its address and the streaming forms write whole lines, so they
 * want lines.  The kernel picks REP STOSB only with ERMS (its
 * alternatives do so).
 */
const struct clear_method_row clear_methods[NR_CLEAR_METHODS] = {
	/* 6.12 clear_page_erms, clear_page_rep and clear_page_orig. */
	[CM_PAGE_STOSB] = { "page-stosb", CPU_ERMS, CK_PER_PAGE, 1, PAGE_4K,
			    .clear = zero_stosb },
	[CM_PAGE_STOSQ] = { "page-stosq", CPU_NONE, CK_PER_PAGE, 8, PAGE_4K,
			    .clear = zero_stosq },
	[CM_PAGE_MOVQ] = { "page-movq", CPU_NONE, CK_PER_PAGE, 8, PAGE_4K,
			   .clear = zero_movq },
	/* Upstream clear_pages() with ERMS, and with REP_GOOD only. */
	[CM_EXTENT_STOSB] = { "extent-stosb", CPU_ERMS, CK_CACHED_EXTENT, 1, 1,
			      .clear = zero_stosb },
	[CM_EXTENT_STOSQ] = { "extent-stosq", CPU_NONE, CK_CACHED_EXTENT, 8, 8,
			      .clear = zero_stosq },
	/* AMD CLZERO per line. */
	[CM_CLZERO] = { "clzero", CPU_CLZERO, CK_STREAMING, LINE, LINE,
			.clear = zero_clzero },
	/* The memmap lab's streaming stores (memmap.c) of zero lines. */
	[CM_MOVNTI] = { "movnti", CPU_SSE2, CK_STREAMING, LINE, LINE,
			.stream = stream_movnti },
	[CM_SSE2] = { "sse2-movntdq", CPU_SSE2, CK_STREAMING, LINE, LINE,
		      .stream = stream_sse2 },
	[CM_AVX2] = { "avx2-vmovntdq", CPU_AVX2, CK_STREAMING, LINE, LINE,
		      .stream = stream_avx2 },
	[CM_AVX512] = { "avx512-vmovntdq", CPU_AVX512F, CK_STREAMING, LINE,
			LINE, .stream = stream_avx512 },
};

static const char *const clear_kind_names[NR_CLEAR_KINDS] = {
	[CK_PER_PAGE] = "per-page",
	[CK_CACHED_EXTENT] = "cached-extent",
	[CK_STREAMING] = "streaming",
};

int clear_method_find(const char *name)
{
	return find_row(clear_methods, NR_CLEAR_METHODS,
			sizeof(clear_methods[0]), name);
}

bool clear_method_supported(enum clear_method m, const struct cpu_features *f)
{
	return cpu_has(f, clear_methods[m].needs);
}

bool clear_method_per_page(enum clear_method m)
{
	return clear_methods[m].kind == CK_PER_PAGE;
}

bool clear_method_streams(enum clear_method m)
{
	return clear_methods[m].kind == CK_STREAMING;
}

void print_clear_methods_json(const struct cpu_features *f)
{
	printf("\"clear_methods\": [");
	for (int m = 0; m < NR_CLEAR_METHODS; m++) {
		printf("%s", m ? ", " : "");
		print_store_row_json(clear_methods[m].name,
				     clear_kind_names[clear_methods[m].kind],
				     clear_methods[m].needs, f);
	}
	putchar(']');
}

/* dst aligned and len a multiple of the method's unit. */
static void clear_core(enum clear_method m, unsigned char *dst, size_t len)
{
	static const unsigned char zero_line[LINE] __attribute__((aligned(LINE)));
	const struct clear_method_row *row = &clear_methods[m];

	if (row->stream)
		row->stream(dst, zero_line, len / LINE, 1);
	else if (row->kind == CK_PER_PAGE)
		for (size_t off = 0; off < len; off += PAGE_4K)
			row->clear(dst + off, PAGE_4K);
	else
		row->clear(dst, len);
}

static void clear_span(enum clear_method m, unsigned char *dst, size_t len)
{
	size_t align = clear_methods[m].align, unit = clear_methods[m].unit;
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
	enum clear_method cached = cpu_has(f, CPU_ERMS) ? CM_EXTENT_STOSB :
							    CM_EXTENT_STOSQ;

	if (hi > len)
		hi = len;
	clear_extents(m, dst + hi, len - hi, len);
	clear_extents(m, dst, lo, len);
	clear_extents(cached, dst + lo, hi - lo, len);
}
