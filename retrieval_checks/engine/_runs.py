"""``evaluate_run``: the metrics of a precomputed ranking, as ranx and pytrec_eval compute
them, with this library's tie policies and :class:`EvaluationResult`.

A run is what a search returned: per query, documents with scores (no embeddings). It is
read from a dict ``{qid: {docid: score}}``, a TREC run file or an ANN search's
``(indices, scores)`` arrays; relevance judgements (qrels) from a dict
``{qid: {docid: grade}}``, a TREC qrels file or, next to arrays, per-row relevant
indices or a grade matrix. Each query's documents are ranked by decreasing score (the
rank column of a TREC file is ignored, as trec_eval ignores it); equal scores are ties,
resolved by the tie policy as in :func:`retrieval_checks.evaluate`.

Conventions (every one cross-checked against pytrec_eval where trec_eval computes it):

- relevant = judged with grade >= ``relevance_level`` (trec_eval's ``-l``); R counts the
  query's relevant documents, retrieved or not. A retrieved document without a judgement
  is non-relevant (grade 0); grade -1 (trec_eval's "in the pool, not judged") is
  non-relevant, gains nothing and is neither judged non-relevant (``bpref``) nor judged
  (``rbp_residual``). TREC files are read as trec_eval reads them (``#`` comment lines,
  fields after a run line's sixth ignored: :func:`retrieval_checks._textfiles.trec_records`).
- relevant documents missing from the run are never ranked: they count in R and in the
  ideal DCG but never in a top K, they add 0 to every precision sum (``map``, ``map@R``,
  ``map_cut@K``...: trec_eval's AP), and a query with relevant documents none of which is
  retrieved gets ``hit_rate@K`` 0 and ``mrr`` 0 (trec_eval's ``success_K`` and
  ``recip_rank``) and, for ``medr`` / ``meanr``, the censored rank D + 1, D the depth of
  the run: ``k`` when given, else the most documents any query retrieved. A relevant
  document not in the top D is "not found within the depth", which is all a run can say.
- every query of the run and of the qrels is a query of the result (``query_ids``: their
  union, sorted; digit strings by value); ``queries`` picks those averaged over:
  ``"both"`` (all), ``"run"`` (the run's judged queries: trec_eval's default) or
  ``"qrels"`` (the judged ones: trec_eval's ``-c``); the others are outside the query
  set: NaN per query, counted in ``outside_queries`` (``n_outside``,
  ``config["queries_outside"]``), apart from the skipped queries and not against
  ``max_skipped`` (trec_eval leaves them out by definition). One averaged over but missing from the run counts with nothing
  retrieved: 0 for the fractions and D + 1 for ranks. Queries without any relevant
  document (in the run but not judged, or judged non-relevant only) follow
  ``empty_queries``: ``"skip"`` (counted in ``skipped_queries``), ``"error"``, or
  ``"zero"`` (0, and D + 1 for ranks; nDCG / DCG keep their graded value, as trec_eval);
  its default is ``"skip"`` under ``"both"`` and ``"zero"`` under trec_eval's sets.
  Whether a query has a relevant document follows ``relevance_level``, for every
  metric: under ``"both"`` with ``"skip"``, a query judged only below the level is
  skipped for nDCG / DCG too, where trec_eval (``-l``) scores its nDCG from the
  grades; ``queries="run"`` / ``"qrels"`` (or ``empty_queries="zero"``) give
  trec_eval's numbers.
- graded nDCG: ``ndcg`` / ``ndcg@K`` take gain = grade, ``ndcg_exp`` gain 2^grade - 1;
  the ideal DCG ranks every judged document of the query by decreasing gain, cut at K
  (trec_eval's ``ndcg`` and ``ndcg_cut_K``, which ignore ``relevance_level`` as this
  does). Under ties, ``"pessimistic"`` puts the lowest gains of each tie group first,
  ``"optimistic"`` the highest (the least and greatest DCG over tie orders, by the
  rearrangement inequality), ``"average"`` gives each slot of a group the group's mean
  gain (DCG is linear in the slots' gains: the exact expectation over orders).
- the binary metrics take each retrieved relevant document's rank among the run's
  documents, ties as the engine takes them (:mod:`retrieval_checks.metrics._ties`).
  trec_eval breaks ties by docid, descending: ``ties="docid"`` takes that order (the
  tie values still span the orders of equal scores).
- ``ignore_identical_ids`` (BEIR): a retrieved document whose id is its query's leaves
  the run and stays in the qrels.
- ``tied_share`` is the share of retrieved relevant documents whose score equals a
  retrieved non-relevant one's; ``n_candidates`` the documents each query retrieved;
  ``first_relevant_rank`` 0 for a query without relevant documents, D + 1 for one that
  retrieved none of its relevant documents.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from .._arrays import as_numpy
from .._suggest import shown
from .._textfiles import (
    INT64_MAX,
    check_field,
    id_mismatch,
    parse_float,
    parse_int,
    trec_records,
)
from ..errors import EmptyQueriesError, InputError, MetricNameError
from ..metrics._graded import graded_ndcg_values
from ..metrics._names import MetricSpec
from ..metrics._policies import GRADED, KINDS, binary_policy_values, parse_metric_list
from ..metrics._ranking import aggregate
from ..options import DEFAULTS, check_option, positive_int
from ._result import EvaluationResult
from ._slices import attach_slices, make_slices, refuse_positional
from ._stream import FirstRanks
from .counting import _kernels

__all__ = ["evaluate_run"]

RUN_FAMILIES = (
    "hit_rate",
    "recall",
    "precision",
    "map",
    "map_cut",
    "map_capped",
    "map@R",
    "r_precision",
    "mrr",
    "medr",
    "meanr",
    "ndcg",
    "ndcg_exp",
    "dcg",
    "dcg_exp",
    "f1",
    "recall_cap",
    "bpref",
    "rbp",
    "rbp_residual",
    "gm_map",
    "iprec_at_recall",
    "iprec_11pt",
)
_GRADED = GRADED
_OWN = ("bpref", "rbp_residual")  # computed here: they read judgements beyond relevance
_FIRST = ("hit_rate", "mrr", "medr", "meanr")  # metrics of the first relevant rank
_WHY = {
    "pair": "pair metrics threshold the similarity of every query-gallery pair, and a run holds only each "
    "query's retrieved documents (scores need not even compare across queries); call "
    "retrieval_checks.evaluate on the embeddings",
    "grouped": "grouped recall re-ranks inside label groups of the whole gallery; call retrieval_checks.evaluate "
    "on the embeddings and labels",
    "embedding": "it is a property of the embedding set, which a run does not have; call retrieval_checks.evaluate",
    "crossmodal": "it is an image-text metric: call retrieval_checks.evaluate_image_text",
}


# ----------------------------------------------------------------------------- options
def parse_run_metrics(metrics) -> list[MetricSpec]:
    specs = parse_metric_list(metrics, "['map', 'ndcg@10']")
    for s in specs:
        if s.family not in RUN_FAMILIES:
            why = _WHY.get(s.kind, "it is not a metric of one query's ranking")
            if s.capabilities.entry == "ann_recall":
                why = (
                    "it compares an approximate index with exact search: call retrieval_checks.ann_recall("
                    "queries, gallery, neighbors, k=K) with the index's neighbours"
                )
            raise MetricNameError(
                f"{s.name!r} cannot be computed from a run: {why}. A run gives the query-level "
                f"metrics: {', '.join(RUN_FAMILIES)}.",
                name=s.name,
            )
    return specs


@dataclass(frozen=True)
class _Request:
    specs: list
    ties: str
    empty_queries: str
    relevance_level: int
    confidence: float
    k: int | None
    queries: str = "both"
    ignore_identical_ids: bool = False


_QUERIES = ("both", "run", "qrels")


def _choice(value, name: str, allowed, why: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        close = [
            a for a in allowed if isinstance(value, str) and a.startswith(value.strip().lower()[:3])
        ]
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InputError(
            f"{name}={shown(value)}: expected one of {', '.join(map(repr, allowed))}{hint}: {why}."
        )
    return value


def _options(
    metrics,
    ties,
    empty_queries,
    relevance_level,
    confidence,
    k,
    queries="both",
    ignore_identical_ids=False,
) -> _Request:
    queries = _choice(
        queries,
        "queries",
        _QUERIES,
        "the queries averaged over: 'both' (every query of the run and the qrels), 'run' (the "
        "run's judged queries, trec_eval's default) or 'qrels' (every judged query, trec_eval -c)",
    )
    if empty_queries is None:  # trec_eval's query sets score a judged query without relevant as 0
        empty_queries = "skip" if queries == "both" else "zero"
    if not isinstance(ignore_identical_ids, bool):
        raise InputError(
            f"ignore_identical_ids={shown(ignore_identical_ids)}: expected True or False (True: a "
            "document whose id is the query's id is dropped from the run, BEIR's rule)."
        )
    return _Request(
        specs=parse_run_metrics(metrics),
        ties=check_option("ties", ties),
        empty_queries=check_option("empty_queries", empty_queries),
        relevance_level=positive_int(
            relevance_level,
            "relevance_level",
            "the least grade that counts as relevant, as trec_eval's -l; default 1",
        ),
        confidence=check_option("confidence", confidence),
        k=None
        if k is None
        else positive_int(
            k,
            "k",
            "the depth: the top k documents of each query are evaluated; None keeps them all",
        ),
        queries=queries,
        ignore_identical_ids=ignore_identical_ids,
    )


# ----------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class _Flat:
    """A run and its qrels as flat arrays over the result's queries (0 .. n_q - 1)."""

    query_ids: np.ndarray
    q: np.ndarray  # int64: query of each retrieved entry
    doc: np.ndarray  # int64: document code of each retrieved entry
    score: np.ndarray  # float64
    jq: np.ndarray  # int64: query of each judged entry
    jdoc: np.ndarray  # int64: document code of each judged entry
    grade: np.ndarray  # int64 >= -1 (-1: in the pool, not judged)
    n_docs: int  # document codes are 0 .. n_docs - 1
    n_gallery: int  # distinct documents (a grade matrix: its columns)
    doc_names: list | None = None  # the id of each document code; None: its decimal text
    text_order: bool = False  # the codes follow the ids' code-point order (doc_names sorted)

    def doc_text(self, codes: np.ndarray) -> list[str]:
        if self.doc_names is None:
            return [str(int(c)) for c in codes]
        return [self.doc_names[int(c)] for c in codes]


def _id(value, what: str) -> str:
    if isinstance(value, str) and value.strip() and value == value.strip() and " " not in value:
        where, _, name = what.rpartition(": ")
        return check_field(
            value, where or what, name
        )  # no invisible character: the rule of the files' ids
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    raise InputError(
        f"{what} {shown(value)}: ids are non-empty strings without spaces, or integers "
        "(compared as their decimal text, as trec_eval reads them)."
    )


def _grade(value, where: str) -> int:
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not ok and isinstance(value, numbers.Real) and not isinstance(value, bool):
        ok = math.isfinite(float(value)) and float(value).is_integer()
    if not ok or value < -1:
        raise InputError(
            f"{where}: grade {shown(value)} is not an integer >= -1; grades are -1 (in the pool "
            "but not judged, trec_eval's marker), 0 (judged non-relevant), 1, 2, ... (relevant "
            "from relevance_level on)."
        )
    if value > INT64_MAX:
        raise InputError(
            f"{where}: grade {shown(value)} is beyond the 64-bit integer range (<= {INT64_MAX}); "
            "grades are small whole numbers: 0 (judged non-relevant), 1, 2, ..."
        )
    return int(value)


def _score(value, where: str) -> float:
    if type(value) is float and math.isfinite(
        value
    ):  # the common case, without the ABC checks (big run files)
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{where}: score {shown(value)} is not a number.")
    try:
        s = float(value)
    except OverflowError:  # an int beyond float64 (10**400)
        raise InputError(
            f"{where}: score {shown(value)} is beyond the float64 range (about 1.8e308); give a "
            "smaller score."
        ) from None
    if not math.isfinite(s):
        raise InputError(
            f"{where}: score {s} is not finite; give every retrieved document a finite score "
            "(or leave it out of the run)."
        )
    return s


def _is_int(text: str) -> bool:
    """Whether a field reads as an integer (a qrels grade: '1', '-1')."""
    return text.lstrip("+-").isdigit()


def _read_run_file(path: Path) -> dict[str, dict[str, float]]:
    """A TREC run: ``qid Q0 docid rank score tag`` per line; the score decides the order.
    Fields after the sixth are ignored and ``#`` comment lines skipped, as trec_eval does."""
    out: dict[str, dict[str, float]] = {}
    line_of: dict[tuple[str, str], str] = {}  # "file:line" of each pair
    for where, f in trec_records(path, "run"):
        if len(f) < 6:
            raise InputError(
                f"{where}: a TREC run line has 6 fields 'qid Q0 docid rank score tag' (more are "
                f"ignored, as trec_eval ignores them), found {len(f)}: {shown(' '.join(f), 80)}."
                + (
                    " It reads as a qrels line ('qid 0 docid grade'): were the run and the qrels "
                    "given the other way round? The run comes first."
                    if len(f) == 4 and _is_int(f[3])
                    else ""
                )
            )
        qid, doc = f[0], f[2]
        value = parse_float(f[4], where, "the score (5th field)")
        row = out.setdefault(qid, {})
        if doc in row:
            first = line_of[qid, doc].rpartition(":")[2]
            raise InputError(
                f"{where}: document {doc!r} appears twice for query {qid!r} (also on line {first}); a "
                "run ranks each document once per query: remove one."
            )
        row[doc] = _score(value, where)
        line_of[qid, doc] = where
    return out


def _read_qrels_file(path: Path) -> dict[str, dict[str, int]]:
    """TREC qrels: ``qid iteration docid grade`` per line (``#`` comment lines skipped; a
    fifth field is refused, as trec_eval refuses it: it may be a shifted column)."""
    out: dict[str, dict[str, int]] = {}
    line_of: dict[tuple[str, str], str] = {}  # "file:line" of each pair
    for where, f in trec_records(path, "qrels"):
        if len(f) != 4:
            raise InputError(
                f"{where}: a TREC qrels line has 4 fields 'qid 0 docid grade', found {len(f)}: "
                f"{shown(' '.join(f), 80)}."
                + (
                    " It reads as a run line ('qid Q0 docid rank score tag'): were the run and the "
                    "qrels given the other way round? The run comes first."
                    if len(f) == 6
                    else ""
                )
            )
        qid, doc = f[0], f[2]
        grade = parse_int(
            f[3],
            where,
            "grade",
            "grades are integers >= -1: -1 (in the pool but not judged), 0 (judged "
            "non-relevant), 1, 2, ... (relevant from relevance_level on).",
        )
        row = out.setdefault(qid, {})
        if doc in row:
            raise InputError(
                f"{where}: document {doc!r} is judged twice for query {qid!r} (also on line "
                f"{line_of[qid, doc].rpartition(':')[2]}); keep one judgement."
            )
        row[doc] = _grade(grade, where)
        line_of[qid, doc] = where
    return out


def _nested_mapping(obj: Mapping, name: str, shape: str, convert) -> dict:
    """``{query id: {document id: value}}`` with the ids as text, each value read by
    ``convert(value, where)``; ``shape`` says what ``name`` maps queries to."""
    out: dict = {}
    for qid, docs in obj.items():
        q = _id(qid, f"{name}: query id")
        if not isinstance(docs, Mapping):
            raise InputError(f"{name}[{shown(qid)}] is a {type(docs).__name__}; {shape}.")
        if q in out:
            raise InputError(
                f"{name}: query ids {shown(qid)} and {q!r} are the same id; give each query once."
            )
        row = _plain_row(docs, convert)
        if row is not None:  # every id and value plainly valid: checked a row at a time
            out[q] = row
            continue
        row = {}
        for doc, value in docs.items():
            d = _id(doc, f"{name}[{shown(qid)}]: document id")
            if d in row:
                raise InputError(
                    f"{name}[{shown(qid)}]: document ids {shown(doc)} and {d!r} are the same id."
                )
            row[d] = convert(value, f"{name}[{shown(qid)}][{shown(doc)}]")
        out[q] = row
    return out


def _plain_row(docs: Mapping, convert) -> dict | None:
    """``docs`` as a dict when every document id is a plain text id (non-empty, printable
    ASCII without spaces: what :func:`_id` returns unchanged) and every value a finite
    float (``_score``) or an int from -1 to the int64 maximum (``_grade``), checked
    with whole-row operations; else None, and the entries are read one by one with
    their messages. The same ids and values either way: a fast path for big runs (the
    messages' text was built for every entry: most of evaluate_run's time)."""
    if not docs:
        return {}
    keys, values = docs.keys(), docs.values()
    if set(map(type, keys)) != {str} or "" in keys:
        return None
    text = "".join(keys)
    if not (text.isascii() and text.isprintable()) or " " in text:
        return None
    if convert is _score:
        if set(map(type, values)) != {float}:
            return None
        if not np.isfinite(np.fromiter(values, np.float64, len(docs))).all():
            return None
    elif convert is _grade:
        if set(map(type, values)) != {int} or min(values) < -1 or max(values) > INT64_MAX:
            return None
    else:
        return None
    return dict(docs)


def _run_mapping(run: Mapping) -> dict[str, dict[str, float]]:
    return _nested_mapping(run, "run", "a run maps each query id to a dict {docid: score}", _score)


def _qrels_mapping(qrels: Mapping) -> dict[str, dict[str, int]]:
    return _nested_mapping(
        qrels, "qrels", "qrels map each query id to a dict {docid: grade}", _grade
    )


def _id_order(ids) -> list[str]:
    """Digit strings by value (then text), before any other id, those by text."""
    return sorted(ids, key=lambda s: (0, int(s), s) if s.isdigit() else (1, 0, s))


def _check_overlap(run, qrels) -> None:
    """Refuse a run and qrels (their query ids) that share no query."""
    if run and qrels and not set(run) & set(qrels):
        why = id_mismatch(_id_order(run), _id_order(qrels), "the qrels")
        raise InputError(
            f"No query id of the run is in the qrels (run: {', '.join(_id_order(run)[:3])}...; qrels: "
            f"{', '.join(_id_order(qrels)[:3])}...): they name queries differently"
            f"{' (' + why + ')' if why else ''}; make the ids match."
        )


def _flatten(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> _Flat:
    _check_overlap(run, qrels)
    qids = _id_order(set(run) | set(qrels))
    q_of = {q: i for i, q in enumerate(qids)}
    d_of: dict[str, int] = {}
    # documents coded in order of first appearance: each id's first setdefault keeps
    # its draw of one count (C-level loops: no Python frame per entry), and the
    # draws kept, ranked, are the codes
    draw = itertools.count()

    def table(side, cast):
        sizes = [len(side[q]) for q in side]
        n = sum(sizes)
        rows = np.repeat(np.array([q_of[q] for q in side], np.int64), sizes)
        ids = itertools.chain.from_iterable(side[q] for q in side)
        docs = np.fromiter(map(d_of.setdefault, ids, draw), np.int64, count=n)
        values = itertools.chain.from_iterable(side[q].values() for q in side)
        return rows, docs, np.fromiter(values, cast, count=n)

    q, doc, score = table(run, np.float64)
    jq, jdoc, grade = table(qrels, np.int64)
    kept = np.fromiter(d_of.values(), np.int64, count=len(d_of))  # ascending
    doc, jdoc = np.searchsorted(kept, doc), np.searchsorted(kept, jdoc)
    return _Flat(
        np.array(qids, dtype=object),
        q,
        doc,
        score,
        jq,
        jdoc,
        grade,
        len(d_of),
        len(d_of),
        list(d_of),
    )


# ----------------------------------------------------------------------------- dicts at once
# A big run as dicts ({qid: {docid: score}}, 10M entries) is read without a Python step per
# entry: its ids and values are checked over whole arrays, and document ids are coded by
# sorting their bytes (a dict of every id cost most of evaluate_run's time: each lookup
# reads a table and a string far apart in memory). Anything not plainly valid goes to the
# entry-by-entry reading (_nested_mapping, _flatten), which gives every message.


def _jit():
    """:mod:`._runs_numba` where the engine's kernels are numba's (:mod:`.counting._kernels`), else
    None (the numpy code here: the same integers)."""
    if _kernels.ACCELERATOR != "numba":
        return None
    from . import _runs_numba  # imports numba: only where numba is the accelerator

    return _runs_numba


def _plain_ids(ids: list):
    """:func:`_plain_text` of ``ids`` (a list of ids) joined by newlines; None where an
    id is not a ``str``."""
    try:
        text = "\n".join(ids)
    except TypeError:  # an id that is not text: the entry path reads it
        return None
    return _plain_text(text, len(ids))


def _plain_text(text: str, n: int):
    """``(bytes, starts, lengths, bytes used)`` of the ``n`` ids that ``text`` joins by
    newlines, when every id is printable ASCII without spaces and non-empty (what
    :func:`_id` returns unchanged); else None."""
    if n == 0:
        return np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64), None
    if not text.isascii():
        return None
    buf = np.frombuffer(text.encode("ascii"), np.uint8)
    jit = _jit()
    if jit is not None:
        ok, starts, lens, used = jit.id_bounds(buf, n)
        return (buf, starts, lens, used) if ok else None
    sep = buf == 10
    if buf.size == 0 or int(np.count_nonzero(sep)) != n - 1:  # "", or a newline in an id
        return None
    ok = sep | ((buf >= 33) & (buf <= 126))  # printable ASCII without the space
    if not ok.all() or buf[0] == 10 or buf[-1] == 10 or (sep[1:] & sep[:-1]).any():
        return None  # an empty id ("" first, last or between two separators)
    ends = np.append(np.flatnonzero(sep), buf.size)
    starts = np.concatenate([[0], ends[:-1] + 1])
    return buf, starts, ends - starts, np.bincount(buf[~sep], minlength=256) > 0


def _code_ids(plain) -> tuple[np.ndarray, list]:
    """Each id's rank among the distinct ids in code-point order (trec_eval's strcmp
    order; the byte order of their UTF-8) and the distinct ids in that order, from
    :func:`_plain_text`'s bytes, zero-padded to the longest id (no id holds a zero byte,
    so a prefix sorts first, as in strcmp)."""
    buf, starts, lens, used = plain
    n = starts.size
    if n == 0:
        return np.zeros(0, np.int64), []
    width = int(lens.max())
    words = (width + 7) // 8
    base = int(used.sum()) + 1  # the bytes the ids use, and the padding
    index_bits = (n - 1).bit_length()
    jit = _jit()
    if words > 8 or n * words * 8 > 2 * buf.size + (64 << 20):  # ids over 64 bytes: by a dict
        ids = buf.tobytes().decode("ascii").split("\n")
        first_draw: dict[str, int] = {}  # each id's first draw of one count
        draw = np.fromiter(map(first_draw.setdefault, ids, itertools.count()), np.int64, count=n)
        kept = np.fromiter(first_draw.values(), np.int64, count=len(first_draw))  # ascending
        seen = list(first_draw)  # in order of first appearance
        order = sorted(range(len(seen)), key=seen.__getitem__)
        rank = np.empty(len(seen), np.int64)
        rank[order] = np.arange(len(seen))
        return rank[np.searchsorted(kept, draw)], [seen[i] for i in order]
    digit = np.zeros(256, np.uint64)
    digit[used] = np.arange(1, base, dtype=np.uint64)
    if base**width <= 1 << (64 - index_bits):
        # the number with its index below it: one sort of plain integers gives the order
        # and the indices (far faster than an argsort)
        if jit is not None:
            packed = np.sort(jit.id_numbers(buf, starts, lens, digit, base, width, index_bits))
            codes, first = jit.codes_of_sorted(packed, index_bits)
            return codes, _names(buf, starts, lens, first)
        padded = _padded(buf, lens, width)
        value = np.zeros(n, np.uint64)
        for j in range(width):
            value = value * np.uint64(base) + digit[padded[:, j]]
        packed = np.sort((value << np.uint64(index_bits)) | np.arange(n, dtype=np.uint64))
        order = (packed & np.uint64((1 << index_bits) - 1)).astype(np.int64)
        value = packed >> np.uint64(index_bits)
        new = np.ones(n, bool)
        new[1:] = value[1:] != value[:-1]
    elif jit is not None and base**width <= 1 << 64:  # the number alone: an argsort
        value = jit.id_numbers(buf, starts, lens, digit, base, width, 0)
        order = np.argsort(value)  # equal numbers: any order, one code
        value = value[order]
        new = np.ones(n, bool)
        new[1:] = value[1:] != value[:-1]
    else:  # the bytes as big-endian 64-bit words, sorted as a key of several integers
        key = _padded(buf, lens, words * 8).view(">u8").astype(np.uint64)
        order = np.argsort(key[:, 0]) if words == 1 else np.lexsort(key.T[::-1])
        key = key[order]
        new = np.ones(n, bool)
        new[1:] = (key[1:] != key[:-1]).any(axis=1)
    codes = np.empty(n, np.int64)
    codes[order] = np.cumsum(new) - 1
    return codes, _names(buf, starts, lens, order[new])


def _padded(buf: np.ndarray, lens: np.ndarray, width: int) -> np.ndarray:
    """The ids' bytes as rows of ``width`` bytes, zero-padded."""
    padded = np.zeros((lens.size, width), np.uint8)
    padded[np.arange(width) < lens[:, None]] = buf[buf != 10]
    return padded


def _names(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, at: np.ndarray) -> list:
    """The ids number ``at`` as text, cut from the joined bytes at once."""
    if at.size == 0:
        return []
    s, m = starts[at], lens[at] + 1  # each id and its newline
    ends = np.cumsum(m)
    pos = np.arange(int(ends[-1])) - np.repeat(ends - m - s, m)
    out = buf[np.minimum(pos, buf.size - 1)]
    out[ends - 1] = 10
    return out[:-1].tobytes().decode("ascii").split("\n")


def _plain_side(obj: Mapping, kind: type):
    """(query ids, row sizes, document ids joined by newlines, values) of ``{qid: {docid:
    value}}`` when its query ids are plain (text ids, or ints), distinct as text, its rows
    dicts, its document ids text and every value of ``kind`` (float: finite; int: -1 to
    the int64 maximum); else None. Each row's ids are joined on their own (a list of
    every id would touch each id object once more)."""
    qids = [q if type(q) is str else str(q) if type(q) is int else None for q in obj]
    if None in qids or len(set(qids)) != len(qids) or _plain_ids(qids) is None:
        return None
    rows = list(obj.values())
    if rows and set(map(type, rows)) != {dict}:
        return None
    sizes = np.fromiter(map(len, rows), np.int64, count=len(rows))
    n = int(sizes.sum())
    try:  # rows without documents left out: each id then stands between two newlines
        text = "\n".join(map("\n".join, filter(None, rows)))
    except TypeError:  # a document id that is not text: the entry path reads it
        return None

    def values():
        return itertools.chain.from_iterable(map(dict.values, rows))

    if n and set(map(type, values())) != {kind}:
        return None
    if kind is float:
        out = np.fromiter(values(), np.float64, count=n)
        if not np.isfinite(out).all():
            return None
    else:
        if n and (min(values()) < -1 or max(values()) > INT64_MAX):
            return None
        out = np.fromiter(values(), np.int64, count=n)
    return qids, sizes, text, out


def _plain_flat(run, qrels) -> _Flat | None:
    """The run and qrels dicts as flat arrays read at once (see above), or None where an
    id or value is not plainly valid: the entry-by-entry reading then gives its message."""
    if type(run) is not dict or type(qrels) is not dict:
        return None
    r, j = _plain_side(run, float), _plain_side(qrels, int)
    if r is None or j is None:
        return None
    n_run = r[3].size
    plain = _plain_text("\n".join(x for x in (r[2], j[2]) if x), n_run + j[3].size)
    if plain is None:
        return None
    _check_overlap(r[0], j[0])
    qids = _id_order(set(r[0]) | set(j[0]))
    q_of = {q: i for i, q in enumerate(qids)}
    codes, names = _code_ids(plain)

    def rows(side):
        return np.repeat(np.array([q_of[q] for q in side[0]], np.int64), side[1])

    return _Flat(
        np.array(qids, dtype=object),
        rows(r),
        codes[:n_run],
        r[3],
        rows(j),
        codes[n_run:],
        j[3],
        len(names),
        len(names),
        names,
        text_order=True,
    )


def _read_string_ids(run, qrels) -> _Flat:
    plain = _plain_flat(run, qrels)
    if plain is not None:
        return plain
    if isinstance(run, (str, Path)):
        run = _read_run_file(Path(run))
    elif isinstance(run, Mapping):
        run = _run_mapping(run)
    else:
        raise InputError(
            f"run is a {type(run).__name__}: give a dict {{qid: {{docid: score}}}}, the path of a TREC "
            "run file, or (indices, scores) arrays of an ANN search."
        )
    if isinstance(qrels, (str, Path)):
        qrels = _read_qrels_file(Path(qrels))
    elif isinstance(qrels, Mapping):
        qrels = _qrels_mapping(qrels)
    else:
        raise InputError(
            f"qrels is a {type(qrels).__name__}: give a dict {{qid: {{docid: grade}}}} or the path of "
            "a TREC qrels file."
        )
    return _flatten(run, qrels)


# ----------------------------------------------------------------------------- (indices, scores)
def _run_arrays(indices, scores):
    idx, val = as_numpy(indices, "indices"), as_numpy(scores, "scores")
    if idx.ndim != 2 or val.shape != idx.shape:
        raise InputError(
            f"run=(indices, scores): both must be (n_queries x k) arrays of one shape, got indices "
            f"{idx.shape} and scores {val.shape}."
        )
    if idx.dtype.kind not in "iu":
        raise InputError(
            f"run=(indices, scores): indices must be integers (document indices, -1 for no result), "
            f"got dtype {idx.dtype}."
        )
    if val.dtype.kind not in "iuf":
        raise InputError(f"run=(indices, scores): scores must be numbers, got dtype {val.dtype}.")
    idx = idx.astype(np.int64)
    if (idx < -1).any():
        i, j = np.argwhere(idx < -1)[0]
        raise InputError(
            f"run=(indices, scores): indices[{i}, {j}] = {idx[i, j]}; indices are >= 0, or -1 for "
            "no result."
        )
    valid = idx >= 0
    val = val.astype(np.float64)
    bad = valid & ~np.isfinite(val)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InputError(
            f"run=(indices, scores): scores[{i}, {j}] = {val[i, j]} is not finite (NaN or inf) where "
            f"indices[{i}, {j}] = {idx[i, j]} is a result; give it a finite score or index -1."
        )
    srt = np.sort(np.where(valid, idx, -1 - np.arange(idx.shape[1])[None, :]), axis=1)
    dup = (np.diff(srt, axis=1) == 0) & (srt[:, 1:] >= 0)
    if dup.any():
        i = int(np.argwhere(dup)[0][0])
        raise InputError(
            f"run=(indices, scores): row {i} retrieves document {int(srt[i][1:][dup[i]][0])} twice; a "
            "run ranks each document once per query."
        )
    _refuse_distances(valid, val)
    q = np.repeat(np.arange(idx.shape[0], dtype=np.int64), valid.sum(axis=1))
    return q, idx[valid], val[valid]


def _refuse_distances(valid: np.ndarray, val: np.ndarray) -> None:
    """An index lists its results best first, so similarity scores never rise along a
    row. Scores that rise along the rows and never fall are distances (faiss's
    ``IndexFlatL2`` and HNSW return squared L2, ascending), which a run ranks in
    reverse, highest first: refused, naming the fix (a new user's trial ranked them
    so, silently)."""
    both = valid[:, 1:] & valid[:, :-1]
    step = val[:, 1:] - val[:, :-1]
    rising, falling = both & (step > 0), both & (step < 0)
    rows = int(rising.any(axis=1).sum())
    if rows >= 2 and not falling.any():  # one row is too little to tell
        raise InputError(
            f"run=(indices, scores): the scores rise along every row that orders its results ({rows} rows, "
            "and none falls), so they look like distances (faiss's IndexFlatL2 and HNSW indexes return "
            "squared L2 distances, nearest first); a run ranks the highest score first. Pass similarities: "
            "(indices, -distances); if they are similarities listed worst first, reverse the columns."
        )


def _qrels_for_arrays(qrels, n_q: int):
    """(query, document, grade) triples of the qrels next to (indices, scores) and the
    number of documents a grade matrix declares (0 otherwise)."""
    import scipy.sparse as sp

    if sp.issparse(qrels) or isinstance(qrels, np.ndarray):
        m = sp.coo_matrix(qrels)
        if m.ndim != 2 or m.shape[0] != n_q:
            raise InputError(
                f"qrels: a grade matrix must have one row per query ({n_q}), got shape {m.shape}."
            )
        data = m.data.astype(np.float64)
        bad = ~np.isfinite(data) | (data < -1) | (data != np.round(data)) | (data > INT64_MAX)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            _grade(m.data[i].item(), f"qrels[{int(m.row[i])}, {int(m.col[i])}]")
        keep = data != 0  # a matrix's zeros: not judged, as no qrels line
        return (
            m.row[keep].astype(np.int64),
            m.col[keep].astype(np.int64),
            data[keep].astype(np.int64),
            m.shape[1],
        )
    if isinstance(qrels, Mapping):
        items = list(qrels.items())
    elif isinstance(qrels, (list, tuple)):
        if len(qrels) != n_q:
            raise InputError(
                f"qrels: a list of relevant indices needs one entry per query ({n_q}), got {len(qrels)}."
            )
        items = list(enumerate(qrels))
    else:
        raise InputError(
            f"qrels is a {type(qrels).__name__}: next to (indices, scores) give a dict {{row: "
            "{index: grade}}}, a list of relevant-index lists (one per row) or a (n_queries x n_docs) "
            "grade matrix (numpy or scipy sparse)."
        )
    return (*_triples(items, n_q), 0)


def _index_of(v) -> int | None:
    """``v`` as a row or document index, ids compared as text (``"3"`` is ``3``; ``"03"``,
    ``" 3"``, ``3.0`` and booleans are not): an int, or None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, str) and v.isascii() and v.isdigit() and str(int(v)) == v:
        return int(v)
    return None


def _triples(items, n_q: int):
    rows, docs, grades = [], [], []
    taken = {}
    for key, rel in items:
        row = _index_of(key)
        if row is None or not 0 <= row < n_q:
            raise InputError(
                f"qrels: key {shown(key)} is not a row of the run: with (indices, scores) queries are "
                f"the rows 0 .. {n_q - 1} (ints, or their text)."
            )
        if row in taken:
            raise InputError(
                f"qrels: keys {shown(taken[row])} and {shown(key)} are the same query (row {row}: "
                "ids are compared as text); give each query once."
            )
        taken[row] = key
        pairs = rel.items() if isinstance(rel, Mapping) else ((d, 1) for d in rel)
        seen = set()
        for doc, g in pairs:
            d = _index_of(doc)
            if d is None or not 0 <= d <= INT64_MAX:
                raise InputError(
                    f"qrels[{int(row)}]: document {shown(doc)} is not an index >= 0 within the 64-bit "
                    "integer range (an int, or its text)."
                )
            if int(d) in seen:
                raise InputError(f"qrels[{int(row)}]: document {int(d)} is given twice.")
            seen.add(int(d))
            rows.append(int(row))
            docs.append(int(d))
            grades.append(_grade(g, f"qrels[{int(row)}][{int(d)}]"))
    return np.array(rows, np.int64), np.array(docs, np.int64), np.array(grades, np.int64)


def _read_arrays(run, qrels) -> _Flat:
    indices, scores = run
    q, doc, score = _run_arrays(indices, scores)
    n_q = int(as_numpy(indices, "indices").shape[0])
    jq, jdoc, grade, n_cols = _qrels_for_arrays(qrels, n_q)
    if n_cols and doc.size and doc.max() >= n_cols:
        raise InputError(
            f"run=(indices, scores) retrieves document {int(doc.max())} but the grade matrix has "
            f"{n_cols} columns; give one column per document."
        )
    n_docs = max(
        n_cols, int(doc.max()) + 1 if doc.size else 0, int(jdoc.max()) + 1 if jdoc.size else 0
    )
    n_gallery = n_cols or int(np.unique(np.concatenate([doc, jdoc])).size)
    return _Flat(np.arange(n_q, dtype=np.int64), q, doc, score, jq, jdoc, grade, n_docs, n_gallery)


def _read(run, qrels) -> _Flat:
    arrays = (
        isinstance(run, (tuple, list))
        and len(run) == 2
        and not isinstance(run[0], (str, tuple, Mapping))
    )
    flat = _read_arrays(run, qrels) if arrays else _read_string_ids(run, qrels)
    if flat.q.size == 0:
        raise InputError(
            "run is empty: no query retrieved any document; evaluate a run with results."
        )
    return flat


def _drop_identical(flat: _Flat) -> tuple[_Flat, int]:
    """BEIR's ``ignore_identical_ids``: a retrieved document whose id is its query's id
    leaves the run (it stays in the qrels: R and the ideal DCG still count it)."""
    if flat.doc_names is None:  # (indices, scores): queries are rows, documents indices
        same = flat.doc == flat.q
    else:  # the code of each query's own id among the documents (-1: none), compared at once
        code = {name: i for i, name in enumerate(flat.doc_names)}
        own = np.array([code.get(str(x), -1) for x in flat.query_ids], np.int64)
        same = flat.doc == own[flat.q]
    if not same.any():
        return flat, 0
    keep = ~same
    out = replace(flat, q=flat.q[keep], doc=flat.doc[keep], score=flat.score[keep])
    if out.q.size == 0:
        raise InputError(
            "run is empty once ignore_identical_ids drops each query's own id: every retrieved "
            "document was the query itself."
        )
    return out, int(same.sum())


# ----------------------------------------------------------------------------- ranking
@dataclass(frozen=True)
class _Ranked:
    """The retrieved entries ordered by query, then decreasing score (then, under
    ``ties="docid"``, decreasing document id)."""

    row: np.ndarray  # int64 query
    score: np.ndarray  # float64
    grade: np.ndarray  # int64 (0 where not in the qrels; -1 in the pool, not judged)
    judged: np.ndarray  # bool: in the qrels with a grade >= 0
    start: np.ndarray  # int64: query i's entries are start[i] .. start[i + 1] - 1
    bounds: np.ndarray  # int64: group j's entries are bounds[j] .. bounds[j + 1] - 1

    @cached_property
    def group(self) -> np.ndarray:
        """int64 tie group of each entry (one query, one score), consecutive; computed
        where a measure reads every entry's group (bpref, rbp_residual)."""
        return np.repeat(np.arange(self.bounds.size - 1, dtype=np.int64), np.diff(self.bounds))

    @property
    def rank(self) -> np.ndarray:
        """1-based slot of each entry in its query's ranking."""
        return np.arange(self.row.size, dtype=np.int64) - self.start[self.row] + 1

    def untied(self) -> "_Ranked":
        """The same order with every entry a group of its own (``ties="docid"``)."""
        n = self.row.size
        return replace(self, bounds=np.arange(n + 1, dtype=np.int64))


def _run_grades(flat: _Flat, q: np.ndarray, doc: np.ndarray, start=None):
    """The grade of each retrieved entry ``(q, doc)`` (0 where it is not in the qrels)
    and whether the qrels judge it (a grade >= 0; -1 is in the pool but not judged).
    ``start``: the entries are grouped by query, query i's at ``start[i] ..
    start[i + 1] - 1``."""
    jit = _jit()
    if jit is not None:
        order = np.lexsort((flat.jdoc, flat.jq))
        n_q = flat.query_ids.shape[0]
        jstart = np.searchsorted(flat.jq[order], np.arange(n_q + 1))
        jdoc, jgrade = flat.jdoc[order], flat.grade[order]
        if start is not None and flat.n_docs <= max(4 * q.size, 1 << 20):
            # one query at a time: its judged documents marked in a table of every
            # document (in cache), each entry one lookup
            return jit.grades_by_query(doc, start, jstart, jdoc, jgrade, flat.n_docs)
        return jit.grades_of(q, doc, jstart, jdoc, jgrade)
    n_docs = flat.n_docs
    jdoc = flat.jdoc
    if flat.query_ids.shape[0] * n_docs >= 1 << 62:  # (query, document) keys would overflow
        both = np.unique(np.concatenate([doc, jdoc]), return_inverse=True)[1]
        doc, jdoc, n_docs = both[: doc.size], both[doc.size :], int(both.max()) + 1
    judged = flat.jq * n_docs + jdoc
    order = np.argsort(judged, kind="stable")
    keys, grades = judged[order], flat.grade[order]
    wanted = q * n_docs + doc
    at = np.minimum(np.searchsorted(keys, wanted), max(keys.size - 1, 0))
    found = (keys[at] == wanted) if keys.size else np.zeros(wanted.size, bool)
    grade = np.where(found, grades[at] if keys.size else 0, 0).astype(np.int64)
    return grade, found & (grade >= 0)


def _qid(value) -> str:
    """A query id for a message (numpy ints as plain ints)."""
    return shown(value.item() if isinstance(value, np.generic) else value)


def _doc_keys(flat: _Flat) -> np.ndarray:
    """Each entry's document id as a rank in the ids' text order (code points: the byte
    order of their UTF-8, trec_eval's strcmp)."""
    if flat.text_order:
        return flat.doc
    names = flat.doc_text(np.arange(flat.n_docs))
    key = np.empty(flat.n_docs, np.int64)
    key[sorted(range(flat.n_docs), key=names.__getitem__)] = np.arange(flat.n_docs)
    return key[flat.doc]


def _query_order(q: np.ndarray, score: np.ndarray, doc_key: np.ndarray | None) -> np.ndarray:
    """``np.lexsort((-doc_key, -score, q))`` (``doc_key`` None: without it): by query, then
    decreasing score (then decreasing document key), equal keys in input order. Where each
    query's entries are contiguous (every reading gives them so), each query's block is
    sorted on its own (by numba's stable sort; without numba, where a query has 64
    entries on average): small sorts in cache, the same order (both sorts are stable),
    several times faster than one lexsort."""
    n = q.size
    starts = np.flatnonzero(np.diff(q, prepend=-1) != 0)
    keys = (-score, q) if doc_key is None else (-doc_key, -score, q)
    jit = _jit()
    if (jit is None and starts.size * 64 > n) or np.unique(q[starts]).size != starts.size:
        return np.lexsort(keys)
    if jit is not None:  # any block size: no Python step per block
        by_key = doc_key is not None
        key = doc_key if by_key else np.zeros(0, np.int64)
        ends = np.append(starts[1:], n)
        qbits = int(q[starts].max()).bit_length() if n else 0
        bbits = (int((ends - starts).max()) - 1).bit_length() if n else 0
        if qbits + bbits <= 48:
            # (query, top bits of the score, index in the block) as one number each: one
            # sort of plain integers (vectorised), then each run of equal top bits put in
            # the order of its full scores (rare: scores closer than 2**-16 of their size)
            qstart = np.zeros(int(q[starts].max()) + 1 if n else 0, np.int64)
            qstart[q[starts]] = starts
            bits = np.ascontiguousarray(score, np.float64).view(np.uint64)
            packed = np.sort(jit.packed_by_score(q, bits, qstart, qbits, bbits))
            return jit.order_of_packed(packed, q, score, key, by_key, qstart, qbits, bbits)
        return jit.block_order(
            score, key, by_key, starts, ends, np.argsort(q[starts], kind="stable")
        )
    ends = np.append(starts[1:], n).tolist()
    out = np.empty(n, np.int64)
    at = 0
    for b in np.argsort(q[starts], kind="stable").tolist():
        s, e = int(starts[b]), ends[b]
        if doc_key is None:
            part = np.argsort(-score[s:e], kind="stable")
        else:
            part = np.lexsort((-doc_key[s:e], -score[s:e]))
        out[at : at + e - s] = part + s
        at += e - s
    return out


def _rank_run(flat: _Flat, k: int | None, ties: str = "pessimistic") -> _Ranked:
    """Sort each query's entries by decreasing score (``ties="docid"``: then by decreasing
    document id, trec_eval's order); cut to the top ``k``: refused where a tie straddles
    the cut (the top k is then not defined by the scores), except under ``"docid"``,
    whose order defines it, as trec_eval's ``-M`` does."""
    n_q = flat.query_ids.shape[0]
    order = _query_order(flat.q, flat.score, _doc_keys(flat) if ties == "docid" else None)
    row, score = flat.q[order], flat.score[order]
    start = np.searchsorted(row, np.arange(n_q + 1))
    grade, judged = _run_grades(flat, row, flat.doc[order], start)
    if k is not None:
        slot = np.arange(row.size) - start[row]
        cut = np.flatnonzero((slot == k) & (score == np.roll(score, 1)))
        if cut.size and ties != "docid":
            i = int(cut[0])
            raise InputError(
                f"k={k}: query {_qid(flat.query_ids[row[i]])} has documents tied at score "
                f"{float(score[i])!r} on both sides of rank {k}, so its top {k} is not defined by the "
                f"scores; pick another k, cut the run yourself, or pass ties='docid' (trec_eval's "
                f"order: equal scores by document id, descending)."
            )
        keep = slot < k
        row, score, grade, judged = row[keep], score[keep], grade[keep], judged[keep]
        start = np.searchsorted(row, np.arange(n_q + 1))
    new = np.ones(row.size, bool)
    new[1:] = (row[1:] != row[:-1]) | (score[1:] != score[:-1])
    bounds = np.append(np.flatnonzero(new), row.size).astype(np.int64)
    return _Ranked(row, score, grade, judged, start.astype(np.int64), bounds)


@dataclass(frozen=True)
class _Items:
    """The retrieved relevant entries as the engine's rank functions take them."""

    rid: np.ndarray
    position: np.ndarray  # 0-based among the query's retrieved relevant entries
    rank: np.ndarray  # pessimistic: 1 + position + non-relevant entries scoring >= it
    tied: np.ndarray  # non-relevant entries with its score
    first_group: np.ndarray  # per query: relevant entries tied with its best one


def _binary_items(rk: _Ranked, relevant: np.ndarray, n_q: int) -> _Items:
    """Counts read at the relevant entries only: the relevant entries before a position
    are a binary search among the relevant entries' positions (the non-relevant ones
    the rest), where cumulative sums over every entry cost a pass each."""
    at = np.flatnonzero(relevant)
    group = np.searchsorted(rk.bounds, at, side="right") - 1
    end = rk.bounds[group + 1]  # one past the entry's tie group
    begin = rk.bounds[group]
    row = rk.row[at]
    first = rk.start[row]
    rel_end, rel_begin, rel_first = (np.searchsorted(at, x) for x in (end, begin, first))
    ge = (end - rel_end) - (first - rel_first)  # non-relevant entries scoring >= it
    tied = (end - rel_end) - (begin - rel_begin)
    position = np.arange(at.size, dtype=np.int64) - rel_first
    best = position == 0
    first_group = np.zeros(n_q, np.int64)
    first_group[row[best]] = (rel_end - rel_begin)[best]
    return _Items(row, position, 1 + position + ge, tied, first_group)


def _group_parts(rk: _Ranked, mask: np.ndarray):
    """Per entry: entries of ``mask`` strictly above its tie group in its query (A), in its
    group (J, itself included when it is one), and s, n: the entries above the group and
    the group's size."""
    c = np.concatenate([[0], np.cumsum(mask)])
    end = rk.bounds[1:][rk.group]
    begin = rk.bounds[:-1][rk.group]
    first = rk.start[rk.row]
    return c[begin] - c[first], c[end] - c[begin], begin - first, end - begin


def _bpref_values(rk: _Ranked, flat: _Flat, R: np.ndarray, level: int, ties: str):
    """trec_eval's bpref per query under each policy: per retrieved relevant entry
    1 - min(A, R) / min(N, R), A the judged non-relevant entries above it (grade 0 ..
    level - 1; unjudged ones and grade -1 are ignored), N those of the qrels; summed and
    divided by R. Its tie group's J judged non-relevant entries come before it
    (pessimistic), after it (optimistic), or, under "average", y of them with y uniform
    on 0..J (an item's place among the J others is uniform: exact)."""
    n_q = R.shape[0]
    nonrel = rk.judged & (rk.grade < level)
    relevant = rk.grade >= level
    N = np.bincount(
        flat.jq, weights=(flat.grade >= 0) & (flat.grade < level), minlength=n_q
    ).astype(np.float64)
    A, J, _, _ = _group_parts(rk, nonrel)
    Rf = R.astype(np.float64)
    cap = np.minimum(N, Rf)[rk.row]
    Rr = Rf[rk.row]

    def term(mean_min):  # 1 - E[min(above, R)] / min(N, R); 1 where min(N, R) = 0
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(cap > 0, 1.0 - mean_min / cap, 1.0)

    def per_query(values):
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.bincount(rk.row[relevant], weights=values[relevant], minlength=n_q) / Rf
        v[R == 0] = np.nan
        return v

    pess = per_query(term(np.minimum(A + J, Rr)))
    opt = per_query(term(np.minimum(A, Rr)))
    out = {"pessimistic": pess, "optimistic": opt, "min": pess, "max": opt}
    if ties == "average":  # sum_{y=0..J} min(A + y, R) / (J + 1)
        Af, Jf = A.astype(np.float64), J.astype(np.float64)
        last = np.clip(Rr - Af, -1.0, Jf)  # the last y with A + y <= R
        below = (last + 1) * Af + last * (last + 1) / 2
        out["chosen"] = per_query(term((below + (Jf - last) * Rr) / (Jf + 1)))
    elif ties == "docid":
        Ad, _, _, _ = _group_parts(rk.untied(), nonrel)
        out["chosen"] = per_query(term(np.minimum(Ad, Rr)))
    else:
        out["chosen"] = out[ties]
    return out


def _residual_values(rk: _Ranked, p: float, n_q: int, ties: str):
    """RBP's residual per query: (1 - p) sum p^(rank - 1) over the retrieved entries the
    qrels do not judge, plus p^d (d the query's depth: nothing beyond it is judged). A tie
    group (s entries above, n in it, u not judged) puts them first (pessimistic: the
    greatest residual), last (optimistic) or anywhere (average: (u / n)(p^s - p^(s + n)),
    each slot not judged with probability u / n)."""
    unjudged = ~rk.judged
    _, u, s, n = _group_parts(rk, unjudged)
    first_of_group = np.arange(rk.row.size) == rk.bounds[:-1][rk.group]
    depth = np.diff(rk.start).astype(np.float64)

    def per_query(group_values):
        v = np.bincount(rk.row, weights=np.where(first_of_group, group_values, 0.0), minlength=n_q)
        return v + p**depth

    pess = per_query(p**s - p ** (s + u))
    opt = per_query(p ** (s + n - u) - p ** (s + n))
    out = {"pessimistic": pess, "optimistic": opt, "min": opt, "max": pess}
    if ties == "average":
        with np.errstate(divide="ignore", invalid="ignore"):
            out["chosen"] = per_query(np.where(n > 0, u / n, 0.0) * (p**s - p ** (s + n)))
    elif ties == "docid":
        t = rk.untied()
        _, _, sd, _ = _group_parts(t, unjudged)
        out["chosen"] = (
            np.bincount(t.row, weights=np.where(unjudged, (1 - p) * p**sd, 0.0), minlength=n_q)
            + p**depth
        )
    else:
        out["chosen"] = out[ties]
    return out


def _graded_values(specs, rk: _Ranked, flat: _Flat, ties: str) -> dict[str, dict[str, np.ndarray]]:
    """nDCG and DCG under each policy by :func:`retrieval_checks.metrics._graded.graded_ndcg_values`
    (the engine's): the retrieved entries of grade > 0 in its layout (rows ascending, scores
    ascending), the ideal DCG over every judged document of grade > 0, retrieved or not
    (grade -1 gains nothing); ``"docid"`` ranks the entries in trec_eval's order, untied."""
    out: dict[str, dict[str, np.ndarray]] = {kind: {} for kind in ("chosen", *KINDS)}
    if not specs:
        return out
    n_q = flat.query_ids.shape[0]
    graded = rk.grade > 0
    keep = flat.grade > 0
    judged = (flat.jq[keep], flat.grade[keep])

    def values(r: _Ranked, score: np.ndarray):
        it = _binary_items(r, graded, n_q)
        s, g = score[graded], r.grade[graded]
        o = np.lexsort((s, it.rid))  # the engine's layout: by row, ascending score
        return graded_ndcg_values(
            specs, it.rid[o], s[o], g[o], it.rank[o], it.tied[o], it.position[o], n_q, judged
        )

    by = values(rk, rk.score)
    if ties == "docid":  # one score per entry, in trec_eval's order
        chosen = values(rk.untied(), -np.arange(rk.row.size, dtype=np.float64))["pessimistic"]
    else:
        chosen = by[ties]
    for s in specs:
        pess, opt = by["pessimistic"][s.name], by["optimistic"][s.name]
        for kind, v in (
            ("chosen", chosen[s.name]),
            ("pessimistic", pess),
            ("optimistic", opt),
            ("min", pess),
            ("max", opt),
        ):
            out[kind][s.name] = v
    return out


# ----------------------------------------------------------------------------- result
def _censor(
    per_kind: dict[str, dict[str, np.ndarray]],
    specs,
    miss: np.ndarray,
    empty: np.ndarray,
    zero: bool,
    depth: int,
    outside: np.ndarray,
) -> None:
    """Queries that retrieved none of their relevant documents (``miss``): hit_rate and
    mrr 0, medr and meanr the censored rank depth + 1; queries without a relevant document
    (``empty``) under empty_queries="zero": 0, ranks depth + 1 (the graded metrics and the
    RBP residual keep their value where they have one: trec_eval's nDCG of a query without
    a relevant document at the level still counts its grades); queries outside the query
    set or skipped (``outside``): NaN."""
    for values in per_kind.values():
        for s in specs:
            v = values[s.name]
            if s.family in _FIRST:
                v[miss] = depth + 1.0 if s.unit == "rank" else 0.0
            if zero:
                if s.family in _GRADED or s.family == "rbp_residual":
                    v[empty & np.isnan(v)] = 0.0
                else:
                    v[empty] = depth + 1.0 if s.unit == "rank" else 0.0
            v[outside] = np.nan


def _first_ranks(it: _Items, n_q: int, ties: str, miss: np.ndarray, depth: int) -> np.ndarray:
    best = it.position == 0
    pess, opt = np.zeros(n_q, np.int64), np.zeros(n_q, np.int64)
    pess[it.rid[best]] = it.rank[best]
    opt[it.rid[best]] = (it.rank - it.tied)[best]
    if ties == "average":
        hit = it.rid[best]
        out = np.zeros(n_q)
        out[hit] = FirstRanks(pess, opt, it.first_group).under("average")[hit]
        out[miss] = depth + 1.0
        return out
    out = opt if ties == "optimistic" else pess  # docid: the items are untied
    out[miss] = depth + 1
    return out


def _check_empty(req: _Request, flat: _Flat, empty: np.ndarray, inside: np.ndarray) -> None:
    n_q = int(inside.sum())
    shown_ids = ", ".join(_qid(x) for x in flat.query_ids[empty[:5]])
    more = f" and {empty.size - 5} more" if empty.size > 5 else ""
    if n_q == 0:
        raise EmptyQueriesError(
            f"queries={req.queries!r} leaves no query: no query of the run is judged in the qrels; "
            "check that the run's and the qrels' query ids match.",
            indices=empty,
        )
    if empty.size == n_q:
        graded = flat.grade[inside[flat.jq]]
        top = int(graded.max()) if graded.size else 0
        if top <= 0:  # every measure is 0 whatever the run: a gate on it cannot fail
            raise EmptyQueriesError(
                f"None of the {n_q} queries has a judged document of any grade above 0: every measure "
                "would be 0 whatever the run; check the qrels' grades (and that the run's and the "
                "qrels' query ids match).",
                indices=empty,
            )
        if req.empty_queries != "zero":
            raise EmptyQueriesError(
                f"None of the {n_q} queries has a judged document at grade >= relevance_level="
                f"{req.relevance_level} (the highest grade judged is {top}), and empty_queries="
                f"{req.empty_queries!r} leaves nothing to average; lower relevance_level, or pass "
                "empty_queries='zero' (trec_eval's rule: the binary measures score 0, the graded "
                "ones keep the grades below the level).",
                indices=empty,
            )
        return
    if empty.size and req.empty_queries == "error":
        raise EmptyQueriesError(
            f"{empty.size} of {n_q} queries have no relevant judged document (queries {shown_ids}{more}); judge "
            "them, or pass empty_queries='skip' (exclude and count them) or 'zero'.",
            indices=empty,
        )


def _query_set(req: _Request, flat: _Flat) -> np.ndarray:
    """The queries averaged over: every query ("both"), the run's judged ones ("run",
    trec_eval's default) or the judged ones ("qrels", trec_eval -c); "judged": a line of
    the qrels (any grade, -1 included)."""
    n_q = flat.query_ids.shape[0]
    if req.queries == "both":
        return np.ones(n_q, bool)
    judged = np.bincount(flat.jq, minlength=n_q) > 0
    if req.queries == "qrels":
        return judged
    return judged & (np.bincount(flat.q, minlength=n_q) > 0)


def _result(req: _Request, flat: _Flat, rk: _Ranked, dropped: int = 0) -> EvaluationResult:
    # long: the result's fields, each computed once, in the order the result lists them
    n_q = flat.query_ids.shape[0]
    R = np.bincount(flat.jq, weights=flat.grade >= req.relevance_level, minlength=n_q).astype(
        np.int64
    )
    inside = _query_set(req, flat)
    empty = np.flatnonzero(inside & (R == 0))
    _check_empty(req, flat, empty, inside)
    n_ret = np.diff(rk.start)
    depth = req.k if req.k is not None else int(n_ret.max())
    relevant = rk.grade >= req.relevance_level
    it = _binary_items(rk, relevant, n_q)
    untied = None
    if req.ties == "docid":
        d = _binary_items(rk.untied(), relevant, n_q)
        untied = (d.rid, d.position, d.rank)
    hits = np.bincount(it.rid, minlength=n_q)
    miss = (R > 0) & (hits == 0)
    binary = [s for s in req.specs if s.family not in _GRADED and s.family not in _OWN]
    graded = [s for s in req.specs if s.family in _GRADED]
    per_kind = binary_policy_values(
        binary, it.rid, it.position, it.rank, it.tied, R, req.ties, chosen_rank=untied
    )
    for kind, values in _graded_values(graded, rk, flat, req.ties).items():
        per_kind[kind].update(values)
    for s in req.specs:
        if s.family == "bpref":
            by = _bpref_values(rk, flat, R, req.relevance_level, req.ties)
        elif s.family == "rbp_residual":
            by = _residual_values(rk, s.level, n_q, req.ties)
        else:
            continue
        for kind in per_kind:
            per_kind[kind][s.name] = by[kind]
    # queries outside the query set (trec_eval leaves them out by definition) and empty
    # queries under "skip": both NaN per query, counted apart (outside_queries, skipped_queries)
    skip = ~inside
    if req.empty_queries == "skip":
        skip[empty] = True
    _censor(
        per_kind,
        req.specs,
        miss,
        np.isin(np.arange(n_q), empty),
        req.empty_queries == "zero",
        depth,
        skip,
    )
    excluded = np.flatnonzero(skip)
    outside = np.flatnonzero(~inside)
    skipped = empty.astype(np.int64) if req.empty_queries == "skip" else np.zeros(0, np.int64)
    chosen = {s.name: per_kind["chosen"][s.name] for s in req.specs}
    tie_values = {
        s.name: {kind: aggregate(s, per_kind[kind][s.name], skipped=excluded) for kind in KINDS}
        for s in req.specs
    }
    config = {
        "similarity": "run",
        "source": "run",
        "ties": req.ties,
        "empty_queries": req.empty_queries,
        "relevance_level": req.relevance_level,
        "confidence": req.confidence,
        "seed": DEFAULTS["seed"],
        "n_gallery": flat.n_gallery,
        "depth": depth,
        "k": req.k,
        "queries": req.queries,
        "queries_outside": int((~inside).sum()),
        "ignore_identical_ids": req.ignore_identical_ids,
        "identical_ids_dropped": dropped,
    }
    return EvaluationResult(
        specs=req.specs,
        values={s.name: aggregate(s, chosen[s.name], skipped=excluded) for s in req.specs},
        per_query=chosen,
        thresholds={},
        pair_counts={},
        n_relevant=R,
        n_candidates=n_ret.astype(np.int64),
        first_relevant_rank=_first_ranks(
            _binary_items(rk.untied(), relevant, n_q) if req.ties == "docid" else it,
            n_q,
            req.ties,
            miss,
            depth,
        ),
        skipped_queries=skipped,
        outside_queries=outside,
        config=config,
        query_ids=flat.query_ids,
        tie_values=tie_values,
        tied_share=float((it.tied > 0).mean()) if it.tied.size else None,
    )


def evaluate_run(
    run,
    qrels,
    metrics,
    *,
    ties: str = DEFAULTS["ties"],
    relevance_level: int = 1,
    empty_queries: str | None = None,
    confidence: float = DEFAULTS["confidence"],
    k: int | None = None,
    slices=None,
    queries: str = "both",
    ignore_identical_ids: bool = False,
) -> EvaluationResult:
    """Evaluate a precomputed ranking exactly, as trec_eval / ranx do, with this library's
    tie policies; the result works with every gate and comparison.

    Parameters
    ----------
    run:
        ``{qid: {docid: score}}`` (ranx / pytrec_eval), the path of a TREC run file
        (``qid Q0 docid rank score tag``; the score decides the order, the rank column is
        ignored as trec_eval ignores it), or ``(indices, scores)``: two (n_queries x k)
        arrays of an ANN search (row i is query i, index -1 no result; query ids are the
        rows, document ids the indices). Ids are compared as text (``1`` and ``"1"`` are
        the same id). Higher scores rank first; equal scores tie. Files are read by the
        rules of every text reader (:mod:`retrieval_checks._textfiles`): UTF-8, a leading
        byte-order mark dropped, fields split on ASCII spaces and tabs, numbers in ASCII
        digits (``1_0`` refused, not read as 10), grades within int64; as trec_eval,
        ``#`` comment lines are skipped and fields after a run line's sixth ignored.
    qrels:
        ``{qid: {docid: grade}}`` or the path of a TREC qrels file (``qid 0 docid
        grade``); grades are integers >= -1: -1 in the pool but not judged (trec_eval's
        marker: non-relevant, no gain, not a judged non-relevant document for
        ``bpref``, but the query counts as judged), 0 judged non-relevant. Next to
        ``(indices, scores)``: a dict ``{row: {index: grade}}`` or ``{row: [indices]}``
        (rows and indices as ints or their text, as a JSON file's keys),
        a list of relevant-index lists (one per row) or a (n_queries x n_docs) grade
        matrix (numpy or scipy sparse).
    metrics:
        Query-level metrics of :func:`retrieval_checks.evaluate`: ``hit_rate@K``,
        ``recall@K``, ``precision@K``, ``map``, ``map@K``, ``map_cut@K``,
        ``map_capped@K``, ``map@R``, ``r_precision``, ``mrr``, ``medr``, ``meanr``,
        ``ndcg@K`` / ``ndcg`` (gain = grade), ``ndcg_exp@K`` / ``ndcg_exp`` (gain
        2^grade - 1), ``mrr@K``, ``f1@K``, ``recall_cap@K``, ``dcg@K`` / ``dcg`` and
        ``dcg_exp@K`` / ``dcg_exp`` (not normalised), ``bpref``, ``rbp@p`` and
        ``rbp_residual@p``, ``gm_map``, ``iprec_at_recall@L`` and ``iprec_11pt``
        (docs/metrics.md defines each; trec_eval's names such as ``success@K`` and
        ``recip_rank`` are aliases). K may exceed a query's results (trec_eval:
        ``precision@K`` still divides by K).
    ties:
        ``"pessimistic"`` (relevant documents, and within a tie the lowest grades,
        after the others), ``"optimistic"`` or ``"average"`` (the exact expectation
        over every order of each tie) or ``"docid"``: trec_eval's order, equal scores by
        document id descending (code-point order of the ids' text, as C's strcmp on
        UTF-8); ``result.tie_values`` holds the pessimistic, optimistic, least and
        greatest values over the orders of equal scores.
    relevance_level:
        The least grade that counts as relevant (trec_eval ``-l``) for the binary
        metrics; nDCG and DCG use the grades themselves, as trec_eval's. Which queries
        have a relevant document (and so are empty or not) follows this level, for
        every metric, nDCG and DCG included: with the default ``queries="both"`` and
        ``empty_queries="skip"``, a query whose judged grades all lie below the level
        is skipped for nDCG too (one query set for every metric of a result), where
        trec_eval ``-l`` still scores its nDCG from the grades. For trec_eval's
        numbers pass ``queries="run"`` (or ``"qrels"``; their default
        ``empty_queries="zero"`` keeps nDCG's graded value).
    empty_queries:
        Queries of the query set without a relevant judged document: ``"skip"``
        (counted in ``skipped_queries``), ``"error"`` or ``"zero"`` (0, ranks depth + 1;
        nDCG / DCG keep their graded value, as trec_eval). Default: ``"skip"`` with
        ``queries="both"``, ``"zero"`` with ``"run"`` / ``"qrels"`` (trec_eval's rule).
    confidence:
        The confidence recorded for intervals computed later from this result.
    k:
        Evaluate only the top ``k`` documents of each query (trec_eval ``-M``; refused
        where a tie straddles rank k); None keeps the whole run.
    slices:
        Per-query metadata to split the queries by, as in :func:`evaluate`; here also
        ``{qid: value}`` or ``{dimension: {qid: value}}`` (queries it does not name
        count as missing). Only these forms: a run has no query order to follow, so a list
        or array (by position) is refused.
    queries:
        The queries averaged over. ``"both"`` (default): every query of the run and of
        the qrels. ``"run"``: the run's queries that the qrels judge (at least one line,
        any grade): trec_eval's default. ``"qrels"``: every judged query, those missing
        from the run with nothing retrieved (trec_eval ``-c``). Queries outside the set
        are NaN per query and counted in ``outside_queries`` / ``n_outside``
        (``config["queries_outside"]``), never silently dropped; they are not skipped
        queries (trec_eval leaves them out by definition), so ``max_skipped`` and the
        skipped-queries warning do not count them.
    ignore_identical_ids:
        BEIR's rule: a retrieved document whose id equals its query's id is removed
        from the run (it still counts in the qrels: R and the ideal DCG); the number
        removed is ``config["identical_ids_dropped"]``.

    Returns
    -------
    EvaluationResult
        The same result as :func:`evaluate` gives (per-query values, counts of used
        and skipped queries), keyed by canonical metric name, with the query ids.

    Raises
    ------
    InputError
        A run or qrels file or mapping that cannot be read (named with ``file:line``),
        an invalid option, or ``empty_queries="error"`` with a query without a
        relevant document.
    MetricNameError
        An unknown metric name, or one ``evaluate_run`` does not compute.

    Notes
    -----
    Conventions for relevant documents missing from the run and queries missing from it
    are in the module docstring: they count (R, ideal DCG), never rank inside a top K,
    add 0 to precision sums, give ``mrr`` / ``hit_rate`` 0 and ``medr`` / ``meanr`` the
    censored rank D + 1 (D = ``k``, else the longest ranking in the run).

    Examples
    --------
    >>> import retrieval_checks as rc
    >>> run = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.0, "d1": 0.5}}
    >>> qrels = {"q1": {"d2": 1}, "q2": {"d3": 2}}
    >>> res = rc.evaluate_run(run, qrels, metrics=["mrr", "ndcg@10"])
    >>> res["mrr"]  # q1 finds its document at rank 2, q2 at rank 1
    0.75
    >>> round(res["ndcg@10"], 4)
    0.8155
    """
    req = _options(
        metrics, ties, empty_queries, relevance_level, confidence, k, queries, ignore_identical_ids
    )
    if slices is not None:
        refuse_positional(slices)  # the form, before the run is read
    flat = _read(run, qrels)
    dropped = 0
    if req.ignore_identical_ids:
        flat, dropped = _drop_identical(flat)
    dims = None
    if slices is not None:
        dims = make_slices(slices, len(flat.query_ids), query_ids=flat.query_ids, by_id_only=True)
    result = _result(req, flat, _rank_run(flat, req.k, req.ties), dropped)
    return result if dims is None else attach_slices(result, dims)
