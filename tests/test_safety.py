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
