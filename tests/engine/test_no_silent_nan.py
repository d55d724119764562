"""A per-query NaN that is not a skipped (counted) query fails the evaluation in every
entry point that averages per-query values; before, the mean left it out with
n_skipped 0 (issue 25)."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.engine import _ann
from retrieval_checks.errors import RetrievalChecksError


def test_ann_recall_refuses_a_nan_per_query_value(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 4)).astype(np.float32)
    nb = np.argsort(-(X @ X.T), axis=1)[:, 1:4]
    assert (
        rc.ann_recall(X, X, nb, k=3, query_ids=np.arange(12), gallery_ids=np.arange(12))[
            "ann_recall@3"
        ]
        > 0
    )
    real = _ann._hits

    def broken(*args):
        hits = np.asarray(real(*args), np.float64)
        hits[4] = np.nan
        return hits

    monkeypatch.setattr(_ann, "_hits", broken)
    with pytest.raises(RetrievalChecksError, match=r"ann_recall@3: 1 of 12 queries .*query 4"):
        rc.ann_recall(X, X, nb, k=3, query_ids=np.arange(12), gallery_ids=np.arange(12))
