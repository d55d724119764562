"""Compiled CPU kernels for the streaming engine (numba): the default accelerator.

All kernels read one query block's similarity tiles, stored as ``S[k, i, j]``: the
score of block row ``i`` against gallery item ``k * c + j``. Pairs that must not be
counted (relevant items, self matches, padding) hold ``-inf`` and are skipped by
every kernel because all thresholds they compare with are finite.

Ties. The scan counts non-relevant scores ``>=`` each relevant score and, apart,
those ``==`` it: the pessimistic rank, the optimistic rank and the tie-aware
expectation all follow from the two counts.
"""

from __future__ import annotations

import math

import numpy as np
from numba import get_num_threads, njit, prange

__all__ = [
    "bisect_sorted",
    "place_score",
    "count_above_relevant",
    "collect_rows",
    "bin_against_sorted",
    "key_histogram",
    "cosine_row_scales",
    "cosine_scaled_rows",
    "cosine_divide_rows",
]


@njit(cache=True, nogil=True, inline="always")
def bisect_sorted(values, lo, hi, x, strict):
    """Number of ``values[lo:hi]`` (sorted ascending) that are ``<= x`` (or ``< x`` if strict)."""
    a = lo
    b = hi
    if strict:
        while a < b:
            mid = (a + b) >> 1
            if values[mid] < x:
                a = mid + 1
            else:
                b = mid
    else:
        while a < b:
            mid = (a + b) >> 1
            if values[mid] <= x:
                a = mid + 1
            else:
                b = mid
    return a - lo


# Placing a score among a row's sorted relevant scores by bisection costs a dependent,
# mispredicted branch per step: 36 ns a score at 100 relevant scores, 47 ns at 300 (numba,
# this project's Xeon). Rows with at least MIN_BUCKETED of them use a table instead:
# BUCKETS_PER_SCORE buckets per relevant score, equal in width between the row's lowest
# and highest, each holding how many relevant scores fall below it (13 ns at 100 and 300).
BUCKETS_PER_SCORE = 4
MIN_BUCKETED = 9
# at most this many buckets a row (512 KiB of int64), so that a query with millions of
# relevant items does not hold a table 4x their size per thread beyond the budget's
# blocks; fuller buckets are bisected (count_bucketed), with the same counts
MAX_BUCKETS = 1 << 16


@njit(cache=True, nogil=True, inline="always")
def bucket_of(x, lo, scale, nb):
    """The bucket of ``x`` among ``nb``: ``(x - lo) * scale`` in float64, truncated and
    clamped to ``0 .. nb - 1``. Each step is monotone in ``x`` (a float32 is exact in
    float64; a rounded subtraction and a product by a positive finite ``scale`` never
    reverse an order), so ``bucket_of(v) < bucket_of(x)`` implies ``v < x`` and ``>``
    implies ``v > x``: a score's count is exact whatever the rounding."""
    t = (np.float64(x) - lo) * scale
    if t >= nb:
        return nb - 1
    if t <= 0.0:
        return 0
    return int(t)


@njit(cache=True, nogil=True, inline="always")
def fill_buckets(values, a, e, start, s0, nb):
    """The table of ``values[a:e]`` (sorted ascending, ``e > a``) in ``start[s0 : s0 + nb
    + 1]``: ``start[s0 + b]`` values fall in buckets below ``b``. Returns ``(lo, scale)``
    for :func:`count_bucketed` (``scale`` 0 when every value is equal: one bucket)."""
    lo = np.float64(values[a])
    hi = np.float64(values[e - 1])
    scale = nb / (hi - lo) if hi > lo else 0.0  # hi - lo >= 2^-149: scale stays finite
    for b in range(nb + 1):
        start[s0 + b] = 0
    for k in range(a, e):
        start[s0 + bucket_of(values[k], lo, scale, nb) + 1] += 1
    for b in range(nb):
        start[s0 + b + 1] += start[s0 + b]
    return lo, scale


@njit(cache=True, nogil=True, inline="always")
def count_bucketed(values, a, x, strict, lo, scale, start, s0, nb):
    """Number of ``values[a:e]`` ``<= x`` (``< x`` if strict), from the table
    :func:`fill_buckets` made of them: the values of lower buckets, then those of ``x``'s
    own bucket, read in order (bisected where a bucket holds more than 8)."""
    b = bucket_of(x, lo, scale, nb)
    k = a + start[s0 + b]
    end = a + start[s0 + b + 1]
    if end - k > 8:
        return k - a + bisect_sorted(values, k, end, x, strict)
    if strict:
        while k < end and values[k] < x:
            k += 1
    else:
        while k < end and values[k] <= x:
            k += 1
    return k - a


@njit(cache=True, nogil=True, inline="always")
def place_bucketed(rel_sorted, a, s, hist, tie_diff, h, lo, scale, start, s0, nb):
    """:func:`place_score` by the row's bucket table (:func:`fill_buckets`): the same
    counts."""
    p = count_bucketed(rel_sorted, a, s, False, lo, scale, start, s0, nb)
    hist[h + p] += 1
    if p > 0 and rel_sorted[a + p - 1] == s:
        q = count_bucketed(rel_sorted, a, s, True, lo, scale, start, s0, nb)
        tie_diff[h + q] += 1
        tie_diff[h + p] -= 1


@njit(parallel=True, cache=True, nogil=True)
def count_above_relevant(S, n_rows, n_cols, rel_ptr, rel_sorted, out, tied, tau, tail_counts):
    """For every relevant item, count the non-relevant scores at or above it and equal to it.

    ``rel_sorted[rel_ptr[i]:rel_ptr[i + 1]]`` holds row ``i``'s relevant scores in
    ascending order. ``out[t]`` receives, for relevant score ``t``, the number of
    non-relevant scores of its row that are ``>=`` it, and ``tied[t]`` the number
    that are ``==`` it (so ``out - tied`` counts those ``>`` it): both tie policies
    and the tie-aware average come from one scan. Scores below a row's smallest
    relevant score are skipped without a search. In the same scan, ``tail_counts[i]``
    receives the number of row ``i``'s scores ``>= tau`` (``tau = inf``: no tail).
    """
    n_chunks = S.shape[0]
    c = S.shape[2]
    for i in prange(n_rows):
        a = rel_ptr[i]
        e = rel_ptr[i + 1]
        r = e - a
        lo = rel_sorted[a] if r > 0 else np.float32(np.inf)
        hist = np.zeros(r + 1, np.int64)
        tie_diff = np.zeros(r + 1, np.int64)
        n_tail = 0
        bucketed = r >= MIN_BUCKETED  # the row's bucket table (see BUCKETS_PER_SCORE)
        nb = min(BUCKETS_PER_SCORE * r, MAX_BUCKETS) if bucketed else 0
        start = np.empty(nb + 1, np.int64)
        lo64, scale = fill_buckets(rel_sorted, a, e, start, 0, nb) if bucketed else (0.0, 0.0)
        for k in range(n_chunks):
            width = min(c, n_cols - k * c)
            for j in range(width):
                s = S[k, i, j]
                if s >= tau:
                    n_tail += 1
                if s < lo:
                    continue
                if bucketed:  # the same for the whole row
                    place_bucketed(rel_sorted, a, s, hist, tie_diff, 0, lo64, scale, start, 0, nb)
                else:
                    place_score(rel_sorted, a, e, s, hist, tie_diff, 0)
        tail_counts[i] = n_tail
        acc = 0
        for t in range(r, 0, -1):
            acc += hist[t]
            out[a + t - 1] = acc
        run = 0
        for t in range(r):
            run += tie_diff[t]
            tied[a + t] = run


@njit(parallel=True, cache=True, nogil=True)
def collect_rows(S, rows, offsets, n_cols, tau, out):
    """Scores ``>= tau`` of the given rows into ``out[offsets[q]:offsets[q + 1]]``."""
    n_chunks = S.shape[0]
    c = S.shape[2]
    for q in prange(rows.shape[0]):
        i = rows[q]
        p = offsets[q]
        for k in range(n_chunks):
            width = min(c, n_cols - k * c)
            for j in range(width):
                s = S[k, i, j]
                if s >= tau:
                    out[p] = s
                    p += 1


@njit(parallel=True, cache=True, nogil=True)
def _bin_against_sorted(S, n_rows, n_cols, sorted_values, out, n_workers):
    """``out[p]`` += number of scores with exactly ``p`` of ``sorted_values`` ``<=`` them.

    With ``sorted_values`` ascending (positive-pair scores, or fixed thresholds), the
    number of scores ``>= sorted_values[t]`` is ``out[t + 1:].sum()``.
    """
    n_chunks = S.shape[0]
    c = S.shape[2]
    n_v = sorted_values.shape[0]
    lo = sorted_values[0]
    n_threads = max(1, min(n_rows, n_workers))  # one partial histogram per thread
    partial = np.zeros((n_threads, n_v + 1), np.int64)
    for w in prange(n_threads):
        for i in range(w, n_rows, n_threads):
            for k in range(n_chunks):
                width = min(c, n_cols - k * c)
                for j in range(width):
                    s = S[k, i, j]
                    if s < lo:
                        continue
                    partial[w, bisect_sorted(sorted_values, 0, n_v, s, False)] += 1
    for w in range(n_threads):
        for p in range(n_v + 1):
            out[p] += partial[w, p]


@njit(parallel=True, cache=True, nogil=True)
def _key_histogram(U, n_rows, n_cols, out, n_workers):
    """Histogram of the top 16 bits of the order-preserving keys of finite scores.

    ``U`` is the float32 score array viewed as uint32. The key of a float with bits
    ``u`` is ``u | 0x80000000`` for a positive sign and ``~u`` for a negative one, so
    keys sort like the floats. ``-inf`` (masked pairs) is not counted.
    """
    n_chunks = U.shape[0]
    c = U.shape[2]
    n_threads = max(1, min(n_rows, n_workers))  # one partial histogram per thread
    partial = np.zeros((n_threads, 65536), np.int64)
    neg_inf_bits = np.uint32(0xFF800000)
    for w in prange(n_threads):
        for i in range(w, n_rows, n_threads):
            for k in range(n_chunks):
                width = min(c, n_cols - k * c)
                for j in range(width):
                    u = U[k, i, j]
                    if u == neg_inf_bits:
                        continue
                    if u & np.uint32(0x80000000):
                        key = ~u
                    else:
                        key = u | np.uint32(0x80000000)
                    partial[w, key >> np.uint32(16)] += 1
    for w in range(n_threads):
        for t in range(65536):
            out[t] += partial[w, t]


def bin_against_sorted(S, n_rows, n_cols, sorted_values, out):
    """See :func:`_bin_against_sorted`; one partial histogram per numba thread."""
    _bin_against_sorted(S, n_rows, n_cols, sorted_values, out, get_num_threads())


def key_histogram(U, n_rows, n_cols, out):
    """See :func:`_key_histogram`; one partial histogram per numba thread."""
    _key_histogram(U, n_rows, n_cols, out, get_num_threads())


# ----------------------------------------------------------------------------- cosine rows
# :mod:`._kernels_numpy`'s twins, one pass over the rows each instead of numpy's ~10
# full-size float64 temporaries: the same operations (frexp, ldexp, a correctly rounded
# sqrt and division, one rounding to float32), so the same bits.
@njit(cache=True, nogil=True, inline="always")
def place_score(rel_sorted, a, e, s, hist, tie_diff, h):
    """Add the score ``s`` (``>= rel_sorted[a]``) to the counts of the row's sorted
    relevant scores ``rel_sorted[a:e]``: ``hist[h + p] += 1`` with ``p`` of them ``<=
    s``, and its tie group (those ``== s``, ``q .. p - 1``) to the difference array
    ``tie_diff[h + ...]``. The suffix and prefix sums of :func:`count_above_relevant`
    turn them into the counts."""
    p = bisect_sorted(rel_sorted, a, e, s, False)
    hist[h + p] += 1
    if rel_sorted[a + p - 1] == s:  # s equals relevant scores q..p-1: a tie with each
        q = bisect_sorted(rel_sorted, a, a + p, s, True)
        tie_diff[h + q] += 1
        tie_diff[h + p] -= 1


@njit(cache=True, nogil=True)
def cosine_row_scales(x, e, integral):
    m, d = x.shape
    for i in range(m):
        top = 0.0
        for j in range(d):
            a = abs(np.float64(x[i, j]))
            if a > top:
                top = a
        ei = math.frexp(top)[1]
        e[i] = ei
        k = 24 - ei
        # where 2^k is a normal float64 the product rounds as ldexp does (~10x faster
        # than the libm call); else ldexp itself
        normal = -1022 <= k <= 1023
        scale = math.ldexp(1.0, k) if normal else 1.0
        ok = True
        for j in range(d):
            v = np.float64(x[i, j])
            y = v * scale if normal else math.ldexp(v, k)
            if y != math.floor(y):
                ok = False
                break
        integral[i] = ok


@njit(cache=True, nogil=True)
def cosine_scaled_rows(x, e, rows, z):
    d = x.shape[1]
    for t in range(rows.shape[0]):
        i = rows[t]
        k = -e[i]
        if -1022 <= k <= 1023:
            scale = math.ldexp(1.0, k)  # a normal float64: the product rounds as ldexp
            for j in range(d):
                z[t, j] = np.float64(x[i, j]) * scale
        else:
            for j in range(d):
                z[t, j] = math.ldexp(np.float64(x[i, j]), k)


@njit(cache=True, nogil=True)
def cosine_divide_rows(z, sq, rows, block):
    d = z.shape[1]
    for t in range(rows.shape[0]):
        n = math.sqrt(sq[t])
        i = rows[t]
        for j in range(d):
            block[i, j] = np.float32(z[t, j] / n)
