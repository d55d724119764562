"""Exact binomial intervals, and the floor they put under a bootstrap's (or a t
interval's) interval of a mean whose values sit at the ends of their range: a resample
cannot hold a miss the sample never saw, so 20 hits of 20 queries bootstrap to [1, 1]
(the exact interval is [0.83, 1]). Used by the statistics' intervals
(:func:`retrieval_checks.bootstrap_interval`) and grouped recall's (engine)."""

from __future__ import annotations

import math

import numpy as np

from .._lazy import special

__all__ = ["clopper_pearson_interval", "binomial_floor", "PROPORTIONS"]


def clopper_pearson_interval(x: float, n: int, confidence: float) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a proportion ``x / n``: each side's
    error is at most ``(1 - confidence) / 2`` whatever the true proportion (it errs on
    the side of width, never of coverage). A fractional ``x`` (expected hits under
    tied scores) interpolates between its neighbours' intervals (the beta quantiles are
    continuous in it).

    Examples
    --------
    >>> from retrieval_checks.metrics._binomial import clopper_pearson_interval
    >>> [round(v, 4) for v in clopper_pearson_interval(20, 20, 0.95)]
    [0.8316, 1.0]
    >>> [round(v, 4) for v in clopper_pearson_interval(59, 60, 0.95)]
    [0.9106, 0.9996]
    """
    if not (0 <= x <= n and n >= 1):
        raise ValueError(f"{x} successes of {n} trials: need 0 <= x <= n and n >= 1")
    a = (1 - confidence) / 2
    low = float(special.betaincinv(x, n - x + 1, a)) if x > 0 else 0.0
    high = float(special.betaincinv(x + 1, n - x, 1 - a)) if x < n else 1.0
    return low, high


#: Metric families whose per-query value is a hit, 0 or 1 (or, under ``ties="average"``,
#: the probability of one over the orders of a tie): their mean is a proportion of
#: queries whatever the values, so its exact interval applies to any sample of them
PROPORTIONS = frozenset({"hit_rate", "i2t_recall", "t2i_recall"})


def binomial_floor(
    x, clusters, value_range, confidence: float, low: float, high: float, proportion=False
):
    """``(low, high, what was done)``: the interval ``[low, high]`` of the mean of the
    per-query values ``x`` (of a metric whose values lie in ``value_range``), widened,
    where its values allow it, to contain the exact binomial (Clopper-Pearson) interval
    of those values; ``what`` is ``""`` when nothing was widened.

    A bootstrap cannot resample a miss it never saw. When the per-query values ``x``
    are all at the ends of the metric's range (hit rates, precision@1, or any metric on
    queries that all score perfectly), the number of hits is binomial and its exact
    interval is the narrowest an honest interval can be: a bootstrap of 20 hits in 20
    queries gives [1, 1], from which a gate "hit_rate@1 >= 0.95 on the interval"
    passed in 35% of samples of queries whose true rate is 0.95 (the exact lower bound
    is 0.83); at 60 queries 59 hits still gave a bootstrap lower bound of 0.95 (exact:
    0.91). Queries of one class are positively correlated where it matters, which only
    widens an interval, so the queries' binomial interval is a floor under the class
    bootstrap too; and when every class scores at an end, the classes' own binomial
    interval applies (any value in the range is at the top end with probability at most
    its mean, so ``k`` of ``n`` classes at the top bound the mean as ``k`` of ``n``
    successes would). ``clusters``: the queries' class codes (None: queries are the
    units). ``proportion`` (:data:`PROPORTIONS`: hit rates): the queries' interval
    applies to every sample, with ``sum(x)`` hits (fractional under ties="average"), so
    that one missed or half-missed query never narrows the interval below a perfect
    sample's (59 hits and a tied half hit of 60 were bootstrapped to [0.95, 1], above
    the exact [0.92, 1] of 59.5 of 60); and the classes' interval, with the sum of their
    values as hits, while that sum is within one class of an end (one caption of 100
    missed: the images' 19.8 of 20, [0.80, 1], not the captions' 99 of 100, [0.95, 1],
    where a perfect model's is [0.83, 1]). Further from the ends the class bootstrap
    and the queries' interval decide (the classes' binomial interval would be wider
    than their bootstrap's everywhere in the range's interior).

    Examples
    --------
    >>> import numpy as np
    >>> from retrieval_checks.metrics._binomial import binomial_floor
    >>> low, high, what = binomial_floor(np.ones(20), None, (0, 1), 0.95, 1.0, 1.0)
    >>> round(low, 4), high, what
    (0.8316, 1.0, ', widened to the exact binomial interval of 20 of 20 queries')
    """
    lo_r, hi_r = (float(v) for v in value_range)
    if not (math.isfinite(lo_r) and math.isfinite(hi_r)) or hi_r <= lo_r:
        return low, high, ""
    widened = []
    sides = [(x, "queries")]
    if clusters is not None:
        _, inv = np.unique(clusters, return_inverse=True)
        sides.append((np.bincount(inv, weights=x) / np.bincount(inv), "classes"))
    for values, unit in sides:
        top, bottom = values == hi_r, values == lo_r
        n = int(values.size)
        hits = min(max(float(((values - lo_r) / (hi_r - lo_r)).sum()), 0.0), float(n))
        if bool((top | bottom).all()):
            k = int(top.sum())
        elif proportion and (unit == "queries" or min(hits, n - hits) <= 1.0):
            k = hits  # a proportion's hits; its units within one unit of an end
        else:
            continue
        cl, ch = clopper_pearson_interval(k, n, confidence)
        cl, ch = lo_r + (hi_r - lo_r) * cl, lo_r + (hi_r - lo_r) * ch
        if cl < low or ch > high:
            low, high = min(low, cl), max(high, ch)
            widened.append(f"{k:g} of {n} {unit}")
    if not widened:
        return low, high, ""
    return (
        low,
        high,
        f", widened to the exact binomial interval of {' and '.join(widened)}",
    )
