"""One zdinit run at a time per cache: the second refuses in one line."""
import os
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import ROOT
from zdinit import cache
from zdinit.errors import ZdinitError

HOLDER = """
import sys
from zdinit import cache
with cache.lock("python3 -m zdinit build patched"):
    print("locked", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def scratch_cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("ZDINIT_CACHE", str(path))
    return path


@pytest.fixture
def holder(scratch_cache):
    """Another process holding the cache lock, like a build in progress."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline() == "locked\n"
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def run_zdinit(*args, pass_fds=(), path="/nonexistent"):
    # No tools on PATH: a command that did not take the lock stops at its
    # first step ("needs a Debian system") instead of doing any work.
    return subprocess.run([sys.executable, "-m", "zdinit", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PATH=path),
                          pass_fds=pass_fds)


@pytest.fixture
def git_alone(tmp_path):
    """A PATH with git alone: check-series reads its patches' ids with it
    before it takes the lock, and git does no work of a run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git"))
    return str(bin_dir)


@pytest.mark.parametrize("args", [
    ["setup"], ["build", "base"], ["check-series"],
    ["bench", "--scenarios", "fsdax-dev", "--size", "1G", "--n", "1"],
    ["memmap-equality"], ["safety"], ["capture-vectors"],
])
def test_second_run_refuses_naming_the_holder(holder, scratch_cache,
                                              git_alone, args):
    proc = run_zdinit(*args, path=git_alone)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"the cache {scratch_cache} is in use by PID {holder.pid} " \
        "(python3 -m zdinit build patched, since " in lines[0]
    assert sorted(p.name for p in scratch_cache.iterdir()) == ["lock"]


def test_refusal_says_what_another_cache_costs(holder, scratch_cache):
    """Another ZDINIT_CACHE is no free way round the lock: it is empty, so
    the line that suggests it says so."""
    proc = run_zdinit("build", "base")
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].endswith(
        "wait for it to finish or set ZDINIT_CACHE to another directory; it "
        "starts empty: the kernel sources are fetched again and every kernel "
        "is rebuilt cold"), lines[0]


def test_make_lab_runs_while_another_run_holds_the_cache(holder):
    """The lab builds in lab/ and never reads the cache: no setup, no
    kernel source, no lock."""
    proc = subprocess.run(["make", "-s", "lab", "LAB_ARGS=--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "\nresults: " in proc.stdout, proc.stdout[-2000:]
    assert "in use by" not in proc.stderr


def test_lock_is_free_once_its_holder_is_killed(holder, scratch_cache):
    with pytest.raises(ZdinitError, match=f"in use by PID {holder.pid}"):
        with cache.lock("second"):
            pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with cache.lock("third"):
        assert (scratch_cache / "lock").read_text().startswith(
            f"PID {os.getpid()} (third, since ")
    assert (scratch_cache / "lock").read_text() == ""


def test_commands_a_run_starts_share_its_lock(scratch_cache):
    """make test's end-to-end tests start zdinit commands: those run under
    the session's lock; anything else is refused for the whole run, also
    after such a command has ended."""
    with cache.lock("python3 -m zdinit test"):
        holder_text = (scratch_cache / "lock").read_text()
        child = run_zdinit("setup", pass_fds=cache.held_fds())
        assert child.returncode == 1
        assert "needs a Debian system" in child.stderr, child.stderr
        # Only the variable, not the descriptor: refused like any other.
        stranger = run_zdinit("setup")
        assert f"in use by PID {os.getpid()} (python3 -m zdinit test, " \
            "since " in stranger.stderr, stranger.stderr
        # The child neither dropped the lock nor rewrote its holder.
        assert (scratch_cache / "lock").read_text() == holder_text
        assert "in use by" in run_zdinit("setup").stderr
    assert (scratch_cache / "lock").read_text() == ""


@pytest.mark.parametrize("path", [
    lambda: cache.pristine_dir("linux"), lambda: cache.src_dir("base"),
    lambda: cache.build_dir("base"), cache.ccache_dir, cache.images_dir,
])
def test_nothing_uses_the_cache_without_the_lock(scratch_cache, path):
    with pytest.raises(ZdinitError, match="used without holding its lock"):
        path()
    with cache.lock("test"):
        assert scratch_cache in path().parents


def test_unit_tests_need_no_cache_and_no_kernel_toolchain(holder,
                                                          monkeypatch):
    """make test-unit: pytest and a C compiler, no lock, no setup."""
    from zdinit import cli, deps, lint
    asked = []
    ran = []
    monkeypatch.setattr(deps, "ensure_packages", asked.append)
    monkeypatch.setattr(lint, "run", lambda install: None)
    monkeypatch.setattr(cli.subprocess, "run",
                        lambda cmd, **kw: ran.append((cmd, kw)) or
                        subprocess.CompletedProcess(cmd, 0))
    assert cli.main(["test", "--unit"]) == 0
    assert asked == [deps.UNIT_PACKAGES]
    assert "linux-source-6.12" not in deps.UNIT_PACKAGES
    (cmd, kw), = ran
    assert cmd[-3:-1] == ["-m", "not e2e"] and not kw.get("pass_fds")


def test_make_test_is_one_locked_run(holder, scratch_cache, monkeypatch):
    """make test: refused while another run holds the cache; when it runs,
    pytest inherits the lock."""
    from zdinit import cli, deps, lint
    from zdinit.kernel import source
    monkeypatch.setattr(deps, "ensure_packages", lambda *a: None)
    monkeypatch.setattr(source, "pristine_tree", lambda base: None)
    monkeypatch.setattr(lint, "run", lambda install: None)
    ran = []
    monkeypatch.setattr(cli.subprocess, "run",
                        lambda cmd, **kw: ran.append(kw) or
                        subprocess.CompletedProcess(cmd, 0))
    # Under make test this session holds the real cache's lock as well.
    outer_fds = set(cache.held_fds())
    outer_env = os.environ.get(cache.LOCK_FD_ENV)
    assert cli.main(["test"]) == 1 and ran == []
    holder.kill()
    holder.wait()
    assert cli.main(["test"]) == 0
    (kw,), = [ran]
    assert len(set(kw["pass_fds"]) - outer_fds) == 1
    assert os.environ.get(cache.LOCK_FD_ENV) == outer_env
    assert (scratch_cache / "lock").read_text() == ""
