"""Where zdinit keeps what outlives a checkout: sources, builds, ccache.

Everything lives under one directory, ``$ZDINIT_CACHE`` or
``~/.cache/zdinit``, so CI can keep it between runs and a fresh clone reuses
it.  Layout::

    pristine/linux-source-6.12/  the Debian tree as unpacked (never modified)
    work/<variant>/linux/        hard-linked copy, the variant's patches applied
    work/<variant>/build/        its O= output directory
    ccache/                      compiler cache shared by every variant

Every variant has the same shape, so the relative path from a build
directory to its sources is always ../linux, and ccache (with CCACHE_BASEDIR
at the cache root) hits across variants for every unchanged file.
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


def pristine_dir(name):
    return cache_dir() / "pristine" / name


def src_dir(variant):
    return cache_dir() / "work" / variant / "linux"


def build_dir(variant):
    return cache_dir() / "work" / variant / "build"


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
