"""The fused CPU counter: each cache-sized tile of products is scanned right after it is
computed, instead of a whole block of scores written to memory and read back.

A query block (the plan's ``b`` rows, so blocks, checkpoints and executors see the same
tasks) is worked through in panels of ``t`` rows (:data:`TILE_ROWS`). For each panel:

1. its relevant pairs' scores come first: the panel's relevant gallery items are
   gathered (``c`` at a time, the rest in a tile of a multiple of :data:`GATHER_STEP`
   columns, zero-padded) and multiplied, then the score epilogue; the scores are sorted
   within rows;
2. then, gallery chunk after chunk, the ``t x c`` tile of products and its epilogue are
   computed and at once scanned by one compiled kernel (:mod:`._fused_cpu_numba`): the
   row's relevant and self pairs are masked, then dense rows are counted against every
   relevant score in vectorised passes, sparse rows skip groups of scores below the
   row's lowest relevant score with one branch-free comparison and place the rest among
   the row's sorted relevant scores; the counts add up over the tiles.
   Pair metrics: the tile's negatives at or above the tail threshold are kept and its
   negatives binned against the fixed thresholds, from the same tile; the pass's first
   block seeds the tail threshold from a first sweep (the histogram of its negatives).

One worker thread per core (``torch.get_num_threads()``), each with its own panel and
tile, the products single-threaded while they run. Opt-in (``RC_CPU_COUNTER=fused``,
:func:`wanted`): exact, but on this project's shared 2-core machine no faster than the
scored path (docs/explanation/benchmarks.md).

Exactness. The counts are those of the scored CPU path (:class:`._counters.CpuCounter`)
bit for bit when every score is: the epilogue is elementwise, so only the products
matter, and BLAS products are computed in ``t x c`` tiles here, ``b x c`` tiles there,
with gathered columns. BLAS libraries do not promise that a dot product's bits are
independent of the tile's shape or of where a row sits in it (this project's MKL
changes them for fewer than 6 rows, or 64 rows at d = 1000 on two threads). So before a
pass uses a tile shape, :func:`shapes_exact` multiplies random float32 data both ways on
this machine, in this process's thread count (``b x c`` as the scored path does;
``t``-row panels with rows and columns permuted as here) and compares every bit; the
counter declines (the scored path runs) when any differs. A summation order that
differs changes many of the ``b x c`` random products, so the probe sees it; it runs once
per (backend, shapes, d, threads) and process.

Symmetric leave-one-out (each pair of blocks once, S[i, j] = S[j, i]) is not done: the
scored path's own tiles are ``b x c`` rectangles whose mirror images have another shape,
so the mirrored product is not guaranteed to have the bits the pass gives that pair
today, and the task-per-block seam (checkpoints, executors) would need counts for other
blocks' rows.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import BackendError
from . import _kernels
from ._counters import tail_threshold
from ._partial import BlockPartial, ranked_partial

__all__ = ["FusedCpuCounter", "supports", "wanted", "shapes_exact", "TILE_ROWS"]

TILE_ROWS = 128  # rows per panel: a 128 x 4096 float32 tile is 2 MiB (half per core)
GATHER_STEP = 256  # gathered relevant items: tile widths are multiples of this
_F32_MIN = float(np.finfo(np.float32).min)
_SIMILARITIES = ("cosine", "dot", "neg_l2")

_PROBED: dict = {}
_PROBE_LOCK = threading.Lock()


DEFAULT = "scored"  # RC_CPU_COUNTER unset: the scored path (see wanted())


def wanted() -> bool:
    """Whether passes on torch CPU use this counter: ``RC_CPU_COUNTER=fused`` (or
    ``scored``, the compiled kernels after whole-block products); unset, :data:`DEFAULT`.
    The default stays the scored path: on this project's shared 2-core machine the fused
    pass measured no faster (docs/explanation/benchmarks.md), though exact."""
    choice = os.environ.get("RC_CPU_COUNTER", "").strip().lower() or DEFAULT
    if choice not in ("fused", "scored"):
        raise BackendError(
            f"RC_CPU_COUNTER={choice!r}: use 'fused' (the fused CPU tile pass) or 'scored' "
            "(products of whole blocks, then the compiled scan)."
        )
    return choice == "fused"


def supports(backend, similarity: str, relevant=None) -> bool:
    """The fused CPU counter serves torch CPU problems of cosine, dot and neg_l2 when
    the compiled kernels (numba) run."""
    if backend.kind != "torch" or backend.is_cuda or similarity not in _SIMILARITIES:
        return False
    return _kernels.ACCELERATOR == "numba"


def shapes_exact(backend, b: int, t: int, c: int, d: int, workers: int, widths=None) -> bool:
    """Whether this machine's products of ``t x w`` tiles for every ``w`` of ``widths``
    (default ``(c,)``; rows and columns anywhere in them), computed as the counter
    computes them (``workers`` > 1: single-threaded in worker threads; else on the
    calling thread), have the bits of the scored path's ``b x c`` tiles: checked once per
    width on random data (see the module's docstring)."""
    import torch

    widths = sorted({c} if widths is None else {int(w) for w in widths})
    base = (backend.name, b, t, c, d, workers, torch.get_num_threads())
    with _PROBE_LOCK:
        todo = [w for w in widths if base + (w,) not in _PROBED]
        if todo:
            for w, ok in zip(todo, _probe(backend, b, t, c, d, workers, todo)):
                _PROBED[base + (w,)] = ok
        return all(_PROBED[base + (w,)] for w in widths)


def _probe(backend, b: int, t: int, c: int, d: int, workers: int, widths: list) -> list:
    """One ``b x c`` product of random data as the scored path computes it, then for each
    width two ``t``-row panels (the ref's last rows and random ones, in random order):
    one against its first columns, one against random columns in random order."""
    import torch

    rng = np.random.default_rng(20261127)
    A = torch.from_numpy(rng.standard_normal((b, d), dtype=np.float32))
    B = torch.from_numpy(rng.standard_normal((c, d), dtype=np.float32))
    ref = torch.empty((b, c), dtype=torch.float32)
    backend.matmul_into(A, B, ref)
    n = min(t, b)
    tail = np.arange(b - n // 2, b)
    rows = [
        torch.from_numpy(
            rng.permutation(np.concatenate([tail, rng.permutation(b)[: n - tail.size]]))
        )
        for _ in range(2)
    ]
    cols = {w: torch.from_numpy(rng.permutation(c)[:w]) for w in widths}

    def panels() -> list:
        if threading.current_thread() is not threading.main_thread():
            torch.set_num_threads(1)
        panel = torch.zeros((t, d), dtype=torch.float32)
        out = []
        for w in widths:
            tile = torch.empty((t, w), dtype=torch.float32)
            ok = True
            for take, pick in ((rows[0], torch.arange(w)), (rows[1], cols[w])):
                panel.zero_()
                panel[: take.numel()] = A[take]
                backend.matmul_into(panel, B[pick].contiguous(), tile)
                ok = ok and torch.equal(tile[: take.numel()], ref[take][:, pick])
            out.append(bool(ok))
        return out

    if workers == 1:
        return panels()
    from concurrent.futures import ThreadPoolExecutor

    with _one_thread_products(), ThreadPoolExecutor(1) as pool:
        return pool.submit(panels).result()


class FusedCpuCounter:
    """A fused counter (the seam's plug-in shape, :mod:`._counting`): computes its own
    scores, tile by tile, and returns the block's :class:`BlockPartial`, or None when it
    declines the block (the ``fallback`` scored counter runs it): tile shapes whose
    products are not bit-identical on this machine, a column window, or the first
    block of a pair pass (which seeds the tail threshold from its whole block)."""

    fused = True
    name = "fused-cpu"
    torch_path = False

    def __init__(self, fallback=None, tile_rows: int | None = None):
        self.fallback = fallback
        self.tile_rows = tile_rows  # None: TILE_ROWS when a block runs

    def rows(self, p, want_pairs: bool) -> int:
        return p.b

    def run_binning(self, p, start, stop, sorted_positive, out) -> bool:
        return False

    def run_block(self, p, start: int, stop: int, pairs=None) -> BlockPartial | None:
        if getattr(p, "windowed", False) or p.similarity not in _SIMILARITIES:
            return None
        tail_tau = -math.inf
        fixed = None
        seed = None
        if pairs is not None:
            tail_tau = float(pairs.tau)
            if not math.isfinite(tail_tau) and pairs.capacity is not None:
                seed = int(pairs.capacity)
            fixed = pairs.fixed if pairs.fixed is not None and pairs.fixed.size else None
        t = min(p.b, int(self.tile_rows or TILE_ROWS))
        return _run(p, start, stop, t, pairs is not None, tail_tau, seed, fixed)


def _gather_widths(n: int, c: int) -> list:
    """Column counts of the tiles that hold ``n`` gathered relevant items: whole chunks
    of ``c``, the rest rounded up to a multiple of :data:`GATHER_STEP` (fewer padded
    products than a whole chunk; every width is probed)."""
    full, rest = divmod(n, c)
    return [c] * full + ([min(c, -(-rest // GATHER_STEP) * GATHER_STEP)] if rest else [])


def _run(p, start, stop, t, want_pairs, tail_tau, seed, fixed) -> BlockPartial | None:
    """The block on the fused pass, or None when a tile shape is not bit-identical.
    ``seed``: the tail's capacity when the tail threshold is still -inf (the pass's first
    block): a first sweep of the block's tiles takes the histogram of its negatives,
    as the scored path's ``seed_tail`` does from its whole block."""
    m = stop - start
    panels = list(range(0, m, t))
    n_workers = max(1, min(len(panels), _workers()))
    rel = p.relevant.block(start, stop)
    gathered = []  # per panel: its relevant items (unique) and each pair's index among them
    for s0 in panels:
        a, e = int(rel.indptr[s0]), int(rel.indptr[min(m, s0 + t)])
        U, inv = np.unique(rel.indices[a:e], return_inverse=True)
        gathered.append((U, inv.reshape(-1)))
    widths = {w for U, _ in gathered for w in _gather_widths(U.size, p.c)} | {p.c}
    d = int(p.Q.shape[1])
    if not shapes_exact(p.backend, p.b, t, p.c, d, n_workers, widths):
        return None
    own = p.self_pairs.rows(start, stop)
    n_rel = int(rel.indptr[-1])
    blk = _Block(
        p=p,
        start=start,
        t=t,
        rel=rel,
        rid=rel.row_ids(),
        own=own,
        own_rid=own.row_ids(),
        tau=np.float32(math.inf),
        want_pairs=want_pairs,
        fixed=fixed,
        rel_sorted=np.empty(n_rel, np.float32),
        order=np.empty(n_rel, np.int64),
        above=np.zeros(n_rel, np.int64),
        tied=np.zeros(n_rel, np.int64),
        gathered=gathered,
        epilogue=p.qa is not None
        and not (
            p.similarity == "cosine"
            and bool((p.qa == 1).all())
            and bool((p.ga[: p.n_g] == 1).all())
        ),
    )
    if seed is not None:
        blk.seeding = True
        hists = _sweep(blk, panels, n_workers, m)
        tail_tau = tail_threshold(sum(h for _, h in hists), seed)
        blk.seeding = False
    if want_pairs:
        blk.tau = np.float32(max(tail_tau, _F32_MIN))
    outs = _sweep(blk, panels, n_workers, m)
    part = ranked_partial(start, stop, rel, blk.rel_sorted, blk.order, blk.above, blk.tied, False)
    if want_pairs:
        part.positives = blk.rel_sorted
        negs = [x for negatives, _ in outs for x in negatives]
        part.negatives = np.concatenate(negs) if negs else np.zeros(0, np.float32)
        if fixed is not None:
            hist = sum(h for _, h in outs)
            part.fixed_fp = np.cumsum(hist[::-1])[::-1][1:].copy()
        part.negatives_tau = float(tail_tau)
    return part


def _sweep(blk, panels, n_workers: int, m: int) -> list:
    """Every panel of the block on ``n_workers`` workers; their (negatives, histogram)."""
    if n_workers == 1:
        return [_worker(blk, list(range(len(panels))), m)]
    from concurrent.futures import ThreadPoolExecutor

    with _one_thread_products(), ThreadPoolExecutor(n_workers) as pool:
        jobs = [
            pool.submit(_worker, blk, list(range(w, len(panels), n_workers)), m)
            for w in range(n_workers)
        ]
        return [j.result() for j in jobs]


@dataclass
class _Block:
    """One block's inputs and outputs, shared by its workers (each writes its own
    panels' rows of the outputs)."""

    p: object
    start: int
    t: int
    rel: object
    rid: np.ndarray
    own: object
    own_rid: np.ndarray
    tau: np.float32
    want_pairs: bool
    fixed: np.ndarray | None
    rel_sorted: np.ndarray
    order: np.ndarray
    above: np.ndarray
    tied: np.ndarray
    gathered: list
    epilogue: bool  # False: cosine of rows normalised on the host (factors 1: no-op)
    seeding: bool = False  # the first sweep: the histogram of the negatives' keys only


def _workers() -> int:
    import torch

    return max(1, int(torch.get_num_threads()))


_THREADS_LOCK = threading.Lock()


@contextlib.contextmanager
def _one_thread_products():
    """One sweep of workers at a time; each worker makes its own products
    single-threaded (``torch.set_num_threads(1)`` on its own thread: OpenMP's and MKL's
    setting is per thread, so the caller's and other threads' products keep their
    threads), and torch's default for threads it starts later, which that call also
    sets, is put back after."""
    import torch

    with _THREADS_LOCK:
        old = torch.get_num_threads()
        try:
            yield
        finally:
            torch.set_num_threads(old)


def _worker(blk: _Block, panels: list, m: int):  # long: one worker's loop: gather, products, scan
    """The block's panels number ``panels``, in turn, on this worker's buffers: relevant
    scores first, then every chunk's tile, scanned at once."""
    import torch

    from . import _fused_cpu_numba as K

    if threading.current_thread() is not threading.main_thread():
        torch.set_num_threads(1)  # this thread's own setting (OpenMP's is per thread)
    p, t = blk.p, blk.t
    be, c, n_g = p.backend, p.c, p.n_g
    d = int(p.Q.shape[1])
    rel = blk.rel
    Qt = torch.zeros((t, d), dtype=torch.float32)
    Gg = torch.zeros((c, d), dtype=torch.float32)
    tile = torch.empty((t, c), dtype=torch.float32)
    tile_np = tile.numpy()
    factors = blk.epilogue
    qa_t = torch.zeros(t, dtype=torch.float32) if factors else None
    ga_g = torch.zeros(c, dtype=torch.float32) if factors else None
    negatives = []
    fixed_hist = None if blk.fixed is None else np.zeros(blk.fixed.size + 1, np.int64)
    if blk.seeding:
        fixed_hist = np.zeros(65536, np.int64)
    start = blk.start
    for n_panel in panels:
        s0 = n_panel * t
        s1 = min(m, s0 + t)
        mt = s1 - s0
        Qt[:mt] = p.Q[start + s0 : start + s1]
        if mt < t:
            Qt[mt:] = 0
        if factors:
            qa_t[:mt] = p.qa[start + s0 : start + s1]
        a, e = int(rel.indptr[s0]), int(rel.indptr[s1])
        rid = blk.rid[a:e] - s0
        cols = rel.indices[a:e]
        vals = np.empty(e - a, np.float32)
        if blk.seeding:  # the first sweep: no relevant scores, no counts
            rs = np.zeros(0, np.float32)
            rel_ptr = np.zeros(mt + 1, np.int64)
        else:
            # 1. the panel's relevant scores, from its relevant items gathered in t x c tiles
            U, inv = blk.gathered[n_panel]
            u0 = 0
            for w in _gather_widths(U.size, c):
                n_u = min(w, U.size - u0)
                idx = torch.from_numpy(U[u0 : u0 + n_u])
                Gg[:n_u] = p.Gp[idx]
                Gg[n_u:w] = 0
                part = tile if w == c else tile.view(-1)[: t * w].view(t, w)
                be.matmul_into(Qt, Gg[:w], part)
                if factors:
                    ga_g[:n_u] = p.ga[idx]
                    ga_g[n_u:w] = 0
                    be.finish_scores(part, p.similarity, qa_t, ga_g[:w])
                sel = (inv >= u0) & (inv < u0 + n_u)
                vals[sel] = part.numpy()[rid[sel], inv[sel] - u0]
                u0 += n_u
            o = np.lexsort((vals, rid))  # the scored path's sort, restricted to these rows
            blk.order[a:e] = a + o
            rs = vals[o]
            blk.rel_sorted[a:e] = rs
            rel_ptr = (rel.indptr[s0 : s1 + 1] - a).astype(np.int64)
        # the pairs never counted: relevant and self, per row (global columns)
        lo_o, hi_o = np.searchsorted(blk.own_rid, [s0, s1])
        m_rows = np.concatenate([rid, blk.own_rid[lo_o:hi_o] - s0])
        m_cols = np.concatenate([cols, blk.own.indices[lo_o:hi_o]]).astype(np.int64)
        mask_cols = m_cols[np.argsort(m_rows, kind="stable")]
        mask_ptr = np.zeros(mt + 1, np.int64)
        np.cumsum(np.bincount(m_rows, minlength=mt), out=mask_ptr[1:])
        n_r = int(rel_ptr[-1])
        hist = np.zeros(n_r + mt, np.int64)
        tie_diff = np.zeros(n_r + mt, np.int64)
        above = blk.above[a:e] if n_r else np.zeros(0, np.int64)
        tied = blk.tied[a:e] if n_r else np.zeros(0, np.int64)
        # 2. every gallery chunk: product, epilogue, scan while the tile is in cache
        for k in range(p.n_chunks):
            width = min(c, n_g - k * c)
            be.matmul_into(Qt, p.Gp[k * c : (k + 1) * c], tile)
            if factors:
                be.finish_scores(tile, p.similarity, qa_t, p.ga[k * c : (k + 1) * c])
            tail = K.scan_tile(
                tile_np,
                mt,
                width,
                k * c,
                mask_ptr,
                mask_cols,
                rel_ptr,
                rs,
                hist,
                tie_diff,
                above,
                tied,
                blk.tau,
            )
            if blk.seeding:
                K.key_histogram_tile(tile_np, mt, width, fixed_hist)
            elif blk.want_pairs:
                if tail.any():
                    view = tile_np[:mt, :width]
                    negatives.append(view[view >= blk.tau])
                if fixed_hist is not None:
                    K.bin_tile(tile_np, mt, width, blk.fixed, fixed_hist)
        K.finish_counts(mt, rel_ptr, hist, tie_diff, above, tied)
    return negatives, fixed_hist
