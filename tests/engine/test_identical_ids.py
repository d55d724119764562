"""BEIR's identical-id rule in ``rc.evaluate`` (``ignore_identical_ids=True``, issue 31):
a gallery item whose id is the query's leaves the query's ranking but stays relevant
(R and the ideal DCG count it), as BEIR's ``EvaluateRetrieval.evaluate(...,
ignore_identical_ids=True)`` pops it from the results and keeps the qrels. Checked per
query and in aggregate, under every tie policy and relevance level, against
``evaluate_run`` on the run with the identical documents removed by hand (BEIR's
procedure), pytrec_eval on untied scores (BEIR's own evaluator), and brute force over the orders of
tied items; and the option fails closed (ids missing, pair metrics, grouped recall).

Cost: about 5 s on one core (small score matrices; at most 720 orders per query), plus
the engine's one-time start (its compiled kernels) where this file runs first.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.engine._runs import evaluate_run
from retrieval_checks.errors import InputError

METRICS = [
    "hit_rate@3",
    "recall@5",
    "precision@5",
    "map",
    "map@5",
    "map_cut@5",
    "map_capped@5",
    "map@R",
    "r_precision",
    "mrr",
    "mrr@3",
    "medr",
    "meanr",
    "ndcg@5",
    "ndcg",
    "ndcg_exp@5",
    "dcg@5",
    "f1@5",
    "recall_cap@5",
    "rbp@0.8",
    "gm_map",
    "iprec_at_recall@0.5",
    "iprec_11pt",
]


def _problem(seed, n_q=8, n_extra=12, levels=4, untied=False):
    """Scores (query x gallery), where gallery item q is query q's own document (same
    id, ArguAna / Quora style); graded judgements that judge the own document for most
    queries (relevant, below level 2, or 0), a query whose only relevant document is its
    own, and own documents judged for other queries."""
    rng = np.random.default_rng(seed)
    n_g = n_q + n_extra
    if untied:
        scores = np.stack([rng.permutation(n_g) for _ in range(n_q)]).astype(np.float32)
    else:
        scores = rng.integers(0, levels, (n_q, n_g)).astype(np.float32)
    qids = [f"x{i}" for i in range(n_q)]
    gids = qids + [f"d{j:02d}" for j in range(n_extra)]
    rel = {}
    for q in range(n_q):
        docs = rng.choice(n_g, int(rng.integers(2, 6)), replace=False)
        rel[q] = {int(d): int(rng.integers(0, 4)) for d in docs}
        rel[q][q] = (3, 1, 0, 2)[q % 4]  # the own document: relevant, grade 1, non-relevant
        if not any(g > 0 for d, g in rel[q].items() if d != q):
            rel[q][n_q + q] = 1  # one relevant document besides the own one
    rel[0] = {0: 2}  # only its own document is relevant: BEIR scores it 0
    return scores, qids, gids, rel


def _ours(scores, qids, gids, rel, metrics, **kw):
    n_q = scores.shape[0]
    return rc.evaluate(
        np.eye(n_q, dtype=np.float32),
        scores.T.copy(),
        relevance=rel,
        query_ids=qids,
        gallery_ids=gids,
        similarity="dot",
        metrics=metrics,
        **kw,
    )


def _beir_run(scores, qids, gids, rel):
    """BEIR's procedure: the whole ranking as a run, each query's own document popped
    from its results, the qrels untouched."""
    run = {
        q: {g: float(scores[i, j]) for j, g in enumerate(gids) if g != q}
        for i, q in enumerate(qids)
    }
    qrels = {qids[q]: {gids[d]: g for d, g in docs.items()} for q, docs in rel.items()}
    return run, qrels


def _by_id(result, qids):
    """Per-query values in the order of ``qids`` (evaluate_run sorts its query ids)."""
    row = {str(q): i for i, q in enumerate(result.query_ids)}
    return {m: v[[row[q] for q in qids]] for m, v in result.per_query.items()}


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "average"])
@pytest.mark.parametrize("seed", [0, 1])
def test_equals_beirs_run_without_the_identical_documents(seed, ties, level):
    scores, qids, gids, rel = _problem(seed)
    got = _ours(
        scores,
        qids,
        gids,
        rel,
        METRICS,
        ties=ties,
        relevance_level=level,
        ignore_identical_ids=True,
    )
    run, qrels = _beir_run(scores, qids, gids, rel)
    want = evaluate_run(run, qrels, METRICS, ties=ties, relevance_level=level)
    got_q, want_q = _by_id(got, qids), _by_id(want, qids)
    for m in METRICS:
        np.testing.assert_allclose(got_q[m], want_q[m], rtol=0, atol=1e-12, err_msg=m)
        assert got[m] == pytest.approx(want[m], abs=1e-12), m
        for kind in ("pessimistic", "optimistic", "min", "max"):
            assert got.tie_values[m][kind] == pytest.approx(want.tie_values[m][kind], abs=1e-12)
    assert got.n_skipped == want.n_skipped and list(got.n_relevant) == [
        int(want.n_relevant[list(want.query_ids).index(q)]) for q in qids
    ]
    assert got.config["identical_ids_dropped"] == len(qids)
    # query 0's only relevant document is its own: counted, never ranked
    assert got.per_query["recall@5"][0] == 0.0 and got.per_query["mrr"][0] == 0.0
    assert got.per_query["medr"][0] == got.n_candidates[0] + 1
    assert got.first_relevant_rank[0] == got.n_candidates[0] + 1
    # self-exclusion drops the own document from the relevant set too: another number
    plain = _ours(scores, qids, gids, rel, ["map"], ties=ties, relevance_level=level)
    assert (plain.n_relevant <= got.n_relevant).all() and plain["map"] != got["map"]


def test_equals_pytrec_eval_on_beirs_measures():
    """BEIR computes its numbers with pytrec_eval on the run without identical documents;
    untied scores, so that pytrec_eval's document-id order of ties does not enter."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    scores, qids, gids, rel = _problem(3, n_q=9, n_extra=20, untied=True)
    run, qrels = _beir_run(scores, qids, gids, rel)
    ours = {
        "map": "map",
        "ndcg@10": "ndcg_cut_10",
        "recall@10": "recall_10",
        "precision@5": "P_5",
        "mrr": "recip_rank",
        "r_precision": "Rprec",
        "ndcg": "ndcg",
        "map_cut@10": "map_cut_10",
    }
    got = _ours(
        scores, qids, gids, rel, list(ours), ignore_identical_ids=True, empty_queries="zero"
    )
    trec = pytrec_eval.RelevanceEvaluator(
        qrels, {"map", "ndcg_cut", "recall", "P"} | {"recip_rank", "Rprec", "ndcg", "map_cut"}
    ).evaluate(run)
    for m, t in ours.items():
        np.testing.assert_allclose(
            got.per_query[m], [trec[q][t] for q in qids], atol=1e-12, err_msg=m
        )


def _direct(order, grade, R, ideal, level):
    """Metrics of one ranking (``order``: gallery indices, best first) by their textbook
    definitions; ``grade``: each item's grade, ``R``: relevant items (own included),
    ``ideal``: every grade > 0 of the query (own included)."""
    rel = [grade.get(g, 0) >= level for g in order]
    ranks = [i + 1 for i, r in enumerate(rel) if r]
    dcg = sum(grade.get(g, 0) / math.log2(i + 2) for i, g in enumerate(order[:5]))
    idcg = sum(x / math.log2(i + 2) for i, x in enumerate(sorted(ideal, reverse=True)[:5]))
    return {
        "map": sum((j + 1) / r for j, r in enumerate(ranks)) / R,
        "mrr@3": 1 / ranks[0] if ranks and ranks[0] <= 3 else 0.0,
        "recall@5": sum(r <= 5 for r in ranks) / R,
        "r_precision": sum(r <= R for r in ranks) / R,
        "map@R": sum((j + 1) / r for j, r in enumerate(ranks) if r <= R) / R,
        "recall_cap@5": sum(r <= 5 for r in ranks) / min(5, R),
        "ndcg@5": dcg / idcg,
        "hit_rate@1": float(bool(ranks) and ranks[0] == 1),
    }


@pytest.mark.parametrize("level", [1, 2])
def test_average_is_the_mean_over_tie_orders_and_the_range_their_extremes(level):
    scores, qids, gids, rel = _problem(5, n_q=5, n_extra=4, levels=2)
    names = ["map", "mrr@3", "recall@5", "r_precision", "map@R", "recall_cap@5", "ndcg@5"]
    names.append("hit_rate@1")
    got = {
        t: _ours(
            scores, qids, gids, rel, names, ties=t, relevance_level=level, ignore_identical_ids=True
        )
        for t in ("average", "pessimistic")
    }
    for q, docs in rel.items():
        R = sum(g >= level for g in docs.values())
        if R == 0:
            continue
        ideal = [g for g in docs.values() if g > 0]
        cand = [j for j in range(len(gids)) if j != q]  # the own document leaves the ranking
        groups = [
            [j for j in cand if scores[q, j] == s]
            for s in sorted({scores[q, j] for j in cand})[::-1]
        ]
        values = [
            _direct([j for grp in perm for j in grp], docs, R, ideal, level)
            for perm in itertools.product(*(itertools.permutations(g) for g in groups))
        ]
        for m in names:
            each = [v[m] for v in values]
            assert got["average"].per_query[m][q] == pytest.approx(np.mean(each), abs=1e-12), (q, m)
            # pessimistic: the least value over the orders (each of these is monotone)
            assert got["pessimistic"].per_query[m][q] == pytest.approx(min(each), abs=1e-12)


def test_labels_and_leave_one_out():
    """With labels the own item is relevant (its label is the query's): R counts it. In
    leave-one-out the row index is the id, as for self-exclusion."""
    x = np.array([[1, 0], [1, 0], [0, 1], [0, 1], [1, 1]], np.float32)
    y = [0, 0, 1, 1, 0]
    loo = rc.evaluate(x, query_labels=y, metrics=["recall@4", "map"], ignore_identical_ids=True)
    plain = rc.evaluate(x, query_labels=y, metrics=["recall@4", "map"])
    assert list(loo.n_relevant) == [3, 3, 2, 2, 3] and list(plain.n_relevant) == [2, 2, 1, 1, 2]
    # recall@4 ranks every other item: all but the own one found
    np.testing.assert_allclose(loo.per_query["recall@4"], [2 / 3, 2 / 3, 1 / 2, 1 / 2, 2 / 3])
    assert plain["recall@4"] == 1.0
    # a gallery with ids: the same as leave-one-out with the ids spelled out
    ids = ["a", "b", "c", "d", "e"]
    both = rc.evaluate(
        x,
        x,
        query_labels=y,
        gallery_labels=y,
        query_ids=ids,
        gallery_ids=ids,
        metrics=["recall@4", "map"],
        ignore_identical_ids=True,
    )
    assert dict(both) == dict(loo)


def test_fails_closed():
    x = np.eye(4, dtype=np.float32)
    kw = dict(query_labels=[0, 0, 1, 1], gallery_labels=[0, 0, 1, 1], metrics=["map"])
    with pytest.raises(
        InputError,
        match=r"ignore_identical_ids=True compares .* query_ids and gallery_ids are missing",
    ):
        rc.evaluate(x, x, ignore_identical_ids=True, **kw)
    with pytest.raises(InputError, match=r"ignore_identical_ids=True .* gallery_ids is missing"):
        rc.evaluate(x, x, query_ids=[1, 2, 3, 4], ignore_identical_ids=True, **kw)
    with pytest.raises(InputError, match=r"ignore_identical_ids='yes': expected True or False"):
        rc.evaluate(x, x, ignore_identical_ids="yes", **kw)
    ids = dict(query_ids=[1, 2, 3, 4], gallery_ids=[1, 2, 3, 4])
    for metric in ("pair_f1@t=0.5", "grouped_recall@1"):
        with pytest.raises(
            InputError, match=rf"ignore_identical_ids=True applies to ranking metrics; {metric}"
        ):
            rc.evaluate(
                x, x, ignore_identical_ids=True, **ids, **{**kw, "metrics": ["map", metric]}
            )
    # ids that never meet: nothing is dropped, and the count says so
    got = rc.evaluate(
        x,
        x,
        ignore_identical_ids=True,
        **{**kw, "query_ids": [1, 2, 3, 4], "gallery_ids": [5, 6, 7, 8]},
    )
    assert got.config["identical_ids_dropped"] == 0 and got.config["ignore_identical_ids"] is True


def test_every_path_of_the_pass_gives_the_same_result(tmp_path):
    """The rule applies where the blocks merge: an executor, a checkpoint (its blocks do
    not depend on the option, so a restart with it reads them back) and the numpy
    counters give the same values as the default pass."""
    from concurrent.futures import ThreadPoolExecutor

    scores, qids, gids, rel = _problem(2)
    names = ["map", "ndcg@5", "mrr@3", "medr", "recall_cap@5"]
    kw = dict(ties="average", relevance_level=2, ignore_identical_ids=True, tile=(3, 16))
    want = _ours(scores, qids, gids, rel, names, **kw)
    with ThreadPoolExecutor(2) as pool:
        runs = [_ours(scores, qids, gids, rel, names, executor=pool, **kw)]
    _ours(
        scores, qids, gids, rel, names, checkpoint=tmp_path, **{**kw, "ignore_identical_ids": False}
    )
    runs.append(_ours(scores, qids, gids, rel, names, checkpoint=tmp_path, **kw))
    runs.append(_ours(scores, qids, gids, rel, names, _use_kernels=False, **kw))
    for got in runs:
        assert dict(got) == dict(want)
        for m in names:
            np.testing.assert_array_equal(got.per_query[m], want.per_query[m])
