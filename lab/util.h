/* SPDX-License-Identifier: GPL-2.0 */
/* Command-line parsing, timing and summary helpers shared by the benches. */
#ifndef ZDLAB_UTIL_H
#define ZDLAB_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#define MAX_LIST	16

/* One line on stderr, exit 2: the lab's only error path. */
void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* --help, -h or help: print the usage to stdout and exit 0. */
bool wants_help(const char *arg);
/* The usage to stdout (status 0, asked for) or stderr (a mistake). */
_Noreturn void usage(int status, const char *text);
/*
 * Split a comma-separated list in place; at least one and at most MAX_LIST
 * items, none empty.
 */
int split(char *list, char **out);
size_t parse_size(const char *text);
int parse_int(const char *text, int lo, int hi, const char *what);
/*
 * The index of the row named name in a table of n rows of size bytes, each
 * a struct whose first member is its name; -1 if there is none.
 */
int find_row(const void *rows, size_t n, size_t size, const char *name);
/* find_row() in an array of names. */
int find_name(const char *const *names, int n, const char *name);

double now_ns(void);
/*
 * This thread's CPU time: unlike now_ns() it stops while the thread is
 * descheduled, so on a shared machine it shows what a time lost to other
 * tasks (memory stalls still count: the thread is running).
 */
double cpu_ns(void);
/* Sorts ns in place. */
double median_of(double *ns, int reps);
void print_samples(const double *ns, int reps);

#endif
