"""The Triton JIT functions of grouped recall's fused kernel (:mod:`._triton_grouped`
documents what they compute). Importing this module imports triton:
:mod:`._triton_grouped` does so on first use."""

from __future__ import annotations

import triton
import triton.language as tl

from ._triton_kernels import epilogue, tile_dot

__all__ = ["grouped_kernel"]


@triton.jit
def _pairs(GC, GID, GA, rmask, qc, qid, col0, g_end, BN: tl.constexpr, EPI: tl.constexpr):
    """A gallery tile's columns, its valid pairs (inside both extents, different ids),
    relevant pairs (valid, same label code) and column factors."""
    cols = col0 + tl.arange(0, BN)
    cmask = cols < g_end
    gc = tl.load(GC + cols, mask=cmask, other=-2)
    gid = tl.load(GID + cols, mask=cmask, other=-4)
    if EPI != 0:
        ga = tl.load(GA + cols, mask=cmask, other=1.0)
    else:
        ga = tl.zeros((BN,), tl.float32)
    valid = rmask[:, None] & cmask[None, :] & (qid[:, None] != gid[None, :])
    rel = valid & (qc[:, None] == gc[None, :])
    return cols, valid, rel, ga


@triton.jit
def _scores(
    Q,
    G,
    qa,
    ga,
    row0,
    row_end,
    col0,
    g_end,
    d,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    EPI: tl.constexpr,
):
    """The exact scores of a tile: the fp32 product and the score epilogue."""
    return epilogue(
        tile_dot(Q, G, row0, col0, row_end, g_end, d, BM, BN, BK, False, False), qa, ga, EPI
    )


@triton.jit
def grouped_kernel(  # long: a kernel: one program's loads, products, epilogue and counts
    Q,
    G,
    QC,
    GC,
    QID,
    GID,
    QA,
    GA,
    QN,
    GN,
    WR0,
    WRE,
    WG0,
    WGE,
    WS0,
    WS1,
    BEST,
    HAS,
    ABOVE,
    TIED,
    GROUP,
    CAND,
    STATS,
    d,
    gamma,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    EPI: tl.constexpr,
    SCREEN: tl.constexpr,
    EMULATE: tl.constexpr,
):
    """One work item: ``BM`` query rows ``[WR0[w], min(WR0[w] + BM, WRE[w]))`` of a unit
    against the unit's gallery rows ``[WG0[w], WGE[w])``, in two sweeps over gallery
    tiles: the best relevant score of each row over the tiles ``[WS0[w], WS1[w])`` that
    can hold its relevant items (items are sorted by label inside a unit; ``WS0`` on
    the unit's tile grid, so a tile is the same tile in both sweeps), then the counts
    the negatives at it over every tile, screened (``SCREEN`` 1 bf16 / 2 TF32 inputs)
    where no negative of a tile lies within the error bound of its row's best score,
    else exact (the relevant items tied with the best are counted in sweep 1, which
    visits all of them). Each
    program owns its rows: plain stores, no atomics. ``STATS[2 w]``, ``STATS[2 w + 1]``:
    tiles the screen decided, tiles recomputed exactly."""
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
    group = tl.zeros((BM,), tl.int32)
    for col0 in range(
        s0, s1, BN
    ):  # sweep 1, exact: the best relevant score and the relevant items at it
        cols, valid, rel, ga = _pairs(GC, GID, GA, rmask, qc, qid, col0, g_end, BN, EPI)
        S = _scores(Q, G, qa, ga, row0, row_end, col0, g_end, d, BM, BN, BK, EPI)
        top = tl.max(tl.where(rel, S, float("-inf")), axis=1)
        at_top = tl.sum((rel & (S == top[:, None])).to(tl.int32), axis=1)
        group = tl.where(top > best, at_top, tl.where(top == best, group + at_top, group))
        best = tl.maximum(best, top)
        has = tl.maximum(has, tl.max(rel.to(tl.int32), axis=1))
    above = tl.zeros((BM,), tl.int32)
    tied = tl.zeros((BM,), tl.int32)
    cand = tl.zeros((BM,), tl.int32)
    screened = w * 0  # int32 scalars (loop-carried)
    exact = w * 0
    if SCREEN:
        qn = tl.load(QN + rows, mask=rmask, other=0.0)
    for col0 in range(g0, g_end, BN):  # sweep 2: every tile, counted at the best score
        cols, valid, rel, ga = _pairs(GC, GID, GA, rmask, qc, qid, col0, g_end, BN, EPI)
        neg = valid & (rel == 0)
        cand += tl.sum(valid.to(tl.int32), axis=1)
        amb = 1
        if SCREEN:
            P = tile_dot(Q, G, row0, col0, row_end, g_end, d, BM, BN, BK, SCREEN, EMULATE)
            gn = tl.load(GN + cols, mask=cols < g_end, other=0.0)
            e = (gamma * qn[:, None]) * gn[None, :] + tl.abs(
                P
            ) * 4.76837158203125e-07  # + 4 ulp: 2^-21 |P|
            e = tl.where(
                e == e, e, float("inf")
            )  # inf * 0 (overflowed norm times a zero row): recompute
            lo = epilogue(P - e, qa, ga, EPI)
            hi = epilogue(P + e, qa, ga, EPI)
            amb = tl.max(tl.where(neg & (lo <= best[:, None]) & (hi >= best[:, None]), 1, 0))
            if amb == 0:  # every pair is clearly above or below its row's best score
                above += tl.sum((neg & (lo > best[:, None])).to(tl.int32), axis=1)
                screened += 1
        if amb > 0:
            S = _scores(Q, G, qa, ga, row0, row_end, col0, g_end, d, BM, BN, BK, EPI)
            above += tl.sum((neg & (S > best[:, None])).to(tl.int32), axis=1)
            tied += tl.sum((neg & (S == best[:, None])).to(tl.int32), axis=1)
            exact += 1
    tl.store(BEST + rows, best, mask=rmask)
    tl.store(HAS + rows, has, mask=rmask)
    tl.store(ABOVE + rows, above, mask=rmask)
    tl.store(TIED + rows, tied, mask=rmask)
    tl.store(GROUP + rows, group, mask=rmask)
    tl.store(CAND + rows, cand, mask=rmask)
    tl.store(STATS + 2 * w, screened)
    tl.store(STATS + 2 * w + 1, exact)
