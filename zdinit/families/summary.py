"""A run's results directory as people read it: summary.md and the text
a command prints, from each family's own tables and notes, and its
plots."""
import json
import pathlib

from zdinit.families import registry
from zdinit.results import report


def tables(results, table=report.markdown_table):
    """[(family, [(title, table)], notes)] for the families the run has,
    table being report.markdown_table or report.text_table."""
    out = []
    for family in registry.FAMILIES:
        runs = family.runs_of(results)
        if runs:
            out.append((family, [(t, text) for t, text in
                                 family.tables(runs, table) if text],
                        family.notes(results)))
    return out


def summary_md(results):
    present = tables(results)
    lines = ["# zdinit results", "", *report.header_lines(
        results, placement=any(f.shows_placement for f, _, _ in present))]
    for family, family_tables, notes in present:
        lines += ["", f"## {family.title}", ""]
        lines += [note + "\n" for note in notes]
        for title, text in family_tables:
            lines += ([f"### {title}", ""] if title else []) + [text, ""]
    return "\n".join(lines).rstrip() + "\n"


def text_report(results):
    """What a command prints when its run is done."""
    parts = []
    for family, family_tables, notes in tables(results, report.text_table):
        for title, text in family_tables:
            parts.append(f"{title}:\n\n{text}" if title else text)
        if family.prints_notes:
            parts += notes
    return "\n\n".join(parts)


def write(results, directory):
    """results.json, summary.md and each family's plot into directory."""
    directory = pathlib.Path(directory)
    (directory / "results.json").write_text(json.dumps(results, indent=1)
                                            + "\n")
    (directory / "summary.md").write_text(summary_md(results))
    for family in registry.FAMILIES:
        runs = family.runs_of(results)
        if runs and family.plot_file:
            report.save_plot(family.plot, runs, directory / family.plot_file)
