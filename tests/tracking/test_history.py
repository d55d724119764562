"""The run history (tracking.History) fails closed (issue 12): foreign, damaged and
hand-edited databases give the library's error naming the file and the row (the command
line exits 2, never 1 or a traceback); both bounds and the queries used / skipped are
stored and read back (old databases migrated by their next writer, never by a reader);
NaN and infinities are stored as NULL; limits and run ids are type-checked.
(Concurrent writers: test_tracking.py; a history this user cannot write:
test_history_read_only.py.) Cost: about 12 s at a load average of 16 (measured; 122 cases,
each writing a small SQLite history in a temporary directory)."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest
from shared_setup import HISTORY_GATE as GATE
from shared_setup import HISTORY_META as META
from shared_setup import history_cli as _cli

import retrieval_checks as rc
from retrieval_checks.tracking import History


# --- files that are not a history ---
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


# --- garbage rows ---
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


# --- both bounds, queries used and skipped; old databases; NaN ---
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


# --- arguments of the readers ---
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
