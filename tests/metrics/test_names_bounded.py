"""Metric names are read with bounds: a parameter of thousands of digits is a clear
MetricNameError (the metric, the limit, the fix), never a traceback or a hang, and a
level is the exact decimal its name writes (issue 25)."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

import retrieval_checks as rc
from retrieval_checks.metrics import metric_spec
from retrieval_checks.metrics._names import MAX_LEVEL_PLACES, MAX_PARAM_CHARS

HUGE = [
    "recall@" + "9" * 5000,  # int() of 5000 digits raised ValueError (Python's 4300-digit limit)
    "recal@" + "9" * 5000,  # the same, in the suggestion of a misspelt name
    "hit_rate@" + "1" * 100_000,
    "recall_at_precision@0." + "9" * 5000,  # was read as recall_at_precision@1 (float rounding)
    "recall_at_precision@0." + "0" * 5000 + "1",
    "precision_at_recall@0." + "5" * 5000,
    "pair_f1@t=" + "1" * 5000,
    "pair_precision@t=0." + "1" * 5000,
    "map@" + "1" * 4301,
]


@pytest.mark.parametrize("name", HUGE, ids=lambda n: f"{n[:24]}...({len(n)})")
def test_a_huge_parameter_is_a_bounded_clear_error(name):
    t0 = time.perf_counter()
    with pytest.raises(rc.MetricNameError) as info:
        metric_spec(name)
    assert time.perf_counter() - t0 < 1.0
    message = str(info.value)
    assert f"at most {MAX_PARAM_CHARS}" in message and "characters" in message
    assert len(message) < 600
    base = name.partition("@")[0]
    assert base[:20] in message  # names the metric
    assert "e.g." in message  # and the fix


@pytest.mark.parametrize(
    "name",
    [
        "recall_at_precision@1e-99999999",
        "recall_at_precision@0." + "0" * 30 + "1",
        "precision_at_recall@1e-31",
    ],
)
def test_a_level_with_too_many_decimal_places_is_refused_quickly(name):
    t0 = time.perf_counter()
    with pytest.raises(rc.MetricNameError, match=f"at most {MAX_LEVEL_PLACES}"):
        rc.parse_metric(name)
    assert time.perf_counter() - t0 < 1.0  # Fraction('1e-99999999') builds a 10^8-digit integer


@pytest.mark.parametrize(
    "name, canonical, exact",
    [
        ("recall_at_precision@0.9", "recall_at_precision@0.9", Fraction(9, 10)),
        ("recall_at_precision@.90", "recall_at_precision@0.9", Fraction(9, 10)),
        ("recall_at_precision@9e-1", "recall_at_precision@0.9", Fraction(9, 10)),
        ("precision_at_recall@1.0", "precision_at_recall@1", Fraction(1)),
        ("recall_at_precision@1e-5", "recall_at_precision@1e-05", Fraction(1, 100000)),
        ("recall_at_precision@0.3", "recall_at_precision@0.3", Fraction(3, 10)),
        # a level the float cannot hold keeps its own name: it is not the level 0.9
        (
            "recall_at_precision@0.90000000000000000001",
            "recall_at_precision@0.90000000000000000001",
            Fraction(90000000000000000001, 10**20),
        ),
        (
            "recall_at_precision@0.99999999999999999999",
            "recall_at_precision@0.99999999999999999999",
            1 - Fraction(1, 10**20),
        ),
    ],
)
def test_levels_are_exact_decimals(name, canonical, exact):
    spec = rc.parse_metric(name)
    assert spec.name == canonical and spec.level_fraction == exact
    assert (
        rc.parse_metric(spec.name).level_fraction == exact
    )  # the canonical name reads back the same


def test_a_long_but_bounded_cut_off_still_reaches_the_gallery_check():
    spec = rc.parse_metric("recall@" + "1" * 30)
    assert spec.k == int("1" * 30)
