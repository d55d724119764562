"""Drops against baselines: direction, tolerances, significance; baseline records and files."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import retrieval_checks as rc
from retrieval_checks.gates import (
    BaselineFile,
    assert_no_regression,
    baseline_record,
    measure_change,
    records_differ,
)


def _pair(seed=0, noise=1.0, n_classes=15, per_class=6):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), per_class)
    centers = rng.normal(size=(n_classes, 8))
    x = centers[y] + noise * rng.normal(size=(y.size, 8))
    worse = x + 0.6 * rng.normal(size=x.shape)
    metrics = ["map", "hit_rate@1", "grouped_recall@1", "recall_at_precision@0.5"]
    a = rc.evaluate(x.astype(np.float32), query_labels=y, metrics=metrics, group_size=3)
    b = rc.evaluate(worse.astype(np.float32), query_labels=y, metrics=metrics, group_size=3)
    return a, b


def test_drop_direction_and_tolerances():
    ch = measure_change("map", {"value": 0.80}, {"value": 0.78}, max_drop=0.01)
    assert ch.failed and ch.drop == pytest.approx(0.02) and ch.relative_drop == pytest.approx(0.025)
    assert not measure_change("map", {"value": 0.80}, {"value": 0.78}, max_drop=0.03).failed
    assert not measure_change(
        "map", {"value": 0.80}, {"value": 0.78}, max_relative_drop=0.03
    ).failed
    assert measure_change("map", {"value": 0.80}, {"value": 0.78}, max_relative_drop=0.02).failed
    # lower is better for ranks: a rising median rank is the drop
    ch = measure_change("medr", {"value": 3.0}, {"value": 5.0}, max_drop=1)
    assert ch.failed and ch.drop == 2.0 and not ch.higher_is_better
    assert not measure_change("medr", {"value": 5.0}, {"value": 3.0}).failed
    assert measure_change(
        "map difference", {"value": 0.1}, {"value": 0.0}
    ).failed  # recorded comparisons
    assert measure_change(
        "map gap", {"value": 0.01}, {"value": 0.05}
    ).failed  # a growing gap is worse
    with pytest.raises(rc.InputError, match="direction"):
        measure_change("my_score", {"value": 1.0}, {"value": 0.5})
    assert (
        measure_change("my_score", {"value": 1.0}, {"value": 0.5}, direction="lower").drop == -0.5
    )


def test_interval_significance_decides_the_gate():
    z = stats.norm.ppf(0.975)
    b = {"value": 0.80, "low": 0.80 - 0.02 * z, "high": 0.80 + 0.02 * z}
    c = {"value": 0.75, "low": 0.75 - 0.03 * z, "high": 0.75 + 0.03 * z}
    p = stats.norm.sf(0.05 / np.hypot(0.02, 0.03))
    ch = measure_change("map", b, c, max_drop=0.01, significant=True)
    assert (
        ch.p_worse == pytest.approx(p)
        and p > 0.05
        and not ch.failed
        and "not significant" in ch.reasons[0]
    )
    tight = {"value": 0.75, "low": 0.75 - 0.005 * z, "high": 0.75 + 0.005 * z}
    b_tight = {"value": 0.80, "low": 0.80 - 0.005 * z, "high": 0.80 + 0.005 * z}
    assert measure_change("map", b_tight, tight, max_drop=0.01, significant=True).failed
    # no interval: untestable, fails on the tolerance and says so
    ch = measure_change("map", {"value": 0.8}, {"value": 0.7}, max_drop=0.01, significant=True)
    assert ch.failed and "untestable" in ch.reasons[-1]


@pytest.mark.parametrize("metric", ["map", "hit_rate@1", "grouped_recall@1"])
def test_paired_significance_from_stored_units_equals_compare(metric):
    good, bad = _pair()
    rec_good, rec_bad = baseline_record(good, metric), baseline_record(bad, metric)
    cmp = rc.compare(bad, good, metric)  # candidate = the worse model
    b = {"value": rec_good["value"], "units": {k: tuple(v) for k, v in rec_good["units"].items()}}
    c = {"value": rec_bad["value"], "units": {k: tuple(v) for k, v in rec_bad["units"].items()}}
    ch = measure_change(metric, b, c, max_drop=0.0, significant=True)
    assert ch.p_worse == pytest.approx(cmp.p_value_worse, rel=1e-9)
    assert ch.drop == pytest.approx(-cmp.difference, abs=1e-12)


def test_baseline_records_files_and_the_gate(tmp_path):
    good, bad = _pair()
    rec = baseline_record(good, "map")
    assert rec["unit"] == "queries" and rec["units_are"] == "classes" and len(rec["units"]) == 15
    assert sum(n for _, n in rec["units"].values()) == rec["n"] == 90
    assert rec["interval"][0] < rec["value"] < rec["interval"][1]
    f = BaselineFile(tmp_path / "x.baselines.yaml")
    f.update({"b::map": rec, "a::map": baseline_record(bad, "map")})
    text = (tmp_path / "x.baselines.yaml").read_text()
    assert text.startswith("# retrieval-checks baselines") and text.index("a::map") < text.index(
        "b::map"
    )
    again = BaselineFile(tmp_path / "x.baselines.yaml").get("b::map")
    # the file holds 6 significant digits: the round trip is exact at that precision
    assert (
        not records_differ(again, rec)
        and again["value"] == float(f"{rec['value']:.6g}") != rec["value"]
    )
    assert records_differ(again, baseline_record(bad, "map"))
    assert_no_regression(rec, again)  # unchanged: passes
    with pytest.raises(
        AssertionError, match=r"map regressed: .* -> .*\n  drop \+0\.\d+ .*\n.*p\(worse\)="
    ) as info:
        assert_no_regression(baseline_record(bad, "map"), rec, max_drop=0.01, significant=True)
    assert "paired t over 15 units" in str(info.value)
    # image-text and pair metrics keep value and interval only
    assert "units" not in baseline_record(good, "recall_at_precision@0.5")
