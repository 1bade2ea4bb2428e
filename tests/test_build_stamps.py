"""A tree or build directory is trusted only if the step that made it
finished: stamps are written last, and an interrupted step leaves none."""
import os
import signal
import subprocess
import sys
import tarfile
import time

import pytest

from conftest import ROOT
from zdinit import build, cache, kconfig, proc, source

GOOD = """--- a/hello.c
+++ b/hello.c
@@ -1,1 +1,1 @@
-int hello = 0;
+int hello = {};
"""


@pytest.fixture
def tarball(tmp_path, monkeypatch):
    """A stand-in for Debian's linux-source tarball, in a scratch cache."""
    monkeypatch.setenv("ZDINIT_CACHE", str(tmp_path / "cache"))
    top = tmp_path / "src" / source.PRISTINE
    top.mkdir(parents=True)
    (top / "Makefile").write_text("all:\n")
    (top / "hello.c").write_text("int hello = 0;\n")
    path = tmp_path / f"{source.PRISTINE}.tar.xz"
    with tarfile.open(path, "w:xz") as tar:
        tar.add(top, arcname=source.PRISTINE)
    monkeypatch.setattr(source, "TARBALL_GLOB", str(path))
    with cache.lock("pytest scratch cache"):
        yield path


def patch_file(tmp_path, value):
    path = tmp_path / f"000{value}-hello.patch"
    path.write_text(GOOD.format(value))
    return path


def stamp(tree):
    return tree / source._STAMP


def test_interrupted_unpack_leaves_no_stamp(tarball, monkeypatch):
    real_run = subprocess.run

    def interrupted_tar(cmd, **kw):
        real_run(cmd, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(source.subprocess, "run", interrupted_tar)
    with pytest.raises(KeyboardInterrupt):
        source.pristine_tree()
    assert not stamp(cache.pristine_dir(source.PRISTINE)).exists()
    monkeypatch.setattr(source.subprocess, "run", real_run)
    tree = source.pristine_tree()
    assert stamp(tree).exists()


def test_new_tarball_is_unpacked_again(tarball):
    tree = source.pristine_tree()
    (tree / "hello.c").write_text("stale\n")
    assert source.pristine_tree() == tree
    assert (tree / "hello.c").read_text() == "stale\n"
    os.utime(tarball, ns=(time.time_ns(), time.time_ns() + 10**9))
    source.pristine_tree()
    assert (tree / "hello.c").read_text() == "int hello = 0;\n"


def test_interrupted_patching_leaves_no_stamped_tree(tarball, tmp_path,
                                                     monkeypatch):
    patches = [patch_file(tmp_path, 1)]
    real_apply = source.apply_patch

    def interrupted(tree, patch):
        real_apply(tree, patch)
        raise KeyboardInterrupt

    monkeypatch.setattr(source, "apply_patch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        source.variant_tree("patched", patches)
    tree = cache.src_dir("patched")
    assert not stamp(tree).exists()
    assert not tree.with_name(tree.name + ".preparing").exists()
    monkeypatch.setattr(source, "apply_patch", real_apply)
    assert source.variant_tree("patched", patches) == tree
    assert stamp(tree).exists()
    assert (tree / "hello.c").read_text() == "int hello = 1;\n"


def test_a_new_tree_discards_its_build_dir(tarball, tmp_path):
    """Objects built from a patched file are newer than the pristine file
    that replaces it in a new tree: make would keep them."""
    one, two = [patch_file(tmp_path, 1)], [patch_file(tmp_path, 2)]
    object_file = cache.build_dir("patched") / "hello.o"

    source.variant_tree("patched", one)
    object_file.parent.mkdir(parents=True)
    object_file.write_text("built from hello = 1\n")
    source.variant_tree("patched", one)
    assert object_file.exists(), "an unchanged tree keeps its build"
    source.variant_tree("patched", two)
    assert not object_file.exists()

    object_file.parent.mkdir(parents=True)
    object_file.write_text("built from hello = 2\n")
    os.utime(tarball, ns=(time.time_ns(), time.time_ns() + 10**9))
    source.variant_tree("patched", two)
    assert not object_file.exists(), "a new Debian tree is a new tree"


def fake_kbuild(out, interrupt_at=None):
    """proc.run_logged standing in for make: writes a .config that has
    what the fragments ask for, and is interrupted at one step."""
    def run_logged(cmd, log_path, label, **kw):
        if label == interrupt_at:
            (out / "half-written.o").write_text("")
            raise KeyboardInterrupt
        if label == "olddefconfig":
            wanted = kconfig.requested(kconfig.fragment_paths(["zdinit"]))
            (out / ".config").write_text("".join(
                f"# {k} is not set\n" if v == "n" else f"{k}={v}\n"
                for k, v in wanted.items()))
        return 0.0
    return run_logged


@pytest.mark.parametrize("step", ["olddefconfig", "build base",
                                  "module build"])
def test_interrupted_build_is_not_trusted(tmp_path, monkeypatch, step):
    monkeypatch.setenv("ZDINIT_CACHE", str(tmp_path / "cache"))
    tree, out = tmp_path / "linux", tmp_path / "build"
    tree.mkdir()
    monkeypatch.setattr(build.proc, "run_logged", fake_kbuild(out, step))
    with cache.lock("pytest scratch cache"):
        with pytest.raises(KeyboardInterrupt):
            build.build_tree("base", tree, ["zdinit"], out=out)
        assert (out / build._BUILDING).exists()
        if step == "olddefconfig":
            assert not (out / ".zdinit-config").exists()

        monkeypatch.setattr(build.proc, "run_logged", fake_kbuild(out))
        build.build_tree("base", tree, ["zdinit"], out=out)
    assert not (out / build._BUILDING).exists()
    assert not (out / "half-written.o").exists()
    assert (out / ".zdinit-config").exists()


def test_finished_build_dir_is_reused(tmp_path):
    out = tmp_path / "build"
    out.mkdir()
    (out / "kept.o").write_text("")
    build.claim_build_dir(out).unlink()
    assert (out / "kept.o").exists()


def test_interrupted_command_is_stopped(tmp_path):
    """^C or SIGTERM while make runs: make must not go on writing into the
    cache once the lock is released."""
    pid_file = tmp_path / "pid"

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            proc.run_logged(["sh", "-c", f"echo $$ > {pid_file}; "
                             "echo started; exec sleep 60"],
                            tmp_path / "log", "sleeper")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


KILLED_PARENT = """
import sys
from zdinit import proc
proc.run_logged(["sh", "-c", "echo $$ > " + sys.argv[1] + "; echo started; "
                 "exec sleep 60"], sys.argv[2], "sleeper")
"""


def test_command_dies_with_a_killed_zdinit(tmp_path):
    """zdinit killed by SIGKILL releases the lock at once: its make must
    not go on writing into the cache beside the next run."""
    pid_file = tmp_path / "pid"
    parent = subprocess.Popen([sys.executable, "-c", KILLED_PARENT,
                               str(pid_file), str(tmp_path / "log")],
                              cwd=ROOT)
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.05)
    child = int(pid_file.read_text())
    parent.kill()
    parent.wait()
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail("the command outlived its zdinit")
