"""Statistical power of a significance-gated comparison, and evaluation-set size.

A gate "fail when the drop is significant" cannot fail on a drop smaller than its
test can see: on 80 queries a drop of 0.01 in nDCG is usually not significant, so a
gate ``max_drop: 0.01, significant: true`` stays green whatever the model does. The
method is Webber, Moffat and Zobel, "Statistical power in retrieval experimentation"
(CIKM 2008), and Sakai's topic-set-size design (Sakai, "Topic set size design",
Information Retrieval Journal 19, 2016): from the paired per-unit differences
(queries, or classes where the comparison is class-clustered), their standard error
``se`` and a one-sided level ``alpha``, the **minimum detectable drop** at power ``p``
is the true drop the test detects with probability ``p``:

- z test (normal reference): ``MDD = (z_{1-alpha} + z_p) * se``;
- paired t test with ``dof`` degrees of freedom: the drop ``d`` at which the
  noncentral t with noncentrality ``d / se`` exceeds ``t_{1-alpha, dof}`` with
  probability ``p``. Exact for normal differences; for small ``dof`` it is larger
  than the z formula (about ``(t_{1-alpha,dof} + t_{p,dof}) * se``), which would
  overstate the power of a test on few units.

Which is used follows the gate's own test: the paired (cluster-robust) t test gets
the t version with its units - 1 degrees of freedom, the z test from two intervals
gets the z version. Units needed for a drop ``d`` scale the standard error as
``se * sqrt(n / n')`` (per-unit spread unchanged), and for the t version the degrees
of freedom with them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._lazy import LazyModule
from .._suggest import shown
from ..errors import InputError

__all__ = [
    "spread",
    "Power",
    "DEFAULT_POWER",
    "check_power",
    "detectable_drop",
    "power_at",
    "units_needed",
    "power_of",
]

optimize = LazyModule("scipy.optimize")
special = LazyModule("scipy.special")  # the distributions' functions without scipy.stats' overhead


def normal_quantile(p: float) -> float:  # the standard normal's p-quantile
    return float(special.ndtri(p))


def _tq(p: float, dof: int) -> float:  # Student t's p-quantile
    return float(special.stdtrit(dof, p))


def _nct_sf(x: float, dof: int, nc: float) -> float:  # P(T > x), T noncentral t
    cdf = float(special.nctdtr(dof, nc, x))
    if not math.isfinite(cdf):  # a noncentrality far out (a tiny se): T sits at nc
        return 1.0 if nc > x else 0.0
    return 1.0 - cdf


def spread(se: float, scale: float) -> float:
    """``se``, or 0.0 where it is only the round-off of values of size ``scale``: paired
    differences that are all equal leave an se near 1e-17, not 0, and a test or a power
    computed on it would claim a certainty the data cannot give (the zero-spread rules
    of each test apply instead)."""
    return 0.0 if se <= 1e-12 * abs(scale) else se


#: The power a gate states when none is asked for (Cohen's convention, Sakai's default).
DEFAULT_POWER = 0.8

_MAX_UNITS = 10**9


def check_power(value, name: str = "power"):
    """``value`` as a float strictly between 0 and 1, else an InputError naming ``name``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(
            f"{name}={shown(value)}: expected a probability strictly between 0 and 1 (0.8 for 80% "
            "power)."
        )
    v = float(value)
    if 50 <= v < 100:  # a percentage of power (80, 90, 95)
        raise InputError(
            f"{name}={shown(value)}: expected a probability strictly between 0 and 1; for {v:g}% "
            f"power write {v / 100:g}."
        )
    if not 0 < v < 1:
        raise InputError(
            f"{name}={shown(value)}: expected a probability strictly between 0 and 1 (0.8 for 80% "
            "power)."
        )
    return v


def _check_level(level) -> float:
    level = float(level)
    if not 0 < level < 1:
        raise InputError(f"level={level!r}: a test's level must be strictly between 0 and 1.")
    return level


def power_at(drop: float, se: float, *, level: float, dof: int | None = None) -> float:
    """Probability that the one-sided test at ``level`` detects a true ``drop`` when the
    drop's standard error is ``se`` (``dof``: the t test's degrees of freedom; None: z)."""
    level = _check_level(level)
    if se <= 0:
        return 1.0 if drop > 0 else level
    if dof is None:
        return float(special.ndtr(drop / se - normal_quantile(1 - level)))
    return _nct_sf(_tq(1 - level, dof), dof, drop / se)


def detectable_drop(se: float, *, level: float, power: float, dof: int | None = None) -> float:
    """The minimum detectable drop: the true drop the one-sided test at ``level``
    detects with probability ``power`` (see the module's formulas)."""
    level, power = _check_level(level), check_power(power)
    if se <= 0:
        return 0.0
    z = normal_quantile(1 - level) + normal_quantile(power)
    if dof is None:
        return max(z, 0.0) * se
    # the noncentrality whose noncentral t exceeds the critical value with probability power:
    # bracketed by the normal value and the t-quantile sum, solved to float precision
    crit = _tq(1 - level, dof)
    lo = min(z, crit + _tq(power, dof)) - 1.0
    hi = max(z, crit + _tq(power, dof)) + 1.0
    while _nct_sf(crit, dof, hi) < power:
        hi *= 2
    while _nct_sf(crit, dof, lo) > power:
        lo -= 1.0
    nc = optimize.brentq(lambda d: _nct_sf(crit, dof, d) - power, lo, hi, xtol=1e-12)
    return max(nc, 0.0) * se


def units_needed(
    se: float, n_units: int, drop: float, *, level: float, power: float, t: bool
) -> int | None:
    """The fewest units (queries or classes) for which a true ``drop`` is detected with
    ``power``, when ``se`` was measured on ``n_units`` of them (the per-unit spread
    stays; ``t``: the t version with units - 1 degrees of freedom). None when the drop
    is 0 or below (no size detects no drop) or when more than a billion units would be
    needed."""
    level, power = _check_level(level), check_power(power)
    if drop <= 0 or not math.isfinite(drop):
        return None
    if se <= 0:
        return 2
    sd = se * math.sqrt(n_units)
    z = normal_quantile(1 - level) + normal_quantile(power)
    n = max(2, math.ceil((z * sd / drop) ** 2 - 1e-9))
    if n > _MAX_UNITS:
        return None
    if not t:
        return n

    def ok(k: int) -> bool:
        return power_at(drop, sd / math.sqrt(k), level=level, dof=k - 1) >= power

    # the t version needs a few more than the normal formula: step up from the
    # t-quantile estimate, then down to the fewest that still suffice
    for _ in range(3):
        q = _tq(1 - level, n - 1) + _tq(power, n - 1)
        n = max(n, math.ceil((q * sd / drop) ** 2 - 1e-9))
    if n > _MAX_UNITS:
        return None
    while not ok(n):
        n += 1
    while n > 2 and ok(n - 1):
        n -= 1
    return n


@dataclass(frozen=True)
class Power:
    """The power of one significance-gated comparison.

    ``mdd``: the minimum detectable drop (metric units) at ``power`` and the test's
    one-sided ``level``; ``tolerance``: the drop the gate is meant to catch (its
    ``max_drop``, the smaller of ``max_drop`` and ``max_relative_drop`` x baseline, or a
    comparison's margin), None when it has none; ``power_at_tolerance``: the test's
    probability of detecting a true drop of ``tolerance``; ``units_needed``: the units
    (``unit``: queries, classes or groups) for ``mdd <= tolerance``; ``required``: True
    when the power was asked as a requirement (``min_power``), so a shortfall fails.

    ``test``: what the power is of. ``"drop"`` (a gate that fails on a significant
    drop: ``mdd`` is the true drop it detects); ``"non_inferiority"`` (``assert_not_worse
    (rule="non_inferior")``, which passes only when the interval shows any drop is
    within the margin: ``mdd`` is the smallest margin it shows with ``power`` when the
    model is unchanged, ``power_at_tolerance`` its chance of passing an unchanged model
    at the gate's margin); ``"gap"`` (a gap's upper bound below a limit: ``mdd`` the
    smallest limit it shows with ``power`` for a model with no gap). The formulas are
    the same: a one-sided test at ``level`` with noncentrality tolerance / se.

    ``null``: the drop under the test's null hypothesis, 0 but for a comparison gated
    on significance (``assert_not_worse(rule="significant")``), whose test is "worse by
    more than the margin": ``mdd`` and ``tolerance`` are whole drops (the margin
    included), the noncentrality is their excess over ``null``, and the tolerance such
    a gate must detect is the margin exceeded by the margin (``2 * null``), as a
    baseline check's test of "worse at all" must detect a drop of its ``max_drop``."""

    mdd: float
    power: float
    level: float
    se: float
    n_units: int
    unit: str | None
    dof: int | None
    tolerance: float | None = None
    power_at_tolerance: float | None = None
    units_needed: int | None = None
    required: bool = False
    test: str = "drop"
    null: float = 0.0

    @property
    def method(self) -> str:
        return "normal (z)" if self.dof is None else f"noncentral t, {self.dof} dof"

    @property
    def underpowered(self) -> bool:
        """Whether the test detects a drop of the gate's tolerance with less than the power."""
        return (  # a power that could not be computed (NaN) is not enough: fail closed
            self.tolerance is not None
            and self.power_at_tolerance is not None
            and not self.power_at_tolerance >= self.power
            and not self.mdd <= self.tolerance
        )

    def describe(self) -> str:
        """One line: the minimum detectable drop, and against the tolerance."""
        unit = self.unit or "units"
        sample = f"{self.n_units} {unit}, " if self.n_units else ""
        what, chance = {
            "drop": ("minimum detectable drop", "power to detect a drop of {t}"),
            "non_inferiority": (
                "smallest margin shown for an unchanged model",
                "power to show non-inferiority within {t} when nothing changed",
            ),
            "gap": (
                "smallest limit shown for a model with no gap",
                "power to show the gap below {t} when there is none",
            ),
        }[self.test]
        text = (
            f"{what} {self.mdd:.4g} at {self.power:.0%} power "
            f"(one-sided level {self.level:.3g}, {sample}{self.method})"
        )
        if self.tolerance is None:
            return text
        beyond = (
            f" (the margin {self.null:.4g} exceeded by {self.tolerance - self.null:.4g})"
            if self.null
            else ""
        )
        text += (
            f"; {chance.format(t=f'{self.tolerance:.4g}')}{beyond}: {self.power_at_tolerance:.0%}"
        )
        if self.underpowered:
            need = (
                f"about {self.units_needed} {unit} would be needed"
                if self.units_needed is not None
                else "no practical number of units would do"
                if self.n_units
                else "more units would be needed (the records carry no sample size to scale)"
            )
            text += f" < {self.power:.0%}: {need}"
        return text

    def to_dict(self) -> dict:
        return {
            "mdd": self.mdd,
            "power": self.power,
            "power_level": self.level,
            "power_se": self.se,
            "power_units": self.n_units,
            "power_unit": self.unit,
            "power_method": self.method,
            "power_at_tolerance": self.power_at_tolerance,
            "units_needed": self.units_needed,
            "underpowered": self.underpowered,
            "power_test": self.test,
            # what recomputing it at another level needs (a family's corrected level)
            "power_tolerance": self.tolerance,
            "power_dof": self.dof,
            "power_required": self.required,
            "power_null": self.null,
        }


def power_of(
    se: float,
    n_units: int,
    *,
    level: float,
    power: float | None = None,
    dof: int | None = None,
    unit: str | None = None,
    tolerance: float | None = None,
    required: bool = False,
    test: str = "drop",
    null: float = 0.0,
) -> Power:
    """The :class:`Power` of a test with standard error ``se`` on ``n_units`` units
    (``test``: what it is the power of; ``null``: the drop under its null hypothesis,
    see :class:`Power`)."""
    power = DEFAULT_POWER if power is None else check_power(power)
    null = float(null)
    mdd = null + detectable_drop(se, level=level, power=power, dof=dof)
    at = need = None
    if tolerance is not None:
        excess = tolerance - null
        at = power_at(excess, se, level=level, dof=dof)
        if at < power and n_units and n_units >= 2:  # unknown sample size: no count to scale
            need = units_needed(se, n_units, excess, level=level, power=power, t=dof is not None)
    return Power(
        mdd, power, level, se, int(n_units), unit, dof, tolerance, at, need, required, test, null
    )
