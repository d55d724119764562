"""Definitions of the embedding-space and classification metrics."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc


def test_discriminant_ratio_and_accuracy():
    emb = np.array([[0.0, 0.0], [0.0, 2.0], [4.0, 0.0], [4.0, 2.0]])
    # class means (0,1) and (4,1); mu (2,1): Tr(S_B) = 2*4 + 2*4 = 16; Tr(S_W) = 4 * 1 = 4
    assert rc.discriminant_ratio(emb, [0, 0, 1, 1]) == pytest.approx(4.0)
    res = rc.evaluate(
        emb.astype(np.float32) + 1, query_labels=[0, 0, 1, 1], metrics=["discriminant_ratio"]
    )
    assert res["discriminant_ratio"] == pytest.approx(4.0)
    acc = rc.accuracy(np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]), np.array([1, 1, 1]))
    assert acc.value == pytest.approx(2 / 3) and acc.n_correct == 2 and float(acc) == acc.value
    assert rc.accuracy(["a", "b"], ["a", "a"]).value == 0.5
    with pytest.raises(rc.InputError, match="cover 2 samples but labels cover 3"):
        rc.accuracy([0, 1], [0, 1, 1])


def test_discriminant_ratio_torch_with_string_labels():
    torch = pytest.importorskip("torch")
    emb = np.array([[0.0, 0.0], [0.0, 2.0], [4.0, 0.0], [4.0, 2.0]])
    assert float(
        rc.discriminant_ratio(torch.from_numpy(emb), ["a", "a", "b", "b"])
    ) == pytest.approx(4.0)
