#!/bin/sh
# Compile the files each prefix of the 6.12 clear series touches, in the
# harness's clear configuration (tinyconfig + zdinit, clear, linux-6.12/clear),
# made in $O first.
set -e
O=/work/build-clear612
cd /work/ktree-clear612
for c in $(git rev-list --reverse 4124406..HEAD); do
	git checkout -q $c
	case "$(git log -1 --format=%s)" in
	"mm: add clear_pages()"*|"mm: clear huge and gigantic"*|"mm: clear huge folios away"*|"mm: debugfs"*)
		objs="mm/memory.o";;
	"x86/mm: clear runs"*) objs="arch/x86/lib/clear_page_64.o mm/memory.o";;
	"x86/mm: add clear_pages_stream"*) objs="arch/x86/kernel/cpu/amd.o arch/x86/kernel/cpu/cacheinfo.o arch/x86/lib/clear_page_64.o mm/memory.o";;
	esac
	echo "== $(git log -1 --format='%h %s')"
	make -s -C . O=$O HOSTCC="ccache gcc" CC="ccache gcc" olddefconfig
	(cd $O && rm -f $objs)
	make -C . O=$O -j2 HOSTCC="ccache gcc" CC="ccache gcc" $objs 2>&1 | grep -v "Entering\|Leaving\|DESCEND\|^  [A-Z]*  *[a-z]"  || true
	for o in $objs; do test -f $O/$o || { echo "MISSING $o"; exit 1; }; done
	echo "built: $objs"
done
git checkout -q master
