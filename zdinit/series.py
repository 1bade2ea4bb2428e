"""Check the patch series: each patch applies, passes checkpatch, builds."""
import dataclasses
import os
import shutil
import subprocess

from zdinit import build, cache, cross, progress, source
from zdinit.errors import ZdinitError

# Both files the series adds are covered by existing MAINTAINERS entries
# ("GENERIC INCLUDE/ASM HEADER FILES", "X86 ARCHITECTURE"); checkpatch asks
# about MAINTAINERS for every new file regardless.
CHECKPATCH_ARGS = ["--strict", "--ignore", "FILE_PATH_CHANGES", "-q"]


# Each series of a base, by name: the kernel (build.VARIANTS) that is the
# whole series, whose configuration every prefix is built with and whose
# tree and build directory the check leaves behind, and whether cross.py
# builds (and boots) the series on its other targets.  Each applies to the
# pristine tree on its own.
SERIES = {
    "zone-device": ("patched", True),
    "clear": ("clear", False),
}


def kind(name):
    """The series' patch directory suffix (bases.Base.series_dir)."""
    return build.VARIANTS[SERIES[name][0]].series


@dataclasses.dataclass
class PatchResult:
    patch: str
    checkpatch: str
    build_s: float


def checkpatch(tree, patch):
    """Run the tree's own checkpatch.pl; raise with its findings."""
    env = dict(os.environ)
    # spdxcheck.py needs Debian's python3 modules (ply, git).
    env["PATH"] = "/usr/bin:" + env.get("PATH", "")
    proc = subprocess.run(["perl", str(tree / "scripts/checkpatch.pl")]
                          + CHECKPATCH_ARGS + [str(patch)], cwd=tree,
                          capture_output=True, text=True, env=env)
    findings = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or findings:
        first = findings.splitlines()[0] if findings else "exit status"
        raise ZdinitError(f"checkpatch --strict: {patch.name}: {first}"
                          + ("\n" + findings if findings else ""))
    return "clean"


def check(name, base, build_each=True, targets=()):
    """Apply series 'name' of base one patch at a time to a fresh tree.

    After each patch: checkpatch, then an incremental build of the kernel
    and the project module, so every prefix of the series is bisectable.
    The tree and build directory are those of the kernel that is the
    whole series, in its configuration: options of the series that a
    patch defines are left out of the prefixes before it (configure()),
    and once every patch is in, the tree is that kernel's, built, so that
    bench reuses it instead of building it again.  Then, for a series
    that asks for it, the whole series is built for each of targets
    (cross.py: arm64 and a small x86-64 kernel built and booted to run
    KUnit, i386 compiled).
    Returns (per-patch results, cross-build lines).
    """
    variant, cross_build = SERIES[name]
    fragments = list(build.VARIANTS[variant].fragments)
    directory = base.series_dir(kind(name))
    patches = source.series(directory)
    if not patches:
        raise ZdinitError(f"base {base.name}: patches/{directory.name}/series "
                          "is missing or lists no patches")
    work = build.work_name(variant, base)
    tree, tmp = source.clone_tree(work, base)
    shutil.rmtree(tree, ignore_errors=True)
    os.rename(tmp, tree)
    results = []
    for i, patch in enumerate(patches, 1):
        progress.say(f"series {i}/{len(patches)}: {patch.name}")
        source.apply_patch(tree, patch, base)
        verdict = checkpatch(tree, patch)
        took = 0.0
        if build_each:
            took = build.build_tree(work, tree, fragments, base,
                                    defined_only=i < len(patches)).build_s
        results.append(PatchResult(patch.name, verdict, took))
    source.mark_variant_tree(tree, patches, base)
    return results, (cross.check(tree, patches, base, targets)
                     if cross_build else [])
