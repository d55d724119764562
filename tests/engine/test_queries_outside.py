"""Queries outside trec_eval's query set (``queries="run"`` / ``"qrels"``) are counted
apart from empty queries (review finding 10): ``outside_queries`` / ``n_outside``, not
``skipped_queries`` / ``n_skipped``; NaN per query, never averaged, never dropped
silently, and carried into slices, measurements, comparisons and gaps.

Cost: well under 1 s (a few dict runs of a dozen queries).
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.engine._runs import evaluate_run


def _collection():
    """q0..q3 judged and retrieved; q3 judged non-relevant only; qX retrieved, not
    judged; q9 judged, not retrieved."""
    run = {
        "q0": {"a": 3.0, "b": 2.0, "c": 1.0},
        "q1": {"a": 3.0, "d": 2.0, "e": 1.0},
        "q2": {"f": 3.0, "g": 2.0},
        "q3": {"a": 2.0, "h": 1.0},
        "qX": {"a": 1.0, "b": 0.5},
    }
    qrels = {
        "q0": {"b": 1, "c": 0},
        "q1": {"a": 1, "e": 2},
        "q2": {"g": 1},
        "q3": {"h": 0},
        "q9": {"a": 1},
    }
    return run, qrels


def test_queries_run_counts_outside_apart_from_skipped():
    run, qrels = _collection()
    r = evaluate_run(run, qrels, ["map", "mrr"], queries="run")
    ids = list(r.query_ids)
    assert sorted(ids[i] for i in r.outside_queries) == ["q9", "qX"]
    assert r.n_outside == 2 and r.config["queries_outside"] == 2
    assert r.n_skipped == 0 and r.skipped_queries.size == 0  # q3 scores 0 (trec_eval's rule)
    assert r.n_used == 4 and r.n_used + r.n_skipped + r.n_outside == r.n_queries
    assert np.isnan(r.per_query["map"][ids.index("qX")])
    assert r["map"] == pytest.approx(np.nanmean(r.per_query["map"]))
    m = r.measure("map")
    assert m.n_used == 4 and m.n_skipped == 0
    assert "2 outside the query set (queries='run')" in m.sample
    assert m.extra["queries_outside"] == 2
    d = r.to_dict()
    assert d["n_outside"] == 2 and d["n_skipped"] == 0
    assert "2 outside" in repr(r)


def test_queries_run_with_skip_counts_empty_as_skipped_only():
    run, qrels = _collection()
    r = evaluate_run(run, qrels, ["map"], queries="run", empty_queries="skip")
    ids = list(r.query_ids)
    assert [ids[i] for i in r.skipped_queries] == ["q3"]
    assert sorted(ids[i] for i in r.outside_queries) == ["q9", "qX"]
    assert r.n_used == 3 and r.n_skipped == 1 and r.n_outside == 2


def test_queries_qrels_and_both():
    run, qrels = _collection()
    c = evaluate_run(run, qrels, ["map"], queries="qrels")
    assert [c.query_ids[i] for i in c.outside_queries] == ["qX"] and c.n_skipped == 0
    both = evaluate_run(run, qrels, ["map"])
    assert both.n_outside == 0 and both.outside_queries.size == 0
    assert sorted(both.query_ids[i] for i in both.skipped_queries) == ["q3", "qX"]
    assert "outside" not in both.measure("map").sample


def test_gate_max_skipped_ignores_outside_but_counts_empty():
    run, qrels = _collection()
    r = evaluate_run(run, qrels, ["map"], queries="run")
    events = []
    with rc.gates.listening(events.append), rc_warnings() as caught:
        rc.assert_metric(r, "map", at_least=0.01, max_skipped=0)
    assert not [w for w in caught if "skipped" in str(w.message)]
    e = events[0].to_dict()
    assert e["passed"] and e["n_skipped"] == 0 and e["n_used"] == 4
    assert e["queries_outside"] == 2 and e["queries"] == "run"
    skip = evaluate_run(run, qrels, ["map"], queries="run", empty_queries="skip")
    with pytest.raises(AssertionError, match=r"1 of 4 queries skipped"):
        rc.assert_metric(skip, "map", at_least=0.01, max_skipped=0)


def test_failure_message_names_the_query_set():
    run, qrels = _collection()
    r = evaluate_run(run, qrels, ["map"], queries="run")
    with pytest.raises(AssertionError) as info:
        rc.assert_metric(r, "map", at_least=0.99)
    assert "2 outside the query set (queries='run'" in str(info.value)


def test_slices_carry_outside_queries():
    run, qrels = _collection()
    lang = {"q0": "en", "q1": "en", "q2": "de", "q3": "de", "qX": "de", "q9": "en"}
    r = evaluate_run(run, qrels, ["map"], queries="run", slices=lang)
    de, en = r.slices["de"], r.slices["en"]
    assert de.n_queries == 3 and de.n_used == 2 and de.n_skipped == 0
    assert de.result.n_outside == 1 and en.result.n_outside == 1
    assert r.slices.to_dict()["slices"]["de"]["n_outside"] == 1


def test_compare_and_gap_do_not_count_outside_as_skipped():
    run, qrels = _collection()
    worse = {q: dict(d) for q, d in run.items()}
    worse["q1"] = {"d": 3.0, "a": 2.0, "e": 1.0}
    a = evaluate_run(run, qrels, ["map"], queries="run")
    b = evaluate_run(worse, qrels, ["map"], queries="run")
    c = rc.compare(b, a, "map", method="bootstrap", n_resamples=200)
    assert c.n_used == 4 and c.n_skipped == 0


class rc_warnings:
    """Every warning raised inside, recorded (the gates warn with RuntimeWarning)."""

    def __enter__(self):
        import warnings

        self._cm = warnings.catch_warnings(record=True)
        caught = self._cm.__enter__()
        warnings.simplefilter("always")
        return caught

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def test_relevance_level_decides_ndcgs_query_set_as_documented():
    """Review finding 7, the rule docs/metrics.md and evaluate_run's docstring state: one
    query set per result; under queries="both" + "skip" a query judged only below the
    level is skipped for nDCG too; queries="run" gives trec_eval -l's number."""
    qrels = {"q1": {"a": 2, "b": 1}, "q2": {"c": 1, "d": 0}}
    run = {"q1": {"a": 3.0, "b": 2.0, "x": 1.0}, "q2": {"d": 3.0, "c": 2.0}}
    both = evaluate_run(run, qrels, ["ndcg", "map"], relevance_level=2)
    assert both["ndcg"] == 1.0 and both.n_skipped == 1 and both.n_outside == 0
    trec = evaluate_run(run, qrels, ["ndcg", "map"], relevance_level=2, queries="run")
    assert trec["ndcg"] == pytest.approx((1.0 + 1 / np.log2(3)) / 2, abs=1e-12)  # 0.8155
    assert trec.n_skipped == 0 and trec.per_query["map"][1] == 0.0
