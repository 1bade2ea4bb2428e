# zdinit guest: the kernel's own memory onlining selftests, sourced by
# scenario.sh.  The scripts come from the tree the kernel was built from
# (zdinit/kernel/initramfs.py puts them in $KSELFTESTS with the kselftest
# helpers they source), so each kernel runs its own version; a tree
# without one (6.12 has no dax-kmem-hotplug.sh) runs the others.  Each
# reports one check line whose outcome the host compares with stock's.

KSELFTESTS=/zdinit/kselftests

# A KTAP log's results in order, "N:ok", "N:fail" or "N:skip" joined by
# commas: what the series must reproduce test by test.
ktap_outcome() {
	awk '/^ok [0-9]+ .*# SKIP/ { r = r sep $2 ":skip"; sep = ","; next }
	     /^ok [0-9]+/ { r = r sep $2 ":ok"; sep = ","; next }
	     /^not ok [0-9]+/ { r = r sep $3 ":fail"; sep = "," }
	     END { print (r == "" ? "none" : r) }' "$1"
}

# The messages a non-KTAP selftest printed about its own verdicts
# ("FAILED", "SKIPPED", "unexpected ..." and "skip ..."), memory block
# numbers, commas and whitespace squeezed out, sorted and joined by
# commas.
verdict_lines() {
	grep -E 'FAILED|SKIPPED|unexpected|skip' "$1" |
		sed -e 's/memory[0-9][0-9]*/memoryN/g' -e 's/,//g' -e 's/[0-9][0-9]*:/N:/g' \
		    -e 's/^[[:space:]]*//' -e 's/[[:space:]][[:space:]]*/_/g' |
		sort -u | tr '\n' , | sed 's/,$//'
}

# Run selftest script $1 with bash, its output forwarded to the host and
# kept in $2; $rc is its exit status.
run_kselftest() {
	bash "$1" > "$2" 2>&1
	rc=$?
	sed 's/^/@@kselftest /' "$2"
}

# Whether any memory block is offline.
offline_blocks() {
	grep -qx offline $MEMDIR/memory*/state
}

# dax-kmem-hotplug.sh cycles the state attribute of a kmem-bound dax
# device: the namespace made by hp_kmem_add (hotplug.sh), its blocks
# offline.  The destructive unbind subtest is left out, as the script
# leaves it unless asked.
kselftest_dax_kmem() {
	script=$KSELFTESTS/dax/dax-kmem-hotplug.sh
	[ -x "$script" ] || return 0
	DAX_KMEM_TEST_DEV=dax0.0 run_kselftest "$script" /tmp/dax-kmem.out
	grep -q '^1\.\.[0-9]' /tmp/dax-kmem.out ||
		fail "dax-kmem-hotplug.sh printed no KTAP plan (rc=$rc)"
	check kselftest-dax-kmem pass strategy=- used=$(last_strategy) \
		rc=$rc outcome=$(ktap_outcome /tmp/dax-kmem.out)
}

# dax-kmem-hotplug.sh leaves the device unplugged, its memory removed:
# binding kmem again adds the blocks back, offline (auto_online_blocks
# is still "offline", as hp_kmem_add set it).
kmem_readd_offline() {
	drv=/sys/bus/dax/drivers/kmem
	echo dax0.0 > $drv/unbind 2>/dev/null
	echo dax0.0 > $drv/bind || fail "binding dax0.0 to kmem again"
	offline_blocks ||
		fail "kmem added no offline blocks for mem-on-off-test.sh"
}

# mem-on-off-test.sh onlines every offline hot-pluggable block (the
# kmem namespace's), offlines some, onlines them again, then repeats
# under the memory notifier's error injection (built in here, so its
# modprobe calls do nothing).
kselftest_mem_on_off() {
	script=$KSELFTESTS/memory-hotplug/mem-on-off-test.sh
	[ -x "$script" ] || fail "no $script in the initramfs"
	offline_blocks || kmem_readd_offline
	run_kselftest "$script" /tmp/mem-on-off.out
	verdicts=$(verdict_lines /tmp/mem-on-off.out)
	check kselftest-mem-on-off pass strategy=- used=$(last_strategy) \
		rc=$rc outcome=${verdicts:-none}
}

onlining_selftests() {
	hp_kmem_add
	kselftest_dax_kmem
	kselftest_mem_on_off
}
