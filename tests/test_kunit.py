"""zdinit.kunit.judge over kunit.py parse output as 6.12's kunit.py prints it."""
from zdinit.kernel import kunit

# Two suites: judge() must find every one of them.
SUITES = ("zone_device_memmap", "memory_hotplug_contiguity")

CLEAN = """[12:52:06] ============ zone_device_memmap (15 subtests) ============
[12:52:06] ============== [PASSED] zone_device_memmap ==============
[12:52:06] ======= memory_hotplug_contiguity (1 subtest) ========
[12:52:06] ======= [PASSED] memory_hotplug_contiguity ==========
[12:52:06] ============================================================
[12:52:06] Testing complete. Ran 16 tests: passed: 16
"""


def test_clean_run_is_one_normalised_line():
    assert kunit.judge(CLEAN, SUITES) == ("16 tests: 16 passed, 0 failed, "
                                  "0 crashed, 0 skipped")


def test_skips_are_counted_not_failed():
    out = CLEAN.replace("passed: 16", "passed: 15, skipped: 1")
    assert kunit.judge(out, SUITES).endswith("1 skipped")


def test_failures_crashes_and_errors_fail():
    for tail in ("passed: 15, failed: 1", "passed: 15, crashed: 1",
                 "passed: 16, errors: 1"):
        out = CLEAN.replace("passed: 16", tail)
        assert kunit.judge(out, SUITES) is None, tail


def test_nothing_passed_missing_summary_or_suite_fail():
    assert kunit.judge(CLEAN.replace("passed: 16", "skipped: 16"),
                       SUITES) is None
    assert kunit.judge(CLEAN.replace("Testing complete", "Testing"),
                       SUITES) is None
    assert kunit.judge(CLEAN.replace("zone_device_memmap", "other"),
                       SUITES) is None
    assert kunit.judge(CLEAN.replace("memory_hotplug_contiguity",
                                     "other"), SUITES) is None


def test_last_summary_counts():
    out = CLEAN.replace("passed: 16", "passed: 15, failed: 1") + CLEAN
    assert kunit.summary_counts(out)["failed"] == 0
