"""The streaming engine: exact ranks of relevant items in one memory-bounded pass.

The pass is a list of independent tasks, one per block of queries. A task computes
the block's similarities against the whole gallery, tile by tile (fixed tile shapes,
so a pair's score never depends on where it sits), reads off the relevant and self
pairs, masks them with -inf, and counts for every relevant item how many
non-relevant items score at least as high and how many exactly as high. The two
counts give the item's exact pessimistic and optimistic ranks and its tie group;
every ranking metric, under every tie policy, follows from them.
Partial results merge by concatenation and addition (:class:`BlockPartial`), so
tasks may run in any order or place.

Memory: one block of ``b x n_gallery`` float32 scores plus the block's relevant
pairs; ``b`` is chosen from the budget. Time: one GEMM pass plus a scan of the
scores that reach a row's lowest relevant score, each followed by a binary search
among that row's relevant scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import _kernels
from ._backend import Backend
from ._inputs import Csr, ranges_to_csr

__all__ = [
    "Problem",
    "BlockPartial",
    "plan_blocks",
    "block_rows",
    "run_block",
    "run_binning_block",
    "ranked_partial",
    "tail_histogram",
    "tail_threshold",
]


@dataclass
class Problem:
    """A prepared evaluation: arrays on the backend plus the pair structure."""

    backend: Backend
    Q: object  # (n_q x d) float32 on the backend; rows normalised for cosine
    Gp: object  # (n_chunks * c x d), gallery padded with zero rows
    n_g: int
    c: int  # gallery chunk width
    b: int  # query block height
    similarity: str
    relevant: "RelevanceSource"
    self_pairs: Csr
    qa: object = None  # row factors of the tile epilogue (Backend.row_factors): queries
    ga: object = None  # and padded gallery
    _buffers: tuple | None = field(default=None, repr=False)

    @property
    def n_q(self) -> int:
        return int(self.Q.shape[0])

    @property
    def n_chunks(self) -> int:
        return int(self.Gp.shape[0]) // self.c


class RelevanceSource:
    """Relevant gallery items of a block of queries (self matches removed)."""

    def __init__(
        self, *, q_codes=None, g_codes=None, csr: Csr | None = None, self_pairs: Csr, n_g: int
    ):
        self.n_g = n_g
        self.self_pairs = self_pairs
        self.csr = csr
        if csr is None:
            self.q_codes = q_codes
            self.g_order = np.argsort(g_codes, kind="stable").astype(np.int64)
            self.g_sorted = g_codes[self.g_order]

    def block(self, start: int, stop: int) -> Csr:
        if self.csr is not None:
            rel = self.csr.rows(start, stop)
        else:
            codes = self.q_codes[start:stop]
            lo = np.searchsorted(self.g_sorted, codes, side="left")
            hi = np.searchsorted(self.g_sorted, codes, side="right")
            rel = ranges_to_csr(self.g_order, lo, hi)
        own = self.self_pairs.rows(start, stop)
        if own.indices.size == 0 or rel.indices.size == 0:
            return rel
        n_g = self.n_g
        keys = rel.row_ids() * n_g + rel.indices
        self_keys = own.row_ids() * n_g + own.indices
        keep = ~np.isin(keys, self_keys)
        if keep.all():
            return rel
        rid = rel.row_ids()[keep]
        indptr = np.zeros(rel.n_rows + 1, np.int64)
        np.cumsum(np.bincount(rid, minlength=rel.n_rows), out=indptr[1:])
        return Csr(indptr, rel.indices[keep], None if rel.grades is None else rel.grades[keep])

    @property
    def graded(self) -> bool:
        return self.csr is not None and self.csr.grades is not None

    def level_counts(self, n_q: int, level: float) -> np.ndarray:
        """Relevant items of grade >= ``level`` per query (self matches excluded)."""
        out = np.zeros(n_q, np.int64)
        for start in range(0, n_q, 4096):
            stop = min(n_q, start + 4096)
            rel = self.block(start, stop)
            out[start:stop] = np.bincount(
                rel.row_ids()[rel.grades >= level], minlength=stop - start
            )
        return out

    def counts(self, n_q: int) -> np.ndarray:
        """Number of relevant gallery items of every query (self matches excluded),
        without materialising the relevant pairs."""
        rid, cols = self.self_pairs.row_ids(), self.self_pairs.indices
        if self.csr is None:
            lo = np.searchsorted(self.g_sorted, self.q_codes, side="left")
            hi = np.searchsorted(self.g_sorted, self.q_codes, side="right")
            g_codes = np.empty_like(self.g_sorted)
            g_codes[self.g_order] = self.g_sorted
            own_relevant = rid[self.q_codes[rid] == g_codes[cols]]
        else:
            lo, hi = self.csr.indptr[:-1], self.csr.indptr[1:]
            keys = self.csr.row_ids() * self.n_g + self.csr.indices
            own_relevant = rid[np.isin(rid * self.n_g + cols, keys)]
        return (hi - lo) - np.bincount(own_relevant, minlength=n_q)


def plan_blocks(n_q: int, b: int) -> list[tuple[int, int]]:
    """The task list: contiguous query blocks ``[start, stop)``."""
    return [(s, min(n_q, s + b)) for s in range(0, n_q, b)]


FUSED_ROWS_MAX = 1 << 16  # query rows per task on the fused kernel


def block_rows(p: "Problem", use_kernels: bool = True, want_pairs: bool = False) -> int:
    """Query rows per task: the plan's ``b``; on the fused Triton kernel, which keeps no
    score block in memory, as many rows as the score block's budget holds of the
    kernel's per-row arrays (counts per relevant item, the relevant pairs), up to
    :data:`FUSED_ROWS_MAX`: fewer, larger launches. With pair metrics the plan's ``b``
    stays: a block's negative tail is bounded by its score block's size. Per-query
    results do not depend on the blocks."""
    if want_pairs or _fused(p, use_kernels) is None:
        return p.b
    counts = p.relevant.counts(p.n_q)
    r_max = int(counts.max()) if counts.size else 0
    per_row = (
        40 * (r_max + 1) + 64 * r_max + 64
    )  # bytes: int32 counts and their int64 sums, pair arrays
    budget = p.b * p.n_chunks * p.c * 4  # the score block the torch path would hold
    return int(max(p.b, min(p.n_q, FUSED_ROWS_MAX, budget // per_row)))


@dataclass
class BlockPartial:
    """A task's result. Merging: concatenate the per-query parts in block order; add
    ``fixed_fp``; concatenate ``positives`` and feed ``negatives`` to one tail."""

    start: int
    stop: int
    indptr: np.ndarray  # block-local CSR over relevant items
    rank: np.ndarray  # 1-based pessimistic rank of each relevant item (tied negatives ahead)
    position: np.ndarray  # 0-based position among the row's relevant items, best first
    tied: np.ndarray  # non-relevant items with exactly its score (optimistic rank = rank - tied)
    positives: np.ndarray | None = None  # relevant-pair scores (float32)
    negatives: np.ndarray | None = None  # every negative >= negatives_tau
    negatives_tau: float = -math.inf
    fixed_fp: np.ndarray | None = None  # negatives >= each fixed threshold
    grade: np.ndarray | None = None  # graded relevance: each relevant item's grade (same order)
    score: np.ndarray | None = (
        None  # graded relevance: each relevant item's score (ties among them)
    )


# ----------------------------------------------------------------------------- tiles
def _block_scores(p: Problem, start: int, stop: int):
    """The block's scores as (n_chunks, b, c), on the backend, in a buffer reused by
    every block (fresh multi-hundred-MB buffers cost page faults on each block)."""
    be = p.backend
    m = stop - start
    if p._buffers is None:
        Qb = (
            p.Q[:0].new_zeros((p.b, p.Q.shape[1]))
            if be.kind == "torch"
            else np.zeros((p.b, p.Q.shape[1]), p.Q.dtype)
        )
        p._buffers = (Qb, be.empty((p.n_chunks, p.b, p.c)), be.zeros((p.b,)))
    Qb, S, qa = p._buffers
    Qb[:m] = p.Q[start:stop]
    if m < p.b:
        Qb[m:] = 0
    if p.qa is not None:
        qa[:m] = p.qa[start:stop]
    score_chunks(be, Qb, p.Gp, p.c, p.n_chunks, p.similarity, qa, None if p.qa is None else p.ga, S)
    tail = p.n_g - (p.n_chunks - 1) * p.c
    if tail < p.c:
        S[p.n_chunks - 1, :, tail:] = -math.inf
    return S


def score_chunks(be, Qb, Gp, c: int, n_chunks: int, similarity: str, qa, ga, S) -> None:
    """One query block's tiles: ``S[k]`` = the scores of ``Qb`` against gallery chunk
    ``k`` (rows ``k*c .. k*c+c-1`` of the padded ``Gp``): a popcount tile for hamming,
    else the product and, where row factors are given (``ga``), the score epilogue.
    The one-process and the sharded passes both score through here, so a pair's score
    is computed by the same operations on every path."""
    for k in range(n_chunks):
        Gk = Gp[k * c : (k + 1) * c]
        if similarity == "hamming":
            _hamming_tile(be, Qb, Gk, S[k])
            continue
        be.matmul_into(Qb, Gk, S[k])
        if ga is not None:
            be.finish_scores(S[k], similarity, qa, ga[k * c : (k + 1) * c])


def _hamming_tile(be: Backend, Qw, Gw, out) -> None:
    """-(Hamming distance) of packed codes into ``out``: torch on CUDA, the compiled
    CPU kernel elsewhere (torch CPU tensors are viewed as numpy without a copy)."""
    from . import _hamming

    if be.is_cuda:
        _hamming.hamming_tile_torch(Qw, Gw, out)
    elif be.kind == "torch":
        _hamming.hamming_into(Qw.numpy().view(np.uint64), Gw.numpy().view(np.uint64), out.numpy())
    else:
        _hamming.hamming_into(Qw, Gw, out)


def _take_and_mask(p: Problem, S, rel: Csr, own: Csr, torch_path: bool):
    """Relevant scores (float32, block-CSR order); relevant and self pairs set to -inf."""
    rid = rel.row_ids()
    cols = rel.indices
    k, j = cols // p.c, cols % p.c
    if not torch_path:
        Sn = S
        vals = Sn[k, rid, j].copy()
        Sn[k, rid, j] = -np.inf
        if own.indices.size:
            oc = own.indices
            Sn[oc // p.c, own.row_ids(), oc % p.c] = -np.inf
        return vals
    import torch

    dev = S.device
    kt, rt, jt = (torch.from_numpy(a).to(dev) for a in (k, rid, j))
    vals = S[kt, rt, jt].clone()
    S[kt, rt, jt] = -math.inf
    if own.indices.size:
        oc = own.indices
        idx = tuple(torch.from_numpy(a).to(dev) for a in (oc // p.c, own.row_ids(), oc % p.c))
        S[idx] = -math.inf
    return vals


def _sort_within_rows(vals, rel: Csr, torch_path: bool):
    """Relevant scores sorted ascending inside each row, and the permutation (numpy)
    that sorts them."""
    if torch_path:
        import torch

        rid = torch.from_numpy(rel.row_ids()).to(vals.device)
        # stable two-key sort: by value, then by row
        v_sorted, order = torch.sort(vals, stable=True)
        r2 = rid[order]
        r_sorted, order2 = torch.sort(r2, stable=True)
        return v_sorted[order2], order[order2].cpu().numpy()
    order = np.lexsort((vals, rel.row_ids()))
    return vals[order], order


def _count_torch(S, m: int, n_g: int, indptr: np.ndarray, rel_sorted):
    """The vectorised twin of :func:`_kernels.count_above_relevant` (CUDA, or tests):
    non-relevant scores ``>=`` each relevant score, and those ``==`` it."""
    import torch

    dev = S.device
    counts = np.diff(indptr)
    r_max = int(counts.max()) if counts.size else 0
    if r_max == 0:
        return np.zeros(rel_sorted.shape[0], np.int64), np.zeros(rel_sorted.shape[0], np.int64)
    rid = torch.from_numpy(np.repeat(np.arange(m), counts)).to(dev)
    col = torch.from_numpy(np.arange(indptr[-1]) - np.repeat(indptr[:-1], counts)).to(dev)
    padded = torch.full((m, r_max), math.inf, dtype=torch.float32, device=dev)
    padded[rid, col] = rel_sorted
    hist = torch.zeros((m, r_max + 1), dtype=torch.int64, device=dev)
    tie_diff = torch.zeros((m, r_max + 1), dtype=torch.int64, device=dev)
    for k in range(S.shape[0]):
        tile = S[k, :m].contiguous()
        right = torch.searchsorted(padded, tile, right=True)
        hist.scatter_add_(1, right, torch.ones_like(right))
        # a score equal to relevant items left..right-1 ties with each of them
        left = torch.searchsorted(padded, tile, right=False)
        eq = (left < right).to(torch.int64)
        tie_diff.scatter_add_(1, left, eq)
        tie_diff.scatter_add_(1, right, -eq)
    # negatives with insertion position p count against relevant items 0..p-1
    suffix = hist.flip(1).cumsum(1).flip(1)  # suffix[t] = sum_{p >= t} hist[p]
    above = suffix[rid, col + 1]
    tied = tie_diff.cumsum(1)[rid, col]
    return above.cpu().numpy(), tied.cpu().numpy()


def _seed_tail_threshold(Sn: np.ndarray, m: int, n_g: int, capacity: int) -> float:
    """A threshold with at least ``capacity`` of this block's negatives at or above it,
    from a 65536-bin histogram of order-preserving float keys: keeps the first block
    from collecting every negative while the tail threshold is still -inf. Any such
    threshold is a valid (exact) tail threshold, since the whole pass has at least as
    many negatives above it as this block has."""
    return tail_threshold(tail_histogram(Sn, m, n_g), capacity)


def tail_histogram(Sn: np.ndarray, m: int, n_cols: int) -> np.ndarray:
    """The 65536-bin histogram of the order-preserving keys of the finite scores of
    rows ``< m``, columns ``< n_cols`` (counts add over gallery shards)."""
    hist = np.zeros(65536, np.int64)
    _kernels.key_histogram(Sn.view(np.uint32), m, n_cols, hist)
    return hist


def tail_threshold(hist: np.ndarray, capacity: int) -> float:
    """The highest bin floor with at least ``capacity`` scores at or above it (-inf if none)."""
    above = np.cumsum(hist[::-1])[::-1]  # above[t] = values in bins >= t
    ok = np.flatnonzero(above >= capacity)
    if ok.size == 0:
        return -math.inf
    t = int(ok[-1])
    return _kernels.key_to_float(np.uint32(t << 16))


_F32_MIN = float(np.finfo(np.float32).min)


# ----------------------------------------------------------------------------- tasks
def run_block(
    p: Problem,
    start: int,
    stop: int,
    *,
    want_pairs: bool = False,
    tail_tau: float = -math.inf,
    fixed_thresholds: np.ndarray | None = None,
    tail_capacity: int | None = None,
    use_kernels: bool = True,
) -> BlockPartial:
    """One task: exact ranks of the relevant items of queries ``[start, stop)``."""
    fused = _fused_block(
        p, start, stop, use_kernels, want_pairs, tail_tau, fixed_thresholds, tail_capacity
    )
    if fused is not None:
        return fused
    m = stop - start
    rel = p.relevant.block(start, stop)
    own = p.self_pairs.rows(start, stop)
    S, torch_path = _scores_for(p, start, stop, use_kernels)
    vals = _take_and_mask(p, S, rel, own, torch_path)
    rel_sorted, order = _sort_within_rows(vals, rel, torch_path)
    # Pair metrics keep every negative >= the tail threshold; -inf marks masked pairs,
    # so the threshold is at least the lowest finite float32.
    if want_pairs and not torch_path and not math.isfinite(tail_tau) and tail_capacity is not None:
        tail_tau = _seed_tail_threshold(S, m, p.n_g, tail_capacity)
    tau = max(float(tail_tau), _F32_MIN) if want_pairs else math.inf
    if torch_path:
        above, tied = _count_torch(S, m, p.n_g, rel.indptr, rel_sorted)
    else:
        above = np.empty(rel_sorted.shape[0], np.int64)
        tied = np.empty(rel_sorted.shape[0], np.int64)
        tail_counts = np.zeros(m, np.int64)
        _kernels.count_above_relevant(
            S, m, p.n_g, rel.indptr, rel_sorted, above, tied, np.float32(tau), tail_counts
        )
    part = ranked_partial(start, stop, rel, rel_sorted, order, above, tied, torch_path)
    if want_pairs:
        part.positives = rel_sorted.cpu().numpy() if torch_path else rel_sorted
        if torch_path:
            import torch

            view = S[:, :m]
            finite = view > -math.inf
            if not math.isfinite(tail_tau) and tail_capacity is not None:
                n_block = int(finite.sum())
                if n_block > tail_capacity:
                    tail_tau = float(
                        torch.kthvalue(view[finite], n_block - tail_capacity + 1).values
                    )
                    tau = tail_tau
            part.negatives = view[view >= tau].cpu().numpy()
            if fixed_thresholds is not None and fixed_thresholds.size:
                thr = torch.from_numpy(fixed_thresholds).to(S.device)
                part.fixed_fp = np.array([int((view >= t).sum()) for t in thr], np.int64)
        else:
            rows = np.flatnonzero(tail_counts).astype(np.int64)
            offsets = np.zeros(rows.size + 1, np.int64)
            np.cumsum(tail_counts[rows], out=offsets[1:])
            part.negatives = np.empty(int(offsets[-1]), np.float32)
            _kernels.collect_rows(S, rows, offsets, p.n_g, np.float32(tau), part.negatives)
            if fixed_thresholds is not None and fixed_thresholds.size:
                hist = np.zeros(fixed_thresholds.size + 1, np.int64)
                _kernels.bin_against_sorted(S, m, p.n_g, fixed_thresholds, hist)
                part.fixed_fp = np.cumsum(hist[::-1])[::-1][1:]  # scores >= each threshold
        part.negatives_tau = float(tail_tau)
    return part


def _fused_block(
    p: Problem,
    start: int,
    stop: int,
    use_kernels: bool,
    want_pairs: bool = False,
    tail_tau: float = -math.inf,
    fixed_thresholds=None,
    tail_capacity=None,
):
    """The block on the fused Triton kernel (:mod:`._triton`) where the torch path would
    run and the kernel serves (CUDA by ``RC_TRITON``; CPU tensors only in its tests);
    None otherwise. A failure warns and hands the block (and the process) back to the
    torch path."""
    _triton = _fused(p, use_kernels)
    if _triton is None:
        return None
    pairs = _triton.PairRequest(tail_tau, fixed_thresholds, tail_capacity) if want_pairs else None
    return _triton.guarded(p, start, stop, pairs)


def _fused(p: Problem, use_kernels: bool):
    """The :mod:`._triton` module when the fused kernel serves this problem, else None."""
    be = p.backend
    if be.kind != "torch" or (use_kernels and not be.is_cuda):
        return None
    from . import _triton

    if not _triton.supports(p) or not _triton.wanted(be):
        return None
    return _triton


def ranked_partial(
    start: int,
    stop: int,
    rel: Csr,
    rel_sorted,
    order: np.ndarray,
    above: np.ndarray,
    tied: np.ndarray,
    torch_path: bool,
) -> BlockPartial:
    """The block's ranks from the counts: ``above[t]`` non-relevant scores ``>=`` the
    ``t``-th relevant score (rows sorted ascending), ``tied[t]`` of them ``==`` it."""
    counts = rel.row_counts()
    rid = rel.row_ids()
    j = np.arange(rid.size, dtype=np.int64) - rel.indptr[:-1][rid]
    position = counts[rid] - 1 - j
    part = BlockPartial(start, stop, rel.indptr, 1 + position + above, position, tied)
    if rel.grades is not None:
        part.grade = rel.grades[order]
        part.score = rel_sorted.cpu().numpy() if torch_path else rel_sorted
    return part


def run_binning_block(
    p: Problem,
    start: int,
    stop: int,
    sorted_positive: np.ndarray,
    out: np.ndarray,
    use_kernels: bool = True,
) -> None:
    """Second-pass task: bin the block's negatives against the sorted positive scores."""
    _triton = _fused(p, use_kernels)
    if _triton is not None and _triton.guarded(
        p, start, stop, run=lambda: _triton.run_binning_triton(p, start, stop, sorted_positive, out)
    ):
        return
    m = stop - start
    rel = p.relevant.block(start, stop)
    own = p.self_pairs.rows(start, stop)
    S, torch_path = _scores_for(p, start, stop, use_kernels)
    _take_and_mask(p, S, rel, own, torch_path)
    if torch_path:
        import torch

        u = torch.from_numpy(sorted_positive).to(S.device)
        view = S[:, :m].reshape(-1)
        view = view[view >= u[0]]
        pos = torch.searchsorted(u, view, right=True)
        out += torch.bincount(pos, minlength=u.numel() + 1).cpu().numpy()
        return
    _kernels.bin_against_sorted(S, m, p.n_g, sorted_positive, out)


def _scores_for(p: Problem, start: int, stop: int, use_kernels: bool):
    """The block's scores and which code path reads them: the vectorised torch path
    (CUDA, or on request on CPU, where tests run the CUDA code) or the CPU kernels
    (numpy arrays; torch CPU tensors are viewed without a copy)."""
    S = _block_scores(p, start, stop)
    be = p.backend
    if be.is_cuda:
        return S, True
    if not use_kernels:
        if be.kind == "numpy":
            import torch

            S = torch.from_numpy(S)
        return S, True
    return be.to_numpy(S), False
