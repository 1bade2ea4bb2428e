"""The measured families, each a module of this package whose object
protocol.Family describes:

- rebind: ZONE_DEVICE namespaces rebound, memmap_init_zone_device()'s
  own time per rebind (guest/rebind.sh);
- onlining: memory added as System RAM, offlined and onlined, the time
  of each state change (guest/hotplug.sh);
- clearing: huge pages demand-faulted, GB/s by zdclear and by perf bench
  mem mmap (guest/clear.sh).

loop.py runs them; summary.py shows their records.
"""
from zdinit.families import clearing, onlining, rebind, scenarios
from zdinit.families.protocol import Family
from zdinit.errors import ZdinitError

REBIND: Family = rebind.REBIND
ONLINING: Family = onlining.ONLINING
CLEARING: Family = clearing.CLEARING
FAMILIES: tuple[Family, ...] = (REBIND, ONLINING, CLEARING)


def of_spec(spec):
    """The family a planned spec belongs to."""
    if isinstance(spec, scenarios.ClearSpec):
        return CLEARING
    return named(spec.scenario.family)


def named(name):
    """The family called name."""
    for family in FAMILIES:
        if family.name == name:
            return family
    raise ZdinitError(f"no family is called '{name}'; the families are "
                      + ", ".join(f.name for f in FAMILIES))


def owner(record):
    """The one family whose record a results.json record is."""
    owners = [family for family in FAMILIES if family.owns(record)]
    if len(owners) != 1:
        raise ZdinitError(f"a record is owned by {len(owners)} families, "
                          f"not 1: {sorted(record)}")
    return owners[0]
