"""The one run loop of every measured family (protocol.py): the host check
before anything heavy, the boots interleaved round by round, and the
results directory that is published whole or marked failed."""
import os
import subprocess
import time

from zdinit import paths, progress
from zdinit.families import summary
from zdinit.kernel import tracing
from zdinit.results import report
from zdinit.vm import guest as vm_guest, placement, qemu, trace



def check_resources(plan, variants):
    """Refuse, before the lock and before apt, a guest the host cannot
    back.  plan: (family, spec) pairs; variants: the kernels' names."""
    for family, spec in plan:
        needs = {v: family.host_bytes(spec, v) for v in variants}
        largest = max(needs, key=needs.__getitem__)
        what = family.describe(spec)
        if len(set(needs.values())) > 1:
            what += f" for kernel '{largest}'"
        qemu.require_host_memory(needs[largest], what)


def check_tracing(plan, targets):
    """Before any boot: every kernel that a family boots to time it by
    kprobe events can be (kernel/tracing.py), or one line naming it."""
    for target in targets:
        for family, spec in plan:
            if family.name in trace.PROBES and spec.timing != "log":
                tracing.require(target.kernel, family.name)


def split_rounds(n, rounds):
    """n samples over boots: [n // rounds + 1 for the remainder, ...]."""
    rounds = max(1, min(rounds, n))
    return [n // rounds + (1 if i < n % rounds else 0) for i in range(rounds)]


def run(plan, targets, rounds, accel, logs_dir, verify=False):
    """Boot every target for every (family, spec) of plan, round after
    round; inside a round, each variation of the spec (an extra command
    line, a preemption model) boots every kernel that has it in turn.

    Returns {family name: samples}, in that family's collect() format."""
    samples: dict = {}
    for family, spec in plan:
        mine = samples.setdefault(family.name, {})
        shares = split_rounds(spec.n, rounds)
        variations = dict.fromkeys(v for t in targets
                                   for v in family.variations(spec, t))
        for r, share in enumerate(shares, 1):
            for variation in variations:
                for target in targets:
                    if variation not in family.variations(spec, target):
                        continue
                    result = boot_once(family, spec, target, variation,
                                       (r, len(shares), share), accel,
                                       logs_dir, verify)
                    family.collect(mine, spec, result, target, share,
                                   first_round=(r == 1))
    return samples


def boot_once(family, spec, target, variation, round_share, accel, logs_dir,
              verify):
    """One boot: round_share is (round, rounds, samples in this boot).
    Returns the checked run, as the family's parser reads it."""
    r, rounds, share = round_share
    plan = family.boot(spec, target, variation, share, verify)
    label = f"{plan.label} round {r}/{rounds}"
    progress.say(f"{label}: booting ({plan.what})")
    result = vm_guest.boot(target, vm_guest.Guest(
        label, plan.params, ram_mb=plan.ram_mb,
        images=(((plan.nvdimm_bytes, plan.touched_bytes),)
                if plan.nvdimm_bytes else ()),
        virtio_mem=plan.virtio_mem, cmdline=plan.cmdline,
        timeout_s=plan.timeout_s,
        log_path=logs_dir / f"{plan.log_name}-r{r}.log"), accel, family.parse)
    family.check(spec, result, label, target, variation, share, verify)
    return result


def measure(plan, targets, rounds, accel, accel_why, command_line, *,
            started, verify=False, name=lambda k: k.variant):
    """The measured run: results/<stamp>/ with results.json, summary.md
    and the plots, published whole; on any failure or interruption the
    directory is renamed -FAILED with the logs kept.  started: the
    command's time.monotonic() at its start, for the run's wall time
    (builds included); name: what a kernel is called in the record.
    Returns (directory, results)."""
    check_tracing(plan, targets)
    # Before the boots: the revision is the one that ran, whatever is
    # committed while it runs.
    env = environment(accel, accel_why, targets, name)
    partial, final = report.new_results_dir()
    try:
        samples = run(plan, targets, rounds, accel, partial / "logs", verify)
        runs = []
        for family in dict.fromkeys(f for f, _ in plan):
            runs += family.records(samples[family.name],
                                   [s for f, s in plan if f is family])
        if accel == qemu.ICOUNT:
            # Its times are instruction counts: each record says so.
            runs = [dict(r, icount=True) for r in runs]
        results = {"command": command_line,
                   "wall_s": round(time.monotonic() - started, 1),
                   "env": env, "runs": runs}
        summary.write(results, partial)
    except BaseException:
        failed = report.mark_failed(partial)
        progress.say(f"incomplete run; logs kept in {failed}")
        raise
    return report.publish(partial, final), results


def git_rev():
    proc = subprocess.run(["git", "-C", str(paths.ROOT), "describe", "--always",
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
            **({"icount": qemu.ICOUNT_OPTIONS} if accel == qemu.ICOUNT
               else {}),
            "qemu": qemu.qemu_version(),
            "kernels": {name(t.kernel): t.kernel.release for t in targets},
            "host_cpu": host_cpu(), "host_kernel": os.uname().release,
            "host_cpus": os.cpu_count(), "project_rev": git_rev(),
            "placement": {name(t.kernel): placement.kernel_placement(
                t.kernel.out / "System.map") for t in targets}}
