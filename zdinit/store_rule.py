"""How the kernel should write a ZONE_DEVICE memmap: streaming or cached
stores, and on how many threads.  The one statement of the rule; the
lab's recommendation (zdinit/lab.py) and its test against every
committed native run apply this function, not a copy of it.

The rule, given the struct page bytes the kernel writes (not pfns times
sizeof(struct page): with vmemmap tail reuse most tails of a compound
page are never written), the size of the last-level cache of the CPU
doing the work, the online CPUs of the range's node and the thread cap:

  - strategy: stream (memfill_nt(), MOVNTI) where the architecture can,
    x86-64, once the bytes written reach min(LLC, 32 MiB), whether the
    memmap is in device memory (altmap) or in RAM; below that, cached
    copies of the template (patch 7's copy from registers).  An LLC that
    cannot be read counts as 32 MiB.
  - threads: one per 16 MiB written, at least one, at most
    min(node CPUs, cap); the cap (vm.zone_device_memmap_max_threads)
    defaults to 16.

In the kernel, zone_device_memmap_streams() and
zone_device_memmap_choose() (strategy, patch 6 of patches/linux-7.3 and
patches/linux-6.12) and zone_device_memmap_threads() (threads, patches
8 and 9) implement it.  The page_ref_set tracepoint still forces the
slow path there; that is a debugging switch, not part of this rule.

Why, from the native runs (zdlab, the kernel's stores replayed; ms are
medians, "cold" a flushed destination as a rebind writes):

  - Streaming on any x86-64, in RAM too: on the Intel Xeon (Emerald
    Rapids, 300 MiB L3, docs/results/lab-xeon-emr-16cpu/) MOVNTI beat
    every cached copy at 1.6 GB (a 100 GB device) in every destination
    state and thread count measured (cold, 8 threads: 22.6 ms against
    template-regs' 42.0, mm4-threads-1600M.json), and at 1 TB (1525
    against 2956 ms on 1 thread, mm-16000M.json).  On Zen 5 (32 MiB L3,
    docs/results/lab/lab.json) it took 14-25% less time than the cached
    copy at 256 MB and 1.6 GB in every state (cold, 1.6 GB: 56.4 against
    template-u64's 65.9 ms); on Zen 4 (32 MiB L3,
    docs/results/lab-template-regs/, lab-clear/lab.json) it tied with
    template-regs at 1.6 GB in two of three sessions.  Destinations
    zeroed or written just before ("hot", "rewrite"), as a memmap in RAM
    may be, ranked as cold ones at 1.6 GB on every CPU (Xeon, one
    thread: MOVNTI 137.5 and 153.4 ms against template-u64's 224.5 and
    229.7, mm3-1600M-hot.json).
  - The ceiling of 32 MiB: the Xeon's LLC is 300 MiB, yet MOVNTI won at
    160 MiB in all six cells measured there (1.08x-2.7x, every state,
    1 and 16 threads, mm3-small.json): one writer cannot keep a memmap
    in a shared L3 of that size, so the LLC bounds the threshold from
    above only.  Below 32 MiB cached copies won on Zen 4 (template-regs
    1.1x-4.3x faster at 1-16 MB) and on one Xeon thread into a hot or
    rewritten 16 MB destination.  Where the rule loses by more than 10%
    in a committed run, zdinit/lab.py's RULE_EXCEPTIONS says why.
  - The default of 32 MiB for an unknown LLC: the smallest LLC among the
    CPUs measured, one Zen 4 or Zen 5 CCD's L3, which is where the
    crossovers measured lie; guessing larger would keep cached copies
    where every CPU measured streams faster, guessing smaller would
    stream where Zen 4's cached copy is up to 4.3x faster.
  - One thread per 16 MiB: unchanged from patch 8 (a helper's start
    costs a work item and a wake-up; 16 MiB is about 2 ms of MOVNTI on
    one Xeon thread, mm3-small.json).
  - The cap of 16 instead of 8: on the Xeon's 16 CPUs MOVNTI over a
    cold 1.6 GB memmap took 22.61 ms on 8 threads and 12.01 ms on 16,
    1.88x (rewrite: 24.30 and 12.93 ms, 1.88x; 12 threads: 16.28 ms),
    and reached 0.50 of the streaming floor on 8 threads against 0.95
    on 16 (mm4-threads-1600M.json).  Patch 8 capped at 8 because "a few
    threads reach" the memory bandwidth; on the one many-core machine
    measured, 8 threads reach half of it.  An earlier session on the
    same kind of machine gained less from 8 to 16 (23.98 to 18.85 ms,
    1.27x, with 12 threads at 15.39 ms, mm-1600M.json).  At 1 TB, 16
    threads wrote the memmap in 142 ms (mm2-16000M.json) against
    1525 ms on one; 8 threads were not measured there.  16 is the most
    threads measured anywhere, so the data say nothing of a higher cap;
    the Zen VMs measured had two CPUs, where a second MOVNTI thread
    gained 0.98x on Zen 5 and 1.13x on Zen 4 (the lab.json files'
    threads sweeps).
"""
from dataclasses import dataclass

from zdinit.errors import UsageError

MiB = 1 << 20
STREAM = "stream"
CACHED = "cached"
# The smallest LLC among the CPUs measured (one Zen 4 or Zen 5 CCD's L3):
# the LLC assumed when it cannot be read, and the most the streaming
# threshold ever is (the docstring gives the runs behind both).
SMALLEST_LLC_MEASURED = 32 * MiB
# Struct page bytes per thread (ZONE_DEVICE_MEMMAP_THREAD_MIN, patch 8).
BYTES_PER_THREAD = 16 * MiB
# vm.zone_device_memmap_max_threads' default (patch 9).
DEFAULT_MAX_THREADS = 16


@dataclass(frozen=True)
class Choice:
    strategy: str       # STREAM or CACHED
    threads: int


def stream_from_bytes(llc_bytes):
    """The struct page bytes written from which the rule streams; an LLC
    of 0 or None (unreadable) counts as SMALLEST_LLC_MEASURED."""
    if not llc_bytes:
        return SMALLEST_LLC_MEASURED
    return min(llc_bytes, SMALLEST_LLC_MEASURED)


def threads_for(written_bytes, node_cpus, max_threads=DEFAULT_MAX_THREADS):
    """One thread per BYTES_PER_THREAD written, at least one, at most
    min(node_cpus, max_threads)."""
    if node_cpus < 1 or max_threads < 1:
        raise UsageError(f"node CPUs ({node_cpus}) and thread cap "
                         f"({max_threads}) must be at least 1")
    return max(1, min(written_bytes // BYTES_PER_THREAD, node_cpus,
                      max_threads))


def choose(written_bytes, llc_bytes, node_cpus,
           max_threads=DEFAULT_MAX_THREADS, can_stream=True):
    """The rule: how to write a memmap of written_bytes of struct pages.
    can_stream says whether memfill_nt() streams on this architecture
    (x86-64) or is a loop of memcpy()."""
    if written_bytes < 0:
        raise UsageError(f"negative memmap size {written_bytes}")
    stream = can_stream and written_bytes >= stream_from_bytes(llc_bytes)
    return Choice(STREAM if stream else CACHED,
                  threads_for(written_bytes, node_cpus, max_threads))
