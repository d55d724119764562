"""Fail-closed battery for the run history, the HTML report and the command line (issue 12):
foreign, damaged and hand-edited databases give the library's error naming the file (the
CLI exits 2, never 1 or a traceback), both bounds and the queries used / skipped are
stored and read back (old databases migrated), every field read back is escaped in HTML,
and every user mistake on the command line exits 2 with a message naming the flag."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest

import retrieval_checks as rc
from retrieval_checks.tracking import History, render_report
from retrieval_checks.tracking import main as cli

META = {
    "started": "2026-01-01T00:00:00+00:00",
    "git_commit": "abc123",
    "git_dirty": 0,
    "machine": "m",
}
GATE = {
    "test": "t.py::test_a",
    "metric": "map",
    "gate": "assert_metric",
    "value": 0.72,
    "low": 0.65,
    "high": 0.78,
    "threshold": 0.5,
    "comparison": "between",
    "on": "value",
    "bounds": {"at_least": 0.5, "at_most": 0.9},
    "passed": True,
    "n": 40,
    "unit": "queries",
    "n_used": 40,
    "n_skipped": 10,
    "warnings": ["10 of 50 queries skipped"],
}


def _cli(*args):
    out = io.StringIO()
    return cli(list(args), out=out), out.getvalue()


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "h.sqlite"
    History(path).record(
        META,
        [
            GATE,
            {
                **GATE,
                "test": "t.py::test_b",
                "metric": "hit_rate@1",
                "value": 0.4,
                "passed": False,
                "bounds": {},
                "comparison": ">=",
                "n_skipped": 0,
            },
        ],
        exitstatus=1,
    )
    return path


# ------------------------------------------------------------------ files that are not a history
def _foreign_tables(p):
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    con.commit()
    con.close()


def _foreign_runs(p):
    con = sqlite3.connect(p)
    con.executescript(
        "CREATE TABLE meta (key TEXT, value TEXT); INSERT INTO meta VALUES ('schema_version', '2');"
        "CREATE TABLE runs (x); CREATE TABLE results (y);"
    )
    con.close()


def _no_version(p):
    con = sqlite3.connect(p)
    con.executescript("CREATE TABLE meta (key TEXT, value TEXT); CREATE TABLE runs (id INTEGER);")
    con.close()


def _text_version(p):
    History(p).record(META, [GATE])
    con = sqlite3.connect(p)
    con.execute("UPDATE meta SET value='two' WHERE key='schema_version'")
    con.commit()
    con.close()


def _newer(p):
    History(p).record(META, [GATE])
    con = sqlite3.connect(p)
    con.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    con.commit()
    con.close()


BAD_FILES = {
    "foreign tables": (_foreign_tables, "customers"),
    "foreign runs table": (_foreign_runs, "lacks the columns"),
    "meta without a version": (_no_version, "not a retrieval-checks history database"),
    "a version that is text": (_text_version, "schema version"),
    "a newer schema": (_newer, "upgrade retrieval-checks"),
    "a text file": (
        lambda p: p.write_text("name,value\nmap,0.5\n"),
        "not a retrieval-checks history database",
    ),
    "random bytes": (
        lambda p: p.write_bytes(bytes(range(256)) * 8),
        "not a retrieval-checks history database",
    ),
    "an empty file": (lambda p: p.write_bytes(b""), "not a retrieval-checks history database"),
    "a directory": (lambda p: p.mkdir(), "is a directory"),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
@pytest.mark.parametrize("read", ["runs", "results", "metric_history", "resolve"])
def test_readers_refuse_a_file_that_is_not_a_history(tmp_path, kind, read):
    path = tmp_path / "bad.sqlite"
    make, expected = BAD_FILES[kind]
    make(path)
    h = History(path)
    calls = {
        "runs": lambda: h.runs(),
        "results": lambda: h.results(1),
        "metric_history": lambda: h.metric_history("map"),
        "resolve": lambda: h.resolve("latest"),
    }
    with pytest.raises(rc.InputError) as info:
        calls[read]()
    message = str(info.value)
    assert str(path) in message and expected in message
    if kind != "an empty file":
        assert (
            "--db" in message
            or "directory" in message
            or "upgrade" in message
            or "move this file" in message
        )


@pytest.mark.parametrize("kind", sorted(set(BAD_FILES) - {"an empty file"}))
def test_the_writer_refuses_a_file_that_is_not_a_history_and_leaves_it_alone(tmp_path, kind):
    path = tmp_path / "bad.sqlite"
    make, expected = BAD_FILES[kind]
    make(path)
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(rc.InputError, match="bad.sqlite"):
        History(path).record(META, [GATE])
    if kind in ("foreign tables", "a text file", "random bytes"):
        assert path.read_bytes() == before  # no table of ours added to somebody else's file


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
@pytest.mark.parametrize(
    "command", [["runs"], ["show"], ["history", "map"], ["export"], ["compare", "1", "1"]]
)
def test_the_command_line_exits_2_on_a_file_that_is_not_a_history(tmp_path, capsys, kind, command):
    path = tmp_path / "bad.sqlite"
    BAD_FILES[kind][0](path)
    code, _ = _cli("--db", str(path), *command)
    err = capsys.readouterr().err
    assert (
        code == 2
        and "bad.sqlite" in err
        and "Traceback" not in err
        and err.startswith("retrieval-checks: error:")
    )


# ------------------------------------------------------------------ garbage rows
GARBAGE = {
    "text value": ("UPDATE results SET value='high' WHERE id=1", "column value holds 'high'"),
    "text low": ("UPDATE results SET low='x' WHERE id=1", "column low"),
    "text threshold": ("UPDATE results SET threshold='0.5abc' WHERE id=1", "column threshold"),
    "text n": ("UPDATE results SET n='many' WHERE id=1", "column n "),
    "text n_skipped": ("UPDATE results SET n_skipped='some' WHERE id=1", "column n_skipped"),
    "passed 7": ("UPDATE results SET passed=7 WHERE id=1", "column passed"),
    "passed text": ("UPDATE results SET passed='yes' WHERE id=1", "column passed"),
    "damaged detail": ("UPDATE results SET detail='{not json' WHERE id=1", "column detail"),
    "detail a list": ("UPDATE results SET detail='[1, 2]' WHERE id=1", "column detail"),
    "bounds text": (
        'UPDATE results SET bounds=\'{"at_least": "lots"}\' WHERE id=1',
        "column bounds",
    ),
    "bounds not json": ("UPDATE results SET bounds='at_least=0.5' WHERE id=1", "column bounds"),
    "binary metric": ("UPDATE results SET metric=x'00ff' WHERE id=1", "column metric"),
}


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_garbage_in_a_results_row_is_an_error_naming_file_and_row(db, capsys, name):
    sql, expected = GARBAGE[name]
    con = sqlite3.connect(db)
    con.execute(sql)
    con.commit()
    con.close()
    with pytest.raises(rc.InputError) as info:
        History(db).results(1)
    message = str(info.value)
    assert (
        str(db) in message
        and "results row 1" in message
        and expected in message
        and "delete that row" in message
    )
    assert _cli("--db", str(db), "show", "1")[0] == 2
    assert "results row 1" in capsys.readouterr().err


RUN_GARBAGE = {
    "n_gates text": "UPDATE runs SET n_gates='lots'",
    "n_failed NULL": "UPDATE runs SET n_failed=NULL",
    "exitstatus text": "UPDATE runs SET exitstatus='ok'",
    "started NULL": "UPDATE runs SET started=NULL",
    "git_dirty text": "UPDATE runs SET git_dirty='yes'",
}


@pytest.mark.parametrize("name", sorted(RUN_GARBAGE))
def test_garbage_in_a_runs_row_is_an_error_naming_the_file(db, capsys, name):
    con = sqlite3.connect(db)
    con.execute("PRAGMA ignore_check_constraints=ON")
    try:
        con.execute(RUN_GARBAGE[name])
    except sqlite3.IntegrityError:  # NOT NULL columns: damage the row another way
        con.execute("UPDATE runs SET n_failed='none'")
    con.commit()
    con.close()
    with pytest.raises(rc.InputError, match="runs row 1"):
        History(db).runs()
    assert _cli("--db", str(db), "runs")[0] == 2
    err = capsys.readouterr().err
    assert str(db) in err and "runs row 1" in err


# ------------------------------------------------------------------ both bounds, queries used and skipped
def test_bounds_and_skipped_queries_are_columns_and_read_back(db):
    con = sqlite3.connect(db)
    row = con.execute(
        "SELECT n_used, n_skipped, bounds FROM results WHERE test='t.py::test_a'"
    ).fetchone()
    assert row == (40, 10, json.dumps({"at_least": 0.5, "at_most": 0.9}))
    back = History(db).results(1)[0]
    assert (
        back["bounds"] == {"at_least": 0.5, "at_most": 0.9}
        and back["n_used"] == 40
        and back["n_skipped"] == 10
    )
    assert rc.gates.rule_text(back) == "0.5 <= value <= 0.9"
    assert back["warnings"] == ["10 of 50 queries skipped"]


@pytest.mark.parametrize("command", ["show", "export-csv", "export-json", "report"])
def test_the_command_line_shows_both_bounds_and_the_skipped_queries(db, tmp_path, command):
    if command == "show":
        code, out = _cli("--db", str(db), "show", "1")
        assert (
            code == 0
            and "0.5 <= value <= 0.9" in out
            and "40 / 10" in out
            and "n_used / n_skipped" in out
        )
    elif command == "export-csv":
        code, out = _cli("--db", str(db), "export", "--format", "csv")
        rows = list(csv.DictReader(io.StringIO(out)))
        assert code == 0 and rows[0]["rule"] == "0.5 <= value <= 0.9"
        assert rows[0]["n_used"] == "40" and rows[0]["n_skipped"] == "10"
    elif command == "export-json":
        code, out = _cli("--db", str(db), "export", "--format", "json")
        data = json.loads(out, parse_constant=_no_constant)
        assert code == 0 and data["results"][0]["bounds"] == {"at_least": 0.5, "at_most": 0.9}
        assert data["results"][0]["n_skipped"] == 10
    else:
        target = tmp_path / "r.html"
        code, _ = _cli("--db", str(db), "report", "1", "-o", str(target))
        page = target.read_text()
        assert (
            code == 0
            and "0.5 &lt;= value &lt;= 0.9" in page
            and "40 / 10" in page
            and "Warnings" in page
        )


def _no_constant(name):
    raise ValueError(f"non-strict JSON constant {name}")


V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, started TEXT NOT NULL, finished TEXT, git_commit TEXT,
    git_dirty INTEGER, machine TEXT, python TEXT, command TEXT, rootdir TEXT, exitstatus INTEGER,
    n_gates INTEGER NOT NULL DEFAULT 0, n_failed INTEGER NOT NULL DEFAULT 0);
CREATE TABLE results (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    test TEXT NOT NULL, suite TEXT, model TEXT, dataset TEXT, metric TEXT NOT NULL, gate TEXT, value REAL, low REAL,
    high REAL, threshold REAL, comparison TEXT, on_ TEXT, passed INTEGER NOT NULL, n INTEGER, unit TEXT, detail TEXT);
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO runs (started, n_gates, n_failed) VALUES ('2025-01-01', 1, 0);
INSERT INTO results (run_id, test, metric, value, threshold, comparison, on_, passed, detail)
    VALUES (1, 't::old', 'map', 0.7, 0.5, 'between', 'value', 1,
            '{"bounds": {"at_least": 0.5, "at_most": 0.9}, "n_used": 7, "n_skipped": 3}');
"""


@pytest.fixture
def v1(tmp_path) -> Path:
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.executescript(V1_SCHEMA)
    con.close()
    return path


def test_an_old_database_is_read_as_it_is_and_migrated_by_its_next_writer(v1):
    old = History(v1).results(1)[0]  # a reader never writes
    assert (
        old["bounds"] == {"at_least": 0.5, "at_most": 0.9}
        and old["n_used"] == 7
        and old["n_skipped"] == 3
    )
    con = sqlite3.connect(v1)
    assert con.execute("SELECT value FROM meta").fetchone()[0] == "1"
    con.close()
    run = History(v1).record(META, [GATE])
    con = sqlite3.connect(v1)
    assert (
        con.execute("SELECT value FROM meta").fetchone()[0] == "3"
    )  # 1 -> 2 -> 3 (runs.git_branch, selection)
    assert con.execute(
        "SELECT n_used, n_skipped FROM results WHERE run_id=?", (run,)
    ).fetchone() == (40, 10)
    con.close()
    assert rc.gates.rule_text(History(v1).results(1)[0]) == "0.5 <= value <= 0.9"
    assert History(v1).results(run)[0]["bounds"] == {"at_least": 0.5, "at_most": 0.9}


def test_nan_and_infinite_values_are_stored_as_null_and_read_back_finite(tmp_path):
    path = tmp_path / "h.sqlite"
    History(path).record(
        META,
        [
            {
                **GATE,
                "value": float("nan"),
                "low": float("-inf"),
                "high": float("inf"),
                "extra": {"x": float("nan")},
            }
        ],
    )
    back = History(path).results(1)[0]
    assert (
        back["value"] is None
        and back["low"] is None
        and back["high"] is None
        and back["extra"] == {"x": None}
    )


# ------------------------------------------------------------------ the HTML report escapes every field
HOSTILE = "<script>alert('x')</script>\"'><img src=x onerror=alert(1)>"


def _assert_no_markup(page: str) -> None:
    assert "<script>alert" not in page and "<img" not in page and "onerror=alert(1)>" not in page
    assert page.count("<script>") == 1  # the report's own script only


@pytest.mark.parametrize(
    "field", ["test", "suite", "model", "dataset", "metric", "gate", "comparison", "on", "unit"]
)
def test_report_escapes_every_text_field_read_back_from_the_history(tmp_path, field):
    path = tmp_path / "h.sqlite"
    h = History(path)
    hostile = {**GATE, field: HOSTILE}
    h.record({**META, "command": HOSTILE, "machine": HOSTILE, "git_commit": HOSTILE}, [hostile])
    h.record(META, [hostile])
    outcomes = h.results(2)
    page = render_report(outcomes, run=h.runs()[0], history=h)
    _assert_no_markup(page)
    assert "&lt;script&gt;" in page


@pytest.mark.parametrize(
    "field",
    [
        "value",
        "low",
        "high",
        "threshold",
        "n",
        "n_used",
        "n_skipped",
        "bounds",
        "warnings",
        "confidence",
        "passed",
    ],
)
def test_report_formats_or_escapes_a_damaged_numeric_field(field):
    value = {"bounds": {"at_least": HOSTILE}, "warnings": [HOSTILE]}.get(field, HOSTILE)
    page = render_report([{**GATE, field: value}], run={"id": HOSTILE, "exitstatus": HOSTILE})
    _assert_no_markup(page)


def test_report_with_garbage_in_the_history_says_so_instead_of_drawing_it(db):
    con = sqlite3.connect(db)
    con.execute(
        f"UPDATE results SET value={sqlite3.connect(':memory:').execute('SELECT quote(?)', (HOSTILE,)).fetchone()[0]} "
        "WHERE id=1"
    )
    con.commit()
    con.close()
    page = render_report([GATE], run={"id": 1}, history=History(db))
    _assert_no_markup(page)
    assert "history not shown" in page and "results row 1" in page


def test_report_numbers_are_formatted():
    page = render_report([{**GATE, "value": 0.123456789}], run={"id": 1})
    assert ">0.1235</td>" in page


# ------------------------------------------------------------------ command-line user errors exit 2
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


@pytest.mark.parametrize("limit", [0, -1, 1.5, "3", True])
def test_history_limits_are_checked(db, limit):
    with pytest.raises(rc.InputError, match="limit"):
        History(db).runs(limit=limit)
    with pytest.raises(rc.InputError, match="limit"):
        History(db).metric_history("map", limit=limit)


@pytest.mark.parametrize("run_id", ["1", 1.0, None, True])
def test_results_wants_a_run_id(db, run_id):
    with pytest.raises(rc.InputError, match="resolve"):
        History(db).results(run_id)


# ------------------------------------------------------------------ a red run never checks green (review)
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
