"""Produce the text-retrieval example's shipped files (deterministic, numpy only, < 1 s).

    python example_suites/text_retrieval/make_assets.py

A small synthetic corpus stands in for a text collection: 40 topics, 10 documents per
topic (400 documents, ids ``d000`` ..) and one query per topic (ids ``q00`` ..). Each
document's embedding is its topic's direction plus noise (32 dimensions, L2-normalised),
as a sentence encoder would place documents about one subject. Writes, next to this script:

- ``data/queries.npz``, ``data/docs.npz``: ``embeddings`` (float32) and ``ids``, the exact
  embeddings of the queries and documents;
- ``data/qrels.txt``: TREC qrels (``qid 0 docid grade``): a query's topic documents are
  relevant, grade 2 for the five closest to the query and 1 for the others, and three
  documents of other topics are judged non-relevant (grade 0);
- ``data/bm25.run``: a TREC run (``qid Q0 docid rank score tag``) of a lexical ranker:
  the top 50 documents by a noisy score (cosine similarity plus noise; scores rounded to
  two decimals, so some documents tie, as BM25 scores do);
- ``data/ivf_neighbors.npy``: the top 10 documents of each query found by an IVF index
  (numpy k-means with 16 lists, 3 probed), an approximation of exact search that the
  suite's ``ann_recall@10`` gate measures;
- ``data/beir/``: the same layout of topics as texts, in the BEIR layout that
  ``rc_beir.yaml`` reads (``corpus.jsonl``: ``_id``, ``title``, ``text``;
  ``queries.jsonl``; ``qrels/test.tsv`` with grades 2 / 1 / 0): each topic has its own
  words, a document mixes six of its topic's words with three common ones, a query
  names three topic words; grade 2 for the five topic documents sharing most words with
  the query, 1 for the other five, 0 for three documents of other topics.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
N_TOPICS, PER_TOPIC, DIM, DEPTH = 40, 10, 32, 50
N_LISTS, N_PROBE, K = 16, 3, 10


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def corpus(rng: np.random.Generator):
    topics = rng.normal(size=(N_TOPICS, DIM))
    topic_of = np.repeat(np.arange(N_TOPICS), PER_TOPIC)
    docs = _unit(topics[topic_of] + 0.55 * rng.normal(size=(topic_of.size, DIM)))
    queries = _unit(topics + 0.45 * rng.normal(size=(N_TOPICS, DIM)))
    return queries, docs, topic_of


def qrels_lines(queries, docs, topic_of, qids, dids, rng) -> list[str]:
    lines = []
    for t, qid in enumerate(qids):
        mine = np.flatnonzero(topic_of == t)
        close = mine[np.argsort(-(docs[mine] @ queries[t]), kind="stable")]
        lines += [f"{qid} 0 {dids[d]} {2 if i < 5 else 1}" for i, d in enumerate(close)]
        others = rng.choice(np.flatnonzero(topic_of != t), size=3, replace=False)
        lines += [f"{qid} 0 {dids[d]} 0" for d in sorted(others)]
    return lines


def run_lines(queries, docs, qids, dids, rng) -> list[str]:
    scores = np.round(queries @ docs.T + 0.12 * rng.normal(size=(len(qids), len(dids))), 2)
    lines = []
    for i, qid in enumerate(qids):
        top = np.lexsort((np.arange(len(dids)), -scores[i]))[:DEPTH]
        lines += [f"{qid} Q0 {dids[d]} {r + 1} {scores[i, d]:.2f} bm25" for r, d in enumerate(top)]
    return lines


def ivf_search(queries, docs, rng) -> np.ndarray:
    """An IVF index in a few lines: k-means lists, the N_PROBE closest lists searched exactly."""
    centroids = docs[rng.choice(len(docs), N_LISTS, replace=False)]
    for _ in range(10):
        assign = np.argmax(docs @ centroids.T, axis=1)
        centroids = _unit(
            np.stack(
                [
                    docs[assign == c].mean(0) if (assign == c).any() else centroids[c]
                    for c in range(N_LISTS)
                ]
            )
        )
    assign = np.argmax(docs @ centroids.T, axis=1)
    out = np.full((len(queries), K), -1, dtype=np.int64)
    for i, q in enumerate(queries):
        probe = np.argsort(-(centroids @ q), kind="stable")[:N_PROBE]
        cand = np.flatnonzero(np.isin(assign, probe))
        best = cand[np.argsort(-(docs[cand] @ q), kind="stable")[:K]]
        out[i, : best.size] = best
    return out


SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "fu")
COMMON = ("the", "of", "and", "report", "study", "new", "results", "method", "data", "system")


def beir_files(rng: np.random.Generator) -> dict[str, str]:
    """The BEIR directory's files (path -> text) for the synthetic topics."""
    import json

    words = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES]
    vocab = rng.choice(words, size=(N_TOPICS, 8), replace=False)
    corpus, queries, qrels = [], [], ["query-id\tcorpus-id\tscore"]
    for t in range(N_TOPICS):
        qwords = list(rng.choice(vocab[t], 3, replace=False))
        queries.append({"_id": f"q{t:02d}", "text": " ".join(qwords)})
        overlap = []
        for j in range(PER_TOPIC):
            d = t * PER_TOPIC + j
            mine = list(rng.choice(vocab[t], 6))
            body = mine[2:] + list(rng.choice(COMMON, 3))
            corpus.append(
                {
                    "_id": f"d{d:03d}",
                    "title": " ".join(mine[:2]),
                    "text": " ".join(rng.permutation(body)),
                }
            )
            overlap.append(len(set(mine) & set(qwords)))
        order = np.argsort(-np.asarray(overlap), kind="stable")
        qrels += [
            f"q{t:02d}\td{t * PER_TOPIC + j:03d}\t{2 if r < 5 else 1}" for r, j in enumerate(order)
        ]
        others = rng.choice(
            np.flatnonzero(np.arange(N_TOPICS * PER_TOPIC) // PER_TOPIC != t), 3, replace=False
        )
        qrels += [f"q{t:02d}\td{d:03d}\t0" for d in sorted(others)]
    return {
        "corpus.jsonl": "".join(json.dumps(c) + "\n" for c in corpus),
        "queries.jsonl": "".join(json.dumps(q) + "\n" for q in queries),
        "qrels/test.tsv": "\n".join(qrels) + "\n",
    }


def main() -> None:
    rng = np.random.default_rng(0)
    queries, docs, topic_of = corpus(rng)
    qids = [f"q{i:02d}" for i in range(N_TOPICS)]
    dids = [f"d{i:03d}" for i in range(len(docs))]
    data = HERE / "data"
    data.mkdir(exist_ok=True)
    np.savez(data / "queries.npz", embeddings=queries, ids=np.array(qids))
    np.savez(data / "docs.npz", embeddings=docs, ids=np.array(dids))
    (data / "qrels.txt").write_text(
        "\n".join(qrels_lines(queries, docs, topic_of, qids, dids, rng)) + "\n"
    )
    (data / "bm25.run").write_text("\n".join(run_lines(queries, docs, qids, dids, rng)) + "\n")
    np.save(data / "ivf_neighbors.npy", ivf_search(queries, docs, rng))
    for name, text in beir_files(
        np.random.default_rng(1)
    ).items():  # its own generator: the files above stay
        (data / "beir" / name).parent.mkdir(parents=True, exist_ok=True)
        (data / "beir" / name).write_text(text)


if __name__ == "__main__":
    main()
