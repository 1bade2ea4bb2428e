"""README.md reads in one screen: at most 200 lines, and the two
commands, what they need and the headline table in its first 60."""
import re

from conftest import ROOT
from zdinit.docs import tables

MAX_LINES = 200
FIRST_SCREEN = 60


def readme():
    return (ROOT / "README.md").read_text()


def where(pattern, text):
    """The line number of the first match, or None."""
    match = re.search(pattern, text, re.M)
    return text.count("\n", 0, match.end()) + 1 if match else None


def first_screen_problems(text):
    lines = text.count("\n")
    problems = [f"{lines} lines, more than {MAX_LINES}"] \
        if lines > MAX_LINES else []
    wanted = {"the two commands": r"^make bench\b.*\n^make test\b",
              "what they need": r"^## What they need",
              # Its marker, and the table's header row after it.
              "the headline table": r"^<!-- table: \S+ rebind;.*\n(?:.*\n)*?"
                                    r"\| "}
    for what, pattern in wanted.items():
        line = where(pattern, text)
        if line is None or line > FIRST_SCREEN:
            problems.append(f"{what} at line {line}, not in the first "
                            f"{FIRST_SCREEN}")
    return problems


def test_the_readme_reads_in_one_screen():
    assert not first_screen_problems(readme())


def test_the_check_sees_a_long_readme_and_a_late_headline():
    text = readme()
    marker = next(tables.MARKER.finditer(text))
    late = text[:marker.start()] + "filler\n" * 60 + text[marker.start():]
    problems = first_screen_problems(late)
    assert any(p.startswith("the headline table at line") for p in problems)
    assert any(p.endswith(f"more than {MAX_LINES}")
               for p in first_screen_problems(text + "x\n" * MAX_LINES))


def test_the_headline_names_its_comparators():
    """The headline's ratios are against stock and the kernel upstream,
    each by its own name."""
    spec = next(tables.MARKER.finditer(readme()))["spec"]
    assert "speedup vs stock [95% CI]" in spec
    assert "speedup vs upstream [95% CI]" in spec
    assert "plot:" in spec, "the plot is no longer the marker's"
