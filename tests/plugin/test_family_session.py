"""The session's family of significance-gated checks (issue 28): --rc-correction
holm decides a significant drop when the test loop ends on its adjusted p-value
(every pytest-xdist worker's checks in one family), fails the check's own test (its
line, pytest's counts, exit status and JUnit testcase), reports raw and adjusted
p-values in the JSON and history and the family in the terminal summary, and never
hides a failure on anything but significance. pytester in-process; cost: about 8 s
(one pytest-xdist run, 13 in-process runs)."""

from __future__ import annotations

import json

import pytest

from retrieval_checks.tracking import History

pytest_plugins = ["pytester"]

# six significance-gated baseline checks on 50 paired queries: check 0 dropped by
# 2.2 standard errors (one-sided p about 0.016: significant alone, not after Holm
# over 6: 0.016 x 6 = 0.1), check 1 by 5 (p about 1e-5: significant after Holm),
# the others not at all
TESTS = """
import math
import numpy as np
import pytest
import retrieval_checks as rc

pytestmark = pytest.mark.filterwarnings("ignore::retrieval_checks.PowerWarning")
N = 50
E = np.where(np.arange(N) % 2 == 0, 0.1, -0.1)  # per-query noise: mean 0, sd ~0.101
SE = float(np.std(E, ddof=1)) / math.sqrt(N)
BASE = np.full(N, 0.5)

def rec(vals):
    return {"metric": "map", "value": float(np.mean(vals)), "n": N, "unit": "queries",
            "units_are": "queries", "units": {f"q{i}": [float(v), 1] for i, v in enumerate(vals)}}

@pytest.mark.parametrize("k", range(6))
def test_gate(k):
    t = {0: 2.2, 1: 5.0}.get(k, 0.0)
    cur = BASE + E - t * SE
    rc.assert_no_regression(rec(cur), rec(BASE), max_drop=0.001, significant=True)

def test_not_significance_gated():
    cur = BASE - 0.01
    rc.assert_no_regression(rec(cur), rec(BASE), max_drop=0.05)
"""


@pytest.fixture
def project(pytester):
    pytester.makepyfile(test_gates=TESTS)
    return pytester


def _run(pytester, *args):
    return pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-json=g.json", "--rc-history=h.sqlite", *args
    )


def _text(result) -> str:
    """The terminal output with the summary's wrapped lines joined."""
    return " ".join(line.strip() for line in result.outlines)


def _gates(pytester) -> dict:
    data = json.loads((pytester.path / "g.json").read_text())
    return data, {g["test"].split("::")[-1]: g for g in data["gates"]}


def _junit_cases(path) -> dict:
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    return {case.get("name"): case for case in root.iter("testcase")}


def _props(case) -> dict:
    return {p.get("name"): p.get("value") for p in case.iter("property")}


def test_without_correction_each_check_fails_at_its_own_level(project):
    result = _run(project)
    result.assert_outcomes(passed=5, failed=2)
    data, gates = _gates(project)
    [fam] = data["families"]
    assert fam["correction"] == "none" and fam["size"] == 6
    assert gates["test_gate[0]"]["p_adjusted"] == gates["test_gate[0]"]["p_raw"]
    text = _text(result)
    assert "family of 6 significance-gated checks: no correction, each at 0.05" in text
    assert "up to 26% of runs fail a check by chance" in text


def test_holm_fails_only_what_survives_the_correction(project):
    result = _run(project, "--rc-correction", "holm")
    assert result.ret == 1
    data, gates = _gates(project)
    [fam] = data["families"]
    assert (
        fam["correction"] == "holm"
        and fam["size"] == 6
        and fam["failed"] == ["test_gates.py::test_gate[1]"]
    )
    g0, g1 = gates["test_gate[0]"], gates["test_gate[1]"]
    assert g0["p_raw"] < 0.05 <= g0["p_adjusted"] and g0["passed"] is True
    assert g0["decision"] == "passed after holm"
    assert g1["passed"] is False and g1["decision"] == "failed after holm"
    assert "p_raw" not in gates["test_not_significance_gated"]
    text = _text(result)
    assert "family of 6 significance-gated checks: family-wise error rate 0.05 (holm)" in text
    assert "FAIL after holm: test_gates.py::test_gate[1] map" in text
    rows = History(project.path / "h.sqlite").results(1)
    stored = {r["test"].split("::")[-1]: r for r in rows}
    assert stored["test_gate[1]"]["passed"] in (False, 0)
    assert stored["test_gate[0]"]["p_adjusted"] == pytest.approx(g0["p_adjusted"])
    assert stored["test_gate[0]"]["mdd"] == pytest.approx(g0["mdd"])


def test_junit_carries_the_raw_p_value_and_the_power(project):
    _run(project, "--rc-correction", "holm", "--junitxml=j.xml")
    xml = (project.path / "j.xml").read_text()
    assert 'name="rc:map:p"' in xml and 'name="rc:map:mdd"' in xml
    # the deferred check's test waited for its family: JUnit has the decision, not "deferred"
    assert 'name="rc:map:decision" value="failed after holm"' in xml
    assert 'name="rc:map:p_adjusted"' in xml and "deferred to" not in xml


def test_holm_with_nothing_significant_after_correction_is_green(pytester):
    pytester.makepyfile(test_gates=TESTS.replace("{0: 2.2, 1: 5.0}", "{0: 2.2}"))
    result = _run(pytester, "--rc-correction", "holm")
    assert result.ret == 0
    result.assert_outcomes(passed=7)


def test_xdist_workers_form_one_family(project):
    """One family over both workers; the controller holds the failed check's test and
    reports it failed, on its own line and in its own JUnit testcase."""
    result = _run(
        project, "-p", "xdist", "-n", "2", "--rc-correction", "holm", "--junitxml=j.xml", "-v"
    )
    assert result.ret == 1
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines(["[[]gw?[]] [[]100%[]] FAILED test_gates.py::test_gate?1? "])
    data, gates = _gates(project)
    [fam] = data["families"]
    assert fam["size"] == 6 and fam["failed"] == ["test_gates.py::test_gate[1]"]
    assert gates["test_gate[0]"]["passed"] is True
    cases = _junit_cases(project.path / "j.xml")
    assert len(cases) == 7
    assert "failed after holm" in cases["test_gate[1]"].find("failure").get("message")
    assert _props(cases["test_gate[0]"])["rc:map:decision"] == "passed after holm"


@pytest.mark.parametrize("value", ["Holm", "bonferroni", "fdr"])
def test_unknown_correction_is_a_usage_error(project, value):
    result = _run(project, "--rc-correction", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rc-correction*holm*bh*none*"])


def test_a_deferred_gate_outside_a_test_call_is_decided_at_once(pytester):
    """A gate in a fixture is not recorded on a test: under a correction it must not
    pass unseen; it fails at its own level."""
    pytester.makepyfile(
        test_fixture=TESTS.split("@pytest.mark.parametrize")[0]
        + """
@pytest.fixture
def checked():
    cur = BASE + E - 5.0 * SE
    rc.assert_no_regression(rec(cur), rec(BASE), max_drop=0.001, significant=True)

def test_uses_it(checked):
    pass
"""
    )
    result = _run(pytester, "--rc-correction", "holm")
    result.assert_outcomes(errors=1)
    assert "no pytest session recorded this deferred check" in _text(result)


# ----------------------------------------------------------------- the test's own verdict
# a check the correction fails is a failed test, on its own line, in the counts, the exit
# status and its own JUnit testcase (not a green test beside a red session)


def test_a_check_the_correction_fails_fails_its_own_test(project):
    result = _run(project, "--rc-correction", "holm", "--junitxml=j.xml", "-rfp", "-v")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=6, failed=1)
    # decided last: the last line of the run's progress
    result.stdout.fnmatch_lines(["test_gates.py::test_gate?1? FAILED *[[]100%[]]"])
    result.stdout.fnmatch_lines(["FAILED test_gates.py::test_gate?1? - *failed after holm*"])
    result.stdout.fnmatch_lines(["PASSED test_gates.py::test_gate?0?"])
    cases = _junit_cases(project.path / "j.xml")
    assert len(cases) == 7  # each test once: the decided verdict is the test's own testcase
    failure = cases["test_gate[1]"].find("failure")
    assert failure is not None and "failed after holm" in failure.get("message")
    assert "adjusted" in failure.get("message") and "family of 6" in failure.get("message")
    assert cases["test_gate[0]"].find("failure") is None
    p1, p0 = _props(cases["test_gate[1]"]), _props(cases["test_gate[0]"])
    assert p1["rc:map:decision"] == "failed after holm"
    assert p0["rc:map:decision"] == "passed after holm"
    assert float(p0["rc:map:p_adjusted"]) >= 0.05 > float(p0["rc:map:p"])
    data, gates = _gates(project)
    assert gates["test_gate[1]"]["passed"] is False
    assert "failed after holm" in gates["test_gate[1]"]["message"]
    assert data["families"][0]["failed"] == ["test_gates.py::test_gate[1]"]


def test_the_decided_verdict_keeps_xfail_and_other_failures(pytester):
    """An expected failure the correction fails is xfailed (green); a test that failed on
    something else stays one failure; a deferred check in a test stopped early by -x is
    still decided."""
    pytester.makepyfile(
        test_gates=TESTS
        + """
@pytest.mark.xfail(reason="known drop")
def test_expected():
    rc.assert_no_regression(rec(BASE + E - 6.0 * SE), rec(BASE), max_drop=0.001, significant=True)

def test_also_broken():
    rc.assert_no_regression(rec(BASE + E - 6.0 * SE), rec(BASE), max_drop=0.001, significant=True)
    raise RuntimeError("broken after the gate")
"""
    )
    result = _run(pytester, "--rc-correction", "holm", "--junitxml=j.xml")
    result.assert_outcomes(passed=6, failed=2, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    cases = _junit_cases(pytester.path / "j.xml")
    assert len(cases) == 9
    assert cases["test_expected"].find("skipped") is not None
    broken = cases["test_also_broken"]
    assert "broken after the gate" in broken.find("failure").text  # its own failure, once
    assert _props(broken)["rc:map:decision"] == "failed after holm"
    result.stdout.fnmatch_lines(
        ["*retrieval-checks: decided after the test*", "*failed after holm*"]
    )


def test_held_tests_are_decided_even_when_the_run_stops_early(pytester):
    """-x stops the run at the first failure after the held tests: they are still decided
    (on the family run so far) and reported, never lost."""
    pytester.makepyfile(
        test_gates=TESTS
        + """
def test_z_broken():
    raise RuntimeError("stops the run")

def test_zz_never_run():
    pass
"""
    )
    result = _run(pytester, "--rc-correction", "holm", "-x", "--junitxml=j.xml")
    result.assert_outcomes(passed=6, failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    cases = _junit_cases(pytester.path / "j.xml")
    assert "failed after holm" in cases["test_gate[1]"].find("failure").get("message")


def test_a_test_reported_before_its_family_gets_a_failed_item_of_its_own(project):
    """When another plugin runs pytest's test protocol (as pytest-rerunfailures does), the
    plugin does not take it over: the test is reported as it ends, and a check the
    correction fails later is a failed item of its own, <test>::family[<metric>], in the
    counts, the exit status and JUnit."""
    project.makeconftest("def pytest_runtest_protocol(item, nextitem):\n    return None\n")
    result = _run(project, "--rc-correction", "holm", "--junitxml=j.xml", "-rf")
    result.assert_outcomes(passed=7, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["FAILED test_gates.py::test_gate?1?::family?map? - map failed after holm*"]
    )
    cases = _junit_cases(project.path / "j.xml")
    assert "failed after holm" in cases["test_gate[1]::family[map]"].find("failure").get("message")
    assert cases["test_gate[1]"].find("failure") is None  # logged before its family was known
