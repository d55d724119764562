"""A fused Triton kernel for the CUDA path: tile product, score epilogue and rank counts
in one pass, without writing the ``b x n`` score block to memory.

What it computes (the counting contract of :mod:`..counting._kernels`): for every relevant
pair score of a query, the number of non-relevant gallery scores ``>=`` it and ``==``
it. Two launches per query block:

1. *extract*: for the tiles that hold a relevant pair only, the tile product and the
   score epilogue, writing each relevant pair's score at its place in the block's
   relevance CSR. Label relevance (same label code, self pairs excluded): the place is
   the item's rank among its label's gallery items, minus the row's self items before
   it. Explicit relevance (binary or graded: image-text's rank passes too): the
   kernel finds the column by binary search among the row's relevant columns (sorted
   on the host; the scores go back to the CSR's order). The scores are sorted inside
   each row (as the torch path does).
2. *count*: every tile ``BLOCK_M x BLOCK_N`` of the block: the product (``tl.dot`` with
   ``input_precision="ieee"``: full fp32, no TF32), the same epilogue as
   :meth:`~._backend.Backend.finish_scores` (same IEEE operations in the same order),
   then, for each non-relevant pair (padding, relevant and self pairs masked), two
   binary searches among the row's sorted relevant scores (``right`` = relevant scores
   ``<=`` s, ``left`` = ``<`` s) and atomic adds into difference arrays:
   ``hist[row, right] += 1`` (only ``right > 0`` ever counts) and, when ``left <
   right``, ``ties[row, left] += 1``, ``ties[row, right] -= 1``. Suffix sums of
   ``hist`` and prefix sums of ``ties`` give the counts, as in the torch path.
   With the pair metrics, the same launch also counts the negatives ``>=`` each fixed
   threshold (``pair_precision@t=`` ...: one reduction per tile and threshold) and
   appends every negative ``>= tau`` (the :class:`~..metrics._pairs.NegativeTail`
   threshold) at an offset reserved by one atomic per tile. A tail larger than its
   buffer is only counted; the launch then runs again with a buffer of exactly its
   size (the first block's buffer holds the whole block: the score block's memory,
   which pair metrics' blocks are planned for). ``tau`` then rises to the
   ``capacity``-th largest value, as in the torch path. The rare second pass of
   ``precision_at_recall`` (every negative binned against the sorted positive scores)
   is a third kernel, ``bin``. The kernels only count and collect (float32 scores
   ``>=`` float32 thresholds: exact, the host rounds each written threshold T up to
   the smallest float32 >= T in exact arithmetic); no kernel compares a precision or
   recall with a level: :func:`~..metrics._pairs.pair_metric` decides on the host, in
   integers (``tp * den >= num * (tp + fp)``), as for every other backend.

Both launches compute a pair's score in the same tile, from the same operands, with
the same JIT function and tile shape, so a relevant score is the very number its row's
negatives are compared with (a pair's score never depends on which launch reads it).

Screening (``RC_TRITON_SCREEN=bf16`` or ``1``; ``tf32``): the count launch first
computes each tile with inputs rounded to bfloat16 (``u_in = 2^-8``) or TF32 (``u_in =
2^-10``, which also covers inputs truncated rather than rounded) on tensor cores (in
Triton's interpreter the operands are rounded, or truncated, and multiplied in fp32,
which is what the tensor-core product of such inputs is). With ``u = 2^-23`` (fp32
accumulation, doubled for accumulators that truncate) and ``gamma_n = n u / (1 - n u)``,
the screened product ``ŝ`` and the exact fp32 product ``s`` of rows ``q``, ``g`` of
length ``d`` satisfy

    |ŝ - s| <= [(2 u_in + u_in^2) + gamma_d (1 + u_in)^2 + gamma_d] |q| |g|   (= e)

(input rounding: |q_k g_k - q̂_k ĝ_k| <= (2 u_in + u_in^2)|q_k g_k|, summed and bounded
by Cauchy-Schwarz; each fp32 sum of d terms is within gamma_d of the real sum of its
terms' absolute values). The kernel widens ``[ŝ - e, ŝ + e]`` by ``4 ulp(ŝ)`` for its
own rounding, maps both ends through the (monotone) score epilogue and counts the
pair from the screened score only when no relevant score of its row lies in that
interval and, with the pair metrics, when the interval neither reaches the tail
threshold (a tail keeps exact values) nor holds a fixed threshold; if any pair of a
tile is that close, the whole tile is recomputed in exact fp32 by the same function
the fp32 kernel uses, so every count and every tail value equals the fp32 kernel's bit
for bit. The ``bin`` kernel screens the same way against the sorted positive scores.

Switch: ``RC_TRITON`` = ``auto`` (default: every fused kernel on CUDA when triton
imports, the tasks of :data:`AUTO_TASKS`: measured exact and faster on an H200,
docs/gpu.md), ``1`` (the same, also where triton's import must not be silently
skipped) or ``0`` (the torch path only). On first use in a process the kernel is checked against the torch
path on a small integer problem (exact in any summation order) for every supported
similarity, fp32 and both screenings, label and explicit relevance, with the pair
outputs; if compiling or running it fails, or a count differs, a RuntimeWarning says so
and the torch path serves for the rest of the process.

Hamming codes (``similarity="hamming"``, packed in int64 words): the same launches with
a popcount tile (xor, SWAR popcount, sum over words) instead of the product: exact
integers, so screening does not apply, and no ``b x n x words`` temporaries as in the
torch path's tile.

triton is imported on first use only (``import retrieval_checks`` does not load it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
from dataclasses import dataclass

import numpy as np

from ...errors import BackendError, warn_outside
from .._backend import Backend
from .._hamming import hamming_tile_torch
from .._inputs import Csr
from .._partial import ranked_partial
from ..counting._counters import count_torch, sort_within_rows

__all__ = [
    "mode",
    "screening",
    "screen_code",
    "tile_shape",
    "wanted",
    "checked_once",
    "supports",
    "guarded",
    "run_block_triton",
    "run_binning_triton",
    "PairRequest",
    "count_arrays",
    "bin_counts",
    "on_cpu",
    "self_check",
    "error_bound",
]

SIMILARITIES = ("cosine", "dot", "neg_l2")  # the products every fused kernel computes
FUSED_SIMILARITIES = SIMILARITIES + ("hamming",)  # the main pass's kernel also takes packed codes
_EPILOGUE = {"dot": 0, "cosine": 1, "neg_l2": 2, "hamming": 3}
MAX_SELF = 8  # self pairs per query the kernel masks; more fall back to the torch path
TILE = (32, 64, 32)  # BLOCK_M, BLOCK_N, BLOCK_K on a GPU
TILE_INTERPRET = (16, 32, 16)  # smaller tiles in the interpreter: more tile edges in small tests
LINEAR_MAX = (
    16  # rows with at most this many relevant items: compare with each (no searches, few atomics)
)
SCREENS = {"0": 0, "1": 1, "bf16": 1, "tf32": 2}  # RC_TRITON_SCREEN -> the kernels' SCREEN code
_F32_MIN = float(np.finfo(np.float32).min)

_STATE: dict = {}  # device key -> (ok: bool, reason: str | None): the self-check's verdict
#: Screened launches' tiles since the process started (or the last reset): decided by the
#: screen alone, and recomputed in exact fp32 (a benchmark reads the share).
SCREEN_STATS = {"screened": 0, "recomputed": 0}
_CPU = {"on": False, "screen": None}  # tests: run the kernel on CPU tensors (interpreter)
_KERNELS = None


def mode() -> str:
    """``RC_TRITON``: ``"auto"`` (default: the kernels of :data:`AUTO_TASKS` on CUDA when
    triton imports), ``"1"`` (every fused kernel) or ``"0"`` (none)."""
    raw = os.environ.get("RC_TRITON", "auto").strip().lower() or "auto"
    if raw not in ("auto", "0", "1"):
        raise BackendError(
            f"RC_TRITON={raw!r} is not valid; use RC_TRITON=auto (default: the fused kernels "
            "on CUDA when triton imports), 1 (the fused kernels; warns when triton is "
            "missing) or 0 (the torch path only)."
        )
    return raw


def screen_code(value) -> int:
    """The kernels' SCREEN code of a screening choice: 0 (exact fp32 tiles), 1 (bf16
    inputs) or 2 (TF32 inputs); ``value`` is a bool, 0/1/2 or an ``RC_TRITON_SCREEN``
    string (``0``, ``1``, ``bf16``, ``tf32``)."""
    if isinstance(value, (bool, int, np.integer)) and int(value) in (0, 1, 2):
        return int(value)
    raw = str(value).strip().lower() or "0"
    if raw not in SCREENS:
        raise BackendError(
            f"RC_TRITON_SCREEN={raw!r} is not valid; use 0 (exact fp32 tiles, default), bf16 (or 1: "
            "bf16 screening) or tf32 (TF32 screening), each with exact fp32 recompute of near-tie "
            "tiles."
        )
    return SCREENS[raw]


def screening() -> int:
    """``RC_TRITON_SCREEN`` as a SCREEN code (:func:`screen_code`); default 0."""
    if _CPU["on"] and _CPU["screen"] is not None:
        return screen_code(_CPU["screen"])
    return screen_code(os.environ.get("RC_TRITON_SCREEN", "0"))


@contextlib.contextmanager
def on_cpu(screen=False):
    """Tests: inside the block, the torch path on CPU tensors (``_use_kernels=False``)
    runs the fused kernel in Triton's interpreter (``TRITON_INTERPRET=1`` must be set
    before triton is first imported); ``screen`` as :func:`screen_code` takes it."""
    old = dict(_CPU)
    _CPU.update(on=True, screen=screen)
    try:
        yield
    finally:
        _CPU.clear()
        _CPU.update(old)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def tile_shape() -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K) of every fused kernel: ``RC_TRITON_TILE=BMxBNxBK``
    (powers of two from 16 to 256; for tuning on a GPU), else :data:`TILE`
    (:data:`TILE_INTERPRET` in Triton's interpreter). Within one evaluation every
    launch uses the same shape, so a pair's score is one number; across shapes a
    score's last bits may differ, as between any two GEMMs."""
    raw = os.environ.get("RC_TRITON_TILE", "").strip().lower()
    if not raw:
        return TILE_INTERPRET if _interpreting() else TILE
    try:
        vals = tuple(int(v) for v in raw.split("x"))
    except ValueError:
        vals = ()
    if len(vals) != 3 or any(v < 16 or v > 256 or v & (v - 1) for v in vals):
        raise BackendError(
            f"RC_TRITON_TILE={raw!r} is not valid; use BLOCK_MxBLOCK_NxBLOCK_K with powers of two "
            f"from 16 to 256, e.g. 64x128x32 (default {TILE[0]}x{TILE[1]}x{TILE[2]})."
        )
    return vals


#: The kernels ``RC_TRITON=auto`` turns on: those measured exact and faster than the
#: torch path on a GPU (docs/gpu.md): all three since the H200 session of 2026-11-27
#: (main pass 57 s against 83 s at 1M x 128; image-text 5k 0.15 s against 0.40 s;
#: grouped recall on 1M items 7.4 s against more than 85 s). ``RC_TRITON=0`` turns them off.
AUTO_TASKS = frozenset({"pass", "grouped", "image_text"})


def wanted(backend, task: str = "pass") -> bool:
    """Whether the torch path on ``backend`` runs a fused kernel (``task``: ``"pass"``,
    the main pass; ``"grouped"``; ``"image_text"``): on CUDA by ``RC_TRITON``
    (``auto``: the tasks of :data:`AUTO_TASKS`) and the self-check; on CPU only inside
    :func:`on_cpu`."""
    if backend.kind != "torch":
        return False
    if not backend.is_cuda:
        if _CPU["on"]:
            _check_settings()
        return _CPU["on"]
    m = mode()
    if m == "0" or (m == "auto" and task not in AUTO_TASKS):
        return False
    _check_settings()
    key = str(backend.device)
    if m == "auto" and key not in _STATE and importlib.util.find_spec("triton") is None:
        _STATE[key] = (
            False,
            "triton is not installed",
        )  # auto: on when triton imports; nothing to warn about
    if key not in _STATE:
        _STATE[key] = self_check(backend.device)
        ok, reason = _STATE[key]
        if not ok:
            warn_outside(
                f"retrieval_checks: the fused Triton kernel is not used on {key} ({reason}); the torch "
                "path computes the same counts instead. Set RC_TRITON=0 to skip the attempt.",
                RuntimeWarning,
            )
    return _STATE[key][0]


def checked_once(backend, state: dict, check, warn, task: str) -> bool:
    """:func:`wanted` for ``task``, and on a CUDA device a kernel's own self-check
    ``check()`` run once per device (its ``(ok, reason)`` kept in ``state``);
    ``warn(device, reason)`` when it fails. The image-text and grouped kernels decide
    with this."""
    if not wanted(backend, task):
        return False
    if not backend.is_cuda:
        return True
    key = str(backend.device)
    if key not in state:
        state[key] = check()
        if not state[key][0]:
            warn(key, state[key][1])
    return state[key][0]


def check_switches() -> None:
    """``RC_TRITON``, ``RC_TRITON_SCREEN`` and ``RC_TRITON_TILE`` checked on every device
    (the seams call it before choosing a pass's kernel): a typo in a CI configuration is a
    :class:`BackendError` where it is set, not first on the day the job lands on a GPU."""
    mode()
    _check_settings()


def _check_settings() -> None:
    """``RC_TRITON_SCREEN`` and ``RC_TRITON_TILE`` read once before any kernel runs: a bad
    value is a :class:`BackendError` for the caller, not a kernel failure to fall back from."""
    screening()
    tile_shape()


def guarded(p, start: int, stop: int, pairs: "PairRequest | None" = None, *, run=None):
    """:func:`run_block_triton` (or ``run``), or None (the torch path serves) after a
    RuntimeWarning when the kernel fails on this block; a CUDA device is then not tried
    again."""
    try:
        if run is not None:
            return run()
        return run_block_triton(p, start, stop, pairs)
    except Exception as exc:  # a compile or launch failure the self-check did not meet
        reason = f"it failed on a block ({type(exc).__name__}: {str(exc)[:300]})"
        if p.backend.is_cuda:
            _STATE[str(p.backend.device)] = (False, reason)
        warn_outside(
            f"retrieval_checks: the fused Triton kernel is not used ({reason}); the torch path "
            "computes the same counts instead.",
            RuntimeWarning,
        )
        return None


def supports(p, want_pairs: bool = False) -> bool:
    """The cases the kernel handles: cosine / dot / neg_l2 and hamming (packed codes)
    with label or explicit (binary or graded) relevance, with or without the pair metrics' outputs
    (``want_pairs`` is accepted for callers that ask; every pair output is computed)."""
    return p.similarity in FUSED_SIMILARITIES and (
        p.relevant.csr is not None or p.relevant.q_codes is not None
    )


# ----------------------------------------------------------------------------- kernels
def _kernels():
    """The JIT functions (imports triton on first use)."""
    global _KERNELS
    if _KERNELS is None:
        from . import _triton_kernels as k

        _KERNELS = {"extract": k.extract_kernel, "count": k.count_kernel, "bin": k.bin_kernel}
    return _KERNELS


# ----------------------------------------------------------------------------- the bound
U_IN = {
    1: 2.0**-8,
    2: 2.0**-10,
}  # input rounding: bf16 (round to nearest), TF32 (truncation covered)
U_BF16 = U_IN[1]
U_ACC = 2.0**-23  # fp32 accumulation, doubled: covers truncating tensor-core accumulators


def error_bound(d: int, screen=1) -> float:
    """``gamma`` with ``|ŝ - s| <= gamma |q| |g|`` for the screened product ``ŝ`` (bf16
    inputs for ``screen`` 1, TF32 inputs for 2; fp32 accumulation) and the fp32
    product ``s`` of two rows of length ``d`` (module docstring), rounded up to a
    float32 with a 2^-20 relative margin."""
    u_in = U_IN[screen_code(screen)]
    nu = d * U_ACC
    if nu >= 0.5:
        return math.inf
    g_d = nu / (1.0 - nu)
    gamma = (2 * u_in + u_in**2) + g_d * (1 + u_in) ** 2 + g_d
    return float(np.nextafter(np.float32(gamma * (1 + 2.0**-20)), np.float32(np.inf)))


def _norms_up(torch, X):
    """Row norms of float32 ``X`` (float64, rounded up to float32)."""
    n = torch.linalg.vector_norm(X.double(), dim=1).float()
    return torch.nextafter(n, torch.full_like(n, math.inf))


# ----------------------------------------------------------------------------- one block
@dataclass
class PairRequest:
    """What the pair metrics need from a block: every negative ``>= tau`` (``tau``
    raised while at least ``capacity`` negatives stay above it, as the torch path
    does) and the negatives ``>=`` each of the ascending ``fixed`` thresholds."""

    tau: float = -math.inf
    fixed: np.ndarray | None = None
    capacity: int | None = None


def _label_ranks(source) -> np.ndarray:
    """Each gallery item's rank among the gallery items of its label, ascending index
    (the order of :meth:`RelevanceSource.block`'s rows)."""
    gs = source.g_sorted
    starts = np.searchsorted(gs, gs, side="left")
    grank = np.empty(gs.size, np.int32)
    grank[source.g_order] = (np.arange(gs.size) - starts).astype(np.int32)
    return grank


def _gallery_side(p) -> dict:
    """The gallery's label codes (host and device; none with explicit relevance), label
    ranks (device) and, once screening asks for them, row norms (device): computed once
    per problem and device (not per block), cached on its relevance source."""
    import torch

    src = p.relevant
    key = (str(p.Gp.device), id(p.Gp), p.n_g)
    cache = getattr(src, "_triton_side", None)
    if cache is None or cache[0] != key:
        side = {"g_codes": None, "gc": None, "grank": None}
        if src.csr is None:
            g_codes = np.empty_like(src.g_sorted)
            g_codes[src.g_order] = src.g_sorted
            side = {
                "g_codes": g_codes,
                "gc": torch.tensor(g_codes, dtype=torch.int64, device=p.Gp.device),
                "grank": torch.tensor(_label_ranks(src), dtype=torch.int32, device=p.Gp.device),
            }
        src._triton_side = cache = (key, side)
    return cache[1]


def _self_matrix(own, m: int, g_codes, q_codes):
    """(m x K) self items (-1 padding) and the same with only the self items that share
    the query's label (the others padded with 2^31 - 1; all padded with explicit
    relevance, ``g_codes`` None), or None when K > MAX_SELF."""
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
        if g_codes is not None:
            same = g_codes[own.indices] == q_codes[rid]
            relm[rid[same], slot[same]] = own.indices[same]
    return allm, relm, K


def _block_inputs(p, start: int, stop: int):
    """The block's relevance, self matrix and the keyword arguments of
    :func:`count_arrays` for it; None when the block has more self pairs per query
    than the kernel masks."""
    m = stop - start
    rel = p.relevant.block(start, stop)
    own = p.self_pairs.rows(start, stop)
    csr = p.relevant.csr is not None
    side = _gallery_side(p)
    q_codes = None if csr else p.relevant.q_codes[start:stop]
    selfs = _self_matrix(own, m, side["g_codes"], q_codes)
    if selfs is None:
        return None
    screen = 0 if p.similarity == "hamming" else screening()  # integer scores: nothing to screen
    if screen and "gn" not in side:
        import torch

        side["gn"] = _norms_up(torch, p.Gp[: p.n_g])
    args = (
        p.Q[start:stop],
        p.Gp[: p.n_g],
        p.similarity,
        None if p.qa is None else p.qa[start:stop],
        None if p.ga is None else p.ga[: p.n_g],
        q_codes,
        side["gc"],
        side["grank"],
        rel.indptr,
        rel.row_ids(),
        rel.indices,
        selfs,
    )
    return rel, args, dict(screen=screen, g_norms=side.get("gn"), csr=csr)


def run_block_triton(p, start: int, stop: int, pairs: PairRequest | None = None):
    """One task on the fused kernel: the block's :class:`~._blocks.BlockPartial` (with
    the pair outputs when ``pairs`` asks), or None when the block has more self pairs
    per query than the kernel masks."""

    got = _block_inputs(p, start, stop)
    if got is None:
        return None
    rel, args, kw = got
    out = count_arrays(*args, pairs=pairs, **kw)
    (rel_sorted, order), above, tied = out[:3]
    part = ranked_partial(start, stop, rel, rel_sorted, order, above, tied, True)
    if pairs is not None:
        extra = out[3]
        part.positives = rel_sorted.cpu().numpy()
        part.negatives = extra["negatives"]
        part.negatives_tau = extra["tau"]
        if pairs.fixed is not None and pairs.fixed.size:
            part.fixed_fp = extra["fixed_fp"]
    return part


def run_binning_triton(
    p, start: int, stop: int, sorted_positive: np.ndarray, out: np.ndarray
) -> bool:
    """The binning pass's task on the fused kernel: adds to ``out`` as
    :func:`~._blocks.run_binning_block` does; False when the block has more self pairs
    per query than the kernel masks (nothing added)."""
    got = _block_inputs(p, start, stop)
    if got is None:
        return False
    _, args, kw = got
    out += bin_counts(*args, np.asarray(sorted_positive, np.float32), **kw)
    return True


class _Launch:
    """The device arguments every launch on one block shares."""

    def __init__(
        self,
        Qb,
        G,
        similarity,
        qa,
        ga,
        q_codes,
        g_codes,
        indptr,
        rid,
        cols,
        selfs,
        screen,
        tile,
        g_norms,
        csr,
    ):
        import torch

        self.dev = dev = Qb.device
        self.interp = _interpreting()
        self.BM, self.BN, self.BK = tile or tile_shape()
        self.m, self.d, self.n_g = int(Qb.shape[0]), int(Qb.shape[1]), int(G.shape[0])
        allm, relm, self.K = selfs
        self.EPI = _EPILOGUE[similarity]
        # the interpreter resizes its arguments' storage: numpy-backed tensors are copied first
        self.own = (lambda x: x.clone()) if self.interp else (lambda x: x.contiguous())
        self.Q, self.G = self.own(Qb), self.own(G)
        self.dummy = torch.zeros(1, dtype=torch.float32, device=dev)
        idummy = torch.zeros(1, dtype=torch.int64, device=dev)
        self.QA = self.dummy if qa is None else self.own(qa)
        self.GA = self.dummy if ga is None else self.own(ga)
        self.csr = bool(csr)
        self.perm = None
        counts = np.diff(indptr)
        self.c_steps = int(counts.max()).bit_length() if counts.size else 0
        if self.csr:  # the kernels find relevant columns by binary search: rows sorted by column
            order = np.lexsort((cols, rid))
            if not (order == np.arange(order.size)).all():
                self.perm = order
            self.qc = self.gc = idummy
            self.COLS = self.t(np.asarray(cols)[order], torch.int64) if cols.size else idummy
        else:
            self.qc, self.gc, self.COLS = (
                self.t(q_codes, torch.int64),
                self.t(g_codes, torch.int64),
                idummy,
            )
        self.ptr = self.t(indptr, torch.int64)
        self.SELF, self.SELFREL = self.t(allm, torch.int32), self.t(relm, torch.int32)
        self.screen = (
            0 if self.EPI == 3 else screen_code(screen)
        )  # -Hamming: exact integers, no GEMM
        self.gamma = error_bound(self.d, self.screen) if self.screen else 0.0
        if not math.isfinite(
            self.gamma
        ):  # d >= 2^22: no useful bound, every tile would be recomputed
            self.screen, self.gamma = 0, 0.0
        self.QN = self.GN = self.dummy
        if self.screen:
            self.QN = _norms_up(torch, self.Q)
            self.GN = _norms_up(torch, self.G) if g_norms is None else g_norms

    def t(self, a, dt):  # a copy on the device (tensors already there pass through)
        import torch

        return (
            a
            if isinstance(a, torch.Tensor)
            else torch.tensor(np.ascontiguousarray(a), dtype=dt, device=self.dev)
        )

    def consts(self) -> dict:
        # no FMA contraction: the epilogue is the torch path's IEEE operations, one rounding each
        return dict(
            BM=self.BM, BN=self.BN, BK=self.BK, K=self.K, EPI=self.EPI, enable_fp_fusion=False
        )

    def grid(self):
        return (-(-self.n_g // self.BN), -(-self.m // self.BM))

    def record(self, stats) -> None:
        """Add a screened launch's tile counts to :data:`SCREEN_STATS` (no sync otherwise)."""
        if self.screen:
            screened, recomputed = stats.tolist()
            SCREEN_STATS["screened"] += int(screened)
            SCREEN_STATS["recomputed"] += int(recomputed)


def _extract(L: _Launch, grank, indptr, rid, cols):
    """Launch 1: the relevant pairs' scores, in the block CSR's order."""
    import torch

    nnz = int(indptr[-1])
    out = torch.full((nnz,), math.nan, dtype=torch.float32, device=L.dev)
    if not nnz:
        return out
    per_row = -(-L.n_g // L.BN)
    # the tiles holding a relevant pair (sorted and made unique on the device)
    keys = torch.unique(L.t(rid, torch.int64) // L.BM * per_row + L.t(cols, torch.int64) // L.BN)
    tm, tn = (keys // per_row).to(torch.int32), (keys % per_row).to(torch.int32)
    GR = (
        L.t(grank, torch.int32)
        if grank is not None
        else torch.zeros(1, dtype=torch.int32, device=L.dev)
    )
    _kernels()["extract"][(int(keys.numel()),)](
        L.Q,
        L.G,
        L.qc,
        L.gc,
        L.COLS,
        L.SELF,
        L.SELFREL,
        GR,
        L.ptr,
        L.QA,
        L.GA,
        tm,
        tn,
        out,
        L.m,
        L.n_g,
        L.d,
        L.c_steps,
        CSR=L.csr,
        **L.consts(),
    )
    if bool(torch.isnan(out).any()):
        raise RuntimeError("the extract launch left relevant scores unwritten")
    if L.perm is not None:  # written in column order: back to the block CSR's order
        back = torch.empty_like(out)
        back[torch.from_numpy(L.perm).to(L.dev)] = out
        out = back
    return out


def count_arrays(
    Qb,
    G,
    similarity,
    qa,
    ga,
    q_codes,
    g_codes,
    grank,
    indptr,
    rid,
    cols,
    selfs,
    *,
    screen=False,
    tile=None,
    g_norms=None,
    csr: bool = False,
    pairs: PairRequest | None = None,
):
    """The two launches on one block. Returns ((relevant scores sorted in rows, the
    permutation that sorts them), above, tied) as :func:`~._blocks.count_torch` does,
    and, when ``pairs`` asks, a fourth item: ``{"negatives", "tau", "fixed_fp"}``.
    ``csr``: explicit relevance (the block CSR's columns; codes and ranks unused)."""

    L = _Launch(
        Qb,
        G,
        similarity,
        qa,
        ga,
        q_codes,
        g_codes,
        indptr,
        rid,
        cols,
        selfs,
        screen,
        tile,
        g_norms,
        csr,
    )
    vals = _extract(L, grank, indptr, rid, cols)
    nnz = int(indptr[-1])
    rel_sorted, order = sort_within_rows(
        vals, Csr(np.asarray(indptr, np.int64), np.asarray(cols, np.int64)), True
    )
    counts = np.diff(indptr)
    r_max = int(counts.max()) if counts.size else 0
    if r_max == 0 and pairs is None:
        return (rel_sorted, order), np.zeros(nnz, np.int64), np.zeros(nnz, np.int64)
    linear = r_max <= LINEAR_MAX
    hist, ties, extra = _count(L, rel_sorted, r_max, pairs, linear)
    import torch

    r_t = torch.from_numpy(np.repeat(np.arange(L.m), counts)).to(L.dev)
    c_t = torch.from_numpy(np.arange(nnz) - np.repeat(np.asarray(indptr[:-1]), counts)).to(L.dev)
    if linear:  # the counts themselves, per row and relevant item
        above, tied = hist.to(torch.int64)[r_t, c_t], ties.to(torch.int64)[r_t, c_t]
    else:  # difference arrays
        suffix = hist.to(torch.int64).flip(1).cumsum(1).flip(1)
        above = suffix[r_t, c_t + 1]
        tied = ties.to(torch.int64).cumsum(1)[r_t, c_t]
    head = ((rel_sorted, order), above.cpu().numpy(), tied.cpu().numpy())
    return head if pairs is None else head + (extra,)


def _count(L: _Launch, rel_sorted, r_max: int, pairs: PairRequest | None, linear: bool):
    """Launch 2 (with the pair outputs when asked): the rank counts (``linear``: per row
    and relevant item; else their difference arrays) and the pair outputs.

    The tail: every negative ``>= tau`` goes to a buffer. While ``tau`` is -inf (the
    first block) the buffer holds the whole block's negatives: the memory of the score
    block the torch path holds, which is what a block's height is planned for (pair
    metrics keep the plan's blocks). Later blocks start with ``2 capacity + 1024``
    values; a tail larger than its buffer is counted, never written out of bounds, and
    the launch runs again with a buffer of exactly its size. Then, as the torch path
    does, ``tau`` rises to the ``capacity``-th largest value when more are kept."""
    import torch

    width = max(1, r_max) if linear else r_max + 1
    tau = -math.inf if pairs is None else float(pairs.tau)
    fixed = (
        np.zeros(0, np.float32)
        if pairs is None or pairs.fixed is None
        else np.asarray(pairs.fixed, np.float32)
    )
    FIX = L.t(fixed if fixed.size else np.zeros(1, np.float32), torch.float32)
    n_all = L.m * L.n_g
    if pairs is None:
        cap = 1
    elif pairs.capacity is None or math.isinf(tau):
        cap = n_all
    else:
        cap = min(n_all, 2 * int(pairs.capacity) + 1024)
    while True:
        hist = torch.zeros((L.m, width), dtype=torch.int32, device=L.dev)
        ties = torch.zeros((L.m, width), dtype=torch.int32, device=L.dev)
        FIXCNT = torch.zeros(max(1, fixed.size), dtype=torch.int64, device=L.dev)
        TAIL = torch.empty(max(1, cap), dtype=torch.float32, device=L.dev)
        TAILN = torch.zeros(1, dtype=torch.int64, device=L.dev)
        STATS = torch.zeros(2, dtype=torch.int64, device=L.dev)
        _kernels()["count"][L.grid()](
            L.Q,
            L.G,
            L.qc,
            L.gc,
            L.COLS,
            L.SELF,
            L.ptr,
            L.own(rel_sorted),
            L.QA,
            L.GA,
            L.QN,
            L.GN,
            hist,
            ties,
            FIX,
            FIXCNT,
            TAIL,
            TAILN,
            STATS,
            L.m,
            L.n_g,
            L.d,
            width,
            int(r_max).bit_length(),
            L.c_steps,
            L.gamma,
            max(tau, _F32_MIN),
            int(fixed.size),
            cap,
            SCREEN=L.screen,
            EMULATE=L.interp,
            CSR=L.csr,
            PAIRS=pairs is not None,
            LINEAR=bool(linear),
            **L.consts(),
        )
        L.record(STATS)
        if pairs is None:
            return hist, ties, None
        n = int(TAILN.item())
        if n <= cap:
            break
        cap = n  # too many for the buffer: once more, with room for all of them
    tail = TAIL[:n]
    if pairs.capacity is not None and n > int(
        pairs.capacity
    ):  # keep the capacity-th largest and above
        kth = float(torch.kthvalue(tail, n - int(pairs.capacity) + 1).values)
        if kth > tau:
            tau = kth
            tail = tail[tail >= tau]
    extra = {
        "negatives": tail.cpu().numpy(),
        "tau": tau,
        "fixed_fp": FIXCNT[: fixed.size].cpu().numpy(),
    }
    return hist, ties, extra


def bin_counts(
    Qb,
    G,
    similarity,
    qa,
    ga,
    q_codes,
    g_codes,
    grank,
    indptr,
    rid,
    cols,
    selfs,
    sorted_positive,
    *,
    screen=False,
    tile=None,
    g_norms=None,
    csr: bool = False,
) -> np.ndarray:
    """The binning pass on one block: ``out[p]`` = negatives with ``p`` positive scores
    ``<=`` them (``p >= 1``; ``out[0]`` stays 0), as :func:`~._blocks.run_binning_block`."""
    import torch

    L = _Launch(
        Qb,
        G,
        similarity,
        qa,
        ga,
        q_codes,
        g_codes,
        indptr,
        rid,
        cols,
        selfs,
        screen,
        tile,
        g_norms,
        csr,
    )
    nu = int(sorted_positive.size)
    out = torch.zeros(nu + 1, dtype=torch.int64, device=L.dev)
    if nu == 0:
        return out.cpu().numpy()
    U = L.t(np.asarray(sorted_positive, np.float32), torch.float32)
    STATS = torch.zeros(2, dtype=torch.int64, device=L.dev)
    _kernels()["bin"][L.grid()](
        L.Q,
        L.G,
        L.qc,
        L.gc,
        L.COLS,
        L.SELF,
        L.ptr,
        U,
        L.QA,
        L.GA,
        L.QN,
        L.GN,
        out,
        STATS,
        L.m,
        L.n_g,
        L.d,
        nu,
        nu.bit_length(),
        L.c_steps,
        L.gamma,
        SCREEN=L.screen,
        EMULATE=L.interp,
        CSR=L.csr,
        **L.consts(),
    )
    L.record(STATS)
    return out.cpu().numpy()


# ----------------------------------------------------------------------------- self-check
def self_check_cases() -> list[tuple[str, int, str]]:
    """The self-check's cases, (similarity, screen, data kind): every similarity under
    each screen (Hamming: exact only) on integer and float data (Hamming: codes)."""
    return [
        (similarity, screen, kind)
        for similarity in FUSED_SIMILARITIES
        for screen in ((0,) if similarity == "hamming" else (0, 1, 2))
        for kind in (("int",) if similarity == "hamming" else ("int", "float"))
    ]


def self_check(device, cases=None) -> tuple[bool, str | None]:
    """Run the kernel (fp32, bf16- and TF32-screened; label and explicit relevance; the
    pair outputs) against the torch path on small integer data (exact in any order) and
    on floats (counts) for every supported similarity; (ok, reason if not). ``cases``
    (tests: a subset of :func:`self_check_cases`, in the interpreter): those only."""
    try:
        import triton  # noqa: F401
    except Exception as exc:  # not installed, or broken
        return False, f"triton could not be imported ({type(exc).__name__}: {exc})"
    try:
        for similarity, screen, kind in self_check_cases() if cases is None else cases:
            got, want = _check_case(device, similarity, screen, kind)
            if kind == "float":  # the scores' last bits may differ between GEMMs; the rank counts
                # may not (the pair outputs hold values and counts at thresholds: integer data only)
                got, want = got[1:3] + got[4:6], want[1:3] + want[4:6]
            if not got == want:
                return False, (
                    f"its counts differ from the torch path's in the self-check "
                    f"(similarity={similarity!r}, screened={screen}, {kind} data)"
                )
    except Exception as exc:  # compilation or launch failure
        return False, f"compiling or running it failed ({type(exc).__name__}: {str(exc)[:300]})"
    return True, None


def _check_case(  # long: one self-check case: the problem, both paths, every output compared
    device, similarity: str, screen: bool, kind: str = "int"
):
    """(kernel's counts, torch path's counts) on a 37 x 83 problem with labels,
    leave-one-out self pairs and duplicate rows in different labels: small integers
    (exact in any summation order: every score agrees bit for bit), or floats (the
    duplicates' exact ties test that both launches compute a pair's score alike)."""
    import torch

    rng = np.random.default_rng(17)
    n, d = 83, 20
    if similarity == "hamming":  # 100-bit codes in two words; codes one bit apart tie often
        X = rng.integers(-(2**62), 2**62, size=(n, 2), dtype=np.int64)
        X[:, 1] &= (1 << 36) - 1
        X[20:40] = X[0:20] ^ (np.int64(1) << rng.integers(0, 36, size=(20, 1), dtype=np.int64))
    elif kind == "int":
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
        # squared norms, as Backend.cosine_rows_into gives integer rows (1 for float rows)
        sq = (X.astype(np.float64) ** 2).sum(1) if kind == "int" else np.ones(n)
        ga = torch.from_numpy(np.maximum(sq, 1).astype(np.float32)).to(be.device)
        qa = ga[:m]
    order = np.argsort(y, kind="stable")
    ys = y[order]
    grank = np.empty(n, np.int32)
    grank[order] = np.arange(n) - np.searchsorted(ys, ys, side="left")
    rows, cols = [], []
    for i in range(m):
        js = [
            j
            for j in order[np.searchsorted(ys, y[i]) : np.searchsorted(ys, y[i], side="right")]
            if j != i
        ]
        rows += [i] * len(js)
        cols += js
    rows, cols = np.array(rows, np.int64), np.array(cols, np.int64)
    indptr = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
    selfs = (np.arange(m, dtype=np.int32)[:, None], np.arange(m, dtype=np.int32)[:, None], 1)
    (rel_sorted, _), above, tied = count_arrays(
        G[:m], G, similarity, qa, ga, y[:m], y, grank, indptr, rows, cols, selfs, screen=screen
    )
    if similarity == "hamming":
        S = torch.empty((m, n), dtype=torch.float32, device=be.device)
        hamming_tile_torch(G[:m], G, S)
    else:
        S = G[:m] @ G.T
    if qa is not None:
        be.finish_scores(S, similarity, qa, ga)
    vals = S[torch.from_numpy(rows).to(be.device), torch.from_numpy(cols).to(be.device)].clone()
    S[torch.from_numpy(rows).to(be.device), torch.from_numpy(cols).to(be.device)] = -math.inf
    ar = torch.arange(m, device=be.device)
    S[ar, ar] = -math.inf
    ref_sorted, _ = sort_within_rows(vals, Csr(indptr, cols), True)
    ref_above, ref_tied = count_torch(S[None], m, n, indptr, ref_sorted)
    # the same relevance as an explicit CSR, with the pair outputs: the tail above the
    # median negative and the negatives >= three fixed thresholds
    neg = S[S > -math.inf]
    fixed = torch.quantile(
        neg.double(), torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64, device=be.device)
    )
    fixed = np.unique(fixed.float().cpu().numpy())
    tau = float(fixed[len(fixed) // 2])
    (csr_sorted, _), c_above, c_tied, extra = count_arrays(
        G[:m],
        G,
        similarity,
        qa,
        ga,
        None,
        None,
        None,
        indptr,
        rows,
        cols,
        selfs,
        screen=screen,
        csr=True,
        pairs=PairRequest(tau, fixed, None),
    )
    got = (
        rel_sorted.cpu().numpy().tobytes(),
        above.tolist(),
        tied.tolist(),
        csr_sorted.cpu().numpy().tobytes(),
        c_above.tolist(),
        c_tied.tolist(),
        np.sort(extra["negatives"]).tolist(),
        extra["fixed_fp"].tolist(),
    )
    want = (
        ref_sorted.cpu().numpy().tobytes(),
        ref_above.tolist(),
        ref_tied.tolist(),
        ref_sorted.cpu().numpy().tobytes(),
        ref_above.tolist(),
        ref_tied.tolist(),
        torch.sort(neg[neg >= tau]).values.cpu().tolist(),
        [int((neg >= t).sum()) for t in fixed],
    )
    return got, want
