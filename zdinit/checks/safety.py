"""Safety checks in the guest: data integrity, guards, churn, debug kernels.

Every check runs on the stock kernel too where it can, so a difference
between stock and patched stands out in the table.
"""
import dataclasses
import json
import pathlib
from typing import Callable

from zdinit import progress
from zdinit.checks import boot, records
from zdinit.families import onlining, scenarios
from zdinit.kernel import build
from zdinit.results import report
from zdinit.vm import guest as vm_guest, qemu
from zdinit.units import GiB, MiB
from zdinit.errors import UsageError, ZdinitError

# Churn reads MemFree after every cycle.  Single readings swing by about
# one memmap of the 2 GiB namespace (32 MiB, freed late through per-CPU
# lists and RCU on stock and series alike), so the check compares the
# highest reading of the last CHURN_WINDOW cycles with the highest of the
# first: that may drop by CHURN_TOLERANCE_KB (slab and page-table
# growth), while a memmap lost every cycle would take 32 MiB a cycle off
# it, over a gigabyte across 50 cycles.
CHURN_WINDOW = 10
CHURN_TOLERANCE_KB = 24 * 1024


@dataclasses.dataclass(frozen=True)
class Job:
    scenario: str
    kernels: tuple
    params: dict
    nvdimms: int = 1
    labels: bool = False
    verify: bool = False       # compare memmaps with the slow path (not base)
    virtio_mem: int = 0        # bytes of virtio-mem for the hotplug jobs
    ram_mb: int = qemu.CHECK_GUEST_RAM_MB
    cmdline: tuple = ()        # more kernel parameters
    # A check of the whole console, (run, kernel variant) -> its row, for
    # a job whose guest reports facts rather than check lines.
    judge_run: Callable | None = None
    # The part of the zone-device series the job needs (bases.Part), where
    # some base's series lacks it; None: every base's series.
    part: str | None = None


# The boot-time bind: a legacy pmem range that the pmem driver binds
# during boot (guest/store-rule.sh), its memmap in RAM.  1.5 GiB writes
# 24 MiB of struct pages: more than the 16 MiB L3 of QEMU's TCG CPU, less
# than the 32 MiB the rule streams from while cacheinfo knows no cache,
# so the strategy also tells whether the kernel saw the guest's cache.  It
# is carved out of guest RAM above 4 GiB, where QEMU's pc machine puts
# what exceeds its RAM below (scenarios.HOTPLUG_LOW_RAM_MB), so that it
# lies on memory QEMU backs and on nothing firmware or the loader placed.
BOOT_PMEM_BYTES = 1536 * MiB
BOOT_PMEM_AT = 4 * GiB
BOOT_BIND_CMDLINE = (
    f"memmap={BOOT_PMEM_BYTES // MiB}M!{BOOT_PMEM_AT // GiB}G",
    # The timing line is a pr_debug(): on before the drivers bind.
    'dyndbg="func memmap_init_zone_device +p"')


def judge_boot_bind(run, kernel):
    """(passed, strategy used or '-', why) for the boot-time bind: one
    memmap_init_zone_device() line before userspace, for the whole legacy
    pmem range; on the series, with the strategy the store rule gives for
    the struct pages it wrote and the LLC the guest lists.  Stock names
    no strategy."""
    boot = [init for step in run.steps if step.labels.get("phase") == "boot"
            for init in step.memmap]
    if len(boot) != 1:
        return False, "-", (
            f"{len(boot)} memmap_init_zone_device lines in the kernel log "
            f"before userspace, not 1: did the legacy pmem range "
            f"({BOOT_BIND_CMDLINE[0]}) bind during boot?")
    init, want_pages = boot[0], BOOT_PMEM_BYTES // scenarios.PAGE
    if init.pages != want_pages:
        return False, init.strategy or "-", (
            f"{init.pages} pages bound during boot, the legacy pmem range "
            f"has {want_pages}")
    if build.is_stock(kernel):
        return True, "-", (f"{init.pages} pages bound during boot in "
                           f"{init.ms:g} ms; stock names no strategy")
    if init.strategy is None:
        return False, "-", "the boot-time line names no strategy"
    llc = run.llc_bytes()
    if llc is None:
        return False, init.strategy, "the guest did not list its caches"
    want = scenarios.auto_strategy(init.written, llc, pages=init.pages)
    cache = (f"LLC {llc / MiB:g} MiB" if llc
             else "no LLC in sysfs (the rule's default)")
    mib = init.written * scenarios.STRUCT_PAGE / MiB
    return init.strategy == want, init.strategy, (
        f"{init.written} struct pages ({mib:g} MiB) written during boot, "
        f"{cache}: the rule says {want}, the kernel took {init.strategy}")


def boot_bind_row(run, kernel):
    passed, used, why = judge_boot_bind(run, kernel)
    return {"check": "boot-time bind", "kernel": kernel,
            "strategy": "-" if build.is_stock(kernel) else "auto", "used": used,
            "passed": passed, "detail": why,
            "raw": {"guest_llc_bytes": run.llc_bytes()}}


# The held on-demand build's range: legacy pmem with guest RAM above it,
# so that the pfn walkers that stop at max_pfn (/proc/kpageflags,
# page_owner) cross its pending struct pages; an NVDIMM lies above all
# RAM, out of their reach.
HELD_PMEM_BYTES = 2 * GiB
HELD_RAM_ABOVE_BYTES = 512 * MiB
HELD_RAM_MB = scenarios.HOTPLUG_LOW_RAM_MB + \
    (HELD_PMEM_BYTES + HELD_RAM_ABOVE_BYTES) // MiB
HELD_CMDLINE = (f"memmap={HELD_PMEM_BYTES // MiB}M!{BOOT_PMEM_AT // GiB}G",)

REDUCED = (
    Job("hmm", ("stock", "patched"), {}),
    Job("gup", ("stock", "patched"), {}),
    Job("integrity-devdax", ("stock", "patched"), {"n": 2}),
    Job("integrity-fsdax", ("stock", "patched"), {"n": 1}),
    Job("churn", ("stock", "patched"), {"cycles": 50}),
    Job("odd-geometry", ("stock", "patched"), {}, nvdimms=2, labels=True,
        verify=True),
    # What an operator does with ndctl and the kmem driver
    # (guest/ndctl.sh); the series must give each workflow the outcome
    # stock gives.
    Job("ndctl-workflows", ("stock", "patched"), {}, nvdimms=2, labels=True,
        verify=True),
    Job("devprivate-too-large", ("stock", "patched"), {}),
    # The kernel's own onlining selftests (guest/onlining-selftests.sh)
    # on a kmem-bound namespace: the series must give stock's outcomes.
    Job("onlining-selftests", ("stock", "patched"), {}),
    # Every page of it must migrate when its blocks go offline, which under
    # TCG is most of the boot: 64 MiB keeps make test's two boots short,
    # --full migrates four times as much.
    Job("hotplug-use", ("stock", "patched"), {"check_bytes": 64 * MiB}),
    # The memmap built on demand with the background build held back
    # (guest/safety.sh's on_demand_held): every path builds what it
    # reaches; --full does it again on the held kernel, where DEBUG_VM
    # turns a read of a struct page not yet built into a BUG.
    Job("on-demand-held", ("patched",), {}, part="demand", nvdimms=0,
        ram_mb=HELD_RAM_MB, cmdline=HELD_CMDLINE),
    # The range is guest RAM that is never written: the host backs the
    # pages the kernel touches, as for any other check's guest.
    Job("boot-bind", ("stock", "patched"), {}, nvdimms=0,
        ram_mb=scenarios.HOTPLUG_LOW_RAM_MB + BOOT_PMEM_BYTES // MiB,
        cmdline=BOOT_BIND_CMDLINE,
        judge_run=boot_bind_row),
)
FULL = tuple(dataclasses.replace(job, params=dict(job.params,
                                                  check_bytes=256 * MiB))
             if job.scenario == "hotplug-use" else job
             for job in REDUCED) + (
    Job("tracepoint", ("trace",), {}),
    # Onlining: 1 GiB of virtio-mem, one block onlined with the
    # tracepoint on and off (the checks count its struct pages).
    Job("hotplug-tracepoint", ("trace",), {"n": 0}, nvdimms=0, verify=True,
        virtio_mem=GiB),
    Job("debug", ("debug",), {"cycles": 2 * CHURN_WINDOW}, verify=True),
    # A kernel of its own (its DEBUG_VM, page_owner and memory failure
    # are compiled in): one more cold build than make test can afford.
    Job("on-demand-held", ("held",), {}, part="demand", nvdimms=0,
        ram_mb=HELD_RAM_MB, cmdline=HELD_CMDLINE + ("page_owner=on",)),
)


def jobs(base, full=False, stock_record=False):
    """The jobs that run on base: FULL or REDUCED, less those whose part
    base's series does not have; with stock_record, without stock."""
    selected = []
    for job in FULL if full else REDUCED:
        kernels = tuple(k for k in job.kernels
                        if not (stock_record and build.is_stock(k)))
        if kernels and (job.part is None
                        or base.has_part("zone-device", job.part)):
            selected.append(dataclasses.replace(job, kernels=kernels))
    return tuple(selected)


def judge(check):
    """(passed, why) for one guest check line."""
    name = check["name"]
    if check.get("result") != "pass":
        return False, check.get("detail", "guest reported failure")
    if name == "churn":
        free = [int(kb) for kb in check["memfree_kb"].split(",")]
        if len(free) < 2 * CHURN_WINDOW:
            return False, (f"{len(free)} MemFree readings, fewer than the "
                           f"{2 * CHURN_WINDOW} the judgement needs")
        lost = max(free[:CHURN_WINDOW]) - max(free[-CHURN_WINDOW:])
        if lost > CHURN_TOLERANCE_KB:
            return False, (f"the highest MemFree of the last {CHURN_WINDOW} "
                           f"cycles is {lost} kB below that of the first")
        if check.get("kmemleak") not in ("none", "0"):
            return False, f"kmemleak: {check['kmemleak']} objects"
        return True, (f"highest MemFree changed by {-lost:+d} kB over "
                      f"{check['cycles']} cycles")
    if name == "tracepoint-on":
        if check["used"] != "slow" or int(check["events"]) == 0:
            return False, f"used {check['used']} with {check['events']} events"
        return True, f"slow path, {check['events']} page_ref_set events"
    if name in ("tracepoint-off-before", "tracepoint-off-after"):
        return check["used"] != "slow", f"used {check['used']}"
    if name == "hotplug-tracepoint-on":
        return True, (f"onlining: slow path, {check['events']} page_ref_set "
                      f"events for {check['block_pages']} struct pages, "
                      f"none checked as templates")
    if name == "hotplug-tracepoint-off":
        return True, (f"onlining: templates again, {check['checked']} struct "
                      f"pages checked")
    if name == "debug-strategy":
        asked, used = check["strategy"], check["used"]
        return used == asked or (asked == "auto" and used != "none"), \
            f"KASAN build asked for {asked}, used {used}"
    if name == "hmm-selftests":
        return check["error"] == "0", (
            f"{check['pass']} pass, {check['fail']} fail, {check['skip']} skip"
            + ("" if check["flaky"] == "none"
               else f", failed once only: {check['flaky']}"))
    if name == "gup-devdax":
        what = {"-b": "pin_user_pages() basic test",
                "-a": "pin_user_pages_fast() benchmark"}[check["mode"]]
        return True, f"{what}, {check['mb']} MiB of 2M pages"
    if name == "odd-geometry":
        return True, f"{check['ns']} rebound"
    if name == "hotplug-use":
        return True, (f"{int(check['bytes']) >> 20} MiB filled in ZONE_MOVABLE "
                      f"({int(check['used_kb']) >> 10} MiB taken from it), "
                      f"{check['blocks']} blocks offlined under it, pattern intact")
    if name.startswith("kselftest-"):
        return True, (f"exit status {check['rc']}, "
                      + check["outcome"].replace(",", ", ").replace("_", " "))
    if name.startswith("ndctl-"):
        return True, check["outcome"].replace(",", ", ").replace("-", " ")
    if name == "fsdax-integrity":
        return True, f"{check['files']} files, {int(check['bytes']) >> 20} MiB, sha256 verified"
    return True, check.get("detail", "").replace("_", " ")


def run_job(job, kernel_target, accel, logs):
    strategies = kernel_target.strategies
    params = dict(job.params, scenario=job.scenario,
                  size=job.virtio_mem or qemu.CHECK_IMAGE_BYTES,
                  strategies=",".join(strategies))
    label = f"{job.scenario} on {kernel_target.kernel.variant}"
    progress.say(f"safety: {label}")
    verify = job.verify and kernel_target.kernel.variant != "stock"
    if verify:
        params["verify"] = 1
    # The splats are a row of the table, not an error.
    run = boot.boot_check(kernel_target, boot.Guest(
        label, params,
        log_path=logs / f"{job.scenario}-{kernel_target.kernel.variant}.log",
        ram_mb=job.ram_mb,
        images=vm_guest.check_images(
            0 if job.scenario == "devprivate-too-large" else job.nvdimms),
        labels=job.labels, virtio_mem=job.virtio_mem,
        cmdline=job.cmdline + (onlining.HOTPLUG_CMDLINE if job.virtio_mem
                               else ()),
        timeout_s=3600), accel, refuse_splats=False)
    rows = []
    if verify:
        v = run.verify or {}
        problem = run.verify_problem()
        rows.append({"check": f"{job.scenario} memmap = slow path",
                     "kernel": kernel_target.kernel.variant, "strategy": "all",
                     "used": "-", "passed": problem is None,
                     "detail": problem or f"{v['checked']} struct pages "
                     "compared, 0 differ, 0 unchecked", "raw": v})
    for check in run.checks:
        ok, why = judge(check)
        rows.append({"check": check["name"], "job": job.scenario,
                     "kernel": kernel_target.kernel.variant,
                     "strategy": check.get("strategy", "-"),
                     "used": check.get("used", "-"), "passed": ok,
                     "detail": why, "raw": check})
    if job.judge_run:
        rows.append(dict(job.judge_run(run, kernel_target.kernel.variant),
                         job=job.scenario))
    rows.append({"check": "no kernel splats", "kernel": kernel_target.kernel.variant,
                 "strategy": "-", "used": "-", "passed": not run.splats,
                 "detail": run.splats[0] if run.splats else "none in the log",
                 "raw": {"splats": run.splats}})
    if not run.checks and not job.judge_run:
        raise ZdinitError(f"{label}: the guest reported no checks")
    return rows


# Checks whose outcome on the series must be stock's, and the fields of
# their guest line that make up that outcome.  The kernel's own selftests
# need not all pass here (the guest lacks some of what they want), but the
# series must fail exactly what stock fails, with every strategy.
SAME_AS_STOCK = {
    # What failed in both of the guest's runs (see guest/safety.sh).
    "hmm-selftests": ("failed",),
    "ndctl-subsection": ("result", "outcome"),
    "ndctl-align": ("result", "outcome"),
    "ndctl-mode-cycle": ("result", "outcome"),
    "ndctl-reconfigure": ("result", "outcome"),
    "kselftest-dax-kmem": ("rc", "outcome"),
    "kselftest-mem-on-off": ("rc", "outcome"),
}


# Stock's outcomes of the SAME_AS_STOCK checks, per base, as
# 'safety --record-stock' wrote them from a run that booted stock:
# 'safety --stock-record' compares the series with them instead of
# building and booting stock (make test), and every run that boots stock
# checks that stock still gives them (make test-full).
STOCK_RECORD = pathlib.Path(__file__).resolve().parent / "stock-safety.json"


def outcome(row):
    """The outcome of a SAME_AS_STOCK row: the fields that make it up."""
    return tuple(row["raw"][f] for f in SAME_AS_STOCK[row["check"]])


def stock_outcomes(rows):
    """{check: (job, outcome)} of stock's SAME_AS_STOCK rows."""
    return {r["check"]: (r["job"], outcome(r)) for r in rows
            if r["check"] in SAME_AS_STOCK and build.is_stock(r["kernel"])}


def recorded_outcomes(base):
    """{check: (job, outcome)} as STOCK_RECORD has them for base; a
    one-line error where it has none."""
    recorded = records.of_base(STOCK_RECORD, base)
    if not recorded:
        raise UsageError(f"{STOCK_RECORD} records no stock outcomes for "
                         f"base {base.name}; record them with 'python3 -m "
                         f"zdinit safety --base {base.name} --record-stock' "
                         "(boots stock and the series)")
    return {check: (entry["job"], tuple(entry["outcome"]))
            for check, entry in recorded.items()}


def record_stock(rows, base):
    """Write stock's outcomes in rows to STOCK_RECORD for base, whole or
    not at all."""
    stock = stock_outcomes(rows)
    if set(stock) != set(SAME_AS_STOCK):
        raise ZdinitError("stock reported "
                          f"{', '.join(sorted(stock)) or 'none'} of the "
                          f"checks to record ({', '.join(sorted(SAME_AS_STOCK))})")
    records.write(STOCK_RECORD, base,
                  {check: {"job": job, "outcome": list(result)}
                   for check, (job, result) in stock.items()}, merge=False)


def check_record(rows, base):
    """A row saying whether stock, booted in this run, still gives the
    outcomes STOCK_RECORD has for base; none where it has no record."""
    stock = stock_outcomes(rows)
    if not stock or not records.of_base(STOCK_RECORD, base):
        return []
    recorded = recorded_outcomes(base)
    differ = sorted(c for c in set(stock) | set(recorded)
                    if stock.get(c) != recorded.get(c))

    def said(outcomes, check):
        return " ".join(map(str, outcomes[check][1])) \
            if check in outcomes else "nothing"

    return [{"check": "stock record", "kernel": "stock", "strategy": "-",
             "used": "-", "passed": not differ,
             "detail": (f"{len(recorded)} outcomes as recorded in "
                        f"{STOCK_RECORD.name}") if not differ else
             (f"{differ[0]}: stock gave {said(stock, differ[0])}, "
              f"{STOCK_RECORD.name} has {said(recorded, differ[0])}; if "
              "stock's outcome changed on purpose, record it again with "
              "--record-stock"),
             "raw": {}}]


def compare_with_stock(rows, recorded=None):
    """Fail a series row of a SAME_AS_STOCK check whose outcome is not
    stock's, and add a failing row for such a check that stock reported
    and a series kernel, running the same job, did not.  Stock's outcomes
    are its rows', or recorded ({check: (job, outcome)}) where given."""
    stock = recorded if recorded is not None else stock_outcomes(rows)
    where = " (recorded)" if recorded is not None else ""
    for r in rows:
        name = r["check"]
        if name not in stock or build.is_stock(r["kernel"]):
            continue
        same = outcome(r) == stock[name][1]
        r["passed"] = r["passed"] and same
        r["detail"] += f", same as stock{where}" if same else \
            f", stock{where}: {' '.join(map(str, stock[name][1]))}"
    ran = {(r["job"], r["kernel"]) for r in rows
           if r.get("job") and not build.is_stock(r["kernel"])}
    for name, (job, expected) in stock.items():
        for kernel in sorted(k for j, k in ran if j == job):
            if not any(r["check"] == name and r["kernel"] == kernel
                       for r in rows):
                rows.append({"check": name, "job": job, "kernel": kernel,
                             "strategy": "-", "used": "-", "passed": False,
                             "detail": f"not reported; stock{where}: "
                             + " ".join(map(str, expected)), "raw": {}})


def table(rows):
    lines = ["| check | kernel | strategy | used | result | detail |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['check']} | {r['kernel']} | {r['strategy']} | "
                     f"{r['used']} | {'PASS' if r['passed'] else 'FAIL'} | "
                     f"{r['detail']} |")
    return "\n".join(lines)


def run(targets, accel, base, full=False, stock_record=False,
        record=False):
    """targets: variant -> under_test.KernelUnderTest.  stock_record:
    compare the series with STOCK_RECORD and boot no stock kernel;
    record: write stock's outcomes of this run there.  Returns the
    results directory."""
    selected = jobs(base, full, stock_record)
    recorded = recorded_outcomes(base) if stock_record else None
    partial, final = report.new_results_dir()
    rows = []
    try:
        # Each job boots its own guest with its own images and log.
        boots = [(job, variant) for job in selected for variant in job.kernels]
        for job_rows in qemu.map_checks(
                lambda b: run_job(b[0], targets[b[1]], accel, partial / "logs"),
                boots, qemu.CHECK_GUEST_RAM_MB * MiB
                + max(job.nvdimms for job in selected)
                * qemu.CHECK_IMAGE_BYTES):
            rows += job_rows
        compare_with_stock(rows, recorded)
        if record:
            record_stock(rows, base)
        else:
            rows += check_record(rows, base)
        (partial / "safety.json").write_text(json.dumps(rows, indent=1) + "\n")
        (partial / "safety.md").write_text("# zdinit safety checks\n\n"
                                           + table(rows) + "\n")
    except BaseException:
        report.mark_failed(partial)
        raise
    final = report.publish(partial, final)
    failed = [r for r in rows if not r["passed"]]
    print(table(rows))
    for r in failed:
        progress.say(f"FAIL: {r['check']} on {r['kernel']}: {r['detail']}")
    if failed:
        raise ZdinitError(f"{len(failed)} of {len(rows)} safety checks "
                          f"failed; see {final}")
    print(f"\nall {len(rows)} safety checks passed")
    return final
