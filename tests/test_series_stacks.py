"""A base's series as a stack of directories: check-series refuses a
malformed stack in one line before anything heavy starts, and applies a
well-formed one part after part.

The fixture (tests/data/series-stacks/) is a fake tree and three parts
made with git format-patch --cover-letter --base: two for merging and a
kit that is not, each on top of the ones before it.
"""
import dataclasses
import shutil
import subprocess

import pytest

from conftest import DATA
from zdinit import cache, cli, deps, paths
from zdinit.kernel import bases, build, series, source
from zdinit.errors import UsageError, ZdinitError

STACKS = DATA / "series-stacks"
PARTS = (bases.Part("one"), bases.Part("two"),
         bases.Part("kit", for_merging=False))
BASE = bases.Base("9.9", "linux-source-9.9", "1", "0" * 64, "nowhere",
                  ("full",), ("full",), stacks={"zone-device": PARTS})
COVER = "0000-cover-letter.patch"
ONE = "linux-9.9-one"
TWO = "linux-9.9-two"
KIT = "linux-9.9-kit"


@pytest.fixture
def patches(tmp_path, monkeypatch):
    """The fixture's parts copied to a patches/ of the test's own, to be
    broken one way per test, and base 9.9 declared with them."""
    root = tmp_path / "patches"
    shutil.copytree(STACKS, root, ignore=shutil.ignore_patterns("tree"))
    monkeypatch.setattr(paths, "PATCHES", root)
    monkeypatch.setitem(bases.BASES, BASE.name, BASE)
    return root


@pytest.fixture
def nothing_heavy(monkeypatch):
    """Fails the test if the check takes the cache, installs packages or
    makes a tree."""
    def heavy(*args, **kw):
        raise AssertionError("heavy work started before the refusal")

    for module, name in ((cache, "lock"), (deps, "ensure_packages"),
                         (source, "clone_tree"), (source, "pristine_tree")):
        monkeypatch.setattr(module, name, heavy)


def check_series(capsys, *args):
    """check-series on base 9.9: (exit status, stdout, stderr's lines)."""
    status = cli.main(["check-series", "--base", "9.9", "--targets", "none",
                       *args])
    out, err = capsys.readouterr()
    return status, out, err.strip().splitlines()


def refusal(capsys, *args):
    status, out, err = check_series(capsys, "--series", "zone-device",
                                    *args)
    assert status == 1 and out == "" and len(err) == 1, (status, out, err)
    return err[0]


def edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def git_patch_id(path):
    with open(path, "rb") as fh:
        return subprocess.run(["git", "patch-id", "--stable"], stdin=fh,
                              capture_output=True, text=True,
                              check=True).stdout.split()[0]


def prerequisite_ids(cover):
    return [line.split()[1] for line in cover.read_text().splitlines()
            if line.startswith("prerequisite-patch-id:")]


def test_the_fixture_is_a_well_formed_stack(patches, nothing_heavy):
    parts = series.checked_stack("zone-device", BASE)
    assert [(part.name, [p.name for p in files]) for part, files in parts] \
        == [("one", ["0001-hello-set-one.patch", "0002-hello-set-two.patch"]),
            ("two", ["0001-hello-set-three.patch"]),
            ("kit", ["0001-hello-the-kit-s-switch-NOT-FOR-MERGING.patch"])]


@pytest.mark.parametrize("remove", ["series", "directory", "patches"])
def test_a_part_without_patches_is_refused(patches, nothing_heavy, capsys,
                                           remove):
    if remove == "directory":
        shutil.rmtree(patches / TWO)
    elif remove == "series":
        (patches / TWO / "series").unlink()
    else:
        (patches / TWO / "series").write_text("# none yet\n")
    assert refusal(capsys) == (
        f"zdinit: error: base 9.9 series two: {patches}/{TWO}/series is "
        "missing or lists no patches")


def test_a_part_without_a_cover_letter_is_refused(patches, nothing_heavy,
                                                  capsys):
    (patches / TWO / COVER).unlink()
    assert refusal(capsys) == ("zdinit: error: base 9.9 series two: "
                               "0000-cover-letter.patch is missing")


def test_a_cover_letter_without_its_base_commit_is_refused(
        patches, nothing_heavy, capsys):
    cover = patches / ONE / COVER
    cover.write_text("".join(line for line in cover.read_text()
                             .splitlines(keepends=True)
                             if not line.startswith("base-commit:")))
    assert refusal(capsys) == ("zdinit: error: base 9.9 series one: "
                               "0000-cover-letter.patch has no base-commit: "
                               "line")


def test_a_cover_letter_citing_a_number_no_run_holds_is_refused(
        patches, nothing_heavy, capsys):
    """A number in a changelog needs its run, named in the part's
    numbers file (zdinit/docs/changelog_numbers.py): without one, or
    with a run that does not hold it, check-series stops first."""
    cover = patches / TWO / COVER
    edit(cover, "\n\nzdinit tests", "\n\nBinding took 123.45 ms.\n\n"
         "zdinit tests")
    assert refusal(capsys) == (
        "zdinit: error: base 9.9 series two: 0000-cover-letter.patch:"
        f"{cover.read_text().splitlines().index('Binding took 123.45 ms.') + 1}"
        ": '123.45 ms' but numbers beside it has no entry for "
        "0000-cover-letter.patch: name the runs it comes from (1 in all; "
        "python3 -m zdinit docs --check)")
    (patches / TWO / "numbers").write_text(
        "0000-cover-letter.patch: bench-100g-7.3\n")
    assert "'123.45 ms' is in no file of docs/results/bench-100g-7.3" in \
        refusal(capsys)


def test_a_prerequisite_changed_under_its_dependants_is_refused(
        patches, nothing_heavy, capsys):
    """Part one edited, the cover letters of two and kit left as they
    were: the first prerequisite that differs is named."""
    changed = patches / ONE / "0002-hello-set-two.patch"
    listed = prerequisite_ids(patches / TWO / COVER)[1]
    edit(changed, "+int two = 1;", "+int two = 2;")
    assert refusal(capsys) == (
        "zdinit: error: base 9.9 series two: 0000-cover-letter.patch lists "
        f"prerequisite-patch-id {listed} where one/0002-hello-set-two.patch "
        f"has {git_patch_id(changed)}; regenerate them: "
        "series.prerequisite_lines()")


def test_a_missing_prerequisite_is_refused(patches, nothing_heavy, capsys):
    cover = patches / KIT / COVER
    last = prerequisite_ids(cover)[-1]
    edit(cover, f"prerequisite-patch-id: {last}\n", "")
    assert refusal(capsys) == (
        "zdinit: error: base 9.9 series kit: 0000-cover-letter.patch lacks "
        f"the prerequisite-patch-id {last} of "
        "two/0001-hello-set-three.patch; regenerate them: "
        "series.prerequisite_lines()")


def test_an_extra_prerequisite_is_refused(patches, nothing_heavy, capsys):
    """The first part has none: whatever it lists is extra."""
    extra = "0123456789abcdef0123456789abcdef01234567"
    edit(patches / ONE / COVER, "base-commit:",
         f"prerequisite-patch-id: {extra}\nbase-commit:")
    assert refusal(capsys) == (
        "zdinit: error: base 9.9 series one: 0000-cover-letter.patch lists "
        f"prerequisite-patch-id {extra}, beyond the patches of the parts "
        "before it; regenerate them: series.prerequisite_lines()")


def test_a_kit_patch_offered_for_merging_is_refused(patches, nothing_heavy,
                                                    capsys):
    """Subjects are read unfolded, as git format-patch folds them."""
    edit(patches / TWO / "0001-hello-set-three.patch",
         "Subject: [PATCH 1/1] hello: set three\n",
         "Subject: [PATCH 1/1] hello: set three [NOT\n FOR MERGING]\n")
    assert refusal(capsys) == (
        "zdinit: error: base 9.9 series two: 0001-hello-set-three.patch "
        "says NOT FOR MERGING in a series for merging")


def test_a_kit_whose_cover_letter_offers_it_for_merging_is_refused(
        patches, nothing_heavy, capsys):
    edit(patches / KIT / COVER, "hello: the kit [NOT FOR MERGING]",
         "hello: the kit")
    assert refusal(capsys) == (
        "zdinit: error: base 9.9 series kit: 0000-cover-letter.patch offers "
        "a series not for merging: its Subject lacks NOT FOR MERGING")


KIT_PATCH = "0001-hello-the-kit-s-switch-NOT-FOR-MERGING.patch"


def plant_kit_edit(path):
    """The kit's patch made to change a line of part two as well."""
    edit(path, "@@ -5,3 +5,4 @@ int two = 1;\n int three = 1;\n",
         "@@ -5,3 +5,4 @@ int two = 1;\n-int three = 1;\n+int three = 2;\n")


def test_a_kit_patch_that_changes_a_line_of_the_series_is_refused(
        patches, nothing_heavy, capsys):
    """The kit may only add lines, so that what it times and tests is
    the code offered for merging: a planted edit of the series' code is
    refused, naming the patch, before anything is built."""
    plant_kit_edit(patches / KIT / KIT_PATCH)
    assert refusal(capsys) == (
        f"zdinit: error: base 9.9 series kit: {KIT_PATCH} is not for "
        "merging but removes or changes a line of hello.c that the series "
        "offers ('int three = 1;'); add lines only")


def test_a_patch_not_for_merging_in_a_mixed_part_only_adds_too(
        patches, nothing_heavy):
    edit(patches / KIT / COVER, "hello: the kit [NOT FOR MERGING]",
         "hello: the kit")
    plant_kit_edit(patches / KIT / KIT_PATCH)
    mixed = PARTS[:2] + (bases.Part("kit", for_merging=None),)
    base = dataclasses.replace(BASE, stacks={"zone-device": mixed})
    with pytest.raises(ZdinitError, match=f"^base 9.9 series kit: "
                       f"{KIT_PATCH} is not for merging but removes"):
        series.checked_stack("zone-device", base)


def test_a_kit_may_take_back_a_line_of_its_own(tmp_path):
    """Lines are matched per file, and the mail's '-- ' signature after
    the last hunk is not a removed line."""
    first, second = tmp_path / "1.patch", tmp_path / "2.patch"
    first.write_text("diff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n"
                     "@@ -1 +1,2 @@\n int a;\n+int kit;\n-- \n2.39.5\n")
    second.write_text("diff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n"
                      "@@ -1,2 +1,2 @@\n int a;\n-int kit;\n+int kit2;\n")
    assert series.diff_lines(first) == [("f.c", [], ["int kit;"])]
    kit = bases.Part("kit", for_merging=False)
    series.check_additive(BASE, [(kit, [first, second])])
    with pytest.raises(ZdinitError, match="^base 9.9 series kit: 2.patch "
                       "is not for merging but removes or changes a line "
                       "of f.c that the series offers"):
        series.check_additive(BASE, [(kit, [second])])


def test_a_mixed_part_is_checked_for_neither(patches, nothing_heavy,
                                             monkeypatch):
    """for_merging=None: a series for merging that ends with the
    harness's patches (6.12's), its cover letter offering it."""
    edit(patches / KIT / COVER, "hello: the kit [NOT FOR MERGING]",
         "hello: the kit")
    mixed = PARTS[:2] + (bases.Part("kit", for_merging=None),)
    base = dataclasses.replace(BASE, stacks={"zone-device": mixed})
    assert len(series.checked_stack("zone-device", base)) == 3


def test_every_stack_asked_for_is_checked_before_the_first_is_built(
        patches, nothing_heavy, capsys):
    # A series the base lacks is a usage error: argparse's exit 2.
    with pytest.raises(SystemExit) as exit:
        check_series(capsys, "--series", "zone-device,clear")
    out, err = capsys.readouterr()
    having = ", ".join(name for name, b in bases.BASES.items()
                       if "clear" in b.stacks)
    assert (exit.value.code, out, err.strip().splitlines()) == (
        2, "", [f"zdinit: error: base 9.9 has no clear series; it is base "
                f"{having}'s (see 'python3 -m zdinit check-series --help')"])


@pytest.fixture
def fake_kbuild(tmp_path, monkeypatch):
    """series.check() on a copy of the fixture's tree (pristine, for a
    test to change), with checkpatch and kbuild stood in for: the builds
    are recorded as (how many of hello.c's values are set, whether
    defined_only)."""
    monkeypatch.setenv("ZDINIT_CACHE", str(tmp_path / "cache"))
    pristine = tmp_path / "pristine"
    shutil.copytree(STACKS / "tree", pristine)
    tree = tmp_path / "tree"

    def clone_tree(name, base):
        preparing = tree.with_name("tree.preparing")
        shutil.copytree(pristine, preparing)
        return tree, preparing

    builds = []

    def build_tree(name, tree, fragments, base, defined_only=False):
        builds.append(((tree / "hello.c").read_text().count("= 1;"),
                       defined_only))
        return build.Kernel(name, tree, None, None, [], "", 1.0)

    monkeypatch.setattr(source, "clone_tree", clone_tree)
    monkeypatch.setattr(build, "build_tree", build_tree)
    monkeypatch.setattr(series, "checkpatch", lambda tree, patch: "clean")
    monkeypatch.setattr(source, "mark_variant_tree",
                        lambda tree, patches, base: None)
    monkeypatch.setattr(deps, "ensure_packages", lambda: None)
    return pristine, tree, builds


def test_a_stack_is_applied_and_built_part_after_part(patches, fake_kbuild,
                                                      capsys):
    _, tree, builds = fake_kbuild
    status, out, err = check_series(capsys, "--series", "zone-device")
    assert status == 0, err
    built = "applies, checkpatch clean, built in 1s"
    assert out.splitlines() == [
        f"9.9 zone-device/one/0001-hello-set-one.patch: {built}",
        f"9.9 zone-device/one/0002-hello-set-two.patch: {built}",
        f"9.9 zone-device/two/0001-hello-set-three.patch: {built}",
        "9.9 zone-device/kit/0001-hello-the-kit-s-switch-NOT-FOR-MERGING"
        f".patch: {built}"]
    # Every prefix built, in order, the last configured in full.
    assert builds == [(1, True), (2, True), (3, True), (4, False)]
    assert (tree / "hello.c").read_text().count("= 1;") == 4


def test_a_one_part_stack_names_no_part(patches, fake_kbuild, capsys,
                                        monkeypatch):
    monkeypatch.setitem(bases.BASES, BASE.name, dataclasses.replace(
        BASE, stacks={"zone-device": PARTS[:1]}))
    status, out, _ = check_series(capsys, "--series", "zone-device",
                                  "--no-build")
    assert (status, out.splitlines()) == (0, [
        "9.9 zone-device/0001-hello-set-one.patch: applies, checkpatch clean",
        "9.9 zone-device/0002-hello-set-two.patch: applies, checkpatch "
        "clean"])


def test_a_patch_that_does_not_apply_names_its_part(patches, fake_kbuild,
                                                    capsys):
    """A tree the stack does not fit: refused at that patch, mid-run."""
    pristine, _, builds = fake_kbuild
    edit(pristine / "hello.c", "int three = 0;", "int three = 7;")
    status, out, err = check_series(capsys, "--series", "zone-device")
    errors = [line for line in err if line.startswith("zdinit: error")]
    assert status == 1 and errors == err[-1:], err
    assert errors[0] == (
        "zdinit: error: base 9.9 series two: patch 0001-hello-set-three.patch"
        " does not apply to linux-source-9.9 1: 1 out of 1 hunk FAILED; "
        "rebase the series")
    # Part one applied and built before it.
    assert out == "" and builds == [(1, True), (2, True)]


def test_variant_patches_gathers_the_parts_in_order_by_subject(
        patches, monkeypatch):
    one, two = sorted((patches / ONE).glob("000[12]-*.patch"))
    three, = (patches / TWO).glob("0001-*.patch")
    kit, = (patches / KIT).glob("0001-*.patch")
    assert build.variant_patches("patched", BASE) == [one, two, three, kit]
    # Selected in the stack's order, whatever the order named.
    monkeypatch.setitem(build.VARIANTS, "odd", build.Variant(
        ("zdinit",), "zone-device", only=("hello-set-three",
                                          "hello-set-one")))
    assert build.variant_patches("odd", BASE) == [one, three]
    monkeypatch.setitem(build.VARIANTS, "odd", build.Variant(
        ("zdinit",), "zone-device", only=("hello-set-one", "hello-set-four")))
    with pytest.raises(build.MissingPatch, match="^base 9.9: kernel 'odd' "
                       "names patch 'hello-set-four', which its zone-device "
                       "series lacks$"):
        build.variant_patches("odd", BASE)


def test_a_variant_of_a_stack_the_base_lacks_is_refused(patches):
    with pytest.raises(build.MissingPatch,
                       match="^base 9.9 has no clear series$"):
        build.variant_patches("clear", BASE)


def test_prerequisite_lines_are_those_git_format_patch_writes(patches):
    for part, directory in (("one", ONE), ("two", TWO), ("kit", KIT)):
        cover = (patches / directory / COVER).read_text()
        assert series.prerequisite_lines("9.9", "zone-device", part) == \
            "".join(line + "\n" for line in cover.splitlines()
                    if line.startswith("prerequisite-patch-id:")), part
    assert series.prerequisite_lines("9.9", "zone-device", "kit").count(
        "\n") == 3
    with pytest.raises(UsageError, match="^base 9.9's zone-device series "
                       "has no part three$"):
        series.prerequisite_lines("9.9", "zone-device", "three")


def test_every_stack_is_declared_and_named_by_its_variants():
    for base in bases.BASES.values():
        assert {"zone-device", "clear"} <= set(base.stacks) <= \
            set(series.SERIES), base.name
    for name, spec in build.VARIANTS.items():
        assert spec.series is None or spec.series in series.SERIES, name


@pytest.mark.parametrize("base", bases.BASES)
def test_the_project_s_stacks_are_well_formed(base):
    """What check-series refuses before building, on the series as they
    are: a cover letter not regenerated after a prerequisite changed
    fails here."""
    for name in bases.get(base).stacks:
        series.checked_stack(name, bases.get(base))
