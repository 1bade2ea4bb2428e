"""The results tables of README.md and docs/*.md, rendered from the runs
committed under docs/results/ by the harness's own report code, so that
no number in a table is typed and none can drift from its run.

A page marks each table with the run it comes from and the view of it:

    <!-- table: bench-100g-7.3 bench; columns: scenario, kernel, median ms -->
    (rendered here: one line naming the run and its command, the table)
    <!-- end table -->

The first words are the run's directory under docs/results/ and its kind
(a key of RENDERERS); then, separated by ';', any of

    columns: NAME, NAME, ...   the renderer's columns to show, in order
                               (a name the table repeats is NAME #2 the
                               second time, NAME #3 the third)
    where: NAME = VALUE, ...   rows whose NAME cell is one of the values
    where: NAME ~ TEXT         rows whose NAME cell contains TEXT
    part: N                    the Nth table the renderer prints (default 1)

`python3 -m zdinit docs` renders every marked table in place; with
--check it changes nothing and fails naming the pages whose tables
differ from what their runs render.  A run renders only if it records
the command that made it and a project revision without -dirty.
"""
import contextlib
import importlib.util
import io
import re

from zdinit import build, clear, report
from zdinit.errors import UsageError, ZdinitError

ROOT = build.ROOT
RESULTS = ROOT / "docs" / "results"

MARKER = re.compile(r"(<!-- table: (?P<spec>.+?) -->\n)(?P<body>.*?)"
                    r"(?P<end><!-- end table -->)", re.S)


def _clear_runs(results):
    """Clear runs from before the family compared bases name no base: it
    is their kernels' (all of one base then)."""
    versions = set(results["env"]["kernels"].values())
    implied = ".".join(min(versions).split(".")[:2]) if len(versions) == 1 \
        else None
    return [dict(r, base=r.get("base", implied)) for r in results["runs"]]


def _run_script(results, run_dir):
    """The table script committed beside a run (table.py, whose render()
    prints markdown), for views the general report does not have."""
    spec = importlib.util.spec_from_file_location(
        f"table_{run_dir.name}", run_dir / "table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        module.render([results])
    return out.getvalue()


# Results kind -> the harness's renderer of that kind's markdown table,
# called with the run's results.json and its directory.  The one place
# to re-point when the report code moves.
RENDERERS = {
    "bench": lambda results, run_dir: report.markdown_table(results["runs"]),
    "onlining": lambda results, run_dir: report.hotplug_breakdown(
        results["runs"]),
    "clear": lambda results, run_dir: report.markdown_table(
        _clear_runs(results), clear.HEADER, clear.rows),
    "script": _run_script,
}


def provenance(run):
    """A committed run's results, if it says how it was made and was
    made from a clean tree; otherwise one line why not."""
    path = RESULTS / run / "results.json"
    if not path.is_file():
        raise UsageError(f"docs/results/{run} has no results.json")
    results = report.load_results(path)
    rev = results.get("env", {}).get("project_rev")
    if not results.get("command"):
        raise UsageError(f"docs/results/{run} records no command")
    if not rev:
        raise UsageError(f"docs/results/{run} records no project revision")
    if rev.endswith("-dirty"):
        raise UsageError(f"docs/results/{run} was made from a dirty tree "
                         f"({rev}): rerun its command on a clean one")
    return results


def caption(run, results):
    env = results["env"]
    versions = sorted(set(env["kernels"].values()))
    return (f"`docs/results/{run}/`: `{results['command']}` at "
            f"{env['project_rev']}, kernel{'s' * (len(versions) > 1)} "
            f"{', '.join(versions)}, "
            f"{env['accel'].upper()} on {env['host_cpu']} "
            f"({env['host_cpus']} CPUs).")


def markdown_tables(text):
    """Each markdown table in text as a list of rows of cells (the
    separator line left out)."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            if not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line.strip()):
                current.append([c.strip() for c in
                                line.strip()[1:-1].split("|")])
        elif current:
            tables.append(current)
            current = []
    return tables


def parse_spec(spec):
    """'RUN KIND; option: value; ...' -> run, kind, options."""
    head, *options = [part.strip() for part in spec.split(";")]
    try:
        run, kind = head.split()
    except ValueError:
        raise UsageError(f"'{head}' is not 'RUN KIND'") from None
    if kind not in RENDERERS:
        raise UsageError(f"unknown kind '{kind}'; choose from "
                         + ", ".join(RENDERERS))
    parsed = {"columns": None, "where": [], "part": 1}
    for option in options:
        name, sep, value = option.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or name not in parsed:
            raise UsageError(f"unknown option '{option}'; choose from "
                             + ", ".join(parsed))
        if name == "columns":
            parsed["columns"] = [c.strip() for c in value.split(",")]
        elif name == "part":
            parsed["part"] = int(value)
        else:
            match = re.fullmatch(r"(.+?)\s*([=~])\s*(.+)", value)
            if not match:
                raise UsageError(f"'where: {value}' is not NAME = VALUE, .. "
                                 "or NAME ~ TEXT")
            column, op, wanted = match.groups()
            parsed["where"].append(
                (column, op, [w.strip() for w in wanted.split(",")]
                 if op == "=" else wanted))
    return run, kind, parsed


def unique(header):
    """The header with repeated names numbered: 'N', 'N #2', ..."""
    seen = {}
    out = []
    for name in header:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return out


def view(table, options):
    """The rows and columns of a rendered table that options select; the
    header keeps the renderer's names."""
    shown, rows = table[0], table[1:]
    header = unique(shown)

    def index(name):
        if name not in header:
            raise UsageError(f"no column '{name}'; the table has: "
                             + ", ".join(header))
        return header.index(name)

    for column, op, wanted in options["where"]:
        i = index(column)
        rows = [r for r in rows
                if (r[i] in wanted if op == "=" else wanted in r[i])]
    if not rows:
        raise UsageError("no row is selected")
    keep = [index(c) for c in options["columns"] or header]
    return [[row[i] for i in keep] for row in [shown] + rows]


def render(spec):
    """The text between a marker and its end: the run, then the table."""
    run, kind, options = parse_spec(spec)
    results = provenance(run)
    text = RENDERERS[kind](results, RESULTS / run)
    tables = markdown_tables(text)
    if not 1 <= options["part"] <= len(tables):
        raise UsageError(f"part {options['part']}: the renderer printed "
                         f"{len(tables)} tables")
    table = view(tables[options["part"] - 1], options)
    lines = ["| " + " | ".join(row) + " |" for row in table]
    lines.insert(1, "|" + "---|" * len(table[0]))
    return caption(run, results) + "\n\n" + "\n".join(lines) + "\n"


def pages(root=None):
    """README.md and the docs pages (not the runs' own notes)."""
    root = root or ROOT
    return [root / "README.md"] + sorted((root / "docs").glob("*.md"))


def render_page(text, name):
    """text with every marked table rendered again."""
    def one(match):
        try:
            body = render(match["spec"])
        except (ZdinitError, ValueError) as err:
            raise UsageError(f"{name}: table '{match['spec']}': {err}") \
                from None
        return match.group(1) + body + match["end"]
    return MARKER.sub(one, text)


def update(check=False, root=None):
    """Render every page's tables; returns the pages whose tables were
    (with check: would be) changed, and the number of tables."""
    root = root or ROOT
    stale, count = [], 0
    for page in pages(root):
        text = page.read_text()
        name = str(page.relative_to(root))
        new = render_page(text, name)
        count += len(MARKER.findall(text))
        if new != text:
            stale.append(name)
            if not check:
                page.write_text(new)
    return stale, count
