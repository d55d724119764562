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

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from ..metrics._names import metric_spec
from ..errors import InputError, MetricNameError

__all__ = ["Change", "measure_change", "higher_is_better"]


def higher_is_better(metric: str) -> bool | None:
    """Direction of a metric name as recorded by the gates (None when unknown):
    ``<metric> gap`` is lower-is-better, ``<metric> difference`` higher-is-better."""
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
    """The change of one metric from a baseline to the current run."""

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

    def __str__(self) -> str:
        arrow = "higher" if self.higher_is_better else "lower"
        p = "" if self.p_worse is None else f", p(worse)={self.p_worse:.3g} ({self.method})"
        verdict = "FAIL: " + "; ".join(self.reasons) if self.failed else "ok"
        return (f"{self.metric}: {self.baseline:.6g} -> {self.current:.6g} (drop {self.drop:+.4g}, relative "
                f"{self.relative_drop:+.2%}; {arrow} is better{p}) {verdict}")


def _se_from_interval(low, high, confidence: float) -> float | None:
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return None
    z = float(stats.norm.ppf((1 + confidence) / 2))
    return max(float(high) - float(low), 0.0) / (2 * z)


def _paired_p(baseline_units: dict, current_units: dict, sign: float) -> tuple[float, str]:
    """One-sided p of "worse" from per-unit (sum, count) of the same units."""
    keys_b, keys_c = set(baseline_units), set(current_units)
    if keys_b != keys_c:
        only_b, only_c = sorted(map(str, keys_b - keys_c))[:5], sorted(map(str, keys_c - keys_b))[:5]
        raise InputError(f"the baseline and the current run have different units (only in the baseline: {only_b}, "
                         f"only now: {only_c}); a paired test needs the same queries. Regenerate the baseline.")
    keys = sorted(keys_b, key=str)
    sb = np.array([baseline_units[k][0] for k in keys], dtype=float)
    cb = np.array([baseline_units[k][1] for k in keys], dtype=float)
    sc = np.array([current_units[k][0] for k in keys], dtype=float)
    cc = np.array([current_units[k][1] for k in keys], dtype=float)
    if not np.array_equal(cb, cc):
        raise InputError("the baseline and the current run count different queries per unit; a paired test needs the "
                         "same queries. Regenerate the baseline.")
    n, L = cc.sum(), len(keys)
    if L < 2:
        raise InputError("a paired test needs at least 2 units.")
    d = sc - sb  # per-unit sum of differences (current - baseline)
    mean = d.sum() / n
    se = math.sqrt(L / (L - 1) * np.sum((d - mean * cc) ** 2)) / n
    if se == 0:
        return (0.0 if sign * mean < 0 else 1.0), f"paired t over {L} units (zero variance)"
    t = sign * mean / se  # negative when worse
    return float(stats.t.cdf(t, L - 1)), f"paired t over {L} units (cluster-robust)"


def measure_change(metric: str, baseline: dict, current: dict, *, max_drop: float | None = None,
                   max_relative_drop: float | None = None, direction: str | None = None,
                   significant: bool = False, confidence: float = 0.95) -> Change:
    """Compare ``current`` with ``baseline`` (dicts with ``value`` and optionally
    ``low``, ``high``, ``confidence`` and ``units``: {unit key: (sum, count)}).

    Fails when the drop exceeds ``max_drop`` or the relative drop exceeds
    ``max_relative_drop`` (neither given: any drop beyond float noise, 1e-12, fails),
    and, with ``significant=True``, only when the drop is also significant at level
    ``1 - confidence``.
    """
    if direction is None:
        hib = higher_is_better(metric)
        if hib is None:
            raise InputError(f"cannot tell whether higher or lower {metric!r} is better; give direction: higher/lower.")
    elif direction in ("higher", "lower"):
        hib = direction == "higher"
    else:
        raise InputError(f"direction={direction!r}: use 'higher' or 'lower' (which way is better).")
    for name, v in (("max_drop", max_drop), ("max_relative_drop", max_relative_drop)):
        if v is not None and (not np.isfinite(v) or v < 0):
            raise InputError(f"{name}={v}: use a number >= 0.")
    b, c = float(baseline["value"]), float(current["value"])
    sign = 1.0 if hib else -1.0
    drop = sign * (b - c)
    relative = drop / abs(b) if b != 0 else (math.inf if drop > 0 else 0.0)
    reasons = []
    if max_drop is None and max_relative_drop is None:
        tolerance = "no drop allowed"
        if drop > 1e-12:
            reasons.append(f"dropped by {drop:.4g} (no drop allowed)")
    else:
        parts = []
        if max_drop is not None:
            parts.append(f"max drop {max_drop:g}")
            if drop > max_drop:
                reasons.append(f"dropped by {drop:.4g} > max_drop {max_drop:g}")
        if max_relative_drop is not None:
            parts.append(f"max relative drop {max_relative_drop:.2%}")
            if relative > max_relative_drop:
                reasons.append(f"dropped by {relative:.2%} of the baseline > max_relative_drop "
                               f"{max_relative_drop:.2%}")
        tolerance = ", ".join(parts)
    p, method = None, "no interval: significance untestable"
    if baseline.get("units") and current.get("units"):
        p, method = _paired_p(baseline["units"], current["units"], sign)
    else:
        se_b = _se_from_interval(baseline.get("low"), baseline.get("high"), baseline.get("confidence", confidence))
        se_c = _se_from_interval(current.get("low"), current.get("high"), current.get("confidence", confidence))
        if se_b is not None and se_c is not None:
            se = math.hypot(se_b, se_c)
            p = (0.0 if drop > 0 else 1.0) if se == 0 else float(stats.norm.sf(drop / se))
            method = "z from the two intervals (conservative)"
    failed = bool(reasons)
    if significant and failed:
        if p is None:
            reasons.append("significance untestable (no interval or per-unit values): failing on the tolerance")
        elif p >= 1 - confidence:
            failed = False
            reasons = [f"{reasons[0]}, but not significant (p(worse)={p:.3g} >= {1 - confidence:.3g})"]
        else:
            reasons.append(f"significant (p(worse)={p:.3g} < {1 - confidence:.3g})")
    return Change(metric, b, c, hib, drop, relative, p, method, failed, tuple(reasons), tolerance)
