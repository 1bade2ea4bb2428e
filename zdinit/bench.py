"""Run scenarios on several kernels, interleaved, and collect samples."""
import contextlib
import dataclasses
import os
import pathlib
import subprocess

from zdinit import parse, progress, qemu, scenarios, stats
from zdinit.errors import ZdinitError

MiB = 1 << 20


@dataclasses.dataclass
class Target:
    """One kernel under test and the strategies it runs in each boot."""
    kernel: object
    initrd: pathlib.Path
    strategies: tuple


def mem_available():
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def check_resources(specs):
    for spec in specs:
        need = spec.guest_ram_mb() * MiB + spec.image_touched_bytes()
        have = mem_available()
        if need + (1 << 30) > have:
            raise ZdinitError(
                f"{spec.scenario.name} at {spec.size >> 30}G needs about "
                f"{need >> 30} GiB of host memory, {have >> 30} GiB available;"
                f" use a smaller --size")


def split_rounds(n, rounds):
    """n rebinds over boots: [n // rounds + 1 for the remainder, ...]."""
    rounds = max(1, min(rounds, n))
    return [n // rounds + (1 if i < n % rounds else 0) for i in range(rounds)]


def boot_params(spec, target, n, verify, aligns):
    params = {"scenario": spec.scenario.name, "size": spec.size, "n": n,
              "align": ",".join(a for a in aligns if a) or "2M",
              "strategies": ",".join(target.strategies)}
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


def run_bench(targets, specs, rounds, accel, logs_dir, verify=False,
              timeout_s=1800):
    """Boot every target for every scenario, round after round.

    Returns raw samples keyed by (scenario, align, kernel, strategy):
    {"first_bind_ms", "samples_ms", "pages", "written", "resolved",
    "threads"}: the strategies and thread counts the kernel reported.
    """
    check_resources(specs)
    samples = {}
    for spec in specs:
        shares = split_rounds(spec.n, rounds)
        for r, share in enumerate(shares, 1):
            for target in targets:
                name = target.kernel.variant
                label = f"{spec.scenario.name} {name} round {r}/{len(shares)}"
                progress.say(f"{label}: booting ({share} rebinds per "
                             f"strategy, {len(target.strategies)} strategies)")
                params = boot_params(spec, target, share, verify, spec.aligns)
                with contextlib.ExitStack() as stack:
                    nvdimms = []
                    if spec.scenario.nvdimm:
                        image = stack.enter_context(qemu.SparseImage(
                            spec.size, spec.image_touched_bytes(),
                            f"{name}-r{r}"))
                        nvdimms = [(image.path, image.size)]
                    boot = qemu.boot(target.kernel, target.initrd, params,
                                     accel, ram_mb=spec.guest_ram_mb(),
                                     nvdimms=nvdimms, timeout_s=timeout_s,
                                     log_path=logs_dir / f"{spec.scenario.name}-{name}-r{r}.log",
                                     label=label)
                run = parse.parse(boot.log)
                check_run(spec, run, label, verify)
                collect(samples, spec, run, name, first_round=(r == 1))
    return samples


def collect(samples, spec, run, kernel, first_round):
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
    """results.json 'runs' records, plus speedups against the base kernel."""
    sizes = {s.scenario.name: s.size for s in specs}
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
                  "first_bind_ms": e["first_bind_ms"],
                  "samples_ms": e["samples_ms"]}
        record.update(stats.summarize(e["samples_ms"]))
        base = samples.get((scenario, align, "base", "default"))
        if base and kernel != "base" and base["samples_ms"]:
            record["vs_base"] = stats.speedup(base["samples_ms"],
                                              e["samples_ms"])
            if record["vs_base"] is None:
                record["vs_base_note"] = "base below its 1 ms resolution"
        runs.append(record)
    return runs


def git_rev():
    root = pathlib.Path(__file__).resolve().parent.parent
    proc = subprocess.run(["git", "-C", str(root), "describe", "--always",
                           "--dirty", "--abbrev=12"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def host_cpu():
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def environment(accel, accel_why, targets):
    return {"accel": accel, "accel_reason": accel_why,
            "qemu": qemu.qemu_version(),
            "kernels": {t.kernel.variant: t.kernel.release for t in targets},
            "host_cpu": host_cpu(), "host_kernel": os.uname().release,
            "host_cpus": os.cpu_count(), "project_rev": git_rev()}
