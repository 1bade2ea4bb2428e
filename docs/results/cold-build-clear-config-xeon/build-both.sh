#!/bin/bash
# Build the clear kernel cold, without ccache, in two configurations: a
# lean one (tinyconfig + lean-clear.config) and the harness's own (its
# .config as `python3 -m zdinit check-series` left it), one after the
# other, and print the seconds and object files of each.
# Usage: build-both.sh TREE HARNESS_CONFIG OUTDIR
set -eu
tree=$1 harness_config=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/lean" "$out/harness"
make -C "$tree" O="$out/lean" tinyconfig >/dev/null
"$tree/scripts/kconfig/merge_config.sh" -m -O "$out/lean" \
	"$out/lean/.config" "$here/lean-clear.config" >/dev/null
make -C "$tree" O="$out/lean" olddefconfig >/dev/null
cp "$harness_config" "$out/harness/.config"
make -C "$tree" O="$out/harness" olddefconfig >/dev/null
for c in lean harness; do
	start=$(date +%s)
	make -C "$tree" O="$out/$c" -j3 bzImage modules >"$out/$c.log" 2>&1 && rc=0 || rc=$?
	echo "$c rc=$rc $(($(date +%s) - start)) s objs=$(find "$out/$c" \
		-name '*.o' ! -name 'built-in*' ! -name '*.mod.o' | wc -l)"
done
