"""bench --icount: the guests run under TCG counting instructions, its
records say so, and its tables count instructions, never milliseconds."""
import contextlib
import json
import types

import pytest

from zdinit import cache, cli, deps
from zdinit.families import loop, rebind, summary
from zdinit.kernel import under_test
from zdinit.vm import qemu
from test_cli_errors import results_entries, run_zdinit

# One rebind record as rebind.records() makes it: 262144 struct pages in
# 10 guest ms, under icount ten million instructions.
RECORD = {"scenario": "fsdax-dev", "align": None, "kernel": "patched",
          "strategy": "stream@1", "resolved": ["stream"], "threads": [1],
          "size_bytes": 1 << 30, "pages": 262144,
          "struct_pages_written": 262144, "guest_llc_bytes": None,
          "first_bind_ms": 12.0, "samples_ms": [10.0, 10.0, 10.001]}


def test_icount_boots_tcg_counting_one_ns_per_instruction():
    cmd = qemu._base_cmd(qemu.ICOUNT, 1024, [])
    assert cmd[cmd.index("-icount") + 1] == "shift=0,align=off,sleep=off"
    # Multi-threaded TCG cannot count: QEMU refuses it with -icount.
    assert cmd[cmd.index("-accel") + 1] == "tcg,thread=single"
    # Without them the guest stops in its boot-time timer checks.
    assert qemu.guest_cmdline(qemu.ICOUNT) == ("noapictimer",
                                               "no_timer_check")
    assert qemu.guest_cmdline("tcg") == ()
    plain = qemu._base_cmd("tcg", 1024, [])
    assert "-icount" not in plain
    assert plain[plain.index("-accel") + 1] == "tcg"


@pytest.fixture
def bench_without_work(monkeypatch):
    """bench up to the run loop with nothing built or booted; returns
    what loop.measure() was given."""
    given = {}
    target = types.SimpleNamespace(kernel=None, initrd=None)
    monkeypatch.setattr(loop, "check_resources", lambda *a: None)
    monkeypatch.setattr(cache, "lock", lambda *a: contextlib.nullcontext())
    monkeypatch.setattr(deps, "ensure_packages", lambda: None)
    monkeypatch.setattr(under_test, "build", lambda **kw: target)

    def no_probe(*args):
        raise AssertionError("--icount probed for KVM")
    monkeypatch.setattr(qemu, "choose_accel", no_probe)
    monkeypatch.setattr(summary, "text_report", lambda results: "")

    def measure(plan, targets, rounds, accel, why, command_line, **kw):
        given.update(accel=accel, why=why)
        return "results/none", {"runs": []}
    monkeypatch.setattr(loop, "measure", measure)
    return given


def test_bench_icount_runs_its_guests_counting_without_a_probe(
        bench_without_work):
    assert cli.main(["bench", "--icount", "--scenarios", "fsdax-dev",
                     "--size", "1G", "--n", "1"]) == 0
    assert bench_without_work["accel"] == qemu.ICOUNT
    assert "-icount shift=0,align=off,sleep=off" in bench_without_work["why"]


def test_bench_icount_leaves_the_memmap_on_demand_out(bench_without_work,
                                                     monkeypatch):
    """Its background build is timed in jiffies, which under -icount do not
    follow the instructions of vCPUs that run in turn: the default
    strategies drop it, and asking for it is refused."""
    wanted = []
    real = cli.wanted

    def record(*args, **kw):
        wanted.append(args[2])
        return real(*args, **kw)
    monkeypatch.setattr(cli, "wanted", record)
    assert cli.main(["bench", "--icount", "--kernels", "patched",
                     "--scenarios", "fsdax-dev", "--size", "1G",
                     "--n", "1"]) == 0
    assert wanted == [("stream@1", "auto")]
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "--icount", "--kernels", "patched",
                  "--strategies", "auto,demand", "--scenarios", "fsdax-dev",
                  "--size", "1G", "--n", "1"])
    assert exc.value.code == 2


def icount_run(tmp_path, monkeypatch, accel):
    """loop.measure() of one rebind record under accel; its results."""
    partial, final = tmp_path / ".run.partial", tmp_path / "run"
    (partial / "logs").mkdir(parents=True)
    monkeypatch.setattr(loop.report, "new_results_dir",
                        lambda: (partial, final))
    monkeypatch.setattr(qemu, "qemu_version", lambda: "QEMU 7.2")
    monkeypatch.setattr(loop, "run", lambda *a: {"rebind": {}})
    monkeypatch.setattr(rebind, "plot", lambda runs, path: None)

    class OneRecord(rebind.Rebind):
        def records(self, samples, specs):
            return rebind.resummarize([dict(RECORD)])

    _, results = loop.measure([(OneRecord(), None)], [], 1, accel, "test",
                              "python3 -m zdinit bench --icount",
                              started=0)
    return results


def test_icount_records_and_tables_count_instructions(tmp_path, monkeypatch):
    results = icount_run(tmp_path, monkeypatch, qemu.ICOUNT)
    assert results["env"]["accel"] == "tcg-icount"
    assert results["env"]["icount"] == "shift=0,align=off,sleep=off"
    assert all(r["icount"] is True for r in results["runs"])
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert written["runs"][0]["icount"] is True
    text = (tmp_path / "run" / "summary.md").read_text()
    header = next(line for line in text.splitlines()
                  if line.startswith("| scenario"))
    assert " ms" not in header and "speedup" not in header
    assert "median Minstr" in header
    assert "instructions per struct page" in header
    row = next(line for line in text.splitlines()
               if line.startswith("| fsdax-dev"))
    # 10 guest ms = 10,000,000 instructions over 262144 struct pages.
    assert "| 38.1 |" in row
    assert "one nanosecond per guest instruction" in text
    assert "two threads counts the instructions of both" in text


def test_a_timed_run_keeps_milliseconds(tmp_path, monkeypatch):
    """The same record timed under TCG: no icount mark, a table in ms."""
    results = icount_run(tmp_path, monkeypatch, "tcg")
    assert "icount" not in results["env"]
    assert not any("icount" in r for r in results["runs"])
    text = (tmp_path / "run" / "summary.md").read_text()
    assert "| median ms |" in text and "Minstr" not in text


@pytest.mark.parametrize("args,env,message", [
    (["bench", "--icount", "--scenarios", "fsdax-dev"],
     {"ZDINIT_ACCEL": "kvm"}, "argument --icount: counts instructions under "
     "TCG and cannot run with ZDINIT_ACCEL=kvm"),
    (["bench", "--icount", "--scenarios", "fsdax-dev,kmem"], {},
     "argument --icount: counts the instructions of the rebind scenarios, "
     "not kmem (see 'python3 -m zdinit bench --help')"),
])
def test_bench_icount_refuses_what_it_cannot_count(tmp_path, args, env,
                                                   message):
    before = results_entries()
    proc = run_zdinit(tmp_path / "cache", *args, **env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert results_entries() == before
    assert not (tmp_path / "cache").exists()


def test_a_kernel_that_counts_no_struct_pages_is_divided_by_the_geometry():
    """stock and upstream print no count of struct pages written: their
    instructions per struct page divide by the scenario's geometry, the
    count the series' kernel reports for the same range, not by pfns."""
    devdax_mem = dict(RECORD, scenario="devdax-mem", align="2M",
                      pages=4194304, median_ms=49.49)
    reported = dict(devdax_mem, struct_pages_written=1048576)
    silent = dict(devdax_mem, struct_pages_written=None)
    assert rebind.per_struct_page(silent) == \
        rebind.per_struct_page(reported) == "47.2"
    fsdax = dict(RECORD, median_ms=10.0, struct_pages_written=None)
    assert rebind.per_struct_page(fsdax) == "38.1"
