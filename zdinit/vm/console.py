"""Parse a guest console: zdinit markers and the kernel's own timing lines."""
import dataclasses
import functools
import json
import re

from zdinit.errors import ZdinitError
from zdinit.vm import trace

# The kernel prints milliseconds from jiffies; the measurement kit reports
# after it, in a line of its own, the strategy, the struct pages written
# and the threads the range was given (REPORT_LINE), which parse() adds to
# the kernel's line.  Consoles captured while the kit timed the function
# itself (in tests/data) have a second timing line instead, in
# microseconds from ktime and naming the strategy (kit_lines() keeps that
# one); those captured before the kit only added lines have the one line,
# in either form.
_BUILT = r"(?P<strategy>\w+), (?P<written>\d+) struct pages written"
_THREADS = r"(?P<threads>\d+) threads?"
MEMMAP_LINE = re.compile(
    r"memmap_init_zone_device initialised (?P<pages>\d+) pages in "
    r"(?P<value>\d+)(?P<unit>ms|us)"
    rf"(?:, {_BUILT}(?:, {_THREADS})?)?")
REPORT_LINE = re.compile(
    rf"memmap_init_zone_device built (?P<pages>\d+) pages: {_BUILT}, {_THREADS}"
    r"(?P<on_demand>, on demand)?")
# Where the memmap of a pgmap is built on demand, the kernel's line when
# its background build has written the last unit: from when
# memremap_pages() queued it, in milliseconds from jiffies.
BACKGROUND_LINE = re.compile(
    r"zone_device_memmap_\w+: built \S+ in the background in "
    r"(?P<ms>\d+)ms")
# Memory onlining (the series' onlining timing): move_pfn_range_to_zone()
# times the memmap and, where it still walks (the series before it
# counted pages; consoles captured then, in tests/data), the zone
# contiguity scan; online_pages() its total and six
# consecutive parts that add up to it.
MOVE_LINE = re.compile(
    r"move_pfn_range_to_zone (?P<pages>\d+) pages to (?P<zone>\w+): "
    r"memmap_init_range (?P<memmap>-?\d+)us"
    r"(?:, set_zone_contiguous (?P<contig>-?\d+)us)?")
ONLINE_PARTS = ("move_pfn_range_to_zone", "going_online",
                "online_pages_range", "undo_isolate_page_range",
                "zone_tuning", "mem_online")
ONLINE_LINE = re.compile(
    r"online_pages (?P<pages>\d+) pages in (?P<total>-?\d+)us: "
    + ", ".join(f"{part} (?P<{part}>-?\\d+)us" for part in ONLINE_PARTS))
MEMREMAP_LINE = re.compile(r"zd_memremap: \w+ range \S+ shift \d+ memremap (?P<ns>\d+) ns")
SPLAT = re.compile(r"BUG:|WARNING:|Oops|KASAN:|general protection|"
                   r"Kernel panic|possible circular locking|INFO: task .* blocked")


@dataclasses.dataclass
class MemmapInit:
    pages: int
    ms: float
    strategy: str | None
    written: int | None
    threads: int | None = None
    # The kit's report says the rest of the range is built on demand.
    on_demand: bool = False


@dataclasses.dataclass
class MoveTiming:
    """One move_pfn_range_to_zone() line: microseconds of each part."""
    pages: int
    zone: str
    memmap_us: int
    contig_us: int | None


@dataclasses.dataclass
class OnlineTiming:
    """One online_pages() line: its total and ONLINE_PARTS, microseconds."""
    pages: int
    total_us: int
    parts: dict


@dataclasses.dataclass
class Step:
    labels: dict
    kmsg: list
    memmap: list
    memremap_ns: list
    moves: list = dataclasses.field(default_factory=list)
    onlines: list = dataclasses.field(default_factory=list)
    wall: dict | None = None     # "@@zdinit wall us=..." of a hotplug step
    # BACKGROUND_LINE's milliseconds, one per background build finished.
    background_ms: list = dataclasses.field(default_factory=list)
    # "@@zdinit fault first_ns=N last_ns=N": the first write to each end
    # of a device-dax mapping right after the bind.
    faults: dict | None = None
    # tracefs' lines for the step ("@@trace ..."), kprobe events of the
    # functions guest/trace.sh probes: trace.calls() pairs them.
    trace: list = dataclasses.field(default_factory=list)

    @property
    def traced(self):
        """Whether the guest traced this step (its "trace" label: "on"
        or "off" with zdinit.trace=ab, none where it traced every step
        or none)."""
        return bool(self.trace) and self.labels.get("trace") != "off"

    @functools.cached_property
    def calls(self):
        """The step's traced calls (trace.calls()), parsed once."""
        return trace.calls(self.trace)

    def traced_memmap(self):
        """memmap_init_zone_device()'s traced calls: ms each."""
        return [c.us / 1000.0 for c in trace.find(self.calls, trace.MEMMAP)]

    def traced_memremap(self):
        """The traced memremap_pages() calls that initialised a memmap
        (a memmap_init_zone_device() inside): ms each."""
        return [c.us / 1000.0 for c in trace.find(self.calls, trace.MEMREMAP)
                if trace.find(c.calls, trace.MEMMAP)]

    def traced_moves(self):
        """Every traced move_pfn_range_to_zone() as a MoveTiming: the
        memmap_init_range() inside it and, where the kernel walks, the
        zone contiguity walk."""
        moves = []
        for move in trace.find(self.calls, trace.MOVE):
            inits = move.children(trace.MEMMAP_RANGE)
            if len(inits) != 1:
                raise trace.TraceError(
                    f"{trace.MOVE} at {move.start_us}us: {len(inits)} "
                    f"{trace.MEMMAP_RANGE} calls traced, not 1")
            walks = move.children(trace.CONTIGUOUS)
            moves.append(MoveTiming(
                move.args["nr_pages"], "", inits[0].us,
                sum(w.us for w in walks) if walks else None))
        return moves

    def traced_onlines(self):
        """Every traced online_pages() as an OnlineTiming."""
        onlines = []
        for call in trace.find(self.calls, trace.ONLINE):
            total, parts = trace.online_parts(call)
            onlines.append(OnlineTiming(call.args["nr_pages"], total,
                                        dict(zip(ONLINE_PARTS, parts))))
        return onlines

    @property
    def ms(self):
        """Memmap initialisation time of this step (all ranges it mapped)."""
        return sum(m.ms for m in self.memmap)

    @property
    def pages(self):
        return sum(m.pages for m in self.memmap)


@dataclasses.dataclass
class GuestRun:
    start: dict
    steps: list
    geometry: list
    devices: list
    region: dict
    verify: dict | None
    splats: list
    rc: int | None
    checks: list = dataclasses.field(default_factory=list)
    hotplug: dict = dataclasses.field(default_factory=dict)
    # "@@zdinit contiguity step=... node=... zone=... flag=... walk=..."
    contiguity: list = dataclasses.field(default_factory=list)
    # cpu0's caches as sysfs lists them, one "@@zdinit cache cpu=0
    # index=N level=L type=T size=SK" each; "@@zdinit caches cpu=0
    # leaves=N" ends the list, so that a guest that found none is told
    # from one that said nothing (an older guest script).
    caches: list = dataclasses.field(default_factory=list)
    caches_listed: bool = False

    def llc_bytes(self):
        """The last-level cache the kernel's store rule reads, as
        zone_device_llc_size() reads it from cacheinfo: the size of the
        first cache of the highest level.  0 where sysfs lists no cache
        (the rule then streams from its default), None where the guest
        did not list its caches."""
        if not self.caches_listed:
            return None
        llc, level = 0, 0
        for cache in sorted(self.caches, key=lambda c: int(c["index"])):
            if int(cache["level"]) > level:
                llc, level = cache_bytes(cache["size"]), int(cache["level"])
        return llc

    def verify_problem(self):
        """Why the kernel's memmap check does not count as a pass, or None.

        It fails closed: no result, nothing compared, a struct page that
        differs or one that could not be compared is a failure.
        """
        v = self.verify
        if not v:
            return "no memmap verification result"
        if v.get("unchecked") is None:
            return "the kernel does not report unchecked struct pages"
        if v["mismatches"] or v["unchecked"]:
            return (f"{v['mismatches']} struct pages differ from the slow "
                    f"path, {v['unchecked']} could not be compared")
        if not v["checked"]:
            return "no struct page was compared"
        return None


def cache_bytes(size):
    """A sysfs cache size, which cacheinfo prints in KiB ("16384K"), in
    bytes."""
    if not (size.endswith("K") and size[:-1].isdigit()):
        raise ZdinitError(f"cache size '{size}' is not in sysfs' NK form")
    return int(size[:-1]) << 10


def _labels(text):
    """'a=1 b= c=x' -> {'a': '1', 'b': '', 'c': 'x'}."""
    return dict(word.split("=", 1) for word in text.split() if "=" in word)


def parse_memmap(line):
    m = MEMMAP_LINE.search(line)
    if not m:
        return None
    value = int(m.group("value"))
    ms = value / 1000.0 if m.group("unit") == "us" else float(value)
    written, threads = m.group("written"), m.group("threads")
    return MemmapInit(int(m.group("pages")), ms, m.group("strategy"),
                      int(written) if written else None,
                      int(threads) if threads else None)


def add_report(memmap, line):
    """Add the kit's report in line, if it is one, to the kernel's line
    for the same range, the last in memmap: the kit prints it right
    after."""
    m = REPORT_LINE.search(line)
    if not m:
        return
    pages = int(m.group("pages"))
    if not memmap or memmap[-1].strategy or memmap[-1].pages != pages:
        raise ZdinitError(f"the kit's report of {pages} pages follows no "
                          "memmap_init_zone_device() line of its range: "
                          + line)
    memmap[-1].strategy = m.group("strategy")
    memmap[-1].written = int(m.group("written"))
    memmap[-1].threads = int(m.group("threads"))
    memmap[-1].on_demand = bool(m.group("on_demand"))


def kit_lines(memmap):
    """A step's memmap lines, without the kernel's own where the kit's
    follow them: a kernel with the kit prints both for every range, and
    only the kit's names a strategy."""
    if any(init.strategy for init in memmap):
        return [init for init in memmap if init.strategy]
    return memmap


def parse_move(line):
    m = MOVE_LINE.search(line)
    if not m:
        return None
    contig = m.group("contig")
    return MoveTiming(int(m.group("pages")), m.group("zone"),
                      int(m.group("memmap")),
                      int(contig) if contig is not None else None)


def parse_online(line):
    m = ONLINE_LINE.search(line)
    if not m:
        return None
    return OnlineTiming(int(m.group("pages")), int(m.group("total")),
                        {part: int(m.group(part)) for part in ONLINE_PARTS})


def parse(console):
    run = GuestRun({}, [], [], [], {}, None, [], None)
    current = None
    for raw in console.splitlines():
        # Firmware escape sequences can precede a marker on the same line.
        at = min((i for i in (raw.find("@@zdinit "), raw.find("@@kmsg "),
                              raw.find("@@trace ")) if i >= 0), default=0)
        line = raw[at:].strip()
        if line.startswith("@@trace "):
            if current is not None:
                current.trace.append(line[len("@@trace "):])
            continue
        if line.startswith("@@kmsg "):
            kline = line[len("@@kmsg "):]
            if SPLAT.search(kline):
                run.splats.append(kline)
            if current is None:
                continue
            current.kmsg.append(kline)
            init = parse_memmap(kline)
            if init:
                current.memmap.append(init)
            add_report(current.memmap, kline)
            m = BACKGROUND_LINE.search(kline)
            if m:
                current.background_ms.append(float(m.group("ms")))
            m = MEMREMAP_LINE.search(kline)
            if m:
                current.memremap_ns.append(int(m.group("ns")))
            move, online = parse_move(kline), parse_online(kline)
            if move:
                current.moves.append(move)
            if online:
                current.onlines.append(online)
            continue
        if not line.startswith("@@zdinit "):
            continue
        kind, _, rest = line[len("@@zdinit "):].partition(" ")
        if kind == "begin":
            current = Step(_labels(rest), [], [], [])
        elif kind == "done" and current is not None:
            current.memmap = kit_lines(current.memmap)
            run.steps.append(current)
            current = None
        elif kind == "start":
            run.start = _labels(rest)
        elif kind == "geometry":
            labels, _, payload = rest.partition(" ")
            try:
                found = json.loads(payload)
            except ValueError:
                found = {"raw": payload}
            # ndctl prints one namespace as an object or a list of them.
            while isinstance(found, list) and len(found) == 1:
                found = found[0]
            run.geometry.append(dict(_labels(labels), namespace=found))
        elif kind == "device":
            name, _, attrs = rest.partition(" ")
            run.devices.append(dict(_labels(attrs), name=name))
        elif kind == "region":
            run.region = _labels(rest)
        elif kind == "fault" and current is not None:
            current.faults = {k: int(v) for k, v in _labels(rest).items()}
        elif kind == "wall" and current is not None:
            current.wall = {k: int(v) for k, v in _labels(rest).items()}
        elif kind in ("hotplug", "hpverify"):
            run.hotplug.update(_labels(rest))
        elif kind == "check":
            run.checks.append(_labels(rest))
        elif kind == "contiguity":
            run.contiguity.append(_labels(rest))
        elif kind == "cache":
            run.caches.append(_labels(rest))
        elif kind == "caches":
            run.caches_listed = True
        elif kind == "verify":
            run.verify = {k: int(v) for k, v in _labels(rest).items()}
        elif kind == "end":
            run.rc = int(_labels(rest).get("rc", "-1"))
    return run


def refuse_events_when_off(run, label):
    """Raise if a step the guest says it ran without the probes
    (trace=off, zdinit.trace=ab) has kprobe events: its time would be
    counted on the untraced side."""
    for step in run.steps:
        if step.labels.get("trace") == "off" and trace.has_events(step.trace):
            raise ZdinitError(f"{label}: step {step.labels} ran with the "
                              "probes off but has kprobe events")


def refuse_splats(run, label):
    """Raise if the kernel of run (any parsed console with .splats)
    reported a splat: no measurement or check stands on such a kernel."""
    if run.splats:
        raise ZdinitError(f"{label}: kernel reported: {run.splats[0]}")
