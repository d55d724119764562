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
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

METRICS = ["map", "map@R", "hit_rate@1", "precision@10", "mrr", "recall_at_precision@0.9", "discriminant_ratio"]


@pytest.fixture(scope="module")
def digits_embeddings():
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    model = LinearDiscriminantAnalysis(n_components=9).fit(X_train, y_train)
    return {
        "gallery": model.transform(X_train).astype(np.float32),
        "gallery_labels": y_train,
        "queries": model.transform(X_test).astype(np.float32),
        "query_labels": y_test,
    }


@pytest.fixture(scope="module")
def test_result(digits_embeddings):
    """One engine pass serves every gate below."""
    e = digits_embeddings
    result = rc.evaluate(e["queries"], e["gallery"], query_labels=e["query_labels"],
                         gallery_labels=e["gallery_labels"], metrics=METRICS)
    print(f"\n{result}")
    return result


@pytest.fixture(scope="module")
def train_result(digits_embeddings):
    e = digits_embeddings
    return rc.evaluate(e["gallery"], query_labels=e["gallery_labels"], metrics=["map"])


def gate(result, name, at_least):
    value = result[name]
    assert value >= at_least, (
        f"{name} = {value:.4f} is below the gate {at_least} by {at_least - value:.4f} "
        f"({result.n_used} queries, {result.n_skipped} skipped)"
    )


def test_map_gate(test_result):
    gate(test_result, "map", 0.85)


def test_map_at_r_gate(test_result):
    gate(test_result, "map@R", 0.75)


def test_top1_gate(test_result):
    gate(test_result, "hit_rate@1", 0.95)


def test_recall_at_precision_gate(test_result):
    gate(test_result, "recall_at_precision@0.9", 0.70)
    # the operating threshold that reaches 90% pair precision is reported too
    assert test_result.thresholds["recall_at_precision@0.9"] is not None


def test_embedding_space_is_separated(test_result):
    gate(test_result, "discriminant_ratio", 2.0)


def test_generalization_gap_of_map(train_result, test_result):
    gap = train_result["map"] - test_result["map"]
    assert gap <= 0.05, f"map fell by {gap:.4f} from train to test (limit 0.05)"


def test_no_query_is_silently_dropped(test_result):
    assert test_result.n_skipped == 0
