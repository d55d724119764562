"""Thresholds checked against a metric's unit and attainable range, in one place.

A gate is worth exactly its red: a threshold that is NaN (every comparison with NaN is
false), on the wrong scale (``at_least: 70`` on a fraction) or out of reach
(``below: 5`` on a gap of fractions, ``max_drop: 1``) makes a gate that can never
fail, or never pass. :func:`check_threshold` refuses such values with an error that
names the field, the metric's unit and range, and what was probably meant
(``70 -> 0.7``). The YAML suite schema calls it when a suite is loaded, and every gate
calls it when it runs, so a suite and a Python test fail the same way.

Roles of a threshold (``role``):

- ``at_least`` / ``at_most``: bounds on the metric's value (or an interval bound):
  must lie in the attainable range, and not on the end that makes the rule vacuous
  (``at_least`` at the range's low end, ``at_most`` at its high end);
- ``below``: the largest allowed generalization gap (a difference of two values):
  strictly inside (-width, width), where width = high - low;
- ``margin`` and ``max_drop``: a tolerated drop, >= 0 and below the width;
- ``max_relative_drop``: a tolerated relative drop, >= 0 and below 1 where the metric
  cannot fall by more than 100% (bounded, higher is better, low end 0);
- ``baseline``: a stored baseline value: finite and inside the range.

Values on the wrong scale: ``at_least`` / ``at_most`` in (0, 1] on a metric in
percent (``mean_recall``: 0.5 was probably 50), or in (0, 6] on Rsum (percentage
points, the sum of six recalls in percent: 4.5 was probably 450), are refused.

Where the caller knows more than the registry, two optional arguments tighten the
range: ``high`` (with ``high_why``), the largest value attainable in this result
(the largest rank a query can get from its gallery; the registry's ranks are
unbounded), and ``baseline``, the baseline a ``max_drop`` / ``margin`` /
``max_relative_drop`` is measured from: a drop can be at most ``baseline - low``
when higher is better, ``high - baseline`` otherwise, and a tolerance that covers
all of it makes a gate that can never fail.
"""

from __future__ import annotations

import math
import numbers

from .._suggest import shown
from ..errors import InputError
from ._registry import Family

__all__ = ["check_threshold", "check_finite", "probable_meaning", "ROLES"]

ROLES = ("at_least", "at_most", "below", "margin", "max_drop", "max_relative_drop", "baseline")


def _fmt(x: float) -> str:
    """Six significant digits, or the exact value when rounding would hide why it was
    refused (1.0000001 must not print as 1)."""
    short = f"{x:.6g}"
    return short if float(short) == x else repr(float(x))


#: Rsum's unit: a threshold in (0, RSUM_SCALE_SLIP] was probably written as a sum of fractions.
RSUM_SCALE_SLIP = 6.0


def check_finite(value, field: str, *, what: str = "a finite number") -> float:
    """``float(value)`` when ``value`` is a real, finite number (not a bool, not NaN or
    infinite); else :class:`~retrieval_checks.InputError` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        fix = ""
        if isinstance(value, str):
            try:
                parsed = float(value)
            except ValueError:
                parsed = math.nan
            if math.isfinite(parsed):
                fix = f" Write it as a number, without quotes: {parsed:g}."
        if isinstance(value, bool):
            fix = " Write a number such as 0.7 (True and False are not thresholds)."
        raise InputError(
            f"{field}={shown(value)}: expected {what}, found {type(value).__name__}.{fix}"
        )
    try:
        v = float(value)
    except (OverflowError, ValueError):
        raise InputError(
            f"{field}: expected {what}, found a number too large for a float; write a number such "
            "as 0.7."
        ) from None
    if not math.isfinite(v):
        raise InputError(
            f"{field}={shown(value)}: expected {what}; NaN and infinities make a gate that can never "
            "fail (every comparison with NaN is false). Write a finite threshold."
        )
    return v


def probable_meaning(value: float, family: Family) -> float | None:
    """What a threshold outside ``family``'s range probably meant: a percentage written
    for a fraction (70 -> 0.7), a fraction written for percent (0.7 -> 70), or None."""
    v = abs(value)
    if (
        family.unit == "fraction" and 2.0 <= v <= 100.0
    ):  # 1.0000001 or 1.5 is no percentage: a slip past 1
        return math.copysign(v / 100.0, value)
    if family.unit == "percent" and 0.0 < v <= 1.0:
        return math.copysign(v * 100.0, value)
    if family.unit == "percentage points" and 0.0 < v <= RSUM_SCALE_SLIP:
        return math.copysign(v * 100.0, value)
    return None


def _meant(value: float, family: Family) -> str:
    m = probable_meaning(value, family)
    return f" Did you mean {_fmt(m)} ({_fmt(value)} -> {_fmt(m)})?" if m is not None else ""


def _direction(role: str, family: Family, name: str) -> str:
    """The bound a user probably meant when ``role`` can never fail because it points
    the wrong way: a floor (at_least) under a lower-is-better metric (medr, meanr: a
    smaller rank is better), or a cap (at_most) over a higher-is-better one."""
    if role == "at_least" and not family.higher_is_better:
        return (
            f" Did you mean at_most? {name} is lower-is-better (a smaller {family.unit} is better), so every "
            f"value clears this floor; at_most, the largest acceptable {family.unit}, "
            "is the bound a worse model fails."
        )
    if role == "at_most" and family.higher_is_better:
        return (
            f" Did you mean at_least? {name} is higher-is-better, so every value stays under this "
            "cap; at_least, the lowest acceptable value, is the bound a worse model fails."
        )
    return ""


def _scale_slip(v: float, family: Family, name: str) -> str | None:
    """Why ``v`` is probably on the wrong scale for a bound of a percent or Rsum metric."""
    if family.unit == "percent" and 0.0 < v <= 1.0:
        return (
            f"{name} is in percent (0-100), and {_fmt(v)} looks like a fraction: a bound this low is almost "
            "always a slip"
        )
    if family.unit == "percentage points" and 0.0 < v <= RSUM_SCALE_SLIP:
        return (
            f"{name} is in percentage points (0-600): the sum of six recalls, each in percent, not a sum of "
            f"fractions; {_fmt(v)} looks like recalls written as fractions"
        )
    return None


def check_threshold(  # long: one branch per threshold role, each with its own message
    family: Family,
    value,
    *,
    role: str,
    field: str | None = None,
    metric: str | None = None,
    high: float | None = None,
    high_why: str = "",
    baseline: float | None = None,
) -> float:
    """Validate a threshold of ``role`` (see :data:`ROLES`) for a metric of ``family``
    and return it as a float; raise :class:`~retrieval_checks.InputError` naming
    ``field`` (default: the role), the metric, its unit and range, and the probable
    meaning when the value looks like it was written on another scale.

    ``high``: the largest value attainable where the caller knows it (a rank cannot
    exceed the gallery a query ranks), ``high_why`` says why; it tightens the
    registry's range. ``baseline``: the baseline a drop tolerance is measured from;
    a tolerance at least as large as the largest attainable drop is refused."""
    if role not in ROLES:
        raise ValueError(f"unknown threshold role {role!r}")
    field = field or role
    name = metric or family.name
    v = check_finite(value, field)
    lo, hi = family.low, family.high
    width = hi - lo
    unit = f"{name}: unit {family.unit}, attainable range {family.range_text()}"
    where = f"{field}={_fmt(v)}"
    top = hi
    if high is not None and math.isfinite(high) and high < hi:
        top = float(high)
    why = f" ({high_why})" if high_why else ""

    def fail(problem: str) -> None:
        meant = _meant(v, family)
        if not meant and "could never fail" in problem:
            meant = _direction(role, family, name)
        raise InputError(f"{where}: {problem} ({unit}).{meant}")

    if role in ("at_least", "at_most", "baseline"):
        if v < lo or v > hi:
            never = (
                "pass"
                if (role == "at_least" and v > hi) or (role == "at_most" and v < lo)
                else "fail"
            )
            if role == "baseline":
                fail("outside the metric's attainable range")
            fail(f"outside the metric's attainable range: a gate that could never {never}")
        if role in ("at_least", "at_most"):
            slip = _scale_slip(v, family, name)
            if slip is not None:
                fail(slip)
        if role == "at_least" and v == lo:
            fail(f"every value is >= {_fmt(lo)}, so the gate could never fail")
        if role == "at_most" and v == hi:
            fail(f"every value is <= {_fmt(hi)}, so the gate could never fail")
        if top < hi:
            if role == "at_most" and v >= top:
                fail(
                    f"the largest attainable value here is {_fmt(top)}{why}, so every value is <= {_fmt(v)} and "
                    f"the gate could never fail; write a bound below {_fmt(top)}"
                )
            if role == "at_least" and v > top:
                fail(
                    f"the largest attainable value here is {_fmt(top)}{why}, so the gate could never pass"
                )
            if role == "baseline" and v > top:
                fail(f"the largest attainable value is {_fmt(top)}{why}")
        return v
    if role == "below":
        if math.isfinite(width):  # a gap's own range: the values' differences
            unit = f"{name}: unit {family.unit}, a gap's attainable range [{_fmt(-width)}, {_fmt(width)}]"
        if math.isfinite(width) and v >= width:
            fail(
                f"a gap (a difference of two values) is at most {_fmt(width)}, so the gate could never fail"
            )
        if math.isfinite(width) and v <= -width:
            fail(f"a gap is at least {_fmt(-width)}, so the gate could never pass")
        return v
    most = attainable_drop(family, baseline, top)
    if role in ("margin", "max_drop"):
        if v < 0:
            raise InputError(
                f"{where}: a tolerated drop must be >= 0 (0: no drop tolerated); write "
                f"{_fmt(-v)} for a drop of {_fmt(-v)}."
            )
        if math.isfinite(width) and v >= width:
            fail(f"no drop exceeds {_fmt(width)}, so the gate could never fail")
        if most is not None and v > 0 and v >= most:
            fail(
                f"from the baseline {_fmt(baseline)} the metric can drop by at most {_fmt(most)} "
                f"({_drop_end(family, top, why)}), so a drop can never exceed {field} and the gate could never "
                f"fail; write a tolerance below {_fmt(most)}"
            )
        return v
    # max_relative_drop
    if v < 0:
        raise InputError(
            f"{where}: a tolerated relative drop must be >= 0 (a fraction: 0.05 for 5%)."
        )
    if family.higher_is_better and lo == 0 and v >= 1:
        meant = (
            f" Did you mean {_fmt(v / 100)} ({_fmt(v)}% -> {_fmt(v / 100)})?" if v <= 100 else ""
        )
        raise InputError(
            f"{where}: a relative drop is a fraction of the baseline, and {name} cannot fall by "
            f"100% or more, so the gate could never fail.{meant}"
        )
    if most is not None and baseline and v > 0 and v >= most / abs(baseline):
        rel = most / abs(baseline)
        raise InputError(
            f"{where}: from the baseline {_fmt(baseline)} {name} can drop by at most {_fmt(most)} "
            f"({_drop_end(family, top, why)}), a relative drop of {_fmt(rel)}, so the gate could never "
            f"fail; write a fraction of the baseline below {_fmt(rel)} (0.05 for 5%) ({unit})."
        )
    return v


def attainable_drop(
    family: Family, baseline: float | None, top: float | None = None
) -> float | None:
    """The largest drop from ``baseline``: to the low end when higher is better, to the
    high end (``top``) otherwise; None when unknown (no baseline, or no upper bound)."""
    if baseline is None or not math.isfinite(baseline):
        return None
    if family.higher_is_better:
        return max(baseline - family.low, 0.0) if math.isfinite(family.low) else None
    top = family.high if top is None else top
    return max(top - baseline, 0.0) if math.isfinite(top) else None


def _drop_end(family: Family, top: float, why: str) -> str:
    if family.higher_is_better:
        return f"down to the low end {_fmt(family.low)}; higher is better"
    return f"up to the largest attainable value {_fmt(top)}{why}; lower is better"
