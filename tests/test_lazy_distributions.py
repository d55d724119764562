"""The normal and Student's t functions of ``retrieval_checks._lazy`` equal scipy.stats'
bit for bit (on a grid with the edges: 0, 1, infinities, NaN, degrees of freedom from 1
to infinity and invalid ones), and the significance-gated checks, comparisons, gaps and
intervals reach them without importing scipy.stats (~1.6 CPU-s in every fresh session,
xdist worker or rank that gates on significance; scipy.special alone ~0.5).

Cost: in-process, well under a second."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

import retrieval_checks as rc
from retrieval_checks import _lazy
from retrieval_checks.stats._intervals import (
    bootstrap_interval,
    newcombe_interval,
    wilson_interval,
)

_X = np.concatenate(
    [
        np.random.default_rng(0).normal(size=300) * 5,
        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, 40.0, -40.0, 1e10],
    ]
)
_Q = np.concatenate(
    [np.random.default_rng(1).random(300), [0.0, 1.0, 0.5, 1e-300, 1 - 1e-16, np.nan, -0.1, 1.1]]
)
_DF = [1, 2, 3.5, 9, 49, 1000, 1e8, np.inf, 0, -1, np.nan]


def _same(a, b) -> bool:
    return np.array_equal(np.asarray(a, float), np.asarray(b, float), equal_nan=True)


@pytest.mark.parametrize("df", _DF)
def test_student_t_equals_scipy_stats(df):
    for x in _X:  # one value at a time, as the library calls them, and the whole array
        assert _same(_lazy.t_cdf(x, df), stats.t.cdf(x, df)), (x, df)
        assert _same(_lazy.t_sf(x, df), stats.t.sf(x, df)), (x, df)
    for q in _Q:
        assert _same(_lazy.t_ppf(q, df), stats.t.ppf(q, df)), (q, df)  # q == 0: -inf
    assert _same(_lazy.t_cdf(_X, df), stats.t.cdf(_X, df))
    assert _same(_lazy.t_sf(_X, df), stats.t.sf(_X, df))
    assert _same(_lazy.t_ppf(_Q, df), stats.t.ppf(_Q, df))


def test_normal_equals_scipy_stats():
    for x in _X:
        assert _same(_lazy.norm_cdf(x), stats.norm.cdf(x)), x
        assert _same(_lazy.norm_sf(x), stats.norm.sf(x)), x
    for q in _Q:
        assert _same(_lazy.norm_ppf(q), stats.norm.ppf(q)), q
    assert _same(_lazy.norm_ppf(_Q), stats.norm.ppf(_Q))
    assert _same(_lazy.norm_cdf(_X), stats.norm.cdf(_X))
    assert _same(_lazy.norm_sf(_X), stats.norm.sf(_X))
    assert type(_lazy.norm_ppf(0.975)) is type(stats.norm.ppf(0.975))  # a numpy float, not an array
    assert type(_lazy.t_ppf(0.975, 9)) is type(stats.t.ppf(0.975, 9))


def _rec(vals) -> dict:
    n = len(vals)
    return {
        "metric": "map",
        "value": float(np.mean(vals)),
        "n": n,
        "unit": "queries",
        "units_are": "queries",
        "units": {f"q{i}": [float(v), 1] for i, v in enumerate(vals)},
    }


def test_significance_intervals_and_comparisons_do_not_reach_scipy_stats(monkeypatch):
    """scipy.stats is imported here already (this process), so the probe is the library's
    lazy handle: pointed at a module that does not exist, any use of it raises."""
    monkeypatch.setattr(_lazy.stats, "_name", "retrieval_checks._scipy_stats_must_not_load")
    with pytest.raises(ImportError):
        _lazy.stats.norm  # noqa: B018 - the probe works
    rng = np.random.default_rng(0)
    base = np.clip(0.5 + 0.1 * rng.normal(size=40), 0, 1)
    dropped = np.clip(base - 0.05 + 0.01 * rng.normal(size=40), 0, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rc.PowerWarning)  # 40 queries: low power, not the point
        rc.assert_no_regression(_rec(base), _rec(base), max_drop=0.001, significant=True)
        with pytest.raises(AssertionError, match="map"):
            rc.assert_no_regression(_rec(dropped), _rec(base), max_drop=0.001, significant=True)
    # a comparison (paired t), a bootstrap interval (BCa) and proportions' intervals
    x = rng.normal(size=(30, 8)).astype(np.float32)
    y = np.repeat(np.arange(10), 3)
    a = rc.evaluate(x, query_labels=y, metrics=["map"], device="numpy")
    noisy = x + 0.3 * rng.normal(size=x.shape).astype(np.float32)
    b = rc.evaluate(noisy, query_labels=y, metrics=["map"], device="numpy")
    cmp = rc.compare(b, a, "map")
    assert 0 <= cmp.p_value <= 1 and cmp.low <= cmp.difference <= cmp.high
    iv = bootstrap_interval(a, "map", confidence=0.9, n_resamples=200, method="bca", seed=0)
    assert iv.method.startswith("bca") and iv.low <= a["map"] <= iv.high
    assert 0 < wilson_interval(3, 10, 0.95)[0] < 0.3 < wilson_interval(3, 10, 0.95)[1] < 1
    low, high = newcombe_interval(3, 10, 5, 10, 0.95)  # the difference 0.3 - 0.5
    assert low < -0.2 < high
