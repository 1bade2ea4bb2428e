"""The memmap equality test: every strategy against the slow path, in QEMU.

Four parts, all on the patched kernel:
- the series' KUnit suite (memremap_pages() ranges, every strategy, and a
  fast path told to skip pages), run by the kernel at boot and judged by
  the kernel's own tools/testing/kunit/kunit.py;
- the same kinds of range made by the project's module, checked through
  debugfs, with the pfn and struct page counts the kernel logs;
- the altmap scenarios, where the memmap lives in the emulated NVDIMM;
- the check itself: a fast path told to skip struct pages on an altmap
  namespace that still holds correct ones must be caught.
"""
import pathlib
import tempfile

from zdinit import bench, kunit, parse, qemu, scenarios
from zdinit.errors import ZdinitError

MiB = 1 << 20
# type:size_mb:offset_mb:shift.  Offsets of 2 MiB start the ranges off
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
            raise ZdinitError(f"selftest {geometry} {step.labels['strategy']}"
                              f": kernel logged {step.memmap}, expected "
                              f"{pages} pages, {written} written")
        lines.append(f"{geometry} {step.labels['strategy']}->{init.strategy}:"
                     f" {pages} pfns, {written} struct pages")
    return lines


def run_kunit(target, accel, logs):
    log = logs / "kunit.log"
    qemu.boot(target.kernel, target.initrd, {"scenario": "probe"}, accel,
              ram_mb=qemu.CHECK_GUEST_RAM_MB, timeout_s=900, log_path=log,
              label="selftest kunit",
              cmdline=("kunit.enable=1", "loglevel=7"))
    return [f"KUnit {kunit.SUITE}: {kunit.verdict(target.kernel.tree, log)}"]


def run_module_matrix(target, accel, logs):
    # One word per kernel parameter: the guest splits the list on '+'.
    params = {"scenario": "memremap-matrix", "verify": 1,
              "strategies": ",".join(target.strategies),
              "geometries": "+".join(g for g, _ in GEOMETRIES)}
    boot = qemu.boot(target.kernel, target.initrd, params, accel,
                     ram_mb=qemu.CHECK_GUEST_RAM_MB, timeout_s=900,
                     label="selftest matrix",
                     log_path=logs / "matrix.log")
    matrix = parse.parse(boot.log)
    if matrix.splats:
        raise ZdinitError(f"selftest: kernel reported: {matrix.splats[0]}")
    out = check_matrix(matrix)
    problem = matrix.verify_problem()
    if problem:
        raise ZdinitError(f"selftest: memmap verification failed: {problem}")
    out.append(f"module ranges: {matrix.verify['checked']} struct pages "
               f"compared with the slow path, 0 differ, 0 unchecked")
    return out


def run_skip_injection(target, accel, logs):
    """The check must catch what it exists for: on an altmap namespace
    whose memmap still holds the slow path's pages, a fast path that
    leaves some unwritten."""
    with qemu.SparseImage(qemu.CHECK_IMAGE_BYTES, qemu.CHECK_IMAGE_BYTES,
                          "selftest-skip") as img:
        boot = qemu.boot(target.kernel, target.initrd,
                         {"scenario": "verify-catches-skip", "verify": 1},
                         accel, ram_mb=qemu.CHECK_GUEST_RAM_MB, timeout_s=900,
                         nvdimms=[(img.path, img.size)],
                         log_path=logs / "skip.log",
                         label="selftest skip injection")
    run = parse.parse(boot.log)
    checks = [c for c in run.checks if c["name"] == "verify-catches-skip"]
    if len(checks) != 4 or any(c["result"] != "pass" for c in checks):
        raise ZdinitError(f"selftest: the memmap check missed skipped struct "
                          f"pages: {checks}")
    return [f"skip injection {c['mode']} {c['strategy']}: {c['skipped']} "
            f"struct pages left unwritten, {c['caught']} caught"
            for c in checks]


def altmap_specs(size):
    """The altmap cases, memmap in the (emulated) device: fsdax and devdax
    map=dev, 2M and 1G aligned; checked before any kernel is built."""
    return scenarios.plan(["fsdax-dev", "devdax-dev"], size, 2, ["2M", "1G"])


def run(target, accel, altmap):
    """altmap: altmap_specs()' RunSpecs."""
    with tempfile.TemporaryDirectory(prefix="zdinit-selftest-") as tmp:
        logs = pathlib.Path(tmp)
        # Three guests with their own logs: side by side where they fit.
        parts = qemu.map_checks(lambda part: part(target, accel, logs),
                                (run_kunit, run_module_matrix,
                                 run_skip_injection),
                                qemu.CHECK_GUEST_RAM_MB * MiB
                                + qemu.CHECK_IMAGE_BYTES)
        out = [line for lines in parts for line in lines]
        samples = bench.run_bench([target], altmap, 1, accel, logs,
                                  verify=True)
    for (scenario, align, _, strategy), entry in sorted(samples.items()):
        out.append(f"{scenario}{' ' + align if align else ''} {strategy}->"
                   f"{'/'.join(sorted(entry['resolved']))}: "
                   f"{len(entry['samples_ms'])} rebinds verified")
    return out
