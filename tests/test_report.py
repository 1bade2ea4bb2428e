"""Results are written before the plot, and a plot failure costs nothing
but the plot."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from zdinit.families import rebind
from zdinit.families import summary
from zdinit.results import report

RESULTS = {
    "command": "python3 -m zdinit bench",
    "env": {"accel": "tcg", "accel_reason": "test", "kernels": {},
            "host_cpu": "cpu", "host_cpus": 2, "host_kernel": "6.1",
            "qemu": "QEMU", "project_rev": "abc"},
    "runs": [{"scenario": "fsdax-dev", "kernel": "base",
              "strategy": "default", "pages": 1, "first_bind_ms": 1.0,
              "median_ms": 1.0, "p10_ms": 1.0, "p90_ms": 1.0,
              "min_ms": 1.0, "max_ms": 1.0, "n": 1, "samples_ms": [1.0]}],
}


def no_matplotlib(runs, path):
    path.write_bytes(b"half a png")
    raise ModuleNotFoundError("No module named 'matplotlib'")


def test_missing_matplotlib_costs_only_the_plot(tmp_path, monkeypatch,
                                                capsys):
    monkeypatch.setattr(rebind, "plot", no_matplotlib)
    summary.write(RESULTS, tmp_path)
    assert json.loads((tmp_path / "results.json").read_text()) == RESULTS
    assert "fsdax-dev" in (tmp_path / "summary.md").read_text()
    assert not (tmp_path / "bench.png").exists()
    warning = capsys.readouterr().err.strip().splitlines()
    assert len(warning) == 1
    assert "warning: bench.png not drawn: ModuleNotFoundError: No module " \
        "named 'matplotlib' (install python3-matplotlib" in warning[0]


def test_save_plot_reports_success(tmp_path):
    def draw(data, path):
        path.write_text(data)
    assert report.save_plot(draw, "png", tmp_path / "x.png")
    assert (tmp_path / "x.png").read_text() == "png"


def test_results_dirs_started_in_the_same_second_differ(tmp_path,
                                                        monkeypatch):
    moment = report.datetime.datetime(2026, 1, 2, 3, 4, 5)

    class Frozen:
        @staticmethod
        def now():
            return moment

    monkeypatch.setattr(report.datetime, "datetime", Frozen)
    first, first_final = report.new_results_dir(tmp_path)
    second, second_final = report.new_results_dir(tmp_path)
    report.publish(first, first_final)
    third, third_final = report.new_results_dir(tmp_path)
    assert len({first_final, second_final, third_final}) == 3
    assert first_final.name == "20260102-030405"
    assert (second / "logs").is_dir() and (third / "logs").is_dir()


def test_strategy_label_names_what_the_kernel_used():
    base = {"scenario": "fsdax-dev", "align": None, "kernel": "patched",
            "pages": 1, "first_bind_ms": None, "median_ms": 1.0,
            "p10_ms": 1.0, "p90_ms": 1.0, "min_ms": 1.0, "max_ms": 1.0,
            "n": 1}
    cases = [("auto", ["stream"], [2], "auto->stream x2"),
             ("auto@1", ["stream"], [1], "auto@1->stream"),
             ("stream@1", ["stream"], [1], "stream@1"),
             ("template", ["template"], None, "template")]
    for strategy, resolved, threads, label in cases:
        row = rebind.rows([dict(base, strategy=strategy, resolved=resolved,
                                threads=threads)])[0]
        assert row[2] == label, (strategy, row[2])


TABLE_SCRIPTS = sorted((ROOT / "docs" / "results").glob("*/table.py"))


@pytest.mark.parametrize("script", TABLE_SCRIPTS, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("args,message", [
    ([], "no results.json given (usage: "),
    (["/nonexistent.json"], "cannot read /nonexistent.json: No such file"),
    (["README.md"], "README.md is not JSON"),
    (["tests/data/not-results.json"], "has no list of runs"),
])
def test_table_scripts_refuse_bad_input_in_one_line(script, args, message):
    proc = subprocess.run([sys.executable, str(script), *args], cwd=ROOT,
                          capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("table.py: error: ") \
        and message in lines[0], proc.stderr


@pytest.mark.parametrize("script", TABLE_SCRIPTS, ids=lambda p: p.parent.name)
def test_table_scripts_render_their_committed_runs(script):
    runs = sorted(script.parent.glob("*.json"))
    proc = subprocess.run([sys.executable, str(script),
                           *map(str, runs)], cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n| ") >= 6


def rebind_entry(samples_ms):
    """One kernel and strategy's samples as rebind.collect_memmap()
    gathers them, 8 struct pages written."""
    return {"first_bind_ms": None, "samples_ms": samples_ms, "pages": 8,
            "written": 8, "resolved": set(), "threads": set()}


def test_rows_are_compared_with_upstream_7_4s_method_on_their_own_kernel():
    """auto is set against stream@1 of the same kernel and scenario, and
    against stock; upstream 7.4's method itself and stock get no ratio
    against it."""
    from zdinit.families import rebind, scenarios

    samples = {
        ("fsdax-dev", "", "", "base", "default"): rebind_entry([40.0] * 5),
        ("fsdax-dev", "", "", "patched", "stream@1"): rebind_entry([20.0] * 5),
        ("fsdax-dev", "", "", "patched", "auto"): rebind_entry([10.0] * 5),
        ("fsdax-dev", "", "", "patched-memcpy", "auto"): rebind_entry([8.0] * 5),
    }
    specs = scenarios.plan(["fsdax-dev"], "4G", 5)
    runs = {(r["kernel"], r["strategy"]): r
            for r in rebind.runs_table(samples, specs)}
    assert runs[("patched", "auto")]["vs_seed"]["speedup"] == 2.0
    assert runs[("patched", "auto")]["vs_base"]["speedup"] == 4.0
    assert "vs_seed" not in runs[("patched", "stream@1")]
    assert "vs_seed" not in runs[("base", "default")]
    # No seed row on that kernel: nothing to compare with.
    assert "vs_seed" not in runs[("patched-memcpy", "auto")]
    row = rebind.rows([runs[("patched", "auto")]])[0]
    assert row[-1].startswith("2.00x [2.00-2.00]")


def test_resummarize_puts_back_what_the_samples_give():
    """Stored rebind records with a stale median, vs_base and vs_seed get
    their samples' numbers back, each field in its place."""
    from zdinit.families import rebind, scenarios

    samples = {
        ("fsdax-dev", "", "", "base", "default"): rebind_entry([40.0, 41.0, 39.0]),
        ("fsdax-dev", "", "", "patched", "stream@1"): rebind_entry([20.0, 22.0, 21.0]),
        ("fsdax-dev", "", "", "patched", "auto"): rebind_entry([10.0, 11.0, 9.0]),
    }
    fresh = rebind.runs_table(samples, scenarios.plan(["fsdax-dev"], "4G", 3))
    stale = [dict(r) for r in fresh]
    stale[0].update(median_ms=1.0, vs_base={"speedup": 9.0, "ci95": [1, 2]})
    stale[1].update(vs_seed={"speedup": 9.0, "ci95": [1, 2]}, stdev_ms=0.0)
    again = rebind.resummarize(stale)
    assert again == fresh
    assert [list(r) for r in again] == [list(r) for r in fresh]


def test_rows_are_compared_with_the_upstream_kernel():
    """Every kernel's row is set against the kernel upstream (7.3 with
    the series upstream queued for 7.4) in the same scenario; upstream's
    own row, and a run without it, get no such ratio."""
    from zdinit.families import rebind, scenarios

    samples = {
        ("fsdax-dev", "", "", "stock", "default"): rebind_entry([40.0] * 5),
        ("fsdax-dev", "", "", "upstream", "default"): rebind_entry([30.0] * 5),
        ("fsdax-dev", "", "", "patched", "stream@1"): rebind_entry([20.0] * 5),
        ("fsdax-dev", "", "", "patched", "auto"): rebind_entry([10.0] * 5),
    }
    specs = scenarios.plan(["fsdax-dev"], "4G", 5)
    runs = {(r["kernel"], r["strategy"]): r
            for r in rebind.runs_table(samples, specs)}
    assert runs[("patched", "auto")]["vs_upstream"]["speedup"] == 3.0
    assert runs[("patched", "stream@1")]["vs_upstream"]["speedup"] == 1.5
    assert runs[("stock", "default")]["vs_upstream"]["speedup"] == 0.75
    assert "vs_upstream" not in runs[("upstream", "default")]
    header = rebind.HEADER
    row = dict(zip(header, rebind.rows([runs[("patched", "auto")]])[0]))
    assert row["speedup vs upstream [95% CI]"].startswith("3.00x")
    assert row["vs stream@1 in-kernel [95% CI]"].startswith("2.00x")
    del samples[("fsdax-dev", "", "", "upstream", "default")]
    assert not any("vs_upstream" in r
                   for r in rebind.runs_table(samples, specs))
