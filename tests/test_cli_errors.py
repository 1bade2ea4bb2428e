"""Bad input: one line on stderr, a non-zero exit, and nothing written."""
import subprocess
import sys

import pytest

from conftest import ROOT


def zdinit(*args):
    return subprocess.run([sys.executable, "-m", "zdinit", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args,message", [
    (["bench", "--size", "3X"], "bad size '3X'"),
    (["bench", "--scenarios", "fsdax-dev,bogus"], "unknown scenario 'bogus'"),
    (["bench", "--n", "0"], "--n must be 1..1000"),
    (["bench", "--kernels", "base,other"], "unknown kernel 'other'"),
    (["bench", "--strategies", "fast"], "unknown strategy 'fast'"),
    (["bench", "--verify"], "--verify needs the patched kernel"),
    (["bench", "--scenarios", "devdax-dev", "--size", "4G", "--align", "7M"],
     "unknown align '7M'"),
    (["build", "debug9"], "unknown kernel 'debug9'"),
])
def test_usage_errors(args, message):
    before = set((ROOT / "results").glob("*")) if (ROOT / "results").exists() else set()
    proc = zdinit(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    after = set((ROOT / "results").glob("*")) if (ROOT / "results").exists() else set()
    assert after == before


def test_too_big_for_host_memory_is_refused(monkeypatch):
    from zdinit import bench, scenarios
    from zdinit.errors import ZdinitError

    monkeypatch.setattr(bench, "mem_available", lambda: 4 << 30)
    specs = scenarios.plan(["fsdax-mem"], size="256G")
    with pytest.raises(ZdinitError, match="host memory.*smaller --size"):
        bench.check_resources(specs)
