// SPDX-License-Identifier: GPL-2.0
#include "cpu.h"

#include <cpuid.h>
#include <stdio.h>
#include <string.h>

/* CPUID bit positions: Intel SDM Vol. 2A, "CPUID", tables 3-8 and 3-10. */
#define LEAF1_EDX_SSE2		(1u << 26)
#define LEAF1_ECX_OSXSAVE	(1u << 27)
#define LEAF7_EBX_ERMS		(1u << 9)
#define LEAF7_EDX_FSRM		(1u << 4)
#define LEAF7_EBX_AVX2		(1u << 5)
#define LEAF7_EBX_AVX512F	(1u << 16)
#define LEAF7_EBX_CLFLUSHOPT	(1u << 23)
#define LEAF7_ECX_MOVDIR64B	(1u << 28)
/* AMD APM Vol. 3, appendix E, CPUID Fn8000_0008_EBX bit 0. */
#define EXT8_EBX_CLZERO		(1u << 0)
/* XCR0 state components: SSE|AVX (bits 1-2), opmask|ZMM_Hi256|Hi16_ZMM (5-7). */
#define XCR0_AVX		0x06u
#define XCR0_AVX512		0xe0u

/* CPU_NONE has no name: there is nothing to detect, mask or report. */
static const char *const cpu_feature_names[NR_CPU_FEATURES] = {
	[CPU_SSE2] = "sse2",
	[CPU_AVX2] = "avx2",
	[CPU_AVX512F] = "avx512f",
	[CPU_MOVDIR64B] = "movdir64b",
	[CPU_CLFLUSHOPT] = "clflushopt",
	[CPU_ERMS] = "erms",
	[CPU_FSRM] = "fsrm",
	[CPU_CLZERO] = "clzero",
};

static unsigned long long xgetbv0(void)
{
	unsigned int lo, hi;

	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((unsigned long long)hi << 32) | lo;
}

/*
 * cpu0's caches from sysfs, index0 on: x86 lists four or five, and eight
 * leaves room.  Zero where a file cannot be read.
 */
#define MAX_CACHE_INDEX	8

struct cache_leaf {
	unsigned int level, kb;
	bool instruction;
};

/*
 * Scan one value with fmt (a single conversion into out) from file name of
 * cpu0's cache leaf i: -1 where the file cannot be opened, 0 where it
 * holds no such value (out untouched), 1 when read.
 */
static int scan_leaf_file(int i, const char *name, const char *fmt, void *out)
{
	char path[96];
	FILE *fh;
	int got;

	snprintf(path, sizeof(path),
		 "/sys/devices/system/cpu/cpu0/cache/index%d/%s", i, name);
	fh = fopen(path, "r");
	if (!fh)
		return -1;
	got = fscanf(fh, fmt, out) == 1;
	fclose(fh);
	return got;
}

static bool read_leaf(int i, struct cache_leaf *leaf)
{
	char type[16] = "";

	*leaf = (struct cache_leaf){ 0 };
	if (scan_leaf_file(i, "size", "%uK", &leaf->kb) < 0)
		return false;		/* no leaf i */
	scan_leaf_file(i, "level", "%u", &leaf->level);
	scan_leaf_file(i, "type", "%15s", type);
	leaf->instruction = !strcmp(type, "Instruction");
	return true;
}

/* The largest cache: the last level on every x86 CPU. */
static unsigned int llc_kb(void)
{
	struct cache_leaf leaf;
	unsigned int best = 0;

	for (int i = 0; i < MAX_CACHE_INDEX && read_leaf(i, &leaf); i++)
		if (leaf.kb > best)
			best = leaf.kb;
	return best;
}

/* The level 2 data or unified cache, which the clearing rule compares with. */
static unsigned int l2_kb(void)
{
	struct cache_leaf leaf;

	for (int i = 0; i < MAX_CACHE_INDEX && read_leaf(i, &leaf); i++)
		if (leaf.level == 2 && !leaf.instruction)
			return leaf.kb;
	return 0;
}

static bool masked(const char *mask, const char *name)
{
	size_t len = strlen(name);
	const char *p = mask;

	while (p && *p) {
		if (!strncmp(p, name, len) && (p[len] == ',' || !p[len]))
			return true;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return false;
}

void cpu_detect(struct cpu_features *f, const char *mask)
{
	unsigned int a, b, c, d, max_leaf;

	memset(f, 0, sizeof(*f));
	f->has[CPU_NONE] = true;
	max_leaf = __get_cpuid_max(0, NULL);
	if (__get_cpuid(1, &a, &b, &c, &d)) {
		unsigned int base = (a >> 8) & 0xf, ext = (a >> 20) & 0xff;

		f->has[CPU_SSE2] = d & LEAF1_EDX_SSE2;
		f->family = base == 0xf ? base + ext : base;
		f->model_id = ((a >> 4) & 0xf) | (((a >> 16) & 0xf) << 4);
		f->stepping = a & 0xf;
		if (c & LEAF1_ECX_OSXSAVE) {
			unsigned long long xcr0 = xgetbv0();

			f->os_avx = (xcr0 & XCR0_AVX) == XCR0_AVX;
			f->os_avx512 = f->os_avx &&
				       (xcr0 & XCR0_AVX512) == XCR0_AVX512;
		}
	}
	if (max_leaf >= 7 && __get_cpuid_count(7, 0, &a, &b, &c, &d)) {
		f->has[CPU_AVX2] = (b & LEAF7_EBX_AVX2) && f->os_avx;
		f->has[CPU_AVX512F] = (b & LEAF7_EBX_AVX512F) && f->os_avx512;
		f->has[CPU_CLFLUSHOPT] = b & LEAF7_EBX_CLFLUSHOPT;
		f->has[CPU_MOVDIR64B] = c & LEAF7_ECX_MOVDIR64B;
		f->has[CPU_ERMS] = b & LEAF7_EBX_ERMS;
		f->has[CPU_FSRM] = d & LEAF7_EDX_FSRM;
	}
	if (__get_cpuid_max(0x80000000, NULL) >= 0x80000008 &&
	    __get_cpuid(0x80000008, &a, &b, &c, &d))
		f->has[CPU_CLZERO] = b & EXT8_EBX_CLZERO;
	if (__get_cpuid_max(0x80000000, NULL) >= 0x80000004) {
		unsigned int *out = (unsigned int *)f->model;

		for (unsigned int leaf = 0; leaf < 3; leaf++)
			__get_cpuid(0x80000002 + leaf, &out[leaf * 4],
				    &out[leaf * 4 + 1], &out[leaf * 4 + 2],
				    &out[leaf * 4 + 3]);
		f->model[48] = '\0';
	}
	f->llc_kb = llc_kb();
	f->l2_kb = l2_kb();

	for (int c = 0; c < NR_CPU_FEATURES; c++)
		if (c != CPU_NONE && masked(mask, cpu_feature_names[c]))
			f->has[c] = false;
}

static const char *yes(bool b)
{
	return b ? "true" : "false";
}

void print_cpu_json(const struct cpu_features *f)
{
	printf("\"cpu\": {\"model\": \"%s\", \"family\": %u, \"model_id\": %u, "
	       "\"stepping\": %u, \"llc_kb\": %u, \"l2_kb\": %u",
	       f->model, f->family, f->model_id, f->stepping, f->llc_kb,
	       f->l2_kb);
	for (int c = 0; c < NR_CPU_FEATURES; c++)
		if (c != CPU_NONE)
			printf(", \"%s\": %s", cpu_feature_names[c],
			       yes(f->has[c]));
	putchar('}');
}

void print_store_row_json(const char *name, const char *kind,
			  enum cpu_feature needs, const struct cpu_features *f)
{
	printf("{\"name\": \"%s\", \"kind\": \"%s\", \"needs\": ", name, kind);
	if (needs == CPU_NONE)
		printf("null");
	else
		printf("\"%s\"", cpu_feature_names[needs]);
	printf(", \"supported\": %s}", yes(cpu_has(f, needs)));
}
