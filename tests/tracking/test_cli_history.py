"""The history commands of ``retrieval-checks`` on a database written with History.record:
metric aliases and short test names in ``history``, ``--limit`` counting runs, one
ordering (newest first), ``export``'s format from ``-o``, ``runs`` with the command,
selection, branch and dirty flag and its filters, ``compare`` against a commit and
UNTESTED when significance cannot be tested, and help text on every argument."""

from __future__ import annotations

import argparse
import csv
import io
import json

import pytest

from retrieval_checks.tracking import History
from retrieval_checks.tracking import main as cli
from retrieval_checks.tracking._cli import build_parser

C1, C2, C3 = "a1b2c3d4" + "0" * 32, "a1b2ffff" + "1" * 32, "bead" + "2" * 36


def _cli(*args):
    out = io.StringIO()
    return cli(list(map(str, args)), out=out), out.getvalue()


def _gate(test, metric, value, low=None, high=None, passed=True, **kw):
    return {
        "test": test,
        "metric": metric,
        "value": value,
        "low": low,
        "high": high,
        "passed": passed,
        **kw,
    }


@pytest.fixture
def db(tmp_path):
    """Three runs: two full runs on main (C1, C2; the second dirty), a partial one on a branch (C3)."""
    path = tmp_path / "h.sqlite"
    h = History(path)
    h.record(
        {
            "started": "t1",
            "git_commit": C1,
            "git_branch": "main",
            "git_dirty": 0,
            "selection": "",
            "command": "pytest tests",
        },
        [
            _gate("tests/test_search.py::test_rank[small]", "ndcg@10", 0.70, 0.66, 0.74),
            _gate("tests/test_search.py::test_rank[large]", "ndcg@10", 0.60, 0.55, 0.65),
            _gate("tests/test_other.py::test_rank", "map", 0.50, model="m1", dataset="d1"),
        ],
    )
    h.record(
        {
            "started": "t2",
            "git_commit": C2,
            "git_branch": "main",
            "git_dirty": 1,
            "selection": "",
            "command": "pytest tests -x",
        },
        [
            _gate("tests/test_search.py::test_rank[small]", "ndcg@10", 0.71, 0.67, 0.75),
            _gate("tests/test_search.py::test_rank[large]", "ndcg@10", 0.61, 0.56, 0.66),
            _gate("tests/test_other.py::test_rank", "map", 0.45, model="m1", dataset="d1"),
        ],
    )
    h.record(
        {
            "started": "t3",
            "git_commit": C3,
            "git_branch": "feature",
            "git_dirty": 0,
            "selection": "-k small",
            "command": "pytest tests -k small",
        },
        [_gate("tests/test_search.py::test_rank[small]", "ndcg@10", 0.72, 0.68, 0.76)],
    )
    return path


def test_history_reads_metric_aliases_and_names_the_canonical_metric(db):
    code, out = _cli("--db", db, "history", "ndcg_cut@10", "--test", "test_rank[small]")
    assert code == 0 and "'ndcg_cut@10' is 'ndcg@10'" in out
    values = [line.split()[0] for line in out.splitlines()[2:]]
    assert values == ["3", "2", "1"]  # newest run first


def test_an_unknown_metric_is_an_error_with_a_suggestion(db, capsys):
    assert _cli("--db", db, "history", "ndgc@10")[0] == 2
    err = capsys.readouterr().err
    assert "never recorded" in err and "did you mean 'ndcg@10'" in err


def test_short_test_names_and_ambiguity(db, capsys):
    # the node name with its parameters, the module and name, or the whole node id: one test
    for given in (
        "test_rank[large]",
        "test_search.py::test_rank[large]",
        "tests/test_search.py::test_rank[large]",
    ):
        code, out = _cli("--db", db, "history", "ndcg@10", "--test", given)
        assert code == 0 and "test_rank[large]" in out and "test_rank[small]" not in out, given
    # the bare name matches both parameters: an error listing the candidates, never a merged series
    assert _cli("--db", db, "history", "ndcg@10", "--test", "test_rank")[0] == 2
    err = capsys.readouterr().err
    assert (
        "matches 2 recorded tests" in err
        and "test_rank[small]" in err
        and "test_rank[large]" in err
    )
    assert _cli("--db", db, "history", "ndcg@10", "--test", "test_rnak[small]")[0] == 2
    assert "no recorded test" in capsys.readouterr().err


def test_limit_counts_runs_not_rows(db):
    code, out = _cli("--db", db, "history", "ndcg@10", "--limit", "2")
    rows = [line.split() for line in out.splitlines()[2:]]
    assert code == 0 and "3 value(s) in the newest 2 run(s)" in out
    assert (
        sorted({r[0] for r in rows}) == ["2", "3"] and len(rows) == 3
    )  # run 2's two gates, run 3's one
    # the same count through the library
    assert {r["run_id"] for r in History(db).metric_runs("ndcg@10", limit=1)} == {3}


def test_runs_shows_command_selection_branch_dirty_and_filters(db):
    code, out = _cli("--db", db, "runs")
    lines = out.splitlines()
    assert code == 0 and [line.split()[0] for line in lines[1:]] == ["3", "2", "1"]
    assert (
        "partial: -k small" in lines[1]
        and "feature" in lines[1]
        and "pytest tests -k small" in lines[1]
    )
    assert "+dirty" in lines[2] and "full" in lines[2] and "pytest tests -x" in lines[2]
    assert [
        line.split()[0] for line in _cli("--db", db, "runs", "--full-only")[1].splitlines()[1:]
    ] == ["2", "1"]
    assert [
        line.split()[0]
        for line in _cli("--db", db, "runs", "--branch", "feature")[1].splitlines()[1:]
    ] == ["3"]
    assert [
        line.split()[0] for line in _cli("--db", db, "runs", "--commit", "a1b2")[1].splitlines()[1:]
    ] == ["2", "1"]
    assert "no runs" in _cli("--db", db, "runs", "--branch", "nope")[1]


def test_a_run_recorded_before_selections_were_kept_is_not_full(tmp_path):
    path = tmp_path / "h.sqlite"
    History(path).record(
        {"started": "t", "git_commit": C1}, [_gate("t", "map", 0.5)]
    )  # no selection: unknown
    code, out = _cli("--db", path, "runs")
    assert code == 0 and "recorded before" in out
    assert "no runs" in _cli("--db", path, "runs", "--full-only")[1]


def test_compare_against_a_commit_takes_its_latest_run(db):
    def header(out):
        return next(line for line in out.splitlines() if line.startswith("test "))

    code, out = _cli("--db", db, "compare", "a1b2c3", "2", "--max-drop", "0.1")
    assert code == 0 and "run 1" in header(out) and "run 2" in header(out)
    # C2's only run is dirty: it stands for the commit only with --allow-dirty (tests/tracking/test_cli_compare_runs.py)
    code, out = _cli(
        "--db", db, "compare", "a1b2ffff", "latest", "--allow-missing", "--allow-dirty"
    )
    assert "run 2" in header(out) and "run 2 is a dirty run" in out


def test_an_ambiguous_or_unknown_commit_is_an_error(db, capsys):
    assert _cli("--db", db, "compare", "a1b2", "latest")[0] == 2
    assert "ambiguous" in capsys.readouterr().err
    assert _cli("--db", db, "compare", "cafe", "latest")[0] == 2
    err = capsys.readouterr().err
    assert "no run of a commit starting cafe" in err and "a1b2c3d400" in err  # the recorded commits
    assert _cli("--db", db, "compare", "v1.0", "latest")[0] == 2
    assert "give a run id" in capsys.readouterr().err


def test_significance_that_cannot_be_tested_is_untested_not_regressed(db):
    # map has no interval: under --significant its drop (0.50 -> 0.45) cannot be tested
    code, out = _cli("--db", db, "compare", "1", "2", "--significant", "--metric", "map")
    assert code == 1 and "UNTESTED" in out and "REGRESSED" not in out and "1 untested" in out
    assert "cannot be tested" in out and "0 regressed" in out
    code, out = _cli(
        "--db", db, "compare", "1", "2", "--significant", "--metric", "map", "--allow-untested"
    )
    assert code == 0 and "UNTESTED" in out
    # within the tolerance: ok, and said to be untestable
    code, out = _cli(
        "--db", db, "compare", "1", "2", "--significant", "--metric", "map", "--max-drop", "0.1"
    )
    assert code == 0 and "significance not testable" in out
    # with intervals the test runs: ndcg@10 improved, ok
    code, out = _cli("--db", db, "compare", "1", "2", "--significant", "--metric", "ndcg_cut@10")
    assert code == 0 and "UNTESTED" not in out and "2 compared" in out


def test_export_takes_its_format_from_the_extension(db, tmp_path, capsys):
    code, _ = _cli("--db", db, "export", "-o", tmp_path / "all.json")
    data = json.loads((tmp_path / "all.json").read_text())
    assert code == 0 and [r["id"] for r in data["runs"]] == [3, 2, 1]  # newest first
    code, _ = _cli("--db", db, "export", "-o", tmp_path / "all.csv")
    rows = list(csv.DictReader((tmp_path / "all.csv").open()))
    assert code == 0 and [r["run_id"] for r in rows] == ["3", "2", "2", "2", "1", "1", "1"]
    assert _cli("--db", db, "export", "-o", tmp_path / "x.csv", "--format", "json")[0] == 2
    assert "conflicts with -o" in capsys.readouterr().err and not (tmp_path / "x.csv").exists()
    assert _cli("--db", db, "export", "-o", tmp_path / "x.txt")[0] == 2
    assert "cannot tell the format" in capsys.readouterr().err
    code, _ = _cli("--db", db, "export", "-o", tmp_path / "x.txt", "--format", "json")
    assert code == 0 and json.loads((tmp_path / "x.txt").read_text())["runs"]


def _arguments(parser: argparse.ArgumentParser, where: str = "retrieval-checks"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _arguments(sub, f"{where} {name}")
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield where, action


def test_every_argument_has_help():
    found = list(_arguments(build_parser()))
    assert len(found) > 30
    missing = [
        f"{where} {'/'.join(a.option_strings) or a.dest}"
        for where, a in found
        if not (a.help or "").strip()
    ]
    assert not missing


def test_the_help_names_the_ordering_and_the_database_rule(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["runs", "--help"])
    text = capsys.readouterr().out
    assert "newest first" in text and "project root" in text
