"""The Triton JIT function of grouped recall's fused kernel (:mod:`._triton_grouped`
documents what it computes). Importing this module imports triton: :mod:`._triton_grouped`
does so on first use."""

from __future__ import annotations

import triton
import triton.language as tl

from ._triton_kernels import epilogue, tile_dot

__all__ = ["grouped_kernel"]


@triton.jit
def _tile(Q, G, QC, GC, QID, GID, QA, GA, rows, rmask, qc, qid, qa, row0, row_end, col0, g_end, d,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EPI: tl.constexpr):
    """One (query tile, gallery tile) of a unit: its scores (the shared fp32 tile product
    and score epilogue), valid pairs (inside both extents, different ids) and relevant
    pairs (valid and the same label code)."""
    cols = col0 + tl.arange(0, BN)
    cmask = cols < g_end
    gc = tl.load(GC + cols, mask=cmask, other=-2)
    gid = tl.load(GID + cols, mask=cmask, other=-4)
    if EPI != 0:
        ga = tl.load(GA + cols, mask=cmask, other=1.0)
    else:
        ga = tl.zeros((BN,), tl.float32)
    S = epilogue(tile_dot(Q, G, row0, col0, row_end, g_end, d, BM, BN, BK, False, False), qa, ga, EPI)
    valid = rmask[:, None] & cmask[None, :] & (qid[:, None] != gid[None, :])
    rel = valid & (qc[:, None] == gc[None, :])
    return S, valid, rel


@triton.jit
def grouped_kernel(Q, G, QC, GC, QID, GID, QA, GA, WR0, WRE, WG0, WGE, WS0, WS1, BEST, HAS, ABOVE, TIED, GROUP, CAND, d,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EPI: tl.constexpr):
    """One work item: ``BM`` query rows ``[WR0[w], min(WR0[w] + BM, WRE[w]))`` of a unit
    against the unit's gallery rows ``[WG0[w], WGE[w])``, in two sweeps over gallery
    tiles: the best relevant score of each row over the tiles ``[WS0[w], WS1[w])`` that
    can hold its relevant items (items are sorted by label inside a unit; ``WS0`` on
    the unit's tile grid, so a tile is the same tile in both sweeps), then the counts
    at it over every tile. Each program owns its rows: plain stores, no atomics."""
    w = tl.program_id(0)
    row0 = tl.load(WR0 + w)
    row_end = tl.load(WRE + w)
    g0 = tl.load(WG0 + w)
    g_end = tl.load(WGE + w)
    s0 = tl.load(WS0 + w)
    s1 = tl.load(WS1 + w)
    rows = row0 + tl.arange(0, BM)
    rmask = rows < row_end
    qc = tl.load(QC + rows, mask=rmask, other=-1)
    qid = tl.load(QID + rows, mask=rmask, other=-3)
    if EPI != 0:
        qa = tl.load(QA + rows, mask=rmask, other=1.0)
    else:
        qa = tl.zeros((BM,), tl.float32)
    best = tl.full((BM,), float("-inf"), tl.float32)
    has = tl.zeros((BM,), tl.int32)
    for col0 in range(s0, s1, BN):  # sweep 1: the best relevant score
        S, valid, rel = _tile(Q, G, QC, GC, QID, GID, QA, GA, rows, rmask, qc, qid, qa, row0, row_end, col0,
                              g_end, d, BM, BN, BK, EPI)
        best = tl.maximum(best, tl.max(tl.where(rel, S, float("-inf")), axis=1))
        has = tl.maximum(has, tl.max(rel.to(tl.int32), axis=1))
    above = tl.zeros((BM,), tl.int32)
    tied = tl.zeros((BM,), tl.int32)
    group = tl.zeros((BM,), tl.int32)
    cand = tl.zeros((BM,), tl.int32)
    for col0 in range(g0, g_end, BN):  # sweep 2: the same tiles, counted at the best score
        S, valid, rel = _tile(Q, G, QC, GC, QID, GID, QA, GA, rows, rmask, qc, qid, qa, row0, row_end, col0,
                              g_end, d, BM, BN, BK, EPI)
        neg = valid & (rel == 0)
        at = S == best[:, None]
        above += tl.sum((neg & (S > best[:, None])).to(tl.int32), axis=1)
        tied += tl.sum((neg & at).to(tl.int32), axis=1)
        group += tl.sum((rel & at).to(tl.int32), axis=1)
        cand += tl.sum(valid.to(tl.int32), axis=1)
    tl.store(BEST + rows, best, mask=rmask)
    tl.store(HAS + rows, has, mask=rmask)
    tl.store(ABOVE + rows, above, mask=rmask)
    tl.store(TIED + rows, tied, mask=rmask)
    tl.store(GROUP + rows, group, mask=rmask)
    tl.store(CAND + rows, cand, mask=rmask)
