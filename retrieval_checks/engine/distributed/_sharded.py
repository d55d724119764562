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

None of this is a copy of the one-process pass: the rank's problem is the one
:func:`.._plan.prepare_problem` builds with a column window (its shard), and the pass is
the one loop (:func:`.._stream.stream`, :func:`.._blocks.run_block`) with :class:`Ranks`
as its Reduce: steps 1, 3 and 4 are the states :mod:`.._reduce` declares.

Memory per rank: its shard (float32, padded to whole chunks), one block of scores
against the shard, the block's query rows, and the O(n) metadata. Bytes moved per
block: ``4 b (d + 1)`` (queries) plus ``4 r`` (relevant scores) and ``16 r`` (counts),
``r`` the block's relevant pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import BackendError, InputError
from .. import _backend
from .._backend import check_run_options, default_memory_budget, parse_memory, resolve_backend
from .._checkpoint import Checkpoint, check_directory
from .._counting import select
from .._digest import content_digest
from .._hamming import PackedCodes, n_words, pack_codes
from .._inputs import (
    Csr,
    as_numpy,
    check_embeddings,
    check_score_range,
    is_torch_tensor,
    refuse_sparse,
    relevance_to_csr,
)
from .._plan import Window, plan_pass, prepare_problem
from .._reduce import STATES
from .._stages import (
    Sides,
    aggregate_result,
    check_queries_in_gallery,
    parse_request,
    relevance_of,
    row_keys,
    self_pairs_of,
)
from .._stream import binning_pass, stream
from ._comm import Comm
from ._grouped import sharded_grouped_values

__all__ = ["Layout", "Ranks", "evaluate_sharded", "shard_rows", "sharded_pass"]


def evaluate_sharded(
    group,
    queries,
    gallery,
    *,
    use_kernels: bool = True,
    self_match_fails: bool = False,
    **options,
):
    """``evaluate(..., process_group=group)`` (see :func:`~retrieval_checks.evaluate`;
    ``self_match_fails``: its ``_self_match_fails``, a suite's check)."""
    comm = Comm(group)
    try:
        comm.agree_call("retrieval_checks.evaluate(..., process_group=g)")
        result = _run(
            comm,
            queries,
            gallery,
            use_kernels=use_kernels,
            self_match_fails=self_match_fails,
            **options,
        )
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
    "ignore_identical_ids",
)


def on_rank(name: str, comm: Comm) -> str:
    """An array's name in a rank's own errors: the rows they name are its shard's (``gallery
    on rank 1 ... rows 12`` is the shard's row 12, not the whole gallery's)."""
    return name if comm.world == 1 else f"{name} on rank {comm.rank}"


def shard_rows(x, name: str, similarity: str) -> tuple[object, int, int]:
    """A rank's shard: validated (an empty shard may have 0 rows); (array, rows, dim).
    ``name``: the array's name in the errors (:func:`on_rank`)."""
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
    if x is not None and getattr(x, "ndim", 0) == 2 and int(x.shape[0]) == 0:
        return None, 0, None
    codes = PackedCodes(*pack_codes(x, name))
    return codes, int(codes.words.shape[0]), int(codes.n_bits)


def _empty_codes(n_bits: int):
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
        Q, n_q, n_bits = _codes(queries, on_rank("queries", comm))
        G, n_g, g_bits = (Q, n_q, n_bits) if loo else _codes(gallery, on_rank("gallery", comm))
        if n_bits is not None and g_bits is not None and g_bits != n_bits:
            raise InputError(
                f"queries hold {n_bits}-bit codes but gallery holds {g_bits}-bit codes on rank "
                f"{comm.rank}; both must come from the same hash function."
            )
        n_bits = n_bits if n_bits is not None else g_bits
        d = d_g = 0
    else:
        Q, n_q, d = shard_rows(queries, on_rank("queries", comm), req.similarity)
        G, n_g, d_g = (
            (Q, n_q, d) if loo else shard_rows(gallery, on_rank("gallery", comm), req.similarity)
        )
    if d_g != d:
        raise InputError(
            f"queries have dimension {d} but gallery has dimension {d_g} on rank {comm.rank}; both "
            "must come from the same embedding space."
        )
    backend = resolve_backend(
        opts["device"], [a for a in (queries, gallery) if a is not None], collectives=comm.backend
    )
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


def joined(comm: Comm):
    """The ``combine`` of :func:`.._inputs.check_score_range` over the process group."""

    def combine(op: str, values: np.ndarray) -> np.ndarray:
        return comm.all_gather_varlen(values) if op == "gather" else comm.all_reduce(values, op)

    return combine


def whole_dims(x, d: int):
    """``x``, or for an empty shard zero rows of the ranks' dimension ``d`` (an empty
    shard's own width is not checked, and the ranks' sums must have one length)."""
    return x if x is not None and int(x.shape[0]) else np.zeros((0, d), np.float32)


def _check_scores(comm: Comm, info: dict, infos: list[dict], loo: bool, similarity: str) -> None:
    """The scores' float32 range over the whole query and gallery sets, as one process
    judges it (every rank, after the ranks agreed on the options): a large query on one
    rank and a large gallery row on another overflow, though neither shard does alone."""
    if similarity == "hamming":
        return
    d = max(i["d"] for i in infos)
    check_score_range(
        whole_dims(info["Q"], d),
        None if loo else whole_dims(info["G"], d),
        similarity,
        combine=joined(comm),
    )


# ----------------------------------------------------------------------------- metadata
_KINDS = {
    "i": "integers",
    "u": "integers",
    "f": "numbers",
    "b": "booleans",
    "U": "strings",
    "S": "bytes",
}


def _kind_of(arr: np.ndarray) -> str:
    if arr.dtype.kind == "O" and all(isinstance(v, str) for v in arr.tolist()):
        return "strings"  # a list of str as an object array: the strings of another rank
    kind = _KINDS.get(arr.dtype.kind, f"{arr.dtype} values")
    return "numbers" if kind == "integers" else kind  # ints and floats join without a change


def _concat(parts: list, name: str):
    """The ranks' ``name`` arrays in rank order; refused where ranks pass different kinds
    (numpy would turn one rank's integers into the other's strings: a joined id or label
    of another type than any rank passed, or a refusal that blames the wrong side)."""
    present = [p for p in parts if p is not None and p.size]
    kinds = {}
    for r, p in enumerate(parts):
        if p is not None and p.size:
            kinds.setdefault(_kind_of(p), r)
    if len(kinds) > 1:
        (a, ra), (b, rb) = sorted(kinds.items(), key=lambda kv: kv[1])[:2]
        raise InputError(
            f"{name} are {a} on rank {ra} but {b} on rank {rb}; every rank must pass its {name} as "
            "the same kind of values (e.g. str(x) or int(x) on every rank)."
        )
    if not present:
        return parts[0] if parts[0] is not None else None
    if len(present) == 1:
        return present[0]
    out = np.concatenate(present)
    at = 0
    for p in present:  # ints and floats join as floats, which must hold every int exactly
        if p.dtype.kind in "iu" and out.dtype.kind not in "iu":
            if not np.array_equal(out[at : at + p.size].astype(p.dtype), p):
                raise InputError(
                    f"{name}: the ranks' values join as {out.dtype}, which changes one rank's "
                    f"{p.dtype} integers beyond 2**53 (two ids would become one); pass them as "
                    "the same type on every rank (e.g. int(x) or str(x))."
                )
        at += p.size
    return out


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
class Layout:
    """Global offsets of every rank's query and gallery shard."""

    q_off: np.ndarray
    g_off: np.ndarray

    def q_range(self, r: int) -> tuple[int, int]:
        return int(self.q_off[r]), int(self.q_off[r + 1])

    def g_range(self, r: int) -> tuple[int, int]:
        return int(self.g_off[r]), int(self.g_off[r + 1])


def _metadata(comm: Comm, infos: list[dict], opts: dict, layout: Layout, loo: bool) -> dict:
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
        try:
            csr = relevance_to_csr(opts["relevance"], n_q, int(layout.g_off[-1]))
        except InputError as exc:
            if comm.world == 1:
                raise
            # its rows are the rank's own queries from 0 (the columns: the whole gallery's)
            raise InputError(
                f"relevance on rank {comm.rank} (row i: the rank's own query i): {exc}"
            ) from None
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


# ----------------------------------------------------------------------------- the ranks
class Ranks:
    """The Reduce of a sharded pass (:mod:`.._reduce`): each declared state's operation
    over the process group's ranks, and a block's query rows broadcast by the ranks
    that hold them."""

    local = False

    def __init__(self, comm: Comm, layout: "Layout"):
        self.comm, self.layout = comm, layout

    def __call__(self, state: str, value):
        op = STATES[state]
        if op == "gather":
            return self.comm.all_gather_varlen(value)
        if op == "min":
            return -self.comm.all_reduce(-value, "max")
        return self.comm.all_reduce(value, op)

    def queries(self, p, start: int, stop: int, Qb, qa) -> None:
        """The block's query rows and factors, broadcast by their owners."""
        comm, layout = self.comm, self.layout
        torch = comm.torch
        be = p.backend
        if p.similarity == "hamming":
            _block_words(comm, p, layout, start, stop, Qb)
            return
        d = p.d
        for r in range(comm.world):
            q0, q1 = layout.q_range(r)
            lo, hi = max(start, q0), min(stop, q1)
            if lo >= hi:
                continue
            buf = torch.zeros((hi - lo, d + 1), dtype=torch.float32, device=comm.device)
            if r == comm.rank:
                rows = p.Q[lo - p.q0 : hi - p.q0]
                buf[:, :d] = torch.as_tensor(rows).to(comm.device)
                if p.qa is not None:
                    buf[:, d] = torch.as_tensor(p.qa[lo - p.q0 : hi - p.q0]).to(comm.device)
            comm.broadcast(buf, r)
            got = buf.cpu().numpy() if be.kind == "numpy" else buf.to(be.device)
            Qb[lo - start : hi - start] = got[:, :d]
            if p.qa is not None:
                qa[lo - start : hi - start] = got[:, d]


def _words_of(rows):
    """Code word rows as an int64 CPU tensor (numpy uint64 or torch int64 in)."""
    import torch

    if isinstance(rows, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(rows).view(np.int64))
    return rows


def _block_words(comm: Comm, p, layout: "Layout", start: int, stop: int, Qb) -> None:
    """The block's query code words, broadcast by their owners (int64 on the wire)."""
    torch = comm.torch
    for r in range(comm.world):
        q0, q1 = layout.q_range(r)
        lo, hi = max(start, q0), min(stop, q1)
        if lo >= hi:
            continue
        buf = torch.zeros((hi - lo, p.d), dtype=torch.int64, device=comm.device)
        if r == comm.rank:
            buf[:] = _words_of(p.Q[lo - p.q0 : hi - p.q0]).to(comm.device)
        comm.broadcast(buf, r)
        if isinstance(Qb, np.ndarray):
            Qb[lo - start : hi - start] = buf.cpu().numpy().view(np.uint64)
        else:
            Qb[lo - start : hi - start] = buf.to(Qb.device)


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
    comm: Comm, queries, gallery, *, use_kernels: bool, self_match_fails: bool = False, **opts
):  # long: the stages, in order, one call each
    if opts.pop("executor", None) is not None:
        raise InputError(
            "executor= and process_group= do not combine: the ranks are the workers of a sharded run; "
            "drop one of them."
        )
    opts["use_kernels"] = use_kernels
    # first, as one process checks them: where and how the pass runs, and the checkpoint's
    # directory (also when no block is kept: grouped recall alone passed an unwritable one)
    check_run_options(opts["device"], opts["max_memory"], opts["progress"], opts["tile"])
    if opts["checkpoint"] is not None:
        check_directory(opts["checkpoint"])
    req = parse_request(
        opts["metrics"],
        similarity=opts["similarity"],
        ties=opts["ties"],
        empty_queries=opts["empty_queries"],
        group_size=opts["group_size"],
        group_seed=opts["group_seed"],
        group_repeats=opts["group_repeats"],
        confidence=opts["confidence"],
        ignore_identical_ids=opts["ignore_identical_ids"],
        relevance_level=opts[
            "relevance_level"
        ],  # its type, and with pair metrics: before the inputs
    )
    _refuse_unsupported(req, opts)
    loo = gallery is None
    info = _local(comm, queries, gallery, opts, req)
    infos = comm.gather_objects({k: v for k, v in info.items() if k not in ("Q", "G", "backend")})
    _agree(infos, comm)
    _check_scores(comm, info, infos, loo, req.similarity)
    sizes_q = [i["n_q"] for i in infos]
    sizes_g = [i["n_q"] if loo else i["n_g"] for i in infos]
    layout = Layout(
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
    sides = Sides(None, None if loo else _REMOTE, n_q, n_g, d)
    if n_q == 0:
        raise InputError(
            "queries: every rank's shard is empty; at least one rank must hold queries."
        )
    own = self_pairs_of(
        sides,
        meta["query_ids"],
        meta["gallery_ids"],
        meta["gallery_labels"],
        req.ignore_identical_ids,
    )
    _check_spread(own.q_ids, sizes_q, "query_ids")
    _check_spread(own.g_ids, sizes_g, "gallery_ids")
    rel = relevance_of(
        req,
        sides,
        own,
        meta["query_labels"],
        meta["gallery_labels"],
        meta["relevance"],
        opts["relevance_level"],
    )
    self_matched, every_self = _self_matches(
        comm, info, own, rel, sides, loo, self_match_fails, req.similarity
    )
    pair_specs = req.of_kind("pair")
    n_positive = int(rel.n_relevant.sum())
    if pair_specs and n_positive == 0:
        raise InputError("Pair metrics need at least one relevant (positive) pair; none was found.")
    totals, problem, plan = sharded_pass(
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
        unranked=rel.unranked,
        device=info["backend"],  # resolved once, under the group's collectives (_local)
        budget=infos[0]["budget"],
        tile=opts["tile"],
        progress=opts["progress"],
        use_kernels=use_kernels,
        checkpoint=_fingerprint(comm, opts, info, meta, loo)
        if opts["checkpoint"] is not None
        else None,
    )
    ids = meta["query_ids"].copy() if meta["query_ids"] is not None else None
    result = aggregate_result(
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
        binning=lambda counts: binning_pass(
            problem, counts, totals.counter, Ranks(comm, layout), record=totals.binning
        ),
        extra_config={
            "world_size": comm.world,
            # a Hamming code's length, as one process records it (its sides hold the codes)
            **(
                {"n_bits": next(i["n_bits"] for i in infos if i["n_bits"] is not None)}
                if req.similarity == "hamming"
                else {}
            ),
        },
        grouped_values=sharded_grouped_values(comm, problem, layout, loo),
    )
    result.self_matched = self_matched  # a gate refuses a result in which every query is one
    result.self_matched_all = every_self  # ... each with its own copy in the gallery
    return result


def _self_matches(
    comm: Comm, info: dict, own, rel, sides: Sides, loo: bool, fails: bool, similarity: str
) -> tuple[int, bool]:
    """:func:`.._stages.check_queries_in_gallery`, as one process runs it (the same
    warning, count and refusal). With a gallery, where no item is named by an id (one
    process does not check named items): more than one rank needs ids (:func:`_metadata`),
    so that is a group of one rank, which holds both sides whole. Leave-one-out is
    checked with ids too (a copy of the same rows stacked twice): over more than one
    rank on :func:`_row_summaries` of every item, all-gathered (24 bytes an item; the
    embeddings stay where they are)."""
    if similarity == "hamming" or (own.q_ids is not None and not loo):
        return 0, False  # codes coincide by design; named gallery items leave their ranking
    if comm.world == 1:  # the whole sets on this rank: the one-process check, on its arrays
        whole = Sides(info["Q"], info["G"], sides.n_q, sides.n_g, sides.d)
        return check_queries_in_gallery(whole, own, rel, every_fails=fails)
    if not loo:  # pragma: no cover - ids are required over more than one rank (_metadata)
        raise AssertionError("an unnamed sharded pass over more than one rank")
    width = 1 if sides.d == 1 else 3
    rows = comm.all_gather_varlen(_row_summaries(info["Q"], sides.d).ravel())
    summaries = rows.reshape(-1, width)
    whole = Sides(summaries, None, sides.n_q, sides.n_g, width)
    return check_queries_in_gallery(whole, own, rel, every_fails=fails)


def _row_summaries(x, d: int) -> np.ndarray:
    """Each row of ``x`` as the check of queries in the gallery reads it
    (:func:`.._stages.queries_in_gallery`): float64 values, -0.0 made 0.0, equal when
    every value is. Here: the first two values and the top 52 bits of the row's key
    (:func:`.._stages.row_keys`, an integer exact in float64), so rows equal in all
    three are equal rows but for a key collision (2**-52 a pair of rows with the same
    first two values: a warning or refusal too many, never one too few). One column
    where ``d`` is 1 (the value itself)."""
    n = int(x.shape[0])
    if d == 1:
        return np.asarray(as_numpy(x, "queries"), np.float64).reshape(n, 1) + 0.0
    out = np.empty((n, 3), np.float64)
    out[:, :2] = np.asarray(as_numpy(x[:, :2], "queries"), np.float64) + 0.0
    out[:, 2] = (row_keys(x, d) >> np.uint64(12)).astype(np.float64)
    return out


def _fingerprint(comm: Comm, opts: dict, info: dict, meta: dict, loo: bool) -> tuple:
    """(directory, fingerprint): every rank's shard content, the gathered metadata and
    the options that shape the pass, and the scores' definition."""

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
    version = _backend.SCORES_VERSION  # the running engine's (read at the call)
    return opts["checkpoint"], content_digest(digests, options, meta_digest, loo, version)


def sharded_pass(
    comm: Comm,
    info: dict,
    layout: Layout,
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
    unranked=None,
):
    """Plan, prepare and stream the sharded pass: the merged :class:`PassTotals` (the
    same on every rank), this rank's problem (for the binning pass) and the plan. ``info``:
    this rank's arrays (``Q``, ``G``: None in leave-one-out) and ``n_q``. ``device``: the
    rank's backend as its inputs' check resolved it (under the group's collectives).
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
    g0, g1 = layout.g_range(comm.rank)
    window = Window(g0, g1, layout.q_range(comm.rank)[0], n_q)
    ranks = Ranks(comm, layout)
    problem = prepare_problem(
        plan,
        info["Q"],
        None if loo else info["G"],
        n_g=n_g,
        similarity=similarity,
        source=source,
        self_pairs=self_pairs,
        window=window,
        reduce=ranks,
    )
    counter = select(plan.backend, similarity, source, use_kernels=use_kernels, sharded=True)
    store = None
    if checkpoint is not None and (query_specs or pair_specs):
        key = content_digest(checkpoint[1], plan.b, plan.c, plan.backend.kind, comm.world)
        store = Checkpoint(checkpoint[0], key, part=f"rank{comm.rank}of{comm.world}")
    totals = stream(
        problem,
        query_specs=query_specs,
        pair_specs=pair_specs,
        n_positive=int(n_relevant.sum()),
        ties=ties,
        progress=progress if comm.rank == 0 else False,
        relevance_level=relevance_level,
        counter=counter,
        reduce=ranks,
        store=store,
        unranked=unranked,
    )
    return totals, problem, plan


class _Remote:
    """Stands for the gallery in the global stages: it lives on the ranks."""

    shape = None


_REMOTE = _Remote()
