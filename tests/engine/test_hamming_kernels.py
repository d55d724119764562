"""Binary codes (similarity="hamming"): packing, and the numba / numpy / torch tile kernels
against an exact reference (differing bits counted on unpacked bool arrays)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from retrieval_checks.engine import _hamming
from retrieval_checks.engine._hamming import (
    MAX_BITS,
    _hamming_tile_numpy,
    hamming_into,
    hamming_tile,
    hamming_tile_torch,
    n_words,
    pack_codes,
    words_to_torch,
)
from retrieval_checks.engine.counting import _kernels
from retrieval_checks.errors import InputError

BITS = [1, 8, 13, 24, 32, 48, 63, 64, 65, 70, 128, 200]
needs_numba = pytest.mark.skipif(_hamming._tile_numba is None, reason="numba is not available")


def _codes(n_q: int, n_g: int, n_bits: int, seed: int = 0):
    """Random bool codes with the hard rows planted: all zeros, all ones, a query's
    duplicate and its complement in the gallery (distances 0 and n_bits)."""
    rng = np.random.default_rng(seed + n_bits)
    Q = rng.random((n_q, n_bits)) < 0.5
    G = rng.random((n_g, n_bits)) < 0.5
    Q[0] = False
    Q[1] = True
    G[0], G[1], G[2] = Q[2], ~Q[2], True
    return Q, G


def _reference(Q: np.ndarray, G: np.ndarray) -> np.ndarray:
    return -(Q[:, None, :] != G[None, :, :]).sum(axis=2).astype(np.float32)


def _numba(Qw, Gw, out):
    hamming_tile(Qw, Gw, out)


def _numpy(Qw, Gw, out):
    _hamming_tile_numpy(Qw, Gw, out)


def _numpy_lut(Qw, Gw, out):
    _hamming_tile_numpy(Qw, Gw, out, _lut=True)  # the numpy < 2.0 path


def _torch_cpu(Qw, Gw, out):
    torch = pytest.importorskip("torch")
    t = torch.full(out.shape, 7.0)
    hamming_tile_torch(words_to_torch(Qw, "cpu"), words_to_torch(Gw, "cpu"), t)
    out[...] = t.numpy()


KERNELS = [
    pytest.param(_numba, marks=needs_numba, id="numba"),
    pytest.param(_numpy, id="numpy"),
    pytest.param(_numpy_lut, id="numpy-lut"),
    pytest.param(_torch_cpu, id="torch-cpu"),
]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n_bits", BITS)
def test_every_kernel_equals_the_exact_bit_count(kernel, n_bits):
    Q, G = _codes(37, 301, n_bits)
    (Qw, qb), (Gw, gb) = pack_codes(Q, "queries"), pack_codes(G, "gallery")
    assert qb == gb == n_bits and Qw.shape == (37, n_words(n_bits)) and Qw.dtype == np.uint64
    S = np.full((3, 37, 301), 5.0, np.float32)
    kernel(Qw, Gw, S[1])  # a view of the engine's (n_chunks, b, c) buffer
    ref = _reference(Q, G)
    np.testing.assert_array_equal(S[1], ref)
    assert (S[0] == 5).all() and (S[2] == 5).all()
    assert S[1][2, 0] == 0 and S[1][2, 1] == -n_bits and S[1][0, 2] == -n_bits and S[1][1, 2] == 0


@pytest.mark.parametrize("kernel", KERNELS)
def test_zero_padding_rows_score_minus_the_query_popcount(kernel):
    Q, _ = _codes(5, 3, 70)
    Qw, _ = pack_codes(Q, "queries")
    out = np.empty((5, 4), np.float32)
    kernel(Qw, np.zeros((4, Qw.shape[1]), np.uint64), out)
    np.testing.assert_array_equal(
        out, -np.repeat(Q.sum(axis=1, keepdims=True), 4, axis=1).astype(np.float32)
    )


def test_torch_kernel_chunks_rows_and_columns():
    """Tiles larger than the temporaries' budget are split by rows, and by columns when a
    single row exceeds it; every split gives the same numbers."""
    torch = pytest.importorskip("torch")
    Q, G = _codes(9, 500, 130, seed=3)
    Qt, Gt = (words_to_torch(pack_codes(a, "x")[0], "cpu") for a in (Q, G))
    ref = _reference(Q, G)
    for budget_pairs in (10**6, 1200, 7, 1):
        out = torch.zeros(9, 500)
        hamming_tile_torch(Qt, Gt, out, budget=budget_pairs * (17 * 3 + 8))
        np.testing.assert_array_equal(out.numpy(), ref, err_msg=f"budget {budget_pairs} pairs")


def test_torch_kernel_on_cuda_when_there_is_one():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    Q, G = _codes(65, 1000, 200)
    out = torch.empty(65, 1000, device="cuda")
    Qw, Gw = (words_to_torch(pack_codes(a, "x")[0], "cuda") for a in (Q, G))
    hamming_into(Qw, Gw, out)
    np.testing.assert_array_equal(out.cpu().numpy(), _reference(Q, G))


@pytest.mark.parametrize("accelerator", [pytest.param("numba", marks=needs_numba), "numpy"])
def test_dispatch_follows_the_engine_accelerator_and_takes_cpu_tensors(accelerator, monkeypatch):
    Q, G = _codes(20, 50, 96)
    Qw, Gw = pack_codes(Q, "q")[0], pack_codes(G, "g")[0]
    called = []
    for fn in ("hamming_tile", "_hamming_tile_numpy", "hamming_tile_torch"):
        real = getattr(_hamming, fn)
        monkeypatch.setattr(_hamming, fn, lambda *a, _r=real, _n=fn: (called.append(_n), _r(*a)))
    with _kernels.use(accelerator):
        out = np.empty((20, 50), np.float32)
        hamming_into(Qw, Gw, out)
        np.testing.assert_array_equal(out, _reference(Q, G))
        torch = pytest.importorskip("torch")
        t = torch.zeros(20, 50)
        _hamming.hamming_scores(
            words_to_torch(Qw, "cpu"), words_to_torch(Gw, "cpu"), t, torch_tensors=True
        )
        np.testing.assert_array_equal(t.numpy(), _reference(Q, G))
    expected = "hamming_tile" if accelerator == "numba" else "_hamming_tile_numpy"
    assert called == [expected, expected]


# ----------------------------------------------------------------------------- packing
@pytest.mark.parametrize("n_bits", [8, 13, 64, 70, 128])
def test_every_input_form_gives_the_same_words(n_bits):
    torch = pytest.importorskip("torch")
    bits, _ = _codes(11, 3, n_bits)
    words, nb = pack_codes(bits, "codes")
    assert nb == n_bits and words.flags.c_contiguous and words.shape == (11, n_words(n_bits))
    pm = np.where(bits, 1.0, -1.0)
    forms = {
        "pm1 float32": pm.astype(np.float32),
        "pm1 int8": pm.astype(np.int8),
        "01 float64": bits.astype(np.float64),
        "01 int64": bits.astype(np.int64),
        "01 uint16": bits.astype(np.uint16),
        "torch bool": torch.from_numpy(bits),
        "torch pm1": torch.from_numpy(pm.astype(np.float32)),
        "torch bf16": torch.from_numpy(pm).bfloat16(),
        "list": bits.tolist(),
    }
    for label, form in forms.items():
        w, b = pack_codes(form, "codes")
        assert b == n_bits and w.dtype == np.uint64, label
        np.testing.assert_array_equal(w, words, err_msg=label)
    packed = np.packbits(bits, axis=1)  # padded to whole bytes: n_bits rounded up to 8
    for label, form in {"uint8": packed, "torch uint8": torch.from_numpy(packed)}.items():
        w, b = pack_codes(form, "codes")
        assert b == 8 * packed.shape[1], label
        np.testing.assert_array_equal(w, words, err_msg=label)


def test_bit_order_is_np_packbits_and_padding_is_zero():
    one_first = np.zeros((1, 8), bool)
    one_first[0, 0] = True
    w, _ = pack_codes(one_first, "codes")
    assert w.view(np.uint8)[0, 0] == 0x80 and w.view(np.uint8)[0, 1:].sum() == 0
    np.testing.assert_array_equal(pack_codes(np.array([[0x80]], np.uint8), "codes")[0], w)
    full, _ = pack_codes(np.ones((2, 70), bool), "codes")
    assert np.bitwise_count(full).sum() == 140 if hasattr(np, "bitwise_count") else True
    assert (full.view(np.uint8)[:, 8] == 0xFC).all() and (full.view(np.uint8)[:, 9:] == 0).all()


def test_uint8_packed_bytes_with_other_values_are_accepted():
    packed = np.array([[0, 1, 255], [1, 0, 2]], np.uint8)
    w, b = pack_codes(packed, "codes")
    assert b == 24
    np.testing.assert_array_equal(
        w, pack_codes(np.unpackbits(packed, axis=1).astype(bool), "codes")[0]
    )


BAD = {
    "none": (None, "is None"),
    "1-D": (np.ones(8, bool), "must be 2-D"),
    "3-D": (np.ones((2, 3, 8), bool), "must be 2-D"),
    "no rows": (np.ones((0, 8), bool), "is empty"),
    "no columns": (np.ones((3, 0), bool), "zero columns"),
    "strings": (np.array([["a", "b"]]), "dtype"),
    "complex": (np.ones((2, 2), np.complex64), "dtype"),
    "value 2": (np.array([[0, 1], [1, 0], [0, 0], [2, 1]]), "row 3 has 2"),
    "value 0.5": (np.array([[1.0, -1.0], [0.5, 1.0]], np.float32), "row 1 has 0.5"),
    "inf": (np.array([[1.0, np.inf]]), "row 0 has inf"),
    "NaN": (np.array([[0.0, 1.0], [np.nan, 1.0]]), "NaN in row(s) 1"),
    "mixed": (np.array([[0, 1], [1, 1], [-1, 1]], np.int8), "mixes"),
    "uint8 0/1": (np.array([[0, 1, 1], [1, 0, 0]], np.uint8), ".astype(bool)"),
    "too long": (np.full((1, MAX_BITS // 8 + 1), 255, np.uint8), "at most"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_codes_fail_closed_naming_the_array(case):
    x, fragment = BAD[case]
    with pytest.raises(InputError) as err:
        pack_codes(x, "gallery_codes")
    msg = str(err.value)
    assert "gallery_codes" in msg and fragment in msg, msg


def test_mixed_conventions_are_caught_across_row_chunks():
    x = np.ones((50, 2), np.int64)
    x[3, 0], x[10, 1], x[40, 1] = 0, 0, -1  # the first rows are reported
    for chunk in (16, 48, None):  # one row of 2 int64 per chunk, three rows, all at once
        with pytest.raises(InputError, match=r"row 3 holds 0, row 40 holds -1"):
            pack_codes(x, "codes", chunk_bytes=chunk)
    x[40, 1] = 7
    with pytest.raises(InputError, match=r"row 40 has 7"):
        pack_codes(x, "codes", chunk_bytes=16)
    ok = np.where(np.arange(100).reshape(50, 2) % 3 == 0, 1, -1)
    whole = pack_codes(ok, "codes")
    for chunk in (16, 48):  # chunked packing writes every row's words
        got = pack_codes(ok, "codes", chunk_bytes=chunk)
        assert got[1] == whole[1] and np.array_equal(got[0], whole[0])


def test_uint8_refusal_names_the_ways_out():
    with pytest.raises(InputError) as err:
        pack_codes(np.eye(4, dtype=np.uint8), "queries")
    msg = str(err.value)
    assert (
        "np.packbits(queries.astype(bool), axis=1)" in msg
        and "np.unpackbits(queries, axis=1)" in msg
    )


def test_without_numba_the_numpy_kernel_serves():
    code = textwrap.dedent(
        """
        import sys

        class Block:  # as if numba were not installed
            def find_spec(self, name, path=None, target=None):
                if name == "numba" or name.startswith("numba."):
                    raise ImportError("blocked for this test")

        sys.meta_path.insert(0, Block())
        import numpy as np
        from retrieval_checks.engine import _hamming
        from retrieval_checks.errors import BackendError

        bits = np.random.default_rng(0).random((30, 70)) < 0.5
        w, _ = _hamming.pack_codes(bits, "codes")
        out = np.empty((30, 30), np.float32)
        _hamming.hamming_into(w, w, out)
        assert (out == -(bits[:, None] != bits[None]).sum(2)).all()
        try:
            _hamming.hamming_tile(w, w, out)
        except BackendError as exc:
            assert "numba" in str(exc)
        else:
            raise AssertionError("hamming_tile without numba must fail clearly")
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")
