"""trec_eval (pytrec_eval, test-only) on tie-heavy binary codes: it breaks score ties
by document id (descending), so with ids chosen to put non-relevant documents first in
every tie it must equal our pessimistic values, with the opposite ids our optimistic
values, and with arbitrary ids it must fall between the two, query by query, for every
metric monotone in rank. This is the spread nobody reported: on 32-bit codes a run's
mAP moves by about 0.1 with nothing but the document ids."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc

pytrec_eval = pytest.importorskip("pytrec_eval")

# ours -> trec_eval's measure name
PAIRS = {
    "map": "map",
    "mrr": "recip_rank",
    "precision@10": "P_10",
    "recall@10": "recall_10",
    "r_precision": "Rprec",
    "map_cut@10": "map_cut_10",
    "hit_rate@5": "success_5",
    "ndcg@10": "ndcg_cut_10",
    "ndcg": "ndcg",
}


def _data(bits=32, n_q=60, n_g=400, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.integers(0, 2, (12, bits)).astype(bool)
    gy = rng.integers(0, 12, n_g)
    qy = rng.integers(0, 12, n_q)
    flip = lambda y: centers[y] ^ (rng.random((y.size, bits)) < 0.3)  # noqa: E731
    return flip(qy), flip(gy), qy, gy


def _trec(Q, G, qy, gy, doc_id):
    """trec_eval's per-query values with document ids ``doc_id(j, relevant)``."""
    dist = (Q[:, None, :] != G[None, :, :]).sum(-1)
    qrel = {
        f"q{i}": {doc_id(j, True): 1 for j in np.flatnonzero(gy == qy[i])} for i in range(len(qy))
    }
    run = {
        f"q{i}": {doc_id(j, gy[j] == qy[i]): float(-dist[i, j]) for j in range(len(gy))}
        for i in range(len(qy))
    }
    ev = pytrec_eval.RelevanceEvaluator(
        qrel,
        {"map", "recip_rank", "P", "recall", "Rprec", "map_cut", "success", "ndcg", "ndcg_cut"},
    )
    out = ev.evaluate(run)
    return {
        ours: np.array([out[f"q{i}"][theirs] if f"q{i}" in out else np.nan for i in range(len(qy))])
        for ours, theirs in PAIRS.items()
    }


@pytest.mark.parametrize("bits", [16, 32])
def test_trec_eval_equals_the_matching_tie_order_and_lies_between_the_bounds(bits):
    Q, G, qy, gy = _data(bits)
    res = {
        t: rc.evaluate(
            Q,
            G,
            query_labels=qy,
            gallery_labels=gy,
            metrics=list(PAIRS),
            similarity="hamming",
            ties=t,
        )
        for t in ("pessimistic", "optimistic", "average")
    }
    assert res["pessimistic"].tied_share > 0.3  # the data are tie-heavy
    # trec_eval puts the larger document id first in a tie
    pess = _trec(Q, G, qy, gy, lambda j, rel: f"{'a' if rel else 'z'}{j:05d}")
    opt = _trec(Q, G, qy, gy, lambda j, rel: f"{'z' if rel else 'a'}{j:05d}")
    perm = np.random.default_rng(1).permutation(len(gy))
    arbitrary = _trec(Q, G, qy, gy, lambda j, rel: f"d{perm[j]:05d}")
    spread = 0.0
    for name in PAIRS:
        p, o = res["pessimistic"].per_query[name], res["optimistic"].per_query[name]
        np.testing.assert_allclose(pess[name], p, rtol=0, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(opt[name], o, rtol=0, atol=1e-12, err_msg=name)
        used = ~np.isnan(p)
        assert (arbitrary[name][used] >= p[used] - 1e-12).all() and (
            arbitrary[name][used] <= o[used] + 1e-12
        ).all()
        avg = res["average"].per_query[name]
        assert (avg[used] >= p[used] - 1e-12).all() and (avg[used] <= o[used] + 1e-12).all()
        lo, hi = res["average"].tie_range(name)
        assert lo == pytest.approx(res["pessimistic"][name]) and hi == pytest.approx(
            res["optimistic"][name]
        )
        if name == "map":
            spread = float(np.nanmean(opt[name]) - np.nanmean(pess[name]))
    assert spread > 0.02  # the tie order alone moves trec_eval's mAP
