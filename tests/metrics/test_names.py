"""Metric names are canonical: aliases resolve, unknown names get the closest canonical one, malformed
parameters are refused; results answer to aliases."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.metrics import metric_spec

RNG = np.random.default_rng(0)


X = RNG.normal(size=(20, 4)).astype(np.float32)


Y = np.repeat(np.arange(5), 4)


@pytest.mark.parametrize(
    "alias, canonical",
    [
        ("cmc@5", "hit_rate@5"),
        ("mAP", "map"),
        ("AP", "map"),
        ("MAP@R", "map@R"),
        ("map@r", "map@R"),
        ("mAP@10", "map@10"),
        ("R-precision", "r_precision"),
        ("recall_at_precision@0.90", "recall_at_precision@0.9"),
        ("pair_f1@t=0.50", "pair_f1@t=0.5"),
        ("pair_precision@ t=-1", "pair_precision@t=-1"),
        ("hit_rate@05", "hit_rate@5"),
    ],
)
def test_aliases_resolve_to_canonical_names(alias, canonical):
    assert rc.canonical_metric_name(alias) == canonical


@pytest.mark.parametrize(
    "name, suggestion",
    [
        ("hitrate@1", "hit_rate@1"),
        ("recal@5", "recall@5"),
        ("mrrr", "mrr"),
        ("r_precison", "r_precision"),
        ("recall_at_precison@0.9", "recall_at_precision@0.9"),
    ],
)
def test_unknown_metric_suggests_the_closest(name, suggestion):
    with pytest.raises(rc.MetricNameError) as info:
        rc.evaluate(X, query_labels=Y, metrics=[name])
    assert info.value.suggestion == suggestion
    assert f"Did you mean '{suggestion}'" in str(info.value)


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("recall@0", "positive integer"),
        ("recall@x", "positive integer"),
        ("recall", "needs a parameter"),
        ("recall_at_precision@1.5", "(0, 1]"),
        ("pair_f1@0.5", "'@t=T'"),
        ("medr@3", "takes no parameter"),
        ("pair_f1@t=abc", "not a number"),
    ],
)
def test_malformed_metric_names(name, fragment):
    with pytest.raises(rc.MetricNameError, match=None) as info:
        rc.parse_metric(name)
    assert fragment in str(info.value)


def test_accuracy_in_evaluate_points_to_the_right_function():
    with pytest.raises(rc.MetricNameError, match="retrieval_checks.accuracy"):
        rc.evaluate(X, query_labels=Y, metrics=["accuracy"])


def test_result_lookup_by_alias_and_order():
    res = rc.evaluate(X, query_labels=Y, metrics=["cmc@1", "mAP", "map"])
    assert list(res) == ["hit_rate@1", "map"]
    assert res["cmc@1"] == res["hit_rate@1"]
    assert "MAP" in res and "recall@3" not in res
    with pytest.raises(KeyError, match="was not computed"):
        res["recall@3"]


def test_names_and_ranges():
    rng = np.random.default_rng(0)
    with pytest.raises(rc.MetricNameError) as info:
        rc.parse_metric("hit_rate@0")
    assert info.value.suggestion != "hit_rate@0"
    big = np.full((4, 2), 1e39)
    with pytest.raises(rc.InputError, match="beyond float32 range"):
        rc.evaluate(big, query_labels=[0, 0, 1, 1], metrics=["map"], similarity="dot")
    X = rng.normal(size=(6, 3)).astype(np.float32)
    with pytest.raises(rc.InputError, match="at least 4 labels"):
        rc.evaluate(X, query_labels=[0, 0, 0, 1, 1, 1], metrics=["grouped_recall@1"], group_size=3)


@pytest.mark.parametrize(
    "name, suggestion",
    [
        ("recall_at_precision@90", "recall_at_precision@0.9"),
        ("RECALL_AT_PRECISION@90", "recall_at_precision@0.9"),
        ("Recall_At_Precision@90%", "recall_at_precision@0.9"),
        ("precision_at_recall@95", "precision_at_recall@0.95"),
        ("recall_at_precision@100", "recall_at_precision@1"),
        ("recall_at_precision@0.9%", "recall_at_precision@0.009"),
        ("pair_f1@0.5", "pair_f1@t=0.5"),
        ("PAIR_PRECISION@-0.25", "pair_precision@t=-0.25"),
        ("recall@K", "recall@10"),
        ("map@K", "map@10"),
        ("grouped_recall@k", "grouped_recall@10"),
        ("recall_at_precision@P", "recall_at_precision@0.9"),
        ("pair_f1@t=T", "pair_f1@t=0.5"),
        ("cmc@0", "hit_rate@K"),
        ("hitrate@5", "hit_rate@5"),
    ],
)
def test_suggestions_fix_scale_placeholders_and_aliases(name, suggestion):
    with pytest.raises(rc.MetricNameError) as info:
        metric_spec(name)
    assert info.value.suggestion == suggestion
    assert f"Did you mean '{suggestion}'" in str(info.value)


def _variants():
    """Names off by scale, case, parameter or spelling, around every template."""
    params = [
        "",
        "@0",
        "@-1",
        "@1.5",
        "@90",
        "@90%",
        "@150",
        "@nan",
        "@inf",
        "@K",
        "@P",
        "@t=T",
        "@t=nan",
        "@x",
        "@5@5",
        "@R5",
        "@ 0.5",
    ]
    out = []
    for template in rc.METRIC_TEMPLATES:
        base = template.partition("@")[0]
        for p in params:
            out += [base + p, base.upper() + p, base.title() + p]
    return sorted(set(out))


def test_a_suggestion_never_repeats_the_rejected_name_and_parses_when_concrete():
    checked = 0
    for name in _variants():
        try:
            metric_spec(name)
            continue
        except rc.MetricNameError as exc:
            sug, message = exc.suggestion, str(exc)
            checked += 1
        if sug is None:
            continue
        assert sug.replace(" ", "").lower() != name.replace(" ", "").lower(), name
        assert f"Did you mean '{name}'" not in message, name
        if not any(sug.endswith(p) for p in ("@K", "@P", "@Q", "@t=T", "@p", "@L")):
            assert metric_spec(sug).name == sug, (
                name,
                sug,
            )  # a concrete suggestion is a valid name
    assert checked > 300
