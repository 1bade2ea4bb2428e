"""Configure and build kernel variants and the project's guest module."""
import dataclasses
import hashlib
import os
import pathlib
import shutil
import subprocess

from zdinit import cache, deps, paths, proc, progress
from zdinit.kernel import bases, kconfig, source
from zdinit.errors import UsageError, ZdinitError


MODULE_SRC = paths.ROOT / "module"


@dataclasses.dataclass(frozen=True)
class Variant:
    """A kernel made from a base: kconfig fragments plus a selection of
    one of the base's series (none: stock), all of its parts in order.
    Patches are named by their subject as in the file name, without the
    number, so one entry serves every base whose series has them, however
    the base cuts it into parts."""
    fragments: tuple
    series: str | None = None   # None: stock; else one of the base's
                                # stacks (bases.Base.stacks): "zone-device"
                                # (ZONE_DEVICE and onlining) or "clear"
                                # (huge-page clearing)
    parts: tuple = ()           # these parts of the series' stack alone
    only: tuple = ()            # these patches of the series alone
    extra: tuple = ()           # patch files after the series: paths from
                                # the project's root, {base} the base's name
    only_on: tuple = ()         # the bases it is for, where not every base
                                # whose series has its patches

    def selects(self, patch_subject):
        """Whether the variant applies the series' patch of that subject."""
        return (self.series is not None
                and (not self.only or patch_subject in self.only))


# Patches named by more than one variant or module.
TIMING = "mm-memory_hotplug-time-the-parts-of-online_pages-wit"
# How the series decides a zone's contiguity when onlining: it counts the
# pages, the approach upstream queued for 7.4; the timing patch applies on
# top of it.
CONTIGUITY_COUNT = "mm-memory_hotplug-decide-zone-contiguity-from-a-coun"
# The debugfs check of zone->contiguous against the walk (not for
# merging), which with_contiguity_check() adds to a hotplug kernel.
CONTIGUITY_CHECK = "patches/linux-{base}-contiguity-check.patch"

# The deliberate breakages of the onlining template path, each a patch in
# tests/data/onlining-mutants/<name>/: every struct page of a section in
# the other zone, the second pageblock of each section left unset, and
# the list head's prev left pointing at the template.
ONLINING_MUTANTS = ("wrong-zone", "skipped-pageblock", "wrong-lru")

VARIANTS = {
    "stock": Variant(("zdinit", "tracing")),
    "patched": Variant(("zdinit", "tracing", "series"), "zone-device"),
    # What upstream queued for 7.4, on the base: the template path with its
    # streaming copy, on one thread, and the contiguity count; timed by
    # the kernel's own pr_debug line, with no knob and no kit.
    "upstream": Variant(("zdinit", "tracing"), "zone-device",
                        parts=("templates", "contiguity")),
    # The series with its earlier fan-out, work items of its own instead
    # of padata_do_multithreaded(): to measure the two against each
    # other.  Not for merging.
    "patched-workqueue": Variant(("zdinit", "tracing", "series"), "zone-device", extra=(
        "patches/linux-{base}-workqueue-fan-out.patch",), only_on=("7.3",)),
    # Onlining as stock does it, timed: the series' hotplug timing patch
    # on the contiguity count (upstream's 7.4 method, the base the
    # onlining templates build on).  Its lines time onlining by default,
    # where kprobe events would cost (scenarios.FAMILY_TIMING).
    "hotplug-stock": Variant(("zdinit", "tracing"), "zone-device",
                             only=(CONTIGUITY_COUNT, TIMING)),
    # The series with the page_ref tracepoints, for the tracepoint guard.
    "trace": Variant(("zdinit", "trace", "series"), "zone-device"),
    # The series under KASAN, lockdep, DEBUG_VM and kmemleak.
    "debug": Variant(("zdinit", "debug", "series"), "zone-device"),
    # The series with DEBUG_VM's struct page poisoning and the pfn walkers
    # it changes built in, for its memmap built on demand with the
    # background build held back (safety's on-demand-held).
    "held": Variant(("zdinit", "held", "series"), "zone-device",
                    only_on=("7.3",)),
    # The series with its onlining template path broken on purpose, one
    # way each (ONLINING_MUTANTS), for the test of what the kernel's
    # onlining selftests and the memmap equality check each catch.
    **{f"onlining-{name}": Variant(("zdinit", "series"), "zone-device", extra=(
        f"tests/data/onlining-mutants/{name}/linux-{{base}}.patch",))
       for name in ONLINING_MUTANTS},
    # Huge-page clearing: stock and the clear series, same config.
    "clear-stock": Variant(("zdinit", "clear")),
    "clear": Variant(("zdinit", "clear"), "clear"),
    # The clear series plus a deliberately broken folio_zero_user(), for
    # the test that the zero read-back check can fail.
    "clear-broken": Variant(("zdinit", "clear"), "clear",
                            extra=("tests/data/clear-broken/linux-{base}.patch",)),
    # The clear series under KASAN, lockdep, DEBUG_VM and kmemleak.
    "clear-debug": Variant(("zdinit", "clear", "debug"), "clear"),
    # The clear series under KMSAN (built with clang).
    "clear-kmsan": Variant(("zdinit", "clear", "kmsan"), "clear"),
}


def subject(patch):
    """A patch file's name without its number and .patch."""
    return patch.stem.split("-", 1)[1]


def with_contiguity_check(spec):
    """spec plus the debugfs check of zone contiguity and its config."""
    return dataclasses.replace(spec, fragments=spec.fragments + ("contiguity",),
                               extra=spec.extra + (CONTIGUITY_CHECK,))


def variant_spec(variant, contiguity=False):
    spec = VARIANTS[canonical(variant)]
    return with_contiguity_check(spec) if contiguity else spec


def typed_path(path):
    """path as typed in the project's root, where it is under it."""
    return path.relative_to(paths.ROOT) if path.is_relative_to(paths.ROOT) else path


class MissingPatch(ZdinitError):
    """A base lacks a series or patch file a variant applies; lacking:
    what, as 'no <it>' (a file as typed_path() gives it)."""

    def __init__(self, message, lacking):
        super().__init__(message)
        self.lacking = lacking


# The unpatched kernels' first names.  They are accepted wherever a
# kernel is named (the command line, build()), and the records of the
# runs made with them keep them.
FORMER_NAMES = {"base": "stock", "hotplug-base": "hotplug-stock",
                "clear-base": "clear-stock"}


def canonical(variant):
    """A kernel's name, its first name translated."""
    return FORMER_NAMES.get(variant, variant)


def names_of(variant):
    """variant's name and any first name, as records may call it."""
    return (variant,) + tuple(old for old, new in FORMER_NAMES.items()
                              if new == variant)


def is_stock(variant):
    """Whether a recorded kernel name is the unpatched kernel of the
    rebind and onlining families."""
    return variant in names_of("stock")


def stack_parts(base, stack):
    """Yield (part, its patch files) of base's stack, in the order they
    apply; MissingPatch if the base has no such stack, or once a part
    lists no patch (the parts before it are there)."""
    if stack not in base.stacks:
        raise MissingPatch(f"base {base.name} has no {stack} series",
                           f"no {stack} series")
    for part in base.stacks[stack]:
        directory = base.series_dir(part)
        patches = source.series(directory)
        if not patches:
            series_file = typed_path(directory / "series")
            raise MissingPatch(f"base {base.name} series {part.name}: "
                               f"{series_file} is missing or lists no "
                               "patches", f"no {series_file}")
        yield part, patches


def stack_patches(base, stack):
    """Every patch file of base's stack, in the order they apply."""
    return [patch for _, patches in stack_parts(base, stack)
            for patch in patches]


def variant_patches(variant, base, contiguity=False):
    """The patch files variant (with contiguity, plus the contiguity check)
    applies to base, in order; MissingPatch if the base lacks its series
    or one of the patches it names."""
    spec = variant_spec(variant, contiguity)
    if spec.only_on and base.name not in spec.only_on:
        raise MissingPatch(f"kernel '{variant}' is for base "
                           f"{', '.join(spec.only_on)} only",
                           f"no {variant} kernel")
    if spec.series is None:
        patches = []
    else:
        parts = dict(stack_parts(base, spec.series))
        names = [part.name for part in parts]
        for name in spec.parts:
            if name not in names:
                raise MissingPatch(f"base {base.name}: kernel '{variant}' "
                                   f"takes the {name} part of the "
                                   f"{spec.series} series, which it lacks",
                                   f"no {name} part in its {spec.series} "
                                   "series")
        patches = [patch for part, part_patches in parts.items()
                   if not spec.parts or part.name in spec.parts
                   for patch in part_patches]
        subjects = {subject(p) for p in patches}
        for name in spec.only:
            if name not in subjects:
                raise MissingPatch(f"base {base.name}: kernel '{variant}' "
                                   f"names patch '{name}', which its "
                                   f"{spec.series} series lacks",
                                   f"no patch '{name}' in its {spec.series} "
                                   "series")
        patches = [p for p in patches if spec.selects(subject(p))]
    for name in spec.extra:
        extra = name.format(base=base.name)
        if not (paths.ROOT / extra).is_file():
            raise MissingPatch(f"kernel '{variant}' has no patch for base "
                               f"{base.name} ({extra} is missing)",
                               f"no {extra}")
        patches.append(paths.ROOT / extra)
    return patches


def applies(kernel, patch_subject):
    """Whether a built kernel carries the series' patch of that subject."""
    return any(subject(p) == patch_subject
               for p in variant_patches(kernel.variant, kernel.base))


def bases_with(variant, contiguity=False):
    """The names of the bases that have every patch variant applies."""
    having = []
    for base in bases.BASES.values():
        try:
            variant_patches(variant, base, contiguity)
        except MissingPatch:
            continue
        having.append(base.name)
    return having


def require_patches(variant, base, contiguity=False):
    """variant_patches(), refused in one line naming the bases that have
    the variant where base does not: what a user asks for on the wrong
    base (a variant no base has is the project's bug, said as it is)."""
    try:
        return variant_patches(variant, base, contiguity)
    except MissingPatch as err:
        having = bases_with(variant, contiguity)
        if not having:
            raise
        checked = " with the contiguity check" if contiguity else ""
        raise UsageError(
            f"kernel '{variant}'{checked} exists for base"
            f"{'s' if len(having) > 1 else ''} {', '.join(having)} only; "
            f"base {base.name} has {err.lacking}") from None


def work_name(variant, base, contiguity=False):
    """The variant's directory under the cache's work/: one per base, and
    one more for the variant with the contiguity check."""
    return (f"{base.name}/{canonical(variant)}"
            + ("+contiguity" if contiguity else ""))


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
    modules: list               # the project's modules, built for it
    release: str
    build_s: float = 0.0
    base: object = None         # the bases.Base it was made from


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
    return KMSAN_FRAGMENT in VARIANTS[variant].fragments


def jobs():
    return str((os.cpu_count() or 1) + 1)


@dataclasses.dataclass(frozen=True)
class Arch:
    """An architecture named to kbuild (ARCH=), with the compiler prefix
    (CROSS_COMPILE=, empty for x86-64 itself) and its Debian package."""
    name: str
    cross_compile: str
    package: str
    image: str


def make_cmd(tree, out, *targets, arch=None, cc="gcc"):
    """cc names the native compiler; other architectures build with gcc.

    kbuild's own tools (fixdep, kconfig, objtool, modpost) are built in
    every new build directory; through ccache they are compiled once.
    """
    cmd = ["make", "-C", str(tree), f"O={out}", f"-j{jobs()}",
           "HOSTCC=ccache gcc"]
    if arch:
        cmd += [f"ARCH={arch.name}", f"CROSS_COMPILE={arch.cross_compile}",
                f"CC=ccache {arch.cross_compile}gcc"]
    else:
        cmd.append(f"CC=ccache {cc}")
    return cmd + list(targets)


def configure(tree, out, fragments, base, env, arch=None, defined_only=False):
    """tinyconfig + fragments (with base's additions) + olddefconfig,
    verified; redone on change.

    defined_only: for a prefix of a series that defines some of the
    options in a later patch.  Options that tree's Kconfig does not
    define are not checked (olddefconfig drops them), and the
    configuration is redone once a patch defines one; kbuild then
    rebuilds only the files that use it.  A configuration made so is
    redone, and checked in full, by the first call without it.
    """
    paths = kconfig.fragment_paths(fragments, base)
    wanted = kconfig.requested(paths)
    if defined_only:
        known = kconfig.defined(tree, wanted)
        wanted = {o: v for o, v in wanted.items() if o in known}
    key = hashlib.sha256(
        "".join(p.read_text() for p in paths).encode()
        + str(tree).encode() + str(arch).encode()
        + " ".join(sorted(wanted)).encode()
        + str(defined_only).encode()).hexdigest()[:16]
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


def build_modules(tree, out, env, cc):
    """Build module/ out of tree against this kernel, in its build dir;
    the .ko files."""
    mdir = out / "zdinit-module"
    shutil.rmtree(mdir, ignore_errors=True)
    shutil.copytree(MODULE_SRC, mdir)
    proc.run_logged(["make", "-C", str(tree), f"O={out}", f"CC=ccache {cc}",
                     f"M={mdir}", "modules"], out / "module.log",
                    "module build", env=env)
    return sorted(mdir.glob("*.ko"))


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


def build_tree(name, tree, fragments, base, defined_only=False):
    """Build bzImage, in-tree modules and the project module of one tree
    (configure() says what defined_only is)."""
    out = cache.build_dir(name)
    env = make_env()
    cache.require_free_space(cache.cache_dir(), 3 << 30, f"building {name}")
    building = claim_build_dir(out)
    configure(tree, out, fragments, base, env, defined_only=defined_only)
    cc = compiler(fragments)
    progress.say(f"building kernel '{name}' in {out}")
    took = proc.run_logged(make_cmd(tree, out, "bzImage", "modules", cc=cc),
                           out / "build.log", f"build {name}", env=env)
    progress.say(f"kernel '{name}' built in {took:.0f}s")
    modules = build_modules(tree, out, env, cc)
    release = subprocess.run(
        ["make", "-s", "-C", str(tree), f"O={out}", "kernelrelease"],
        capture_output=True, text=True, env=env).stdout.strip()
    building.unlink()
    return Kernel(name, tree, out, out / "arch/x86/boot/bzImage", modules,
                  release, took)


def build(variant, base, contiguity=False):
    variant = canonical(variant)
    if variant not in VARIANTS:
        raise ValueError(variant)
    fragments = list(variant_spec(variant, contiguity).fragments)
    deps.require_tool("ccache", "ccache")
    if compiler(fragments) == "clang":
        deps.require_tool("clang", "clang")
    patches = require_patches(variant, base, contiguity)
    name = work_name(variant, base, contiguity)
    tree = source.variant_tree(name, patches, base)
    kernel = build_tree(name, tree, fragments, base)
    kernel.variant = variant    # the name tables and logs use
    kernel.base = base
    forget_former_directories(variant, base, contiguity)
    return kernel


def forget_former_directories(variant, base, contiguity):
    """Remove the work directory the kernel had under a first name: its
    tree and build are stale copies of what was just built."""
    suffix = "+contiguity" if contiguity else ""
    for former in names_of(variant)[1:]:
        old = cache.src_dir(f"{base.name}/{former}{suffix}").parent
        if old.is_dir():
            progress.say(f"removing {old}: kernel '{former}' is now "
                         f"'{variant}', built in "
                         f"{old.parent / (variant + suffix)}")
            shutil.rmtree(old)


def build_arch(name, tree, fragments, base, arch, targets, werror=False):
    """Build make targets of tree for arch (ARCH=, CROSS_COMPILE=); return
    the build dir."""
    deps.require_tool(f"{arch.cross_compile}gcc", arch.package)
    out = cache.build_dir(name)
    env = make_env()
    cache.require_free_space(cache.cache_dir(), 2 << 30, f"building {name}")
    building = claim_build_dir(out)
    configure(tree, out, fragments, base, env, arch=arch)
    progress.say(f"building {' '.join(targets)} of '{name}' for {arch.name}"
                 f" in {out}")
    cmd = make_cmd(tree, out, *targets, arch=arch)
    if werror:
        cmd.append("KCFLAGS=-Werror")
    took = proc.run_logged(cmd, out / "build.log", f"build {name}", env=env)
    progress.say(f"'{name}' built in {took:.0f}s")
    building.unlink()
    return out
