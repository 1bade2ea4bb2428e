"""The results tables of README.md and docs/*.md, rendered from the runs
committed under docs/results/ by the harness's own report code, so that
no number in a table is typed and none can drift from its run.

A page marks each table with the run it comes from and the view of it:

    <!-- table: bench-100g-7.3 rebind; columns: scenario, kernel, median ms -->
    (rendered here: one line naming the run and its command, the table)
    <!-- end table -->

The first words are the run's directory under docs/results/ and its kind:
a family's name (its tables, in the order its tables() gives them) or
'script' (the run's own table.py); then, separated by ';', any of

    columns: NAME, NAME, ...   the renderer's columns to show, in order
                               (a name the table repeats is NAME #2 the
                               second time, NAME #3 the third)
    where: NAME = VALUE, ...   rows whose NAME cell is one of the values
    where: NAME ~ TEXT         rows whose NAME cell contains TEXT
    where: NAME !~ TEXT        rows whose NAME cell does not contain TEXT
    part: N                    the Nth table the renderer prints (default 1)
    plot: TEXT                 the run's plot after the table, TEXT its
                               alternative text

`python3 -m zdinit docs` renders every marked table in place; with
--check it changes nothing and fails naming the pages and tables that
differ from what their runs render.  A run renders only if it records
the command that made it and a project revision without -dirty.

Every number a table shows is computed from the run's samples by its
family's own code (rebind.resummarize, clearing.resummarize), never read
from the summary fields results.json stores beside them; and both
commands refuse while a committed run's stored summaries are not what
its samples give (regenerate() rewrites them), so that results.json and
summary.md say what the tables say.
"""
import contextlib
import functools
import importlib.util
import io
import json
import math
import pathlib
import re
import shlex

from zdinit import paths
from zdinit.families import registry
from zdinit.families import summary
from zdinit.kernel import bases, build
from zdinit.results import report
from zdinit.errors import UsageError, ZdinitError


MARKER = re.compile(r"(<!-- table: (?P<spec>.+?) -->\n)(?P<body>.*?)"
                    r"(?P<end><!-- end table -->)", re.S)


def _run_script(results, run_dir):
    """The table script committed beside a run (table.py, whose render()
    prints markdown), for views the general report does not have."""
    spec = importlib.util.spec_from_file_location(
        f"table_{run_dir.name}", run_dir / "table.py")
    if spec is None or spec.loader is None:
        raise ZdinitError(f"{run_dir / 'table.py'}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        module.render([results])
    return out.getvalue()


def _family_tables(family):
    """The renderer of a family's tables, in the order its tables() gives
    them (a marker's 'part' picks one)."""
    def render(results, run_dir):
        return "\n\n".join(text for _, text in family.tables(
            family.runs_of(results), report.markdown_table) if text)
    return render


# Results kind -> its renderer of markdown tables, called with the run's
# results.json and its directory: each family's own tables, and a table
# script committed beside a run.
RENDERERS = {**{family.name: _family_tables(family)
                for family in registry.FAMILIES},
             "script": _run_script}


def provenance(run):
    """A committed run's results, if it says how it was made and was
    made from a clean tree; otherwise one line why not."""
    path = paths.COMMITTED_RESULTS / run / "results.json"
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


def resummarized(runs):
    """runs, in their order, with every summary field computed again from
    their samples by their family's own code."""
    owners = [registry.owner(r) for r in runs]
    # Each family's records come back in their order: take them in turn.
    fresh = {family.name: iter(family.resummarize(
                 [r for r, owner in zip(runs, owners) if owner is family]))
             for family in registry.FAMILIES}
    return [next(fresh[owner.name]) for owner in owners]


@functools.lru_cache(maxsize=64)
def _resummarized_json(text):
    """resummarized() of the records of a results.json's text, as JSON
    text: computed once per content, since update() checks every run and
    renders some in several tables, and the bootstrap intervals are slow;
    text, so that no caller can change what the next one gets."""
    return json.dumps(resummarized(json.loads(text)["runs"]))


def runs_from_samples(run):
    """A committed run's records with every summary field computed from
    their samples."""
    text = (paths.COMMITTED_RESULTS / run / "results.json").read_text()
    try:
        return json.loads(_resummarized_json(text))
    except KeyError as err:
        raise UsageError(f"docs/results/{run}: a record has no {err}, so "
                         "its summary cannot be computed") from None


def from_samples(run):
    """A committed run's results (see provenance()) with its records'
    summaries computed from their samples, each kernel by today's name
    (build.canonical: a run recorded before the unpatched kernels were
    called stock names them base): what every table shows."""
    return dict(provenance(run), runs=[
        dict(record, kernel=build.canonical(record["kernel"]))
        if "kernel" in record else record
        for record in runs_from_samples(run)])


ABSENT = "absent"


def record_name(record):
    """'7.3 1G none clear stream', 'kmem movable mom: online wall patched
    auto': the row's name in the tables, then its kernel and method."""
    return registry.owner(record).record_name(record)


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def first_difference(stored, fresh, field=""):
    """(field, stored value, fresh value) where stored first differs from
    fresh, as 'vs_base.ci95[0]'; None where they agree.  Floats agree
    within rounding: JSON keeps them exactly, but the same sum in another
    order may differ in its last bit."""
    if isinstance(stored, dict) and isinstance(fresh, dict):
        for key in [*stored, *(k for k in fresh if k not in stored)]:
            name = f"{field}.{key}" if field else key
            if key not in stored or key not in fresh:
                return name, stored.get(key, ABSENT), fresh.get(key, ABSENT)
            found = first_difference(stored[key], fresh[key], name)
            if found:
                return found
        return None
    if isinstance(stored, list) and isinstance(fresh, list) \
            and len(stored) == len(fresh):
        for i, (s, f) in enumerate(zip(stored, fresh)):
            found = first_difference(s, f, f"{field}[{i}]")
            if found:
                return found
        return None
    if _number(stored) and _number(fresh) and math.isclose(
            stored, fresh, rel_tol=1e-9, abs_tol=1e-12):
        return None
    return None if stored == fresh else (field, stored, fresh)


def _shown(value):
    return f"{value:.6g}" if isinstance(value, float) else \
        value if value == ABSENT else json.dumps(value)


def stale_summary(run):
    """One line naming the first record and field whose stored summary a
    committed run's samples do not give, or None."""
    runs = report.load_results(paths.COMMITTED_RESULTS / run / "results.json")["runs"]
    for stored, fresh in zip(runs, runs_from_samples(run)):
        found = first_difference(stored, fresh)
        if found:
            field, was, gives = found
            return (f"docs/results/{run}: '{record_name(stored)}' {field} "
                    f"is {_shown(was)}, its samples give {_shown(gives)}")
    return None


def stale_summaries():
    """stale_summary() of every committed run with a results.json, cited
    by a page or not."""
    runs = sorted(p.parent.name for p in paths.COMMITTED_RESULTS.glob("*/results.json"))
    return [line for line in map(stale_summary, runs) if line]


def check_summaries():
    """Refuse, in one line naming each run and field, while a committed
    run's stored summaries are not what its samples give."""
    stale = stale_summaries()
    if stale:
        raise ZdinitError("stored summaries differ from their samples: "
                          + "; ".join(stale) + " (python3 -c 'from zdinit.docs "
                          "import tables; tables.regenerate(\"RUN\")' "
                          "rewrites them from the samples)")


def regenerate(run):
    """Rewrite a committed run's stored summaries from its samples: the
    summary fields of results.json (nothing else of it) and summary.md,
    which summary.summary_md() renders from the same records."""
    directory = paths.COMMITTED_RESULTS / run
    results = report.load_results(directory / "results.json")
    results["runs"] = resummarized(results["runs"])
    # As summary.write() writes it, without drawing the plots again.
    (directory / "results.json").write_text(json.dumps(results, indent=1)
                                            + "\n")
    (directory / "summary.md").write_text(summary.summary_md(results))


def run_kernels(results):
    """The kernels a run names, by today's names where they have one."""
    named = {key.rpartition("/")[2] for key in results["env"]["kernels"]}
    named |= {r["kernel"] for r in results["runs"] if "kernel" in r}
    return sorted(build.canonical(name) for name in named)


def run_bases(results):
    """The bases of the kernels a run booted, by their releases."""
    releases = results["env"]["kernels"].values()
    return sorted({".".join(r.split(".")[:2]) for r in releases}
                  & set(bases.BASES))


def todays_command(results):
    """The command that repeats a run on today's code: as recorded, with
    the kernels by today's names and --base where the run's base was the
    default then and is not now.  None where the run names a kernel
    today's code lacks."""
    words = shlex.split(results["command"])
    if words[:3] != ["python3", "-m", "zdinit"] or len(words) < 4:
        return results["command"]
    if any(name not in build.VARIANTS for name in run_kernels(results)):
        return None
    def renamed(names):
        return ",".join(build.canonical(k) for k in names.split(","))

    out = []
    for i, word in enumerate(words):
        option, eq, value = word.partition("=")
        if eq and option in ("--kernels", "--kernel"):
            word = f"{option}={renamed(value)}"
        elif (i and words[i - 1] in ("--kernels", "--kernel")) or (
                words[3] == "build" and i > 3 and not word.startswith("-")):
            word = renamed(word)
        out.append(word)
    on = run_bases(results)
    given = any(w.partition("=")[0] == "--base" for w in words)
    if not given and on and on != [bases.DEFAULT]:
        out[4:4] = ["--base", ",".join(on)]
    return shlex.join(out)


def repeat_text(results):
    """How to repeat a run: today's command, or, where the run named a
    kernel today's code lacks, the revision to check out first and the
    command as it was typed there."""
    rev = results["env"]["project_rev"]
    command = todays_command(results)
    if command is not None:
        return f"`{command}` at {rev}"
    gone = [k for k in run_kernels(results) if k not in build.VARIANTS]
    return (f"made at {rev} with kernel{'s' * (len(gone) > 1)} "
            f"{', '.join(f'`{k}`' for k in gone)}, since removed: "
            f"`git checkout {rev[:12]}`, then `{results['command']}`")


def caption(run, results):
    env = results["env"]
    versions = sorted(set(env["kernels"].values()))
    return (f"`docs/results/{run}/`: {repeat_text(results)}; "
            f"kernel{'s' * (len(versions) > 1)} "
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
    parsed: dict = {"columns": None, "where": [], "part": 1, "plot": None}
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
        elif name == "plot":
            parsed["plot"] = value
        else:
            match = re.fullmatch(r"(.+?)\s*(=|~|!~)\s*(.+)", value)
            if not match:
                raise UsageError(f"'where: {value}' is not NAME = VALUE, .., "
                                 "NAME ~ TEXT or NAME !~ TEXT")
            column, op, wanted = match.groups()
            parsed["where"].append(
                (column, op, [w.strip() for w in wanted.split(",")]
                 if op == "=" else wanted))
    return run, kind, parsed


def unique(header):
    """The header with repeated names numbered: 'N', 'N #2', ..."""
    seen: dict[str, int] = {}
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
                if (r[i] in wanted if op == "=" else
                    (wanted in r[i]) == (op == "~"))]
    if not rows:
        raise UsageError("no row is selected")
    keep = [index(c) for c in options["columns"] or header]
    return [[row[i] for i in keep] for row in [shown] + rows]


def plot_line(run, kind, alt, page):
    """The markdown image of a run's plot, by its path from page."""
    family = next((f for f in registry.FAMILIES if f.name == kind), None)
    if family is None or not family.plot_file:
        raise UsageError(f"a {kind} run draws no plot")
    path = paths.COMMITTED_RESULTS / run / family.plot_file
    if not path.is_file():
        raise UsageError(f"docs/results/{run} has no {family.plot_file}")
    up = "../" * (len(pathlib.PurePath(page).parts) - 1)
    return f"\n![{alt}]({up}docs/results/{run}/{family.plot_file})\n"


def render(spec, page="README.md"):
    """The text between a marker and its end: the run, then the table
    (and its plot); page: the page's path from the root, for the plot's
    path."""
    run, kind, options = parse_spec(spec)
    results = from_samples(run)
    text = RENDERERS[kind](results, paths.COMMITTED_RESULTS / run)
    tables = markdown_tables(text)
    if not 1 <= options["part"] <= len(tables):
        raise UsageError(f"part {options['part']}: the renderer printed "
                         f"{len(tables)} tables")
    table = view(tables[options["part"] - 1], options)
    lines = ["| " + " | ".join(row) + " |" for row in table]
    lines.insert(1, "|" + "---|" * len(table[0]))
    plot = plot_line(run, kind, options["plot"], page) if options["plot"] \
        else ""
    return caption(run, results) + "\n\n" + "\n".join(lines) + "\n" + plot


def pages(root=None):
    """README.md and the docs pages (not the runs' own notes)."""
    root = root or paths.ROOT
    return [root / "README.md"] + sorted((root / "docs").glob("*.md"))


def outside_code(lines):
    """lines with each fenced code block, its fences included, blanked
    (line numbers kept): what the checks of a page's prose read."""
    out, fenced = [], False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


def render_page(text, name):
    """text with every marked table rendered again."""
    def one(match):
        try:
            body = render(match["spec"], name)
        except (ZdinitError, ValueError) as err:
            raise UsageError(f"{name}: table '{match['spec']}': {err}") \
                from None
        return match.group(1) + body + match["end"]
    return MARKER.sub(one, text)


def changed_tables(old, new):
    """The specs of the marked tables whose bodies differ between two
    texts of a page (the same markers in the same order)."""
    return [was["spec"] for was, now in zip(MARKER.finditer(old),
                                            MARKER.finditer(new))
            if was["body"] != now["body"]]


def stale_text(stale):
    """update()'s stale tables in words: 'PAGE: table 'SPEC', ...; ...'."""
    return "; ".join(f"{page}: " + ", ".join(f"table '{spec}'"
                                             for spec in specs)
                     for page, specs in stale.items())


def update(check=False, root=None):
    """Render every page's tables; returns {page: [spec, ...]} of the
    tables that were (with check: would be) changed, and the number of
    tables.  Refused first while a committed run's stored summaries are
    not what its samples give (check_summaries())."""
    check_summaries()
    root = root or paths.ROOT
    stale, count = {}, 0
    for page in pages(root):
        text = page.read_text()
        name = str(page.relative_to(root))
        new = render_page(text, name)
        count += len(MARKER.findall(text))
        if new != text:
            stale[name] = changed_tables(text, new)
            if not check:
                page.write_text(new)
    return stale, count
