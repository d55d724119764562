"""A family's power (review finding 6, a silent pass): under --rc-correction holm or bh
a significance-gated check is tested at a stricter level than its own, so its power,
minimum detectable drop and ``min_power`` are judged at the level the correction tests
it at (level / family size: Holm's first step, BH's strictest), not at its own. A check
whose ``min_power`` holds alone but not under the family's correction fails its own
test after the correction; without a correction nothing changes. pytester in-process;
cost: about 3 s (three in-process runs of ten small gates).
"""

from __future__ import annotations

import json

import pytest

from retrieval_checks.gates import decide_family

pytest_plugins = ["pytester"]

# ten baseline checks on 50 paired queries with no drop at all; each tolerates a drop of
# 2.75 standard errors: power about 0.86 at its own one-sided level 0.05 (min_power 0.8
# holds), about 0.5 at 0.05 / 10 (it does not)
TESTS = """
import math
import numpy as np
import pytest
import retrieval_checks as rc

N = 50
E = np.where(np.arange(N) % 2 == 0, 0.1, -0.1)
SE = float(np.std(E, ddof=1)) / math.sqrt(N)
BASE = np.full(N, 0.5)

def rec(vals):
    return {"metric": "map", "value": float(np.mean(vals)), "n": N, "unit": "queries",
            "units_are": "queries", "units": {f"q{i}": [float(v), 1] for i, v in enumerate(vals)}}

@pytest.mark.parametrize("k", range(10))
def test_gate(k):
    rc.assert_no_regression(rec(BASE + E), rec(BASE), max_drop=2.75 * SE, significant=True,
                            min_power=0.8)
"""


def _run(pytester, *args):
    pytester.makepyfile(test_gates=TESTS)
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-json=g.json", "--rc-history=none", *args
    )
    gates = json.loads((pytester.path / "g.json").read_text())["gates"]
    return result, gates


def test_without_a_correction_the_power_is_that_of_each_check(pytester):
    result, gates = _run(pytester)
    result.assert_outcomes(passed=10)
    assert all(g["power_level"] == pytest.approx(0.05) for g in gates)
    assert all(g["power_at_tolerance"] > 0.8 and not g["underpowered"] for g in gates)


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_min_power_is_judged_at_the_corrected_level(pytester, correction):
    result, gates = _run(pytester, "--rc-correction", correction)
    result.assert_outcomes(failed=10)
    for g in gates:
        assert g["power_level"] == pytest.approx(0.005)
        assert g["power_level_uncorrected"] == pytest.approx(0.05)
        assert g["power_at_tolerance"] < 0.8 and g["underpowered"] is True
        assert g["passed"] is False and g["decision"] == f"failed after {correction}: underpowered"
    text = " ".join(line.strip() for line in result.outlines)
    assert "cannot see the drop they gate at the corrected level" in text
    assert f"FAIL after {correction}: test_gates.py::test_gate[0] map (underpowered: power" in text
    assert "min_power 0.8 at the corrected level 0.005" in text
    result.stdout.fnmatch_lines(
        [f"*map cannot see the drop it gates under {correction}: minimum detectable drop*"]
    )


def _record(p, se=0.01, level=0.05, tolerance=0.03, required=False, deferred=False):
    from retrieval_checks.stats._power import power_of

    pw = power_of(
        se,
        100,
        level=level,
        power=0.8,
        dof=99,
        unit="queries",
        tolerance=tolerance,
        required=required,
    )
    r = {
        "test": "t",
        "metric": "map",
        "family": True,
        "p_raw": p,
        "significance_level": level,
        "beyond_tolerance": False,
        "correction": "holm",
        "passed": True,
        **pw.to_dict(),
    }
    if deferred:
        r["decision"] = "deferred"
    return r


def test_decide_family_recomputes_every_members_power_at_level_over_m():
    records = [_record(0.5) for _ in range(4)]
    alone = dict(records[0])
    [fam] = decide_family(records)
    for r in records:
        assert r["power_level"] == pytest.approx(0.0125)
        assert r["mdd"] > alone["mdd"] and r["power_at_tolerance"] < alone["power_at_tolerance"]
        assert "0.05 / 4 = 0.0125" in r["power_correction"]
    assert fam["underpowered"] == records  # a warning: none requires the power, none fails
    assert all(r["passed"] for r in records)


def test_a_family_of_one_or_without_correction_keeps_the_power():
    one = [_record(0.5)]
    decide_family(one)
    assert one[0]["power_level"] == 0.05 and "power_correction" not in one[0]
    none = [dict(_record(0.5), correction="none") for _ in range(3)]
    decide_family(none)
    assert all(r["power_level"] == 0.05 for r in none)


def test_a_deferred_check_requiring_power_fails_only_when_the_corrected_level_lacks_it():
    strong = [_record(0.5, tolerance=0.06, required=True, deferred=True) for _ in range(3)]
    weak = [_record(0.5, tolerance=0.03, required=True, deferred=True) for _ in range(3)]
    [fam] = decide_family(strong + weak)
    assert all(r["decision"] == "passed after holm" for r in strong)
    assert all(r["decision"] == "failed after holm: underpowered" for r in weak)
    assert fam["failed"] == weak


def test_the_warning_during_the_test_says_its_level_is_not_the_familys():
    from types import SimpleNamespace

    from retrieval_checks.gates._family import power_note
    from retrieval_checks.stats._power import power_of

    pw = power_of(0.01, 100, level=0.05, power=0.8, dof=99, unit="queries", tolerance=0.01)
    change = SimpleNamespace(power=pw, metric="map")
    alone = power_note("assert_no_regression", change)
    assert "one-sided level 0.05" in alone and "family" not in alone
    held = power_note("assert_no_regression", change, "holm")
    assert "under holm the family tests it at a stricter one" in held
    assert power_note("assert_no_regression", change, "none") == alone
