"""Graded relevance against ranx (a separate implementation, numba-compiled): ndcg@10,
ndcg, map, mrr and recall@K of ``rc.evaluate`` (embeddings and graded ``relevance=``)
and of ``rc.evaluate_run`` (a ``{qid: {docid: score}}`` run, full and truncated) equal
ranx's numbers to 1e-9 on tie-free data, and lie within the engine's tie range on data
full of ties.

Exact scores: query q is the one-hot vector e_q and document d has
``perm_q[d]`` (distinct integers) in column q, so with ``similarity="dot"`` every score
is an integer that float32 holds exactly: the engine, the run and ranx rank on the
same numbers, with no rounding to blur an order.

ranx's tie convention: ranx sorts each query's run with numba's ``np.argsort`` of the
scores (quicksort, not stable) and reverses it, so tied documents come in an order set
by the sort's internals and the insertion order of the run: neither the document id
(trec_eval breaks ties by descending docno) nor the best or worst case. Its values on
tied data are therefore one of the orders our ``ties`` policies bound: between the
``pessimistic`` and ``optimistic`` values (``result.tie_range``).

ranx and relevance levels: a ranx metric ``name-lN`` drops judgements below grade N
before computing, also for ndcg; ours keeps the grades as ndcg's gains at every
``relevance_level`` (trec_eval's rule), so ndcg is compared at level 1 only and the
binary metrics (map, mrr, recall) at levels 1 and 2.
"""

from __future__ import annotations

import numpy as np
import pytest
from shared_setup import ranx_evaluate

import retrieval_checks as rc


@pytest.fixture(scope="module", autouse=True)
def _needs_ranx():
    """ranx is imported here, not at collection: importing it takes seconds (it loads
    numba's typed containers), paid by every xdist worker that collects this module while
    one worker runs its tests. Skipped, saying why, where ranx is not installed. (Named
    ``_ranx`` until a GPU machine without ranx showed every test failing on its import:
    the helper ``_ranx`` below rebound the name, so pytest never saw this fixture.)"""
    pytest.importorskip("ranx")


# ranx compiles each metric with numba on first use (~4 CPU-s each in a fresh venv: its
# cache lives in site-packages), paid by every process that calls it: one worker runs every
# ranx test (tests/suites/test_beir_datasets.py's too), so the suite compiles each once.
# shared_setup.ranx_evaluate passes ranx plain dicts: its Qrels/Run classes would compile
# their typed-dict builders too (61 CPU-s cold) for the same numbers.
pytestmark = pytest.mark.xdist_group("ranx")

N_Q, N_D = 24, 120
METRICS = ["ndcg@10", "ndcg", "map", "mrr", "recall@10", "recall@50"]
BINARY = ["map", "mrr", "recall@10", "recall@50"]


def _data(seed: int, tie_group: int = 1):
    """Integer scores (perm // tie_group: groups of tie_group equal scores per query) and
    graded qrels (grades 0-3, each query with at least one grade >= 2)."""
    rng = np.random.default_rng(seed)
    scores = np.stack([rng.permutation(N_D) for _ in range(N_Q)]) // tie_group  # (N_Q x N_D)
    queries = np.eye(N_Q, dtype=np.float32)
    docs = scores.T.astype(np.float32)  # column q holds query q's scores
    relevance = {}
    for q in range(N_Q):
        judged = rng.choice(N_D, size=int(rng.integers(3, 12)), replace=False)
        grades = rng.integers(0, 4, size=judged.size)
        grades[0] = int(rng.integers(2, 4))
        relevance[q] = {int(d): int(g) for d, g in zip(judged, grades)}
    return queries, docs, scores, relevance


def _ranx(scores, relevance, metrics, depth=None):
    qrels = {f"q{q}": {f"d{d}": g for d, g in rel.items()} for q, rel in relevance.items()}
    run = {}
    for q in range(N_Q):
        order = np.argsort(-scores[q], kind="stable")[:depth]
        run[f"q{q}"] = {f"d{d}": float(scores[q, d]) for d in order}
    return ranx_evaluate(qrels, run, metrics), qrels, run


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tie_free_graded_values_equal_ranx(seed):
    queries, docs, scores, relevance = _data(seed)
    want, qrels, run = _ranx(scores, relevance, METRICS)
    dense = rc.evaluate(queries, docs, relevance=relevance, metrics=METRICS, similarity="dot")
    from_run = rc.evaluate_run(run, qrels, METRICS)
    for m in METRICS:
        assert dense[m] == pytest.approx(want[m], abs=1e-9), m
        assert from_run[m] == pytest.approx(want[m], abs=1e-9), m
        assert dense.tie_range(m)[0] == dense.tie_range(m)[1]  # no ties: one order only


@pytest.mark.parametrize("seed", [3, 4])
def test_relevance_level_2_binary_metrics_equal_ranx(seed):
    queries, docs, scores, relevance = _data(seed)
    want, qrels, run = _ranx(scores, relevance, [f"{m}-l2" for m in BINARY])
    dense = rc.evaluate(
        queries, docs, relevance=relevance, metrics=BINARY, similarity="dot", relevance_level=2
    )
    from_run = rc.evaluate_run(run, qrels, BINARY, relevance_level=2)
    for m in BINARY:
        assert dense[m] == pytest.approx(want[f"{m}-l2"], abs=1e-9), m
        assert from_run[m] == pytest.approx(want[f"{m}-l2"], abs=1e-9), m


def test_truncated_runs_equal_ranx():
    """A run of the top 15 only: relevant documents below it count as not retrieved."""
    _, _, scores, relevance = _data(5)
    want, qrels, run = _ranx(scores, relevance, METRICS, depth=15)
    got = rc.evaluate_run(run, qrels, METRICS)
    for m in METRICS:
        assert got[m] == pytest.approx(want[m], abs=1e-9), m


@pytest.mark.parametrize("seed, group", [(6, 4), (7, 12), (8, 40)])
def test_tie_heavy_ranx_lies_within_the_tie_range(seed, group):
    queries, docs, scores, relevance = _data(seed, tie_group=group)
    want, qrels, run = _ranx(scores, relevance, METRICS)
    dense = rc.evaluate(
        queries, docs, relevance=relevance, metrics=METRICS, similarity="dot", ties="average"
    )
    from_run = rc.evaluate_run(run, qrels, METRICS, ties="average")
    wide = 0
    for m in METRICS:
        for result in (dense, from_run):
            lo, hi = result.tie_range(m)
            assert lo - 1e-12 <= want[m] <= hi + 1e-12, (m, lo, want[m], hi)
            assert lo - 1e-12 <= result[m] <= hi + 1e-12
        assert dense.tie_range(m) == pytest.approx(from_run.tie_range(m), abs=1e-12)
        assert dense[m] == pytest.approx(from_run[m], abs=1e-12)
        wide += dense.tie_range(m)[1] - dense.tie_range(m)[0] > 1e-6
    assert wide >= 4  # the ties matter: the bounds are not one value


# issue 31's measures: ranx's names -> ours (binary relevance: ranx's rbp and dcg weigh by grade)
ISSUE31 = {"mrr@10": "mrr@10", "f1@5": "f1@5", "rbp@0.8": "rbp.8", "dcg@10": "dcg@10"}


@pytest.mark.parametrize("seed", [0, 1])
def test_issue31_measures_equal_ranx(seed):
    """mrr@K, f1@K, rbp and dcg@K: from a run and from embeddings, as ranx (binary qrels)."""
    queries, docs, scores, relevance = _data(seed)
    binary = {q: {d: int(g >= 2) for d, g in rel.items()} for q, rel in relevance.items()}
    want, qrels, run = _ranx(scores, binary, list(ISSUE31.values()))
    from_run = rc.evaluate_run(run, qrels, list(ISSUE31))
    dense = rc.evaluate(queries, docs, relevance=binary, metrics=list(ISSUE31), similarity="dot")
    for ours, theirs in ISSUE31.items():
        assert from_run[ours] == pytest.approx(want[theirs], abs=1e-9), ours
        assert dense[ours] == pytest.approx(want[theirs], abs=1e-9), ours


def test_issue31_measures_under_ties_agree_between_evaluate_and_evaluate_run():
    """The same tie-heavy data through both paths: every policy gives one number."""
    queries, docs, scores, relevance = _data(9, tie_group=6)
    binary = {q: {d: int(g >= 2) for d, g in rel.items()} for q, rel in relevance.items()}
    _, qrels, run = _ranx(scores, binary, ["mrr@10"])
    names = ["mrr@10", "f1@5", "recall_cap@10", "rbp@0.8", "dcg@10", "gm_map", "iprec_11pt"]
    for ties in ("pessimistic", "optimistic", "average"):
        metrics = names
        dense = rc.evaluate(
            queries, docs, relevance=binary, metrics=metrics, similarity="dot", ties=ties
        )
        from_run = rc.evaluate_run(run, qrels, metrics, ties=ties)
        for m in metrics:
            assert dense[m] == pytest.approx(from_run[m], abs=1e-12), (ties, m)
            assert dense.tie_range(m) == pytest.approx(from_run.tie_range(m), abs=1e-12), m


def test_graded_dcg_equals_ranx_and_judgement_measures_need_a_run():
    """dcg@K keeps the grades as gains (ranx's dcg) in both paths; bpref and the RBP
    residual tell judged from unjudged documents: in evaluate every gallery item not
    relevant is judged non-relevant, so its bpref is ranx's with qrels that judge every
    document (grade 0 where the relevance lists none) and its residual is 0."""
    queries, docs, scores, relevance = _data(2)
    want, qrels, run = _ranx(scores, relevance, ["dcg@10"])
    dense = rc.evaluate(
        queries,
        docs,
        relevance=relevance,
        metrics=["dcg@10", "bpref", "rbp_residual@0.8"],
        similarity="dot",
    )
    assert dense["dcg@10"] == pytest.approx(want["dcg@10"], abs=1e-9)
    assert rc.evaluate_run(run, qrels, ["dcg@10"])["dcg@10"] == pytest.approx(want["dcg@10"])
    complete = {q: {d: rel.get(d, 0) for d in range(N_D)} for q, rel in relevance.items()}
    full, qrels_all, run_all = _ranx(scores, complete, ["bpref"])
    assert dense["bpref"] == pytest.approx(full["bpref"], abs=1e-9)
    assert rc.evaluate_run(run_all, qrels_all, ["bpref"])["bpref"] == pytest.approx(
        full["bpref"], abs=1e-9
    )
    assert dense["rbp_residual@0.8"] == 0.0


@pytest.mark.parametrize("seed, group", [(6, 4), (8, 40)])
def test_issue31_measures_tie_heavy_ranx_lies_within_the_tie_range(seed, group):
    _, _, scores, relevance = _data(seed, tie_group=group)
    binary = {q: {d: int(g >= 2) for d, g in rel.items()} for q, rel in relevance.items()}
    want, qrels, run = _ranx(scores, binary, list(ISSUE31.values()))
    got = rc.evaluate_run(run, qrels, list(ISSUE31), ties="average")
    wide = 0
    for ours, theirs in ISSUE31.items():
        lo, hi = got.tie_range(ours)
        assert lo - 1e-12 <= want[theirs] <= hi + 1e-12, (ours, lo, want[theirs], hi)
        assert lo - 1e-12 <= got[ours] <= hi + 1e-12
        wide += hi - lo > 1e-6
    assert wide >= 3
