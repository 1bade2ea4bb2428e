"""The parallel build's two fan-outs, side by side, from this run.

Run from the repository root:
  PYTHONPATH=. python3 docs/results/bench-100g-padata-7.3/table.py \
      docs/results/bench-100g-padata-7.3/results.json
The kernel with work items of its own against the one handing the
chunks to padata_do_multithreaded(); same chunks, threads and strategy.
This run named them `patched` and `patched-padata`; since the series
moved onto padata they are `patched-workqueue` and `patched`, and
either run's names are read.  Ratios
are medians divided by medians with zdinit.stats.speedup()'s 95%
bootstrap interval; above 1 means padata was faster.
"""
import sys

from zdinit.results import report, stats
from zdinit.errors import UsageError


def render(results):
    if len(results) != 1:
        raise UsageError("give one results.json")
    samples = {}
    kernels = {r["kernel"] for r in results[0]["runs"]}
    work_items, padata_kernel = (("patched", "patched-padata")
                                 if "patched-padata" in kernels
                                 else ("patched-workqueue", "patched"))
    for r in results[0]["runs"]:
        row = r["scenario"] + (f" {r['align']}" if r.get("align") else "")
        samples[(row, r["kernel"])] = (r["samples_ms"], r["resolved"],
                                       r["threads"])
    rows = sorted({row for row, _ in samples})
    print("| scenario | strategy, threads | work items: median ms "
          "| padata: median ms | padata vs work items [95% CI] |")
    print("|---|---|---|---|---|")
    for row in rows:
        try:
            own, resolved, threads = samples[(row, work_items)]
            padata, *_ = samples[(row, padata_kernel)]
        except KeyError:
            raise UsageError(f"{row}: not run on both kernels") from None
        print(f"| {row} | {'/'.join(resolved)}, {'/'.join(map(str, threads))} "
              f"| {stats.summarize(own)['median_ms']:.2f} "
              f"| {stats.summarize(padata)['median_ms']:.2f} "
              f"| {report.ratio_text(stats.speedup(own, padata))} |")


if __name__ == "__main__":
    sys.exit(report.table_script(render, "PYTHONPATH=. python3 "
                                 "docs/results/bench-100g-padata-7.3/"
                                 "table.py RESULTS_JSON"))
