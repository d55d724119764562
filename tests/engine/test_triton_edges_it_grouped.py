"""Adversarial edge cases for the fused image-text and grouped-recall Triton kernels
(engine/gpu/_triton_image_text.py, engine/gpu/_triton_grouped.py), run in Triton's interpreter.

References, compared with ``==``: the numpy / numba CPU paths (``device="numpy"``,
``backend=None``), a dense brute force of the definitions on float64 scores of small
integers (exact in any order), and, for screening, the fp32 kernel itself. Cases the
kernels' own tests do not cover: one image, one caption per image, one image with more
captions than a tile, identical captions / images, dropped images with shuffled
captions, the 1k and 5fold1k protocols at their minimum sizes, extreme cosine scales
under bf16 / TF32 screening, odd ``RC_TRITON_TILE`` shapes; grouped recall with
singleton labels, a group split by a tiny memory budget, one label for every item,
three repeats, a gallery missing some queries' ids, string labels, identical
embeddings, every tie policy and ``empty_queries`` mode, screening on near ties.
``TRITON_INTERPRET=1`` is set before triton is first imported.

Cost: about 21 CPU-s for the default run (issue 27: 83 worker-s before): problems of
20-100 items, sized by the tiles they must cross; tie policies through one ``average``
run's tie values where the fused pass does not see the policy; the 5fold1k protocol at
5000 images, other tile shapes, policies and screens with ``--rc-exhaustive``.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import retrieval_checks as rc  # noqa: E402
from retrieval_checks.engine import Provenance, _grouped  # noqa: E402
from retrieval_checks.engine._backend import Backend  # noqa: E402
from retrieval_checks.engine._fused_tasks import grouped_kernel, prepare_image_text  # noqa: E402
from retrieval_checks.engine.gpu import _triton, _triton_grouped  # noqa: E402
from retrieval_checks.engine.gpu import _triton_image_text as tit  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1" or (
    "retrieval_checks.engine.gpu._triton_kernels" in sys.modules and not _triton._interpreting()
):
    pytest.skip(
        "TRITON_INTERPRET is not 1 in this process: the kernel would need a GPU",
        allow_module_level=True,
    )

from interpreter_check import interpreter_blocker  # noqa: E402

if interpreter_blocker():  # an interpreter that cannot run any kernel (triton 3.6 + numpy 2.4)
    pytest.skip(interpreter_blocker(), allow_module_level=True)

CPU = Backend("torch", torch.device("cpu"))
FIELDS = ("pessimistic", "optimistic", "group")
IT_METRICS = list(rc.IMAGE_TEXT_METRICS) + ["i2t_recall@2", "t2i_recall@3"]


# ============================================================================ image-text
def _dense(images, captions, cap_img, similarity):
    """float64 scores of every pair (exact for small integers)."""
    I, C = images.astype(np.float64), captions.astype(np.float64)
    if similarity == "neg_l2":
        return -((I[:, None, :] - C[None, :, :]) ** 2).sum(-1)
    return I @ C.T


def _assert_ranks(got, want, where):
    for name, g, w in zip(("i2t", "t2i"), got, want):
        for f in FIELDS:
            np.testing.assert_array_equal(
                getattr(g, f), getattr(w, f), err_msg=f"{where}: {name} {f}"
            )


def _fused_vs_dense(images, captions, cap_img, similarity, tile=None, screen=False):
    problem = prepare_image_text(
        torch.from_numpy(images), torch.from_numpy(captions), cap_img, similarity, "torch-cpu", None
    )
    got = tit.fused_pass(problem, cap_img, tile, screen=screen)
    want = tit.dense_first_ranks(_dense(images, captions, cap_img, similarity), cap_img)
    _assert_ranks(got, want, f"{similarity} tile={tile} screen={screen}")
    return got


def _same_result(a, b, where):
    da, db = a.to_dict(), b.to_dict()
    for key in ("metrics", "intervals", "per_fold", "ties", "tied_share", "n_images", "n_captions"):
        assert da[key] == db[key], f"{where}: {key} differs: {da[key]} != {db[key]}"
    for x, y in zip(a.i2t_ranks + a.t2i_ranks, b.i2t_ranks + b.t2i_ranks):
        np.testing.assert_array_equal(x, y, err_msg=where)


def _public(
    images,
    captions,
    cap_img,
    *,
    similarity="dot",
    protocol="5k",
    ties="average",
    screen=False,
    drop=False,
    n_resamples=100,
):
    kw = dict(
        metrics=IT_METRICS,
        protocol=protocol,
        similarity=similarity,
        ties=ties,
        n_resamples=n_resamples,
        images_without_captions="drop" if drop else "error",
    )
    want = rc.evaluate_image_text(images, captions, cap_img, device="numpy", **kw)
    with _triton.on_cpu(screen=screen):
        got = rc.evaluate_image_text(images, captions, cap_img, device="torch-cpu", **kw)
    _same_result(got, want, f"{similarity}/{protocol}/{ties}/screen={screen}")
    # the kernel ran each fold both ways in one pass; numpy's side ran its two passes
    assert got.provenance == Provenance({"triton-image-text": len(got.i2t_ranks)}), got.provenance
    assert "triton-image-text" not in want.provenance.blocks, want.provenance
    return got


def _ints(rng, n, d, lo=-2, hi=3):
    return rng.integers(lo, hi, size=(n, d)).astype(np.float32)


@pytest.mark.parametrize("similarity", ["dot", "neg_l2", "cosine"])
def test_one_image(similarity):
    """One image, its captions only: no other item in either direction; ranks 1."""
    rng = np.random.default_rng(1)
    images = _ints(rng, 1, 5) + np.float32(3)
    captions = _ints(rng, 4, 5)
    cap = np.zeros(4, np.int64)
    got = _public(images, captions, cap, similarity=similarity)
    assert got["i2t_recall@1"] == 1.0 and got["t2i_recall@1"] == 1.0
    for screen in (False, "bf16", "tf32"):
        if similarity != "cosine":
            out = _fused_vs_dense(images, captions, cap, similarity, screen=screen)
            assert out[0].pessimistic.tolist() == [1] and out[1].pessimistic.tolist() == [1] * 4


@pytest.mark.default_cases(
    dict(similarity="dot", screen=False),
    dict(similarity="neg_l2", screen="bf16"),
    dict(similarity="dot", screen="tf32"),
)
@pytest.mark.parametrize("similarity", ["dot", "neg_l2"])
@pytest.mark.parametrize("screen", [False, "bf16", "tf32"])
def test_one_caption_per_image_and_shuffled_captions(similarity, screen):
    rng = np.random.default_rng(2)
    images = _ints(rng, 45, 6)
    perm = rng.permutation(45)
    cap = perm.astype(np.int64)  # caption c belongs to image perm[c]: out of image order
    captions = images[cap] + _ints(rng, 45, 6, -1, 2)
    images[4] = images[9]  # a duplicated image
    _fused_vs_dense(images, captions, cap, similarity, screen=screen)
    _public(images, captions, cap, similarity=similarity, screen=screen)


@pytest.mark.parametrize("similarity", ["dot", "neg_l2"])
def test_one_image_with_more_captions_than_a_tile(similarity):
    """Image 3 owns 40 captions (more than one BN = 32 tile's columns, at both BN, and a
    binary search over 40 own scores under screening); the others one or two each."""
    rng = np.random.default_rng(3)
    cap = np.concatenate([np.full(40, 3), np.repeat(np.arange(10), rng.integers(1, 3, 10))])
    cap = cap[rng.permutation(cap.size)]
    images = _ints(rng, 10, 7)
    captions = images[cap] + _ints(rng, cap.size, 7, -1, 2)
    for screen in (False, "bf16", "tf32"):  # BN = 16: 40 own captions over three tiles
        _fused_vs_dense(images, captions, cap, similarity, tile=(16, 16, 16), screen=screen)
    # BN = 32 (two tiles), screened: the binary search over the 40 own scores
    _fused_vs_dense(images, captions, cap, similarity, tile=(16, 32, 16), screen="bf16")
    _public(images, captions, cap, similarity=similarity, screen="bf16")


@pytest.mark.parametrize("similarity", ["dot", "neg_l2", "cosine"])
def test_all_captions_identical(similarity):
    """Every score of an image row is one number: every caption ties with every other."""
    rng = np.random.default_rng(4)
    images = _ints(rng, 25, 5) + np.float32(4)
    cap = np.repeat(np.arange(25), rng.integers(1, 4, 25))
    captions = np.tile(_ints(rng, 1, 5) + np.float32(1), (cap.size, 1))
    if similarity != "cosine":
        got = _fused_vs_dense(images, captions, cap, similarity)
        assert (got[0].optimistic == 1).all() and (
            got[0].pessimistic == cap.size - np.bincount(cap) + 1
        ).all()
    for screen in (False, "bf16"):
        res = _public(
            images, captions, cap, similarity=similarity, ties="pessimistic", screen=screen
        )
        assert res.tied_share > 0


# the fused pass's ranks do not depend on the policy; "average" compares every policy's
# values (the result's tie values); the policies one by one with --rc-exhaustive
@pytest.mark.default_cases(dict(ties="average"))
@pytest.mark.parametrize("similarity", ["dot", "neg_l2", "cosine"])
@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "average"])
def test_all_images_identical(similarity, ties):
    rng = np.random.default_rng(5)
    images = np.tile(_ints(rng, 1, 6) + np.float32(2), (30, 1))
    cap = np.repeat(np.arange(30), 2)[rng.permutation(60)]
    captions = _ints(rng, cap.size, 6)
    if similarity != "cosine":
        got = _fused_vs_dense(images, captions, cap, similarity, screen="tf32")
        assert (got[1].pessimistic == 30).all() and (got[1].optimistic == 1).all()
    _public(images, captions, cap, similarity=similarity, ties=ties)


@pytest.mark.parametrize("similarity", ["dot", "cosine"])
def test_images_without_captions_dropped_with_shuffled_captions(similarity):
    rng = np.random.default_rng(6)
    n = 40
    per = rng.integers(1, 4, n)
    per[[0, 17, 18, 39]] = 0  # the first, two adjacent and the last image have none
    cap = np.repeat(np.arange(n), per)
    cap = cap[rng.permutation(cap.size)]
    images = _ints(rng, n, 5)
    captions = images[cap] + _ints(rng, cap.size, 5, -1, 2)
    res = _public(images, captions, cap, similarity=similarity, drop=True, screen="bf16")
    assert res.config["images_dropped"] == 4 and res.n_images == n - 4


# '1k' by default (the library's own fold slicing on the fused path, at 1000 images);
# '5fold1k' (the same fused pass on five such folds, ~5 s in the interpreter) with
# --rc-exhaustive: test_triton_image_text.py runs the five-fold protocol on the fused path
# with small folds, and tests/engine/test_image_text.py its fold slicing at 5000 images
@pytest.mark.default_cases(dict(protocol="1k"))
@pytest.mark.parametrize("protocol,n", [("1k", 1000), ("5fold1k", 5000)])
def test_minimum_1k_and_5fold1k_protocols(protocol, n, monkeypatch):
    """1000 images for '1k' and 5000 for '5fold1k' (their minimum sizes), one caption
    each, small integers; a large tile keeps the interpreter's tile count small."""
    monkeypatch.setenv("RC_TRITON_TILE", "128x256x16")
    rng = np.random.default_rng(7)
    images = _ints(rng, 5000, 4, -1, 2)
    cap = rng.permutation(5000).astype(np.int64)
    captions = images[cap] + _ints(rng, 5000, 4, -1, 2)
    sel = np.flatnonzero(cap < n)
    res = _public(
        images[:n], captions[sel], cap[sel], similarity="dot", protocol=protocol, n_resamples=0
    )
    assert len(res.i2t_ranks) == (1 if protocol == "1k" else 5)


# every pair of parameter values at least once (pairwise); the 12 with --rc-exhaustive
@pytest.mark.default_cases(
    dict(similarity="cosine", scale=2.0**60, screen="bf16"),
    dict(similarity="cosine", scale=2.0**-50, screen="tf32"),
    dict(similarity="dot", scale=2.0**60, screen="tf32"),
    dict(similarity="dot", scale=2.0**-50, screen="bf16"),
    dict(similarity="neg_l2", scale=2.0**60, screen="bf16"),
    dict(similarity="neg_l2", scale=2.0**-50, screen="tf32"),
)
@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
@pytest.mark.parametrize("scale", [2.0**60, 2.0**-50])
@pytest.mark.parametrize("screen", ["bf16", "tf32"])
def test_screening_at_extreme_scales(similarity, scale, screen):
    """Float data scaled by huge / tiny powers of two (cosine: any scale; dot / neg_l2:
    the largest the input check accepts), with near ties (1-ulp copies of other
    images' captions): screened ranks equal the fp32 kernel's."""
    if similarity != "cosine":
        scale = {2.0**60: 2.0**30, 2.0**-50: 2.0**-40}[scale]
    rng = np.random.default_rng(8)
    n_i, d = 20, 12
    cap = np.repeat(np.arange(n_i), rng.integers(1, 4, n_i))
    images = rng.standard_normal((n_i, d)).astype(np.float32)
    captions = (images[cap] + 0.3 * rng.standard_normal((cap.size, d))).astype(np.float32)
    captions[:3] = np.nextafter(captions[-3:], np.float32(np.inf))
    images[6] = np.nextafter(images[5], np.float32(-np.inf))
    images, captions = images * np.float32(scale), captions * np.float32(scale)
    problem = prepare_image_text(
        torch.from_numpy(images), torch.from_numpy(captions), cap, similarity, "torch-cpu", None
    )
    exact = tit.fused_pass(problem, cap, screen=False)
    stats = {}
    _assert_ranks(
        tit.fused_pass(problem, cap, screen=screen, stats=stats), exact, f"{screen} x{scale}"
    )
    assert stats["recomputed"] > 0
    # the public call, scaled and unscaled, agrees with itself under screening
    kw = dict(metrics=IT_METRICS, similarity=similarity, n_resamples=0, device="torch-cpu")
    with _triton.on_cpu(screen=False):
        a = rc.evaluate_image_text(images, captions, cap, **kw)
    with _triton.on_cpu(screen=screen):
        b = rc.evaluate_image_text(images, captions, cap, **kw)
    _same_result(b, a, "screened public call")


@pytest.mark.default_cases(
    dict(tile="16x16x16", similarity="dot"), dict(tile="64x32x128", similarity="neg_l2")
)
@pytest.mark.parametrize("tile", ["16x16x16", "64x32x128"])
@pytest.mark.parametrize("similarity", ["dot", "neg_l2"])
def test_rc_triton_tile_shapes(tile, similarity, monkeypatch):
    monkeypatch.setenv("RC_TRITON_TILE", tile)
    rng = np.random.default_rng(9)
    cap = np.repeat(np.arange(20), rng.integers(1, 4, 20))  # 2 x 3 tiles or more at 16x16
    cap = cap[rng.permutation(cap.size)]
    images = _ints(rng, 20, 13)
    captions = images[cap] + _ints(rng, cap.size, 13, -1, 2)
    _fused_vs_dense(images, captions, cap, similarity, tile=_triton.tile_shape(), screen="bf16")
    _public(images, captions, cap, similarity=similarity, screen="tf32")


# ============================================================================ grouped
def _factor(X, similarity):
    sq = (X.astype(np.float64) ** 2).sum(1)
    if similarity == "neg_l2":
        return sq.astype(np.float32)
    if similarity == "cosine":
        return sq.astype(
            np.float32
        )  # squared norms, as Backend.cosine_rows_into gives integer rows
    return None


@pytest.fixture
def g_spy(monkeypatch):
    calls = []
    real = _triton_grouped._launch

    def wrapped(n_work, *args, **meta):
        calls.append(n_work)
        return real(n_work, *args, **meta)

    monkeypatch.setattr(_triton_grouped, "_launch", wrapped)
    return calls


def _gv(
    X,
    y,
    *,
    similarity="dot",
    backend=None,
    G=None,
    gy=None,
    qid="auto",
    gid=None,
    ties="average",
    empty_queries="skip",
    repeats=1,
    max_memory=2**30,
    group_size=3,
    ks=(1, 3),
    n_labels=None,
):
    loo = G is None
    if isinstance(qid, str):
        qid = np.arange(len(y)) if loo else None
    if n_labels is None:
        n_labels = int(max(np.max(y), -1 if gy is None else np.max(gy))) + 1
    lv = np.arange(n_labels)
    return _grouped.grouped_recall_values(
        X,
        y,
        G,
        gy,
        q_ids=qid,
        g_ids=gid,
        ks=list(ks),
        group_size=group_size,
        seed=3,
        repeats=repeats,
        confidence=0.9,
        ties=ties,
        similarity=similarity,
        label_values=lv,
        max_memory=max_memory,
        empty_queries=empty_queries,
        q_factor=_factor(X, similarity),
        g_factor=None if loo else _factor(G, similarity),
        backend=backend,
        fused=None if backend is None else grouped_kernel(backend, similarity),  # as _stages
    )


def _same(a, b, where=""):
    for k in a:
        x, y = a[k], b[k]
        np.testing.assert_array_equal(x.per_query, y.per_query, err_msg=f"{where} per_query@{k}")
        np.testing.assert_array_equal(
            x.group_values, y.group_values, err_msg=f"{where} group_values@{k}"
        )
        np.testing.assert_array_equal(x.group_of_query, y.group_of_query)
        assert (x.value, x.low, x.high, x.tie_values) == (y.value, y.low, y.high, y.tie_values), (
            where
        )
        assert (x.n_queries_used, x.n_queries_skipped, x.n_queries_dropped) == (
            y.n_queries_used,
            y.n_queries_skipped,
            y.n_queries_dropped,
        ), where


def _both(X, y, screen=False, **kw):
    ref = _gv(X, y, backend=None, **kw)
    with _triton.on_cpu(screen=screen):
        got = _gv(X, y, backend=CPU, **kw)
    _same(got, ref, f"{kw.get('similarity', 'dot')} screen={screen}")
    return got, ref


@pytest.mark.default_cases(
    dict(empty_queries="skip", ties="pessimistic"),
    dict(empty_queries="zero", ties="optimistic"),
    dict(empty_queries="skip", ties="average"),
)
@pytest.mark.parametrize("empty_queries", ["skip", "zero"])
@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "average"])
def test_group_size_2_with_singleton_labels(empty_queries, ties, g_spy):
    """Half the labels hold one item: its query has no relevant item in leave-one-out."""
    rng = np.random.default_rng(10)
    y = np.concatenate([np.arange(3), np.repeat(np.arange(3, 20), 4)])  # labels 0..2 singletons
    X = _ints(rng, y.size, 5)
    X[1::3] = X[0::3][: X[1::3].shape[0]]
    got, ref = _both(
        X,
        y,
        group_size=2,
        ties=ties,
        empty_queries=empty_queries,
        similarity="neg_l2",
        repeats=2,
        ks=(1,),
    )
    assert g_spy
    if empty_queries == "skip":
        assert got[1].n_queries_skipped == 3
    else:
        assert np.count_nonzero(got[1].per_query == 0) >= 3


def test_error_mode_on_singletons_raises():
    from retrieval_checks.errors import EmptyQueriesError

    y = np.concatenate([np.arange(3), np.repeat([5, 6], 4)])
    X = _ints(np.random.default_rng(0), y.size, 4)
    with _triton.on_cpu(), pytest.raises(EmptyQueriesError):
        _gv(X, y, backend=CPU, group_size=2, empty_queries="error", ks=(1,))


@pytest.mark.parametrize("similarity", ["dot", "cosine", "neg_l2"])
def test_group_larger_than_the_memory_budget(similarity, g_spy):
    """Two groups of ~50 items with a budget of ~10 query rows besides a gallery: each
    split into query blocks against its whole gallery."""
    rng = np.random.default_rng(11)
    y = rng.integers(0, 6, 100)
    X = _ints(rng, 100, 6)
    budget = 10 * (4 * 6 + 48) + 55 * (4 * 6 + 24)
    _both(X, y, similarity=similarity, group_size=3, max_memory=budget, ties="pessimistic")
    assert len(g_spy) >= 4


def test_every_item_one_label_is_refused_as_on_the_numpy_path():
    """One label cannot form two groups (no interval): refused on both paths, before any launch."""
    from retrieval_checks.errors import InputError

    X = _ints(np.random.default_rng(12), 60, 5)
    y = np.zeros(60, np.int64)
    for backend in (None, CPU):
        with _triton.on_cpu(), pytest.raises(InputError, match="larger than the number of labels"):
            _gv(X, y, backend=backend, group_size=2, ks=(1,))


def test_three_repeats(g_spy):
    rng = np.random.default_rng(13)
    y = rng.integers(0, 12, 90)
    X = _ints(rng, 90, 7)
    got, _ = _both(X, y, similarity="cosine", repeats=3, group_size=3)
    assert len(g_spy) == 3 and got[1].group_values.shape[0] == 3


@pytest.mark.parametrize("empty_queries", ["skip", "zero"])
def test_gallery_with_ids_missing_some_queries(empty_queries, g_spy):
    rng = np.random.default_rng(14)
    Q = _ints(rng, 40, 6)
    G = np.concatenate([Q[:15], _ints(rng, 50, 6)])
    ql, gl = rng.integers(0, 8, 40), rng.integers(0, 8, 65)
    gl[:15] = ql[:15]
    gl[gl == 7] = 6  # label 7 has no gallery item
    qid = np.arange(40) * 10
    gid = np.concatenate([qid[:15], 1000 + np.arange(50)])  # queries 15.. absent from the gallery
    gid[20] = qid[3]  # a second gallery item with query 3's id
    for ties in ("pessimistic", "optimistic"):
        _both(
            Q,
            ql,
            G=G,
            gy=gl,
            qid=qid,
            gid=gid,
            similarity="neg_l2",
            empty_queries=empty_queries,
            ties=ties,
            n_labels=8,
        )
    assert g_spy


@pytest.mark.parametrize("similarity", ["dot", "cosine", "neg_l2"])
def test_all_embeddings_identical(similarity, g_spy):
    """Every score of a row ties: pessimistic rank = all negatives + 1."""
    X = np.tile(np.array([[1.0, -2.0, 3.0]], np.float32), (25, 1))
    y = np.random.default_rng(15).integers(0, 6, 25)
    for screen in (False, "bf16", "tf32"):
        for ties in ("pessimistic", "optimistic"):
            got, _ = _both(
                X, y, similarity=similarity, screen=screen, ties=ties, group_size=3, ks=(1, 8)
            )
            if ties == "optimistic":
                assert got[1].value == 1.0
            else:  # every negative ties with the best relevant item: ranked behind all of them
                assert got[1].value == 0.0
    assert g_spy


# each tie policy and each empty_queries mode once (they meet only on the CPU side, after
# the kernel); the six combinations with --rc-exhaustive
@pytest.mark.default_cases(
    dict(ties="pessimistic", empty="skip"),
    dict(ties="optimistic", empty="zero"),
    dict(ties="average", empty="skip"),
)
@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "average"])
@pytest.mark.parametrize("empty", ["skip", "zero"])
def test_string_labels_through_evaluate(ties, empty, g_spy):
    rng = np.random.default_rng(16)
    X = _ints(rng, 80, 5)
    y = np.array([f"class-{i}" for i in rng.integers(0, 15, 80)])
    kw = dict(
        query_labels=y,
        metrics=["grouped_recall@1", "grouped_recall@4"],
        similarity="neg_l2",
        group_size=4,
        group_repeats=2,
        ties=ties,
        empty_queries=empty,
    )
    ref = rc.evaluate(X, device="numpy", **kw)
    with _triton.on_cpu(screen="bf16"):
        got = rc.evaluate(X, device="torch-cpu", _use_kernels=False, **kw)
    for m in ("grouped_recall@1", "grouped_recall@4"):
        assert got[m] == ref[m], (m, ties, empty)
        assert got.grouped[m].interval == ref.grouped[m].interval
    assert g_spy


@pytest.mark.default_cases(
    dict(similarity="dot", screen="bf16"),
    dict(similarity="cosine", screen="tf32"),
    dict(similarity="neg_l2", screen="bf16"),
)
@pytest.mark.parametrize("similarity", ["dot", "cosine", "neg_l2"])
@pytest.mark.parametrize("screen", ["bf16", "tf32"])
def test_screening_on_near_ties(similarity, screen, g_spy):
    """Negatives one ulp from (and exactly equal to) relevant items of the same group,
    float data: screened == fp32 kernel, and both screening branches ran."""
    rng = np.random.default_rng(17)
    n, d = 96, 10
    y = np.repeat(np.arange(8), 12)
    X = (rng.standard_normal((8, d)) * 2)[y] + 0.2 * rng.standard_normal((n, d))
    X = X.astype(np.float32)
    for i in range(
        0, n - 12, 12
    ):  # label l's first item: copies under label l + 1, ulp off and exact
        X[i + 12] = np.nextafter(X[i], np.float32(np.inf))
        X[i + 13] = X[i + 1]
    with _triton.on_cpu(screen=0):
        exact = _gv(X, y, backend=CPU, similarity=similarity, group_size=4, ties="pessimistic")
    with _triton.on_cpu(screen=screen):
        got = _gv(X, y, backend=CPU, similarity=similarity, group_size=4, ties="pessimistic")
        stats = dict(_triton_grouped.STATS)
    assert stats["screened"] > 0 and stats["exact"] > 0, stats
    _same(got, exact, "screened vs fp32")


@pytest.mark.parametrize("tile", ["16x16x16", "64x32x128", "256x16x16"])
def test_grouped_rc_triton_tile_shapes_with_split_groups(tile, monkeypatch, g_spy):
    """d = 37 (a partial k-block at every BK), groups split by a small budget, every
    similarity, fp32 and bf16-screened, against the numpy path."""
    monkeypatch.setenv("RC_TRITON_TILE", tile)
    rng = np.random.default_rng(18)
    X, y = _ints(rng, 50, 37), rng.integers(0, 12, 50)
    for similarity in ("dot", "cosine", "neg_l2"):
        _both(
            X,
            y,
            similarity=similarity,
            screen="bf16" if similarity == "dot" else False,
            ties="pessimistic",
            max_memory=20000,
        )
    assert len(g_spy) > 3


def test_grouped_duplicate_ids_and_tiny_budgets(g_spy):
    """Leave-one-out with ids shared by several items (they exclude each other), and
    budgets below one group's gallery (a lone unit per chunk)."""
    rng = np.random.default_rng(19)
    X, y = _ints(rng, 60, 5), rng.integers(0, 9, 60)
    qid = rng.integers(0, 20, 60)
    for similarity in ("dot", "neg_l2", "cosine"):
        _both(X, y, similarity=similarity, qid=qid, ties="pessimistic")
    for budget in (64, 2000):
        _both(X, y, similarity="neg_l2", max_memory=budget)
    assert g_spy


def test_grouped_string_ids_separate_gallery_through_evaluate(g_spy):
    rng = np.random.default_rng(20)
    Q = _ints(rng, 70, 5)
    G = np.concatenate([Q[:30], _ints(rng, 40, 5)])
    ql = rng.integers(0, 12, 70)
    gl = np.concatenate([ql[:30], rng.integers(0, 12, 40)])
    qids = np.array([f"id{i}" for i in range(70)])
    gids = np.concatenate([qids[:30], [f"g{i}" for i in range(40)]])
    kw = dict(
        query_labels=ql,
        gallery_labels=gl,
        query_ids=qids,
        gallery_ids=gids,
        metrics=["grouped_recall@1", "grouped_recall@2"],
        similarity="cosine",
        group_size=3,
    )
    ref = rc.evaluate(Q, G, device="numpy", **kw)
    with _triton.on_cpu(screen="tf32"):
        got = rc.evaluate(Q, G, device="torch-cpu", _use_kernels=False, **kw)
    assert g_spy
    for m in kw["metrics"]:
        assert got[m] == ref[m] and got.grouped[m].interval == ref.grouped[m].interval, m


def test_image_text_degenerate_scores_and_input_types():
    """All-zero embeddings (every score 0), neg_l2 with captions equal to their image
    (distance 0: the epilogue's min(., 0)), dot scores of signed zeros, float64 /
    float16 inputs and the repeated-images layout: equal to the numpy path."""
    rng = np.random.default_rng(21)
    cap = np.sort(np.repeat(np.arange(15), rng.integers(1, 4, 15)))
    images = _ints(rng, 15, 6)
    captions = images[cap] + _ints(rng, cap.size, 6, -1, 2)
    for screen in (False, "bf16", "tf32"):
        _public(np.zeros_like(images), np.zeros_like(captions), cap, screen=screen)
        _public(images, images[cap].copy(), cap, similarity="neg_l2", screen=screen)
    signed = np.array([[1, 0], [0, -1], [-1, 0], [0, 1]], np.float32)
    _public(
        signed,
        np.array([[0, -1], [0, 1], [-1, 0], [1, 0], [0, -2]], np.float32),
        np.array([0, 1, 2, 3, 0]),
    )
    for dt in (np.float64, np.float16):
        _public(images.astype(dt), captions.astype(dt), cap, screen="bf16")
    kw = dict(metrics=IT_METRICS, n_resamples=100, similarity="dot")
    cap = np.repeat(np.arange(15), 5)  # the repeated layout: each image repeated 5 times
    captions = images[cap] + _ints(rng, cap.size, 6, -1, 2)
    ref = rc.evaluate_image_text(images[cap], captions, None, device="numpy", **kw)
    with _triton.on_cpu():
        got = rc.evaluate_image_text(
            torch.from_numpy(images[cap]),
            torch.from_numpy(captions),
            None,
            device="torch-cpu",
            **kw,
        )
    _same_result(got, ref, "repeated layout")
    assert got.provenance == Provenance({"triton-image-text": 1}), (
        got.provenance
    )  # _public checks the rest
