"""``evaluate``: the public entry point of the engine."""

from __future__ import annotations

import math
import sys

import numpy as np

from ._backend import default_memory_budget, parse_memory, resolve_backend
from ..metrics._embedding import discriminant_ratio
from ._grouped import GroupedRecall, grouped_recall_values
from ._blocks import Problem, RelevanceSource, plan_blocks, run_binning_block, run_block
from ._inputs import Csr, as_numpy, check_embeddings, encode_ids, encode_labels, ranges_to_csr, relevance_to_csr
from ..metrics._names import MetricSpec, parse_metric
from ..metrics._pairs import NegativeTail, PairCounts, ceil_f32, pair_metric, pr_curve, tail_capacity
from ..metrics._ranking import aggregate, per_query_values
from ._result import EvaluationResult
from ..errors import EmptyQueriesError, InputError, MetricNameError

__all__ = ["evaluate"]

_SIMILARITIES = ("cosine", "dot", "neg_l2")
_TIES = ("pessimistic", "optimistic")
_EMPTY = ("skip", "error", "zero")


def _choice(value, allowed, name):
    if value not in allowed:
        raise InputError(f"{name}={value!r} is not one of {', '.join(map(repr, allowed))}.")
    return value


def _parse_all(metrics) -> list[MetricSpec]:
    if isinstance(metrics, str):
        metrics = [metrics]
    try:
        metrics = list(metrics) if metrics is not None else []
    except TypeError:
        raise MetricNameError(f"metrics must be a name or a list of names, got {type(metrics).__name__}.", name="") from None
    if len(metrics) == 0:
        raise MetricNameError(
            "metrics is empty: name at least one metric, e.g. metrics=['map', 'hit_rate@1', 'map@R'].", name=""
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
        specs.setdefault(s.name, s)
    return list(specs.values())


def _self_pairs(q_codes: np.ndarray, g_codes: np.ndarray) -> Csr:
    order = np.argsort(g_codes, kind="stable").astype(np.int64)
    srt = g_codes[order]
    lo = np.searchsorted(srt, q_codes, side="left")
    hi = np.searchsorted(srt, q_codes, side="right")
    return ranges_to_csr(order, lo, hi)


def _first(indices, n=5):
    shown = ", ".join(str(int(i)) for i in indices[:n])
    return shown + (", ..." if len(indices) > n else "")


def _progress(enabled, total):
    if enabled is None:
        enabled = total > 8 and sys.stderr.isatty()
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="retrieval-checks", unit="block", leave=False)


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
    similarity: str = "cosine",
    ties: str = "pessimistic",
    empty_queries: str = "skip",
    device="auto",
    max_memory=None,
    progress: bool | None = None,
    tile: tuple[int, int] | None = None,
    group_size: int = 10,
    group_seed: int = 0,
    group_repeats: int = 1,
    confidence: float = 0.95,
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
        (one per query) or a dict ``{query index: gallery indices}``.
    metrics:
        Canonical metric names or aliases (see ``METRICS.md``): ``hit_rate@K``,
        ``recall@K``, ``precision@K``, ``map``, ``map@K``, ``map_cut@K``,
        ``map_capped@K``, ``map@R``, ``r_precision``, ``mrr``, ``medr``, ``meanr``,
        ``pair_precision@t=T``, ``pair_recall@t=T``, ``pair_f1@t=T``,
        ``recall_at_precision@P``, ``precision_at_recall@Q``, ``discriminant_ratio``.
    query_ids, gallery_ids:
        Item ids; a gallery item with the query's id is the query itself and is
        removed from its ranking (any overlap, any order, duplicates included).
        Leave-one-out uses the row index unless ``query_ids`` is given.
    similarity:
        ``"cosine"`` (default), ``"dot"`` or ``"neg_l2"`` (negative Euclidean distance).
        Pair thresholds are in these units.
    ties:
        ``"pessimistic"`` (default: a relevant item ranks after every non-relevant
        item with an equal score) or ``"optimistic"``. Both are exact.
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
    group_size, group_seed, group_repeats, confidence:
        For ``grouped_recall@K``: S labels per group (default 10, the paper's choice),
        the partition's seed, the number of partitions averaged, and the confidence of
        the interval in ``result.intervals`` (details in ``result.grouped``).

    Returns
    -------
    EvaluationResult
        A mapping from canonical metric name to value, with per-query values, counts
        of used and skipped queries, thresholds and pair counts.
    """
    specs = _parse_all(metrics)
    _choice(similarity, _SIMILARITIES, "similarity")
    _choice(ties, _TIES, "ties")
    _choice(empty_queries, _EMPTY, "empty_queries")

    queries = check_embeddings(queries, "queries", similarity=similarity)
    n_q, d = int(queries.shape[0]), int(queries.shape[1])
    loo = gallery is None
    if loo:
        if gallery_labels is not None:
            raise InputError("gallery_labels was given without a gallery; pass gallery=... or drop gallery_labels.")
        if gallery_ids is not None:
            raise InputError("gallery_ids was given without a gallery; leave-one-out uses query_ids for both sides.")
        n_g = n_q
        g_name_labels, g_name_ids = "query_labels", "query_ids"
    else:
        gallery = check_embeddings(gallery, "gallery", similarity=similarity)
        n_g = int(gallery.shape[0])
        if int(gallery.shape[1]) != d:
            raise InputError(
                f"queries have dimension {d} but gallery has dimension {int(gallery.shape[1])}; "
                "both must come from the same embedding space."
            )
        g_name_labels, g_name_ids = "gallery_labels", "gallery_ids"

    # --- self pairs -----------------------------------------------------------------
    self_ids = (None, None)
    if loo:
        if query_ids is None:
            self_ids_loo = np.arange(n_q, dtype=np.int64)
            self_pairs = Csr(np.arange(n_q + 1, dtype=np.int64), self_ids_loo)
        else:
            self_ids_loo, _ = encode_ids(query_ids, query_ids, n_q, n_q, "query_ids")
            self_pairs = _self_pairs(self_ids_loo, self_ids_loo)
    elif query_ids is None and gallery_ids is None:
        self_pairs = Csr(np.zeros(n_q + 1, np.int64), np.zeros(0, np.int64))
    elif query_ids is None or gallery_ids is None:
        missing = "query_ids" if query_ids is None else "gallery_ids"
        raise InputError(f"{missing} is missing: self-exclusion needs ids on both sides (or on neither).")
    else:
        qc, gc = encode_ids(query_ids, gallery_ids, n_q, n_g, g_name_ids)
        self_pairs = _self_pairs(qc, gc)
        self_ids = (qc, gc)

    # --- relevance ------------------------------------------------------------------
    need_labels = any(s.kind in ("embedding", "grouped") for s in specs)
    g_codes = q_codes = label_values = None
    if relevance is not None:
        if query_labels is not None or gallery_labels is not None:
            raise InputError("Give either labels or relevance, not both: relevance replaces the label rule.")
        if need_labels:
            names = ", ".join(s.name for s in specs if s.kind in ("embedding", "grouped"))
            raise InputError(f"{names} need(s) class labels; it cannot be computed from relevance alone.")
        source = RelevanceSource(csr=relevance_to_csr(relevance, n_q, n_g), self_pairs=self_pairs, n_g=n_g)
    else:
        if query_labels is None:
            raise InputError("query_labels is missing: pass one label per query, or pass relevance=... instead.")
        if not loo and gallery_labels is None:
            raise InputError("gallery_labels is missing: pass one label per gallery item.")
        q_codes, g_codes, label_values = encode_labels(
            query_labels, query_labels if loo else gallery_labels, n_q, n_g, g_name_labels
        )
        source = RelevanceSource(q_codes=q_codes, g_codes=g_codes, self_pairs=self_pairs, n_g=n_g)

    n_relevant = source.counts(n_q)
    n_candidates = n_g - self_pairs.row_counts()
    if (n_candidates == 0).any():
        idx = np.flatnonzero(n_candidates == 0)
        raise InputError(
            f"{idx.size} quer{'y has' if idx.size == 1 else 'ies have'} no gallery item left after self-exclusion "
            f"(queries {_first(idx)}); the gallery must hold more than the query itself."
        )
    for s in specs:
        if s.k is not None and s.k > int(n_candidates.min()):
            raise InputError(
                f"{s.name}: K={s.k} is larger than the gallery a query ranks ({int(n_candidates.min())} items after "
                f"self-exclusion); use K <= {int(n_candidates.min())}."
            )

    query_specs = [s for s in specs if s.kind == "query"]
    pair_specs = [s for s in specs if s.kind == "pair"]
    grouped_specs = [s for s in specs if s.kind == "grouped"]
    run_pass = bool(query_specs or pair_specs)
    empty = np.flatnonzero(n_relevant == 0)
    if empty.size and (query_specs or pair_specs):
        if empty_queries == "error":
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

    # --- plan -----------------------------------------------------------------------
    backend = resolve_backend(device, [queries] + ([] if loo else [gallery]))
    budget = parse_memory(max_memory) or default_memory_budget(backend)
    if tile is not None:
        if (not isinstance(tile, (tuple, list)) or len(tile) != 2
                or not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) and t >= 1 for t in tile)):
            raise InputError(f"tile={tile!r}: give (query block height, gallery chunk width), two positive integers.")
        b, c = int(tile[0]), int(tile[1])
    else:
        # as few chunks of at most 4096 (CUDA: 32768) columns as cover the gallery, all
        # of equal width, so the GEMMs do no more than ~16 padded columns of extra work
        c_max = 32768 if backend.is_cuda else 4096
        c = -(-n_g // -(-n_g // c_max))
        b = None
    # Chunk widths are multiples of 16: BLAS edge kernels for a ragged width sum in
    # another order, and duplicate gallery vectors would stop tying bit-for-bit.
    c = -(-c // 16) * 16
    n_chunks = -(-n_g // c)
    # the budget covers the float32 copies of the inputs, then the working set
    inputs = 4 * d * (n_chunks * c + (0 if loo else n_q))
    room = max(budget - inputs, budget // 10)
    if b is None:
        r_max = int(n_relevant.max()) if n_relevant.size else 0
        per_row = n_chunks * c * 4 + 48 * r_max + (16 * c if backend.is_cuda else 0)
        if backend.is_cuda and pair_specs:
            # the vectorised pair path holds a mask, a copy and a comparison of the block
            per_row += n_chunks * c * 6
        b = int(max(1, min(n_q, 2048, (room * 8 // 10) // per_row)))
    b = min(b, n_q)

    # float32 copies on the backend: the gallery padded to whole chunks; in
    # leave-one-out the queries are a view of it rather than a second copy. Cosine rows
    # are normalised, and neg_l2 rows centred on the gallery mean rounded to integers
    # (distances do not change; the float32 expansion |q|^2 + |g|^2 - 2 q.g loses less;
    # integer data stay exact), in float64 from the inputs' own precision before the cast.
    Gp = backend.zeros((n_chunks * c, d))
    G = backend.native(queries if loo else gallery)
    center = backend.mean64(G) if similarity == "neg_l2" else None
    backend.float32_into(G, Gp[:n_g], normalize=similarity == "cosine", center=center)
    del G
    if loo:
        Q = Gp[:n_g]
    else:
        Q = backend.float32_into(backend.native(queries), backend.empty((n_q, d)),
                                 normalize=similarity == "cosine", center=center)
    qn = gn = None
    if similarity == "neg_l2":
        qn = backend.sqnorm(Q)
        gn = backend.zeros((n_chunks * c,))
        gn[:n_g] = backend.sqnorm(Gp[:n_g])
    problem = Problem(
        backend=backend, Q=Q, Gp=Gp, n_g=n_g, c=c, b=b, similarity=similarity,
        strict=(ties == "optimistic"), relevant=source, self_pairs=self_pairs, qn=qn, gn=gn,
    )

    # --- the pass -------------------------------------------------------------------
    n_pos = int(n_relevant.sum())
    want_pairs = bool(pair_specs)
    if want_pairs and n_pos == 0:
        raise InputError("Pair metrics need at least one relevant (positive) pair; none was found.")
    tail = NegativeTail(tail_capacity(pair_specs, n_pos)) if want_pairs else None
    fixed = sorted({float(s.level) for s in pair_specs if s.family in ("pair_precision", "pair_recall", "pair_f1")})
    fixed_f32 = np.array([ceil_f32(t) for t in fixed], np.float32)
    fixed_fp = np.zeros(len(fixed), np.int64)
    positives: list[np.ndarray] = []

    per_query = {s.name: np.full(n_q, np.nan) for s in query_specs}
    first_rank = np.zeros(n_q, np.int64)
    blocks = plan_blocks(n_q, b) if run_pass else []
    bar = _progress(progress, len(blocks))
    try:
        with backend.exact_matmul():
            for start, stop in blocks:
                part = run_block(
                    problem, start, stop, want_pairs=want_pairs,
                    tail_tau=tail.tau if tail is not None else -math.inf,
                    fixed_thresholds=fixed_f32, use_kernels=_use_kernels,
                    tail_capacity=tail.capacity if tail is not None else None,
                )
                counts = np.diff(part.indptr)
                rid = np.repeat(np.arange(stop - start, dtype=np.int64), counts)
                vals = per_query_values(query_specs, rid, part.position, part.rank, counts)
                for name, v in vals.items():
                    per_query[name][start:stop] = v
                best = part.position == 0
                first_rank[start + rid[best]] = part.rank[best]
                if want_pairs:
                    positives.append(part.positives)
                    tail.add(part.negatives, part.negatives_tau)
                    if part.fixed_fp is not None:
                        fixed_fp += part.fixed_fp
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()

    # --- empty-query policy and aggregation --------------------------------------------
    values: dict[str, float] = {}
    skipped = empty if empty_queries == "skip" else np.zeros(0, np.int64)
    if empty.size and empty_queries == "zero":
        for s in query_specs:
            if s.unit == "rank":
                per_query[s.name][empty] = n_candidates[empty] + 1
            else:
                per_query[s.name][empty] = 0.0

    thresholds: dict[str, float | None] = {}
    pair_counts: dict[str, dict] = {}
    if want_pairs:
        n_neg = int((n_candidates - n_relevant).sum())
        counts_obj = PairCounts(
            positives=np.sort(np.concatenate(positives)),
            n_negative=n_neg,
            tail=tail,
            fixed_fp={t: int(fp) for t, fp in zip(fixed, fixed_fp)},
        )
    for s in specs:
        if s.kind == "query":
            values[s.name] = aggregate(s, per_query[s.name])
        elif s.kind == "pair":
            value, thr, detail, need_bins = pair_metric(s, counts_obj)
            if need_bins:
                counts_obj.fp_at = _binning_pass(problem, blocks, counts_obj, _use_kernels)
                value, thr, detail, _ = pair_metric(s, counts_obj)
            values[s.name] = value
            thresholds[s.name] = thr
            pair_counts[s.name] = {**detail, "n_positive": n_pos, "n_negative": counts_obj.n_negative}
        elif s.kind == "embedding":
            emb = queries if loo else gallery
            labels_side = g_codes
            values[s.name] = float(discriminant_ratio(as_numpy(emb, "embeddings"), labels_side))

    curve = pr_curve(counts_obj) if want_pairs and any(s.family in ("recall_at_precision", "precision_at_recall")
                                                      for s in specs) else None
    grouped: dict[str, GroupedRecall] = {}
    intervals: dict[str, tuple[float, float]] = {}
    if grouped_specs:
        Qn = backend.to_numpy(Q)
        Gn = None if loo else backend.to_numpy(Gp[:n_g])
        if loo:
            q_id_codes = self_ids_loo
            g_id_codes = None
        else:
            q_id_codes, g_id_codes = self_ids
        found = grouped_recall_values(
            Qn, q_codes, Gn, None if loo else g_codes, q_ids=q_id_codes, g_ids=g_id_codes,
            ks=sorted({s.k for s in grouped_specs}), group_size=group_size, seed=group_seed,
            repeats=group_repeats, confidence=confidence, ties=ties, similarity=similarity,
            label_values=label_values, max_memory=room, empty_queries=empty_queries,
        )
        for s in grouped_specs:
            g = found[s.k]
            values[s.name] = g.value
            intervals[s.name] = g.interval
            grouped[s.name] = g
            per_query[s.name] = g.per_query
        values = {s.name: values[s.name] for s in specs}  # the requested order

    config = {
        "similarity": similarity,
        "ties": ties,
        "empty_queries": empty_queries,
        "backend": backend.name,
        "n_gallery": n_g,
        "leave_one_out": loo,
        "block": b,
        "chunk": c,
        "max_memory": budget,
    }
    return EvaluationResult(
        specs=specs,
        values=values,
        per_query=per_query,
        thresholds=thresholds,
        pair_counts=pair_counts,
        n_relevant=n_relevant,
        n_candidates=n_candidates,
        first_relevant_rank=first_rank,
        skipped_queries=skipped,
        config=config,
        intervals=intervals,
        grouped=grouped,
        pr_curve=curve,
        query_label_codes=q_codes,
        label_values=label_values,
    )


def _binning_pass(problem: Problem, blocks, counts: PairCounts, use_kernels: bool) -> np.ndarray:
    """Negatives at or above every unique positive score, from a second pass."""
    u = counts.unique_positives()
    hist = np.zeros(u.size + 1, np.int64)
    with problem.backend.exact_matmul():
        for start, stop in blocks:
            run_binning_block(problem, start, stop, u, hist, use_kernels)
    # negatives >= u[t] are those with more than t positives <= them
    return np.cumsum(hist[::-1])[::-1][1:]
