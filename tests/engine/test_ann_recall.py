"""``ann_recall``: an approximate index measured against exact search.

The oracle is dense brute force in integers: integer-valued embeddings under
``similarity="dot"`` (or ``"hamming"``) have integer scores, computed exactly in int64
here and exactly in float32 by the engine, so ties with the K-th score are decided
without rounding. The data are tie-heavy (entries in {-1, 0, 1}, small d), and the
tests check that neighbours tied with the K-th score really occur.
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.engine._ann import ann_recall

faiss = pytest.importorskip("faiss")

DEVICES = ["numpy", "torch-cpu"]


# ----------------------------------------------------------------------------- oracle
def _scores(Q, G, own=None):
    """Exact int64 scores as float64 (exact below 2**53), self pairs -inf."""
    S = (np.asarray(Q, np.int64) @ np.asarray(G, np.int64).T).astype(np.float64)
    if own is not None:
        S[own] = -np.inf
    return S


def _own(n_q, n_g, q_ids=None, g_ids=None, loo=False):
    if loo and q_ids is None:
        return np.eye(n_q, dtype=bool)
    if q_ids is None:
        return None
    g_ids = q_ids if loo else g_ids
    return np.asarray(q_ids)[:, None] == np.asarray(g_ids)[None, :]


def _kth(S, k):
    return -np.sort(-S, axis=1)[:, k - 1]


def reference(S, nb, k):
    """ann_recall@k per query from the dense score matrix ``S`` (self pairs -inf)."""
    nb = np.asarray(nb)[:, :k]
    kth = _kth(S, k)
    hit = np.zeros(nb.shape, bool)
    ok = nb >= 0
    rows = np.nonzero(ok)[0]
    hit[ok] = S[rows, nb[ok]] >= kth[rows]
    return hit.sum(axis=1) / k


def _ints(rng, n, d, lo=-1, hi=1):
    return rng.integers(lo, hi + 1, size=(n, d)).astype(np.float32)


def _exact_topk(S, k, rng):
    """Per row K items with score >= the K-th score, the tied ones drawn at random."""
    kth = _kth(S, k)
    out = np.empty((S.shape[0], k), np.int64)
    for i in range(S.shape[0]):
        above = np.flatnonzero(S[i] > kth[i])
        tied = rng.permutation(np.flatnonzero(S[i] == kth[i]))
        out[i] = rng.permutation(np.concatenate([above, tied[: k - above.size]]))
    return out


def _random_neighbors(rng, n_q, n_g, cols):
    return np.stack([rng.choice(n_g, size=cols, replace=False) for _ in range(n_q)])


def _value(res, k=10):
    return res[f"ann_recall@{k}"], res.per_query[f"ann_recall@{k}"]


# ----------------------------------------------------------------------------- exactness vs the oracle
@pytest.mark.parametrize("device", DEVICES)
def test_equals_reference_on_tie_heavy_integers(device):
    rng = np.random.default_rng(0)
    Q, G = _ints(rng, 60, 5), _ints(rng, 400, 5)
    S, k = _scores(Q, G), 10
    kth = _kth(S, k)
    assert ((S >= kth[:, None]).sum(axis=1) > k).mean() > 0.9  # the data are tie-heavy
    exact = _exact_topk(S, k, rng)
    mixed = exact.copy()
    # replace a few per row with random items: some tie with the K-th, some fall below
    for i in range(mixed.shape[0]):
        pool = np.setdiff1d(np.arange(400), mixed[i])
        mixed[i, rng.choice(k, 4, replace=False)] = rng.choice(pool, 4, replace=False)
    mixed[::7, -1] = -1
    for nb in (exact, mixed, _random_neighbors(rng, 60, 400, k)):
        value, per_query = _value(ann_recall(Q, G, nb, k=k, similarity="dot", device=device))
        np.testing.assert_array_equal(per_query, reference(S, nb, k))
        assert value == pytest.approx(reference(S, nb, k).mean(), abs=1e-15)
    assert _value(ann_recall(Q, G, exact, k=k, similarity="dot", device=device))[0] == 1.0
    v_mixed = _value(ann_recall(Q, G, mixed, k=k, similarity="dot", device=device))[0]
    assert 0.5 < v_mixed < 1.0


@pytest.mark.parametrize("device", DEVICES)
def test_a_neighbour_tied_with_the_kth_score_counts_and_one_below_does_not(device):
    Q = np.array([[1.0, 0.0]], np.float32)
    G = np.array(
        [[5, 0], [4, 1], [4, 2], [4, 3], [3, 0], [-1, 0]], np.float32
    )  # scores 5 4 4 4 3 -1

    def run(nb, k=2):
        return _value(ann_recall(Q, G, np.array([nb]), k=k, similarity="dot", device=device), k)[0]

    assert run([0, 1]) == 1.0
    assert run([0, 3]) == 1.0  # item 3 ties with the 2nd score (4)
    assert run([3, 2]) == 1.0  # both tied: the exact top 2 is any two of {0} + {1, 2, 3}
    assert run([0, 4]) == 0.5  # 3 < 4
    assert run([5, 4]) == 0.0
    assert run([4, 3, 2, 1], k=4) == 0.75  # the 4th score is 4: item 4 (3) is a miss
    assert run([4, 3, 2, 1, 0], k=5) == 1.0


@pytest.mark.parametrize("device", DEVICES)
def test_missing_results_count_as_misses_and_are_counted(device):
    rng = np.random.default_rng(1)
    Q, G = _ints(rng, 20, 4), _ints(rng, 100, 4)
    S, k = _scores(Q, G), 5
    nb = _exact_topk(S, k, rng)
    nb[:, 3:] = -1
    nb[0, :] = -1
    res = ann_recall(Q, G, nb, k=k, similarity="dot", device=device)
    value, per_query = _value(res, k)
    assert per_query[0] == 0.0 and (per_query[1:] == 0.6).all()
    assert res.config["n_missing"] == 2 * 19 + 5
    assert value == pytest.approx((19 * 0.6) / 20)


def test_random_neighbours_give_the_expected_low_value():
    """A uniform random K-subset hits each query's tie-extended exact top K (T_i items)
    K * T_i / n_g times on average: the value estimates mean(T_i) / n_g."""
    rng = np.random.default_rng(2)
    Q, G = _ints(rng, 400, 12, -4, 4), _ints(rng, 1000, 12, -4, 4)
    S, k = _scores(Q, G), 10
    T = (S >= _kth(S, k)[:, None]).sum(axis=1)
    nb = _random_neighbors(rng, 400, 1000, k)
    value, per_query = _value(ann_recall(Q, G, nb, k=k, similarity="dot", device="numpy"))
    np.testing.assert_array_equal(per_query, reference(S, nb, k))
    expected = (T / 1000).mean()
    sd = np.sqrt((T / 1000 * (1 - T / 1000) / k).sum()) / 400  # binomial bound on the mean's spread
    assert abs(value - expected) < 5 * sd
    assert value < 0.05


def test_more_columns_than_k_use_the_first_k_only():
    rng = np.random.default_rng(3)
    Q, G = _ints(rng, 15, 4), _ints(rng, 80, 4)
    S = _scores(Q, G)
    nb = np.concatenate(
        [_exact_topk(S, 5, rng), np.full((15, 3), 10**9)], axis=1
    )  # junk past k is not read
    res = ann_recall(Q, G, nb, k=5, similarity="dot", device="numpy")
    assert res["ann_recall@5"] == 1.0
    np.testing.assert_array_equal(res.per_query["ann_recall@5"], reference(S, nb, 5))


# ----------------------------------------------------------------------------- self exclusion
@pytest.mark.parametrize("device", DEVICES)
def test_leave_one_out_excludes_the_query_and_a_self_neighbour_is_a_miss(device):
    rng = np.random.default_rng(4)
    X = _ints(rng, 150, 4)
    own = _own(150, 150, loo=True)
    S, k = _scores(X, X, own), 8
    exact = _exact_topk(S, k, rng)
    assert _value(ann_recall(X, None, exact, k=k, similarity="dot", device=device), k)[0] == 1.0
    with_self = exact.copy()
    with_self[:, 0] = np.arange(150)  # the query itself in place of its best neighbour
    value, per_query = _value(
        ann_recall(X, None, with_self, k=k, similarity="dot", device=device), k
    )
    np.testing.assert_array_equal(per_query, reference(S, with_self, k))
    assert value == pytest.approx(1 - 1 / k)
    # the same with an exact faiss search of k + 1 that keeps the query itself
    index = faiss.IndexFlatIP(4)
    index.add(X)
    _, raw = index.search(X, k)
    np.testing.assert_array_equal(
        _value(ann_recall(X, None, raw, k=k, similarity="dot", device=device), k)[1],
        reference(S, raw, k),
    )


@pytest.mark.parametrize("device", DEVICES)
def test_ids_exclude_self_matches_as_evaluate_does(device):
    rng = np.random.default_rng(5)
    Q, G = _ints(rng, 40, 4), _ints(rng, 120, 4)
    q_ids = rng.integers(0, 60, 40)
    g_ids = np.arange(120) % 60  # each id twice in the gallery
    own = _own(40, 120, q_ids, g_ids)
    S, k = _scores(Q, G, own), 6
    nb = _exact_topk(_scores(Q, G), k, rng)  # an index that did not exclude self matches
    res = ann_recall(
        Q, G, nb, k=k, similarity="dot", query_ids=q_ids, gallery_ids=g_ids, device=device
    )
    np.testing.assert_array_equal(res.per_query["ann_recall@6"], reference(S, nb, k))
    np.testing.assert_array_equal(res.n_candidates, 120 - own.sum(axis=1))
    assert res["ann_recall@6"] < 1.0
    assert res.query_ids.tolist() == q_ids.tolist()
    # leave-one-out with ids: every query with the same id is excluded
    ids = np.arange(120) // 3
    own = _own(120, 120, ids, loo=True)
    S = _scores(G, G, own)
    nb = _random_neighbors(rng, 120, 120, k)
    res = ann_recall(G, None, nb, k=k, similarity="dot", query_ids=ids, device=device)
    np.testing.assert_array_equal(res.per_query["ann_recall@6"], reference(S, nb, k))


# ----------------------------------------------------------------------------- faiss
@pytest.mark.parametrize("similarity", ["dot", "cosine"])
def test_an_exact_faiss_index_scores_one_on_continuous_data(similarity):
    """IndexFlatIP is exact; continuous data have no ties at the K-th score (were the
    K-th and (K+1)-th scores within float32 rounding of each other, a flat index could
    return the other one: it does not happen on these data)."""
    rng = np.random.default_rng(6)
    Q = rng.normal(size=(200, 32)).astype(np.float32)
    G = rng.normal(size=(3000, 32)).astype(np.float32)
    if similarity == "cosine":
        Qn, Gn = (
            Q / np.linalg.norm(Q, axis=1, keepdims=True),
            G / np.linalg.norm(G, axis=1, keepdims=True),
        )
    else:
        Qn, Gn = Q, G
    index = faiss.IndexFlatIP(32)
    index.add(Gn)
    _, nb = index.search(Qn, 10)
    for device in DEVICES:
        res = ann_recall(Q, G, nb, k=10, similarity=similarity, device=device)
        assert res["ann_recall@10"] == 1.0
        rc.assert_metric(res, "ann_recall@10", at_least=0.95)
    shifted = nb.copy()
    shifted[:, -1] = faiss_search(index, Qn, 11)[:, 10]  # the 11th instead of the 10th: a miss each
    assert ann_recall(Q, G, shifted, k=10, similarity=similarity, device="numpy")[
        "ann_recall@10"
    ] == pytest.approx(0.9)


def faiss_search(index, X, k):
    return index.search(X, k)[1]


def _approximate(kind, G):
    d = G.shape[1]
    if kind == "ivf":
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, 32, faiss.METRIC_INNER_PRODUCT)
        index.train(G)
        index.nprobe = 1
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(d, 4, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = 10
    else:
        index = faiss.IndexPQ(d, 4, 4, faiss.METRIC_INNER_PRODUCT)
        index.train(G)
    index.add(G)
    return index


@pytest.mark.parametrize("kind", ["ivf", "hnsw", "pq"])
def test_approximate_faiss_indexes_score_below_one_and_equal_the_reference(kind):
    faiss.omp_set_num_threads(1)
    rng = np.random.default_rng(7)
    Q, G = _ints(rng, 200, 16, -3, 3), _ints(rng, 2000, 16, -3, 3)
    S, k = _scores(Q, G), 10
    _, nb = _approximate(kind, G).search(Q, k)
    expected = reference(S, nb, k)
    for device in DEVICES:
        res = ann_recall(Q, G, nb, k=k, similarity="dot", device=device)
        np.testing.assert_array_equal(res.per_query["ann_recall@10"], expected)
        assert res.config["n_missing"] == int((nb < 0).sum())
    assert expected.mean() < 1.0
    if kind != "hnsw":
        assert expected.mean() < 0.95


# ----------------------------------------------------------------------------- backends and blocks
def test_backends_and_block_shapes_give_identical_values():
    rng = np.random.default_rng(8)
    Q, G = _ints(rng, 70, 6), _ints(rng, 5000, 6)  # 5000 columns: two chunks under the default plan
    S, k = _scores(Q, G), 20
    nb = _exact_topk(S, k, rng)
    for i in range(
        70
    ):  # every other neighbour a random item: some tie with the K-th score, most miss
        nb[i, 1::2] = rng.choice(np.setdiff1d(np.arange(5000), nb[i]), k // 2, replace=False)
    nb[rng.random((70, k)) < 0.2] = -1
    expected = reference(S, nb, k)
    runs = []
    for device in DEVICES:
        for opts in ({}, {"max_memory": 2**20}, {"_tile": (3, 16)}, {"_tile": (70, 5000)}):
            res = ann_recall(Q, G, nb, k=k, similarity="dot", device=device, **opts)
            runs.append((device, opts, res.config["block"], res.config["chunk"]))
            np.testing.assert_array_equal(
                res.per_query["ann_recall@20"], expected, err_msg=str(runs[-1])
            )
    assert {r[3] for r in runs} >= {16, 2512, 5008}  # chunks narrower than K, two chunks, one
    assert min(r[2] for r in runs if r[1].get("max_memory")) < 70  # the budget cut the block


def test_backends_agree_on_float_data():
    rng = np.random.default_rng(9)
    Q, G = (
        rng.normal(size=(50, 16)).astype(np.float32),
        rng.normal(size=(900, 16)).astype(np.float32),
    )
    nb = _approximate("ivf", G).search(Q, 10)[1]
    values = [
        ann_recall(Q, G, nb, similarity=s, device=dev, **o).per_query["ann_recall@10"]
        for s in ("dot", "cosine", "neg_l2")
        for dev in DEVICES
        for o in ({}, {"_tile": (7, 32)})
    ]
    for group in range(0, 12, 4):
        for v in values[group + 1 : group + 4]:
            np.testing.assert_array_equal(v, values[group])


def test_hamming_codes_against_brute_force():
    rng = np.random.default_rng(10)
    Q, G = rng.integers(0, 2, (30, 12)), rng.integers(0, 2, (200, 12))
    S = -(Q[:, None, :] != G[None, :, :]).sum(axis=2).astype(np.float64)
    nb = _random_neighbors(rng, 30, 200, 10)
    nb[:10] = _exact_topk(S, 10, rng)[:10]
    for device in DEVICES:
        res = ann_recall(Q, G, nb, similarity="hamming", device=device)
        np.testing.assert_array_equal(res.per_query["ann_recall@10"], reference(S, nb, 10))


def test_torch_inputs():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    Q, G = _ints(rng, 10, 4), _ints(rng, 50, 4)
    nb = _random_neighbors(rng, 10, 50, 5)
    a = ann_recall(
        torch.from_numpy(Q), torch.from_numpy(G), torch.from_numpy(nb), k=5, similarity="dot"
    )
    np.testing.assert_array_equal(a.per_query["ann_recall@5"], reference(_scores(Q, G), nb, 5))


# ----------------------------------------------------------------------------- the result and the gate
def test_result_fields_and_the_gate():
    rng = np.random.default_rng(12)
    Q, G = _ints(rng, 100, 8, -3, 3), _ints(rng, 1500, 8, -3, 3)
    S = _scores(Q, G)
    exact = _exact_topk(S, 10, rng)
    good = ann_recall(Q, G, exact, similarity="dot", device="numpy", confidence=0.9)
    assert list(good) == ["ann_recall@10"] and good["ann_recall@10"] == 1.0
    assert (
        good.config["source"] == "ann"
        and good.config["k"] == 10
        and good.config["confidence"] == 0.9
    )
    assert good.config["n_missing"] == 0 and good.config["n_gallery"] == 1500
    assert good.config["leave_one_out"] is False and good.config["backend"] == "numpy"
    assert (good.n_relevant == 10).all() and (good.n_candidates == 1500).all()
    assert good.n_queries == 100 and good.n_skipped == 0 and good.query_ids is None
    rc.assert_metric(good, "ann_recall@10", at_least=0.95)
    rc.assert_metric(good, "ann_recall@10", at_least=0.95, on="interval")
    bad_nb = exact.copy()
    for i in range(100):  # 3 of 10 random: about 0.7
        bad_nb[i, 7:] = rng.choice(np.setdiff1d(np.arange(1500), exact[i]), 3, replace=False)
    bad = ann_recall(Q, G, bad_nb, similarity="dot", device="numpy")
    assert 0.6 < bad["ann_recall@10"] < 0.95
    with pytest.raises(AssertionError, match="ann_recall@10"):
        rc.assert_metric(bad, "ann_recall@10", at_least=0.95)
    m = bad.measure("ann_recall@10")
    assert m.value == bad["ann_recall@10"]
    assert (
        "ann_recall@10" in repr(bad)
        and bad.to_dict()["metrics"]["ann_recall@10"] == bad["ann_recall@10"]
    )


def test_evaluate_refuses_ann_recall_and_points_to_the_function():
    X = np.eye(4, dtype=np.float32)
    with pytest.raises(
        rc.MetricNameError,
        match=r"retrieval_checks\.ann_recall\(queries, gallery, neighbors, k=10\)",
    ):
        rc.evaluate(X, query_labels=[0, 0, 1, 1], metrics=["ann_recall@10"])


# ----------------------------------------------------------------------------- fail closed
RNG = np.random.default_rng(13)
QV, GV = _ints(RNG, 6, 3), _ints(RNG, 20, 3)
NB = _random_neighbors(RNG, 6, 20, 5)


def _bad(match, neighbors=NB, queries=QV, gallery=GV, **kw):
    kw.setdefault("k", 5)
    kw.setdefault("similarity", "dot")
    with pytest.raises(rc.InputError, match=match):
        ann_recall(queries, gallery, neighbors, **kw)


def test_neighbors_shape_and_dtype_are_checked():
    _bad(r"neighbors has shape \(30,\).*2-D", NB.reshape(-1))
    _bad(r"neighbors has shape \(6, 5, 1\).*2-D", NB[:, :, None])
    _bad(r"neighbors has dtype float64.*integer", NB.astype(np.float64))
    _bad(r"neighbors has dtype bool.*integer", NB > 3)
    _bad(r"neighbors has dtype <U", NB.astype(str))
    _bad(r"neighbors has 5 rows but there are 6 queries", NB[:5])
    _bad(r"k=5 but neighbors has 4 columns.*k <= 4", NB[:, :4])


def test_neighbor_values_are_checked():
    for bad_value, dtype in (
        (20, np.int64),
        (-2, np.int64),
        (2**40, np.int64),
        (2**63, np.uint64),
        (200, np.uint8),
    ):
        nb = NB.astype(dtype)
        nb[2, 1] = bad_value
        _bad(r"neighbors holds indices outside \[0, 20\) other than -1.*queries 2\b", nb)
    dup = NB.copy()
    dup[4, 3] = dup[4, 0]
    _bad(r"neighbors repeats a gallery index within a row \(queries 4\)", dup)
    ok = NB.copy()
    ok[1, 2:] = -1  # several -1 in a row are not repeats
    assert ann_recall(QV, GV, ok, k=5, similarity="dot").config["n_missing"] == 3
    ok = NB.astype(np.uint8)  # any integer dtype
    ann_recall(QV, GV, ok, k=5, similarity="dot")


def test_k_is_checked():
    for k in (0, -1, True, 2.0, "5", None):
        _bad(r"k=.*positive integer", k=k)
    _bad(
        r"ann_recall@6: k=6 is larger than the gallery a query ranks \(5 items",
        np.tile(np.arange(6), (6, 1)),
        gallery=None,
        k=6,
    )
    _bad(
        r"k=21 is larger than the gallery a query ranks \(20 items",
        np.tile(np.arange(-1, 20), (6, 1)),
        k=21,
    )


def test_other_inputs_are_checked_as_evaluate_checks_them():
    _bad(r"dimension", gallery=_ints(RNG, 20, 4))
    _bad(r"similarity", similarity="cos")
    _bad(r"confidence", confidence=1.5)
    _bad(r"progress=.*True, False or None", progress="yes")
    _bad(r"device", device="tpu")
    _bad(r"gallery_ids is missing", query_ids=np.arange(6))
    _bad(
        r"gallery_ids was given without a gallery",
        gallery=None,
        gallery_ids=np.arange(6),
        neighbors=_random_neighbors(RNG, 6, 6, 5),
        k=3,
    )
    _bad(r"queries", queries=np.full((6, 3), np.nan, np.float32))
    with pytest.raises(rc.InputError, match="no gallery item left after self-exclusion"):
        ann_recall(
            QV,
            GV[:1],
            np.zeros((6, 1), np.int64),
            k=1,
            similarity="dot",
            query_ids=np.zeros(6),
            gallery_ids=np.zeros(1),
        )
