#!/bin/bash
# perblock.sh logs_dir : per-block memmap_init_range us (32768-page moves after the first online), median/p10/p90
cd $1
for f in *.log; do
  grep -o "move_pfn_range_to_zone 32768 pages to [A-Za-z]*: memmap_init_range [0-9]*us" $f | awk '{gsub("us","",$NF); print $NF}' | tail -n +129 | sort -n |
  awk -v f=$f '{a[NR]=$1} END{ if (NR) printf "%-36s n=%4d p10=%5d med=%5d p90=%5d us/block\n", f, NR, a[int(NR*.1)+1], a[int((NR+1)/2)], a[int(NR*.9)]}'
done
