"""Every gate fails closed (issue 12): thresholds, options and baselines are checked
when a gate is called, with the library's error naming the field and the fix; an
undefined value never passes; skipped queries are reported and can fail a gate;
both bounds of a check are recorded; the interval honours confidence and seed; and
concurrent writers of one baselines file lose no record."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import sys
import warnings

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.gates import (
    BaselineFile,
    BaselineStore,
    GateEvent,
    _baselines,
    assert_no_regression,
    baseline_record,
    measure_change,
    rule_text,
    write_records,
)
from retrieval_checks.metrics import Measurement
from retrieval_checks.stats import bootstrap_interval

NAN, INF = float("nan"), float("inf")


# ----------------------------------------------------------------------------- fixtures
def _data(seed=0, classes=20, per=5, singletons=0, d=8, noise=1.0):
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.repeat(np.arange(classes), per), 1000 + np.arange(singletons)]).astype(
        np.int64
    )
    centers = rng.normal(size=(y.max() + 1, d))
    X = (centers[y] + noise * rng.normal(size=(y.size, d))).astype(np.float32)
    return X, y


_METRICS = ["map", "hit_rate@1", "medr", "grouped_recall@1", "recall_at_precision@0.5"]


@pytest.fixture(scope="module")
def res():
    X, y = _data(classes=40)
    return rc.evaluate(X, query_labels=y, metrics=_METRICS, group_size=3)


@pytest.fixture(scope="module")
def skipped():
    """100 queries used, 10 skipped (singleton classes under leave-one-out)."""
    X, y = _data(singletons=10, noise=0.5)
    r = rc.evaluate(X, query_labels=y, metrics=_METRICS, group_size=3)
    assert r.n_used == 100 and r.n_skipped == 10 and r["recall_at_precision@0.5"] > 0.001
    return rc.evaluate(X, query_labels=y, metrics=_METRICS, group_size=3)


class Fake:
    """A result that answers ``measure`` with a fixed Measurement (NaN values etc.)."""

    def __init__(self, **kw):
        kw.setdefault("metric", "map")
        kw.setdefault("unit", "fraction")
        self.m = Measurement(**kw)
        self.config = {}

    def measure(self, name):
        return self.m

    def __contains__(self, name):
        return name == self.m.metric

    def __iter__(self):
        return iter([self.m.metric])


def _expect(exc_type, fn, *fragments):
    with pytest.raises(exc_type) as info:
        fn()
    msg = str(info.value)
    for fragment in fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"
    return msg


# ----------------------------------------------------------------------------- thresholds of every gate
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


# ----------------------------------------------------------------------------- gaps and comparisons
@pytest.fixture(scope="module")
def gap(res):
    # the same result on both sides is refused (its gap is 0 whatever the model): another data set
    X, y = _data(seed=1, classes=40)
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


# ----------------------------------------------------------------------------- undefined values fail
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


# ----------------------------------------------------------------------------- skipped queries
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


# ----------------------------------------------------------------------------- both bounds
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


# ----------------------------------------------------------------------------- confidence and seed
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
    X, y = _data(classes=40)
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


def test_baseline_record_honours_confidence_and_seed(res):
    a, b = baseline_record(res, "map", confidence=0.5), baseline_record(res, "map", confidence=0.99)
    assert a["confidence"] == 0.5 and b["confidence"] == 0.99
    assert b["interval"][0] < a["interval"][0] and b["interval"][1] > a["interval"][1]
    assert (
        baseline_record(res, "map", seed=1)["interval"]
        != baseline_record(res, "map", seed=0)["interval"]
    )
    for kw, fragment in [
        (dict(confidence=95), "confidence=95"),
        (dict(confidence=NAN), "confidence=nan"),
        (dict(seed=-3), "seed=-3"),
        (dict(seed="x"), "seed='x'"),
    ]:
        _expect(rc.InputError, lambda: baseline_record(res, "map", **kw), fragment)


def test_baseline_record_refuses_non_results_and_nan_values():
    _expect(
        rc.InputError, lambda: baseline_record({"map": 0.5}, "map"), "evaluation results", "dict"
    )
    _expect(rc.InputError, lambda: baseline_record(Fake(value=NAN), "map"), "finite value")


# ----------------------------------------------------------------------------- regressions
BASE = {
    "metric": "map",
    "value": 0.7,
    "interval": [0.65, 0.75],
    "confidence": 0.95,
    "n": 100,
    "unit": "queries",
}

CHANGE_CASES = {
    "max_drop-nan": (dict(max_drop=NAN), ["max_drop=nan", "finite"]),
    "max_drop-inf": (dict(max_drop=INF), ["max_drop=inf", "finite"]),
    "max_drop-one": (dict(max_drop=1), ["max_drop=1", "never fail"]),
    "max_drop-negative": (dict(max_drop=-0.1), ["max_drop=-0.1", ">= 0"]),
    "max_drop-string": (dict(max_drop="0.1"), ["max_drop='0.1'", "number"]),
    "max_relative_drop-five": (dict(max_relative_drop=5), ["max_relative_drop=5", "0.05"]),
    "max_relative_drop-nan": (dict(max_relative_drop=NAN), ["max_relative_drop=nan", "finite"]),
    "max_relative_drop-negative": (
        dict(max_relative_drop=-0.1),
        ["max_relative_drop=-0.1", ">= 0"],
    ),
    "direction-typo": (dict(direction="hihger"), ["direction='hihger'", "Did you mean 'higher'"]),
    "direction-contradicts": (dict(direction="lower"), ["direction='lower'", "higher is better"]),
    "confidence-percent": (dict(confidence=95), ["confidence=95", "0.95"]),
    "significant-string": (dict(significant="yes"), ["significant='yes'", "True or False"]),
}


@pytest.mark.parametrize("case", list(CHANGE_CASES), ids=list(CHANGE_CASES))
def test_no_regression_checks_its_tolerances(case):
    kw, fragments = CHANGE_CASES[case]
    _expect(rc.InputError, lambda: assert_no_regression(dict(BASE), dict(BASE), **kw), *fragments)


BAD_BASELINES = {
    "value-nan": ({"value": NAN}, ["value", "finite"]),
    "value-inf": ({"value": INF}, ["value", "finite"]),
    "value-string": ({"value": "abc"}, ["'value'", "number"]),
    "value-none": ({"value": None}, ["'value'", "null"]),
    "value-out-of-range": ({"value": 72.0}, ["'value'", "0.72"]),
    "interval-nan": ({"interval": [NAN, 0.8]}, ["'interval'", "finite"]),
    "interval-short": ({"interval": [0.1]}, ["'interval'", "[low, high]"]),
    "interval-reversed": ({"interval": [0.9, 0.1]}, ["'interval'", "low 0.9 > high 0.1"]),
    "metric-unknown": ({"metric": "mapp"}, ["'metric'", "Did you mean 'map'"]),
    "confidence-percent": ({"confidence": 95}, ["'confidence'", "between 0 and 1"]),
}


@pytest.mark.parametrize("case", list(BAD_BASELINES), ids=list(BAD_BASELINES))
def test_no_regression_refuses_a_bad_baseline(case):
    patch, fragments = BAD_BASELINES[case]
    _expect(rc.InputError, lambda: assert_no_regression(dict(BASE), {**BASE, **patch}), *fragments)


@pytest.mark.parametrize("current", [None, "map", [0.5], {"value": 0.5}])
def test_no_regression_refuses_what_is_not_a_record(current):
    _expect(
        rc.InputError,
        lambda: assert_no_regression(current, dict(BASE)),
        "current record",
        "baseline_record",
    )


@pytest.mark.parametrize(
    "side,patch,fragment",
    [
        ("baseline", {"value": NAN}, "baseline value=nan"),
        ("current", {"value": INF}, "current value=inf"),
        ("baseline", {"low": 0.9, "high": 0.1}, "low=0.9 > high=0.1"),
        ("current", {"low": NAN, "high": 0.9}, "low"),
        ("baseline", {"low": 0.1}, "both 'low' and 'high'"),
        ("current", {"value": "x"}, "current value='x'"),
    ],
)
def test_measure_change_refuses_undefined_sides(side, patch, fragment):
    sides = {"baseline": {"value": 0.7}, "current": {"value": 0.6}}
    sides[side] = {**sides[side], **patch}
    _expect(
        rc.InputError, lambda: measure_change("map", sides["baseline"], sides["current"]), fragment
    )


def test_measure_change_still_decides_known_drops():
    assert measure_change("map", {"value": 0.8}, {"value": 0.7}, max_drop=0.05).failed
    assert not measure_change("map", {"value": 0.8}, {"value": 0.78}, max_drop=0.05).failed
    assert measure_change("map gap", {"value": 0.01}, {"value": 0.2}, max_drop=0.1).failed
    _expect(
        rc.InputError,
        lambda: measure_change("map gap", {"value": 0.0}, {"value": 0.1}, max_drop=2),
        "max_drop=2",
    )


def test_regression_message_formats_intervals():
    worse = {**BASE, "value": 0.6, "interval": [0.5512345678, 0.6587654321]}
    with pytest.raises(AssertionError) as info:
        assert_no_regression(worse, dict(BASE), max_drop=0.05)
    msg = str(info.value)
    assert (
        "current interval [0.5512, 0.6588]" in msg and "baseline interval [0.6500, 0.7500]" in msg
    )


def test_regression_skipped_queries_are_reported_and_limited(skipped):
    rec = baseline_record(skipped, "map")
    assert rec["n_skipped"] == 10 and rec["n"] == 100
    heard = []
    with rc.gates.listening(heard.append):
        with pytest.warns(RuntimeWarning, match="n_used 100 / n_skipped 10"):
            assert_no_regression(rec, rec)
        with (
            pytest.warns(RuntimeWarning),
            pytest.raises(AssertionError, match="more than max_skipped=0.05"),
        ):
            assert_no_regression(rec, rec, max_skipped=0.05)
    assert heard[0].n_used == 100 and heard[0].n_skipped == 10 and heard[0].warnings
    assert heard[0].passed and not heard[1].passed


# ----------------------------------------------------------------------------- hand-edited files
GOOD = (
    "k:\n  metric: map\n  value: 0.5\n  interval: [0.4, 0.6]\n  confidence: 0.95\n  n: 100\n"
    "  unit: queries\n"
)

BAD_FILES = {
    "value-string": ("k:\n  metric: map\n  value: abc\n", ["'k'", "'value'", "string"]),
    "value-null": ("k:\n  metric: map\n  value: null\n", ["'k'", "'value'", "null"]),
    "value-missing": ("k:\n  metric: map\n", ["'k'", "'value'", "missing"]),
    "value-nan": ("k:\n  metric: map\n  value: .nan\n", ["'k'", "'value'", "finite"]),
    "value-inf": ("k:\n  metric: map\n  value: .inf\n", ["'k'", "'value'", "finite"]),
    "value-bool": ("k:\n  metric: map\n  value: yes\n", ["'k'", "'value'", "boolean"]),
    "value-out-of-range": ("k:\n  metric: map\n  value: 1.5\n", ["'k'", "'value'", "range"]),
    "record-null": ("k: null\n", ["'k'", "mapping", "null"]),
    "record-list": ("k: [1, 2]\n", ["'k'", "mapping", "list"]),
    "record-string": ("k: fine\n", ["'k'", "mapping", "string"]),
    "interval-one": (
        "k:\n  metric: map\n  value: 0.5\n  interval: [1]\n",
        ["'k'", "'interval'", "[low, high]"],
    ),
    "interval-reversed": (
        "k:\n  metric: map\n  value: 0.5\n  interval: [0.9, 0.1]\n",
        ["'k'", "'interval'", "low"],
    ),
    "interval-string": (
        "k:\n  metric: map\n  value: 0.5\n  interval: wide\n",
        ["'k'", "'interval'", "string"],
    ),
    "interval-strings": (
        "k:\n  metric: map\n  value: 0.5\n  interval: [a, b]\n",
        ["'k'", "'interval'", "finite"],
    ),
    "interval-nan": (
        "k:\n  metric: map\n  value: 0.5\n  interval: [.nan, 0.6]\n",
        ["'k'", "'interval'", "finite"],
    ),
    "metric-unknown": (
        "k:\n  metric: mapp\n  value: 0.5\n",
        ["'k'", "'metric'", "Did you mean 'map'"],
    ),
    "metric-number": ("k:\n  metric: 5\n  value: 0.5\n", ["'k'", "'metric'", "metric name"]),
    "metric-alias": ("k:\n  metric: mAP\n  value: 0.5\n", ["'k'", "'metric'", "write 'map'"]),
    "confidence": (
        "k:\n  metric: map\n  value: 0.5\n  confidence: 95\n",
        ["'k'", "'confidence'", "0.95"],
    ),
    "n-negative": ("k:\n  metric: map\n  value: 0.5\n  n: -4\n", ["'k'", "'n'", "integer >= 0"]),
    "n-float": ("k:\n  metric: map\n  value: 0.5\n  n: 4.5\n", ["'k'", "'n'", "integer >= 0"]),
    "units-list": (
        "k:\n  metric: map\n  value: 0.5\n  units: [1, 2]\n",
        ["'k'", "'units'", "mapping"],
    ),
    "units-entry": (
        "k:\n  metric: map\n  value: 0.5\n  units: {a: [1]}\n",
        ["'k'", "units.a", "[sum, count]"],
    ),
    "units-count": (
        "k:\n  metric: map\n  value: 0.5\n  units: {a: [1.0, 0]}\n",
        ["'k'", "units.a", ">= 1"],
    ),
    "partition-number": (
        "k:\n  metric: map\n  value: 0.5\n  partition: 3\n",
        ["'k'", "'partition'", "string"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_FILES), ids=list(BAD_FILES))
def test_a_hand_edited_record_names_file_key_field_and_fix(tmp_path, case):
    body, fragments = BAD_FILES[case]
    path = tmp_path / "suite.baselines.yaml"
    path.write_text(body)
    rec = dict(BASE)
    for call in (
        lambda: BaselineFile(path).get("k"),
        lambda: BaselineStore().check(rec, path=path, key="k"),
    ):
        _expect(rc.InputError, call, str(path), "--rc-force-regen", *fragments)


WHOLE_FILES = {
    "top-level-list": ("- a\n- b\n", ["mapping of check names", "list"]),
    "top-level-string": ("just text\n", ["mapping of check names", "string"]),
    "invalid-yaml": ("k: [\n", ["invalid YAML", ":2"]),
    "tab-yaml": ("k:\n\tmetric: map\n", ["invalid YAML"]),
    "int-keys": ("1: {metric: map, value: 0.5}\n", ["record names must be strings", "1"]),
    "binary": (b"\xff\xfe\x00garbage", ["UTF-8"]),
    "merge-key-bomb": (
        "a0: &a0 {x: 1, y: 2}\n"
        + "".join(f"a{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}'] * 10)}]}}\n" for i in range(1, 9)),
        ["merge keys"],
    ),
    "huge-integer": ("k:\n  metric: map\n  value: " + "9" * 5000 + "\n", ["cannot read"]),
    "deep-nesting": ("k: " + "[" * 5000 + "]" * 5000 + "\n", ["cannot read"]),
}


@pytest.mark.parametrize("case", list(WHOLE_FILES), ids=list(WHOLE_FILES))
def test_an_unreadable_file_is_an_input_error_naming_it(tmp_path, case):
    body, fragments = WHOLE_FILES[case]
    path = tmp_path / "suite.baselines.yaml"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    _expect(rc.InputError, lambda: BaselineFile(path), str(path), "--rc-force-regen", *fragments)
    _expect(rc.InputError, lambda: BaselineStore().check(dict(BASE), path=path, key="k"), str(path))


def test_a_directory_where_the_file_should_be(tmp_path):
    path = tmp_path / "suite.baselines.yaml"
    path.mkdir()
    for call in (
        lambda: BaselineFile(path),
        lambda: write_records([(path, "k", dict(BASE))]),
        lambda: BaselineStore("force").check(dict(BASE), path=path, key="k"),
    ):
        _expect(rc.InputError, call, str(path), "is a directory", "remove or rename")


def test_a_good_file_still_reads_and_empty_is_empty(tmp_path):
    path = tmp_path / "suite.baselines.yaml"
    path.write_text(GOOD)
    assert BaselineFile(path).get("k")["value"] == 0.5 and BaselineFile(path).get("other") is None
    path.write_text("# only a comment\n")
    assert BaselineFile(path).records == {}


def test_force_regen_rewrites_a_malformed_record_and_keeps_the_rest(tmp_path):
    path = tmp_path / "suite.baselines.yaml"
    path.write_text(GOOD + "bad:\n  metric: map\n  value: abc\n")
    store = BaselineStore("force")
    with pytest.raises(AssertionError, match="created"):
        store.check(dict(BASE), path=path, key="bad")
    store.write()
    f = BaselineFile(path)
    assert f.get("bad")["value"] == 0.7 and f.get("k")["value"] == 0.5


def test_regeneration_replaces_an_unreadable_file_and_keeps_a_copy(tmp_path):
    path = tmp_path / "suite.baselines.yaml"
    path.write_text("k: [\n")
    store = BaselineStore("all")
    assert store.check(dict(BASE), path=path, key="k") is None
    with pytest.warns(RuntimeWarning, match="invalid YAML"):
        store.write()
    assert BaselineFile(path).get("k")["value"] == 0.7
    assert (tmp_path / "suite.baselines.yaml.corrupt").read_text() == "k: [\n"


def test_a_misspelt_tolerance_of_a_baseline_check_is_named(tmp_path):
    _expect(
        rc.InputError,
        lambda: BaselineStore().check(dict(BASE), path=tmp_path / "a.yaml", key="k", max_dorp=0.1),
        "max_dorp=",
        "Did you mean 'max_drop'",
    )


def test_store_regen_mode_and_write_entries_are_checked(tmp_path):
    _expect(rc.InputError, lambda: BaselineStore("forse"), "regen='forse'", "'force'")
    _expect(rc.InputError, lambda: write_records([("a.yaml", "k")]), "(path, key, record)")
    _expect(rc.InputError, lambda: write_records([(tmp_path / "a.yaml", 3, {})]), "strings")
    _expect(rc.InputError, lambda: BaselineFile(3), "str or Path")


# ----------------------------------------------------------------------------- concurrent writers
def _writer(path: str, worker: int) -> None:
    for j in range(20):
        BaselineFile(path).update(
            {
                f"w{worker}-k{j:02d}": {
                    **BASE,
                    "value": 0.5 + worker / 100 + j / 10000,
                    "interval": None,
                }
            }
        )


@pytest.mark.skipif(sys.platform == "win32", reason="fork start method")
def test_four_processes_writing_one_file_lose_no_record_and_keep_its_mode(tmp_path):
    path = tmp_path / "suite.baselines.yaml"
    BaselineFile(path).update({"existing": dict(BASE)})
    os.chmod(path, 0o640)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    f = BaselineFile(path)
    assert len(f.records) == 81 and f.get("existing")["value"] == 0.7
    assert all(f.get(f"w{i}-k{j:02d}") is not None for i in range(4) for j in range(20))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "suite.baselines.yaml"
    ]  # no lock or temp file left


def test_a_new_file_gets_the_umask_mode_not_0600(tmp_path):
    path = tmp_path / "new.baselines.yaml"
    old = os.umask(0o022)
    try:
        BaselineFile(path).update({"k": dict(BASE)})
    finally:
        os.umask(old)
    if sys.platform != "win32":
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644


def test_a_writer_merges_what_another_wrote_since_it_read(tmp_path):
    path = tmp_path / "suite.baselines.yaml"
    first, second = BaselineFile(path), BaselineFile(path)  # both read an empty file
    first.update({"a": dict(BASE)})
    second.update({"b": dict(BASE)})
    assert set(BaselineFile(path).records) == {"a", "b"}


def test_the_portable_lock_serves_without_fcntl(tmp_path, monkeypatch):
    monkeypatch.setattr(_baselines, "fcntl", None)
    path = tmp_path / "suite.baselines.yaml"
    BaselineFile(path).update({"a": dict(BASE)})
    BaselineFile(path).update({"b": dict(BASE)})
    assert set(BaselineFile(path).records) == {"a", "b"}
    assert not (tmp_path / ".suite.baselines.yaml.lock").exists()


# ----------------------------------------------------------------------------- JSON-safe events
def test_event_to_dict_is_strict_json():
    e = GateEvent(
        gate="g",
        metric="map",
        value=NAN,
        passed=False,
        low=-INF,
        high=INF,
        threshold=np.float64(NAN),
        bounds={"at_least": INF},
        warnings=["x"],
        extra={
            "curve": {"precision": np.array([0.5, NAN]), "t": (1.0, INF)},
            "flag": np.bool_(True),
            "count": np.int64(3),
            "arr2": np.array([[1.0, NAN]]),
        },
    )
    d = e.to_dict()
    text = json.dumps(d, allow_nan=False)
    back = json.loads(text)
    assert back["value"] is None and back["low"] is None and back["bounds"]["at_least"] is None
    assert back["curve"]["precision"] == [0.5, None] and back["flag"] is True and back["count"] == 3
    assert back["arr2"] == [[1.0, None]]


def test_events_of_real_gates_are_strict_json(res, skipped):
    heard = []
    with rc.gates.listening(heard.append):
        rc.assert_recall_at_precision(res, 0.001, precision=0.5)
        rc.assert_metric(res, "map", at_least=0.01, on="interval")
        with pytest.warns(RuntimeWarning):
            rc.assert_grouped_recall_ci(skipped, 0.001)
    for e in heard:
        json.dumps(e.to_dict(), allow_nan=False)


def test_interval_messages_are_formatted(res):
    with pytest.raises(AssertionError) as info:
        rc.assert_metric(res, "map", at_least=0.99, on="interval")
    msg = str(info.value)
    import re

    assert re.search(r"95% interval \[\d\.\d{4}, \d\.\d{4}\]", msg), msg
    assert not re.search(r"\d\.\d{7,}", msg), msg  # no raw float repr


# ----------------------------------------------------------------------------- property: only the library's errors
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


# ----------------------------------------------------------------------------- review: gates that could never fail
@pytest.fixture(scope="module")
def small():
    """12 classes of 5 items, leave-one-out: 59 candidates and 4 other relevant items per query."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(12), 5)
    X = rng.normal(size=(60, 8)).astype(np.float32)
    r = rc.evaluate(
        X, query_labels=y, metrics=["map", "medr", "meanr", "hit_rate@1", "discriminant_ratio"]
    )
    assert int(r.n_candidates.max()) == 59
    return r


@pytest.fixture(scope="module")
def image_text():
    rng = np.random.default_rng(1)
    images, captions = rng.normal(size=(20, 8)), rng.normal(size=(100, 8))
    return rc.evaluate_image_text(images, captions, np.repeat(np.arange(20), 5), n_resamples=0)


@pytest.mark.parametrize("max_drop", [0.48, 0.99])
def test_max_drop_covering_the_baselines_whole_attainable_drop_is_refused(small, max_drop):
    base = dict(
        baseline_record(small, "map"), value=0.48, interval=None, units=None, units_are=None
    )
    cur = baseline_record(small, "map")
    _expect(
        rc.InputError,
        lambda: assert_no_regression(cur, base, max_drop=max_drop),
        f"max_drop={max_drop:g}",
        "at most 0.48",
        "never fail",
        "below 0.48",
    )
    assert (
        assert_no_regression(cur, base, max_drop=0.47).failed is False
    )  # a drop of 0.35 is tolerated


def test_max_drop_on_an_unbounded_ratio_is_checked_against_the_baseline(small):
    rec = baseline_record(small, "discriminant_ratio")
    _expect(
        rc.InputError,
        lambda: assert_no_regression(rec, rec, max_drop=10**6),
        "max_drop=1e+06",
        "at most",
        "never fail",
        "discriminant_ratio",
    )
    assert not assert_no_regression(rec, rec, max_drop=rec["value"] / 2).failed


def test_rank_records_carry_their_max_rank_and_bound_tolerances(small):
    rec = baseline_record(small, "medr")
    assert rec["max_rank"] == 56  # 59 candidates - 4 other relevant items + 1
    for kw, fragments in (
        (dict(max_drop=10**6), ["max_drop=1e+06", "max_rank", "below"]),
        (dict(max_relative_drop=100), ["max_relative_drop=100", "relative drop of", "never fail"]),
    ):
        _expect(rc.InputError, lambda: assert_no_regression(rec, rec, **kw), *fragments)
    meanr = baseline_record(small, "meanr")
    _expect(
        rc.InputError,
        lambda: assert_no_regression(meanr, meanr, max_drop=10**6),
        "max_drop",
        "never fail",
    )
    assert not assert_no_regression(rec, rec, max_drop=5).failed
    worse = dict(rec, value=30.0, units=None)
    with pytest.raises(AssertionError, match="regressed"):
        assert_no_regression(worse, dict(rec, units=None), max_drop=5)


def test_a_rank_record_beyond_its_max_rank_is_refused():
    rec = {
        "metric": "medr",
        "value": 80.0,
        "interval": None,
        "n": 10,
        "unit": "queries",
        "max_rank": 56,
    }
    _expect(rc.InputError, lambda: _baselines.check_record(rec), "'value'", "56", "max_rank")
    _expect(
        rc.InputError,
        lambda: _baselines.check_record({**rec, "value": 5.0, "max_rank": 0}),
        "'max_rank'",
        ">= 1",
    )
    _expect(
        rc.InputError,
        lambda: _baselines.check_record({**BASE, "max_rank": 10}),
        "'max_rank'",
        "rank metrics",
    )


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
    X, y = _data(classes=10, per=3, singletons=2)
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


def test_measure_change_refuses_a_metric_other_than_the_records(small):
    base, cur = baseline_record(small, "map"), baseline_record(small, "map")
    _expect(
        rc.InputError,
        lambda: measure_change("hit_rate@1", base, cur),
        "metric='hit_rate@1'",
        "'map'",
        "pass metric='map'",
    )
    assert measure_change("MAP", base, cur).metric == "MAP"  # an alias of the records' metric


# ----------------------------------------------------------------------------- review: baselines files
def test_update_writes_numpy_numbers_as_plain_numbers(tmp_path):
    path = tmp_path / "b.baselines.yaml"
    rec = dict(BASE, value=np.float64(0.7), n=np.int64(100), interval=np.array([0.65, 0.75]))
    BaselineFile(path).update({"k": rec})
    text = path.read_text()
    assert "numpy" not in text and "!!" not in text
    got = BaselineFile(path).get("k")
    assert got["value"] == 0.7 and type(got["value"]) is float and got["interval"] == [0.65, 0.75]


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda f: f.update(["x"]), ["update", "entries", "a list", "mapping of record names"]),
        (lambda f: f.update({1: dict(BASE)}), ["entries key 1", "strings"]),
        (lambda f: f.get(["k"]), ["get", "key=['k']", "a string"]),
        (
            lambda f: f.update({"k": {"value": NAN}}),
            ["entries['k']", "'metric'", "baseline_record"],
        ),
        (lambda f: f.update({"k": {**BASE, "value": NAN}}), ["entries['k']", "'value'", "nan"]),
        (lambda f: f.update({"k": None}), ["entries['k']", "found null", "baseline_record"]),
        (
            lambda f: f.update({"k": {**BASE, "value": 0.9}}),
            ["'interval'", "outside its own interval"],
        ),
        (
            lambda f: f.update({"k": {**BASE, "unit": "bananas"}}),
            ["'unit'", "'bananas'", "queries"],
        ),
    ],
)
def test_update_and_get_refuse_bad_arguments_and_write_nothing(tmp_path, call, fragments):
    path = tmp_path / "b.baselines.yaml"
    _expect(rc.InputError, lambda: call(BaselineFile(path)), *fragments)
    assert not path.exists()


def test_a_duplicated_key_in_a_baselines_file_is_refused_with_its_line(tmp_path):
    path = tmp_path / "b.baselines.yaml"
    path.write_text(
        "k:\n  metric: map\n  value: 0.5\nj:\n  metric: map\n  value: 0.5\nk:\n  metric: map\n"
        "  value: 0.6\n"
    )
    _expect(
        rc.InputError, lambda: BaselineFile(path), str(path), ":7", "duplicate key 'k'", "line 1"
    )
    path.write_text("k:\n  metric: map\n  value: 0.5\n  value: 0.6\n")
    _expect(rc.InputError, lambda: BaselineFile(path), "duplicate key 'value'", "line 3")


@pytest.mark.parametrize(
    "patch,fragments",
    [
        ({"value": 0.9}, ["'interval'", "0.9", "outside its own interval"]),
        ({"unit": "bananas"}, ["'unit'", "bananas", "queries, groups"]),
        ({"units": {"a": [NAN, 2], "b": [1.0, 2]}}, ["units.a", "unit a holds a sum of nan"]),
        ({"units": {"a": ["x", 2]}}, ["units.a", "sum must be a finite number"]),
    ],
)
def test_a_record_inconsistent_with_itself_is_refused(patch, fragments):
    _expect(rc.InputError, lambda: _baselines.check_record({**BASE, **patch}), *fragments)


# ----------------------------------------------------------------------------- review: messages
def test_a_result_where_a_record_is_expected_says_baseline_record(small):
    rec = baseline_record(small, "medr")
    for args in ((small, rec), (rec, small)):
        msg = _expect(
            rc.InputError,
            lambda: assert_no_regression(*args),
            "evaluation result",
            "rc.baseline_record(result, metric)",
        )
        assert "Did you mean" not in msg
    _expect(
        rc.InputError,
        lambda: measure_change("medr", small, rec),
        "baseline",
        "evaluation result",
        "baseline_record",
    )


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


def test_record_messages_cut_huge_values():
    msg = _expect(
        rc.InputError,
        lambda: _baselines.check_record({**BASE, "n": "9" * 5000}),
        "'n'",
        "characters",
    )
    assert len(msg) < 600
    msg = _expect(
        rc.InputError,
        lambda: _baselines.check_record({**BASE, "confidence": 10**5000}),
        "'confidence'",
        "digits",
    )
    assert len(msg) < 600


def test_a_nan_unit_in_a_baselines_file_names_the_unit(tmp_path):
    path = tmp_path / "b.baselines.yaml"
    path.write_text("k:\n  metric: map\n  value: 0.5\n  units: {cats: [.nan, 2], dogs: [1.0, 2]}\n")
    msg = _expect(
        rc.InputError,
        lambda: BaselineFile(path).get("k"),
        "units.cats",
        "unit cats holds a sum of nan",
    )
    assert "a list of 2" not in msg


def test_accuracy_records_carry_wilsons_interval_and_name_what_they_hold():
    acc = rc.accuracy([1, 2, 3, 1], [1, 2, 2, 1])
    rec = baseline_record(acc, "accuracy", confidence=0.9)
    assert rec["interval"][0] < 0.75 < rec["interval"][1] and rec["confidence"] == 0.9
    _expect(
        rc.InputError,
        lambda: baseline_record(acc, "map"),
        "map was not computed",
        "holds: accuracy",
    )


# ------------------------------------------------------------------ units that contradict the value (review)
@pytest.fixture(scope="module")
def unit_record():
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(10), 6)
    x = (rng.normal(size=(60, 8)) + 1.5 * np.eye(8)[y % 8]).astype(np.float32)
    return baseline_record(rc.evaluate(x, query_labels=y, metrics=["map"]), "map")


def test_units_zeroed_by_hand_are_refused_as_contradicting_the_value(unit_record):
    from retrieval_checks.gates._baselines import check_record

    edited = dict(unit_record, units={k: [0.0, n] for k, (_, n) in unit_record["units"].items()})
    _expect(
        rc.InputError,
        lambda: check_record(edited, where="rc_t.baselines.yaml, key 'k'"),
        "'k'",
        "'units'",
        "contradict the value",
        f"{unit_record['value']:.9g}",
    )
    _expect(
        rc.InputError,
        lambda: assert_no_regression(unit_record, edited, significant=True, max_drop=0.01),
        "'units'",
        "contradict",
    )


def test_a_unit_whose_mean_is_off_the_metrics_range_is_refused(unit_record):
    from retrieval_checks.gates._baselines import check_record

    units = dict(unit_record["units"])
    units["0"] = [520.3, 54]
    _expect(
        rc.InputError,
        lambda: check_record(dict(unit_record, units=units), where="f.yaml, key 'k'"),
        "units.0",
        "mean of 9.6",
        "outside the range of map",
    )


def test_units_counting_other_queries_than_n_are_refused(unit_record):
    from retrieval_checks.gates._baselines import check_record

    units = {
        k: [s * 2, n * 2] for k, (s, n) in unit_record["units"].items()
    }  # same mean, twice the queries
    _expect(
        rc.InputError, lambda: check_record(dict(unit_record, units=units)), "'units'", "but n is"
    )


def test_consistent_units_of_every_kind_are_accepted():
    from retrieval_checks.gates._baselines import check_record

    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(12), 5)
    x = (rng.normal(size=(60, 16)) + 2 * np.eye(16)[y % 16]).astype(np.float32)
    r = rc.evaluate(
        x,
        query_labels=y,
        metrics=["map", "hit_rate@1", "precision@5", "mrr", "meanr", "map@R", "grouped_recall@1"],
        group_size=3,
    )
    for metric in ("map", "hit_rate@1", "precision@5", "mrr", "meanr", "map@R", "grouped_recall@1"):
        rec = baseline_record(r, metric)
        assert rec.get("units"), metric
        assert check_record(rec) == rec


def test_a_hand_edited_baselines_file_with_contradicting_units_names_the_file_and_key(
    tmp_path, unit_record
):
    from retrieval_checks.gates import BaselineFile

    units = "".join(f"    '{k}': [0.0, {n}]\n" for k, (_, n) in unit_record["units"].items())
    path = tmp_path / "rc_t.baselines.yaml"
    path.write_text(
        f"k:\n  metric: map\n  value: {unit_record['value']}\n  n: {unit_record['n']}\n"
        f"  unit: queries\n  units_are: classes\n  units:\n{units}"
    )
    _expect(
        rc.InputError,
        lambda: BaselineFile(path).get("k"),
        "rc_t.baselines.yaml",
        "'k'",
        "'units'",
        "contradict the value",
    )


def test_a_record_whose_confidence_is_null_reads_the_interval_at_the_given_confidence():
    """History rows of gates that kept no confidence hold "confidence": None; the
    interval z-test then uses the caller's confidence (it raised a TypeError)."""
    b = {"metric": "map", "value": 0.6, "low": 0.55, "high": 0.65, "confidence": None}
    c = {"metric": "map", "value": 0.5, "low": 0.45, "high": 0.55, "confidence": None}
    change = rc.measure_change("map", b, c, max_drop=0.01, significant=True, confidence=0.95)
    assert change.failed and change.p_worse is not None and change.p_worse < 0.05
