"""A threshold gate on a run evaluated under trec_eval's query sets warns when judged
queries are outside the set it averages (review finding 5): ``queries='run'`` with a
run that retrieved for 2 of 40 judged queries gave a value over 5% of them and passed
without a word, where skipped queries warn. The value is trec_eval's (unchanged).

Cost: under 1 s (small runs in plain dicts).
"""

from __future__ import annotations

import warnings

import pytest

import retrieval_checks as rc


def _collection(n_judged: int, n_run: int):
    qrels = {f"q{i}": {f"d{i}": 1, f"x{i}": 0} for i in range(n_judged)}
    run = {f"q{i}": {f"d{i}": 2.0, f"x{i}": 1.0, "z": 0.5} for i in range(n_run)}
    return run, qrels


def test_a_gate_over_a_run_that_misses_judged_queries_warns_with_the_counts():
    run, qrels = _collection(40, 2)
    r = rc.evaluate_run(run, qrels, ["ndcg@10"], queries="run")
    with pytest.warns(
        RuntimeWarning, match=r"ndcg@10 averages 2 of 40 queries: 38 are outside"
    ) as w:
        rc.assert_metric(r, "ndcg@10", at_least=0.3)
    text = str(w[0].message)
    assert "queries='run'" in text and "queries='qrels'" in text


def test_no_warning_when_every_query_is_in_the_set():
    run, qrels = _collection(10, 10)
    r = rc.evaluate_run(run, qrels, ["ndcg@10"], queries="run")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rc.assert_metric(r, "ndcg@10", at_least=0.3)
