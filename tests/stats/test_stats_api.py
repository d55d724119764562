"""Gaps, paired comparisons and intervals: values against their formulas, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import retrieval_checks as rc


def _data(seed=0, classes=300, per=5, d=24, spread=1.2):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), per)
    X = (rng.normal(size=(classes, d))[y] + spread * rng.normal(size=(classes * per, d))).astype(
        np.float32
    )
    return X, y


@pytest.fixture(scope="module")
def two_models():
    X, y = _data()
    noisy = X + 0.5 * np.random.default_rng(1).normal(size=X.shape).astype(np.float32)
    metrics = ["map", "hit_rate@1", "grouped_recall@1", "medr"]
    return (
        rc.evaluate(X, query_labels=y, metrics=metrics),
        rc.evaluate(noisy, query_labels=y, metrics=metrics),
    )


def test_newcombe_matches_the_published_example():
    # Newcombe (1998), Statistics in Medicine 17:873, example (a): 56/70 vs 48/80, method 10
    a = rc.accuracy(np.r_[np.ones(56), np.zeros(14)].astype(int), np.ones(70, int))
    b = rc.accuracy(np.r_[np.ones(48), np.zeros(32)].astype(int), np.ones(80, int))
    gap = rc.generalization_gap(a, b)
    assert gap.value == pytest.approx(0.2)
    assert gap.low == pytest.approx(0.0524, abs=1e-4)
    assert gap.high == pytest.approx(0.3339, abs=1e-4)


def test_accuracy_gap_refuses_labels_present_only_in_train():
    a = rc.accuracy([0, 1, 2, 2], [0, 1, 2, 2])
    b = rc.accuracy([0, 1, 1], [0, 1, 1])
    with pytest.raises(rc.InputError, match=r"labels present only in train: \[2\]"):
        rc.generalization_gap(a, b)
    assert rc.generalization_gap(a, b, allow_label_mismatch=True).value == pytest.approx(1 - 1)


def test_welch_gap_for_grouped_recall_matches_its_formula(two_models):
    base, cand = two_models
    gap = rc.generalization_gap(base, cand, "grouped_recall@1")
    g1, g2 = base.grouped["grouped_recall@1"], cand.grouped["grouped_recall@1"]
    v1, v2 = g1.group_values[0], g2.group_values[0]
    se1, se2 = v1.std(ddof=1) / math.sqrt(v1.size), v2.std(ddof=1) / math.sqrt(v2.size)
    dof = (se1**2 + se2**2) ** 2 / (se1**4 / (v1.size - 1) + se2**4 / (v2.size - 1))
    half = stats.t.ppf(0.975, dof) * math.sqrt(se1**2 + se2**2)
    assert gap.value == pytest.approx(v1.mean() - v2.mean())
    assert (gap.low, gap.high) == pytest.approx((gap.value - half, gap.value + half))
    # scipy's Welch test agrees on the degrees of freedom and the interval
    ref = stats.ttest_ind(v1, v2, equal_var=False).confidence_interval(0.95)
    assert (gap.low, gap.high) == pytest.approx((ref.low, ref.high))


def test_paired_t_comparison_matches_scipy(two_models):
    base, cand = two_models
    c = rc.compare(cand, base, "map", cluster="query")
    d = cand.per_query["map"] - base.per_query["map"]
    ref = stats.ttest_rel(cand.per_query["map"], base.per_query["map"])
    assert c.difference == pytest.approx(d.mean())
    assert c.p_value == pytest.approx(ref.pvalue)
    ci = ref.confidence_interval(0.95)
    assert (c.low, c.high) == pytest.approx((ci.low, ci.high))
    assert c.p_value_worse == pytest.approx(
        stats.ttest_rel(cand.per_query["map"], base.per_query["map"], alternative="less").pvalue
    )


def test_rank_metrics_compare_in_the_right_direction(two_models):
    base, cand = two_models
    c = rc.compare(cand, base, "medr", n_resamples=500)
    assert not c.higher_is_better
    # for medr a higher candidate is worse: the improvement is baseline - candidate
    assert c.difference == cand["medr"] - base["medr"]


def test_cluster_robust_comparison_is_wider_than_per_query(two_models):
    base, cand = two_models
    per_q = rc.compare(cand, base, "map", cluster="query")
    per_c = rc.compare(cand, base, "map")  # auto: classes, since the results have labels
    assert per_c.n == 300 and per_c.unit == "classes"
    assert (per_c.high - per_c.low) >= (per_q.high - per_q.low) * 0.9


def test_bootstrap_is_seeded_and_has_the_right_units(two_models):
    base, _ = two_models
    a = rc.bootstrap_interval(base, "map", n_resamples=500, seed=3, cluster="query")
    b = rc.bootstrap_interval(base, "map", n_resamples=500, seed=3, cluster="query")
    assert a == b and a.n == 1500 and a.unit == "queries"
    c = rc.bootstrap_interval(base, "map", n_resamples=500)  # auto: classes
    assert c.n == 300 and c.unit == "classes" and c.low < c.value < c.high


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda r: rc.bootstrap_interval(r, "map", confidence=1.0), "confidence=1.0"),
        (lambda r: rc.bootstrap_interval(r, "map", confidence=0), "confidence=0"),
        (lambda r: rc.bootstrap_interval(r, "map", n_resamples=10), "at least 100 resamples"),
        (lambda r: rc.bootstrap_interval(r, "map", method="basic"), "method='basic'"),
        (lambda r: rc.bootstrap_interval(r, "map", cluster="class"), "cluster='class'"),
        (lambda r: rc.bootstrap_interval(r, "medr"), "BCa is unreliable"),
        (lambda r: rc.bootstrap_interval(r, "mrr"), "mrr was not computed"),
        (lambda r: rc.generalization_gap(r, r), "metric is missing"),
        (lambda r: rc.compare(r, r, "map", method="z"), "method='z'"),
        (lambda r: rc.compare(r, r, "map", cluster="labels"), "cluster='labels'"),
        (lambda r: rc.generalization_gap(r, r, "map", cluster="labels"), "cluster='labels'"),
    ],
)
def test_bad_statistics_input(two_models, call, fragment):
    base, _ = two_models
    with pytest.raises(rc.InputError) as info:
        call(base)
    assert fragment in str(info.value)


def test_paired_comparison_needs_the_same_queries(two_models):
    base, _ = two_models
    X, y = _data(seed=5, classes=100)
    other = rc.evaluate(X, query_labels=y, metrics=["map"])
    with pytest.raises(rc.InputError, match="same queries in the same order"):
        rc.compare(other, base, "map")


def test_grouped_gap_needs_the_same_group_size():
    X, y = _data(classes=200)
    a = rc.evaluate(X, query_labels=y, metrics=["grouped_recall@1"], group_size=10)
    b = rc.evaluate(X, query_labels=y, metrics=["grouped_recall@1"], group_size=20)
    with pytest.raises(rc.InputError, match="only comparable at the same S"):
        rc.generalization_gap(a, b, "grouped_recall@1")
    with pytest.raises(rc.InputError, match="different label partitions"):
        rc.compare(a, b, "grouped_recall@1")


def test_bootstrap_refuses_grouped_recall_and_compare_medr_honours_cluster():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(30), 10)
    X = (rng.normal(size=(30, 8))[y] + 1.5 * rng.normal(size=(300, 8))).astype(np.float32)
    r = rc.evaluate(X, query_labels=y, metrics=["grouped_recall@1", "medr"], group_size=5)
    with pytest.raises(rc.InputError, match="its own interval over groups"):
        rc.bootstrap_interval(r, "grouped_recall@1")
    by_class = rc.compare(r, r, "medr", n_resamples=200)
    by_query = rc.compare(r, r, "medr", cluster="query", n_resamples=200)
    assert (by_class.n, by_class.unit) == (30, "classes") and (by_query.n, by_query.unit) == (
        300,
        "queries",
    )
