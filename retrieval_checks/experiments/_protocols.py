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
from ..options import DEFAULTS, check_option
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
    ``n_resamples`` go to the bootstrap of non-grouped metrics (classes by default).

    Parameters
    ----------
    embeddings:
        (n x d) embeddings of one test set.
    labels:
        One class per row; at least 4 classes.
    metric:
        The metric compared (default ``"grouped_recall@1"``).
    seed:
        Of the split into halves and of the bootstrap (default 0).
    confidence:
        Of the interval (default 0.95).
    cluster:
        The bootstrap's units for non-grouped metrics (default ``"auto"``: classes).
    n_resamples:
        Bootstrap resamples (default 2000).
    **evaluate_kwargs:
        Passed to :func:`~retrieval_checks.evaluate` for each half (``group_size``,
        ``similarity``, ...).

    Returns
    -------
    Gap
        metric(half A) - metric(half B), labelled ``("half A", "half B")``, with its
        interval.

    Raises
    ------
    InputError
        Fewer than 4 classes, and the errors of :func:`~retrieval_checks.evaluate` and
        :func:`~retrieval_checks.generalization_gap` (a metric without a gap...).
    MetricNameError
        An unknown metric name.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(40), 3)  # 40 classes of 3 items
    >>> x = rng.normal(size=(40, 8))[y] + 0.7 * rng.normal(size=(120, 8))
    >>> d = rc.split_difference(x, y, metric="map")
    >>> print(d)
    map gap (half A - half B) = -0.1380 [-0.2943, +0.0104] (95% percentile bootstrap over classes; half A 0.6112 on 20 classes, half B 0.7491 on 20 classes)
    >>> d.low <= 0 <= d.high  # one population: the interval should hold 0
    True
    """
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


def _check_groups(metrics, counts, evaluate_kwargs) -> None:
    """Grouped recall needs two groups of ``group_size`` labels in the smallest subset:
    said before any subset is evaluated, naming the class count and where the group size
    came from (evaluate's default, which the caller did not write)."""
    if not any(str(m).startswith("grouped_recall") for m in metrics):
        return
    given = "group_size" in evaluate_kwargs
    size = check_option(
        "group_size", evaluate_kwargs["group_size"] if given else DEFAULTS["group_size"]
    )
    if 2 * size > counts[0]:
        where = f"group_size={size}" if given else f"group_size is {size} (evaluate's default)"
        raise InputError(
            f"class_counts: grouped recall needs at least two groups of group_size labels in each "
            f"subset, and the smallest subset has {counts[0]} classes while {where}; pass "
            f"group_size={max(counts[0] // 2, 2)} or less, or class counts of {2 * size} or more."
        )


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
    Recall@K (``hit_rate@K``) falls as classes are added; grouped recall does not.

    Parameters
    ----------
    embeddings:
        (n x d) embeddings.
    labels:
        One class per row.
    class_counts:
        The numbers of classes to sample, each in [2, number of classes].
    metrics:
        The metrics (default ``("hit_rate@1", "grouped_recall@1")``).
    trials:
        Random subsets per class count (default 3).
    seed:
        Of the subsets and the bootstraps (default 0).
    confidence:
        Of the intervals (default 0.95).
    n_resamples:
        Bootstrap resamples per interval (default 500).
    **evaluate_kwargs:
        Passed to :func:`~retrieval_checks.evaluate` (``group_size``, ...).

    Returns
    -------
    SweepTable
        One row per (class count, trial, metric): ``n_classes``, ``trial``,
        ``metric``, ``value``, ``low``, ``high``, ``n_items``.

    Raises
    ------
    InputError
        Class counts outside [2, number of classes] or none, an invalid
        ``confidence``, and the errors of :func:`~retrieval_checks.evaluate`.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(40), 3)  # 40 classes of 3 items
    >>> x = rng.normal(size=(40, 8))[y] + 0.7 * rng.normal(size=(120, 8))
    >>> table = rc.class_count_sweep(x, y, class_counts=[5, 40], metrics=["hit_rate@1"], trials=2)
    >>> [(r["n_classes"], round(r["value"], 4)) for r in table.summary()]
    [(5, 0.8333), (40, 0.5333)]
    """
    check_option("confidence", confidence)
    y = as_numpy(labels, "labels")
    uniq = np.unique(y)
    counts = sorted(int(c) for c in class_counts)
    if not counts or counts[0] < 2 or counts[-1] > uniq.size:
        raise InputError(
            f"class_counts must lie in [2, {uniq.size}] (the number of classes), got {counts}."
        )
    _check_groups(metrics, counts, evaluate_kwargs)
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
