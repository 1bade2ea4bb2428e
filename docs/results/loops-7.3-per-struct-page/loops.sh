#!/bin/sh
# The per-page copy loops of the kernels this run and the headline compare:
# the functions of mm/mm_init.o that hold the template copies, disassembled
# (addresses are offsets in the object's section, not the kernel's).
# Usage: loops.sh BUILD_DIR...
#   sh docs/results/loops-7.3-per-struct-page/loops.sh \
#       $ZDINIT_CACHE/work/7.3/upstream/build $ZDINIT_CACHE/work/7.3/patched/build
set -e
for build in "$@"; do
	obj=$build/mm/mm_init.o
	echo "== $obj"
	for fn in $(nm "$obj" | awk '$3 ~ /^(zone_device_fill|memmap_init_order0_template)/ {print $3}'); do
		echo "-- $fn"
		objdump -d --no-show-raw-insn --disassemble="$fn" "$obj" |
			sed -n "/<$fn>:/,/^\$/p" | sed '1d;/^$/d; s/ *#.*//'
	done
done
