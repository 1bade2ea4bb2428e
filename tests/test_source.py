"""Patch application: a patch that does not fit fails cleanly."""
import pytest

from zdinit import cli, paths
from zdinit.kernel import bases, build, cross, kconfig, series, source
from zdinit.errors import ZdinitError

GOOD = """--- a/hello.c
+++ b/hello.c
@@ -1,3 +1,3 @@
 int main(void)
 {
-	return 0;
+	return 1;
"""

STALE = GOOD.replace("return 0", "return 2")
BASE = bases.BASES["6.12"]


def tree(tmp_path):
    (tmp_path / "hello.c").write_text("int main(void)\n{\n\treturn 0;\n}\n")
    return tmp_path


def test_patch_applies(tmp_path):
    (tmp_path / "t").mkdir()
    t = tree(tmp_path / "t")
    patch = tmp_path / "0001-good.patch"
    patch.write_text(GOOD)
    source.apply_patch(t, patch, BASE)
    assert "return 1;" in (t / "hello.c").read_text()


def test_stale_patch_fails_and_leaves_tree_untouched(tmp_path):
    (tmp_path / "t").mkdir()
    t = tree(tmp_path / "t")
    before = (t / "hello.c").read_text()
    patch = tmp_path / "0001-stale.patch"
    patch.write_text(STALE)
    with pytest.raises(ZdinitError, match="0001-stale.patch does not apply"):
        source.apply_patch(t, patch, BASE)
    assert (t / "hello.c").read_text() == before
    assert sorted(p.name for p in t.iterdir()) == ["hello.c"]


def test_series_lists_existing_patches_in_order():
    for part in (part for parts in BASE.stacks.values() for part in parts):
        patches = source.series(BASE.series_dir(part))
        assert patches, f"{BASE.series_dir(part)}/series is empty"
        assert [p.name for p in patches] == sorted(p.name for p in patches)


def test_series_with_missing_file(tmp_path):
    (tmp_path / "series").write_text("0001-missing.patch\n")
    with pytest.raises(ZdinitError, match="0001-missing.patch"):
        source.series(tmp_path)


def test_cross_compiles_the_directories_of_the_changed_c_files(tmp_path):
    """i386 compiles where the series' C files live; header-only and
    documentation changes add no directory of their own."""
    one = tmp_path / "1.patch"
    one.write_text("--- a/mm/mm_init.c\n+++ b/mm/mm_init.c\n"
                   "--- a/include/linux/mm.h\n+++ b/include/linux/mm.h\n")
    two = tmp_path / "2.patch"
    two.write_text("+++ b/arch/x86/lib/usercopy_64.c\t2024-01-01 00:00\n"
                   "+++ b/mm/memory_hotplug.c\n+++ b/Documentation/x.rst\n"
                   "+++ b/mm/notc.cc\n")
    files = cross.changed_c_files([one, two])
    assert files == ["arch/x86/lib/usercopy_64.c", "mm/memory_hotplug.c",
                     "mm/mm_init.c"]
    assert cross.changed_dirs(files) == ["arch/x86/lib/", "mm/"]
    assert "mm/mm_init.c" in cross.changed_c_files(
        build.stack_patches(BASE, "zone-device"))


def test_check_series_builds_the_whole_series_where_asked():
    """By default arm64 and i386 after the prefixes, nothing beyond
    applying and checkpatch with --no-build unless --targets names it."""
    def targets(*args):
        parsed = cli.parser().parse_args(["check-series", *args])
        parsed.series = cli.base_series(parsed)
        return cli.check_series_targets(parsed)
    assert targets() == ("arm64", "i386")
    assert targets("--no-build") == ()
    assert targets("--no-build", "--targets", "x86_64") == ("x86_64",)
    assert targets("--targets", "none") == ()


@pytest.mark.parametrize("name", [name for name, target in
                                  cross.TARGETS.items() if target.boot])
def test_every_booted_target_builds_the_kunit_suites(name):
    """The options of the series' suite on every base."""
    for base in bases.BASES.values():
        wanted = kconfig.requested(kconfig.fragment_paths(
            cross.TARGETS[name].fragments, base))
        for option in ("CONFIG_KUNIT", "CONFIG_ZONE_DEVICE_MEMMAP_KUNIT_TEST",
                       "CONFIG_PADATA_KUNIT_TEST", "CONFIG_DEVICE_PRIVATE"):
            assert wanted[option] == "y", (name, base.name, option)


def test_every_variant_selects_patches_on_every_base():
    """A patch or part a variant names must be in the series of every base
    it is for (each has every series): renaming one fails here, not in a
    build."""
    for base in bases.BASES.values():
        for name, spec in build.VARIANTS.items():
            try:
                build.variant_patches(name, base)
            except ZdinitError as err:
                # A patch outside the series, or a whole stack, may be
                # there for some bases only; a variant may be for some.
                assert ("has no patch for base" in str(err)
                        or spec.series not in base.stacks
                        or (spec.only_on and base.name not in spec.only_on
                            and str(err) == f"kernel '{name}' is for base "
                            f"{', '.join(spec.only_on)} only")), str(err)


def test_a_variant_naming_a_missing_patch_is_refused(monkeypatch):
    monkeypatch.setitem(build.VARIANTS, "odd", build.Variant(
        ("zdinit",), "zone-device", only=("mm-no-such-patch",)))
    with pytest.raises(ZdinitError, match="^base 6.12: kernel 'odd' names "
                       "patch 'mm-no-such-patch', which its zone-device "
                       "series lacks$"):
        build.variant_patches("odd", BASE)


def test_a_base_without_a_series_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "PATCHES", tmp_path)
    with pytest.raises(ZdinitError, match="^base 6.12 series templates: "
                       ".*/linux-6.12-templates/series is missing or lists "
                       "no patches$"):
        build.variant_patches("patched", BASE)
    assert build.variant_patches("base", BASE) == []


def test_every_series_is_the_whole_of_its_kernel():
    """The kernel check-series leaves built applies every patch of the
    stack, in its order: a kernel that left one out would be another."""
    for base in bases.BASES.values():
        for name in base.stacks:
            spec = series.SERIES[name]
            assert build.variant_patches(spec.variant, base) == \
                build.stack_patches(base, name), (base.name, name)
