"""Planning a pass (tile shapes from the memory budget) and preparing its inputs
(float32 copies on the backend).

Tile shapes. The gallery is cut into chunks of equal width ``c``, a multiple of 16:
BLAS edge kernels for a ragged width sum in another order, and duplicate gallery
vectors would stop tying bit-for-bit. Queries go in blocks of ``b`` rows, chosen so
that a block's ``b x n_chunks*c`` float32 scores, its relevant pairs and the kernels'
temporaries fit 80% of what the budget leaves after the float32 copies of the inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._backend import Backend, check_tile, default_memory_budget, parse_memory, resolve_backend
from ._blocks import Problem, RelevanceSource
from ._hamming import PackedCodes, pack_sides
from ._inputs import Csr
from ._reduce import LOCAL
from .counting import _kernels

__all__ = ["Plan", "Window", "plan_pass", "prepare_problem"]


@dataclass(frozen=True)
class Plan:
    """Where and in which tiles a pass runs: ``b`` query rows per block, gallery chunks
    of ``c`` columns, ``room`` bytes left for the working set after the inputs."""

    backend: Backend
    budget: int
    b: int
    c: int
    n_chunks: int
    room: int


def plan_pass(
    arrays,
    *,
    n_q: int,
    n_g: int,
    d: int,
    loo: bool,
    n_relevant: np.ndarray,
    device,
    max_memory,
    tile=None,
    pairs: bool = False,
) -> Plan:
    """The backend and the tile shapes of a pass over ``n_q`` queries and ``n_g``
    gallery items of dimension ``d`` (``arrays``: the inputs, for ``device="auto"``).
    ``device`` may be a :class:`Backend` already resolved: a sharded rank resolves its
    device once, under its process group's collectives, and plans on that."""
    backend = device if isinstance(device, Backend) else resolve_backend(device, arrays)
    budget = parse_memory(max_memory) or default_memory_budget(backend)
    if tile is not None:
        b, c = check_tile(tile)
    else:
        # as few chunks of at most 4096 (CUDA: 32768) columns as cover the gallery, all
        # of equal width, so the GEMMs do no more than ~16 padded columns of extra work
        c_max = 32768 if backend.is_cuda else 4096
        c = -(-n_g // -(-n_g // c_max))
        b = None
    c = -(-c // 16) * 16
    n_chunks = -(-n_g // c)
    # the budget covers the float32 copies of the inputs, then the working set
    inputs = 4 * d * (n_chunks * c + (0 if loo else n_q))
    room = max(budget - inputs, budget // 10)
    if b is None:
        r_max = int(n_relevant.max()) if n_relevant.size else 0
        per_row = n_chunks * c * 4 + 48 * r_max + (16 * c if backend.is_cuda else 0)
        if backend.is_cuda and pairs:
            # the vectorised pair path holds a mask, a copy and a comparison of the block
            per_row += n_chunks * c * 6
        b = int(max(1, min(n_q, 2048, (room * 8 // 10) // per_row)))
    return Plan(backend, budget, min(b, n_q), c, n_chunks, room)


@dataclass(frozen=True)
class Window:
    """The part of a pass a problem holds: gallery positions ``[g0, g1)`` of ``n_g``,
    queries from global row ``q0`` of ``n_q`` (a rank's shards)."""

    g0: int
    g1: int
    q0: int
    n_q: int


def prepare_problem(
    plan: Plan,
    queries,
    gallery,
    *,
    n_g: int,
    similarity: str,
    source: RelevanceSource,
    self_pairs: Csr,
    window: Window | None = None,
    reduce=LOCAL,
) -> Problem:
    """Float32 copies on the backend: the gallery padded to whole chunks; in
    leave-one-out (``gallery`` None) the queries are a view of it rather than a second
    copy. The copies keep exact arithmetic exact (docs/explanation/engine.md, "Exact scores"): integer
    cosine rows become primitive integer vectors times powers of two (their squared
    norms are the factors of the cosine epilogue; other rows are normalised in float64,
    factor 1), neg_l2 rows are
    centred on the gallery mean rounded to integers
    (distances do not change; large offsets go). The row factors of the tile epilogue
    (:meth:`Backend.row_factors`) are computed once, on the host, in float64.

    ``window`` (a sharded pass): ``queries`` and ``gallery`` are this rank's shards; the
    gallery rows sit in place inside their global chunks (zero rows elsewhere), so every
    pair is scored by the same tile at the same place as in one process; ``reduce``
    (:mod:`._reduce`) sums neg_l2's column sums over the ranks."""
    c = plan.c
    if window is None:
        window = Window(0, n_g, 0, int(queries.shape[0]))
    k0 = window.g0 // c
    L = (-(-window.g1 // c) - k0) if window.g1 > window.g0 else 0
    at = (window.g0 - k0 * c, window.g1 - window.g0)  # the shard's rows inside Gp
    if similarity == "hamming":
        arrays = _prepare_codes(plan.backend, queries, gallery, L * c, at)
    else:
        arrays = _prepare_rows(plan.backend, queries, gallery, similarity, L * c, at, n_g, reduce)
    Q, Gp, qa, ga = arrays
    return Problem(
        backend=plan.backend,
        Q=Q,
        Gp=Gp,
        n_g=n_g,
        c=c,
        b=plan.b,
        similarity=similarity,
        relevant=source,
        self_pairs=self_pairs,
        qa=qa,
        ga=ga,
        g0=window.g0,
        g1=window.g1,
        k0=k0,
        q0=window.q0,
        rows=window.n_q,
        room=plan.room,
    )


def _host_threads(be) -> int:
    """Threads for the host's row preparation: torch's (the CPU pass's cores) on torch
    backends; one on the numpy backend (which never imports torch)."""
    if be.kind != "torch":
        return 1
    import torch

    return max(1, int(torch.get_num_threads()))


def _prepare_rows(be, queries, gallery, similarity: str, n_rows: int, at, n_g: int, reduce):
    """(Q, Gp, qa, ga) of real-valued embeddings (see :func:`prepare_problem`)."""
    off, n = at
    d = int(queries.shape[1])
    loo = gallery is None
    n_q = int(queries.shape[0])
    # every row of the window is written below: zero only the rows around it (a zero
    # fill of the whole padded gallery cost ~0.7 s at 1M x 128)
    Gp = be.empty((n_rows, d)) if n else be.zeros((n_rows, d))
    if n:
        Gp[:off] = 0
        Gp[off + n :] = 0
    G = be.native(queries if loo else gallery) if n else None
    if similarity == "cosine":
        cosine = _kernels.cosine_kernels()
        workers = _host_threads(be)
        host = np.zeros(n_rows, np.float32)
        if n:
            host[off : off + n] = be.cosine_rows_into(
                G, Gp[off : off + n], kernels=cosine, workers=workers
            )
        ga = be.from_numpy(host)
        if loo:
            return Gp[off : off + n], Gp, ga[off : off + n], ga
        Q = be.empty((n_q, d))
        qa = (
            be.cosine_rows_into(be.native(queries), Q, kernels=cosine, workers=workers)
            if n_q
            else np.zeros(0, np.float32)
        )
        return Q, Gp, be.from_numpy(qa), ga
    center = None
    if similarity == "neg_l2":  # the whole gallery's column means, rounded to integers
        sums = be.colsum64(G) if n else np.zeros(d, np.float64)
        center = np.round(reduce("column_sums", sums) / n_g)
    if n:
        be.float32_into(G, Gp[off : off + n], center=center)
    del G
    ga = None
    if similarity == "neg_l2":
        ga = be.zeros((n_rows,))
        if n:
            ga[off : off + n] = be.row_factors(Gp[off : off + n], similarity)
    if loo:
        return Gp[off : off + n], Gp, (None if ga is None else ga[off : off + n]), ga
    Q = be.empty((n_q, d))
    if n_q:
        be.float32_into(be.native(queries), Q, center=center)
    qa = None
    if similarity == "neg_l2":
        qa = be.row_factors(Q, similarity) if n_q else be.zeros((0,))
    return Q, Gp, qa, ga


def _prepare_codes(be, queries, gallery, n_rows: int, at):
    """(Q, Gp, None, None) of binary codes packed into 64-bit words (on the backend;
    int64 tensors on torch): the gallery in place, zero words elsewhere (masked)."""
    off, n = at
    loo = gallery is None
    if not isinstance(queries, PackedCodes):
        queries, gallery = pack_sides(queries, gallery)
    Gw = (queries if loo else gallery).words
    Gp = np.zeros((n_rows, int(queries.words.shape[1])), np.uint64)
    Gp[off : off + n] = Gw
    Qw = None if loo else np.ascontiguousarray(queries.words)
    if be.kind == "torch":
        Gp = be.from_numpy(Gp.view(np.int64))
        Q = Gp[off : off + n] if loo else be.from_numpy(Qw.view(np.int64))
    else:
        Q = Gp[off : off + n] if loo else Qw
    return Q, Gp, None, None
