"""The experiments from the seeds: what each scenario does and checks."""
import dataclasses
import re

from zdinit.kernel import bases, store_rule
from zdinit.units import PAGE, GiB, MiB
from zdinit.errors import UsageError

SECTION = 128 * MiB          # x86-64 memory section: hotplug granularity
STRUCT_PAGE = 64             # sizeof(struct page) in the guest kernel
REUSE_PAGES = 128            # struct pages per compound page with tail reuse
ALIGNS = {"4K": 4096, "2M": 2 * MiB, "1G": GiB}
MAX_SIZE = 1 << 40
MIN_SIZE = 2 * SECTION        # the smallest device: two memory sections
HOTPLUG_LOW_RAM_MB = 3 * 1024    # the pc machine's RAM below 4 GiB
MAX_N = 1000

# The memmap strategies the series' debugfs knob takes.  "NAME@T" also
# sets the number of threads that build each range (the parallel-init
# patch's threads knob); without "@T" the kernel chooses.
# The last, ON_DEMAND, leaves the memmap of a pgmap whose driver asks for
# it to be built on demand and in the background, as the kernel offered
# does; the others build the whole memmap before the bind returns.  Only a
# base with the on-demand series has it.
ON_DEMAND = "demand"
STRATEGIES = ("auto", "slow", "template", "stream", ON_DEMAND)
MAX_THREADS = 64
# The method of the posted series "mm: optimize zone-device memmap
# initialization" (v1-v5), which the mm tree has queued for 7.4: a struct
# page template copied with streaming stores into every struct page of
# every range, on the thread that asked.  The bench compares the patched
# kernel's other strategies with it too.
UPSTREAM_METHOD = "stream@1"


def base_strategies(base):
    """The strategies the series of base has."""
    on_demand = base.has_part("zone-device", "demand")
    return tuple(s for s in STRATEGIES if s != ON_DEMAND or on_demand)


def check_base_strategies(strategies, base):
    """Refuse a strategy the series of base does not have."""
    missing = [s for s in strategies or ()
               if strategy_name(s) not in base_strategies(base)]
    if missing:
        raise UsageError(f"argument --strategies: strategy {missing[0]}: "
                         f"base {base.name}'s series builds every memmap "
                         "before the bind returns; choose from "
                         + ", ".join(base_strategies(base)) + ", or give "
                         + " or ".join(f"--base {b.name}" for b in
                                       bases.BASES.values()
                                       if b.has_part("zone-device", "demand")))


def strategy_name(strategy):
    """"auto@1" -> "auto"."""
    return strategy.partition("@")[0]


def check_strategy(strategy):
    """One line why strategy is not NAME or NAME@T, or None when it is."""
    name, at, threads = strategy.partition("@")
    if name not in STRATEGIES:
        return (f"unknown strategy '{strategy}'; choose from "
                + ", ".join(STRATEGIES) + f", each but {ON_DEMAND} optionally "
                f"@1..@{MAX_THREADS}")
    if at and name == ON_DEMAND:
        return (f"strategy '{strategy}': {ON_DEMAND}'s background build takes "
                "its own thread count; give it without @")
    if at and not (threads.isdigit() and 1 <= int(threads) <= MAX_THREADS):
        return (f"strategy '{strategy}': the thread count after @ must be "
                f"1..{MAX_THREADS}")
    return None


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    mode: str | None         # ndctl namespace mode; None: no NVDIMM
    map: str | None          # where the memmap lives: dev (altmap) or mem
    default_size: int
    default_n: int
    default_aligns: tuple
    what: str
    # The family that runs it (registry.FAMILIES): "rebind", or
    # "onlining": memory onlined as System RAM (guest/hotplug.sh),
    # measured per memory block state change rather than per bind.
    family: str = "rebind"
    zones: tuple = ()            # zones the guest onlines into, in turn
    boots: tuple = ((),)         # one boot per entry: its extra cmdline
    virtio_mem: bool = False     # QEMU adds a virtio-mem-pci device of size

    @property
    def nvdimm(self):
        return self.mode is not None

    @property
    def hotplug(self):
        return self.family == "onlining"

    @property
    def takes_align(self):
        """Whether --align sets its alignments: devdax rebinds; kmem onlines
        its devdax namespace at the default alignment alone."""
        return self.mode == "devdax" and not self.hotplug


SCENARIOS = {s.name: s for s in [
    Scenario("fsdax-dev", "fsdax", "dev", 100 * GiB, 30, ("",),
             "fsdax, map=dev: order-0 memmap in the device (altmap); "
             "nd_pmem rebinds"),
    Scenario("devdax-dev", "devdax", "dev", 100 * GiB, 30, ("2M",),
             "devdax, map=dev: compound memmap in the device, no tail "
             "reuse; dax_pmem rebinds"),
    Scenario("devdax-mem", "devdax", "mem", 100 * GiB, 30, ("2M", "1G"),
             "devdax, map=mem: compound memmap in RAM with vmemmap tail "
             "reuse"),
    Scenario("fsdax-mem", "fsdax", "mem", 100 * GiB, 30, ("",),
             "fsdax, map=mem: order-0 memmap in RAM"),
    Scenario("devprivate", None, "mem", 64 * GiB, 10, ("",),
             "DEVICE_PRIVATE memremap_pages() of RAM-less device memory, "
             "memmap in RAM"),
    Scenario("kmem", "devdax", "dev", 16 * GiB, 5, ("2M",),
             "devdax namespace given to kmem as System RAM, then offlined "
             "and onlined, movable and normal; one boot with the memmap in "
             "RAM, one with memmap_on_memory", family="onlining",
             zones=("movable", "normal"),
             boots=((), ("memory_hotplug.memmap_on_memory=1",))),
    Scenario("virtio-mem", None, None, 16 * GiB, 5, ("",),
             "virtio-mem-pci plugged when the guest loads virtio_mem, then "
             "offlined and onlined, movable and normal", family="onlining",
             zones=("movable", "normal"), virtio_mem=True),
]}
# What "bench" runs when no --scenarios is given: the ZONE_DEVICE memmap
# scenarios.  The onlining family's are asked for by name.
DEFAULT_BENCH = tuple(name for name, sc in SCENARIOS.items()
                      if sc.family == "rebind")


# How the measured families time the kernel (RunSpec.timing): "trace",
# kprobe events on the functions timed, the same in every kernel
# (zdinit/vm/trace.py); "log", the log lines (a rebind's from
# memmap_init_zone_device() itself, in whole jiffies in every kernel;
# onlining's from the kit's timing patch, in microseconds); "ab", both in
# one boot, the probes armed in half the rounds in the order on, off, off,
# on (guest/trace.sh), to measure what tracing costs beside the log lines.
TIMINGS = {"trace": "kprobe events on the functions timed, in every kernel",
           "log": "log lines: for a rebind the kernel's own, in whole "
                  "jiffies; for onlining the kit's, in microseconds",
           "ab": "both in one boot, the probes armed in half the rebinds "
                 "or onlining cycles of each boot, the log lines "
                 "throughout: what tracing costs"}
# Each family's timing unless --timing says otherwise.  A rebind has two
# probe hits, which cost nothing measurable; onlining has a dozen for
# every memory block, which made its short steps read two to three times
# their length (docs/measurements.md, "Timing by tracing"), so it keeps
# the kit's lines, which hotplug-stock carries too.
FAMILY_TIMING = {"rebind": "trace", "onlining": "log"}


@dataclasses.dataclass(frozen=True)
class RunSpec:
    scenario: Scenario
    size: int
    n: int
    aligns: tuple
    timing: str                 # one of TIMINGS, from plan()

    def memmap_ram_bytes(self):
        """Guest RAM the memmap needs (0 when it lives in the device)."""
        if self.scenario.hotplug:
            # Onlined memory has its memmap in RAM unless memmap_on_memory.
            return self.size // PAGE * STRUCT_PAGE
        if self.scenario.map == "dev":
            return 0
        if self.scenario.mode == "devdax":
            smallest = min(ALIGNS[a] for a in self.aligns)
            per = REUSE_PAGES if smallest >= 2 * MiB else smallest // PAGE
            return self.size // smallest * per * STRUCT_PAGE
        return self.size // PAGE * STRUCT_PAGE

    def guest_ram_mb(self):
        need = 1024 * MiB + self.memmap_ram_bytes() * 5 // 4
        if self.scenario.hotplug:
            # QEMU's pc machine puts RAM beyond 3 GiB above 4 GiB.  Without
            # any, ZONE_NORMAL holds only the onlined memory: every kernel
            # allocation lands there and it can never be offlined again.
            # Whole GiBs up there, so the device memory region that QEMU
            # aligns to 1 GiB follows boot RAM without a hole.
            return HOTPLUG_LOW_RAM_MB + max(2 * 1024, -(-need // GiB) * 1024)
        return -(-need // (256 * MiB)) * 256

    def image_touched_bytes(self):
        """Bytes of the NVDIMM image the guest writes: info block + memmap."""
        memmap = self.size // PAGE * STRUCT_PAGE if self.scenario.map == "dev" else 0
        if self.scenario.hotplug:
            # kmem with memmap_on_memory writes a second memmap there.
            memmap *= 2
        return memmap + 64 * MiB


SIZE_UNITS = (("T", 1 << 40), ("G", GiB), ("M", MiB), ("K", 1 << 10))


def size_text(size):
    """Bytes in the units a user types: 100G, 512M, 1536M."""
    for unit, scale in SIZE_UNITS:
        if size and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


def size_rule():
    """What plan() asks of a size, in words: for --help and its refusal."""
    return (f"a multiple of {size_text(SECTION)} between "
            f"{size_text(MIN_SIZE)} and {size_text(MAX_SIZE)}")


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", text, re.I)
    if not m:
        raise UsageError(f"argument --size: bad size '{text}': use e.g. "
                         "4G, 512M, 100G")
    scale = {"": 1, "K": 1 << 10, "M": MiB, "G": GiB, "T": 1 << 40}
    return int(float(m.group(1)) * scale[m.group(2).upper()])


def plan(names, size=None, n=None, aligns=None, aligns_given=True,
         timing=None):
    """Validate options and return one RunSpec per scenario; aligns_given:
    whether aligns are the user's (--align) or the caller's own; timing
    None: each family's own (FAMILY_TIMING)."""
    if timing is not None and timing not in TIMINGS:
        raise UsageError(f"unknown timing '{timing}'; choose from "
                         + ", ".join(TIMINGS))
    specs = []
    for name in names:
        if name not in SCENARIOS:
            raise UsageError(f"unknown scenario '{name}'; choose from "
                             + ", ".join(SCENARIOS))
        sc = SCENARIOS[name]
        sz = parse_size(size) if isinstance(size, str) else (size or sc.default_size)
        shown = size if isinstance(size, str) else size_text(sz)
        count = sc.default_n if n is None else n
        al = tuple(aligns) if aligns and sc.takes_align else sc.default_aligns
        if not 1 <= count <= MAX_N:
            raise UsageError(f"argument --n: must be 1..{MAX_N}, not {count}")
        # A refusal names what the user gave: --size, --align, or the
        # scenario whose default broke the rule.
        given = f"argument --size: '{shown}'" if isinstance(size, str) \
            else f"{name}: size {shown}"
        if sz < MIN_SIZE or sz % SECTION or sz > MAX_SIZE:
            bytes_only = isinstance(size, str) and size.strip().isdigit()
            raise UsageError(f"{given} must be {size_rule()}"
                             + (" (a size without a unit is in bytes)"
                                if bytes_only else ""))
        for a in al:
            if sc.mode != "devdax":
                continue
            if a not in ALIGNS:
                raise UsageError(f"unknown align '{a}'; choose from "
                                 + ", ".join(ALIGNS))
            if sz < 2 * ALIGNS[a] or sz % ALIGNS[a]:
                why = (f"--align {a}" if aligns and sc.takes_align and
                       aligns_given else f"{name}'s {a} alignment")
                raise UsageError(
                    f"{given} must be a multiple of {a} and at least "
                    f"{size_text(2 * ALIGNS[a])} for {why}")
        specs.append(RunSpec(sc, sz, count, al,
                             timing or FAMILY_TIMING[sc.family]))
    return specs


def expected_pages(spec, run, align):
    """pfns memmap_init_zone_device() must report, from the guest geometry."""
    if not spec.scenario.nvdimm:
        return spec.size // PAGE
    if spec.scenario.map == "dev":
        # The altmap reserve (info block + memmap) precedes the data area,
        # and ndctl reports the size of the data area alone.
        for geometry in run.geometry:
            if geometry.get("align") == align:
                return geometry["namespace"]["size"] // PAGE
        raise KeyError(f"no geometry for align '{align}' in the guest log")
    return int(run.region["size"]) // PAGE


def expected_written(scenario, pages, align):
    """struct pages written: fewer than pfns only with vmemmap tail reuse."""
    if scenario.mode == "devdax" and scenario.map == "mem" \
            and ALIGNS[align] >= 2 * MiB:
        return pages // (ALIGNS[align] // PAGE) * REUSE_PAGES
    return pages


def auto_strategy(written, llc_bytes, pages=None):
    """The strategy the series' auto must take for a range of `pages`
    pfns that writes `written` struct pages under a last-level cache of
    llc_bytes (0 or None: unknown), named as its timing line names it:
    the store rule's (zdinit/kernel/store_rule.py), whose thread count is not
    asked for here.  Fewer written than pages is vmemmap tail reuse
    (devdax map=mem with 2M or 1G pages: a record's `pages` against its
    `struct_pages_written`), which keeps the template at any size;
    pages None: a range without it (written is every pfn's)."""
    reuse = pages is not None and store_rule.has_tail_reuse(pages, written)
    choice = store_rule.choose(written * STRUCT_PAGE, llc_bytes, node_cpus=1,
                               tail_reuse=reuse)
    return "stream" if choice.strategy == store_rule.STREAM else "template"


# The clearing family's scenario: demand-fault clearing of huge pages in
# the guest, declared like the memmap scenarios, run by
# zdinit/families/clearing.py.
CLEAR_PAGES = {"2M": 2 * MiB, "1G": GiB}
PREEMPT_MODELS = bases.preempt_models()
CLEAR_GUEST_OVERHEAD = 1536 * MiB   # kernel, initramfs, page tables, slack
# Boot-time 1G pages must be 1G-aligned and free when reserved: QEMU loads
# the kernel in the first GiB and the initramfs just below 2 GiB, and early
# allocations fill the top GiB, so those GiBs cannot hold one.
CLEAR_GIGANTIC_SLACK = 3 * GiB


@dataclasses.dataclass(frozen=True)
class ClearScenario:
    name: str
    default_size: int
    default_loops: int
    default_pages: tuple
    what: str


CLEAR = ClearScenario(
    "clear", 8 * GiB, 5, ("2M", "1G"),
    "demand-fault a mapping of 2M THP / 1G hugetlb pages, one write per "
    "page, like 'perf bench mem mmap -f demand'; GB/s per loop, and the "
    "longest wait of a second task on the same CPU")


@dataclasses.dataclass(frozen=True)
class ClearSpec:
    pages: tuple
    size: int
    loops: int
    preempt: dict      # base name: the models its kernels boot with

    @property
    def n(self):
        """Samples per method, page size and model: the runner's count."""
        return self.loops

    def models(self, base):
        return self.preempt[base.name]

    def gigantic_pages(self):
        """1G hugetlb pages the guest reserves at boot (0 without 1G)."""
        return self.size // GiB if "1G" in self.pages else 0

    def guest_ram_mb(self):
        # The 1G pool is given back before the THP run: one size's worth.
        slack = CLEAR_GIGANTIC_SLACK if self.gigantic_pages() else 0
        return (self.size + CLEAR_GUEST_OVERHEAD + slack) // MiB

    def cmdline(self, preempt):
        args = [f"preempt={preempt}"]
        if self.gigantic_pages():
            args += ["hugepagesz=1G", f"hugepages={self.gigantic_pages()}"]
        return args


def plan_clear(pages=None, size=None, loops=None, preempt=None,
               on_bases=None):
    """Validate the clear family's options; one line per refusal.
    preempt: the models every base boots with (None: each base's
    default); on_bases: the bases (None: the default base)."""
    pages = tuple(pages or CLEAR.default_pages)
    on_bases = on_bases or [bases.get(bases.DEFAULT)]
    for page in pages:
        if page not in CLEAR_PAGES:
            raise UsageError(f"page size '{page}' cannot be given by the "
                             f"guest; choose from " + ", ".join(CLEAR_PAGES))
    for model in preempt or ():
        if model not in PREEMPT_MODELS:
            raise UsageError(f"unknown preemption model '{model}'; choose "
                             f"from " + ", ".join(PREEMPT_MODELS))
    models = {}
    for base in on_bases:
        models[base.name] = tuple(preempt or base.clear_preempt)
        for model in models[base.name]:
            if model not in base.preempt_models:
                raise UsageError(
                    f"preemption model '{model}' is not available on base "
                    f"{base.name}; its x86 kernel boots with "
                    + ", ".join(base.preempt_models))
    sz = parse_size(size) if isinstance(size, str) else (size or CLEAR.default_size)
    shown = size if isinstance(size, str) else size_text(sz)
    largest = max(pages, key=CLEAR_PAGES.__getitem__)
    if sz > MAX_SIZE:
        raise UsageError(f"clear: size {shown} is over the limit of "
                         f"{size_text(MAX_SIZE)}")
    if sz < CLEAR_PAGES[largest] or sz % CLEAR_PAGES[largest]:
        raise UsageError(f"clear: size {shown} must be a non-zero multiple "
                         f"of the largest page size ({largest})")
    count = CLEAR.default_loops if loops is None else loops
    if not 1 <= count <= MAX_N:
        raise UsageError(f"argument --loops: must be 1..{MAX_N}, not {count}")
    return ClearSpec(pages, sz, count, models)
