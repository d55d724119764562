"""Paired comparisons of two models evaluated on the same queries (or groups).

Units are classes (a cluster-robust standard error, since queries of a class move
together), queries, or the groups of a shared grouped-recall partition. The t method
gives a CLT interval and p-values on the paired differences; the bootstrap method a
percentile interval and p-values from the bootstrap distribution. Pure functions of
results: nothing is re-ranked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .._lazy import t_cdf, t_ppf, t_sf
from ..engine._result import refuse_vacuous
from ..errors import InputError
from ..metrics._measurement import value_options
from ..metrics._names import parse_metric
from ..metrics._ranking import aggregate
from ..options import DEFAULTS, check_option
from ._intervals import (
    check_resamples,
    mean_rows,
    medr_rows,
    resample_stats,
    resolve_cluster,
    result_setting,
)
from ._power import spread

__all__ = ["Comparison", "compare"]


@dataclass(frozen=True)
class Comparison:
    """Paired comparison: ``difference`` = candidate - baseline on the same units.

    ``p_value`` is two-sided (H0: no difference); ``p_value_worse`` is one-sided for
    H0 "the candidate is not worse" against "the candidate is worse" (for ``medr`` and
    ``meanr`` worse means higher).

    Parameters
    ----------
    metric:
        The metric compared.
    candidate, baseline:
        The two models' values.
    difference:
        ``candidate - baseline`` (over the paired units).
    low, high:
        The difference's interval.
    confidence:
        The interval's confidence.
    p_value:
        Two-sided p-value of "no difference".
    p_value_worse:
        One-sided p-value of "the candidate is not worse".
    method:
        How the interval and p-values were computed (paired t, or bootstrap).
    n:
        The number of paired units.
    unit:
        What a unit is: ``"classes"``, ``"queries"`` or ``"groups"``.
    higher_is_better:
        The metric's direction.
    n_used, n_skipped:
        Queries paired (used by both) and skipped (no relevant item); None for grouped
        recall, whose units are groups.
    se, dof:
        The difference's standard error and the t test's degrees of freedom (None for
        the bootstrap): what the power of a gate on this comparison is computed from.

    Raises
    ------
    None
        A plain frozen record: :func:`~retrieval_checks.compare` checks its inputs.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(10), 3)
    >>> x = rng.normal(size=(10, 8))[y] + 0.3 * rng.normal(size=(30, 8))
    >>> baseline = rc.evaluate(x, query_labels=y, metrics=["map"])
    >>> candidate = rc.evaluate(x + 0.01 * rng.normal(size=x.shape), query_labels=y, metrics=["map"])
    >>> c = rc.compare(candidate, baseline, "map")
    >>> round(c.difference, 4), round(c.low, 4), round(c.high, 4), c.n, c.unit
    (0.0056, -0.015, 0.0261, 10, 'classes')
    >>> round(c.p_value_worse, 3), c.n_used, c.dof
    (0.722, 30, 9)
    """

    metric: str
    candidate: float
    baseline: float
    difference: float
    low: float
    high: float
    confidence: float
    p_value: float
    p_value_worse: float
    method: str
    n: int
    unit: str
    higher_is_better: bool
    #: queries paired (used by both) and skipped (no relevant item; the same queries on
    #: both sides); None for grouped recall, whose units are groups
    n_used: int | None = None
    n_skipped: int | None = None
    #: the difference's standard error and the t test's degrees of freedom (None for the
    #: bootstrap, whose standard error is the bootstrap distribution's): what the power of
    #: a gate on this comparison is computed from
    se: float | None = None
    dof: int | None = None

    def __str__(self) -> str:
        return (
            f"{self.metric}: candidate {self.candidate:.4f} vs baseline {self.baseline:.4f}, "
            f"difference {self.difference:+.4f} [{self.low:+.4f}, {self.high:+.4f}] "
            f"({self.confidence:.0%} {self.method}, n={self.n} {self.unit}, p={self.p_value:.3g})"
        )


@dataclass(frozen=True)
class _Pairs:
    """The paired units of a comparison: per-unit values of each side (a, b), the
    cluster of each unit (None: units are independent), the metric values and the
    unit's name."""

    a: np.ndarray
    b: np.ndarray
    clusters: np.ndarray | None
    candidate: float
    baseline: float
    unit: str


def _same_options(candidate, baseline, name: str) -> None:
    """Both results computed under the same options that change what a metric measures
    (ties, relevance_level, empty_queries, ...): a paired difference between two
    different quantities would be read as a difference between the models."""
    a, b = value_options(candidate.config), value_options(baseline.config)
    differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    if differ:
        shown = "; ".join(
            f"{k}: candidate {a.get(k, 'unset')!r}, baseline {b.get(k, 'unset')!r}" for k in differ
        )
        raise InputError(
            f"{name}: the results were computed under different options ({shown}), so their values "
            "measure different things; evaluate both with the same options."
        )


def compare(
    candidate,
    baseline,
    metric: str,
    *,
    confidence: float | None = None,
    method: str = "t",
    cluster: str = "auto",
    n_resamples: int = 2000,
    seed: int | None = None,
) -> Comparison:
    """Paired comparison of two models evaluated on the same queries (same order).

    Units are classes (``cluster="label"``, and ``"auto"`` when labels exist: a
    cluster-robust standard error, since queries of a class move together), queries
    (``cluster="query"``), or, for
    ``grouped_recall@K``, the groups of the shared partition (same ``group_seed`` and
    ``group_size``). ``method="t"``: CLT interval and p-values on the paired
    differences (Student t); ``method="bootstrap"``: percentile bootstrap of the mean
    difference, p-values from the bootstrap distribution. ``confidence`` and ``seed``
    default to the results' own (``evaluate(confidence=..., seed=...)``), else 0.95 and 0.

    Parameters
    ----------
    candidate, baseline:
        Results of :func:`~retrieval_checks.evaluate` (or
        :func:`~retrieval_checks.evaluate_run`) of the two models on the same queries,
        in the same order, with the same labels (or relevance), ids and gallery.
    metric:
        The metric compared (a canonical name or an alias); both results must hold it.
    confidence:
        Of the interval (default: the results' own, else 0.95).
    method:
        ``"t"`` (default) or ``"bootstrap"`` (always used for ``medr``).
    cluster:
        ``"auto"`` (default: classes when the results have labels, else queries),
        ``"label"`` or ``"query"``.
    n_resamples:
        Bootstrap resamples (default 2000).
    seed:
        Of the bootstrap (default: the results' own, else 0).

    Returns
    -------
    Comparison
        The difference (candidate - baseline), its interval, the two-sided and the
        one-sided ("worse") p-values, and the paired units.

    Raises
    ------
    InputError
        Not evaluation results, a metric either result lacks, results on different
        queries (counts, labels, ids, gallery or relevant counts differ), fewer than 2
        paired units, an unknown ``method`` or ``cluster``, ``gm_map`` (no paired
        comparison), an invalid ``confidence``, ``seed`` or ``n_resamples``.
    MetricNameError
        An unknown metric name.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(10), 3)
    >>> x = rng.normal(size=(10, 8))[y] + 0.3 * rng.normal(size=(30, 8))
    >>> baseline = rc.evaluate(x, query_labels=y, metrics=["map"])
    >>> candidate = rc.evaluate(x + 0.01 * rng.normal(size=x.shape), query_labels=y, metrics=["map"])
    >>> print(rc.compare(candidate, baseline, "map"))
    map: candidate 0.9681 vs baseline 0.9625, difference +0.0056 [-0.0150, +0.0261] (95% paired t over classes (cluster-robust), n=10 classes, p=0.555)
    """
    for side, res in (("candidate", candidate), ("baseline", baseline)):
        refuse_vacuous(res, f"compare, the {side}")
    sides = ("candidate", "baseline")
    confidence = result_setting(
        candidate, "confidence", confidence, DEFAULTS["confidence"], others=(baseline,), sides=sides
    )
    seed = result_setting(
        candidate, "seed", seed, DEFAULTS["seed"], others=(baseline,), sides=sides
    )
    check_option("confidence", confidence)
    check_option("seed", seed)
    if not isinstance(method, str) or method not in ("t", "bootstrap"):
        raise InputError(f"method={method!r}: use 't' or 'bootstrap'.")
    spec = parse_metric(metric)
    if spec.family == "gm_map":  # the registry's compare=False: paired means would be map's
        raise InputError(
            "gm_map has no paired comparison: a geometric mean is not a mean of per-query "
            "differences; compare 'map' (the same APs, averaged), or gate gm_map's value."
        )
    if not isinstance(cluster, str) or cluster not in ("auto", "query", "label"):
        raise InputError(f"cluster={cluster!r}: use 'auto', 'query' or 'label'.")
    check_resamples(n_resamples)
    for side, res in (("candidate", candidate), ("baseline", baseline)):
        if not hasattr(res, "per_query") or not hasattr(res, "grouped"):
            raise InputError(f"{side} must be an EvaluationResult, got {type(res).__name__}.")
        if spec.name not in res:
            raise InputError(
                f"{spec.name} was not computed for the {side}; computed: {', '.join(res)}."
            )
    if candidate.n_queries != baseline.n_queries:
        raise InputError(
            f"The candidate was evaluated on {candidate.n_queries} queries and the baseline on "
            f"{baseline.n_queries}; a paired comparison needs the same queries in the same order."
        )
    same_queries(candidate, baseline)
    _same_options(candidate, baseline, spec.name)
    if spec.kind == "grouped":
        pairs = _group_pairs(spec, candidate.grouped[spec.name], baseline.grouped[spec.name])
    else:
        pairs = query_pairs(spec, candidate, baseline, cluster)
    n = pairs.a.size
    if n < 2:
        raise InputError(f"{spec.name}: {n} paired units; a comparison needs at least 2.")
    if spec.family == "medr" or method == "bootstrap":
        check_resamples(n_resamples)
        out = _bootstrap_comparison(spec, pairs, confidence, n_resamples, seed)
    else:
        out = _t_comparison(spec, pairs, confidence)
    if spec.kind == "grouped":
        return out
    nan = int(np.isnan(candidate.per_query[spec.name]).sum())
    outside = int(getattr(candidate, "n_outside", 0) or 0)  # queries="run": not skipped
    return replace(out, n_used=int(candidate.n_queries) - nan, n_skipped=nan - outside)


def _fingerprint(res) -> dict:
    if hasattr(res, "query_fingerprint"):
        return res.query_fingerprint()
    labels = None
    if (
        getattr(res, "query_label_codes", None) is not None
        and getattr(res, "label_values", None) is not None
    ):
        labels = np.asarray(res.label_values)[res.query_label_codes]
    return {
        "n_queries": res.n_queries,
        "n_gallery": getattr(res, "config", {}).get("n_gallery"),
        "n_relevant": getattr(res, "n_relevant", None),
        "labels": labels,
        "ids": getattr(res, "query_ids", None),
    }


def _first_difference(a, b) -> int | None:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return 0
    if a.dtype.kind != b.dtype.kind and not (a.dtype.kind in "biuf" and b.dtype.kind in "biuf"):
        return 0  # 1 and "1" are different labels
    diff = np.flatnonzero(a != b)
    return int(diff[0]) if diff.size else None


def same_queries(candidate, baseline) -> None:
    """Refuse two results that were not computed on the same queries in the same order:
    their labels, ids, gallery size or relevant counts per query (which do not depend on
    the model) differ. Equal query counts alone would pair query i of one set with an
    unrelated query i of the other and report a difference of noise."""
    fa, fb = _fingerprint(candidate), _fingerprint(baseline)
    fix = (
        "evaluate both models on the same queries, in the same order, with the same labels (or relevance), "
        "ids and gallery"
    )
    if (
        fa["n_gallery"] is not None
        and fb["n_gallery"] is not None
        and fa["n_gallery"] != fb["n_gallery"]
    ):
        raise InputError(
            f"The candidate ranked a gallery of {fa['n_gallery']} items and the baseline one of "
            f"{fb['n_gallery']}: these are not the same retrieval task; {fix}."
        )
    for key, what in (("labels", "label"), ("ids", "id")):
        a, b = fa[key], fb[key]
        if a is None or b is None:
            continue
        i = _first_difference(a, b)
        if i is not None:
            show = lambda v: v.item() if hasattr(v, "item") else v  # noqa: E731
            raise InputError(
                f"The two results are not on the same queries: query {i} has {what} {show(np.asarray(a)[i])!r} for "
                f"the candidate but {show(np.asarray(b)[i])!r} for the baseline (query {what}s differ); {fix}."
            )
    a, b = fa["n_relevant"], fb["n_relevant"]
    if a is not None and b is not None:
        i = _first_difference(a, b)
        if i is not None:
            raise InputError(
                f"The two results are not on the same queries: query {i} has {int(np.asarray(a)[i])} relevant "
                f"gallery items for the candidate but {int(np.asarray(b)[i])} for the baseline (relevance differs; "
                f"it does not depend on the model); {fix}."
            )


def _group_pairs(spec, g1, g2) -> _Pairs:
    if (g1.group_size, g1.seed, g1.n_groups) != (
        g2.group_size,
        g2.seed,
        g2.n_groups,
    ) or not np.array_equal(g1.group_of_query, g2.group_of_query):
        raise InputError(
            f"{spec.name}: the two results use different label partitions; evaluate both with the same "
            "labels, group_size and group_seed."
        )
    return _Pairs(
        g1.group_values.mean(axis=0),
        g2.group_values.mean(axis=0),
        None,
        g1.value,
        g2.value,
        "groups",
    )


def query_pairs(spec, candidate, baseline, cluster) -> _Pairs:
    if spec.name not in candidate.per_query:
        raise InputError(
            f"{spec.name} is a global metric; a paired comparison needs per-query values."
        )
    a, b = candidate.per_query[spec.name], baseline.per_query[spec.name]
    if not np.array_equal(~np.isnan(a), ~np.isnan(b)):
        raise InputError(
            "The two results skip different queries (different labels or relevance?); a paired comparison "
            "needs the same queries."
        )
    both = ~np.isnan(a) & ~np.isnan(b)
    clusters = None
    if resolve_cluster(cluster, candidate) == "label":
        clusters = candidate.query_label_codes[both]
    return _Pairs(
        a[both],
        b[both],
        clusters,
        aggregate(spec, a),
        aggregate(spec, b),
        "queries" if clusters is None else "classes",
    )


def _medr_cluster_bootstrap(a, b, clusters, n_resamples, rng) -> np.ndarray:
    """medr(a) - medr(b) over resamples of whole classes, each with all its paired queries."""
    _, inv = np.unique(clusters, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(inv.max() + 2))
    members = [order[bounds[c] : bounds[c + 1]] for c in range(bounds.size - 1)]
    boot = np.empty(n_resamples)
    for r in range(n_resamples):
        pick = np.concatenate([members[c] for c in rng.integers(0, len(members), len(members))])
        boot[r] = medr_rows(a[pick][None, :])[0] - medr_rows(b[pick][None, :])[0]
    return boot


def _bootstrap_comparison(spec, pairs: _Pairs, confidence, n_resamples, seed) -> Comparison:
    a, b, clusters = pairs.a, pairs.b, pairs.clusters
    n = a.size
    rng = np.random.default_rng(seed)
    if spec.family != "medr":
        boot = resample_stats(a - b, clusters, mean_rows, n_resamples, rng)
    elif clusters is None:
        idx = rng.integers(0, n, size=(n_resamples, n))
        boot = medr_rows(a[idx]) - medr_rows(b[idx])
    else:
        boot = _medr_cluster_bootstrap(a, b, clusters, n_resamples, rng)
    sign = 1.0 if spec.higher_is_better else -1.0
    low, high = (float(v) for v in np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2]))
    p_worse = float(np.mean(sign * boot >= 0))  # bootstrap support for "not worse"
    p_two = float(min(1.0, 2 * min(np.mean(boot >= 0), np.mean(boot <= 0))))
    n_units = n if clusters is None else int(np.unique(clusters).size)
    unit = pairs.unit
    return Comparison(
        spec.name,
        pairs.candidate,
        pairs.baseline,
        pairs.candidate - pairs.baseline,
        low,
        high,
        confidence,
        p_two,
        p_worse,
        f"paired percentile bootstrap over {unit}",
        n_units,
        unit,
        spec.higher_is_better,
        se=float(np.std(boot, ddof=1)),
    )


def _t_comparison(spec, pairs: _Pairs, confidence) -> Comparison:
    d = pairs.a - pairs.b
    n = d.size
    mean = float(d.mean())
    if pairs.clusters is None:
        se, dof, n_units = float(d.std(ddof=1) / math.sqrt(n)), n - 1, n
    else:
        _, inv = np.unique(pairs.clusters, return_inverse=True)
        L = int(inv.max()) + 1
        resid = np.bincount(inv, weights=d - mean, minlength=L)
        se, dof, n_units = math.sqrt(L / (L - 1) * np.sum(resid**2)) / n, L - 1, L
    se = spread(se, max(abs(mean), float(np.max(np.abs(d)))))
    sign = 1.0 if spec.higher_is_better else -1.0
    if se == 0:
        low = high = mean
        p_two = 1.0 if mean == 0 else 0.0
        p_worse = 1.0 if sign * mean >= 0 else 0.0
    else:
        half = float(t_ppf((1 + confidence) / 2, dof)) * se
        low, high = mean - half, mean + half
        tstat = mean / se
        p_two = float(2 * t_sf(abs(tstat), dof))
        p_worse = float(t_cdf(sign * tstat, dof))  # small when the candidate is worse
    meth = f"paired t over {pairs.unit}" + (
        " (cluster-robust)" if pairs.clusters is not None else ""
    )
    diff = pairs.candidate - pairs.baseline if spec.kind == "grouped" else mean
    return Comparison(
        spec.name,
        pairs.candidate,
        pairs.baseline,
        diff,
        low,
        high,
        confidence,
        p_two,
        p_worse,
        meth,
        n_units,
        pairs.unit,
        spec.higher_is_better,
        se=float(se),
        dof=int(dof),
    )
