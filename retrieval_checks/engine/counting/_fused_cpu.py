"""The fused CPU counter: each cache-sized tile of products is scanned right after it is
computed, instead of a whole block of scores written to memory and read back.

A query block (the plan's ``b`` rows, so blocks, checkpoints and executors see the same
tasks) is worked through in panels of ``t`` rows (:data:`TILE_ROWS`):

1. its relevant pairs' scores come first, from a first sweep over the block: its rows
   in sub-panels of :data:`GATHER_ROWS`, rows that share relevant items side by side
   (a class's queries), each against its rows' relevant gallery items only, gathered
   (a column tile's width at a time, the rest in a tile of a multiple of
   :data:`GATHER_STEP` columns, zero-padded) and multiplied, then the score epilogue;
   the scores are sorted within rows (:func:`_relevant_plan`, :func:`_relevant_sweep`);
2. then, gallery chunk after chunk, each of the chunk's column tiles (``t x w``, at
   most :data:`TILE_ROWS` x :data:`TILE_COLS`, so the tile and the counts its scan
   writes stay in cache) is computed with its epilogue and at once
   scanned by one compiled kernel (:mod:`._fused_cpu_numba`): the row's relevant and
   self pairs are masked, one vectorised pass copies out the few scores at or above the
   row's lowest relevant score (:mod:`._simd_numba`), and only those are counted
   against the row's relevant scores; the counts add up over the tiles.
   Pair metrics: the tile's negatives at or above the tail threshold come from the same
   pass, and its negatives are binned against the fixed thresholds, from the same tile;
   each worker keeps its own tail of negatives, raised as it fills (no seed: a worker's
   first tile hands it all its negatives, and the tail cuts them to its capacity).

One worker thread per core (``torch.get_num_threads()``), each with its own panel and
tile, the products single-threaded while they run. By default (``RC_CPU_COUNTER``
unset or ``auto``, :func:`choice`) it runs the passes it mirrors (below) and hands the
others to the scored path; ``fused`` runs every pass on it, ``scored`` none: mirrored it
measured faster than the scored path, one-sided not in every round
(docs/explanation/benchmarks.md).

Exactness. The counts are those of the scored CPU path (:class:`._counters.CpuCounter`)
bit for bit when every score is: the epilogue is elementwise, so only the products
matter, and BLAS products are computed in ``t x w`` tiles here, ``b x c`` tiles there,
with gathered columns. BLAS libraries do not promise that a dot product's bits are
independent of the tile's shape or of where a row sits in it (this project's MKL
changes them for fewer than 6 rows, or 64 rows at d = 1000 on two threads). So before a
pass uses a tile shape, :func:`shapes_exact` multiplies random float32 data both ways on
this machine, in this process's thread count (``b x c`` as the scored path does;
``t``-row panels with rows and columns permuted as here) and compares every bit; the
counter declines (the scored path runs) when any differs. A summation order that
differs changes many of the ``b x c`` random products, so the probe sees it; it runs once
per (backend, shapes, d, threads) and process.

Symmetric leave-one-out (each pair of tiles once). When the queries are the gallery
(the same float32 rows and epilogue factors) and the score is symmetric (cosine, dot:
the cosine epilogue multiplies the two factors, which commutes; neg_l2 subtracts them in
an order that does not), the pass is one task over every query
(:meth:`FusedCpuCounter.rows`): a panel of ``t`` rows inside gallery chunk ``A`` is
multiplied with chunk ``A`` (those tiles hold both orders of their pairs) and with every
later chunk ``B``, and each of ``B``'s ``t x w`` tiles is read twice: row by row for the
panel's rows
(:func:`._fused_cpu_numba.scan_tile`) and column by column for chunk ``B``'s rows
(:func:`._fused_cpu_numba.mask_columns`, :func:`._fused_cpu_numba.scan_columns`, each
side masking its own relevant and self pairs). That is half the products. The score
of (j, i) is then the product the panel computed for (i, j): the same terms
(``x_k y_k = y_k x_k`` exactly), summed in the order BLAS uses for a tile's element,
which :func:`mirror_exact` checks on this machine against the scored path's (j, i)
before the pass mirrors (else the one-sided tiles run). Checkpointed and executor
passes keep the plan's blocks (their files and tasks are keyed by them) and the
one-sided tiles; so do sharded passes (the scored counter).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import threading
from dataclasses import dataclass

import numpy as np

from ...errors import BackendError
from ...metrics._pairs import NegativeTail
from .._partial import BlockPartial, ranked_partial
from . import _kernels
from ._counters import sort_within_rows

__all__ = [
    "FusedCpuCounter",
    "supports",
    "wanted",
    "choice",
    "shapes_exact",
    "mirror_exact",
    "TILE_ROWS",
]

# A tile of products is TILE_ROWS x TILE_COLS float32 (2 MiB): the product and its scan
# run while it is in cache, with the counts its scans write. Measured on the 2-core
# machine (1 MiB L2 a core), fastest of interleaved runs: 50k x 128 leave-one-out
# 512 x 512 3.62 s, 512 x 1024 3.60 s, 256 x 1024 4.00 s, 256 x 512 4.08 s (128 x 3856,
# the tiles before, slower than all); 10k x 40k x 128 query/gallery, medians of three,
# 512 x 1024 0.88 s, 512 x 2048 0.90 s, 256 x 2048 0.95 s, 512 x 512 1.06 s.
TILE_ROWS = 512  # rows per panel
TILE_COLS = 1024  # columns per tile (a chunk is cut into tiles of at most this many)
GATHER_ROWS = 32  # relevant scores are computed for this many rows (a sub-panel) at once
GATHER_STEP = 64  # gathered relevant items: tile widths are multiples of this
_F32_MIN = float(np.finfo(np.float32).min)
_SIMILARITIES = ("cosine", "dot", "neg_l2")
# similarities whose score of (i, j) is that of (j, i) when the products are: the
# cosine epilogue's factor product and a plain product commute; neg_l2's
# (2 q.g - |g|^2) - |q|^2 subtracts in an order that does not
_MIRRORED = ("cosine", "dot")

# The scans' histograms (a row's scores placed among its relevant scores, and its tie
# groups' difference array): int32, as a row holds fewer than 2^31 scores (a gallery of
# 2^31 float32 rows of d >= 1 is 8 GiB at least; larger ones run on the scored counter); the
# workers' sum of a row's histograms still counts the row's scores once. Half the
# memory of int64: a mirrored worker's histograms span every row (:func:`_task_workers`)
_HIST = np.int32
_HIST_ROWS = 2**31 - 1  # galleries of this many items run on the scored counter

_PROBED: dict = {}
_PROBE_LOCK = threading.Lock()


DEFAULT = "auto"  # RC_CPU_COUNTER unset: see choice()
_CHOICES = ("auto", "fused", "scored")
# auto: one-sided passes of at least this many score pairs run fused; below it the
# probes of a new shape (tens of ms, once per process) cost more than the pass saves
AUTO_ONE_SIDED_PAIRS = 1 << 24


def choice() -> str:
    """``RC_CPU_COUNTER``: ``auto`` (unset, :data:`DEFAULT`): this counter for the
    passes it mirrors (leave-one-out, cosine or dot) and for one-sided passes of at
    least :data:`AUTO_ONE_SIDED_PAIRS` (2^24) score pairs that run as one task, the
    scored path for the others; ``fused``: this counter for every pass it serves; ``scored``: never (the
    compiled kernels after whole-block products). The choice follows the measurements
    (docs/explanation/benchmarks.md): the fused pass was faster than the scored one
    leave-one-out in every round and query/gallery at 10k x 40k (d = 128 and 512); on
    small passes the shape probes it runs once per process dominate."""
    value = os.environ.get("RC_CPU_COUNTER", "").strip().lower() or DEFAULT
    if value not in _CHOICES:
        raise BackendError(
            f"RC_CPU_COUNTER={value!r}: use 'auto' (the default: the fused pass where it "
            "mirrors leave-one-out or the pass is large, else the scored one), 'fused' (the "
            "fused CPU tile pass for every pass) or 'scored' (products of whole blocks, then "
            "the compiled scan)."
        )
    return value


def wanted() -> bool:
    """Whether passes on torch CPU may use this counter (``RC_CPU_COUNTER`` is not
    ``scored``: :func:`choice`)."""
    return choice() != "scored"


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


_REFERENCE: list = []  # the last probe reference: [(key, (A, B, ref))]


def _reference(backend, b: int, c: int, d: int):
    """Random ``A`` (``b x d``), ``B`` (``c x d``) and their ``b x c`` product as the
    scored path computes it: the reference every probe of a pass compares with (the
    last one is kept, so a pass's probes make it once). Called under the probe lock."""
    import torch

    key = (backend.name, b, c, d, torch.get_num_threads())
    if _REFERENCE and _REFERENCE[0][0] == key:
        return _REFERENCE[0][1]
    rng = np.random.default_rng(20261126)
    # uniform in [-1, 1): every product rounds, so a different summation order changes
    # many of the b x c products' bits (integers would sum exactly and hide it); 2.4x
    # faster to draw than normal ones (40 -> 17 ms at 827 + 4,000 rows of d = 512)
    A = torch.from_numpy(_uniform(rng, (b, d)))
    B = torch.from_numpy(_uniform(rng, (c, d)))
    ref = torch.empty((b, c), dtype=torch.float32)
    backend.matmul_into(A, B, ref)
    _REFERENCE[:] = [(key, (A, B, ref))]
    return A, B, ref


def _uniform(rng, shape) -> np.ndarray:
    x = rng.random(shape, dtype=np.float32)
    x *= 2
    x -= 1
    return x


def _probe(backend, b: int, t: int, c: int, d: int, workers: int, widths: list) -> list:
    """One ``b x c`` product of random data as the scored path computes it, then for each
    width two ``t``-row panels (the ref's last rows and random ones, in random order):
    one against its first columns, one against random columns in random order."""
    import torch

    A, B, ref = _reference(backend, b, c, d)
    rng = np.random.default_rng(20261127)
    n = min(t, b)
    tail = np.arange(b - n // 2, b)
    rows = [
        torch.from_numpy(
            rng.permutation(np.concatenate([tail, rng.permutation(b)[: n - tail.size]]))
        )
        for _ in range(2)
    ]
    cols = {w: torch.from_numpy(rng.permutation(c)[:w]) for w in widths}

    def panels(ws) -> list:
        panel = torch.zeros((t, d), dtype=torch.float32)
        out = []
        for w in ws:
            tile = torch.empty((t, w), dtype=torch.float32)
            ok = True
            for take, pick in ((rows[0], torch.arange(w)), (rows[1], cols[w])):
                panel.zero_()
                panel[: take.numel()] = A.index_select(0, take)
                backend.matmul_into(panel, B.index_select(0, pick), tile)
                want = ref.index_select(0, take).index_select(
                    1, pick
                )  # twice adv. indexing's speed
                ok = ok and torch.equal(tile[: take.numel()], want)
            out.append(bool(ok))
        return out

    if workers == 1:
        return panels(widths)
    # the widths on the workers, each single-threaded as the counter's (probing 2
    # widths of 512-row panels took 0.06 s of a 0.78 s 10k x 40k pass on one worker)
    k = min(workers, len(widths))
    with _one_thread_products(), _pool(k) as pool:
        parts = list(pool.map(panels, [widths[i::k] for i in range(k)]))
    got = {w: ok for i in range(k) for w, ok in zip(widths[i::k], parts[i])}
    return [got[w] for w in widths]


def mirror_exact(
    backend, b: int, t: int, c: int, d: int, workers: int, w: int | None = None
) -> bool:
    """Whether this machine's ``t x w`` products (``w``: default ``c``), computed as the
    symmetric pass computes them, give the pair ``(i, j)`` the bits the scored path's
    ``b x c`` tile gives the pair ``(j, i)``: the mirrored product. A dot product's terms
    are the same products either way (``x_k y_k = y_k x_k`` exactly); what can differ is
    the order BLAS adds them in for a row of the tile and for a column, which this checks
    on random data (once per shapes, threads and process)."""
    import torch

    w = c if w is None else int(w)
    key = ("mirror", backend.name, b, t, c, w, d, workers, torch.get_num_threads())
    with _PROBE_LOCK:
        if key not in _PROBED:
            _PROBED[key] = _probe_mirror(backend, b, t, c, d, workers, w)
        return _PROBED[key]


def _probe_mirror(backend, b: int, t: int, c: int, d: int, workers: int, w: int) -> bool:
    """The scored path's ``b x c`` product of random ``A`` (queries) and ``B`` (gallery);
    then two ``t``-row panels of ``B``'s rows (its last ones and random ones) against
    ``w`` of ``A``'s rows (in order, then at random with repeats): every product equals
    the scored tile's product of the same two rows, the other way round."""
    import torch

    A, B, ref = _reference(backend, b, c, d)
    rng = np.random.default_rng(20261128)
    n = min(t, c)
    picks = [
        (np.arange(c - n, c), np.arange(w) % b),
        (rng.permutation(c)[:n], rng.integers(0, b, w)),
    ]

    def panels() -> bool:
        panel = torch.zeros((t, d), dtype=torch.float32)
        tile = torch.empty((t, w), dtype=torch.float32)
        for rows, cols in picks:
            r, q = torch.from_numpy(rows), torch.from_numpy(cols)
            panel.zero_()
            panel[:n] = B.index_select(0, r)
            backend.matmul_into(panel, A.index_select(0, q), tile)
            if not torch.equal(tile[:n], ref.index_select(1, r).index_select(0, q).T):
                return False
        return True

    if workers == 1:
        return panels()
    with _one_thread_products(), _pool(1) as pool:
        return pool.submit(panels).result()


class FusedCpuCounter:
    """A fused counter (the seam's plug-in shape, :mod:`.._counting`): computes its own
    scores, tile by tile, and returns the block's :class:`BlockPartial`, or None when it
    declines the block (the ``fallback`` scored counter runs it): tile shapes whose
    products are not bit-identical on this machine, or a column window.

    Leave-one-out passes it can mirror (:func:`_mirror_plan`) run as one task over every
    query (``rows``), each pair of tiles computed once (:func:`_run_mirror`); a
    checkpointed or executor pass keeps the plan's blocks and the one-sided tiles."""

    fused = True
    name = "fused-cpu"
    torch_path = False

    def __init__(self, fallback=None, tile_rows: int | None = None, one_sided: bool | None = None):
        self.fallback = fallback
        self.tile_rows = tile_rows  # None: TILE_ROWS when a block runs
        # the one-sided tiles: always (RC_CPU_COUNTER=fused), or on large passes (auto:
        # None, decided per problem by _one_sided)
        self.one_sided = True if one_sided is None and choice() == "fused" else one_sided
        self._mirror = None  # (problem, its mirror plan or None): the last problem asked
        self._whole = None  # (problem, its one task's workers (0: none) and panel height)
        self._epilogue = None  # (problem, whether its tiles need the score epilogue)
        self.progress = None  # the pass's hook: called with the query rows of each panel done

    def _t(self, p) -> int:
        return min(p.b, int(self.tile_rows or TILE_ROWS))

    def _one_sided(self, p) -> bool:
        """Whether this counter runs ``p``'s blocks it cannot mirror: as told, or
        (``auto``) when the pass has at least :data:`AUTO_ONE_SIDED_PAIRS` score pairs
        (and, :meth:`run_block`, runs as one task)."""
        if self.one_sided is not None:
            return bool(self.one_sided)
        return p.n_q * p.n_g >= AUTO_ONE_SIDED_PAIRS

    def _t_one_sided(self, p, m: int, workers: int) -> int:
        """Panel height of a one-sided block of ``m`` rows on ``workers`` workers: at
        most :meth:`_t`, and the rows in a multiple of the workers' count of equal
        panels (a block of 1,210 rows on 2 workers in 4 panels of 303, not 512, 512 and
        186: the workers finish together)."""
        t = self._t(p)
        k = -(-m // (t * workers))  # panels per worker
        return max(1, -(-m // (k * workers)))

    def _needs_epilogue(self, p) -> bool:
        """:func:`_needs_epilogue` of ``p``, found once (it reads every row's factor)."""
        if self._epilogue is None or self._epilogue[0] is not p:
            self._epilogue = (p, _needs_epilogue(p))
        return self._epilogue[1]

    def one_task(self, p) -> int:
        """On how many workers ``p``'s one-sided pass runs as one task over every query
        (0: it does not; decided once): the counter runs it (:meth:`_one_sided`), the
        plan has several blocks, the task's working set fits the plan's on enough workers
        (:func:`_task_workers`) and its tile shapes are exact (probed here, so the task
        is never declined: the scored counter cannot take a block of every query). The
        workers then take the panels of the whole pass in turn; block by block, each
        block's end waits for its slowest worker, and its pool, probes and plans are made
        again."""
        if self._whole is None or self._whole[0] is not p:
            workers, t = 0, 0
            if (
                not getattr(p, "windowed", False)
                and p.similarity in _SIMILARITIES
                and self._one_sided(p)
                and p.n_q > p.b
            ):
                n_rel = int(p.relevant.counts(p.n_q).sum())
                workers = _task_workers(p, n_rel, self._t(p), mirrored=False)
            if workers:
                t = self._t_one_sided(p, p.n_q, workers)
                workers = min(-(-p.n_q // t), workers)
                if not _gather_exact(p, t, int(p.Q.shape[1]), workers):
                    workers = 0
                _REFERENCE.clear()
            self._whole = (p, workers, t)
        return self._whole[1]

    def mirror_plan(self, p):
        """The symmetric pass's plan of ``p`` (None: it does not apply), made once."""
        if self._mirror is None or self._mirror[0] is not p:
            plan = None
            if p.similarity in _MIRRORED and not getattr(p, "windowed", False):
                plan = _mirror_plan(p, self._t(p))
            self._mirror = (p, plan)
        return self._mirror[1]

    def rows(self, p, want_pairs: bool, binning: bool = False) -> int:
        """The plan's ``b``; every query in one task where the pass is mirrored, or
        one-sided as one task (:meth:`one_task`; not the binning pass's, which the
        scored counter runs one-sided)."""
        if self.mirror_plan(p) is not None or (not binning and self.one_task(p)):
            return p.n_q
        return p.b

    def run_binning(self, p, start, stop, sorted_positive, out) -> bool:
        if (start, stop) != (0, p.n_q) or self.mirror_plan(p) is None:
            return False
        _run_mirror(p, self.mirror_plan(p), self._needs_epilogue(p), bins=(sorted_positive, out))
        return True

    def run_block(self, p, start: int, stop: int, pairs=None) -> BlockPartial | None:
        if getattr(p, "windowed", False) or p.similarity not in _SIMILARITIES:
            return None
        if p.n_g >= _HIST_ROWS:  # a row's histogram could overflow (never in practice)
            return None
        want = None  # the pair metrics' (tail threshold, tail capacity, fixed thresholds)
        if pairs is not None:
            fixed = pairs.fixed if pairs.fixed is not None and pairs.fixed.size else None
            capacity = None if pairs.capacity is None else int(pairs.capacity)
            want = (float(pairs.tau), capacity, fixed)
        epilogue = self._needs_epilogue(p)
        if (start, stop) == (0, p.n_q) and self.mirror_plan(p) is not None:
            return _run_mirror(p, self.mirror_plan(p), epilogue, pairs=want, report=self.progress)
        if not self._one_sided(p):
            return None  # RC_CPU_COUNTER=auto: the scored counter runs a small pass
        if self.one_sided is None and not self.one_task(p):
            # auto: a pass whose relevant pairs outgrow one task runs scored (measured:
            # 20k items in classes of 100, the fused blocks 1.6-2.0 s against 1.3 s)
            return None
        if (start, stop) == (0, p.n_q) and self.one_task(p):
            _, workers, t = self._whole  # the workers and panels one_task probed
        else:
            workers = _block_workers(p, self._t(p))
            t = self._t_one_sided(p, stop - start, workers)
        part = _run(p, start, stop, t, want, epilogue, workers, report=self.progress)
        if part is None and stop - start > p.b:  # one_task probed these shapes: never
            raise BackendError(
                f"The fused CPU pass declined its task of {stop - start} queries after its "
                "probe had accepted the shapes; the scored pass cannot take so many rows "
                "at once. Set RC_CPU_COUNTER=scored and report this."
            )
        return part


@dataclass
class _RelevantPlan:
    """A block's relevant pairs in sub-panels (:func:`_relevant_plan`): ``rows`` (block
    rows that have relevant pairs, :data:`GATHER_ROWS` a sub-panel, rows that share
    items side by side); each sub-panel's distinct items in slots (``slot_ptr``; their
    gallery rows ``index``, ``pad`` the padding slots), cut into tiles (``tile_ptr``: the
    sub-panel's; ``tile_sub``, ``tile_slot``, ``tile_w``: each tile's sub-panel, first
    slot and width); the ``pairs`` (positions in the block's CSR; ``tile_pairs``: each
    tile's run of them) and where each pair's score lands when the tiles' products are
    laid out one after the other, ``GATHER_ROWS x w`` each (``flat``)."""

    rows: np.ndarray
    slot_ptr: np.ndarray
    index: np.ndarray
    pad: np.ndarray
    tile_ptr: np.ndarray
    tile_sub: np.ndarray
    tile_slot: np.ndarray
    tile_w: np.ndarray
    pairs: np.ndarray
    tile_pairs: np.ndarray
    flat: np.ndarray


def _relevant_plan(rel, rid, own, own_rid, n_g: int, c: int) -> _RelevantPlan:
    """The :class:`_RelevantPlan` of a block (``rel``: its relevant pairs, ``rid`` their
    rows; ``own``: its self pairs). Rows are taken in the order of their least item
    (relevant or self): rows of one class (leave-one-out, or queries labelled alike)
    share their relevant items and sit in one sub-panel, which gathers each item once.
    Leave-one-out, 10 items a class: 40 items a sub-panel of 32 rows, against 290 for
    32 rows in block order. The rows' order here; the rest compiled
    (:func:`._fused_cpu_numba.relevant_plan`: 2M pairs in a fraction of the 0.25 s numpy
    took)."""
    from . import _fused_cpu_numba as K

    ts, m = GATHER_ROWS, rel.indptr.size - 1
    items = rel.indices.astype(np.int64)
    has = np.flatnonzero(np.diff(rel.indptr) > 0)
    key = np.full(m, n_g, np.int64)
    if has.size:
        key[has] = np.minimum.reduceat(items, rel.indptr[has])
    if own.indices.size:
        np.minimum.at(key, own_rid, own.indices.astype(np.int64))
    rows = has[np.argsort(key[has], kind="stable")]
    # the sub-panels' tiles: whole tiles of the first column tile's width g, the rest in
    # a multiple of the step (fewer padded products than a whole tile); every width is
    # probed (_gather_exact), so a pass's widths are few: g and the step's multiples
    g = _column_cuts(c)[0][1]
    plan = K.relevant_plan(rows, rel.indptr.astype(np.int64), items, n_g, ts, g, GATHER_STEP)
    slot_ptr, index, pad, tile_ptr, tile_slot, tile_w, pairs, tile_pairs, flat = plan
    tile_sub = np.repeat(np.arange(tile_ptr.size - 1), np.diff(tile_ptr))
    return _RelevantPlan(
        rows, slot_ptr, index, pad, tile_ptr, tile_sub, tile_slot, tile_w, pairs, tile_pairs, flat
    )


def _relevant_sweep(blk: _Block, n_workers: int) -> None:
    """Every relevant score of the block (:func:`_relevant_plan`'s sub-panels, batches of
    ``TILE_ROWS // GATHER_ROWS`` on ``n_workers`` workers), then sorted within rows into
    ``blk.rel_sorted`` (and the permutation into ``blk.order``) by the scored path's
    sort (:func:`._counters.sort_within_rows`)."""
    rel, p = blk.rel, blk.p
    rp = _relevant_plan(rel, blk.rid, blk.own, blk.own_rid, p.n_g, p.c)
    vals = np.empty(rel.indices.size, np.float32)
    per = max(1, TILE_ROWS // GATHER_ROWS)
    # a batch's gathered items and products take at most a score block's bytes (what
    # max_memory sized for the scored path), and at least one tile
    room = p.score_block_bytes // (4 * (int(p.Q.shape[1]) + GATHER_ROWS))
    batches = _batches(rp, per, room)
    _in_workers(n_workers, _relevant_worker, blk, len(batches), rp, vals, batches, per)
    blk.rel_sorted[:], blk.order[:] = sort_within_rows(vals, rel, False)


def _batches(rp: _RelevantPlan, per: int, room: int) -> list:
    """The relevant sweep's batches: runs of tiles ``(first, stop)`` of at most ``per``
    sub-panels and ``room`` gathered slots (a tile more than ``room`` alone)."""
    out, t0 = [], 0
    n = rp.tile_w.size
    ends = (rp.tile_slot + rp.tile_w).tolist()
    starts, subs = rp.tile_slot.tolist(), rp.tile_sub.tolist()
    for t in range(n):
        if t > t0 and (ends[t] - starts[t0] > room or subs[t] - subs[t0] >= per):
            out.append((t0, t))
            t0 = t
    if n:
        out.append((t0, n))
    return out


def _relevant_worker(blk: _Block, next_batch, rp: _RelevantPlan, vals, batches, per) -> None:
    """The ``batches`` (:func:`_batches`, at most ``per`` sub-panels each): a batch's
    rows and items gathered at once
    (padding zeroed), each tile's products and epilogue laid out one after the other,
    then every pair's score picked into ``vals`` in one go."""
    import torch

    p, be, epi = blk.p, blk.p.backend, blk.epilogue
    d, ts = int(p.Q.shape[1]), GATHER_ROWS
    Qb = torch.zeros((per * ts, d), dtype=torch.float32)
    qa_b = torch.zeros(per * ts, dtype=torch.float32)
    Gg, ga_g, out = (torch.empty(0, dtype=torch.float32) for _ in range(3))
    while (k := next_batch()) is not None:
        t0, t1 = batches[k]
        s0, s1 = int(rp.tile_sub[t0]), int(rp.tile_sub[t1 - 1]) + 1
        a = int(rp.tile_slot[t0])
        e = int(rp.tile_slot[t1 - 1] + rp.tile_w[t1 - 1])
        if Gg.numel() < (e - a) * d:
            Gg = torch.empty((e - a) * d, dtype=torch.float32)
            ga_g = torch.empty(e - a, dtype=torch.float32)
            out = torch.empty((e - a) * ts, dtype=torch.float32)
        G = Gg[: (e - a) * d].view(e - a, d)
        index, pad = torch.from_numpy(rp.index[a:e]), torch.from_numpy(rp.pad[a:e])
        torch.index_select(p.Gp, 0, index, out=G)
        G[pad] = 0
        rows = torch.from_numpy(rp.rows[s0 * ts : s1 * ts] + blk.start)
        kq = int(rows.numel())
        torch.index_select(p.Q, 0, rows, out=Qb[:kq])
        Qb[kq:] = 0  # the last sub-panel's missing rows
        if epi:
            torch.index_select(p.ga, 0, index, out=ga_g[: e - a])
            ga_g[: e - a][pad] = 0
            torch.index_select(p.qa, 0, rows, out=qa_b[:kq])
            qa_b[kq:] = 0
        for s, o, w in zip(
            rp.tile_sub[t0:t1].tolist(),
            (rp.tile_slot[t0:t1] - a).tolist(),
            rp.tile_w[t0:t1].tolist(),
        ):
            part = out[ts * o : ts * (o + w)].view(ts, w)
            q = (s - s0) * ts
            be.matmul_into(Qb[q : q + ts], G[o : o + w], part)
            if epi:
                be.finish_scores(part, p.similarity, qa_b[q : q + ts], ga_g[o : o + w])
        q0, q1 = int(rp.tile_pairs[t0]), int(rp.tile_pairs[t1])
        vals[rp.pairs[q0:q1]] = out.numpy()[rp.flat[q0:q1] - ts * a]


def _gather_exact(p, t: int, d: int, workers: int) -> bool:
    """Whether this machine's products of the pass's shapes have the scored path's bits
    (:func:`shapes_exact`): ``t``-row panels against each column tile's width, and
    :data:`GATHER_ROWS`-row sub-panels against every width a gather tile can have
    (:func:`_relevant_plan`'s: a few), probed before the panels are planned."""
    cuts = _column_cuts(p.c)
    g = cuts[0][1]
    widths = {min(g, k * GATHER_STEP) for k in range(1, -(-g // GATHER_STEP) + 1)}
    return shapes_exact(p.backend, p.b, t, p.c, d, workers, {w for _, w in cuts}) and (
        shapes_exact(p.backend, p.b, GATHER_ROWS, p.c, d, workers, widths)
    )


def _run(p, start, stop, t, pairs, epilogue: bool, workers: int, report=None):
    """The block on the fused pass (on at most ``workers`` workers): its
    :class:`BlockPartial`, or None when a tile shape is not bit-identical.
    ``pairs`` (tail threshold, tail capacity, fixed thresholds; None: no pair metric):
    each worker keeps its own tail of the pair metrics' negatives, raised as it fills
    (:class:`NegativeTail`; ``report``: called with each panel's rows when it is done):
    the pass's first block needs no seed (the scored path's
    ``seed_tail`` takes its whole block first; a first sweep of panels here computed
    their products twice, a tenth of a 10k x 40k pass): a worker's first tile hands all
    its negatives to its tail, which cuts them to its capacity at once."""
    want_pairs = pairs is not None
    tail_tau, capacity, fixed = pairs if want_pairs else (-math.inf, None, None)
    m = stop - start
    panels = list(range(0, m, t))
    n_workers = max(1, min(len(panels), workers))
    rel = p.relevant.block(start, stop)
    d = int(p.Q.shape[1])
    exact = _gather_exact(p, t, d, n_workers)
    _REFERENCE.clear()  # the probes' reference (a score block's size) is not kept
    if not exact:
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
        epilogue=epilogue,
        capacity=capacity,
        report=report,
    )
    if want_pairs:
        blk.tau = np.float32(max(tail_tau, _F32_MIN))
    _relevant_sweep(blk, n_workers)
    outs = _in_workers(n_workers, _worker, blk, len(panels), m)
    part = ranked_partial(start, stop, rel, blk.rel_sorted, blk.order, blk.above, blk.tied, False)
    part.mode = "one-sided"
    if want_pairs:
        part.positives = blk.rel_sorted
        tau = max([tail_tau] + [w_tau for _, _, w_tau in outs])
        negs = [v[v >= tau] for negatives, _, _ in outs for v in negatives]
        part.negatives = np.concatenate(negs) if negs else np.zeros(0, np.float32)
        if fixed is not None:
            hist = sum(h for _, h, _ in outs)
            part.fixed_fp = np.cumsum(hist[::-1])[::-1][1:].copy()
        part.negatives_tau = float(tau)
    return part


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
    epilogue: bool  # False: cosine of rows normalised on the host (factors 1: no-op)
    capacity: int | None = None  # the pair metrics' tail: each worker keeps its own
    report: object = None  # progress: called with the query rows of each panel done
    panels: list | None = None  # the mirrored pass's panels: (first row, stop, chunk)
    pads: np.ndarray | None = None  # the mirrored pass's rows' relevant scores, 16 slots


def _workers() -> int:
    import torch

    return max(1, int(torch.get_num_threads()))


_THREADS_LOCK = threading.Lock()


def _pool(n: int):
    """The counter's worker threads: ``n`` of them, each making its products
    single-threaded (set when the thread starts; OpenMP's and MKL's setting is per
    thread). Only these threads change their setting: a pass on one worker runs on the
    calling thread as it is (its probe too), so a caller's own thread count is never
    changed. Used inside :func:`_one_thread_products`."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    return ThreadPoolExecutor(n, initializer=torch.set_num_threads, initargs=(1,))


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


class _Buffers:
    """One worker's panel of query rows and tile (and the rows' epilogue factors), and
    its scans' scratch, reused for every panel it computes."""

    def __init__(self, p, t: int, factors: bool):
        import torch

        d = int(p.Q.shape[1])
        self.Qt = torch.zeros((t, d), dtype=torch.float32)
        self.cuts = _column_cuts(p.c)  # a chunk's column tiles: (first column, width)
        g = self.cuts[0][1]  # the widest tile
        self.tile = torch.empty((t, g), dtype=torch.float32)
        self.tiles = {w: self.tile.view(-1)[: t * w].view(t, w) for _, w in self.cuts}
        self.qa_t = torch.zeros(t, dtype=torch.float32) if factors else None
        # the scans' scratch: a row's compacted scores, the columns' thresholds and
        # column numbers, and the tile's negative tail (at most every score of it)
        self.buf = np.empty(g, np.float32)
        self.thr = np.empty(g, np.float32)
        self.idx = np.empty(g, np.int32)
        self.neg = np.empty(t * g, np.float32)

    def load(self, p, factors: bool, r0: int, r1: int) -> None:
        """Query rows ``r0 .. r1 - 1`` (problem rows) into the panel, zero below."""
        mt = r1 - r0
        self.Qt[:mt] = p.Q[r0:r1]
        if mt < self.Qt.shape[0]:
            self.Qt[mt:] = 0
        if factors:
            self.qa_t[:mt] = p.qa[r0:r1]

    def products(self, p, factors: bool, chunks):
        """The loaded panel against each column tile of the gallery chunks ``chunks``,
        with its epilogue, one tile at a time: ``(chunk, first gallery row, valid width,
        tile)`` (the tile a float32 array, valid until the next one)."""
        c, n_g = p.c, p.n_g
        for k, (w0, w) in itertools.product(chunks, self.cuts):
            r0 = k * c + w0
            width = min(w, n_g - r0)
            if width <= 0:
                continue
            tile = self.tiles[w]
            p.backend.matmul_into(self.Qt, p.Gp[r0 : r0 + w], tile)
            if factors:
                p.backend.finish_scores(tile, p.similarity, self.qa_t, p.ga[r0 : r0 + w])
            yield k, r0, width, tile.numpy()


def _worker(blk: _Block, next_panel, m: int):  # long: one worker's loop: products, scan
    """The block's panels (``next_panel``: :func:`_in_workers`' counter), in turn, on
    this worker's buffers: every chunk's tile, scanned at once against the rows' relevant
    scores (the block's first sweep). Returns ``(negatives, fixed thresholds' histogram,
    the worker's tail threshold)``."""

    from . import _fused_cpu_numba as K

    p, t = blk.p, blk.t
    rel = blk.rel
    factors = blk.epilogue
    bufs = _Buffers(p, t, factors)
    negatives = []
    fixed_hist = None if blk.fixed is None else np.zeros(blk.fixed.size + 1, np.int64)
    tau = blk.tau
    keeper = None  # the worker's tail, raised as it fills (else every negative >= tau)
    if blk.want_pairs and blk.capacity is not None:
        keeper = NegativeTail(blk.capacity)
        keeper.tau = float(tau) if tau > _F32_MIN else -math.inf
    start = blk.start
    while (n_panel := next_panel()) is not None:
        s0 = n_panel * t
        s1 = min(m, s0 + t)
        mt = s1 - s0
        bufs.load(p, factors, start + s0, start + s1)
        a, e = int(rel.indptr[s0]), int(rel.indptr[s1])
        rid = blk.rid[a:e] - s0
        cols = rel.indices[a:e]
        rs = blk.rel_sorted[a:e]  # the panel's relevant scores (the block's first sweep)
        rel_ptr = (rel.indptr[s0 : s1 + 1] - a).astype(np.int64)
        # the pairs never counted: relevant and self, per row (global columns)
        lo_o, hi_o = np.searchsorted(blk.own_rid, [s0, s1])
        m_rows = np.concatenate([rid, blk.own_rid[lo_o:hi_o] - s0])
        m_cols = np.concatenate([cols, blk.own.indices[lo_o:hi_o]]).astype(np.int64)
        mask_cols = m_cols[np.argsort(m_rows, kind="stable")]
        mask_ptr = np.zeros(mt + 1, np.int64)
        np.cumsum(np.bincount(m_rows, minlength=mt), out=mask_ptr[1:])
        n_r = int(rel_ptr[-1])
        hist = np.zeros(n_r + mt, _HIST)
        tie_diff = np.zeros(n_r + mt, _HIST)
        above = blk.above[a:e] if n_r else np.zeros(0, np.int64)
        tied = blk.tied[a:e] if n_r else np.zeros(0, np.int64)
        # every gallery chunk's column tiles: product, epilogue, scan while in cache
        for _, r0, width, tile_np in bufs.products(p, factors, range(p.n_chunks)):
            n_neg = K.scan_tile(
                tile_np,
                mt,
                width,
                r0,
                mask_ptr,
                mask_cols,
                rel_ptr,
                rs,
                hist,
                tie_diff,
                above,
                tied,
                tau,
                bufs.buf,
                bufs.neg,
            )
            if blk.want_pairs:
                if n_neg and keeper is not None:
                    keeper.add(bufs.neg[:n_neg].copy())
                    tau = np.float32(max(keeper.tau, _F32_MIN))
                elif n_neg:
                    negatives.append(bufs.neg[:n_neg].copy())
                if fixed_hist is not None:
                    K.bin_tile(tile_np, mt, width, blk.fixed, fixed_hist)
        K.finish_counts(mt, rel_ptr, hist, tie_diff, above, tied)
        if blk.report is not None:
            blk.report(mt)
    if keeper is not None:
        return [keeper.sorted_values()], fixed_hist, keeper.tau
    return negatives, fixed_hist, -math.inf


# ----------------------------------------------------------------------------- mirrored
def _mirror_plan(p, t: int):
    """The symmetric leave-one-out pass's plan, or None where it does not apply: the
    queries are the gallery (the same float32 rows, the same epilogue factors), the
    similarity's score is symmetric (:data:`_MIRRORED`), the workers' counts fit the
    score block's budget, and this machine's mirrored products have the scored path's
    bits (:func:`mirror_exact`, :func:`shapes_exact`). Panels of ``t`` rows stay inside
    one gallery chunk, so the panel against chunk ``A`` (its own) and every later chunk
    ``B`` covers each pair of items once."""
    import torch

    n, c = p.n_g, p.c
    if p.q0 or p.n_q != n or int(p.Q.shape[0]) != n or n == 0:
        return None
    G = p.Gp[:n]
    same = p.Q.data_ptr() == G.data_ptr() and p.Q.stride() == G.stride()
    if not (same or torch.equal(p.Q, G)):
        return None
    if (p.qa is None) != (p.ga is None) or (p.qa is not None and not torch.equal(p.qa, p.ga[:n])):
        return None
    rel = p.relevant.block(0, n)
    workers = _task_workers(p, int(rel.indptr[-1]), t, mirrored=True)
    if not workers:
        return None
    panels = [
        (s0, min(s0 + t, (k + 1) * c, n), k)
        for k in range(p.n_chunks)
        for s0 in range(k * c, min(n, (k + 1) * c), t)
    ]
    workers = max(1, min(len(panels), workers))
    d = int(p.Q.shape[1])
    exact = _gather_exact(p, t, d, workers) and all(
        mirror_exact(p.backend, p.b, t, c, d, workers, w) for w in {w for _, w in _column_cuts(c)}
    )
    _REFERENCE.clear()  # the probes' reference (a score block's size) is not kept
    if not exact:
        return None
    return _MirrorPlan(rel, panels, workers, t)


def _column_cuts(c: int) -> list:
    """A chunk's ``c`` columns in tiles of at most :data:`TILE_COLS` (widths a multiple
    of 16 but the last): ``(first column, width)`` each. The mirrored side reads and
    writes its columns' rows' counts while it scans a tile; a narrower tile keeps them
    and the tile in a core's cache."""
    k = max(1, -(-c // TILE_COLS))
    w = -(-c // k)
    w = min(c, -(-w // 16) * 16)
    return [(w0, min(w, c - w0)) for w0 in range(0, c, w)]


# How much faster the fused pass ran than the scored one on the same cores (the
# scored time over the fused), measured on the 2-core machine (docs/explanation/
# benchmarks.md): leave-one-out 50k x 128 6.54 against 3.03 s, query/gallery 10k x 40k
# x 128 1.21 against 0.81 s. A task over every query whose working set fits on fewer
# workers than the cores runs on the workers that fit while it is still expected faster
# than the scored pass on every core (:func:`_task_workers`).
_SPEEDUP = {"mirrored": 2.0, "one-sided": 1.5}


def _task_workers(p, n_rel: int, t: int, mirrored: bool) -> int:
    """On how many workers a task over every query of ``p`` (``n_rel`` relevant pairs,
    panels of at most ``t`` rows) runs, or 0: not as one task. Its working set must fit
    the plan's (``max_memory`` less the inputs; a problem without one never runs as one
    task): per relevant pair and row, the relevant sweep's plan and scores and the
    counts (some 144 bytes); per worker, its buffers (:func:`_worker_bytes`) and,
    mirrored, its own histograms (two int32 arrays over the pairs and rows, and each
    row's lowest relevant score: 12 bytes) and its masks' scratch. The most workers that fit, at
    most one a core (:func:`_workers`): on a machine of many cores fewer workers than
    cores may fit, and the task runs on them while they are enough to be faster than
    the scored pass on every core (:data:`_SPEEDUP`); 0 below that. Under the default
    256 MiB, 16 cores: leave-one-out 50k x 128 mirrors on 15 workers (it went to the
    scored counter before); 50k x 512 fits 7, so it runs one-sided on all 16."""
    if p.room is None:
        return 0
    cores = _workers()
    rows = n_rel + p.n_q
    if p.n_g >= _HIST_ROWS:  # the histograms are int32 (_HIST)
        return 0
    per_worker = _worker_bytes(p, t)
    if mirrored:  # + 12 bytes a row; the masks of a chunk (a chunk's share, twice)
        per_worker += 12 * rows + 2 * 12 * -(-rows * p.c // max(1, p.n_q))
    fit = min(cores, (p.room - 144 * rows) // per_worker)
    enough = math.ceil(cores / _SPEEDUP["mirrored" if mirrored else "one-sided"])
    return int(fit) if fit >= enough else 0


def _block_workers(p, t: int) -> int:
    """Workers of a one-sided block (the plan's blocks, not one task): one a core, as
    many as their buffers fit the plan's working set (at least one). The plan sized its
    blocks for the scored path's score block, which the fused pass does not hold."""
    if p.room is None:
        return _workers()
    return max(1, min(_workers(), p.room // _worker_bytes(p, t)))


def _worker_bytes(p, t: int) -> int:
    """One worker's :class:`_Buffers`: its panel, tile and negatives' scratch (``t``
    rows by the widest column tile) and its scans' column scratch."""
    g = _column_cuts(p.c)[0][1]
    return 8 * t * g + 4 * t * int(p.Q.shape[1]) + 12 * g


@dataclass
class _MirrorPlan:
    rel: object
    panels: list  # (first row, stop, chunk)
    workers: int
    t: int


def _run_mirror(p, plan: _MirrorPlan, epilogue: bool, pairs=None, bins=None, report=None):
    """Every query of the leave-one-out problem ``p`` on the mirrored tiles: a first
    sweep takes every row's relevant scores (gathered, as :func:`_run` does), a second
    computes each panel against its own chunk and every later one, scans the tile for
    the panel's rows and its transpose for the chunk's rows (each side masking its own
    relevant and self pairs). Each worker places the scores it scans into its own
    histograms (the column side counts any row); they add up at the end. ``pairs`` (tail threshold, capacity, fixed thresholds): the pair metrics'
    negative tail (each worker's raised as it fills, :class:`NegativeTail`) and fixed
    counts. ``bins`` (sorted positive scores, histogram): the binning pass instead, the
    negatives binned into the histogram; returns None."""
    from . import _fused_cpu_numba as K

    n = p.n_q
    rel = plan.rel
    own = p.self_pairs.rows(0, n)
    n_rel = int(rel.indptr[-1])
    tail_tau, capacity, fixed = pairs if pairs is not None else (math.inf, None, None)
    blk = _Block(
        p=p,
        start=0,
        t=plan.t,
        rel=rel,
        rid=rel.row_ids(),
        own=own,
        own_rid=own.row_ids(),
        tau=np.float32(max(tail_tau, _F32_MIN)),
        want_pairs=pairs is not None,
        fixed=fixed,
        rel_sorted=np.empty(n_rel, np.float32),
        order=np.empty(n_rel, np.int64),
        # the rows' counts among their relevant scores: each row's are written by the
        # worker of its panel alone (the other side writes histograms), so one array
        above=np.zeros(n_rel if bins is None else 0, np.int64),
        tied=np.zeros(n_rel if bins is None else 0, np.int64),
        epilogue=epilogue,
        panels=plan.panels,
        report=report,
    )
    m_rows = np.concatenate([blk.rid, blk.own_rid])
    m_cols = np.concatenate([rel.indices, own.indices]).astype(np.int64)
    mask_cols = m_cols[np.argsort(m_rows, kind="stable")]
    mask_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(m_rows, minlength=n), out=mask_ptr[1:])
    if bins is None:
        _relevant_sweep(blk, plan.workers)
        blk.pads = K.pad_rows(rel.indptr.astype(np.int64), blk.rel_sorted, n)
    else:  # no relevant scores: rows of none, their slots +inf (never reached)
        blk.pads = np.full(n * 16, np.inf, np.float32)
    outs = _in_workers(
        plan.workers, _mirror_worker, blk, len(plan.panels), mask_ptr, mask_cols, capacity, bins
    )
    if bins is not None:
        hist_out = bins[1]
        hist_out += sum(o["bins"] for o in outs)
        return None
    above, tied = blk.above, blk.tied
    hist, tie_diff = (sum(o[k] for o in outs) for k in ("h", "t"))
    K.finish_counts(n, rel.indptr.astype(np.int64), hist, tie_diff, above, tied)
    part = ranked_partial(0, n, rel, blk.rel_sorted, blk.order, above, tied, False)
    part.mode = "mirrored"
    if pairs is None:
        return part
    part.positives = blk.rel_sorted
    tau = max([tail_tau] + [o["tail"].tau for o in outs if o["tail"] is not None])
    negs = [v[v >= tau] for o in outs for v in o["negatives"]]
    part.negatives = np.concatenate(negs) if negs else np.zeros(0, np.float32)
    if fixed is not None:
        hist_f = sum(o["fixed"] for o in outs)
        part.fixed_fp = np.cumsum(hist_f[::-1])[::-1][1:].copy()
    part.negatives_tau = float(tau)
    return part


def _needs_epilogue(p) -> bool:
    """Whether the tiles need the score epilogue (not for cosine of rows normalised on
    the host: factors 1 leave the products as they are)."""
    if p.qa is None:
        return False
    if p.similarity != "cosine":
        return True
    # on the host arrays' numpy views: torch's elementwise ops on 50k factors took 8-16 ms
    # on a loaded 2-core machine (its thread pool waking), numpy's 0.05 ms
    qa, ga = p.qa.numpy(), p.ga[: p.n_g].numpy()
    return not (bool((qa == 1).all()) and bool((ga == 1).all()))


def _in_workers(n_workers: int, fn, blk, n_panels: int, *args) -> list:
    """``fn(blk, next_panel, *args)`` on ``n_workers`` workers taking panels in order from
    one shared counter (the first panels have the most chunks to their right)."""
    counter = itertools.count()
    lock = threading.Lock()

    def next_panel():
        with lock:
            k = next(counter)
        return k if k < n_panels else None

    if n_workers == 1:
        return [fn(blk, next_panel, *args)]
    with _one_thread_products(), _pool(n_workers) as pool:
        jobs = [pool.submit(fn, blk, next_panel, *args) for _ in range(n_workers)]
        return [j.result() for j in jobs]


def _mirror_worker(
    blk: _Block, next_panel, mask_ptr, mask_cols, capacity, bins
):  # long: one worker's mirrored loop
    """The second sweep, on this worker's buffers and histograms: each panel against its own
    chunk (scanned once: it holds both orders of its pairs) and every later chunk
    (scanned, then transposed and scanned for the chunk's rows)."""

    from . import _fused_cpu_numba as K

    p, t = blk.p, blk.t
    c, n = p.c, p.n_q
    n_rel = blk.rel_sorted.size
    indptr = blk.rel.indptr.astype(np.int64)
    if bins is not None:  # the binning pass: no relevant scores, masks only
        indptr = np.zeros(n + 1, np.int64)
        n_rel = 0
    bufs = _Buffers(p, t, blk.epilogue)
    lo = np.full(n, np.inf, np.float32)  # each row's lowest relevant score
    has = np.diff(indptr) > 0
    lo[has] = blk.rel_sorted[indptr[:-1][has]]
    pads = blk.pads
    starts = np.minimum(np.arange(p.n_chunks + 1) * c, n)
    room = int(np.diff(mask_ptr[starts]).max()) if p.n_chunks else 0
    at, saved = np.empty(room, np.int64), np.empty(room, np.float32)
    out = {
        "h": np.zeros(n_rel + n, _HIST),
        "t": np.zeros(n_rel + n, _HIST),
        "negatives": [],
        "tail": NegativeTail(capacity) if blk.want_pairs and capacity is not None else None,
        "fixed": None if blk.fixed is None else np.zeros(blk.fixed.size + 1, np.int64),
        "bins": None if bins is None else np.zeros(bins[0].size + 1, np.int64),
    }
    tail_keeper = out["tail"]
    if tail_keeper is not None:
        tail_keeper.tau = float(blk.tau) if blk.tau > _F32_MIN else -math.inf
    tau = blk.tau if blk.want_pairs else np.float32(np.inf)

    def pairs_of(T, m, width, n_neg):
        """The side's pair outputs: its ``n_neg`` negatives >= tau (the scan wrote them
        to ``bufs.neg``), fixed thresholds' or binning's counts."""
        nonlocal tau
        if bins is not None:
            K.bin_tile(T, m, width, bins[0], out["bins"])
            return
        if not blk.want_pairs:
            return
        if n_neg:
            got = bufs.neg[:n_neg].copy()
            if tail_keeper is None:
                out["negatives"].append(got)
            else:
                tail_keeper.add(got)
                tau = np.float32(max(tail_keeper.tau, _F32_MIN))
        if out["fixed"] is not None:
            K.bin_tile(T, m, width, blk.fixed, out["fixed"])

    while (k := next_panel()) is not None:
        s0, s1, A = blk.panels[k]
        mt = s1 - s0
        bufs.load(p, blk.epilogue, s0, s1)
        for B, r0, width, tile_np in bufs.products(p, blk.epilogue, range(A, p.n_chunks)):
            if B > A:  # the mirror image, column by column: the chunk's rows, their masks
                n_m = K.mask_columns(tile_np, mt, width, r0, s0, mask_ptr, mask_cols, at, saved)
                n_neg = K.scan_columns(
                    tile_np,
                    mt,
                    width,
                    r0,
                    indptr,
                    blk.rel_sorted,
                    lo,
                    pads,
                    out["h"],
                    out["t"],
                    tau,
                    bufs.thr,
                    bufs.buf,
                    bufs.idx,
                    bufs.neg,
                )
                pairs_of(tile_np, mt, width, n_neg)
                K.unmask(tile_np, n_m, at, saved)
            n_neg = K.scan_tile(
                tile_np,
                mt,
                width,
                r0,
                mask_ptr[s0 : s1 + 1],
                mask_cols,
                indptr[s0 : s1 + 1],
                blk.rel_sorted,
                out["h"][s0:],
                out["t"][s0:],
                blk.above,
                blk.tied,
                tau,
                bufs.buf,
                bufs.neg,
            )
            pairs_of(tile_np, mt, width, n_neg)
        if blk.report is not None and bins is None:
            blk.report(mt)
    if tail_keeper is not None:
        out["negatives"] = [tail_keeper.sorted_values()]
    return out
