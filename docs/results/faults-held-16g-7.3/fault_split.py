"""fault_split.py CONSOLE_LOG: the first faults of a rebind console, by strategy, with
`demand` split into the rounds whose background build was held back during the faults
(the guest's line "experiment held round=N") and the others.  Prints medians, min, max
and every sample in ms, by iteration."""
import re, statistics, sys

steps, held = [], set()
strategy = it = None
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"begin phase=rebind strategy=(\S+) align=\S* iter=(\d+)", line)
    if m:
        strategy, it = m.group(1), int(m.group(2))
        continue
    m = re.search(r"experiment held round=(\d+)", line)
    if m:
        held.add(int(m.group(1)))
        continue
    m = re.search(r"fault first_ns=(\d+) last_ns=(\d+)", line)
    if m and strategy:
        steps.append((strategy, it, int(m.group(1)) / 1e6, int(m.group(2)) / 1e6))
groups = {}
for strategy, it, first, last in steps:
    name = strategy + (", background held" if strategy == "demand" and it in held else "")
    groups.setdefault(name, []).append((it, first, last))
print("| strategy | N | fault, last 2M: median ms | min | max | fault, first 2M: median ms |")
print("|---|---|---|---|---|---|")
for name, rows in groups.items():
    last = [r[2] for r in rows]
    first = [r[1] for r in rows]
    print(f"| {name} | {len(rows)} | {statistics.median(last):.3f} | {min(last):.3f} | "
          f"{max(last):.3f} | {statistics.median(first):.3f} |")
print()
for name, rows in groups.items():
    print(f"{name}, last 2M by iteration (ms):",
          ", ".join(f"{it}: {last:.3f}" for it, _, last in rows))
