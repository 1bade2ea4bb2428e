#!/bin/bash
# fdis.sh build_dir func : normalized disassembly of func (addresses stripped)
m=$1/System.map; f=$2
s=$(grep " $f$" $m | cut -c1-16); e=$(grep -A1 " $f$" $m | tail -1 | cut -c1-16)
objdump -d --no-show-raw-insn --start-address=0x$s --stop-address=0x$e $1/vmlinux | grep -P '^\s*[0-9a-f]+:\t' | cut -f2- | sed -E 's/0x[0-9a-f]+\(%rip\)/X(%rip)/; s/\b[0-9a-f]{16} </</; s/# [0-9a-f]{16}/#/'
