"""Pair-threshold metrics over all (query, gallery) pairs, computed exactly.

Every pair left after self-exclusion is a positive (relevant) or a negative. A pair
is predicted positive when its similarity is ``>= t``. With TP(t), FP(t) the positive
and negative pairs at or above t and P the number of positive pairs:

- ``pair_precision@t=T`` = TP / (TP + FP)   (0 when nothing is predicted positive)
- ``pair_recall@t=T``    = TP / P
- ``pair_f1@t=T``        = 2 TP / (2 TP + FP + FN), FN = P - TP
- ``recall_at_precision@P`` = max recall over thresholds whose precision >= P
  (0 with no threshold when none reaches P)
- ``precision_at_recall@Q`` = max precision over thresholds whose recall >= Q

Only thresholds equal to a positive score need to be examined: between two
consecutive positive scores TP is constant and FP only falls as t rises.

Exactness without the n_q x n_g matrix. All positive scores are kept (O(P) memory).
Negatives are summarised by :class:`NegativeTail`: every negative ``>= tau`` is
kept, where ``tau`` only rises while at least ``capacity`` negatives stay above it.
For ``recall_at_precision@P`` a threshold with more than n_pos * (1 - P) / P negatives
above it cannot reach precision P, so a tail of that capacity decides it exactly.
Levels are exact fractions (``0.9`` is 9/10) and every comparison with them is made in
integers (``tp * den >= num * (tp + fp)``): a pair precision of exactly P reaches P on
every backend, whatever other metrics are requested.
For ``precision_at_recall@Q`` the tail certifies the answer when no threshold below
``tau`` can beat the best one above it; otherwise the engine bins every negative
against the sorted positive scores in a second pass (``fp_at``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ._names import MetricSpec

__all__ = [
    "NegativeTail",
    "PairCounts",
    "pair_metric",
    "tail_capacity",
    "ceil_f32",
    "ScoreUnits",
    "score_units",
]


@dataclass(frozen=True)
class ScoreUnits:
    """How a similarity's thresholds, in the units users write and read, map to the
    engine's internal scores (the order of pairs is the same; only the numbers differ).

    - ``cosine``, ``dot``: the score itself.
    - ``neg_l2``: users write -|q - g| (a pair is positive when its score >= t, i.e. its
      distance <= -t); the engine ranks by -|q - g|^2, exact for integer data.
    - ``hamming``: users write a distance in bits (positive when distance <= t); the
      engine's score is -distance.
    ``to_score(t)`` is the internal threshold with the same pairs at or above it;
    ``from_score(v)`` the user-facing value of an internal score."""

    similarity: str

    def to_score(self, t: float) -> float:
        if self.similarity == "neg_l2":
            return -t * t if t <= 0 else t  # a positive threshold admits no distance
        if self.similarity == "hamming":
            return -t
        return t

    def from_score(self, v: float) -> float:
        if self.similarity == "neg_l2":
            return -math.sqrt(max(-v, 0.0))
        if self.similarity == "hamming":
            return -v + 0.0
        return v


def score_units(similarity: str) -> ScoreUnits:
    """The :class:`ScoreUnits` of ``similarity``."""
    return ScoreUnits(similarity)


def ceil_f32(t) -> np.float32:
    """The smallest float32 >= t, so that ``s >= t`` equals ``s >= ceil_f32(t)`` for float32 s.

    ``t`` a float, or a Fraction (a threshold exactly as written: 0.50000000000000000001
    is above the float32 0.5, though its nearest float64 is 0.5), compared exactly."""
    if isinstance(t, Fraction):
        with np.errstate(over="ignore"):
            return _ceil_f32_exact(t)
    f = np.float32(t)
    if float(f) < t:
        f = np.nextafter(f, np.float32(np.inf))
    return f


def _ceil_f32_exact(t: Fraction) -> np.float32:
    up, down = np.float32(np.inf), np.float32(-np.inf)
    f = np.float32(float(t))  # within a step or two of the answer (float64, then float32)
    if f == down:  # below float32's range: every finite float32 is >= t
        f = np.float32(-np.finfo(np.float32).max)
    while np.isfinite(f) and Fraction(float(f)) < t:
        f = np.nextafter(f, up)
    while True:
        below = np.nextafter(f, down)
        if not np.isfinite(below) or Fraction(float(below)) < t:
            return f
        f = below


class NegativeTail:
    """All negative scores ``>= tau``; ``tau`` rises while >= ``capacity`` remain above it.

    Partial tails merge by concatenation (:meth:`add`), in any order.
    """

    def __init__(self, capacity: int):
        self.capacity = int(max(capacity, 1))
        self.tau = -math.inf
        self._parts: list[np.ndarray] = []
        self._size = 0

    def add(self, values: np.ndarray, tau: float = -math.inf) -> None:
        """Merge a partial tail: ``values`` are all the negatives ``>= tau`` it saw,
        and at least ``capacity`` of them when ``tau`` is finite."""
        if tau > self.tau:
            self.tau = float(tau)
            self._parts = [v[v >= self.tau] for v in self._parts]
            self._size = sum(v.size for v in self._parts)
        if values.size == 0:
            return
        if self.tau > -math.inf:
            values = values[values >= self.tau]
        self._parts.append(np.asarray(values, dtype=np.float32))
        self._size += values.size
        if self._size > 2 * self.capacity + 1024:
            self._shrink()

    def _shrink(self) -> None:
        allv = np.concatenate(self._parts)
        if allv.size > self.capacity:
            # the capacity-th largest value: at least `capacity` values are >= it
            kth = np.partition(allv, allv.size - self.capacity)[allv.size - self.capacity]
            if kth > self.tau:
                self.tau = float(kth)
                allv = allv[allv >= kth]
        self._parts = [allv]
        self._size = allv.size

    def sorted_values(self) -> np.ndarray:
        allv = np.concatenate(self._parts) if self._parts else np.zeros(0, np.float32)
        return np.sort(allv)


@dataclass
class PairCounts:
    """Everything the pair metrics need, after the pass."""

    positives: np.ndarray  # ascending float32, all positive-pair scores
    n_negative: int
    tail: NegativeTail
    fixed_fp: dict = field(
        default_factory=dict
    )  # threshold (exact Fraction) -> negatives >= threshold
    fp_at: np.ndarray | None = None  # negatives >= each unique positive score (from binning)
    units: ScoreUnits = field(default_factory=lambda: ScoreUnits("dot"))  # thresholds in and out

    @property
    def n_positive(self) -> int:
        return int(self.positives.size)

    def unique_positives(self) -> np.ndarray:
        return np.unique(self.positives)


def _tp_at(pos_sorted: np.ndarray, t) -> np.ndarray:
    return pos_sorted.size - np.searchsorted(pos_sorted, t, side="left")


def _tail_cut(counts: PairCounts, tail: np.ndarray) -> tuple[float, int]:
    """Where the negative tail's counts are exact, whatever the pass's plan: the
    ``capacity``-th largest negative of the pass (every negative at or above it is in
    the tail, and the tail holds them all), and how many negatives reach it. The tail's
    own ``tau`` lies at or below it by how the pass was cut into blocks and workers (a
    tail is shrunk to its capacity only past twice that), so a curve or a decision cut at
    ``tau`` would differ between plans; one cut at this value does not (no threshold
    below it reaches a ``recall_at_precision`` level: it has ``capacity`` negatives or
    more above it). ``(+inf, 0)`` when the pass kept no negatives, ``(-inf, all)`` when
    it has fewer than ``capacity``."""
    tau, cap = counts.tail.tau, counts.tail.capacity
    if tau == math.inf:
        return math.inf, 0
    if tail.size >= cap:
        cut = float(tail[tail.size - cap])
        return cut, int(tail.size - np.searchsorted(tail, np.float32(cut), side="left"))
    return tau, int(tail.size)  # every negative (tau -inf: the tail never filled)


def _curve(counts: PairCounts):
    """TP and FP at each unique positive score u (ascending), whether FP is exact there
    (:func:`_tail_cut`), and the negatives at or above the cut."""
    u = counts.unique_positives()
    tp = _tp_at(counts.positives, u).astype(np.int64)
    tail = counts.tail.sorted_values()
    cut, n_cut = _tail_cut(counts, tail)
    if counts.fp_at is not None:
        return u, tp, counts.fp_at.astype(np.int64), np.ones(u.size, bool), n_cut
    fp = (tail.size - np.searchsorted(tail, u, side="left")).astype(np.int64)
    return u, tp, fp, u >= np.float32(cut), n_cut


def pr_curve(counts: PairCounts, max_points: int = 100) -> dict:
    """The exact pair precision-recall curve at the thresholds where it is known:
    every positive score when all negatives were binned, otherwise the scores above
    the negative tail's cut (the high-precision end, down to the precision levels the
    pass was asked for). At most ``max_points`` points, evenly spread in recall;
    lists ordered by decreasing threshold."""
    u, tp, fp, exact, _ = _curve(counts)
    u, tp, fp = u[exact], tp[exact], fp[exact]
    if u.size == 0:
        return {"threshold": [], "precision": [], "recall": [], "complete": False}
    order = np.arange(u.size)[::-1]
    recall = tp[order] / counts.n_positive
    keep = np.unique(
        np.searchsorted(recall, np.linspace(recall[0], recall[-1], max_points), side="left").clip(
            0, order.size - 1
        )
    )
    sel = order[keep]
    return {
        "threshold": [counts.units.from_score(float(v)) for v in u[sel]],
        "precision": (tp[sel] / np.maximum(tp[sel] + fp[sel], 1)).astype(float).tolist(),
        "recall": (tp[sel] / counts.n_positive).astype(float).tolist(),
        "complete": bool(exact.all()),
    }


def _cross_ge(a: np.ndarray, b: int, c: np.ndarray, d: int) -> np.ndarray:
    """``a * b >= c * d`` elementwise in exact integer arithmetic (``a``, ``c`` arrays of
    counts, ``b``, ``d`` Python ints): int64 when no product can overflow, else Python
    ints (a level with many decimal places has a large denominator)."""
    a = np.asarray(a, np.int64)
    c = np.asarray(c, np.int64)
    top = max(int(a.max(initial=0)) * abs(b), int(c.max(initial=0)) * abs(d))
    if top < 2**62:
        return a * np.int64(b) >= c * np.int64(d)
    return np.array([int(x) * b >= int(y) * d for x, y in zip(a.tolist(), c.tolist())], bool)


def _best_precision(tp: np.ndarray, fp: np.ndarray, idx: np.ndarray) -> tuple[int, Fraction]:
    """Among the thresholds ``idx`` (ascending), the last (highest threshold) whose
    precision tp / (tp + fp) is the largest, compared exactly: floats screen the
    candidates (two different fractions of counts below 2^53 can round to one float,
    never by more than a few ulps), fractions decide among the near-ties."""
    prec = tp[idx] / np.maximum(tp[idx] + fp[idx], 1)
    top = float(prec.max())
    near = idx[prec >= top * (1.0 - 1e-12)]
    exact = [(Fraction(int(tp[i]), max(int(tp[i] + fp[i]), 1)), int(i)) for i in near]
    best = max(f for f, _ in exact)
    return max(i for f, i in exact if f == best), best


def pair_metric(spec: MetricSpec, counts: PairCounts) -> tuple[float, float | None, dict, bool]:
    """(value, threshold, detail counts, needs_binning) for one pair metric.

    ``needs_binning`` is True when the tail could not certify a
    ``precision_at_recall`` answer; the engine then supplies ``fp_at`` and asks again.

    Every decision against a level is exact: the level is the fraction the name wrote
    (``spec.level_fraction``: 0.9 is 9/10), and precision >= P is tested as
    ``tp * den >= num * (tp + fp)`` in integers, so a precision of exactly P qualifies
    (the float 0.9 is a little more than 9/10, and 9/10 computed in floats may round
    either way).
    """
    P = counts.n_positive
    if spec.family in ("pair_precision", "pair_recall", "pair_f1"):
        T = spec.level
        exact = (
            spec.level_fraction
        )  # the threshold as written; fixed_fp is keyed by it (== T where T is exact)
        tp = int(_tp_at(counts.positives, ceil_f32(counts.units.to_score(exact))))
        fp = int(counts.fixed_fp[exact])
        fn = P - tp
        if spec.family == "pair_precision":
            value = tp / (tp + fp) if tp + fp else 0.0
        elif spec.family == "pair_recall":
            value = tp / P
        else:
            value = 2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else 0.0
        return float(value), float(T), {"tp": tp, "fp": fp, "fn": fn}, False

    u, tp, fp, exact, n_cut = _curve(counts)
    level = spec.level_fraction
    num, den = level.numerator, level.denominator
    if spec.family == "recall_at_precision":
        # precision >= P  <=>  tp * den >= num * (tp + fp), and something is predicted positive
        ok = exact & (tp + fp > 0) & _cross_ge(tp, den, tp + fp, num)
        if not ok.any():
            return 0.0, None, {"tp": 0, "fp": 0, "fn": P}, False
        i = int(np.flatnonzero(ok)[0])  # smallest qualifying threshold = highest recall
        return (
            float(tp[i] / P),
            counts.units.from_score(float(u[i])),
            {"tp": int(tp[i]), "fp": int(fp[i]), "fn": P - int(tp[i])},
            False,
        )

    # precision_at_recall: recall >= Q  <=>  tp * den >= num * P
    ok = _cross_ge(tp, den, np.full(tp.size, P, np.int64), num)
    cand = ok & exact
    if (
        not cand.any() and not (ok & ~exact).any()
    ):  # pragma: no cover - recall 1 is always reachable
        return 0.0, None, {"tp": 0, "fp": 0, "fn": P}, False
    if (ok & ~exact).any():
        best = _best_precision(tp, fp, np.flatnonzero(cand))[1] if cand.any() else Fraction(-1)
        if best < Fraction(P, P + n_cut):  # a threshold below the cut: at most this precision
            return math.nan, None, {}, True
    i, best = _best_precision(tp, fp, np.flatnonzero(cand))
    return (
        float(best),
        counts.units.from_score(float(u[i])),
        {"tp": int(tp[i]), "fp": int(fp[i]), "fn": P - int(tp[i])},
        False,
    )


#: No tail needs more room than this (a level of 1e-30 would ask for ~1e30 negatives:
#: every negative is kept long before); it keeps the capacity an int64 for the kernels.
MAX_TAIL_CAPACITY = 2**62


def tail_capacity(specs: list[MetricSpec], n_positive: int) -> int:
    """Tail size that decides every ``recall_at_precision`` exactly in one pass.

    A threshold reaches precision P = num / den only with fp <= tp (den - num) / num
    <= n_positive (den - num) / num negatives above it; a tail one larger proves every
    threshold below its cut short of P. Integer arithmetic: in floats 9 * (1 - 0.9) /
    0.9 is 0.99999..., and a precision of exactly 9/10 was missed."""
    cap = 1
    for s in specs:
        if s.family == "recall_at_precision":
            level = s.level_fraction
            most_fp = n_positive * (level.denominator - level.numerator) // level.numerator
            cap = max(cap, min(most_fp + 1, MAX_TAIL_CAPACITY))
        elif s.family == "precision_at_recall":
            # a heuristic size; certification or a binning pass keeps the answer exact
            cap = max(cap, 4 * n_positive + 1)
    return cap
