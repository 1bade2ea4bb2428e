"""Summary statistics and ratio intervals, standard library only."""
import random
import statistics

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261122    # fixed: the same data always gives the same interval


def percentile(values, q):
    """Linear-interpolation percentile (q in 0..100) of a non-empty list."""
    data = sorted(values)
    if len(data) == 1:
        return float(data[0])
    pos = (len(data) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summarize(samples):
    if not samples:
        raise ValueError("no samples")
    return {
        "n": len(samples),
        "median_ms": statistics.median(samples),
        "mean_ms": statistics.fmean(samples),
        "min_ms": min(samples),
        "max_ms": max(samples),
        "p10_ms": percentile(samples, 10),
        "p90_ms": percentile(samples, 90),
        "stdev_ms": statistics.stdev(samples) if len(samples) > 1 else 0.0,
    }


def speedup(base, other):
    """base median / other median with a 95% bootstrap interval.

    Values above 1 mean 'other' is faster.  Each resample draws both sets
    with replacement, so the interval reflects the spread of both.  None
    when either median is 0: stock kernels time in whole jiffies, and a
    range below one jiffy has no ratio.
    """
    if not statistics.median(base) or not statistics.median(other):
        return None
    point = statistics.median(base) / statistics.median(other)
    rng = random.Random(BOOTSTRAP_SEED)
    ratios = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        b = statistics.median(rng.choices(base, k=len(base)))
        o = statistics.median(rng.choices(other, k=len(other)))
        if o:
            ratios.append(b / o)
    return {"speedup": point, "ci95": [percentile(ratios, 2.5),
                                       percentile(ratios, 97.5)]}


def with_summary(record, fields, optional=()):
    """record with its summary fields replaced by fields: the optional
    ones fields lacks are dropped (their samples no longer give them),
    the others keep their place, so that a results.json summarised again
    differs from the old one only in values."""
    kept = {k: v for k, v in record.items() if k not in optional
            or k in fields}
    kept.update(fields)
    return kept
