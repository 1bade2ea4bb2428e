"""Patch application: a patch that does not fit fails cleanly."""
import pytest

from zdinit import source
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
