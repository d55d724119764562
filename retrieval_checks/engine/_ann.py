"""``ann_recall``: an approximate nearest-neighbour index measured against exact search.

For query i with the index's top K gallery indices ``neighbors[i, :K]`` (-1: a
missing result),

    ann_recall@K(i) = #{j in neighbors[i, :K]: s(i, j) >= t_K(i)} / K,

``s`` the exact score and ``t_K(i)`` the exact K-th largest score of query i over the
gallery, self matches excluded (ids, or leave-one-out) as in ``evaluate``. A neighbour
tied with the K-th score counts; -1, a self match and nothing else is a miss. The
metric is the mean over queries.

Exactness: the scores come from ``evaluate``'s own stages (the same validation, float32
preparation, tile shapes and tiles, :func:`._blocks.block_scores`), and a
neighbour's score and the K-th score are read from the same tile, so a neighbour tied
with the K-th item compares equal bit for bit. The K-th score is a selection, not
arithmetic: numpy (``ndarray.partition``) and torch (``torch.topk``, the path of every
torch backend, CUDA included) pick the same float32 value from the same tiles.

Memory: one block of ``b x n_chunks*c`` float32 tiles (numpy partitions them in
place, after the neighbours' scores were read), each chunk's top ``min(K, c)`` scores
(``b x n_chunks*min(K, c)``) and the block's neighbours; never the n_q x n_g matrix.
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from .._arrays import as_numpy
from ..errors import InputError
from ..metrics._names import parse_metric
from ..metrics._ranking import aggregate
from ..options import DEFAULTS, check_option
from ._backend import check_run_options
from ._blocks import Problem, RelevanceSource, masked_scores, plan_blocks
from ._inputs import Csr
from ._plan import Plan, plan_pass, prepare_problem
from ._result import EvaluationResult
from ._slices import attach_slices, make_slices
from ._stages import embedding_sides, first_items, self_pairs_of
from ._stream import each_block
from .counting._counters import CpuCounter, TorchCounter

__all__ = ["ann_recall"]


# ----------------------------------------------------------------------------- inputs
def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or int(k) < 1:
        raise InputError(
            f"k={k!r}: give the number of neighbours compared, a positive integer (e.g. k=10)."
        )
    return int(k)


def _check_neighbors(neighbors, n_q: int, n_g: int, k: int) -> np.ndarray:
    """The first ``k`` columns of ``neighbors`` as int64, validated: a 2-D integer
    array with one row per query, entries in [0, n_g) or -1, no repeats within a row.
    Columns after the k-th are not read."""
    nb = as_numpy(neighbors, "neighbors")
    if nb.ndim != 2:
        raise InputError(
            f"neighbors has shape {nb.shape}: give a 2-D (n_queries x K) array of gallery indices, "
            "one row per query (e.g. the indices faiss's index.search returns)."
        )
    if not np.issubdtype(nb.dtype, np.integer):
        raise InputError(
            f"neighbors has dtype {nb.dtype}: give integer gallery indices (-1 for a missing result), "
            "e.g. neighbors.astype(np.int64) if they hold whole numbers."
        )
    if nb.shape[0] != n_q:
        raise InputError(
            f"neighbors has {nb.shape[0]} rows but there are {n_q} queries: give one row of neighbour "
            "indices per query, in query order."
        )
    if k > nb.shape[1]:
        raise InputError(
            f"k={k} but neighbors has {nb.shape[1]} columns: search the index for at least k "
            f"neighbours, or use k <= {nb.shape[1]}."
        )
    nb = nb[:, :k]
    if nb.size and (
        nb.max() >= n_g or (np.issubdtype(nb.dtype, np.signedinteger) and nb.min() < -1)
    ):
        bad = (
            np.flatnonzero(((nb >= n_g) | (nb < -1)).any(axis=1))
            if nb.dtype.kind == "i"
            else np.flatnonzero((nb >= n_g).any(axis=1))
        )
        raise InputError(
            f"neighbors holds indices outside [0, {n_g}) other than -1 in the first k={k} columns "
            f"(queries {first_items(bad)}): entries must be gallery row indices (0 .. {n_g - 1}), or -1 "
            "for a missing result."
        )
    nb = nb.astype(np.int64, copy=False)
    srt = np.sort(nb, axis=1)
    dup = (srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)
    if dup.any():
        rows = np.flatnonzero(dup.any(axis=1))
        raise InputError(
            f"neighbors repeats a gallery index within a row (queries {first_items(rows)}): an index's "
            "top K lists each gallery item once; remove the repeats (use -1 for missing results)."
        )
    return nb


def _check_candidates(n_candidates: np.ndarray, k: int) -> None:
    fewest = int(n_candidates.min())
    if fewest == 0:
        idx = np.flatnonzero(n_candidates == 0)
        raise InputError(
            f"{idx.size} quer{'y has' if idx.size == 1 else 'ies have'} no gallery item left after "
            f"self-exclusion (queries {first_items(idx)}); the gallery must hold more than the query itself."
        )
    if k > fewest:
        raise InputError(
            f"ann_recall@{k}: k={k} is larger than the gallery a query ranks ({fewest} items after "
            f"self-exclusion); use k <= {fewest}."
        )


def _ann_plan(plan: Plan, n_q: int, k: int, tile) -> Plan:
    """``plan`` with a block height that also leaves room for the chunks' top scores
    and the block's neighbours (the tiles themselves are budgeted by :func:`plan_pass`)."""
    if tile is not None:
        return plan
    per_row = (
        plan.n_chunks * plan.c * 4
        + 4 * plan.n_chunks * min(k, plan.c)
        + 40 * k
        + (16 * plan.c if plan.backend.is_cuda else 0)
    )
    return dataclasses.replace(
        plan, b=int(max(1, min(n_q, 2048, (plan.room * 8 // 10) // per_row)))
    )


# ----------------------------------------------------------------------------- a block
def _kth_numpy(S, m: int, k: int) -> np.ndarray:
    """Each row's k-th largest score over the tiles (partitioned in place: call after
    every other read of the block)."""
    n_chunks, _, c = S.shape
    kc = min(k, c)
    top = np.empty((m, n_chunks * kc), np.float32)
    for i in range(n_chunks):
        tile = S[i, :m]
        tile.partition(c - kc, axis=1)
        top[:, i * kc : (i + 1) * kc] = tile[:, c - kc :]
    n = top.shape[1]
    top.partition(n - k, axis=1)
    return top[:, n - k]


def _kth_torch(S, m: int, k: int):
    """The torch twin of :func:`_kth_numpy` (every torch backend, CUDA included)."""
    import torch

    n_chunks, _, c = S.shape
    kc = min(k, c)
    top = torch.cat(
        [torch.topk(S[i, :m], kc, dim=1, sorted=False).values for i in range(n_chunks)], dim=1
    )
    return torch.topk(top, k, dim=1, sorted=False).values.min(dim=1).values


def _block_hits(p: Problem, start: int, stop: int, nb: np.ndarray, k: int) -> np.ndarray:
    """Per query of ``[start, stop)``: how many of its neighbours ``nb`` (block rows,
    -1 missing) score at least its exact k-th score."""
    m = stop - start
    torch_path = p.backend.kind == "torch"  # torch indexing on every torch backend
    S, _, _ = masked_scores(p, start, stop, TorchCounter() if torch_path else CpuCounter())
    rows, cols = np.nonzero(nb >= 0)
    j = nb[rows, cols]
    idx = (j // p.c, rows, j % p.c)
    if torch_path:
        import torch

        dev = S.device
        vals = S[tuple(torch.from_numpy(a).to(dev) for a in idx)]
        kth = _kth_torch(S, m, k)
        hit = (vals >= kth[torch.from_numpy(rows).to(dev)]).cpu().numpy()
    else:
        vals = S[idx].copy()
        kth = _kth_numpy(S, m, k)
        hit = vals >= kth[rows]
    return np.bincount(rows, weights=hit, minlength=m)


def _hits(problem: Problem, nb: np.ndarray, k: int, progress) -> np.ndarray:
    hits = np.zeros(problem.n_q, np.float64)
    for start, stop in each_block(
        problem, plan_blocks(problem.n_q, problem.b), progress, desc="ann_recall"
    ):
        hits[start:stop] = _block_hits(problem, start, stop, nb[start:stop], k)
    return hits


# ----------------------------------------------------------------------------- entry point
def ann_recall(
    queries,
    gallery,
    neighbors,
    *,
    k: int = 10,
    similarity: str = DEFAULTS["similarity"],
    query_ids=None,
    gallery_ids=None,
    device=DEFAULTS["device"],
    max_memory=DEFAULTS["max_memory"],
    confidence: float = DEFAULTS["confidence"],
    progress: bool | None = None,
    slices=None,
    _tile: tuple[int, int] | None = None,
) -> EvaluationResult:
    """Recall of an approximate nearest-neighbour index against exact search:
    ``ann_recall@K``, the share of the index's top K per query whose exact score
    reaches the exact K-th largest score of that query (ties with it count), averaged
    over queries.

    Parameters
    ----------
    queries, gallery:
        Embeddings as for :func:`evaluate` (``gallery=None``: leave-one-out over the
        queries; each query's own row is then excluded, and a neighbour equal to it is
        a miss).
    neighbors:
        (n_q x >= K) integer gallery indices from the index, best first as faiss's
        ``index.search`` returns them; -1 marks a missing result (a miss). Only the
        first K columns are read; a repeated index within them is an error.
    k:
        K, at most the number of columns of ``neighbors`` and at most the gallery a
        query ranks after self-exclusion.
    similarity, query_ids, gallery_ids, device, max_memory, progress:
        As for :func:`evaluate`: the exact scores are evaluate's (a gallery item
        with the query's id is excluded from the exact top K, and is a miss as a
        neighbour).
    confidence:
        Kept in ``config`` for the bootstrap interval of the gates.
    slices:
        Per-query metadata, as for :func:`evaluate` (one value per query, ``{dimension:
        values}``, ``(metadata, function)``; ``{query id: value}`` with ``query_ids``):
        ``result.slices[name]["ann_recall@K"]`` is the index's recall on each slice's
        queries (the gates of slices take it as any sliced result).

    Returns
    -------
    EvaluationResult
        ``result["ann_recall@K"]``, per-query values in ``per_query``;
        ``n_relevant`` is K for every query (the size of the exact top K before ties),
        ``n_candidates`` the gallery each query ranks; ``config`` adds ``"k"``,
        ``"source": "ann"`` and ``"n_missing"`` (the -1 entries among the first K
        columns).

    Raises
    ------
    InputError
        ``neighbors`` that is not a 2-D integer array with one row per query and at
        least K columns, indices outside the gallery (other than -1) or repeated within
        a row's first K, a K larger than a query's gallery, invalid embeddings, ids,
        slices or options (as for :func:`evaluate`).
    BackendError
        A device that is not available.

    Examples
    --------
    Exact top 5 from a brute-force search, then an index that misses one neighbour
    of query 0 and returns nothing (-1) in one slot of query 1:

    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> gallery, queries = rng.normal(size=(50, 8)), rng.normal(size=(4, 8))
    >>> order = np.argsort(-(queries @ gallery.T), axis=1)
    >>> neighbors = order[:, :5].copy()
    >>> neighbors[0, 4] = order[0, -1]  # the gallery's worst item for query 0
    >>> neighbors[1, 2] = -1
    >>> res = rc.ann_recall(queries, gallery, neighbors, k=5, similarity="dot")
    >>> res["ann_recall@5"], res.per_query["ann_recall@5"], res.config["n_missing"]
    (0.9, array([0.8, 0.8, 1. , 1. ]), 1)
    >>> rc.assert_metric(res, "ann_recall@5", at_least=0.85)
    """
    similarity = check_option("similarity", similarity)
    confidence = check_option("confidence", confidence)
    k = _check_k(k)
    check_run_options(device, max_memory, progress, _tile)
    spec = parse_metric(f"ann_recall@{k}")
    sides = embedding_sides(queries, gallery, similarity)
    own = self_pairs_of(sides, query_ids, gallery_ids, None)
    nb = _check_neighbors(neighbors, sides.n_q, sides.n_g, k)
    dims = (  # validated before the pass
        None
        if slices is None
        else make_slices(
            slices,
            sides.n_q,
            query_ids=None if query_ids is None else as_numpy(query_ids, "query_ids"),
        )
    )
    n_candidates = sides.n_g - own.csr.row_counts()
    _check_candidates(n_candidates, k)
    none = Csr(np.zeros(sides.n_q + 1, np.int64), np.zeros(0, np.int64))
    source = RelevanceSource(csr=none, self_pairs=own.csr, n_g=sides.n_g)
    plan = plan_pass(
        list(sides.inputs),
        n_q=sides.n_q,
        n_g=sides.n_g,
        d=sides.d,
        loo=sides.loo,
        n_relevant=np.zeros(sides.n_q, np.int64),
        device=device,
        max_memory=max_memory,
        tile=_tile,
    )
    plan = _ann_plan(plan, sides.n_q, k, _tile)
    problem = prepare_problem(
        plan,
        sides.queries,
        sides.gallery,
        n_g=sides.n_g,
        similarity=similarity,
        source=source,
        self_pairs=own.csr,
    )
    per_query = _hits(problem, nb, k, progress) / k
    config = {
        "similarity": similarity,
        "backend": plan.backend.name,
        "n_gallery": sides.n_g,
        "k": k,
        "source": "ann",
        "leave_one_out": sides.loo,
        "n_missing": int((nb < 0).sum()),
        "block": plan.b,
        "chunk": plan.c,
        "max_memory": plan.budget,
        "confidence": confidence,
        "seed": 0,
    }
    result = EvaluationResult(
        specs=[spec],
        values={spec.name: aggregate(spec, per_query, skipped=np.zeros(0, np.int64))},
        per_query={spec.name: per_query},
        thresholds={},
        pair_counts={},
        n_relevant=np.full(sides.n_q, k, np.int64),
        n_candidates=n_candidates,
        first_relevant_rank=np.zeros(sides.n_q),
        skipped_queries=np.zeros(0, np.int64),
        config=config,
        query_ids=None if query_ids is None else as_numpy(query_ids, "query_ids").copy(),
    )
    return result if dims is None else attach_slices(result, dims)
