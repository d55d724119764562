"""Issue 25, plugin: --rc-regen-all counts what it did in the same units as the table
(every baseline it rewrote is a record of its test, not a test with no gate), and the
step summary never calls a check "new" because the previous run was partial.
In-process pytester runs (fast)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest_plugins = ["pytester"]

SUITE = """datasets:
  d: {queries: emb.npz}
  e: {queries: emb.npz}
models:
  m: {callable: emb.py:f}
  n: {callable: emb.py:g}
checks:
  - {metric: map, baseline: true, datasets: [d, e]}
  - {metric: hit_rate@1, baseline: true, dataset: d, model: m}
  - {metric: map, at_least: 0.01, dataset: d}
"""
PYTEST = """
import numpy as np

def test_two_baselines(rc_evaluate, rc_baseline):
    y = np.repeat(np.arange(6), 4)
    x = np.random.default_rng(0).normal(size=(24, 8)).astype(np.float32)
    r = rc_evaluate(x, query_labels=y, metrics=["map", "mrr"], model="py", dataset="d")
    rc_baseline(r, "map")
    rc_baseline(r, "mrr")
"""


@pytest.fixture
def regen_project(pytester):
    y = np.repeat(np.arange(6), 4)
    x = np.random.default_rng(0).normal(size=(24, 8)).astype(np.float32)
    np.savez(pytester.path / "emb.npz", inputs=x, labels=y)
    pytester.path.joinpath("emb.py").write_text(
        "import numpy as np\n\ndef f(x):\n    return np.asarray(x)\n\n"
        "def g(x):\n    return np.asarray(x) * 2\n"
    )
    pytester.path.joinpath("rc_s.yaml").write_text(SUITE)
    pytester.makepyfile(test_py=PYTEST)
    return pytester


def _run(pytester, *args):
    return pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-history", "none", "--rc-json", "g.json", *args
    )


def test_regen_all_records_every_rewritten_baseline_and_counts_both_units(regen_project):
    result = _run(regen_project, "--rc-regen-all")
    result.assert_outcomes(passed=8)  # 4 + 1 baseline items, 2 threshold items, 1 Python test
    gates = json.loads((regen_project.path / "g.json").read_text())["gates"]
    regenerated = [g for g in gates if g["on"] == "regenerated"]
    # 5 suite baselines and the Python test's 2: 7 records, from 6 tests; every test has a record
    assert len(regenerated) == 7 and len({g["test"] for g in regenerated}) == 6
    assert {g["test"] for g in gates} == {
        r.nodeid for r in result.reprec.getreports("pytest_runtest_logreport") if r.when == "call"
    }
    assert all(
        g["passed"] and g["gate"] == "assert_no_regression" and g["value"] is not None
        for g in regenerated
    )
    assert all(g["low"] is not None and g["low"] <= g["value"] <= g["high"] for g in regenerated)
    suite_map = next(g for g in regenerated if g["test"] == "rc_s.yaml::map_vs_baseline[n-e]")
    assert (suite_map["model"], suite_map["dataset"], suite_map["metric"]) == ("n", "e", "map")
    # what each value was computed under rides on its record, as a checked gate's does, so
    # compare can refuse two regenerated values under other options (h25: it said ok)
    assert suite_map["options"]["ties"] in ("average", "pessimistic", "optimistic")
    result.stdout.fnmatch_lines(
        ["9 gates: 9 passed, 0 failed", "*--rc-regen-all: 7 baselines rewritten by 6 tests*"]
    )
    # and the files hold exactly those records
    again = _run(regen_project)
    again.assert_outcomes(passed=8)
    checked = json.loads((regen_project.path / "g.json").read_text())["gates"]
    same = next(g for g in checked if g["test"] == suite_map["test"])
    assert same["options"] == suite_map["options"]
    compared = json.loads((regen_project.path / "g.json").read_text())["gates"]
    assert len([g for g in compared if g["gate"] == "assert_no_regression"]) == 7
    assert not any(g["on"] == "regenerated" for g in compared)


# ------------------------------------------------------------------ the step summary after a partial run
def _gate(test, value=0.5, passed=True):
    return {
        "test": test,
        "metric": "map",
        "gate": "assert_metric",
        "value": value,
        "passed": passed,
        "on": "value",
        "comparison": ">=",
        "threshold": 0.1,
    }


def _summary_rows(tmp_path, previous_selection, previous_tests, current_tests):
    from types import SimpleNamespace

    from pytest_retrieval_checks import _github
    from retrieval_checks.tracking import History

    db = tmp_path / "h.sqlite"
    h = History(db)
    h.record(
        {"selection": previous_selection}, [_gate(t, 0.4) for t in previous_tests], exitstatus=0
    )
    outcomes = [_gate(t) for t in current_tests]
    run_id = h.record({"selection": ""}, outcomes, exitstatus=0)
    summary = tmp_path / "summary.md"
    config = SimpleNamespace(
        rootpath=tmp_path, pluginmanager=SimpleNamespace(get_plugin=lambda name: None)
    )
    notes = []
    _github.publish(
        config,
        outcomes,
        {"id": run_id, "selection": ""},
        db,
        notes,
        environ={
            "GITHUB_ACTIONS": "true",
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_WORKSPACE": str(tmp_path),
        },
    )
    text = summary.read_text()
    return {
        row.split(" | ")[1]: row.split(" | ")[-1].rstrip(" |")
        for row in text.splitlines()
        if row.startswith("| PASS")
    }, text


def test_a_check_missing_from_a_partial_previous_run_is_not_called_new(tmp_path):
    rows, text = _summary_rows(
        tmp_path, "-k 'a'; 1 deselected", ["t.py::a"], ["t.py::a", "t.py::b"]
    )
    assert rows["t.py::a"] == "+0.1000 vs run 1"  # the gate the partial run had: compared
    assert (
        rows["t.py::b"] != "new" and "partial" in rows["t.py::b"] and "run 1" in rows["t.py::b"]
    ), rows
    assert "-k" in text  # what narrowed the previous run is said


def test_a_check_missing_from_a_full_previous_run_is_new(tmp_path):
    rows, _ = _summary_rows(tmp_path, "", ["t.py::a"], ["t.py::a", "t.py::b"])
    assert rows == {"t.py::a": "+0.1000 vs run 1", "t.py::b": "new"}


def test_a_previous_run_of_unknown_selection_is_not_known_to_be_full(tmp_path):
    rows, _ = _summary_rows(tmp_path, None, ["t.py::a"], ["t.py::a", "t.py::b"])
    assert rows["t.py::b"] != "new" and "run 1" in rows["t.py::b"], rows


def test_suite_gate_records_say_how_each_model_was_scored(regen_project):
    regen_project.path.joinpath("rc_s.yaml").write_text(
        SUITE.replace("emb.py:g}", "emb.py:g, similarity: dot}")
    )
    _run(regen_project, "--rc-regen-all").assert_outcomes(passed=8)
    gates = json.loads((regen_project.path / "g.json").read_text())["gates"]
    scored = {
        (g["model"], g["similarity"], g["ties"]) for g in gates if g["test"].startswith("rc_s.yaml")
    }
    assert scored == {("m", "cosine", "pessimistic"), ("n", "dot", "pessimistic")}
