"""Results are written before the plot, and a plot failure costs nothing
but the plot."""
import json

from zdinit import report

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
    monkeypatch.setattr(report, "plot", no_matplotlib)
    report.write(RESULTS, tmp_path)
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
        row = report.rows([dict(base, strategy=strategy, resolved=resolved,
                                threads=threads)])[0]
        assert row[2] == label, (strategy, row[2])
