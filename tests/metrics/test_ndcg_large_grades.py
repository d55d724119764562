"""ndcg_exp with grades of 1024 and more (2^1024 overflows a float): the query keeps its
value, computed in exact fractions by the reference, and no per-query NaN is dropped
from a mean without being counted as skipped (issue 25)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.errors import RetrievalChecksError
from retrieval_checks.metrics._names import parse_metric
from retrieval_checks.metrics._ranking import aggregate


def exact_ndcg(grades_in_rank_order, all_grades, k, exp):
    """nDCG@k of one query in exact arithmetic (the discounts as floats, the gains exact)."""
    gain = (lambda g: 2**g - 1) if exp else (lambda g: g)
    cut = k  # None: no cut-off

    def dcg(gs):
        return sum(
            Fraction(gain(g)) * Fraction(1 / math.log2(i + 2)) for i, g in enumerate(gs[:cut])
        )

    return float(dcg(grades_in_rank_order) / dcg(sorted(all_grades, reverse=True)))


# one query, scores 5 > 4 > ... > 0 (dot with a 1-D embedding): no ties
SCORES = np.array([5, 4, 3, 2, 1, 0], np.float32)


@pytest.mark.parametrize(
    "grades",
    [
        [1, 1024, 0, 3, 0, 2],
        [2000, 0, 1500, 1, 0, 1023],
        [5000, 5000, 0, 0, 0, 1],
        [1, 0, 0, 0, 0, 1100],
        [3, 0, 2, 0, 1, 0],  # small grades: the same numbers as before, bit for bit
    ],
)
@pytest.mark.parametrize("k", [None, 1, 3])
def test_ndcg_exp_with_large_grades_is_finite_and_exact(grades, k):
    rel = {0: {j: g for j, g in enumerate(grades) if g}}
    names = [f"ndcg_exp@{k}" if k else "ndcg_exp", f"ndcg@{k}" if k else "ndcg"]
    res = rc.evaluate(
        np.ones((1, 1), np.float32), SCORES[:, None], relevance=rel, metrics=names, similarity="dot"
    )
    assert res.n_skipped == 0
    for name, exp in zip(names, (True, False)):
        want = exact_ndcg(grades, [g for g in grades if g], k, exp)
        assert math.isfinite(res[name]) and res[name] == pytest.approx(
            want, rel=1e-12, abs=1e-300
        ), (name, grades)


def test_large_grades_keep_the_query_in_the_mean():
    """Two queries, one with a grade of 1024: the mean is over both (it was the other
    query alone, with n_skipped 0)."""
    rel = {0: {0: 1024, 1: 1}, 1: {2: 1}}
    res = rc.evaluate(
        np.ones((2, 1), np.float32),
        SCORES[:, None],
        relevance=rel,
        metrics=["ndcg_exp"],
        similarity="dot",
    )
    assert res.n_skipped == 0 and not np.isnan(res.per_query["ndcg_exp"]).any()
    assert res["ndcg_exp"] == pytest.approx((1.0 + 1 / math.log2(4)) / 2, rel=1e-12)


def test_a_nan_outside_the_skipped_queries_is_an_error_not_dropped():
    spec = parse_metric("ndcg")
    values = np.array([0.5, np.nan, 1.0, np.nan])
    assert (
        aggregate(spec, values, skipped=np.array([1, 3])) == 0.75
    )  # the skipped ones: dropped and counted
    with pytest.raises(RetrievalChecksError, match=r"ndcg: 1 of 4 queries .*query 3"):
        aggregate(spec, values, skipped=np.array([1]))
    with pytest.raises(RetrievalChecksError, match="query 1"):
        aggregate(spec, values, skipped=np.zeros(4, bool) | (np.arange(4) == 3))


def test_evaluate_refuses_a_per_query_nan_it_did_not_skip(monkeypatch):
    """A value that goes wrong inside the engine (here: gains forced to NaN for one query)
    fails the evaluation; before, the query left the mean with n_skipped 0."""
    from retrieval_checks.metrics import _graded

    real = _graded.gains

    def broken(grade, family, top=None):
        g = real(grade, family, top)
        g[np.asarray(grade) == 7] = np.nan
        return g

    monkeypatch.setattr(_graded, "gains", broken)
    rel = {0: {0: 7, 1: 1}, 1: {2: 1}, 2: {}}
    with pytest.raises(
        RetrievalChecksError, match=r"ndcg: 1 of 3 queries have no value .*query 0\b"
    ):
        rc.evaluate(
            np.ones((3, 1), np.float32),
            SCORES[:, None],
            relevance=rel,
            metrics=["ndcg"],
            similarity="dot",
            empty_queries="skip",
        )
    monkeypatch.setattr(_graded, "gains", real)
    res = rc.evaluate(
        np.ones((3, 1), np.float32),
        SCORES[:, None],
        relevance=rel,
        metrics=["ndcg"],
        similarity="dot",
        empty_queries="skip",
    )
    assert res.n_skipped == 1 and np.isnan(
        res.per_query["ndcg"][2]
    )  # the empty query: skipped and counted
