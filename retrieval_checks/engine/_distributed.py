"""Exact evaluation sharded over ``torch.distributed`` ranks (``evaluate(...,
process_group=g)``).

Each rank holds a shard of the queries and a shard of the gallery; the global order
is the shards concatenated in rank order. Every rank returns the result of
single-process :func:`~retrieval_checks.evaluate` on that concatenation, bit for bit.

How. Metadata (ids, labels, relevance rows: a few bytes per item) is all-gathered,
so the relevance, self-pair and validation stages run unchanged, with the same
errors, on every rank. The embeddings never are: the pass runs over the global query
blocks of the single-process plan (same block height ``b``, same chunk width ``c``).
For each block,

1. the owners broadcast the block's prepared query rows (and row factors);
2. each rank computes the scores of the block against its gallery shard in the
   single-process tiles: chunk ``k`` holds gallery positions ``[k c, (k+1) c)`` at the
   same columns as in one process (the shard's items in place, the others masked with
   -inf), so every pair is computed by the same GEMM shape at the same place and gets
   the same bits (the score of a pair depends on the tile's shape: see
   ``docs/distributed.md``);
3. **phase 1**: the ranks owning a relevant item read its score; an all-reduce (max
   over -inf fillers) gives every rank every relevant score of the block;
4. **phase 2**: every rank counts, for each relevant score, its own non-relevant items
   ``>=`` and ``==`` it (the engine's kernels); an int64 all-reduce sums the counts,
   which are then the single-process counts. Pair metrics: negative-tail thresholds
   from summed key histograms, tail values all-gathered, fixed-threshold counts and
   the binning pass's histogram summed.

Memory per rank: its shard (float32, padded to whole chunks), one block of scores
against the shard, the block's query rows, and the O(n) metadata. Bytes moved per
block: ``4 b (d + 1)`` (queries) plus ``4 r`` (relevant scores) and ``16 r`` (counts),
``r`` the block's relevant pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import BackendError, InputError
from . import _kernels
from ._backend import default_memory_budget, parse_memory, resolve_backend
from ._blocks import (
    _F32_MIN,
    BlockPartial,
    _count_torch,
    _sort_within_rows,
    plan_blocks,
    ranked_partial,
    score_chunks,
    tail_histogram,
    tail_threshold,
)
from ._comm import Comm
from ._grouped_sharded import sharded_grouped_values
from ._inputs import (
    Csr,
    as_numpy,
    check_embeddings,
    check_score_range,
    is_torch_tensor,
    refuse_sparse,
    relevance_to_csr,
)
from ._plan import plan_pass
from ._stream import PassTotals, progress_bar

__all__ = ["evaluate_sharded"]


def evaluate_sharded(group, queries, gallery, *, use_kernels: bool = True, **options):
    """``evaluate(..., process_group=group)`` (see :func:`~retrieval_checks.evaluate`)."""
    comm = Comm(group)
    try:
        comm.agree_call("retrieval_checks.evaluate(..., process_group=g)")
        result = _run(comm, queries, gallery, use_kernels=use_kernels, **options)
        comm.finish()
        return result
    except BaseException as exc:
        comm.fail(exc)
        raise


# ----------------------------------------------------------------------------- local checks
_OPTION_NAMES = (
    "metrics",
    "similarity",
    "ties",
    "empty_queries",
    "max_memory",
    "tile",
    "group_size",
    "group_seed",
    "group_repeats",
    "confidence",
    "relevance_level",
)


def _rows(x, name: str, similarity: str) -> tuple[object, int, int]:
    """A rank's shard: validated (an empty shard may have 0 rows); (array, rows, dim)."""
    if x is not None:
        refuse_sparse(x, name)
    if x is not None and not is_torch_tensor(x):
        x = as_numpy(x, name)
    if x is not None and getattr(x, "ndim", 0) == 2 and int(x.shape[0]) == 0:
        return x, 0, int(x.shape[1])
    x = check_embeddings(x, name, similarity=similarity)
    return x, int(x.shape[0]), int(x.shape[1])


def _codes(x, name: str):
    """A rank's binary codes, validated and packed (an empty shard: None); (codes, rows, bits)."""
    from ._hamming import PackedCodes, pack_codes

    if x is not None and getattr(x, "ndim", 0) == 2 and int(x.shape[0]) == 0:
        return None, 0, None
    codes = PackedCodes(*pack_codes(x, name))
    return codes, int(codes.words.shape[0]), int(codes.n_bits)


def _empty_codes(n_bits: int):
    from ._hamming import PackedCodes, n_words

    return PackedCodes(np.zeros((0, n_words(n_bits)), np.uint64), n_bits)


def _items(values, name: str, n: int, rank: int):
    """Ids or labels of a rank's items as a 1-D numpy array of length ``n`` (or None)."""
    if values is None:
        return None
    arr = as_numpy(values, name)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise InputError(
            f"{name} on rank {rank} has shape {tuple(arr.shape)} but the rank holds {n} items; give "
            "one entry per item of the rank's own shard."
        )
    return arr


def _local(comm: Comm, queries, gallery, opts: dict, req) -> dict:
    """This rank's shapes and option fingerprint, after its own checks."""
    loo = gallery is None
    n_bits = None
    if req.similarity == "hamming":
        Q, n_q, n_bits = _codes(queries, "queries")
        G, n_g, g_bits = (Q, n_q, n_bits) if loo else _codes(gallery, "gallery")
        if n_bits is not None and g_bits is not None and g_bits != n_bits:
            raise InputError(
                f"queries hold {n_bits}-bit codes but gallery holds {g_bits}-bit codes on rank "
                f"{comm.rank}; both must come from the same hash function."
            )
        n_bits = n_bits if n_bits is not None else g_bits
        d = d_g = 0
    else:
        Q, n_q, d = _rows(queries, "queries", req.similarity)
        G, n_g, d_g = (Q, n_q, d) if loo else _rows(gallery, "gallery", req.similarity)
    if d_g != d:
        raise InputError(
            f"queries have dimension {d} but gallery has dimension {d_g} on rank {comm.rank}; both "
            "must come from the same embedding space."
        )
    if n_q and n_g and n_bits is None:
        check_score_range(Q, None if loo else G, req.similarity)
    backend = resolve_backend(opts["device"], [a for a in (queries, gallery) if a is not None])
    fingerprint = {k: repr(opts[k]) for k in _OPTION_NAMES}
    fingerprint.update(
        {
            name: opts[name] is None
            for name in (
                "query_ids",
                "gallery_ids",
                "query_labels",
                "gallery_labels",
                "relevance",
                "checkpoint",
            )
        }
    )
    fingerprint["gallery=None"] = loo
    return {
        "n_q": n_q,
        "n_g": n_g,
        "d": d,
        "n_bits": n_bits,
        "Q": Q,
        "G": None if loo else G,
        "backend": backend,
        "fingerprint": fingerprint,
        "budget": parse_memory(opts["max_memory"]) or default_memory_budget(backend),
        "device_type": "cpu" if not backend.is_cuda else "cuda",
    }


def _agree(infos: list[dict], comm: Comm) -> None:
    """Every rank called with the same options and the same kind of inputs."""
    first = infos[0]["fingerprint"]
    for r, info in enumerate(infos[1:], start=1):
        for key, value in first.items():
            if info["fingerprint"][key] != value:
                what = (
                    f"{key} is None on rank {0 if value else r} but not on rank {r if value else 0}"
                    if isinstance(value, bool)
                    else f"{key}={info['fingerprint'][key]} on rank {r} but {value} on rank 0"
                )
                raise InputError(
                    f"The ranks called evaluate differently: {what}; every rank must pass the same "
                    "options and the same kinds of inputs (its own shard of them)."
                )
    dims = {info["d"] for info in infos if info["n_q"] or info["n_g"]}
    if len(dims) > 1:
        raise InputError(
            f"The ranks' embeddings have different dimensions ({sorted(dims)}); every shard must "
            "come from the same embedding space."
        )
    bits = {info["n_bits"] for info in infos if info["n_bits"] is not None}
    if len(bits) > 1:
        raise InputError(
            f"The ranks' codes have different lengths ({sorted(bits)} bits); every shard must come "
            "from the same hash function (and be packed the same way, or not at all)."
        )
    kinds = {info["device_type"] for info in infos}
    if len(kinds) > 1 or (comm.backend == "nccl") != (kinds == {"cuda"}):
        raise BackendError(
            f"The ranks compute on {sorted(kinds)} over a {comm.backend} process group: use Gloo "
            "with device='cpu' (or numpy) on every rank, or NCCL with CUDA on every rank."
        )


# ----------------------------------------------------------------------------- metadata
def _concat(parts: list, name: str):
    present = [p for p in parts if p is not None and p.size]
    if not present:
        return parts[0] if parts[0] is not None else None
    return np.concatenate(present) if len(present) > 1 else present[0]


def _check_spread(codes: np.ndarray, sizes: list[int], name: str) -> None:
    """An id on two ranks is an item counted twice (a sampler's padding): refuse."""
    if codes is None or codes.size == 0:
        return
    owner = np.repeat(np.arange(len(sizes)), sizes)
    lo = np.full(int(codes.max()) + 1, len(sizes))
    hi = np.full(int(codes.max()) + 1, -1)
    np.minimum.at(lo, codes, owner)
    np.maximum.at(hi, codes, owner)
    bad = np.flatnonzero((hi >= 0) & (lo != hi))
    if bad.size:
        where = np.flatnonzero(codes == bad[0])
        raise InputError(
            f"{name}: {bad.size} id(s) appear on more than one rank (e.g. global positions "
            f"{', '.join(str(int(i)) for i in where[:4])}, on ranks {int(lo[bad[0]])} and {int(hi[bad[0]])}); "
            "each item must live on exactly one rank. torch's DistributedSampler repeats items to even out the "
            "ranks: use drop_last=True, or drop the repeated items before evaluating."
        )


@dataclass
class _Layout:
    """Global offsets of every rank's query and gallery shard."""

    q_off: np.ndarray
    g_off: np.ndarray

    def q_range(self, r: int) -> tuple[int, int]:
        return int(self.q_off[r]), int(self.q_off[r + 1])

    def g_range(self, r: int) -> tuple[int, int]:
        return int(self.g_off[r]), int(self.g_off[r + 1])


def _metadata(comm: Comm, infos: list[dict], opts: dict, layout: _Layout, loo: bool) -> dict:
    """Every rank's ids, labels and relevance rows, gathered into global arrays."""
    me = infos[comm.rank]
    n_q, n_g = me["n_q"], me["n_g"]
    if comm.world > 1 and (opts["query_ids"] is None or (not loo and opts["gallery_ids"] is None)):
        missing = "query_ids" if opts["query_ids"] is None else "gallery_ids"
        raise InputError(
            f"{missing} is missing: with process_group over {comm.world} ranks every rank passes the "
            "global ids of its items (query_ids, and gallery_ids unless gallery=None), so that self "
            "matches are found across ranks and items counted twice are refused."
        )
    local = {
        "query_ids": _items(opts["query_ids"], "query_ids", n_q, comm.rank),
        "gallery_ids": _items(opts["gallery_ids"], "gallery_ids", n_g, comm.rank),
        "query_labels": _items(opts["query_labels"], "query_labels", n_q, comm.rank),
        "gallery_labels": _items(opts["gallery_labels"], "gallery_labels", n_g, comm.rank),
        "relevance": None,
    }
    if opts["relevance"] is not None:
        csr = relevance_to_csr(opts["relevance"], n_q, int(layout.g_off[-1]))
        local["relevance"] = (np.diff(csr.indptr), csr.indices, csr.grades)
    parts = comm.gather_objects(local)
    out = {key: _concat([p[key] for p in parts], key) for key in local if key != "relevance"}
    if opts["relevance"] is not None:
        counts = np.concatenate([p["relevance"][0] for p in parts])
        indptr = np.zeros(counts.size + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        graded = [p["relevance"][2] for p in parts]
        grades = (
            None
            if all(g is None for g in graded)
            else np.concatenate(
                [
                    g if g is not None else np.ones(p["relevance"][1].size)
                    for g, p in zip(graded, parts)
                ]
            )
        )
        out["relevance"] = Csr(
            indptr, np.concatenate([p["relevance"][1] for p in parts]).astype(np.int64), grades
        )
    else:
        out["relevance"] = None
    return out


# ----------------------------------------------------------------------------- the shard
@dataclass
class _Shard:
    """This rank's prepared arrays on the backend: queries ``Q`` (rows ``q0..q1`` of
    the global order) and the gallery rows ``g0..g1`` in place inside global chunks
    ``k0 .. k0 + L - 1`` (``Gp``: ``L * c`` rows, zero outside the shard)."""

    backend: object
    similarity: str
    b: int
    c: int
    d: int
    Q: object
    qa: object
    Gp: object
    ga: object
    q0: int
    g0: int
    g1: int
    k0: int
    L: int


def _global_center(comm: Comm, be, G, n_total: int) -> np.ndarray:
    """neg_l2's centre: the gallery's column means rounded to integers, from every
    rank's float64 column sums (exact, hence equal to one process's, for integer
    data; for other data equal unless a mean lies within float64 rounding of a
    half-integer)."""
    total = np.zeros(int(G.shape[1]), np.float64)
    rows = max(1, (16 * 2**20) // (8 * max(int(G.shape[1]), 1)))
    for s in range(0, int(G.shape[0]), rows):
        part = G[s : s + rows]
        total += (
            part.astype(np.float64).sum(axis=0)
            if be.kind == "numpy"
            else part.double().sum(dim=0).cpu().numpy()
        )
    total = comm.all_reduce(total, "sum")
    return np.round(total / n_total)


def _prepare_codes(comm: Comm, plan, info: dict, layout: _Layout, loo: bool) -> _Shard:
    """Binary codes as 64-bit words, as :func:`._plan._prepare_codes` lays them out: the
    shard's gallery words in place inside its global chunks (zero words elsewhere)."""
    be, c = plan.backend, plan.c
    g0, g1 = layout.g_range(comm.rank)
    k0 = g0 // c
    L = (-(-g1 // c) - k0) if g1 > g0 else 0
    off, n = g0 - k0 * c, g1 - g0
    Gw = (info["Q"] if loo else info["G"]).words
    W = int(info["Q"].words.shape[1])
    Gp = np.zeros((L * c, W), np.uint64)
    Gp[off : off + n] = Gw
    Qw = info["Q"].words
    if be.kind == "torch":
        Gp = be.from_numpy(Gp.view(np.int64))
        Q = Gp[off : off + n] if loo else be.from_numpy(np.ascontiguousarray(Qw).view(np.int64))
    else:
        Q = Gp[off : off + n] if loo else Qw
    q0 = layout.q_range(comm.rank)[0]
    return _Shard(be, "hamming", plan.b, c, W, Q, None, Gp, None, q0, g0, g1, k0, L)


def _prepare(comm: Comm, plan, info: dict, layout: _Layout, similarity: str, loo: bool) -> _Shard:
    if similarity == "hamming":
        return _prepare_codes(comm, plan, info, layout, loo)
    be, c = plan.backend, plan.c
    d = info["d"]
    g0, g1 = layout.g_range(comm.rank)
    k0 = g0 // c
    L = (-(-g1 // c) - k0) if g1 > g0 else 0
    off, n = g0 - k0 * c, g1 - g0
    Gp = be.zeros((L * c, d))
    Graw = info["Q"] if loo else info["G"]
    G = be.native(Graw) if n else None
    n_q = info["n_q"]
    if similarity == "cosine":
        host = np.zeros(L * c, np.float32)
        if n:
            host[off : off + n] = be.cosine_rows_into(G, Gp[off : off + n])
        ga = be.from_numpy(host)
        if loo:
            Q, qa = Gp[off : off + n], ga[off : off + n]
        else:
            Q = be.empty((n_q, d))
            qa = be.from_numpy(
                be.cosine_rows_into(be.native(info["Q"]), Q) if n_q else np.zeros(0, np.float32)
            )
    else:
        center = None
        if similarity == "neg_l2":
            source = G if G is not None else be.native(np.zeros((0, d), np.float32))
            center = _global_center(comm, be, source, int(layout.g_off[-1]))
        if n:
            be.float32_into(G, Gp[off : off + n], center=center)
        ga = None
        if similarity == "neg_l2":
            ga = be.zeros((L * c,))
            if n:
                ga[off : off + n] = be.row_factors(Gp[off : off + n], similarity)
        if loo:
            Q, qa = Gp[off : off + n], (None if ga is None else ga[off : off + n])
        else:
            Q = be.empty((n_q, d))
            if n_q:
                be.float32_into(be.native(info["Q"]), Q, center=center)
            qa = (
                None
                if similarity != "neg_l2"
                else (be.row_factors(Q, similarity) if n_q else be.zeros((0,)))
            )
    q0 = layout.q_range(comm.rank)[0]
    return _Shard(be, similarity, plan.b, c, d, Q, qa, Gp, ga, q0, g0, g1, k0, L)


# ----------------------------------------------------------------------------- one block
class _Block:
    """The scores of one global query block against this rank's shard."""

    def __init__(
        self, comm: Comm, sh: _Shard, layout: _Layout, start: int, stop: int, buffers: dict
    ):
        be = sh.backend
        self.m = stop - start
        if "Qb" not in buffers:
            if (
                sh.similarity == "hamming"
            ):  # code words: uint64 (numpy) or int64 (torch), as one process
                buffers["Qb"] = (
                    sh.Q[:0].new_zeros((sh.b, sh.d))
                    if be.kind == "torch"
                    else np.zeros((sh.b, sh.d), np.uint64)
                )
            else:
                buffers["Qb"] = be.zeros((sh.b, sh.d))
            buffers["qa"] = be.zeros((sh.b,))
            buffers["S"] = be.empty((sh.L, sh.b, sh.c))
        Qb, qab, S = buffers["Qb"], buffers["qa"], buffers["S"]
        if self.m < sh.b:
            Qb[self.m :] = 0
        self._queries(comm, sh, layout, start, stop, Qb, qab)
        score_chunks(be, Qb, sh.Gp, sh.c, sh.L, sh.similarity, qab, sh.ga, S)
        if sh.L:
            lo, hi = sh.g0 - sh.k0 * sh.c, sh.g1 - (sh.k0 + sh.L - 1) * sh.c
            S[0, :, :lo] = -math.inf
            S[sh.L - 1, :, hi:] = -math.inf
        self.S = S

    @staticmethod
    def _queries(comm: Comm, sh: _Shard, layout: _Layout, start: int, stop: int, Qb, qab) -> None:
        """The block's query rows and factors, broadcast by their owners."""
        torch = comm.torch
        be = sh.backend
        if sh.similarity == "hamming":
            _block_words(comm, sh, layout, start, stop, Qb)
            return
        for r in range(comm.world):
            q0, q1 = layout.q_range(r)
            lo, hi = max(start, q0), min(stop, q1)
            if lo >= hi:
                continue
            buf = torch.zeros((hi - lo, sh.d + 1), dtype=torch.float32, device=comm.device)
            if r == comm.rank:
                rows = sh.Q[lo - sh.q0 : hi - sh.q0]
                buf[:, : sh.d] = torch.as_tensor(rows).to(comm.device)
                if sh.qa is not None:
                    buf[:, sh.d] = torch.as_tensor(sh.qa[lo - sh.q0 : hi - sh.q0]).to(comm.device)
            comm.broadcast(buf, r)
            got = buf.cpu().numpy() if be.kind == "numpy" else buf.to(be.device)
            Qb[lo - start : hi - start] = got[:, : sh.d]
            if sh.qa is not None:
                qab[lo - start : hi - start] = got[:, sh.d]


def _words_of(rows):
    """Code word rows as an int64 CPU tensor (numpy uint64 or torch int64 in)."""
    import torch

    if isinstance(rows, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(rows).view(np.int64))
    return rows


def _block_words(comm: Comm, sh: _Shard, layout: _Layout, start: int, stop: int, Qb) -> None:
    """The block's query code words, broadcast by their owners (int64 on the wire)."""
    torch = comm.torch
    for r in range(comm.world):
        q0, q1 = layout.q_range(r)
        lo, hi = max(start, q0), min(stop, q1)
        if lo >= hi:
            continue
        buf = torch.zeros((hi - lo, sh.d), dtype=torch.int64, device=comm.device)
        if r == comm.rank:
            buf[:] = _words_of(sh.Q[lo - sh.q0 : hi - sh.q0]).to(comm.device)
        comm.broadcast(buf, r)
        if isinstance(Qb, np.ndarray):
            Qb[lo - start : hi - start] = buf.cpu().numpy().view(np.uint64)
        else:
            Qb[lo - start : hi - start] = buf.to(Qb.device)


def _mask_owned(sh: _Shard, S, rel: Csr, own: Csr, torch_path: bool):
    """This rank's relevant scores (-inf where another rank owns the item), and its
    relevant and self pairs set to -inf."""
    base = sh.k0 * sh.c
    rid, cols = rel.row_ids(), rel.indices
    mine = (cols >= sh.g0) & (cols < sh.g1)
    lc, lr = cols[mine] - base, rid[mine]
    orow, ocol = own.row_ids(), own.indices
    omine = (ocol >= sh.g0) & (ocol < sh.g1)
    oc, orr = ocol[omine] - base, orow[omine]
    if not torch_path:
        vals = np.full(rid.size, -np.inf, np.float32)
        vals[mine] = S[lc // sh.c, lr, lc % sh.c]
        S[lc // sh.c, lr, lc % sh.c] = -np.inf
        S[oc // sh.c, orr, oc % sh.c] = -np.inf
        return vals
    import torch

    dev = S.device
    vals = torch.full((rid.size,), -math.inf, dtype=torch.float32, device=dev)
    idx = tuple(torch.from_numpy(a).to(dev) for a in (lc // sh.c, lr, lc % sh.c))
    vals[torch.from_numpy(np.flatnonzero(mine)).to(dev)] = S[idx]
    S[idx] = -math.inf
    S[tuple(torch.from_numpy(a).to(dev) for a in (oc // sh.c, orr, oc % sh.c))] = -math.inf
    return vals


@dataclass
class _Pass:
    comm: Comm
    sh: _Shard
    layout: _Layout
    source: object
    self_pairs: Csr
    n_q: int
    torch_path: bool
    progress: object

    def blocks(self, skip: int = 0):
        """The global query blocks from the ``skip``-th on: (start, stop, scores, the
        block's relevance, this rank's relevant scores), the rank's pairs masked."""
        blocks = plan_blocks(self.n_q, self.sh.b)
        bar = progress_bar(
            self.progress if self.comm.rank == 0 else False, len(blocks), "retrieval-checks"
        )
        if bar is not None and skip:
            bar.update(skip)
        buffers: dict = {}
        try:
            with self.sh.backend.exact_matmul():
                for start, stop in blocks[skip:]:
                    blk = _Block(self.comm, self.sh, self.layout, start, stop, buffers)
                    rel = self.source.block(start, stop)
                    own = self.self_pairs.rows(start, stop)
                    S = blk.S
                    if self.torch_path and isinstance(S, np.ndarray):
                        S = self.comm.torch.from_numpy(S)
                    elif not self.torch_path:
                        S = self.sh.backend.to_numpy(S)
                    yield start, stop, S, rel, _mask_owned(self.sh, S, rel, own, self.torch_path)
                    if bar is not None:
                        bar.update(1)
        finally:
            if bar is not None:
                bar.close()


def _run_block(ps: _Pass, totals: PassTotals, start, stop, S, rel: Csr, vals) -> BlockPartial:
    """Phases 1 and 2 of one block: its partial result, as one process's (to merge
    into ``totals`` next)."""
    comm, torch_path, m = ps.comm, ps.torch_path, stop - start
    n_cols = ps.sh.L * ps.sh.c
    vals = comm.all_reduce(vals, "max")  # phase 1: every relevant score of the block
    rel_sorted, order = _sort_within_rows(vals, rel, torch_path)
    want_pairs = totals.want_pairs
    tail_tau = totals.tail.tau if want_pairs else -math.inf
    if want_pairs and not torch_path and not math.isfinite(tail_tau):
        hist = comm.all_reduce(tail_histogram(S, m, n_cols), "sum")
        tail_tau = tail_threshold(hist, totals.tail.capacity)
    tau = max(float(tail_tau), _F32_MIN) if want_pairs else math.inf
    if torch_path:
        above, tied = _count_torch(S, m, n_cols, rel.indptr, rel_sorted)
    else:
        above = np.empty(rel_sorted.shape[0], np.int64)
        tied = np.empty(rel_sorted.shape[0], np.int64)
        tail_counts = np.zeros(m, np.int64)
        _kernels.count_above_relevant(
            S, m, n_cols, rel.indptr, rel_sorted, above, tied, np.float32(tau), tail_counts
        )
    both = comm.all_reduce(np.concatenate([above, tied]), "sum")  # phase 2: counts over every shard
    above, tied = both[: above.size], both[above.size :]
    part = ranked_partial(start, stop, rel, rel_sorted, order, above, tied, torch_path)
    if want_pairs and torch_path:
        _torch_pairs(comm, totals, part, S, m, rel_sorted, tail_tau, tau)
    elif want_pairs:
        part.positives = rel_sorted
        rows = np.flatnonzero(tail_counts).astype(np.int64)
        offsets = np.zeros(rows.size + 1, np.int64)
        np.cumsum(tail_counts[rows], out=offsets[1:])
        negatives = np.empty(int(offsets[-1]), np.float32)
        _kernels.collect_rows(S, rows, offsets, n_cols, np.float32(tau), negatives)
        part.negatives = comm.all_gather_varlen(negatives)
        if totals.fixed_f32.size:
            hist = np.zeros(totals.fixed_f32.size + 1, np.int64)
            _kernels.bin_against_sorted(S, m, n_cols, totals.fixed_f32, hist)
            part.fixed_fp = comm.all_reduce(np.cumsum(hist[::-1])[::-1][1:].copy(), "sum")
        part.negatives_tau = float(tail_tau)
    return part


def _torch_pairs(
    comm: Comm,
    totals: PassTotals,
    part: BlockPartial,
    S,
    m: int,
    rel_sorted,
    tail_tau: float,
    tau: float,
) -> None:
    """The pair-metric part of a block on the vectorised torch path (CUDA), as
    :func:`._blocks.run_block` computes it: the first tail threshold is the
    capacity-th largest finite score of the block, over every rank (each rank's top
    ``capacity`` gathered); tail values gathered; fixed-threshold counts summed."""
    import torch

    part.positives = rel_sorted.cpu().numpy()
    view = S[:, :m]
    cap = totals.tail.capacity
    if not math.isfinite(tail_tau):
        finite = view > -math.inf
        n_local = int(finite.sum())
        n_block = int(comm.all_reduce(np.array([n_local], np.int64), "sum")[0])
        if n_block > cap:
            top = torch.topk(view[finite], min(cap, n_local)).values.cpu().numpy()
            every = comm.all_gather_varlen(top)
            tail_tau = float(np.partition(every, every.size - cap)[every.size - cap])
            tau = tail_tau
    part.negatives = comm.all_gather_varlen(view[view >= tau].cpu().numpy())
    if totals.fixed_f32.size:
        thr = torch.from_numpy(totals.fixed_f32).to(S.device)
        part.fixed_fp = comm.all_reduce(
            np.array([int((view >= t).sum()) for t in thr], np.int64), "sum"
        )
    part.negatives_tau = float(tail_tau)


def _binning(ps: _Pass, counts) -> np.ndarray:
    """The binning pass over every shard: negatives at or above each unique positive."""
    u = counts.unique_positives()
    hist = np.zeros(u.size + 1, np.int64)
    n_cols = ps.sh.L * ps.sh.c
    for start, stop, S, _rel, _vals in _Pass(**{**ps.__dict__, "progress": False}).blocks():
        if ps.torch_path:
            import torch

            ut = torch.from_numpy(u).to(S.device)
            view = S[:, : stop - start].reshape(-1)
            view = view[view >= ut[0]]
            hist += (
                torch.bincount(torch.searchsorted(ut, view, right=True), minlength=u.size + 1)
                .cpu()
                .numpy()
            )
            continue
        _kernels.bin_against_sorted(S, stop - start, n_cols, u, hist)
    hist = ps.comm.all_reduce(hist, "sum")
    return np.cumsum(hist[::-1])[::-1][1:]


# ----------------------------------------------------------------------------- the run
def _refuse_unsupported(req, opts: dict) -> None:
    unsupported = req.of_kind("embedding")
    if unsupported:
        names = ", ".join(s.name for s in unsupported)
        raise InputError(
            f"{names}: not supported with process_group (they read every embedding at once); "
            "evaluate them in one process."
        )


def _run(
    comm: Comm, queries, gallery, *, use_kernels: bool, **opts
):  # long: the stages, in order, one call each
    from . import _evaluate as ev

    if opts.pop("executor", None) is not None:
        raise InputError(
            "executor= and process_group= do not combine: the ranks are the workers of a sharded run; "
            "drop one of them."
        )
    opts["use_kernels"] = use_kernels
    req = ev._options(
        opts["metrics"],
        similarity=opts["similarity"],
        ties=opts["ties"],
        empty_queries=opts["empty_queries"],
        group_size=opts["group_size"],
        group_seed=opts["group_seed"],
        group_repeats=opts["group_repeats"],
        confidence=opts["confidence"],
    )
    if opts["progress"] is not None and not isinstance(opts["progress"], bool):
        raise InputError(
            f"progress={opts['progress']!r}: use True, False or None (only on a terminal)."
        )
    _refuse_unsupported(req, opts)
    loo = gallery is None
    info = _local(comm, queries, gallery, opts, req)
    infos = comm.gather_objects({k: v for k, v in info.items() if k not in ("Q", "G", "backend")})
    _agree(infos, comm)
    sizes_q = [i["n_q"] for i in infos]
    sizes_g = [i["n_q"] if loo else i["n_g"] for i in infos]
    layout = _Layout(
        np.concatenate([[0], np.cumsum(sizes_q)]).astype(np.int64),
        np.concatenate([[0], np.cumsum(sizes_g)]).astype(np.int64),
    )
    n_q, n_g, d = int(layout.q_off[-1]), int(layout.g_off[-1]), max(i["d"] for i in infos)
    if (
        req.similarity == "hamming"
    ):  # empty shards get codes of the ranks' length; d: the planner's columns
        n_bits = next((i["n_bits"] for i in infos if i["n_bits"] is not None), 1)
        info["Q"] = info["Q"] if info["Q"] is not None else _empty_codes(n_bits)
        if not loo:
            info["G"] = info["G"] if info["G"] is not None else _empty_codes(n_bits)
        d = int(info["Q"].shape[1])
    meta = _metadata(comm, infos, opts, layout, loo)
    sides = ev._Sides(None, None if loo else _REMOTE, n_q, n_g, d)
    if n_q == 0:
        raise InputError(
            "queries: every rank's shard is empty; at least one rank must hold queries."
        )
    own = ev._self_pairs(sides, meta["query_ids"], meta["gallery_ids"], meta["gallery_labels"])
    _check_spread(own.q_ids, sizes_q, "query_ids")
    _check_spread(own.g_ids, sizes_g, "gallery_ids")
    rel = ev._relevance(
        req,
        sides,
        own,
        meta["query_labels"],
        meta["gallery_labels"],
        meta["relevance"],
        opts["relevance_level"],
    )
    pair_specs = req.of_kind("pair")
    n_positive = int(rel.n_relevant.sum())
    if pair_specs and n_positive == 0:
        raise InputError("Pair metrics need at least one relevant (positive) pair; none was found.")
    totals, ps, plan = sharded_pass(
        comm,
        info,
        layout,
        rel.source,
        own.csr,
        d=d,
        loo=loo,
        n_relevant=rel.n_relevant,
        query_specs=req.of_kind("query"),
        pair_specs=pair_specs,
        ties=req.ties,
        similarity=req.similarity,
        relevance_level=opts["relevance_level"],
        device=opts["device"],
        budget=infos[0]["budget"],
        tile=opts["tile"],
        progress=opts["progress"],
        use_kernels=use_kernels,
        checkpoint=_fingerprint(comm, opts, info, meta, loo)
        if opts["checkpoint"] is not None
        else None,
    )
    ids = meta["query_ids"].copy() if meta["query_ids"] is not None else None
    return ev._aggregate(
        req,
        sides,
        own,
        rel,
        plan,
        None,
        totals,
        use_kernels,
        ids,
        opts["relevance_level"],
        binning=lambda counts: _binning(ps, counts),
        extra_config={"world_size": comm.world},
        grouped_values=sharded_grouped_values(comm, ps.sh, layout, loo),
    )


def _fingerprint(comm: Comm, opts: dict, info: dict, meta: dict, loo: bool) -> tuple:
    """(directory, fingerprint): every rank's shard content, the gathered metadata and
    the options that shape the pass, and the scores' definition."""
    from ._backend import SCORES_VERSION
    from ._cache import content_digest

    def digest(x):  # an empty shard has no bytes to hash (memoryview refuses zero-size casts)
        if x is None or int(np.prod(tuple(x.shape))) == 0:
            return repr(None if x is None else tuple(x.shape))
        return content_digest(x)

    digests = comm.gather_objects([digest(info["Q"]), digest(info["G"])])
    options = repr(
        [opts[k] for k in ("metrics", "similarity", "ties", "empty_queries", "relevance_level")]
    )
    meta_digest = content_digest(
        *(meta[k] for k in sorted(meta) if meta[k] is not None and k != "relevance"),
        *(
            ()
            if meta["relevance"] is None
            else (meta["relevance"].indptr, meta["relevance"].indices, meta["relevance"].grades)
        ),
    )
    return opts["checkpoint"], content_digest(digests, options, meta_digest, loo, SCORES_VERSION)


def sharded_pass(
    comm: Comm,
    info: dict,
    layout: _Layout,
    source,
    self_pairs: Csr,
    *,
    d: int,
    loo: bool,
    n_relevant: np.ndarray,
    query_specs: list,
    pair_specs: list,
    ties: str,
    similarity: str,
    relevance_level,
    device,
    budget,
    tile,
    progress,
    use_kernels: bool,
    checkpoint=None,
):
    """Plan, prepare and stream the sharded pass: the merged :class:`PassTotals` (the
    same on every rank), the pass (for the binning pass) and the plan. ``info``:
    this rank's arrays (``Q``, ``G``: None in leave-one-out) and ``n_q``.
    ``checkpoint``: (directory, fingerprint of the inputs and options) or None."""
    n_q, n_g = int(layout.q_off[-1]), int(layout.g_off[-1])
    local_arrays = [a for a in (info["Q"], info["G"]) if a is not None]
    plan = plan_pass(
        local_arrays,
        n_q=n_q,
        n_g=n_g,
        d=d,
        loo=loo,
        n_relevant=n_relevant,
        device=device,
        max_memory=budget,
        tile=tile,
        pairs=bool(pair_specs),
    )
    sh = _prepare(comm, plan, info, layout, similarity, loo)
    torch_path = plan.backend.is_cuda or not use_kernels
    ps = _Pass(comm, sh, layout, source, self_pairs, n_q, torch_path, progress)
    totals = PassTotals(
        n_q, query_specs, pair_specs, int(n_relevant.sum()), ties, similarity, relevance_level
    )
    if not (query_specs or pair_specs):
        return totals, ps, plan
    store, skip = None, 0
    if checkpoint is not None:
        from ._cache import content_digest
        from ._checkpoint import Checkpoint

        key = content_digest(checkpoint[1], plan.b, plan.c, plan.backend.kind, comm.world)
        store = Checkpoint(checkpoint[0], key, part=f"rank{comm.rank}of{comm.world}")
        blocks = plan_blocks(n_q, plan.b)
        skip = -int(
            comm.all_reduce(np.array([-store.finished(blocks)], np.int64), "max")[0]
        )  # fewest on a rank
        for start, stop in blocks[:skip]:
            totals.add(store.load(start, stop))
    for start, stop, S, block_rel, vals in ps.blocks(skip):
        part = _run_block(ps, totals, start, stop, S, block_rel, vals)
        totals.add(part)
        if store is not None:
            store.save(part)
    return totals, ps, plan


class _Remote:
    """Stands for the gallery in the global stages: it lives on the ranks."""

    shape = None


_REMOTE = _Remote()
