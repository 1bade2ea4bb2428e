"""The rebind family: ZONE_DEVICE namespaces rebound in the guest
(guest/rebind.sh), memmap_init_zone_device()'s own time per rebind.
Its boot parameters, checks, records, table and plot; the onlining
family (onlining.py) builds on them."""
import collections

from zdinit.families import scenarios, tracing_cost
from zdinit.families.protocol import BootPlan
from zdinit.kernel import build
from zdinit.results import report, stats
from zdinit.units import MiB
from zdinit.vm import console, qemu, trace
from zdinit.errors import ZdinitError


# zdinit.trace for each timing (scenarios.TIMINGS): guest/trace.sh.
TRACE_PARAM = {"trace": 1, "log": 0, "ab": "ab"}


def boot_params(spec, target, n, verify, aligns):
    params = {"scenario": spec.scenario.name, "size": spec.size, "n": n,
              "align": ",".join(a for a in aligns if a) or "2M",
              "strategies": ",".join(target.strategies),
              "trace": TRACE_PARAM[spec.timing]}
    if verify:
        params["verify"] = 1
    return params


def traced_ms(step, label, func=trace.MEMMAP):
    """The one traced time of func in a step: memmap_init_zone_device()
    (Step.traced_memmap) or the memremap_pages() around it
    (Step.traced_memremap).  (memmap_init_zone_device()'s nr_pages
    argument counts the altmap's own pages, which the kernel's line
    leaves out: the line's count is the one checked, in check_run.)"""
    try:
        calls = (step.traced_memremap() if func == trace.MEMREMAP
                 else step.traced_memmap())
    except trace.TraceError as err:
        raise ZdinitError(f"{label}: step {step.labels}: {err}") from None
    if len(calls) != 1:
        raise ZdinitError(f"{label}: step {step.labels}: {len(calls)} "
                          f"{func} calls traced, not 1")
    return calls[0]


# The metric of the whole memremap_pages() that a traced step's
# memmap_init_zone_device() ran in: the bind as its caller waits for it,
# with the vmemmap populated and the pgmap's ranges mapped.
MEMREMAP = "memremap_pages"
# The metric of a step whose memmap was built on demand: the kernel's
# time from memremap_pages() queueing the background build to its last
# unit (console.BACKGROUND_LINE).  Its records are compared with the bind
# of the other kernels and strategies, which built the whole memmap.
BACKGROUND = "background"
# The metrics of the first faults after a device-dax bind (guest/rebind.sh
# first_faults): on the first 2 MiB, which every kernel has built by then,
# and on the last, which the background build reaches last.
FAULT_FIRST = "fault, first 2M"
FAULT_LAST = "fault, last 2M"


def timings(spec, step, label):
    """[(metric, ms)] of one step: the traced time, or the kernel's line,
    under no metric's name; with timing "ab" both, named for what timed
    them ("trace", "log traced", "log untraced"); where the memmap was
    built on demand, its background build (BACKGROUND); and after a
    device-dax bind, its first faults (FAULT_FIRST, FAULT_LAST)."""
    faults = step.faults or {}
    return bind_timings(spec, step, label) + [
        (BACKGROUND, ms) for ms in step.background_ms] + [
        (metric, faults[key] / 1e6) for metric, key in
        ((FAULT_FIRST, "first_ns"), (FAULT_LAST, "last_ns")) if key in faults]


# What the rows of each metric time, for the notes under the table.
METRIC_NOTES = {
    MEMREMAP: "Rows ': memremap_pages': the whole memremap_pages() around "
              "the same memmap_init_zone_device(), timed by its own kprobe "
              "events: the bind as the driver waits for it, with the "
              "vmemmap populated and the ranges mapped.",
    BACKGROUND: "Rows ': background': the kernel's own line, in whole "
                "jiffies, from memremap_pages() queueing the background "
                "build of a memmap left to be built on demand to its last "
                "unit built; its ratios compare it with the other kernels' "
                "and strategies' whole memmap_init_zone_device().",
    FAULT_FIRST: "Rows ': fault, first 2M' and ': fault, last 2M': the "
                 "first write to the first and to the last 2 MiB of the "
                 "device-dax mapping right after each bind, in the guest "
                 "(CLOCK_MONOTONIC); with the memmap built on demand the "
                 "last one lands where the background build has not "
                 "reached yet.",
}


def bind_timings(spec, step, label):
    """timings() of the bind alone: with timing "trace", the
    memremap_pages() around it too (MEMREMAP)."""
    if spec.timing == "log":
        return [("", step.ms)]
    if spec.timing == "trace":
        if not step.traced:
            raise ZdinitError(f"{label}: step {step.labels} was not traced")
        return [("", traced_ms(step, label)),
                (MEMREMAP, traced_ms(step, label, trace.MEMREMAP))]
    if step.labels.get("trace") not in ("on", "off"):
        raise ZdinitError(f"{label}: step {step.labels} says neither "
                          "trace=on nor trace=off")
    if not step.traced:
        return [("log untraced", step.ms)]
    return [("log traced", step.ms), ("trace", traced_ms(step, label))]


def check_run(spec, run, label, verify):
    """The guest did what the scenario says: geometry, counts, no splats;
    each step timed as spec.timing asks."""
    console.refuse_splats(run, label)
    console.refuse_events_when_off(run, label)
    problem = run.verify_problem() if verify else None
    if problem:
        raise ZdinitError(f"{label}: {problem}")
    for step in run.steps:
        if len(step.memmap) != 1:
            raise ZdinitError(f"{label}: step {step.labels} logged "
                              f"{len(step.memmap)} memmap timing lines, not 1")
        align = step.labels.get("align", "")
        want = scenarios.expected_pages(spec, run, align)
        if step.pages != want:
            raise ZdinitError(f"{label}: {step.labels}: kernel initialised "
                              f"{step.pages} pages, geometry says {want}")
        timings(spec, step, label)
        check_background(step, label)
        init = step.memmap[0]
        if init.written is not None:
            want_written = scenarios.expected_written(spec.scenario, want,
                                                      align)
            if init.written != want_written:
                raise ZdinitError(
                    f"{label}: {step.labels}: {init.written} struct pages "
                    f"written, expected {want_written}")


def check_rebinds(spec, run, label, strategies, share):
    """Every strategy rebound share times at each alignment: a guest whose
    scenario stopped early, or never started, is refused."""
    done = collections.Counter((step.labels.get("align", ""),
                                step.labels.get("strategy"))
                               for step in run.steps
                               if step.labels.get("phase") == "rebind")
    for align in spec.aligns:
        for strategy in strategies:
            if done[align, strategy] != share:
                where = f" at align {align}" if align else ""
                raise ZdinitError(
                    f"{label}: the guest rebound {done[align, strategy]} "
                    f"times with strategy {strategy}{where}, not {share}")


def check_background(step, label):
    """A step whose range the kit says was left to be built on demand
    has the strategy that asks for it and one background build finished
    in it; any other step has none."""
    init = step.memmap[0]
    strategy = scenarios.strategy_name(step.labels.get("strategy", ""))
    if len(step.background_ms) != int(init.on_demand) or (
            init.on_demand and strategy != scenarios.ON_DEMAND):
        raise ZdinitError(
            f"{label}: {step.labels}: the kit says the memmap was "
            f"{'' if init.on_demand else 'not '}left to be built on "
            f"demand, and {len(step.background_ms)} background builds "
            "finished in the step")


def collect_memmap(samples, spec, run, kernel, first_round):
    for step in run.steps:
        init = step.memmap[0]
        for metric, ms in timings(spec, step, kernel):
            key = (spec.scenario.name, step.labels.get("align", ""), metric,
                   kernel, step.labels["strategy"])
            entry = samples.setdefault(key, {"first_bind_ms": None,
                                             "samples_ms": [], "pages": None,
                                             "written": None,
                                             "resolved": set(),
                                             "threads": set()})
            entry["pages"] = init.pages
            entry["written"] = init.written
            # What auto's choice depends on besides the struct pages written.
            entry["guest_llc_bytes"] = run.llc_bytes()
            if init.strategy:
                entry["resolved"].add(init.strategy)
            if init.threads:
                entry["threads"].add(init.threads)
            if step.labels["phase"] == "first":
                if first_round:
                    entry["first_bind_ms"] = ms
            else:
                entry["samples_ms"].append(ms)


def runs_table(samples, specs, shape=lambda record: record):
    """results.json 'runs' records, plus speedups against the base kernel
    and, on the same kernel, against upstream 7.4's method
    (scenarios.UPSTREAM_METHOD)."""
    sizes = {s.scenario.name: s.size for s in specs}
    timing = {s.scenario.name: s.timing for s in specs}
    runs = []
    for (scenario, align, metric, kernel, strategy), e in sorted(samples.items()):
        if not e["samples_ms"]:
            continue
        record = {"scenario": scenario, "align": align or None,
                  **({"metric": metric} if metric else {}),
                  "timing": timing[scenario],
                  "kernel": kernel, "strategy": strategy,
                  "resolved": sorted(e["resolved"]) or None,
                  "threads": sorted(e["threads"]) or None,
                  "size_bytes": sizes[scenario], "pages": e["pages"],
                  "struct_pages_written": e["written"],
                  # None: the guest did not list its caches (onlining
                  # records, runs before it did); 0: it found none.
                  "guest_llc_bytes": e.get("guest_llc_bytes"),
                  "first_bind_ms": e["first_bind_ms"],
                  "samples_ms": e["samples_ms"]}
        runs.append(shape(record))
    return resummarize(runs)


# Summary fields a record has only where its run has the row compared.
RATIO_FIELDS = ("vs_base", "vs_base_note", "vs_upstream", "vs_seed")
# The kernel of upstream's method as queued for 7.4, run by its own code
# (build.VARIANTS), which every other kernel of a run is compared with.
UPSTREAM = "upstream"


def measured(record):
    """What a record times, apart from the kernel and strategy: records
    of the same one are compared."""
    return (record["scenario"], record.get("align"), record.get("variant"),
            record.get("metric"))


def summary(record, samples):
    """The record's summary fields from its samples_ms and, for the
    ratios, from samples: {(measured, kernel, strategy): samples_ms}."""
    fields = stats.summarize(record["samples_ms"])
    what, kernel = measured(record), record["kernel"]
    # A background build is compared with the others' whole bind.
    if record.get("metric") == BACKGROUND:
        what = what[:-1] + (None,)
    stock = next((samples[key] for key in
                  ((what, name, "default") for name in build.names_of("stock"))
                  if key in samples), None)
    if stock and not build.is_stock(kernel):
        fields["vs_base"] = stats.speedup(stock, record["samples_ms"])
        if fields["vs_base"] is None:
            fields["vs_base_note"] = "base below its 1 ms resolution"
    upstream = samples.get((what, UPSTREAM, "default"))
    if upstream and kernel != UPSTREAM:
        fields["vs_upstream"] = stats.speedup(upstream, record["samples_ms"])
    seed = samples.get((what, kernel, scenarios.UPSTREAM_METHOD))
    if seed and record["strategy"] != scenarios.UPSTREAM_METHOD:
        fields["vs_seed"] = stats.speedup(seed, record["samples_ms"])
    return fields


def resummarize(runs):
    """The rebind and onlining records with every summary field (median
    to stdev, vs_base, vs_upstream, vs_seed) computed from their samples: the one
    computation of them, for a new run and a committed one alike."""
    samples = {(measured(r), r["kernel"], r["strategy"]): r["samples_ms"]
               for r in runs}
    return [stats.with_summary(r, summary(r, samples), RATIO_FIELDS)
            for r in runs]


def row_label(r):
    """'fsdax-dev', 'devdax-mem 2M', 'kmem movable mom: memmap_init_range',
    'fsdax-dev: log traced'."""
    where = r.get("variant") or r.get("align")
    label = r["scenario"] + (f" {where}" if where else "")
    return label + (f": {r['metric']}" if r.get("metric") else "")


def rows(runs):
    out = []
    for r in runs:
        ratio = report.ratio_text(r.get("vs_base"))
        strategy = r["strategy"]
        # "auto@1" asks for auto on one thread: compare the name alone.
        if r.get("resolved") and r["resolved"] != [strategy.partition("@")[0]]:
            strategy += "->" + "/".join(r["resolved"])
        if r.get("threads") and r["threads"] != [1]:
            strategy += " x" + "/".join(map(str, r["threads"]))
        out.append([row_label(r), r["kernel"], strategy, str(r["pages"]),
                    report.fmt_ms(r["first_bind_ms"]), report.fmt_ms(r["median_ms"]),
                    report.fmt_ms(r["p10_ms"]), report.fmt_ms(r["p90_ms"]),
                    report.fmt_ms(r["min_ms"]), report.fmt_ms(r["max_ms"]), str(r["n"]),
                    ratio, report.ratio_text(r.get("vs_upstream")),
                    report.ratio_text(r.get("vs_seed"))])
    return out


HEADER = ["scenario", "kernel", "strategy", "pages", "first ms", "median ms",
          "p10", "p90", "min", "max", "N", "speedup vs stock [95% CI]",
          "speedup vs upstream [95% CI]", "vs stream@1 in-kernel [95% CI]"]

# The table of a run made with bench --icount (records with "icount"),
# whose times are instruction counts: a guest millisecond is a million
# instructions (Minstr), and each ratio one of instructions.
ICOUNT_HEADER = (["scenario", "kernel", "strategy", "pages", "first Minstr",
                  "median Minstr", "p10", "p90", "min", "max", "N",
                  "instructions per struct page",
                  "instructions of stock / row [95% CI]",
                  "instructions of upstream 7.4 method / row [95% CI]"])


def counted(runs):
    """Whether runs were made with bench --icount: their times count
    instructions."""
    return any(r.get("icount") for r in runs)


def per_struct_page(r):
    """An icount record's median instructions per struct page written:
    the kernel's count, or where it gives none (stock, upstream) the
    scenario's geometry, which every kernel of a base writes alike."""
    written = r.get("struct_pages_written") or scenarios.expected_written(
        scenarios.SCENARIOS[r["scenario"]], r["pages"], r.get("align") or "2M")
    return f"{r['median_ms'] * 1e6 / written:.1f}" if written else "-"


def icount_rows(runs):
    """rows() of an icount run, with the instructions per struct page."""
    return [row[:11] + [per_struct_page(r)] + row[11:]
            for r, row in zip(runs, rows(runs))]


def plot(runs, path):
    """One panel per scenario: each kernel/strategy's samples and median."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["scenario"], r.get("align") or "") for r in runs})
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4),
                             squeeze=False)
    for ax, (scenario, align) in zip(axes[0], panels):
        mine = [r for r in runs if r["scenario"] == scenario
                and (r.get("align") or "") == align]
        labels = [f"{r['kernel']}\n{r['strategy']}"
                  + (f"\n{r['metric']}" if r.get("metric") else "")
                  for r in mine]
        ax.boxplot([r["samples_ms"] for r in mine], showfliers=True)
        ax.set_xticks(range(1, len(mine) + 1), labels, fontsize=7)
        ax.set_title(f"{scenario} {align}".strip(), fontsize=9)
        ax.set_ylabel("memmap init per rebind ("
                      + ("million instructions" if counted(mine) else "ms")
                      + ")")
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def icount_note(results):
    """What the numbers of a bench --icount run are, or nothing."""
    if results["env"]["accel"] != qemu.ICOUNT:
        return []
    return ["Counted with bench --icount: QEMU's TCG with -icount "
            f"{results['env'].get('icount', qemu.ICOUNT_OPTIONS)}, under "
            "which the guest's clock advances one nanosecond per guest "
            "instruction, so each time the kernel printed is an instruction "
            "count: a millisecond is a million instructions (Minstr), of the "
            "guest's vCPUs together.  QEMU runs them in turn on one host "
            "thread: a row with two threads counts the instructions of both, "
            "not the time they took side by side.  The counts take in what "
            "else the guest ran in the timed interval (its timer interrupts) "
            "and do not depend on the host, its load or where the code "
            "sits; the time TCG spends per instruction does, and the lab "
            "measures hardware."]


def timings_of(runs):
    """How a run's records were timed (scenarios.TIMINGS): "log" for those
    recorded before the harness could trace."""
    found = {r.get("timing", "log") for r in runs}
    return found.pop() if len(found) == 1 else "log"


def tcg_note(results):
    """The caveat of memmap times measured under TCG, or nothing."""
    if results["env"]["accel"] != "tcg":
        return []
    return ["Under TCG the times count emulated instructions and TCG's own "
            "costs, which depend on where the code sits (the placement "
            "lines above), not cache or memory effects: see the lab's "
            "results for hardware."]


class Rebind:
    """The family: one boot per entry of the scenario's boots, every
    strategy of the kernel rebinding in turn inside it."""
    name = "rebind"
    title = "ZONE_DEVICE memmap initialisation per rebind"
    plot_file = "bench.png"
    shows_placement = True
    prints_notes = False

    def parse(self, text):
        return console.parse(text)

    def variations(self, spec, target):
        return spec.scenario.boots

    def params(self, spec, target, share, verify):
        return boot_params(spec, target, share, verify, spec.aligns)

    def cmdline(self, variation):
        return variation

    def boot(self, spec, target, variation, share, verify):
        name = target.kernel.variant
        boots = spec.scenario.boots
        tag = f"-b{boots.index(variation)}" if len(boots) > 1 else ""
        return BootPlan(
            label=f"{spec.scenario.name} {name}{tag}",
            log_name=f"{spec.scenario.name}-{name}{tag}",
            what=self.samples_text(share, target),
            params=self.params(spec, target, share, verify),
            ram_mb=spec.guest_ram_mb(), cmdline=self.cmdline(variation),
            nvdimm_bytes=spec.size if spec.scenario.nvdimm else 0,
            touched_bytes=spec.image_touched_bytes(),
            virtio_mem=spec.size if spec.scenario.virtio_mem else 0)

    def samples_text(self, share, target):
        return (f"{share} rebinds per strategy, {len(target.strategies)} "
                "strategies")

    def check(self, spec, run, label, target, variation, share, verify):
        check_rebinds(spec, run, label, target.strategies, share)
        check_run(spec, run, label, verify)

    def collect(self, samples, spec, run, target, share, first_round):
        collect_memmap(samples, spec, run, target.kernel.variant, first_round)

    def records(self, samples, specs):
        return runs_table(samples, specs)

    def host_bytes(self, spec, variant):
        return spec.guest_ram_mb() * MiB + spec.image_touched_bytes()

    def describe(self, spec):
        return f"{spec.scenario.name} at {scenarios.size_text(spec.size)}"

    def owns(self, record):
        """A record of a scenario this family runs (Scenario.family)."""
        scenario = scenarios.SCENARIOS.get(record.get("scenario", ""))
        return scenario is not None and scenario.family == self.name

    def runs_of(self, results):
        return [r for r in results["runs"] if self.owns(r)]

    def resummarize(self, records):
        return resummarize(records)

    def record_name(self, record):
        return f"{row_label(record)} {record['kernel']} {record['strategy']}"

    def tables(self, runs, table):
        if counted(runs):
            return [("", table(runs, ICOUNT_HEADER, icount_rows))]
        return [("", table(runs, HEADER, rows)),
                ("tracing's cost", tracing_cost.table(runs, table))]

    def notes(self, results):
        how = {"trace": "from a kprobe event on its entry and one on its "
                        "return, microseconds on the trace clock, the same "
                        "way in every kernel",
               "ab": "two ways in one boot: the kernel's own line (pr_debug) "
                     "in every round, kprobe events on its entry and "
                     "return in half the rounds, on, off, off, on (metric "
                     "'trace'); "
                     "'log traced' and 'log untraced' are the line in the "
                     "rounds with and without the probes"}
        first = ICOUNT_HEADER[4] if counted(results["runs"]) else HEADER[4]
        timing = timings_of(self.runs_of(results))
        notes = ["Times are memmap_init_zone_device()'s own, "
                 + how.get(timing, "(pr_debug)") + ", per "
                 "rebind; medians over N rebinds, interleaved across boots "
                 "and strategies, with p10-p90, min and max beside them.  "
                 f"{first} is the first bind after boot, not in the median.  "
                 + ("" if timing == "trace" else
                    "The kernel's own line times in whole jiffies: a time "
                    "under one jiffy reads 0 and gets no ratio.  ")
                 + "Ratios are of medians, "
                 "with a 95% bootstrap interval (zero-width where N is 1)."]
        if any(r.get("vs_upstream") for r in results["runs"]):
            notes.append(
                "speedup vs upstream: the kernel upstream's median over the "
                "row's, in the same scenario: 7.3 with the ZONE_DEVICE "
                "template and zone contiguity series as upstream queued "
                "them for 7.4, run by its own code.")
        if any(r.get("vs_seed") for r in results["runs"]):
            notes.append(
                "vs stream@1 in-kernel: the row's median against the same "
                f"kernel's '{scenarios.UPSTREAM_METHOD}' row, the method "
                "mm-stable queued for 7.4 from \"mm: optimize zone-device "
                "memmap initialization\" (a template copied with streaming "
                "stores into every range, on one thread), run by this "
                "kernel's own code.")
        if timing == "ab":
            notes.append(tracing_cost.NOTE)
        metrics = {r.get("metric") for r in results["runs"]}
        notes += [text for metric, text in METRIC_NOTES.items()
                  if metric in metrics]
        return notes + tcg_note(results) + icount_note(results)

    def plot(self, runs, path):
        plot(runs, path)


REBIND = Rebind()
