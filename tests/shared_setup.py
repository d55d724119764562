"""Set-ups several test files share (importable from every layer's tests, as
``reference.py`` is: tests/conftest.py puts this folder on sys.path). A helper moves
here when a second file needs it, instead of a copy."""

from __future__ import annotations

import json
import warnings

import retrieval_checks as rc


def run_gate(gate, warning: type[Warning] = Warning):
    """Calls ``gate()`` and returns ``(events, messages, error)``: the gate events it
    published (``rc.gates.listening``), the messages of the warnings of class ``warning``
    it raised (every one recorded, none filtered out), and its AssertionError (None if
    it passed)."""
    events = []
    with rc.gates.listening(events.append), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            gate()
            error = None
        except AssertionError as exc:
            error = exc
    return events, [str(w.message) for w in caught if issubclass(w.category, warning)], error


# a bag-of-words embedder: a text model as a callable of a list of strings
BEIR_EMBEDDER = """
import hashlib
import numpy as np

def embed(texts, part=None):
    out = np.zeros((len(texts), 32))
    for i, t in enumerate(texts):
        for w in t.lower().split():
            out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 32] += 1.0
    return out + 0.01 * (part == "queries")
"""
BEIR_WORDS = (
    "cat dog bird fish red blue green text search model query document river stone tree".split()
)


def beir_corpus(rng, n_docs=40, n_queries=12):
    """BEIR documents (one without a title), queries and graded qrels (the last two
    queries unjudged) over a small vocabulary."""
    docs = [
        {
            "_id": f"d{i}",
            "title": " ".join(rng.choice(BEIR_WORDS, 2)),
            "text": " ".join(rng.choice(BEIR_WORDS, 6)),
        }
        for i in range(n_docs)
    ]
    docs[3].pop("title")  # the title is optional
    queries = [
        {"_id": f"q{i}", "text": " ".join(rng.choice(BEIR_WORDS, 3))} for i in range(n_queries)
    ]
    qrels = {}
    for i in range(n_queries - 2):  # the last two queries have no judgement in this split
        for d in rng.choice(n_docs, 4, replace=False):
            qrels.setdefault(f"q{i}", {})[f"d{d}"] = int(rng.integers(0, 4))
    return docs, queries, qrels


def write_beir(root, docs, queries, qrels, split="test"):
    """A BEIR directory: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    lines = ["query-id\tcorpus-id\tscore"] + [
        f"{q}\t{d}\t{g}" for q, ds in qrels.items() for d, g in ds.items()
    ]
    (root / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return root
