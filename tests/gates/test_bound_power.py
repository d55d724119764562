"""The power of the gates that pass only when an interval's bound shows the difference
within a tolerance (issue 28: every significance-gated comparison reports its power):
assert_not_worse(rule="non_inferior") and assert_gap_below(on="upper") state their
chance of passing a model with nothing wrong (an unchanged candidate, no gap), the
smallest tolerance they show with the stated power and the units it would need; they
warn when underpowered and fail under min_power; power where a rule has no test is
refused. Includes a simulation of the non-inferiority pass rate against the stated
power. Cost: under 1 s (two 30-item evaluations, 4000 vectorised simulated runs)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.errors import InputError, PowerWarning
from retrieval_checks.stats import Gap
from retrieval_checks.stats._power import detectable_drop, power_at


@pytest.fixture(scope="module")
def comparison():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 3)
    x = rng.normal(size=(10, 8))[y] + 0.3 * rng.normal(size=(30, 8))
    base = rc.evaluate(x, query_labels=y, metrics=["map"])
    cand = rc.evaluate(x + 0.05 * rng.normal(size=x.shape), query_labels=y, metrics=["map"])
    return rc.compare(cand, base, "map")  # paired t over 10 classes, interval about +-0.02


def _events(fn, *args, **kwargs):
    seen = []
    with rc.gates.listening(seen.append), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn(*args, **kwargs)
            error = None
        except AssertionError as exc:
            error = str(exc)
    return seen[-1].to_dict(), error, [w for w in caught if w.category is PowerWarning]


def test_non_inferiority_states_its_power_and_warns_when_it_cannot_pass(comparison):
    c = comparison
    record, error, power_warnings = _events(
        rc.assert_not_worse, c, margin=0.01, rule="non_inferior"
    )
    level = (1 - c.confidence) / 2
    assert record["power_test"] == "non_inferiority" and record["power_level"] == level
    assert record["power_at_tolerance"] == pytest.approx(
        power_at(0.01, c.se, level=level, dof=c.dof)
    )
    assert record["mdd"] == pytest.approx(detectable_drop(c.se, level=level, power=0.8, dof=c.dof))
    assert record["underpowered"] and record["units_needed"] > c.n
    [w] = power_warnings
    assert "cannot show non-inferiority within its margin even for an unchanged model" in str(
        w.message
    )
    assert f"about {record['units_needed']} classes would be needed" in str(w.message)
    assert error is not None and "power: smallest margin shown for an unchanged model" in error


def test_min_power_fails_a_non_inferiority_gate_that_passes_by_luck(comparison):
    c = comparison
    margin = -min(c.low, c.high) + 0.001  # just shown within the margin this time
    record, error, _ = _events(rc.assert_not_worse, c, margin=margin, rule="non_inferior")
    assert error is None and record["passed"]  # warned only...
    assert record["underpowered"]
    record, error, _ = _events(
        rc.assert_not_worse, c, margin=margin, rule="non_inferior", min_power=0.8
    )
    assert not record["passed"]  # ...and failed under min_power, naming the classes needed
    assert error.startswith("map: gate is underpowered: candidate")
    assert "underpowered (min_power 0.8)" in error and "classes would be needed" in error
    record, error, warned = _events(rc.assert_not_worse, c, margin=0.2, rule="non_inferior")
    assert error is None and not record["underpowered"] and not warned


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rule": "value", "min_power": 0.8}, "rule='value' has no test"),
        ({"rule": "value", "power": 0.9}, "rule='value' has no test"),
        ({"rule": "non_inferior", "min_power": 80}, "for 80% power write 0.8"),
        ({"rule": "non_inferior", "power": 0.9, "min_power": 0.8}, "give one of them"),
    ],
)
def test_power_where_the_rule_has_none_is_refused(comparison, kwargs, message):
    with pytest.raises(InputError, match=message):
        rc.assert_not_worse(comparison, margin=0.05, **kwargs)


def test_non_inferiority_pass_rate_matches_the_stated_power():
    """4000 unchanged candidates on 30 units: the share that the non-inferiority rule
    passes equals the power stated for the margin (the noncentral t is exact for normal
    differences), within 2.5 points; the smallest margin at 80% passes 80%."""
    rng = np.random.default_rng(7)
    n, sd, runs = 30, 0.1, 4000
    se = sd / math.sqrt(n)
    from scipy import stats as st

    t = st.t.ppf(0.975, n - 1)
    diffs = rng.normal(0.0, sd, size=(runs, n))
    lo = diffs.mean(1) - t * diffs.std(1, ddof=1) / math.sqrt(n)
    for margin in (0.03, detectable_drop(se, level=0.025, power=0.8, dof=n - 1), 0.06):
        rate = float(np.mean(lo > -margin))
        assert rate == pytest.approx(power_at(margin, se, level=0.025, dof=n - 1), abs=0.025)
    assert float(np.mean(lo > -detectable_drop(se, level=0.025, power=0.8, dof=n - 1))) == (
        pytest.approx(0.8, abs=0.025)
    )


def _gap(value, low, high, n=(40, 25)):
    return Gap(
        "map",
        value,
        low,
        high,
        0.95,
        "percentile bootstrap over classes",
        0.9,
        0.9 - value,
        n[0],
        n[1],
        "classes",
    )


def test_gap_gate_states_its_power_and_fails_under_min_power():
    gap = _gap(0.0188, -0.04, 0.0776)  # se about 0.03: a no-gap model passes below 0.08 76%
    record, error, [w] = _events(rc.assert_gap_below, gap, 0.08)
    assert error is None and record["passed"] and record["power_test"] == "gap"
    se = (0.0776 + 0.04) / (2 * 1.959963984540054)
    assert record["power_at_tolerance"] == pytest.approx(power_at(0.08, se, level=0.025))
    assert record["power_units"] == 25 and record["underpowered"]
    assert "cannot show the gap below its limit even for a model with no gap" in str(w.message)
    record, error, _ = _events(rc.assert_gap_below, gap, 0.08, min_power=0.8)
    assert not record["passed"] and error.startswith("map gap (train - test) gate is underpowered")
    assert "classes would be needed" in error
    record, error, warned = _events(rc.assert_gap_below, gap, 0.2, min_power=0.8)
    assert error is None and not warned and not record["underpowered"]


def test_gap_power_on_the_value_is_refused():
    with pytest.raises(InputError, match="on='value' has no test"):
        rc.assert_gap_below(_gap(0.01, -0.02, 0.04), 0.1, on="value", min_power=0.8)


def test_a_warning_raised_as_an_error_fails_the_gate_in_its_record(comparison):
    """``-W error::retrieval_checks.PowerWarning`` (docs/power.md: fail every underpowered
    gate of a run) makes the test fail; the gate's record must say FAIL too, not PASS in
    the table, JSON and history beside a failed test (review finding 8). The same for
    every gate that warns (non-inferiority, gap, threshold gates, baselines)."""
    from retrieval_checks.gates._baselines import assert_no_regression

    rng = np.random.default_rng(0)
    base = 0.2 + 0.6 * rng.random(200)
    cur = np.clip(base + rng.normal(0, 0.1, 200), 0, 1)

    def units(v):
        return {
            "metric": "map",
            "value": float(np.mean(v)),
            "n": len(v),
            "unit": "queries",
            "units_are": "queries",
            "units": {f"q{i}": [float(x), 1] for i, x in enumerate(v)},
        }

    pairs = np.eye(6, dtype=np.float32)  # three classes of two near items (not equal rows:
    pairs[[0, 2, 4], [1, 3, 5]] = 0.5  # two equal rows a class are refused as stacked twice)
    few = rc.evaluate(pairs, query_labels=[0, 0, 1, 1, 2, 2], metrics=["map"])
    cases = [
        (PowerWarning, lambda: rc.assert_not_worse(comparison, margin=0.02, rule="non_inferior")),
        (PowerWarning, lambda: rc.assert_gap_below(_gap(0.0188, -0.04, 0.0776), 0.08)),
        (
            PowerWarning,
            lambda: assert_no_regression(units(cur), units(base), max_drop=0.005, significant=True),
        ),
        (rc.IntervalWarning, lambda: rc.assert_map_at_least(few, 0.1, on="interval")),
    ]
    for category, gate in cases:
        seen = []
        with rc.gates.listening(seen.append), warnings.catch_warnings():
            warnings.simplefilter("error", category)
            with pytest.raises(category):
                gate()
        record = seen[-1].to_dict()
        assert record["passed"] is False, record
        assert any("raised as an error" in w for w in record["warnings"]), record["warnings"]
        seen.clear()
        with rc.gates.listening(seen.append), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gate()  # the same gate without the filter passes, and says so
        assert seen[-1].to_dict()["passed"] is True
