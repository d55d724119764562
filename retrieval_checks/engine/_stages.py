"""The stages of an evaluation around the pass, shared by the one-process and the
sharded entry points: the request (metric names and options, checked), the inputs'
sides, the self pairs, the relevance and the aggregation of the merged pass into an
:class:`~._result.EvaluationResult` (query metrics, pair metrics, grouped recall,
embedding metrics)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._arrays import as_numpy
from ..errors import EmptyQueriesError, InputError, MetricNameError, SelfMatchWarning, warn_outside
from ..metrics._embedding import discriminant_ratio
from ..metrics._names import MetricSpec
from ..metrics._pairs import pair_metric, pr_curve
from ..metrics._policies import GRADED, parse_metric_list
from ..metrics._ranking import aggregate
from ..options import check_embedding_ties, check_option
from ._blocks import RelevanceSource
from ._fused_tasks import grouped_kernel
from ._grouped import GroupedRecall, grouped_recall_values, label_partition
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
from ._plan import Plan
from ._result import EvaluationResult, self_match_message
from ._stream import FirstRanks, PassTotals, Unranked, binning_pass

__all__ = [
    "Relevance",
    "Request",
    "SelfPairs",
    "Sides",
    "aggregate_result",
    "check_queries_in_gallery",
    "embedding_sides",
    "first_items",
    "grouped_options",
    "parse_request",
    "relevance_of",
    "row_keys",
    "self_pairs_of",
]


# ----------------------------------------------------------------------------- options
@dataclass(frozen=True)
class Request:
    """Validated metric names and options."""

    specs: list
    similarity: str
    ties: str
    empty_queries: str
    group_size: int
    group_seed: int
    group_repeats: int
    confidence: float
    ignore_identical_ids: bool = False

    def of_kind(self, *kinds: str) -> list[MetricSpec]:
        return [s for s in self.specs if s.kind in kinds]


def _parse_all(metrics) -> list[MetricSpec]:
    specs = parse_metric_list(metrics, "['map', 'hit_rate@1', 'map@R']")
    for s in specs:
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
    return specs


def _check_identical(value, specs: list[MetricSpec]) -> bool:
    """``ignore_identical_ids``: True or False; with True, only metrics of a ranking."""
    if not isinstance(value, bool):
        raise InputError(
            f"ignore_identical_ids={value!r}: expected True or False (True: BEIR's rule, a gallery "
            "item whose id is the query's leaves its ranking but stays relevant)."
        )
    other = [s.name for s in specs if s.kind not in ("query", "embedding")]
    if value and other:
        raise InputError(
            f"ignore_identical_ids=True applies to ranking metrics; {', '.join(other)} would have to "
            "count the query's own item as a pair or a group member it is not ranked as: evaluate "
            "them in a separate call without ignore_identical_ids (self-exclusion drops the item "
            "from both sides)."
        )
    return value


def parse_request(
    metrics,
    *,
    similarity,
    ties,
    empty_queries,
    group_size,
    group_seed,
    group_repeats,
    confidence,
    ignore_identical_ids=False,
    relevance_level=1,
) -> Request:
    specs = _parse_all(metrics)
    check_level(relevance_level, specs)  # its type and its conflict with pair metrics
    return Request(
        specs=specs,
        similarity=check_option("similarity", similarity),
        ties=check_embedding_ties(ties),
        empty_queries=check_option("empty_queries", empty_queries),
        group_size=check_option("group_size", group_size),
        group_seed=check_option("seed", group_seed, argument="group_seed"),
        group_repeats=check_option("group_repeats", group_repeats),
        confidence=check_option("confidence", confidence),
        ignore_identical_ids=_check_identical(ignore_identical_ids, specs),
    )


# ----------------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class Sides:
    queries: object
    gallery: object  # None in leave-one-out
    n_q: int
    n_g: int
    d: int
    inputs: tuple = ()  # the arrays as given (hamming: queries and gallery are PackedCodes)

    @property
    def loo(self) -> bool:
        return self.gallery is None


def embedding_sides(queries, gallery, similarity: str) -> Sides:
    if similarity == "hamming":  # validated and packed now, both sides, before any other work
        q, g = pack_sides(queries, gallery)
        inputs = (queries,) if gallery is None else (queries, gallery)
        return Sides(q, g, q.shape[0], (q if g is None else g).shape[0], q.shape[1], inputs)
    queries = check_embeddings(queries, "queries", similarity=similarity)
    n_q, d = int(queries.shape[0]), int(queries.shape[1])
    if gallery is None:
        check_score_range(queries, None, similarity)
        return Sides(queries, None, n_q, n_q, d, (queries,))
    gallery = check_embeddings(gallery, "gallery", similarity=similarity)
    if int(gallery.shape[1]) != d:
        raise InputError(
            f"queries have dimension {d} but gallery has dimension {int(gallery.shape[1])}; "
            "both must come from the same embedding space."
        )
    check_score_range(queries, gallery, similarity)
    return Sides(queries, gallery, n_q, int(gallery.shape[0]), d, (queries, gallery))


# ----------------------------------------------------------------------------- queries in the gallery
def _rows_f64(x, rows=None, cols=None) -> np.ndarray:
    """Rows ``rows`` (all: None) and the first ``cols`` columns (all: None) of a dense
    numpy array or torch tensor (any device: numpy indices index both), as float64 on
    the host (exact for every float and integer dtype the engine takes; -0.0 made 0.0,
    so equal values compare equal)."""
    part = x if cols is None else x[:, :cols]
    if rows is not None:
        part = part[rows]
    return np.asarray(as_numpy(part, "embeddings"), dtype=np.float64) + 0.0


#: random odd weights of the rows' key (:func:`row_keys`), drawn once, fixed across runs
_KEY_WEIGHTS = np.random.default_rng(20261128).integers(1, 2**63, size=4096, dtype=np.uint64) | 1


def row_keys(x, d: int, rows=None, first=None) -> np.ndarray:
    """One uint64 key per row of ``x`` (a numpy array or tensor of ``d`` columns; the
    rows ``rows``, all: None; its first ``first`` columns, all: None): the weighted sum,
    modulo 2**64, of the bits of its float64 values (-0.0 made 0.0), so equal rows have
    equal keys whatever their dtype, and unequal rows almost never do. A chunk of rows
    at a time (4M values)."""
    n = int(x.shape[0]) if rows is None else int(rows.size)
    width = d if first is None else min(first, d)
    out = np.empty(n, np.uint64)
    w = _KEY_WEIGHTS[np.arange(width) % _KEY_WEIGHTS.size]
    step = max(1, (1 << 22) // max(width, 1))
    for s in range(0, n, step):
        part = x[s : s + step] if rows is None else x[rows[s : s + step]]
        bits = _rows_f64(part, cols=None if width == d else width).view(np.uint64)
        out[s : s + bits.shape[0]] = (bits * w).sum(axis=1, dtype=np.uint64)
    return out


def _keys(sides: Sides) -> tuple[np.ndarray, np.ndarray]:
    """The queries' and the gallery's row keys: of the first 16 columns first (cheap,
    contiguous), then of the whole row for the rows whose first key another row shares
    (duplicates, and quantized or sparse rows that agree on those columns), so that equal
    keys are equal rows, at a fraction of the cost of hashing every value of continuous
    embeddings."""
    d, first = sides.d, 16
    qk = row_keys(sides.queries, d, first=first)
    gk = qk if sides.loo else row_keys(sides.gallery, d, first=first)
    if d <= first:
        return qk, gk
    both = qk if sides.loo else np.concatenate([qk, gk])
    _, inv, counts = np.unique(both, return_inverse=True, return_counts=True)
    shared = counts[inv] > 1
    q_rows = np.flatnonzero(shared[: sides.n_q])
    if q_rows.size:
        qk = qk.copy()
        qk[q_rows] = row_keys(sides.queries, d, rows=q_rows)
    if sides.loo:
        return qk, qk
    g_rows = np.flatnonzero(shared[sides.n_q :])
    if g_rows.size:
        gk = gk.copy()
        gk[g_rows] = row_keys(sides.gallery, d, rows=g_rows)
    return qk, gk


def queries_in_gallery(sides: Sides, wanted=None) -> tuple[np.ndarray, np.ndarray]:
    """For each query, the index of a gallery row equal to it value for value (-1: none),
    and how many gallery rows share its values (1: the query's own copy, not one of
    several equal items). In leave-one-out the gallery is the other queries: a row equal
    to the query, not the query itself, and the count leaves the query out. ``wanted``
    (rows, cols) -> bool: the equal rows to report (default every one; the first 8 of a
    query's equal rows are tried). Whole-row keys (:func:`_keys`) find the
    candidates, whose rows are then compared value for value: O((n_q + n_g) d + n_g log
    n_g)."""
    n_q, n_g = sides.n_q, sides.n_g
    found = np.full(n_q, -1, np.int64)
    equal = np.zeros(n_q, np.int64)
    if n_q == 0 or n_g == 0:
        return found, equal
    gallery = sides.queries if sides.loo else sides.gallery
    own = int(sides.loo)  # leave-one-out: the query's own row shares its key too
    qk, gk = _keys(sides)
    order = np.argsort(gk, kind="stable")
    srt = gk[order]
    lo = np.searchsorted(srt, qk, side="left")
    hi = np.searchsorted(srt, qk, side="right")
    cand = np.flatnonzero(hi - lo > own)
    if cand.size == 0:
        return found, equal
    lo, hi = lo[cand], hi[cand]
    step = 1 << 14  # candidates compared a chunk at a time (host copies of their rows)
    for s in range(0, cand.size, step):
        c, a, e = cand[s : s + step], lo[s : s + step], hi[s : s + step]
        Qc = _rows_f64(sides.queries, rows=c)
        for t in range(min(int((e - a).max()), 8 + own)):  # the first 8 equal rows
            live = (found[c] < 0) & (a + t < e)
            if not live.any():
                break
            g = order[np.minimum(a + t, srt.size - 1)]
            same = live & (g != c if own else True) & (Qc == _rows_f64(gallery, rows=g)).all(axis=1)
            if wanted is not None and same.any():
                same[same] = wanted(c[same], g[same])
            found[c[same]] = g[same]
            equal[c[same]] = (e - a - own)[same]
    return found, equal


def check_queries_in_gallery(
    sides: Sides, own: SelfPairs, rel, every_fails: bool = False
) -> tuple[int, bool]:
    """The number of queries that are also gallery rows relevant to them (0: none, or
    not checked) and whether every query is, with its own copy (the refusal's case), and
    a warning (:class:`~retrieval_checks.errors.SelfMatchWarning`, with the counts, on
    the user's line: :func:`~retrieval_checks.errors.warn_outside`) where queries are
    also gallery rows relevant to them, value for value: the same array or file given as
    both sides, or queries stacked into the gallery. Each such query retrieves its own
    row first and scores near 1 whatever the model; a suite fails the check when every
    query does. Equal rows that are not relevant to the query are ordinary ties
    (discrete embeddings coincide) and say nothing. In leave-one-out the same holds for
    an item equal to other items relevant to it that are not its whole class (the same
    rows stacked twice); equal rows that are a whole class (a model that maps each class
    to one point) are ties, but a one-item class's copy is a leak (the two cannot be told
    apart). The refusal's case is the pattern of the same rows twice: leave-one-out, every
    item with a relevant copy and every row an even number of times; queries and gallery,
    every query with a relevant equal row, most with exactly one. Not checked where the caller named each item of a
    gallery (ids: the self pairs leave a query's own item out of its ranking; in
    leave-one-out a copy of the same id leaves it), or for Hamming codes (short codes
    coincide by design). ``every_fails`` (a suite's check): raise an
    :class:`InputError` instead where every query does."""
    if (own.q_ids is not None and not sides.loo) or isinstance(sides.queries, PackedCodes):
        return 0, False

    def wanted(rows, cols):  # relevant equal rows (in leave-one-out, not of the item's id:
        # a copy of the same id is one of the item's own, out of its ranking)
        ok = rel.source.relevant(rows, cols)[0]
        return ok & (own.q_ids[rows] != own.q_ids[cols]) if sides.loo else ok

    found, equal = queries_in_gallery(sides, wanted)
    q = np.flatnonzero(found >= 0)
    if q.size == 0:
        return 0, False
    # a copy is a leak where the equal rows are not all the query's relevant items (a model
    # that maps each class to one point, an oracle's class vectors, is perfect, not leaked),
    # or are its only relevant item (a copy of a one-item class cannot be told from that
    # class's point: fail closed)
    n_rel = np.asarray(rel.n_relevant)[q]
    leak = (equal[q] < n_rel) | (n_rel == 1)
    # the refusal's case is the same rows twice, by a pattern no model's ties make:
    # leave-one-out, every item equal to another and every row an even number of times (the
    # set stacked twice, quantized rows too); queries and gallery, every query with a
    # relevant equal row and most with exactly one, its copy, each its own (the same array as
    # both sides, or the queries stacked into the gallery). A model whose codes take a few points per
    # class makes equal rows in other counts: those are warned, not refused. One query is
    # too little to call it either
    if sides.loo:
        twice = bool(((equal[q] + 1) % 2 == 0).all())
    else:  # and most matched gallery rows matched by one query: one enrolment an identity,
        # that many queries' codes equal, is a model's ties, not queries given twice (h27)
        _, per_row = np.unique(found[q], return_counts=True)
        twice = (
            2 * int(np.count_nonzero(equal[q] == 1)) >= q.size
            and 2 * int(per_row[per_row == 1].sum()) >= q.size
        )
    every = q.size == sides.n_q and twice and bool(leak.any()) and sides.n_q > 1
    n_found = sides.n_q if every else int(leak.sum())
    if n_found == 0:
        return 0, False
    message = self_match_message(n_found, sides.n_q, loo=sides.loo, twice=every)
    if every and every_fails:
        raise InputError(f"{'queries' if sides.loo else 'queries and gallery'}: {message}")
    warn_outside(SelfMatchWarning(message, n_found=n_found, n_queries=sides.n_q))
    return n_found, every


# ----------------------------------------------------------------------------- self pairs
@dataclass(frozen=True)
class SelfPairs:
    """``csr``: each query's own gallery items; ``q_ids`` / ``g_ids``: integer id codes
    (``g_ids`` None in leave-one-out, where the query codes serve both sides; both None
    without ids); ``id_values``: the ids the caller gave (``id_values[code]``), None
    without ids (in leave-one-out without ids the codes are the row numbers)."""

    csr: Csr
    q_ids: np.ndarray | None
    g_ids: np.ndarray | None
    id_values: np.ndarray | None = None


def _same_codes(q_codes: np.ndarray, g_codes: np.ndarray) -> Csr:
    order = np.argsort(g_codes, kind="stable").astype(np.int64)
    srt = g_codes[order]
    lo = np.searchsorted(srt, q_codes, side="left")
    hi = np.searchsorted(srt, q_codes, side="right")
    return ranges_to_csr(order, lo, hi)


def self_pairs_of(
    sides: Sides, query_ids, gallery_ids, gallery_labels, identical: bool = False
) -> SelfPairs:
    """The self pairs; ``identical`` (BEIR's ``ignore_identical_ids``) needs the ids it
    compares: both with a gallery (leave-one-out: the row index unless ``query_ids``)."""
    n_q, n_g = sides.n_q, sides.n_g
    if identical and not sides.loo and (query_ids is None or gallery_ids is None):
        missing = " and ".join(
            name
            for name, v in (("query_ids", query_ids), ("gallery_ids", gallery_ids))
            if v is None
        )
        raise InputError(
            f"ignore_identical_ids=True compares each query's id with the gallery's ids, and "
            f"{missing} {'is' if ' and ' not in missing else 'are'} missing: pass query_ids=... and "
            "gallery_ids=... (BEIR: the query and corpus _id values), or drop ignore_identical_ids."
        )
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
            return SelfPairs(Csr(np.arange(n_q + 1, dtype=np.int64), codes), codes, None)
        codes, _, values = encode_ids(query_ids, query_ids, n_q, n_q, "query_ids")
        return SelfPairs(_same_codes(codes, codes), codes, None, values)
    if query_ids is None and gallery_ids is None:
        return SelfPairs(Csr(np.zeros(n_q + 1, np.int64), np.zeros(0, np.int64)), None, None)
    if query_ids is None or gallery_ids is None:
        missing = "query_ids" if query_ids is None else "gallery_ids"
        raise InputError(
            f"{missing} is missing: self-exclusion needs ids on both sides (or on neither)."
        )
    qc, gc, values = encode_ids(query_ids, gallery_ids, n_q, n_g, "gallery_ids")
    return SelfPairs(_same_codes(qc, gc), qc, gc, values)


# ----------------------------------------------------------------------------- relevance
@dataclass(frozen=True)
class Relevance:
    source: RelevanceSource
    n_relevant: np.ndarray
    n_candidates: np.ndarray
    empty: np.ndarray  # queries without a relevant item
    q_codes: np.ndarray | None = None  # label codes (None with explicit relevance)
    g_codes: np.ndarray | None = None
    label_values: np.ndarray | None = None
    unranked: Unranked | None = None  # ignore_identical_ids: relevant own items, not ranked

    @property
    def missed(self) -> np.ndarray:
        """Queries with relevant items none of which is ranked (their own item only,
        under ignore_identical_ids)."""
        if self.unranked is None:
            return np.zeros(self.n_relevant.shape[0], bool)
        return (self.n_relevant > 0) & (self.n_relevant == self.unranked.counts)


def first_items(indices, n=5):
    shown = ", ".join(str(int(i)) for i in indices[:n])
    return shown + (", ..." if len(indices) > n else "")


def _label_relevance(sides: Sides, own: SelfPairs, query_labels, gallery_labels):
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


def _shown_value(v) -> str:
    """An id or a label as a message shows it: strings quoted, at most 30 characters."""
    v = v.item() if isinstance(v, np.generic) else v
    text = repr(v) if isinstance(v, (str, bytes)) else str(v)
    return text if len(text) <= 30 else text[:27] + "..."


def _shown_labels(side: str, codes: np.ndarray, values: np.ndarray) -> str:
    found = np.unique(codes)
    shown = ", ".join(_shown_value(values[c]) for c in found[:3])
    return f"{side} label{'s' if found.size > 1 else ''} {shown}{', ...' if found.size > 3 else ''}"


def check_ids_name_items(sides: Sides, own: SelfPairs, q_codes, g_codes, values) -> None:
    """With label relevance, an id names one item (equal ids: the same item, left out of
    its own query's ranking; a copy keeps its original's id) and one item has one label:
    an id held by items of different labels (a query and a gallery item, or two items of
    one side) cannot name an item, and would silently drop an item of another class from
    a ranking as "the query itself" (row numbers 0..n-1 given as ids on both sides).
    Refused with an :class:`InputError` naming the arrays, the number of such ids, the
    first three with their labels and the fix. A presence table over the id codes (each
    id's label as one of its items gives it, then every item compared with it): O(n), a
    few ms at a million ids. Without ids, or with explicit relevance, nothing to check."""
    if own.id_values is None or q_codes is None:
        return
    q_ids, loo = own.q_ids, sides.loo
    g_ids = q_ids if loo else own.g_ids
    label_of = np.empty(own.id_values.shape[0], np.int64)
    label_of[q_ids] = q_codes  # one label of each id's items (whichever numpy writes last)
    if not loo:
        label_of[g_ids] = g_codes
    bad_q = label_of[q_ids] != q_codes
    bad_g = None if loo else label_of[g_ids] != g_codes
    if not bad_q.any() and (bad_g is None or not bad_g.any()):
        return
    bad = np.unique(q_ids[bad_q] if loo else np.concatenate([q_ids[bad_q], g_ids[bad_g]]))
    shown = []
    for code in bad[:3]:
        at_q = q_codes[q_ids == code]
        parts = [_shown_labels("query", at_q, values)] if at_q.size else []
        if not loo and (g_ids == code).any():
            parts.append(_shown_labels("gallery", g_codes[g_ids == code], values))
        shown.append(f"id {_shown_value(own.id_values[code])} ({'; '.join(parts)})")
    n, n_ids = int(bad.size), int(own.id_values.shape[0])
    ids = "query_ids" if loo else "query_ids and gallery_ids"
    labels = "query_labels" if loo else "query_labels and gallery_labels"
    rows = "" if loo else _row_numbers_note(own, sides)
    said = (
        f"{ids} give{'s' if loo else ''} one id to items of different labels ({labels}): {n} id{'s' if n > 1 else ''} "
        f"of {n_ids} name{'' if n > 1 else 's'} items whose labels differ, e.g. {', '.join(shown)}"
        f"{f' and {n - 3} more' if n > 3 else ''}.{rows} An id names one item (equal ids are the same item, left "
        "out of its own query's ranking) and one item has one label"
    )
    if 100 * n <= n_ids:  # a few (1% of the ids at most): one file filed under two labels
        warn_outside(
            f"retrieval-checks: {said}: each is taken as one item (left out of its own query's "
            "ranking) filed under two labels, as a dataset's label noise is. If the ids are not "
            "the items' own (row numbers?), give each distinct item its own id.",
            RuntimeWarning,
        )
        return
    raise InputError(
        f"{said}, so these ids would drop items of other classes from the rankings as the query "
        "itself. Give each distinct item its own id (e.g. the files' own ids rather than row "
        "numbers; a copy of an item keeps its original's id and label), or leave "
        f"{ids} out."
    )


def _row_numbers_note(own: SelfPairs, sides: Sides) -> str:
    """A sentence where both sides' ids are their row numbers 0..n-1 (a common export
    habit: the same numbers name different items of the two files)."""
    values = own.id_values
    if values.dtype.kind not in "iu":
        return ""
    rows_q = np.array_equal(values[own.q_ids], np.arange(sides.n_q))
    if not (rows_q and np.array_equal(values[own.g_ids], np.arange(sides.n_g))):
        return ""
    return (
        " Both are row numbers (0..n-1 in each file): row i of the queries and row i of the "
        "gallery are different items."
    )


def _lost_to_ids(sides: Sides, own: SelfPairs, source: RelevanceSource, n_q: int):
    """Per query, the relevant items that ids equal to its own leave out of its ranking
    as the query itself (in leave-one-out, beyond the query's own row); None without
    ids."""
    if own.id_values is None:
        return None
    rows, _ = source.own_relevant()
    return np.bincount(rows, minlength=n_q) - int(sides.loo)


def check_level(relevance_level, specs) -> int:
    """``relevance_level``: a whole number >= 1, and 1 with pair metrics (``specs``);
    checked with the other options, before the inputs are read."""
    if (
        isinstance(relevance_level, bool)
        or not isinstance(relevance_level, (int, np.integer))
        or relevance_level < 1
    ):
        raise InputError(
            f"relevance_level={relevance_level!r}: give a whole number >= 1, the lowest grade that "
            "counts as relevant for the binary metrics (trec_eval's -l; default 1)."
        )
    pairs = [s.name for s in specs if s.kind == "pair"]
    if relevance_level > 1 and pairs:
        raise InputError(
            f"{', '.join(pairs)}: pair metrics with relevance_level={relevance_level} would count the "
            "lower grades neither as positive nor as negative pairs; evaluate them with "
            "relevance_level=1 (every graded item a positive)."
        )
    return int(relevance_level)


def _check_level(relevance_level, specs, graded: bool) -> int:
    """``relevance_level`` (:func:`check_level`); above 1 only with graded relevance."""
    check_level(relevance_level, specs)
    if relevance_level > 1 and not graded:
        raise InputError(
            f"relevance_level={relevance_level} needs graded relevance ({{query: {{gallery: grade}}}} or "
            "a matrix of grades); with labels or binary relevance every relevant item has grade 1."
        )
    return int(relevance_level)


def relevance_of(
    req: Request,
    sides: Sides,
    own: SelfPairs,
    query_labels,
    gallery_labels,
    relevance,
    relevance_level=1,
) -> Relevance:
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
        check_ids_name_items(sides, own, q_codes, g_codes, values)
    level = _check_level(relevance_level, req.specs, source.graded)
    n_relevant = source.level_counts(sides.n_q, level) if level > 1 else source.counts(sides.n_q)
    n_candidates = sides.n_g - own.csr.row_counts()
    unranked = None
    if req.ignore_identical_ids:  # BEIR: the own item leaves the ranking, stays relevant
        rows, grades = source.own_relevant()
        at_level = rows if grades is None else rows[grades >= level]
        unranked = Unranked(np.bincount(at_level, minlength=sides.n_q), rows, grades)
        n_relevant = n_relevant + unranked.counts
    rel = Relevance(
        source,
        n_relevant,
        n_candidates,
        np.flatnonzero(n_relevant == 0),
        q_codes,
        g_codes,
        values,
        unranked,
    )
    # at a level above 1, queries with lower grades only still have graded values (nDCG)
    below = level > 1 and (
        bool(source.counts(sides.n_q).any()) or bool(unranked is not None and unranked.rows.size)
    )
    lost = _lost_to_ids(sides, own, source, sides.n_q) if rel.empty.size else None
    _check_candidates(
        req, rel, level, below, lost, "query_ids" if sides.loo else "query_ids/gallery_ids"
    )
    _check_groups(req, sides, rel)
    return rel


def _check_groups(req: Request, sides: Sides, rel: Relevance) -> None:
    """``group_size`` against the labels, before the pass (grouped recall partitions
    the labels only after it): at least two groups of ``group_size`` of the labels
    present (:func:`~retrieval_checks.label_partition` refuses a group larger than the
    labels; the partitions of every seed have the same number of groups)."""
    if not req.of_kind("grouped") or rel.q_codes is None:
        return  # no grouped recall, or relevance without labels (refused above)
    codes = rel.q_codes if sides.loo else np.concatenate([rel.q_codes, rel.g_codes])
    present = np.flatnonzero(np.bincount(codes))  # as the partition counts them
    groups, _ = label_partition(present, req.group_size, req.group_seed)
    if groups.shape[0] < 2:
        raise InputError(
            f"Only {groups.shape[0]} group of {req.group_size} labels fits the {present.size} labels: "
            "no interval is possible from fewer than 2 groups; use a smaller group_size or more labels."
        )


def _check_candidates(
    req: Request,
    rel: Relevance,
    level: int = 1,
    below: bool = False,
    lost: np.ndarray | None = None,
    ids: str = "query_ids/gallery_ids",
) -> None:
    """Every query ranks something, every K fits, and the empty-query policy holds; with
    no query at ``level`` only empty_queries="zero" scores (the binary metrics 0), and only
    while some query has a grade ``below`` the level: else every value is 0 whatever the
    ranking. ``lost`` (:func:`_lost_to_ids`): each query's relevant items that the ids
    (named ``ids``) left out as the query itself, so that an empty query those ids emptied
    is said to be theirs, not the labels'."""
    n_candidates, empty, n_q = rel.n_candidates, rel.empty, rel.n_relevant.shape[0]
    if (n_candidates == 0).any():
        idx = np.flatnonzero(n_candidates == 0)
        raise InputError(
            f"{idx.size} quer{'y has' if idx.size == 1 else 'ies have'} no gallery item left after self-exclusion "
            f"(queries {first_items(idx)}); the gallery must hold more than the query itself."
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
    by_ids = 0 if lost is None else int((lost[empty] > 0).sum())
    ids_text = (
        f"the ids ({ids}) exclude every relevant item: each shares its query's id and is left out as the "
        "query itself. Are the ids labels? An id names one item (equal ids: the same item); pass "
        f"each item's own id (e.g. the files' own ids), or leave {ids} out"
    )
    if req.empty_queries == "error":
        why = f"for {by_ids} of them, {ids_text}; or" if by_ids else "fix the labels or"
        raise EmptyQueriesError(
            f"{empty.size} of {n_q} queries have no relevant gallery item (queries {first_items(empty)}); "
            f"{why} pass empty_queries='skip' (exclude and count them) or 'zero'.",
            indices=empty,
        )
    if empty.size == n_q and below:
        if req.empty_queries == "zero":
            return
        raise EmptyQueriesError(
            f"None of the {n_q} queries has a relevant item at grade >= relevance_level={level}, and "
            f"empty_queries={req.empty_queries!r} leaves nothing to average; lower relevance_level, or "
            "pass empty_queries='zero' (the binary metrics score 0, the graded ones keep the lower grades).",
            indices=empty,
        )
    if empty.size == n_q and by_ids == n_q:
        raise EmptyQueriesError(
            f"None of the {n_q} queries has a relevant gallery item left: {ids_text}.",
            indices=empty,
        )
    if empty.size == n_q:
        also = f" For {by_ids} of them, {ids_text}." if by_ids else ""
        raise EmptyQueriesError(
            f"None of the {n_q} queries has a relevant gallery item: check that query and gallery labels "
            f"share values (and that leave-one-out classes have at least two items).{also}",
            indices=empty,
        )


# ----------------------------------------------------------------------------- aggregate
_FIRST = ("hit_rate", "mrr", "medr", "meanr")  # metrics of the first relevant rank


def _first_ranks(req: Request, rel: Relevance, totals: PassTotals) -> np.ndarray:
    """Each query's first relevant rank under the tie policy (its expectation under
    ``average``); 0 without a relevant item, n_candidates + 1 when none is ranked."""
    if req.ties in totals.first_rank:
        out = totals.first_rank[req.ties].copy()
    else:
        out = np.where(
            rel.n_relevant > 0,
            FirstRanks(
                totals.first_rank["pessimistic"],
                totals.first_rank["optimistic"],
                totals.first_group,
            ).under("average"),
            0.0,
        )
    missed = rel.missed
    out[missed] = rel.n_candidates[missed] + 1
    return out


def _query_values(
    req: Request, rel: Relevance, totals: PassTotals
) -> tuple[dict[str, float], dict[str, dict]]:
    """The empty-query policy, then the mean (or medr's median) over queries: the
    values under the tie policy, and under each ordering of ``totals.tie_values``."""
    empty = rel.empty
    specs = req.of_kind("query")
    missed = np.flatnonzero(rel.missed)  # ranked none of its relevant items: as evaluate_run
    for per_query in (totals.per_query, *totals.tie_values.values()) if missed.size else ():
        for s in specs:
            if s.family in _FIRST:  # no relevant item at any rank: 0, rank n_candidates + 1
                v = per_query[s.name]
                v[missed] = rel.n_candidates[missed] + 1 if s.unit == "rank" else 0.0
    for per_query in (totals.per_query, *totals.tie_values.values()) if empty.size else ():
        for s in specs:
            v = per_query[s.name]
            if req.empty_queries != "zero":  # skipped (and counted): out of every mean
                v[empty] = np.nan
            elif s.family in GRADED:  # trec_eval: nDCG keeps the grades below the level
                v[empty[np.isnan(v[empty])]] = 0.0
            else:
                v[empty] = rel.n_candidates[empty] + 1 if s.unit == "rank" else 0.0
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
                else binning_pass(problem, counts, totals.counter, record=totals.binning)
            )
            value, thr, detail, _ = pair_metric(s, counts)
        values[s.name], thresholds[s.name] = value, thr
        detail_of[s.name] = {**detail, "n_positive": n_pos, "n_negative": counts.n_negative}
    levels = ("recall_at_precision", "precision_at_recall")
    curve = pr_curve(counts) if any(s.family in levels for s in specs) else None
    return values, thresholds, detail_of, curve


def grouped_options(req, rel, own, plan, specs) -> dict:
    """The options of :func:`._grouped.grouped_recall_values` that a request, its
    relevance, its ids and its plan give: one home for the one-process and the sharded
    call (:mod:`.distributed._grouped`), which differ only in the arrays they pass."""
    return dict(
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
    )


def _grouped_values(
    req, sides, own, rel, problem, plan, use_kernels=True, record=None
) -> dict[str, GroupedRecall]:
    specs = req.of_kind("grouped")
    if not specs:
        return {}
    be = plan.backend
    # the fused grouped kernel (RC_TRITON on CUDA) takes the prepared device tensors as they are
    fused = grouped_kernel(be, req.similarity)
    on_device = fused is not None

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
        **grouped_options(req, rel, own, plan, specs),
        q_factor=None if problem.qa is None else host(problem.qa[: sides.n_q]),
        g_factor=None if problem.ga is None else host(problem.ga[: sides.n_g]),
        backend=be,
        fused=fused,
        use_kernels=use_kernels,
        record=record,
    )
    return {s.name: found[s.k] for s in specs}


def aggregate_result(
    req: Request,
    sides: Sides,
    own: SelfPairs,
    rel: Relevance,
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
    grouped = (  # the paths that scored its partitions go to the result's provenance
        grouped_values(req, rel, own, plan, record=totals.grouped)
        if grouped_values is not None
        else _grouped_values(
            req, sides, own, rel, problem, plan, use_kernels, record=totals.grouped
        )
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
        "grades_vary": rel.source.grades_vary,
        "relevance_level": level,
        # a Hamming code's length: the largest distance (pair thresholds beyond it are refused)
        **({"n_bits": int(sides.queries.n_bits)} if isinstance(sides.queries, PackedCodes) else {}),
        **(
            {"ignore_identical_ids": True, "identical_ids_dropped": int(own.csr.indices.size)}
            if req.ignore_identical_ids
            else {}
        ),
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
        first_relevant_rank=_first_ranks(req, rel, totals),
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
        provenance=totals.provenance(),
    )


# ----------------------------------------------------------------------------- entry points
