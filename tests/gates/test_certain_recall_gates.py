"""A recall at a K that reaches past every non-relevant candidate is 1 whatever the
model: a threshold on it is a gate that could never fail, and is refused."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc


@pytest.fixture(scope="module")
def loo():
    rng = np.random.default_rng(0)
    y = np.arange(30) % 10  # 3 items per class: 29 candidates, 2 other relevant per query
    return rc.evaluate(
        rng.normal(size=(30, 4)),
        query_labels=y,
        metrics=["hit_rate@27", "hit_rate@28", "recall@28", "recall@29", "hit_rate@1"],
    )


@pytest.fixture(scope="module")
def small_it():
    rng = np.random.default_rng(1)
    metrics = list(rc.IMAGE_TEXT_METRICS) + ["i2t_recall@16", "i2t_recall@15"]
    return rc.evaluate_image_text(
        rng.normal(size=(4, 6)),
        rng.normal(size=(20, 6)),
        np.repeat(np.arange(4), 5),
        metrics=metrics,
        n_resamples=0,
    )


@pytest.mark.parametrize("metric, certain", [("hit_rate@28", 28), ("recall@29", 29)])
@pytest.mark.parametrize("bound", ["at_least", "at_most"])
def test_a_recall_certain_to_be_one_cannot_be_gated(loo, metric, certain, bound):
    assert loo[metric] == 1.0
    with pytest.raises(
        rc.InputError, match=rf"{metric}: K=\d+ reaches .*could never fail.*< {certain}"
    ):
        rc.assert_metric(loo, metric, **{bound: 0.5})


@pytest.mark.parametrize("metric", ["hit_rate@27", "recall@28", "hit_rate@1"])
def test_a_recall_that_can_still_miss_is_gated(loo, metric):
    rc.assert_metric(loo, metric, at_least=0.01)


def test_the_wrappers_refuse_it_too(loo):
    with pytest.raises(rc.InputError, match="could never fail"):
        rc.assert_recall_at_least(loo, 0.5, k=28)


@pytest.mark.parametrize("metric", ["t2i_recall@5", "t2i_recall@10", "i2t_recall@16"])
def test_image_text_recall_past_the_gallery_is_refused(small_it, metric):
    assert small_it[metric] == 1.0
    with pytest.raises(rc.InputError, match="could never fail"):
        rc.assert_metric(small_it, metric, at_least=0.5)


def test_image_text_certain_k_is_recorded(small_it):
    assert small_it.config["certain_k"] == {"i2t": 16, "t2i": 4}


def test_image_text_recall_below_the_certain_k_is_gated(small_it):
    with pytest.raises(AssertionError):
        rc.assert_metric(small_it, "t2i_recall@1", at_least=0.99)
    rc.assert_metric(small_it, "i2t_recall@15", at_least=0.01)  # 15 < 16: a query can still miss
