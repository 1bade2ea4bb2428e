# zdinit guest: memory onlining scenarios (kmem, virtio-mem), sourced by
# scenario.sh.  Memory is added once, then offlined and onlined again
# ROUNDS times into each zone of zdinit.zones; every step reports the
# kernel's own lines (patch 0011's move_pfn_range_to_zone and online_pages
# timings) and, in a "wall" marker, the wall time of the whole operation
# as user space sees it.

MEMDIR=/sys/devices/system/memory
HP_ZONES=$(param zones movable,normal | tr , ' ')
# Whether the memmap of added memory goes into that memory (Y/N): a boot
# parameter, read once; empty on a kernel without memory hotplug.
HP_MOM=$(cat /sys/module/memory_hotplug/parameters/memmap_on_memory 2>/dev/null)

hp_state() {
	case "$1" in
	movable) echo online_movable ;;
	normal) echo online_kernel ;;
	*) fail "unknown zone '$1'" ;;
	esac
}

hp_blocks() {
	for block in $MEMDIR/memory[0-9]*; do
		echo "${block##*memory}"
	done | sort -n
}

# The blocks present now that were not in the list saved by hp_mark.
hp_mark() {
	hp_blocks > /tmp/hp-before
}

hp_new_blocks() {
	hp_blocks | grep -vxF -f /tmp/hp-before
}

# The timing lines are pr_debug()s: switch them on, on a kernel with
# patch 0011 (zdinit.timing=1); without, the guest reports wall times only.
hp_debug() {
	trace_arm onlining
	[ "$(param timing 0)" = 1 ] || return 0
	for func in move_pfn_range_to_zone online_pages; do
		echo "func $func +p" > /sys/kernel/debug/dynamic_debug/control ||
			fail "cannot enable the $func pr_debug"
	done
}

# Like step, but the command prints "us=..." (zdonline or hp_timed), which
# is passed on in a "wall" marker.
hp_step() {
	step_run "$@"
	emit "wall $out"
	step_close
}

hp_timed() {
	t0=$(/zdinit/zdonline now)
	"$@" || return 1
	t1=$(/zdinit/zdonline now)
	echo "us=$((t1 - t0))"
}

hp_info() {
	bytes=$(cat $MEMDIR/block_size_bytes)
	emit "hotplug blocks=$(echo $HP_BLOCKS | wc -w) block_bytes=$((0x$bytes)) mom=$HP_MOM"
}

# With zdinit.contiguity=1 (a kernel with the contiguity check patch):
# after step $1, every populated zone's contiguous flag and what a walk of
# the zone finds now, one "contiguity" marker per zone.
CONTIGUITY=/sys/kernel/debug/zone_contiguity
hp_contiguity() {
	[ "$(param contiguity 0)" = 1 ] || return 0
	[ -r $CONTIGUITY ] || fail "kernel has no $CONTIGUITY"
	lines=$(cat $CONTIGUITY) || fail "reading $CONTIGUITY"
	echo "$lines" | while read -r line; do
		emit "contiguity step=$1 $line"
	done
}

# With the contiguity check, the added blocks being offline: online them
# into zone $1 while module/zd_failonline.c refuses MEM_GOING_ONLINE, so
# that online_pages() takes back every range it moved into the zone;
# every block must fail, and be refused by the module.
hp_failed_online() {
	[ "$(param contiguity 0)" = 1 ] || return 0
	insmod /zdinit/zd_failonline.ko || fail "insmod zd_failonline"
	for block in $HP_BLOCKS; do
		/zdinit/zdonline "$(hp_state $1)" $block >/dev/null 2>&1 &&
			fail "block $block onlined although zd_failonline refused it"
	done
	refused=$(cat /sys/module/zd_failonline/parameters/refused)
	rmmod zd_failonline || fail "rmmod zd_failonline"
	[ "$refused" = "$(echo $HP_BLOCKS | wc -w)" ] ||
		fail "zd_failonline refused $refused blocks, not all of $HP_BLOCKS"
	kmsg
	hp_contiguity "failed-online:$1:$2"
}

# Offline every added block, then online it into the next zone; the
# rounds rotate the zones.  On a kernel with the template path for
# onlining, zdinit.strategies names the memmap strategies to online with
# (the ZONE_DEVICE knob, which onlining follows: auto, slow, template),
# each once per zone and round, in rotated order; "default" leaves the
# knob alone.
# With the contiguity check, each step is followed by the zones'
# contiguity, and once a round onlining into each zone is made to fail.
hp_cycles() {
	zone=$1
	round=1
	while [ $round -le "$ROUNDS" ]; do
		trace_round $round
		failed=no
		for next in $HP_ZONES; do
			for strategy in $(rotated $round); do
				hp_step "phase=offline strategy=default zone=$zone mom=$HP_MOM iter=$round" \
					/zdinit/zdonline offline $HP_BLOCKS
				hp_contiguity "offline:$zone:$round"
				if [ $failed = no ]; then
					for failing in $HP_ZONES; do
						hp_failed_online "$failing" $round
					done
					failed=yes
				fi
				set_strategy "$strategy"
				hp_step "phase=online strategy=$strategy zone=$next mom=$HP_MOM iter=$round" \
					/zdinit/zdonline "$(hp_state $next)" $HP_BLOCKS
				hp_contiguity "online:$next:$round"
				zone=$next
			done
		done
		round=$((round + 1))
	done
}

# With zdinit.verify=1, the kernel checks every memmap it builds from
# templates against the slow path (hotplug_verify_checked counts the
# onlined struct pages among them).
hp_report_verify() {
	[ "$VERIFY" = 1 ] || return 0
	[ -r $KNOBS/hotplug_verify_checked ] ||
		fail "kernel has no $KNOBS/hotplug_verify_checked"
	emit "hpverify hotplug_checked=$(cat $KNOBS/hotplug_verify_checked)"
}

hp_kmem_bind() {
	echo dax0.0 > /sys/bus/dax/drivers/kmem/new_id
}

# A devdax namespace of the NVDIMM handed to the kmem driver (what
# "daxctl reconfigure-device --mode=system-ram --no-online" does, through
# sysfs), its memmap in the new memory itself when booted with
# memory_hotplug.memmap_on_memory=1.
kmem() {
	hp_debug
	hp_contiguity "boot"
	hp_kmem_add
	first=${HP_ZONES%% *}
	set_strategy "${STRATEGIES%% *}"
	hp_contiguity "added"
	hp_step "phase=first strategy=${STRATEGIES%% *} zone=$first mom=$HP_MOM" \
		/zdinit/zdonline "$(hp_state $first)" $HP_BLOCKS
	hp_contiguity "first:$first"
	hp_cycles "$first"
	hp_report_verify
}

# The namespace added to kmem, its blocks offline in $HP_BLOCKS.
hp_kmem_add() {
	ndctl create-namespace -f -e $NS -m devdax -M dev -a 2M >/dev/null ||
		fail "create-namespace devdax"
	show_geometry 2M
	dax=/sys/bus/dax/devices/dax0.0
	echo dax0.0 > /sys/bus/dax/drivers/device_dax/unbind ||
		fail "unbind dax0.0 from device_dax"
	if [ "$HP_MOM" = Y ]; then
		echo 1 > $dax/memmap_on_memory || fail "dax0.0 memmap_on_memory"
	fi
	echo offline > $MEMDIR/auto_online_blocks || fail "auto_online_blocks"
	hp_mark
	hp_step "phase=add strategy=default zone= mom=$HP_MOM" hp_timed hp_kmem_bind
	HP_BLOCKS=$(hp_new_blocks)
	[ -n "$HP_BLOCKS" ] || fail "kmem added no memory blocks"
	hp_info
}

# Free pages of a zone of node 0, from /proc/zoneinfo.
hp_zone_free() {
	awk -v zone="$1" '$1 == "Node" { z = $4 }
		z == zone && $1 == "pages" && $2 == "free" { print $3; exit }' /proc/zoneinfo
}

# Onlined memory is used for real, then offlined under its user: kmem's
# blocks onlined movable, check_bytes of them filled with a pattern by a
# process that keeps the memory (zdcheck hold), every block offlined while
# it does (its pages must migrate to boot RAM), the pattern verified, and
# the blocks onlined again.  The pages must have come from the new memory:
# ZONE_MOVABLE holds nothing else here.
hotplug_use() {
	hold_bytes=$(param check_bytes 536870912)
	hp_kmem_add
	hp_step "phase=first strategy=default zone=movable mom=$HP_MOM" \
		/zdinit/zdonline online_movable $HP_BLOCKS
	free_before=$(hp_zone_free Movable)
	rm -f /tmp/hold-go /tmp/hold.out
	mkfifo /tmp/hold-go || fail "mkfifo"
	exec 3<>/tmp/hold-go
	/zdinit/zdcheck hold anon "$hold_bytes" 11 < /tmp/hold-go > /tmp/hold.out 2>&1 &
	holder=$!
	while ! grep -q "zdcheck: filled" /tmp/hold.out; do
		kill -0 $holder 2>/dev/null ||
			fail "zdcheck hold: $(cat /tmp/hold.out)"
		usleep 100000
	done
	used_kb=$(( (free_before - $(hp_zone_free Movable)) * 4 ))
	if offline=$(/zdinit/zdonline offline $HP_BLOCKS 2>&1); then
		offlined=yes
	else
		offlined=no
	fi
	echo verify >&3
	exec 3>&-
	wait $holder
	held=$?
	kmsg
	result=pass
	detail=$(tail -n 1 /tmp/hold.out)
	if [ $used_kb -lt $((hold_bytes / 1024 * 9 / 10)) ]; then
		result=fail
		detail="only ${used_kb} kB of the ${hold_bytes} bytes came from ZONE_MOVABLE"
	elif [ $offlined = no ]; then
		result=fail
		detail="offlining under the user failed: $offline"
	elif [ $held != 0 ]; then
		result=fail
	fi
	check hotplug-use $result bytes=$hold_bytes used_kb=$used_kb \
		offlined=$offlined blocks=$(echo $HP_BLOCKS | wc -w) mom=$HP_MOM \
		"detail=$(echo $detail | tr ' ' _)"
	hp_step "phase=online strategy=default zone=movable mom=$HP_MOM" \
		/zdinit/zdonline online_movable $HP_BLOCKS
}

# Load virtio_mem with the device's requested size already set: the driver
# plugs it block by block, each block onlined as it is added; done when
# SIZE bytes of new blocks are online.
hp_plug() {
	insmod /zdinit/virtio_mem.ko || return 1
	want=$((SIZE / 0x$(cat $MEMDIR/block_size_bytes)))
	waited=0
	while :; do
		online=0
		for block in $(hp_new_blocks); do
			[ "$(cat $MEMDIR/memory$block/state)" = online ] &&
				online=$((online + 1))
		done
		[ $online -ge $want ] && return 0
		waited=$((waited + 1))
		[ $waited -lt 30000 ] || { echo "$online of $want blocks online"; return 1; }
		usleep 10000
	done
}

virtio_mem() {
	hp_debug
	first=${HP_ZONES%% *}
	hp_state "$first" > $MEMDIR/auto_online_blocks || fail "auto_online_blocks"
	hp_mark
	hp_contiguity "boot"
	set_strategy "${STRATEGIES%% *}"
	hp_step "phase=first strategy=${STRATEGIES%% *} zone=$first mom=$HP_MOM" hp_timed hp_plug
	hp_contiguity "first:$first"
	echo offline > $MEMDIR/auto_online_blocks || fail "auto_online_blocks"
	HP_BLOCKS=$(hp_new_blocks)
	hp_info
	hp_cycles "$first"
	hp_report_verify
}

# The memmap check on onlined memory (selftest): virtio-mem's blocks
# onlined movable with every strategy of zdinit.strategies, each memmap
# built from templates checked against the slow path (the totals reported
# before going on); then onlined movable once more with the template path
# told to leave $skip struct pages unwritten: exactly that many must
# differ; then onlined into ZONE_NORMAL, last because kernel allocations
# may land there and keep the blocks from going offline again, checked
# like the others.
hp_verify_counts() {
	echo "$(cat $KNOBS/verify_checked) $(cat $KNOBS/verify_mismatches)" \
		"$(cat $KNOBS/verify_unchecked) $(cat $KNOBS/hotplug_verify_checked)"
}

hotplug_verify() {
	[ "$VERIFY" = 1 ] || fail "hotplug-verify needs zdinit.verify=1"
	[ -w $KNOBS/inject_skip ] || fail "kernel has no $KNOBS/inject_skip"
	HP_ZONES=movable
	virtio_mem
	report_verify
	skip=100
	hp_step "phase=offline strategy=default zone=movable mom=$HP_MOM iter=skip" \
		/zdinit/zdonline offline $HP_BLOCKS
	set_strategy template
	before=$(cat $KNOBS/verify_mismatches)
	echo $skip > $KNOBS/inject_skip
	hp_step "phase=skip strategy=template zone=movable mom=$HP_MOM iter=skip" \
		/zdinit/zdonline online_movable $HP_BLOCKS
	caught=$(($(cat $KNOBS/verify_mismatches) - before))
	result=fail
	[ "$caught" = "$skip" ] && result=pass
	check hotplug-catches-skip $result skipped=$skip caught=$caught
	hp_step "phase=offline strategy=default zone=movable mom=$HP_MOM iter=normal" \
		/zdinit/zdonline offline $HP_BLOCKS
	set_strategy template
	set -- $(hp_verify_counts)
	hp_step "phase=normal strategy=template zone=normal mom=$HP_MOM iter=normal" \
		/zdinit/zdonline online_kernel $HP_BLOCKS
	set -- "$@" $(hp_verify_counts)
	emit "check name=hotplug-verify-normal result=counted checked=$(($5 - $1))" \
		"mismatches=$(($6 - $2)) unchecked=$(($7 - $3)) hotplug_checked=$(($8 - $4))"
	# The injected mismatches are expected: report no totals after them.
	VERIFY=0
}

# With the page_ref_set tracepoint on, onlining must take the slow path:
# every struct page of the block then reports set_page_count() twice,
# once when it is built and once when it is freed to the buddy allocator
# (a template reports once per section), and the check, which covers
# only memmaps built from templates, counts none of it.  With the
# tracepoint off again, the templates must be back, and checked.
hotplug_tracepoint() {
	tracing=/sys/kernel/tracing
	events=$tracing/events/page_ref/page_ref_set
	mount -t tracefs tracefs $tracing 2>/dev/null
	[ -w $events/enable ] || fail "no page_ref_set tracepoint (CONFIG_DEBUG_PAGE_REF?)"
	[ "$VERIFY" = 1 ] || fail "hotplug-tracepoint needs zdinit.verify=1"
	HP_ZONES=movable
	ROUNDS=0
	virtio_mem
	block=$(echo $HP_BLOCKS | cut -d' ' -f1)
	pages=$((0x$(cat $MEMDIR/block_size_bytes) / 4096))
	start=$((block * pages))
	echo 8192 > $tracing/buffer_size_kb || fail "trace buffer size"
	echo "pfn >= $start && pfn < $((start + pages))" > $events/filter ||
		fail "page_ref_set filter"
	set_strategy auto
	for phase in on off; do
		hp_step "phase=offline strategy=default zone=movable mom=$HP_MOM iter=$phase" \
			/zdinit/zdonline offline $block
		echo > $tracing/trace
		before=$(cat $KNOBS/hotplug_verify_checked)
		[ $phase = on ] && echo 1 > $events/enable
		hp_step "phase=tracepoint strategy=auto zone=movable mom=$HP_MOM iter=$phase" \
			/zdinit/zdonline online_movable $block
		echo 0 > $events/enable
		n=$(grep -c page_ref_set $tracing/trace)
		checked=$(($(cat $KNOBS/hotplug_verify_checked) - before))
		result=fail
		if [ $phase = on ]; then
			[ "$n" -ge $((2 * pages)) ] && [ "$checked" = 0 ] && result=pass
		else
			[ "$checked" = "$pages" ] && result=pass
		fi
		check hotplug-tracepoint-$phase $result block_pages=$pages events=$n checked=$checked
	done
}
