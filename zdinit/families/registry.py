"""The measured families as declarative entries: what a boot of each
runs, how its console is parsed and checked, how samples become records,
and how the records are tabulated.  runner.py has the one run loop,
resource check and results directory they share; a new family is an
entry here plus its guest code.

- rebind: ZONE_DEVICE namespaces rebound, memmap_init_zone_device()'s
  own time per rebind (guest/rebind.sh);
- onlining: memory added as System RAM, offlined and onlined, the time
  of each state change (guest/hotplug.sh);
- clearing: huge pages demand-faulted, GB/s by zdclear and by perf bench
  mem mmap (guest/clear.sh).
"""
import dataclasses
import json
import pathlib
from typing import Callable

from zdinit.families import clearing, onlining, rebind, scenarios
from zdinit.results import report
from zdinit.vm import console

MiB = 1 << 20


@dataclasses.dataclass(frozen=True)
class BootPlan:
    """One guest of a family: what qemu.boot() is given, and its names."""
    label: str                  # the kernel and variation; the round follows
    log_name: str
    what: str                   # the samples it takes, for the progress line
    params: dict
    ram_mb: int
    cmdline: tuple = ()
    nvdimm_bytes: int = 0
    touched_bytes: int = 0      # of the NVDIMM image, to place it
    virtio_mem: int = 0
    timeout_s: int = 1800


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    title: str
    parse: Callable             # console text -> run
    variations: Callable        # (spec, target) -> boots of a round
    boot: Callable              # (spec, target, variation, share, verify)
    check: Callable             # (spec, run, label, target, variation,
                                #  share, verify): raises if wrong
    collect: Callable           # (samples, spec, run, target, share, first_round)
    records: Callable           # (samples, specs) -> results.json runs
    host_bytes: Callable        # (spec, variant) -> bytes the host backs
    describe: Callable          # spec -> words for a refusal
    owns: Callable              # record -> whether it is this family's
    tables: Callable            # (runs, table) -> [(title, table text)]
    notes: Callable             # results -> paragraphs said with the tables
    plot: Callable | None = None    # (runs, path): draws the samples
    plot_file: str = ""


def _memmap_boot(spec, target, variation, share, verify):
    name = target.kernel.variant
    boots = spec.scenario.boots
    tag = f"-b{boots.index(variation)}" if len(boots) > 1 else ""
    hotplugged = spec.scenario.hotplug
    return BootPlan(
        label=f"{spec.scenario.name} {name}{tag}",
        log_name=f"{spec.scenario.name}-{name}{tag}",
        what=(f"{share} offline/online cycles per zone" if hotplugged else
              f"{share} rebinds per strategy, {len(target.strategies)} "
              "strategies"),
        params=rebind.boot_params(spec, target, share, verify, spec.aligns),
        ram_mb=spec.guest_ram_mb(),
        cmdline=(rebind.HOTPLUG_CMDLINE if hotplugged else ()) + variation,
        nvdimm_bytes=spec.size if spec.scenario.nvdimm else 0,
        touched_bytes=spec.image_touched_bytes(),
        virtio_mem=spec.size if spec.scenario.virtio_mem else 0)


def _memmap_host_bytes(spec, variant):
    return spec.guest_ram_mb() * MiB + spec.image_touched_bytes()


def _memmap_describe(spec):
    return f"{spec.scenario.name} at {scenarios.size_text(spec.size)}"


def _rebind_check(spec, run, label, target, variation, share, verify):
    rebind.check_run(spec, run, label, verify)


def _onlining_check(spec, run, label, target, variation, share, verify):
    kernel = target.kernel
    onlining.check_run(dataclasses.replace(spec, n=share), run, label,
                      onlining.times_onlining(kernel),
                      strategies=len(target.hotplug_strategies),
                      verify=verify,
                      contiguity=(onlining.keeps_contiguity_exact(kernel)
                                  if target.contiguity else None))


def _rebind_notes(results):
    notes = ["Times are memmap_init_zone_device()'s own (pr_debug), per "
             "rebind; medians over N rebinds, interleaved across boots and "
             "strategies, with p10-p90, min and max beside them.  first ms "
             "is the first bind after boot, not in the median.  Stock "
             "kernels time in whole jiffies: a time under one jiffy reads 0 and "
             "gets no ratio.  Ratios are of medians, with a 95% bootstrap "
             "interval (zero-width where N is 1)."]
    if any(r.get("vs_seed") for r in results["runs"]):
        notes.append(
            "vs upstream 7.4 method: the row's median against the same "
            f"kernel's '{scenarios.UPSTREAM_METHOD}' row, the method mm-stable "
            "queued for 7.4 from \"mm: optimize zone-device memmap "
            "initialization\" (a template copied with streaming stores into "
            "every range, on one thread), run by this kernel's own code.")
    return notes + _tcg_memmap_note(results)


def _onlining_notes(results):
    return ["kmem and virtio-mem rows: ms to change the state of every "
            "added memory block, the kernel's own sums over the blocks "
            "(the series' onlining timing, patched kernels only) and the "
            "guest's wall time; medians over N offline/online cycles, "
            "interleaved across boots and kernels.  The breakdown: medians "
            "over N cycles of onlining every added block, ms and share of "
            "the online wall time (the first onlining after the add is not "
            "counted).  online_pages is the kernel's own total; "
            "memmap_init_range and set_zone_contiguous count every "
            "move_pfn_range_to_zone(): the one inside online_pages and, "
            "with memmap_on_memory (mom), the one for the block's own "
            "memmap pages before it, which is also the vmemmap moves "
            "column; going_online to mem_online are online_pages' later "
            "parts; the rest is sysfs, locking and memory_block_online() "
            "around them.  Medians of parts need not add up to the median "
            "whole."] + _tcg_memmap_note(results)


def _tcg_memmap_note(results):
    if results["env"]["accel"] != "tcg":
        return []
    return ["Under TCG the times count emulated instructions and TCG's own "
            "costs, which depend on where the code sits (the placement "
            "lines above), not cache or memory effects: see the lab's "
            "results for hardware."]


def _clearing_notes(results):
    legend = ("GB/s medians with p10-p90 and N: perf bench mem mmap's "
              "demand and populate functions, then zdclear's demand fault "
              "and its ratio to stock of the same base.  max wait ms: the "
              "longest a second task on the same CPU waited during a "
              "clear.  32M ms: what one 32 MiB batch cost at the speed "
              "measured, where the preemption model batches (none, "
              "voluntary); '-' under full and lazy, which clear each run "
              "in one call.")
    tcg = [clearing.TCG_NOTE] if results["env"]["accel"] == "tcg" else []
    return [legend] + tcg


REBIND = Family(
    name="rebind", title="ZONE_DEVICE memmap initialisation per rebind",
    parse=console.parse,
    variations=lambda spec, target: spec.scenario.boots,
    boot=_memmap_boot, check=_rebind_check,
    collect=lambda samples, spec, run, target, share, first_round:
        rebind.collect_memmap(samples, spec, run, target.kernel.variant,
                             first_round),
    records=rebind.runs_table, host_bytes=_memmap_host_bytes,
    describe=_memmap_describe,
    owns=lambda r: "method" not in r and not r.get("metric"),
    tables=lambda runs, table: [("", table(runs))],
    notes=_rebind_notes, plot=lambda runs, path: report.plot(runs, path),
    plot_file="bench.png")

ONLINING = dataclasses.replace(
    REBIND, name="onlining", title="Memory onlining per state change",
    check=_onlining_check,
    collect=lambda samples, spec, run, target, share, first_round:
        onlining.collect(samples, spec, run, target.kernel.variant,
                        first_round),
    owns=lambda r: bool(r.get("metric")),
    tables=lambda runs, table: [
        ("", table(runs)),
        ("onlining, median ms (share of the online wall time)",
         report.hotplug_breakdown(runs, table))],
    notes=_onlining_notes, plot=None, plot_file="")

CLEARING = Family(
    name="clearing", title="Huge-page clearing on demand faults",
    parse=clearing.parse_run,
    variations=lambda spec, target: spec.models(target.kernel.base),
    boot=lambda spec, target, preempt, share, verify: BootPlan(
        label=f"clear {clearing.kernel_name(target.kernel.base, target.kernel.variant)}"
              f" preempt={preempt}",
        log_name=f"clear-{target.kernel.base.name}-{target.kernel.variant}"
                 f"-{preempt}",
        what=f"{share} loops per method",
        **clearing.boot_args(spec, target, "clear", preempt, n=share)),
    check=lambda spec, run, label, target, preempt, share, verify:
        clearing.check_run(spec, run, label, target, preempt, share),
    collect=lambda samples, spec, run, target, share, first_round:
        clearing.collect(samples, spec, run, target),
    records=clearing.runs_table,
    host_bytes=lambda spec, variant:
        clearing.guest_ram_mb(spec, variant) * MiB,
    describe=lambda spec: f"clear at {scenarios.size_text(spec.size)}",
    owns=lambda r: "method" in r,
    tables=lambda runs, table: [("", table(runs, clearing.HEADER, clearing.rows))],
    notes=_clearing_notes)

FAMILIES = (REBIND, ONLINING, CLEARING)


def of_spec(spec):
    """The family a planned spec belongs to."""
    if isinstance(spec, scenarios.ClearSpec):
        return CLEARING
    return ONLINING if spec.scenario.hotplug else REBIND


def tables(results, table=report.markdown_table):
    """[(family, [(title, table)], notes)] for the families the run has,
    table being report.markdown_table or report.text_table."""
    out = []
    for family in FAMILIES:
        runs = [r for r in results["runs"] if family.owns(r)]
        if runs:
            out.append((family, [(t, text) for t, text in
                                 family.tables(runs, table) if text],
                        family.notes(results)))
    return out


def summary_md(results):
    present = tables(results)
    lines = ["# zdinit results", "", *report.header_lines(
        results, placement=any(f is not CLEARING for f, _, _ in present))]
    for family, family_tables, notes in present:
        lines += ["", f"## {family.title}", ""]
        lines += [note + "\n" for note in notes]
        for title, text in family_tables:
            lines += ([f"### {title}", ""] if title else []) + [text, ""]
    return "\n".join(lines).rstrip() + "\n"


def text_report(results):
    """What a command prints when its run is done."""
    parts = []
    for family, family_tables, notes in tables(results, report.text_table):
        for title, text in family_tables:
            parts.append(f"{title}:\n\n{text}" if title else text)
        if family is CLEARING:
            parts += notes
    return "\n\n".join(parts)


def write(results, directory):
    """results.json, summary.md and each family's plot into directory."""
    directory = pathlib.Path(directory)
    (directory / "results.json").write_text(json.dumps(results, indent=1)
                                            + "\n")
    (directory / "summary.md").write_text(summary_md(results))
    for family in FAMILIES:
        runs = [r for r in results["runs"] if family.owns(r)]
        if runs and family.plot:
            report.save_plot(family.plot, runs, directory / family.plot_file)
