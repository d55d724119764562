"""Vectorised numpy twins of the compiled kernels (:mod:`._kernels_numba`), for
interpreters without numba (not installed, or not yet released for a new CPython).

Same arguments, same outputs, bit for bit: every comparison is done on order-preserving
integer keys of the float32 scores (``-0.0`` folded into ``+0.0`` first, as float
comparison treats them), so ``<=`` and ``<`` mean exactly what they mean in the
kernels. Rows are processed in groups of about ``_ELEMENTS`` scores, so the
temporaries (keys, positions) stay within a few times that many bytes.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "count_above_relevant",
    "collect_rows",
    "bin_against_sorted",
    "key_histogram",
    "key_to_float",
    "float_keys",
    "cosine_row_scales",
    "cosine_scaled_rows",
    "cosine_divide_rows",
]

_ELEMENTS = 1 << 22  # scores per row group


def float_keys(x: np.ndarray) -> np.ndarray:
    """uint32 keys that sort like the float32 values (``-0.0`` and ``0.0`` share a key)."""
    u = (np.asarray(x, np.float32) + np.float32(0.0)).view(np.uint32)
    return np.where(u & np.uint32(0x80000000), ~u, u | np.uint32(0x80000000)).astype(np.uint32)


def key_to_float(key: np.uint32) -> float:
    """The float32 whose order-preserving key is ``key`` (inverse of :func:`float_keys`)."""
    key = np.uint32(key)
    bits = key & np.uint32(0x7FFFFFFF) if key & np.uint32(0x80000000) else ~key
    return float(np.array([bits], np.uint32).view(np.float32)[0])


def _row_groups(n_rows: int, n_cols: int):
    step = max(1, _ELEMENTS // max(n_cols, 1))
    for a in range(0, n_rows, step):
        yield a, min(n_rows, a + step)


def _rows(S: np.ndarray, a: int, b: int, n_cols: int) -> np.ndarray:
    """Scores of block rows a..b-1 as (b - a) x n_cols, chunks laid end to end."""
    n_chunks, _, c = S.shape
    return S[:, a:b, :].transpose(1, 0, 2).reshape(b - a, n_chunks * c)[:, :n_cols]


def count_above_relevant(S, n_rows, n_cols, rel_ptr, rel_sorted, out, tied, tau, tail_counts):
    """See :func:`._kernels_numba.count_above_relevant`."""
    rel_ptr = np.asarray(rel_ptr, np.int64)
    # one sorted key space for all rows: (row << 32) | key; rows are sorted ascending inside
    rel_rows = np.repeat(np.arange(n_rows, dtype=np.uint64), np.diff(rel_ptr[: n_rows + 1]))
    rel_keys = (rel_rows << np.uint64(32)) | float_keys(rel_sorted[: rel_ptr[n_rows]]).astype(
        np.uint64
    )
    tau = np.float32(tau)
    for a, b in _row_groups(n_rows, n_cols):
        block = _rows(S, a, b, n_cols)
        tail_counts[a:b] = (block >= tau).sum(axis=1)
        rows = np.arange(a, b, dtype=np.uint64)[:, None]
        keys = ((rows << np.uint64(32)) | float_keys(block).astype(np.uint64)).ravel()
        # relevant scores of the row that are <= s (right) and < s (left), from the row's start
        right = (
            np.searchsorted(rel_keys, keys, side="right").reshape(b - a, -1) - rel_ptr[a:b, None]
        )
        left = np.searchsorted(rel_keys, keys, side="left").reshape(b - a, -1) - rel_ptr[a:b, None]
        for i in range(a, b):
            r = int(rel_ptr[i + 1] - rel_ptr[i])
            if r == 0:
                continue
            hist = np.bincount(right[i - a], minlength=r + 1)
            # scores with insertion position p count against relevant items 0..p-1
            suffix = np.cumsum(hist[::-1])[::-1]
            out[rel_ptr[i] : rel_ptr[i + 1]] = suffix[1 : r + 1]
            # a score equal to relevant items left..right-1 ties with each of them
            eq = left[i - a] < right[i - a]
            diff = np.bincount(left[i - a][eq], minlength=r + 1) - np.bincount(
                right[i - a][eq], minlength=r + 1
            )
            tied[rel_ptr[i] : rel_ptr[i + 1]] = np.cumsum(diff)[:r]


def collect_rows(S, rows, offsets, n_cols, tau, out):
    """See :func:`._kernels_numba.collect_rows`."""
    tau = np.float32(tau)
    for q, i in enumerate(np.asarray(rows)):
        row = _rows(S, int(i), int(i) + 1, n_cols)[0]
        out[offsets[q] : offsets[q + 1]] = row[row >= tau]


def bin_against_sorted(S, n_rows, n_cols, sorted_values, out):
    """See :func:`._kernels_numba.bin_against_sorted`; scores below the smallest value
    (masked pairs included) are not counted."""
    values = float_keys(sorted_values)
    for a, b in _row_groups(n_rows, n_cols):
        pos = np.searchsorted(values, float_keys(_rows(S, a, b, n_cols)).ravel(), side="right")
        counts = np.bincount(pos, minlength=values.size + 1)
        out[1:] += counts[1:]


def key_histogram(U, n_rows, n_cols, out):
    """See :func:`._kernels_numba.key_histogram`: top 16 bits of the keys of finite scores."""
    S = U.view(np.float32)
    for a, b in _row_groups(n_rows, n_cols):
        block = _rows(S, a, b, n_cols)
        keys = float_keys(block[block != -np.inf])
        out += np.bincount(keys >> np.uint32(16), minlength=65536)[:65536]


# ----------------------------------------------------------------------------- cosine rows
# The three steps of :meth:`.._backend.Backend.cosine_rows_into` on one chunk of rows
# (float32 or float64, host): every value exact or correctly rounded once, so both
# implementations give the same bits.
def cosine_row_scales(x, e, integral):
    """``e[i]``: the binary exponent of row i's largest |entry| (frexp); ``integral[i]``:
    whether the row scaled to a largest entry in [2^23, 2^24) is all integers."""
    p64 = np.asarray(x, dtype=np.float64)
    _, e[:] = np.frexp(np.abs(p64).max(axis=1))
    y = np.ldexp(p64, (24 - e)[:, None])
    integral[:] = (y == np.round(y)).all(axis=1)


def cosine_scaled_rows(x, e, rows, z):
    """``z[t] = x[rows[t]] * 2^-e[rows[t]]`` in float64 (exact)."""
    z[:] = np.ldexp(np.asarray(x[rows], dtype=np.float64), -e[rows][:, None])


def cosine_divide_rows(z, sq, rows, block):
    """``block[rows[t]] = float32(z[t] / sqrt(sq[t]))``."""
    block[rows] = z / np.sqrt(sq)[:, None]
