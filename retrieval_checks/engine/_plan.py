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

from ..errors import InputError
from ._backend import Backend, default_memory_budget, parse_memory, resolve_backend
from ._blocks import Problem, RelevanceSource
from ._inputs import Csr

__all__ = ["Plan", "plan_pass", "prepare_problem"]


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


def _check_tile(tile) -> tuple[int, int]:
    if (
        not isinstance(tile, (tuple, list))
        or len(tile) != 2
        or not all(
            isinstance(t, (int, np.integer)) and not isinstance(t, bool) and t >= 1 for t in tile
        )
    ):
        raise InputError(
            f"tile={tile!r}: give (query block height, gallery chunk width), two positive integers."
        )
    return int(tile[0]), int(tile[1])


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
    gallery items of dimension ``d`` (``arrays``: the inputs, for ``device="auto"``)."""
    backend = resolve_backend(device, arrays)
    budget = parse_memory(max_memory) or default_memory_budget(backend)
    if tile is not None:
        b, c = _check_tile(tile)
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


def prepare_problem(
    plan: Plan,
    queries,
    gallery,
    *,
    n_g: int,
    similarity: str,
    source: RelevanceSource,
    self_pairs: Csr,
) -> Problem:
    """Float32 copies on the backend: the gallery padded to whole chunks; in
    leave-one-out (``gallery`` None) the queries are a view of it rather than a second
    copy. The copies keep exact arithmetic exact (README, "Exact scores"): integer
    cosine rows become primitive integer vectors times powers of two (their squared
    norms are the factors of the cosine epilogue; other rows are normalised in float64,
    factor 1), neg_l2 rows are
    centred on the gallery mean rounded to integers
    (distances do not change; large offsets go). The row factors of the tile epilogue
    (:meth:`Backend.row_factors`) are computed once, on the host, in float64."""
    be, c = plan.backend, plan.c
    if similarity == "hamming":
        return _prepare_codes(plan, queries, gallery, n_g=n_g, source=source, self_pairs=self_pairs)
    d = int(queries.shape[1])
    loo = gallery is None
    Gp = be.zeros((plan.n_chunks * c, d))
    G = be.native(queries if loo else gallery)
    n_q = int(queries.shape[0])
    if similarity == "cosine":
        host = np.zeros(plan.n_chunks * c, np.float32)
        host[:n_g] = be.cosine_rows_into(G, Gp[:n_g])
        ga = be.from_numpy(host)
        if loo:
            Q, qa = Gp[:n_g], ga[:n_g]
        else:
            Q = be.empty((n_q, d))
            qa = be.from_numpy(be.cosine_rows_into(be.native(queries), Q))
    else:
        center = be.mean64(G) if similarity == "neg_l2" else None
        be.float32_into(G, Gp[:n_g], center=center)
        ga = be.row_factors(Gp[:n_g], similarity, plan.n_chunks * c)
        if loo:
            Q, qa = Gp[:n_g], (None if ga is None else ga[:n_g])
        else:
            Q = be.float32_into(be.native(queries), be.empty((n_q, d)), center=center)
            qa = be.row_factors(Q, similarity)
    del G
    return Problem(
        backend=be,
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
    )


def _prepare_codes(
    plan: Plan, queries, gallery, *, n_g: int, source: RelevanceSource, self_pairs: Csr
) -> Problem:
    """Binary codes packed into 64-bit words (on the backend; int64 tensors on torch):
    the gallery padded with zero words to whole chunks (the padding is masked)."""
    from ._hamming import PackedCodes, pack_sides

    be, c = plan.backend, plan.c
    loo = gallery is None
    if not isinstance(queries, PackedCodes):
        queries, gallery = pack_sides(queries, gallery)
    Gw = (queries if loo else gallery).words
    Gp = np.zeros((plan.n_chunks * c, Gw.shape[1]), np.uint64)
    Gp[:n_g] = Gw
    Qw = None if loo else queries.words
    if be.kind == "torch":
        Gp = be.from_numpy(Gp.view(np.int64))
        Q = Gp[:n_g] if loo else be.from_numpy(Qw.view(np.int64))
    else:
        Q = Gp[:n_g] if loo else Qw
    return Problem(
        backend=be,
        Q=Q,
        Gp=Gp,
        n_g=n_g,
        c=c,
        b=plan.b,
        similarity="hamming",
        relevant=source,
        self_pairs=self_pairs,
    )
