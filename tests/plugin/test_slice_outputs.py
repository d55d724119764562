"""Slice gates in every output of the plugin: the terminal summary (one row per slice,
the too-small note, the queries without a slice), JUnit properties per slice, the JSON
report, the history's rows (read back), the HTML report (a chart over the slices) and
the markdown table (GitHub step summary, ``retrieval-checks report``).

Cost: about 4 s (four in-process pytester sessions on a 240-query evaluation).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import retrieval_checks as rc
from retrieval_checks.tracking import render_markdown

pytest_plugins = ["pytester"]

TESTS = """
import numpy as np
import pytest
import retrieval_checks as rc

def _result():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(40), 6)
    X = (rng.normal(size=(40, 16))[y] + rng.normal(size=(240, 16))).astype(np.float32)
    group = np.where(y < 20, "alpha", "beta").astype(object)
    group[:3] = None
    return rc.evaluate(X, query_labels=y, metrics=["map"], slices=group)

def test_every_slice():
    rc.assert_slices_at_least(_result(), "map", 0.05, unsliced="ignore")

def test_worst_fails():
    rc.assert_worst_slice_at_least(_result(), "map", 0.99)
"""


def test_slice_gates_reach_terminal_junit_json_history_html_and_markdown(pytester):
    pytester.makepyfile(test_sliced=TESTS)
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--rc-json=g.json",
        "--junitxml=j.xml",
        "--rc-history=h.sqlite",
        "--rc-html=r.html",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "slices of test_every_slice map: slices >= 0.05",
            "*slice*value*interval*",
            "*alpha*0.*[0.*, 0.*]*20 classes*PASS*",
            "*beta*PASS*",
            "*note: 3 queries have no slice value (in no slice)*",
            "slices of test_worst_fails map: worst slice >= 0.99",
            "*alpha*PASS*",
            "*beta*FAIL*",
        ]
    )
    gates = {
        g["test"].split("::")[-1]: g
        for g in json.loads((pytester.path / "g.json").read_text())["gates"]
    }
    every = gates["test_every_slice"]
    assert [r["slice"] for r in every["slices"]] == ["alpha", "beta"]
    assert every["slice_missing"] == {"slice": 3}
    assert all(r["low"] <= r["value"] <= r["high"] for r in every["slices"])
    assert gates["test_worst_fails"]["passed"] is False
    props = {
        p.get("name"): p.get("value") for p in ET.parse(pytester.path / "j.xml").iter("property")
    }
    assert float(props["rc:map:slice:alpha"]) == every["slices"][0]["value"]
    assert props["rc:map:slice:alpha:result"] == "PASS"
    assert props["rc:map:slice:beta:interval"].startswith("[")
    rows = rc.History(pytester.path / "h.sqlite").results(1)
    stored = {r["test"].split("::")[-1]: r for r in rows}
    assert stored["test_every_slice"]["slices"] == every["slices"]
    page = (pytester.path / "r.html").read_text()
    assert "<h2>Slices</h2>" in page and page.count('<svg class="slices"') == 2
    assert ">alpha<title>alpha</title>" in page
    md = render_markdown(rows)
    assert r"**slices of test\_sliced.py::test\_every\_slice: map**" in md  # markdown-escaped
    assert "| alpha | 0." in md and "| 20 classes | PASS |" in md
    assert "3 queries have no slice value (in no slice)." in md


SUITE = """
datasets:
  set: {queries: data/set.npz, slices: {lang: lang, tiny: {column: lang, map: {de: de}, default: null}}}
models:
  m: {embeddings: {set: data/set.npz}}
checks:
  - {metric: map, dataset: set, slices: [lang=de, lang=en], at_least: 0.05}
  - {metric: map, dataset: set, slices: all, baseline: {max_drop: 0.0}, unsliced: ignore}
"""


def test_a_yaml_slice_check_through_the_plugin(pytester):
    import numpy as np

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(40), 6)
    e = (rng.normal(size=(40, 16))[y] + rng.normal(size=(240, 16))).astype(np.float32)
    (pytester.path / "data").mkdir()
    np.savez(
        pytester.path / "data/set.npz", embeddings=e, labels=y, lang=np.where(y < 20, "de", "en")
    )
    (pytester.path / "rc_slices.yaml").write_text(SUITE)
    pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-regen-all", "--rc-history=none"
    ).assert_outcomes(passed=2)
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-json=g.json", "--rc-history=none"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "slices of rc_slices.yaml::map_at_least_slices[[]m-set[]] map: slices >= 0.05",
            "*lang=de*PASS*",
            "*lang=en*PASS*",
            "slices of rc_slices.yaml::map_vs_baseline_slices[[]m-set[]] map: slice baseline max*",
            "*tiny=de*0.*20 classes*PASS*",
            "*note: 120 queries have no tiny value (in no slice)*",
        ]
    )
    gates = json.loads((pytester.path / "g.json").read_text())["gates"]
    drop = next(g for g in gates if g["gate"] == "assert_no_slice_regression")
    assert (
        drop["suite"]
        and drop["model"] == "m"
        and {r["slice"] for r in drop["slices"]}
        == {
            "lang=de",
            "lang=en",
            "tiny=de",
        }
    )


FIXTURE_TEST = """
import numpy as np
import retrieval_checks as rc

def test_slices_did_not_drop(rc_evaluate, rc_slice_baseline):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(40), 6)
    X = (rng.normal(size=(40, 16))[y] + rng.normal(size=(240, 16))).astype(np.float32)
    X[y < 20] += NOISE * rng.normal(size=X[y < 20].shape).astype(np.float32)
    result = rc_evaluate(X, query_labels=y, metrics=["map"], slices=np.where(y < 20, "de", "en"), model="m")
    rc_slice_baseline(result, "map", max_drop=0.01)
"""


def test_the_rc_slice_baseline_fixture_writes_compares_and_fails_on_a_slice_drop(pytester):
    pytester.makepyfile(test_fx=FIXTURE_TEST.replace("NOISE", "0.0"))
    pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-regen-all", "--rc-history=none"
    ).assert_outcomes(passed=1)
    stored = (pytester.path / "test_fx.baselines.yaml").read_text()
    assert "test_slices_did_not_drop::map slice=de" in stored and "slice=en" in stored
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--rc-history=none").assert_outcomes(
        passed=1
    )
    pytester.makepyfile(
        test_fx=FIXTURE_TEST.replace("NOISE", "3.0")
    )  # the German queries get worse
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--rc-history=none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*1 of 2 slices dropped by more than max_drop 0.01*", "*de*FAIL*"])
