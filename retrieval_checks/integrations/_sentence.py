"""sentence-transformers: a ``SentenceEvaluator`` that encodes queries and a corpus with
the model, evaluates them exactly with :func:`retrieval_checks.evaluate` and gates the
result; for ``model.evaluate(evaluator)`` and ``SentenceTransformerTrainer(evaluator=...)``.

Importing this module imports sentence-transformers; ``import
retrieval_checks.integrations`` does not.
"""

from __future__ import annotations

import csv
import numbers
import os
from collections.abc import Mapping

import numpy as np

from .._suggest import shown
from ..engine import evaluate
from ..errors import InputError
from ..metrics import metric_spec
from ..options import positive_int
from ._gating import (
    check_evaluate_options,
    check_gates,
    evaluate_split,
    model_embeddings,
    report_failures,
    run_gates,
)

try:  # sentence-transformers >= 6 moved it; the old path still names the same class
    from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator
except ImportError:  # pragma: no cover
    try:
        from sentence_transformers.evaluation import SentenceEvaluator
    except ImportError:
        raise ImportError(
            "RetrievalChecksEvaluator needs sentence-transformers: pip install "
            "'retrieval-checks[text]'"
        ) from None

__all__ = ["RetrievalChecksEvaluator"]


def _texts(value, what: str) -> tuple[list, list[str]]:
    """(ids, texts) from a dict {id: text} or a list of texts (ids: the positions)."""
    if isinstance(value, Mapping):
        ids, texts = list(value.keys()), list(value.values())
    elif isinstance(value, (list, tuple)):
        ids, texts = list(range(len(value))), list(value)
    else:
        raise InputError(f"{what}={shown(value)}: pass a dict {{id: text}} or a list of texts.")
    if not texts:
        raise InputError(f"{what} is empty; pass at least one text.")
    bad = next((i for i, t in zip(ids, texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise InputError(
            f"{what}[{bad!r}] is {type(value[bad]).__name__}, not a text; every entry must be a string."
        )
    return ids, texts


def _relevance(relevant_docs, q_ids: list, c_ids: list):
    """The evaluate ``relevance`` argument (a dict by query position) from
    ``{query id: iterable of corpus ids}`` or ``{query id: {corpus id: grade}}``."""
    if not isinstance(relevant_docs, Mapping):
        raise InputError(
            f"relevant_docs={shown(relevant_docs)}: pass a dict {{query id: set of corpus ids}} (or "
            "{query id: {corpus id: grade}} for graded relevance)."
        )
    q_pos = {q: i for i, q in enumerate(q_ids)}
    c_pos = {c: i for i, c in enumerate(c_ids)}
    out, graded = {}, None
    for qid, docs in relevant_docs.items():
        if qid not in q_pos:
            raise InputError(
                f"relevant_docs[{qid!r}]: no query has the id {qid!r}; relevant_docs is keyed by the "
                "ids of queries (their positions when queries is a list)."
            )
        is_graded = isinstance(docs, Mapping)
        if graded is not None and is_graded != graded:
            raise InputError(
                f"relevant_docs[{qid!r}]: mixes graded ({{corpus id: grade}}) and binary (a set of "
                "corpus ids) entries; use one form."
            )
        graded = is_graded
        if isinstance(docs, (str, bytes)) or not hasattr(docs, "__iter__"):
            raise InputError(f"relevant_docs[{qid!r}]={shown(docs)}: expected a set of corpus ids.")
        for cid in docs:
            if cid not in c_pos:
                raise InputError(
                    f"relevant_docs[{qid!r}] names corpus id {cid!r}, which is not in the corpus."
                )
        if is_graded:
            for cid, grade in docs.items():
                if isinstance(grade, bool) or not isinstance(grade, numbers.Integral) or grade < 0:
                    raise InputError(
                        f"relevant_docs[{qid!r}][{cid!r}]={shown(grade)}: a grade is a whole number "
                        ">= 0."
                    )
            out[q_pos[qid]] = {c_pos[c]: int(g) for c, g in docs.items()}
        else:
            out[q_pos[qid]] = sorted({c_pos[c] for c in docs})
    for i in range(len(q_ids)):
        out.setdefault(i, {} if graded else [])
    return out


class RetrievalChecksEvaluator(SentenceEvaluator):
    """Evaluate a sentence-transformers model's retrieval exactly, and gate it.

    Data, one of:

    - ``queries`` and ``corpus`` (each a dict ``{id: text}`` or a list of texts) with
      ``relevant_docs`` (``{query id: set of corpus ids}``, or ``{query id: {corpus id:
      grade}}`` for nDCG gains), as ``InformationRetrievalEvaluator`` takes them;
    - ``queries`` and ``corpus`` with ``query_labels`` and ``corpus_labels`` (a corpus
      item is relevant to a query when the labels are equal);
    - ``queries`` with ``query_labels`` and no corpus: leave-one-out (each text queries
      all the others).

    Queries are encoded with ``model.encode_query`` and the corpus with
    ``model.encode_document`` where the model has them (sentence-transformers >= 5),
    else ``model.encode``; leave-one-out items are queries (``model.encode_query``), as a
    suite's ``sentence_transformers`` model encodes a leave-one-out dataset, so the two
    give one value.

    Returns ``{name_metric: value}`` for every metric (canonical names, prefixed with
    ``name + "_"`` when ``name`` is given, as the library's evaluators do; the trainer
    adds ``eval_``), plus ``gates_passed`` (1.0 / 0.0) when there are gates.
    ``primary_metric`` (default: the first gated metric, else the first metric) is the
    key the trainer selects models by; ``greater_is_better`` follows that metric
    (False for ``medr`` and ``meanr``, ranks where lower is better).

    Gates (checked now, :func:`~retrieval_checks.integrations.check_gates`):
    ``on_failure="raise"`` (default) raises the gate's ``AssertionError``;
    ``"warn"`` warns and records the outcome (``last_outcomes``; the result is in
    ``last_result``). Given an ``output_path`` (the trainer passes one),
    ``write_csv=True`` appends a row per call to
    ``retrieval_checks_evaluation[_name]_results.csv`` there. Further keyword
    arguments go to :func:`~retrieval_checks.evaluate`.
    """

    def __init__(
        self,
        queries,
        corpus=None,
        relevant_docs=None,
        *,
        query_labels=None,
        corpus_labels=None,
        metrics=None,
        gates=None,
        name: str = "",
        primary_metric: str | None = None,
        batch_size: int = 32,
        on_failure: str = "raise",
        show_progress_bar: bool = False,
        write_csv: bool = True,
        **evaluate_options,
    ):
        super().__init__()
        self.metrics, self.gates = check_gates(gates, metrics)
        self.options = check_evaluate_options(evaluate_options)
        if not isinstance(name, str):
            raise InputError(
                f"name={shown(name)}: expected a string (the prefix of the returned metric names)."
            )
        if on_failure not in ("raise", "warn"):
            raise InputError(
                f"on_failure={shown(on_failure)}: use 'raise' (raise the gate's AssertionError) or "
                "'warn' (warn and go on)."
            )
        positive_int(batch_size, "batch_size")
        self.q_ids, self.queries = _texts(queries, "queries")
        self.c_ids, self.corpus = _texts(corpus, "corpus") if corpus is not None else (None, None)
        self.relevance = self.query_labels = self.corpus_labels = None
        self._check_sources(relevant_docs, query_labels, corpus_labels)
        if primary_metric is None:
            primary = next(iter(self.gates), self.metrics[0])
        else:
            primary = metric_spec(primary_metric).name
            if primary not in self.metrics:
                raise InputError(
                    f"primary_metric={primary_metric!r}: not among metrics={self.metrics}; name one of "
                    "them."
                )
        self.primary_metric = primary
        self.greater_is_better = bool(metric_spec(primary).capabilities.higher_is_better)
        self.name, self.batch_size, self.on_failure = name, int(batch_size), on_failure
        self.show_progress_bar = bool(show_progress_bar)
        if not isinstance(write_csv, bool):
            raise InputError(f"write_csv={shown(write_csv)}: expected True or False.")
        self.write_csv = write_csv
        self.csv_file = f"retrieval_checks_evaluation{'_' + name if name else ''}_results.csv"
        self.last_result = None
        self.last_outcomes: list = []

    def _check_sources(self, relevant_docs, query_labels, corpus_labels) -> None:
        if self.corpus is None:
            if relevant_docs is not None or corpus_labels is not None:
                raise InputError(
                    "relevant_docs / corpus_labels need a corpus; without one, pass query_labels for "
                    "leave-one-out."
                )
            if query_labels is None:
                raise InputError(
                    "no corpus and no query_labels: pass corpus= with relevant_docs= (or labels), or "
                    "query_labels= for leave-one-out over the queries."
                )
        elif relevant_docs is not None:
            if query_labels is not None or corpus_labels is not None:
                raise InputError(
                    "pass relevant_docs or labels (query_labels and corpus_labels), not both."
                )
            self.relevance = _relevance(relevant_docs, self.q_ids, self.c_ids)
            return
        elif query_labels is None or corpus_labels is None:
            raise InputError(
                "with a corpus, pass relevant_docs={query id: set of corpus ids}, or both query_labels "
                "and corpus_labels."
            )
        self.query_labels = self._labels(query_labels, len(self.queries), "query_labels")
        if corpus_labels is not None:
            self.corpus_labels = self._labels(corpus_labels, len(self.corpus), "corpus_labels")

    @staticmethod
    def _labels(labels, n: int, what: str) -> np.ndarray:
        a = np.asarray(list(labels.values()) if isinstance(labels, Mapping) else labels)
        if a.ndim != 1 or a.shape[0] != n:
            raise InputError(
                f"{what} holds {a.shape[0] if a.ndim else 0} labels for {n} texts; give one per text."
            )
        return a

    def _encode(self, model, texts, kind: str) -> np.ndarray:
        fn = getattr(model, f"encode_{kind}", None) if kind else None
        fn = fn if callable(fn) else model.encode
        return np.asarray(
            fn(
                texts,
                batch_size=self.batch_size,
                show_progress_bar=self.show_progress_bar,
                convert_to_numpy=True,
            )
        )

    def __call__(
        self,
        model,
        output_path: str | None = None,
        epoch: int = -1,
        steps: int = -1,
        *args,
        **kwargs,
    ) -> dict[str, float]:
        """Encode, evaluate, gate; the metrics dict (see the class)."""
        at = None if epoch == -1 and steps == -1 else f"epoch {epoch}, step {steps}"
        if self.corpus is None:
            # leave-one-out items are queries, encoded as a suite's sentence_transformers
            # model encodes a dataset's queries: one model, one value in training and in CI
            emb = self._encode(model, self.queries, "query")
            with model_embeddings(at, {"queries": emb}, self.options):
                result = evaluate_split(
                    emb, self.query_labels, metrics=self.metrics, options=self.options
                )
        else:
            q, c = (
                self._encode(model, self.queries, "query"),
                self._encode(model, self.corpus, "document"),
            )
            with model_embeddings(at, {"queries": q, "gallery": c}, self.options):
                if self.relevance is not None:
                    result = evaluate(
                        q, c, relevance=self.relevance, metrics=self.metrics, **self.options
                    )
                else:
                    result = evaluate_split(
                        q,
                        self.query_labels,
                        c,
                        self.corpus_labels,
                        metrics=self.metrics,
                        options=self.options,
                    )
        outcomes = run_gates(result, self.gates)
        self.last_result, self.last_outcomes = result, outcomes
        values = {m: float(result[m]) for m in self.metrics}
        if self.gates:
            values["gates_passed"] = float(all(o.passed for o in outcomes))
        if output_path is not None and self.write_csv:
            self._append_csv(output_path, epoch, steps, values)
        values = self.prefix_name_to_metrics(values, self.name)
        self.store_metrics_in_model_card_data(model, values, epoch, steps)
        where = "evaluation" if epoch == -1 else f"epoch {epoch}, step {steps}"
        failed = [o for o in outcomes if not o.passed]
        if failed and self.on_failure == "raise":
            raise AssertionError(failed[0].message)
        report_failures(outcomes, where)
        return values

    def _append_csv(self, output_path: str, epoch, steps, values: dict) -> None:
        """One row (epoch, steps, every value) in ``output_path/csv_file``, as the
        library's evaluators write; the header when the file is new."""
        os.makedirs(output_path, exist_ok=True)
        path = os.path.join(output_path, self.csv_file)
        new = not os.path.isfile(path)
        with open(path, "a", newline="", encoding="utf-8") as f:
            out = csv.writer(f)
            if new:
                out.writerow(["epoch", "steps", *values])
            out.writerow([epoch, steps, *values.values()])

    def get_config_dict(self) -> dict:
        return {"metrics": list(self.metrics), "gates": {k: dict(v) for k, v in self.gates.items()}}
