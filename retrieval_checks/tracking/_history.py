"""Run history: every session's gate outcomes in an embedded SQLite database.

One row in ``runs`` per session (start and end time, git commit and dirty flag,
machine, Python, command line, exit status) and one row in ``results`` per gate
outcome (test, suite, model, dataset, metric, value, interval, threshold, rule,
pass/fail, sample size). The database uses WAL journaling and a busy timeout, and a
session writes its rows in one ``BEGIN IMMEDIATE`` transaction, so several processes
(two pytest sessions, the command line) can share it; under pytest-xdist only the
controller writes. ``History.runs()``, ``results()`` and ``metric_history()`` read it
back; the ``retrieval-checks`` command line is built on them.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

from ..errors import InputError

__all__ = ["History", "run_metadata"]

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started TEXT NOT NULL,
    finished TEXT,
    git_commit TEXT,
    git_dirty INTEGER,
    machine TEXT,
    python TEXT,
    command TEXT,
    rootdir TEXT,
    exitstatus INTEGER,
    n_gates INTEGER NOT NULL DEFAULT 0,
    n_failed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    test TEXT NOT NULL,
    suite TEXT,
    model TEXT,
    dataset TEXT,
    metric TEXT NOT NULL,
    gate TEXT,
    value REAL,
    low REAL,
    high REAL,
    threshold REAL,
    comparison TEXT,
    on_ TEXT,
    passed INTEGER NOT NULL,
    n INTEGER,
    unit TEXT,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS results_by_metric ON results (metric, model, dataset, run_id);
CREATE INDEX IF NOT EXISTS results_by_run ON results (run_id);
"""
_COLUMNS = ("test", "suite", "model", "dataset", "metric", "gate", "value", "low", "high", "threshold", "comparison",
            "on_", "passed", "n", "unit", "detail")


def _git(rootdir: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=rootdir, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def run_metadata(rootdir=".", command: str | None = None) -> dict:
    """Where and on what a run happened: git commit and dirty flag (None outside a
    repository), machine, Python, command line, start time (UTC, ISO 8601)."""
    root = Path(rootdir)
    commit = _git(root, "rev-parse", "HEAD")
    status = _git(root, "status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": commit,
        "git_dirty": None if status is None else int(bool(status)),
        "machine": f"{socket.gethostname()} ({platform.system()} {platform.machine()}, {os.cpu_count()} cpus)",
        "python": platform.python_version(),
        "command": command if command is not None else " ".join(sys.argv),
        "rootdir": str(root.resolve()),
    }


class History:
    """The run-history database at ``path`` (created on first use, parents included)."""

    def __init__(self, path, *, timeout: float = 60.0):
        self.path = Path(path)
        self.timeout = timeout

    def _connect(self, create: bool = True) -> sqlite3.Connection:
        """A connection; ``create`` (writers) makes the file, the schema and WAL mode,
        readers only check the schema version."""
        if not create and not self.path.exists():
            raise InputError(f"{self.path}: no run history there yet (pytest writes it; --rc-history sets the path).")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            con.row_factory = sqlite3.Row
            con.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
            con.execute("PRAGMA foreign_keys=ON")
            if create:  # readers never write: no schema statements, no lock taken on their behalf
                con.execute("PRAGMA journal_mode=WAL")
                con.executescript(_SCHEMA)
                con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(_SCHEMA_VERSION),))
            version = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{self.path}: not a retrieval-checks history database ({exc}).") from None
        if int(version) != _SCHEMA_VERSION:
            con.close()
            raise InputError(f"{self.path}: history schema version {version}, this version reads {_SCHEMA_VERSION}.")
        return con

    def record(self, metadata: dict, outcomes: list[dict], *, exitstatus: int | None = None) -> int:
        """Append one run and its gate outcomes in one transaction; returns the run id."""
        rows = []
        for o in outcomes:
            known = {"test", "suite", "model", "dataset", "metric", "gate", "value", "low", "high", "threshold",
                     "comparison", "on", "passed", "n", "unit"}
            detail = {k: v for k, v in o.items() if k not in known}
            rows.append((o.get("test", ""), o.get("suite"), o.get("model"), o.get("dataset"), o["metric"],
                         o.get("gate"), _num(o.get("value")), _num(o.get("low")), _num(o.get("high")),
                         _num(o.get("threshold")), o.get("comparison"), o.get("on"), int(bool(o.get("passed"))),
                         o.get("n"), o.get("unit"), json.dumps(detail, default=str) if detail else None))
        finished = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")  # one writer at a time; others wait up to the busy timeout
            cur = con.execute(
                "INSERT INTO runs (started, finished, git_commit, git_dirty, machine, python, command, rootdir, "
                "exitstatus, n_gates, n_failed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (metadata.get("started", finished), finished, metadata.get("git_commit"), metadata.get("git_dirty"),
                 metadata.get("machine"), metadata.get("python"), metadata.get("command"), metadata.get("rootdir"),
                 exitstatus, len(rows), sum(1 for r in rows if not r[12])))
            run_id = int(cur.lastrowid)
            con.executemany(f"INSERT INTO results (run_id, {', '.join(_COLUMNS)}) VALUES "
                            f"(?, {', '.join('?' * len(_COLUMNS))})", [(run_id, *r) for r in rows])
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        finally:
            con.close()
        return run_id

    def runs(self, limit: int | None = None) -> list[dict]:
        """Runs, newest first."""
        con = self._connect(create=False)
        try:
            sql = "SELECT * FROM runs ORDER BY id DESC" + (f" LIMIT {int(limit)}" if limit else "")
            return [dict(r) for r in con.execute(sql)]
        finally:
            con.close()

    def resolve(self, ref) -> int:
        """A run id from ``ref``: an id, ``latest`` / ``-1`` (newest), ``-2`` (the one before), ..."""
        runs = self.runs()
        if not runs:
            raise InputError(f"{self.path}: the history has no runs yet.")
        text = str(ref).strip().lower()
        if text in ("latest", "last"):
            return runs[0]["id"]
        try:
            n = int(text)
        except ValueError:
            raise InputError(f"run {ref!r}: give a run id, 'latest', or -1, -2, ... (newest first).") from None
        if n < 0:
            if -n > len(runs):
                raise InputError(f"run {ref}: the history has only {len(runs)} run(s).")
            return runs[-n - 1]["id"]
        if not any(r["id"] == n for r in runs):
            raise InputError(f"run {n} is not in {self.path}; runs: {', '.join(str(r['id']) for r in runs[:10])}...")
        return n

    def results(self, run_id: int) -> list[dict]:
        con = self._connect(create=False)
        try:
            rows = con.execute("SELECT * FROM results WHERE run_id = ? ORDER BY id", (int(run_id),))
            return [_row(r) for r in rows]
        finally:
            con.close()

    def metric_history(self, metric: str, *, model=None, dataset=None, test=None, limit: int = 50) -> list[dict]:
        """Past values of one metric (optionally of one model / dataset / test), oldest first,
        with each run's time and commit."""
        con = self._connect(create=False)
        try:
            where, args = ["r.metric = ?"], [metric]
            for col, val in (("model", model), ("dataset", dataset), ("test", test)):
                if val is not None:
                    where.append(f"r.{col} = ?")
                    args.append(val)
            sql = (f"SELECT r.*, u.started, u.git_commit, u.git_dirty FROM results r JOIN runs u ON u.id = r.run_id "
                   f"WHERE {' AND '.join(where)} ORDER BY r.run_id DESC, r.id DESC LIMIT ?")
            return [_row(r) for r in con.execute(sql, (*args, int(limit)))][::-1]
        finally:
            con.close()


def _num(v):
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _row(r: sqlite3.Row) -> dict:
    d = dict(r)
    d["on"] = d.pop("on_", None)
    d["passed"] = bool(d["passed"])
    if d.get("detail"):
        d.update(json.loads(d.pop("detail")))
    else:
        d.pop("detail", None)
    return d
