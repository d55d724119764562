"""Grouped Recall@K on the fused Triton kernel (engine/gpu/_triton_grouped.py), run in
Triton's interpreter on the CPU.

References: the numpy path of engine/_grouped.py (``backend=None``: padded batched
GEMMs), compared exactly (group values, per-query hits, tie-policy values, skipped and
dropped counts), a dense brute force per group written here, and, for the screened
(bf16 / TF32) count sweep on near-tie data, the exact fp32 kernel itself. The paths the
record names (``record=``, what ``result.provenance.grouped`` shows) prove the kernel
scored every partition; the kernel's tile counts prove both screening branches ran. CUDA-only
checks skip without a GPU. ``TRITON_INTERPRET=1`` is set before
triton is first imported.

Cost (28 November 2026, one process at a load of ~14 on the 2-core machine): about 15
CPU-s for the default tests, none over 1.5 s; ``--rc-exhaustive`` adds the sweeps.
"""

from __future__ import annotations

import os
import sys
import warnings
import zlib

import numpy as np
import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from retrieval_checks.engine import _grouped  # noqa: E402
from retrieval_checks.engine._backend import (
    Backend,  # noqa: E402
    cosine_epilogue,  # noqa: E402
)
from retrieval_checks.engine._fused_tasks import grouped_kernel  # noqa: E402
from retrieval_checks.engine.counting import _kernels  # noqa: E402
from retrieval_checks.engine.gpu import _triton, _triton_grouped  # noqa: E402
from retrieval_checks.errors import BackendError, EmptyQueriesError  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1" or (
    "retrieval_checks.engine.gpu._triton_kernels" in sys.modules and not _triton._interpreting()
):
    pytest.skip(
        "TRITON_INTERPRET is not 1 in this process: the kernel would need a GPU",
        allow_module_level=True,
    )

from interpreter_check import import_probe, interpreter_blocker  # noqa: E402

if interpreter_blocker():  # an interpreter that cannot run any kernel (triton 3.6 + numpy 2.4)
    pytest.skip(interpreter_blocker(), allow_module_level=True)

CUDA = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU (the kernel compiles for it)"
)
CPU = Backend("torch", torch.device("cpu"))
KS = [1, 3]


@pytest.fixture
def spy(monkeypatch):
    """Counts the kernel's launches (work items per launch)."""
    calls = []
    real = _triton_grouped._launch

    def wrapped(n_work, *args, **meta):
        calls.append(n_work)
        return real(n_work, *args, **meta)

    monkeypatch.setattr(_triton_grouped, "_launch", wrapped)
    return calls


def _emb(kind, rng, n, d):
    if kind == "float":
        return rng.standard_normal((n, d)).astype(np.float32)
    X = rng.integers(-2, 3, size=(n, d)).astype(np.float32)  # tie-heavy
    X[1::4] = X[0::4][: X[1::4].shape[0]]  # exact duplicates (often of other labels)
    return X


def _factor(X, similarity):
    """The row factors the engine prepares (None for dot)."""
    sq = (X.astype(np.float64) ** 2).sum(1)
    if similarity == "neg_l2":
        return sq.astype(np.float32)
    if similarity == "cosine":
        return sq.astype(
            np.float32
        )  # squared norms, as Backend.cosine_rows_into gives integer rows
    return None


def _labels(rng, n, n_labels=13):
    """Uneven label sizes; label 0 a singleton (no relevant item in leave-one-out)."""
    y = rng.choice(
        np.arange(1, n_labels),
        size=n,
        p=np.linspace(1, 3, n_labels - 1) / np.linspace(1, 3, n_labels - 1).sum(),
    )
    y[0] = 0
    return y


def _grouped_values(
    X,
    y,
    *,
    similarity,
    backend,
    G=None,
    gy=None,
    qid=None,
    gid=None,
    ties="average",
    empty_queries="skip",
    repeats=2,
    max_memory=2**30,
    group_size=3,
    record=None,
):
    loo = G is None
    return _grouped.grouped_recall_values(
        X,
        y,
        G,
        gy,
        q_ids=np.arange(len(y)) if qid is None and loo else qid,
        g_ids=gid,
        ks=KS,
        group_size=group_size,
        seed=7,
        repeats=repeats,
        confidence=0.9,
        ties=ties,
        similarity=similarity,
        label_values=np.arange(100),
        max_memory=max_memory,
        empty_queries=empty_queries,
        q_factor=_factor(X, similarity),
        g_factor=None if loo else _factor(G, similarity),
        backend=backend,
        fused=None if backend is None else grouped_kernel(backend, similarity),  # as _stages
        record=record,
    )


def _same(a, b):
    for k in KS:
        x, y = a[k], b[k]
        np.testing.assert_array_equal(x.per_query, y.per_query, err_msg=f"per_query@{k}")
        np.testing.assert_array_equal(x.group_values, y.group_values, err_msg=f"group_values@{k}")
        np.testing.assert_array_equal(x.group_of_query, y.group_of_query)
        assert (x.value, x.low, x.high, x.tie_values) == (y.value, y.low, y.high, y.tie_values)
        assert (x.n_queries_used, x.n_queries_skipped, x.n_queries_dropped) == (
            y.n_queries_used,
            y.n_queries_skipped,
            y.n_queries_dropped,
        )


@pytest.mark.default_cases(
    dict(similarity="cosine", kind="float"),
    dict(similarity="dot", kind="int"),
    dict(similarity="neg_l2", kind="float"),
    dict(similarity="neg_l2", kind="int"),
)
@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
@pytest.mark.parametrize("kind", ["int", "float"])
def test_leave_one_out_equals_numpy_path(similarity, kind):
    rng = np.random.default_rng(zlib.crc32(f"{similarity}-{kind}".encode()))
    n = 157  # groups of uneven sizes, none a multiple of the tiles
    X, y = _emb(kind, rng, n, 19), _labels(rng, n)
    ref = _grouped_values(X, y, similarity=similarity, backend=None)
    record = {}
    with _triton.on_cpu():
        got = _grouped_values(X, y, similarity=similarity, backend=CPU, record=record)
    assert record == {"triton-grouped": 2}, "the fused kernel did not score both partitions"
    _same(got, ref)
    assert (
        ref[1].n_queries_skipped >= 1 and ref[1].n_queries_dropped >= 1
    )  # the cases are exercised
    if kind == "int":  # ties of the best relevant score with negatives: the policies must differ
        assert got[1].tie_values["pessimistic"] < got[1].tie_values["optimistic"]


def _clustered(rng, n, d, n_labels=13):
    """Labels far apart (the screen decides most tiles) and, for 12 items, a negative
    one ulp away from them in every coordinate, in the same group (near ties the screen
    cannot decide)."""
    y = _labels(rng, n, n_labels)
    X = (rng.standard_normal((n_labels, d)) * 3)[y] + 0.3 * rng.standard_normal((n, d))
    X = X.astype(np.float32)
    groups, _ = _grouped.label_partition(y, 3, 7)
    group_of = {int(lab): g for g, labs in enumerate(groups) for lab in labs}
    done = 0
    for i in range(n):
        j = next(
            (
                j
                for j in range(n)
                if y[j] != y[i]
                and group_of.get(int(y[j]), -1) == group_of.get(int(y[i]), -2)
                and j > i
            ),
            None,
        )
        if j is not None and done < 12:
            X[j] = np.nextafter(X[i], np.float32(np.inf) if done % 2 else np.float32(-np.inf))
            done += 1
    return X, y


@pytest.mark.default_cases(
    dict(similarity="cosine", screen="bf16"),
    dict(similarity="dot", screen="tf32"),
    dict(similarity="neg_l2", screen="bf16"),
)
@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
@pytest.mark.parametrize("screen", ["bf16", "tf32"])
def test_screened_counts_equal_exact_fp32_kernel_on_near_ties(similarity, screen):
    rng = np.random.default_rng(zlib.crc32(f"screen-{similarity}".encode()))
    X, y = _clustered(rng, 150, 16)
    record = {}
    with _triton.on_cpu(screen=0):
        exact = _grouped_values(X, y, similarity=similarity, backend=CPU, repeats=1, record=record)
        assert _triton_grouped.STATS["screened"] == 0 and _triton_grouped.STATS["exact"] > 0
    with _triton.on_cpu(screen=screen):
        got = _grouped_values(X, y, similarity=similarity, backend=CPU, repeats=1, record=record)
        stats = dict(_triton_grouped.STATS)
    assert record == {"triton-grouped": 2}  # both calls on the kernel
    assert stats["screened"] > 0 and stats["exact"] > 0, stats  # both branches ran
    _same(got, exact)
    _same(got, _grouped_values(X, y, similarity=similarity, backend=None, repeats=1))


@pytest.mark.parametrize("tile", [(32, 64, 32), (16, 16, 16)])
def test_other_tile_shapes_equal_numpy_path(tile, monkeypatch):
    monkeypatch.setattr(_triton, "TILE_INTERPRET", tile)  # (32, 64, 32): the GPU's tile
    rng = np.random.default_rng(31)
    X, y = _emb("int", rng, 170, 40), _labels(rng, 170, n_labels=10)  # d = 40: a partial k-block
    ref = _grouped_values(X, y, similarity="cosine", backend=None, repeats=1, group_size=2)
    record = {}
    with _triton.on_cpu():
        got = _grouped_values(
            X, y, similarity="cosine", backend=CPU, repeats=1, group_size=2, record=record
        )
    assert record == {"triton-grouped": 1}
    _same(got, ref)


def _brute_hits(X, y, groups, similarity, ties):
    """Per query: hit@k inside its group, from a dense per-group score matrix (float64
    products, exact on small integers; the epilogue in float32 as the engine does it)."""
    f = _factor(X, similarity)
    out = {k: np.full(len(y), np.nan) for k in KS}
    for labels in groups:
        members = np.flatnonzero(np.isin(y, labels))
        S = (X[members].astype(np.float64) @ X[members].T.astype(np.float64)).astype(np.float32)
        if similarity == "cosine":
            cosine_epilogue(S, f[members], f[members])
        elif similarity == "neg_l2":
            S = np.minimum((S * np.float32(2) - f[members][None, :]) - f[members][:, None], 0)
        for a, i in enumerate(members):
            others = np.arange(members.size) != a
            rel = others & (y[members] == y[i])
            if not rel.any():
                continue
            best = S[a][rel].max()
            neg = others & ~rel
            rank = (
                1
                + int((S[a][neg] > best).sum())
                + (int((S[a][neg] == best).sum()) if ties == "pessimistic" else 0)
            )
            for k in KS:
                out[k][i] = float(rank <= k)
    return out


@pytest.mark.parametrize(
    "similarity,ties", [("cosine", "pessimistic"), ("neg_l2", "optimistic"), ("dot", "pessimistic")]
)
def test_equals_dense_brute_force(similarity, ties):
    rng = np.random.default_rng(11)
    n = 120
    X, y = _emb("int", rng, n, 7), _labels(rng, n)
    record = {}
    with _triton.on_cpu():
        got = _grouped_values(
            X, y, similarity=similarity, backend=CPU, ties=ties, repeats=1, record=record
        )
    assert record == {"triton-grouped": 1}
    groups, _ = _grouped.label_partition(y, 3, 7)
    want = _brute_hits(X, y, groups, similarity, ties)
    for k in KS:
        np.testing.assert_array_equal(got[k].per_query, want[k], err_msg=f"hit@{k}")
    ref_means = [np.nanmean(want[1][np.isin(y, g)]) for g in groups]
    np.testing.assert_allclose(got[1].group_values[0], ref_means, rtol=1e-12)


@pytest.mark.default_cases(
    dict(similarity="cosine", empty_queries="skip"), dict(similarity="neg_l2", empty_queries="zero")
)
@pytest.mark.parametrize("similarity", ["cosine", "neg_l2"])
@pytest.mark.parametrize("empty_queries", ["skip", "zero"])
def test_separate_gallery_with_ids_equals_numpy_path(similarity, empty_queries):
    rng = np.random.default_rng(zlib.crc32(similarity.encode()))
    Q = _emb("int", rng, 61, 9)
    G = np.concatenate([Q[:25], _emb("int", rng, 90, 9)])  # queries found in the gallery, by id
    ql, gl = _labels(rng, 61), _labels(rng, 115)
    gl[:25] = ql[:25]
    gl[gl == 0] = 5  # label 0 has no gallery item: its query has nothing relevant
    qid = np.arange(61)
    gid = np.concatenate([np.arange(25), np.arange(25, 115) + 100])
    gid[40] = 3  # a second gallery item with query 3's id
    kw = dict(similarity=similarity, G=G, gy=gl, qid=qid, gid=gid, empty_queries=empty_queries)
    ref = _grouped_values(Q, ql, backend=None, **kw)
    record = {}
    with _triton.on_cpu():
        got = _grouped_values(Q, ql, backend=CPU, record=record, **kw)
    assert record == {"triton-grouped": 2}
    _same(got, ref)
    if empty_queries == "skip":
        assert ref[1].n_queries_skipped >= 1


def test_empty_queries_error_raised_on_the_fused_path(spy):
    rng = np.random.default_rng(3)
    X, y = _emb("int", rng, 90, 6), _labels(rng, 90)
    with (
        _triton.on_cpu(),
        pytest.raises(EmptyQueriesError, match="no relevant item inside their group"),
    ):
        _grouped_values(X, y, similarity="dot", backend=CPU, empty_queries="error", repeats=1)
    assert spy


@pytest.mark.parametrize("resident", [False, True])
def test_small_memory_budget_chunks_and_splits_groups(resident, spy, monkeypatch):
    rng = np.random.default_rng(23)
    n, d = 140, 8
    X, y = _emb("int", rng, n, d), _labels(rng, n, n_labels=9)
    if (
        resident
    ):  # the full copies take half the budget; chunks of about half the items gather on the device
        budget = 2 * _triton_grouped.resident_bytes(n, 0, d)
    else:  # a few dozen rows per chunk, gathered on the host: large groups split into row blocks
        budget = 40 * (4 * d + 48)
    paths = []
    real = _triton_grouped._Rows.__init__
    monkeypatch.setattr(
        _triton_grouped._Rows, "__init__", lambda self, *a: paths.append(a[3]) or real(self, *a)
    )
    ref = _grouped_values(X, y, similarity="neg_l2", backend=None, max_memory=budget, repeats=2)
    with _triton.on_cpu():
        got = _grouped_values(X, y, similarity="neg_l2", backend=CPU, max_memory=budget, repeats=2)
    assert paths == [resident] * 2
    assert len(spy) > (2 if resident else 6)
    _same(got, ref)


def test_chunk_plan_covers_every_query_once_within_budget():
    rng = np.random.default_rng(5)
    q_sizes, g_sizes = rng.integers(0, 300, 40), rng.integers(1, 200, 40)
    d, bm = 16, 16
    budget = 200 * (4 * d + 48)
    chunks = _triton_grouped.chunk_plan(q_sizes, g_sizes, d, budget, bm)
    covered = np.zeros(int(q_sizes.sum()), np.int64)
    starts = np.cumsum(q_sizes) - q_sizes
    for chunk in chunks:
        groups = sorted({g for g, _, _ in chunk})
        assert groups == list(range(groups[0], groups[-1] + 1)) and [u[0] for u in chunk] == sorted(
            u[0] for u in chunk
        )
        cost = sum(
            (hi - lo) * (4 * d + 48) + -(-(hi - lo) // bm) * 32 for g, lo, hi in chunk
        ) + sum(g_sizes[g] * (4 * d + 24) for g in groups)  # each group's gallery once
        assert cost <= budget or len(chunk) == 1  # only a lone (split) unit may exceed it
        for g, lo, hi in chunk:
            covered[starts[g] + lo : starts[g] + hi] += 1
    np.testing.assert_array_equal(covered, 1)


def test_work_items_cover_each_unit():
    q0, q1 = np.array([0, 5, 40]), np.array([5, 40, 41])
    g0, g1 = np.array([0, 10, 20]), np.array([10, 20, 90])
    wr0, wre, wg0, wge = _triton_grouped.work_items(q0, q1, g0, g1, 16)
    assert list(wr0) == [40, 0, 5, 21, 37]  # largest gallery first, then in order
    assert (
        list(wre) == [41, 5, 40, 40, 40]
        and list(wg0) == [20, 0, 10, 10, 10]
        and list(wge) == [90, 10, 20, 20, 20]
    )


def test_sweep_ranges_cover_the_rows_labels_on_the_tile_grid():
    gkey = np.repeat([1, 2, 3], [40, 40, 30])  # one unit's gallery, sorted by label
    qkey = np.array([2] * 16 + [3] * 4 + [9] * 3)  # label 9: no gallery item
    wr0, wre, wg0 = np.array([0, 16, 20]), np.array([20, 20, 23]), np.array([0, 0, 0])
    ws0, ws1 = _triton_grouped.sweep_ranges(wr0, wre, wg0, qkey, gkey, 16, 32)
    assert list(ws0) == [32, 64, 0] and list(ws1) == [80, 110, 0]


def test_kernel_failure_warns_and_numpy_path_serves(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("launch failed")

    monkeypatch.setattr(_triton_grouped, "_launch", broken)
    rng = np.random.default_rng(2)
    X, y = _emb("int", rng, 80, 5), _labels(rng, 80)
    ref = _grouped_values(X, y, similarity="cosine", backend=None, repeats=1)
    record = {}
    with (
        _triton.on_cpu(),
        pytest.warns(RuntimeWarning, match="grouped recall's fused Triton kernel is not used"),
    ):
        got = _grouped_values(X, y, similarity="cosine", backend=CPU, repeats=1, record=record)
    _same(got, ref)
    assert record == {f"grouped-{_kernels.ACCELERATOR}": 1}  # the host path that served


def test_unsupported_cases_stay_on_the_numpy_path(spy):
    assert not _triton_grouped.usable(
        CPU, "cosine"
    )  # outside on_cpu: CPU tensors keep the numpy path
    assert not _triton_grouped.usable(Backend("numpy"), "cosine")
    with _triton.on_cpu():
        assert _triton_grouped.usable(CPU, "neg_l2")
        assert not _triton_grouped.usable(CPU, "hamming")
        assert not _triton_grouped.usable(
            CPU, "dot", score_batch=lambda *a: None
        )  # the sharded hook
        assert not _triton_grouped.usable(None, "dot")
        rng = np.random.default_rng(4)
        codes = rng.integers(0, 2**63, size=(60, 2), dtype=np.uint64)
        y = _labels(rng, 60, n_labels=9)
        got = _grouped.grouped_recall_values(
            codes,
            y,
            None,
            None,
            q_ids=np.arange(60),
            g_ids=None,
            ks=[1],
            group_size=2,
            seed=1,
            repeats=1,
            confidence=0.9,
            ties="pessimistic",
            similarity="hamming",
            label_values=np.arange(9),
            max_memory=2**26,
            backend=CPU,
            fused=grouped_kernel(CPU, "hamming"),
        )
    assert not spy and np.isfinite(got[1].value)


def test_self_check_passes_in_the_interpreter(spy):
    assert _triton_grouped.self_check(CPU) == (True, None)
    assert len(spy) == 3


def test_import_does_not_load_triton_or_torch():
    """A fresh interpreter importing the grouped engine and its Triton module loads
    neither triton nor torch (the one subprocess of interpreter_check.import_probe)."""
    assert import_probe()["grouped"] == []


@CUDA
@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
def test_cuda_equals_numpy_path(similarity, spy, monkeypatch):
    monkeypatch.setenv("RC_TRITON", "1")
    rng = np.random.default_rng(9)
    X, y = _emb("int", rng, 3000, 64), _labels(rng, 3000, n_labels=40)
    ref = _grouped_values(X, y, similarity=similarity, backend=None, group_size=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = _grouped_values(
            X,
            y,
            similarity=similarity,
            backend=Backend("torch", torch.device("cuda")),
            group_size=4,
        )
    assert spy
    _same(got, ref)


def test_time_grouped_runs_the_fused_path_and_refuses_otherwise(spy, monkeypatch):
    monkeypatch.setenv("RC_TRITON_TILE", "64x128x16")  # the timing helper's route, few programs
    with _triton.on_cpu(screen="bf16"):
        row = _triton_grouped.time_grouped(300, 8, device="cpu", group_size=5, repeats=1)
    assert spy and row["seconds"] > 0 and row["n_groups"] == 6 and 0 <= row["value"] <= 1
    assert row["screened"] + row["exact"] > 0
    with pytest.raises(
        BackendError, match="did not run"
    ):  # outside on_cpu: the numpy path would be timed
        _triton_grouped.time_grouped(300, 8, device="cpu", group_size=5)


def test_leave_one_out_without_ids_equals_numpy_path():
    """No ids: nothing is the same item (each query also ranks itself), as the numpy path does."""
    rng = np.random.default_rng(8)
    X, y = _emb("int", rng, 90, 6), _labels(rng, 90)
    kw = dict(
        q_ids=None,
        g_ids=None,
        ks=KS,
        group_size=3,
        seed=2,
        repeats=1,
        confidence=0.9,
        ties="average",
        similarity="neg_l2",
        label_values=np.arange(13),
        max_memory=2**26,
        q_factor=_factor(X, "neg_l2"),
    )
    ref = _grouped.grouped_recall_values(X, y, None, None, **kw)
    record = {}
    with _triton.on_cpu():
        fused = grouped_kernel(CPU, "neg_l2")
        got = _grouped.grouped_recall_values(
            X, y, None, None, backend=CPU, fused=fused, record=record, **kw
        )
    assert record == {"triton-grouped": 1}
    _same(got, ref)
    assert ref[1].n_queries_skipped == 0  # the singleton's query finds itself


def test_evaluate_reaches_the_grouped_kernel(monkeypatch):
    """rc.evaluate on the torch backend passes its backend down: with the kernel switched
    on, grouped recall (and its interval) runs on it and equals the CPU path; the
    result's provenance says so (the host path's name on the numpy device). 64x128
    tiles: what is checked is the route, not tile edges (the tests above); the
    interpreter's cost is per program."""
    monkeypatch.setenv("RC_TRITON_TILE", "64x128x16")
    import retrieval_checks as rc

    rng = np.random.default_rng(12)
    X = _emb("int", rng, 160, 8)
    y = rng.integers(0, 40, size=160)
    kw = dict(
        query_labels=y,
        metrics=["grouped_recall@1", "grouped_recall@5", "map"],
        similarity="cosine",
        group_size=8,
    )
    ref = rc.evaluate(X, device="numpy", **kw)
    with _triton.on_cpu():
        got = rc.evaluate(X, device="torch-cpu", _use_kernels=False, **kw)
    assert dict(got.provenance.grouped) == {"triton-grouped": 1}, "the grouped kernel did not run"
    assert dict(ref.provenance.grouped) == {f"grouped-{_kernels.ACCELERATOR}": 1}
    for m in ("grouped_recall@1", "grouped_recall@5", "map"):
        assert got[m] == ref[m], m
    assert got.grouped["grouped_recall@5"].interval == ref.grouped["grouped_recall@5"].interval


def test_provenance_names_the_path_that_served_each_partition_fallback_included(monkeypatch):
    """Two partitions on the fused kernel: both recorded as ``triton-grouped``. The
    kernel failing on the second: a warning, the host path scores that partition and is
    recorded under its own name (the compiled counter, or the numpy rule under
    ``_use_kernels=False``), with the numbers of the host path alone."""
    monkeypatch.setenv("RC_TRITON_TILE", "64x128x16")
    import retrieval_checks as rc

    rng = np.random.default_rng(8)
    X = _emb("int", rng, 96, 6)
    y = rng.integers(0, 24, size=96)
    kw = dict(
        query_labels=y,
        metrics=["grouped_recall@1"],
        similarity="dot",
        group_size=6,
        group_repeats=2,
    )
    ref = rc.evaluate(X, device="numpy", **kw)
    with _triton.on_cpu():
        fused = rc.evaluate(X, device="torch-cpu", **kw)
    assert dict(fused.provenance.grouped) == {"triton-grouped": 2}, fused.provenance
    assert fused["grouped_recall@1"] == ref["grouped_recall@1"]
    real, calls = _triton_grouped._counts, []

    def second_fails(*a, **k):
        calls.append(1)
        if len(calls) % 2 == 0:
            raise RuntimeError("forced failure on the second partition")
        return real(*a, **k)

    monkeypatch.setattr(_triton_grouped, "_counts", second_fails)
    host = f"grouped-{_kernels.ACCELERATOR}"
    for use_kernels, fallback in ((True, host), (False, "grouped-numpy")):
        with _triton.on_cpu(), pytest.warns(RuntimeWarning, match="forced failure"):
            got = rc.evaluate(X, device="torch-cpu", _use_kernels=use_kernels, **kw)
        assert dict(got.provenance.grouped) == {"triton-grouped": 1, fallback: 1}
        assert got["grouped_recall@1"] == ref["grouped_recall@1"]
        assert got.config == fused.config  # not part of config


def test_evaluate_falls_back_with_the_device_tensors_copied_to_the_host(monkeypatch):
    """The engine hands the kernel its device tensors; when the kernel fails, the numpy
    path gets host copies and gives the same numbers after a warning."""
    import retrieval_checks as rc

    rng = np.random.default_rng(3)
    X = _emb("float", rng, 120, 6)
    y = rng.integers(0, 30, size=120)
    kw = dict(
        query_labels=y,
        metrics=["grouped_recall@1", "grouped_recall@3"],
        similarity="neg_l2",
        group_size=6,
    )
    ref = rc.evaluate(X, device="numpy", **kw)

    def broken(*a, **k):
        raise RuntimeError("forced launch failure")

    monkeypatch.setattr(_triton_grouped, "_counts", broken)
    with _triton.on_cpu(), pytest.warns(RuntimeWarning, match="forced launch failure"):
        got = rc.evaluate(X, device="torch-cpu", _use_kernels=False, **kw)
    assert got["grouped_recall@1"] == ref["grouped_recall@1"]
    assert got["grouped_recall@3"] == ref["grouped_recall@3"]
