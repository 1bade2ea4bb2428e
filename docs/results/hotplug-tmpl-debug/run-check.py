"""The selftest's onlined-memory check on the debug kernel (KASAN, lockdep,
DEBUG_VM, kmemleak): every templated struct page and pageblock compared,
the skip caught, and no splat (run_hotplug_verify fails on any)."""
import pathlib
import sys

from zdinit import cli
from zdinit.checks import memmap_equality
from zdinit.kernel import bases, under_test

(target,), accel, _ = under_test.prepare(
    [cli.wanted("debug", bases.get(bases.DEFAULT), cli.STRATEGIES)])
logs = pathlib.Path(sys.argv[1])
logs.mkdir(parents=True, exist_ok=True)
print("\n".join(memmap_equality.run_hotplug_verify(target, accel, logs)))
