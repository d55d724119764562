"""The streamed pass: run the block tasks and merge their partial results.

A pass runs :func:`~retrieval_checks.engine._blocks.run_block` over the query blocks
and merges each :class:`~retrieval_checks.engine._blocks.BlockPartial` into
:class:`PassTotals`: per-query metric values and first relevant ranks by position,
positive-pair scores by concatenation, negative tails by :class:`NegativeTail`'s merge
and fixed-threshold counts by addition. Partials merge in any order, which is what
lets blocks run anywhere.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from ..metrics._names import MetricSpec
from ..metrics._pairs import NegativeTail, PairCounts, ceil_f32, tail_capacity
from ..metrics._ranking import per_query_values
from ..errors import InputError
from ._blocks import BlockPartial, Problem, plan_blocks, run_binning_block, run_block

__all__ = ["PassTotals", "stream", "binning_pass", "progress_bar"]

_FIXED = ("pair_precision", "pair_recall", "pair_f1")


def progress_bar(enabled, total: int, desc: str = "retrieval-checks", unit: str = "block"):
    """A tqdm bar, or None: by default only on a terminal and for more than 8 steps."""
    if enabled is None:
        enabled = total > 8 and sys.stderr.isatty()
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=False)


class PassTotals:
    """The merged results of a pass's blocks."""

    def __init__(self, n_q: int, query_specs: list[MetricSpec], pair_specs: list[MetricSpec], n_positive: int):
        self.query_specs = query_specs
        self.per_query = {s.name: np.full(n_q, np.nan) for s in query_specs}
        self.first_rank = np.zeros(n_q, np.int64)
        self.want_pairs = bool(pair_specs)
        self.positives: list[np.ndarray] = []
        self.tail = NegativeTail(tail_capacity(pair_specs, n_positive)) if self.want_pairs else None
        self.fixed = sorted({float(s.level) for s in pair_specs if s.family in _FIXED})
        self.fixed_f32 = np.array([ceil_f32(t) for t in self.fixed], np.float32)
        self.fixed_fp = np.zeros(len(self.fixed), np.int64)

    def add(self, part: BlockPartial) -> None:
        """Merge one block's partial result."""
        start, stop = part.start, part.stop
        counts = np.diff(part.indptr)
        rid = np.repeat(np.arange(stop - start, dtype=np.int64), counts)
        for name, v in per_query_values(self.query_specs, rid, part.position, part.rank, counts).items():
            self.per_query[name][start:stop] = v
        best = part.position == 0
        self.first_rank[start + rid[best]] = part.rank[best]
        if self.want_pairs:
            self.positives.append(part.positives)
            self.tail.add(part.negatives, part.negatives_tau)
            if part.fixed_fp is not None:
                self.fixed_fp += part.fixed_fp

    def pair_counts(self, n_negative: int) -> PairCounts:
        """What the pair metrics need, once every block has been merged."""
        return PairCounts(positives=np.sort(np.concatenate(self.positives)), n_negative=n_negative, tail=self.tail,
                          fixed_fp={t: int(fp) for t, fp in zip(self.fixed, self.fixed_fp)})


def stream(problem: Problem, *, query_specs: list[MetricSpec], pair_specs: list[MetricSpec], n_positive: int,
           progress=None, use_kernels: bool = True) -> PassTotals:
    """Run every query block of ``problem`` and merge the partial results."""
    if pair_specs and n_positive == 0:
        raise InputError("Pair metrics need at least one relevant (positive) pair; none was found.")
    totals = PassTotals(problem.n_q, query_specs, pair_specs, n_positive)
    blocks = plan_blocks(problem.n_q, problem.b) if (query_specs or pair_specs) else []
    bar = progress_bar(progress, len(blocks))
    try:
        with problem.backend.exact_matmul():
            for start, stop in blocks:
                totals.add(run_block(
                    problem, start, stop, want_pairs=totals.want_pairs,
                    tail_tau=totals.tail.tau if totals.tail is not None else -math.inf,
                    fixed_thresholds=totals.fixed_f32, use_kernels=use_kernels,
                    tail_capacity=totals.tail.capacity if totals.tail is not None else None,
                ))
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return totals


def binning_pass(problem: Problem, counts: PairCounts, use_kernels: bool = True) -> np.ndarray:
    """Negatives at or above every unique positive score, from a second pass."""
    u = counts.unique_positives()
    hist = np.zeros(u.size + 1, np.int64)
    with problem.backend.exact_matmul():
        for start, stop in plan_blocks(problem.n_q, problem.b):
            run_binning_block(problem, start, stop, u, hist, use_kernels)
    # negatives >= u[t] are those with more than t positives <= them
    return np.cumsum(hist[::-1])[::-1][1:]
