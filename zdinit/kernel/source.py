"""A base's Debian kernel tree and the variants made from it."""
import hashlib
import os
import shutil
import subprocess

from zdinit import cache, progress
from zdinit.errors import ZdinitError

# Written last into a tree once it is complete; its text says what the
# tree was made from, and a tree whose stamp does not match is made again.
_STAMP = ".zdinit-ready"


def _stamped(tree, identity):
    stamp = tree / _STAMP
    return stamp.exists() and stamp.read_text().strip() == identity


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _apt(base, workdir, *args):
    """apt-get with a source list of base's archive alone, in workdir:
    the machine's own apt sources and package lists stay untouched."""
    lists = workdir / "lists"
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    (workdir / "cache" / "archives" / "partial").mkdir(parents=True,
                                                      exist_ok=True)
    sources = workdir / "sources.list"
    sources.write_text(base.sources_line + "\n")
    cmd = ["apt-get", "-q", "-o", f"Dir::Etc::SourceList={sources}",
           "-o", "Dir::Etc::SourceParts=/dev/null",
           "-o", f"Dir::State::Lists={lists}",
           "-o", f"Dir::Cache={workdir / 'cache'}"] + list(args)
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
    output = (proc.stdout + proc.stderr).splitlines()
    # apt-get update exits 0 when an index cannot be fetched; it says so.
    errors = [line.strip() for line in output
              if line.startswith(("E:", "Err:", "W: Failed to fetch"))]
    if proc.returncode or errors:
        why = (errors or output or ["no output"])[-1]
        raise ZdinitError(
            f"base {base.name}: apt-get {args[0]} of {base.package} "
            f"{base.version} from {base.archive} {base.suite} failed: {why} "
            "(check the network, or the version is gone from the archive: "
            "update zdinit/kernel/bases.py)")


def fetch_deb(base):
    """base's .deb in the cache, fetched once and checked against its
    pinned sha256; a download that fails or does not match is removed."""
    debs = cache.require_lock() / "debs"
    deb = debs / base.deb_name
    if deb.exists() and _sha256(deb) == base.sha256:
        return deb
    deb.unlink(missing_ok=True)
    cache.require_free_space(debs.parent, 1 << 30,
                             f"the {base.package} package")
    work = debs / f"{base.name}.fetching"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        progress.say(f"base {base.name}: fetching {base.package} "
                     f"{base.version} from {base.archive} {base.suite}")
        _apt(base, work, "update")
        _apt(base, work, "download", f"{base.package}={base.version}")
        got = work / base.deb_name.replace(":", "%3a")
        if not got.exists():
            raise ZdinitError(f"base {base.name}: apt-get download left no "
                              f"{base.deb_name}")
        digest = _sha256(got)
        if digest != base.sha256:
            raise ZdinitError(
                f"base {base.name}: {base.deb_name} has sha256 {digest}, "
                f"not the pinned {base.sha256}; the archive changed it: "
                "check it and update zdinit/kernel/bases.py")
        os.replace(got, deb)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return deb


def pristine_tree(base):
    """base's tree, unpacked once from its checked .deb; a half-unpacked
    tree, or one from another .deb, is never used."""
    tree = cache.pristine_dir(base.package)
    if _stamped(tree, base.sha256):
        return tree
    deb = fetch_deb(base)
    cache.require_free_space(tree.parent, 2 << 30,
                             f"the {base.name} kernel source")
    tmp = tree.with_name(base.package + ".unpacking")
    if tree.exists() or tmp.exists():
        progress.say(f"base {base.name}: removing the tree of another "
                     f"package or an unfinished unpack in {tree.parent}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(tree, ignore_errors=True)
    tmp.mkdir(parents=True)
    progress.say(f"base {base.name}: unpacking {deb.name} into {tree}")
    fsys = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)],
                            stdout=subprocess.PIPE)
    member = subprocess.run(["tar", "-xO", base.tarball_member],
                            stdin=fsys.stdout, stdout=subprocess.PIPE)
    if fsys.wait() or member.returncode:
        raise ZdinitError(f"base {base.name}: {deb} has no "
                          f"{base.tarball_member}")
    subprocess.run(["tar", "xJf", "-", "-C", str(tmp)], input=member.stdout,
                   check=True)
    top = tmp / base.package
    if not (top / "Makefile").exists():
        raise ZdinitError(f"base {base.name}: {deb} does not contain "
                          f"{base.package}/Makefile")
    top.rename(tree)
    tmp.rmdir()
    (tree / _STAMP).write_text(base.sha256 + "\n")
    return tree


def series(directory):
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


def apply_patch(tree, patch, base, series=None):
    """Apply one patch, refusing cleanly (tree untouched) if it does not
    fit; series: the part of a stack it is in, which the refusal names."""
    # No .orig backups where a hunk lands at an offset (a variant that
    # leaves patches out): the tree holds only what the series makes.
    args = ["patch", "-p1", "-s", "-N", "--no-backup-if-mismatch", "-d",
            str(tree), "-i", str(patch)]
    dry = subprocess.run(args + ["--dry-run"], capture_output=True, text=True)
    if dry.returncode != 0:
        why = (dry.stdout + dry.stderr).strip().splitlines()
        raise ZdinitError(
            f"base {base.name}{f' series {series}' if series else ''}: "
            f"patch {patch.name} does not apply to "
            f"{base.package} {base.version}: "
            f"{why[0] if why else 'patch failed'}; rebase the series")
    subprocess.run(args, check=True, capture_output=True)


def clone_tree(name, base):
    """A fresh hard-linked copy of the pristine tree, not yet in place.

    GNU patch writes a new file and renames it over the old one, so
    patching the copy never changes the pristine tree behind the links.

    The tree's stamp and old build directory go first: a file the old
    tree had patched is back to its pristine, older mtime in the copy, so
    make would keep the objects built from the patched file.
    """
    pristine = pristine_tree(base)
    tree = cache.src_dir(name)
    # Unstamped first: a removal cut short must not leave a tree, or a
    # build directory beside it, that a stamp still vouches for.
    (tree / _STAMP).unlink(missing_ok=True)
    shutil.rmtree(cache.build_dir(name), ignore_errors=True)
    tmp = tree.with_name(tree.name + ".preparing")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(pristine), str(tmp)], check=True)
    (tmp / _STAMP).unlink()
    return tree, tmp


def variant_tree(name, patches, base):
    """Source tree of a variant: a copy of the pristine tree plus patches.

    The copy is rebuilt whenever the series changes, and only replaces the
    old tree once every patch applied.
    """
    tree = cache.src_dir(name)
    if _stamped(tree, _digest(pristine_tree(base), patches)):
        return tree
    tree, tmp = clone_tree(name, base)
    progress.say(f"applying {len(patches)} patches for '{name}'")
    try:
        for patch in patches:
            apply_patch(tmp, patch, base)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(tree, ignore_errors=True)
    os.rename(tmp, tree)
    mark_variant_tree(tree, patches, base)
    return tree


def mark_variant_tree(tree, patches, base):
    """Stamp a clone of base's pristine tree to which patches, all of them
    and in order, were applied: variant_tree() takes it as made."""
    (tree / _STAMP).write_text(_digest(pristine_tree(base), patches) + "\n")
