"""Guest userspace: busybox, ndctl with its libraries, our scripts."""
import os
import pathlib
import shutil
import subprocess
import tempfile

from zdinit import deps, paths
from zdinit.errors import ZdinitError
from zdinit.vm import trace

TOOLS = {"busybox": "busybox-static", "ndctl": "ndctl",
         "mkfs.ext4": "e2fsprogs", "bash-static": "bash-static"}
DYNAMIC = ("ndctl", "mkfs.ext4")


def shared_libraries(binary):
    """Absolute paths of every library ldd resolves for binary."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if "not a dynamic executable" in out.stdout + out.stderr:
        return []
    libs = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if "=>" in parts:
            target = parts[parts.index("=>") + 1]
            if target == "not":
                raise ZdinitError(f"{binary}: library {parts[0]} not found")
            libs.append(target)
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])  # the dynamic loader itself
    return libs


def _copy(src, root):
    dst = root / src.lstrip("/")
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(src), dst)


# The kernel's own selftests the safety checks run, as (binary, source).
SELFTESTS = {"hmm-tests": "hmm-tests.c", "gup_test": "gup_test.c"}
# Its hugetlb and THP selftests that run in the guest (guest/clear.sh),
# by the names of every base: 7.3 has hugetlb-mmap and hugetlb-mremap
# where 6.12 has hugepage-mmap, hugepage-mremap and map_hugetlb.  A kernel
# runs those its tree has (huge_selftests()).
HUGE_SELFTESTS = ("map_hugetlb", "hugepage-mmap", "hugepage-mremap",
                  "hugetlb-mmap", "hugetlb-mremap", "hugetlb-madvise",
                  "hugetlb_fault_after_madv", "split_huge_page_test", "cow")
SELFTESTS.update({name: f"{name}.c" for name in HUGE_SELFTESTS})
# The helpers the mm selftests' Makefile links into every program, as
# each base names them (thp_settings.c became hugepage_settings.c);
# whichever the tree has are linked.
SELFTEST_HELPERS = ("vm_util.c", "thp_settings.c", "hugepage_settings.c")


def huge_selftests(tree):
    """The HUGE_SELFTESTS a kernel tree has."""
    mm = tree / "tools/testing/selftests/mm"
    return tuple(name for name in HUGE_SELFTESTS
                 if (mm / SELFTESTS[name]).exists())


# The kernel's memory onlining selftests (guest/onlining-selftests.sh),
# paths under tools/testing/selftests/ kept, so that a script finds the
# kselftest helpers it sources beside it.  dax-kmem-hotplug.sh is new in
# 7.3: a tree without it runs the rest.
ONLINING_SELFTESTS = ("memory-hotplug/mem-on-off-test.sh",
                      "dax/dax-kmem-hotplug.sh")
KSELFTEST_HELPERS = ("kselftest/ktap_helpers.sh",)


def add_onlining_selftests(tree, root):
    """The ONLINING_SELFTESTS tree has, with their helpers, in
    /zdinit/kselftests."""
    selftests = tree / "tools/testing/selftests"
    wanted = [name for name in ONLINING_SELFTESTS
              if (selftests / name).exists()]
    if ONLINING_SELFTESTS[0] not in wanted:
        raise ZdinitError(f"{selftests / ONLINING_SELFTESTS[0]} missing: "
                          "every base has it")
    for name in wanted + list(KSELFTEST_HELPERS):
        dest = root / "zdinit/kselftests" / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(selftests / name, dest)
        os.chmod(dest, 0o755)


def add_kernel_selftests(kernel, root):
    """hmm-tests and gup_test built from the kernel's tree against its own
    uapi headers, statically, plus test_hmm.ko."""
    module = kernel.out / "lib" / "test_hmm.ko"
    if not module.exists():
        raise ZdinitError(f"{module} missing: the kconfig fragment must set "
                          "CONFIG_TEST_HMM=m")
    shutil.copy2(module, root / "zdinit/test_hmm.ko")
    tree = kernel.tree
    headers = subprocess.run(["make", "-s", "-C", str(tree), f"O={kernel.out}",
                              "headers"], capture_output=True, text=True)
    if headers.returncode:
        raise ZdinitError(f"make headers failed: {headers.stderr.strip()[-300:]}")
    mm = tree / "tools/testing/selftests/mm"
    # cow.c includes the local_config.h (local_config.h_gen since 7.x) the
    # selftests' Makefile generates; an empty one means built without
    # liburing.
    local_config = root.parent / "selftests-config"
    local_config.mkdir(exist_ok=True)
    for name in ("local_config.h", "local_config.h_gen"):
        (local_config / name).write_text("")
    helpers = [str(mm / name) for name in SELFTEST_HELPERS
               if (mm / name).exists()]
    for binary, source in SELFTESTS.items():
        # Tests renamed or merged since a base are missing from its tree.
        if binary in HUGE_SELFTESTS and binary not in huge_selftests(tree):
            continue
        proc = subprocess.run(
            ["gcc", "-static", "-O2", "-isystem", str(kernel.out / "usr/include"),
             f"-I{tree}/tools/testing/selftests", f"-I{tree}", f"-I{local_config}",
             "-o", str(root / "zdinit" / binary), str(mm / source)]
            + helpers + ["-lpthread"],
            capture_output=True, text=True)
        if proc.returncode:
            raise ZdinitError(f"building the kernel's {binary} failed: "
                              f"{proc.stderr.strip()[-300:]}")


# Scripts the guest runs: the dispatcher guest/init runs, then the files
# it sources, in its order (common.sh, the helpers, first; then each
# family's); and the guest's C tools, from guest/<tool>.c with the
# libraries each links.
DISPATCHER = "scenario.sh"
GUEST_SCRIPTS = (DISPATCHER, "common.sh", "trace.sh", "rebind.sh", "safety.sh",
                 "clear.sh", "hotplug.sh", "ndctl.sh",
                 "onlining-selftests.sh", "store-rule.sh")
GUEST_TOOLS = {"zdcheck": [], "zdclear": ["-lpthread"], "zdkmsg": [],
               "zdonline": []}
# Kernel modules the guest loads itself, from the kernel's build directory.
GUEST_MODULES = {"virtio_mem.ko": "drivers/virtio/virtio_mem.ko"}


def build_guest_tool(tool, libs, dest):
    """Static, so it needs no libraries in the guest."""
    proc = subprocess.run(["gcc", "-static", "-O2", "-Wall", "-o", str(dest),
                           str(paths.GUEST / f"{tool}.c")] + libs,
                          capture_output=True, text=True)
    if proc.returncode:
        raise ZdinitError(f"building guest/{tool}.c failed: "
                          f"{proc.stderr.strip()[-300:]}")


def build(kernel, dest, tools=None):
    """Write a gzip'd newc cpio for kernel to dest, atomically.  tools:
    {name: path} of static binaries built elsewhere, put in /zdinit."""
    binaries = {name: deps.require_tool(name, pkg) for name, pkg in TOOLS.items()}
    with tempfile.TemporaryDirectory(prefix="zdinit-initramfs-") as tmp:
        root = pathlib.Path(tmp) / "root"
        for d in ("bin", "sbin", "proc", "sys", "dev", "tmp", "run", "etc",
                  "zdinit", "lib/modules"):
            (root / d).mkdir(parents=True, exist_ok=True)
        shutil.copy2(binaries["busybox"], root / "bin/busybox")
        shutil.copy2(binaries["bash-static"], root / "bin/bash")
        for name in DYNAMIC:
            _copy(binaries[name], root)
            shutil.move(str(root / binaries[name].lstrip("/")),
                        root / "bin" / name)
            for lib in shared_libraries(binaries[name]):
                _copy(lib, root)
        shutil.copy2(paths.GUEST / "init", root / "init")
        for script in GUEST_SCRIPTS:
            shutil.copy2(paths.GUEST / script, root / "zdinit" / script)
        (root / "zdinit" / "probes").write_text(trace.probes_file())
        for module in kernel.modules:
            shutil.copy2(module, root / "zdinit" / module.name)
        for name, path in GUEST_MODULES.items():
            if not (kernel.out / path).exists():
                raise ZdinitError(f"{kernel.out / path} missing: the kconfig "
                                  "fragment must build it as a module")
            shutil.copy2(kernel.out / path, root / "zdinit" / name)
        for tool, libs in GUEST_TOOLS.items():
            build_guest_tool(tool, libs, root / "zdinit" / tool)
        for tool, path in (tools or {}).items():
            shutil.copy2(path, root / "zdinit" / tool)
        add_kernel_selftests(kernel, root)
        add_onlining_selftests(kernel.tree, root)
        for script in ("init", f"zdinit/{DISPATCHER}"):
            os.chmod(root / script, 0o755)
        tmp_out = pathlib.Path(str(dest) + ".tmp")
        with open(tmp_out, "wb") as fh:
            find = subprocess.Popen(["find", "."], cwd=root,
                                    stdout=subprocess.PIPE)
            cpio = subprocess.Popen(["cpio", "-o", "-H", "newc", "-R",
                                     "0:0", "--quiet"], cwd=root,
                                    stdin=find.stdout, stdout=subprocess.PIPE)
            gz = subprocess.run(["gzip", "-1"], stdin=cpio.stdout, stdout=fh)
            if find.wait() or cpio.wait() or gz.returncode:
                tmp_out.unlink(missing_ok=True)
                raise ZdinitError("building the initramfs failed (find/cpio/gzip)")
        os.replace(tmp_out, dest)
    return dest
