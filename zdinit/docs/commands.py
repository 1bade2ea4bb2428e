"""The command lines README.md and docs/*.md show, and whether the project
still offers each as written.

A command line is each command of a page's `sh` code blocks and each
inline code span that starts like one of the project's commands
(`python3 -m zdinit ...`, `make ...`, a script or program of the
checkout): the line above each rendered table among them.  A span with a
placeholder (`[--base B]`, `COMMAND`, `<run>`) is a synopsis, not a
command, and is left out.  A command after `git checkout REV` in the
same paragraph is one for that revision: it is listed with it and not
checked against today's code (the commit check sees that REV exists).

refused() says why a line is not taken: zdinit commands through the
checker the caller passes (the CLI's parse and each command's checks,
which this layer cannot import), make targets against the Makefile,
scripts by their path, the lab's programs against its Makefile.
"""
import dataclasses
import re
import shlex

from zdinit import paths
from zdinit.docs import tables

ZDINIT = ["python3", "-m", "zdinit"]
# How an inline span that is a command starts.
COMMAND_START = re.compile(
    r"(?:[A-Z_]+=\S* )*(?:(?:/usr/bin/)?python3 |make(?: |$)|lab/build/|"
    r"docs/results/\S+\.py)")
# A synopsis: an optional part, a list, a placeholder word or path.
PLACEHOLDER = re.compile(r"[\[\]<>|]|\.\.|(?:^|\s)[A-Z][A-Z_]*(?=\s|$)")
CHECKOUT = re.compile(r"`git checkout ([0-9a-f]{7,40})`")
# The project whose commands they are: the checkout this module is in,
# wherever the pages are read from (paths.ROOT may name a copy of them).
PROJECT = paths.ROOT


@dataclasses.dataclass
class CommandLine:
    page: str
    line: int
    text: str
    revision: str | None = None     # the commit it is for; None: today's

    def where(self):
        return f"{self.page}:{self.line}: `{self.text}`"


def _fenced(lines):
    """The sh code blocks' commands, (line number, command), and the
    lines with every code block blanked (numbers kept)."""
    found, prose, block = [], [], None
    for i, line in enumerate(lines, 1):
        if line.startswith("```"):
            block = None if block is not None else line[3:].strip()
            prose.append("")
            continue
        if block is None:
            prose.append(line)
            continue
        prose.append("")
        if block == "sh":
            found.append((i, line))
    commands, pending = [], None
    for i, line in found:
        # A continuation line joins the next.
        if pending:
            line, i = pending[1] + " " + line, pending[0]
            pending = None
        if line.rstrip().endswith("\\"):
            pending = (i, line.rstrip()[:-1])
            continue
        line = re.sub(r"(^|\s)#.*", "", line).strip()
        commands += [(i, c.strip()) for c in re.split(r"&&|;", line)
                     if c.strip()]
    return commands, prose


def _spans(prose):
    """Inline code spans that are commands, (line, span, revision): a
    span may wrap across lines; a paragraph's `git checkout REV` holds
    for the spans after it."""
    text = "\n".join(prose)
    out = []
    for paragraph in re.finditer(r"(?:.+\n?)+", text):
        first = text.count("\n", 0, paragraph.start()) + 1
        body = paragraph.group(0)
        checkouts = [(m.start(), m[1]) for m in CHECKOUT.finditer(body)]
        for match in re.finditer(r"`([^`]+)`", body):
            span = " ".join(match[1].split())
            if not COMMAND_START.match(span) or PLACEHOLDER.search(span) \
                    or span == " ".join(ZDINIT):      # the tool's name
                continue
            revision = next((rev for at, rev in reversed(checkouts)
                             if at < match.start()), None)
            out.append((first + body.count("\n", 0, match.start()), span,
                        revision))
    return out


def command_lines(pages=None):
    """Every command line of the pages, in page order."""
    out = []
    for page in pages or tables.pages():
        name = str(page.relative_to(paths.ROOT)) \
            if page.is_relative_to(paths.ROOT) else page.name
        fenced, prose = _fenced(page.read_text().splitlines())
        found = [(i, c, None) for i, c in fenced] + _spans(prose)
        out += [CommandLine(name, i, c, rev) for i, c, rev in sorted(
            found, key=lambda f: f[0])]
    return out


def make_targets(root=None):
    """The Makefile's targets, as its .PHONY line lists them."""
    makefile = ((root or PROJECT) / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", makefile, re.M)
    return phony[1].split() if phony else []


def refused(command, zdinit_check):
    """None if the project offers the command as written, else why not.
    zdinit_check(argv) answers for zdinit's own commands.  Programs
    outside the project (git, ndctl, dmesg) are the system's and not
    checked; a path must name a file of the project or one the lab's
    Makefile builds."""
    try:
        words = shlex.split(command)
    except ValueError as err:
        return f"not a shell command: {err}"
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        words = words[1:]              # VAR=value for the command
    if not words:
        return None
    if words[0] == "/usr/bin/python3":
        words[0] = "python3"
    if words[:3] == ZDINIT:
        return zdinit_check(words[3:])
    if words[0] == "make":
        if "-C" in words:
            return None if (PROJECT / words[words.index("-C") + 1]) \
                .is_dir() else "no such directory"
        unknown = [w for w in words[1:]
                   if "=" not in w and w not in make_targets()]
        return f"no make target {', '.join(unknown)}" if unknown else None
    if words[0] == "python3" and len(words) > 1 \
            and not words[1].startswith("-"):
        words = words[1:]
    if words[0].startswith("lab/build/"):
        built = words[0].removeprefix("lab/build/")
        return None if f"$(BUILD)/{built}:" in (
            PROJECT / "lab" / "Makefile").read_text() \
            else "the lab builds no such program"
    if "/" in words[0] and not words[0].startswith("/"):
        return None if (PROJECT / words[0]).exists() else "no such file"
    return None


def refusals(zdinit_check, pages=None):
    """One line for each of today's command lines the project refuses."""
    return [f"{line.where()}: {why}" for line in command_lines(pages)
            if line.revision is None
            and (why := refused(line.text, zdinit_check))]
