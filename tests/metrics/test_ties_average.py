"""The average tie policy (McSherry & Najork, ECIR 2008): the expected value of every rank
metric over all orderings of tied items, from counts (``metrics._ties``), against an
oracle that enumerates the orderings; the pessimistic and optimistic ranks as the bounds
of the rank-monotone metrics; the true bounds of map@K; groups of a million tied items.

Cost: about 10 CPU-s (2026-11-28, 2-core machine): the hypothesis enumeration (200
examples) about 4 s; the million-item groups about 1, 1 and 1.6 CPU-s of O(t) reference
for r = 1, 2, 5 (``order_statistics`` builds the falling products once, map's sum takes
one pass: 8.0 -> 3.7 CPU-s for the three, the same values to 1.3e-16). r = 5 stays in the
default run: it alone reaches the positive series of the expected reciprocal rank
(r (s + 1) > 6 (t + 1) at s = 3e6, t = 1e6)."""

from __future__ import annotations

import itertools
import math
import time
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval_checks.metrics import _ties as ties
from retrieval_checks.metrics._names import parse_metric
from retrieval_checks.metrics._ranking import per_query_values
from retrieval_checks.metrics._ties import (
    expected_first_rank,
    expected_per_query_values,
    expected_reciprocal_rank,
    harmonic_sums,
    hit_probability,
    map_at_k_extremes,
)

KS = (1, 2, 3, 5, 12)
NAMES = [
    f"{f}@{k}"
    for f in ("hit_rate", "recall", "precision", "map", "map_cut", "map_capped")
    for k in KS
]
NAMES += ["map", "map@R", "r_precision", "mrr", "medr", "meanr"]
SPECS = [parse_metric(name) for name in NAMES]


# --- the oracle: every distinct ordering of the tied items, metrics by their textbook definitions


def orderings(rel, scores):
    """Relevance flags in rank order, once for each distinct ordering of the tied items."""
    blocks = []
    for v in sorted(set(scores), reverse=True):
        size = sum(x == v for x in scores)
        k = sum(f for f, x in zip(rel, scores) if x == v)
        blocks.append(
            [
                [i in chosen for i in range(size)]
                for chosen in itertools.combinations(range(size), k)
            ]
        )
    for choice in itertools.product(*blocks):
        yield [f for block in choice for f in block]


def direct(name: str, ranks: list[int], R: int) -> Fraction:
    """The metric from the sorted 1-based ranks of the relevant items, as exact fractions."""
    family, _, param = name.partition("@")
    K = R if param == "R" else int(param) if param else None
    within = [(i, r) for i, r in enumerate(ranks, 1) if K is None or r <= K]
    precisions = sum((Fraction(i, r) for i, r in within), Fraction(0))
    if family == "hit_rate":
        return Fraction(int(ranks[0] <= K))
    if family in ("recall", "r_precision"):
        return Fraction(sum(r <= (K or R) for r in ranks), R)
    if family == "precision":
        return Fraction(len(within), K)
    if family == "map" and param and param != "R":
        return precisions / len(within) if within else Fraction(0)
    if family in ("map", "map_cut"):
        return precisions / R
    if family == "map_capped":
        return precisions / min(K, R)
    if family == "mrr":
        return Fraction(1, ranks[0])
    assert family in ("medr", "meanr")
    return Fraction(ranks[0])


def brute(rel, scores) -> dict[str, tuple[Fraction, Fraction, Fraction]]:
    """name -> (mean, min, max) over every ordering of the ties of one query."""
    R = sum(rel)
    values: dict[str, list[Fraction]] = {name: [] for name in NAMES}
    for flags in orderings(rel, scores):
        ranks = [i + 1 for i, f in enumerate(flags) if f]
        for name in NAMES:
            values[name].append(direct(name, ranks, R))
    return {name: (sum(v, Fraction(0)) / len(v), min(v), max(v)) for name, v in values.items()}


def engine_inputs(queries, rng=None):
    """What the engine hands over for these queries (lists of relevance flags and scores):
    rid, position, rank_pess, tied, n_relevant; entries shuffled when ``rng`` is given."""
    rows = []
    for q, (rel, scores) in enumerate(queries):
        neg = [x for f, x in zip(rel, scores) if not f]
        for p, v in enumerate(sorted((x for f, x in zip(rel, scores) if f), reverse=True)):
            rows.append((q, p, 1 + p + sum(y >= v for y in neg), sum(y == v for y in neg)))
    if rng is not None:
        rng.shuffle(rows)
    cols = np.array(rows, dtype=np.int64).reshape(-1, 4).T
    return (*cols, np.array([sum(rel) for rel, _ in queries], dtype=np.int64))


def check_against_enumeration(queries, rng=None):
    rid, position, rank_pess, tied, n_rel = engine_inputs(queries, rng)
    expected = expected_per_query_values(SPECS, rid, position, rank_pess, tied, n_rel)
    pess = per_query_values(SPECS, rid, position, rank_pess, n_rel)
    opt = per_query_values(SPECS, rid, position, rank_pess - tied, n_rel)
    extremes = {K: map_at_k_extremes(rid, position, rank_pess, tied, n_rel, K) for K in KS}
    for q, (rel, scores) in enumerate(queries):
        if not any(rel):
            assert all(np.isnan(expected[name][q]) for name in NAMES)
            assert all(np.isnan(extremes[K][0][q]) and np.isnan(extremes[K][1][q]) for K in KS)
            continue
        oracle = brute(rel, scores)
        for spec in SPECS:
            mean, lo, hi = oracle[spec.name]
            where = f"{spec.name} of query {q}: {list(zip(rel, scores))}"
            assert expected[spec.name][q] == pytest.approx(float(mean), rel=1e-12, abs=1e-12), where
            if spec.family == "map" and spec.k is not None:
                continue  # map@K is not monotone in the ranks: its bounds are map_at_k_extremes
            worst, best = (lo, hi) if spec.higher_is_better else (hi, lo)
            assert pess[spec.name][q] == pytest.approx(float(worst), rel=1e-12, abs=1e-12), where
            assert opt[spec.name][q] == pytest.approx(float(best), rel=1e-12, abs=1e-12), where
        for K in KS:
            _, lo, hi = oracle[f"map@{K}"]
            assert extremes[K][0][q] == pytest.approx(float(lo), rel=1e-12, abs=1e-12), (
                K,
                rel,
                scores,
            )
            assert extremes[K][1][q] == pytest.approx(float(hi), rel=1e-12, abs=1e-12), (
                K,
                rel,
                scores,
            )


# --- hand examples

MAP_AT_K_EXAMPLE = ([1, 0, 1, 0, 0, 0], [3, 2, 1, 1, 0, 0])

HAND = {
    "map@K not monotone": [MAP_AT_K_EXAMPLE],
    "all items tied": [([1, 0, 1, 0, 0], [0] * 5), ([0, 1, 0, 0, 0, 0, 1, 1, 0], [2] * 9)],
    "no ties": [([1, 0, 0, 1, 0, 1], [6, 5, 4, 3, 2, 1])],
    "relevant tied only with relevant": [
        ([1, 1, 0, 1, 1], [2, 2, 1, 0, 0]),
        ([1, 1, 1], [1, 1, 1]),
    ],
    "group straddling K": [
        ([0, 1, 0, 1, 0, 1, 1], [5, 3, 3, 3, 3, 1, 1]),
        ([1, 0, 0, 1, 1, 0, 0, 1, 0], [9, 4, 4, 4, 4, 4, 4, 4, 0]),
    ],
    "K beyond the list, no relevant, every item relevant": [
        ([1, 0], [1, 1]),
        ([0, 0, 0], [1, 1, 0]),
        ([1, 1], [0, 0]),
    ],
    "several tie groups": [([1, 0, 1, 1, 0, 0, 1, 0, 1], [3, 3, 2, 2, 2, 1, 1, 1, 0])],
}


@pytest.mark.parametrize("case", sorted(HAND))
def test_hand_examples_against_enumeration(case):
    check_against_enumeration(HAND[case])


def test_map_at_k_example_pessimistic_is_not_the_minimum():
    """scores 3 (rel), 2, 1 (rel), 1, 0, 0: map@3 is 1 with the relevant 1 after its tie, 5/6
    before it; the mean is 11/12 and the bounds are (5/6, 1), not (pessimistic, optimistic)."""
    rid, position, rank_pess, tied, n_rel = engine_inputs([MAP_AT_K_EXAMPLE])
    spec = [parse_metric("map@3")]
    pess = per_query_values(spec, rid, position, rank_pess, n_rel)["map@3"][0]
    opt = per_query_values(spec, rid, position, rank_pess - tied, n_rel)["map@3"][0]
    assert (pess, opt) == (pytest.approx(1.0), pytest.approx(5 / 6))
    lo, hi = map_at_k_extremes(rid, position, rank_pess, tied, n_rel, 3)
    assert (lo[0], hi[0]) == (pytest.approx(5 / 6, abs=1e-15), pytest.approx(1.0, abs=1e-15))
    assert pess != pytest.approx(lo[0])
    mean = expected_per_query_values(spec, rid, position, rank_pess, tied, n_rel)["map@3"][0]
    assert mean == pytest.approx(11 / 12, abs=1e-15)


def test_hand_computed_values():
    """All five items tied, two relevant: the first relevant slot X has P(X = x) = (5 - x)/10,
    so E[1/X] = 77/120 and E[X] = 2; hit_rate@1 = 2/5; recall@2 = 2/5; AP = E[(1/X1 + 2/X2)/2]."""
    rid, position, rank_pess, tied, n_rel = engine_inputs([([1, 0, 1, 0, 0], [0] * 5)])
    got = expected_per_query_values(
        [parse_metric(n) for n in ("mrr", "meanr", "hit_rate@1", "recall@2", "map")],
        rid,
        position,
        rank_pess,
        tied,
        n_rel,
    )
    ap = (
        sum(Fraction(1, a) + Fraction(2, b) for a, b in itertools.combinations(range(1, 6), 2)) / 20
    )
    assert got["mrr"][0] == pytest.approx(77 / 120, abs=1e-15)
    assert got["meanr"][0] == pytest.approx(2.0, abs=1e-15)
    assert got["hit_rate@1"][0] == pytest.approx(0.4, abs=1e-15)
    assert got["recall@2"][0] == pytest.approx(0.4, abs=1e-15)
    assert got["map"][0] == pytest.approx(float(ap), abs=1e-15)


# --- generated cases: integer scores 0..3 (many ties), up to 9 items, several queries at once

QUERY = st.lists(st.tuples(st.booleans(), st.integers(0, 3)), min_size=1, max_size=9).map(
    lambda items: ([int(f) for f, _ in items], [x for _, x in items])
)


@settings(max_examples=200, deadline=None)
@given(st.lists(QUERY, min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_generated_cases_against_enumeration(queries, rng):
    check_against_enumeration(queries, rng)


# --- the top group's first relevant rank, against enumeration


def first_slots(r, t):
    """The slot of the first relevant item, once per placement of r relevant among r + t slots."""
    return [chosen[0] + 1 for chosen in itertools.combinations(range(r + t), r)]


@pytest.mark.parametrize("s", [0, 1, 4])
def test_first_rank_helpers_against_enumeration(s):
    for r, t in itertools.product(range(1, 6), range(0, 7)):
        firsts = first_slots(r, t)
        count = len(firsts)
        assert expected_first_rank(s, r, t) == pytest.approx(
            float(Fraction(sum(s + x for x in firsts), count)), rel=1e-14
        )
        mrr = sum((Fraction(1, s + x) for x in firsts), Fraction(0)) / count
        assert expected_reciprocal_rank(s, r, t) == pytest.approx(float(mrr), rel=1e-14), (s, r, t)
        ks = np.arange(0, s + r + t + 2)
        want = [float(Fraction(sum(s + x <= k for x in firsts), count)) for k in ks]
        np.testing.assert_allclose(hit_probability(s, r, t, ks), want, rtol=1e-14, atol=1e-15)


def reciprocal_reference(s, r, t):
    """E[1/(s + X)] by summing P(X = x) / (s + x) over every x, with 40 decimal digits."""
    with localcontext() as ctx:
        ctx.prec = 40
        n = r + t
        p, total = Decimal(r) / n, Decimal(0)
        for x in range(1, t + 2):
            total += p / (s + x)
            if x <= t:
                p = p * (n - x - r + 1) / (n - x)
        return float(total)


@pytest.mark.parametrize("extended", [True, False])
def test_reciprocal_rank_in_every_regime(extended, monkeypatch):
    """s = 0, the r - 1 term form and the positive series, with up to 5000 relevant tied;
    also as on a platform whose long double is plain double."""
    if not extended:
        monkeypatch.setattr(ties, "_WIDE", np.float64)
        monkeypatch.setattr(ties, "_HEAD_LIMIT", 1)
    cases = [
        (s, r, t)
        for t in (0, 1, 7, 300, 3000)
        for r in (1, 2, 9, 500, 5000)
        for s in (0, 1, 30, 1000, 10**9)
    ]
    s, r, t = np.array(cases).T
    got = expected_reciprocal_rank(s, r, t)
    want = [reciprocal_reference(*case) for case in cases]
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_harmonic_sums_to_full_precision():
    """S1 = sum 1/(x+j) and D = sum j/(x+j), j < L, against exact fractions, across the
    direct head and the expansion (x >= 20), for tiny and huge x."""
    for x in (1, 2, 19, 20, 21, 333, 10**6, 10**12):
        for L in (0, 1, 2, 5, 19, 40, 300):
            S1 = sum((Fraction(1, x + j) for j in range(L)), Fraction(0))
            D = sum((Fraction(j, x + j) for j in range(L)), Fraction(0))
            got = harmonic_sums(x, L)
            assert got[0][0] == pytest.approx(float(S1), rel=1e-15, abs=0), (x, L)
            assert got[1][0] == pytest.approx(float(D), rel=1e-14, abs=0), (x, L)


# --- a million tied non-relevant items: 32-bit binary codes against a 1M gallery


def order_statistic(i, r, n, x):
    """P(the i-th of r relevant items uniformly placed among n slots sits in slot x)."""

    def falling(a, k):
        out = np.ones_like(a, dtype=np.float64)
        for j in range(k):
            out *= np.maximum(a - j, 0)
        return out

    return (
        falling(x - 1.0, i - 1)
        / math.factorial(i - 1)
        * falling(n - x * 1.0, r - i)
        / math.factorial(r - i)
        / float(math.comb(n, r))
    )


def order_statistics(r, n, x):
    """``[order_statistic(i, r, n, x) for i in 1 .. r]``, the same products computed once
    (``falling(a, k)`` for each k is the previous one times one more factor): O(r) passes
    over x instead of O(r^2)."""
    ones = np.ones_like(x, dtype=np.float64)
    low, high = [ones], [ones]  # falling(x - 1, k), falling(n - x, k) for k = 0 .. r - 1
    for j in range(r - 1):
        low.append(low[-1] * np.maximum(x - 1.0 - j, 0))
        high.append(high[-1] * np.maximum(n - x * 1.0 - j, 0))
    return [
        low[i - 1]
        / math.factorial(i - 1)
        * high[r - i]
        / math.factorial(r - i)
        / float(math.comb(n, r))
        for i in range(1, r + 1)
    ]


def large_reference(before, r, t, s, K):
    """Independent O(t) values for a query whose relevant items are ``before`` (1-based
    ranks of untied relevant items above the group) then a group of r relevant and t
    non-relevant tied items with s items above it."""
    n, c = r + t, len(before)
    R = c + r
    x = np.arange(1, n + 1, dtype=np.float64)
    P = order_statistics(r, n, x)
    above = math.fsum(Fraction(i, b) for i, b in enumerate(before, 1))
    m = max(0, min(K - s, n))  # slots of the group inside the top K
    # map's O(t) sum: the r terms of each slot added first (positive terms: a relative
    # error of at most r ulps per slot), then one exact fsum over the slots, far inside
    # the 1e-12 the test asks for, in one pass over the million slots instead of r
    ap_terms = sum(P[i - 1] * (c + i) for i in range(1, r + 1)) / (s + x)
    out = {
        "map": (above + math.fsum(ap_terms)) / R,
        f"map_cut@{K}": (
            above
            + math.fsum(math.fsum(P[i - 1][:m] * (c + i) / (s + x[:m])) for i in range(1, r + 1))
        )
        / R,
        f"recall@{K}": (c + math.fsum(math.fsum(P[i - 1][:m]) for i in range(1, r + 1))) / R,
    }
    # map@K: h of the group's relevant items in its first m slots, those h uniformly there
    total = 0.0
    for h in range(0, min(r, m) + 1):
        p_h = math.comb(m, h) * math.comb(n - m, r - h) / math.comb(n, r)
        xs = x[:m]
        inside = math.fsum(
            math.fsum(order_statistic(i, h, m, xs) * (c + i) / (s + xs)) for i in range(1, h + 1)
        )
        total += p_h * ((above + inside) / (c + h) if c + h else 0.0)
    out[f"map@{K}"] = total
    if not before:
        out["mrr"] = math.fsum(P[0] / (s + x))
        out["meanr"] = math.fsum(P[0] * (s + x))
        out[f"hit_rate@{K}"] = math.fsum(P[0][:m])
    return out


@pytest.mark.parametrize("r", [1, 2, 5])
def test_a_million_tied_non_relevant_items(r):
    t, K = 10**6, 700
    layouts = [((), 0), ((), 7), ((), 3 * 10**6), ((1,), 1), ((2,), 300), ((1, 4), 650)]
    rows = []
    for q, (before, s) in enumerate(layouts):
        c = len(before)
        rows += [(q, i, b, 0) for i, b in enumerate(before)]  # untied relevant items at rank b
        rows += [
            (q, c + j, 1 + c + j + (s - c) + t, t) for j in range(r)
        ]  # ge = negatives above + t
    rid, position, rank_pess, tied = np.array(rows, dtype=np.int64).T
    n_rel = np.array([len(b) + r for b, _ in layouts])
    names = ["map", f"map_cut@{K}", f"recall@{K}", f"map@{K}", "mrr", "meanr", f"hit_rate@{K}"]
    start = time.perf_counter()
    got = expected_per_query_values(
        [parse_metric(n) for n in names], rid, position, rank_pess, tied, n_rel
    )
    assert time.perf_counter() - start < 2.0  # nothing costs O(t)
    for q, (before, s) in enumerate(layouts):
        want = large_reference([b for b in before], r, t, s, K)
        for name, value in want.items():
            assert got[name][q] == pytest.approx(value, rel=1e-12, abs=1e-15), (name, before, s)
