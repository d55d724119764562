"""load_embeddings(columns=...): per-row metadata read beside the labels, in every
format with named arrays, ready for evaluate(..., slices=s.columns); a missing column,
a column of another length and a .npy file are errors naming the file and the fix.

Cost: well under 1 s (tiny files).
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.errors import InputError


def _arrays():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 4)
    e = (rng.normal(size=(10, 8))[y] + 0.5 * rng.normal(size=(40, 8))).astype(np.float32)
    return e, y, (y % 2).astype(np.int64)


def _write(tmp_path, fmt):
    e, y, half = _arrays()
    p = tmp_path / f"set.{fmt}"
    if fmt == "npz":
        np.savez(p, embeddings=e, labels=y, half=half, lang=np.where(half == 1, "de", "en"))
    elif fmt == "safetensors":
        st = pytest.importorskip("safetensors.numpy")
        st.save_file({"embeddings": e, "labels": y, "half": half}, str(p))
    elif fmt == "pt":
        torch = pytest.importorskip("torch")
        torch.save(
            {
                "embeddings": torch.from_numpy(e),
                "labels": torch.from_numpy(y),
                "half": torch.from_numpy(half),
            },
            p,
        )
    elif fmt == "parquet":
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"embeddings": list(e), "labels": y, "half": half}), p)
    return p


@pytest.mark.parametrize("fmt", ["npz", "safetensors", "pt", "parquet"])
def test_columns_are_read_beside_the_labels_and_slice_an_evaluation(tmp_path, fmt):
    s = rc.load_embeddings(_write(tmp_path, fmt), columns=["half"])
    assert list(s.columns) == ["half"] and s.columns["half"].tolist() == (s.labels % 2).tolist()
    r = rc.evaluate(s.embeddings, query_labels=s.labels, metrics=["map"], slices=s.columns)
    assert list(r.slices) == ["half=0", "half=1"]
    assert r.slices["half=1"]["map"] == pytest.approx(
        np.mean(r.per_query["map"][s.labels % 2 == 1]), abs=1e-15
    )


def test_string_columns_and_the_default_of_no_columns(tmp_path):
    p = _write(tmp_path, "npz")
    assert rc.load_embeddings(p).columns == {}
    s = rc.load_embeddings(p, columns="lang")
    assert set(s.columns["lang"].tolist()) == {"de", "en"}


@pytest.mark.parametrize(
    "columns, words",
    [
        (["hlaf"], "no column named 'hlaf'.*Did you mean 'half'"),
        (["embeddings"], "has shape"),
        ([3], "not an array name"),
        (["half", "half"], "given twice"),
        (5, "expected the names"),
    ],
)
def test_bad_columns_name_the_file_and_the_fix(tmp_path, columns, words):
    with pytest.raises(InputError, match=words):
        rc.load_embeddings(_write(tmp_path, "npz"), columns=columns)


def test_a_npy_file_has_no_columns(tmp_path):
    e, _, _ = _arrays()
    np.save(tmp_path / "e.npy", e)
    with pytest.raises(InputError, match="a .npy file holds one array"):
        rc.load_embeddings(tmp_path / "e.npy", columns=["lang"])
