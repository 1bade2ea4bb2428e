// SPDX-License-Identifier: GPL-2.0
#include "memmap.h"
#include "util.h"

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct geometry geometries[] = {
	{ "order0", 0, false },		/* fsdax, DEVICE_PRIVATE */
	{ "2M", 9, false },		/* devdax map=dev (altmap: no reuse) */
	{ "2M-reuse", 9, true },	/* devdax map=mem */
	{ "1G", 18, false },
	{ "1G-reuse", 18, true },
};
const size_t nr_geometries = sizeof(geometries) / sizeof(geometries[0]);

const struct geometry *geometry_find(const char *name)
{
	int i = find_row(geometries, nr_geometries, sizeof(geometries[0]),
			 name);

	return i < 0 ? NULL : &geometries[i];
}

static size_t compound_pages(const struct geometry *g)
{
	return (size_t)1 << g->order;
}

size_t geometry_written(const struct geometry *g, size_t nr_pfns)
{
	if (!g->reuse)
		return nr_pfns;
	return nr_pfns / compound_pages(g) * REUSE_PAGES;
}

/* Where the struct page of pfn lives in the lab's memmap buffer. */
static unsigned char *page_at(const struct geometry *g, unsigned char *memmap,
			      size_t size, size_t pfn)
{
	size_t n = compound_pages(g);

	if (!g->reuse)
		return memmap + pfn * size;
	return memmap + (pfn / n * REUSE_PAGES + pfn % n) * size;
}

/* ---- cached stores ---------------------------------------------------- */

/*
 * The slow path's stores for one page (__init_single_page() then
 * __init_zone_device_page()): zero the page, read-modify-write the flags
 * twice (set_page_links(), __SetPageReserved()), point the list head at
 * itself, then store pgmap, zone_device_data, the counts and the rest.
 * The result is the image; the work is the kernel's.
 */
static void slow_page(unsigned char *dst, const unsigned char *image,
		      size_t size, size_t head_ptr_off, uintptr_t head_ptr)
{
	volatile uint64_t *w = (volatile uint64_t *)dst;
	const uint64_t *img = (const uint64_t *)image;
	const uint64_t links_mask = ~(uint64_t)0 << 40; /* node/zone bits */
	size_t words = size / 8;

	for (size_t i = 0; i < words; i++)
		w[i] = 0;
	w[0] = (w[0] & ~links_mask) | (img[0] & links_mask);
	w[0] = w[0] | (img[0] & ~links_mask);
	w[1] = (uintptr_t)&w[1];
	w[2] = (uintptr_t)&w[1];
	w[1] = img[1];
	w[2] = img[2];
	for (size_t i = 3; i < words; i++)
		if (img[i])
			w[i] = img[i];
	if (head_ptr)
		w[head_ptr_off / 8] = head_ptr;
}

static void copy_u64(unsigned char *dst, size_t nr,
		     const unsigned char *template, size_t size)
{
	const uint64_t *t = (const uint64_t *)template;

	for (size_t i = 0; i < nr; i++) {
		uint64_t *d = (uint64_t *)(dst + i * size);

		for (size_t k = 0; k < size / 8; k++)
			d[k] = t[k];
	}
}

static void copy_memcpy(unsigned char *dst, size_t nr,
			const unsigned char *template, size_t size)
{
	for (size_t i = 0; i < nr; i++)
		memcpy(dst + i * size, template, size);
}

/*
 * The kernel's cached template copies, unrolled as the compiler unrolls a
 * struct page assignment.  Before patch 7 the kernel copied from the
 * template itself, which a store to the destination may alias, so every
 * word is read again for every page (reload); patch 7 copies from a
 * local, which stays in registers: one store per word and no load.
 * template-u64 is the same reload as a loop over the words.  words is a
 * constant at every call, so the loop over it unrolls.
 */
#define MAX_UNROLLED_WORDS	10	/* an 80-byte struct page */

/* Words of a struct page the unrolled copies handle, 0 for other sizes. */
static size_t unrolled_words(size_t size)
{
	/* 56 to 80 bytes: the struct page of 64-bit configurations. */
	if (size % 8 || size < 56 || size > MAX_UNROLLED_WORDS * 8)
		return 0;
	return size / 8;
}

static inline __attribute__((always_inline)) void
fill_unrolled(unsigned char *dst, size_t nr, const unsigned char *template,
	      const size_t words, bool reload)
{
	const uint64_t *t = (const uint64_t *)template;
	uint64_t w[MAX_UNROLLED_WORDS];

	if (!reload)
		memcpy(w, template, words * sizeof(w[0]));
	for (size_t i = 0; i < nr; i++) {
		uint64_t *d = (uint64_t *)(dst + i * words * sizeof(w[0]));

#pragma GCC unroll 10	/* MAX_UNROLLED_WORDS */
		for (size_t k = 0; k < words; k++)
			d[k] = reload ? t[k] : w[k];
	}
}

static inline __attribute__((always_inline)) void
fill_unrolled_sized(unsigned char *dst, size_t nr,
		    const unsigned char *template, size_t size, bool reload)
{
	switch (unrolled_words(size)) {
	case 7:
		fill_unrolled(dst, nr, template, 7, reload);
		break;
	case 8:
		fill_unrolled(dst, nr, template, 8, reload);
		break;
	case 9:
		fill_unrolled(dst, nr, template, 9, reload);
		break;
	case 10:
		fill_unrolled(dst, nr, template, 10, reload);
		break;
	default:
		/* strategy_fits() keeps other sizes away. */
		die("no unrolled copy of a %zu-byte struct page", size);
	}
}

/* Two functions, so that neither copy loop tests reload. */
static void copy_reload(unsigned char *dst, size_t nr,
			const unsigned char *template, size_t size)
{
	fill_unrolled_sized(dst, nr, template, size, true);
}

static void copy_regs(unsigned char *dst, size_t nr,
		      const unsigned char *template, size_t size)
{
	fill_unrolled_sized(dst, nr, template, size, false);
}

static bool unrolled_fits(size_t size)
{
	return unrolled_words(size);
}

/* ---- streaming stores of one 64-byte line ----------------------------- */

static void line_movnti(unsigned char *dst, const unsigned char *src)
{
	const long long *s = (const long long *)src;
	long long *d = (long long *)dst;

	for (int i = 0; i < LINE / 8; i++)
		_mm_stream_si64(d + i, s[i]);
}

static void line_sse2(unsigned char *dst, const unsigned char *src)
{
	for (int i = 0; i < LINE; i += 16)
		_mm_stream_si128((__m128i *)(dst + i),
				 _mm_loadu_si128((const __m128i *)(src + i)));
}

__attribute__((target("avx2")))
static void line_avx2(unsigned char *dst, const unsigned char *src)
{
	for (int i = 0; i < LINE; i += 32)
		_mm256_stream_si256((__m256i *)(dst + i),
				    _mm256_loadu_si256((const __m256i *)(src + i)));
}

__attribute__((target("avx512f")))
static void line_avx512(unsigned char *dst, const unsigned char *src)
{
	_mm512_stream_si512((void *)dst, _mm512_loadu_si512(src));
}

__attribute__((target("movdir64b")))
static void line_movdir64b(unsigned char *dst, const unsigned char *src)
{
	_movdir64b(dst, src);
}

/*
 * The hot loops are specialised per method so that the compiler inlines
 * the line store: a call per line would be measured, not the stores.
 * specs: the storage class (static where clear.c does not stream with
 * it) and the target the line store needs.
 */
#define DEFINE_STREAM_LOOP(name, line, specs)				\
specs void stream_##name(unsigned char *dst, const unsigned char *pattern, \
			size_t lines, size_t period)			\
{									\
	size_t phase = 0;						\
	for (size_t i = 0; i < lines; i++) {				\
		line(dst + i * LINE, pattern + phase * LINE);		\
		if (++phase == period)					\
			phase = 0;					\
	}								\
}

DEFINE_STREAM_LOOP(movnti, line_movnti, )
DEFINE_STREAM_LOOP(sse2, line_sse2, )
DEFINE_STREAM_LOOP(avx2, line_avx2, __attribute__((target("avx2"))))
DEFINE_STREAM_LOOP(avx512, line_avx512, __attribute__((target("avx512f"))))
DEFINE_STREAM_LOOP(movdir64b, line_movdir64b,
		   static __attribute__((target("movdir64b"))))

/* ---- the strategies ---------------------------------------------------- */

const struct strategy strategies[] = {
	/* A replica of the slow path's stores, for every page. */
	{ "slow", CPU_NONE, .copy = NULL, .stream = NULL },
	/* Cached u64 copies, a loop over the words. */
	{ "template-u64", CPU_NONE, .copy = copy_u64 },
	/* Cached memcpy() per page. */
	{ "template-memcpy", CPU_NONE, .copy = copy_memcpy },
	/* Unrolled u64 copies (the kernel before patch 7). */
	{ "template-reload", CPU_NONE, .copy = copy_reload,
	  .fits = unrolled_fits },
	/* Unrolled u64 stores from registers (patch 7). */
	{ "template-regs", CPU_NONE, .copy = copy_regs, .fits = unrolled_fits },
	/* 8-byte streaming stores (the seeds' method). */
	{ "movnti", CPU_SSE2, .stream = stream_movnti },
	/* 4 x 16-byte MOVNTDQ per line. */
	{ "sse2-movntdq", CPU_SSE2, .stream = stream_sse2 },
	/* 2 x 32-byte VMOVNTDQ per line. */
	{ "avx2-vmovntdq", CPU_AVX2, .stream = stream_avx2 },
	/* 1 x 64-byte VMOVNTDQ per line. */
	{ "avx512-vmovntdq", CPU_AVX512F, .stream = stream_avx512 },
	/* 64-byte direct store. */
	{ "movdir64b", CPU_MOVDIR64B, .stream = stream_movdir64b },
};
const size_t nr_strategies = sizeof(strategies) / sizeof(strategies[0]);

const struct strategy *strategy_find(const char *name)
{
	int i = find_row(strategies, nr_strategies, sizeof(strategies[0]),
			 name);

	return i < 0 ? NULL : &strategies[i];
}

bool strategy_supported(const struct strategy *s, const struct cpu_features *f)
{
	return cpu_has(f, s->needs);
}

bool strategy_fits(const struct strategy *s, size_t size)
{
	return !s->fits || s->fits(size);
}

bool strategy_streams(const struct strategy *s)
{
	return s->stream != NULL;
}

void print_strategies_json(const struct cpu_features *f)
{
	printf("\"strategies\": [");
	for (size_t i = 0; i < nr_strategies; i++) {
		printf("%s", i ? ", " : "");
		print_store_row_json(strategies[i].name,
				     strategy_streams(&strategies[i]) ?
				     "streaming" : "cached",
				     strategies[i].needs, f);
	}
	putchar(']');
}

static size_t gcd(size_t a, size_t b)
{
	while (b) {
		size_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/*
 * Fill nr struct pages at dst with copies of template.  Streaming stores
 * write whole lines, so a struct page size other than 64 bytes streams a
 * repeating pattern of lcm(size, 64) bytes; the partial lines at either
 * end are written with cached stores, as a kernel would have to.
 */
static void fill_pages(const struct strategy *s, unsigned char *dst,
		       size_t nr, const unsigned char *template, size_t size)
{
	/* lcm(size, 64) <= size * 64 / 8: size is a multiple of 8. */
	unsigned char pattern[MAX_PAGE_SIZE * LINE / 8];
	unsigned char *end = dst + nr * size, *first, *last;
	size_t period, lines;

	if (!nr)
		return;
	if (s->copy) {
		s->copy(dst, nr, template, size);
		return;
	}

	first = (unsigned char *)(((uintptr_t)dst + LINE - 1) & ~(uintptr_t)(LINE - 1));
	last = (unsigned char *)((uintptr_t)end & ~(uintptr_t)(LINE - 1));
	if (first >= last) {
		for (unsigned char *p = dst; p < end; p++)
			*p = template[(size_t)(p - dst) % size];
		return;
	}
	for (unsigned char *p = dst; p < first; p++)
		*p = template[(size_t)(p - dst) % size];
	period = size / gcd(size, LINE);	/* lines per repeat */
	for (size_t i = 0; i < period * LINE; i++)
		pattern[i] = template[((size_t)(first - dst) + i) % size];
	lines = (size_t)(last - first) / LINE;
	s->stream(first, pattern, lines, period);
	/* No fence here: memmap_write() fences once, at its end. */
	for (unsigned char *p = last; p < end; p++)
		*p = template[(size_t)(p - dst) % size];
}

static void set_pageblocks(unsigned char *pageblocks, size_t first_pfn,
			   size_t nr_pfns)
{
	size_t pfn = (first_pfn + PAGEBLOCK_PAGES - 1) / PAGEBLOCK_PAGES *
		     PAGEBLOCK_PAGES;

	for (; pfn < first_pfn + nr_pfns; pfn += PAGEBLOCK_PAGES)
		pageblocks[pfn / PAGEBLOCK_PAGES] = MIGRATE_MOVABLE_BYTE;
}

void memmap_write(const struct strategy *s, const struct images *img,
		  const struct geometry *g, unsigned char *memmap,
		  unsigned char *pageblocks, size_t first_pfn, size_t nr_pfns)
{
	size_t size = img->size, n = compound_pages(g);
	bool slow_path_only = !s->copy && !s->stream;

	if (!nr_pfns)
		return;
	if (g->order == 0) {
		unsigned char *template = page_at(g, memmap, size, first_pfn);

		if (slow_path_only) {
			for (size_t i = 0; i < nr_pfns; i++)
				slow_page(template + i * size, img->order0,
					  size, 0, 0);
		} else {
			slow_page(template, img->order0, size, 0, 0);
			fill_pages(s, template + size, nr_pfns - 1, template,
				   size);
		}
	} else {
		size_t written = g->reuse ? REUSE_PAGES : n;

		for (size_t head = first_pfn; head < first_pfn + nr_pfns;
		     head += n) {
			unsigned char *h = page_at(g, memmap, size, head);
			uintptr_t ptr = (uintptr_t)h | 1;
			/* Tails 1 and 2 always take the slow path. */
			size_t slow_end = slow_path_only ? written : 3;

			slow_page(h, img->head, size, 0, 0);
			for (size_t j = 1; j < slow_end; j++)
				slow_page(h + j * size,
					  j == 1 ? img->tail1[tail1_index(g->order)]
						 : img->tail,
					  size, img->head_ptr_off, ptr);
			fill_pages(s, h + slow_end * size, written - slow_end,
				   h + 2 * size, size);
		}
	}
	/*
	 * Order the streaming stores once per call, as the kernel's
	 * memmap_init_zone_device() issues one wmb() per thread after its
	 * last chunk: memcpy_nontemporal() does not fence per compound page, and a
	 * fence after each would cost the lab what the kernel does not pay
	 * (with vmemmap tail reuse, one per 8 KiB written).
	 */
	if (strategy_streams(s))
		_mm_sfence();
	set_pageblocks(pageblocks, first_pfn, nr_pfns);
}

void memmap_reference(const struct images *img, const struct geometry *g,
		      unsigned char *memmap, unsigned char *pageblocks,
		      size_t first_pfn, size_t nr_pfns)
{
	size_t size = img->size, n = compound_pages(g);

	for (size_t pfn = first_pfn; pfn < first_pfn + nr_pfns; pfn++) {
		size_t j = pfn % n;
		unsigned char *p = page_at(g, memmap, size, pfn);
		const unsigned char *image;

		if (g->reuse && j >= REUSE_PAGES)
			continue;
		if (g->order == 0)
			image = img->order0;
		else if (j == 0)
			image = img->head;
		else if (j == 1)
			image = img->tail1[tail1_index(g->order)];
		else
			image = img->tail;
		memcpy(p, image, size);
		if (g->order && j) {
			uintptr_t ptr = (uintptr_t)page_at(g, memmap, size,
							   pfn - j) | 1;

			memcpy(p + img->head_ptr_off, &ptr, sizeof(ptr));
		}
	}
	set_pageblocks(pageblocks, first_pfn, nr_pfns);
}

/*
 * The floor streams the order-0 image itself, not zeros: some CPUs write
 * all-zero lines faster than any others (AMD Zen elides the allocation),
 * which would make a floor no memmap can reach.
 */
void floor_fill(const struct strategy *s, unsigned char *dst, size_t len,
		const struct images *img)
{
	unsigned char pattern[MAX_PAGE_SIZE * LINE / 8];
	size_t period = img->size / gcd(img->size, LINE);

	for (size_t i = 0; i < period * LINE; i++)
		pattern[i] = img->order0[i % img->size];
	s->stream(dst, pattern, len / LINE, period);
	_mm_sfence();
}

/* ---- test vectors ----------------------------------------------------- */

static int parse_hex(unsigned char *out, const char *hex, size_t size)
{
	size_t len = strcspn(hex, " \r\n");

	if (len != size * 2)
		return -1;
	for (size_t i = 0; i < size; i++) {
		unsigned int byte;

		if (sscanf(hex + 2 * i, "%2x", &byte) != 1)
			return -1;
		out[i] = (unsigned char)byte;
	}
	return 0;
}

int images_load(struct images *img, const char *path)
{
	char line[2 * MAX_PAGE_SIZE + 64], key[32];
	unsigned int seen = 0;
	FILE *fh = fopen(path, "r");
	int ret = 0;

	if (!fh)
		return -1;
	memset(img, 0, sizeof(*img));
	snprintf(img->source, sizeof(img->source), "%s", path);
	while (!ret && fgets(line, sizeof(line), fh)) {
		char *value;

		if (line[0] == '#' || sscanf(line, "%31s", key) != 1)
			continue;
		value = line + strlen(key);
		while (*value == ' ')
			value++;
		if (!strcmp(key, "struct_page_size")) {
			img->size = strtoul(value, NULL, 10);
			if (img->size < 24 || img->size > MAX_PAGE_SIZE ||
			    img->size % 8)
				ret = -1;
			seen |= 1;
		} else if (!strcmp(key, "head_ptr_offset")) {
			img->head_ptr_off = strtoul(value, NULL, 10);
			seen |= 2;
		} else if (!strcmp(key, "order0")) {
			ret = parse_hex(img->order0, value, img->size);
			seen |= 4;
		} else if (!strcmp(key, "head")) {
			ret = parse_hex(img->head, value, img->size);
			seen |= 8;
		} else if (!strcmp(key, "tail1_2M")) {
			ret = parse_hex(img->tail1[0], value, img->size);
			seen |= 16;
		} else if (!strcmp(key, "tail1_1G")) {
			ret = parse_hex(img->tail1[1], value, img->size);
			seen |= 32;
		} else if (!strcmp(key, "tail")) {
			ret = parse_hex(img->tail, value, img->size);
			seen |= 64;
		}
	}
	fclose(fh);
	if (ret || seen != 127 || img->head_ptr_off + 8 > img->size)
		return -1;
	return 0;
}

/*
 * Another struct page size with the same leading fields: grow by adding
 * words that mimic extra fields, or shrink by dropping trailing words.
 */
void images_resize(struct images *img, size_t size)
{
	unsigned char *all[] = { img->order0, img->head, img->tail1[0],
				 img->tail1[1], img->tail };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		for (size_t b = img->size; b < size; b++)
			all[i][b] = (unsigned char)(0xa5 ^ b ^ i);
	img->size = size;
}
