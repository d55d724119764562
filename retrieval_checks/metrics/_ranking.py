"""Ranking metrics of each query from the exact ranks of its relevant items.

For one query with R relevant items at 1-based ranks r_1 < r_2 < ... < r_R (ranks in
the query's ranking after self-exclusion, ties resolved by the tie policy):

- ``hit_rate@K``      = [r_1 <= K]
- ``recall@K``        = #{i: r_i <= K} / R
- ``precision@K``     = #{i: r_i <= K} / K
- ``map`` (AP)        = (1/R) * sum_i i / r_i
- ``map@K``           = (1/H) * sum_{r_i <= K} i / r_i, H = #{i: r_i <= K} (0 when H = 0)
- ``map_cut@K``       = (1/R) * sum_{r_i <= K} i / r_i
- ``map_capped@K``    = (1/min(K, R)) * sum_{r_i <= K} i / r_i
- ``map@R``           = (1/R) * sum_{r_i <= R} i / r_i
- ``r_precision``     = #{i: r_i <= R} / R
- ``mrr``             = 1 / r_1
- ``mrr@K``           = 1 / r_1 if r_1 <= K, else 0
- ``f1@K``            = 2 #{i: r_i <= K} / (K + R) (the harmonic mean of precision@K and recall@K)
- ``recall_cap@K``    = #{i: r_i <= K} / min(K, R)
- ``rbp@p``           = (1 - p) * sum_i p^(r_i - 1)
- ``bpref``           = (1/R) sum_i 1 - min(a_i, R) / min(N, R), a_i = r_i - i the judged
  non-relevant items ranked above the i-th relevant item, N = those of the ranking (every
  ranked item not relevant is judged: labels judge the whole gallery); 1 per term where
  min(N, R) = 0 (trec_eval's bpref)
- ``rbp_residual@p``  = 0: every item is judged and the ranking holds all of them, so RBP
  has nothing left to gain (``evaluate_run`` computes it where judgements are incomplete)
- ``gm_map``          = AP per query; aggregated as exp(mean(log(max(AP, 1e-5))))
- ``iprec_at_recall@L`` = max_{c <= j <= H} j / r_j, c = max(1, floor(L R + 0.9)) (trec_eval
  9.0's cut-off), H the relevant items ranked; 0 when c > H
- ``iprec_11pt``      = the mean of ``iprec_at_recall`` at L = 0, 0.1, ..., 1
- ``dcg@K``           = sum_{r_i <= K} 1 / log2(r_i + 1) (binary relevance; graded: gain = grade)
- ``medr`` / ``meanr``: r_1 per query; aggregated over queries in :func:`aggregate`.
- ``ndcg@K``          = DCG@K / IDCG@K, DCG@K = sum_{r_i <= K} 1 / log2(r_i + 1) (binary
  relevance: gain 1, so ``ndcg_exp`` is the same), IDCG@K = sum_{j <= min(K, R)}
  1 / log2(j + 1); ``ndcg`` without K cuts nowhere.

``i / r_i`` is precision at the rank of the i-th relevant item, so these are the
textbook sums over relevant positions written without the n x n matrix.
"""

from __future__ import annotations

import numpy as np

from ..errors import RetrievalChecksError
from ._names import MetricSpec

__all__ = ["per_query_values", "aggregate", "discount_prefix", "bpref_values"]


def discount_prefix(n: int) -> np.ndarray:
    """``D[j]`` = sum_{i=1..j} 1 / log2(i + 1) for j = 0..n: the DCG of j relevant items
    at ranks 1..j (``D[0] = 0``)."""
    out = np.zeros(int(n) + 1)
    if n > 0:
        np.cumsum(1.0 / np.log2(np.arange(2, int(n) + 2, dtype=np.float64)), out=out[1:])
    return out


def ideal_dcg(n_relevant: np.ndarray, k: int | None) -> np.ndarray:
    """IDCG of binary relevance: D[min(R, K)] per query (0 where R = 0)."""
    m = n_relevant if k is None else np.minimum(n_relevant, k)
    m = np.asarray(m, np.int64)
    return discount_prefix(int(m.max()) if m.size else 0)[m]


#: trec_eval's 11 recall levels of ``11pt_avg`` / ``iprec_at_recall``.
ELEVEN = tuple(i / 10 for i in range(11))

#: trec_eval's floor for AP in ``gm_map`` (MIN_GEO_MEAN): log(0) would be -inf.
GM_FLOOR = 1e-5


def recall_cutoff(level: float, n_relevant: np.ndarray) -> np.ndarray:
    """The number of relevant items that recall level L asks for, as trec_eval 9.0
    (which pytrec_eval embeds) computes it: ``(long) (L * R + 0.9)`` in float64."""
    return np.floor(float(level) * np.asarray(n_relevant, np.float64) + 0.9).astype(np.int64)


def interpolated_precision(rid, position, prec_at, n_relevant, levels) -> np.ndarray:
    """``(len(levels), n)``: per level L and row, max_{c <= j <= H} j / r_j with c =
    max(1, :func:`recall_cutoff`) (0 when c > H, H the row's relevant items ranked), from
    each relevant item's row, 0-based position and precision at its rank."""
    n = n_relevant.shape[0]
    order = np.lexsort((position, rid))
    prec = np.append(prec_at[order], 0.0)  # a last element: reduceat's final slice ends there
    hits = np.bincount(rid, minlength=n)
    start = np.concatenate([[0], np.cumsum(hits)])
    out = np.zeros((len(levels), n))
    for i, level in enumerate(levels):
        c = np.maximum(recall_cutoff(level, n_relevant), 1)
        rows = np.flatnonzero((c <= hits) & (n_relevant > 0))
        if rows.size:
            bounds = np.empty(2 * rows.size, np.int64)
            bounds[0::2] = start[rows] + c[rows] - 1
            bounds[1::2] = start[rows + 1]
            out[i, rows] = np.maximum.reduceat(prec, bounds)[0::2]
    return out


def bpref_values(rid, above, spread, n_relevant, n_ranked) -> np.ndarray:
    """trec_eval's bpref per row from each ranked relevant item's row, its judged
    non-relevant items ranked above it for certain (``above``) and those tied with it
    (``spread``: y of them come before it, y uniform on 0 .. spread: an item's place
    among the non-relevant items it ties with is uniform, so the expectation is exact;
    0 for a fixed order). ``n_ranked``: the items of each row's ranking, every one
    judged (N = n_ranked - the ranked relevant items). Per item 1 - E[min(a, R)] /
    min(N, R) (1 where min(N, R) = 0), summed and divided by R; NaN where R = 0."""
    n = n_relevant.shape[0]
    R = n_relevant.astype(np.float64)
    N = np.asarray(n_ranked, np.float64) - np.bincount(rid, minlength=n)
    cap = np.minimum(N, R)[rid]
    Rr = R[rid]
    A = np.asarray(above, np.float64)
    J = np.asarray(spread, np.float64)
    last = np.clip(Rr - A, -1.0, J)  # the last y with A + y <= R: sum_{y=0..J} min(A + y, R)
    mean_min = ((last + 1) * A + last * (last + 1) / 2 + (J - last) * Rr) / (J + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(cap > 0, 1.0 - mean_min / cap, 1.0)
        v = np.bincount(rid, weights=term, minlength=n) / R
    v[n_relevant == 0] = np.nan
    return v


def per_query_values(
    # long: one branch per family: the contract's definitions side by side
    specs: list[MetricSpec],
    rid: np.ndarray,
    position: np.ndarray,
    rank: np.ndarray,
    n_relevant: np.ndarray,
    n_ranked: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Per-query values of every query-level metric in ``specs``.

    ``rid``: row of each relevant item; ``position``: its 0-based position among the
    row's relevant items by decreasing score; ``rank``: its 1-based rank. Rows with
    no relevant item get NaN (the empty-query policy is applied by the caller).
    ``n_ranked``: the items of each row's ranking, all of them judged (``bpref`` and
    ``rbp_residual`` read it: a layout without it cannot tell them).
    """
    n = n_relevant.shape[0]
    R = n_relevant.astype(np.float64)
    has = n_relevant > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_R = np.where(has, 1.0 / R, np.nan)
    rank_f = rank.astype(np.float64)
    prec_at = (position + 1) / rank_f
    first = np.full(n, np.nan)
    # position 0 is the best-ranked relevant item of each row
    best = position == 0
    first[rid[best]] = rank_f[best]
    R_of = n_relevant[rid]

    def count(mask):
        return np.bincount(rid, weights=mask.astype(np.float64), minlength=n)

    def psum(mask):
        return np.bincount(rid, weights=prec_at * mask, minlength=n)

    out: dict[str, np.ndarray] = {}
    cache: dict[tuple, np.ndarray] = {}
    for spec in specs:
        f, K = spec.family, spec.k
        if (
            f
            in (
                "hit_rate",
                "recall",
                "precision",
                "map",
                "map_cut",
                "map_capped",
                "f1",
                "recall_cap",
            )
            and K is not None
        ):
            key = ("within", K)
            if key not in cache:
                cache[key] = rank <= K
            within = cache[key]
        if f == "hit_rate":
            v = (first <= K).astype(np.float64)
        elif f == "recall":
            v = count(within) * inv_R
        elif f == "precision":
            v = count(within) / K
        elif f == "map" and K is None:
            v = np.bincount(rid, weights=prec_at, minlength=n) * inv_R
        elif f == "map":
            h = count(within)
            s = psum(within)
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.where(h > 0, s / h, 0.0)
        elif f == "map_cut":
            v = psum(within) * inv_R
        elif f == "map_capped":
            with np.errstate(divide="ignore", invalid="ignore"):
                v = psum(within) / np.minimum(float(K), R)
        elif f == "map@R":
            v = psum(rank <= R_of) * inv_R
        elif f == "r_precision":
            v = count(rank <= R_of) * inv_R
        elif f == "mrr":
            v = 1.0 / first if K is None else np.where(first <= K, 1.0 / first, 0.0)
        elif f == "f1":
            v = 2.0 * count(within) / (K + R)
        elif f == "recall_cap":
            with np.errstate(divide="ignore", invalid="ignore"):
                v = count(within) / np.minimum(float(K), R)
        elif f == "rbp":
            p = spec.level
            v = (1.0 - p) * np.bincount(rid, weights=p ** (rank_f - 1.0), minlength=n)
        elif f in ("bpref", "rbp_residual") and n_ranked is None:  # a caller's bug
            raise ValueError(f"{spec.name} needs n_ranked (the judged items of each ranking)")
        elif f == "bpref":
            v = bpref_values(rid, rank - position - 1, np.zeros(rid.shape), n_relevant, n_ranked)
        elif f == "rbp_residual":  # every item judged and ranked: nothing left to gain
            v = np.zeros(n)
        elif f == "gm_map":
            v = np.bincount(rid, weights=prec_at, minlength=n) * inv_R
        elif f == "iprec_at_recall":
            v = interpolated_precision(rid, position, prec_at, n_relevant, [spec.level])[0]
        elif f == "iprec_11pt":
            v = np.mean(interpolated_precision(rid, position, prec_at, n_relevant, ELEVEN), axis=0)
        elif f in ("dcg", "dcg_exp"):
            inside = rank <= K if K is not None else np.ones(rank.shape, bool)
            v = np.bincount(rid, weights=inside / np.log2(rank_f + 1.0), minlength=n)
        elif f in ("medr", "meanr"):
            v = first.copy()
        elif f in ("ndcg", "ndcg_exp"):
            inside = rank <= K if K is not None else np.ones(rank.shape, bool)
            dcg = np.bincount(rid, weights=inside / np.log2(rank_f + 1.0), minlength=n)
            with np.errstate(divide="ignore", invalid="ignore"):
                v = dcg / ideal_dcg(n_relevant, K)
        else:  # pragma: no cover - parse_metric admits nothing else here
            raise AssertionError(spec)
        v = np.asarray(v, dtype=np.float64)
        v[~has] = np.nan
        out[spec.name] = v
    return out


def aggregate(spec: MetricSpec, values: np.ndarray, *, skipped=None) -> float:
    """Mean over the used queries; ``medr`` is floor(median of 0-based ranks) + 1.

    NaN marks a skipped query. ``skipped`` (indices or a boolean mask), where given, is
    the set of queries the caller skipped and counts: a NaN anywhere else is a value
    that went wrong (an overflow, inf / inf) and would leave the mean silently, so it
    is a :class:`~retrieval_checks.errors.RetrievalChecksError` naming the metric and
    the queries."""
    nan = np.isnan(values)
    if skipped is not None and nan.any():
        skipped = np.asarray(skipped)
        allowed = skipped.copy() if skipped.dtype == bool else np.zeros(values.shape[0], bool)
        if skipped.dtype != bool:
            allowed[skipped.astype(np.int64)] = True
        stray = np.flatnonzero(nan & ~allowed)
        if stray.size:
            raise RetrievalChecksError(
                f"{spec.name}: {stray.size} of {values.shape[0]} queries have no value (NaN) but were not "
                f"skipped (query {', '.join(map(str, stray[:5].tolist()))}{' ...' if stray.size > 5 else ''}); "
                "leaving them out of the mean would hide them (n_skipped counts only queries without a relevant "
                "item). This is a bug of retrieval-checks: please report it with the metric and the inputs."
            )
    used = values[~nan]
    if used.size == 0:
        return float("nan")
    if spec.family == "medr":
        return float(np.floor(np.median(used - 1.0)) + 1.0)
    if spec.family == "gm_map":
        return float(np.exp(np.mean(np.log(np.maximum(used, GM_FLOOR)), dtype=np.float64)))
    return float(np.mean(used, dtype=np.float64))
