"""Placing a score among a row's sorted relevant scores by its bucket table
(``engine/counting/_kernels_numba.py``: ``fill_buckets``, ``count_bucketed``, ``place_bucketed``)
gives bisection's counts exactly: on random rows, tie-heavy rows, rows whose scores
crowd one bucket behind an outlier (the bucket is bisected), rows of one repeated value
(one bucket), gaps of one float32 ulp and of 2^-149, spans near float32's largest
values, and scores on every value and next to it. About 2 s (one compile)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

numba = pytest.importorskip("numba")

from retrieval_checks.engine.counting import _kernels_numba as K  # noqa: E402


@numba.njit
def _both(values, xs, nb):
    """For each x: (bisection's count <=, bucketed <=, bisection's <, bucketed <), and
    place_score's / place_bucketed's histograms and tie arrays over all xs (those >=
    the lowest value)."""
    e = values.shape[0]
    start = np.empty(nb + 1, np.int64)
    lo, scale = K.fill_buckets(values, 0, e, start, 0, nb)
    out = np.zeros((xs.shape[0], 4), np.int64)
    hist = np.zeros((2, e + 1), np.int64)
    ties = np.zeros((2, e + 1), np.int64)
    for i in range(xs.shape[0]):
        x = xs[i]
        out[i, 0] = K.bisect_sorted(values, 0, e, x, False)
        out[i, 1] = K.count_bucketed(values, 0, x, False, lo, scale, start, 0, nb)
        out[i, 2] = K.bisect_sorted(values, 0, e, x, True)
        out[i, 3] = K.count_bucketed(values, 0, x, True, lo, scale, start, 0, nb)
        if x >= values[0]:
            K.place_score(values, 0, e, x, hist[0], ties[0], 0)
            K.place_bucketed(values, 0, x, hist[1], ties[1], 0, lo, scale, start, 0, nb)
    return out, hist, ties


def _check(values, xs, per_value=K.BUCKETS_PER_SCORE):
    values = np.sort(np.asarray(values, np.float32))
    xs = np.asarray(xs, np.float32)
    with np.errstate(over="ignore"):  # next to float32's largest: inf, dropped below
        near = np.concatenate(
            [
                values,
                np.nextafter(values, np.float32(-np.inf)),
                np.nextafter(values, np.float32(np.inf)),
            ]
        )
    xs = np.concatenate([xs, near, [values[0], values[-1]]]).astype(np.float32)
    xs = xs[np.isfinite(xs)]
    for nb in {1, 2, per_value * values.size}:
        out, hist, ties = _both(values, xs, nb)
        assert np.array_equal(out[:, 0], out[:, 1]), (nb, values, xs[out[:, 0] != out[:, 1]])
        assert np.array_equal(out[:, 2], out[:, 3]), (nb, values, xs[out[:, 2] != out[:, 3]])
        assert np.array_equal(hist[0], hist[1]) and np.array_equal(ties[0], ties[1]), nb


def test_random_and_tie_heavy_rows():
    rng = np.random.default_rng(0)
    for r in (1, 2, 9, 17, 100, 300):
        _check(rng.standard_normal(r), rng.standard_normal(2000))
        _check(np.round(rng.standard_normal(r), 1), np.round(rng.standard_normal(2000), 1))


def test_a_crowded_bucket_behind_an_outlier_is_bisected():
    rng = np.random.default_rng(1)
    crowd = 0.5 + rng.standard_normal(200) * 1e-6
    _check(np.concatenate([[-1e30], crowd]), np.concatenate([crowd, rng.standard_normal(500)]))


def test_degenerate_spans():
    _check([0.25] * 40, [0.25, 0.5, -1.0, 0.2499])  # one value: scale 0, one bucket
    tiny = np.float32(2.0**-149)
    _check([0.0, tiny, 2 * tiny, 2 * tiny], [0.0, tiny, 3 * tiny, 1e-40, 1.0])
    big = np.finfo(np.float32).max
    _check([-big, -1.0, 0.0, 1.0, big], [-big, 3e38, -3e38, 0.0, big])
    one = np.float32(1.0)
    ulps = [one, np.nextafter(one, np.float32(2)), np.nextafter(np.nextafter(one, 2), 2)]
    _check(ulps * 5, ulps + [0.5, 2.0])


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(
        st.floats(-1e6, 1e6, allow_nan=False, width=32) | st.sampled_from([0.0, -0.0, 1.0, 0.1]),
        min_size=1,
        max_size=60,
    ),
    xs=st.lists(st.floats(-2e6, 2e6, allow_nan=False, width=32), max_size=40),
)
def test_bucketed_counts_equal_bisection(values, xs):
    _check(values, xs)
