"""Check the patch series: each stack is well formed, then each patch
applies, passes checkpatch and builds."""
import collections
import dataclasses
import email.parser
import itertools
import os
import re
import shutil
import subprocess

from zdinit import deps, progress
from zdinit.kernel import bases, build, cross, source
from zdinit.errors import UsageError, ZdinitError

# Both files the series adds are covered by existing MAINTAINERS entries
# ("GENERIC INCLUDE/ASM HEADER FILES", "X86 ARCHITECTURE"); checkpatch asks
# about MAINTAINERS for every new file regardless.
CHECKPATCH_ARGS = ["--strict", "--ignore", "FILE_PATH_CHANGES", "-q"]

# In each part's directory, not listed in its series file.
COVER_LETTER = "0000-cover-letter.patch"
NOT_FOR_MERGING = "NOT FOR MERGING"
# A hunk's header: where it starts in the old file and how many lines it
# spans there and in the new (a count left out is 1).
HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
# As git format-patch --base writes them, one per patch of the parts the
# series applies on top of, in order.
PREREQUISITE = re.compile(r"^prerequisite-patch-id:[ \t]*(.*?)\s*$", re.M)


@dataclasses.dataclass(frozen=True)
class Series:
    # The kernel (build.VARIANTS) that is the whole series: every prefix is
    # built in its configuration, tree and build directory, so that the
    # check leaves it built.
    variant: str
    # Whether cross.py builds (and boots) the series on its other targets.
    cross_build: bool


# Each series of a base, by the name of its stack (bases.Base.stacks).
# Each applies to the pristine tree on its own.
SERIES = {
    "zone-device": Series("patched", cross_build=True),
    "clear": Series("clear", cross_build=False),
}


@dataclasses.dataclass
class PatchResult:
    patch: str          # part/file, or the file alone in a one-part stack
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


def subject_header(patch):
    """A patch file's Subject, unfolded; '' for a bare diff."""
    with open(patch, errors="replace") as fh:
        headers = email.parser.Parser().parse(fh, headersonly=True)
    return " ".join((headers["Subject"] or "").split())


def patch_id(patch):
    """git patch-id --stable of a patch file, as a cover letter's
    prerequisite-patch-id: line names it."""
    deps.require_tool("git", "git")
    with open(patch, "rb") as fh:
        out = subprocess.run(["git", "patch-id", "--stable"], stdin=fh,
                             capture_output=True, check=True).stdout.split()
    if not out:
        raise ZdinitError(f"git patch-id finds no diff in {patch}")
    return out[0].decode()


def prerequisite_ids(parts):
    """(part/file, patch-id) of every patch of parts, in order: what the
    cover letter of the part that follows them lists."""
    return [(f"{part.name}/{patch.name}", patch_id(patch))
            for part, patches in parts for patch in patches]


def prerequisite_lines(base_name, stack, part_name):
    """The prerequisite-patch-id: lines part_name's cover letter must
    carry (after its base-commit: line, as git format-patch --base writes
    them), computed from the patch files of the parts before it in base
    base_name's stack; only those parts need exist.  Regenerate them
    whenever a patch of those parts changes, e.g. from the repository's
    root:

        python3 -c 'from zdinit.kernel import series
        print(series.prerequisite_lines("7.3", "zone-device",
                                       "parallel"),
              end="")'
    """
    before: list = []
    for part, patches in build.stack_parts(bases.get(base_name), stack):
        if part.name == part_name:
            return "".join(f"prerequisite-patch-id: {pid}\n"
                           for _, pid in prerequisite_ids(before))
        before.append((part, patches))
    raise UsageError(f"base {base_name}'s {stack} series has no part "
                     f"{part_name}")


def refusal(base, part, why):
    """A check of one part's structure failed: one line naming it."""
    return ZdinitError(f"base {base.name} series {part.name}: {why}")


def check_merging(base, part, patches, cover):
    """A part for merging holds no patch marked NOT FOR MERGING, and the
    cover letter of one that is not says so (Part.for_merging)."""
    if part.for_merging:
        for patch in patches:
            if NOT_FOR_MERGING in subject_header(patch).upper():
                raise refusal(base, part, f"{patch.name} says "
                              f"{NOT_FOR_MERGING} in a series for merging")
    elif part.for_merging is False and \
            NOT_FOR_MERGING not in subject_header(cover).upper():
        raise refusal(base, part, f"{COVER_LETTER} offers a series not for "
                      f"merging: its Subject lacks {NOT_FOR_MERGING}")


def is_for_merging(part, patch):
    """Whether patch is offered for merging: its part is not the kit and
    its Subject does not say NOT FOR MERGING."""
    return (part.for_merging is not False
            and NOT_FOR_MERGING not in subject_header(patch).upper())


def diff_lines(patch):
    """(path, removed lines, added lines) of each file patch changes, the
    lines without their '-' or '+', read hunk by hunk so that the mail's
    '-- ' signature is no removed line."""
    files: list[tuple[str, list[str], list[str]]] = []
    old_left = new_left = 0
    with open(patch, errors="replace") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if old_left > 0 or new_left > 0:
                kind, text = line[:1], line[1:]
                if kind in " -":
                    old_left -= 1
                if kind in " +":
                    new_left -= 1
                if kind == "-":
                    files[-1][1].append(text)
                elif kind == "+":
                    files[-1][2].append(text)
                continue
            if line.startswith("diff --git "):
                files.append((line.split(" b/", 1)[-1], [], []))
                continue
            hunk = HUNK.match(line)
            if hunk and files:
                old_left, new_left = (int(n) if n is not None else 1
                                      for n in hunk.groups())
    return files


def check_additive(base, parts):
    """A patch not for merging only adds lines: it may take out again a
    line that such a patch added before it, never one of the tree that
    the patches for merging make.  So the kernel it times and tests runs
    the code offered for merging with lines added."""
    added: dict[str, collections.Counter] = collections.defaultdict(
        collections.Counter)
    for part, patches in parts:
        for patch in patches:
            if is_for_merging(part, patch):
                continue
            for path, removed, new in diff_lines(patch):
                for line in removed:
                    if added[path][line] <= 0:
                        raise refusal(
                            base, part, f"{patch.name} is not for merging "
                            f"but removes or changes a line of {path} that "
                            f"the series offers ({line.strip()[:60]!r}); "
                            "add lines only")
                    added[path][line] -= 1
                added[path].update(new)


def check_prerequisites(base, part, cover_text, before):
    """The cover letter names, in order, the patch-ids before lists
    (prerequisite_ids() of the parts before it): one that does not was not
    regenerated when they changed."""
    listed = PREREQUISITE.findall(cover_text)
    again = "; regenerate them: series.prerequisite_lines()"
    for got, want in itertools.zip_longest(listed, before):
        if want is None:
            why = (f"lists prerequisite-patch-id {got}, beyond the patches "
                   "of the parts before it")
        elif got is None:
            why = f"lacks the prerequisite-patch-id {want[1]} of {want[0]}"
        elif got != want[1]:
            why = (f"lists prerequisite-patch-id {got} where {want[0]} "
                   f"has {want[1]}")
        else:
            continue
        raise refusal(base, part, f"{COVER_LETTER} {why}{again}")


def checked_stack(name, base):
    """base's stack name as build.stack_parts() gives it, each part's
    cover letter checked first: it is there, names its base commit, says
    whether the part is for merging as its patches do, and lists its
    prerequisites as they are; then no patch not for merging removes or
    changes a line of the others (check_additive()).  Refused in one line
    naming the part; cheap, so check-series runs it on every stack before
    it builds."""
    parts = list(build.stack_parts(base, name))
    before: list = []     # each patch's id computed once, for every part after it
    for i, (part, patches) in enumerate(parts):
        cover = base.series_dir(part) / COVER_LETTER
        if not cover.is_file():
            raise refusal(base, part, f"{COVER_LETTER} is missing")
        text = cover.read_text(errors="replace")
        if not re.search(r"^base-commit: *\S", text, re.M):
            raise refusal(base, part,
                          f"{COVER_LETTER} has no base-commit: line")
        check_merging(base, part, patches, cover)
        check_prerequisites(base, part, text, before)
        if i + 1 < len(parts):
            before += prerequisite_ids([(part, patches)])
    check_additive(base, parts)
    return parts


def check(name, base, build_each=True, targets=(), parts=None):
    """Apply series 'name' of base one patch at a time to a fresh tree,
    part after part: parts as checked_stack() returned them, or
    checked_stack() first.

    After each patch: checkpatch, then an incremental build of the kernel
    and the project module, so every prefix of the stack is bisectable.
    The tree and build directory are those of the kernel that is the
    whole stack (Series.variant), in its configuration, the series' own
    options left out of the prefixes before the patch that defines them
    (build.configure()).  Once every patch is in, that kernel is built,
    and the commands that boot it build nothing more.  Without
    build_each, the patches go to a tree of the check's own, and that
    kernel's build is left as it was.  Then, for a series that asks for
    it, the whole stack is built for each of targets (cross.py: arm64
    and a small x86-64 kernel built and booted to run KUnit, i386
    compiled).
    Returns (per-patch results, cross-build lines).
    """
    spec = SERIES[name]
    if parts is None:
        parts = checked_stack(name, base)
    fragments = list(build.VARIANTS[spec.variant].fragments)
    work = build.work_name(spec.variant if build_each else f"check-{name}",
                           base)
    tree, tmp = source.clone_tree(work, base)
    shutil.rmtree(tree, ignore_errors=True)
    os.rename(tmp, tree)
    stack = [(part, patch) for part, patches in parts for patch in patches]
    results = []
    for i, (part, patch) in enumerate(stack, 1):
        label = f"{part.name}/{patch.name}" if len(parts) > 1 else patch.name
        progress.say(f"series {i}/{len(stack)}: {label}")
        source.apply_patch(tree, patch, base, series=part.name)
        verdict = checkpatch(tree, patch)
        took = 0.0
        if build_each:
            took = build.build_tree(work, tree, fragments, base,
                                    defined_only=i < len(stack)).build_s
        results.append(PatchResult(label, verdict, took))
    patches = [patch for _, patch in stack]
    if build_each:
        source.mark_variant_tree(tree, patches, base)
    return results, (cross.check(tree, patches, base, targets)
                     if spec.cross_build else [])
