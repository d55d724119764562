"""Parquet columns keep their types (issue 14): scalar columns go through arrow's
vectorised ``to_numpy`` (int64 labels stay int64, not float; int32, bool and float64
as written; texts and dictionary-encoded texts as numpy strings), list columns of
integers keep their integer type (binary codes, token ids) and list columns of floats
become float32, the engine's precision. Each array equals the one written."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.data import read_arrays

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _table(n=50, seed=0):
    rng = np.random.default_rng(seed)
    cols = {
        "labels": rng.integers(
            0, 2**40, n
        ),  # int64 beyond float32's and near float64's exact range
        "small": rng.integers(-5, 5, n).astype(np.int32),
        "flag": rng.random(n) < 0.5,
        "score": rng.normal(size=n),
        "ids": np.array([f"doc-{i}" for i in range(n)]),
    }
    table = pa.table({k: pa.array(v) for k, v in cols.items()})
    codes = rng.integers(0, 256, size=(n, 4), dtype=np.uint8)
    emb = rng.normal(size=(n, 6))
    table = table.append_column(
        "codes", pa.FixedSizeListArray.from_arrays(pa.array(codes.ravel()), 4)
    )
    table = table.append_column("tokens", pa.array([list(r) for r in codes.astype(np.int64)]))
    table = table.append_column("embeddings", pa.array([list(r) for r in emb]))
    table = table.append_column(
        "kind", pa.array([("a", "bb", "ccc")[i % 3] for i in range(n)]).dictionary_encode()
    )
    return table, cols, codes, emb


def test_columns_keep_their_types_and_values(tmp_path):
    table, cols, codes, emb = _table()
    p = tmp_path / "t.parquet"
    pq.write_table(table, p)
    arrays = read_arrays(p)
    for name in ("labels", "small", "flag", "score"):
        assert arrays[name].dtype == cols[name].dtype, name
        np.testing.assert_array_equal(arrays[name], cols[name])
    assert arrays["labels"].dtype == np.int64
    assert arrays["ids"].dtype.kind == "U" and arrays["ids"].tolist() == cols["ids"].tolist()
    assert arrays["kind"].tolist() == [("a", "bb", "ccc")[i % 3] for i in range(len(cols["ids"]))]
    assert arrays["codes"].dtype == np.uint8 and np.array_equal(arrays["codes"], codes)
    assert arrays["tokens"].dtype == np.int64 and np.array_equal(arrays["tokens"], codes)
    assert arrays["embeddings"].dtype == np.float32 and np.array_equal(
        arrays["embeddings"], emb.astype(np.float32)
    )
    for name in arrays:
        assert arrays[name].flags.writeable, name
    loaded = rc.load_embeddings(p)
    assert loaded.labels.dtype == np.int64 and np.array_equal(loaded.labels, cols["labels"])


def test_binary_codes_from_parquet_rank_as_from_npz(tmp_path):
    """uint8 packed codes stay codes: Hamming retrieval from parquet equals the same codes
    from .npz (a float conversion would make them numbers, not bits)."""
    table, cols, codes, _ = _table(n=60, seed=1)
    p = tmp_path / "t.parquet"
    pq.write_table(table, p)
    labels = cols["small"]
    a = rc.load_embeddings(p, embeddings="codes", labels="small")
    np.savez(tmp_path / "t.npz", embeddings=codes, labels=labels)
    b = rc.load_embeddings(tmp_path / "t.npz")
    ra = rc.evaluate(a.embeddings, query_labels=a.labels, metrics=["map"], similarity="hamming")
    rb = rc.evaluate(b.embeddings, query_labels=b.labels, metrics=["map"], similarity="hamming")
    assert ra["map"] == rb["map"]
