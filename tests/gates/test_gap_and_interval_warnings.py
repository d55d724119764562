"""Gates on gaps and intervals that say nothing (issue 25): a gap gate on a gap whose
interval lies below zero (train and test swapped) and interval gates on fewer than
MIN_INTERVAL_UNITS groups or classes warn (:class:`retrieval_checks.errors.IntervalWarning`)
and record it on their event; the grouped-recall message states consistent statistics."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
from shared_setup import run_gate

import retrieval_checks as rc
from retrieval_checks.errors import IntervalWarning

METRICS = ["hit_rate@1", "map", "grouped_recall@1"]


def _evaluate(seed, classes, noise, **kw):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), 5)
    x = (rng.normal(size=(classes, 16))[y] * 2 + noise * rng.normal(size=(classes * 5, 16))).astype(
        np.float32
    )
    return rc.evaluate(x, query_labels=y, metrics=METRICS, **kw)


@pytest.fixture(scope="module")
def sides():
    return _evaluate(0, 60, 0.5, group_size=6), _evaluate(1, 60, 2.5, group_size=6)


@pytest.fixture(scope="module")
def few():
    """4 classes (so 4 classes for a class bootstrap) and 4 groups of 3 of 12 classes."""
    return _evaluate(2, 4, 1.5, group_size=2), _evaluate(3, 12, 1.5, group_size=3)


def _run(gate):
    return run_gate(gate, IntervalWarning)


@pytest.mark.parametrize("metric", METRICS)
def test_a_gap_gate_on_a_swapped_gap_warns_and_records_it(sides, metric):
    train, test = sides
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gap = rc.generalization_gap(test, train, metric)
    events, caught, error = _run(lambda: rc.assert_gap_below(gap, below=0.05))
    assert error is None  # the gate's rule is the user's: it warns, it does not decide
    (event,) = events
    assert any("train and test look swapped" in w for w in event.warnings)
    assert event.extra.get("sides_swapped") is True and event.to_dict()["sides_swapped"] is True
    assert (
        not caught
    )  # generalization_gap warned already; the gate records it without a second warning


def test_a_gap_gate_checks_the_sign_itself(sides):
    # a Gap built by hand (or kept from an older version) carries no notes: the gate still sees it
    gap = rc.Gap(
        "map",
        -0.7,
        -0.75,
        -0.65,
        0.95,
        "percentile bootstrap over classes",
        0.3,
        1.0,
        60,
        60,
        "classes",
    )
    events, caught, error = _run(lambda: rc.assert_gap_below(gap, below=0.05))
    assert error is None and any("swapped" in w for w in caught)
    assert any("swapped" in w for w in events[0].warnings)
    straight = rc.Gap(
        "map",
        0.7,
        0.65,
        0.75,
        0.95,
        "percentile bootstrap over classes",
        1.0,
        0.3,
        60,
        60,
        "classes",
    )
    events, caught, error = _run(lambda: rc.assert_gap_below(straight, below=0.8))
    assert (
        error is None
        and not caught
        and not events[0].warnings
        and "sides_swapped" not in events[0].extra
    )


def test_a_gap_gate_on_few_units_warns(few):
    gap = rc.Gap(
        "map", 0.1, -0.3, 0.5, 0.95, "percentile bootstrap over classes", 0.9, 0.8, 4, 60, "classes"
    )
    events, caught, error = _run(lambda: rc.assert_gap_below(gap, below=0.6))
    assert error is None and any("4 classes" in w for w in caught)
    assert any("fewer than 5" in w for w in events[0].warnings)


def test_grouped_recall_gate_on_few_groups_warns_and_records_it(few):
    _, grouped = few
    g = grouped.grouped["grouped_recall@1"]
    assert g.n_groups == 4
    events, caught, error = _run(lambda: rc.assert_grouped_recall_ci(grouped, at_least=0.05))
    assert error is None
    (text,) = [w for w in caught if "4 groups" in w]
    assert "group_size" in text and "fewer than 5" in text
    assert text.split(": ", 1)[-1] in " ".join(events[0].warnings)
    # on the value no interval decides: no warning about one
    events, caught, error = _run(
        lambda: rc.assert_grouped_recall_ci(grouped, at_least=0.05, on="value")
    )
    assert not caught and not events[0].warnings


def test_class_bootstrap_gate_on_few_classes_warns(few):
    four, _ = few
    events, caught, _ = _run(lambda: rc.assert_metric(four, "map", at_least=0.05, on="interval"))
    assert any("4 classes" in w and "more classes" in w for w in caught)
    assert any("4 classes" in w for w in events[0].warnings)


def test_comparison_gate_on_few_classes_warns(few):
    four, _ = few
    other = _evaluate(2, 4, 2.5, group_size=2)  # the same labels, noisier embeddings
    c = rc.compare(other, four, "map")
    assert (c.n, c.unit) == (4, "classes")
    events, caught, _ = _run(lambda: rc.assert_not_worse(c, margin=0.5))
    assert any("4 classes" in w for w in caught)
    assert any("4 classes" in w for w in events[0].warnings)


def test_grouped_recall_message_states_consistent_statistics():
    """The layout line showed the first partition's spread s beside the standard error
    averaged over all partitions: s / sqrt(r) was not the standard error shown."""
    r = _evaluate(5, 60, 2.0, group_size=6, group_repeats=3)
    g = r.grouped["grouped_recall@1"]
    with pytest.raises(AssertionError) as info:
        rc.assert_grouped_recall_ci(r, at_least=min(0.999, g.high + 0.01))
    msg = str(info.value)
    s = float(re.search(r"spread of the group values s=([0-9.]+)", msg).group(1))
    se = float(re.search(r"standard error s/sqrt\(r\)=([0-9.]+)", msg).group(1))
    assert se == pytest.approx(s / math.sqrt(g.n_groups), abs=1e-4)
    assert se == pytest.approx(g.std_error, abs=1e-4)
    assert "each the mean over the 3 partitions" in msg
    assert f"s={g.group_std:.4f}" in msg  # the first partition's spread, said to be that


def test_an_interval_over_few_images_warns_too():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(4, 6))
    captions = np.repeat(images, 5, axis=0) + 0.8 * rng.normal(size=(20, 6))
    res = rc.evaluate_image_text(images, captions, np.repeat(np.arange(4), 5), n_resamples=200)
    # (rsum of 4 images is refused: t2i_recall@5 and @10 are 1 whatever the model)
    events, caught, _ = _run(
        lambda: rc.assert_metric(res, "i2t_recall@1", at_least=0.1, on="interval")
    )
    assert any("4 images" in w for w in caught) and any("4 images" in w for w in events[0].warnings)


def test_a_swapped_accuracy_gap_warns_at_the_gate():
    y = np.repeat(np.arange(4), 10)
    wrong = np.where(np.arange(40) % 2 == 0, y, (y + 1) % 4)  # half of the training samples right
    train, test = (
        rc.accuracy(wrong, y),
        rc.accuracy(y, y),
    )  # test all right: train and test swapped?
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gap = rc.generalization_gap(train, test)
    assert gap.high < 0 and any(
        "swapped" in str(w.message) for w in caught if w.category is IntervalWarning
    )
    events, _, error = _run(lambda: rc.assert_gap_below(gap, below=0.1))
    assert error is None and events[0].extra["sides_swapped"] is True


def test_a_failing_interval_gate_on_few_units_says_why_in_its_message(few):
    four, grouped = few
    _, _, error = _run(lambda: rc.assert_grouped_recall_ci(grouped, at_least=0.99))
    assert (
        error is not None
        and "note: assert_grouped_recall_ci: grouped_recall@1: its interval rests on 4 groups"
        in str(error)
        and "smaller group_size" in str(error)
    )
    gap = rc.Gap(
        "map", 0.1, -0.3, 0.5, 0.95, "percentile bootstrap over classes", 0.9, 0.8, 4, 60, "classes"
    )
    _, _, error = _run(lambda: rc.assert_gap_below(gap, below=0.2))
    assert (
        error is not None
        and "note: map gap, train side: its interval rests on 4 classes" in str(error)
    )
    c = rc.compare(_evaluate(2, 4, 2.5, group_size=2), four, "map")
    _, _, error = _run(lambda: rc.assert_not_worse(c, rule="non_inferior", margin=0.001))
    assert (
        error is not None
        and "note: assert_not_worse: map difference: its interval rests on 4 classes" in str(error)
    )


@pytest.mark.parametrize("below, never", [(1.5, "never fail"), (-1.5, "never pass")])
def test_a_gap_bound_outside_the_gaps_range_names_the_gaps_range(below, never):
    """A gap of fractions lies in [-1, 1] (the message said the metric's [0, 1])."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(20), 3)
    c = rng.normal(size=(20, 8))
    train = rc.evaluate(c[y] + 0.4 * rng.normal(size=(60, 8)), query_labels=y, metrics=["map"])
    test = rc.evaluate(c[y] + 0.6 * rng.normal(size=(60, 8)), query_labels=y, metrics=["map"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gap = rc.generalization_gap(train, test, "map")
    with pytest.raises(
        rc.InputError, match=rf"{never} \(map gap: .*a gap's attainable range \[-1, 1\]\)"
    ):
        rc.assert_gap_below(gap, below=below)
