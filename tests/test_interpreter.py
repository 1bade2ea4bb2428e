"""'python3 -m zdinit' from an interpreter without matplotlib (pyenv first
on PATH) re-executes under Debian's python3, or runs where it is."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from zdinit import interpreter

# A stand-in for /usr/bin/python3 that reports how it was started.
FAKE_SYSTEM_PYTHON = """#!/bin/sh
echo "argv: $*"
echo "cwd: $(pwd)"
echo "guard: $ZDINIT_REEXEC_FROM"
"""

ENSURE = """
import sys
from zdinit import interpreter
interpreter.SYSTEM_PYTHON = sys.argv[1]
interpreter.NEEDED = tuple(sys.argv[2].split(","))
interpreter.ensure(["bench", "--kernels", "base", "--size", "4 G"])
print("ran here")
"""


def ensure_with(tmp_path, needed, **env):
    fake = tmp_path / "python3"
    fake.write_text(FAKE_SYSTEM_PYTHON)
    fake.chmod(0o755)
    return subprocess.run([sys.executable, "-c", ENSURE, str(fake), needed],
                          cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, **env)).stdout


def test_reexecs_the_same_command_when_a_module_is_missing(tmp_path):
    out = ensure_with(tmp_path, "json,zdinit_no_such_module")
    assert out.splitlines() == [
        "argv: -m zdinit bench --kernels base --size 4 G",
        f"cwd: {ROOT}",
        f"guard: {sys.executable}"]


def test_runs_here_when_nothing_is_missing(tmp_path):
    assert ensure_with(tmp_path, "json") == "ran here\n"


def test_never_reexecs_twice(tmp_path):
    out = ensure_with(tmp_path, "zdinit_no_such_module",
                      ZDINIT_REEXEC_FROM="/some/python3")
    assert out == "ran here\n"


def test_debian_python_runs_here(monkeypatch):
    """apt installs what Debian's python3 lacks; it never re-executes."""
    monkeypatch.setattr(interpreter, "SYSTEM_PYTHON", sys.executable)
    monkeypatch.setattr(interpreter, "NEEDED", ("zdinit_no_such_module",))
    monkeypatch.setattr(os, "execv", pytest.fail)
    interpreter.ensure(["lab"])


def test_without_debian_python_runs_here(tmp_path, monkeypatch):
    monkeypatch.setattr(interpreter, "SYSTEM_PYTHON", str(tmp_path / "none"))
    monkeypatch.setattr(interpreter, "NEEDED", ("zdinit_no_such_module",))
    monkeypatch.setattr(os, "execv", pytest.fail)
    interpreter.ensure(["lab"])
