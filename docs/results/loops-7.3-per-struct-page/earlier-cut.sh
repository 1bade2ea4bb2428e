#!/bin/sh
# memfill_nt(), the streaming fill of the earlier 7.3 cut (the one
# docs/results/bench-100g-7.3-rule/ ran, revision 9ca4d2390f9c, patch
# "x86/lib: add memfill_nt() to fill memory with MOVNTI stores"), compiled
# alone with the compiler command line the current kernels' mm/mm_init.o
# was built with, then disassembled.  Run from the repository root with
# a 7.3 build directory whose mm/mm_init.o exists:
#   sh docs/results/loops-7.3-per-struct-page/earlier-cut.sh \
#       $ZDINIT_CACHE/work/7.3/upstream/build > earlier-cut.txt
set -e
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git show 9ca4d2390f9c:patches/linux-7.3/0005-x86-lib-add-memfill_nt-to-fill-memory-with-MOVNTI-st.patch |
	awk '/^\+\+\+ b\/arch\/x86\/lib\/usercopy_64.c/ {p = 1; next}
	     p && /^diff/ {p = 0}
	     p && /^\+/ && !/^\+#include/ {print substr($0, 2)}' > "$tmp/body.c"
{
	printf '#include <linux/%s.h>\n' export instrumented kmsan-checks bug string align
	echo 'void memfill_nt(void *dst, const void *src, size_t size, size_t count);'
	cat "$tmp/body.c"
} > "$tmp/memfill.c"
cmd=$(sed -n 's/^savedcmd_mm\/mm_init.o := //p' "$build/mm/.mm_init.o.cmd" |
	sed "s| -Wp,-MMD,mm/.mm_init.o.d||; s|-c -o mm/mm_init.o [^ ]*mm_init.c|-c -o $tmp/memfill.o $tmp/memfill.c|; s|-DKBUILD_MODFILE=.*-D__KBUILD_MODNAME=mm_init|-DKBUILD_MODNAME='\"memfill\"'|")
(cd "$build" && eval "$cmd")
objdump -d --no-show-raw-insn "$tmp/memfill.o" | sed -n '/<memfill_nt>:/,/^$/p'
