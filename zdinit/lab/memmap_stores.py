"""Drive the native lab (lab/): build it, capture its vectors, run sweeps,
and read what they measured against the store rule (zdinit/kernel/store_rule.py)."""
import contextlib
import fcntl
import json
import os
import re
import subprocess

from zdinit import paths, progress
from zdinit.checks import boot
from zdinit.kernel import store_rule
from zdinit.lab import clear_stores, store_kinds
from zdinit.results import report
from zdinit.errors import UsageError, ZdinitError

VECTORS = paths.LAB / "vectors" / "linux-6.12-x86_64.txt"
# A thread count "saturates" a strategy when it reaches this share of the
# strategy's best rate over all thread counts: the share below which
# another thread is worth a kernel work item is a judgement, not a
# measurement, and 90% is the one used here.
SATURATED = 0.9
DUMP = re.compile(r"zd_memremap: dump page (\d+) \+(\d+) ([0-9a-f]+)")
DUMP_HEAD = re.compile(r"zd_memremap: dump struct_page_size (\d+) head ([0-9a-f]+)")


def binary(sanitized=False):
    target = "build/zdlab-san" if sanitized else "build/zdlab"
    proc = subprocess.run(["make", "-s", "-C", str(paths.LAB), target],
                          capture_output=True, text=True)
    if proc.returncode:
        raise ZdinitError(f"building the lab failed: {proc.stderr.strip()}")
    return paths.LAB / target


def zdlab(args, sanitized=False, env=None):
    proc = subprocess.run([str(binary(sanitized))] + args,
                          capture_output=True, text=True, env=env)
    if proc.returncode:
        raise ZdinitError(f"zdlab {' '.join(args[:2])}: "
                          f"{(proc.stderr or proc.stdout).strip()[-400:]}")
    return proc.stdout


def features():
    """The CPU, the lab's tables of strategies and clearing methods
    (zdinit/lab/store_kinds.py), and the names of those this CPU runs."""
    return json.loads(zdlab(["features"]))


def recorded_rows(data, table):
    """The rows of the lab's table ("strategies" or "clear_methods") that
    the run which wrote data recorded; this checkout's `zdlab features`
    for a run from before zdlab recorded them (every committed run),
    which store_kinds.names_by_kind() refuses where it lacks a store the
    run measured."""
    return data[table] if table in data else features()[table]


# ---- test vectors -------------------------------------------------------

def dumps_of(step):
    """{page index: bytes} and the head address from one module dump."""
    pages: dict = {}
    head, size = None, None
    for line in step.kmsg:
        m = DUMP_HEAD.search(line)
        if m:
            size, head = int(m.group(1)), int(m.group(2), 16)
        m = DUMP.search(line)
        if m:
            i, off = int(m.group(1)), int(m.group(2))
            chunk = bytes.fromhex(m.group(3))
            buf = pages.setdefault(i, bytearray())
            if len(buf) != off:
                raise ZdinitError("struct page dump out of order")
            buf.extend(chunk)
    return size, head, {i: bytes(b) for i, b in pages.items()}


def vectors_text(order0, compound_2m, compound_1g, release):
    size, head, pages = compound_2m
    ptr = (head | 1).to_bytes(8, "little")
    offset = pages[2].find(ptr)
    if offset < 0 or offset % 8:
        raise ZdinitError("no compound_head pointer in the tail page dump")
    if pages[2] != pages[3]:
        raise ZdinitError("tails 2 and 3 differ: the template premise fails")
    if order0[2][0] != order0[2][1]:
        raise ZdinitError("order-0 pages 0 and 1 differ")
    lines = [f"# struct page images written by memmap_init_zone_device() in "
             f"Linux {release} (x86-64),",
             "# captured from a QEMU guest by 'python3 -m zdinit "
             "capture-vectors'.",
             f"struct_page_size {size}",
             f"head_ptr_offset {offset}",
             f"order0 {order0[2][0].hex()}",
             f"head {pages[0].hex()}",
             f"tail1_2M {pages[1].hex()}",
             f"tail1_1G {compound_1g[2][1].hex()}",
             f"tail {pages[2].hex()}"]
    return "\n".join(lines) + "\n"


def capture_vectors(target, accel):
    geometries = ["generic:130:0:0:1", "generic:1024:0:9:1",
                  "generic:2048:0:18:1"]
    steps = boot.boot_check(target, boot.Guest(
        "capture vectors", {"scenario": "memremap-matrix",
                            "strategies": "default",
                            "geometries": "+".join(geometries)},
        ram_mb=1024, timeout_s=600), accel).steps
    if len(steps) != 3:
        raise ZdinitError(f"expected 3 dumps, the guest ran {len(steps)}")
    order0, compound_2m, compound_1g = (dumps_of(s) for s in steps)
    text = vectors_text(order0, compound_2m, compound_1g,
                        release=target.kernel.release)
    VECTORS.parent.mkdir(exist_ok=True)
    tmp = VECTORS.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, VECTORS)
    return f"wrote {VECTORS}"


# ---- sweeps ---------------------------------------------------------------

def big_bytes(quick):
    """The memmap size of the sweeps that fix one (1.6 GB: 100 GB's)."""
    return (64 << 20) if quick else (1600 << 20)


def sweeps(quick, nproc):
    sizes = "1M,16M" if quick else "1M,4M,16M,64M,256M,1600M"
    big = f"{big_bytes(quick) >> 20}M"
    reps = "3" if quick else "5"
    threads = ",".join(str(t) for t in range(1, nproc + 1))
    return {
        "size": ["--geometry", "order0", "--sizes", sizes, "--states",
                 "cold,hot,rewrite", "--backings", "anon-thp", "--reps", reps],
        # Every strategy from one thread to every CPU, cold like a
        # rebind's memmap in device memory: the data for the kernel's
        # fan-out threshold and thread cap (issue 10).
        "threads": ["--geometry", "order0", "--sizes", big, "--states",
                    "cold", "--backings", "anon-thp", "--threads",
                    threads, "--reps", reps, "--strategies", "all"],
        "backing": ["--geometry", "order0", "--sizes", big, "--states",
                    "rewrite", "--backings", "anon-4k,shm-file,hugetlb",
                    "--reps", reps],
        **{f"geometry-{g}": ["--geometry", g, "--sizes", big, "--states",
                             "rewrite", "--backings", "anon-thp", "--reps",
                             reps]
           for g in ("2M", "2M-reuse", "1G", "1G-reuse")},
    }


def best(runs, names):
    ok = [r for r in runs if r["strategy"] in names and "median_ns" in r]
    return min(ok, key=lambda r: r["median_ns"]) if ok else None


def wins_from(points):
    """points: (size, challenger ns, incumbent ns).  The smallest size from
    which the challenger is faster at that size and every larger one, or
    None."""
    start = None
    for size, challenger, incumbent in sorted(points):
        if challenger < incumbent:
            start = size if start is None else start
        else:
            start = None
    return start


def stream_crossover(size_runs, strategies):
    """Best strategy per state at the largest size, and where streaming
    starts to beat every cached strategy, as the rows of the lab's table
    of strategies the runs were measured with classify them."""
    kinds = store_kinds.names_by_kind(
        strategies, store_kinds.STRATEGY_KINDS,
        {r["strategy"] for r in size_runs if "strategy" in r},
        "the size sweep")
    out: dict = {}
    for state in sorted({r["state"] for r in size_runs if "state" in r}):
        mine = [r for r in size_runs if r.get("state") == state]
        sizes = sorted({r["memmap_bytes"] for r in mine})
        winners = {}
        points = []
        for size in sizes:
            at = [r for r in mine if r["memmap_bytes"] == size]
            s = best(at, kinds[store_kinds.STREAMING])
            c = best(at, kinds[store_kinds.CACHED])
            winners[size] = (s or c)["strategy"] if not (s and c) else (
                s["strategy"] if s["median_ns"] < c["median_ns"] else c["strategy"])
            if s and c:
                points.append((size, s["median_ns"], c["median_ns"]))
        out[state] = {"best_at_largest": winners[sizes[-1]],
                      "stream_wins_from_bytes": wins_from(points),
                      "best_by_size": {str(k): v for k, v in winners.items()}}
    return out


# ---- the store rule (zdinit/kernel/store_rule.py) against what was measured -----

# The lab strategies that stand for the rule's two choices: the kernel
# streams with MOVNTI and copies cached from registers.  A run from before
# template-regs existed stands in with the nearest cached copy it
# measured, in this order: the unrolled copy the kernel had before the
# copy from registers, the same as a loop over the words, memcpy().
KERNEL_STREAM = "movnti"
KERNEL_CACHED = ("template-regs", "template-reload", "template-u64",
                 "template-memcpy")
# A point is flagged where the best the kernel can run (the slow path,
# its cached copy, MOVNTI) is faster than the rule's choice by more than
# this factor: about the spread of one lab cell between sessions.  Wider
# streaming stores (SSE2, AVX, MOVDIR64B) are reported beside it: which
# instruction memcpy_nontemporal() should use is not the rule's question.
TOLERANCE = 1.10


def load_bench(path, cut_off=False):
    """The JSON a zdlab bench or a lab run wrote, each run with its
    geometry; one line why not.  cut_off: the file was cut off after a
    complete run line (a time limit); keep the runs of its whole lines."""
    def bad_json(text, err):
        if not cut_off:
            raise UsageError(f"{path} is cut off or not JSON ({err})") \
                from None
        return whole_lines(path, text)

    data = report.load_results(path, "a zdlab bench", bad_json)
    for r in data["runs"]:
        if isinstance(r, dict):
            r.setdefault("geometry", data.get("geometry"))
    return data


def whole_lines(path, text):
    """A zdlab bench cut off between runs: its first line (the header and
    the opening of the list), then one run per line."""
    lines = text.splitlines()
    try:
        data = json.loads(lines[0] + "]}")
        data["runs"] = [json.loads(line.removeprefix(","))
                        for line in lines[1:] if line.strip()]
    except (ValueError, IndexError) as err:
        raise UsageError(f"{path}: not a zdlab bench cut off between "
                         f"runs ({err})") from None
    return data


def check_measured(runs, cpu, where="the lab run"):
    """Refuse, in one line, a run the rule cannot be read from: no runs,
    a run that is neither measured nor marked unsupported or unavailable,
    no CPU or no LLC field.  An LLC of 0 (zdlab could not read it) is
    not refused: the rule assumes its default."""
    if not isinstance(cpu, dict) or "llc_kb" not in cpu:
        raise ZdinitError(f"{where} records no CPU LLC size (cpu.llc_kb)")
    if not runs:
        raise ZdinitError(f"{where} has no runs")
    for i, r in enumerate(runs):
        if not isinstance(r, dict):
            raise ZdinitError(f"{where}: run {i} is not an object")
        if r.get("unsupported") or r.get("unavailable"):
            continue
        missing = [k for k in ("strategy", "state", "threads",
                               "memmap_bytes", "median_ns") if k not in r]
        if missing:
            raise ZdinitError(f"{where}: run {i} ({r.get('strategy', '?')}) "
                              f"has no {', '.join(missing)}: a partial run")
    if not any("median_ns" in r for r in runs):
        raise ZdinitError(f"{where} measured nothing")


def point_key(r):
    return (r.get("sweep", ""), r["geometry"], r["backing"], r["state"],
            r["memmap_bytes"], r["threads"])


def tail_reuse(r):
    """Whether a run's layout has vmemmap tail reuse, as the kernel tells
    (store_rule.has_tail_reuse(): fewer struct pages written than pfns);
    a run that records neither count by its geometry's name ('2M-reuse',
    '1G-reuse')."""
    if "pfns" in r and "pages_written" in r:
        return store_rule.has_tail_reuse(r["pfns"], r["pages_written"])
    return str(r.get("geometry")).endswith("-reuse")


def cached_stand_in(strategies):
    """The cached copy that stands for the kernel's among strategies."""
    return next((s for s in KERNEL_CACHED if s in strategies), None)


def rule_stand_in(choice, strategies):
    """The lab strategy that stands for a store_rule.Choice, or None."""
    if choice.strategy == store_rule.STREAM:
        return KERNEL_STREAM if KERNEL_STREAM in strategies else None
    return cached_stand_in(strategies)


def rule_point(key, medians, llc_bytes, node_cpus, rule=store_rule.choose,
               reuse=False):
    """rule's choice at one measured point ({strategy: median ns}), whose
    layout has vmemmap tail reuse or not, against the best the kernel can
    run and the best store measured; None where MOVNTI or a cached copy
    is missing to judge it by."""
    cached = cached_stand_in(medians)
    if KERNEL_STREAM not in medians or not cached:
        return None
    sweep, geometry, backing, state, size, threads = key
    choice = rule(size, llc_bytes, node_cpus, tail_reuse=reuse)
    mine = rule_stand_in(choice, medians)
    kernel = {s: medians[s] for s in (KERNEL_STREAM, cached, "slow")
              if s in medians}
    kernel_best = min(kernel, key=kernel.__getitem__)
    best_any = min(medians, key=medians.get)
    return {"sweep": sweep, "geometry": geometry, "backing": backing,
            "state": state, "memmap_bytes": size, "threads": threads,
            "tail_reuse": reuse, "rule": choice.strategy,
            "rule_threads": choice.threads,
            "rule_strategy": mine, "rule_ns": medians[mine],
            "kernel_best": kernel_best, "kernel_best_ns": kernel[kernel_best],
            "best": best_any, "best_ns": medians[best_any],
            "rule_over_best": medians[mine] / kernel[kernel_best],
            "flagged": medians[mine] > TOLERANCE * kernel[kernel_best]}


def rule_points(runs, llc_bytes, node_cpus, rule=store_rule.choose):
    """rule_point() at every point measured, and the points it could not
    judge."""
    cells: dict = {}
    reuse: dict = {}
    for r in runs:
        if "median_ns" in r:
            key = point_key(r)
            cells.setdefault(key, {})[r["strategy"]] = r["median_ns"]
            if reuse.setdefault(key, tail_reuse(r)) != tail_reuse(r):
                raise ZdinitError(f"runs of {key} differ in tail reuse")
    points: list = []
    unjudged: list = []
    for key, medians in sorted(cells.items()):
        p = rule_point(key, medians, llc_bytes, node_cpus, rule, reuse[key])
        (points if p else unjudged).append(p or key)
    return points, unjudged


def rule_report(runs, cpu, node_cpus):
    """The store rule on this CPU and at every point of runs."""
    llc = cpu["llc_kb"] << 10
    points, unjudged = rule_points(runs, llc, node_cpus)
    return {"llc_bytes": llc, "llc_assumed": not llc,
            "stream_from_bytes": store_rule.stream_from_bytes(llc),
            "node_cpus": node_cpus,
            "max_threads": store_rule.DEFAULT_MAX_THREADS,
            "tolerance": TOLERANCE, "points": points,
            "unjudged": [list(k) for k in unjudged]}


def recommend(runs, cpu, node_cpus, strategies):
    """What a lab run says: where streaming starts to win in the size
    sweep, and the store rule's choice at every point measured; one line
    why not for a run it cannot be read from.  strategies: the rows of
    the lab's table the runs were measured with."""
    check_measured(runs, cpu)
    return {"stream_crossover": stream_crossover(
                [r for r in runs if r.get("sweep", "size") == "size"],
                strategies),
            "rule": rule_report(runs, cpu, node_cpus)}


def recommend_file(path, node_cpus):
    """recommend() of a memmap_stores.json or zdlab bench output."""
    data = load_bench(path)
    return recommend(data["runs"], data.get("cpu"), node_cpus,
                     recorded_rows(data, "strategies"))


def fmt_ms(ns):
    return f"{ns / 1e6:.2f}"


def point_label(p):
    sweep = f"{p['sweep']} " if p["sweep"] else ""
    return (f"{sweep}{p['geometry']} {p['backing']} {p['state']} "
            f"{p['memmap_bytes'] >> 20}M x{p['threads']}")


def rule_table(points):
    """One row per point: the rule's choice, the best the kernel can run
    and the best store measured, in ms."""
    rows = [["point", "rule", "rule ms", "kernel best", "ms", "rule/best",
             "best store", "ms", "flag"]]
    for p in points:
        rows.append([point_label(p),
                     f"{p['rule']} ({p['rule_strategy']})",
                     fmt_ms(p["rule_ns"]), p["kernel_best"],
                     fmt_ms(p["kernel_best_ns"]), f"{p['rule_over_best']:.2f}",
                     p["best"], fmt_ms(p["best_ns"]),
                     f">{TOLERANCE - 1:.0%}" if p["flagged"] else ""])
    return clear_stores.grid(rows)


def rule_summary_lines(rule):
    """The rule as applied here, then every point where the best the
    kernel can run beats the rule's choice by more than TOLERANCE."""
    llc = ("unknown, so " if rule["llc_assumed"] else
           f"{clear_stores.fmt_size(rule['llc_bytes'])}, ")
    flagged = [p for p in rule["points"] if p["flagged"]]
    lines = [f"store rule (zdinit/kernel/store_rule.py): LLC {llc}stream from "
             f"{clear_stores.fmt_size(rule['stream_from_bytes'])} of struct "
             f"pages (cached with vmemmap tail reuse), one thread per "
             f"{clear_stores.fmt_size(store_rule.BYTES_PER_THREAD)} up to "
             f"min({rule['node_cpus']} CPUs, {rule['max_threads']}); "
             f"within {TOLERANCE - 1:.0%} of the best the kernel can run at "
             f"{len(rule['points']) - len(flagged)} of "
             f"{len(rule['points'])} points"]
    lines += [f"  {point_label(p)}: rule {p['rule_strategy']} "
              f"{fmt_ms(p['rule_ns'])} ms, {p['kernel_best']} "
              f"{fmt_ms(p['kernel_best_ns'])} ms is "
              f"{p['rule_over_best']:.2f}x faster" for p in flagged]
    return lines


# ---- the committed native runs (docs/results/lab*/) ----------------------

# Cut off by the time limit of the session that made them (their
# README): every line after the header holds one complete run, and only
# those are read.  Every other file must be whole.
CUT_OFF_RUNS = {"lab-xeon-emr-16cpu/zdlab/mm-16000M.json",
                "lab-xeon-emr-16cpu/zdlab/mm-64000M.json"}
# The CPUs of the committed runs, by (family, model), as tables name them.
CPU_NAMES = {(25, 1): "AMD Zen 3", (25, 17): "AMD Zen 4",
             (26, 2): "AMD Zen 5", (6, 207): "Intel Xeon EMR",
             (6, 167): "Intel Xeon model 167"}
# The binds the tables show: struct page bytes of a 100 GB and a 1 TB
# order-0 device (64 bytes per 4 KiB page), as the lab's sizes name them.
BINDS = {"100 GB": 1600 << 20, "1 TB": 16000 << 20}


def cpu_name(cpu):
    return CPU_NAMES.get((cpu.get("family"), cpu.get("model_id")),
                         f"family {cpu.get('family')} model "
                         f"{cpu.get('model_id')}")


def committed_files(root=paths.COMMITTED_RESULTS):
    """(path under root, JSON) of every committed lab run's file but
    `zdlab features`, which holds the CPU alone."""
    for path in sorted(root.glob("lab*/**/*.json")):
        name = path.relative_to(root).as_posix()
        if path.name != "features.json":
            yield name, load_bench(path, cut_off=name in CUT_OFF_RUNS)


def committed_memmap_runs(root=paths.COMMITTED_RESULTS):
    """{path under root: zdlab bench} of every committed lab run with
    memmap stores."""
    out: dict = {}
    for name, data in committed_files(root):
        if any("strategy" in r for r in data["runs"]):
            check_measured(data["runs"], data.get("cpu"), name)
            out[name] = data
    return out


def committed_fault_runs(root=paths.COMMITTED_RESULTS):
    """{path under root: (cpu, fault runs)} of every committed clear and
    touch: the "clear" part of a memmap_stores.json, or a `zdlab clear fault`;
    a --quick lab run repeats too few times to count."""
    out: dict = {}
    for name, data in committed_files(root):
        if data.get("quick"):
            continue
        if "clear" in data:
            out[name] = (data["cpu"], data["clear"]["fault"])
        elif data.get("command") == "clear fault":
            out[name] = (data["cpu"], data["runs"])
    return out


def node_cpus_by_cpu(runs_by_file):
    """The CPUs each machine had, as the most threads its runs used (the
    lab's threads sweep runs to every CPU; zdlab records no CPU count)."""
    out: dict = {}
    for data in runs_by_file.values():
        name = cpu_name(data["cpu"])
        most = max((r.get("threads", 1) for r in data["runs"]), default=1)
        out[name] = max(out.get(name, 1), most)
    return out


def committed_rule_points(runs_by_file=None, rule=store_rule.choose):
    """[(file, CPU name, point)] at every point of the committed runs,
    and [(file, key)] of those that cannot be judged."""
    runs_by_file = runs_by_file or committed_memmap_runs()
    cpus = node_cpus_by_cpu(runs_by_file)
    points: list = []
    unjudged: list = []
    for name, data in runs_by_file.items():
        cpu = cpu_name(data["cpu"])
        mine, left = rule_points(data["runs"], data["cpu"]["llc_kb"] << 10,
                                 cpus[cpu], rule)
        points += [(name, cpu, p) for p in mine]
        unjudged += [(name, key) for key in left]
    return points, unjudged


def exception_key(name, p):
    return f"{name}: {point_label(p)}"


# Ranges with vmemmap tail reuse (the '2M-reuse' and '1G-reuse' layouts)
# keep cached copies under the rule (zdinit/kernel/store_rule.py gives the runs
# behind it), so the points where MOVNTI lost there are no exceptions.
_ZEN4_HOST = ("this host's bandwidth moved between cells (README there: "
              "MOVNTI between 12 and 26 GB/s in the same cell), and MOVNTI "
              "ran last in each")
# Zen 3 (docs/results/lab-zen3/): two lab runs minutes apart on the two
# vCPUs of a KVM guest, and focused runs between them.  A point flagged
# in one run and within 10% or reversed in the other is host noise.
_ZEN3_HOST = ("host noise: this KVM guest's two runs, minutes apart, "
              "differ by more than this in many cells (README there)")
_ZEN3_2M = ("flagged in both lab runs (MOVNTI 187.58 and 183.78 ms against "
            "template-regs 129.91 and 139.02) but reversed in the quiet "
            "focused run made between them, so host noise by that run: "
            "MOVNTI 116.15 against 117.98 ms rewrite, 124.24 against "
            "131.14 cold (focused/zen3-geom-2M.json); SSE2 or AVX2 "
            "streaming was the fastest store in all three (98.53, 93.34, "
            "94.57 ms)")
_ZEN3_COLD16 = ("flagged in both runs (MOVNTI 0.85 and 0.87 ms against "
                "template-regs 0.94 and 1.38), not host noise: a cold 16 MB "
                "memmap streams faster here, as on the Xeon; below 32 MiB "
                "the rule keeps cached copies for Zen 4, where "
                "template-regs was 1.1-2.6x faster than MOVNTI at 16 MB, "
                "and for hot and rewritten 16 MB memmaps, where "
                "template-regs was the faster in run1 (0.83 and 0.64 ms "
                "against MOVNTI's 0.87 and 0.91)")
_ZEN3_HUGETLB = ("flagged in both runs (MOVNTI 157.16 and 162.18 ms against "
                 "template-regs 133.29 and 128.72), not host noise; "
                 "streaming is not what lost: AVX2 streaming was the "
                 "fastest store in both (79.13 and 79.92 ms), and MOVNTI's "
                 "repetitions spread from 94.00 to 189.14 ms in run1; on "
                 "THP MOVNTI beat template-regs in both runs' rewrite cell "
                 "(114.19 against 119.39, 95.43 against 121.38 ms); which "
                 "instruction memcpy_nontemporal() streams with is not the "
                 "rule's question")
_ZEN3_X2 = ("flagged in both runs (MOVNTI 86.12 and 92.65 ms against "
            "template-regs 68.30 and 67.03; a unit-test run perturbed "
            "run1's threads sweep), not host noise; streaming is not what "
            "lost: full-line streaming was the fastest store in both "
            "(AVX2 46.65 ms in run1, SSE2 44.88 in run2), though each took "
            "81.03 and 79.21 ms in the other run; from one thread to two "
            "MOVNTI gained 1.22x in run2, template-regs 1.87x; which "
            "instruction memcpy_nontemporal() streams with is not the "
            "rule's question")
# The Xeon reporting family 6 model 167 (docs/results/lab-xeon-model167-2cpu/):
# one `make lab` on a shared 2-vCPU guest, no repeat.
_XEON167 = "lab-xeon-model167-2cpu/lab.json: "
_XEON167_COLD_SMALL = (
    "a cold memmap below 32 MiB streams faster here (MOVNTI 0.045, 0.163 "
    "and 0.684 ms against template-regs 0.113, 0.441 and 1.822 at 1, 4 "
    "and 16 MB), as at 16 MB on the Emerald Rapids Xeon and on Zen 3; the "
    "rule goes by size alone and keeps cached copies below 32 MiB for "
    "Zen 4, where template-regs was 1.1-2.6x faster than MOVNTI at 16 MB, "
    "and for hot and rewritten memmaps, faster cached here too (16 MB "
    "hot: 0.562 against 1.609 ms); at 16 MB the loss is 1.1 ms")
_XEON167_REUSE = (
    "with vmemmap tail reuse MOVNTI was faster here (118.18 and 156.37 ms "
    "against template-regs 181.40 and 222.12 with 2M-reuse and 1G-reuse, "
    "rewrite), the opposite of Zen 3, where template-regs was 1.32x-1.89x "
    "faster in two lab runs and a quiet focused run, and of Zen 4 and "
    "Zen 5 earlier; one run of a shared 2-vCPU guest, rewrite only, and "
    "no other Intel run measured tail reuse: the rule keeps cached copies "
    "with tail reuse until repeated runs, cold and rewritten, show Intel "
    "parts streaming faster there")
# Where the rule's choice was measured more than TOLERANCE slower than
# the best the kernel can run, and why the rule stands.  Exactly the
# points flagged in the committed runs (tests/test_store_rule.py), and
# printed by rule_tables() for the docs.
RULE_EXCEPTIONS = {
    "lab-template-regs/run1.json: order0 anon-thp cold 64M x1":
        "MOVNTI took 5.16-5.40 ms in all nine repetitions; the same cell "
        "in run2 and run3: 2.61 and 2.75 ms against 2.41 and 2.62 (1.08x "
        "and 1.05x); " + _ZEN4_HOST,
    "lab-template-regs/run1.json: order0 anon-thp cold 256M x1":
        "MOVNTI's repetitions spread from 10.5 to 21.1 ms; the same cell "
        "in run2 and run3: 1.03x and 0.79x; " + _ZEN4_HOST,
    "lab-template-regs/run1.json: order0 anon-thp hot 256M x1":
        "MOVNTI's repetitions spread from 12.7 to 21.6 ms; the same cell "
        "in run2 and run3: 1.02x and 1.04x; " + _ZEN4_HOST,
    "lab-template-regs/run2.json: order0 anon-thp rewrite 64M x1":
        "at 64 MiB, twice Zen 4's L3, the copy from registers was ahead "
        "in most cells (MOVNTI 0.95-1.13x of it in the eight others, "
        "0.3 ms at most; run1's cold cell aside), and the two tie from "
        "256 MB on (0.79-1.04x but for run1's noisy cells); the rule "
        "streams from 32 MiB for the Xeon and Zen 5, and a streamed "
        "memmap leaves the L3 to others",
    "lab-template-regs/run3-reversed.json: order0 anon-thp cold 1600M x1":
        "MOVNTI 132.8 ms against 70.6 and 65.7 in run1 and run2, 1.05x "
        "and 0.99x template-regs there; " + _ZEN4_HOST,
    "lab-template-regs/run3-reversed.json: order0 anon-thp hot 1600M x1":
        "MOVNTI 127.1 ms against 69.4 and 65.9 in run1 and run2, 0.98x "
        "and 1.01x template-regs there; " + _ZEN4_HOST,
    "lab-template-regs/run3-reversed.json: order0 anon-thp rewrite "
    "1600M x1":
        "MOVNTI 80.8 ms against 66.1 and 66.9 in run1 and run2, 0.96x "
        "and 0.99x template-regs there; " + _ZEN4_HOST,
    "lab-xeon-emr-16cpu/zdlab/mm3-small.json: order0 anon-thp cold 16M x1":
        "a cold 16 MB memmap streams faster on the Xeon (2.02 against "
        "2.53 ms, 0.5 ms); below 32 MiB the rule keeps cached copies for "
        "Zen 4, where template-regs was 1.1-2.6x faster than MOVNTI at "
        "16 MB, and for hot and rewritten 16 MB memmaps on one Xeon "
        "thread, where MOVNTI was 1.09x and 1.24x slower",
    "lab-xeon-emr-16cpu/zdlab/mm3-small.json: order0 anon-thp cold 16M x16":
        "16 threads over 16 MB, 1 MB each; the rule builds a 16 MB memmap "
        "on one thread, cached for the reasons of the one-thread cell",
    "lab-xeon-emr-16cpu/zdlab/mm3-small.json: order0 anon-thp hot 16M x16":
        "16 threads over 16 MB, 1 MB each; the rule builds it on one "
        "thread, where the cached copy is the faster (1.79 against "
        "1.96 ms)",
    "lab-zen3/run1/lab.json: backing order0 hugetlb rewrite 1600M x1":
        _ZEN3_HUGETLB,
    "lab-zen3/run2/lab.json: backing order0 hugetlb rewrite 1600M x1":
        _ZEN3_HUGETLB,
    "lab-zen3/run1/lab.json: geometry-1G 1G anon-thp rewrite 1600M x1":
        "reversed in run2 (MOVNTI 110.08 against template-regs 158.44 ms) "
        "and in focused/zen3-geom-1G.json (98.35 against 120.71); "
        + _ZEN3_HOST,
    "lab-zen3/run1/lab.json: geometry-2M 2M anon-thp rewrite 1600M x1":
        _ZEN3_2M,
    "lab-zen3/run2/lab.json: geometry-2M 2M anon-thp rewrite 1600M x1":
        _ZEN3_2M,
    "lab-zen3/run1/lab.json: size order0 anon-thp cold 16M x1":
        _ZEN3_COLD16,
    "lab-zen3/run2/lab.json: size order0 anon-thp cold 16M x1":
        _ZEN3_COLD16,
    "lab-zen3/run1/lab.json: threads order0 anon-thp cold 1600M x1":
        "a 12-second unit-test run overlapped run1's threads sweep "
        "(README there); reversed in run2 (MOVNTI 113.04 against "
        "template-regs 125.56 ms) and in both size sweeps' cell (103.32 "
        "against 125.03, 101.56 against 116.21); " + _ZEN3_HOST,
    "lab-zen3/run1/lab.json: threads order0 anon-thp cold 1600M x2":
        _ZEN3_X2,
    "lab-zen3/run2/lab.json: threads order0 anon-thp cold 1600M x2":
        _ZEN3_X2,
    "lab-zen3/run2/lab.json: backing order0 shm-file rewrite 1600M x1":
        "reversed in run1 (MOVNTI 126.20 against template-regs 132.42 "
        "ms); " + _ZEN3_HOST,
    "lab-zen3/run2/lab.json: size order0 anon-thp cold 64M x1":
        "reversed in run1 (MOVNTI 3.45 against template-regs 4.62 ms); "
        + _ZEN3_HOST,
    "lab-zen3/run2/lab.json: size order0 anon-thp cold 256M x1":
        "reversed in run1 (MOVNTI 14.63 against template-regs 17.66 ms); "
        + _ZEN3_HOST,
    "lab-zen3/run2/lab.json: size order0 anon-thp hot 16M x1":
        "within 10% and reversed in run1 (template-regs 0.83 against "
        "MOVNTI 0.87 ms); " + _ZEN3_HOST,
    "lab-zen3/run2/lab.json: size order0 anon-thp hot 64M x1":
        "reversed in run1 (MOVNTI 3.31 against template-regs 4.21 ms); "
        + _ZEN3_HOST,
    "lab-zen3/run2/lab.json: size order0 anon-thp rewrite 16M x1":
        "reversed in run1 (template-regs 0.64 against MOVNTI 0.91 ms); "
        + _ZEN3_HOST,
    "lab-zen3/run2/lab.json: size order0 anon-thp rewrite 64M x1":
        "reversed in run1 (MOVNTI 3.46 against template-regs 4.16 ms); "
        + _ZEN3_HOST,
    "lab-zen3/run2/lab.json: size order0 anon-thp rewrite 256M x1":
        "reversed in run1 (MOVNTI 15.97 against template-regs 17.35 ms); "
        + _ZEN3_HOST,
    _XEON167 + "size order0 anon-thp cold 1M x1": _XEON167_COLD_SMALL,
    _XEON167 + "size order0 anon-thp cold 4M x1": _XEON167_COLD_SMALL,
    _XEON167 + "size order0 anon-thp cold 16M x1": _XEON167_COLD_SMALL,
    _XEON167 + "geometry-2M-reuse 2M-reuse anon-thp rewrite 1600M x1":
        _XEON167_REUSE,
    _XEON167 + "geometry-1G-reuse 1G-reuse anon-thp rewrite 1600M x1":
        _XEON167_REUSE,
    _XEON167 + "size order0 anon-thp hot 64M x1":
        "MOVNTI 3.614 ms against template-regs 3.280 (1.10x, 0.33 ms), the "
        "one cell from 32 MiB up without tail reuse where a cached copy "
        "won here; cold and rewritten 64 MB memmaps streamed faster "
        "(2.707 against 7.422 ms, 2.846 against 3.290), and at 160 MB on "
        "the Emerald Rapids Xeon MOVNTI won in every state",
}


def rule_disagreements(points):
    """The flagged points RULE_EXCEPTIONS does not explain, and the
    exceptions no longer flagged: both empty when the committed runs
    agree with the rule."""
    flagged = {exception_key(name, p) for name, _, p in points
               if p["flagged"]}
    return (sorted(flagged - RULE_EXCEPTIONS.keys()),
            sorted(RULE_EXCEPTIONS.keys() - flagged))


def markdown(rows):
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    lines.insert(1, "|" + "---|" * len(rows[0]))
    return "\n".join(lines)


def fastest(medians, names=None):
    """'strategy xN ms' of the fastest of names (all if None)."""
    mine = {k: v for k, v in medians.items() if names is None or k[0] in names}
    (strategy, t) = min(mine, key=mine.__getitem__)
    return f"{strategy} x{t} {fmt_ms(mine[strategy, t])}"


STATE_ORDER = {"cold": 0, "hot": 1, "rewrite": 2}


def bind_cells(data):
    """{(bind bytes, state, sweep): {(strategy, threads): median ns}} of
    one run's order-0 THP points at the BINDS sizes, cold first."""
    cells: dict = {}
    for r in data["runs"]:
        if ("median_ns" in r and r["geometry"] == "order0"
                and r["backing"] == "anon-thp"
                and r["memmap_bytes"] in BINDS.values()):
            cell = cells.setdefault((r["memmap_bytes"], r["state"],
                                     r.get("sweep", "")), {})
            cell.setdefault((r["strategy"], r["threads"]), r["median_ns"])
    return dict(sorted(cells.items(), key=lambda c: (
        c[0][0], STATE_ORDER[c[0][1]], c[0][2])))


def bind_row(cpu, name, key, medians, llc_bytes, node_cpus):
    """The rule's choice at one bind and its time where measured (at its
    threads, or the most measured below them), the best the kernel can
    run and the best store at those threads, and upstream 7.4's method."""
    size, state, sweep = key
    # bind_cells() holds order-0 runs alone: no tail reuse.
    choice = store_rule.choose(size, llc_bytes, node_cpus, tail_reuse=False)
    mine = rule_stand_in(choice, {s for s, _ in medians})
    t = max((t for s, t in medians if s == mine and t <= choice.threads),
            default=None)
    at = {k: v for k, v in medians.items() if k[1] == t}
    kernel = {KERNEL_STREAM, cached_stand_in({s for s, _ in at}), "slow"}
    seed = medians.get((KERNEL_STREAM, 1))
    return [cpu, name + (f" ({sweep})" if sweep else ""),
            next(b for b, v in BINDS.items() if v == size), state,
            f"{mine} x{choice.threads}",
            f"{fmt_ms(at[mine, t])} (x{t})" if at else "not measured",
            fastest(at, kernel) if at else "", fastest(at) if at else "",
            fmt_ms(seed) if seed else "not measured"]


def bind_rows(runs_by_file):
    """bind_row() per CPU, run, bind and state."""
    cpus = node_cpus_by_cpu(runs_by_file)
    rows = [["CPU", "run", "bind", "state", "rule", "rule ms",
             "kernel best ms", "best store ms",
             "upstream 7.4 method ms (MOVNTI x1)"]]
    for name, data in runs_by_file.items():
        cpu = cpu_name(data["cpu"])
        rows += [bind_row(cpu, name, key, medians,
                          data["cpu"]["llc_kb"] << 10, cpus[cpu])
                 for key, medians in bind_cells(data).items()]
    return rows


def point_rows(points, sizes):
    """rule_point()s of the given memmap sizes as table rows."""
    rows = [["CPU", "run", "point", "rule", "rule ms", "kernel best",
             "ms", "rule/best", "best store", "ms"]]
    for name, cpu, p in points:
        if p["memmap_bytes"] in sizes:
            rows.append([cpu, name, point_label(p), p["rule_strategy"],
                         fmt_ms(p["rule_ns"]), p["kernel_best"],
                         fmt_ms(p["kernel_best_ns"]),
                         f"{p['rule_over_best']:.2f}", p["best"],
                         fmt_ms(p["best_ns"])])
    return rows


def exception_rows(points):
    rows = [["CPU", "point", "rule ms", "kernel best ms",
             "why the rule stands"]]
    for name, cpu, p in points:
        if p["flagged"]:
            key = exception_key(name, p)
            rows.append([cpu, key, f"{p['rule_strategy']} "
                         f"{fmt_ms(p['rule_ns'])}",
                         f"{p['kernel_best']} {fmt_ms(p['kernel_best_ns'])}",
                         RULE_EXCEPTIONS.get(key, "NOT EXPLAINED")])
    return rows


def rule_tables(runs_by_file=None):
    """Three markdown tables from the committed runs: the rule at a
    100 GB and a 1 TB bind, every point measured at those sizes, and the
    points where the rule's choice is more than TOLERANCE slower than the
    best the kernel can run, with why."""
    runs_by_file = runs_by_file or committed_memmap_runs()
    points, _ = committed_rule_points(runs_by_file)
    return "\n\n".join([
        "The store rule at a 100 GB and a 1 TB bind (order-0, THP; ms, "
        "median; xN: threads; the rule's threads for the CPUs that run "
        "had):", markdown(bind_rows(runs_by_file)),
        "Every point measured at those sizes:",
        markdown(point_rows(points, set(BINDS.values()))),
        f"Where the rule's choice is more than {TOLERANCE - 1:.0%} slower "
        "than the best the kernel can run:",
        markdown(exception_rows(points))]) + "\n"


def table(runs):
    head = ["sweep", "geometry", "backing", "state", "thr", "memmap",
            "strategy", "ns/page", "GB/s", "of floor"]
    rows = [head]
    for r in runs:
        if r.get("unsupported") or r.get("unavailable"):
            note = "unsupported" if r.get("unsupported") else "unavailable"
            rows.append([r["sweep"], r["geometry"], r["backing"],
                         r.get("state", "-"), str(r.get("threads", "-")),
                         f"{r['memmap_bytes'] >> 20}M",
                         r.get("strategy", "-"), note, "", ""])
            continue
        rows.append([r["sweep"], r["geometry"], r["backing"], r["state"],
                     str(r["threads"]), f"{r['memmap_bytes'] / 2**20:.0f}M",
                     r["strategy"], f"{r['ns_per_page']:.2f}",
                     f"{r['gb_per_s']:.1f}", f"{r['of_floor']:.2f}"])
    return clear_stores.grid(rows)


def plot(size_runs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    states = sorted({r["state"] for r in size_runs if "median_ns" in r})
    fig, axes = plt.subplots(1, len(states), figsize=(5 * len(states), 4),
                             squeeze=False, sharey=True)
    for ax, state in zip(axes[0], states):
        mine = [r for r in size_runs if r.get("state") == state
                and "median_ns" in r]
        for name in sorted({r["strategy"] for r in mine}):
            pts = sorted((r["memmap_bytes"], r["ns_per_page"])
                         for r in mine if r["strategy"] == name)
            ax.plot([p[0] / 2**20 for p in pts], [p[1] for p in pts],
                    marker="o", label=name)
        ax.set_xscale("log")
        ax.set_title(f"destination {state}")
        ax.set_xlabel("memmap size (MiB)")
        ax.set_ylabel("ns per struct page")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@contextlib.contextmanager
def one_run_at_a_time(root):
    """Two labs at once would time each other (and share hugetlb pools)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lab.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ZdinitError("another lab run is in progress "
                              f"(lock {root / '.lab.lock'})") from None
        yield


def plot_or_warn(name, draw):
    """A plot is a view of memmap_stores.json: never lose the run over it."""
    try:
        draw()
    except Exception as exc:
        first = (str(exc).splitlines() or [""])[0]
        progress.say(f"warning: {name} not drawn: "
                     f"{type(exc).__name__}: {first}")


def run(quick=False, reserve_hugetlb=False, out_root=paths.RESULTS):
    if not VECTORS.exists():
        raise ZdinitError(f"{VECTORS} missing: run 'python3 -m zdinit "
                          "capture-vectors'")
    feats = features()
    nproc = os.cpu_count() or 1
    # The memmap backing sweep maps big_bytes() of 2 MB hugetlb pages too.
    need = clear_stores.hugetlb_need(quick)
    need[2048] = max(need[2048], big_bytes(quick) // clear_stores.HUGE_2M)
    with one_run_at_a_time(out_root), (
            clear_stores.hugetlb_pool(need) if reserve_hugetlb
            else contextlib.nullcontext({})) as added:
        partial, final = report.new_results_dir(out_root)
        all_runs = []
        try:
            for name, args in sweeps(quick, nproc).items():
                progress.say(f"lab sweep '{name}'")
                data = json.loads(zdlab(["bench", str(VECTORS)] + args))
                for r in data["runs"]:
                    r.update(sweep=name, geometry=data["geometry"])
                all_runs += data["runs"]
            clear = clear_stores.run(zdlab, quick, feats["cpu"]["llc_kb"] << 10,
                                  feats["clear_methods"], progress.say)
            clear["rule"] = clear_stores.clear_rule(clear["fault"],
                                                    feats["cpu"], quick)
            size_runs = [r for r in all_runs if r["sweep"] == "size"]
            rec = recommend(all_runs, feats["cpu"], nproc,
                            feats["strategies"])
            threads = [r for r in all_runs if r["sweep"] == "threads"
                       and "median_ns" in r]
            results = {"cpu": feats["cpu"], "supported": feats["supported"],
                       "clear_supported": feats["clear_supported"],
                       "strategies": feats["strategies"],
                       "clear_methods": feats["clear_methods"],
                       "quick": quick, "vectors": str(VECTORS.name),
                       "kernel_stream_min_bytes":
                           rec["rule"]["stream_from_bytes"],
                       "recommendation": rec, "runs": all_runs,
                       "thread_scaling": thread_scaling(threads),
                       "threads_to_saturate": threads_to_saturate(threads),
                       "hugetlb_pages_added": added, "clear": clear}
            (partial / "lab.json").write_text(json.dumps(results, indent=1)
                                              + "\n")
            text = "\n\n".join([table(all_runs),
                                 rule_table(rec["rule"]["points"]),
                                 clear_stores.bench_table(clear["bench"]),
                                 clear_stores.fault_table(clear["fault"])])
            (partial / "lab.txt").write_text(text + "\n")
        except BaseException:
            report.mark_failed(partial)
            raise
        plot_or_warn("lab.png", lambda: plot(size_runs, partial / "lab.png"))
        plot_or_warn("lab-clear.png", lambda: clear_stores.plot(
            clear["bench"], clear["fault"], feats["clear_methods"],
            partial / "lab-clear.png"))
        final = report.publish(partial, final)
    lines = [text, "", f"CPU: {feats['cpu']['model']} (family "
             f"{feats['cpu']['family']}, model {feats['cpu']['model_id']}); "
             "supported: " + ", ".join(feats["supported"]),
             "clearing methods: " + ", ".join(feats["clear_supported"])]
    for state, r in rec["stream_crossover"].items():
        lines.append(f"{state}: best at the largest size: "
                     f"{r['best_at_largest']}; streaming wins from "
                     f"{clear_stores.fmt_opt(r['stream_wins_from_bytes'])}")
    lines += rule_summary_lines(rec["rule"])
    saturate = threads_to_saturate(threads)
    lines.append(f"threads to reach {SATURATED:.0%} of the best rate (of "
                 f"{nproc} CPUs): " + ", ".join(f"{name} {n}" for name, n
                                                in saturate.items()))
    lines += clear_stores.summary_lines(clear["recommendation"])
    lines += clear_stores.clear_rule_lines(clear["rule"])
    lines.append(f"results: {final}")
    return "\n".join(lines)


def threads_to_saturate(runs):
    """Per strategy, the fewest threads that reach SATURATED of its best
    rate over the thread counts measured."""
    out: dict = {}
    for name in sorted({r["strategy"] for r in runs}):
        by = {r["threads"]: r["gb_per_s"] for r in runs if r["strategy"] == name}
        best = max(by.values())
        out[name] = min(t for t, v in by.items() if v >= SATURATED * best)
    return out


def thread_scaling(runs):
    out: dict = {}
    for name in sorted({r["strategy"] for r in runs}):
        by = {r["threads"]: r["gb_per_s"] for r in runs if r["strategy"] == name}
        if 1 in by:
            out[name] = {str(t): round(v / by[1], 2) for t, v in sorted(by.items())}
    return out

