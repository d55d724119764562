"""Intervals: the bootstrap of a per-query metric (queries or whole classes as units),
Wilson's score interval for a proportion and Newcombe's for a difference of two.

- :func:`bootstrap_interval`: percentile or BCa bootstrap interval of a ranking
  metric, resampling queries, or whole classes ("class-cluster bootstrap": queries of
  one class share the class's gallery items, so they are not independent).
- :func:`resample_stats`: bootstrap replicates of a mean (or a general statistic) in
  memory-bounded chunks; the other modules' bootstraps use it.
- :func:`wilson_interval` and :func:`newcombe_interval` (his method 10).

Everything here works from values the engine already computed; nothing is re-ranked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from .._lazy import norm_cdf, norm_ppf
from ..errors import InputError, IntervalWarning, warn_outside
from ..metrics._binomial import PROPORTIONS, binomial_floor
from ..metrics._names import parse_metric
from ..metrics._ranking import GM_FLOOR, aggregate
from ..options import MIN_RESAMPLES, check_option

if TYPE_CHECKING:
    from ..engine import EvaluationResult

__all__ = [
    "Interval",
    "bootstrap_interval",
    "check_count",
    "wilson_interval",
    "newcombe_interval",
    "resample_stats",
    "mean_rows",
    "medr_rows",
    "resolve_cluster",
    "check_resamples",
    "result_setting",
    "MAX_RESAMPLES",
    "per_query_values",
    "UNIT_NAMES",
    "MIN_INTERVAL_UNITS",
    "few_units_note",
    "warn_notes",
]


@dataclass(frozen=True)
class Interval:
    """A point value with a two-sided interval at ``confidence``.

    ``n`` is the number of independent units behind it (queries, classes or groups,
    as ``unit`` says); ``method`` names how the interval was made.

    Parameters
    ----------
    metric:
        The metric.
    value:
        Its point value.
    low, high:
        The interval's bounds.
    confidence:
        The interval's confidence (0.95 for 95%).
    method:
        How the interval was made (``"bca bootstrap over classes"``, ...).
    n:
        The number of independent units behind it.
    unit:
        What a unit is: ``"queries"``, ``"classes"`` or ``"groups"``.
    notes:
        What the reader should know about this interval (it rests on fewer than
        ``MIN_INTERVAL_UNITS`` units...), also issued as an
        :class:`~retrieval_checks.errors.IntervalWarning`.

    Raises
    ------
    None
        A plain frozen record; :func:`~retrieval_checks.bootstrap_interval` (and
        :func:`~retrieval_checks.slice_intervals`) build it from checked inputs.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(10), 3)
    >>> x = rng.normal(size=(10, 8))[y] + 0.3 * rng.normal(size=(30, 8))
    >>> res = rc.evaluate(x, query_labels=y, metrics=["map"])
    >>> iv = rc.bootstrap_interval(res, "map")
    >>> round(iv.low, 4), round(iv.high, 4), iv.n, iv.unit, iv.notes
    (0.9045, 0.9889, 10, 'classes', ())
    """

    metric: str
    value: float
    low: float
    high: float
    confidence: float
    method: str
    n: int
    unit: str
    #: what the reader should know about this interval (it rests on fewer than
    #: :data:`MIN_INTERVAL_UNITS` units...), also issued as :class:`IntervalWarning`
    notes: tuple[str, ...] = ()

    def __str__(self) -> str:
        return (
            f"{self.metric} = {self.value:.4f} [{self.low:.4f}, {self.high:.4f}] "
            f"({self.confidence:.0%} {self.method}, n={self.n} {self.unit})"
        )


UNIT_NAMES = {"query": "queries", "label": "classes"}

#: The fewest independent units (groups of grouped recall, classes of a class
#: bootstrap, queries, images) an interval should rest on. Below it an interval spans
#: most of the metric's range (4 groups: Student t's quantile is 3.2 and s is a guess
#: from 4 values), so a gate on it decides on the interval's width, not on the model:
#: the interval is still computed, and a warning (and the gate's event) says so.
MIN_INTERVAL_UNITS = 5

_MORE_UNITS = {
    "groups": "use a smaller group_size (more groups from the same labels) or evaluate on more classes",
    "classes": "evaluate on more classes (cluster='query' resamples queries instead, right only where the queries "
    "of a class are independent, e.g. one query per class)",
    "models": "correlate over more models",
}


def few_units_note(what: str, n, unit: str) -> str | None:
    """A line saying that the interval of ``what`` rests on too few units (``n`` of
    ``unit``, fewer than :data:`MIN_INTERVAL_UNITS`) and what would fix it; None when
    there are enough (or ``n`` is unknown)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n >= MIN_INTERVAL_UNITS:
        return None
    fix = _MORE_UNITS.get(unit, f"evaluate on more {unit}")
    return (
        f"{what}: its interval rests on {int(n)} {unit}, fewer than {MIN_INTERVAL_UNITS}; from so few independent "
        f"units it spans most of the metric's range and says little (a gate on it decides on the interval's "
        f"width, not on the model); {fix}."
    )


def warn_notes(notes) -> None:
    """Issue each note as an :class:`~retrieval_checks.errors.IntervalWarning`, at the
    user's line (:func:`~retrieval_checks.errors.warn_outside`)."""
    for note in notes:
        warn_outside(f"retrieval-checks: {note}", IntervalWarning)


def check_count(value, name: str, *, low: int = 0) -> int:
    """``value`` when it is an int >= ``low`` (not a bool, not a string); else
    :class:`~retrieval_checks.InputError` naming the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputError(
            f"{name}={value!r}: expected an integer >= {low}, found {type(value).__name__}."
        )
    if value < low:
        raise InputError(f"{name}={value!r}: expected an integer >= {low}.")
    return int(value)


def finite_values(values, name: str) -> np.ndarray:
    """A 1-D float64 array of finite numbers, or InputError naming ``name``."""
    if isinstance(values, (str, bytes)) or isinstance(values, dict):
        raise InputError(
            f"{name} must be a sequence of numbers (one per model), got {type(values).__name__}."
        )
    try:
        a = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must hold numbers (one per model): {exc}.") from None
    if a.ndim != 1:
        raise InputError(f"{name} must be 1-D (one value per model), got shape {a.shape}.")
    if not np.isfinite(a).all():
        bad = np.flatnonzero(~np.isfinite(a))
        raise InputError(
            f"{name} has NaN or infinite values (positions {', '.join(map(str, bad[:5]))}); drop those "
            "models or use a log scale."
        )
    return a


def resolve_cluster(cluster: str, *results) -> str:
    """``auto``: resample classes when every result has labels, else queries."""
    if not isinstance(cluster, str) or cluster not in ("auto", "query", "label"):
        raise InputError(f"cluster={cluster!r}: use 'auto', 'query' or 'label'.")
    if cluster == "auto":
        has_labels = all(getattr(r, "query_label_codes", None) is not None for r in results)
        return "label" if has_labels else "query"
    if cluster == "label":
        for r in results:
            if getattr(r, "query_label_codes", None) is None:
                raise InputError(
                    "cluster='label' needs labels; a result was computed from explicit relevance."
                )
    return cluster


#: The most bootstrap resamples any function takes (the option table's bound too):
#: beyond a million the interval no longer changes, while time and memory grow.
MAX_RESAMPLES = 1_000_000


def check_resamples(n_resamples: int) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)):
        shown = repr(n_resamples)
        shown = shown if len(shown) <= 40 else shown[:20] + "..." + f" ({len(shown)} characters)"
        raise InputError(
            f"n_resamples={shown}: expected an integer number of resamples, found "
            f"{type(n_resamples).__name__} (e.g. n_resamples=2000)."
        )
    if n_resamples < MIN_RESAMPLES:
        raise InputError(
            f"n_resamples={int(n_resamples)}: use at least {MIN_RESAMPLES} resamples (1000+ for 95% "
            "intervals)."
        )
    if n_resamples > MAX_RESAMPLES:
        digits = (
            int(int(n_resamples).bit_length() * 0.30103) + 1
        )  # str() of a 5000-digit int raises
        shown = str(int(n_resamples)) if digits <= 20 else f"a number of about {digits} digits"
        raise InputError(
            f"n_resamples={shown}: at most {MAX_RESAMPLES:,} resamples (more no longer changes the interval but "
            "costs time and memory); use 2000 to 10000."
        )


def result_setting(result, name: str, value, default, *, others=(), sides=("result",)):
    """``value`` when given; else the results' own setting (``result.config[name]``, what
    ``evaluate(confidence=..., seed=...)`` recorded); else ``default``. An interval is
    never silently at another confidence than the one the result was evaluated with.
    Two results (``others``) that recorded different confidences need the argument; for
    the seed (which only draws the resamples of this interval: two evaluations often use
    different partition seeds on purpose) the first result's is used."""
    if value is not None:
        return value
    found = []
    for side, res in zip(sides, (result, *others)):
        config = getattr(res, "config", None)
        if isinstance(config, dict) and config.get(name) is not None:
            found.append((side, config[name]))
    if not found:
        return default
    if len({repr(v) for _, v in found}) > 1 and name != "seed":
        shown = ", ".join(f"{side} {v!r}" for side, v in found)
        raise InputError(
            f"{name} was not given and the results were evaluated with different {name}s ({shown}); "
            f"pass {name}= explicitly."
        )
    return found[0][1]


def per_query_values(result, metric: str):
    """(spec, per-query values) of a query-level metric of an evaluation result."""
    if not hasattr(result, "per_query") or not hasattr(result, "query_label_codes"):
        raise InputError(
            f"Expected an EvaluationResult from retrieval_checks.evaluate, got {type(result).__name__}."
        )
    spec = parse_metric(metric)
    if spec.name not in result:
        raise InputError(
            f"{spec.name} was not computed in this result; computed: {', '.join(result)}."
        )
    if spec.kind == "grouped":
        raise InputError(
            f"{spec.name} has its own interval over groups (result.intervals[{spec.name!r}]); a bootstrap over "
            "queries would answer another question."
        )
    if spec.name not in result.per_query:
        raise InputError(
            f"{spec.name} has no per-query values (pair and embedding metrics are global); "
            "an interval by resampling queries is not defined for it."
        )
    return spec, result.per_query[spec.name]


def _chunks(n_resamples: int, unit_count: int):
    per = max(1, int(2e7 // max(unit_count, 1)))
    done = 0
    while done < n_resamples:
        step = min(per, n_resamples - done)
        yield step
        done += step


def resample_stats(
    x: np.ndarray,
    clusters: np.ndarray | None,
    statistic,
    n_resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Bootstrap replicates of ``statistic`` (mean-like via sums, or a general one)."""
    out = np.empty(n_resamples)
    pos = 0
    if clusters is None:
        n = x.size
        for step in _chunks(n_resamples, n):
            idx = rng.integers(0, n, size=(step, n))
            out[pos : pos + step] = statistic(x[idx])
            pos += step
        return out
    # class clusters: resample whole classes with replacement
    codes, inv = np.unique(clusters, return_inverse=True)
    L = codes.size
    if statistic is mean_rows:
        sums = np.bincount(inv, weights=x, minlength=L)
        cnts = np.bincount(inv, minlength=L).astype(np.float64)
        for step in _chunks(n_resamples, L):
            idx = rng.integers(0, L, size=(step, L))
            out[pos : pos + step] = sums[idx].sum(1) / cnts[idx].sum(1)
            pos += step
        return out
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(L + 1))
    members = [x[order[bounds[c] : bounds[c + 1]]] for c in range(L)]
    for b in range(n_resamples):
        pick = rng.integers(0, L, size=L)
        out[b] = statistic(np.concatenate([members[c] for c in pick])[None, :])[0]
    return out


def mean_rows(a: np.ndarray) -> np.ndarray:
    return a.mean(axis=1)


def gm_rows(a: np.ndarray) -> np.ndarray:
    """gm_map of each resample: exp(mean(log(max(AP, 1e-5)))), as :func:`aggregate`."""
    return np.exp(np.mean(np.log(np.maximum(a, GM_FLOOR)), axis=1))


def medr_rows(a: np.ndarray) -> np.ndarray:
    return np.floor(np.median(a - 1.0, axis=1)) + 1.0


def _jackknife(x: np.ndarray, clusters: np.ndarray | None) -> np.ndarray:
    """Leave-one-unit-out values of the mean (units: queries or classes)."""
    if clusters is None:
        return (x.sum() - x) / (x.size - 1)
    _, inv = np.unique(clusters, return_inverse=True)
    sums = np.bincount(inv, weights=x)
    cnts = np.bincount(inv).astype(np.float64)
    return (sums.sum() - sums) / (cnts.sum() - cnts)


def _bca(
    theta_hat: float, boot: np.ndarray, jack: np.ndarray, confidence: float
) -> tuple[float, float]:
    B = boot.size
    prop = (np.sum(boot < theta_hat) + 0.5 * np.sum(boot == theta_hat)) / B
    prop = min(max(prop, 1.0 / (2 * B)), 1.0 - 1.0 / (2 * B))
    z0 = norm_ppf(prop)
    d = jack.mean() - jack
    den = 6.0 * (np.sum(d**2) ** 1.5)
    a = float(np.sum(d**3) / den) if den > 0 else 0.0
    z = norm_ppf(np.array([(1 - confidence) / 2, (1 + confidence) / 2]))
    adj = norm_cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))
    return tuple(float(v) for v in np.quantile(boot, adj))


def bootstrap_interval(
    result: EvaluationResult,
    metric: str,
    *,
    confidence: float | None = None,
    n_resamples: int = 2000,
    method: str = "bca",
    cluster: str = "auto",
    seed: int | None = None,
) -> Interval:
    """Bootstrap interval of a query-level metric from its per-query values.

    ``cluster="label"`` resamples classes with all their queries: queries of one class
    share gallery items and are not independent, and resampling them one by one gives
    intervals that are too narrow (77% coverage for a nominal 95% in this project's
    simulations). ``cluster="query"`` resamples queries, right when queries are
    independent (e.g. one query per class). ``"auto"`` (default) is ``"label"``
    whenever the result has labels. ``method`` is ``"bca"``
    (bias-corrected and accelerated; acceleration from the jackknife) or
    ``"percentile"``. Seeded: the same inputs give the same interval. ``confidence``
    and ``seed`` default to the result's own (``evaluate(confidence=..., seed=...)``),
    else 0.95 and 0.

    Parameters
    ----------
    result:
        An :class:`~retrieval_checks.EvaluationResult` holding the metric's per-query
        values.
    metric:
        A query-level metric of the result (a canonical name or an alias).
    confidence:
        Of the interval (default: the result's own, else 0.95).
    n_resamples:
        Bootstrap resamples (default 2000).
    method:
        ``"bca"`` (default) or ``"percentile"`` (needed for ``medr`` and ``gm_map``).
    cluster:
        ``"auto"`` (default), ``"label"`` or ``"query"``.
    seed:
        Of the resampling (default: the result's own, else 0).

    Returns
    -------
    Interval
        The metric's value and interval, the method and the number of units (classes
        or queries); an interval on fewer than ``MIN_INTERVAL_UNITS`` units carries a
        note, also issued as an :class:`~retrieval_checks.errors.IntervalWarning`.

    Raises
    ------
    InputError
        A metric the result lacks or that has no per-query values, fewer than 2 usable
        queries (or classes under ``cluster="label"``), BCa for ``medr`` or
        ``gm_map``, an unknown ``method`` or ``cluster``, an invalid
        ``confidence``, ``seed`` or ``n_resamples``.
    MetricNameError
        An unknown metric name.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(10), 3)
    >>> x = rng.normal(size=(10, 8))[y] + 0.3 * rng.normal(size=(30, 8))
    >>> res = rc.evaluate(x, query_labels=y, metrics=["map"])
    >>> print(rc.bootstrap_interval(res, "map"))
    map = 0.9625 [0.9045, 0.9889] (95% bca bootstrap over classes, n=10 classes)
    >>> print(rc.bootstrap_interval(res, "map", cluster="query", method="percentile"))
    map = 0.9625 [0.9153, 0.9944] (95% percentile bootstrap over queries, n=30 queries)
    """
    confidence = result_setting(result, "confidence", confidence, 0.95)
    seed = result_setting(result, "seed", seed, 0)
    check_option("confidence", confidence)
    check_option("seed", seed)
    check_resamples(n_resamples)
    if not isinstance(method, str) or method not in ("bca", "percentile"):
        raise InputError(f"method={method!r}: use 'bca' or 'percentile'.")
    spec, values = per_query_values(result, metric)
    cluster = resolve_cluster(cluster, result)
    used = ~np.isnan(values)
    x = values[used]
    if x.size < 2:
        raise InputError(f"{spec.name}: {x.size} usable queries; an interval needs at least 2.")
    clusters = None
    if cluster == "label":
        clusters = result.query_label_codes[used]
        if np.unique(clusters).size < 2:
            raise InputError(
                f"{spec.name}: all used queries share one class; a class bootstrap needs 2 or more."
            )
    median_like = spec.family == "medr"
    if median_like and method == "bca":
        raise InputError(
            "medr is a median of integer ranks, not a smooth statistic, so BCa is unreliable for it; "
            "use method='percentile'."
        )
    if spec.family == "gm_map" and method == "bca":
        raise InputError(
            "gm_map is a geometric mean (BCa's jackknife here is the arithmetic mean's); use "
            "method='percentile'."
        )
    statistic = {"medr": medr_rows, "gm_map": gm_rows}.get(spec.family, mean_rows)
    theta = aggregate(spec, values)
    boot = resample_stats(x, clusters, statistic, n_resamples, np.random.default_rng(seed))
    if method == "percentile":
        low, high = (
            float(v) for v in np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
        )
    else:
        low, high = _bca(theta, boot, _jackknife(x, clusters), confidence)
    n_units = x.size if clusters is None else int(np.unique(clusters).size)
    how = f"{method} bootstrap over {UNIT_NAMES[cluster]}"
    if statistic is mean_rows:
        proportion = spec.family in PROPORTIONS or (spec.family == "precision" and spec.k == 1)
        low, high, floor = binomial_floor(
            x, (float(spec.low), float(spec.high)), confidence, low, high, proportion
        )
        how += floor
    iv = Interval(
        spec.name,
        theta,
        low,
        high,
        confidence,
        how,
        n_units,
        "queries" if clusters is None else "classes",
    )
    note = few_units_note(spec.name, iv.n, iv.unit)
    if note:
        warn_notes([note])
        iv = replace(iv, notes=(note,))
    return iv


def wilson_interval(x: int, n: int, confidence: float) -> tuple[float, float]:
    """Wilson's score interval for a proportion x / n."""
    _check_proportion(x, n, "x", "n", confidence)
    z = norm_ppf((1 + confidence) / 2)
    p = x / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return centre - half, centre + half


def newcombe_interval(x1: int, n1: int, x2: int, n2: int, confidence: float) -> tuple[float, float]:
    """Newcombe's hybrid score interval for p1 - p2 (his method 10), from Wilson bounds."""
    _check_proportion(x1, n1, "x1", "n1", confidence)
    _check_proportion(x2, n2, "x2", "n2", confidence)
    p1, p2 = x1 / n1, x2 / n2
    l1, u1 = wilson_interval(x1, n1, confidence)
    l2, u2 = wilson_interval(x2, n2, confidence)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt(
        (u1 - p1) ** 2 + (p2 - l2) ** 2
    )


def _check_proportion(x, n, x_name: str, n_name: str, confidence) -> None:
    check_option("confidence", confidence)
    check_count(n, n_name, low=1)
    check_count(x, x_name, low=0)
    if x > n:
        raise InputError(
            f"{x_name}={x} successes out of {n_name}={n}: a count of successes cannot exceed the "
            "number of trials."
        )
