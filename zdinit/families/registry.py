"""The measured families, each a module of this package whose object
protocol.Family describes:

- rebind: ZONE_DEVICE namespaces rebound, memmap_init_zone_device()'s
  own time per rebind (guest/rebind.sh);
- onlining: memory added as System RAM, offlined and onlined, the time
  of each state change (guest/hotplug.sh);
- clearing: huge pages demand-faulted, GB/s by zdclear and by perf bench
  mem mmap (guest/clear.sh).

loop.py runs them; results/summary.py shows their records.
"""
from zdinit.families import clearing, onlining, rebind, scenarios
from zdinit.families.protocol import Family

REBIND: Family = rebind.REBIND
ONLINING: Family = onlining.ONLINING
CLEARING: Family = clearing.CLEARING
FAMILIES: tuple[Family, ...] = (REBIND, ONLINING, CLEARING)


def of_spec(spec):
    """The family a planned spec belongs to."""
    if isinstance(spec, scenarios.ClearSpec):
        return CLEARING
    return next(f for f in FAMILIES if f.name == spec.scenario.family)
