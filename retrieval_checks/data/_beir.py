"""Reading a dataset in the BEIR layout.

A BEIR directory holds ``corpus.jsonl`` (one JSON object per line: ``_id``, ``title``
(optional), ``text``), ``queries.jsonl`` (``_id``, ``text``) and ``qrels/<split>.tsv``
(a header ``query-id corpus-id score``, then one tab-separated judgement per line: the
grade is a whole number >= 0; 0 is judged non-relevant).

:func:`read_beir` returns the split's judged queries (in the order of
``queries.jsonl``), the documents (title and text joined by a space and stripped, as
BEIR's own models do), and the graded relevance ``{query row: {document row: grade}}``.
Queries that the split's qrels do not judge are not evaluated (a BEIR split's queries
are those its qrels name); they are counted and listed in ``unjudged``. Ids are texts
(an integer ``_id`` is read as its decimal text). Blank lines are ignored.

The three files follow the rules of every text reader of the library
(:mod:`retrieval_checks._textfiles`): UTF-8 (a byte-order mark at the start is dropped),
grades in ASCII digits within int64 (not Python's ``int()``, which reads ``1_0`` as 10),
no invisible characters (no-break or zero-width spaces) in the qrels' ids.

Fails closed: a missing or unreadable file, text that is not UTF-8, a line that is not a
JSON object, a missing or non-text ``_id`` / ``text``, a duplicate id, a qrels line
without three fields, a grade that is not a whole number >= 0, a judgement repeated, and
qrels naming an unknown query or document (all of them counted, and said when they look
like row numbers instead of ids) are each an :class:`~retrieval_checks.InputError`
starting with ``file:line``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .._textfiles import check_field, id_mismatch, parse_int, text_lines
from ..errors import InputError

__all__ = ["BeirData", "read_beir", "beir_files"]


@dataclass(frozen=True)
class BeirData:
    """One split of a BEIR directory: texts, ids and graded relevance (rows index
    ``query_ids`` / ``doc_ids``)."""

    path: Path
    split: str
    query_ids: list
    queries: list
    doc_ids: list
    documents: list
    relevance: dict
    unjudged: list
    n_judgements: int
    #: per query row: the other fields of its queries.jsonl object (``metadata`` and the
    #: like), the source of a suite's slice values
    query_fields: list = field(default_factory=list)


def beir_files(path, split: str = "test") -> dict:
    """The three files of a BEIR directory (``corpus``, ``queries``, ``qrels``), each
    checked to exist; InputError naming the missing one."""
    if (
        not isinstance(split, str)
        or not split
        or any(c in split for c in "/\\\0")
        or split in (".", "..")
    ):
        raise InputError(
            f"split={split!r}: expected the name of a qrels file (test, dev, train: qrels/<split>.tsv)."
        )
    root = Path(os.fspath(path)).expanduser()
    if not root.is_dir():
        raise InputError(
            f"{root}: {'not a directory' if root.exists() else 'does not exist'}; a BEIR dataset is a "
            "directory with corpus.jsonl, queries.jsonl and qrels/<split>.tsv."
        )
    files = {
        "corpus": root / "corpus.jsonl",
        "queries": root / "queries.jsonl",
        "qrels": root / "qrels" / f"{split}.tsv",
    }
    for what, f in files.items():
        if not f.is_file():
            extra = ""
            if what == "qrels" and (root / "qrels").is_dir():
                splits = sorted(p.stem for p in (root / "qrels").glob("*.tsv"))
                extra = f" (splits found: {', '.join(splits) or 'none'}; set split:)"
            raise InputError(
                f"{f}: missing: a BEIR directory needs {f.relative_to(root).as_posix()}{extra}."
            )
    return files


def _lines(path: Path, what: str):
    """The non-blank lines of a BEIR file, by the rules every text reader follows
    (:mod:`retrieval_checks._textfiles`: UTF-8, a leading byte-order mark dropped)."""
    for number, line in text_lines(path, what):
        if line.strip():
            yield number, line


def _jsonl(
    path: Path, fields: tuple, optional: tuple = (), extra: list | None = None
) -> tuple[list, list, dict]:
    """Ids, records (dicts of the text fields) and each id's line, of a JSON-lines file;
    ``extra``, when given, gets each object's other fields (in the records' order)."""
    ids, records, seen = [], [], {}
    for number, line in _lines(path, path.stem):
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InputError(
                f"{where}: not a JSON object ({exc}); each line holds one object such as "
                '{"_id": "d1", "title": "...", "text": "..."}.'
            ) from None
        if not isinstance(obj, dict):
            raise InputError(
                f"{where}: a JSON {type(obj).__name__}, not an object with _id and text."
            )
        doc_id = obj.get("_id")
        if isinstance(doc_id, int) and not isinstance(doc_id, bool):
            doc_id = str(doc_id)
        if not isinstance(doc_id, str) or not doc_id:
            raise InputError(
                f"{where}: _id is {'missing' if '_id' not in obj else repr(obj['_id'])[:60]}; each "
                "record needs a non-empty text _id."
            )
        if doc_id in seen:
            raise InputError(
                f"{where}: duplicate _id {doc_id!r} (first at line {seen[doc_id]}); ids must be unique."
            )
        record = {}
        for f in (*fields, *optional):
            value = obj.get(f, None if f in fields else "")
            if value is None and f in optional:
                value = ""
            if not isinstance(value, str):
                state = "missing" if f not in obj else f"{type(value).__name__} {repr(value)[:40]}"
                raise InputError(f"{where}: {f} is {state}; record {doc_id!r} needs a text {f}.")
            record[f] = value
        seen[doc_id] = number
        ids.append(doc_id)
        records.append(record)
        if extra is not None:
            extra.append({k: v for k, v in obj.items() if k not in ("_id", *fields, *optional)})
    return ids, records, seen


_STRIP = " \v\f\r"  # ASCII spaces around a field; other spaces are refused by check_field
_GRADES = "grades are integers >= 0 (0: judged non-relevant)."


def _qrels(path: Path, queries: dict, docs: dict) -> tuple[dict, int]:
    """``{query id: {doc id: grade}}`` of a BEIR qrels file (``queries`` / ``docs``: the
    ids of queries.jsonl / corpus.jsonl, in file order). Judgements naming an id that is
    not there are all counted, and refused together, saying when they look like row
    numbers."""
    out: dict = {}
    lines: dict = {}
    unknown: dict = {"query-id": {}, "corpus-id": {}}  # id -> first line
    named: dict = {"query-id": set(), "corpus-id": set()}
    header = False
    for number, line in _lines(path, "qrels"):
        where = f"{path}:{number}"
        fields = line.split("\t")
        if not header:
            if [f.strip(_STRIP) for f in fields] == ["query-id", "corpus-id", "score"]:
                header = True
                continue
            raise InputError(
                f"{where}: expected the header 'query-id<TAB>corpus-id<TAB>score', found "
                f"{line.strip()[:80]!r}."
            )
        if len(fields) != 3:
            raise InputError(
                f"{where}: {len(fields)} tab-separated field(s); a judgement is "
                "query-id<TAB>corpus-id<TAB>score."
            )
        qid, did, score = (f.strip(_STRIP) for f in fields)
        check_field(qid, where, "query-id")
        check_field(did, where, "corpus-id")
        grade = parse_int(score, where, "score", _GRADES)
        if grade < 0:
            raise InputError(f"{where}: score {grade} is negative; {_GRADES}")
        for kind, key, known in (("query-id", qid, queries), ("corpus-id", did, docs)):
            named[kind].add(key)
            if key not in known:
                unknown[kind].setdefault(key, number)
        if did in out.setdefault(qid, {}):
            raise InputError(
                f"{where}: query {qid!r} judges document {did!r} again (first at line "
                f"{lines[(qid, did)]}); keep one grade per pair."
            )
        out[qid][did] = grade
        lines[(qid, did)] = number
    for kind, file, known in (
        ("query-id", "queries.jsonl", queries),
        ("corpus-id", "corpus.jsonl", docs),
    ):
        if unknown[kind]:
            raise _unknown_ids(path, kind, file, unknown[kind], len(named[kind]), list(known))
    if not lines:
        raise InputError(
            f"{path}: no judgements; a qrels file needs the header and at least one line "
            "query-id<TAB>corpus-id<TAB>score."
        )
    return out, len(lines)


def _unknown_ids(
    path: Path, kind: str, file: str, unknown: dict, n_named: int, ids: list
) -> InputError:
    """Every judgement naming an id ``file`` does not have, counted, with the likely cause."""
    first, line = next(iter(unknown.items()))
    count = (
        f" ({len(unknown)} of the {n_named} {kind.split('-')[0]} ids of the qrels are not: "
        f"{', '.join(repr(u[:40]) for u in list(unknown)[:5])}{'...' if len(unknown) > 5 else ''})"
        if len(unknown) > 1
        else ""
    )
    why = id_mismatch(list(unknown), ids, file)
    return InputError(
        f"{path}:{line}: {kind} {first[:80]!r} is not an _id in {file}{count}"
        f"{'; ' + why if why else ''}. Make the qrels name the _id values of {file}."
    )


def read_beir(path, split: str = "test") -> BeirData:
    """The ``split`` of the BEIR directory ``path`` (see the module's description)."""
    files = beir_files(path, split)
    doc_ids, docs, doc_lines = _jsonl(files["corpus"], ("text",), ("title",))
    query_extra: list = []
    query_ids, queries, query_lines = _jsonl(files["queries"], ("text",), extra=query_extra)
    for what, ids in (("corpus", doc_ids), ("queries", query_ids)):
        if not ids:
            raise InputError(f"{files[what]}: holds no records.")
    judged, n = _qrels(files["qrels"], query_lines, doc_lines)
    doc_row = {d: i for i, d in enumerate(doc_ids)}
    rows = [i for i, q in enumerate(query_ids) if q in judged]
    relevance = {
        r: {doc_row[d]: g for d, g in judged[query_ids[i]].items()} for r, i in enumerate(rows)
    }
    return BeirData(
        path=Path(path),
        split=split,
        query_ids=[query_ids[i] for i in rows],
        queries=[queries[i]["text"] for i in rows],
        doc_ids=doc_ids,
        documents=[(d["title"] + " " + d["text"]).strip() for d in docs],
        relevance=relevance,
        unjudged=[q for q in query_ids if q not in judged],
        n_judgements=n,
        query_fields=[query_extra[i] for i in rows],
    )
