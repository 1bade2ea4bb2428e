"""The clear family: huge-page clearing measured and checked in QEMU.

Kernels: 'clear-stock' and 'clear' (the base's linux-<base>-clear
series), both with configs/clear.config, each on one base: a kernel is a
(base, variant) pair, and one run may compare kernels of several bases.
One boot per kernel, preemption model and round; inside a boot the
clearing methods of that kernel are interleaved loop by loop
(guest/clear.sh), each measured by zdclear and by 'perf bench mem mmap'.
"""
import dataclasses
import re

from zdinit.families import scenarios
from zdinit.families.protocol import BootPlan
from zdinit.kernel import build, perf, under_test
from zdinit.results import report, stats
from zdinit.units import MiB
from zdinit.vm import console
from zdinit.errors import ZdinitError

KERNELS = ("clear-stock", "clear")


def default_kernels(on_bases):
    """Stock on every base and the series on the last: with one base,
    stock and the series; with 6.12,7.3, stock 6.12 (one 4K page at a
    time), stock 7.3 (upstream's multi-page clearing) and the series on
    7.3.  Returns (base, variant) pairs."""
    return ([(base, "clear-stock") for base in on_bases]
            + [(on_bases[-1], "clear")])


def kernel_pairs(variants, on_bases):
    """(base, variant) pairs: each variant on every base, or the default."""
    if not variants:
        return default_kernels(on_bases)
    return [(base, variant) for base in on_bases for variant in variants]


def kernel_name(base, variant):
    """What a run across bases calls a kernel: its cache directory name."""
    return build.work_name(variant, base)


# Methods each kernel interleaves in a boot: stock has one (on 6.12 it
# clears one 4K page at a time, on 7.3 in runs); the series
# has the upstream-style cached clear (debugfs stream=never) and the
# streaming clear forced on for every run away from the fault (stream=always),
# so that neither the guest's cache sizes nor its lack of CLZERO decide it.
METHODS = {"clear-stock": ("default",), "clear": ("cached", "stream"),
           "clear-broken": ("cached", "stream"),
           "clear-debug": ("cached", "stream"),
           "clear-kmsan": ("cached", "stream")}
# KMSAN keeps a shadow and an origin byte for every byte of memory, taken
# out of the guest's own RAM.
KMSAN_RAM_FACTOR = 3
# With 5-level paging, which TCG's CPU offers, the KMSAN kernel faults
# recursively in its interrupt entry hook (kmsan_unpoison_entry_regs())
# a few seconds into boot, before any huge page is cleared; with 4-level
# paging it runs.
KMSAN_CMDLINE = ("no5lvl",)
RESULT = re.compile(
    r"^@@zdinit clear (?P<kind>bench|latency|zero|perf) (?P<rest>.*)$")
PREEMPT = re.compile(r"^@@zdinit clear-preempt model=(?P<model>\S*)$")
RULE = re.compile(r"^@@zdinit clear-rule (?P<rest>.*)$")
SELFTEST = re.compile(r"^@@zdinit clear-selftest (?P<rest>.*)$")
# folio_zero_user()'s batch where the model is not preemptible (the series
# on 6.12, upstream from 7.3 on); a preemptible model clears each run in
# one call, and 7.3's x86 has no other model.
BATCH = 32 * MiB
BATCHED_MODELS = ("none", "voluntary")
# perf bench mem mmap's functions: the pages touched one by one after
# mmap(), or faulted in by MAP_POPULATE.
PERF_FUNCTIONS = ("demand", "populate")
@dataclasses.dataclass
class ClearRun:
    """What one boot reported."""
    bench: list
    latency: list
    zero: list
    rule: dict | None
    selftests: list = dataclasses.field(default_factory=list)
    perf: list = dataclasses.field(default_factory=list)
    preempt: str | None = None   # the model the kernel says it runs
    splats: list = dataclasses.field(default_factory=list)


def parse_run(text):
    run = ClearRun([], [], [], None, splats=console.parse(text).splats)
    for raw in text.splitlines():
        line = raw[raw.find("@@zdinit "):].strip() if "@@zdinit " in raw else ""
        m = RESULT.match(line)
        if m:
            getattr(run, m.group("kind")).append(console._labels(m.group("rest")))
        elif m := RULE.match(line):
            run.rule = console._labels(m.group("rest"))
        elif m := SELFTEST.match(line):
            run.selftests.append(console._labels(m.group("rest")))
        elif m := PREEMPT.match(line):
            run.preempt = m.group("model")
    return run


def kernel_cmdline(variant):
    return list(KMSAN_CMDLINE) if build.has_kmsan(variant) else []


def guest_ram_mb(spec, variant):
    factor = KMSAN_RAM_FACTOR if build.has_kmsan(variant) else 1
    return spec.guest_ram_mb() * factor


def host_has_1g_pages():
    with open("/proc/cpuinfo") as fh:
        return any(line.startswith("flags") and " pdpe1gb" in line
                   for line in fh)


def prepare(spec, kernels, with_perf=False):
    """Build perf (with_perf: first, being the cheaper build to fail),
    the kernels ((base, variant) pairs) and their initramfs images; pick
    the accelerator."""
    tools = {"perf": perf.binary()} if with_perf else {}
    targets, accel, why = under_test.prepare(
        [{"variant": variant, "base": base, "strategies": METHODS[variant]}
         for base, variant in kernels], tools)
    # TCG's 'max' CPU has 1G pages; under KVM the guest gets the host's.
    if "1G" in spec.pages and accel == "kvm" and not host_has_1g_pages():
        raise ZdinitError("1G pages: this CPU has no pdpe1gb, so the KVM "
                          "guest cannot map them; use --pages 2M")
    return targets, accel, why


def boot_args(spec, target, scenario, preempt, n=1, extra=None, cmdline=()):
    """What qemu.boot() is given for a guest/clear.sh scenario."""
    params = {"scenario": scenario, "size": spec.size, "n": n,
              "pages": ",".join(spec.pages),
              "strategies": ",".join(target.strategies)}
    params.update(extra or {})
    return {"params": params,
            "ram_mb": guest_ram_mb(spec, target.kernel.variant),
            "cmdline": tuple(spec.cmdline(preempt)
                             + kernel_cmdline(target.kernel.variant))
            + tuple(cmdline),
            "timeout_s": 3600}


def check_preempt(run, preempt, label):
    """The kernel ran the model asked for: a model the kernel does not
    have is refused at boot and another runs, so the run would be
    labelled with a model it did not use."""
    if run.preempt != preempt:
        raise ZdinitError(f"{label}: the kernel runs preempt="
                          f"{run.preempt or '(not reported)'}, not the "
                          f"{preempt} asked for")


def check_run(spec, run, label, target, preempt, share):
    """A measured boot: checked as any, and every method of the kernel
    reported each page size share times, by zdclear and by perf."""
    console.refuse_splats(run, label)
    check_preempt(run, preempt, label)
    expected = len(spec.pages) * share * len(METHODS[target.kernel.variant])
    if len(run.bench) != expected:
        raise ZdinitError(f"{label}: {len(run.bench)} bench results, "
                          f"expected {expected}")
    if len(run.perf) != expected * len(PERF_FUNCTIONS):
        raise ZdinitError(f"{label}: {len(run.perf)} perf bench results, "
                          f"expected {expected * len(PERF_FUNCTIONS)}")


def collect(samples, spec, run, target):
    """Samples keyed by (page, preempt, base, kernel, method): {"gbps":
    [...], "latency": [{"fault_ns", "max_wait_ns"}], "rule": {},
    "perf": {function: [GB/s, ...]}, "size": bytes}."""
    kernel = (target.kernel.base.name, target.kernel.variant)
    for result in run.bench:
        entry = _entry(samples, result, run, kernel, spec)
        entry["gbps"].append(int(result["bytes"]) / int(result["ns"]))
    for result in run.perf:
        entry = _entry(samples, result, run, kernel, spec)
        entry["perf"][result["function"]].append(
            int(result["bytes_per_s"]) / 1e9)
    for result in run.latency:
        entry = _entry(samples, result, run, kernel, spec)
        entry["latency"].append({"fault_ns": int(result["fault_ns"]),
                                 "max_wait_ns": int(result["max_wait_ns"])})


def _entry(samples, result, run, kernel, spec):
    key = (result["page"], run.preempt, *kernel, result["method"])
    return samples.setdefault(key, {
        "gbps": [], "latency": [], "rule": run.rule, "size": spec.size,
        "perf": {function: [] for function in PERF_FUNCTIONS}})


def gbps_summary(values):
    """stats names its fields after milliseconds; the values are GB/s."""
    return {k.replace("_ms", "_gbps"): v
            for k, v in stats.summarize(values).items()}


def _row_order(item):
    """Rows by page, then base, kernel, model and method."""
    page, preempt, base, kernel, method = item[0]
    return page, base, kernel, preempt, method


def runs_table(samples, specs=()):
    """results.json records: GB/s summary, vs clear-stock, worst wait."""
    runs = []
    for (page, preempt, base_name, kernel, method), e in sorted(
            samples.items(), key=_row_order):
        runs.append({"base": base_name, "page": page, "preempt": preempt,
                     "kernel": kernel, "method": method,
                     "size_bytes": e["size"], "samples_gbps": e["gbps"],
                     "latency": e["latency"], "rule": e["rule"],
                     "perf": {function: {"samples_gbps": values}
                              for function, values in e["perf"].items()}})
    return resummarize(runs)


# Summary fields a record has only where its samples give them.
OPTIONAL_FIELDS = ("vs_base", "max_wait_ms", "per_batch_ms")


def kernel_row(record):
    """(page, preempt, base, kernel, method): records from before the
    family compared bases name none, and are all of one base."""
    return (record["page"], record["preempt"], record.get("base"),
            record["kernel"], record["method"])


def summary(record, gbps):
    """The record's summary fields from its samples and, for vs_base,
    from gbps: {kernel_row: samples_gbps}."""
    fields = gbps_summary(record["samples_gbps"])
    if "perf" in record:     # runs from before perf bench have none
        fields["perf"] = {function: dict(gbps_summary(p["samples_gbps"]),
                                         samples_gbps=p["samples_gbps"])
                          for function, p in record["perf"].items()
                          if p["samples_gbps"]}
    page, preempt, base_name, kernel, _ = kernel_row(record)
    # Against stock of the same base.
    stock = next((gbps[key] for key in
                  ((page, preempt, base_name, name, "default")
                   for name in build.names_of("clear-stock"))
                  if key in gbps), None)
    if stock and kernel not in build.names_of("clear-stock"):
        # GB/s is a rate: the ratio is this row's median over stock's,
        # the two medians the table shows (a ratio of median times
        # differs from it where N is even).
        fields["vs_base"] = stats.speedup(record["samples_gbps"], stock)
    latency = record["latency"]
    if latency:
        fields["max_wait_ms"] = max(x["max_wait_ns"] for x in latency) / 1e6
    if latency and preempt in BATCHED_MODELS:
        # What one batch costs at the speed this guest cleared at: the
        # bound batching promises where the model is not preemptible.
        fields["per_batch_ms"] = min(x["fault_ns"] for x in latency) / 1e6 \
            * BATCH / record["size_bytes"]
    return fields


def resummarize(runs):
    """The clearing records with every summary field (GB/s median to
    stdev, perf's, vs_base, max wait, 32M batch) computed from their
    samples: the one computation of them, for a new run and a committed
    one alike."""
    gbps = {kernel_row(r): r["samples_gbps"] for r in runs}
    return [stats.with_summary(r, summary(r, gbps), OPTIONAL_FIELDS)
            for r in runs]


# GB/s as median, spread (p10-p90) and N: perf's two functions, then
# zdclear's demand fault with its comparison to stock of the same base,
# the longest wait of a task on the same CPU and, where the model batches,
# what one 32 MiB batch costs.
HEADER = ["base", "kernel", "method", "page", "preempt",
          "perf demand GB/s", "p10-p90", "N",
          "perf populate GB/s", "p10-p90", "N",
          "zdclear GB/s", "p10-p90", "N", "vs stock [95% CI]",
          "max wait ms", "32M ms"]


def gbps_cells(summary):
    """median, p10-p90, N; dashes where there are no samples."""
    if not summary:
        return ["-", "-", "-"]
    return [f"{summary['median_gbps']:.3f}",
            f"{summary['p10_gbps']:.3f}-{summary['p90_gbps']:.3f}",
            str(summary["n"])]


def rows(runs):
    out = []
    for r in runs:
        wait = r.get("max_wait_ms")
        batch = r.get("per_batch_ms")
        perf_runs = r.get("perf", {})
        out.append([r["base"], r["kernel"], r["method"], r["page"],
                    r["preempt"]]
                   + [cell for function in PERF_FUNCTIONS
                      for cell in gbps_cells(perf_runs.get(function))]
                   + gbps_cells(r)
                   + [report.ratio_text(r.get("vs_base")),
                      "-" if wait is None else f"{wait:.1f}",
                      "-" if batch is None else f"{batch:.1f}"])
    return out


# Said with every table: what a TCG guest's numbers can and cannot show.
TCG_NOTE = (
    "Under TCG (QEMU's emulator) GB/s, and the ratios between them, rank "
    "nothing: every store is "
    "emulated, and the host, its caches and its load decide the speed, "
    "not the clearing method.  What such a run proves is that the tool "
    "runs, that each kernel takes the clearing path named, with the "
    "preemption model asked for, and (clear-check) that every cleared "
    "page reads back zero.")


class Clearing:
    """The family: one boot per kernel and preemption model, every method
    of the kernel interleaved loop by loop inside it."""
    name = "clearing"
    title = "Huge-page clearing on demand faults"
    plot_file = ""
    shows_placement = False
    prints_notes = True

    def parse(self, text):
        return parse_run(text)

    def variations(self, spec, target):
        return spec.models(target.kernel.base)

    def boot(self, spec, target, preempt, share, verify):
        kernel = target.kernel
        return BootPlan(
            label=f"clear {kernel_name(kernel.base, kernel.variant)} "
                  f"preempt={preempt}",
            log_name=f"clear-{kernel.base.name}-{kernel.variant}-{preempt}",
            what=f"{share} loops per method",
            **boot_args(spec, target, "clear", preempt, n=share))

    def check(self, spec, run, label, target, preempt, share, verify):
        check_run(spec, run, label, target, preempt, share)

    def collect(self, samples, spec, run, target, share, first_round):
        collect(samples, spec, run, target)

    def records(self, samples, specs):
        return runs_table(samples, specs)

    def host_bytes(self, spec, variant):
        return guest_ram_mb(spec, variant) * MiB

    def describe(self, spec):
        return f"clear at {scenarios.size_text(spec.size)}"

    def owns(self, record):
        return "method" in record

    def runs_of(self, results):
        """Clear runs from before the family compared bases name no base: it
    is their kernels' (all of one base then)."""
        mine = [r for r in results["runs"] if self.owns(r)]
        versions = set(results["env"]["kernels"].values())
        implied = (".".join(min(versions).split(".")[:2])
                   if len(versions) == 1 else None)
        return [dict(r, base=r.get("base", implied)) for r in mine]

    def tables(self, runs, table):
        return [("", table(runs, HEADER, rows))]

    def resummarize(self, records):
        return resummarize(records)

    def record_name(self, record):
        # Clearing runs from before the family compared bases name none.
        return " ".join(record[k] for k in ("base", "page", "preempt",
                                            "kernel", "method")
                        if record.get(k))

    def notes(self, results):
        legend = ("GB/s medians with p10-p90 and N: perf bench mem mmap's "
                  "demand and populate functions, then zdclear's demand "
                  "fault and its ratio to stock of the same base.  max wait "
                  "ms: the longest a second task on the same CPU waited "
                  "during a clear.  32M ms: what one 32 MiB batch cost at "
                  "the speed measured, where the preemption model batches "
                  "(none, voluntary); '-' under full and lazy, which clear "
                  "each run in one call.")
        return [legend] + ([TCG_NOTE] if results["env"]["accel"] == "tcg"
                           else [])

    def plot(self, runs, path):
        raise NotImplementedError("the clearing family draws no plot")


CLEARING = Clearing()
