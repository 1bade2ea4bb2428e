"""The series on other architectures, with Debian's cross compilers.

arm64 is built and booted under qemu-system-aarch64 (TCG), where the
series' KUnit suite runs at boot: DEVICE_PRIVATE and generic ranges with
every strategy, so a second architecture runs the template path and the
generic memfill_nt().  i386 has no ZONE_DEVICE: building it shows that
what the series adds outside ZONE_DEVICE compiles there.
"""
import dataclasses
import shutil
import subprocess

from zdinit import build, cache, deps, kunit, progress
from zdinit.errors import ZdinitError

QEMU_ARM64 = "qemu-system-aarch64"


@dataclasses.dataclass(frozen=True)
class Target:
    arch: build.Arch
    fragments: tuple
    boots: bool


TARGETS = (
    Target(build.Arch("arm64", "aarch64-linux-gnu-", "gcc-aarch64-linux-gnu",
                      "arch/arm64/boot/Image"), ("arm64",), True),
    Target(build.Arch("i386", "i686-linux-gnu-", "gcc-i686-linux-gnu",
                      "arch/x86/boot/bzImage"), ("i386",), False),
)


def boot_kunit_arm64(tree, image, log_path, timeout_s=900):
    """Boot image on the virt machine; the kernel runs KUnit, then powers
    off.  Returns kunit.py's summary line."""
    deps.require_tool(QEMU_ARM64, "qemu-system-arm")
    cmd = [QEMU_ARM64, "-M", "virt", "-cpu", "max", "-smp", "2", "-m", "4096",
           "-nographic", "-no-reboot", "-monitor", "none", "-net", "none",
           "-kernel", str(image), "-append",
           "console=ttyAMA0 panic=-1 kunit.enable=1 kunit_shutdown=poweroff"]
    with open(log_path, "w") as log:
        try:
            subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=log,
                           stderr=subprocess.STDOUT, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ZdinitError(f"arm64 KUnit boot timed out after {timeout_s}s;"
                              f" console log {log_path}") from None
    return kunit.verdict(tree, log_path)


def check(tree):
    """Build tree (the whole series applied) for every target; boot arm64.
    Returns one line per target."""
    lines = []
    for target in TARGETS:
        name = f"cross-{target.arch.name}"
        # tree was made afresh (source.clone_tree()), with files older than
        # the objects of the last build here: make would keep those.
        shutil.rmtree(cache.build_dir(name), ignore_errors=True)
        image = build.build_arch(name, tree, list(target.fragments),
                                 target.arch)
        line = f"{target.arch.name}: built {image.name}"
        if target.boots:
            progress.say(f"booting the {target.arch.name} kernel: KUnit")
            summary = boot_kunit_arm64(
                tree, image, cache.build_dir(name) / "kunit-console.log")
            line += f"; KUnit {kunit.SUITE}: {summary}"
        lines.append(line)
    return lines
