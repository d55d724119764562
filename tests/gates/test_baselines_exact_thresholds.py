"""Threshold comparisons decided exactly (issue 25, item 2): a value or a drop that
lands exactly on its threshold passes, in every gate that compares one (baselines,
measure_change, the CLI's compare, at_least / at_most, gap below, not-worse margin),
and one step of 1/n beyond it fails. Metrics over n queries move in steps of 1/n, so
the boundary is common; in floats 0.85 - 0.84 > 0.01."""

from __future__ import annotations

import math

import pytest

import retrieval_checks as rc
from retrieval_checks.gates import assert_no_regression, measure_change
from retrieval_checks.gates._exact import exceeds
from retrieval_checks.tracking import History
from retrieval_checks.tracking._cli import main


def test_the_rule_at_every_k_over_n_boundary():
    """Brute force: b = a/n, c = (a - k)/n, max_drop = k/n never exceeds (float
    subtraction and exact decimals each get about a third of these wrong), and a drop
    of one step more always does."""
    wrong, hidden = [], []
    for n in [*range(1, 40), 97, 100, 128, 1000, 4096, 10**4]:
        for a in range(0, n + 1, max(1, n // 20)):
            for k in range(0, a + 1, max(1, a // 20)):
                b, c, t = a / n, (a - k) / n, k / n
                if exceeds(b, t, minus=c):
                    wrong.append((a, k, n))
                if k < a and not exceeds(b, t, minus=(a - k - 1) / n):
                    hidden.append((a, k, n))
    assert not wrong and not hidden, (wrong[:5], hidden[:5])


def test_decimal_thresholds_as_written():
    assert 0.85 - 0.84 > 0.01  # the float bug this rule exists for
    assert not exceeds(0.85, 0.01, minus=0.84)
    assert exceeds(
        0.85, 0.01, minus=0.839999
    )  # a drop one digit past the 6-significant-digit grid is seen
    assert not exceeds(0.3, 0.1 + 0.2) and not exceeds(0.1 + 0.2, 0.3)  # equal up to float rounding
    assert exceeds(0.7, 0.7 - 1e-9) and exceeds(0.5, 0.02, minus=0.49, scale=0.49)
    assert not exceeds(0.5, 0.02, minus=0.49, scale=0.5)  # a relative drop of exactly 2%
    assert exceeds(math.nan, 0.5) and exceeds(0.5, math.nan)  # undefined never passes
    assert exceeds(math.inf, 1e300) and not exceeds(1.0, math.inf)


@pytest.mark.parametrize("n", [3, 7, 50, 100, 250, 1000])
def test_measure_change_at_the_boundary(n):
    for a in range(n // 2, n + 1, max(1, n // 25)):
        for k in (1, 2, 3):
            if k >= a:
                continue
            base, ok, bad = {"value": a / n}, {"value": (a - k) / n}, {"value": (a - k - 1) / n}
            assert not measure_change("hit_rate@1", base, ok, max_drop=k / n).failed, (a, k, n)
            assert measure_change("hit_rate@1", base, bad, max_drop=k / n).failed, (a, k, n)
            # a relative drop of exactly k/a of the baseline
            assert not measure_change("hit_rate@1", base, ok, max_relative_drop=k / a).failed, (
                a,
                k,
                n,
            )
            assert measure_change("hit_rate@1", base, bad, max_relative_drop=k / a).failed, (
                a,
                k,
                n,
            )
            # lower is better: the same boundary the other way up
            assert not measure_change(
                "medr", {"value": 1 + (a - k) / n}, {"value": 1 + a / n}, max_drop=k / n
            ).failed, (a, k, n)


def test_the_reported_case_and_its_relative_twin():
    ch = measure_change("hit_rate@1", {"value": 0.85}, {"value": 0.84}, max_drop=0.01)
    assert not ch.failed, ch.reasons
    assert measure_change("hit_rate@1", {"value": 0.85}, {"value": 0.8399}, max_drop=0.01).failed
    assert not measure_change("map", {"value": 0.5}, {"value": 0.49}, max_relative_drop=0.02).failed


def _record(value: float, n: int = 100) -> dict:
    return {
        "metric": "hit_rate@1",
        "value": value,
        "interval": None,
        "confidence": 0.95,
        "n": n,
        "unit": "queries",
    }


def test_baseline_gate_at_max_drop_passes_and_one_query_more_fails():
    for n in (100, 200, 400, 1000):
        for a in range(n // 2, n, n // 10):
            base = _record(a / n, n)
            assert_no_regression(_record((a - 2) / n, n), base, max_drop=2 / n)
            with pytest.raises(AssertionError, match="regressed"):
                assert_no_regression(_record((a - 3) / n, n), base, max_drop=2 / n)
    assert_no_regression(_record(0.84), _record(0.85), max_drop=0.01)
    assert_no_regression(_record(0.84), _record(0.85), max_relative_drop=0.01 / 0.85)


def _history(tmp_path, before: float, after: float, metric: str = "hit_rate@1") -> str:
    db = tmp_path / "h.sqlite"
    h = History(db)
    for v in (before, after):
        h.record(
            {"started": "2026-01-01T00:00:00+00:00", "git_commit": None, "git_dirty": None},
            [{"test": "t.py::test_a", "metric": metric, "value": v, "passed": True}],
            exitstatus=0,
        )
    return str(db)


def test_cli_compare_at_max_drop(tmp_path, capsys):
    db = _history(tmp_path, 0.85, 0.84)
    out = _Out()
    assert main(["--db", db, "compare", "1", "2", "--max-drop", "0.01"], out=out) == 0, out.text
    assert "0 regressed" in out.text
    (tmp_path / "b").mkdir()
    db2 = _history(tmp_path / "b", 0.85, 0.8399)
    out = _Out()
    assert main(["--db", db2, "compare", "1", "2", "--max-drop", "0.01"], out=out) == 1, out.text


class _Out:
    def __init__(self):
        self.text = ""

    def write(self, s):
        self.text += s


def _run_result(n_hits: int, n: int = 100):
    """A run of n queries, the first ``n_hits`` ranking their relevant document first."""
    run = {f"q{i}": {f"d{i}": 2.0 if i < n_hits else 1.0, f"x{i}": 1.5} for i in range(n)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(n)}
    return rc.evaluate_run(run, qrels, ["hit_rate@1"])


def test_at_least_and_at_most_on_the_threshold():
    res = _run_result(84)
    assert res.measure("hit_rate@1").value == pytest.approx(0.84)
    rc.assert_metric(res, "hit_rate@1", at_least=0.84)
    rc.assert_metric(res, "hit_rate@1", at_most=0.84)
    with pytest.raises(AssertionError):
        rc.assert_metric(_run_result(83), "hit_rate@1", at_least=0.84)


def test_gap_below_on_the_threshold():
    gap = rc.generalization_gap(_run_result(85), _run_result(84), "hit_rate@1")
    assert gap.value > 0.01  # 0.85 - 0.84 in floats
    rc.assert_gap_below(gap, 0.01, on="value")
    with pytest.raises(AssertionError):
        rc.assert_gap_below(
            rc.generalization_gap(_run_result(85), _run_result(83), "hit_rate@1"), 0.01, on="value"
        )


def test_not_worse_margin_on_the_threshold():
    cmp = rc.compare(_run_result(84), _run_result(85), "hit_rate@1", method="t")
    assert -cmp.difference > 0.01 or -cmp.difference == pytest.approx(0.01)
    rc.assert_not_worse(cmp, margin=0.01, rule="value")
    with pytest.raises(AssertionError):
        rc.assert_not_worse(
            rc.compare(_run_result(83), _run_result(85), "hit_rate@1", method="t"),
            margin=0.01,
            rule="value",
        )


def test_max_skipped_as_a_fraction_is_decided_exactly():
    """max_skipped=0.29 of 100 queries allows 29 skipped (0.29 * 100 is 28.999999999999996 in floats)."""
    assert 0.29 * 100 < 29
    base, cur = _record(0.5), {**_record(0.5, 71), "n_skipped": 29}
    with pytest.warns(RuntimeWarning, match="skipped 29 of 100"):
        assert_no_regression(cur, {**base, "n": 71}, max_skipped=0.29)
    with pytest.warns(RuntimeWarning), pytest.raises(AssertionError, match="max_skipped"):
        assert_no_regression({**cur, "n": 70, "n_skipped": 30}, {**base, "n": 70}, max_skipped=0.29)
    # the gates' own check: 29 of 100 queries without a relevant item
    run = {f"q{i}": {f"d{i}": 2.0, f"x{i}": 1.0} for i in range(100)}
    qrels = {f"q{i}": {f"d{i}": int(i >= 29)} for i in range(100)}
    res = rc.evaluate_run(run, qrels, ["hit_rate@1"], empty_queries="skip")
    with pytest.warns(RuntimeWarning, match="29"):
        rc.assert_metric(res, "hit_rate@1", at_least=0.5, max_skipped=0.29)
