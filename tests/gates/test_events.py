"""The gate-event hook: every gate reports its outcome, passed or failed, to listeners;
an event's record is strict JSON (NaN, infinities and numpy values included)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.gates import GateEvent

NAN, INF = float("nan"), float("inf")


def _result(seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(20), 5)
    X = (rng.normal(size=(20, 8))[y] + rng.normal(size=(100, 8))).astype(np.float32)
    return rc.evaluate(X, query_labels=y, metrics=["map", "hit_rate@1"])


def test_listeners_hear_passes_and_failures_with_every_bound():
    r = _result()
    heard = []
    with rc.gates.listening(heard.append):
        rc.assert_metric(r, "map", at_least=0.1, at_most=0.99)
        with pytest.raises(AssertionError):
            rc.assert_metric(r, "map", at_least=0.1, at_most=0.6 * r["map"])  # at_least <= at_most
    rc.assert_metric(r, "map", at_least=0.1)  # after the block: not heard
    assert [e.passed for e in heard] == [True, False]
    assert (
        heard[0].bounds == {"at_least": 0.1, "at_most": 0.99} and heard[0].comparison == "between"
    )
    assert heard[1].gate == "assert_metric" and heard[1].metric == "map" and heard[1].n_used == 100
    record = heard[1].to_dict()
    json.dumps(record, allow_nan=False)  # strict JSON
    assert record["bounds"]["at_most"] == pytest.approx(0.6 * r["map"])


def test_subscriptions_end_and_a_broken_listener_changes_no_verdict():
    r = _result()
    heard = []
    sub = rc.gates.subscribe(heard.append)

    def broken(event):
        raise RuntimeError("listener bug")

    with rc.gates.listening(broken):
        with pytest.warns(RuntimeWarning, match="listener bug"):
            rc.assert_recall_at_least(r, 0.01)
        with pytest.warns(RuntimeWarning), pytest.raises(AssertionError):
            rc.assert_recall_at_least(r, 0.999)
    sub.cancel()
    rc.assert_recall_at_least(r, 0.01)
    assert [e.gate for e in heard] == ["assert_recall_at_least"] * 2
    assert heard[0].listener_errors and "listener bug" in heard[0].listener_errors[0]
    with pytest.raises(rc.InputError, match="callable"):
        rc.gates.subscribe("not a function")


def test_gaps_comparisons_and_baselines_are_events_too():
    r = _result()
    heard = []
    with rc.gates.listening(heard.append):
        # (the same result on both sides of a gap is refused: its gap is 0 whatever the model)
        rc.assert_gap_below(
            rc.generalization_gap(r, _result(seed=1), "map", n_resamples=200), below=0.5
        )
        rc.assert_not_worse(rc.compare(r, r, "map"))
        rec = rc.baseline_record(r, "map")
        rc.assert_no_regression(rec, rec)
    assert [e.gate for e in heard] == [
        "assert_gap_below",
        "assert_not_worse",
        "assert_no_regression",
    ]
    assert [e.metric for e in heard] == ["map gap", "map difference", "map"]
    assert heard[0].bounds == {"below": 0.5} and all(e.passed for e in heard)


# --- fail closed: JSON-safe events ---
def test_event_to_dict_is_strict_json():
    e = GateEvent(
        gate="g",
        metric="map",
        value=NAN,
        passed=False,
        low=-INF,
        high=INF,
        threshold=np.float64(NAN),
        bounds={"at_least": INF},
        warnings=["x"],
        extra={
            "curve": {"precision": np.array([0.5, NAN]), "t": (1.0, INF)},
            "flag": np.bool_(True),
            "count": np.int64(3),
            "arr2": np.array([[1.0, NAN]]),
        },
    )
    d = e.to_dict()
    text = json.dumps(d, allow_nan=False)
    back = json.loads(text)
    assert back["value"] is None and back["low"] is None and back["bounds"]["at_least"] is None
    assert back["curve"]["precision"] == [0.5, None] and back["flag"] is True and back["count"] == 3
    assert back["arr2"] == [[1.0, None]]


def test_events_of_real_gates_are_strict_json(res, skipped):
    heard = []
    with rc.gates.listening(heard.append):
        rc.assert_recall_at_precision(res, 0.001, precision=0.5)
        rc.assert_metric(res, "map", at_least=0.01, on="interval")
        with pytest.warns(RuntimeWarning):
            rc.assert_grouped_recall_ci(skipped, 0.001)
    for e in heard:
        json.dumps(e.to_dict(), allow_nan=False)
