"""How the kernel should write a ZONE_DEVICE memmap: streaming or cached
stores, and on how many threads.  The one statement of the rule; the
lab's recommendation (zdinit/lab/memmap_stores.py) and its test against every
committed native run apply this function, not a copy of it.

The rule, given the struct page bytes the kernel writes (not pfns times
sizeof(struct page): with vmemmap tail reuse most tails of a compound
page are never written), whether the range has that tail reuse, the
size of the last-level cache of the CPU doing the work, the online CPUs
of the caller's node and the thread cap:

  - strategy: a range with vmemmap tail reuse (fewer struct pages
    written than pfns: device-dax map=mem with 2 MiB or 1 GiB compound
    pages, whose tails share vmemmap pages) keeps cached copies of the
    template (the copy from registers) whatever its size.  Any other
    range streams (MOVNTI: memcpy_nontemporal()) where the architecture
    can, x86-64, once the bytes written reach min(LLC, 32 MiB), whether
    the memmap is in device memory (altmap) or in RAM; below that,
    cached copies.  An LLC that cannot be read counts as 32 MiB.
  - threads: one per 16 MiB written, at least one, at most
    min(node CPUs, cap); the cap (vm.zone_device_memmap_max_threads)
    defaults to 16.

In the kernel, zone_device_memmap_streams() and
zone_device_memmap_choose() (strategy: the store-policy series, on
either base; the test for tail reuse is `written < nr_pages`) and
zone_device_memmap_threads() (threads: the parallel series) implement
it.  The page_ref_set tracepoint still forces the
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
    template-regs at 1.6 GB in two of three sessions; on Zen 3 (32 MiB
    L3, docs/results/lab-zen3/) it beat template-regs at 1.6 GB in every
    state of both size sweeps on one thread (cold: 103.32 against 125.03
    ms and 101.56 against 116.21), though the same cell moved by more
    than that between the two runs' threads sweeps.  Destinations
    zeroed or written just before ("hot", "rewrite"), as a memmap in RAM
    may be, ranked as cold ones at 1.6 GB on every CPU (Xeon, one
    thread: MOVNTI 137.5 and 153.4 ms against template-u64's 224.5 and
    229.7, mm3-1600M-hot.json).
  - Cached copies with vmemmap tail reuse, whatever the size: such a
    range writes 128 struct pages (8 KiB) per compound page, a short
    streamed run between cached stores to the head and first tails, and
    MOVNTI was slower than the cached copy there in every replay on an
    AMD part (the one Intel run with tail reuse, the Xeon reporting
    family 6 model 167, docs/results/lab-xeon-model167-2cpu/, had MOVNTI
    1.53x and 1.42x faster, rewrite only: RULE_EXCEPTIONS).  On
    Zen 3 (AMD EPYC family 25 model 1, 32 MiB L3, docs/results/lab-zen3/,
    the lab fencing once per call as the kernel does) template-regs was
    1.39x-1.89x faster than MOVNTI over the 1.6 GB written by 2M-reuse
    (run2 130.51 against 181.47 ms, rewrite; focused/ 117.53 against
    221.78, cold) and 1.32x-1.36x with 1G-reuse (run2 231.62 against
    304.82 ms), in two lab runs and a quiet focused run; without reuse
    the same host's quiet focused run had MOVNTI ahead with 2M and 1G
    pages (1G rewrite 98.35 against 120.71 ms), as on order-0.  Earlier
    on Zen 4 and Zen 5 (lab-clear/lab.json, lab/lab.json, the lab then
    fencing after each compound page) MOVNTI took 1.72x and 1.15x
    template-u64's time with 2M-reuse, 1.49x and 1.09x with 1G-reuse.
  - The ceiling of 32 MiB: the Xeon's LLC is 300 MiB, yet MOVNTI won at
    160 MiB in all six cells measured there (1.08x-2.7x, every state,
    1 and 16 threads, mm3-small.json): one writer cannot keep a memmap
    in a shared L3 of that size, so the LLC bounds the threshold from
    above only.  Below 32 MiB cached copies won on Zen 4 (template-regs
    1.1x-4.3x faster at 1-16 MB) and on one Xeon thread into a hot or
    rewritten 16 MB destination.  Where the rule loses by more than 10%
    in a committed run, zdinit/lab/memmap_stores.py's RULE_EXCEPTIONS says why.
  - The default of 32 MiB for an unknown LLC: the smallest LLC among the
    CPUs measured, one Zen 3, Zen 4 or Zen 5 CCD's L3, which is where the
    crossovers measured lie; guessing larger would keep cached copies
    where every CPU measured streams faster, guessing smaller would
    stream where Zen 4's cached copy is up to 4.3x faster.
  - One thread per 16 MiB: unchanged from the first parallel build (a
    helper's start costs a work item and a wake-up; 16 MiB is about 2 ms
    of MOVNTI on one Xeon thread, mm3-small.json).
  - The cap of 16 instead of 8: on the Xeon's 16 CPUs MOVNTI over a
    cold 1.6 GB memmap took 22.61 ms on 8 threads and 12.01 ms on 16,
    1.88x (rewrite: 24.30 and 12.93 ms, 1.88x; 12 threads: 16.28 ms),
    and reached 0.50 of the streaming floor on 8 threads against 0.95
    on 16 (mm4-threads-1600M.json).  The first parallel build capped
    at 8 because "a few threads reach" the memory bandwidth; on the one
    many-core machine measured, 8 threads reach half of it.  An earlier session on the
    same kind of machine gained less from 8 to 16 (23.98 to 18.85 ms,
    1.27x, with 12 threads at 15.39 ms, mm-1600M.json).  At 1 TB, 16
    threads wrote the memmap in 142 ms (mm2-16000M.json) and one thread
    in 1525 ms in another run (mm-16000M.json); no run timed both, nor
    8 threads.  16 is the most
    threads measured anywhere, so the data say nothing of a higher cap;
    the Zen VMs measured had two CPUs, where a second MOVNTI thread
    gained 0.98x on Zen 5, 1.13x on Zen 4, 1.22x on Zen 3 and 2.03x
    on the model 167 Xeon (the lab.json files' threads sweeps, Zen 3's
    run2: a unit-test run perturbed run1's; on Zen 3 MOVNTI on two threads was
    slower than template-regs on two in both runs, while SSE2 or AVX2
    streaming was the fastest store: RULE_EXCEPTIONS).
"""
from dataclasses import dataclass

from zdinit.units import MiB
from zdinit.errors import UsageError

STREAM = "stream"
CACHED = "cached"
# The smallest LLC among the CPUs measured (one Zen 3, 4 or 5 CCD's L3):
# the LLC assumed when it cannot be read, and the most the streaming
# threshold ever is (the docstring gives the runs behind both).
SMALLEST_LLC_MEASURED = 32 * MiB
# Struct page bytes per thread (ZONE_DEVICE_MEMMAP_THREAD_MIN, the
# parallel series).
BYTES_PER_THREAD = 16 * MiB
# vm.zone_device_memmap_max_threads' default (the parallel series).
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


def has_tail_reuse(pfns, written):
    """Whether a range of pfns that writes `written` struct pages has
    vmemmap tail reuse: fewer written than pfns, the kernel's test."""
    return written < pfns


def choose(written_bytes, llc_bytes, node_cpus,
           max_threads=DEFAULT_MAX_THREADS, can_stream=True, *,
           tail_reuse):
    """The rule: how to write a memmap of written_bytes of struct pages.
    tail_reuse: whether the range has vmemmap tail reuse
    (has_tail_reuse()); can_stream whether memcpy_nontemporal() streams on this
    architecture (x86-64) or is a loop of memcpy()."""
    if written_bytes < 0:
        raise UsageError(f"negative memmap size {written_bytes}")
    stream = (can_stream and not tail_reuse
              and written_bytes >= stream_from_bytes(llc_bytes))
    return Choice(STREAM if stream else CACHED,
                  threads_for(written_bytes, node_cpus, max_threads))
