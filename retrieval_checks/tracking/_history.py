"""Run history: every session's gate outcomes in an embedded SQLite database.

One row in ``runs`` per session (start and end time, git commit, branch and dirty
flag, machine, Python, command line, the test selection of a partial run, exit
status) and one row in ``results`` per gate outcome (test, suite, model, dataset,
metric, value, interval, threshold, rule, pass/fail, sample size, the queries used
and skipped, every bound of the rule). The database uses WAL journaling and a busy
timeout, and a
session writes its rows in one ``BEGIN IMMEDIATE`` transaction, so several processes
(two pytest sessions, the command line) can share it; under pytest-xdist only the
controller writes. ``History.runs()``, ``results()`` and ``metric_history()`` read it
back; the ``retrieval-checks`` command line is built on them.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import platform
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

from ..errors import InputError

__all__ = ["History", "run_metadata", "default_history_path", "project_root", "DEFAULT_HISTORY"]

# 2: results.n_used, n_skipped, bounds; 3: runs.git_branch, runs.selection (an older database is migrated by its
# next writer)
_SCHEMA_VERSION = 3
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
    n_failed INTEGER NOT NULL DEFAULT 0,
    git_branch TEXT,
    selection TEXT
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
    detail TEXT,
    n_used INTEGER,
    n_skipped INTEGER,
    bounds TEXT
);
CREATE INDEX IF NOT EXISTS results_by_metric ON results (metric, model, dataset, run_id);
CREATE INDEX IF NOT EXISTS results_by_run ON results (run_id);
"""
_COLUMNS = (
    "test",
    "suite",
    "model",
    "dataset",
    "metric",
    "gate",
    "value",
    "low",
    "high",
    "threshold",
    "comparison",
    "on_",
    "passed",
    "n",
    "unit",
    "detail",
    "n_used",
    "n_skipped",
    "bounds",
)
_MIGRATIONS = {
    1: (
        "ALTER TABLE results ADD COLUMN n_used INTEGER",
        "ALTER TABLE results ADD COLUMN n_skipped INTEGER",
        "ALTER TABLE results ADD COLUMN bounds TEXT",
    ),
    2: (
        "ALTER TABLE runs ADD COLUMN git_branch TEXT",
        "ALTER TABLE runs ADD COLUMN selection TEXT",
    ),
}
_REQUIRED = {
    "meta": {"key", "value"},
    "runs": {
        "id",
        "started",
        "finished",
        "git_commit",
        "git_dirty",
        "machine",
        "python",
        "command",
        "rootdir",
        "exitstatus",
        "n_gates",
        "n_failed",
    },
    "results": {"id", "run_id", *_COLUMNS[:16]},
}
_FIGURES = (
    "CREATE TABLE IF NOT EXISTS figures (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id INTEGER NOT NULL "
    "REFERENCES runs(id) ON DELETE CASCADE, figure TEXT NOT NULL)"
)
_FIX = (
    "point --db / --rc-history at the database pytest writes, or move this file away (pytest then starts a "
    "new history)"
)


def _git(rootdir: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=rootdir, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def run_metadata(rootdir=".", command: str | None = None, selection: str | None = None) -> dict:
    """Where and on what a run happened: git commit, branch (None on a detached head)
    and dirty flag (None outside a repository), machine, Python, command line, start
    time (UTC, ISO 8601), and ``selection``: ``""`` for a full run, else what narrowed
    it (``-k EXPR``, ``--lf``, node ids; the pytest plugin fills it in)."""
    root = Path(rootdir)
    commit = _git(root, "rev-parse", "HEAD")
    status = _git(root, "status", "--porcelain", "--untracked-files=no") if commit else None
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD") if commit else None
    return {
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": commit,
        "git_branch": None if branch in (None, "HEAD") else branch,
        "git_dirty": None if status is None else int(bool(status)),
        "selection": selection,
        "machine": f"{socket.gethostname()} ({platform.system()} {platform.machine()}, {os.cpu_count()} cpus)",
        "python": platform.python_version(),
        "command": command if command is not None else " ".join(sys.argv),
        "rootdir": str(root.resolve()),
    }


#: Where the history lives, relative to the project root (see :func:`project_root`).
DEFAULT_HISTORY = ".retrieval-checks/history.sqlite"

# pytest's configuration files, and the section that makes each one pytest's (None: any such file)
_INI_FILES = (
    ("pytest.ini", None),
    (".pytest.ini", None),
    ("pyproject.toml", ("[tool.pytest.ini_options]", "[tool.pytest]")),
    ("tox.ini", ("[pytest]",)),
    ("setup.cfg", ("[tool:pytest]",)),
)


def _holds_section(path: Path, sections) -> bool:
    if sections is None:
        return True
    try:
        lines = {
            line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        }
    except OSError:
        return False
    return any(s in lines for s in sections)


def project_root(start=None) -> Path:
    """The project root, found as pytest finds its rootdir: from ``start`` (default: the
    working directory) upwards, the first directory with a pytest configuration file
    (``pytest.ini``, ``.pytest.ini``, or a ``pyproject.toml`` / ``tox.ini`` /
    ``setup.cfg`` with a pytest section); else the first with a ``pyproject.toml``,
    ``setup.py`` or ``setup.cfg`` of any content; else the first holding ``.git``; else
    ``start`` itself."""
    start = Path(start if start is not None else os.getcwd()).resolve()
    chain = [start, *start.parents]
    for directory in chain:
        if any(
            (directory / name).is_file() and _holds_section(directory / name, sections)
            for name, sections in _INI_FILES
        ):
            return directory
    for names in (("pyproject.toml", "setup.py", "setup.cfg"), (".git",)):
        for directory in chain:
            if any((directory / name).exists() for name in names):
                return directory
    return start


def default_history_path(start=None) -> Path:
    """The default run-history database: ``.retrieval-checks/history.sqlite`` in the
    :func:`project_root` of ``start``. The pytest plugin (from its rootdir) and the
    ``retrieval-checks`` command line (from the working directory) both use it, so a
    command run from any subdirectory of the project reads the history pytest wrote."""
    return project_root(start) / DEFAULT_HISTORY


class History:
    """The run-history database at ``path`` (created on first use, parents included).

    The pytest plugin writes one run per session (``--rc-history``); the
    ``retrieval-checks`` command line reads it (``runs``, ``show``, ``compare``, ``history``,
    ``report``).

    Parameters
    ----------
    path:
        The database file (str or Path).
    timeout:
        Seconds a writer waits for another to finish (default 60).

    Raises
    ------
    InputError
        From its methods: a path that is a directory, a file that is not a history
        database or is damaged, a database that cannot be created, reading where none
        exists yet.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> res = rc.evaluate(x, query_labels=[0, 0, 1, 1], metrics=["map"])
    >>> events = []
    >>> with rc.gates.listening(events.append):
    ...     rc.assert_metric(res, "map", at_least=0.7)
    >>> records = [dict(events[0].to_dict(), test="test_map")]
    >>> tmp = tempfile.TemporaryDirectory()
    >>> history = rc.History(pathlib.Path(tmp.name) / "history.sqlite")
    >>> run = history.record({"git_commit": "abc123", "command": "pytest"}, records, exitstatus=0)
    >>> [(r["id"], r["n_gates"], r["n_failed"]) for r in history.runs()]
    [(1, 1, 0)]
    >>> [(r["test"], r["metric"], r["value"], r["passed"]) for r in history.results(run)]
    [('test_map', 'map', 0.75, True)]
    >>> tmp.cleanup()
    """

    def __init__(self, path, *, timeout: float = 60.0):
        self.path = Path(path)
        self.timeout = timeout

    def _connect(self, create: bool = True) -> sqlite3.Connection:
        """A connection; ``create`` (writers) makes the file, the schema and WAL mode and
        migrates an older schema, readers only check the schema. A file that is not a
        history database (another SQLite database, a text file, a directory) is an
        :class:`~retrieval_checks.InputError` naming it."""
        try:
            if self.path.is_dir():
                raise InputError(
                    f"{self.path} is a directory, not a history database file; give the database "
                    f"file, such as {self.path / 'history.sqlite'}."
                )
            if not create and not self.path.exists():
                raise InputError(
                    f"{self.path}: no run history there yet (pytest writes it; --rc-history sets the "
                    "path)."
                )
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(
                f"{self.path}: the history database cannot be opened or created ({exc.strerror or exc}); "
                "give a path in a writable directory."
            ) from None
        if not create:
            return self._reader()
        con = None
        try:
            con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            con.row_factory = sqlite3.Row
            con.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
            con.execute("PRAGMA foreign_keys=ON")
            self._prepare(con)
            self._check(con)
        except (
            sqlite3.OperationalError
        ) as exc:  # where it lives (permissions, a lock), not what it holds
            if con is not None:
                con.close()
            place = self._unwritable()
            if place is None:
                raise InputError(
                    f"{self.path}: the history database cannot be written ({exc}); check that no other "
                    "process holds it locked, or give another path."
                ) from None
            raise InputError(
                f"{self.path}: cannot write the run history here: {place} ({exc}); give --rc-history "
                "(or --db) a path in a writable directory, or --rc-history none."
            ) from None
        except sqlite3.DatabaseError as exc:
            if con is not None:
                con.close()
            raise InputError(
                f"{self.path}: not a retrieval-checks history database ({exc}); {_FIX}."
            ) from None
        except InputError:
            if con is not None:
                con.close()
            raise
        return con

    def _unwritable(self) -> str | None:
        """Why this user cannot write the database where it is (None when it can)."""
        folder = self.path.parent
        if not os.access(folder, os.W_OK):
            return f"the directory {folder} is not writable by this user"
        if self.path.exists() and not os.access(self.path, os.W_OK):
            return "the file is read-only for this user"
        return None

    def _reader(self) -> sqlite3.Connection:
        """A read-only connection, which never creates, locks or changes a file of the
        history. SQLite reads a WAL database through a ``-shm`` file beside it, which it
        must be able to create; in a directory this user cannot write (a shared or
        mounted history) the database is read as immutable instead, which is exact when
        no ``-wal`` file holds runs not yet merged into it (else an error says so).
        "Not a history" is said only of a file that is not one: a file this user cannot
        read, or a history that cannot be read here, is an error saying that."""
        if not os.access(self.path, os.R_OK):
            raise InputError(
                f"{self.path}: permission denied: this user cannot read the history database; ask its "
                "owner for read access, or copy it to a readable place and give --db."
            )
        wal = self.path.with_name(self.path.name + "-wal")
        for immutable in (False, True):
            uri = self.path.resolve().as_uri() + "?mode=ro" + ("&immutable=1" if immutable else "")
            con = None
            try:
                con = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)
                con.row_factory = sqlite3.Row
                con.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
                self._check(con)
                return con
            except sqlite3.OperationalError as exc:
                if con is not None:
                    con.close()
                place = self._unwritable()
                pending = wal.exists() and wal.stat().st_size > 0
                if not immutable and place is not None and not pending:
                    continue  # nothing can write here: no writer, no pending WAL; immutable reading is exact
                if place is not None and pending:
                    raise InputError(
                        f"{self.path}: a history that cannot be read here: {place}, so SQLite cannot "
                        f"create its shared-memory file, and {wal.name} holds runs not yet merged into "
                        "the database; copy the database and its -wal file to a writable directory "
                        "and give --db, or run pytest there once to merge them."
                    ) from None
                raise InputError(
                    f"{self.path}: the history database cannot be opened for reading ({exc}"
                    f"{'; ' + place if place else ''}); check that no other process holds it locked "
                    "and that it is readable here."
                ) from None
            except sqlite3.DatabaseError as exc:
                if con is not None:
                    con.close()
                raise InputError(
                    f"{self.path}: not a retrieval-checks history database ({exc}); {_FIX}."
                ) from None
            except BaseException:
                if con is not None:
                    con.close()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _prepare(self, con: sqlite3.Connection) -> None:
        """Create the schema of a new database (WAL mode), or migrate an older one."""
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        foreign = tables - {*_REQUIRED, "sqlite_sequence"}
        if foreign and "meta" not in tables:  # never add our tables to somebody else's database
            raise InputError(
                f"{self.path}: not a retrieval-checks history database (it holds the tables "
                f"{', '.join(sorted(foreign))}); {_FIX}."
            )
        con.execute("PRAGMA journal_mode=WAL")
        if (
            "meta" not in tables
        ):  # one transaction: a concurrent reader or writer sees all of it or nothing
            try:
                con.executescript(
                    f"BEGIN IMMEDIATE;{_SCHEMA}INSERT OR IGNORE INTO meta VALUES ('schema_version', "
                    f"'{_SCHEMA_VERSION}');COMMIT;"
                )
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
            return
        version = self._version(con)
        if version < _SCHEMA_VERSION:
            con.execute("BEGIN IMMEDIATE")
            try:
                version = self._version(con)  # another writer may have migrated it meanwhile
                for v in range(version, _SCHEMA_VERSION):
                    for statement in _MIGRATIONS[v]:
                        table, column = statement.split()[2], statement.split()[-2]
                        if column not in {r[1] for r in con.execute(f"PRAGMA table_info({table})")}:
                            con.execute(statement)
                con.execute(
                    "UPDATE meta SET value = ? WHERE key = 'schema_version'",
                    (str(_SCHEMA_VERSION),),
                )
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise

    def _version(self, con: sqlite3.Connection) -> int:
        row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        try:
            version = int(row[0])
        except (TypeError, ValueError):
            raise InputError(
                f"{self.path}: not a retrieval-checks history database (its meta table has no schema "
                f"version: {None if row is None else row[0]!r}); {_FIX}."
            ) from None
        if version < 1 or version > _SCHEMA_VERSION:
            raise InputError(
                f"{self.path}: history schema version {version}, this version of retrieval-checks reads "
                f"1 to {_SCHEMA_VERSION}; upgrade retrieval-checks, or {_FIX}."
            )
        return version

    def _check(self, con: sqlite3.Connection) -> None:
        """The three tables with their columns, and a schema version this version reads."""
        for table, needed in _REQUIRED.items():
            have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
            if not have:
                tables = sorted(
                    r[0]
                    for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
                    if r[0] != "sqlite_sequence"
                )
                holds = (
                    f"it holds the tables {', '.join(tables)}" if tables else "it holds no table"
                )
                raise InputError(
                    f"{self.path}: not a retrieval-checks history database (no table {table!r}; "
                    f"{holds}); {_FIX}."
                )
            missing = needed - have
            if missing:
                raise InputError(
                    f"{self.path}: not a retrieval-checks history database (table {table!r} lacks the "
                    f"columns {', '.join(sorted(missing))}); {_FIX}."
                )
        self._version(con)

    def record(
        self,
        metadata: dict,
        outcomes: list[dict],
        *,
        exitstatus: int | None = None,
        figures: list[dict] | None = None,
    ) -> int:
        """Append one run and its gate outcomes in one transaction; returns the run id.
        ``figures``: the session's report figures (class-count sweeps, JSON-ready dicts),
        kept so that the report of a stored run shows what the live one did."""
        figures = [_json(f) for f in figures or []]
        rows = [_stored(o) for o in outcomes]
        finished = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        con = self._connect()
        try:
            con.execute(
                "BEGIN IMMEDIATE"
            )  # one writer at a time; others wait up to the busy timeout
            cur = con.execute(
                "INSERT INTO runs (started, finished, git_commit, git_dirty, machine, python, command, rootdir, "
                "exitstatus, n_gates, n_failed, git_branch, selection) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    metadata.get("started", finished),
                    finished,
                    metadata.get("git_commit"),
                    metadata.get("git_dirty"),
                    metadata.get("machine"),
                    metadata.get("python"),
                    metadata.get("command"),
                    metadata.get("rootdir"),
                    exitstatus,
                    len(rows),
                    sum(1 for r in rows if not r[_COLUMNS.index("passed")]),
                    _text(metadata.get("git_branch")),
                    _text(metadata.get("selection")),
                ),
            )
            run_id = int(cur.lastrowid)
            con.executemany(
                f"INSERT INTO results (run_id, {', '.join(_COLUMNS)}) VALUES "
                f"(?, {', '.join('?' * len(_COLUMNS))})",
                [(run_id, *r) for r in rows],
            )
            if figures:  # a table of its own, made by its first writer (older databases have none)
                con.execute(_FIGURES)
                con.executemany(
                    "INSERT INTO figures (run_id, figure) VALUES (?, ?)",
                    [(run_id, f) for f in figures],
                )
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        finally:
            con.close()
        return run_id

    @contextlib.contextmanager
    def _reading(self):
        """A reader's connection; a damaged database met while reading is an InputError."""
        con = self._connect(create=False)
        try:
            yield con
        except sqlite3.DatabaseError as exc:
            raise InputError(
                f"{self.path}: the history database cannot be read ({exc}); {_FIX}."
            ) from None
        finally:
            con.close()

    def runs(
        self,
        limit: int | None = None,
        *,
        commit: str | None = None,
        branch: str | None = None,
        full_only: bool = False,
    ) -> list[dict]:
        """Runs, newest first (the newest ``limit``, a positive integer, when given):
        of commits starting with ``commit`` (a hex prefix), of the branch ``branch``,
        and with ``full_only`` only runs recorded as full (no ``-k``, ``--lf``, node
        ids...; a run recorded before the selection was stored is not known to be full
        and is left out)."""
        limit = _limit(limit)
        where, args = [], []
        if commit is not None:
            where.append("git_commit LIKE ?")
            args.append(_commit_prefix(commit) + "%")
        if branch is not None:
            where.append("git_branch = ?")
            args.append(str(branch))
        with self._reading() as con:
            have = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
            if (branch is not None or full_only) and "selection" not in have:
                return []  # a database of schema 2 recorded no branch and no selection: no run is known to match
            if full_only:
                where.append("selection = ''")
            sql = (
                "SELECT * FROM runs"
                + (f" WHERE {' AND '.join(where)}" if where else "")
                + " ORDER BY id DESC"
                + (f" LIMIT {limit}" if limit else "")
            )
            return [_run(r, self.path) for r in con.execute(sql, args)]

    def resolve(self, ref, *, allow_dirty: bool = False, notes: list | None = None) -> int:
        """A run id from ``ref``: an id, ``latest`` / ``-1`` (newest), ``-2`` (the one
        before), ..., or a git commit (4 to 40 hex digits: the newest *clean* run of the
        one commit they start). Digits that name both a run id and a commit are refused
        as ambiguous (write ``run:N`` or ``commit:HEX``).

        A dirty run (its working tree held uncommitted changes) never stands for a
        commit unless ``allow_dirty``: newer dirty runs are skipped (said in ``notes``,
        a list the caller prints), and a commit with only dirty runs is an error. A run
        named by id or position is that run."""
        notes = [] if notes is None else notes
        runs = self.runs()
        if not runs:
            raise InputError(f"{self.path}: the history has no runs yet.")
        text = str(ref).strip().lower()
        if text in ("latest", "last"):
            return runs[0]["id"]
        kind, sep, rest = text.partition(":")
        if sep and kind in ("run", "commit"):
            return (
                self._by_commit(rest, runs, ref, allow_dirty, notes)
                if kind == "commit"
                else self._by_id(rest, runs, ref)
            )
        try:
            n = int(text)
        except ValueError:
            n = None
        if n is not None and n < 0:
            if -n > len(runs):
                raise InputError(f"run {ref}: the history has only {len(runs)} run(s).")
            return runs[-n - 1]["id"]
        is_commit = (
            len(text) >= 4
            and all(c in "0123456789abcdef" for c in text)
            and any((r["git_commit"] or "").startswith(text) for r in runs)
        )
        if n is not None and is_commit and any(r["id"] == n for r in runs):
            raise InputError(
                f"{ref!r} is both a run id and the start of a commit; write run:{text} or "
                f"commit:{text}."
            )
        looks_hex = len(text) >= 4 and all(c in "0123456789abcdef" for c in text)
        if is_commit or (
            n is None and looks_hex
        ):  # a commit, or hex digits naming none: say which commits exist
            return self._by_commit(text, runs, ref, allow_dirty, notes)
        if n is None:
            raise InputError(
                f"run {ref!r}: give a run id, 'latest', -1, -2, ... (newest first), or a commit recorded "
                "in the history (4 to 40 hex digits)."
            )
        return self._by_id(text, runs, ref)

    def _by_id(self, text: str, runs: list[dict], ref) -> int:
        try:
            n = int(text)
        except ValueError:
            raise InputError(f"run {ref!r}: after run: give a run id (an integer).") from None
        if not any(r["id"] == n for r in runs):
            raise InputError(
                f"run {n} is not in {self.path}; runs: {', '.join(str(r['id']) for r in runs[:10])}..."
            )
        return n

    def _by_commit(self, text: str, runs: list[dict], ref, allow_dirty: bool, notes: list) -> int:
        prefix = _commit_prefix(text)
        matching = [r for r in runs if (r["git_commit"] or "").startswith(prefix)]
        commits = sorted({r["git_commit"] for r in matching})
        if not commits:
            known = sorted({(r["git_commit"] or "")[:10] for r in runs if r["git_commit"]})
            raise InputError(
                f"{ref!r}: no run of a commit starting {prefix} in {self.path}; recorded commits: "
                f"{', '.join(known[:10]) or 'none'}."
            )
        if len(commits) > 1:
            raise InputError(
                f"{ref!r} is ambiguous: it starts {len(commits)} recorded commits "
                f"({', '.join(c[:12] for c in commits)}); give more digits."
            )
        commit = commits[0][:10]
        latest = matching[0]  # runs are newest first: that commit's latest run
        if allow_dirty:
            if latest["git_dirty"]:
                notes.append(
                    f"{ref}: run {latest['id']} is a dirty run of commit {commit} (its working tree held "
                    "uncommitted changes), used because --allow-dirty was given"
                )
            return latest["id"]
        clean = [r for r in matching if not r["git_dirty"]]
        if not clean:
            ids = ", ".join(f"run {r['id']}" for r in matching[:10])
            raise InputError(
                f"{ref!r}: commit {commit} has only dirty runs ({ids}): their working tree held "
                "uncommitted changes, so none stands for the commit; run pytest on a clean checkout of "
                f"it, name the run by id, or pass --allow-dirty (allow_dirty=True) to use its latest "
                f"(run {latest['id']})."
            )
        skipped = [r["id"] for r in matching if r["id"] > clean[0]["id"]]
        if skipped:
            notes.append(
                f"{ref}: commit {commit} is run {clean[0]['id']}, its latest clean run; skipped "
                f"{len(skipped)} newer dirty run(s) ({', '.join(f'run {i}' for i in skipped[:10])}) made "
                "with uncommitted changes (pass --allow-dirty to use the latest of them)"
            )
        return clean[0]["id"]

    def results(self, run_id: int) -> list[dict]:
        """The gate records of one run, in the order they were recorded."""
        if isinstance(run_id, bool) or not isinstance(run_id, int):
            raise InputError(
                f"run_id={run_id!r}: expected a run id (an int); History.resolve() reads 'latest', "
                "-1, -2, ..."
            )
        with self._reading() as con:
            rows = con.execute("SELECT * FROM results WHERE run_id = ? ORDER BY id", (run_id,))
            return [_row(r, self.path) for r in rows]

    def figures(self, run_id: int) -> list[dict]:
        """The report figures recorded with a run (none before figures were kept)."""
        with self._reading() as con:
            if (
                con.execute(
                    "SELECT 1 FROM sqlite_master WHERE type='table' AND name='figures'"
                ).fetchone()
                is None
            ):
                return []
            out = []
            for row_id, text in con.execute(
                "SELECT id, figure FROM figures WHERE run_id = ? ORDER BY id", (run_id,)
            ):
                try:
                    figure = json.loads(text)
                except (TypeError, ValueError, RecursionError):
                    figure = None
                where = f"figures row {row_id} (run {run_id})"
                if not isinstance(figure, dict):
                    raise _bad(self.path, where, "figure", text, "a JSON object")
                problem = _figure_problem(figure)
                if problem is not None:
                    raise _bad(self.path, where, "figure", text, f"a report figure ({problem})")
                out.append(figure)
            return out

    def metrics(self) -> list[str]:
        """Every metric name recorded in the history, sorted."""
        with self._reading() as con:
            return sorted(str(r[0]) for r in con.execute("SELECT DISTINCT metric FROM results"))

    def metric_history(
        self, metric: str, *, model=None, dataset=None, test=None, limit: int = 50
    ) -> list[dict]:
        """Past values of one metric (optionally of one model / dataset / test), oldest first,
        with each run's time and commit."""
        limit = _limit(limit) or -1
        with self._reading() as con:
            where, args = ["r.metric = ?"], [metric]
            for col, val in (("model", model), ("dataset", dataset), ("test", test)):
                if val is not None:
                    where.append(f"r.{col} = ?")
                    args.append(val)
            sql = (
                f"SELECT r.*, u.started, u.git_commit, u.git_dirty FROM results r JOIN runs u ON u.id = r.run_id "
                f"WHERE {' AND '.join(where)} ORDER BY r.run_id DESC, r.id DESC LIMIT ?"
            )
            return [_row(r, self.path) for r in con.execute(sql, (*args, limit))][::-1]

    def tests(self, metric: str | None = None) -> list[str]:
        """Every test (node id) recorded in the history (of ``metric`` when given), sorted."""
        with self._reading() as con:
            sql, args = "SELECT DISTINCT test FROM results", ()
            if metric is not None:
                sql, args = sql + " WHERE metric = ?", (metric,)
            return sorted(str(r[0]) for r in con.execute(sql, args))

    def metric_runs(
        self, metric: str, *, model=None, dataset=None, tests=None, limit: int | None = 50
    ) -> list[dict]:
        """The values of one metric in the newest ``limit`` runs that recorded it (for
        these filters; ``tests``: a list of test node ids), newest run first, each run's
        gates in the order recorded; ``limit`` counts runs, not rows."""
        limit = _limit(limit)
        where, args = ["r.metric = ?"], [metric]
        for col, val in (("model", model), ("dataset", dataset)):
            if val is not None:
                where.append(f"r.{col} = ?")
                args.append(val)
        if tests is not None:
            where.append(f"r.test IN ({', '.join('?' * len(tests))})" if tests else "0")
            args.extend(tests)
        cond = " AND ".join(where)
        with self._reading() as con:
            sql = (
                f"SELECT r.*, u.started, u.git_commit, u.git_dirty FROM results r JOIN runs u ON u.id = r.run_id "
                f"WHERE {cond} AND r.run_id IN (SELECT DISTINCT r.run_id FROM results r WHERE {cond} "
                f"ORDER BY r.run_id DESC LIMIT ?) ORDER BY r.run_id DESC, r.id"
            )
            return [_row(r, self.path) for r in con.execute(sql, (*args, *args, limit or -1))]


_MAX_FIGURE_ROWS = 100_000
_MAX_DRAWN = 1e300  # beyond this an axis's span overflows


def _figure_problem(figure: dict) -> str | None:
    """What is wrong with a report figure read back from the history (None: nothing).
    A figure has a ``kind`` (a text); a ``sweep`` has text or null ``title``,
    ``model``, ``dataset``, ``test`` and up to 100000 ``rows``, each an object whose
    ``n_classes`` is a number and whose ``metric`` is a text and ``value``, ``low``,
    ``high`` numbers or null (numbers finite and at most 1e300 in size). Figures of
    other kinds are kept as they are (the report draws sweeps only)."""
    kind = figure.get("kind")
    if not isinstance(kind, str):
        return f"its kind is {kind!r}, not a text such as 'sweep'"
    if kind != "sweep":
        return None
    for key in ("title", "model", "dataset", "test"):
        if figure.get(key) is not None and not isinstance(figure[key], str):
            return f"its {key} is not a text"
    rows = figure.get("rows", [])
    if not isinstance(rows, list):
        return "its rows are not a list"
    if len(rows) > _MAX_FIGURE_ROWS:
        return f"{len(rows)} rows, more than the {_MAX_FIGURE_ROWS} a sweep records"

    def number(x, optional: bool) -> bool:
        if x is None:
            return optional
        return (
            isinstance(x, (int, float))
            and not isinstance(x, bool)
            and math.isfinite(x)
            and abs(x) <= _MAX_DRAWN
        )

    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            return f"row {i} is not an object"
        if not number(row.get("n_classes"), optional=False):
            return f"row {i}: n_classes is {str(row.get('n_classes'))[:40]!r}, not a number"
        for key in ("value", "low", "high"):
            if not number(row.get(key), optional=True):
                return f"row {i}: {key} is {str(row.get(key))[:40]!r}, not a finite number of at most 1e300 or null"
        if row.get("metric") is not None and not isinstance(row["metric"], str):
            return f"row {i}: metric is not a text"
    return None


def _commit_prefix(text) -> str:
    """A git commit or its start: 4 to 40 hex digits, lower-cased."""
    prefix = str(text).strip().lower()
    if not 4 <= len(prefix) <= 40 or any(c not in "0123456789abcdef" for c in prefix):
        raise InputError(
            f"commit {text!r}: expected 4 to 40 hexadecimal digits (a git commit or its start)."
        )
    return prefix


def _limit(limit):
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InputError(
            f"limit={limit!r}: expected a positive number of rows (an int >= 1), or None for all."
        )
    return limit


def _num(v):
    """A finite float, or None (SQLite would keep an infinity, and readers refuse one)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _int(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def _text(v):
    return None if v is None else str(v)


def _json(v) -> str:
    def clean(x):
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {str(k): clean(y) for k, y in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(y) for y in x]
        if hasattr(x, "item") and getattr(x, "ndim", 1) == 0:
            return clean(x.item())
        return x

    return json.dumps(clean(v), default=str, allow_nan=False)


_REAL = ("value", "low", "high", "threshold")
_INTEGER = ("n", "n_used", "n_skipped")
_TEXT = ("test", "metric")
#: The record field of a column where their names differ (``on`` is an SQL keyword).
_FIELD = {"on_": "on"}
#: The fields a results row holds in columns of their own; every other field of a gate's
#: record (GateEvent.to_dict plus the plugin's context) is kept in ``detail``.
_IN_COLUMNS = frozenset(_FIELD.get(c, c) for c in _COLUMNS if c != "detail")
#: A record's fields with a scalar column of their own, in the table's order (an export's columns).
RECORD_COLUMNS = tuple(_FIELD.get(c, c) for c in _COLUMNS if c not in ("detail", "bounds"))


def _stored(o: dict) -> tuple:
    """A gate's record (GateEvent.to_dict, with the plugin's context) as a results row,
    column by column of :data:`_COLUMNS`: numbers finite or NULL, the fields without a
    column of their own in ``detail`` (JSON), read back whole by :func:`_row`."""
    detail = {k: v for k, v in o.items() if k not in _IN_COLUMNS}
    out = []
    for col in _COLUMNS:
        v = o.get(_FIELD.get(col, col))
        if col == "detail":
            out.append(_json(detail) if detail else None)
        elif col == "bounds":
            out.append(_json(v) if v else None)
        elif col == "test":
            out.append(str(o.get("test", "")))
        elif col == "metric":
            out.append(str(o["metric"]))
        elif col == "passed":
            out.append(int(bool(v)))
        elif col in _REAL:
            out.append(_num(v))
        elif col in _INTEGER:
            out.append(_int(v))
        else:
            out.append(_text(v))
    return tuple(out)


_RUN_INTEGER = ("id", "n_gates", "n_failed")
_RUN_OPTIONAL_INTEGER = ("git_dirty", "exitstatus")


def _bad(path, where: str, column: str, value, expected: str) -> InputError:
    return InputError(
        f"{path}: {where}: column {column} holds {str(value)[:80]!r}, not {expected}; the history was "
        f"edited or damaged: delete that row, or move the file away (pytest then starts a new history)."
    )


def _row(r: sqlite3.Row, path) -> dict:
    """A results row as a gate record, every field checked: a row with text in a numeric
    column, a NULL where a value is required or a damaged detail is an InputError
    naming the file and the row (never a silently wrong number)."""
    d = dict(r)
    where = f"results row {d.get('id')} (run {d.get('run_id')})"
    for col in _REAL:
        v = d.get(col)
        if v is not None and (isinstance(v, (str, bytes)) or not math.isfinite(float(v))):
            raise _bad(path, where, col, v, "a finite number or NULL")
    for col in _INTEGER:
        v = d.get(col)
        if v is not None and not isinstance(v, int):
            raise _bad(path, where, col, v, "an integer or NULL")
    for col in _TEXT:
        if not isinstance(d.get(col), str):
            raise _bad(path, where, col, d.get(col), "a text")
    if d.get("passed") not in (0, 1):
        raise _bad(path, where, "passed", d.get("passed"), "0 or 1")
    for col, name in _FIELD.items():
        d[name] = d.pop(col, None)
    d["passed"] = bool(d["passed"])
    texts = {
        col: d.pop(col, None) for col in ("bounds", "detail")
    }  # read both before merging the detail
    for col, text in texts.items():
        if text is None:
            continue
        try:
            value = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            value = None
        if not isinstance(value, dict):
            raise _bad(path, where, col, text, "a JSON object")
        if col == "bounds":
            if any(not isinstance(b, (int, float)) or isinstance(b, bool) for b in value.values()):
                raise _bad(path, where, col, text, "a JSON object of numbers")
            d["bounds"] = value
        else:
            for k, v in value.items():
                if (
                    k in (*_REAL, "confidence")
                    and v is not None
                    and (
                        not isinstance(v, (int, float))
                        or isinstance(v, bool)
                        or not math.isfinite(v)
                    )
                ):
                    raise _bad(
                        path,
                        where,
                        col,
                        text,
                        f"a JSON object whose {k!r} is a finite number or null",
                    )
                if k not in d or d[k] is None:  # the columns win over the detail
                    d[k] = v
    for col in ("n_used", "n_skipped"):
        d.setdefault(col, None)
    return d


def _run(r: sqlite3.Row, path) -> dict:
    d = dict(r)
    where = f"runs row {d.get('id')}"
    for col in _RUN_INTEGER:
        if not isinstance(d.get(col), int):
            raise _bad(path, where, col, d.get(col), "an integer")
    for col in _RUN_OPTIONAL_INTEGER:
        if d.get(col) is not None and not isinstance(d[col], int):
            raise _bad(path, where, col, d[col], "an integer or NULL")
    if not isinstance(d.get("started"), str):
        raise _bad(path, where, "started", d.get("started"), "a time (text)")
    for col in (
        "git_branch",
        "selection",
    ):  # absent from a database of schema 2 (read, not migrated)
        d.setdefault(col, None)
    for col in (
        "git_commit",
        "machine",
        "python",
        "command",
        "rootdir",
        "finished",
        "git_branch",
        "selection",
    ):
        if d.get(col) is not None and not isinstance(d[col], str):
            raise _bad(path, where, col, d[col], "a text or NULL")
    return d
