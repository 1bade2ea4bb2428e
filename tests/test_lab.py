"""The native lab: byte equality with the kernel's images, dispatch, ASan."""
import json
import os
import pathlib
import re
import subprocess

import pytest

from zdinit import paths
from zdinit.lab import clear_stores, memmap_stores, store_kinds
from zdinit.errors import ZdinitError


def cpuinfo_flags():
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def test_vectors_are_a_real_kernel_capture():
    text = memmap_stores.VECTORS.read_text()
    assert "captured from a QEMU guest" in text
    fields = dict(line.split(" ", 1) for line in text.splitlines()
                  if line and not line.startswith("#"))
    size = int(fields["struct_page_size"])
    for key in ("order0", "head", "tail1_2M", "tail1_1G", "tail"):
        assert len(fields[key].strip()) == 2 * size, key
    # The tail's compound_head word has bit 0 set (it points at a head).
    off = int(fields["head_ptr_offset"])
    word = bytes.fromhex(fields["tail"].strip())[off:off + 8]
    assert int.from_bytes(word, "little") & 1


@pytest.mark.parametrize("sanitized", [False, True], ids=["plain", "asan-ubsan"])
def test_every_strategy_writes_the_kernels_bytes(sanitized):
    out = memmap_stores.zdlab(["verify", str(memmap_stores.VECTORS)], sanitized=sanitized)
    m = re.search(r"(\d+) passed, (\d+) failed", out)
    assert m and int(m.group(1)) > 1000 and m.group(2) == "0", out


def test_truncated_vectors_are_refused(tmp_path):
    lines = memmap_stores.VECTORS.read_text().splitlines()
    (tmp_path / "short.txt").write_text("\n".join(lines[:-1]) + "\n")
    proc = subprocess.run([str(memmap_stores.binary()), "verify",
                           str(tmp_path / "short.txt")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "cannot read" in proc.stderr


def test_dispatcher_matches_cpuinfo():
    feats = memmap_stores.features()
    flags = cpuinfo_flags()
    supported = set(feats["supported"])
    assert ("avx512-vmovntdq" in supported) <= ("avx512f" in flags)
    assert ("avx2-vmovntdq" in supported) <= ("avx2" in flags)
    assert ("movdir64b" in supported) <= ("movdir64b" in flags or
                                          feats["cpu"]["movdir64b"])
    assert {"slow", "template-u64", "template-memcpy"} <= supported


def test_masked_features_are_never_used():
    env = dict(os.environ, ZDLAB_MASK="avx512f,avx2,movdir64b")
    feats = json.loads(memmap_stores.zdlab(["features"], env=env))
    assert not {"avx512-vmovntdq", "avx2-vmovntdq", "movdir64b"} & set(feats["supported"])
    out = json.loads(memmap_stores.zdlab(["bench", str(memmap_stores.VECTORS), "--sizes", "1M",
                                "--reps", "1", "--strategies",
                                "avx512-vmovntdq,sse2-movntdq"], env=env))
    by = {r["strategy"]: r for r in out["runs"]}
    assert by["avx512-vmovntdq"].get("unsupported") is True
    assert by["sse2-movntdq"]["median_ns"] > 0
    assert by["sse2-movntdq"]["floor_by"] not in ("avx512-vmovntdq",
                                                  "avx2-vmovntdq", "movdir64b")


def test_bad_lab_options_are_one_line_errors():
    for args, message in [(["bench", str(memmap_stores.VECTORS), "--sizes", "0"], "bad size"),
                          (["bench", str(memmap_stores.VECTORS), "--geometry", "3M"], "unknown geometry"),
                          (["bench", str(memmap_stores.VECTORS), "--threads", "0"], "--threads"),
                          (["bench", str(memmap_stores.VECTORS), "--sizes", ","],
                           "empty item in list ','"),
                          (["bench", str(memmap_stores.VECTORS), "--sizes", "1M,,2M"],
                           "empty item in list '1M,,2M'"),
                          (["bench", str(memmap_stores.VECTORS), "--states", ""],
                           "empty item in list ''"),
                          (["clear", "bench", "--extents", ","],
                           "empty item in list ','"),
                          (["verify", "/nonexistent"], "cannot read")]:
        proc = subprocess.run([str(memmap_stores.binary())] + args, capture_output=True,
                              text=True)
        assert proc.returncode == 2
        assert message in proc.stderr and len(proc.stderr.splitlines()) == 1


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["help"],
                                  ["clear", "--help"]])
def test_lab_help_is_usage_on_stdout(args):
    proc = subprocess.run([str(memmap_stores.binary())] + args, capture_output=True,
                          text=True)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("usage: zdlab ")


def test_recommendation_finds_the_crossover():
    def run(state, size, strategy, ns):
        return {"state": state, "memmap_bytes": size, "strategy": strategy,
                "median_ns": ns}
    runs = [run("cold", 1, "template-u64", 10), run("cold", 1, "sse2-movntdq", 12),
            run("cold", 2, "template-u64", 20), run("cold", 2, "sse2-movntdq", 15),
            run("cold", 4, "template-u64", 40), run("cold", 4, "sse2-movntdq", 25)]
    rec = memmap_stores.stream_crossover(runs, memmap_stores.features()["strategies"])["cold"]
    assert rec["stream_wins_from_bytes"] == 2
    assert rec["best_at_largest"] == "sse2-movntdq"


# ---- huge-page clearing (zdlab clear, zdinit/lab/clear_stores.py) ---------------

CLEAR_METHODS = {"page-stosb", "page-stosq", "page-movq", "extent-stosb",
                 "extent-stosq", "clzero", "movnti", "sse2-movntdq",
                 "avx2-vmovntdq", "avx512-vmovntdq"}


def verify_counts(out):
    m = re.search(r"(\d+) passed, (\d+) failed", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("sanitized", [False, True], ids=["plain", "asan-ubsan"])
def test_every_clearing_method_zeroes_exactly_its_range(sanitized):
    out = memmap_stores.zdlab(["clear", "verify"], sanitized=sanitized)
    passed, failed = verify_counts(out)
    ran = set(out.splitlines()[0].split()[1:])
    assert ran == set(memmap_stores.features()["clear_supported"])
    assert failed == 0 and passed >= 400 * len(ran), out


@pytest.mark.parametrize("mutant", ["short", "over"])
def test_clear_verify_catches_a_broken_method(mutant):
    """lab/Makefile builds SSE2 clearing one line short or one line over."""
    if "sse2-movntdq" not in memmap_stores.features()["clear_supported"]:
        pytest.skip("no SSE2 streaming stores here")
    binary = paths.LAB / "build" / f"zdlab-mutant-{mutant}"
    build = subprocess.run(["make", "-s", "-C", str(paths.LAB),
                            f"build/zdlab-mutant-{mutant}"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    proc = subprocess.run([str(binary), "clear", "verify"],
                          capture_output=True, text=True)
    passed, failed = verify_counts(proc.stdout)
    assert proc.returncode == 1 and failed > 0
    broken = {line.split()[1] for line in proc.stderr.splitlines()
              if line.startswith("FAIL")}
    assert broken == {"sse2-movntdq"}


def test_dispatcher_offers_clearing_methods_by_cpuinfo():
    feats = memmap_stores.features()
    flags = cpuinfo_flags()
    offered = set(feats["clear_supported"])
    assert offered <= CLEAR_METHODS
    assert ("clzero" in offered) == ("clzero" in flags)
    assert ("extent-stosb" in offered) == ("erms" in flags)
    assert ("avx512-vmovntdq" in offered) <= ("avx512f" in flags)
    assert {"page-stosq", "page-movq", "extent-stosq"} <= offered


def test_masked_clearing_methods_are_never_run():
    masked = {"clzero", "avx512-vmovntdq", "avx2-vmovntdq", "extent-stosb",
              "page-stosb"}
    env = dict(os.environ, ZDLAB_MASK="clzero,avx512f,avx2,erms")
    feats = json.loads(memmap_stores.zdlab(["features"], env=env))
    assert not masked & set(feats["clear_supported"])
    ran = memmap_stores.zdlab(["clear", "verify"], env=env).splitlines()[0].split()[1:]
    assert not masked & set(ran)
    out = json.loads(memmap_stores.zdlab(
        ["clear", "bench", "--extents", "2M", "--region", "4M", "--reps", "1",
         "--states", "cold", "--methods",
         "clzero,avx512-vmovntdq,extent-stosb,extent-stosq"], env=env))
    by = {r["method"]: r for r in out["runs"]}
    assert by["clzero"].get("unsupported") is True
    assert by["avx512-vmovntdq"].get("unsupported") is True
    assert by["extent-stosb"].get("unsupported") is True
    assert by["extent-stosq"]["median_ns"] > 0
    fault = json.loads(memmap_stores.zdlab(
        ["clear", "fault", "--methods", "clzero,page-stosq", "--touch", "4K",
         "--pool", "2", "--reps", "1"], env=env))
    assert [r["method"] for r in fault["runs"]
            if r.get("unsupported")] == ["clzero"]


def test_clear_bench_reports_thp_backing_and_spread():
    enabled = pathlib.Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not enabled.exists() or "[never]" in enabled.read_text():
        pytest.skip("THP disabled here")
    out = json.loads(memmap_stores.zdlab(["clear", "bench", "--extents", "2M",
                                "--region", "16M", "--reps", "3", "--methods",
                                "page-stosq,extent-stosq"]))
    runs = out["runs"]
    assert {(r["state"], r["method"], r["extent_bytes"]) for r in runs} == {
        (s, "page-stosq", 4096) for s in ("cold", "hot")} | {
        (s, "extent-stosq", 2 << 20) for s in ("cold", "hot")}
    for r in runs:
        assert 0 < r["thp_bytes"] <= r["region_bytes"] == 16 << 20
        assert len(r["samples_ns"]) == 3
        assert r["gb_per_s_min"] <= r["gb_per_s"] <= r["gb_per_s_max"]
        # CPU time never runs ahead of the wall clock but for the two
        # CPU-clock reads around it: system calls outside the wall-clock
        # window, which in this host's VM now and then take 10-20 us each.
        assert r["cpu_median_ns"] <= r["median_ns"] * 1.01 + 40000


def test_unavailable_hugetlb_says_why():
    pool = pathlib.Path("/sys/kernel/mm/hugepages/hugepages-1048576kB")
    if pool.exists() and int((pool / "free_hugepages").read_text()):
        pytest.skip("a 1G page is free here")
    out = json.loads(memmap_stores.zdlab(["clear", "bench", "--extents", "2M",
                                "--region", "2M", "--backings", "hugetlb-1G",
                                "--reps", "1"]))
    (row,) = out["runs"]
    assert row["unavailable"] is True and "needed" in row["why"] or \
        "no 1048576 kB hugetlb pool" in row["why"]


def test_bad_clear_options_are_one_line_errors():
    for args, message in [
            (["clear", "bench", "--extents", "3M", "--region", "4M"],
             "does not divide"),
            (["clear", "bench", "--methods", "rep-movsb"], "unknown method"),
            (["clear", "bench", "--backings", "hugetlb-2G"], "unknown backing"),
            (["clear", "bench", "--touch", "4K"], "takes no --touch"),
            (["clear", "fault", "--extents", "2M"], "takes no --extents"),
            (["clear", "fault", "--touch", "4M"], "not whole lines"),
            (["clear", "fault", "--touch", "100"], "not whole lines"),
            (["clear", "fault", "--radius", "512"], "--radius"),
            (["clear", "fault", "--backings", "anon-thp,hugetlb"],
             "one backing"),
            (["clear", "bench", "--reps", "0"], "--reps"),
            (["clear", "frobnicate"], "usage")]:
        proc = subprocess.run([str(memmap_stores.binary())] + args, capture_output=True,
                              text=True)
        assert proc.returncode == 2, args
        assert message in proc.stderr and len(proc.stderr.splitlines()) == 1


def clear_run(method, extent, gbps, state="cold", backing="anon-thp",
              wall=None):
    """Wall-clock rates as if descheduled: the CPU-time ones rule."""
    return {"backing": backing, "state": state, "method": method,
            "extent_bytes": extent, "gb_per_s": wall or gbps / 2,
            "cpu_gb_per_s": gbps, "median_ns": 1}


def test_clear_recommendation_batch_threshold_and_ratios():
    M = 1 << 20
    runs = [clear_run("page-stosb", 4096, 10.0),
            clear_run("extent-stosb", 2 * M, 20.0, wall=5.0),
            clear_run("extent-stosb", 8 * M, 30.0),
            clear_run("extent-stosb", 32 * M, 49.0),
            clear_run("extent-stosb", 1024 * M, 50.0),
            clear_run("clzero", 2 * M, 15.0),
            clear_run("clzero", 8 * M, 40.0),
            clear_run("clzero", 32 * M, 45.0),
            clear_run("avx2-vmovntdq", 1024 * M, 52.0),
            clear_run("extent-stosq", 2 * M, 60.0, state="hot")]
    rec = clear_stores.recommend(runs, memmap_stores.features()["clear_methods"])
    cold = rec["anon-thp/cold"]
    assert cold["batch_bytes"] == 32 * M          # 49 >= 0.95 * 50
    assert cold["stream_wins_from_bytes"] == 8 * M
    assert cold["stream_wins_by_extent"] == {
        str(2 * M): False, str(8 * M): True, str(32 * M): False,
        str(1024 * M): True}
    ratios = cold["ratios"]
    assert ratios["best_2M"] == "extent-stosb"
    assert ratios["vs_upstream_2M"] == 1.0 and ratios["vs_stock_4K"] == 2.0
    assert ratios["vs_upstream_2M_meets_goal"] is False
    hot = rec["anon-thp/hot"]
    assert hot["batch_bytes"] is None and "vs_upstream_2M" not in hot["ratios"]


def test_a_clearing_method_only_the_table_lists_is_ranked():
    """A streaming method that the lab's table lists and no code of the
    harness names: the best at 2 MB, and refused by a table without it."""
    M = 1 << 20
    methods = memmap_stores.features()["clear_methods"]
    runs = [clear_run("extent-stosb", 2 * M, 20.0),
            clear_run("avx10-vmovntdq", 2 * M, 60.0)]
    cold = clear_stores.recommend(runs, methods + [
        row("avx10-vmovntdq", "streaming")])["anon-thp/cold"]
    assert cold["ratios"]["best_2M"] == "avx10-vmovntdq"
    assert cold["stream_wins_from_bytes"] == 2 * M
    with pytest.raises(ZdinitError, match="the clearing sweep measured "
                       "avx10-vmovntdq, which no row"):
        clear_stores.recommend(runs, methods)


# ---- the lab's tables of stores (zdlab features) --------------------------

@pytest.mark.parametrize("mask", ["", "sse2,avx2,avx512f,erms,clzero"])
def test_features_list_every_store_with_its_row(mask):
    """Every strategy and clearing method is a row of a known kind, which
    this CPU runs exactly where it has the feature the row needs; the
    lists of supported names are the rows'."""
    feats = json.loads(memmap_stores.zdlab(["features"],
                                 env=dict(os.environ, ZDLAB_MASK=mask)))
    cpu = feats["cpu"]
    for table, kinds, supported in [
            ("strategies", store_kinds.STRATEGY_KINDS, "supported"),
            ("clear_methods", store_kinds.CLEAR_KINDS, "clear_supported")]:
        rows = feats[table]
        assert {r["kind"] for r in rows} == set(kinds)
        for r in rows:
            assert r["supported"] is (r["needs"] is None or cpu[r["needs"]])
        assert feats[supported] == [r["name"] for r in rows
                                    if r["supported"]]
    for feature in filter(None, mask.split(",")):
        assert cpu[feature] is False


def test_every_zdlab_output_records_the_table_it_ran_with():
    feats = memmap_stores.features()
    bench = json.loads(memmap_stores.zdlab(["bench", str(memmap_stores.VECTORS), "--sizes",
                                  "1M", "--reps", "1", "--strategies",
                                  "template-u64"]))
    assert bench["strategies"] == feats["strategies"]
    clear = json.loads(memmap_stores.zdlab(["clear", "bench", "--extents", "2M",
                                  "--region", "2M", "--states", "hot",
                                  "--reps", "1", "--methods",
                                  "extent-stosq"]))
    fault = json.loads(memmap_stores.zdlab(["clear", "fault", "--methods",
                                  "page-stosq", "--touch", "4K", "--pool",
                                  "2", "--reps", "1"]))
    assert clear["clear_methods"] == fault["clear_methods"] == \
        feats["clear_methods"]


def test_the_kernels_clearing_methods_are_rows_of_their_kind():
    """The clearing rule names upstream's method, 6.12's and the streaming
    ones the kernel's clear_pages_stream() picks: each a row of the lab's
    table of the kind it stands for."""
    kind = {r["name"]: r["kind"] for r in memmap_stores.features()["clear_methods"]}
    assert kind[clear_stores.UPSTREAM] == store_kinds.CACHED_EXTENT
    assert kind[clear_stores.STOCK] == store_kinds.PER_PAGE
    assert {kind[clear_stores.stream_method({"clzero": c})]
            for c in (True, False)} == {store_kinds.STREAMING}


# ---- the clearing rule (clear_stores.clear_choice) ---------------------------

ZEN3 = {"family": 25, "model_id": 1, "clzero": True, "l2_kb": 512}
ZEN4 = {"family": 25, "model_id": 17, "clzero": True}
XEON = {"family": 6, "model_id": 207, "clzero": False}


def test_clear_rule_streams_from_the_l2_only_where_the_cpu_is_opted_in():
    M = 1 << 20
    away_2m = 2 * M - 4096 * 5      # a 2 MB THP's runs away from the fault
    assert clear_stores.clear_choice(away_2m, M // 2, ZEN3) == "clzero"
    assert clear_stores.clear_choice(M // 2 - 4096, M // 2, ZEN3) == \
        "extent-stosb"
    assert clear_stores.clear_choice(1 << 30, 0, ZEN3) == "extent-stosb"
    # Zen 3 hiding CLZERO, Zen 4, the Xeon: never, whatever the size.
    for cpu in (dict(ZEN3, clzero=False), ZEN4, XEON):
        assert clear_stores.clear_choice(1 << 30, M, cpu) == "extent-stosb"
    # The Zen 3 measured, model 01h of family 19h, and no other model.
    assert [m for m in range(0x100)
            if clear_stores.opted_in(dict(ZEN3, model_id=m))] == [0x01]
    # A run's own l2_kb first; the committed CPUs' L2 where it has none.
    assert clear_stores.l2_bytes(dict(XEON, l2_kb=1024)) == M
    assert clear_stores.l2_bytes(XEON) == 2 * M
    assert clear_stores.l2_bytes({"family": 1, "model_id": 1}) == 0


def committed_verdicts():
    """{run: (streaming pays there, the kernel streams there)}."""
    return {name: (clear_stores.streaming_pays(runs, cpu),
                   clear_stores.opted_in(cpu))
            for name, (cpu, runs) in
            memmap_stores.committed_fault_runs().items()}


def test_the_kernel_streams_by_default_where_a_committed_run_shows_it_pays():
    """Every committed clear and touch run: streamed, the clear plus a
    full read and a full write of a 2 MB page were both faster exactly on
    the CPUs the kernel opts in (X86_FEATURE_CLEAR_PAGES_STREAM)."""
    verdicts = committed_verdicts()
    assert {"lab-clear/lab.json", "lab-xeon-emr-16cpu/zdlab/fault.json",
            "lab-zen3/run1/lab.json", "lab-zen3/run2/lab.json",
            "lab-zen3-clear-fault/fault-1.json",
            "lab-zen3-clear-fault/fault-2.json",
            "lab-zen3-clear-fault/fault-3.json",
            "lab-xeon-model167-2cpu/lab.json"} <= set(verdicts)
    assert all(pays is not None for pays, _ in verdicts.values())
    assert {name: v for name, v in verdicts.items() if v[0] != v[1]} == {}
    assert verdicts["lab-zen3-clear-fault/fault-1.json"] == (True, True)
    assert verdicts["lab-clear/lab.json"] == (False, False)


@pytest.mark.parametrize("wrong,caught", [
    (lambda cpu: True, "lab-xeon-emr-16cpu/zdlab/fault.json"),
    (lambda cpu: bool(cpu.get("clzero")), "lab-clear/lab.json"),
    (lambda cpu: False, "lab-zen3-clear-fault/fault-1.json"),
], ids=["every-cpu", "every-clzero-cpu", "never"])
def test_a_wrong_opt_in_is_caught(monkeypatch, wrong, caught):
    monkeypatch.setattr(clear_stores, "opted_in", wrong)
    verdicts = committed_verdicts()
    assert verdicts[caught][0] != verdicts[caught][1]


def capability_lines(series_dir):
    """(function of the hunk, added line, the added line before it) of
    every line the series adds that names X86_FEATURE_CLEAR_PAGES_STREAM."""
    out = []
    for patch in sorted(series_dir.glob("0*.patch")):
        func, prev = "", ""
        for line in patch.read_text().splitlines():
            if line.startswith("@@"):
                func, prev = line.split("@@")[2].strip(), ""
            elif line.startswith("+") and not line.startswith("+++"):
                code = line[1:].strip()
                if code.startswith(("*", "/*", "#define")):
                    continue
                if "X86_FEATURE_CLEAR_PAGES_STREAM" in code:
                    out.append((func, code, prev))
                prev = code
    return out


@pytest.mark.parametrize("base", ["7.3", "6.12"])
def test_opted_in_is_what_the_clear_series_sets(base):
    """opted_in() mirrors the kernel: the capability is set in
    init_amd_zen3() alone, only on model 01h with CLZERO, and it alone lets
    clear_pages_stream_threshold() give a size."""
    lines = capability_lines(paths.PATCHES / f"linux-{base}-clear")
    assert sorted(lines) == sorted([
        ("static void init_amd_zen3(struct cpuinfo_x86 *c)",
         "set_cpu_cap(c, X86_FEATURE_CLEAR_PAGES_STREAM);",
         "if (c->x86_model == 0x01 && cpu_has(c, X86_FEATURE_CLZERO))"),
        ("int populate_cache_leaves(unsigned int cpu)",
         "if (!boot_cpu_has(X86_FEATURE_CLEAR_PAGES_STREAM))",
         "return -ENODEV;")]), lines


def test_a_run_without_a_full_read_and_write_judges_nothing():
    def row(method, access, ns):
        return {"method": method, "access": access, "touch_bytes": 2 << 20,
                "order": "neighbourhood-last", "median_ns": ns,
                "cpu_median_ns": ns}
    runs = [row("extent-stosb", "read", 200e3), row("clzero", "read", 150e3)]
    assert clear_stores.streaming_pays(runs, ZEN3) is None
    runs += [row("extent-stosb", "write", 200e3), row("clzero", "write", 201e3)]
    assert clear_stores.streaming_pays(runs, ZEN3) is False
    rule = clear_stores.clear_rule(runs, ZEN3)
    assert "disagrees" in clear_stores.clear_rule_lines(rule)[-1]
    quick = clear_stores.clear_rule(runs, ZEN3, quick=True)
    assert quick["streaming_pays"] is None
    assert "not judged" in clear_stores.clear_rule_lines(quick)[0]


def test_streaming_a_2m_page_costs_a_task_that_reads_it_all_at_once():
    """Why the clearing rule keeps REP STOSB below the L2: on the Xeon a
    2 MB page streamed is faster to touch first and slower to read
    whole, the lines coming from memory instead of the cache."""
    fault = json.loads((paths.COMMITTED_RESULTS / "lab-xeon-emr-16cpu/zdlab/fault.json")
                       .read_text())["runs"]
    us = {(r["method"], r["access"], r["touch_bytes"]): r["median_ns"] / 1e3
          for r in fault if r.get("order") == "plain"}
    assert us["movnti", "read", 4096] < 0.8 * us["extent-stosb", "read", 4096]
    assert us["movnti", "read", 2 << 20] > 1.2 * us["extent-stosb", "read",
                                                    2 << 20]


def test_features_report_the_l2_from_sysfs():
    cache = pathlib.Path("/sys/devices/system/cpu/cpu0/cache")
    l2 = [d for d in cache.glob("index*")
          if (d / "level").read_text().strip() == "2"
          and (d / "type").read_text().strip() != "Instruction"]
    want = int((l2[0] / "size").read_text().strip().rstrip("K")) if l2 else 0
    assert memmap_stores.features()["cpu"]["l2_kb"] == want


def test_fault_summary_names_the_fastest_and_the_neighbourhood_gain():
    def row(method, order, ns):
        return {"method": method, "access": "read", "touch_bytes": 4096,
                "order": order, "median_ns": 9e9, "cpu_median_ns": ns}
    out = clear_stores.fault_summary([row("clzero", "plain", 30e3),
                                   row("clzero", "neighbourhood-last", 29e3),
                                   row("extent-stosb", "plain", 70e3),
                                   {"method": "movnti", "unsupported": True}])
    cell = out["read"]["4096"]
    assert cell["fastest"] == "clzero neighbourhood-last"
    assert cell["neighbourhood_saves_us"] == {"clzero": 1.0}


def test_hugetlb_pool_grows_and_restores(tmp_path):
    pool = tmp_path / "hugepages-2048kB"
    pool.mkdir()
    (pool / "nr_hugepages").write_text("4\n")
    (pool / "free_hugepages").write_text("1\n")
    with pytest.raises(RuntimeError):
        with clear_stores.hugetlb_pool({2048: 8, 1048576: 1}, root=tmp_path) as added:
            assert added == {2048: 7}
            assert (pool / "nr_hugepages").read_text().strip() == "11"
            raise RuntimeError("the sweep failed")
    assert (pool / "nr_hugepages").read_text().strip() == "4"


def test_hugetlb_pool_refusal_is_an_error(tmp_path, monkeypatch):
    pool = tmp_path / "hugepages-2048kB"
    pool.mkdir()
    (pool / "nr_hugepages").write_text("0\n")
    (pool / "free_hugepages").write_text("0\n")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(pathlib.Path, "write_text", refuse)
    with pytest.raises(ZdinitError, match="cannot grow .*Permission denied"):
        with clear_stores.hugetlb_pool({2048: 1}, root=tmp_path):
            pass


def test_sweeps_fit_the_llc_and_name_the_issue_extents():
    full = clear_stores.sweeps(False, 32 << 20)
    cold = full["clear-cold"]
    assert cold[cold.index("--region") + 1] == "1G"
    assert {"2M", "8M", "32M", "1G"} <= set(
        cold[cold.index("--extents") + 1].split(","))
    hot = full["clear-hot"]
    assert hot[hot.index("--region") + 1] == "16M"
    assert hot[hot.index("--extents") + 1] == "2M,8M,16M"
    tiny = clear_stores.sweeps(True, 2 << 20)["clear-hot"]
    assert tiny[tiny.index("--extents") + 1] == "2M"


def row(name, kind, needs=None):
    """One row of a table of `zdlab features`, supported here."""
    return {"name": name, "kind": kind, "needs": needs, "supported": True}


def fake_zdlab(args, sanitized=False, env=None):
    """Canned zdlab answers, enough for memmap_stores.run() to write its files."""
    if args[0] == "features":
        return json.dumps({"cpu": {"model": "fake", "family": 1,
                                   "model_id": 2, "llc_kb": 32768},
                           "strategies": [row("template-u64", "cached")],
                           "clear_methods": [row("extent-stosq",
                                                 "cached-extent")],
                           "supported": ["template-u64"],
                           "clear_supported": ["extent-stosq"]})
    if args[0] == "bench":
        return json.dumps({"geometry": "order0", "runs": [
            {"backing": "anon-thp", "state": "cold", "threads": 1,
             "strategy": "template-u64", "memmap_bytes": 1 << 20,
             "median_ns": 5, "ns_per_page": 1.0, "gb_per_s": 1.0,
             "of_floor": 1.0}]})
    if args[1] == "bench":
        return json.dumps({"runs": [
            {"backing": "anon-thp", "state": "cold", "method": "extent-stosq",
             "extent_bytes": 2 << 20, "region_bytes": 2 << 20,
             "median_ns": 5, "gb_per_s": 1.0, "gb_per_s_min": 0.9,
             "gb_per_s_max": 1.1, "samples_ns": [5], "cpu_median_ns": 5,
             "cpu_gb_per_s": 1.0}]})
    return json.dumps({"backing": "anon-thp", "runs": [
        {"method": "extent-stosq", "access": "read", "touch_bytes": 4096,
         "order": "plain", "median_ns": 5, "clear_median_ns": 4,
         "cpu_median_ns": 5, "samples_ns": [5]}]})


def test_a_failing_plot_is_one_warning_and_keeps_the_results(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(memmap_stores, "zdlab", fake_zdlab)

    def broken(*args):
        raise ValueError("no display\nsecond line")
    monkeypatch.setattr(clear_stores, "plot", broken)
    monkeypatch.setattr(memmap_stores, "plot", broken)
    out = memmap_stores.run(quick=True, out_root=tmp_path)
    final = tmp_path / "latest"
    data = json.loads((final / "lab.json").read_text())
    assert data["clear"]["bench"][0]["method"] == "extent-stosq"
    assert "extent-stosq" in (final / "lab.txt").read_text()
    warnings = [line for line in capsys.readouterr().err.splitlines()
                if "warning" in line]
    assert len(warnings) == 2 and all("ValueError: no display" in w
                                      for w in warnings)
    assert "results:" in out


def test_a_lab_run_records_the_tables_it_ran_with(tmp_path, monkeypatch):
    """lab.json keeps the rows its runs were classified by, for whoever
    reads it with another checkout's lab."""
    monkeypatch.setattr(memmap_stores, "zdlab", fake_zdlab)
    monkeypatch.setattr(memmap_stores, "plot", lambda *args: None)
    monkeypatch.setattr(clear_stores, "plot", lambda *args: None)
    memmap_stores.run(quick=True, out_root=tmp_path)
    data = json.loads((tmp_path / "latest" / "lab.json").read_text())
    feats = json.loads(fake_zdlab(["features"]))
    assert data["strategies"] == feats["strategies"]
    assert data["clear_methods"] == feats["clear_methods"]


def test_a_second_lab_run_is_refused(tmp_path):
    with memmap_stores.one_run_at_a_time(tmp_path):
        with pytest.raises(ZdinitError, match="another lab run"):
            with memmap_stores.one_run_at_a_time(tmp_path):
                pass


def test_threads_to_saturate_is_the_fewest_reaching_ninety_percent():
    runs = [{"strategy": "movnti", "threads": t, "gb_per_s": v}
            for t, v in ((1, 20.0), (2, 26.0), (4, 29.0), (8, 30.0))]
    runs += [{"strategy": "slow", "threads": t, "gb_per_s": v}
             for t, v in ((1, 10.0), (2, 20.0), (4, 40.0), (8, 39.0))]
    assert memmap_stores.threads_to_saturate(runs) == {"movnti": 4, "slow": 4}
    runs[1]["gb_per_s"] = 28.0     # 2 threads now reach 90% of 30
    assert memmap_stores.threads_to_saturate(runs)["movnti"] == 2
