// SPDX-License-Identifier: GPL-2.0
/*
 * zdlab clear: zero huge pages natively the ways a kernel can.
 *
 *   zdlab clear verify
 *   zdlab clear bench [--extents E,..] [--region B] [--states cold,hot]
 *         [--backings B,..] [--methods M,..|all] [--reps N]
 *   zdlab clear fault [--methods M,..|all] [--touch N,..] [--backings B]
 *         [--pool N] [--radius P] [--reps N]
 *
 * bench zeroes a region of --region bytes as back-to-back extents, like a
 * process faulting in memory one huge page after another; fault zeroes one
 * 2 MB page and then reads or writes its first N bytes, the cost a fault
 * leaves to the code that took it.  Zeroing is the workload here, so any
 * shortcut a CPU takes for all-zero lines is part of what is measured
 * (unlike the memmap floor, which streams real struct page bytes).
 *
 * A cold destination is flushed line by line (flush_range()): that is
 * exact whatever the L3's replacement policy, and the dirty lines a cached
 * method left behind are written back before the clock starts.  Evicting
 * by touching another buffer would leave both to chance, and read more.
 * Timings are wall clock and the thread's CPU time, which stops while a
 * shared machine runs someone else.
 */
#define _GNU_SOURCE
#include "clearcmd.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "buffer.h"
#include "clear.h"
#include "util.h"

#define MAX_REPS	1001
/*
 * Where upstream's folio_zero_user() draws the faulting page's
 * neighbourhood: FOLIO_ZERO_LOCALITY_RADIUS pages either side.
 */
#define DEFAULT_RADIUS	2
/* The last page index a radius can reach from page 0 of a 2 MB page. */
#define MAX_RADIUS	(HUGE_2M / PAGE_4K - 1)

enum clear_state { CS_COLD, CS_HOT, NR_CLEAR_STATES };
static const char *const clear_state_names[NR_CLEAR_STATES] = { "cold", "hot" };

enum access { AC_READ, AC_WRITE, NR_ACCESSES };
static const char *const access_names[NR_ACCESSES] = { "read", "write" };

enum order { OR_PLAIN, OR_NEIGHBOURHOOD, NR_ORDERS };
static const char *const order_names[NR_ORDERS] = {
	"plain", "neighbourhood-last",
};

static const struct cpu_features *cpu;

/* ---- verify ------------------------------------------------------------ */

#define GUARD	4096

/* Never zero, and different at neighbouring offsets. */
static unsigned char pattern_at(size_t i)
{
	return (unsigned char)(i * 151 + 7) | 1;
}

/*
 * Clear [GUARD + off, GUARD + off + len) of a patterned buffer by running
 * clear(), then check that exactly those bytes are zero.
 */
static bool check_range(unsigned char *buf, size_t off, size_t len,
			const char *what)
{
	size_t lo = GUARD + off, hi = lo + len, end = hi + GUARD;

	for (size_t i = 0; i < end; i++) {
		unsigned char want = i >= lo && i < hi ? 0 : pattern_at(i);

		if (buf[i] != want) {
			fprintf(stderr, "FAIL %s off=%zu len=%zu: byte %zd from "
				"the start is %#x, want %#x\n", what, off, len,
				(ssize_t)i - (ssize_t)lo, buf[i], want);
			return false;
		}
	}
	return true;
}

static void fill_pattern(unsigned char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern_at(i);
}

/*
 * Every supported method, odd offsets, lengths and extents (the kernel's
 * page-aligned case among them), and the neighbourhood order around
 * faults at the start, middle and end of a 2 MB page.
 */
static int clear_verify(void)
{
	static const size_t offsets[] = { 0, 1, 7, 8, 63, 64, 4095, 4096 + 24 };
	static const size_t lengths[] = {
		1, 7, 63, 64, 65, 127, 4095, 4096, 4097, 3 * 4096 + 5,
		64 * 1024 + 200, HUGE_2M, HUGE_2M + 3 * 4096 + 17,
	};
	static const size_t extents[] = { 64, 4096, 5000, HUGE_2M };
	static const size_t faults[] = { 0, 7 * 4096 + 5, HUGE_2M - 1 };
	size_t max = GUARD + 2 * 4096 + HUGE_2M + 4 * 4096 + GUARD;
	unsigned char *buf = aligned_alloc(4096, max);
	int passed = 0, failed = 0;
	char what[96];

	if (!buf)
		die("out of memory");
	printf("methods:");
	for (int m = 0; m < NR_CLEAR_METHODS; m++)
		if (clear_method_supported(m, cpu))
			printf(" %s", clear_methods[m].name);
	printf("\n");
	for (int m = 0; m < NR_CLEAR_METHODS; m++) {
		if (!clear_method_supported(m, cpu))
			continue;
		for (size_t oi = 0; oi < sizeof(offsets) / sizeof(*offsets); oi++)
			for (size_t li = 0; li < sizeof(lengths) / sizeof(*lengths); li++)
				for (size_t ei = 0; ei < sizeof(extents) / sizeof(*extents); ei++) {
					size_t off = offsets[oi], len = lengths[li];

					fill_pattern(buf, GUARD + off + len + GUARD);
					clear_extents(m, buf + GUARD + off, len,
						      extents[ei]);
					snprintf(what, sizeof(what), "%s extent=%zu",
						 clear_methods[m].name, extents[ei]);
					check_range(buf, off, len, what) ?
						passed++ : failed++;
				}
		for (size_t fi = 0; fi < sizeof(faults) / sizeof(*faults); fi++)
			for (size_t radius = 0; radius <= DEFAULT_RADIUS;
			     radius += DEFAULT_RADIUS) {
				fill_pattern(buf, GUARD + HUGE_2M + GUARD);
				clear_neighbourhood_last(m, cpu, buf + GUARD, HUGE_2M,
							 faults[fi], radius);
				snprintf(what, sizeof(what),
					 "%s neighbourhood fault=%zu radius=%zu",
					 clear_methods[m].name, faults[fi], radius);
				check_range(buf, 0, HUGE_2M, what) ?
					passed++ : failed++;
			}
	}
	free(buf);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* ---- options ------------------------------------------------------------ */

struct clear_opts {
	size_t extents[MAX_LIST];
	int nextents;
	size_t region;
	int states[MAX_LIST], nstates;
	int backings[MAX_LIST], nbackings;
	int methods[MAX_LIST], nmethods;
	size_t touch[MAX_LIST];
	int ntouch;
	int pool, radius, reps;
};

static void parse_sizes(char *list, size_t *out, int *n)
{
	char *items[MAX_LIST];

	*n = split(list, items);
	for (int k = 0; k < *n; k++)
		out[k] = parse_size(items[k]);
}

static void parse_names(char *list, int *out, int *n, const char *const *names,
			int nr, const char *what)
{
	char *items[MAX_LIST];

	*n = split(list, items);
	for (int k = 0; k < *n; k++)
		if ((out[k] = find_name(names, nr, items[k])) < 0)
			die("unknown %s '%s'", what, items[k]);
}

static void parse_methods(char *list, struct clear_opts *o)
{
	char *items[MAX_LIST];

	o->nmethods = split(list, items);
	for (int k = 0; k < o->nmethods; k++)
		if ((o->methods[k] = clear_method_find(items[k])) < 0)
			die("unknown method '%s'", items[k]);
}

/*
 * Fault pages cycle through a pool twice the size of the last-level cache,
 * so a page was last touched long before it is flushed and zeroed again.
 */
static int default_pool(void)
{
	size_t pages = 2 * ((size_t)cpu->llc_kb << 10) / HUGE_2M;

	return pages < 2 ? 2 : (int)pages;
}

/* Options either command takes; a bench-only one is refused by fault. */
static void parse_clear(int argc, char **argv, bool fault,
			struct clear_opts *o)
{
	*o = (struct clear_opts){
		.extents = { HUGE_2M, 4 * HUGE_2M, 16 * HUGE_2M }, .nextents = 3,
		.region = 32 * HUGE_2M,
		.states = { CS_COLD, CS_HOT }, .nstates = 2,
		.backings = { B_THP }, .nbackings = 1,
		.touch = { 4 << 10, 64 << 10, 256 << 10, 1 << 20, HUGE_2M },
		.ntouch = 5,
		.pool = default_pool(), .radius = DEFAULT_RADIUS,
		.reps = fault ? 21 : 5,
	};
	_Static_assert(NR_CLEAR_METHODS <= MAX_LIST,
		       "--methods all lists every method");
	for (int m = 0; m < NR_CLEAR_METHODS; m++)
		o->methods[o->nmethods++] = m;
	for (int i = 0; i < argc; i += 2) {
		const char *opt = argv[i];
		char *val;
		bool bench_only = !strcmp(opt, "--extents") ||
				  !strcmp(opt, "--region") ||
				  !strcmp(opt, "--states");
		bool fault_only = !strcmp(opt, "--touch") ||
				  !strcmp(opt, "--pool") ||
				  !strcmp(opt, "--radius");

		if (i + 1 >= argc)
			die("%s needs a value", opt);
		val = argv[i + 1];
		if ((bench_only && fault) || (fault_only && !fault))
			die("clear %s takes no %s", fault ? "fault" : "bench", opt);
		if (!strcmp(opt, "--extents")) {
			parse_sizes(val, o->extents, &o->nextents);
		} else if (!strcmp(opt, "--region")) {
			o->region = parse_size(val);
		} else if (!strcmp(opt, "--touch")) {
			parse_sizes(val, o->touch, &o->ntouch);
		} else if (!strcmp(opt, "--states")) {
			parse_names(val, o->states, &o->nstates,
				    clear_state_names, NR_CLEAR_STATES, "state");
		} else if (!strcmp(opt, "--backings")) {
			parse_names(val, o->backings, &o->nbackings,
				    backing_names, NR_BACKINGS, "backing");
		} else if (!strcmp(opt, "--methods")) {
			if (!strcmp(val, "all"))
				continue;
			parse_methods(val, o);
		} else if (!strcmp(opt, "--pool")) {
			/* Up to 8 GB of 2 MB pages: a bound, not a need. */
			o->pool = parse_int(val, 1, 4096, "--pool");
		} else if (!strcmp(opt, "--radius")) {
			o->radius = parse_int(val, 0, MAX_RADIUS, "--radius");
		} else if (!strcmp(opt, "--reps")) {
			o->reps = parse_int(val, 1, MAX_REPS, "--reps");
		} else {
			die("unknown option '%s'", opt);
		}
	}
	for (int k = 0; k < o->nextents; k++)
		if (o->extents[k] > o->region || o->region % o->extents[k])
			die("extent %zu does not divide --region %zu",
			    o->extents[k], o->region);
	for (int k = 0; k < o->ntouch; k++)
		if (o->touch[k] > HUGE_2M || o->touch[k] % LINE)
			die("--touch %zu is not whole lines of the 2 MB page",
			    o->touch[k]);
}

/* ---- bench -------------------------------------------------------------- */

/* "Just written": cached 8-byte stores of a non-zero pattern. */
static void write_pattern(unsigned char *p, size_t len)
{
	uint64_t *w = (uint64_t *)p;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = 0x5a5a5a5a5a5a5a5aULL;
}

static void prepare(enum clear_state st, unsigned char *p, size_t len)
{
	if (st == CS_COLD)
		flush_range(cpu, p, len);
	else
		write_pattern(p, len);
}

/* Wall-clock samples and their summary, then the CPU-time median. */
static void print_summary(const double *ns, const double *cpu_time, int reps,
			  size_t bytes)
{
	double wall[MAX_REPS], cpu[MAX_REPS], med, cpu_med;

	memcpy(wall, ns, sizeof(*ns) * reps);
	memcpy(cpu, cpu_time, sizeof(*cpu_time) * reps);
	med = median_of(wall, reps);
	cpu_med = median_of(cpu, reps);
	print_samples(ns, reps);
	printf(", \"median_ns\": %.0f, \"min_ns\": %.0f, \"max_ns\": %.0f, "
	       "\"gb_per_s\": %.3f, \"gb_per_s_min\": %.3f, "
	       "\"gb_per_s_max\": %.3f, \"cpu_median_ns\": %.0f, "
	       "\"cpu_gb_per_s\": %.3f",
	       med, wall[0], wall[reps - 1], bytes / med,
	       bytes / wall[reps - 1], bytes / wall[0], cpu_med,
	       bytes / cpu_med);
}

static const char *sep(bool *first)
{
	const char *s = *first ? "" : ",";

	*first = false;
	return s;
}

/* A method at an extent, and its samples. */
struct bench_cell {
	enum clear_method m;
	size_t extent;
	double ns[MAX_REPS], cpu[MAX_REPS];
};

/* 6.12's methods clear 4 KB per call: one cell each, whatever the extents. */
static int bench_cells(const struct clear_opts *o, struct bench_cell *cells)
{
	int n = 0;

	for (int k = 0; k < o->nmethods; k++)
		if (clear_method_per_page(o->methods[k]))
			cells[n++] = (struct bench_cell){ .m = o->methods[k],
							  .extent = PAGE_4K };
	for (int e = 0; e < o->nextents; e++)
		for (int k = 0; k < o->nmethods; k++)
			if (!clear_method_per_page(o->methods[k]))
				cells[n++] = (struct bench_cell){
					.m = o->methods[k], .extent = o->extents[e] };
	return n;
}

/*
 * Every cell once per round, a warm-up round first: on a busy machine a
 * neighbour's burst then slows one repetition of every method rather than
 * every repetition of one.
 */
static void bench_state(enum clear_state st, struct bench_cell *cells, int n,
			unsigned char *buf, const struct clear_opts *o)
{
	for (int r = -1; r < o->reps; r++)
		for (int c = 0; c < n; c++) {
			double t0, c0;

			if (!clear_method_supported(cells[c].m, cpu))
				continue;
			prepare(st, buf, o->region);
			c0 = cpu_ns();
			t0 = now_ns();
			clear_extents(cells[c].m, buf, o->region, cells[c].extent);
			if (r >= 0) {
				cells[c].ns[r] = now_ns() - t0;
				cells[c].cpu[r] = cpu_ns() - c0;
			}
		}
}

static void clear_bench(const struct clear_opts *o)
{
	struct bench_cell *cells = calloc(MAX_LIST * (MAX_LIST + 1),
					  sizeof(*cells));
	int n = bench_cells(o, cells);
	bool first = true;

	if (!cells)
		die("out of memory");
	putchar('{');
	print_cpu_json(cpu);
	printf(", ");
	print_clear_methods_json(cpu);
	printf(", \"command\": \"clear bench\", \"reps\": %d, \"runs\": [\n",
	       o->reps);
	for (int bi = 0; bi < o->nbackings; bi++) {
		enum backing b = o->backings[bi];
		char why[160];
		unsigned char *buf = map_buffer(b, o->region, why, sizeof(why));
		size_t thp;

		if (!buf) {
			printf("%s{\"backing\": \"%s\", \"region_bytes\": %zu, "
			       "\"unavailable\": true, \"why\": \"%s\"}\n",
			       sep(&first), backing_names[b], o->region, why);
			continue;
		}
		thp = b == B_THP ? thp_bytes(buf, o->region) : 0;
		for (int si = 0; si < o->nstates; si++) {
			bench_state(o->states[si], cells, n, buf, o);
			for (int c = 0; c < n; c++) {
				printf("%s{\"backing\": \"%s\", \"state\": \"%s\", "
				       "\"method\": \"%s\", \"extent_bytes\": %zu, "
				       "\"region_bytes\": %zu, ", sep(&first),
				       backing_names[b],
				       clear_state_names[o->states[si]],
				       clear_methods[cells[c].m].name,
				       cells[c].extent, o->region);
				if (b == B_THP)
					printf("\"thp_bytes\": %zu, ", thp);
				if (clear_method_supported(cells[c].m, cpu))
					print_summary(cells[c].ns, cells[c].cpu, o->reps,
						      o->region);
				else
					printf("\"unsupported\": true");
				printf("}\n");
			}
			fflush(stdout);
		}
		unmap_buffer(b, buf, o->region);
	}
	printf("]}\n");
	free(cells);
}

/* ---- fault -------------------------------------------------------------- */

static volatile int sink;

/*
 * The faulting code's first use of the page: SSE2 (every x86-64 has it)
 * loads or stores, four 16-byte accesses per line, so the loop runs at
 * the speed of wherever the lines are, not of a scalar add chain.
 */
static void touch(enum access a, unsigned char *p, size_t len)
{
	__m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
	const __m128i data = _mm_set1_epi8(0x5a);

	if (a == AC_WRITE) {
		for (size_t off = 0; off < len; off += LINE) {
			_mm_store_si128((__m128i *)(p + off), data);
			_mm_store_si128((__m128i *)(p + off + 16), data);
			_mm_store_si128((__m128i *)(p + off + 32), data);
			_mm_store_si128((__m128i *)(p + off + 48), data);
		}
		return;
	}
	for (size_t off = 0; off < len; off += LINE) {
		a0 = _mm_or_si128(a0, _mm_load_si128((__m128i *)(p + off)));
		a1 = _mm_or_si128(a1, _mm_load_si128((__m128i *)(p + off + 16)));
		a2 = _mm_or_si128(a2, _mm_load_si128((__m128i *)(p + off + 32)));
		a3 = _mm_or_si128(a3, _mm_load_si128((__m128i *)(p + off + 48)));
	}
	sink = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(a0, a1),
					      _mm_or_si128(a2, a3)));
}

static void zero_page(enum order ord, enum clear_method m, unsigned char *page,
		      int radius)
{
	if (ord == OR_PLAIN)
		clear_extents(m, page, HUGE_2M, HUGE_2M);
	else
		clear_neighbourhood_last(m, cpu, page, HUGE_2M, 0, radius);
}

/* A method, an access and a size touched, and its samples per order. */
struct fault_cell {
	enum clear_method m;
	enum access a;
	size_t n;
	double total[NR_ORDERS][MAX_REPS], cleared[NR_ORDERS][MAX_REPS];
	double total_cpu[NR_ORDERS][MAX_REPS];
};

/*
 * Fault at the page's first byte.  Every cell and both orders once per
 * round, each on the next cold page of the pool, a warm-up round first.
 */
static void fault_rounds(struct fault_cell *cells, int n,
			 const struct clear_opts *o, unsigned char *pool)
{
	size_t next = 0;

	for (int r = -1; r < o->reps; r++)
		for (int c = 0; c < n; c++)
			for (int ord = 0; ord < NR_ORDERS; ord++) {
				unsigned char *page = pool + next++ % o->pool * HUGE_2M;
				double t0, t1, t2, c0;

				flush_range(cpu, page, HUGE_2M);
				c0 = cpu_ns();
				t0 = now_ns();
				zero_page(ord, cells[c].m, page, o->radius);
				t1 = now_ns();
				touch(cells[c].a, page, cells[c].n);
				t2 = now_ns();
				if (r >= 0) {
					cells[c].total[ord][r] = t2 - t0;
					cells[c].cleared[ord][r] = t1 - t0;
					cells[c].total_cpu[ord][r] = cpu_ns() - c0;
				}
			}
}

static void clear_fault(const struct clear_opts *o)
{
	size_t len = (size_t)o->pool * HUGE_2M;
	struct fault_cell *cells = calloc(MAX_LIST * NR_ACCESSES * MAX_LIST,
					  sizeof(*cells));
	enum backing b = o->backings[0];
	bool first = true;
	char why[160];
	unsigned char *pool;
	int n = 0;

	if (o->nbackings != 1)
		die("clear fault takes one backing");
	if (!cells)
		die("out of memory");
	pool = map_buffer(b, len, why, sizeof(why));
	putchar('{');
	print_cpu_json(cpu);
	printf(", ");
	print_clear_methods_json(cpu);
	printf(", \"command\": \"clear fault\", \"backing\": \"%s\", "
	       "\"page_bytes\": %lu, \"reps\": %d, ", backing_names[b], HUGE_2M,
	       o->reps);
	if (!pool) {
		printf("\"unavailable\": true, \"why\": \"%s\", \"runs\": []}\n", why);
		free(cells);
		return;
	}
	printf("\"pool_bytes\": %zu, \"thp_bytes\": %zu, \"runs\": [\n", len,
	       b == B_THP ? thp_bytes(pool, len) : 0);
	for (int k = 0; k < o->nmethods; k++) {
		enum clear_method m = o->methods[k];

		if (!clear_method_supported(m, cpu)) {
			printf("%s{\"method\": \"%s\", \"unsupported\": true}\n",
			       sep(&first), clear_methods[m].name);
			continue;
		}
		for (int a = 0; a < NR_ACCESSES; a++)
			for (int t = 0; t < o->ntouch; t++) {
				cells[n].m = m;
				cells[n].a = a;
				cells[n++].n = o->touch[t];
			}
	}
	fault_rounds(cells, n, o, pool);
	for (int c = 0; c < n; c++)
		for (int ord = 0; ord < NR_ORDERS; ord++) {
			printf("%s{\"method\": \"%s\", \"access\": \"%s\", "
			       "\"touch_bytes\": %zu, \"order\": \"%s\", "
			       "\"radius_pages\": %d, \"clear_median_ns\": %.0f, ",
			       sep(&first), clear_methods[cells[c].m].name,
			       access_names[cells[c].a], cells[c].n, order_names[ord],
			       o->radius, median_of(cells[c].cleared[ord], o->reps));
			print_summary(cells[c].total[ord], cells[c].total_cpu[ord],
				      o->reps, HUGE_2M);
			printf("}\n");
		}
	printf("]}\n");
	unmap_buffer(b, pool, len);
	free(cells);
}

int clear_main(int argc, char **argv, const struct cpu_features *f)
{
	struct clear_opts o;

	cpu = f;
	if (argc >= 1 && !strcmp(argv[0], "verify") && argc == 1)
		return clear_verify();
	if (argc >= 1 && !strcmp(argv[0], "bench")) {
		parse_clear(argc - 1, argv + 1, false, &o);
		clear_bench(&o);
		return 0;
	}
	if (argc >= 1 && !strcmp(argv[0], "fault")) {
		parse_clear(argc - 1, argv + 1, true, &o);
		clear_fault(&o);
		return 0;
	}
	usage(argc >= 1 && wants_help(argv[0]) ? 0 : 2,
	      "clear verify | clear bench [--extents E,..] "
	      "[--region B] [--states cold,hot] [--backings B,..] "
	      "[--methods M,..|all] [--reps N] | clear fault [--methods M,..|all] "
	      "[--touch N,..] [--backings B] [--pool N] [--radius P] [--reps N]");
}
