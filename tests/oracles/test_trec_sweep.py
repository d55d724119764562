"""A sweep of evaluate_run against trec_eval itself (pytrec-eval-terrier) on files these
tests write in trec_eval's formats (issue 31): every trec_eval measure the library names,
under both query sets (``queries="run"``: trec_eval's default; ``"qrels"``: its ``-c``,
judged queries missing from the run scored 0), relevance levels 1 and 2 (``-l``), with
comment lines, extra run fields, grade -1, a query judged only non-relevant, one judged
only -1, a judged query missing from the run and run queries nobody judged. Per query and
averaged, to 1e-12. Cost: about 3 s (pytrec_eval on 12 small collections)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval_checks.engine._runs import evaluate_run

pytrec_eval = pytest.importorskip("pytrec_eval")

# ours -> trec_eval's name
TREC = {
    "map": "map",
    "mrr": "recip_rank",
    "precision@5": "P_5",
    "precision@10": "P_10",
    "recall@5": "recall_5",
    "recall@10": "recall_10",
    "ndcg": "ndcg",
    "ndcg@5": "ndcg_cut_5",
    "ndcg@10": "ndcg_cut_10",
    "r_precision": "Rprec",
    "success@1": "success_1",
    "success@5": "success_5",
    "map_cut@5": "map_cut_5",
    "map_cut@10": "map_cut_10",
    "bpref": "bpref",
    "iprec_at_recall@0.1": "iprec_at_recall_0.10",
    "iprec_at_recall@0.7": "iprec_at_recall_0.70",
    "iprec_11pt": "11pt_avg",
    "gm_map": "gm_map",
}
MEASURES = {
    "map",
    "recip_rank",
    "P",
    "recall",
    "ndcg",
    "ndcg_cut",
    "Rprec",
    "success",
    "map_cut",
    "bpref",
    "iprec_at_recall",
    "11pt_avg",
    "gm_map",
}


def collection(seed):
    rng = np.random.default_rng(100 + seed)
    run, qrels = {}, {}
    for q in range(18):
        docs = rng.choice(30, size=int(rng.integers(1, 22)), replace=False)
        run[f"Q{q}"] = {f"doc{j}": float(rng.integers(0, 6)) for j in docs}  # ties
        if q % 7 != 3:  # Q3, Q10, Q17: in the run, never judged
            judged = rng.choice(30, size=int(rng.integers(1, 14)), replace=False)
            qrels[f"Q{q}"] = {f"doc{j}": int(rng.integers(-1, 4)) for j in judged}
    qrels["Q1"] = {d: 0 for d in run["Q1"]}  # judged, non-relevant only
    qrels["Q2"] = {d: -1 for d in run["Q2"]}  # in the pool, nothing judged
    qrels["gone"] = {"doc1": 2, "doc5": 1, "doc9": 0}  # judged, missing from the run
    return run, qrels


def write(tmp_path, run, qrels):
    lines = ["# a comment line", ""]
    for q, docs in run.items():
        for rank, (d, s) in enumerate(sorted(docs.items(), key=lambda x: -x[1]), 1):
            lines.append(f"{q} Q0 {d} {rank} {s!r} run-tag {rank} more fields")
        lines.append("  # indented comment")
    (tmp_path / "run").write_text("\n".join(lines) + "\n")
    lines = ["# grade -1: in the pool, not judged"]
    for q, docs in qrels.items():
        lines += [f"{q} 0 {d} {g}" for d, g in docs.items()]
    (tmp_path / "qrels").write_text("\n".join(lines) + "\n")
    return tmp_path / "run", tmp_path / "qrels"


@pytest.mark.parametrize("queries", ["run", "qrels"])
@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_trec_eval_measure_under_both_query_sets(tmp_path, seed, level, queries):
    run, qrels = collection(seed)
    run_file, qrels_file = write(tmp_path, run, qrels)
    got = evaluate_run(
        run_file, qrels_file, list(TREC), ties="docid", queries=queries, relevance_level=level
    )
    want = pytrec_eval.RelevanceEvaluator(qrels, MEASURES, relevance_level=level).evaluate(run)
    ids = list(got.query_ids)
    judged_in_run = sorted(q for q in run if q in qrels)
    assert sorted(want) == judged_in_run  # trec_eval's set: Q1 and Q2 in, Q3 out
    expected = judged_in_run + (["gone"] if queries == "qrels" else [])
    used = [q for i, q in enumerate(ids) if not math.isnan(got.per_query["map"][i])]
    assert sorted(used) == sorted(expected) and got.n_skipped == 0
    for ours, theirs in TREC.items():
        per = got.per_query[ours].copy()
        if ours == "gm_map":  # trec_eval's per-query gm_map is log(max(AP, 1e-5))
            per = np.log(np.maximum(per, 1e-5))
        for q in want:
            assert per[ids.index(q)] == pytest.approx(want[q][theirs], abs=1e-12), (q, ours)
        values = [want[q][theirs] for q in want]
        if queries == "qrels":  # trec_eval -c: the missing judged query retrieved nothing
            assert got.per_query[ours][ids.index("gone")] == 0.0, ours
            values.append(math.log(1e-5) if ours == "gm_map" else 0.0)
        mean = math.exp(np.mean(values)) if ours == "gm_map" else np.mean(values)
        assert got[ours] == pytest.approx(mean, abs=1e-12), ours
