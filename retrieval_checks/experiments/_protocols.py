"""Experiment protocols that run evaluations, then statistics on their results.

- :func:`split_difference`: the seed paper's check of Table 1: split one test set into
  two disjoint random halves of its classes and report the difference with its
  interval (zero on one population).
- :func:`class_count_sweep`: a metric on random subsets with a growing number of
  classes (the paper's Figure 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arrays import as_numpy
from ..engine import evaluate
from ..errors import InputError
from ..options import check_option
from ..stats._gaps import Gap, generalization_gap
from ..stats._intervals import bootstrap_interval
from ..stats._sweep import SweepTable

__all__ = ["split_difference", "class_count_sweep"]


def split_difference(
    embeddings,
    labels,
    *,
    metric: str = "grouped_recall@1",
    seed: int = 0,
    confidence: float = 0.95,
    cluster: str = "auto",
    n_resamples: int = 2000,
    **evaluate_kwargs: Any,
) -> Gap:
    """Table 1 of the seed paper: split the classes of one test set into two disjoint
    random halves (seeded), evaluate each half leave-one-out, and report
    metric(half A) - metric(half B) with its interval (Welch for grouped recall,
    bootstrap otherwise). On one population the true difference is zero, so the
    interval should contain 0 about ``confidence`` of the time. ``cluster`` and
    ``n_resamples`` go to the bootstrap of non-grouped metrics (classes by default)."""
    y = as_numpy(labels, "labels")
    uniq = np.unique(y)
    if uniq.size < 4:
        raise InputError(
            f"split_difference needs at least 4 classes to split in two, got {uniq.size}."
        )
    perm = np.random.default_rng(seed).permutation(uniq)
    half_a = np.isin(y, perm[: uniq.size // 2])
    x = embeddings
    res = []
    for mask in (half_a, ~half_a):
        idx = np.flatnonzero(mask)
        res.append(
            evaluate(
                x[idx],
                query_labels=y[idx],
                metrics=[metric],
                confidence=confidence,
                **evaluate_kwargs,
            )
        )
    return generalization_gap(
        res[0],
        res[1],
        metric,
        confidence=confidence,
        cluster=cluster,
        n_resamples=n_resamples,
        seed=seed,
        labels=("half A", "half B"),
        _ordered=False,
    )  # two halves of one population: the sign means nothing


def class_count_sweep(
    embeddings,
    labels,
    *,
    class_counts,
    metrics=("hit_rate@1", "grouped_recall@1"),
    trials: int = 3,
    seed: int = 0,
    confidence: float = 0.95,
    n_resamples: int = 500,
    **evaluate_kwargs: Any,
) -> SweepTable:
    """Each metric on random subsets of ``n`` classes for every ``n`` in
    ``class_counts`` (leave-one-out, ``trials`` subsets each, seeded). Grouped recall
    carries its own interval; other metrics get a class-cluster percentile bootstrap.
    Recall@K (``hit_rate@K``) falls as classes are added; grouped recall does not."""
    check_option("confidence", confidence)
    y = as_numpy(labels, "labels")
    uniq = np.unique(y)
    counts = sorted(int(c) for c in class_counts)
    if not counts or counts[0] < 2 or counts[-1] > uniq.size:
        raise InputError(
            f"class_counts must lie in [2, {uniq.size}] (the number of classes), got {counts}."
        )
    rng = np.random.default_rng(seed)
    table = SweepTable()
    for nc in counts:
        for t in range(trials):
            chosen = rng.choice(uniq, size=nc, replace=False)
            idx = np.flatnonzero(np.isin(y, chosen))
            res = evaluate(
                embeddings[idx],
                query_labels=y[idx],
                metrics=list(metrics),
                confidence=confidence,
                **evaluate_kwargs,
            )
            for m in res:
                if m in res.intervals:
                    low, high = res.intervals[m]
                else:
                    iv = bootstrap_interval(
                        res,
                        m,
                        confidence=confidence,
                        n_resamples=n_resamples,
                        method="percentile",
                        cluster="label",
                        seed=seed + t,
                    )
                    low, high = iv.low, iv.high
                table.rows.append(
                    {
                        "n_classes": nc,
                        "trial": t,
                        "metric": m,
                        "value": res[m],
                        "low": low,
                        "high": high,
                        "n_items": int(idx.size),
                    }
                )
    return table
