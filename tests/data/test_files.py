"""Loading embeddings, labels and ids from every supported file type."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc

RNG = np.random.default_rng(0)
EMB = RNG.normal(size=(12, 4)).astype(np.float32)
LAB = np.repeat(np.arange(4), 3)
IDS = np.array([f"item-{i}" for i in range(12)])


class Payload:
    """An arbitrary object: saving it needs pickle, and weights_only loading refuses it."""


def _check(s, *, ids=True):
    np.testing.assert_array_equal(s.embeddings, EMB)
    np.testing.assert_array_equal(s.labels, LAB)
    if ids:
        np.testing.assert_array_equal(s.ids, IDS)


def test_npz(tmp_path):
    path = tmp_path / "set.npz"
    np.savez(path, embeddings=EMB, labels=LAB, ids=IDS)
    s = rc.load_embeddings(path)
    _check(s)
    assert s.source == str(path)
    res = rc.evaluate(s.embeddings, query_labels=s.labels, query_ids=s.ids, metrics=["map"])
    assert res.n_used == 12


def test_npy_holds_embeddings_only(tmp_path):
    path = tmp_path / "emb.npy"
    np.save(path, EMB)
    s = rc.load_embeddings(str(path))
    np.testing.assert_array_equal(s.embeddings, EMB)
    assert s.labels is None and s.ids is None
    with pytest.raises(rc.InputError, match="holds one array"):
        rc.load_embeddings(path, labels_required=True)


def test_safetensors(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    path = tmp_path / "set.safetensors"
    st.save_file({"embeddings": EMB, "labels": LAB.astype(np.int64)}, str(path))
    _check(rc.load_embeddings(path), ids=False)


def test_torch_file_is_read_with_weights_only(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "set.pt"
    torch.save(
        {"embeddings": torch.from_numpy(EMB), "labels": torch.from_numpy(LAB), "ids": IDS.tolist()},
        path,
    )
    _check(rc.load_embeddings(path))
    bad = tmp_path / "bad.pt"
    torch.save({"embeddings": torch.from_numpy(EMB), "x": Payload()}, bad)
    with pytest.raises(rc.InputError, match=r"weights_only=True\) refused"):
        rc.load_embeddings(bad)
    plain = tmp_path / "plain.pt"
    torch.save(torch.from_numpy(EMB), plain)
    np.testing.assert_array_equal(rc.load_embeddings(plain).embeddings, EMB)


def test_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "set.parquet"
    pq.write_table(pa.table({"embeddings": EMB.tolist(), "labels": LAB, "ids": IDS}), path)
    _check(rc.load_embeddings(path))


def test_other_key_names_and_suggestions(tmp_path):
    path = tmp_path / "set.npz"
    np.savez(path, feats=EMB, label=LAB)
    with pytest.raises(
        rc.InputError, match=r"no embeddings named 'embeddings'; the file has 'feats', 'label'"
    ):
        rc.load_embeddings(path)
    with pytest.raises(rc.InputError, match=r"Did you mean 'label'\?"):
        rc.load_embeddings(path, embeddings="feats", labels_required=True)
    s = rc.load_embeddings(path, embeddings="feats", labels="label")
    np.testing.assert_array_equal(s.labels, LAB)


@pytest.mark.parametrize(
    "make, fragment",
    [
        (
            lambda p: np.savez(p / "a.npz", embeddings=EMB, labels=LAB[:5]),
            "has shape (5,) but there are 12",
        ),
        (lambda p: np.savez(p / "a.npz", embeddings=EMB[0], labels=LAB), "must be 2-D"),
        (lambda p: (p / "a.csv").write_text("1,2"), "unknown file type '.csv'"),
        (lambda p: None, "no such file"),
    ],
)
def test_bad_files(tmp_path, make, fragment):
    make(tmp_path)
    name = "a.csv" if "csv" in fragment else "a.npz"
    with pytest.raises(rc.InputError) as info:
        rc.load_embeddings(tmp_path / name)
    assert fragment in str(info.value)
    assert str(tmp_path) in str(info.value)  # the message names the file


def test_bfloat16_torch_files(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "bf16.pt"
    torch.save(
        {"embeddings": torch.ones(3, 2, dtype=torch.bfloat16), "labels": torch.tensor([0, 1, 1])},
        path,
    )
    s = rc.load_embeddings(path)
    assert s.embeddings.dtype == np.float32 and s.embeddings.shape == (3, 2)
