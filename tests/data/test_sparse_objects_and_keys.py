"""Array files (issue 25): a sparse tensor in a .pt file, a pickled object array in a
.npy file and a missing key are each an InputError that says what the file holds and
the fix (never a raw TypeError, never "truncated" for a sound file); a missing key
lists the keys the file has and suggests the closest, by spelling or by the usual
synonyms (``targets`` / ``y`` for labels, ``features`` for embeddings), in every format."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.data import read_arrays, read_npy

torch = pytest.importorskip("torch")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
st_np = pytest.importorskip("safetensors.numpy")

EMB = np.random.default_rng(25).normal(size=(4, 3)).astype(np.float32)
LAB = np.array([0, 0, 1, 1])


@pytest.mark.parametrize("layout", ["coo", "csr"])
@pytest.mark.parametrize("key", ["embeddings", "labels"])
def test_a_sparse_tensor_in_a_pt_file_is_named_with_the_fix(tmp_path, layout, key):
    arrays = {"embeddings": torch.from_numpy(EMB), "labels": torch.from_numpy(LAB)}
    t = arrays[key] if key == "embeddings" else arrays[key].float()
    arrays[key] = (
        t.to_sparse()
        if layout == "coo"
        else t.reshape(1, -1).to_sparse_csr()
        if t.ndim == 1
        else t.to_sparse_csr()
    )
    p = tmp_path / "sparse.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that sparse CSR support is in beta
        torch.save(arrays, p)
    with pytest.raises(
        rc.InputError,
        match=rf"sparse.pt: {key!r}: is a sparse tensor \(layout torch.sparse_"
        rf"{layout}\).*\.to_dense\(\)",
    ):
        rc.load_embeddings(p)


def test_a_sparse_tensor_given_directly_says_to_dense():
    from retrieval_checks._arrays import as_numpy

    with pytest.raises(
        rc.InputError,
        match=r"queries is a sparse torch tensor \(layout torch.sparse_coo\).*"
        r"\.to_dense\(\)",
    ):
        as_numpy(torch.from_numpy(EMB).to_sparse(), "queries")


@pytest.mark.parametrize(
    "values",
    [
        np.array(
            [np.zeros(3), np.zeros(2)], dtype=object
        ),  # ragged rows saved with allow_pickle=True
        np.array([{"a": 1}, None], dtype=object),
        np.array([[1.0, 2.0], [3.0, 4.0]], dtype=object),  # numbers, but stored as Python objects
    ],
)
def test_a_npy_holding_a_pickled_object_array_says_so_not_truncated(tmp_path, values):
    p = tmp_path / "obj.npy"
    np.save(p, values, allow_pickle=True)
    for read in (read_npy, rc.load_embeddings):
        with pytest.raises(rc.InputError) as info:
            read(p)
        text = str(info.value)
        assert "obj.npy" in text and "object array" in text and "pickle" in text
        assert "truncated" not in text and "damaged" not in text
        assert "np.save" in text or "numpy.save" in text


def _write(fmt, path, arrays):
    if fmt == "npz":
        np.savez(path, **arrays)
    elif fmt == "pt":
        torch.save({k: torch.from_numpy(v) for k, v in arrays.items()}, path)
    elif fmt == "safetensors":
        st_np.save_file(arrays, str(path))
    else:
        pq.write_table(
            pa.table(
                {k: [list(r) for r in v] if v.ndim == 2 else list(v) for k, v in arrays.items()}
            ),
            path,
        )
    return path


FMTS = ["npz", "pt", "safetensors", "parquet"]


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("name", ["targets", "y", "class_ids"])
def test_labels_under_a_usual_other_name_are_suggested_in_every_format(tmp_path, fmt, name):
    p = _write(fmt, tmp_path / f"set.{fmt}", {"embeddings": EMB, name: LAB})
    with pytest.raises(
        rc.InputError,
        match=rf"no labels named 'labels'; the file has .*'{name}'.*Did you mean "
        rf"'{name}'\?.*Pass labels=<name>",
    ):
        rc.load_embeddings(
            p
        )  # default labels key absent: a likely labels array is not silently ignored
    with pytest.raises(rc.InputError, match=rf"Did you mean '{name}'\?"):
        rc.load_embeddings(p, labels_required=True)
    np.testing.assert_array_equal(rc.load_embeddings(p, labels=name).labels, LAB)
    assert rc.load_embeddings(p, labels=None).labels is None


@pytest.mark.parametrize("fmt", FMTS)
def test_embeddings_under_a_usual_other_name_are_suggested(tmp_path, fmt):
    p = _write(fmt, tmp_path / f"set.{fmt}", {"features": EMB, "labels": LAB})
    with pytest.raises(
        rc.InputError,
        match=r"no embeddings named 'embeddings'; the file has 'features', 'labels'\. "
        r"Did you mean 'features'\?",
    ):
        rc.load_embeddings(p)
    assert set(read_arrays(p)) == {"features", "labels"}


@pytest.mark.parametrize("fmt", FMTS)
def test_without_any_close_name_the_keys_are_listed_and_nothing_is_guessed(tmp_path, fmt):
    p = _write(fmt, tmp_path / f"set.{fmt}", {"embeddings": EMB, "weights": LAB.astype(np.float32)})
    assert rc.load_embeddings(p).labels is None  # default labels absent, nothing like labels: fine
    with pytest.raises(
        rc.InputError,
        match=r"no labels named 'labels'; the file has 'embeddings', 'weights'\. "
        r"Pass labels=<name>",
    ) as info:
        rc.load_embeddings(p, labels_required=True)
    assert "Did you mean" not in str(info.value)


@pytest.mark.parametrize("fmt", FMTS)
def test_a_usual_other_name_of_another_shape_is_not_taken_for_labels(tmp_path, fmt):
    scores = np.ones((4, 2), np.float32)  # per-class scores, not one label per row
    p = _write(fmt, tmp_path / f"set.{fmt}", {"embeddings": EMB, "classes": scores})
    assert rc.load_embeddings(p).labels is None
    with pytest.raises(
        rc.InputError,
        match=r"no labels named 'labels'; the file has '(embeddings|classes)', "
        r"'(embeddings|classes)'\. Pass",
    ):
        rc.load_embeddings(p, labels_required=True)
