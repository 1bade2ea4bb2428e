"""Drive the native lab (lab/): build it, capture its vectors, run sweeps."""
import contextlib
import fcntl
import json
import os
import pathlib
import re
import subprocess

from zdinit import lab_clear, parse, progress, qemu, report
from zdinit.errors import ZdinitError

LAB = pathlib.Path(__file__).resolve().parent.parent / "lab"
VECTORS = LAB / "vectors" / "linux-6.12-x86_64.txt"
STREAMING = ("movnti", "sse2-movntdq", "avx2-vmovntdq", "avx512-vmovntdq",
             "movdir64b")
CACHED = ("slow", "template-u64", "template-memcpy", "template-reload",
          "template-regs")
# A thread count "saturates" a strategy when it reaches this share of the
# strategy's best rate over all thread counts: the share below which
# another thread is worth a kernel work item is a judgement, not a
# measurement, and 90% is the one used here.
SATURATED = 0.9
DUMP = re.compile(r"zd_memremap: dump page (\d+) \+(\d+) ([0-9a-f]+)")
DUMP_HEAD = re.compile(r"zd_memremap: dump struct_page_size (\d+) head ([0-9a-f]+)")


def binary(sanitized=False):
    target = "build/zdlab-san" if sanitized else "build/zdlab"
    proc = subprocess.run(["make", "-s", "-C", str(LAB), target],
                          capture_output=True, text=True)
    if proc.returncode:
        raise ZdinitError(f"building the lab failed: {proc.stderr.strip()}")
    return LAB / target


def zdlab(args, sanitized=False, env=None):
    proc = subprocess.run([str(binary(sanitized))] + args,
                          capture_output=True, text=True, env=env)
    if proc.returncode:
        raise ZdinitError(f"zdlab {' '.join(args[:2])}: "
                          f"{(proc.stderr or proc.stdout).strip()[-400:]}")
    return proc.stdout


def features():
    return json.loads(zdlab(["features"]))


# ---- test vectors -------------------------------------------------------

def dumps_of(step):
    """{page index: bytes} and the head address from one module dump."""
    pages, head, size = {}, None, None
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
    boot = qemu.boot(target.kernel, target.initrd,
                     {"scenario": "memremap-matrix", "strategies": "default",
                      "geometries": "+".join(geometries)},
                     accel, ram_mb=1024, label="capture vectors")
    steps = parse.parse(boot.log).steps
    if len(steps) != 3:
        raise ZdinitError(f"expected 3 dumps, the guest ran {len(steps)}")
    text = vectors_text(*(dumps_of(s) for s in steps),
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


def recommend(size_runs):
    """Best strategy per state at the largest size, and where streaming
    starts to beat every cached strategy."""
    out = {}
    for state in sorted({r["state"] for r in size_runs if "state" in r}):
        mine = [r for r in size_runs if r.get("state") == state]
        sizes = sorted({r["memmap_bytes"] for r in mine})
        winners = {}
        points = []
        for size in sizes:
            at = [r for r in mine if r["memmap_bytes"] == size]
            s, c = best(at, STREAMING), best(at, CACHED)
            winners[size] = (s or c)["strategy"] if not (s and c) else (
                s["strategy"] if s["median_ns"] < c["median_ns"] else c["strategy"])
            if s and c:
                points.append((size, s["median_ns"], c["median_ns"]))
        out[state] = {"best_at_largest": winners[sizes[-1]],
                      "stream_wins_from_bytes": wins_from(points),
                      "best_by_size": {str(k): v for k, v in winners.items()}}
    return out


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
    return lab_clear.grid(rows)


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
    """A plot is a view of lab.json: never lose the run over it."""
    try:
        draw()
    except Exception as exc:
        first = (str(exc).splitlines() or [""])[0]
        progress.say(f"warning: {name} not drawn: "
                     f"{type(exc).__name__}: {first}")


def run(quick=False, reserve_hugetlb=False, out_root=report.RESULTS):
    if not VECTORS.exists():
        raise ZdinitError(f"{VECTORS} missing: run 'python3 -m zdinit "
                          "capture-vectors'")
    feats = features()
    nproc = os.cpu_count() or 1
    # The memmap backing sweep maps big_bytes() of 2 MB hugetlb pages too.
    need = lab_clear.hugetlb_need(quick)
    need[2048] = max(need[2048], big_bytes(quick) // lab_clear.HUGE_2M)
    with one_run_at_a_time(out_root), (
            lab_clear.hugetlb_pool(need) if reserve_hugetlb
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
            clear = lab_clear.run(zdlab, quick, feats["cpu"]["llc_kb"] << 10,
                                  progress.say)
            size_runs = [r for r in all_runs if r["sweep"] == "size"]
            rec = recommend(size_runs)
            threads = [r for r in all_runs if r["sweep"] == "threads"
                       and "median_ns" in r]
            results = {"cpu": feats["cpu"], "supported": feats["supported"],
                       "clear_supported": feats["clear_supported"],
                       "quick": quick, "vectors": str(VECTORS.name),
                       "kernel_stream_min_bytes": feats["cpu"]["llc_kb"] << 10,
                       "recommendation": rec, "runs": all_runs,
                       "thread_scaling": thread_scaling(threads),
                       "threads_to_saturate": threads_to_saturate(threads),
                       "hugetlb_pages_added": added, "clear": clear}
            (partial / "lab.json").write_text(json.dumps(results, indent=1)
                                              + "\n")
            text = "\n\n".join([table(all_runs),
                                 lab_clear.bench_table(clear["bench"]),
                                 lab_clear.fault_table(clear["fault"])])
            (partial / "lab.txt").write_text(text + "\n")
        except BaseException:
            report.mark_failed(partial)
            raise
        plot_or_warn("lab.png", lambda: plot(size_runs, partial / "lab.png"))
        plot_or_warn("lab-clear.png", lambda: lab_clear.plot(
            clear["bench"], clear["fault"], partial / "lab-clear.png"))
        final = report.publish(partial, final)
    lines = [text, "", f"CPU: {feats['cpu']['model']} (family "
             f"{feats['cpu']['family']}, model {feats['cpu']['model_id']}); "
             "supported: " + ", ".join(feats["supported"]),
             "clearing methods: " + ", ".join(feats["clear_supported"])]
    for state, r in rec.items():
        lines.append(f"{state}: best at the largest size: "
                     f"{r['best_at_largest']}; streaming wins from "
                     f"{lab_clear.fmt_opt(r['stream_wins_from_bytes'])}")
    lines.append(f"kernel auto rule streams altmap memmaps from the LLC "
                 f"size, here {lab_clear.fmt_opt(feats['cpu']['llc_kb'] << 10)}")
    saturate = threads_to_saturate(threads)
    lines.append(f"threads to reach {SATURATED:.0%} of the best rate (of "
                 f"{nproc} CPUs): " + ", ".join(f"{name} {n}" for name, n
                                                in saturate.items()))
    lines += lab_clear.summary_lines(clear["recommendation"])
    lines.append(f"results: {final}")
    return "\n".join(lines)


def threads_to_saturate(runs):
    """Per strategy, the fewest threads that reach SATURATED of its best
    rate over the thread counts measured."""
    out = {}
    for name in sorted({r["strategy"] for r in runs}):
        by = {r["threads"]: r["gb_per_s"] for r in runs if r["strategy"] == name}
        best = max(by.values())
        out[name] = min(t for t, v in by.items() if v >= SATURATED * best)
    return out


def thread_scaling(runs):
    out = {}
    for name in sorted({r["strategy"] for r in runs}):
        by = {r["threads"]: r["gb_per_s"] for r in runs if r["strategy"] == name}
        if 1 in by:
            out[name] = {str(t): round(v / by[1], 2) for t, v in sorted(by.items())}
    return out

