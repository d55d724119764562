"""evaluate_run's row-at-a-time reading of ``{qid: {docid: value}}`` dicts (issue 32's
speed work, :func:`retrieval_checks.engine._runs._plain_row`): the same result as the
entry-by-entry reading, which still gives every message.

Cost: about 2 CPU-s.
"""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.engine import _runs

METRICS = ["map", "ndcg@5", "ndcg_exp@10", "recall@3", "mrr", "precision@2", "bpref"]


def _data(seed: int):
    rng = np.random.default_rng(seed)
    run = {
        f"q{q}": {f"d{d}": float(rng.integers(0, 4)) for d in rng.choice(40, 12, False)}
        for q in range(9)
    }
    qrels = {
        f"q{q}": {f"d{d}": int(rng.integers(-1, 4)) for d in rng.choice(40, 8, False)}
        for q in range(0, 11)
    }
    return run, qrels


def _same(a, b):
    assert list(a) == list(b)
    for k in a:
        assert a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])), k
    for k in a.per_query:
        assert np.array_equal(a.per_query[k], b.per_query[k], equal_nan=True), k
    assert dict(a.tie_values) == dict(b.tie_values)
    assert list(a.query_ids) == list(b.query_ids)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "average", "docid"])
def test_rows_read_at_once_give_the_entry_by_entry_result(monkeypatch, seed, ties):
    run, qrels = _data(seed)
    # a run that is not a plain dict (a defaultdict, as a loop builds it) is not read
    # whole at once (tests/engine/test_runs_plain_dicts.py): row by row
    run = collections.defaultdict(dict, run)
    assert _runs._plain_flat(run, qrels) is None
    seen = []
    plain = _runs._plain_row
    monkeypatch.setattr(_runs, "_plain_row", lambda *a: seen.append(1) or plain(*a))
    fast = rc.evaluate_run(run, qrels, METRICS, ties=ties)
    assert len(seen) == len(run) + len(qrels)
    monkeypatch.setattr(_runs, "_plain_row", lambda *a: None)
    _same(fast, rc.evaluate_run(run, qrels, METRICS, ties=ties))


@pytest.mark.parametrize(
    "row, why",
    [
        ({"": 1.0}, "ids are non-empty"),
        ({"a b": 1.0}, "ids are non-empty"),
        ({"d\u00a01": 1.0}, "invisible"),
        ({"d1": math.nan}, "not finite"),
        ({"d1": math.inf}, "not finite"),
        ({"d1": True}, "not a number"),
        ({"d1": "1.0"}, "not a number"),
    ],
)
def test_rows_that_are_not_plain_still_get_their_message(row, why):
    with pytest.raises(rc.InputError, match=why):
        rc.evaluate_run({"q1": {"d0": 1.0, **row}}, {"q1": {"d0": 1}}, ["map"])


@pytest.mark.parametrize("grade, why", [(True, "not an integer"), (-2, "not an integer")])
def test_grades_that_are_not_plain_still_get_their_message(grade, why):
    with pytest.raises(rc.InputError, match=why):
        rc.evaluate_run({"q1": {"d0": 1.0}}, {"q1": {"d0": 1, "d1": grade}}, ["map"])


def test_mixed_ids_and_numbers_take_the_entry_path_and_agree():
    """Integer ids (compared as their text), numpy floats and int scores: read entry by
    entry, with the plain rows around them read at once."""
    run = {1: {2: np.float32(0.5), "3": 1}, "q2": {"d1": 0.25, "d2": 0.75}}
    qrels = {"1": {"2": 1, 3: 2}, "q2": {"d2": 1}}
    res = rc.evaluate_run(run, qrels, ["map", "mrr"])
    assert list(res.query_ids) == ["1", "q2"]
    assert res["mrr"] == 1.0
