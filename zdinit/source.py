"""The Debian linux-source-6.12 tree and the variants made from it."""
import glob
import hashlib
import os
import pathlib
import shutil
import subprocess

from zdinit import cache, progress
from zdinit.errors import ZdinitError

TARBALL_GLOB = "/usr/src/linux-source-6.12.tar.*"
PRISTINE = "linux-source-6.12"
PATCHES = pathlib.Path(__file__).resolve().parent.parent / "patches" / "linux-6.12"
# Stock 6.12 with only the series' hotplug timing patch (patch 11).
HOTPLUG_PATCHES = PATCHES.with_name("linux-6.12-hotplug")
# The same plus the contiguity walk patch (patch 12): patch 12 alone, A/B.
HOTPLUG_CONTIG_PATCHES = PATCHES.with_name("linux-6.12-hotplug-contig")
# The series without patch 7, the template copy from registers: that patch
# alone, A/B against "patched".
MEMCPY_PATCHES = PATCHES.with_name("linux-6.12-memcpy")
# The huge-page clearing series (issue 9): applies to the pristine tree alone.
CLEAR_PATCHES = PATCHES.with_name("linux-6.12-clear")
# That series plus a deliberately broken folio_zero_user(), for the test
# that the zero read-back check can fail.
CLEAR_BROKEN_PATCHES = PATCHES.parent.parent / "tests" / "data" / "clear-broken"
# Written last into a tree once it is complete; its text says what the
# tree was made from, and a tree whose stamp does not match is made again.
_STAMP = ".zdinit-ready"


def tarball():
    found = sorted(glob.glob(TARBALL_GLOB))
    if not found:
        raise ZdinitError("Debian kernel source not found at "
                          f"{TARBALL_GLOB}; run 'python3 -m zdinit setup'")
    return pathlib.Path(found[-1])


def _stamped(tree, identity):
    stamp = tree / _STAMP
    return stamp.exists() and stamp.read_text().strip() == identity


def _tarball_identity(src):
    """apt replaces the tarball in place for a new 6.12.y: name, size and
    mtime tell the versions apart."""
    st = src.stat()
    return f"{src.name} {st.st_size} {st.st_mtime_ns}"


def pristine_tree():
    """Unpack the Debian tarball once; a half-unpacked tree, or one from an
    older tarball, is never used."""
    tree = cache.pristine_dir(PRISTINE)
    src = tarball()
    identity = _tarball_identity(src)
    if _stamped(tree, identity):
        return tree
    cache.require_free_space(tree.parent, 2 << 30, "the kernel source")
    tmp = tree.with_name(PRISTINE + ".unpacking")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(tree, ignore_errors=True)
    tmp.mkdir(parents=True)
    progress.say(f"unpacking {src} into {tree}")
    subprocess.run(["tar", "xf", str(src), "-C", str(tmp)], check=True)
    top = tmp / PRISTINE
    if not (top / "Makefile").exists():
        raise ZdinitError(f"{src} does not contain {PRISTINE}/Makefile")
    top.rename(tree)
    tmp.rmdir()
    (tree / _STAMP).write_text(identity + "\n")
    return tree


def series(directory=PATCHES):
    """Patch files in 'series' order; every listed file must exist."""
    series_file = directory / "series"
    if not series_file.exists():
        return []
    names = [line.strip() for line in series_file.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    paths = [directory / name for name in names]
    for path in paths:
        if not path.is_file():
            raise ZdinitError(f"series lists {path.name} but {path} is missing")
    return paths


def _digest(base, paths):
    """What a variant tree is made of: the pristine tree's stamp and the
    patches."""
    h = hashlib.sha256((base / _STAMP).read_bytes())
    for path in paths:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def apply_patch(tree, patch):
    """Apply one patch, refusing cleanly (tree untouched) if it does not fit."""
    # No .orig backups where a hunk lands at an offset (patched-memcpy
    # leaves a patch out): the tree holds only what the series makes.
    args = ["patch", "-p1", "-s", "-N", "--no-backup-if-mismatch", "-d",
            str(tree), "-i", str(patch)]
    dry = subprocess.run(args + ["--dry-run"], capture_output=True, text=True)
    if dry.returncode != 0:
        why = (dry.stdout + dry.stderr).strip().splitlines()
        raise ZdinitError(
            f"patch {patch.name} does not apply to Debian {PRISTINE}: "
            f"{why[0] if why else 'patch failed'}; rebase the series")
    subprocess.run(args, check=True, capture_output=True)


def clone_tree(name):
    """A fresh hard-linked copy of the pristine tree, not yet in place.

    GNU patch writes a new file and renames it over the old one, so
    patching the copy never changes the pristine tree behind the links.

    The tree's old build directory goes first: a file the old tree had
    patched is back to its pristine, older mtime in the copy, so make
    would keep the objects built from the patched file.
    """
    base = pristine_tree()
    shutil.rmtree(cache.build_dir(name), ignore_errors=True)
    tree = cache.src_dir(name)
    tmp = tree.with_name(tree.name + ".preparing")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(base), str(tmp)], check=True)
    (tmp / _STAMP).unlink()
    return tree, tmp


def variant_tree(name, patches):
    """Source tree of a variant: a copy of the pristine tree plus patches.

    The copy is rebuilt whenever the series changes, and only replaces the
    old tree once every patch applied.
    """
    digest = _digest(pristine_tree(), patches)
    tree = cache.src_dir(name)
    if _stamped(tree, digest):
        return tree
    tree, tmp = clone_tree(name)
    progress.say(f"applying {len(patches)} patches for '{name}'")
    try:
        for patch in patches:
            apply_patch(tmp, patch)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(tree, ignore_errors=True)
    os.rename(tmp, tree)
    (tree / _STAMP).write_text(digest + "\n")
    return tree
