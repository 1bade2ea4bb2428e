#!/bin/bash
# Build one kernel cold three ways, one after the other: through ccache as
# the harness runs it (direct mode, falling back to a preprocessed
# lookup), through ccache in depend mode, and without ccache.  Each ccache
# build starts from an empty ccache directory.  Prints the seconds and the
# object files of each.
# Usage: build-modes.sh TREE CONFIG OUTDIR [MODES]
# MODES: which builds, in which order (default: "default depend none").
set -eu
tree=$1 config=$2 out=$3 modes=${4:-default depend none}
grep -m1 'model name' /proc/cpuinfo
echo "cpus $(nproc)"
for mode in $modes; do
	rm -rf "$out/$mode" "$out/$mode-ccache"
	mkdir -p "$out/$mode"
	cp "$config" "$out/$mode/.config"
	make -C "$tree" O="$out/$mode" olddefconfig >/dev/null
	cc="ccache gcc"
	case $mode in
	depend) export CCACHE_DEPEND=1 ;;
	none) cc=gcc; unset CCACHE_DEPEND ;;
	*) unset CCACHE_DEPEND ;;
	esac
	start=$(date +%s)
	CCACHE_DIR="$out/$mode-ccache" CCACHE_NOHASHDIR=1 \
		CCACHE_IGNOREOPTIONS='-fmacro-prefix-map=*' \
		make -C "$tree" O="$out/$mode" -j$(($(nproc) + 1)) \
		CC="$cc" HOSTCC="$cc" bzImage modules >"$out/$mode.log" 2>&1 && rc=0 || rc=$?
	echo "$mode rc=$rc $(($(date +%s) - start)) s objs=$(find "$out/$mode" \
		-name '*.o' ! -name 'built-in*' ! -name '*.mod.o' | wc -l)"
done
