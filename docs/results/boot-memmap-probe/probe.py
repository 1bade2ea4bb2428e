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

from zdinit.kernel import build, initramfs
from zdinit.vm import qemu

# Console lines only (the guest repeats the kernel log as @@kmsg lines).
LINE = re.compile(r"^\[[ \d.]+\] (zdinit-probe: .*|node \d+ deferred pages "
                  r"initialised in \d+ms)$", re.M)


def prepare(variant, patches):
    """Build variant (the zdinit and deferred fragments, patches applied)
    and its initramfs."""
    build.VARIANTS[variant] = (["zdinit", "deferred"], patches)
    kernel = build.build(variant)
    return kernel, initramfs.build(kernel, kernel.out / "initramfs.cpio.gz")


def boot_lines(kernel, initrd, accel, gb, log_path, label):
    """Boot with gb GiB of RAM, nothing run; the probe's lines."""
    boot = qemu.boot(kernel, initrd, {"scenario": "probe"}, accel,
                     ram_mb=gb * 1024, timeout_s=900, log_path=log_path,
                     label=label, cmdline=("loglevel=7",))
    return LINE.findall(boot.log)


def main():
    patches, logs = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    sizes_gb = [int(x) for x in sys.argv[3].split(",")]
    boots = int(sys.argv[4])
    kernel, initrd = prepare("boot-probe", patches)
    accel, _ = qemu.choose_accel(kernel, initrd)
    logs.mkdir(parents=True, exist_ok=True)
    for i in range(boots):
        for gb in sizes_gb:
            found = boot_lines(kernel, initrd, accel, gb,
                               logs / f"boot-{gb}g-{i}.log", f"probe {gb}G")
            print(f"{gb}G boot {i}: " + " | ".join(found), flush=True)


if __name__ == "__main__":
    main()
