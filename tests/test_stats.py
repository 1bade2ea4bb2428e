import pytest

from zdinit.results import stats


def test_summary_of_known_samples():
    s = stats.summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert s["median_ms"] == 3.0
    assert s["mean_ms"] == 3.0
    assert (s["min_ms"], s["max_ms"]) == (1.0, 5.0)
    assert s["p10_ms"] == pytest.approx(1.4)
    assert s["p90_ms"] == pytest.approx(4.6)
    assert s["n"] == 5


def test_summary_rejects_empty():
    with pytest.raises(ValueError):
        stats.summarize([])


def test_speedup_point_and_interval():
    base = [30.0, 31.0, 29.0, 30.5, 29.5]
    fast = [10.0, 10.2, 9.8, 10.1, 9.9]
    r = stats.speedup(base, fast)
    assert r["speedup"] == pytest.approx(3.0)
    lo, hi = r["ci95"]
    assert lo <= r["speedup"] <= hi
    assert 2.7 < lo and hi < 3.3


def test_speedup_is_deterministic():
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 2.5, 3.0]
    assert stats.speedup(a, b) == stats.speedup(a, b)


def test_percentile_single_value():
    assert stats.percentile([7.0], 90) == 7.0


def test_no_ratio_below_the_base_resolution():
    assert stats.speedup([0.0, 0.0, 1.0], [0.1, 0.1, 0.1]) is None
