"""One evaluation cache: keyed by the content of the arrays and the options."""

from __future__ import annotations

import numpy as np

from retrieval_checks.engine import EvaluationCache, content_digest


def test_same_content_hits_other_content_misses():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4)).astype(np.float32)
    y = np.repeat(np.arange(8), 5)
    cache = EvaluationCache()
    a = cache.evaluate(X, query_labels=y, metrics=["map"], context={"model": "m", "dataset": "d"})
    b = cache.evaluate(
        X.copy(), query_labels=y.copy(), metrics=["map"], context={"model": "m", "dataset": "d"}
    )
    assert b is a and (cache.hits, cache.misses) == (1, 1)
    Z = X.copy()
    Z[0, 0] += 1e-3  # one value changed under the same names
    c = cache.evaluate(Z, query_labels=y, metrics=["map"], context={"model": "m", "dataset": "d"})
    assert c is not a and cache.misses == 2
    d = cache.evaluate(
        X,
        query_labels=y,
        metrics=["map"],
        ties="optimistic",
        context={"model": "m", "dataset": "d"},
    )
    assert d is not a and a.config["model"] == "m"


def test_digest_covers_dtype_shape_and_containers():
    a = np.arange(6, dtype=np.int64)
    assert content_digest(a) != content_digest(a.astype(np.int32))
    assert content_digest(a) != content_digest(a.reshape(2, 3))
    assert (
        content_digest({"q": [1, 2]})
        == content_digest({"q": [1, 2]})
        != content_digest({"q": [2, 1]})
    )
    assert content_digest(["1"]) != content_digest([1])
