"""Evaluation-set size: how many queries (or classes) a gate needs to detect a drop.

Sakai's topic-set-size design ("Topic set size design", Information Retrieval
Journal 19, 2016) from a pilot: the spread of the paired per-unit differences sets
the units a one-sided paired t test at level ``1 - confidence`` needs to detect a
true drop ``d`` with power ``p`` (:func:`~retrieval_checks.stats._power.units_needed`,
noncentral t). The spread comes from, best first:

- two results on the same queries (``plan_queries(candidate, metric, d,
  baseline=other)``): the paired differences themselves (class-clustered when the
  queries have labels, as :func:`~retrieval_checks.compare` clusters them);
- a recorded significance-gated gate (a history run's record, with ``power_se``):
  the standard error its own test used;
- one result, or a record with an interval: the spread of the metric across units,
  ``sd``; two runs of models on the same queries are correlated (``correlation``,
  default 0.5), and their per-unit differences spread as ``sd * sqrt(2 (1 - r))``
  (``sd`` itself at 0.5). The assumption is stated in the plan.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._lazy import norm_ppf
from .._suggest import shown
from ..errors import InputError
from ..metrics._names import metric_spec, parse_metric
from ..metrics._thresholds import check_threshold
from ..options import DEFAULTS, check_option
from ._compare import query_pairs, same_queries
from ._intervals import resolve_cluster
from ._power import check_power, detectable_drop, power_at, units_needed

__all__ = ["Plan", "plan_queries"]


@dataclass(frozen=True)
class Plan:
    """A planned evaluation-set size. ``units_needed``: the fewest units (``unit``:
    queries or classes) for which a one-sided paired t test at ``level`` detects a
    true ``drop`` of ``metric`` with ``power`` (None when no practical number does);
    ``n_units``, ``mdd_now`` and ``power_now``: the pilot's units, its minimum
    detectable drop and its power for ``drop``; ``sd``: the per-unit spread of the
    paired differences used; ``source`` and ``assumption``: where the spread came from."""

    metric: str
    drop: float
    power: float
    confidence: float
    level: float
    sd: float
    n_units: int
    unit: str
    units_needed: int | None
    mdd_now: float
    power_now: float
    source: str
    assumption: str

    def __str__(self) -> str:
        need = (
            f"{self.units_needed} {self.unit}"
            if self.units_needed is not None
            else "more than a billion units (is the drop 0?)"
        )
        return (
            f"{self.metric}: to detect a drop of {self.drop:g} with {self.power:.0%} power "
            f"(one-sided paired t, level {self.level:.3g}): {need}. The pilot ({self.source}) has "
            f"{self.n_units} {self.unit}: minimum detectable drop {self.mdd_now:.4g}, power "
            f"{self.power_now:.0%} for a drop of {self.drop:g}. Spread of the paired differences "
            f"per unit: {self.sd:.4g} ({self.assumption})."
        )


def _cluster_se(d: np.ndarray, clusters) -> tuple[float, int]:
    """The standard error of the mean of ``d`` (cluster-robust when ``clusters``) and the
    number of units (clusters or values), as the paired t of compare() computes it."""
    n = d.size
    mean = float(d.mean())
    if clusters is None:
        return float(d.std(ddof=1) / math.sqrt(n)), n
    _, inv = np.unique(clusters, return_inverse=True)
    L = int(inv.max()) + 1
    if L < 2:
        raise InputError("plan_queries: the pilot's queries all have one label; need 2 classes.")
    resid = np.bincount(inv, weights=d - mean, minlength=L)
    return math.sqrt(L / (L - 1) * float(np.sum(resid**2))) / n, L


def _from_results(pilot, baseline, metric: str, cluster: str, correlation: float):
    spec = parse_metric(metric)
    if spec.kind == "grouped" or spec.name not in getattr(pilot, "per_query", {}):
        raise InputError(
            f"plan_queries: {spec.name} has no per-query values in the pilot; plan from a per-query "
            "metric (map, ndcg@10, recall@1, ...) or from a history record with an interval."
        )
    if baseline is not None:
        if getattr(baseline, "n_queries", None) != pilot.n_queries:
            raise InputError(
                "plan_queries: the pilot and its baseline were evaluated on different queries; the "
                "paired differences need the same queries in the same order."
            )
        same_queries(pilot, baseline)
        pairs = query_pairs(spec, pilot, baseline, cluster)
        d = pairs.a - pairs.b
        se, n_units = _cluster_se(d, pairs.clusters)
        unit = pairs.unit
        if not se > 0:  # no spread: every size would "detect" any drop with certainty
            why = (
                "the two results are identical (every paired difference is 0)"
                if not np.any(d)
                else f"the paired differences do not vary across {unit} (each is {float(d.mean()):.4g})"
            )
            raise InputError(
                f"plan_queries: {spec.name}: {why}, so they carry no spread to plan from; plan from one "
                "result (plan_queries(result, metric, drop)) or from a different run as baseline."
            )
        return se * math.sqrt(n_units), n_units, unit, "the two results' paired differences"
    values = np.asarray(pilot.per_query[spec.name], dtype=float)
    used = ~np.isnan(values)
    clusters = None
    if resolve_cluster(cluster, pilot) == "label":
        clusters = np.asarray(pilot.query_label_codes)[used]
    if used.sum() < 2:
        raise InputError(f"plan_queries: the pilot has {int(used.sum())} scored queries; need 2.")
    se, n_units = _cluster_se(values[used], clusters)
    if not se > 0:
        raise InputError(
            f"plan_queries: {spec.name} is {float(values[used][0]):.4g} on every scored query of the "
            "pilot: no spread to plan from; plan from a pilot whose values vary (more or harder queries)."
        )
    sd = se * math.sqrt(n_units) * math.sqrt(2 * (1 - correlation))
    unit = "queries" if clusters is None else "classes"
    return sd, n_units, unit, f"one result: correlation {correlation:g} between two runs assumed"


def _pick(records, metric: str, test: str | None) -> dict:
    def same(name) -> bool:
        if name == metric:
            return True
        try:
            return metric_spec(name).name == metric_spec(metric).name
        except Exception:
            return False

    found = [
        r
        for r in records
        if isinstance(r, Mapping)
        and same(r.get("metric"))
        and (test is None or fnmatch.fnmatchcase(str(r.get("test", "")), test))
    ]
    usable = [
        r
        for r in found
        if (r.get("power_se") is not None or r.get("low") is not None) and not _slice_gate(r)
    ]
    slice_gates = [r for r in found if _slice_gate(r)]
    if not usable and slice_gates:
        r = slice_gates[0]
        raise InputError(
            f"plan_queries: the gate of {metric!r} found"
            + (f" ({r.get('test')})" if r.get("test") else "")
            + f" is a slice gate: its n is its number of slices ({r.get('n')} slices) and its interval "
            "the worst slice's, not a spread across queries; plan from a gate of the metric on the "
            "whole set, or from the evaluation result (plan_queries(result, ...); one slice's own "
            "units: plan_queries(result.slices[name].result, ...))."
        )
    if not usable:
        metrics = sorted({str(r.get("metric")) for r in records if isinstance(r, Mapping)})
        why = (
            f"no gate of {metric!r}" + (f" in a test matching {test!r}" if test else "")
            if not found
            else f"the gates of {metric!r} have no interval and no power (nothing to read a spread from)"
        )
        raise InputError(
            f"plan_queries: {why}; the run's metrics: {', '.join(metrics[:20]) or 'none'}."
        )
    # a gate whose own test measured the paired spread first, then the largest sample
    usable.sort(key=lambda r: (r.get("power_se") is None, -(r.get("n") or 0)))
    return usable[0]


def _slice_gate(rec: Mapping) -> bool:
    """A slice gate's record (a row per slice): its n counts slices, not units."""
    return rec.get("unit") == "slices" or isinstance(rec.get("slices"), list)


def _from_record(rec: Mapping, correlation: float, confidence: float):
    if rec.get("power_se") is not None and rec.get("power_units"):
        n = int(rec["power_units"])
        sd = float(rec["power_se"]) * math.sqrt(n)
        unit = rec.get("power_unit") or rec.get("unit") or "units"
        return sd, n, unit, "the gate's own significance test"
    n = rec.get("n")
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 2:
        raise InputError(
            f"plan_queries: the record of {rec.get('metric')!r} has no sample size n (found "
            f"{shown(n)}); an interval's spread per unit needs it."
        )
    c = float(rec.get("confidence") or confidence)
    z = float(norm_ppf((1 + c) / 2))
    se = (float(rec["high"]) - float(rec["low"])) / (2 * z)
    sd = se * math.sqrt(int(n)) * math.sqrt(2 * (1 - correlation))
    return (
        sd,
        int(n),
        rec.get("unit") or "queries",
        f"the gate's interval; correlation {correlation:g} between two runs assumed",
    )


def _check_drop_range(metric: str, drop: float) -> None:
    """A drop the metric cannot have (at least its whole attainable range: ``drop=2``
    for a fraction, meant as 2 points = 0.02) is refused as a gate's ``max_drop`` is,
    naming the range; a name the registry does not know is left to the pilot's lookup."""
    try:
        family = parse_metric(metric).capabilities
    except Exception:  # not a registry name (a recorded gate's own metric): no range to check
        return
    check_threshold(family, drop, role="max_drop", field="drop", metric=metric)


def plan_queries(
    pilot,
    metric: str,
    drop: float,
    *,
    power: float = 0.8,
    confidence: float | None = None,
    baseline=None,
    correlation: float = 0.5,
    cluster: str = "auto",
    test: str | None = None,
) -> Plan:
    """How many queries (or classes) a significance-gated gate needs to detect a true
    ``drop`` of ``metric`` with ``power``, from a pilot: an
    :class:`~retrieval_checks.EvaluationResult` (with ``baseline=``, another model's
    result on the same queries: the measured paired differences), a gate record, or a
    history run's records (``History(path).results(run_id)``; ``test``: a glob on the
    test's name when several gates measure ``metric``). See the module for where the
    spread comes from and the assumption each source needs.

    Parameters
    ----------
    pilot:
        An :class:`~retrieval_checks.EvaluationResult`, a gate record, or a history run's
        records (a list of them).
    metric:
        The metric the gate checks.
    drop:
        The true drop to detect, > 0, in the metric's unit (0.01 for one point of a
        fraction).
    power:
        The power wanted (default 0.8).
    confidence:
        The gate's confidence: the test is one-sided at ``1 - confidence`` (default:
        the pilot's own, else 0.95).
    baseline:
        With a result as the pilot: another model's result on the same queries, whose
        paired differences give the spread.
    correlation:
        The assumed correlation of two runs' per-unit values when the pilot is one
        result (default 0.5), in [-1, 1).
    cluster:
        ``"auto"`` (default: classes where the result has labels), ``"label"`` or
        ``"query"``.
    test:
        A glob on the test's name, to pick one of a history run's records.

    Returns
    -------
    Plan
        ``units_needed`` (None when no practical number suffices) in ``unit``, the
        pilot's ``n_units``, ``mdd_now`` and ``power_now``, the spread ``sd`` and where
        it came from; ``str(plan)`` says it in a sentence.

    Raises
    ------
    InputError
        A drop that is not a finite number > 0, an invalid ``power``, ``confidence``
        or ``correlation``, ``baseline`` without a result as the pilot, a pilot that is
        none of the three, records without a gate of the metric that has an interval or
        a power (slice gates do not count), a record with no spread.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(10), 3)
    >>> x = rng.normal(size=(10, 8))[y] + 0.3 * rng.normal(size=(30, 8))
    >>> baseline = rc.evaluate(x, query_labels=y, metrics=["map"])
    >>> candidate = rc.evaluate(x + 0.05 * rng.normal(size=x.shape), query_labels=y, metrics=["map"])
    >>> plan = rc.plan_queries(candidate, "map", 0.02, baseline=baseline)
    >>> plan.units_needed, plan.unit, plan.n_units, round(plan.power_now, 2)
    (15, 'classes', 10, 0.65)
    >>> rc.plan_queries(baseline, "map", 0.02).units_needed  # one result: correlation 0.5 assumed
    68
    """
    if not isinstance(metric, str):
        raise InputError(f"metric={shown(metric)}: expected a metric name (a string).")
    if isinstance(drop, bool) or not isinstance(drop, (int, float)) or not math.isfinite(drop):
        raise InputError(f"drop={shown(drop)}: expected a finite number > 0 (the drop to detect).")
    if drop <= 0:
        raise InputError(
            f"drop={drop!r}: expected a drop > 0 in the metric's unit (0.01 for one point of a "
            "fraction); no evaluation set detects a drop of 0."
        )
    _check_drop_range(metric, drop)
    power = check_power(power, "power")
    if (
        isinstance(correlation, bool)
        or not isinstance(correlation, (int, float))
        or not -1 <= correlation < 1
    ):
        raise InputError(
            f"correlation={shown(correlation)}: expected a number in [-1, 1) (the correlation of two "
            "runs' per-query values; 0.5 by default)."
        )
    if confidence is None:
        confidence = (getattr(pilot, "config", None) or {}).get("confidence") or DEFAULTS[
            "confidence"
        ]
    confidence = float(check_option("confidence", confidence))
    level = float(f"{1 - confidence:.12g}")
    if hasattr(pilot, "per_query"):
        sd, n_units, unit, source = _from_results(pilot, baseline, metric, cluster, correlation)
        what = "an evaluation result"
    else:
        if baseline is not None:
            raise InputError("plan_queries: baseline= goes with an evaluation result as the pilot.")
        records = [pilot] if isinstance(pilot, Mapping) else list(pilot or [])
        if not records or not all(isinstance(r, Mapping) for r in records):
            raise InputError(
                f"plan_queries: the pilot is {type(pilot).__name__}; pass an EvaluationResult, a gate "
                "record, or a history run's records (History(path).results(run_id))."
            )
        rec = _pick(records, metric, test)
        sd, n_units, unit, source = _from_record(rec, correlation, confidence)
        if not (math.isfinite(sd) and sd > 0):
            raise InputError(
                f"plan_queries: the gate {rec.get('test') or rec.get('metric')!r} recorded no spread "
                f"(its {'standard error' if rec.get('power_se') is not None else 'interval width'} is "
                f"{0.0 if sd == 0 else sd}): nothing to plan from; plan from an evaluation result."
            )
        what = f"gate {rec.get('test') or rec.get('metric')}"
    se_now = sd / math.sqrt(n_units)
    need = units_needed(se_now, n_units, drop, level=level, power=power, t=True)
    return Plan(
        metric=metric,
        drop=float(drop),
        power=power,
        confidence=confidence,
        level=level,
        sd=sd,
        n_units=n_units,
        unit=unit,
        units_needed=need,
        mdd_now=detectable_drop(se_now, level=level, power=power, dof=n_units - 1),
        power_now=power_at(drop, se_now, level=level, dof=n_units - 1),
        source=what,
        assumption=source,
    )
