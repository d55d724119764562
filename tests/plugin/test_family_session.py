"""The session's family of significance-gated checks (issue 28): --rc-correction
holm decides a significant drop at the end of the session on its adjusted p-value
(every pytest-xdist worker's checks in one family), reports raw and adjusted
p-values in the JSON and history and the family in the terminal summary, and never
hides a failure on anything but significance. pytester in-process; cost: about 6 s
(one pytest-xdist run)."""

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
    assert 'name="rc:map:decision" value="deferred to holm"' in xml


def test_holm_with_nothing_significant_after_correction_is_green(pytester):
    pytester.makepyfile(test_gates=TESTS.replace("{0: 2.2, 1: 5.0}", "{0: 2.2}"))
    result = _run(pytester, "--rc-correction", "holm")
    assert result.ret == 0
    result.assert_outcomes(passed=7)


def test_xdist_workers_form_one_family(project):
    result = _run(project, "-p", "xdist", "-n", "2", "--rc-correction", "holm")
    assert result.ret == 1
    data, gates = _gates(project)
    [fam] = data["families"]
    assert fam["size"] == 6 and fam["failed"] == ["test_gates.py::test_gate[1]"]
    assert gates["test_gate[0]"]["passed"] is True


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
