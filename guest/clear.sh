# The clear family, sourced by scenario.sh: demand-fault clearing of 2M
# THP and 1G hugetlb pages with guest/zdclear.c, and of 2M and 1G hugetlb
# pages with 'perf bench mem mmap'.  Methods are the
# clearing paths of one kernel, interleaved loop by loop like the rebind
# strategies: "default" (a kernel without the switch), "cached" (the
# streaming clear switched off: stream=never) and "stream" (every run of a
# huge folio away from the fault's neighbourhood streamed, whatever its
# size: stream=always, with CLZERO where the CPU has it and MOVNTI
# otherwise, so MOVNTI under TCG).  The switch is the series' last patch,
# not for merging; the kernel's own default ("auto") streams those runs
# only on a CPU it opts in, when together they reach its L2 size
# (stream_min_kb, 0 on any other CPU, TCG's among them).

CLEAR_KNOBS=/sys/kernel/debug/folio_zero_user
PAGES=$(param pages 2M | tr , ' ')
GIGANTIC=/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages

set_clear_method() {
	case "$1" in
	default) ;;
	cached) knob stream never ;;
	stream) knob stream always ;;
	*) fail "unknown clear method '$1'" ;;
	esac
}

knob() {
	[ -w $CLEAR_KNOBS/$1 ] || fail "kernel has no $CLEAR_KNOBS/$1 (not a clear kernel?)"
	echo "$2" > $CLEAR_KNOBS/$1 || fail "kernel rejected $1=$2"
}

# What the kernel chose at boot, before any method touches the knobs.
clear_report_rule() {
	[ -r $CLEAR_KNOBS/stream ] || return 0
	emit "clear-rule stream=$(cat $CLEAR_KNOBS/stream) stream_min_kb=$(cat $CLEAR_KNOBS/stream_min_kb) preempt=$(clear_preempt)"
}

# The model the kernel runs, which is not always the preempt= asked for: a
# model the kernel does not have is refused at boot ("Dynamic Preempt:
# unsupported mode: none") and the configured one runs.  Read from the line
# the kernel logs when it sets the model: 6.12 has
# /sys/kernel/debug/sched/preempt only with SCHED_DEBUG, which would pull
# DEBUG_KERNEL into the stock kernel's configuration.
clear_preempt() {
	dmesg | sed -n 's/.*Dynamic Preempt: \([a-z]*\)$/\1/p' | tail -n 1
}

clear_report_preempt() {
	emit "clear-preempt model=$(clear_preempt)"
}

# The 1G pool was reserved on the command line; it must be complete.
need_gigantic() {
	want=$(($1 >> 30))
	have=$(cat $GIGANTIC 2>/dev/null || echo 0)
	[ "$have" -ge "$want" ] ||
		fail "only $have of $want 1G hugetlb pages could be reserved"
}

# THP comes from the buddy allocator: give the 1G pool back first.
release_gigantic() {
	[ -w $GIGANTIC ] && echo 0 > $GIGANTIC
	return 0
}

# Run zdclear and forward its result line as a marker; a check that found
# non-zero bytes (exit 1) still reports, anything else without a result
# line fails the scenario.
zdclear() {
	out=$(/zdinit/zdclear "$@" 2>&1)
	rc=$?
	result=$(echo "$out" | grep "^zdclear: $1 ")
	echo "$out" | grep -v "^zdclear: $1 "
	[ $rc -le 1 ] && [ -n "$result" ] || fail "zdclear $* failed (exit $rc)"
	emit "clear ${result#zdclear: } method=$strategy"
}

clear_bench_step() {
	zdclear bench $page $SIZE
}

clear_latency_step() {
	zdclear latency $page $SIZE
}

# Each method once, in the given order.
each_method() {
	for strategy in $STRATEGIES; do
		set_clear_method "$strategy"
		"$@"
	done
}

# Page sizes in the order the memory allows: the 1G pool, reserved at
# boot, first; then it is released for THP.
clear_pages_in_order() {
	for page in 1G 2M; do
		case " $PAGES " in
		*" $page "*) ;;
		*) continue ;;
		esac
		if [ $page = 1G ]; then
			need_gigantic $SIZE
		else
			release_gigantic
		fi
		"$@"
	done
}

# perf bench mem mmap maps hugetlb pages (MAP_HUGETLB), never THP, so 2M
# pages need a pool of the size, given back before the THP runs.
reserve_2m() {
	want=$(($1 >> 21))
	echo $want > /proc/sys/vm/nr_hugepages
	have=$(cat /proc/sys/vm/nr_hugepages)
	[ "$have" -ge "$want" ] ||
		fail "only $have of $want 2M hugetlb pages could be reserved"
}

# One mapping of the size per function, its rate in bytes per second
# (--format=simple prints it alone on the last line).
clear_perf_step() {
	for function in demand populate; do
		out=$(/zdinit/perf bench --format=simple mem mmap -p ${page}B \
			-f $function -s $SIZE -l 1 2>&1)
		rc=$?
		rate=$(echo "$out" | tail -n 1)
		case "$rc $rate" in
		"0 "[0-9]*) ;;
		*) echo "$out"; fail "perf bench mem mmap -p ${page}B -f $function -s $SIZE failed (exit $rc)" ;;
		esac
		emit "clear perf page=$page function=$function bytes_per_s=${rate%%.*} method=$strategy"
	done
}

clear_bench_page() {
	each_round clear_bench_step
	[ $page = 2M ] && reserve_2m $SIZE
	each_round clear_perf_step
	[ $page = 2M ] && reserve_2m 0
	# Both tasks on CPU 0: once per method.
	each_method clear_latency_step
}

clear_bench() {
	SET_METHOD=set_clear_method
	clear_report_preempt
	clear_report_rule
	clear_pages_in_order clear_bench_page
}

clear_zero_step() {
	zdclear zero $page $SIZE $(param zero_rounds 2)
}

clear_zero() {
	clear_report_preempt
	clear_report_rule
	clear_pages_in_order each_method clear_zero_step
}

# The kernel's hugetlb and THP selftests (built from the guest kernel's own
# tree), each run once with its exit status and ksft totals, on 2M hugetlb
# pages reserved here (the slow 1G pool is released first).
clear_selftests() {
	clear_report_preempt
	release_gigantic
	echo "$(param hugetlb_2m 300)" > /proc/sys/vm/nr_hugepages ||
		fail "cannot reserve 2M hugetlb pages"
	for test in $(param selftests "" | tr , ' '); do
		[ -x /zdinit/$test ] || fail "selftest $test missing from the initramfs"
		timeout 900 /zdinit/$test > /tmp/$test.out 2>&1
		rc=$?
		totals=$(grep "# Totals:" /tmp/$test.out | tail -1 |
			sed 's/^# Totals: //; s/ /,/g')
		emit "clear-selftest name=$test rc=$rc totals=${totals:-none} failed=$(
			awk '/^not ok/ {$1=$2=$3=""; gsub(/ +/, "_"); printf "%s;", $0}' /tmp/$test.out)"
	done
}
