"""``evaluate``: the public entry point of the engine, as named stages.

``evaluate`` runs, in order: **options** (metric names and option values), **inputs**
(the embedding arrays), **self pairs** (which gallery items are the query itself),
**relevance** (which are relevant, and how many per query), **plan** (backend and tile
shapes, :mod:`._plan`), **prepare** (float32 copies on the backend), **stream** (the
block tasks and their merge, :mod:`._stream`) and **aggregate** (per-query values to
metric values, pair metrics, grouped recall, the result). Each stage is a short
function of the previous stages' outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._arrays import as_numpy
from ..errors import EmptyQueriesError, InputError, MetricNameError
from ..metrics._embedding import discriminant_ratio
from ..metrics._names import MetricSpec, parse_metric
from ..metrics._pairs import pair_metric, pr_curve
from ..metrics._ranking import aggregate
from ..options import DEFAULTS, check_option
from ._blocks import RelevanceSource
from ._grouped import GroupedRecall, grouped_recall_values
from ._hamming import PackedCodes, pack_sides
from ._inputs import (
    Csr,
    check_embeddings,
    check_score_range,
    encode_ids,
    encode_labels,
    ranges_to_csr,
    relevance_to_csr,
)
from ._plan import Plan, plan_pass, prepare_problem
from ._result import EvaluationResult
from ._slices import attach_slices, make_slices
from ._stream import FirstRanks, PassTotals, binning_pass, stream

__all__ = ["evaluate", "first_relevant_ranks"]


# ----------------------------------------------------------------------------- options
@dataclass(frozen=True)
class _Request:
    """Validated metric names and options."""

    specs: list
    similarity: str
    ties: str
    empty_queries: str
    group_size: int
    group_seed: int
    group_repeats: int
    confidence: float

    def of_kind(self, *kinds: str) -> list[MetricSpec]:
        return [s for s in self.specs if s.kind in kinds]


def _parse_all(metrics) -> list[MetricSpec]:
    if isinstance(metrics, str):
        metrics = [metrics]
    try:
        metrics = list(metrics) if metrics is not None else []
    except TypeError:
        raise MetricNameError(
            f"metrics must be a name or a list of names, got {type(metrics).__name__}.", name=""
        ) from None
    if len(metrics) == 0:
        raise MetricNameError(
            "metrics is empty: name at least one metric, e.g. metrics=['map', 'hit_rate@1', 'map@R'].",
            name="",
        )
    specs: dict[str, MetricSpec] = {}
    for m in metrics:
        s = parse_metric(m)
        if s.kind == "crossmodal":
            raise MetricNameError(
                f"{s.name!r} is an image-text metric: call retrieval_checks.evaluate_image_text(images, captions, "
                "caption_image, ...); in evaluate() the same ranking is hit_rate@K with relevance=...",
                name=s.name,
            )
        if s.capabilities.entry == "ann_recall":
            raise MetricNameError(
                f"{s.name!r} measures an approximate index against exact search: call "
                f"retrieval_checks.ann_recall(queries, gallery, neighbors, k={s.k}) with the index's neighbours.",
                name=s.name,
            )
        specs.setdefault(s.name, s)
    return list(specs.values())


def _options(
    metrics, *, similarity, ties, empty_queries, group_size, group_seed, group_repeats, confidence
) -> _Request:
    return _Request(
        specs=_parse_all(metrics),
        similarity=check_option("similarity", similarity),
        ties=check_option("ties", ties),
        empty_queries=check_option("empty_queries", empty_queries),
        group_size=check_option("group_size", group_size),
        group_seed=check_option("seed", group_seed, argument="group_seed"),
        group_repeats=check_option("group_repeats", group_repeats),
        confidence=check_option("confidence", confidence),
    )


# ----------------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class _Sides:
    queries: object
    gallery: object  # None in leave-one-out
    n_q: int
    n_g: int
    d: int
    inputs: tuple = ()  # the arrays as given (hamming: queries and gallery are PackedCodes)

    @property
    def loo(self) -> bool:
        return self.gallery is None


def _embeddings(queries, gallery, similarity: str) -> _Sides:
    if similarity == "hamming":  # validated and packed now, both sides, before any other work
        q, g = pack_sides(queries, gallery)
        inputs = (queries,) if gallery is None else (queries, gallery)
        return _Sides(q, g, q.shape[0], (q if g is None else g).shape[0], q.shape[1], inputs)
    queries = check_embeddings(queries, "queries", similarity=similarity)
    n_q, d = int(queries.shape[0]), int(queries.shape[1])
    if gallery is None:
        check_score_range(queries, None, similarity)
        return _Sides(queries, None, n_q, n_q, d, (queries,))
    gallery = check_embeddings(gallery, "gallery", similarity=similarity)
    if int(gallery.shape[1]) != d:
        raise InputError(
            f"queries have dimension {d} but gallery has dimension {int(gallery.shape[1])}; "
            "both must come from the same embedding space."
        )
    check_score_range(queries, gallery, similarity)
    return _Sides(queries, gallery, n_q, int(gallery.shape[0]), d, (queries, gallery))


# ----------------------------------------------------------------------------- self pairs
@dataclass(frozen=True)
class _SelfPairs:
    """``csr``: each query's own gallery items; ``q_ids`` / ``g_ids``: integer id codes
    (``g_ids`` None in leave-one-out, where the query codes serve both sides; both None
    without ids)."""

    csr: Csr
    q_ids: np.ndarray | None
    g_ids: np.ndarray | None


def _same_codes(q_codes: np.ndarray, g_codes: np.ndarray) -> Csr:
    order = np.argsort(g_codes, kind="stable").astype(np.int64)
    srt = g_codes[order]
    lo = np.searchsorted(srt, q_codes, side="left")
    hi = np.searchsorted(srt, q_codes, side="right")
    return ranges_to_csr(order, lo, hi)


def _self_pairs(sides: _Sides, query_ids, gallery_ids, gallery_labels) -> _SelfPairs:
    n_q, n_g = sides.n_q, sides.n_g
    if sides.loo:
        if gallery_labels is not None:
            raise InputError(
                "gallery_labels was given without a gallery; pass gallery=... or drop gallery_labels."
            )
        if gallery_ids is not None:
            raise InputError(
                "gallery_ids was given without a gallery; leave-one-out uses query_ids for both sides."
            )
        if query_ids is None:
            codes = np.arange(n_q, dtype=np.int64)
            return _SelfPairs(Csr(np.arange(n_q + 1, dtype=np.int64), codes), codes, None)
        codes, _ = encode_ids(query_ids, query_ids, n_q, n_q, "query_ids")
        return _SelfPairs(_same_codes(codes, codes), codes, None)
    if query_ids is None and gallery_ids is None:
        return _SelfPairs(Csr(np.zeros(n_q + 1, np.int64), np.zeros(0, np.int64)), None, None)
    if query_ids is None or gallery_ids is None:
        missing = "query_ids" if query_ids is None else "gallery_ids"
        raise InputError(
            f"{missing} is missing: self-exclusion needs ids on both sides (or on neither)."
        )
    qc, gc = encode_ids(query_ids, gallery_ids, n_q, n_g, "gallery_ids")
    return _SelfPairs(_same_codes(qc, gc), qc, gc)


# ----------------------------------------------------------------------------- relevance
@dataclass(frozen=True)
class _Relevance:
    source: RelevanceSource
    n_relevant: np.ndarray
    n_candidates: np.ndarray
    empty: np.ndarray  # queries without a relevant item
    q_codes: np.ndarray | None = None  # label codes (None with explicit relevance)
    g_codes: np.ndarray | None = None
    label_values: np.ndarray | None = None


def _first(indices, n=5):
    shown = ", ".join(str(int(i)) for i in indices[:n])
    return shown + (", ..." if len(indices) > n else "")


def _label_relevance(sides: _Sides, own: _SelfPairs, query_labels, gallery_labels):
    if query_labels is None:
        raise InputError(
            "query_labels is missing: pass one label per query, or pass relevance=... instead."
        )
    if not sides.loo and gallery_labels is None:
        raise InputError("gallery_labels is missing: pass one label per gallery item.")
    q_codes, g_codes, values = encode_labels(
        query_labels,
        query_labels if sides.loo else gallery_labels,
        sides.n_q,
        sides.n_g,
        "query_labels" if sides.loo else "gallery_labels",
    )
    return (
        RelevanceSource(q_codes=q_codes, g_codes=g_codes, self_pairs=own.csr, n_g=sides.n_g),
        q_codes,
        g_codes,
        values,
    )


def _check_level(relevance_level, graded: bool) -> int:
    """``relevance_level``: a whole number >= 1; above 1 only with graded relevance."""
    if (
        isinstance(relevance_level, bool)
        or not isinstance(relevance_level, (int, np.integer))
        or relevance_level < 1
    ):
        raise InputError(
            f"relevance_level={relevance_level!r}: give a whole number >= 1, the lowest grade that "
            "counts as relevant for the binary metrics (trec_eval's -l; default 1)."
        )
    if relevance_level > 1 and not graded:
        raise InputError(
            f"relevance_level={relevance_level} needs graded relevance ({{query: {{gallery: grade}}}} or "
            "a matrix of grades); with labels or binary relevance every relevant item has grade 1."
        )
    return int(relevance_level)


def _relevance(
    req: _Request,
    sides: _Sides,
    own: _SelfPairs,
    query_labels,
    gallery_labels,
    relevance,
    relevance_level=1,
) -> _Relevance:
    q_codes = g_codes = values = None
    if relevance is not None:
        if query_labels is not None or gallery_labels is not None:
            raise InputError(
                "Give either labels or relevance, not both: relevance replaces the label rule."
            )
        if req.of_kind("embedding", "grouped"):
            names = ", ".join(s.name for s in req.of_kind("embedding", "grouped"))
            raise InputError(
                f"{names} need(s) class labels; it cannot be computed from relevance alone."
            )
        source = RelevanceSource(
            csr=relevance_to_csr(relevance, sides.n_q, sides.n_g), self_pairs=own.csr, n_g=sides.n_g
        )
    else:
        source, q_codes, g_codes, values = _label_relevance(
            sides, own, query_labels, gallery_labels
        )
    level = _check_level(relevance_level, source.graded)
    if level > 1 and req.of_kind("pair"):
        names = ", ".join(s.name for s in req.of_kind("pair"))
        raise InputError(
            f"{names}: pair metrics with relevance_level={level} would count the lower grades neither "
            "as positive nor as negative pairs; evaluate them with relevance_level=1 (every graded "
            "item a positive)."
        )
    n_relevant = source.level_counts(sides.n_q, level) if level > 1 else source.counts(sides.n_q)
    n_candidates = sides.n_g - own.csr.row_counts()
    rel = _Relevance(
        source, n_relevant, n_candidates, np.flatnonzero(n_relevant == 0), q_codes, g_codes, values
    )
    _check_candidates(req, rel)
    return rel


def _check_candidates(req: _Request, rel: _Relevance) -> None:
    """Every query ranks something, every K fits, and the empty-query policy holds."""
    n_candidates, empty, n_q = rel.n_candidates, rel.empty, rel.n_relevant.shape[0]
    if (n_candidates == 0).any():
        idx = np.flatnonzero(n_candidates == 0)
        raise InputError(
            f"{idx.size} quer{'y has' if idx.size == 1 else 'ies have'} no gallery item left after self-exclusion "
            f"(queries {_first(idx)}); the gallery must hold more than the query itself."
        )
    fewest = int(n_candidates.min())
    for s in req.specs:
        if s.k is not None and s.k > fewest:
            k_text = str(s.k) if len(str(s.k)) <= 20 else f"a {len(str(s.k))}-digit number"
            name = s.name if len(s.name) <= 40 else f"{s.name.partition('@')[0]}@K"
            raise InputError(
                f"{name}: K={k_text} is larger than the gallery a query ranks ({fewest} items after "
                f"self-exclusion); use K <= {fewest}."
            )
    if not (empty.size and req.of_kind("query", "pair")):
        return
    if req.empty_queries == "error":
        raise EmptyQueriesError(
            f"{empty.size} of {n_q} queries have no relevant gallery item (queries {_first(empty)}); "
            "fix the labels or pass empty_queries='skip' (exclude and count them) or 'zero'.",
            indices=empty,
        )
    if empty.size == n_q:
        raise EmptyQueriesError(
            f"None of the {n_q} queries has a relevant gallery item: check that query and gallery labels "
            "share values (and that leave-one-out classes have at least two items).",
            indices=empty,
        )


# ----------------------------------------------------------------------------- aggregate
def _query_values(
    req: _Request, rel: _Relevance, totals: PassTotals
) -> tuple[dict[str, float], dict[str, dict]]:
    """The empty-query policy, then the mean (or medr's median) over queries: the
    values under the tie policy, and under each ordering of ``totals.tie_values``."""
    empty = rel.empty
    specs = req.of_kind("query")
    if empty.size and req.empty_queries == "zero":
        for per_query in (totals.per_query, *totals.tie_values.values()):
            for s in specs:
                per_query[s.name][empty] = rel.n_candidates[empty] + 1 if s.unit == "rank" else 0.0
    # a NaN outside the empty queries (skipped and counted) is a value gone wrong: an error
    values = {s.name: aggregate(s, totals.per_query[s.name], skipped=empty) for s in specs}
    ties = {
        s.name: {
            kind: aggregate(s, per_query[s.name], skipped=empty)
            for kind, per_query in totals.tie_values.items()
        }
        for s in specs
    }
    return values, ties


def _pair_values(req, rel, problem, totals, use_kernels, binning=None):
    """Values, thresholds, counts and the PR curve of the pair metrics (``binning``: the
    second pass that counts negatives at every positive score; default
    :func:`binning_pass` over ``problem``)."""
    specs = req.of_kind("pair")
    if not specs:
        return {}, {}, {}, None
    n_pos = int(rel.n_relevant.sum())
    counts = totals.pair_counts(int((rel.n_candidates - rel.n_relevant).sum()))
    values, thresholds, detail_of = {}, {}, {}
    for s in specs:
        value, thr, detail, need_bins = pair_metric(s, counts)
        if need_bins:
            counts.fp_at = (
                binning(counts)
                if binning is not None
                else binning_pass(problem, counts, use_kernels)
            )
            value, thr, detail, _ = pair_metric(s, counts)
        values[s.name], thresholds[s.name] = value, thr
        detail_of[s.name] = {**detail, "n_positive": n_pos, "n_negative": counts.n_negative}
    levels = ("recall_at_precision", "precision_at_recall")
    curve = pr_curve(counts) if any(s.family in levels for s in specs) else None
    return values, thresholds, detail_of, curve


def _grouped_values(req, sides, own, rel, problem, plan) -> dict[str, GroupedRecall]:
    specs = req.of_kind("grouped")
    if not specs:
        return {}
    be = plan.backend

    from ._triton_grouped import usable

    # the fused grouped kernel (RC_TRITON on CUDA) takes the prepared device tensors as they are
    on_device = usable(be, req.similarity)

    def host(x):  # the prepared arrays on the host; code words back to unsigned
        if x is None or on_device:
            return x
        x = be.to_numpy(x)
        return x.view(np.uint64) if req.similarity == "hamming" else x

    found = grouped_recall_values(
        host(problem.Q),
        rel.q_codes,
        None if sides.loo else host(problem.Gp[: sides.n_g]),
        None if sides.loo else rel.g_codes,
        q_ids=own.q_ids,
        g_ids=own.g_ids,
        ks=sorted({s.k for s in specs}),
        group_size=req.group_size,
        seed=req.group_seed,
        repeats=req.group_repeats,
        confidence=req.confidence,
        ties=req.ties,
        similarity=req.similarity,
        label_values=rel.label_values,
        max_memory=plan.room,
        empty_queries=req.empty_queries,
        q_factor=None if problem.qa is None else host(problem.qa[: sides.n_q]),
        g_factor=None if problem.ga is None else host(problem.ga[: sides.n_g]),
        backend=be,
    )
    return {s.name: found[s.k] for s in specs}


def _aggregate(
    req: _Request,
    sides: _Sides,
    own: _SelfPairs,
    rel: _Relevance,
    plan: Plan,
    problem,
    totals: PassTotals,
    use_kernels: bool,
    query_ids=None,
    level: int = 1,
    binning=None,
    extra_config: dict | None = None,
    grouped_values=None,
) -> EvaluationResult:
    values, tie_values = _query_values(req, rel, totals)
    pair_values, thresholds, pair_counts, curve = _pair_values(
        req, rel, problem, totals, use_kernels, binning
    )
    values.update(pair_values)
    for s in req.of_kind("embedding"):
        emb = sides.queries if sides.loo else sides.gallery
        emb = emb.unpacked() if isinstance(emb, PackedCodes) else as_numpy(emb, "embeddings")
        values[s.name] = float(discriminant_ratio(emb, rel.g_codes))
    grouped = (
        grouped_values(req, rel, own, plan)
        if grouped_values is not None
        else _grouped_values(req, sides, own, rel, problem, plan)
    )
    per_query = dict(totals.per_query)
    for name, g in grouped.items():
        values[name] = g.value
        per_query[name] = g.per_query
        tie_values[name] = g.tie_values
    # confidence and seed under the names the gates read (every on-demand interval
    # honours them); the seed is evaluate's group_seed
    config = {
        "similarity": req.similarity,
        "ties": req.ties,
        "empty_queries": req.empty_queries,
        "backend": plan.backend.name,
        "n_gallery": sides.n_g,
        "leave_one_out": sides.loo,
        "block": plan.b,
        "chunk": plan.c,
        "max_memory": plan.budget,
        "confidence": req.confidence,
        "seed": req.group_seed,
        "graded": rel.source.graded,
        "relevance_level": level,
        **(extra_config or {}),
    }
    return EvaluationResult(
        specs=req.specs,
        values={s.name: values[s.name] for s in req.specs},
        per_query=per_query,
        thresholds=thresholds,
        pair_counts=pair_counts,
        n_relevant=rel.n_relevant,
        n_candidates=rel.n_candidates,
        first_relevant_rank=(
            totals.first_rank[req.ties]
            if req.ties in totals.first_rank
            else np.where(
                rel.n_relevant > 0,
                FirstRanks(
                    totals.first_rank["pessimistic"],
                    totals.first_rank["optimistic"],
                    totals.first_group,
                ).under("average"),
                0.0,
            )
        ),
        tie_values=tie_values,
        tied_share=totals.n_tied / totals.n_relevant if totals.n_relevant else None,
        skipped_queries=rel.empty if req.empty_queries == "skip" else np.zeros(0, np.int64),
        config=config,
        intervals={name: g.interval for name, g in grouped.items()},
        grouped=grouped,
        pr_curve=curve,
        query_label_codes=rel.q_codes,
        label_values=rel.label_values,
        query_ids=query_ids,
    )


# ----------------------------------------------------------------------------- entry points
def evaluate(
    queries,
    gallery=None,
    *,
    query_labels=None,
    gallery_labels=None,
    relevance=None,
    metrics,
    query_ids=None,
    gallery_ids=None,
    similarity: str = DEFAULTS["similarity"],
    ties: str = DEFAULTS["ties"],
    empty_queries: str = DEFAULTS["empty_queries"],
    device=DEFAULTS["device"],
    max_memory=DEFAULTS["max_memory"],
    progress: bool | None = None,
    tile: tuple[int, int] | None = None,
    group_size: int = DEFAULTS["group_size"],
    group_seed: int = DEFAULTS["seed"],
    group_repeats: int = DEFAULTS["group_repeats"],
    confidence: float = DEFAULTS["confidence"],
    relevance_level: int = 1,
    process_group=None,
    checkpoint=None,
    executor=None,
    slices=None,
    _use_kernels: bool = True,
) -> EvaluationResult:
    """Evaluate retrieval metrics exactly, in one memory-bounded streamed pass.

    Parameters
    ----------
    queries:
        (n_q x d) embeddings, numpy array or torch tensor on any device.
    gallery:
        (n_g x d) embeddings, or None for leave-one-out over the queries (each query
        ranks all the other queries).
    query_labels, gallery_labels:
        One label per item (ints or strings; the same type on both sides). A gallery
        item is relevant to a query when the labels are equal. With ``gallery=None``
        the query labels serve for both.
    relevance:
        Instead of labels: which gallery items are relevant to each query, as a scipy
        sparse (n_q x n_g) matrix, a boolean matrix, a list of gallery-index lists
        (one per query) or a dict ``{query index: gallery indices}``. Graded: a dict
        ``{query index: {gallery index: grade}}`` or a sparse or dense matrix of whole
        grades >= 0 (0 = judged non-relevant): ``ndcg`` uses the grades as gains,
        binary metrics count grades >= ``relevance_level``.
    metrics:
        Canonical metric names or aliases (see ``METRICS.md``): ``hit_rate@K``,
        ``recall@K``, ``precision@K``, ``map``, ``map@K``, ``map_cut@K``,
        ``map_capped@K``, ``map@R``, ``r_precision``, ``mrr``, ``medr``, ``meanr``,
        ``ndcg@K``, ``ndcg`` (``ndcg_exp``: the same on binary relevance),
        ``pair_precision@t=T``, ``pair_recall@t=T``, ``pair_f1@t=T``,
        ``recall_at_precision@P``, ``precision_at_recall@Q``, ``discriminant_ratio``.
    query_ids, gallery_ids:
        Item ids; a gallery item with the query's id is the query itself and is
        removed from its ranking (any overlap, any order, duplicates included).
        Leave-one-out uses the row index unless ``query_ids`` is given.
    similarity:
        ``"cosine"`` (default), ``"dot"``, ``"neg_l2"`` (negative Euclidean distance) or
        ``"hamming"`` (binary codes: {0,1}, +-1 or bool arrays, or ``np.packbits`` uint8
        rows; ranked by increasing Hamming distance). Pair thresholds are in these
        units: minus a distance for neg_l2, a distance in bits for hamming. Integer data
        within float32's exact range rank exactly on every backend (README, "Exact
        scores").
    ties:
        ``"pessimistic"`` (default: a relevant item ranks after every non-relevant
        item with an equal score), ``"optimistic"`` (before them) or ``"average"``
        (the exact expected value over every order of the tied items). All exact; the
        result also carries the pessimistic and optimistic values and the range over
        tie orders (``result.tie_values``, ``result.tie_range``).
    empty_queries:
        Queries without a relevant gallery item: ``"skip"`` (excluded from the means,
        counted in ``n_skipped``), ``"error"``, or ``"zero"`` (score 0; for ``medr``
        and ``meanr`` rank n_candidates + 1).
    device:
        ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:N"``,
        ``"torch-cpu"`` or ``"numpy"`` (force torch's or numpy's CPU BLAS).
    max_memory:
        Budget for the working set of the pass, bytes or a string like ``"2GiB"``.
        Default: a quarter of free RAM up to 256 MiB (GPU: a quarter of free memory up
        to 8 GiB). Scores are float32, so a block of ``b`` queries takes
        ``4 * b * n_g`` bytes.
    progress:
        Show a progress bar; default: only on a terminal and for long passes.
    tile:
        ``(query block height, gallery chunk width)`` to override the planner; the
        width is rounded up to a multiple of 16 so that equal scores stay bit-equal.
    relevance_level:
        With graded relevance: the lowest grade the binary metrics (hit_rate, recall,
        map, ...) count as relevant (default 1, as trec_eval); a query without such an
        item is an empty query for every metric.
    group_size, group_seed, group_repeats, confidence:
        For ``grouped_recall@K``: S labels per group (default 10, the paper's choice),
        the partition's seed, the number of partitions averaged, and the confidence of
        the interval in ``result.intervals`` (details in ``result.grouped``).
    process_group:
        A ``torch.distributed`` process group (``torch.distributed.group.WORLD`` for
        all ranks): each rank passes its shard of the queries and of the gallery (or
        ``gallery=None``: its shard of a leave-one-out set), with the global
        ``query_ids`` / ``gallery_ids`` of its items (required with more than one
        rank); labels or ``relevance`` rows for its own queries (relevance columns are
        positions in the whole gallery, the shards concatenated in rank order). Every
        rank returns the same result, equal bit for bit to ``evaluate`` on the
        concatenated shards with the same tile (``docs/distributed.md``).
    checkpoint:
        A directory for restartable runs: each finished query block's partial result
        is written there atomically, keyed by a fingerprint of the inputs' content and
        the options; a run restarted with the same inputs reads them back and computes
        only the rest (the same result); a directory holding another run's blocks is
        refused. With ``process_group`` each rank writes its own files.
    executor:
        A ``concurrent.futures.Executor`` (thread or process pool, Dask's
        ``client.get_executor()``): the query blocks run on it as independent tasks and
        merge in order, the same result bit for bit. Each task holds one block of
        scores; process and remote workers each receive the prepared gallery. Not with
        pair metrics or ``process_group``.
    slices:
        Per-query metadata to split the queries by (a language, a category): one value
        per query, ``{dimension: values}`` or ``{dimension: (metadata, function)}``;
        ``result.slices[name][metric]`` is then each slice's value on its own queries
        (``retrieval_checks.engine._slices``; intervals: ``retrieval_checks.slice_intervals``).
        Checked before the pass. Not with ``process_group``.

    Returns
    -------
    EvaluationResult
        A mapping from canonical metric name to value, with per-query values, counts
        of used and skipped queries, thresholds and pair counts.
    """
    if process_group is not None:
        from ._distributed import evaluate_sharded

        if slices is not None:
            raise InputError(
                "slices= is not taken with process_group (each rank holds a shard of the queries): gather the "
                "result and the metadata, then call retrieval_checks.with_slices(result, slices)."
            )

        return evaluate_sharded(  # every option is checked there, once the ranks talk: a bad one raises on all
            process_group,
            queries,
            gallery,
            executor=executor,
            query_labels=query_labels,
            gallery_labels=gallery_labels,
            relevance=relevance,
            metrics=metrics,
            query_ids=query_ids,
            gallery_ids=gallery_ids,
            similarity=similarity,
            ties=ties,
            empty_queries=empty_queries,
            device=device,
            max_memory=max_memory,
            progress=progress,
            tile=tile,
            group_size=group_size,
            group_seed=group_seed,
            group_repeats=group_repeats,
            confidence=confidence,
            relevance_level=relevance_level,
            checkpoint=checkpoint,
            use_kernels=_use_kernels,
        )
    req = _options(
        metrics,
        similarity=similarity,
        ties=ties,
        empty_queries=empty_queries,
        group_size=group_size,
        group_seed=group_seed,
        group_repeats=group_repeats,
        confidence=confidence,
    )
    sides = _embeddings(queries, gallery, req.similarity)
    dims = None if slices is None else make_slices(slices, sides.n_q)  # before the pass
    own = _self_pairs(sides, query_ids, gallery_ids, gallery_labels)
    rel = _relevance(req, sides, own, query_labels, gallery_labels, relevance, relevance_level)
    pair_specs = req.of_kind("pair")
    if executor is not None:
        from ._executor import check_executor

        check_executor(executor, pair_specs)
    plan = plan_pass(
        list(sides.inputs),
        n_q=sides.n_q,
        n_g=sides.n_g,
        d=sides.d,
        loo=sides.loo,
        n_relevant=rel.n_relevant,
        device=device,
        max_memory=max_memory,
        tile=tile,
        pairs=bool(pair_specs),
    )
    problem = prepare_problem(
        plan,
        sides.queries,
        sides.gallery,
        n_g=sides.n_g,
        similarity=req.similarity,
        source=rel.source,
        self_pairs=own.csr,
    )
    totals = _run_pass(
        problem,
        plan,
        req,
        checkpoint,
        executor,
        (queries, gallery, query_labels, gallery_labels, relevance, query_ids, gallery_ids),
        n_positive=int(rel.n_relevant.sum()),
        progress=progress,
        use_kernels=_use_kernels,
        relevance_level=relevance_level,
    )
    if progress is not None and not isinstance(progress, bool):
        raise InputError(f"progress={progress!r}: use True, False or None (only on a terminal).")
    ids = None if query_ids is None else as_numpy(query_ids, "query_ids").copy()
    result = _aggregate(
        req, sides, own, rel, plan, problem, totals, _use_kernels, ids, relevance_level
    )
    return result if dims is None else attach_slices(result, dims)


def _run_pass(
    problem,
    plan: Plan,
    req: _Request,
    checkpoint,
    executor,
    inputs: tuple,
    *,
    n_positive: int,
    progress,
    use_kernels: bool,
    relevance_level,
) -> PassTotals:
    """The stream stage: in order (:func:`stream`), restartable (``checkpoint``,
    :mod:`._checkpoint`) and/or on an executor (:mod:`._executor`)."""
    kw = dict(
        query_specs=req.of_kind("query"),
        pair_specs=req.of_kind("pair"),
        n_positive=n_positive,
        ties=req.ties,
        progress=progress,
        use_kernels=use_kernels,
        relevance_level=relevance_level,
    )
    store = None
    if checkpoint is not None:
        from ._checkpoint import Checkpoint, stream_checkpointed

        store = Checkpoint(checkpoint, _fingerprint(req, *inputs, relevance_level, plan))
        if executor is None:
            return stream_checkpointed(problem, store, **kw)
    if executor is not None:
        from ._executor import stream_on

        totals = PassTotals(
            problem.n_q,
            kw["query_specs"],
            [],
            n_positive,
            req.ties,
            problem.similarity,
            relevance_level,
        )
        return stream_on(
            executor, problem, totals, use_kernels=use_kernels, store=store, progress=progress
        )
    return stream(problem, **kw)


def _fingerprint(req: _Request, *inputs_and_level_and_plan) -> str:
    """What a checkpoint's blocks depend on: the inputs' content, the options and the plan."""
    from ._backend import SCORES_VERSION
    from ._cache import content_digest

    *inputs, level, plan = inputs_and_level_and_plan
    options = repr(
        [[s.name for s in req.specs], req.similarity, req.ties, req.empty_queries, level]
    )
    return content_digest(*inputs, options, plan.b, plan.c, plan.backend.kind, SCORES_VERSION)


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
        totals.first_rank["pessimistic"], totals.first_rank["optimistic"], totals.first_group
    ), plan.backend.name
