"""A dense brute-force reference, written from the definitions in METRICS.md.

It builds the full float64 score matrix, sorts each query's candidates with an
explicit tie rule, and evaluates every metric by its textbook formula over the
sorted relevance vector. Slow and simple on purpose: it shares no code with the
engine.
"""

from __future__ import annotations

import math

import numpy as np


def dense_scores(Q, G, similarity):
    Q = np.asarray(Q, np.float64)
    G = np.asarray(G, np.float64)
    if similarity == "cosine":
        Q = Q / np.linalg.norm(Q, axis=1, keepdims=True)
        G = G / np.linalg.norm(G, axis=1, keepdims=True)
        return Q @ G.T
    if similarity == "dot":
        return Q @ G.T
    d2 = ((Q[:, None, :] - G[None, :, :]) ** 2).sum(-1)
    return -np.sqrt(d2)


def sorted_relevance(scores_row, rel_row, keep_row, ties):
    """Relevance of the query's candidates in ranking order (best first)."""
    s = scores_row[keep_row]
    r = rel_row[keep_row].astype(int)
    # pessimistic: at equal score, non-relevant (0) first; optimistic: relevant first
    secondary = r if ties == "pessimistic" else -r
    order = np.lexsort((secondary, -s))
    return r[order]


def query_metric(name, rel_sorted):
    """One query's value of a query-level metric (NaN when it has no relevant item)."""
    R = int(rel_sorted.sum())
    n = rel_sorted.size
    if R == 0:
        return math.nan
    hits = np.cumsum(rel_sorted)
    ranks = np.flatnonzero(rel_sorted) + 1
    prec_at = hits / np.arange(1, n + 1)
    base, _, param = name.partition("@")
    if name == "map":
        return float(sum(prec_at[r - 1] for r in ranks) / R)
    if name == "map@R":
        return float(sum(prec_at[i] * rel_sorted[i] for i in range(R)) / R)
    if name == "r_precision":
        return float(rel_sorted[:R].sum() / R)
    if name == "mrr":
        return 1.0 / ranks[0]
    if name in ("medr", "meanr"):
        return float(ranks[0])
    K = int(param)
    top = rel_sorted[:K]
    H = int(top.sum())
    s = float(sum(prec_at[i] * rel_sorted[i] for i in range(min(K, n))))
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
):
    """Per-query values {metric: array} and pair lists (positives, negatives).

    ``decimals`` rounds the float64 scores, so that mathematically equal scores
    (duplicate vectors) that BLAS rounds differently become exact ties again."""
    S = dense_scores(Q, G, similarity)
    if decimals is not None:
        S = np.round(S, decimals)
    n_q, n_g = S.shape
    if relevance is None:
        rel = np.asarray(q_labels)[:, None] == np.asarray(g_labels)[None, :]
    else:
        rel = relevance
    if q_ids is None:
        keep = np.ones((n_q, n_g), bool)
    else:
        keep = np.asarray(q_ids)[:, None] != np.asarray(g_ids)[None, :]
    out = {}
    for name in metrics:
        out[name] = np.array(
            [query_metric(name, sorted_relevance(S[i], rel[i], keep[i], ties)) for i in range(n_q)]
        )
    pos = S[keep & rel]
    neg = S[keep & ~rel]
    return out, pos, neg


def aggregate(name, values):
    v = values[~np.isnan(values)]
    if name == "medr":
        return float(np.floor(np.median(v - 1)) + 1)
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
