/* SPDX-License-Identifier: GPL-2.0 */
/* CPU features the lab's store strategies depend on, read with CPUID. */
#ifndef ZDLAB_CPU_H
#define ZDLAB_CPU_H

#include <stdbool.h>

#define LINE	64	/* x86 cache line, the unit of a streaming store */

struct cpu_features {
	bool sse2;
	bool avx2;
	bool avx512f;
	bool movdir64b;
	bool clflushopt;
	bool erms;		/* fast REP STOSB/MOVSB: the kernel's clear_page_erms */
	bool fsrm;		/* fast short REP MOVSB (reported only) */
	bool clzero;		/* AMD: zero one cache line */
	bool os_avx;		/* OS saves YMM state (XCR0) */
	bool os_avx512;		/* OS saves ZMM/opmask state (XCR0) */
	char model[49];
	unsigned int family, model_id, stepping;
	unsigned int llc_kb;	/* from sysfs, 0 if unknown */
	unsigned int l2_kb;	/* level 2 data/unified, sysfs, 0 if unknown */
};

/*
 * Detect features, then clear any named in the comma-separated mask (the
 * ZDLAB_MASK environment variable), so tests can prove that the dispatcher
 * honours a missing feature.
 */
void cpu_detect(struct cpu_features *f, const char *mask);

/* "\"cpu\": {...}" for the benches' JSON. */
void print_cpu_json(const struct cpu_features *f);

#endif
