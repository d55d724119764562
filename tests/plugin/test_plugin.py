"""The pytest plugin, exercised with pytester: gates, reports, options, xdist, cache."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

pytest_plugins = ["pytester"]

TESTS = """
import numpy as np
import retrieval_checks as rc
from pytest_retrieval_checks import assert_map_at_least, assert_recall_at_least, assert_grouped_recall_ci

rng = np.random.default_rng(0)
y = np.repeat(np.arange(40), 5)
X = (rng.normal(size=(40, 16))[y] + 0.8 * rng.normal(size=(200, 16))).astype(np.float32)
METRICS = ["map", "hit_rate@1", "grouped_recall@1"]

def test_map(rc_evaluate):
    res = rc_evaluate(X, query_labels=y, metrics=METRICS, model="m", dataset="d", group_size=5)
    assert_map_at_least(res, 0.3)

def test_top1(rc_evaluate):
    res = rc_evaluate(X, query_labels=y, metrics=METRICS, model="m", dataset="d", group_size=5)
    assert_recall_at_least(res, 0.5, k=1)
    assert rc_evaluate.passes == 1  # the second test reused the first test's pass

def test_grouped(rc_evaluate):
    res = rc_evaluate(X, query_labels=y, metrics=METRICS, model="m", dataset="d", group_size=5)
    assert_grouped_recall_ci(res, at_least=THRESHOLD)
"""


def _suite(pytester, threshold=0.5):
    pytester.makepyfile(test_gates=TESTS.replace("THRESHOLD", str(threshold)))


def test_passing_gates_summary_json_and_junit(pytester):
    _suite(pytester)
    result = pytester.runpytest_inprocess(
        "--rc-json=gates.json", "--junitxml=junit.xml", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*retrieval-checks gates*",
            "test_map*map*PASS*",
            "test_top1*hit_rate@1*PASS*",
            "test_grouped*grouped_recall@1*[[]*PASS*",
        ]
    )
    data = json.loads((pytester.path / "gates.json").read_text())
    assert [g["metric"] for g in data["gates"]] == ["map", "hit_rate@1", "grouped_recall@1"]
    assert all(g["passed"] for g in data["gates"]) and data["exitstatus"] == 0
    assert data["gates"][2]["unit"] == "groups" and data["gates"][2]["low"] is not None
    props = {
        p.get("name"): p.get("value")
        for p in ET.parse(pytester.path / "junit.xml").iter("property")
    }
    assert float(props["rc:map"]) == pytest.approx(data["gates"][0]["value"])
    assert "rc:grouped_recall@1" in props


def test_failing_gate_message_and_summary(pytester):
    _suite(pytester, threshold=0.999)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*grouped_recall@1 interval's lower bound * < 0.999*",
            "*95% interval*",
            "*r=8 groups of S=5 labels*",
            "E  *model 'm', dataset 'd'",
            "*rule: fail when the interval's lower bound is below at_least*",
            "test_grouped*grouped_recall@1*FAIL*",
        ]
    )
    # the library's own frames are hidden from the traceback
    assert "_assertions.py" not in result.stdout.str()


def test_options_reach_the_evaluations(pytester):
    pytester.makepyfile(
        test_ties="""
import numpy as np
def test_constant_scorer(rc_evaluate, rc_options):
    res = rc_evaluate(np.ones((10, 3), np.float32), query_labels=np.repeat([0, 1], 5), metrics=["map"])
    assert rc_options["ties"] == "optimistic" and res.config["ties"] == "optimistic"
    assert res["map"] == 1.0
"""
    )
    pytester.makeini("[pytest]\nrc_ties = pessimistic\n")
    pytester.runpytest_inprocess("--rc-ties=optimistic", "-p", "no:cacheprovider").assert_outcomes(
        passed=1
    )


def test_rc_load_resolves_paths_against_the_rootdir(pytester):
    import numpy as np

    np.savez(
        pytester.path / "set.npz",
        embeddings=np.eye(4, dtype=np.float32),
        labels=np.array([0, 0, 1, 1]),
    )
    pytester.makepyfile(
        test_load="""
def test_load(rc_load):
    s = rc_load("set.npz")
    assert s.embeddings.shape == (4, 4) and list(s.labels) == [0, 0, 1, 1]
    assert rc_load("set.npz") is s
"""
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


@pytest.mark.slow  # starts early (tests/conftest.py: slow modules first)
def test_xdist_gives_the_same_summary(pytester):
    pytest.importorskip("xdist")
    _suite(pytester)
    serial = pytester.runpytest_inprocess("--rc-json=serial.json", "-p", "no:cacheprovider")
    serial.assert_outcomes(passed=3)
    parallel = pytester.runpytest_inprocess(
        "-n", "2", "--rc-json=parallel.json", "-p", "no:cacheprovider"
    )
    parallel.assert_outcomes(passed=3)
    parallel.stdout.fnmatch_lines(["*retrieval-checks gates*"])

    def rows(name):
        gates = json.loads((pytester.path / name).read_text())["gates"]
        return sorted((g["test"], g["metric"], round(g["value"], 12), g["passed"]) for g in gates)

    assert rows("serial.json") == rows("parallel.json")
