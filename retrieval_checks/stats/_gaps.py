"""Generalization gaps: metric(train) - metric(test) with an interval.

- two accuracies (:class:`~retrieval_checks.AccuracyResult`): Newcombe's score
  interval for a difference of independent proportions;
- ``grouped_recall@K``: Welch's t interval from the two independent samples of group
  values;
- any other per-query metric: an independent two-sample percentile bootstrap of the
  difference, resampling classes (or queries).

Pure functions of results: nothing is re-ranked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .._lazy import t_ppf
from .._suggest import shown
from ..engine._result import refuse_vacuous
from ..errors import InputError
from ..metrics._accuracy import AccuracyResult
from ..metrics._names import parse_metric
from ..metrics._ranking import aggregate
from ..metrics._registry import family
from ..options import DEFAULTS, check_option
from ._intervals import (
    UNIT_NAMES,
    check_resamples,
    few_units_note,
    mean_rows,
    medr_rows,
    newcombe_interval,
    per_query_values,
    resample_stats,
    resolve_cluster,
    result_setting,
    warn_notes,
)

__all__ = ["Gap", "generalization_gap", "gap_notes"]


@dataclass(frozen=True)
class Gap:
    """``value`` = ``first_value`` - ``second_value`` (train - test for a gap).

    Built by :func:`~retrieval_checks.generalization_gap` and
    :func:`~retrieval_checks.classification_gap`; gated by
    :func:`~retrieval_checks.assert_gap_below`.

    Parameters
    ----------
    metric:
        The metric.
    value:
        ``first_value - second_value``.
    low, high:
        The interval's bounds.
    confidence:
        The interval's confidence.
    method:
        How the interval was made.
    first_value, second_value:
        The two sides' values (train, test).
    n_first, n_second:
        The two sides' sample sizes, in ``unit``.
    unit:
        What the sample sizes count (``"classes"``, ``"queries"``, ``"groups"``, ...).
    labels:
        The two sides' names (default ``("train", "test")``).
    n_used, n_skipped:
        Queries used and skipped (no relevant item) on each side, (first, second); None
        where the gap is not over queries (accuracy, grouped recall's groups).
    notes:
        What the reader should know (the sides look swapped, an interval on too few
        units...), issued as an :class:`~retrieval_checks.errors.IntervalWarning` when
        the gap was computed.

    Raises
    ------
    None
        A plain frozen record; the functions that build it check their inputs.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> centres, y = rng.normal(size=(20, 8)), np.repeat(np.arange(20), 3)
    >>> train = rc.evaluate(centres[y] + 0.4 * rng.normal(size=(60, 8)), query_labels=y, metrics=["map"])
    >>> test = rc.evaluate(centres[y] + 0.6 * rng.normal(size=(60, 8)), query_labels=y, metrics=["map"])
    >>> gap = rc.generalization_gap(train, test, "map")
    >>> round(gap.value, 4), round(gap.high, 4), gap.n_used, gap.labels
    (0.1999, 0.3197, (60, 60), ('train', 'test'))
    >>> rc.assert_gap_below(gap, 0.35)
    """

    metric: str
    value: float
    low: float
    high: float
    confidence: float
    method: str
    first_value: float
    second_value: float
    n_first: int
    n_second: int
    unit: str
    labels: tuple[str, str] = ("train", "test")
    #: queries used and skipped (no relevant item) on each side, (first, second); None
    #: where the gap is not over queries (accuracy, grouped recall's groups)
    n_used: tuple[int, int] | None = None
    n_skipped: tuple[int, int] | None = None
    #: what the reader should know (:func:`gap_notes`: the sides look swapped, an
    #: interval on too few units...), issued as :class:`~retrieval_checks.errors.IntervalWarning`
    #: when the gap was computed
    notes: tuple[str, ...] = ()

    def __str__(self) -> str:
        a, b = self.labels
        return (
            f"{self.metric} gap ({a} - {b}) = {self.value:+.4f} [{self.low:+.4f}, {self.high:+.4f}] "
            f"({self.confidence:.0%} {self.method}; {a} {self.first_value:.4f} on {self.n_first} {self.unit}, "
            f"{b} {self.second_value:.4f} on {self.n_second} {self.unit})"
        )


def generalization_gap(
    train,
    test,
    metric: str | None = None,
    *,
    confidence: float | None = None,
    n_resamples: int = 2000,
    cluster: str = "auto",
    seed: int | None = None,
    allow_label_mismatch: bool = False,
    labels: tuple[str, str] = ("train", "test"),
    _ordered: bool = True,
) -> Gap:
    """The generalization gap metric(train) - metric(test) with an interval.

    - Two :class:`~retrieval_checks.AccuracyResult`: accuracy gap with Newcombe's
      score interval for a difference of independent proportions. The two sets must
      cover the same classes (a class present in only one set changes what the
      accuracy averages over); ``allow_label_mismatch=True`` accepts it.
    - ``grouped_recall@K``: Welch's t interval from the two independent samples of
      group values (standard errors as in ``result.grouped``).
    - Any other query-level metric: an independent two-sample bootstrap (percentile)
      of the difference, resampling classes (``cluster="auto"``/``"label"``, the
      default when labels exist) or queries (``"query"``).

    ``confidence`` and ``seed`` default to the results' own (``evaluate(confidence=...,
    seed=...)``), else 0.95 and 0. Gaps are defined for fraction metrics only: a rank
    metric (medr, meanr) is lower-is-better, so overfitting gives a negative gap and an
    upper bound on the gap would pass; gate the test value instead.

    The same result on both sides, or two results of the same data (same queries,
    labels, ids, gallery and the same rank of the first relevant item on every
    query), is refused: their gap is 0 whatever the model. A gap whose whole interval
    lies below 0 (test significantly better than train: the sides look swapped) and an
    interval on fewer than ``MIN_INTERVAL_UNITS`` groups or classes give an
    :class:`~retrieval_checks.errors.IntervalWarning`, kept in ``Gap.notes``.
    (``_ordered=False``: a difference of two exchangeable sides, e.g. two halves of
    one population, whose sign means nothing: no warning about it.)

    Parameters
    ----------
    train, test:
        Two :class:`~retrieval_checks.EvaluationResult` of the model on its training
        and its test data, or two :class:`~retrieval_checks.AccuracyResult`.
    metric:
        A fraction metric both results hold (``hit_rate@K``, ``map``, ``mrr``,
        ``grouped_recall@K``...); None or ``"accuracy"`` for two accuracy results.
    confidence:
        Of the interval (default: the results' own, else 0.95).
    n_resamples:
        Bootstrap resamples (default 2000).
    cluster:
        ``"auto"`` (default), ``"label"`` or ``"query"``: the bootstrap's units.
    seed:
        Of the bootstrap (default: the results' own, else 0).
    allow_label_mismatch:
        Accept two accuracy results over different classes (default False).
    labels:
        The two sides' names (default ``("train", "test")``), used in messages.

    Returns
    -------
    Gap
        The gap (train - test), its interval and method, both sides' values and
        sample sizes, and its notes.

    Raises
    ------
    InputError
        A rank metric or another metric without a gap, a metric missing from a side,
        no metric for two evaluation results, the same data on both sides, accuracy
        results over different classes, an invalid ``confidence``, ``seed``,
        ``n_resamples``, ``cluster`` or ``labels``.
    MetricNameError
        An unknown metric name.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> centres, y = rng.normal(size=(20, 8)), np.repeat(np.arange(20), 3)
    >>> train = rc.evaluate(centres[y] + 0.4 * rng.normal(size=(60, 8)), query_labels=y, metrics=["map"])
    >>> test = rc.evaluate(centres[y] + 0.6 * rng.normal(size=(60, 8)), query_labels=y, metrics=["map"])
    >>> print(rc.generalization_gap(train, test, "map"))
    map gap (train - test) = +0.1999 [+0.0803, +0.3197] (95% percentile bootstrap over classes; train 0.9229 on 20 classes, test 0.7231 on 20 classes)
    """
    if (
        not isinstance(labels, (tuple, list))
        or len(labels) != 2
        or not all(isinstance(x, str) for x in labels)
    ):
        raise InputError(
            f"labels={shown(labels)}: give the two sides' names, e.g. ('train', 'test')."
        )
    labels = tuple(labels)
    for side, res in zip(labels, (train, test)):
        refuse_vacuous(res, f"generalization_gap, the {side} side")
    confidence = result_setting(
        train, "confidence", confidence, DEFAULTS["confidence"], others=(test,), sides=labels
    )
    seed = result_setting(train, "seed", seed, DEFAULTS["seed"], others=(test,), sides=labels)
    check_option("confidence", confidence)
    check_option("seed", seed)
    check_resamples(n_resamples)
    if not isinstance(allow_label_mismatch, bool):
        raise InputError(f"allow_label_mismatch={shown(allow_label_mismatch)}: use True or False.")
    if isinstance(train, AccuracyResult) or isinstance(test, AccuracyResult):
        if metric is not None and metric != "accuracy":
            held = (
                "accuracy"
                if isinstance(train, AccuracyResult) and isinstance(test, AccuracyResult)
                else None
            )
            raise InputError(
                f"metric={shown(metric)}, but "
                + (
                    f"the {labels[0]} and {labels[1]} results are AccuracyResults, which hold only accuracy"
                    if held
                    else "one side is an AccuracyResult (holding only accuracy)"
                )
                + "; pass metric='accuracy' (or leave it out), or pass two EvaluationResults for a retrieval metric."
            )
        return _noted(
            _accuracy_gap(train, test, confidence, allow_label_mismatch, labels),
            _same_sides(train, test, None, labels),
            _ordered,
        )
    if metric is None:
        raise InputError(
            "metric is missing: name the metric whose gap to compute, e.g. 'grouped_recall@1'."
        )
    spec = parse_metric(metric)
    fam = family(spec.family)
    if not fam.gap:
        if fam.unit == "rank":
            raise InputError(
                f"{spec.name}: a generalization gap is not defined for a rank metric. Ranks are lower-is-better, "
                f"so the gap train - test of an overfitting model is negative and an upper bound on it "
                f"(assert_gap_below) would pass. Gate the test value instead (assert_metric(test, "
                f"'{spec.name}', at_most=...)), or take the gap of a fraction metric such as hit_rate@K or mrr."
            )
        raise InputError(
            f"{spec.name}: a generalization gap is not defined for this metric (gaps are for per-query fraction "
            "metrics such as hit_rate@K, map, mrr, grouped_recall@K and accuracy); gate the test value with "
            "assert_metric instead."
        )
    for side, res in zip(labels, (train, test)):
        if not hasattr(res, "per_query") or not hasattr(res, "grouped"):
            raise InputError(
                f"{side} must be an EvaluationResult or AccuracyResult, got {type(res).__name__}."
            )
        if spec.name not in res:
            raise InputError(f"{spec.name} was not computed on {side}; computed: {', '.join(res)}.")
    cluster = resolve_cluster(
        cluster, train, test
    )  # a bad cluster= is said before anything about the data
    same = _same_sides(train, test, spec, labels)
    if spec.kind == "grouped":
        return _noted(
            _grouped_gap(
                spec, train.grouped[spec.name], test.grouped[spec.name], confidence, labels
            ),
            same,
            _ordered,
        )
    return _noted(
        _bootstrap_gap(spec, train, test, confidence, n_resamples, cluster, seed, labels),
        same,
        _ordered,
        _size_note(spec, train, test, labels),
    )


#: galleries (or class counts) whose sizes differ by more than this factor make a gap of a
#: rank-based metric say as much about the galleries as about the model
_SIZE_RATIO = 1.1


def _size_note(spec, train, test, labels) -> str | None:
    """A note when the two sides rank against galleries of different sizes or over
    different numbers of classes: Recall@K and the other rank metrics fall as the
    gallery grows, so their gap mixes overfitting with the galleries' sizes (the reason
    grouped recall exists: "Catching Image Retrieval Generalization"). None when the
    sizes are within :data:`_SIZE_RATIO` of each other, or unknown."""
    sizes = []
    for res in (train, test):
        n_g = (getattr(res, "config", None) or {}).get("n_gallery")
        codes = getattr(res, "query_label_codes", None)
        n_c = None if codes is None else int(np.unique(np.asarray(codes)).size)
        sizes.append((n_g, n_c))
    (g1, c1), (g2, c2) = sizes
    differ = []
    for what, x, y in (("gallery items", g1, g2), ("classes", c1, c2)):
        if isinstance(x, (int, np.integer)) and isinstance(y, (int, np.integer)) and min(x, y) > 0:
            if max(x, y) / min(x, y) > _SIZE_RATIO:
                differ.append(f"{labels[0]} {int(x)} {what}, {labels[1]} {int(y)}")
    if not differ:
        return None
    return (
        f"{spec.name} gap ({labels[0]} - {labels[1]}): the sides differ in size ({'; '.join(differ)}). "
        f"{spec.name} falls as a gallery grows and its classes multiply, so this gap mixes the model's "
        "generalization with the sizes of the two sets; grouped_recall@K compares sets of different sizes "
        "(groups of the same number of classes on both sides; docs/statistics.md)."
    )


def gap_notes(gap: Gap, *, units: bool = True, ordered: bool = True) -> list[str]:
    """What the reader of ``gap`` should know: its whole interval lies below 0 (the
    second side scores significantly higher than the first: train and test look
    swapped, and an upper bound on the gap passes whatever the model does; only where
    the sides are ``ordered``), or (``units``) a side rests on fewer than
    ``MIN_INTERVAL_UNITS`` units (the interval says little)."""
    a, b = gap.labels
    notes = []
    if ordered and isinstance(gap.high, (int, float)) and gap.high < 0:
        notes.append(
            f"{gap.metric} gap ({a} - {b}) = {gap.value:+.4f} with its whole {gap.confidence:.0%} interval "
            f"[{gap.low:+.4f}, {gap.high:+.4f}] below 0: {b} scores significantly higher than {a} ({b} "
            f"{gap.second_value:.4f}, {a} {gap.first_value:.4f}). A generalization gap is {a} - {b}, so train and "
            f"test look swapped: pass the training result first (generalization_gap(train, test, metric); in a suite, "
            f"gap: {{train: <training set>, test: <test set>}}). (Where "
            f"the {b} set is truly easier, e.g. a smaller gallery, an upper bound on this gap checks nothing.)"
        )
    for side, n in ((a, gap.n_first), (b, gap.n_second)) if units else ():
        note = few_units_note(f"{gap.metric} gap, {side} side", n, gap.unit)
        if note:
            notes.append(note)
    return notes


def _noted(gap: Gap, same: str | None, ordered: bool, sizes: str | None = None) -> Gap:
    """``gap`` with its notes (:func:`gap_notes`, ``same``: identical sides that could
    not be told apart, ``sizes``: sides of different sizes), each issued as an
    IntervalWarning."""
    notes = ([same] if same else []) + gap_notes(gap, ordered=ordered) + ([sizes] if sizes else [])
    warn_notes(notes)
    return replace(gap, notes=tuple(notes))


def _equal(x, y) -> bool:
    """Whether two per-query arrays (or None) hold the same values (NaN equal to NaN)."""
    if x is None or y is None:
        return x is None and y is None
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or (x.dtype.kind in "fc") != (y.dtype.kind in "fc"):
        return False
    if x.dtype.kind in "fc":
        return bool(np.array_equal(x, y, equal_nan=True))
    return bool(np.array_equal(x, y))


def _varies(x) -> bool:
    """Whether an array holds more than one distinct (non-NaN) value."""
    x = np.asarray(x)
    if x.dtype.kind in "fc":
        x = x[~np.isnan(x)]
    return x.size > 1 and np.unique(x).size > 1


def _computed_ranks(result):
    """``result``'s first relevant ranks, or None where it computed none (absent, or 0 on
    every query: a rank is at least 1, and 0 marks a query no rank metric placed)."""
    ranks = getattr(result, "first_relevant_rank", None)
    if ranks is None or not np.any(np.asarray(ranks)):
        return None
    return ranks


def _same_sides(train, test, spec, labels) -> str | None:
    """Refuse the same result on both sides, or two results of the same data; a note
    when the two sides are identical but nothing tells whether they are one dataset
    (every query perfect on both, say), else None."""
    a, b = labels
    why = (
        f"a gap of a result with itself is 0 whatever the model, and an upper bound on it (assert_gap_below) "
        f"always passes; evaluate the model on the {a} set and on the {b} set and pass those two results"
    )
    if train is test:
        raise InputError(f"The {a} and {b} sides are the same result object: {why}.")
    if isinstance(train, AccuracyResult):
        if train.labels is None or test.labels is None:
            return None
        facts = ((train.n, test.n), (train.labels, test.labels), (train.correct, test.correct))
        evidence, what = (
            [train.correct],
            "labels and the same correct predictions, sample by sample",
        )
    else:
        if not all(callable(getattr(r, "query_fingerprint", None)) for r in (train, test)):
            return None
        fa, fb = train.query_fingerprint(), test.query_fingerprint()
        facts = [(fa[k], fb[k]) for k in ("n_queries", "n_gallery", "n_relevant")]
        # labels and ids where both sides have them (ids given on one side only tell nothing apart)
        facts += [
            (fa[k], fb[k]) for k in ("labels", "ids") if fa[k] is not None and fb[k] is not None
        ]
        # the first relevant ranks tell only where both sides computed them: an evaluation of
        # grouped recall alone leaves them 0 (as for a skipped query), and those zeros read as
        # "different ranks" beside a side that also computed map let one dataset's gap of 0 pass
        ranks = [_computed_ranks(r) for r in (train, test)]
        ranked = all(x is not None for x in ranks)
        evidence = [ranks[0]] if ranked else []
        if ranked:
            facts.append(tuple(ranks))
        if spec.kind == "grouped":
            ga, gb = train.grouped[spec.name], test.grouped[spec.name]
            facts += [(ga.group_values, gb.group_values), (ga.group_of_query, gb.group_of_query)]
            evidence.append(ga.group_values)
        else:
            facts.append((train.per_query[spec.name], test.per_query[spec.name]))
            evidence.append(train.per_query[spec.name])
        what = "queries (labels, ids, relevant counts, gallery size)" + (
            " and the same rank of the first relevant item on every query"
            if ranked
            else f" and the same {spec.name} on every query"
        )
    if not all(_equal(x, y) for x, y in facts):
        return None
    if any(_varies(e) for e in evidence):
        raise InputError(
            f"The {a} and {b} results hold the same data: the same {what}, so they are one dataset "
            f"evaluated twice; {why}."
        )
    return (
        f"The {a} and {b} results are identical (the same {what}, every one alike), so nothing tells whether "
        f"they are two datasets or one evaluated twice; if one, their gap of 0 says nothing about the model."
    )


def _accuracy_gap(train, test, confidence, allow_label_mismatch, labels) -> Gap:
    if not (isinstance(train, AccuracyResult) and isinstance(test, AccuracyResult)):
        raise InputError(
            "An accuracy gap needs two AccuracyResult objects (from retrieval_checks.accuracy)."
        )
    if not allow_label_mismatch and train.labels is not None and test.labels is not None:
        a, b = set(np.unique(train.labels).tolist()), set(np.unique(test.labels).tolist())
        only_train, only_test = sorted(a - b, key=str), sorted(b - a, key=str)
        if only_train or only_test:
            parts = []
            if only_train:
                parts.append(f"labels present only in {labels[0]}: {only_train[:10]}")
            if only_test:
                parts.append(f"labels present only in {labels[1]}: {only_test[:10]}")
            raise InputError(
                "The accuracy gap compares sets with different classes ("
                + "; ".join(parts)
                + "), so the two "
                "accuracies average over different class mixtures; restrict both sets to their shared classes "
                "or pass allow_label_mismatch=True."
            )
    low, high = newcombe_interval(train.n_correct, train.n, test.n_correct, test.n, confidence)
    return Gap(
        "accuracy",
        train.value - test.value,
        low,
        high,
        confidence,
        "Newcombe score interval",
        train.value,
        test.value,
        train.n,
        test.n,
        "samples",
        labels,
    )


def _grouped_gap(spec, g1, g2, confidence, labels) -> Gap:
    """Welch's t interval for the difference of two independent means of group values."""
    if g1.group_size != g2.group_size:
        raise InputError(
            f"{spec.name}: group sizes differ ({labels[0]} S={g1.group_size}, {labels[1]} S={g2.group_size}); "
            "grouped recall is only comparable at the same S."
        )
    se = math.sqrt(g1.std_error**2 + g2.std_error**2)
    r1, r2 = g1.n_groups, g2.n_groups
    den = g1.std_error**4 / (r1 - 1) + g2.std_error**4 / (r2 - 1)
    dof = se**4 / den if den > 0 else float(r1 + r2 - 2)
    half = float(t_ppf((1 + confidence) / 2, dof)) * se
    d = g1.value - g2.value
    return Gap(
        spec.name,
        d,
        d - half,
        d + half,
        confidence,
        f"Welch t over groups (dof {dof:.1f})",
        g1.value,
        g2.value,
        r1,
        r2,
        "groups",
        labels,
    )


def _n_outside(res) -> int:
    """Queries outside the query set of ``res`` (``evaluate_run(..., queries="run")``):
    NaN per query, but not skipped."""
    return int(getattr(res, "n_outside", 0) or 0)


def _bootstrap_gap(spec, train, test, confidence, n_resamples, cluster, seed, labels) -> Gap:
    """Independent two-sample percentile bootstrap of the difference of the means."""
    check_resamples(n_resamples)
    _, x1 = per_query_values(train, spec.name)
    _, x2 = per_query_values(test, spec.name)
    cluster = resolve_cluster(cluster, train, test)
    rng = np.random.default_rng(seed)
    boots, ns = [], []
    statistic = medr_rows if spec.family == "medr" else mean_rows
    for res, x in ((train, x1), (test, x2)):
        used = ~np.isnan(x)
        clusters = res.query_label_codes[used] if cluster == "label" else None
        boots.append(resample_stats(x[used], clusters, statistic, n_resamples, rng))
        ns.append(int(used.sum()) if clusters is None else int(np.unique(clusters).size))
    diff = boots[0] - boots[1]
    v1, v2 = aggregate(spec, x1), aggregate(spec, x2)
    low, high = (float(v) for v in np.quantile(diff, [(1 - confidence) / 2, (1 + confidence) / 2]))
    return Gap(
        spec.name,
        v1 - v2,
        low,
        high,
        confidence,
        f"percentile bootstrap over {UNIT_NAMES[cluster]}",
        v1,
        v2,
        ns[0],
        ns[1],
        "queries" if cluster == "query" else "classes",
        labels,
        n_used=(int((~np.isnan(x1)).sum()), int((~np.isnan(x2)).sum())),
        # NaN: skipped or outside the query set (queries="run"), counted apart
        n_skipped=(
            int(np.isnan(x1).sum()) - _n_outside(train),
            int(np.isnan(x2).sum()) - _n_outside(test),
        ),
    )
