"""Image-text retrieval, both directions in one pass, on the fused Triton kernel
(engine/gpu/_triton_image_text.py), run in Triton's interpreter on the CPU.

References: the existing two-pass path on the code path CUDA runs (the torch path,
``_use_kernels=False`` on CPU tensors), the compiled CPU kernels (numba), and a dense
brute force written here from the definitions (float64 scores of the inputs, counts per
row and column). ``TRITON_INTERPRET=1`` is set before triton is first imported;
CUDA-only checks skip without a GPU. The protocols' folds of 1000 images are scaled
down to folds of 24 images (``_fold_slices`` patched) so that the interpreter stays fast.

Cost (28 November 2026, one process at a load of ~14 on the 2-core machine): about 16
CPU-s for the default tests, 5 of them the fresh interpreter that checks triton is not
imported (a subprocess is the point there; since 2bb5116 one subprocess,
interpreter_check.import_probe, serves this file's, test_triton.py's and
test_triton_grouped.py's import checks: whichever runs first in a process pays it);
``--rc-exhaustive`` adds the sweeps.
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

import retrieval_checks as rc  # noqa: E402
from retrieval_checks.engine import Provenance, _image_text  # noqa: E402
from retrieval_checks.engine._fused_tasks import (  # noqa: E402
    benchmark_image_text,
    prepare_image_text,
)
from retrieval_checks.engine.gpu import _triton  # noqa: E402
from retrieval_checks.engine.gpu import _triton_image_text as tit

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
FOLD = 24  # images per fold in the scaled-down 1k / 5fold1k protocols
METRICS = list(rc.IMAGE_TEXT_METRICS) + ["i2t_recall@3", "t2i_recall@2"]
FIELDS = ("pessimistic", "optimistic", "group")


@pytest.fixture
def small_folds(monkeypatch):
    def folds(n_images, protocol):
        if protocol == "all":
            return [(0, n_images)]
        if protocol == "1k":
            return [(0, FOLD)]
        return [(FOLD * f, FOLD * (f + 1)) for f in range(5)]

    monkeypatch.setattr(_image_text, "_fold_slices", folds)


@pytest.fixture
def spy(monkeypatch):
    """Records each fused pass's output (and each fold the existing path ran)."""
    calls = {"fused": [], "two_pass": 0, "memo": None}
    real_pass, real_first = tit.fused_pass, _image_text.first_relevant_ranks

    def fused(problem, cap_image, *args, **kwargs):
        if calls["memo"] is None:
            out = real_pass(problem, cap_image, *args, **kwargs)
        else:  # the same launch's inputs, the same FirstRanks: replayed, not interpreted again
            key = _launch_key(problem, cap_image, args, kwargs)
            if key not in calls["memo"]:
                calls["memo"][key] = real_pass(problem, cap_image, *args, **kwargs)
            out = calls["memo"][key]
        calls["fused"].append((out, np.asarray(cap_image).copy()))
        return out

    def first(*args, **kwargs):
        calls["two_pass"] += 1
        return real_first(*args, **kwargs)

    monkeypatch.setattr(tit, "fused_pass", fused)
    monkeypatch.setattr(_image_text, "first_relevant_ranks", first)
    return calls


def _launch_key(problem, cap_image, args, kwargs):
    """Everything a fused pass reads: the prepared problem's arrays, the captions' images,
    its arguments, and the settings it reads when they are not passed (screen, tile). The
    tie policy is not among them: it is applied to the FirstRanks afterwards."""
    arrays = [problem.Q, problem.Gp[: problem.n_g], problem.qa, problem.ga]
    return (
        problem.similarity,
        tuple(None if a is None else (tuple(a.shape), a.cpu().numpy().tobytes()) for a in arrays),
        np.asarray(cap_image).tobytes(),
        repr(args),
        repr(sorted(kwargs.items())),
        repr(_triton._CPU),
        os.environ.get("RC_TRITON_SCREEN"),
        _triton.tile_shape(),
    )


def _rows_of_norm(rng, n, d, k=3):
    """Rows with exactly k entries +-1 (norm sqrt(k) each, an inexact factor: cosine
    scores are the same number whichever row's factor multiplies first)."""
    X = np.zeros((n, d), np.float32)
    for i in range(n):
        X[i, rng.choice(d, k, replace=False)] = rng.choice([-1.0, 1.0], k)
    return X


def _data(kind, similarity, seed, n_images=130, d=8, empty=(9, 50)):
    """Images, captions (2-5 per image, shuffled; the images ``empty`` without captions)
    and each caption's image. ``int``: tie-heavy small integers with duplicated images
    and captions; ``float``: Gaussian."""
    rng = np.random.default_rng(seed)
    per = rng.integers(2, 6, n_images)
    per[list(empty)] = 0
    cap_img = np.repeat(np.arange(n_images), per)
    n_c = cap_img.size
    if kind == "float":
        images = rng.standard_normal((n_images, d)).astype(np.float32)
        captions = (images[cap_img] + 1.5 * rng.standard_normal((n_c, d))).astype(np.float32)
    elif similarity == "cosine":
        images = _rows_of_norm(rng, n_images, d)
        captions = _rows_of_norm(rng, n_c, d)
        near = rng.random(n_c) < 0.4
        captions[near] = images[cap_img[near]]  # a caption equal to its image
    else:
        images = rng.integers(-2, 3, size=(n_images, d)).astype(np.float32)
        captions = images[cap_img] + rng.integers(-1, 2, size=(n_c, d)).astype(np.float32)
    images[3] = images[2]  # a duplicated image
    captions[10:20] = captions[-10:]  # captions duplicated across images
    perm = rng.permutation(n_c)
    return images, captions[perm], cap_img[perm]


def _brute_force(images, captions, cap_img, similarity):
    """Ranks of both directions from the definitions (:func:`_by_definition`) on the
    float64 scores of every pair, and those scores."""
    I, C = images.astype(np.float64), captions.astype(np.float64)
    if similarity == "cosine":
        S = (I @ C.T) / np.outer(
            np.linalg.norm(I, axis=1), np.linalg.norm(C, axis=1)
        )  # exact products kept tied
    elif similarity == "neg_l2":
        S = -((I[:, None, :] - C[None, :, :]) ** 2).sum(-1)
    else:
        S = I @ C.T
    return (*_by_definition(S, cap_img), S)


def _by_definition(S, cap_img):
    """FirstRanks of both directions from a dense score matrix: per image row / caption
    column, the other items scoring >= and == the best relevant score; group: relevant
    items sharing the best one's (>=, ==) counts."""
    n_i, n_c = S.shape
    i2t = {f: np.zeros(n_i, np.int64) for f in FIELDS}
    for i in range(n_i):
        rel = cap_img == i
        if not rel.any():
            continue
        others = S[i, ~rel]
        counts = [((others >= s).sum(), (others == s).sum()) for s in S[i, rel]]
        b = S[i, rel].max()
        ge, eq = (others >= b).sum(), (others == b).sum()
        i2t["pessimistic"][i], i2t["optimistic"][i] = 1 + ge, 1 + ge - eq
        i2t["group"][i] = sum(c == (ge, eq) for c in counts)
    t2i = {f: np.zeros(n_c, np.int64) for f in FIELDS}
    for c in range(n_c):
        others = np.delete(S[:, c], cap_img[c])
        p = S[cap_img[c], c]
        t2i["pessimistic"][c] = 1 + (others >= p).sum()
        t2i["optimistic"][c] = 1 + (others > p).sum()
        t2i["group"][c] = 1
    return i2t, t2i


def _near_ties(S, cap_img, tol=2e-6) -> int:
    """Scores within ``tol`` (relative) of, but not equal to, a relevant score of their
    image row (other captions) or the pair score of their caption column (other
    images): where the float32 paths could order two scores differently from the
    float64 brute force. Exact equalities (duplicated rows) are ties in every path."""
    n_i, n_c = S.shape
    own = cap_img[None, :] == np.arange(n_i)[:, None]
    bad = 0
    for i in range(n_i):
        gap = np.abs(S[i, own[i]][:, None] - S[i, ~own[i]][None, :])
        bad += int(((gap > 0) & (gap < tol * (1 + np.abs(S[i, ~own[i]])))).sum())
    gap = np.abs(S - S[cap_img, np.arange(n_c)][None, :])
    return bad + int(((gap > 0) & (gap < tol * (1 + np.abs(S))) & ~own).sum())


def _assert_ranks(got, want, where):
    for name, g, w in zip(("i2t", "t2i"), got, want):
        for f in FIELDS:
            np.testing.assert_array_equal(
                getattr(g, f),
                w[f] if isinstance(w, dict) else getattr(w, f),
                err_msg=f"{where}: {name} {f}",
            )


def _run(images, captions, cap_img, *, similarity, protocol, ties, device):
    return rc.evaluate_image_text(
        images,
        captions,
        cap_img,
        metrics=METRICS,
        protocol=protocol,
        similarity=similarity,
        ties=ties,
        device=device,
        n_resamples=100,
        images_without_captions="drop",
    )


def _same_result(a, b, where):
    da, db = a.to_dict(), b.to_dict()
    for key in ("metrics", "intervals", "per_fold", "ties", "tied_share", "n_images", "n_captions"):
        assert da[key] == db[key], f"{where}: {key} differs: {da[key]} != {db[key]}"
    for x, y in zip(a.i2t_ranks + a.t2i_ranks, b.i2t_ranks + b.t2i_ranks):
        np.testing.assert_array_equal(x, y, err_msg=where)


# both data kinds by default (tie-heavy integers, floats), each with one similarity: what
# this checks is host-side (protocols, folds, tie policies, the memo); each similarity's
# fused pass against the brute force: test_fused_pass_equals_brute_force_at_tile_edges,
# the near-tie test and the self-check. The 3 x 2 with --rc-exhaustive.
@pytest.mark.default_cases(
    dict(similarity="cosine", kind="int"),
    dict(similarity="dot", kind="float"),
)
@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
@pytest.mark.parametrize("kind", ["int", "float"])
def test_every_protocol_and_tie_policy_equals_the_two_pass_paths(
    similarity, kind, small_folds, spy, monkeypatch
):
    # the fused pass reads no tie policy: the three policies of a protocol replay one launch
    # per fold (the spy's memo; the screened run is a launch of its own), and the tile is
    # 32x64 (the interpreter's cost is per program): the 5k fold still spans 4 x 8 tiles
    # with partial ones, a fold of 24 images a partial row tile and two caption tiles
    # (tile edges at every shape: test_fused_pass_equals_brute_force_at_tile_edges)
    spy["memo"] = {}
    monkeypatch.setenv("RC_TRITON_TILE", "32x64x16")
    seed = zlib.crc32(f"{similarity}-{kind}".encode())
    for seed in range(seed, seed + 10):  # float data: a draw without near ties
        images, captions, cap_img = _data(kind, similarity, seed)
        if not _near_ties(_brute_force(images, captions, cap_img, similarity)[2], cap_img):
            break
    else:
        pytest.fail("no draw without near ties in 10 seeds")
    keep = np.bincount(cap_img, minlength=images.shape[0]) > 0
    i_kept = images[keep]
    c_local = (np.cumsum(keep) - 1)[cap_img]
    for protocol, folds in (
        ("5k", [(0, int(keep.sum()))]),
        ("1k", [(0, FOLD)]),
        ("5fold1k", [(FOLD * f, FOLD * (f + 1)) for f in range(5)]),
    ):
        # the fused pass does not depend on the tie policy: the 5k fold (the slowest in the
        # interpreter) runs once, under "average", whose tie values hold the other two
        for ties in ("pessimistic", "optimistic", "average") if protocol != "5k" else ("average",):
            kw = dict(similarity=similarity, protocol=protocol, ties=ties)
            spy["fused"].clear()
            spy["two_pass"] = 0
            with _triton.on_cpu():
                fused = _run(images, captions, cap_img, device="torch-cpu", **kw)
            # one fused pass per fold, both directions (the result's provenance)
            assert fused.provenance == Provenance({"triton-image-text": len(folds)}), (
                f"not one fused pass per fold: {fused.provenance}"
            )
            assert len(spy["fused"]) == len(folds)  # its FirstRanks, compared below
            assert fused.tied_share > 0 or kind == "float", "the integer data should be tie-heavy"
            numba = _run(images, captions, cap_img, device="cpu", **kw)
            _same_result(fused, numba, f"{protocol}/{ties} vs the numba path")
            if protocol == "5fold1k" and ties == "average":  # bf16 screening: the same result
                with _triton.on_cpu(screen=True):
                    _same_result(
                        _run(images, captions, cap_img, device="torch-cpu", **kw), fused, "screened"
                    )
                del spy["fused"][len(folds) :]
            if ties != "average":
                continue
            # the brute force, fold by fold, on the FirstRanks themselves
            for (a, b), (got, caps) in zip(folds, spy["fused"]):
                sel = np.flatnonzero((c_local >= a) & (c_local < b))
                i2t, t2i, S = _brute_force(i_kept[a:b], captions[sel], c_local[sel] - a, similarity)
                assert _near_ties(S, c_local[sel] - a) == 0
                np.testing.assert_array_equal(caps, c_local[sel] - a)
                _assert_ranks(got, (i2t, t2i), f"{protocol} fold {a} vs the brute force")
            # the code path CUDA runs today: two torch passes; their FirstRanks too
            two_pass = []

            def recorded(*args, _real=_image_text.first_relevant_ranks, **kwargs):
                out = _real(*args, _use_kernels=False, **kwargs)
                two_pass.append(out[0])
                return out

            with monkeypatch.context() as m:
                m.setattr(_image_text, "first_relevant_ranks", recorded)
                torch_path = _run(images, captions, cap_img, device="torch-cpu", **kw)
            _same_result(fused, torch_path, f"{protocol} vs the torch path")
            for k, (got, _) in enumerate(spy["fused"]):
                _assert_ranks(
                    got,
                    (two_pass[2 * k], two_pass[2 * k + 1]),
                    f"{protocol} fold {k} vs the torch path",
                )


# each tile shape and each similarity once (a Latin square); the 3 x 3 with --rc-exhaustive
@pytest.mark.default_cases(
    dict(tile=(16, 32, 16), similarity="cosine"),
    dict(tile=(32, 16, 8), similarity="dot"),
    dict(tile=(64, 64, 32), similarity="neg_l2"),
)
@pytest.mark.parametrize("tile", [(16, 32, 16), (32, 16, 8), (64, 64, 32)])
@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
def test_fused_pass_equals_brute_force_at_tile_edges(tile, similarity):
    """37 images, ~130 captions and d = 11: multiples of no tile; tie-heavy integers;
    an image without captions (ranks 0, group 0)."""
    images, captions, cap_img = _data("int", similarity, 7, n_images=37, d=11, empty=(9,))
    problem = prepare_image_text(
        torch.from_numpy(images), torch.from_numpy(captions), cap_img, similarity, "torch-cpu", None
    )
    got = tit.fused_pass(problem, cap_img, tile)
    i2t, t2i, S = _brute_force(images, captions, cap_img, similarity)
    assert _near_ties(S, cap_img) == 0
    assert got[0].pessimistic[9] == 0 and (got[0].pessimistic > 0).sum() == 36
    assert (i2t["pessimistic"] != i2t["optimistic"]).any() and (
        t2i["pessimistic"] != t2i["optimistic"]
    ).any()
    _assert_ranks(got, (i2t, t2i), f"tile {tile}")


def test_one_score_per_pair_on_integer_rows_of_different_norms():
    """The documented contract: integer cosine rows of different norms; the fused ranks
    of BOTH directions are those of the image-side float32 scores (torch's product of
    the i2t pass's prepared rows, exact for integers, and its score epilogue), and equal
    the existing two passes' ranks in both directions. (Before the cosine epilogue
    became sign(m) sqrt(m^2 / (|q|^2 |g|^2)), issue 25, the t2i pass multiplied the
    factors in the other order and its ties differed from the fused pass's on this very
    data; now a pair's score is one number whichever side is the query.)"""
    from retrieval_checks.engine._backend import Backend
    from retrieval_checks.engine._evaluate import first_relevant_ranks
    from retrieval_checks.engine._inputs import Csr

    rng = np.random.default_rng(6)
    cap_img = np.repeat(np.arange(40), 3)
    images = torch.from_numpy(rng.integers(-3, 4, size=(40, 6)).astype(np.float32))
    captions = torch.from_numpy(rng.integers(-3, 4, size=(120, 6)).astype(np.float32))
    problem = prepare_image_text(images, captions, cap_img, "cosine", "torch-cpu", None)
    got = tit.fused_pass(problem, cap_img)
    S = problem.Q @ problem.Gp[:120].T
    Backend("torch", torch.device("cpu")).finish_scores(S, "cosine", problem.qa, problem.ga[:120])
    _assert_ranks(got, _by_definition(S.numpy(), cap_img), "vs the image-side scores")
    kw = dict(similarity="cosine", device="torch-cpu", max_memory=None, _use_kernels=False)
    order = np.argsort(cap_img, kind="stable")
    i2t, _ = first_relevant_ranks(images, captions, Csr(np.arange(0, 121, 3), order), **kw)
    t2i, _ = first_relevant_ranks(captions, images, Csr(np.arange(121), cap_img), **kw)
    _assert_ranks((got[0],), (i2t,), "i2t vs the existing i2t pass")
    _assert_ranks((got[1],), (t2i,), "t2i vs the existing t2i pass")


@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
def test_screened_equals_the_fp32_kernel_bit_for_bit_on_near_ties(similarity):
    """bf16 screening with exact recompute: captions close to their image (most tiles
    far from every threshold: screened only), plus exact and 1-ulp duplicates of other
    images' captions, an image duplicated with 1-ulp noise (near ties: recomputed). The
    ranks equal the fp32 kernel's in every field, and both kinds of tile occur. 32x64
    tiles: 3 x 4 programs a launch (the interpreter's cost is per program), of which
    4-6 recomputed (the near ties sit in the first row and column tiles), instead of
    35 with the interpreter's 16x32 (3x the CPU time for the same branches)."""
    rng = np.random.default_rng(zlib.crc32(similarity.encode()))
    n_i, d = 70, 24
    cap_img = np.repeat(np.arange(n_i), rng.integers(2, 5, n_i))
    images = rng.standard_normal((n_i, d)).astype(np.float32)
    captions = (images[cap_img] + 0.05 * rng.standard_normal((cap_img.size, d))).astype(np.float32)
    far = np.flatnonzero(cap_img >= 40)[:6]  # captions of images 40.. copied under image 2 and 3
    captions[:3] = captions[far[:3]]
    captions[3:6] = np.nextafter(captions[far[3:]], np.float32(np.inf))
    images[5] = np.nextafter(images[4], np.float32(-np.inf))
    problem = prepare_image_text(
        torch.from_numpy(images), torch.from_numpy(captions), cap_img, similarity, "torch-cpu", None
    )
    tile = (32, 64, 32)
    exact = tit.fused_pass(problem, cap_img, screen=False, tile=tile)
    for screen in ("bf16", "tf32"):
        stats = {}
        screened = tit.fused_pass(problem, cap_img, screen=screen, stats=stats, tile=tile)
        assert 0 < stats["recomputed"] < stats["tiles"], (screen, stats)
        _assert_ranks(screened, exact, f"screened ({screen}) vs fp32")
    assert (exact[0].pessimistic != exact[0].optimistic).any() or (
        exact[1].pessimistic != exact[1].optimistic
    ).any()


def _two_passes(result):
    """Both directions of the one fold ran on the engine's pass, not the fused kernel."""
    prov = result.provenance
    assert prov is not None and "triton-image-text" not in prov.blocks, prov
    assert sum(prov.blocks.values()) >= 2, prov  # a block or more each way


def test_off_switch_numpy_path_and_hamming_stay_on_the_two_passes():
    """Outside ``on_cpu`` (CPU tensors), on the numpy / numba path and for Hamming codes
    the fused kernel never runs; the numbers are the two passes'."""
    images, captions, cap_img = _data("int", "dot", 1, n_images=30, empty=())
    kw = dict(similarity="dot", protocol="5k", ties="pessimistic")
    _two_passes(_run(images, captions, cap_img, device="torch-cpu", **kw))
    with _triton.on_cpu():
        _two_passes(_run(images, captions, cap_img, device="numpy", **kw))
        bits = (images > 0).astype(np.float32), (captions > 0).astype(np.float32)
        _two_passes(_run(*bits, cap_img, device="torch-cpu", **dict(kw, similarity="hamming")))


def test_a_kernel_failure_warns_and_the_two_passes_give_the_same_result(monkeypatch):
    images, captions, cap_img = _data("int", "neg_l2", 2, n_images=30, empty=())
    kw = dict(similarity="neg_l2", protocol="5k", ties="average")
    with _triton.on_cpu():
        want = _run(images, captions, cap_img, device="torch-cpu", **kw)
    assert want.provenance == Provenance({"triton-image-text": 1}), want.provenance

    def broken(problem, cap_image, *args, **kwargs):
        raise RuntimeError("forced compile failure")

    monkeypatch.setattr(tit, "fused_pass", broken)
    with _triton.on_cpu(), pytest.warns(RuntimeWarning, match="forced compile failure"):
        got = _run(images, captions, cap_img, device="torch-cpu", **kw)
    _two_passes(got)
    _same_result(got, want, "after the fallback")


def test_self_check_passes_and_catches_a_miscount(monkeypatch):
    """The production self-check passes, and fails on a miscount. 32x128 tiles: its 29 x
    83 problem is one partial tile per launch, one program instead of the interpreter's
    6 (tile edges: test_fused_pass_equals_brute_force_at_tile_edges)."""
    monkeypatch.setenv("RC_TRITON_TILE", "32x128x16")
    assert tit.self_check("cpu", prepare_image_text) == (True, None)
    real = tit.fused_pass

    def one_off(problem, cap_image, *args, **kwargs):
        i2t, t2i = real(problem, cap_image, *args, **kwargs)
        t2i.optimistic[5] += 1
        return i2t, t2i

    monkeypatch.setattr(tit, "fused_pass", one_off)
    ok, reason = tit.self_check("cpu", prepare_image_text)
    assert not ok and "differ" in reason


def test_a_failed_self_check_on_cuda_warns_once_and_the_two_passes_serve(monkeypatch):
    from retrieval_checks.engine._backend import Backend

    fake_cuda = Backend("torch", torch.device("cuda", 0))
    monkeypatch.setattr(tit, "_STATE", {})
    monkeypatch.setattr(_triton, "wanted", lambda backend, task: task == "image_text")
    monkeypatch.setattr(tit, "self_check", lambda device, prepare: (False, "forced failure"))
    with pytest.warns(RuntimeWarning, match="forced failure"):
        assert tit._usable(fake_cuda, prepare_image_text) is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tit._usable(fake_cuda, prepare_image_text) is False  # decided once per device
    monkeypatch.setattr(_triton, "wanted", lambda backend, task: False)
    monkeypatch.setattr(tit, "_STATE", {})
    monkeypatch.setattr(
        tit,
        "self_check",
        lambda device, prepare: pytest.fail("the self-check ran with the switch off"),
    )
    assert tit._usable(fake_cuda, prepare_image_text) is False


def test_the_sharded_path_is_unaffected(tmp_path):
    """``process_group``: its own sharded passes (one process group of one rank here),
    the fused kernel not used, the same result as one process."""
    import torch.distributed as dist

    images, captions, cap_img = _data("int", "cosine", 4, n_images=30, empty=())
    kw = dict(similarity="cosine", protocol="5k", ties="pessimistic")
    want = _run(images, captions, cap_img, device="numpy", **kw)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'init'}", rank=0, world_size=1)
    try:
        with _triton.on_cpu():
            got = rc.evaluate_image_text(
                images,
                captions,
                cap_img,
                metrics=METRICS,
                device="torch-cpu",
                n_resamples=100,
                process_group=dist.group.WORLD,
                **kw,
            )
    finally:
        dist.destroy_process_group()
    _two_passes(got)
    assert got.provenance.sharded
    _same_result(got, want, "sharded")


def test_evaluating_image_text_does_not_import_triton():
    """A fresh interpreter evaluating image-text on device="numpy" loads no triton (the
    one subprocess of interpreter_check.import_probe)."""
    assert import_probe()["image_text"] is False


# compiled for sm_90 and sm_80 without a GPU: tests/engine/test_triton_compile.py (both
# kernels, each epilogue, exact and under each screen), in one process with the other kernels


_CUDA_SCRIPT = """
import warnings, numpy as np, retrieval_checks as rc, os
rng = np.random.default_rng(0)
cap = np.repeat(np.arange(1500), rng.integers(1, 6, 1500))
images = rng.integers(-2, 3, size=(1500, 64)).astype(np.float32)
captions = images[cap] + rng.integers(-1, 2, size=(cap.size, 64)).astype(np.float32)
images[1::7] = images[0::7][: images[1::7].shape[0]]
out = {}
for sim in ("dot", "neg_l2"):
    for flag, screen in (("0", "0"), ("1", "0"), ("1", "1")):
        os.environ["RC_TRITON"], os.environ["RC_TRITON_SCREEN"] = flag, screen
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            r = rc.evaluate_image_text(images, captions, cap, similarity=sim, device="cuda", n_resamples=0)
        out[flag + screen] = (r.to_dict()["metrics"], r.to_dict()["ties"],
                              [x.tolist() for x in r.i2t_ranks + r.t2i_ranks])
    assert out["00"] == out["10"] == out["11"], "fused image-text kernel differs from the two torch passes: " + sim
from retrieval_checks.engine.gpu import _triton_image_text as tit
assert tit._STATE and all(ok for ok, _ in tit._STATE.values()), tit._STATE
print("ok")
"""


@CUDA
def test_cuda_fused_image_text_equals_the_two_torch_passes():  # pragma: no cover - needs a GPU
    """Compiled for the GPU (a fresh process without TRITON_INTERPRET): self-check
    passed, and the fused pass, fp32 and screened, gives the two torch passes' results
    on tie-heavy data."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run(
        [sys.executable, "-c", _CUDA_SCRIPT], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_the_benchmark_helper_runs_in_the_interpreter():
    images, captions, cap_img = _data("int", "dot", 5, n_images=20, empty=())
    row = benchmark_image_text(
        torch.from_numpy(images),
        torch.from_numpy(captions),
        cap_img,
        similarity="dot",
        device="cpu",
    )
    assert row["same"] is True and row["two_pass_s"] > 0 and row["fused_s"] > 0
