"""Intervals per slice: each slice of ``evaluate(..., slices=...)`` is the evaluation
restricted to its queries, so its interval is :func:`bootstrap_interval` on that
restriction (classes resampled whole where the result has labels, as everywhere).

A slice with fewer than :data:`MIN_INTERVAL_UNITS` units (queries, or classes under a
class-cluster bootstrap) gets no interval: it is reported with the size it would need,
and the gates refuse to decide on it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

from ..engine._result import refuse_vacuous
from ..errors import InputError, IntervalWarning
from ..metrics._names import parse_metric
from ._intervals import (
    MIN_INTERVAL_UNITS,
    Interval,
    bootstrap_interval,
    resolve_cluster,
    result_setting,
)

__all__ = ["SliceInterval", "slice_intervals", "slice_rows", "require_slices"]


@dataclass(frozen=True)
class SliceInterval:
    """One slice's value of one metric and its interval.

    ``interval`` is None when the slice has fewer than ``needed`` units
    (:data:`MIN_INTERVAL_UNITS`): ``refused`` then says so and how many it would need.
    """

    slice: str
    metric: str
    value: float
    n_queries: int
    n_used: int
    n_units: int
    unit: str  # "queries" or "classes"
    interval: Interval | None
    refused: str | None = None
    needed: int = MIN_INTERVAL_UNITS
    #: queries outside the query set (``evaluate_run(..., queries="run")``): neither
    #: used nor skipped
    n_outside: int = 0

    @property
    def low(self) -> float | None:
        return None if self.interval is None else self.interval.low

    @property
    def high(self) -> float | None:
        return None if self.interval is None else self.interval.high

    def to_dict(self) -> dict:
        def clean(v):
            return None if isinstance(v, float) and math.isnan(v) else v

        return {
            "slice": self.slice,
            "metric": self.metric,
            "value": clean(self.value),
            "low": self.low,
            "high": self.high,
            "confidence": None if self.interval is None else self.interval.confidence,
            "method": None if self.interval is None else self.interval.method,
            "n_queries": self.n_queries,
            "n_used": self.n_used,
            "n_outside": self.n_outside,
            "n": self.n_units,
            "unit": self.unit,
            "refused": self.refused,
        }

    def __str__(self) -> str:
        head = f"{self.slice}: {self.metric} = {self.value:.4f}"
        if self.interval is None:
            return f"{head} (no interval: {self.n_units} {self.unit}, needs {self.needed})"
        iv = self.interval
        return (
            f"{head} [{iv.low:.4f}, {iv.high:.4f}] ({iv.confidence:.0%}, n={iv.n} {iv.unit}, "
            f"{self.n_queries} queries)"
        )


def require_slices(result, what: str = "a slice gate"):
    """``result.slices``, or InputError saying how to get them (or that every query of
    the result retrieved itself)."""
    refuse_vacuous(result, what)
    slices = getattr(result, "slices", None)
    if slices is None:
        if not hasattr(result, "per_query"):
            raise InputError(
                f"{what} expects an EvaluationResult from retrieval_checks.evaluate, got {type(result).__name__}."
            )
        raise InputError(
            f"{what}: this result has no slices; evaluate with slices= (one value per query, e.g. "
            "evaluate(..., slices=languages)), or give the dataset a slices: column in a suite."
        )
    return slices


def _image_text(slices) -> bool:
    """Whether ``slices`` are an image-text evaluation's (images with their captions,
    or caption queries): their intervals resample images."""
    return callable(getattr(slices, "of_metric", None))


def _sliceable_metric(result, slices, metric: str) -> str:
    spec = parse_metric(metric)
    if _image_text(slices):
        if spec.name not in result:
            raise InputError(
                f"{spec.name} was not computed in this result; computed: {', '.join(result)}."
            )
        if not slices.of_metric(spec.name):
            raise InputError(
                "; ".join(dict.fromkeys(s.lacks(spec.name) for s in slices.values()))
                or f"{spec.name}: the result has no slices."
            )
        return spec.name
    if spec.name not in result:
        raise InputError(
            f"{spec.name} was not computed in this result; computed: {', '.join(result)}."
        )
    if spec.kind == "grouped" or spec.name not in result.per_query:
        raise InputError(
            f"{spec.name} has no per-query values ({'an interval over groups of labels' if spec.kind == 'grouped' else 'a global metric over all pairs'}), "
            "so it has no value per slice; slice a query-level metric (map, ndcg@10, hit_rate@1, ...)."
        )
    return spec.name


def slice_intervals(
    result,
    metric: str,
    *,
    confidence: float | None = None,
    n_resamples: int = 2000,
    method: str | None = None,
    cluster: str = "auto",
    seed: int | None = None,
) -> dict[str, SliceInterval]:
    """``{slice name: SliceInterval}`` of a query-level metric of a sliced result.

    The interval of each slice is :func:`bootstrap_interval` on the slice's own
    queries (``cluster="auto"``: whole classes where the result has labels);
    ``method`` defaults to BCa (percentile for ``medr``). A slice with fewer than
    :data:`MIN_INTERVAL_UNITS` units has ``interval=None`` and ``refused`` set.
    ``confidence`` and ``seed`` default to the result's own.

    Parameters
    ----------
    result:
        A sliced result (``evaluate(..., slices=...)``, ``evaluate_run``,
        :func:`~retrieval_checks.with_slices`).
    metric:
        A query-level metric of the result.
    confidence:
        Of the intervals (default: the result's own, else 0.95).
    n_resamples:
        Bootstrap resamples (default 2000).
    method:
        ``"bca"`` or ``"percentile"`` (default: BCa, percentile for ``medr``).
    cluster:
        ``"auto"`` (default), ``"label"`` or ``"query"``.
    seed:
        Of the bootstrap (default: the result's own, else 0).

    Returns
    -------
    dict
        ``{slice name: SliceInterval}``: each slice's value, its queries used and
        skipped, its units, and its :class:`~retrieval_checks.Interval` (None, with
        ``refused`` saying why, below ``MIN_INTERVAL_UNITS`` units).

    Raises
    ------
    InputError
        A result without slices, a metric it did not compute or without per-query
        values (grouped recall, pair metrics), an invalid option.
    MetricNameError
        An unknown metric name.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(12), 3)  # 12 classes of 3 items
    >>> x = rng.normal(size=(12, 8))[y] + 0.5 * rng.normal(size=(36, 8))
    >>> lang = np.where(y < 6, "de", "en")  # 6 classes per slice
    >>> res = rc.evaluate(x, query_labels=y, metrics=["map", "hit_rate@1"], slices=lang)
    >>> ivs = rc.slice_intervals(res, "map")
    >>> print(ivs["de"].interval)
    map = 0.7310 [0.5727, 0.9005] (95% bca bootstrap over classes, n=6 classes)
    >>> ivs["en"].n_queries, ivs["en"].n_units, ivs["en"].refused
    (18, 6, None)
    """
    slices = require_slices(result, "slice_intervals")
    name = _sliceable_metric(result, slices, metric)
    confidence = result_setting(result, "confidence", confidence, 0.95)
    seed = result_setting(result, "seed", seed, 0)
    if _image_text(slices):
        return _image_text_intervals(slices, name, confidence, n_resamples, seed)
    cluster = resolve_cluster(cluster, result)
    if method is None:
        method = "percentile" if parse_metric(name).family == "medr" else "bca"
    out = {}
    for key, s in slices.items():
        sub = s.result
        if cluster == "label":
            n_units, unit = s.n_classes, "classes"
        else:
            n_units, unit = sub.n_used, "queries"
        value = float(sub[name])
        if n_units < MIN_INTERVAL_UNITS:
            refused = no_value_cause(key, sub, s.n_queries)
            if refused is None:
                more = MIN_INTERVAL_UNITS - n_units
                counted = (
                    f"{n_units} queries used of {s.n_queries}"
                    if unit == "queries"
                    else f"{n_units} classes ({s.n_queries} queries)"
                )
                refused = (
                    f"slice {key!r}: {counted}, fewer than the {MIN_INTERVAL_UNITS} {unit} an interval "
                    f"needs; {more} more {unit if more != 1 else unit[:-2] if unit == 'classes' else 'query'} "
                    "would give it one."
                )
            out[key] = SliceInterval(
                key,
                name,
                value,
                s.n_queries,
                sub.n_used,
                n_units,
                unit,
                None,
                refused,
                n_outside=sub.n_outside,
            )
            continue
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore", IntervalWarning
            )  # counted above: never below the floor here
            iv = bootstrap_interval(
                sub,
                name,
                confidence=confidence,
                n_resamples=n_resamples,
                method=method,
                cluster=cluster,
                seed=seed,
            )
        out[key] = SliceInterval(
            key, name, value, s.n_queries, sub.n_used, n_units, unit, iv, n_outside=sub.n_outside
        )
    return out


def _image_text_intervals(slices, name, confidence, n_resamples, seed) -> dict:
    """The intervals of an image-text result's slices that hold ``name`` (caption
    slices hold t2i metrics only): a percentile bootstrap over each slice's images,
    each with its captions in the slice, as the whole result's intervals."""
    out = {}
    for key in slices.of_metric(name):
        s = slices[key]
        value = float(s[name])
        n_units, n_q = s.n_images, s.queries_of(name)
        if n_units < MIN_INTERVAL_UNITS:
            more = MIN_INTERVAL_UNITS - n_units
            refused = (
                f"slice {key!r}: {n_units} images ({n_q} queries), fewer than the {MIN_INTERVAL_UNITS} images an "
                f"interval needs; {more} more image{'s' if more != 1 else ''} would give it one."
            )
            out[key] = SliceInterval(key, name, value, n_q, n_q, n_units, "images", None, refused)
            continue
        bounds = s.interval(name, confidence, n_resamples, seed)
        iv = (
            None
            if bounds is None
            else Interval(
                metric=name,
                value=value,
                low=bounds[0],
                high=bounds[1],
                confidence=confidence,
                method=f"percentile bootstrap over images, {n_resamples} resamples",
                n=n_units,
                unit="images",
            )
        )
        out[key] = SliceInterval(
            key,
            name,
            value,
            n_q,
            n_q,
            n_units,
            "images",
            iv,
            None if iv is not None else f"slice {key!r}: no interval (n_resamples=0)",
        )
    return out


def no_value_cause(
    key: str, sub, n_queries: int, leave_out: str = "leave the slice out (slices=[...])"
) -> str | None:
    """Why the slice ``key`` has no value (every query skipped for want of a relevant
    gallery item, or outside the query set), with the fixes; None when it has one (an
    image-text slice always has: every image has a caption, every caption an image)."""
    if getattr(sub, "n_used", None) is None or sub.n_used:
        return None
    outside = int(getattr(sub, "n_outside", 0) or 0)
    if outside == n_queries:
        return (
            f"slice {key!r}: all {n_queries} queries are outside the query set "
            f"(queries={sub.config.get('queries')!r}): pass another queries=, or {leave_out}."
        )
    return (
        f"slice {key!r}: all {n_queries} queries skipped (no relevant gallery item; "
        f"empty_queries={sub.config.get('empty_queries', 'skip')!r}"
        + (f", {outside} outside the query set" if outside else "")
        + f"): fix the labels, evaluate with empty_queries='zero' (they then score 0), or {leave_out}."
    )


def slice_rows(result, metrics=None, *, confidence: float | None = None, **kw) -> list[dict]:
    """Every (slice, metric) of a sliced result as JSON-ready rows (value, interval,
    sizes, refusal), the metrics defaulting to every sliceable one."""
    slices = require_slices(result, "slice_rows")
    if metrics is None:
        first = next(iter(slices.values()), None)
        metrics = list(first) if first is not None else []
    rows = []
    for m in metrics:
        rows.extend(
            iv.to_dict() for iv in slice_intervals(result, m, confidence=confidence, **kw).values()
        )
    return rows
