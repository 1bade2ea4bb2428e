"""The documentation cannot drift: its tables are what the committed runs
render, its ratios come from those tables, its command reference names
everything the CLI and the Makefile offer, and every command it shows
parses.  Unit tests: no kernel, no cache."""
import json
import re

import pytest

from conftest import ROOT
from zdinit import cli, paths
from zdinit.kernel import initramfs
from zdinit.docs import (changelog_numbers, commands, links, tables,
                         typed_numbers)
from zdinit.errors import UsageError

PAGES = tables.pages()


def text(page):
    return page.read_text()


def test_every_table_is_what_its_run_renders():
    stale, count = tables.update(check=True)
    assert count, "no rendered tables found: the markers are gone"
    assert not stale, ("edited by hand or out of date (run 'python3 -m "
                       f"zdinit docs'): {stale}")


def fake_run(tmp_path, monkeypatch, command, rev):
    run = tmp_path / "run"
    run.mkdir()
    src = json.loads((paths.COMMITTED_RESULTS / "bench-100g-7.3" / "results.json")
                     .read_text())
    src["command"] = command
    src["env"]["project_rev"] = rev
    (run / "results.json").write_text(json.dumps(src))
    monkeypatch.setattr(paths, "COMMITTED_RESULTS", tmp_path)
    return "run rebind"


@pytest.mark.parametrize("command,rev,why", [
    ("python3 -m zdinit bench", "0123abcd-dirty", "dirty tree"),
    ("", "0123abcd", "records no command"),
    ("python3 -m zdinit bench", None, "records no project revision"),
])
def test_a_run_without_provenance_is_refused(tmp_path, monkeypatch,
                                             command, rev, why):
    spec = fake_run(tmp_path, monkeypatch, command, rev)
    with pytest.raises(UsageError, match=why):
        tables.render(spec)


def test_the_committed_dirty_run_is_refused():
    with pytest.raises(UsageError, match="dirty tree"):
        tables.render("bench-100g-7.3-first rebind")


def test_a_view_of_a_column_the_table_lacks_is_refused():
    with pytest.raises(UsageError, match="no column 'median'"):
        tables.render("bench-100g-7.3 rebind; columns: scenario, median")


def prose(page_text):
    """The page without its rendered tables and code blocks."""
    without = tables.MARKER.sub("", page_text)
    return re.sub(r"```.*?```", "", without, flags=re.S)


RATIO = re.compile(r"\b\d+\.\d\dx")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_ratios_in_the_prose_come_from_the_pages_tables(page):
    """A ratio quoted in the text is one a rendered table of the same page
    shows, so re-rendering cannot leave it behind; one with an arithmetic
    mark is redone from its operands instead (typed_numbers)."""
    body = text(page)
    rendered = "".join(m["body"] for m in tables.MARKER.finditer(body))
    unmarked = re.sub(RATIO.pattern + typed_numbers.MARK.pattern, "",
                      prose(body))
    typed = sorted(set(RATIO.findall(unmarked)) - set(
        RATIO.findall(rendered)))
    assert not typed, f"{page.name}: ratios no table of the page shows: " \
        f"{typed}"


def reference():
    """The command reference: docs/usage.md's section on the commands."""
    usage = text(ROOT / "docs" / "usage.md")
    match = re.search(r"^## Commands\n(.*?)(?=^## |\Z)", usage,
                      re.S | re.M)
    assert match, "docs/usage.md has no '## Commands' section"
    return match.group(1)


def subcommands():
    """{name: parser} of every subcommand by its name, not its aliases."""
    parser = cli.parser()
    action = next(a for a in parser._actions
                  if a.__class__.__name__ == "_SubParsersAction")
    named = {}
    for name, sub in action.choices.items():
        if sub not in named.values():
            named[name] = sub
    return named


def make_targets():
    makefile = (ROOT / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", makefile, re.M).group(1).split()
    rules = re.findall(r"^([a-z][a-z-]*):", makefile, re.M)
    assert sorted(phony) == sorted(rules), "Makefile's .PHONY and rules differ"
    return phony


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_subcommand_and_option_is_in_the_reference(name):
    rows = [line for line in reference().splitlines()
            if line.startswith(f"| `python3 -m zdinit {name} ")
            or line.startswith(f"| `python3 -m zdinit {name}`")]
    assert len(rows) == 1, f"'{name}' has {len(rows)} rows in the reference"
    options = [opt for action in subcommands()[name]._actions
               for opt in action.option_strings if opt.startswith("--")
               and opt != "--help"]
    missing = [opt for opt in options if opt not in rows[0]]
    assert not missing, f"'{name}' options missing from its row: {missing}"


def test_every_kernel_the_build_offers_is_in_the_reference():
    row = next(line for line in reference().splitlines()
               if line.startswith("| `python3 -m zdinit build "))
    missing = [v for v in cli.VARIANTS if f"`{v}`" not in row]
    assert not missing, f"kernels missing from build's row: {missing}"


@pytest.mark.parametrize("target", make_targets())
def test_every_make_target_is_in_the_reference(target):
    assert f"`make {target}`" in reference(), \
        f"make {target} is not in the command reference"


def check_command(command):
    """None if the project offers the command as written, else why not:
    zdinit commands through the CLI's parse and each command's checks."""
    return commands.refused(command, cli.check)


def test_every_command_line_of_the_pages_is_taken():
    """Each command of a sh block, each inline command and the line above
    each rendered table, as a user would copy it."""
    lines = commands.command_lines()
    assert len(lines) > 100, f"only {len(lines)} command lines found"
    problems = commands.refusals(cli.check)
    assert not problems, "\n".join(problems)


def test_the_line_above_every_table_is_a_command_line():
    """A table's caption is among the command lines: checked for today's
    code, or, for a run of a kernel since removed, given with the
    revision to check out."""
    found = {(line.page, line.line) for line in commands.command_lines()}
    for page in PAGES:
        body = text(page)
        for match in tables.MARKER.finditer(body):
            line = body.count("\n", 0, match.start("body")) + 1
            name = str(page.relative_to(ROOT))
            if "`python3 -m zdinit " not in match["body"].splitlines()[0]:
                continue             # a lab run's script, in its folder
            assert (name, line) in found, f"{name}:{line}: {match['body']}"


PLANTED = [
    # A kernel that no longer exists, as the old captions named it.
    "`python3 -m zdinit bench --kernels base,patched-memcpy,patched`",
    # A kernel the base has no patches for: the command's own check.
    "`python3 -m zdinit bench --base 6.12 --kernels patched-workqueue`",
    "`python3 -m zdinit build --base 6.12 patched-workqueue`",
    # Options that contradict, or a size no scenario takes.
    "`python3 -m zdinit bench --scenarios fsdax-dev --align 2M`",
    "`python3 -m zdinit memmap-equality --size 1G`",
    "`python3 -m zdinit bench --si 4G`",
    "`make no-such-target`",
    "`lab/build/zdlab-no-such verify`",
    "`python3 docs/results/no-such/table.py`",
]


@pytest.mark.parametrize("planted", PLANTED)
def test_a_planted_bad_command_line_is_refused(tmp_path, planted):
    """The same check, shown failing: a copy of a page with one bad
    command line typed into its prose."""
    page = tmp_path / "measurements.md"
    page.write_text(text(ROOT / "docs" / "measurements.md")
                    + f"\nRepeat it with {planted}.\n")
    problems = commands.refusals(cli.check, [page])
    assert len(problems) == 1 and planted in problems[0], problems


def test_a_planted_bad_caption_is_refused(tmp_path):
    """A table's line as the harness wrote it before a kernel was
    removed, without the revision to check out first."""
    page = tmp_path / "README.md"
    body = text(ROOT / "docs" / "measurements.md")
    old = re.search(r"made at (\w+) with kernel `patched-memcpy`, since "
                    r"removed: `git checkout \w+`, then ", body)
    assert old, "the caption of the removed kernel's run is gone"
    page.write_text(body.replace(old[0], "", 1))
    problems = commands.refusals(cli.check, [page])
    assert len(problems) == 1 and "patched-memcpy" in problems[0], problems


def test_a_command_after_git_checkout_is_for_that_revision(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Made with a kernel since removed: `git checkout "
                    "b672cc20136d`, then\n`python3 -m zdinit bench "
                    "--kernels base,patched-memcpy`.\n\nToday: `python3 -m "
                    "zdinit bench --kernels patched`.\n")
    lines = commands.command_lines([page])
    assert [(line.line, line.revision) for line in lines] == [
        (2, "b672cc20136d"), (4, None)]
    assert commands.refusals(cli.check, [page]) == []


def test_a_synopsis_is_not_a_command(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("`python3 -m zdinit bench [--size S]`, `python3 -m "
                    "zdinit COMMAND --help`, `python3 -m zdinit`.\n")
    assert commands.command_lines([page]) == []


def test_a_bogus_command_is_caught():
    assert check_command("python3 -m zdinit bench --no-such-option")
    assert check_command("python3 -m zdinit frobnicate")
    assert check_command("make no-such-target")
    assert check_command("lab/build/zdlab-no-such verify")
    assert check_command("python3 docs/results/no-such/table.py")
    assert check_command("python3 -m zdinit bench --base 6.12") is None
    assert check_command("make lab LAB_ARGS=--reserve-hugetlb") is None


def missing_from_layout(names):
    """names design.md's section on the harness does not name."""
    design = text(ROOT / "docs" / "design.md")
    section = re.search(r"^## The harness\n(.*?)(?=^## |\Z)", design,
                        re.S | re.M)
    assert section, "docs/design.md has no '## The harness' section"
    return [name for name in names
            if not re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])",
                             section[1])]


def test_every_harness_module_is_in_the_layout():
    missing = missing_from_layout(
        m.stem for m in sorted((ROOT / "zdinit").rglob("*.py"))
        if not m.stem.startswith("__"))
    assert not missing, f"modules missing from design.md's layout: {missing}"


def test_every_guest_script_is_in_the_layout():
    missing = missing_from_layout(initramfs.GUEST_SCRIPTS)
    assert not missing, \
        f"guest scripts missing from design.md's layout: {missing}"


def test_the_layout_check_sees_a_missing_module():
    assert missing_from_layout(["no_such_module", "qemu"]) == \
        ["no_such_module"]


def test_docs_command_checks_then_renders(tmp_path, monkeypatch, capsys):
    """--check changes nothing and fails in one line naming the page; the
    command without it puts the run's numbers back."""
    (tmp_path / "docs").mkdir()
    page = text(ROOT / "README.md")
    edited = re.sub(r"\| (\d+)\.(\d\d)x", r"| \g<1>.9\2x", page, count=1)
    (tmp_path / "README.md").write_text(edited)
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    assert cli.main(["docs", "--check"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "differ from what their runs render in " \
        "README.md" in err[0], err
    assert (tmp_path / "README.md").read_text() == edited
    assert cli.main(["docs"]) == 0
    assert (tmp_path / "README.md").read_text() == page


def test_docs_check_reports_a_prose_number_no_run_backs(tmp_path,
                                                        monkeypatch, capsys):
    """What make test checks, the command checks too: a typed number
    edited fails 'docs --check' in one line naming it."""
    (tmp_path / "docs").mkdir()
    page = text(ROOT / "README.md")
    edited = page.replace("36 min 11 s", "39 min 11 s", 1)
    assert edited != page
    (tmp_path / "README.md").write_text(edited)
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    assert cli.main(["docs", "--check"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'39 min 11 s'" in err[0], err


# Tables from samples: every number a table shows is computed from the
# committed samples, and a run whose stored summary its samples do not
# give fails the check, in one line naming the run and the field.

def committed_copy(tmp_path, monkeypatch, run, edit=None):
    """docs/results/RUN (results.json, table.py) copied to a results
    directory docs reads instead, the results passed through edit()."""
    results = json.loads((paths.COMMITTED_RESULTS / run / "results.json").read_text())
    if edit:
        edit(results)
    copy = tmp_path / "results" / run
    copy.mkdir(parents=True)
    (copy / "results.json").write_text(json.dumps(results, indent=1))
    script = paths.COMMITTED_RESULTS / run / "table.py"
    if script.is_file():
        (copy / "table.py").write_text(script.read_text())
    monkeypatch.setattr(paths, "COMMITTED_RESULTS", tmp_path / "results")


def pages_without_tables(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("No tables.\n")
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    # Nor patches, whose changelogs cite runs these tests do not copy.
    monkeypatch.setattr(paths, "PATCHES", tmp_path / "patches")


def one_error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("run,row,field", [
    ("clear-perf-7.3", "7.3 1G full clear cached", "vs_base.speedup"),
    ("clear-perf-7.3", "7.3 2M lazy clear stream", "median_gbps"),
    ("clear-perf-7.3", "7.3 1G lazy clear stream", "perf.demand.median_gbps"),
    ("bench-100g-7.3", "devdax-dev 2M patched auto", "median_ms"),
    ("bench-100g-7.3", "devdax-dev 2M patched auto", "vs_seed.ci95[0]"),
    ("hotplug-16g", "kmem movable: online wall patched default",
     "vs_base.speedup"),
])
def test_a_stored_summary_its_samples_do_not_give_fails_the_check(
        tmp_path, monkeypatch, capsys, run, row, field):
    """The committed run passes; with one stored field off by half, the
    check fails in one line naming the run, the record and the field."""
    *path, last = [int(k) if k.isdigit() else k
                   for k in re.findall(r"[^.\[\]]+", field)]

    def edit(results):
        record = next(r for r in results["runs"]
                      if tables.record_name(r) == row)
        for key in path:
            record = record[key]
        record[last] *= 1.5

    pages_without_tables(tmp_path, monkeypatch)
    committed_copy(tmp_path, monkeypatch, run)
    assert cli.main(["docs", "--check"]) == 0
    capsys.readouterr()
    committed_copy(tmp_path / "edited", monkeypatch, run, edit)
    assert cli.main(["docs", "--check"]) == 1
    assert f"docs/results/{run}: '{row}' {field} is " in \
        one_error_line(capsys)


def double_the_stored_summaries(results):
    """Every float of every record doubled, but the samples."""
    def doubled(value, key=""):
        if key.startswith("samples_") or key in ("latency", "first_bind_ms"):
            return value
        if isinstance(value, dict):
            return {k: doubled(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [doubled(v) for v in value]
        return value * 2 if isinstance(value, float) else value
    results["runs"] = [doubled(r) for r in results["runs"]]


@pytest.mark.parametrize("spec", [
    "clear-perf-7.3 clearing; where: page = 1G",
    "clear-4g clearing",
    "bench-100g-7.3 rebind",
    "hotplug-16g-counter-7.3 onlining; where: scenario ~ online wall",
    "hotplug-16g onlining; part: 2",
    "hotplug-16g-tmpl script; part: 2",
])
def test_tables_are_computed_from_the_samples(tmp_path, monkeypatch, spec):
    """Stored summaries all wrong, the table the same; the check, not the
    table, says the run is wrong."""
    run = spec.split()[0]
    shown = tables.render(spec)
    committed_copy(tmp_path, monkeypatch, run, double_the_stored_summaries)
    assert tables.render(spec) == shown
    assert tables.stale_summary(run).startswith(f"docs/results/{run}: ")


def test_every_committed_run_is_what_its_samples_give():
    """Cited by a page or not."""
    assert not tables.stale_summaries()


def test_a_failing_check_names_the_page_and_the_table(tmp_path, monkeypatch,
                                                      capsys):
    page = text(ROOT / "docs" / "measurements.md")
    table = next(m for m in tables.MARKER.finditer(page)
                 if m["spec"].startswith("clear-perf-7.3 "))
    body = re.sub(r"\| (\d+)\.(\d\d)x", r"| \g<1>.9\2x", table["body"],
                  count=1)
    pages_without_tables(tmp_path, monkeypatch)
    (tmp_path / "docs" / "measurements.md").write_text(
        page[:table.start("body")] + body + page[table.end("body"):])
    assert cli.main(["docs", "--check"]) == 1
    err = one_error_line(capsys)
    assert f"docs/measurements.md: table '{table['spec']}' (run " in err, err
    assert err.count("table '") == 1, err


# The numbers typed into the prose: each one a run's files (or its own
# arithmetic) give, and each cited commit in the history.

def test_every_measured_number_in_the_prose_is_backed():
    problems = typed_numbers.unbacked()
    assert not problems, "\n".join(problems)


def test_every_cited_commit_is_in_the_history():
    problems = typed_numbers.missing_commits()
    assert not problems, "\n".join(problems)


def backed(page, kind, marked=False):
    """The first quantity of a kind in a page's prose that a run (or, with
    marked, its arithmetic mark) backs, with its block."""
    for block in typed_numbers.blocks(page):
        for quantity in typed_numbers.quantities(block.text):
            if quantity.kind == kind and bool(quantity.mark) == marked \
                    and (block.runs or marked) \
                    and not typed_numbers.check_quantity(quantity, block):
                return block, quantity
    raise AssertionError(f"{page.name} has no backed {kind}")


def edited(page, block, old, new, tmp_path):
    """A copy of the page with the first 'old' at or after the block's
    first line replaced by 'new' (old may wrap across lines)."""
    text = page.read_text()
    start = sum(len(line) + 1 for line in text.splitlines()[:block.line - 1])
    pattern = r"\s+".join(re.escape(word) for word in old.split())
    match = re.compile(pattern).search(text, start)
    assert match, f"{old!r} not found in {page.name} from line {block.line}"
    copy = tmp_path / page.name
    copy.write_text(text[:match.start()] + new + text[match.end():])
    return copy


def bumped(quantity_text, factor=1.33):
    """The quantity with its first number scaled, kept at the precision
    it is written with."""
    number = re.search(typed_numbers.NUMBER, quantity_text)[0]
    decimals = len(number.partition(".")[2])
    new = f"{float(number.replace(',', '')) * factor:.{decimals}f}"
    return quantity_text.replace(number, new, 1)


@pytest.mark.parametrize("page,kind,marked", [
    ("README.md", "time", False),        # a prose time: make test's minutes
    ("README.md", "count", True),        # a count: struct pages per 100 GB
    ("docs/testing.md", "time", False),
    ("docs/measurements.md", "time", False),   # a prose median, 58.90 ms
    ("docs/measurements.md", "ratio", False),
    ("README.md", "size", False),        # the cache's size after a run
])
def test_editing_a_number_from_a_run_fails(page, kind, marked, tmp_path):
    block, quantity = backed(ROOT / page, kind, marked)
    copy = edited(ROOT / page, block, quantity.text, bumped(quantity.text),
                  tmp_path)
    assert typed_numbers.unbacked([copy]), \
        f"{page}: '{quantity.text}' edited and still accepted"


def test_an_instruction_count_is_checked_against_its_icount_run(tmp_path):
    """Minstr, the unit of a bench --icount table, reads the run's
    numbers one for one: the page passes, one count changed fails."""
    page = ROOT / "docs/measurements.md"
    block = next(b for b in typed_numbers.blocks(page)
                 if "182.93 Minstr" in b.text)
    assert not typed_numbers.unbacked([page])
    copy = edited(page, block, "182.93 Minstr", "181.93 Minstr", tmp_path)
    assert typed_numbers.unbacked([copy])


def test_editing_a_cited_commit_fails(tmp_path):
    page = ROOT / "docs" / "measurements.md"
    text = page.read_text()
    commit = next(word for word in typed_numbers.COMMIT.findall(text)
                  if re.search(r"\d", word) and re.search("[a-f]", word))
    copy = tmp_path / page.name
    copy.write_text(text.replace(commit, commit[::-1], 1))
    assert typed_numbers.missing_commits([copy])


def test_most_edits_of_backed_numbers_are_caught():
    """Each backed number changed by a third up and down: the check must
    see at least four edits in five.  The rest land on another number of
    the same kind in the run: a size written 4 GB may be another size
    there, and a lab run holds thousands of rates and times."""
    tried = caught = 0
    for page in PAGES:
        for block in typed_numbers.blocks(page):
            for quantity in typed_numbers.quantities(block.text):
                if not block.runs or quantity.mark or \
                        typed_numbers.check_quantity(quantity, block):
                    continue
                for factor in (1.33, 0.71):
                    edits = typed_numbers.quantities(
                        bumped(quantity.text, factor))
                    if bumped(quantity.text, factor) == quantity.text \
                            or not edits:
                        continue    # "1 TB" stays; "24 MiB" became 32 MiB,
                                    # a size the kernel defines
                    edit, = edits
                    tried += 1
                    caught += bool(typed_numbers.check_quantity(edit, block))
    assert tried > 30, f"only {tried} backed numbers found"
    assert caught >= 0.8 * tried, f"{caught} of {tried} edits caught"


def test_an_arithmetic_mark_is_redone():
    block = typed_numbers.Block("page.md", 1, "", [])
    good, = typed_numbers.quantities(
        "26 million<!-- = 100 * GiB / (4 * KiB) -->")
    assert typed_numbers.check_quantity(good, block) is None
    wrong, = typed_numbers.quantities(
        "16 million<!-- = 100 * GiB / (4 * KiB) -->")
    assert "gives 2.62144e+07" in typed_numbers.check_quantity(wrong, block)
    code, = typed_numbers.quantities("26 million<!-- = open('x') -->")
    assert "is not arithmetic" in typed_numbers.check_quantity(code, block)
    both = typed_numbers.quantities("21 to 26 per cent<!-- = 21.3, 26.04 -->")
    assert typed_numbers.check_quantity(both[0], block) is None


def test_a_number_beside_a_table_is_checked_against_its_run():
    page = ROOT / "README.md"
    # The headline's run: the first word of the page's first table spec.
    headline = next(tables.MARKER.finditer(page.read_text()))["spec"]
    run = headline.split()[0]
    blocks = typed_numbers.blocks(page)
    beside = [b for b in blocks if run in b.runs
              and "docs/results/" not in b.text]
    assert beside, "no block sits beside the bench table"
    typed, = typed_numbers.quantities("took 123.45 ms")
    assert typed_numbers.check_quantity(typed, beside[0])


@pytest.mark.parametrize("command,kernels,want", [
    ("python3 -m zdinit bench --kernels base,patched", {"base": "6.12.117"},
     "python3 -m zdinit bench --base 6.12 --kernels stock,patched"),
    ("python3 -m zdinit bench --scenarios kmem --kernels=hotplug-base "
     "--base=6.12", {"hotplug-base": "6.12.117"},
     "python3 -m zdinit bench --scenarios kmem --kernels=hotplug-stock "
     "--base=6.12"),
    ("python3 -m zdinit build base", {"base": "7.3.4"},
     "python3 -m zdinit build stock"),
    ("python3 -m zdinit clear --size 4G", {"clear-base": "6.12.117"},
     "python3 -m zdinit clear --base 6.12 --size 4G"),
    ("python3 -m zdinit bench --kernels base,patched-memcpy",
     {"base": "6.12.117", "patched-memcpy": "6.12.117"}, None),
])
def test_todays_command_of_a_run(command, kernels, want):
    """The command that repeats a run today: kernels by today's names,
    --base where the run's base is no longer the default, none where a
    kernel is gone (the caption then gives the revision to check out)."""
    results = {"command": command, "env": {"kernels": kernels},
               "runs": [{"kernel": k} for k in kernels]}
    assert tables.todays_command(results) == want
    if want:
        assert check_command(want) is None


def test_a_marker_leaves_rows_out_and_draws_the_plot():
    """'where: NAME !~ TEXT' keeps the rows without TEXT; 'plot: TEXT'
    puts the run's plot after the table, by its path from the page."""
    spec = "bench-100g-7.3-stack rebind; where: strategy !~ stream@1"
    body = tables.render(spec + "; plot: the run", "docs/measurements.md")
    rows = [r for r in tables.markdown_tables(body)[0][1:]]
    assert rows and not any("stream@1" in r[2] for r in rows)
    assert any(r[2] == "auto->stream x2" for r in rows)
    assert body.rstrip().endswith(
        "![the run](../docs/results/bench-100g-7.3-stack/bench.png)")
    assert "![" not in tables.render(spec)
    with pytest.raises(UsageError, match="draws no plot"):
        tables.render("clear-perf-7.3 clearing; plot: x")


def test_every_relative_link_of_the_pages_resolves():
    assert links.broken() == []


@pytest.mark.parametrize("target,why", [
    ("docs/testing.md", "no file docs/docs/testing.md"),   # from docs/
    ("testing.md#no-such-heading", "no heading #no-such-heading in "
     "testing.md"),
    ("../README.md#how-long-ago", "no heading #how-long-ago in README.md"),
])
def test_a_planted_bad_link_is_found(tmp_path, monkeypatch, target, why):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# zdinit\n\n## How long\n")
    (tmp_path / "docs" / "testing.md").write_text(
        "# Testing\n\n## How long\n\n[back](../README.md#how-long), "
        "[here](#how-long), [web](https://example.org/x.md),\n"
        "`[not a link](nowhere.md)`\n")
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    assert links.broken() == []
    page = tmp_path / "docs" / "usage.md"
    page.write_text(f"# Usage\n\nSee [it]({target}).\n")
    assert links.broken() == [f"docs/usage.md:3: link ({target}): {why}"]


def test_docs_check_reports_a_broken_link(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(typed_numbers, "unbacked", lambda: [])
    monkeypatch.setattr(typed_numbers, "missing_commits", lambda: [])
    monkeypatch.setattr(commands, "refusals", lambda check: [])
    monkeypatch.setattr(changelog_numbers, "unbacked", lambda: [])
    monkeypatch.setattr(tables, "update", lambda check: ([], 0))
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# zdinit\n\n[lab](docs/lab.md)\n")
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    assert cli.main(["docs", "--check"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "README.md:3: link (docs/lab.md): no file " \
        "docs/lab.md" in err[0], err
