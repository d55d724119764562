"""The fused Triton kernel (engine/gpu/_triton.py), run in Triton's interpreter on the CPU.

References: the compiled CPU kernels (numba and numpy, engine/counting/_kernels.py), the torch
path the CUDA device runs today (``_use_kernels=False`` on CPU tensors), and, for the
screened variant, the fp32 kernel itself (bit for bit). CUDA-only checks skip without a
GPU. ``TRITON_INTERPRET=1`` is set here before triton is first imported.

Cost (28 November 2026, one process at a load of 6-8 on the 2-core machine): about 58
CPU-s for the default tests (65 before 2bb5116, measured back to back), ~5 of them the
one subprocess of interpreter_check.import_probe that also serves the grouped and
image-text import checks (whichever of the three runs first in a process pays it);
none over 3 s otherwise; the interpreter's cost is per program (one
tile of a launch), so a test sized for tile edges uses the interpreter's 16x32 tiles and
one that checks a route or a counter uses larger ones. ``--rc-exhaustive`` adds the
sweeps.
"""

from __future__ import annotations

import copy
import functools
import math
import os
import sys
import warnings
import zlib

import numpy as np
import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import retrieval_checks as rc  # noqa: E402
from retrieval_checks.engine._backend import cosine_epilogue  # noqa: E402
from retrieval_checks.engine.counting import _kernels  # noqa: E402
from retrieval_checks.engine.gpu import _triton  # noqa: E402
from retrieval_checks.errors import BackendError  # noqa: E402

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

METRICS = ["map", "map@R", "hit_rate@1", "recall@5", "precision@3", "mrr", "meanr", "map_cut@5"]
CUDA = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU (the kernel compiles for it)"
)


@pytest.fixture(params=["linear", "search"])
def counting(request, monkeypatch):
    """Both ways the count launch counts: comparing with each relevant score (rows with
    few relevant items) and binary search with difference arrays (the rest)."""
    monkeypatch.setattr(_triton, "LINEAR_MAX", 10**6 if request.param == "linear" else 0)
    return request.param


def _on_the_kernel(result, blocks=None):
    """Every block of ``result``'s pass was counted by the fused kernel (its provenance:
    a block the kernel handed back to the torch path would be counted as ``torch``);
    ``blocks``: how many."""
    assert result.provenance.counter == "triton", (
        f"the fused kernel did not run: {result.provenance}"
    )
    if blocks is not None:
        assert result.provenance.blocks["triton"] == blocks, result.provenance


def _arg_key(a):
    """A hashable image of one argument: arrays and tensors by dtype, shape and bytes."""
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    if isinstance(a, np.ndarray):
        return (str(a.dtype), a.shape, a.tobytes())
    return repr(a)


@pytest.fixture
def replay(monkeypatch):
    """Replays :func:`_triton.count_arrays` for a block it has already run with the
    same inputs (every argument by value, the tile shape, LINEAR_MAX, the CPU switch):
    the launches read no tie policy (it is applied afterwards to the counts), so a
    second policy's run reuses the first's launches instead of interpreting them again.
    ``replay["runs"]``/``replay["replays"]``: launches interpreted / replayed."""
    memo, stats = {}, {"runs": 0, "replays": 0}
    real = _triton.count_arrays

    def memoised(*args, **kwargs):
        key = (
            tuple(_arg_key(a) for a in args),
            tuple((k, _arg_key(v)) for k, v in sorted(kwargs.items())),
            _triton.tile_shape(),
            _triton.LINEAR_MAX,
            repr(_triton._CPU),
        )
        if key not in memo:
            stats["runs"] += 1
            memo[key] = real(*args, **kwargs)
        else:
            stats["replays"] += 1
        return copy.deepcopy(memo[key])  # the caller may write into what it gets

    monkeypatch.setattr(_triton, "count_arrays", memoised)
    return stats


def _data(kind: str, rng, n: int, d: int):
    if kind == "float":
        return rng.standard_normal((n, d)).astype(np.float32)
    X = rng.integers(-2, 3, size=(n, d)).astype(np.float32)  # tie-heavy
    X[1::5] = X[0::5][: X[1::5].shape[0]]  # exact duplicates
    return X


def _evaluate(
    X,
    y,
    *,
    similarity,
    device,
    kernels,
    ties="pessimistic",
    tile=None,
    gallery=None,
    g_labels=None,
    query_ids=None,
    gallery_ids=None,
):
    kw = dict(
        query_labels=y,
        metrics=METRICS,
        similarity=similarity,
        device=device,
        ties=ties,
        tile=tile,
        _use_kernels=kernels,
        empty_queries="skip",
    )
    if gallery is not None:
        kw.update(gallery_labels=g_labels, query_ids=query_ids, gallery_ids=gallery_ids)
        return rc.evaluate(X, gallery, **kw)
    return rc.evaluate(X, **kw)


def _same(a, b):
    for m in METRICS:
        np.testing.assert_array_equal(a.per_query[m], b.per_query[m], err_msg=m)


# every pair of parameter values at least once (pairwise); the full product with --rc-exhaustive
@pytest.mark.default_cases(
    dict(similarity="cosine", kind="float", screen=False, counting="linear"),
    dict(similarity="cosine", kind="int", screen=True, counting="search"),
    dict(similarity="dot", kind="float", screen=True, counting="linear"),
    dict(similarity="dot", kind="int", screen=False, counting="search"),
    dict(similarity="neg_l2", kind="float", screen=False, counting="search"),
    dict(similarity="neg_l2", kind="int", screen=True, counting="linear"),
)
@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
@pytest.mark.parametrize("kind", ["float", "int"])
@pytest.mark.parametrize("screen", [False, True])
def test_leave_one_out_equals_cpu_kernels_and_torch_path(
    similarity, kind, screen, counting, replay
):
    """Leave-one-out on the fused kernel equals the CPU kernels and the torch path, per
    query, under ties="pessimistic" and ties="average". The launches (count_arrays) take
    no tie policy, so the average run replays the pessimistic run's launches (the
    ``replay`` fixture, keyed by every input they read) and the host-side policy is
    applied to the same counts: one interpreted launch pair per block, two policies
    compared per query. Each case still reaches its branches: two blocks of (40, 16)
    (4 x 2 interpreter tiles, partial ones), the similarity's epilogue, the screen or
    the exact tile, the counting fixture's linear or search count launch."""
    rng = np.random.default_rng(zlib.crc32(f"{similarity}-{kind}".encode()))
    n = 50  # not a multiple of the tiles; 2 blocks of (40, 16), 4 x 2 interpreter tiles
    X = _data(kind, rng, n, 12)
    y = rng.integers(0, 7, size=n)
    ref = _evaluate(X, y, similarity=similarity, device="numpy", kernels=True)
    torch_path = _evaluate(
        X, y, similarity=similarity, device="torch-cpu", kernels=False, tile=(40, 16)
    )
    with _triton.on_cpu(screen=screen):
        fused = _evaluate(
            X, y, similarity=similarity, device="torch-cpu", kernels=False, tile=(40, 16)
        )
        assert replay == {"runs": 2, "replays": 0}, replay  # two blocks, interpreted
        fused_avg = _evaluate(
            X,
            y,
            similarity=similarity,
            device="torch-cpu",
            kernels=False,
            ties="average",
            tile=(40, 16),
        )
    assert replay == {"runs": 2, "replays": 2}, replay  # the same launches, replayed
    _on_the_kernel(fused, blocks=2)
    _on_the_kernel(fused_avg, blocks=2)
    _same(fused, ref)
    _same(fused, torch_path)
    _same(
        fused_avg,
        _evaluate(X, y, similarity=similarity, device="numpy", kernels=True, ties="average"),
    )


@pytest.mark.parametrize("similarity", ["cosine", "neg_l2"])
def test_separate_gallery_with_ids_equals_reference(similarity):
    rng = np.random.default_rng(5)
    Q = _data("int", rng, 37, 9)
    G = np.concatenate([Q[:20], _data("int", rng, 50, 9)])  # queries found in the gallery, by id
    ql, gl = rng.integers(0, 5, 37), rng.integers(0, 5, 70)
    gl[:20] = ql[:20]
    qid = np.arange(37)
    gid = np.concatenate([np.arange(20), np.arange(20, 70) + 100])
    gid[30] = 3  # a second gallery item with query 3's id: two self pairs in one row
    gl[30] = ql[3]  # ... a copy of query 3, of its label (an id names one item)
    kw = dict(similarity=similarity, gallery=G, g_labels=gl, query_ids=qid, gallery_ids=gid)
    ref = _evaluate(Q, ql, device="numpy", kernels=True, **kw)
    with _triton.on_cpu():
        fused = _evaluate(Q, ql, device="torch-cpu", kernels=False, **kw)
    _on_the_kernel(fused)
    _same(fused, ref)


def _block_problem(rng, n, d, n_labels, kind="float"):
    X = _data(kind, rng, n, d)
    y = rng.integers(0, n_labels, size=n)
    order = np.argsort(y, kind="stable")
    ys = y[order]
    grank = np.empty(n, np.int32)
    grank[order] = np.arange(n) - np.searchsorted(ys, ys, side="left")
    return X, y, grank


def _csr_loo(y, m):
    rows, cols = [], []
    for i in range(m):
        js = [j for j in np.flatnonzero(y == y[i]) if j != i]
        rows += [i] * len(js)
        cols += js
    rows, cols = np.array(rows, np.int64), np.array(cols, np.int64)
    indptr = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
    return indptr, rows, cols


def _loo_args(X, y, grank, m, similarity="dot", ga=None):
    """The positional arguments of ``count_arrays`` and ``bin_counts`` for the first
    ``m`` rows of ``X`` as queries against all of ``X``, leave-one-out by label: queries,
    gallery, similarity, factors (``ga``: the gallery's; the queries' are its first
    ``m``), labels, gallery ranks, relevant pairs (``indptr, rows, cols``) and self
    pairs."""
    G = torch.from_numpy(X.copy())
    indptr, rows, cols = _csr_loo(y, m)
    selfs = (np.arange(m, dtype=np.int32)[:, None], np.arange(m, dtype=np.int32)[:, None], 1)
    qa = None if ga is None else ga[:m]
    return (G[:m], G, similarity, qa, ga, y[:m], y, grank, indptr, rows, cols, selfs)


def _kernel_counts(X, y, grank, m, screen=False, tile=None, similarity="dot"):
    sq = (X.astype(np.float64) ** 2).sum(axis=1)
    ga = {
        "dot": None,
        "cosine": torch.from_numpy(sq.astype(np.float32)),  # squared norms, as the engine's
        "neg_l2": torch.from_numpy(sq.astype(np.float32)),
    }[similarity]
    args = _loo_args(X, y, grank, m, similarity, ga)
    (rel_sorted, order), above, tied = _triton.count_arrays(*args, screen=screen, tile=tile)
    return args[8], rel_sorted.numpy(), order, above, tied


# the kernel's work depends on kind and counting (all four run); impl only picks the reference
@pytest.mark.default_cases(
    dict(impl="numba", kind="int", counting="linear"),
    dict(impl="numba", kind="float", counting="search"),
    dict(impl="numpy", kind="int", counting="search"),
    dict(impl="numpy", kind="float", counting="linear"),
)
@pytest.mark.parametrize("impl", ["numba", "numpy"])
@pytest.mark.parametrize("kind", ["int", "float"])
def test_counts_equal_the_cpu_kernels(impl, kind, counting):
    rng = np.random.default_rng(11)
    n, m = 101, 45
    X, y, grank = _block_problem(rng, n, 20, 6, kind)
    indptr, rel_sorted, _, above, tied = _kernel_counts(X, y, grank, m)
    S = (X[:m] @ X.T).astype(np.float32)
    _, rows, cols = _csr_loo(y, m)
    vals = S[rows, cols]
    S[rows, cols] = -np.inf
    S[np.arange(m), np.arange(m)] = -np.inf
    srt = np.concatenate([np.sort(vals[indptr[i] : indptr[i + 1]]) for i in range(m)])
    if (
        kind == "int"
    ):  # exact products: the same bits from any GEMM (floats: the last bits may differ)
        np.testing.assert_array_equal(rel_sorted, srt)
    else:
        np.testing.assert_allclose(rel_sorted, srt, rtol=1e-5, atol=1e-5)
    want_above, want_tied = np.empty(srt.size, np.int64), np.empty(srt.size, np.int64)
    with _kernels.use(impl):
        _kernels.count_above_relevant(
            S[None],
            m,
            n,
            indptr,
            srt,
            want_above,
            want_tied,
            np.float32(math.inf),
            np.zeros(m, np.int64),
        )
    np.testing.assert_array_equal(above, want_above)
    np.testing.assert_array_equal(tied, want_tied)
    assert (tied.sum() > 0) == (kind == "int")  # integer data tie; random floats do not


def _adversarial(rng, n_rel_groups=3, per=7, d=24, n_far=20):
    """Relevant items and non-relevant ones whose scores sit within a few ulps of them
    (the relevant row scaled by 1 + k 2^-23), exact duplicates, and far negatives: 62
    rows, 4 x 2 interpreter tiles with partial ones (the interpreter's cost is per tile)."""
    X, y = [], []
    for gi in range(n_rel_groups):
        base = rng.standard_normal(d).astype(np.float32)
        for k in range(per):
            X.append(base)
            y.append(gi)  # relevant to each other (equal rows: tied relevant scores)
        for k in range(-3, 4):
            X.append((base * np.float32(1 + k * 2.0**-23)).astype(np.float32))
            y.append(100 + gi * 10 + k)  # non-relevant, scores within ulps of the relevant ones
    far = 0.05 * rng.standard_normal((n_far, d)).astype(np.float32)
    X = np.concatenate([np.array(X, np.float32), far])
    y = np.concatenate([np.array(y), 1000 + np.arange(n_far)])
    perm = rng.permutation(len(y))
    X, y = X[perm], y[perm]
    order = np.argsort(y, kind="stable")
    ys = y[order]
    grank = np.empty(len(y), np.int32)
    grank[order] = np.arange(len(y)) - np.searchsorted(ys, ys, side="left")
    return X, y, grank


# each data set, each screen and each counting once, every screen with both countings
@pytest.mark.default_cases(
    dict(seed=0, screen=1, counting="linear"),
    dict(seed=1, screen=2, counting="search"),
    dict(seed=2, screen=2, counting="linear"),
    dict(seed=3, screen=1, counting="search"),
)
@pytest.mark.parametrize("screen", [1, 2])
@pytest.mark.parametrize("seed,similarity", [(0, "dot"), (1, "dot"), (2, "cosine"), (3, "neg_l2")])
def test_screened_equals_fp32_kernel_bit_for_bit_on_near_ties(seed, similarity, screen, counting):
    rng = np.random.default_rng(seed)
    X, y, grank = _adversarial(rng)
    m = X.shape[0]
    exact = _kernel_counts(X, y, grank, m, similarity=similarity)
    screened = _kernel_counts(X, y, grank, m, screen=screen, similarity=similarity)
    assert exact[1].tobytes() == screened[1].tobytes()
    np.testing.assert_array_equal(exact[3], screened[3])
    np.testing.assert_array_equal(exact[4], screened[4])
    # the data are adversarial: negatives within ulps of relevant scores, some exactly equal
    assert exact[4].sum() > 0
    near = exact[3] - exact[4]
    assert near.sum() > 0


def test_screen_stats_count_decided_and_recomputed_tiles(monkeypatch):
    """SCREEN_STATS: tiles the screen decided alone (clustered, well separated data) and
    tiles recomputed in fp32 (adversarial near ties); nothing counted without screening.
    32x64 tiles: 3 x 2 programs a launch on the 90 rows (the interpreter's cost is per
    program), still several tiles, each counted."""
    monkeypatch.setattr(_triton, "SCREEN_STATS", {"screened": 0, "recomputed": 0})
    monkeypatch.setenv("RC_TRITON_TILE", "32x64x32")
    rng = np.random.default_rng(2)
    centres = rng.standard_normal((6, 32)).astype(np.float32) * 4
    y = np.repeat(np.arange(6), 15)
    X = (centres[y] + 0.05 * rng.standard_normal((90, 32))).astype(np.float32)
    kw = dict(similarity="cosine", device="torch-cpu", kernels=False)
    with _triton.on_cpu(screen=0):
        exact = _evaluate(X, y, **kw)
    assert _triton.SCREEN_STATS == {"screened": 0, "recomputed": 0}
    with _triton.on_cpu(screen="bf16"):
        _same(_evaluate(X, y, **kw), exact)
    assert _triton.SCREEN_STATS["screened"] > 0
    Xa, ya, grank = _adversarial(rng)
    _kernel_counts(Xa, ya, grank, Xa.shape[0], screen=1)
    assert _triton.SCREEN_STATS["recomputed"] > 0


@functools.lru_cache(maxsize=None)
def _near_tie_problem():
    """The adversarial near-tie problem and thresholds placed exactly on six of its
    relevant scores (the fp32 kernel's), made once per process for every screen."""
    rng = np.random.default_rng(31)
    X, y, grank = _adversarial(rng)
    _, rel_sorted, _, _, _ = _kernel_counts(X, y, grank, X.shape[0])
    picks = np.sort(rng.choice(rel_sorted, size=6, replace=False)).astype(np.float32)
    return X, y, grank, rel_sorted, picks


@functools.lru_cache(maxsize=None)
def _near_tie_pair_outputs(sc):
    """The tail values, fixed-threshold counts and binning counts of the adversarial
    near-tie problem under screen ``sc``: the fp32 ones (``sc`` 0) computed once per
    process for both screened tests."""
    X, y, grank, rel_sorted, picks = _near_tie_problem()
    args = _loo_args(X, y, grank, X.shape[0])
    req = _triton.PairRequest(float(picks[2]), picks, None)
    *_, extra = _triton.count_arrays(*args, pairs=req, screen=sc)
    bins = _triton.bin_counts(*args, np.unique(rel_sorted), screen=sc)
    return np.sort(extra["negatives"]).tobytes(), extra["fixed_fp"].tolist(), bins.tolist()


@pytest.mark.parametrize("screen", [1, 2])
def test_screened_pair_outputs_equal_fp32_on_near_ties(screen):
    """Fixed thresholds and the tail threshold placed exactly on relevant scores, with
    negatives within ulps of them: the screened tail values and counts are the fp32
    kernel's, bit for bit (the fp32 outputs computed once for both screens)."""
    exact = _near_tie_pair_outputs(0)
    assert _near_tie_pair_outputs(screen) == exact
    assert len(exact[0]) > 0 and sum(exact[1]) > 0


@pytest.mark.parametrize("screen", [1, 2])
def test_screened_bound_holds_and_is_not_vacuous(screen):
    """|bf16-input product - fp32 product| <= gamma |q| |g| on random rows, and within 100x of it."""
    rng = np.random.default_rng(3)
    for d in (8, 64, 300):
        A = rng.standard_normal((200, d)).astype(np.float32)
        B = rng.standard_normal((300, d)).astype(np.float32) * 3
        if screen == 1:
            bf = lambda x: torch.from_numpy(x).to(torch.bfloat16).to(torch.float64).numpy()  # noqa: E731
        else:  # TF32: the low 13 mantissa bits dropped
            bf = lambda x: (x.view(np.int32) & np.int32(-8192)).view(np.float32).astype(np.float64)  # noqa: E731
        screened = (bf(A) @ bf(B).T).astype(np.float32)
        exact = A @ B.T
        bound = (
            _triton.error_bound(d, screen)
            * np.linalg.norm(A, axis=1)[:, None]
            * np.linalg.norm(B, axis=1)[None, :]
        )
        err = np.abs(screened.astype(np.float64) - exact)
        assert (err <= bound).all()
        assert err.max() > bound.max() / 100


# the self-check's cases run by default: every similarity with both data kinds, every screen
# with both data kinds (integer data compare every output, the pair outputs included), each
# similarity under two of the three screens; all 19 with --rc-exhaustive
SELF_CHECK_COVER = [
    ("cosine", 1, "int"),
    ("cosine", 2, "float"),
    ("dot", 2, "int"),
    ("dot", 0, "float"),
    ("neg_l2", 0, "int"),
    ("neg_l2", 1, "float"),
    ("hamming", 0, "int"),
]


def test_the_self_check_cover_spans_every_similarity_screen_and_data_kind():
    every = _triton.self_check_cases()
    assert len(every) == 19 and set(SELF_CHECK_COVER) <= set(every)
    pairs = lambda i, j, cases: {(c[i], c[j]) for c in cases}  # noqa: E731
    for i, j in ((0, 2), (1, 2)):  # similarity x kind, screen x kind
        assert pairs(i, j, SELF_CHECK_COVER) == pairs(i, j, every)


@pytest.mark.slow  # starts early (tests/conftest.py: slow modules first)
@pytest.mark.default_cases(dict(cases="cover"))
@pytest.mark.parametrize("cases", ["cover", "every"])
def test_self_check_passes_in_the_interpreter(monkeypatch, cases):
    """The production self-check passes: with 64x128x32 tiles its 37 x 83 x 20 problem is
    one partial tile (masked rows, columns and K) per launch, one program instead of the
    interpreter's 9 (the interpreter's cost is per program: 1.5 CPU-s for the cover
    instead of 5.9 with 32x64x16). Crossing tile edges and K steps is what the
    leave-one-out, counts and tile-shape tests check; here, that the self-check's every
    comparison agrees. By default the covering cases (SELF_CHECK_COVER), every case with
    --rc-exhaustive."""
    monkeypatch.setenv("RC_TRITON_TILE", "64x128x32")
    assert _triton.tile_shape() == (64, 128, 32)
    chosen = SELF_CHECK_COVER if cases == "cover" else None
    assert _triton.self_check("cpu", chosen) == (True, None)


def test_self_check_catches_wrong_counts(monkeypatch):
    monkeypatch.setenv("RC_TRITON_TILE", "64x128x32")  # one program a launch, as above
    real = _triton.count_arrays

    def off_by_one(*a, **k):
        vals, above, tied, *rest = real(*a, **k)
        return (vals, above + 1, tied, *rest)

    monkeypatch.setattr(_triton, "count_arrays", off_by_one)
    ok, reason = _triton.self_check("cpu")
    assert not ok and "differ" in reason


def test_failed_self_check_warns_and_falls_back(monkeypatch):
    from retrieval_checks.engine._backend import Backend

    monkeypatch.setattr(_triton, "_STATE", {})
    monkeypatch.setattr(_triton, "self_check", lambda device: (False, "forced failure"))
    monkeypatch.setenv("RC_TRITON", "auto")
    fake_cuda = Backend("torch", torch.device("cuda", 0))
    with pytest.warns(RuntimeWarning, match="forced failure"):
        assert _triton.wanted(fake_cuda) is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _triton.wanted(fake_cuda) is False  # decided once per process, warned once
    monkeypatch.setenv("RC_TRITON", "0")
    monkeypatch.setattr(_triton, "_STATE", {})
    assert _triton.wanted(fake_cuda) is False
    monkeypatch.setenv(
        "RC_TRITON", "auto"
    )  # auto without triton installed: the torch path, nothing to warn
    monkeypatch.setattr(_triton.importlib.util, "find_spec", lambda name: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _triton.wanted(fake_cuda) is False
    monkeypatch.undo()
    monkeypatch.setattr(_triton, "_STATE", {})
    monkeypatch.setenv("RC_TRITON", "yes")
    with pytest.raises(BackendError, match="RC_TRITON"):
        _triton.wanted(fake_cuda)


def test_kernel_failure_on_a_block_warns_and_gives_the_same_result(monkeypatch):
    rng = np.random.default_rng(8)
    X = _data("int", rng, 50, 8)
    y = rng.integers(0, 4, 50)
    ref = _evaluate(X, y, similarity="cosine", device="torch-cpu", kernels=False)

    def broken(*a, **k):
        raise RuntimeError("forced compile failure")

    monkeypatch.setattr(_triton, "count_arrays", broken)
    with _triton.on_cpu(), pytest.warns(RuntimeWarning, match="forced compile failure"):
        got = _evaluate(X, y, similarity="cosine", device="torch-cpu", kernels=False)
    _same(got, ref)


PAIR_METRICS = [
    "map",
    "recall@5",
    "pair_precision@t=0.5",
    "pair_recall@t=0.5",
    "pair_f1@t=0.2",
    "pair_f1@t=-3",
    "recall_at_precision@0.9",
    "recall_at_precision@0.5",
    "precision_at_recall@0.5",
    "precision_at_recall@0.95",
]


def _values(r, metrics):
    return {m: r[m] for m in metrics}


# each counting with every screen mode once (6 cases): every similarity, both data kinds,
# each of the pair outputs' launches (fixed thresholds, the tail, the binning pass) on the
# exact tile and under both screens with linear and search counting. neg_l2 on tie-heavy
# integers with the exact tile (the 7th case) is --rc-exhaustive: neg_l2's epilogue runs
# in the float bf16 case, integer ties on the exact tile in dot-int-0 (the pair outputs
# read the tile's scores after the epilogue, whatever the similarity: in the kernels EPI
# enters only the tile's scores or their interval), and neg_l2 on integers in the
# leave-one-out test's count launches.
@pytest.mark.default_cases(
    dict(similarity="cosine", kind="float", screen=0, counting="linear"),
    dict(similarity="cosine", kind="int", screen="bf16", counting="linear"),
    dict(similarity="dot", kind="int", screen="tf32", counting="linear"),
    dict(similarity="dot", kind="int", screen=0, counting="search"),
    dict(similarity="dot", kind="float", screen="tf32", counting="search"),
    dict(similarity="neg_l2", kind="float", screen="bf16", counting="search"),
)
@pytest.mark.parametrize(
    "similarity,kind,screen",
    [
        ("cosine", "float", 0),
        ("dot", "int", 0),
        ("neg_l2", "int", 0),
        ("cosine", "int", "bf16"),
        ("dot", "float", "tf32"),
        ("neg_l2", "float", "bf16"),
        ("dot", "int", "tf32"),
    ],
)
def test_pair_metrics_equal_cpu_kernels_and_torch_path(similarity, kind, screen, counting):
    """Pair metrics (fixed thresholds, the negative tail, the binning pass) on the fused
    kernel: equal to the CPU kernels and to the torch path, fp32 and screened."""
    rng = np.random.default_rng(zlib.crc32(f"pairs-{similarity}-{kind}".encode()))
    n = 50  # 2 blocks of (40, 16), 4 x 2 interpreter tiles (partial ones)
    X = _data(kind, rng, n, 12)
    y = rng.integers(0, 7, size=n)
    kw = dict(query_labels=y, metrics=PAIR_METRICS, similarity=similarity, empty_queries="skip")
    ref = rc.evaluate(X, device="numpy", **kw)
    torch_path = rc.evaluate(X, device="torch-cpu", _use_kernels=False, tile=(40, 16), **kw)
    with _triton.on_cpu(screen=screen):
        fused = rc.evaluate(X, device="torch-cpu", _use_kernels=False, tile=(40, 16), **kw)
    _on_the_kernel(fused, blocks=2)
    assert _values(fused, PAIR_METRICS) == _values(ref, PAIR_METRICS)
    assert _values(fused, PAIR_METRICS) == _values(torch_path, PAIR_METRICS)
    for m in PAIR_METRICS[2:]:
        assert fused.thresholds[m] == ref.thresholds[m], m


def test_precision_at_recall_binning_pass_runs_on_the_kernel(monkeypatch):
    """A precision_at_recall answer the tail cannot certify takes the binning pass: it
    runs on the kernel and gives the CPU kernels' value."""
    from retrieval_checks.engine import _stream

    monkeypatch.setattr(
        _stream, "tail_capacity", lambda specs, n_positive: 1
    )  # a tail too short to certify
    rng = np.random.default_rng(4)
    X = _data("float", rng, 60, 10)  # three blocks of 24 queries
    y = rng.integers(0, 5, size=60)
    kw = dict(
        query_labels=y,
        metrics=["precision_at_recall@0.8", "precision_at_recall@0.3"],
        similarity="cosine",
    )
    ref = rc.evaluate(X, device="numpy", **kw)
    with _triton.on_cpu():
        fused = rc.evaluate(X, device="torch-cpu", _use_kernels=False, tile=(24, 16), **kw)
    assert fused.provenance.binning.get("triton"), (
        f"the binning pass did not run on the kernel: {fused.provenance}"
    )
    assert fused["precision_at_recall@0.8"] == ref["precision_at_recall@0.8"]
    assert fused["precision_at_recall@0.3"] == ref["precision_at_recall@0.3"]


def _dense_block(X, y, m, similarity):
    """The block's scores by numpy (int data: exact), the negatives mask and the
    leave-one-out relevance CSR."""
    S = (X[:m] @ X.T).astype(np.float32)
    if similarity == "cosine":  # the engine's epilogue on squared norms (its integer rows' factors)
        sq = (X.astype(np.float64) ** 2).sum(1).astype(np.float32)
        cosine_epilogue(S, sq[:m], sq)
    neg = y[:m, None] != y[None, :]
    return S, neg


# exact and screened (the screen's pair branch: pair_ambiguous, then the exact tile or the
# interval's bound); TF32's product with --rc-exhaustive (its pair outputs on near ties, bit
# for bit: test_screened_pair_outputs_equal_fp32_on_near_ties[2])
@pytest.mark.default_cases(dict(screen=0), dict(screen=1))
@pytest.mark.parametrize("screen", [0, 1, 2])
def test_tail_overflow_raises_the_threshold_and_keeps_every_negative_above_it(screen):
    """The tail: every negative >= the returned threshold, at least ``capacity`` of them
    (raised to the capacity-th largest when more were kept), also when the buffer was too
    small (tau finite: the launch runs again with room for all); fixed-threshold counts
    equal brute force."""
    rng = np.random.default_rng(21)
    n, m = 60, 30  # 2 x 2 tiles, partial both ways; ~1400 negatives (the overflow needs > 1034)
    X, y, grank = _block_problem(rng, n, 16, 5, "int")
    S, neg = _dense_block(X, y, m, "dot")
    neg_vals = S[neg]
    args = _loo_args(X, y, grank, m)
    fixed = np.array([-5.0, 0.0, 0.5, 7.0], np.float32)
    # the last case overflows the first buffer (min(m n, 2 cap + 1024) values) and launches again
    assert (neg_vals >= -40).sum() > 2 * 5 + 1024 and m * n > 2 * 5 + 1024
    for cap, tau in (
        (7, -math.inf),
        (40, float(np.float32(-2.0))),
        (None, float(np.float32(3.0))),
        (5, float(np.float32(-40.0))),
    ):  # > 2 * 5 + 1024 negatives >= -40: the buffer overflows
        req = _triton.PairRequest(tau, fixed, cap)
        *_, extra = _triton.count_arrays(*args, pairs=req, screen=screen)
        got_tau = extra["tau"]
        want = np.sort(neg_vals[neg_vals >= max(got_tau, np.finfo(np.float32).min)])
        np.testing.assert_array_equal(np.sort(extra["negatives"]), want)
        if cap is not None:
            assert got_tau > tau and want.size >= cap  # raised, and still holds the capacity
        elif cap is None:
            assert got_tau == tau
        np.testing.assert_array_equal(extra["fixed_fp"], [(neg_vals >= t).sum() for t in fixed])


@pytest.mark.parametrize("screen", [0, 1, 2])
def test_bin_counts_equal_brute_force(screen):
    rng = np.random.default_rng(9)
    n, m = 90, 45
    X, y, grank = _block_problem(rng, n, 14, 6, "int")
    S, neg = _dense_block(X, y, m, "cosine")
    inv = torch.from_numpy((X.astype(np.float64) ** 2).sum(1).astype(np.float32))  # squared norms
    args = _loo_args(X, y, grank, m, "cosine", inv)
    rows, cols = args[9], args[10]
    pos = np.unique(S[rows, cols])
    got = _triton.bin_counts(*args, pos, screen=screen)
    negs = S[neg]
    negs = negs[negs >= pos[0]]
    want = np.bincount(np.searchsorted(pos, negs, side="right"), minlength=pos.size + 1)
    np.testing.assert_array_equal(got, want)
    assert got.sum() > 0


def _explicit(rng, n_q, n_g, per):
    rel = {}
    for i in range(n_q):
        k = int(rng.integers(0, per + 1))  # some queries without relevant items
        rel[i] = sorted(rng.choice(n_g, size=k, replace=False).tolist())[
            ::-1
        ]  # unsorted within the row
    return rel


# every case once, each counting with fp32 and a screen
@pytest.mark.default_cases(
    dict(similarity="cosine", kind="float", counting="linear"),
    dict(similarity="dot", kind="int", counting="search"),
    dict(similarity="neg_l2", kind="int", counting="linear"),
    dict(similarity="dot", kind="float", counting="search"),
)
@pytest.mark.parametrize(
    "similarity,kind,screen",
    [
        ("cosine", "float", 0),
        ("dot", "int", 0),
        ("neg_l2", "int", "bf16"),
        ("dot", "float", "tf32"),
    ],
)
def test_explicit_relevance_equals_reference(similarity, kind, screen, counting):
    rng = np.random.default_rng(zlib.crc32(f"csr-{similarity}-{kind}".encode()))
    Q, G = _data(kind, rng, 41, 10), _data(kind, rng, 77, 10)
    rel = _explicit(rng, 41, 77, 6)
    metrics = METRICS + ["pair_recall@t=0.5", "recall_at_precision@0.5"]
    kw = dict(relevance=rel, metrics=metrics, similarity=similarity, empty_queries="skip")
    ref = rc.evaluate(Q, G, device="numpy", **kw)
    with _triton.on_cpu(screen=screen):
        fused = rc.evaluate(Q, G, device="torch-cpu", _use_kernels=False, tile=(16, 32), **kw)
    _on_the_kernel(fused)
    for m in METRICS:
        np.testing.assert_array_equal(fused.per_query[m], ref.per_query[m], err_msg=m)
    assert fused["pair_recall@t=0.5"] == ref["pair_recall@t=0.5"]
    assert fused["recall_at_precision@0.5"] == ref["recall_at_precision@0.5"]


def test_explicit_relevance_with_ids_and_graded_relevance():
    """Graded explicit relevance (nDCG gains, level 2) with self pairs removed by id."""
    rng = np.random.default_rng(13)
    X = _data("int", rng, 60, 8)
    grades = {
        i: {int(j): int(rng.integers(1, 4)) for j in rng.choice(60, size=5, replace=False)}
        for i in range(60)
    }
    ids = np.arange(60)
    metrics = ["ndcg", "ndcg@5", "map", "hit_rate@3", "mrr"]
    for level in (1, 2):
        kw = dict(
            relevance=grades,
            metrics=metrics,
            similarity="dot",
            query_ids=ids,
            gallery_ids=ids,
            relevance_level=level,
            empty_queries="skip",
        )
        ref = rc.evaluate(X, X, device="numpy", **kw)
        with _triton.on_cpu():
            fused = rc.evaluate(X, X, device="torch-cpu", _use_kernels=False, **kw)
        _on_the_kernel(fused)
        for m in metrics:
            np.testing.assert_array_equal(
                fused.per_query[m], ref.per_query[m], err_msg=f"{m} level {level}"
            )


def test_first_relevant_ranks_run_on_the_kernel_through_explicit_relevance():
    """Image-text's rank pass (explicit relevance, no self pairs) on the kernel."""
    from retrieval_checks.engine._evaluate import first_relevant_ranks
    from retrieval_checks.engine._inputs import Csr

    rng = np.random.default_rng(6)
    images = _data("int", rng, 30, 8)
    images[1::2] = images[0::2]  # duplicate images: their captions tie
    cap_img = np.repeat(np.arange(30), 3)
    captions = images[cap_img] + rng.integers(-1, 2, size=(90, 8)).astype(np.float32)
    i2t = Csr(np.arange(0, 91, 3, dtype=np.int64), np.arange(90, dtype=np.int64))
    t2i = Csr(np.arange(91, dtype=np.int64), cap_img.astype(np.int64))
    for q, g, rel in ((images, captions, i2t), (captions, images, t2i)):
        kw = dict(similarity="cosine", max_memory=2**30)
        ref, _ = first_relevant_ranks(q, g, rel, device="numpy", **kw)
        with _triton.on_cpu():
            got, _ = first_relevant_ranks(q, g, rel, device="torch-cpu", _use_kernels=False, **kw)
        assert got.provenance.counter == "triton", got.provenance  # every block on the kernel
        for field in ("pessimistic", "optimistic", "group"):
            np.testing.assert_array_equal(getattr(got, field), getattr(ref, field), err_msg=field)
        assert (ref.pessimistic != ref.optimistic).any() or (
            ref.group > 1
        ).any()  # ties are present


def test_fused_kernel_takes_larger_query_blocks_with_the_same_results(monkeypatch):
    """No score block in memory: the fused pass runs fewer, larger blocks (pair metrics
    keep the plan's), and per-query values do not change. The kernel's own tile is
    32x64 (the interpreter's cost is per program; the blocks are what is checked)."""
    monkeypatch.setenv("RC_TRITON_TILE", "32x64x16")
    rng = np.random.default_rng(17)
    n = 160  # 10 planned blocks of 16 queries
    X = _data("float", rng, n, 8)
    y = np.repeat(np.arange(n // 2), 2)
    ref = _evaluate(X, y, similarity="cosine", device="numpy", kernels=True, tile=(16, 64))
    with _triton.on_cpu():
        got = _evaluate(X, y, similarity="cosine", device="torch-cpu", kernels=False, tile=(16, 64))
    _on_the_kernel(got)
    assert got.provenance.blocks["triton"] < n // 16 // 2, got.provenance
    _same(got, ref)
    with _triton.on_cpu():
        pairs = rc.evaluate(
            X,
            query_labels=y,
            metrics=["map", "pair_recall@t=0.5"],
            device="torch-cpu",
            tile=(16, 64),
            _use_kernels=False,
        )
    _on_the_kernel(pairs, blocks=-(-n // 16))  # the plan's blocks


def test_tile_shape_from_the_environment(monkeypatch):
    monkeypatch.delenv("RC_TRITON_TILE", raising=False)
    assert _triton.tile_shape() == _triton.TILE_INTERPRET
    monkeypatch.setenv("RC_TRITON_TILE", "32x16x64")
    assert _triton.tile_shape() == (32, 16, 64)
    rng = np.random.default_rng(1)
    X = _data("int", rng, 50, 70)  # d not a multiple of BLOCK_K
    y = rng.integers(0, 4, 50)
    with _triton.on_cpu():
        got = _evaluate(X, y, similarity="dot", device="torch-cpu", kernels=False)
    _on_the_kernel(got)
    _same(got, _evaluate(X, y, similarity="dot", device="numpy", kernels=True))
    for bad in ("32x64", "48x64x32", "8x64x32", "32x64x512", "big"):
        monkeypatch.setenv("RC_TRITON_TILE", bad)
        with pytest.raises(BackendError, match="RC_TRITON_TILE"):
            _triton.tile_shape()


def _codes(rng, n, bits):
    B = rng.integers(0, 2, size=(n, bits)).astype(bool)
    B[1::3] = B[0::3][: B[1::3].shape[0]]  # duplicates
    B[2::7, :3] ^= True  # codes a few bits apart
    return np.packbits(B, axis=1)


@pytest.mark.default_cases(dict(bits=64, counting="linear"), dict(bits=150, counting="search"))
@pytest.mark.parametrize("bits", [64, 150])
def test_hamming_codes_on_the_kernel_equal_the_cpu_kernels(bits, counting, monkeypatch):
    """Packed binary codes: -Hamming tiles by popcount in the kernel (exact integers,
    tie-heavy), leave-one-out, a separate gallery with ids, explicit relevance and pair
    metrics, equal to the CPU path. 32x64 tiles: the 90 codes still span 3 x 2 tiles
    with partial ones, in a third of the interpreter's 16x32 programs."""
    monkeypatch.setenv("RC_TRITON_TILE", "32x64x16")
    rng = np.random.default_rng(bits)
    C = _codes(rng, 90, bits)
    y = rng.integers(0, 6, 90)
    metrics = METRICS + ["pair_recall@t=30", "pair_precision@t=60", "recall_at_precision@0.5"]
    cases = [
        dict(args=(C,), query_labels=y),
        dict(
            args=(C[:40], C),
            query_labels=y[:40],
            gallery_labels=y,
            query_ids=np.arange(40),
            gallery_ids=np.arange(90),
        ),
        dict(
            args=(C[:30], C[30:]),
            relevance={i: [j for j in range(60) if (i + j) % 7 == 0] for i in range(30)},
        ),
    ]
    for case in cases:
        args = case.pop("args")
        kw = dict(metrics=metrics, similarity="hamming", empty_queries="skip", **case)
        ref = rc.evaluate(*args, device="numpy", **kw)
        with _triton.on_cpu(screen="bf16"):  # screening does not apply to integer scores: ignored
            got = rc.evaluate(*args, device="torch-cpu", _use_kernels=False, **kw)
        _on_the_kernel(got)
        for m in METRICS:
            np.testing.assert_array_equal(got.per_query[m], ref.per_query[m], err_msg=m)
        for m in metrics[len(METRICS) :]:
            assert got[m] == ref[m], m
        assert ref.tied_share > 0.1  # ties are exercised


@pytest.mark.parametrize("var,value", [("RC_TRITON_SCREEN", "bogus"), ("RC_TRITON_TILE", "8x8x8")])
def test_a_bad_setting_is_an_error_not_a_kernel_failure(monkeypatch, var, value):
    """A bad RC_TRITON_SCREEN / RC_TRITON_TILE raises BackendError naming it, from every
    fused path, before any kernel runs: never a warned fallback that ignores it."""
    monkeypatch.setenv(var, value)
    rng = np.random.default_rng(0)
    X = _data("int", rng, 40, 6)
    y = rng.integers(0, 8, 40)
    calls = [
        lambda: rc.evaluate(
            X, query_labels=y, metrics=["map"], device="torch-cpu", _use_kernels=False
        ),
        lambda: rc.evaluate(
            X,
            query_labels=y,
            metrics=["grouped_recall@1"],
            group_size=2,
            device="torch-cpu",
            _use_kernels=False,
        ),
        lambda: rc.evaluate_image_text(X, X + 1, np.arange(40), device="torch-cpu", n_resamples=0),
    ]
    for call in calls:
        with _triton.on_cpu(screen=None), warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            # small integers repeat rows within a label: counted as copies, not this test's
            warnings.simplefilter("ignore", rc.SelfMatchWarning)
            with pytest.raises(BackendError, match=var):
                call()


def test_screen_codes_and_bounds():
    assert [_triton.screen_code(v) for v in (False, True, 0, 1, 2, "0", "1", "bf16", "TF32")] == [
        0,
        1,
        0,
        1,
        2,
        0,
        1,
        1,
        2,
    ]
    with pytest.raises(BackendError, match="RC_TRITON_SCREEN"):
        _triton.screen_code("fp8")
    assert _triton.error_bound(128, "tf32") < _triton.error_bound(128, "bf16") / 3


def test_importing_the_package_does_not_import_triton():
    """A fresh interpreter's ``import retrieval_checks`` loads no triton (the one
    subprocess of interpreter_check.import_probe, shared with the grouped and image-text
    entry points' tests)."""
    assert import_probe()["package"] is False


_CUDA_SCRIPT = """
import warnings, numpy as np, retrieval_checks as rc, os
rng = np.random.default_rng(0)
X = rng.standard_normal((3000, 64)).astype(np.float32)
X[1::3] = X[0::3]
y = rng.integers(0, 300, 3000)
rel = {i: np.flatnonzero(y == y[i])[:6].tolist() for i in range(0, 3000, 2)}
M = %r
P = %r
out = {}
for flag, screen in (("0", "0"), ("1", "0"), ("1", "bf16"), ("1", "tf32")):
    os.environ["RC_TRITON"], os.environ["RC_TRITON_SCREEN"] = flag, screen
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        r = rc.evaluate(X, query_labels=y, metrics=M + P, device="cuda")
        e = rc.evaluate(X[::2], X, relevance={i // 2: v for i, v in rel.items()}, metrics=M, device="cuda",
                        empty_queries="skip")
    out[flag + screen] = ([r.per_query[m].tolist() for m in M], [r[m] for m in P],
                          [e.per_query[m].tolist() for m in M])
assert out["00"] == out["10"] == out["1bf16"] == out["1tf32"], "fused kernel differs from the torch path"
print("ok")
""" % (METRICS, PAIR_METRICS[2:])


@CUDA
def test_cuda_fused_kernel_equals_the_torch_path():  # pragma: no cover - needs a GPU
    """Compiled for the GPU (a fresh process without TRITON_INTERPRET): the fused kernel,
    fp32 and screened, gives the torch path's per-query values and passes its self-check."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run(
        [sys.executable, "-c", _CUDA_SCRIPT], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


@pytest.mark.slow  # starts early (tests/conftest.py: slow modules first)
def test_gpu_benchmark_prints_the_triton_rows_in_the_interpreter(monkeypatch, capsys):
    """bench_gpu.py --triton on --device cpu: the fp32, bf16 and TF32 Triton rows, and
    the fused grouped and image-text rows, run (interpreted) and give today's numbers.
    In this process (TRITON_INTERPRET is already 1; the script's main() is what its
    command line runs): no second interpreter, torch import and Triton start."""
    import importlib.util
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpu.py"
    spec = importlib.util.spec_from_file_location("bench_gpu_under_test", bench)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # the engine's process-wide state the benchmark writes: restored after the test
    monkeypatch.setattr(_triton, "SCREEN_STATS", {"screened": 0, "recomputed": 0})
    monkeypatch.setattr(_triton, "_STATE", {})
    for name in ("RC_TRITON", "RC_TRITON_SCREEN"):
        monkeypatch.delenv(name, raising=False)
    # one program per launch (the interpreter's cost is per program): what is checked here
    # is that every row runs and is compared, not the kernels' tile edges (the tests above)
    monkeypatch.setenv("RC_TRITON_TILE", "64x128x64")
    # small sizes: every row is still printed and compared
    argv = ["--device", "cpu", "--sizes", "60x8", "--skip-full", "--triton", "on"]
    assert module.main(argv + ["--grouped-n", "120", "--image-text", "12"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| 60, 8 |"))
    assert row.count("(same") == 3 and row.count("% screened)") == 2, row
    for key in (
        "grouped",
        "image_text",
    ):  # the fused grouped and image-text kernels, against today's paths
        line = next(line for line in out.splitlines() if line.startswith(f"{key}:"))
        assert "fused" in line and "(same)" in line, line


def test_the_fused_kernels_are_the_cuda_default(monkeypatch):
    """Measured on an H200 (docs/gpu.md): each fused kernel equals the CPU path in every
    exactness case and runs faster than the torch path, so RC_TRITON unset means auto:
    the kernels on CUDA (each after its self-check); RC_TRITON=0 turns all off."""
    from retrieval_checks.engine._backend import Backend

    cuda = Backend("torch", torch.device("cuda", 0))
    checked = []
    monkeypatch.setattr(
        _triton, "self_check", lambda device: checked.append(device) or (True, None)
    )
    monkeypatch.delenv("RC_TRITON", raising=False)
    monkeypatch.setattr(_triton, "_STATE", {})
    assert _triton.mode() == "auto"
    assert _triton.wanted(cuda) is True and len(checked) == 1  # the self-check stays
    assert all(_triton.wanted(cuda, task) for task in ("grouped", "image_text"))
    assert _triton.AUTO_TASKS == {"pass", "grouped", "image_text"}
    monkeypatch.setenv("RC_TRITON", "1")
    assert all(_triton.wanted(cuda, task) for task in ("pass", "grouped", "image_text"))
    monkeypatch.setenv("RC_TRITON", "0")
    assert not any(_triton.wanted(cuda, task) for task in ("pass", "grouped", "image_text"))
    assert _triton.wanted(Backend("torch", torch.device("cpu"))) is False  # CUDA only
