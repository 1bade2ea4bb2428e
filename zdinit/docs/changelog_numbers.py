"""The numbers in the patches' changelogs and cover letters, checked
against the runs they come from, as typed_numbers checks the pages.

A changelog goes to a mailing list and is regenerated with `git
format-patch`: it can carry no HTML comment, and nothing below its `---`
survives.  So the binding lives beside the patches, one file per
directory of patches, `numbers` (SIDECAR), which regeneration leaves
alone:

    # comments and blank lines are ignored
    0004-mm-build-the-memmap-of-a-large-ZONE_DEVICE-range-on-.patch:
        bench-100g-padata-7.3 lab-xeon-emr-16cpu/README.md
        1131.7 ms: bench-100g-padata-series-7.3
        1.9x = 22.61 / 12.01

A line that starts with a patch file's name and a colon begins its
entry; the words after the colon, and those of the indented lines that
follow, name runs under docs/results/, or files and folders of runs
("lab-zen3/run1/lab.json"), whose numbers alone then count: a lab run
holds thousands, among which a wrong number would too often find
itself.  An indented line `QUANTITY: RUNS` checks that quantity, as
written in the changelog, against those runs alone.  An indented line
`QUANTITY = EXPR` is an arithmetic mark: the quantity ("1.9x", "26
million", "21 to 26 per cent") is checked by evaluating EXPR as
typed_numbers does a page's `<!-- = EXPR -->`, and each number of EXPR
written with decimals, a measurement, must be in a file of the runs.
Every other measured quantity of the message (the commit message down
to `---`; a cover letter down to its shortlog or `base-commit:`) must
be given by the files of the runs its entry names, together.

Each fault is one line naming the patch file: a quantity no named run
holds, a patch with measured quantities and no entry, an entry for no
patch file, a run that is not committed, a mark or a binding whose
quantity the message no longer has (so that a number bound or marked
cannot change in the changelog alone).
"""
import dataclasses
import pathlib
import re

from zdinit import paths
from zdinit.docs import typed_numbers

SIDECAR = "numbers"
# Where a commit message ends, and where a cover letter's own text does:
# the shortlog git format-patch writes ("Jane Doe (3):"), the base.
MESSAGE_END = re.compile(r"^(?:---|-- |base-commit: .*|\S.* \(\d+\):)$")
ENTRY = re.compile(r"^(\S+\.patch):(.*)$")
MARK = re.compile(r"^\s+(.+?) = (.+)$")
BINDING = re.compile(r"^\s+(.+?): (.+)$")
# An indented line with a gap between columns (not the two spaces after
# a full stop) is a row of a table: a block of its own, so that a unit
# at the start of the next row ("us, THP: ...") is not read as this
# row's.
TABLE_ROW = re.compile(r"^\s+\S.*[^.:!?\s] {2,}\S")
# A number an arithmetic mark computes with: one with decimals is a
# measurement, which a run of its entry must hold.
OPERAND = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")


@dataclasses.dataclass
class Entry:
    line: int                 # the sidecar line that begins it
    runs: list = dataclasses.field(default_factory=list)
    marks: dict = dataclasses.field(default_factory=dict)  # text: expr
    # text: runs, for a quantity whose runs are fewer than the entry's
    bound: dict = dataclasses.field(default_factory=dict)


def message_blocks(patch):
    """The paragraphs of a patch file's commit message or cover letter
    text, headers but the subject left out, each a typed_numbers.Block
    with no runs yet."""
    name = typed_numbers.page_name(patch)
    lines = patch.read_text().splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.startswith("Subject:")), 0)
    out, current = [], None
    for i in range(start, len(lines)):
        line = lines[i]
        if MESSAGE_END.match(line):
            break
        if not line.strip():
            current = None
        elif TABLE_ROW.match(line):
            out.append(typed_numbers.Block(name, i + 1, line, []))
            current = None
        elif current is None:
            current = typed_numbers.Block(name, i + 1, line, [])
            out.append(current)
        else:
            current.text += "\n" + line
    return out


def read_sidecar(path):
    """{patch file name: Entry} of a sidecar, and one line per line it
    cannot read."""
    entries: dict = {}
    problems = []
    entry = None
    where = typed_numbers.page_name(path)
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        head = ENTRY.match(line)
        mark = MARK.match(line)
        binding = BINDING.match(line)
        if head:
            entry = entries[head[1]] = Entry(i, head[2].split())
        elif entry is None or not line[0].isspace():
            problems.append(f"{where}:{i}: neither 'FILE.patch: RUNS' nor "
                            "an indented line of an entry")
        elif mark:
            entry.marks[mark[1]] = mark[2]
        elif binding:
            entry.bound[binding[1]] = binding[2].split()
        else:
            entry.runs += line.split()
    return entries, problems


def series_dirs():
    """The directories holding patch files: patches/ and each series."""
    return sorted({p.parent for p in paths.PATCHES.rglob("*.patch")})


def entry_evidence(runs):
    """The numbers of every run, file or folder an entry names, as one:
    a changelog's range may join two runs ("0.349 to 0.651 ms")."""
    merged = typed_numbers.Evidence()
    for run in runs:
        found = typed_numbers.evidence(run)
        for field in dataclasses.fields(merged):
            getattr(merged, field.name).update(getattr(found, field.name))
    return merged


def _operand_found(text, found):
    """Whether the evidence gives the number as written: as a number of
    its files, or a time of them in s, ms or us."""
    value, ulp = float(text), 10.0 ** -len(text.partition(".")[2])
    candidates = found.numbers | {t * scale for t in found.seconds
                                  for scale in (1e3, 1e6)}
    return typed_numbers._gives(candidates, value, ulp)


def _where(block, quantity):
    return f"{block.page}:{block.line}: '{quantity.text}'"


def _runs_named(runs):
    return (", ".join(f"docs/results/{r}" for r in runs)
            or "no run (its entry names none)")


def check_quantity(quantity, block, entry, found):
    """None if the quantity is backed, else why not: its mark redone and
    the mark's measured operands found, or the number itself found, in
    the runs of its entry."""
    quantity.mark = entry.marks.get(quantity.text)
    runs = entry.bound.get(quantity.text, entry.runs)
    if quantity.text in entry.bound:
        found = entry_evidence(runs)
    if quantity.mark is None:
        if runs and typed_numbers.matches(quantity, found):
            return None
        return f"{_where(block, quantity)} is in no file of " \
            f"{_runs_named(runs)}"
    why = typed_numbers.check_quantity(quantity, block)
    if why:
        return why
    missing = [o for o in OPERAND.findall(quantity.mark)
               if not _operand_found(o, found)]
    if missing:
        return (f"{_where(block, quantity)}: its mark's {missing[0]} is in "
                f"no file of {_runs_named(runs)}")
    return None


def check_patch(patch, entry):
    """One line per quantity of the patch's message that neither a run of
    its entry nor its mark gives."""
    problems = []
    found = entry_evidence(entry.runs) if entry else None
    for block in message_blocks(patch):
        quantities = typed_numbers.quantities(block.text)
        if quantities and entry is None:
            return [f"{_where(block, quantities[0])} but {SIDECAR} beside "
                    f"it has no entry for {patch.name}: name the runs it "
                    "comes from"]
        for quantity in quantities:
            why = check_quantity(quantity, block, entry, found)
            if why:
                problems.append(why)
    return problems


def check_dir(directory):
    """Every fault of one directory's patches and sidecar, one line each."""
    directory = pathlib.Path(directory)
    sidecar = directory / SIDECAR
    entries, problems = read_sidecar(sidecar) if sidecar.is_file() \
        else ({}, [])
    where = typed_numbers.page_name(sidecar)
    patches = {p.name: p for p in sorted(directory.glob("*.patch"))}
    for name, entry in entries.items():
        if name not in patches:
            problems.append(f"{where}:{entry.line}: {name} is no patch "
                            "file here")
            continue
        for run in entry.runs:
            if not (paths.COMMITTED_RESULTS / run).exists():
                problems.append(f"{where}:{entry.line}: {name}: no run "
                                f"docs/results/{run}/")
        written = {q.text for block in message_blocks(patches[name])
                   for q in typed_numbers.quantities(block.text)}
        for text in (entry.marks.keys() | entry.bound.keys()) - written:
            problems.append(f"{where}: {name} has no '{text}' for its "
                            "mark or runs")
        for run in {r for runs in entry.bound.values() for r in runs}:
            if not (paths.COMMITTED_RESULTS / run).exists():
                problems.append(f"{where}:{entry.line}: {name}: no run "
                                f"docs/results/{run}/")
    if problems:
        return problems
    for name, patch in patches.items():
        problems += check_patch(patch, entries.get(name))
    return problems


def unbacked(directories=None):
    """Every fault of the patches' changelogs and sidecars, one line
    each."""
    problems = []
    for directory in directories or series_dirs():
        problems += check_dir(directory)
    return problems
