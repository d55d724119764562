"""Each query's best-ranked relevant item from one pass on validated inputs with
explicit relevance (image-text evaluation runs on this, fused or not)."""

from __future__ import annotations

import numpy as np

from ..metrics._names import parse_metric
from ._blocks import RelevanceSource
from ._inputs import (
    Csr,
)
from ._plan import plan_pass, prepare_problem
from ._stream import FirstRanks, stream

__all__ = ["first_relevant_ranks"]


def first_relevant_ranks(
    queries,
    gallery,
    relevance: Csr,
    *,
    similarity: str,
    device,
    max_memory,
    progress=None,
    _use_kernels: bool = True,
) -> tuple[FirstRanks, str]:
    """Each query's best-ranked relevant gallery item (rank 0 where none), from the
    plan, prepare and stream stages on already validated inputs with explicit relevance
    (no self pairs); and the backend's name. Image-text evaluation runs on this."""
    n_q, n_g, d = int(queries.shape[0]), int(gallery.shape[0]), int(queries.shape[1])
    own = Csr(np.zeros(n_q + 1, np.int64), np.zeros(0, np.int64))
    source = RelevanceSource(csr=relevance, self_pairs=own, n_g=n_g)
    plan = plan_pass(
        [queries, gallery],
        n_q=n_q,
        n_g=n_g,
        d=d,
        loo=False,
        n_relevant=np.diff(relevance.indptr),
        device=device,
        max_memory=max_memory,
    )
    problem = prepare_problem(
        plan, queries, gallery, n_g=n_g, similarity=similarity, source=source, self_pairs=own
    )
    totals = stream(
        problem,
        query_specs=[parse_metric("mrr")],
        pair_specs=[],
        n_positive=int(relevance.indices.size),
        progress=progress,
        use_kernels=_use_kernels,
    )
    return FirstRanks(
        totals.first_rank["pessimistic"],
        totals.first_rank["optimistic"],
        totals.first_group,
        totals.provenance(),
    ), plan.backend.name
