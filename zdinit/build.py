"""Configure and build kernel variants and the project's guest module."""
import dataclasses
import hashlib
import os
import pathlib
import shutil
import subprocess

from zdinit import cache, deps, kconfig, proc, progress, source
from zdinit.errors import ZdinitError

MODULE_SRC = pathlib.Path(__file__).resolve().parent.parent / "module"

# A variant is a kconfig fragment list plus the series applied (None: none).
VARIANTS = {
    "base": (["zdinit"], None),
    "patched": (["zdinit", "series"], source.PATCHES),
    # The series without patch 7, whose template copy reads the template
    # again for every struct page: patch 7 alone, for ZONE_DEVICE (the
    # onlining template path, written on top of it, is left out too).
    "patched-memcpy": (["zdinit", "series"], source.MEMCPY_PATCHES),
    # Stock 6.12 plus patch 11 alone: onlining's breakdown without the
    # ZONE_DEVICE series (hotplug scenarios).
    "hotplug-base": (["zdinit"], source.HOTPLUG_PATCHES),
    # hotplug-base plus patch 12, to measure that patch alone.
    "hotplug-contig": (["zdinit"], source.HOTPLUG_CONTIG_PATCHES),
    # The series with the page_ref tracepoints, for the tracepoint guard.
    "trace": (["zdinit", "trace", "series"], source.PATCHES),
    # The series under KASAN, lockdep, DEBUG_VM and kmemleak.
    "debug": (["zdinit", "debug", "series"], source.PATCHES),
    # Huge-page clearing: stock 6.12 and the clear series, same config.
    "clear-base": (["zdinit", "clear"], None),
    "clear": (["zdinit", "clear"], source.CLEAR_PATCHES),
    "clear-broken": (["zdinit", "clear"], source.CLEAR_BROKEN_PATCHES),
    # The clear series under KASAN, lockdep, DEBUG_VM and kmemleak.
    "clear-debug": (["zdinit", "clear", "debug"], source.CLEAR_PATCHES),
    # The clear series under KMSAN (built with clang).
    "clear-kmsan": (["zdinit", "clear", "kmsan"], source.CLEAR_PATCHES),
}
# The KMSAN fragment; only clang can build it (KMSAN is a clang
# instrumentation), and it is the only fragment that needs clang.
KMSAN_FRAGMENT = "kmsan"
CLANG_FRAGMENTS = {KMSAN_FRAGMENT}


@dataclasses.dataclass
class Kernel:
    variant: str
    tree: pathlib.Path
    out: pathlib.Path
    bzimage: pathlib.Path
    module: pathlib.Path
    release: str
    build_s: float = 0.0


def make_env():
    """ccache shared across variant trees: paths relative to the cache root.

    Every variant tree has the same shape (work/<variant>/{linux,build}),
    so with CCACHE_BASEDIR the compiler sees the same relative paths in
    each.  Only kbuild's -fmacro-prefix-map=<absolute srctree>/= still
    names the tree; it cannot change the object, because ccache hands the
    compiler relative source paths that the absolute prefix never matches,
    so it is left out of the hash.
    """
    env = dict(os.environ)
    env.update(CCACHE_DIR=str(cache.ccache_dir()),
               CCACHE_BASEDIR=str(cache.require_lock()),
               CCACHE_NOHASHDIR="1",
               CCACHE_IGNOREOPTIONS="-fmacro-prefix-map=*",
               CCACHE_MAXSIZE=env.get("CCACHE_MAXSIZE", "10G"),
               KBUILD_BUILD_TIMESTAMP="2025-01-01",
               KBUILD_BUILD_USER="zdinit", KBUILD_BUILD_HOST="zdinit",
               LC_ALL="C")
    return env


def compiler(fragments):
    """The C compiler of a configuration: gcc unless a fragment needs clang."""
    return "clang" if CLANG_FRAGMENTS & set(fragments) else "gcc"


def has_kmsan(variant):
    return KMSAN_FRAGMENT in VARIANTS[variant][0]


def jobs():
    return str((os.cpu_count() or 1) + 1)


@dataclasses.dataclass(frozen=True)
class Arch:
    """Another architecture, built with a Debian cross compiler."""
    name: str
    cross_compile: str
    package: str
    image: str


def make_cmd(tree, out, *targets, arch=None, cc="gcc"):
    """cc names the native compiler; other architectures build with gcc."""
    cmd = ["make", "-C", str(tree), f"O={out}", f"-j{jobs()}"]
    if arch:
        cmd += [f"ARCH={arch.name}", f"CROSS_COMPILE={arch.cross_compile}",
                f"CC=ccache {arch.cross_compile}gcc"]
    else:
        cmd.append(f"CC=ccache {cc}")
    return cmd + list(targets)


def configure(tree, out, fragments, env, arch=None):
    """tinyconfig + fragments + olddefconfig, verified; redone on change."""
    paths = kconfig.fragment_paths(fragments)
    wanted = kconfig.requested(paths)
    key = hashlib.sha256(
        "".join(p.read_text() for p in paths).encode()
        + str(tree).encode() + str(arch).encode()).hexdigest()[:16]
    stamp = out / ".zdinit-config"
    if stamp.exists() and stamp.read_text().strip() == key and \
            (out / ".config").exists():
        return
    stamp.unlink(missing_ok=True)
    log = out / "config.log"
    cc = compiler(fragments)
    proc.run_logged(make_cmd(tree, out, "tinyconfig", arch=arch, cc=cc), log,
                    "tinyconfig", env=env)
    merge_env = dict(env, **({"ARCH": arch.name} if arch else {}))
    proc.run_logged([str(tree / "scripts/kconfig/merge_config.sh"), "-m",
                     "-O", str(out), str(out / ".config")]
                    + [str(p) for p in paths], out / "merge.log",
                    "merge_config", env=merge_env, cwd=tree)
    proc.run_logged(make_cmd(tree, out, "olddefconfig", arch=arch, cc=cc),
                    log, "olddefconfig", env=env)
    kconfig.verify(wanted, out / ".config")
    stamp.write_text(key + "\n")


def build_module(tree, out, env, cc):
    """Build module/ out of tree against this kernel, in its build dir."""
    mdir = out / "zdinit-module"
    shutil.rmtree(mdir, ignore_errors=True)
    shutil.copytree(MODULE_SRC, mdir)
    proc.run_logged(["make", "-C", str(tree), f"O={out}", f"CC=ccache {cc}",
                     f"M={mdir}", "modules"], out / "module.log",
                    "module build", env=env)
    return mdir / "zd_memremap.ko"


# In a build directory while a build runs there; removed only once the
# kernel and the module are built.
_BUILDING = ".zdinit-building"


def claim_build_dir(out):
    """Mark out as being built, first starting it afresh if the last build
    there did not finish: a make killed half-way can leave truncated
    objects newer than their sources, which the next make would trust."""
    marker = out / _BUILDING
    if marker.exists():
        progress.say(f"the last build in {out} did not finish; "
                     "starting that build directory afresh")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{os.getpid()}\n")
    return marker


def build_tree(name, tree, fragments, out=None):
    """Build bzImage, in-tree modules and the project module of one tree."""
    out = out or cache.build_dir(name)
    env = make_env()
    cache.require_free_space(cache.cache_dir(), 3 << 30, f"building {name}")
    building = claim_build_dir(out)
    configure(tree, out, fragments, env)
    cc = compiler(fragments)
    progress.say(f"building kernel '{name}' in {out}")
    took = proc.run_logged(make_cmd(tree, out, "bzImage", "modules", cc=cc),
                           out / "build.log", f"build {name}", env=env)
    progress.say(f"kernel '{name}' built in {took:.0f}s")
    module = build_module(tree, out, env, cc)
    release = subprocess.run(
        ["make", "-s", "-C", str(tree), f"O={out}", "kernelrelease"],
        capture_output=True, text=True, env=env).stdout.strip()
    building.unlink()
    return Kernel(name, tree, out, out / "arch/x86/boot/bzImage", module,
                  release, took)


def build(variant):
    if variant not in VARIANTS:
        raise ValueError(variant)
    fragments, series_dir = VARIANTS[variant]
    deps.require_tool("ccache", "ccache")
    if compiler(fragments) == "clang":
        deps.require_tool("clang", "clang")
    patches = source.series(series_dir) if series_dir else []
    if series_dir and not patches:
        raise ZdinitError(f"variant '{variant}' needs {series_dir}/series")
    tree = source.variant_tree(variant, patches)
    return build_tree(variant, tree, fragments)


def build_arch(name, tree, fragments, arch, targets, werror=False):
    """Cross-build make targets of tree for arch; return the build dir."""
    deps.require_tool(f"{arch.cross_compile}gcc", arch.package)
    out = cache.build_dir(name)
    env = make_env()
    cache.require_free_space(cache.cache_dir(), 2 << 30, f"building {name}")
    building = claim_build_dir(out)
    configure(tree, out, fragments, env, arch=arch)
    progress.say(f"building {' '.join(targets)} of '{name}' for {arch.name}"
                 f" in {out}")
    cmd = make_cmd(tree, out, *targets, arch=arch)
    if werror:
        cmd.append("KCFLAGS=-Werror")
    took = proc.run_logged(cmd, out / "build.log", f"build {name}", env=env)
    progress.say(f"'{name}' built in {took:.0f}s")
    building.unlink()
    return out
