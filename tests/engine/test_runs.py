"""evaluate_run: a precomputed ranking (dict, TREC files, ANN arrays) against pytrec_eval
(trec_eval), scikit-learn's ndcg_score, a direct reference and brute force over tie
orders; and every input it refuses."""

from __future__ import annotations

import itertools
import math
import os
import re

import numpy as np
import pytest
import scipy.sparse as sp

from retrieval_checks.engine._runs import evaluate_run
from retrieval_checks.errors import EmptyQueriesError, InputError, MetricNameError
from retrieval_checks.metrics._names import parse_metric
from retrieval_checks.metrics._ranking import aggregate

pytrec_eval = pytest.importorskip("pytrec_eval")

KS = (1, 3, 5, 10, 30)
# ours -> trec_eval's measure (K filled in)
TREC = {
    "map": "map",
    "mrr": "recip_rank",
    "r_precision": "Rprec",
    "ndcg": "ndcg",
    **{f"precision@{k}": f"P_{k}" for k in KS},
    **{f"recall@{k}": f"recall_{k}" for k in KS},
    **{f"map_cut@{k}": f"map_cut_{k}" for k in KS},
    **{f"ndcg@{k}": f"ndcg_cut_{k}" for k in KS},
    **{f"hit_rate@{k}": f"success_{k}" for k in (1, 5, 10)},
}
ALL = list(TREC) + [
    "map@3",
    "map@10",
    "map_capped@5",
    "map@R",
    "medr",
    "meanr",
    "ndcg_exp",
    "ndcg_exp@5",
]


# ----------------------------------------------------------------------------- cases
def random_case(seed, n_q=25, n_docs=60, tie_levels=None, docid=None, level_max=3):
    """Graded qrels and a truncated run (relevant documents left out, queries of the qrels
    missing from the run, run queries without judgements). ``tie_levels``: scores drawn
    from that many values (ties), else distinct scores. ``docid(grade, j)`` names docs."""
    rng = np.random.default_rng(seed)
    docid = docid or (lambda grade, j: f"d{j}")
    grades = {}
    for q in range(n_q):
        judged = rng.choice(n_docs, size=rng.integers(0, 20), replace=False)
        grades[q] = {int(d): int(rng.integers(0, level_max + 1)) for d in judged}
    qrels = {
        f"q{q}": {docid(g, d): g for d, g in grades[q].items()} for q in range(n_q) if q % 11 != 10
    }
    run = {}
    for q in range(n_q + 2):  # q >= n_q: in the run, not in the qrels
        if q % 7 == 3:
            continue  # in the qrels, missing from the run
        depth = int(rng.integers(1, 40))
        docs = rng.choice(n_docs, size=depth, replace=False)
        if tie_levels:
            scores = rng.integers(0, tie_levels, size=depth).astype(float)
        else:
            scores = rng.permutation(depth) + rng.random() * 0.5
        g = grades.get(q, {})
        run[f"q{q}"] = {docid(g.get(int(d), 0), int(d)): float(s) for d, s in zip(docs, scores)}
    return run, qrels


def trec_values(run, qrels, level):
    measures = set(TREC.values())
    return pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=level).evaluate(run)


def compare_with_trec(result, trec, names=TREC):
    """Every query trec_eval evaluates (run and qrels, some relevant) against ours."""
    ids = list(result.query_ids)
    checked = 0
    for qid, found in trec.items():
        i = ids.index(qid)
        if result.n_relevant[i] == 0:
            continue
        for ours in names:
            assert result.per_query[ours][i] == pytest.approx(found[TREC[ours]], abs=1e-12), (
                qid,
                ours,
            )
        checked += 1
    assert checked >= 5
    return checked


# ----------------------------------------------------------------------------- a direct reference
def reference(order, grades, level, spec, depth):
    """One query, one fixed order of its retrieved docs (``order``: docids best first),
    ``grades``: its qrels; the metric by its textbook definition."""
    rel = [grades.get(d, 0) >= level for d in order]
    R = sum(g >= level for g in grades.values())
    ranks = [i + 1 for i, r in enumerate(rel) if r]
    f, K = spec.family, spec.k
    prec = [(j + 1) / r for j, r in enumerate(ranks)]
    if f in ("ndcg", "ndcg_exp"):
        gain = (lambda g: 2.0**g - 1) if f == "ndcg_exp" else float
        cut = K or 10**9
        dcg = sum(gain(grades.get(d, 0)) / math.log2(i + 2) for i, d in enumerate(order[:cut]))
        ideal = sorted((gain(g) for g in grades.values()), reverse=True)[:cut]
        return dcg / sum(x / math.log2(i + 2) for i, x in enumerate(ideal))
    if f == "hit_rate":
        return float(bool(ranks) and ranks[0] <= K)
    if f == "recall":
        return sum(r <= K for r in ranks) / R
    if f == "precision":
        return sum(r <= K for r in ranks) / K
    if f == "map" and K is None:
        return sum(prec) / R
    if f == "map":
        inside = [p for p, r in zip(prec, ranks) if r <= K]
        return sum(inside) / len(inside) if inside else 0.0
    if f == "map_cut":
        return sum(p for p, r in zip(prec, ranks) if r <= K) / R
    if f == "map_capped":
        return sum(p for p, r in zip(prec, ranks) if r <= K) / min(K, R)
    if f == "map@R":
        return sum(p for p, r in zip(prec, ranks) if r <= R) / R
    if f == "r_precision":
        return sum(r <= R for r in ranks) / R
    if f == "mrr":
        return 1.0 / ranks[0] if ranks else 0.0
    if f in ("medr", "meanr"):
        return float(ranks[0]) if ranks else depth + 1.0
    raise AssertionError(f)


# ----------------------------------------------------------------------------- against trec_eval
@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tie_free_runs_equal_trec_eval(seed, level):
    run, qrels = random_case(seed)
    result = evaluate_run(run, qrels, list(TREC), relevance_level=level)
    compare_with_trec(result, trec_values(run, qrels, level))
    assert result.tied_share == 0.0
    for name in TREC:  # no ties: every policy, every extreme is the one value
        tv = result.tie_values[name]
        assert tv["pessimistic"] == tv["optimistic"] == tv["min"] == tv["max"] == result[name]


@pytest.mark.parametrize("level", [1, 2])
def test_every_family_equals_the_direct_reference(level):
    run, qrels = random_case(5, n_q=30)
    result = evaluate_run(run, qrels, ALL, relevance_level=level)
    depth = max(len(v) for v in run.values())
    assert result.config["depth"] == depth
    for i, qid in enumerate(result.query_ids):
        grades = qrels.get(qid, {})
        order = sorted(run.get(qid, {}), key=lambda d: -run[qid][d])
        for name in ALL:
            got = result.per_query[name][i]
            if result.n_relevant[i] == 0:
                assert math.isnan(got)
                continue
            assert got == pytest.approx(
                reference(order, grades, level, parse_metric(name), depth), abs=1e-12
            ), (qid, name)


def test_missing_queries_and_unretrieved_relevant_documents():
    run = {"a": {"x": 3.0, "y": 2.0, "z": 1.0}, "b": {"u": 1.0}, "c": {"v": 5.0}}
    qrels = {
        "a": {"z": 1, "w": 2},
        "b": {"q": 1},
        "d": {"x": 1},
        "c": {"v": 0},
        "10": {"x": 1},
        "9": {"y": 1},
    }
    names = ["map", "mrr", "hit_rate@1", "recall@5", "ndcg", "medr", "meanr", "r_precision"]
    res = evaluate_run(run, qrels, names)
    assert list(res.query_ids) == [
        "9",
        "10",
        "a",
        "b",
        "c",
        "d",
    ]  # digit ids by value, then the rest
    assert list(res.skipped_queries) == [4]  # c: judged, nothing relevant
    assert list(res.n_candidates) == [0, 0, 3, 1, 1, 0]
    assert list(res.n_relevant) == [1, 1, 2, 1, 0, 1]
    # a: z at rank 3, w (grade 2) never retrieved: AP = (1/3) / 2, ndcg = (1/2) / (2 + 1/log2 3)
    assert res.per_query["map"][2] == pytest.approx(1 / 6)
    assert res.per_query["ndcg"][2] == pytest.approx(0.5 / (2 + 1 / math.log2(3)))
    assert res.per_query["recall@5"][2] == 0.5
    for i in (0, 1, 3, 5):  # nothing relevant retrieved, or the query is missing from the run
        assert [res.per_query[n][i] for n in names[:5]] == [0.0] * 5
        assert res.per_query["medr"][i] == res.per_query["meanr"][i] == 4.0  # depth 3 + 1
        assert res.first_relevant_rank[i] == 4
    assert res.first_relevant_rank[4] == 0 and res.first_relevant_rank[2] == 3
    assert res.n_used == 5 and res["mrr"] == pytest.approx((1 / 3) / 5)
    zero = evaluate_run(run, qrels, names, empty_queries="zero", k=10)
    assert (
        zero.n_skipped == 0
        and zero.per_query["map"][4] == 0.0
        and zero.per_query["medr"][4] == 11.0
    )
    assert zero.per_query["medr"][0] == 11.0  # the depth is k
    with pytest.raises(EmptyQueriesError, match="1 of 6 queries.*'c'") as info:
        evaluate_run(run, qrels, names, empty_queries="error")
    assert list(info.value.indices) == [4]
    for ties in ("optimistic", "average"):
        assert evaluate_run(run, qrels, names, ties=ties).per_query["medr"][3] == 4.0


def test_trec_files_read_back_give_the_same_numbers(tmp_path):
    run, qrels = random_case(3, tie_levels=4)
    run_file, qrels_file = tmp_path / "run.txt", tmp_path / "qrels.txt"
    with run_file.open("w") as fh:
        for q, docs in run.items():
            for rank, (d, s) in enumerate(sorted(docs.items(), key=lambda x: -x[1])):
                fh.write(
                    f"{q} Q0 {d} {len(docs) - rank} {s!r} tag\n"
                )  # a misleading rank column: ignored
        fh.write("\n")
    with qrels_file.open("w") as fh:
        for q, docs in qrels.items():
            for d, g in docs.items():
                fh.write(f"{q}\t0\t{d}\t{g}\n")
    for ties in ("pessimistic", "average"):
        a = evaluate_run(run, qrels, ALL, ties=ties)
        for r, j in ((run_file, qrels_file), (str(run_file), qrels), (run, str(qrels_file))):
            b = evaluate_run(r, j, ALL, ties=ties)
            assert list(a.query_ids) == list(b.query_ids)
            for name in ALL:
                np.testing.assert_array_equal(a.per_query[name], b.per_query[name])
                assert a.tie_values[name] == b.tie_values[name]


def _as_arrays(run, n_q, width):
    """{row: {index: score}} -> (indices, scores) padded with -1 (and junk scores there)."""
    idx = np.full((n_q, width), -1, np.int64)
    val = np.full((n_q, width), np.nan, np.float32)
    for q in range(n_q):
        docs = sorted(run.get(q, {}).items(), key=lambda x: -x[1])
        idx[q, : len(docs)] = [d for d, _ in docs]
        val[q, : len(docs)] = [s for _, s in docs]
    return idx, val


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "average"])
def test_ann_arrays_equal_the_equivalent_dict(ties):
    rng = np.random.default_rng(7)
    n_q, n_docs = 12, 40
    run, grades = {}, np.zeros((n_q, n_docs), np.int64)
    for q in range(n_q):
        depth = int(rng.integers(0, 15)) if q != 4 else 0
        docs = rng.choice(n_docs, size=depth, replace=False)
        run[q] = {int(d): float(np.float32(rng.integers(0, 5) / 4)) for d in docs}
        judged = rng.choice(n_docs, size=8, replace=False)
        grades[q, judged] = rng.integers(0, 3, size=8)
    grades[0] = 0  # a query without a relevant document
    names = ALL
    as_dict = evaluate_run(
        run,
        {q: {d: int(g) for d, g in enumerate(grades[q]) if g} for q in range(n_q)},
        names,
        ties=ties,
        relevance_level=1,
    )
    assert list(as_dict.query_ids) == [str(q) for q in range(n_q)]
    arrays = _as_arrays(run, n_q, 16)
    qrels_forms = [
        grades,
        sp.csr_matrix(grades),
        {q: {d: int(g) for d, g in enumerate(grades[q]) if g} for q in range(n_q)},
    ]
    for qrels in qrels_forms:
        res = evaluate_run(arrays, qrels, names, ties=ties)
        np.testing.assert_array_equal(res.query_ids, np.arange(n_q))
        for name in names:
            np.testing.assert_allclose(
                res.per_query[name], as_dict.per_query[name], rtol=0, atol=1e-12
            )
        np.testing.assert_array_equal(res.n_candidates, as_dict.n_candidates)
        np.testing.assert_array_equal(res.first_relevant_rank, as_dict.first_relevant_rank)
    # relevant-index lists (binary): the same as grades all 1
    binary = [list(np.flatnonzero(grades[q])) for q in range(n_q)]
    a = evaluate_run(arrays, binary, names, ties=ties)
    b = evaluate_run(
        arrays, {q: {int(d): 1 for d in binary[q]} for q in range(n_q)}, names, ties=ties
    )
    c = evaluate_run(arrays, {q: binary[q] for q in range(n_q)}, names, ties=ties)
    for name in names:
        np.testing.assert_array_equal(a.per_query[name], b.per_query[name])
        np.testing.assert_array_equal(a.per_query[name], c.per_query[name])
    assert evaluate_run(arrays, grades, ["map"]).config["n_gallery"] == n_docs


# ----------------------------------------------------------------------------- ties
def pessimistic_docid(grade, j):  # trec_eval breaks ties by docid descending: low grades first
    return f"{9 - grade}-{j:03d}"


def optimistic_docid(grade, j):  # high grades first
    return f"{grade}-{j:03d}"


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize(
    "ties,docid", [("pessimistic", pessimistic_docid), ("optimistic", optimistic_docid)]
)
def test_tie_heavy_runs_equal_trec_eval_with_ordered_docids(ties, docid, level):
    run, qrels = random_case(11, tie_levels=3, docid=docid)
    result = evaluate_run(run, qrels, list(TREC), ties=ties, relevance_level=level)
    assert result.tied_share > 0.3
    compare_with_trec(result, trec_values(run, qrels, level))
    # the other policy is not what trec_eval computed here: the test can fail
    other = evaluate_run(
        run,
        qrels,
        ["map", "ndcg"],
        ties="optimistic" if ties == "pessimistic" else "pessimistic",
        relevance_level=level,
    )
    trec = trec_values(run, qrels, level)
    assert any(
        abs(other.per_query["map"][list(other.query_ids).index(q)] - v["map"]) > 1e-6
        for q, v in trec.items()
    )


def _orders(docs):
    """Every order of ``docs`` ({docid: score}) that sorts by decreasing score."""
    groups = [
        list(g)
        for _, g in itertools.groupby(sorted(docs, key=lambda d: -docs[d]), key=lambda d: docs[d])
    ]
    for parts in itertools.product(*(itertools.permutations(g) for g in groups)):
        yield [d for part in parts for d in part]


@pytest.mark.parametrize("level", [1, 2])
def test_average_is_the_mean_over_tie_orders_and_lies_between(level):
    rng = np.random.default_rng(3)
    run, qrels = {}, {}
    for q in range(14):
        n = int(rng.integers(1, 8))
        run[f"q{q}"] = {f"d{j}": float(rng.integers(0, 3)) for j in range(n)}
        qrels[f"q{q}"] = {f"d{j}": int(rng.integers(0, 4)) for j in range(9) if rng.random() < 0.6}
    # one tie group of 6 (720 orders; of 7, 5,040 orders cost ~3 s and test nothing more),
    # relevant items inside it and outside the run (d6, d8)
    run["q0"] = {f"d{j}": 1.0 for j in range(6)}
    qrels["q0"] = {"d0": 3, "d1": 1, "d2": 2, "d6": 1, "d8": 2}
    names = ALL + ["map@1", "map@2", "hit_rate@2", "map_capped@2", "ndcg_exp@2"]
    names = [n for n in dict.fromkeys(names) if not n.endswith("@30")]
    avg = evaluate_run(run, qrels, names, ties="average", relevance_level=level)
    pess = evaluate_run(run, qrels, names, ties="pessimistic", relevance_level=level)
    opt = evaluate_run(run, qrels, names, ties="optimistic", relevance_level=level)
    depth = 7
    for name in names:
        spec = parse_metric(name)
        lo, hi = np.full(len(run), np.nan), np.full(len(run), np.nan)
        for i, qid in enumerate(avg.query_ids):
            if avg.n_relevant[i] == 0:
                continue
            values = [reference(o, qrels[qid], level, spec, depth) for o in _orders(run[qid])]
            assert avg.per_query[name][i] == pytest.approx(np.mean(values), abs=1e-12), (qid, name)
            lo[i], hi[i] = min(values), max(values)
            assert lo[i] - 1e-12 <= avg.per_query[name][i] <= hi[i] + 1e-12
            if (
                spec.family != "map" or spec.k is None
            ):  # monotone in rank: the two policies are the extremes
                best, worst = (opt, pess) if spec.higher_is_better else (pess, opt)
                assert worst.per_query[name][i] == pytest.approx(lo[i], abs=1e-12), (qid, name)
                assert best.per_query[name][i] == pytest.approx(hi[i], abs=1e-12), (qid, name)
        assert avg.tie_values[name]["min"] == pytest.approx(aggregate(spec, lo), abs=1e-12), name
        assert avg.tie_values[name]["max"] == pytest.approx(aggregate(spec, hi), abs=1e-12), name
        assert avg.tie_values[name]["pessimistic"] == pess[name]
        assert avg.tie_values[name]["optimistic"] == opt[name]
    assert avg.first_relevant_rank[0] == pytest.approx(avg.per_query["meanr"][0])
    assert avg.per_query["ndcg"][0] < opt.per_query["ndcg"][0]
    assert avg.per_query["ndcg"][0] > pess.per_query["ndcg"][0]


# ----------------------------------------------------------------------------- scikit-learn
def test_graded_ndcg_equals_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    n_q, n_docs = 20, 30
    grades = rng.integers(0, 4, size=(n_q, n_docs))
    grades[:, 0] = 3  # every query has a relevant document (sklearn scores all-zero rows 0)
    scores = rng.random((n_q, n_docs))  # no ties: sklearn's ignore_ties changes nothing
    order = np.argsort(-scores, axis=1)
    arrays = (order, np.take_along_axis(scores, order, axis=1))
    for k in (None, 1, 5, 10):
        ours = evaluate_run(arrays, grades, ["ndcg" if k is None else f"ndcg@{k}"])
        name = next(iter(ours))
        expected = [
            metrics.ndcg_score(grades[i : i + 1], scores[i : i + 1], k=k) for i in range(n_q)
        ]
        np.testing.assert_allclose(ours.per_query[name], expected, rtol=0, atol=1e-12)
        assert ours[name] == pytest.approx(metrics.ndcg_score(grades, scores, k=k), abs=1e-12)
    # with ties, sklearn's default (ignore_ties=False) averages over tie orders: our "average"
    tied = np.round(scores * 3) / 3
    order = np.argsort(-tied, axis=1, kind="stable")
    arrays = (order, np.take_along_axis(tied, order, axis=1))
    for k in (None, 5):
        ours = evaluate_run(arrays, grades, ["ndcg" if k is None else f"ndcg@{k}"], ties="average")
        name = next(iter(ours))
        expected = [metrics.ndcg_score(grades[i : i + 1], tied[i : i + 1], k=k) for i in range(n_q)]
        np.testing.assert_allclose(ours.per_query[name], expected, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- the result
def test_the_result_works_like_an_evaluate_result():
    run, qrels = random_case(2, tie_levels=3)
    res = evaluate_run(
        run, qrels, ["map", "ndcg@10", "mrr", "medr"], ties="average", confidence=0.9
    )
    assert res.config["similarity"] == "run" and res.config["source"] == "run"
    assert (
        res.config["confidence"] == 0.9
        and res.config["seed"] == 0
        and res.config["ties"] == "average"
    )
    assert res["MAP"] == res["map"] and res.n_queries == len(res.query_ids) == 26  # q10: in neither
    assert res.thresholds == {} and res.pair_counts == {}
    lo, hi = res.tie_range("ndcg@10")
    assert lo <= res["ndcg@10"] <= hi and lo < hi
    assert "ties:" in res.tie_note("ndcg@10")
    assert res.measure("map").value == res["map"]
    assert res.to_dict(per_query=True)["metrics"]["mrr"] == res["mrr"]
    assert res.query_fingerprint()["n_gallery"] == res.config["n_gallery"]


def test_depth_k_is_the_run_cut_to_its_top_k():
    run, qrels = random_case(4)
    cut = {q: dict(sorted(d.items(), key=lambda x: -x[1])[:5]) for q, d in run.items()}
    a, b = evaluate_run(run, qrels, ALL, k=5), evaluate_run(cut, qrels, ALL)
    for name in ALL:
        np.testing.assert_array_equal(a.per_query[name], b.per_query[name])
    assert a.config["depth"] == 5 and a.n_candidates.max() == 5
    with pytest.raises(InputError, match="k=2: query 'a' has documents tied"):
        evaluate_run({"a": {"x": 2.0, "y": 1.0, "z": 1.0}}, {"a": {"x": 1}}, ["map"], k=2)
    assert (
        evaluate_run({"a": {"x": 2.0, "y": 1.0, "z": 1.0}}, {"a": {"y": 1}}, ["map"], k=1)["map"]
        == 0.0
    )


# ----------------------------------------------------------------------------- refusals
RUN = {"q1": {"a": 2.0, "b": 1.0}}
QRELS = {"q1": {"a": 1}}


@pytest.mark.parametrize(
    "metric,why",
    [
        ("pair_precision@t=0.5", "pair metrics"),
        ("recall_at_precision@0.9", "pair metrics"),
        ("grouped_recall@10", "grouped recall"),
        ("discriminant_ratio", "embedding set"),
        ("i2t_recall@1", "evaluate_image_text"),
    ],
)
def test_metrics_a_run_cannot_give_are_refused(metric, why):
    with pytest.raises(MetricNameError, match=f"cannot be computed from a run: .*{why}"):
        evaluate_run(RUN, QRELS, ["map", metric])


def test_bad_metric_names_and_options_are_refused():
    with pytest.raises(MetricNameError, match="Did you mean 'recall@10'"):
        evaluate_run(RUN, QRELS, ["recal@10"])
    with pytest.raises(MetricNameError, match="metrics is empty"):
        evaluate_run(RUN, QRELS, [])
    with pytest.raises(MetricNameError, match="a name or a list"):
        evaluate_run(RUN, QRELS, 3)
    with pytest.raises(InputError, match="ties"):
        evaluate_run(RUN, QRELS, ["map"], ties="random")
    with pytest.raises(InputError, match="empty_queries"):
        evaluate_run(RUN, QRELS, ["map"], empty_queries="drop")
    with pytest.raises(InputError, match="confidence"):
        evaluate_run(RUN, QRELS, ["map"], confidence=95)
    for bad in (0, 1.5, True, "1"):
        with pytest.raises(InputError, match="relevance_level="):
            evaluate_run(RUN, QRELS, ["map"], relevance_level=bad)
    for bad in (0, -3, 2.0):
        with pytest.raises(InputError, match="k="):
            evaluate_run(RUN, QRELS, ["map"], k=bad)
    assert evaluate_run(RUN, QRELS, "map@100")["map@100"] == 1.0  # K beyond the run: fine


@pytest.mark.parametrize(
    "run,match",
    [
        ({"q1": {"a": float("nan")}}, r"run\['q1'\]\['a'\]: score nan is not finite"),
        ({"q1": {"a": float("inf"), "b": 1.0}}, "score inf is not finite"),
        ({"q1": {"a": "high"}}, "score 'high' is not a number"),
        ({"q1": {"a": True}}, "score True is not a number"),
        (
            {"q1": {"a": 10**400, "b": 1.0}},
            r"run\['q1'\]\['a'\]: score an integer of about 401 digits is beyond the float64",
        ),
        ({"q1": [("a", 1.0)]}, r"run\['q1'\] is a list"),
        ({"q1": {"a b": 1.0}}, "document id 'a b'"),
        ({"q1": {"a\u200b": 1.0}}, r"run\['q1'\]: the document id 'a\\u200b' holds U\+200B"),
        ({"q1\ufeff": {"a": 1.0}}, r"run: the query id 'q1\\ufeff' holds U\+FEFF"),
        ({1: {"a": 1.0}, "1": {"b": 1.0}}, "the same id"),
        ({"q1": {1: 1.0, "1": 2.0}}, "the same id"),
        ({}, "run is empty"),
        ({"q1": {}}, "run is empty"),
        ([("q1", "a", 1.0)], "run is a list"),
        ({"x": {"a": 1.0}}, "No query id of the run is in the qrels"),
    ],
)
def test_bad_runs_are_refused(run, match):
    with pytest.raises(InputError, match=match):
        evaluate_run(run, QRELS, ["map"])


@pytest.mark.parametrize(
    "qrels,match",
    [
        ({"q1": {"a": -2}}, r"qrels\['q1'\]\['a'\]: grade -2 is not an integer >= -1"),
        ({"q1": {"a": 1.5}}, "grade 1.5 is not an integer"),
        ({"q1": {"a": True}}, "grade True"),
        ({"q1": {"a": "1"}}, "grade '1'"),
        ({"q1": ["a"]}, r"qrels\['q1'\] is a list"),
        ({"q1": {None: 1}}, "document id None"),
        ([["a"]], "qrels is a list"),
    ],
)
def test_bad_qrels_are_refused(qrels, match):
    with pytest.raises(InputError, match=match):
        evaluate_run(RUN, qrels, ["map"])
    assert (
        evaluate_run(RUN, {"q1": {"a": 1.0, "b": 0}}, ["map"])["map"] == 1.0
    )  # 1.0 is a whole grade


def test_no_relevant_query_at_all_is_refused():
    with pytest.raises(
        EmptyQueriesError, match="None of the 1 queries has a judged document of any grade above 0"
    ):
        evaluate_run(RUN, {"q1": {"a": 0}}, ["map"])
    with pytest.raises(EmptyQueriesError, match="relevance_level=2"):
        evaluate_run(RUN, QRELS, ["map"], relevance_level=2)


@pytest.mark.parametrize(
    "lines,match",
    [
        (
            "q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0\n",
            r"run.txt:2: a TREC run line has 6 fields .* found 5: 'q1 Q0 b 2 1.0'\.$",
        ),
        ("q1 0 a 1\n", r"found 4: 'q1 0 a 1'\. It reads as a qrels line .* The run comes first\."),
        ("# c\nq1 Q0 a 1 2.0 t x y\nq1 Q0 a 2 1.0 t\n", r"run.txt:3: document 'a' appears twice"),
        (
            "q1 Q0 a 1 2.0 t\n\nq1 Q0 a 3 1.0 t\n",
            r"run.txt:3: document 'a' appears twice for query 'q1' \(also on line 1\)",
        ),
        ("q1 Q0 a 1 high t\n", r"run.txt:1: the score \(5th field\) 'high' is not a number"),
        ("q1 Q0 a 1 nan t\n", r"run.txt:1: score nan is not finite"),
        ("q1 Q0 a 1 -inf t\n", r"run.txt:1: score -inf is not finite"),
        ("", "run is empty"),
    ],
)
def test_bad_trec_run_files_are_refused(tmp_path, lines, match):
    path = tmp_path / "run.txt"
    path.write_text(lines)
    with pytest.raises(InputError, match=match):
        evaluate_run(path, QRELS, ["map"])


@pytest.mark.parametrize(
    "lines,match",
    [
        ("q1 0 a\n", r"qrels.txt:1: a TREC qrels line has 4 fields .* found 3: 'q1 0 a'\.$"),
        ("q1 Q0 a 1 2.0 t\n", r"found 6: .* It reads as a run line .* The run comes first\."),
        (
            "q1 0 a 1\nq1 0 a 2\n",
            r"qrels.txt:2: document 'a' is judged twice for query 'q1' \(also on line 1\)",
        ),
        ("q1 0 a 1.5\n", r"qrels.txt:1: grade '1.5' is not a whole number"),
        (
            "q1 0 a -2\n",
            r"qrels.txt:1: grade -2 is not an integer >= -1; grades are -1 \(in the pool",
        ),
        ("q1 0 a 1 extra\n", r"qrels.txt:1: a TREC qrels line has 4 fields"),
        ("q1 0 a 1\n#\nq1 0 a 2\n", r"qrels.txt:3: document 'a' is judged twice"),
    ],
)
def test_bad_trec_qrels_files_are_refused(tmp_path, lines, match):
    path = tmp_path / "qrels.txt"
    path.write_text(lines)
    with pytest.raises(InputError, match=match):
        evaluate_run(RUN, path, ["map"])


def test_missing_files_are_refused(tmp_path):
    with pytest.raises(InputError, match=r"nope.txt: the run file does not exist; check the path"):
        evaluate_run(tmp_path / "nope.txt", QRELS, ["map"])
    with pytest.raises(InputError, match=r"nope.txt: the qrels file does not exist"):
        evaluate_run(RUN, str(tmp_path / "nope.txt"), ["map"])


IDX = np.array([[0, 1, -1], [2, 0, 1]])
VAL = np.array([[0.9, 0.5, np.nan], [0.3, 0.2, 0.1]])  # NaN where there is no result: fine


@pytest.mark.parametrize(
    "run,qrels,match",
    [
        ((IDX, VAL[:, :2]), [[0], [1]], r"one shape, got indices \(2, 3\) and scores \(2, 2\)"),
        ((IDX[0], VAL[0]), [[0]], "one shape"),
        ((IDX.astype(float), VAL), [[0], [1]], "indices must be integers"),
        ((IDX, VAL.astype(str)), [[0], [1]], "scores must be numbers"),
        ((np.array([[0, -2, 1]]), VAL[:1]), [[0]], r"indices\[0, 1\] = -2"),
        ((IDX, np.where(IDX == 2, np.nan, VAL)), [[0], [1]], r"scores\[1, 0\] = nan is not finite"),
        ((IDX, np.where(IDX == 1, np.inf, VAL)), [[0], [1]], r"scores\[0, 1\] = inf"),
        (
            (np.array([[0, 1, 0], [2, 0, 1]]), np.nan_to_num(VAL)),
            [[0], [1]],
            "row 0 retrieves document 0 twice",
        ),
        ((np.full((2, 3), -1), VAL), [[0], [1]], "run is empty"),
        ((IDX, VAL), [[0]], r"one entry per query \(2\), got 1"),
        ((IDX, VAL), np.ones((3, 4)), r"one row per query \(2\), got shape \(3, 4\)"),
        ((IDX, VAL), np.ones((2, 2)), "retrieves document 2 but the grade matrix has 2 columns"),
        (
            (IDX, VAL),
            np.array([[1, 0, 0.5], [0, 1, 0]]),
            r"qrels\[0, 2\]: grade 0.5 is not an integer",
        ),
        ((IDX, VAL), sp.csr_matrix(np.array([[1, 0, 0], [0, -2, 0]])), r"qrels\[1, 1\]: grade -2"),
        ((IDX, VAL), {5: [0]}, "key 5 is not a row of the run"),
        ((IDX, VAL), {"00": [0]}, "key '00' is not a row"),
        ((IDX, VAL), {" 0": [0]}, "key ' 0' is not a row"),
        ((IDX, VAL), {0.0: [0]}, "key 0.0 is not a row"),
        ((IDX, VAL), {"0": [0], 0: [1]}, "keys '0' and 0 are the same query"),
        ((IDX, VAL), {0: ["01"]}, r"qrels\[0\]: document '01' is not an index"),
        ((IDX, VAL), {0: {1: 1, "1": 2}}, r"qrels\[0\]: document 1 is given twice"),
        ((IDX, VAL), {0: [-1]}, r"qrels\[0\]: document -1 is not an index"),
        ((IDX, VAL), {0: [1, 1]}, r"qrels\[0\]: document 1 is given twice"),
        ((IDX, VAL), {0: {1: -3}}, r"qrels\[0\]\[1\]: grade -3"),
        (
            (IDX, VAL),
            np.array([[1e30, 0, 0], [0, 1, 0]]),
            r"qrels\[0, 0\]: grade 1e\+30 is beyond the 64-bit",
        ),
        (
            (IDX, VAL),
            {0: [2**70]},
            r"qrels\[0\]: document .* is not an index >= 0 within the 64-bit",
        ),
        ((IDX, VAL), {0: {2**63: 1}}, r"qrels\[0\]: document .* within the 64-bit"),
        ((IDX, VAL), "qrels.txt", "qrels is a str"),
    ],
)
def test_bad_arrays_are_refused(run, qrels, match):
    with pytest.raises(InputError, match=match):
        evaluate_run(run, qrels, ["map"])


def test_distances_in_place_of_scores_are_refused():
    """faiss's L2 search gives distances, nearest first: rising along every row. A run ranks
    the highest score first, so they would rank every list in reverse (a new user's trial
    did, silently). Refused, naming the fix; their negatives are the same ranking."""
    rng = np.random.default_rng(0)
    dist = np.sort(rng.random((6, 4)), axis=1)
    idx = np.tile(np.arange(4), (6, 1))
    idx[0, 3] = -1  # a missing result (faiss: -1 with a huge distance) is not read
    dist[0, 3] = 3.4e38
    qrels = [[0]] * 6
    with pytest.raises(InputError, match=r"rise along every row .* \(indices, -distances\)"):
        evaluate_run((idx, dist), qrels, ["mrr"])
    assert evaluate_run((idx, -dist), qrels, ["mrr"])["mrr"] == 1.0
    # a row that falls somewhere: scores, in whatever column order (ranked by score)
    mixed = dist.copy()
    mixed[1] = mixed[1][::-1]
    assert evaluate_run((idx, mixed), qrels, ["mrr"])["mrr"] < 1.0
    # equal scores along every row (all ties) are not distances
    evaluate_run((idx, np.ones((6, 4))), qrels, ["mrr"])


def test_arrays_accept_what_they_should():
    res = evaluate_run((IDX, VAL), [[1], [0, 2]], ["map", "mrr", "recall@1"])
    # ids are compared as text: a JSON file's string keys are the rows and indices they spell
    for text in ({"0": ["1"], "1": ["0", "2"]}, {"0": {"1": 1}, 1: {0: 1, "2": 1}}):
        assert dict(evaluate_run((IDX, VAL), text, ["map", "mrr", "recall@1"])) == dict(res)
    np.testing.assert_allclose(res.per_query["map"], [0.5, (1 + 2 / 2) / 2])
    np.testing.assert_array_equal(res.per_query["recall@1"], [0.0, 0.5])
    assert dict(evaluate_run([IDX, VAL], [[1], [0, 2]], ["map", "mrr", "recall@1"])) == dict(res)
    torch = pytest.importorskip("torch")
    same = evaluate_run(
        (torch.as_tensor(IDX), torch.as_tensor(VAL)), [[1], [0, 2]], ["map", "mrr", "recall@1"]
    )
    assert dict(same) == dict(res)


# ----------------------------------------------------------------------------- text files: one set of rules
# (retrieval_checks._textfiles: BOM, encoding, number grammar, separators, unreadable files)
BOM_RUN = "q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\nq2 Q0 c 1 3.0 t\nq2 Q0 a 2 2.0 t\n"
BOM_QRELS = "q1 0 a 1\nq1 0 b 1\nq2 0 a 1\n"


@pytest.mark.parametrize("side", ["run", "qrels", "both"])
def test_a_utf8_byte_order_mark_at_the_start_is_not_part_of_the_first_id(tmp_path, side):
    plain_run, plain_qrels = tmp_path / "run.txt", tmp_path / "qrels.txt"
    plain_run.write_text(BOM_RUN, encoding="utf-8")
    plain_qrels.write_text(BOM_QRELS, encoding="utf-8")
    expected = evaluate_run(plain_run, plain_qrels, ["map"])
    assert expected["map"] == pytest.approx(0.75)
    run, qrels = tmp_path / "bom_run.txt", tmp_path / "bom_qrels.txt"
    run.write_text(BOM_RUN, encoding="utf-8-sig" if side in ("run", "both") else "utf-8")
    qrels.write_text(BOM_QRELS, encoding="utf-8-sig" if side in ("qrels", "both") else "utf-8")
    got = evaluate_run(run, qrels, ["map"])
    assert got["map"] == expected["map"] and list(got.query_ids) == ["q1", "q2"]
    assert got.skipped_queries.size == 0


def test_a_byte_order_mark_inside_the_file_is_refused(tmp_path):
    path = tmp_path / "run.txt"
    path.write_text(
        BOM_RUN + "\ufeffq3 Q0 a 1 1.0 t\n", encoding="utf-8"
    )  # two files joined with cat
    with pytest.raises(InputError, match=r"run.txt:5: a byte-order mark \(U\+FEFF\)"):
        evaluate_run(path, QRELS, ["map"])
    path.write_text(
        BOM_RUN + "q3 Q0 a\ufeff 1 1.0 t\n", encoding="utf-8"
    )  # inside an id: an invisible character
    with pytest.raises(InputError, match=r"run.txt:5: the field 3 .* holds U\+FEFF"):
        evaluate_run(path, QRELS, ["map"])


@pytest.mark.parametrize(
    "score",
    [
        "1_0",
        "1_000.5",
        "\u0661",
        "1\u0660",
        "0x10",
        "1.0.0",
        "+-1",
        "1e",
        "--1",
        "\uff11",
        "1,5",
        "1e400",
        "-1e400",
        "nanx",
        "in",
    ],
)
def test_run_scores_follow_the_file_grammar_not_python_float(tmp_path, score):
    path = tmp_path / "run.txt"
    path.write_text(f"q1 Q0 a 1 {score} t\nq1 Q0 b 2 1.0 t\n", encoding="utf-8")
    with pytest.raises(
        InputError, match=r"run.txt:1: the score \(5th field\) .*(not a number|beyond the float64)"
    ):
        evaluate_run(path, QRELS, ["map"])


@pytest.mark.parametrize(
    "score,value",
    [
        ("+3", 3.0),
        ("-0.5", -0.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("1E2", 100.0),
        ("2.5e-1", 0.25),
        ("007", 7.0),
    ],
)
def test_run_scores_in_the_file_grammar_are_read(tmp_path, score, value):
    path = tmp_path / "run.txt"
    path.write_text(f"q1 Q0 a 1 {score} t\nq1 Q0 b 2 0.2 t\n", encoding="utf-8")
    a_first = value > 0.2
    assert evaluate_run(path, QRELS, ["mrr"])["mrr"] == (1.0 if a_first else 0.5)


@pytest.mark.parametrize(
    "grade",
    [
        "1_0",
        "\u0661",
        "\uff11",
        "1.0",
        "1e1",
        "0x1",
        "+-1",
        "99999999999999999999",
        "9223372036854775808",
    ],
)
def test_qrels_grades_follow_the_file_grammar_and_int64(tmp_path, grade):
    path = tmp_path / "qrels.txt"
    path.write_text(f"q1 0 a {grade}\n", encoding="utf-8")
    with pytest.raises(
        InputError, match=r"qrels.txt:1: grade .*(not a whole number|beyond the 64-bit)"
    ):
        evaluate_run(RUN, path, ["map"])


def test_the_largest_int64_grade_and_a_plus_sign_are_read(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 a +1\nq1 0 b 9223372036854775807\n", encoding="utf-8")
    assert evaluate_run(RUN, path, ["map"])["map"] == 1.0


@pytest.mark.parametrize("grade", [2**63, 2**70, 1e30, np.uint64(2**64 - 1)])
def test_grades_beyond_int64_in_a_dict_are_refused(grade):
    with pytest.raises(InputError, match=r"qrels\['q1'\]\['a'\]: grade .*64-bit"):
        evaluate_run(RUN, {"q1": {"a": grade}}, ["map"])


@pytest.mark.parametrize(
    "line,char",
    [
        (
            "q1\u00a0Q0 a 1 2.0 t",
            "U+00A0",
        ),  # a no-break space: Python's split() splits there, trec_eval does not
        ("q1 Q0 a\u2003 1 2.0 t", "U+2003"),
        ("q1\u200b Q0 a 1 2.0 t", "U+200B"),  # zero-width space: another query id than it looks
        ("q1 Q0 a 1 2.0\x1ct", "U+001C"),  # a file separator control: Python's split() splits there
        ("q1 Q0 a 1 2.0\u2028t", "U+2028"),
    ],
)
def test_fields_split_on_ascii_spaces_and_tabs_only(tmp_path, line, char):
    path = tmp_path / "run.txt"
    path.write_text(line + "\nq1 Q0 b 2 1.0 t\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"run.txt:1: .*holds {re.escape(char)}"):
        evaluate_run(path, QRELS, ["map"])


def test_tabs_and_crlf_line_ends_are_read(tmp_path):
    path = tmp_path / "run.txt"
    path.write_bytes(b"q1\tQ0\ta\t1\t2.0\tt\r\nq1 Q0  b 2 1.0 t\r\n")
    assert evaluate_run(path, QRELS, ["map"])["map"] == 1.0


@pytest.mark.parametrize(
    "content,match",
    [
        (
            "q1 Q0 a 1 2.0 t\nq1 Q0 caf\u00e9 2 1.0 t\n".encode("latin-1"),
            r"run.txt:2: .*not UTF-8: byte 0xe9",
        ),
        ("q1 Q0 a 1 2.0 t\n".encode("utf-16"), r"run.txt:1: .*not UTF-8: UTF-16"),
    ],
)
def test_files_that_are_not_utf8_name_file_line_and_fix(tmp_path, content, match):
    path = tmp_path / "run.txt"
    path.write_bytes(content)
    with pytest.raises(InputError, match=match) as info:
        evaluate_run(path, QRELS, ["map"])
    assert "Save it as UTF-8" in str(info.value)
    qrels = tmp_path / "qrels.txt"
    qrels.write_bytes(b"q1 0 caf\xe9 1\n")
    with pytest.raises(InputError, match=r"qrels.txt:1: .*not UTF-8"):
        evaluate_run(RUN, qrels, ["map"])


def test_unreadable_run_and_qrels_files_name_the_file_and_the_fix(tmp_path):
    with pytest.raises(InputError, match=r"run file is a directory"):
        evaluate_run(tmp_path, QRELS, ["map"])
    with pytest.raises(InputError, match=r"qrels file is a directory"):
        evaluate_run(RUN, tmp_path, ["map"])
    path = tmp_path / "run.txt"
    path.write_text("q1 Q0 a 1 2.0 t\n")
    from shared_setup import permission_denied

    with (
        permission_denied(path),
        pytest.raises(
            InputError,
            match=r"run.txt: the run file is not readable \(permission denied\); .*chmod",
        ),
    ):
        evaluate_run(path, QRELS, ["map"])


def test_run_and_qrels_naming_queries_differently_say_when_one_side_uses_row_numbers():
    run = {"0": {"a": 2.0}, "1": {"b": 1.0}}
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    with pytest.raises(
        InputError,
        match=r"No query id of the run is in the qrels.*it looks like a row number, not "
        r"an id: ids there look like 'q1', 'q2'",
    ):
        evaluate_run(run, qrels, ["map"])


def test_ndcg_exp_grades_beyond_float64_gains_are_exact_not_nan():
    """2^2000 - 1 overflows float64: the gains are scaled per query by a power of two, as
    the engine's (issue 25: the query became NaN and left the mean silently)."""
    assert evaluate_run(RUN, {"q1": {"a": 2000, "b": 1}}, ["ndcg_exp"])["ndcg_exp"] == 1.0
    low = evaluate_run(RUN, {"q1": {"a": 1, "b": 2000}, "q2": {"a": 1}}, ["ndcg_exp", "ndcg"])
    assert low.per_query["ndcg_exp"][0] == pytest.approx(
        1 / math.log2(3), rel=1e-12
    )  # 1 is lost beside 2^2000
    assert low.per_query["ndcg_exp"][1] == 0.0 and low["ndcg_exp"] == pytest.approx(
        0.5 / math.log2(3), rel=1e-12
    )
    assert evaluate_run(RUN, {"q1": {"a": 1023, "b": 1}}, ["ndcg_exp"])["ndcg_exp"] == 1.0


def test_a_fifo_as_run_file_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)  # opening it would wait for a writer forever
    with pytest.raises(InputError, match=r"run.fifo: the run file is not a regular file"):
        evaluate_run(fifo, QRELS, ["map"])
