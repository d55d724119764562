"""The Triton JIT functions of the fused kernel (:mod:`._triton` documents what they
compute). Importing this module imports triton: :mod:`._triton` does so on first use."""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["extract_kernel", "count_kernel"]


@triton.jit
def tile_dot(Q, G, row0, col0, m, n_g, d, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
             SCREEN: tl.constexpr, EMULATE: tl.constexpr):
    rows = row0 + tl.arange(0, BM)
    cols = col0 + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, d, BK):
        ks = k0 + tl.arange(0, BK)
        a = tl.load(Q + rows[:, None].to(tl.int64) * d + ks[None, :],
                    mask=(rows[:, None] < m) & (ks[None, :] < d), other=0.0)
        b = tl.load(G + cols[None, :].to(tl.int64) * d + ks[:, None],
                    mask=(cols[None, :] < n_g) & (ks[:, None] < d), other=0.0)
        if SCREEN:
            if EMULATE:  # the interpreter multiplies bf16 storage as integers: round, then fp32
                acc = tl.dot(a.to(tl.bfloat16).to(tl.float32), b.to(tl.bfloat16).to(tl.float32), acc,
                             input_precision="ieee")
            else:
                acc = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), acc)
        else:
            acc = tl.dot(a, b, acc, input_precision="ieee")
    return acc

@triton.jit
def epilogue(S, qa, ga, EPI: tl.constexpr):
    """Backend.finish_scores: the same IEEE operations in the same order."""
    if EPI == 1:
        S = S * qa[:, None]
        S = S * ga[None, :]
    elif EPI == 2:
        S = S * 2.0
        S = S - ga[None, :]
        S = S - qa[:, None]
        S = tl.minimum(S, 0.0)
    return S

@triton.jit
def search(REL, base, r, s, valid, n_steps, RIGHT: tl.constexpr):
    """Relevant scores of the row ``<= s`` (RIGHT) or ``< s``: binary search in
    REL[base : base + r] (sorted ascending)."""
    lo = tl.zeros(s.shape, tl.int32)
    hi = tl.zeros(s.shape, tl.int32) + r
    for _ in range(n_steps):
        active = (lo < hi) & valid
        mid = (lo + hi) // 2
        v = tl.load(REL + base + mid, mask=active, other=0.0)
        if RIGHT:
            go = v <= s
        else:
            go = v < s
        lo = tl.where(active & go, mid + 1, lo)
        hi = tl.where(active & (go == 0), mid, hi)
    return lo

@triton.jit
def row_parts(QC, GC, SELF, PTR, QA, GA, row0, col0, m, n_g, BM: tl.constexpr, BN: tl.constexpr,
              K: tl.constexpr, EPI: tl.constexpr):
    rows = row0 + tl.arange(0, BM)
    cols = col0 + tl.arange(0, BN)
    rmask = rows < m
    cmask = cols < n_g
    qc = tl.load(QC + rows, mask=rmask, other=-1)
    gc = tl.load(GC + cols, mask=cmask, other=-2)
    same = qc[:, None] == gc[None, :]
    is_self = tl.zeros((BM, BN), tl.int32) != 0
    for k in tl.static_range(K):
        sk = tl.load(SELF + rows * K + k, mask=rmask, other=-1)
        is_self = is_self | (cols[None, :] == sk[:, None])
    if EPI != 0:
        qa = tl.load(QA + rows, mask=rmask, other=1.0)
        ga = tl.load(GA + cols, mask=cmask, other=1.0)
    else:
        qa = tl.zeros((BM,), tl.float32)
        ga = tl.zeros((BN,), tl.float32)
    base = tl.load(PTR + rows, mask=rmask, other=0)
    r = (tl.load(PTR + rows + 1, mask=rmask, other=0) - base).to(tl.int32)
    inside = rmask[:, None] & cmask[None, :]
    return rows, cols, inside, same, is_self, qa, ga, base, r

@triton.jit
def extract_kernel(Q, G, QC, GC, SELF, SELFREL, GRANK, PTR, QA, GA, TM, TN, OUT, m, n_g, d,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, K: tl.constexpr, EPI: tl.constexpr):
    t = tl.program_id(0)
    row0 = tl.load(TM + t) * BM
    col0 = tl.load(TN + t) * BN
    rows, cols, inside, same, is_self, qa, ga, base, r = row_parts(QC, GC, SELF, PTR, QA, GA, row0, col0, m,
                                                                   n_g, BM, BN, K, EPI)
    S = epilogue(tile_dot(Q, G, row0, col0, m, n_g, d, BM, BN, BK, False, False), qa, ga, EPI)
    rel = inside & same & (is_self == 0)
    before = tl.zeros((BM, BN), tl.int32)
    for k in tl.static_range(K):
        sk = tl.load(SELFREL + rows * K + k, mask=rows < m, other=2147483647)
        before += (sk[:, None] < cols[None, :]).to(tl.int32)
    gr = tl.load(GRANK + cols, mask=cols < n_g, other=0)
    pos = base[:, None] + (gr[None, :] - before).to(tl.int64)
    tl.store(OUT + pos, S, mask=rel)

@triton.jit
def count_kernel(Q, G, QC, GC, SELF, PTR, REL, QA, GA, QN, GN, HIST, TIES, m, n_g, d, width, n_steps,
                 gamma, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, K: tl.constexpr,
                 EPI: tl.constexpr, SCREEN: tl.constexpr, EMULATE: tl.constexpr):
    col0 = tl.program_id(0) * BN  # gallery tiles on axis 0 (up to 2^31 - 1 programs; axis 1 stops at 65535)
    row0 = tl.program_id(1) * BM
    rows, cols, inside, same, is_self, qa, ga, base, r = row_parts(QC, GC, SELF, PTR, QA, GA, row0, col0, m,
                                                                   n_g, BM, BN, K, EPI)
    valid = inside & (same == 0) & (is_self == 0) & (r[:, None] > 0)
    base2 = base[:, None] + tl.zeros((BM, BN), tl.int64)
    r2 = r[:, None] + tl.zeros((BM, BN), tl.int32)
    if SCREEN:
        P = tile_dot(Q, G, row0, col0, m, n_g, d, BM, BN, BK, True, EMULATE)
        qn = tl.load(QN + rows, mask=rows < m, other=0.0)
        gn = tl.load(GN + cols, mask=cols < n_g, other=0.0)
        e = (gamma * qn[:, None]) * gn[None, :] + tl.abs(P) * 4.76837158203125e-07  # + 4 ulp: 2^-21 |P|
        e = tl.where(e == e, e, float("inf"))  # inf * 0 (overflowed norm times a zero row): recompute
        lo = epilogue(P - e, qa, ga, EPI)
        hi = epilogue(P + e, qa, ga, EPI)
        left = search(REL, base2, r2, lo, valid, n_steps, False)
        right = search(REL, base2, r2, hi, valid, n_steps, True)
        amb = tl.max(tl.where(valid & (left < right), 1, 0))
        if amb > 0:  # some pair lies near a relevant score: the exact fp32 tile decides
            S = epilogue(tile_dot(Q, G, row0, col0, m, n_g, d, BM, BN, BK, False, False), qa, ga, EPI)
            right = search(REL, base2, r2, S, valid, n_steps, True)
            left = search(REL, base2, r2, S, valid, n_steps, False)
        else:
            right = left
    else:
        S = epilogue(tile_dot(Q, G, row0, col0, m, n_g, d, BM, BN, BK, False, False), qa, ga, EPI)
        right = search(REL, base2, r2, S, valid, n_steps, True)
        left = search(REL, base2, r2, S, valid, n_steps, False)
    at = rows[:, None].to(tl.int64) * width
    ones = tl.zeros((BM, BN), tl.int32) + 1
    tl.atomic_add(HIST + at + right, ones, mask=valid & (right > 0))
    eq = valid & (left < right)
    tl.atomic_add(TIES + at + left, ones, mask=eq)
    tl.atomic_add(TIES + at + right, -ones, mask=eq)
