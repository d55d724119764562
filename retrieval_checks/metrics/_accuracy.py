"""Classification accuracy."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .._arrays import as_numpy, sequence_kinds
from .._suggest import shown
from ..errors import InputError
from ._measurement import Measurement

__all__ = ["accuracy", "AccuracyResult"]


@dataclass(frozen=True)
class AccuracyResult:
    """``value`` = n_correct / n (a fraction); ``correct`` marks each sample;
    ``labels`` are the true classes (used to check that two sets are comparable).

    Parameters
    ----------
    value:
        ``n_correct / n``.
    n_correct, n:
        The numbers of correct predictions and of samples.
    correct:
        One bool per sample: whether its prediction is right.
    labels:
        The true class of every sample, or None.

    Raises
    ------
    None
        A plain frozen record; :func:`~retrieval_checks.accuracy` checks its inputs.

    Examples
    --------
    >>> import retrieval_checks as rc
    >>> res = rc.accuracy([0, 1, 1, 2], [0, 1, 2, 2])
    >>> res.value, res.n_correct, res.n, res.correct
    (0.75, 3, 4, array([ True,  True, False,  True]))
    """

    value: float
    n_correct: int
    n: int
    correct: np.ndarray
    labels: np.ndarray | None = None

    def __float__(self) -> float:
        return self.value

    def __contains__(self, name: object) -> bool:
        return name == "accuracy"

    def measure(self, name: str = "accuracy") -> Measurement:
        """The :class:`Measurement` of the accuracy (no interval: see ``generalization_gap``
        for Newcombe's, or ``evaluate_classifier`` for Wilson's)."""
        if name != "accuracy":
            raise KeyError(f"{name!r}: an AccuracyResult holds accuracy")
        return Measurement(
            metric="accuracy",
            value=self.value,
            unit="fraction",
            n=self.n,
            n_unit="samples",
            sample=f"{self.n_correct} of {self.n} samples correct",
        )


def accuracy(predictions, labels) -> AccuracyResult:
    """Fraction of correct top-1 predictions.

    ``predictions`` is either one predicted label per sample (shape (n,)) or a score
    matrix (n x n_classes: logits or probabilities), whose arg-max is the prediction
    (ties go to the lowest class index). ``labels`` holds the true class per sample.

    Parameters
    ----------
    predictions:
        One predicted label per sample (n,), or a score matrix (n x n_classes) whose
        arg-max per row is the prediction.
    labels:
        The true class per sample (n,): integer class indices (column numbers) with a
        score matrix, else labels of the predictions' type.

    Returns
    -------
    AccuracyResult
        The accuracy, the counts and which samples are correct.

    Raises
    ------
    InputError
        Empty, non-1-D or mismatched labels, NaN or infinite values, missing values,
        mixed label types, non-numeric scores, class indices outside the score
        matrix's columns.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rc.accuracy([0, 1, 1, 2], [0, 1, 2, 2]).value
    0.75
    >>> scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    >>> res = rc.accuracy(scores, [0, 1, 1])
    >>> res.n_correct, res.correct
    (2, array([ True,  True, False]))
    """
    p = as_numpy(predictions, "predictions")
    y = as_numpy(labels, "labels")
    for name, a in (("predictions", p), ("labels", y)):
        _missing_values(a, name)
    for name, v in (("predictions", predictions), ("labels", labels)):
        kinds = sequence_kinds(v)
        if kinds and len(kinds) > 1 and not kinds & {"list", "tuple", "ndarray"}:
            raise InputError(
                f"{name} mixes label types ({', '.join(sorted(kinds))}), e.g. 1 and '1', which numpy "
                "would merge into one type; use one type (all ints or all strings)."
            )
    if (
        p.dtype == object and p.ndim == 2
    ):  # a score matrix of Python objects: numbers only, then floats
        bad = np.flatnonzero(~np.asarray(_is_real(p), bool).ravel())
        if bad.size:
            r, c = np.unravel_index(int(bad[0]), p.shape)
            raise InputError(
                f"predictions is a score matrix but holds {shown(p[r, c])} at row {r}, column {c} "
                f"({bad.size} non-numeric value(s) in all); a score matrix holds one number per sample "
                "and class."
            )
        p = p.astype(np.float64)
    for name, a in (("predictions", p), ("labels", y)):
        if a.dtype.kind not in "biufUSO":
            raise InputError(
                f"{name} has dtype {a.dtype}; use integer class indices or string labels."
            )
        if (
            a.dtype.kind == "f"
            and not np.isfinite(a).all()
            and not (name == "predictions" and a.ndim == 2)
        ):
            raise InputError(
                f"{name} has NaN or Inf values (positions "
                f"{', '.join(map(str, np.flatnonzero(~np.isfinite(a.ravel()))[:5]))}); "
                "drop or repair those samples."
            )
    if y.ndim != 1:
        raise InputError(f"labels must be 1-D (one class per sample), got shape {y.shape}.")
    if y.shape[0] == 0:
        raise InputError("labels is empty: accuracy needs at least one sample.")
    if p.ndim == 2:
        if p.shape[1] == 0:
            raise InputError(
                "predictions has zero columns; a score matrix needs one column per class."
            )
        if p.dtype.kind == "f" and not np.isfinite(p).all():
            bad = np.flatnonzero(~np.isfinite(p).all(axis=1))
            raise InputError(
                f"predictions has NaN or Inf in {bad.size} row(s) (rows {', '.join(map(str, bad[:5]))})."
            )
        if y.dtype.kind not in "iu":
            raise InputError(
                "With a score matrix, labels must be integer class indices (column numbers)."
            )
        if y.size and (y.min() < 0 or y.max() >= p.shape[1]):
            bad = np.flatnonzero((y < 0) | (y >= p.shape[1]))
            raise InputError(
                f"labels hold class indices outside [0, {p.shape[1]}) for a {p.shape[1]}-column score matrix (e.g. "
                f"{y[bad[0]].item()} at position {int(bad[0])}, {bad.size} in all): labels must index the score "
                f"matrix's columns (the model's {p.shape[1]} classes); check the label encoding (0-based class "
                "indices) and the model's number of outputs."
            )
        p = p.argmax(axis=1)
    elif p.ndim != 1:
        raise InputError(
            f"predictions must be (n,) labels or (n x classes) scores, got shape {p.shape}."
        )
    if p.shape[0] != y.shape[0]:
        raise InputError(
            f"predictions cover {p.shape[0]} samples but labels cover {y.shape[0]}; they must match."
        )
    for name, a in (("predictions", p), ("labels", y)):
        if a.dtype.kind == "f" and a.size and not (a == np.round(a)).all():
            i = int(np.flatnonzero(a != np.round(a))[0])
            extra = (
                " For probabilities or scores pass an (n x n_classes) score matrix (e.g. np.stack([1 - p, p], "
                "axis=1) for one probability per sample), whose arg-max is the prediction."
                if name == "predictions"
                else ""
            )
            raise InputError(
                f"{name} holds non-integer numbers (e.g. {a[i].item()!r} at position {i}); 1-D {name} are class labels, "
                f"which must be integer class indices or strings.{extra}"
            )
    kp, ky = _kind(p, "predictions"), _kind(y, "labels")
    if kp != ky:
        raise InputError(
            f"predictions are {kp}s but labels are {ky}s, so no prediction could equal its label (accuracy would "
            "be 0); convert both to the same type (e.g. str(label) or int(label); bytes with b.decode())."
        )
    correct = np.asarray(p == y, dtype=bool)
    n_correct = int(correct.sum())
    return AccuracyResult(n_correct / y.shape[0], n_correct, int(y.shape[0]), correct, y)


_is_real = np.frompyfunc(
    lambda v: isinstance(v, (numbers.Real, np.number)) and not isinstance(v, (bool, np.bool_)), 1, 1
)


_is_missing = np.frompyfunc(lambda v: v is None or type(v).__name__ in ("NAType", "NaTType"), 1, 1)
_is_non_finite = np.frompyfunc(
    lambda v: isinstance(v, (float, np.floating)) and not math.isfinite(v), 1, 1
)


def _missing_values(a: np.ndarray, name: str) -> None:
    """An object array holding None or a NaN / infinite float (a sample without a label,
    prediction or score) is an InputError naming the array and the first position; it
    was a TypeError from numpy, or a sample silently counted wrong."""
    if a.dtype != object or a.size == 0:
        return
    none = np.asarray(_is_missing(a), bool)  # np.asarray: a 0-d array gives a Python bool
    nan = np.asarray(_is_non_finite(a), bool)
    bad = np.flatnonzero((none | nan).ravel())
    if not bad.size:
        return

    def where(i) -> str:
        at = np.unravel_index(int(i), a.shape)
        return (
            f"position {at[0]}"
            if a.ndim == 1
            else f"row {at[0]}, column {at[1]}"
            if a.ndim == 2
            else f"index {at}"
        )

    first = np.unravel_index(int(bad[0]), a.shape)
    what = shown(a[first])
    more = (
        f"; {bad.size} in all: {'; '.join(where(i) for i in bad[:5])}{' ...' if bad.size > 5 else ''}"
        if bad.size > 1
        else ""
    )
    raise InputError(
        f"{name} holds {what} at {where(bad[0])}{more}: every sample needs a "
        f"{'label' if name == 'labels' else 'score' if a.ndim == 2 else 'prediction'} (a missing or non-finite value "
        "is none); drop "
        "or repair those samples."
    )


def _kind(a: np.ndarray, name: str) -> str:
    """``"number"`` or ``"string"``: predictions and labels must be of one kind."""
    if a.dtype.kind in "biuf":
        return "number"
    if a.dtype.kind == "U":
        return "string"
    if a.dtype.kind == "S":
        return "bytes string"
    kinds = {
        "string"
        if isinstance(v, str)
        else "bytes string"
        if isinstance(v, bytes)
        else "number"
        if isinstance(v, (int, float, np.number))
        else type(v).__name__
        for v in a.ravel()
    }
    if len(kinds) != 1 or not kinds <= {"string", "bytes string", "number"}:
        raise InputError(
            f"{name} holds values of types {', '.join(sorted(kinds))}; use one type (all ints or all "
            "strings)."
        )
    return kinds.pop()
