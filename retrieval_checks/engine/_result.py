"""The result of :func:`retrieval_checks.evaluate`."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from ..errors import InputError
from ..metrics._measurement import Measurement, value_options
from ..metrics._names import MetricSpec, naming_note, parse_metric

__all__ = [
    "ByMetric",
    "EvaluationResult",
    "Provenance",
    "TIE_TOLERANCE",
    "fewest_ranked_relevant",
    "ranked_counts",
    "refuse_vacuous",
    "self_match_message",
    "tie_note",
]

#: A metric whose range over tie orderings is wider than this (absolute for fractions,
#: relative for ranks) gets a note in measurements and a warning from the gates.
TIE_TOLERANCE = 1e-3


def tie_note(
    spec: MetricSpec, values: dict | None, ties, share_text: str, tolerance: float | None = None
) -> str:
    """The "ties:" line of a measurement: the range of ``spec``'s value over tie orders
    (``values``: pessimistic, optimistic, min, max), or "" when within ``tolerance``."""
    if values is None:
        return ""
    lo, hi = values["min"], values["max"]
    rank = spec.unit == "rank"
    if tolerance is None:
        tolerance = TIE_TOLERANCE * (max(abs(lo), abs(hi)) if rank else 1.0)
    if not (hi - lo > tolerance):
        return ""
    fmt = (lambda x: f"{x:.2f}") if rank else (lambda x: f"{x:.4f}")
    extremes = (
        "; map@K is not monotone in rank, so these are its true extremes, not the two policies"
        if spec.family == "map" and spec.k is not None
        else ""
    )
    return (
        f"ties: the value depends on the order of tied scores: {fmt(lo)} to {fmt(hi)} over every order "
        f"(pessimistic {fmt(values['pessimistic'])}, optimistic {fmt(values['optimistic'])}; "
        f"{share_text}{extremes}); this value is ties={ties!r}"
    )


def self_match_message(
    n_found: int, n_queries: int, loo: bool = False, twice: bool | None = None
) -> str:
    """What :class:`~retrieval_checks.errors.SelfMatchWarning` says, and the error of a
    suite's check (and of a gate, :attr:`EvaluationResult.self_matched`) where every
    query is such a row: ``n_found`` of ``n_queries`` queries are also gallery rows
    relevant to them, value for value (``loo``: leave-one-out, where they equal another
    item relevant to them). ``twice``: whether they make the pattern of the same rows
    twice (the refusal's case; default: every query found); where they do not (a model
    whose codes take a few values per class), the message counts them and says so."""
    every = n_found == n_queries if twice is None else twice
    if loo and not every and n_found == n_queries:
        return (
            f"{n_found} of {n_queries} items equal other items relevant to them, value for value, "
            "in counts that are not the same rows stacked twice (a model whose embeddings take a "
            "few values per class, or duplicated items?): each ranks those equal items tied at "
            "its top. If equal items are copies, give each item once, or give query_ids=... with "
            "a copy's id equal to its original's (a YAML suite: `ids:`)."
        )
    if loo:
        return (
            (
                f"each of the {n_queries} items equals another item relevant to it, value for value"
                if every
                else f"{n_found} of {n_queries} items equal another item relevant to them, "
                "value for value"
            )
            + ", so each retrieves its copy (first, under cosine or euclidean) and scores near "
            "1 whatever the model ("
            + ("the same rows stacked twice?" if every else "duplicated items?")
            + "). Give each item once; if equal items are distinct on purpose, give "
            "query_ids=... with a copy's id equal to its original's (a YAML suite: `ids:`), "
            "so that each item's copies leave its ranking."
        )
    if not every and n_found == n_queries:
        return (
            f"{n_found} of {n_queries} queries equal gallery rows relevant to them, value for "
            "value, in counts that are not one copy each (a model whose embeddings take a few "
            "values per class, or leaked queries?): each ranks those equal rows tied at its top. "
            "If the gallery holds the queries' own items, give query_ids=... and "
            "gallery_ids=... (a suite: `ids:` on both sides) so that each leaves its ranking."
        )
    return (
        (
            f"each of the {n_queries} queries is also a gallery row relevant to it, value for "
            "value, so it retrieves itself (first, under cosine or euclidean)"
            if every
            else f"{n_found} of {n_queries} queries are also gallery rows relevant to them, "
            "value for value, so each retrieves itself (first, under cosine or euclidean)"
        )
        + " and scores near 1 whatever the model ("
        + ("the same array or file given as both?" if every else "leaked queries, or duplicates?")
        + "). For leave-one-out give the items once, as queries, with no gallery (a YAML "
        "suite: leave out `gallery:`); if the gallery holds each query's own item on "
        "purpose, give query_ids=... and gallery_ids=... (a suite: `ids:` on both sides) "
        "so that each query's own item leaves its ranking."
    )


def _frozen(counts: Mapping[str, int] | None) -> Mapping[str, int]:
    return MappingProxyType({str(k): int(v) for k, v in sorted((counts or {}).items())})


@dataclass(frozen=True)
class Provenance:
    """Which code counted a result's pass (``result.provenance``), as the pass's loop
    recorded it block by block: not what was selected or asked for, what ran.

    - ``blocks``: ``{counter: query blocks it counted in this process}``. Counters:
      ``"numba"`` / ``"numpy"`` (the CPU kernels), ``"torch"`` (the vectorised torch
      counter), ``"fused-cpu"`` (the fused CPU tile pass), ``"triton"`` (the fused CUDA
      kernels). A block a fused counter declined is counted under the fallback that
      counted it (``{"numba": 1, "fused-cpu": 7}``: the fused pass declined one block).
    - ``modes``: the fused CPU pass's blocks by how they ran: ``"mirrored"`` (leave-one-out
      with each pair of tiles computed once, for both of its queries) or ``"one-sided"``
      (blocks the fused counter did not report a mode for are in ``blocks`` only).
    - ``binning``: the blocks of the second pass some pair metrics need (the negatives
      at every positive score), by counter; empty when it did not run.
    - ``resumed``: blocks a checkpoint gave back (counted by an earlier run, by no
      counter of this one).
    - ``sharded``: each rank counted its window of the gallery (this rank's record).
    - ``grouped``: ``{path: partitions it scored}`` of grouped recall
      (``grouped_recall@K``; one partition per repeat): ``"grouped-numba"`` (the host
      batches counted by the compiled counter), ``"grouped-numpy"`` (by the numpy rule:
      ``RETRIEVAL_CHECKS_KERNELS=numpy``, ``_use_kernels=False``, or a sharded pass, whose
      ranks count their columns and sum), ``"triton-grouped"`` (the fused Triton grouped
      kernel). A partition the kernel did not fill (it failed and warned) is counted
      under the host path that scored it. Apart from ``blocks`` and ``counters``, which
      are the streamed pass's.

    Results that no streamed pass computes (``evaluate_run``, ``ann_recall``) have an
    empty record; a pass with only grouped recall has its ``grouped`` entry alone. It
    is not part of ``config``: a
    sharded, checkpointed or executor run gives the same values and the same
    ``config`` as the one-process run while counting with other code, and baselines
    and history rows compare ``config``, not the code that ran."""

    blocks: Mapping[str, int] = field(default_factory=dict)
    modes: Mapping[str, int] = field(default_factory=dict)
    binning: Mapping[str, int] = field(default_factory=dict)
    resumed: int = 0
    sharded: bool = False
    grouped: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self):
        for name in ("blocks", "modes", "binning", "grouped"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "resumed", int(self.resumed))
        object.__setattr__(self, "sharded", bool(self.sharded))

    @property
    def counters(self) -> tuple[str, ...]:
        """Every counter that counted a block (the pass's and the binning pass's), sorted."""
        return tuple(sorted(set(self.blocks) | set(self.binning)))

    @property
    def counter(self) -> str | None:
        """The one counter that counted every block of the pass in this process, or None
        (none counted one, or several did)."""
        return next(iter(self.blocks)) if len(self.blocks) == 1 else None

    @property
    def mode(self) -> str | None:
        """``"mirrored"`` or ``"one-sided"`` when every block of the pass was counted by
        the fused CPU pass and each reported that mode, else None."""
        if self.counter != "fused-cpu" or len(self.modes) != 1:
            return None
        (mode, n), total = next(iter(self.modes.items())), self.blocks["fused-cpu"]
        return mode if n == total else None

    @classmethod
    def combined(cls, records) -> "Provenance":
        """One record of several passes (an image-text evaluation's directions and
        folds): the blocks, modes, binning blocks and grouped partitions of each counter
        added up, the resumed blocks added, sharded if any was."""
        blocks: dict[str, int] = {}
        modes: dict[str, int] = {}
        binning: dict[str, int] = {}
        grouped: dict[str, int] = {}
        resumed, sharded = 0, False
        for r in records:
            for mine, theirs in (
                (blocks, r.blocks),
                (modes, r.modes),
                (binning, r.binning),
                (grouped, r.grouped),
            ):
                for name, n in theirs.items():
                    mine[name] = mine.get(name, 0) + n
            resumed += r.resumed
            sharded = sharded or r.sharded
        return cls(blocks, modes, binning, resumed, sharded, grouped)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "blocks": dict(self.blocks),
            "modes": dict(self.modes),
            "binning": dict(self.binning),
            "resumed": self.resumed,
            "sharded": self.sharded,
            "grouped": dict(self.grouped),
        }

    def __repr__(self) -> str:
        shown = [f"blocks={dict(self.blocks)}"]
        if self.modes:
            shown.append(f"modes={dict(self.modes)}")
        if self.binning:
            shown.append(f"binning={dict(self.binning)}")
        if self.resumed:
            shown.append(f"resumed={self.resumed}")
        if self.sharded:
            shown.append("sharded=True")
        if self.grouped:
            shown.append(f"grouped={dict(self.grouped)}")
        return f"Provenance({', '.join(shown)})"

    def __reduce__(self):  # pickle and deepcopy (a mappingproxy itself is neither)
        return (
            type(self),
            (
                dict(self.blocks),
                dict(self.modes),
                dict(self.binning),
                self.resumed,
                self.sharded,
                dict(self.grouped),
            ),
        )

    def __hash__(self) -> int:
        return hash(
            (
                tuple(self.blocks.items()),
                tuple(self.modes.items()),
                tuple(self.binning.items()),
                self.resumed,
                self.sharded,
                tuple(self.grouped.items()),
            )
        )


class ByMetric(dict):
    """A dict keyed by canonical metric name that also answers to aliases."""

    def __missing__(self, key):
        try:
            canonical = parse_metric(key).name
        except (ValueError, TypeError):
            raise KeyError(key) from None
        if canonical == key or canonical not in self:
            raise KeyError(f"{key!r} was not computed; computed: {list(self)}")
        return self[canonical]


def ranked_counts(result) -> tuple[np.ndarray, np.ndarray] | None:
    """``result``'s ``n_candidates`` and ``n_relevant`` per query as flat float64 arrays
    (for :meth:`EvaluationResult.no_negatives_refusal` and the gates' certain K); None
    when it lacks either or their shapes differ."""
    cand, rel = getattr(result, "n_candidates", None), getattr(result, "n_relevant", None)
    if cand is None or rel is None or np.shape(cand) != np.shape(rel):
        return None
    return np.asarray(cand, np.float64).reshape(-1), np.asarray(rel, np.float64).reshape(-1)


def fewest_ranked_relevant(result, cand: np.ndarray, rel: np.ndarray) -> np.ndarray | None:
    """The fewest relevant items each query ranks (``cand``, ``rel``: its
    :func:`ranked_counts`): ``rel``, except under ``ignore_identical_ids``, where a
    query's own items (``n_gallery - n_candidates``) are never ranked and may be
    relevant, so they are taken off (negative where fewer are relevant than own); None
    when the gallery's size is not recorded. Read by the one-class refusal and the gates'
    certain K."""
    config = getattr(result, "config", None) or {}
    if not config.get("ignore_identical_ids"):
        return rel
    n_gallery = config.get("n_gallery")
    if not isinstance(n_gallery, numbers.Integral):
        return None
    return rel - (n_gallery - cand)


def refuse_vacuous(result, who: str) -> None:
    """InputError (``who``: the gate or function, in the message) when no gate can judge
    ``result`` (:meth:`EvaluationResult.vacuous`): every query retrieved itself or a
    copy of itself, or no query has a non-relevant candidate. The one test that gates,
    baselines, comparisons and slice gates share. Results without the fields (other
    kinds, results pickled before them) pass."""
    vacuous = getattr(result, "vacuous", None)
    said = vacuous() if callable(vacuous) else None
    if said:
        raise InputError(f"{who}: {said}")


class EvaluationResult(Mapping):
    """A mapping from canonical metric name to its value, plus everything behind it.

    - ``result["map@R"]`` (aliases work: ``result["MAP@R"]``, ``result["cmc@1"]``).
    - ``per_query[name]``: one value per query (NaN for skipped queries) for the
      query-level metrics; the input for bootstrap intervals and paired tests.
    - ``n_queries``, ``n_used``, ``n_skipped``, ``skipped_queries``: what the average
      is over; skipped queries are those with no relevant gallery item under
      ``empty_queries="skip"``. ``n_outside``, ``outside_queries``: queries left out by
      the chosen query set (``evaluate_run(..., queries="run" / "qrels")``: trec_eval
      leaves them out by definition), counted apart from the skipped ones and not
      against ``max_skipped``; ``n_used + n_skipped + n_outside == n_queries``.
    - ``thresholds[name]``: the similarity threshold behind a pair metric (None when
      no threshold reaches the required level); ``pair_counts[name]``: TP, FP, FN.
    - ``n_relevant``, ``first_relevant_rank`` (0 where none; under ``ties="average"``
      its expectation), ``n_candidates``: per-query facts from the pass.
    - ``units[name]``: ``"fraction"``, ``"rank"`` or ``"ratio"``.
    - ``config``: similarity, ties, empty-query policy, backend, block shape, budget.
    - ``provenance``: which counter counted the pass's blocks, how many each, how
      the fused CPU pass ran, and which path scored grouped recall's partitions
      (:class:`~retrieval_checks.engine.Provenance`; recorded by
      the pass's loop, apart from ``config``, which does not depend on the code that
      counted).
    - ``intervals[name]``: (low, high) for metrics computed with an interval
      (``grouped_recall@K``); ``grouped[name]``: the full
      :class:`~retrieval_checks.GroupedRecall` (groups r, size S, spread, dropped labels).
    - ``pr_curve``: the exact pair precision-recall curve (``threshold``, ``precision``,
      ``recall`` lists, at most 100 points) where the pass knows it, when a
      ``recall_at_precision`` or ``precision_at_recall`` metric was computed; else None.
      Known: at every positive score down to the pass's ``capacity``-th largest negative
      (the tail the metrics asked for; the whole curve when every negative was binned),
      the same whatever the counter, the budget or the tiles.
    - ``query_label_codes``: integer label code per query (for class-cluster bootstraps);
      ``label_values[code]`` is the label itself; ``query_ids``: the ids given (or None).
    - ``tie_values[name]``: the query-level metric under the ``"pessimistic"`` and
      ``"optimistic"`` orderings and its ``"min"`` / ``"max"`` over every ordering of
      tied items (:meth:`tie_range`); ``tied_share``: the share of relevant items
      whose score ties with a non-relevant item's (None when no query-level metric was
      computed, the pass that counts it); :meth:`tie_note` says when the
      value depends on the order of ties.
    - ``slices``: with ``evaluate(..., slices=...)``, each slice's metrics on its own
      queries (``result.slices["de"]["map"]``, ``result.slices["de"].n_queries``),
      else None.
    - ``query_fingerprint()``: what identifies the queries (labels, ids, relevant counts,
      gallery size), so that a paired comparison can check that two results were
      computed on the same queries in the same order.
    - ``self_matched``: how many queries are also gallery rows relevant to them, value
      for value (each retrieved itself first: the
      :class:`~retrieval_checks.errors.SelfMatchWarning`'s ``n_found``); 0 when none, or
      where ``evaluate`` does not check (ids, leave-one-out, Hamming codes, other entry
      points). A gate refuses a result in which every query did, each with its own
      copy in the gallery (``self_matched_all``: a row alone with its values, and more
      than one query; equal items such as an oracle's one-hot class vectors are ties).

    Built by :func:`~retrieval_checks.evaluate`, :func:`~retrieval_checks.evaluate_run`
    and :func:`~retrieval_checks.ann_recall` (keyword arguments only); read, not
    constructed, by users.

    Parameters
    ----------
    specs:
        The parsed metrics (:class:`~retrieval_checks.MetricSpec`), in the order asked.
    values:
        ``{canonical name: value}``.
    per_query:
        ``{name: one value per query}`` (NaN for skipped queries).
    thresholds, pair_counts:
        The similarity threshold and the TP, FP, FN counts behind each pair metric.
    n_relevant, n_candidates, first_relevant_rank:
        Per-query counts and ranks from the pass.
    skipped_queries:
        The indices of the skipped queries.
    outside_queries:
        The indices of the queries outside the query set (None: none).
    config:
        The options of the evaluation (similarity, ties, backend, block shape...).
    intervals, grouped:
        The intervals and :class:`~retrieval_checks.GroupedRecall` of the grouped recalls.
    query_label_codes, label_values:
        The integer label code of every query, and the label of each code.
    pr_curve:
        The exact pair precision-recall curve, or None.
    query_ids:
        The query ids given, or None.
    tie_values, tied_share:
        The values under each tie order and their range; the share of relevant items
        tied with a non-relevant one.
    provenance:
        The :class:`Provenance` of the pass (None: no pass counted this result, an
        empty record).

    Raises
    ------
    KeyError
        ``result[name]`` for a metric that was not computed (the message lists those
        that were).
    MetricNameError
        ``result[name]`` for a name that is no metric.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> res = rc.evaluate(x, query_labels=[0, 0, 1, 1], metrics=["map", "hit_rate@1"])
    >>> dict(res)
    {'map': 0.75, 'hit_rate@1': 0.5}
    >>> res["MAP"], res.per_query["map"]
    (0.75, array([1. , 0.5, 1. , 0.5]))
    >>> res.n_queries, res.n_used, res.n_skipped, res.first_relevant_rank
    (4, 4, 0, array([1, 2, 1, 2]))
    >>> res["mrr"]
    Traceback (most recent call last):
    KeyError: "'mrr' (canonical 'mrr') was not computed; computed: ['map', 'hit_rate@1']"
    """

    def __init__(
        self,
        *,
        specs: list[MetricSpec],
        values: dict[str, float],
        per_query: dict[str, np.ndarray],
        thresholds: dict[str, float | None],
        pair_counts: dict[str, dict],
        n_relevant: np.ndarray,
        n_candidates: np.ndarray,
        first_relevant_rank: np.ndarray,
        skipped_queries: np.ndarray,
        config: dict[str, Any],
        intervals: dict[str, tuple[float, float]] | None = None,
        grouped: dict | None = None,
        query_label_codes: np.ndarray | None = None,
        label_values: np.ndarray | None = None,
        pr_curve: dict | None = None,
        query_ids: np.ndarray | None = None,
        tie_values: dict[str, dict[str, float]] | None = None,
        tied_share: float | None = None,
        outside_queries: np.ndarray | None = None,
        provenance: Provenance | None = None,
    ):
        self._specs = {s.name: s for s in specs}
        self._values = values
        self.per_query = ByMetric(per_query)
        self.thresholds = ByMetric(thresholds)
        self.pair_counts = ByMetric(pair_counts)
        self.n_relevant = n_relevant
        self.n_candidates = n_candidates
        self.first_relevant_rank = first_relevant_rank
        self.skipped_queries = skipped_queries
        #: queries outside the query set (``evaluate_run(..., queries="run" / "qrels")``):
        #: NaN per query like the skipped ones, counted apart (:attr:`n_outside`)
        self.outside_queries = (
            np.zeros(0, np.int64)
            if outside_queries is None
            else np.asarray(outside_queries, dtype=np.int64)
        )
        self.config = config
        self.intervals = ByMetric(intervals or {})
        self.grouped = ByMetric(grouped or {})
        self.query_label_codes = query_label_codes
        self.label_values = label_values
        self.pr_curve = pr_curve
        self.query_ids = query_ids
        self.tie_values = ByMetric(tie_values or {})
        self.tied_share = None if tied_share is None else float(tied_share)
        if provenance is not None and not isinstance(provenance, Provenance):
            raise TypeError(
                f"provenance must be a Provenance or None, not {type(provenance).__name__}"
            )
        #: which counter counted the pass (:class:`Provenance`; empty: no pass)
        self.provenance = Provenance() if provenance is None else provenance
        #: the slices of ``evaluate(..., slices=...)`` (:class:`~retrieval_checks.engine._slices.SliceSet`),
        #: else None
        self.slices = None
        #: queries that are also gallery rows relevant to them, value for value (set by
        #: ``evaluate``; a gate refuses a result in which every query is one)
        self.self_matched = 0
        #: whether every query is one, each with its own copy in the gallery (a row alone
        #: with its values; more than one query): the case a gate refuses
        self.self_matched_all = False

    def self_match_refusal(self) -> str | None:
        """The error a gate gives this result when every query retrieved itself (the
        same as a suite's check), else None."""
        n = int(getattr(self, "self_matched", 0) or 0)  # results pickled before the field
        every = getattr(self, "self_matched_all", n == self.n_queries)
        if n == 0 or n != self.n_queries or not every:
            return None
        loo = bool((self.config or {}).get("leave_one_out"))
        where = "queries" if loo else "queries and gallery"
        return f"{where}: {self_match_message(n, self.n_queries, loo=loo)}"

    def no_negatives_refusal(self) -> str | None:
        """The error a gate gives this result when no used query has a non-relevant
        candidate (one class, or every item relevant to every query): every ranking and
        pair metric is then at its best whatever the model, else None. Not for runs (a run
        that retrieved only relevant documents earned it) or graded relevance whose grades
        differ within a query (nDCG still orders them; grades all alike are binary
        relevance written as grades). With ``ignore_identical_ids`` a query's own items
        are never ranked and may be relevant: the candidates are all relevant when they
        are no more than the relevant items less every own item."""
        config = self.config or {}
        if config.get("source") == "run" or config.get("grades_vary", config.get("graded")):
            return None
        counts = ranked_counts(self)
        if counts is None:
            return None
        cand, rel = counts
        ranked = fewest_ranked_relevant(self, cand, rel)
        if ranked is None:
            return None
        used = rel > 0
        if not used.any() or (cand[used] > ranked[used]).any():
            return None
        return (
            f"queries: none of the {int(used.sum())} queries has a non-relevant candidate (every "
            "item is relevant to every query: a single class?), so every ranking metric is at "
            "its best whatever the model and a gate on it could never fail; evaluate on items "
            "of two or more classes."
        )

    def vacuous(self) -> str | None:
        """Why no gate can judge this result (:meth:`self_match_refusal`,
        :meth:`no_negatives_refusal`), else None."""
        return self.self_match_refusal() or self.no_negatives_refusal()

    def tie_range(self, name: str) -> tuple[float, float] | None:
        """(lowest, highest) value of a query-level metric over every ordering of the
        items whose scores tie (the pessimistic and optimistic values for metrics
        monotone in rank; the true extremes for ``map@K``, which is not); None for
        metrics without one (pair metrics take whole tie groups: ties cannot change
        them)."""
        v = self.tie_values.get(self._key(name))
        return None if v is None else (v["min"], v["max"])

    def tie_note(self, name: str, tolerance: float | None = None) -> str:
        """A line saying how much ``name`` depends on the order of tied items, or "" when
        its range over tie orderings is within ``tolerance`` (default
        :data:`TIE_TOLERANCE`: 1e-3 for fractions, relative 1e-3 for ranks)."""
        key = self._key(name)
        share = (
            "grouped recall ranks inside groups"
            if self.tied_share is None
            else f"{self.tied_share:.1%} of relevant items tie with a non-relevant one"
        )
        return tie_note(
            self._specs[key], self.tie_values.get(key), self.config.get("ties"), share, tolerance
        )

    def query_labels(self) -> np.ndarray | None:
        """The label of every query (None for results computed from explicit relevance)."""
        if self.query_label_codes is None or self.label_values is None:
            return None
        return np.asarray(self.label_values)[self.query_label_codes]

    def query_fingerprint(self) -> dict[str, Any]:
        """What identifies the queries of this result: ``n_queries``, ``n_gallery``,
        ``n_relevant`` (per query; it does not depend on the model), and ``labels`` and
        ``ids`` (per query) when known."""
        return {
            "n_queries": self.n_queries,
            "n_gallery": self.config.get("n_gallery"),
            "n_relevant": np.asarray(self.n_relevant),
            "labels": self.query_labels(),
            "ids": self.query_ids,
        }

    # --- Mapping ---------------------------------------------------------------
    def _key(self, name: str) -> str:
        if name in self._values:
            return name
        canonical = parse_metric(name).name
        if canonical not in self._values:
            raise KeyError(
                f"{name!r} (canonical {canonical!r}) was not computed; computed: {list(self._values)}"
            )
        return canonical

    def __getitem__(self, name: str) -> float:
        return self._values[self._key(name)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, name: object) -> bool:
        try:
            self._key(name)  # type: ignore[arg-type]
        except (KeyError, ValueError, TypeError):
            return False
        return True

    # --- facts -------------------------------------------------------------------
    @property
    def n_queries(self) -> int:
        return int(self.n_relevant.shape[0])

    @property
    def n_skipped(self) -> int:
        return int(self.skipped_queries.shape[0])

    @property
    def n_outside(self) -> int:
        """Queries outside the query set (``queries="run"`` / ``"qrels"``), counted
        apart from :attr:`n_skipped`."""
        return int(self.outside_queries.shape[0])

    @property
    def n_used(self) -> int:
        return self.n_queries - self.n_skipped - self.n_outside

    def outside_note(self) -> str:
        """``"2 outside the query set (queries='run')"``, or "" when none is."""
        if not self.n_outside:
            return ""
        return f"{self.n_outside} outside the query set (queries={self.config.get('queries')!r})"

    @property
    def units(self) -> dict[str, str]:
        return {name: spec.unit for name, spec in self._specs.items()}

    def spec(self, name: str) -> MetricSpec:
        return self._specs[self._key(name)]

    @property
    def context(self) -> dict:
        """Model and dataset names, when the result was named (``rc_evaluate``, suites)."""
        return {k: self.config[k] for k in ("model", "dataset") if self.config.get(k) is not None}

    def measure(self, name: str) -> Measurement:
        """The :class:`~retrieval_checks.metrics.Measurement` of one computed metric."""
        key = self._key(name)
        spec = self._specs[key]
        common = dict(
            metric=key,
            value=float(self._values[key]),
            unit=spec.unit,
            higher_is_better=spec.higher_is_better,
            context=self.context,
            n_used=self.n_used,
            n_skipped=self.n_skipped,
            sample=f"{self.n_used} queries used, {self.n_skipped} skipped, "
            + (f"{self.outside_note()}, " if self.n_outside else "")
            + f"gallery {self.config.get('n_gallery')}",
        )
        if self.n_outside:  # the gate's event (JSON, history) says it too
            outside = {"queries": self.config.get("queries"), "queries_outside": self.n_outside}
        else:
            outside = {}
        # the options that change the value: the event (JSON, history) keeps them, and
        # `compare` refuses to compare two runs' values computed under different ones
        outside["options"] = value_options(self.config)
        if key in self.grouped:
            g = self.grouped[key]
            layout = (
                f"r={g.n_groups} groups of S={g.group_size} labels, "
                + _grouped_spread(g)
                + f"; {g.n_queries_used} queries used, {g.n_queries_skipped} skipped, {len(g.dropped_labels)} "
                f"labels dropped ({g.n_queries_dropped} queries), seed {g.seed}, {g.repeats} partition(s)"
            )
            common.update(n_used=g.n_queries_used, n_skipped=g.n_queries_skipped)
            note = self.tie_note(key)
            return Measurement(
                **common,
                interval=(g.low, g.high),
                confidence=g.confidence,
                method=f"Student t over groups, standard error {g.std_error:.4f}",
                n=g.n_groups,
                n_unit="groups",
                details=(layout,) + ((note,) if note else ()),
                extra={
                    "tie_range": list(self.tie_range(key)),
                    "tied_share": self.tied_share,
                    "ties": self.config.get("ties"),
                    "options": outside["options"],
                }
                if g.tie_values
                else {"options": outside["options"]},
            )
        if spec.kind == "pair":
            t = self.thresholds.get(key)
            c = self.pair_counts.get(key, {})
            if t is None:
                where = "no threshold reaches that level"
            elif self.config.get("similarity") == "hamming":
                where = f"at Hamming distance <= {t:.6g} bits"
            else:
                where = f"at similarity threshold {t:.6g}"
            line = (
                f"{where}; TP {c.get('tp')}, FP {c.get('fp')}, FN {c.get('fn')} over {c.get('n_positive')} "
                f"positive and {c.get('n_negative')} negative pairs"
            )
            extra = {"operating_threshold": t, "options": outside["options"]}
            if self.pr_curve and spec.family in ("recall_at_precision", "precision_at_recall"):
                extra["curve"] = self.pr_curve
            return Measurement(**common, n=self.n_used, details=(line,), extra=extra)
        worst = self.worst_classes(key)
        note = self.tie_note(key)
        naming = naming_note(
            spec, class_labels=self.query_label_codes is not None
        )  # recall@K vs "Recall@K"
        extra = dict(outside)
        if key in self.tie_values:
            extra.update(
                tie_range=list(self.tie_range(key)),
                tied_share=self.tied_share,
                ties=self.config.get("ties"),
            )
        return Measurement(
            **common,
            n=self.n_used,
            details=tuple(x for x in (worst, note, naming) if x),
            extra=extra,
        )

    def worst_classes(self, name: str, n: int = 3) -> str:
        """A line naming the n classes with the lowest mean per-query value (highest
        for rank metrics), or "" without labels or per-query values."""
        values = self.per_query.get(self._key(name))
        codes = self.query_label_codes
        if values is None or codes is None:
            return ""
        used = ~np.isnan(values)
        if not used.any():
            return ""
        inv_codes, inv = np.unique(codes[used], return_inverse=True)
        sums = np.bincount(inv, weights=values[used])
        cnts = np.bincount(inv)
        means = sums / cnts
        spec = self.spec(name)
        order = np.argsort(means if spec.higher_is_better else -means, kind="stable")[:n]
        shown = []
        for i in order:
            label = (
                self.label_values[inv_codes[i]]
                if self.label_values is not None
                else int(inv_codes[i])
            )
            label = label.item() if hasattr(label, "item") else label
            shown.append(f"{label!r}: {means[i]:.4f} over {int(cnts[i])} queries")
        return "worst classes: " + "; ".join(shown)

    def to_dict(self, per_query: bool = False) -> dict[str, Any]:
        """A JSON-ready summary (NaN becomes None)."""

        def clean(v):
            return None if isinstance(v, float) and math.isnan(v) else v

        out: dict[str, Any] = {
            "metrics": {k: clean(v) for k, v in self._values.items()},
            "units": self.units,
            "thresholds": dict(self.thresholds),
            "pair_counts": dict(self.pair_counts),
            "n_queries": self.n_queries,
            "n_used": self.n_used,
            "n_skipped": self.n_skipped,
            "n_outside": self.n_outside,
            "intervals": {k: list(v) for k, v in self.intervals.items()},
            "grouped": {
                k: {
                    "n_groups": g.n_groups,
                    "group_size": g.group_size,
                    "group_std": g.group_std,
                    "spread": g.spread,
                    "std_error": g.std_error,
                    "confidence": g.confidence,
                    "seed": g.seed,
                    "repeats": g.repeats,
                    "dropped_labels": [
                        x.item() if hasattr(x, "item") else x for x in g.dropped_labels
                    ],
                }
                for k, g in self.grouped.items()
            },
            "config": dict(self.config),
            "ties": {
                k: {kind: clean(x) for kind, x in v.items()} for k, v in self.tie_values.items()
            },
            "tied_share": self.tied_share,
            "provenance": self.provenance.to_dict(),
        }
        if self.slices is not None:
            out["slices"] = self.slices.to_dict()
        if per_query:
            out["per_query"] = {k: [clean(float(x)) for x in v] for k, v in self.per_query.items()}
        return out

    def __repr__(self) -> str:
        width = max([len(k) for k in self._values] + [6])
        lines = [
            f"EvaluationResult({self.n_used} of {self.n_queries} queries used, {self.n_skipped} skipped"
            + (f", {self.outside_note()}" if self.n_outside else "")
            + "; "
            f"{self.config.get('similarity')}, ties={self.config.get('ties')})"
        ]
        for name, value in self._values.items():
            extra = ""
            if name in self.thresholds:
                t = self.thresholds[name]
                extra = f"  (threshold {t:.6g})" if t is not None else "  (no threshold reaches it)"
            if name in self.grouped:
                g = self.grouped[name]
                extra = (
                    f"  [{g.low:.4f}, {g.high:.4f}] at {g.confidence:.0%}, r={g.n_groups} groups of "
                    f"S={g.group_size}, s={g.spread:.4f}, se={g.std_error:.4f}"
                    + (f" (means over {g.repeats} partitions)" if g.repeats > 1 else "")
                    + f", {len(g.dropped_labels)} labels dropped"
                )
            unit = self._specs[name].unit
            shown = f"{value:.6f}" if unit != "rank" else f"{value:.2f}"
            lines.append(f"  {name:<{width}}  {shown}{extra}")
        return "\n".join(lines)


def _grouped_spread(g) -> str:
    """The spread of a grouped recall's group values and its standard error, as one
    consistent pair (se = s / sqrt(r)): with several partitions both are the mean over
    the partitions, and the first partition's spread is named as such."""
    pair = (
        f"spread of the group values s={g.spread:.4f}, standard error s/sqrt(r)={g.std_error:.4f}"
    )
    if g.repeats == 1:
        return pair
    return (
        f"{pair} (each the mean over the {g.repeats} partitions; the first partition alone: "
        f"s={g.group_std:.4f})"
    )
