"""The compiled scan of the fused CPU counter (:mod:`._fused_cpu`): one cache-sized tile
of scores, scanned right after its product, its counts added to the rows' histograms.

Imported on first use (numba costs ~0.15 s to import); compiled with ``cache=True``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._kernels_numba import (
    BUCKETS_PER_SCORE,
    MAX_BUCKETS,
    bisect_sorted,
    count_bucketed,
    fill_buckets,
)
from ._simd_numba import (
    LANES,
    VECTOR_COMPRESS,
    compact_at_least,
    compact_lanes_at_least,
    place16,
)

__all__ = [
    "scan_tile",
    "finish_counts",
    "pad_rows",
    "bin_tile",
    "mask_columns",
    "unmask",
    "scan_columns",
    "relevant_plan",
]

# A row's buffered scores (n) against its r relevant scores: compared with every one,
# branch-free, about 0.23 r ns a score (4 ns at r = 17, 15 at 64, 59 at 256: this project's
# Xeon, every score buffered), or placed by the row's bucket table, about 19 ns a score
# plus ~3 r ns to build the table for the row and tile. Rows of at most _VECTOR_RELEVANT
# always compare; longer ones compare while 0.23 r n <= 19 n + 3 r, else use the table.
_VECTOR_RELEVANT = 64
# _SERIAL_PLACEMENT: these kernels are serial (one per worker thread) and write out the
# steps of _kernels_numba.place_score / place_bucketed instead of calling them. Called
# (inlined) from a serial numba function, each call cost 13-30 ns a score more than the
# same steps written in the loop (measured: 50 -> 37 ns by bisection, 46 -> 15 ns by the
# bucket table, 300 relevant scores a row), a cost the parallel scored kernel does not pay.


@njit(cache=True, nogil=True)
def scan_tile(  # long: a numba kernel: each row's mask, compaction and counts in one loop
    T,
    m,
    width,
    col0,
    mask_ptr,
    mask_cols,
    rel_ptr,
    rel_sorted,
    hist,
    tie_diff,
    above,
    tied,
    tau,
    buf,
    neg,
):
    """Scan rows ``0..m-1`` of the tile ``T`` (C-ordered; columns ``0..width-1`` are
    gallery items ``col0 ..``) and add their counts to the row's accumulators. The
    counts are those of :func:`._kernels_numba.count_above_relevant`, exactly: for the
    row's relevant score ``k`` (``rel_sorted[rel_ptr[i] + k]``, ascending), the
    non-relevant scores ``>=`` it and ``==`` it.

    First the row's masked columns (``mask_cols[mask_ptr[i]:mask_ptr[i+1]]``, relevant
    and self pairs, global indices) are set to -inf. Then one vectorised pass
    (:func:`._simd_numba.compact_at_least`) copies to ``buf`` (``width`` long) the
    scores that reach the lower of the row's lowest relevant score ``lo`` and the pair
    metrics' tail threshold ``tau``: a few percent of the row, usually. Those ``>=
    tau`` are the row's negative tail, appended to ``neg``; only scores ``>= lo`` can be
    ``>=`` a relevant score, so the counts read the short buffer:

    - rows with at most :data:`_VECTOR_RELEVANT` relevant scores, or few buffered ones
      (the cost rule beside it), compare every relevant score with every buffered score
      (branch-free; added to ``above`` / ``tied``);
    - the others place each buffered score among their relevant scores by the row's
      bucket table (``hist[rel_ptr[i] + i + p]``: scores with ``p`` relevant scores
      ``<=`` them; ``tie_diff`` the tie groups' difference array), as the scored kernel
      does.

    :func:`finish_counts` adds the two. Returns how many negatives it wrote to ``neg``
    (row after row, in column order; ``m * width`` long at least; none when ``tau`` is
    +inf). Serial: the fused counter runs one worker per panel of rows, each with its
    own tile and buffers."""
    flat = T.reshape(-1)
    stride = T.shape[1]
    want_tail = tau != np.inf
    nn = 0
    start = np.empty(0, np.int64)  # the bucket table of a long row, reused
    for i in range(m):
        a = rel_ptr[i]
        e = rel_ptr[i + 1]
        r = e - a
        base = i * stride
        for q in range(mask_ptr[i], mask_ptr[i + 1]):
            col = mask_cols[q] - col0
            if col >= 0 and col < width:
                flat[base + col] = -np.inf
        lo = rel_sorted[a] if r > 0 else np.float32(np.inf)
        thr = min(lo, tau)
        if thr == np.inf:
            continue
        n = compact_at_least(flat, base, width, thr, buf, VECTOR_COMPRESS)
        if want_tail:
            if tau <= lo:  # every buffered score is in the tail
                neg[nn : nn + n] = buf[:n]
                nn += n
            else:
                for q in range(n):
                    s = buf[q]
                    neg[nn] = s
                    nn += s >= tau
        if r == 0 or n == 0:
            continue
        if tau < lo:  # the tail reached below lo: keep the scores that can count
            kept = 0
            for q in range(n):
                s = buf[q]
                buf[kept] = s
                kept += s >= lo
            n = kept
        if r <= _VECTOR_RELEVANT or n * (23 * r - 1900) <= 300 * r:  # see _VECTOR_RELEVANT
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
                for q in range(n):
                    s = buf[q]
                    ge += np.int32(s >= v)
                    eq += np.int32(s == v)
                above_last = ge
                tied_last = eq
                above[k] += ge
                tied[k] += eq
            continue
        h = a + i
        nb = min(BUCKETS_PER_SCORE * r, MAX_BUCKETS)  # the row's table (_kernels_numba)
        if start.shape[0] < nb + 1:
            start = np.empty(nb + 1, np.int64)
        lo64, scale = fill_buckets(rel_sorted, a, e, start, 0, nb)
        for q in range(n):  # place_bucketed's steps, written out: see _SERIAL_PLACEMENT
            s = buf[q]
            p = count_bucketed(rel_sorted, a, s, False, lo64, scale, start, 0, nb)
            hist[h + p] += 1
            if rel_sorted[a + p - 1] == s:  # p >= 1: s >= lo
                t = count_bucketed(rel_sorted, a, s, True, lo64, scale, start, 0, nb)
                tie_diff[h + t] += 1
                tie_diff[h + p] -= 1
    return nn


@njit(cache=True, nogil=True)
def pad_rows(rel_ptr, rel_sorted, n):
    """Rows ``0..n-1``'s sorted relevant scores in 16 slots each, then +inf (rows of more
    than 16: all +inf, they are placed by bisection): :func:`scan_columns`'s table."""
    pads = np.full(n * LANES, np.inf, np.float32)
    for r in range(n):
        a = rel_ptr[r]
        e = rel_ptr[r + 1]
        if e - a <= LANES:
            for k in range(a, e):
                pads[r * LANES + k - a] = rel_sorted[k]
    return pads


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
def scan_columns(  # long: a numba kernel: compaction, tail and placement in one loop
    T, m, width, row0, rel_ptr, rel_sorted, lo, pads, hist, tie_diff, tau, thr, vals, idx, neg
):
    """The mirrored side of a tile: column ``j`` holds the scores of problem row
    ``row0 + j`` against the tile's rows (its masked pairs already -inf). The tile is
    read row by row (contiguous): one vectorised pass
    (:func:`._simd_numba.compact_lanes_at_least`) lists the scores that reach their
    column's threshold, the lower of the row's lowest relevant score ``lo[row0 + j]`` and
    the tail threshold ``tau`` (a few percent). Of those, the scores ``>= tau`` are
    appended to ``neg`` (the negative tail; ``m * width`` long at least), and each score
    ``>= lo`` is placed among the row's sorted relevant scores
    (``rel_sorted[rel_ptr[r]:rel_ptr[r + 1]]``, global rows ``r``) into its histogram
    ``hist[rel_ptr[r] + r + p]`` and tie groups ``tie_diff``, as :func:`scan_tile`'s
    bisection does: :func:`finish_counts` turns them into the counts. Rows of at most
    16 relevant scores are placed by two vector compares against ``pads[16 r : 16 r +
    16]`` (:func:`pad_rows`), longer ones by bisection (a row's bucket table, which
    :func:`scan_tile` uses, measured slower here: each score goes to another row's
    table, out of cache). ``thr``, ``vals``
    and ``idx`` are scratch (``width`` long at least). Returns how many negatives it
    wrote."""
    flat = T.reshape(-1)
    stride = T.shape[1]
    want_tail = tau != np.inf
    for j in range(width):
        thr[j] = min(lo[row0 + j], tau)
    nn = 0
    for i in range(m):
        n = compact_lanes_at_least(flat, i * stride, width, thr, vals, idx, VECTOR_COMPRESS)
        for q in range(n):
            s = vals[q]
            if want_tail:
                neg[nn] = s
                nn += s >= tau
            r = row0 + idx[q]
            a = rel_ptr[r]
            h = a + r
            if rel_ptr[r + 1] - a <= LANES:  # two vector compares, no branch
                p, eq = place16(pads, r * LANES, s, VECTOR_COMPRESS)
                hist[h + p] += 1  # p = 0 (below lo, in the tail only): never read
                if eq:
                    tie_diff[h + p - eq] += 1
                    tie_diff[h + p] -= 1
                continue
            if s < lo[r]:
                continue
            p = bisect_sorted(rel_sorted, a, rel_ptr[r + 1], s, False)  # place_score's steps
            hist[h + p] += 1
            if rel_sorted[a + p - 1] == s:  # p >= 1: s >= lo
                t = bisect_sorted(rel_sorted, a, a + p, s, True)
                tie_diff[h + t] += 1
                tie_diff[h + p] -= 1
    return nn


@njit(cache=True, nogil=True)
def relevant_plan(rows, indptr, indices, n_g, ts, g, step):  # long: a numba kernel
    """The relevant sweep's plan (:func:`._fused_cpu._relevant_plan`) for ``rows`` (block
    rows in sub-panel order, ``ts`` a sub-panel) and their relevant items (CSR
    ``indptr`` / ``indices``, items below ``n_g``): each sub-panel's distinct items in
    slots (in the order the sub-panel's rows first name them), in tiles
    of width ``g`` and a last one rounded up to a multiple of ``step``; every pair's
    position in the CSR (sub-panel by sub-panel, by slot), its tile, and where its score
    lands when the tiles' ``ts x w`` products are laid out one after the other. Returns
    ``(slot_ptr, index, pad, tile_ptr, tile_slot, tile_w, pairs, tile_pairs, flat)``."""
    n_rows = rows.size
    n_sub = (n_rows + ts - 1) // ts
    pair_ptr = np.zeros(n_sub + 1, np.int64)
    for s in range(n_sub):
        c = 0
        for li in range(s * ts, min(n_rows, (s + 1) * ts)):
            r = rows[li]
            c += indptr[r + 1] - indptr[r]
        pair_ptr[s + 1] = pair_ptr[s] + c
    n_pairs = pair_ptr[n_sub]
    pairs = np.empty(n_pairs, np.int64)
    lane = np.empty(n_pairs, np.int64)
    slot = np.empty(n_pairs, np.int64)
    n_items = np.zeros(n_sub, np.int64)
    widest = 0
    for s in range(n_sub):
        widest = max(widest, pair_ptr[s + 1] - pair_ptr[s])
    mark = np.full(n_g, -1, np.int64)  # an item's slot in the current sub-panel
    uniq = np.empty(widest, np.int64)
    seg_p = np.empty(widest, np.int64)
    seg_l = np.empty(widest, np.int64)
    seg_s = np.empty(widest, np.int64)
    count = np.zeros(widest + 1, np.int64)
    items = np.empty(n_pairs, np.int64)  # each sub-panel's distinct items, slot by slot
    for s in range(n_sub):  # slots in order of first sight, then the pairs by slot
        a = pair_ptr[s]
        k = 0
        u = 0
        for li in range(s * ts, min(n_rows, (s + 1) * ts)):
            r = rows[li]
            for q in range(indptr[r], indptr[r + 1]):
                item = indices[q]
                if mark[item] < 0:
                    mark[item] = u
                    uniq[u] = item
                    u += 1
                seg_p[k] = q
                seg_l[k] = li - s * ts
                seg_s[k] = mark[item]
                k += 1
        count[: u + 1] = 0
        for i in range(k):
            count[seg_s[i] + 1] += 1
        for j in range(u):
            count[j + 1] += count[j]
        for i in range(k):
            at = a + count[seg_s[i]]
            count[seg_s[i]] += 1
            pairs[at] = seg_p[i]
            lane[at] = seg_l[i]
            slot[at] = seg_s[i]
        for j in range(u):
            items[a + j] = uniq[j]
            mark[uniq[j]] = -1
        n_items[s] = u
    slot_ptr = np.zeros(n_sub + 1, np.int64)
    tile_ptr = np.zeros(n_sub + 1, np.int64)
    for s in range(n_sub):
        full = n_items[s] // g
        rest = n_items[s] - full * g
        last = min(g, (rest + step - 1) // step * step) if rest > 0 else 0
        slot_ptr[s + 1] = slot_ptr[s] + full * g + last
        tile_ptr[s + 1] = tile_ptr[s] + full + (1 if rest > 0 else 0)
    n_tiles = tile_ptr[n_sub]
    tile_slot = np.empty(n_tiles, np.int64)
    tile_w = np.empty(n_tiles, np.int64)
    for s in range(n_sub):
        for t in range(tile_ptr[s], tile_ptr[s + 1]):
            j = t - tile_ptr[s]
            tile_slot[t] = slot_ptr[s] + j * g
            tile_w[t] = min(g, slot_ptr[s + 1] - tile_slot[t])
    index = np.zeros(slot_ptr[n_sub], np.int64)
    pad = np.ones(slot_ptr[n_sub], np.bool_)
    flat = np.empty(n_pairs, np.int64)
    tile_pairs = np.zeros(n_tiles + 1, np.int64)
    for s in range(n_sub):
        for i in range(pair_ptr[s], pair_ptr[s + 1]):
            at = slot_ptr[s] + slot[i]
            index[at] = items[pair_ptr[s] + slot[i]]
            pad[at] = False
            t = tile_ptr[s] + slot[i] // g
            flat[i] = ts * tile_slot[t] + lane[i] * tile_w[t] + at - tile_slot[t]
            tile_pairs[t + 1] = i + 1
    for t in range(
        n_tiles
    ):  # a tile without pairs (none: every slot holds an item) ends where the last did
        if tile_pairs[t + 1] < tile_pairs[t]:
            tile_pairs[t + 1] = tile_pairs[t]
    return slot_ptr, index, pad, tile_ptr, tile_slot, tile_w, pairs, tile_pairs, flat
