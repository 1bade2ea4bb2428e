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


@dataclasses.dataclass(frozen=True)
class Series:
    # The kernel (build.VARIANTS) that is the whole series: every prefix is
    # built in its configuration, tree and build directory, so that the
    # check leaves it built.
    variant: str
    # Whether cross.py builds (and boots) the series on its other targets.
    cross_build: bool

    @property
    def kind(self):
        """Its patch directory's suffix (bases.Base.series_dir)."""
        return build.VARIANTS[self.variant].series


# Each series of a base, by name.  Each applies to the pristine tree on
# its own.
SERIES = {
    "zone-device": Series("patched", cross_build=True),
    "clear": Series("clear", cross_build=False),
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
    """Apply series 'name' of base one patch at a time to a fresh tree.

    After each patch: checkpatch, then an incremental build of the kernel
    and the project module, so every prefix of the series is bisectable.
    The tree and build directory are those of the kernel that is the
    whole series (Series.variant), in its configuration, the series' own
    options left out of the prefixes before the patch that defines them
    (build.configure()).  Once every patch is in, that kernel is built,
    and the commands that boot it build nothing more.  Without
    build_each, the patches go to a tree of the check's own, and that
    kernel's build is left as it was.  Then, for a series that asks for
    it, the whole series is built for each of targets (cross.py: arm64
    and a small x86-64 kernel built and booted to run KUnit, i386
    compiled).
    Returns (per-patch results, cross-build lines).
    """
    spec = SERIES[name]
    fragments = list(build.VARIANTS[spec.variant].fragments)
    directory = base.series_dir(spec.kind)
    patches = source.series(directory)
    if not patches:
        raise ZdinitError(f"base {base.name}: patches/{directory.name}/series "
                          "is missing or lists no patches")
    work = build.work_name(spec.variant if build_each else f"check-{name}",
                           base)
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
    if build_each:
        source.mark_variant_tree(tree, patches, base)
    return results, (cross.check(tree, patches, base, targets)
                     if spec.cross_build else [])
