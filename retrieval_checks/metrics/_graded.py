"""Graded relevance: nDCG with grades, and the binary view at a relevance level.

The engine ranks every item of grade > 0 (the "judged relevant" set) against the
non-relevant items in one pass. Per item it knows, in the engine's layout (rows
contiguous, each row's items by ascending score): its ``score``, ``grade``, its
``position`` among the row's set items (0 = best), ``rank_pess`` = 1 + position + ge
(ge: non-set items scoring >= it) and ``tied`` (non-set items scoring == it).

- **Binary metrics at a relevance level L** (trec_eval's ``-l``): items of grade >= L are
  relevant, items of 0 < grade < L are non-relevant too. :func:`binary_view` re-derives
  the engine's per-item counts for the relevant ones: low-grade items scoring >= an item
  join its ge, those scoring == it join its tie.
- **nDCG with grades**: gain = grade (``ndcg``) or 2^grade - 1 (``ndcg_exp``); discount
  1 / log2(rank + 1); IDCG over the query's set items sorted by grade, cut at K. Gains are
  scaled per query by a power of two (:func:`gains`), exact, so that 2^grade - 1 never
  overflows (grades of 1024 and more). A group
  of equal scores holding r set items and t tied non-set items occupies ranks
  s+1..s+r+t (s: items strictly above). Pessimistic: the set items take the group's last
  r ranks, lowest gains first (the smallest DCG); optimistic: its first r ranks, highest
  gains first (the largest): every order of ties lies between (DCG@K is monotone in the
  gains' ranks). Average: each of the n = r+t ranks holds the group's mean gain
  G / n in expectation over the equally likely orders (linearity), so the group adds
  (G / n) (D[min(s+n, K)] - D[min(s, K)]), D the discount prefix sum.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ._names import MetricSpec
from ._ranking import discount_prefix

__all__ = ["binary_view", "graded_ndcg_values", "gains", "raw_gains", "row_top"]


def row_top(rid: np.ndarray, grade: np.ndarray, n_rows: int) -> np.ndarray:
    """The largest grade of each row (0 for a row without items)."""
    top = np.zeros(n_rows, np.float64)
    np.maximum.at(top, rid, np.asarray(grade, np.float64))
    return top


def gains(grade: np.ndarray, family: str, top: np.ndarray | float | None = None) -> np.ndarray:
    """The gain of each grade, (grade for ``ndcg``, 2^grade - 1 for ``ndcg_exp``) times a
    power of two chosen per query: ``top`` is, for each item, the largest grade of its
    query (default: of all of ``grade``).

    nDCG divides two sums of one query's gains, so a common power of two cancels
    exactly: the scaled gains give bit for bit the same nDCG where the plain ones are
    finite, and stay finite where they are not. ``ndcg_exp`` uses
    2^(g - m) - 2^-m = (2^g - 1) 2^-m, m the query's largest grade: 2^1024 overflows a
    float, and inf / inf made the query NaN (issue 25). ``ndcg`` scales by 2^-e, e the
    binary exponent of m, so that sums of grades near 1e308 cannot overflow."""
    g = np.asarray(grade, np.float64)
    if top is None:
        top = g.max() if g.size else 0.0
    m = np.maximum(np.asarray(top, np.float64), 0.0)
    if family == "ndcg_exp":
        return np.exp2(g - m) - np.exp2(-m)
    return np.ldexp(g, -np.frexp(m)[1])


def _layout(rid: np.ndarray, score: np.ndarray, n_rows: int):
    """Per item: its row's end (exclusive), and the start / end of its run of equal
    scores in the row (global indices; items laid out by row, ascending score)."""
    counts = np.bincount(rid, minlength=n_rows)
    row_end = np.cumsum(counts)[rid]
    new_run = np.ones(rid.size, bool)
    new_run[1:] = (rid[1:] != rid[:-1]) | (score[1:] != score[:-1])
    run_id = np.cumsum(new_run) - 1
    starts = np.flatnonzero(new_run)
    ends = np.append(starts[1:], rid.size)
    return row_end, starts[run_id], ends[run_id], run_id


def _suffix(mask: np.ndarray) -> np.ndarray:
    """c[i] = number of True at indices >= i (with c[n] = 0)."""
    c = np.zeros(mask.size + 1, np.int64)
    c[:-1] = np.cumsum(mask[::-1])[::-1]
    return c


def binary_view(rid, score, grade, rank_pess, tied, position, n_rows: int, level: float):
    """``(rid, position, rank_pess, tied, n_relevant)`` of the items of grade >= ``level``,
    the items of lower grade counted as non-relevant (see the module docstring)."""
    row_end, run_start, run_end, _ = _layout(rid, score, n_rows)
    low = grade < level
    c_low = _suffix(low)
    c_rel = _suffix(~low)
    idx = np.arange(rid.size)
    ge = rank_pess - 1 - position  # non-set items scoring >= the item
    low_ge = c_low[run_start] - c_low[row_end]
    low_eq = c_low[run_start] - c_low[run_end]
    new_position = c_rel[idx + 1] - c_rel[row_end]
    keep = ~low
    counts = np.bincount(rid[keep], minlength=n_rows)
    return (
        rid[keep],
        new_position[keep],
        (1 + new_position + ge + low_ge)[keep],
        (tied + low_eq)[keep],
        counts,
    )


def _ideal_dcg(rid, gain, n_rows: int, k) -> np.ndarray:
    order = np.lexsort((-gain, rid))
    g, r = gain[order], rid[order]
    first = np.searchsorted(r, np.arange(n_rows))
    rank = np.arange(r.size) - first[r] + 1
    inside = rank <= k if k is not None else np.ones(r.size, bool)
    return np.bincount(r, weights=inside * g / np.log2(rank + 1.0), minlength=n_rows)


def _dcg_by_policy(rid, score, gain, rank_pess, tied, position, n_rows: int, k):
    """{policy: DCG@k per row} for the pessimistic, optimistic and average orders."""
    row_end, run_start, run_end, run_id = _layout(rid, score, n_rows)
    r = run_end - run_start
    s = (rank_pess - 1 - position - tied) + (
        row_end - run_end
    )  # strictly above: non-set, then set items
    order = np.lexsort((gain, run_id))  # ascending gain inside each run
    k_in_run = np.empty(rid.size, np.int64)
    k_in_run[order] = np.arange(rid.size) - run_start[order]
    slots = {"pessimistic": s + tied + 1 + k_in_run, "optimistic": s + r - k_in_run}
    out = {}
    for policy, slot in slots.items():
        inside = slot <= k if k is not None else np.ones(rid.size, bool)
        out[policy] = np.bincount(
            rid, weights=inside * gain / np.log2(slot + 1.0), minlength=n_rows
        )
    first = run_start == np.arange(rid.size)
    n = r + tied
    total = np.bincount(run_id, weights=gain)  # the run's gain, once per run
    end = s + n if k is None else np.minimum(s + n, k)
    begin = np.minimum(s, end)
    D = discount_prefix(int(end.max()) if end.size else 0)
    contrib = np.where(first, total[run_id] / n * (D[end] - D[begin]), 0.0)
    out["average"] = np.bincount(rid, weights=contrib, minlength=n_rows)
    return out


def graded_ndcg_values(
    specs: list[MetricSpec],
    rid,
    score,
    grade,
    rank_pess,
    tied,
    position,
    n_rows: int,
    judged=None,
) -> dict[str, dict[str, np.ndarray]]:
    """``{policy: {name: per-row nDCG}}`` for the ``ndcg`` / ``ndcg_exp`` specs (and the
    unnormalised ``dcg`` / ``dcg_exp``), under the pessimistic, optimistic and average
    orders of ties. ``judged``: ``(row, grade)`` of every judged item of grade > 0,
    ranked or not (a run's qrels), for the ideal DCG and the gains' scale; by default the
    items themselves (the engine ranks every one). NaN for rows whose ideal DCG is 0."""
    out: dict[str, dict[str, np.ndarray]] = {
        p: {} for p in ("pessimistic", "optimistic", "average")
    }
    jrid, jgrade = (rid, grade) if judged is None else judged
    has = np.bincount(jrid, minlength=n_rows) > 0
    row_max = row_top(jrid, jgrade, n_rows)
    for spec in specs:
        if spec.family in ("dcg", "dcg_exp"):  # DCG in the gains' own units: no scale
            gain = raw_gains(grade, spec)
            ideal = np.ones(n_rows)
        else:
            gain = gains(grade, spec.family, row_max[rid])
            ideal = _ideal_dcg(jrid, gains(jgrade, spec.family, row_max[jrid]), n_rows, spec.k)
        for policy, dcg in _dcg_by_policy(
            rid, score, gain, rank_pess, tied, position, n_rows, spec.k
        ).items():
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.where(has, dcg / ideal, np.nan)
            out[policy][spec.name] = v
    return out


def raw_gains(grade, spec: MetricSpec) -> np.ndarray:
    """DCG's gains, unscaled: the grade (``dcg``) or 2^grade - 1 (``dcg_exp``); grades
    below 0 (trec_eval's -1) gain nothing. A sum beyond float64 (``dcg_exp`` of grades
    above 1023) is an :class:`~retrieval_checks.InputError` naming ``ndcg_exp``."""
    g = np.maximum(np.asarray(grade, np.float64), 0.0)
    if spec.family != "dcg_exp":
        return g
    with np.errstate(over="ignore"):
        out = np.exp2(g) - 1.0
    if not np.isfinite(out).all():
        raise InputError(
            f"{spec.name}: a gain 2^grade - 1 is beyond the float64 range (grades up to 1023 "
            "fit); use ndcg_exp (its ratio is exact at any grade) or dcg (gain = grade)."
        )
    return out
