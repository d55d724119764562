"""The command line's contract over every command (tracking/_cli.py), fail closed (issue
12): each user mistake (a bad flag value, an unknown run or metric, a missing database,
an unwritable output) exits 2 with a message naming it, never a traceback; a regression
exits 1 and a clean compare 0; a red run never checks green (a failed gate, a non-zero
exit status, an error record, a gate missing from or errored in the candidate); --db is
accepted before and after the command. (Which runs compare judges:
test_cli_compare_runs.py; the history commands' output: test_cli_history.py.)
Cost: about 13 s at a load average of 16 (measured; 63 cases, in-process command-line runs on a
small SQLite history)."""

from __future__ import annotations

import pytest
from shared_setup import HISTORY_GATE as GATE
from shared_setup import HISTORY_META as META
from shared_setup import history_cli as _cli

from retrieval_checks.tracking import History


# --- command-line user errors exit 2 ---
@pytest.mark.parametrize(
    "args, expected",
    [
        (["runs", "--limit", "0"], "--limit"),
        (["runs", "--limit", "-3"], "--limit"),
        (["runs", "--limit", "abc"], "--limit"),
        (["runs", "--limit", "1.5"], "--limit"),
        (["history", "map", "--limit", "0"], "--limit"),
        (["export", "--format", "xml"], "--format"),
        (["compare", "1", "1", "--confidence", "nan"], "--confidence"),
        (["compare", "1", "1", "--confidence", "95"], "did you mean 0.95"),
        (["compare", "1", "1", "--confidence", "1"], "--confidence"),
        (["compare", "1", "1", "--max-drop", "nan"], "--max-drop"),
        (["compare", "1", "1", "--max-drop", "-0.1"], "--max-drop"),
        (["compare", "1", "1", "--max-drop", "inf"], "--max-drop"),
        (["compare", "1", "1", "--max-relative-drop", "x"], "--max-relative-drop"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
)
def test_bad_arguments_exit_2_naming_the_flag(db, capsys, args, expected):
    code, _ = _cli("--db", str(db), *args)
    err = capsys.readouterr().err
    assert code == 2 and expected in err and "Traceback" not in err


@pytest.mark.parametrize(
    "ref, expected",
    [
        ("99", "run 99 is not in"),
        ("-5", "only 1 run"),
        ("newest", "give a run id"),
        ("1.5", "give a run id"),
        ("0", "run 0 is not in"),
    ],
)
@pytest.mark.parametrize("command", ["show", "compare", "report", "export"])
def test_an_unknown_run_exits_2(db, tmp_path, capsys, ref, expected, command):
    args = {
        "show": ["show", ref],
        "compare": ["compare", ref, "latest"],
        "export": ["export", "--run", ref],
        "report": ["report", ref, "-o", str(tmp_path / "r.html")],
    }[command]
    code, _ = _cli("--db", str(db), *args)
    err = capsys.readouterr().err
    assert code == 2 and expected in err and str(db) in err or (code == 2 and expected in err)


@pytest.mark.parametrize(
    "command", [["runs"], ["show"], ["history", "map"], ["export"], ["report", "-o", "r.html"]]
)
def test_a_missing_database_exits_2_and_is_not_created(tmp_path, capsys, command):
    missing = tmp_path / "nowhere" / "h.sqlite"
    code, _ = _cli("--db", str(missing), *command)
    err = capsys.readouterr().err
    assert code == 2 and "no run history there yet" in err and str(missing) in err
    assert not missing.parent.exists()


@pytest.mark.parametrize("target", ["a directory", "under a file", "missing directory"])
@pytest.mark.parametrize("command", ["export", "report"])
def test_an_unwritable_output_exits_2_naming_it(db, tmp_path, capsys, target, command):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    out = {
        "a directory": tmp_path / "dir",
        "under a file": tmp_path / "file" / "o.txt",
        "missing directory": tmp_path / "no" / "such" / "o.txt",
    }[target]
    args = (
        ["export", "-o", str(out)] if command == "export" else ["report", "latest", "-o", str(out)]
    )
    code, _ = _cli("--db", str(db), *args)
    err = capsys.readouterr().err
    assert code == 2 and str(out) in err and "Traceback" not in err


def test_a_regression_still_exits_1_and_a_clean_compare_0(tmp_path):
    path = tmp_path / "h.sqlite"
    h = History(path)
    h.record(META, [{"test": "t", "metric": "map", "value": 0.8, "passed": True}])
    h.record(META, [{"test": "t", "metric": "map", "value": 0.7, "passed": True}])
    assert _cli("--db", str(path), "compare", "-2", "-1", "--max-drop", "0.05")[0] == 1
    assert _cli("--db", str(path), "compare", "-2", "-1", "--max-drop", "0.2")[0] == 0


# --- a red run never checks green (review of issue 12) ---
def _two_runs(tmp_path, base, cand, status=(0, 0)):
    path = tmp_path / "h2.sqlite"
    History(path).record(META, base, exitstatus=status[0])
    History(path).record(META, cand, exitstatus=status[1])
    return path


def test_show_check_fails_on_a_failed_gate_and_says_so(db):
    code, text = _cli("--db", str(db), "show", "latest", "--check")
    assert code == 1 and "1 of 2 gates failed" in text


def test_show_check_fails_on_a_non_zero_exit_status_even_when_every_gate_passed(tmp_path):
    path = tmp_path / "h.sqlite"
    History(path).record(META, [GATE], exitstatus=1)
    code, text = _cli("--db", str(path), "show", "--check")
    assert code == 1 and "exited with status 1" in text and "gates failed" not in text
    History(path).record(META, [GATE], exitstatus=0)
    code, text = _cli("--db", str(path), "show", "--check")
    assert code == 0 and "check passed" in text


def test_show_check_counts_an_error_record_as_a_failure(tmp_path):
    path = tmp_path / "h.sqlite"
    error = {
        "test": "rc_b.yaml::suite",
        "metric": "(suite)",
        "gate": "error",
        "value": None,
        "passed": False,
        "on": "error",
        "message": "invalid suite",
    }
    History(path).record(META, [GATE, error], exitstatus=0)
    code, text = _cli("--db", str(path), "show", "--check")
    assert code == 1 and "1 of 2 gates failed" in text and "error" in text


@pytest.mark.parametrize("where", ["before", "after"])
def test_db_is_accepted_before_and_after_the_command(db, where):
    args = (
        ["--db", str(db), "show", "latest"]
        if where == "before"
        else ["show", "latest", "--db", str(db)]
    )
    assert _cli(*args)[0] == 0
    args = ["runs", "--db", str(db)] if where == "after" else ["--db", str(db), "runs"]
    assert _cli(*args)[0] == 0


def test_db_after_the_command_overrides_the_one_before(db, tmp_path, capsys):
    assert _cli("--db", str(tmp_path / "missing.sqlite"), "show", "--db", str(db))[0] == 0
    assert _cli("--db", str(db), "show", "--db", str(tmp_path / "missing.sqlite"))[0] == 2


def test_db_after_the_command_keeps_the_exit_codes(db):
    assert _cli("show", "latest", "--check", "--db", str(db))[0] == 1


@pytest.mark.parametrize(
    "metric, close", [("nosuch", None), ("mapp", "map"), ("hit_rate@2", "hit_rate@1")]
)
def test_compare_with_an_unknown_metric_exits_2_with_the_closest_name(db, capsys, metric, close):
    History(db).record(
        META, [GATE]
    )  # a second run: a run compared with itself is an error of its own
    code, text = _cli(
        "--db", str(db), "compare", "1", "2", "--metric", metric, "--max-drop", "0.01"
    )
    err = capsys.readouterr().err
    assert code == 2 and f"--metric {metric}" in err and "compared" not in text
    if close:
        assert f"did you mean {close!r}" in err


def test_compare_with_nothing_to_judge_exits_2(tmp_path, capsys):
    path = _two_runs(tmp_path, [{**GATE, "value": None}], [{**GATE, "value": None}])
    code, _ = _cli("--db", str(path), "compare", "1", "2")
    assert code == 2 and "nothing to judge" in capsys.readouterr().err


def test_a_gate_missing_from_the_candidate_is_a_regression_unless_allowed(tmp_path, capsys):
    path = _two_runs(tmp_path, [GATE, {**GATE, "test": "t.py::test_b"}], [GATE])
    code, text = _cli("--db", str(path), "compare", "1", "2")
    assert code == 1 and "MISSING" in text and "t.py::test_b" in text and "--allow-missing" in text
    code, text = _cli("--db", str(path), "compare", "1", "2", "--allow-missing")
    assert code == 0


def test_a_candidate_with_only_missing_gates_exits_1_not_0(tmp_path):
    path = _two_runs(tmp_path, [GATE], [{**GATE, "test": "t.py::other"}])
    code, text = _cli("--db", str(path), "compare", "1", "2")
    assert code == 1 and "1 only in run 1" in text


def test_a_gate_that_errored_in_the_candidate_is_a_regression(tmp_path):
    error = {**GATE, "gate": "error", "value": None, "low": None, "high": None, "passed": False}
    path = _two_runs(tmp_path, [GATE], [error])
    code, text = _cli("--db", str(path), "compare", "1", "2")
    assert code == 1 and "REGRESSED (no value" in text


def test_history_of_an_unknown_metric_exits_2_with_the_closest_name(db, capsys):
    assert _cli("--db", str(db), "history", "nosuch")[0] == 2
    assert "never recorded" in capsys.readouterr().err
    assert _cli("--db", str(db), "history", "mapp")[0] == 2
    assert "did you mean 'map'" in capsys.readouterr().err


def test_history_of_a_known_metric_with_filters_matching_nothing_is_not_an_error(db):
    code, text = _cli("--db", str(db), "history", "map", "--model", "nobody")
    assert code == 0 and "no recorded values" in text


# --- a reader that stops reading (`... | head`) ---
class _ClosedPipe:
    """An output whose reader went away: every write raises BrokenPipeError."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize(
    "args", [["runs"], ["show", "latest"], ["history", "map"], ["compare", "-2", "-1"]]
)
def test_a_closed_pipe_is_not_reported_as_a_database_error(tmp_path, capsys, args):
    """`retrieval-checks show latest | head -1` said "history.sqlite: Broken pipe" and
    exited 2 (a damaged database, by this CLI's codes): it now stops quietly with 141,
    what Unix tools exit with on SIGPIPE, so `set -o pipefail` still sees that the
    command did not finish (a cut-short compare must never read as a clean one)."""
    from retrieval_checks.tracking._cli import main

    path = tmp_path / "h.sqlite"
    h = History(path)
    h.record(META, [{"test": "t", "metric": "map", "value": 0.8, "passed": True}])
    h.record(META, [{"test": "t", "metric": "map", "value": 0.79, "passed": True}])
    assert main(["--db", str(path), *args], out=_ClosedPipe()) == 141
    assert capsys.readouterr().err == ""
