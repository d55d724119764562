"""Exact binomial intervals, and the floor they put under a bootstrap's (or a t
interval's) interval of a mean whose values sit at the ends of their range: a resample
cannot hold a miss the sample never saw, so 20 hits of 20 queries bootstrap to [1, 1]
(the exact interval is [0.83, 1]). Used by the statistics' intervals
(:func:`retrieval_checks.bootstrap_interval`) and grouped recall's (engine)."""

from __future__ import annotations

import math

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


def binomial_floor(x, value_range, confidence: float, low: float, high: float, proportion=False):
    """``(low, high, what was done)``: the interval ``[low, high]`` of the mean of the
    per-query values ``x`` (of a metric whose values lie in ``value_range``), widened,
    where its values allow it, to contain the exact binomial (Clopper-Pearson) interval
    of the queries' hits; ``what`` is ``""`` when nothing was widened.

    A bootstrap cannot resample a miss it never saw: 20 hits in 20 queries bootstrap to
    [1, 1], from which a gate "hit_rate@1 >= 0.95 on the interval" passed in 35% of
    samples of queries whose true rate is 0.95 (the exact lower bound is 0.83); at 60
    queries 59 hits still gave a bootstrap lower bound of 0.95 (exact: 0.91). The
    queries' exact interval is applied

    - to a proportion (``proportion``, :data:`PROPORTIONS`: hit rates) always, with
      ``sum(x)`` hits (fractional under ties="average"), so that a sample one hit or
      half a hit worse never has a higher lower bound (59 hits and a tied half hit of
      60 were bootstrapped to [0.95, 1], above a perfect sample's exact [0.94, 1]);
    - to any other mean whose values are all at the ends of its range, with the
      queries at the top as hits.

    The queries are taken as independent: queries of one class are positively
    correlated where it matters, which only widens an interval, so under a class
    bootstrap this is a floor, not the whole answer. The classes' own binomial interval
    (sound: a class's value is 1 with probability at most its mean) is not used: with
    few large classes it is far too wide (10 perfect classes of 180 queries each:
    [0.69, 1], where the queries' exact interval is [0.998, 1]).

    Examples
    --------
    >>> import numpy as np
    >>> from retrieval_checks.metrics._binomial import binomial_floor
    >>> low, high, what = binomial_floor(np.ones(20), (0, 1), 0.95, 1.0, 1.0)
    >>> round(low, 4), high, what
    (0.8316, 1.0, ', widened to the exact binomial interval of 20 of 20 queries')
    """
    lo_r, hi_r = (float(v) for v in value_range)
    if not (math.isfinite(lo_r) and math.isfinite(hi_r)) or hi_r <= lo_r:
        return low, high, ""
    n = int(x.size)
    top = x == hi_r
    if bool((top | (x == lo_r)).all()):
        k = int(top.sum())
    elif proportion:  # a proportion's hits (fractional under tied scores)
        k = min(max(float(((x - lo_r) / (hi_r - lo_r)).sum()), 0.0), float(n))
    else:
        return low, high, ""
    cl, ch = clopper_pearson_interval(k, n, confidence)
    cl, ch = lo_r + (hi_r - lo_r) * cl, lo_r + (hi_r - lo_r) * ch
    if cl >= low and ch <= high:
        return low, high, ""
    return (
        min(low, cl),
        max(high, ch),
        f", widened to the exact binomial interval of {k:g} of {n} queries",
    )
