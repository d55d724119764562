"""Example quality gates: image retrieval on scikit-learn's handwritten digits.

The data ships with scikit-learn (1797 8x8 images, 10 classes), so this runs
offline. The "model" is a linear discriminant projection fitted on the training
split; queries are the held-out images, the gallery is the training set. Each test
is one quality gate a team would keep in its model repository: a deployment is
blocked when any of them fails.

Run:  python -m pytest example_suites -v
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc

sklearn = pytest.importorskip("sklearn", reason="the digits example needs scikit-learn (pip install scikit-learn)")
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

METRICS = ["map", "map@R", "hit_rate@1", "precision@10", "mrr", "recall_at_precision@0.9", "discriminant_ratio",
           "grouped_recall@1"]
# digits has only 10 classes: groups of S=2 labels give r=5 groups; 5 partitions averaged
GROUPED = dict(group_size=2, group_repeats=5, confidence=0.95)


@pytest.fixture(scope="module")
def digits_embeddings():
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    model = LinearDiscriminantAnalysis(n_components=9).fit(X_train, y_train)
    production = PCA(n_components=9, random_state=0).fit(X_train)  # the model in production today
    return {
        "gallery": model.transform(X_train).astype(np.float32),
        "gallery_labels": y_train,
        "queries": model.transform(X_test).astype(np.float32),
        "query_labels": y_test,
        "production_queries": production.transform(X_test).astype(np.float32),
    }


@pytest.fixture(scope="module")
def test_result(digits_embeddings):
    """One engine pass serves every gate below."""
    e = digits_embeddings
    result = rc.evaluate(e["queries"], e["gallery"], query_labels=e["query_labels"],
                         gallery_labels=e["gallery_labels"], metrics=METRICS, **GROUPED)
    print(f"\n{result}")
    return result


@pytest.fixture(scope="module")
def train_result(digits_embeddings):
    """Leave-one-out on the training images: the other side of the generalization gap."""
    e = digits_embeddings
    return rc.evaluate(e["gallery"], query_labels=e["gallery_labels"], metrics=["map", "grouped_recall@1"], **GROUPED)


@pytest.fixture(scope="module")
def held_out_pair(digits_embeddings):
    """Candidate and production models on the same held-out queries (leave-one-out)."""
    e = digits_embeddings
    metrics = ["map", "hit_rate@1"]
    candidate = rc.evaluate(e["queries"], query_labels=e["query_labels"], metrics=metrics)
    production = rc.evaluate(e["production_queries"], query_labels=e["query_labels"], metrics=metrics)
    return candidate, production


def test_map_gate(test_result):
    rc.assert_map_at_least(test_result, 0.85)


def test_map_at_r_gate(test_result):
    rc.assert_map_at_least(test_result, 0.75, metric="map@R")


def test_top1_gate(test_result):
    rc.assert_recall_at_least(test_result, 0.95, k=1)  # hit_rate@1: metric learning's Recall@1


def test_recall_at_precision_gate(test_result):
    rc.assert_recall_at_precision(test_result, 0.70, precision=0.9)
    # the operating threshold that reaches 90% pair precision is reported too
    assert test_result.thresholds["recall_at_precision@0.9"] is not None


def test_embedding_space_is_separated(test_result):
    rc.assert_metric(test_result, "discriminant_ratio", at_least=2.0)


def test_grouped_recall_interval_gate(test_result):
    # fails when the 95% interval's lower bound is below the gate, not only the value
    rc.assert_grouped_recall_ci(test_result, at_least=0.95)


def test_generalization_gap_gate(train_result, test_result):
    # Welch interval of grouped_recall@1(train) - grouped_recall@1(test); the gate is on its upper bound
    gap = rc.generalization_gap(train_result, test_result, "grouped_recall@1")
    print(f"\n{gap}")
    rc.assert_gap_below(gap, below=0.05)


def test_candidate_is_not_worse_than_production(held_out_pair):
    candidate, production = held_out_pair
    # paired over the 10 classes (cluster-robust): queries of one class are not independent
    map_cmp = rc.compare(candidate, production, "map")
    print(f"\n{map_cmp}")
    rc.assert_not_worse(map_cmp, rule="non_inferior", margin=0.01)  # shown to lose at most 1 point
    top1_cmp = rc.compare(candidate, production, "hit_rate@1")
    print(f"\n{top1_cmp}")
    rc.assert_not_worse(top1_cmp)  # fails only on a significant drop: 10 classes cannot show more


def test_no_query_is_silently_dropped(test_result):
    assert test_result.n_skipped == 0
