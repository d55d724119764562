"""Power of significance-gated comparisons (issue 28): the minimum detectable drop
matches the detection rate of the gate's own test in simulation, the t version is
needed for few units, the units needed are the fewest that suffice, and a power
outside (0, 1) is refused. Cost: about 2 s (vectorised simulations of a few thousand
runs, each checked against the gate on a sample of runs)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.gates._regression import measure_change
from retrieval_checks.stats._power import (
    check_power,
    detectable_drop,
    power_at,
    power_of,
    units_needed,
)

RUNS = 4000  # Monte-Carlo error of a rate near 0.8: sqrt(0.8 * 0.2 / 4000) = 0.6 points


def _paired_worse(diffs: np.ndarray, level: float) -> np.ndarray:
    """The gate's paired test, vectorised over runs (rows): one-sided t of "worse" on
    per-unit differences current - baseline, units - 1 dof (as _paired_p)."""
    from scipy import stats

    n = diffs.shape[1]
    mean = diffs.mean(axis=1)
    se = diffs.std(axis=1, ddof=1) / math.sqrt(n)
    p = stats.t.cdf(mean / se, n - 1)
    return p < level


def _records(d: np.ndarray, base: float = 0.5):
    units_b = {f"q{i}": (base, 1) for i in range(d.size)}
    units_c = {f"q{i}": (float(base + x), 1) for i, x in enumerate(d)}
    return (
        {"value": base, "units": units_b, "unit": "queries"},
        {"value": float(base + d.mean()), "units": units_c},
    )


@pytest.mark.parametrize("n, power", [(30, 0.8), (12, 0.8), (60, 0.9)])
def test_detectable_drop_is_detected_with_the_stated_power(n, power):
    """At the reported MDD the gate's test detects a true drop of that size with
    probability = power (normal per-query differences; t version, exact)."""
    sd, level = 0.2, 0.05
    se = sd / math.sqrt(n)
    mdd = detectable_drop(se, level=level, power=power, dof=n - 1)
    rng = np.random.default_rng(n)
    diffs = rng.normal(-mdd, sd, size=(RUNS, n))  # current - baseline: a true drop of mdd
    detected = _paired_worse(diffs, level)
    assert abs(detected.mean() - power) < 0.03, (detected.mean(), power)
    # the vectorised test is the gate's: the gate decides the same on a sample of runs
    for i in range(40):
        b, c = _records(diffs[i])
        ch = measure_change("map", b, c, max_drop=0.0, significant=True, confidence=0.95)
        assert ch.failed == bool(detected[i]), i
        assert ch.power is not None and ch.power.mdd == pytest.approx(
            detectable_drop(ch.power.se, level=level, power=0.8, dof=n - 1)
        )


def test_binary_per_query_differences_recall_at_1():
    """Per-query differences of a 0/1 metric (recall@1: -1, 0, +1): the MDD from a
    pilot's spread is detected with the stated power within 5 points."""
    n, level, power = 300, 0.05, 0.8
    probs = np.array([0.08, 0.84, 0.08])  # worse, same, better: no change
    values = np.array([-1.0, 0.0, 1.0])
    sd = math.sqrt(float(probs @ values**2))
    mdd = detectable_drop(sd / math.sqrt(n), level=level, power=power, dof=n - 1)
    # a true drop of mdd: move probability from "better" to "worse"
    shifted = np.array([0.08 + mdd / 2, 0.84, 0.08 - mdd / 2])
    rng = np.random.default_rng(7)
    diffs = rng.choice(values, p=shifted, size=(RUNS, n))
    rate = _paired_worse(diffs, level).mean()
    assert abs(rate - power) < 0.05, rate


def test_z_version_matches_the_interval_test():
    """The test from two intervals is a z test: its MDD is (z_{1-a} + z_p) * se, and
    measure_change reports exactly that."""
    se_side, level, power = 0.01, 0.05, 0.8
    z = 1.959963984540054
    b = {"value": 0.6, "low": 0.6 - z * se_side, "high": 0.6 + z * se_side, "n": 400}
    c = {"value": 0.59, "low": 0.59 - z * se_side, "high": 0.59 + z * se_side}
    ch = measure_change("map", b, c, max_drop=0.005, significant=True)
    se = math.hypot(se_side, se_side)
    from scipy import stats

    expected = (stats.norm.isf(level) + stats.norm.ppf(power)) * se
    assert ch.power.dof is None
    assert ch.power.mdd == pytest.approx(expected, rel=1e-9)
    rng = np.random.default_rng(3)
    observed = rng.normal(expected, se, RUNS)  # observed drops at a true drop of the MDD
    rate = np.mean(stats.norm.sf(observed / se) < level)
    assert abs(rate - power) < 0.03


def test_t_version_is_needed_for_few_units():
    """With 8 units the normal formula overstates the power: the z MDD is detected
    clearly less often than 80%; the t MDD is larger and detected at 80%."""
    n, sd, level = 8, 1.0, 0.05
    se = sd / math.sqrt(n)
    mdd_t = detectable_drop(se, level=level, power=0.8, dof=n - 1)
    mdd_z = detectable_drop(se, level=level, power=0.8)
    assert mdd_t > mdd_z * 1.1
    rng = np.random.default_rng(11)
    assert _paired_worse(rng.normal(-mdd_z, sd, (RUNS, n)), level).mean() < 0.74
    assert abs(_paired_worse(rng.normal(-mdd_t, sd, (RUNS, n)), level).mean() - 0.8) < 0.03


@pytest.mark.parametrize("t", [True, False])
def test_units_needed_is_the_fewest_that_suffice(t):
    se, n, drop, level, power = 0.02, 80, 0.01, 0.05, 0.8
    need = units_needed(se, n, drop, level=level, power=power, t=t)
    sd = se * math.sqrt(n)

    def pw(k):
        return power_at(drop, sd / math.sqrt(k), level=level, dof=k - 1 if t else None)

    assert pw(need) >= power > pw(need - 1)
    assert units_needed(se, n, 0.0, level=level, power=power, t=t) is None


def test_power_report_against_the_tolerance():
    p = power_of(0.01, 80, level=0.05, dof=79, unit="queries", tolerance=0.01)
    assert p.power == 0.8 and p.underpowered
    assert p.power_at_tolerance == pytest.approx(power_at(0.01, 0.01, level=0.05, dof=79))
    assert "queries would be needed" in p.describe()
    assert p.units_needed > 80
    well = power_of(0.001, 80, level=0.05, dof=79, tolerance=0.01)
    assert not well.underpowered and well.units_needed is None


@pytest.mark.parametrize(
    "value, says",
    [
        (0, "between 0 and 1"),
        (1, "between 0 and 1"),
        (1.5, "0.8 for 80% power"),
        (80, "write 0.8"),
        (float("nan"), "between 0 and 1"),
        (True, "between 0 and 1"),
        ("0.8", "between 0 and 1"),
        (-0.2, "between 0 and 1"),
    ],
)
def test_power_outside_0_1_is_refused(value, says):
    with pytest.raises(rc.InputError, match="min_power") as e:
        check_power(value, "min_power")
    assert says in str(e.value)
    b, c = _records(np.array([0.0, -0.1, 0.05]))
    with pytest.raises(rc.InputError, match="min_power"):
        measure_change("map", b, c, max_drop=0.01, significant=True, min_power=value)


def test_min_power_needs_significance_and_a_tolerance():
    b, c = _records(np.array([0.0, -0.1, 0.05, -0.02]))
    with pytest.raises(rc.InputError, match="significant=True"):
        measure_change("map", b, c, max_drop=0.01, min_power=0.8)
    with pytest.raises(rc.InputError, match="max_drop or max_relative_drop"):
        measure_change("map", b, c, significant=True, min_power=0.8)
    with pytest.raises(rc.InputError, match="give one of them"):
        measure_change("map", b, c, max_drop=0.01, significant=True, power=0.9, min_power=0.8)
    assert measure_change("map", b, c, max_drop=0.01).power is None


def test_min_power_fails_an_underpowered_gate_and_passes_a_powered_one():
    rng = np.random.default_rng(5)
    noisy = rng.normal(0, 0.2, 40)
    b, c = _records(noisy - noisy.mean())  # no drop at all
    ch = measure_change("map", b, c, max_drop=0.01, significant=True, min_power=0.8)
    assert ch.failed and "underpowered" in ch.reasons[-1]
    assert "queries would be needed" in ch.reasons[-1]
    assert ch.power.units_needed > 40
    assert not measure_change("map", b, c, max_drop=0.01, significant=True).failed
    quiet = rng.normal(0, 0.001, 40)
    b, c = _records(quiet - quiet.mean())
    assert not measure_change("map", b, c, max_drop=0.01, significant=True, min_power=0.8).failed


def test_relative_tolerance_sets_the_drop_to_detect():
    rng = np.random.default_rng(2)
    d = rng.normal(0, 0.1, 50)
    b, c = _records(d - d.mean())
    ch = measure_change(
        "map", b, c, max_drop=0.2, max_relative_drop=0.02, significant=True
    )  # 2% of 0.5 = 0.01 < 0.2
    assert ch.power.tolerance == pytest.approx(0.01)


def test_an_interval_test_without_a_sample_size_names_no_count():
    """Two intervals and no n: the MDD is known, the units needed are not (never a
    made-up count)."""
    b = {"value": 0.6, "low": 0.55, "high": 0.65}
    c = {"value": 0.59, "low": 0.54, "high": 0.64}
    ch = measure_change("map", b, c, max_drop=0.005, significant=True)
    assert ch.power.underpowered and ch.power.units_needed is None
    assert "carry no sample size" in ch.power.describe()


def test_identical_runs_do_not_claim_infinite_power():
    """Zero spread of the paired differences (a run compared with itself) says nothing
    about the test's power: estimated from the intervals where the records have them
    (not mdd 0 / power 100%), else unknown, and a min_power requirement then fails."""
    b, c = _records(np.zeros(40))
    ch = measure_change("map", b, c, max_drop=0.01, significant=True)
    assert not ch.failed and ch.power is None and "power unknown" in ch.method
    ch = measure_change("map", b, c, max_drop=0.01, significant=True, min_power=0.8)
    assert ch.failed and "power cannot be estimated" in ch.reasons[-1]
    wide = {"low": 0.45, "high": 0.55, "confidence": 0.95, "n": 40}
    ch = measure_change(
        "map", {**b, **wide}, {**c, **wide}, max_drop=0.01, significant=True, min_power=0.8
    )
    assert ch.power.mdd > 0.01 and ch.power.power_at_tolerance < 0.8 and ch.failed
    assert "power from the two intervals" in ch.method
    narrow = {"low": 0.4999, "high": 0.5001, "confidence": 0.95, "n": 40}
    ch = measure_change(
        "map", {**b, **narrow}, {**c, **narrow}, max_drop=0.01, significant=True, min_power=0.8
    )
    assert 0 < ch.power.mdd < 0.01 and not ch.failed


def test_power_arguments_are_checked_where_they_apply():
    """power= without significant=True is refused as min_power= is; a power above 1
    gets a power-specific hint; an underpowered gate says so in its headline."""
    from retrieval_checks.gates import assert_no_regression

    b, c = _records(np.array([0.0, -0.1, 0.05, -0.02]))
    with pytest.raises(rc.InputError, match="power=0.8: .*significant=True"):
        measure_change("map", b, c, max_drop=0.01, power=0.8)
    with pytest.raises(rc.InputError) as info:
        check_power(1.5)
    assert "1.5%" not in str(info.value) and "0.8 for 80% power" in str(info.value)
    with pytest.raises(rc.InputError, match="for 80% power write 0.8"):
        check_power(80)
    rng = np.random.default_rng(5)
    noisy = rng.normal(0, 0.2, 40)
    b, c = _records(noisy - noisy.mean())
    b = {**b, "metric": "map", "interval": [0.45, 0.55], "confidence": 0.95, "n": 40}
    c = {**c, "metric": "map", "interval": [0.45, 0.55], "confidence": 0.95, "n": 40}
    with pytest.raises(AssertionError) as info:
        assert_no_regression(c, b, max_drop=0.01, significant=True, min_power=0.8)
    head = str(info.value).splitlines()[0]
    assert "underpowered" in head and "regressed" not in head
