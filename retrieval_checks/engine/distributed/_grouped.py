"""Grouped Recall@K over ``torch.distributed`` ranks (``grouped_recall@K`` in
``evaluate(..., process_group=g)``).

The partitions, the groups' units of work and their padded batches are planned from
the metadata alone (label codes, ids, the plan's memory room), so every rank plans the
same batches one process would. Each batch is then scored over the ranks, in the two
phases of the main pass: the batch's query rows are assembled on every rank (a max
all-reduce over -inf fillers, exact), each rank fills the gallery rows it owns (zeros
elsewhere) and computes the batch's products in the same padded shape as one process,
so its own pairs get the same bits; the best relevant score of every query is a max
all-reduce, and the counts (negatives above and tied, relevant items tied, candidates)
an int64 sum. Everything after the batches (group means, intervals, repeats) is
:mod:`.._grouped`'s, on the same numbers.
"""

from __future__ import annotations

import numpy as np

from .._grouped import batch_scores, count_batch, grouped_recall_values, record_hits
from .._stages import grouped_options

__all__ = ["sharded_grouped_values"]


def sharded_grouped_values(comm, sh, layout, loo: bool):
    """The ``grouped_values`` hook of :func:`.._stages.aggregate_result` for a sharded pass
    (``sh``: this rank's prepared problem, :class:`.._blocks.Problem` with its column window)."""

    def grouped(req, rel, own, plan, record=None) -> dict:
        specs = req.of_kind("grouped")
        if not specs:
            return {}
        be = sh.backend
        local = _LocalRows(comm, sh, layout, be)
        placeholder = np.zeros((0, sh.d), np.float32)
        factor = None if sh.qa is None else placeholder[:, 0]
        found = grouped_recall_values(
            placeholder,
            rel.q_codes,
            None if loo else placeholder,
            None if loo else rel.g_codes,
            **grouped_options(req, rel, own, plan, specs),
            q_factor=factor,
            g_factor=None if loo else factor,
            score_batch=local,
            record=record,
        )
        return {s.name: found[s.k] for s in specs}

    return grouped


class _LocalRows:
    """This rank's prepared rows on the host, by global position; called as the
    ``score_batch`` hook of :func:`.._grouped.score_groups` (:meth:`score_batch`)."""

    #: the path in ``result.provenance.grouped``: the numpy rule (:func:`.._grouped.count_batch`),
    #: each rank counting its columns (the record also says ``sharded``)
    name = "grouped-numpy"

    def __init__(self, comm, sh, layout, be):
        self.comm = comm
        self.q0, self.q1 = layout.q_range(comm.rank)
        self.g0, self.g1 = sh.g0, sh.g1
        self.codes = sh.similarity == "hamming"  # 64-bit code words (uint64), else float32 rows
        host = (
            (lambda x: np.ascontiguousarray(be.to_numpy(x)).view(np.uint64))
            if self.codes
            else (lambda x: np.asarray(be.to_numpy(x), np.float32))
        )
        self.Q = host(sh.Q)
        self.qa = None if sh.qa is None else np.asarray(be.to_numpy(sh.qa), np.float32)
        off = sh.g0 - sh.k0 * sh.c
        self.G = host(sh.Gp[off : off + (sh.g1 - sh.g0)])
        self.ga = (
            None
            if sh.ga is None
            else np.asarray(be.to_numpy(sh.ga[off : off + (sh.g1 - sh.g0)]), np.float32)
        )

    def score_batch(self, units, q_side, g_side, mq, mg, similarity, ks, hits, candidates):
        """:func:`.._grouped._score_batch` over the ranks, step for step: assemble, score,
        count this rank's columns by the one rule (:func:`.._grouped.count_batch`, the
        best relevant score a max over the ranks), sum the counts, record."""
        (_, q_codes, q_ids, _), (_, g_codes, g_ids, _) = q_side, g_side
        B, d = len(units), self.Q.shape[1]
        Qb = (
            np.zeros((B, mq, d), np.uint64)
            if self.codes
            else np.full((B, mq, d), -np.inf, np.float32)
        )
        Gb = np.zeros((B, mg, d), self.G.dtype)
        qf = np.full((B, mq), -np.inf, np.float32) if self.qa is not None else None
        gf = np.zeros((B, mg), np.float32) if self.ga is not None else None
        qc, gc = np.full((B, mq), -1, np.int64), np.full((B, mg), -2, np.int64)
        qidx, gidx = np.full((B, mq), -1, np.int64), np.full((B, mg), -1, np.int64)
        qid, gid = np.full((B, mq), -3, np.int64), np.full((B, mg), -4, np.int64)
        mine = np.zeros((B, mg), bool)  # gallery columns this rank owns
        for t, (qi, gi) in enumerate(units):
            own_q = (qi >= self.q0) & (qi < self.q1)
            Qb[t, : qi.size][own_q] = self.Q[qi[own_q] - self.q0]
            if qf is not None:
                qf[t, : qi.size][own_q] = self.qa[qi[own_q] - self.q0]
            own_g = (gi >= self.g0) & (gi < self.g1)
            Gb[t, : gi.size][own_g] = self.G[gi[own_g] - self.g0]
            if gf is not None:
                gf[t, : gi.size][own_g] = self.ga[gi[own_g] - self.g0]
            mine[t, : gi.size] = own_g
            qc[t, : qi.size], gc[t, : gi.size] = q_codes[qi], g_codes[gi]
            qidx[t, : qi.size], gidx[t, : gi.size] = qi, gi
            qid[t, : qi.size], gid[t, : gi.size] = q_ids[qi], g_ids[gi]
        if self.codes:  # one owner per row, zeros elsewhere: an integer sum is exact
            Qb = self.comm.all_reduce(Qb.view(np.int64), "sum").view(np.uint64)
        else:  # every query row from its owner, exactly (-0.0 kept: a max over -inf fillers)
            Qb = self.comm.all_reduce(Qb, "max")
            Qb[np.isneginf(Qb)] = 0.0  # padding rows
        if qf is not None:
            qf = self.comm.all_reduce(qf, "max")
            qf[np.isneginf(qf)] = 0.0
        S = batch_scores(Qb, Gb, qf, gf, similarity)
        has, *counts = count_batch(
            S,
            qc,
            gc,
            qid,
            gid,
            qidx,
            gidx,
            mine=mine,
            reduce_best=lambda best: self.comm.all_reduce(best, "max"),
        )
        above, tied, group, n_valid = self.comm.all_reduce(np.stack(counts).astype(np.int64), "sum")
        record_hits(qidx, has, above, tied, group, n_valid, ks, hits, candidates)

    __call__ = score_batch
