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
"""

from __future__ import annotations

import math
import numbers

from ..errors import InputError
from ._registry import Family

__all__ = ["check_threshold", "check_finite", "probable_meaning", "ROLES"]

ROLES = ("at_least", "at_most", "below", "margin", "max_drop", "max_relative_drop", "baseline")


def _fmt(x: float) -> str:
    return f"{x:.6g}"


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
        raise InputError(f"{field}={value!r}: expected {what}, found {type(value).__name__}.{fix}")
    try:
        v = float(value)
    except (OverflowError, ValueError):
        raise InputError(f"{field}: expected {what}, found an integer too large for a float.") from None
    if not math.isfinite(v):
        raise InputError(f"{field}={value!r}: expected {what}; NaN and infinities make a gate that can never "
                         "fail (every comparison with NaN is false). Write a finite threshold.")
    return v


def probable_meaning(value: float, family: Family) -> float | None:
    """What a threshold outside ``family``'s range probably meant: a percentage written
    for a fraction (70 -> 0.7), a fraction written for percent (0.7 -> 70), or None."""
    v = abs(value)
    if family.unit == "fraction" and 1.0 < v <= 100.0:
        return math.copysign(v / 100.0, value)
    if family.unit == "percent" and 0.0 < v <= 1.0:
        return math.copysign(v * 100.0, value)
    return None


def _meant(value: float, family: Family) -> str:
    m = probable_meaning(value, family)
    return f" Did you mean {_fmt(m)} ({_fmt(value)} -> {_fmt(m)})?" if m is not None else ""


def check_threshold(family: Family, value, *, role: str, field: str | None = None, metric: str | None = None) -> float:
    """Validate a threshold of ``role`` (see :data:`ROLES`) for a metric of ``family``
    and return it as a float; raise :class:`~retrieval_checks.InputError` naming
    ``field`` (default: the role), the metric, its unit and range, and the probable
    meaning when the value looks like it was written on another scale."""
    if role not in ROLES:
        raise ValueError(f"unknown threshold role {role!r}")
    field = field or role
    name = metric or family.name
    v = check_finite(value, field)
    lo, hi = family.low, family.high
    width = hi - lo
    unit = f"{name}: unit {family.unit}, attainable range {family.range_text()}"
    where = f"{field}={_fmt(v)}"

    def fail(problem: str) -> None:
        raise InputError(f"{where}: {problem} ({unit}).{_meant(v, family)}")

    if role in ("at_least", "at_most", "baseline"):
        if v < lo or v > hi:
            never = "pass" if (role == "at_least" and v > hi) or (role == "at_most" and v < lo) else "fail"
            if role == "baseline":
                fail("outside the metric's attainable range")
            fail(f"outside the metric's attainable range: a gate that could never {never}")
        if role == "at_least" and v == lo:
            fail(f"every value is >= {_fmt(lo)}, so the gate could never fail")
        if role == "at_most" and v == hi:
            fail(f"every value is <= {_fmt(hi)}, so the gate could never fail")
        return v
    if role == "below":
        if math.isfinite(width) and v >= width:
            fail(f"a gap (a difference of two values) is at most {_fmt(width)}, so the gate could never fail")
        if math.isfinite(width) and v <= -width:
            fail(f"a gap is at least {_fmt(-width)}, so the gate could never pass")
        return v
    if role in ("margin", "max_drop"):
        if v < 0:
            raise InputError(f"{where}: a tolerated drop must be >= 0 (0: no drop tolerated); write "
                             f"{_fmt(-v)} for a drop of {_fmt(-v)}.")
        if math.isfinite(width) and v >= width:
            fail(f"no drop exceeds {_fmt(width)}, so the gate could never fail")
        return v
    # max_relative_drop
    if v < 0:
        raise InputError(f"{where}: a tolerated relative drop must be >= 0 (a fraction: 0.05 for 5%).")
    if family.higher_is_better and lo == 0 and v >= 1:
        meant = f" Did you mean {_fmt(v / 100)} ({_fmt(v)}% -> {_fmt(v / 100)})?" if v <= 100 else ""
        raise InputError(f"{where}: a relative drop is a fraction of the baseline, and {name} cannot fall by "
                         f"100% or more, so the gate could never fail.{meant}")
    return v
