"""The README table of this directory from the zdlab runs given.

Run from the repository root:
  PYTHONPATH=. python3 docs/results/lab-template-regs/table.py \
      docs/results/lab-template-regs/run*.json
"""
import sys

from zdinit.results import report
from zdinit.errors import UsageError


def gbps(run, key):
    return run["memmap_bytes"] / run[key]


def cell(run):
    return (f"{gbps(run, 'median_ns'):.1f} [{gbps(run, 'max_ns'):.1f}-"
            f"{gbps(run, 'min_ns'):.1f}]")


def render(results):
    print("| state | memmap | template-reload GB/s | template-regs GB/s "
          "| regs / reload |")
    print("|---|---|---|---|---|")
    for path, data in zip(sys.argv[1:], results):
        rows = {}
        for r in data["runs"]:
            rows.setdefault((r["state"], r["memmap_bytes"]), {})[
                r["strategy"]] = r
        name = path.split("/")[-1].removesuffix(".json")
        for (state, size), by in sorted(rows.items()):
            if not {"template-reload", "template-regs"} <= by.keys():
                raise UsageError(f"{path}: {state} {size >> 20}M lacks "
                                 "template-reload or template-regs")
            reload, regs = by["template-reload"], by["template-regs"]
            print(f"| {state} | {size >> 20}M ({name}) | {cell(reload)} "
                  f"| {cell(regs)} "
                  f"| {reload['median_ns'] / regs['median_ns']:.2f}x |")


if __name__ == "__main__":
    sys.exit(report.table_script(render, "PYTHONPATH=. python3 "
                                 "docs/results/lab-template-regs/table.py "
                                 "ZDLAB_JSON..."))
