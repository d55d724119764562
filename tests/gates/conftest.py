"""Results the gate tests of several files share (test_assertions.py, test_baselines.py,
test_events.py), each evaluated once per module that uses it: small problems, well
under a second in all."""

from __future__ import annotations

import numpy as np
import pytest
from shared_setup import labelled_clusters

import retrieval_checks as rc

_METRICS = ["map", "hit_rate@1", "medr", "grouped_recall@1", "recall_at_precision@0.5"]


@pytest.fixture(scope="module")
def res():
    """40 classes of 5 items: map, hit_rate@1, medr, grouped_recall@1 (groups of 3) and
    recall_at_precision@0.5; no query skipped."""
    X, y = labelled_clusters(classes=40)
    return rc.evaluate(X, query_labels=y, metrics=_METRICS, group_size=3)


@pytest.fixture(scope="module")
def skipped():
    """100 queries used, 10 skipped (singleton classes under leave-one-out)."""
    X, y = labelled_clusters(singletons=10, noise=0.5)
    r = rc.evaluate(X, query_labels=y, metrics=_METRICS, group_size=3)
    assert r.n_used == 100 and r.n_skipped == 10 and r["recall_at_precision@0.5"] > 0.001
    return rc.evaluate(X, query_labels=y, metrics=_METRICS, group_size=3)


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
