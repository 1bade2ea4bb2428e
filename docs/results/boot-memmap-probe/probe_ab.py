"""Boot-memmap experiment: stock+probe (patches/) against
stock+probe+an experimental template in deferred_init_pages()
(patches-template/), boots interleaved at one guest RAM size, the order
alternating; a sixth argument builds the two kernels only.

  PYTHONPATH=. python3 docs/results/boot-memmap-probe/probe_ab.py \\
      docs/results/boot-memmap-probe/patches \\
      docs/results/boot-memmap-probe/patches-template <logdir> 16 4
"""
import pathlib
import sys

from zdinit.vm import qemu

# probe.py sits next to this script (sys.path[0] when run as one).
from probe import boot_lines, prepare

stock_dir, tmpl_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
logs = pathlib.Path(sys.argv[3])
gb, boots = int(sys.argv[4]), int(sys.argv[5])
build_only = len(sys.argv) > 6
kernels = {v: prepare(v, d) for v, d in (("boot-probe", stock_dir),
                                         ("boot-probe-tmpl", tmpl_dir))}
if build_only:
    sys.exit(0)
accel, _ = qemu.choose_accel(*kernels["boot-probe"])
logs.mkdir(parents=True, exist_ok=True)
for i in range(boots):
    order = list(kernels) if i % 2 == 0 else list(reversed(kernels))
    for v in order:
        found = boot_lines(*kernels[v], accel, gb,
                           logs / f"{v}-{gb}g-{i}.log", f"{v} {gb}G")
        # The deferred-init lines only, as the committed result-ab.txt.
        found = [f for f in found if "memmap_init" not in f]
        print(f"{v} {gb}G boot {i}: " + " | ".join(found), flush=True)
