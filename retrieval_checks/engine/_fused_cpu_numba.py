"""The compiled scan of the fused CPU counter (:mod:`._fused_cpu`): one cache-sized tile
of scores, scanned right after its product, its counts added to the rows' histograms.

Imported on first use (numba costs ~0.15 s to import); compiled with ``cache=True``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._kernels_numba import bisect_sorted

__all__ = [
    "scan_tile",
    "finish_counts",
    "bin_tile",
    "key_histogram_tile",
    "mask_columns",
    "unmask",
    "scan_columns",
    "count_at_least",
    "collect_tile",
]

_SMALL = 16  # rows with at most this many relevant scores: branch-free search


@njit(cache=True, nogil=True, inline="always")
def _place(rel_sorted, a, e, pad, small, s):
    """Number of the row's relevant scores ``rel_sorted[a:e]`` (ascending) ``<= s``: a
    branch-free search of ``pad`` (the row's scores then +inf, 16 slots) when
    ``small``, else bisection. The same count either way (s is finite)."""
    if small:
        p = 8 * np.int64(pad[7] <= s)
        p += 4 * np.int64(pad[p + 3] <= s)
        p += 2 * np.int64(pad[p + 1] <= s)
        p += np.int64(pad[p] <= s)
        p += np.int64(pad[p] <= s)
        return p
    return bisect_sorted(rel_sorted, a, e, s, False)


_VECTOR_COST = 160  # a bisection costs about as much as this many vectorised comparisons


@njit(cache=True, nogil=True)
def scan_tile(  # long: a numba kernel: each row's mask, skip, search and counts in one loop
    T, m, width, col0, mask_ptr, mask_cols, rel_ptr, rel_sorted, hist, tie_diff, above, tied, tau
):
    """Scan rows ``0..m-1`` of the tile ``T`` (columns ``0..width-1`` are gallery items
    ``col0 ..``) and add their counts to the row's accumulators. The counts are those of
    :func:`._kernels_numba.count_above_relevant`, exactly: for the row's relevant score
    ``k`` (``rel_sorted[rel_ptr[i] + k]``, ascending), the non-relevant scores ``>=`` it
    and ``==`` it.

    First the row's masked columns (``mask_cols[mask_ptr[i]:mask_ptr[i+1]]``, relevant
    and self pairs, global indices) are set to -inf. Then one vectorised pass counts the
    scores ``>= tau`` (the pair metrics' tail), and one branch-free pass lists the
    columns whose score reaches the row's lowest relevant score ``lo``. With their
    number the row takes the cheaper of two exact ways:

    - many scores reach ``lo``: every relevant score is compared with every score in
      vectorised passes (branch-free; added to ``above`` / ``tied`` directly);
    - few do (a few percent, usually): the scores below ``lo`` are skipped by that
      list, without a branch per score, and each score ``>= lo`` is placed among the relevant
      scores by bisection (``hist[rel_ptr[i] + i + p]``: scores with ``p`` relevant
      scores ``<=`` them; ``tie_diff`` the tie groups' difference array), as the scored
      kernel does.

    :func:`finish_counts` adds the two. Returns, per row, the scores ``>= tau``. Serial:
    the fused counter runs one worker per panel of rows, each with its own tile."""
    tail = np.zeros(m, np.int64)
    pad = np.empty(_SMALL, np.float32)
    hits = np.empty(width, np.int32)
    for i in range(m):
        a = rel_ptr[i]
        e = rel_ptr[i + 1]
        r = e - a
        row = T[i]
        for q in range(mask_ptr[i], mask_ptr[i + 1]):
            col = mask_cols[q] - col0
            if col >= 0 and col < width:
                row[col] = -np.inf
        if tau != np.inf:
            n_tail = np.int32(0)
            for j in range(width):
                n_tail += np.int32(row[j] >= tau)
            tail[i] = n_tail
        if r == 0:
            continue
        lo = rel_sorted[a]
        n_lo = 0  # the columns whose score reaches lo, listed without a branch
        for j in range(width):
            hits[n_lo] = j
            n_lo += np.int32(row[j] >= lo)
        if n_lo == 0:
            continue
        if np.int64(n_lo) * _VECTOR_COST >= (r - 1) * width:
            above_last = 0
            tied_last = 0
            for k in range(a, e):
                v = rel_sorted[k]
                if k > a and v == rel_sorted[k - 1]:
                    above[k] += above_last
                    tied[k] += tied_last
                    continue
                ge = np.int32(0)  # int32: wider vectors (a tile row is < 2^31 scores)
                eq = np.int32(0)
                for j in range(width):
                    s = row[j]
                    ge += np.int32(s >= v)
                    eq += np.int32(s == v)
                above_last = ge
                tied_last = eq
                above[k] += ge
                tied[k] += eq
            continue
        h = a + i
        small = r <= _SMALL
        if small:
            for u in range(_SMALL):
                pad[u] = rel_sorted[a + u] if u < r else np.float32(np.inf)
        for q in range(n_lo):
            s = row[hits[q]]
            p = _place(rel_sorted, a, e, pad, small, s)
            hist[h + p] += 1
            if rel_sorted[a + p - 1] == s:
                qq = bisect_sorted(rel_sorted, a, a + p, s, True)
                tie_diff[h + qq] += 1
                tie_diff[h + p] -= 1
    return tail


@njit(cache=True, nogil=True)
def finish_counts(n_rows, rel_ptr, hist, tie_diff, out, tied):
    """Add the rows' histograms of the bisection path to ``out`` (scores ``>=`` each
    relevant score) and ``tied`` (scores ``==`` it), which already hold the direct
    counts of the vectorised path: the suffix and prefix sums that end
    :func:`._kernels_numba.count_above_relevant`."""
    for i in range(n_rows):
        a = rel_ptr[i]
        r = rel_ptr[i + 1] - a
        h = a + i
        acc = 0
        for t in range(r, 0, -1):
            acc += hist[h + t]
            out[a + t - 1] += acc
        run = 0
        for t in range(r):
            run += tie_diff[h + t]
            tied[a + t] += run


@njit(cache=True, nogil=True)
def bin_tile(T, m, width, sorted_values, out):
    """``out[p]`` += scores of rows ``0..m-1``, columns ``0..width-1`` with exactly ``p``
    of ``sorted_values`` ``<=`` them (scores below the smallest, masked pairs included,
    are not counted): :func:`._kernels_numba.bin_against_sorted` on one tile, serial."""
    n_v = sorted_values.shape[0]
    lo = sorted_values[0]
    for i in range(m):
        for j in range(width):
            s = T[i, j]
            if s < lo:
                continue
            out[bisect_sorted(sorted_values, 0, n_v, s, False)] += 1


@njit(cache=True, nogil=True)
def key_histogram_tile(T, m, width, out):
    """``out[key >> 16]`` += 1 for the finite scores of rows ``0..m-1``, columns
    ``0..width-1``: :func:`._kernels_numba.key_histogram` on one tile, serial (the keys
    order like the floats; -inf, the masked pairs, is not counted)."""
    U = T.view(np.uint32)
    neg_inf_bits = np.uint32(0xFF800000)
    for i in range(m):
        for j in range(width):
            u = U[i, j]
            if u == neg_inf_bits:
                continue
            if u & np.uint32(0x80000000):
                key = ~u
            else:
                key = u | np.uint32(0x80000000)
            out[key >> np.uint32(16)] += 1


@njit(cache=True, nogil=True)
def mask_columns(T, m, width, row0, col0, mask_ptr, mask_cols, at, saved):
    """The mirrored side's masks: column ``j`` of the tile is problem row ``row0 + j``,
    its masked columns (``mask_cols[mask_ptr[row0 + j]:...]``, global) that fall among
    the tile's rows ``col0 .. col0 + m - 1`` are set to -inf, their flat positions and
    scores kept in ``at`` / ``saved`` (returns how many) for :func:`unmask`."""
    n = 0
    for j in range(width):
        for q in range(mask_ptr[row0 + j], mask_ptr[row0 + j + 1]):
            i = mask_cols[q] - col0
            if i >= 0 and i < m:
                at[n] = i * T.shape[1] + j
                saved[n] = T[i, j]
                T[i, j] = -np.inf
                n += 1
    return n


@njit(cache=True, nogil=True)
def unmask(T, n, at, saved):
    """Put back the ``n`` scores :func:`mask_columns` masked."""
    flat = T.reshape(-1)
    for q in range(n):
        flat[at[q]] = saved[q]


@njit(cache=True, nogil=True)
def scan_columns(T, m, width, row0, rel_ptr, rel_sorted, lo, hist, tie_diff):
    """The mirrored side of a tile: column ``j`` holds the scores of problem row
    ``row0 + j`` against the tile's rows (its masked pairs already -inf). Each score
    ``>=`` the row's lowest relevant score ``lo[row0 + j]`` is placed among the row's
    sorted relevant scores (``rel_sorted[rel_ptr[r]:rel_ptr[r + 1]]``, global rows ``r``)
    into its histogram ``hist[rel_ptr[r] + r + p]`` and tie groups ``tie_diff``, as
    :func:`scan_tile`'s bisection path does: :func:`finish_counts` turns them into the
    counts. The tile is read row by row (contiguous); a branch-free pass lists the
    columns whose score reaches their row's ``lo`` (a few percent), then only those are
    placed."""
    hits = np.empty(width, np.int32)
    lo_c = lo[row0 : row0 + width]
    for i in range(m):
        row = T[i]
        n_hit = 0
        for j in range(width):
            hits[n_hit] = j
            n_hit += np.int32(row[j] >= lo_c[j])
        for q in range(n_hit):
            j = hits[q]
            r = row0 + j
            s = row[j]
            a = rel_ptr[r]
            p = bisect_sorted(rel_sorted, a, rel_ptr[r + 1], s, False)
            h = a + r
            hist[h + p] += 1
            if rel_sorted[a + p - 1] == s:
                qq = bisect_sorted(rel_sorted, a, a + p, s, True)
                tie_diff[h + qq] += 1
                tie_diff[h + p] -= 1


@njit(cache=True, nogil=True)
def count_at_least(T, m, width, tau):
    """Scores ``>= tau`` in rows ``0..m-1``, columns ``0..width-1``, per row."""
    out = np.zeros(m, np.int64)
    for i in range(m):
        n = np.int32(0)
        for j in range(width):
            n += np.int32(T[i, j] >= tau)
        out[i] = n
    return out


@njit(cache=True, nogil=True)
def collect_tile(T, m, width, tail, tau):
    """The scores ``>= tau`` of rows ``0..m-1``, columns ``0..width-1`` (``tail[i]`` of
    them in row ``i``, from :func:`scan_tile`), row after row: the pair metrics' negative
    tail of one tile without a boolean mask of the whole tile."""
    n = 0
    for i in range(m):
        n += tail[i]
    out = np.empty(n, np.float32)
    p = 0
    for i in range(m):
        if tail[i] == 0:
            continue
        for j in range(width):
            s = T[i, j]
            if s >= tau:
                out[p] = s
                p += 1
    return out
