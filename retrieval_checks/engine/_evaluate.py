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

from .._arrays import as_numpy
from ..errors import InputError
from ..options import DEFAULTS
from . import _backend
from ._backend import check_run_options
from ._checkpoint import Checkpoint, check_directory
from ._digest import content_digest
from ._executor import check_executor
from ._first_ranks import first_relevant_ranks
from ._plan import Plan, plan_pass, prepare_problem
from ._result import EvaluationResult
from ._slices import attach_slices, make_slices
from ._stages import (
    Request,
    aggregate_result,
    check_queries_in_gallery,
    embedding_sides,
    parse_request,
    relevance_of,
    self_pairs_of,
)
from ._stream import PassTotals, stream
from .distributed._sharded import evaluate_sharded

__all__ = ["evaluate", "first_relevant_ranks"]


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
    ignore_identical_ids: bool = False,
    process_group=None,
    checkpoint=None,
    executor=None,
    slices=None,
    _use_kernels: bool = True,
    _self_match_fails: bool = False,
) -> EvaluationResult:
    """Evaluate retrieval metrics exactly, in one memory-bounded streamed pass.

    Parameters
    ----------
    queries:
        (n_q x d) embeddings, numpy array or torch tensor on any device.
    gallery:
        (n_g x d) embeddings, or None for leave-one-out over the queries (each query
        ranks all the other queries). Queries that are also gallery rows relevant to
        them (the same array passed twice, or queries stacked into the gallery) draw a
        :class:`~retrieval_checks.errors.SelfMatchWarning` with the counts: each
        retrieves itself (first, under cosine or euclidean; give ``query_ids`` and
        ``gallery_ids`` to leave each query's own item out of its ranking; a YAML suite
        fails such a check).
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
        binary metrics count grades >= ``relevance_level``. The keys and indices are
        row positions (query row, gallery row), also when ``query_ids`` /
        ``gallery_ids`` are given: ids name items for self-exclusion and reports, not
        for looking up relevance (a run's qrels, :func:`evaluate_run`, are keyed by id).
    metrics:
        Canonical metric names or aliases (see ``METRICS.md``): ``hit_rate@K``,
        ``recall@K``, ``precision@K``, ``map``, ``map@K``, ``map_cut@K``,
        ``map_capped@K``, ``map@R``, ``r_precision``, ``mrr``, ``medr``, ``meanr``,
        ``ndcg@K``, ``ndcg`` (``ndcg_exp``: the same on binary relevance), ``mrr@K``,
        ``f1@K``, ``recall_cap@K``, ``dcg@K``, ``rbp@p``, ``gm_map``, ``bpref`` and
        ``rbp_residual@p`` (every gallery item is judged: an item that is not relevant
        is a judged non-relevant one, so the residual is 0),
        ``iprec_at_recall@L``, ``iprec_11pt``, ``pair_precision@t=T``,
        ``pair_recall@t=T``, ``pair_f1@t=T``, ``recall_at_precision@P``,
        ``precision_at_recall@Q``, ``discriminant_ratio``; trec_eval's, BEIR's and
        ranx's names of the same measures are aliases (``P_10``, ``ndcg_cut_10``...).
    query_ids, gallery_ids:
        Item ids; a gallery item with the query's id is the query itself and is
        removed from its ranking and from its relevant items (self-exclusion: any
        overlap, any order, duplicates included). Leave-one-out uses the row index
        unless ``query_ids`` is given.
    ignore_identical_ids:
        BEIR's rule (``EvaluateRetrieval.evaluate(..., ignore_identical_ids=True)``): a
        gallery item whose id is the query's leaves the query's ranking but stays in
        its relevant items (R and the ideal DCG count it, as BEIR's qrels still do);
        a query whose only relevant item is its own scores 0 (ranks: n_candidates + 1).
        Needs ``query_ids`` and ``gallery_ids`` (leave-one-out: the row index unless
        ``query_ids``); ranking metrics only (not pair metrics or grouped recall).
        ``result.config["identical_ids_dropped"]`` counts the items left out.
    similarity:
        ``"cosine"`` (default), ``"dot"``, ``"neg_l2"`` (negative Euclidean distance) or
        ``"hamming"`` (binary codes: {0,1}, +-1 or bool arrays, or ``np.packbits`` uint8
        rows; ranked by increasing Hamming distance). Pair thresholds are in these
        units: minus a distance for neg_l2, a distance in bits for hamming. Integer data
        within float32's exact range rank exactly on every backend (docs/explanation/engine.md,
        "Exact scores").
    ties:
        ``"pessimistic"`` (default: a relevant item ranks after every non-relevant
        item with an equal score, so a constant scorer gets the worst value),
        ``"optimistic"`` (before them) or ``"average"`` (the exact expected value over
        every order of the tied items, equally likely: McSherry and Najork, 2008). All
        exact; the result also carries the pessimistic and optimistic values and the
        range over tie orders (``result.tie_values``, ``result.tie_range``).
    empty_queries:
        Queries without a relevant gallery item: ``"skip"`` (excluded from the means,
        counted in ``n_skipped``, listed in ``skipped_queries``), ``"error"``, or
        ``"zero"`` (score 0; for ``medr`` and ``meanr`` rank n_candidates + 1).
    device:
        ``"auto"`` (the device of CUDA tensors, else CUDA when available, else CPU),
        ``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"torch-cpu"`` or ``"numpy"`` (force torch's
        or numpy's CPU BLAS; ``"cpu"`` uses torch's when torch is installed: numpy's
        OpenBLAS threads keep spinning after each product and halve the speed of the scan
        that follows). The same numbers on every device for data within the exactness
        contract; for other float data, wherever the backends' GEMM products agree.
    max_memory:
        Budget for the working set of the pass, bytes or a string like ``"2GiB"``.
        Default: a quarter of free RAM up to 256 MiB (GPU: a quarter of free memory up
        to 8 GiB). Scores are float32, so a block of ``b`` queries takes
        ``4 * b * n_g`` bytes.
    progress:
        Show a progress bar (tqdm), in queries done; default: only on a terminal and for
        long passes (more than 8 query blocks of the plan). A pass the fused CPU counter
        runs as one task moves it panel by panel.
    tile:
        ``(query block height, gallery chunk width)`` to override the planner; the
        width is rounded up to a multiple of 16 so that equal scores stay bit-equal.
    relevance_level:
        With graded relevance: the lowest grade the binary metrics (hit_rate, recall,
        map, ...) count as relevant (default 1, as trec_eval's ``-l``); a query without
        such an item is an empty query: under ``empty_queries="skip"`` it leaves every
        mean, under ``"zero"`` the binary metrics score 0 and nDCG / DCG keep their
        graded value (trec_eval's rule).
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
        refused, a damaged block (each carries the fingerprint and a checksum) is
        computed again with a warning naming it, and a directory that cannot be written
        is refused before the pass. With ``process_group`` each rank writes its own files.
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

    Raises
    ------
    InputError
        An invalid array (NaN or infinite rows, all-zero rows under cosine, mismatched
        dimensions or lengths), labels, ids, relevance or option, named with the fix;
        raised before any work starts.
    MetricNameError
        An unknown or malformed metric name, with the closest canonical one.
    EmptyQueriesError
        ``empty_queries="error"`` and a query has no relevant gallery item.
    BackendError
        The device asked for is not available.

    Examples
    --------
    Leave-one-out over four items of two classes (each item queries the other three):

    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> res = rc.evaluate(x, query_labels=[0, 0, 1, 1], metrics=["map", "hit_rate@1"])
    >>> res["map"], res["hit_rate@1"]
    (0.75, 0.5)
    >>> res.n_used, res.n_skipped
    (4, 0)
    >>> res.per_query["hit_rate@1"]  # item 1's nearest neighbour, item 3, is of the other class
    array([1., 0., 1., 0.])
    """
    if process_group is not None:
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
            ignore_identical_ids=ignore_identical_ids,
            checkpoint=checkpoint,
            use_kernels=_use_kernels,
            self_match_fails=_self_match_fails,
        )
    check_run_options(device, max_memory, progress, tile)  # before any work
    if checkpoint is not None:
        check_directory(checkpoint)
    req = parse_request(
        metrics,
        similarity=similarity,
        ties=ties,
        empty_queries=empty_queries,
        group_size=group_size,
        group_seed=group_seed,
        group_repeats=group_repeats,
        confidence=confidence,
        ignore_identical_ids=ignore_identical_ids,
        relevance_level=relevance_level,
    )
    pair_specs = req.of_kind("pair")
    if executor is not None:
        check_executor(executor, pair_specs)
    sides = embedding_sides(queries, gallery, req.similarity)
    dims = None if slices is None else make_slices(slices, sides.n_q)  # before the pass
    own = self_pairs_of(sides, query_ids, gallery_ids, gallery_labels, req.ignore_identical_ids)
    rel = relevance_of(req, sides, own, query_labels, gallery_labels, relevance, relevance_level)
    self_matched, every_self = check_queries_in_gallery(
        sides, own, rel, every_fails=_self_match_fails
    )
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
        unranked=rel.unranked,
    )
    ids = None if query_ids is None else as_numpy(query_ids, "query_ids").copy()
    result = aggregate_result(
        req, sides, own, rel, plan, problem, totals, _use_kernels, ids, relevance_level
    )
    result.self_matched = self_matched  # a gate refuses a result in which every query is one
    result.self_matched_all = every_self  # ... each with its own copy in the gallery
    return result if dims is None else attach_slices(result, dims)


def _run_pass(
    problem,
    plan: Plan,
    req: Request,
    checkpoint,
    executor,
    inputs: tuple,
    *,
    n_positive: int,
    progress,
    use_kernels: bool,
    relevance_level,
    unranked=None,
) -> PassTotals:
    """The stream stage: one loop (:func:`stream`), restartable (``checkpoint``,
    :mod:`._checkpoint`) and/or on an executor (:mod:`._executor`)."""
    kw = dict(
        query_specs=req.of_kind("query"),
        pair_specs=req.of_kind("pair"),
        n_positive=n_positive,
        ties=req.ties,
        progress=progress,
        use_kernels=use_kernels,
        relevance_level=relevance_level,
        unranked=unranked,
    )
    if executor is not None:
        kw["pair_specs"] = []  # refused with an executor (check_executor)
    store = None
    if checkpoint is not None:
        store = Checkpoint(checkpoint, _fingerprint(req, *inputs, relevance_level, plan))
    return stream(problem, store=store, executor=executor, **kw)


def _fingerprint(req: Request, *inputs_and_level_and_plan) -> str:
    """What a checkpoint's blocks depend on: the inputs' content, the options and the plan."""
    *inputs, level, plan = inputs_and_level_and_plan
    options = repr(
        [[s.name for s in req.specs], req.similarity, req.ties, req.empty_queries, level]
    )
    version = _backend.SCORES_VERSION  # the running engine's (read at the call)
    return content_digest(*inputs, options, plan.b, plan.c, plan.backend.kind, version)
