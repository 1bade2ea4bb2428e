"""The lab's tables of stores, as the lab itself lists them: one row per
memmap store strategy (lab/memmap.c) and per clearing method
(lab/clear.c), with its name, kind, the CPU feature it needs and whether
the CPU runs it.  `zdlab features` prints both tables, and every zdlab
bench and lab.json since records the one it ran with.  The harness takes
its lists of strategies and methods from these rows and keeps no copy:
a store added to the lab is ranked here by the row that adds it."""
from zdinit.errors import ZdinitError

# The kinds a row can have, as lab/memmap.c and lab/clear.c name them.
CACHED = "cached"               # a strategy of cached stores
STREAMING = "streaming"         # weakly ordered stores, then a fence
PER_PAGE = "per-page"           # 6.12's clear_page(): 4 KB per call
CACHED_EXTENT = "cached-extent"  # one string instruction per extent
STRATEGY_KINDS = (CACHED, STREAMING)
CLEAR_KINDS = (PER_PAGE, CACHED_EXTENT, STREAMING)


def names_by_kind(rows, kinds, used, where):
    """{kind: the names of its rows, in the table's order} for each of
    kinds.  One line why not where a row has a kind not in kinds (the lab
    has a kind this reader would ignore) or a name in used (the stores a
    run measured) is in no row: a run read with another table than its
    own, whose store was renamed or removed since."""
    out: dict[str, tuple] = {kind: () for kind in kinds}
    for row in rows:
        if row["kind"] not in out:
            raise ZdinitError(f"{where}: the lab's {row['name']} is of kind "
                              f"{row['kind']!r}, which is none of "
                              f"{', '.join(kinds)}")
        out[row["kind"]] += (row["name"],)
    unknown = set(used) - {row["name"] for row in rows}
    if unknown:
        raise ZdinitError(f"{where} measured {', '.join(sorted(unknown))}, "
                          "which no row of the lab's table lists")
    return out
