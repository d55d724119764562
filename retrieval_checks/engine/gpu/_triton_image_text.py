"""Image-text retrieval, both directions in one pass over shared tiles, on a fused
Triton kernel (issue 17): each tile of the images x captions score matrix is computed
once and serves image-to-text and text-to-image; no score matrix (not even a block of
one) is written to memory.

What it computes, per fold (``n_i`` images, ``n_c`` captions, ``img(c)`` the image of
caption ``c``): the :class:`~._stream.FirstRanks` of both directions that
:func:`~._evaluate.first_relevant_ranks` gives, from one score per pair,
``S[i, c]`` = the score of image ``i`` as the query and caption ``c`` as the gallery item
(the i2t pass's preparation: images and captions as float32 copies, cosine rows scaled
by ``(q.g * (1/|image|)) * (1/|caption|)``, neg_l2 rows centred on the captions' mean
rounded to integers; then the product ``tl.dot(..., input_precision="ieee")`` (full
fp32, no TF32) and :meth:`~._backend.Backend.finish_scores`'s IEEE operations in its
order):

- i2t, image ``i`` with best own score ``b_i = max_{img(c) = i} S[i, c]``:
  pessimistic rank ``1 + #{c: img(c) != i, S[i, c] >= b_i}``, optimistic ``1 + #{... >
  b_i}``; ``group`` = own captions ``== b_i`` when some other caption ties with ``b_i``,
  else own captions scoring above every other caption below ``b_i`` (the engine's
  definition: same count of non-relevant items ``>=`` and ``==``). An image without
  captions gets 0, 0, 0.
- t2i, caption ``c`` with pair score ``p_c = S[img(c), c]``: ``1 + #{i != img(c):
  S[i, c] >= p_c}`` and ``1 + #{... > p_c}``; ``group`` 1.

Two launches (:mod:`._triton_image_text_kernels`): *pair* (only the tiles holding a
caption's own image) writes ``p_c``; ``b_i`` is their per-image maximum (exact); *count*
(every tile once) compares each score with its row's ``b_i`` and its column's ``p_c``,
sums inside the tile and adds atomically into per-image and per-caption counters. Both
launches compute a pair's score with the same JIT functions at the same tile shape, so
``p_c`` is the very number its column's and its image's row's scores are compared with.

Screening (``RC_TRITON_SCREEN`` = ``bf16`` or ``tf32``): the count launch first computes
each tile with bf16 (or TF32) inputs and fp32 accumulation; with the bound
of :func:`._triton.error_bound` (``|ŝ - s| <= gamma |q| |g|`` on the prepared rows'
norms, rounded up, plus 4 ulp of ``ŝ``) each non-own pair's exact score lies in
``[epi(ŝ - e), epi(ŝ + e)]`` (the epilogue is monotone). If for no non-own pair of the
tile an own score of its image row (a binary search in the row's sorted own pair
scores) or its caption column's pair score lies in that interval, every comparison the
count makes (``>=``, ``==`` against the image's best; ``>=``, ``==`` against the pair
score; which own scores exceed the largest score below the best) has the same outcome
on ``epi(ŝ)`` as on the exact score, and ``epi(ŝ)`` is used; else the whole tile is
recomputed in exact fp32 by the same function the fp32 launch uses. The ranks are
therefore bit for bit the fp32 kernel's. Extra device memory: the sorted own scores
and two norm vectors, ``O(n_i + n_c)``.

Device memory beyond the float32 copies: ``O(n_i + n_c)`` (never the ``n_i x n_c``
matrix).

The contract with the two-pass path: the two passes of the existing path compute a
pair's score twice, with the operands swapped (captions x images for t2i: neg_l2
centres on the images' mean, the GEMM may sum in another order; cosine's epilogue is
symmetric in the two squared norms), so in the last bits a pair's score can differ between its two
directions there. Here a pair has ONE score, the image-side one above, in both
directions: t2i ranks every caption's images by the i2t tile. Hence the fused counts
equal the two-pass path's exactly wherever scores are exact in any order and in either
operand order (e.g. small-integer embeddings with dot, neg_l2 or cosine, ties and
duplicates included), and on general float data wherever no two scores
of a query are within a few ulps of each other (no near ties); within such a near tie
the fused t2i rank follows the image-side score. The i2t direction is the existing i2t
pass's up to the GEMM's summation order.

Switch (one for every fused kernel, :mod:`._triton`): used where
``_triton.wanted(backend)`` holds for the torch backend the fold runs on (CUDA:
``RC_TRITON`` = ``1`` or ``auto`` and the main kernel's self-check; CPU tensors only
inside the tests' ``_triton.on_cpu()``, in Triton's interpreter), for cosine, dot and
neg_l2. Hamming codes (and the numpy / numba CPU paths) stay on the existing two passes,
silently: the numbers are the same. On first use on a CUDA device this kernel checks
itself against a dense reference on a small integer problem; if that fails, or a launch
fails later, a RuntimeWarning says so and the two-pass path serves (the same numbers),
for the rest of the process on that device. The progress bar is not shown on this
path (two launches per fold). The sharded path (``process_group``) does not use it.

:func:`.._fused_tasks.benchmark_image_text` times the two existing passes against the fused pass on one fold
(a benchmark row). triton and torch are imported on first use only (``import retrieval_checks`` loads
neither).
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import InputError, warn_outside
from .._backend import Backend, resolve_backend
from .._inputs import Csr
from .._partial import FirstRanks
from ..counting._counters import sort_within_rows
from . import _triton

__all__ = ["fused_fold", "fused_pass", "dense_first_ranks", "self_check"]

_STATE: dict = {}  # CUDA device -> (ok, reason): this kernel's self-check or a later failure
_KERNELS = None
_NEG_INF_KEY = int(np.array([-np.inf], np.float32).view(np.int32)[0] ^ np.int32(0x7FFFFFFF))


def _kernels():
    """The JIT functions (imports triton on first use)."""
    global _KERNELS
    if _KERNELS is None:
        from . import _triton_image_text_kernels as k

        _KERNELS = {"pair": k.pair_kernel, "count": k.count_kernel}
    return _KERNELS


def _usable(backend, prepare) -> bool:
    """``_triton.wanted`` and, on a CUDA device, this kernel's own self-check (once);
    ``prepare``: the engine's preparation of a fold (:func:`.._fused_tasks.prepare_image_text`)."""
    return _triton.checked_once(
        backend,
        _STATE,
        lambda: self_check(backend.device, prepare),
        _warn,
        task="image_text",
    )


def _warn(where: str, reason: str) -> None:
    warn_outside(
        f"retrieval_checks: the fused image-text kernel is not used on {where} ({reason}); the two "
        "passes of the torch path compute the same ranks instead. Set RC_TRITON=0 to skip the attempt.",
        RuntimeWarning,
    )


def fused_fold(
    images,
    captions,
    cap_image: np.ndarray,
    *,
    prepare,
    similarity: str,
    device,
    max_memory,
    progress=None,
):
    """One fold on the fused kernel: ``(i2t FirstRanks, t2i FirstRanks, backend name)``,
    or None where the kernel does not apply (module docstring) or failed (after a
    RuntimeWarning): the caller then runs the two existing passes. ``cap_image``: the
    image (``0..n_i-1``) of every caption, validated by the caller. ``prepare``: the
    engine's preparation of the i2t problem, ``prepare(images, captions, cap_image,
    similarity, device, max_memory)`` (:func:`.._fused_tasks.prepare_image_text`: the
    task seam hands it over, so this package imports nothing above the counters)."""
    if (
        similarity not in _triton.SIMILARITIES
        or int(images.shape[0]) == 0
        or int(captions.shape[0]) == 0
    ):
        return None
    if not _usable(resolve_backend(device, [images, captions]), prepare):
        return None
    problem = prepare(images, captions, cap_image, similarity, device, max_memory)
    try:
        i2t, t2i = fused_pass(problem, cap_image)
    except Exception as exc:  # a compile or launch failure the self-check did not meet
        reason = f"it failed on a fold ({type(exc).__name__}: {str(exc)[:300]})"
        if problem.backend.is_cuda:
            _STATE[str(problem.backend.device)] = (False, reason)
        _warn(problem.backend.name, reason)
        return None
    return i2t, t2i, problem.backend.name


def fused_pass(
    problem, cap_image: np.ndarray, tile=None, screen=None, stats: dict | None = None
) -> tuple[FirstRanks, FirstRanks]:
    """The two launches on a prepared i2t problem (``problem.Q`` the images,
    ``problem.Gp[:n_g]`` the captions): both directions' :class:`FirstRanks`.
    ``tile``: (BLOCK_M, BLOCK_N, BLOCK_K), default :func:`_triton.tile_shape`
    (``RC_TRITON_TILE``, else :data:`_triton.TILE`; smaller tiles in Triton's
    interpreter). ``screen``: bf16 screening
    of the count launch (None: as ``RC_TRITON_SCREEN`` says); ``stats``, if given,
    receives ``tiles`` and ``recomputed`` (tiles the screened launch computed exactly)."""
    import torch

    ker = _kernels()
    Q = problem.Q
    dev = Q.device
    interp = _triton._interpreting()
    BM, BN, BK = tile or _triton.tile_shape()
    n_i, n_c, d = int(Q.shape[0]), int(problem.n_g), int(Q.shape[1])
    EPI = _triton._EPILOGUE[problem.similarity]
    cap_image = np.asarray(cap_image, np.int64)
    if cap_image.shape != (n_c,) or (n_c and (cap_image.min() < 0 or cap_image.max() >= n_i)):
        raise InputError(f"cap_image must hold one image index in 0..{n_i - 1} per caption ({n_c})")
    # the interpreter resizes its arguments' storage: numpy-backed tensors are copied first
    own = (lambda x: x.clone()) if interp else (lambda x: x.contiguous())  # noqa: E731
    Qc, Gc = own(Q), own(problem.Gp[:n_c])
    dummy = torch.zeros(1, dtype=torch.float32, device=dev)
    QA = dummy if problem.qa is None else own(problem.qa[:n_i])
    GA = dummy if problem.ga is None else own(problem.ga[:n_c])
    ci = torch.tensor(cap_image, dtype=torch.int32, device=dev)
    tiles_m, tiles_n = -(-n_i // BM), -(-n_c // BN)
    keys = np.unique((cap_image // BM) * tiles_n + np.arange(n_c, dtype=np.int64) // BN)
    tm = torch.tensor(keys // tiles_n, dtype=torch.int32, device=dev)
    tn = torch.tensor(keys % tiles_n, dtype=torch.int32, device=dev)
    pair = torch.full((n_c,), math.nan, dtype=torch.float32, device=dev)
    # no fp fusion: the epilogue stays finish_scores' IEEE operations with one rounding each
    ker["pair"][(int(keys.size),)](
        Qc,
        Gc,
        ci,
        QA,
        GA,
        tm,
        tn,
        pair,
        n_i,
        n_c,
        d,
        BM=BM,
        BN=BN,
        BK=BK,
        EPI=EPI,
        enable_fp_fusion=False,
    )
    if bool(torch.isnan(pair).any()):
        raise RuntimeError("the pair launch left caption scores unwritten")
    best = torch.full((n_i,), -math.inf, dtype=torch.float32, device=dev)
    best.scatter_reduce_(0, ci.long(), pair, "amax")
    counters = [torch.zeros(n, dtype=torch.int32, device=dev) for n in (n_i, n_i, n_c, n_c)]
    low = torch.full((n_i,), _NEG_INF_KEY, dtype=torch.int32, device=dev)
    above_i, tied_i, above_t, tied_t = counters
    scr = _screen_inputs(torch, Qc, Gc, pair, cap_image, d, screen)
    recomp = torch.full(
        (tiles_m * tiles_n if scr["SCREEN"] else 1,), -1, dtype=torch.int32, device=dev
    )
    ker["count"][(tiles_m * tiles_n,)](
        Qc,
        Gc,
        ci,
        QA,
        GA,
        pair,
        best,
        above_i,
        tied_i,
        low,
        above_t,
        tied_t,
        scr["own"],
        scr["optr"],
        scr["qn"],
        scr["gn"],
        recomp,
        n_i,
        n_c,
        d,
        tiles_m,
        scr["n_steps"],
        scr["gamma"],
        BM=BM,
        BN=BN,
        BK=BK,
        EPI=EPI,
        SCREEN=scr["SCREEN"],
        EMULATE=interp,
        enable_fp_fusion=False,
    )
    if stats is not None:
        stats.update(
            tiles=tiles_m * tiles_n, recomputed=int((recomp == 1).sum()) if scr["SCREEN"] else None
        )
    host = [x.cpu().numpy() for x in (pair, best, low, above_i, tied_i, above_t, tied_t)]
    pair, best, low = host[0], host[1], _from_key(host[2])
    return _first_ranks(cap_image, pair, best, low, *(x.astype(np.int64) for x in host[3:]))


def _screen_inputs(torch, Qc, Gc, pair, cap_image, d: int, screen) -> dict:
    """The count launch's screening arguments: each image's own pair scores sorted
    (a CSR by image), row norms rounded up, the bound ``gamma`` (bf16 inputs:
    ``_triton.error_bound``); placeholders when not screening (asked, or ``d`` too
    large for a finite bound)."""

    dev = Qc.device
    want = _triton.screening() if screen is None else _triton.screen_code(screen)
    gamma = _triton.error_bound(d, want) if want else math.inf
    if not math.isfinite(gamma):
        one = torch.zeros(1, dtype=torch.float32, device=dev)
        return {
            "SCREEN": False,
            "own": one,
            "optr": torch.zeros(2, dtype=torch.int64, device=dev),
            "qn": one,
            "gn": one,
            "n_steps": 0,
            "gamma": 0.0,
        }
    per_image = np.bincount(cap_image, minlength=int(Qc.shape[0]))
    indptr = np.zeros(per_image.size + 1, np.int64)
    np.cumsum(per_image, out=indptr[1:])
    order = np.argsort(cap_image, kind="stable").astype(np.int64)
    vals = pair[torch.from_numpy(order).to(dev)]
    own_sorted, _ = sort_within_rows(vals, Csr(indptr, order), True)
    return {
        "SCREEN": want,
        "own": own_sorted.contiguous(),
        "optr": torch.tensor(indptr, device=dev),
        "qn": _triton._norms_up(torch, Qc),
        "gn": _triton._norms_up(torch, Gc),
        "n_steps": int(per_image.max()).bit_length(),
        "gamma": float(gamma),
    }


def _from_key(key: np.ndarray) -> np.ndarray:
    """The float32 values of the kernel's order keys (``order_key`` inverted)."""
    key = key.astype(np.int32)
    return np.where(key >= 0, key, key ^ np.int32(0x7FFFFFFF)).astype(np.int32).view(np.float32)


def _first_ranks(
    cap_image, pair, best, low, above_i, tied_i, above_t, tied_t
) -> tuple[FirstRanks, FirstRanks]:
    """Both directions' FirstRanks from the per-image / per-caption counts (module
    docstring): ``pair`` each caption's own score, ``best`` each image's best own score,
    ``low`` each image's largest other-caption score below ``best`` (-inf: none)."""
    n_i = best.size
    has = np.bincount(cap_image, minlength=n_i) > 0
    at_best = np.bincount(cap_image, weights=pair == best[cap_image], minlength=n_i)
    above_low = np.bincount(cap_image, weights=pair > low[cap_image], minlength=n_i)
    group = np.where(tied_i > 0, at_best, above_low).astype(np.int64)
    i2t = FirstRanks(
        np.where(has, 1 + above_i, 0),
        np.where(has, 1 + above_i - tied_i, 0),
        np.where(has, group, 0),
    )
    t2i = FirstRanks(1 + above_t, 1 + above_t - tied_t, np.ones(cap_image.size, np.int64))
    return i2t, t2i


def dense_first_ranks(S: np.ndarray, cap_image: np.ndarray) -> tuple[FirstRanks, FirstRanks]:
    """The same FirstRanks by definition from a dense ``n_i x n_c`` score matrix (the
    self-check's reference; small problems only)."""
    S = np.asarray(S)
    n_i, n_c = S.shape
    own = cap_image[None, :] == np.arange(n_i)[:, None]
    pair = S[cap_image, np.arange(n_c)]
    best = np.full(n_i, -np.inf, S.dtype)
    np.maximum.at(best, cap_image, pair)
    Sn = np.where(own, -np.inf, S)  # other captions / other images only
    above_i = (Sn >= best[:, None]).sum(1)
    tied_i = (Sn == best[:, None]).sum(1)
    low = np.where(Sn < best[:, None], Sn, -np.inf).max(1) if n_c else np.full(n_i, -np.inf)
    above_t = (Sn >= pair[None, :]).sum(0)
    tied_t = (Sn == pair[None, :]).sum(0)
    return _first_ranks(cap_image, pair, best, low, above_i, tied_i, above_t, tied_t)


def self_check(device, prepare) -> tuple[bool, str | None]:
    """This kernel, fp32 and screened, against :func:`dense_first_ranks` on a 29-image,
    83-caption problem of small integers (exact in any order: every score is the same
    number in both), prepared by ``prepare`` (as in :func:`fused_fold`), for every
    supported similarity; (ok, reason if not)."""
    try:
        import torch

        rng = np.random.default_rng(17)
        cap_image = np.repeat(np.arange(29), rng.integers(1, 5, 29))[:83]
        cap_image = np.concatenate([cap_image, rng.integers(0, 29, 83 - cap_image.size)])
        images = rng.integers(-2, 3, size=(29, 10)).astype(np.float32)
        captions = images[cap_image] + rng.integers(-1, 2, size=(83, 10)).astype(np.float32)
        images[7] = images[3]  # duplicated images
        captions[40:50] = captions[10:20]  # duplicated captions of other images
        be = Backend("torch", torch.device(device))
        for similarity, screen in (
            (sim, scr) for sim in _triton.SIMILARITIES for scr in (False, True)
        ):
            problem = prepare(
                torch.from_numpy(images).to(be.device),
                torch.from_numpy(captions).to(be.device),
                cap_image,
                similarity,
                str(be.device),
                None,
            )
            with be.exact_matmul():
                S = problem.Q @ problem.Gp[:83].T
            if problem.qa is not None:
                be.finish_scores(S, similarity, problem.qa, problem.ga[:83])
            got = fused_pass(problem, cap_image, screen=screen)
            want = dense_first_ranks(S.cpu().numpy(), cap_image)
            fields = ("pessimistic", "optimistic", "group")
            for g, w in zip(got, want):
                if not all(np.array_equal(getattr(g, f), getattr(w, f)) for f in fields):
                    return False, (
                        f"its ranks differ from a dense reference in the self-check ({similarity}, "
                        f"screened={screen})"
                    )
    except Exception as exc:  # compilation or launch failure
        return False, f"compiling or running it failed ({type(exc).__name__}: {str(exc)[:300]})"
    return True, None
