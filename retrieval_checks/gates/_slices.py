"""Slice gates: a threshold on every slice (or on named slices), on the worst slice, and
a baseline drop per slice, for a result of ``evaluate(..., slices=...)``.

Fail closed:

- a slice with fewer than :data:`~retrieval_checks.stats.MIN_INTERVAL_UNITS` units
  (queries, or classes where the result has labels) cannot carry an interval; a gate
  on it is refused (:class:`~retrieval_checks.InputError`) with the size it would
  need: name the slices to gate (``slices=[...]``), merge small ones or add queries;
- a named slice the result does not have, and a slice of the baseline missing now,
  are errors, never a silent skip;
- queries without a slice value are counted on the event and in the message.

Each gate reports one :class:`GateEvent` whose ``extra["slices"]`` holds every gated
slice's row (value, interval, sizes, verdict): the plugin's JSON, JUnit properties,
history and reports show them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import InputError, warn_outside
from ..metrics._names import metric_spec
from ..metrics._thresholds import attainable_drop, check_threshold, no_drop_left
from ..stats._intervals import MIN_INTERVAL_UNITS
from ..stats._slices import no_value_cause, require_slices, slice_intervals
from ._assertions import (  # the thresholds rule of assert_metric (range, certain K)
    max_rank,
    threshold_bounds,
)
from ._baselines import baseline_record, round_stored
from ._events import GateEvent, emit
from ._exact import exceeds

__all__ = [
    "assert_slices",
    "assert_slices_at_least",
    "assert_worst_slice",
    "assert_worst_slice_at_least",
    "assert_no_slice_regression",
    "slice_baseline",
    "slice_key",
    "check_slice_baselines",
]


def _threshold(spec, value, role: str):
    """A threshold checked against the metric's unit and range (None stays None)."""
    if value is None:
        return None
    return check_threshold(spec.capabilities, value, role=role, field=role, metric=spec.name)


def _on(on, spec=None) -> str:
    if not isinstance(on, str) or on not in ("value", "interval"):
        raise InputError(
            f"on={on!r}: use 'value' (each slice's value) or 'interval' (its interval bound on the side of the "
            "threshold)."
        )
    if on == "interval" and spec is not None and spec.capabilities.interval is None:
        raise InputError(
            f"on='interval': {spec.name} has no interval to gate on (as for assert_metric: a median rank is not a "
            "smooth statistic); use on='value'."
        )
    return on


def _f(x, unit: str) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "nan"
    return f"{x:.4f}" if unit in ("fraction", "ratio") else f"{x:.2f}"


def _named_slices(slices, wanted, gate: str) -> list[str]:
    """The slices to gate: every slice, or the named ones (each must exist)."""
    if wanted is None:
        names = list(slices)
        if not names:
            raise InputError(
                f"{gate}: the result has no slices (every query lacks a slice value?); nothing to gate."
            )
        return names
    if isinstance(wanted, str):
        wanted = [wanted]
    try:
        wanted = [str(w) for w in wanted]
    except TypeError:
        raise InputError(
            f"{gate}: slices= takes a list of slice names, got {type(wanted).__name__}."
        ) from None
    if not wanted:
        raise InputError(
            f"{gate}: slices=[] names no slice; give names, or leave it out for every slice."
        )
    unknown = [w for w in wanted if w not in slices]
    if unknown:
        raise InputError(
            f"{gate}: no slice named {', '.join(map(repr, unknown))} in this result; its slices: "
            f"{', '.join(map(repr, slices)) or 'none'} (a slice exists when at least one query has its value)."
        )
    return list(dict.fromkeys(wanted))


def _holding(all_slices, names: list[str], metric: str, gate: str, named: bool) -> list[str]:
    """The slices of ``names`` that hold ``metric``: every slice of an evaluate result;
    of an image-text result, image slices hold every metric and caption slices the t2i
    ones. A slice named for a metric it does not hold is an error saying why; unnamed
    (every slice), the gate takes the slices whose queries the metric averages over."""
    of_metric = getattr(all_slices, "of_metric", None)
    if of_metric is None:
        return names
    have = set(of_metric(metric))
    lacking = [n for n in names if n not in have]
    if named and lacking:
        raise InputError(f"{gate}: {all_slices[lacking[0]].lacks(metric)}")
    kept = [n for n in names if n in have]
    if not kept:
        raise InputError(f"{gate}: {all_slices[names[0]].lacks(metric)}")
    return kept


def _refuse_small(
    rows: dict, names: list[str], gate: str, metric: str, all_slices=None, bounds=None
) -> None:
    """Refuse a gate that would include a slice too small for an interval: the refusal
    is a failed gate event first (every output shows the slices and their sizes), then
    an InputError naming the slices and the size they need."""
    small = [rows[n] for n in names if rows[n].interval is None]
    if not small:
        return
    lines = "; ".join(r.refused for r in small)
    # a slice with no evaluated query says its own fixes (no_value_cause); a small one
    # needs more units, or to leave the gate (unless the gate names it alone already)
    few = [r for r in small if r.n_used]
    fixes = (
        "Evaluate on more queries"
        if len(names) == len(few) == 1  # the gate names this slice alone already
        else "Gate named slices only (slices=[...]), merge small slices, or evaluate on more queries"
    )
    message = (
        f"{gate}: {metric}: refused to gate {len(small)} slice(s) without an interval ({lines})"
        + (
            f" A gate on them would decide on noise. {fixes} (each slice needs {MIN_INTERVAL_UNITS} or "
            "more units)."
            if few
            else ""
        )
    )
    if all_slices is not None:
        table = [rows[n].to_dict() for n in names]
        for r in table:
            r["passed"] = None  # nothing was gated: the gate was refused as a whole
        emit(
            GateEvent(
                gate=gate,
                metric=metric,
                value=None,
                passed=False,
                on="refused",
                comparison="",
                bounds=dict(bounds or {}),
                n=len(table),
                unit="slices",
                warnings=[
                    message,
                    *([all_slices.missing_note()] if all_slices.missing_note() else []),
                ],
                extra={"slices": table, "slice_missing": dict(all_slices.missing)},
            )
        )
    raise InputError(message)


def _missing_note(slices) -> str:
    note = slices.missing_note()
    return note


#: ``unsliced=``: what a gate over every slice does when some queries have no slice value
UNSLICED = ("fail", "ignore")


def _check_unsliced(unsliced, gate: str) -> str:
    if unsliced not in UNSLICED:
        raise InputError(
            f"{gate}: unsliced={unsliced!r}: use 'fail' (the default: a gate over every slice fails while "
            "queries have no slice value, since it cannot see them) or 'ignore' (count and report them, gate "
            "the slices only)."
        )
    return unsliced


def _unsliced_failure(all_slices, names: list[str], unsliced: str) -> str:
    """Fail closed (issue 28 review): a gate over *every* slice cannot see the queries
    that have no value in a gated dimension (a stale metadata file that lost a whole
    slice's queries passes otherwise). "" when none, or with ``unsliced="ignore"``."""
    if unsliced == "ignore":
        return ""
    dims = list(dict.fromkeys(all_slices[n].dimension for n in names))
    parts = []
    for d in dims:
        n_missing = int(all_slices.missing.get(d, 0) or 0)
        if not n_missing:
            continue
        units, size = all_slices.unit_of(d)  # image-text: images or captions
        total = n_missing + sum(
            int(getattr(s, size)) for s in all_slices.values() if s.dimension == d
        )
        label = "slice" if d in (None, "", "slice") else repr(d)
        parts.append(
            f"{n_missing} of {total} {units} ({100 * n_missing / max(total, 1):.0f}%) have no {label} value"
        )
    if not parts:
        return ""
    return (
        "; ".join(parts)
        + ": they are in no slice, so this gate over every slice cannot see them. Give them a value (one "
        "such as 'unknown' makes them a slice of their own, gated like the others), or pass "
        "unsliced='ignore' (YAML: unsliced: ignore) to count and report them without gating them."
    )


def _distinct_counts(all_slices, names: list[str], rows: list[dict]) -> tuple[int, int]:
    """(n_used, n_skipped) over the distinct queries of the gated slices: a query in
    slices of several dimensions counts once (rows summed would count it per dimension)."""
    used, skipped = set(), set()
    for n in names:
        s = all_slices[n]
        index = getattr(s, "index", None)
        res = getattr(s, "result", None)
        if index is None or res is None or not hasattr(res, "skipped_queries"):
            return (
                sum(r["n_used"] for r in rows),
                sum(r["n_queries"] - r["n_used"] - r.get("n_outside", 0) for r in rows),
            )
        index = np.asarray(index)
        out = np.zeros(index.size, bool)
        out[np.asarray(res.skipped_queries, dtype=int)] = True
        skipped.update(index[out].tolist())
        outside = np.asarray(getattr(res, "outside_queries", ()), dtype=int)
        out[outside] = True
        used.update(index[~out].tolist())
    return len(used), len(skipped)


def _emit(
    gate,
    metric,
    spec,
    value,
    passed,
    on,
    comparison,
    threshold,
    bounds,
    rows,
    slices,
    extra=None,
    worst=None,
    unseen: str = "",
):
    # unsliced='fail' failed the gate: its reason replaces the "counted, not gated" note
    warnings_ = [unseen] if unseen else [w for w in [_missing_note(slices)] if w]
    n_used, n_skipped = _distinct_counts(slices, [r["slice"] for r in rows], rows)
    return emit(
        GateEvent(
            gate=gate,
            metric=metric,
            value=value,
            passed=passed,
            low=None if worst is None else worst.get("low"),
            high=None if worst is None else worst.get("high"),
            confidence=None if worst is None else worst.get("confidence"),
            on=on,
            comparison=comparison,
            threshold=threshold,
            bounds=bounds,
            n=len(rows),
            unit="slices",
            n_used=n_used,
            n_skipped=n_skipped,
            warnings=warnings_,
            extra={
                "slices": rows,
                "slice_missing": dict(slices.missing),
                **({} if worst is None else {"worst_slice": worst["slice"]}),
                **(extra or {}),
            },
        )
    )


def assert_slices(
    result,
    metric: str,
    *,
    at_least: float | None = None,
    at_most: float | None = None,
    slices=None,
    on: str = "value",
    confidence: float | None = None,
    seed: int | None = None,
    unsliced: str = "fail",
    _gate: str = "assert_slices",
) -> None:
    """Fail when any gated slice's ``metric`` is below ``at_least`` (or above
    ``at_most``): every slice of the result, or the ``slices`` named.

    ``on="interval"`` checks each slice's interval bound (lower against ``at_least``,
    upper against ``at_most``): a bootstrap over the slice's own queries, whole
    classes where the result has labels (:func:`~retrieval_checks.slice_intervals`).
    A gated slice with fewer than ``MIN_INTERVAL_UNITS`` units is refused
    (InputError naming its size and what it needs), whatever ``on`` is.

    Parameters
    ----------
    result:
        A sliced result: :func:`~retrieval_checks.evaluate` or
        :func:`~retrieval_checks.evaluate_run` with ``slices=``, or one given slices by
        :func:`~retrieval_checks.with_slices`.
    metric:
        The metric to gate in each slice (a canonical name or an alias); the result
        must hold it per slice.
    at_least, at_most:
        The thresholds, on the metric's own scale (one or both).
    slices:
        The names of the slices to gate (default: every slice); a name the result
        does not have is an error listing those it has.
    on:
        ``"value"`` (default) or ``"interval"``.
    confidence, seed:
        Of each slice's bootstrap interval (default: the result's own).
    unsliced:
        Gating every slice (``slices`` not given), queries with no slice value in a
        gated dimension are in no slice and the gate cannot see them: ``"fail"``
        (default) fails the gate, saying how many; ``"ignore"`` counts and reports
        them and gates the slices only. Named slices are not affected.

    Returns
    -------
    None
        The gate passed; its event (one row per slice) is recorded.

    Raises
    ------
    AssertionError
        A gated slice fails: the message lists each failing slice with its value,
        interval and size, and the slices that pass.
    InputError
        A result without slices, a slice named that does not exist, a gated slice too
        small for an interval, a threshold that is NaN, on the wrong scale or could
        never fail, or neither threshold given.
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
    >>> {name: round(s["map"], 4) for name, s in res.slices.items()}
    {'de': 0.731, 'en': 0.9306}
    >>> rc.assert_slices(res, "map", at_least=0.5, on="interval")
    >>> rc.assert_slices(res, "map", at_least=0.9)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    AssertionError: map: 1 of 2 slices fail (value at_least 0.9)
      de: map = 0.7310 [0.5727, 0.9005] (95%, n=6 classes, 18 queries)  <- 0.7310 < 0.9
    ...
    """
    __tracebackhide__ = True
    if at_least is None and at_most is None:
        raise InputError(f"{_gate} needs at_least=..., at_most=... or both (numbers such as 0.7).")
    _check_unsliced(unsliced, _gate)
    all_slices = require_slices(result, _gate)
    spec = metric_spec(metric)
    _on(on, spec)
    at_least, at_most = threshold_bounds(result, spec, at_least, at_most)
    if at_least is not None and at_most is not None and at_least > at_most:
        raise InputError(
            f"at_least={at_least:g} > at_most={at_most:g} for {spec.name}: no value passes both; swap them."
        )
    names = _named_slices(all_slices, slices, _gate)
    names = _holding(all_slices, names, spec.name, _gate, slices is not None)
    ivs = slice_intervals(result, spec.name, confidence=confidence, seed=seed)
    bounds = {k: v for k, v in (("at_least", at_least), ("at_most", at_most)) if v is not None}
    _refuse_small(ivs, names, _gate, spec.name, all_slices, bounds)
    rows, failing = [], []
    for n in names:
        iv = ivs[n]
        row = iv.to_dict()
        lo = iv.value if on == "value" else iv.low
        hi = iv.value if on == "value" else iv.high
        bad = []
        if at_least is not None and exceeds(at_least, lo):
            bad.append(f"{_f(lo, spec.unit)} < {at_least:g}")
        if at_most is not None and exceeds(hi, at_most):
            bad.append(f"{_f(hi, spec.unit)} > {at_most:g}")
        row["passed"] = not bad
        rows.append(row)
        if bad:
            failing.append((iv, "; ".join(bad)))
    bounds = {k: v for k, v in (("at_least", at_least), ("at_most", at_most)) if v is not None}
    comparison = "between" if len(bounds) == 2 else (">=" if at_least is not None else "<=")
    worst = _worst_row(rows, spec)
    unseen = "" if slices is not None else _unsliced_failure(all_slices, names, unsliced)
    _emit(
        _gate,
        spec.name,
        spec,
        worst["value"],
        not failing and not unseen,
        "slices" if on == "value" else "slice intervals",
        comparison,
        at_least if at_least is not None else at_most,
        bounds,
        rows,
        all_slices,
        worst=worst,
        unseen=unseen,
    )
    if not failing and not unseen:
        return
    if not failing:
        raise AssertionError(
            f"{spec.name}: every slice passes, but {unseen}\n  rule: a gate over every slice fails while "
            "queries have no slice value (unsliced='fail')"
        )
    what = "value" if on == "value" else "interval bound"
    lines = "\n".join(f"  {iv}  <- {why}" for iv, why in failing)
    ok = [r for r in rows if r["passed"]]
    note = _missing_note(all_slices)
    raise AssertionError(
        f"{spec.name}: {len(failing)} of {len(rows)} slices fail ({what} "
        + " and ".join(f"{k} {v:g}" for k, v in bounds.items())
        + f")\n{lines}\n"
        + (f"  passing: {', '.join(r['slice'] for r in ok)}\n" if ok else "")
        + (f"  also: {unseen}\n" if unseen else (f"  note: {note}\n" if note else ""))
        + f"  rule: fail when a slice's {what} is "
        + ("below at_least" if at_least is not None else "above at_most")
    )


def _worst_row(rows: list[dict], spec) -> dict:
    key = (lambda r: r["value"]) if spec.higher_is_better else (lambda r: -r["value"])
    finite = [r for r in rows if r["value"] is not None]
    if not finite:
        return rows[0]
    return min(finite, key=key)


def _worst_against(rows: list[dict], spec, on: str, at_least, at_most) -> tuple[dict, list[str]]:
    """The slice a worst-slice gate answers for, and what it fails: the slice with the
    lowest gated quantity against ``at_least`` (its value, or its interval's lower bound
    ``on="interval"``) and the one with the highest against ``at_most`` (value, or upper
    bound). On an interval that is not always the slice of the worst value: a small
    slice's wide interval can reach below the threshold while a large slice has the
    lowest value, and the gate must see it (as the every-slice gate does)."""
    lower, upper = ("value", "value") if on == "value" else ("low", "high")
    finite = [r for r in rows if r.get(lower) is not None and r.get(upper) is not None]
    if not finite:
        return _worst_row(rows, spec), []
    bad, failing = [], None
    if at_least is not None:
        row = min(finite, key=lambda r: r[lower])
        if exceeds(at_least, row[lower]):
            bad.append(f"{_f(row[lower], spec.unit)} < at_least {at_least:g}")
            failing = row
    if at_most is not None:
        row = max(finite, key=lambda r: r[upper])
        if exceeds(row[upper], at_most):
            other = "" if failing is None or row is failing else f"slice {row['slice']!r} "
            bad.append(f"{other}{_f(row[upper], spec.unit)} > at_most {at_most:g}")
            failing = failing or row
    if failing is not None:
        return failing, bad
    if on == "value" or (at_least is not None) == (at_most is not None):
        return _worst_row(rows, spec), bad
    if at_least is not None:
        return min(finite, key=lambda r: r[lower]), bad
    return max(finite, key=lambda r: r[upper]), bad


def assert_slices_at_least(result, metric: str, at_least: float, **kw) -> None:
    """:func:`assert_slices` with ``at_least``: every slice (or the named
    ``slices=[...]``) at least ``at_least``.

    Parameters
    ----------
    result:
        A sliced result (see :func:`assert_slices`).
    metric:
        The metric to gate in each slice.
    at_least:
        The lowest acceptable value of every gated slice, on the metric's scale.
    **kw:
        The other keywords of :func:`assert_slices`: ``slices``, ``on``,
        ``confidence``, ``seed``.

    Returns
    -------
    None
        The gate passed; its event is recorded.

    Raises
    ------
    AssertionError
        A gated slice is below ``at_least`` (the message as :func:`assert_slices`'s).
    InputError
        ``at_least=None``, and the errors of :func:`assert_slices`.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(12), 3)  # 12 classes of 3 items
    >>> x = rng.normal(size=(12, 8))[y] + 0.5 * rng.normal(size=(36, 8))
    >>> lang = np.where(y < 6, "de", "en")  # 6 classes per slice
    >>> res = rc.evaluate(x, query_labels=y, metrics=["map", "hit_rate@1"], slices=lang)
    >>> rc.assert_slices_at_least(res, "map", 0.7)
    >>> rc.assert_slices_at_least(res, "map", 0.7, slices=["en"])
    """
    __tracebackhide__ = True
    if at_least is None:
        raise InputError(
            "assert_slices_at_least: at_least is required (a number such as 0.7), got None."
        )
    assert_slices(result, metric, at_least=at_least, _gate="assert_slices_at_least", **kw)


def assert_worst_slice(
    result,
    metric: str,
    *,
    at_least: float | None = None,
    at_most: float | None = None,
    on: str = "value",
    confidence: float | None = None,
    seed: int | None = None,
    unsliced: str = "fail",
    _gate: str = "assert_worst_slice",
) -> None:
    """Fail when the worst slice (lowest value; highest for rank metrics) is below
    ``at_least`` (above ``at_most``). Every slice takes part, so every slice must be
    large enough for an interval (else refused, naming the small ones); the event and
    message name the worst slice.

    Parameters
    ----------
    result:
        A sliced result (see :func:`assert_slices`).
    metric:
        The metric to gate (a canonical name or an alias).
    at_least, at_most:
        The thresholds, on the metric's own scale (one or both).
    on:
        ``"value"`` (default) or ``"interval"``: then the worst slice is the one
        whose interval reaches lowest (highest against ``at_most``), which is not
        always the slice of the worst value.
    confidence, seed:
        Of the slices' bootstrap intervals (default: the result's own).
    unsliced:
        ``"fail"`` (default): the gate fails while queries have no slice value (the
        worst slice could be among them); ``"ignore"``: they are counted and reported
        only (see :func:`assert_slices`).

    Returns
    -------
    None
        The gate passed; its event names the worst slice.

    Raises
    ------
    AssertionError
        The worst slice fails: the message names it, its interval and size, and the
        slices ranked worst first.
    InputError
        A result without slices, a slice too small for an interval, a threshold that is
        NaN, on the wrong scale or could never fail, or neither threshold given.
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
    >>> rc.assert_worst_slice(res, "hit_rate@1", at_least=0.5)
    >>> rc.assert_worst_slice(res, "map", at_least=0.95)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    AssertionError: map: worst slice 'de' 0.7310 < at_least 0.95
    ...
    """
    __tracebackhide__ = True
    if at_least is None and at_most is None:
        raise InputError(f"{_gate} needs at_least=... or at_most=... (a number such as 0.7).")
    _check_unsliced(unsliced, _gate)
    all_slices = require_slices(result, _gate)
    spec = metric_spec(metric)
    _on(on, spec)
    at_least, at_most = threshold_bounds(result, spec, at_least, at_most)
    names = _holding(all_slices, _named_slices(all_slices, None, _gate), spec.name, _gate, False)
    ivs = slice_intervals(result, spec.name, confidence=confidence, seed=seed)
    _refuse_small(
        ivs,
        names,
        _gate,
        spec.name,
        all_slices,
        {k: v for k, v in (("at_least", at_least), ("at_most", at_most)) if v is not None},
    )
    rows = [ivs[n].to_dict() for n in names]
    worst, bad = _worst_against(rows, spec, on, at_least, at_most)
    for r in rows:
        r["passed"] = True
    worst["passed"] = not bad  # the worst slice's own verdict (its row in the table)
    unseen = _unsliced_failure(all_slices, names, unsliced)
    if unseen and not bad:
        bad = [unseen]
    bounds = {k: v for k, v in (("at_least", at_least), ("at_most", at_most)) if v is not None}
    comparison = "between" if len(bounds) == 2 else (">=" if at_least is not None else "<=")
    _emit(
        _gate,
        spec.name,
        spec,
        worst["value"],
        not bad,
        "worst slice" if on == "value" else "worst slice interval",
        comparison,
        at_least if at_least is not None else at_most,
        bounds,
        rows,
        all_slices,
        worst=worst,
        unseen=unseen,
    )
    if not bad:
        return
    iv = ivs[worst["slice"]]
    ranked = sorted(rows, key=lambda r: r["value"], reverse=not spec.higher_is_better)
    note = _missing_note(all_slices)
    if bad == [unseen]:
        raise AssertionError(
            f"{spec.name}: the worst slice {worst['slice']!r} passes, but {unseen}\n  rule: a gate over every "
            "slice fails while queries have no slice value (unsliced='fail')"
        )
    raise AssertionError(
        f"{spec.name}: worst slice {worst['slice']!r} {'; '.join(bad)}\n  {iv}\n"
        + "  slices, worst first: "
        + ", ".join(f"{r['slice']} {_f(r['value'], spec.unit)}" for r in ranked[:5])
        + ("" if len(ranked) <= 5 else f", ... ({len(ranked)} slices)")
        + "\n"
        + (f"  also: {unseen}\n" if unseen else (f"  note: {note}\n" if note else ""))
        + "  rule: fail when the worst slice's "
        + ("value" if on == "value" else "interval bound")
        + (" is below at_least" if at_least is not None else " is above at_most")
    )


def assert_worst_slice_at_least(result, metric: str, at_least: float, **kw) -> None:
    """:func:`assert_worst_slice` with ``at_least``.

    Parameters
    ----------
    result:
        A sliced result (see :func:`assert_slices`).
    metric:
        The metric to gate.
    at_least:
        The lowest acceptable value of the worst slice, on the metric's scale.
    **kw:
        The other keywords of :func:`assert_worst_slice`: ``on``, ``confidence``,
        ``seed``.

    Returns
    -------
    None
        The gate passed; its event names the worst slice.

    Raises
    ------
    AssertionError
        The worst slice is below ``at_least``.
    InputError
        ``at_least=None``, and the errors of :func:`assert_worst_slice`.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(12), 3)  # 12 classes of 3 items
    >>> x = rng.normal(size=(12, 8))[y] + 0.5 * rng.normal(size=(36, 8))
    >>> lang = np.where(y < 6, "de", "en")  # 6 classes per slice
    >>> res = rc.evaluate(x, query_labels=y, metrics=["map", "hit_rate@1"], slices=lang)
    >>> rc.assert_worst_slice_at_least(res, "hit_rate@1", 0.5)
    >>> round(res.slices["de"]["hit_rate@1"], 4)  # the worst slice
    0.6667
    """
    __tracebackhide__ = True
    if at_least is None:
        raise InputError(
            "assert_worst_slice_at_least: at_least is required (a number such as 0.7), got None."
        )
    assert_worst_slice(result, metric, at_least=at_least, _gate="assert_worst_slice_at_least", **kw)


def _ties(result) -> str | None:
    config = getattr(result, "config", None)
    ties = config.get("ties") if isinstance(config, Mapping) else None
    return ties if isinstance(ties, str) else None


def slice_baseline(result, metric: str) -> dict[str, dict]:
    """The per-slice record of ``metric`` a baseline keeps: ``{slice: {"value",
    "n_queries", "n_used", "metric", "ties"}}`` (what :func:`assert_no_slice_regression`
    reads back; the metric and the tie policy say what the values are comparable with).

    Parameters
    ----------
    result:
        A sliced result (see :func:`assert_slices`).
    metric:
        The metric whose per-slice values to keep.

    Returns
    -------
    dict
        ``{slice name: {"value": float, "n_queries": int, "n_used": int, "metric": str,
        "ties": str}}`` (``ties`` only when the result records its tie policy).

    Raises
    ------
    InputError
        A result without slices, or a metric it did not compute per slice.
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
    >>> base = rc.slice_baseline(res, "map")
    >>> base["de"]["n_queries"], round(base["de"]["value"], 4), base["de"]["ties"]
    (18, 0.731, 'pessimistic')
    """
    slices = require_slices(result, "slice_baseline")
    spec = metric_spec(metric)
    ties = _ties(result)
    out = {}
    for name, s in slices.items():
        if getattr(s, "lacks", None) is not None and s.lacks(spec.name) is not None:
            if spec.name in result and slices.of_metric(spec.name):
                continue  # a caption slice: no value of an i2t metric or rsum to record
            raise InputError(f"slice_baseline: {s.lacks(spec.name)}")
        if spec.name not in s:
            raise InputError(
                f"slice_baseline: {spec.name} has no per-slice value (computed per slice: {', '.join(s)})."
            )
        cause = no_value_cause(
            name, s.result, s.n_queries, "evaluate without the slice's queries (slice value None)"
        )
        if (
            cause is not None
        ):  # a NaN record would fail every later comparison, for no reason it names
            raise InputError(f"slice_baseline: {spec.name}: {cause[:-1]}; no value to record.")
        out[name] = {
            "value": float(s[spec.name]),
            "n_queries": s.n_queries,
            "n_used": s.n_used,
            "metric": spec.name,
            **({"ties": ties} if ties else {}),
        }
    return out


def _same_kind(records: Mapping, metric: str, ties: str | None, gate: str) -> None:
    """Records of another metric (or tie policy) than the gate's are refused, naming both:
    their values are not comparable."""
    metrics: dict[str, list[str]] = {}
    policies: dict[str, list[str]] = {}
    for k, v in records.items():
        if not isinstance(v, Mapping):
            continue
        if v.get("metric") is not None:
            metrics.setdefault(metric_spec(str(v["metric"])).name, []).append(str(k))
        if v.get("ties") is not None:
            policies.setdefault(str(v["ties"]), []).append(str(k))
    other = {m: n for m, n in metrics.items() if m != metric}
    if other:
        held = "; ".join(f"{m} (slices {', '.join(map(repr, n[:3]))})" for m, n in other.items())
        raise InputError(
            f"{gate}: the baseline holds values of {held}, and this gate compares {metric}: values of "
            f"another metric are not comparable. Pass the baseline of {metric} "
            f"(slice_baseline(result, {metric!r})), or gate the baseline's metric."
        )
    other = {t: n for t, n in policies.items() if t != ties} if ties else {}
    if other:
        held = ", ".join(f"ties={t!r}" for t in other)
        raise InputError(
            f"{gate}: {metric}: the baseline was evaluated with {held}, this result with ties={ties!r}: "
            "values under different tie policies are not comparable. Re-record the baseline with "
            f"ties={ties!r}, or evaluate with the baseline's policy."
        )


def _baseline_values(baseline, metric: str, ties: str | None = None) -> dict[str, float]:
    gate = "assert_no_slice_regression"
    if getattr(baseline, "slices", None) is not None and hasattr(baseline, "per_query"):
        if metric not in baseline:
            raise InputError(
                f"{gate}: the baseline result has no {metric} (it holds: {', '.join(baseline)}); "
                f"evaluate the baseline with metrics=[{metric!r}], or gate one of those."
            )
        baseline = slice_baseline(baseline, metric)
    if hasattr(baseline, "per_query"):
        require_slices(baseline, f"{gate} (the baseline)")
    if not isinstance(baseline, Mapping) or not baseline:
        raise InputError(
            f"{gate}: baseline= takes a sliced EvaluationResult or {{slice: value}} "
            f"(or slice_baseline(result, metric)'s records), got {type(baseline).__name__}."
        )
    _same_kind(baseline, metric, ties, gate)
    out = {}
    for k, v in baseline.items():
        value = v.get("value") if isinstance(v, Mapping) else v
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise InputError(
                f"{gate}: the baseline's slice {k!r} has value {value!r}; expected a finite "
                "number (re-record the baseline)."
            )
        out[str(k)] = float(value)
    return out


def _allowed_drop(then: float, max_drop, max_relative_drop) -> float:
    """The drop a slice at baseline ``then`` may take: the smaller of ``max_drop`` and
    ``max_relative_drop`` times the baseline, where given (the caller gives max_drop 0
    when neither was: any drop fails)."""
    rel = None if max_relative_drop is None else max_relative_drop * abs(then)
    return min(v for v in (max_drop, rel) if v is not None)


def _refuse_unfailable(
    spec, base, wanted, max_drop, max_relative_drop, gate: str, slices=None
) -> None:
    """The slices whose tolerance reaches past every drop their baseline allows (a slice
    at map 0.08 under max_drop 0.5 cannot fail, whatever the model; a slice at meanr 3
    whose queries rank 20 candidates, under max_drop 20): an InputError when every
    gated slice is one (the gate could never fail, as the whole-set gate refuses), else
    a warning naming them (the gate checks the others only). A rank metric's largest
    value is the slice's largest attainable rank (:func:`max_rank` of the slice's
    queries, from ``slices``); unknown, its slices are not judged."""
    dead, at_end = [], []
    for n in wanted:
        then = round_stored(float(base[n]))
        top = None
        if slices is not None and not spec.capabilities.higher_is_better and n in slices:
            top = max_rank(slices[n].result, spec.name)[0]
        most = attainable_drop(spec.capabilities, then, top)
        allowed = _allowed_drop(then, max_drop, max_relative_drop)
        if most is not None and allowed >= most:
            if no_drop_left(spec.capabilities, then, top) is not None:  # the whole-set gate's rule
                at_end.append(f"{n}: {then:.4g}")
            lose = "to lose" if spec.capabilities.higher_is_better else "to rise"
            dead.append(f"{n} ({then:.4g}: at most {most:.4g} {lose}, {allowed:.4g} allowed)")
    if not dead:
        return
    shown = ", ".join(dead[:8]) + (f", ... ({len(dead)} in all)" if len(dead) > 8 else "")
    if len(dead) == len(wanted):
        fix = (
            "write a tolerance below each slice's baseline (or a max_relative_drop below 1), or gate "
            "the whole set"
            if len(at_end) < len(dead)
            else "every slice's baseline is already at the end a drop goes toward ("
            + at_end[0]
            + "), so no tolerance helps: record the baselines from a model that scores better"
        )
        raise InputError(
            f"{gate}: {spec.name}: no slice can drop by more than the tolerance from its baseline, so "
            f"the gate could never fail: {shown}; {fix}."
        )
    warn_outside(
        f"retrieval-checks: {gate}: {spec.name}: {len(dead)} of {len(wanted)} slices cannot drop by more "
        f"than the tolerance from their baseline, so the gate cannot fail on them: {shown}; the other "
        "slices are gated. Lower the tolerance, or gate named slices.",
        RuntimeWarning,
    )


def assert_no_slice_regression(
    result,
    baseline,
    metric: str,
    *,
    max_drop: float | None = None,
    max_relative_drop: float | None = None,
    slices=None,
    confidence: float | None = None,
    seed: int | None = None,
    unsliced: str = "fail",
) -> None:
    """Fail when a slice's ``metric`` dropped by more than ``max_drop`` (or
    ``max_relative_drop`` times its baseline value; the smaller where both are given;
    neither: no tolerance given, any drop fails) from the baseline's value of the same slice (a rise for
    rank metrics).

    ``baseline``: a sliced result of the same evaluation, or ``{slice: value}`` /
    :func:`slice_baseline`'s records. Every slice of the baseline (or the ``slices``
    named) is gated: one missing now is an error, never skipped; a slice new in this
    result is reported on the event, not gated (no baseline to drop from). Slices too
    small for an interval are refused, as by :func:`assert_slices`.

    Parameters
    ----------
    result:
        The sliced result to gate (see :func:`assert_slices`).
    baseline:
        A sliced result of the same evaluation, ``{slice: value}``, or
        :func:`slice_baseline`'s records (their metric and tie policy must be this
        gate's).
    metric:
        The metric compared, slice by slice.
    max_drop:
        The largest tolerated drop, in the metric's unit.
    max_relative_drop:
        The largest tolerated drop as a fraction of the slice's baseline value.
    slices:
        The names of the baseline's slices to gate (default: all of them).
    confidence, seed:
        Of each slice's bootstrap interval, shown in the message and the event.
    unsliced:
        Gating every slice of the baseline, queries with no slice value now (a slice
        that lost some of its queries' values would hide their drop): ``"fail"``
        (default) fails the gate, saying how many; ``"ignore"`` counts and reports them.

    Returns
    -------
    None
        The gate passed; its event (one row per slice, and the slices new since the
        baseline) is recorded.

    Raises
    ------
    AssertionError
        A slice dropped by more than allowed: the message lists each with its baseline
        and current value, the drop and the allowed drop.
    InputError
        A slice of the baseline missing from the result, a baseline of another metric
        or tie policy, a baseline value that is not a finite number, a slice too small
        for an interval, a tolerance that is NaN, negative or could never fail.
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
    >>> base = rc.slice_baseline(res, "map")
    >>> rc.assert_no_slice_regression(res, base, "map", max_drop=0.02)
    >>> worse = rc.evaluate(x + 0.3 * rng.normal(size=x.shape), query_labels=y,
    ...                     metrics=["map"], slices=lang)
    >>> rc.assert_no_slice_regression(worse, base, "map", max_drop=0.05)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    AssertionError: map: 2 of 2 slices dropped by more than max_drop 0.05 from the baseline
      de: 0.7310 -> 0.6623 (drop 0.0687 > allowed 0.0500; 18 queries, interval [...])
    ...
    """
    __tracebackhide__ = True
    gate = "assert_no_slice_regression"
    _check_unsliced(unsliced, gate)
    all_slices = require_slices(result, gate)
    spec = metric_spec(metric)
    max_drop = _threshold(spec, max_drop, "max_drop")
    max_relative_drop = _threshold(spec, max_relative_drop, "max_relative_drop")
    strict = max_drop is None and max_relative_drop is None  # no tolerance given: any drop fails
    base = _baseline_values(baseline, spec.name, _ties(result))
    wanted = list(base) if slices is None else _named_slices(base, slices, f"{gate} (the baseline)")
    gone = [n for n in wanted if n not in all_slices]
    if gone:
        raise InputError(
            f"{gate}: {spec.name}: slice(s) {', '.join(map(repr, gone))} of the baseline are missing from this "
            f"result (its slices: {', '.join(map(repr, all_slices)) or 'none'}); a slice that disappears is not "
            "skipped: restore its queries' slice values, or re-record the baseline if it was dropped on purpose "
            "(a baselines file: pytest --rc-regen-all or --rc-force-regen rewrites the check's slice records and "
            "removes those of slices that are gone; a slice_baseline() dict: record it again)."
        )
    wanted = _holding(all_slices, wanted, spec.name, gate, True)
    _refuse_unfailable(
        spec, base, wanted, 0.0 if strict else max_drop, max_relative_drop, gate, all_slices
    )
    ivs = slice_intervals(result, spec.name, confidence=confidence, seed=seed)
    _refuse_small(
        ivs, wanted, gate, spec.name, all_slices, {"max_drop": 0.0 if strict else max_drop}
    )
    rows, failing = [], []
    sign = 1.0 if spec.higher_is_better else -1.0
    for n in wanted:
        row = ivs[n].to_dict()
        # both at the precision a baselines file stores (as assert_no_regression compares): a
        # result equal to its stored baseline compares equal
        now, then = round_stored(float(ivs[n].value)), round_stored(float(base[n]))
        drop = sign * (then - now)
        allowed = _allowed_drop(then, 0.0 if strict else max_drop, max_relative_drop)
        row["baseline"] = then
        row["drop"] = drop
        row["allowed_drop"] = allowed
        # drop > allowed, decided exactly on the decimals (gates/_exact)
        bad = math.isnan(now) or (
            exceeds(then - now, allowed) if sign > 0 else exceeds(now - then, allowed)
        )
        row["passed"] = not bad
        rows.append(row)
        if bad:
            failing.append(row)
    new = [
        n for n in _holding(all_slices, list(all_slices), spec.name, gate, False) if n not in base
    ]
    # every slice of the baseline gated: queries that lost their slice value since would
    # shrink a slice unseen (its drop hidden); named slices: the user chose what to see
    unseen = "" if slices is not None else _unsliced_failure(all_slices, wanted, unsliced)
    worst = max(
        rows, key=lambda r: -math.inf if r["drop"] is None or math.isnan(r["drop"]) else r["drop"]
    )
    _emit(
        gate,
        spec.name,
        spec,
        worst["value"],
        not failing and not unseen,
        "slice baseline",
        "no drop allowed (no tolerance given)" if strict else "max drop",
        0.0 if strict else max_drop if max_drop is not None else max_relative_drop,
        {
            k: v
            for k, v in (("max_drop", max_drop), ("max_relative_drop", max_relative_drop))
            if v is not None
        },
        rows,
        all_slices,
        extra={"new_slices": new} if new else None,
        worst=worst,
        unseen=unseen,
    )
    if not failing and not unseen:
        return
    if not failing:
        raise AssertionError(
            f"{spec.name}: no slice dropped from its baseline, but {unseen}\n  rule: a gate over every "
            "slice fails while queries have no slice value (unsliced='fail')"
        )
    lines = "\n".join(
        f"  {r['slice']}: {_f(r['baseline'], spec.unit)} -> {_f(r['value'], spec.unit)} "
        f"(drop {_f(r['drop'], spec.unit)} > allowed {_f(r['allowed_drop'], spec.unit)}; {r['n_queries']} queries"
        + (
            f", interval [{_f(r['low'], spec.unit)}, {_f(r['high'], spec.unit)}]"
            if r["low"] is not None
            else ""
        )
        + ")"
        for r in failing
    )
    note = _missing_note(all_slices)
    tolerance = (
        "dropped from the baseline (no tolerance given: any drop fails; pass max_drop= or "
        "max_relative_drop= to allow one)"
        if strict
        else "dropped by more than "
        + " / ".join(
            f"{k} {v:g}"
            for k, v in (("max_drop", max_drop), ("max_relative_drop", max_relative_drop))
            if v is not None
        )
        + " from the baseline"
    )
    raise AssertionError(
        f"{spec.name}: {len(failing)} of {len(rows)} slices {tolerance}\n{lines}\n"
        + (f"  new slices (not in the baseline, not gated): {', '.join(new)}\n" if new else "")
        + (f"  also: {unseen}\n" if unseen else (f"  note: {note}\n" if note else ""))
        + "  rule: fail when a slice's drop from its baseline value exceeds the allowed drop"
    )


def slice_key(key: str, slice_name: str) -> str:
    """The baselines-file key of one slice of the baseline ``key``."""
    return f"{key} slice={slice_name}"


def check_slice_baselines(
    store,
    result,
    metric: str,
    *,
    path,
    key: str,
    slices=None,
    max_drop: float | None = None,
    max_relative_drop: float | None = None,
    confidence: float | None = None,
    seed: int | None = None,
    context: dict | None = None,
    unsliced: str = "fail",
) -> None:
    """Per-slice baselines in a baselines file, with a
    :class:`~retrieval_checks.gates.BaselineStore`'s regeneration semantics: one record
    per slice (:func:`slice_key`). Regenerating (``store.regen``) (re)writes them as
    every baseline is written; comparing reads them back and runs
    :func:`assert_no_slice_regression` on every stored slice (or the named ``slices``):
    one gate, a row per slice; a stored slice the result lacks is an error; none stored
    fails with how to create them. ``context``: model and dataset for the records.
    ``unsliced``: as :func:`assert_no_slice_regression`'s (every stored slice gated)."""
    __tracebackhide__ = True
    gate = "per-slice baselines"
    _check_unsliced(unsliced, gate)
    all_slices = require_slices(result, gate)
    name = metric_spec(metric).name
    named = None if slices is None else _named_slices(all_slices, slices, gate)
    if store.regen is not None:
        wanted = _holding(
            all_slices, list(all_slices) if named is None else named, name, gate, named is not None
        )
        intervals = slice_intervals(result, name, confidence=confidence, seed=seed)
        _refuse_small(intervals, wanted, gate, name, all_slices)
        failures = []
        # the records of this check's slices that are gone from the result: regenerating
        # writes the slices the result has now, so they are removed (left, they would fail
        # every later comparison with "missing from this result")
        prefix = slice_key(key, "")
        stale = sorted(
            k[len(prefix) :]
            for k in store._file(path).records
            if isinstance(k, str) and k.startswith(prefix) and k[len(prefix) :] not in all_slices
        )
        for s in stale:
            store.pending.append((str(path), slice_key(key, s), None))
            if store.regen == "force":
                failures.append(
                    f"slice {s!r}: removed the record of slice {s!r} (no longer in the result) from "
                    f"{Path(path).name}; "
                    "review the change and commit it, then run again without --rc-force-regen."
                )
        for s in wanted:
            record = baseline_record(all_slices[s].result, name, confidence=confidence, seed=seed)
            # the slice's interval is the slice gates' (slice_intervals: a class bootstrap where
            # the labels are classes), not the slice result's query bootstrap, narrower and
            # contradicting every report that shows the baseline beside the gate; n stays the
            # queries the value averages (the units' count)
            iv = intervals[s]
            record.update(
                interval=[
                    min(float(iv.interval.low), record["value"]),
                    max(float(iv.interval.high), record["value"]),
                ],
                confidence=float(iv.interval.confidence),
                interval_method=f"{iv.interval.method} ({iv.n_units} {iv.unit})",
                n_queries=int(iv.n_queries),
            )
            record.update({k: v for k, v in (context or {}).items() if v is not None}, slice=s)
            try:
                store.check(
                    record,
                    path=path,
                    key=slice_key(key, s),
                    confidence=confidence,
                    max_drop=max_drop,
                    max_relative_drop=max_relative_drop,
                )
            except AssertionError as exc:
                failures.append(f"slice {s!r}: {exc}")
        if failures:
            raise AssertionError(
                f"{name}: {len(failures)} of {len(wanted)} slice baselines written\n"
                + "\n".join(failures)
            )
        return
    prefix = slice_key(key, "")
    try:
        keys = [k for k in store._file(path)._read() if isinstance(k, str)]
    except OSError:
        keys = []
    stored = {}
    for k in keys:
        if k.startswith(prefix) and (named is None or k[len(prefix) :] in named):
            record = store.stored(path, k)  # its metric too: another metric's record is refused
            stored[k[len(prefix) :]] = {"value": record["value"], "metric": record.get("metric")}
    unrecorded = [n for n in (named or ()) if n not in stored]
    if stored and unrecorded:  # a slice named since the baseline was recorded
        raise AssertionError(
            f"{name}: slice(s) {', '.join(map(repr, unrecorded))} of {key!r} have no record in "
            f"{Path(path).name} (records: {', '.join(map(repr, stored))}); record them with --rc-force-regen "
            "(writes missing or changed ones and fails) or --rc-regen-all, review the file and commit it."
        )
    if not stored:
        raise AssertionError(
            f"no baseline for the slices of {key!r} in {Path(path).name}.\n  Create it: run pytest with "
            "--rc-regen-all (writes every baseline and passes) or --rc-force-regen (writes missing or changed "
            "ones and fails), review the file and commit it."
        )
    assert_no_slice_regression(
        result,
        stored,
        name,
        max_drop=max_drop,
        max_relative_drop=max_relative_drop,
        slices=named,
        confidence=confidence,
        seed=seed,
        unsliced=unsliced,
    )
