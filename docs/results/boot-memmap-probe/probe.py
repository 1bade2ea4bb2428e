"""Boot-time memmap probe (issue 11's boot part): stock 6.12 with
DEFERRED_STRUCT_PAGE_INIT (configs/deferred.config) plus patches/0001, a
timing patch that is not part of any series, booted at each guest RAM
size N times; prints the kernel's memmap_init and deferred-init lines.

  PYTHONPATH=. python3 docs/results/boot-memmap-probe/probe.py \\
      docs/results/boot-memmap-probe/patches <logdir> 4,16 2
"""
import pathlib
import re
import sys

from zdinit import build, initramfs, qemu

patches, logs = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
sizes_gb = [int(x) for x in sys.argv[3].split(",")]
boots = int(sys.argv[4])
build.VARIANTS["boot-probe"] = (["zdinit", "deferred"], patches)
kernel = build.build("boot-probe")
initrd = initramfs.build(kernel, kernel.out / "initramfs.cpio.gz")
accel, _ = qemu.choose_accel(kernel, initrd)
logs.mkdir(parents=True, exist_ok=True)
# Console lines only (the guest repeats the kernel log as @@kmsg lines).
line = re.compile(r"^\[[ \d.]+\] (zdinit-probe: .*|node \d+ deferred pages "
                  r"initialised in \d+ms)$", re.M)
for i in range(boots):
    for gb in sizes_gb:
        boot = qemu.boot(kernel, initrd, {"scenario": "probe"}, accel,
                         ram_mb=gb * 1024, timeout_s=900,
                         log_path=logs / f"boot-{gb}g-{i}.log",
                         label=f"probe {gb}G", cmdline=("loglevel=7",))
        print(f"{gb}G boot {i}: " + " | ".join(line.findall(boot.log)),
              flush=True)
