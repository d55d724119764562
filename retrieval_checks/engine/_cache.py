"""One cache of evaluation results for a session, keyed by what they were computed from.

The pytest plugin's ``rc_evaluate`` and the suite runner both keep results here, so
checks that ask for the same evaluation share one engine pass. A key covers the
content of every array (a BLAKE2 digest of the bytes, dtype and shape: other embeddings
under the same model and dataset names are another evaluation, never the first one's
result), every option, and the names the result carries.
"""

from __future__ import annotations

from ._digest import content_digest
from ._evaluate import evaluate
from ._inputs import refuse_sparse
from ._result import EvaluationResult
from ._slices import resolve_slices

__all__ = ["EvaluationCache", "content_digest"]


class EvaluationCache:
    """Evaluation results of a session.

    - :meth:`evaluate`: ``retrieval_checks.evaluate`` with the same arguments, cached by
      the content of its inputs and its options (``context`` names, e.g. the model and
      dataset, are stored in the result's ``config`` and are part of the key);
    - :meth:`get_or_compute`: any result under a key of the caller's (the suite runner
      keys by suite, model, dataset and options: the files behind them are read once).

    ``hits`` and ``misses`` count lookups.
    """

    def __init__(self):
        self._results: dict = {}
        self.hits = 0
        self.misses = 0

    def get_or_compute(self, key, compute):
        if key in self._results:
            self.hits += 1
            return self._results[key]
        self.misses += 1
        result = compute()
        self._results[key] = result
        return result

    def evaluate(
        self, queries, gallery=None, *, context: dict | None = None, **kwargs
    ) -> EvaluationResult:
        for name, x in (("queries", queries), ("gallery", gallery)):
            if x is not None:
                refuse_sparse(x, name)  # named here: the key below reads every array
        if kwargs.get("slices") is not None:  # keyed by their values: a function has no content
            kwargs["slices"] = resolve_slices(kwargs["slices"], len(queries))
        context = {k: v for k, v in (context or {}).items() if v is not None}
        key = (
            "evaluate",
            content_digest(queries, gallery, sorted(kwargs.items()), sorted(context.items())),
        )

        def compute():
            result = evaluate(queries, gallery, **kwargs)
            result.config.update(context)
            return result

        return self.get_or_compute(key, compute)

    def __len__(self) -> int:
        return len(self._results)
