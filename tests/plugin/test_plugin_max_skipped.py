"""--rc-max-skipped (issue 12): it fails a plain test whose gate skipped more queries
than the limit (a count or a fraction), also under xdist; a gate's own max_skipped wins
over the session's; without a limit the skipped queries are a warning under the table.
pytester in-process (about 0.2 CPU-s a session), except the xdist session: one worker
interpreter (its start-up and imports are most of this file's cost), the point of that
test: the option must reach a worker process and the record come back."""

from __future__ import annotations

import json

import pytest
from shared_setup import skipping_project as _project
from shared_setup import strict_json_loads as _strict

pytest_plugins = ["pytester"]


def _run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


@pytest.mark.parametrize(
    "limit, fails",
    [
        ("0", True),
        ("3", True),
        ("4", False),
        ("10", False),
        ("0.0", True),
        ("0.4", True),
        ("0.5", False),
        ("0.9", False),
    ],
)
def test_max_skipped_fails_a_plain_test(pytester, limit, fails):
    _project(pytester)
    result = _run(pytester, f"--rc-max-skipped={limit}", "--rc-json=g.json", "--rc-history=none")
    gate = _strict((pytester.path / "g.json").read_text())["gates"][0]
    if fails:
        result.assert_outcomes(failed=1)
        out = result.stdout.str()
        assert (
            "assert_metric" in out and "n_used 4 / n_skipped 4" in out and "--rc-max-skipped" in out
        )
        assert gate["passed"] is False and gate["max_skipped"] == json.loads(limit)
    else:
        result.assert_outcomes(passed=1)
        assert gate["passed"] is True


def test_max_skipped_works_under_xdist(pytester):
    pytest.importorskip("xdist")
    _project(pytester)
    # one worker: the project has one test, so a second worker would only start, import and
    # collect (the cost of this test); the option still has to reach a worker process and
    # the failed gate's record come back to the controller's JSON
    result = _run(
        pytester, "-n", "1", "--rc-max-skipped=1", "--rc-json=g.json", "--rc-history=none"
    )
    result.assert_outcomes(failed=1)
    assert "n_used 4 / n_skipped 4" in result.stdout.str()
    assert _strict((pytester.path / "g.json").read_text())["gates"][0]["passed"] is False


def test_the_gates_own_max_skipped_wins_over_the_session(pytester):
    _project(pytester, ", max_skipped=5")
    _run(pytester, "--rc-max-skipped=0", "--rc-history=none").assert_outcomes(passed=1)


def test_without_max_skipped_the_skipped_queries_are_a_warning(pytester):
    _project(pytester)
    result = _run(pytester, "--rc-history=none")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*n_used / n_skipped*",
            "test_gate*map*0.05 <= value <= 0.99*4 / 4*PASS*",
            "warning: test_gate map: *skipped*",
        ]
    )
