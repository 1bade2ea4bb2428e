"""Where zdinit keeps what outlives a checkout: sources, builds, ccache.

Everything lives under one directory, ``$ZDINIT_CACHE`` or
``~/.cache/zdinit``, so CI can keep it between runs and a fresh clone reuses
it.  Layout::

    debs/                        each base's Debian .deb, checked against its pin
    pristine/linux-source-<X>/   a base's tree as unpacked (never modified)
    work/<base>/<variant>/linux/ hard-linked copy, the variant's patches applied
    work/<base>/<variant>/build/ its O= output directory
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


# What moving the cache costs, said wherever a message suggests it: the
# sources, builds and ccache stay behind in the old one.
ANOTHER_CACHE = ("it starts empty: the kernel sources are fetched again "
                 "and every kernel is rebuilt cold")


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


# The lock's file descriptor, for zdinit commands that a locked run starts
# as children (make test's end-to-end tests): they run under its lock
# instead of being refused by it.
LOCK_FD_ENV = "ZDINIT_LOCK_FD"
# Lock file path -> the descriptor this process holds it through.
_held = {}


def _same_file(fd, path):
    try:
        st, want = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino)


def _inherited(path):
    """The lock of a parent run, passed down by descriptor, if this is
    one of its children.  flock() on the parent's own open file succeeds
    while the parent holds it: the lock belongs to that open file, not to
    a process.  A process that only inherited the variable (its
    descriptors closed) opens the file afresh and is refused as usual."""
    try:
        fd = int(os.environ.get(LOCK_FD_ENV, ""))
    except ValueError:
        return None
    if not _same_file(fd, path):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return None
    return fd


@contextlib.contextmanager
def _nested(path, fd):
    """Inside a run that holds the lock: neither take nor drop it."""
    fresh = path not in _held
    _held[path] = fd
    try:
        yield
    finally:
        if fresh:
            del _held[path]


@contextlib.contextmanager
def lock(command):
    """Hold the cache for one zdinit run, or refuse if a run holds it.

    flock() because the kernel drops it when its holder dies, however it
    dies: a killed run never leaves the cache locked.  The file itself
    stays (unlinking it would let two runs lock two different files); it
    names the holder for the refusal message.  The descriptor is left
    open across exec, and named in $ZDINIT_LOCK_FD, for the children a
    run starts with pass_fds=held_fds(): they share its lock.
    """
    root = cache_dir()
    path = str(root / "lock")
    fd = _held.get(path)
    if fd is None:
        fd = _inherited(path)
    if fd is not None:
        with _nested(path, fd):
            yield
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
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
                f"directory; {ANOTHER_CACHE}") from None
        since = datetime.datetime.now(datetime.timezone.utc)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"PID {os.getpid()} ({command}, since "
                  f"{since:%Y-%m-%d %H:%M:%S} UTC)\n".encode(), 0)
        os.set_inheritable(fd, True)
        outer = os.environ.get(LOCK_FD_ENV)
        os.environ[LOCK_FD_ENV] = str(fd)
        try:
            with _nested(path, fd):
                yield
        finally:
            if outer is None:
                os.environ.pop(LOCK_FD_ENV, None)
            else:
                os.environ[LOCK_FD_ENV] = outer
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def held_fds():
    """pass_fds for a zdinit command started as part of this run."""
    return tuple(_held.values())


def require_lock():
    """Every path into the cache goes through here: nothing reads or
    writes a tree or a build without the run's lock, so a second run can
    never build beside it."""
    root = cache_dir()
    if str(root / "lock") not in _held:
        raise ZdinitError(f"internal error: the cache {root} is used "
                          "without holding its lock")
    return root


def pristine_dir(name):
    return require_lock() / "pristine" / name


def src_dir(variant):
    return require_lock() / "work" / variant / "linux"


def build_dir(variant):
    return require_lock() / "work" / variant / "build"


def ccache_dir():
    return require_lock() / "ccache"


def images_dir():
    return require_lock() / "images"


def require_free_space(path, needed_bytes, what):
    """Fail before starting work that would run out of disk half-way."""
    path = pathlib.Path(path)
    probe = path if path.exists() else path.parent
    free = shutil.disk_usage(probe).free
    if free < needed_bytes:
        raise ZdinitError(
            f"not enough free space for {what} in {probe}: need "
            f"{needed_bytes / 2**30:.1f} GiB, have {free / 2**30:.1f} GiB "
            f"(free some space or set ZDINIT_CACHE elsewhere; "
            f"{ANOTHER_CACHE})")
