"""Gates inside training loops: PyTorch Lightning, sentence-transformers and the
Hugging Face ``Trainer``.

- :class:`RetrievalChecksCallback` (Lightning): evaluates the validation embeddings at
  every validation epoch's end, logs the metrics, gates them, can stop training;
  under DDP it drops the items ``DistributedSampler`` repeats (counted) and evaluates
  exactly over the ranks' shards (``process_group``), or all-gathers (``distributed=``).
- :class:`DiscriminantRatioMonitor` (Lightning): logs the discriminant ratio J of
  every training batch.
- :class:`RetrievalChecksEvaluator` (sentence-transformers ``SentenceEvaluator``):
  for ``model.evaluate(evaluator)`` and ``SentenceTransformerTrainer(evaluator=...)``.
- :class:`RetrievalChecksTrainerCallback` (transformers ``TrainerCallback``):
  evaluates at each ``on_evaluate``, adds the metrics, can stop training.
- :func:`check_gates` and :func:`dedupe_by_id`: the gate validation and the
  de-duplication they share.

Importing this package imports none of those libraries: each class is loaded (with
its library) on first access, e.g. ``from retrieval_checks.integrations import
RetrievalChecksCallback`` imports Lightning. Extras: ``retrieval-checks[lightning]``,
``retrieval-checks[text]``. See ``docs/integrations.md``.
"""

from __future__ import annotations

import importlib

from ._gating import check_gates, dedupe_by_id

__all__ = [
    "RetrievalChecksCallback",
    "DiscriminantRatioMonitor",
    "RetrievalChecksEvaluator",
    "RetrievalChecksTrainerCallback",
    "check_gates",
    "dedupe_by_id",
]

_LAZY = {
    "RetrievalChecksCallback": "._lightning",
    "DiscriminantRatioMonitor": "._lightning",
    "RetrievalChecksEvaluator": "._sentence",
    "RetrievalChecksTrainerCallback": "._hf",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
