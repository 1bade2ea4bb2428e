"""Run scenarios on several kernels, interleaved, and collect samples."""
import contextlib
import dataclasses
import os
import pathlib
import subprocess

from zdinit import (build, hotplug, initramfs, parse, placement, progress,
                    qemu, scenarios, stats)
from zdinit.errors import ZdinitError

MiB = 1 << 20


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


def check_resources(specs):
    for spec in specs:
        qemu.require_host_memory(
            spec.guest_ram_mb() * MiB + spec.image_touched_bytes(),
            f"{spec.scenario.name} at {scenarios.size_text(spec.size)}")


def split_rounds(n, rounds):
    """n rebinds over boots: [n // rounds + 1 for the remainder, ...]."""
    rounds = max(1, min(rounds, n))
    return [n // rounds + (1 if i < n % rounds else 0) for i in range(rounds)]


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
        params["timing"] = int(hotplug.times_onlining(target.kernel.variant))
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


def run_bench(targets, specs, rounds, accel, logs_dir, verify=False,
              timeout_s=1800):
    """Boot every target for every scenario, round after round.

    Returns raw samples keyed by (scenario, align, kernel, strategy):
    {"first_bind_ms", "samples_ms", "pages", "written", "resolved",
    "threads"}: the strategies and thread counts the kernel reported.
    """
    samples = {}
    for spec in specs:
        shares = split_rounds(spec.n, rounds)
        boots = spec.scenario.boots
        for r, share in enumerate(shares, 1):
            for target in targets:
                for b, cmdline in enumerate(boots):
                    tag = f"-b{b}" if len(boots) > 1 else ""
                    run = boot_once(spec, target, r, len(shares), share,
                                    cmdline, tag, accel, logs_dir, verify,
                                    timeout_s)
                    if spec.scenario.hotplug:
                        collect = hotplug.collect
                    else:
                        collect = collect_memmap
                    collect(samples, spec, run, target.kernel.variant,
                            first_round=(r == 1))
    return samples


def boot_once(spec, target, r, rounds, share, cmdline, tag, accel, logs_dir,
              verify, timeout_s):
    """One boot of target for spec's round r; its checked GuestRun."""
    name = target.kernel.variant
    label = f"{spec.scenario.name} {name}{tag} round {r}/{rounds}"
    family = spec.scenario.hotplug
    progress.say(f"{label}: booting ({share} "
                 + ("offline/online cycles per zone)" if family else
                    f"rebinds per strategy, {len(target.strategies)} "
                    "strategies)"))
    params = boot_params(spec, target, share, verify, spec.aligns)
    with contextlib.ExitStack() as stack:
        nvdimms = []
        if spec.scenario.nvdimm:
            image = stack.enter_context(qemu.SparseImage(
                spec.size, spec.image_touched_bytes(), f"{name}{tag}-r{r}"))
            nvdimms = [(image.path, image.size)]
        boot = qemu.boot(
            target.kernel, target.initrd, params, accel,
            ram_mb=spec.guest_ram_mb(), nvdimms=nvdimms, timeout_s=timeout_s,
            log_path=logs_dir / f"{spec.scenario.name}-{name}{tag}-r{r}.log",
            label=label,
            cmdline=(HOTPLUG_CMDLINE if family else ()) + tuple(cmdline),
            virtio_mem=spec.size if spec.scenario.virtio_mem else 0)
    run = parse.parse(boot.log)
    if family:
        hotplug.check_run(dataclasses.replace(spec, n=share), run, label,
                          hotplug.times_onlining(name),
                          strategies=len(target.hotplug_strategies),
                          verify=verify,
                          contiguity=(hotplug.keeps_contiguity_exact(name)
                                      if target.contiguity else None))
    else:
        check_run(spec, run, label, verify)
    return run


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
    and, on the same kernel, against the seeds' method."""
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
                  "first_bind_ms": e["first_bind_ms"],
                  "samples_ms": e["samples_ms"]}
        record.update(stats.summarize(e["samples_ms"]))
        base = samples.get((scenario, align, "base", "default"))
        if base and kernel != "base" and base["samples_ms"]:
            record["vs_base"] = stats.speedup(base["samples_ms"],
                                              e["samples_ms"])
            if record["vs_base"] is None:
                record["vs_base_note"] = "base below its 1 ms resolution"
        seed = samples.get((scenario, align, kernel, scenarios.SEED_METHOD))
        if seed and strategy != scenarios.SEED_METHOD and seed["samples_ms"]:
            record["vs_seed"] = stats.speedup(seed["samples_ms"],
                                              e["samples_ms"])
        runs.append(hotplug.split_record(record) if scenario in family
                    else record)
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


def environment(accel, accel_why, targets, name=lambda k: k.variant):
    """name: what a kernel is called in the record (a run of kernels of
    several bases names the base too)."""
    return {"accel": accel, "accel_reason": accel_why,
            "qemu": qemu.qemu_version(),
            "kernels": {name(t.kernel): t.kernel.release for t in targets},
            "host_cpu": host_cpu(), "host_kernel": os.uname().release,
            "host_cpus": os.cpu_count(), "project_rev": git_rev(),
            "placement": {name(t.kernel): placement.kernel_placement(
                t.kernel.out / "System.map") for t in targets}}
