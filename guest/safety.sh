# zdinit guest: the safety checks of ZONE_DEVICE ranges (zdinit/checks/safety.py),
# sourced by scenario.sh: data kept across rebinds, the page_ref_set
# tracepoint, namespace churn, refused and odd geometries, and the
# kernel's own HMM and gup selftests.  Each reports "check" lines the
# host tabulates; namespaces are rebound with rebind.sh's rebind.

# Persistent data must survive memmap re-initialisation: fill a device-dax
# mapping, then verify every byte after each rebind with each strategy.
integrity_devdax() {
	bytes=$(param check_bytes 536870912)
	set_strategy "${STRATEGIES%% *}"
	step "phase=first strategy=${STRATEGIES%% *} align=2M" \
		ndctl create-namespace -f -e "$NS" -m devdax -M dev -a 2M
	step "phase=fill strategy=none align=2M" /zdinit/zdcheck fill /dev/dax0.0 "$bytes" 7
	each_round devdax_verify_step
}

# shellcheck disable=SC2154  # round: each_round (common.sh)
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

# An fsdax namespace bound with strategy $1 (already set), a fresh ext4
# on it mounted with DAX at /mnt.
fsdax_mounted() {
	step "phase=first strategy=$1 align=" \
		ndctl create-namespace -f -e "$NS" -m fsdax -M dev
	mkfs.ext4 -q -F /dev/pmem0 || fail "mkfs.ext4 /dev/pmem0"
	mkdir -p /mnt
	mount -o dax /dev/pmem0 /mnt || fail "mount -o dax"
	grep -q "/mnt ext4 .*dax" /proc/mounts || fail "ext4 did not mount with dax"
}

# The same for files on ext4 mounted with DAX.
integrity_fsdax() {
	set_strategy "${STRATEGIES%% *}"
	fsdax_mounted "${STRATEGIES%% *}"
	for i in 1 2 3 4 5 6 7 8; do
		dd if=/dev/urandom of=/mnt/file$i bs=1M count=8 2>/dev/null ||
			fail "writing /mnt/file$i"
	done
	(cd /mnt && sha256sum file*) > /tmp/sums
	umount /mnt
	each_round fsdax_verify_step
}

# shellcheck disable=SC2154  # round: each_round (common.sh)
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

# The memmap built on demand with its background build held back, so that
# every unit but the first waits to be built: each path that reaches a
# struct page must build it first.  A device-dax fault on the first and
# the last unit, data written and read back; unbind and rebind with units
# pending; then ext4 mounted with DAX on an fsdax namespace, a file mapped
# and written through its mapping (faults that take pfns from
# pmem_dax_direct_access()) and files written with write(), all read back
# across a rebind; then the hold released and the background build left
# to finish.  The range is legacy pmem with RAM above it, so that the pfn
# walkers that stop at max_pfn cross its pending units.
on_demand_held() {
	[ -w $KNOBS/hold_background ] || fail "kernel has no $KNOBS/hold_background"
	legacy_pmem_probed
	set_strategy demand
	echo Y > $KNOBS/hold_background
	step "phase=first strategy=demand align=2M" \
		ndctl create-namespace -f -e "$NS" -m devdax -M dev -a 2M
	bytes=$(cat /sys/bus/dax/devices/dax0.0/size)
	if out=$(/zdinit/zdcheck ends /dev/dax0.0 "$bytes" 11 2>&1); then
		result=pass
	else
		result=fail
	fi
	check held-devdax-ends $result strategy=demand used=$(last_strategy) \
		bytes=$bytes "detail=$(echo $out | tr ' ' _)"
	for cycle in 1 2 3; do
		step "phase=rebind strategy=demand align=2M iter=held$cycle" rebind
	done
	/zdinit/zdcheck ends /dev/dax0.0 "$bytes" 11 >/dev/null 2>&1 && result=pass || result=fail
	check held-rebind $result cycles=3
	held_walkers "$bytes"
	fsdax_mounted demand
	mapped=$((64 << 20))
	fallocate -l $mapped /mnt/mapped || fail "fallocate /mnt/mapped"
	/zdinit/zdcheck fill /mnt/mapped $mapped 13 >/dev/null || fail "zdcheck fill /mnt/mapped"
	for i in 1 2 3 4; do
		dd if=/dev/urandom of=/mnt/file$i bs=1M count=4 2>/dev/null ||
			fail "writing /mnt/file$i"
	done
	(cd /mnt && sha256sum file*) > /tmp/sums
	umount /mnt
	step "phase=rebind strategy=demand align= iter=held-fsdax" rebind
	mount -o dax /dev/pmem0 /mnt || fail "remount -o dax"
	(cd /mnt && sha256sum -c /tmp/sums >/dev/null 2>&1) &&
		out=$(/zdinit/zdcheck verify /mnt/mapped $mapped 13 2>&1) &&
		result=pass || result=fail
	umount /mnt
	check held-fsdax $result files=4 mapped=$mapped "detail=$(echo $out | tr ' ' _)"
	echo N > $KNOBS/hold_background
	step "phase=rebind strategy=demand align= iter=released" settled rebind
	# settle_background fails the job if the build never ends.
	check held-released pass
}

# While units of the device-dax memmap are pending: /proc/kpageflags over
# its pfns, test_hmm loaded and removed, and where the kernel has them
# (the held kernel), page_owner from the device's first pfn on and a
# memory failure injected into a pending unit.  On the held kernel a
# read of a struct page before its unit is built is a BUG (DEBUG_VM's
# poisoning), which the splat check sees; kpageflags must also report
# no flag for any pfn (it reads only online pfns' struct pages), and the
# failure must be handled as one on a dax page.
held_walkers() {
	dax=/sys/bus/dax/devices/dax0.0
	first=$(($(cat $dax/resource) >> 12))
	pages=$(($1 >> 12))
	# 8 bytes a pfn, read in whole 4 KiB blocks: the range is 2 MiB aligned.
	out=$(dd if=/proc/kpageflags of=/tmp/kpageflags bs=4096 \
		skip=$((first / 512)) count=$((pages / 512)) 2>&1)
	flags=$(od -An -v -tx8 /tmp/kpageflags | tr -s ' ' '\n' | grep . |
		sort | uniq -c | tr -s ' \n' '__')
	rm -f /tmp/kpageflags
	[ "$flags" = "_${pages}_0000000000000000_" ] && result=pass || result=fail
	check held-kpageflags $result first_pfn=$first pfns=$pages "flags=$flags" \
		"detail=$(echo $out | tr ' ' _)"
	insmod /zdinit/test_hmm.ko && rmmod test_hmm && result=pass || result=fail
	check held-test-hmm $result
	if [ -e /sys/kernel/debug/page_owner ]; then
		out=$(dd if=/sys/kernel/debug/page_owner of=/dev/null bs=4096 \
			iflag=skip_bytes skip=$first 2>&1) && result=pass || result=fail
		check held-page-owner $result from_pfn=$first "detail=$(echo $out | tr ' ' _)"
	fi
	[ -e /sys/kernel/debug/hwpoison/corrupt-pfn ] || return 0
	pfn=$((first + pages / 2 + 1))
	kmsg
	echo $pfn > /sys/kernel/debug/hwpoison/corrupt-pfn 2>/dev/null
	dmesg | grep -q "Memory failure: $(printf '%#x' $pfn): recovery action for dax page" &&
		result=pass || result=fail
	check held-memory-failure $result pfn=$pfn
}

# With the page_ref_set tracepoint on, the memmap must take the slow path
# (a copy would not report set_page_count()), and events must be traced.
tracepoint_guard() {
	events=/sys/kernel/tracing/events/page_ref/page_ref_set/enable
	mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
	[ -w $events ] || fail "no page_ref_set tracepoint (CONFIG_DEBUG_PAGE_REF?)"
	set_strategy auto
	step "phase=first strategy=auto align=" ndctl create-namespace -f -e "$NS" -m fsdax -M dev
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
	ndctl create-namespace -f -e "$NS" -m fsdax -M mem >/dev/null || fail "create"
	ndctl create-namespace -f -e "$NS" -m raw >/dev/null || fail "raw"
	i=0
	free=
	while [ $i -lt "$cycles" ]; do
		ndctl create-namespace -f -e "$NS" -m fsdax -M mem >/dev/null ||
			fail "create cycle $i"
		ndctl create-namespace -f -e "$NS" -m raw >/dev/null || fail "raw cycle $i"
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
		ndctl create-namespace -f -e "$NS" -m devdax -M dev -a 2M
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
	step "phase=first strategy=auto align=" ndctl create-namespace -f -e "$NS" -m fsdax -M dev
	for strategy in $STRATEGIES; do
		set_strategy "$strategy"
		step "phase=rebind strategy=$strategy align= iter=1" rebind
		check debug-strategy pass strategy=$strategy used=$(last_strategy)
	done
}
