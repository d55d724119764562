"""recall@K with class labels (the metric-learning setting) says, in its measurement and
gate messages, that metric learning's "Recall@K" is hit_rate@K (METRICS.md): a user who
wrote recall@1 for the papers' Recall@1 sees 0.02 against 0.9 and the reason why
(issue 25). Nothing is added with explicit relevance or for other metrics."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 4)).astype(np.float32)
Y = np.arange(40) % 4


def _naming(result, name):
    return [d for d in result.measure(name).details if d.startswith("naming:")]


def test_recall_on_class_labels_points_to_hit_rate():
    res = rc.evaluate(X, query_labels=Y, metrics=["recall@1", "recall@5", "hit_rate@1", "map"])
    (line,) = _naming(res, "recall@1")
    assert "hit_rate@1" in line and '"Recall@1"' in line
    assert "hit_rate@5" in _naming(res, "recall@5")[0]
    assert _naming(res, "hit_rate@1") == [] and _naming(res, "map") == []
    with pytest.raises(
        AssertionError,
        match=r"(?s)recall@1 value .*naming: recall@1 is retrieval recall.*"
        r'"Recall@1".* is hit_rate@1',
    ):
        rc.assert_metric(res, "recall@1", at_least=0.9)


def test_no_hint_with_explicit_relevance():
    rel = Y[:, None] == Y[None, :]
    np.fill_diagonal(rel, False)
    res = rc.evaluate(
        X,
        X,
        relevance=rel,
        metrics=["recall@1"],
        query_ids=np.arange(40),
        gallery_ids=np.arange(40),
    )
    assert _naming(res, "recall@1") == []
