"""Parsing real guest consoles captured from zdinit runs (tests/data)."""
import functools

import pytest

from conftest import DATA
from zdinit.families import rebind, scenarios
from zdinit.vm import console
from zdinit.errors import ZdinitError

G = 1 << 30


def load(name):
    return console.parse((DATA / name).read_text())


def test_stock_kernel_line_in_milliseconds():
    init = console.parse_memmap(
        "[    1.2] memmap_init_zone_device initialised 26083328 pages in 1042ms")
    assert (init.pages, init.ms, init.strategy, init.written) == \
        (26083328, 1042.0, None, None)


def test_patched_kernel_line_in_microseconds():
    init = console.parse_memmap(
        "memmap_init_zone_device initialised 1048576 pages in 6840us, "
        "template, 262144 struct pages written")
    assert (init.pages, init.ms, init.strategy, init.written) == \
        (1048576, 6.84, "template", 262144)


def test_parallel_kernel_line_names_its_threads():
    for threads, text in ((1, "1 thread"), (2, "2 threads")):
        init = console.parse_memmap(
            "memmap_init_zone_device initialised 26083328 pages in 210431us, "
            f"stream, 26083328 struct pages written, {text}")
        assert (init.ms, init.strategy, init.threads) == \
            (210.431, "stream", threads)


def test_line_without_threads_has_none():
    init = console.parse_memmap(
        "memmap_init_zone_device initialised 1048576 pages in 6840us, "
        "template, 262144 struct pages written")
    assert init.threads is None


def test_a_kit_kernel_s_step_keeps_the_kit_s_line():
    """With the kit, each range logs the series' own line (jiffies, no
    strategy) and the kit's after it: the step counts the range once."""
    kit = ("@@kmsg [ 2.0] memmap_init_zone_device initialised 32768 pages "
           "in 6840us, template, 32768 struct pages written, 1 thread")
    own = ("@@kmsg [ 2.0] memmap_init_zone_device initialised 32768 pages "
           "in 8ms")
    run = console.parse("\n".join(["@@zdinit begin phase=rebind", own, kit,
                                    own, kit, "@@zdinit done phase=rebind",
                                    "@@zdinit begin phase=stock", own,
                                    "@@zdinit done phase=stock"]))
    kit_step, stock_step = run.steps
    assert [(m.ms, m.strategy) for m in kit_step.memmap] == \
        [(6.84, "template")] * 2
    assert kit_step.ms == 13.68
    assert [(m.ms, m.strategy) for m in stock_step.memmap] == [(8.0, None)]



def test_the_kit_s_report_names_how_the_kernel_s_line_s_range_was_built():
    """The kit reports after the series' own line, with no time of its
    own: the step keeps the kernel's jiffies and the report's strategy,
    struct pages written and threads, one range each."""
    own = ("@@kmsg [ 2.0] memmap_init_zone_device initialised 32768 pages "
           "in 8ms")
    report = ("@@kmsg [ 2.0] memmap_init_zone_device built 32768 pages: "
              "template, 512 struct pages written, {}")
    run = console.parse("\n".join([
        "@@zdinit begin phase=rebind", own, report.format("1 thread"),
        own, report.format("2 threads"), "@@zdinit done phase=rebind"]))
    (step,) = run.steps
    assert [(m.ms, m.strategy, m.written, m.threads) for m in step.memmap] \
        == [(8.0, "template", 512, 1), (8.0, "template", 512, 2)]


@pytest.mark.parametrize("before", [
    [],
    ["@@kmsg memmap_init_zone_device initialised 65536 pages in 8ms"],
    ["@@kmsg memmap_init_zone_device initialised 32768 pages in 8ms",
     "@@kmsg memmap_init_zone_device built 32768 pages: template, "
     "512 struct pages written, 1 thread"],
], ids=["no-line", "other-range", "line-already-reported"])
def test_a_report_that_follows_no_line_of_its_range_is_refused(before):
    report = ("@@kmsg memmap_init_zone_device built 32768 pages: template, "
              "512 struct pages written, 1 thread")
    with pytest.raises(ZdinitError, match="follows no memmap_init_zone"):
        console.parse("\n".join(["@@zdinit begin phase=rebind", *before,
                                  report, "@@zdinit done phase=rebind"]))

ON_DEMAND_STEP = [
    "@@zdinit begin phase=rebind strategy={strategy} align= iter=1",
    "@@kmsg [ 2.0] memmap_init_zone_device initialised 32768 pages in 0ms",
    "@@kmsg [ 2.0] memmap_init_zone_device built 32768 pages: stream, "
    "32768 struct pages written, 1 thread{on_demand}",
    "@@zdinit fault first_ns=2000000 last_ns=5500000",
    "@@kmsg [ 2.5] zone_device_memmap_built: built "
    "0x240000000-0x247ffffff in the background in 57ms",
    "@@zdinit done phase=rebind strategy={strategy} align= iter=1"]


def test_a_memmap_built_on_demand_gives_the_step_its_background_build():
    """The kit's report says the range was left to be built on demand,
    and the kernel's line when the background build finished gives the
    step a second time, which the rebind family records as BACKGROUND;
    the guest's first faults after the bind, two more."""
    run = console.parse("\n".join(ON_DEMAND_STEP).format(
        strategy="demand", on_demand=", on demand"))
    (step,) = run.steps
    (init,) = step.memmap
    assert (init.ms, init.strategy, init.on_demand) == (0.0, "stream", True)
    assert step.background_ms == [57.0]
    spec, = scenarios.plan(["fsdax-dev"], size="256M", timing="log")
    assert rebind.timings(spec, step, "x") == [
        ("", 0.0), (rebind.BACKGROUND, 57.0), (rebind.FAULT_FIRST, 2.0),
        (rebind.FAULT_LAST, 5.5)]


@pytest.mark.parametrize("strategy, on_demand, lines", [
    ("demand", ", on demand", slice(0, 3)),     # the build never finished
    ("auto", "", slice(None)),                  # finished, never started
    ("auto", ", on demand", slice(None)),       # on demand, not asked for
], ids=["unfinished", "unstarted", "unasked"])
def test_a_background_build_the_step_does_not_account_for_is_refused(
        strategy, on_demand, lines):
    text = ON_DEMAND_STEP[lines] + ON_DEMAND_STEP[-1:] \
        if lines.stop else ON_DEMAND_STEP
    run = console.parse("\n".join(text).format(strategy=strategy,
                                               on_demand=on_demand))
    with pytest.raises(ZdinitError, match="on demand"):
        rebind.check_background(run.steps[0], "x")


def test_base_fsdax_dev_log():
    run = load("fsdax-dev-base.log")
    assert run.rc == 0 and not run.splats
    assert run.start["scenario"] == "fsdax-dev"
    phases = [s.labels["phase"] for s in run.steps]
    assert phases[0] == "first" and phases.count("rebind") == 3
    for step in run.steps:
        assert len(step.memmap) == 1
        assert step.memmap[0].strategy is None
        assert step.labels["strategy"] == "default"
    # map=dev: pfns = the data area ndctl reports, after the altmap reserve.
    spec = scenarios.plan(["fsdax-dev"], size="4G", timing="log")[0]
    want = scenarios.expected_pages(spec, run, "")
    assert want == run.geometry[0]["namespace"]["size"] // 4096
    assert all(s.pages == want for s in run.steps)
    rebind.check_run(spec, run, "fsdax-dev base", verify=False)


def test_patched_devdax_mem_log_shows_tail_reuse():
    run = load("devdax-mem-patched.log")
    spec = scenarios.plan(["devdax-mem"], size="4G", timing="log")[0]
    rebind.check_run(spec, run, "devdax-mem patched", verify=False)
    by_align = {}
    for step in run.steps:
        by_align.setdefault(step.labels["align"], set()).add(step.memmap[0].written)
    assert by_align == {"2M": {262144}, "1G": {512}}
    strategies = {s.labels["strategy"] for s in run.steps}
    assert strategies == {"auto", "slow", "template", "stream"}


def test_patched_devprivate_log():
    run = load("devprivate-patched.log")
    assert len(run.steps) == 12           # 3 rounds x 4 strategies
    for step in run.steps:
        assert step.pages == 4 * G // 4096
        assert len(step.memremap_ns) == 1 and step.memremap_ns[0] > step.ms * 1e6 * 0.5


def check_edited_log(log, scenario, old, new, verify=False):
    """check_run() on a real log with one edit: it must reject it."""
    text = (DATA / log).read_text()
    assert old in text
    run = console.parse(text.replace(old, new, 1))
    spec = scenarios.plan([scenario], size="4G", timing="log")[0]
    rebind.check_run(spec, run, "x", verify=verify)


@pytest.mark.parametrize("verify_line, why", [
    ("checked=1000 mismatches=3 unchecked=0", "3 struct pages differ"),
    # The check fails closed: pages it could not compare, none compared,
    # or a kernel that does not say what it left unchecked.
    ("checked=1000 mismatches=0 unchecked=512", "512 could not be compared"),
    ("checked=0 mismatches=0 unchecked=0", "no struct page was compared"),
    ("checked=1000 mismatches=0", "does not report unchecked"),
])
def test_check_run_fails_on_a_verification_failure(verify_line, why):
    with pytest.raises(ZdinitError, match=why):
        check_edited_log("devdax-mem-patched.log", "devdax-mem",
                         "@@zdinit end rc=0",
                         f"@@zdinit verify {verify_line}\n"
                         "@@zdinit end rc=0", verify=True)


def test_check_run_accepts_a_clean_verification():
    check_edited_log("devdax-mem-patched.log", "devdax-mem",
                     "@@zdinit end rc=0",
                     "@@zdinit verify checked=1000 mismatches=0 unchecked=0\n"
                     "@@zdinit end rc=0", verify=True)


def test_check_run_fails_on_a_wrong_page_count():
    with pytest.raises(ZdinitError, match="geometry says 1031680"):
        check_edited_log("fsdax-dev-base.log", "fsdax-dev",
                         "initialised 1031680 pages", "initialised 1031679 pages")


def test_check_run_fails_on_a_kernel_warning():
    with pytest.raises(ZdinitError, match="WARNING"):
        check_edited_log("fsdax-dev-base.log", "fsdax-dev", "@@zdinit end rc=0",
                         "@@kmsg [    9.9] WARNING: CPU: 0 PID: 1 at mm/mm_init.c:1 x\n"
                         "@@zdinit end rc=0")


def test_markers_after_firmware_escape_codes():
    run = console.parse("Booting\x1b[2J@@zdinit start scenario=x kernel=y size=1\n"
                      "@@zdinit end rc=0\n")
    assert run.start == {"scenario": "x", "kernel": "y", "size": "1"}
    assert run.rc == 0


# ---- the caches the guest lists (guest/store-rule.sh) ----------------------

def caches(*leaves, listed=True):
    """A console listing cpu0's caches: leaves are (index, level, size)."""
    lines = [f"@@zdinit cache cpu=0 index={i} level={level} type=Unified "
             f"size={size}" for i, level, size in leaves]
    if listed:
        lines.append(f"@@zdinit caches cpu=0 leaves={len(leaves)}")
    return console.parse("\n".join(lines) + "\n")


def test_llc_is_the_first_cache_of_the_highest_level():
    """As zone_device_llc_size() reads cacheinfo, in index order."""
    run = caches((0, 1, "64K"), (1, 1, "64K"), (2, 2, "512K"),
                 (3, 3, "16384K"))
    assert run.llc_bytes() == 16 * (1 << 20)
    assert caches((10, 3, "2048K"), (2, 3, "1024K")).llc_bytes() == 1 << 20


def test_llc_is_0_where_sysfs_lists_no_cache_and_none_where_unlisted():
    assert caches().llc_bytes() == 0
    assert caches((0, 3, "16384K"), listed=False).llc_bytes() is None
    assert load("devdax-mem-patched.log").llc_bytes() is None


def test_a_cache_size_not_in_kib_is_a_one_line_error():
    with pytest.raises(ZdinitError, match="cache size '16M' is not in "
                                          "sysfs' NK form"):
        caches((0, 3, "16M")).llc_bytes()


def test_rebind_records_carry_the_guest_llc():
    """bench records what auto's choice depends on besides the struct
    pages written: the LLC the guest lists, None from a guest that did
    not list it."""
    spec = scenarios.plan(["devdax-mem"], size="4G", timing="log")[0]
    text = (DATA / "devdax-mem-patched.log").read_text()
    listed = text.replace("@@zdinit end rc=0", "@@zdinit cache cpu=0 index=3 "
                          "level=3 type=Unified size=16384K\n@@zdinit caches "
                          "cpu=0 leaves=1\n@@zdinit end rc=0")
    for log, llc in ((listed, 16 << 20), (text, None)):
        samples = {}
        rebind.collect_memmap(samples, spec, console.parse(log), "patched",
                             first_round=True)
        runs = rebind.runs_table(samples, [spec])
        assert runs and {r["guest_llc_bytes"] for r in runs} == {llc}


@pytest.mark.parametrize("written, llc, want", [
    (393216, 16 << 20, "stream"),      # 24 MiB past a 16 MiB L3
    (393216, 0, "template"),           # not past the 32 MiB default
    (393216, None, "template"),
    (262144, 16 << 20, "stream"),      # exactly the LLC streams
    (262143, 16 << 20, "template"),
    (512, 16 << 20, "template"),       # 1G pages with tail reuse
])
def test_auto_strategy_is_the_store_rule_in_the_kernel_names(written, llc,
                                                             want):
    assert scenarios.auto_strategy(written, llc) == want


def rebind_steps(strategies, rounds, align=""):
    """Console lines of a guest that rebound each strategy rounds times."""
    lines = ["@@zdinit start scenario=fsdax-dev"]
    for r in range(1, rounds + 1):
        for strategy in strategies:
            labels = f"phase=rebind strategy={strategy} align={align} iter={r}"
            lines += [f"@@zdinit begin {labels}", f"@@zdinit done {labels}"]
    return "\n".join(lines + ["@@zdinit end rc=0"])


@pytest.mark.parametrize("rounds, strategies, refused", [
    (2, ("auto", "demand"), None),
    (0, (), "rebound 0 times with strategy auto, not 2"),
    (2, ("auto",), "rebound 0 times with strategy demand, not 2"),
    (1, ("auto", "demand"), "rebound 1 times with strategy auto, not 2"),
], ids=["whole", "no-step", "a-strategy-missing", "stopped-early"])
def test_a_guest_that_did_not_rebind_every_strategy_is_refused(
        rounds, strategies, refused):
    """A scenario script that stopped early or never ran (a function it
    calls missing: the guest still ends with rc=0) is not a run."""
    run = console.parse(rebind_steps(strategies, rounds))
    spec, = scenarios.plan(["fsdax-dev"], size="256M")
    check = functools.partial(rebind.check_rebinds, spec, run, "x",
                              ("auto", "demand"), 2)
    if refused is None:
        check()
    else:
        with pytest.raises(ZdinitError, match=refused):
            check()
