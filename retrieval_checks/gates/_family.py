"""Many significance-gated checks in one run: multiplicity corrections.

Forty checks each failing at 5% on an unchanged model turn a build red by chance in
1 - 0.95^40 = 87% of runs. A **family** is the significance-gated checks of one run
(baseline checks with ``significant: true`` and comparisons with
``rule: significant``, each with a testable p-value) that share a correction:

- ``holm``: Holm's step-down (Holm 1979) controls the **family-wise error rate**: on
  an unchanged model, the probability that any check of the family fails on
  significance is at most the level (1 - confidence). Uniformly more powerful than
  Bonferroni and valid under any dependence between the checks (checks on the same
  queries are dependent). The build turns red exactly when Bonferroni's would (the
  smallest p-value below level / m); Holm then also fails the further checks that
  its steps reject.
- ``bh``: Benjamini-Hochberg controls the **false discovery rate** (the expected
  share of failed checks that failed by chance), under independence or positive
  dependence; more failures, a weaker promise.
- ``none``: each check at its own level (the default: a correction only ever makes
  a check *less* likely to fail, so it is an explicit choice).

A correction only adjusts the significance test: a check that fails on anything else
(a drop with untestable significance, too many skipped queries, a power
requirement) fails at once, whatever the family. Under pytest, a check whose drop is
beyond its tolerance and significant before the correction is decided when the test
loop has ended and the whole family's p-values are known (every pytest-xdist worker's
included); the plugin holds its test's reports until then, so a check the correction
rejects fails its own test (its line, pytest's counts and exit status, its JUnit
testcase) and is listed in the summary, JSON and history as failed ``after holm`` (or
``bh``).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from types import SimpleNamespace

import numpy as np

from .._lazy import t_cdf
from .._suggest import hint, shown
from ..errors import InputError
from ..stats._power import check_power, power_of, spread
from ._regression import finite_bounds, se_from_interval

__all__ = [
    "CORRECTIONS",
    "check_correction",
    "adjust_pvalues",
    "family_error_rate",
    "session_correction",
    "set_session_correction",
    "family_of",
    "family_fields",
    "comparison_test",
    "deferrable",
    "power_note",
    "bound_power",
    "bound_power_note",
    "claim",
    "claimed",
    "unclaimed",
    "CLAIM",
    "decide_family",
    "family_line",
]

#: The multiplicity corrections by name.
CORRECTIONS = ("holm", "bh", "none")

_lock = threading.Lock()
_session: list = []  # a stack: (correction, decided-at-the-end) of the pytest sessions open


def check_correction(value, field: str = "correction") -> str:
    """``value`` if it names a correction (holm, bh, none), else an InputError naming
    ``field`` and the choices."""
    if isinstance(value, str) and value in CORRECTIONS:
        return value
    close = hint(value, CORRECTIONS) if isinstance(value, str) else ""
    raise InputError(
        f"{field}={shown(value)}: use holm (family-wise error rate), bh (false discovery rate, "
        f"Benjamini-Hochberg) or none (each check at its own level).{close}"
    )


def adjust_pvalues(pvalues, method: str = "holm") -> np.ndarray:
    """Adjusted p-values of a family (in the given order): ``holm`` (step-down,
    family-wise error rate), ``bh`` (Benjamini-Hochberg step-up, false discovery rate)
    or ``none`` (the p-values themselves). A check is rejected at level ``alpha``
    when its adjusted p-value is below ``alpha``. NaN or values outside [0, 1] are
    refused.

    Parameters
    ----------
    pvalues:
        The family's p-values, numbers in [0, 1] (any sequence or array).
    method:
        ``"holm"`` (default), ``"bh"`` or ``"none"``.

    Returns
    -------
    numpy.ndarray
        The adjusted p-values, float, in the given order.

    Raises
    ------
    InputError
        An unknown method, a p-value that is NaN or outside [0, 1].

    Examples
    --------
    >>> import retrieval_checks as rc
    >>> p = [0.01, 0.04, 0.03, 0.20]
    >>> rc.adjust_pvalues(p)  # Holm: 4 x 0.01, then 3 x 0.03 (and no less than it for 0.04)
    array([0.04, 0.09, 0.09, 0.2 ])
    >>> rc.adjust_pvalues(p, "bh").round(4)
    array([0.04  , 0.0533, 0.0533, 0.2   ])
    >>> rc.adjust_pvalues(p, "bonferroni")
    Traceback (most recent call last):
    retrieval_checks.errors.InputError: method='bonferroni': use holm (family-wise error rate), bh (false discovery rate, Benjamini-Hochberg) or none (each check at its own level).
    """
    method = check_correction(method, "method")
    p = np.asarray(pvalues, dtype=float).ravel()
    if p.size and (np.isnan(p).any() or (p < 0).any() or (p > 1).any()):
        bad = p[np.isnan(p) | (p < 0) | (p > 1)][0]
        raise InputError(
            f"pvalues: {float(bad)!r} (position {int(np.flatnonzero(np.isnan(p) | (p < 0) | (p > 1))[0])}) is not a p-value (expected numbers in [0, 1])."
        )
    m = p.size
    if m == 0 or method == "none":
        return p.copy()
    order = np.argsort(p, kind="stable")
    ps = p[order]
    if method == "holm":
        adj = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * ps))
    else:  # bh
        adj = np.minimum.accumulate((m * ps / np.arange(1, m + 1))[::-1])[::-1]
        adj = np.minimum(adj, 1.0)
    out = np.empty(m)
    out[order] = adj
    return out


def family_error_rate(m: int, level: float, method: str) -> float:
    """The rate of a family of ``m`` checks at ``level`` that the method states: the
    family-wise error rate bound (holm: ``level``; none: ``1 - (1 - level)^m``, the
    rate for independent checks, an upper bound of sorts for dependent ones), or for
    bh the false discovery rate ``level``."""
    method = check_correction(method, "method")
    if method == "none":
        return 1 - (1 - level) ** m
    return level


def set_session_correction(correction: str | None) -> None:
    """Open (a correction name) or close (None) the current session's family: the
    pytest plugin calls this; checks whose significance it adjusts are then decided at
    the session's end. Sessions nest (a pytest run inside a test)."""
    with _lock:
        if correction is None:
            if _session:
                _session.pop()
        else:
            _session.append(check_correction(correction))


def session_correction() -> str | None:
    """The correction of the innermost open session, None outside one (no family:
    every check is decided alone, at its own level)."""
    with _lock:
        return _session[-1] if _session else None


def family_of(correction, change) -> str | None:
    """The correction a significance-gated check joins: ``correction`` when given (holm,
    bh, none), else the open session's; None when the check is not significance-gated
    or no session is open (it is decided alone). A correction asked for outside a
    pytest session is an error: no one would decide the family, and a deferred check
    would pass unseen."""
    if correction is not None:
        correction = check_correction(correction)
        if correction != "none" and session_correction() is None:
            raise InputError(
                f"correction={correction!r}: a multiplicity correction is decided over the whole "
                "run's family of significance-gated checks, at the end of a pytest session with the "
                "retrieval-checks plugin; outside one, adjust the p-values yourself "
                "(rc.adjust_pvalues) or leave correction out."
            )
    else:
        correction = session_correction()
    if not getattr(change, "significance_gated", False):
        return None
    return correction


def deferrable(change, correction: str | None, failed: bool, decided: bool) -> bool:
    """Whether a check waits for the session's end: it is significance-gated, a
    correction applies, nothing but its significance (``decided``: an undefined value,
    too many skipped queries, a power requirement unmet at its own level) failed it,
    and it either failed on significance or requires a power (``min_power``): under a
    correction its test runs at a stricter level, known only with the whole family, so
    its power is judged there (:func:`decide_family`)."""
    required = bool(getattr(getattr(change, "power", None), "required", False))
    return bool(
        (failed or required)
        and not decided
        and correction not in (None, "none")
        and getattr(change, "significance_gated", False)
    )


def _corrected_power(r: dict, m: int, correction: str) -> None:
    """A family member's power (``r``'s ``power_*`` fields) recomputed at the level its
    correction tests it at: ``level / m``, Bonferroni's, which is Holm's first step and
    Benjamini-Hochberg's strictest; a check whose power was computed at its own level
    would certify a power the corrected test does not have. The level of the record's
    own test is kept as ``power_level_uncorrected``."""
    se, level = r.get("power_se"), r.get("power_level")
    if not isinstance(se, (int, float)) or not isinstance(level, (int, float)) or not se > 0:
        return
    pw = power_of(
        float(se),
        int(r.get("power_units") or 0),
        level=float(level) / m,
        power=r.get("power"),
        dof=r.get("power_dof"),
        unit=r.get("power_unit"),
        tolerance=r.get("power_tolerance"),
        required=bool(r.get("power_required")),
        test=r.get("power_test") or "drop",
        null=float(r.get("power_null") or 0.0),  # a comparison's margin: kept in its mdd
    )
    r.update(pw.to_dict())
    r["power_level_uncorrected"] = float(level)
    r["power_correction"] = (
        f"power at {float(level):.3g} / {m} = {pw.level:.3g}, the level {correction} tests the "
        f"strictest member of a family of {m} at (Bonferroni)"
    )
    if pw.underpowered:
        r["power_failure" if pw.required else "power_note"] = (
            f"{r.get('metric')} cannot see the drop it gates under {correction}: {pw.describe()}"
        )


def power_note(gate: str, change, correction: str | None = None) -> str | None:
    """The warning of a significance-gated check whose test cannot see its tolerance
    (None when it can, has no tolerance, or requires the power: then it fails). Under a
    ``correction`` (holm, bh) it says that the level quoted is the check's own, and the
    family's is stricter (:func:`decide_family` gives the power there)."""
    pw = getattr(change, "power", None)
    if pw is None or not pw.underpowered or pw.required:
        return None
    family = (
        f" That is at its own level; under {correction} the family tests it at a stricter one "
        "(level / family size), known when the run ends: the family's line and the check's record "
        "give the power there, lower still."
        if correction not in (None, "none")
        else ""
    )
    return (
        f"{gate}: {change.metric} cannot see the drop it gates: {pw.describe()}. Set min_power "
        f"to fail instead, or evaluate on more {pw.unit or 'queries'}.{family}"
    )


def family_fields(change, correction: str | None, deferred: bool) -> dict:
    """The fields a significance-gated check's event carries for its family and power:
    the raw one-sided p-value, the level, whether the drop is beyond the tolerance,
    the correction (decided at the session's end when ``deferred``) and the power."""
    out: dict = {}
    if change is None:
        return out
    if getattr(change, "power", None) is not None:
        out.update(change.power.to_dict())
    if not getattr(change, "significance_gated", False):
        return out
    out.update(
        family=True,
        p_raw=change.p_worse,
        significance_level=change.level,
        beyond_tolerance=change.beyond_tolerance,
        correction=correction or "none",
    )
    if deferred:
        out["decision"] = "deferred"
    return out


def decide_family(records: list) -> list[dict]:
    """Apply each family's correction to the gate records of a run (the dicts the
    pytest plugin collects; the session's whole family, every pytest-xdist worker's
    included) in place: every member gets ``p_adjusted`` and ``family_size``, and a
    check deferred to the correction (``decision: deferred``) gets its verdict: failed
    when its drop is beyond the tolerance and its adjusted p-value is below its level.
    Returns one summary per family: correction, size, level, the rate it states and
    the records it failed."""
    groups: dict = {}
    for r in records:
        if isinstance(r, dict) and r.get("family") and isinstance(r.get("p_raw"), (int, float)):
            groups.setdefault(r.get("correction") or "none", []).append(r)
    out = []
    for correction, members in groups.items():
        adjusted = adjust_pvalues([float(r["p_raw"]) for r in members], correction)
        failed, weak = [], []
        for r, p in zip(members, adjusted):
            r["p_adjusted"] = float(p)
            r["family_size"] = len(members)
            if correction != "none" and len(members) > 1:
                _corrected_power(r, len(members), correction)
                if r.get("power_note") or r.get("power_failure"):
                    weak.append(r)
            if r.get("decision") != "deferred":
                continue
            level = float(r.get("significance_level") or 0.05)
            if r.get("beyond_tolerance") and p < level:
                r["passed"] = False
                r["decision"] = f"failed after {correction}"
                if not r.get("xfail"):  # an expected failure does not turn the run red
                    failed.append(r)
            elif r.get("power_failure"):  # min_power unmet at the corrected level
                r["passed"] = False
                r["decision"] = f"failed after {correction}: underpowered"
                if not r.get("xfail"):
                    failed.append(r)
            else:
                r["decision"] = f"passed after {correction}"
        levels = sorted({float(r.get("significance_level") or 0.05) for r in members})
        level = levels[-1]
        out.append(
            {
                "correction": correction,
                "size": len(members),
                "level": level,
                "levels": levels,
                "rate": family_error_rate(len(members), level, correction),
                "controls": {
                    "holm": "family-wise error rate",
                    "bh": "false discovery rate",
                    "none": "nothing",
                }[correction],
                "failed": failed,
                "underpowered": weak,
            }
        )
    return out


def family_line(summary: dict) -> str:
    """The terminal summary's line for one family."""
    m, c, level = summary["size"], summary["correction"], summary["level"]
    checks = f"family of {m} significance-gated check{'s' if m != 1 else ''}"
    mixed = "" if len(summary["levels"]) == 1 else " (each at its own level; the largest shown)"
    if c == "holm":
        text = f"{checks}: family-wise error rate {level:.3g} (holm){mixed}"
    elif c == "bh":
        text = f"{checks}: false discovery rate {level:.3g} (bh, Benjamini-Hochberg){mixed}"
    else:
        text = (
            f"{checks}: no correction, each at {level:.3g}: on an unchanged model, up to "
            f"{summary['rate']:.0%} of runs fail a check by chance (independent checks); "
            "--rc-correction holm holds it at the level"
            if m > 1
            else f"{checks}: at level {level:.3g}"
        )
    if summary["failed"]:
        text += f"; {len(summary['failed'])} failed after the correction"
    weak = summary.get("underpowered") or []
    if weak:
        text += (
            f"; {len(weak)} cannot see the drop they gate at the corrected level (power at "
            "level / family size: see each check's power fields)"
        )
    return text


def comparison_test(
    comparison, margin: float, power: float | None = None, min_power: float | None = None
):
    """The significance test inside ``assert_not_worse(rule="significant")`` as a family
    member: the check fails when the upper end of the improvement's two-sided interval
    is below ``-margin``, that is when the one-sided test of "worse by more than the
    margin" has ``p < (1 - confidence) / 2``; its family p-value is twice that one-sided
    p (compared with ``1 - confidence``), and its power is that of the one-sided test
    at ``(1 - confidence) / 2``, reported as the drop it detects with ``power``
    (``margin`` + the minimum detectable excess; at ``min_power``, required, when
    given). Its tolerance, the drop it must detect with that power, is the margin
    exceeded by the margin (:class:`~retrieval_checks.stats.Power`'s ``null``); margin 0
    has none, as a baseline check without ``max_drop``. Returns an object with
    ``metric``, ``power``, ``p_worse`` (None when the comparison has no standard error,
    or is a bootstrap with a margin: no p-value for the margin), ``level``,
    ``significance_gated`` and ``beyond_tolerance``."""
    c = comparison
    out = SimpleNamespace(
        metric=c.metric,
        power=None,
        p_worse=None,
        level=None,
        significance_gated=False,
        beyond_tolerance=True,
    )
    se = getattr(c, "se", None)
    if se is None or not math.isfinite(se) or not math.isfinite(c.low) or not math.isfinite(c.high):
        return out
    level = float(f"{1 - c.confidence:.12g}")
    if se > 0:  # no spread of the differences (identical runs): the power is unknown, not 100%
        out.power = power_of(
            se,
            c.n,
            level=level / 2,
            power=min_power if min_power is not None else power,
            dof=c.dof,
            unit=c.unit,
            tolerance=2 * margin if margin > 0 else None,
            required=min_power is not None,
            null=margin,
        )
    sign = 1.0 if c.higher_is_better else -1.0
    center = sign * (c.low + c.high) / 2  # the improvement the interval is centred on
    if c.dof is not None:
        p_one = (
            float(t_cdf((center + margin) / se, c.dof))
            if se > 0
            else (0.0 if center + margin < 0 else 1.0)
        )
    elif margin == 0:
        p_one = float(c.p_value_worse)
    else:
        return out
    out.p_worse, out.level, out.significance_gated = min(1.0, 2 * p_one), level, True
    return out


def bound_power(
    source,
    tolerance: float,
    *,
    test: str,
    gate: str,
    power: float | None = None,
    min_power: float | None = None,
):
    """The power of a gate that passes only when an interval's bound shows the
    difference within ``tolerance``: ``assert_not_worse(rule="non_inferior")`` (``test
    ="non_inferiority"``: the improvement's lower bound above ``-margin``; ``source`` a
    Comparison) and ``assert_gap_below(on="upper")`` (``test="gap"``: the gap's upper
    bound below ``below``; ``source`` a Gap). Such a gate fails closed on too few
    units: its risk is the other one, a gate that a model with nothing wrong cannot
    pass. The power is its chance to pass when the true difference is 0 (an unchanged
    model, no gap), a one-sided test at (1 - confidence) / 2 with noncentrality
    tolerance / se; ``mdd`` the smallest tolerance it shows with that power. ``se``: the
    comparison's own (its t test's dof, class-clustered when the comparison is), else
    the interval's half-width / z (a bootstrap's or a gap's, normal reference); a gap's
    units are its smaller side's (both sides scaled together).

    Returns ``(power, failure)``: the :class:`~retrieval_checks.stats.Power` (None when
    no spread is known), and the reason a ``min_power`` requirement fails (None when
    met or not asked). ``power`` / ``min_power`` are checked (in (0, 1)); ``min_power``
    is the power the requirement states."""
    power = check_power(power)
    min_power = check_power(min_power, "min_power")
    if power is not None and min_power is not None and power != min_power:
        raise InputError(
            f"power={power:g} and min_power={min_power:g}: min_power is the power the gate requires "
            "and reports; give one of them."
        )
    conf = float(getattr(source, "confidence", 0.95) or 0.95)
    level = (1 - conf) / 2
    se, dof = getattr(source, "se", None), getattr(source, "dof", None)
    low, high = getattr(source, "low", None), getattr(source, "high", None)
    bounds = finite_bounds(low, high)
    if se is None or not math.isfinite(se):
        dof = None
        se = se_from_interval(low, high, conf)
    if hasattr(source, "n_first"):  # a Gap: its smaller side
        n_units = min(int(source.n_first or 0), int(source.n_second or 0))
    else:
        n_units = int(getattr(source, "n", 0) or 0)
    pw = None
    if se is not None and bounds:  # an interval of round-off width has no spread: unknown power
        se = spread(se, max(map(abs, bounds)))
    if se is not None and se > 0:
        pw = power_of(
            se,
            n_units,
            level=level,
            power=min_power if min_power is not None else power,
            dof=dof,
            unit=getattr(source, "unit", None),
            tolerance=float(tolerance),
            required=min_power is not None,
            test=test,
        )
    failure = None
    if min_power is not None and pw is None:
        failure = (
            f"{gate}: underpowered (min_power {min_power:g}): the power cannot be estimated (the "
            "interval has no spread: identical runs, or no interval); a power requirement that cannot "
            "be checked fails"
        )
    elif pw is not None and pw.required and pw.underpowered:
        failure = f"{gate}: underpowered (min_power {pw.power:g}): {pw.describe()}"
    return pw, failure


def bound_power_note(gate: str, metric: str, pw) -> str | None:
    """The warning of a bound gate (:func:`bound_power`) that a model with nothing wrong
    would likely fail (None when it would likely pass, or requires the power: then it
    fails)."""
    if pw is None or not pw.underpowered or pw.required:
        return None
    what = (
        "cannot show non-inferiority within its margin even for an unchanged model"
        if pw.test == "non_inferiority"
        else "cannot show the gap below its limit even for a model with no gap"
    )
    return (
        f"{gate}: {metric} {what}: {pw.describe()}. It will mostly fail for lack of data: evaluate on "
        f"more {pw.unit or 'units'}, widen the tolerance to what the set can show, or set min_power to "
        "make this a failure."
    )


#: The attribute a session's recorder sets on a deferred check's event when it has
#: recorded it (so the session's end will decide it).
CLAIM = "family_claimed"

_UNCLAIMED = (
    "correction: no pytest session recorded this deferred check (a gate run outside a test's "
    "call phase, e.g. in a fixture), so it was decided alone, at its own level"
)


def claim(event) -> None:
    """Mark ``event`` as recorded by a session that will decide its family (the pytest
    plugin calls this for each deferred check it records)."""
    setattr(event, CLAIM, True)


def claimed(event) -> bool:
    """Whether a session's recorder took ``event`` (see :data:`CLAIM`): a deferred
    check nobody records must be decided at once, never pass unseen."""
    return bool(getattr(event, CLAIM, False))


def unclaimed(change):
    """A deferred check no session recorded: its change with the reason added (or, for
    None, the reason as a note)."""
    if change is None:
        return _UNCLAIMED
    return dataclasses.replace(change, reasons=(*change.reasons, _UNCLAIMED))
