# zdinit guest: what a pmem operator does with ndctl (and the sysfs writes
# of daxctl), sourced by scenario.sh.  The same operations as the
# destructive tests of ndctl's own suite (many sub-section namespaces in
# one region, namespace alignments, mode changes, device-dax handed to the
# kmem driver and back), written for this guest: that suite's source is
# not part of this project.  Each workflow ends in one "check
# name=ndctl-... result=... outcome=..." line; the host requires the
# series to give the outcome stock gives.  The series builds every range
# with its first strategy (auto); "used" names what auto chose for the
# last ZONE_DEVICE range of the workflow.
#
# Needs two NVDIMMs: region0 without labels (one raw namespace0.0), region1
# with a label area.

ND_CHECK_BYTES=$((64 << 20))

nd_mode() {
	ndctl list -N -n "$1" | tr -d ' \n' | sed -n 's/.*"mode":"\([a-z]*\)".*/\1/p'
}

# The device-dax character device in create-namespace's JSON, if any.
nd_chardev_of() {
	echo "$1" | tr -d ' \n' | sed -n 's/.*"chardev":"\(dax[0-9.]*\)".*/\1/p'
}

nd_mem_total_kb() {
	awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo
}

# Fill and verify the first $2 bytes of device-dax $1 with seed $3.
nd_dax_roundtrip() {
	/zdinit/zdcheck fill "$1" "$2" "$3" >/dev/null &&
		/zdinit/zdcheck verify "$1" "$2" "$3" >/dev/null
}

# Fill region1 with sub-section namespaces (48 MiB: not a multiple of a
# 128 MiB section, so neighbours share sections), alternating fsdax and
# devdax, enable each, then destroy them all: every namespace's memmap is
# built and torn down inside sections other namespaces still use.
nd_subsection() {
	ndctl disable-region region1 >/dev/null || fail "disable-region region1"
	ndctl init-labels -f nmem1 >/dev/null || fail "init-labels nmem1"
	ndctl enable-region region1 >/dev/null || fail "enable-region region1"
	# What is free before: the label area and the region's alignment
	# keep the region's available size below its size.
	free=$(cat /sys/bus/nd/devices/region1/available_size)
	created=0 failed_dax=0
	while [ $created -lt 64 ]; do
		case $((created % 2)) in
		0) set -- -m fsdax -M dev ;;
		1) set -- -m devdax -M dev -a 2M ;;
		esac
		out=$(ndctl create-namespace -r region1 -s 48M "$@" 2>&1) || break
		created=$((created + 1))
		dax=$(nd_chardev_of "$out")
		if [ -n "$dax" ]; then
			nd_dax_roundtrip "/dev/$dax" $((2 << 20)) $created ||
				failed_dax=$((failed_dax + 1))
		fi
		kmsg
	done
	ndctl destroy-namespace -f all -r region1 >/dev/null 2>&1 ||
		fail "destroy-namespace all -r region1"
	kmsg
	avail=$(cat /sys/bus/nd/devices/region1/available_size)
	result=pass
	[ $created -ge 2 ] && [ $failed_dax = 0 ] && [ "$avail" = "$free" ] ||
		result=fail
	check ndctl-subsection $result strategy=- used=$(last_strategy) \
		outcome=created-$created,dax-failed-$failed_dax,all-freed-$((avail == free))
}

# namespace0.0 as devdax with each alignment: the alignment read back and
# a mapping of it written and read.
nd_align() {
	outcome= result=pass
	for spec in "dev 4K 4096" "dev 2M 2097152" "mem 1G 1073741824"; do
		set -- $spec
		ndctl create-namespace -f -e namespace0.0 -m devdax -M $1 -a $2 \
			>/dev/null 2>&1 || { result=fail; outcome=$outcome$2-create-failed,; continue; }
		kmsg
		got=$(cat /sys/bus/dax/devices/dax0.0/align 2>/dev/null)
		bytes=$ND_CHECK_BYTES
		[ "$3" -gt $bytes ] && bytes=$3
		io=ok
		nd_dax_roundtrip /dev/dax0.0 $bytes 3 || io=failed
		[ "$got" = "$3" ] && [ $io = ok ] || result=fail
		outcome=$outcome$2-align-$got-io-$io,
	done
	check ndctl-align $result strategy=- used=$(last_strategy) outcome=${outcome%,}
}

# namespace0.0 through every mode and map location and back to raw.
nd_mode_cycle() {
	outcome= result=pass
	for spec in "fsdax dev" "devdax mem" "fsdax mem" "devdax dev" raw; do
		set -- $spec
		want=$1
		set -- -m $1 ${2:+-M $2}
		[ $want = devdax ] && set -- "$@" -a 2M
		ndctl create-namespace -f -e namespace0.0 "$@" >/dev/null 2>&1 ||
			{ result=fail; outcome=$outcome$want-failed,; continue; }
		kmsg
		mode=$(nd_mode namespace0.0)
		[ "$mode" = "$want" ] || result=fail
		outcome=$outcome$mode,
	done
	check ndctl-mode-cycle $result strategy=- used=$(last_strategy) outcome=${outcome%,}
}

# device-dax to System RAM and back, with its data path checked after:
# onlining's memmap path, then the ZONE_DEVICE path again.  These are the
# sysfs writes "daxctl reconfigure-device" makes; daxctl itself finds a
# device's memory blocks through /sys/devices/system/node, which a kernel
# without NUMA, like this guest's, does not have.
nd_reconfigure() {
	ndctl create-namespace -f -e namespace0.0 -m devdax -M dev -a 2M >/dev/null ||
		fail "create-namespace devdax for kmem"
	kmsg
	before=$(nd_mem_total_kb)
	to_ram=ok to_dax=ok io=ok
	auto_online=$(cat $MEMDIR/auto_online_blocks)
	echo online_movable > $MEMDIR/auto_online_blocks || fail "auto_online_blocks"
	hp_mark
	{ echo dax0.0 > /sys/bus/dax/drivers/device_dax/unbind &&
	  echo dax0.0 > /sys/bus/dax/drivers/kmem/new_id; } || to_ram=failed
	kmsg
	added_mb=$((($(nd_mem_total_kb) - before) >> 10))
	for block in $(hp_new_blocks); do
		echo offline > $MEMDIR/memory$block/state || to_dax=failed
	done
	kmsg
	{ echo dax0.0 > /sys/bus/dax/drivers/kmem/unbind &&
	  echo dax0.0 > /sys/bus/dax/drivers/kmem/remove_id &&
	  echo dax0.0 > /sys/bus/dax/drivers/device_dax/bind; } || to_dax=failed
	kmsg
	echo "$auto_online" > $MEMDIR/auto_online_blocks
	left_mb=$((($(nd_mem_total_kb) - before) >> 10))
	nd_dax_roundtrip /dev/dax0.0 $ND_CHECK_BYTES 5 || io=failed
	result=pass
	[ $to_ram = ok ] && [ $to_dax = ok ] && [ $io = ok ] &&
		[ $added_mb -gt 0 ] && [ $left_mb = 0 ] || result=fail
	# The memory added is the device's range cut to whole memory blocks:
	# the same on both kernels, so it belongs in the outcome.
	check ndctl-reconfigure $result strategy=- used=$(last_strategy) \
		outcome=system-ram-$to_ram-$added_mb-MiB,devdax-$to_dax-io-$io,left-$left_mb-MiB
}

ndctl_workflows() {
	set_strategy "${STRATEGIES%% *}"
	nd_mode_cycle
	nd_align
	nd_reconfigure
	nd_subsection
}
