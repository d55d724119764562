"""Grouped Recall@K on a fused Triton kernel: the GPU path of :mod:`.._grouped`.

What it computes. For every query in a group, exactly what :func:`.._grouped._score_batch`
computes: among the group's gallery items (``valid``: a different id than the query;
leave-one-out: the group's other items), its best relevant score ``b`` (relevant: the
same label code), the number of non-relevant items scored ``> b`` (``above``) and
``== b`` (``tied``), the relevant items scored ``== b`` (``group``) and the number of
valid items (``candidates``); then ``FirstRanks(1 + above + tied, 1 + above, group)``
gives hit_rate@K under each tie policy, recorded as :mod:`.._grouped` records it.

How. The items are sorted by group, and by label inside a group, once per partition
(on the device; all groups at once, no padding to the largest group). A *unit* is a
group's queries (or, for a group too large for the memory budget, a block of them)
against the group's whole gallery. Units are packed into chunks of consecutive groups
whose device arrays fit the budget (per query row ``4 d + 48`` bytes, per gallery row
``4 d + 24``, per work item 32; each group's gallery once). Where the full copies of
both sides (:func:`resident_bytes`) take at most half of ``max_memory`` they are
uploaded once per call (kept across ``repeats``) and each chunk is gathered on the
device, in the other half; otherwise each chunk is gathered on the host and uploaded.
One launch per chunk runs one program per *work item* (``BM`` query rows of a unit,
largest galleries first), which sweeps the unit's gallery tiles twice: first, exact,
for each row's best relevant score and the relevant items tied with it, over only the
tiles that can hold the rows' relevant items (the labels' band of columns,
:func:`sweep_ranges`: a small part of a group with many labels); then for the
negatives above and tied with it, over every tile. So the product work is about one
pass over each group's query x gallery block, plus the bands. A program owns its rows,
so the counts are plain stores (no atomics, no score matrix in memory).

Screening (``RC_TRITON_SCREEN`` = ``bf16`` / ``tf32``, as for the main kernel): the
second sweep computes each tile with bf16 (or TF32) inputs and fp32 accumulation, and
bounds every pair's exact fp32 score within ``[epi(P - e), epi(P + e)]``, ``e = gamma
|q| |g| + 2^-21 |P|`` (:func:`._triton.error_bound`; the score epilogue is monotone). A
tile where no negative's interval holds its row's best score is counted from those
intervals (each negative clearly above or below); any other tile is recomputed exactly
in fp32 by the function the first sweep uses, so every count equals the fp32 kernel's.
:data:`STATS` holds the last call's numbers of screened and recomputed tiles.

Scores. Each tile is :func:`._triton_kernels.tile_dot` (``tl.dot`` with
``input_precision="ieee"``: full fp32, no TF32) followed by
:func:`._triton_kernels.epilogue` (the IEEE operations of
:meth:`~._backend.Backend.finish_scores` in the same order). Both sweeps compute a pair
in the same tile from the same operands, so the best relevant score is the very number
its row's items are compared with. Against the numpy path (``np.matmul`` of padded
batches) the scores are equal bit for bit where every product is exact in any
summation order (small-integer embeddings: ties and duplicates included), and the
counts are equal wherever no two scores of a row are closer than the two summation
orders' rounding (random float data); elsewhere the two paths may order a near-tie
differently, exactly as two BLAS libraries may.

When. Only for cosine, dot and neg_l2 on a torch backend where
:func:`._triton.wanted` says the fused kernels are on (CUDA: ``RC_TRITON`` and the main
kernel's self-check; CPU tensors: only inside the tests' :func:`._triton.on_cpu`), and
only in one process (a ``score_batch`` hook, the sharded engine's, keeps its own path).
Hamming similarity stays on the numpy path (packed code words, not a float product).
On first use on a CUDA device the kernel is checked against the numpy path on a small
integer problem; if that differs, or a launch fails, a RuntimeWarning says so and the
numpy path serves (the same numbers) for the rest of the process on that device.

Benchmark: :func:`time_grouped` (``RC_TRITON=1``), or
:func:`.._grouped.grouped_recall_values` with ``backend=Backend("torch",
torch.device("cuda"))``.

triton and torch are imported on first use only (``import retrieval_checks`` loads neither).
"""

from __future__ import annotations

import time

import numpy as np

from ...errors import BackendError, warn_outside
from .._backend import Backend
from .._grouped import GroupData, grouped_recall_values, score_groups
from .._partial import FirstRanks
from . import _triton

__all__ = [
    "NAME",
    "fused_groups",
    "usable",
    "self_check",
    "chunk_plan",
    "work_items",
    "sweep_ranges",
    "resident_bytes",
    "time_grouped",
    "STATS",
    "ROW_BYTES",
]

#: the last call's tile counts (tests, benchmarks): tiles the screen decided, tiles computed exactly
STATS = {"screened": 0, "exact": 0}
_STATE: dict = {}  # CUDA device key -> (ok, reason): the grouped self-check's verdict, or a launch failure
_KERNEL = None
_GALLERY_BYTES = 24  # per gallery row beyond its 4 d bytes: code (8), id (8), factor (4), norm (4)
ROW_BYTES = 48  # per query row beyond its 4 d bytes: code, id, factor, norm, six outputs (4 each)
_WORK_BYTES = 32  # per work item: six int32 bounds, two int32 tile counts


def _kernel():
    global _KERNEL
    if _KERNEL is None:
        from ._triton_grouped_kernels import grouped_kernel

        _KERNEL = grouped_kernel
    return _KERNEL


def usable(backend, similarity: str, score_batch=None) -> bool:
    """Whether grouped recall runs on the fused kernel (module docstring, "When")."""
    if backend is None or score_batch is not None or similarity not in _triton.SIMILARITIES:
        return False
    # wanted() has validated RC_TRITON_SCREEN / RC_TRITON_TILE before the self-check runs
    return _triton.checked_once(
        backend,
        _STATE,
        lambda: self_check(backend),
        _warn,
        task="grouped",
    )


def _warn(where: str, reason: str) -> None:
    warn_outside(
        f"retrieval_checks: grouped recall's fused Triton kernel is not used on {where} ({reason}); "
        "the numpy path computes the same numbers instead. Set RC_TRITON=0 to skip the attempt.",
        RuntimeWarning,
    )


#: this kernel's name in ``result.provenance.grouped`` (one of :data:`.._grouped.PATHS`)
NAME = "triton-grouped"


def fused_groups(
    data, gq, gg, r, ks, hits, similarity, candidates, max_memory, *, tile=None
) -> str | None:
    """Fill ``hits`` and ``candidates`` as :func:`.._grouped.score_groups` does, on the
    fused kernel, and answer its name (:data:`NAME`, what the result's provenance
    records); None (nothing written) where it does not apply, or after a
    RuntimeWarning when the kernel failed (the caller's host path then serves, and is
    recorded)."""
    backend = data.backend
    if not usable(backend, similarity):
        return None
    _triton.screening()  # an invalid RC_TRITON_SCREEN is an error, not a kernel failure
    try:
        counts = _counts(data, gq, gg, r, similarity, max_memory, backend, tile)
    except Exception as exc:  # a compile or launch failure the self-check did not meet
        reason = f"it failed on a partition ({type(exc).__name__}: {str(exc)[:300]})"
        if backend.is_cuda:
            _STATE[str(backend.device)] = (False, reason)
        _warn(str(backend.device), reason)
        return None
    _record(counts, gq, ks, hits, candidates)
    return NAME


def _record(counts, gq, ks, hits, candidates) -> None:
    """The per-query hits, as :func:`.._grouped._score_batch` records them."""
    has, above, tied, group, cand = counts
    qi = np.flatnonzero(gq >= 0)
    candidates[qi] = cand[qi]
    first = FirstRanks(1 + above[qi] + tied[qi], 1 + above[qi], group[qi])
    for policy, policy_hits in hits.items():
        for k in ks:
            policy_hits[k][qi] = np.where(has[qi], first.under(policy, k), np.nan)


def chunk_plan(q_sizes, g_sizes, d: int, max_memory: int, bm: int):
    """Units and chunks: a list of chunks, each a list of units ``(group, q_lo, q_hi)``
    (the group's query positions ``q_lo:q_hi`` in group order, against its whole
    gallery), consecutive in group order. A chunk holds each of its groups' gallery
    once; its bytes (module docstring) stay within ``max_memory``, except a lone unit:
    a group too large alone is split into query blocks (multiples of ``bm``, at least
    ``bm`` rows: its gallery must be whole)."""
    q_row, g_row = 4 * d + ROW_BYTES, 4 * d + _GALLERY_BYTES
    chunks, cur, used, last = [], [], 0, -1
    for g, (nq, ng) in enumerate(zip(q_sizes.tolist(), g_sizes.tolist())):
        if nq == 0:
            continue
        room = max_memory - ng * g_row
        rows = (
            nq
            if nq * (q_row + _WORK_BYTES) <= room
            else max(bm, room // (q_row + _WORK_BYTES) // bm * bm)
        )
        for lo in range(0, nq, rows):
            n = min(rows, nq - lo)
            cost = (
                n * q_row + (-(-n // bm)) * _WORK_BYTES + (0 if cur and last == g else ng * g_row)
            )
            if cur and used + cost > max_memory:
                chunks.append(cur)
                cur, used = [], 0
                cost = n * q_row + (-(-n // bm)) * _WORK_BYTES + ng * g_row
            cur.append((g, lo, lo + n))
            used, last = used + cost, g
    if cur:
        chunks.append(cur)
    return chunks


def sweep_ranges(wr0, wre, wg0, qkey, gkey, bm: int, bn: int):
    """(WS0, WS1) int32: the gallery columns a work item's best-score sweep visits: from
    the tile (on its unit's grid, ``wg0 + j bn``) holding the first item whose key
    (unit, label) is the first row's, to the end of the last row's key; empty where no
    gallery item shares a row's key. ``qkey`` / ``gkey``: non-decreasing chunk keys."""
    last = np.minimum(wr0 + bm, wre) - 1
    lo = np.searchsorted(gkey, qkey[wr0], side="left")
    hi = np.searchsorted(gkey, qkey[last], side="right")
    ws0 = np.where(lo < hi, wg0 + (lo - wg0) // bn * bn, wg0)
    ws1 = np.where(lo < hi, hi, wg0)
    return np.ascontiguousarray(ws0, np.int32), np.ascontiguousarray(ws1, np.int32)


def work_items(q0, q1, g0, g1, bm: int):
    """(WR0, WRE, WG0, WGE) int32: one work item per ``bm`` query rows of each unit
    (rows ``q0:q1`` against gallery rows ``g0:g1`` of the chunk), largest galleries
    first (the long programs start early)."""
    tiles = -(-(q1 - q0) // bm)
    unit = np.repeat(np.arange(q0.size), tiles)
    within = np.arange(unit.size) - np.repeat(np.cumsum(tiles) - tiles, tiles)
    wr0 = q0[unit] + within * bm
    order = np.argsort(-(g1 - g0)[unit], kind="stable")
    return tuple(
        np.ascontiguousarray(a[order], np.int32) for a in (wr0, q1[unit], g0[unit], g1[unit])
    )


def _sides(data):
    """(q side, g side): (embeddings, codes, ids, factors); leave-one-out ranks the
    queries against themselves; no ids: nothing is the same item."""
    q = (data.q_emb, data.q_codes, data.q_ids, data.q_factor)
    g = q if data.g_emb is None else (data.g_emb, data.g_codes, data.g_ids, data.g_factor)
    if data.q_ids is None:  # as _score_groups: distinct fillers on the two sides
        q = (q[0], q[1], np.full(q[1].shape[0], -1, np.int64), q[3])
        g = (g[0], g[1], np.full(g[1].shape[0], -2, np.int64), g[3])
    return q, g


def _group_order(torch, group, codes, r: int, big: int, dev):
    """Items sorted by (group, label code), stably, on the device: (order on the host,
    order on the device, sorted keys ``group * big + code`` (-1: in no group) on the
    host, the r + 1 group bounds in that order)."""
    key = np.where(group >= 0, group.astype(np.int64) * big + codes, -1)
    order_dev = torch.sort(torch.from_numpy(key).to(dev), stable=True).indices
    order = order_dev.cpu().numpy()
    key_sorted = key[order]
    return (
        order,
        order_dev,
        key_sorted,
        np.searchsorted(key_sorted, np.arange(r + 1, dtype=np.int64) * big),
    )


class _Rows:
    """One side's rows (embeddings, codes, ids, factors) gathered for a chunk: from
    copies resident on the device (uploaded once per call, kept in ``cache`` across
    partitions), or gathered on the host and uploaded chunk by chunk."""

    def __init__(self, torch, side, dev, resident: bool, cache: dict, name: str):
        self.torch, self.side, self.dev = torch, side, dev
        self.dtypes = (torch.float32, torch.int64, torch.int64, torch.float32)
        self.full = None
        if resident:
            key = (name, str(dev))
            if key not in cache:
                cache[key] = [
                    None if a is None else self._up(a, dt) for a, dt in zip(side, self.dtypes)
                ]
            self.full = cache[key]

    def _up(self, a, dt):  # a fresh device copy (the interpreter resizes its arguments' storage)
        if isinstance(
            a, self.torch.Tensor
        ):  # the engine's prepared device tensors: no host round trip
            return a.to(device=self.dev, dtype=dt)
        return self.torch.tensor(np.ascontiguousarray(a), dtype=dt, device=self.dev)

    def with_ids(self, filler: int):
        """The same rows with every id replaced by ``filler``."""
        other = _Rows.__new__(_Rows)
        other.__dict__.update(self.__dict__, filler=filler)
        return other

    def take(self, order, order_dev, a: int, b: int):
        """Device tensors of the rows at sorted positions ``a:b`` (None for no factors)."""
        if self.full is not None:
            idx = order_dev[a:b]
            rows = [None if x is None else x.index_select(0, idx) for x in self.full]
        else:
            sel = order[a:b]
            rows = [
                None if x is None else self._up(x[sel], dt) for x, dt in zip(self.side, self.dtypes)
            ]
        if getattr(self, "filler", None) is not None:
            rows[2] = self.torch.full(
                (b - a,), self.filler, dtype=self.torch.int64, device=self.dev
            )
        return rows


def _norms_up(torch, X):
    """Row norms of float32 ``X`` (in float64, rounded up to float32): the screening
    bound's ``|q|``, ``|g|``."""
    n = torch.empty(X.shape[0], dtype=torch.float32, device=X.device)
    step = 1 << 16  # rows at a time: the float64 copy stays small
    for a in range(0, X.shape[0], step):
        n[a : a + step] = torch.linalg.vector_norm(X[a : a + step].double(), dim=1).float()
    return torch.nextafter(n, torch.full_like(n, np.inf))


def resident_bytes(n_q: int, n_g: int, d: int) -> int:
    """Device bytes of both sides' full copies (``n_g`` 0 in leave-one-out) and the
    two sort orders: the device-gather path runs where this is at most half the budget."""
    return (n_q + n_g) * (4 * d + 20) + (n_q + max(n_g, n_q)) * 16


def _counts(
    data, gq, gg, r, similarity, max_memory, backend, tile
):  # long: plan, gather and launch per chunk
    """Per query (full length, zeros outside the groups): has a relevant item, above,
    tied, group, candidates."""
    import torch

    BM, BN, BK = tile or _triton.tile_shape()
    q_side, g_side = _sides(data)
    d, n_q = int(q_side[0].shape[1]), int(q_side[1].shape[0])
    EPI = _triton._EPILOGUE[similarity] if q_side[3] is not None else 0
    dev = backend.device
    big = int(max(q_side[1].max(), g_side[1].max())) + 1
    # by group, then by label inside it: a query tile's relevant items are a band of columns
    q_order, q_dev, q_keys, q_bounds = _group_order(torch, gq, q_side[1], r, big, dev)
    g_order, g_dev, g_keys, g_bounds = (
        (q_order, q_dev, q_keys, q_bounds)
        if data.loo
        else _group_order(torch, gg, g_side[1], r, big, dev)
    )
    n_g = 0 if data.loo else int(g_side[1].shape[0])
    resident = resident_bytes(n_q, n_g, d)
    on_device = resident <= max_memory // 2
    budget = max_memory - resident if on_device else max_memory
    q_rows = _Rows(torch, q_side, dev, on_device, data.cache, "q")
    g_rows = (
        _Rows(torch, g_side, dev, on_device, data.cache, "g")
        if not data.loo
        else (q_rows if data.q_ids is not None else q_rows.with_ids(-2))
    )  # no ids: distinct fillers, as _score_groups
    out = [np.zeros(n_q, np.int64) for _ in range(5)]
    dummy = torch.zeros(1, dtype=torch.float32, device=dev)
    screen = int(_triton.screening())
    gamma = _triton.error_bound(d, screen) if screen else 0.0
    screen = (
        screen if np.isfinite(gamma) else 0
    )  # d >= 2^22: no useful bound, every tile would be recomputed
    STATS.update(screened=0, exact=0)
    for chunk in chunk_plan(np.diff(q_bounds), np.diff(g_bounds), d, budget, BM):
        ug, ulo, uhi = (np.array(c, np.int64) for c in zip(*chunk))
        qa_, qb_ = int(q_bounds[ug[0]] + ulo[0]), int(q_bounds[ug[-1]] + uhi[-1])
        ga_, gb_ = int(g_bounds[ug[0]]), int(g_bounds[ug[-1] + 1])
        W = work_items(
            q_bounds[ug] + ulo - qa_,
            q_bounds[ug] + uhi - qa_,
            g_bounds[ug] - ga_,
            g_bounds[ug + 1] - ga_,
            BM,
        )
        W += sweep_ranges(W[0], W[1], W[2], q_keys[qa_:qb_], g_keys[ga_:gb_], BM, BN)
        Qe, QC, QI, QF = q_rows.take(q_order, q_dev, qa_, qb_)
        if data.loo and (qa_, qb_) == (
            ga_,
            gb_,
        ):  # whole groups: the gallery rows are the query rows
            Ge, GC, GI, GF = Qe, QC, (QI if g_rows is q_rows else torch.full_like(QI, -2)), QF
        else:
            Ge, GC, GI, GF = g_rows.take(g_order, g_dev, ga_, gb_)
        res = [
            torch.zeros(qb_ - qa_, dtype=torch.float32 if i == 0 else torch.int32, device=dev)
            for i in range(6)
        ]
        stats = torch.zeros(2 * W[0].size, dtype=torch.int32, device=dev)
        QN, GN = (_norms_up(torch, Qe), _norms_up(torch, Ge)) if screen else (dummy, dummy)
        _launch(
            int(W[0].size),
            Qe,
            Ge,
            QC,
            GC,
            QI,
            GI,
            dummy if EPI == 0 else QF,
            dummy if EPI == 0 else GF,
            QN,
            GN,
            *(torch.tensor(a, device=dev) for a in W),
            *res,
            stats,
            d,
            float(gamma),
            BM=BM,
            BN=BN,
            BK=BK,
            EPI=EPI,
            SCREEN=screen,
            EMULATE=_triton._interpreting(),
            enable_fp_fusion=False,
        )
        stats = stats.view(-1, 2).sum(0).tolist()
        STATS["screened"] += int(stats[0])
        STATS["exact"] += int(stats[1])
        qsel = q_order[qa_:qb_]
        for arr, t in zip(out, res[1:]):
            arr[qsel] = t.cpu().numpy()
    return out


def _launch(n_work, *args, **meta):
    """One launch of the kernel over ``n_work`` work items (tests spy on this)."""
    _kernel()[(n_work,)](*args, **meta)


def self_check(backend) -> tuple[bool, str | None]:
    """The fused path against the numpy path on a small integer problem (exact in any
    summation order; duplicates, uneven groups, a dropped label, leave-one-out by id)
    for every supported similarity, under ``RC_TRITON_SCREEN``; (ok, reason if not)."""
    try:
        import triton  # noqa: F401
    except Exception as exc:  # not installed, or broken
        return False, f"triton could not be imported ({type(exc).__name__}: {exc})"
    try:
        for similarity in _triton.SIMILARITIES:
            got, want = _check_case(backend, similarity)
            if not all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, want)):
                return (
                    False,
                    f"its hits differ from the numpy path's in the self-check (similarity={similarity!r})",
                )
    except Exception as exc:  # compilation or launch failure
        return False, f"compiling or running it failed ({type(exc).__name__}: {str(exc)[:300]})"
    return True, None


def _check_case(backend, similarity: str):
    """(fused, numpy) per-query hits under both tie orders and candidates on 70 items
    in 4 uneven groups, leave-one-out."""

    rng = np.random.default_rng(17)
    n, d = 70, 20
    X = rng.integers(-2, 3, size=(n, d)).astype(np.float32)
    X[40:55] = X[20:35]  # duplicates
    codes = rng.integers(0, 12, size=n)
    gq = np.where(codes < 11, codes % 4, -1)  # label 11 dropped; uneven groups
    sq = (X.astype(np.float64) ** 2).sum(1)
    fac = {
        "dot": None,
        "neg_l2": sq.astype(np.float32),  # cosine: squared norms (Backend.cosine_rows_into)
        "cosine": np.maximum(sq, 1).astype(np.float32),
    }[similarity]
    ids = np.arange(n)
    results = []
    for be in (backend, None):
        data = GroupData(X, codes, ids, None, None, None, fac, None, backend=be)
        hits = {p: {k: np.full(n, np.nan) for k in (1, 3)} for p in ("pessimistic", "optimistic")}
        cand = np.zeros(n, np.int64)
        if be is None:
            score_groups(data, gq, gq, 4, [1, 3], hits, similarity, cand, 2**30)
        else:
            _record(_counts(data, gq, gq, 4, similarity, 2**30, be, None), gq, [1, 3], hits, cand)
        results.append([cand] + [hits[p][k] for p in hits for k in (1, 3)])
    return results[0], results[1]


# ----------------------------------------------------------------------------- benchmark
def time_grouped(
    n: int,
    d: int,
    *,
    device: str = "cuda",
    per_class: int = 10,
    group_size: int = 1000,
    similarity: str = "cosine",
    ks=(1,),
    repeats: int = 1,
    seed: int = 0,
    max_memory: int = 16 * 2**30,
) -> dict:
    """One benchmark row: Grouped Recall@K on the fused kernel for ``n`` items of
    dimension ``d`` (``n // per_class`` labels, clustered float32 embeddings,
    leave-one-out, ``group_size`` labels per group), timed from the prepared arrays to
    the per-query hits (sort, upload, launches, host bookkeeping and the interval).
    Returns ``{"seconds", "value", "n_groups", "screened", "exact"}``. On CUDA the
    kernels must be on (``RC_TRITON=1``; ``RC_TRITON_SCREEN`` picks screening); a
    BackendError says so when the fused path did not run (no silent numpy timing)."""
    import torch

    rng = np.random.default_rng(seed)
    y = np.arange(n) // per_class
    X = rng.standard_normal((int(y[-1]) + 1, d), dtype=np.float32)[y]
    X += rng.standard_normal((n, d), dtype=np.float32)
    sq = np.einsum("ij,ij->i", X, X, dtype=np.float64)
    factor = {
        "dot": None,
        "neg_l2": sq.astype(np.float32),  # cosine: squared norms (Backend.cosine_rows_into)
        "cosine": np.maximum(sq, 1e-30).astype(np.float32),
    }[similarity]
    backend = Backend("torch", torch.device(device))
    STATS.update(screened=-1, exact=-1)
    sync = torch.cuda.synchronize if backend.is_cuda else (lambda: None)
    served: dict = {}  # the path that scored each partition
    sync()
    t0 = time.perf_counter()
    found = grouped_recall_values(
        X,
        y,
        None,
        None,
        q_ids=np.arange(n),
        g_ids=None,
        ks=list(ks),
        group_size=group_size,
        seed=seed,
        repeats=repeats,
        confidence=0.95,
        ties="pessimistic",
        similarity=similarity,
        label_values=np.unique(y),
        max_memory=max_memory,
        q_factor=factor,
        backend=backend,
        fused=fused_groups,
        record=served,
    )
    sync()
    seconds = time.perf_counter() - t0
    if STATS["exact"] < 0 or served != {NAME: repeats}:
        raise BackendError(
            f"time_grouped: the fused grouped kernel did not run on {device} for every partition "
            f"(partitions by path: {served}; set RC_TRITON=1 and check the RuntimeWarnings); "
            "its time is not the kernel's."
        )
    g = found[min(ks)]
    return {
        "seconds": seconds,
        "value": g.value,
        "n_groups": g.n_groups,
        "screened": STATS["screened"],
        "exact": STATS["exact"],
    }
