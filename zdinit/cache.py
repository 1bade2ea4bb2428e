"""Where zdinit keeps what outlives a checkout: sources, builds, ccache.

Everything lives under one directory, ``$ZDINIT_CACHE`` or
``~/.cache/zdinit``, so CI can keep it between runs and a fresh clone reuses
it.  Layout::

    pristine/linux-source-6.12/  the Debian tree as unpacked (never modified)
    work/<variant>/linux/        hard-linked copy, the variant's patches applied
    work/<variant>/build/        its O= output directory
    ccache/                      compiler cache shared by every variant
    images/                      NVDIMM backing files when /dev/shm is too small
    lock                         held by the zdinit run writing here, if any

Every variant has the same shape, so the relative path from a build
directory to its sources is always ../linux, and ccache (with CCACHE_BASEDIR
at the cache root) hits across variants for every unchanged file.
"""
import contextlib
import datetime
import fcntl
import os
import pathlib
import shutil

from zdinit.errors import ZdinitError


def unusable(path, err):
    return ZdinitError(f"cannot use {path} as the cache: {err.strerror} "
                       "(set ZDINIT_CACHE to a writable directory)")


def cache_dir():
    root = os.environ.get("ZDINIT_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "zdinit")
    path = pathlib.Path(root).resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise unusable(path, err)
    return path


@contextlib.contextmanager
def lock(command):
    """Hold the cache for one zdinit command, or refuse if a run holds it.

    flock() because the kernel drops it when its holder dies, however it
    dies: a killed run never leaves the cache locked.  The file itself
    stays (unlinking it would let two runs lock two different files); it
    names the holder for the refusal message.
    """
    root = cache_dir()
    try:
        fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise unusable(root, err)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            raise ZdinitError(
                f"the cache {root} is in use by {holder or 'another run'}; "
                "wait for it to finish or set ZDINIT_CACHE to another "
                "directory") from None
        since = datetime.datetime.now(datetime.timezone.utc)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"PID {os.getpid()} ({command}, since "
                  f"{since:%Y-%m-%d %H:%M:%S} UTC)\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)


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
