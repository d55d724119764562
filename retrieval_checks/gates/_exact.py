"""Threshold comparisons decided exactly: the one rule every gate uses.

A gate compares a measured value, or a difference of two (a drop, a gap), with a
threshold the user wrote as a decimal (``max_drop: 0.01``, ``at_least: 0.84``).
Metrics over n queries move in steps of 1/n, so a value lands exactly on its threshold
often; in binary floating point ``0.85 - 0.84`` is ``0.010000000000000009``, and a
drop equal to ``max_drop`` would fail ("dropped by 0.01 > max_drop 0.01").

The rule (:func:`exceeds`): every operand is read as the decimal it stands for (the
shortest text that reads back as the same float: what a baselines file stores, what a
user wrote), the comparison is done in exact rationals, and two sides that agree to
within ``RELATIVE_SLACK`` (1e-12) of the largest operand count as equal. The slack
absorbs the rounding of a value computed in floating point (``2/3 - 1/3`` against
``1/3``; a mean of per-query values), which the decimals alone cannot: ``1/3`` has no
finite decimal. It hides no real change: one query out of n moves a value by ``1/n``
times its scale, far above 1e-12 for any n below 10**11.

Numbers that are not finite: a NaN operand always *exceeds* (a gate never passes on
an undefined value); infinities compare as floats.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

__all__ = ["exceeds", "RELATIVE_SLACK"]

#: Two sides of a comparison that agree to this fraction of the largest operand are equal.
RELATIVE_SLACK = Fraction(1, 10**12)


def _exact(x) -> Fraction:
    """The decimal a number stands for, as an exact rational: an integer as itself, a
    float as its shortest round-tripping decimal (``0.84`` is 21/25, not the binary
    double nearest to it)."""
    if isinstance(x, numbers.Integral):
        return Fraction(int(x))
    return Fraction(repr(float(x)))


def exceeds(value, limit, *, minus=0, scale=1) -> bool:
    """Whether ``value - minus > limit * scale``, decided exactly (see the module's
    rule): ``exceeds(b, max_drop, minus=c)`` is "the drop b - c is beyond max_drop",
    ``exceeds(at_least, value)`` is "the value is below at_least",
    ``exceeds(b, max_relative_drop, minus=c, scale=abs(b))`` is "the relative drop is
    beyond max_relative_drop". True when any operand is NaN (fail closed)."""
    operands = (value, limit, minus, scale)
    floats = [float(x) for x in operands]
    if any(math.isnan(x) for x in floats):
        return True
    if not all(math.isfinite(x) for x in floats):
        return floats[0] - floats[2] > floats[1] * floats[3]
    gap, size = (
        (floats[0] - floats[2]) - floats[1] * floats[3],
        max(abs(floats[0]), abs(floats[2]), abs(floats[1] * floats[3])),
    )
    if abs(gap) > 1e-9 * size:  # far from equal: float rounding (~1e-15 of the size) cannot turn it
        return gap > 0
    v, t, m, s = (_exact(x) for x in operands)
    left, right = v - m, t * s
    slack = RELATIVE_SLACK * max(abs(v), abs(m), abs(right))
    return left - right > slack
