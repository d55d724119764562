"""The gate assertions: values, messages, rules and bad input."""

from __future__ import annotations

import numpy as np
import pytest

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


def test_comparing_a_model_with_itself_passes_every_rule(two_models):
    base, _ = two_models
    for metric in ["map", "grouped_recall@1"]:
        c = rc.compare(base, base, metric)
        assert c.difference == 0 and c.low == 0 and c.high == 0
        for rule in ["significant", "non_inferior", "value"]:
            rc.assert_not_worse(c, rule=rule)


def test_assert_not_worse_message_and_rules(two_models):
    base, cand = two_models
    c = rc.compare(cand, base, "hit_rate@1")
    with pytest.raises(AssertionError) as info:
        rc.assert_not_worse(c)
    msg = str(info.value)
    for fragment in [
        "hit_rate@1",
        "candidate",
        "is significantly worse than baseline",
        "95% interval",
        "paired t over classes (cluster-robust)",
        "n=300",
        "rule (significant, margin 0.0)",
        "p=",
    ]:
        assert fragment in msg, fragment
    rc.assert_not_worse(c, margin=0.5)  # a drop smaller than the allowed margin passes
    # a negative margin is refused now (a tolerated drop is >= 0); a worse candidate fails non-inferiority
    with pytest.raises(AssertionError, match="is not shown to be within 0.001 of baseline"):
        rc.assert_not_worse(
            rc.compare(cand, base, "map", cluster="label"), margin=0.001, rule="non_inferior"
        )


def test_grouped_recall_gate_message(two_models):
    base, _ = two_models
    with pytest.raises(AssertionError) as info:
        rc.assert_grouped_recall_ci(base, at_least=0.99)
    msg = str(info.value)
    for fragment in [
        "grouped_recall@1 interval's lower bound",
        "< 0.99",
        "95% interval",
        "r=30 groups of S=10",
        "1500 queries used",
        "rule: fail when the interval's lower bound",
    ]:
        assert fragment in msg, fragment
    g = base.grouped["grouped_recall@1"]
    rc.assert_grouped_recall_ci(base, at_least=g.low - 1e-9)
    with pytest.raises(AssertionError, match="value"):
        rc.assert_grouped_recall_ci(base, at_least=g.value + 1e-9, on="value")
    rc.assert_grouped_recall_ci(base, at_least=g.value - 1e-9, on="value")


def test_gap_gate_message(two_models):
    base, cand = two_models
    gap = rc.generalization_gap(base, cand, "map", n_resamples=500, cluster="query")
    assert gap.low <= gap.value <= gap.high
    with pytest.raises(AssertionError) as info:
        rc.assert_gap_below(gap, below=gap.high - 1e-6)
    msg = str(info.value)
    for fragment in [
        "map gap (train - test) upper bound",
        "95% interval",
        "percentile bootstrap over queries",
        "train:",
        "test:",
        "on 1500 queries",
        "rule: fail when the gap's upper bound",
    ]:
        assert fragment in msg, fragment
    rc.assert_gap_below(gap, below=gap.high + 1e-6)
    rc.assert_gap_below(gap, below=gap.value + 1e-6, on="value")


def test_assert_metric_value_and_interval(two_models):
    base, _ = two_models
    rc.assert_metric(base, "map", at_least=base["map"] - 1e-9, at_most=base["map"] + 1e-9)
    with pytest.raises(AssertionError) as info:
        rc.assert_metric(base, "mAP", at_least=0.99)
    msg = str(info.value)
    for fragment in [
        "map value",
        "< 0.99",
        "short by",
        "unit: fraction",
        "95% interval",
        "classes",
        "1500 queries used, 0 skipped",
        "worst classes:",
        "rule: fail when the value is below at_least",
    ]:
        assert fragment in msg, fragment
    with pytest.raises(AssertionError, match="interval's lower bound"):
        rc.assert_metric(base, "map", at_least=base["map"] - 1e-6, on="interval")
    with pytest.raises(AssertionError, match="above at_most"):
        rc.assert_metric(base, "medr", at_most=base["medr"] - 1)
    with pytest.raises(rc.InputError, match="at_least=..., at_most=..."):
        rc.assert_metric(base, "map")


def test_worst_classes_name_the_real_labels():
    X, y = _data(classes=40)
    names = np.array([f"sku-{i}" for i in y])
    X[y == 7] = (
        np.random.default_rng(3).normal(size=(5, X.shape[1])).astype(np.float32) * 5
    )  # ruin class 7
    res = rc.evaluate(X, query_labels=names, metrics=["map"])
    with pytest.raises(AssertionError) as info:
        rc.assert_map_at_least(res, 0.999)
    assert "worst classes: 'sku-7'" in str(info.value)


def test_recall_and_map_gates(two_models):
    base, _ = two_models
    rc.assert_recall_at_least(base, base["hit_rate@1"] - 1e-9, k=1)
    with pytest.raises(AssertionError, match="hit_rate@1 value"):
        rc.assert_recall_at_least(base, 0.99, k=1)
    with pytest.raises(rc.InputError, match="recall@1 was not computed"):
        rc.assert_recall_at_least(base, 0.5, k=1, kind="recall")
    with pytest.raises(rc.InputError, match="checks an AP metric"):
        rc.assert_map_at_least(base, 0.5, metric="hit_rate@1")
    with pytest.raises(AssertionError, match="map value"):
        rc.assert_map_at_least(base, 0.99)


def test_recall_at_precision_gate():
    X, y = _data()
    res = rc.evaluate(
        X, query_labels=y, metrics=["recall_at_precision@0.9", "recall_at_precision@0.5"]
    )
    # the value at 0.9 is 0: at_least=0 could never fail (refused), so the pass is shown at precision 0.5
    assert res["recall_at_precision@0.5"] > 0
    rc.assert_recall_at_precision(res, res["recall_at_precision@0.5"], precision=0.5)
    with pytest.raises(AssertionError) as info:
        rc.assert_recall_at_precision(res, 0.99, precision=0.9)
    msg = str(info.value)
    assert "similarity threshold" in msg or "no threshold reaches" in msg
    for fragment in ["recall_at_precision@0.9", "TP", "positive and", "negative pairs", "rule:"]:
        assert fragment in msg, fragment


def test_assert_metric_on_image_text():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(60, 8)).astype(np.float32)
    ci = np.repeat(np.arange(60), 5)
    captions = (images[ci] + rng.normal(size=(300, 8))).astype(np.float32)
    res = rc.evaluate_image_text(images, captions, ci, n_resamples=200)
    with pytest.raises(AssertionError, match="60 images, 300 captions"):
        rc.assert_metric(res, "t2i_recall@1", at_least=0.999, on="interval")


def test_value_gates_do_not_need_an_interval():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 3)).astype(np.float32)
    r = rc.evaluate(
        X, query_labels=[0] * 6, metrics=["map"]
    )  # one class: no class bootstrap exists
    rc.assert_metric(r, "map", at_least=0.01)  # at_least=0.0 could never fail: refused
    r1 = rc.evaluate(
        [[1.0, 0.0]],
        [[1.0, 0.0], [0.0, 1.0]],
        query_labels=[0],
        gallery_labels=[0, 1],
        metrics=["hit_rate@1"],
    )
    rc.assert_recall_at_least(r1, 0.5)
