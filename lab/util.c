// SPDX-License-Identifier: GPL-2.0
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void die(const char *fmt, ...)
{
	va_list ap;

	fputs("zdlab: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

int split(char *list, char **out)
{
	size_t len = strlen(list);
	int n = 0;

	/* strtok() would skip empty items: "," would be an empty list. */
	if (!len || list[0] == ',' || list[len - 1] == ',' || strstr(list, ",,"))
		die("empty item in list '%s'", list);
	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		if (n == MAX_LIST)
			die("too many list items (max %d)", MAX_LIST);
		out[n++] = tok;
	}
	return n;
}

size_t parse_size(const char *text)
{
	char *end;
	double v = strtod(text, &end);
	size_t mult = 1;

	switch (*end) {
	case 'K': mult = 1UL << 10; end++; break;
	case 'M': mult = 1UL << 20; end++; break;
	case 'G': mult = 1UL << 30; end++; break;
	}
	if (end == text || *end || v <= 0)
		die("bad size '%s' (want e.g. 1M, 1.6G)", text);
	return (size_t)(v * mult);
}

bool wants_help(const char *arg)
{
	return !strcmp(arg, "--help") || !strcmp(arg, "-h") ||
	       !strcmp(arg, "help");
}

void usage(int status, const char *text)
{
	fprintf(status ? stderr : stdout, "usage: zdlab %s\n", text);
	exit(status);
}

int parse_int(const char *text, int lo, int hi, const char *what)
{
	char *end;
	long v = strtol(text, &end, 10);

	if (end == text || *end || v < lo || v > hi)
		die("%s must be an integer in %d..%d, not '%s'", what, lo, hi, text);
	return (int)v;
}

int find_row(const void *rows, size_t n, size_t size, const char *name)
{
	for (size_t i = 0; i < n; i++) {
		const char *row = (const char *)rows + i * size;
		const char *const *row_name = (const void *)row;

		if (!strcmp(*row_name, name))
			return (int)i;
	}
	return -1;
}

int find_name(const char *const *names, int n, const char *name)
{
	return find_row(names, n, sizeof(*names), name);
}

double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double median_of(double *ns, int reps)
{
	qsort(ns, reps, sizeof(*ns), cmp_double);
	return reps % 2 ? ns[reps / 2] : (ns[reps / 2 - 1] + ns[reps / 2]) / 2;
}

void print_samples(const double *ns, int reps)
{
	printf("\"samples_ns\": [");
	for (int i = 0; i < reps; i++)
		printf("%s%.0f", i ? ", " : "", ns[i]);
	printf("]");
}
