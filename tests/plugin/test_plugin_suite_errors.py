"""A YAML suite that cannot be loaded is a collection error of its file, as a broken
test module is (issue 25): -m, -k and --deselect cannot hide it, the session is red,
and the error is recorded (table, JSON, history) as a failed gate of the suite. Every
failed suite item leaves one record everywhere (a suite with a typo, a check over
max_skipped, a model that timed out, a failing compare check), and ``show --check`` of
that run is red. In-process pytester runs: about 0.2-0.3 CPU-s each (see
test_plugin_options.py's measurement)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from shared_setup import strict_json_loads as _strict

import retrieval_checks as rc

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


def test_every_error_of_the_file_is_listed_at_collection(project):
    """A suite with three independent errors shows all three (in file order, as
    `retrieval-checks validate` does), not one per run of pytest (a new user fixed a
    typo only to meet the next one)."""
    _write(
        project,
        "option: {ties: optimistic}\ndatasets:\n  d: {queries: emb.npz}\nchecks:\n"
        "  - {metric: hitrate@1, at_least: 0.5}\n  - {metric: map, at_lest: 0.5}\n",
    )
    result = project.runpytest_inprocess("-p", "no:cacheprovider", "--rc-history", "none")
    result.stdout.fnmatch_lines(
        [
            "*rc_bad.yaml:1: *option*",
            "*rc_bad.yaml:5: *hitrate@1*",
            "*rc_bad.yaml:6: *at_lest*Did you mean 'at_least'?*",
            "*(3 errors)*",
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

    monkeypatch.setattr(_items, "suite_errors", boom)
    result = project.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-history", "none", "-k", "plain"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting rc_good.yaml*", "*ZeroDivisionError: a bug*"])


# ------------------------------------------------------------------ every failed suite item leaves a record (issue 12 review)
def _run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


def _suites_project(pytester):
    """A passing check, a suite with a typo, and a gap check whose train set skips 10 of 40
    queries under max_skipped: 0."""
    import numpy as np

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(8), 5)
    x = (rng.normal(size=(40, 8)) + 3 * np.eye(8)[y]).astype(np.float32)
    skip = y.copy()
    skip[:10] = np.arange(100, 110)  # 10 queries whose label nobody else has
    np.savez(pytester.path / "emb.npz", embeddings=x, labels=y)
    np.savez(pytester.path / "skip.npz", embeddings=x, labels=skip)
    pytester.makefile(
        ".yaml",
        rc_a="datasets:\n  d: {queries: emb.npz}\nchecks:\n  - {metric: map, at_least: 0.1}\n",
        rc_b="datasets:\n  d: {queries: emb.npz}\nchecks:\n  - {metric: map, at_lest: 0.5}\n",
        rc_c="datasets:\n  d: {queries: skip.npz}\n  e: {queries: emb.npz}\nchecks:\n"
        "  - {metric: map, gap: {train: d, test: e}, below: 0.5, max_skipped: 0}\n",
    )


def test_every_failed_suite_item_is_recorded_everywhere_and_show_check_is_red(
    pytester, monkeypatch
):
    monkeypatch.setenv(
        "COLUMNS", "200"
    )  # wide enough for the whole gate table on one line per gate
    _suites_project(pytester)
    result = _run(
        pytester,
        "--rc-json",
        "o.json",
        "--rc-history",
        "h.sqlite",
        "--junitxml",
        "j.xml",
        "--rc-html",
        "r.html",
        "--continue-on-collection-errors",
    )
    assert result.ret == 1
    gates = _strict((pytester.path / "o.json").read_text())["gates"]
    by_test = {g["test"].split("::")[0]: g for g in gates}
    assert len(gates) == 3 and by_test["rc_a.yaml"]["passed"]
    error = by_test["rc_b.yaml"]
    assert error["gate"] == "error" and error["passed"] is False and error["value"] is None
    assert "at_lest" in error["message"] and "rc_b.yaml" in error["message"]
    skipped = by_test["rc_c.yaml"]
    assert (
        skipped["passed"] is False
        and skipped["gate"] == "assert_gap_below"
        and skipped["metric"] == "map"
    )
    assert (skipped["n_used"], skipped["n_skipped"]) == (30, 10) and skipped["bounds"] == {
        "max_skipped": 0
    }
    result.stdout.fnmatch_lines(
        ["*rc_c.yaml::map_gap*n_skipped <= 0*30 / 10*FAIL*", "rc_b.yaml*(suite)*FAIL"]
    )
    h = rc.tracking.History(pytester.path / "h.sqlite")
    run = h.runs()[0]
    assert (run["n_gates"], run["n_failed"], run["exitstatus"]) == (3, 2, 1)
    junit = ET.parse(pytester.path / "j.xml")
    props = {
        tc.get("name"): [p.get("name") for p in tc.iter("property")]
        for tc in junit.iter("testcase")
    }
    assert any(n.startswith("rc:") for n in props["map_gap[precomputed-d-e]"])
    assert "rc_b.yaml" in {
        tc.get("name") for tc in junit.iter("testcase") if tc.find("error") is not None
    }
    assert "FAIL" in (pytester.path / "r.html").read_text()
    from retrieval_checks.tracking import main as cli

    assert cli(["--db", str(pytester.path / "h.sqlite"), "show", "latest", "--check"]) == 1


def test_a_model_timeout_is_recorded_as_a_failed_gate(pytester):
    import numpy as np

    y = np.repeat(np.arange(4), 3)
    np.savez(pytester.path / "d.npz", inputs=np.zeros((12, 4), np.float32), labels=y)
    pytester.makepyfile(slow="import time\ndef embed(x):\n    time.sleep(5)\n    return x\n")
    pytester.makefile(
        ".yaml",
        rc_t="models:\n  m: {callable: 'slow:embed', timeout: 0.5}\ndatasets:\n"
        "  d: {queries: d.npz}\nchecks:\n  - {metric: map, at_least: 0.1}\n",
    )
    pytester.syspathinsert()
    result = _run(pytester, "--rc-json", "o.json", "--rc-history", "none")
    assert result.ret == 1
    gates = _strict((pytester.path / "o.json").read_text())["gates"]
    assert len(gates) == 1 and gates[0]["gate"] == "error" and gates[0]["metric"] == "map"
    assert (
        gates[0]["model"] == "m"
        and gates[0]["dataset"] == "d"
        and "did not finish within" in gates[0]["message"]
    )


def test_a_failing_gate_is_not_recorded_twice(pytester):
    _suites_project(pytester)
    (pytester.path / "rc_a.yaml").write_text(
        "datasets:\n  d: {queries: emb.npz}\nchecks:\n  - {metric: map, at_least: 0.99}\n"
    )
    result = _run(pytester, "--rc-json", "o.json", "--rc-history", "none", "rc_a.yaml")
    assert result.ret == 1
    gates = _strict((pytester.path / "o.json").read_text())["gates"]
    assert [g["gate"] for g in gates] == ["assert_map_at_least"]


def test_a_compare_check_over_max_skipped_is_a_failed_gate_record(pytester):
    _suites_project(pytester)
    (pytester.path / "rc_a.yaml").write_text(
        "models:\n  a: {embeddings: {d: skip.npz}}\n  b: {embeddings: {d: skip.npz}}\n"
        "datasets:\n  d: {queries: skip.npz}\nchecks:\n"
        "  - {metric: map, models: [a], compare: {baseline: b}, max_skipped: 2}\n"
    )
    result = _run(pytester, "--rc-json", "o.json", "--rc-history", "none", "rc_a.yaml")
    assert result.ret == 1
    gates = _strict((pytester.path / "o.json").read_text())["gates"]
    assert (
        len(gates) == 1 and gates[0]["passed"] is False and gates[0]["gate"] == "assert_not_worse"
    )
    assert gates[0]["n_skipped"] == 10 and gates[0]["bounds"] == {"max_skipped": 2}
