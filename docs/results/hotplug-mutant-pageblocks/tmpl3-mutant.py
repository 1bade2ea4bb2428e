"""The onlining check against a broken template path: the series plus a
patch that leaves the pageblocks after the first of each section unset (0016-MUTANT)."""
import pathlib
import re
import sys

from zdinit import cli
from zdinit.checks import memmap_equality
from zdinit.kernel import build
from zdinit.vm import qemu
from zdinit.errors import ZdinitError

build.VARIANTS["tmpl-mutant"] = (["zdinit", "series"],
                                 pathlib.Path(sys.argv[1]))
target = cli.prepare_target("tmpl-mutant", cli.STRATEGIES)
accel, _ = qemu.choose_accel(target.kernel, target.initrd)
logs = pathlib.Path(sys.argv[2])
logs.mkdir(parents=True, exist_ok=True)
try:
    print("\n".join(memmap_equality.run_hotplug_verify(target, accel, logs)))
    print("MUTANT NOT CAUGHT")
except ZdinitError as e:
    print(f"caught: {e}")
text = (logs / "hotplug.log").read_text()
for line in text.splitlines():
    if re.search(r"@@zdinit (verify|hpverify|check)|zone_device_memmap_compare", line):
        print(line)
