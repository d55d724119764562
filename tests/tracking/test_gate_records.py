"""One gate-outcome record from the gate to the history row: a GateEvent's record
(GateEvent.to_dict, the shape the pytest plugin puts in its JSON report) goes through
strict JSON and a history row and comes back as the same event (GateEvent.from_record),
with no field set kept by hand at any hop: a field the event grows (RECORD_FIELDS) or a
gate's own extra field reaches the history without an edit there.

Cost: well under 1 s (one small SQLite file).
"""

from __future__ import annotations

import json
import math

import pytest

from retrieval_checks import InputError
from retrieval_checks.gates import GateEvent
from retrieval_checks.gates._events import RECORD_FIELDS
from retrieval_checks.tracking import History


def _event() -> GateEvent:
    return GateEvent(
        gate="assert_metric",
        metric="map@R",
        value=0.61,
        passed=False,
        low=0.58,
        high=0.64,
        confidence=0.95,
        on="interval",
        comparison="between",
        threshold=0.6,
        bounds={"at_least": 0.6, "at_most": 0.9},
        n=120,
        unit="classes",
        n_used=480,
        n_skipped=3,
        model="m",
        dataset="d",
        warnings=["skipped 3 of 483 queries"],
        extra={"max_skipped": 5, "mdd": 0.02, "slices": [{"slice": "a", "value": 0.5}]},
    )


def test_a_record_goes_to_the_history_and_comes_back_as_the_same_event(tmp_path):
    event = _event()
    record = json.loads(json.dumps(event.to_dict(), allow_nan=False))  # the plugin's JSON
    record.update(test="t.py::test_x", suite="s", line=7)  # the plugin's context
    history = History(tmp_path / "h.sqlite")
    run = history.record({"git_commit": "abc"}, [record], exitstatus=1)
    (row,) = history.results(run)
    back = GateEvent.from_record(row)
    for name in RECORD_FIELDS:
        assert getattr(back, name) == getattr(event, name), name
    for key, value in event.extra.items():
        assert back.extra[key] == value, key
    assert {k: back.extra[k] for k in ("test", "suite", "line")} == {
        "test": "t.py::test_x",
        "suite": "s",
        "line": 7,
    }


def test_every_record_field_is_a_column_or_in_the_detail(tmp_path):
    """A field no hop knows by name (a gate's new one) still reaches the history row."""
    record = {**_event().to_dict(), "test": "t", "new_gate_field": {"deep": [1, 2]}}
    history = History(tmp_path / "h.sqlite")
    (row,) = history.results(history.record({}, [record]))
    assert row["new_gate_field"] == {"deep": [1, 2]}
    assert set(RECORD_FIELDS) <= set(row)


def test_a_value_json_cannot_hold_is_none_at_every_hop(tmp_path):
    event = _event()
    event.value, event.high = math.nan, math.inf
    record = event.to_dict()
    assert record["value"] is None and record["high"] is None
    history = History(tmp_path / "h.sqlite")
    (row,) = history.results(history.record({}, [{**record, "test": "t"}]))
    back = GateEvent.from_record(row)
    assert back.value is None and back.high is None and back.passed is False


def test_from_record_refuses_what_is_not_a_record():
    with pytest.raises(InputError, match="a gate record is a dict"):
        GateEvent.from_record(["map", 0.5])
    with pytest.raises(InputError, match="'gate', 'metric'"):
        GateEvent.from_record({"value": 0.5})


def test_the_export_columns_are_the_history_record_columns():
    """`retrieval-checks export`'s columns come from the history's own columns
    (no second list), in the order users' spreadsheets know."""
    from retrieval_checks.tracking._cli import _EXPORT_COLUMNS

    assert _EXPORT_COLUMNS == (
        *("run_id", "started", "git_commit", "git_dirty", "test", "suite", "model", "dataset"),
        *("metric", "gate", "value", "low", "high", "threshold", "comparison", "on", "passed"),
        *("n", "unit", "n_used", "n_skipped", "rule"),
    )
