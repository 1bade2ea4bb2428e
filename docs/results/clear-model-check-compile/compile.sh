#!/bin/sh
# Compile arch/x86/kernel/cpu/amd.o, which holds init_amd_zen3()'s model
# check, in TREE (a git tree of a base's clear series applied) with x86_64
# defconfig into OUTDIR, and print the compiler's warnings (none wanted).
# Usage: compile.sh TREE OUTDIR
set -eu
tree=$1 out=$2
mkdir -p "$out"
make -s -C "$tree" O="$out" defconfig >/dev/null
gcc --version | head -1
git -C "$tree" log --oneline -1 --format='tree at: %s'
git -C "$tree" diff --quiet HEAD -- arch/x86/kernel/cpu/amd.c
grep -n 'x86_model == 0x01 && cpu_has(c, X86_FEATURE_CLZERO)' \
	"$tree"/arch/x86/kernel/cpu/amd.c
touch "$tree"/arch/x86/kernel/cpu/amd.c
make -C "$tree" O="$out" arch/x86/kernel/cpu/amd.o 2>&1 |
	grep -E 'warning|error|CC ' || true
test -s "$out"/arch/x86/kernel/cpu/amd.o && echo "amd.o built"
