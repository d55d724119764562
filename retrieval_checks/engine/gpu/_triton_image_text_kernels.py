"""The Triton JIT functions of the one-pass image-text kernel (:mod:`._triton_image_text`
documents what they compute). Importing this module imports triton:
:mod:`._triton_image_text` does so on first use.

Both launches score a tile of the images x captions matrix with the fused kernel's own
:func:`~._triton_kernels.tile_dot` (exact fp32, ``input_precision="ieee"``) and
:func:`~._triton_kernels.epilogue` (the IEEE operations of ``Backend.finish_scores``,
image factor first), at the same tile shape, so a pair's score is the same number in
both launches and in both directions.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._triton_kernels import epilogue, search, tile_dot

__all__ = ["pair_kernel", "count_kernel"]


@triton.jit
def tile_parts(
    CAPIMG, QA, GA, row0, col0, n_i, n_c, BM: tl.constexpr, BN: tl.constexpr, EPI: tl.constexpr
):
    """Row (image) and column (caption) indices of a tile, the in-range mask, the
    pairs of each caption with its own image, and the epilogue's row factors."""
    rows = row0 + tl.arange(0, BM)
    cols = col0 + tl.arange(0, BN)
    rmask = rows < n_i
    cmask = cols < n_c
    ci = tl.load(CAPIMG + cols, mask=cmask, other=-1)
    own = ci[None, :] == rows[:, None]
    if EPI != 0:
        qa = tl.load(QA + rows, mask=rmask, other=1.0)
        ga = tl.load(GA + cols, mask=cmask, other=1.0)
    else:
        qa = tl.zeros((BM,), tl.float32)
        ga = tl.zeros((BN,), tl.float32)
    inside = rmask[:, None] & cmask[None, :]
    return rows, cols, rmask, cmask, inside, own, qa, ga


@triton.jit
def order_key(S):
    """An int32 key of a float32 with the float's order (NaN aside; -0.0 just below
    +0.0), so that integer atomic_max takes a float maximum."""
    bits = S.to(tl.int32, bitcast=True)
    return tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)


@triton.jit
def pair_kernel(
    Q,
    G,
    CAPIMG,
    QA,
    GA,
    TM,
    TN,
    PAIR,
    n_i,
    n_c,
    d,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    EPI: tl.constexpr,
):
    """Launch 1, over the tiles that hold a caption's own image: PAIR[c] = S[img(c), c]."""
    t = tl.program_id(0)
    row0 = tl.load(TM + t) * BM
    col0 = tl.load(TN + t) * BN
    rows, cols, rmask, cmask, inside, own, qa, ga = tile_parts(
        CAPIMG, QA, GA, row0, col0, n_i, n_c, BM, BN, EPI
    )
    S = epilogue(tile_dot(Q, G, row0, col0, n_i, n_c, d, BM, BN, BK, False, False), qa, ga, EPI)
    at = cols[None, :] + tl.zeros((BM, BN), tl.int32)
    tl.store(PAIR + at, S, mask=inside & own)


@triton.jit
def screened_scores(
    Q,
    G,
    OWN,
    OPTR,
    QN,
    GN,
    PAIR,
    rows,
    cols,
    rmask,
    neg,
    qa,
    ga,
    row0,
    col0,
    n_i,
    n_c,
    d,
    n_steps,
    gamma,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    EPI: tl.constexpr,
    SCREEN: tl.constexpr,
    EMULATE: tl.constexpr,
):
    """The tile's scores for counting, screened: the bf16- (SCREEN 1) or TF32-input (2)
    product ``P``, the
    interval ``[epi(P - e), epi(P + e)]`` that holds the exact score (``e`` the bound
    ``gamma |q| |g|`` plus 4 ulp), and the exact fp32 tile only if, for some
    non-own pair, an own score of its image row (binary search in the row's sorted own
    scores) or its caption column's pair score lies in that interval. Else every
    comparison the count makes has the same outcome on ``epi(P)`` as on the exact
    score. Returns (scores, 1 if recomputed)."""
    P = tile_dot(
        Q, G, row0, col0, n_i, n_c, d, BM, BN, BK, SCREEN, EMULATE
    )  # bf16 (1) or TF32 (2) inputs
    qn = tl.load(QN + rows, mask=rmask, other=0.0)
    gn = tl.load(GN + cols, mask=cols < n_c, other=0.0)
    e = (gamma * qn[:, None]) * gn[None, :] + tl.abs(P) * 4.76837158203125e-07  # + 4 ulp: 2^-21 |P|
    e = tl.where(
        e == e, e, float("inf")
    )  # inf * 0 (an overflowed norm times a zero row): recompute
    lo = epilogue(P - e, qa, ga, EPI)
    hi = epilogue(P + e, qa, ga, EPI)
    base = tl.load(OPTR + rows, mask=rmask, other=0)
    r = (tl.load(OPTR + rows + 1, mask=rmask, other=0) - base).to(tl.int32)
    base2 = base[:, None] + tl.zeros((BM, BN), tl.int64)
    r2 = r[:, None] + tl.zeros((BM, BN), tl.int32)
    left = search(OWN, base2, r2, lo, neg, n_steps, False)
    right = search(OWN, base2, r2, hi, neg, n_steps, True)
    pair = tl.load(PAIR + cols, mask=cols < n_c, other=0.0)
    amb = neg & ((left < right) | ((lo <= pair[None, :]) & (pair[None, :] <= hi)))
    if tl.max(tl.where(amb, 1, 0)) > 0:
        S = epilogue(tile_dot(Q, G, row0, col0, n_i, n_c, d, BM, BN, BK, False, False), qa, ga, EPI)
        again = 1
    else:
        S = epilogue(P, qa, ga, EPI)
        again = 0
    return S, again


@triton.jit
def count_kernel(
    Q,
    G,
    CAPIMG,
    QA,
    GA,
    PAIR,
    BEST,
    ABOVE_I,
    TIED_I,
    LOW_I,
    ABOVE_T,
    TIED_T,
    OWN,
    OPTR,
    QN,
    GN,
    RECOMP,
    n_i,
    n_c,
    d,
    tiles_m,
    n_steps,
    gamma,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    EPI: tl.constexpr,
    SCREEN: tl.constexpr,
    EMULATE: tl.constexpr,
):
    """Launch 2, every tile once (a 1-D grid: no 65535 limit on an axis). Per image row,
    over the captions of other images: scores ``>=`` and ``==`` the image's best own
    score, and the largest score below it (as an order key); per caption column, over
    the other images: scores ``>=`` and ``==`` its own pair score. Tile sums, then
    atomic adds. SCREEN: :func:`screened_scores` (RECOMP[tile] says whether the exact
    tile was computed)."""
    pid = tl.program_id(0)
    row0 = (pid % tiles_m) * BM  # consecutive programs share a caption tile
    col0 = (pid // tiles_m) * BN
    rows, cols, rmask, cmask, inside, own, qa, ga = tile_parts(
        CAPIMG, QA, GA, row0, col0, n_i, n_c, BM, BN, EPI
    )
    neg = inside & (own == 0)
    if SCREEN:
        S, again = screened_scores(
            Q,
            G,
            OWN,
            OPTR,
            QN,
            GN,
            PAIR,
            rows,
            cols,
            rmask,
            neg,
            qa,
            ga,
            row0,
            col0,
            n_i,
            n_c,
            d,
            n_steps,
            gamma,
            BM,
            BN,
            BK,
            EPI,
            SCREEN,
            EMULATE,
        )
        tl.store(RECOMP + pid, again)
    else:
        S = epilogue(tile_dot(Q, G, row0, col0, n_i, n_c, d, BM, BN, BK, False, False), qa, ga, EPI)
    best = tl.load(BEST + rows, mask=rmask, other=0.0)
    ge = neg & (S >= best[:, None])
    eq = neg & (S == best[:, None])
    tl.atomic_add(ABOVE_I + rows, tl.sum(ge.to(tl.int32), axis=1), mask=rmask)
    tl.atomic_add(TIED_I + rows, tl.sum(eq.to(tl.int32), axis=1), mask=rmask)
    below = tl.where(neg & (S < best[:, None]), S, float("-inf"))
    tl.atomic_max(LOW_I + rows, order_key(tl.max(below, axis=1)), mask=rmask)
    pair = tl.load(PAIR + cols, mask=cmask, other=0.0)
    ge_t = neg & (S >= pair[None, :])
    eq_t = neg & (S == pair[None, :])
    tl.atomic_add(ABOVE_T + cols, tl.sum(ge_t.to(tl.int32), axis=0), mask=cmask)
    tl.atomic_add(TIED_T + cols, tl.sum(eq_t.to(tl.int32), axis=0), mask=cmask)
