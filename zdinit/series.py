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


# Each series of a base, by name: its kind (bases.Base.series_dir), the
# kconfig fragments its patches are built with, and whether cross.py builds
# (and boots) it on its other targets.  Each applies to the pristine
# tree on its own.
SERIES = {
    "zone-device": ("", ("zdinit",), True),
    "clear": ("clear", ("zdinit", "clear"), False),
}


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
    """Apply series 'name' of base one patch at a time to a scratch tree.

    After each patch: checkpatch, then an incremental build of the kernel
    and the project module, so every prefix of the series is bisectable.
    The build uses stock's configuration for that series (for the
    ZONE_DEVICE one, ccache shares it with the base kernel: the series' test
    options in configs/series.config change every object, so they are built
    once, in the patched kernel).  Each series has its own scratch tree and
    build directory.  Then, for a series that asks for it, the whole series
    is built for each of targets (cross.py: arm64 and a small x86-64
    kernel built and booted to run KUnit, i386 compiled).
    Returns (per-patch results, cross-build lines).
    """
    kind, fragments, cross_build = SERIES[name]
    directory = base.series_dir(kind)
    patches = source.series(directory)
    if not patches:
        raise ZdinitError(f"base {base.name}: patches/{directory.name}/series "
                          "is missing or lists no patches")
    scratch = build.work_name(f"bisect-{name}", base)
    tree, tmp = source.clone_tree(scratch, base)
    shutil.rmtree(tree, ignore_errors=True)
    os.rename(tmp, tree)
    out = cache.build_dir(scratch)
    results = []
    for i, patch in enumerate(patches, 1):
        progress.say(f"series {i}/{len(patches)}: {patch.name}")
        source.apply_patch(tree, patch, base)
        verdict = checkpatch(tree, patch)
        took = 0.0
        if build_each:
            took = build.build_tree(scratch, tree, list(fragments), base,
                                    out=out).build_s
        results.append(PatchResult(patch.name, verdict, took))
    return results, (cross.check(tree, patches, base, targets)
                     if cross_build else [])
