"""recall_at_precision@P and precision_at_recall@Q decide against the level exactly.

A level is the decimal fraction its name writes (0.9 is 9/10, not the float 0.9), and a
pair precision or recall of exactly the level reaches it, on every backend and whatever
other metrics the same call computes. The reference sweeps every observed score with
Fractions (no float, no shortcut)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.engine.counting import _kernels
from retrieval_checks.metrics._names import parse_metric
from retrieval_checks.metrics._pairs import (
    MAX_TAIL_CAPACITY,
    NegativeTail,
    PairCounts,
    _best_precision,
    pair_metric,
    tail_capacity,
)

# (device, use_kernels, CPU kernels): numba, numpy, torch on the CPU, and the CUDA code path run on the CPU
BACKENDS = [
    ("numpy", True, "numba"),
    ("numpy", True, "numpy"),
    ("torch-cpu", True, "numba"),
    ("torch-cpu", False, "numba"),
]
LEVELS = ["0.1", "0.2", "0.25", "0.3", "0.4", "0.5", "0.6", "0.7", "0.75", "0.8", "0.9", "1"]


def reference(pos: np.ndarray, neg: np.ndarray, family: str, level: Fraction):
    """(value, threshold, tp, fp) by sweeping every observed score in exact arithmetic;
    the threshold is the lowest qualifying positive score for recall_at_precision (the
    highest recall), the highest among the best for precision_at_recall."""
    P = pos.size
    best = None
    for t in sorted(set(pos.tolist()) | set(neg.tolist())):
        tp, fp = int((pos >= t).sum()), int((neg >= t).sum())
        if tp == 0:
            continue
        precision, recall = Fraction(tp, tp + fp), Fraction(tp, P)
        if family == "recall_at_precision" and precision >= level:
            key, value = recall, recall
        elif family == "precision_at_recall" and recall >= level:
            key, value = precision, precision
        else:
            continue
        better = (
            best is None or key > best[0] or (key == best[0] and family == "precision_at_recall")
        )
        if better and t in set(pos.tolist()):
            best = (key, value, t, tp, fp)
    if best is None:
        return 0.0, None, 0, 0
    return best[1], best[2], best[3], best[4]


def run(scores, rel, metrics, device, kernels, impl):
    """evaluate() on one query column per gallery item scoring ``scores[j]`` for every
    query (dot with 1-D embeddings: exact integers), relevance ``rel`` (n_q x n_g)."""
    n_q = rel.shape[0]
    Q = np.ones((n_q, 1), np.float32)
    G = np.asarray(scores, np.float32)[:, None]
    with _kernels.use(impl):
        return rc.evaluate(
            Q,
            G,
            relevance=rel,
            metrics=metrics,
            similarity="dot",
            device=device,
            _use_kernels=kernels,
            tile=(2, 16),
        )


def check(scores, rel, names, device, kernels, impl):
    S = np.broadcast_to(np.asarray(scores, np.int64), rel.shape)
    pos, neg = S[rel], S[~rel]
    res = run(scores, rel, names, device, kernels, impl)
    for name in names:
        spec = parse_metric(name)
        value, thr, tp, fp = reference(pos, neg, spec.family, spec.level_fraction)
        where = (name, device, kernels, impl, list(scores), rel.astype(int).tolist())
        assert res[name] == float(value), where
        assert res.thresholds[name] == (None if thr is None else float(thr)), where
        assert (res.pair_counts[name]["tp"], res.pair_counts[name]["fp"]) == (tp, fp), where
    return res


@pytest.mark.parametrize("device,kernels,impl", BACKENDS)
def test_a_precision_of_exactly_the_level_qualifies(device, kernels, impl):
    """The issue's case: 8 positives at 3, a negative at 2, a positive at 1: precision 9/10
    at threshold 1, recall 1. It was reported as 8/9 (the tail sized in floats,
    9 * (1 - 0.9) / 0.9 = 0.999..., kept one negative too few), and as 1 only when
    precision_at_recall@1.0 was requested too (which widened the tail)."""
    scores = [3] * 8 + [2, 1]
    rel = np.array([[True] * 8 + [False, True]])
    alone = check(scores, rel, ["recall_at_precision@0.9"], device, kernels, impl)
    assert (
        alone["recall_at_precision@0.9"] == 1.0
        and alone.thresholds["recall_at_precision@0.9"] == 1.0
    )
    both = check(
        scores, rel, ["recall_at_precision@0.9", "precision_at_recall@1.0"], device, kernels, impl
    )
    assert both["recall_at_precision@0.9"] == alone["recall_at_precision@0.9"]


@pytest.mark.parametrize("device,kernels,impl", BACKENDS)
def test_levels_met_exactly_on_every_backend_alone_or_together(device, kernels, impl):
    """Random tie-heavy integer scores with levels that the pair precision / recall meet
    exactly (0.3 = 3/10, 0.75 = 3/4, ...): every answer equals the exact sweep, and a
    metric's answer does not depend on the metrics computed beside it."""
    rng = np.random.default_rng(25)
    for _ in range(4):
        n_q, n_g = int(rng.integers(1, 4)), int(rng.integers(4, 12))
        scores = rng.integers(0, 4, n_g)
        rel = rng.random((n_q, n_g)) < rng.uniform(0.4, 0.9)
        rel[0, 0] = True
        names = [f"{f}@{p}" for f in ("recall_at_precision", "precision_at_recall") for p in LEVELS]
        together = check(scores, rel, names, device, kernels, impl)
        for name in ("recall_at_precision@0.8", "precision_at_recall@0.75"):
            alone = check(scores, rel, [name], device, kernels, impl)
            assert (
                alone[name] == together[name]
                and alone.thresholds[name] == together.thresholds[name]
            ), name


def test_tail_capacity_is_computed_in_integers():
    """A tail one negative larger than the most a threshold reaching P can have."""
    for level, n_pos, most_fp in [
        ("0.9", 9, 1),
        ("0.8", 4, 1),
        ("0.8", 8, 2),
        ("0.3", 3, 7),
        ("0.5", 5, 5),
        ("1", 7, 0),
        ("0.7", 7, 3),
    ]:
        assert (
            tail_capacity([parse_metric(f"recall_at_precision@{level}")], n_pos) == most_fp + 1
        ), level
    # a level of 1e-30 asks for ~1e30 negatives: bounded, an int64 for the kernels
    assert tail_capacity([parse_metric("recall_at_precision@1e-30")], 10) == MAX_TAIL_CAPACITY


def counts_of(pos, neg):
    tail = NegativeTail(len(neg) + 1)
    tail.add(np.asarray(neg, np.float32))
    return PairCounts(
        positives=np.sort(np.asarray(pos, np.float32)), n_negative=len(neg), tail=tail
    )


def test_levels_with_thirty_decimal_places_are_decided_exactly():
    """0.333...3 (30 threes) is just below 1/3: a precision of 1/3 reaches it, and the
    float 1/3 (which the level rounds to) says nothing; a level just above 1/3 is not
    reached. The products overflow int64 and are compared in Python integers."""
    pos, neg = [1.0], [1.0, 1.0]  # one threshold: precision exactly 1/3, recall 1
    below = parse_metric("recall_at_precision@0." + "3" * 30)
    above = parse_metric("recall_at_precision@0." + "3" * 29 + "4")
    assert below.level_fraction < Fraction(1, 3) < above.level_fraction
    assert pair_metric(below, counts_of(pos, neg))[0] == 1.0
    assert pair_metric(above, counts_of(pos, neg))[0] == 0.0
    big = np.full(3 * 10**5, 1.0)  # tp * 10^30 far past int64
    assert pair_metric(below, counts_of(big[: 10**5], big[10**5 :]))[0] == 1.0
    q = parse_metric("precision_at_recall@0." + "9" * 30)
    assert pair_metric(q, counts_of([2.0, 1.0], [1.5]))[:2] == (
        2 / 3,
        1.0,
    )  # recall 1 needed: 1 - 1e-30 < 1


def test_precision_at_recall_picks_the_exact_best_among_near_equal_floats():
    """Precisions that one float cannot tell apart (n / (2n + 1) and (n - 1) / (2n - 1)
    for n = 10^8) are ordered exactly: the strictly larger one (the lower threshold)
    wins, not the higher threshold among float-equal values."""
    n = 10**8
    tp = np.array([n, n - 1], np.int64)  # ascending thresholds: TP and FP only fall
    fp = np.array([n + 1, n], np.int64)
    assert n / (2 * n + 1) == (n - 1) / (2 * n - 1)  # the floats tie
    i, best = _best_precision(tp, fp, np.arange(2))
    assert (i, best) == (0, Fraction(n, 2 * n + 1))
    tp2, fp2 = np.array([n - 1, n - 1]), np.array([n, n])  # a real tie: the higher threshold
    assert _best_precision(tp2, fp2, np.arange(2))[0] == 1


# ----------------------------------------------------------------------------- thresholds T, exactly as written
@pytest.mark.parametrize("device,kernels,impl", BACKENDS)
def test_a_threshold_just_above_a_score_excludes_it(device, kernels, impl):
    """pair_precision@t=0.50000000000000000001 is above a score of exactly 0.5, though its
    nearest float is 0.5: the pairs at 0.5 are not predicted positive, and the canonical
    name keeps the threshold as written (it was t=0.5, and counted them)."""
    Q = np.ones((1, 1), np.float32)
    G = np.array([[0.5], [0.5], [1.0]], np.float32)
    rel = np.array([[True, False, True]])
    name = "pair_precision@t=0.50000000000000000001"
    with _kernels.use(impl):
        res = rc.evaluate(
            Q,
            G,
            relevance=rel,
            metrics=[name, "pair_precision@t=0.5"],
            similarity="dot",
            device=device,
            _use_kernels=kernels,
            tile=(2, 16),
        )
    assert list(res) == [name, "pair_precision@t=0.5"]
    assert (res.pair_counts[name]["tp"], res.pair_counts[name]["fp"]) == (1, 0) and res[name] == 1.0
    assert (
        res.pair_counts["pair_precision@t=0.5"]["tp"],
        res.pair_counts["pair_precision@t=0.5"]["fp"],
    ) == (2, 1)


def test_a_neg_l2_threshold_is_squared_exactly():
    """neg_l2: t = -1.41421356237309504880 admits distances <= |t|, and |t|^2 is just below
    2, so a pair at squared distance 2 is out; squaring the float (1.4142135623730951^2 =
    2.0000000000000004) let it in."""
    Q = np.zeros((1, 2), np.float32)
    G = np.array([[1, 1], [1, 0]], np.float32)  # squared distances 2 and 1
    rel = np.array([[True, True]])
    name = "pair_recall@t=-1.41421356237309504880"
    res = rc.evaluate(Q, G, relevance=rel, metrics=[name], similarity="neg_l2")
    spec = parse_metric(name)
    assert spec.level_fraction**2 < 2
    assert res.pair_counts[spec.name]["tp"] == 1 and res[spec.name] == 0.5
