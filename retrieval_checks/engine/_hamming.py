"""Binary codes for ``similarity="hamming"``: validation, packing into 64-bit words, and
the tile kernels (numba, numpy, torch) that fill a score tile.

Definitions and units
---------------------
A *code* is a row of ``n_bits`` bits. The Hamming distance of two codes is the number
of bit positions in which they differ (an integer in ``[0, n_bits]``). The engine
ranks by the *score* ``-distance`` stored as float32 (higher is better, so the rest of
the engine is unchanged); it is exact because distances are integers and ``n_bits``
is capped at ``2**24`` (:data:`MAX_BITS`), the largest float32 range of exact integers.

Accepted inputs (:func:`pack_codes`; numpy arrays or torch tensors on any device):

- unpacked bits, one column per bit: ``bool``, or integers / floats whose values are
  all in ``{0, 1}`` or all in ``{-1, +1}`` (``-1`` is bit 0, ``+1`` is bit 1);
- packed bytes: ``uint8`` as written by ``np.packbits(bits, axis=1)``, eight bits per
  column, the first bit of a code in the most significant bit of byte 0
  (``n_bits = 8 * columns``). A ``uint8`` array holding only 0 and 1 is refused: it
  is almost surely unpacked bits with the wrong dtype.

Words. Packed bytes are laid out ``np.packbits``-style and grouped eight to a word:
bytes ``8 t .. 8 t + 7`` of a code are word ``t``, read as a native ``uint64``
(``n_words = ceil(n_bits / 64)``). The layout of bits inside a word does not matter to
a Hamming distance as long as both sides share it, and they do: both come from the
same bytes. Bits past ``n_bits`` (the padding of the last byte and of the last word)
are zero on both sides, so they never count. A gallery row of zero words (the
engine's chunk padding) scores ``-popcount(query)``; the engine masks those columns.

Tiles. ``out[i, j] = -sum_t popcount(Qw[i, t] ^ Gw[j, t])`` as float32, for a
``(b, c)`` tile (a view ``S[k]`` of the engine's ``(n_chunks, b, c)`` buffer works).
The CPU kernel is numba's (``popcount`` written as the SWAR bit trick, which LLVM
compiles to the ``popcnt`` instruction, vectorised where the CPU has one); where numba
is unavailable or ``RETRIEVAL_CHECKS_KERNELS=numpy`` is set (as for the other
kernels: :data:`.counting._kernels.ACCELERATOR`) numpy computes the same numbers. On torch,
words are ``int64`` tensors holding the same 64 bits as the ``uint64`` words
(``words.view(np.int64)``: a reinterpretation, no value changes).
:func:`hamming_tile_torch` (for CUDA; it runs on CPU tensors too, ~100x slower than
numba) takes the sign bit apart so that no arithmetic overflows; :func:`hamming_into`
hands CPU tensors to the CPU kernels through numpy views instead.

Measured (2-core AVX-512 VM, 64-bit codes, 512 x 4096 tiles): numba 0.13-0.16 ns per
pair (LLVM emits ``vpopcntq``), numpy 2-4 ns, numpy's byte table (numpy < 2.0) ~40 ns,
torch on CPU ~8-16 ns.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._arrays import as_numpy, is_torch_tensor
from ..errors import BackendError, InputError
from .counting import _kernels
from .counting._kernels import NUMBA_LOCK

__all__ = [
    "PackedCodes",
    "pack_sides",
    "MAX_BITS",
    "n_words",
    "pack_codes",
    "words_to_torch",
    "hamming_tile",
    "hamming_tile_torch",
    "hamming_into",
    "hamming_scores",
]

#: The largest code length: distances up to 2**24 are exact in float32.
MAX_BITS = 1 << 24

_CHUNK_BYTES = 16 * 2**20  # input bytes validated and packed at a time
_TORCH_OUT_FACTOR = 1  # torch temporaries: this many times out's bytes ...
_TORCH_MIN_BYTES = 2**20  # ... and at least this many
_M63 = 0x7FFFFFFFFFFFFFFF  # every bit but the sign bit of an int64
_M1 = 0x5555555555555555
_M2 = 0x3333333333333333
_M4 = 0x0F0F0F0F0F0F0F0F


def n_words(n_bits: int) -> int:
    """64-bit words that hold ``n_bits`` bits: ``ceil(n_bits / 64)``."""
    return (int(n_bits) + 63) // 64


# ----------------------------------------------------------------------------- packing
_FIX = (
    "binary codes must be bool (or {0,1} / {-1,+1} numbers), one column per bit, or uint8 bytes packed "
    "with np.packbits(bits, axis=1)"
)


def _first(rows, n: int = 5) -> str:
    shown = ", ".join(str(int(i)) for i in rows[:n])
    return shown + (", ..." if len(rows) > n else "")


def _check_shape(a: np.ndarray, name: str) -> None:
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise InputError(f"{name} has dtype {a.dtype}; {_FIX}.")
    if a.ndim != 2:
        raise InputError(
            f"{name} must be 2-D (n_items x bits, or n_items x bytes when packed), got shape "
            f"{tuple(a.shape)}; reshape a single code with x[None, :]."
        )
    if a.shape[0] == 0:
        raise InputError(f"{name} is empty (shape {tuple(a.shape)}): at least one code is needed.")
    if a.shape[1] == 0:
        raise InputError(
            f"{name} has zero columns (shape {tuple(a.shape)}): codes need at least one bit."
        )


def _words_buffer(n: int, n_bits: int, name: str) -> np.ndarray:
    """Zeroed bytes for ``n`` codes of ``n_bits``, a whole number of words per row."""
    if n_bits > MAX_BITS:
        raise InputError(
            f"{name} holds {n_bits}-bit codes; at most {MAX_BITS} bits are supported "
            "(distances must stay exact in float32)."
        )
    return np.zeros((n, 8 * n_words(n_bits)), np.uint8)


def _from_packed(a: np.ndarray, name: str) -> tuple[np.ndarray, int]:
    if int(a.max()) <= 1:
        raise InputError(
            f"{name} is uint8 and holds only 0 and 1: uint8 codes are read as bytes packed with "
            f"np.packbits(bits, axis=1), 8 bits per column, and all-0/1 bytes are almost surely unpacked bits. "
            f"For unpacked bits pass {name}.astype(bool) (torch: .bool()), or pack them with "
            f"np.packbits({name}.astype(bool), axis=1). If these really are packed bytes, pass "
            f"np.unpackbits({name}, axis=1).astype(bool), which gives the same codes."
        )
    n_bits = 8 * int(a.shape[1])
    buf = _words_buffer(a.shape[0], n_bits, name)
    buf[:, : a.shape[1]] = a
    return buf.view(np.uint64), n_bits


def _bad_values(part: np.ndarray, bad: np.ndarray, start: int, name: str) -> InputError:
    r = int(np.flatnonzero(bad.any(axis=1))[0])
    vals = np.unique(part[r][bad[r]])
    shown = ", ".join(repr(v.item()) for v in vals[:5]) + (", ..." if vals.size > 5 else "")
    return InputError(
        f"{name} holds values other than {{0, 1}} or {{-1, +1}}: row {start + r} has {shown}; {_FIX}. "
        f"Threshold real-valued embeddings first (e.g. {name} > 0)."
    )


def _check_bits(part: np.ndarray, start: int, name: str, seen: dict) -> np.ndarray:
    """The bits of a chunk of rows (``value == 1``), after the value checks; ``seen``
    keeps the first rows holding 0 and -1 across chunks (mixing is refused)."""
    if part.dtype.kind == "b":
        return part
    if part.dtype.kind == "f":
        nan = np.isnan(part).any(axis=1)
        if nan.any():
            rows = np.flatnonzero(nan) + start
            raise InputError(f"{name} has NaN in row(s) {_first(rows)}; {_FIX}.")
    one = part == 1
    zero = part == 0
    neg = part == -1 if part.dtype.kind in "if" else np.zeros_like(one)
    bad = ~(one | zero | neg)
    if bad.any():
        raise _bad_values(part, bad, start, name)
    for key, mask in (("zero", zero), ("neg", neg)):
        if key not in seen and mask.any():
            seen[key] = start + int(np.flatnonzero(mask.any(axis=1))[0])
    if "zero" in seen and "neg" in seen:
        raise InputError(
            f"{name} mixes the {{0, 1}} and {{-1, +1}} conventions (row {seen['zero']} holds 0, row "
            f"{seen['neg']} holds -1); use one of them throughout, or pass bool codes (e.g. {name} > 0)."
        )
    return one


def _from_bits(a: np.ndarray, name: str, chunk_bytes: int) -> tuple[np.ndarray, int]:
    n, n_bits = (int(s) for s in a.shape)
    buf = _words_buffer(n, n_bits, name)
    n_bytes = (n_bits + 7) // 8
    rows = max(1, chunk_bytes // (n_bits * a.dtype.itemsize))
    seen: dict = {}
    for s in range(0, n, rows):
        bits = _check_bits(a[s : s + rows], s, name, seen)
        buf[s : s + rows, :n_bytes] = np.packbits(bits, axis=1)
    return buf.view(np.uint64), n_bits


def pack_codes(x, name: str, *, chunk_bytes: int | None = None) -> tuple[np.ndarray, int]:
    """Validate binary codes and pack them into 64-bit words.

    Returns ``(words, n_bits)``: ``words`` of shape ``(n, n_words(n_bits))``, dtype
    ``uint64``, C-contiguous, padding bits zero (layout in the module docstring).
    ``x`` is a numpy array or torch tensor (any device; copied to host memory) of
    bool / {0,1} / {-1,+1} bits, or uint8 ``np.packbits`` bytes. Raises
    :class:`~retrieval_checks.errors.InputError` naming ``name`` otherwise.
    ``chunk_bytes``: input bytes validated and packed at a time (at least one row;
    default 16 MiB); the words and the messages do not depend on it.
    """
    if x is None:
        raise InputError(f"{name} is None: pass a 2-D array of binary codes; {_FIX}.")
    a = as_numpy(x, name)
    _check_shape(a, name)
    if a.dtype == np.uint8:
        return _from_packed(a, name)
    return _from_bits(a, name, _CHUNK_BYTES if chunk_bytes is None else int(chunk_bytes))


class PackedCodes(NamedTuple):
    """Validated binary codes: ``words`` (n x n_words uint64) holding ``n_bits`` bits."""

    words: np.ndarray
    n_bits: int

    @property
    def shape(self) -> tuple[int, int]:
        """(n, float32 columns the words take in memory): what the planner budgets."""
        return (int(self.words.shape[0]), 2 * int(self.words.shape[1]))

    def unpacked(self) -> np.ndarray:
        """The codes as a {0, 1} float32 array (n x n_bits)."""
        return np.unpackbits(self.words.view(np.uint8), axis=1)[:, : self.n_bits].astype(np.float32)


def pack_sides(
    queries, gallery, names=("queries", "gallery")
) -> tuple[PackedCodes, PackedCodes | None]:
    """Validate and pack the query codes and the gallery codes (None in leave-one-out);
    each side may be packed (uint8) or unpacked, but both must hold the same number of
    bits. ``names``: the two arrays' names in messages."""
    q = PackedCodes(*pack_codes(queries, names[0]))
    if gallery is None:
        return q, None
    g = PackedCodes(*pack_codes(gallery, names[1]))
    if q.n_bits != g.n_bits:
        raise InputError(
            f"{names[0]} hold {q.n_bits}-bit codes but {names[1]} {'holds' if names[1] == 'gallery' else 'hold'} "
            f"{g.n_bits}-bit codes (a uint8 array counts as "
            "np.packbits bytes, 8 bits per column); both must come from the same hash function: check the code "
            "length, and pack both sides the same way (or neither)."
        )
    return q, g


def words_to_torch(words: np.ndarray, device):
    """The uint64 words as an int64 tensor on ``device`` (the same 64 bits, reinterpreted)."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(words).view(np.int64)).to(device)


# ----------------------------------------------------------------------------- CPU tiles
def _check_tile(Qw, Gw, out) -> None:
    if Qw.ndim != 2 or Gw.ndim != 2 or Qw.shape[1] != Gw.shape[1]:
        raise ValueError(
            f"word arrays must be 2-D with equal widths, got {tuple(Qw.shape)} and {tuple(Gw.shape)}"
        )
    if tuple(out.shape) != (Qw.shape[0], Gw.shape[0]):
        raise ValueError(
            f"out must have shape {(Qw.shape[0], Gw.shape[0])}, got {tuple(out.shape)}"
        )


_NUMBA_STATE: tuple | None = None  # (kernel or None, why not), resolved on first use


def _numba_state() -> tuple:
    """The numba tile kernel (imported on first use: numba costs ~0.15 s to import), or
    None and the reason it is not available."""
    global _NUMBA_STATE
    if _NUMBA_STATE is None:
        try:
            from ._hamming_numba import tile
        except (
            Exception
        ) as exc:  # ImportError, or numba failing on an interpreter it does not support yet
            _NUMBA_STATE = (None, f"numba could not be imported ({type(exc).__name__}: {exc})")
        else:
            _NUMBA_STATE = (tile, None)
    return _NUMBA_STATE


def __getattr__(name: str):
    """``_tile_numba`` / ``_NUMBA_MISSING``: the kernel and the reason, resolved lazily."""
    if name == "_tile_numba":
        return _numba_state()[0]
    if name == "_NUMBA_MISSING":
        return _numba_state()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def hamming_tile(Qw: np.ndarray, Gw: np.ndarray, out: np.ndarray) -> None:
    """Numba kernel: ``out[i, j] = -HammingDistance(Qw[i], Gw[j])`` as float32.

    ``Qw`` (b, n_words) and ``Gw`` (c, n_words) uint64 words from :func:`pack_codes`;
    ``out`` a preallocated (b, c) float32 array (a view such as ``S[k]`` works). Raises
    :class:`~retrieval_checks.errors.BackendError` when numba is not available.
    """
    kernel, missing = _numba_state()
    if kernel is None:
        raise BackendError(f"the numba Hamming kernel is not available: {missing}")
    _check_tile(Qw, Gw, out)
    with NUMBA_LOCK:  # numba's workqueue layer: one parallel launch at a time
        kernel(Qw, np.ascontiguousarray(Gw.T), out)


_BYTE_COUNTS = np.array([bin(v).count("1") for v in range(256)], np.uint8)


def _popcount_rows(x: np.ndarray, lut: bool) -> np.ndarray:
    """Set bits summed over the last axis of a uint64 array (int64 result)."""
    if not lut and hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.bitwise_count(x).sum(axis=-1, dtype=np.int64)
    b = np.ascontiguousarray(x).view(np.uint8)
    return _BYTE_COUNTS[b].sum(axis=-1, dtype=np.int64)


def _hamming_tile_numpy(
    Qw: np.ndarray, Gw: np.ndarray, out: np.ndarray, *, _lut: bool = False
) -> None:
    """The numpy twin of :func:`hamming_tile` (same numbers). Rows go in groups whose
    temporaries (xor words, counts) take about as many bytes as ``out``. ``_lut``
    forces the byte lookup table used on numpy < 2.0 (tests)."""
    _check_tile(Qw, Gw, out)
    b, c = out.shape
    per_row = max(1, c * (9 * Qw.shape[1] + 8))
    rows = max(1, (4 * b * c) // per_row)
    for s in range(0, b, rows):
        x = np.bitwise_xor(Qw[s : s + rows, None, :], Gw[None, :, :])
        out[s : s + rows] = -_popcount_rows(x, _lut)


# ----------------------------------------------------------------------------- torch tile
def _popcount_torch_(x):
    """Set bits per int64 element of ``x`` (overwritten), as int64. The sign bit is
    counted apart and cleared first, so every step stays in ``[0, 2**63)``: no
    overflow, and arithmetic and logical right shifts agree."""
    import torch

    sign = x < 0
    x.bitwise_and_(_M63)
    y = torch.bitwise_right_shift(x, 1)
    x.sub_(y.bitwise_and_(_M1))
    torch.bitwise_right_shift(x, 2, out=y)
    x.bitwise_and_(_M2).add_(y.bitwise_and_(_M2))
    torch.bitwise_right_shift(x, 4, out=y)
    x.add_(y).bitwise_and_(_M4)  # one count per byte, each <= 8
    for shift in (8, 16, 32):
        torch.bitwise_right_shift(x, shift, out=y)
        x.add_(y)
    return x.bitwise_and_(0x7F).add_(sign)


def hamming_tile_torch(Qw, Gw, out, *, budget: int | None = None) -> None:
    """``out[i, j] = -HammingDistance(Qw[i], Gw[j])`` on torch (CUDA, or CPU).

    ``Qw`` (b, n_words) and ``Gw`` (c, n_words) int64 tensors holding the uint64 words
    bit for bit (:func:`words_to_torch`), on ``out``'s device; ``out`` a (b, c) float32
    tensor. Pairs go in groups of rows (and columns, when one row is larger) whose
    temporaries (xor words, shifted words, sign bits, counts: ``17 n_words + 8`` bytes
    per pair) take about as many bytes as ``out``, at least 1 MiB (or ``budget`` bytes,
    at least one pair's); every grouping gives the same numbers.
    """
    import torch

    _check_tile(Qw, Gw, out)
    b, c = (int(s) for s in out.shape)
    w = int(Qw.shape[1])
    if budget is None:
        budget = max(_TORCH_OUT_FACTOR * 4 * b * c, _TORCH_MIN_BYTES)
    pairs = max(1, int(budget) // (17 * w + 8))
    rows, cols = (max(1, pairs // c), c) if pairs >= c else (1, pairs)
    for s in range(0, b, rows):
        q = Qw[s : s + rows, None, :]
        for j in range(0, c, cols):
            x = torch.bitwise_xor(q, Gw[None, j : j + cols, :])
            counts = _popcount_torch_(x).sum(dim=2)
            out[s : s + rows, j : j + cols] = counts.neg_()


# ----------------------------------------------------------------------------- dispatch
def hamming_into(Qw, Gw, out, *, torch_tensors: bool | None = None) -> None:
    """Fill the float32 tile ``out`` with ``-HammingDistance(Qw[i], Gw[j])``.

    Torch tensors (``torch_tensors=True``, or detected from ``out``) on a GPU go to
    :func:`hamming_tile_torch`; on the CPU they are read and written through numpy views
    (no copy). Numpy words go to the numba kernel, or to numpy where the other kernels
    run on numpy (:data:`.counting._kernels.ACCELERATOR`: numba missing, or
    ``RETRIEVAL_CHECKS_KERNELS=numpy``).
    """
    if torch_tensors is None:
        torch_tensors = is_torch_tensor(out)
    if torch_tensors:
        if out.device.type != "cpu":
            hamming_tile_torch(Qw, Gw, out)
            return
        # CPU tensors: numpy views of the same memory, for the ~100x faster CPU kernels
        Qw, Gw, out = (t.detach().numpy() for t in (Qw, Gw, out))
        Qw, Gw = Qw.view(np.uint64), Gw.view(np.uint64)
    if _kernels.ACCELERATOR == "numba" and _numba_state()[0] is not None:
        hamming_tile(Qw, Gw, out)
    else:
        _hamming_tile_numpy(Qw, Gw, out)


#: The name the engine's tile loop calls.
hamming_scores = hamming_into
