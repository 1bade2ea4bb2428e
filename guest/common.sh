# zdinit guest: the helpers every scenario file uses, sourced first by
# scenario.sh.  Parameters come from the kernel command line
# (zdinit.KEY=VALUE); results go to the console as "@@zdinit" marker
# lines, each followed by the kernel's own log lines ("@@kmsg ...") that
# the step produced, and with zdinit.trace its kprobe events ("@@trace
# ...", trace.sh).  The host parses nothing else.

param() {
	for word in $(cat /proc/cmdline); do
		case "$word" in
		zdinit.$1=*) echo "${word#zdinit.$1=}"; return ;;
		esac
	done
	echo "$2"
}

ROUNDS=$(param n 1)
STRATEGIES=$(param strategies default | tr , ' ')
VERIFY=$(param verify 0)
KNOBS=/sys/kernel/debug/zone_device_memmap

emit() { echo "@@zdinit $*"; }

# Forward the kernel log to the host; remember the strategy the kit's
# last memmap_init_zone_device() report names (stock kernels print none).
USED=none
kmsg() {
	log=$(dmesg -c)
	[ -n "$log" ] || return 0
	echo "$log" | sed 's/^/@@kmsg /'
	used=$(echo "$log" | sed -n 's/.*memmap_init_zone_device built [0-9]* pages: \([a-z]*\),.*/\1/p' | tail -n 1)
	[ -n "$used" ] && USED=$used
	return 0
}

# If the step's command left a memmap to be built on demand (the kit's
# report ends ", on demand"), sleep until the kernel says its background
# build finished, before kmsg reads the step's log: the build's line goes
# with the step, the next step does not cut it short, and the guest stays
# idle while it runs, as it does while a synchronous bind runs.  zdkmsg
# sleeps in a read of /dev/kmsg: a loop of sleep and dmesg would take a
# vCPU from the build it waits for.
settle_background() {
	/zdinit/zdkmsg wait 'in the background in' 600 ', on demand' ||
		fail "no background build finished within 600 s"
}

# Run "$@", then settle_background: a step command whose background
# build belongs to the step.
settled() {
	"$@" || return 1
	settle_background
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
	step_begin "$1"
	shift
	step_command "$@"
	step_report
}

# The three parts of step_run, for a step that does more between its
# command and its report: step_begin LABEL, step_command COMMAND...,
# step_report.
step_begin() {
	label=$1
	kmsg
	trace_clear
	emit "begin $label$TRACE_LABEL"
}

step_command() {
	out=$("$@" 2>&1) || { echo "$out"; fail "step '$label' failed: $*"; }
}

step_report() {
	kmsg
	trace_read
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
		trace_round $round
		for strategy in $(rotated $round); do
			${SET_METHOD:-set_strategy} "$strategy"
			"$@"
		done
		round=$((round + 1))
	done
}

# "NAME" or "NAME@THREADS"; without @ the kernel chooses the thread count
# (0 to the knob), on a kernel that has one.  "demand" is the kernel as
# offered on a base with the on-demand memmap: its own strategy, the
# memmap of a pgmap whose driver asks for it built on demand and in the
# background; every other strategy builds the whole memmap before the
# bind returns.
set_strategy() {
	[ "$1" = default ] && return 0
	[ -w $KNOBS/strategy ] || fail "kernel has no $KNOBS/strategy (not a zdinit kernel?)"
	name=${1%@*} threads=0
	[ "$name" = "$1" ] || threads=${1#*@}
	if [ "$name" = demand ]; then
		[ -w $KNOBS/on_demand ] || fail "kernel has no $KNOBS/on_demand for strategy $1"
		echo Y > $KNOBS/on_demand || fail "kernel rejected on_demand"
		name=auto
	elif [ -w $KNOBS/on_demand ]; then
		echo N > $KNOBS/on_demand || fail "kernel rejected on_demand"
	fi
	echo "$name" > $KNOBS/strategy || fail "kernel rejected strategy $name"
	if [ -w $KNOBS/threads ]; then
		echo "$threads" > $KNOBS/threads || fail "kernel rejected $threads threads"
	elif [ "$threads" != 0 ]; then
		fail "kernel has no $KNOBS/threads for strategy $1"
	fi
}

# A pass/fail check the host tabulates: "check name=... result=pass|fail ...".
check() {
	name=$1 result=$2
	shift 2
	emit "check name=$name result=$result $*"
}

# Wait until the pmem driver has bound the legacy pmem range (memmap=nn!ss
# on the command line): libnvdimm registers regions and namespaces
# asynchronously, so it may still be binding while userspace starts;
# wait_probe returns once every device of the bus has been probed.
legacy_pmem_probed() {
	e820=
	for bus in /sys/bus/nd/devices/ndbus*; do
		[ "$(cat "$bus/provider" 2>/dev/null)" = e820 ] && e820=$bus
	done
	[ -n "$e820" ] || fail "no e820 nvdimm bus: no legacy pmem range (memmap=nn!ss, CONFIG_X86_PMEM_LEGACY)"
	cat "$e820/wait_probe" > /dev/null || fail "reading $e820/wait_probe"
}

last_strategy() {
	echo "$USED"
}

# The memmap check's totals, with zdinit.verify=1.
report_verify() {
	[ "$VERIFY" = 1 ] || return 0
	emit "verify checked=$(cat $KNOBS/verify_checked) mismatches=$(cat $KNOBS/verify_mismatches) unchecked=$(cat $KNOBS/verify_unchecked)"
}
