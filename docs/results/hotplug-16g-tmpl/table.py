"""The README's onlining-template table from this run's results.json.

Run from the repository root:
  PYTHONPATH=. python3 docs/results/hotplug-16g-tmpl/table.py \
      docs/results/hotplug-16g-tmpl/results.json
Ratios are medians divided by medians with zdinit.stats.speedup()'s 95%
bootstrap interval; above 1 means the second kernel is faster.
"""
import sys

from zdinit.kernel import build
from zdinit.results import report, stats
from zdinit.errors import UsageError

ROWS = ("kmem movable", "kmem movable mom", "kmem normal", "kmem normal mom",
        "virtio-mem movable", "virtio-mem normal")


def render(results):
    if len(results) != 1:
        raise UsageError("give one results.json")
    try:
        # The kernels by today's names: this run's stock is 'base'.
        samples = {(r["scenario"], r["variant"], r["metric"],
                    build.canonical(r["kernel"]), r["strategy"]):
                   r["samples_ms"] for r in results[0]["runs"]}
    except KeyError as err:
        raise UsageError(f"a run has no {err}: not a hotplug run") from None

    def get(row, metric, kernel, strategy="default"):
        scenario, variant = row.split(" ", 1)
        key = (scenario, variant, metric, kernel, strategy)
        if key not in samples:
            raise UsageError("no run of " + " ".join(key))
        return samples[key]

    def med(values):
        return f"{stats.summarize(values)['median_ms']:.1f}"

    def ratio(base, other):
        s = stats.speedup(base, other)
        return f"{s['speedup']:.2f}x [{s['ci95'][0]:.2f}-{s['ci95'][1]:.2f}]"

    print("memmap_init_range, ms (sum over the blocks of one onlining):")
    print("| row | hotplug-stock | patched slow | patched auto "
          "| auto vs hotplug-stock | auto vs slow |")
    print("|---|---|---|---|---|---|")
    for row in ROWS:
        base = get(row, "memmap_init_range", "hotplug-stock")
        slow = get(row, "memmap_init_range", "patched", "slow")
        auto = get(row, "memmap_init_range", "patched", "auto")
        print(f"| {row} | {med(base)} | {med(slow)} | {med(auto)} "
              f"| {ratio(base, auto)} | {ratio(slow, auto)} |")
    print()
    print("online wall, ms (guest wall time of onlining all blocks):")
    print("| row | stock | hotplug-contig | patched slow "
          "| patched auto | auto vs stock | auto vs hotplug-contig "
          "| auto vs slow |")
    print("|---|---|---|---|---|---|---|---|")
    for row in ROWS:
        stock = get(row, "online wall", "stock")
        contig = get(row, "online wall", "hotplug-contig")
        slow = get(row, "online wall", "patched", "slow")
        auto = get(row, "online wall", "patched", "auto")
        print(f"| {row} | {med(stock)} | {med(contig)} | {med(slow)} "
              f"| {med(auto)} | {ratio(stock, auto)} "
              f"| {ratio(contig, auto)} | {ratio(slow, auto)} |")


if __name__ == "__main__":
    sys.exit(report.table_script(render, "PYTHONPATH=. python3 "
                                 "docs/results/hotplug-16g-tmpl/table.py "
                                 "RESULTS_JSON"))
