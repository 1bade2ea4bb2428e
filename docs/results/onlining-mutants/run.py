"""What sees a broken onlining template path: the kernel's own onlining
selftests (the safety job, compared with stock's outcome) or the
onlined-memory check (memmap equality with the slow path).

Run from the repository root:  python3 docs/results/onlining-mutants/run.py
It boots stock once and each kernel of build.ONLINING_MUTANTS twice, and
writes mutants.json beside itself.
"""
import json
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from zdinit import cache, cli  # noqa: E402
from zdinit.checks import memmap_equality, safety  # noqa: E402
from zdinit.kernel import bases, build, under_test  # noqa: E402
from zdinit.errors import ZdinitError  # noqa: E402

BASE = bases.get("7.3")
JOB, = [j for j in safety.REDUCED if j.scenario == "onlining-selftests"]


def selftests_row(stock_rows, target, accel, logs):
    """The safety job's rows on target against stock's, or the error."""
    rows = [dict(r) for r in stock_rows]
    try:
        rows += safety.run_job(JOB, target, accel, logs)
    except ZdinitError as err:
        return f"error: {err}"
    safety.compare_with_stock(rows)
    return [(r["check"], r["passed"], r["detail"]) for r in rows
            if r["kernel"] == target.kernel.variant]


def equality_row(target, accel, logs):
    try:
        return ("MISSED", memmap_equality.run_hotplug_verify(target, accel, logs))
    except ZdinitError as err:
        return ("caught", str(err)[:400])


def main():
    out = {}
    with cache.lock("docs/results/onlining-mutants/run.py"), \
            tempfile.TemporaryDirectory(prefix="zdinit-mutants-") as tmp:
        logs = pathlib.Path(tmp)
        (stock,), accel, _ = under_test.prepare(
            [cli.wanted("base", BASE, ("auto",))])
        stock_rows = safety.run_job(JOB, stock, accel, logs)
        for name in build.ONLINING_MUTANTS:
            target = under_test.build(**cli.wanted(
                f"onlining-{name}", BASE, memmap_equality.HOTPLUG_STRATEGIES))
            out[name] = {
                "selftests": selftests_row(stock_rows, target, accel, logs),
                "equality": equality_row(target, accel, logs)}
            print(json.dumps({name: out[name]}, indent=1), flush=True)
    (pathlib.Path(__file__).parent / "mutants.json").write_text(
        json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
