"""The first faults of this run's guest console, by strategy, with `demand`
split into the rounds whose background build was held back during the
faults (the experiment's line "experiment held round=N") and the others.

Run from the repository root:
  PYTHONPATH=. python3 docs/results/faults-held-16g-7.3/fault_split.py \
      docs/results/faults-held-16g-7.3/logs/devdax-dev-patched-r1.log
Steps and faults are read by the harness's own console parser; it prints
medians, min, max and every sample in ms, by iteration.
"""
import re
import statistics
import sys

from zdinit.vm import console

text = open(sys.argv[1], errors="replace").read()
held = {int(r) for r in re.findall(r"experiment held round=(\d+)", text)}
groups: dict = {}
for step in console.parse(text).steps:
    labels = step.labels
    if labels.get("phase") != "rebind" or not step.faults:
        continue
    strategy, it = labels["strategy"], int(labels["iter"])
    name = strategy + (", background held"
                       if strategy == "demand" and it in held else "")
    groups.setdefault(name, []).append(
        (it, step.faults["first_ns"] / 1e6, step.faults["last_ns"] / 1e6))
print("| strategy | N | fault, last 2M: median ms | min | max | "
      "fault, first 2M: median ms |")
print("|---|---|---|---|---|---|")
for name, rows in groups.items():
    last = [r[2] for r in rows]
    first = [r[1] for r in rows]
    print(f"| {name} | {len(rows)} | {statistics.median(last):.3f} | "
          f"{min(last):.3f} | {max(last):.3f} | "
          f"{statistics.median(first):.3f} |")
print()
for name, rows in groups.items():
    print(f"{name}, last 2M by iteration (ms):",
          ", ".join(f"{it}: {last:.3f}" for it, _, last in rows))
