"""The onlining family: the timing patch's lines, the checks and the tables."""
import re
import types

import pytest

from zdinit.families import loop, onlining, registry, scenarios
from zdinit.kernel import bases, build, under_test
from zdinit.families import summary
from zdinit.results import report
from zdinit.vm import console
from zdinit.errors import ZdinitError

BASE = bases.BASES[bases.DEFAULT]

BLOCK_PAGES = 32768              # 128 MiB memory blocks
VMEMMAP_PAGES = 512              # a block's own memmap with memmap_on_memory


def patch_formats(base=BASE):
    """The pr_debug() format strings the series' onlining timing patch
    adds on base, from the patch."""
    patch, = [p for p in build.stack_patches(base, "zone-device")
              if build.subject(p) == build.TIMING]
    return re.findall(r'^\+\s*pr_debug\("(.*)\\n",', patch.read_text(), re.M)


def kernel_printf(fmt, *args):
    """What the kernel prints for fmt: %s, %lu and %lld, in order."""
    values = iter(args)
    return re.sub(r"%(?:s|lu|lld)", lambda m: str(next(values)), fmt)


@pytest.mark.parametrize("base", bases.BASES.values(), ids=bases.BASES)
def test_patch_formats_parse(base):
    """On the count, move_pfn_range_to_zone() walks no zone and its line
    has no set_zone_contiguous field: the memmap part parses and no such
    metric is made up for it."""
    move_fmt, online_fmt = patch_formats(base)
    move = console.parse_move("[   3.1] " + kernel_printf(
        move_fmt, "move_pfn_range_to_zone", 32768, "Movable", 1234))
    assert move == console.MoveTiming(32768, "Movable", 1234, None)
    step = console.Step({"phase": "online"}, [], [], [], moves=[move])
    metrics = onlining.step_metrics(step)
    assert metrics["memmap_init_range"] == 1.234
    assert "set_zone_contiguous" not in metrics
    online = console.parse_online(kernel_printf(
        online_fmt, "online_pages", 32768, 2000, 1300, 4, 500, 90, 100, 6))
    assert online.pages == 32768 and online.total_us == 2000
    assert list(online.parts.values()) == [1300, 4, 500, 90, 100, 6]
    assert list(online.parts) == list(console.ONLINE_PARTS)


def test_a_move_line_with_the_walk_parses_its_time():
    """Consoles of kernels that still walked (the series before it counted
    pages, as captured in tests/data) give set_zone_contiguous its time."""
    move = console.parse_move("[   3.1] move_pfn_range_to_zone 32768 pages "
                            "to Movable: memmap_init_range 1234us, "
                            "set_zone_contiguous 56us")
    assert move == console.MoveTiming(32768, "Movable", 1234, 56)


def test_online_parts_are_the_reports():
    """The breakdown shows every part of online_pages() the console reads
    after the move."""
    assert set(console.ONLINE_PARTS[1:]) <= set(onlining.BREAKDOWN_HEADER)


def test_other_lines_do_not_parse():
    assert console.parse_online("online_pages [mem 0x1-0x2] failed") is None
    assert console.parse_move("memmap_init_zone_device initialised 1 pages "
                            "in 1us") is None


def guest_log(blocks=4, n=1, zones=("movable", "normal"), mom="N",
              timed=True, strategies=("default",), verify=None):
    """A console as guest/hotplug.sh writes it for kmem."""
    lines = ["@@zdinit start scenario=kmem kernel=6.12 size=1",
             f"@@zdinit begin phase=add strategy=default zone= mom={mom}",
             "@@zdinit wall us=9000", "@@zdinit done x",
             f"@@zdinit hotplug blocks={blocks} block_bytes=134217728 mom={mom}"]

    def online(label, memmap_us):
        lines.append(f"@@zdinit begin {label}")
        for _ in range(blocks if timed else 0):
            pages = BLOCK_PAGES
            if mom == "Y":
                lines.append(f"@@kmsg [ 1.0] move_pfn_range_to_zone "
                             f"{VMEMMAP_PAGES} pages to Movable: "
                             "memmap_init_range 10us, set_zone_contiguous 1us")
                pages -= VMEMMAP_PAGES
            lines.append(f"@@kmsg [ 1.0] move_pfn_range_to_zone {pages} pages "
                         f"to Movable: memmap_init_range {memmap_us}us, "
                         "set_zone_contiguous 100us")
            lines.append(f"@@kmsg [ 1.0] online_pages {pages} pages in 2000us:"
                         f" move_pfn_range_to_zone {memmap_us + 110}us, "
                         "going_online 5us, online_pages_range 400us, "
                         "undo_isolate_page_range 50us, zone_tuning 30us, "
                         "mem_online 5us")
        lines.extend(["@@zdinit wall us=10000", "@@zdinit done x"])

    online(f"phase=first strategy={strategies[0]} zone={zones[0]} "
           f"mom={mom}", 1500)
    zone = zones[0]
    for i in range(1, n + 1):
        for nxt in zones:
            for k, strategy in enumerate(strategies):
                lines += [f"@@zdinit begin phase=offline strategy=default "
                          f"zone={zone} mom={mom} iter={i}",
                          "@@zdinit wall us=3000", "@@zdinit done x"]
                online(f"phase=online strategy={strategy} zone={nxt} "
                       f"mom={mom} iter={i}", 1000 + 100 * k + i)
                zone = nxt
    if verify:
        lines.append(f"@@zdinit hpverify hotplug_checked={verify[0]}")
        lines.append(f"@@zdinit verify checked={verify[0]} "
                     f"mismatches={verify[1]} unchecked={verify[2]}")
    lines.append("@@zdinit end rc=0")
    return "\n".join(lines)


def spec(n=1):
    return scenarios.plan(["kmem"], size="1G", n=n, timing="log")[0]


@pytest.mark.parametrize("mom", ["N", "Y"])
def test_check_run_accepts_a_complete_run(mom):
    run = console.parse(guest_log(mom=mom))
    onlining.check_run(spec(), run, "kmem", timed=True)
    first = run.steps[1]
    assert first.wall == {"us": 10000}
    assert len(first.onlines) == 4
    assert len(first.moves) == (8 if mom == "Y" else 4)


def test_check_run_without_timing_lines_needs_only_walls():
    onlining.check_run(spec(), console.parse(guest_log(timed=False)), "kmem",
                      timed=False)
    with pytest.raises(ZdinitError, match="0 online_pages timing lines for 4"):
        onlining.check_run(spec(), console.parse(guest_log(timed=False)), "kmem",
                          timed=True)


@pytest.mark.parametrize("old, new, why", [
    ("online_pages 32768 pages in 2000us", "online_pages in 2000us",
     "3 online_pages timing lines for 4 blocks"),
    ("move_pfn_range_to_zone 32768 pages", "move_pfn_range_to_zone 32767 pages",
     "memmap of 131071 pages initialised, 4 blocks have 131072"),
    ("@@zdinit wall us=3000\n", "", "reported no wall time"),
    ("@@zdinit hotplug blocks=4", "@@zdinit hotplug blocks=0",
     "no memory block was added"),
    ("@@zdinit end rc=0", "@@kmsg [ 2.0] BUG: Bad page state\n@@zdinit end rc=0",
     "BUG: Bad page state"),
])
def test_check_run_rejects(old, new, why):
    text = guest_log()
    assert old in text
    with pytest.raises(ZdinitError, match=why):
        onlining.check_run(spec(), console.parse(text.replace(old, new, 1)),
                          "kmem", timed=True)


def test_check_run_counts_the_cycles():
    with pytest.raises(ZdinitError, match="2 online steps, expected 3 x 2"):
        onlining.check_run(spec(n=3), console.parse(guest_log(n=1)), "kmem",
                          timed=True)


def test_samples_and_tables():
    samples = {}
    for kernel in ("base", "patched"):
        run = console.parse(guest_log(n=3, mom="Y", timed=kernel == "patched"))
        onlining.collect(samples, spec(3), run, kernel, first_round=True)
    # The first onlining after the add is the "first" column, not a sample.
    memmap = samples[("kmem", "movable mom", "memmap_init_range", "patched",
                      "default")]
    assert memmap["first_bind_ms"] == 4 * (1500 + 10) / 1000
    assert memmap["samples_ms"] == [4 * (1000 + i + 10) / 1000 for i in (1, 2, 3)]
    assert ("kmem", "movable mom", "memmap_init_range", "base",
            "default") not in samples
    # Each round onlines into each zone once; offlining is labelled with
    # the zone it leaves: movable, movable, then normal, movable, ...
    offline = {zone: samples[("kmem", f"{zone} mom", "offline wall", "base",
                              "default")]["samples_ms"]
               for zone in ("movable", "normal")}
    assert offline == {"movable": [3.0] * 4, "normal": [3.0] * 2}
    assert samples[("kmem", "add mom", "add wall", "base",
                    "default")]["samples_ms"] == [9.0]

    runs = onlining.runs_table(samples, [spec(3)])
    wall = next(r for r in runs if r["kernel"] == "patched"
                and r["variant"] == "movable mom" and r["metric"] == "online wall")
    assert wall["align"] is None and wall["median_ms"] == 10.0
    assert wall["vs_base"]["speedup"] == 1.0
    table = dict(onlining.ONLINING.tables(runs, report.text_table))[""]
    assert "kmem movable mom: memmap_init_range" in table
    assert "going_online" not in table          # breakdown only

    breakdown = onlining.breakdown_rows(runs)
    row = next(r for r in breakdown if r[:2] == ["kmem movable mom", "patched"])
    header = onlining.BREAKDOWN_HEADER
    assert row[header.index("online wall ms")] == "10.00"
    # 4 blocks x 2000 us of online_pages in 10 ms of wall time.
    assert row[header.index("online_pages")] == "8.00 (80%)"
    assert row[header.index("memmap_init_range")] == "4.05 (40%)"
    # memmap_on_memory: 4 blocks' own memmap moves, 11 us each, are
    # outside online_pages.
    assert row[header.index("vmemmap moves")] == "0.04 (0%)"
    assert row[header.index("rest outside online_pages")] == "1.96 (20%)"
    base = next(r for r in breakdown if r[:2] == ["kmem movable mom", "base"])
    assert base[header.index("online_pages")] == "-"
    assert "### onlining, median ms (share of the online wall time)" in \
        summary.summary_md(
        {"env": {"accel": "tcg", "accel_reason": "x", "kernels": {},
                 "host_cpu": "x", "host_cpus": 2, "host_kernel": "x",
                 "qemu": "x", "project_rev": "x"},
         "command": "x", "runs": runs})


def test_hotplug_scenarios_are_not_in_the_default_bench():
    assert "kmem" not in scenarios.DEFAULT_BENCH
    assert "fsdax-dev" in scenarios.DEFAULT_BENCH
    kmem = scenarios.SCENARIOS["kmem"]
    assert kmem.hotplug and kmem.zones == ("movable", "normal")
    assert ("memory_hotplug.memmap_on_memory=1",) in kmem.boots


def test_boot_params_of_a_hotplug_scenario(monkeypatch):
    import types

    def params(variant):
        target = under_test.KernelUnderTest(types.SimpleNamespace(variant=variant, base=BASE), None,
                              ("auto", "slow"))
        return onlining.boot_params(spec(), target, 2, False, ("2M",))

    p = params("patched")
    assert p["strategies"] == "default"
    assert p["zones"] == "movable,normal"
    assert (p["n"], p["timing"]) == (2, 1)
    assert params("base")["timing"] == 0
    # The control: the patched kernel with its timing lines left off.
    monkeypatch.setenv("ZDINIT_HOTPLUG_TIMING", "0")
    assert params("patched")["timing"] == 0



def test_virtio_mem_device_on_the_qemu_command_line():
    from zdinit.vm import qemu
    cmd = " ".join(qemu._base_cmd("tcg", 1024, [], virtio_mem=16 << 30))
    assert "virtio-mem-pci,id=vm0,memdev=vmem0,requested-size=17179869184" in cmd
    # maxmem covers boot RAM, the device and slack.
    assert f"maxmem={1024 + 16384 + 1024}M" in cmd


def real(name):
    """A console captured from a real 1G run (patched kernel, N=1)."""
    from conftest import DATA
    return (DATA / name).read_text()


@pytest.mark.parametrize("log, scenario, blocks", [
    ("kmem-mom-patched.log", "kmem", 7),
    ("virtio-mem-patched.log", "virtio-mem", 8),
])
def test_real_logs(log, scenario, blocks):
    run = console.parse(real(log))
    plan = scenarios.plan([scenario], size="1G", n=1, timing="log")[0]
    onlining.check_run(plan, run, scenario, timed=True)
    assert int(run.hotplug["blocks"]) == blocks
    online = [s for s in run.steps if s.labels["phase"] in ("first", "online")]
    assert len(online) == 3
    for step in online:
        assert len(step.onlines) == blocks
        # The kernel's parts add up to its total, to rounding.
        for line in step.onlines:
            assert abs(sum(line.parts.values()) - line.total_us) <= 6
        metrics = onlining.step_metrics(step)
        assert 0 < metrics["memmap_init_range"] < metrics["online_pages"] \
            < metrics["online wall"]
    before = [onlining.moves_before_online(step.moves, step.onlines)
              for step in online]
    if run.hotplug["mom"] == "Y":
        # memmap_on_memory: each block's own memmap pages first.
        assert [m.pages for m in online[0].moves[:2]] == [512, 32256]
        assert all([m.pages for m in b] == [512] * blocks for b in before)
    else:
        assert before == [[]] * 3


def test_real_log_missing_a_block_is_rejected():
    text = real("kmem-mom-patched.log")
    line = next(l for l in text.splitlines() if "online_pages 32256" in l)
    run = console.parse(text.replace(line + "\n", "", 1))
    with pytest.raises(ZdinitError, match="6 online_pages timing lines for 7"):
        onlining.check_run(scenarios.plan(["kmem"], size="1G", n=1,
                                          timing="log")[0], run,
                          "kmem", timed=True)


def test_the_run_loop_boots_each_family(monkeypatch, tmp_path):
    """runner.run() with QEMU replaced by captured consoles: the boots it
    asks for and the samples it collects, ZONE_DEVICE and hotplug alike."""
    import contextlib
    import types
    from conftest import DATA
    from zdinit.vm import qemu

    logs = {("fsdax-dev", "base"): "fsdax-dev-base.log",
            ("kmem", "patched"): "kmem-mom-patched.log",
            ("virtio-mem", "patched"): "virtio-mem-patched.log"}
    boots = []

    def fake_boot(kernel, initrd, params, accel, **kw):
        boots.append((params["scenario"], kernel.variant, params["strategies"],
                      kw["cmdline"], kw["virtio_mem"], len(kw["nvdimms"])))
        text = (DATA / logs[(params["scenario"], kernel.variant)]).read_text()
        return qemu.Boot(text, accel, 1.0)

    @contextlib.contextmanager
    def fake_image(size, touched, tag):
        yield types.SimpleNamespace(path=tmp_path / tag, size=size)

    monkeypatch.setattr(qemu, "boot", fake_boot)
    monkeypatch.setattr(qemu, "SparseImage", fake_image)

    def target(variant):
        return under_test.KernelUnderTest(types.SimpleNamespace(variant=variant, base=BASE), None,
                            ("default",) if variant == "base" else ("auto",))

    def run(targets, specs):
        plan = [(registry.of_spec(spec), spec) for spec in specs]
        samples = loop.run(plan, targets, 1, "tcg", tmp_path)
        return {k: v for family in samples.values() for k, v in family.items()}

    samples = run([target("base")],
                  scenarios.plan(["fsdax-dev"], size="4G", n=3, timing="log"))
    assert boots == [("fsdax-dev", "base", "default", (), 0, 1)]
    assert len(samples[("fsdax-dev", "", "", "base", "default")]["samples_ms"]) == 3

    boots.clear()
    specs = scenarios.plan(["kmem", "virtio-mem"], size="1G", n=1,
                           timing="log")
    samples = run([target("patched")], specs)
    assert boots == [
        ("kmem", "patched", "default", ("log_buf_len=4M",), 0, 1),
        ("kmem", "patched", "default",
         ("log_buf_len=4M", "memory_hotplug.memmap_on_memory=1"), 0, 1),
        ("virtio-mem", "patched", "default", ("log_buf_len=4M",), 1 << 30, 0)]
    # Both kmem boots replayed the memmap_on_memory console: two samples.
    key = ("kmem", "movable mom", "memmap_init_range", "patched", "default")
    assert len(samples[key]["samples_ms"]) == 2
    key = ("virtio-mem", "normal", "online wall", "patched", "default")
    assert len(samples[key]["samples_ms"]) == 1


def test_hotplug_base_is_stock_plus_the_timing_patch_and_the_count():
    """On every base the onlining kernel is stock plus the contiguity
    count and the series' timing patch, which applies on it."""
    from zdinit.kernel import build
    wanted = ("contiguity-from-a-coun", "memory_hotplug-time")
    for base in bases.BASES.values():
        patches = build.variant_patches("hotplug-base", base)
        # The series' own patch files, not copies.
        assert [p for p in patches if p not in build.stack_patches(
            base, "zone-device")] == []
        assert [w for w, p in zip(wanted, patches) if w in p.name] == \
            list(wanted) and len(patches) == len(wanted), patches
    assert build.VARIANTS["hotplug-stock"].fragments == ("zdinit", "tracing")

    def times(variant, base=BASE):
        return onlining.times_onlining(
            types.SimpleNamespace(variant=variant, base=base))
    assert times("hotplug-base") and times("patched")
    assert times("hotplug-base", bases.BASES["6.12"])
    assert not times("base") and not times("upstream")
    assert not times("clear")


def test_strategies_online_each_zone_and_key_the_samples():
    """On the patched kernel, --strategies onlines every zone once per
    strategy; the samples are keyed by the strategy onlined with."""
    import types
    target = under_test.KernelUnderTest(types.SimpleNamespace(variant="patched", base=BASE), None,
                          ("auto",), ("auto", "slow"))
    assert onlining.boot_params(spec(), target, 1, False,
                             ("2M",))["strategies"] == "auto,slow"
    run = console.parse(guest_log(strategies=("auto", "slow")))
    onlining.check_run(spec(), run, "kmem", timed=True, strategies=2)
    with pytest.raises(ZdinitError, match="4 online steps, expected 1 x 2 "
                       "zones x 3 strategies"):
        onlining.check_run(spec(), run, "kmem", timed=True, strategies=3)
    samples = {}
    onlining.collect(samples, spec(), run, "patched", first_round=True)
    memmap = {k[4]: v["samples_ms"] for k, v in samples.items()
              if k[1:3] == ("movable", "memmap_init_range")}
    assert memmap == {"auto": [4.004], "slow": [4.404]}
    rows = onlining.breakdown_rows(onlining.runs_table(samples, [spec()]))
    assert [r[1] for r in rows if r[0] == "kmem movable"] == [
        "patched auto", "patched slow"]


@pytest.mark.parametrize("verify, problem", [
    ((4 * BLOCK_PAGES, 0, 0), None),
    ((4 * BLOCK_PAGES, 1, 0), "1 struct pages differ"),
    ((4 * BLOCK_PAGES, 0, 5), "5 could not be compared"),
    ((0, 0, 0), "no struct page was compared"),
    (None, "no memmap verification result"),
])
def test_verify_fails_closed(verify, problem):
    run = console.parse(guest_log(verify=verify))
    if problem is None:
        onlining.check_run(spec(), run, "kmem", timed=True, verify=True)
        return
    with pytest.raises(ZdinitError, match=problem):
        onlining.check_run(spec(), run, "kmem", timed=True, verify=True)


def test_selftest_counts_the_onlinings_built_from_templates():
    from zdinit.checks import memmap_equality
    run = console.parse(guest_log(strategies=("auto", "slow", "template")))
    # first (auto) + 2 zones x (auto, template); slow is not checked.
    assert memmap_equality.hotplug_checked_pages(run) == 5 * 4 * BLOCK_PAGES


def test_safety_judges_the_onlining_tracepoint_guard():
    from zdinit.checks import safety
    on = {"name": "hotplug-tracepoint-on", "result": "pass",
          "block_pages": "32768", "events": "65536", "checked": "0"}
    assert safety.judge(on)[0]
    assert not safety.judge(dict(on, result="fail"))[0]
    job = next(j for j in safety.FULL if j.scenario == "hotplug-tracepoint")
    assert job.kernels == ("trace",) and job.verify and job.virtio_mem
