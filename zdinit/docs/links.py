"""The relative links of README.md and docs/*.md, and whether each names a
file of the checkout and, where it has one, a heading of that page.

A link is markdown's [text](target) or ![alt](target), outside code; a
target with a scheme (https:, mailto:) is the web's and not checked.  An
anchor is checked in a markdown page only: GitHub's slug of a heading
(lower case, punctuation dropped, spaces as hyphens).
"""
import re

from zdinit import paths
from zdinit.docs import tables

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`\n]*`")


def slug(heading):
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page):
    """The anchors of a markdown page's headings, outside code blocks."""
    lines = tables.outside_code(page.read_text().splitlines())
    return {slug(m[1]) for line in lines
            if (m := re.match(r"#+\s+(.*)", line))}


def targets(text):
    """(line, target) of each link of a page's text, code left out."""
    lines = tables.outside_code(text.splitlines())
    return [(i, m[1]) for i, line in enumerate(lines, 1)
            for m in LINK.finditer(CODE_SPAN.sub("", line))]


def why_broken(page, target):
    """None if the relative target resolves from page, else why not."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target):
        return None                     # https:, mailto: ...
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
        return f"no file {file.relative_to(paths.ROOT.resolve())}" \
            if file.is_relative_to(paths.ROOT.resolve()) else "no such file"
    if anchor and file.suffix == ".md" and anchor not in anchors(file):
        return f"no heading #{anchor} in {file.name}"
    return None


def broken(pages=None):
    """One line for each relative link of the pages that resolves to no
    file, or to no heading of its page."""
    out = []
    for page in pages or tables.pages():
        name = page.relative_to(paths.ROOT) \
            if page.is_relative_to(paths.ROOT) else page.name
        out += [f"{name}:{line}: link ({target}): {why}"
                for line, target in targets(page.read_text())
                if (why := why_broken(page, target))]
    return out
