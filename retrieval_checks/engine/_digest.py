"""Content digests: a BLAKE2 digest of arrays, tensors, sparse matrices, mappings,
sequences and scalars by content (bytes, dtype and shape). The evaluation cache, the
checkpoint fingerprints and the sharded pass key on it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

from .._arrays import is_torch_tensor
from ..errors import InputError

__all__ = ["content_digest"]


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
