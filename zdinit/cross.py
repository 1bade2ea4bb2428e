"""The series on other architectures, with Debian's cross compilers.

arm64 is built and booted under qemu-system-aarch64 (TCG), where the
series' KUnit suite runs at boot: DEVICE_PRIVATE and generic ranges with
every strategy, so a second architecture runs the template path and the
generic memfill_nt().  i386 has no ZONE_DEVICE, so all the series can add
there is what the files it changes compile outside ZONE_DEVICE (the
generic memfill_nt() included by mm/mm_init.c): the directories of those
files are compiled, with warnings as errors, and the files the i386
configuration builds are named.  Nothing is linked: a whole i386 kernel
would add a cold build to CI, to link code that the series' i386 objects
call nowhere new.
"""
import dataclasses
import pathlib
import re
import shutil
import subprocess

from zdinit import build, cache, deps, kunit, progress
from zdinit.errors import ZdinitError

QEMU_ARM64 = "qemu-system-aarch64"


@dataclasses.dataclass(frozen=True)
class Target:
    arch: build.Arch
    fragments: tuple
    # The whole kernel, booted to run KUnit; else only the directories of
    # the C files the series changes.
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


# "+++ b/<path>", maybe followed by a tab and a timestamp.
_CHANGED_C_FILE = re.compile(r"^\+\+\+ b/(\S+\.c)(?:\s|$)", re.M)


def changed_c_files(patches):
    files = set()
    for patch in patches:
        files.update(_CHANGED_C_FILE.findall(patch.read_text()))
    return sorted(files)


def changed_dirs(files):
    """Kbuild directory targets ('mm/') of files."""
    return sorted({f"{pathlib.PurePosixPath(f).parent}/" for f in files})


def compile_changed(name, tree, target, patches, base):
    """Compile, warnings as errors, the directories of the C files patches
    change; return which of those files the configuration builds."""
    files = changed_c_files(patches)
    if not files:
        raise ZdinitError("the series changes no C file to compile for "
                          f"{target.arch.name}")
    out = build.build_arch(name, tree, list(target.fragments), base,
                           target.arch, changed_dirs(files), werror=True)
    built = [f for f in files if (out / f).with_suffix(".o").exists()]
    if not built:
        raise ZdinitError(f"{target.arch.name}: its configuration builds "
                          "none of the C files the series changes: "
                          + ", ".join(files))
    line = f"{target.arch.name}: compiled {', '.join(built)} with -Werror"
    skipped = [f for f in files if f not in built]
    if skipped:
        line += f"; not in its configuration: {', '.join(skipped)}"
    return line


def check(tree, patches, base):
    """Build tree (patches, the whole series, applied to base) for every
    target; boot arm64.  Returns one line per target."""
    lines = []
    for target in TARGETS:
        name = build.work_name(f"cross-{target.arch.name}", base)
        # tree was made afresh (source.clone_tree()), with files older than
        # the objects of the last build here: make would keep those.
        shutil.rmtree(cache.build_dir(name), ignore_errors=True)
        if not target.boots:
            lines.append(compile_changed(name, tree, target, patches,
                                         base))
            continue
        image = build.build_arch(name, tree, list(target.fragments), base,
                                 target.arch,
                                 [pathlib.Path(target.arch.image).name]
                                 ) / target.arch.image
        progress.say(f"booting the {target.arch.name} kernel: KUnit")
        summary = boot_kunit_arm64(
            tree, image, cache.build_dir(name) / "kunit-console.log")
        lines.append(f"{target.arch.name}: built {image.name}; "
                     f"{kunit.label()}: {summary}")
    return lines
