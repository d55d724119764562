"""The terminal summary: it fits the terminal's width, honours -q / -qq and --rc-summary,
keeps one order under pytest-xdist, counts "1 gate" / "2 gates"; and gates of Python
tests carry the model and dataset given to rc_evaluate (pytester in-process).

The plugin's one xdist session lives here (two worker interpreters, on numpy: about 7
CPU-s; 13 when each imported torch):
this module's gates, test_plugin's rc_evaluate tests and test_plugin_suites' YAML suite,
under GitHub Actions, give the table, the JSON rows and the annotations of one
in-process session."""

from __future__ import annotations

import json
import os
import random
from types import SimpleNamespace

import pytest
from shared_setup import RC_EVALUATE_TESTS, TOY_SUITE, toy_suite_project

from pytest_retrieval_checks import _reports

pytest_plugins = ["pytester"]


def _outcome(test: str, passed: bool = True, metric: str = "map", **kw) -> dict:
    return {
        "test": test,
        "metric": metric,
        "value": 0.71234,
        "low": 0.68811,
        "high": 0.73522,
        "passed": passed,
        "on": "value",
        "comparison": ">=",
        "threshold": 0.5,
        "n_used": 200,
        "n_skipped": 0,
        **kw,
    }


OUTCOMES = [
    _outcome("tests/test_search.py::test_rank[" + "a-very-long-parameter-id-" * 4 + "small]"),
    _outcome("tests/test_search.py::test_rank[large]", passed=False, metric="ndcg@10"),
    _outcome("suites/rc_digits.yaml::map_at_least[mlp-digits]", metric="grouped_recall@1"),
    _outcome("tests/test_search.py::test_top1", metric="hit_rate@1"),
]


@pytest.mark.parametrize("mode", ["full", "failed"])
def test_no_line_is_wider_than_the_terminal(mode):
    for width in range(12, 220):
        lines = _reports.summary_lines(OUTCOMES, width=width, mode=mode)
        assert lines and all(len(line) <= width for line in lines), (
            width,
            [l for l in lines if len(l) > width],
        )
        assert all(
            len(line) <= width
            for line in _reports.warning_lines([_outcome("t", n_skipped=5, n_used=10)], width=width)
        )
    wide = _reports.summary_lines(OUTCOMES, width=None)
    assert any(len(line) > 150 for line in wide)  # without a width nothing is cut


def test_columns_while_they_fit_then_the_rule_below_then_blocks_and_names_are_never_cut():
    wide = _reports.summary_lines(OUTCOMES, width=300)
    assert wide[1].split() == [
        "test",
        "metric",
        "value",
        "interval",
        "rule",
        "n_used",
        "/",
        "n_skipped",
        "result",
    ]
    short_names = [
        _outcome(f"tests/test_s.py::test_{i}", metric="grouped_recall@1") for i in range(3)
    ]
    short = _reports.summary_lines(short_names, width=80)
    assert short[1].split() == ["test", "metric", "value", "interval", "result"]
    assert short[3] == "    rule value >= 0.5; n_used / n_skipped 200 / 0"
    for width in (
        80,
        120,
        40,
    ):  # the long parameter id needs blocks; its name is wrapped whole, never cut
        lines = _reports.summary_lines(OUTCOMES, width=width)
        assert any(line.startswith("FAIL  test_rank[large]") for line in lines)
        assert (
            "".join(line.strip() for line in lines).count(
                "a-very-long-parameter-id-" * 4 + "small]"
            )
            == 1
        )


def test_columns_without_a_value_are_left_out():
    bare = [
        {
            "test": "t.py::test_gate",
            "metric": "map",
            "value": 0.5,
            "passed": True,
            "on": "value",
            "comparison": ">=",
            "threshold": 0.5,
        }
    ]
    assert _reports.summary_lines(bare, width=80)[1:] == [
        "test       metric  value   rule          result",
        "test_gate  map     0.5000  value >= 0.5  PASS",
    ]


def test_pluralisation_and_the_count_line():
    assert _reports.count_line(OUTCOMES[:1]) == "1 gate: 1 passed, 0 failed"
    assert _reports.count_line(OUTCOMES) == "4 gates: 3 passed, 1 failed"
    assert (
        _reports.count_line([_outcome("t", passed=False, xfail=True)])
        == "1 gate: 0 passed, 0 failed, 1 xfailed"
    )
    assert [_reports.plural(n, "gate") for n in (0, 1, 2)] == ["0 gates", "1 gate", "2 gates"]


def test_modes_and_their_validation():
    assert [_reports.summary_mode(v, None) for v in (2, 0, -1, -2, -3)] == [
        "full",
        "full",
        "failed",
        "none",
        "none",
    ]
    assert _reports.summary_mode(-2, "FULL") == "full"  # the option wins over -qq
    with pytest.raises(ValueError, match="full, failed, none"):
        _reports.summary_mode(0, "quiet")
    failed = _reports.summary_lines(OUTCOMES, width=300, mode="failed")
    assert failed[0] == "4 gates: 3 passed, 1 failed; 1 failed gate shown" and len(failed) == 3
    assert "test_rank[large]" in failed[2] and "FAIL" in failed[2]
    assert _reports.summary_lines(OUTCOMES, mode="none") == []


def test_the_order_does_not_depend_on_the_order_gates_arrived_in():
    order = {o["test"]: i for i, o in enumerate(OUTCOMES)}
    expected = _reports.summary_lines(OUTCOMES, width=300, order=order)
    rng = random.Random(0)
    for _ in range(20):
        shuffled = OUTCOMES[:]
        rng.shuffle(shuffled)
        assert _reports.summary_lines(shuffled, width=300, order=order) == expected
        assert _reports.summary_lines(shuffled, width=300) == _reports.summary_lines(
            OUTCOMES, width=300
        )


TESTS = """
import numpy as np
import retrieval_checks as rc
from pytest_retrieval_checks import assert_map_at_least, assert_not_worse

rng = np.random.default_rng(0)
y = np.repeat(np.arange(20), 5)
centers = rng.normal(size=(20, 16))
A = (centers[y] + 0.5 * rng.normal(size=(100, 16))).astype(np.float32)
B = (centers[y] + 0.6 * rng.normal(size=(100, 16))).astype(np.float32)

def test_passes_with_a_rather_long_name_to_show_how_the_table_cuts_it(rc_evaluate):
    assert_map_at_least(rc_evaluate(A, query_labels=y, metrics=["map"], model="alpha", dataset="blobs"), 0.3)

def test_fails(rc_evaluate):
    assert_map_at_least(rc_evaluate(B, query_labels=y, metrics=["map"], model="beta", dataset="blobs"), 0.99)

def test_compare(rc_evaluate):
    a = rc_evaluate(A, query_labels=y, metrics=["map"], model="alpha", dataset="blobs")
    b = rc_evaluate(B, query_labels=y, metrics=["map"], model="beta", dataset="blobs")
    assert_not_worse(rc.compare(b, a, "map"), margin=0.5)
"""


def _pytest(pytester, *args: str, columns: int = 80) -> SimpleNamespace:
    """pytest in-process on a terminal ``columns`` wide: exit code, stdout and stderr."""
    saved = {name: os.environ.get(name) for name in ("COLUMNS", "PYTEST_ADDOPTS")}
    os.environ["COLUMNS"] = str(columns)
    os.environ.pop("PYTEST_ADDOPTS", None)
    try:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--rc-history=none", *args)
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)
    return SimpleNamespace(
        returncode=int(result.ret), stdout=result.stdout.str(), stderr=result.stderr.str()
    )


def _section(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "retrieval-checks gates" in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("=")), len(lines))
    return lines[start:end]


@pytest.fixture
def module(pytester):
    pytester.makepyfile(test_gates=TESTS)
    return pytester


def test_a_session_fits_the_terminal_and_names_models_of_comparisons(module):
    result = _pytest(module, "--rc-json=gates.json", columns=60)
    assert result.returncode == 1, result.stdout[-3000:]
    section = _section(result.stdout)
    assert section[1] == "3 gates: 2 passed, 1 failed"
    assert all(len(line) <= 60 for line in section), [line for line in section if len(line) > 60]
    gates = {
        g["test"].split("::")[-1]: g
        for g in json.loads((module.path / "gates.json").read_text())["gates"]
    }
    # both models, in the order the test evaluated them
    assert (
        gates["test_compare"]["model"] == "alpha/beta"
        and gates["test_compare"]["dataset"] == "blobs"
    )
    assert gates["test_fails"]["model"] == "beta"


def test_quiet_shows_the_failed_gates_and_very_quiet_none(module):
    quiet = _section(_pytest(module, "-q", columns=200).stdout)
    assert quiet[1].startswith("3 gates: 2 passed, 1 failed; 1 failed gate shown")
    assert any("test_fails" in line and "FAIL" in line for line in quiet)
    assert not any("test_compare" in line for line in quiet)
    very_quiet = _pytest(module, "-qq", columns=200)
    assert "retrieval-checks gates" not in very_quiet.stdout and very_quiet.returncode == 1
    full = _section(_pytest(module, "-qq", "--rc-summary=full", columns=200).stdout)
    assert sum(" PASS" in line or " FAIL" in line for line in full) == 3


def test_tests_that_fail_outside_the_gates_are_named_under_the_table(pytester):
    """The table counts gates: "1 gate: 1 passed" above a session whose other tests failed
    (a TypeError before any gate, a plain assert) read green to a new user; a line under
    the table now says how many other tests failed. None when only gates fail."""
    pytester.makepyfile(
        test_mixed=TESTS.split("def test_passes")[0]
        + "def test_gate(rc_evaluate):\n"
        + "    assert_map_at_least(rc_evaluate(A, query_labels=y, metrics=['map']), 0.3)\n\n"
        + "def test_typo(rc_evaluate):\n    rc_evaluate(A, labels=y)\n\n"
        + "def test_plain():\n    assert 1 == 2\n"
    )
    result = _pytest(pytester, columns=200)
    section = _section(result.stdout)
    assert section[1] == "1 gate: 1 passed, 0 failed"
    assert any(
        "2 other tests of this session fail outside the gates above" in line for line in section
    )
    only_gates = _pytest(pytester, "-k", "gate", columns=200)
    assert "outside the gates" not in only_gates.stdout


def test_a_bad_summary_mode_is_a_usage_error(module):
    result = _pytest(module, "--rc-summary=quiet")
    assert result.returncode == 4
    assert (
        "--rc-summary (ini rc_summary): 'quiet' is not a summary mode; use one of full, failed, none"
        in result.stderr
    )


def _annotations(stdout: str) -> list[tuple[list, str]]:
    """Each GitHub ``::error`` annotation as (its sorted properties, its message's first
    line), sorted: what test_github.py checks line by line, compared here across runs."""
    found = []
    for line in stdout.splitlines():
        if line.startswith("::error "):
            _, props, message = line.split("::", 2)
            pairs = dict(p.split("=", 1) for p in props[len("error ") :].split(","))
            found.append((sorted(pairs.items()), message.split("%0A")[0]))
    return sorted(found)


def test_the_same_table_gate_rows_and_annotations_under_xdist(module, monkeypatch):
    """One xdist session (two workers, each a fresh interpreter: the cost of this test)
    against one in-process session, on this module's gates (a failing one, a comparison of
    two models), test_plugin's (the second test reuses the first one's evaluation pass)
    and test_plugin_suites' YAML suite (items of a suite file, a model called in the
    workers, a failing check), under GitHub Actions: the same table, in the same order,
    the same JSON rows, gathered from the workers, and the same ``::error`` annotations
    (the suite check's line travels with the gate's record from the worker)."""
    pytest.importorskip("xdist")
    module.makepyfile(test_evaluate=RC_EVALUATE_TESTS.replace("THRESHOLD", "0.5"))
    toy_suite_project(module.path, monkeypatch)(threshold=0.999)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(module.path / "step-summary.md"))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(module.path))
    # on numpy (the same numbers on every backend): the workers skip torch's import, and
    # pytest's five closing garbage collections (unraisable exceptions: none is checked
    # here) over their heap: ~2.7 of the ~6.6 CPU-s each worker cost
    light = ("--rc-device=numpy", "-p", "no:unraisableexception")
    serial = _pytest(module, *light, "--rc-json=serial.json", columns=200)
    parallel = _pytest(module, *light, "-n", "2", "--rc-json=parallel.json", columns=200)
    assert serial.returncode == parallel.returncode == 1, parallel.stdout[-3000:]
    one, two = (
        [
            line
            for line in _section(r.stdout)
            if "JSON report written to" not in line and not line.startswith("::")
        ]
        for r in (serial, parallel)
    )
    assert one == two  # the gate rows, in one order, and the notes under them
    assert sum(line.endswith((" PASS", " FAIL")) for line in one) == 10
    assert one[1] == "10 gates: 8 passed, 2 failed"
    assert "2 workers" in parallel.stdout and "2 failed, 8 passed" in parallel.stdout

    def rows(name):
        gates = json.loads((module.path / name).read_text())["gates"]
        return sorted((g["test"], g["metric"], round(g["value"], 12), g["passed"]) for g in gates)

    assert rows("serial.json") == rows("parallel.json") and len(rows("serial.json")) == 10
    assert {
        g.get("suite") for g in json.loads((module.path / "parallel.json").read_text())["gates"]
    } >= {"toy"}  # the YAML suite's gates came back from the workers with their suite

    annotations = _annotations(serial.stdout)
    assert _annotations(parallel.stdout) == annotations
    check_line = 1 + TOY_SUITE.lstrip().splitlines().index(
        "  - {metric: map, dataset: set, at_least: MAP_THRESHOLD}"
    )
    failing_line = next(i for i, line in enumerate(TESTS.splitlines()) if "0.99)" in line)
    assert [dict(props)["file"] for props, _ in annotations] == ["rc_toy.yaml", "test_gates.py"]
    assert (
        [int(dict(props)["line"]) for props, _ in annotations]
        == [
            check_line,
            failing_line,
        ]
    )  # the suite's check; the failing assertion (pytester writes TESTS without its first, empty line)
