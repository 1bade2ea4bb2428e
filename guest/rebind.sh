# zdinit guest: the rebind family, sourced by scenario.sh.  The NVDIMM's
# namespace0.0 is bound once, then rebound ROUNDS times with each
# strategy, the kernel timing each memmap_init_zone_device() (the line
# zdinit/families/rebind.py reads); DEVICE_PRIVATE ranges come and go the same way
# through module/zd_memremap.c.  The memmap equality test's ZONE_DEVICE
# scenarios (zdinit/checks/memmap_equality.py) are here too, as hotplug.sh holds those
# of onlined memory.  rebind and show_geometry serve safety.sh and
# hotplug.sh as well.

NS=namespace0.0

rebind() {
	ndctl disable-namespace $NS >/dev/null && ndctl enable-namespace $NS >/dev/null
}

show_geometry() {
	emit "geometry align=$1 $(ndctl list -N -n $NS 2>/dev/null | tr -d ' \n')"
	for dev in /sys/bus/nd/devices/pfn* /sys/bus/nd/devices/dax*; do
		[ -e "$dev/resource" ] || continue
		cat "$dev/resource" > /dev/null 2>&1 || continue
		emit "device $(basename "$dev") resource=$(cat "$dev/resource") size=$(cat "$dev/size" 2>/dev/null) align=$(cat "$dev/align" 2>/dev/null)"
	done
	emit "region size=$(cat /sys/bus/nd/devices/region0/size)"
}

# First bind, then ROUNDS rebinds; each round runs every strategy once, in
# rotated order, so strategies are interleaved in time rather than measured
# in blocks.
bind_and_rebind() {
	mode=$1 map=$2 align=$3
	set -- ndctl create-namespace -f -e $NS -m "$mode" -M "$map"
	[ -n "$align" ] && set -- "$@" -a "$align"
	first=${STRATEGIES%% *}
	set_strategy "$first"
	trace_arm rebind
	step "phase=first strategy=$first align=$align" settled "$@"
	show_geometry "$align"
	each_round rebind_step
}

# shellcheck disable=SC2154  # round: each_round (common.sh)
rebind_step() {
	step_begin "phase=rebind strategy=$strategy align=$align iter=$round"
	step_command rebind
	[ "$mode" = devdax ] && first_faults
	settle_background
	step_report
	step_close
}

# The first write to the first and to the last 2 MiB of the device-dax
# mapping, right after the bind: each a fault, the last one, with the
# memmap built on demand, on a unit the background build has not reached.
first_faults() {
	out=$(/zdinit/zdcheck fault /dev/dax0.0 "$(cat /sys/bus/dax/devices/dax0.0/size)" 5) ||
		fail "zdcheck fault: $out"
	emit "fault ${out#zdcheck: fault }"
}

# shellcheck disable=SC2153  # SIZE: scenario.sh
devprivate() {
	mod=/zdinit/zd_memremap.ko
	[ -e $mod ] || fail "zd_memremap.ko missing from the initramfs"
	emit "geometry align= {\"size\":$SIZE,\"mode\":\"devprivate\"}"
	trace_arm rebind
	each_round memremap_step
}

# shellcheck disable=SC2154  # round: each_round (common.sh)
memremap_step() {
	step "phase=rebind strategy=$strategy align= iter=$round" \
		insmod /zdinit/zd_memremap.ko type=private size_mb=$((SIZE >> 20))
	rmmod zd_memremap || fail "rmmod zd_memremap"
}

# Module-driven geometries for the memmap equality test: every strategy on
# ranges that start and end off section and pageblock boundaries.
memremap_matrix() {
	mod=/zdinit/zd_memremap.ko
	for geometry in $(param geometries "" | tr + ' '); do
		# type:size_mb:offset_mb:shift[:dump]
		IFS=: read -r type size offset shift dump <<EOF
$geometry
EOF
		for strategy in $STRATEGIES; do
			set_strategy "$strategy"
			step "phase=selftest strategy=$strategy geometry=$geometry" \
				insmod $mod type=$type size_mb=$size offset_mb=$offset \
				shift=$shift dump=${dump:-0}
			rmmod zd_memremap || fail "rmmod zd_memremap"
		done
	done
}

# The memmap check must catch a fast path that leaves struct pages
# unwritten, even where the device still holds correct ones from the bind
# before: rebind with the slow path, then with each fast strategy told to
# skip $skip struct pages; exactly that many must differ.
verify_catches_skip() {
	skip=100
	[ -w "$KNOBS/inject_skip" ] || fail "kernel has no $KNOBS/inject_skip"
	for spec in "fsdax dev" "devdax dev 2M"; do
		set -- $spec
		set_strategy slow
		step "phase=first strategy=slow align=$3" \
			ndctl create-namespace -f -e $NS -m $1 -M $2 ${3:+-a $3}
		for strategy in template stream; do
			set_strategy slow
			step "phase=rebind strategy=slow align=$3 iter=clean" rebind
			before=$(cat "$KNOBS/verify_mismatches")
			echo $skip > "$KNOBS/inject_skip"
			set_strategy "$strategy"
			step "phase=rebind strategy=$strategy align=$3 iter=skip" rebind
			caught=$(($(cat "$KNOBS/verify_mismatches") - before))
			result=fail
			[ "$caught" = "$skip" ] && result=pass
			check verify-catches-skip $result strategy=$strategy \
				used=$(last_strategy) mode=$1-$2$3 skipped=$skip caught=$caught
		done
	done
	# The injected mismatches are expected: start the totals afresh.
	# shellcheck disable=SC2034  # report_verify (common.sh) reads it
	VERIFY=0
}
