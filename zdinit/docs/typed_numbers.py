"""The numbers typed into the docs' prose, checked against the runs they
come from.

zdinit.docs renders every results table, so no table cell can drift; a
number typed into a sentence can.  This module finds, in README.md and
docs/*.md outside code blocks and rendered tables, every measured
quantity (a time, a ratio, a rate, a percentage, a count, a size) and
checks it against the files of the run it cites or sits beside:

- a paragraph, list item or table row that names `docs/results/RUN/`
  is checked against those runs' files;
- one that names none is checked against the runs its section's
  rendered tables come from: it sits beside them;
- a quantity followed by an arithmetic mark, `<!-- = EXPR -->`, is
  instead checked by evaluating EXPR (numbers, + - * / ( ), and the
  units below), which must give it at the precision it is written with;
  a list or range ("21 to 26 per cent") takes one expression per number,
  separated by commas.  The mark is an HTML comment: no reader sees it.

A quantity matches a run when some number in the run's files (any
results.json field, any number in its logs and notes, times read with
their units) gives it at the precision it is written with: "59 min 45 s"
needs a duration of 3584 to 3586 s, "1.13x" a number that rounds to
1.13.  Ratios are measured to two decimals (a whole "2x" is a bound or a
goal), and the sizes the kernel defines (DEFINED_SIZES) are no
measurements.  Prose that neither names a run nor sits beside a
rendered table is not checked unless it carries a mark.

Every commit a page cites (a hexadecimal word of 7 to 40 digits with
both letters and digits) must exist in the repository's history.
"""
import ast
import dataclasses
import gzip
import json
import operator
import re
import subprocess

from zdinit import paths
from zdinit.docs import tables


# Unit words -> (kind, scale to the kind's base unit: seconds, bytes, 1).
UNITS = {
    "us": ("time", 1e-6), "µs": ("time", 1e-6),
    "ms": ("time", 1e-3), "s": ("time", 1), "seconds": ("time", 1),
    "min": ("time", 60), "minutes": ("time", 60), "minute": ("time", 60),
    "h": ("time", 3600), "hours": ("time", 3600), "hour": ("time", 3600),
    "x": ("ratio", 1), "GB/s": ("rate", 1), "%": ("percent", 1),
    "per cent": ("percent", 1), "million": ("count", 1e6),
    # Millions of instructions: a bench --icount record keeps them where
    # a timed one keeps milliseconds, one for one (docs/venues.md).
    "Minstr": ("count", 1),
    "passed": ("count", 1), "failed": ("count", 1), "skipped": ("count", 1),
    "object files": ("count", 1), "rows": ("count", 1),
    "KB": ("size", 1e3), "KiB": ("size", 2 ** 10), "MB": ("size", 1e6),
    "MiB": ("size", 2 ** 20), "GB": ("size", 1e9), "GiB": ("size", 2 ** 30),
    "TB": ("size", 1e12), "TiB": ("size", 2 ** 40),
}
# Names an arithmetic mark may use, in the base units above.
CONSTANTS = {"KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40,
             "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
             "min": 60, "h": 3600, "million": 1e6}

NUMBER = r"\d[\d,]*(?:\.\d+)?"
UNIT = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
# "1 min 5 s", "66 min 30 s"
MIN_SEC = re.compile(r"\b(\d+) min (\d+) s\b")
# "58.90, 222.56 and 137.48 ms", "2.01x-3.18x", "21 to 26 per cent",
# "13.4 against 11.7 GB/s": the numbers of a list, range or comparison
# share the unit written after the last.
# A comma list must be of decimals ("Zen 5, 32 MB" is no list).
DECIMAL = r"\d[\d,]*\.\d+"
QUANTITY = re.compile(
    rf"(?<![\w.\-/])((?:{DECIMAL}x?, )*"
    rf"(?:{NUMBER}x?(?: and | or | to | against |-|–))*"
    rf"{NUMBER})\s?({UNIT})(?![\w/])")
MARK = re.compile(r"\s*<!-- = (.+?) -->")
RUN_NAME = re.compile(r"(?<![\w/])(?:docs/)?results/([A-Za-z0-9._-]+)")
COMMIT = re.compile(r"(?<![\w/.-])[0-9a-f]{7,40}(?![\w/-])")


@dataclasses.dataclass
class Quantity:
    text: str            # as written, e.g. "66 min 30 s"
    kind: str            # time, ratio, rate, percent, count, size
    values: list         # each number in the kind's base unit
    ulps: list           # each number's last written digit, same unit
    unit: str = ""       # the unit word as written
    mark: str | None = None  # the arithmetic mark's expression, if any


@dataclasses.dataclass
class Block:
    page: str
    line: int
    text: str
    runs: list           # the runs it is checked against


def _number(text):
    return float(text.replace(",", ""))


def _ulp(text):
    decimals = text.partition(".")[2]
    return 10.0 ** -len(decimals)


# Sizes the kernel defines rather than any run measures: x86-64's base,
# PMD and PUD page sizes, the memory block size onlining works in and
# the largest x86-64 uses (2 GiB), and the clear series' batch.  They
# read as numbers but are definitions.
DEFINED_SIZES = {4 * 2 ** 10, 2 * 2 ** 20, 2 ** 30, 128 * 2 ** 20,
                 2 * 2 ** 30, 32 * 2 ** 20}


def measured(kind, unit, numbers):
    """Whether a quantity is a measurement the check must back: ratios
    are measured to two decimals (a whole '2x' is a bound or a goal), and
    a defined size is no measurement."""
    if kind == "ratio":
        return all("." in n for n in numbers)
    if kind == "size" and len(numbers) == 1:
        value = _number(numbers[0]) * UNITS[unit][1]
        binary = value / SIZE_DECIMAL_TO_BINARY.get(unit, 1)
        return not ({value, binary} & DEFINED_SIZES)
    return True


def quantities(text):
    """Every measured quantity of a block, each with its mark if any."""
    text = re.sub(r"\s+", " ", text)      # a sentence wraps anywhere
    found, taken = [], []
    for match in MIN_SEC.finditer(text):
        minutes, seconds = map(int, match.groups())
        found.append((match, Quantity(match[0], "time",
                                      [minutes * 60 + seconds], [1], "s")))
        taken.append(match.span())
    for match in QUANTITY.finditer(text):
        if any(a <= match.start() < b for a, b in taken):
            continue
        if match[2] == "h" and not match[0][-2].isspace():
            continue    # "family 19h": a CPUID value in hexadecimal
        numbers = re.findall(NUMBER, match[1])
        kind, scale = UNITS[match[2]]
        quantity_text = match[0]
        if kind == "ratio" and "." in numbers[-1] and \
                not all("." in n for n in numbers):
            # "Zen 5 and 1.13x": a whole number before a measured ratio
            # names something; the ratio starts after it.
            last_whole = [m for m in re.finditer(NUMBER, match[1])
                          if "." not in m[0]][-1]
            rest = match[0][last_whole.end():]
            quantity_text = rest[next(re.finditer(NUMBER, rest)).start():]
            numbers = re.findall(NUMBER, quantity_text.removesuffix(
                match[2]))
        if not measured(kind, match[2], numbers):
            continue
        found.append((match, Quantity(
            quantity_text, kind, [_number(n) * scale for n in numbers],
            [_ulp(n) * scale for n in numbers], match[2])))
    out = []
    for match, quantity in sorted(found, key=lambda f: f[0].start()):
        mark = MARK.match(text, match.end())
        if mark:
            quantity.mark = mark[1]
        out.append(quantity)
    return out


def _prose_lines(page_text):
    """The page's lines with code blocks and rendered tables blanked out
    (line numbers kept), and the runs its rendered tables come from, by
    line."""
    lines = page_text.splitlines()
    table_runs = {}
    for match in tables.MARKER.finditer(page_text):
        first = page_text.count("\n", 0, match.start())
        last = page_text.count("\n", 0, match.end())
        table_runs[first] = match["spec"].split()[0]
        for i in range(first, last + 1):
            lines[i] = ""
    return tables.outside_code(lines), table_runs


def _existing_runs(text):
    return [name for name in RUN_NAME.findall(text)
            if (paths.COMMITTED_RESULTS / name).is_dir()]


def page_name(path):
    """A file as a message names it: from the checkout's root, or by its
    name alone outside it (a test's copy)."""
    return path.relative_to(paths.ROOT).as_posix() \
        if path.is_relative_to(paths.ROOT) else path.name


def blocks(page):
    """The page's paragraphs, list items and table rows, each with the
    runs it is checked against."""
    name = page_name(page)
    lines, table_runs = _prose_lines(page.read_text())
    sections: list = []
    current: list = []
    start = 0
    for i, line in enumerate(lines + ["# end"]):
        if line.startswith("#"):
            sections.append((start, current))
            current, start = [], i + 1
        elif i in table_runs:
            current.append((i, None))
        else:
            current.append((i, line))
    out = []
    for first, section in sections:
        runs = [table_runs[i] for i, line in section if line is None]
        pieces: list = []
        for i, line in section:
            if line is None or not line.strip():
                pieces.append(None)
            elif re.match(r"\s*(?:[-*]|\d+\.|\|) ", line) or \
                    line.startswith("|") or not pieces or pieces[-1] is None:
                pieces.append([i, line])
            else:
                pieces[-1][1] += "\n" + line
        pieces = [p for p in pieces if p]
        for i, text in pieces:
            named = _existing_runs(text)
            out.append(Block(name, i + 1, text,
                             sorted(set(named or runs))))
    return out


# Durations written in logs and notes, read into seconds.
DURATIONS = [
    (re.compile(r"\b(\d+)m(\d+(?:\.\d+)?)s\b"),            # real 59m45.1s
     lambda m: int(m[1]) * 60 + float(m[2])),
    (re.compile(r"\b(\d+):(\d\d):(\d\d(?:\.\d+)?)\b"),      # 0:35:06
     lambda m: int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3])),
    (re.compile(r"\b(\d+):(\d\d(?:\.\d+)?)\b"),             # 36:11.53
     lambda m: int(m[1]) * 60 + float(m[2])),
    (re.compile(r"\b(\d+) min (\d+) s\b"),
     lambda m: int(m[1]) * 60 + int(m[2])),
    (re.compile(rf"\b({NUMBER}) ?(us|µs|ms|s|sec|seconds|min|minutes|h|"
                rf"hours)\b"),
     lambda m: _number(m[1]) * {"us": 1e-6, "µs": 1e-6, "ms": 1e-3,
                                "min": 60, "minutes": 60, "h": 3600,
                                "hours": 3600}.get(m[2], 1)),
]
# results.json fields holding times, by the end of their name.
TIME_FIELDS = {"_ms": 1e-3, "ms": 1e-3, "_ns": 1e-9, "_s": 1, "_us": 1e-6}
# results.json fields holding a rate as a summary shows it (a median or a
# percentile), not a run's slowest or fastest sample, which prose does not
# quote and which would make any nearby number look backed.
RATE_FIELD = re.compile(r"(median_|p\d+_)?gbps|gb_per_s")
# Time fields that are no summary prose quotes, for the same reason: a
# run's slowest and fastest repetition, the lab's streaming floor, and
# rates whose names end like a time ("gb_per_s").
NOT_A_TIME = re.compile(r"(min|max|mean|stdev)_[mnu]?s|floor_ns|.*per_s")

# Sizes as a run writes them: "--size 100G", "16 GiB", "2M", "512 MiB".
SIZE_TOKEN = re.compile(rf"\b({NUMBER}) ?([KMGT])(?:i?B)?\b")


@dataclasses.dataclass
class Evidence:
    numbers: set = dataclasses.field(default_factory=set)
    seconds: set = dataclasses.field(default_factory=set)
    ratios: set = dataclasses.field(default_factory=set)
    rates: set = dataclasses.field(default_factory=set)     # GB/s
    sizes: set = dataclasses.field(default_factory=set)     # bytes

    def add_text(self, text):
        self.numbers.update(_number(n) for n in re.findall(NUMBER, text))
        self.ratios.update(_number(n) for n in
                           re.findall(rf"({NUMBER})x\b", text))
        self.rates.update(_number(n) for n in
                          re.findall(rf"({NUMBER}) ?GB/s", text))
        for number, prefix in SIZE_TOKEN.findall(text):
            self.sizes.add(_number(number) * 1024 ** " KMGT".index(prefix))
        for pattern, seconds in DURATIONS:
            self.seconds.update(seconds(m) for m in pattern.finditer(text))

    def add_json(self, value, key=""):
        if isinstance(value, dict):
            for k, v in value.items():
                self.add_json(v, k)
        elif isinstance(value, list):
            # Raw samples back a summary (the docs check recomputes each
            # summary from them), not a number typed in prose: among
            # thousands of samples nearly any number would be found.
            if not key.startswith("samples"):
                for v in value:
                    self.add_json(v, key)
        elif isinstance(value, str):
            self.add_text(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self.numbers.add(float(value))
            if key == "speedup":
                self.ratios.add(float(value))
            if RATE_FIELD.fullmatch(key):
                self.rates.add(float(value))
            if key.endswith("bytes") or key == "size":
                self.sizes.add(float(value))
            for end, scale in TIME_FIELDS.items():
                if key.endswith(end) and not NOT_A_TIME.fullmatch(key):
                    self.seconds.add(value * scale)
                    break


def _run_texts(run_dir):
    """Every readable file of a run, or the one file named (gzip'd logs
    unpacked), as text or as parsed JSON."""
    files = [run_dir] if run_dir.is_file() else run_dir.rglob("*")
    for path in sorted(files):
        if not path.is_file() or path.suffix in (".png", ".svg"):
            continue
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        text = raw.decode(errors="replace")
        if path.suffix == ".json":
            try:
                yield json.loads(text)
                continue
            except ValueError:
                pass
        yield text


_EVIDENCE = {}


def evidence(run):
    """The numbers and durations in a run's files, read once.  run may
    also name a file or folder inside one ("lab-zen3/run1/lab.json"):
    its numbers alone."""
    if run not in _EVIDENCE:
        found = Evidence()
        for item in _run_texts(paths.COMMITTED_RESULTS / run):
            if isinstance(item, str):
                found.add_text(item)
            else:
                found.add_json(item)
        run_dir = paths.COMMITTED_RESULTS / run
        if (run_dir / "table.py").is_file() and \
                (run_dir / "results.json").is_file():
            # What the run's own table script computes from its samples
            # (a script the docs render: its run records its command).
            found.add_text(tables.RENDERERS["script"](
                tables.provenance(run), paths.COMMITTED_RESULTS / run))
        _EVIDENCE[run] = found
    return _EVIDENCE[run]


SIZE_DECIMAL_TO_BINARY = {"KB": 1e3 / 2 ** 10, "MB": 1e6 / 2 ** 20,
                          "GB": 1e9 / 2 ** 30, "TB": 1e12 / 2 ** 40}


def _gives(candidates, value, ulp):
    """A candidate that gives the value at its last written digit,
    rounded or truncated (a little slack for binary fractions)."""
    low, high = value - ulp / 2 - 1e-9 * ulp, value + ulp * (1 - 1e-9)
    return any(low <= c < high for c in candidates)


def _readings(quantity):
    """Factors from the unit as written to what it may mean: "GB" in
    prose is as often GiB, so a size is read both ways."""
    if quantity.kind == "size":
        return (1, 1 / SIZE_DECIMAL_TO_BINARY.get(quantity.unit, 1))
    return (1,)


def matches(quantity, found):
    """Each number of the quantity is given by the run's files."""
    for value, ulp in zip(quantity.values, quantity.ulps):
        if quantity.kind == "size":
            if not any(_gives(found.sizes, value * s, ulp * s)
                       for s in _readings(quantity)):
                return False
            continue
        candidates = {"time": found.seconds, "ratio": found.ratios,
                      "rate": found.rates}.get(quantity.kind, found.numbers)
        if quantity.unit == "million":
            candidates = {n / 1e6 for n in candidates}
            value, ulp = value / 1e6, ulp / 1e6
        if not _gives(candidates, value, ulp):
            return False
    return True


OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub,
             ast.Mult: operator.mul, ast.Div: operator.truediv,
             ast.Pow: operator.pow}


def evaluate(expression):
    """An arithmetic mark's values: numbers, + - * / ** ( ) and the
    CONSTANTS, comma-separated."""
    def value(node):
        if isinstance(node, ast.Constant) and \
                isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name) and node.id in CONSTANTS:
            return CONSTANTS[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](value(node.left),
                                            value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        raise ValueError(f"'{ast.unparse(node)}' is not arithmetic")
    tree = ast.parse(expression, mode="eval").body
    items = tree.elts if isinstance(tree, ast.Tuple) else [tree]
    return [value(item) for item in items]


def check_quantity(quantity, block):
    """None if the quantity is backed, else why not."""
    where = f"{block.page}:{block.line}: '{quantity.text}'"
    if quantity.mark is not None:
        try:
            results = evaluate(quantity.mark)
        except (SyntaxError, ValueError, ZeroDivisionError) as err:
            return f"{where}: its mark '{quantity.mark}': {err}"
        if len(results) != len(quantity.values) or not all(
                any(_gives([r], v * s, u * s) for s in _readings(quantity))
                for r, v, u in zip(results, quantity.values, quantity.ulps)):
            shown = ", ".join(f"{r:g}" for r in results)
            return f"{where}: its mark '{quantity.mark}' gives {shown}"
        return None
    if not block.runs:
        return None
    if any(matches(quantity, evidence(run)) for run in block.runs):
        return None
    runs = ", ".join(f"docs/results/{r}/" for r in block.runs)
    return f"{where} is in no file of {runs}"


def unbacked(pages=None):
    """Every quantity of the pages' prose that neither a run nor its
    arithmetic gives, one line each."""
    problems = []
    for page in pages or tables.pages():
        for block in blocks(page):
            for quantity in quantities(block.text):
                why = check_quantity(quantity, block)
                if why:
                    problems.append(why)
    return problems


def missing_commits(pages=None):
    """Commits the pages cite that the repository's history lacks."""
    problems = []
    for page in pages or tables.pages():
        for i, line in enumerate(page.read_text().splitlines(), 1):
            for word in COMMIT.findall(line):
                if not (re.search(r"\d", word) and re.search("[a-f]", word)):
                    continue
                known = subprocess.run(
                    ["git", "-C", str(paths.ROOT), "cat-file", "-e",
                     f"{word}^{{commit}}"], capture_output=True)
                if known.returncode:
                    problems.append(f"{page.name}:{i}: commit {word} is not "
                                    "in the history")
    return problems
