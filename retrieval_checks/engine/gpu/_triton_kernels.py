"""The Triton JIT functions of the fused kernel (:mod:`._triton` documents what they
compute). Importing this module imports triton: :mod:`._triton` does so on first use."""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["extract_kernel", "count_kernel", "bin_kernel"]


@triton.jit
def tile_dot(
    Q,
    G,
    row0,
    col0,
    m,
    n_g,
    d,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    SCREEN: tl.constexpr,
    EMULATE: tl.constexpr,
):
    """The ``BM x BN`` product tile: full fp32 (SCREEN 0 / False), bf16 inputs (1 / True)
    or TF32 inputs (2), fp32 accumulation."""
    rows = row0 + tl.arange(0, BM)
    cols = col0 + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, d, BK):
        ks = k0 + tl.arange(0, BK)
        a = tl.load(
            Q + rows[:, None].to(tl.int64) * d + ks[None, :],
            mask=(rows[:, None] < m) & (ks[None, :] < d),
            other=0.0,
        )
        b = tl.load(
            G + cols[None, :].to(tl.int64) * d + ks[:, None],
            mask=(cols[None, :] < n_g) & (ks[:, None] < d),
            other=0.0,
        )
        if SCREEN == 2:
            if (
                EMULATE
            ):  # TF32 inputs: the low 13 mantissa bits dropped (truncation: the bound's worst case)
                a = (a.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)
                b = (b.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)
                acc = tl.dot(a, b, acc, input_precision="ieee")
            else:
                acc = tl.dot(a, b, acc, input_precision="tf32")
        elif SCREEN:
            if EMULATE:  # the interpreter multiplies bf16 storage as integers: round, then fp32
                acc = tl.dot(
                    a.to(tl.bfloat16).to(tl.float32),
                    b.to(tl.bfloat16).to(tl.float32),
                    acc,
                    input_precision="ieee",
                )
            else:
                acc = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), acc)
        else:
            acc = tl.dot(a, b, acc, input_precision="ieee")
    return acc


@triton.jit
def popcount64(x):
    """Set bits of each uint64 (SWAR: pairs, nibbles, bytes, then a multiply-add)."""
    x = x - ((x >> 1) & 0x5555555555555555)
    x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0F
    return ((x * 0x0101010101010101) >> 56).to(tl.int32)


@triton.jit
def tile_hamming(Q, G, row0, col0, m, n_g, w, BM: tl.constexpr, BN: tl.constexpr, BW: tl.constexpr):
    """``-HammingDistance`` of packed codes (int64 words holding the uint64 bits, ``w``
    per row) as a float32 tile: exact integers, no rounding anywhere."""
    rows = row0 + tl.arange(0, BM)
    cols = col0 + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.int32)
    for k0 in range(0, w, BW):
        ks = k0 + tl.arange(0, BW)
        a = tl.load(
            Q + rows[:, None].to(tl.int64) * w + ks[None, :],
            mask=(rows[:, None] < m) & (ks[None, :] < w),
            other=0,
        ).to(tl.uint64, bitcast=True)
        b = tl.load(
            G + cols[:, None].to(tl.int64) * w + ks[None, :],
            mask=(cols[:, None] < n_g) & (ks[None, :] < w),
            other=0,
        ).to(tl.uint64, bitcast=True)
        acc += tl.sum(popcount64(a[:, None, :] ^ b[None, :, :]), axis=2)
    return -(acc.to(tl.float32))


@triton.jit
def exact_tile(
    Q,
    G,
    row0,
    col0,
    m,
    n_g,
    d,
    qa,
    ga,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    EPI: tl.constexpr,
):
    """The tile's exact scores: the fp32 product and the epilogue, or (EPI 3) -Hamming."""
    if EPI == 3:
        S = tile_hamming(Q, G, row0, col0, m, n_g, d, BM, BN, 2)
    else:
        S = epilogue(tile_dot(Q, G, row0, col0, m, n_g, d, BM, BN, BK, False, False), qa, ga, EPI)
    return S


@triton.jit
def epilogue(S, qa, ga, EPI: tl.constexpr):
    """Backend.finish_scores: the same IEEE operations in the same order (cosine:
    ``_backend.cosine_epilogue``, in fp64: exact products, one correctly rounded division
    and square root, the product's sign; factors are squared norms, 0 counts as 1)."""
    if EPI == 1:
        x = S.to(tl.float64)
        qd = qa.to(tl.float64)
        gd = ga.to(tl.float64)
        qd = tl.where(qd == 0.0, 1.0, qd)
        gd = tl.where(gd == 0.0, 1.0, gd)
        r = tl.sqrt((x * x) / (qd[:, None] * gd[None, :]))
        S = tl.where(x == 0.0, S, tl.where(x < 0.0, -r, r).to(tl.float32))
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
def find(COLS, base, r, c, valid, n_steps):
    """Entries of the int64 COLS[base : base + r] (sorted ascending) that are ``< c``."""
    lo = tl.zeros(c.shape, tl.int32)
    hi = tl.zeros(c.shape, tl.int32) + r
    for _ in range(n_steps):
        active = (lo < hi) & valid
        mid = (lo + hi) // 2
        v = tl.load(COLS + base + mid, mask=active, other=0)
        go = v < c
        lo = tl.where(active & go, mid + 1, lo)
        hi = tl.where(active & (go == 0), mid, hi)
    return lo


@triton.jit
def row_parts(
    QC,
    GC,
    COLS,
    SELF,
    PTR,
    QA,
    GA,
    row0,
    col0,
    m,
    n_g,
    c_steps,
    BM: tl.constexpr,
    BN: tl.constexpr,
    K: tl.constexpr,
    EPI: tl.constexpr,
    CSR: tl.constexpr,
):
    """A tile's masks: in range, relevant (same label code, or, with CSR, the column
    among the row's sorted relevant columns COLS[PTR[row] : PTR[row + 1]], found at
    ``cpos``), self pair; the row factors and the rows' relevance CSR spans."""
    rows = row0 + tl.arange(0, BM)
    cols = col0 + tl.arange(0, BN)
    rmask = rows < m
    cmask = cols < n_g
    inside = rmask[:, None] & cmask[None, :]
    base = tl.load(PTR + rows, mask=rmask, other=0)
    r = (tl.load(PTR + rows + 1, mask=rmask, other=0) - base).to(tl.int32)
    if CSR:
        base2 = base[:, None] + tl.zeros((BM, BN), tl.int64)
        r2 = r[:, None] + tl.zeros((BM, BN), tl.int32)
        c2 = cols[None, :].to(tl.int64) + tl.zeros((BM, BN), tl.int64)
        cpos = find(COLS, base2, r2, c2, inside, c_steps)
        found = inside & (cpos < r2)
        at = tl.load(COLS + base2 + cpos, mask=found, other=-1)
        same = found & (at == c2)
    else:
        qc = tl.load(QC + rows, mask=rmask, other=-1)
        gc = tl.load(GC + cols, mask=cmask, other=-2)
        same = qc[:, None] == gc[None, :]
        cpos = tl.zeros((BM, BN), tl.int32)
    is_self = tl.zeros((BM, BN), tl.int32) != 0
    for k in tl.static_range(K):
        sk = tl.load(SELF + rows * K + k, mask=rmask, other=-1)
        is_self = is_self | (cols[None, :] == sk[:, None])
    if (EPI == 1) or (EPI == 2):  # cosine, neg_l2: row factors
        qa = tl.load(QA + rows, mask=rmask, other=1.0)
        ga = tl.load(GA + cols, mask=cmask, other=1.0)
    else:
        qa = tl.zeros((BM,), tl.float32)
        ga = tl.zeros((BN,), tl.float32)
    return rows, cols, inside, same, cpos, is_self, qa, ga, base, r


@triton.jit
def extract_kernel(
    Q,
    G,
    QC,
    GC,
    COLS,
    SELF,
    SELFREL,
    GRANK,
    PTR,
    QA,
    GA,
    TM,
    TN,
    OUT,
    m,
    n_g,
    d,
    c_steps,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    K: tl.constexpr,
    EPI: tl.constexpr,
    CSR: tl.constexpr,
):
    t = tl.program_id(0)
    row0 = tl.load(TM + t) * BM
    col0 = tl.load(TN + t) * BN
    rows, cols, inside, same, cpos, is_self, qa, ga, base, r = row_parts(
        QC, GC, COLS, SELF, PTR, QA, GA, row0, col0, m, n_g, c_steps, BM, BN, K, EPI, CSR
    )
    S = exact_tile(Q, G, row0, col0, m, n_g, d, qa, ga, BM, BN, BK, EPI)
    rel = inside & same & (is_self == 0)
    if CSR:  # the place in the row's sorted relevant columns
        pos = base[:, None] + cpos.to(tl.int64)
    else:  # the item's rank among its label's gallery items, minus the row's self items before it
        before = tl.zeros((BM, BN), tl.int32)
        for k in tl.static_range(K):
            sk = tl.load(SELFREL + rows * K + k, mask=rows < m, other=2147483647)
            before += (sk[:, None] < cols[None, :]).to(tl.int32)
        gr = tl.load(GRANK + cols, mask=cols < n_g, other=0)
        pos = base[:, None] + (gr[None, :] - before).to(tl.int64)
    tl.store(OUT + pos, S, mask=rel)


@triton.jit
def pair_ambiguous(neg, lo, hi, tau, FIX, n_fix):
    """Whether a screened tile must be recomputed for the pair outputs: a negative that
    may reach the tail threshold (its exact value is kept) or may lie on either side of
    a fixed threshold."""
    a = tl.max(tl.where(neg & (hi >= tau), 1, 0))
    for t in range(n_fix):
        thr = tl.load(FIX + t)
        a += tl.max(tl.where(neg & (lo < thr) & (hi >= thr), 1, 0))
    return a


@triton.jit
def pair_outputs(S, neg, tau, FIX, FIXCNT, n_fix, TAIL, TAILN, cap):
    """Negatives ``>=`` each fixed threshold (counts: one reduction and one atomic per
    tile and threshold) and every negative ``>= tau`` (values, appended at an offset
    reserved by one atomic per tile; beyond ``cap`` only counted)."""
    for t in range(n_fix):
        thr = tl.load(FIX + t)
        tl.atomic_add(FIXCNT + t, tl.sum(tl.where(neg & (S >= thr), 1, 0)).to(tl.int64))
    take = neg & (S >= tau)
    per_row = tl.sum(take.to(tl.int32), axis=1)
    n = tl.sum(per_row)
    if n > 0:
        start = tl.atomic_add(TAILN, n.to(tl.int64))
        within = tl.cumsum(take.to(tl.int32), axis=1) - 1
        row_off = tl.cumsum(per_row, axis=0) - per_row
        idx = start + (row_off[:, None] + within).to(tl.int64)
        tl.store(TAIL + idx, S, mask=take & (idx < cap))


@triton.jit
def screened_tile(
    Q,
    G,
    QN,
    GN,
    rows,
    cols,
    row0,
    col0,
    m,
    n_g,
    d,
    qa,
    ga,
    gamma,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    EPI: tl.constexpr,
    SCREEN: tl.constexpr,
    EMULATE: tl.constexpr,
):
    """The screened tile's score interval ``[lo, hi]``: it holds the exact fp32 score."""
    P = tile_dot(Q, G, row0, col0, m, n_g, d, BM, BN, BK, SCREEN, EMULATE)
    qn = tl.load(QN + rows, mask=rows < m, other=0.0)
    gn = tl.load(GN + cols, mask=cols < n_g, other=0.0)
    e = (gamma * qn[:, None]) * gn[None, :] + tl.abs(P) * 4.76837158203125e-07  # + 4 ulp: 2^-21 |P|
    e = tl.where(e == e, e, float("inf"))  # inf * 0 (overflowed norm times a zero row): recompute
    return epilogue(P - e, qa, ga, EPI), epilogue(P + e, qa, ga, EPI)


@triton.jit
def count_kernel(
    Q,
    G,
    QC,
    GC,
    COLS,
    SELF,
    PTR,
    REL,
    QA,
    GA,
    QN,
    GN,
    HIST,
    TIES,
    FIX,
    FIXCNT,
    TAIL,
    TAILN,
    STATS,
    m,
    n_g,
    d,
    width,
    n_steps,
    c_steps,
    gamma,
    tau,
    n_fix,
    cap,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    K: tl.constexpr,
    EPI: tl.constexpr,
    SCREEN: tl.constexpr,
    EMULATE: tl.constexpr,
    CSR: tl.constexpr,
    PAIRS: tl.constexpr,
    LINEAR: tl.constexpr,
):
    """LINEAR (rows with few relevant items): each relevant score ``REL[base + j]`` of a
    row is compared with the whole tile row; ``HIST[row, j]`` / ``TIES[row, j]`` get the
    counts ``>=`` / ``==`` (one atomic per row and item, none where zero). Else: binary
    searches and difference arrays (module :mod:`._triton`)."""
    col0 = (
        tl.program_id(0) * BN
    )  # gallery tiles on axis 0 (up to 2^31 - 1 programs; axis 1 stops at 65535)
    row0 = tl.program_id(1) * BM
    rows, cols, inside, same, cpos, is_self, qa, ga, base, r = row_parts(
        QC, GC, COLS, SELF, PTR, QA, GA, row0, col0, m, n_g, c_steps, BM, BN, K, EPI, CSR
    )
    neg = inside & (same == 0) & (is_self == 0)
    valid = neg & (r[:, None] > 0)
    rmask = rows < m
    if LINEAR:
        if SCREEN:
            lo, hi = screened_tile(
                Q,
                G,
                QN,
                GN,
                rows,
                cols,
                row0,
                col0,
                m,
                n_g,
                d,
                qa,
                ga,
                gamma,
                BM,
                BN,
                BK,
                EPI,
                SCREEN,
                EMULATE,
            )
            amb = 0
            for j in range(width):
                rj = tl.load(REL + base + j, mask=rmask & (j < r), other=float("inf"))
                amb += tl.max(tl.where(valid & (lo <= rj[:, None]) & (hi >= rj[:, None]), 1, 0))
            if PAIRS:
                amb += pair_ambiguous(neg, lo, hi, tau, FIX, n_fix)
            tl.atomic_add(
                STATS + (amb > 0).to(tl.int32), 1
            )  # [tiles the screen decided, tiles recomputed]
            if (
                amb > 0
            ):  # some pair lies near a relevant score or a pair threshold: the exact fp32 tile decides
                S = exact_tile(Q, G, row0, col0, m, n_g, d, qa, ga, BM, BN, BK, EPI)
            else:  # no relevant score or threshold in any interval: lo compares as the exact score does
                S = lo
        else:
            S = exact_tile(Q, G, row0, col0, m, n_g, d, qa, ga, BM, BN, BK, EPI)
        at = rows.to(tl.int64) * width
        for j in range(width):
            ok = rmask & (j < r)
            rj = tl.load(REL + base + j, mask=ok, other=float("inf"))
            ge = tl.sum(tl.where(valid & (S >= rj[:, None]), 1, 0), axis=1)
            eq = tl.sum(tl.where(valid & (S == rj[:, None]), 1, 0), axis=1)
            tl.atomic_add(HIST + at + j, ge, mask=ok & (ge > 0))
            tl.atomic_add(TIES + at + j, eq, mask=ok & (eq > 0))
    else:
        base2 = base[:, None] + tl.zeros((BM, BN), tl.int64)
        r2 = r[:, None] + tl.zeros((BM, BN), tl.int32)
        if SCREEN:
            lo, hi = screened_tile(
                Q,
                G,
                QN,
                GN,
                rows,
                cols,
                row0,
                col0,
                m,
                n_g,
                d,
                qa,
                ga,
                gamma,
                BM,
                BN,
                BK,
                EPI,
                SCREEN,
                EMULATE,
            )
            left = search(REL, base2, r2, lo, valid, n_steps, False)
            right = search(REL, base2, r2, hi, valid, n_steps, True)
            amb = tl.max(tl.where(valid & (left < right), 1, 0))
            if PAIRS:
                amb += pair_ambiguous(neg, lo, hi, tau, FIX, n_fix)
            tl.atomic_add(
                STATS + (amb > 0).to(tl.int32), 1
            )  # [tiles the screen decided, tiles recomputed]
            if (
                amb > 0
            ):  # some pair lies near a relevant score or a pair threshold: the exact fp32 tile decides
                S = exact_tile(Q, G, row0, col0, m, n_g, d, qa, ga, BM, BN, BK, EPI)
                right = search(REL, base2, r2, S, valid, n_steps, True)
                left = search(REL, base2, r2, S, valid, n_steps, False)
            else:  # every comparison is decided by the interval: lo stands for the score
                S = lo
                right = left
        else:
            S = exact_tile(Q, G, row0, col0, m, n_g, d, qa, ga, BM, BN, BK, EPI)
            right = search(REL, base2, r2, S, valid, n_steps, True)
            left = search(REL, base2, r2, S, valid, n_steps, False)
        at = rows[:, None].to(tl.int64) * width
        ones = tl.zeros((BM, BN), tl.int32) + 1
        tl.atomic_add(HIST + at + right, ones, mask=valid & (right > 0))
        eq = valid & (left < right)
        tl.atomic_add(TIES + at + left, ones, mask=eq)
        tl.atomic_add(TIES + at + right, -ones, mask=eq)
    if PAIRS:
        pair_outputs(S, neg, tau, FIX, FIXCNT, n_fix, TAIL, TAILN, cap)


@triton.jit
def bin_kernel(
    Q,
    G,
    QC,
    GC,
    COLS,
    SELF,
    PTR,
    U,
    QA,
    GA,
    QN,
    GN,
    OUT,
    STATS,
    m,
    n_g,
    d,
    nu,
    n_steps,
    c_steps,
    gamma,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    K: tl.constexpr,
    EPI: tl.constexpr,
    SCREEN: tl.constexpr,
    EMULATE: tl.constexpr,
    CSR: tl.constexpr,
):
    """The binning pass: ``OUT[p] += 1`` for every negative with ``p`` = the number of
    sorted positive scores U[0 : nu] ``<=`` it, when ``p > 0``."""
    col0 = tl.program_id(0) * BN
    row0 = tl.program_id(1) * BM
    rows, cols, inside, same, cpos, is_self, qa, ga, base, r = row_parts(
        QC, GC, COLS, SELF, PTR, QA, GA, row0, col0, m, n_g, c_steps, BM, BN, K, EPI, CSR
    )
    neg = inside & (same == 0) & (is_self == 0)
    zero = tl.zeros((BM, BN), tl.int64)
    n_u = tl.zeros((BM, BN), tl.int32) + nu
    if SCREEN:
        lo, hi = screened_tile(
            Q,
            G,
            QN,
            GN,
            rows,
            cols,
            row0,
            col0,
            m,
            n_g,
            d,
            qa,
            ga,
            gamma,
            BM,
            BN,
            BK,
            EPI,
            SCREEN,
            EMULATE,
        )
        p_lo = search(U, zero, n_u, lo, neg, n_steps, True)
        pos = search(U, zero, n_u, hi, neg, n_steps, True)
        amb = tl.max(tl.where(neg & (p_lo < pos), 1, 0))
        tl.atomic_add(STATS + amb, 1)  # [tiles the screen decided, tiles recomputed]
        if amb > 0:
            S = exact_tile(Q, G, row0, col0, m, n_g, d, qa, ga, BM, BN, BK, EPI)
            pos = search(U, zero, n_u, S, neg, n_steps, True)
    else:
        S = exact_tile(Q, G, row0, col0, m, n_g, d, qa, ga, BM, BN, BK, EPI)
        pos = search(U, zero, n_u, S, neg, n_steps, True)
    tl.atomic_add(OUT + pos.to(tl.int64), tl.zeros((BM, BN), tl.int64) + 1, mask=neg & (pos > 0))
