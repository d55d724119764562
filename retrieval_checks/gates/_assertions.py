"""Assertions for quality gates, usable with or without pytest.

Gates take results, never models: anything that answers ``result.measure(name)``
(:class:`~retrieval_checks.metrics.Measurable`), a :class:`~retrieval_checks.Gap` or a
:class:`~retrieval_checks.Comparison`. Each raises ``AssertionError`` with a message a
person can act on: the metric, the value, the interval and its confidence, the
threshold, the margin, the sample and the decision rule that failed; and reports its
outcome, passed or failed, as a :class:`~retrieval_checks.gates.GateEvent`.
``__tracebackhide__`` keeps pytest tracebacks on the caller's line.
"""

from __future__ import annotations

from ..errors import InputError
from ..metrics._measurement import Measurement
from ..metrics._names import metric_spec, parse_metric
from ..stats._compare import Comparison
from ..stats._gaps import Gap
from ..stats._intervals import bootstrap_interval
from ._events import GateEvent, emit

__all__ = [
    "assert_metric",
    "assert_map_at_least",
    "assert_recall_at_least",
    "assert_recall_at_precision",
    "assert_grouped_recall_ci",
    "assert_gap_below",
    "assert_not_worse",
    "assert_rsum",
    "assert_cam_iou_at_least",
]

_BOOTSTRAP_RESAMPLES = 1000


def _choice(value, allowed: tuple, name: str, meaning: str) -> str:
    if value not in allowed:
        raise InputError(f"{name}={value!r}: use {' or '.join(repr(a) for a in allowed)} ({meaning}).")
    return value


def _measure(result, name: str, gate: str) -> Measurement:
    """The measurement of ``name`` in ``result``, or an error that says what is wrong."""
    if not callable(getattr(result, "measure", None)):
        raise InputError(f"{gate} takes an evaluation result (from evaluate, evaluate_image_text, "
                         f"evaluate_classifier, cam_iou or accuracy), got {type(result).__name__}.")
    spec = metric_spec(name)
    if spec.name not in result:
        computed = ", ".join(result) if hasattr(result, "__iter__") else "other metrics"
        raise InputError(f"{spec.name} was not computed; computed: {computed}. Evaluate it with "
                         f"metrics=[{spec.name!r}].")
    return result.measure(spec.name)


def _interval(result, m: Measurement, confidence, seed):
    """(low, high, note) for ``m``: the result's own interval, else a class-cluster
    percentile bootstrap of the per-query values; None when neither exists."""
    if m.interval is not None:
        method = f" ({m.method})" if m.method else ""
        return m.interval[0], m.interval[1], f"{m.confidence:.0%} interval [{m.interval[0]:.4f}, {m.interval[1]:.4f}]{method}"
    caps = metric_spec(m.metric).capabilities
    if caps.interval != "bootstrap":
        return None
    config = getattr(result, "config", {}) or {}
    try:
        iv = bootstrap_interval(result, m.metric, confidence=confidence or config.get("confidence", 0.95),
                                n_resamples=_BOOTSTRAP_RESAMPLES, method="percentile",
                                seed=seed if seed is not None else config.get("seed", 0))
    except InputError:
        return None
    return iv.low, iv.high, f"{iv.confidence:.0%} interval [{iv.low:.4f}, {iv.high:.4f}] ({iv.method})"


def _event(gate: str, m: Measurement, *, passed: bool, on: str, comparison: str, threshold, bounds: dict,
           low=None, high=None, confidence=None, **extra) -> GateEvent:
    return emit(GateEvent(gate=gate, metric=m.metric, value=m.value, passed=passed, low=low, high=high,
                          confidence=confidence, on=on, comparison=comparison, threshold=threshold, bounds=bounds,
                          n=m.n, unit=m.n_unit, n_used=m.n_used, n_skipped=m.n_skipped,
                          model=m.context.get("model"), dataset=m.context.get("dataset"),
                          extra={**m.extra, **extra}))


def _f(x: float, unit: str) -> str:
    """Fractions with 4 decimals; ranks, percent and percentage points with 2."""
    return f"{x:.4f}" if unit in ("fraction", "ratio") else f"{x:.2f}"


def _named(context: dict) -> str:
    if not context:
        return ""
    return f"  model {context.get('model')!r}, dataset {context.get('dataset')!r}\n"


def assert_metric(result, name: str, *, at_least: float | None = None, at_most: float | None = None,
                  on: str = "value", confidence: float | None = None, seed: int | None = None,
                  _gate: str = "assert_metric") -> None:
    """Fail when a metric of a result is below ``at_least`` or above ``at_most``.

    ``on="value"`` (default) checks the point value; ``on="interval"`` checks the
    interval bound on the side of each threshold (lower bound against ``at_least``,
    upper bound against ``at_most``): the result's own interval when it carries one
    (grouped recall, image-text and CAM metrics, accuracy), else a class-cluster
    percentile bootstrap over the per-query values at ``confidence`` (default: the
    result's) with ``seed``.
    """
    __tracebackhide__ = True
    if at_least is None and at_most is None:
        raise InputError("assert_metric needs at_least=..., at_most=... or both.")
    _choice(on, ("value", "interval"), "on", "the point value, or the interval's bound")
    m = _measure(result, name, _gate)
    found = _interval(result, m, confidence, seed) if on == "interval" else None
    if on == "interval" and found is None:
        raise InputError(f"{m.metric} has no interval in this result (too few queries or classes?); use on='value'.")
    failures = []
    if at_least is not None:
        checked = m.value if on == "value" else found[0]
        if checked < at_least:
            failures.append(("at_least", checked, f"{_f(checked, m.unit)} < {at_least}",
                             f"short by {_f(at_least - checked, m.unit)}"))
    if at_most is not None:
        checked = m.value if on == "value" else found[1]
        if checked > at_most:
            failures.append(("at_most", checked, f"{_f(checked, m.unit)} > {at_most}",
                             f"over by {_f(checked - at_most, m.unit)}"))
    bounds = {k: v for k, v in (("at_least", at_least), ("at_most", at_most)) if v is not None}
    comparison = "between" if len(bounds) == 2 else (">=" if at_least is not None else "<=")
    _event(_gate, m, passed=not failures, on=on, comparison=comparison,
           threshold=at_least if at_least is not None else at_most, bounds=bounds,
           low=found[0] if found else None, high=found[1] if found else None,
           confidence=(m.confidence or confidence) if found else None)
    if not failures:
        return
    if found is None:
        found = _interval(result, m, confidence, seed)  # only for the message, and only on failure
    rule, _, comparison_text, margin = failures[0]
    what = "value" if on == "value" else ("interval's lower bound" if rule == "at_least" else "interval's upper bound")
    raise AssertionError(
        f"{m.metric} {what} {comparison_text} ({margin}; unit: {m.unit})\n"
        f"  value {_f(m.value, m.unit)}" + (f", {found[2]}" if found else "") + "\n"
        + (f"  sample: {m.sample}\n" if m.sample else "")
        + "".join(f"  {line}\n" for line in m.details)
        + _named(m.context)
        + f"  rule: fail when the {what} is {'below at_least' if rule == 'at_least' else 'above at_most'}"
    )


def assert_map_at_least(result, at_least: float, *, metric: str = "map", on: str = "value") -> None:
    """Fail when mAP (or a named variant: ``map@R``, ``map@10``, ``map_cut@10``...) is
    below ``at_least``."""
    __tracebackhide__ = True
    spec = parse_metric(metric)
    if spec.family not in ("map", "map@R", "map_cut", "map_capped"):
        raise InputError(f"assert_map_at_least checks an AP metric (map, map@K, map@R, ...), got {spec.name}.")
    assert_metric(result, spec.name, at_least=at_least, on=on, _gate="assert_map_at_least")


def assert_recall_at_least(result, at_least: float, *, k: int = 1, kind: str = "hit_rate", on: str = "value") -> None:
    """Fail when ``hit_rate@k`` (metric learning's Recall@K, default) or ``recall@k``
    (information-retrieval recall, ``kind="recall"``) is below ``at_least``."""
    __tracebackhide__ = True
    _choice(kind, ("hit_rate", "recall"), "kind", "Recall@K of metric learning, or IR recall")
    assert_metric(result, f"{kind}@{int(k)}", at_least=at_least, on=on, _gate="assert_recall_at_least")


def assert_recall_at_precision(result, at_least: float, *, precision: float = 0.9) -> None:
    """Fail when ``recall_at_precision@P`` is below ``at_least``; the message names the
    similarity threshold that reaches precision P (or says none does)."""
    __tracebackhide__ = True
    name = parse_metric(f"recall_at_precision@{precision}").name
    assert_metric(result, name, at_least=at_least, _gate="assert_recall_at_precision")


def assert_grouped_recall_ci(result, at_least: float, *, metric: str = "grouped_recall@1",
                             on: str = "lower") -> None:
    """Fail when the interval's lower bound (``on="lower"``, default) or the point
    value (``on="value"``) of a grouped recall is below ``at_least``."""
    __tracebackhide__ = True
    _choice(on, ("lower", "value"), "on", "the interval's lower bound, or the value")
    spec = parse_metric(metric)
    if spec.kind != "grouped":
        raise InputError(f"assert_grouped_recall_ci checks grouped_recall@K, got {spec.name}.")
    assert_metric(result, spec.name, at_least=at_least, on="interval" if on == "lower" else "value",
                  _gate="assert_grouped_recall_ci")


def assert_rsum(result, at_least: float, *, on: str = "value") -> None:
    """Fail when Rsum (percentage points, 0-600) of an image-text result is below
    ``at_least``: its value (``on="value"``, default) or the lower bound of its
    bootstrap interval over images (``on="lower"``)."""
    __tracebackhide__ = True
    _choice(on, ("value", "lower"), "on", "the value, or the bootstrap interval's lower bound")
    if on == "lower" and "rsum" in result and _measure(result, "rsum", "assert_rsum").interval is None:
        raise InputError("on='lower' needs the bootstrap interval: evaluate with n_resamples > 0.")
    assert_metric(result, "rsum", at_least=at_least, on="interval" if on == "lower" else "value",
                  _gate="assert_rsum")


def assert_cam_iou_at_least(result, at_least: float, *, on: str = "value", metric: str | None = None) -> None:
    """Fail when ``cam_iou`` or ``cam_iou_box`` (a result of :func:`retrieval_checks.cam_iou`,
    or ``evaluate_classifier``'s with ``metric=``) is below ``at_least``: its mean over
    images (``on="value"``) or the lower bound of its bootstrap interval (``on="lower"``)."""
    __tracebackhide__ = True
    _choice(on, ("value", "lower"), "on", "the value, or the interval's lower bound")
    name = metric or getattr(result, "metric", None) or "cam_iou"
    if name not in ("cam_iou", "cam_iou_box"):
        raise InputError(f"assert_cam_iou_at_least checks cam_iou or cam_iou_box, got {name!r}.")
    if on == "lower" and _measure(result, name, "assert_cam_iou_at_least").interval is None:
        raise InputError("on='lower' needs an interval: at least 2 images and n_resamples > 0.")
    assert_metric(result, name, at_least=at_least, on="interval" if on == "lower" else "value",
                  _gate="assert_cam_iou_at_least")


def assert_gap_below(gap, below: float, *, on: str = "upper") -> None:
    """Fail when a :class:`~retrieval_checks.Gap`'s upper bound (``on="upper"``, default:
    the gap is not shown to be below the limit) or its point value (``on="value"``)
    exceeds ``below``. Gaps come from :func:`retrieval_checks.generalization_gap`, or
    :func:`retrieval_checks.classification_gap` for a classifier's accuracy."""
    __tracebackhide__ = True
    _choice(on, ("upper", "value"), "on", "the interval's upper bound, or the value")
    if not isinstance(gap, Gap):
        raise InputError(
            f"assert_gap_below takes a Gap, got {type(gap).__name__}: compute it with "
            "retrieval_checks.generalization_gap(train_result, test_result, metric), or for a classifier "
            "retrieval_checks.classification_gap(model, (x_train, y_train), (x_test, y_test))."
        )
    checked = gap.high if on == "upper" else gap.value
    emit(GateEvent(gate="assert_gap_below", metric=f"{gap.metric} gap", value=gap.value, passed=bool(checked <= below),
                   low=gap.low, high=gap.high, confidence=gap.confidence, on=on, comparison="<=", threshold=below,
                   bounds={"below": below}, n=gap.n_first + gap.n_second, unit=gap.unit))
    if checked > below:
        what = "upper bound" if on == "upper" else "value"
        a, b = gap.labels
        raise AssertionError(
            f"{gap.metric} gap ({a} - {b}) {what} {checked:+.4f} > {below} (over by {checked - below:.4f})\n"
            f"  gap {gap.value:+.4f}, {gap.confidence:.0%} interval [{gap.low:+.4f}, {gap.high:+.4f}] ({gap.method})\n"
            f"  {a}: {gap.first_value:.4f} on {gap.n_first} {gap.unit}; {b}: {gap.second_value:.4f} "
            f"on {gap.n_second} {gap.unit}\n"
            f"  rule: fail when the gap's {what} is above the limit"
        )


_NOT_WORSE = {
    "significant": ("hi", "the interval's upper bound of the improvement is below -margin",
                    "is significantly worse than baseline {baseline}"),
    "non_inferior": ("lo", "the interval's lower bound of the improvement is below -margin",
                     "is not shown to be within {margin} of baseline {baseline}"),
    "value": ("d", "the point improvement is below -margin", "is worse than baseline {baseline}"),
}


def assert_not_worse(comparison: Comparison, *, margin: float = 0.0, rule: str = "significant") -> None:
    """Gate a candidate against a baseline from a paired :class:`Comparison`.

    With ``d`` the improvement (candidate - baseline, sign flipped for rank metrics
    where lower is better) and its interval [lo, hi]:

    - ``rule="significant"`` (default): fail when the candidate is significantly
      worse by more than ``margin``: hi < -margin;
    - ``rule="non_inferior"``: fail unless the data show any drop is smaller than
      ``margin``: lo < -margin fails (stricter: needs enough queries);
    - ``rule="value"``: fail when the point difference is below -margin.
    """
    __tracebackhide__ = True
    _choice(rule, tuple(_NOT_WORSE), "rule", "how a drop is judged")
    if not isinstance(comparison, Comparison):
        raise InputError(f"assert_not_worse takes a Comparison from retrieval_checks.compare, got "
                         f"{type(comparison).__name__}.")
    c = comparison
    sign = 1.0 if c.higher_is_better else -1.0
    lo, hi = sorted((sign * c.low, sign * c.high))
    d = sign * c.difference
    which, desc, verdict = _NOT_WORSE[rule]
    checked = {"hi": hi, "lo": lo, "d": d}[which]
    fails = checked < -margin
    emit(GateEvent(gate="assert_not_worse", metric=f"{c.metric} difference", value=c.difference, passed=not fails,
                   low=c.low, high=c.high, confidence=c.confidence, on=rule, comparison="improvement >=",
                   threshold=-margin if margin else 0.0, bounds={"margin": margin}, n=c.n, unit=c.unit))
    if fails:
        direction = "higher" if c.higher_is_better else "lower"
        raise AssertionError(
            f"{c.metric}: candidate {c.candidate:.4f} {verdict.format(baseline=f'{c.baseline:.4f}', margin=margin)} "
            f"(improvement {d:+.4f}, checked {checked:+.4f} < {-margin:+})\n"
            f"  difference (candidate - baseline) {c.difference:+.4f}, {c.confidence:.0%} interval "
            f"[{c.low:+.4f}, {c.high:+.4f}] ({c.method}), p={c.p_value:.3g} two-sided, "
            f"p={c.p_value_worse:.3g} for 'worse'\n"
            f"  sample: n={c.n} paired {c.unit}; {direction} is better\n"
            f"  rule ({rule}, margin {margin}): fail when {desc}"
        )
