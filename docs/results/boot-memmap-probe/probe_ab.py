"""Boot-memmap experiment: stock+probe (patches/) against
stock+probe+an experimental template in deferred_init_pages()
(patches-template/), boots interleaved at one guest RAM size, the order
alternating; a sixth argument builds the two kernels only.

  PYTHONPATH=. python3 docs/results/boot-memmap-probe/probe_ab.py \
      docs/results/boot-memmap-probe/patches \
      docs/results/boot-memmap-probe/patches-template <logdir> 16 4
"""
import pathlib
import re
import sys

from zdinit import build, initramfs, qemu

stock_dir, tmpl_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
logs = pathlib.Path(sys.argv[3])
gb, boots = int(sys.argv[4]), int(sys.argv[5])
build_only = len(sys.argv) > 6
build.VARIANTS["boot-probe"] = (["zdinit", "deferred"], stock_dir)
build.VARIANTS["boot-probe-tmpl"] = (["zdinit", "deferred"], tmpl_dir)
kernels = {}
for v in ("boot-probe", "boot-probe-tmpl"):
    k = build.build(v)
    kernels[v] = (k, initramfs.build(k, k.out / "initramfs.cpio.gz"))
if build_only:
    sys.exit(0)
accel, _ = qemu.choose_accel(*kernels["boot-probe"])
logs.mkdir(parents=True, exist_ok=True)
line = re.compile(r"^\[[ \d.]+\] (zdinit-probe: deferred.*|node \d+ deferred "
                  r"pages initialised in \d+ms)$", re.M)
for i in range(boots):
    order = list(kernels) if i % 2 == 0 else list(reversed(kernels))
    for v in order:
        k, initrd = kernels[v]
        boot = qemu.boot(k, initrd, {"scenario": "probe"}, accel,
                         ram_mb=gb * 1024, timeout_s=900,
                         log_path=logs / f"{v}-{gb}g-{i}.log",
                         label=f"{v} {gb}G", cmdline=("loglevel=7",))
        print(f"{v} {gb}G boot {i}: " + " | ".join(line.findall(boot.log)),
              flush=True)
