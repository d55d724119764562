"""A dense brute-force reference, written from the definitions in METRICS.md.

It builds the full float64 score matrix, sorts each query's candidates with an
explicit tie rule, and evaluates every metric by its textbook formula over the
sorted relevance vector. Slow and simple on purpose: it shares no code with the
engine.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def dense_scores(Q, G, similarity):
    Q = np.asarray(Q, np.float64)
    G = np.asarray(G, np.float64)
    if similarity == "cosine":
        Q = Q / np.linalg.norm(Q, axis=1, keepdims=True)
        G = G / np.linalg.norm(G, axis=1, keepdims=True)
        return Q @ G.T
    if similarity == "dot":
        return Q @ G.T
    if similarity == "hamming":  # 0/1 codes: minus the number of differing bits
        return -(Q[:, None, :] != G[None, :, :]).sum(-1).astype(np.float64)
    d2 = ((Q[:, None, :] - G[None, :, :]) ** 2).sum(-1)
    return -np.sqrt(d2)


def sorted_relevance(scores_row, rel_row, keep_row, ties, grade_row=None):
    """Relevance of the query's candidates in ranking order (best first); with
    ``grade_row``, the pair (relevance, grades) in that order."""
    s = scores_row[keep_row]
    r = rel_row[keep_row].astype(int)
    g = r if grade_row is None else grade_row[keep_row].astype(int)
    # pessimistic: at equal score, non-relevant (0) first, then lower grades;
    # optimistic: relevant first, then higher grades
    sign = 1 if ties == "pessimistic" else -1
    order = np.lexsort((sign * g, sign * r, -s))
    return r[order] if grade_row is None else (r[order], g[order])


def _dcg(gains):
    return float(np.sum(gains / np.log2(np.arange(2, gains.size + 2))))


def query_metric(name, rel_sorted, grades=None):
    """One query's value of a query-level metric (NaN when it has no relevant item).

    ``grades``: the items' grades in the same order (default: the binary relevance),
    the gains of ``ndcg`` / ``dcg`` (``_exp``: 2^grade - 1; grades <= 0 gain 0); the
    ideal order is that of every ranked item's grade. In ``evaluate`` every ranked
    item is judged and nothing lies below the ranking, so ``bpref``'s judged
    non-relevant items are the ranked non-relevant ones and ``rbp_residual`` is 0."""
    R = int(rel_sorted.sum())
    n = rel_sorted.size
    if R == 0:
        return math.nan
    hits = np.cumsum(rel_sorted)
    ranks = np.flatnonzero(rel_sorted) + 1
    prec_at = hits / np.arange(1, n + 1)
    base, _, param = name.partition("@")
    if base in ("ndcg", "ndcg_exp", "dcg", "dcg_exp"):
        g = np.maximum(np.asarray(rel_sorted if grades is None else grades, float), 0.0)
        gains = 2.0**g - 1.0 if base.endswith("_exp") else g
        K = int(param) if param else n
        dcg = _dcg(gains[:K])
        if base.startswith("dcg"):
            return dcg
        return dcg / _dcg(np.sort(gains)[::-1][:K])
    if base in ("rbp", "rbp_residual"):
        p = float(param)
        return 0.0 if base == "rbp_residual" else float((1 - p) * np.sum(p ** (ranks - 1.0)))
    if name == "bpref":
        N = n - R  # judged non-relevant: every ranked item that is not relevant
        above = ranks - np.arange(1, R + 1)  # non-relevant items ranked above each one
        if N == 0:
            return 1.0
        return float(np.sum(1.0 - np.minimum(above, R) / min(N, R)) / R)
    if base in ("iprec_at_recall", "iprec_11pt"):
        levels = [float(param)] if param else [i / 10 for i in range(11)]
        values = []
        for level in levels:
            c = max(1, math.floor(level * R + 0.9))
            values.append(max((j / ranks[j - 1] for j in range(c, R + 1)), default=0.0))
        return float(np.mean(values))
    if name == "gm_map":
        return query_metric("map", rel_sorted)
    if base == "mrr" and param:
        return 1.0 / ranks[0] if ranks[0] <= int(param) else 0.0
    if name == "map":
        return float(prec_at[ranks - 1].sum() / R)
    if name == "map@R":
        return float(prec_at[:R] @ rel_sorted[:R] / R)
    if name == "r_precision":
        return float(rel_sorted[:R].sum() / R)
    if name == "mrr":
        return 1.0 / ranks[0]
    if name in ("medr", "meanr"):
        return float(ranks[0])
    K = int(param)
    top = rel_sorted[:K]
    H = int(top.sum())
    s = float(prec_at[:K] @ rel_sorted[:K])  # sum of i / r_i over r_i <= K
    if base == "hit_rate":
        return float(H > 0)
    if base == "recall":
        return H / R
    if base == "precision":
        return H / K
    if base == "map":
        return s / H if H else 0.0
    if base == "map_cut":
        return s / R
    if base == "map_capped":
        return s / min(K, R)
    if base == "f1":
        return 2 * H / (K + R)
    if base == "recall_cap":
        return H / min(K, R)
    raise KeyError(name)


def reference(
    Q,
    G,
    q_labels,
    g_labels,
    metrics,
    *,
    q_ids=None,
    g_ids=None,
    relevance=None,
    similarity="cosine",
    ties="pessimistic",
    decimals=None,
    relevance_level=1,
):
    """Per-query values {metric: array} and pair lists (positives, negatives).

    ``relevance``: a boolean matrix, or a matrix of whole grades (relevant at
    ``relevance_level``; ``ndcg`` / ``dcg`` take the grades as gains).

    ``decimals`` rounds the float64 scores, so that mathematically equal scores
    (duplicate vectors) that BLAS rounds differently become exact ties again."""
    S = dense_scores(Q, G, similarity)
    if decimals is not None:
        S = np.round(S, decimals)
    n_q, n_g = S.shape
    grades = None
    if relevance is None:
        rel = np.asarray(q_labels)[:, None] == np.asarray(g_labels)[None, :]
    elif np.asarray(relevance).dtype == bool:
        rel = np.asarray(relevance)
    else:  # a matrix of grades: relevant at relevance_level, the grades as gains
        grades = np.asarray(relevance)
        rel = grades >= relevance_level
    if q_ids is None:
        keep = np.ones((n_q, n_g), bool)
    else:
        keep = np.asarray(q_ids)[:, None] != np.asarray(g_ids)[None, :]
    out = {}
    if grades is None:
        ranked = [(sorted_relevance(S[i], rel[i], keep[i], ties), None) for i in range(n_q)]
    else:
        ranked = [sorted_relevance(S[i], rel[i], keep[i], ties, grades[i]) for i in range(n_q)]
    for name in metrics:
        out[name] = np.array([query_metric(name, r, g) for r, g in ranked])
    pos = S[keep & rel]
    neg = S[keep & ~rel]
    return out, pos, neg


def aggregate(name, values):
    v = values[~np.isnan(values)]
    if name == "medr":
        return float(np.floor(np.median(v - 1)) + 1)
    if name == "gm_map":
        return float(np.exp(np.mean(np.log(np.maximum(v, 1e-5)))))
    return float(np.mean(v))


def pair_reference(pos, neg, name):
    """Pair metrics by sweeping every observed score as a threshold (no shortcut)."""
    P = pos.size
    base, _, param = name.partition("@")
    if base in ("pair_precision", "pair_recall", "pair_f1"):
        t = float(param[2:])
        tp = int((pos >= t).sum())
        fp = int((neg >= t).sum())
        fn = P - tp
        if base == "pair_precision":
            return tp / (tp + fp) if tp + fp else 0.0
        if base == "pair_recall":
            return tp / P
        return 2 * tp / (2 * tp + fp + fn)
    level = float(param)
    # every observed score as a threshold t; the counts of pos >= t and neg >= t for all of
    # them at once (a binary search in each sorted array: the same integers as the sums)
    thresholds = np.unique(np.concatenate([pos, neg]))
    tps = P - np.searchsorted(np.sort(pos), thresholds, side="left")
    fps = neg.size - np.searchsorted(np.sort(neg), thresholds, side="left")
    best = 0.0
    for tp, fp in zip(tps.tolist(), fps.tolist()):
        if tp + fp == 0:
            continue
        precision, recall = tp / (tp + fp), tp / P
        if base == "recall_at_precision" and precision >= level:
            best = max(best, recall)
        if base == "precision_at_recall" and recall >= level:
            best = max(best, precision)
    return best


def pair_reference_by_sums(pos, neg, name):
    """:func:`pair_reference` as first written, one sum per threshold (slow: a check of
    the fast sweep on small data)."""
    base, _, param = name.partition("@")
    level, best = float(param), 0.0
    for t in np.unique(np.concatenate([pos, neg])):
        tp, fp = int((pos >= t).sum()), int((neg >= t).sum())
        if tp + fp == 0:
            continue
        precision, recall = tp / (tp + fp), tp / pos.size
        if base == "recall_at_precision" and precision >= level:
            best = max(best, recall)
        if base == "precision_at_recall" and recall >= level:
            best = max(best, precision)
    return best


def image_text_reference(
    images, captions, caption_image, ties="pessimistic", ks=(), similarity="cosine", decimals=None
):
    """Every image-text metric (i2t / t2i recall at 1, 5, 10 and ``ks``, rsum,
    mean_recall, medr, meanr) from the full float64 score matrix, sorted per query (best
    first); ``decimals`` as in :func:`reference`."""
    S = dense_scores(images, captions, similarity)  # images x captions
    if decimals is not None:
        S = np.round(S, decimals)
    n_i, n_c = S.shape

    def first_rank(scores, relevant):
        # pessimistic: at equal score, non-relevant items first
        secondary = relevant.astype(int) if ties == "pessimistic" else -relevant.astype(int)
        order = np.lexsort((secondary, -scores))
        return int(np.flatnonzero(relevant[order])[0]) + 1

    i2t = np.array([first_rank(S[i], caption_image == i) for i in range(n_i)], float)
    t2i = np.array(
        [first_rank(S[:, j], np.arange(n_i) == caption_image[j]) for j in range(n_c)], float
    )
    out = {}
    for k in sorted({1, 5, 10, *ks}):
        out[f"i2t_recall@{k}"] = float(np.mean(i2t <= k))
        out[f"t2i_recall@{k}"] = float(np.mean(t2i <= k))
    out["rsum"] = 100 * sum(out[f"{d}_recall@{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10))
    out["mean_recall"] = out["rsum"] / 6
    out["i2t_medr"] = math.floor(np.median(i2t - 1)) + 1
    out["t2i_medr"] = math.floor(np.median(t2i - 1)) + 1
    out["i2t_meanr"] = float(i2t.mean())
    out["t2i_meanr"] = float(t2i.mean())
    return out


def grouped_reference(
    Q,
    G,
    q_labels,
    g_labels,
    k,
    *,
    S,
    seed=0,
    repeats=1,
    confidence=0.95,
    q_ids=None,
    g_ids=None,
    similarity="cosine",
    ties="pessimistic",
):
    """Grouped Recall@k by the definition (METRICS.md; the module docstring of
    ``engine/_grouped.py``): labels encoded in sorted order, ``default_rng(seed)``
    permutations of the codes cut into groups of S, ``hit_rate@k`` by :func:`reference`
    inside each group, the mean over groups and a Student t interval clipped to [0, 1];
    G=None means leave-one-out over Q."""
    loo = G is None
    q_labels = np.asarray(q_labels)
    n_q = q_labels.size
    if loo:
        G, g_labels = Q, q_labels
        q_ids = np.arange(n_q) if q_ids is None else np.asarray(q_ids)
        g_ids = q_ids
    g_labels = np.asarray(g_labels)
    values, codes = np.unique(np.concatenate([q_labels, g_labels]), return_inverse=True)
    codes = codes.ravel()
    qc, gc = codes[:n_q], codes[n_q:]
    L = values.size
    r = L // S
    rows, ses, reps = [], [], []
    for rep in range(repeats):
        perm = np.random.default_rng(seed + rep).permutation(np.arange(L))
        groups = perm[: r * S].reshape(r, S)
        dropped = np.sort(perm[r * S :])
        per_query = np.full(n_q, np.nan)
        group_of_query = np.full(n_q, -1)
        gvals = []
        for gi, grp in enumerate(groups):
            mq, mg = np.isin(qc, grp), np.isin(gc, grp)
            ref, _, _ = reference(
                Q[mq],
                G[mg],
                qc[mq],
                gc[mg],
                [f"hit_rate@{k}"],
                q_ids=None if q_ids is None else np.asarray(q_ids)[mq],
                g_ids=None if g_ids is None else np.asarray(g_ids)[mg],
                similarity=similarity,
                ties=ties,
            )
            h = ref[f"hit_rate@{k}"]
            per_query[mq] = h
            group_of_query[mq] = gi
            gvals.append(float(np.mean(h[~np.isnan(h)])))
        gvals = np.array(gvals)
        rows.append(gvals)
        ses.append(gvals.std(ddof=1) / math.sqrt(r))
        reps.append(
            dict(
                groups=groups,
                dropped=values[dropped],
                per_query=per_query,
                group_of_query=group_of_query,
            )
        )
    value = float(np.mean([row.mean() for row in rows]))
    se = float(np.mean(ses))
    half = stats.t.ppf((1 + confidence) / 2, r - 1) * se
    # the interval is clipped to [0, 1], the metric's range
    return dict(
        value=value,
        se=se,
        low=max(0.0, value - half),
        high=min(1.0, value + half),
        group_values=np.vstack(rows),
        group_std=float(rows[0].std(ddof=1)),
        r=r,
        values=values,
        **reps[0],
    )
