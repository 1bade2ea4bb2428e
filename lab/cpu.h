/* SPDX-License-Identifier: GPL-2.0 */
/* CPU features the lab's store strategies depend on, read with CPUID. */
#ifndef ZDLAB_CPU_H
#define ZDLAB_CPU_H

#include <stdbool.h>

#define LINE	64	/* x86 cache line, the unit of a streaming store */

/*
 * The features the lab dispatches on or reports, as /proc/cpuinfo,
 * ZDLAB_MASK and the "cpu" JSON name them (cpu.c, in this order), and
 * CPU_NONE, which every CPU has: what a store that needs nothing beyond
 * x86-64 names in its table row.
 */
enum cpu_feature {
	CPU_NONE,
	CPU_SSE2,
	CPU_AVX2,
	CPU_AVX512F,
	CPU_MOVDIR64B,
	CPU_CLFLUSHOPT,
	CPU_ERMS,		/* fast REP STOSB/MOVSB: the kernel's clear_page_erms */
	CPU_FSRM,		/* fast short REP MOVSB (reported only) */
	CPU_CLZERO,		/* AMD: zero one cache line */
	NR_CPU_FEATURES
};

struct cpu_features {
	bool has[NR_CPU_FEATURES];
	bool os_avx;		/* OS saves YMM state (XCR0) */
	bool os_avx512;		/* OS saves ZMM/opmask state (XCR0) */
	char model[49];
	unsigned int family, model_id, stepping;
	unsigned int llc_kb;	/* from sysfs, 0 if unknown */
	unsigned int l2_kb;	/* level 2 data/unified, sysfs, 0 if unknown */
};

static inline bool cpu_has(const struct cpu_features *f, enum cpu_feature c)
{
	return f->has[c];
}

/*
 * Detect features, then clear any named in the comma-separated mask (the
 * ZDLAB_MASK environment variable), so tests can prove that the dispatcher
 * honours a missing feature.
 */
void cpu_detect(struct cpu_features *f, const char *mask);

/* "\"cpu\": {...}" for the benches' JSON. */
void print_cpu_json(const struct cpu_features *f);

/*
 * One row of a table of stores as JSON: its name, its kind, the feature
 * it needs (null for CPU_NONE) and whether this CPU has it.
 */
void print_store_row_json(const char *name, const char *kind,
			  enum cpu_feature needs, const struct cpu_features *f);

#endif
