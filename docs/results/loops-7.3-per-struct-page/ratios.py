"""Ratios of the committed 7.3 bench runs that README.md and
docs/measurements.md explain with this directory's loops, computed from
their samples with the harness's own statistics.

Run from the repository root:
  PYTHONPATH=. python3 docs/results/loops-7.3-per-struct-page/ratios.py \
      > docs/results/loops-7.3-per-struct-page/ratios.txt
"""
from zdinit import paths
from zdinit.families import rebind
from zdinit.results import report, stats

EARLIER, HEADLINE = "bench-100g-7.3-rule", "bench-100g-7.3-stack"


def runs(name):
    return {(rebind.row_label(r), r["kernel"], r["strategy"]): r
            for r in rebind.resummarize(report.load_results(
                paths.COMMITTED_RESULTS / name / "results.json")["runs"])}


def main():
    headline, earlier = runs(HEADLINE), runs(EARLIER)
    print(f"{HEADLINE}: the series' stream@1 against the upstream kernel, "
          "time ratio of the medians [95% bootstrap interval]")
    print("| scenario | stream@1 median ms | upstream median ms "
          "| stream@1 / upstream |")
    print("|---|---|---|---|")
    for (label, kernel, strategy), r in sorted(headline.items()):
        up = headline.get((label, "upstream", "default"))
        if kernel == "patched" and strategy == "stream@1" and up:
            ratio = stats.speedup(r["samples_ms"], up["samples_ms"])
            print(f"| {label} | {r['median_ms']:.2f} | {up['median_ms']:.2f} "
                  f"| {report.ratio_text(ratio)} |")
    print()
    print(f"The same rows in {EARLIER} (the earlier cut) and {HEADLINE}: "
          "median ms, and the headline's over the earlier cut's "
          "[95% bootstrap interval]")
    print(f"| scenario | kernel | strategy | {EARLIER} | {HEADLINE} "
          "| headline / earlier |")
    print("|---|---|---|---|---|---|")
    for key, r in sorted(headline.items()):
        old = earlier.get(key)
        if old:
            ratio = stats.speedup(r["samples_ms"], old["samples_ms"])
            print(f"| {' | '.join(key)} | {old['median_ms']:.2f} "
                  f"| {r['median_ms']:.2f} | {report.ratio_text(ratio)} |")


if __name__ == "__main__":
    main()
