/* SPDX-License-Identifier: GPL-2.0 */
/* 'zdlab clear': verify and time the huge-page clearing methods. */
#ifndef ZDLAB_CLEARCMD_H
#define ZDLAB_CLEARCMD_H

#include "cpu.h"

/* argv[0] is the subcommand (verify, bench, fault); returns the exit code. */
int clear_main(int argc, char **argv, const struct cpu_features *f);

#endif
