"""GitHub Actions surfaces of the plugin (pytester, in-process): the step summary's
markdown table and the ``::error`` annotations, line by line; the escaping against
GitHub's rules (``@actions/core``'s escapeData / escapeProperty, re-implemented here
from the documentation and then inverted). Under xdist, the annotations equal a single
process's: test_terminal_summary.py checks them in its one xdist session."""

from __future__ import annotations

import re
import urllib.parse

import numpy as np
import pytest

pytest_plugins = ["pytester"]

SUITE = """\
suite: quality
datasets:
  set: {queries: ../data/set.npz}
checks:
  - metric: map
    at_least: 0.05
  - metric: hit_rate@1
    at_least: 0.999
"""

PY_TEST = """\
import numpy as np
import retrieval_checks as rc


def test_recall(rc_evaluate):
    with np.load("data/set.npz") as f:
        x, y = f["embeddings"], f["labels"]
    result = rc_evaluate(x, query_labels=y, metrics=["hit_rate@1"], model="m1", dataset="set")
    rc.assert_recall_at_least(result, 0.999, k=1)
"""


@pytest.fixture
def project(pytester, monkeypatch):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 6)
    x = np.random.default_rng(5).normal(size=(10, 8))[y] + 1.5 * rng.normal(size=(60, 8))
    (pytester.path / "data").mkdir()
    np.savez(pytester.path / "data" / "set.npz", embeddings=x.astype(np.float32), labels=y)
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "rc_quality.yaml").write_text(SUITE)
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_model.py").write_text(PY_TEST)
    pytester.makeini("[pytest]\n")
    summary = pytester.path / "step-summary.md"
    summary.write_text("# earlier step\n")
    # not a git repository: the workspace is the repository root, as on a runner's checkout
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(pytester.path))
    monkeypatch.setenv("GITHUB_REF_NAME", "feature/x")
    monkeypatch.delenv("GITHUB_HEAD_REF", raising=False)
    return summary


def _line_of(text: str, needle: str) -> int:
    """1-based line of the first line holding ``needle``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _unescape(text: str) -> str:
    return urllib.parse.unquote(text)  # %25, %0D, %0A, %3A, %2C are percent-encodings


def _parse(command: str) -> tuple[dict, str]:
    """``::error k=v,k=v::message`` -> ({k: v}, message), unescaped as GitHub reads it."""
    m = re.fullmatch(r"::error (?P<props>[^:]*)::(?P<msg>.*)", command)
    assert m, command
    props = dict(p.split("=", 1) for p in m.group("props").split(","))
    return {k: _unescape(v) for k, v in props.items()}, _unescape(m.group("msg"))


def _run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--rc-history=h.sqlite", *args)


def test_annotations_point_at_the_suite_line_and_the_assertion(pytester, project):
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=2)
    commands = [line for line in result.outlines if line.startswith("::")]
    assert len(commands) == 2, result.outlines  # one per failed gate, none for the passing one
    parsed = sorted((_parse(c) for c in commands), key=lambda pm: pm[0]["file"])
    (suite_props, suite_msg), (py_props, py_msg) = parsed
    assert suite_props["file"] == "suites/rc_quality.yaml"
    assert int(suite_props["line"]) == _line_of(SUITE, "- metric: hit_rate@1")
    assert suite_props["title"].startswith("retrieval-checks: hit_rate@1 gate failed (")
    assert suite_msg.startswith("hit_rate@1 = 0.") and "rule: value >= 0.999" in suite_msg
    assert py_props["file"] == "tests/test_model.py"
    assert int(py_props["line"]) == _line_of(PY_TEST, "rc.assert_recall_at_least")
    assert (
        "model m1 on dataset set" in py_msg and "hit_rate@1 value 0." in py_msg
    )  # the error, not the source
    assert "def test_recall" not in py_msg
    for (
        command
    ) in commands:  # escaped: a raw line break, or ':' / ',' inside a property, would cut it
        assert "\n" not in command and "\r" not in command


def test_step_summary_is_appended_with_changes_against_the_previous_run(pytester, project):
    _run(pytester)
    first = project.read_text()
    assert first.startswith("# earlier step\n")  # appended, never overwritten
    lines = first.splitlines()
    assert lines[1] == "### retrieval-checks gates: FAILED"
    assert (
        lines[3].startswith("3 gates: 1 passed, 2 failed (run 1 · ")
        and "branch feature/x" in lines[3]
    )
    table = lines[5:10]
    assert table[0] == "| result | check | metric | value [interval] | rule | change |"
    assert [row.split(" | ")[0] for row in table[2:]] == [
        "| FAIL",
        "| FAIL",
        "| PASS",
    ]  # failures first
    assert all(row.endswith(" |  |") for row in table[2:])  # no previous run: no change
    _run(pytester)
    second = project.read_text()[len(first) :].splitlines()
    assert second[2].startswith("3 gates: 1 passed, 2 failed (run 2 · ")
    assert all(row.endswith(" | +0.0000 vs run 1 |") for row in second[6:9]), second


def test_without_a_history_the_summary_names_the_checked_out_commit(pytester, project, monkeypatch):
    monkeypatch.setenv("GITHUB_SHA", "0123456789abcdef0123")
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--rc-history=none")
    lines = project.read_text().splitlines()
    assert lines[3] == "3 gates: 1 passed, 2 failed (commit 0123456789ab · branch feature/x)"


def test_nothing_happens_outside_actions(pytester, project, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "false")
    result = _run(pytester)
    assert not [line for line in result.outlines if line.startswith("::")]
    assert project.read_text() == "# earlier step\n"


def test_a_missing_summary_file_variable_is_a_warning(pytester, project, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    result = _run(pytester)
    text = " ".join(result.stdout.str().split())  # the notes are wrapped to the terminal's width
    assert "warning: GITHUB_ACTIONS=true but GITHUB_STEP_SUMMARY is not set" in text
    assert result.ret == 1  # the failed gates decide the outcome, not the summary


@pytest.mark.parametrize("text", ["a:b,c", "50% of\r\nqueries", "%0A literal", "plain"])
def test_escaping_round_trips_as_github_reads_it(text):
    from pytest_retrieval_checks._github import escape_data, escape_property

    prop = escape_property(text)
    assert not set(":,\r\n") & set(prop) and _unescape(prop) == text
    data = escape_data(text)
    assert not set("\r\n") & set(data) and _unescape(data) == text
