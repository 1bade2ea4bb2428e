"""A measured run records its own wall time in results.json: seconds from
the command's start, builds included, to writing the results."""
import contextlib
import json
import time
import types

import pytest

from zdinit import cache, cli, deps
from zdinit.families import clearing, loop, rebind
from zdinit.families import summary
from zdinit.results import report
from zdinit.kernel import under_test
from zdinit.vm import qemu
from test_report import RESULTS


def test_results_record_the_wall_time_from_the_commands_start(
        tmp_path, monkeypatch):
    partial, final = tmp_path / ".run.partial", tmp_path / "run"
    (partial / "logs").mkdir(parents=True)
    monkeypatch.setattr(report, "new_results_dir", lambda: (partial, final))
    monkeypatch.setattr(loop, "environment", lambda *a: RESULTS["env"])
    monkeypatch.setattr(loop, "run", lambda *a: {"rebind": {}})
    class NoRecords(rebind.Rebind):
        def records(self, samples, specs):
            return []

    family = NoRecords()
    # A command that started 100 s ago, its builds done since.
    started = time.monotonic() - 100
    directory, results = loop.measure([(family, None)], [], 1, "tcg",
                                        "test", "python3 -m zdinit bench",
                                        started=started)
    written = json.loads((directory / "results.json").read_text())
    assert written == results
    assert 100 <= written["wall_s"] < 100 + 60, written["wall_s"]


@pytest.fixture
def no_work(monkeypatch):
    """Every step of bench and clear before the boots, replaced by a
    note of when it ran; returns that list of (step, time.monotonic())."""
    steps = []
    target = types.SimpleNamespace(kernel=None, initrd=None)

    def note(step, value=None):
        def step_fn(*args, **kwargs):
            steps.append((step, time.monotonic()))
            return value
        return step_fn

    monkeypatch.setattr(loop, "check_resources", note("check"))
    monkeypatch.setattr(cache, "lock", lambda *a: contextlib.nullcontext())
    monkeypatch.setattr(deps, "ensure_packages", note("packages"))
    monkeypatch.setattr(under_test, "build", note("build", target))
    monkeypatch.setattr(clearing, "prepare",
                        note("build", ([target], "tcg", "test")))
    monkeypatch.setattr(qemu, "choose_accel", note("accel", ("tcg", "test")))
    monkeypatch.setattr(summary, "text_report", lambda results: "")

    def measure(*args, started, **kwargs):
        steps.append(("measure started", started))
        return "results/none", {"runs": []}
    monkeypatch.setattr(loop, "measure", measure)
    return steps


@pytest.mark.parametrize("args", [
    ["bench", "--scenarios", "fsdax-dev", "--size", "1G", "--n", "1"],
    ["clear", "--size", "1G", "--pages", "2M"],
])
def test_the_wall_time_starts_with_the_command(no_work, args):
    """bench and clear hand the run the time their command started, so
    the wall time includes the checks and the builds before the boots."""
    before = time.monotonic()
    assert cli.main(args) == 0
    started, = [t for step, t in no_work if step == "measure started"]
    built = [t for step, t in no_work if step == "build"]
    assert built and before <= started <= min(built)
