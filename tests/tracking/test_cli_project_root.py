"""The command line from a new user's session: the history database found from the
project root (as pytest finds its rootdir), the same one the plugin writes, from any
subdirectory; and the selection of partial runs (-k, node ids) recorded by the plugin."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import pytest

from retrieval_checks.tracking import History, default_history_path
from retrieval_checks.tracking import main as cli
from retrieval_checks.tracking._history import project_root

pytest_plugins = ["pytester"]

TESTS = """
import numpy as np
from pytest_retrieval_checks import assert_map_at_least

rng = np.random.default_rng(0)
y = np.repeat(np.arange(10), 4)
X = (rng.normal(size=(10, 8))[y] + 0.3 * rng.normal(size=(40, 8))).astype(np.float32)

def test_map(rc_evaluate):
    assert_map_at_least(rc_evaluate(X, query_labels=y, metrics=["map"], model="m", dataset="d"), 0.2)

def test_other(rc_evaluate):
    assert_map_at_least(rc_evaluate(X, query_labels=y, metrics=["map"], model="m2", dataset="d"), 0.2)
"""


def _cli(*args):
    out = io.StringIO()
    return cli(list(map(str, args)), out=out), out.getvalue()


def _pytest(pytester, cwd: Path, *args: str, cache: bool = False) -> SimpleNamespace:
    """pytest started in ``cwd`` (in-process: what matters is the directory and the
    arguments it was given; pytester's own snapshot keeps the runs' modules apart)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        result = pytester.runpytest_inprocess(*(() if cache else ("-p", "no:cacheprovider")), *args)
    return SimpleNamespace(returncode=int(result.ret), stdout=result.stdout.str())


@pytest.mark.parametrize("config", ["pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg", ".git"])
def test_the_project_root_is_found_from_a_subdirectory(tmp_path, config):
    project = tmp_path / "project"
    deep = project / "src" / "pkg" / "sub"
    deep.mkdir(parents=True)
    text = {
        "pytest.ini": "[pytest]\n",
        "pyproject.toml": "[tool.pytest.ini_options]\n",
        "tox.ini": "[pytest]\n",
        "setup.cfg": "[tool:pytest]\n",
    }
    if config == ".git":
        (project / ".git").mkdir()
    else:
        (project / config).write_text(text[config])
    assert project_root(deep) == project.resolve()
    assert default_history_path(deep) == project.resolve() / ".retrieval-checks" / "history.sqlite"


def test_a_pytest_configuration_wins_over_an_outer_repository_and_other_files(tmp_path):
    (tmp_path / ".git").mkdir()
    inner = tmp_path / "packages" / "one"
    (inner / "tests").mkdir(parents=True)
    (inner / "tox.ini").write_text("[flake8]\n")  # not pytest's: passed over
    assert (
        project_root(inner / "tests") == tmp_path.resolve()
    )  # the repository, as no pytest file was found
    (inner / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-q'\n")
    assert project_root(inner / "tests") == inner.resolve()


def test_the_command_line_reads_the_plugins_history_from_any_subdirectory(pytester, monkeypatch):
    root = pytester.path
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\ntestpaths = ['tests']\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_gates.py").write_text(TESTS)
    (root / "docs" / "deep").mkdir(parents=True)

    first = _pytest(pytester, root)
    assert first.returncode == 0, first.stdout[-3000:]
    db = root / ".retrieval-checks" / "history.sqlite"
    assert db.is_file() and "run 1 recorded in" in first.stdout
    # pytest started in a subdirectory, with -k and a node id: the same database, runs marked partial
    second = _pytest(pytester, root / "tests", "-k", "map")
    third = _pytest(pytester, root / "tests", "test_gates.py::test_other")
    assert second.returncode == 0 and third.returncode == 0, (
        second.stdout[-3000:] + third.stdout[-3000:]
    )

    monkeypatch.chdir(root / "docs" / "deep")
    code, out = _cli("runs")
    lines = out.splitlines()
    assert code == 0 and [line.split()[0] for line in lines[1:4]] == ["3", "2", "1"]
    assert "partial: node ids test_gates.py::test_other" in lines[1]
    assert lines[1].endswith(
        "pytest -p no:cacheprovider test_gates.py::test_other"
    )  # the command as written
    assert "partial: -k map; 1 deselected" in lines[2]
    assert "full" in lines[3] and "partial" not in lines[3]
    code, out = _cli("runs", "--full-only")
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:]] == ["1"]
    # the model and dataset given to rc_evaluate reach the history; a short test name finds the test
    code, out = _cli("history", "map", "--test", "test_other")
    assert code == 0 and " m2 " in out and "test_map" not in out
    assert {r["model"] for r in History(db).results(1)} == {"m", "m2"}


def test_outside_any_project_the_error_says_where_it_looked(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _cli("runs")[0] == 2
    err = capsys.readouterr().err
    assert "no run history at" in err and str(tmp_path.resolve()) in err and "--db" in err
    # --db still wins
    History(tmp_path / "elsewhere.sqlite").record(
        {"started": "t"}, [{"test": "t", "metric": "map", "value": 0.5, "passed": True}]
    )
    code, out = _cli("runs", "--db", tmp_path / "elsewhere.sqlite")
    assert code == 0 and out.splitlines()[1].split()[0] == "1"


def test_without_a_pytest_configuration_both_use_the_repository_root(pytester, monkeypatch):
    """pytest's rootdir is then the directory it was started in; the plugin still writes
    where the command line looks: the repository's root (its .git)."""
    project = pytester.path / "repo"
    (project / ".git").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "tests" / "test_gates.py").write_text(TESTS)
    (project / "notes").mkdir()
    result = _pytest(pytester, project / "tests")
    assert result.returncode == 0, result.stdout[-3000:]
    assert (
        f"rootdir: {project / 'tests'}" in result.stdout
    )  # pytest's rootdir is not the project root here
    assert (project / ".retrieval-checks" / "history.sqlite").is_file()
    assert not (project / "tests" / ".retrieval-checks").exists()
    monkeypatch.chdir(project / "notes")
    code, out = _cli("show", "latest")
    assert code == 0 and "run 1: 2 gates" in out


def test_last_failed_reruns_are_partial_only_when_they_narrow_the_run(pytester):
    project = pytester.path / "p"
    (project / "tests").mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\n")
    broken = (
        "\ndef test_broken(rc_evaluate):\n    assert_map_at_least(rc_evaluate(X, query_labels=y, metrics=['map'], "
        "model='m', dataset='d'), 0.9999)\n"
    )
    (project / "tests" / "test_gates.py").write_text(TESTS + broken)

    def run(*args):  # with pytest's cache, which --lf reads
        return _pytest(pytester, project, *args, cache=True)

    assert run().returncode == 1
    assert run("--lf").returncode == 1  # only test_broken reruns
    (project / "tests" / "test_gates.py").write_text(TESTS)
    assert run().returncode == 0
    assert run("--lf").returncode == 0  # nothing failed last time: --lf runs everything
    runs = History(project / ".retrieval-checks" / "history.sqlite").runs()
    assert [r["selection"] for r in runs] == ["", "", "--lf", ""]  # newest first
