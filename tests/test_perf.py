"""The guest's perf: built once into the cache, rebuilt only when its
tree or flags change; one line when it cannot be built."""
import pathlib

import pytest

from zdinit import cache
from zdinit.kernel import perf
from zdinit.errors import ZdinitError


@pytest.fixture
def fake_make(tmp_path, monkeypatch):
    """make standing in for the perf build: counts builds, writes perf."""
    monkeypatch.setenv("ZDINIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(perf.source, "pristine_tree", lambda b: tmp_path)
    monkeypatch.setattr(perf, "check_static", lambda p: None)
    builds = []

    def run_logged(cmd, log, label, **kw):
        assert "LDFLAGS=-static" in cmd and cmd[-1] == "perf"
        out = next(a[2:] for a in cmd if a.startswith("O="))
        (pathlib.Path(out) / "perf").write_text("")
        builds.append(cmd)
        return 1.0
    monkeypatch.setattr(perf.proc, "run_logged", run_logged)
    return builds


def test_perf_is_built_once_and_again_when_its_flags_change(fake_make,
                                                             monkeypatch):
    with cache.lock("pytest scratch cache"):
        first = perf.binary()
        assert perf.binary() == first and len(fake_make) == 1
        assert first.parent.name == f"perf-{perf.BASE}"
        monkeypatch.setattr(perf, "MAKE_FLAGS",
                            perf.MAKE_FLAGS + ("NO_EXTRA=1",))
        perf.binary()
        assert len(fake_make) == 2


def test_a_failed_perf_build_is_not_trusted(fake_make, monkeypatch):
    def fail(cmd, log, label, **kw):
        raise ZdinitError(f"{label} failed (exit 2)")
    with cache.lock("pytest scratch cache"):
        monkeypatch.setattr(perf.proc, "run_logged", fail)
        with pytest.raises(ZdinitError, match="build perf failed"):
            perf.binary()
        assert not list(cache.require_lock().glob("tools/perf-*/.zdinit-*"))


def test_a_missing_build_tool_names_its_package(monkeypatch):
    monkeypatch.setattr(perf.deps.shutil, "which",
                        lambda name: None if name == "flex" else "/bin/x")
    with pytest.raises(ZdinitError, match="'flex' not found; install the "
                       "Debian package 'flex'"):
        perf.binary()


def test_a_dynamic_perf_is_refused(tmp_path):
    """/bin/sh links libc: the guest could not run it."""
    with pytest.raises(ZdinitError, match="not statically linked"):
        perf.check_static("/bin/sh")
