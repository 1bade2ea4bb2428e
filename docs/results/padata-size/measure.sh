#!/bin/sh
# The size of kernel/padata.o before and after "padata: make
# padata_do_multithreaded() callable after boot": x86-64 defconfig with
# CONFIG_PADATA (selected by CONFIG_PADATA_KUNIT_TEST), built in TREE, a
# git tree of the 7.3 series (or 6.12's) checked out at "padata: add
# KUnit tests for multithreaded jobs" (the patch after it, which adds
# that option and leaves kernel/padata.c as it was), with BASE the
# patch's parent, "padata: do not wait for multithreaded helpers that
# have not started".
# Usage: measure.sh TREE BASE OUTDIR
set -eu
tree=$1 base=$2 out=$3
mkdir -p "$out"
make -s -C "$tree" O="$out" defconfig >/dev/null
"$tree"/scripts/config --file "$out"/.config -e KUNIT -e PADATA_KUNIT_TEST
make -s -C "$tree" O="$out" olddefconfig
gcc --version | head -1
for rev in "$base" HEAD; do
	git -C "$tree" show "$rev":kernel/padata.c > "$out"/padata.c.$rev
	cp "$tree"/kernel/padata.c "$out"/padata.c.saved
	cp "$out"/padata.c.$rev "$tree"/kernel/padata.c
	touch "$tree"/kernel/padata.c
	make -s -C "$tree" O="$out" kernel/padata.o 2>/dev/null
	cp "$out"/padata.c.saved "$tree"/kernel/padata.c
	echo "== kernel/padata.o at $rev"
	size -A "$out"/kernel/padata.o | grep -E '^\.(text|init\.text) '
done
