#!/bin/bash
# boot.sh BZIMAGE GLOB LOG: boot the kernel under TCG with KUnit on, no root fs
timeout 1500 qemu-system-x86_64 -machine pc -accel tcg -cpu max,phys-bits=46 -smp 2 -m 3G \
  -nographic -no-reboot -kernel "$1" \
  -append "console=ttyS0 kunit.enable=1 kunit.filter_glob=$2 panic=-1 loglevel=7" > "$3" 2>&1
grep -E "^\s*(ok|not ok)|# (Totals|zdm|on_demand)|BUG|WARNING|Oops|kunit_info|was built|Kernel panic" "$3" | head -60
