"""Patch application: a patch that does not fit fails cleanly."""
import pytest

from zdinit import cross, source
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


def tree(tmp_path):
    (tmp_path / "hello.c").write_text("int main(void)\n{\n\treturn 0;\n}\n")
    return tmp_path


def test_patch_applies(tmp_path):
    (tmp_path / "t").mkdir()
    t = tree(tmp_path / "t")
    patch = tmp_path / "0001-good.patch"
    patch.write_text(GOOD)
    source.apply_patch(t, patch)
    assert "return 1;" in (t / "hello.c").read_text()


def test_stale_patch_fails_and_leaves_tree_untouched(tmp_path):
    (tmp_path / "t").mkdir()
    t = tree(tmp_path / "t")
    before = (t / "hello.c").read_text()
    patch = tmp_path / "0001-stale.patch"
    patch.write_text(STALE)
    with pytest.raises(ZdinitError, match="0001-stale.patch does not apply"):
        source.apply_patch(t, patch)
    assert (t / "hello.c").read_text() == before
    assert sorted(p.name for p in t.iterdir()) == ["hello.c"]


def test_series_lists_existing_patches_in_order():
    patches = source.series()
    assert patches, "patches/linux-6.12/series is empty"
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
    assert "mm/mm_init.c" in cross.changed_c_files(source.series())


def test_patched_memcpy_leaves_out_patch_7_and_the_onlining_templates():
    from zdinit import build
    series = [p.resolve() for p in source.series(source.PATCHES)]
    memcpy = [p.resolve() for p in source.series(source.MEMCPY_PATCHES)]
    assert memcpy == series[:6] + series[7:12] + series[13:14]
    assert "copy-the-ZONE_DEVICE-memmap-template" in series[6].name
    # Left out too: the onlining template path and its check.
    assert "onlined-memory-from-templates" in series[12].name
    assert "check-the-memmap-of-onlined-memory" in series[14].name
    assert build.VARIANTS["patched-memcpy"] == (
        build.VARIANTS["patched"][0], source.MEMCPY_PATCHES)
