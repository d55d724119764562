"""``retrieval-checks report`` of a history whose records were crafted or damaged (issue
25, item 3): every figure record read back is checked (types, sizes, keys), a bad one
is a library error naming the history file, the row and the fix (exit 2, never a
traceback), and text from the history is escaped, never executed."""

from __future__ import annotations

import io
import json
import sqlite3
import time

import pytest

from retrieval_checks.errors import InputError
from retrieval_checks.tracking import History
from retrieval_checks.tracking import main as cli

GOOD = {
    "kind": "sweep",
    "title": "R@1",
    "model": "m",
    "dataset": "d",
    "rows": [
        {"n_classes": 5, "metric": "hit_rate@1", "value": 0.5, "low": 0.4, "high": 0.6},
        {"n_classes": 10, "metric": "hit_rate@1", "value": 0.4, "low": None, "high": None},
    ],
}


def _history(tmp_path, figure_text: str):
    h = History(tmp_path / "h.sqlite")
    h.record(
        {"started": "t"},
        [{"test": "t.py::test_a", "metric": "map", "value": 0.5, "passed": True}],
        figures=[GOOD],
    )
    con = sqlite3.connect(h.path)
    con.execute("UPDATE figures SET figure = ?", (figure_text,))
    con.commit()
    con.close()
    return h


def _report(h, tmp_path):
    out = io.StringIO()
    code = cli(["--db", str(h.path), "report", "latest", "-o", str(tmp_path / "r.html")], out=out)
    return code


CRAFTED = {
    "rows-not-a-list": {**GOOD, "rows": 7},
    "rows-a-string": {**GOOD, "rows": "abc"},
    "rows-a-mapping": {**GOOD, "rows": {"n_classes": 5}},
    "row-not-a-mapping": {**GOOD, "rows": [[5, 0.5]]},
    "n_classes-text": {**GOOD, "rows": [{"n_classes": "5", "value": 0.5, "metric": "m"}]},
    "n_classes-bool": {**GOOD, "rows": [{"n_classes": True, "value": 0.5, "metric": "m"}]},
    "value-huge": {
        **GOOD,
        "rows": [
            {"n_classes": 5, "value": 1e308, "metric": "m"},
            {"n_classes": 6, "value": -1e308, "metric": "m"},
        ],
    },
    "value-a-list": {**GOOD, "rows": [{"n_classes": 5, "value": [0.5], "metric": "m"}]},
    "metric-a-mapping": {**GOOD, "rows": [{"n_classes": 5, "value": 0.5, "metric": {"a": 1}}]},
    "title-a-list": {**GOOD, "title": ["a"]},
    "model-a-number": {**GOOD, "model": 3},
    "kind-missing": {"rows": GOOD["rows"]},
    "kind-a-number": {**GOOD, "kind": 1},
    "too-many-rows": {
        **GOOD,
        "rows": [{"n_classes": i, "value": 0.5, "metric": "m"} for i in range(100_001)],
    },
}


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_a_crafted_figure_is_an_error_naming_the_file_and_row(tmp_path, capsys, name):
    h = _history(tmp_path, json.dumps(CRAFTED[name]))
    start = time.monotonic()
    assert _report(h, tmp_path) == 2
    err = capsys.readouterr().err
    assert str(h.path) in err and "figures row 1 (run 1)" in err and "delete that row" in err, err
    assert time.monotonic() - start < 5
    with pytest.raises(InputError, match="figures row 1"):
        h.figures(1)


def test_a_valid_figure_reads_back_unchanged_and_unknown_kinds_are_kept(tmp_path):
    h = _history(tmp_path, json.dumps(GOOD))
    assert h.figures(1) == [GOOD] and _report(h, tmp_path) == 0
    other = {"kind": "future-figure", "anything": [1, {"x": None}]}
    (tmp_path / "x").mkdir()
    h = _history(tmp_path / "x", json.dumps(other))
    assert h.figures(1) == [other]


def test_history_text_is_escaped_never_markup(tmp_path):
    evil = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    figure = {
        **GOOD,
        "title": evil,
        "model": evil,
        "dataset": evil,
        "test": evil,
        "rows": [{**r, "metric": evil} for r in GOOD["rows"]],
    }
    h = History(tmp_path / "h.sqlite")
    h.record(
        {"started": evil, "command": evil, "git_commit": evil, "machine": evil},
        [
            {
                "test": evil,
                "metric": evil,
                "value": 0.5,
                "passed": False,
                "message": evil,
                "model": evil,
                "dataset": evil,
                "rule": evil,
                "warnings": [evil],
                "curve": {"recall": [0, 1], "precision": [1, 0]},
            },
            {
                "test": "t.py::b",
                "metric": "map",
                "value": 1e308,
                "threshold": -1e308,
                "low": -1e300,
                "high": 1e300,
                "passed": True,
            },
        ],
        figures=[figure],
    )
    start = time.monotonic()
    assert _report(h, tmp_path) == 0
    assert time.monotonic() - start < 5  # huge values neither hang the axes nor raise
    page = (tmp_path / "r.html").read_text()
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    out = io.StringIO()
    assert cli(["--db", str(h.path), "report", "latest", "--format", "markdown"], out=out) == 0
    assert "<script>" not in out.getvalue()


@pytest.mark.parametrize("key", ["value", "low", "high", "threshold", "confidence"])
@pytest.mark.parametrize("crafted", ["0.5", [1], {"a": 1}, True])
def test_a_crafted_number_in_a_gate_record_names_the_row(tmp_path, capsys, key, crafted):
    h = History(tmp_path / "h.sqlite")
    for _ in range(2):
        h.record(
            {"started": "t"},
            [{"test": "t.py::test_a", "metric": "map", "value": 0.5, "passed": True}],
        )
    con = sqlite3.connect(h.path)
    con.execute(
        f"UPDATE results SET detail = ?{', ' + key + ' = NULL' if key != 'confidence' else ''} WHERE id = 2",
        (json.dumps({key: crafted}),),
    )
    con.commit()
    con.close()
    for command in (
        ["show", "2"],
        ["compare", "1", "2"],
        ["report", "2", "-o", str(tmp_path / "r.html")],
    ):
        assert cli(["--db", str(h.path), *command], out=io.StringIO()) == 2, command
        err = capsys.readouterr().err
        assert str(h.path) in err and "results row 2 (run 2)" in err and "delete that row" in err, (
            err
        )
