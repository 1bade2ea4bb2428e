"""The lab's huge-page clearing sweep: what to run, what it says, tables."""
import contextlib
import json
import pathlib
import statistics

from zdinit.lab import store_kinds
from zdinit.results import stats
from zdinit.errors import ZdinitError

UPSTREAM = "extent-stosb"       # clear_pages() with ERMS
STOCK = "page-stosb"            # 6.12's clear_page_erms, 4 KB per call
PAGE_4K = 4096
HUGE_2M = 2 << 20
HUGE_1G = 1 << 30
# The goals: the best method at 2 MB against upstream's extent
# REP STOSB and against 6.12's per-4 KB REP STOSB.
GOALS = {"vs_upstream_2M": 2.5, "vs_stock_4K": 3.5}
# rep stos "saturates" at the smallest extent within this fraction of its
# best bandwidth.  On AMD its bandwidth steps up where the CPU stops
# allocating lines (about the L3 size) and only creeps after that; a 10%
# creep is not worth a longer non-preemptible stretch.
SATURATION = 0.9
HUGEPAGES = pathlib.Path("/sys/kernel/mm/hugepages")
# The recommendation reads the medians of the thread's CPU time, which stop
# while it is descheduled: on a quiet machine they equal the wall-clock
# ones (both are in memmap_stores.json), on a shared one they are what is left of
# the measurement.
RATE = "cpu_gb_per_s"
COST = "cpu_median_ns"


def pow2_floor(n):
    return 1 << (n.bit_length() - 1)


def sweeps(quick, llc_bytes):
    """zdlab argument lists by sweep name.

    cold: a region well past the L3 cleared in back-to-back extents, the
    steady state of a process faulting in memory.  hot: a region of half
    the L3 that was just written, so it really is in cache.  fault: one
    2 MB page, then the first N bytes used.
    """
    region = fmt_size(cold_region(quick))
    extents = "2M,8M,32M,64M" if quick else "2M,8M,16M,32M,64M,256M,1G"
    hot_region = max(HUGE_2M, pow2_floor(max(llc_bytes, 2) // 2))
    hot_extents = ",".join(fmt_size(e) for e in
                           sorted({HUGE_2M, 4 * HUGE_2M, hot_region})
                           if e <= hot_region)
    reps = "3" if quick else "7"
    return {
        "clear-cold": ["clear", "bench", "--extents", extents, "--region",
                       region, "--states", "cold", "--backings",
                       "anon-thp,hugetlb,hugetlb-1G", "--reps", reps],
        "clear-hot": ["clear", "bench", "--extents", hot_extents, "--region",
                      fmt_size(hot_region), "--states", "hot",
                      "--backings", "anon-thp", "--reps", reps],
        "clear-fault": ["clear", "fault", "--backings", "anon-thp",
                        "--reps", "11" if quick else "51"],
    }


def cold_region(quick):
    return (64 << 20) if quick else HUGE_1G


def hugetlb_need(quick):
    """{page kB: pages} the cold sweep's hugetlb backings map."""
    region = cold_region(quick)
    return {HUGE_2M >> 10: region // HUGE_2M,
            HUGE_1G >> 10: max(1, region // HUGE_1G)}


@contextlib.contextmanager
def hugetlb_pool(need, root=HUGEPAGES):
    """Grow each hugetlb pool by what it lacks of need ({kB: pages}) for
    the run, and put nr_hugepages back afterwards.  Yields {kB: pages
    added}; a pool the kernel cannot grow is left for zdlab to report as
    unavailable, with its reason."""
    saved, added = {}, {}
    try:
        for kb, pages in need.items():
            pool = root / f"hugepages-{kb}kB"
            if not pool.is_dir():
                continue
            nr = int((pool / "nr_hugepages").read_text())
            free = int((pool / "free_hugepages").read_text())
            if free >= pages:
                continue
            try:
                (pool / "nr_hugepages").write_text(str(nr + pages - free))
            except OSError as exc:
                raise ZdinitError(f"cannot grow {pool}/nr_hugepages: "
                                  f"{exc.strerror}") from None
            saved[pool] = nr
            added[kb] = int((pool / "nr_hugepages").read_text()) - nr
        yield added
    finally:
        for pool, nr in saved.items():
            (pool / "nr_hugepages").write_text(str(nr))


def run(zdlab, quick, llc_bytes, methods, say):
    """Run the three sweeps with zdlab(args) -> JSON text, whose clearing
    methods are the rows methods of the lab's table; the "clear" part of
    memmap_stores.json."""
    bench: list = []
    fault: dict = {"runs": []}
    for name, args in sweeps(quick, llc_bytes).items():
        say(f"lab sweep '{name}'")
        data = json.loads(zdlab(args))
        if args[1] == "fault":
            fault = data
            continue
        for r in data["runs"]:
            r["sweep"] = name
        bench += data["runs"]
    return {"bench": bench,
            "fault": fault["runs"],
            "fault_setup": {k: v for k, v in fault.items()
                            if k not in ("runs", "cpu")},
            "recommendation": recommend(bench, methods),
            "fault_summary": fault_summary(fault["runs"])}


def measured(runs):
    return [r for r in runs if "median_ns" in r]


def best_of(runs, names):
    ok = [r for r in measured(runs) if r["method"] in names]
    return max(ok, key=lambda r: r[RATE]) if ok else None


def kinds_of(methods, runs):
    """{kind: method names} of the rows methods of the lab's table, which
    must list every method of runs."""
    return store_kinds.names_by_kind(
        methods, store_kinds.CLEAR_KINDS,
        {r["method"] for r in runs if "method" in r}, "the clearing sweep")


def recommend(bench_runs, methods):
    """Per backing and state: the batch size, the streaming threshold and
    the issue's two ratios at 2 MB, as the rows methods of the lab's
    table the runs were measured with classify them."""
    kinds = kinds_of(methods, bench_runs)
    per_page = kinds[store_kinds.PER_PAGE]
    cached = kinds[store_kinds.CACHED_EXTENT]
    streaming = kinds[store_kinds.STREAMING]
    out: dict = {}
    groups = sorted({(r["backing"], r["state"]) for r in measured(bench_runs)})
    for backing, state in groups:
        mine = [r for r in measured(bench_runs)
                if (r["backing"], r["state"]) == (backing, state)]
        extents = sorted({r["extent_bytes"] for r in mine
                          if r["method"] not in per_page})
        upstream = {r["extent_bytes"]: r[RATE] for r in mine
                    if r["method"] == UPSTREAM}
        rec: dict = {"best_by_extent": {}, "batch_bytes": None,
               "stream_wins_from_bytes": None}
        if upstream:
            top = max(upstream.values())
            rec["batch_bytes"] = min(e for e, v in upstream.items()
                                     if v >= SATURATION * top)
            rec["upstream_gb_per_s"] = {str(e): v for e, v in
                                        sorted(upstream.items())}
        wins = {}
        for extent in extents:
            at = [r for r in mine if r["extent_bytes"] == extent]
            win = best_of(at, cached + streaming)
            rec["best_by_extent"][str(extent)] = {
                "method": win["method"], "gb_per_s": win[RATE]}
            s, c = best_of(at, streaming), best_of(at, cached)
            if s and c:
                wins[extent] = s[RATE] > c[RATE]
        rec["stream_wins_by_extent"] = {str(e): w for e, w in wins.items()}
        rec["stream_wins_from_bytes"] = min((e for e, w in wins.items() if w),
                                            default=None)
        at_2m = [r for r in mine if r["extent_bytes"] == HUGE_2M]
        top = best_of(at_2m, cached + streaming)
        stock = best_of([r for r in mine if r["extent_bytes"] == PAGE_4K],
                        (STOCK,))
        if top:
            ratios = {"best_2M": top["method"],
                      "best_2M_gb_per_s": top[RATE]}
            if UPSTREAM in [r["method"] for r in at_2m]:
                ratios["vs_upstream_2M"] = top[RATE] / upstream[HUGE_2M]
            if stock:
                ratios["vs_stock_4K"] = top[RATE] / stock[RATE]
            for goal, want in GOALS.items():
                if goal in ratios:
                    ratios[f"{goal}_meets_goal"] = ratios[goal] >= want
            rec["ratios"] = ratios
        out[f"{backing}/{state}"] = rec
    return out


# ---- the clearing rule -----------------------------------------------------

# The rule of clear_pages_stream_threshold() and folio_zero_user()
# (patches/linux-7.3-clear/0001 and 0002): stream by default only on a CPU
# the kernel opts in with X86_FEATURE_CLEAR_PAGES_STREAM, and there clear
# the runs of a huge folio away from the fault with clear_pages_stream()
# (CLZERO where the CPU has it, MOVNTI otherwise) when together they reach
# the L2.  Everywhere else, and below the L2, upstream's REP STOSB.  A CPU
# is opted in where a committed lab run shows the whole operation faster
# streamed: one 2 MB page cleared in folio_zero_user()'s order, then all
# of it read, or all of it written (streaming_pays());
# tests/test_lab.py checks the two against every committed run.
# The CPU init_amd_zen3() sets X86_FEATURE_CLEAR_PAGES_STREAM on where it
# has CLZERO: family 19h model 01h (Milan), the one Zen 3 measured; the
# other Zen 3 models keep clear_pages().
OPTED_IN = (0x19, 0x01)
KERNEL_ORDER = "neighbourhood-last"
# The L2 of the CPUs of the committed clearing runs, which predate
# zdlab's l2_kb: Zen 4's from the clear series' measurements (patch 0001:
# "1 MiB L2 per core"), the Xeon's from its lscpu (zdlab/env.txt).
COMMITTED_L2 = {(25, 17): 1 << 20, (6, 207): 2 << 20}


def l2_bytes(cpu):
    """The L2 a lab run recorded, or the one known for a committed CPU;
    0 if neither."""
    if cpu.get("l2_kb"):
        return cpu["l2_kb"] << 10
    return COMMITTED_L2.get((cpu.get("family"), cpu.get("model_id")), 0)


def stream_method(cpu):
    """What clear_pages_stream() zeroes with on this CPU."""
    return "clzero" if cpu.get("clzero") else "movnti"


def opted_in(cpu):
    """Whether the kernel sets X86_FEATURE_CLEAR_PAGES_STREAM on this CPU,
    as zdlab recorded it."""
    return bool(cpu.get("clzero")) and (
        cpu.get("family"), cpu.get("model_id")) == OPTED_IN


def clear_choice(run_bytes, l2, cpu):
    """The rule: how the kernel clears a run of run_bytes away from the
    fault by default, given the L2 size in bytes (0 if unknown)."""
    if opted_in(cpu) and l2 and run_bytes >= l2:
        return stream_method(cpu)
    return UPSTREAM


def clear_touch_us(fault_runs, cpu):
    """{access: {method: us}}: a 2 MB page cleared in folio_zero_user()'s
    order with upstream's method or clear_pages_stream()'s, then all of it
    read or written, median us of CPU time; accesses with both only."""
    mine = (UPSTREAM, stream_method(cpu))
    cells: dict = {}
    for r in measured(fault_runs):
        if (r["order"] == KERNEL_ORDER and r["touch_bytes"] == HUGE_2M
                and r["method"] in mine):
            cells.setdefault(r["access"], {})[r["method"]] = r[COST] / 1e3
    return {a: c for a, c in sorted(cells.items()) if len(c) == len(mine)}


def streaming_pays(fault_runs, cpu):
    """Whether the clear and a full touch took less time streamed than
    with upstream's method, both for a read and for a write; None where
    the run does not have both."""
    us = clear_touch_us(fault_runs, cpu)
    if set(us) != {"read", "write"}:
        return None
    stream = stream_method(cpu)
    return all(c[stream] < c[UPSTREAM] for c in us.values())


def clear_rule(fault_runs, cpu, quick=False):
    """The clearing rule against this run: what the run shows, and what
    the kernel does by default on this CPU.  A quick run's few rounds
    judge nothing."""
    return {"clear_touch_us": clear_touch_us(fault_runs, cpu),
            "streaming_pays": None if quick else streaming_pays(fault_runs,
                                                                cpu),
            "kernel_streams": opted_in(cpu),
            "stream_method": stream_method(cpu)}


def clear_rule_lines(rule):
    """The run's verdict on streaming a 2 MB page, and whether the
    kernel's default agrees with it."""
    us, stream = rule["clear_touch_us"], rule["stream_method"]
    if rule["streaming_pays"] is None:
        return ["clearing rule: not judged (a --quick run, or no full read "
                "and write after a 2M clear measured)"]
    cells = "; ".join(f"{a} {c[UPSTREAM]:.1f} against {c[stream]:.1f}"
                      for a, c in us.items())
    pays = "faster" if rule["streaming_pays"] else "not faster"
    kernel = ("streams" if rule["kernel_streams"]
              else "keeps clear_pages()")
    lines = [f"clearing rule: clear + full touch of a 2M page, {UPSTREAM} "
             f"against {stream}, us: {cells}: {stream} {pays} for both; "
             f"the kernel {kernel} by default on this CPU"]
    if rule["streaming_pays"] != rule["kernel_streams"]:
        lines.append("  the kernel's default disagrees with this run: see "
                     "X86_FEATURE_CLEAR_PAGES_STREAM in the clear series")
    return lines


def fault_summary(fault_runs):
    """For each access and size touched: the fastest method and order,
    and what the neighbourhood rule changes for each method."""
    cells: dict = {}
    for r in measured(fault_runs):
        cells.setdefault((r["access"], r["touch_bytes"]), []).append(r)
    out: dict = {}
    for (access, touched), rows in sorted(cells.items()):
        win = min(rows, key=lambda r: r[COST])
        by_method: dict = {}
        for r in rows:
            by_method.setdefault(r["method"], {})[r["order"]] = r[COST]
        out.setdefault(access, {})[str(touched)] = {
            "fastest": f"{win['method']} {win['order']}",
            "fastest_us": win[COST] / 1e3,
            "neighbourhood_saves_us": {
                m: (o["plain"] - o["neighbourhood-last"]) / 1e3
                for m, o in sorted(by_method.items())
                if "plain" in o and "neighbourhood-last" in o}}
    return out


def fmt_size(n):
    if n >= HUGE_1G and n % HUGE_1G == 0:
        return f"{n // HUGE_1G}G"
    if n >= 1 << 20:
        return f"{n / 2**20:g}M"
    return f"{n / 1024:g}K"


def grid(rows):
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in rows)


def bench_table(runs):
    rows = [["sweep", "backing", "state", "region", "extent", "method",
             "GB/s", "min-max GB/s", "cpu GB/s", "THP"]]
    for r in runs:
        head = [r["sweep"], r["backing"], r.get("state", "-"),
                fmt_size(r["region_bytes"])]
        if r.get("unavailable"):
            rows.append(head + ["-", "-", "unavailable", "", "", ""])
        elif r.get("unsupported"):
            rows.append(head + [fmt_size(r["extent_bytes"]), r["method"],
                                "unsupported", "", "", ""])
        else:
            thp = (f"{r['thp_bytes'] / r['region_bytes']:.0%}"
                   if "thp_bytes" in r else "")
            rows.append(head + [fmt_size(r["extent_bytes"]), r["method"],
                                f"{r['gb_per_s']:.1f}",
                                f"{r['gb_per_s_min']:.1f}-"
                                f"{r['gb_per_s_max']:.1f}",
                                f"{r[RATE]:.1f}", thp])
    why = [f"{r['backing']} unavailable: {r['why']}" for r in runs
           if r.get("unavailable")]
    return "\n".join([grid(rows)] + why)


def fault_table(runs):
    rows = [["method", "access", "first", "order", "total us", "p10-p90 us",
             "cpu us", "clear us"]]
    for r in runs:
        if r.get("unsupported"):
            rows.append([r["method"], "unsupported", "", "", "", "", "", ""])
            continue
        us = [v / 1e3 for v in r["samples_ns"]]
        rows.append([r["method"], r["access"], fmt_size(r["touch_bytes"]),
                     r["order"], f"{statistics.median(us):.1f}",
                     f"{stats.percentile(us, 10):.1f}-"
                     f"{stats.percentile(us, 90):.1f}",
                     f"{r[COST] / 1e3:.1f}",
                     f"{r['clear_median_ns'] / 1e3:.1f}"])
    return grid(rows)


def summary_lines(rec):
    lines = []
    for group, r in rec.items():
        ratios = r.get("ratios", {})
        parts = [f"clear {group}: batch (rep stosb saturates) "
                 f"{fmt_opt(r['batch_bytes'])}, streaming wins from "
                 f"{fmt_opt(r['stream_wins_from_bytes'])}"]
        if "vs_upstream_2M" in ratios:
            parts.append(f"best at 2M {ratios['best_2M']} "
                         f"{ratios['vs_upstream_2M']:.2f}x upstream "
                         f"(goal {GOALS['vs_upstream_2M']}x)")
        if "vs_stock_4K" in ratios:
            parts.append(f"{ratios['vs_stock_4K']:.2f}x 6.12 per-4K "
                         f"(goal {GOALS['vs_stock_4K']}x)")
        lines.append("; ".join(parts))
    return lines


def fmt_opt(n):
    return "never (in the sizes measured)" if n is None else fmt_size(n)


def plot(bench_runs, fault_runs, methods, path):
    """methods: the rows of the lab's table the runs were measured with,
    whose order gives each method its colour."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_page = kinds_of(methods, bench_runs + fault_runs)[store_kinds.PER_PAGE]
    names = [row["name"] for row in methods]
    color = {n: plt.cm.tab10(i % 10) for i, n in enumerate(names)}
    panels = [(s, [r for r in measured(bench_runs)
                   if r["backing"] == "anon-thp" and r["state"] == s])
              for s in ("cold", "hot")]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for ax, (state, mine) in zip(axes, panels):
        region = {r["region_bytes"] for r in mine}
        for name in [n for n in names if n in {r["method"] for r in mine}]:
            pts = sorted((r["extent_bytes"], r[RATE])
                         for r in mine if r["method"] == name)
            if name in per_page:
                ax.axhline(pts[0][1], linestyle=":", color=color[name],
                           label=f"{name} (4K per call)")
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    color=color[name], label=name)
        ticks = sorted({r["extent_bytes"] for r in mine} - {PAGE_4K})
        if ticks:
            ax.set_xscale("log", base=2)
            ax.set_xticks(ticks, [fmt_size(t) for t in ticks])
        ax.set_title(f"THP, destination {state}, region "
                     + ",".join(fmt_size(r) for r in sorted(region)))
        ax.set_xlabel("extent per call")
        ax.set_ylabel("GB/s (median, CPU time)")
    axes[0].legend(fontsize=7)
    ax = axes[2]
    reads = [r for r in measured(fault_runs) if r["access"] == "read"]
    for name in [n for n in names if n in {r["method"] for r in reads}]:
        for order, style in (("plain", "-"), ("neighbourhood-last", "--")):
            pts = sorted((r["touch_bytes"], r[COST]) for r in reads
                         if r["method"] == name and r["order"] == order)
            ax.plot([p[0] for p in pts], [p[1] / 1e3 for p in pts], style,
                    marker=".", color=color[name],
                    label=name if order == "plain" else None)
    ticks = sorted({r["touch_bytes"] for r in reads})
    if ticks:
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [fmt_size(t) for t in ticks])
    ax.set_title("cold 2 MB page: clear, then read the first N\n"
                 "(dashed: neighbourhood cleared last)")
    ax.set_xlabel("N")
    ax.set_ylabel("clear + read, us (median CPU time)")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
