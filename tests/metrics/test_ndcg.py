"""nDCG on binary relevance from the engine's ranks: against scikit-learn's ndcg_score
(which averages DCG over tied scores, McSherry and Najork's expectation: our
ties="average"), against enumeration of every tie order, and its bounds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import query_metric

import retrieval_checks as rc


@pytest.fixture(scope="module")
def sklearn_metrics():
    """scikit-learn's metrics, imported by the tests that compare with them, not at
    collection (seconds, paid by every xdist worker collecting this module); those tests
    are skipped, saying why, where scikit-learn is not installed."""
    return pytest.importorskip("sklearn.metrics")


def _case(seed, n_q=12, n_g=30, levels=4):
    rng = np.random.default_rng(seed)
    S = rng.integers(0, levels, (n_q, n_g)).astype(np.float64)  # tie-heavy integer scores
    rel = rng.random((n_q, n_g)) < 0.25
    rel[np.arange(n_q), rng.integers(0, n_g, n_q)] = True  # every query has a relevant item
    return S, rel


def _evaluate(S, rel, metrics, ties):
    # 1-d integer "embeddings" would tie everything; one-hot gallery rows make dot = S exactly
    n_q, n_g = S.shape
    Q, G = S, np.eye(n_g)
    return rc.evaluate(Q, G, relevance=rel, metrics=metrics, similarity="dot", ties=ties)


@pytest.mark.parametrize("k", [1, 3, 10, None])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_average_ties_equal_scikit_learn_ndcg_score(seed, k, sklearn_metrics):
    S, rel = _case(seed)
    name = "ndcg" if k is None else f"ndcg@{k}"
    res = _evaluate(S, rel, [name, name.replace("ndcg", "ndcg_exp")], "average")
    want = [
        sklearn_metrics.ndcg_score(rel[i : i + 1].astype(float), S[i : i + 1], k=k)
        for i in range(len(S))
    ]
    np.testing.assert_allclose(res.per_query[name], want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        res.per_query[name.replace("ndcg", "ndcg_exp")], want, rtol=0, atol=1e-12
    )
    assert res[name] == pytest.approx(float(np.mean(want)), abs=1e-12)


def _orders(scores, rel):
    """Every distinct order of the tied items: relevance sequences in ranking order."""
    groups = [list(rel[scores == v]) for v in sorted(set(scores), reverse=True)]
    per_group = [sorted(set(itertools.permutations(g))) for g in groups]
    for combo in itertools.product(*per_group):
        yield [x for part in combo for x in part]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31 - 1), st.integers(1, 8))
def test_every_policy_against_enumeration_of_tie_orders(seed, k):
    S, rel = _case(seed, n_q=3, n_g=8, levels=3)
    name = f"ndcg@{k}"
    res = {
        t: _evaluate(S, rel, [name, "ndcg"], t) for t in ("pessimistic", "optimistic", "average")
    }
    for i in range(len(S)):
        # each order's value by the reference's textbook formula (tests/reference.py)
        orders = [np.array(o, int) for o in _orders(S[i], rel[i])]
        vals = [query_metric(name, o) for o in orders]
        fulls = [query_metric("ndcg", o) for o in orders]
        for got, want in (
            (res["average"].per_query[name][i], np.mean(vals)),
            (res["pessimistic"].per_query[name][i], min(vals)),
            (res["optimistic"].per_query[name][i], max(vals)),
            (res["average"].per_query["ndcg"][i], np.mean(fulls)),
        ):
            assert got == pytest.approx(want, abs=1e-12)
    lo, hi = res["average"].tie_range(name)
    assert lo == pytest.approx(res["pessimistic"][name], abs=1e-12)
    assert hi == pytest.approx(res["optimistic"][name], abs=1e-12)


def test_tie_free_ndcg_equals_scikit_learn_and_every_policy_agrees(sklearn_metrics):
    rng = np.random.default_rng(5)
    Q, G = rng.normal(size=(20, 8)), rng.normal(size=(50, 8))
    rel = rng.random((20, 50)) < 0.2
    rel[:, 0] = True
    res = {
        t: rc.evaluate(Q, G, relevance=rel, metrics=["ndcg@5"], similarity="dot", ties=t)
        for t in ("pessimistic", "optimistic", "average")
    }
    S = Q.astype(np.float32) @ G.astype(np.float32).T
    want = [
        sklearn_metrics.ndcg_score(rel[i : i + 1].astype(float), S[i : i + 1], k=5)
        for i in range(20)
    ]
    for r in res.values():
        np.testing.assert_allclose(r.per_query["ndcg@5"], want, rtol=0, atol=1e-6)
    assert res["pessimistic"]["ndcg@5"] == res["optimistic"]["ndcg@5"]
    assert res["average"]["ndcg@5"] == pytest.approx(
        res["pessimistic"]["ndcg@5"], abs=1e-15
    )  # another sum order


def test_ndcg_names():
    assert rc.parse_metric("NDCG@10").name == "ndcg@10"
    assert rc.parse_metric("ndcg_cut@5").name == "ndcg@5"
    assert rc.parse_metric("ndcg").name == "ndcg"
    assert rc.parse_metric("ndcg_exp@3").family == "ndcg_exp"
    with pytest.raises(rc.MetricNameError):
        rc.parse_metric("ndcg@0")
