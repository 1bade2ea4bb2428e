"""The memmap equality test: every strategy against the slow path, in QEMU."""
import pathlib
import tempfile

from zdinit import bench, parse, qemu, scenarios
from zdinit.errors import ZdinitError

MiB = 1 << 20
# type:size_mb:offset_mb:shift.  Offsets of 2 MiB start the ranges off
# section (128 MiB) and pageblock (4 MiB) boundaries; odd sizes end them
# off those boundaries too.
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
    the strategy asked for (or its documented fallback) actually used."""
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


def altmap_specs(size):
    """The altmap cases, memmap in the (emulated) device: fsdax and devdax
    map=dev, 2M and 1G aligned; checked before any kernel is built."""
    return scenarios.plan(["fsdax-dev", "devdax-dev"], size, 2, ["2M", "1G"])


def run(target, accel, altmap):
    """altmap: altmap_specs()' RunSpecs."""
    # One word per kernel parameter: the guest splits the list on '+'.
    params = {"scenario": "memremap-matrix", "verify": 1,
              "strategies": ",".join(target.strategies),
              "geometries": "+".join(g for g, _ in GEOMETRIES)}
    boot = qemu.boot(target.kernel, target.initrd, params, accel,
                     ram_mb=1536, timeout_s=900, label="selftest matrix")
    matrix = parse.parse(boot.log)
    if matrix.splats:
        raise ZdinitError(f"selftest: kernel reported: {matrix.splats[0]}")
    out = check_matrix(matrix)
    if not matrix.verify or matrix.verify["mismatches"] or \
            not matrix.verify["checked"]:
        raise ZdinitError(f"selftest: memmap verification failed: "
                          f"{matrix.verify}")
    out.append(f"module ranges: {matrix.verify['checked']} struct pages "
               f"compared with the slow path, 0 differ")
    with tempfile.TemporaryDirectory(prefix="zdinit-selftest-") as logs:
        samples = bench.run_bench([target], altmap, 1, accel,
                                  pathlib.Path(logs), verify=True)
    for (scenario, align, _, strategy), entry in sorted(samples.items()):
        out.append(f"{scenario}{' ' + align if align else ''} {strategy}->"
                   f"{'/'.join(sorted(entry['resolved']))}: "
                   f"{len(entry['samples_ms'])} rebinds verified")
    return out
