"""One cache of evaluation results for a session, keyed by what they were computed from.

The pytest plugin's ``rc_evaluate`` and the suite runner both keep results here, so
checks that ask for the same evaluation share one engine pass. A key covers the
content of every array (a BLAKE2 digest of the bytes, dtype and shape: other embeddings
under the same model and dataset names are another evaluation, never the first one's
result), every option, and the names the result carries.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

from .._arrays import is_torch_tensor
from ..errors import InputError
from ._evaluate import evaluate
from ._result import EvaluationResult

__all__ = ["EvaluationCache", "content_digest"]


def _feed(h, value) -> None:
    """Feed ``value`` into the hash ``h``: arrays by content, containers element by element."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        h.update(f"{type(value).__name__}:{value!r};".encode())
    elif is_torch_tensor(value):
        h.update(f"torch:{value.dtype}:{value.layout};".encode())
        t = value.detach()
        if str(t.layout) != "torch.strided":
            t = t.to_dense()  # the content, whatever the layout
        if t.device.type == "meta":
            raise InputError("a tensor on the meta device holds no data; pass computed values.")
        if t.is_floating_point() and t.element_size() < 4:
            t = t.double()  # bfloat16 has no numpy twin; float64 holds every value exactly
        _feed(h, t.cpu().numpy())
    elif isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        h.update(f"nd:{arr.dtype.str}:{arr.shape};".encode())
        if arr.dtype.hasobject:
            for item in arr.ravel():
                _feed(h, item)
        else:
            h.update(memoryview(arr).cast("B"))
    elif hasattr(value, "tocsr") and hasattr(value, "shape"):  # scipy sparse
        m = value.tocsr()
        h.update(f"sparse:{m.shape};".encode())
        for part in (m.indptr, m.indices, m.data):
            _feed(h, np.asarray(part))
    elif isinstance(value, Mapping):
        h.update(f"map:{len(value)};".encode())
        for k in sorted(value, key=repr):
            _feed(h, k)
            _feed(h, value[k])
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        h.update(f"seq:{type(value).__name__}:{len(items)};".encode())
        for item in items:
            _feed(h, item)
    elif isinstance(value, np.generic):
        _feed(h, value.item())
    else:
        _feed(h, np.asarray(value))


def content_digest(*values) -> str:
    """A digest of the content of ``values`` (arrays, tensors, sparse matrices, mappings,
    sequences and scalars)."""
    h = hashlib.blake2b(digest_size=20)
    for v in values:
        _feed(h, v)
    return h.hexdigest()


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
        from ._inputs import refuse_sparse

        for name, x in (("queries", queries), ("gallery", gallery)):
            if x is not None:
                refuse_sparse(x, name)  # named here: the key below reads every array
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
