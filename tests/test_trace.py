"""Timing by kprobe events: the trace lines of a step paired into calls
(zdinit/vm/trace.py), what the families make of them, and the check
before any boot that a kernel can be traced (zdinit/kernel/tracing.py)."""
import contextlib
import dataclasses
import types

import pytest

from zdinit import cache, cli, deps
from zdinit.errors import ZdinitError
from zdinit.families import (loop, onlining, rebind, scenarios, summary,
                             tracing_cost)
from zdinit.kernel import bases, tracing, under_test
from zdinit.vm import console, qemu, trace


def event(func, at, pid=93, ret=False, args="", caller="devm_memremap_pages"):
    """One line of tracefs' trace as a kprobe event prints it."""
    seconds, us = divmod(at, 1_000_000)
    where = (f"{caller}+0x3c5/0x610 <- {func}" if ret
             else f"{func}+0x0/0x2a0")
    name = f"{func}__return" if ret else func
    return (f"           ndctl-{pid}     [001] d....  {seconds:5d}.{us:06d}: "
            f"{name}: ({where}){args}")


def header(kept, written):
    return f"# entries-in-buffer/entries-written: {kept}/{written}   #P:2"


def test_an_entry_and_its_return_are_one_call():
    found = trace.calls([
        header(2, 2),
        event("memmap_init_zone_device", 12_345_678, args=" nr_pages=262144"),
        event("memmap_init_zone_device", 12_456_789, ret=True)])
    assert len(found) == 1
    call = found[0]
    assert (call.func, call.us, call.args) == \
        ("memmap_init_zone_device", 111_111, {"nr_pages": 262144})


def test_calls_nest_per_task():
    lines = [event("online_pages", 1000, pid=7),
             event("online_pages", 1001, pid=8),
             event("memory_notify", 1010, pid=7),
             event("memory_notify", 1020, pid=7, ret=True),
             event("online_pages", 1030, pid=8, ret=True),
             event("online_pages", 1050, pid=7, ret=True)]
    first, second = trace.calls(lines)
    assert (first.pid, first.us, second.pid, second.us) == (7, 50, 8, 29)
    assert [(c.func, c.us) for c in first.calls] == [("memory_notify", 10)]
    assert trace.find([first, second], "memory_notify") == first.calls


@pytest.mark.parametrize("lines, why", [
    ([header(3, 5)], "kept 3 of 5 events"),
    ([event("memory_notify", 10, ret=True)], "without its entry"),
    ([event("online_pages", 10), event("memory_notify", 12, ret=True)],
     "without its entry"),
    ([event("online_pages", 10)], "entered without a return"),
])
def test_a_trace_that_does_not_pair_is_refused(lines, why):
    with pytest.raises(trace.TraceError, match=why):
        trace.calls(lines)


def online_lines(t0, pages=32768):
    """The events of one successful online_pages(), t0 in microseconds."""
    marks = [("online_pages", 0, False, f" nr_pages={pages}"),
             ("move_pfn_range_to_zone", 1, False, f" nr_pages={pages}"),
             ("memmap_init_range", 2, False, f" nr_pages={pages}"),
             ("memmap_init_range", 300, True, ""),
             ("move_pfn_range_to_zone", 310, True, ""),
             ("memory_notify", 311, False, ""),
             ("memory_notify", 320, True, ""),
             ("adjust_present_page_count", 900, False, ""),
             ("adjust_present_page_count", 905, True, ""),
             ("undo_isolate_page_range", 910, False, ""),
             ("undo_isolate_page_range", 1000, True, ""),
             ("memory_notify", 1100, False, ""),
             ("memory_notify", 1150, True, ""),
             ("online_pages", 1160, True, "")]
    return [event(func, t0 + dt, ret=ret, args=args)
            for func, dt, ret, args in marks]


def test_online_pages_parts_add_up_to_its_total():
    call, = trace.calls(online_lines(5000))
    total, parts = trace.online_parts(call)
    assert total == 1160
    assert parts == [310, 10, 580, 100, 100, 60]
    assert sum(parts) == total


def test_an_online_missing_a_traced_step_is_refused():
    lines = [line for line in online_lines(5000)
             if "adjust_present_page_count" not in line]
    call, = trace.calls(lines)
    with pytest.raises(trace.TraceError, match="1, 2, 1 and 1"):
        trace.online_parts(call)


def console_of(steps):
    """A guest console with one "@@zdinit begin/done" step per entry of
    steps: (labels, kmsg lines, trace lines)."""
    out = ["@@zdinit start scenario=fsdax-dev"]
    for labels, kmsg, events in steps:
        out.append(f"@@zdinit begin {labels}")
        out += [f"@@kmsg {line}" for line in kmsg]
        out += [f"@@trace {line}" for line in events]
        out.append(f"@@zdinit done {labels}")
    return "\n".join(out + ["@@zdinit end rc=0"])


LINE = ("memmap_init_zone_device initialised 262144 pages in 120500us, "
        "stream, 262144 struct pages written, 1 thread")


def rebind_events(memremap=True):
    """A traced rebind: memmap_init_zone_device() inside memremap_pages()."""
    inner = [event("memmap_init_zone_device", 1_000_000,
                   args=" nr_pages=262144"),
             event("memmap_init_zone_device", 1_121_000, ret=True)]
    if not memremap:
        return [header(2, 2)] + inner
    return [header(4, 4), event("memremap_pages", 940_000)] + inner + \
        [event("memremap_pages", 1_130_500, ret=True)]


def test_rebind_step_times_are_the_traced_ones():
    run = console.parse(console_of([(
        "phase=rebind strategy=auto align= iter=1", [LINE],
        rebind_events())]))
    step, = run.steps
    spec = scenarios.plan(["fsdax-dev"], "1G", 1)[0]
    assert rebind.timings(spec, step, "t") == [
        ("", 121.0), (rebind.MEMREMAP, 190.5)]
    log = dataclasses.replace(spec, timing="log")
    assert rebind.timings(log, step, "t") == [("", 120.5)]


def test_a_traced_rebind_without_its_memremap_pages_is_refused():
    run = console.parse(console_of([(
        "phase=rebind strategy=auto align= iter=1", [LINE],
        rebind_events(memremap=False))]))
    step, = run.steps
    spec = scenarios.plan(["fsdax-dev"], "1G", 1)[0]
    with pytest.raises(ZdinitError, match="0 memremap_pages calls traced"):
        rebind.timings(spec, step, "t")


def test_ab_steps_are_labelled_and_timed_both_ways():
    traced, untraced = console.parse(console_of([
        ("phase=rebind strategy=auto align= iter=1 trace=on", [LINE],
         rebind_events()),
        ("phase=rebind strategy=auto align= iter=2 trace=off", [LINE],
         [header(0, 0)])])).steps
    spec = scenarios.plan(["fsdax-dev"], "1G", 1, timing="ab")[0]
    assert rebind.timings(spec, traced, "t") == \
        [("log traced", 120.5), ("trace", 121.0)]
    assert rebind.timings(spec, untraced, "t") == [("log untraced", 120.5)]


def test_a_step_with_the_probes_off_and_events_is_refused():
    """A trace=off step whose buffer has events would put a traced time
    on the untraced side: both families' checks refuse it."""
    run = console.parse(console_of([
        ("phase=rebind strategy=auto align= iter=2 trace=off", [LINE],
         [header(2, 2),
          event("memmap_init_zone_device", 1_000_000, args=" nr_pages=262144"),
          event("memmap_init_zone_device", 1_121_000, ret=True)])]))
    with pytest.raises(ZdinitError, match="probes off but has kprobe events"):
        console.refuse_events_when_off(run, "t")
    quiet = console.parse(console_of([
        ("phase=rebind strategy=auto align= iter=2 trace=off", [LINE],
         [header(0, 0)])]))
    console.refuse_events_when_off(quiet, "t")


def test_an_untraced_step_is_refused_where_tracing_times():
    step, = console.parse(console_of([
        ("phase=rebind strategy=auto align= iter=1", [LINE], [])])).steps
    spec = scenarios.plan(["fsdax-dev"], "1G", 1)[0]
    with pytest.raises(ZdinitError, match="was not traced"):
        rebind.timings(spec, step, "t")


def test_onlining_metrics_from_the_trace():
    step, = console.parse(console_of([(
        "phase=online strategy=default zone=movable mom=N iter=1", [],
        online_lines(5000) + online_lines(7000))])).steps
    step.wall = {"us": 5000}
    metrics = onlining.step_metrics(step, "trace")
    assert metrics["online_pages"] == 2.32
    assert metrics["memmap_init_range"] == 0.596
    assert metrics["going_online"] == 0.02
    assert "set_zone_contiguous" not in metrics
    # The kernel's lines are not read where the trace times.
    assert "log online_pages" not in metrics


def fake_kernel(tmp_path, config, symbols):
    (tmp_path / ".config").write_text(config)
    (tmp_path / "System.map").write_text("".join(
        f"ffffffff81000000 T {name}\n" for name in symbols))
    return types.SimpleNamespace(variant="patched", base=bases.get("7.3"),
                                 out=tmp_path)


TRACEABLE = "CONFIG_KPROBES=y\nCONFIG_KPROBE_EVENTS=y\n"


def test_a_kernel_without_kprobe_events_is_refused_naming_it(tmp_path):
    kernel = fake_kernel(tmp_path, "CONFIG_KPROBES=y\n",
                         trace.PROBES["rebind"])
    why = tracing.problem(kernel, "rebind")
    assert why.startswith("kernel '7.3/patched' has no CONFIG_KPROBE_EVENTS=y")
    assert "\n" not in why


def test_a_kernel_without_a_probed_function_is_refused(tmp_path):
    kernel = fake_kernel(tmp_path, TRACEABLE, ["online_pages"])
    assert "no function move_pfn_range_to_zone" in \
        tracing.problem(kernel, "onlining")
    assert tracing.problem(fake_kernel(tmp_path, TRACEABLE, [
        f for funcs in trace.PROBES.values() for f in funcs]),
        "onlining") is None


def test_the_run_loop_refuses_an_untraceable_kernel_before_booting(
        tmp_path, monkeypatch):
    kernel = fake_kernel(tmp_path, "# CONFIG_KPROBES is not set\n", [])
    target = types.SimpleNamespace(kernel=kernel)
    spec = scenarios.plan(["fsdax-dev"], "1G", 1)[0]

    def started(*args, **kwargs):
        raise AssertionError("the run went on to its boots")
    monkeypatch.setattr(loop, "environment", started)
    with pytest.raises(ZdinitError, match="^kernel '7.3/patched' has no "
                       "CONFIG_KPROBES=y, CONFIG_KPROBE_EVENTS=y in"):
        loop.measure([(rebind.REBIND, spec)], [target], 1, "tcg", "",
                     "bench", started=0)
    # Its log lines need no probe.
    with pytest.raises(AssertionError, match="went on to its boots"):
        loop.measure([(rebind.REBIND, dataclasses.replace(
            spec, timing="log"))], [target], 1, "tcg", "", "bench", started=0)


def test_the_guest_gets_every_probe():
    lines = trace.probes_file().splitlines()
    assert "rebind memmap_init_zone_device required nr_pages=$arg3:u64" in lines
    assert "onlining set_zone_contiguous optional" in lines
    assert len(lines) == sum(map(len, trace.PROBES.values())) + \
        sum(map(len, trace.OPTIONAL.values()))


def ab_console(rounds):
    """A rebind boot with zdinit.trace=ab: rounds go on, off, off, on;
    the line says 120.5 ms, the trace 121 ms on, the line 118 ms off."""
    steps = []
    for i in range(1, rounds + 1):
        on = i % 4 < 2
        line = LINE if on else LINE.replace("120500us", "118000us")
        events = [header(2, 2),
                  event("memmap_init_zone_device", 1_000_000 * i,
                        args=" nr_pages=262144"),
                  event("memmap_init_zone_device", 1_000_000 * i + 121_000,
                        ret=True)] if on else [header(0, 0)]
        steps.append((f"phase=rebind strategy=auto align= iter={i} "
                      f"trace={'on' if on else 'off'}", [line], events))
    return console_of(steps)


def test_an_ab_run_reports_what_tracing_costs():
    spec = scenarios.plan(["fsdax-dev"], "1G", 4, timing="ab")[0]
    samples = {}
    rebind.collect_memmap(samples, spec, console.parse(ab_console(4)),
                          "patched", first_round=False)
    runs = rebind.runs_table(samples, [spec])
    assert {r["metric"] for r in runs} == {"log untraced", "log traced",
                                           "trace"}
    assert {r["timing"] for r in runs} == {"ab"}
    row, = tracing_cost.rows(runs)
    assert row[:4] == ["fsdax-dev", "patched auto", "118.00 [118.00-118.00]",
                       "120.50 [120.50-120.50]"]
    assert row[4].startswith("0.98x")
    assert row[5:] == ["500 [500-500]", "2, 2"]
    # A run that timed one way has no such table.
    spec = dataclasses.replace(spec, timing="log")
    samples = {}
    rebind.collect_memmap(samples, spec, console.parse(ab_console(4)),
                          "patched", first_round=False)
    assert tracing_cost.rows(rebind.runs_table(samples, [spec])) == []


KIT_MOVE = ("move_pfn_range_to_zone 32768 pages to {zone}: "
            "memmap_init_range {us}us")
KIT_ONLINE = ("online_pages 32768 pages in {us}us: move_pfn_range_to_zone "
              "310us, going_online 10us, online_pages_range 580us, "
              "undo_isolate_page_range 100us, zone_tuning 100us, "
              "mem_online {rest}us")


def onlining_ab_console():
    """kmem with zdinit.trace=ab, one 128 MiB block, two rounds of both
    zones: the kit's lines in every online, the trace in round 1."""
    out = ["@@zdinit start scenario=kmem",
           "@@zdinit hotplug blocks=1 block_bytes=134217728 mom=N"]
    steps = [("first", "movable", 1, "on")]
    for i, side in ((1, "on"), (2, "off")):
        for zone in ("movable", "normal"):
            steps += [("offline", zone, i, side), ("online", zone, i, side)]
    t = 5000
    for phase, zone, i, side in steps:
        out.append(f"@@zdinit begin phase={phase} strategy=default "
                   f"zone={zone} mom=N iter={i} trace={side}")
        if phase != "offline":
            slower = 40 if side == "on" else 0
            out += ["@@kmsg " + KIT_MOVE.format(zone=zone, us=298),
                    "@@kmsg " + KIT_ONLINE.format(us=1160 + slower,
                                                  rest=60 + slower)]
            if side == "on":
                out += ["@@trace " + header(14, 14)] + [
                    "@@trace " + line for line in online_lines(t)]
        out += [f"@@zdinit wall us={3000 if side == 'on' else 2900}",
                f"@@zdinit done phase={phase}"]
        t += 10_000
    return "\n".join(out + ["@@zdinit end rc=0"])


def test_an_onlining_ab_run_is_checked_and_reports_the_cost():
    spec = scenarios.plan(["kmem"], "1G", 2, timing="ab")[0]
    run = console.parse(onlining_ab_console())
    onlining.check_run(spec, run, "kmem", timed=True)
    samples = {}
    onlining.collect(samples, spec, run, "patched", first_round=True)
    runs = onlining.runs_table(samples, [spec])
    variants = {r["variant"] for r in runs}
    assert {"movable traced", "movable untraced"} <= variants
    rows = {row[0]: row for row in tracing_cost.rows(runs)}
    online = rows["kmem movable: online_pages"]
    # The line said 1.20 ms with the probes, 1.16 ms without; the trace
    # 1.16 ms, 40 us less than the line beside it.
    assert online[2:4] == ["1.16 [1.16-1.16]", "1.20 [1.20-1.20]"]
    assert online[5:] == ["-40 [-40--40]", "1, 1"]
    assert rows["kmem movable: online wall"][5] == "-"
    # Without its trace a traced step is refused.
    broken = onlining_ab_console().replace("@@trace ", "@@zdinit x ", 16)
    with pytest.raises(ZdinitError, match="was not traced"):
        onlining.check_run(spec, console.parse(broken), "kmem", timed=True)


@pytest.mark.parametrize("timing, wanted", [
    ("trace", ["trace", "trace"]), ("log", ["log", "log"]),
    ("ab", ["ab", "ab"]), (None, ["trace", "log"])])
def test_bench_hands_its_timing_to_the_run(monkeypatch, timing, wanted):
    """--timing reaches every scenario's spec, which the guest's
    zdinit.trace parameter is made from; without it a rebind is traced
    and onlining read from the kernel's lines."""
    specs = []

    def measure(plan, *args, **kwargs):
        specs.extend(spec for _, spec in plan)
        return "results/none", {"runs": []}
    monkeypatch.setattr(loop, "measure", measure)
    monkeypatch.setattr(loop, "check_resources", lambda *a, **k: None)
    monkeypatch.setattr(cache, "lock", lambda *a: contextlib.nullcontext())
    monkeypatch.setattr(deps, "ensure_packages", lambda *a, **k: None)
    monkeypatch.setattr(under_test, "build", lambda *a, **k:
                        types.SimpleNamespace(kernel=None, initrd=None))
    monkeypatch.setattr(qemu, "choose_accel", lambda *a, **k: ("tcg", "test"))
    monkeypatch.setattr(summary, "text_report", lambda results: "")
    assert cli.main(["bench", "--scenarios", "fsdax-dev,kmem", "--size",
                     "4G", "--n", "8"]
                    + (["--timing", timing] if timing else [])) == 0
    assert [s.timing for s in specs] == wanted
    assert rebind.boot_params(specs[0], types.SimpleNamespace(
        strategies=["auto"]), 2, False, [""])["trace"] == \
        rebind.TRACE_PARAM[wanted[0]]


@pytest.mark.parametrize("args, shares", [
    (["--n", "1"], "1 a boot"), (["--n", "2", "--rounds", "2"], "1/1"),
    (["--scenarios", "kmem"], "3/2"), (["--n", "9", "--rounds", "3"], "3/3/3")])
def test_an_ab_run_without_as_many_rounds_on_as_off_is_refused(capsys, args,
                                                               shares):
    """Each boot arms the probes on, off, off, on: an odd share of
    rounds would weigh one side more, or leave it empty; refused in one
    line before any build."""
    with pytest.raises(SystemExit) as refused:
        cli.main(["bench", "--timing", "ab", "--kernels", "patched"] + args)
    assert refused.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and shares in err[0] and "even number" in err[0]
