"""The memmap equality test: every strategy against the slow path, in QEMU.

Five parts, all on the patched kernel:
- the series' KUnit suite (memremap_pages() ranges, every strategy, and a
  fast path told to skip pages), run by the kernel at boot and judged by
  the kernel's own tools/testing/kunit/kunit.py;
- the same kinds of range made by the project's module, checked through
  debugfs, with the pfn and struct page counts the kernel logs;
- the altmap scenarios, where the memmap lives in the emulated NVDIMM;
- the check itself: a fast path told to skip struct pages on an altmap
  namespace that still holds correct ones must be caught;
- onlined memory (virtio-mem): every memmap built from templates checked
  against the slow path, and a skip injection caught.
"""
import pathlib
import tempfile

from zdinit.checks import boot
from zdinit.families import loop, onlining, registry, scenarios
from zdinit.kernel import kunit
from zdinit.units import GiB, MiB
from zdinit.vm import guest as vm_guest, qemu
from zdinit.errors import ZdinitError

# Each geometry is type:size_mb:offset_mb:shift.  Offsets of 2 MiB start the ranges off
# section (128 MiB) boundaries; odd sizes end them off those boundaries too.
GEOMETRIES = (
    ("private:130:2:0", "DEVICE_PRIVATE order-0, unaligned start and end"),
    ("generic:130:2:0", "generic order-0, unaligned start and end"),
    ("generic:1026:2:9", "2M compound pages with vmemmap tail reuse"),
    ("generic:2048:0:18", "1G compound pages with vmemmap tail reuse"),
)


def _geometry_pages(spec):
    _, size_mb, _, shift = spec.split(":")
    pages = int(size_mb) * MiB // scenarios.PAGE
    written = pages
    if int(shift):
        written = (pages >> int(shift)) * scenarios.REUSE_PAGES
    return pages, written


def check_matrix(run):
    """Per step: the right pfn count, the right struct pages written, and
    the strategy asked for actually used."""
    lines = []
    for step in run.steps:
        geometry = step.labels["geometry"]
        pages, written = _geometry_pages(geometry)
        init = step.memmap[0] if len(step.memmap) == 1 else None
        if init is None or init.pages != pages or init.written != written:
            raise ZdinitError(f"memmap-equality {geometry} {step.labels['strategy']}"
                              f": kernel logged {step.memmap}, expected "
                              f"{pages} pages, {written} written")
        lines.append(f"{geometry} {step.labels['strategy']}->{init.strategy}:"
                     f" {pages} pfns, {written} struct pages")
    return lines


def run_kunit(target, accel, logs):
    log = logs / "kunit.log"
    # The suite's own failures are kunit.py's to judge, from the log.
    boot.boot_check(target, boot.Guest(
        "memmap-equality kunit", {"scenario": "probe"}, log_path=log,
        cmdline=("kunit.enable=1", "loglevel=7")), accel,
        refuse_splats=False)
    suites = target.kernel.base.kunit_suites
    return [f"{kunit.label(suites)}: "
            f"{kunit.verdict(target.kernel.tree, log, suites)}"]


def run_module_matrix(target, accel, logs):
    # One word per kernel parameter: the guest splits the list on '+'.
    params = {"scenario": "memremap-matrix", "verify": 1,
              "strategies": ",".join(target.strategies),
              "geometries": "+".join(g for g, _ in GEOMETRIES)}
    matrix = boot.boot_check(target, boot.Guest(
        "memmap-equality matrix", params, log_path=logs / "matrix.log"), accel)
    out = check_matrix(matrix)
    problem = matrix.verify_problem()
    if problem:
        raise ZdinitError(f"memmap-equality: memmap verification failed: {problem}")
    out.append(f"module ranges: {matrix.verify['checked']} struct pages "
               f"compared with the slow path, 0 differ, 0 unchecked")
    return out


def run_skip_injection(target, accel, logs):
    """The check must catch what it exists for: on an altmap namespace
    whose memmap still holds the slow path's pages, a fast path that
    leaves some unwritten."""
    # What the skipped pages do to the kernel is not this check's
    # question: only whether the memmap check catches them.
    run = boot.boot_check(target, boot.Guest(
        "memmap-equality skip injection",
        {"scenario": "verify-catches-skip", "verify": 1},
        log_path=logs / "skip.log", images=vm_guest.check_images(1)),
        accel, refuse_splats=False)
    checks = [c for c in run.checks if c["name"] == "verify-catches-skip"]
    if len(checks) != 4 or any(c["result"] != "pass" for c in checks):
        raise ZdinitError(f"memmap-equality: the memmap check missed skipped struct "
                          f"pages: {checks}")
    return [f"skip injection {c['mode']} {c['strategy']}: {c['skipped']} "
            f"struct pages left unwritten, {c['caught']} caught"
            for c in checks]


# The hotplug check: 1 GiB of virtio-mem (8 blocks of 128 MiB), onlined
# movable with every strategy, then normal; the skip injection's count.
HOTPLUG_SIZE = GiB
HOTPLUG_STRATEGIES = ("auto", "slow", "template")
HOTPLUG_SKIP = 100


def added_pages(run):
    """The struct pages of all the blocks the guest added."""
    return (int(run.hotplug["blocks"]) * int(run.hotplug["block_bytes"])
            // scenarios.PAGE)


def hotplug_checked_pages(run):
    """The struct pages the kernel should have checked: every block of
    every movable onlining built from templates (all but the slow ones),
    before the skip injection."""
    onlines = [s for s in run.steps
               if s.labels.get("phase") in ("first", "online")
               and s.labels.get("strategy") != "slow"]
    return len(onlines) * added_pages(run)


def run_hotplug_verify(target, accel, logs):
    """Onlined memory: every memmap the templates build equals the slow
    path's, and the check catches struct pages left unwritten."""
    params = {"scenario": "hotplug-verify", "verify": 1,
              "size": HOTPLUG_SIZE, "n": 1, "zones": "movable",
              "strategies": ",".join(HOTPLUG_STRATEGIES), "timing": 1}
    run = boot.boot_check(target, boot.Guest(
        "memmap-equality hotplug", params, log_path=logs / "hotplug.log",
        cmdline=onlining.HOTPLUG_CMDLINE, virtio_mem=HOTPLUG_SIZE), accel)
    problem = run.verify_problem()
    if problem:
        raise ZdinitError(f"memmap-equality hotplug: memmap verification failed: "
                          f"{problem}")
    try:
        checked = int(run.hotplug["hotplug_checked"])
        want = hotplug_checked_pages(run)
    except (KeyError, ValueError):
        raise ZdinitError("memmap-equality hotplug: the guest reported no onlined "
                          "struct pages checked") from None
    if not want or checked != want:
        raise ZdinitError(f"memmap-equality hotplug: {checked} onlined struct pages "
                          f"checked, {want} built from templates")
    skips = [c for c in run.checks if c["name"] == "hotplug-catches-skip"]
    if (len(skips) != 1 or skips[0]["result"] != "pass"
            or skips[0]["caught"] != str(HOTPLUG_SKIP)):
        raise ZdinitError(f"memmap-equality hotplug: the memmap check missed "
                          f"skipped struct pages: {skips}")
    normal = [c for c in run.checks if c["name"] == "hotplug-verify-normal"]
    want = str(added_pages(run))
    if (len(normal) != 1 or normal[0]["mismatches"] != "0"
            or normal[0]["unchecked"] != "0"
            or normal[0]["checked"] != want
            or normal[0]["hotplug_checked"] != want):
        raise ZdinitError(f"memmap-equality hotplug: onlining into ZONE_NORMAL: "
                          f"{normal}, expected {want} struct pages checked, "
                          f"0 differ, 0 unchecked")
    return [f"onlined memory ({run.hotplug['blocks']} blocks, movable, "
            f"strategies {', '.join(HOTPLUG_STRATEGIES)}): {checked} struct "
            f"pages built from templates compared with the slow path, "
            f"0 differ, 0 unchecked",
            f"onlined memory (normal, template): {want} struct pages "
            f"compared with the slow path, 0 differ, 0 unchecked",
            f"onlined memory skip injection: {HOTPLUG_SKIP} struct pages "
            f"left unwritten, {skips[0]['caught']} caught"]


def altmap_specs(size):
    """The altmap cases, memmap in the (emulated) device: fsdax and devdax
    map=dev, 2M and 1G aligned; checked before any kernel is built.  They
    time nothing: the kernel's own lines serve (timing "log")."""
    return scenarios.plan(["fsdax-dev", "devdax-dev"], size, 2, ["2M", "1G"],
                          aligns_given=False, timing="log")


def run(target, accel, altmap):
    """altmap: altmap_specs()' RunSpecs."""
    with tempfile.TemporaryDirectory(prefix="zdinit-memmap-equality-") as tmp:
        logs = pathlib.Path(tmp)
        # Four guests with their own logs: side by side where they fit.
        parts = qemu.map_checks(lambda part: part(target, accel, logs),
                                (run_kunit, run_module_matrix,
                                 run_skip_injection, run_hotplug_verify),
                                qemu.CHECK_GUEST_RAM_MB * MiB
                                + qemu.CHECK_IMAGE_BYTES)
        out = [line for lines in parts for line in lines]
        samples = loop.run([(registry.REBIND, spec) for spec in altmap],
                             [target], 1, accel, logs, verify=True)
    for (scenario, align, metric, _, strategy), entry in sorted(
            samples[registry.REBIND.name].items()):
        # A rebind's background build and first faults: the same rebind.
        if metric:
            continue
        out.append(f"{scenario}{' ' + align if align else ''} {strategy}->"
                   f"{'/'.join(sorted(entry['resolved']))}: "
                   f"{len(entry['samples_ms'])} rebinds verified")
    return out
