"""Loading embeddings, labels and ids from every supported file type, and files that fail
closed (issue 12, the second half): every damaged, missing or hostile file is an InputError
naming the file and the fix; only the arrays used are read; big-endian and bfloat16 data
are converted, never refused or misread. Needs torch, pyarrow and safetensors (the test
extra). Cost: about 11 s at a load average of 10 (measured; 169 cases on tiny files)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import zipfile

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks import _paths
from retrieval_checks.data import read_arrays
from retrieval_checks.data._files import check_file, read_npy

torch = pytest.importorskip("torch")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
st_np = pytest.importorskip("safetensors.numpy")
st_torch = pytest.importorskip("safetensors.torch")

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


# --- fail closed (issue 12): damaged, missing or hostile files; only the arrays used are read;
# byte order and precision converted. EMB6 / LAB6: 6 items of 3 classes (EMB / LAB above: 12) ---
EMB6 = np.random.default_rng(12).normal(size=(6, 3)).astype(np.float32)
LAB6 = np.array([0, 0, 1, 1, 2, 2])
FORMATS = ["npy", "npz", "pt", "safetensors", "parquet"]


def _write(fmt: str, path):
    if fmt == "npy":
        np.save(path, EMB6)
    elif fmt == "npz":
        np.savez(path, embeddings=EMB6, labels=LAB6)
    elif fmt == "pt":
        torch.save({"embeddings": torch.from_numpy(EMB6), "labels": torch.from_numpy(LAB6)}, path)
    elif fmt == "safetensors":
        st_np.save_file({"embeddings": EMB6, "labels": LAB6}, str(path))
    else:
        pq.write_table(pa.table({"embeddings": EMB6.tolist(), "labels": LAB6}), path)
    return path


def _damage(kind: str, fmt: str, tmp_path):
    p = tmp_path / f"set.{fmt}"
    if kind == "empty":
        p.write_bytes(b"")
    elif kind == "truncated":
        data = _write(fmt, p).read_bytes()
        p.write_bytes(data[: len(data) // 2])
    elif kind == "garbage":
        p.write_bytes(np.random.default_rng(1).bytes(400))
    elif kind == "text":
        p.write_text("embeddings,labels\n1,2\n")
    elif kind == "directory":
        p.mkdir()
    elif kind == "symlink_loop":
        os.symlink(p, p)
    elif kind == "broken_symlink":
        os.symlink(tmp_path / "gone.bin", p)
    elif kind == "missing":
        pass
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "loop_pair":
        os.symlink(tmp_path / f"b.{fmt}", p)
        os.symlink(p, tmp_path / f"b.{fmt}")
    elif kind == "path_through_file":
        (tmp_path / "afile").write_text("x")
        p = tmp_path / "afile" / f"set.{fmt}"
    return p


#: damage kind -> a fragment of the fix the message must give
FIX = {
    "empty": r"empty \(0 bytes\).*write it again",
    "truncated": r"truncated, damaged|write it again|refused",
    "garbage": r"write it again|refused",
    "text": r"write it again|refused",
    "directory": r"is a directory, not a file; give the path",
    "symlink_loop": r"symbolic link loop.*point the link at a real file",
    "loop_pair": r"symbolic link loop.*point the link at a real file",
    "broken_symlink": r"broken symbolic link.*point it at the real file",
    "missing": r"no such file.*check the path",
    "fifo": r"not a regular file.*give the path",
    "path_through_file": r"not a directory; check the path",
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", list(FIX))
def test_every_format_times_every_damage_is_an_input_error_naming_the_file(tmp_path, fmt, kind):
    p = _damage(kind, fmt, tmp_path)
    with pytest.raises(rc.InputError) as info:
        rc.load_embeddings(p)
    msg = str(info.value)
    assert str(p) in msg, msg  # names the file
    assert re.search(FIX[kind], msg, re.S | re.I), msg  # and the fix
    assert "Traceback" not in msg


@pytest.mark.parametrize("fmt", ["npz", "pt", "safetensors", "parquet"])
@pytest.mark.parametrize(
    "kind", ["empty", "truncated", "garbage", "directory", "symlink_loop", "missing"]
)
def test_read_arrays_fails_closed_the_same_way(tmp_path, fmt, kind):
    p = _damage(kind, fmt, tmp_path)
    with pytest.raises(rc.InputError, match=re.escape(str(p))):
        dict(read_arrays(p))


@pytest.mark.parametrize(
    "kind", ["empty", "truncated", "garbage", "directory", "symlink_loop", "missing", "fifo"]
)
def test_read_npy_fails_closed(tmp_path, kind):
    p = _damage(kind, "npy", tmp_path)
    with pytest.raises(rc.InputError, match=re.escape(str(p))):
        read_npy(p)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_file_of_another_format_under_this_extension(tmp_path, fmt):
    other = "npz" if fmt != "npz" else "npy"
    p = tmp_path / f"set.{fmt}"
    _write(other, tmp_path / f"src.{other}")
    (tmp_path / f"src.{other}").rename(p)
    with pytest.raises(rc.InputError) as info:
        rc.load_embeddings(p)
    assert str(p) in str(info.value)
    assert re.search(r"rename it|write it again|refused|not a", str(info.value), re.I)


def test_unreadable_file_names_it_and_says_chmod(tmp_path):
    from shared_setup import permission_denied

    p = _write("npz", tmp_path / "set.npz")
    p.chmod(0)
    # root reads mode-000 files: the open itself then fails, as it would for a user
    denied = permission_denied(p) if os.geteuid() == 0 else contextlib.nullcontext()
    try:
        with (
            denied,
            pytest.raises(
                rc.InputError, match=r"not readable \(permission denied\).*chmod u\+r"
            ) as info,
        ):
            rc.load_embeddings(p)
        assert str(p) in str(info.value)
    finally:
        p.chmod(0o644)


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root reads files whatever their mode; the monkeypatched case covers it",
)
def test_unreadable_file_for_real(tmp_path):
    p = _write("npy", tmp_path / "e.npy")
    p.chmod(0)
    try:
        with pytest.raises(rc.InputError, match="permission denied"):
            rc.load_embeddings(p)
    finally:
        p.chmod(0o644)


# ---------------------------------------------------------------- checksummed data


def _flip_inside(path, needle_offset: int, n: int = 4):
    data = bytearray(path.read_bytes())
    for i in range(needle_offset, needle_offset + n):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def test_flipped_bits_in_an_npz_member_fail_its_crc(tmp_path):
    p = _write("npz", tmp_path / "set.npz")
    with zipfile.ZipFile(p) as z:
        info = z.getinfo("embeddings.npy")
    _flip_inside(
        p, info.header_offset + 30 + len(info.filename) + info.file_size - 8
    )  # inside the floats
    with pytest.raises(
        rc.InputError,
        match=r"(?is)member 'embeddings' of .*set\.npz.*(CRC|damaged).*write it again",
    ):
        rc.load_embeddings(p)


def test_flipped_bits_in_a_pt_tensor_record_fail_its_crc(tmp_path):
    p = _write("pt", tmp_path / "set.pt")
    raw = p.read_bytes()
    offset = raw.find(EMB6.tobytes())
    assert offset > 0
    _flip_inside(p, offset + 4)
    with pytest.raises(rc.InputError, match=r"(?is)set\.pt.*damaged.*write it again"):
        rc.load_embeddings(p)


# ---------------------------------------------------------------- no code from data


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pt_with_pickled_code_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    p = tmp_path / "evil.pt"
    torch.save({"embeddings": torch.from_numpy(EMB6), "x": _Evil(str(marker))}, p)
    with pytest.raises(
        rc.InputError,
        match=r"(?s)evil\.pt: torch\.load\(weights_only=True\) refused.*save a dict of",
    ):
        rc.load_embeddings(p)
    assert not marker.exists()


def test_npy_of_objects_is_refused(tmp_path):
    p = tmp_path / "obj.npy"
    np.save(p, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(rc.InputError, match=r"obj\.npy.*(pickle|objects)"):
        rc.load_embeddings(p)


def test_npz_object_member_is_refused_only_when_used(tmp_path):
    p = tmp_path / "mixed.npz"
    np.savez(p, embeddings=EMB6, labels=LAB6, junk=np.array([object(), 1], dtype=object))
    s = rc.load_embeddings(p)  # the object member is never read
    np.testing.assert_array_equal(s.embeddings, EMB6)
    with pytest.raises(rc.InputError, match=r"mixed\.npz: member 'junk' holds Python objects"):
        rc.load_embeddings(p, labels="junk")


# ---------------------------------------------------------------- laziness


def _npz_with_poisoned_member(path):
    """A .npz whose 'huge' member claims 2 GiB and is damaged: reading it would fail."""
    np.savez(path, embeddings=EMB6, labels=LAB6)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (1 << 28,)}
    )
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("huge.npy", header.getvalue() + b"\0" * 64)  # 2 GiB promised, 64 bytes given
    return path


def test_unused_huge_member_is_never_read(tmp_path, monkeypatch):
    p = _npz_with_poisoned_member(tmp_path / "bomb.npz")
    seen = []
    original = np.lib.npyio.NpzFile.__getitem__

    def spy(self, key):
        seen.append(key)
        return original(self, key)

    monkeypatch.setattr(np.lib.npyio.NpzFile, "__getitem__", spy)
    s = rc.load_embeddings(p)
    np.testing.assert_array_equal(s.embeddings, EMB6)
    np.testing.assert_array_equal(s.labels, LAB6)
    assert "huge" not in seen and set(seen) <= {"embeddings", "labels", "ids"}
    arrays = read_arrays(p)
    assert (
        list(arrays) == ["embeddings", "labels", "huge"] and "huge" in arrays and len(arrays) == 3
    )
    assert "huge" not in seen  # listing, `in` and len read nothing
    with pytest.raises(rc.InputError, match=r"member 'huge' of .*bomb\.npz"):
        arrays["huge"]


def test_a_large_compressed_unused_member_costs_no_memory(tmp_path):
    import tracemalloc

    p = tmp_path / "zeros.npz"
    np.savez_compressed(
        p, embeddings=EMB6, labels=LAB6, zeros=np.zeros(1 << 26, dtype=np.uint8)
    )  # 64 MiB
    assert p.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        s = rc.load_embeddings(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert s.embeddings.shape == (6, 3)
    assert peak < 8 << 20, peak  # the 64 MiB member was not decompressed


# ---------------------------------------------------------------- missing keys


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (
            {"labels": "label"},
            r"no labels named 'label'; the file has 'embeddings', 'lbl', 'ids'\..*Pass labels=",
        ),
        ({"labels": "lbls"}, r"Did you mean 'lbl'\?"),
        ({"labels": "lbl", "ids": "id"}, r"no ids named 'id'; the file has .*Did you mean 'ids'\?"),
        (
            {"embeddings": "embedding"},
            r"no embeddings named 'embedding'.*Did you mean 'embeddings'\?",
        ),
        ({"labels": "y", "labels_required": True}, r"no labels named 'y'"),
    ],
)
def test_a_named_key_that_is_missing_lists_the_keys(tmp_path, kwargs, fragment):
    p = tmp_path / "k.npz"
    np.savez(p, embeddings=EMB6, lbl=LAB6, ids=np.arange(6))
    with pytest.raises(rc.InputError, match=fragment) as info:
        rc.load_embeddings(p, **kwargs)
    assert str(p) in str(info.value)


def test_default_labels_absent_is_fine_but_a_close_name_is_suggested(tmp_path):
    p = tmp_path / "plain.npz"
    np.savez(p, embeddings=EMB6)
    s = rc.load_embeddings(p)
    assert s.labels is None and s.ids is None
    q = tmp_path / "close.npz"
    np.savez(q, embeddings=EMB6, Labels=LAB6)
    with pytest.raises(rc.InputError, match=r"no labels named 'labels'.*Did you mean 'Labels'\?"):
        rc.load_embeddings(q)
    np.testing.assert_array_equal(rc.load_embeddings(q, labels="Labels").labels, LAB6)


@pytest.mark.parametrize("fmt", ["pt", "safetensors", "parquet"])
def test_missing_label_key_in_every_named_format(tmp_path, fmt):
    p = _write(fmt, tmp_path / f"set.{fmt}")
    with pytest.raises(
        rc.InputError, match=r"no labels named 'label'.*'labels'.*Did you mean 'labels'\?"
    ):
        rc.load_embeddings(p, labels="label")


# ---------------------------------------------------------------- byte order and precision


@pytest.mark.parametrize("dtype", [">f4", ">f8", "<f2", ">f2", ">i4"])
def test_npy_of_any_byte_order_round_trips(tmp_path, dtype):
    p = tmp_path / "be.npy"
    data = (EMB6 * 4).astype(dtype)
    np.save(p, data)
    out = rc.load_embeddings(p).embeddings
    assert out.dtype.isnative
    if np.dtype(dtype).kind == "f" and np.dtype(dtype).itemsize < 4:
        assert out.dtype == np.float32
    np.testing.assert_array_equal(out, data.astype(out.dtype))


def test_big_endian_npz_gives_the_same_metric_as_native(tmp_path):
    p = tmp_path / "be.npz"
    np.savez(p, embeddings=EMB6.astype(">f4"), labels=LAB6.astype(">i8"))
    s = rc.load_embeddings(p)
    assert s.embeddings.dtype == np.float32 and s.labels.dtype == np.int64
    assert s.embeddings.dtype.isnative and s.labels.dtype.isnative
    np.testing.assert_array_equal(s.embeddings, EMB6)
    a = rc.evaluate(s.embeddings, query_labels=s.labels, metrics=["map"])["map"]
    b = rc.evaluate(EMB6, query_labels=LAB6, metrics=["map"])["map"]
    assert a == b


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
def test_low_precision_tensors_become_float32_with_their_values(tmp_path, fmt, dtype):
    t = torch.from_numpy(EMB6).to(getattr(torch, dtype))
    p = tmp_path / f"low.{fmt}"
    if fmt == "pt":
        torch.save({"embeddings": t, "labels": torch.from_numpy(LAB6)}, p)
    else:
        st_torch.save_file({"embeddings": t, "labels": torch.from_numpy(LAB6)}, str(p))
    s = rc.load_embeddings(p)
    assert s.embeddings.dtype == np.float32
    np.testing.assert_array_equal(s.embeddings, t.float().numpy())  # exactly the stored values
    np.testing.assert_allclose(s.embeddings, EMB6, rtol=1e-2, atol=1e-2)
    np.testing.assert_array_equal(s.labels, LAB6)


def test_plain_bfloat16_tensor_file(tmp_path):
    p = tmp_path / "t.pt"
    torch.save(torch.from_numpy(EMB6).bfloat16(), p)
    np.testing.assert_array_equal(
        rc.load_embeddings(p).embeddings, torch.from_numpy(EMB6).bfloat16().float().numpy()
    )


# ---------------------------------------------------------------- contents


@pytest.mark.parametrize(
    "payload, fragment",
    [
        ({"embeddings": torch.from_numpy(EMB6), "labels": [1, "1", 2, 2, 3, 3]}, r"mixes int, str"),
        ({"embeddings": torch.from_numpy(EMB6), "labels": [[1], [2, 3]] + [[0]] * 4}, r"ragged"),
        ({"embeddings": torch.from_numpy(EMB6), "labels": {"a": 1}}, r"holds a dict"),
        ({"embeddings": torch.from_numpy(EMB6), "labels": [None] * 6}, r"NoneType"),
        ({"embeddings": torch.zeros(6, 3, dtype=torch.complex64)}, r"complex"),
        ([1, 2, 3], r"expected a tensor or a dict of tensors, found list"),
    ],
)
def test_pt_contents_that_numpy_would_misread(tmp_path, payload, fragment):
    p = tmp_path / "c.pt"
    torch.save(payload, p)
    with pytest.raises(rc.InputError, match=fragment) as info:
        rc.load_embeddings(p)
    assert str(p) in str(info.value)


@pytest.mark.parametrize(
    "table, fragment",
    [
        ({"embeddings": [[1.0, 2.0], [3.0]], "labels": [0, 1]}, r"lists of different lengths"),
        ({"embeddings": [[1.0, 2.0], None], "labels": [0, 1]}, r"null row"),
        (
            {"embeddings": [[1.0, None], [2.0, 3.0]], "labels": [0, 1]},
            r"null value\(s\) inside its lists",
        ),
        ({"embeddings": [["a", "b"], ["c", "d"]], "labels": [0, 1]}, r"lists of string"),
        (
            {"embeddings": [[1.0, 2.0], [3.0, 4.0]], "labels": [0, None]},
            r"column 'labels' has 1 null",
        ),
    ],
)
def test_parquet_columns_fail_closed(tmp_path, table, fragment):
    p = tmp_path / "t.parquet"
    pq.write_table(pa.table(table), p)
    with pytest.raises(rc.InputError, match=fragment) as info:
        rc.load_embeddings(p)
    assert str(p) in str(info.value)


@pytest.mark.parametrize(
    "emb, fragment",
    [
        (np.zeros((0, 3), np.float32), r"no rows"),
        (np.zeros((4, 0), np.float32), r"no dimensions"),
        (
            np.array([[1.0, np.nan], [0.0, 1.0]], np.float32),
            r"NaN or Inf in 1 row\(s\), first rows \[0\]",
        ),
        (np.array([[1.0, 0.0], [np.inf, 1.0]]), r"NaN or Inf in 1 row\(s\), first rows \[1\]"),
        (np.array([["a", "b"]]), r"must be numeric"),
        (np.ones(3, np.float32), r"must be 2-D"),
        (np.ones((2, 2), bool), r"must be numeric"),
    ],
)
def test_embeddings_must_be_usable(tmp_path, emb, fragment):
    p = tmp_path / "e.npz"
    np.savez(p, embeddings=emb)
    with pytest.raises(rc.InputError, match=fragment) as info:
        rc.load_embeddings(p)
    assert str(p) in str(info.value)


# ---------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "args, kwargs, fragment",
    [
        ((None,), {}, r"path=None: expected a file path"),
        ((3,), {}, r"path=3: expected a file path"),
        ((b"x.npz",), {}, r"path=b'x.npz': expected a file path"),
        (("x.npz",), {"embeddings": None}, r"embeddings=None: expected a non-empty string"),
        (("x.npz",), {"embeddings": ""}, r"embeddings='': expected a non-empty string"),
        (("x.npz",), {"labels": 5}, r"labels=5: expected a non-empty string .* or None"),
        (("x.npz",), {"ids": ["a"]}, r"ids=\['a'\]: expected"),
        (("x.npz",), {"labels_required": "yes"}, r"labels_required='yes': expected True or False"),
        (
            ("x.npz",),
            {"labels": None, "labels_required": True},
            r"labels=None with labels_required=True",
        ),
        (("x.csv",), {}, r"unknown file type '.csv'; use .npy, .npz"),
        (("noext",), {}, r"unknown file type '\(no extension\)'"),
    ],
)
def test_arguments_are_checked_first(args, kwargs, fragment):
    with pytest.raises(rc.InputError, match=fragment):
        rc.load_embeddings(*args, **kwargs)


def test_read_arrays_points_npy_to_read_npy(tmp_path):
    p = _write("npy", tmp_path / "e.npy")
    with pytest.raises(rc.InputError, match=r"read_npy"):
        read_arrays(p)
    np.testing.assert_array_equal(read_npy(p), EMB6)
    assert check_file(p) == p


def test_good_files_still_round_trip_in_every_format(tmp_path):
    for fmt in FORMATS:
        s = rc.load_embeddings(_write(fmt, tmp_path / f"ok.{fmt}"))
        np.testing.assert_array_equal(s.embeddings, EMB6)
        if fmt != "npy":
            np.testing.assert_array_equal(s.labels, LAB6)


# ------------------------------------------------------------------ review: writable parquet lists, loops named
def test_a_parquet_list_column_is_a_writable_array_torch_takes_without_warning(tmp_path):
    import warnings

    p = tmp_path / "lists.parquet"
    pq.write_table(
        pa.table({"embeddings": [list(map(float, row)) for row in EMB6], "labels": LAB6}), p
    )
    arr = read_arrays(p)["embeddings"]
    assert arr.flags.writeable and arr.dtype == np.float32 and np.allclose(arr, EMB6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.from_numpy(arr).shape == (6, 3)
    loaded = rc.load_embeddings(p)
    assert np.allclose(np.asarray(loaded.embeddings), EMB6)


@pytest.mark.parametrize(
    "make, words",
    [
        (
            lambda d: (
                os.symlink(d / "loop2.npz", d / "loop1.npz"),
                os.symlink(d / "loop1.npz", d / "loop2.npz"),
            ),
            "symbolic link loop",
        ),
        (lambda d: os.symlink(d / "nowhere.npz", d / "loop1.npz"), "broken symbolic link"),
        (lambda d: (d / "loop1.npz").mkdir(), "is a directory"),
        (lambda d: None, "does not exist"),
    ],
)
def test_missing_file_says_why_a_path_is_not_a_file(tmp_path, make, words):
    make(tmp_path)
    assert words in _paths.missing_file(tmp_path / "loop1.npz")


def test_missing_file_of_a_regular_file(tmp_path):
    p = tmp_path / "a.npz"
    np.savez(p, embeddings=EMB6)
    assert _paths.missing_file(p) == "is a file"


def test_a_pickled_payload_message_never_advises_turning_weights_only_off(tmp_path):
    """torch's own message suggests re-running with weights_only=False, which would run
    the file's code: the library quotes only what the unpickler refused."""
    torch = pytest.importorskip("torch")
    import os as _os

    class Payload:
        def __reduce__(self):
            return (_os.system, ("echo never-run",))

    p = tmp_path / "evil.pt"
    torch.save({"embeddings": Payload()}, p)
    with pytest.raises(rc.InputError) as info:
        rc.load_embeddings(p)
    message = str(info.value)
    assert str(p) in message and "posix.system" in message and "no code in the file runs" in message
    assert "False" not in message
