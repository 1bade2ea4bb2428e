"""What tracing costs, from the records of a bench --timing ab run: the
kernel's own line in the rounds without the probes against the rounds
with them, and the traced time against the line of the same step.

A rebind record of such a run has the metric "log untraced", "log
traced" or "trace"; an onlining record a variant that ends in "traced"
or "untraced", whose metrics are the trace's ("online_pages") and the
line's ("log online_pages").  The two samples of one step are at the
same index of their records (families/rebind.py and onlining.py append
them together), so that the difference is taken step by step.
"""
import statistics

from zdinit.results import report, stats

HEADER = ["row", "kernel", "line untraced: median ms [p10-p90]",
          "line traced", "untraced vs traced [95% CI]",
          "trace - line, same step: median us [min-max]",
          "N untraced, traced"]


def _spread(samples):
    s = stats.summarize(samples)
    return f"{s['median_ms']:.2f} [{s['p10_ms']:.2f}-{s['p90_ms']:.2f}]"


def _row(label, kernel, untraced, traced, trace):
    diff = [1000 * (t - line) for t, line in zip(trace or [], traced)]
    return [label, kernel, _spread(untraced), _spread(traced),
            report.ratio_text(stats.speedup(untraced, traced)),
            f"{statistics.median(diff):.0f} [{min(diff):.0f}-{max(diff):.0f}]"
            if diff else "-",
            f"{len(untraced)}, {len(traced)}"]


def groups(runs):
    """{(row label, kernel): {(traced, metric): samples_ms}} of the
    records with a traced and an untraced side; traced is "traced" or
    "untraced", metric the line's or the trace's."""
    found: dict = {}
    for r in runs:
        kernel = f"{r['kernel']} {r['strategy']}"
        metric = r.get("metric") or ""
        if r.get("variant"):
            where, _, side = r["variant"].rpartition(" ")
            if side not in ("traced", "untraced"):
                continue
            label = f"{r['scenario']} {where}: {metric.removeprefix('log ')}"
            # The guest's wall time stands beside the line: taken on both
            # sides, with no trace of its own.
            metric = ("line" if metric.startswith("log ")
                      or metric.endswith(" wall") else "trace")
        elif metric in ("log untraced", "log traced", "trace"):
            label = r["scenario"] + (f" {r['align']}" if r.get("align") else "")
            side = "untraced" if metric == "log untraced" else "traced"
            metric = "trace" if metric == "trace" else "line"
        else:
            continue
        found.setdefault((label, kernel), {})[(side, metric)] = r["samples_ms"]
    return found


def rows(runs):
    """One row per timed function and kernel that has the line without
    and with the probes and the trace beside it."""
    out = []
    for (label, kernel), m in sorted(groups(runs).items()):
        if ("untraced", "line") in m and ("traced", "line") in m:
            out.append(_row(label, kernel, m[("untraced", "line")],
                            m[("traced", "line")], m.get(("traced", "trace"))))
    return out


def table(runs, make_table):
    """The comparison as make_table (report.markdown_table or text_table)
    makes it, or '' where runs have none."""
    return make_table(runs, HEADER, rows) if rows(runs) else ""


NOTE = ("Tracing's cost (--timing ab): each row compares the kernel's own "
        "timing line in the rounds without kprobe events and in those with "
        "them (a ratio below 1 means the probes made the step slower), and "
        "gives the traced time less the line's time in the same step.  "
        "Onlining rows take online_pages()' total and its parts as the "
        "kit's line and the trace give them, and the guest's wall time of "
        "each step (no trace beside it).")
