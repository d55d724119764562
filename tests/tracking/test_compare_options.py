"""``compare`` between history runs refuses a gate whose two values were computed under
different options that change a number (ties, relevance_level, queries, ...; issue 31):
the row says NOT COMPARED with what differs, the command exits 1 and says how to fix it.
The options reach the history through the gate's event (``Measurement.extra``). Cost:
about 1 s in process, plus the engine's one-time start (one evaluate call)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from shared_setup import unheard

import retrieval_checks as rc
from retrieval_checks.tracking import History
from retrieval_checks.tracking import main as cli

META = {"started": "2026-01-01T00:00:00+00:00", "git_commit": "abc", "git_dirty": 0, "machine": "m"}


def _cli(*args):
    out = io.StringIO()
    return cli(list(args), out=out), out.getvalue()


def _gate(value, **options):
    return {"test": "t", "metric": "map", "value": value, "passed": True, "options": options}


def _two_runs(tmp_path, base, cand):
    path = tmp_path / "h.sqlite"
    History(path).record(META, [base])
    History(path).record(META, [cand])
    return path


def test_a_gate_under_other_options_is_not_compared(tmp_path):
    path = _two_runs(
        tmp_path,
        _gate(0.80, ties="pessimistic", relevance_level=1),
        _gate(0.80, ties="average", relevance_level=2),
    )
    code, text = _cli("--db", str(path), "compare", "-2", "-1", "--max-drop", "0.05")
    assert code == 1
    assert (
        "NOT COMPARED (options differ: relevance_level 1 -> 2, ties 'pessimistic' -> 'average')"
        in text
    )
    assert "1 gate(s) not compared" in text and "rerun the candidate with run 1's options" in text


def test_the_same_options_compare_and_runs_without_options_too(tmp_path):
    same = _two_runs(tmp_path, _gate(0.80, ties="docid"), _gate(0.79, ties="docid"))
    assert _cli("--db", str(same), "compare", "-2", "-1", "--max-drop", "0.05")[0] == 0
    old = {"test": "t", "metric": "map", "value": 0.8, "passed": True}  # before events held options
    (tmp_path / "o").mkdir()
    path = _two_runs(tmp_path / "o", old, _gate(0.79, ties="docid"))
    code, text = _cli("--db", str(path), "compare", "-2", "-1", "--max-drop", "0.05")
    assert code == 0 and "NOT COMPARED" not in text


def test_a_gate_over_another_evaluated_set_is_not_compared(tmp_path):
    """A smaller, easier set raised map while the model got worse, and compare said ok (a
    new user's trial): the queries used differ, so the values are not compared."""
    base = {**_gate(0.6587, ties="pessimistic"), "n_used": 1797}
    cand = {**_gate(0.6896, ties="pessimistic"), "n_used": 300}
    path = _two_runs(tmp_path, base, cand)
    code, text = _cli("--db", str(path), "compare", "-2", "-1", "--max-drop", "0.01")
    assert code == 1
    assert "NOT COMPARED (evaluated sets differ: n_used 1797 -> 300)" in text
    (tmp_path / "same").mkdir()
    same = _two_runs(tmp_path / "same", base, {**cand, "n_used": 1797})
    assert _cli("--db", str(same), "compare", "-2", "-1", "--max-drop", "0.05")[0] == 0


@pytest.mark.filterwarnings("ignore::retrieval_checks.IntervalWarning")
def test_a_gates_event_carries_the_options_of_its_result():
    """What the plugin writes to the history: the gate's event, with the result's options."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 4)).astype(np.float32)
    res = rc.evaluate(x, query_labels=np.arange(30) % 5, metrics=["map"], ties="average")
    seen = []
    with unheard(seen.append):  # heard by this test alone (rc.gates.listening)
        rc.assert_metric(res, "map", at_least=0.01)
    assert seen[0].to_dict()["options"] == {
        "ties": "average",
        "relevance_level": 1,
        "empty_queries": "skip",
        "ignore_identical_ids": False,
    }
