"""``retrieval-checks compare --significant`` says when a pass could not have been a
failure: the recorded intervals' test cannot see the tolerance (issue 28). Cost: well
under 1 s."""

from __future__ import annotations

from retrieval_checks.tracking import History, main


def _gate(value, half):
    return {
        "test": "tests/test_search.py::test_map",
        "gate": "assert_metric",
        "metric": "map",
        "value": value,
        "low": value - half,
        "high": value + half,
        "confidence": 0.95,
        "n": 80,
        "unit": "queries",
        "passed": True,
    }


def test_compare_significant_flags_an_underpowered_pass(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    History(db).record({"command": "pytest"}, [_gate(0.60, 0.05)], exitstatus=0)
    History(db).record({"command": "pytest"}, [_gate(0.58, 0.05)], exitstatus=0)
    args = ["--db", str(db), "compare", "-2", "-1", "--significant"]
    assert main([*args, "--max-drop", "0.005"]) == 0
    out = capsys.readouterr().out
    assert "underpowered: minimum detectable drop" in out  # 0.02 dropped, not significant
    assert main([*args, "--max-drop", "0.2"]) == 0
    assert "underpowered" not in capsys.readouterr().out  # the test sees a drop of 0.2
