"""Where the timed functions sit relative to 4 KiB pages (TCG code placement).

QEMU's TCG chains a translation block directly to the next one only when
the jump target lies on the same guest page as the start of the jumping
block (translator_use_goto_tb()); any other jump goes through a TB hash
lookup (helper lookup_tb_ptr) every time it is taken.  A tight loop whose
blocks straddle a 4 KiB boundary therefore runs much slower under TCG than
the same machine code a few hundred bytes away.  Patches that add code
before a timed function move it, so two kernels with identical code for
that function can differ by 2x under TCG and not at all on hardware
(docs/hotplug-slowdown.md).  The bench records, for each kernel, where the
functions it times start and whether they cross a page, so that a table
comparing kernels says when placement alone may explain a difference.
"""
import pathlib

from zdinit.units import PAGE

# Functions whose own time the scenarios report (the series' timing lines).
TIMED = ("memmap_init_range", "memmap_init_zone_device",
         "set_zone_contiguous")


def read_map(path):
    """Text symbols of a System.map as sorted (address, name)."""
    syms = []
    for line in pathlib.Path(path).read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            syms.append((int(parts[0], 16), parts[2]))
    return sorted(syms)


def spans(syms, names=TIMED):
    """{name: (start, end)} for each named function found; its end is the
    next text symbol's address (alignment padding included)."""
    found = {}
    for i, (addr, name) in enumerate(syms):
        if name in names and name not in found:
            later = [a for a, _ in syms[i + 1:] if a > addr]
            found[name] = (addr, later[0] if later else addr + 1)
    return found


def crosses(start, end):
    return (start // PAGE) != ((end - 1) // PAGE)


def describe(start, end):
    """'0xf70-0x1230, crosses a 4 KiB page' style, offsets within the page
    where the function starts."""
    base = start & ~(PAGE - 1)
    where = ("crosses a 4 KiB page" if crosses(start, end)
             else "within one 4 KiB page")
    return f"{start - base:#x}-{end - base:#x}, {where}"


def kernel_placement(system_map, names=TIMED):
    """{name: description} for one kernel; {} if System.map is missing."""
    path = pathlib.Path(system_map)
    if not path.exists():
        return {}
    return {name: describe(*span)
            for name, span in spans(read_map(path), names).items()}


def differing(placements):
    """Names whose page crossing differs between kernels: a TCG difference
    in their time may be placement, not code."""
    names = sorted({n for p in placements.values() for n in p})
    out = []
    for name in names:
        kinds = {p[name].endswith("crosses a 4 KiB page")
                 for p in placements.values() if name in p}
        if len(kinds) > 1:
            out.append(name)
    return out
