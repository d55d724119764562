"""Gaps and intervals that say nothing (issue 25): a generalization gap with train and
test swapped, the same result on both sides, and intervals resting on fewer than
MIN_INTERVAL_UNITS groups or classes. Each is refused or warned about
(:class:`retrieval_checks.errors.IntervalWarning`) and recorded on the result."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.errors import IntervalWarning
from retrieval_checks.stats._intervals import MIN_INTERVAL_UNITS

METRICS = ["hit_rate@1", "map", "grouped_recall@1"]


def _data(seed, classes, per=5, d=16, noise=1.0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), per)
    x = (rng.normal(size=(classes, d))[y] * 2 + noise * rng.normal(size=(classes * per, d))).astype(
        np.float32
    )
    return x, y


def _evaluate(seed, classes, noise, **kw):
    x, y = _data(seed, classes, noise=noise)
    return rc.evaluate(x, query_labels=y, metrics=METRICS, **kw)


@pytest.fixture(scope="module")
def sides():
    """(train, test): 60 classes each, train well separated, test noisy; grouped recall
    in 10 groups of 6 labels (enough units: no few-units warning)."""
    return (_evaluate(0, 60, 0.5, group_size=6), _evaluate(1, 60, 2.5, group_size=6))


def _caught(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [w for w in caught if issubclass(w.category, IntervalWarning)]


@pytest.mark.parametrize("metric", METRICS)
def test_a_swapped_gap_warns_and_records_it(sides, metric):
    train, test = sides
    gap, caught = _caught(lambda: rc.generalization_gap(test, train, metric))
    assert gap.high < 0  # the whole interval below zero
    assert [str(w.message) for w in caught if "swapped" in str(w.message)], [
        str(w.message) for w in caught
    ]
    assert any("train and test look swapped" in n for n in gap.notes)
    assert issubclass(
        IntervalWarning, RuntimeWarning
    )  # existing RuntimeWarning filters still see it


@pytest.mark.parametrize("metric", METRICS)
def test_a_gap_the_right_way_round_says_nothing_about_sides(sides, metric):
    train, test = sides
    gap, caught = _caught(lambda: rc.generalization_gap(train, test, metric))
    assert gap.low > 0
    assert not caught and gap.notes == ()


@pytest.mark.parametrize("metric", METRICS)
def test_the_same_result_on_both_sides_is_refused(sides, metric):
    train, _ = sides
    with pytest.raises(rc.InputError, match="same result"):
        rc.generalization_gap(train, train, metric)


@pytest.mark.parametrize("metric", METRICS)
def test_two_evaluations_of_the_same_data_are_refused(metric):
    a, b = _evaluate(3, 30, 1.5, group_size=3), _evaluate(3, 30, 1.5, group_size=3)
    assert a is not b
    with pytest.raises(rc.InputError, match="same data"):
        rc.generalization_gap(a, b, metric)


def test_the_same_data_evaluated_with_other_metrics_is_refused():
    """One side also computed map (its first relevant ranks filled), the other grouped
    recall alone (ranks left 0): the zeros are not evidence of other data, and the gap of
    0 of one dataset passed assert_gap_below (h18). Different data still makes a gap."""
    x, y = _data(3, 30, noise=1.5)
    with_map = rc.evaluate(x, query_labels=y, metrics=["grouped_recall@1", "map"], group_size=3)
    alone = rc.evaluate(x, query_labels=y, metrics=["grouped_recall@1"], group_size=3)
    for a, b in ((with_map, alone), (alone, with_map)):
        with pytest.raises(rc.InputError, match="same data.*same grouped_recall@1"):
            rc.generalization_gap(a, b, "grouped_recall@1")
    x2, y2 = _data(4, 30, noise=1.5)
    other = rc.evaluate(x2, query_labels=y2, metrics=["grouped_recall@1"], group_size=3)
    rc.generalization_gap(with_map, other, "grouped_recall@1")


def test_same_label_layout_on_different_data_is_a_gap(sides):
    # train and test built with the same label layout (np.repeat(arange(60), 5)) but
    # different embeddings: the same fingerprint, different ranks, a real gap
    train, test = sides
    assert np.array_equal(train.query_labels(), test.query_labels())
    assert rc.generalization_gap(train, test, "map").value > 0.3


def test_accuracy_gap_refuses_the_same_result_and_the_same_data():
    a = rc.accuracy([0, 1, 1, 2, 0, 2], [0, 1, 0, 2, 1, 2])
    with pytest.raises(rc.InputError, match="same result"):
        rc.generalization_gap(a, a)
    with pytest.raises(rc.InputError, match="same data"):
        rc.generalization_gap(a, rc.accuracy([0, 1, 1, 2, 0, 2], [0, 1, 0, 2, 1, 2]))
    # all correct on both sides with the same labels: nothing tells the sets apart, so
    # this is a gap of 0 (not refused), but it is said
    perfect = [0, 1, 2, 0, 1, 2]
    gap, caught = _caught(
        lambda: rc.generalization_gap(rc.accuracy(perfect, perfect), rc.accuracy(perfect, perfect))
    )
    assert gap.value == 0
    assert any("identical" in str(w.message) for w in caught)


def test_a_class_bootstrap_on_few_classes_warns_and_records_it():
    few = _evaluate(4, MIN_INTERVAL_UNITS - 1, 1.5, group_size=2)
    iv, caught = _caught(lambda: rc.bootstrap_interval(few, "map"))
    assert iv.n == MIN_INTERVAL_UNITS - 1 and iv.unit == "classes"
    assert (
        caught
        and "4 classes" in str(caught[0].message)
        and "more classes" in str(caught[0].message)
    )
    assert iv.notes and "fewer than 5" in iv.notes[0]
    enough = _evaluate(4, MIN_INTERVAL_UNITS, 1.5, group_size=2)
    iv, caught = _caught(lambda: rc.bootstrap_interval(enough, "map"))
    assert not caught and iv.notes == ()


def test_a_gap_on_few_groups_or_classes_warns_and_records_it():
    train, test = (
        _evaluate(5, 12, 0.5, group_size=3),
        _evaluate(6, 12, 2.5, group_size=3),
    )  # 4 groups a side
    gap, caught = _caught(lambda: rc.generalization_gap(train, test, "grouped_recall@1"))
    assert (gap.n_first, gap.unit) == (4, "groups")
    assert any("4 groups" in str(w.message) and "group_size" in str(w.message) for w in caught)
    assert any("group_size" in n for n in gap.notes)
    train, test = (
        _evaluate(5, 4, 0.5, group_size=2),
        _evaluate(6, 4, 2.5, group_size=2),
    )  # 4 classes a side
    gap, caught = _caught(lambda: rc.generalization_gap(train, test, "map"))
    assert any("4 classes" in str(w.message) for w in caught)


def test_split_difference_says_nothing_about_swapped_sides():
    # two halves of one population are exchangeable: a difference below zero is not "swapped"
    classes, per = 40, 5
    rng = np.random.default_rng(7)
    y = np.repeat(np.arange(classes), per)
    half_a = np.random.default_rng(0).permutation(np.arange(classes))[
        : classes // 2
    ]  # split_difference's seed 0
    noise = np.where(np.isin(y, half_a), 2.5, 0.3)[:, None]  # half A noisy: its metric is far lower
    x = (
        rng.normal(size=(classes, 16))[y] * 2 + noise * rng.normal(size=(classes * per, 16))
    ).astype(np.float32)
    gap, caught = _caught(lambda: rc.split_difference(x, y, metric="map", seed=0))
    assert gap.high < 0 and gap.labels == ("half A", "half B")
    assert not [w for w in caught if "swapped" in str(w.message)] and not gap.notes


def test_a_correlation_over_few_models_warns():
    # Fisher-z intervals on 4 models span most of [-1, 1]
    gaps = [0.05, 0.10, 0.20, 0.30]
    rows, caught = _caught(lambda: rc.correlate_with_gap({"m": [0.9, 0.7, 0.6, 0.2]}, gaps))
    assert rows[0].n_models == 4 and any("4 models" in str(w.message) for w in caught)
    rows, caught = _caught(
        lambda: rc.correlate_with_gap({"m": [0.9, 0.7, 0.6, 0.2, 0.1]}, gaps + [0.4])
    )
    assert not caught


def test_same_data_with_ids_on_one_side_only_is_refused_not_crashed():
    # ids given on one side only (None against an array) raised numpy's "truth value of an array"
    x, y = _data(3, 30, noise=1.5)
    a = rc.evaluate(x, query_labels=y, metrics=["map"])
    b = rc.evaluate(x, query_labels=y, metrics=["map"], query_ids=np.arange(len(y)))
    with pytest.raises(rc.InputError, match="same data"):
        rc.generalization_gap(a, b, "map")
    other = rc.evaluate(
        _data(4, 30, noise=1.5)[0], query_labels=y, metrics=["map"], query_ids=np.arange(len(y))
    )
    assert rc.generalization_gap(a, other, "map").n_first == 30


def _sized(n_classes: int, seed: int):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), 2)
    c = rng.normal(size=(n_classes, 8))
    x = c[y] + 0.5 * rng.normal(size=(2 * n_classes, 8))
    return rc.evaluate(x, query_labels=y, metrics=["hit_rate@1", "grouped_recall@1"], group_size=5)


def test_a_gap_between_sets_of_different_sizes_says_so():
    """hit_rate@1 falls as the gallery grows: a gap between 60 and 40 classes mixes the
    model with the sizes (a new user's trial found no word of it); grouped recall's gap,
    made for this, and sets of one size have no such note."""
    big, small = _sized(60, 0), _sized(40, 1)
    with pytest.warns(rc.IntervalWarning, match=r"train 60 classes, test 40.*grouped_recall@K"):
        gap = rc.generalization_gap(big, small, "hit_rate@1")
    assert any("differ in size" in n for n in gap.notes)
    with warnings.catch_warnings():
        warnings.simplefilter("error", rc.IntervalWarning)
        rc.generalization_gap(_sized(60, 2), _sized(60, 3), "hit_rate@1")
        grouped = rc.generalization_gap(big, small, "grouped_recall@1")
    assert not any("differ in size" in n for n in grouped.notes)
