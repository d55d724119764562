"""Sparse or data-less embeddings given to evaluate / evaluate_image_text: an
InputError naming the argument and the fix (densify), not "dtype object" or a torch
traceback."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc

torch = pytest.importorskip("torch")
sp = pytest.importorskip("scipy.sparse")
X = np.random.default_rng(0).random((6, 4)).astype(np.float32)
Y = np.array([0, 0, 1, 1, 2, 2])

KINDS = {
    "scipy_csr": (lambda: sp.csr_matrix(X), r"sparse.*\.toarray\(\)"),
    "scipy_coo_array": (lambda: sp.coo_array(X), r"sparse.*\.toarray\(\)"),
    "torch_sparse": (lambda: torch.from_numpy(X).to_sparse(), r"sparse.*\.to_dense\(\)"),
    "torch_meta": (lambda: torch.empty(6, 4, device="meta"), r"meta device.*no data"),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("side", ["queries", "gallery"])
def test_evaluate_names_sparse_or_dataless_embeddings(kind, side):
    make, message = KINDS[kind]
    args = (make(), X) if side == "queries" else (X, make())
    with pytest.raises(rc.InputError, match=rf"^{side} .*{message}"):
        rc.evaluate(*args, query_labels=Y, gallery_labels=Y, metrics=["map"])


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_evaluate_image_text_names_sparse_embeddings(kind):
    make, message = KINDS[kind]
    with pytest.raises(rc.InputError, match=rf"images .*{message}"):
        rc.evaluate_image_text(make(), X, caption_image=np.arange(6), metrics=["rsum"])


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_evaluation_cache_does_not_trip_over_them(kind):
    from retrieval_checks.engine._cache import EvaluationCache

    make, message = KINDS[kind]
    with pytest.raises(rc.InputError, match=rf"^queries .*{message}"):
        EvaluationCache().evaluate(make(), query_labels=Y, metrics=["map"])


def test_the_evaluation_cache_keys_bfloat16_and_sparse_tensors_by_content():
    from retrieval_checks.engine._cache import EvaluationCache, content_digest

    t = torch.from_numpy(X)
    cache = EvaluationCache()
    got = cache.evaluate(t.to(torch.bfloat16), query_labels=Y, metrics=["map"])
    assert got["map"] == rc.evaluate(t.to(torch.bfloat16), query_labels=Y, metrics=["map"])["map"]
    assert cache.misses == 1
    cache.evaluate(t.to(torch.bfloat16), query_labels=Y, metrics=["map"])
    assert cache.hits == 1
    assert content_digest(t.to(torch.bfloat16)) != content_digest(
        t.to(torch.bfloat16).float()
    )  # dtype counts
    assert content_digest(t.to_sparse()) == content_digest(t.to_sparse())
    assert content_digest(t.to_sparse()) != content_digest((t + 1).to_sparse())
