"""Every registered metric through the shared harness (tests/harness.py), its lists
derived from the registry (``retrieval_checks/metrics/_registry.py``) as scikit-learn's
``test_common.py`` derives its estimators: a metric added to the registry is checked
here against the dense reference (tests/reference.py) on every engine path without a
line of test code, and a family the reference cannot compute fails the coverage test,
naming the metric and the fix.

Cost: about 5 CPU-s (small problems: 12 x 20 tie-heavy, 15 x 30 Gaussian; all the
metrics of a family kind in one evaluation). By default each engine path runs on one
exact and one float problem (``default_cases``); ``--rc-exhaustive`` runs every path on
every problem under both tie policies.
"""

from __future__ import annotations

from dataclasses import replace

import harness
import numpy as np
import pytest
from harness import (
    GROUPED_FAMILIES,
    IMAGE_TEXT_FAMILIES,
    PAIR_FAMILIES,
    RANK_FAMILIES,
    RANK_PATHS,
    check_grouped,
    check_image_text,
    check_pairs,
    check_rank,
    check_run,
    gaussian,
    graded,
    hamming_codes,
    instances,
    rank_metrics,
    reference_gap,
    registered,
    tie_heavy,
    with_duplicates,
)

import retrieval_checks as rc
from retrieval_checks.metrics import FAMILIES

# the kinds the harness and the reference cover; the others have their own oracles
COVERED_KINDS = ("query", "pair", "grouped", "crossmodal")
# per-family exceptions, each with its reason (an entry here is a review decision)
ELSEWHERE = {
    "ann_recall": "its own entry point rc.ann_recall (tests/engine/test_ann_recall.py)",
}


@pytest.mark.parametrize(
    "family", [f for f in FAMILIES if FAMILIES[f].kind in COVERED_KINDS and f not in ELSEWHERE]
)
def test_every_registered_family_has_a_reference(family):
    gap = reference_gap(family)
    assert gap is None, (
        f"metric family {family!r} ({FAMILIES[family].template}) is registered in "
        f"retrieval_checks/metrics/_registry.py but tests/reference.py cannot compute it "
        f"({gap}): add its textbook formula to tests/reference.py (query_metric for a "
        "query metric, pair_reference for a pair metric), so that tests/harness.py checks "
        "it on every engine path"
    )


def test_the_harness_lists_follow_the_registry():
    """Nothing registered of a covered kind escapes the harness's lists."""
    listed = set(RANK_FAMILIES + PAIR_FAMILIES + GROUPED_FAMILIES + IMAGE_TEXT_FAMILIES)
    covered = {f for f in FAMILIES if FAMILIES[f].kind in COVERED_KINDS}
    assert covered - listed == set(ELSEWHERE)
    assert "ndcg" in RANK_FAMILIES and "recall_at_precision" in PAIR_FAMILIES
    assert instances("map", 5) == ["map", "map@1", "map@2", "map@5"]
    assert instances("pair_f1") == ["pair_f1@t=0.0", "pair_f1@t=0.3"]
    assert instances("rbp") == ["rbp@0.5", "rbp@0.8"] and instances("map@R") == ["map@R"]
    for name in rank_metrics(5):  # every instance is a name the library accepts
        assert rc.canonical_metric_name(name)


def test_a_family_without_a_reference_is_named():
    """The coverage test fails, naming the metric, when the reference lacks a formula or
    the harness values for a new kind of parameter."""
    Family = type(FAMILIES["recall"])
    gap = reference_gap(Family("novel", "novel@K", "query", summary="x"))
    assert gap is not None and "novel@1" in gap
    gap = reference_gap(Family("odd", "odd@Z", "query", summary="x"))
    assert gap is not None and "_PARAMS" in gap


# the problems: exact (tie-heavy integers under dot and neg_l2, leave-one-out and
# query/gallery with overlapping ids, duplicated rows) and float (Gaussian, cosine)
RANK_CASES = {
    "ties-split-ids": lambda: tie_heavy(0, ids=True),
    "ties-loo-neg_l2": lambda: tie_heavy(1, n_q=18, loo=True, similarity="neg_l2"),
    "ties-duplicates": lambda: with_duplicates(tie_heavy(2, n_g=10)),
    "ties-hamming": lambda: hamming_codes(tie_heavy(6, d=12)),
    "gauss-split": lambda: gaussian(3),
    "gauss-loo": lambda: gaussian(4, n_q=25, loo=True),
    "gauss-duplicates": lambda: with_duplicates(gaussian(5, n_g=12)),
}
TIE_POLICIES = ("pessimistic", "optimistic")
# hamming first: the rotation below then gives it the numpy, torch-auto and max_memory
# paths, and the fused CPU paths (which do not serve hamming) problems they serve
EXACT_CASES = sorted(
    (c for c in RANK_CASES if c.startswith("ties")), key=lambda c: c != "ties-hamming"
)
FLOAT_CASES = [c for c in RANK_CASES if c.startswith("gauss")]
# the default run: every path on one exact and one float problem, both policies and
# every problem among them (18 of the 108 combinations; --rc-exhaustive runs them all)
DEFAULT_RANK = [
    dict(case=cases[i % len(cases)], ties=TIE_POLICIES[(i + j) % 2], path=p)
    for i, p in enumerate(RANK_PATHS)
    for j, cases in enumerate((EXACT_CASES, FLOAT_CASES))
]


@pytest.mark.default_cases(*DEFAULT_RANK)
@pytest.mark.parametrize("path", RANK_PATHS, ids=repr)
@pytest.mark.parametrize("ties", TIE_POLICIES)
@pytest.mark.parametrize("case", sorted(RANK_CASES))
def test_every_rank_metric_on_every_path(case, ties, path):
    problem = RANK_CASES[case]()
    metrics = rank_metrics(problem.min_candidates())
    ref = check_rank(problem, metrics, ties=ties, paths=[path], permute=False)
    assert np.isfinite(ref["map"]).sum() >= 3  # a non-trivial problem


@pytest.mark.default_cases(dict(ties="pessimistic"))
@pytest.mark.parametrize("ties", TIE_POLICIES)
@pytest.mark.parametrize("case", sorted(RANK_CASES))
def test_every_rank_metric_under_permutations(case, ties):
    """Queries permuted (each value moves with its query), gallery permuted (nothing
    changes), against the reference."""
    problem = RANK_CASES[case]()
    check_rank(problem, rank_metrics(problem.min_candidates()), ties=ties, paths=())


@pytest.mark.parametrize("case", ["gauss-split", "gauss-loo"])
def test_tie_free_problems_give_the_average_policy_the_reference_values(case):
    """Without ties every order is the one order: ``ties="average"`` (an expectation
    over tie orders, computed apart) equals the reference too."""
    problem = RANK_CASES[case]()
    metrics = rank_metrics(problem.min_candidates())
    ref, _, _ = problem.reference(metrics, "pessimistic")
    opt, _, _ = problem.reference(metrics, "optimistic")
    for name in metrics:  # tie-free indeed
        np.testing.assert_array_equal(ref[name], opt[name], err_msg=name)
    res = problem.evaluate(metrics, ties="average")
    harness.assert_rank_result(res, ref, harness.tolerance(False), "average")


@pytest.mark.parametrize("case", ["ties-split-ids", "gauss-loo"])
def test_every_rank_metric_under_every_empty_query_policy(case):
    """Labels drawn from 25 values: some queries have no relevant item."""
    problem = RANK_CASES[case]()
    rng = np.random.default_rng(8)
    problem.q_labels = rng.integers(0, 25, len(problem.Q))
    if not problem.loo:
        problem.g_labels = rng.integers(0, 25, len(problem.G))
        if problem.q_ids is not None:
            harness.labels_follow_ids(
                problem.q_ids, problem.q_labels, problem.g_ids, problem.g_labels
            )
    harness.check_empty_queries(problem, rank_metrics(problem.min_candidates()))


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("case", ["ties-split-ids", "gauss-loo"])
def test_every_rank_metric_on_graded_relevance(case, level):
    """Grades 0..3 as gains (ndcg, dcg) and relevant at ``relevance_level``; exact data
    under both policies (the reference breaks ties by relevance, then grade)."""
    problem = graded(RANK_CASES[case](), seed=7, level=level)
    metrics = rank_metrics(problem.min_candidates())
    paths = [RANK_PATHS[0], RANK_PATHS[3]] if level == 1 else [RANK_PATHS[1]]
    for ties in TIE_POLICIES if problem.exact else TIE_POLICIES[:1]:
        check_rank(problem, metrics, ties=ties, paths=paths, permute=level == 2)


PAIR_CASES = ["ties-split-ids", "gauss-split", "gauss-loo"]
PAIR_METRICS = [m for f in PAIR_FAMILIES for m in instances(f)]


@pytest.mark.default_cases(
    *(dict(case=PAIR_CASES[i % len(PAIR_CASES)], path=p) for i, p in enumerate(RANK_PATHS))
)
@pytest.mark.parametrize("path", RANK_PATHS, ids=repr)
@pytest.mark.parametrize("case", PAIR_CASES)
def test_every_pair_metric_on_every_path(case, path):
    check_pairs(RANK_CASES[case](), PAIR_METRICS, paths=[path], policies=(), permute=False)


@pytest.mark.parametrize("case", PAIR_CASES)
def test_every_pair_metric_under_every_policy_and_permutation(case):
    check_pairs(RANK_CASES[case](), PAIR_METRICS, paths=())


@pytest.mark.parametrize("ties", TIE_POLICIES)
@pytest.mark.parametrize("case", ["ties-split-ids", "gauss-loo"])
def test_grouped_recall_on_every_path(case, ties):
    rng = np.random.default_rng(11)
    problem = RANK_CASES[case]()
    # twelve labels in groups of S = 3: four groups
    labels = rng.integers(0, 12, len(problem.Q) + (0 if problem.loo else len(problem.G)))
    problem.q_labels = labels[: len(problem.Q)]
    if not problem.loo:
        problem.g_labels = labels[len(problem.Q) :]
        problem.q_ids = problem.g_ids = None
    ks = [int(m.rpartition("@")[2]) for f in GROUPED_FAMILIES for m in instances(f, 2)]
    check_grouped(problem, ks, ties=ties, group_size=3)


@pytest.mark.parametrize("ties", TIE_POLICIES)
def test_every_image_text_metric_on_every_path(ties):
    rng = np.random.default_rng(2)
    images = rng.integers(-2, 3, (14, 3)).astype(np.float32)  # tie-heavy scores
    caption_image = np.repeat(np.arange(14), rng.integers(1, 5, 14))
    captions = (images[caption_image] + rng.integers(-1, 2, (caption_image.size, 3))).astype(
        np.float32
    )
    metrics = [m for f in IMAGE_TEXT_FAMILIES for m in instances(f, 5)]
    # integer rows under dot: exact scores on both sides, every tie a true tie
    check_image_text(
        images, captions, caption_image, metrics, ties=ties, similarity="dot", exact=True
    )


def test_every_rank_metric_through_evaluate_run():
    """evaluate_run sorts each query's full ranking (an implementation of its own):
    every registered metric it takes equals the reference on the same ranking."""
    rng = np.random.default_rng(5)
    scores = rng.integers(0, 6, (10, 14))  # ties
    grades = rng.integers(0, 3, (10, 14))
    grades[0] = 0  # a query without a relevant document
    metrics = rank_metrics(14, [f for f in RANK_FAMILIES if f != "rbp_residual"])
    for ties in TIE_POLICIES:
        check_run(scores, grades, metrics, ties=ties, level=1)
    check_run(scores, grades, metrics, ties="pessimistic", level=2)


def test_registered_kinds():
    assert registered("pair") == PAIR_FAMILIES


COUNTER_OF_PATH = {  # the counter that counts every block of the path's pass (KERNELS: numba)
    "numpy": harness.KERNELS,
    "numpy-vectorised": "torch",
    "torch-scored": harness.KERNELS,
    "torch-fused": "fused-cpu",
    "tile-1x7": harness.KERNELS,
    "tile-3x5-vectorised": "torch",
    "tile-4x3-torch-fused": "fused-cpu",
    "max_memory-1MiB": harness.KERNELS,
}


def test_each_path_reaches_the_counter_it_is_named_after():
    """A path that silently ran another counter would test nothing new: every block of
    each named path's pass is counted by its counter (the result's provenance, which
    names the counter that counted each block, a fused counter's declined blocks under
    its fallback), and every path's counters are among those it may reach."""
    pytest.importorskip("torch")
    from retrieval_checks.engine.counting import _kernels

    if _kernels.ACCELERATOR != "numba":
        pytest.skip("the fused CPU counter needs the compiled (numba) kernels")
    problem = RANK_CASES["ties-split-ids"]()
    for p in RANK_PATHS:
        res = p.run(problem.evaluate, metrics=["map"])  # checks p's counters
        assert res.provenance.blocks, p.name
        if p.name in COUNTER_OF_PATH:
            want = COUNTER_OF_PATH[p.name]
            want = _kernels.ACCELERATOR if want == harness.KERNELS else want
            assert res.provenance.counter == want, (p.name, res.provenance)


def test_a_path_that_reaches_another_counter_fails():
    """The harness's counter check can fail: a path that may reach only the torch
    counter, run on the CPU kernels."""
    problem = RANK_CASES["ties-split-ids"]()
    wrong = replace(harness.PATHS_BY_NAME["numpy"], counters=frozenset({"torch"}))
    with pytest.raises(AssertionError, match="expected only"):
        wrong.run(problem.evaluate, metrics=["map"])


def test_the_harness_fails_on_a_wrong_value():
    """The comparisons can fail: one per-query value off by 1e-9 on exact data, a skipped
    query moved, a mean off."""
    problem = RANK_CASES["ties-split-ids"]()
    ref, _, _ = problem.reference(["map"], "pessimistic")
    res = problem.evaluate(["map"])
    harness.assert_rank_result(res, ref, harness.tolerance(True))
    off = ref["map"].copy()
    off[np.flatnonzero(~np.isnan(off))[0]] += 1e-9
    with pytest.raises(AssertionError):
        harness.assert_rank_result(res, {"map": off}, harness.tolerance(True))
    moved = ref["map"].copy()
    moved[np.flatnonzero(~np.isnan(moved))[0]] = np.nan
    with pytest.raises(AssertionError, match="skipped queries differ"):
        harness.assert_rank_result(res, {"map": moved}, harness.tolerance(True))
