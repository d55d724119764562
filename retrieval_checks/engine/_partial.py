"""A block task's result (:class:`BlockPartial`) and how ranks follow from the counts.

Below every other module of the pass: the scored counters, the fused kernels, the
checkpoint store and the merge (:mod:`._stream`) all read and write this one record.
:class:`FirstRanks`, each query's best relevant item, is the record of the first-rank
passes (image-text, grouped recall, runs) and of their fused GPU kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..metrics import _ties
from ._inputs import Csr

__all__ = ["BlockPartial", "FirstRanks", "ranked_partial"]


@dataclass
class BlockPartial:
    """A task's result. Merging: concatenate the per-query parts in block order; add
    ``fixed_fp``; concatenate ``positives`` and feed ``negatives`` to one tail."""

    start: int
    stop: int
    indptr: np.ndarray  # block-local CSR over relevant items
    rank: np.ndarray  # 1-based pessimistic rank of each relevant item (tied negatives ahead)
    position: np.ndarray  # 0-based position among the row's relevant items, best first
    tied: np.ndarray  # non-relevant items with exactly its score (optimistic rank = rank - tied)
    positives: np.ndarray | None = None  # relevant-pair scores (float32)
    negatives: np.ndarray | None = None  # every negative >= negatives_tau
    negatives_tau: float = -math.inf
    fixed_fp: np.ndarray | None = None  # negatives >= each fixed threshold
    grade: np.ndarray | None = None  # graded relevance: each relevant item's grade (same order)
    score: np.ndarray | None = (
        None  # graded relevance: each relevant item's score (ties among them)
    )
    # what counted it (read by the pass's provenance): the counter's name, set by the
    # block task (_blocks.run_block), and the fused CPU pass's mode ("mirrored" /
    # "one-sided"), set by that counter on the partial it returns. Not stored by
    # checkpoints (a resumed block was counted by an earlier run).
    counter: str | None = None
    mode: str | None = None


def ranked_partial(
    start: int,
    stop: int,
    rel: Csr,
    rel_sorted,
    order: np.ndarray,
    above: np.ndarray,
    tied: np.ndarray,
    torch_path: bool,
) -> BlockPartial:
    """The block's ranks from the counts: ``above[t]`` non-relevant scores ``>=`` the
    ``t``-th relevant score (rows sorted ascending), ``tied[t]`` of them ``==`` it."""
    counts = rel.row_counts()
    rid = rel.row_ids()
    j = np.arange(rid.size, dtype=np.int64) - rel.indptr[:-1][rid]
    position = counts[rid] - 1 - j
    part = BlockPartial(start, stop, rel.indptr, 1 + position + above, position, tied)
    if rel.grades is not None:
        part.grade = rel.grades[order]
        part.score = rel_sorted.cpu().numpy() if torch_path else rel_sorted
    return part


@dataclass(frozen=True)
class FirstRanks:
    """Each query's best relevant item: its rank with tied non-relevant items ahead
    (``pessimistic``) and behind (``optimistic``), and ``group`` the relevant items tied
    with it; 0 ranks where a query has no relevant item. Under the average policy the
    first relevant rank is ``optimistic`` + X, X the number of tied non-relevant items
    (``pessimistic - optimistic``) that come before the first of the ``group`` relevant
    ones in a uniformly random order of the tie group."""

    pessimistic: np.ndarray
    optimistic: np.ndarray
    group: np.ndarray
    # the pass's record (a :class:`~._result.Provenance`) where a pass made these ranks
    provenance: object = field(default=None, compare=False, repr=False)

    def under(self, ties: str, k=None) -> np.ndarray:
        """Per query: the first relevant rank (``k`` None; its expectation under
        ``"average"``), or the hit indicator / probability that it is ``<= k``."""
        if ties in ("pessimistic", "optimistic"):
            r = getattr(self, ties)
            return r.astype(np.float64) if k is None else (r <= k).astype(np.float64)
        s = np.maximum(self.optimistic - 1, 0)
        t = self.pessimistic - self.optimistic
        r = np.maximum(self.group, 1)
        if k is None:
            return _ties.expected_first_rank(s, r, t)
        return _ties.hit_probability(s, r, t, k)
