"""Many significance-gated checks in one run (issue 28): Holm and Benjamini-Hochberg
adjusted p-values, the family-wise false-failure rate of 40 gates on an unchanged
model (about 87% without a correction, at most the level with Holm), the end-of-run
decision of deferred checks, and the power a baseline gate reports and warns about.
Cost: about 2 s (a vectorised simulation of 3000 runs of 40 gates)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from shared_setup import unheard

import retrieval_checks as rc
from retrieval_checks.gates import (
    _family,
    adjust_pvalues,
    check_correction,
    decide_family,
    family_line,
    set_session_correction,
)
from retrieval_checks.gates._baselines import assert_no_regression


@pytest.fixture(autouse=True)
def _alone():
    """These gates run outside any pytest session's family and unheard by the plugin
    running this test suite (its session would otherwise decide their deferred checks)."""
    with unheard():
        yield


def test_holm_and_bh_adjusted_p_values():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005 0.01 0.03 0.04 -> x4 x3 x2 x1 = 0.02 0.03 0.06 0.04 -> running max
    assert adjust_pvalues(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: sorted p * m / rank = 0.02 0.02 0.04 0.04 -> running min from the top
    assert adjust_pvalues(p, "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust_pvalues(p, "none") == pytest.approx(p)
    assert adjust_pvalues([0.9, 0.8], "holm") == pytest.approx([1.0, 1.0])  # 2 x 0.8 capped at 1
    assert adjust_pvalues([0.9, 0.3], "holm") == pytest.approx([0.9, 0.6])
    assert adjust_pvalues([], "holm").size == 0


@pytest.mark.parametrize("bad", [[0.1, float("nan")], [1.5], [-0.01]])
def test_adjust_refuses_what_is_not_a_p_value(bad):
    with pytest.raises(rc.InputError, match="not a p-value"):
        adjust_pvalues(bad, "holm")


@pytest.mark.parametrize("name", ["Holm", "bonferroni", "", None, 1, "hochberg"])
def test_unknown_correction_names_the_field_and_the_choices(name):
    with pytest.raises(rc.InputError, match="correction=.*holm.*bh.*none"):
        check_correction(name)
    with pytest.raises(rc.InputError, match="method="):
        adjust_pvalues([0.1], name)


def test_family_wise_false_failures_of_40_gates_on_an_unchanged_model():
    """40 significance-gated checks at 5%, each a paired t test on 30 queries of an
    unchanged model: without a correction about 1 - 0.95^40 = 87% of runs fail some
    check; with Holm at most 5%; BH (which then equals any-rejection of Holm) too."""
    from scipy import stats

    runs, m, n, level = 3000, 40, 30, 0.05
    rng = np.random.default_rng(28)
    diffs = rng.normal(0.0, 0.1, size=(runs, m, n))  # no true change anywhere
    t = diffs.mean(axis=2) / (diffs.std(axis=2, ddof=1) / math.sqrt(n))
    p = stats.t.cdf(t, n - 1)  # one-sided p of "worse", as the gate computes it
    raw = (p < level).any(axis=1).mean()
    # Holm rejects some check when m * min p < level; BH when some p_(i) <= i * level / m
    # (vectorised here; equal to adjust_pvalues' verdicts, checked on a sample of runs)
    holm_any = m * p.min(axis=1) < level
    bh_any = (np.sort(p, axis=1) <= np.arange(1, m + 1) * level / m).any(axis=1)
    for i in range(300):
        assert (adjust_pvalues(p[i], "holm") < level).any() == holm_any[i]
        assert (adjust_pvalues(p[i], "bh") <= level).any() == bh_any[i]
    holm, bh = holm_any.mean(), bh_any.mean()
    assert abs(raw - (1 - 0.95**40)) < 0.03, raw
    assert holm <= level + 0.01, holm  # Monte-Carlo error ~0.35 points
    assert bh <= level + 0.01, bh


def _record(test, p, beyond=True, deferred=True, correction="holm", level=0.05):
    r = {
        "test": test,
        "metric": "map",
        "passed": True,
        "family": True,
        "p_raw": p,
        "significance_level": level,
        "beyond_tolerance": beyond,
        "correction": correction,
    }
    if deferred:
        r["decision"] = "deferred"
    return r


def test_decide_family_fails_what_holm_rejects_and_keeps_the_rest():
    recs = [
        _record("a", 0.001),  # 0.001 * 4 = 0.004 < 0.05: fails
        _record("b", 0.03),  # third smallest: 0.03 * 2 = 0.06: passes after holm
        _record("c", 0.5, beyond=True, deferred=False),
        _record("d", 0.0001, beyond=False, deferred=False),  # within the tolerance
        {"test": "e", "metric": "map", "passed": False},  # not in the family
    ]
    [fam] = decide_family(recs)
    assert fam["size"] == 4 and fam["correction"] == "holm"
    assert [r["test"] for r in fam["failed"]] == ["a"]
    assert recs[0]["passed"] is False and recs[0]["decision"] == "failed after holm"
    assert recs[1]["passed"] is True and recs[1]["decision"] == "passed after holm"
    assert recs[1]["p_adjusted"] == pytest.approx(0.06)
    assert "p_adjusted" not in recs[4]
    line = family_line(fam)
    assert "family of 4 significance-gated checks: family-wise error rate 0.05 (holm)" in line
    assert "1 failed after the correction" in line


def test_family_line_without_correction_states_the_chance_of_a_red_build():
    recs = [_record(str(i), 0.5, deferred=False, correction="none") for i in range(40)]
    [fam] = decide_family(recs)
    assert "up to 87%" in family_line(fam) and "--rc-correction holm" in family_line(fam)


def _units(vals):
    return {
        "metric": "map",
        "value": float(np.mean(vals)),
        "n": len(vals),
        "unit": "queries",
        "units_are": "queries",
        "units": {f"q{i}": [float(v), 1] for i, v in enumerate(vals)},
    }


def _pair(drop, n=200, sd=0.1, seed=0):
    rng = np.random.default_rng(seed)
    base = 0.2 + 0.6 * rng.random(n)
    cur = np.clip(base - drop + rng.normal(0, sd, n), 0, 1)
    return _units(cur), _units(base)


def test_baseline_gate_warns_when_it_cannot_see_its_tolerance():
    cur, base = _pair(0.0)
    events = []
    with rc.gates.listening(events.append), pytest.warns(rc.PowerWarning, match="queries would"):
        ch = assert_no_regression(cur, base, max_drop=0.005, significant=True)
    assert ch.power.underpowered
    ev = events[-1].to_dict()
    assert ev["mdd"] == pytest.approx(ch.power.mdd) and ev["units_needed"] > 200
    assert ev["power"] == 0.8 and ev["underpowered"] is True and ev["p_raw"] == ch.p_worse
    assert any("minimum detectable drop" in w for w in ev["warnings"])
    with pytest.raises(AssertionError, match="underpowered"):
        assert_no_regression(cur, base, max_drop=0.005, significant=True, min_power=0.8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", rc.PowerWarning)  # well powered: no warning
        assert_no_regression(cur, base, max_drop=0.05, significant=True)


def test_correction_outside_a_session_is_refused():
    cur, base = _pair(0.05)
    with pytest.raises(rc.InputError, match="correction='holm'.*pytest session"):
        assert_no_regression(cur, base, max_drop=0.005, significant=True, correction="holm")


def _recorder(events):
    """A listener that records events and claims deferred ones, as the plugin does."""

    def listen(event):
        events.append(event)
        if event.extra.get("decision") == "deferred":
            rc.gates.claim(event)

    return listen


def test_a_significant_drop_is_deferred_to_the_session_correction():
    cur, base = _pair(0.05)
    events = []
    set_session_correction("holm")
    try:
        with rc.gates.listening(_recorder(events)):
            assert_no_regression(cur, base, max_drop=0.03, significant=True)  # no raise
            # a failure on anything but significance is never deferred
            with pytest.raises(AssertionError, match="underpowered|regressed"):
                assert_no_regression(cur, base, max_drop=0.001, significant=True, min_power=0.99999)
            with pytest.raises(AssertionError, match="regressed"):  # not significance-gated
                assert_no_regression(cur, base, max_drop=0.005)
    finally:
        set_session_correction(None)
    first = events[0].to_dict()
    assert first["passed"] is True and first["decision"] == "deferred"
    assert first["correction"] == "holm" and first["beyond_tolerance"] is True
    assert "decision" not in events[1].to_dict() and events[1].passed is False
    with pytest.raises(AssertionError, match="regressed"):  # the session is closed again
        assert_no_regression(cur, base, max_drop=0.03, significant=True)


def _comparisons(shift, n=90, seed=0, method="t"):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n, 8)).astype(np.float32)
    labels = np.arange(n) % 30
    g = q + rng.normal(scale=1.0, size=q.shape).astype(np.float32)
    g2 = g + rng.normal(scale=shift, size=q.shape).astype(np.float32)
    a = rc.evaluate(q, g, query_labels=labels, gallery_labels=labels, metrics=["map"])
    b = rc.evaluate(q, g2, query_labels=labels, gallery_labels=labels, metrics=["map"])
    return rc.compare(b, a, "map", method=method)


@pytest.mark.parametrize("margin", [0.0, 0.01])
def test_assert_not_worse_reports_its_power_and_a_p_value_that_decides_like_it(margin):
    events = []
    for seed, shift in enumerate((0.02, 0.05, 0.1, 0.2, 0.4, 0.8)):
        c = _comparisons(shift, seed=seed)
        with rc.gates.listening(events.append):
            try:
                rc.assert_not_worse(c, margin=margin)
                failed = False
            except AssertionError as e:
                failed = True
                assert "power: minimum detectable drop" in str(e)
        ev = events[-1].to_dict()
        assert ev["family"] is True and ev["significance_level"] == 0.05
        assert (ev["p_raw"] < 0.05) == failed, (seed, ev["p_raw"])
        assert ev["mdd"] > margin and ev["power"] == 0.8
    assert any(not e.passed for e in events) and any(e.passed for e in events)


def test_assert_not_worse_is_deferred_under_a_session_correction():
    c = _comparisons(1.5)
    events = []
    set_session_correction("holm")
    try:
        with rc.gates.listening(_recorder(events)):
            rc.assert_not_worse(c)  # significantly worse: decided at the session's end
            with pytest.raises(AssertionError):
                rc.assert_not_worse(c, rule="value")  # no significance test: decided now
    finally:
        set_session_correction(None)
    first = events[0].to_dict()
    assert first["decision"] == "deferred" and first["passed"] is True and first["p_raw"] < 0.05
    assert "family" not in events[1].to_dict()


def test_a_deferred_check_nobody_records_is_decided_at_once():
    """Under a session's correction, a check no session records (a gate in a fixture, a
    thread) fails at its own level instead of passing unseen."""
    cur, base = _pair(0.05)
    c = _comparisons(1.5)
    set_session_correction("holm")
    try:
        with pytest.raises(AssertionError, match="no pytest session recorded this deferred"):
            assert_no_regression(cur, base, max_drop=0.03, significant=True)
        with pytest.raises(AssertionError, match="no pytest session recorded this deferred"):
            rc.assert_not_worse(c)
    finally:
        set_session_correction(None)


def test_an_expected_failure_does_not_turn_the_run_red():
    recs = [_record("a", 0.001), {**_record("b", 0.002), "xfail": True}]
    [fam] = decide_family(recs)
    assert [r["test"] for r in fam["failed"]] == ["a"]
    assert recs[1]["passed"] is False and recs[1]["decision"] == "failed after holm"


def test_a_comparison_of_identical_runs_claims_no_power():
    """Zero spread of the paired differences: the comparison's test reports no power
    (unknown), never 'detects a drop of the margin with 80% power'."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(30), 4)
    X = (rng.normal(size=(30, 8))[y] + rng.normal(size=(120, 8))).astype(np.float32)
    a = rc.evaluate(X, query_labels=y, metrics=["map"])
    c = rc.compare(a, a, "map")
    assert _family.comparison_test(c, 0.01, power=0.8).power is None
    moved = rc.evaluate(
        X + 0.3 * rng.normal(size=X.shape).astype(np.float32), query_labels=y, metrics=["map"]
    )
    assert _family.comparison_test(rc.compare(moved, a, "map"), 0.01, power=0.8).power.mdd > 0.01
