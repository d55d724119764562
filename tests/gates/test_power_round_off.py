"""Paired differences that are all equal leave a standard error of round-off (about
1e-17), not 0 (h14): the power computed on it came out NaN, ``NaN < min_power`` was
False, and ``min_power`` passed at some sample sizes and failed at others. Round-off is
now no spread (``stats._power.spread``), whose rule is the same at every size (the power
cannot be estimated: a requirement on it fails), and a power that cannot be computed is
never enough."""

from __future__ import annotations

import math

import pytest

import retrieval_checks as rc
from retrieval_checks.stats._power import Power, power_at, spread


def _runs(n: int, rank: int):
    score = {1: 1.0, 2: 0.8, 3: 0.6}[rank]  # every query: its relevant document at rank
    run = {f"q{i}": {"rel": score, "n1": 0.9, "n2": 0.7} for i in range(n)}
    return rc.evaluate_run(run, {f"q{i}": {"rel": 1} for i in range(n)}, metrics=["mrr"])


@pytest.mark.parametrize("n", [3, 10, 40])
def test_min_power_on_equal_paired_differences_fails_at_every_size(n):
    base, cand = _runs(n, 2), _runs(n, 3)  # each query: mrr 1/2 -> 1/3
    with pytest.raises(AssertionError, match="power cannot be estimated"):
        rc.assert_no_regression(
            rc.baseline_record(cand, "mrr"),
            rc.baseline_record(base, "mrr"),
            max_drop=0.2,
            significant=True,
            min_power=0.8,
        )
    with pytest.raises(AssertionError, match="power cannot be estimated"):
        rc.assert_not_worse(rc.compare(cand, base, "mrr"), margin=0.2, min_power=0.8)


def test_round_off_is_no_spread_and_a_far_noncentrality_has_a_power():
    assert spread(1e-17, 1 / 6) == 0.0 and spread(1e-3, 1 / 6) == 1e-3
    assert power_at(0.03, 1e-17, level=0.05, dof=9) == 1.0  # was NaN
    nan = Power(math.nan, 0.8, 0.05, 0.01, 10, "queries", 9, 0.02, math.nan)
    assert nan.underpowered  # a power that could not be computed is not enough


def test_intervals_of_round_off_width_have_no_spread_either():
    """The z test from two intervals (records without per-unit values): intervals of
    round-off width gave a power of 1 where width 0 gave 'cannot be estimated' (h16)."""
    eps = 4e-16  # a few ulps of 0.5: round-off, not data

    def record(v):
        return {
            "metric": "map",
            "value": v,
            "interval": [v - eps, v + eps],
            "unit": "queries",
            "confidence": 0.95,
            "n": 50,
        }

    with pytest.raises(AssertionError, match="power cannot be estimated"):
        rc.assert_no_regression(
            record(0.48), record(0.5), max_drop=0.05, significant=True, min_power=0.8
        )
