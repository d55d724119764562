"""Graded relevance in evaluate(): nDCG with grades and binary metrics at a relevance
level, from the engine's streamed ranks, under every tie policy; checked against
evaluate_run (which sorts each query's full ranking, an independent implementation),
pytrec_eval, and across backends, tiles and input forms."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import retrieval_checks as rc

METRICS = [
    "ndcg@5",
    "ndcg",
    "ndcg_exp@5",
    "ndcg_exp",
    "map",
    "map@3",
    "hit_rate@1",
    "recall@5",
    "mrr",
    "precision@3",
    "r_precision",
    "meanr",
]
BACKENDS = [("numpy", True), ("torch-cpu", True), ("torch-cpu", False)]


def _case(seed, n_q=12, n_g=40, levels=4):
    rng = np.random.default_rng(seed)
    S = rng.integers(0, levels, (n_q, n_g)).astype(np.float64)  # tie-heavy scores
    G = rng.integers(0, 5, (n_q, n_g))
    G[G >= 4] = 0
    G[:, 0] = 3  # every query has a top-grade item
    return S, G


def _as_run(S, G):
    n_q, n_g = S.shape
    run = {f"q{i:03d}": {f"d{j:03d}": float(S[i, j]) for j in range(n_g)} for i in range(n_q)}
    qrels = {
        f"q{i:03d}": {f"d{j:03d}": int(G[i, j]) for j in range(n_g) if G[i, j] > 0}
        for i in range(n_q)
    }
    return run, qrels


def _graded(G):
    return {i: {j: int(g) for j, g in enumerate(row) if g > 0} for i, row in enumerate(G)}


@pytest.mark.parametrize("level", [1, 2, 3])
@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "average"])
@pytest.mark.parametrize("seed", [0, 1])
def test_graded_evaluate_equals_evaluate_run(seed, ties, level):
    S, G = _case(seed)
    run, qrels = _as_run(S, G)
    want = rc.evaluate_run(run, qrels, metrics=METRICS, ties=ties, relevance_level=level)
    for device, kernels in BACKENDS:
        # one-hot gallery rows: the dot products are exactly the score matrix S
        got = rc.evaluate(
            S,
            np.eye(S.shape[1]),
            relevance=_graded(G),
            metrics=METRICS,
            similarity="dot",
            ties=ties,
            relevance_level=level,
            device=device,
            tile=(5, 16),
            _use_kernels=kernels,
        )
        for m in METRICS:
            np.testing.assert_allclose(
                got.per_query[m],
                want.per_query[m],
                rtol=0,
                atol=1e-12,
                err_msg=f"{m} {device} {kernels}",
            )
            np.testing.assert_allclose(
                got.tie_range(m), want.tie_range(m), rtol=0, atol=1e-12, err_msg=m
            )
        assert got.config["graded"] and got.config["relevance_level"] == level


def test_graded_forms_agree():
    S, G = _case(3)
    kw = dict(metrics=METRICS, similarity="dot", ties="average")
    ref = rc.evaluate(S, np.eye(S.shape[1]), relevance=_graded(G), **kw)
    for rel in (G, G.astype(float), sp.csr_matrix(G), sp.coo_matrix(G.astype(np.int8))):
        got = rc.evaluate(S, np.eye(S.shape[1]), relevance=rel, **kw)
        assert dict(got) == dict(ref)


def test_graded_ndcg_against_pytrec_eval():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(7)
    S = rng.normal(size=(15, 50))  # tie-free
    G = rng.integers(0, 4, (15, 50))
    G[:, 1] = 2
    run, qrels = _as_run(S, G)
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg", "ndcg_cut"})
    out = ev.evaluate(run)
    res = rc.evaluate(S, np.eye(50), relevance=G, metrics=["ndcg", "ndcg@10"], similarity="dot")
    np.testing.assert_allclose(
        res.per_query["ndcg"], [out[f"q{i:03d}"]["ndcg"] for i in range(15)], atol=1e-12
    )
    np.testing.assert_allclose(
        res.per_query["ndcg@10"], [out[f"q{i:03d}"]["ndcg_cut_10"] for i in range(15)], atol=1e-12
    )


def test_binary_relevance_is_grade_one():
    S, G = _case(4)
    binary = rc.evaluate(S, np.eye(S.shape[1]), relevance=G > 0, metrics=METRICS, similarity="dot")
    ones = rc.evaluate(
        S, np.eye(S.shape[1]), relevance=(G > 0).astype(int) * 1, metrics=METRICS, similarity="dot"
    )
    assert dict(binary) == dict(ones) and not binary.config["graded"]


@pytest.mark.parametrize(
    "rel,match",
    [
        ({0: {1: 0.5}}, "whole number >= 0"),
        ({0: {1: -1}}, "whole number >= 0"),
        ({0: {99: 2}}, "outside"),
        (
            {0: {1: 2}, 1: [3]},
            r"relevance\[0\]",
        ),  # mixed rows: neither all mappings nor all index lists
        (np.full((3, 5), 0.7), "neither 0/1 nor whole grades"),
    ],
)
def test_bad_grades_are_refused(rel, match):
    Q = np.eye(3, 4)
    G = np.eye(5, 4)
    with pytest.raises(rc.InputError, match=match):
        rc.evaluate(Q, G, relevance=rel, metrics=["ndcg"], similarity="dot")


def test_relevance_level_is_checked():
    Q, G = np.eye(3, 4), np.eye(5, 4)
    with pytest.raises(rc.InputError, match="needs graded relevance"):
        rc.evaluate(
            Q, G, relevance=[[0], [1], [2]], metrics=["map"], relevance_level=2, similarity="dot"
        )
    with pytest.raises(rc.InputError, match="whole number >= 1"):
        rc.evaluate(
            Q, G, relevance={0: {0: 2}}, metrics=["map"], relevance_level=0, similarity="dot"
        )
    with pytest.raises(rc.InputError, match="pair metrics with relevance_level=2"):
        rc.evaluate(
            Q,
            G,
            relevance={0: {0: 2}, 1: {1: 1}},
            metrics=["pair_recall@t=0.5"],
            relevance_level=2,
            similarity="dot",
        )
