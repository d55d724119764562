"""Every output of a gate on a run evaluated over trec_eval's query set
(``queries="run"``) tells the queries outside the set apart from the skipped ones
(review finding 10): the history's row, ``show``, the HTML report, the CSV / JSON export
and the pytest terminal table.

Cost: under 1 s (one small run, one history in a temporary directory).
"""

from __future__ import annotations

import csv
import html
import io
import json

import retrieval_checks as rc
from pytest_retrieval_checks import _reports
from retrieval_checks.tracking import History
from retrieval_checks.tracking import main as cli

META = {"started": "2026-01-01T00:00:00+00:00", "git_commit": "abc", "git_dirty": 0, "machine": "m"}


def _record() -> dict:
    run = {"q0": {"a": 2.0, "b": 1.0}, "q1": {"c": 2.0, "a": 1.0}, "qX": {"a": 1.0}}
    qrels = {"q0": {"b": 1}, "q1": {"c": 1}, "q9": {"a": 1}}
    r = rc.evaluate_run(run, qrels, ["map"], queries="run")
    events = []
    with rc.gates.listening(events.append):
        rc.assert_metric(r, "map", at_least=0.1, max_skipped=0)
    return {**events[0].to_dict(), "test": "t.py::test_run"}


def _cli(*args):
    out = io.StringIO()
    return cli(list(args), out=out), out.getvalue()


def test_outputs_show_the_queries_outside_the_set(tmp_path):
    record = _record()
    assert record["n_used"] == 2 and record["n_skipped"] == 0
    assert record["queries_outside"] == 2 and record["queries"] == "run"
    db = tmp_path / "h.sqlite"
    History(db).record(META, [record])
    back = History(db).results(1)[0]
    assert back["queries_outside"] == 2 and back["n_skipped"] == 0
    shown = "2 / 0 (+2 outside queries='run')"
    code, out = _cli("--db", str(db), "show", "1")
    assert code == 0 and shown in out
    target = tmp_path / "r.html"
    assert _cli("--db", str(db), "report", "1", "-o", str(target))[0] == 0
    assert html.escape(shown) in target.read_text()
    code, out = _cli("--db", str(db), "export", "--format", "csv")
    row = list(csv.DictReader(io.StringIO(out)))[0]
    assert code == 0 and row["n_used"] == "2" and row["n_skipped"] == "0"
    code, out = _cli("--db", str(db), "export", "--format", "json")
    assert json.loads(out)["results"][0]["queries_outside"] == 2
    lines = _reports.summary_lines([record], width=300)
    assert any(shown in line for line in lines)
