"""The selftest's onlined-memory check on the debug kernel (KASAN, lockdep,
DEBUG_VM, kmemleak): every templated struct page and pageblock compared,
the skip caught, and no splat (run_hotplug_verify fails on any)."""
import pathlib
import sys

from zdinit import cli, qemu, selftest

target = cli.prepare_target("debug", cli.STRATEGIES)
accel, _ = qemu.choose_accel(target.kernel, target.initrd)
logs = pathlib.Path(sys.argv[1])
logs.mkdir(parents=True, exist_ok=True)
print("\n".join(selftest.run_hotplug_verify(target, accel, logs)))
