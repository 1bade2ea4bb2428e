"""Where zdinit keeps what outlives a checkout: sources, builds, ccache.

Everything lives under one directory, ``$ZDINIT_CACHE`` or
``~/.cache/zdinit``, so CI can keep it between runs and a fresh clone reuses
it.  Layout::

    src/linux-source-6.12/   pristine Debian tree (never modified)
    src/<variant>/           hard-linked copy with the series applied
    build/<variant>/         O= output directory of each kernel variant
    ccache/                  compiler cache shared by every variant
    images/                  NVDIMM backing files when /dev/shm is too small
"""
import os
import pathlib
import shutil

from zdinit.errors import ZdinitError


def cache_dir():
    root = os.environ.get("ZDINIT_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "zdinit")
    path = pathlib.Path(root).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def src_dir(name):
    return cache_dir() / "src" / name


def build_dir(name):
    return cache_dir() / "build" / name


def ccache_dir():
    return cache_dir() / "ccache"


def require_free_space(path, needed_bytes, what):
    """Fail before starting work that would run out of disk half-way."""
    path = pathlib.Path(path)
    probe = path if path.exists() else path.parent
    free = shutil.disk_usage(probe).free
    if free < needed_bytes:
        raise ZdinitError(
            f"not enough free space for {what} in {probe}: need "
            f"{needed_bytes / 2**30:.1f} GiB, have {free / 2**30:.1f} GiB "
            f"(free some space or set ZDINIT_CACHE elsewhere)")
