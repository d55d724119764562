"""Assertions for quality gates, usable with or without pytest.

Gates take results, never models: anything that answers ``result.measure(name)``
(:class:`~retrieval_checks.metrics.Measurable`), a :class:`~retrieval_checks.Gap` or a
:class:`~retrieval_checks.Comparison`. Each raises ``AssertionError`` with a message a
person can act on: the metric, the value, the interval and its confidence, the
threshold, the margin, the sample (``n_used / n_skipped`` queries) and the decision
rule that failed; and reports its outcome, passed or failed, as a
:class:`~retrieval_checks.gates.GateEvent`. ``__tracebackhide__`` keeps pytest
tracebacks on the caller's line.

Gates fail closed. Every threshold is checked when the gate is called, against the
metric's unit and attainable range (:func:`~retrieval_checks.metrics.check_threshold`):
NaN, infinities, a percentage written for a fraction (``70``) and a threshold that
makes a gate that can never fail are refused with an
:class:`~retrieval_checks.InputError` naming the field and the fix. Skipped queries
(no relevant gallery item) are reported: the gate warns (``RuntimeWarning``) and
records the warning on its event, and ``max_skipped=`` (a count, or a fraction of
the queries) makes it fail when more are skipped. A value or interval bound that is
NaN fails the gate: it can never pass unchecked.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping

import numpy as np

from .._suggest import hint, shown
from ..engine._result import fewest_ranked_relevant, ranked_counts, refuse_vacuous
from ..errors import InputError, IntervalWarning, MetricNameError, PowerWarning
from ..metrics._measurement import Measurement
from ..metrics._names import MetricSpec, image_text_analogue, metric_spec, parse_metric
from ..metrics._registry import FAMILIES, Family
from ..metrics._thresholds import check_finite, pair_constant, pair_floor
from ..options import DEFAULTS
from ..stats._compare import Comparison
from ..stats._gaps import Gap, gap_notes
from ..stats._intervals import bootstrap_interval, few_units_note, wilson_interval
from ..stats._power import check_power
from ._events import GateEvent, emit_warned
from ._exact import exceeds
from ._family import (
    bound_power,
    bound_power_note,
    claimed,
    comparison_test,
    deferrable,
    family_fields,
    family_of,
    power_note,
    unclaimed,
)
from ._regression import checked_option as check_option
from ._rsum import RANKED_BY, refuse_certain_components
from ._spec import GATE_FIELDS, skipped_limit

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
    """``value`` when it is one of ``allowed``; else an InputError naming the option,
    the choices and the closest one."""
    if not isinstance(value, str) or value not in allowed:
        close = hint(value, allowed) if isinstance(value, str) else ""
        raise InputError(
            f"{name}={shown(value)}: use {' or '.join(repr(a) for a in allowed)} ({meaning}).{close}"
        )
    return value


def _lower_bound_on(on) -> str:
    """``on`` of a gate that checks a lower bound (at_least): ``"value"``, or ``"interval"``
    (the interval's lower bound), the word of :func:`assert_metric` and YAML checks;
    ``"lower"`` is the same as ``"interval"`` (the word some gates took alone, each
    refusing the other's: a new user's trial)."""
    _choice(
        on,
        ("value", "interval", "lower"),
        "on",
        "the value, or the interval's lower bound: 'interval', or 'lower', the same",
    )
    return "interval" if on == "lower" else on


def _require_result(result, gate: str) -> None:
    """An evaluation result, and not one in which every query retrieved itself (the
    queries are the gallery: ``evaluate`` warns, a suite's check fails, and so does a
    gate)."""
    __tracebackhide__ = True
    if not callable(getattr(result, "measure", None)) or not hasattr(result, "__contains__"):
        raise InputError(
            f"{gate} takes an evaluation result (from evaluate, evaluate_image_text, "
            f"evaluate_classifier, cam_iou or accuracy) as its first argument, got "
            f"{type(result).__name__}."
        )
    refuse_vacuous(result, gate)


def computed_metrics(result) -> list[str]:
    """The metrics a result holds: its names when it is iterable (evaluate's results),
    else its ``metric`` (a CAM result), else the parameterless registry names it
    answers to (accuracy's result holds ``accuracy``)."""
    if hasattr(result, "__iter__"):
        try:
            return [str(k) for k in result]
        except Exception:  # noqa: BLE001 - only for a message
            return []
    metric = getattr(result, "metric", None)
    if isinstance(metric, str):
        return [metric]
    found = []
    for name, fam in FAMILIES.items():
        if "@" in fam.template:
            continue
        try:
            if name in result:
                found.append(name)
        except Exception:  # noqa: BLE001 - only for a message
            continue
    return found


def _spec(metric) -> MetricSpec:
    """``metric`` parsed, unless it already is (a suite's check carries its MetricSpec from
    the YAML to the verdict: parsed once)."""
    return metric if isinstance(metric, MetricSpec) else metric_spec(metric)


def _measure(result, name, gate: str) -> Measurement:
    """The measurement of ``name`` in ``result``, or an error that says what is wrong."""
    _require_result(result, gate)
    spec = _spec(name)
    if spec.name not in result:
        held = computed_metrics(result)
        computed = ", ".join(held) if held else "nothing the gates know"
        if len(computed) > 400:
            computed = computed[:380] + f"... ({len(held)} metrics)"
        name = (
            spec.name
            if len(spec.name) <= 60
            else f"{spec.name[:40]}...({len(spec.name)} characters)"
        )
        if any(_is_image_text(h) for h in held) and not _is_image_text(spec.name):
            raise InputError(  # an image-text result: a retrieval name has its counterparts
                f"{name} is a retrieval metric and this {type(result).__name__} holds the "
                f"image-text ones: {computed}.{image_text_analogue(spec)}"
            )
        raise InputError(
            f"{name} was not computed; this {type(result).__name__} holds: {computed}. Gate one "
            f"of those, or evaluate {name} (metrics=[{name!r}])."
        )
    return result.measure(spec.name)


def max_rank(result, metric) -> tuple[float | None, str]:
    """The largest rank a query of ``result`` can get for the rank metric ``metric``
    (medr, meanr, i2t_medr...), and why; (None, "") when the result does not say.

    An evaluate result: per used query, its candidates less its other relevant items,
    plus one (every non-relevant candidate ranked first); with ``empty_queries="zero"``
    a query without a relevant item ranks n_candidates + 1. An image-text result: the
    captions an image ranks (i2t), the images a caption ranks (t2i; 1000 per fold
    under the 1k protocols)."""
    try:
        fam = _spec(metric).capabilities
    except (MetricNameError, AttributeError):
        return None, ""
    if fam.unit != "rank":
        return None, ""
    try:
        if fam.kind == "crossmodal":
            n_images, n_captions = (
                getattr(result, "n_images", None),
                getattr(result, "n_captions", None),
            )
            if (
                fam.name.startswith("i2t")
                and isinstance(n_captions, numbers.Integral)
                and n_captions >= 1
            ):
                return float(n_captions), f"an image ranks the {int(n_captions)} captions"
            if (
                fam.name.startswith("t2i")
                and isinstance(n_images, numbers.Integral)
                and n_images >= 1
            ):
                protocol = getattr(result, "protocol", None)
                n = min(int(n_images), 1000) if protocol in ("1k", "5fold1k") else int(n_images)
                return float(n), f"a caption ranks {n} images"
            return None, ""
        n_candidates = getattr(result, "n_candidates", None)
        n_relevant = getattr(result, "n_relevant", None)
        if n_candidates is None:
            return None, ""
        cand = np.asarray(n_candidates, dtype=np.float64).reshape(-1)
        if cand.size == 0 or not np.isfinite(cand).all():
            return None, ""
        config = getattr(result, "config", None)
        if isinstance(config, dict) and config.get("source") == "run":
            # a run: relevant documents it never retrieved rank at the censored depth + 1
            depth = config.get("depth")
            if isinstance(depth, numbers.Integral) and depth >= 1:
                return float(depth) + 1, (
                    f"the run retrieves at most {int(depth)} documents per query; a query "
                    "whose relevant documents were not retrieved ranks depth + 1"
                )
            return None, ""
        zero = isinstance(config, dict) and config.get("empty_queries") == "zero"
        if n_relevant is not None and np.shape(n_relevant) == np.shape(n_candidates):
            rel = np.asarray(n_relevant, dtype=np.float64).reshape(-1)
            used = rel > 0
            worst = float(np.max(cand[used] - rel[used] + 1)) if used.any() else 0.0
            if zero and (~used).any():
                worst = max(worst, float(np.max(cand[~used])) + 1)
            if worst >= 1:
                return worst, (
                    f"{int(np.max(cand))} candidates per query; a first relevant item ranks at most "
                    "n_candidates - n_relevant + 1"
                    + (
                        ", a query without one n_candidates + 1 under empty_queries='zero'"
                        if zero
                        else ""
                    )
                )
            return None, ""
        top = float(np.max(cand)) + (1 if zero else 0)
        return top, f"{int(np.max(cand))} candidates per query" + (
            " (+1 under empty_queries='zero')" if zero else ""
        )
    except (TypeError, ValueError):
        return None, ""


def _family(metric: str) -> Family | None:
    """The registry family of a metric name (``"map"``, ``"accuracy"``), None when unknown."""
    try:
        return metric_spec(metric).capabilities
    except (MetricNameError, AttributeError):
        return None


def _confidence(confidence) -> float | None:
    return None if confidence is None else float(GATE_FIELDS["confidence"].check(confidence))


def _seed(seed) -> int | None:
    return None if seed is None else int(check_option("seed", seed))


def _pct(c: float) -> str:
    return f"{round(c * 100, 4):g}%"


def _iv(low, high, digits: int = 4, sign: str = "") -> str:
    """An interval as ``[0.7012, 0.7420]`` (``undefined`` for NaN bounds)."""

    def one(x):
        if x is None:
            return "none"
        x = float(x)
        return "NaN" if math.isnan(x) else f"{x:{sign}.{digits}f}"

    return f"[{one(low)}, {one(high)}]"


def _interval(result, m: Measurement, confidence, seed, spec=None):
    """((low, high, confidence, note, n, unit), None) for ``m`` (``n`` independent units
    of ``unit`` behind the interval): the result's own interval, else
    a class-cluster percentile bootstrap of the per-query values at ``confidence``
    (explicit, else the result's ``config["confidence"]``, else the default, said in
    the note) with ``seed`` (explicit, else the result's ``seed`` or ``group_seed``);
    (None, why) when neither exists."""
    if m.interval is not None:
        method = f" ({m.method})" if m.method else ""
        conf = m.confidence
        label = f"{_pct(conf)} interval" if isinstance(conf, numbers.Real) else "interval"
        return (
            m.interval[0],
            m.interval[1],
            conf,
            f"{label} {_iv(*m.interval)}{method}",
            m.n,
            m.n_unit,
        ), None
    caps = (spec or _spec(m.metric)).capabilities
    config = getattr(result, "config", None)
    config = config if isinstance(config, dict) else {}
    default = ""
    if confidence is None:
        confidence = config.get("confidence")
    if confidence is None:
        confidence, default = (
            DEFAULTS["confidence"],
            " (the default confidence; pass confidence= to change it)",
        )
    if caps.interval == "wilson":
        n_correct, n = getattr(result, "n_correct", None), getattr(result, "n", None)
        if (
            isinstance(n_correct, numbers.Integral)
            and isinstance(n, numbers.Integral)
            and n >= 1
            and 0 <= n_correct <= n
        ):
            low, high = wilson_interval(int(n_correct), int(n), confidence)
            low, high = max(0.0, low), min(1.0, high)
            note = f"{_pct(confidence)} interval {_iv(low, high)} (Wilson score, {n_correct} of {n} correct){default}"
            return (low, high, confidence, note, int(n), "samples"), None
        return (
            None,
            f"{m.metric}: the result holds no counts of correct predictions for Wilson's interval",
        )
    if caps.interval == "images":
        fix = (
            "at least 2 images and n_resamples > 0"
            if caps.kind == "classifier"
            else "evaluate with n_resamples > 0 (the bootstrap over images)"
        )
        return (
            None,
            f"{m.metric} has no interval: its bootstrap over images was not computed; {fix}",
        )
    if caps.interval != "bootstrap":
        return (
            None,
            f"{m.metric} has no interval ({caps.interval or 'none is defined for this metric'})",
        )
    if seed is None:
        seed = config.get("seed", config.get("group_seed", DEFAULTS["seed"]))
    try:
        with (
            warnings.catch_warnings()
        ):  # its few-units warning: the gate issues and records its own
            warnings.simplefilter("ignore", IntervalWarning)
            iv = bootstrap_interval(
                result,
                m.metric,
                confidence=confidence,
                n_resamples=_BOOTSTRAP_RESAMPLES,
                method="percentile",
                seed=seed,
            )
    except InputError as exc:
        return None, str(exc)
    note = (
        f"{_pct(iv.confidence)} interval {_iv(iv.low, iv.high)} ({iv.method}, seed {seed}){default}"
    )
    return (iv.low, iv.high, iv.confidence, note, iv.n, iv.unit), None


def _said(notes, interval_notes, weak=None) -> list[tuple[str, type[Warning]]]:
    """Each note as a RuntimeWarning, an interval's (``interval_notes``) as an
    :class:`~retrieval_checks.errors.IntervalWarning`, ``weak`` (a gate that cannot see
    its tolerance) as a :class:`~retrieval_checks.errors.PowerWarning`: what
    :func:`.emit_warned` says."""
    out = [
        (f"retrieval-checks: {n}", IntervalWarning if n in interval_notes else RuntimeWarning)
        for n in notes
    ]
    return out + ([(f"retrieval-checks: {weak}", PowerWarning)] if weak else [])


def _skipped(m: Measurement, max_skipped, gate: str) -> tuple[list, str | None]:
    """(warnings, failure) about the queries ``m`` skipped: a warning when any was
    skipped, and a failure when more than ``max_skipped`` (a count, or a fraction of
    the queries) were."""
    options = m.extra.get("options") if isinstance(m.extra, dict) else None
    run = isinstance(options, dict) and "queries" in options  # evaluate_run's query set option
    why = "no judged relevant document in the qrels" if run else "no relevant gallery item"
    level = options.get("relevance_level", 1) if isinstance(options, dict) else 1
    if isinstance(level, int) and level > 1:
        why += f" at relevance_level >= {level}"
    remedy, fix = "empty_queries='error'", "fix the labels"
    if _is_image_text(m.metric):  # the images dropped for having no caption
        why = "images without a caption, dropped"
        remedy, fix = "images_without_captions='error'", "give each image its captions"
    return _skip_check(m.metric, m.n_used, m.n_skipped, max_skipped, gate, why, remedy, fix)


def _is_image_text(metric: str) -> bool:
    try:
        return parse_metric(metric).kind == "crossmodal"
    except MetricNameError:
        return False


def _outside_notes(m: Measurement, gate: str) -> list[str]:
    """A warning when queries are outside the query set the value averages
    (``evaluate_run``'s ``queries="run"`` / ``"qrels"``: trec_eval's definition, not
    skipped queries): the gate sees only the queries in the set, as few as they are."""
    outside = m.extra.get("queries_outside")
    if not isinstance(outside, int) or outside <= 0:
        return []
    n_used, n_skipped = int(m.n_used or 0), int(m.n_skipped or 0)
    total = n_used + n_skipped + outside
    queries = m.extra.get("queries")
    return [
        f"{gate}: {m.metric} averages {n_used} of {total} queries: {outside} are outside the query "
        f"set (queries={queries!r}: trec_eval leaves them out by definition), so the gate "
        f"sees {n_used / total:.0%} of the queries. To average over every judged query (those "
        "missing from the run score 0), evaluate with queries='qrels' (trec_eval -c); "
        "queries='both' averages every query of the run and the qrels."
    ]


def _tie_notes(m: Measurement, at_least, at_most, gate: str) -> list[str]:
    """A warning when ``m``'s value depends on the order of tied scores by more than
    :meth:`EvaluationResult.tie_note`'s tolerance, saying whether the gate's verdict
    does too (a threshold inside the range of values over tie orderings)."""
    rng = m.extra.get("tie_range")
    if not rng or not any(line.startswith("ties:") for line in m.details):
        return []
    lo, hi = rng
    inside = [
        f"{name}={_g(t)}"
        for name, t, splits in (
            ("at_least", at_least, lambda t: lo < t <= hi),
            ("at_most", at_most, lambda t: lo <= t < hi),
        )
        if t is not None and splits(t)
    ]
    verdict = (
        f"the verdict depends on it: {', '.join(inside)} lies inside that range, so another tie order "
        "would decide otherwise"
        if inside
        else "the verdict is the same under every tie order"
    )
    share = m.extra.get("tied_share")
    share = "" if share is None else f"{share:.1%} of relevant items tie with a non-relevant one; "
    ties = m.extra.get("ties")
    worst = lo if m.higher_is_better else hi
    if m.value == worst:
        advice = (
            "this value is already the worst order's; break the ties in the model (finer scores, e.g. longer "
            "codes) to narrow it"
        )
    else:
        policy = (
            "ties='pessimistic' gives it"
            if not m.metric.startswith("map@") or m.metric == "map@R"
            else "map@K is not monotone in rank, so no policy gives it"
        )
        advice = (
            f"the worst order gives {_f(worst, m.unit)} ({policy}; result.tie_range() has it); break the "
            f"ties in the model (finer scores, e.g. longer codes) or gate on the worst order"
        )
    return [
        f"{gate}: {m.metric} ranges from {_f(lo, m.unit)} to {_f(hi, m.unit)} over the orders of tied scores "
        f"({share}this value is ties={ties!r}); {verdict}; {advice}."
    ]


def _skip_check(
    metric: str,
    n_used,
    n_skipped,
    max_skipped,
    gate: str,
    why: str = "no relevant gallery item",
    remedy: str = "empty_queries='error'",
    fix: str = "fix the labels",
) -> tuple[list, str | None]:
    """:func:`_skipped` from the counts of one set of queries (``why``: what a skipped
    query lacks; ``remedy``: the evaluation option that refuses such queries; ``fix``:
    what gives them what they lack)."""
    n_skipped = int(n_skipped or 0)
    if not n_skipped:
        return [], None
    n_used = int(n_used or 0)
    n_queries = n_used + n_skipped
    m = Measurement(metric=metric, value=math.nan, unit="")
    text = (
        f"{gate}: {m.metric} skipped {n_skipped} of {n_queries} queries ({why}): "
        f"n_used {n_used} / n_skipped {n_skipped}, and the value averages the used ones only. To fail the "
        f"gate instead, set max_skipped= (a count, or a fraction of the queries) or evaluate with "
        f"{remedy}."
    )
    failure = None
    limit = skipped_limit(n_skipped, n_used, max_skipped)
    if limit is not None:
        failure = (
            f"{m.metric}: {n_skipped} of {n_queries} queries skipped (n_used {n_used} / n_skipped "
            f"{n_skipped}), more than max_skipped={max_skipped!r} ({limit}); queries skipped for "
            f"{why} change the value without notice: {fix} or raise max_skipped"
        )
    return [text], failure


def _event(
    gate: str,
    m: Measurement,
    *,
    passed: bool,
    on: str,
    comparison: str,
    threshold,
    bounds: dict,
    low=None,
    high=None,
    confidence=None,
    warnings_=(),
    said=(),
    **extra,
) -> GateEvent:
    return emit_warned(
        GateEvent(
            gate=gate,
            metric=m.metric,
            value=m.value,
            passed=passed,
            low=low,
            high=high,
            confidence=confidence,
            on=on,
            comparison=comparison,
            threshold=threshold,
            bounds=bounds,
            n=m.n,
            unit=m.n_unit,
            n_used=m.n_used,
            n_skipped=m.n_skipped,
            model=m.context.get("model"),
            dataset=m.context.get("dataset"),
            warnings=list(warnings_),
            extra={**m.extra, **extra},
        ),
        said,
    )


def _f(x: float, unit: str) -> str:
    """Fractions with 4 decimals; ranks, percent and percentage points with 2."""
    return f"{x:.4f}" if unit in ("fraction", "ratio") else f"{x:.2f}"


def _g(x: float) -> str:
    return f"{x:.6g}"


def _named(context: dict) -> str:
    if not context:
        return ""
    return f"  model {context.get('model')!r}, dataset {context.get('dataset')!r}\n"


def _used_line(m: Measurement) -> str:
    if m.n_used is None and m.n_skipped is None:
        return ""
    outside = m.extra.get("queries_outside")
    outside = (
        f" ({outside} outside the query set, queries={m.extra.get('queries')!r}: not counted as "
        "skipped)"
        if outside
        else ""
    )
    return f"  queries: n_used {m.n_used} / n_skipped {m.n_skipped or 0}{outside}\n"


def _holds(result, name: str) -> bool:
    try:
        return name in result
    except TypeError:
        return False


def certain_k(result, spec) -> tuple[int | None, str]:
    """The smallest K at which ``hit_rate@K`` / ``recall@K`` / ``i2t_recall@K`` /
    ``t2i_recall@K`` / ``grouped_recall@K`` of ``result`` is 1 for every query whatever
    the model (K reaches past every non-relevant candidate; for grouped recall, past
    every non-relevant item of the query's group, in every partition), and why; (None,
    "") when unknown or not such a metric."""
    fam = getattr(spec, "capabilities", None)
    if fam is None or spec.k is None:
        return None, ""
    if fam.kind == "grouped":
        grouped = getattr(result, "grouped", None)
        g = grouped.get(spec.name) if isinstance(grouped, Mapping) else None
        k = getattr(g, "certain_k", None)
        if not isinstance(k, numbers.Integral) or isinstance(k, bool):
            return None, ""
        size = getattr(g, "group_size", None)
        return int(k), (
            "past every non-relevant item of every query's group"
            + (f" (groups of {size} labels)" if isinstance(size, numbers.Integral) else "")
        )
    if fam.kind == "crossmodal" and fam.name in ("i2t_recall", "t2i_recall"):
        certain = (getattr(result, "config", None) or {}).get("certain_k", {})
        k = certain.get(fam.name[:3]) if isinstance(certain, dict) else None
        what = RANKED_BY[fam.name[:3]]
        return (
            (int(k), f"past the non-relevant {what}")
            if isinstance(k, numbers.Integral)
            else (None, "")
        )
    if fam.name not in ("hit_rate", "recall"):
        return None, ""
    config = getattr(result, "config", None) or {}
    if config.get("source") == "run":  # a run ranks what it retrieved: another run finds more
        return None, ""
    counts = ranked_counts(result)
    if counts is None:
        return None, ""
    cand, rel = counts
    if config.get("ignore_identical_ids"):  # count only the relevant items that surely rank
        fewest = fewest_ranked_relevant(result, cand, rel)
        if fewest is None:
            return None, ""
        rel = np.maximum(fewest, 0.0)
        if (rel == 0).any():  # a query may rank none of its relevant items: never certain
            return None, ""
    used = rel > 0
    if not used.any():
        return None, ""
    k = cand[used] - rel[used] + 1 if fam.name == "hit_rate" else cand[used]
    return int(k.max()), "past every non-relevant candidate of every query"


def _pair_totals(result, spec) -> tuple[int, int] | None:
    """(positive, negative) pairs behind the pair metric ``spec`` of ``result``
    (``result.pair_counts[name]``); None when the result does not record them."""
    if getattr(spec, "kind", None) != "pair":
        return None
    counts = getattr(result, "pair_counts", None)
    c = counts.get(spec.name) if isinstance(counts, Mapping) else None
    if not isinstance(c, Mapping):
        return None
    pos, neg = c.get("n_positive"), c.get("n_negative")
    if not all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in (pos, neg)):
        return None
    return int(pos), int(neg)


def constant_pair(result, spec) -> tuple[float, str, str] | None:
    """(value, why, fix) when the pair metric ``spec`` of ``result`` has that value
    whatever the model (:func:`~retrieval_checks.metrics._thresholds.pair_constant`:
    ``recall_at_precision@P`` with P at or below the share of positive pairs, pair
    recall / precision / F1 at a threshold every pair clears or none does); None
    otherwise or when the result does not say."""
    totals = _pair_totals(result, spec)
    if totals is None:
        return None
    config = getattr(result, "config", None)
    config = config if isinstance(config, dict) else {}
    return pair_constant(
        spec.family,
        spec.level_fraction,
        n_positive=totals[0],
        n_negative=totals[1],
        similarity=config.get("similarity"),
        n_bits=config.get("n_bits"),
    )


def threshold_bounds(result, spec, at_least, at_most) -> tuple:
    """``at_least`` and ``at_most`` checked against the metric's unit and range, a
    rank's against the largest rank a query of ``result`` can get, a recall's against
    a K that makes it 1 whatever the model, a pair metric's against a level or
    threshold that fixes its value whatever the model, and ``precision_at_recall``'s
    against the share of positive pairs, below which it never falls."""
    held = _holds(result, spec.name)
    gated = at_least is not None or at_most is not None
    k_all, why = certain_k(result, spec) if held else (None, "")
    if k_all is not None and spec.k >= k_all and gated:
        raise InputError(
            f"{spec.name}: K={spec.k} reaches {why} (K >= {k_all}), so its value is 1 whatever the model "
            f"and a gate on it could never fail (or never pass); gate a smaller K (< {k_all})."
        )
    constant = constant_pair(result, spec) if held and gated else None
    if constant is not None:
        value, why, fix = constant
        raise InputError(
            f"{spec.name}: {why}, so its value is {_g(value)} whatever the model and a gate on it "
            f"could never fail (or never pass); {fix}."
        )
    refuse_certain_components(result, spec, held and gated)  # rsum of recalls that cannot fail
    top, top_why = max_rank(result, spec)
    totals = _pair_totals(result, spec) if held else None
    floor = pair_floor(spec.family, n_positive=totals[0], n_negative=totals[1]) if totals else None
    low, low_why = floor if floor is not None else (None, "")
    bounds = dict(metric=spec, high=top, high_why=top_why, low=low, low_why=low_why)
    if at_least is not None:
        at_least = GATE_FIELDS["at_least"].check(at_least, **bounds)
    if at_most is not None:
        at_most = GATE_FIELDS["at_most"].check(at_most, **bounds)
    if at_least is not None and at_most is not None and at_least > at_most:
        raise InputError(
            f"at_least={_g(at_least)} > at_most={_g(at_most)} for {spec.name}: no value passes both; "
            "swap them (at_least is the lower bound)."
        )
    return at_least, at_most


def assert_metric(
    result,
    name: str,
    *,
    at_least: float | None = None,
    at_most: float | None = None,
    on: str = "value",
    confidence: float | None = None,
    seed: int | None = None,
    max_skipped: int | float | None = None,
    _gate: str = "assert_metric",
) -> None:
    """Fail when a metric of a result is below ``at_least`` or above ``at_most``.

    ``on="value"`` (default) checks the point value; ``on="interval"`` checks the
    interval bound on the side of each threshold (lower bound against ``at_least``,
    upper bound against ``at_most``): the result's own interval when it carries one
    (grouped recall, image-text and CAM metrics, accuracy), else a class-cluster
    percentile bootstrap over the per-query values at ``confidence`` (default: the
    result's ``config["confidence"]``) with ``seed`` (default: the result's).

    Thresholds are checked against the metric's unit and attainable range (a
    threshold that makes a gate that can never fail is an error; both at once need
    ``at_least <= at_most``). ``max_skipped``: the most queries (an int) or fraction
    of the queries (a float in [0, 1)) the result may have skipped for want of a
    relevant gallery item; more fails the gate. Any skipped query gives a
    ``RuntimeWarning``, also recorded on the gate's event.

    Parameters
    ----------
    result:
        A result holding the metric (of :func:`~retrieval_checks.evaluate`,
        :func:`~retrieval_checks.evaluate_run`, :func:`~retrieval_checks.evaluate_image_text`,
        a classifier or ANN evaluation).
    name:
        The metric, a canonical name or an alias.
    at_least, at_most:
        The thresholds, on the metric's own scale (one or both).
    on:
        ``"value"`` or ``"interval"``.
    confidence, seed:
        Of the on-demand bootstrap interval (default: the result's own).
    max_skipped:
        The most queries (a count) or fraction of queries the result may have skipped.

    Returns
    -------
    None
        The gate passed; its event (value, interval, rule, sample) is recorded.

    Raises
    ------
    AssertionError
        The gate failed: the message names the metric, value, interval, threshold,
        margin, sample size, the worst classes and the decision rule.
    InputError
        A threshold that is NaN, on the wrong scale or could never fail, a metric the
        result does not hold, ``on="interval"`` without an interval.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> res = rc.evaluate(x, query_labels=[0, 0, 1, 1], metrics=["map"])
    >>> rc.assert_metric(res, "map", at_least=0.7)
    >>> rc.assert_metric(res, "map", at_least=0.9)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    AssertionError: map value 0.7500 < 0.9 (short by 0.1500; unit: fraction)...
    >>> rc.assert_metric(res, "map", at_least=90)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    retrieval_checks.errors.InputError: ...0.9...
    """
    __tracebackhide__ = True
    if at_least is None and at_most is None:
        if _gate != "assert_metric":
            raise InputError(
                f"{_gate}: at_least is required (the lowest acceptable value: a number such as 0.7), "
                "got None."
            )
        raise InputError(f"{_gate} needs at_least=..., at_most=... or both (numbers such as 0.7).")
    if on == "lower" and at_most is None:  # a floor checked on the interval's lower bound
        on = _lower_bound_on(on)
    GATE_FIELDS["on"].check(on, kind="threshold")
    confidence, seed = _confidence(confidence), _seed(seed)
    max_skipped = GATE_FIELDS["max_skipped"].check(max_skipped)
    _require_result(result, _gate)
    spec = _spec(name)  # a suite's check passes its parsed MetricSpec
    at_least, at_most = threshold_bounds(result, spec, at_least, at_most)
    m = _measure(result, spec, _gate)
    found, why = _interval(result, m, confidence, seed, spec) if on == "interval" else (None, None)
    if on == "interval" and found is None:
        more = (
            ", or evaluate with more queries or classes"
            if m.interval is None and spec.capabilities.interval == "bootstrap"
            else ""
        )
        raise InputError(
            f"on='interval': {m.metric} has no interval in this result ({why}); use on='value'{more}."
        )
    if (
        on == "interval"
        and confidence is not None
        and m.interval is not None
        and isinstance(found[2], numbers.Real)
        and abs(float(found[2]) - confidence) > 1e-9
    ):
        raise InputError(
            f"confidence={confidence:g}: the {m.metric} interval this result carries is at "
            f"{_pct(found[2])} (set when it was evaluated); evaluate with confidence={confidence:g}, "
            "or leave confidence out to use the result's."
        )
    failures = []
    if at_least is not None:
        checked = m.value if on == "value" else found[0]
        if math.isnan(checked):
            failures.append(
                (
                    "at_least",
                    f"is NaN (undefined), so it is not shown to be >= {_g(at_least)}",
                    "no value to compare",
                )
            )
        elif exceeds(at_least, checked):  # decided exactly: a value on the threshold passes
            failures.append(
                (
                    "at_least",
                    f"{_f(checked, m.unit)} < {_g(at_least)}",
                    f"short by {_f(at_least - checked, m.unit)}",
                )
            )
    if at_most is not None:
        checked = m.value if on == "value" else found[1]
        if math.isnan(checked):
            failures.append(
                (
                    "at_most",
                    f"is NaN (undefined), so it is not shown to be <= {_g(at_most)}",
                    "no value to compare",
                )
            )
        elif exceeds(checked, at_most):
            failures.append(
                (
                    "at_most",
                    f"{_f(checked, m.unit)} > {_g(at_most)}",
                    f"over by {_f(checked - at_most, m.unit)}",
                )
            )
    notes, skip_failure = _skipped(m, max_skipped, _gate)
    notes += _outside_notes(m, _gate)
    notes += _tie_notes(m, at_least, at_most, _gate)
    few = few_units_note(f"{_gate}: {m.metric}", found[4], found[5]) if found else None
    notes += [few] if few else []
    bounds = {k: v for k, v in (("at_least", at_least), ("at_most", at_most)) if v is not None}
    comparison = "between" if len(bounds) == 2 else (">=" if at_least is not None else "<=")
    extra = {} if max_skipped is None else {"max_skipped": max_skipped}
    _event(
        _gate,
        m,
        passed=not failures and skip_failure is None,
        on=on,
        comparison=comparison,
        threshold=at_least if at_least is not None else at_most,
        bounds=bounds,
        low=found[0] if found else None,
        high=found[1] if found else None,
        confidence=found[2] if found else None,
        warnings_=notes,
        said=_said(notes, (few,)),
        **extra,
    )
    if not failures and skip_failure is None:
        return
    if found is None:
        found, _ = _interval(result, m, confidence, seed, spec)  # for the message, on failure
    body = (
        f"  value {_f(m.value, m.unit)}"
        + (f", {found[3]}" if found else "")
        + "\n"
        + (f"  sample: {m.sample}\n" if m.sample else "")
        + _used_line(m)
        + "".join(f"  {line}\n" for line in m.details)
        + (f"  note: {few}\n" if few else "")
        + _named(m.context)
    )
    if not failures:
        raise AssertionError(
            f"{skip_failure}\n{body}  rule: fail when more than max_skipped queries are skipped"
        )
    rule, comparison_text, margin = failures[0]
    what = (
        "value"
        if on == "value"
        else ("interval's lower bound" if rule == "at_least" else "interval's upper bound")
    )
    both = (
        f"{_g(at_least)} <= {'value' if on == 'value' else 'interval'} <= {_g(at_most)}: "
        if len(bounds) == 2
        else ""
    )
    raise AssertionError(
        f"{m.metric} {what} {comparison_text} ({margin}; unit: {m.unit})\n"
        + body
        + (f"  also: {skip_failure}\n" if skip_failure else "")
        + f"  rule: {both}fail when the {what} is {'below at_least' if rule == 'at_least' else 'above at_most'}"
    )


def assert_map_at_least(
    result,
    at_least: float,
    *,
    metric: str = "map",
    on: str = "value",
    confidence: float | None = None,
    seed: int | None = None,
    max_skipped: int | float | None = None,
) -> None:
    """Fail when mAP (or a named variant: ``map@R``, ``map@10``, ``map_cut@10``...) is
    below ``at_least``.

    The other keywords, the message and the errors are those of :func:`assert_metric`.

    Parameters
    ----------
    result:
        A result holding the metric (of :func:`~retrieval_checks.evaluate` or
        :func:`~retrieval_checks.evaluate_run`).
    at_least:
        The lowest acceptable value, a fraction in [0, 1] (``0.7``, not ``70``).
    metric:
        The AP metric to gate (default ``"map"``): ``map``, ``map@K``, ``map@R``,
        ``map_cut@K`` or ``map_capped@K``, as the result computed it.
    on:
        ``"value"`` (default) or ``"interval"`` (the lower bound of the metric's
        interval), as in :func:`assert_metric`.
    confidence, seed:
        Of the on-demand bootstrap interval (default: the result's own).
    max_skipped:
        The most queries (a count) or fraction of queries the result may have skipped.

    Returns
    -------
    None
        The gate passed; its event is recorded.

    Raises
    ------
    AssertionError
        The value is below ``at_least`` (the message as :func:`assert_metric`'s).
    InputError
        A threshold that is NaN, on the wrong scale or could never fail, or a metric the
        result does not hold.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> res = rc.evaluate(x, query_labels=[0, 0, 1, 1], metrics=["map", "map@R"])
    >>> rc.assert_map_at_least(res, 0.7)
    >>> rc.assert_map_at_least(res, 0.4, metric="map@R")
    """
    __tracebackhide__ = True
    spec = parse_metric(metric)
    if spec.family not in ("map", "map@R", "map_cut", "map_capped"):
        raise InputError(
            f"metric={metric!r}: assert_map_at_least checks an AP metric (map, map@K, map@R, "
            f"map_cut@K, map_capped@K), got {spec.name}; use assert_metric for other metrics."
        )
    assert_metric(
        result,
        spec.name,
        at_least=at_least,
        on=_lower_bound_on(on),
        confidence=confidence,
        seed=seed,
        max_skipped=max_skipped,
        _gate="assert_map_at_least",
    )


def _required(at_least, gate: str) -> None:
    if at_least is None:
        raise InputError(
            f"{gate}: at_least is required (the lowest acceptable value: a number such as 0.7), got None."
        )


def _k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        meant = ""
        if (
            isinstance(k, numbers.Real)
            and not isinstance(k, bool)
            and math.isfinite(k)
            and k >= 1
            and k == int(k)
        ):
            meant = f" (write k={int(k)})"
        raise InputError(
            f"k={shown(k)}: expected an integer >= 1 (the K of hit_rate@K / recall@K){meant}."
        )
    if k >= 2**63:
        raise InputError(
            f"k={shown(k)}: larger than any gallery (K counts gallery items ranked first); use a K no "
            "larger than the gallery a query ranks."
        )
    return int(k)


def assert_recall_at_least(
    result,
    at_least: float,
    *,
    k: int = 1,
    kind: str = "hit_rate",
    on: str = "value",
    confidence: float | None = None,
    seed: int | None = None,
    max_skipped: int | float | None = None,
) -> None:
    """Fail when ``hit_rate@k`` (metric learning's Recall@K, default) or ``recall@k``
    (information-retrieval recall, ``kind="recall"``) is below ``at_least``.

    The other keywords, the message and the errors are those of :func:`assert_metric`.

    Parameters
    ----------
    result:
        A result holding the metric (of :func:`~retrieval_checks.evaluate` or
        :func:`~retrieval_checks.evaluate_run`).
    at_least:
        The lowest acceptable value, a fraction in [0, 1].
    k:
        The K of the metric (default 1): the gate checks ``hit_rate@k`` or ``recall@k``,
        which the result must hold.
    kind:
        ``"hit_rate"`` (default: the fraction of queries with a relevant item in the
        top K, metric learning's Recall@K) or ``"recall"`` (the fraction of each
        query's relevant items in its top K).
    on:
        ``"value"`` (default) or ``"interval"`` (the lower bound of the metric's
        interval), as in :func:`assert_metric`.
    confidence, seed:
        Of the on-demand bootstrap interval (default: the result's own).
    max_skipped:
        The most queries (a count) or fraction of queries the result may have skipped.

    Returns
    -------
    None
        The gate passed; its event is recorded.

    Raises
    ------
    AssertionError
        The value is below ``at_least`` (the message as :func:`assert_metric`'s).
    InputError
        A threshold that is NaN, on the wrong scale or could never fail, or a metric the
        result does not hold.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> res = rc.evaluate(x, query_labels=[0, 0, 1, 1], metrics=["hit_rate@1", "recall@2"])
    >>> rc.assert_recall_at_least(res, 0.5, k=1)
    >>> rc.assert_recall_at_least(res, 0.9, k=1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    AssertionError: hit_rate@1 value 0.5000 < 0.9...
    """
    __tracebackhide__ = True
    _choice(kind, ("hit_rate", "recall"), "kind", "Recall@K of metric learning, or IR recall")
    _other_kind(result, kind, _k(k))
    assert_metric(
        result,
        f"{kind}@{_k(k)}",
        at_least=at_least,
        on=_lower_bound_on(on),
        confidence=confidence,
        seed=seed,
        max_skipped=max_skipped,
        _gate="assert_recall_at_least",
    )


_KINDS = {
    "hit_rate": "metric learning's Recall@K, the fraction of queries with a relevant item in the top K",
    "recall": "IR recall, the fraction of each query's relevant items in the top K",
}


def _other_kind(result, kind: str, k: int) -> None:
    """A result that computed the other kind of recall at K, but not ``kind``'s, is
    probably gated with the wrong ``kind``: say which kind gates which metric."""
    _require_result(result, "assert_recall_at_least")
    other = "recall" if kind == "hit_rate" else "hit_rate"
    name, other_name = f"{kind}@{k}", f"{other}@{k}"
    if name in result or other_name not in result:
        return
    how = "(the default) " if kind == "hit_rate" else ""
    raise InputError(
        f"{name} was not computed, but {other_name} was: assert_recall_at_least with kind={kind!r} "
        f"{how}gates {name} ({_KINDS[kind]}); pass kind={other!r} to gate {other_name} ({_KINDS[other]}), "
        f"or evaluate {name} (metrics=[{name!r}])."
    )


def _precision_level(precision) -> float:
    p = check_finite(precision, "precision", what="a precision level in (0, 1]")
    if not 0.0 < p <= 1.0:
        if 2.0 <= p <= 100.0:
            meant = f" Did you mean {p / 100:g} ({p!r} -> {p / 100:g})?"
        elif 1.0 < p < 2.0:
            meant = " Did you mean 1 (precision 100%: every pair above the threshold relevant)?"
        else:
            meant = ""
        raise InputError(
            f"precision={shown(p)}: expected a precision level in (0, 1] (a fraction: 0.9 for 90%)."
            f"{meant}"
        )
    return p


def assert_recall_at_precision(
    result, at_least: float, *, precision: float = 0.9, max_skipped: int | float | None = None
) -> None:
    """Fail when ``recall_at_precision@P`` is below ``at_least``; the message names the
    similarity threshold that reaches precision P (or says none does).

    ``precision`` is P, an exact decimal; ``max_skipped`` as in :func:`assert_metric`.

    Parameters
    ----------
    result:
        A result of :func:`~retrieval_checks.evaluate` that computed
        ``recall_at_precision@P``.
    at_least:
        The lowest acceptable pair recall, a fraction in [0, 1].
    precision:
        P, the precision level in (0, 1] (default 0.9; ``0.9``, not ``90``).
    max_skipped:
        The most queries (a count) or fraction of queries the result may have skipped.

    Returns
    -------
    None
        The gate passed; its event is recorded.

    Raises
    ------
    AssertionError
        Pair recall at precision P is below ``at_least``; the message names the
        threshold and the true and false positive and false negative pair counts.
    InputError
        A threshold that is NaN, on the wrong scale or could never fail, or a result
        that did not compute ``recall_at_precision@P``.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> centres, y = rng.normal(size=(60, 16)), np.repeat(np.arange(60), 4)
    >>> train = centres[y] + 0.5 * rng.normal(size=(240, 16))
    >>> test = centres[y] + 0.6 * rng.normal(size=(240, 16))
    >>> grouped = dict(metrics=["grouped_recall@1", "recall_at_precision@0.9"], group_size=10)
    >>> res_train = rc.evaluate(train, query_labels=y, **grouped)
    >>> res = rc.evaluate(test, query_labels=y, **grouped)
    >>> round(res_train["recall_at_precision@0.9"], 4)
    0.8333
    >>> rc.assert_recall_at_precision(res_train, 0.5, precision=0.9)
    """
    __tracebackhide__ = True
    name = parse_metric(
        f"recall_at_precision@{_precision_level(precision)!r}"
    ).name  # :g would make 0.9999999 read 1
    assert_metric(
        result, name, at_least=at_least, max_skipped=max_skipped, _gate="assert_recall_at_precision"
    )


def assert_grouped_recall_ci(
    result,
    at_least: float,
    *,
    metric: str = "grouped_recall@1",
    on: str = "lower",
    max_skipped: int | float | None = None,
) -> None:
    """Fail when the interval's lower bound (``on="lower"``, default) or the point
    value (``on="value"``) of a grouped recall is below ``at_least``.

    The interval is grouped recall's own Student t interval over the groups of
    ``group_size`` labels (``result.intervals[metric]``).

    Parameters
    ----------
    result:
        A result of :func:`~retrieval_checks.evaluate` that computed the grouped recall.
    at_least:
        The lowest acceptable bound (or value), a fraction in [0, 1].
    metric:
        The grouped recall to gate (default ``"grouped_recall@1"``).
    on:
        ``"lower"`` (default: the interval's lower bound; ``"interval"`` is the same) or
        ``"value"``.
    max_skipped:
        The most queries (a count) or fraction of queries the result may have skipped.

    Returns
    -------
    None
        The gate passed; its event is recorded.

    Raises
    ------
    AssertionError
        The bound (or value) is below ``at_least``; the message names the groups,
        their spread and the standard error.
    InputError
        A threshold that is NaN, on the wrong scale or could never fail, or a result
        without that grouped recall.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> centres, y = rng.normal(size=(60, 16)), np.repeat(np.arange(60), 4)
    >>> train = centres[y] + 0.5 * rng.normal(size=(240, 16))
    >>> test = centres[y] + 0.6 * rng.normal(size=(240, 16))
    >>> grouped = dict(metrics=["grouped_recall@1", "recall_at_precision@0.9"], group_size=10)
    >>> res_train = rc.evaluate(train, query_labels=y, **grouped)
    >>> res = rc.evaluate(test, query_labels=y, **grouped)
    >>> round(res["grouped_recall@1"], 4)
    0.9667
    >>> rc.assert_grouped_recall_ci(res, 0.8)  # the interval's lower bound is above 0.8
    """
    __tracebackhide__ = True
    on = _lower_bound_on(on)
    spec = parse_metric(metric)
    if spec.kind != "grouped":
        raise InputError(
            f"metric={metric!r}: assert_grouped_recall_ci checks grouped_recall@K, got {spec.name}."
        )
    assert_metric(
        result,
        spec.name,
        at_least=at_least,
        on=on,
        max_skipped=max_skipped,
        _gate="assert_grouped_recall_ci",
    )


def assert_rsum(result, at_least: float, *, on: str = "value", max_skipped=None) -> None:
    """Fail when Rsum (percentage points, 0-600) of an image-text result is below
    ``at_least``: its value (``on="value"``, default) or the lower bound of its
    bootstrap interval over images (``on="lower"``).

    Parameters
    ----------
    result:
        A result of :func:`~retrieval_checks.evaluate_image_text`.
    at_least:
        The lowest acceptable Rsum, in percentage points (0-600: ``450``, not ``4.5``).
    on:
        ``"value"`` (default) or ``"interval"`` (the lower bound of the bootstrap interval
        over images; needs ``n_resamples > 0``; ``"lower"`` is the same).
    max_skipped:
        The most images (a count) or fraction of images the result may have dropped for
        having no caption (``images_without_captions="drop"``).

    Returns
    -------
    None
        The gate passed; its event is recorded.

    Raises
    ------
    AssertionError
        Rsum (or its lower bound) is below ``at_least``.
    InputError
        A threshold that is NaN, outside 0-600 or written as a fraction (``4.5`` for
        450), a result without ``rsum``, or one whose Rsum adds a recall that is 1
        whatever the model (too few images: :mod:`retrieval_checks.gates._rsum`).

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> images = np.eye(12, dtype=np.float32)
    >>> captions = np.repeat(images, 2, axis=0) + 0.1
    >>> res = rc.evaluate_image_text(images, captions, np.repeat(np.arange(12), 2))
    >>> res["rsum"]
    600.0
    >>> rc.assert_rsum(res, at_least=450)
    """
    __tracebackhide__ = True
    on = _lower_bound_on(on)
    _required(at_least, "assert_rsum")
    GATE_FIELDS["at_least"].check(at_least, metric=metric_spec("rsum"))
    _require_result(result, "assert_rsum")
    if (
        on == "interval"
        and "rsum" in result
        and _measure(result, "rsum", "assert_rsum").interval is None
    ):
        raise InputError(
            "on='interval' needs the bootstrap interval: evaluate with n_resamples > 0."
        )
    assert_metric(
        result,
        "rsum",
        at_least=at_least,
        on=on,
        max_skipped=max_skipped,
        _gate="assert_rsum",
    )


def assert_cam_iou_at_least(
    result, at_least: float, *, on: str = "value", metric: str | None = None
) -> None:
    """Fail when ``cam_iou`` or ``cam_iou_box`` (a result of :func:`retrieval_checks.cam_iou`,
    or ``evaluate_classifier``'s with ``metric=``) is below ``at_least``: its mean over
    images (``on="value"``) or the lower bound of its bootstrap interval (``on="lower"``).

    Parameters
    ----------
    result:
        A :class:`~retrieval_checks.LocalizationResult` (of :func:`~retrieval_checks.cam_iou`
        or :func:`~retrieval_checks.cam_iou_box`), or a result holding ``cam_iou``.
    at_least:
        The lowest acceptable IoU, a fraction in [0, 1].
    on:
        ``"value"`` (default) or ``"interval"`` (the interval's lower bound; needs an
        interval: at least 2 images and ``n_resamples > 0``; ``"lower"`` is the same).
    metric:
        ``"cam_iou"`` or ``"cam_iou_box"``; default: the result's own metric.

    Returns
    -------
    None
        The gate passed; its event is recorded.

    Raises
    ------
    AssertionError
        The IoU (or its lower bound) is below ``at_least``; the message names the
        threshold rho, the share of images with IoU 0 and the worst images.
    InputError
        A threshold that is NaN, on the wrong scale or could never fail, an unknown
        ``on`` or ``metric``, or ``on="lower"`` without an interval.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> cams = np.zeros((3, 4, 4))
    >>> cams[0, :2, :2], cams[1, :2, :3], cams[2, 2:, 2:] = 1.0, 0.5, 0.9
    >>> res = rc.cam_iou(cams, boxes=np.array([[0, 0, 2, 2]] * 3))
    >>> res.per_image
    array([1.        , 0.66666667, 0.        ])
    >>> rc.assert_cam_iou_at_least(res, 0.5)
    >>> rc.assert_cam_iou_at_least(res, 0.8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    AssertionError: cam_iou value 0.5556 < 0.8 (short by 0.2444; unit: fraction)...
    """
    __tracebackhide__ = True
    on = _lower_bound_on(on)
    if metric is not None:
        _choice(metric, ("cam_iou", "cam_iou_box"), "metric", "the CAM IoU measure to gate")
    _required(at_least, "assert_cam_iou_at_least")
    GATE_FIELDS["at_least"].check(
        at_least, metric=metric_spec("cam_iou"), metric_name=metric or "cam_iou"
    )
    _require_result(result, "assert_cam_iou_at_least")
    name = metric or getattr(result, "metric", None) or "cam_iou"
    if name not in ("cam_iou", "cam_iou_box"):
        raise InputError(
            f"assert_cam_iou_at_least checks cam_iou or cam_iou_box, got {name!r}; pass "
            "metric='cam_iou' or metric='cam_iou_box'."
        )
    if on == "interval" and _measure(result, name, "assert_cam_iou_at_least").interval is None:
        raise InputError("on='interval' needs an interval: at least 2 images and n_resamples > 0.")
    assert_metric(
        result,
        name,
        at_least=at_least,
        on=on,
        _gate="assert_cam_iou_at_least",
    )


def assert_gap_below(
    gap,
    below: float,
    *,
    on: str = "upper",
    max_skipped: int | float | None = None,
    power: float | None = None,
    min_power: float | None = None,
) -> None:
    """Fail when a :class:`~retrieval_checks.Gap`'s upper bound (``on="upper"``, default:
    the gap is not shown to be below the limit) or its point value (``on="value"``)
    exceeds ``below``. Gaps come from :func:`retrieval_checks.generalization_gap`, or
    :func:`retrieval_checks.classification_gap` for a classifier's accuracy. ``below``
    is checked against the range of a difference of two values of the metric (a gap
    of fractions is below 1: ``below: 5`` could never fail). Skipped queries on either
    side warn, and more than ``max_skipped`` (a count, or a fraction of that side's
    queries) on either side fail the gate.

    A gap whose whole interval lies below 0 (train and test look swapped: an upper
    bound on it passes whatever the model does) and a side resting on fewer than
    ``MIN_INTERVAL_UNITS`` groups or classes are warned about
    (:class:`~retrieval_checks.errors.IntervalWarning`, once: not again for a warning
    :func:`~retrieval_checks.generalization_gap` gave) and recorded on the event
    (``warnings``, and ``sides_swapped``).

    With ``on="upper"`` the event carries the gate's power: its chance of passing a
    model with no gap at all (``power_at_tolerance``), the smallest limit it shows with
    ``power`` for such a model (``mdd``), from the gap's interval (standard error =
    half-width / z; its smaller side's units, both sides scaled together) and the
    units that limit would need; below ``power`` the gate warns
    (:class:`~retrieval_checks.errors.PowerWarning`: even a model with no gap would
    mostly fail for lack of data), and with ``min_power`` it fails, naming the units.

    Parameters
    ----------
    gap:
        A :class:`~retrieval_checks.Gap` (of :func:`~retrieval_checks.generalization_gap`
        or :func:`~retrieval_checks.classification_gap`).
    below:
        The largest acceptable gap, on the metric's scale (a fraction for recalls and
        mAP), >= 0.
    on:
        ``"upper"`` (default: the interval's upper bound) or ``"value"``.
    max_skipped:
        The most queries (a count) or fraction of queries either side may have skipped.
    power:
        The power at which the event states the smallest limit shown (default 0.8);
        ``on="upper"`` only.
    min_power:
        ``on="upper"`` only: fail when a model with no gap would pass with less than this
        power (default: warn at 0.8).

    Returns
    -------
    None
        The gate passed; its event is recorded.

    Raises
    ------
    AssertionError
        The gap's upper bound (or value) exceeds ``below``, or the gate is underpowered
        under ``min_power``; the message names both sides' values and sample sizes and
        the interval's method.
    InputError
        A ``below`` that is NaN, negative or could never fail.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> centres, y = rng.normal(size=(60, 16)), np.repeat(np.arange(60), 4)
    >>> train = centres[y] + 0.5 * rng.normal(size=(240, 16))
    >>> test = centres[y] + 0.6 * rng.normal(size=(240, 16))
    >>> grouped = dict(metrics=["grouped_recall@1", "recall_at_precision@0.9"], group_size=10)
    >>> res_train = rc.evaluate(train, query_labels=y, **grouped)
    >>> res = rc.evaluate(test, query_labels=y, **grouped)
    >>> gap = rc.generalization_gap(res_train, res, "grouped_recall@1")
    >>> round(gap.value, 4)
    0.0167
    >>> rc.assert_gap_below(gap, 0.1)  # the gap's upper bound, +0.0695, is below 0.1
    """
    __tracebackhide__ = True
    GATE_FIELDS["on"].check(on, kind="gap")
    if not isinstance(gap, Gap):
        raise InputError(
            f"assert_gap_below takes a Gap, got {type(gap).__name__}: compute it with "
            "retrieval_checks.generalization_gap(train_result, test_result, metric), or for a classifier "
            "retrieval_checks.classification_gap(model, (x_train, y_train), (x_test, y_test))."
        )
    below = GATE_FIELDS["below"].check(
        below, metric=_family(gap.metric), metric_name=f"{gap.metric} gap"
    )
    max_skipped = GATE_FIELDS["max_skipped"].check(max_skipped)
    checked = gap.high if on == "upper" else gap.value
    undefined = checked is None or math.isnan(float(checked))
    notes, skip_failures = [], []
    for side, used, skipped in zip(gap.labels, gap.n_used or (), gap.n_skipped or ()):
        note, failure = _skip_check(
            f"{gap.metric} on {side}", used, skipped, max_skipped, "assert_gap_below"
        )
        notes += note
        skip_failures += [failure] if failure else []
    said = [
        n for n in getattr(gap, "notes", ()) or () if isinstance(n, str)
    ]  # warned when it was computed
    interval_notes = [n for n in gap_notes(gap, units=on == "upper") if n not in said]
    notes += said + interval_notes
    swapped = isinstance(gap.high, (int, float)) and gap.high < 0
    pw, power_failure, weak = _gap_power(gap, below, on, power, min_power)
    notes += [weak] if weak else []
    failed = undefined or exceeds(checked, below) or bool(skip_failures) or bool(power_failure)
    emit_warned(
        GateEvent(
            gate="assert_gap_below",
            metric=f"{gap.metric} gap",
            value=gap.value,
            passed=not failed,
            low=gap.low,
            high=gap.high,
            confidence=gap.confidence,
            on=on,
            comparison="<=",
            threshold=below,
            bounds={"below": below},
            n=gap.n_first + gap.n_second,
            unit=gap.unit,
            n_used=sum(gap.n_used) if gap.n_used else None,
            n_skipped=sum(gap.n_skipped) if gap.n_skipped else None,
            warnings=list(notes),
            extra={
                **({} if max_skipped is None else {"max_skipped": max_skipped}),
                **({"sides_swapped": True} if swapped else {}),
                **(pw.to_dict() if pw is not None else {}),
            },
        ),
        _said([n for n in notes if n not in said and n is not weak], interval_notes, weak),
    )
    if skip_failures:
        raise AssertionError(
            "\n".join(skip_failures) + "\n  rule: fail when more than max_skipped queries are "
            "skipped on either side"
        )
    if failed:
        what = "upper bound" if on == "upper" else "value"
        a, b = gap.labels
        head = (
            f"{what} is NaN (undefined), so it is not shown to be <= {_g(below)}"
            if undefined
            else f"{what} {checked:+.4f} > {_g(below)} (over by {checked - below:.4f})"
            if exceeds(checked, below)
            else f"gate is underpowered: {what} {checked:+.4f} <= {_g(below)} this time, but the "
            "test's power is below min_power"
        )
        raise AssertionError(
            f"{gap.metric} gap ({a} - {b}) {head}\n"
            f"  gap {gap.value:+.4f}, {_pct(gap.confidence)} interval {_iv(gap.low, gap.high, sign='+')} "
            f"({gap.method})\n"
            f"  {a}: {gap.first_value:.4f} on {gap.n_first} {gap.unit}; {b}: {gap.second_value:.4f} "
            f"on {gap.n_second} {gap.unit}\n"
            + "".join(f"  note: {n}\n" for n in said + interval_notes)
            + (
                f"  {power_failure}\n"
                if power_failure
                else f"  power: {pw.describe()}\n"
                if pw
                else ""
            )
            + f"  rule: fail when the gap's {what} is above the limit"
        )


_NOT_WORSE = {
    "significant": (
        "hi",
        "the interval's upper bound of the improvement is below -margin",
        "is significantly worse than baseline {baseline}",
    ),
    "non_inferior": (
        "lo",
        "the interval's lower bound of the improvement is below -margin",
        "is not shown to be within {margin} of baseline {baseline}",
    ),
    "value": ("d", "the point improvement is below -margin", "is worse than baseline {baseline}"),
}


def assert_not_worse(
    comparison: Comparison,
    *,
    margin: float = 0.0,
    rule: str = "significant",
    max_skipped: int | float | None = None,
    power: float | None = None,
    correction: str | None = None,
    min_power: float | None = None,
) -> None:
    """Gate a candidate against a baseline from a paired :class:`Comparison`.

    With ``d`` the improvement (candidate - baseline, sign flipped for rank metrics
    where lower is better) and its interval [lo, hi]:

    - ``rule="significant"`` (default): fail when the candidate is significantly
      worse by more than ``margin``: hi < -margin;
    - ``rule="non_inferior"``: fail unless the data show any drop is smaller than
      ``margin``: lo < -margin fails (stricter: needs enough queries);
    - ``rule="value"``: fail when the point difference is below -margin.

    ``margin`` is a tolerated drop in the metric's unit: >= 0 and below the metric's
    range (a margin of 1 on a fraction could never fail). An undefined (NaN)
    difference or bound fails.

    With ``rule="significant"`` the event and the message carry the test's power: the
    drop it detects with ``power`` (default 0.8; ``mdd``: the margin plus the minimum
    detectable excess of its one-sided test at (1 - confidence) / 2), and the check
    joins the run's family of significance-gated checks (``correction``: holm, bh or
    none; default the pytest session's ``--rc-correction``), decided at the session's
    end on its adjusted p-value when a correction applies. With a margin, the power is
    judged as a baseline check's is (the same routine): the drop the test must detect is
    twice the margin (the margin exceeded by the margin); when it detects it with less
    than ``power`` the gate warns (:class:`~retrieval_checks.errors.PowerWarning`, naming
    the units it would need: the drop it gates could pass unseen), and with
    ``min_power`` it fails. Margin 0 tolerates no drop: no power to judge.

    With ``rule="non_inferior"`` the event and the message carry the power of the
    non-inferiority test: its chance of passing an unchanged model at the margin
    (``power_at_tolerance``), the smallest margin it shows with ``power`` when nothing
    changed (``mdd``) and the units that margin would need; when that chance is below
    ``power`` the gate warns (:class:`~retrieval_checks.errors.PowerWarning`: it will
    mostly fail for lack of data), and with ``min_power`` it fails, naming the units.

    Parameters
    ----------
    comparison:
        A paired :class:`~retrieval_checks.Comparison` of
        :func:`~retrieval_checks.compare` (candidate first, baseline second).
    margin:
        The tolerated drop, in the metric's unit (default 0), >= 0.
    rule:
        ``"significant"`` (default), ``"non_inferior"`` or ``"value"`` (see above).
    max_skipped:
        The most queries (a count) or fraction of queries either result may have skipped.
    power:
        The power at which the event states the minimum detectable drop (default 0.8);
        ``rule="significant"`` or ``"non_inferior"``.
    correction:
        ``"holm"``, ``"bh"`` or ``"none"``: the multiple-testing correction of the run's
        family of significance-gated checks (default: the session's ``--rc-correction``).
    min_power:
        Fail when the test's power is below this (default: warn at 0.8):
        ``rule="non_inferior"``: its chance of showing non-inferiority within the margin
        for an unchanged model; ``rule="significant"`` with a margin > 0: its chance of
        failing on a drop of twice the margin.

    Returns
    -------
    None
        The gate passed (or, under a correction, its verdict is deferred to the family's
        decision at the session's end); its event is recorded.

    Raises
    ------
    AssertionError
        The candidate is worse by the rule; the message names the difference, its
        interval, the margin, the p-value, the sample and the rule.
    InputError
        A margin that is NaN, negative or could never fail, an unknown rule, ``power`` or
        ``min_power`` where the rule has none (``rule="value"``; ``min_power`` with
        ``rule="significant"`` and margin 0).

    Examples
    --------
    Two embeddings of the same 30 items (10 classes), the candidate a slightly
    perturbed copy of the baseline:

    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(10), 3)
    >>> x = rng.normal(size=(10, 8))[y] + 0.3 * rng.normal(size=(30, 8))
    >>> baseline = rc.evaluate(x, query_labels=y, metrics=["map"])
    >>> candidate = rc.evaluate(x + 0.01 * rng.normal(size=x.shape), query_labels=y, metrics=["map"])
    >>> comparison = rc.compare(candidate, baseline, "map")
    >>> round(comparison.difference, 4)
    0.0056
    >>> rc.assert_not_worse(comparison, margin=0.05)  # 10 classes can see a drop of 0.1
    """
    __tracebackhide__ = True
    GATE_FIELDS["rule"].check(rule)
    if not isinstance(comparison, Comparison):
        raise InputError(
            f"assert_not_worse takes a Comparison from retrieval_checks.compare, got "
            f"{type(comparison).__name__}."
        )
    c = comparison
    margin = GATE_FIELDS["margin"].check(margin, metric=_family(c.metric), metric_name=c.metric)
    sign = 1.0 if c.higher_is_better else -1.0
    lo, hi = sorted((sign * c.low, sign * c.high))
    d = sign * c.difference
    which, desc, verdict = _NOT_WORSE[rule]
    checked = {"hi": hi, "lo": lo, "d": d}[which]
    undefined = math.isnan(checked)
    max_skipped = GATE_FIELDS["max_skipped"].check(max_skipped)
    notes, skip_failure = _skip_check(
        c.metric, c.n_used, c.n_skipped, max_skipped, "assert_not_worse"
    )
    few = (
        few_units_note(f"assert_not_worse: {c.metric} difference", c.n, c.unit)
        if rule != "value"
        else None
    )
    notes += [few] if few else []
    test, bound, bound_failure = _not_worse_power(c, rule, margin, power, min_power)
    correction = family_of(correction, test)
    weak = bound_power_note("assert_not_worse", c.metric, bound) or power_note(
        "assert_not_worse", test, correction
    )
    notes += [weak] if weak else []
    fails = undefined or exceeds(-margin, checked) or skip_failure is not None
    fails = fails or bound_failure is not None
    decided = undefined or skip_failure is not None or bound_failure is not None
    deferred = deferrable(test, correction, fails, decided)
    event = emit_warned(
        GateEvent(
            gate="assert_not_worse",
            metric=f"{c.metric} difference",
            value=c.difference,
            passed=not fails or deferred,
            low=c.low,
            high=c.high,
            confidence=c.confidence,
            on=rule,
            comparison="improvement >=",
            threshold=-margin if margin else 0.0,
            bounds={"margin": margin},
            n=c.n,
            unit=c.unit,
            n_used=c.n_used,
            n_skipped=c.n_skipped,
            warnings=list(notes),
            extra={
                **({} if max_skipped is None else {"max_skipped": max_skipped}),
                **family_fields(test, correction, deferred),
                **(bound.to_dict() if bound is not None else {}),
            },
        ),
        _said([n for n in notes if n is not weak], (few,), weak),
    )
    if skip_failure is not None:
        raise AssertionError(
            f"{skip_failure}\n  rule: fail when more than max_skipped queries are skipped"
        )
    alone = deferred and not claimed(event)  # no session recorded it: decided now, never unseen
    if fails and (alone or not deferred):
        pw = test.power if test else bound
        notes = [bound_failure] if bound_failure else [f"power: {pw.describe()}"] if pw else []
        notes += [
            f"note: {n}" for n in ([unclaimed(None)] if alone else []) + ([few] if few else [])
        ]
        raise AssertionError(_not_worse_message(c, rule, margin, undefined, d, checked, notes))


def _gap_power(gap, below, on, power, min_power):
    """``(power, failure, warning)`` of a gap gate on its upper bound
    (:func:`~retrieval_checks.gates._family.bound_power`); ``power`` / ``min_power``
    with ``on="value"`` (no test) are refused."""
    if on != "upper":
        if power is not None or min_power is not None:
            name, value = ("power", power) if power is not None else ("min_power", min_power)
            raise InputError(
                f"{name}={shown(value)}: on='value' has no test to state the power of; gate the "
                "upper bound (on='upper', the default), or leave it out."
            )
        return None, None, None
    pw, failure = bound_power(
        gap, below, test="gap", gate="assert_gap_below", power=power, min_power=min_power
    )
    return pw, failure, bound_power_note("assert_gap_below", f"{gap.metric} gap", pw)


def _not_worse_power(c, rule, margin, power, min_power):
    """The significance test of ``rule="significant"`` (a family member, with its power:
    :func:`~retrieval_checks.gates._family.comparison_test`), or the power of
    ``rule="non_inferior"``, and the reason a ``min_power`` requirement fails:
    ``(test, bound_power, failure)``. ``power`` / ``min_power`` where the rule has no
    power to state are refused (they were ignored)."""
    if rule == "significant" and min_power is not None:
        return _significant_power(c, margin, power, min_power)
    if rule == "non_inferior":
        pw, failure = bound_power(
            c,
            margin,
            test="non_inferiority",
            gate="assert_not_worse",
            power=power,
            min_power=min_power,
        )
        return None, pw, failure
    if min_power is not None:
        raise InputError(
            f"min_power={shown(min_power)}: a power requirement goes with rule='non_inferior' (its "
            "chance of passing an unchanged model) or rule='significant' with a margin (its chance "
            f"of failing on a drop of twice the margin); rule={rule!r} has no test."
        )
    if rule == "value" and power is not None:
        raise InputError(
            f"power={shown(power)}: rule='value' has no test to state the power of; use "
            "rule='significant' or 'non_inferior', or leave power out."
        )
    return (comparison_test(c, margin, power) if rule == "significant" else None), None, None


def _significant_power(c, margin, power, min_power):
    """``(test, None, failure)`` of ``rule="significant"`` under ``min_power``: its
    power to detect a drop of twice the margin (the margin exceeded by the margin) is
    required, as a baseline check's to detect a drop of its max_drop; a requirement
    whose power cannot be estimated fails, and margin 0 (no tolerance) is refused."""
    power = check_power(power)
    min_power = check_power(min_power, "min_power")
    if power is not None and power != min_power:
        raise InputError(
            f"power={power:g} and min_power={min_power:g}: min_power is the power the gate requires "
            "and reports; give one of them."
        )
    if margin == 0:
        raise InputError(
            f"min_power={min_power:g}: with rule='significant' the power required is the chance of "
            "failing on a drop of the margin beyond the margin, and margin is 0 (no drop tolerated, "
            "so none to detect); give a margin (the drop tolerated), use rule='non_inferior' with a "
            "margin, or leave min_power out."
        )
    test = comparison_test(c, margin, min_power=min_power)
    pw = test.power
    failure = None
    if pw is None:
        failure = (
            f"assert_not_worse: underpowered (min_power {min_power:g}): the power cannot be "
            "estimated (the paired differences have no spread: identical runs, or no standard "
            "error); a power requirement that cannot be checked fails"
        )
    elif pw.underpowered:
        failure = f"assert_not_worse: underpowered (min_power {pw.power:g}): {pw.describe()}"
    return test, None, failure


def _not_worse_message(c, rule, margin, undefined, d, checked, notes) -> str:
    """The failure message of :func:`assert_not_worse`."""
    which, desc, verdict = _NOT_WORSE[rule]
    direction = "higher" if c.higher_is_better else "lower"
    head = (
        f"the checked improvement is NaN (undefined), so the candidate is not shown to be within {margin:g} "
        f"of baseline {c.baseline:.4f}"
        if undefined
        else f"candidate {c.candidate:.4f} {verdict.format(baseline=f'{c.baseline:.4f}', margin=margin)} "
        f"(improvement {d:+.4f}, checked {checked:+.4f} < {-margin:+})"
        if exceeds(-margin, checked)
        else f"gate is underpowered: candidate {c.candidate:.4f} is "
        + (
            f"not shown to be worse than baseline {c.baseline:.4f} by more than {margin:g}"
            if rule == "significant"
            else f"shown within {margin:g} of baseline {c.baseline:.4f}"
        )
        + f" this time (improvement {d:+.4f}, checked {checked:+.4f} >= {-margin:+}), but "
        "the test's power is below min_power"
    )
    return (
        f"{c.metric}: {head}\n"
        f"  difference (candidate - baseline) {c.difference:+.4f}, {_pct(c.confidence)} interval "
        f"{_iv(c.low, c.high, sign='+')} ({c.method}), p={c.p_value:.3g} two-sided, "
        f"p={c.p_value_worse:.3g} for 'worse'\n"
        f"  sample: n={c.n} paired {c.unit}; {direction} is better\n"
        + "".join(f"  {n}\n" for n in notes)
        + f"  rule ({rule}, margin {margin}): fail when {desc}"
    )
