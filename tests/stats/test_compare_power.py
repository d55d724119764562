"""The power of a comparison gated on significance (``assert_not_worse(rule=
"significant")``, the default, and a suite's ``compare:``): the same routine as a
baseline check with ``significant: true`` (stats._power.power_of). Its test is "worse by
more than the margin" at (1 - confidence) / 2, so its tolerance, the drop it must detect
with the stated power, is the margin exceeded by the margin (twice the margin), as a
baseline check's test of "worse at all" must detect a drop of its max_drop. Below that
power the gate warns (PowerWarning, the units it would need), and ``min_power`` (Python
and YAML) makes it fail; margin 0 has no tolerance (no warning, min_power refused), as a
baseline check without max_drop. h5's finding F5: a 4.7-point mAP drop on 8 classes with
margin 0.01 passed without a word; the test's own minimum detectable excess is 0.09.
Includes a simulation of the stated power. Cost: about 2 s (four 24-item evaluations,
4000 vectorised simulated runs, one in-process pytest session)."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.errors import InputError, PowerWarning
from retrieval_checks.gates import _family
from retrieval_checks.stats._power import detectable_drop, power_at, power_of, units_needed

pytest_plugins = ["pytester"]


def _models(seed_bad: int = 104):
    """h5's repro: 8 classes of 3; the candidate's noise 0.75 against the release's 0.5."""
    rng = np.random.default_rng(5)
    centers = rng.normal(size=(8, 16))
    y = np.repeat(np.arange(8), 3)
    release = centers[y] + rng.normal(size=(24, 16)) * 0.5
    candidate = centers[y] + np.random.default_rng(seed_bad).normal(size=(24, 16)) * 0.75
    return release, candidate, y


@pytest.fixture(scope="module")
def comparison():
    release, candidate, y = _models()
    base = rc.evaluate(release, query_labels=y, metrics=["map"])
    cand = rc.evaluate(candidate, query_labels=y, metrics=["map"])
    return rc.compare(cand, base, "map")  # -0.047 [-0.112, +0.018] over 8 classes


def _events(*args, **kwargs):
    seen = []
    with rc.gates.listening(seen.append), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            rc.assert_not_worse(*args, **kwargs)
            error = None
        except AssertionError as exc:
            error = str(exc)
    return seen[-1].to_dict(), error, [w for w in caught if w.category is PowerWarning]


def test_an_underpowered_significant_comparison_warns(comparison):
    c = comparison
    assert c.difference < -0.04 and c.high > 0  # a real drop, not significant on 8 classes
    record, error, power_warnings = _events(c, margin=0.01)
    assert error is None and record["passed"]  # it passes, as the rule says ...
    [w] = power_warnings  # ... but not silently
    text = str(w.message)
    assert "assert_not_worse: map cannot see the drop it gates" in text
    assert f"about {record['units_needed']} classes would be needed" in text
    assert "Set min_power to fail instead" in text
    level = (1 - c.confidence) / 2
    excess = detectable_drop(c.se, level=level, power=0.8, dof=c.dof)
    assert excess == pytest.approx(0.0895, abs=0.002)  # h5's "about 0.09"
    # the same routine as a baseline check, on the excess over the margin
    assert record["power_test"] == "drop" and record["power_level"] == pytest.approx(level)
    assert record["mdd"] == pytest.approx(0.01 + excess)
    assert record["power_tolerance"] == pytest.approx(0.02) and record["power_null"] == 0.01
    assert record["power_at_tolerance"] == pytest.approx(
        power_at(0.01, c.se, level=level, dof=c.dof)
    )
    assert record["units_needed"] == units_needed(c.se, c.n, 0.01, level=level, power=0.8, t=True)
    assert record["underpowered"] is True and record["units_needed"] > c.n
    assert "power to detect a drop of 0.02 (the margin 0.01 exceeded by 0.01)" in text


def test_min_power_fails_an_underpowered_significant_comparison(comparison):
    record, error, power_warnings = _events(comparison, margin=0.01, min_power=0.8)
    assert not record["passed"] and record["power_required"] is True
    assert not power_warnings  # a failure, not a warning as well
    assert error.startswith("map: gate is underpowered: candidate")
    assert "not shown to be worse than baseline" in error
    assert "underpowered (min_power 0.8)" in error and "classes would be needed" in error


def test_a_comparison_that_can_see_its_tolerance_says_nothing(comparison):
    record, error, power_warnings = _events(comparison, margin=0.1, min_power=0.8)
    assert error is None and record["passed"] and not power_warnings
    assert record["underpowered"] is False and record["power_at_tolerance"] >= 0.8


def test_margin_zero_has_no_tolerance_like_a_baseline_check_without_max_drop(comparison):
    record, error, power_warnings = _events(comparison)  # margin 0: no drop tolerated
    assert error is None and not power_warnings and record["power_tolerance"] is None
    with pytest.raises(InputError, match="margin is 0"):
        rc.assert_not_worse(comparison, min_power=0.8)
    with pytest.raises(InputError, match="give one of them"):
        rc.assert_not_worse(comparison, margin=0.01, power=0.9, min_power=0.8)
    with pytest.raises(InputError, match="for 80% power write 0.8"):
        rc.assert_not_worse(comparison, margin=0.01, min_power=80)


def test_min_power_on_identical_runs_fails_its_power_cannot_be_estimated():
    release, _, y = _models()
    base = rc.evaluate(release, query_labels=y, metrics=["map"])
    c = rc.compare(base, base, "map")  # no spread of the differences: power unknown
    with pytest.raises(AssertionError, match="the power cannot be estimated"):
        rc.assert_not_worse(c, margin=0.01, min_power=0.8)
    rc.assert_not_worse(c, margin=0.01)  # without the requirement: passes, no power stated


def test_the_stated_power_is_the_share_of_drops_it_fails():
    """4000 runs of 8 normal paired differences whose true drop is twice the margin:
    the share the significant rule fails (upper end of the 95% t interval of the
    improvement below -margin) is the stated power_at_tolerance, within 2.5 points."""
    rng = np.random.default_rng(11)
    n, sd, runs, margin = 8, 0.08, 4000, 0.03
    se = sd / math.sqrt(n)
    t = float(__import__("scipy.stats").stats.t.ppf(0.975, n - 1))
    diffs = rng.normal(-2 * margin, sd, size=(runs, n))
    hi = diffs.mean(1) + t * diffs.std(1, ddof=1) / math.sqrt(n)
    stated = power_of(
        se, n, level=0.025, dof=n - 1, tolerance=2 * margin, null=margin
    ).power_at_tolerance
    assert float(np.mean(hi < -margin)) == pytest.approx(stated, abs=0.025)


def test_a_family_keeps_the_margin_when_it_recomputes_the_power(comparison):
    """Under a correction the power is recomputed at level / m from the record: the
    margin (the test's null) stays in the mdd and out of the power's noncentrality."""
    record, _, _ = _events(comparison, margin=0.01)
    _family._corrected_power(record, 3, "holm")
    c = comparison
    level = (1 - c.confidence) / 2 / 3
    assert record["mdd"] == pytest.approx(
        0.01 + detectable_drop(c.se, level=level, power=0.8, dof=c.dof)
    )
    assert record["power_at_tolerance"] == pytest.approx(
        power_at(0.01, c.se, level=level, dof=c.dof)
    )
    assert "cannot see the drop it gates under holm" in record["power_note"]


# ------------------------------------------------------------------------- in a suite
SUITE = (
    "datasets:\n  small: {queries: set.npz}\n"
    "models:\n  release: {embeddings: {small: release.npz}}\n"
    "  candidate: {embeddings: {small: candidate.npz}}\n"
    "checks:\n  - {metric: map, dataset: small, models: [candidate], compare: COMPARE}\n"
)


def _suite(pytester, compare: str):
    release, candidate, y = _models()
    for name, x in (("set", release), ("release", release), ("candidate", candidate)):
        np.savez(pytester.path / f"{name}.npz", embeddings=x.astype(np.float32), labels=y)
    pytester.path.joinpath("rc_stats.yaml").write_text(SUITE.replace("COMPARE", compare))
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-history=none", "--rc-json=g.json", "-W", "default"
    )
    return result, json.loads((pytester.path / "g.json").read_text())["gates"][0]


def test_a_suite_compare_warns_and_fails_with_min_power(pytester):
    result, gate = _suite(pytester, "{baseline: release, margin: 0.01}")  # h5's cmp_sig
    result.assert_outcomes(passed=1)
    assert gate["underpowered"] is True and gate["units_needed"] > gate["power_units"] == 8
    assert "PowerWarning" in "\n".join(result.outlines)
    result, gate = _suite(pytester, "{baseline: release, margin: 0.01, min_power: 0.8}")
    result.assert_outcomes(failed=1)
    assert "underpowered (min_power 0.8)" in "\n".join(result.outlines)


def test_a_suite_refuses_min_power_on_a_significant_compare_without_margin(tmp_path):
    release, candidate, y = _models()
    for name, x in (("set", release), ("release", release), ("candidate", candidate)):
        np.savez(tmp_path / f"{name}.npz", embeddings=x.astype(np.float32), labels=y)
    p = tmp_path / "rc_stats.yaml"
    p.write_text(SUITE.replace("COMPARE", "{baseline: release, min_power: 0.8}"))
    with pytest.raises(rc.SuiteError) as info:
        rc.load_suite(p)
    assert info.value.field == "checks[0].compare.min_power" and info.value.line == 7
    assert "needs a margin" in str(info.value)
    p.write_text(SUITE.replace("COMPARE", "{baseline: release, margin: 0.01, min_power: 0.8}"))
    kw = rc.load_suite(p).checks[0].gate_kwargs("assert_not_worse")
    assert kw == {"margin": 0.01, "min_power": 0.8}


# ten comparisons of 50 paired queries with no difference at all; each tolerates a drop of
# 3.1 standard errors, so it must see a drop of 6.2: power about 0.86 at its own one-sided
# level 0.025 (min_power 0.8 holds), about 0.6 at 0.025 / 10 under holm (it does not)
FAMILY = """
import math
import pytest
import retrieval_checks as rc
from scipy import stats

SE, N = 0.01, 50
HALF = float(stats.t.ppf(0.975, N - 1)) * SE
C = rc.Comparison("map", 0.5, 0.5, 0.0, -HALF, HALF, 0.95, 1.0, 0.5, "paired t over queries",
                  N, "queries", True, n_used=N, n_skipped=0, se=SE, dof=N - 1)

@pytest.mark.parametrize("k", range(10))
def test_gate(k):
    rc.assert_not_worse(C, margin=3.1 * SE, min_power=0.8)
"""


@pytest.mark.parametrize("correction", [None, "holm"])
def test_a_comparisons_min_power_is_judged_at_the_family_level(pytester, correction):
    pytester.makepyfile(test_gates=FAMILY)
    args = ["--rc-correction", correction] if correction else []
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-json=g.json", "--rc-history=none", *args
    )
    gates = json.loads((pytester.path / "g.json").read_text())["gates"]
    if correction is None:
        result.assert_outcomes(passed=10)
        assert all(g["power_at_tolerance"] > 0.8 and not g["underpowered"] for g in gates)
        return
    result.assert_outcomes(failed=10)
    for g in gates:
        assert g["power_level"] == pytest.approx(0.0025) and g["power_null"] == pytest.approx(0.031)
        assert g["mdd"] > 0.031 and g["power_at_tolerance"] < 0.8 and g["underpowered"] is True
        assert g["decision"] == "failed after holm: underpowered"
