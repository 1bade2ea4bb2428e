"""Bad input: one line on stderr, a non-zero exit, and nothing written.

Every zdinit run here gets a scratch cache and a PATH with no tools on it:
if a check were missing, the command would stop at its first step ("needs
a Debian system") with exit 1 instead of building anything, and the test
would fail on the exit status and the message.
"""
import argparse
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from zdinit import cli, qemu, scenarios


def results_entries():
    results = ROOT / "results"
    return set(results.iterdir()) if results.exists() else set()


def run_zdinit(cache, *args, **env):
    return subprocess.run([sys.executable, "-m", "zdinit", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, ZDINIT_CACHE=str(cache),
                                   PATH="/nonexistent", **env))


@pytest.mark.parametrize("args,message", [
    (["bench", "--size", "3X"], "bad size '3X'"),
    (["bench", "--size", "0"], "size 0 must be a multiple of 128M"),
    (["bench", "--size", "1X"], "bad size '1X'"),
    (["bench", "--size=-4G"], "bad size '-4G'"),
    (["bench", "--size", ""], "bad size ''"),
    (["bench", "--scenarios", "fsdax-dev,bogus"], "unknown scenario 'bogus'"),
    (["bench", "--n", "0"], "--n must be 1..1000"),
    (["bench", "--n", "-3"], "--n must be 1..1000"),
    (["bench", "--n", "x"], "argument --n: invalid int value: 'x'"),
    (["bench", "--rounds", "0"], "--rounds must be 1..100"),
    (["bench", "--kernels", "base,other"], "unknown kernel 'other'"),
    (["bench", "--strategies", "fast"], "unknown strategy 'fast'"),
    (["bench", "--verify"], "--verify needs the patched kernel"),
    (["bench", "--scenarios", "devdax-dev", "--size", "4G", "--align", "7M"],
     "unknown alignment '7M'"),
    (["bench", "--scenarios", "fsdax-dev", "--align", "7M"],
     "unknown alignment '7M'"),
    (["bench", "--scenarios", "devdax-mem", "--size", "1G", "--align", "1G"],
     "align 1G needs a size"),
    (["bench", "--kernels", ","], "argument --kernels: no kernel given"),
    (["bench", "--kernels", ""], "argument --kernels: no kernel given"),
    (["bench", "--scenarios", ","], "argument --scenarios: no scenario given"),
    (["bench", "--strategies", " , "],
     "argument --strategies: no strategy given"),
    (["bench", "--align", ","], "argument --align: no alignment given"),
    (["bench", "--kernels", "base,"], "empty item in 'base,'"),
    (["bench", "--kernels", "patched,base,patched"],
     "kernel 'patched' given twice"),
    (["selftest", "--size", "0"], "size 0 must be a multiple of 128M"),
    (["selftest", "--size", "3X"], "bad size '3X'"),
    (["selftest", "--size", "1G"], "align 1G needs a size"),
    (["build", "debug9"], "unknown kernel 'debug9'"),
    (["build", ""], "unknown kernel ''"),
    (["build", "base", "base"], "a kernel is given twice"),
    (["lab", "--slow"], "unrecognized arguments: --slow"),
    (["bogus"], "invalid choice: 'bogus'"),
    ([], "the following arguments are required: command"),
])
def test_usage_errors(tmp_path, args, message):
    before = results_entries()
    cache = tmp_path / "cache"
    proc = run_zdinit(cache, *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zdinit: error: ") \
        and message in lines[0], proc.stderr
    assert results_entries() == before
    assert not cache.exists(), "a refused command touched the cache"


def test_unusable_cache_is_one_line(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    proc = run_zdinit(not_a_dir, "build", "base")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot use {not_a_dir} as the cache" \
        in lines[0], proc.stderr


@pytest.mark.parametrize("text", ["", ",", " , ", ",,", "base,", ",base",
                                  "base,,patched", "base,base", "Base"])
def test_comma_list_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError):
        cli.comma_list("kernel", cli.KERNELS)(text)


def test_comma_list_keeps_order_and_strips_blanks():
    parse = cli.comma_list("kernel", cli.KERNELS)
    assert parse(" patched , base") == ["patched", "base"]


@pytest.mark.parametrize("text", ["auto@", "auto@0", "auto@65", "auto@x",
                                  "auto@1@2", "fast", "fast@2", "@2",
                                  "auto@1,auto@1"])
def test_strategy_list_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError):
        cli.comma_list("strategy", cli.STRATEGIES,
                       scenarios.check_strategy)(text)


def test_strategy_list_takes_thread_counts():
    parse = cli.comma_list("strategy", cli.STRATEGIES,
                           scenarios.check_strategy)
    assert parse("auto@1,auto,stream@64") == ["auto@1", "auto", "stream@64"]
    assert scenarios.strategy_name("auto@1") == "auto"


def test_bench_refuses_a_bad_thread_count_before_work(tmp_path):
    proc = run_zdinit(tmp_path / "cache", "bench", "--strategies", "auto@0")
    assert proc.returncode == 2
    assert "thread count after @ must be 1..64" in proc.stderr


def test_too_big_for_host_memory_is_refused(monkeypatch):
    from zdinit import bench, scenarios
    from zdinit.errors import ZdinitError

    monkeypatch.setattr(qemu, "mem_available", lambda: 4 << 30)
    specs = scenarios.plan(["fsdax-mem"], size="256G")
    with pytest.raises(ZdinitError, match="host memory.*smaller --size"):
        bench.check_resources(specs)
