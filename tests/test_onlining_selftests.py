"""The kernel's own onlining selftests in the safety set: what the guest
makes of their output (guest/onlining-selftests.sh, run here under
busybox sh as in the guest), the comparison with stock, and what the
initramfs takes from a kernel tree."""
import shutil
import subprocess

import pytest

from conftest import ROOT
from zdinit.checks import safety
from zdinit.kernel import initramfs
from zdinit.vm import console
from zdinit.errors import ZdinitError

GUEST = ROOT / "guest/onlining-selftests.sh"

# dax-kmem-hotplug.sh's KTAP output, shortened, as 7.3 prints it.
DAX_KTAP = """TAP version 13
# using dax0.0 (initial state was: unplugged)
1..4
ok 1 online_movable: state=online_movable, MemTotal 1 -> 2 kB
not ok 2 online_movable idempotent: rc=1 state=unplugged
ok 3 reject invalid state string
ok 4 unbind while online # SKIP set DAX_KMEM_TEST_UNBIND=1
# Totals: pass:2 fail:1 xfail:0 xpass:0 skip:1 error:0
"""

# mem-on-off-test.sh's output, as bash prints it: stdout and stderr.
MEM_ON_OFF = """Test scope: 2% hotplug memory
\t online all hot-pluggable memory in offline state:
offline->online memory40
offline->online memory41
\t offline 2% hot-pluggable memory in online state
\t trying to offline 1 out of 42 memory block(s):
online->offline memory0
-> Failure
online->offline memory1
-> Success
\t online all hot-pluggable memory in offline state:
online_memory_expect_fail 41: unexpected success
\t\t FAILED - unable to offline some memory blocks, device busy?
"""


def guest_function(function, text, tmp_path):
    """What function of the guest file prints for a file holding text."""
    busybox = shutil.which("busybox")
    if not busybox:
        pytest.skip("busybox not installed (make test installs it)")
    log = tmp_path / "out.txt"
    log.write_text(text)
    proc = subprocess.run([busybox, "sh", "-c", f'. "{GUEST}"; {function} "{log}"'],
                          capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def test_ktap_outcome_names_each_test_by_number_and_result(tmp_path):
    assert guest_function("ktap_outcome", DAX_KTAP, tmp_path) == \
        "1:ok,2:fail,3:ok,4:skip"


def test_ktap_outcome_of_a_log_without_results_is_none(tmp_path):
    assert guest_function("ktap_outcome", "1..0 # SKIP no device\n",
                          tmp_path) == "none"


def test_verdict_lines_keep_verdicts_without_block_numbers(tmp_path):
    out = guest_function("verdict_lines", MEM_ON_OFF, tmp_path)
    assert out == ("FAILED_-_unable_to_offline_some_memory_blocks_device_busy?,"
                   "online_memory_expect_fail_N:_unexpected_success")


def test_verdict_lines_differ_where_a_test_fails_differently(tmp_path):
    stock = guest_function("verdict_lines", MEM_ON_OFF, tmp_path)
    other = guest_function("verdict_lines", MEM_ON_OFF.replace(
        "unexpected success", "unexpected online"), tmp_path)
    assert stock != other


def rows(kernel, line):
    check = console.parse(line).checks[0]
    ok, why = safety.judge(check)
    return [{"check": check["name"], "job": "onlining-selftests",
             "kernel": kernel, "strategy": "-", "used": "-", "passed": ok,
             "detail": why, "raw": check}]


DAX_LINE = ("@@zdinit check name=kselftest-dax-kmem result=pass strategy=- "
            "used=none rc=0 outcome=1:ok,2:ok,3:ok\n")


def test_the_series_with_stocks_selftest_outcome_passes():
    both = rows("base", DAX_LINE) + rows("patched", DAX_LINE)
    safety.compare_with_stock(both)
    assert all(r["passed"] for r in both)
    assert both[1]["detail"] == "exit status 0, 1:ok, 2:ok, 3:ok, same as stock"


@pytest.mark.parametrize("edit", [("2:ok", "2:fail"), ("rc=0", "rc=1")])
def test_a_selftest_outcome_other_than_stocks_fails(edit):
    both = rows("base", DAX_LINE) + rows("patched", DAX_LINE.replace(*edit))
    safety.compare_with_stock(both)
    assert both[0]["passed"] and not both[1]["passed"]


def test_a_selftest_the_series_does_not_report_fails():
    mem_on_off = DAX_LINE.replace("kselftest-dax-kmem", "kselftest-mem-on-off")
    both = rows("base", DAX_LINE) + rows("patched", mem_on_off) \
        + rows("base", mem_on_off)
    safety.compare_with_stock(both)
    missing = [r for r in both if r["check"] == "kselftest-dax-kmem"
               and r["kernel"] == "patched"]
    assert len(missing) == 1 and not missing[0]["passed"]


def test_every_selftest_check_the_guest_reports_is_compared_with_stock():
    import re
    names = set(re.findall(r"check (kselftest-[a-z-]+) ", GUEST.read_text()))
    assert names == {"kselftest-dax-kmem", "kselftest-mem-on-off"}
    assert names <= set(safety.SAME_AS_STOCK)
    job, = [j for j in safety.REDUCED if j.scenario == "onlining-selftests"]
    assert job.kernels == ("stock", "patched") and job in safety.FULL
    assert "onlining-selftests) onlining_selftests ;;" in \
        (ROOT / "guest/scenario.sh").read_text()
    assert "onlining-selftests.sh" in initramfs.GUEST_SCRIPTS


def fake_tree(tmp_path, names):
    selftests = tmp_path / "tree/tools/testing/selftests"
    for name in names:
        (selftests / name).parent.mkdir(parents=True, exist_ok=True)
        (selftests / name).write_text("#!/bin/bash\n")
    return tmp_path / "tree"


def test_the_initramfs_takes_the_selftests_the_tree_has(tmp_path):
    tree = fake_tree(tmp_path, ["memory-hotplug/mem-on-off-test.sh",
                                "kselftest/ktap_helpers.sh"])
    root = tmp_path / "root"
    initramfs.add_onlining_selftests(tree, root)
    got = sorted(str(p.relative_to(root)) for p in root.rglob("*.sh"))
    assert got == ["zdinit/kselftests/kselftest/ktap_helpers.sh",
                   "zdinit/kselftests/memory-hotplug/mem-on-off-test.sh"]


def test_a_tree_without_mem_on_off_test_is_refused(tmp_path):
    tree = fake_tree(tmp_path, ["dax/dax-kmem-hotplug.sh",
                                "kselftest/ktap_helpers.sh"])
    with pytest.raises(ZdinitError, match="mem-on-off-test.sh missing"):
        initramfs.add_onlining_selftests(tree, tmp_path / "root")
