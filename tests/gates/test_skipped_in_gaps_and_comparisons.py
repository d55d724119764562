"""Gaps and paired comparisons report, warn about and bound the queries they skip, as
every gate on per-query values does (issue: skipped queries change the value without
notice)."""

from __future__ import annotations

import numpy as np
import pytest
from shared_setup import run_gate

import retrieval_checks as rc


@pytest.fixture(scope="module")
def pair():
    rng = np.random.default_rng(0)
    y = np.r_[np.repeat(np.arange(20), 5), np.arange(100, 140)]  # 40 singleton classes: skipped
    x = rng.normal(size=(len(y), 8)).astype(np.float32)
    x[:100] += np.repeat(rng.normal(size=(20, 8)) * 2, 5, axis=0).astype(np.float32)
    z = x + rng.normal(size=x.shape).astype(np.float32) * 0.5
    a = rc.evaluate(x, query_labels=y, metrics=["map", "hit_rate@1"])
    b = rc.evaluate(z, query_labels=y, metrics=["map", "hit_rate@1"])
    return a, b


def _run(gate):
    return run_gate(gate, RuntimeWarning)


def test_gap_and_comparison_carry_the_counts(pair):
    a, b = pair
    gap = rc.generalization_gap(a, b, "map")
    assert gap.n_used == (100, 100) and gap.n_skipped == (40, 40)
    comp = rc.compare(a, b, "map")
    assert (comp.n_used, comp.n_skipped) == (100, 40)


@pytest.mark.parametrize("metric", ["map", "hit_rate@1"])
def test_gap_gate_records_and_warns_about_skipped_queries(pair, metric):
    a, b = pair
    events, warned, error = _run(
        lambda: rc.assert_gap_below(rc.generalization_gap(a, b, metric), 0.5)
    )
    assert error is None
    (event,) = events
    assert (event.n_used, event.n_skipped) == (200, 80)
    assert event.warnings and all("n_used 100 / n_skipped 40" in w for w in event.warnings)
    assert len(warned) == 2 and all("max_skipped" in w for w in warned)
    assert event.to_dict()["n_skipped"] == 80


@pytest.mark.parametrize("rule", ["value", "significant", "non_inferior"])
def test_comparison_gate_records_and_warns_about_skipped_queries(pair, rule):
    a, b = pair
    events, warned, _ = _run(
        lambda: rc.assert_not_worse(rc.compare(a, b, "map"), margin=0.5, rule=rule)
    )
    (event,) = events
    assert (event.n_used, event.n_skipped) == (100, 40)
    assert warned and "skipped 40 of 140" in warned[0]


@pytest.mark.parametrize(
    "max_skipped, fails", [(0, True), (39, True), (40, False), (0.25, True), (0.3, False)]
)
def test_gap_gate_honours_max_skipped_on_each_side(pair, max_skipped, fails):
    a, b = pair
    gap = rc.generalization_gap(a, b, "map")
    events, _, error = _run(lambda: rc.assert_gap_below(gap, 0.5, max_skipped=max_skipped))
    assert (error is not None) is fails
    assert events[0].passed is (not fails)
    if fails:
        assert "n_used 100 / n_skipped 40" in str(error) and "max_skipped" in str(error)


@pytest.mark.parametrize("max_skipped, fails", [(0, True), (40, False), (0.1, True), (0.5, False)])
def test_comparison_gate_honours_max_skipped(pair, max_skipped, fails):
    a, b = pair
    comp = rc.compare(a, b, "map")
    events, _, error = _run(
        lambda: rc.assert_not_worse(comp, margin=0.5, rule="value", max_skipped=max_skipped)
    )
    assert (error is not None) is fails
    assert events[0].passed is (not fails)


@pytest.mark.parametrize("bad", [-1, 1.0, 2.5, float("nan"), "5%", True])
@pytest.mark.parametrize("gate", ["gap", "compare"])
def test_max_skipped_of_gaps_and_comparisons_is_validated(pair, bad, gate):
    a, b = pair
    with pytest.raises(rc.InputError, match="max_skipped"):
        if gate == "gap":
            rc.assert_gap_below(rc.generalization_gap(a, b, "map"), 0.5, max_skipped=bad)
        else:
            rc.assert_not_worse(rc.compare(a, b, "map"), margin=0.5, max_skipped=bad)


def test_no_skipped_queries_no_warning():
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(10), 4)
    a = rc.evaluate(rng.normal(size=(40, 6)), query_labels=y, metrics=["map"])
    b = rc.evaluate(rng.normal(size=(40, 6)), query_labels=y, metrics=["map"])
    events, warned, _ = _run(
        lambda: rc.assert_gap_below(rc.generalization_gap(a, b, "map"), 0.9, max_skipped=0)
    )
    assert not warned and events[0].n_skipped == 0 and events[0].warnings == []


def test_the_skip_warning_says_what_a_run_s_query_lacks():
    """A run's skipped query has no judged relevant document (its qrels), not "no relevant
    gallery item" (the embeddings' wording, which a new user's trial found on a run)."""
    run = {"q1": {"a": 1.0}, "q2": {"b": 1.0}}
    res = rc.evaluate_run(run, {"q1": {"a": 1}, "q2": {"c": 0}}, ["map"])
    with pytest.warns(
        RuntimeWarning, match=r"skipped 1 of 2 queries \(no judged relevant document"
    ):
        rc.assert_map_at_least(res, 0.5)
    y = np.array([0, 0, 1, 2])
    x = np.eye(4)[[0, 0, 1, 2]] + 0.01 * np.arange(16).reshape(4, 4)
    emb = rc.evaluate(x, query_labels=y, metrics=["map"])
    with pytest.warns(RuntimeWarning, match=r"queries \(no relevant gallery item\)"):
        rc.assert_map_at_least(emb, 0.5)
