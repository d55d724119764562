"""The streamed pass: run the block tasks and merge their partial results.

A pass runs :func:`~retrieval_checks.engine._blocks.run_block` over the query blocks
and merges each :class:`~retrieval_checks.engine._partial.BlockPartial` into
:class:`PassTotals`: per-query metric values and first relevant ranks by position,
positive-pair scores by concatenation, negative tails by :class:`NegativeTail`'s merge
and fixed-threshold counts by addition. Partials merge in any order, which is what
lets blocks run anywhere.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..errors import InputError
from ..metrics._graded import binary_view, graded_ndcg_values
from ..metrics._names import MetricSpec
from ..metrics._pairs import NegativeTail, PairCounts, ceil_f32, score_units, tail_capacity
from ..metrics._policies import binary_policy_values
from ._blocks import Problem, block_rows, plan_blocks, run_binning_block, run_block
from ._counting import PairRequest, select
from ._executor import executor_parts
from ._partial import BlockPartial, FirstRanks
from ._reduce import LOCAL
from ._result import Provenance

__all__ = [
    "FirstRanks",
    "PassTotals",
    "Unranked",
    "each_block",
    "stream",
    "binning_pass",
    "progress_bar",
]

_FIXED = ("pair_precision", "pair_recall", "pair_f1")


def progress_bar(
    enabled, total: int, desc: str = "retrieval-checks", unit: str = "block", steps=None
):
    """A tqdm bar, or None: by default only on a terminal and for more than 8 steps
    (``steps``; default ``total``)."""
    if enabled is None:
        enabled = (total if steps is None else steps) > 8 and sys.stderr.isatty()
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=False)


_NDCG = ("ndcg", "ndcg_exp", "dcg", "dcg_exp")  # computed with the grades when there are some


@dataclass(frozen=True)
class Unranked:
    """Relevant items the ranking leaves out (BEIR's ``ignore_identical_ids``: a query's
    own item): they count in R and in the ideal DCG, never at a rank. ``counts``: per
    query, those of grade >= the relevance level; ``rows`` (ascending) and ``grades``
    (None with binary relevance): each one's query and grade."""

    counts: np.ndarray
    rows: np.ndarray
    grades: np.ndarray | None

    def block(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """The block's items: rows relative to ``start``, and grades (1 when binary)."""
        a, b = np.searchsorted(self.rows, [start, stop])
        grades = np.ones(b - a) if self.grades is None else self.grades[a:b]
        return self.rows[a:b] - start, grades


class _Items(NamedTuple):
    """The relevant items of a block as the metrics read them (see BlockPartial)."""

    rid: np.ndarray
    position: np.ndarray
    rank: np.ndarray  # pessimistic
    tied: np.ndarray
    counts: np.ndarray  # relevant items per row


class PassTotals:
    """The merged results of a pass's blocks.

    ``per_query`` holds each query's value under the pass's tie policy; ``tie_values``
    the same under the pessimistic and optimistic orderings and, as ``"min"`` and
    ``"max"``, the extremes over every ordering of tied items (the two policies for
    metrics monotone in rank; computed apart for ``map@K``, which is not).
    ``first_rank`` (pessimistic and optimistic) and ``first_group`` (relevant items
    tied with the best one) describe each query's best relevant item; ``n_tied`` counts
    relevant items tied with at least one non-relevant item. :meth:`provenance`: which
    counter counted the merged blocks (each block names it, :func:`._blocks.run_block`),
    how many each, and the blocks a checkpoint gave back."""

    def __init__(
        self,
        n_q: int,
        query_specs: list[MetricSpec],
        pair_specs: list[MetricSpec],
        n_positive: int,
        ties: str = "pessimistic",
        similarity: str = "dot",
        relevance_level: float = 1,
        unranked: Unranked | None = None,
    ):
        self.query_specs = query_specs
        self.relevance_level = relevance_level
        self.unranked = unranked
        self.units = score_units(similarity)
        self.ties = ties
        self.per_query = {s.name: np.full(n_q, np.nan) for s in query_specs}
        self.tie_values = {
            kind: {s.name: np.full(n_q, np.nan) for s in query_specs}
            for kind in ("pessimistic", "optimistic", "min", "max")
        }
        self.first_rank = {
            "pessimistic": np.zeros(n_q, np.int64),
            "optimistic": np.zeros(n_q, np.int64),
        }
        self.first_group = np.zeros(n_q, np.int64)
        self.n_tied = 0
        self.n_relevant = 0
        self.want_pairs = bool(pair_specs)
        self.positives: list[np.ndarray] = []
        self.tail = NegativeTail(tail_capacity(pair_specs, n_positive)) if self.want_pairs else None
        # ascending in the engine's scores (the kernels bin against them); for neg_l2 and
        # hamming that is not the order of the levels users write
        levels = {s.level_fraction for s in pair_specs if s.family in _FIXED}  # exact, as written
        self.fixed = sorted(levels, key=lambda t: (float(ceil_f32(self.units.to_score(t))), t))
        self.fixed_f32 = np.array(
            [ceil_f32(self.units.to_score(t)) for t in self.fixed], np.float32
        )
        self.fixed_fp = np.zeros(len(self.fixed), np.int64)
        self.counter = None  # the pass's counter (set by stream)
        self.counted: dict[str, int] = {}  # counter name -> blocks it counted (merged here)
        self.modes: dict[str, int] = {}  # the fused CPU pass's mode -> its blocks
        self.binning: dict[str, int] = {}  # the binning pass's counter -> its blocks
        self.resumed = 0  # blocks a checkpoint gave back
        self.sharded = False
        self.grouped: dict[str, int] = {}  # grouped recall's path -> partitions it scored
        # the items of each query's ranking, every one judged (bpref; set by stream)
        self.n_ranked: np.ndarray | None = None

    def add(self, part: BlockPartial, resumed: bool = False) -> None:
        """Merge one block's partial result (``resumed``: a checkpoint gave it back)."""
        start, stop = part.start, part.stop
        if resumed:
            self.resumed += 1
        elif part.counter is None:  # never claim a counter nobody recorded
            raise RuntimeError(
                f"the block of queries [{start}, {stop}) names no counter: every block task goes "
                "through _blocks.run_block, which records the counter that counted it"
            )
        else:
            self.counted[part.counter] = self.counted.get(part.counter, 0) + 1
            if part.mode is not None:
                self.modes[part.mode] = self.modes.get(part.mode, 0) + 1
        counts = np.diff(part.indptr)
        rid = np.repeat(np.arange(stop - start, dtype=np.int64), counts)
        view = _Items(rid, part.position, part.rank, part.tied, counts)
        if part.grade is not None and self.relevance_level > 1:
            view = _Items(
                *binary_view(
                    rid,
                    part.score,
                    part.grade,
                    part.rank,
                    part.tied,
                    part.position,
                    stop - start,
                    self.relevance_level,
                )
            )
        if self.unranked is not None:  # relevant, not ranked: in R only
            view = view._replace(counts=view.counts + self.unranked.counts[start:stop])
        self._add_values(part, view)
        if part.grade is not None:
            self._add_graded(part, rid, view.counts)
        rid, position, rank, tied = view.rid, view.position, view.rank, view.tied
        best = position == 0
        self.first_rank["pessimistic"][start + rid[best]] = rank[best]
        self.first_rank["optimistic"][start + rid[best]] = rank[best] - tied[best]
        # relevant items in the best one's tie group: same count of negatives >= it, and tied
        key = rank - position
        best_key = np.zeros(stop - start, np.int64)
        best_tied = np.zeros(stop - start, np.int64)
        best_key[rid[best]] = key[best]
        best_tied[rid[best]] = tied[best]
        same = (key == best_key[rid]) & (tied == best_tied[rid])
        self.first_group[start:stop] = np.bincount(
            rid, weights=same, minlength=stop - start
        ).astype(np.int64)
        self.n_tied += int((tied > 0).sum())
        self.n_relevant += int(tied.size)
        if self.want_pairs:
            self.positives.append(part.positives)
            self.tail.add(part.negatives, part.negatives_tau)
            if part.fixed_fp is not None:
                self.fixed_fp += part.fixed_fp

    def _add_values(self, part: BlockPartial, view: "_Items") -> None:
        start, stop = part.start, part.stop
        specs = [s for s in self.query_specs if part.grade is None or s.family not in _NDCG]
        rid, position, rank, tied, counts = view
        ranked = None if self.n_ranked is None else self.n_ranked[start:stop]
        by = binary_policy_values(
            specs, rid, position, rank, tied, counts, self.ties, n_ranked=ranked
        )
        for spec in specs:
            name = spec.name
            self._store(
                name,
                start,
                stop,
                *(by[kind][name] for kind in ("chosen", "pessimistic", "optimistic", "min", "max")),
            )

    def _add_graded(self, part: BlockPartial, rid: np.ndarray, counts: np.ndarray) -> None:
        """nDCG with the grades, over every item of grade > 0 (trec_eval: the relevance
        level is the binary metrics'); a query without an item of the level is empty, and
        the empty-query policy (skip: left out; zero: nDCG keeps its graded value) is
        applied with the other metrics'."""
        specs = [s for s in self.query_specs if s.family in _NDCG]
        if not specs:
            return
        start, stop = part.start, part.stop
        judged = None  # the ideal DCG: the ranked items, and those left out of the ranking
        if self.unranked is not None:
            rows, grades = self.unranked.block(start, stop)
            judged = (np.concatenate([rid, rows]), np.concatenate([part.grade, grades]))
        by = graded_ndcg_values(
            specs,
            rid,
            part.score,
            part.grade,
            part.rank,
            part.tied,
            part.position,
            stop - start,
            judged,
        )
        for spec in specs:  # a query without an item of the level: the empty-query policy decides
            name = spec.name
            pess, opt, avg = (by[p][name].copy() for p in ("pessimistic", "optimistic", "average"))
            chosen = {"pessimistic": pess, "optimistic": opt, "average": avg}[self.ties]
            self._store(
                name, start, stop, chosen, pess, opt, np.fmin(pess, opt), np.fmax(pess, opt)
            )

    def _store(self, name, start, stop, chosen, pess, opt, lo, hi) -> None:
        self.per_query[name][start:stop] = chosen
        self.tie_values["pessimistic"][name][start:stop] = pess
        self.tie_values["optimistic"][name][start:stop] = opt
        self.tie_values["min"][name][start:stop] = lo
        self.tie_values["max"][name][start:stop] = hi

    def provenance(self) -> Provenance:
        """What counted the blocks merged so far (and the binning pass's, and the paths
        that scored grouped recall's partitions)."""
        return Provenance(
            self.counted, self.modes, self.binning, self.resumed, self.sharded, self.grouped
        )

    def pair_request(self) -> PairRequest | None:
        """What the next block computes for the pair metrics (None: no pair metric)."""
        if not self.want_pairs:
            return None
        return PairRequest(self.tail.tau, self.fixed_f32, self.tail.capacity)

    def pair_counts(self, n_negative: int) -> PairCounts:
        """What the pair metrics need, once every block has been merged."""
        return PairCounts(
            positives=np.sort(np.concatenate(self.positives)),
            n_negative=n_negative,
            tail=self.tail,
            fixed_fp={t: int(fp) for t, fp in zip(self.fixed, self.fixed_fp)},
            units=self.units,
        )


def stream(
    problem: Problem,
    *,
    query_specs: list[MetricSpec],
    pair_specs: list[MetricSpec],
    n_positive: int,
    ties: str = "pessimistic",
    progress=None,
    use_kernels: bool = True,
    relevance_level: float = 1,
    counter=None,
    reduce=LOCAL,
    store=None,
    executor=None,
    unranked: Unranked | None = None,
) -> PassTotals:
    """Run every query block of ``problem`` and merge the partial results; per-query
    values follow the tie policy ``ties``; with graded relevance, binary metrics count
    grades >= ``relevance_level``.

    The one loop of every pass: ``counter`` counts a block (default:
    :func:`._counting.select`'s choice), ``reduce`` joins the ranks' states (a sharded
    pass; default the identity), ``store`` (a :class:`~._checkpoint.Checkpoint`) gives
    back the leading finished blocks and keeps each new one, and ``executor`` runs the
    rest as tasks (:mod:`._executor`), merged in block order. ``unranked``: relevant
    items outside the ranking (:class:`Unranked`), counted in each query's R."""
    if pair_specs and n_positive == 0:
        raise InputError("Pair metrics need at least one relevant (positive) pair; none was found.")
    if counter is None:
        counter = select(
            problem.backend,
            problem.similarity,
            problem.relevant,
            use_kernels=use_kernels,
            sharded=not reduce.local,
        )
    totals = PassTotals(
        problem.n_q,
        query_specs,
        pair_specs,
        n_positive,
        ties,
        problem.similarity,
        relevance_level,
        unranked,
    )
    totals.counter = counter  # the binning pass counts with it too
    totals.sharded = not reduce.local
    # each query ranks the gallery less its own items (self-exclusion, identical ids)
    totals.n_ranked = problem.n_g - problem.self_pairs.row_counts()
    # checkpointed and executor blocks are the plan's (a checkpoint's files are keyed by them)
    fixed = store is not None or executor is not None
    blocks = []
    if query_specs or pair_specs:  # else nothing to plan (grouped recall alone: no pass)
        rows = problem.b if fixed else block_rows(problem, counter, totals.want_pairs)
        blocks = plan_blocks(problem.n_q, rows)
    done = 0
    if store is not None and blocks:
        done = int(reduce("finished", np.array([store.finished(blocks)], np.int64))[0])
        for start, stop in blocks[:done]:
            totals.add(store.load(start, stop), resumed=True)
    if executor is not None:
        parts = executor_parts(executor, problem, counter, blocks[done:])
    else:
        parts = (
            run_block(problem, start, stop, counter, reduce, totals.pair_request())
            for start, stop in each_block(problem, blocks[done:])
        )
    # counted in queries (shown by default for more than 8 of the plan's blocks): a fused
    # counter that runs every query in one task reports its panels as they finish
    bar = progress_bar(
        progress, problem.n_q, unit="query", steps=len(plan_blocks(problem.n_q, problem.b))
    )
    reporter = None  # (an executor's tasks take the counter elsewhere: blocks only)
    if bar is not None and executor is None and getattr(counter, "fused", False):
        reporter = _Rows(bar)
    if reporter is not None:
        counter.progress = reporter
    try:
        rows = sum(stop - start for start, stop in blocks[:done])
        if bar is not None and rows:
            bar.update(rows)
        for part in parts:
            totals.add(part)
            if store is not None:
                store.save(part)
            rows += part.stop - part.start
            if bar is not None:
                with _Rows.lock:  # what the counter did not report itself
                    bar.update(max(0, rows - bar.n))
    finally:
        parts.close()
        if reporter is not None:
            counter.progress = None
        if bar is not None:
            bar.close()
    return totals


class _Rows:
    """A fused counter's progress hook (``counter.progress``): ``rows`` query rows done,
    called from its worker threads, added to the pass's bar."""

    lock = threading.Lock()

    def __init__(self, bar):
        self.bar = bar

    def __call__(self, rows: int) -> None:
        with self.lock:
            self.bar.update(rows)


def each_block(
    problem: Problem, blocks: list[tuple[int, int]], progress=False, desc: str = "retrieval-checks"
):
    """The query blocks ``[start, stop)`` of a pass, run under the backend's exact
    (non-TF32) matmul and counted on a progress bar (see :func:`progress_bar`)."""
    bar = progress_bar(progress, len(blocks), desc)
    try:
        with problem.backend.exact_matmul():
            for start, stop in blocks:
                yield start, stop
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()


def binning_pass(
    problem: Problem, counts: PairCounts, counter, reduce=LOCAL, record: dict | None = None
) -> np.ndarray:
    """Negatives at or above every unique positive score, from a second pass (over
    every rank: ``reduce``'s ``bins``); ``record`` (a pass's :attr:`PassTotals.binning`)
    counts the blocks each counter binned."""
    u = counts.unique_positives()
    hist = np.zeros(u.size + 1, np.int64)
    for start, stop in each_block(
        problem, plan_blocks(problem.n_q, block_rows(problem, counter, binning=True))
    ):
        name = run_binning_block(problem, start, stop, counter, u, hist, reduce)
        if record is not None:
            record[name] = record.get(name, 0) + 1
    hist = reduce("bins", hist)
    # negatives >= u[t] are those with more than t positives <= them
    return np.cumsum(hist[::-1])[::-1][1:]
