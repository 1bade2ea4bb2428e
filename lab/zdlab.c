// SPDX-License-Identifier: GPL-2.0
/*
 * zdlab: replay the stores memmap_init_zone_device() makes, natively, with
 * every store strategy this CPU offers, against the streaming floor.
 *
 *   zdlab features	(the CPU, and every strategy and clearing method)
 *   zdlab clear verify|bench|fault ...	(huge-page clearing: clearcmd.c)
 *   zdlab verify VECTORS
 *   zdlab bench VECTORS [--geometry G] [--sizes B,..] [--states S,..]
 *         [--backings B,..] [--strategies S,..|all] [--threads N,..]
 *         [--reps N]
 *
 * Results are JSON on stdout, each with the CPU and the rows of the
 * strategies or clearing methods it ran (as 'features' lists them), so a
 * reader classifies a run by the table it ran with; errors are one line
 * on stderr, exit 2.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buffer.h"
#include "clear.h"
#include "clearcmd.h"
#include "cpu.h"
#include "memmap.h"
#include "util.h"

#define MAX_THREADS	256

static struct cpu_features cpu;

/* ---- destination memory ----------------------------------------------- */

enum state { ST_COLD, ST_HOT, ST_REWRITE, NR_STATES };
static const char *const state_names[NR_STATES] = { "cold", "hot", "rewrite" };

static void prepare(enum state st, unsigned char *p, size_t len)
{
	switch (st) {
	case ST_COLD:
		flush_range(&cpu, p, len);
		break;
	case ST_HOT:
		memset(p, 0, len);
		break;
	default:
		break;
	}
}

/* ---- one timed run, split over threads --------------------------------- */

struct job {
	const struct strategy *strategy;
	bool floor;
	const struct images *img;
	const struct geometry *geom;
	unsigned char *memmap, *pageblocks;
	size_t first_pfn, nr_pfns;
	size_t floor_len;
	int cpu;
	pthread_barrier_t *start;
};

static void run_job(struct job *j)
{
	if (j->floor)
		floor_fill(j->strategy, j->memmap +
			   geometry_written(j->geom, j->first_pfn) * j->img->size,
			   j->floor_len, j->img);
	else
		memmap_write(j->strategy, j->img, j->geom, j->memmap,
			     j->pageblocks, j->first_pfn, j->nr_pfns);
}

static void pin(int cpu_nr)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu_nr, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *worker(void *arg)
{
	struct job *j = arg;

	pin(j->cpu);
	pthread_barrier_wait(j->start);
	run_job(j);
	return NULL;
}

static size_t align_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

/*
 * Time one write of [first_pfn, first_pfn + nr_pfns) by nthreads workers,
 * each on a chunk that starts on a pageblock and compound boundary, as a
 * parallel kernel would split it.
 */
static double timed_run(struct job proto, int nthreads)
{
	size_t unit = PAGEBLOCK_PAGES, per, end = proto.first_pfn + proto.nr_pfns;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct job jobs[MAX_THREADS];
	pthread_t tids[MAX_THREADS];
	pthread_barrier_t start;
	size_t lo = proto.first_pfn;
	double t0, t1;

	if (((size_t)1 << proto.geom->order) > unit)
		unit = (size_t)1 << proto.geom->order;
	per = align_up(proto.nr_pfns / nthreads + 1, unit);
	pthread_barrier_init(&start, NULL, nthreads);
	for (int i = 0; i < nthreads; i++) {
		size_t hi = i == nthreads - 1 ? end :
			    align_up(proto.first_pfn + (i + 1) * per, unit);

		if (hi > end)
			hi = end;
		if (lo > hi)
			lo = hi;
		jobs[i] = proto;
		jobs[i].first_pfn = lo;
		jobs[i].nr_pfns = hi - lo;
		jobs[i].floor_len = geometry_written(proto.geom, hi - lo) *
				    proto.img->size;
		jobs[i].cpu = (int)(i % ncpu);
		jobs[i].start = &start;
		lo = hi;
	}
	for (int i = 1; i < nthreads; i++)
		if (pthread_create(&tids[i], NULL, worker, &jobs[i]))
			die("pthread_create failed");
	pin(jobs[0].cpu);
	pthread_barrier_wait(&start);
	t0 = now_ns();
	run_job(&jobs[0]);
	for (int i = 1; i < nthreads; i++)
		pthread_join(tids[i], NULL);
	t1 = now_ns();
	pthread_barrier_destroy(&start);
	return t1 - t0;
}

/* ---- commands ------------------------------------------------------- */

/* An item of a JSON list of names, after a comma unless it is the first. */
static void print_listed(const char *name, bool *first)
{
	printf("%s\"%s\"", *first ? "" : ", ", name);
	*first = false;
}

/*
 * The CPU, every strategy and clearing method with its fields, and the
 * names of those this CPU runs.
 */
static void print_features(void)
{
	bool first = true;

	putchar('{');
	print_cpu_json(&cpu);
	printf(", ");
	print_strategies_json(&cpu);
	printf(", ");
	print_clear_methods_json(&cpu);
	printf(", \"supported\": [");
	for (size_t s = 0; s < nr_strategies; s++)
		if (strategy_supported(&strategies[s], &cpu))
			print_listed(strategies[s].name, &first);
	printf("], \"clear_supported\": [");
	first = true;
	for (int m = 0; m < NR_CLEAR_METHODS; m++)
		if (clear_method_supported(m, &cpu))
			print_listed(clear_methods[m].name, &first);
	printf("]}\n");
}

/* Write one case with strategy s and compare with the reference. */
static bool verify_case(const struct strategy *s, const struct images *img,
			const struct geometry *g, size_t first, size_t count,
			int threads)
{
	const size_t guard = 4096;
	size_t span = (first + count) * img->size;
	/* aligned_alloc() wants a multiple of the alignment. */
	size_t len = (span + 2 * guard + guard - 1) / guard * guard;
	size_t pbs = (first + count) / PAGEBLOCK_PAGES + 2;
	unsigned char *want = malloc(len), *got = aligned_alloc(4096, len);
	unsigned char *pb_want = calloc(pbs, 1), *pb_got = calloc(pbs, 1);
	struct job j = {
		.strategy = s, .img = img, .geom = g, .memmap = got + guard,
		.pageblocks = pb_got, .first_pfn = first, .nr_pfns = count,
	};
	bool ok;

	if (!want || !got || !pb_want || !pb_got)
		die("out of memory");
	/* The reference holds addresses (compound heads): build it in place. */
	memset(got, 0x5a, len);
	memmap_reference(img, g, got + guard, pb_got, first, count);
	memcpy(want, got, len);
	memcpy(pb_want, pb_got, pbs);
	memset(got, 0x5a, len);
	memset(pb_got, 0, pbs);
	timed_run(j, threads);
	ok = !memcmp(want, got, len) && !memcmp(pb_want, pb_got, pbs);
	if (!ok)
		fprintf(stderr, "FAIL %s %s size=%zu first=%zu count=%zu threads=%d\n",
			s->name, g->name, img->size, first, count,
			threads);
	free(want);
	free(got);
	free(pb_want);
	free(pb_got);
	return ok;
}

/*
 * Every supported strategy, every geometry, several struct page sizes,
 * unaligned first pfns and counts (order-0), one and three threads.
 */
static int verify(const struct images *vectors)
{
	static const size_t sizes[] = { 0, 56, 72, 80 };
	static const size_t starts[] = { 0, 1, 3, 511, 513 };
	static const size_t counts[] = { 1, 2, 7, 512, 1000, 4099 };
	int passed = 0, failed = 0;

	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		struct images img = *vectors;

		if (sizes[si])
			images_resize(&img, sizes[si]);
		for (size_t gi = 0; gi < nr_geometries; gi++) {
			const struct geometry *g = &geometries[gi];
			size_t n = (size_t)1 << g->order;

			for (size_t i = 0; i < nr_strategies; i++) {
				const struct strategy *s = &strategies[i];

				if (!strategy_supported(s, &cpu) ||
				    !strategy_fits(s, img.size))
					continue;
				for (int t = 1; t <= 3; t += 2) {
					if (g->order) {
						/* Compound ranges are aligned. */
						for (size_t c = 1; c <= 2; c++)
							verify_case(s, &img, g, n, c * n, t) ?
								passed++ : failed++;
						continue;
					}
					for (size_t a = 0; a < 5; a++)
						for (size_t c = 0; c < 6; c++)
							verify_case(s, &img, g, starts[a],
								    counts[c], t) ?
								passed++ : failed++;
				}
			}
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

struct bench_opts {
	const struct geometry *geom;
	size_t sizes[MAX_LIST];
	int nsizes;
	int states[MAX_LIST], nstates;
	int backings[MAX_LIST], nbackings;
	const struct strategy *strategies[MAX_LIST];
	int nstrategies;
	int threads[MAX_LIST], nthreads;
	int reps;
};

/* pfns whose memmap is about bytes long in this geometry (whole compounds). */
static size_t pfns_for_bytes(const struct geometry *g, size_t bytes,
			     size_t size)
{
	size_t n = (size_t)1 << g->order;
	size_t per_compound = (g->reuse ? REUSE_PAGES : n) * size;
	size_t compounds = bytes / per_compound;

	if (!g->order)
		return bytes / size ? bytes / size : 1;
	return (compounds ? compounds : 1) * n;
}

/* Warm up once, then time reps runs, preparing the state before each. */
static void measure(struct job j, int threads, enum state st, size_t len,
		    int reps, double *ns)
{
	for (int r = -1; r < reps; r++) {
		double t;

		prepare(st, j.memmap, len);
		t = timed_run(j, threads);
		if (r >= 0)
			ns[r] = t;
	}
}

static void bench(const struct images *img, struct bench_opts *o)
{
	double ns[256], sorted[256];
	int first_run = 1;

	putchar('{');
	print_cpu_json(&cpu);
	printf(", ");
	print_strategies_json(&cpu);
	printf(", \"vectors\": \"%s\", "
	       "\"struct_page_size\": %zu, \"geometry\": \"%s\", \"reps\": %d, "
	       "\"runs\": [\n",
	       img->source, img->size, o->geom->name, o->reps);
	for (int bi = 0; bi < o->nbackings; bi++) {
		enum backing b = o->backings[bi];

		for (int zi = 0; zi < o->nsizes; zi++) {
			size_t nr_pfns = pfns_for_bytes(o->geom, o->sizes[zi],
							img->size);
			size_t written = geometry_written(o->geom, nr_pfns);
			size_t len = written * img->size;
			size_t pbs = nr_pfns / PAGEBLOCK_PAGES + 2;
			char why[160];
			unsigned char *memmap = map_buffer(b, len, why, sizeof(why));
			unsigned char *pageblocks = calloc(pbs, 1);

			if (!memmap) {
				printf("%s{\"backing\": \"%s\", \"memmap_bytes\": %zu, "
				       "\"unavailable\": true, \"why\": \"%s\"}\n",
				       first_run ? "" : ",", backing_names[b], len, why);
				first_run = 0;
				free(pageblocks);
				continue;
			}
			for (int si = 0; si < o->nstates; si++) {
				for (int ti = 0; ti < o->nthreads; ti++) {
					struct job j = {
						.img = img, .geom = o->geom,
						.memmap = memmap,
						.pageblocks = pageblocks,
						.nr_pfns = nr_pfns,
					};
					double floor_ns = 0;
					const char *floor_by = "none";

					/* The floor: fastest constant streaming fill. */
					j.floor = true;
					for (size_t i = 0; i < nr_strategies; i++) {
						const struct strategy *s = &strategies[i];
						double m;

						if (!strategy_streams(s) ||
						    !strategy_supported(s, &cpu))
							continue;
						j.strategy = s;
						measure(j, o->threads[ti], o->states[si], len,
							o->reps, ns);
						m = median_of(ns, o->reps);
						if (!floor_ns || m < floor_ns) {
							floor_ns = m;
							floor_by = s->name;
						}
					}
					j.floor = false;
					for (int k = 0; k < o->nstrategies; k++) {
						const struct strategy *s = o->strategies[k];
						double med;

						printf("%s{\"backing\": \"%s\", \"state\": \"%s\", "
						       "\"threads\": %d, \"strategy\": \"%s\", "
						       "\"memmap_bytes\": %zu, \"pfns\": %zu, "
						       "\"pages_written\": %zu, ",
						       first_run ? "" : ",", backing_names[b],
						       state_names[o->states[si]],
						       o->threads[ti], s->name, len,
						       nr_pfns, written);
						first_run = 0;
						if (!strategy_supported(s, &cpu) ||
						    !strategy_fits(s, img->size)) {
							printf("\"unsupported\": true}\n");
							continue;
						}
						j.strategy = s;
						measure(j, o->threads[ti], o->states[si], len,
							o->reps, ns);
						print_samples(ns, o->reps);
						memcpy(sorted, ns, sizeof(double) * o->reps);
						med = median_of(sorted, o->reps);
						printf(", \"median_ns\": %.0f, \"min_ns\": %.0f, "
						       "\"max_ns\": %.0f, \"ns_per_page\": %.3f, "
						       "\"gb_per_s\": %.3f, \"floor_ns\": %.0f, "
						       "\"floor_by\": \"%s\", \"of_floor\": %.3f}\n",
						       med, sorted[0], sorted[o->reps - 1],
						       med / written, len / med, floor_ns,
						       floor_by, floor_ns ? floor_ns / med : 0);
						fflush(stdout);
					}
				}
			}
			unmap_buffer(b, memmap, len);
			free(pageblocks);
		}
	}
	printf("]}\n");
}

static _Noreturn void zdlab_usage(int status)
{
	usage(status, "features | clear verify|bench|fault ... | verify VECTORS "
	      "| bench VECTORS [--geometry G] [--sizes B,..] "
	      "[--states cold,hot,rewrite] [--backings anon-4k,anon-thp,"
	      "shm-file,hugetlb,hugetlb-1G] [--strategies S,..|all] "
	      "[--threads N,..] [--reps N]");
}

static void parse_bench(int argc, char **argv, struct bench_opts *o)
{
	char *items[MAX_LIST];
	int n;

	*o = (struct bench_opts){ .geom = &geometries[0], .reps = 7 };
	o->sizes[0] = 1UL << 20;
	o->nsizes = 1;
	o->states[0] = ST_REWRITE;
	o->nstates = 1;
	o->backings[0] = B_ANON;
	o->nbackings = 1;
	o->threads[0] = 1;
	o->nthreads = 1;
	if (nr_strategies > MAX_LIST)
		die("%zu strategies, more than a list holds (MAX_LIST, %d)",
		    nr_strategies, MAX_LIST);
	for (size_t s = 0; s < nr_strategies; s++)
		o->strategies[o->nstrategies++] = &strategies[s];
	for (int i = 0; i < argc; i += 2) {
		const char *opt = argv[i];

		if (i + 1 >= argc)
			die("%s needs a value", opt);
		if (!strcmp(opt, "--geometry")) {
			o->geom = geometry_find(argv[i + 1]);
			if (!o->geom)
				die("unknown geometry '%s'", argv[i + 1]);
			continue;
		}
		if (!strcmp(opt, "--reps")) {
			o->reps = parse_int(argv[i + 1], 1, 255, "--reps");
			continue;
		}
		n = split(argv[i + 1], items);
		if (!strcmp(opt, "--sizes")) {
			o->nsizes = n;
			for (int k = 0; k < n; k++)
				o->sizes[k] = parse_size(items[k]);
		} else if (!strcmp(opt, "--states")) {
			o->nstates = n;
			for (int k = 0; k < n; k++)
				if ((o->states[k] = find_name(state_names, NR_STATES,
							      items[k])) < 0)
					die("unknown state '%s'", items[k]);
		} else if (!strcmp(opt, "--backings")) {
			o->nbackings = n;
			for (int k = 0; k < n; k++)
				if ((o->backings[k] = find_name(backing_names,
								NR_BACKINGS,
								items[k])) < 0)
					die("unknown backing '%s'", items[k]);
		} else if (!strcmp(opt, "--threads")) {
			o->nthreads = n;
			for (int k = 0; k < n; k++)
				o->threads[k] = parse_int(items[k], 1, MAX_THREADS,
							  "--threads");
		} else if (!strcmp(opt, "--strategies")) {
			if (n == 1 && !strcmp(items[0], "all"))
				continue;
			o->nstrategies = n;
			for (int k = 0; k < n; k++)
				if (!(o->strategies[k] = strategy_find(items[k])))
					die("unknown strategy '%s'", items[k]);
		} else {
			die("unknown option '%s'", opt);
		}
	}
}

int main(int argc, char **argv)
{
	struct images img;
	struct bench_opts o;

	cpu_detect(&cpu, getenv("ZDLAB_MASK"));
	if (argc < 2)
		zdlab_usage(2);
	if (wants_help(argv[1]))
		zdlab_usage(0);
	if (!strcmp(argv[1], "features")) {
		print_features();
		return 0;
	}
	if (!strcmp(argv[1], "clear"))
		return clear_main(argc - 2, argv + 2, &cpu);
	if (argc < 3 || (strcmp(argv[1], "verify") && strcmp(argv[1], "bench")))
		zdlab_usage(2);
	if (images_load(&img, argv[2]))
		die("cannot read struct page vectors from %s", argv[2]);
	if (!strcmp(argv[1], "verify"))
		return verify(&img);
	parse_bench(argc - 3, argv + 3, &o);
	bench(&img, &o);
	return 0;
}
