#!/bin/sh
# The clear+touch runs of this directory, from the repository root:
#   sh docs/results/lab-zen3-clear-fault/commands.sh docs/results/lab-zen3-clear-fault
# Three `zdlab clear fault` runs of upstream's REP STOSB over extents,
# CLZERO and MOVNTI, 201 rounds each, the methods in a different order in
# each run; every round interleaves every cell, on the next cold 2 MB page.
set -e
out=${1:?usage: commands.sh OUTDIR}
make -C lab >/dev/null
{
	echo "revision: $(git rev-parse --short HEAD)"
	echo "date: $(date -u +%FT%TZ)"
	echo "uptime before: $(uptime)"
	lscpu
	grep -m1 '^flags' /proc/cpuinfo
	uname -a
} > "$out/env.txt"
lab/build/zdlab clear verify > "$out/verify.txt" 2>&1
lab/build/zdlab features > "$out/features.json"
i=1
for methods in extent-stosb,clzero,movnti movnti,clzero,extent-stosb \
	       clzero,extent-stosb,movnti; do
	lab/build/zdlab clear fault --methods "$methods" --touch 4K,2M \
		--backings anon-thp --reps 201 > "$out/fault-$i.json"
	i=$((i + 1))
done
echo "uptime after: $(uptime)" >> "$out/env.txt"
