"""The pytest plugin, exercised with pytester: gates, reports, options, cache (xdist:
test_terminal_summary.py runs these tests under xdist in its one xdist session)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from shared_setup import RC_EVALUATE_TESTS as TESTS  # three Python tests of rc_evaluate

pytest_plugins = ["pytester"]


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
        lang=np.array(["de", "de", "en", "en"]),
    )
    pytester.makepyfile(
        test_load="""
def test_load(rc_load):
    s = rc_load("set.npz")
    assert s.embeddings.shape == (4, 4) and list(s.labels) == [0, 0, 1, 1]
    assert rc_load("set.npz") is s
    c = rc_load("set.npz", columns=["lang"])  # a list, as load_embeddings takes it (h13)
    assert list(c.columns["lang"]) == ["de", "de", "en", "en"]
    assert rc_load("set.npz", columns=["lang"]) is c
"""
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
