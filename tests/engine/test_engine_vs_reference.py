"""The engine equals the dense brute-force reference (tests/reference.py).

Tie-heavy data uses small integer embeddings, whose similarities are exact in
float32 whatever the summation order, so every tie is a true tie on both sides
and results must agree exactly. Tie-free data uses Gaussian embeddings and must
agree to 1e-6 with the float64 reference.

Every comparison runs through the shared harness (tests/harness.py) on the registry's
full list of rank metrics. The property tests draw one engine path per problem; every
path on every registered metric, and the permutations, run deterministically in
tests/metrics/test_every_metric.py, so the default run draws few problems here (15, 8,
15, 8; the refusals are explicit examples) and the ``_sweep`` twins draw the former
counts (150, 60, 40, 30) with ``--rc-exhaustive``.

Cost: about 8 CPU-s.
"""

from __future__ import annotations

import numpy as np
import pytest
from harness import (
    PATHS_BY_NAME,
    TILES,
    Problem,
    check_pairs,
    check_rank,
    gaussian,
    path,
    rank_metrics,
    with_duplicates,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from reference import pair_reference, pair_reference_by_sums, reference

import retrieval_checks as rc


@st.composite
def tie_heavy_problem(draw):
    d = draw(st.integers(1, 4))
    n_q = draw(st.integers(1, 25))
    n_g = draw(st.integers(2, 30))
    Q = draw(
        st.lists(st.lists(st.integers(-2, 2), min_size=d, max_size=d), min_size=n_q, max_size=n_q)
    )
    G = draw(
        st.lists(st.lists(st.integers(-2, 2), min_size=d, max_size=d), min_size=n_g, max_size=n_g)
    )
    n_labels = draw(st.integers(1, 5))
    ql = draw(st.lists(st.integers(0, n_labels), min_size=n_q, max_size=n_q))
    gl = draw(st.lists(st.integers(0, n_labels), min_size=n_g, max_size=n_g))
    # ids: gallery ids drawn from a pool overlapping the query ids, duplicates allowed; an
    # id names one item, of one label: each item takes its id's first holder's label
    q_ids = draw(st.permutations(list(range(n_q))))
    g_ids = draw(st.lists(st.integers(0, n_q + n_g), min_size=n_g, max_size=n_g))
    label_of = dict(zip(q_ids, ql))
    gl = [label_of.setdefault(i, label) for i, label in zip(g_ids, gl)]
    return (
        np.array(Q, np.float32),
        np.array(G, np.float32),
        np.array(ql),
        np.array(gl),
        np.array(q_ids),
        np.array(g_ids),
    )


TIE_HEAVY = dict(
    problem=tie_heavy_problem(),
    ties=st.sampled_from(["pessimistic", "optimistic"]),
    similarity=st.sampled_from(["dot", "neg_l2"]),
    tile=st.sampled_from(TILES),
    use_ids=st.booleans(),
    kernels=st.booleans(),
)


def _problem(Q, G, ql, gl, q_ids, g_ids):
    return tuple(
        np.array(a, np.float32 if i < 2 else None)
        for i, a in enumerate((Q, G, ql, gl, q_ids, g_ids))
    )


# the two refusals, whatever hypothesis draws: every gallery item of query 0 is its own
# id (no candidate left), and no query has a relevant item (every query is empty)
NO_CANDIDATE = _problem([[1], [2]], [[1], [0]], [0, 1], [0, 0], [0, 1], [0, 0])
NO_RELEVANT = _problem([[1], [2]], [[1], [0], [2]], [0, 0], [1, 2, 3], [0, 1], [4, 5, 6])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**TIE_HEAVY)
@example(NO_CANDIDATE, "pessimistic", "dot", None, True, True)
@example(NO_RELEVANT, "optimistic", "neg_l2", (1, 7), True, False)
def test_tie_heavy_query_gallery_with_overlap(problem, ties, similarity, tile, use_ids, kernels):
    """Fifteen drawn problems and the two refusals; 150 in the exhaustive sweep below."""
    check_tie_heavy(problem, ties, similarity, tile, use_ids, kernels)


@pytest.mark.exhaustive
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**TIE_HEAVY)
def test_tie_heavy_query_gallery_with_overlap_sweep(
    problem, ties, similarity, tile, use_ids, kernels
):
    check_tie_heavy(problem, ties, similarity, tile, use_ids, kernels)


def check_tie_heavy(problem, ties, similarity, tile, use_ids, kernels):
    """The harness (tests/harness.py) on one drawn problem and one drawn path: every
    registered rank metric, the refusals of a query without candidates and of a problem
    without relevant items, and the skipped-query count."""
    Q, G, ql, gl, q_ids, g_ids = problem
    ids = dict(q_ids=q_ids, g_ids=g_ids) if use_ids else {}
    p = Problem(Q, G, ql, gl, similarity=similarity, exact=True, **ids)
    metrics = rank_metrics(max(1, p.min_candidates()))
    check_rank(p, metrics, ties=ties, paths=[path(tile=tile, kernels=kernels)], permute=False)


TIE_FREE = dict(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(3, 60),
    d=st.integers(2, 8),
    n_labels=st.integers(1, 8),
    tile=st.sampled_from(TILES),
    kernels=st.booleans(),
)


@settings(max_examples=8, deadline=None)
@given(**TIE_FREE)
def test_tie_free_leave_one_out_cosine(seed, n, d, n_labels, tile, kernels):
    """Eight drawn problems; 60 in the exhaustive sweep below."""
    check_tie_free(seed, n, d, n_labels, tile, kernels)


@pytest.mark.exhaustive
@settings(max_examples=60, deadline=None)
@given(**TIE_FREE)
def test_tie_free_leave_one_out_cosine_sweep(seed, n, d, n_labels, tile, kernels):
    check_tie_free(seed, n, d, n_labels, tile, kernels)


def check_tie_free(seed, n, d, n_labels, tile, kernels):
    p = gaussian(seed, n_q=n, d=d, n_labels=n_labels, loo=True)
    if np.isnan(p.reference(["map"], "pessimistic")[0]["map"]).all():
        return  # no query has a relevant item (the refusal is checked above)
    check_rank(p, rank_metrics(n - 1), paths=[path(tile=tile, kernels=kernels)], permute=False)


def test_constant_scorer_gets_the_worst_score():
    """Every item identical: pessimistic ties put each relevant item behind all others."""
    X = np.ones((40, 8), np.float32)
    y = np.repeat(np.arange(4), 10)
    res = rc.evaluate(
        X, query_labels=y, metrics=["map", "hit_rate@1", "mrr", "r_precision", "medr"]
    )
    # each query: 9 relevant, 30 non-relevant ahead of them all
    ranks = np.arange(31, 40)
    assert res["map"] == pytest.approx(np.mean(np.arange(1, 10) / ranks))
    assert res["hit_rate@1"] == 0.0 and res["r_precision"] == 0.0
    assert res["mrr"] == pytest.approx(1 / 31)
    assert res["medr"] == 31
    best = rc.evaluate(X, query_labels=y, metrics=["map", "hit_rate@1"], ties="optimistic")
    assert best["map"] == 1.0 and best["hit_rate@1"] == 1.0


def test_duplicates_under_cosine_tie_exactly_across_chunks():
    """Duplicated gallery rows land in different chunks and still tie bit-for-bit (the
    reference rounds its float64 scores so that duplicates compare equal)."""
    rng = np.random.default_rng(3)
    base = rng.normal(size=(30, 16)).astype(np.float32)
    Q = rng.normal(size=(12, 16)).astype(np.float32)
    p = with_duplicates(Problem(Q, base, np.arange(12) % 3, np.arange(30) % 3))
    p.g_labels[30:] = (np.arange(30) % 3 + 1)[::-1] % 3  # the copies in other classes
    metrics = ["map", "mrr", "r_precision", "precision@5"]
    tiles = [PATHS_BY_NAME["numpy"], path(tile=(1, 7)), path(tile=(5, 11))]
    for ties in ["pessimistic", "optimistic"]:
        check_rank(p, metrics, ties=ties, paths=tiles, permute=False)


PAIRS = dict(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(4, 50),
    tile=st.sampled_from(TILES),
    level=st.sampled_from([0.1, 0.25, 0.5, 0.9, 1.0]),
    threshold=st.sampled_from([-0.5, 0.0, 0.3]),
    kernels=st.booleans(),
)


@settings(max_examples=15, deadline=None)
@given(**PAIRS)
def test_pair_metrics_equal_a_full_threshold_sweep(seed, n, tile, level, threshold, kernels):
    """Fifteen drawn problems; 40 in the exhaustive sweep below."""
    check_pair_sweep(seed, n, tile, level, threshold, kernels)


@pytest.mark.exhaustive
@settings(max_examples=40, deadline=None)
@given(**PAIRS)
def test_pair_metrics_equal_a_full_threshold_sweep_sweep(seed, n, tile, level, threshold, kernels):
    check_pair_sweep(seed, n, tile, level, threshold, kernels)


def check_pair_sweep(seed, n, tile, level, threshold, kernels):
    names = [
        f"recall_at_precision@{level}",
        f"precision_at_recall@{level}",
        f"pair_precision@t={threshold}",
        f"pair_recall@t={threshold}",
        f"pair_f1@t={threshold}",
    ]
    p = gaussian(seed, n_q=n, d=4, n_labels=4, loo=True)
    check_pairs(p, names, paths=[path(tile=tile, kernels=kernels)], permute=False, policies=())


@pytest.mark.parametrize("seed", [0, 1])
def test_the_oracles_threshold_sweep_equals_one_sum_per_threshold(seed):
    """pair_reference counts pos >= t and neg >= t for every observed score t by binary
    search (the oracle of the tests below: ~90k pairs); one sum per threshold agrees on
    tie-heavy scores (rounded to tenths) at every level, boundaries included."""
    rng = np.random.default_rng(seed)
    pos = np.round(rng.normal(0.5, 1.0, 300), 1).astype(np.float32)
    neg = np.round(rng.normal(0.0, 1.0, 900), 1).astype(np.float32)
    for level in (0.0, 0.1, 0.5, 0.9, 1.0):
        for base in ("precision_at_recall", "recall_at_precision"):
            name = f"{base}@{level}"
            assert pair_reference(pos, neg, name) == pair_reference_by_sums(pos, neg, name), name


@pytest.mark.parametrize("kernels", [True, False])
def test_precision_at_recall_falls_back_to_an_exact_binning_pass(kernels, monkeypatch):
    """A tail too small to certify the answer triggers the second pass (its blocks in the
    result's provenance, counted by the pass's counter); same answer."""
    from retrieval_checks.engine import _stream

    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = rng.integers(0, 3, 300)
    _, pos, neg = reference(X, X, y, y, [], q_ids=np.arange(300), g_ids=np.arange(300))
    monkeypatch.setattr(_stream, "tail_capacity", lambda specs, n: 5)  # force an uncertifiable tail
    res = rc.evaluate(
        X,
        query_labels=y,
        metrics=["precision_at_recall@0.5", "recall_at_precision@0.9"],
        tile=(37, 64),
        _use_kernels=kernels,
    )
    # the second pass ran, on the pass's counter and blocks (the fused CPU pass's one
    # mirrored task by default, the torch counter's 9 blocks without the kernels; on a GPU
    # the fused Triton kernel's 9 blocks when it is on, as by default: found on an H200)
    assert res.provenance.binning, "the second, binning pass did not run"
    assert res.provenance.binning == res.provenance.blocks
    if not kernels:
        ((name, blocks),) = res.provenance.binning.items()
        on_gpu = res.config["backend"].startswith("torch:cuda")
        assert blocks == 9 and (name == "torch" or (on_gpu and name == "triton")), name
    assert res["precision_at_recall@0.5"] == pytest.approx(
        pair_reference(pos, neg, "precision_at_recall@0.5")
    )
    assert res["recall_at_precision@0.9"] == pytest.approx(
        pair_reference(pos, neg, "recall_at_precision@0.9")
    )


def test_explicit_relevance_matches_labels():
    rng = np.random.default_rng(1)
    Q = rng.normal(size=(20, 5)).astype(np.float32)
    G = rng.normal(size=(50, 5)).astype(np.float32)
    ql, gl = rng.integers(0, 4, 20), rng.integers(0, 4, 50)
    rel = [np.flatnonzero(gl == ql[i]).tolist() for i in range(20)]
    metrics = ["map", "hit_rate@3", "map@R"]
    a = rc.evaluate(Q, G, query_labels=ql, gallery_labels=gl, metrics=metrics)
    b = rc.evaluate(Q, G, relevance=rel, metrics=metrics)
    import scipy.sparse as sp

    c = rc.evaluate(Q, G, relevance=sp.csr_matrix(ql[:, None] == gl[None, :]), metrics=metrics)
    for name in metrics:
        assert a[name] == b[name] == c[name]


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_permuting_queries_and_gallery_changes_nothing(seed):
    """The harness's permutations: queries (each value moves with its query) and gallery
    (nothing changes), against the reference. Eight drawn problems; 30 in the sweep."""
    check_permutations(seed)


@pytest.mark.exhaustive
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_permuting_queries_and_gallery_changes_nothing_sweep(seed):
    check_permutations(seed)


def check_permutations(seed):
    rng = np.random.default_rng(seed)
    Q = rng.integers(-2, 3, size=(15, 3)).astype(np.float32)
    G = rng.integers(-2, 3, size=(25, 3)).astype(np.float32)
    ql, gl = rng.integers(0, 3, 15), rng.integers(0, 3, 25)
    if not (ql[:, None] == gl[None, :]).any():
        return
    p = Problem(Q, G, ql, gl, similarity="dot", exact=True)
    check_rank(p, ["map", "map@R", "hit_rate@2", "mrr", "r_precision"], paths=(), seed=seed)
    check_pairs(p, ["recall_at_precision@0.5"], paths=(), seed=seed, policies=())


def test_empty_query_policies():
    rng = np.random.default_rng(0)
    Q = rng.normal(size=(6, 4)).astype(np.float32)
    G = rng.normal(size=(10, 4)).astype(np.float32)
    ql = np.array([0, 1, 2, 9, 9, 0])  # label 9 is not in the gallery
    gl = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    skip = rc.evaluate(Q, G, query_labels=ql, gallery_labels=gl, metrics=["map", "medr"])
    assert skip.n_skipped == 2 and skip.n_used == 4
    assert list(skip.skipped_queries) == [3, 4]
    assert np.isnan(skip.per_query["map"][[3, 4]]).all()
    zero = rc.evaluate(
        Q, G, query_labels=ql, gallery_labels=gl, metrics=["map", "meanr"], empty_queries="zero"
    )
    assert zero.n_skipped == 0
    assert zero["map"] == pytest.approx(skip.per_query["map"][[0, 1, 2, 5]].sum() / 6)
    assert zero.per_query["meanr"][3] == 11  # behind the whole gallery
    with pytest.raises(rc.EmptyQueriesError, match="2 of 6 queries") as info:
        rc.evaluate(
            Q, G, query_labels=ql, gallery_labels=gl, metrics=["map"], empty_queries="error"
        )
    assert list(info.value.indices) == [3, 4]


def test_numpy_and_torch_backends_agree():
    """Torch inputs run on torch CPU (numpy inputs with device="torch-cpu" too), and the
    numpy and torch paths equal the reference (tests/metrics/test_every_metric.py runs every
    path on every registered metric)."""
    torch = pytest.importorskip("torch")
    p = gaussian(5, n_q=80, d=6, n_labels=5, loo=True)
    metrics = ["map", "map@R", "hit_rate@1", "recall_at_precision@0.5", "pair_f1@t=0.2"]
    paths = [PATHS_BY_NAME["numpy"], PATHS_BY_NAME["torch-scored"]]
    check_rank(p, metrics[:3], paths=paths, permute=False)
    check_pairs(p, metrics[3:], paths=paths, permute=False, policies=())
    X, y = torch.from_numpy(p.Q), torch.from_numpy(p.q_labels)
    b = rc.evaluate(p.Q, query_labels=p.q_labels, metrics=metrics, device="torch-cpu")
    c = rc.evaluate(X, query_labels=y, metrics=metrics)
    assert b.config["backend"] == "torch:cpu"
    if not torch.cuda.is_available():
        assert c.config["backend"] == "torch:cpu"
    for name in metrics:
        assert c[name] == b[name], name


@pytest.mark.cuda
def test_cuda_matches_cpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    rng = np.random.default_rng(11)
    X = rng.normal(size=(3000, 32)).astype(np.float32)
    y = rng.integers(0, 300, 3000)
    metrics = [
        "map",
        "map@R",
        "hit_rate@1",
        "recall@5",
        "mrr",
        "recall_at_precision@0.5",
        "precision_at_recall@0.5",
        "pair_f1@t=0.3",
    ]
    cpu = rc.evaluate(X, query_labels=y, metrics=metrics, device="cpu")
    gpu = rc.evaluate(torch.from_numpy(X).cuda(), query_labels=y, metrics=metrics, device="cuda")
    assert gpu.config["backend"].startswith("torch:cuda")
    for name in metrics:
        assert gpu[name] == pytest.approx(cpu[name], abs=1e-6), name


def test_neg_l2_does_not_depend_on_where_the_data_sit():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(40), 5)
    X = rng.normal(size=(40, 16))[y] + rng.normal(size=(200, 16))
    base = rc.evaluate(
        X.astype(np.float32), query_labels=y, metrics=["map", "hit_rate@1"], similarity="neg_l2"
    )
    for off in (100.0, 1000.0):
        moved = rc.evaluate(
            (X + off).astype(np.float32),
            query_labels=y,
            metrics=["map", "hit_rate@1"],
            similarity="neg_l2",
        )
        assert moved["map"] == pytest.approx(base["map"], abs=1e-9)


def test_parallel_float64_rows_tie_under_cosine():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(1, 8))
    X = rng.uniform(0.5, 10, (200, 1)) * v  # one direction, many lengths: a constant scorer
    y = np.repeat(np.arange(40), 5)
    same = rc.evaluate(np.repeat(v, 200, 0), query_labels=y, metrics=["map"])["map"]
    assert rc.evaluate(X, query_labels=y, metrics=["map"])["map"] == same
