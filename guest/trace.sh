# zdinit guest: the kernel's own timing by kprobe events, sourced by
# scenario.sh after common.sh.  /zdinit/probes, which the host writes
# from zdinit/vm/trace.py, lists for each family the functions it times:
# "FAMILY FUNCTION required|optional FETCHARGS".  trace_arm FAMILY puts
# a probe on the entry and one on the return of each (an optional one
# only where the kernel accepts it); then every step copies the events
# it caused to the console, one "@@trace" line each (step_run,
# common.sh), and the host pairs them into timed calls.  zdinit.trace=1
# traces every step, ab half the rounds, so that one boot has steps with
# and without the probes (each step labelled trace=on or off), 0 none.

TRACEFS=/sys/kernel/tracing
PROBES=/zdinit/probes
TRACE=$(param trace 0)
TRACE_ARMED=no
TRACE_LABEL=

trace_arm() {
	[ "$TRACE" = 0 ] || [ "$TRACE_ARMED" = yes ] && return 0
	[ -d $TRACEFS/events ] || mount -t tracefs tracefs $TRACEFS 2>/dev/null
	[ -w $TRACEFS/kprobe_events ] ||
		fail "kernel $(uname -r) has no $TRACEFS/kprobe_events (CONFIG_KPROBE_EVENTS)"
	while read -r family func need args; do
		[ "$family" = "$1" ] || continue
		if ! echo "p:zdinit/$func $func $args" >> $TRACEFS/kprobe_events 2>/dev/null; then
			[ "$need" = optional ] && continue
			fail "kernel $(uname -r) cannot probe $func"
		fi
		echo "r:zdinit/${func}__return $func" >> $TRACEFS/kprobe_events ||
			fail "kernel $(uname -r) cannot probe the return of $func"
	done < $PROBES
	# Per CPU: room for every event of a step (a few dozen a memory block).
	echo 4096 > $TRACEFS/buffer_size_kb || fail "trace buffer size"
	# ktime's clock, which every CPU shares: a task's entry and return may
	# be stamped on two CPUs.
	echo mono > $TRACEFS/trace_clock || fail "trace clock mono"
	TRACE_ARMED=yes
	trace_round 1
}

# Round $1's probes: on, or with zdinit.trace=ab on in rounds 1, 4, 5,
# 8, 9, ... (on, off, off, on: ABBA), so that a drift of the host or the
# guest from one round to the next, or a swing with a period of two
# rounds, falls on both sides alike.
trace_round() {
	[ "$TRACE_ARMED" = yes ] || return 0
	on=1
	if [ "$TRACE" = ab ]; then
		on=$(($1 % 4 < 2))
		TRACE_LABEL=" trace=off"
		[ $on = 1 ] && TRACE_LABEL=" trace=on"
	fi
	echo $on > $TRACEFS/events/zdinit/enable || fail "cannot switch the probes"
}

trace_clear() {
	[ "$TRACE_ARMED" = yes ] || return 0
	echo > $TRACEFS/trace
}

# The events since trace_clear, and the buffer's count of what it kept
# and what was written, which tells the host whether events were lost.
trace_read() {
	[ "$TRACE_ARMED" = yes ] || return 0
	awk '/^# entries-in-buffer/ { print "@@trace " $0; next }
		/^#/ { next }
		{ print "@@trace " $0 }' $TRACEFS/trace
}
