"""``retrieval-checks report RUN --format markdown`` compares with the run before; a gate
that run lacks is ``new`` only when it was a full run (issue 25: a partial previous run
made every gate it did not run look new)."""

from __future__ import annotations

import io

import pytest

from retrieval_checks.tracking import History, main


def _gate(test, value=0.5):
    return {
        "test": test,
        "metric": "map",
        "gate": "assert_metric",
        "value": value,
        "passed": True,
        "on": "value",
        "comparison": ">=",
        "threshold": 0.1,
    }


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        ("", "new"),
        (
            "-m quality; 3 deselected",
            "not in run 1, a partial run (-m quality; 3 deselected): not comparable",
        ),
        (None, "not in run 1 (not known to be a full run: not comparable)"),
    ],
)
def test_a_gate_missing_from_the_run_before(tmp_path, selection, expected):
    db = tmp_path / "h.sqlite"
    h = History(db)
    h.record({"selection": selection}, [_gate("t.py::a", 0.4)], exitstatus=0)
    h.record({"selection": ""}, [_gate("t.py::a"), _gate("t.py::b")], exitstatus=0)
    out = io.StringIO()
    assert main(["--db", str(db), "report", "latest", "--format", "markdown"], out=out) == 0
    rows = {
        r.split(" | ")[1]: r.split(" | ")[-1].rstrip(" |")
        for r in out.getvalue().splitlines()
        if r.startswith("| PASS")
    }
    assert rows == {"t.py::a": "+0.1000 vs run 1", "t.py::b": expected}
