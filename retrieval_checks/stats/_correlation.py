"""Which measure predicts the generalization gap? Correlations over a set of models and
pairwise model-selection accuracy (the source paper's Tables 3 and 4).

- Pearson's r with the Fisher z interval: z = atanh(r), se = 1 / sqrt(n - 3);
- Spearman's rho with the Fisher z interval using Bonett and Wright's (2000) standard
  error sqrt((1 + rho^2 / 2) / (n - 3));
- p-values are scipy's (``pearsonr``, ``spearmanr``; two-sided);
- selection accuracy: over all pairs of models whose gaps differ, the fraction for
  which the measure picks the model with the smaller gap (the higher measure when
  higher means better generalization, e.g. ``cam_iou``; the lower one otherwise); a tie
  in the measure counts one half.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._lazy import stats
from ..errors import InputError
from ..options import check_option
from ._intervals import few_units_note, finite_values, warn_notes

__all__ = ["MeasureCorrelation", "correlate_with_gap", "selection_accuracy"]


@dataclass(frozen=True)
class MeasureCorrelation:
    """How well one measure predicts the generalization gap over a set of models: its
    Pearson and Spearman correlations with the gaps (Fisher-z intervals, two-sided
    p-values) and its pairwise selection accuracy.

    Parameters
    ----------
    measure:
        The measure's name.
    n_models:
        The number of models.
    pearson, pearson_low, pearson_high, pearson_p:
        Pearson's r, its interval and p-value (NaN where undefined).
    spearman, spearman_low, spearman_high, spearman_p:
        Spearman's rho, its interval and p-value.
    selection_accuracy:
        See :func:`~retrieval_checks.selection_accuracy`.
    higher_is_better:
        The direction the selection accuracy assumed.

    Raises
    ------
    None
        A plain frozen record; :func:`~retrieval_checks.correlate_with_gap` checks its
        inputs.

    Examples
    --------
    >>> import retrieval_checks as rc
    >>> gaps = [0.05, 0.12, 0.08, 0.20, 0.15, 0.10]  # one generalization gap per model
    >>> cam = [0.62, 0.41, 0.55, 0.30, 0.33, 0.47]  # a measure of each model
    >>> row = rc.correlate_with_gap({"cam_iou": cam}, gaps)[0]
    >>> row.n_models, round(row.pearson_low, 3), round(row.pearson_high, 3)
    (6, -0.996, -0.703)
    >>> sorted(row.as_row())[:3]
    ['higher_is_better', 'measure', 'n_models']
    """

    measure: str
    n_models: int
    pearson: float
    pearson_low: float
    pearson_high: float
    pearson_p: float
    spearman: float
    spearman_low: float
    spearman_high: float
    spearman_p: float
    selection_accuracy: float
    higher_is_better: bool

    def as_row(self) -> dict:
        return dict(self.__dict__)


def _fisher(r: float, n: int, se: float, confidence: float) -> tuple[float, float]:
    if n <= 3 or not np.isfinite(r):
        return float("nan"), float("nan")
    if abs(r) >= 1:
        return float(r), float(r)
    z = math.atanh(r)
    q = stats.norm.ppf((1 + confidence) / 2)
    return math.tanh(z - q * se), math.tanh(z + q * se)


def selection_accuracy(measure, gaps, *, higher_is_better: bool = True) -> float:
    """Fraction of model pairs (with different gaps) where the measure picks the model
    that generalizes better (smaller gap).

    Parameters
    ----------
    measure:
        One value of the measure per model.
    gaps:
        One generalization gap per model.
    higher_is_better:
        Whether a higher measure predicts better generalization (default True; False
        for e.g. a norm).

    Returns
    -------
    float
        The fraction of pairs chosen right, in [0, 1] (a tie in the measure counts one
        half).

    Raises
    ------
    InputError
        Values that are not finite, different numbers of values, a non-bool
        ``higher_is_better``, every model with the same gap.

    Examples
    --------
    >>> import retrieval_checks as rc
    >>> gaps = [0.05, 0.12, 0.08, 0.20, 0.15, 0.10]  # one generalization gap per model
    >>> cam = [0.62, 0.41, 0.55, 0.30, 0.33, 0.47]  # a measure of each model
    >>> rc.selection_accuracy(cam, gaps)  # the higher cam_iou, the smaller the gap: always
    1.0
    >>> rc.selection_accuracy(cam, gaps, higher_is_better=False)
    0.0
    """
    m, g = finite_values(measure, "measure"), finite_values(gaps, "gaps")
    if m.shape != g.shape:
        raise InputError(
            f"measure has {m.size} values but gaps {g.size}: give one value per model in both."
        )
    if not isinstance(higher_is_better, (bool, np.bool_)):
        raise InputError(f"higher_is_better={higher_is_better!r}: use True or False.")
    i, j = np.triu_indices(m.size, k=1)
    keep = g[i] != g[j]
    if not keep.any():
        raise InputError("every model has the same gap: no pair to choose between.")
    i, j = i[keep], j[keep]
    better = np.where(g[i] < g[j], 0, 1)  # index (0 -> i, 1 -> j) of the truly better model
    score = m if higher_is_better else -m
    pick = np.where(score[i] > score[j], 0, np.where(score[i] < score[j], 1, -1))
    right = np.where(pick == -1, 0.5, (pick == better).astype(float))
    return float(right.mean())


def correlate_with_gap(
    measures: dict, gaps, *, higher_is_better: dict | None = None, confidence: float = 0.95
) -> list[MeasureCorrelation]:
    """One :class:`MeasureCorrelation` per measure (``{name: one value per model}``).
    Fewer than ``MIN_INTERVAL_UNITS`` models give an
    :class:`~retrieval_checks.errors.IntervalWarning`: their Fisher-z intervals span
    most of [-1, 1].

    Parameters
    ----------
    measures:
        ``{measure name: one value per model}``.
    gaps:
        One generalization gap per model (at least 3).
    higher_is_better:
        ``{measure name: bool}`` for the selection accuracy (default True for each).
    confidence:
        Of the Fisher-z intervals (default 0.95).

    Returns
    -------
    list of MeasureCorrelation
        One per measure, in the order given.

    Raises
    ------
    InputError
        ``measures`` not a non-empty dict, ``higher_is_better`` not a dict, fewer
        than 3 gaps, values that are not finite or not one per model, an invalid
        ``confidence``.

    Examples
    --------
    >>> import retrieval_checks as rc
    >>> gaps = [0.05, 0.12, 0.08, 0.20, 0.15, 0.10]  # one generalization gap per model
    >>> cam = [0.62, 0.41, 0.55, 0.30, 0.33, 0.47]  # a measure of each model
    >>> nn = [0.50, 0.52, 0.49, 0.60, 0.55, 0.51]
    >>> rows = rc.correlate_with_gap({"cam_iou": cam, "nuclear_norm": nn}, gaps,
    ...                              higher_is_better={"nuclear_norm": False})
    >>> [(r.measure, round(r.pearson, 3), round(r.spearman, 3), round(r.selection_accuracy, 3)) for r in rows]
    [('cam_iou', -0.964, -1.0, 1.0), ('nuclear_norm', 0.949, 0.943, 0.933)]
    """
    check_option("confidence", confidence)
    if not isinstance(measures, dict) or not measures:
        raise InputError(
            f"measures must be a non-empty dict {{name: one value per model}}, got "
            f"{type(measures).__name__}."
        )
    if higher_is_better is not None and not isinstance(higher_is_better, dict):
        raise InputError(
            f"higher_is_better must be a dict {{measure name: True or False}}, got "
            f"{type(higher_is_better).__name__}."
        )
    g = finite_values(gaps, "gaps")
    if g.size < 3:
        raise InputError(f"gaps must hold one value per model, at least 3; got {g.size}.")
    higher_is_better = higher_is_better or {}
    note = few_units_note("correlate_with_gap", int(g.size), "models")
    warn_notes([note] if note else [])
    out = []
    for name, values in measures.items():
        v = finite_values(values, f"measures[{name!r}]")
        if v.shape != g.shape:
            raise InputError(f"measure {name!r} has {v.size} values for {g.size} models.")
        n = g.size
        if np.ptp(v) == 0 or np.ptp(g) == 0:
            r = rho = float("nan")
            pr = ps = float("nan")
        else:
            r, pr = (float(x) for x in stats.pearsonr(v, g))
            rho, ps = (float(x) for x in stats.spearmanr(v, g))
        se_r = 1 / math.sqrt(n - 3) if n > 3 else float("nan")
        se_s = math.sqrt((1 + rho**2 / 2) / (n - 3)) if n > 3 and np.isfinite(rho) else float("nan")
        hib = higher_is_better.get(name, True)
        out.append(
            MeasureCorrelation(
                name,
                n,
                r,
                *_fisher(r, n, se_r, confidence),
                pr,
                rho,
                *_fisher(rho, n, se_s, confidence),
                ps,
                selection_accuracy(v, g, higher_is_better=hib),
                hib,
            )
        )
    return out
