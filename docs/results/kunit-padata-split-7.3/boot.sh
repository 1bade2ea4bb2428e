#!/bin/sh
# boot.sh IMAGE LOG: boot a KUnit kernel under TCG, padata_mt alone, as
# zdinit/kernel/cross.py boots the series' KUnit kernels; print the wall time.
img=$1 log=$2
start=$(date +%s.%N)
timeout 900 qemu-system-x86_64 -cpu max -smp 2 -m 4096 -nographic -no-reboot \
  -monitor none -net none -kernel "$img" \
  -append "console=ttyS0 panic=-1 kunit.enable=1 kunit_shutdown=reboot kunit.filter_glob=padata_mt" \
  </dev/null >"$log" 2>&1
rc=$?
end=$(date +%s.%N)
echo "qemu exit $rc, wall $(echo "$end - $start" | bc) s"
