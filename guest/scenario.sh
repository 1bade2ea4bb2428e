#!/bin/sh
# zdinit guest scenario dispatcher, what /init runs: the scenario that
# zdinit.scenario names on the kernel command line, from the file of its
# family, each sourced here:
#   common.sh              parameters, markers, steps, strategies: for all
#   trace.sh               kprobe events timing the kernel's functions
#   rebind.sh              ZONE_DEVICE namespaces bound and rebound
#   safety.sh              the safety checks of ZONE_DEVICE ranges
#   hotplug.sh             memory onlining (kmem, virtio-mem)
#   clear.sh               huge pages cleared on fault
#   ndctl.sh               what a pmem operator does with ndctl
#   onlining-selftests.sh  the kernel's own memory onlining selftests
#   store-rule.sh          the caches the store rule reads, a bind at boot
# A failed step ends it with an "@@zdinit error" line and exit status 1.
# shellcheck disable=SC1091  # the files are in /zdinit in the guest

. /zdinit/common.sh
. /zdinit/trace.sh

SCENARIO=$(param scenario none)
SIZE=$(param size 0)
ALIGNS=$(param align 2M | tr , ' ')

emit "start scenario=$SCENARIO kernel=$(uname -r) size=$SIZE"
# The kernel's own timing line is a pr_debug(): switch it on.
echo 'func memmap_init_zone_device +p' > /sys/kernel/debug/dynamic_debug/control ||
	fail "cannot enable the memmap_init_zone_device pr_debug (DYNAMIC_DEBUG?)"
# And, where the memmap can be built on demand, the line that says when
# its background build finished (no such function elsewhere).
echo 'func zone_device_memmap_built +p' > /sys/kernel/debug/dynamic_debug/control 2>/dev/null
if [ "$VERIFY" = 1 ]; then
	[ -w "$KNOBS/verify" ] || fail "kernel has no $KNOBS/verify"
	echo 1 > "$KNOBS/verify"
fi
. /zdinit/rebind.sh
. /zdinit/safety.sh
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
on-demand-held) on_demand_held ;;
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
