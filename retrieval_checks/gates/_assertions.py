"""Assertions for quality gates, usable with or without pytest.

Each raises ``AssertionError`` with a message a person can act on: the metric, the
value, the interval and its confidence, the threshold, the margin, the sample sizes
and the decision rule that failed. ``__tracebackhide__`` keeps pytest tracebacks on
the caller's line.
"""

from __future__ import annotations

import numpy as np

from ..metrics._names import metric_spec, parse_metric
from ..engine._result import EvaluationResult
from ..stats._stats import Comparison, Gap
from ..errors import InputError

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


#: Callables notified of every gate's outcome (a dict), passed or failed. The pytest
#: plugin subscribes to report gates in its summary, JUnit properties and JSON; the
#: library itself never imports pytest.
OBSERVERS: list = []


def _notify(**outcome) -> None:
    for observer in list(OBSERVERS):
        observer(outcome)


def _named(result) -> str:
    """A message line naming the model and dataset, when the result carries them
    (results of the plugin's ``rc_evaluate`` with ``model=`` / ``dataset=``)."""
    config = getattr(result, "config", {}) or {}
    if config.get("model") is None and config.get("dataset") is None:
        return ""
    return f"  model {config.get('model')!r}, dataset {config.get('dataset')!r}\n"


def _fmt(x: float) -> str:
    return f"{x:.4f}"


def assert_grouped_recall_ci(result: EvaluationResult, at_least: float, *, metric: str = "grouped_recall@1",
                             on: str = "lower") -> None:
    """Fail when the interval's lower bound (``on="lower"``, default) or the point
    value (``on="value"``) of a grouped recall is below ``at_least``."""
    __tracebackhide__ = True
    if on not in ("lower", "value"):
        raise InputError(f"on={on!r}: use 'lower' (the interval's lower bound) or 'value'.")
    name = parse_metric(metric).name
    if not isinstance(result, EvaluationResult) or name not in getattr(result, "grouped", {}):
        raise InputError(f"{name} with its interval is not in this result; evaluate it with metrics=[{name!r}].")
    g = result.grouped[name]
    checked = g.low if on == "lower" else g.value
    _notify(gate="assert_grouped_recall_ci", metric=name, value=g.value, low=g.low, high=g.high,
            threshold=at_least, comparison=">=", on=on, passed=bool(checked >= at_least), n=g.n_groups, unit="groups")
    if checked < at_least:
        what = "lower bound" if on == "lower" else "value"
        raise AssertionError(
            f"{name} {what} {_fmt(checked)} < {at_least} (short by {_fmt(at_least - checked)})\n"
            f"  value {_fmt(g.value)}, {g.confidence:.0%} interval [{_fmt(g.low)}, {_fmt(g.high)}]"
            f" (Student t over groups, standard error {_fmt(g.std_error)})\n"
            f"  sample: r={g.n_groups} groups of S={g.group_size} labels, spread s={_fmt(g.group_std)}, "
            f"{g.n_queries_used} queries used, {g.n_queries_skipped} skipped, {len(g.dropped_labels)} labels "
            f"dropped ({g.n_queries_dropped} queries), "
            f"seed {g.seed}, {g.repeats} partition(s)\n"
            + _named(result)
            + f"  rule: fail when the interval's {what} is below the threshold"
        )


def assert_gap_below(gap, below: float, *, on: str = "upper", train=None, test=None,
                     confidence: float = 0.95) -> None:
    """Fail when the gap's upper bound (``on="upper"``, default: the gap is not shown
    to be below the limit) or its point value (``on="value"``) exceeds ``below``.

    ``gap`` is a :class:`~retrieval_checks.Gap` (from ``generalization_gap``, for
    retrieval results or accuracies), or a torch classifier with ``train`` and ``test``
    given as (images, labels) pairs: its top-1 accuracy gap with Newcombe's interval.
    """
    __tracebackhide__ = True
    if on not in ("upper", "value"):
        raise InputError(f"on={on!r}: use 'upper' (the interval's upper bound) or 'value'.")
    if not isinstance(gap, Gap) and (train is not None or test is not None):
        from ..classifiers._measures import classification_gap

        if train is None or test is None:
            raise InputError("a classifier's gap needs both train=(images, labels) and test=(images, labels).")
        gap = classification_gap(gap, train, test, confidence=confidence)
    if not isinstance(gap, Gap):
        raise InputError(
            f"assert_gap_below takes a Gap from retrieval_checks.generalization_gap (or a classifier with "
            f"train= and test=), got {type(gap).__name__}."
        )
    checked = gap.high if on == "upper" else gap.value
    _notify(gate="assert_gap_below", metric=f"{gap.metric} gap", value=gap.value, low=gap.low, high=gap.high,
            threshold=below, comparison="<=", on=on, passed=bool(checked <= below),
            n=gap.n_first + gap.n_second, unit=gap.unit)
    if checked > below:
        what = "upper bound" if on == "upper" else "value"
        a, b = gap.labels
        raise AssertionError(
            f"{gap.metric} gap ({a} - {b}) {what} {gap.value if on == 'value' else gap.high:+.4f} > {below} "
            f"(over by {checked - below:.4f})\n"
            f"  gap {gap.value:+.4f}, {gap.confidence:.0%} interval [{gap.low:+.4f}, {gap.high:+.4f}] ({gap.method})\n"
            f"  {a}: {_fmt(gap.first_value)} on {gap.n_first} {gap.unit}; {b}: {_fmt(gap.second_value)} "
            f"on {gap.n_second} {gap.unit}\n"
            f"  rule: fail when the gap's {what} is above the limit"
        )


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
    if rule not in ("significant", "non_inferior", "value"):
        raise InputError(f"rule={rule!r}: use 'significant', 'non_inferior' or 'value'.")
    if not isinstance(comparison, Comparison):
        raise InputError(f"assert_not_worse takes a Comparison from retrieval_checks.compare, got "
                         f"{type(comparison).__name__}.")
    c = comparison
    sign = 1.0 if c.higher_is_better else -1.0
    lo, hi = sorted((sign * c.low, sign * c.high))
    d = sign * c.difference
    checked, fails, desc = {
        "significant": (hi, hi < -margin, "the interval's upper bound of the improvement is below -margin"),
        "non_inferior": (lo, lo < -margin, "the interval's lower bound of the improvement is below -margin"),
        "value": (d, d < -margin, "the point improvement is below -margin"),
    }[rule]
    _notify(gate="assert_not_worse", metric=f"{c.metric} difference", value=c.difference, low=c.low, high=c.high,
            threshold=-margin if margin else 0.0, comparison="improvement >=", on=rule, passed=not fails, n=c.n, unit=c.unit)
    if fails:
        direction = "higher" if c.higher_is_better else "lower"
        verdict = {
            "significant": f"is significantly worse than baseline {_fmt(c.baseline)}",
            "non_inferior": f"is not shown to be within {margin} of baseline {_fmt(c.baseline)}",
            "value": f"is worse than baseline {_fmt(c.baseline)}",
        }[rule]
        raise AssertionError(
            f"{c.metric}: candidate {_fmt(c.candidate)} {verdict} "
            f"(improvement {d:+.4f}, checked {checked:+.4f} < {-margin:+})\n"
            f"  difference (candidate - baseline) {c.difference:+.4f}, {c.confidence:.0%} interval "
            f"[{c.low:+.4f}, {c.high:+.4f}] ({c.method}), p={c.p_value:.3g} two-sided, "
            f"p={c.p_value_worse:.3g} for 'worse'\n"
            f"  sample: n={c.n} paired {c.unit}; {direction} is better\n"
            f"  rule ({rule}, margin {margin}): fail when {desc}"
        )


def assert_rsum(result, at_least: float, *, on: str = "value") -> None:
    """Fail when Rsum (percentage points, 0-600) of an :class:`ImageTextResult` is
    below ``at_least``: its value (``on="value"``, default) or the lower bound of its
    bootstrap interval over images (``on="lower"``)."""
    __tracebackhide__ = True
    from ..engine._image_text import ImageTextResult

    if on not in ("value", "lower"):
        raise InputError(f"on={on!r}: use 'value' or 'lower' (the bootstrap interval's lower bound).")
    if not isinstance(result, ImageTextResult) or "rsum" not in result:
        raise InputError("assert_rsum takes the result of retrieval_checks.evaluate_image_text with 'rsum' computed.")
    value = result["rsum"]
    low, high = result.intervals.get("rsum", (float("nan"), float("nan")))
    if on == "lower" and low != low:
        raise InputError("on='lower' needs the bootstrap interval: evaluate with n_resamples > 0.")
    checked = value if on == "value" else low
    _notify(gate="assert_rsum", metric="rsum", value=value, low=low, high=high, threshold=at_least, comparison=">=",
            on=on, passed=bool(checked >= at_least), n=result.n_images, unit="images")
    if checked < at_least:
        parts = ", ".join(f"{k} {result[k] * 100:.1f}" for d in ("i2t", "t2i") for k in
                          (f"{d}_recall@1", f"{d}_recall@5", f"{d}_recall@10") if k in result)
        what = "value" if on == "value" else "interval's lower bound"
        raise AssertionError(
            f"rsum {what} {checked:.2f} < {at_least} (short by {at_least - checked:.2f} percentage points)\n"
            f"  rsum {value:.2f} (0-600), {result.confidence:.0%} interval [{low:.2f}, {high:.2f}] "
            f"(percentile bootstrap over images, {result.n_resamples} resamples)\n"
            + (f"  components (percent): {parts}\n" if parts else "")
            + f"  sample: {result.n_images} images, {result.n_captions} captions, protocol {result.protocol}\n"
            f"  rule: fail when the rsum {what} is below the threshold"
        )


def _worst_classes(result: EvaluationResult, name: str, n: int = 3) -> str:
    """The n classes with the lowest mean per-query value (highest for rank metrics)."""
    values = result.per_query.get(name)
    codes = getattr(result, "query_label_codes", None)
    if values is None or codes is None:
        return ""
    used = ~np.isnan(values)
    if not used.any():
        return ""
    inv_codes, inv = np.unique(codes[used], return_inverse=True)
    sums = np.bincount(inv, weights=values[used])
    cnts = np.bincount(inv)
    means = sums / cnts
    spec = parse_metric(name)
    order = np.argsort(means if spec.higher_is_better else -means, kind="stable")[:n]
    labels = getattr(result, "label_values", None)
    shown = []
    for i in order:
        label = labels[inv_codes[i]] if labels is not None else int(inv_codes[i])
        label = label.item() if hasattr(label, "item") else label
        shown.append(f"{label!r}: {means[i]:.4f} over {int(cnts[i])} queries")
    return "  worst classes: " + "; ".join(shown) + "\n"


def assert_metric(result, name: str, *, at_least: float | None = None, at_most: float | None = None,
                  on: str = "value") -> None:
    """Fail when a metric of a result is below ``at_least`` or above ``at_most``.

    ``on="value"`` (default) checks the point value; ``on="interval"`` checks the
    interval bound on the side of the threshold (lower bound against ``at_least``,
    upper bound against ``at_most``), from ``result.intervals`` when the metric has
    one (grouped recall, image-text metrics) or else a class-cluster bootstrap
    (:func:`retrieval_checks.bootstrap_interval`).
    """
    __tracebackhide__ = True
    from ..engine._image_text import ImageTextResult
    from ..stats._stats import bootstrap_interval

    if at_least is None and at_most is None:
        raise InputError("assert_metric needs at_least=..., at_most=... or both.")
    if on not in ("value", "interval"):
        raise InputError(f"on={on!r}: use 'value' or 'interval'.")
    from ..classifiers._measures import ClassifierResult
    if not isinstance(result, (EvaluationResult, ImageTextResult, ClassifierResult)):
        raise InputError(f"assert_metric takes an evaluation result, got {type(result).__name__}.")
    spec = metric_spec(name)
    if spec.name not in result:
        raise InputError(f"{spec.name} was not computed; computed: {', '.join(result)}.")
    value = result[spec.name]

    def interval():
        """(low, high, note) from the result, else a class-cluster bootstrap; None if undefined."""
        if spec.name in getattr(result, "intervals", {}):
            lo, hi = result.intervals[spec.name]
            conf = (result.grouped[spec.name].confidence if spec.name in getattr(result, "grouped", {})
                    else getattr(result, "confidence", 0.95))
            return lo, hi, f"{conf:.0%} interval [{lo:.4f}, {hi:.4f}]"
        if isinstance(result, EvaluationResult) and spec.name in result.per_query and spec.family != "medr":
            try:
                iv = bootstrap_interval(result, spec.name, n_resamples=1000, method="percentile")
            except InputError:
                return None
            return iv.low, iv.high, f"{iv.confidence:.0%} interval [{iv.low:.4f}, {iv.high:.4f}] ({iv.method})"
        return None

    found = None
    if on == "interval":
        found = interval()
        if found is None:
            raise InputError(f"{spec.name} has no interval in this result (too few queries or classes?); use on='value'.")
        low, high = found[0], found[1]
    failures = []
    if at_least is not None:
        checked = value if on == "value" else low
        if checked < at_least:
            failures.append(("at_least", checked, at_least, f"{checked:.4f} < {at_least}",
                             f"short by {at_least - checked:.4f}"))
    if at_most is not None:
        checked = value if on == "value" else high
        if checked > at_most:
            failures.append(("at_most", checked, at_most, f"{checked:.4f} > {at_most}",
                             f"over by {checked - at_most:.4f}"))
    _notify(gate="assert_metric", metric=spec.name, value=value, low=found[0] if found else None,
            high=found[1] if found else None, threshold=at_least if at_least is not None else at_most,
            comparison=">=" if at_least is not None else "<=", on=on, passed=not failures,
            n=getattr(result, "n_used", getattr(result, "n_images", None)),
            unit="queries" if isinstance(result, EvaluationResult) else "images")  # classifiers: images too
    if not failures:
        return
    if found is None:
        found = interval()  # only for the message, and only on failure
    interval_note = found[2] if found is not None else ""
    rule, _, _, comparison, margin = failures[0]
    what = "value" if on == "value" else ("interval's lower bound" if rule == "at_least" else "interval's upper bound")
    sample = ""
    if isinstance(result, ClassifierResult):
        sample = f"  sample: {result.n_images} images\n"
    elif isinstance(result, EvaluationResult):
        sample = f"  sample: {result.n_used} queries used, {result.n_skipped} skipped, gallery {result.config.get('n_gallery')}\n"
        sample += _named(result)
    else:
        sample = f"  sample: {result.n_images} images, {result.n_captions} captions, protocol {result.protocol}\n"
    raise AssertionError(
        f"{spec.name} {what} {comparison} ({margin}; unit: {spec.unit})\n"
        f"  value {value:.4f}" + (f", {interval_note}" if interval_note else "") + "\n"
        + sample
        + (_worst_classes(result, spec.name) if isinstance(result, EvaluationResult) else "")
        + f"  rule: fail when the {what} is {'below at_least' if rule == 'at_least' else 'above at_most'}"
    )


def assert_map_at_least(result, at_least: float, *, metric: str = "map", on: str = "value") -> None:
    """Fail when mAP (or a named variant: ``map@R``, ``map@10``, ``map_cut@10``...) is
    below ``at_least``."""
    __tracebackhide__ = True
    spec = parse_metric(metric)
    if spec.family not in ("map", "map@R", "map_cut", "map_capped"):
        raise InputError(f"assert_map_at_least checks an AP metric (map, map@K, map@R, ...), got {spec.name}.")
    assert_metric(result, spec.name, at_least=at_least, on=on)


def assert_recall_at_least(result, at_least: float, *, k: int = 1, kind: str = "hit_rate", on: str = "value") -> None:
    """Fail when ``hit_rate@k`` (metric learning's Recall@K, default) or ``recall@k``
    (information-retrieval recall, ``kind="recall"``) is below ``at_least``."""
    __tracebackhide__ = True
    if kind not in ("hit_rate", "recall"):
        raise InputError(f"kind={kind!r}: use 'hit_rate' (Recall@K of metric learning) or 'recall' (IR recall).")
    assert_metric(result, f"{kind}@{int(k)}", at_least=at_least, on=on)


def assert_recall_at_precision(result, at_least: float, *, precision: float = 0.9) -> None:
    """Fail when ``recall_at_precision@P`` is below ``at_least``; the message names the
    threshold that reaches precision P (or says none does)."""
    __tracebackhide__ = True
    name = parse_metric(f"recall_at_precision@{precision}").name
    if not isinstance(result, EvaluationResult) or name not in result:
        raise InputError(f"{name} was not computed; evaluate it with metrics=[{name!r}].")
    value = result[name]
    curve = getattr(result, "pr_curve", None)
    _notify(gate="assert_recall_at_precision", metric=name, value=value, low=None, high=None, threshold=at_least,
            comparison=">=", on="value", passed=bool(value >= at_least), n=result.n_used, unit="queries",
            operating_threshold=result.thresholds.get(name), **({"curve": curve} if curve else {}))
    if value < at_least:
        t = result.thresholds.get(name)
        counts = result.pair_counts.get(name, {})
        where = f"at similarity threshold {t:.6g}" if t is not None else "no threshold reaches that precision"
        raise AssertionError(
            f"{name} = {value:.4f} < {at_least} (short by {at_least - value:.4f})\n"
            f"  {where}; TP {counts.get('tp')}, FP {counts.get('fp')}, FN {counts.get('fn')} over "
            f"{counts.get('n_positive')} positive and {counts.get('n_negative')} negative pairs\n"
            + _named(result)
            + f"  rule: fail when the highest pair recall at precision >= {precision} is below the threshold"
        )


def assert_cam_iou_at_least(result, at_least: float, *, on: str = "value") -> None:
    """Fail when ``cam_iou`` or ``cam_iou_box`` (a result of :func:`retrieval_checks.cam_iou`)
    is below ``at_least``: its mean over images (``on="value"``) or the lower bound of
    its bootstrap interval over images (``on="lower"``)."""
    __tracebackhide__ = True
    from ..classifiers._localization import LocalizationResult

    if on not in ("value", "lower"):
        raise InputError(f"on={on!r}: use 'value' or 'lower' (the interval's lower bound).")
    if not isinstance(result, LocalizationResult):
        raise InputError(f"assert_cam_iou_at_least takes the result of cam_iou / cam_iou_box, got "
                         f"{type(result).__name__}.")
    checked = result.value if on == "value" else result.low
    if checked != checked:
        raise InputError("on='lower' needs an interval: at least 2 images and n_resamples > 0.")
    _notify(gate="assert_cam_iou_at_least", metric=result.metric, value=result.value, low=result.low,
            high=result.high, threshold=at_least, comparison=">=", on=on, passed=bool(checked >= at_least),
            n=result.n_images, unit="images")
    if checked < at_least:
        worst = np.argsort(result.per_image, kind="stable")[:3]
        what = "value" if on == "value" else "interval's lower bound"
        raise AssertionError(
            f"{result.metric} {what} {checked:.4f} < {at_least} (short by {at_least - checked:.4f})\n"
            f"  value {result.value:.4f}, {result.confidence:.0%} interval [{result.low:.4f}, {result.high:.4f}] "
            f"(percentile bootstrap over images)\n"
            f"  sample: {result.n_images} images, threshold rho={result.rho}; "
            f"{float(np.mean(result.per_image == 0)):.1%} of images with IoU 0\n"
            f"  worst images: " + "; ".join(f"#{i}: {result.per_image[i]:.3f}" for i in worst) + "\n"
            f"  rule: fail when the {what} is below the threshold"
        )
