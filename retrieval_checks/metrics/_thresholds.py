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

Where the caller knows more than the registry, three optional arguments tighten the
range: ``high`` (with ``high_why``), the largest value attainable in this result
(the largest rank a query can get from its gallery; the registry's ranks are
unbounded), ``low`` (with ``low_why``), the smallest (``precision_at_recall@Q`` is
never below the share of positive pairs: :func:`pair_floor`), and ``baseline``, the
baseline a ``max_drop`` / ``margin`` /
``max_relative_drop`` is measured from: a drop can be at most ``baseline - low``
when higher is better, ``high - baseline`` otherwise, and a tolerance that covers
all of it makes a gate that can never fail.

Some pair metrics have one value whatever the model (:func:`pair_constant`): pair
recall, precision and F1 at a threshold every pair clears (cosine ``t <= -1``,
Hamming ``t >=`` the code length) or none does, and ``recall_at_precision@P`` with P
at or below the share of positive pairs among all pairs (at the lowest threshold every
pair is predicted positive: recall 1 at precision that share). A gate on them is
refused, as one on a recall at a K past every non-relevant candidate is.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

from .._suggest import shown
from ..errors import InputError
from ._registry import Family

__all__ = [
    "check_threshold",
    "check_finite",
    "probable_meaning",
    "pair_constant",
    "pair_floor",
    "ROLES",
]

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
    for a fraction (70 -> 0.7), a fraction written for percent (0.7 -> 70), or None;
    never a value outside the range itself (-1 on rsum is not -100)."""
    v = abs(value)
    meant = None
    if (
        family.unit == "fraction" and 2.0 <= v <= 100.0
    ):  # 1.0000001 or 1.5 is no percentage: a slip past 1
        meant = math.copysign(v / 100.0, value)
    elif family.unit == "percent" and 0.0 < v <= 1.0:
        meant = math.copysign(v * 100.0, value)
    elif family.unit == "percentage points" and 0.0 < v <= RSUM_SCALE_SLIP:
        meant = math.copysign(v * 100.0, value)
    if meant is None or not family.low <= meant <= family.high:
        return None
    return meant


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
    low: float | None = None,
    low_why: str = "",
    baseline: float | None = None,
) -> float:
    """Validate a threshold of ``role`` (see :data:`ROLES`) for a metric of ``family``
    and return it as a float; raise :class:`~retrieval_checks.InputError` naming
    ``field`` (default: the role), the metric, its unit and range, and the probable
    meaning when the value looks like it was written on another scale.

    ``high``: the largest value attainable where the caller knows it (a rank cannot
    exceed the gallery a query ranks), ``high_why`` says why; it tightens the
    registry's range. ``low``, ``low_why``: the smallest value attainable whatever the
    model, likewise (an ``at_least`` at or below it could never fail; bounds only).
    ``baseline``: the baseline a drop tolerance is measured from; a tolerance at least
    as large as the largest attainable drop is refused."""
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
        if low is not None and math.isfinite(low) and low > lo:
            floor = f" ({low_why})" if low_why else ""
            if role == "at_least" and v <= low:
                fail(
                    f"the smallest value attainable here is {low:.4g}{floor} whatever the model, so "
                    f"every value is >= {_fmt(v)} and the gate could never fail; write a bound above "
                    f"{low:.4g} (at_least >= {_above(Fraction(low))})"
                )
            if role == "at_most" and v < low:
                fail(
                    f"the smallest value attainable here is {low:.4g}{floor} whatever the model, so "
                    "the gate could never pass"
                )
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
        at_end = no_drop_left(family, baseline, top, why)
        if at_end is not None:  # any tolerance, 0 too: nothing can drop
            fail(at_end)
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


def no_drop_left(
    family: Family, baseline: float | None, top: float | None = None, why: str = ""
) -> str | None:
    """Why a drop gate on ``baseline`` could never fail when the baseline is already at
    the end a drop goes toward (map 0; a rank at the largest attainable one): no drop,
    and no tolerance, can be exceeded. None otherwise. The whole-set and slice
    regression gates and the non-inferiority margin share it."""
    most = attainable_drop(family, baseline, top)
    if most is None or most > 0:
        return None
    better = "above" if family.higher_is_better else "below"
    return (
        f"the baseline {_fmt(baseline)} is already at the end a drop goes toward "
        f"({_drop_end(family, family.high if top is None else top, f' ({why})' if why else '')}), "
        f"so nothing can drop from it and the gate could never fail; record the baseline from a "
        f"model that scores {better} {_fmt(baseline)}"
    )


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


def _share(n_positive: int, n_negative: int) -> Fraction:
    return Fraction(n_positive, n_positive + n_negative)


def _shown_share(n_positive: int, n_negative: int) -> str:
    return (
        f"the share of positive pairs among all pairs ({n_positive} of "
        f"{n_positive + n_negative}: {float(_share(n_positive, n_negative)):.4g})"
    )


def _above(x: Fraction) -> str:
    """A short decimal strictly above ``x`` (about three significant digits), for a fix
    that must clear it: the share 0.49593 is shown 0.4959, and 0.4959 would not."""
    digits = 3 - math.floor(math.log10(x)) if x > 0 else 3
    up = Fraction(math.floor(x * 10**digits) + 1, 10**digits)
    return f"{float(up):.{max(digits, 1)}f}".rstrip("0").rstrip(".")


def _threshold_reach(similarity: str, t: Fraction, n_bits) -> tuple[str, str, str] | None:
    """("all" or "none", why, fix) when a pair threshold ``t`` (in the units users write:
    :class:`~retrieval_checks.metrics._pairs.ScoreUnits`) predicts every pair positive
    or none whatever the model; None when it depends on the scores."""
    shown_t = _fmt(float(t))
    if similarity == "cosine":
        if t <= -1:
            return (
                "all",
                f"t={shown_t} is at or below the lowest cosine similarity (-1): every pair is "
                "predicted positive",
                "gate a threshold above -1",
            )
        if t > 1:
            return (
                "none",
                f"t={shown_t} is above the highest cosine similarity (1): no pair is predicted "
                "positive",
                "gate a threshold in (-1, 1]",
            )
    if similarity == "hamming":  # t: the largest Hamming distance (bits) predicted positive
        if t < 0:
            return (
                "none",
                f"t={shown_t} is a negative Hamming distance: no pair is predicted positive",
                "gate a distance in bits from 0 up to the code length",
            )
        if isinstance(n_bits, numbers.Integral) and n_bits >= 1 and t >= n_bits:
            return (
                "all",
                f"t={shown_t} is at or above the code length ({int(n_bits)} bits), the largest "
                "Hamming distance: every pair is predicted positive",
                f"gate a distance below {int(n_bits)}",
            )
    if similarity == "neg_l2" and t > 0:  # t: minus the largest distance predicted positive
        return (
            "none",
            f"t={shown_t} is above 0 (neg_l2 thresholds are minus a distance): no pair is "
            "predicted positive",
            "gate a threshold <= 0 (minus the largest distance to accept)",
        )
    return None


def pair_constant(
    family: str,
    level,
    *,
    n_positive: int,
    n_negative: int,
    similarity: str | None = None,
    n_bits: int | None = None,
) -> tuple[float, str, str] | None:
    """(value, why, fix) when the pair metric ``family`` at ``level`` (P, Q or the
    threshold t, as written: a Fraction or a float) has that value whatever the model
    over ``n_positive`` positive and ``n_negative`` negative pairs; None when a model can
    change it.

    - ``recall_at_precision@P`` with P at or below the positive share
      n_positive / (n_positive + n_negative): at the lowest threshold every pair is
      predicted positive, with recall 1 at precision that share; 1.
    - ``pair_recall`` / ``pair_precision`` / ``pair_f1@t=`` where ``t`` predicts every
      pair positive (``similarity`` cosine: t <= -1; hamming: t >= ``n_bits``): 1, the
      share, 2P / (2P + N); or none (cosine t > 1, hamming t < 0, neg_l2 t > 0): 0.

    >>> pair_constant("recall_at_precision", 0.45, n_positive=180, n_negative=200)[0]
    1.0
    >>> pair_constant("recall_at_precision", 0.5, n_positive=180, n_negative=200) is None
    True
    >>> pair_constant("pair_precision", -1, n_positive=180, n_negative=200, similarity="cosine")[0]
    0.47368421052631576
    """
    if (
        not isinstance(n_positive, numbers.Integral)
        or not isinstance(n_negative, numbers.Integral)
        or n_positive < 1
        or n_negative < 0
        or level is None
    ):
        return None
    level = level if isinstance(level, Fraction) else Fraction(repr(float(level)))
    if family == "recall_at_precision":
        share = _share(n_positive, n_negative)
        if level > share:
            return None
        return (
            1.0,
            f"the precision level P={_fmt(float(level))} is at or below "
            f"{_shown_share(n_positive, n_negative)}: at the lowest threshold every pair is "
            "predicted positive, with recall 1 at that precision",
            f"gate a precision level above {float(share):.4g} (P >= {_above(share)})"
            if share < 1
            else "evaluate on items of two or more classes (there is no negative pair)",
        )
    if family not in ("pair_recall", "pair_precision", "pair_f1") or similarity is None:
        return None
    reach = _threshold_reach(similarity, level, n_bits)
    if reach is None:
        return None
    kind, why, fix = reach
    if kind == "none":
        return 0.0, why, fix
    value = {
        "pair_recall": 1.0,
        "pair_precision": float(_share(n_positive, n_negative)),
        "pair_f1": float(Fraction(2 * n_positive, 2 * n_positive + n_negative)),
    }[family]
    if family == "pair_precision":
        why += f", at a precision of {_shown_share(n_positive, n_negative)}"
    return value, why, fix


def pair_floor(family: str, *, n_positive: int, n_negative: int) -> tuple[float, str] | None:
    """(value, why): the smallest value the pair metric ``family`` can take whatever the
    model, where it is above the registry's low end; None elsewhere.
    ``precision_at_recall@Q`` is never below the share of positive pairs (the lowest
    threshold reaches recall 1 at that precision, and a model that scores every negative
    pair above every positive one gets no more), so an ``at_least`` at or below it could
    never fail.

    >>> pair_floor("precision_at_recall", n_positive=180, n_negative=200)[0]
    0.47368421052631576
    """
    if (
        family != "precision_at_recall"
        or not isinstance(n_positive, numbers.Integral)
        or not isinstance(n_negative, numbers.Integral)
        or n_positive < 1
        or n_negative < 0
    ):
        return None
    return (
        float(_share(n_positive, n_negative)),
        f"the share of positive pairs among all pairs, {n_positive} of {n_positive + n_negative}: "
        "at the lowest threshold every pair is predicted positive, at recall 1",
    )
