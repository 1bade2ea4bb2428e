#!/bin/sh
# zdinit guest scenario runner.  Parameters come from the kernel command
# line (zdinit.KEY=VALUE); results go to the console as "@@zdinit" marker
# lines, each followed by the kernel's own log lines ("@@kmsg ...") that
# the step produced.  The host parses nothing else.

param() {
	for word in $(cat /proc/cmdline); do
		case "$word" in
		zdinit.$1=*) echo "${word#zdinit.$1=}"; return ;;
		esac
	done
	echo "$2"
}

SCENARIO=$(param scenario none)
SIZE=$(param size 0)
ROUNDS=$(param n 1)
ALIGNS=$(param align 2M | tr , ' ')
STRATEGIES=$(param strategies default | tr , ' ')
VERIFY=$(param verify 0)
KNOBS=/sys/kernel/debug/zone_device_memmap
NS=namespace0.0

emit() { echo "@@zdinit $*"; }

kmsg() { dmesg -c | sed 's/^/@@kmsg /'; }

fail() {
	emit "error $*"
	kmsg
	exit 1
}

# Run one measured step: everything the kernel logs while "$@" runs is
# attached to this step by the host.
step() {
	label=$1
	shift
	kmsg
	emit "begin $label"
	out=$("$@" 2>&1) || { echo "$out"; fail "step '$label' failed: $*"; }
	kmsg
	emit "done $label"
}

set_strategy() {
	[ "$1" = default ] && return 0
	[ -w $KNOBS/strategy ] || fail "kernel has no $KNOBS/strategy (not a zdinit kernel?)"
	echo "$1" > $KNOBS/strategy || fail "kernel rejected strategy $1"
}

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

# First bind, then ROUNDS rebinds; each round runs every strategy once, so
# strategies are interleaved in time rather than measured in blocks.
bind_and_rebind() {
	mode=$1 map=$2 align=$3
	set -- ndctl create-namespace -f -e $NS -m "$mode" -M "$map"
	[ -n "$align" ] && set -- "$@" -a "$align"
	first=${STRATEGIES%% *}
	set_strategy "$first"
	step "phase=first strategy=$first align=$align" "$@"
	show_geometry "$align"
	round=1
	while [ $round -le "$ROUNDS" ]; do
		for strategy in $STRATEGIES; do
			set_strategy "$strategy"
			step "phase=rebind strategy=$strategy align=$align iter=$round" rebind
		done
		round=$((round + 1))
	done
}

devprivate() {
	mod=/zdinit/zd_memremap.ko
	[ -e $mod ] || fail "zd_memremap.ko missing from the initramfs"
	emit "geometry align= {\"size\":$SIZE,\"mode\":\"devprivate\"}"
	round=1
	while [ $round -le "$ROUNDS" ]; do
		for strategy in $STRATEGIES; do
			set_strategy "$strategy"
			step "phase=rebind strategy=$strategy align= iter=$round" \
				insmod $mod type=private size_mb=$((SIZE >> 20))
			rmmod zd_memremap || fail "rmmod zd_memremap"
		done
		round=$((round + 1))
	done
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

report_verify() {
	[ "$VERIFY" = 1 ] || return 0
	emit "verify checked=$(cat $KNOBS/verify_checked) mismatches=$(cat $KNOBS/verify_mismatches)"
}

emit "start scenario=$SCENARIO kernel=$(uname -r) size=$SIZE"
# The kernel's own timing line is a pr_debug(): switch it on.
echo 'func memmap_init_zone_device +p' > /sys/kernel/debug/dynamic_debug/control ||
	fail "cannot enable the memmap_init_zone_device pr_debug (DYNAMIC_DEBUG?)"
if [ "$VERIFY" = 1 ]; then
	[ -w $KNOBS/verify ] || fail "kernel has no $KNOBS/verify"
	echo 1 > $KNOBS/verify
fi
case "$SCENARIO" in
fsdax-dev) bind_and_rebind fsdax dev "" ;;
fsdax-mem) bind_and_rebind fsdax mem "" ;;
devdax-dev)
	for align in $ALIGNS; do bind_and_rebind devdax dev "$align"; done ;;
devdax-mem)
	for align in $ALIGNS; do bind_and_rebind devdax mem "$align"; done ;;
devprivate) devprivate ;;
memremap-matrix) memremap_matrix ;;
probe) ;;
*) fail "unknown scenario '$SCENARIO'" ;;
esac
report_verify
kmsg
