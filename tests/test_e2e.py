"""End to end: build both kernels, check the series, boot every scenario.

These build Linux (about 15 minutes per kernel cold on 2 Zen 3 cores,
seconds with a warm cache in $ZDINIT_CACHE) and boot QEMU; they are what
CI spends its time on.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from zdinit import cache, cli
from zdinit.checks import clear_checks, memmap_equality, safety
from zdinit.families import clearing, rebind, scenarios
from zdinit.kernel import bases, build, initramfs, series, under_test
from zdinit.vm import qemu
from zdinit.errors import ZdinitError

pytestmark = pytest.mark.e2e
G = 1 << 30
# The backport's clear series, checked in make test-full (make test checks
# the clear series of the default base).
CLEAR_BASE = bases.BASES["6.12"]


def zdinit(*args, timeout=3600, env=None):
    """A zdinit command as part of this session's run, under its lock."""
    proc = subprocess.run([sys.executable, "-m", "zdinit", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          pass_fds=cache.held_fds(), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def check_series(name, base, build_each=True, targets=None):
    out = zdinit("check-series", "--series", name, "--base", base.name,
                 *([] if build_each else ["--no-build"]),
                 *(["--targets", ",".join(targets)] if targets else [])).stdout
    want = "applies, checkpatch clean" + (", built in" if build_each else "\n")
    parts = list(build.stack_parts(base, name))
    for part, patches in parts:
        where = f"{name}/{part.name}" if len(parts) > 1 else name
        for patch in patches:
            assert f"{base.name} {where}/{patch.name}: {want}" in out, out
    return out


# The series each base carries.
BASE_SERIES = {"6.12": ("zone-device", "clear"),
               "7.3": ("zone-device", "clear")}
# make test covers the default base (its ZONE_DEVICE series built whole,
# KUnit on x86-64; see PREFIXES_IN_FULL_ONLY) and applies and
# checkpatches the backport's series.  make test-full adds KUnit on
# arm64 and, for the backport, in a small x86-64 kernel, each of its
# prefixes built and its memmap self-test booted: each of those is a cold
# kernel build more than make test's time from an empty cache holds.
HOME = bases.DEFAULT
BACKPORT = "6.12"
# The memmap's cases that build on demand (four, for four geometries),
# on a base whose series has them; one skips, its 1 GiB range having a
# single unit.
ON_DEMAND_CASES = 16


def kunit_line(base, skipped=0):
    """The KUnit line of base's series' suites: the memmap's 41 cases
    (and its on-demand ones) and padata's 3; skipped: cases that skip
    besides, such as the store rule's where the series does not stream
    (arm64)."""
    demand = bases.get(base).has_part("zone-device", "demand")
    tests = 44 + ON_DEMAND_CASES * demand
    skipped += demand
    return (f"KUnit zone_device_memmap, padata_mt: {tests} tests: "
            f"{tests - skipped} passed, 0 failed, 0 crashed, "
            f"{skipped} skipped")
I386_COMPILED = "i386: compiled mm/mm_init.c with -Werror; not in its "


def test_the_backport_series_apply_and_pass_checkpatch():
    for name in BASE_SERIES[BACKPORT]:
        check_series(name, bases.BASES[BACKPORT], build_each=False)


@pytest.mark.full
def test_the_backports_kunit_suite_passes_on_x86_64():
    out = check_series("zone-device", bases.BASES[BACKPORT],
                       build_each=False, targets=("x86_64",))
    # One CPU there (configs/kunit-x86.config): the thread rule's cases
    # expect one thread, and none skips.
    assert f"x86_64: built bzImage; {kunit_line(BACKPORT)}" in out, out
    assert "arm64" not in out and "i386" not in out, out


# 7.3's ZONE_DEVICE series changes <linux/string.h> and x86's
# <asm/string_64.h> in its first two patches and <linux/mmzone.h> in its
# contiguity series: each of those prefixes rebuilds nearly every object,
# three cold kernel builds more than make test's time budget holds.  So
# make test applies and checkpatches each of its patches and builds the
# whole series (x86-64, for the bench and the checks); make test-full
# builds each prefix, then the whole series for arm64 and i386.  The
# clear series changes x86's <asm/page_64.h>: its kernel is one more cold
# build, so make test applies and checkpatches it and make test-full
# builds and boots it.
PREFIXES_IN_FULL_ONLY = {(HOME, "zone-device"), (HOME, "clear")}


@pytest.mark.parametrize("base,targets", [
    pytest.param(HOME, ("none",), id=HOME),
    pytest.param(BACKPORT, ("arm64", "i386"), marks=pytest.mark.full,
                 id=BACKPORT)])
def test_every_patch_applies_passes_checkpatch_and_builds(base, targets):
    """Every series of the base, every prefix built (but those of
    PREFIXES_IN_FULL_ONLY); on the backport the ZONE_DEVICE series also
    on arm64, running the KUnit suite, DEVICE_PRIVATE ranges included,
    and compiled for i386."""
    for name in BASE_SERIES[base]:
        # The other targets are the ZONE_DEVICE series' alone.
        out = check_series(name, bases.BASES[base],
                           build_each=(base, name) not in PREFIXES_IN_FULL_ONLY,
                           targets=(targets if series.SERIES[name].cross_build
                                    else None))
        if name == "zone-device":
            assert (f"arm64: built Image; {kunit_line(base, 1)}" in out) \
                == ("arm64" in targets), out
            assert (I386_COMPILED in out) == ("i386" in targets), out


@pytest.mark.full
@pytest.mark.parametrize("base,name", sorted(PREFIXES_IN_FULL_ONLY))
def test_every_prefix_builds_where_make_test_does_not(base, name):
    """Each prefix built, then, in the same tree, the whole ZONE_DEVICE
    series built for arm64 and booted, KUnit running (DEVICE_PRIVATE ranges
    included), and compiled for i386."""
    cross = series.SERIES[name].cross_build
    out = check_series(name, bases.BASES[base],
                       targets=("arm64", "i386") if cross else None)
    if cross:
        assert f"arm64: built Image; {kunit_line(base, 1)}" in out, out
        assert I386_COMPILED in out, out


@pytest.mark.full
@pytest.mark.parametrize("base", ["7.3", "6.12"])
def test_zone_contiguity_agrees_with_the_walk_on_the_hotplug_kernels(base):
    """The check patch applies to and builds on hotplug-stock (one more
    kernel build), which counts; every zone's flag after every step, a
    failed online among them, is what the walk finds."""
    zdinit("bench", "--base", base, "--kernels", "hotplug-stock",
           "--scenarios",
           "kmem,virtio-mem", "--size", "1G", "--n", "1", "--rounds", "1",
           "--contiguity")


# make test builds and boots the series alone; stock's kernel, its bench
# rows and its safety outcomes are make test-full's (the safety checks
# compare the series with stock's recorded outcomes instead).
SMALL_BENCH = ("--size", "4G", "--n", "3", "--rounds", "1")


@pytest.fixture(scope="module")
def small_bench():
    zdinit("bench", "--kernels", "patched", *SMALL_BENCH, "--strategies",
           "auto,slow,template,stream,demand")
    latest = ROOT / "results" / "latest"
    return json.loads((latest / "results.json").read_text()), latest


def test_bench_covers_every_scenario_with_every_strategy(small_bench):
    results, latest = small_bench
    seen = {(r["scenario"], r["align"], r["kernel"], r["strategy"],
             r.get("metric")) for r in results["runs"]}
    for name in scenarios.DEFAULT_BENCH:
        sc = scenarios.SCENARIOS[name]
        for align in sc.default_aligns:
            key = (name, align or None, "patched")
            for strategy in ("auto", "slow", "template", "stream", "demand"):
                assert key + (strategy, None) in seen
            # pmem and device-dax build their memmap on demand, the
            # module's DEVICE_PRIVATE range does not.
            assert (key + ("demand", rebind.BACKGROUND) in seen) == \
                (name != "devprivate")
    for r in results["runs"]:
        assert r["n"] == 3 and len(r["samples_ms"]) == 3
        # Timed by kprobe events, every kernel in microseconds: the 512
        # struct pages of a 1G-aligned map=mem range of 4G too, which
        # whole jiffies read as 0 ms.  The background build is the
        # kernel's own jiffies: there, three 1G compound pages can take
        # 0 ms.
        assert r["timing"] == "trace", r
        assert r["median_ms"] > 0 or r.get("metric") == rebind.BACKGROUND, r
    assert (latest / "summary.md").exists() and (latest / "bench.png").exists()
    assert results["env"]["accel"] in ("kvm", "tcg")


@pytest.mark.full
def test_stock_is_timed_in_every_scenario():
    zdinit("bench", "--kernels", "stock", *SMALL_BENCH)
    results = json.loads((ROOT / "results/latest/results.json").read_text())
    seen = {(r["scenario"], r["align"]) for r in results["runs"]
            if r["kernel"] == "stock" and r["strategy"] == "default"}
    assert seen == {(name, align or None) for name in scenarios.DEFAULT_BENCH
                    for align in scenarios.SCENARIOS[name].default_aligns}
    for r in results["runs"]:
        assert r["timing"] == "trace" and r["median_ms"] > 0, r
        assert r["struct_pages_written"] is None    # stock does not say


def test_page_counts_follow_the_geometry(small_bench):
    results, _ = small_bench
    size_pages = 4 * G // 4096
    for r in results["runs"]:
        pages, written = r["pages"], r["struct_pages_written"]
        if r["scenario"] in ("fsdax-dev", "devdax-dev"):
            # The altmap reserve holds the memmap itself: 64 bytes per
            # 4 KiB page, about 1/64 of the namespace, plus the info block.
            reserve = size_pages - pages
            assert size_pages // 64 <= reserve <= size_pages // 64 + 1024, r
        else:
            assert pages == size_pages, r
        if r["scenario"] == "devdax-mem":
            per = 512 if r["align"] == "2M" else 262144
            assert written == pages // per * 128, r   # vmemmap tail reuse
        else:
            assert written == pages, r


@pytest.mark.full
def test_upstreams_method_runs_every_scenario_of_the_bench():
    """make bench's third kernel, 7.3 with the templates and contiguity
    series alone (one more kernel build): its own pr_debug line, with the
    struct pages it wrote, in every scenario of the default bench; it has
    one method, the template (every copy streamed, on one thread)."""
    zdinit("bench", "--base", "7.3", "--kernels", "upstream", "--size", "4G",
           "--n", "1", "--rounds", "1")
    results = json.loads((ROOT / "results" / "latest" /
                          "results.json").read_text())
    seen = set()
    for r in results["runs"]:
        assert (r["kernel"], r["strategy"]) == ("upstream", "default"), r
        assert r["struct_pages_written"] is not None and r["threads"] is None
        assert r["resolved"] == ["template"], r
        seen.add((r["scenario"], r["align"]))
    assert seen == {(name, align or None)
                    for name in scenarios.DEFAULT_BENCH
                    for align in scenarios.SCENARIOS[name].default_aligns}


def test_auto_streams_once_the_struct_pages_written_reach_the_guest_llc(
        small_bench):
    """auto takes the store rule's strategy (zdinit/kernel/store_rule.py) for the
    struct pages each range writes and the LLC the guest lists, wherever
    the memmap lives, and cached copies with vmemmap tail reuse; at 4G
    both sides of the rule are taken (under TCG's 16 MiB L3 devdax-mem,
    whose 2M and 1G pages reuse their vmemmap tails, keeps the template;
    the other scenarios stream)."""
    results, _ = small_bench
    wanted = set()
    for r in results["runs"]:
        if r["kernel"] != "patched":
            continue
        name = scenarios.strategy_name(r["strategy"])
        # demand's background build takes the rule's strategy too.
        if name in ("auto", scenarios.ON_DEMAND):
            # 0: sysfs listed no cache; None: the guest did not say.
            assert r["guest_llc_bytes"] is not None, r
            want = scenarios.auto_strategy(r["struct_pages_written"],
                                           r["guest_llc_bytes"],
                                           pages=r["pages"])
            assert r["resolved"] == [want], r
            wanted.add(want)
        else:
            assert r["resolved"] == [name], r
        # NAME@1 holds the kernel to one thread.
        if r["strategy"].endswith("@1"):
            assert r["threads"] == [1], r
    assert wanted == {"stream", "template"}, wanted


@pytest.mark.parametrize("base", [
    HOME, pytest.param(BACKPORT, marks=pytest.mark.full)])
def test_memmap_equals_slow_path_byte_for_byte(base):
    out = zdinit("memmap-equality", "--size", "4G", "--base", base).stdout
    assert "0 differ, 0 unchecked" in out
    assert out.rstrip().splitlines()[-1].startswith("memmap equality passed: all ")
    assert kunit_line(base) in out
    # The check catches a fast path that leaves struct pages unwritten on
    # an altmap namespace still holding the slow path's.
    for mode in ("fsdax-dev", "devdax-dev2M"):
        for strategy in ("template", "stream"):
            assert (f"skip injection {mode} {strategy}: 100 struct pages "
                    f"left unwritten, 100 caught") in out
    for geometry in ("private:130:2:0", "generic:1026:2:9", "generic:2048:0:18"):
        for strategy in ("slow", "template", "stream", "auto"):
            assert f"{geometry} {strategy}->" in out
    for scenario in ("fsdax-dev", "devdax-dev 2M", "devdax-dev 1G"):
        assert f"{scenario} stream->stream: 2 rebinds verified" in out
    # Onlined memory (the onlining series): 8 blocks of 32768 struct pages
    # onlined movable from templates three times (the first onlining, then
    # auto and template; the slow one is not checked), then into
    # ZONE_NORMAL, all checked; the skip caught.
    assert ("onlined memory (8 blocks, movable, strategies auto, slow, "
            "template): 786432 struct pages built from templates compared "
            "with the slow path, 0 differ, 0 unchecked") in out
    assert ("onlined memory (normal, template): 262144 struct pages "
            "compared with the slow path, 0 differ, 0 unchecked") in out
    assert ("onlined memory skip injection: 100 struct pages left "
            "unwritten, 100 caught") in out


@pytest.mark.full
@pytest.mark.parametrize("mutant", build.ONLINING_MUTANTS)
def test_the_onlined_memory_check_catches_a_broken_onlining_path(mutant,
                                                                 tmp_path):
    """Each deliberate breakage of the onlining template path
    (tests/data/onlining-mutants/) fails the memmap equality check of
    onlined memory, whether or not the kernel also notices."""
    target = under_test.build(**cli.wanted(
        f"onlining-{mutant}", bases.BASES[HOME],
        memmap_equality.HOTPLUG_STRATEGIES))
    with pytest.raises(ZdinitError, match="memmap-equality hotplug: (memmap "
                       "verification failed|kernel reported)"):
        memmap_equality.run_hotplug_verify(target, "tcg", tmp_path)


def test_guest_failure_reports_the_log_tail(tmp_path):
    kernel = build.build("patched", bases.BASES[HOME])
    initrd = initramfs.build(kernel, tmp_path / "initrd.gz")
    with pytest.raises(ZdinitError) as err:
        qemu.boot(kernel, initrd, {"scenario": "no-such-scenario"}, "tcg",
                  timeout_s=120, log_path=tmp_path / "console.log")
    text = str(err.value)
    assert "guest scenario failed" in text
    assert "unknown scenario 'no-such-scenario'" in text
    assert "@@zdinit end rc=1" in text


@pytest.mark.full
def test_base_kernel_has_no_strategy_knob(tmp_path):
    """Selecting a strategy on a stock kernel fails cleanly, naming the
    cause."""
    kernel = build.build("stock", bases.BASES[HOME])
    initrd = initramfs.build(kernel, tmp_path / "initrd.gz")
    with qemu.SparseImage(2 * G, 64 << 20, "knob") as img:
        with pytest.raises(ZdinitError, match="no /sys/kernel/debug/zone_device_memmap"):
            qemu.boot(kernel, initrd, {"scenario": "fsdax-dev", "size": 2 * G,
                                       "n": 1, "strategies": "template"},
                      "tcg", nvdimms=[(img.path, img.size)], timeout_s=120)


def test_a_second_run_is_refused_while_this_one_builds(tmp_path):
    """This session holds the cache lock all through, its builds included:
    a zdinit started by the make of one of its builds is refused, naming
    the holder."""
    second = tmp_path / "second-run.txt"
    shims = tmp_path / "bin"
    shims.mkdir()
    probe = (f"cd {shlex.quote(str(ROOT))} && {shlex.quote(sys.executable)}"
             f" -m zdinit build patched; echo exit $?")
    (shims / "make").write_text(
        f"#!/bin/sh\n[ -e {second} ] || ({probe}) > {second} 2>&1\n"
        f'exec {shlex.quote(shutil.which("make"))} "$@"\n')
    (shims / "make").chmod(0o755)
    zdinit("build", "patched",
           env=dict(os.environ, PATH=f"{shims}:{os.environ['PATH']}"))
    holder = (cache.require_lock() / "lock").read_text().strip()
    assert holder.startswith("PID ")
    text = second.read_text()
    assert f"is in use by {holder}; wait for it" in text, text
    assert text.endswith("exit 1\n"), text


def test_safety_checks_pass_against_stocks_recorded_outcomes():
    zdinit("safety", "--stock-record")
    rows = json.loads((ROOT / "results/latest/safety.json").read_text())
    assert rows and all(r["passed"] for r in rows)
    assert not any(build.is_stock(r["kernel"]) for r in rows)
    names = {(r["check"], r["kernel"]) for r in rows}
    for check in ("hmm-selftests", "gup-devdax", "devdax-integrity",
                  "fsdax-integrity", "churn", "devprivate-too-large",
                  "odd-geometry", "ndctl-subsection", "ndctl-align",
                  "ndctl-mode-cycle", "ndctl-reconfigure",
                  "kselftest-dax-kmem", "kselftest-mem-on-off"):
        assert (check, "patched") in names, check
    for check in ("held-devdax-ends", "held-rebind", "held-kpageflags",
                  "held-test-hmm", "held-fsdax", "held-released"):
        assert (check, "patched") in names, check
    for r in rows:
        if r["check"] in safety.SAME_AS_STOCK:
            assert r["detail"].endswith("same as stock (recorded)"), r
    used = {r["used"] for r in rows if r["check"] == "devdax-integrity"
            and r["kernel"] == "patched"}
    assert used == {"slow", "template", "stream"}
    verified = [r for r in rows if r["check"] == "odd-geometry memmap = slow path"]
    assert verified and verified[0]["raw"]["checked"] > 0


def assert_read_back_zero(out, models):
    """clear-check's lines: 2M and 1G pages, cached and streaming clear,
    1G each, under every model and, with init_on_alloc and init_on_free,
    under the first."""
    for page in ("2M", "1G"):
        for method in ("cached", "stream"):
            for preempt in models:
                assert (f"clear-zero clear preempt={preempt} {page} "
                        f"{method}: 2 rounds of {G} bytes read back zero"
                        ) in out, out
            assert (f"clear-zero clear preempt={models[0]} init_on_alloc=1 "
                    f"init_on_free=1 {page} {method}: 2 rounds of {G} bytes "
                    f"read back zero") in out, out


@pytest.mark.full
def test_cleared_huge_pages_read_back_zero_and_selftests_match_stock():
    """2M THP and 1G hugetlb pages, cached and streaming clear, preempt=none
    and preempt=full: fill, free, re-fault, every byte zero; the kernel's
    hugetlb/THP selftests under preempt=none pass and fail as stock 6.12's
    recorded outcomes (test-full boots stock to check the record)."""
    out = zdinit("clear-check", "--size", "1G", "--rounds", "2",
                 "--base", CLEAR_BASE.name).stdout
    assert_read_back_zero(out, ("none", "full"))
    lines = "\n".join(clear_checks.check_selftests_against_record(
        ["none"], CLEAR_BASE))
    for name in clear_checks.base_selftests(CLEAR_BASE):
        assert f"selftest {name} preempt=none: exit" in lines, lines


@pytest.mark.full
def test_stock_selftest_record_is_what_stock_does():
    """Boot stock and the series on both models: the series matches stock,
    and stock still gives the outcomes make test compares against."""
    outcomes = clear_checks.selftest_outcomes(["none", "full"],
                                       ["clear-stock", "clear"], CLEAR_BASE)
    record = json.loads(clear_checks.STOCK_SELFTESTS.read_text())[CLEAR_BASE.name]
    for model, outcome in outcomes.items():
        clear_checks.same_selftest_outcomes(outcome, model)
        assert outcome["clear-stock"] == record[model], (model, outcome)


@pytest.mark.full
def test_zero_check_catches_a_broken_clear():
    """The same check on a kernel that skips one page of the neighbourhood."""
    spec = scenarios.plan_clear(["2M"], "64M", preempt=["none"])
    with pytest.raises(ZdinitError, match="non-zero words in 2M pages"):
        clear_checks.check_zero(spec, 2, "clear-broken", CLEAR_BASE)


@pytest.mark.full
def test_cleared_huge_pages_read_back_zero_on_7_3():
    """7.3, where upstream clears runs of pages itself and the series
    streams the part away from the fault: 2M THP and 1G hugetlb pages,
    cached and streaming clear, under preempt=lazy and full (its x86 has
    no other model), every byte zero.  With init_on_alloc the allocator
    clears the 2M THP; the 1G pages still go through folio_zero_user()."""
    out = zdinit("clear-check", "--base", "7.3", "--size", "1G",
                 "--rounds", "2").stdout
    assert_read_back_zero(out, ("lazy", "full"))


@pytest.mark.full
def test_zero_check_catches_a_broken_clear_on_7_3():
    """7.3's series with the last page of the fault's neighbourhood left
    uncleared."""
    base = bases.BASES["7.3"]
    spec = scenarios.plan_clear(["2M"], "64M", preempt=["full"],
                                on_bases=[base])
    with pytest.raises(ZdinitError, match="non-zero words in 2M pages"):
        clear_checks.check_zero(spec, 2, "clear-broken", base)


@pytest.mark.full
def test_7_3_selftests_match_the_stock_record():
    """The series on 7.3 passes and fails the hugetlb/THP selftests as
    stock 7.3's recorded outcomes, on both of its models."""
    lines = "\n".join(clear_checks.check_selftests_against_record(
        ["lazy", "full"], bases.BASES["7.3"]))
    for name in clear_checks.base_selftests(bases.BASES["7.3"]):
        assert f"selftest {name} preempt=lazy: exit" in lines, lines


@pytest.mark.full
def test_clear_bench_across_bases_with_perf():
    """One table for stock 6.12, stock 7.3 and the series on 7.3: zdclear
    and perf bench mem mmap (demand, populate) for every kernel and
    method, on the model both bases have."""
    zdinit("clear", "--base", "6.12,7.3", "--size", "1G", "--loops", "1",
           "--rounds", "1", "--preempt", "full")
    results = json.loads((ROOT / "results/latest/results.json").read_text())
    seen = {(r["base"], r["kernel"], r["method"], r["page"])
            for r in results["runs"]}
    assert seen == {(b, k, m, page) for b, k, m in (
        ("6.12", "clear-stock", "default"), ("7.3", "clear-stock", "default"),
        ("7.3", "clear", "cached"), ("7.3", "clear", "stream"))
        for page in ("2M", "1G")}
    for r in results["runs"]:
        assert r["preempt"] == "full" and r["n"] == 1
        for function in clearing.PERF_FUNCTIONS:
            assert r["perf"][function]["n"] == 1
            assert r["perf"][function]["median_gbps"] > 0
    summary = (ROOT / "results/latest/summary.md").read_text()
    assert (results["env"]["accel"] == "tcg") == ("rank nothing"
                                                   in summary)


@pytest.mark.full
def test_clear_bench_covers_both_kernels_and_methods():
    zdinit("clear", "--size", "1G", "--loops", "2", "--rounds", "1",
           "--preempt", "none", "--base", CLEAR_BASE.name)
    results = json.loads((ROOT / "results/latest/results.json").read_text())
    seen = {(r["page"], r["kernel"], r["method"]) for r in results["runs"]}
    for page in ("2M", "1G"):
        assert {(page, "clear-stock", "default"), (page, "clear", "cached"),
                (page, "clear", "stream")} <= seen
    for r in results["runs"]:
        assert r["n"] == 2 and r["median_gbps"] > 0 and r["max_wait_ms"] > 0
        assert (r["kernel"] == "clear-stock") == ("vs_base" not in r)


@pytest.mark.full
def test_full_safety_checks_pass():
    """The tracepoint guard and the KASAN/lockdep/kmemleak kernels too."""
    zdinit("safety", "--full")
    rows = json.loads((ROOT / "results/latest/safety.json").read_text())
    assert rows and all(r["passed"] for r in rows)
    assert {"trace", "debug", "held"} <= {r["kernel"] for r in rows}
    held = {r["check"] for r in rows if r["kernel"] == "held"}
    assert {"held-kpageflags", "held-page-owner", "held-memory-failure",
            "held-released"} <= held, held


@pytest.mark.full
@pytest.mark.parametrize("kernel,args", [
    # KASAN, lockdep, DEBUG_VM and kmemleak: every page size and model.
    ("clear-debug", ["--size", "1G"]),
    # KMSAN (a clang build, three times the guest memory): 2M THP.
    ("clear-kmsan", ["--pages", "2M", "--size", "64M", "--preempt", "none"]),
])
def test_cleared_pages_read_back_zero_on_debug_kernels(kernel, args):
    out = zdinit("clear-check", "--kernel", kernel, "--base", CLEAR_BASE.name,
                 *args).stdout
    zero = [line for line in out.splitlines() if "read back zero" in line]
    assert zero and all(f"clear-zero {kernel} " in line for line in zero), out
