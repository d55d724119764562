"""Grouped Recall@K ("Catching Image Retrieval Generalization", Zhdanov & Karpukhin).

Definition. The labels are split into groups of exactly S labels by a seeded random
partition: the sorted distinct labels are permuted with
``numpy.random.default_rng(seed).permutation``; consecutive runs of S labels form the
r = floor(L / S) groups; the L mod S labels left over are dropped and reported. In
each group, ``hit_rate@K`` is evaluated on the items whose labels are in the group
only: leave-one-out inside the group, or the queries restricted to the group ranking
the gallery restricted to the group. The group's value is the mean over its queries
that have a relevant item (others are counted as skipped). Grouped Recall@K is the
mean of the r group values.

Interval. Group values are independent and identically distributed (disjoint label
sets drawn at random), so by the central limit theorem the mean has standard error
s / sqrt(r), s the sample standard deviation of the group values. The interval is
mean +- t_{r-1, (1+c)/2} * s / sqrt(r): Student's t rather than the normal quantile,
which is slightly wider for few groups and the same for many; clipped to [0, 1], the
metric's range (which cannot lower its coverage). Fewer than two groups give no
interval (an error says so). Where every group's value is 0 or 1 (a partition's
groups all perfect, say), s can be 0 and the t interval [1, 1]; the interval is then
widened to the exact binomial (Clopper-Pearson) interval of k of r groups at 1 (a
group's value is 1 with probability at most its mean, so k of r groups at 1 bound the
mean as k successes of r trials would): 2 perfect groups give [0.16, 1], not [1, 1].
Equal values inside (0, 1) still give a zero-width interval: that is what the t
interval says from such a sample, and a reason to use more groups, not evidence of
certainty.

Queries without a relevant item inside their group follow ``empty_queries``: skipped
(counted in ``n_queries_skipped``), an error, or scored 0. Queries whose label was
dropped from the partition are counted in ``n_queries_dropped``.

Repeated partitions (``repeats`` > 1). Each repeat uses seed, seed + 1, ... The value
is the mean of the per-partition values (it averages out the luck of one partition).
The partitions reuse the same items, so their values are strongly correlated and the
standard error does not shrink like 1/sqrt(repeats); the reported standard error is
the mean of the per-partition standard errors, which is never smaller than the true
standard error of the averaged value (the standard deviation of a mean of correlated
variables is at most the mean of their standard deviations), so the interval stays
conservative.

Cost. Each group is compared with its own items only: about n * n / r similarity
products instead of n * n (r groups), O(n x items per group). The host pass
(:func:`score_groups`) has no Python step per group: the units (a group's queries
against its gallery) are planned as spans of the items in group order, bucketed by their
padded shape, and each batch of one shape is gathered, multiplied (``np.matmul``, one
BLAS thread per product over worker threads where that gives BLAS's own bits), and
counted in one compiled pass (:mod:`._grouped_numba`; :func:`count_batch` is the same
rule in numpy). At 1M items x 128, S = 10 (10,000 groups of 100) this took the pass from
525 s to seconds on the loaded 2-core machine (docs/explanation/benchmarks.md).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import EmptyQueriesError, InputError
from ..metrics._binomial import binomial_floor
from ._backend import Backend
from ._hamming import hamming_into
from ._partial import FirstRanks
from .counting import _kernels

__all__ = [
    "GroupData",
    "GroupedRecall",
    "PATHS",
    "batch_scores",
    "count_batch",
    "label_partition",
    "grouped_recall_values",
    "plan_batches",
    "record_hits",
    "score_groups",
]


@dataclass(frozen=True)
class GroupedRecall:
    """Everything behind one ``grouped_recall@K`` value.

    ``group_values`` has one row per repeat and one column per group; ``per_query``
    holds each query's hit (0/1) in its group for the first partition (NaN for
    queries in no group or without a relevant item in their group).

    Built by :func:`~retrieval_checks.evaluate` (``result.grouped[name]``); read, not
    constructed, by users.

    Parameters
    ----------
    k:
        The K of ``grouped_recall@K``.
    value:
        The mean of the group values (over partitions).
    low, high, confidence:
        Student t's interval over the groups, clipped to [0, 1], and its confidence.
    std_error:
        The standard error of ``value``: ``spread / sqrt(n_groups)``.
    group_std:
        The spread of the first partition's group values.
    n_groups, group_size:
        r groups of S labels.
    seed, repeats:
        The partition's seed and the number of partitions averaged.
    group_values:
        (repeats x r): each group's recall.
    dropped_labels:
        The labels left out of the partition (fewer than S left over).
    n_queries_used, n_queries_skipped, n_queries_dropped:
        Queries counted, skipped (no relevant item inside their group) and dropped
        (their label was left out).
    per_query:
        Each query's hit (0/1) in its group, first partition (NaN: not counted).
    group_of_query:
        Each query's group index (-1: dropped).
    tie_values:
        The value under each tie order, and its min / max over every order.
    certain_k:
        The smallest K at which every counted query hits whatever the model: K past
        every non-relevant item of the query's group (its candidates less its relevant
        items, plus one), the largest over the queries and partitions; the value is 1
        (every counted query's hit certain) at any K from it on, and a gate on it could
        never fail (the gates refuse it: ``gates._assertions.certain_k``). None where
        unknown.

    Raises
    ------
    None
        A plain frozen record; :func:`~retrieval_checks.evaluate` checks the options.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> centres, y = rng.normal(size=(60, 16)), np.repeat(np.arange(60), 4)
    >>> x = centres[y] + 0.6 * rng.normal(size=(240, 16))
    >>> res = rc.evaluate(x, query_labels=y, metrics=["grouped_recall@1"], group_size=10)
    >>> g = res.grouped["grouped_recall@1"]
    >>> g.n_groups, g.group_size, round(g.value, 4), round(g.low, 4), round(g.std_error, 4)
    (6, 10, 0.9583, 0.8829, 0.0293)
    >>> g.group_values
    array([[0.925, 1.   , 0.825, 1.   , 1.   , 1.   ]])
    """

    k: int
    value: float
    low: float
    high: float
    confidence: float
    std_error: float
    group_std: float  # spread s of the group values (first partition; ``spread``: the mean over partitions)
    n_groups: int  # r
    group_size: int  # S
    seed: int
    repeats: int
    group_values: np.ndarray
    dropped_labels: np.ndarray
    n_queries_used: int
    n_queries_skipped: int  # in a group, but no relevant item inside it (empty_queries="skip")
    n_queries_dropped: int  # their label was left out of the partition
    per_query: np.ndarray = field(repr=False)
    group_of_query: np.ndarray = field(repr=False)  # group index per query (-1: dropped)
    #: the value under the pessimistic and optimistic tie orders, and its min / max over
    #: every order (grouped recall is monotone in rank: the two policies)
    tie_values: dict = field(default_factory=dict, repr=False)
    #: the smallest K past every non-relevant item of every counted query's group, over the
    #: partitions (None: unknown, e.g. a result pickled before the field)
    certain_k: int | None = None

    @property
    def interval(self) -> tuple[float, float]:
        return (self.low, self.high)

    @property
    def spread(self) -> float:
        """The spread s the reported ``std_error`` stands for: the mean over the
        partitions of the group values' sample standard deviation, so that
        ``std_error == spread / sqrt(n_groups)`` (``group_std`` is the first
        partition's alone: the same with one partition)."""
        return float(np.mean(self.group_values.std(axis=1, ddof=1)))


def label_partition(labels, group_size: int, seed: int):
    """The seeded partition: (groups as an (r x S) array of labels, dropped labels).

    The distinct labels are shuffled with ``seed`` and cut into r = n_labels // S
    groups of S; the rest are dropped (their queries are not counted).

    Parameters
    ----------
    labels:
        The labels (any order, repeats allowed).
    group_size:
        S, the labels per group (>= 2, at most the number of labels).
    seed:
        Of the shuffle.

    Returns
    -------
    tuple of numpy.ndarray
        The (r x S) array of labels, and the dropped labels (sorted).

    Raises
    ------
    InputError
        ``group_size`` below 2 or larger than the number of labels.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> groups, dropped = rc.label_partition(np.arange(7), 3, seed=0)
    >>> groups, dropped
    (array([[2, 4, 3],
           [6, 5, 0]]), array([1]))
    >>> rc.label_partition([0, 1, 2], 4, seed=0)
    Traceback (most recent call last):
    retrieval_checks.errors.InputError: group_size=4 is larger than the number of labels (3); grouped recall needs at least 4 labels (two groups of two).
    """
    uniq = np.unique(np.asarray(labels))
    if group_size < 2:
        raise InputError(f"group_size={group_size}: a group needs at least 2 labels (S >= 2).")
    if group_size > uniq.size:
        fix = (
            f"use group_size <= {uniq.size // 2} so that at least two groups exist"
            if uniq.size >= 4
            else "grouped recall needs at least 4 labels (two groups of two)"
        )
        raise InputError(
            f"group_size={group_size} is larger than the number of labels ({uniq.size}); {fix}."
        )
    perm = np.random.default_rng(seed).permutation(uniq)
    r = uniq.size // group_size
    return perm[: r * group_size].reshape(r, group_size), np.sort(perm[r * group_size :])


def _stdtrit(df, q):
    """Student's t quantile, ``scipy.special.stdtrit`` (what ``scipy.stats.t.ppf`` returns
    for these arguments), imported on first use: ``import retrieval_checks`` stays light."""
    from scipy.special import stdtrit

    return stdtrit(df, q)


def _mean_sd_se(values: np.ndarray):
    """Mean, sample standard deviation and standard error of the group values."""
    mean = float(values.mean())
    s = float(values.std(ddof=1))
    return mean, s, s / math.sqrt(values.size)


def grouped_recall_values(
    q_emb: np.ndarray,
    q_codes: np.ndarray,
    g_emb: np.ndarray | None,
    g_codes: np.ndarray | None,
    *,
    q_ids: np.ndarray,
    g_ids: np.ndarray | None,
    ks: list[int],
    group_size: int,
    seed: int,
    repeats: int,
    confidence: float,
    ties: str,
    similarity: str,
    label_values: np.ndarray,
    max_memory: int,
    empty_queries: str = "skip",
    q_factor: np.ndarray | None = None,
    g_factor: np.ndarray | None = None,
    score_batch=None,
    backend=None,
    fused=None,
    use_kernels: bool = True,
    record: dict | None = None,
) -> dict[int, GroupedRecall]:
    """Grouped Recall@K for every K in ``ks`` (embeddings as the engine prepared them:
    float32 numpy, or packed code words for hamming; ``q_factor`` / ``g_factor`` the
    row factors of the score epilogue, :meth:`Backend.row_factors`, so that scores
    are computed exactly as in the main pass). ``label_values`` maps label codes to labels for
    reporting dropped labels; ``q_ids`` / ``g_ids`` are integer id codes (a gallery
    item with the query's id is the query itself and is excluded). The options are
    validated by the caller (:func:`retrieval_checks.evaluate`). ``score_batch``
    replaces :func:`_score_batch` (the sharded engine scores each batch over the ranks;
    its ``name`` attribute names it in the record).
    ``backend``: the plan's backend (device tensors are copied to the host where the
    numpy path serves). ``fused``: the fused kernel the task seam chose
    (:func:`._fused_tasks.grouped_kernel`: ``RC_TRITON`` on CUDA, cosine / dot / neg_l2;
    same numbers), called as :func:`score_groups` is and answering with its name where it
    filled the hits (None where it did not); None: the host path. ``use_kernels``: the
    host path counts with the compiled counter where the engine's kernels are numba's
    (False: the numpy rule, its twin). ``record``: ``{path: partitions}`` to which each
    partition adds the path that scored it (:data:`PATHS`; ``result.provenance.grouped``).
    This module never imports a kernel."""
    data = GroupData(
        q_emb,
        q_codes,
        q_ids,
        g_emb,
        g_codes,
        g_ids,
        q_factor,
        g_factor,
        backend=backend,
        fused=fused,
        use_kernels=use_kernels,
    )
    relevant = _relevant_in_group(data)
    partitions = [
        _partition_values(
            data,
            relevant,
            ks,
            group_size,
            seed + rep,
            ties,
            similarity,
            max_memory,
            empty_queries,
            score_batch,
        )
        for rep in range(repeats)
    ]
    served = [part.pop(_SERVED) for part in partitions]
    certain = [part.pop(_CERTAIN) for part in partitions]
    certain_k = None if any(c is None for c in certain) else max(certain)
    if record is not None:  # only once every partition has its values
        for name in served:
            record[name] = record.get(name, 0) + 1
    out = {}
    for k in ks:
        vals = np.vstack([part[k][0] for part in partitions])
        per_rep = [_mean_sd_se(v) for v in vals]
        value = float(np.mean([p[0] for p in per_rep]))
        se = float(np.mean([p[2] for p in per_rep]))
        r = vals.shape[1]
        # Student's t quantile as scipy.stats.t.ppf computes it (its _ppf is stdtrit; the
        # same float): scipy.special alone imports in ~0.3 CPU-s, scipy.stats in ~1.1, paid
        # by every fresh process (a rank, a worker, a CLI run) whose only use of it was this
        half = float(_stdtrit(r - 1, (1 + confidence) / 2)) * se
        _, h, gq, dropped, _ = partitions[0][k]
        tie_values = {
            p: float(np.mean([part[k][4][p] for part in partitions]))
            for p in ("pessimistic", "optimistic")
        }
        tie_values.update(min=min(tie_values.values()), max=max(tie_values.values()))
        used = int((~np.isnan(h)).sum())
        n_dropped = int((gq < 0).sum())
        low, high = max(0.0, value - half), min(1.0, value + half)
        for row in vals:  # groups all at 0 or 1: no narrower than their exact interval
            low, high, _ = binomial_floor(row, (0.0, 1.0), confidence, low, high)
        out[k] = GroupedRecall(
            k=k,
            value=value,
            low=low,
            high=high,
            confidence=confidence,
            std_error=se,
            group_std=per_rep[0][1],
            n_groups=r,
            group_size=group_size,
            seed=seed,
            repeats=repeats,
            group_values=vals,
            dropped_labels=label_values[dropped],
            n_queries_used=used,
            n_queries_skipped=data.n_q - used - n_dropped,
            n_queries_dropped=n_dropped,
            per_query=h,
            group_of_query=gq,
            tie_values=tie_values,
            certain_k=certain_k,
        )
    return out


def _relevant_in_group(data: GroupData) -> np.ndarray:
    """Each query's relevant items inside its group, as :func:`count_batch` counts them:
    the gallery items with its label code (every one of them is in the query's group)
    and another id (an item with the query's id is its own, never ranked; without ids
    nothing is). From the label codes and ids alone, so every path (host, fused,
    sharded) has the same counts."""
    g_codes = np.asarray(data.q_codes if data.loo else data.g_codes, np.int64)
    q_codes = np.asarray(data.q_codes, np.int64)
    top = int(max(q_codes.max(initial=-1), g_codes.max(initial=-1))) + 1
    rel = np.bincount(g_codes, minlength=top)[q_codes]
    g_ids = data.q_ids if data.loo else data.g_ids
    if data.q_ids is None or g_ids is None:
        return rel
    q_ids, g_ids = np.asarray(data.q_ids, np.int64), np.asarray(g_ids, np.int64)
    if q_ids.size == 0 or g_ids.size == 0:
        return rel
    if data.loo and np.array_equal(q_ids, np.arange(q_ids.size)):
        return rel - 1  # each item's id is its row: its own item is itself
    # the gallery items with the query's (label code, id) pair: one sort of both sides'
    # pairs, counted per run of equal pairs
    n_g = g_codes.size
    codes = np.concatenate([g_codes, q_codes])
    ids = np.concatenate([g_ids, q_ids])
    low = int(ids.min())
    span = int(ids.max()) - low + 1
    starts = np.ones(codes.size, bool)
    if top * span < 2**62:  # one int64 key per pair: one argsort, not lexsort's two passes
        keys = codes * span + (ids - low)
        order = np.argsort(keys)  # the order inside a run of equal pairs does not matter
        k = keys[order]
        starts[1:] = k[1:] != k[:-1]
    else:
        order = np.lexsort((ids, codes))
        c, i = codes[order], ids[order]
        starts[1:] = (c[1:] != c[:-1]) | (i[1:] != i[:-1])
    run = np.cumsum(starts) - 1
    in_gallery = np.bincount(
        run, weights=order < n_g, minlength=int(run[-1]) + 1 if run.size else 0
    )
    own = np.empty(order.size, np.int64)
    own[order] = in_gallery[run].astype(np.int64)
    return rel - own[n_g:]


def _certain(candidates, relevant, in_group, has) -> int | None:
    """The smallest K past every non-relevant item of every counted query of a partition
    (a query in a group with a relevant item there): its candidates less its relevant
    items, plus one. None when no query is counted, or when the counts disagree with the
    pass (``has``: the queries it found a relevant item for; a count that cannot be
    trusted refuses nothing)."""
    used = in_group & (relevant > 0)
    if not used.any() or not np.array_equal(used, in_group & has):
        return None
    nonrelevant = candidates[used] - relevant[used]
    if (nonrelevant < 0).any():
        return None
    return int(nonrelevant.max()) + 1


@dataclass(frozen=True)
class GroupData:
    """The (prepared) items grouped recall runs on; no gallery in leave-one-out."""

    q_emb: np.ndarray
    q_codes: np.ndarray
    q_ids: np.ndarray
    g_emb: np.ndarray | None
    g_codes: np.ndarray | None
    g_ids: np.ndarray | None
    q_factor: np.ndarray | None = None
    g_factor: np.ndarray | None = None
    backend: object = None  # the plan's backend: device tensors go to the host for numpy
    fused: object = None  # the fused kernel the task seam chose (grouped_recall_values)
    use_kernels: bool = True  # the host path's counter: compiled where numba serves, else numpy
    cache: dict = field(
        default_factory=dict, compare=False, repr=False
    )  # device copies, across partitions

    @property
    def n_q(self) -> int:
        return int(self.q_codes.shape[0])

    @property
    def loo(self) -> bool:
        return self.g_emb is None

    @property
    def all_codes(self) -> np.ndarray:
        return self.q_codes if self.loo else np.concatenate([self.q_codes, self.g_codes])


def _partition_values(
    data: GroupData,
    relevant: np.ndarray,
    ks,
    group_size,
    seed,
    ties,
    similarity,
    max_memory,
    empty_queries,
    score_batch=None,
) -> dict:
    """One seeded partition: for every K, (group values, per-query hits, group of each
    query, dropped labels), under :data:`_SERVED` the path that scored it, and under
    :data:`_CERTAIN` the smallest K past every non-relevant item of every counted query
    (``relevant``: each query's relevant items in its group, :func:`_relevant_in_group`)."""
    codes_all = data.all_codes
    present = np.flatnonzero(np.bincount(codes_all))  # np.unique's answer, without a sort
    groups, dropped = label_partition(present, group_size, seed)
    r = groups.shape[0]
    if r < 2:
        raise InputError(
            f"Only {r} group of {group_size} labels fits the {present.size} labels: "
            "no interval is possible from fewer than 2 groups; use a smaller group_size or more labels."
        )
    group_of_label = np.full(int(codes_all.max()) + 1, -1, np.int64)
    group_of_label[groups.ravel()] = np.repeat(np.arange(r), group_size)
    gq = group_of_label[data.q_codes]
    gg = gq if data.loo else group_of_label[data.g_codes]
    policies = dict.fromkeys((ties, "pessimistic", "optimistic"))
    all_hits = {p: {k: np.full(data.n_q, np.nan) for k in ks} for p in policies}
    hits = all_hits[ties]
    candidates = np.zeros(data.n_q, np.int64)
    served = score_groups(
        data, gq, gg, r, ks, all_hits, similarity, candidates, max_memory, score_batch
    )
    in_group = gq >= 0
    ranked = in_group & (candidates > 0)  # a group without gallery items leaves its queries empty
    fewest = int(candidates[ranked].min()) if ranked.any() else 0
    if max(ks) > fewest:
        raise InputError(
            f"grouped_recall@{max(ks)}: K={max(ks)} is larger than the gallery a query ranks inside its group "
            f"(as few as {fewest} items with group_size={group_size}); use K <= {fewest} or a larger group_size."
        )
    empty = np.flatnonzero(in_group & np.isnan(hits[ks[0]]))
    certain = _certain(candidates, relevant, in_group, ~np.isnan(hits[ks[0]]))
    if empty.size and empty_queries == "error":
        raise EmptyQueriesError(
            f"{empty.size} queries have no relevant item inside their group (queries "
            f"{', '.join(map(str, empty[:5]))}{', ...' if empty.size > 5 else ''}); in leave-one-out every class "
            "needs two items. Pass empty_queries='skip' or 'zero', or drop those classes.",
            indices=empty,
        )
    out = {}
    for k in ks:
        means = {}
        for policy, policy_hits in all_hits.items():
            h = policy_hits[k]
            if empty_queries == "zero":
                h[empty] = 0.0
            means[policy] = _group_means(h, gq, r)
        out[k] = (means[ties], hits[k], gq, dropped, {p: float(v.mean()) for p, v in means.items()})
    out[_SERVED] = served
    out[_CERTAIN] = certain
    return out


def _group_means(h: np.ndarray, gq: np.ndarray, r: int) -> np.ndarray:
    """Mean hit of each group's used queries."""
    sums = np.bincount(gq[gq >= 0], weights=np.nan_to_num(h[gq >= 0]), minlength=r)
    cnt = np.bincount(gq[(gq >= 0) & ~np.isnan(h)], minlength=r)
    if (cnt == 0).any():
        raise InputError(
            f"{int((cnt == 0).sum())} of {r} groups have no query with a relevant item inside the group "
            "(every class needs at least two items in leave-one-out); drop singleton classes or "
            "use a larger group_size."
        )
    return sums / cnt


def _on_host(data: GroupData) -> GroupData:
    """``data`` with embeddings and factors as numpy arrays (device tensors copied)."""

    def host(x):
        return x if x is None or isinstance(x, np.ndarray) else data.backend.to_numpy(x)

    return replace(
        data,
        q_emb=host(data.q_emb),
        g_emb=host(data.g_emb),
        q_factor=host(data.q_factor),
        g_factor=host(data.g_factor),
    )


def _pad(n: int) -> int:
    """Rows of a unit's padded product: a multiple of 16 (identically shaped products)."""
    return int(-(-max(n, 1) // 16) * 16)


def _unit_cost(mq: int, mg: int, d: int) -> int:
    """Bytes of one padded unit: its embeddings, float32 scores, and the numpy counter's
    masked copy, ~8 masks and temporaries (the compiled counter needs the scores only)."""
    return mq * mg * 20 + (mq + mg) * d * 4


@dataclass(frozen=True)
class Batches:
    """The plan of a grouped pass (:func:`plan_batches`): items in group order and the
    batches of units, each unit ``(q0, q1, g0, g1)``: the query positions ``q0:q1`` of
    ``q_order`` against the gallery positions ``g0:g1`` of ``g_order``."""

    q_order: np.ndarray
    g_order: np.ndarray
    batches: list  # (spans (B x 4) int64, mq, mg)

    def units(self, spans) -> list:
        """A batch's units as (query indices, gallery indices) arrays."""
        qo, go = self.q_order, self.g_order
        return [(qo[q0:q1], go[g0:g1]) for q0, q1, g0, g1 in spans.tolist()]


def _group_order(g, r: int) -> np.ndarray:
    """Items in group order (-1 first), stably: numpy's radix sort where the groups fit
    16 bits (about 3x faster than the merge sort of 64-bit keys on a million items)."""
    if r + 1 < 2**16:
        return np.argsort((g + 1).astype(np.uint16), kind="stable")
    return np.argsort(g, kind="stable")


def plan_batches(gq, gg, r: int, d: int, max_memory: int) -> Batches:
    """The units of work and their batches, from the group of every query and gallery
    item alone (so every rank of a sharded pass plans the same batches).

    A unit is a group's queries against the group's gallery; a group too large for
    ``max_memory`` is split into blocks of queries, each against the whole group gallery.
    Each unit's product is computed in its own padded shape ``(pad(queries),
    pad(gallery))``, multiples of 16, whatever else shares its batch: units are bucketed
    by that shape and a batch holds units of one shape only (as many as fit
    ``max_memory``), so every score is the same whatever the budget and the other
    groups. Vectorised: no Python step per group."""
    q_order = _group_order(gq, r)
    g_order = q_order if gg is gq else _group_order(gg, r)
    q_bounds = np.searchsorted(gq[q_order], np.arange(r + 1))
    g_bounds = np.searchsorted(gg[g_order], np.arange(r + 1))
    nq, ng = np.diff(q_bounds), np.diff(g_bounds)
    pad = lambda n: (np.maximum(n, 1) + 15) // 16 * 16  # noqa: E731
    mg = pad(ng)
    rows = np.maximum(nq, 1)
    over = (pad(rows) * mg * 20 + (pad(rows) + mg) * d * 4) > max_memory
    rows[over] = np.maximum(
        16, ((max_memory - mg[over] * d * 4) // (mg[over] * 20 + d * 4)) // 16 * 16
    )
    per_group = -(-np.maximum(nq, 1) // rows)  # units of each group (1 unless split)
    group = np.repeat(np.arange(r), per_group)
    first = np.cumsum(per_group) - per_group
    block = np.arange(group.size) - np.repeat(first, per_group)  # block of the group's queries
    q0 = q_bounds[group] + block * rows[group]
    q1 = np.minimum(q0 + rows[group], q_bounds[group + 1])
    spans = np.stack([q0, q1, g_bounds[group], g_bounds[group + 1]], axis=1).astype(np.int64)
    mq_u, mg_u = pad(q1 - q0), mg[group]
    by_shape = np.lexsort((mg_u, mq_u))  # stable: groups in order inside a shape
    batches = []
    starts = np.flatnonzero(
        np.r_[True, (np.diff(mq_u[by_shape]) != 0) | (np.diff(mg_u[by_shape]) != 0)]
    ).tolist() + [by_shape.size]
    for a, b in zip(starts[:-1], starts[1:]):
        mq, mgb = int(mq_u[by_shape[a]]), int(mg_u[by_shape[a]])
        per = max(1, max_memory // (mq * mgb * 20 + (mq + mgb) * d * 4))
        for i in range(a, b, per):
            batches.append((spans[by_shape[i : min(i + per, b)]], mq, mgb))
    return Batches(q_order, g_order, batches)


def score_groups(
    data: GroupData, gq, gg, r, ks, hits, similarity, candidates, max_memory, score_batch=None
):
    """Fill ``hits[policy][k][i]`` with query i's hit_rate@k inside its group under each
    tie policy (its probability for ``"average"``), batched by shape (:func:`plan_batches`).
    Returns the name of the path that filled them (:data:`PATHS`): the fused kernel's
    where it answered with its name, the ``score_batch`` hook's ``name``, or the host
    counter's (``"grouped-numba"``, or ``"grouped-numpy"`` where :func:`_counter` gives
    none or ``data.use_kernels`` is False)."""
    if score_batch is None and data.backend is not None:
        if data.fused is not None:
            served = data.fused(data, gq, gg, r, ks, hits, similarity, candidates, max_memory)
            if served:
                return _claimed(served, "the fused kernel")
        data = _on_host(data)  # the caller may have passed device tensors for the kernel
    q_emb, q_codes, q_ids, q_fac = data.q_emb, data.q_codes, data.q_ids, data.q_factor
    g_emb, g_codes, g_ids, g_fac = data.g_emb, data.g_codes, data.g_ids, data.g_factor
    if g_emb is None:
        g_emb, g_codes, g_ids, g_fac = q_emb, q_codes, q_ids, q_fac
    d = q_emb.shape[1] * (
        2 if similarity == "hamming" else 1
    )  # 64-bit words cost two float32 columns
    if q_ids is None:  # no ids: nothing is the same item
        q_ids = np.full(q_codes.shape[0], -1, np.int64)
        g_ids = np.full(g_codes.shape[0], -2, np.int64)
    q_side, g_side = (q_emb, q_codes, q_ids, q_fac), (g_emb, g_codes, g_ids, g_fac)
    plan = plan_batches(gq, gg, r, d, max_memory)
    if score_batch is not None:
        name = _claimed(getattr(score_batch, "name", None), "the score_batch hook")
        for spans, mq, mg in plan.batches:
            units = plan.units(spans)
            score_batch(units, q_side, g_side, mq, mg, similarity, ks, hits, candidates)
        return name
    compiled = _counter() if data.use_kernels else None
    with _BlasThreads(similarity != "hamming") as blas:
        for spans, mq, mg in plan.batches:
            _score_spans(
                plan,
                spans,
                q_side,
                g_side,
                mq,
                mg,
                similarity,
                ks,
                hits,
                candidates,
                blas,
                compiled,
            )
    return "grouped-numpy" if compiled is None else "grouped-numba"


#: the paths that score grouped recall's partitions, by their names in
#: ``result.provenance.grouped``: the host batches counted by the compiled counter or by
#: the numpy rule (:func:`count_batch`; also the sharded pass's), and the fused Triton
#: grouped kernel (:mod:`.gpu._triton_grouped`)
PATHS = ("grouped-numba", "grouped-numpy", "triton-grouped")
_SERVED = "served"  # the key of a partition's path in :func:`_partition_values`'s answer
_CERTAIN = "certain_k"  # the key of a partition's certain K there


def _claimed(name, what: str) -> str:
    """A path's name as recorded: one of :data:`PATHS`; anything else is an error (a
    record never names a path that did not say what it is)."""
    if name not in PATHS:
        raise RuntimeError(
            f"grouped recall: {what} answered {name!r}, not the name of a path "
            f"({', '.join(PATHS)}): it must name what scored the partition"
        )
    return name


# BLAS's thread count is one setting of the process: grouped passes run on threads of one
# process (an executor) change it one at a time, so a shape that keeps BLAS's own setting
# never runs while another pass has set one thread.
_BLAS_LOCK = threading.Lock()


class _BlasThreads:
    """numpy's BLAS for many small products: one thread per product, and the products of
    a batch spread over as many worker threads as BLAS would use, where that gives the
    same bits.

    A product of one small unit split over BLAS's threads spends most of its time waking
    and waiting for them (10-40x the product's own time on a loaded machine). Whether one
    thread computes the same bits as BLAS's own setting depends on the shape (OpenBLAS
    blocks the inner dimension differently by thread count for some shapes), so each
    shape is checked once per process on seeded random data, both ways: where the bits
    differ, that shape's batches keep BLAS's own setting, serially. Without threadpoolctl
    (which sets the thread count of the loaded BLAS) everything runs as BLAS is set."""

    _checked: dict = {}  # (mq, mg, d, dtype) -> one thread gives BLAS's own bits

    def __init__(self, wanted: bool):
        self.wanted = wanted
        self.controller = None
        self.workers = 1

    #: the process's BLAS controller, found once: threadpoolctl's scan of the loaded
    #: libraries costs ~18 ms, paid by every small evaluation otherwise (numpy's BLAS is
    #: loaded with numpy, before any pass; the thread count is read when used)
    _controller: list = []

    def __enter__(self):
        if not self.wanted:
            return self
        if not self._controller:
            try:
                import threadpoolctl
            except ImportError:
                self._controller.append(None)
            else:
                self._controller.append(
                    threadpoolctl.ThreadpoolController().select(user_api="blas")
                )
        controller = self._controller[0]
        if controller is not None and controller.lib_controllers:
            _BLAS_LOCK.acquire()  # the thread count is the process's: one pass sets it at a time
            self.controller = controller
            self.workers = max(1, min(int(lib.num_threads) for lib in controller.lib_controllers))
        return self

    def __exit__(self, *exc):
        if self._pool is not None:
            self._pool.shutdown()
        if self.controller is not None:
            _BLAS_LOCK.release()
        return False

    _pool = None

    def map(self, fn, starts, stops) -> None:
        """``fn(a, b)`` for each span, on the pass's worker threads (started once)."""
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.workers)
        list(self._pool.map(fn, starts, stops))

    def single_ok(self, mq: int, mg: int, d: int, dtype) -> bool:
        """Whether a ``(mq, d) x (d, mg)`` product on one thread has BLAS's own bits."""
        if self.controller is None:
            return False
        key = (mq, mg, d, np.dtype(dtype).str, self.workers)
        if key not in self._checked:
            rng = np.random.default_rng(mq * 7919 + mg * 31 + d)
            Q = rng.standard_normal((1, mq, d)).astype(dtype)
            G = rng.standard_normal((1, mg, d)).astype(dtype)
            own = np.matmul(Q, G.transpose(0, 2, 1))
            with self.controller.limit(limits=1):
                one = np.matmul(Q, G.transpose(0, 2, 1))
            self._checked[key] = bool(np.array_equal(own, one))
        return self._checked[key]

    def one_thread(self):
        return self.controller.limit(limits=1)


def batch_scores(Qb, Gb, qf, gf, similarity: str) -> np.ndarray:
    """(B, mq, mg) scores of padded batches, by the main pass's rules: the product,
    then the epilogue of :meth:`Backend.finish_scores` (or -Hamming distance)."""
    if similarity == "hamming":
        S = np.empty((Qb.shape[0], Qb.shape[1], Gb.shape[1]), np.float32)
        for t in range(Qb.shape[0]):
            hamming_into(Qb[t], Gb[t], S[t])
        return S
    S = np.matmul(Qb, Gb.transpose(0, 2, 1))
    if qf is not None:
        Backend("numpy").finish_scores(S, similarity, qf, gf)
    return S


def _gather(values, idx, filler):
    """``values[idx]`` with ``filler`` where ``idx`` is -1."""
    ok = idx >= 0
    out = (
        np.take(values, np.where(ok, idx, 0).ravel(), axis=0).reshape(idx.shape + values.shape[1:])
        if values.shape[0]
        else np.zeros(idx.shape + values.shape[1:], values.dtype)
    )
    out[~ok] = filler
    return out


def count_batch(S, qc, gc, qid, gid, qidx, gidx, mine=None, reduce_best=None):
    """The rule of a query's first relevant rank inside its group, on a batch of padded
    scores ``S`` (B, mq, mg): a pair is valid where both sides are items (index >= 0)
    with different ids, relevant where their label codes agree; ``best`` is the query's
    best relevant score; the counts are the non-relevant items scored ``> best``
    (``above``) and ``== best`` (``tied``), the relevant items ``== best`` (``group``)
    and the valid items (``n_valid``). Returns ``(has, above, tied, group, n_valid)``.

    The sharded pass passes ``mine`` (B, mg), the columns this rank owns, and
    ``reduce_best`` (the max over the ranks of the rows' best scores); it sums the
    counts over the ranks. The compiled counter (:mod:`._grouped_numba`) computes the
    same numbers in one pass."""
    valid = (qidx[:, :, None] >= 0) & (gidx[:, None, :] >= 0) & (qid[:, :, None] != gid[:, None, :])
    if mine is not None:
        valid &= mine[:, None, :]
    rel = valid & (qc[:, :, None] == gc[:, None, :])
    neg = valid & ~rel
    best = np.where(rel, S, -np.inf).max(axis=2)
    if reduce_best is None:
        has = rel.any(axis=2)
    else:
        best = reduce_best(best)
        has = best > -np.inf
    above = ((S > best[:, :, None]) & neg).sum(axis=2)
    tied = ((S == best[:, :, None]) & neg).sum(axis=2)
    group = ((S == best[:, :, None]) & rel).sum(axis=2)
    return has, above, tied, group, valid.sum(axis=2)


def record_hits(qidx, has, above, tied, group, n_valid, ks, hits, candidates) -> None:
    """Write a batch's counts (:func:`count_batch`) as its queries' hits under each tie
    policy and their numbers of candidates."""
    rows = qidx >= 0
    candidates[qidx[rows]] = n_valid[rows]
    first = FirstRanks(1 + above + tied, 1 + above, group)
    for policy, policy_hits in hits.items():
        for k in ks:
            h = np.where(has, first.under(policy, k), np.nan)
            policy_hits[k][qidx[rows]] = h[rows]


def _counter():
    """The compiled counter where the engine's kernels are numba's, else None (numpy)."""
    if _kernels.ACCELERATOR != "numba":
        return None
    from ._grouped_numba import count_batch as compiled

    return compiled


def _span_indices(order, starts, stops, m: int) -> np.ndarray:
    """(B, m) int64: row t holds ``order[starts[t]:stops[t]]`` then -1 fillers."""
    pos = starts[:, None] + np.arange(m)
    inside = pos < stops[:, None]
    return (
        np.where(inside, order[np.minimum(pos, max(order.size - 1, 0))], -1)
        if order.size
        else np.full(pos.shape, -1, np.int64)
    )


def _score_spans(
    plan, spans, q_side, g_side, mq, mg, similarity, ks, hits, candidates, blas, compiled
):
    """One batch of units of one shape, on this process (:func:`_score_batch`)."""
    qidx = _span_indices(plan.q_order, spans[:, 0], spans[:, 1], mq)
    gidx = _span_indices(plan.g_order, spans[:, 2], spans[:, 3], mg)
    same = (
        q_side[0] is g_side[0]
        and mq == mg
        and np.array_equal(spans[:, :2], spans[:, 2:])
        and np.array_equal(qidx, gidx)
    )
    _score_batch(qidx, gidx, same, q_side, g_side, similarity, ks, hits, candidates, blas, compiled)


# long: gather, score and count over the workers, then record
def _score_batch(
    qidx, gidx, same, q_side, g_side, similarity, ks, hits, candidates, blas, compiled
):
    """Score a batch given its padded item indices (``same``: both sides are the same
    items, leave-one-out: gathered once, copied for the product's second operand, since
    numpy computes ``A @ A.T`` with another BLAS routine). ``compiled``: the compiled
    counter (:func:`_counter`), None: the numpy rule (:func:`count_batch`)."""
    (q_emb, q_codes, q_ids, q_fac), (g_emb, g_codes, g_ids, g_fac) = q_side, g_side
    B, mq = qidx.shape
    mg = gidx.shape[1]
    qc, gc = _gather(q_codes, qidx, -1), _gather(g_codes, gidx, -2)
    qid, gid = _gather(q_ids, qidx, -3), _gather(g_ids, gidx, -4)
    has = np.zeros((B, mq), bool)
    above, tied, group, n_valid = (np.zeros((B, mq), np.int64) for _ in range(4))

    def work(a, b):
        qi, gi = qidx[a:b], gidx[a:b]
        Qb = _gather(q_emb, qi, 0)
        Gb = Qb.copy() if same else _gather(g_emb, gi, 0)
        qf = None if q_fac is None else _gather(q_fac, qi, 0).astype(np.float32, copy=False)
        gf = (
            None
            if g_fac is None
            else (qf.copy() if same else _gather(g_fac, gi, 0).astype(np.float32, copy=False))
        )
        S = batch_scores(Qb, Gb, qf, gf, similarity)
        del Qb, Gb
        if compiled is not None:
            compiled(
                S,
                qc[a:b],
                gc[a:b],
                qid[a:b],
                gid[a:b],
                qi,
                gi,
                has[a:b],
                above[a:b],
                tied[a:b],
                group[a:b],
                n_valid[a:b],
            )
        else:
            out = count_batch(S, qc[a:b], gc[a:b], qid[a:b], gid[a:b], qi, gi)
            for dst, src in zip((has, above, tied, group, n_valid), out):
                dst[a:b] = src

    if blas is not None and blas.single_ok(mq, mg, q_emb.shape[1], q_emb.dtype):
        workers = min(blas.workers, B)
        cuts = np.linspace(0, B, workers + 1).astype(int).tolist()
        with blas.one_thread():
            if workers == 1:
                work(0, B)
            else:
                blas.map(work, cuts[:-1], cuts[1:])
    else:
        work(0, B)
    record_hits(qidx, has, above, tied, group, n_valid, ks, hits, candidates)
