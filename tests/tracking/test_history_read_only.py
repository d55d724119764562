"""A valid history read where this user cannot write (issue 25, item 4): reading never
creates, locks or changes a file, and the errors tell "not a history" apart from
"cannot write here", "cannot read this file" and "cannot be read here"."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sqlite3
import subprocess

import pytest

from retrieval_checks.errors import InputError
from retrieval_checks.tracking import History
from retrieval_checks.tracking import main as cli


def _cli(*args):
    out = io.StringIO()
    return cli(list(map(str, args)), out=out), out.getvalue()


@contextlib.contextmanager
def read_only(folder):
    """``folder`` (and what is in it) not writable by this process: chmod for a user,
    the immutable attribute for root (which chmod does not stop)."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [folder, *folder.iterdir()]}
        for p in modes:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    chattr = shutil.which("chattr")
    if (
        chattr is None
        or subprocess.run([chattr, "+i", str(folder)], capture_output=True).returncode != 0
    ):
        pytest.skip("running as root, and chattr +i cannot make a read-only directory here")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(folder)], capture_output=True, check=True)


def _gate(value, test="t.py::test_a"):
    return {"test": test, "metric": "map", "value": value, "passed": True}


@pytest.fixture
def history(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    h = History(folder / "history.sqlite")
    h.record(
        {"started": "t1", "git_commit": "ab" * 20, "git_dirty": 0}, [_gate(0.80)], exitstatus=0
    )
    h.record(
        {"started": "t2", "git_commit": "cd" * 20, "git_dirty": 0}, [_gate(0.81)], exitstatus=0
    )
    return h


def test_every_read_command_works_in_a_read_only_directory(history, capsys):
    folder = history.path.parent
    before = sorted(os.listdir(folder))
    with read_only(folder):
        for command in (
            ["runs"],
            ["show", "latest", "--check"],
            ["compare", "-2", "-1"],
            ["history", "map"],
            ["export", "--format", "json"],
            ["report", "latest", "--format", "markdown"],
        ):
            code, out = _cli("--db", history.path, *command)
            assert code == 0, (command, out, capsys.readouterr().err)
        assert (
            History(history.path).resolve("latest") == 2 and len(History(history.path).runs()) == 2
        )
        assert sorted(os.listdir(folder)) == before  # no -shm, -wal or lock file left (or made)
    assert "not a retrieval-checks history" not in capsys.readouterr().err


def test_writing_there_says_it_cannot_write_not_that_it_is_no_history(history):
    with read_only(history.path.parent), pytest.raises(InputError) as info:
        history.record({"started": "t3"}, [_gate(0.5)])
    message = str(info.value)
    assert "cannot write the run history here" in message and "not writable" in message
    assert "not a retrieval-checks history" not in message


def test_runs_not_yet_merged_are_never_read_past(history, tmp_path, capsys):
    """A -wal file holding a run, beside a database in a read-only directory without its
    -shm: reading it as immutable would silently miss that run; it is an error instead."""
    writer = sqlite3.connect(
        history.path, isolation_level=None
    )  # autocommit: the run is in the -wal
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("INSERT INTO runs (started, n_gates, n_failed) VALUES ('t3', 0, 0)")
    copy = tmp_path / "copy"
    copy.mkdir()
    for suffix in ("", "-wal"):
        shutil.copy(f"{history.path}{suffix}", copy / f"history.sqlite{suffix}")
    writer.close()
    assert (copy / "history.sqlite-wal").stat().st_size > 0
    with read_only(copy):
        code, _ = _cli("--db", copy / "history.sqlite", "runs")
    err = capsys.readouterr().err
    assert code == 2 and "not yet merged" in err and "not a retrieval-checks history" not in err


def test_a_file_this_user_cannot_read_is_said_so(history, monkeypatch, capsys):
    real = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode, *a, **k: False
        if str(p) == str(history.path) and mode == os.R_OK
        else real(p, mode, *a, **k),
    )
    assert _cli("--db", history.path, "runs")[0] == 2
    err = capsys.readouterr().err
    assert "permission denied" in err and "not a retrieval-checks history" not in err


def test_a_file_that_is_no_history_is_still_said_to_be_none(tmp_path, capsys):
    path = tmp_path / "notes.sqlite"
    path.write_text("not a database at all" * 100)
    assert _cli("--db", path, "runs")[0] == 2
    assert "not a retrieval-checks history" in capsys.readouterr().err
