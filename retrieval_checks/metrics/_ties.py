"""Rank metrics under the *average* tie policy: the exact expected value over all
orderings of tied items, each ordering equally likely (McSherry & Najork, "Computing
information retrieval performance measures efficiently in the presence of tied scores",
ECIR 2008), computed from counts: no enumeration, no sampling, no loop over items.

Input (one block of queries, binary relevance, one entry per relevant item), as
:func:`._ranking.per_query_values` takes it plus the ties:

- ``rid``: the row (query) of the item, rows ``0 .. n - 1``;
- ``position``: its 0-based position among its row's relevant items by decreasing score
  (relevant items tied with each other get distinct positions);
- ``rank_pess`` = 1 + position + ge, ge = number of non-relevant items scoring >= it;
- ``tied``: number of non-relevant items with the same score (optimistic rank
  ``rank_pess - tied``);
- ``n_relevant``: relevant items per row (rows with none get NaN in every metric).

Tie groups. In a row, relevant items with equal ge and equal ``tied`` > 0 share one
score, with the same t = ``tied`` non-relevant items (two relevant items with different
scores and tied > 0 cannot share both counts). A group has r relevant items at positions
c .. c + r - 1 (c relevant items above it), n = r + t items, s = ge - t + c items
strictly above; it fills ranks s + 1 .. s + n and its r relevant items take a uniformly
random r-subset of those n slots, independently of the other groups. A relevant item
with tied = 0 is a group of its own (r = 1, t = 0, s = rank_pess - 1): its order among
relevant items tied with it changes no binary-relevance metric.

Per group, with x = s + 1, S1(x, L) = sum_{j<L} 1/(x+j) = psi(x+L) - psi(x) and
D(x, L) = sum_{j<L} j/(x+j) = L - x S1 (both evaluated without cancellation: a few
direct terms, then the Euler-Maclaurin expansion of the digamma function):

- relevant items among the first m = K - s slots: E = r clip(m / n, 0, 1)
  (``recall@K``, ``precision@K``; ``r_precision`` with K = R);
- sum of the precisions i / rank_i of its relevant items within its first L slots:
  (r/n) [(c+1) S1(x, L) + a D(x, L)], a = (r-1)/(n-1) (0 when n = 1): slot k holds a
  relevant item with probability r/n, whose index is then c + 1 + (k-1) a on average.
  L = n (``map``), min(n, K - s) (``map_cut@K``, ``map_capped@K``), min(n, R - s) (``map@R``);
- the group holding the row's best relevant item (c = 0) decides the first relevant
  rank r_1 = s + X, X - 1 negative-hypergeometric:
  ``hit_rate@K`` = P(X <= m) = 1 - C(t, m)/C(n, m) (:func:`hit_probability`);
  ``meanr`` / ``medr`` (per query) E[r_1] = s + 1 + t/(r+1) (:func:`expected_first_rank`);
  ``mrr`` E[1/r_1] = sum_{k=r..n} T_k, T_r = 1/(s+t+1), T_{k+1}/T_k = k(n-k)/((k+1)(N-k)),
  N = n + s; equivalently C(N, r-1)/C(n, r) [psi(N+1) - psi(s+1) - sum_{k<r} rho_k/k],
  rho_k = C(n, k)/C(N, k) (:func:`expected_reciprocal_rank`);
- ``map@K`` = (sum of the precisions at the H hits in the top K) / H is a ratio: the
  groups wholly inside the top K add their expected precision sum A and their count H0;
  the group straddling K (at most one, m = K - s of its slots inside) puts h of its
  relevant items in the top K, h hypergeometric, those h uniformly on the m slots:
  E = sum_h P(h) (A + B(h)) / (H0 + h), B(h) = (h/m) [(c+1) S1(x, m) + (h-1)/(m-1) D(x, m)],
  a term with H0 + h = 0 counting 0. Its true bounds over orderings are
  :func:`map_at_k_extremes` (map@K is not monotone in the ranks).

Cost: O(relevant items + groups x K) per call (``mrr``: O(r) per row, r the relevant
items of the row's top group), whatever the number of tied non-relevant items.
Precision: about 1e-15 relative (``mrr`` about 1e-13 where long double is plain double).
``medr`` per query is E[r_1]; its aggregate is the median of those expectations, not the
expectation of the median.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..errors import InputError
from ._names import MetricSpec
from ._ranking import bpref_values, discount_prefix, ideal_dcg, interpolated_precision

__all__ = [
    "expected_per_query_values",
    "hit_probability",
    "expected_first_rank",
    "expected_reciprocal_rank",
    "map_at_k_extremes",
    "expected_reciprocal_rank_within",
    "expected_interpolated_precision",
    "harmonic_sums",
    "tie_groups",
    "TieGroups",
]

# below this x, S1 and D add direct terms until x reaches it; above, the expansion's
# next term is under 1e-19 of the sum
_SHIFT = 20.0
# (p, coefficient of x^-p in psi(x) - ln x, sign flipped): 1/(2x) and B_2k / (2k x^2k)
_EM = (
    (1, 0.5),
    (2, 1 / 12),
    (4, -1 / 120),
    (6, 1 / 252),
    (8, -1 / 240),
    (10, 1 / 132),
    (12, -691 / 32760),
    (14, 1 / 12),
)
_TINY = 1e-17  # relative size of the terms a positive series may leave out


class TieGroups(NamedTuple):
    """One entry per tie group (see the module docstring), grouped by row."""

    row: np.ndarray  # int64 row of the group
    s: np.ndarray  # int64 items strictly above the group
    c: np.ndarray  # int64 relevant items strictly above the group
    r: np.ndarray  # int64 relevant items in the group
    t: np.ndarray  # int64 non-relevant items tied with them


def tie_groups(rid, position, rank_pess, tied) -> TieGroups:
    """The tie groups of the relevant items (entries in any order)."""
    rid = np.asarray(rid, dtype=np.int64).ravel()
    position = np.asarray(position, dtype=np.int64).ravel()
    tied = np.asarray(tied, dtype=np.int64).ravel()
    ge = np.asarray(rank_pess, dtype=np.int64).ravel() - position - 1
    alone = np.where(tied > 0, -1, position)  # an item tied with no negative is its own group
    order = np.lexsort((position, alone, tied, ge, rid))
    rid, position, tied, ge, alone = (
        rid[order],
        position[order],
        tied[order],
        ge[order],
        alone[order],
    )
    new = np.ones(rid.shape[0], dtype=bool)
    if rid.shape[0]:
        new[1:] = (
            (np.diff(rid) != 0) | (np.diff(ge) != 0) | (np.diff(tied) != 0) | (np.diff(alone) != 0)
        )
    first = np.flatnonzero(new)
    r = np.diff(np.append(first, rid.shape[0]))
    c, t = position[first], tied[first]
    return TieGroups(rid[first], ge[first] - t + c, c, r, t)


def _segment_cumprod(factors: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Cumulative products restarting at each segment (segments of ``lengths`` laid end to
    end), in the factors' dtype; one 2-D block per power-of-two width, so no rounding
    crosses segments."""
    out = np.empty(factors.shape[0], dtype=factors.dtype)
    starts = np.cumsum(lengths) - lengths
    width = np.left_shift(1, np.frexp(np.maximum(lengths, 1) - 1.0)[1])
    for w in np.unique(width[lengths > 0]):
        sel = np.flatnonzero((width == w) & (lengths > 0))
        cols = np.arange(w)
        idx = starts[sel, None] + cols
        inside = cols < lengths[sel, None]
        block = np.cumprod(np.where(inside, factors[np.where(inside, idx, 0)], 1), axis=1)
        out[idx[inside]] = block[inside]
    return out


def _u_minus_log1p(u: np.ndarray) -> np.ndarray:
    """u - log(1 + u) for u >= 0 to full relative precision (its series below 0.2)."""
    small = u < 0.2
    us = np.where(small, u, 0.0)
    acc = np.zeros_like(us)
    for j in range(26, -1, -1):  # u^2 sum_j (-u)^j / (j + 2), by Horner
        acc = 1.0 / (j + 2) - us * acc
    return np.where(small, acc * us * us, u - np.log1p(np.where(small, 0.0, u)))


def _harmonic_tail(x: np.ndarray, L: np.ndarray):
    """S1 and D for x >= _SHIFT by the Euler-Maclaurin expansion of psi(x + L) - psi(x)."""
    u = L / x
    lu = np.log1p(u)
    S1 = lu.copy()
    D = x * _u_minus_log1p(u)
    for p, coef in _EM:
        d = -np.expm1(-p * lu) / x**p  # x^-p - (x + L)^-p
        S1 += coef * d
        D -= coef * x * d
    return S1, D


def harmonic_sums(x, L, dtype=np.float64):
    """S1 = sum_{j<L} 1/(x+j) and D = sum_{j<L} j/(x+j) (x >= 1, integer L >= 0), each
    to about full relative precision of ``dtype``, in O(1) per element."""
    x, L = np.broadcast_arrays(np.asarray(x, dtype=dtype), np.asarray(L, dtype=dtype))
    x, L = x.ravel(), np.maximum(L.ravel(), 0)
    # direct terms: up to x = _SHIFT, and always the first (D's j = 0 term is exactly 0)
    head = np.minimum(np.maximum(np.ceil(_SHIFT - x), 1), L)
    S1 = np.zeros(x.shape[0], dtype=dtype)
    D = np.zeros(x.shape[0], dtype=dtype)
    for j in range(
        int(head.max()) if head.shape[0] else 0
    ):  # at most _SHIFT passes, O(size) memory
        term = np.where(j < head, 1 / (x + j), 0)
        S1 += term
        D += j * term
    rest = L > head
    if rest.any():
        s1, d = _harmonic_tail(x[rest] + head[rest], L[rest] - head[rest])
        S1[rest] += s1
        D[rest] += d + head[rest] * s1
    return S1, D


def _precision_sum(s, c, r, t, L):
    """Expected sum of i / rank_i over a group's relevant items in its first L slots."""
    n = (r + t).astype(np.float64)
    L = np.clip(L, 0, n)
    S1, D = harmonic_sums(s + 1.0, L)
    a = np.where(n > 1, (r - 1) / np.maximum(n - 1, 1), 0.0)
    return np.where(L > 0, (r / n) * ((c + 1.0) * S1 + a * D), 0.0)


def _ints(*arrays):
    out = np.broadcast_arrays(*(np.asarray(a, dtype=np.int64) for a in arrays))
    return tuple(a.ravel() for a in out), out[0].shape


def hit_probability(s, r, t, k) -> np.ndarray:
    """P(first relevant rank <= k) for a top group with ``s`` items above it, ``r`` >= 1
    relevant and ``t`` non-relevant items tied: 1 - C(t, m)/C(n, m), m = k - s, as a sum
    of min(m, r) logarithms (O(min(m, r)) per element, never O(t))."""
    (s, r, t, k), shape = _ints(s, r, t, k)
    n = r + t
    m = k - s
    out = np.where(m > t, 1.0, 0.0)
    part = (m >= 1) & (m <= t)
    if part.any():
        idx = np.flatnonzero(part)
        mm, rr, nn = m[idx], r[idx], n[idx]
        use_m = mm <= rr  # C(t,m)/C(n,m) = prod_{j<m} (1 - r/(n-j)) = prod_{i<r} (1 - m/(n-i))
        cnt = np.where(use_m, mm, rr)
        seg = np.repeat(np.arange(idx.shape[0]), cnt)
        j = np.arange(seg.shape[0]) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        num = np.where(use_m, rr, mm)[seg]
        logs = np.log1p(-num / (nn[seg] - j))
        out[idx] = -np.expm1(np.bincount(seg, weights=logs, minlength=idx.shape[0]))
    return out.reshape(shape)


def expected_first_rank(s, r, t) -> np.ndarray:
    """E[first relevant rank] = s + 1 + t/(r+1) for a top group (``r`` >= 1)."""
    (s, r, t), shape = _ints(s, r, t)
    return (s + 1.0 + t / (r + 1.0)).reshape(shape)


# extended precision (80-bit where the platform has it) for the long products of mrr; the
# r - 1 term form of mrr is used while its cancellation, about exp(r s / t), stays cheap
_WIDE = np.longdouble
_HEAD_LIMIT = 6 if np.finfo(_WIDE).eps < 1e-18 else 1


def _reciprocal_series(s, r, t):
    """E[1/r_1] = sum_{k=r}^{n} T_k (positive terms), cut where the rest is below _TINY."""
    n, N = r + t, r + t + s
    q = t / (t + s)  # s > 0 here: T_{k+1}/T_k <= q < 1
    with np.errstate(divide="ignore"):  # t = 0: one term
        need = np.ceil((-np.log(_TINY) - np.log1p(-q)) / -np.log(q))
    length = np.maximum(np.minimum(need, t + 1), 1).astype(np.int64)
    seg = np.repeat(np.arange(s.shape[0]), length)
    k = (np.arange(seg.shape[0]) - np.repeat(np.cumsum(length) - length, length) + r[seg]).astype(
        _WIDE
    )
    # the factor of term k is T_k / T_{k-1}, and T_r itself for a segment's first term
    fac = (k - 1) * (n[seg] - k + 1) / (k * (N[seg] - k + 1))
    first = k == r[seg]
    fac[first] = 1 / (s[seg[first]] + t[seg[first]] + 1)
    terms = _segment_cumprod(fac, length)
    return _segment_sum(terms, seg, s.shape[0])


def _segment_sum(values, seg, size):
    out = np.zeros(size, dtype=values.dtype)
    np.add.at(out, seg, values)
    return out


def _reciprocal_head(s, r, t):
    """E[1/r_1] = C(N, r-1)/C(n, r) [psi(N+1) - psi(s+1) - sum_{k<r} rho_k / k], r - 1 terms."""
    n, N = r + t, r + t + s
    H = harmonic_sums(s + 1, n, dtype=_WIDE)[0]
    cnt = (r - 1).astype(np.int64)
    seg = np.repeat(np.arange(s.shape[0]), cnt)
    k = (np.arange(seg.shape[0]) - np.repeat(np.cumsum(cnt) - cnt, cnt) + 1).astype(_WIDE)
    rho = _segment_cumprod((n[seg] - k + 1) / (N[seg] - k + 1), cnt)
    head = _segment_sum(rho / k, seg, s.shape[0])
    last = np.ones(s.shape[0], dtype=_WIDE)
    ends = np.cumsum(cnt) - 1
    last[cnt > 0] = rho[ends[cnt > 0]]  # rho_{r-1}
    return (r / (t + 1)) / last * (H - head)


def expected_reciprocal_rank(s, r, t) -> np.ndarray:
    """E[1 / first relevant rank] for a top group (``r`` >= 1), exact, in O(r) per element:
    (r / (t+1)) (psi(r + t + 1) - psi(r)) when s = 0; the r - 1 term form where
    r (s + 1) <= 6 (t + 1) (its cancellation then costs a few of the extended digits;
    1 (t + 1) where long double is plain double); the positive series otherwise (at most
    about 15 (r + 3) terms there, 45 (r + 1) without extended precision)."""
    (s, r, t), shape = _ints(s, r, t)
    s, r, t = s.astype(_WIDE), r.astype(_WIDE), t.astype(_WIDE)
    out = np.empty(s.shape[0], dtype=_WIDE)
    top = s == 0
    out[top] = r[top] / (t[top] + 1) * harmonic_sums(r[top], t[top] + 1, dtype=_WIDE)[0]
    head = ~top & (r * (s + 1) <= _HEAD_LIMIT * (t + 1))
    if head.any():
        out[head] = _reciprocal_head(s[head], r[head], t[head])
    rest = ~top & ~head
    if rest.any():
        out[rest] = _reciprocal_series(s[rest], r[rest], t[rest])
    return out.astype(np.float64).reshape(shape)


def _hypergeometric(m, r, n, width):
    """P(h) for h = 0 .. width - 1 (one row per element): h of r relevant items among the
    first m of n slots. Built from the ratios P(h+1)/P(h) outwards from the mode, so every
    partial product is at most 1 and nothing overflows; infeasible h get exactly 0."""
    h = np.arange(width, dtype=np.float64)[None, :]
    m, r, n = (np.asarray(a, dtype=np.float64)[:, None] for a in (m, r, n))
    mode = np.floor((m + 1) * (r + 1) / (n + 2))
    den = h * (n - m - r + h)  # column j: P(j)/P(j-1) = (m-j+1)(r-j+1) / (j (n-m-r+j))
    up = np.where(h > mode, (m - h + 1) * (r - h + 1) / np.where(den > 0, den, 1.0), 1.0)
    den = (m - h) * (r - h)  # column j < mode: P(j)/P(j+1) = (j+1)(n-m-r+j+1) / ((m-j)(r-j))
    down = np.where(h < mode, (h + 1) * (n - m - r + h + 1) / np.where(den > 0, den, 1.0), 1.0)
    w = np.cumprod(up, axis=1) * np.cumprod(down[:, ::-1], axis=1)[:, ::-1]
    return w / w.sum(axis=1, keepdims=True)


class _Cut(NamedTuple):
    """A row's view of a cut-off K: the groups wholly inside the top K, the straddling ones."""

    inside: np.ndarray  # bool per group
    hits: np.ndarray  # float per row: relevant items of the inside groups (H0)
    straddle: np.ndarray  # indices of the groups with s < K < s + n
    m: np.ndarray  # float: slots of each straddling group inside the top K
    width: int  # 1 + the largest feasible h


def _cut(g: TieGroups, K: int, size: int) -> _Cut:
    inside = g.s + g.r + g.t <= K
    hits = np.bincount(g.row[inside], weights=g.r[inside].astype(np.float64), minlength=size)
    straddle = np.flatnonzero((g.s < K) & ~inside)
    m = (K - g.s[straddle]).astype(np.float64)
    width = int(np.minimum(m, g.r[straddle]).max()) + 1 if straddle.shape[0] else 0
    return _Cut(inside, hits, straddle, m, width)


def _ratio(num, hits):
    """num / hits, 0 where hits == 0 (map@K of a query with no hit in the top K)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(hits > 0, num / np.where(hits > 0, hits, 1.0), 0.0)


def _expected_map_at_k(g: TieGroups, K: int, size: int, full: np.ndarray) -> np.ndarray:
    """E[map@K] per row; ``full`` is each group's expected precision sum over all its slots."""
    cut = _cut(g, K, size)
    A = np.bincount(g.row[cut.inside], weights=full[cut.inside], minlength=size)
    value = _ratio(A, cut.hits)
    if cut.straddle.shape[0]:
        i = cut.straddle
        s, c, r, t, m = g.s[i], g.c[i].astype(np.float64), g.r[i], g.t[i], cut.m
        P = _hypergeometric(m, r, r + t, cut.width)
        S1, D = harmonic_sums(s + 1.0, m)
        h = np.arange(cut.width, dtype=np.float64)[None, :]
        slope = np.where(m > 1, 1.0 / np.maximum(m - 1, 1), 0.0)[:, None]
        B = (h / m[:, None]) * ((c + 1)[:, None] * S1[:, None] + (h - 1) * slope * D[:, None])
        row = g.row[i]
        value[row] = (P * _ratio(A[row][:, None] + B, c[:, None] + h)).sum(axis=1)
    return value


def _consecutive_sum(c, first_rank, count):
    """sum_{i=1..count} (c + i) / (first_rank - 1 + i): relevant items c+1 .. c+count on
    consecutive ranks from ``first_rank`` (arrays broadcast together)."""
    c, first_rank, count = np.broadcast_arrays(c, first_rank, count)
    S1, D = harmonic_sums(first_rank, count)
    return ((c.ravel() + 1.0) * S1 + D).reshape(c.shape)


def map_at_k_extremes(rid, position, rank_pess, tied, n_relevant, k: int):
    """(lowest, highest) map@K per query over every ordering of the tied items (NaN for a
    query without relevant items). Groups wholly inside the top K are independent (lowest:
    their relevant items last in the group, highest: first); the straddling group puts h
    of its relevant items in the top K, at the latest (lowest) or earliest (highest) of its
    m slots there; the bounds are the extremes over the feasible h."""
    n_relevant = np.asarray(n_relevant)
    size = n_relevant.shape[0]
    g = tie_groups(rid, position, rank_pess, tied)
    cut = _cut(g, int(k), size)
    s, c, r, t = g.s * 1.0, g.c * 1.0, g.r * 1.0, g.t * 1.0
    inside = cut.inside
    A_lo = np.bincount(
        g.row[inside],
        weights=_consecutive_sum(c[inside], s[inside] + t[inside] + 1, r[inside]),
        minlength=size,
    )
    A_hi = np.bincount(
        g.row[inside], weights=_consecutive_sum(c[inside], s[inside] + 1, r[inside]), minlength=size
    )
    lo, hi = _ratio(A_lo, cut.hits), _ratio(A_hi, cut.hits)
    if cut.straddle.shape[0]:
        i, m = cut.straddle, cut.m[:, None]
        h = np.arange(cut.width, dtype=np.float64)[None, :]
        low_h = np.maximum(0.0, r[i] - (r[i] + t[i] - cut.m))[:, None]
        feasible = (h >= low_h) & (h <= np.minimum(r[i], cut.m)[:, None])
        ci, si, row = c[i][:, None], s[i][:, None], g.row[i]
        h = np.where(feasible, h, 0.0)  # keeps the ranks of infeasible columns valid
        low = _ratio(A_lo[row][:, None] + _consecutive_sum(ci, si + m - h + 1, h), ci + h)
        high = _ratio(A_hi[row][:, None] + _consecutive_sum(ci, si + 1, h), ci + h)
        lo[row] = np.where(feasible, low, np.inf).min(axis=1)
        hi[row] = np.where(feasible, high, -np.inf).max(axis=1)
    empty = n_relevant <= 0
    lo[empty] = np.nan
    hi[empty] = np.nan
    return lo, hi


# Interpolated precision (a maximum over the relevant items' precisions) has no closed
# form under ties: its expectation counts each tie's orders, exact, within a work bound.
#: The most steps (support values x slots x relevant items, summed over a query's tie
#: groups) the exact expectation of interpolated precision takes for one query.
IPREC_WORK = 20_000_000


def average_refusal(spec: MetricSpec, work: int) -> str:
    return (
        f"{spec.name} under ties='average': its exact expectation over the orders of tied "
        f"scores counts the orders of each tie, {work} steps for one query here (the bound is "
        f"{IPREC_WORK}); use ties='pessimistic' or 'optimistic' (its least and greatest value "
        "over tie orders: both are reported in tie_values) or, in evaluate_run, ties='docid' "
        "(trec_eval's order)"
    )


def _group_below(v: np.ndarray, s: int, c: int, r: int, t: int, i0: int) -> np.ndarray:
    """P(max over the group's relevant items i >= i0 of (c + i) / (s + x_i) < v) for each
    v, its r relevant items on a uniformly random r-subset x_1 < ... < x_r of its n = r + t
    slots: the subsets with x_i >= L_i (L_i the first slot whose precision is below v),
    counted by the ballot recursion over slots, divided by C(n, r)."""
    n = r + t
    slots = np.arange(1, n + 1, dtype=np.float64)
    f = np.zeros((v.size, r + 1))
    f[:, 0] = 1.0
    low = np.ones((v.size, r + 1), np.int64)  # L_i per v (1: any slot)
    for i in range(max(i0, 1), r + 1):
        below = ((c + i) / (s + slots))[None, :] < v[:, None]  # monotone in the slot
        low[:, i] = np.where(below.any(axis=1), below.argmax(axis=1) + 1, n + 1)
    for x in range(1, n + 1):
        for i in range(min(r, x), 0, -1):
            if x - i <= t:
                f[:, i] += np.where(x >= low[:, i], f[:, i - 1], 0.0)
    return f[:, r] / math.comb(n, r)


def expected_interpolated_precision(g: TieGroups, n_relevant, levels, size: int) -> np.ndarray:
    """``(len(levels), size)``: per level L and row, E[max_{j >= c} j / r_j] over the orders
    of tied items, c = max(1, floor(L R + 0.9)) (0 when fewer than c relevant items are
    ranked). The groups are independent, so P(max < v) is the product of the groups'
    :func:`_group_below`; E = sum over the support v_1 < v_2 < ... of (v_k - v_{k-1})
    P(max >= v_k). Rows without a tie are their one order."""
    hits = np.bincount(g.row, weights=g.r, minlength=size).astype(np.int64)
    # rows without a tied non-relevant item: their one order, vectorised
    k = np.repeat(np.arange(g.row.size), g.r)
    i = np.arange(k.size) - np.repeat(np.cumsum(g.r) - g.r, g.r)  # 0-based inside the group
    position = g.c[k] + i
    prec = (position + 1) / (g.s[k] + g.t[k] + i + 1.0)  # pessimistic slots (t = 0: the only)
    out = interpolated_precision(g.row[k], position, prec, np.asarray(n_relevant), levels)
    order = np.argsort(g.row, kind="stable")
    bounds = np.searchsorted(g.row[order], np.arange(size + 1))
    tied_rows = np.unique(g.row[(g.t > 0) & (g.r > 0)])
    for row in tied_rows:
        idx = order[bounds[row] : bounds[row + 1]]
        groups = [(int(g.s[k]), int(g.c[k]), int(g.r[k]), int(g.t[k])) for k in idx]
        for li, level in enumerate(levels):
            cut = max(1, int(np.floor(float(level) * float(n_relevant[row]) + 0.9)))
            out[li, row] = _expected_max_precision(groups, cut) if cut <= hits[row] else 0.0
    return out


def _expected_max_precision(groups, cut: int) -> float:
    parts, support = [], []
    for s, c, r, t in groups:
        i0 = max(1, cut - c)
        if i0 > r:
            continue  # no item of this group is at or beyond the cut
        values = [(c + i) / (s + x) for i in range(i0, r + 1) for x in range(i, i + t + 1)]
        parts.append((s, c, r, t, i0))
        support.extend(values)
    v = np.unique(np.array(support, np.float64))
    steps = sum((r + t) * r for _, _, r, t, _ in parts if t)
    work = max(steps * v.size, steps * 100)  # vector steps, and the loop's own cost
    if work > IPREC_WORK:
        raise InputError(
            average_refusal(MetricSpec("iprec_at_recall", "iprec_at_recall", "query"), work) + "."
        )
    below = np.ones(v.size)
    for s, c, r, t, i0 in parts:
        if t == 0:  # no tied non-relevant item: one order
            m = max((c + i) / (s + i) for i in range(i0, r + 1))
            below *= m < v
        else:
            below *= _group_below(v, s, c, r, t, i0)
    step = np.diff(np.concatenate([[0.0], v]))
    return float(np.sum(step * (1.0 - below)))


def expected_reciprocal_rank_within(s, r, t, k: int) -> np.ndarray:
    """E[1 / r_1 if r_1 <= k else 0], r_1 = s + X the first relevant rank of a group of r
    relevant and t other items after s items: P(X = 1) = r / n, P(X = x + 1) / P(X = x) =
    (t - x + 1) / (n - x), n = r + t; the sum runs over x <= min(k - s, t + 1)."""
    s, r, t = (np.asarray(a, np.float64) for a in (s, r, t))
    n = r + t
    last = np.minimum(k - s, t + 1)  # the last x that lands within k
    out = np.zeros(s.shape)
    prob = r / n
    x = 1.0
    active = last >= 1
    while active.any():
        out = out + np.where(active, prob / (s + x), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            prob = np.where(n - x > 0, prob * (t - x + 1) / (n - x), 0.0)
        x += 1.0
        active = last >= x
    return out


def _expected_dcg(g: TieGroups, K: int | None, size: int) -> np.ndarray:
    """E[DCG@K] per row: a group's r relevant items are spread uniformly over its n slots
    (ranks s+1..s+n), so each slot holds a relevant item with probability r / n and the
    group adds (r / n) * (D[min(s + n, K)] - D[s]) (linear in the slots: exact)."""
    n = g.r + g.t
    end = g.s + n if K is None else np.minimum(g.s + n, K)
    start = np.minimum(g.s, end)
    D = discount_prefix(int(end.max()) if end.size else 0)
    return np.bincount(g.row, weights=g.r / n * (D[end] - D[start]), minlength=size)


def expected_per_query_values(
    # long: one branch per family: the contract's definitions side by side
    specs: list[MetricSpec],
    rid: np.ndarray,
    position: np.ndarray,
    rank_pess: np.ndarray,
    tied: np.ndarray,
    n_relevant: np.ndarray,
    n_ranked: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Per-query expected value, over the orderings of tied items, of every query-level
    metric in ``specs`` (names and meanings as :func:`._ranking.per_query_values`;
    ``medr`` / ``meanr`` give E[first relevant rank] per query). Rows with no relevant
    item get NaN. ``n_ranked``: as :func:`._ranking.per_query_values` (``bpref``: each
    relevant item has y of the ``tied`` non-relevant items before it, y uniform on
    0 .. tied, whatever the relevant items tied with it do: exact)."""
    n_relevant = np.asarray(n_relevant)
    size = n_relevant.shape[0]
    R = n_relevant.astype(np.float64)
    has = n_relevant > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_R = np.where(has, 1.0 / R, np.nan)
    g = tie_groups(rid, position, rank_pess, tied)
    s, c, r, t = g.s * 1.0, g.c * 1.0, g.r * 1.0, g.t * 1.0
    R_of = R[g.row]
    top = g.c == 0
    sums: dict = {}

    def count(cut):  # expected relevant items within the first `cut` ranks
        return np.bincount(
            g.row, weights=r * np.clip((cut - s) / (r + t), 0.0, 1.0), minlength=size
        )

    def group_sums(key, cut):  # expected precision sum of each group within the first `cut` ranks
        if key not in sums:
            sums[key] = _precision_sum(s, c, r, t, cut - s)
        return sums[key]

    def psum(key, cut):
        return np.bincount(g.row, weights=group_sums(key, cut), minlength=size)

    def at_top(values):
        v = np.full(size, np.nan)
        v[g.row[top]] = values
        return v

    out: dict[str, np.ndarray] = {}
    for spec in specs:
        f, K = spec.family, spec.k
        if f == "hit_rate":
            v = at_top(hit_probability(g.s[top], g.r[top], g.t[top], K))
        elif f == "recall":
            v = count(K) * inv_R
        elif f == "precision":
            v = count(K) / K
        elif f == "map" and K is None:
            v = psum("all", np.inf) * inv_R
        elif f == "map":
            v = _expected_map_at_k(g, K, size, group_sums("all", np.inf))
        elif f == "map_cut":
            v = psum(K, K) * inv_R
        elif f == "map_capped":
            with np.errstate(divide="ignore", invalid="ignore"):
                v = psum(K, K) / np.minimum(float(K), R)
        elif f == "map@R":
            v = psum("R", R_of) * inv_R
        elif f == "r_precision":
            v = count(R_of) * inv_R
        elif f == "mrr" and K is None:
            v = at_top(expected_reciprocal_rank(g.s[top], g.r[top], g.t[top]))
        elif f in ("medr", "meanr"):
            v = at_top(expected_first_rank(g.s[top], g.r[top], g.t[top]))
        elif f in ("ndcg", "ndcg_exp"):
            v = _expected_dcg(g, K, size) / ideal_dcg(n_relevant, K)
        elif f in ("dcg", "dcg_exp"):
            v = _expected_dcg(g, K, size)
        elif f == "mrr":  # mrr@K
            v = at_top(expected_reciprocal_rank_within(g.s[top], g.r[top], g.t[top], K))
        elif f == "f1":
            v = 2.0 * count(K) / (K + R)
        elif f == "recall_cap":
            with np.errstate(divide="ignore", invalid="ignore"):
                v = count(K) / np.minimum(float(K), R)
        elif f == "rbp":
            p = spec.level
            v = np.bincount(g.row, weights=r / (r + t) * (p**s - p ** (s + r + t)), minlength=size)
        elif f in ("bpref", "rbp_residual") and n_ranked is None:  # a caller's bug
            raise ValueError(f"{spec.name} needs n_ranked (the judged items of each ranking)")
        elif f == "bpref":
            above = np.asarray(rank_pess) - np.asarray(position) - 1 - np.asarray(tied)
            v = bpref_values(np.asarray(rid), above, tied, n_relevant, n_ranked)
        elif f == "rbp_residual":  # every item judged and ranked: nothing left to gain
            v = np.zeros(size)
        elif f == "gm_map":
            v = psum("all", np.inf) * inv_R
        elif f == "iprec_at_recall":
            v = expected_interpolated_precision(g, n_relevant, [spec.level], size)[0]
        elif f == "iprec_11pt":
            levels = tuple(i / 10 for i in range(11))
            v = expected_interpolated_precision(g, n_relevant, levels, size).mean(axis=0)
        else:  # pragma: no cover - parse_metric admits nothing else here
            raise AssertionError(spec)
        v = np.asarray(v, dtype=np.float64)
        v[~has] = np.nan
        out[spec.name] = v
    return out
