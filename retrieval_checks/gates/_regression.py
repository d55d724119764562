"""Did a metric get worse than its baseline? Drops, tolerances and significance.

The vocabulary is MLflow's and TFMA's change thresholds: a **direction** (higher or
lower is better), a **maximum absolute drop** and a **maximum relative drop** (drop
divided by the baseline's absolute value), and optionally "fail only when the drop
is statistically significant". A drop is positive when the metric moved the wrong
way: ``baseline - current`` when higher is better, ``current - baseline`` otherwise.

Significance, one-sided at level ``1 - confidence``:

- **paired** (per-unit sums stored with the baseline: classes, groups or queries):
  the cluster-robust paired t-test of :func:`retrieval_checks.compare` on the
  per-unit differences, with units-1 degrees of freedom. Exact when both runs have
  the same units; units present in only one run are an error.
- **from intervals** otherwise: each interval is read as a normal one, its standard
  error ``(high - low) / (2 z)``; the drop is tested with
  ``z = drop / sqrt(se_baseline^2 + se_current^2)``. Two evaluations on the same
  queries are positively correlated, so this overstates the difference's standard
  error: it is conservative (it flags fewer drops than the paired test).
- neither (no interval): a drop cannot be called significant; the check says so
  and fails on the tolerance alone.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .._lazy import norm_ppf, norm_sf, t_cdf
from .._suggest import hint, shown
from ..errors import InputError, MetricNameError
from ..metrics._names import metric_spec
from ..metrics._registry import Family
from ..metrics._thresholds import check_finite, check_threshold, no_drop_left
from ..options import OPTIONS, check_option
from ..stats._power import Power, check_power, power_of, spread
from ._exact import exceeds

__all__ = ["Change", "measure_change", "higher_is_better", "change_family", "checked_option"]


def higher_is_better(metric: str) -> bool | None:
    """Direction of a metric name as recorded by the gates (None when unknown):
    ``<metric> gap`` is lower-is-better, ``<metric> difference`` higher-is-better."""
    if not isinstance(metric, str):
        return None
    if metric.endswith(" gap"):
        return False
    if metric.endswith(" difference"):
        return True
    try:
        return metric_spec(metric).higher_is_better
    except MetricNameError:
        return None


@dataclass(frozen=True)
class Change:
    """The change of one metric from a baseline to the current run.

    Built by :func:`~retrieval_checks.measure_change` (and returned by
    :func:`~retrieval_checks.assert_no_regression`); frozen.

    Parameters
    ----------
    metric:
        The metric's name.
    baseline, current:
        The two values.
    higher_is_better:
        The metric's direction.
    drop, relative_drop:
        The drop (> 0: worse; sign flipped for rank metrics) and the drop over
        ``|baseline|`` (inf when the baseline is 0 and the drop positive).
    p_worse:
        The one-sided p-value of "got worse"; None when untestable.
    method:
        How ``p_worse`` was computed.
    failed:
        The verdict.
    reasons:
        Why it failed (empty when it passed).
    tolerance:
        The tolerance, in words (``"max drop 0.02"``).
    power:
        With ``significant=True`` and a testable drop: the test's power (its minimum
        detectable drop, and the power to detect the tolerance); None otherwise.
    level:
        The one-sided level the significance was tested at (1 - confidence).
    significance_gated:
        Whether the verdict rests on a significance test (a member of the run's family
        of tests for multiplicity corrections).
    beyond_tolerance:
        Whether the drop exceeds the tolerance (the verdict without significance).

    Raises
    ------
    None
        A plain record: :func:`~retrieval_checks.measure_change` checks its inputs.

    Examples
    --------
    >>> import retrieval_checks as rc
    >>> ch = rc.measure_change("map", {"value": 0.85}, {"value": 0.80}, max_drop=0.02)
    >>> print(ch)
    map: 0.85 -> 0.8 (drop +0.05, relative +5.88%; higher is better) FAIL: dropped by 0.05 > max_drop 0.02
    >>> ch.failed, round(ch.drop, 4), ch.higher_is_better
    (True, 0.05, True)
    """

    metric: str
    baseline: float
    current: float
    higher_is_better: bool
    drop: float  # > 0: worse
    relative_drop: float  # drop / |baseline| (inf when the baseline is 0 and drop > 0)
    p_worse: float | None  # one-sided p-value of "got worse"; None when untestable
    method: str
    failed: bool
    reasons: tuple = field(default_factory=tuple)
    tolerance: str = ""
    #: with ``significant=True`` and a testable drop: the test's power (its minimum
    #: detectable drop, and the power to detect the tolerance); None otherwise
    power: Power | None = None
    #: the one-sided level the significance was tested at (1 - confidence)
    level: float | None = None
    #: whether the verdict rests on a significance test (``significant=True`` and a
    #: testable drop): a member of the run's family of tests (multiplicity corrections)
    significance_gated: bool = False
    #: whether the drop exceeds the tolerance (the verdict without significance)
    beyond_tolerance: bool = False

    def __str__(self) -> str:
        arrow = "higher" if self.higher_is_better else "lower"
        p = "" if self.p_worse is None else f", p(worse)={self.p_worse:.3g} ({self.method})"
        verdict = "FAIL: " + "; ".join(self.reasons) if self.failed else "ok"
        return (
            f"{self.metric}: {self.baseline:.6g} -> {self.current:.6g} (drop {self.drop:+.4g}, relative "
            f"{self.relative_drop:+.2%}; {arrow} is better{p}) {verdict}"
        )


def finite_bounds(low, high) -> list[float]:
    """The bounds among ``low``, ``high`` that are finite numbers (int or float), as floats:
    None, a string, NaN or an infinite bound is no bound."""
    return [float(v) for v in (low, high) if isinstance(v, (int, float)) and math.isfinite(v)]


def se_from_interval(low, high, confidence: float) -> float | None:
    """The standard error behind a normal ``confidence`` interval: its width (at least 0)
    over 2 z, z the (1 + confidence) / 2 normal quantile; None unless both bounds are
    finite (:func:`finite_bounds`). For measure_change's z test and ``bound_power``."""
    bounds = finite_bounds(low, high)
    if len(bounds) != 2:
        return None
    z = float(norm_ppf((1 + confidence) / 2))
    return max(bounds[1] - bounds[0], 0.0) / (2 * z)


def _paired_p(
    baseline_units: dict, current_units: dict, sign: float
) -> tuple[float, str, float, int]:
    """One-sided p of "worse" from per-unit (sum, count) of the same units, with the
    mean difference's standard error and the number of units."""
    keys_b, keys_c = set(baseline_units), set(current_units)
    if keys_b != keys_c:
        only_b, only_c = (
            sorted(map(str, keys_b - keys_c))[:5],
            sorted(map(str, keys_c - keys_b))[:5],
        )
        raise InputError(
            f"the baseline and the current run have different units (only in the baseline: {only_b}, "
            f"only now: {only_c}); a paired test needs the same queries. Regenerate the baseline."
        )
    keys = sorted(keys_b, key=str)
    sb = np.array([baseline_units[k][0] for k in keys], dtype=float)
    cb = np.array([baseline_units[k][1] for k in keys], dtype=float)
    sc = np.array([current_units[k][0] for k in keys], dtype=float)
    cc = np.array([current_units[k][1] for k in keys], dtype=float)
    if not np.array_equal(cb, cc):
        raise InputError(
            "the baseline and the current run count different queries per unit; a paired test needs the "
            "same queries. Regenerate the baseline."
        )
    n, L = cc.sum(), len(keys)
    if L < 2:
        raise InputError("a paired test needs at least 2 units.")
    d = sc - sb  # per-unit sum of differences (current - baseline)
    mean = d.sum() / n
    se = math.sqrt(L / (L - 1) * np.sum((d - mean * cc) ** 2)) / n
    se = spread(se, max(abs(mean), float(np.max(np.abs(d) / np.maximum(cc, 1)))))
    if se == 0:
        return (0.0 if sign * mean < 0 else 1.0), f"paired t over {L} units (zero variance)", 0.0, L
    t = sign * mean / se  # negative when worse
    return float(t_cdf(t, L - 1)), f"paired t over {L} units (cluster-robust)", se, L


def checked_option(name: str, value, *, argument: str | None = None):
    """:func:`~retrieval_checks.options.check_option`, with an integer too large for a
    float (``10**400``) refused as an InputError too, never an OverflowError."""
    try:
        return check_option(name, value, argument=argument)
    except OverflowError:
        raise InputError(
            f"{argument or name}: expected {OPTIONS[name].expected}, found an integer too large for "
            "a float."
        ) from None


def _same_metric(a, b: str) -> bool:
    """Whether two metric names name the same metric (aliases resolve: ``MAP@R`` is ``map@R``)."""
    if not isinstance(a, str):
        return False
    if a == b:
        return True
    try:
        return metric_spec(a).name == metric_spec(b).name
    except MetricNameError:
        return False


def change_family(metric: str) -> Family | None:
    """The unit and attainable range of a recorded metric: the registry's family, or
    for ``<metric> gap`` / ``<metric> difference`` the range of a difference of two
    values (-width, width); None for names the registry does not know."""
    base = metric
    diff = isinstance(metric, str) and metric.endswith((" gap", " difference"))
    if diff:
        base = metric.rsplit(" ", 1)[0]
    try:
        fam = metric_spec(base).capabilities
    except MetricNameError:
        return None
    if not diff:
        return fam
    width = fam.high - fam.low
    return dataclasses.replace(fam, name=metric, low=-width, high=width)


def _tolerance(
    fam: Family | None,
    value,
    role: str,
    metric: str,
    *,
    baseline: float | None = None,
    high: float | None = None,
    high_why: str = "",
):
    if value is None:
        return None
    if fam is not None:
        return check_threshold(
            fam,
            value,
            role=role,
            field=role,
            metric=metric,
            baseline=baseline,
            high=high,
            high_why=high_why,
        )
    v = check_finite(value, role)
    if v < 0:
        raise InputError(
            f"{role}={v:g}: a tolerated drop must be >= 0 (0: no drop tolerated; a fraction of the "
            f"baseline for max_relative_drop: 0.05 for 5%)."
        )
    return v


def _side(d, which: str, fam: Family | None, metric: str) -> dict:
    """Check one side of a change (``value``, optional ``low``/``high``, ``confidence``,
    ``units``) and return it with floats; an InputError names the side and field."""
    if not isinstance(d, Mapping) or callable(getattr(d, "measure", None)):
        record = (
            " (a record: rc.baseline_record(result, metric))"
            if callable(getattr(d, "measure", None))
            else ""
        )
        raise InputError(
            f"{which}: expected a mapping with 'value' (and optionally 'low', 'high', 'confidence', "
            f"'units', 'max_rank'), found {type(d).__name__}{record}."
        )
    if "value" not in d:
        raise InputError(f"{which}: has no 'value'; found keys {sorted(map(str, d))[:20]}.")
    out = dict(d)
    field_ = f"{which} value"
    if d.get("max_rank") is not None:
        r = d["max_rank"]
        if isinstance(r, bool) or not isinstance(r, numbers.Integral) or r < 1:
            raise InputError(
                f"{which} max_rank={shown(r)}: expected an integer >= 1 (the largest rank a query can "
                "get: its gallery's size), or leave it out."
            )
        out["max_rank"] = int(r)
    if fam is not None:
        out["value"] = check_threshold(
            fam, d["value"], role="baseline", field=field_, metric=metric
        )
    else:
        out["value"] = check_finite(d["value"], field_)
    low, high = d.get("low"), d.get("high")
    if (low is None) != (high is None):
        raise InputError(
            f"{which}: an interval needs both 'low' and 'high' (or neither), found low={low!r}, "
            f"high={high!r}."
        )
    if low is not None:
        out["low"], out["high"] = (
            check_finite(low, f"{which} low"),
            check_finite(high, f"{which} high"),
        )
        if out["low"] > out["high"]:
            raise InputError(
                f"{which}: interval low={out['low']:g} > high={out['high']:g}; write [low, high]."
            )
    if d.get("confidence") is not None:
        out["confidence"] = float(
            checked_option("confidence", d["confidence"], argument=f"{which} confidence")
        )
    units = d.get("units")
    if units is not None:
        if not isinstance(units, Mapping):
            raise InputError(
                f"{which} units: expected a mapping of unit to (sum, count), found "
                f"{type(units).__name__}."
            )
        for k, v in units.items():
            if not isinstance(v, (list, tuple)) or len(v) != 2:
                raise InputError(
                    f"{which} units[{shown(k)}]: expected (sum, count), found {shown(v)}."
                )
            check_finite(v[0], f"{which} units[{shown(k)}] sum")
            if isinstance(v[1], bool) or not isinstance(v[1], numbers.Integral) or v[1] < 1:
                raise InputError(
                    f"{which} units[{shown(k)}]: the count must be an integer >= 1, found "
                    f"{shown(v[1])}."
                )
    return out


def _direction(metric, direction, baseline, current) -> bool:
    """Whether higher is better for ``metric``: its own direction, or ``direction``
    for names the registry does not know; refuses results where records are expected
    and records of another metric."""
    if not isinstance(metric, str):
        raise InputError(f"metric={shown(metric)}: expected a metric name (a string).")
    for which, d in (("baseline", baseline), ("current", current)):
        if callable(getattr(d, "measure", None)):
            raise InputError(
                f"{which}: found an evaluation result ({type(d).__name__}); measure_change compares two "
                "records: pass rc.baseline_record(result, metric) (or a mapping with 'value')."
            )
        recorded = d.get("metric") if isinstance(d, Mapping) else None
        if recorded is not None and not _same_metric(recorded, metric):
            raise InputError(
                f"metric={metric!r}, but the {which} record is for {shown(recorded)}: a change is "
                f"measured on the records' own metric; pass metric={recorded!r}, or records of "
                f"{metric!r}."
            )
    known = higher_is_better(metric)
    if direction is None:
        hib = known
        if hib is None:
            raise InputError(
                f"cannot tell whether higher or lower {metric!r} is better; give direction: higher/lower."
            )
    elif isinstance(direction, str) and direction in ("higher", "lower"):
        hib = direction == "higher"
        if known is not None and hib != known:
            raise InputError(
                f"direction={direction!r} contradicts {metric!r}, for which "
                f"{'higher' if known else 'lower'} is better; leave direction out."
            )
    else:
        close = hint(direction, ("higher", "lower")) if isinstance(direction, str) else ""
        raise InputError(
            f"direction={shown(direction)}: use 'higher' or 'lower' (which way is better).{close}"
        )
    return hib


def _check_attainable(
    fam: Family, metric: str, baseline: dict, current: dict, max_drop, max_relative_drop
) -> None:
    """A tolerance covering every drop attainable from this baseline could never fail
    (a rank's upper end is the records' ``max_rank`` when they carry it)."""
    ranks = [s["max_rank"] for s in (baseline, current) if s.get("max_rank") is not None]
    high, high_why = (float(max(ranks)), "the records' max_rank") if ranks else (None, "")
    if high is not None:
        for side, which in ((baseline, "baseline"), (current, "current")):
            check_threshold(
                fam,
                side["value"],
                role="baseline",
                field=f"{which} value",
                metric=metric,
                high=high,
                high_why=high_why,
            )
    b = baseline["value"]
    if max_drop is None and max_relative_drop is None:  # any drop fails: none can happen?
        at_end = no_drop_left(fam, b, high, high_why)
        if at_end is not None:
            raise InputError(f"{metric}: no tolerance given (any drop fails), but {at_end}.")
    _tolerance(fam, max_drop, "max_drop", metric, baseline=b, high=high, high_why=high_why)
    _tolerance(
        fam,
        max_relative_drop,
        "max_relative_drop",
        metric,
        baseline=b,
        high=high,
        high_why=high_why,
    )


def measure_change(
    metric: str,
    baseline: dict,
    current: dict,
    *,
    max_drop: float | None = None,
    max_relative_drop: float | None = None,
    direction: str | None = None,
    significant: bool = False,
    confidence: float = 0.95,
    power: float | None = None,
    min_power: float | None = None,
) -> Change:
    """Compare ``current`` with ``baseline`` (dicts with ``value`` and optionally
    ``low``, ``high``, ``confidence``, ``units``: {unit key: (sum, count)}, and for a
    rank metric ``max_rank``: the largest rank a query can get). A dict that names
    its ``metric`` (a record) must name ``metric``'s.

    Fails when the drop exceeds ``max_drop`` or the relative drop exceeds
    ``max_relative_drop`` (neither given: any drop fails), each decided exactly
    (:func:`~retrieval_checks.gates._exact.exceeds`: a drop equal to ``max_drop``,
    such as 0.85 -> 0.84 with 0.01, passes; the slack is 1e-12 of the values),
    and, with ``significant=True``, only when the drop is also significant at level
    ``1 - confidence``.

    With ``significant=True`` and a testable drop, :attr:`Change.power` holds the
    test's power (:mod:`retrieval_checks.stats._power`): its minimum detectable drop at
    ``power`` (default 0.8) and its power to detect a drop of the tolerance (the
    smaller of ``max_drop`` and ``max_relative_drop`` x baseline). ``min_power`` makes
    that a requirement: the change fails when the test detects a drop of the tolerance
    with less than ``min_power`` (it reports the units it would need); it needs
    ``significant=True`` and a tolerance.

    Fails closed: the tolerances are checked against the metric's unit and range
    (``max_drop: 1`` on a fraction could never fail) and against the drop attainable
    from the baseline (``max_drop=0.99`` from a mAP of 0.48 could never fail; a
    rank's upper end is ``max_rank`` when the dicts carry it), and NaN or infinite values,
    bounds and tolerances are refused with an :class:`~retrieval_checks.InputError`.

    Parameters
    ----------
    metric:
        The metric's name (its direction comes from the registry, else ``direction``).
    baseline, current:
        The two sides: records of :func:`~retrieval_checks.baseline_record`, or dicts
        with ``value`` (and optionally ``low``, ``high``, ``confidence``, ``units``,
        ``max_rank``).
    max_drop:
        The largest tolerated drop, in the metric's unit.
    max_relative_drop:
        The largest tolerated drop as a fraction of the baseline value.
    direction:
        ``"higher"`` or ``"lower"`` (which is better), for a metric the registry does
        not know.
    significant:
        Fail only when the drop is also significant at level ``1 - confidence``.
    confidence:
        Of the significance test (default 0.95).
    power:
        The power at which the minimum detectable drop is stated (default 0.8).
    min_power:
        Fail when the test's power to detect a drop of the tolerance is below this.

    Returns
    -------
    Change
        The change and its verdict (``failed``, ``reasons``); nothing is raised for a
        regression (:func:`~retrieval_checks.assert_no_regression` is the gate).

    Raises
    ------
    InputError
        NaN or infinite values, bounds or tolerances, a tolerance that could never
        fail, records of another metric, an evaluation result where a record is
        expected, a metric whose direction is unknown without ``direction``.

    Examples
    --------
    >>> import retrieval_checks as rc
    >>> ch = rc.measure_change("map", {"value": 0.85}, {"value": 0.84}, max_drop=0.01)
    >>> ch.failed  # a drop equal to max_drop passes
    False
    >>> ch = rc.measure_change("map", {"value": 0.85, "low": 0.82, "high": 0.88},
    ...                        {"value": 0.80, "low": 0.77, "high": 0.83},
    ...                        max_drop=0.02, significant=True)
    >>> ch.failed, ch.reasons
    (True, ('dropped by 0.05 > max_drop 0.02', 'significant (p(worse)=0.0104 < 0.05)'))
    """
    hib = _direction(metric, direction, baseline, current)
    if not isinstance(significant, bool):
        raise InputError(f"significant={shown(significant)}: expected True or False.")
    confidence = float(checked_option("confidence", confidence))
    power, min_power = _power_args(power, min_power, significant, max_drop, max_relative_drop)
    fam = change_family(metric)
    max_drop = _tolerance(fam, max_drop, "max_drop", metric)
    max_relative_drop = _tolerance(fam, max_relative_drop, "max_relative_drop", metric)
    baseline = _side(baseline, "baseline", fam, metric)
    current = _side(current, "current", fam, metric)
    b, c = baseline["value"], current["value"]
    if fam is not None:
        _check_attainable(fam, metric, baseline, current, max_drop, max_relative_drop)
    sign = 1.0 if hib else -1.0
    drop = sign * (b - c)
    relative = drop / abs(b) if b != 0 else (math.inf if drop > 0 else 0.0)
    first, second = (
        (b, c) if hib else (c, b)
    )  # drop = first - second, compared exactly (gates/_exact.py)
    reasons, tolerance = _beyond(first, second, drop, relative, abs(b), max_drop, max_relative_drop)
    p, method, test = _significance(baseline, current, sign, drop, confidence)
    level = float(f"{1 - confidence:.12g}")  # 0.05, not 0.050000000000000044
    pw = None
    if significant and test is not None:
        allowed = [v for v in (max_drop, _relative_allowed(max_relative_drop, b)) if v is not None]
        pw = _gate_power(test, level, power, min_power, min(allowed) if allowed else None)
    gated = bool(significant and p is not None)
    beyond = bool(reasons)
    failed = bool(reasons)
    if significant and failed:
        if p is None:
            reasons.append(
                "significance untestable (no interval or per-unit values): failing on the tolerance"
            )
        elif p >= 1 - confidence:
            failed = False
            reasons = [
                f"{reasons[0]}, but not significant (p(worse)={p:.3g} >= {1 - confidence:.3g})"
            ]
        else:
            reasons.append(f"significant (p(worse)={p:.3g} < {1 - confidence:.3g})")
    if pw is not None and pw.required and pw.underpowered:
        failed = True
        reasons.append(f"underpowered (min_power {pw.power:g}): {pw.describe()}")
    elif significant and min_power is not None and pw is None:  # a requirement never unchecked
        failed = True
        reasons.append(
            f"underpowered (min_power {min_power:g}): the power cannot be estimated ({method})"
        )
    return Change(
        metric,
        b,
        c,
        hib,
        drop,
        relative,
        p,
        method,
        failed,
        tuple(reasons),
        tolerance,
        power=pw,
        level=level if p is not None else None,
        significance_gated=gated,
        beyond_tolerance=beyond,
    )


def _beyond(first, second, drop, relative, scale, max_drop, max_relative_drop):
    """Why the drop ``first - second`` exceeds the tolerances (decided exactly), and the
    tolerances as text."""
    reasons = []
    if max_drop is None and max_relative_drop is None:
        if exceeds(first, 0, minus=second):
            reasons.append(f"dropped by {drop:.4g} (no drop allowed)")
        return reasons, "no drop allowed"
    parts = []
    if max_drop is not None:
        parts.append(f"max drop {max_drop:g}")
        if exceeds(first, max_drop, minus=second):
            reasons.append(f"dropped by {drop:.4g} > max_drop {max_drop:g}")
    if max_relative_drop is not None:
        parts.append(f"max relative drop {max_relative_drop:.2%}")
        if exceeds(first, max_relative_drop, minus=second, scale=scale):
            reasons.append(
                f"dropped by {relative:.2%} of the baseline > max_relative_drop "
                f"{max_relative_drop:.2%}"
            )
    return reasons, ", ".join(parts)


def _power_args(power, min_power, significant, max_drop, max_relative_drop):
    """``power`` and ``min_power`` checked (each in (0, 1)); ``min_power`` needs
    ``significant=True`` and a tolerance, and is the power reported when given."""
    power = check_power(power, "power")
    min_power = check_power(min_power, "min_power")
    if power is not None and min_power is None and not significant:
        raise InputError(
            f"power={power:g}: the power reported is that of the significance test; add "
            "significant=True (significant: true), or leave power out."
        )
    if min_power is None:
        return power, None
    if power is not None and power != min_power:
        raise InputError(
            f"power={power:g} and min_power={min_power:g}: min_power is the power the gate "
            "requires (and reports); give one of them."
        )
    if not significant:
        raise InputError(
            f"min_power={min_power:g}: a power requirement applies to a significance-gated "
            "check; add significant=True (significant: true), or leave min_power out."
        )
    if max_drop is None and max_relative_drop is None:
        raise InputError(
            f"min_power={min_power:g}: power is the chance of detecting a drop of the "
            "tolerance, and this check has none; give max_drop or max_relative_drop (the drop "
            "the gate must detect), or leave min_power out."
        )
    return power, min_power


def _significance(baseline: dict, current: dict, sign: float, drop: float, confidence: float):
    """The one-sided p-value of "worse", its method, and the test's (standard error,
    units, degrees of freedom or None for z, unit name), or (None, why, None) when
    untestable: the paired t on per-unit values when both sides have them, else the z
    test from the two intervals."""
    unit = current.get("unit") or baseline.get("unit")
    if baseline.get("units") and current.get("units"):
        p, method, se, n_units = _paired_p(baseline["units"], current["units"], sign)
        if se > 0:
            return p, method, (se, n_units, n_units - 1, unit)
        # no spread of the paired differences (identical runs): the test's power is not
        # infinite; estimate it from the two intervals (independent: conservative), else unknown
        se = _interval_se(baseline, current, confidence)
        if se is None or not se > 0:
            return p, f"{method}; power unknown (no spread, no interval)", None
        return p, f"{method}; power from the two intervals", (se, n_units, None, unit)
    se = _interval_se(baseline, current, confidence)
    if se is None:
        return None, "no interval: significance untestable", None
    if se == 0:  # intervals without spread: the drop is certain, its test's power unknown
        p = 0.0 if drop > 0 else 1.0
        return p, "z from the two intervals; power unknown (intervals without spread)", None
    p = float(norm_sf(drop / se))
    n = current.get("n")
    n_units = n if isinstance(n, numbers.Integral) and not isinstance(n, bool) else None
    return p, "z from the two intervals (conservative)", (se, n_units, None, unit)


def _interval_se(baseline: dict, current: dict, confidence: float) -> float | None:
    """The standard error of the drop from the two intervals (None without both)."""
    # a record may hold "confidence": None (a history row of a gate that kept no confidence)
    se_b = se_from_interval(
        baseline.get("low"), baseline.get("high"), baseline.get("confidence") or confidence
    )
    se_c = se_from_interval(
        current.get("low"), current.get("high"), current.get("confidence") or confidence
    )
    if se_b is None or se_c is None:
        return None
    scale = max(abs(float(baseline.get("value") or 0.0)), abs(float(current.get("value") or 0.0)))
    return spread(math.hypot(se_b, se_c), scale)  # intervals of round-off width: no spread


def _gate_power(test, level: float, power, min_power, tolerance) -> Power:
    """The power of the significance test ``test`` (standard error, units, dof, unit) at
    ``level``: at ``min_power`` when required, else at ``power`` (default 0.8)."""
    se_drop, n_units, dof, unit = test
    return power_of(
        se_drop,
        n_units or 0,
        level=level,
        power=min_power if min_power is not None else power,
        dof=dof,
        unit=unit,
        tolerance=tolerance,
        required=min_power is not None,
    )


def _relative_allowed(max_relative_drop, baseline: float):
    """The drop ``max_relative_drop`` allows from ``baseline`` (None when not given or
    when the baseline is 0: no drop to detect)."""
    if max_relative_drop is None or baseline == 0:
        return None
    return max_relative_drop * abs(baseline)
