"""A fused Triton kernel for the CUDA path: tile product, score epilogue and rank counts
in one pass, without writing the ``b x n`` score block to memory.

What it computes (the counting contract of :mod:`._kernels`): for every relevant
pair score of a query, the number of non-relevant gallery scores ``>=`` it and ``==``
it. Two launches per query block:

1. *extract*: for the tiles that hold a relevant pair only, the tile product and the
   score epilogue, writing each relevant pair's score at its place in the block's
   relevance CSR (label relevance: same label code, self pairs excluded; the place is
   the item's rank among its label's gallery items, minus the row's self items before
   it). The scores are sorted inside each row (as the torch path does).
2. *count*: every tile ``BLOCK_M x BLOCK_N`` of the block: the product (``tl.dot`` with
   ``input_precision="ieee"``: full fp32, no TF32), the same epilogue as
   :meth:`~._backend.Backend.finish_scores` (same IEEE operations in the same order),
   then, for each non-relevant pair (padding, relevant and self pairs masked), two
   binary searches among the row's sorted relevant scores (``right`` = relevant scores
   ``<=`` s, ``left`` = ``<`` s) and atomic adds into difference arrays:
   ``hist[row, right] += 1`` (only ``right > 0`` ever counts) and, when ``left <
   right``, ``ties[row, left] += 1``, ``ties[row, right] -= 1``. Suffix sums of
   ``hist`` and prefix sums of ``ties`` give the counts, as in the torch path.

Both launches compute a pair's score in the same tile, from the same operands, with
the same JIT function and tile shape, so a relevant score is the very number its row's
negatives are compared with (a pair's score never depends on which launch reads it).

Screening (``RC_TRITON_SCREEN=1``): the count launch first computes each tile with
inputs rounded to bfloat16 (tensor cores on a GPU; in Triton's interpreter the operands
are rounded to bfloat16 and multiplied in fp32, which is what the tensor-core product
of bf16 inputs is). With ``u_in = 2^-8`` (bf16), ``u = 2^-23`` (fp32 accumulation,
doubled for accumulators that truncate) and ``gamma_n = n u / (1 - n u)``, the
screened product ``ŝ`` and the exact fp32 product ``s`` of rows ``q``, ``g`` of length
``d`` satisfy

    |ŝ - s| <= [(2 u_in + u_in^2) + gamma_d (1 + u_in)^2 + gamma_d] |q| |g|   (= e)

(input rounding: |q_k g_k - q̂_k ĝ_k| <= (2 u_in + u_in^2)|q_k g_k|, summed and bounded
by Cauchy-Schwarz; each fp32 sum of d terms is within gamma_d of the real sum of its
terms' absolute values). The kernel widens ``[ŝ - e, ŝ + e]`` by ``4 ulp(ŝ)`` for its
own rounding, maps both ends through the (monotone) score epilogue and counts the
pair from the screened score only when no relevant score of its row lies in that
interval; if any pair of a tile is that close, the whole tile is recomputed in exact
fp32 by the same function the fp32 kernel uses, so every count equals the fp32
kernel's bit for bit.

Switch: ``RC_TRITON`` = ``0`` (default: off until the kernel has been measured and
checked on a GPU; it has only run in Triton's interpreter), ``auto`` (on for CUDA when
triton imports) or ``1`` (on). On first use in a process the kernel is checked against the torch
path on a small integer problem (exact in any summation order) for every supported
similarity; if compiling or running it fails, or a count differs, a RuntimeWarning says
so and the torch path serves for the rest of the process. Pair metrics (the negative
tail, fixed thresholds), explicit relevance and Hamming codes stay on the torch path.

triton is imported on first use only (``import retrieval_checks`` does not load it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import warnings

import numpy as np

from ..errors import BackendError

__all__ = ["mode", "screening", "wanted", "supports", "guarded", "run_block_triton", "on_cpu", "self_check", "error_bound"]

SIMILARITIES = ("cosine", "dot", "neg_l2")
_EPILOGUE = {"dot": 0, "cosine": 1, "neg_l2": 2}
MAX_SELF = 8  # self pairs per query the kernel masks; more fall back to the torch path
TILE = (32, 64, 32)  # BLOCK_M, BLOCK_N, BLOCK_K on a GPU
TILE_INTERPRET = (16, 32, 16)  # smaller tiles in the interpreter: more tile edges in small tests

_STATE: dict = {}  # device key -> (ok: bool, reason: str | None): the self-check's verdict
_CPU = {"on": False, "screen": None}  # tests: run the kernel on CPU tensors (interpreter)
_KERNELS = None


def mode() -> str:
    """``RC_TRITON``: ``"0"`` (default: off until measured on a GPU), ``"auto"`` or ``"1"``."""
    raw = os.environ.get("RC_TRITON", "0").strip().lower() or "0"
    if raw not in ("auto", "0", "1"):
        raise BackendError(f"RC_TRITON={raw!r} is not valid; use RC_TRITON=0 (default: today's torch path), auto "
                          "(the fused kernel on CUDA when triton imports) or 1 (on).")
    return raw


def screening() -> bool:
    """``RC_TRITON_SCREEN``: ``"0"`` (default) or ``"1"`` (bf16 screening, exact recompute)."""
    if _CPU["on"] and _CPU["screen"] is not None:
        return bool(_CPU["screen"])
    raw = os.environ.get("RC_TRITON_SCREEN", "0").strip().lower() or "0"
    if raw not in ("0", "1"):
        raise BackendError(f"RC_TRITON_SCREEN={raw!r} is not valid; use 0 (exact fp32 tiles, default) or 1 "
                          "(bf16 screening with exact fp32 recompute of near-tie tiles).")
    return raw == "1"


@contextlib.contextmanager
def on_cpu(screen: bool = False):
    """Tests: inside the block, the torch path on CPU tensors (``_use_kernels=False``)
    runs the fused kernel in Triton's interpreter (``TRITON_INTERPRET=1`` must be set
    before triton is first imported)."""
    old = dict(_CPU)
    _CPU.update(on=True, screen=screen)
    try:
        yield
    finally:
        _CPU.clear()
        _CPU.update(old)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def wanted(backend) -> bool:
    """Whether the torch path on ``backend`` runs the fused kernel: on CUDA by
    ``RC_TRITON`` and the self-check; on CPU only inside :func:`on_cpu`."""
    if backend.kind != "torch":
        return False
    if not backend.is_cuda:
        return _CPU["on"]
    m = mode()
    if m == "0":
        return False
    key = str(backend.device)
    if m == "auto" and key not in _STATE and importlib.util.find_spec("triton") is None:
        _STATE[key] = (False, "triton is not installed")  # auto: on when triton imports; nothing to warn about
    if key not in _STATE:
        _STATE[key] = self_check(backend.device)
        ok, reason = _STATE[key]
        if not ok:
            warnings.warn(f"retrieval_checks: the fused Triton kernel is not used on {key} ({reason}); the torch "
                          "path computes the same counts instead. Set RC_TRITON=0 to skip the attempt.",
                          RuntimeWarning, stacklevel=3)
    return _STATE[key][0]


def guarded(p, start: int, stop: int):
    """:func:`run_block_triton`, or None (the torch path serves) after a RuntimeWarning
    when the kernel fails on this block; a CUDA device is then not tried again."""
    try:
        return run_block_triton(p, start, stop)
    except Exception as exc:  # a compile or launch failure the self-check did not meet
        reason = f"it failed on a block ({type(exc).__name__}: {str(exc)[:300]})"
        if p.backend.is_cuda:
            _STATE[str(p.backend.device)] = (False, reason)
        warnings.warn(f"retrieval_checks: the fused Triton kernel is not used ({reason}); the torch path "
                      "computes the same counts instead.", RuntimeWarning, stacklevel=4)
        return None


def supports(p, want_pairs: bool) -> bool:
    """The cases the kernel handles: label relevance, cosine / dot / neg_l2, no pair metrics."""
    return (not want_pairs and p.similarity in SIMILARITIES and p.relevant.csr is None
            and p.relevant.q_codes is not None)


# ----------------------------------------------------------------------------- kernels
def _kernels():
    """The JIT functions (imports triton on first use)."""
    global _KERNELS
    if _KERNELS is None:
        from . import _triton_kernels as k

        _KERNELS = {"extract": k.extract_kernel, "count": k.count_kernel}
    return _KERNELS


# ----------------------------------------------------------------------------- the bound
U_BF16 = 2.0 ** -8
U_ACC = 2.0 ** -23  # fp32 accumulation, doubled: covers truncating tensor-core accumulators


def error_bound(d: int) -> float:
    """``gamma`` with ``|ŝ - s| <= gamma |q| |g|`` for the bf16-input / fp32-accumulated
    product ``ŝ`` and the fp32 product ``s`` of two rows of length ``d`` (module
    docstring), rounded up to a float32 with a 2^-20 relative margin."""
    nu = d * U_ACC
    if nu >= 0.5:
        return math.inf
    g_d = nu / (1.0 - nu)
    gamma = (2 * U_BF16 + U_BF16 ** 2) + g_d * (1 + U_BF16) ** 2 + g_d
    return float(np.nextafter(np.float32(gamma * (1 + 2.0 ** -20)), np.float32(np.inf)))


def _norms_up(torch, X):
    """Row norms of float32 ``X`` (float64, rounded up to float32)."""
    n = torch.linalg.vector_norm(X.double(), dim=1).float()
    return torch.nextafter(n, torch.full_like(n, math.inf))


# ----------------------------------------------------------------------------- one block
def _label_ranks(source) -> np.ndarray:
    """Each gallery item's rank among the gallery items of its label, ascending index
    (the order of :meth:`RelevanceSource.block`'s rows)."""
    gs = source.g_sorted
    starts = np.searchsorted(gs, gs, side="left")
    grank = np.empty(gs.size, np.int32)
    grank[source.g_order] = (np.arange(gs.size) - starts).astype(np.int32)
    return grank


def _gallery_side(p) -> dict:
    """The gallery's label codes (host and device), label ranks (device) and, once
    screening asks for them, row norms (device): computed once per problem and device
    (not per block), cached on its relevance source."""
    import torch

    src = p.relevant
    key = (str(p.Gp.device), id(p.Gp), p.n_g)
    cache = getattr(src, "_triton_side", None)
    if cache is None or cache[0] != key:
        g_codes = np.empty_like(src.g_sorted)
        g_codes[src.g_order] = src.g_sorted
        side = {"g_codes": g_codes,
                "gc": torch.tensor(g_codes, dtype=torch.int64, device=p.Gp.device),
                "grank": torch.tensor(_label_ranks(src), dtype=torch.int32, device=p.Gp.device)}
        src._triton_side = cache = (key, side)
    return cache[1]


def _self_matrix(own, m: int, g_codes: np.ndarray, q_codes: np.ndarray):
    """(m x K) self items (-1 padding) and the same with only the self items that share
    the query's label (the others padded with 2^31 - 1), or None when K > MAX_SELF."""
    counts = own.row_counts() if own.indices.size else np.zeros(m, np.int64)
    K = max(1, int(counts.max()) if counts.size else 1)
    if K > MAX_SELF:
        return None
    allm = np.full((m, K), -1, np.int32)
    relm = np.full((m, K), 2**31 - 1, np.int32)
    if own.indices.size:
        rid = own.row_ids()
        slot = np.arange(rid.size) - own.indptr[:-1][rid]
        allm[rid, slot] = own.indices
        same = g_codes[own.indices] == q_codes[rid]
        relm[rid[same], slot[same]] = own.indices[same]
    return allm, relm, K


def run_block_triton(p, start: int, stop: int):
    """One task on the fused kernel: the block's :class:`~._blocks.BlockPartial`, or
    None when the block has more self pairs per query than the kernel masks."""
    from . import _blocks

    m = stop - start
    rel = p.relevant.block(start, stop)
    own = p.self_pairs.rows(start, stop)
    q_codes = p.relevant.q_codes[start:stop]
    side = _gallery_side(p)
    selfs = _self_matrix(own, m, side["g_codes"], q_codes)
    if selfs is None:
        return None
    qa = None if p.qa is None else p.qa[start:stop]
    ga = None if p.ga is None else p.ga[: p.n_g]
    screen = screening()
    if screen and "gn" not in side:
        import torch

        side["gn"] = _norms_up(torch, p.Gp[: p.n_g])
    vals, above, tied = count_arrays(p.Q[start:stop], p.Gp[: p.n_g], p.similarity, qa, ga, q_codes, side["gc"],
                                     side["grank"], rel.indptr, rel.row_ids(), rel.indices, selfs,
                                     screen=screen, g_norms=side.get("gn"))
    rel_sorted, order = vals
    return _blocks.ranked_partial(start, stop, rel, rel_sorted, order, above, tied, True)


def count_arrays(Qb, G, similarity, qa, ga, q_codes, g_codes, grank, indptr, rid, cols, selfs, *,  # long: two launches
                 screen: bool = False, tile=None, g_norms=None):
    """The two launches on one block. Returns ((relevant scores sorted in rows, the
    permutation that sorts them), above, tied) as :func:`~._blocks._count_torch` does."""
    import torch

    from ._blocks import _sort_within_rows
    from ._inputs import Csr

    ker = _kernels()
    dev = Qb.device
    interp = _interpreting()
    BM, BN, BK = tile or (TILE_INTERPRET if interp else TILE)
    m, d = int(Qb.shape[0]), int(Qb.shape[1])
    n_g = int(G.shape[0])
    allm, relm, K = selfs
    EPI = _EPILOGUE[similarity]

    def t(a, dt):  # a copy on the device (tensors already there pass through)
        return a if isinstance(a, torch.Tensor) else torch.tensor(np.ascontiguousarray(a), dtype=dt, device=dev)

    # the interpreter resizes its arguments' storage: numpy-backed tensors are copied first
    own = (lambda x: x.clone()) if interp else (lambda x: x.contiguous())  # noqa: E731
    Qc, Gc = own(Qb), own(G)
    qc, gc = t(q_codes, torch.int64), t(g_codes, torch.int64)
    dummy = torch.zeros(1, dtype=torch.float32, device=dev)
    QA = dummy if qa is None else own(qa)
    GA = dummy if ga is None else own(ga)
    ptr = t(indptr, torch.int64)
    SELF, SELFREL = t(allm, torch.int32), t(relm, torch.int32)
    nnz = int(indptr[-1])
    out = torch.full((nnz,), math.nan, dtype=torch.float32, device=dev)
    if nnz:
        keys = np.unique((rid // BM).astype(np.int64) * (-(-n_g // BN)) + cols // BN)
        tm, tn = keys // (-(-n_g // BN)), keys % (-(-n_g // BN))
        ker["extract"][(int(keys.size),)](Qc, Gc, qc, gc, SELF, SELFREL, t(grank, torch.int32), ptr, QA, GA,
                                          t(tm, torch.int32), t(tn, torch.int32), out, m, n_g, d,
                                          BM=BM, BN=BN, BK=BK, K=K, EPI=EPI)
        if bool(torch.isnan(out).any()):
            raise RuntimeError("the extract launch left relevant scores unwritten")
    rel = Csr(np.asarray(indptr, np.int64), np.asarray(cols, np.int64))
    rel_sorted, order = _sort_within_rows(out, rel, True)
    counts = np.diff(indptr)
    r_max = int(counts.max()) if counts.size else 0
    if r_max == 0:
        return (rel_sorted, order), np.zeros(nnz, np.int64), np.zeros(nnz, np.int64)
    width = r_max + 1
    hist = torch.zeros((m, width), dtype=torch.int32, device=dev)
    ties = torch.zeros((m, width), dtype=torch.int32, device=dev)
    qn = gn = dummy
    gamma = error_bound(d) if screen else 0.0
    screen = screen and math.isfinite(gamma)  # d >= 2^22: no useful bound, every tile would be recomputed
    if screen:
        qn, gn = _norms_up(torch, Qc), (_norms_up(torch, Gc) if g_norms is None else g_norms)
    grid = (-(-n_g // BN), -(-m // BM))
    ker["count"][grid](Qc, Gc, qc, gc, SELF, ptr, own(rel_sorted), QA, GA, qn, gn, hist, ties, m, n_g, d,
                       width, int(r_max).bit_length(), gamma if screen else 0.0,
                       BM=BM, BN=BN, BK=BK, K=K, EPI=EPI, SCREEN=bool(screen), EMULATE=interp)
    r_t = torch.from_numpy(np.repeat(np.arange(m), counts)).to(dev)
    c_t = torch.from_numpy(np.arange(nnz) - np.repeat(np.asarray(indptr[:-1]), counts)).to(dev)
    suffix = hist.to(torch.int64).flip(1).cumsum(1).flip(1)
    above = suffix[r_t, c_t + 1]
    tied = ties.to(torch.int64).cumsum(1)[r_t, c_t]
    return (rel_sorted, order), above.cpu().numpy(), tied.cpu().numpy()


# ----------------------------------------------------------------------------- self-check
def self_check(device) -> tuple[bool, str | None]:
    """Run the kernel (fp32 and screened) against the torch path on small integer data
    (exact in any order) for every supported similarity; (ok, reason if not)."""
    try:
        import triton  # noqa: F401
    except Exception as exc:  # not installed, or broken
        return False, f"triton could not be imported ({type(exc).__name__}: {exc})"
    try:
        for similarity in SIMILARITIES:
            for screen in (False, True):
                for kind in ("int", "float"):
                    got, want = _check_case(device, similarity, screen, kind)
                    if kind == "float":  # the scores' last bits may differ between GEMMs; the counts may not
                        got, want = got[1:], want[1:]
                    if not got == want:
                        return False, (f"its counts differ from the torch path's in the self-check "
                                       f"(similarity={similarity!r}, screened={screen}, {kind} data)")
    except Exception as exc:  # compilation or launch failure
        return False, f"compiling or running it failed ({type(exc).__name__}: {str(exc)[:300]})"
    return True, None


def _check_case(device, similarity: str, screen: bool, kind: str = "int"):
    """(kernel's counts, torch path's counts) on a 37 x 83 problem with labels,
    leave-one-out self pairs and duplicate rows in different labels: small integers
    (exact in any summation order: every score agrees bit for bit), or floats (the
    duplicates' exact ties test that both launches compute a pair's score alike)."""
    import torch

    from ._backend import Backend
    from ._blocks import _count_torch, _sort_within_rows
    from ._inputs import Csr

    rng = np.random.default_rng(17)
    n, d = 83, 20
    if kind == "int":
        X = rng.integers(-2, 3, size=(n, d)).astype(np.float32)
    else:
        X = rng.standard_normal((n, d)).astype(np.float32)
    X[40:60] = X[60:80]  # duplicates (mostly of other labels)
    y = rng.integers(0, 9, size=n)
    m = 37
    be = Backend("torch", torch.device(device))
    G = torch.from_numpy(X).to(be.device)
    qa = ga = None
    if similarity == "neg_l2":
        ga = be.row_factors(G, "neg_l2")
        qa = ga[:m]
    elif similarity == "cosine":
        ga = torch.from_numpy(1.0 / np.sqrt(np.maximum((X.astype(np.float64) ** 2).sum(1), 1)).astype(np.float32)
                              ).to(be.device)
        qa = ga[:m]
    order = np.argsort(y, kind="stable")
    ys = y[order]
    grank = np.empty(n, np.int32)
    grank[order] = np.arange(n) - np.searchsorted(ys, ys, side="left")
    rows, cols = [], []
    for i in range(m):
        js = [j for j in order[np.searchsorted(ys, y[i]):np.searchsorted(ys, y[i], side="right")] if j != i]
        rows += [i] * len(js)
        cols += js
    rows, cols = np.array(rows, np.int64), np.array(cols, np.int64)
    indptr = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
    selfs = (np.arange(m, dtype=np.int32)[:, None], np.arange(m, dtype=np.int32)[:, None], 1)
    (rel_sorted, _), above, tied = count_arrays(G[:m], G, similarity, qa, ga, y[:m], y, grank, indptr, rows, cols,
                                                selfs, screen=screen)
    S = G[:m] @ G.T
    if qa is not None:
        be.finish_scores(S, similarity, qa, ga)
    vals = S[torch.from_numpy(rows).to(be.device), torch.from_numpy(cols).to(be.device)].clone()
    S[torch.from_numpy(rows).to(be.device), torch.from_numpy(cols).to(be.device)] = -math.inf
    ar = torch.arange(m, device=be.device)
    S[ar, ar] = -math.inf
    ref_sorted, _ = _sort_within_rows(vals, Csr(indptr, cols), True)
    ref_above, ref_tied = _count_torch(S[None], m, n, indptr, ref_sorted)
    got = (rel_sorted.cpu().numpy().tobytes(), above.tolist(), tied.tolist())
    return got, (ref_sorted.cpu().numpy().tobytes(), ref_above.tolist(), ref_tied.tolist())
