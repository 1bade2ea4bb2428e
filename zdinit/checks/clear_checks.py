"""The clear series' checks: cleared pages read back zero under every
preemption model and method, and the kernel's hugetlb and THP selftests
pass and fail as on stock; each guest booted by boot.boot_check()."""
import pathlib

from zdinit.checks import boot, records
from zdinit.families import clearing, scenarios
from zdinit.kernel import initramfs, source
from zdinit.units import MiB
from zdinit.vm import qemu
from zdinit.errors import ZdinitError

# Kernels the zero read-back runs on: the series, the series under the
# sanitizers, and a deliberately broken clear the check must catch.
CHECK_KERNELS = ("clear", "clear-debug", "clear-broken", "clear-kmsan")
# Guest memory beyond the overhead for the selftests' hugetlb pool and THPs.
SELFTEST_GUEST_SIZE = "1G"
# Stock's selftest outcomes (clear-stock) per base and preemption model, written
# by 'clear-check --selftests --record-stock': make test-full compares the
# series with this record instead of building and booting stock as well.
STOCK_SELFTESTS = pathlib.Path(__file__).resolve().parent / "stock-selftests.json"
# The page allocator zeroes on allocation and on free: the huge-page
# clear must still leave every byte zero, whichever of them runs.
INIT_ON_ALLOC_FREE = ("init_on_alloc=1", "init_on_free=1")


def check_zero(spec, zero_rounds, kernel, base):
    """Every method on every preemption model, and once more on the first
    model with init_on_alloc/init_on_free: cleared pages read back 0."""
    targets, accel, _ = clearing.prepare(spec, [(base, kernel)])
    models: list[tuple[str, tuple[str, ...]]] = [
        (preempt, ()) for preempt in spec.models(base)]
    models.append((spec.models(base)[0], INIT_ON_ALLOC_FREE))

    def zero_boot(item):
        (preempt, cmdline), target = item
        label = " ".join((f"clear-zero {target.kernel.variant} "
                          f"preempt={preempt}",) + cmdline)
        run = boot_clear(target, spec, "clear-zero", preempt, accel, label,
                         extra={"zero_rounds": zero_rounds}, cmdline=cmdline)
        want = len(spec.pages) * len(target.strategies)
        if len(run.zero) != want:
            raise ZdinitError(f"{label}: {len(run.zero)} zero checks, "
                              f"expected {want}")
        lines = []
        for z in run.zero:
            if z["bad"] != "0":
                raise ZdinitError(f"{label}: {z['bad']} non-zero words "
                                  f"in {z['page']} pages ({z['method']})")
            lines.append(f"{label} {z['page']} {z['method']}: "
                         f"{z['rounds']} rounds of {z['bytes']} bytes "
                         f"read back zero")
        return lines

    boots = [(model, target) for model in models for target in targets]
    guest = max(clearing.guest_ram_mb(spec, target.kernel.variant)
                for target in targets) * MiB
    return [line for lines in qemu.map_checks(zero_boot, boots, guest)
            for line in lines]


def selftest_outcomes(preempt, kernels, base):
    """The kernel's hugetlb and THP selftests, one boot per kernel and
    model, on 2M hugetlb pages reserved in the guest (300 by default).
    Returns {model: {kernel: {test: [exit, totals, failed]}}}."""
    spec = scenarios.plan_clear(["2M"], SELFTEST_GUEST_SIZE, preempt=preempt,
                                on_bases=[base])
    targets, accel, _ = clearing.prepare(spec, [(base, k) for k in kernels])
    outcomes: dict = {}
    for preempt in spec.models(base):
        for target in targets:
            variant = target.kernel.variant
            names = initramfs.huge_selftests(target.kernel.tree)
            label = f"clear-selftests {variant} preempt={preempt}"
            run = boot_clear(target, spec, "clear-selftests", preempt,
                             accel, label,
                             extra={"selftests": ",".join(names)})
            outcome = {t["name"]: [t["rc"], t["totals"], t["failed"]]
                       for t in run.selftests}
            if sorted(outcome) != sorted(names):
                raise ZdinitError(f"{label}: ran {sorted(outcome)}")
            outcomes.setdefault(preempt, {})[variant] = outcome
    return outcomes


def check_selftests(preempt, base, kernels=("clear-stock", "clear"),
                    record=None):
    """The clear kernel must pass and fail exactly the selftests stock
    passes and fails.  record: a path where stock's outcomes on base
    replace those of the models run, the other models and bases kept."""
    outcomes = selftest_outcomes(preempt, kernels, base)
    lines = [line for model, outcome in outcomes.items()
             for line in same_selftest_outcomes(outcome, model)]
    if record:
        records.write(record, base, {model: outcome[kernels[0]]
                                     for model, outcome in outcomes.items()},
                      merge=True)
        lines.append(f"stock outcomes recorded in {record}")
    return lines


def check_selftests_against_record(preempt, base, kernel="clear"):
    """Like check_selftests(), with stock's outcomes on base from
    STOCK_SELFTESTS."""
    stock = records.of_base(STOCK_SELFTESTS, base)
    names = base_selftests(base)
    for model in preempt:
        if sorted(stock.get(model, {})) != sorted(names):
            raise ZdinitError(
                f"{STOCK_SELFTESTS.name} does not record every selftest for "
                f"base {base.name} preempt={model}; record them with "
                f"'python3 -m zdinit clear-check --base {base.name} "
                "--selftests --record-stock'")
    outcomes = selftest_outcomes(preempt, [kernel], base)
    return [line for model, outcome in outcomes.items()
            for line in same_selftest_outcomes(
                {"stock (recorded)": stock[model], kernel: outcome[kernel]},
                model)]


def base_selftests(base):
    """The hugetlb and THP selftests base's tree has."""
    return initramfs.huge_selftests(source.pristine_tree(base))


def same_selftest_outcomes(outcome, preempt):
    """outcome: {kernel: {test: [exit, totals, failed]}}, stock first.
    Every kernel must match the first; one line per test when they do."""
    (stock, stock_outcome), *others = outcome.items()
    for kernel, other in others:
        for name in sorted(set(stock_outcome) | set(other)):
            if other.get(name) != stock_outcome.get(name):
                raise ZdinitError(
                    f"selftest {name} preempt={preempt}: {kernel} "
                    f"{other.get(name)} differs from {stock} "
                    f"{stock_outcome.get(name)}")
    lines = []
    for name in stock_outcome:
        rc, totals, failed = stock_outcome[name]
        lines.append(f"selftest {name} preempt={preempt}: exit {rc}, "
                     f"{totals}{', failed ' + failed if failed else ''}"
                     f" on every kernel")
    return lines


def boot_clear(target, spec, scenario, preempt, accel, label, extra=None,
               cmdline=()):
    """One boot of a check (zero read-back, selftests); its checked run."""
    args = clearing.boot_args(spec, target, scenario, preempt, 1, extra,
                              cmdline)
    run = boot.boot_check(target, boot.Guest(
        label, args["params"], ram_mb=args["ram_mb"],
        cmdline=args["cmdline"], timeout_s=args["timeout_s"]), accel,
        read=clearing.parse_run)
    clearing.check_preempt(run, preempt, label)
    return run
