"""The whole series on other targets: other architectures, and a small
x86-64 kernel that only runs KUnit.

arm64 is built and booted under qemu-system-aarch64 (TCG), where the
series' KUnit suite runs at boot: DEVICE_PRIVATE and generic ranges with
every strategy, so a second architecture runs the template path and the
generic memcpy_nontemporal().  x86_64 is the same suite in a kernel of little
more than tinyconfig: a cold build of a fraction of the harness's
configuration, for a base whose series is built and booted but not
benchmarked.  i386 has no ZONE_DEVICE, so all the series can add there
is what the files it changes compile outside ZONE_DEVICE (the generic
memcpy_nontemporal() of <linux/string.h>): the directories of those files
are compiled, with warnings as errors, and the files the i386
configuration builds are named.  Nothing is linked: a whole i386 kernel
would add a cold build, to link code that the series' i386 objects call
nowhere new.
"""
import dataclasses
import pathlib
import re
import shutil
import subprocess

from zdinit import cache, deps, progress
from zdinit.kernel import build, kunit
from zdinit.errors import ZdinitError


@dataclasses.dataclass(frozen=True)
class KunitBoot:
    """How a target's kernel is booted under TCG to run KUnit."""
    qemu: str
    package: str
    machine: tuple      # QEMU's machine and CPU options
    console: str
    # How the kernel ends the run so that QEMU (with -no-reboot) exits:
    # x86 without ACPI cannot power off, but a reboot stops QEMU there.
    shutdown: str


@dataclasses.dataclass(frozen=True)
class CrossTarget:
    """An architecture the ZONE_DEVICE series is built for, and how."""
    arch: build.Arch
    fragments: tuple
    # None: only the directories of the C files the series changes are
    # compiled; else the whole kernel is built and booted to run KUnit.
    boot: KunitBoot | None
    what: str           # for --help


TARGETS = {t.arch.name: t for t in (
    CrossTarget(
        build.Arch("arm64", "aarch64-linux-gnu-", "gcc-aarch64-linux-gnu",
                   "arch/arm64/boot/Image"), ("arm64",),
        KunitBoot("qemu-system-aarch64", "qemu-system-arm",
                  ("-M", "virt", "-cpu", "max"), "ttyAMA0", "poweroff"),
        "built and booted, KUnit"),
    CrossTarget(
        build.Arch("x86_64", "", "build-essential", "arch/x86/boot/bzImage"),
        ("kunit-x86",),
        KunitBoot("qemu-system-x86_64", "qemu-system-x86", ("-cpu", "max"),
                  "ttyS0", "reboot"),
        "a small KUnit kernel, about half the objects of the harness's, "
        "built and booted; one CPU"),
    CrossTarget(
        build.Arch("i386", "i686-linux-gnu-", "gcc-i686-linux-gnu",
                   "arch/x86/boot/bzImage"), ("i386",), None,
        "the changed C files' directories compiled"),
)}
# What check-series builds beyond the prefixes unless told otherwise.
DEFAULT_TARGETS = ("arm64", "i386")


def boot_kunit(boot, tree, image, suites, log_path, timeout_s=900):
    """Boot image; the kernel runs KUnit, then ends the run.  Returns
    kunit.py's summary line of suites."""
    deps.require_tool(boot.qemu, boot.package)
    cmd = [boot.qemu, *boot.machine, "-smp", "2", "-m", "4096",
           "-nographic", "-no-reboot", "-monitor", "none", "-net", "none",
           "-kernel", str(image), "-append",
           f"console={boot.console} panic=-1 kunit.enable=1 "
           f"kunit_shutdown={boot.shutdown}"]
    with open(log_path, "w") as log:
        try:
            subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=log,
                           stderr=subprocess.STDOUT, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ZdinitError(f"KUnit boot under {boot.qemu} timed out after "
                              f"{timeout_s}s; console log {log_path}") from None
    return kunit.verdict(tree, log_path, suites)


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


def check(tree, patches, base, targets):
    """Build tree (patches, the whole series, applied to base) for each
    target named; boot those that boot.  Returns one line per target."""
    lines = []
    for target in (TARGETS[name] for name in targets):
        name = build.work_name(f"cross-{target.arch.name}", base)
        # tree was made afresh (source.clone_tree()), with files older than
        # the objects of the last build here: make would keep those.
        shutil.rmtree(cache.build_dir(name), ignore_errors=True)
        if not target.boot:
            lines.append(compile_changed(name, tree, target, patches,
                                         base))
            continue
        image = build.build_arch(name, tree, list(target.fragments), base,
                                 target.arch,
                                 [pathlib.Path(target.arch.image).name]
                                 ) / target.arch.image
        progress.say(f"booting the {target.arch.name} kernel: KUnit")
        summary = boot_kunit(
            target.boot, tree, image, base.kunit_suites,
            cache.build_dir(name) / "kunit-console.log")
        lines.append(f"{target.arch.name}: built {image.name}; "
                     f"{kunit.label(base.kunit_suites)}: {summary}")
    return lines
