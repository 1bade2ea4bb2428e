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

# Forward the kernel log to the host; remember the strategy the last
# memmap_init_zone_device() line names (stock 6.12 names none).
USED=none
kmsg() {
	log=$(dmesg -c)
	[ -n "$log" ] || return 0
	echo "$log" | sed 's/^/@@kmsg /'
	used=$(echo "$log" | sed -n 's/.*memmap_init_zone_device initialised .* in [0-9]*us, \([a-z]*\),.*/\1/p' | tail -n 1)
	[ -n "$used" ] && USED=$used
	return 0
}

fail() {
	emit "error $*"
	kmsg
	exit 1
}

# Run one measured step: everything the kernel logs while "$@" runs is
# attached to this step by the host.  step_run leaves the step open, with
# the command's output in $out, for a caller that reports more before
# step_close.
step_run() {
	label=$1
	shift
	kmsg
	emit "begin $label"
	out=$("$@" 2>&1) || { echo "$out"; fail "step '$label' failed: $*"; }
	kmsg
}

step_close() {
	emit "done $label"
}

step() {
	step_run "$@"
	step_close
}

# The strategies in round-robin order for round $1: each round starts one
# further along, so no strategy is always the first after a boot or a
# namespace change (which pays one-time costs such as faulting in RAM).
rotated() {
	set -- $(($1 - 1)) $STRATEGIES
	shift_by=$(($1 % ($# - 1)))
	shift
	i=0
	while [ $i -lt $shift_by ]; do
		first=$1
		shift
		set -- "$@" "$first"
		i=$((i + 1))
	done
	echo "$@"
}

# Run "$@" once per strategy per round, the strategy already selected (by
# $SET_METHOD, set_strategy unless a scenario family sets its own) and
# named by $strategy, the round by $round.
each_round() {
	round=1
	while [ $round -le "$ROUNDS" ]; do
		for strategy in $(rotated $round); do
			${SET_METHOD:-set_strategy} "$strategy"
			"$@"
		done
		round=$((round + 1))
	done
}

# "NAME" or "NAME@THREADS"; without @ the kernel chooses the thread count
# (0 to the knob), on a kernel that has one.
set_strategy() {
	[ "$1" = default ] && return 0
	[ -w $KNOBS/strategy ] || fail "kernel has no $KNOBS/strategy (not a zdinit kernel?)"
	name=${1%@*} threads=0
	[ "$name" = "$1" ] || threads=${1#*@}
	echo "$name" > $KNOBS/strategy || fail "kernel rejected strategy $name"
	if [ -w $KNOBS/threads ]; then
		echo "$threads" > $KNOBS/threads || fail "kernel rejected $threads threads"
	elif [ "$threads" != 0 ]; then
		fail "kernel has no $KNOBS/threads for strategy $1"
	fi
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

# First bind, then ROUNDS rebinds; each round runs every strategy once, in
# rotated order, so strategies are interleaved in time rather than measured
# in blocks.
bind_and_rebind() {
	mode=$1 map=$2 align=$3
	set -- ndctl create-namespace -f -e $NS -m "$mode" -M "$map"
	[ -n "$align" ] && set -- "$@" -a "$align"
	first=${STRATEGIES%% *}
	set_strategy "$first"
	step "phase=first strategy=$first align=$align" "$@"
	show_geometry "$align"
	each_round rebind_step
}

rebind_step() {
	step "phase=rebind strategy=$strategy align=$align iter=$round" rebind
}

devprivate() {
	mod=/zdinit/zd_memremap.ko
	[ -e $mod ] || fail "zd_memremap.ko missing from the initramfs"
	emit "geometry align= {\"size\":$SIZE,\"mode\":\"devprivate\"}"
	each_round memremap_step
}

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

# A pass/fail check the host tabulates: "check name=... result=pass|fail ...".
check() {
	name=$1 result=$2
	shift 2
	emit "check name=$name result=$result $*"
}

last_strategy() {
	echo "$USED"
}

# Persistent data must survive memmap re-initialisation: fill a device-dax
# mapping, then verify every byte after each rebind with each strategy.
integrity_devdax() {
	bytes=$(param check_bytes 536870912)
	set_strategy "${STRATEGIES%% *}"
	step "phase=first strategy=${STRATEGIES%% *} align=2M" \
		ndctl create-namespace -f -e $NS -m devdax -M dev -a 2M
	step "phase=fill strategy=none align=2M" /zdinit/zdcheck fill /dev/dax0.0 "$bytes" 7
	each_round devdax_verify_step
}

devdax_verify_step() {
	step "phase=rebind strategy=$strategy align=2M iter=$round" rebind
	if out=$(/zdinit/zdcheck verify /dev/dax0.0 "$bytes" 7 2>&1); then
		result=pass
	else
		result=fail
	fi
	check devdax-integrity $result strategy=$strategy \
		used=$(last_strategy) bytes=$bytes "detail=$(echo $out | tr ' ' _)"
}

# The same for files on ext4 mounted with DAX.
integrity_fsdax() {
	set_strategy "${STRATEGIES%% *}"
	step "phase=first strategy=${STRATEGIES%% *} align=" \
		ndctl create-namespace -f -e $NS -m fsdax -M dev
	mkfs.ext4 -q -F /dev/pmem0 || fail "mkfs.ext4 /dev/pmem0"
	mkdir -p /mnt
	mount -o dax /dev/pmem0 /mnt || fail "mount -o dax"
	grep -q "/mnt ext4 .*dax" /proc/mounts || fail "ext4 did not mount with dax"
	for i in 1 2 3 4 5 6 7 8; do
		dd if=/dev/urandom of=/mnt/file$i bs=1M count=8 2>/dev/null ||
			fail "writing /mnt/file$i"
	done
	(cd /mnt && sha256sum file*) > /tmp/sums
	umount /mnt
	each_round fsdax_verify_step
}

fsdax_verify_step() {
	step "phase=rebind strategy=$strategy align= iter=$round" rebind
	mount -o dax /dev/pmem0 /mnt || fail "remount -o dax"
	if (cd /mnt && sha256sum -c /tmp/sums >/dev/null 2>&1); then
		result=pass
	else
		result=fail
	fi
	umount /mnt
	check fsdax-integrity $result strategy=$strategy \
		used=$(last_strategy) files=8 bytes=$((8 * 8 << 20))
}

# With the page_ref_set tracepoint on, the memmap must take the slow path
# (a copy would not report set_page_count()), and events must be traced.
tracepoint_guard() {
	events=/sys/kernel/tracing/events/page_ref/page_ref_set/enable
	mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
	[ -w $events ] || fail "no page_ref_set tracepoint (CONFIG_DEBUG_PAGE_REF?)"
	set_strategy auto
	step "phase=first strategy=auto align=" ndctl create-namespace -f -e $NS -m fsdax -M dev
	step "phase=rebind strategy=auto align= iter=off1" rebind
	check tracepoint-off-before pass used=$(last_strategy)
	echo > /sys/kernel/tracing/trace
	echo 1 > $events
	step "phase=rebind strategy=auto align= iter=on" rebind
	echo 0 > $events
	check tracepoint-on pass used=$(last_strategy) \
		events=$(grep -c page_ref_set /sys/kernel/tracing/trace)
	step "phase=rebind strategy=auto align= iter=off2" rebind
	check tracepoint-off-after pass used=$(last_strategy)
}

# 50 create/destroy cycles of a map=mem namespace, MemFree read after each
# (zdinit judges the trend: a lost memmap would cost size/64 a cycle);
# kmemleak must be quiet.
churn() {
	cycles=$(param cycles 50)
	ndctl create-namespace -f -e $NS -m fsdax -M mem >/dev/null || fail "create"
	ndctl create-namespace -f -e $NS -m raw >/dev/null || fail "raw"
	i=0
	free=
	while [ $i -lt "$cycles" ]; do
		ndctl create-namespace -f -e $NS -m fsdax -M mem >/dev/null ||
			fail "create cycle $i"
		ndctl create-namespace -f -e $NS -m raw >/dev/null || fail "raw cycle $i"
		free="${free:+$free,}$(awk '/MemFree/ {print $2}' /proc/meminfo)"
		i=$((i + 1))
	done
	leaks=none
	if [ -w /sys/kernel/debug/kmemleak ]; then
		echo scan > /sys/kernel/debug/kmemleak
		sleep 5
		echo scan > /sys/kernel/debug/kmemleak
		leaks=$(grep -c "unreferenced object" /sys/kernel/debug/kmemleak)
	fi
	check churn pass cycles=$cycles memfree_kb=$free kmemleak=$leaks
}

# A DEVICE_PRIVATE range larger than the physical address space (128 TiB
# against the guest's 46 bits) must be refused without side effects, and a
# normal one must still work afterwards.  (A range whose memmap merely does
# not fit in RAM is not refused: stock 6.12 and the series alike OOM-kill
# their way through vmemmap allocation, so that is not tested here.)
devprivate_too_large() {
	mod=/zdinit/zd_memremap.ko
	if insmod $mod type=private size_mb=$((128 << 20)) 2>/dev/null; then
		rmmod zd_memremap
		check devprivate-too-large fail "detail=128T_memremap_succeeded"
		return
	fi
	insmod $mod type=private size_mb=1024 || fail "1G memremap after the failure"
	rmmod zd_memremap
	check devprivate-too-large pass "detail=128T_refused,1G_ok"
}

# The kernel's own HMM selftests (tools/testing/selftests/mm/hmm-tests)
# against test_hmm.ko, whose DEVICE_PRIVATE memory comes from
# memremap_pages(): twice per strategy.  What fails in both runs is the
# outcome compared with stock's; a test that fails in one run only is
# reported as flaky (under TCG the device-exclusive test has failed once
# where every other run, stock's included, passed it).
hmm_run() {
	insmod /zdinit/test_hmm.ko || fail "insmod test_hmm.ko"
	/zdinit/hmm-tests > /tmp/hmm.out 2>&1
	rmmod test_hmm || fail "rmmod test_hmm"
	grep -q "# Totals:" /tmp/hmm.out || { cat /tmp/hmm.out; fail "hmm-tests printed no totals"; }
	awk '/^not ok/ {print $4}' /tmp/hmm.out | sort > "$1"
}

hmm_selftests() {
	for strategy in $STRATEGIES; do
		set_strategy "$strategy"
		hmm_run /tmp/hmm.failed1
		totals=$(grep "# Totals:" /tmp/hmm.out | tail -1)
		hmm_run /tmp/hmm.failed2
		failed=$(awk 'NR == FNR { a[$0] = 1; next } $0 in a' \
			/tmp/hmm.failed1 /tmp/hmm.failed2 | tr '\n' , )
		flaky=$(awk 'NR == FNR { a[$0] = 1; next } { b[$0] = 1 }
			END { for (t in a) if (!(t in b)) print t
			      for (t in b) if (!(t in a)) print t }' \
			/tmp/hmm.failed1 /tmp/hmm.failed2 | sort | tr '\n' , )
		set -- $(echo "$totals" | tr ':' ' ')
		# "# Totals pass N fail N xfail N xpass N skip N error N", first run
		check hmm-selftests pass strategy=$strategy used=$(last_strategy) \
			pass=$4 fail=$6 skip=${12} error=${14} failed=${failed:-none} \
			flaky=${flaky:-none}
	done
}

# Odd geometry: two NVDIMMs at once.  The first is label-less and becomes
# 1G-aligned devdax; the second has a label area and three namespaces in
# its region, sized off section (128M) boundaries (the region wants
# multiples of 16M), map=dev and map=mem.  Each namespace is rebound with
# each strategy; with zdinit.verify=1 every memmap is also compared with
# the slow path.
odd_geometry() {
	ndctl disable-region region1 >/dev/null || fail "disable-region"
	ndctl init-labels -f nmem1 >/dev/null || fail "init-labels"
	ndctl enable-region region1 >/dev/null || fail "enable-region"
	# The first, label-less NVDIMM: its raw namespace as 1G devdax.
	ndctl create-namespace -f -e namespace0.0 -m devdax -M mem -a 1G >/dev/null ||
		fail "create-namespace namespace0.0 devdax 1G"
	namespaces="namespace0.0"
	emit "geometry align=1G $(ndctl list -N -n namespace0.0 | tr -d ' \n')"
	for spec in "region1 fsdax dev 1008M 2M" "region1 devdax dev 704M 2M" \
		    "region1 fsdax mem 272M 2M"; do
		set -- $spec
		out=$(ndctl create-namespace -r $1 -m $2 -M $3 -s $4 -a $5 2>&1) ||
			{ echo "$out"; fail "create-namespace $spec"; }
		ns=$(echo "$out" | sed -n 's/.*"dev":"\([^"]*\)".*/\1/p' | head -1)
		[ -n "$ns" ] || ns=$(echo "$out" | tr -d ' \n' | sed -n 's/.*"dev":"\([^"]*\)".*/\1/p')
		namespaces="$namespaces $ns"
		emit "geometry align=$5 $(ndctl list -N -n $ns | tr -d ' \n')"
	done
	for strategy in $STRATEGIES; do
		set_strategy "$strategy"
		for ns in $namespaces; do
			step "phase=rebind strategy=$strategy align= ns=$ns" \
				sh -c "ndctl disable-namespace $ns && ndctl enable-namespace $ns"
			check odd-geometry pass strategy=$strategy used=$(last_strategy) ns=$ns
		done
	done
}

# The kernel's gup_test pinning and unpinning a whole devdax mapping of
# 2M compound pages (pin_user_pages_fast() takes one reference per compound
# head), after a rebind with each strategy.
gup_selftests() {
	mb=$(param gup_mb 1024)
	set_strategy "${STRATEGIES%% *}"
	step "phase=first strategy=${STRATEGIES%% *} align=2M" \
		ndctl create-namespace -f -e $NS -m devdax -M dev -a 2M
	for strategy in $STRATEGIES; do
		set_strategy "$strategy"
		step "phase=rebind strategy=$strategy align=2M iter=1" rebind
		for mode in -b -a; do
			out=$(/zdinit/gup_test -S -f /dev/dax0.0 -m $mb -n 512 $mode 2>&1)
			if echo "$out" | grep -q "^ok 1" &&
			   ! echo "$out" | grep -q "SKIP\|not ok"; then
				result=pass
			else
				echo "$out"
				result=fail
			fi
			check gup-devdax $result strategy=$strategy used=$(last_strategy) \
				mode=$mode mb=$mb
		done
	done
}

# What the kernel's sanitizers and debug options say while ranges come and
# go: every strategy runs, KASAN checking the stores of each.
debug_kernel() {
	set_strategy auto
	step "phase=first strategy=auto align=" ndctl create-namespace -f -e $NS -m fsdax -M dev
	for strategy in $STRATEGIES; do
		set_strategy "$strategy"
		step "phase=rebind strategy=$strategy align= iter=1" rebind
		check debug-strategy pass strategy=$strategy used=$(last_strategy)
	done
}

report_verify() {
	[ "$VERIFY" = 1 ] || return 0
	emit "verify checked=$(cat $KNOBS/verify_checked) mismatches=$(cat $KNOBS/verify_mismatches) unchecked=$(cat $KNOBS/verify_unchecked)"
}

# The memmap check must catch a fast path that leaves struct pages
# unwritten, even where the device still holds correct ones from the bind
# before: rebind with the slow path, then with each fast strategy told to
# skip $skip struct pages; exactly that many must differ.
verify_catches_skip() {
	skip=100
	[ -w $KNOBS/inject_skip ] || fail "kernel has no $KNOBS/inject_skip"
	for spec in "fsdax dev" "devdax dev 2M"; do
		set -- $spec
		set_strategy slow
		step "phase=first strategy=slow align=$3" \
			ndctl create-namespace -f -e $NS -m $1 -M $2 ${3:+-a $3}
		for strategy in template stream; do
			set_strategy slow
			step "phase=rebind strategy=slow align=$3 iter=clean" rebind
			before=$(cat $KNOBS/verify_mismatches)
			echo $skip > $KNOBS/inject_skip
			set_strategy "$strategy"
			step "phase=rebind strategy=$strategy align=$3 iter=skip" rebind
			caught=$(($(cat $KNOBS/verify_mismatches) - before))
			result=fail
			[ "$caught" = "$skip" ] && result=pass
			check verify-catches-skip $result strategy=$strategy \
				used=$(last_strategy) mode=$1-$2$3 skipped=$skip caught=$caught
		done
	done
	# The injected mismatches are expected: start the totals afresh.
	VERIFY=0
}

emit "start scenario=$SCENARIO kernel=$(uname -r) size=$SIZE"
# The kernel's own timing line is a pr_debug(): switch it on.
echo 'func memmap_init_zone_device +p' > /sys/kernel/debug/dynamic_debug/control ||
	fail "cannot enable the memmap_init_zone_device pr_debug (DYNAMIC_DEBUG?)"
if [ "$VERIFY" = 1 ]; then
	[ -w $KNOBS/verify ] || fail "kernel has no $KNOBS/verify"
	echo 1 > $KNOBS/verify
fi
. /zdinit/clear.sh
. /zdinit/hotplug.sh
. /zdinit/ndctl.sh
. /zdinit/onlining-selftests.sh
. /zdinit/store-rule.sh
report_caches
case "$SCENARIO" in
clear) clear_bench ;;
clear-zero) clear_zero ;;
clear-selftests) clear_selftests ;;
fsdax-dev) bind_and_rebind fsdax dev "" ;;
fsdax-mem) bind_and_rebind fsdax mem "" ;;
devdax-dev)
	for align in $ALIGNS; do bind_and_rebind devdax dev "$align"; done ;;
devdax-mem)
	for align in $ALIGNS; do bind_and_rebind devdax mem "$align"; done ;;
devprivate) devprivate ;;
kmem) kmem ;;
virtio-mem) virtio_mem ;;
hotplug-use) hotplug_use ;;
hotplug-verify) hotplug_verify ;;
hotplug-tracepoint) hotplug_tracepoint ;;
onlining-selftests) onlining_selftests ;;
memremap-matrix) memremap_matrix ;;
probe) ;;
integrity-devdax) integrity_devdax ;;
integrity-fsdax) integrity_fsdax ;;
tracepoint) tracepoint_guard ;;
churn) churn ;;
devprivate-too-large) devprivate_too_large ;;
hmm) hmm_selftests ;;
odd-geometry) odd_geometry ;;
ndctl-workflows) ndctl_workflows ;;
gup) gup_selftests ;;
verify-catches-skip) verify_catches_skip ;;
boot-bind) boot_bind ;;
debug) debug_kernel; churn; devprivate_too_large ;;
*) fail "unknown scenario '$SCENARIO'" ;;
esac
report_verify
kmsg
