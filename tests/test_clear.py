"""The clear family's host side and guest tool, without a kernel build."""
import json
import subprocess
import types

import pytest

from conftest import DATA, ROOT
from test_cli_errors import run_zdinit
from zdinit.checks import clear_checks
from zdinit.families import clearing, loop, registry, scenarios
from zdinit.kernel import bases, build, initramfs
from zdinit.results import report
from zdinit.vm import qemu
from zdinit.errors import UsageError, ZdinitError

G = 1 << 30
M = 1 << 20


@pytest.mark.parametrize("args,message", [
    (["clear", "--pages", "4K"], "unknown page size '4K'; choose from 2M, 1G"),
    (["clear", "--pages", "2M,16M"], "unknown page size '16M'"),
    (["clear", "--size", "3M", "--pages", "2M"], "non-zero multiple of the largest page size (2M)"),
    (["clear", "--size", "3G", "--pages", "2M,1G", "--loops", "0"], "argument --loops: must be 1..1000, not 0"),
    (["clear", "--size", "1536M"], "multiple of the largest page size (1G)"),
    (["clear", "--preempt", "none,rt"], "unknown preemption model 'rt'; "
     "choose from none, voluntary, full, lazy"),
    # Models per base: 7.3's x86 boots with full and lazy alone, 6.12's
    # has no lazy.
    (["clear", "--base", "6.12", "--preempt", "none,lazy"],
     "preemption model 'lazy' is not "
     "available on base 6.12; its x86 kernel boots with none, voluntary, "
     "full"),
    (["clear", "--base", "7.3", "--preempt", "none"], "preemption model "
     "'none' is not available on base 7.3; its x86 kernel boots with full, "
     "lazy"),
    (["clear", "--base", "6.12,7.3", "--preempt", "voluntary"],
     "preemption model 'voluntary' is not available on base 7.3"),
    (["clear-check", "--base", "7.3", "--preempt", "full,none"],
     "preemption model 'none' is not available on base 7.3"),
    (["clear", "--base", "6.12,6.12"], "kernel base '6.12' given twice"),
    (["clear", "--base", "6.12,8.1"], "unknown kernel base '8.1'"),
    (["clear", "--pages", "2M,2M"], "page size '2M' given twice"),
    (["clear", "--kernels", "clear,patched"], "unknown kernel 'patched'"),
    (["clear", "--rounds", "0"], "argument --rounds: must be 1..100, not 0"),
    (["clear-check", "--pages", "512K"], "unknown page size '512K'"),
    (["clear-check", "--kernel", "clear-base"], "unknown kernel 'clear-base'"),
    (["check-series", "--series", "linux-6.13"], "unknown series 'linux-6.13'"),
    (["check-series", "--base", "6.13"], "unknown kernel base '6.13'; "
     "choose from 6.12, 7.3"),
    (["bench", "--base", ""], "unknown kernel base ''"),
])
def test_clear_usage_errors(tmp_path, args, message):
    proc = run_zdinit(tmp_path, *args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr

BASE = bases.BASES["6.12"]


def test_size_beyond_host_memory_is_refused_before_any_boot(tmp_path):
    """The guest needs the size plus its overhead: 1T never fits here."""
    proc = run_zdinit(tmp_path, "clear", "--base", "6.12", "--size", "1T")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "use a smaller --size" in lines[0], proc.stderr


def test_plan_defaults_and_kernel_command_line():
    spec = scenarios.plan_clear(on_bases=[BASE])
    assert spec.pages == ("2M", "1G") and spec.size == 8 * G
    assert spec.models(BASE) == ("none", "full") and spec.loops == 5
    # Without bases given: the default base's models.
    assert scenarios.plan_clear().preempt == {bases.DEFAULT: ("lazy", "full")}
    # Each base its own default models; given models apply to every base.
    both = [BASE, bases.BASES["7.3"]]
    assert scenarios.plan_clear(on_bases=both).preempt == {
        "6.12": ("none", "full"), "7.3": ("lazy", "full")}
    assert scenarios.plan_clear(preempt=["full"], on_bases=both).preempt == {
        "6.12": ("full",), "7.3": ("full",)}
    assert spec.cmdline("none") == ["preempt=none", "hugepagesz=1G",
                                    "hugepages=8"]
    assert scenarios.plan_clear(["2M"], "64M").cmdline("full") == ["preempt=full"]
    # The 1G pool is released before the THP run: one size of RAM.
    assert spec.guest_ram_mb() == (8 * G + scenarios.CLEAR_GUEST_OVERHEAD
                                   + scenarios.CLEAR_GIGANTIC_SLACK) // M
    assert scenarios.plan_clear(["2M"], "2G").guest_ram_mb() == \
        (2 * G + scenarios.CLEAR_GUEST_OVERHEAD) // M
    with pytest.raises(UsageError):
        scenarios.plan_clear(["1G"], "1G", preempt=["rt"])


def test_one_g_pages_need_the_cpu_flag_under_kvm(monkeypatch):
    monkeypatch.setattr(clearing, "host_has_1g_pages", lambda: False)
    monkeypatch.setattr(build, "build", lambda v, b, c: type("K", (), {
        "variant": v, "base": b, "out": ROOT})())
    monkeypatch.setattr(initramfs, "build", lambda k, d, t: d)
    monkeypatch.setattr(qemu, "choose_accel", lambda k, i: ("kvm", "test"))
    with pytest.raises(ZdinitError, match="no pdpe1gb"):
        clearing.prepare(scenarios.plan_clear(["1G"], "1G"), [(BASE, "clear")])
    monkeypatch.setattr(qemu, "choose_accel", lambda k, i: ("tcg", "test"))
    targets, accel, _ = clearing.prepare(scenarios.plan_clear(["1G"], "1G"),
                                      [(BASE, "clear")])
    assert accel == "tcg" and targets[0].strategies == ("cached", "stream")


def test_parse_a_real_guest_log():
    run = clearing.parse_run((DATA / "clear-patched.log").read_text())
    assert run.rule["stream"] in ("Y", "N") and int(run.rule["stream_min_kb"]) > 0
    pages = {r["page"] for r in run.bench}
    methods = {r["method"] for r in run.bench}
    assert pages == {"2M", "1G"} and methods == {"cached", "stream"}
    assert all(int(r["ns"]) > 0 for r in run.bench)
    assert {(r["page"], r["method"]) for r in run.latency} == \
        {(p, m) for p in pages for m in methods}


def entry(gbps, latency=(), demand=(), populate=()):
    return {"gbps": list(gbps), "latency": list(latency), "rule": None,
            "size": 64 << 20,
            "perf": {"demand": list(demand), "populate": list(populate)}}


def test_runs_table_speedup_is_rate_over_rate():
    spec = scenarios.plan_clear(["2M"], "64M", loops=3)
    wait = [{"fault_ns": 9_000_000, "max_wait_ns": 3_000_000}]
    samples = {
        ("2M", "none", "6.12", "clear-base", "default"): entry([1.0] * 3),
        ("2M", "none", "6.12", "clear", "stream"): entry(
            [2.0] * 3, wait, demand=[0.5, 0.7, 0.6], populate=[0.9] * 3),
        # Another base: compared with its own stock, which is 4x faster.
        ("2M", "lazy", "7.3", "clear-base", "default"): entry([4.0] * 3),
        ("2M", "lazy", "7.3", "clear", "stream"): entry([2.0] * 3, wait),
    }
    runs = {(r["base"], r["kernel"]): r
            for r in clearing.runs_table(samples, [spec])}
    ours = runs[("6.12", "clear")]
    assert ours["vs_base"]["speedup"] == pytest.approx(2.0)
    assert runs[("7.3", "clear")]["vs_base"]["speedup"] == pytest.approx(0.5)
    assert ours["median_gbps"] == 2.0
    assert ours["max_wait_ms"] == 3.0
    assert ours["perf"]["demand"]["median_gbps"] == 0.6
    assert ours["perf"]["demand"]["n"] == 3
    assert ours["perf"]["populate"]["samples_gbps"] == [0.9] * 3
    # 9 ms for 64 MiB: 4.5 ms per 32 MiB batch, under preempt=none; lazy
    # is preemptible and clears each run in one call.
    assert ours["per_batch_ms"] == pytest.approx(4.5)
    assert "per_batch_ms" not in runs[("7.3", "clear")]
    assert "vs_base" not in runs[("6.12", "clear-base")]
    assert runs[("7.3", "clear-base")]["perf"] == {}
    table = report.text_table(list(runs.values()), clearing.HEADER,
                              clearing.rows).splitlines()
    assert table[0].split()[:5] == ["base", "kernel", "method", "page",
                                    "preempt"]
    row = table[2 + list(runs).index(("6.12", "clear"))].split()
    assert row[:8] == ["6.12", "clear", "stream", "2M", "none", "0.600",
                       "0.520-0.680", "3"]
    assert row[-4:] == ["2.00x", "[2.00-2.00]", "3.0", "4.5"]
    lazy = table[2 + list(runs).index(("7.3", "clear"))].split()
    assert lazy[5:8] == ["-", "-", "-"] and lazy[-1] == "-"


def test_vs_base_is_the_ratio_of_the_medians_shown():
    """Two loops: the median GB/s is a mean of two rates, and the ratio
    must be of those medians, not of the median times."""
    spec = scenarios.plan_clear(["2M"], "64M", loops=2)
    samples = {("2M", "lazy", "7.3", "clear-base", "default"): entry([1.0, 3.0]),
               ("2M", "lazy", "7.3", "clear", "stream"): entry([4.0, 4.0])}
    ours = next(r for r in clearing.runs_table(samples, [spec])
                if r["kernel"] == "clear")
    assert ours["vs_base"]["speedup"] == pytest.approx(
        ours["median_gbps"] / 2.0) == pytest.approx(2.0)


def test_default_kernels_are_stock_on_every_base_and_ours_on_the_last():
    b612, b73 = bases.BASES["6.12"], bases.BASES["7.3"]
    assert clearing.kernel_pairs(None, [b612, b73]) == [
        (b612, "clear-stock"), (b73, "clear-stock"), (b73, "clear")]
    assert clearing.kernel_pairs(None, [b73]) == [(b73, "clear-stock"),
                                               (b73, "clear")]
    assert clearing.kernel_pairs(["clear"], [b612, b73]) == [
        (b612, "clear"), (b73, "clear")]


def target(base, variant):
    """A Target of variant on base, as far as the clear family reads it."""
    return types.SimpleNamespace(kernel=types.SimpleNamespace(
        base=bases.BASES[base], variant=variant))


def test_a_boot_with_missing_results_is_an_error():
    spec = scenarios.plan_clear(["2M", "1G"], "1G", loops=2)
    run = clearing.ClearRun(bench=[{"page": "2M", "method": "cached",
                                 "bytes": "1", "ns": "1"}],
                         latency=[], zero=[], rule=None, preempt="none")
    with pytest.raises(ZdinitError, match="1 bench results, expected 8"):
        clearing.check_run(spec, run, "test", target("6.12", "clear"), "none", 2)


def bench_lines(pages, methods, share, perf_functions=clearing.PERF_FUNCTIONS):
    lines = []
    for page in pages:
        for method in methods:
            for _ in range(share):
                lines.append(f"@@zdinit clear bench page={page} bytes=2097152"
                             f" ns=1000000 method={method}")
                lines += [f"@@zdinit clear perf page={page} function={f} "
                          f"bytes_per_s=2500000000 method={method}"
                          for f in perf_functions]
    return "\n".join(lines)


def test_perf_results_are_parsed_and_counted():
    spec = scenarios.plan_clear(["2M", "1G"], "1G", loops=2)
    log = "[    1.0] @@zdinit clear-preempt model=lazy\n" + bench_lines(
        ["2M", "1G"], ["cached", "stream"], 2)
    run = clearing.parse_run(log)
    assert run.preempt == "lazy" and len(run.perf) == 16
    samples = {}
    clearing.check_run(spec, run, "test", target("7.3", "clear"), "lazy", 2)
    clearing.collect(samples, spec, run, target("7.3", "clear"))
    e = samples[("1G", "lazy", "7.3", "clear", "stream")]
    assert e["perf"] == {"demand": [2.5, 2.5], "populate": [2.5, 2.5]}
    # A perf line missing (perf failed in one loop) is an error.
    short = clearing.parse_run(log.rsplit("\n", 1)[0])
    with pytest.raises(ZdinitError, match="15 perf bench results, "
                       "expected 16"):
        clearing.check_run(spec, short, "test", target("7.3", "clear"), "lazy", 2)


@pytest.mark.parametrize("reported,ok", [("full", True), ("lazy", False),
                                          ("", False), (None, False)])
def test_a_run_on_another_model_than_asked_fails(monkeypatch, reported, ok):
    """7.3 refuses preempt=none at boot and runs full: such a run must not
    be labelled none."""
    line = "" if reported is None else \
        f"@@zdinit clear-preempt model={reported}\n"
    monkeypatch.setattr(qemu, "boot", lambda *a, **k: type(
        "R", (), {"log": line})())
    target = type("T", (), {"kernel": type("K", (), {"variant": "clear"}),
                            "initrd": None, "strategies": ("cached",)})
    spec = scenarios.plan_clear(["2M"], "64M")
    if ok:
        assert clear_checks.boot_clear(target, spec, "clear-zero", "full",
                                       "tcg", "test").preempt == "full"
        return
    with pytest.raises(ZdinitError, match="test: the kernel runs preempt="
                       f"{reported or '.not reported.'}, not the full"):
        clear_checks.boot_clear(target, spec, "clear-zero", "full", "tcg",
                                "test")


@pytest.fixture(scope="module")
def zdclear(tmp_path_factory):
    path = tmp_path_factory.mktemp("zdclear") / "zdclear"
    initramfs.build_guest_tool("zdclear", initramfs.GUEST_TOOLS["zdclear"], path)
    return path


def run_tool(path, *args):
    return subprocess.run([str(path), *args], capture_output=True, text=True,
                          timeout=120)


def test_zdclear_reads_back_zero_pages_natively(zdclear):
    """The host kernel's THP pages: fill, free, re-fault, all zero."""
    proc = run_tool(zdclear, "zero", "2M", str(8 * M), "2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"zdclear: zero page=2M bytes={8 * M} rounds=2 bad=0"


def test_zdclear_bench_and_latency_lines(zdclear):
    proc = run_tool(zdclear, "bench", "2M", str(8 * M))
    assert proc.returncode == 0 and proc.stdout.startswith(
        f"zdclear: bench page=2M bytes={8 * M} ns="), proc.stderr
    proc = run_tool(zdclear, "latency", "2M", str(4 * M))
    assert proc.returncode == 0 and "max_wait_ns=" in proc.stdout, proc.stderr


@pytest.mark.parametrize("args", [["zero", "4K", "4096", "1"],
                                  ["bench", "2M", "3000000"],
                                  ["bench", "1G", "0"], ["nope", "2M", "2097152"]])
def test_zdclear_usage_errors(zdclear, args):
    proc = run_tool(zdclear, *args)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


def test_guest_scripts_are_valid_shell():
    for script in initramfs.GUEST_SCRIPTS:
        proc = subprocess.run(["sh", "-n", str(ROOT / "guest" / script)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_memory_check_uses_the_guest_size(monkeypatch):
    monkeypatch.setattr(qemu, "mem_available", lambda: 6 * G)

    def check_resources(spec, variants):
        loop.check_resources([(registry.CLEARING, spec)], variants)

    check_resources(scenarios.plan_clear(["2M"], "2G"), ["clear"])
    with pytest.raises(ZdinitError, match="use a smaller --size"):
        check_resources(scenarios.plan_clear(["2M"], "4G"), ["clear"])
    # A KMSAN guest needs three times the memory.
    spec = scenarios.plan_clear(["2M"], "512M")
    assert clearing.guest_ram_mb(spec, "clear-kmsan") == \
        3 * clearing.guest_ram_mb(spec, "clear")
    check_resources(spec, ["clear"])
    with pytest.raises(ZdinitError, match="for kernel 'clear-kmsan'"):
        check_resources(spec, ["clear", "clear-kmsan"])


def test_broken_series_is_the_clear_series_plus_one_test_patch():
    from zdinit.kernel import build
    clear_series = build.stack_patches(BASE, "clear")
    broken = build.variant_patches("clear-broken", BASE)
    assert broken[:-1] == clear_series
    assert "TEST ONLY" in broken[-1].read_text()


def test_kmsan_kernels_build_with_clang():
    from zdinit.kernel import build
    assert build.compiler(build.VARIANTS["clear-kmsan"].fragments) == "clang"
    assert build.compiler(build.VARIANTS["clear-debug"].fragments) == "gcc"
    assert "CC=ccache clang" in build.make_cmd("t", "o", "bzImage", cc="clang")
    assert "CC=ccache gcc" in build.make_cmd("t", "o", "bzImage")
    assert [k for k in build.VARIANTS if build.has_kmsan(k)] == \
        ["clear-kmsan"]


def test_the_series_is_compared_with_the_recorded_stock_outcomes(monkeypatch):
    record = json.loads(clear_checks.STOCK_SELFTESTS.read_text())["6.12"]
    names = tuple(record["none"])
    for model in ("none", "full"):
        assert sorted(record[model]) == sorted(names)
        assert set(names) <= set(initramfs.HUGE_SELFTESTS)
    monkeypatch.setattr(clear_checks, "base_selftests", lambda base: names)
    live = {"none": {"clear": json.loads(json.dumps(record["none"]))}}
    booted = []

    def outcomes(preempt, kernels, base):
        booted.extend(kernels)
        return live
    monkeypatch.setattr(clear_checks, "selftest_outcomes", outcomes)
    lines = clear_checks.check_selftests_against_record(["none"], BASE)
    assert len(lines) == len(names)
    assert booted == ["clear"]     # stock is not built or booted
    # One test failing where stock passed, or the reverse, is an error.
    name = names[0]
    live["none"]["clear"][name][0] = "1" if record["none"][name][0] == "0" else "0"
    with pytest.raises(ZdinitError, match=f"selftest {name} preempt=none"):
        clear_checks.check_selftests_against_record(["none"], BASE)
    with pytest.raises(ZdinitError, match="every selftest for base 6.12 preempt=voluntary"):
        clear_checks.check_selftests_against_record(["voluntary"], BASE)
    # A selftest the record does not have is refused before any boot.
    booted.clear()
    monkeypatch.setattr(clear_checks, "base_selftests",
                        lambda base: names + ("new_test",))
    with pytest.raises(ZdinitError, match="every selftest for base 6.12 preempt=none"):
        clear_checks.check_selftests_against_record(["none"], BASE)
    assert booted == []


def test_recording_one_model_keeps_the_others(monkeypatch, tmp_path):
    record = tmp_path / "stock.json"
    record.write_text(json.dumps({"6.12": {"none": {"t": ["0", "a", ""]},
                                           "full": {"t": ["0", "b", ""]}},
                                  "7.3": {"full": {"t": ["0", "d", ""]}}}))
    live = {"full": {"clear-stock": {"t": ["1", "c", ""]},
                     "clear": {"t": ["1", "c", ""]}}}
    monkeypatch.setattr(clear_checks, "selftest_outcomes", lambda preempt, k, b: live)
    monkeypatch.setattr(initramfs, "HUGE_SELFTESTS", ("t",))
    clear_checks.check_selftests(["full"], BASE, record=record)
    assert json.loads(record.read_text()) == {
        "6.12": {"none": {"t": ["0", "a", ""]}, "full": {"t": ["1", "c", ""]}},
        "7.3": {"full": {"t": ["0", "d", ""]}}}
    assert not (tmp_path / "stock.json.partial").exists()


def test_record_stock_needs_selftests(tmp_path):
    proc = run_zdinit(tmp_path, "clear-check", "--record-stock")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().endswith("argument --record-stock: needs --selftests "
                                        "(see 'python3 -m zdinit clear-check --help')")


def test_a_kernel_runs_the_selftests_its_tree_has(tmp_path):
    """7.3 renamed hugepage-mmap and hugepage-mremap (hugetlb-*)."""
    mm = tmp_path / "tools/testing/selftests/mm"
    mm.mkdir(parents=True)
    for name in ("cow", "hugetlb-mmap", "hugetlb-mremap", "other"):
        (mm / f"{name}.c").write_text("")
    assert initramfs.huge_selftests(tmp_path) == (
        "hugetlb-mmap", "hugetlb-mremap", "cow")


def test_a_selftest_only_one_kernel_ran_is_an_error():
    same = {"cow": ("0", "pass:1", "")}
    with pytest.raises(ZdinitError, match="selftest gup preempt=full: "
                       "clear .* differs from clear-base None"):
        clear_checks.same_selftest_outcomes(
            {"clear-base": same, "clear": dict(same, gup=("0", "", ""))},
            "full")


def test_a_selftest_that_differs_from_stock_is_an_error():
    same = {name: ("0", "pass:1", "") for name in initramfs.HUGE_SELFTESTS}
    lines = clear_checks.same_selftest_outcomes(
        {"clear-base": same, "clear": dict(same)}, "none")
    assert len(lines) == len(initramfs.HUGE_SELFTESTS)
    worse = dict(same, cow=("1", "pass:433,fail:1", "cow_test;"))
    with pytest.raises(ZdinitError, match="selftest cow preempt=full: clear"):
        clear_checks.same_selftest_outcomes({"clear-base": same, "clear": worse}, "full")


def test_resummarize_puts_back_what_the_samples_give():
    """A stored record whose summary is stale (a vs_base from before it
    was the ratio of the medians shown, a max wait, a vs_base stock no
    longer gives) gets its samples' numbers, its fields in their place."""
    spec = scenarios.plan_clear(["2M"], "64M", loops=3)
    wait = [{"fault_ns": 9_000_000, "max_wait_ns": 3_000_000}]
    samples = {
        ("2M", "none", "6.12", "clear-base", "default"): entry([1.0] * 3),
        ("2M", "none", "6.12", "clear", "stream"): entry(
            [2.0] * 3, wait, demand=[0.5, 0.7, 0.6]),
    }
    fresh = clearing.runs_table(samples, [spec])
    stale = [dict(r) for r in fresh]
    ours, stock = (next(r for r in stale if r["kernel"] == kernel)
                   for kernel in ("clear", "clear-base"))
    stock["vs_base"] = {"speedup": 9.0, "ci95": [8.0, 10.0]}
    ours.update(median_gbps=7.0, max_wait_ms=1.0,
                vs_base={"speedup": 1.5, "ci95": [1.0, 2.0]},
                perf={"demand": dict(ours["perf"]["demand"],
                                     median_gbps=7.0)})
    again = clearing.resummarize(stale)
    assert again == fresh
    assert [list(r) for r in again] == [list(r) for r in fresh]
