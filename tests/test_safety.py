"""zdinit.safety's judgement of guest check lines and its comparison of
the series with stock."""
from zdinit import parse, safety


def rows_for(kernel, line, job="ndctl-workflows"):
    """Rows as safety.run_job makes them from one guest check line."""
    check = parse.parse(line).checks[0]
    ok, why = safety.judge(check)
    return [{"check": check["name"], "job": job, "kernel": kernel,
             "strategy": "-", "used": "-", "passed": ok, "detail": why,
             "raw": check}]


ALIGN = ("@@zdinit check name=ndctl-align result=pass strategy=- used=auto "
         "outcome=4K-align-4096-io-ok,2M-align-2097152-io-ok\n")


def test_same_outcome_as_stock_passes():
    rows = rows_for("base", ALIGN.replace("used=auto", "used=none")) \
        + rows_for("patched", ALIGN)
    safety.compare_with_base(rows)
    assert all(r["passed"] for r in rows)
    assert rows[1]["detail"].endswith("same as stock")


def test_other_outcome_than_stock_fails_even_if_both_pass():
    rows = rows_for("base", ALIGN) + rows_for(
        "patched", ALIGN.replace("2M-align-2097152", "2M-align-4096"))
    safety.compare_with_base(rows)
    assert rows[0]["passed"] and not rows[1]["passed"]
    assert "stock: pass 4K-align-4096" in rows[1]["detail"]


def test_a_failing_workflow_fails_on_its_own():
    row, = rows_for("base", ALIGN.replace("result=pass", "result=fail"))
    assert not row["passed"]


def test_a_check_the_series_does_not_report_fails():
    rows = rows_for("base", ALIGN) + rows_for(
        "patched", ALIGN.replace("ndctl-align", "ndctl-mode-cycle"))
    rows[1]["raw"]["outcome"] = rows[0]["raw"]["outcome"]
    safety.compare_with_base(rows)
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
    return safety.judge(parse.parse(line).checks[0])


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
