"""evaluate_run as trec_eval, BEIR and ranx users run it (issue 31): their files (``#``
comments, runs with more than six fields, qrels grade -1), trec_eval's query sets
(``queries="run"`` / ``"qrels"``), ``relevance_level`` on binary measures only,
``ties="docid"`` (trec_eval's order), BEIR's ``ignore_identical_ids``, and the measures
mrr@K, bpref, rbp / rbp_residual, f1@K, dcg@K, recall_cap@K, success@K, iprec_at_recall,
iprec_11pt and gm_map: against pytrec_eval (trec_eval's code) on files these tests write,
ranx, a direct reference and brute force over tie orders.

Cost: about 6 s on one core (small data; brute force over at most 7! orders per query; one
suite of 31 gates on trec_eval files).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from retrieval_checks.engine._runs import evaluate_run
from retrieval_checks.errors import EmptyQueriesError, InputError, MetricNameError
from retrieval_checks.metrics._names import parse_metric
from retrieval_checks.metrics._ranking import aggregate

pytrec_eval = pytest.importorskip("pytrec_eval")

# ours -> trec_eval's measure name
TREC = {
    "map": "map",
    "mrr": "recip_rank",
    "precision@5": "P_5",
    "recall@10": "recall_10",
    "ndcg": "ndcg",
    "ndcg@10": "ndcg_cut_10",
    "r_precision": "Rprec",
    "success@1": "success_1",
    "success@10": "success_10",
    "map_cut@10": "map_cut_10",
    "bpref": "bpref",
    "iprec_at_recall@0": "iprec_at_recall_0.00",
    "iprec_at_recall@0.3": "iprec_at_recall_0.30",
    "iprec_at_recall@0.5": "iprec_at_recall_0.50",
    "iprec_at_recall@1": "iprec_at_recall_1.00",
    "11pt_avg": "11pt_avg",
}
MEASURES = {"map", "recip_rank", "P", "recall", "ndcg", "ndcg_cut", "Rprec", "success"} | {
    "map_cut",
    "bpref",
    "iprec_at_recall",
    "11pt_avg",
    "gm_map",
}


# ----------------------------------------------------------------------------- data and files
def collection(seed, n_q=24, n_docs=40, tie_levels=5):
    """Graded qrels with -1 grades, queries judged non-relevant only, a judged query
    missing from the run, run queries without judgements; scores with ties."""
    rng = np.random.default_rng(seed)
    run, qrels = {}, {}
    for q in range(n_q):
        docs = rng.choice(n_docs, size=int(rng.integers(1, 25)), replace=False)
        run[str(q + 1)] = {f"D{j:02d}": float(rng.integers(0, tie_levels)) for j in docs}
        if q % 9 != 4:  # q % 9 == 4: in the run, not judged
            judged = rng.choice(n_docs, size=int(rng.integers(1, 15)), replace=False)
            qrels[str(q + 1)] = {f"D{j:02d}": int(rng.integers(-1, 4)) for j in judged}
    qrels["3"] = {d: 0 for d in list(qrels["3"])}  # judged non-relevant only
    qrels["99"] = {"D01": 1, "D02": 2}  # judged, missing from the run
    return run, qrels


def write_trec(tmp_path, run, qrels):
    """The run and qrels in trec_eval's formats, with what trec_eval reads and this library
    once refused: comment lines (also indented), extra fields after the sixth, tabs."""
    lines = ["# run written by test_trec_compat", ""]
    for q, docs in run.items():
        for rank, (d, s) in enumerate(sorted(docs.items(), key=lambda x: -x[1]), 1):
            lines.append(f"{q} Q0 {d} {rank} {s!r} tag extra-{rank} fields")
        lines.append("   # an indented comment")
    (tmp_path / "run.txt").write_text("\n".join(lines) + "\n")
    lines = ["# qrels: grade -1 = in the pool, not judged"]
    for q, docs in qrels.items():
        lines += [f"{q}\t0\t{d}\t{g}" for d, g in docs.items()]
        lines.append("#")
    (tmp_path / "qrels.txt").write_text("\n".join(lines) + "\n")
    return tmp_path / "run.txt", tmp_path / "qrels.txt"


def trec(run, qrels, level):
    return pytrec_eval.RelevanceEvaluator(qrels, MEASURES, relevance_level=level).evaluate(run)


def docid_order(docs):
    """trec_eval's order: score descending, then document id descending."""
    return sorted(sorted(docs, reverse=True), key=lambda d: -docs[d])


# ----------------------------------------------------------------------------- files and query sets
@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("seed", [0, 1])
def test_trec_eval_files_and_query_set_equal_trec_eval(tmp_path, seed, level):
    run, qrels = collection(seed)
    run_file, qrels_file = write_trec(tmp_path, run, qrels)
    names = list(TREC) + ["gm_map"]
    got = evaluate_run(
        run_file, qrels_file, names, ties="docid", queries="run", relevance_level=level
    )
    want = trec(run, qrels, level)
    ids = list(got.query_ids)
    out = set(got.skipped_queries.tolist()) | set(got.outside_queries.tolist())
    used = [q for i, q in enumerate(ids) if i not in out]
    assert got.n_skipped == 0 and got.n_used == len(used)  # outside the set is not skipped
    assert sorted(used) == sorted(want)  # the run's judged queries: "3" (non-relevant only) in
    assert "3" in used and "99" not in used and "5" not in used
    for q, values in want.items():
        i = ids.index(q)
        for ours, theirs in TREC.items():
            assert got.per_query[ours][i] == pytest.approx(values[theirs], abs=1e-12), (q, ours)
    for ours, theirs in TREC.items():
        mean = np.mean([v[theirs] for v in want.values()])
        assert got[ours] == pytest.approx(mean, abs=1e-12), ours
    assert got["gm_map"] == pytest.approx(math.exp(np.mean([v["gm_map"] for v in want.values()])))
    # the default query set differs (the point of the option): the judged non-relevant
    # query is skipped there
    default = evaluate_run(run_file, qrels_file, ["map"], ties="docid", relevance_level=level)
    assert default.n_used != got.n_used


def test_queries_qrels_is_trec_eval_c(tmp_path):
    run, qrels = collection(3)
    want = trec(run, qrels, 1)
    got = evaluate_run(run, qrels, ["map", "mrr", "ndcg@10"], ties="docid", queries="qrels")
    ids = list(got.query_ids)
    assert got.n_used == len(qrels)  # every judged query; "99" retrieved nothing
    assert got.per_query["map"][ids.index("99")] == 0.0
    assert got.per_query["ndcg@10"][ids.index("99")] == 0.0
    total = sum(v["map"] for v in want.values())
    assert got["map"] == pytest.approx(total / len(qrels), abs=1e-12)
    assert ids.index("5") in got.outside_queries  # in the run, not judged: counted, not averaged
    assert got.n_skipped == 0 and got.n_outside == got.n_queries - len(qrels)


def test_queries_option_is_checked():
    run, qrels = collection(0)
    with pytest.raises(InputError, match=r"queries='trec': expected one of 'both', 'run', 'qrels'"):
        evaluate_run(run, qrels, ["map"], queries="trec")
    with pytest.raises(EmptyQueriesError, match="queries='run' leaves no query"):
        evaluate_run({"x": {"a": 1.0}}, {"x": {}, "y": {"a": 1}}, ["map"], queries="run")
    # an explicit empty_queries wins over the query set's default
    skip = evaluate_run(run, qrels, ["map"], queries="run", empty_queries="skip")
    assert list(skip.query_ids).index("3") in skip.skipped_queries


def test_relevance_level_applies_to_binary_measures_only():
    """nDCG keeps the grades (trec_eval -l2): the issue's two-query example."""
    run = {"a": {"x": 3.0, "y": 2.0, "z": 1.0}, "b": {"u": 2.0, "v": 1.0}}
    qrels = {"a": {"x": 1, "y": 2, "z": 0}, "b": {"u": 1, "v": 1}}
    want = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg", "map"}, relevance_level=2).evaluate(run)
    got = evaluate_run(run, qrels, ["ndcg", "map"], relevance_level=2, queries="run")
    assert got["ndcg"] == pytest.approx(np.mean([v["ndcg"] for v in want.values()]), abs=1e-12)
    assert got["map"] == pytest.approx(np.mean([v["map"] for v in want.values()]), abs=1e-12)
    assert got.per_query["ndcg"][1] == 1.0 and got.per_query["map"][1] == 0.0
    # the default query set skips b (no grade >= 2): one value, not trec_eval's mean
    assert evaluate_run(run, qrels, ["ndcg"], relevance_level=2).n_used == 1


def test_minus_one_grades_are_pool_markers():
    run = {"q": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}}
    qrels = {"q": {"a": -1, "b": 0, "c": 1, "e": -1}}
    got = evaluate_run(run, qrels, ["map", "bpref", "ndcg", "rbp_residual@0.5"], ties="docid")
    want = pytrec_eval.RelevanceEvaluator(qrels, {"map", "bpref", "ndcg"}).evaluate(run)["q"]
    assert got["map"] == pytest.approx(want["map"]) and got["map"] == pytest.approx(1 / 3)
    assert got["bpref"] == pytest.approx(want["bpref"])  # a (-1) is not a judged non-relevant
    assert got["bpref"] == 0.0  # b (judged 0) is above c: 1 - min(1, 1) / min(1, 1)
    assert got["ndcg"] == pytest.approx(want["ndcg"])
    # residual: a (-1) and d (no line) are not judged: (1/2)(1 + 1/8) + (1/2)^4
    assert got["rbp_residual@0.5"] == pytest.approx(0.5 * (1 + 0.125) + 0.5**4)


def test_trec_eval_comment_and_field_rules(tmp_path):
    path = tmp_path / "run.txt"
    path.write_text("#qid Q0 doc rank score tag\n1 Q0 a 1 2.0 t more\n  # x\n1 Q0 b 2 1.0 t\n")
    assert evaluate_run(path, {"1": {"b": 1}}, ["mrr"])["mrr"] == 0.5
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 #a 1\n")  # '#' not first on the line: a docid
    assert evaluate_run({"1": {"#a": 1.0}}, qrels, ["mrr"])["mrr"] == 1.0
    path.write_text("1 Q0 a 1 2.0\n")  # five fields: the tag is missing, refused
    with pytest.raises(InputError, match=r"run.txt:1: a TREC run line has 6 fields"):
        evaluate_run(path, {"1": {"a": 1}}, ["mrr"])


# ----------------------------------------------------------------------------- a direct reference
def reference(order, grades, level, spec, depth):
    """One query in one order (docids best first) by the textbook / trec_eval definition."""
    rel = [grades.get(d, 0) >= level for d in order]
    R = sum(g >= level for g in grades.values())
    ranks = [i + 1 for i, r in enumerate(rel) if r]
    f, K = spec.family, spec.k
    if f == "mrr":
        return 1.0 / ranks[0] if ranks and (K is None or ranks[0] <= K) else 0.0
    if f == "f1":
        hits = sum(r <= K for r in ranks)
        p, r = hits / K, hits / R
        return 2 * p * r / (p + r) if p + r else 0.0
    if f == "recall_cap":
        return sum(r <= K for r in ranks) / min(K, R)
    if f == "rbp":
        return (1 - spec.level) * sum(spec.level ** (r - 1) for r in ranks)
    if f == "rbp_residual":
        p = spec.level
        unjudged = [i for i, d in enumerate(order) if grades.get(d, -1) < 0]
        return (1 - p) * sum(p**i for i in unjudged) + p ** len(order)
    if f in ("dcg", "dcg_exp"):
        gain = (lambda g: 2.0**g - 1) if f == "dcg_exp" else float
        cut = K or 10**9
        return sum(
            gain(max(grades.get(d, 0), 0)) / math.log2(i + 2) for i, d in enumerate(order[:cut])
        )
    if f == "bpref":
        N = sum(0 <= g < level for g in grades.values())
        total, nonrel = 0.0, 0
        for d in order:
            g = grades.get(d)
            if g is None or g < 0:
                continue
            if g < level:
                nonrel += 1
            else:
                total += 1 - min(nonrel, R) / min(N, R) if nonrel else 1.0
        return total / R
    if f == "gm_map":
        return sum((j + 1) / r for j, r in enumerate(ranks)) / R
    if f in ("iprec_at_recall", "iprec_11pt"):
        levels = [spec.level] if f == "iprec_at_recall" else [i / 10 for i in range(11)]
        prec = [(j + 1) / r for j, r in enumerate(ranks)]
        out = []
        for x in levels:
            c = max(int(x * R + 0.9), 1)
            out.append(max(prec[c - 1 :]) if c <= len(prec) else 0.0)
        return sum(out) / len(out)
    raise AssertionError(f)


NEW = [
    "mrr@1",
    "mrr@3",
    "f1@2",
    "f1@5",
    "recall_cap@2",
    "recall_cap@5",
    "rbp@0.5",
    "rbp@0.8",
    "rbp_residual@0.7",
    "dcg@3",
    "dcg",
    "dcg_exp@2",
    "bpref",
    "gm_map",
]
PESS_OPT_ONLY = ["iprec_at_recall@0.5", "iprec_11pt"]


def _orders(docs):
    groups = [
        list(g)
        for _, g in itertools.groupby(sorted(docs, key=lambda d: -docs[d]), key=lambda d: docs[d])
    ]
    for parts in itertools.product(*(itertools.permutations(g) for g in groups)):
        yield [d for part in parts for d in part]


def tie_case(seed=3):
    rng = np.random.default_rng(seed)
    run, qrels = {}, {}
    for q in range(14):
        n = int(rng.integers(1, 8))
        run[f"q{q}"] = {f"d{j}": float(rng.integers(0, 3)) for j in range(n)}
        qrels[f"q{q}"] = {f"d{j}": int(rng.integers(-1, 4)) for j in range(9) if rng.random() < 0.6}
    # one tie group of 6 (720 orders; 7 gave 5,040 and tested nothing more), judged
    # relevant, non-relevant and negative items inside it, relevant ones outside the run
    run["q0"] = {f"d{j}": 1.0 for j in range(6)}
    qrels["q0"] = {"d0": 3, "d1": 1, "d2": 0, "d3": -1, "d6": 1, "d8": 2}
    return run, qrels


@pytest.mark.parametrize("level", [1, 2])
def test_new_measures_average_is_the_mean_over_tie_orders(level):
    run, qrels = tie_case()
    names = NEW + PESS_OPT_ONLY
    avg = evaluate_run(run, qrels, names, ties="average", relevance_level=level)
    pess = evaluate_run(run, qrels, names, ties="pessimistic", relevance_level=level)
    opt = evaluate_run(run, qrels, names, ties="optimistic", relevance_level=level)
    dock = evaluate_run(run, qrels, names, ties="docid", relevance_level=level)
    for name in names:
        spec = parse_metric(name)
        lo, hi = np.full(len(run), np.nan), np.full(len(run), np.nan)
        for i, qid in enumerate(pess.query_ids):
            if pess.n_relevant[i] == 0:
                continue
            values = [reference(o, qrels[qid], level, spec, 7) for o in _orders(run[qid])]
            if name in NEW:
                assert avg.per_query[name][i] == pytest.approx(np.mean(values), abs=1e-12), (
                    qid,
                    name,
                )
            lo[i], hi[i] = min(values), max(values)
            best, worst = (opt, pess) if spec.higher_is_better else (pess, opt)
            assert worst.per_query[name][i] == pytest.approx(lo[i], abs=1e-12), (qid, name)
            assert best.per_query[name][i] == pytest.approx(hi[i], abs=1e-12), (qid, name)
            want = reference(docid_order(run[qid]), qrels[qid], level, spec, 7)
            assert dock.per_query[name][i] == pytest.approx(want, abs=1e-12), (qid, name)
        assert pess.tie_values[name]["min"] == pytest.approx(aggregate(spec, lo), abs=1e-12), name
        assert pess.tie_values[name]["max"] == pytest.approx(aggregate(spec, hi), abs=1e-12), name
    assert avg.tied_share > 0.3


def test_interpolated_precision_average_counts_orders_within_a_bound():
    """Exact by counting each tie's orders (brute force above); a tie too large to count
    is refused with the work it needs and the policies that remain."""
    run = {"q": {f"d{j}": 1.0 for j in range(600)}}
    qrels = {"q": {f"d{j}": 1 for j in range(0, 600, 6)}}
    with pytest.raises(InputError, match=r"iprec_at_recall under ties='average'.*ties='docid'"):
        evaluate_run(run, qrels, ["map", "iprec_11pt"], ties="average")
    small = {"q": {f"d{j}": 1.0 for j in range(60)}}
    small_qrels = {"q": {f"d{j}": 1 for j in range(0, 60, 6)}}
    got = evaluate_run(small, small_qrels, ["iprec_at_recall@0.5"], ties="average")
    lo, hi = got.tie_range("iprec_at_recall@0.5")
    assert lo < got["iprec_at_recall@0.5"] < hi


def test_mrr_at_k_is_exact_when_a_tie_straddles_rank_k():
    run = {"q": {"a": 3.0, "b": 2.0, "c": 2.0, "d": 2.0, "e": 1.0}}
    qrels = {"q": {"d": 1}}
    with pytest.raises(InputError, match="tied at score 2.0 on both sides of rank 2"):
        evaluate_run(run, qrels, ["mrr"], k=2)  # cutting the run is refused...
    got = evaluate_run(run, qrels, ["mrr@2"], ties="average")  # ...mrr@2 is not
    assert got["mrr@2"] == pytest.approx(1 / 3 * 1 / 2)  # d at rank 2 with probability 1/3
    assert got.tie_values["mrr@2"]["min"] == 0.0 and got.tie_values["mrr@2"]["max"] == 0.5
    assert evaluate_run(run, qrels, ["mrr@2"], ties="docid")["mrr@2"] == 0.5  # d sorts first
    # ties="docid" also defines the top k where the scores do not (trec_eval -M)
    assert evaluate_run(run, qrels, ["mrr"], k=2, ties="docid")["mrr"] == 0.5


def test_success_is_hit_rate_and_trec_names_are_aliases():
    run, qrels = collection(0)
    got = evaluate_run(run, qrels, ["success@5", "recip_rank", "11pt_avg"])
    assert set(got) == {"hit_rate@5", "mrr", "iprec_11pt"}
    assert got["success@5"] == got["hit_rate@5"]


@pytest.mark.parametrize(
    "name,match",
    [
        ("rbp@1", "persistence p strictly between 0 and 1"),
        ("rbp", "needs a parameter"),
        ("iprec_at_recall@1.5", r"recall level in \[0, 1\]"),
        ("f1", "needs a parameter"),
    ],
)
def test_bad_new_metric_names_are_refused(name, match):
    with pytest.raises(MetricNameError, match=match):
        parse_metric(name)


# ----------------------------------------------------------------------------- BEIR and ranx
def test_ignore_identical_ids_is_beirs_rule():
    run = {"q1": {"q1": 9.0, "a": 2.0, "b": 1.0}, "q2": {"x": 1.0}}
    qrels = {"q1": {"q1": 1, "b": 1}, "q2": {"x": 1}}
    got = evaluate_run(run, qrels, ["recall@10", "mrr"], ignore_identical_ids=True)
    # q1 leaves q1's results but stays relevant: recall 1/2, first relevant b at rank 2
    assert got.per_query["recall@10"][0] == 0.5 and got.per_query["mrr"][0] == 0.5
    assert got.config["identical_ids_dropped"] == 1
    kept = evaluate_run(run, qrels, ["recall@10"])
    assert kept.per_query["recall@10"][0] == 1.0
    with pytest.raises(InputError, match="ignore_identical_ids=1: expected True or False"):
        evaluate_run(run, qrels, ["mrr"], ignore_identical_ids=1)


def test_gm_map_statistics_are_of_the_geometric_mean():
    import retrieval_checks as rc

    run, qrels = collection(4)
    r = evaluate_run(run, qrels, ["gm_map", "map"])
    iv = rc.bootstrap_interval(r, "gm_map", method="percentile", n_resamples=300)
    assert iv.low <= r["gm_map"] <= iv.high and r["gm_map"] < r["map"]
    ap = r.per_query["gm_map"][~np.isnan(r.per_query["gm_map"])]
    assert r["gm_map"] == pytest.approx(math.exp(np.mean(np.log(np.maximum(ap, 1e-5)))))
    with pytest.raises(InputError, match="use method='percentile'"):
        rc.bootstrap_interval(r, "gm_map")  # BCa's jackknife is the arithmetic mean's
    with pytest.raises(InputError, match="gm_map has no paired comparison"):
        rc.compare(r, r, "gm_map")


@pytest.mark.parametrize("empty", ["zero", "skip"])
def test_relevance_level_in_evaluate_as_in_evaluate_run(empty):
    """Embeddings with graded relevance: at relevance_level=2 a query with grade-1 items
    only is empty; under "zero" its nDCG keeps the grades (trec_eval -l2), under "skip"
    it leaves every mean: as evaluate_run, on the same scores."""
    import retrieval_checks as rc

    rng = np.random.default_rng(7)
    n_q, n_d = 6, 15
    scores = np.stack([rng.permutation(n_d) for _ in range(n_q)]).astype(np.float32)
    relevance = {
        q: {int(d): int(rng.integers(1, 4)) for d in rng.choice(n_d, 4, replace=False)}
        for q in range(n_q)
    }
    relevance[0] = {1: 1, 2: 1}  # no grade >= 2
    names = ["ndcg", "ndcg@5", "dcg@5", "map"]
    dense = rc.evaluate(
        np.eye(n_q, dtype=np.float32),
        scores.T.copy(),
        relevance=relevance,
        metrics=names,
        similarity="dot",
        relevance_level=2,
        empty_queries=empty,
    )
    run = {str(q): {str(d): float(scores[q, d]) for d in range(n_d)} for q in range(n_q)}
    qrels = {str(q): {str(d): g for d, g in rel.items()} for q, rel in relevance.items()}
    got = evaluate_run(run, qrels, names, relevance_level=2, empty_queries=empty)
    for m in names:
        assert dense[m] == pytest.approx(got[m], abs=1e-12), m
        np.testing.assert_allclose(dense.per_query[m], got.per_query[m], atol=1e-12)
    if empty == "zero":
        assert dense.per_query["ndcg"][0] > 0 and dense.per_query["map"][0] == 0.0
        want = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg"}, relevance_level=2).evaluate(run)
        assert dense["ndcg"] == pytest.approx(np.mean([v["ndcg"] for v in want.values()]))
    else:
        assert np.isnan(dense.per_query["ndcg"][0]) and dense.n_skipped == 1


def test_docid_ties_belong_to_runs():
    """ties='docid' is an option value everywhere options are read (a suite's run
    dataset takes it); an embedding evaluation has no document ids and refuses it."""
    import retrieval_checks as rc

    x = np.eye(3, dtype=np.float32)
    with pytest.raises(InputError, match="ties='docid' orders equal scores by document id"):
        rc.evaluate(x, query_labels=[0, 0, 1], metrics=["map"], ties="docid")
    with pytest.raises(InputError, match="ties='docid'"):
        rc.evaluate_image_text(x, x, [0, 1, 2], ties="docid")
    with pytest.raises(InputError, match=r"ties='first': expected one of"):
        evaluate_run({"q": {"a": 1.0}}, {"q": {"a": 1}}, ["map"], ties="first")


# ----------------------------------------------------------------------------- no query at the level
@pytest.mark.parametrize("queries", ["run", "qrels"])
def test_no_query_at_the_level_scores_as_trec_eval_under_zero(queries):
    """trec_eval -l2 on judged queries none of which reaches grade 2: the binary measures
    are 0, nDCG keeps the grades; only a query set with nothing to evaluate is refused."""
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"c": 1.0, "d": 3.0}}
    qrels = {"q1": {"a": 1, "b": 0}, "q2": {"c": 1}}
    want = pytrec_eval.RelevanceEvaluator(qrels, {"map", "ndcg"}, relevance_level=2).evaluate(run)
    got = evaluate_run(run, qrels, ["ndcg", "map"], queries=queries, relevance_level=2)
    assert got.n_used == 2 and got.n_skipped == 0
    for ours, theirs in (("ndcg", "ndcg"), ("map", "map")):
        assert got[ours] == pytest.approx(np.mean([v[theirs] for v in want.values()]), abs=1e-12)
    assert got["map"] == 0.0 and got["ndcg"] > 0.5
    # skip / error: every query is empty, nothing is left; the hint names the level, not the ids
    for empty in ("skip", "error"):
        with pytest.raises(EmptyQueriesError, match="relevance_level=2") as info:
            evaluate_run(
                run, qrels, ["map"], queries=queries, relevance_level=2, empty_queries=empty
            )
        assert "ids match" not in str(info.value) and "empty_queries='zero'" in str(info.value)
    # nothing relevant at any grade: every measure is 0 whatever the run -> refused, even under zero
    flat = {"q1": {"a": 0, "b": 0}}
    with pytest.raises(EmptyQueriesError, match="has a judged document of any grade above 0"):
        evaluate_run(run, flat, ["ndcg"], queries=queries, empty_queries="zero")
    # the ids do not match: refused with the ids hint
    with pytest.raises(InputError, match="make the ids match"):
        evaluate_run({"x": {"a": 1.0}}, qrels, ["map"], queries="run", empty_queries="zero")


def test_no_query_at_the_level_in_evaluate_under_zero():
    """The embeddings sibling: graded relevance below the level scores under "zero" (nDCG
    keeps the grades, the binary measures are 0) and is refused under "skip"; labels with
    no shared value are refused under every policy."""
    import retrieval_checks as rc

    scores = np.array([[2.0, 1.0, 0.0], [0.0, 1.0, 3.0]], np.float32)
    relevance = {0: {0: 1}, 1: {1: 1}}
    got = rc.evaluate(
        np.eye(2, dtype=np.float32),
        scores.T.copy(),
        relevance=relevance,
        metrics=["ndcg", "map"],
        similarity="dot",
        relevance_level=2,
        empty_queries="zero",
    )
    run = {str(q): {str(d): float(scores[q, d]) for d in range(3)} for q in range(2)}
    qrels = {str(q): {str(d): g for d, g in r.items()} for q, r in relevance.items()}
    want = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg"}, relevance_level=2).evaluate(run)
    assert got["map"] == 0.0
    assert got["ndcg"] == pytest.approx(np.mean([v["ndcg"] for v in want.values()]), abs=1e-6)
    with pytest.raises(EmptyQueriesError, match="relevance_level=2"):
        rc.evaluate(
            np.eye(2, dtype=np.float32),
            scores.T.copy(),
            relevance=relevance,
            metrics=["ndcg"],
            similarity="dot",
            relevance_level=2,
            empty_queries="skip",
        )
    with pytest.raises(EmptyQueriesError, match="share values"):
        rc.evaluate(
            np.eye(2, dtype=np.float32),
            np.eye(2, dtype=np.float32),
            query_labels=[0, 1],
            gallery_labels=[2, 3],
            metrics=["map"],
            empty_queries="zero",
        )


# ----------------------------------------------------------------------------- the names table
def _names_table():
    """The rows of docs/metrics.md's table of names across libraries: {column: cell}."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    start = text.index("| trec_eval | ranx | BEIR |")
    lines = []
    for line in text[start:].splitlines():
        if not line.startswith("|"):
            break
        lines.append(line)
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [dict(zip(header, (c.strip() for c in ln.strip("|").split("|")))) for ln in lines[2:]]
    return rows, re.compile(r"`([^`]+)`")


def test_every_name_of_the_libraries_table_is_accepted_as_the_table_says():
    """Each trec_eval, ranx, BEIR and pytorch-metric-learning name of the table is an
    alias of the row's measure, unless its cell says "not our `X`" (the library reads it
    as X, another measure) or "not a name here" (refused); every name of the library's
    column is one of its names. Derived from the table: a row added there is checked."""
    import re

    rows, tick = _names_table()
    assert len(rows) >= 20
    seen = 0
    for row in rows:
        ours = {parse_metric(n).name for n in tick.findall(row["retrieval-checks"])}
        assert ours or not any(row[c] for c in ("trec_eval", "ranx", "BEIR")), row
        for col in ("trec_eval", "ranx", "BEIR", "pytorch-metric-learning"):
            cell = row[col]
            for name in tick.findall(re.sub(r"\([^)]*\)", "", cell)):  # not inside notes
                after = cell[cell.index(f"`{name}`") + len(name) + 2 :]
                note = after[: after.index(")") + 1] if after.lstrip().startswith("(") else ""
                seen += 1
                if "not a name here" in note:
                    with pytest.raises(MetricNameError):
                        parse_metric(name)
                elif "not our" in note:  # the measure it is here is named
                    got = parse_metric(name).name
                    assert got not in ours and f"not our `{got}`" in note, (col, name)
                else:
                    assert parse_metric(name).name in ours, (col, name, ours)
    assert seen >= 40


def test_trec_eval_measure_names_are_aliases_of_the_same_measures():
    """trec_eval's names (``P_5``, ``ndcg_cut_10``, ``iprec_at_recall_0.50``...) are
    aliases: evaluate_run given them equals pytrec_eval under them, in canonical names."""
    import re

    run, qrels = collection(2)
    names = [t for t in TREC.values() if t != "recip_rank"] + ["recip_rank"]
    got = evaluate_run(run, qrels, names, queries="run", ties="docid")
    want = trec(run, qrels, 1)
    from retrieval_checks.suites._jsonschema import metric_pattern

    pattern = re.compile(metric_pattern())  # editors' schema takes them too
    for ours, theirs in TREC.items():
        assert parse_metric(theirs).name == parse_metric(ours).name, theirs
        assert pattern.match(theirs), theirs
        value = np.mean([v[theirs] for v in want.values()])
        assert got[theirs] == pytest.approx(value, abs=1e-12), theirs


def test_pytrec_evals_measure_requests_name_the_same_measures():
    """pytrec_eval is asked for ``ndcg_cut.10`` and ``P.5`` (the parameter after a dot, as
    trec_eval's ``-m`` takes it) and answers under ``ndcg_cut_10``: both spellings are
    the same measure here (a new user's ``ndcg_cut.10`` was refused with no suggestion)."""
    import re

    from retrieval_checks.suites._jsonschema import metric_pattern

    pattern = re.compile(metric_pattern())
    for ours, theirs in TREC.items():
        if "_" not in theirs or theirs == "recip_rank":
            continue
        dotted = re.sub(r"_(\d)", r".\1", theirs, count=1)
        if dotted == theirs or not re.search(r"\.\d", dotted):
            continue
        assert parse_metric(dotted).name == parse_metric(ours).name, dotted
        assert pattern.match(dotted), dotted
    run, qrels = collection(2)
    got = evaluate_run(run, qrels, ["ndcg_cut.10", "P.5"], queries="run", ties="docid")
    want = trec(run, qrels, 1)
    assert got["ndcg@10"] == pytest.approx(np.mean([v["ndcg_cut_10"] for v in want.values()]))
    assert got["precision@5"] == pytest.approx(np.mean([v["P_5"] for v in want.values()]))


def test_beirs_map_at_k_spelling_is_refused_not_read_as_torchmetrics_ap():
    """BEIR reports ``MAP@10``, which is pytrec_eval's map_cut_10 (divided by R); the
    library's ``map@10`` divides by the hits in the top 10 and is larger: BEIR's spelling
    would pass a gate BEIR's number fails. It is refused, naming both measures."""
    with pytest.raises(MetricNameError, match=r"'MAP@10'.*map_cut@10.*map@10"):
        parse_metric("MAP@10")
    assert parse_metric("mAP@10").name == "map@10"  # not BEIR's spelling: the contract's alias
    assert parse_metric("MAP@R").name == "map@R" and parse_metric("MAP").name == "map"


def test_a_yaml_run_suite_on_trec_eval_files_gates_trec_evals_numbers(tmp_path):
    """trec_eval's files (comments, extra fields, -1 grades) in a suite's run dataset, gated
    under trec_eval's names with its query set and tie order: each gate's value is
    pytrec_eval's, and a gate above it fails."""
    from retrieval_checks import SuiteRunner, load_suite

    def _id(name):
        return name.replace("@", "_at_")

    run, qrels = collection(3)
    write_trec(tmp_path, run, qrels)
    want = trec(run, qrels, 2)
    lines = [
        "datasets:",
        "  bm25: {type: run, run: run.txt, qrels: qrels.txt, queries: run, relevance_level: 2}",
        "options: {ties: docid}",
        "checks:",
    ]
    for ours, theirs in TREC.items():
        mean = float(np.mean([v[theirs] for v in want.values()]))
        if mean > 1e-6:  # (at_least 0 could never fail: refused)
            lines.append(
                f"  - {{metric: {theirs}, at_least: {mean - 1e-9!r}, id: {_id(ours)}-holds}}"
            )
        lines.append(f"  - {{metric: {theirs}, at_least: {mean + 1e-6!r}, id: {_id(ours)}-above}}")
    (tmp_path / "rc_suite.yaml").write_text("\n".join(lines) + "\n")
    suite = load_suite(tmp_path / "rc_suite.yaml")
    runner = SuiteRunner()
    verdicts = {}
    for case in suite.cases:
        try:
            runner.run(suite, case)
            verdicts[case.id] = True
        except AssertionError:
            verdicts[case.id] = False
    for ours in TREC:
        assert verdicts.get(f"{_id(ours)}-holds", True) and not verdicts[f"{_id(ours)}-above"], ours
    assert sum(verdicts.values()) >= len(TREC) - 2  # the holding gates ran


def test_a_gate_on_a_run_is_not_refused_as_certain():
    """A run ranks only what it retrieved: relevant documents it missed keep hit_rate@K and
    recall@K below 1 at every K, so "K reaches past every non-relevant candidate, its
    value is 1 whatever the model" is false for runs; the gates evaluate (and fail)."""
    import retrieval_checks as rc

    run = {q: {f"d{i}": float(10 - i) for i in range(10)} for q in ("q1", "q2")}
    qrels = {
        q: {d: 1 for d in (last, "x1", "x2", "x3", "x4")}
        for q, last in (("q1", "d9"), ("q2", "d8"))
    }
    got = evaluate_run(run, qrels, ["hit_rate@6", "recall@10"])
    assert got["hit_rate@6"] == 0.0 and got["recall@10"] == 0.2
    with pytest.raises(AssertionError, match="hit_rate@6"):
        rc.assert_metric(got, "hit_rate@6", at_least=0.5)
    with pytest.raises(AssertionError, match="recall@10"):
        rc.assert_metric(got, "recall@10", at_least=0.5)


def test_certain_k_counts_only_the_ranked_relevant_items_under_beirs_rule():
    """Under ignore_identical_ids the own relevant item is never ranked: the K past which
    hit_rate is the same whatever the model counts the ranked relevant items only."""
    import retrieval_checks as rc

    x = np.eye(6, dtype=np.float32)
    ids = [f"i{j}" for j in range(6)]
    rel = {0: {0: 1, 1: 1, 2: 1}, 1: {1: 1, 2: 1, 3: 1}}

    def result(metric):
        return rc.evaluate(
            x[:2],
            x,
            relevance=rel,
            query_ids=ids[:2],
            gallery_ids=ids,
            metrics=[metric],
            similarity="dot",
            ignore_identical_ids=True,
        )

    # each query ranks 5 items, 2 of them relevant: hit_rate@3 can be 0 (both at ranks 4, 5)
    with pytest.raises(AssertionError, match="hit_rate@3 value 0"):  # evaluated, fails
        rc.assert_metric(result("hit_rate@3"), "hit_rate@3", at_least=0.5)
    with pytest.raises(InputError, match="could never fail"):  # K=4 reaches them
        rc.assert_metric(result("hit_rate@4"), "hit_rate@4", at_least=0.5)
