"""The numbers of the patches' changelogs and cover letters are the runs'
(zdinit/docs/changelog_numbers.py): each series' `numbers` file names
the runs, and the check fails, one line naming the patch file and the
number, where a changelog cites a number they do not hold.  Unit tests:
no kernel, no cache."""
import re
import shutil

import pytest

from zdinit import cli, paths
from zdinit.docs import changelog_numbers, tables, typed_numbers

SERIES = "linux-7.3-store-policy"
PATCH = "0001-mm-keep-ZONE_DEVICE-memmaps-smaller-than-the-cache-i.patch"


def test_every_changelog_number_is_backed():
    problems = changelog_numbers.unbacked()
    assert not problems, "\n".join(problems)


def test_every_series_with_numbers_has_a_numbers_file():
    for directory in changelog_numbers.series_dirs():
        measured = [p for p in directory.glob("*.patch")
                    if any(typed_numbers.quantities(b.text) for b in
                           changelog_numbers.message_blocks(p))]
        if measured:
            assert (directory / changelog_numbers.SIDECAR).is_file(), \
                directory


@pytest.fixture
def series(tmp_path):
    """A copy of one series' directory, patches and numbers file."""
    copy = tmp_path / SERIES
    shutil.copytree(paths.PATCHES / SERIES, copy)
    return copy


def replace(path, old, new):
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def test_the_copy_passes(series):
    assert changelog_numbers.check_dir(series) == []


SECOND = "0002-mm-copy-the-ZONE_DEVICE-memmap-template-from-registe.patch"


def test_a_planted_wrong_number_fails_in_one_line(series):
    # fsdax map=mem on two threads with the copy from registers: 392.3 ms
    # in bench-100g-par.
    replace(series / SECOND, "642.9 -> 392.3 ms", "642.9 -> 402.3 ms")
    problem, = changelog_numbers.check_dir(series)
    assert problem.startswith(f"{SECOND}:35: '402.3 ms' is in no file of "
                              "docs/results/lab-template-regs/README.md, "
                              "docs/results/bench-100g-par"), problem


def test_a_number_bound_to_its_run_cannot_change_alone(series):
    """A number the numbers file binds to a run of its own (the Xeon's
    cold 16 MB cell, mm3-small.json) or derives by a mark is named
    there: changed in the changelog alone, the binding goes stale; changed
    in both, the run must hold the new one."""
    replace(series / PATCH, "(2.02 ms against 2.53 ms)",
            "(2.12 ms against 2.53 ms)")
    problem, = changelog_numbers.check_dir(series)
    assert f"{PATCH} has no '2.02 ms' for its mark or runs" in problem
    replace(series / changelog_numbers.SIDECAR, "    2.02 ms: ",
            "    2.12 ms: ")
    problem, = changelog_numbers.check_dir(series)
    assert problem.startswith(f"{PATCH}:") and "'2.12 ms' is in no file " \
        "of docs/results/lab-xeon-emr-16cpu/zdlab/mm3-small.json" in problem


def test_a_number_in_the_diff_or_below_the_cut_is_not_the_changelogs(
        series):
    """Only the commit message counts: git format-patch rewrites what
    follows its '---', and the diff is code."""
    text = (series / PATCH).read_text()
    cut = text.index("\n---\n") + len("\n---\n")
    (series / PATCH).write_text(text[:cut] + "A note of 9.99 ms.\n"
                                + text[cut:])
    assert changelog_numbers.check_dir(series) == []


def test_a_patch_with_numbers_and_no_entry_fails(series):
    sidecar = series / changelog_numbers.SIDECAR
    text = sidecar.read_text()
    start = text.index(PATCH + ":")
    end = text.index("\n\n", start)
    sidecar.write_text(text[:start] + text[end + 2:])
    problem, = changelog_numbers.check_dir(series)
    assert problem.startswith(f"{PATCH}:") and \
        f"has no entry for {PATCH}" in problem


def test_a_series_without_a_numbers_file_fails(series):
    (series / changelog_numbers.SIDECAR).unlink()
    problems = changelog_numbers.check_dir(series)
    assert {p.split(":")[0] for p in problems} == {
        p.name for p in series.glob("*.patch")
        if any(typed_numbers.quantities(b.text)
               for b in changelog_numbers.message_blocks(p))}
    assert all("has no entry for" in p for p in problems)


@pytest.mark.parametrize("edit,message", [
    # A run that is not committed.
    (("    lab-template-regs/README.md bench-100g-par\n",
      "    lab-template-regs/README.md bench-100g-gone\n"),
     "no run docs/results/bench-100g-gone/"),
    # An entry for a patch file renamed since.
    ((PATCH + ":", PATCH.replace("0001", "0009") + ":"),
     "is no patch file here"),
    # A mark whose quantity the changelog no longer has.
    (("    8 KiB = 128 * 64", "    9 KiB = 128 * 64"),
     "has no '9 KiB' for its mark"),
])
def test_a_stale_numbers_file_fails_in_one_line(series, edit, message):
    replace(series / changelog_numbers.SIDECAR, *edit)
    problems = changelog_numbers.check_dir(series)
    assert problems and all("\n" not in p for p in problems)
    assert any(message in p for p in problems), problems


def test_a_mark_is_redone_and_its_operands_are_the_runs(series):
    sidecar = series / changelog_numbers.SIDECAR
    # Arithmetic that does not give the number written.
    replace(sidecar, "1.64x = 642.865 / 392.2655",
            "1.64x = 642.865 / 382.2655")
    problem, = changelog_numbers.check_dir(series)
    assert f"{SECOND}:35: '1.64x': its mark '642.865 / 382.2655' gives " \
        "1.68" in problem, problem
    # Arithmetic that does, from a number no run holds.
    replace(sidecar, "1.64x = 642.865 / 382.2655",
            "1.64x = 642.875 / 392.2655")
    problem, = changelog_numbers.check_dir(series)
    assert problem.startswith(f"{SECOND}:35: '1.64x': its mark's 642.875 "
                              "is in no file of "), problem


def test_the_check_fails_the_docs_command(series, monkeypatch, capsys):
    replace(series / SECOND, "642.9 -> 392.3 ms", "642.9 -> 402.3 ms")
    monkeypatch.setattr(tables, "update", lambda check: ([], 0))
    monkeypatch.setattr(typed_numbers, "unbacked", lambda: [])
    monkeypatch.setattr(changelog_numbers, "series_dirs", lambda: [series])
    assert cli.main(["docs", "--check"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{SECOND}:35: '402.3 ms'" in err[0], err


def test_cpuid_values_and_table_rows_are_read_as_written(tmp_path):
    patch = tmp_path / "0001-x.patch"
    patch.write_text(
        "From 0 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n"
        "AMD family 19h model 11h.\n\n"
        "  in the L3, 2 MiB  50.9         35.3\n"
        "  us, THP: read     26.8         75.1-77.5\n\n"
        "Signed-off-by: x\n---\n")
    texts = [q.text for b in changelog_numbers.message_blocks(patch)
             for q in typed_numbers.quantities(b.text)]
    assert texts == []


def test_most_edits_of_changelog_numbers_are_caught():
    """Each time, ratio and rate of the changelogs changed by a third up
    and down: the check must see most edits.  One the numbers file marks
    or binds goes stale; any other must be missing from its entry's
    runs, and some land on another number there: a lab run holds
    thousands of times and rates."""
    tried = caught = looked_up = found = 0
    for directory in changelog_numbers.series_dirs():
        sidecar = directory / changelog_numbers.SIDECAR
        if not sidecar.is_file():
            continue
        entries, _ = changelog_numbers.read_sidecar(sidecar)
        for name, entry in entries.items():
            evidence = changelog_numbers.entry_evidence(entry.runs)
            for block in changelog_numbers.message_blocks(directory / name):
                for quantity in typed_numbers.quantities(block.text):
                    if quantity.kind not in ("time", "ratio", "rate"):
                        continue
                    named = quantity.text in entry.marks or \
                        quantity.text in entry.bound
                    for factor in (1.33, 0.71):
                        number = re.search(typed_numbers.NUMBER,
                                           quantity.text)[0]
                        decimals = len(number.partition(".")[2])
                        new = f"{float(number) * factor:.{decimals}f}"
                        edit, = typed_numbers.quantities(
                            quantity.text.replace(number, new, 1))
                        tried += 1
                        if named:
                            caught += 1
                            continue
                        looked_up += 1
                        missing = bool(changelog_numbers.check_quantity(
                            edit, block, entry, evidence))
                        found += missing
                        caught += missing
    assert tried > 500, f"only {tried} numbers tried"
    assert caught >= 0.8 * tried, f"{caught} of {tried} edits caught"
    assert found >= 0.5 * looked_up, \
        f"{found} of {looked_up} edits caught by their runs alone"
