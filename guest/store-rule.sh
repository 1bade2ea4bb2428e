# What the host checks the kernel's store rule for the ZONE_DEVICE memmap
# against (zdinit/kernel/store_rule.py): the last-level cache the rule reads,
# which every scenario reports, and a memmap the kernel builds during
# boot.  Sourced by scenario.sh.

# cpu0's caches as cacheinfo lists them in sysfs, then how many there
# were: the host takes the size of the highest level, as the kernel does.
report_caches() {
	leaves=0
	for index in /sys/devices/system/cpu/cpu0/cache/index*; do
		[ -r "$index/size" ] || continue
		emit "cache cpu=0 index=${index##*index} level=$(cat "$index/level") type=$(cat "$index/type") size=$(cat "$index/size")"
		leaves=$((leaves + 1))
	done
	emit "caches cpu=0 leaves=$leaves"
}

# ZONE_DEVICE memory bound by the kernel itself during boot, before any
# userspace: a legacy pmem range (memmap=nn!ss on the command line), which
# drivers/nvdimm/e820.c gives the pmem driver as a region whose namespace
# it maps with devm_memremap_pages() (ND_REGION_PAGEMAP), the memmap in
# RAM.  dyndbg= on the command line switched the timing line on before
# the drivers bound.  The host judges the line against the rule.
boot_bind() {
	legacy_pmem_probed
	# The kernel log since boot, held by the step: no kmsg has run before.
	emit "begin phase=boot strategy=auto align="
	kmsg
	emit "done phase=boot"
}
