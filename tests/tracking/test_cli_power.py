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


def _record(db, values, half=0.0392):
    gates = [
        {**_gate(v, half), "test": f"tests/test_search.py::test_{i}"} for i, v in enumerate(values)
    ]
    History(db).record({"command": "pytest"}, gates, exitstatus=0)


def test_compare_correction_holm_over_the_compared_gates(tmp_path, capsys):
    """Three gates: one drop with p ~ 0.02 (significant alone), two small ones. Alone it
    regresses; after Holm over 3 (0.06) it does not, and the table says both p-values."""
    db = tmp_path / "h.sqlite"
    _record(db, [0.6, 0.6, 0.6])
    _record(db, [0.6 - 0.0581, 0.59, 0.595])
    args = ["--db", str(db), "compare", "-2", "-1", "--significant", "--max-drop", "0.001"]
    assert main(args) == 1
    assert "REGRESSED" in capsys.readouterr().out
    assert main([*args, "--correction", "holm"]) == 0
    out = capsys.readouterr().out
    assert "0.02 -> 0.0599" in out and "not after holm: adjusted p 0.0599" in out
    assert "family of 3 significance-gated checks: family-wise error rate 0.05 (holm)" in out
    assert main([*args, "--correction", "bh"]) == 0  # BH: 0.02 * 3 / 1 = 0.06 as well


def test_compare_correction_needs_significance(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    _record(db, [0.6])
    _record(db, [0.5])
    assert main(["--db", str(db), "compare", "-2", "-1", "--correction", "holm"]) == 2
    assert "add --significant" in capsys.readouterr().err
