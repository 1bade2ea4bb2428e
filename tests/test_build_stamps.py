"""A tree or build directory is trusted only if the step that made it
finished: stamps are written last, and an interrupted step leaves none."""
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time

import pytest

from conftest import ROOT
from zdinit import cache, paths, proc
from zdinit.kernel import bases, build, kconfig, series, source
from zdinit.errors import ZdinitError

GOOD = """--- a/hello.c
+++ b/hello.c
@@ -1,1 +1,1 @@
-int hello = 0;
+int hello = {};
"""


def make_deb(tmp_path, base_name, hello, release="1"):
    """A stand-in for Debian's linux-source-<base> .deb: its tarball holds
    a Makefile naming the release and hello.c.  Returns (path, sha256)."""
    package = f"linux-source-{base_name}"
    src = tmp_path / f"src-{hello}-{release}"
    top = src / package
    top.mkdir(parents=True)
    (top / "Makefile").write_text(f"# release {release}\nall:\n")
    (top / "hello.c").write_text(f"int hello = {hello};\n")
    root = tmp_path / f"deb-{hello}-{release}"
    (root / "usr/src").mkdir(parents=True)
    (root / "DEBIAN").mkdir()
    (root / "DEBIAN/control").write_text(
        f"Package: {package}\nVersion: 1\nArchitecture: all\n"
        "Maintainer: nobody <nobody@example.org>\nDescription: test\n")
    with tarfile.open(root / f"usr/src/{package}.tar.xz", "w:xz") as tar:
        tar.add(top, arcname=package)
    deb = tmp_path / f"{package}-{hello}-{release}.deb"
    subprocess.run(["dpkg-deb", "-Zxz", "--build", str(root), str(deb)],
                   check=True, capture_output=True)
    return deb, source._sha256(deb)


def fake_base(deb, sha256):
    """A base whose .deb is already in the cache (nothing is fetched), its
    zone-device series one directory, patches/linux-9.9-zone-device/."""
    base = bases.Base("9.9", "linux-source-9.9", "1", sha256, "nowhere",
                      ("full",), ("full",), stacks={"zone-device": (
                          bases.Part("zone-device"),)},
                      archive="http://127.0.0.1:9/debian")
    debs = cache.require_lock() / "debs"
    debs.mkdir(exist_ok=True)
    shutil.copy(deb, debs / base.deb_name)
    return base


@pytest.fixture
def base(tmp_path, monkeypatch):
    """A fake base in a scratch cache."""
    monkeypatch.setenv("ZDINIT_CACHE", str(tmp_path / "cache"))
    with cache.lock("pytest scratch cache"):
        yield fake_base(*make_deb(tmp_path, "9.9", 0))


def patch_file(tmp_path, value):
    path = tmp_path / f"000{value}-hello.patch"
    path.write_text(GOOD.format(value))
    return path


def stamp(tree):
    return tree / source._STAMP


def test_interrupted_unpack_leaves_no_stamp(base, monkeypatch):
    real_run = subprocess.run

    def interrupted_tar(cmd, **kw):
        real_run(cmd, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(source.subprocess, "run", interrupted_tar)
    with pytest.raises(KeyboardInterrupt):
        source.pristine_tree(base)
    assert not stamp(cache.pristine_dir(base.package)).exists()
    monkeypatch.setattr(source.subprocess, "run", real_run)
    tree = source.pristine_tree(base)
    assert stamp(tree).exists()


def test_another_deb_is_unpacked_again(base, tmp_path):
    tree = source.pristine_tree(base)
    (tree / "hello.c").write_text("stale\n")
    assert source.pristine_tree(base) == tree
    assert (tree / "hello.c").read_text() == "stale\n"
    newer = fake_base(*make_deb(tmp_path, "9.9", 7))
    assert source.pristine_tree(newer) == tree
    assert (tree / "hello.c").read_text() == "int hello = 7;\n"


def test_a_deb_that_does_not_match_its_pin_is_fetched_not_trusted(
        base, tmp_path):
    """A cached .deb with another checksum is dropped and fetched again;
    a base whose archive cannot be reached says so in one line, and
    leaves nothing behind."""
    wrong = dataclasses.replace(base, sha256="0" * 64)
    with pytest.raises(ZdinitError) as err:
        source.pristine_tree(wrong)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("base 9.9: apt-get update of linux-source-9.9 1 "
                              "from http://127.0.0.1:9/debian nowhere failed")
    debs = cache.require_lock() / "debs"
    assert list(debs.iterdir()) == []
    assert not cache.pristine_dir(base.package).exists()


def test_a_fetched_deb_with_another_checksum_is_refused(base, tmp_path,
                                                        monkeypatch):
    deb = cache.require_lock() / "debs" / base.deb_name
    other, _ = make_deb(tmp_path, "9.9", 3)
    deb.unlink()

    def fake_apt(b, workdir, *args):
        if args[0] == "download":
            shutil.copy(other, workdir / b.deb_name)

    monkeypatch.setattr(source, "_apt", fake_apt)
    with pytest.raises(ZdinitError, match="base 9.9: linux-source-9.9_1_all"
                       r"\.deb has sha256 [0-9a-f]{64}, not the pinned "):
        source.pristine_tree(base)
    assert list(deb.parent.iterdir()) == []


def test_a_patch_that_does_not_apply_names_the_base(base, tmp_path):
    bad = tmp_path / "0001-bad.patch"
    bad.write_text(GOOD.replace("-int hello = 0;", "-int hello = 5;")
                   .format(1))
    with pytest.raises(ZdinitError, match="^base 9.9: patch 0001-bad.patch "
                       "does not apply to linux-source-9.9 1: "):
        source.variant_tree("9.9/patched", [bad], base)
    assert not cache.src_dir("9.9/patched").exists()


def test_interrupted_patching_leaves_no_stamped_tree(base, tmp_path,
                                                     monkeypatch):
    patches = [patch_file(tmp_path, 1)]
    real_apply = source.apply_patch

    def interrupted(tree, patch, base):
        real_apply(tree, patch, base)
        raise KeyboardInterrupt

    monkeypatch.setattr(source, "apply_patch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        source.variant_tree("patched", patches, base)
    tree = cache.src_dir("patched")
    assert not stamp(tree).exists()
    assert not tree.with_name(tree.name + ".preparing").exists()
    monkeypatch.setattr(source, "apply_patch", real_apply)
    assert source.variant_tree("patched", patches, base) == tree
    assert stamp(tree).exists()
    assert (tree / "hello.c").read_text() == "int hello = 1;\n"


def test_a_new_tree_discards_its_build_dir(base, tmp_path):
    """Objects built from a patched file are newer than the pristine file
    that replaces it in a new tree: make would keep them."""
    one, two = [patch_file(tmp_path, 1)], [patch_file(tmp_path, 2)]
    object_file = cache.build_dir("patched") / "hello.o"

    source.variant_tree("patched", one, base)
    object_file.parent.mkdir(parents=True)
    object_file.write_text("built from hello = 1\n")
    source.variant_tree("patched", one, base)
    assert object_file.exists(), "an unchanged tree keeps its build"
    source.variant_tree("patched", two, base)
    assert not object_file.exists()

    object_file.parent.mkdir(parents=True)
    object_file.write_text("built from hello = 2\n")
    newer = fake_base(*make_deb(tmp_path, "9.9", 0, release="2"))
    source.variant_tree("patched", two, newer)
    assert not object_file.exists(), "a new Debian tree is a new tree"


def test_a_tree_being_replaced_is_unstamped_first(base, tmp_path,
                                                  monkeypatch):
    """An interrupt while an old tree's build directory is removed leaves
    neither a stamped tree nor its half-removed build trusted."""
    tree = source.variant_tree("patched", [patch_file(tmp_path, 1)], base)

    def interrupted(path, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(source.shutil, "rmtree", interrupted)
    with pytest.raises(KeyboardInterrupt):
        source.clone_tree("patched", base)
    assert not stamp(tree).exists()


def fake_series(tmp_path, monkeypatch, patches):
    """patches/linux-9.9-zone-device/ in tmp_path listing patches,
    checkpatch clean."""
    directory = tmp_path / "patches" / "linux-9.9-zone-device"
    directory.mkdir(parents=True)
    for patch in patches:
        shutil.copy(patch, directory)
    (directory / "series").write_text("".join(p.name + "\n" for p in patches))
    (directory / series.COVER_LETTER).write_text(
        "Subject: [PATCH 0/1] hello\n\nbase-commit: 9.9\n")
    monkeypatch.setattr(paths, "PATCHES", directory.parent)
    monkeypatch.setattr(series, "checkpatch", lambda tree, patch: "clean")


def fake_build_tree(calls):
    """build.build_tree standing in for kbuild: records each prefix's
    build directory and whether its configuration was defined_only."""
    def build_tree(name, tree, fragments, base, defined_only=False):
        calls.append((name, defined_only))
        return build.Kernel(name, tree, None, None, [], "", 1.0)
    return build_tree


def test_a_checked_series_is_the_tree_of_its_kernel(base, tmp_path,
                                                    monkeypatch):
    """check-series builds every prefix where the kernel made of the whole
    series is built, the last one checked in full, and leaves its tree
    stamped: that kernel's build applies nothing again."""
    second = tmp_path / "0002-hello-again.patch"
    second.write_text(GOOD.replace("-int hello = 0;", "-int hello = 1;")
                      .format(2))
    fake_series(tmp_path, monkeypatch, [patch_file(tmp_path, 1), second])
    calls = []
    monkeypatch.setattr(build, "build_tree", fake_build_tree(calls))
    series.check("zone-device", base)
    work = build.work_name("patched", base)
    assert calls == [(work, True), (work, False)]

    def applied_again(tree, patch, base):
        raise AssertionError(f"{patch.name} applied again")

    monkeypatch.setattr(source, "apply_patch", applied_again)
    tree = source.variant_tree(work, build.variant_patches("patched", base),
                               base)
    assert (tree / "hello.c").read_text() == "int hello = 2;\n"


def test_a_series_that_stops_half_way_leaves_no_kernel_tree(base, tmp_path,
                                                            monkeypatch):
    bad = tmp_path / "0002-bad.patch"
    bad.write_text(GOOD.replace("-int hello = 0;", "-int hello = 5;")
                   .format(2))
    fake_series(tmp_path, monkeypatch, [patch_file(tmp_path, 1), bad])
    monkeypatch.setattr(build, "build_tree", fake_build_tree([]))
    with pytest.raises(ZdinitError, match="0002-bad.patch does not apply"):
        series.check("zone-device", base)
    assert not stamp(cache.src_dir(build.work_name("patched", base))).exists()


def test_a_series_checked_without_builds_leaves_its_kernel_alone(
        base, tmp_path, monkeypatch):
    patches = [patch_file(tmp_path, 1)]
    fake_series(tmp_path, monkeypatch, patches)
    work = build.work_name("patched", base)
    tree = source.variant_tree(work, patches, base)
    built = cache.build_dir(work) / "vmlinux"
    built.parent.mkdir(parents=True)
    built.write_text("")
    series.check("zone-device", base, build_each=False)
    assert built.exists() and stamp(tree).exists()
    checked = cache.src_dir(build.work_name("check-zone-device", base))
    assert (checked / "hello.c").read_text() == "int hello = 1;\n"


def fake_kbuild(out, interrupt_at=None):
    """proc.run_logged standing in for make: writes a .config that has
    what the fragments ask for, and is interrupted at one step."""
    def run_logged(cmd, log_path, label, **kw):
        if label == interrupt_at:
            (out / "half-written.o").write_text("")
            raise KeyboardInterrupt
        if label == "olddefconfig":
            wanted = kconfig.requested(kconfig.fragment_paths(["zdinit"], bases.get("6.12")))
            (out / ".config").write_text("".join(
                f"# {k} is not set\n" if v == "n" else f"{k}={v}\n"
                for k, v in wanted.items()))
        return 0.0
    return run_logged


@pytest.mark.parametrize("step", ["olddefconfig", "build base",
                                  "module build"])
def test_interrupted_build_is_not_trusted(tmp_path, monkeypatch, step):
    monkeypatch.setenv("ZDINIT_CACHE", str(tmp_path / "cache"))
    tree = tmp_path / "linux"
    tree.mkdir()
    with cache.lock("pytest scratch cache"):
        out = cache.build_dir("base")
        monkeypatch.setattr(build.proc, "run_logged", fake_kbuild(out, step))
        with pytest.raises(KeyboardInterrupt):
            build.build_tree("base", tree, ["zdinit"], bases.get("6.12"))
        assert (out / build._BUILDING).exists()
        if step == "olddefconfig":
            assert not (out / ".zdinit-config").exists()

        monkeypatch.setattr(build.proc, "run_logged", fake_kbuild(out))
        build.build_tree("base", tree, ["zdinit"], bases.get("6.12"))
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
