"""Image-text retrieval, both directions in one pass, on the fused Triton kernel
(engine/_triton_image_text.py), run in Triton's interpreter on the CPU.

References: the existing two-pass path on the code path CUDA runs (the torch path,
``_use_kernels=False`` on CPU tensors), the compiled CPU kernels (numba), and a dense
brute force written here from the definitions (float64 scores of the inputs, counts per
row and column). ``TRITON_INTERPRET=1`` is set before triton is first imported;
CUDA-only checks skip without a GPU. The protocols' folds of 1000 images are scaled
down to folds of 24 images (``_fold_slices`` patched) so that the interpreter stays fast.
"""

from __future__ import annotations

import functools
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
from retrieval_checks.engine import _image_text, _triton, _triton_image_text as tit  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1" or (
        "retrieval_checks.engine._triton_kernels" in sys.modules and not _triton._interpreting()):
    pytest.skip("TRITON_INTERPRET is not 1 in this process: the kernel would need a GPU", allow_module_level=True)

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the kernel compiles for it)")
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
    calls = {"fused": [], "two_pass": 0}
    real_pass, real_first = tit.fused_pass, _image_text.first_relevant_ranks

    def fused(problem, cap_image, tile=None):
        out = real_pass(problem, cap_image, tile)
        calls["fused"].append((out, np.asarray(cap_image).copy()))
        return out

    def first(*args, **kwargs):
        calls["two_pass"] += 1
        return real_first(*args, **kwargs)

    monkeypatch.setattr(tit, "fused_pass", fused)
    monkeypatch.setattr(_image_text, "first_relevant_ranks", first)
    return calls


def _rows_of_norm(rng, n, d, k=4):
    """Rows with exactly k entries +-1 (norm sqrt(k) each: cosine scores are the same
    number whichever factor multiplies first)."""
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
    """FirstRanks of both directions from the definitions: float64 scores of every
    pair, then per image row / caption column the other items scoring >= and == the
    best relevant score; group: relevant items sharing the best one's (>=, ==) counts."""
    I, C = images.astype(np.float64), captions.astype(np.float64)
    if similarity == "cosine":
        S = (I / np.linalg.norm(I, axis=1, keepdims=True)) @ (C / np.linalg.norm(C, axis=1, keepdims=True)).T
    elif similarity == "neg_l2":
        S = -((I[:, None, :] - C[None, :, :]) ** 2).sum(-1)
    else:
        S = I @ C.T
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
    return i2t, t2i, S


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
            np.testing.assert_array_equal(getattr(g, f), w[f] if isinstance(w, dict) else getattr(w, f),
                                          err_msg=f"{where}: {name} {f}")


def _run(images, captions, cap_img, *, similarity, protocol, ties, device):
    return rc.evaluate_image_text(images, captions, cap_img, metrics=METRICS, protocol=protocol,
                                  similarity=similarity, ties=ties, device=device, n_resamples=20,
                                  images_without_captions="drop")


def _same_result(a, b, where):
    da, db = a.to_dict(), b.to_dict()
    for key in ("metrics", "intervals", "per_fold", "ties", "tied_share", "n_images", "n_captions"):
        assert da[key] == db[key], f"{where}: {key} differs: {da[key]} != {db[key]}"
    for x, y in zip(a.i2t_ranks + a.t2i_ranks, b.i2t_ranks + b.t2i_ranks):
        np.testing.assert_array_equal(x, y, err_msg=where)


@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
@pytest.mark.parametrize("kind", ["int", "float"])
def test_every_protocol_and_tie_policy_equals_the_two_pass_paths(similarity, kind, small_folds, spy, monkeypatch):
    seed = zlib.crc32(f"{similarity}-{kind}".encode())
    images, captions, cap_img = _data(kind, similarity, seed)
    while _near_ties(_brute_force(images, captions, cap_img, similarity)[2], cap_img):  # float data: no near ties
        seed += 1
        images, captions, cap_img = _data(kind, similarity, seed)
    keep = np.bincount(cap_img, minlength=images.shape[0]) > 0
    i_kept = images[keep]
    c_local = (np.cumsum(keep) - 1)[cap_img]
    for protocol, folds in (("5k", [(0, int(keep.sum()))]), ("1k", [(0, FOLD)]),
                            ("5fold1k", [(FOLD * f, FOLD * (f + 1)) for f in range(5)])):
        # the fused pass does not depend on the tie policy: the 5k fold (the slowest in the
        # interpreter) runs once, under "average", whose tie values hold the other two
        for ties in ("pessimistic", "optimistic", "average") if protocol != "5k" else ("average",):
            kw = dict(similarity=similarity, protocol=protocol, ties=ties)
            spy["fused"].clear()
            spy["two_pass"] = 0
            with _triton.on_cpu():
                fused = _run(images, captions, cap_img, device="torch-cpu", **kw)
            assert len(spy["fused"]) == len(folds) and spy["two_pass"] == 0, "not one fused pass per fold"
            numba = _run(images, captions, cap_img, device="cpu", **kw)
            _same_result(fused, numba, f"{protocol}/{ties} vs the numba path")
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
                _assert_ranks(got, (two_pass[2 * k], two_pass[2 * k + 1]), f"{protocol} fold {k} vs the torch path")


@pytest.mark.parametrize("tile", [(16, 32, 16), (32, 16, 8), (64, 64, 32)])
@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
def test_fused_pass_equals_brute_force_at_tile_edges(tile, similarity):
    """37 images, ~130 captions and d = 11: multiples of no tile; tie-heavy integers;
    an image without captions (ranks 0, group 0)."""
    images, captions, cap_img = _data("int", similarity, 7, n_images=37, d=11, empty=(9,))
    problem = tit._prepare(torch.from_numpy(images), torch.from_numpy(captions), cap_img, similarity, "torch-cpu",
                           None)
    got = tit.fused_pass(problem, cap_img, tile)
    i2t, t2i, S = _brute_force(images, captions, cap_img, similarity)
    assert _near_ties(S, cap_img) == 0
    assert got[0].pessimistic[9] == 0 and (got[0].pessimistic > 0).sum() == 36
    assert (i2t["pessimistic"] != i2t["optimistic"]).any() and (t2i["pessimistic"] != t2i["optimistic"]).any()
    _assert_ranks(got, (i2t, t2i), f"tile {tile}")
