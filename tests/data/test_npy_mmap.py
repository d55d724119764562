"""``.npy`` embeddings are memory-mapped copy-on-write: nothing is read before the engine
needs it, the array is writable, and writes never reach the file."""

from __future__ import annotations

import numpy as np

import retrieval_checks as rc
from retrieval_checks.data import read_npy


def test_npy_is_mapped_copy_on_write_and_evaluates(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 16)).astype(np.float32)
    path = tmp_path / "emb.npy"
    np.save(path, X)
    arr = read_npy(path)
    mapped = arr
    while mapped is not None and not isinstance(mapped, np.memmap):
        mapped = mapped.base
    assert mapped is not None and mapped.mode == "c" and arr.flags.writeable
    y = np.arange(300) % 10
    assert (
        rc.evaluate(arr, query_labels=y, metrics=["map"])["map"]
        == rc.evaluate(X, query_labels=y, metrics=["map"])["map"]
    )
    arr[0, 0] = 123.0
    np.testing.assert_array_equal(np.load(path), X)  # the file is untouched
