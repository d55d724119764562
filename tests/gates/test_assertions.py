"""The gate assertions: values, messages, rules and bad input.

Fail closed (issue 12): every gate checks its threshold and options when called, with
the library's error naming the field and the fix, and raises nothing but the library's
errors on junk; a bound no value can cross is refused; an undefined value never
passes; skipped queries are reported and can fail a gate; both bounds of a check are
recorded; the interval honours confidence and seed. Cost: about 3 s in all (small
evaluations, shared module fixtures in conftest.py).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from shared_setup import FixedMeasurementResult as Fake
from shared_setup import expect_error as _expect
from shared_setup import labelled_clusters

import retrieval_checks as rc
from retrieval_checks.gates import (
    assert_no_regression,
    baseline_record,
    measure_change,
    rule_text,
    write_records,
)
from retrieval_checks.stats import bootstrap_interval

NAN, INF = float("nan"), float("inf")


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


def test_every_lower_bound_gate_takes_interval_and_lower_alike(two_models):
    """on='interval' is the word of assert_metric and YAML checks; the grouped-recall,
    rsum and CAM gates took only 'lower' and the map and recall gates only 'interval',
    each refusing the other's (a new user's trial): both words, one meaning, everywhere."""
    base, _ = two_models
    for on in ("interval", "lower"):
        seen = []
        with rc.gates.listening(seen.append):
            rc.assert_map_at_least(base, 0.01, on=on)
            rc.assert_recall_at_least(base, 0.01, k=1, on=on)
            rc.assert_grouped_recall_ci(base, 0.01, on=on)
            rc.assert_metric(base, "map", at_least=0.01, on=on)  # a floor: 'lower' too (h27)
        assert [e.on for e in seen] == ["interval"] * 4
    with pytest.raises(rc.InputError, match="on='lower'"):  # a cap's bound is the upper one
        rc.assert_metric(base, "map", at_most=0.99, on="lower")


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
    r = rc.evaluate(  # the queries of one class: no class bootstrap exists
        X,
        rng.normal(size=(4, 3)),
        query_labels=[0] * 6,
        gallery_labels=[0, 0, 1, 1],
        metrics=["map"],
    )
    rc.assert_metric(r, "map", at_least=0.01)  # at_least=0.0 could never fail: refused
    r1 = rc.evaluate(
        [[0.9, 0.1]],  # not a gallery row: a query that is one is refused by the gates
        [[1.0, 0.0], [0.0, 1.0]],
        query_labels=[0],
        gallery_labels=[0, 1],
        metrics=["hit_rate@1"],
    )
    rc.assert_recall_at_least(r1, 0.5)


# --- fail closed: thresholds of every gate ---
THRESHOLD_CASES = {
    # id: (call(result), fragments the message must hold)
    "metric-at_least-nan": (
        lambda r: rc.assert_metric(r, "map", at_least=NAN),
        ["at_least=nan", "finite"],
    ),
    "metric-at_least-inf": (
        lambda r: rc.assert_metric(r, "map", at_least=INF),
        ["at_least=inf", "finite"],
    ),
    "metric-at_least--inf": (
        lambda r: rc.assert_metric(r, "map", at_least=-INF),
        ["at_least", "finite"],
    ),
    "metric-at_most-nan": (
        lambda r: rc.assert_metric(r, "map", at_most=NAN),
        ["at_most=nan", "finite"],
    ),
    "metric-at_least-percent": (
        lambda r: rc.assert_metric(r, "map", at_least=70),
        ["at_least=70", "0.7"],
    ),
    "metric-at_most-percent": (
        lambda r: rc.assert_metric(r, "map", at_most=95),
        ["at_most=95", "0.95"],
    ),
    "metric-at_least-low-end": (
        lambda r: rc.assert_metric(r, "map", at_least=0),
        ["at_least=0", "never fail"],
    ),
    "metric-at_least-negative": (
        lambda r: rc.assert_metric(r, "map", at_least=-0.2),
        ["at_least=-0.2", "range"],
    ),
    "metric-at_most-high-end": (
        lambda r: rc.assert_metric(r, "map", at_most=1),
        ["at_most=1", "never fail"],
    ),
    "metric-at_least-string": (
        lambda r: rc.assert_metric(r, "map", at_least="0.5"),
        ["at_least='0.5'", "without quotes: 0.5"],
    ),
    "metric-at_least-word": (
        lambda r: rc.assert_metric(r, "map", at_least="high"),
        ["at_least='high'", "number"],
    ),
    "metric-at_least-nan-string": (
        lambda r: rc.assert_metric(r, "map", at_least="nan"),
        ["at_least='nan'", "number"],
    ),
    "metric-at_least-bool": (
        lambda r: rc.assert_metric(r, "map", at_least=True),
        ["at_least=True", "number"],
    ),
    "metric-at_least-list": (
        lambda r: rc.assert_metric(r, "map", at_least=[0.5]),
        ["at_least=[0.5]", "number"],
    ),
    "metric-both-swapped": (
        lambda r: rc.assert_metric(r, "map", at_least=0.9, at_most=0.5),
        ["at_least=0.9 > at_most=0.5", "swap"],
    ),
    "metric-neither": (lambda r: rc.assert_metric(r, "map"), ["at_least=", "at_most="]),
    "medr-at_least-rank-floor": (
        lambda r: rc.assert_metric(r, "medr", at_least=1),
        ["at_least=1", "never fail"],
    ),
    "medr-at_most-below-1": (
        lambda r: rc.assert_metric(r, "medr", at_most=0.5),
        ["at_most=0.5", "never pass"],
    ),
    "medr-at_most-nan": (
        lambda r: rc.assert_metric(r, "medr", at_most=NAN),
        ["at_most=nan", "finite"],
    ),
    "map-gate-nan": (lambda r: rc.assert_map_at_least(r, NAN), ["at_least=nan", "finite"]),
    "map-gate-percent": (lambda r: rc.assert_map_at_least(r, 72), ["at_least=72", "0.72"]),
    "map-gate-wrong-metric": (
        lambda r: rc.assert_map_at_least(r, 0.5, metric="hit_rate@1"),
        ["metric='hit_rate@1'", "AP metric", "assert_metric"],
    ),
    "recall-gate-nan": (lambda r: rc.assert_recall_at_least(r, NAN), ["at_least=nan", "finite"]),
    "recall-gate-inf": (lambda r: rc.assert_recall_at_least(r, INF), ["at_least=inf", "finite"]),
    "recall-gate-percent": (lambda r: rc.assert_recall_at_least(r, 90), ["at_least=90", "0.9"]),
    "recall-gate-k-zero": (
        lambda r: rc.assert_recall_at_least(r, 0.5, k=0),
        ["k=0", "integer >= 1"],
    ),
    "recall-gate-k-float": (
        lambda r: rc.assert_recall_at_least(r, 0.5, k=1.5),
        ["k=1.5", "integer >= 1"],
    ),
    "recall-gate-k-whole-float": (
        lambda r: rc.assert_recall_at_least(r, 0.5, k=5.0),
        ["k=5.0", "write k=5"],
    ),
    "recall-gate-k-string": (
        lambda r: rc.assert_recall_at_least(r, 0.5, k="1"),
        ["k='1'", "integer"],
    ),
    "recall-gate-k-bool": (
        lambda r: rc.assert_recall_at_least(r, 0.5, k=True),
        ["k=True", "integer"],
    ),
    "recall-gate-kind-typo": (
        lambda r: rc.assert_recall_at_least(r, 0.5, kind="hitrate"),
        ["kind='hitrate'", "Did you mean 'hit_rate'"],
    ),
    "rap-at_least-nan": (
        lambda r: rc.assert_recall_at_precision(r, NAN, precision=0.5),
        ["at_least=nan", "finite"],
    ),
    "rap-at_least-percent": (
        lambda r: rc.assert_recall_at_precision(r, 30, precision=0.5),
        ["at_least=30", "0.3"],
    ),
    "rap-precision-percent": (
        lambda r: rc.assert_recall_at_precision(r, 0.1, precision=90),
        ["precision=90", "0.9"],
    ),
    "rap-precision-zero": (
        lambda r: rc.assert_recall_at_precision(r, 0.1, precision=0),
        ["precision=0", "(0, 1]"],
    ),
    "rap-precision-nan": (
        lambda r: rc.assert_recall_at_precision(r, 0.1, precision=NAN),
        ["precision", "finite"],
    ),
    "rap-precision-string": (
        lambda r: rc.assert_recall_at_precision(r, 0.1, precision="0.9"),
        ["precision='0.9'", "precision level"],
    ),
    "grouped-at_least-nan": (
        lambda r: rc.assert_grouped_recall_ci(r, NAN),
        ["at_least=nan", "finite"],
    ),
    "grouped-at_least-percent": (
        lambda r: rc.assert_grouped_recall_ci(r, 95),
        ["at_least=95", "0.95"],
    ),
    "grouped-on-typo": (
        lambda r: rc.assert_grouped_recall_ci(r, 0.5, on="lowr"),
        ["on='lowr'", "'lower'"],
    ),
    "grouped-wrong-metric": (
        lambda r: rc.assert_grouped_recall_ci(r, 0.5, metric="map"),
        ["metric='map'", "grouped_recall@K"],
    ),
    "rsum-at_least-over-600": (lambda r: rc.assert_rsum(r, 601), ["at_least=601", "[0, 600]"]),
    "rsum-at_least-zero": (lambda r: rc.assert_rsum(r, 0), ["at_least=0", "never fail"]),
    "rsum-at_least-nan": (lambda r: rc.assert_rsum(r, NAN), ["at_least=nan", "finite"]),
    "rsum-on-typo": (
        lambda r: rc.assert_rsum(r, 400, on="lowr"),
        ["on='lowr'", "Did you mean 'lower'"],
    ),
    "cam-at_least-nan": (lambda r: rc.assert_cam_iou_at_least(r, NAN), ["at_least=nan", "finite"]),
    "cam-at_least-percent": (lambda r: rc.assert_cam_iou_at_least(r, 50), ["at_least=50", "0.5"]),
    "cam-at_least-zero": (lambda r: rc.assert_cam_iou_at_least(r, 0), ["at_least=0", "never fail"]),
    "cam-metric-typo": (
        lambda r: rc.assert_cam_iou_at_least(r, 0.3, metric="cam_iou_bx"),
        ["metric='cam_iou_bx'", "Did you mean 'cam_iou_box'"],
    ),
}


@pytest.mark.parametrize("case", list(THRESHOLD_CASES), ids=list(THRESHOLD_CASES))
def test_every_gate_refuses_a_bad_threshold_when_called(res, case):
    call, fragments = THRESHOLD_CASES[case]
    _expect(rc.InputError, lambda: call(res), *fragments)


OPTION_CASES = {
    "on-typo": (dict(on="intervall"), ["on='intervall'", "Did you mean 'interval'"]),
    "on-none": (dict(on=None), ["on=None", "'value' or 'interval'"]),
    "on-list": (dict(on=["value"]), ["on=['value']", "'value' or 'interval'"]),
    "confidence-percent": (dict(confidence=95, on="interval"), ["confidence=95", "0.95"]),
    "confidence-nan": (dict(confidence=NAN, on="interval"), ["confidence=nan", "between 0 and 1"]),
    "confidence-one": (dict(confidence=1.0, on="interval"), ["confidence=1.0", "between 0 and 1"]),
    "confidence-bool": (
        dict(confidence=True, on="interval"),
        ["confidence=True", "between 0 and 1"],
    ),
    "seed-negative": (dict(seed=-1, on="interval"), ["seed=-1", "integer >= 0"]),
    "seed-string": (dict(seed="abc", on="interval"), ["seed='abc'", "integer"]),
    "seed-float": (dict(seed=1.5, on="interval"), ["seed=1.5", "integer"]),
    "max_skipped-negative": (dict(max_skipped=-1), ["max_skipped=-1", "count"]),
    "max_skipped-percent": (dict(max_skipped=5.0), ["max_skipped=5.0", "write 5"]),
    "max_skipped-fraction-one": (dict(max_skipped=1.0), ["max_skipped=1.0", "fraction"]),
    "max_skipped-nan": (dict(max_skipped=NAN), ["max_skipped=nan", "fraction"]),
    "max_skipped-string": (dict(max_skipped="5"), ["max_skipped='5'", "count"]),
    "max_skipped-percent-big": (dict(max_skipped=10.5), ["max_skipped=10.5", "0.105"]),
}


@pytest.mark.parametrize("case", list(OPTION_CASES), ids=list(OPTION_CASES))
def test_gate_options_are_validated_with_the_field_and_the_fix(res, case):
    kwargs, fragments = OPTION_CASES[case]
    _expect(rc.InputError, lambda: rc.assert_metric(res, "map", at_least=0.1, **kwargs), *fragments)


@pytest.mark.parametrize(
    "gate",
    [
        "assert_map_at_least",
        "assert_recall_at_least",
        "assert_recall_at_precision",
        "assert_grouped_recall_ci",
    ],
)
@pytest.mark.parametrize("bad", [-1, 2.5, "x"])
def test_wrapper_gates_validate_max_skipped(res, gate, bad):
    fn = getattr(rc, gate)
    kw = {"precision": 0.5} if gate == "assert_recall_at_precision" else {}
    _expect(rc.InputError, lambda: fn(res, 0.1, max_skipped=bad, **kw), "max_skipped=")


NOT_RESULTS = {
    "none": None,
    "string": "results.json",
    "dict": {"map": 0.5},
    "array": np.zeros(3),
    "int": 3,
}


@pytest.mark.parametrize(
    "gate",
    [
        "assert_metric",
        "assert_map_at_least",
        "assert_recall_at_least",
        "assert_recall_at_precision",
        "assert_grouped_recall_ci",
        "assert_rsum",
        "assert_cam_iou_at_least",
    ],
)
@pytest.mark.parametrize("thing", list(NOT_RESULTS), ids=list(NOT_RESULTS))
def test_a_first_argument_that_is_not_a_result_is_an_input_error(gate, thing):
    fn = getattr(rc, gate)
    value = NOT_RESULTS[thing]
    if gate == "assert_metric":
        call = lambda: fn(value, "map", at_least=0.5)  # noqa: E731
    elif gate == "assert_rsum":
        call = lambda: fn(value, 400)  # noqa: E731
    elif gate == "assert_recall_at_precision":
        call = lambda: fn(value, 0.5, precision=0.5)  # noqa: E731
    else:
        call = lambda: fn(value, 0.5)  # noqa: E731
    _expect(rc.InputError, call, gate, "evaluation result", type(value).__name__)


def test_gap_and_comparison_gates_refuse_other_objects(res):
    _expect(
        rc.InputError,
        lambda: rc.assert_gap_below(res, 0.1),
        "assert_gap_below takes a Gap",
        "generalization_gap",
    )
    _expect(
        rc.InputError,
        lambda: rc.assert_not_worse(res),
        "assert_not_worse takes a Comparison",
        "compare",
    )


# --- fail closed: gaps and comparisons ---
@pytest.fixture(scope="module")
def gap(res):
    # the same result on both sides is refused (its gap is 0 whatever the model): another data set
    X, y = labelled_clusters(seed=1, classes=40)
    other = rc.evaluate(X, query_labels=y, metrics=["map"], group_size=3)
    return rc.generalization_gap(res, other, "map", n_resamples=200)


@pytest.fixture(scope="module")
def comparison(res):
    return rc.compare(res, res, "map")


GAP_CASES = {
    "nan": (NAN, ["below=nan", "finite"]),
    "inf": (INF, ["below=inf", "finite"]),
    "percent": (5, ["below=5", "never fail", "0.05"]),
    "at-width": (1.0, ["below=1", "never fail"]),
    "never-pass": (-1.0, ["below=-1", "never pass"]),
    "string": ("0.1", ["below='0.1'", "number"]),
}


@pytest.mark.parametrize("case", list(GAP_CASES), ids=list(GAP_CASES))
def test_gap_gate_checks_below_against_the_metrics_range(gap, case):
    value, fragments = GAP_CASES[case]
    _expect(rc.InputError, lambda: rc.assert_gap_below(gap, value), *fragments)


MARGIN_CASES = {
    "nan": (NAN, ["margin=nan", "finite"]),
    "inf": (INF, ["margin=inf", "finite"]),
    "one": (1, ["margin=1", "never fail"]),
    "negative": (-0.01, ["margin=-0.01", ">= 0", "write 0.01"]),
    "bool": (True, ["margin=True", "number"]),
}


@pytest.mark.parametrize("case", list(MARGIN_CASES), ids=list(MARGIN_CASES))
def test_not_worse_checks_the_margin(comparison, case):
    value, fragments = MARGIN_CASES[case]
    _expect(rc.InputError, lambda: rc.assert_not_worse(comparison, margin=value), *fragments)


def test_not_worse_and_gap_option_typos_suggest(gap, comparison):
    _expect(
        rc.InputError,
        lambda: rc.assert_not_worse(comparison, rule="signficant"),
        "rule='signficant'",
        "Did you mean 'significant'",
    )
    _expect(
        rc.InputError,
        lambda: rc.assert_gap_below(gap, 0.1, on="uper"),
        "on='uper'",
        "Did you mean 'upper'",
    )


def test_undefined_gap_or_difference_fails_never_passes(gap, comparison):
    from dataclasses import replace

    with pytest.raises(AssertionError, match="NaN"):
        rc.assert_gap_below(replace(gap, high=NAN), 0.5)
    with pytest.raises(AssertionError, match="NaN"):
        rc.assert_gap_below(replace(gap, value=NAN), 0.5, on="value")
    for rule in ("significant", "non_inferior", "value"):
        with pytest.raises(AssertionError, match="NaN"):
            rc.assert_not_worse(
                replace(comparison, low=NAN, high=NAN, difference=NAN), margin=0.05, rule=rule
            )


# --- fail closed: undefined values fail ---
@pytest.mark.parametrize(
    "kw", [dict(at_least=0.1), dict(at_most=0.9), dict(at_least=0.1, at_most=0.9)]
)
def test_a_nan_value_fails_the_gate(kw):
    r = Fake(value=NAN, n=10)
    with pytest.raises(AssertionError, match="NaN"):
        rc.assert_metric(r, "map", **kw)


@pytest.mark.parametrize("interval", [(NAN, 0.9), (0.1, NAN), (NAN, NAN)])
def test_a_nan_interval_bound_fails_the_interval_gate(interval):
    r = Fake(value=0.5, interval=interval, confidence=0.95, method="test", n=10)
    with pytest.raises(AssertionError, match="NaN"):
        rc.assert_metric(r, "map", at_least=0.05, at_most=0.95, on="interval")


# --- fail closed: skipped queries ---
def test_skipped_queries_warn_once_and_are_recorded(skipped):
    heard = []
    with rc.gates.listening(heard.append), pytest.warns(RuntimeWarning) as caught:
        rc.assert_metric(skipped, "map", at_least=0.05)
    texts = [str(w.message) for w in caught if "skipped" in str(w.message)]
    assert len(texts) == 1
    for fragment in [
        "10 of 110 queries",
        "n_used 100 / n_skipped 10",
        "max_skipped",
        "empty_queries='error'",
    ]:
        assert fragment in texts[0], fragment
    (event,) = heard
    assert event.passed and event.n_used == 100 and event.n_skipped == 10
    assert event.warnings and "n_skipped 10" in event.warnings[0]
    record = event.to_dict()
    assert (
        record["n_used"] == 100
        and record["n_skipped"] == 10
        and record["warnings"] == event.warnings
    )


def test_no_skipped_query_no_warning(res):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        heard = []
        with rc.gates.listening(heard.append):
            rc.assert_metric(res, "map", at_least=0.05)
    assert heard[0].warnings == [] and heard[0].n_skipped == 0


@pytest.mark.parametrize(
    "limit,fails",
    [
        (0, True),
        (9, True),
        (10, False),
        (50, False),
        (0.0, True),
        (0.05, True),
        (0.09, True),
        (0.1, False),
        (0.5, False),
        (None, False),
    ],
)
def test_max_skipped_count_or_fraction_decides(skipped, limit, fails):
    heard = []
    with rc.gates.listening(heard.append), pytest.warns(RuntimeWarning, match="skipped"):
        if fails:
            with pytest.raises(AssertionError) as info:
                rc.assert_metric(skipped, "map", at_least=0.05, max_skipped=limit)
            msg = str(info.value)
            for fragment in ["n_used 100", "n_skipped 10", f"max_skipped={limit!r}"]:
                assert fragment in msg, fragment
        else:
            rc.assert_metric(skipped, "map", at_least=0.05, max_skipped=limit)
    assert heard[-1].passed is (not fails)
    if limit is not None:
        assert heard[-1].extra["max_skipped"] == limit


@pytest.mark.parametrize(
    "gate,kw",
    [
        ("assert_map_at_least", {}),
        ("assert_recall_at_least", {}),
        ("assert_recall_at_precision", {"precision": 0.5}),
        ("assert_grouped_recall_ci", {"on": "value"}),
    ],
)
def test_wrapper_gates_fail_past_max_skipped(skipped, gate, kw):
    fn = getattr(rc, gate)
    with pytest.warns(RuntimeWarning, match="n_skipped 10"):
        with pytest.raises(
            AssertionError, match=r"n_used 100 / n_skipped 10\), more than max_skipped=3"
        ):
            fn(skipped, 0.001, max_skipped=3, **kw)
    with pytest.warns(RuntimeWarning, match="n_skipped 10"):
        fn(skipped, 0.001, max_skipped=10, **kw)


def test_threshold_failure_message_shows_used_and_skipped(skipped):
    with pytest.warns(RuntimeWarning), pytest.raises(AssertionError) as info:
        rc.assert_metric(skipped, "map", at_least=0.99, max_skipped=2)
    msg = str(info.value)
    assert "map value" in msg and "n_used 100 / n_skipped 10" in msg and "also:" in msg


# --- fail closed: both bounds ---
def test_both_bounds_are_recorded_and_shown(res):
    heard = []
    v = res["map"]
    with rc.gates.listening(heard.append):
        rc.assert_metric(res, "map", at_least=0.05, at_most=0.95)
        with pytest.raises(AssertionError) as info:
            rc.assert_metric(res, "map", at_least=0.05, at_most=round(v / 2, 3))
    assert (
        heard[0].bounds == {"at_least": 0.05, "at_most": 0.95} and heard[0].comparison == "between"
    )
    assert rule_text(heard[0]) == "0.05 <= value <= 0.95"
    assert rule_text(heard[0].to_dict()) == "0.05 <= value <= 0.95"
    assert not heard[1].passed and heard[1].bounds["at_most"] == round(v / 2, 3)
    assert f"0.05 <= value <= {round(v / 2, 3):g}" in str(info.value)
    assert "above at_most" in str(info.value)


def test_both_bounds_on_the_interval(res):
    heard = []
    with rc.gates.listening(heard.append):
        rc.assert_metric(res, "map", at_least=0.01, at_most=0.99, on="interval")
    assert rule_text(heard[0]) == "0.01 <= interval <= 0.99"
    assert heard[0].low is not None and heard[0].high is not None and heard[0].confidence == 0.95


# --- fail closed: confidence and seed ---
def _interval_at(result, confidence, seed=0):
    return bootstrap_interval(
        result, "map", confidence=confidence, n_resamples=1000, method="percentile", seed=seed
    )


def test_confidence_reaches_the_interval_and_changes_the_verdict(res):
    narrow, wide = _interval_at(res, 0.5), _interval_at(res, 0.99)
    assert wide.low < narrow.low
    threshold = round((narrow.low + wide.low) / 2, 6)
    heard = []
    with rc.gates.listening(heard.append):
        rc.assert_metric(res, "map", at_least=threshold, on="interval", confidence=0.5)
        with pytest.raises(AssertionError, match="99% interval"):
            rc.assert_metric(res, "map", at_least=threshold, on="interval", confidence=0.99)
    assert heard[0].confidence == 0.5 and heard[1].confidence == 0.99
    assert heard[0].low == pytest.approx(narrow.low) and heard[1].low == pytest.approx(wide.low)


def test_the_results_config_confidence_and_seed_are_used_when_none_is_given(res):
    narrow = _interval_at(res, 0.5, seed=7)
    heard = []
    saved = dict(res.config)
    try:
        res.config.update(confidence=0.5, seed=7)
        with rc.gates.listening(heard.append):
            rc.assert_metric(res, "map", at_least=0.01, on="interval")
    finally:
        res.config.clear()
        res.config.update(saved)
    assert heard[0].confidence == 0.5 and heard[0].low == pytest.approx(narrow.low)


def test_a_confidence_the_results_own_interval_does_not_have_is_refused(res):
    # grouped recall carries its own 95% interval: a 99% request must not silently get 95%
    _expect(
        rc.InputError,
        lambda: rc.assert_metric(
            res, "grouped_recall@1", at_least=0.01, on="interval", confidence=0.99
        ),
        "confidence=0.99",
        "95%",
        "evaluate with confidence=0.99",
    )
    rc.assert_metric(res, "grouped_recall@1", at_least=0.01, on="interval", confidence=0.95)
    X, y = labelled_clusters(classes=40)
    r99 = rc.evaluate(
        X, query_labels=y, metrics=["grouped_recall@1"], group_size=3, confidence=0.99
    )
    heard = []
    with rc.gates.listening(heard.append):
        rc.assert_metric(r99, "grouped_recall@1", at_least=0.01, on="interval", confidence=0.99)
    assert heard[0].confidence == 0.99


def test_the_seed_reaches_the_bootstrap(res):
    heard = []
    with rc.gates.listening(heard.append):
        for seed in (0, 1, 0):
            rc.assert_metric(res, "map", at_least=0.01, on="interval", seed=seed)
    assert heard[0].low == heard[2].low and heard[0].low != heard[1].low


def test_wrapper_gates_pass_confidence_on(res):
    heard = []
    with rc.gates.listening(heard.append):
        rc.assert_map_at_least(res, 0.01, on="interval", confidence=0.8)
        rc.assert_recall_at_least(res, 0.01, on="interval", confidence=0.8)
    assert [e.confidence for e in heard] == [0.8, 0.8]


def test_interval_messages_are_formatted(res):
    with pytest.raises(AssertionError) as info:
        rc.assert_metric(res, "map", at_least=0.99, on="interval")
    msg = str(info.value)
    import re

    assert re.search(r"95% interval \[\d\.\d{4}, \d\.\d{4}\]", msg), msg
    assert not re.search(r"\d\.\d{7,}", msg), msg  # no raw float repr


# --- fail closed: property: only the library's errors ---
JUNK = {
    "none": None,
    "str": "x",
    "empty-list": [],
    "dict": {},
    "nan": NAN,
    "neg": -1,
    "object": object(),
    "bool": True,
    "huge-int": 10**400,
    "array": np.array([0.5]),
    "bytes": b"x",
}


def _surfaces(res, gap, comparison):
    rec = baseline_record(res, "map")
    return {
        "assert_metric": (
            rc.assert_metric,
            [res, "map"],
            dict(at_least=0.01, on="value", confidence=None, seed=None, max_skipped=None),
        ),
        "assert_map_at_least": (
            rc.assert_map_at_least,
            [res, 0.01],
            dict(metric="map", on="value"),
        ),
        "assert_recall_at_least": (
            rc.assert_recall_at_least,
            [res, 0.01],
            dict(k=1, kind="hit_rate"),
        ),
        "assert_recall_at_precision": (
            rc.assert_recall_at_precision,
            [res, 0.0001],
            dict(precision=0.5),
        ),
        "assert_grouped_recall_ci": (
            rc.assert_grouped_recall_ci,
            [res, 0.01],
            dict(metric="grouped_recall@1", on="lower"),
        ),
        "assert_gap_below": (rc.assert_gap_below, [gap, 0.5], dict(on="upper")),
        "assert_not_worse": (
            rc.assert_not_worse,
            [comparison],
            dict(margin=0.0, rule="significant"),
        ),
        "assert_no_regression": (
            assert_no_regression,
            [rec, rec],
            dict(max_drop=None, direction=None, confidence=0.95, max_skipped=None),
        ),
        "measure_change": (
            measure_change,
            ["map", {"value": 0.5}, {"value": 0.5}],
            dict(max_drop=None, confidence=0.95),
        ),
        "baseline_record": (baseline_record, [res, "map"], dict(confidence=None, seed=None)),
        "records_differ": (rc.gates.records_differ, [rec, rec], {}),
        "baseline_path": (rc.gates.baseline_path, ["tests/test_x.py"], {}),
        "write_records": (write_records, [[]], {}),
        "rule_text": (rule_text, [{"on": "value"}], {}),
    }


@pytest.mark.parametrize("junk", list(JUNK), ids=list(JUNK))
def test_no_gate_raises_anything_but_the_librarys_errors(res, gap, comparison, junk):
    value = JUNK[junk]
    raw = []
    for name, (fn, args, kw) in _surfaces(res, gap, comparison).items():
        slots = [("arg", i) for i in range(len(args))] + [("kw", k) for k in kw]
        for kind, where in slots:
            a, k = list(args), dict(kw)
            if kind == "arg":
                a[where] = value
            else:
                k[where] = value
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    fn(*a, **k)
                except (rc.RetrievalChecksError, AssertionError):
                    pass
                except Exception as exc:  # noqa: BLE001 - the property under test
                    raw.append(f"{name}({where}={junk}): {type(exc).__name__}: {exc}")
    assert not raw, "\n".join(raw)


# --- fail closed: rank bounds and scales of the image-text metrics ---
@pytest.fixture(scope="module")
def image_text():
    rng = np.random.default_rng(1)
    images, captions = rng.normal(size=(20, 8)), rng.normal(size=(100, 8))
    return rc.evaluate_image_text(images, captions, np.repeat(np.arange(20), 5), n_resamples=0)


@pytest.mark.parametrize(
    "kw", [dict(at_most=60), dict(at_most=56), dict(at_most=10**6), dict(at_least=57)]
)
def test_rank_bounds_beyond_the_largest_attainable_rank_are_refused(small, kw):
    ((field, v),) = kw.items()
    _expect(
        rc.InputError,
        lambda: rc.assert_metric(small, "medr", **kw),
        f"{field}=",
        "largest attainable",
        "56",
        "59 candidates",
        "could never",
    )


def test_rank_bounds_inside_the_gallery_decide(small):
    rc.assert_metric(small, "medr", at_most=55)
    rc.assert_metric(small, "meanr", at_least=1.5, at_most=55)
    with pytest.raises(AssertionError):
        rc.assert_metric(small, "medr", at_most=1)


def test_rank_bounds_under_empty_queries_zero_allow_rank_n_plus_one():
    X, y = labelled_clusters(classes=10, per=3, singletons=2)
    r = rc.evaluate(X, query_labels=y, metrics=["meanr"], empty_queries="zero")
    n = int(r.n_candidates.max())
    _expect(
        rc.InputError,
        lambda: rc.assert_metric(r, "meanr", at_most=n + 1),
        "largest attainable",
        f"{n + 1:g}",
        "empty_queries='zero'",
    )
    rc.assert_metric(r, "meanr", at_most=n)


@pytest.mark.parametrize(
    "name,at_most,top", [("i2t_medr", 10**6, 100), ("t2i_medr", 20, 20), ("i2t_meanr", 100, 100)]
)
def test_image_text_rank_bounds_are_checked_against_the_gallery(image_text, name, at_most, top):
    _expect(
        rc.InputError,
        lambda: rc.assert_metric(image_text, name, at_most=at_most),
        "at_most=",
        f"largest attainable value here is {top}",
        "never fail",
    )


@pytest.mark.parametrize(
    "call,fragments",
    [
        (
            lambda r: rc.assert_rsum(r, 4.5),
            ["at_least=4.5", "percentage points", "six recalls", "450 (4.5 -> 450)"],
        ),
        (lambda r: rc.assert_rsum(r, 1.0), ["at_least=1", "percentage points", "100 (1 -> 100)"]),
        (lambda r: rc.assert_metric(r, "rsum", at_most=6), ["at_most=6", "600 (6 -> 600)"]),
        (
            lambda r: rc.assert_metric(r, "mean_recall", at_least=0.5),
            ["at_least=0.5", "percent", "50 (0.5 -> 50)"],
        ),
        (lambda r: rc.assert_metric(r, "mean_recall", at_most=1), ["at_most=1", "100 (1 -> 100)"]),
    ],
)
def test_fractions_written_for_percent_or_rsum_are_refused(image_text, call, fragments):
    _expect(rc.InputError, lambda: call(image_text), *fragments)


def test_percent_and_rsum_thresholds_on_their_scale_still_decide(image_text):
    rc.assert_rsum(image_text, 7)
    rc.assert_metric(image_text, "mean_recall", at_least=1.5)
    with pytest.raises(AssertionError):
        rc.assert_rsum(image_text, 599)


# --- fail closed: messages ---
@pytest.mark.parametrize(
    "precision,fragment,absent",
    [
        (1.0000001, "precision=1.0000001", "0.01"),
        (1.2, "Did you mean 1 ", "0.012"),
        (90, "Did you mean 0.9", None),
    ],
)
def test_precision_slightly_above_one_is_not_read_as_percent(res, precision, fragment, absent):
    msg = _expect(
        rc.InputError,
        lambda: rc.assert_recall_at_precision(res, 0.1, precision=precision),
        fragment,
        "(0, 1]",
    )
    if absent:
        assert absent not in msg


def test_accuracy_on_interval_uses_wilson_from_the_counts():
    acc = rc.accuracy([1, 2, 3, 1], [1, 2, 2, 1])
    rc.assert_metric(acc, "accuracy", at_least=0.2, on="interval")
    with pytest.raises(AssertionError, match="Wilson score, 3 of 4 correct"):
        rc.assert_metric(acc, "accuracy", at_least=0.5, on="interval")
    with pytest.raises(AssertionError, match="90% interval"):
        rc.assert_metric(acc, "accuracy", at_least=0.5, on="interval", confidence=0.9)


def test_image_text_interval_without_resamples_says_n_resamples(image_text):
    msg = _expect(
        rc.InputError,
        lambda: rc.assert_metric(image_text, "rsum", at_least=100, on="interval"),
        "on='interval'",
        "n_resamples > 0",
    )
    assert "more queries" not in msg


def test_a_metric_not_computed_lists_what_the_result_holds(small):
    acc = rc.accuracy([1, 2, 3, 1], [1, 2, 2, 1])
    msg = _expect(
        rc.InputError,
        lambda: rc.assert_metric(acc, "map", at_least=0.1),
        "map was not computed",
        "holds: accuracy",
    )
    assert "other metrics" not in msg
    _expect(rc.InputError, lambda: rc.assert_metric(small, "mrr", at_least=0.1), "holds: map, medr")


def test_a_cam_result_of_another_measure_says_which_it_holds():
    loc = _baselines_free_cam_result()
    msg = _expect(
        rc.InputError,
        lambda: rc.assert_cam_iou_at_least(loc, 0.1, metric="cam_iou_box"),
        "cam_iou_box was not computed",
        "holds: cam_iou",
    )
    assert "other metrics" not in msg


def _baselines_free_cam_result():
    from retrieval_checks.classifiers._localization import LocalizationResult

    return LocalizationResult(
        metric="cam_iou",
        value=0.5,
        low=0.4,
        high=0.6,
        confidence=0.95,
        per_image=np.array([0.4, 0.6]),
        rho=0.5,
    )


@pytest.mark.parametrize(
    "call,fragments",
    [
        (
            lambda r: rc.assert_map_at_least(r, None),
            ["assert_map_at_least", "at_least is required", "0.7"],
        ),
        (lambda r: rc.assert_recall_at_least(r, None), ["at_least is required"]),
        (lambda r: rc.assert_rsum(r, None), ["assert_rsum", "at_least is required"]),
        (
            lambda r: rc.assert_metric(r, "map", at_least=True),
            ["at_least=True", "a number such as 0.7"],
        ),
        (lambda r: rc.assert_metric(r, "map", at_least=10**400), ["at_least", "too large", "0.7"]),
        (lambda r: rc.assert_metric(r, "map", at_least="9" * 400), ["at_least=", "characters"]),
        (
            lambda r: rc.assert_recall_at_least(r, 0.5, k=10**400),
            ["k=", "401 digits", "larger than any gallery"],
        ),
        (
            lambda r: rc.assert_recall_at_least(r, 0.5, k=10**5000),
            ["k=", "digits", "larger than any gallery"],
        ),
        (
            lambda r: rc.assert_metric(r, "hit_rate@" + "9" * 300, at_least=0.5),
            ["at most 40 are read", "characters"],
        ),
    ],
)
def test_messages_name_the_fix_and_cut_long_values(res, call, fragments):
    msg = _expect(rc.InputError, lambda: call(res), *fragments)
    assert "at_most" not in msg.split("at_least is required")[0] if "required" in msg else True
    assert len(msg) < 600
