"""A YAML suite that cannot be loaded is a collection error of its file, as a broken
test module is (issue 25): -m, -k and --deselect cannot hide it, the session is red,
and the error is recorded (table, JSON, history) as a failed gate of the suite.
In-process pytester runs (fast)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest_plugins = ["pytester"]

GOOD = "markers: [quality]\ndatasets:\n  d: {queries: emb.npz}\nchecks:\n  - {metric: map, at_least: 0.01}\n"
BROKEN = {
    "yaml_syntax": "markers: [quality]\ndatasets: [\n",
    "schema": "markers: [quality]\ndatasets:\n  d: {queries: emb.npz}\nchecks:\n  - {metric: map, at_lest: 0.5}\n",
    "missing_file": "markers: [quality]\ndatasets:\n  d: {queries: nowhere.npz}\nchecks:\n"
    "  - {metric: map, at_least: 0.5}\n",
    "unknown_metric": "datasets:\n  d: {queries: emb.npz}\nchecks:\n  - {metric: mapp, at_least: 0.5}\n",
    "empty": "",
    "not_utf8": b"datasets:\n  d: {queries: \xff\xfe.npz}\n",
}
SELECTIONS = {
    "none": (),
    "marker": ("-m", "quality"),
    "keyword": ("-k", "map_at_least"),
    "deselect": ("--deselect", "rc_bad.yaml"),
    "other_marker": ("-m", "slow"),
}


@pytest.fixture
def project(pytester):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(6), 4)
    np.savez(
        pytester.path / "emb.npz", embeddings=rng.normal(size=(24, 8)).astype(np.float32), labels=y
    )
    pytester.path.joinpath("rc_good.yaml").write_text(GOOD)
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    return pytester


def _write(pytester, text, name="rc_bad.yaml"):
    p = pytester.path / name
    p.write_bytes(text) if isinstance(text, bytes) else p.write_text(text)
    return p


# every kind of broken file, and every way of narrowing a run, each at least once
CASES = [(kind, list(SELECTIONS)[i % len(SELECTIONS)]) for i, kind in enumerate(BROKEN)]


@pytest.mark.parametrize(("kind", "selection"), CASES)
def test_a_broken_suite_is_a_collection_error_whatever_the_selection(project, kind, selection):
    _write(project, BROKEN[kind])
    result = project.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-history", "none", *SELECTIONS[selection]
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    errors = [r for r in result.reprec.getreports("pytest_collectreport") if r.failed]
    assert [r.nodeid for r in errors] == ["rc_bad.yaml"]
    text = result.stdout.str()
    assert "invalid retrieval-checks suite" in text and "rc_bad.yaml" in text
    assert "Traceback" not in text  # the loader's message, not its stack
    result.stdout.fnmatch_lines(["*ERROR collecting rc_bad.yaml*", "*1 error*"])


def test_the_error_names_the_line_and_field(project):
    _write(project, BROKEN["schema"])
    result = project.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-history", "none", "-m", "quality"
    )
    result.stdout.fnmatch_lines(
        [
            "*rc_bad.yaml:5: checks[[]0[]].at_lest: unknown field 'at_lest'. "
            "Did you mean 'at_least'?*"
        ]
    )


def test_the_error_is_a_failed_record_in_the_table_json_and_history(project):
    _write(project, BROKEN["schema"])
    result = project.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--rc-json",
        "o.json",
        "--rc-history",
        "h.sqlite",
        "--continue-on-collection-errors",
        "-m",
        "quality",
    )
    assert result.ret == 1
    gates = json.loads((project.path / "o.json").read_text())["gates"]
    by_test = {g["test"]: g for g in gates}
    assert set(by_test) == {"rc_bad.yaml", "rc_good.yaml::map_at_least[precomputed-d]"}
    error = by_test["rc_bad.yaml"]
    assert (error["gate"], error["metric"], error["passed"], error["line"]) == (
        "error",
        "(suite)",
        False,
        5,
    )
    assert "at_lest" in error["message"]
    result.stdout.fnmatch_lines(["rc_bad.yaml*(suite)*FAIL", "*rule error*"])
    import retrieval_checks as rc

    run = rc.tracking.History(project.path / "h.sqlite").runs()[0]
    assert (run["n_gates"], run["n_failed"]) == (2, 1) and "collection error" in run["selection"]


def test_an_unexpected_loader_failure_is_also_a_collection_error(project, monkeypatch):
    from pytest_retrieval_checks import _items

    def boom(path):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(_items, "load_suite", boom)
    result = project.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-history", "none", "-k", "plain"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting rc_good.yaml*", "*ZeroDivisionError: a bug*"])
