"""The kernel's own timing by kprobe events: what the guest probes and how
its trace lines become timed calls.

The guest (guest/trace.sh) puts a probe on the entry and one on the
return of each function below and copies tracefs' trace after every step
to the console, one "@@trace" line each.  Here each task's entries and
returns are paired into calls, nested as they ran, with microsecond
times from the trace clock.  Nothing is patched into the kernel for it,
so stock, upstream and the series are timed the same way.
"""
import dataclasses
import re

from zdinit.errors import ZdinitError

# Every function the guest probes, with the arguments its entry probe
# records (kprobe fetch arguments).  None is left to inlining: each is
# called from another file than its own (memremap_pages(), online_pages(),
# memmap_init_zone_device(), memmap_init_range(), undo_isolate_page_range(),
# memory_notify()) or is checked in the built kernel
# (kernel/tracing.py: every one must be a function in System.map).
MEMREMAP = "memremap_pages"
MEMMAP = "memmap_init_zone_device"
ONLINE = "online_pages"
MOVE = "move_pfn_range_to_zone"
MEMMAP_RANGE = "memmap_init_range"
NOTIFY = "memory_notify"
PRESENT = "adjust_present_page_count"
UNISOLATE = "undo_isolate_page_range"
CONTIGUOUS = "set_zone_contiguous"
PROBES = {
    "rebind": {
        # memremap_pages(pgmap, nid): the whole bind of a pgmap, with the
        # vmemmap it populates, around memmap_init_zone_device()
        MEMREMAP: "",
        # memmap_init_zone_device(zone, start_pfn, nr_pages, pgmap)
        MEMMAP: "nr_pages=$arg3:u64",
    },
    "onlining": {
        # online_pages(pfn, nr_pages, zone, group)
        ONLINE: "nr_pages=$arg2:u64",
        # move_pfn_range_to_zone(zone, start_pfn, nr_pages, altmap, ...)
        MOVE: "nr_pages=$arg3:u64",
        # memmap_init_range(size, nid, zone, start_pfn, ...)
        MEMMAP_RANGE: "nr_pages=$arg1:u64",
        NOTIFY: "",
        PRESENT: "",
        UNISOLATE: "",
    },
}
# Probed where the kernel has it out of line after boot: the walk of zone
# contiguity that kernels without the contiguity count make inside
# move_pfn_range_to_zone() (guest/trace.sh skips it where kprobe_events
# refuses it).
OPTIONAL = {"onlining": {CONTIGUOUS: ""}}


def probes_file():
    """/zdinit/probes for guest/trace.sh: "FAMILY FUNCTION required|optional
    FETCHARGS" a line."""
    lines = []
    for need, table in (("required", PROBES), ("optional", OPTIONAL)):
        for family, funcs in table.items():
            lines += [f"{family} {func} {need} {args}".rstrip()
                      for func, args in funcs.items()]
    return "\n".join(lines) + "\n"


# "  ndctl-93  [001] .....  12.345678: memmap_init_zone_device: (memmap_init_zone_device+0x0/0x2a0) nr_pages=262144"
# "  ndctl-93  [001] .....  12.456789: memmap_init_zone_device__return: (devm_memremap_pages+0x3c5/0x610 <- memmap_init_zone_device)"
EVENT = re.compile(
    r"-(?P<pid>\d+)\s+\[\d+\]\s+(?:\S+\s+)?(?P<s>\d+)\.(?P<us>\d{6}): "
    r"\w+: \((?P<where>[^)]*)\)(?P<args>.*)$")
ENTRIES = re.compile(r"entries-in-buffer/entries-written: (\d+)/(\d+)")


class TraceError(ZdinitError):
    """A step's trace that cannot be read as whole calls."""


@dataclasses.dataclass
class Call:
    """One traced call: microseconds on the trace clock at entry and
    return, its entry probe's arguments and the traced calls it made."""
    func: str
    pid: int
    start_us: int
    end_us: int = -1
    args: dict = dataclasses.field(default_factory=dict)
    calls: list = dataclasses.field(default_factory=list)

    @property
    def us(self):
        return self.end_us - self.start_us

    def children(self, func):
        return [c for c in self.calls if c.func == func]


def _args(text):
    return {k: int(v) for k, v in
            (word.split("=", 1) for word in text.split() if "=" in word)}


def has_events(lines):
    """Whether a step's trace lines hold any kprobe event."""
    return any(EVENT.search(line) for line in lines)


def calls(lines):
    """The top-level calls of a step's trace lines, in the order they
    started; TraceError where the buffer lost events or an entry and a
    return do not pair."""
    stacks: dict = {}
    top: list = []
    for line in lines:
        m = ENTRIES.search(line)
        if m:
            if m.group(1) != m.group(2):
                raise TraceError(f"the trace buffer kept {m.group(1)} of "
                                 f"{m.group(2)} events")
            continue
        m = EVENT.search(line)
        if not m:
            continue
        pid = int(m.group("pid"))
        at = int(m.group("s")) * 1_000_000 + int(m.group("us"))
        where = m.group("where")
        stack = stacks.setdefault(pid, [])
        if " <- " in where:
            func = where.rsplit(" <- ", 1)[1].strip()
            if not stack or stack[-1].func != func:
                raise TraceError(f"task {pid}: a return from {func} "
                                 "without its entry")
            stack.pop().end_us = at
            continue
        call = Call(where.split("+", 1)[0], pid, at, args=_args(m.group("args")))
        (stack[-1].calls if stack else top).append(call)
        stack.append(call)
    open_calls = [c.func for stack in stacks.values() for c in stack]
    if open_calls:
        raise TraceError(f"{open_calls[0]} entered without a return")
    return top


def find(found, func):
    """Every call of func among found and the calls they made, in order."""
    out = []
    for call in found:
        if call.func == func:
            out.append(call)
        out += find(call.calls, func)
    return out


def online_parts(call):
    """online_pages()' total and the six consecutive parts the harness
    reports (vm/console.ONLINE_PARTS, in order), microseconds, from the traced
    calls it made: up to the return of move_pfn_range_to_zone(), of the
    MEM_GOING_ONLINE memory_notify(), up to adjust_present_page_count(),
    to the return of undo_isolate_page_range(), up to the MEM_ONLINE
    memory_notify() and to the end."""
    moves, notes = call.children(MOVE), call.children(NOTIFY)
    present, unisolate = call.children(PRESENT), call.children(UNISOLATE)
    if not (len(moves) == len(present) == len(unisolate) == 1
            and len(notes) == 2):
        raise TraceError(
            f"online_pages at {call.start_us}us: traced {len(moves)} "
            f"{MOVE}, {len(notes)} {NOTIFY}, {len(present)} {PRESENT}, "
            f"{len(unisolate)} {UNISOLATE} calls; a successful online makes "
            "1, 2, 1 and 1")
    marks = [call.start_us, moves[0].end_us, notes[0].end_us,
             present[0].start_us, unisolate[0].end_us, notes[1].start_us,
             call.end_us]
    return call.us, [b - a for a, b in zip(marks, marks[1:])]
