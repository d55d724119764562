"""The tie-policy fan-out and the metric-list parsing, once for both paths (``evaluate``'s
blocks and ``evaluate_run``'s rankings).

Per query-level metric, a pass keeps its per-query value under the chosen policy and
under the four kinds of :attr:`EvaluationResult.tie_values`: ``pessimistic`` and
``optimistic`` (the two policies), ``min`` and ``max`` (the extremes over every order of
tied items: the two policies for metrics monotone in the ranks, computed apart for
``map@K``, which is not). :func:`binary_policy_values` computes all five from the
relevant items' ranks (the layout of :func:`._ranking.per_query_values`).
"""

from __future__ import annotations

import numpy as np

from ..errors import MetricNameError
from . import _ties
from ._names import MetricSpec, parse_metric
from ._ranking import per_query_values

__all__ = ["KINDS", "GRADED", "binary_policy_values", "parse_metric_list"]

#: The kinds of ``tie_values``, besides the chosen policy's ``"chosen"``.
KINDS = ("pessimistic", "optimistic", "min", "max")

#: The families computed with the grades themselves (the relevance level is the binary
#: metrics'): under ``empty_queries="zero"`` a query without an item of the level keeps
#: their value where it has one, as trec_eval's ``-l``.
GRADED = ("ndcg", "ndcg_exp", "dcg", "dcg_exp")


def binary_policy_values(
    specs, rid, position, rank, tied, n_relevant, ties: str, chosen_rank=None, n_ranked=None
) -> dict[str, dict[str, np.ndarray]]:
    """``{"chosen" and each of KINDS: {name: per-query values}}`` of the binary metrics in
    ``specs``; ``rank`` is each relevant item's pessimistic rank, ``tied`` the
    non-relevant items tied with it. ``chosen_rank``: ``(rid, position, rank)`` of the
    relevant items in an order without ties (``ties="docid"``), which gives "chosen".
    ``n_ranked``: the items of each row's ranking, all judged (``bpref``, ``rbp_residual``)."""
    if not specs:
        return {kind: {} for kind in ("chosen", *KINDS)}
    if chosen_rank is None and ties not in ("pessimistic", "optimistic", "average"):
        raise ValueError(f"ties={ties!r} needs the untied ranks (chosen_rank)")  # a caller's bug
    pess = per_query_values(specs, rid, position, rank, n_relevant, n_ranked)
    opt = per_query_values(specs, rid, position, rank - tied, n_relevant, n_ranked)
    if chosen_rank is not None:
        chosen = per_query_values(specs, *chosen_rank, n_relevant, n_ranked)
    elif ties == "average":
        chosen = _ties.expected_per_query_values(
            specs, rid, position, rank, tied, n_relevant, n_ranked
        )
    else:
        chosen = pess if ties == "pessimistic" else opt
    lo, hi = {}, {}
    for s in specs:
        if s.family == "map" and s.k is not None:
            lo[s.name], hi[s.name] = _ties.map_at_k_extremes(
                rid, position, rank, tied, n_relevant, s.k
            )
        else:
            lo[s.name] = np.fmin(pess[s.name], opt[s.name])
            hi[s.name] = np.fmax(pess[s.name], opt[s.name])
    return {"chosen": chosen, "pessimistic": pess, "optimistic": opt, "min": lo, "max": hi}


def parse_metric_list(metrics, example: str) -> list[MetricSpec]:
    """The specs of ``metrics`` (a name or a list of names), each once, in order; an empty
    or non-list value is a :class:`MetricNameError` (``example``: a list to suggest)."""
    if isinstance(metrics, str):
        metrics = [metrics]
    try:
        metrics = list(metrics) if metrics is not None else []
    except TypeError:
        raise MetricNameError(
            f"metrics must be a name or a list of names, got {type(metrics).__name__}.", name=""
        ) from None
    if not metrics:
        raise MetricNameError(
            f"metrics is empty: name at least one metric, e.g. metrics={example}.", name=""
        )
    specs: dict[str, MetricSpec] = {}
    for m in metrics:
        s = parse_metric(m)
        specs.setdefault(s.name, s)
    return list(specs.values())
