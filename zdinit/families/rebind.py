"""The rebind and onlining families' kernels under test, boot parameters,
checks and records (families.py declares them, runner.py runs them)."""
import dataclasses
import pathlib

from zdinit.families import onlining, scenarios
from zdinit.kernel import build, initramfs
from zdinit.results import stats
from zdinit.errors import ZdinitError


@dataclasses.dataclass
class Target:
    """One kernel under test and the strategies it runs in each boot:
    strategies for ZONE_DEVICE scenarios, hotplug_strategies for the
    hotplug family (patched: onlining follows the same knob); contiguity:
    the kernel has the contiguity check, which the guest runs."""
    kernel: object
    initrd: pathlib.Path
    strategies: tuple
    hotplug_strategies: tuple = ("default",)
    contiguity: bool = False


def build_target(variant, base, strategies, hotplug_strategies=("default",),
                 contiguity=False, tools=None):
    """Build the kernel (contiguity: with the contiguity check) and its
    initramfs (tools: more static binaries for it); its Target."""
    kernel = build.build(variant, base, contiguity)
    initrd = initramfs.build(kernel, kernel.out / "initramfs.cpio.gz", tools)
    return Target(kernel, initrd, tuple(strategies), tuple(hotplug_strategies),
                  contiguity)


# A hotplug step logs two timing lines per memory block: room for 800
# blocks (100 GB) between two reads of the kernel log.
HOTPLUG_CMDLINE = ("log_buf_len=4M",)


def boot_params(spec, target, n, verify, aligns):
    strategies = (target.hotplug_strategies if spec.scenario.hotplug
                  else target.strategies)
    params = {"scenario": spec.scenario.name, "size": spec.size, "n": n,
              "align": ",".join(a for a in aligns if a) or "2M",
              "strategies": ",".join(strategies)}
    if spec.scenario.zones:
        params["zones"] = ",".join(spec.scenario.zones)
        params["timing"] = int(onlining.times_onlining(target.kernel))
        params["contiguity"] = int(target.contiguity)
    if verify:
        params["verify"] = 1
    return params


def check_run(spec, run, label, verify):
    """The guest did what the scenario says: geometry, counts, no splats."""
    if run.splats:
        raise ZdinitError(f"{label}: kernel reported: {run.splats[0]}")
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
        init = step.memmap[0]
        if init.written is not None:
            want_written = scenarios.expected_written(spec, want, align)
            if init.written != want_written:
                raise ZdinitError(
                    f"{label}: {step.labels}: {init.written} struct pages "
                    f"written, expected {want_written}")


def collect_memmap(samples, spec, run, kernel, first_round):
    for step in run.steps:
        key = (spec.scenario.name, step.labels.get("align", ""), kernel,
               step.labels["strategy"])
        entry = samples.setdefault(key, {"first_bind_ms": None,
                                         "samples_ms": [], "pages": None,
                                         "written": None, "resolved": set(),
                                         "threads": set()})
        init = step.memmap[0]
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
                entry["first_bind_ms"] = init.ms
        else:
            entry["samples_ms"].append(init.ms)


def runs_table(samples, specs):
    """results.json 'runs' records, plus speedups against the base kernel
    and, on the same kernel, against upstream 7.4's method
    (scenarios.UPSTREAM_METHOD)."""
    sizes = {s.scenario.name: s.size for s in specs}
    family = {s.scenario.name for s in specs if s.scenario.hotplug}
    runs = []
    for (scenario, align, kernel, strategy), e in sorted(samples.items()):
        if not e["samples_ms"]:
            continue
        record = {"scenario": scenario, "align": align or None,
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
        runs.append(onlining.split_record(record) if scenario in family
                    else record)
    return resummarize(runs)


# Summary fields a record has only where its run has the row compared.
RATIO_FIELDS = ("vs_base", "vs_base_note", "vs_seed")


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
    base = samples.get((what, "base", "default"))
    if base and kernel != "base":
        fields["vs_base"] = stats.speedup(base, record["samples_ms"])
        if fields["vs_base"] is None:
            fields["vs_base_note"] = "base below its 1 ms resolution"
    seed = samples.get((what, kernel, scenarios.UPSTREAM_METHOD))
    if seed and record["strategy"] != scenarios.UPSTREAM_METHOD:
        fields["vs_seed"] = stats.speedup(seed, record["samples_ms"])
    return fields


def resummarize(runs):
    """The rebind and onlining records with every summary field (median
    to stdev, vs_base, vs_seed) computed from their samples: the one
    computation of them, for a new run and a committed one alike."""
    samples = {(measured(r), r["kernel"], r["strategy"]): r["samples_ms"]
               for r in runs}
    return [stats.with_summary(r, summary(r, samples), RATIO_FIELDS)
            for r in runs]
