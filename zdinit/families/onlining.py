"""The onlining family (kmem, virtio-mem): checks and samples per step.

A hotplug step changes the state of every memory block the guest added
(guest/hotplug.sh).  Its samples are the guest's wall time of the whole
operation and, on a kernel with the series' onlining timing, the sums
over those blocks of what move_pfn_range_to_zone() and online_pages()
report, in ms.
"""
import collections
import dataclasses
import os

from zdinit.families import rebind, tracing_cost
from zdinit.kernel import build
from zdinit.units import PAGE
from zdinit.vm import console, trace
from zdinit.errors import ZdinitError

# A hotplug step logs two timing lines per memory block: room for 800
# blocks (100 GB) between two reads of the kernel log.
HOTPLUG_CMDLINE = ("log_buf_len=4M",)


# The metrics in the family's main table; results.json and the breakdown
# table (breakdown()) have every part.
TABLE_METRICS = ("memmap_init_range", "set_zone_contiguous", "online_pages",
                 "online wall", "offline wall", "add wall")
ONLINE_PHASES = ("first", "online")


def times_onlining(kernel):
    """Whether the built kernel carries the series' onlining timing lines
    and the guest is to switch them on.  ZDINIT_HOTPLUG_TIMING=0 leaves
    them off, to measure what printing them costs the wall times."""
    if os.environ.get("ZDINIT_HOTPLUG_TIMING") == "0":
        return False
    return build.applies(kernel, build.TIMING)


def keeps_contiguity_exact(kernel):
    """Whether the built kernel's zone->contiguous must equal the walk's
    answer after every step: where it counts the pages.  Elsewhere it may
    be clear where the walk finds no hole: unpatched onlining walks before
    the range is online, so it leaves the flag clear after every online."""
    return build.applies(kernel, build.CONTIGUITY_COUNT)


def contiguity_problem(run, exact):
    """The first zone whose contiguous flag the walk contradicts, in one
    line, or None.  A flag set where the walk finds a hole is always
    wrong; one clear where it finds none only where exact."""
    if not run.contiguity:
        return "the guest reported no zone contiguity"
    for line in run.contiguity:
        try:
            flag, walk = int(line["flag"]), int(line["walk"])
            where = f"zone {line['zone']} of node {line['node']} after {line['step']}"
        except (KeyError, ValueError):
            return f"unreadable contiguity report {line}"
        if flag and not walk:
            return f"{where}: marked contiguous, the walk finds a hole"
        if exact and walk and not flag:
            return f"{where}: not marked contiguous, the walk finds no hole"
    return None


def variant_label(step):
    """'movable', 'normal mom' (memmap_on_memory), 'add mom', ...; with
    timing "ab", 'movable traced' or 'movable untraced'."""
    labels = step.labels
    what = labels.get("zone") or labels["phase"]
    what += " mom" if labels.get("mom") == "Y" else ""
    if labels.get("trace") in ("on", "off"):
        what += " traced" if step.traced else " untraced"
    return what


def moves_before_online(moves, onlines):
    """The move_pfn_range_to_zone() calls of a step that no online_pages()
    contains: with memmap_on_memory, each block's own memmap pages,
    moved by mhp_init_memmap_on_memory() before online_pages() runs."""
    inside = collections.Counter(o.pages for o in onlines)
    outside = []
    for move in moves:
        if inside[move.pages]:
            inside[move.pages] -= 1
        else:
            outside.append(move)
    return outside


def timed_calls(step, timing):
    """[(prefix, moves, onlines)]: the step's MoveTimings and
    OnlineTimings, from the trace or the kernel's lines as timing says;
    with "ab" a traced step has both, the lines' metrics prefixed "log "."""
    if timing == "log":
        return [("", step.moves, step.onlines)]
    traced = ([("", step.traced_moves(), step.traced_onlines())]
              if step.traced else [])
    if timing == "trace":
        return traced
    return traced + [("log ", step.moves, step.onlines)]


def part_metrics(moves, onlines):
    """{metric: ms}: what moves and onlines add up to."""
    metrics = {}
    if moves:
        metrics["memmap_init_range"] = sum(m.memmap_us for m in moves) / 1000.0
        if all(m.contig_us is not None for m in moves):
            metrics["set_zone_contiguous"] = sum(m.contig_us
                                                 for m in moves) / 1000.0
    if onlines:
        metrics["online_pages"] = sum(o.total_us for o in onlines) / 1000.0
        for part in console.ONLINE_PARTS:
            metrics[part] = sum(o.parts[part] for o in onlines) / 1000.0
        before = moves_before_online(moves, onlines)
        if before:
            metrics["vmemmap moves"] = sum(m.memmap_us + (m.contig_us or 0)
                                           for m in before) / 1000.0
    return metrics


def step_metrics(step, timing="log"):
    """{metric: ms} for one step, timed as timing says
    (scenarios.TIMINGS)."""
    phase = step.labels["phase"]
    metrics = {}
    if step.wall and "us" in step.wall:
        wall = "online" if phase in ONLINE_PHASES else phase
        metrics[f"{wall} wall"] = step.wall["us"] / 1000.0
    for prefix, moves, onlines in timed_calls(step, timing):
        metrics.update({prefix + metric: ms for metric, ms in
                        part_metrics(moves, onlines).items()})
    return metrics


def check_run(spec, run, label, timed, strategies=1, verify=False,
              contiguity=None):
    """Every step reported its wall time; with timed, the kernel timed
    every block it onlined, and the pages add up to the blocks; each of
    the strategies onlined every zone spec.n times.  With verify, the
    kernel compared every memmap it built with the slow path, onlined
    struct pages included, and found no difference (it fails closed).
    contiguity None: no contiguity check; else whether the check must find
    the flag exact (see contiguity_problem)."""
    console.refuse_splats(run, label)
    console.refuse_events_when_off(run, label)
    if contiguity is not None:
        problem = contiguity_problem(run, contiguity)
        if problem:
            raise ZdinitError(f"{label}: {problem}")
    if verify:
        problem = run.verify_problem()
        if not problem and not int(run.hotplug.get("hotplug_checked", 0)):
            problem = "no onlined struct page was compared"
        if problem:
            raise ZdinitError(f"{label}: {problem}")
    try:
        blocks = int(run.hotplug["blocks"])
        block_pages = int(run.hotplug["block_bytes"]) // PAGE
    except (KeyError, ValueError):
        raise ZdinitError(f"{label}: the guest reported no memory blocks") from None
    if not blocks:
        raise ZdinitError(f"{label}: no memory block was added")
    phases = [s.labels.get("phase") for s in run.steps]
    want = spec.n * len(spec.scenario.zones) * strategies
    if phases.count("online") != want:
        raise ZdinitError(f"{label}: {phases.count('online')} online steps, "
                          f"expected {spec.n} x {len(spec.scenario.zones)} "
                          f"zones x {strategies} strategies")
    for step in run.steps:
        if not step.wall or "us" not in step.wall:
            raise ZdinitError(f"{label}: step {step.labels} reported no wall time")
        if step.labels["phase"] not in ONLINE_PHASES:
            continue
        try:
            found = timed_calls(step, spec.timing)
        except trace.TraceError as err:
            raise ZdinitError(f"{label}: step {step.labels}: {err}") from None
        if spec.timing != "log" and not step.traced and \
                step.labels.get("trace") != "off":
            raise ZdinitError(f"{label}: step {step.labels} was not traced")
        for prefix, moves, onlines in found:
            if prefix == "log " or spec.timing == "log":
                if not timed:
                    continue
                what = "online_pages timing lines"
            else:
                what = "traced online_pages calls"
            if len(onlines) != blocks:
                raise ZdinitError(f"{label}: step {step.labels}: {len(onlines)} "
                                  f"{what} for {blocks} blocks")
            pages = sum(m.pages for m in moves)
            if pages != blocks * block_pages:
                raise ZdinitError(f"{label}: step {step.labels}: memmap of "
                                  f"{pages} pages initialised, {blocks} blocks "
                                  f"have {blocks * block_pages}")


def collect(samples, spec, run, kernel, first_round):
    """Add run's samples: key (scenario, variant, metric, kernel,
    strategy), the strategy the step onlined with ('default' where the
    kernel chose, and for offlining)."""
    pages = int(run.hotplug["blocks"]) * int(run.hotplug["block_bytes"]) // PAGE
    for step in run.steps:
        phase = step.labels["phase"]
        for metric, ms in step_metrics(step, spec.timing).items():
            key = (spec.scenario.name, variant_label(step), metric,
                   kernel, step.labels.get("strategy", "default"))
            entry = samples.setdefault(key, {
                "first_bind_ms": None, "samples_ms": [], "pages": pages,
                "written": None, "resolved": set(), "threads": set()})
            if phase == "first":
                if first_round:
                    entry["first_bind_ms"] = ms
            else:
                entry["samples_ms"].append(ms)


def split_record(record):
    """A runs_table() record of the family: 'align' is its variant."""
    record.update(variant=record.pop("align"), align=None)
    return record


def boot_params(spec, target, n, verify, aligns):
    """rebind.boot_params() with the strategies the kernel onlines with,
    and the zones, timing and contiguity check the guest's hotplug steps
    ask of the kernel."""
    params = rebind.boot_params(spec, target, n, verify, aligns)
    params["strategies"] = ",".join(target.hotplug_strategies)
    params["zones"] = ",".join(spec.scenario.zones)
    # The kernel's timing lines where they are read: not with "trace".
    params["timing"] = int(times_onlining(target.kernel)
                           and spec.timing != "trace")
    params["contiguity"] = int(target.contiguity)
    return params


def runs_table(samples, specs):
    return rebind.runs_table(samples, specs, shape=split_record)


def _share(part, whole):
    if part is None:
        return "-"
    if not whole:
        return f"{part:.2f}"
    return f"{part:.2f} ({100 * part / whole:.0f}%)"


BREAKDOWN_HEADER = (["scenario", "kernel", "online wall ms", "online_pages",
                     "memmap_init_range", "set_zone_contiguous"]
                    + list(console.ONLINE_PARTS[1:])
                    + ["vmemmap moves", "rest outside online_pages"])


def breakdown_rows(runs):
    """Per hotplug scenario/variant/kernel: the median ms of each part of
    onlining all blocks, with its share of the median wall time."""
    medians: dict = {}
    for r in runs:
        if r.get("metric"):
            # Offlining has no strategy: its row is the kernel's own.
            kernel = r["kernel"]
            if r.get("strategy", "default") != "default":
                kernel += f" {r['strategy']}"
            key = (r["scenario"], r["variant"], kernel)
            medians.setdefault(key, {})[r["metric"]] = r["median_ms"]
    out = []
    for (scenario, variant, kernel), m in sorted(medians.items()):
        wall = m.get("online wall")
        if wall is None:
            continue
        online = m.get("online_pages")
        outside = None
        if online is not None:
            outside = wall - online - m.get("vmemmap moves", 0.0)
        out.append([f"{scenario} {variant}", kernel, f"{wall:.2f}"]
                   + [_share(m.get(part), wall) for part in
                      ("online_pages", "memmap_init_range",
                       "set_zone_contiguous", *console.ONLINE_PARTS[1:],
                       "vmemmap moves")]
                   + [_share(outside, wall)])
    return out


def breakdown(runs, table):
    """The breakdown as a table (report.markdown_table or text_table), or
    ''."""
    if not breakdown_rows(runs):
        return ""
    return table(runs, BREAKDOWN_HEADER, breakdown_rows)


class Onlining(rebind.Rebind):
    """The family: rebind's boots and records, with hotplug steps in
    place of rebinds."""
    name = "onlining"
    title = "Memory onlining per state change"
    plot_file = ""

    def params(self, spec, target, share, verify):
        return boot_params(spec, target, share, verify, spec.aligns)

    def cmdline(self, variation):
        return HOTPLUG_CMDLINE + variation

    def samples_text(self, share, target):
        return f"{share} offline/online cycles per zone"

    def check(self, spec, run, label, target, variation, share, verify):
        kernel = target.kernel
        check_run(dataclasses.replace(spec, n=share), run, label,
                  times_onlining(kernel),
                  strategies=len(target.hotplug_strategies), verify=verify,
                  contiguity=(keeps_contiguity_exact(kernel)
                              if target.contiguity else None))

    def collect(self, samples, spec, run, target, share, first_round):
        collect(samples, spec, run, target.kernel.variant, first_round)

    def records(self, samples, specs):
        return runs_table(samples, specs)

    def tables(self, runs, table):
        shown = [r for r in runs if r["metric"] in TABLE_METRICS]
        return [("", table(shown, rebind.HEADER, rebind.rows)),
                ("onlining, median ms (share of the online wall time)",
                 breakdown(runs, table)),
                ("tracing's cost", tracing_cost.table(runs, table))]

    def notes(self, results):
        timing = rebind.timings_of(self.runs_of(results))
        how = {"trace": "kprobe events on the entry and return of "
                        "online_pages() and the functions it calls, every "
                        "kernel alike",
               "ab": "kprobe events in half the rounds (on, off, off, "
                     "on), the series' onlining timing lines throughout (metrics 'log ...'; "
                     "variants 'traced' and 'untraced')"}
        return ["kmem and virtio-mem rows: ms to change the state of every "
                "added memory block, the kernel's own sums over the blocks "
                "(" + how.get(timing, "the series' onlining timing, patched "
                              "kernels only") + ") and "
                "the guest's wall time; medians over N offline/online "
                "cycles, interleaved across boots and kernels.  The "
                "breakdown: medians over N cycles of onlining every added "
                "block, ms and share of the online wall time (the first "
                "onlining after the add is not counted).  online_pages is "
                "the kernel's own total; memmap_init_range and "
                "set_zone_contiguous count every move_pfn_range_to_zone(): "
                "the one inside online_pages and, with memmap_on_memory "
                "(mom), the one for the block's own memmap pages before it, "
                "which is also the vmemmap moves column; going_online to "
                "mem_online are online_pages' later parts; the rest is "
                "sysfs, locking and memory_block_online() around them.  "
                "Medians of parts need not add up to the median whole."] \
            + ([tracing_cost.NOTE] if timing == "ab" else []) \
            + rebind.tcg_note(results)


ONLINING = Onlining()
