"""Debian packages zdinit needs, installed idempotently with apt."""
import os
import shutil
import subprocess

from zdinit import progress
from zdinit.errors import ZdinitError

# Kernel build, guest userspace, QEMU, and the report's plot and tests.
PACKAGES = [
    "build-essential", "bc", "bison", "flex",
    "libelf-dev", "libssl-dev", "cpio", "kmod", "xz-utils", "lz4", "ccache",
    "patch", "perl", "qemu-system-x86", "busybox-static", "ndctl",
    "e2fsprogs",
    # The kernel's onlining selftests are bash scripts.
    "bash-static", "python3-matplotlib", "python3-pytest",
    # checkpatch.pl's SPDX check imports these.
    "python3-ply", "python3-git",
    # check-series builds the series for arm64 and boots it, and compiles
    # the series' C files for i386 (a small x86-64 KUnit kernel boots
    # under qemu-system-x86, above).
    "gcc-aarch64-linux-gnu", "gcc-i686-linux-gnu", "qemu-system-arm",
    # The KMSAN kernels (make test-full) build with clang.
    "clang",
]
# make lint's linter and type checker (zdinit/lint.py); make test runs it.
LINT_PACKAGES = ["python3-pyflakes", "python3-mypy"]
PACKAGES += LINT_PACKAGES


# The lab is native C; its plots are optional (offer_packages).
LAB_PACKAGES = ["gcc", "make", "libc6-dev"]
PLOT_PACKAGES = ["python3-matplotlib"]
# What the unit tests use: pytest, the lab (they build it, sanitized too)
# and the report's plot.
UNIT_PACKAGES = (["python3-pytest"] + LAB_PACKAGES + PLOT_PACKAGES
                 + LINT_PACKAGES)


def missing_packages(packages=PACKAGES):
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n"]
        + packages, capture_output=True, text=True).stdout
    installed = {line.split()[0] for line in out.splitlines()
                 if len(line.split()) > 1 and line.split()[1] == "ii"}
    return [p for p in packages if p not in installed]


def ensure_packages(packages=PACKAGES):
    if not shutil.which("dpkg-query"):
        raise ZdinitError("zdinit needs a Debian system (dpkg-query not found)")
    missing = missing_packages(packages)
    if not missing:
        return
    if os.geteuid() != 0:
        raise ZdinitError(
            "missing packages: " + " ".join(missing)
            + "; run as root or: sudo apt-get install " + " ".join(missing))
    progress.say("apt: installing " + " ".join(missing))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-q"],
                ["apt-get", "install", "-y", "-q", "--no-install-recommends"]
                + missing):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:]
            raise ZdinitError(f"{' '.join(cmd[:2])} failed: "
                              f"{tail[0] if tail else 'no output'}")
    still = missing_packages(packages)
    if still:
        raise ZdinitError("apt did not install: " + " ".join(still))


def offer_packages(packages, what):
    """Install packages that only add to a run (a plot): if they cannot be
    had, say what is lost and go on."""
    try:
        ensure_packages(packages)
    except ZdinitError as err:
        progress.say(f"without {what}: {err}")


def require_tool(name, package):
    path = shutil.which(name)
    if not path:
        raise ZdinitError(f"'{name}' not found; install the Debian package "
                          f"'{package}' (or run 'python3 -m zdinit setup')")
    return path
