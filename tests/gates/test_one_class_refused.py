"""A result in which no query has a non-relevant candidate (one class: h13's finding) has
every ranking and pair metric at its best whatever the model: random embeddings scored
map 1.0 and every gate passed. Gates, baselines, comparisons, gaps and slice gates
refuse it (``result.vacuous``, the check they share with the self-match refusal); one
non-relevant item anywhere makes it a result like any other."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.errors import InputError

SAYS = "none of the 40 queries has a non-relevant candidate"


def _one_class(seed=0, **kwargs):
    x = np.random.default_rng(seed).normal(size=(40, 8))
    return rc.evaluate(x, query_labels=np.zeros(40, int), metrics=["map", "hit_rate@1"], **kwargs)


@pytest.mark.parametrize(
    "gate",
    [
        lambda r: rc.assert_map_at_least(r, 0.9),
        lambda r: rc.assert_recall_at_least(r, 0.9, k=1),  # said "gate a smaller K (< 1)"
        lambda r: rc.assert_metric(r, "map", at_least=0.5, on="interval"),
        lambda r: rc.baseline_record(r, "map"),
        lambda r: rc.compare(r, _one_class(1), "map"),
        lambda r: rc.generalization_gap(r, _one_class(1), "map"),
    ],
)
def test_a_one_class_result_is_refused(gate):
    res = _one_class()
    assert res["map"] == 1.0 and res["hit_rate@1"] == 1.0  # whatever the model
    with pytest.raises(InputError, match=SAYS):
        gate(res)


def test_one_non_relevant_item_makes_it_judgeable():
    rng = np.random.default_rng(0)
    q, g = rng.normal(size=(5, 8)), rng.normal(size=(30, 8))
    res = rc.evaluate(
        q,
        g,
        query_labels=np.zeros(5, int),
        gallery_labels=np.r_[np.zeros(29, int), 1],
        metrics=["map"],
    )
    assert res.vacuous() is None
    rc.assert_map_at_least(res, 0.01)


def test_a_run_that_retrieved_only_relevant_documents_is_judged():
    """A run ranks what it retrieved: all of it relevant is the system's merit."""
    run = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.0}}
    qrels = {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 1}}
    res = rc.evaluate_run(run, qrels, metrics=["map"])
    assert res["map"] == 1.0 and res.vacuous() is None


def test_graded_relevance_is_judged_even_when_every_candidate_is_relevant():
    """nDCG still orders the grades (h16: 0.672 here, refused as 'at its best')."""
    rng = np.random.default_rng(0)
    q, g = rng.normal(size=(20, 8)), rng.normal(size=(30, 8))
    grades = rng.integers(1, 4, size=(20, 30))
    relevance = {i: {j: int(grades[i, j]) for j in range(30)} for i in range(20)}
    res = rc.evaluate(q, g, relevance=relevance, metrics=["ndcg@10"])
    assert res["ndcg@10"] < 0.9 and res.vacuous() is None
    rc.assert_metric(res, "ndcg@10", at_least=0.1)


def test_binary_relevance_written_as_grades_is_refused_like_lists():
    """{query: {item: 1}} for every item is binary relevance in the graded form: map and
    nDCG are 1 whatever the model (h20: random embeddings passed assert_map_at_least 0.99,
    while the same relevance as lists was refused). Grades that differ within a query are
    still judged (nDCG orders them)."""
    rng = np.random.default_rng(0)
    q, g = rng.normal(size=(20, 8)), rng.normal(size=(30, 8))
    as_grades = rc.evaluate(
        q, g, relevance={i: dict.fromkeys(range(30), 1) for i in range(20)}, metrics=["map"]
    )
    with pytest.raises(InputError, match="none of the 20 queries has a non-relevant candidate"):
        rc.assert_map_at_least(as_grades, 0.99)
    two_levels = {i: {j: 1 + (j % 2) for j in range(30)} for i in range(20)}
    rc.assert_metric(
        rc.evaluate(q, g, relevance=two_levels, metrics=["ndcg"]), "ndcg", at_least=0.1
    )


def test_ignore_identical_ids_with_every_ranked_item_relevant_is_refused():
    """One class with ids and ignore_identical_ids: each query's own item leaves its ranking
    but stays relevant, so map is 0.975 and hit_rate@1 1 whatever the model (h20). The
    candidates are all relevant when they are no more than the relevant items less the own
    ones; a query with one non-relevant candidate beside its relevant own item is judged."""
    x = np.random.default_rng(0).normal(size=(40, 8))
    one = rc.evaluate(
        x,
        query_labels=np.zeros(40, int),
        query_ids=np.arange(40),
        ignore_identical_ids=True,
        metrics=["map"],
    )
    with pytest.raises(InputError, match="none of the 40 queries has a non-relevant candidate"):
        rc.assert_map_at_least(one, 0.9)
    q = np.random.default_rng(0).normal(size=(3, 4))
    g = np.random.default_rng(1).normal(size=(9, 4))
    res = rc.evaluate(
        q,
        g,
        relevance={i: [3 * i, 3 * i + 1] for i in range(3)},  # the own item and one other
        query_ids=[0, 1, 2],
        gallery_ids=[0, 10, 11, 1, 12, 13, 2, 14, 15],
        ignore_identical_ids=True,
        metrics=["map"],
    )
    assert res.vacuous() is None
    rc.assert_map_at_least(res, 0.01)
    # one non-relevant candidate a query, beside its relevant own item: judged (counting the
    # own item among the ranked relevant ones, as a planted copy did, refused it: h27)
    rel = {0: [0, 1, 2, 3], 1: [2, 0, 1, 3]}  # each query's own item is relevant
    one = rc.evaluate(
        q[:2],
        np.random.default_rng(2).normal(size=(5, 4)),
        relevance=rel,
        query_ids=[0, 1],
        gallery_ids=[0, 10, 1, 11, 12],
        ignore_identical_ids=True,
        metrics=["map"],
    )
    assert (one.n_candidates == 4).all() and (one.n_relevant == 4).all()
    assert one.vacuous() is None
