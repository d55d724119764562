"""YAML suites collected by the pytest plugin, exercised with pytester in-process
(the pytester fixture keeps the modules a run imports: torch imported twice crashes).
Under xdist: test_terminal_summary.py runs this toy suite in its one xdist session."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from shared_setup import TOY_SUITE as SUITE
from shared_setup import toy_suite_project

pytest_plugins = ["pytester"]


@pytest.fixture
def project(pytester, monkeypatch):
    """``project(threshold=0.2, name="rc_toy.yaml", text=None)`` writes the toy suite
    (tests/shared_setup.py: its data, its model, its log of embedding calls: ``project.log``)."""
    return toy_suite_project(pytester.path, monkeypatch)


def test_passing_suite_items_ids_and_markers(pytester, project, monkeypatch):
    monkeypatch.setenv(
        "COLUMNS", "200"
    )  # wide enough for the whole gate table on one line per gate
    project()
    result = pytester.runpytest_inprocess("-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "rc_toy.yaml::map_at_least[[]proj-set[]] PASSED*",
            "rc_toy.yaml::hit_rate@1_ci_at_least[[]proj-set[]] PASSED*",
            "rc_toy.yaml::grouped_recall@1_ci_at_least[[]proj-set[]] PASSED*",
            "rc_toy.yaml::grouped_recall@1_gap[[]proj-train-set[]] PASSED*",
            "*retrieval-checks gates*",
            "rc_toy.yaml::map_at_least[[]proj-set[]]*map*PASS",
        ]
    )
    # -k and markers declared in YAML select items; markers need no ini registration
    pytester.runpytest_inprocess(
        "-k", "grouped and not gap", "-p", "no:cacheprovider"
    ).assert_outcomes(passed=1)
    pytester.runpytest_inprocess(
        "-m", "slow", "--strict-markers", "-p", "no:cacheprovider"
    ).assert_outcomes(passed=1)
    pytester.runpytest_inprocess(
        "-m", "quality and not slow", "-p", "no:cacheprovider"
    ).assert_outcomes(passed=3)


def test_the_file_pattern_is_configurable(pytester, project):
    project(name="toy.quality.yaml")
    pytester.runpytest_inprocess(
        "-p", "no:cacheprovider"
    ).assert_outcomes()  # not collected by default
    pytester.makeini("[pytest]\nrc_suite_files = *.quality.yaml\n")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=4)


def test_failing_threshold_message_and_last_failed(pytester, project):
    project(threshold=0.999)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ toy: map_at_least[[]proj-set[]] _*",
            "model 'proj' on dataset 'set' [[]suite toy, rc_toy.yaml:10[]]",
            "map value 0.* < 0.999 (short by 0.*; unit: fraction)",
            "  sample: 72 queries used, 0 skipped, gallery 72",
            "  worst classes: *",
            "  rule: fail when the value is below at_least",
            "FAILED rc_toy.yaml::map_at_least[[]proj-set[]]*",
        ]
    )
    assert "Traceback" not in result.stdout.str() and "_suite_run.py" not in result.stdout.str()
    rerun = pytester.runpytest_inprocess("--lf", "-v")
    rerun.assert_outcomes(failed=1)
    rerun.stdout.fnmatch_lines(["rc_toy.yaml::map_at_least[[]proj-set[]] FAILED*"])


def test_malformed_suite_names_the_line_and_the_others_still_run(pytester, project):
    project()
    pytester.path.joinpath("rc_bad.yaml").write_text(
        "datasets:\n  set: {queries: data/set.npz}\nchecks:\n  - metric: map\n    dataset: set\n    at_lest: 0.5\n"
    )
    # a collection error of its file (issue 25): the others run with --continue-on-collection-errors
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--continue-on-collection-errors"
    )
    result.assert_outcomes(passed=4, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting rc_bad.yaml*",
            "invalid retrieval-checks suite",
            "*rc_bad.yaml:6: checks[[]0[]].at_lest: unknown field 'at_lest'. Did you mean 'at_least'?*",
            "ERROR rc_bad.yaml*",
        ]
    )


def test_unknown_metric_suggests_the_closest_name(pytester, project):
    project(
        text=SUITE.replace("metric: grouped_recall@1, dataset", "metric: grouped_recal@1, dataset")
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*rc_toy.yaml:12: checks[[]2[]].metric: *'grouped_recal@1'*"
            "Did you mean 'grouped_recall@1'?*"
        ]
    )


def test_junit_properties_and_json_report(pytester, project):
    project()
    result = pytester.runpytest_inprocess(
        "--rc-json=out/gates.json", "--junitxml=junit.xml", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=4)
    gates = json.loads((pytester.path / "out/gates.json").read_text())["gates"]
    assert [g["test"] for g in gates] == [
        "rc_toy.yaml::map_at_least[proj-set]",
        "rc_toy.yaml::hit_rate@1_ci_at_least[proj-set]",
        "rc_toy.yaml::grouped_recall@1_ci_at_least[proj-set]",
        "rc_toy.yaml::grouped_recall@1_gap[proj-train-set]",
    ]
    assert [g["gate"] for g in gates] == [
        "assert_map_at_least",
        "assert_recall_at_least",
        "assert_grouped_recall_ci",
        "assert_gap_below",
    ]
    assert (
        gates[2]["low"] is not None
        and gates[2]["on"] == "interval"
        and all(g["passed"] for g in gates)
    )
    assert {(g["suite"], g["model"]) for g in gates} == {("toy", "proj")}
    assert [g["dataset"] for g in gates] == ["set", "set", "set", "train/set"]
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").iter("testcase")}
    props = {
        p.get("name"): p.get("value") for p in cases["map_at_least[proj-set]"].iter("property")
    }
    assert float(props["rc:map"]) == pytest.approx(gates[0]["value"])


def test_embeddings_are_cached_between_runs(pytester, project):
    project()
    pytester.runpytest_inprocess().assert_outcomes(passed=4)
    first = project.log.read_text().splitlines()
    assert first == ["queries", "queries"]  # set and train, each embedded once for four checks
    pytester.runpytest_inprocess().assert_outcomes(passed=4)
    assert project.log.read_text().splitlines() == first  # the second run reused the cache
    pytester.runpytest_inprocess("--cache-clear").assert_outcomes(passed=4)
    assert len(project.log.read_text().splitlines()) == 4  # cleared with pytest's cache
    pytester.runpytest_inprocess("--rc-embedding-cache=none").assert_outcomes(passed=4)
    assert len(project.log.read_text().splitlines()) == 6
