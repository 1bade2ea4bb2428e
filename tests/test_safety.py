"""zdinit.safety's judgement of guest check lines and its comparison of
the series with stock."""
import pytest

from conftest import DATA
from zdinit.checks import safety
from zdinit.families import scenarios
from zdinit.kernel import bases, initramfs
from zdinit.vm import console
from zdinit.errors import ZdinitError


def rows_for(kernel, line, job="ndctl-workflows"):
    """Rows as safety.run_job makes them from one guest check line."""
    check = console.parse(line).checks[0]
    ok, why = safety.judge(check)
    return [{"check": check["name"], "job": job, "kernel": kernel,
             "strategy": "-", "used": "-", "passed": ok, "detail": why,
             "raw": check}]


ALIGN = ("@@zdinit check name=ndctl-align result=pass strategy=- used=auto "
         "outcome=4K-align-4096-io-ok,2M-align-2097152-io-ok\n")


def test_same_outcome_as_stock_passes():
    rows = rows_for("base", ALIGN.replace("used=auto", "used=none")) \
        + rows_for("patched", ALIGN)
    safety.compare_with_stock(rows)
    assert all(r["passed"] for r in rows)
    assert rows[1]["detail"].endswith("same as stock")


def test_other_outcome_than_stock_fails_even_if_both_pass():
    rows = rows_for("base", ALIGN) + rows_for(
        "patched", ALIGN.replace("2M-align-2097152", "2M-align-4096"))
    safety.compare_with_stock(rows)
    assert rows[0]["passed"] and not rows[1]["passed"]
    assert "stock: pass 4K-align-4096" in rows[1]["detail"]


def test_a_failing_workflow_fails_on_its_own():
    row, = rows_for("base", ALIGN.replace("result=pass", "result=fail"))
    assert not row["passed"]


def test_a_check_the_series_does_not_report_fails():
    rows = rows_for("base", ALIGN) + rows_for(
        "patched", ALIGN.replace("ndctl-align", "ndctl-mode-cycle"))
    rows[1]["raw"]["outcome"] = rows[0]["raw"]["outcome"]
    safety.compare_with_stock(rows)
    missing = [r for r in rows if r["check"] == "ndctl-align"
               and r["kernel"] == "patched"]
    assert len(missing) == 1 and not missing[0]["passed"]
    assert missing[0]["detail"].startswith("not reported")


def test_every_ndctl_workflow_is_compared_with_stock():
    import re
    from conftest import ROOT
    guest = (ROOT / "guest/ndctl.sh").read_text()
    names = set(re.findall(r"check (ndctl-[a-z-]+) ", guest))
    assert names and names <= set(safety.SAME_AS_STOCK)


# MemFree after each of 50 churn cycles on stock 7.3 under TCG: single
# readings swing by about one 32 MiB memmap, freed late; nothing is lost.
STOCK_CHURN = [
    1477040, 1479444, 1489584, 1500888, 1467076, 1472648, 1464120, 1464680,
    1453076, 1457352, 1489532, 1478968, 1445948, 1494916, 1488908, 1491332,
    1458276, 1460360, 1485016, 1469260, 1469092, 1469092, 1500068, 1500072,
    1490576, 1492596, 1488660, 1489800, 1493320, 1497628, 1498004, 1465608,
    1465248, 1465836, 1489824, 1499520, 1465756, 1465504, 1467792, 1467120,
    1462260, 1465136, 1488996, 1501548, 1468572, 1489684, 1493456, 1493156,
    1468564, 1435876]


def churn(free):
    line = (f"@@zdinit check name=churn result=pass cycles={len(free)} "
            f"memfree_kb={','.join(map(str, free))} kmemleak=none\n")
    return safety.judge(console.parse(line).checks[0])


def test_churn_noise_of_late_frees_passes():
    ok, why = churn(STOCK_CHURN)
    assert ok, why
    # The last reading alone is 51 MiB below the first: not a leak.
    assert STOCK_CHURN[0] - STOCK_CHURN[-1] > safety.CHURN_TOLERANCE_KB


def test_churn_losing_a_fraction_of_a_memmap_each_cycle_fails():
    leak_kb = 1024       # a thirty-second of the namespace's memmap
    ok, why = churn([kb - i * leak_kb for i, kb in enumerate(STOCK_CHURN)])
    assert not ok and "below that of the first" in why


def test_churn_with_too_few_cycles_is_not_judged_a_pass():
    ok, why = churn(STOCK_CHURN[:2 * safety.CHURN_WINDOW - 1])
    assert not ok and "fewer than" in why
    assert churn(STOCK_CHURN[:2 * safety.CHURN_WINDOW])[0]


# ---- the boot-time bind ---------------------------------------------------
# tests/data/boot-bind-patched.log: the console of the boot-bind job on
# the series, its legacy pmem range of 393216 pages (24 MiB of struct
# pages) bound during boot with a 16 MiB L3 listed by the guest.
BOOT_LINE = ("memmap_init_zone_device initialised 393216 pages in 6120us, "
             "stream, 393216 struct pages written, 1 thread")
CACHES = ("@@zdinit cache cpu=0 index=0 level=1 type=Data size=64K\n"
          "@@zdinit cache cpu=0 index=1 level=1 type=Instruction size=64K\n"
          "@@zdinit cache cpu=0 index=2 level=2 type=Unified size=512K\n"
          "@@zdinit cache cpu=0 index=3 level=3 type=Unified size=16384K\n"
          "@@zdinit caches cpu=0 leaves=4\n")


def boot_bind(kernel="patched", edits=()):
    """The boot-time bind's row from the fixture with each (old, new)
    of edits made once."""
    text = (DATA / "boot-bind-patched.log").read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return safety.boot_bind_row(console.parse(text), kernel)


def test_boot_bind_that_takes_the_rule_strategy_passes():
    row = boot_bind()
    assert row["passed"] and row["used"] == "stream", row
    assert row["detail"] == ("393216 struct pages (24 MiB) written during "
                             "boot, LLC 16 MiB: the rule says stream, the "
                             "kernel took stream")


def test_boot_bind_with_the_wrong_strategy_fails():
    row = boot_bind(edits=[(", stream, ", ", template, ")])
    assert not row["passed"] and row["used"] == "template"
    assert "the rule says stream, the kernel took template" in row["detail"]


@pytest.mark.parametrize("edit", [
    # The range did not bind at boot: no line in the boot step.
    (BOOT_LINE, "pmem: nothing bound"),
    # A guest that did not copy the kernel log of the boot.
    ("@@zdinit begin phase=boot", "@@zdinit begin phase=first")])
def test_boot_bind_without_a_boot_time_line_fails_in_one_line(edit):
    row = boot_bind(edits=[edit])
    assert not row["passed"] and "\n" not in row["detail"]
    assert row["detail"].startswith(
        "0 memmap_init_zone_device lines in the kernel log before "
        "userspace, not 1: did the legacy pmem range (memmap=1536M!4G) bind "
        "during boot?")


def test_boot_bind_of_another_range_or_two_ranges_fails():
    other = boot_bind(edits=[("initialised 393216", "initialised 262144")])
    assert not other["passed"]
    assert other["detail"] == ("262144 pages bound during boot, the legacy "
                               "pmem range has 393216")
    two = boot_bind(edits=[(BOOT_LINE, f"{BOOT_LINE}\n@@kmsg {BOOT_LINE}")])
    assert not two["passed"] and two["detail"].startswith("2 memmap_init")


def test_boot_bind_without_an_llc_in_sysfs_uses_the_32_mib_default():
    """24 MiB of struct pages stream past the guest's 16 MiB L3, not past
    the 32 MiB the rule assumes when sysfs lists no cache."""
    no_llc = (CACHES, "@@zdinit caches cpu=0 leaves=0\n")
    row = boot_bind(edits=[no_llc])
    assert not row["passed"]
    assert ("no LLC in sysfs (the rule's default): the rule says template"
            in row["detail"])
    assert boot_bind(edits=[no_llc, (", stream, ", ", template, ")])["passed"]


def test_boot_bind_fails_where_the_guest_did_not_list_its_caches():
    row = boot_bind(edits=[(CACHES, "")])
    assert not row["passed"]
    assert row["detail"] == "the guest did not list its caches"


def test_boot_bind_on_stock_needs_the_line_and_shows_no_strategy():
    stock = ("in 6120us, stream, 393216 struct pages written, 1 thread",
             "in 16ms")
    row = boot_bind("base", edits=[stock])
    assert row["passed"] and (row["strategy"], row["used"]) == ("-", "-")
    assert row["detail"] == ("393216 pages bound during boot in 16 ms; stock "
                             "names no strategy")
    assert not boot_bind("base", edits=[(BOOT_LINE, "")])["passed"]
    # The series must name its strategy.
    row = boot_bind(edits=[stock])
    assert not row["passed"] and "names no strategy" in row["detail"]


def test_the_boot_bind_job_puts_its_range_on_guest_ram_above_4_gib():
    """QEMU's pc machine maps what exceeds 3 GiB from 4 GiB up: the range
    the command line takes must lie there, whole, and write at least
    the 16 MiB LLC of QEMU's TCG CPU in struct pages."""
    job, = [j for j in safety.REDUCED if j.scenario == "boot-bind"]
    assert job.judge_run is safety.boot_bind_row and job.nvdimms == 0
    assert "memmap=1536M!4G" in job.cmdline
    high_ram = (job.ram_mb - scenarios.HOTPLUG_LOW_RAM_MB) * safety.MiB
    assert safety.BOOT_PMEM_AT == 4 * safety.GiB
    assert safety.BOOT_PMEM_BYTES <= high_ram
    written = safety.BOOT_PMEM_BYTES // scenarios.PAGE * scenarios.STRUCT_PAGE
    assert 16 * safety.MiB <= written < 32 * safety.MiB


def test_the_guest_runs_the_boot_bind_job():
    from conftest import ROOT
    guest = (ROOT / "guest/scenario.sh").read_text()
    assert "boot-bind) boot_bind ;;" in guest
    assert "store-rule.sh" in initramfs.GUEST_SCRIPTS


HMM = ("@@zdinit check name=hmm-selftests result=pass strategy=auto used=none "
       "pass=25 fail=11 skip=42 error=0 failed=hmm.a,hmm.b, flaky=none\n")


def test_an_hmm_test_failing_in_one_run_only_is_flaky_not_an_outcome():
    rows = rows_for("base", HMM, job="hmm") + rows_for(
        "patched", HMM.replace("pass=25 fail=11", "pass=24 fail=12")
        .replace("flaky=none", "flaky=hmm.exclusive,"), job="hmm")
    safety.compare_with_stock(rows)
    assert all(r["passed"] for r in rows), rows
    assert "failed once only: hmm.exclusive" in rows[1]["detail"]


def test_an_hmm_test_failing_in_both_runs_on_the_series_alone_fails():
    rows = rows_for("base", HMM, job="hmm") + rows_for(
        "patched", HMM.replace("failed=hmm.a,hmm.b,",
                               "failed=hmm.a,hmm.b,hmm.exclusive,"), job="hmm")
    safety.compare_with_stock(rows)
    assert rows[0]["passed"] and not rows[1]["passed"]
    assert "stock: hmm.a,hmm.b," in rows[1]["detail"]


def test_the_held_build_job_runs_where_the_series_builds_on_demand():
    """The job that holds the background build back needs the kit's
    switch for it, which only a base with the on-demand part has."""
    def names(base, full):
        return {job.scenario for job in safety.jobs(bases.get(base), full)}

    for full in (False, True):
        assert "on-demand-held" in names("7.3", full)
        assert "on-demand-held" not in names("6.12", full)
        assert names("6.12", full) == names("7.3", full) - {"on-demand-held"}


@pytest.fixture
def record(tmp_path, monkeypatch):
    """STOCK_RECORD in a temporary directory, holding 7.3's outcomes as
    stock gives ALIGN and nothing else is checked."""
    path = tmp_path / "stock-safety.json"
    monkeypatch.setattr(safety, "STOCK_RECORD", path)
    monkeypatch.setattr(safety, "SAME_AS_STOCK",
                        {"ndctl-align": ("result", "outcome")})
    safety.record_stock(rows_for("stock", ALIGN), bases.get("7.3"))
    return path


def test_the_series_is_compared_with_stocks_recorded_outcomes(record):
    recorded = safety.recorded_outcomes(bases.get("7.3"))
    same, other = rows_for("patched", ALIGN), rows_for(
        "patched", ALIGN.replace("2M-align-2097152", "2M-align-4096"))
    safety.compare_with_stock(same, recorded)
    safety.compare_with_stock(other, recorded)
    assert same[0]["passed"] and \
        same[0]["detail"].endswith("same as stock (recorded)")
    assert not other[0]["passed"]
    assert "stock (recorded): pass 4K-align-4096" in other[0]["detail"]
    # A job that ran and did not report a recorded check fails too.
    silent = [dict(same[0], check="ndctl-mode-cycle")]
    safety.compare_with_stock(silent, recorded)
    assert silent[-1]["check"] == "ndctl-align" and not silent[-1]["passed"]


def test_a_base_without_a_record_is_refused_in_one_line(record):
    with pytest.raises(ZdinitError, match="records no stock outcomes for "
                       "base 6.12; record them with 'python3 -m zdinit "
                       "safety --base 6.12 --record-stock'"):
        safety.recorded_outcomes(bases.get("6.12"))


def test_a_run_that_boots_stock_checks_the_record(record):
    """Stock booted in a run must still give what is recorded: a
    different outcome fails the run, naming the check."""
    (row,) = safety.check_record(rows_for("stock", ALIGN), bases.get("7.3"))
    assert row["passed"] and row["check"] == "stock record"
    (row,) = safety.check_record(rows_for(
        "stock", ALIGN.replace("4K-align", "8K-align")), bases.get("7.3"))
    assert not row["passed"]
    assert row["detail"].startswith("ndctl-align: stock gave pass 8K-align")
    assert safety.check_record(rows_for("patched", ALIGN),
                               bases.get("7.3")) == []


def test_a_record_missing_a_check_is_not_written(record):
    before = record.read_text()
    with pytest.raises(ZdinitError, match="stock reported none of the "
                       "checks to record"):
        safety.record_stock(rows_for("patched", ALIGN), bases.get("7.3"))
    assert record.read_text() == before


def test_against_the_record_no_job_boots_stock():
    for full in (False, True):
        selected = safety.jobs(bases.get("7.3"), full, stock_record=True)
        assert selected and all("stock" not in job.kernels
                                for job in selected)
        assert {job.scenario for job in selected} == {
            job.scenario for job in safety.jobs(bases.get("7.3"), full)
            if job.kernels != ("stock",)}


def test_the_committed_record_holds_every_check_of_7_3():
    recorded = safety.recorded_outcomes(bases.get("7.3"))
    assert set(recorded) == set(safety.SAME_AS_STOCK)
