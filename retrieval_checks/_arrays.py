"""Array helpers shared by every layer: numpy views of array-likes and torch tensors.

torch is never imported here: a tensor is recognised by its type's module.

Conversions that numpy or torch refuse or misread are done here, once, for every
layer: big-endian arrays (``>f4``: torch cannot take them, numba misreads them) become
native-endian, and torch's ``bfloat16`` (numpy has no such type) becomes float32,
which holds every bfloat16 value exactly.
"""

from __future__ import annotations

import numbers

import numpy as np

from .errors import InputError

__all__ = ["is_torch_tensor", "as_numpy", "native_order", "sequence_kinds"]


def is_torch_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def native_order(a: np.ndarray) -> np.ndarray:
    """``a`` itself when its bytes are in the machine's order, else a native-endian copy
    (same values): a big-endian ``>f4`` file read with ``np.load`` stays usable."""
    if a.dtype.fields is None and not a.dtype.isnative:
        return a.astype(a.dtype.newbyteorder("="))
    return a


def as_numpy(x, name: str) -> np.ndarray:
    """A native-endian numpy view or copy of an array-like (torch tensors on any
    device included; bfloat16 tensors as float32)."""
    if is_torch_tensor(x):
        t = x.detach()
        layout = str(getattr(t, "layout", "torch.strided"))
        if layout != "torch.strided":
            raise InputError(
                f"{name} is a sparse torch tensor (layout {layout}); pass a dense one "
                "(tensor.to_dense()), or for a relevance a scipy sparse matrix."
            )
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()  # exact: every bfloat16 is a float32
        try:
            return t.cpu().numpy()
        except (TypeError, RuntimeError) as exc:
            raise InputError(
                f"{name} (a torch tensor of dtype {t.dtype}) could not be read as an array: {exc}; "
                "convert it with .float() or .long()."
            ) from None
    try:
        return native_order(np.asarray(x))
    except Exception as exc:  # ragged lists and the like
        raise InputError(f"{name} could not be read as an array: {exc}") from None


def _kind_of(v) -> str:
    if isinstance(v, (str, np.str_)):
        return "string"
    if isinstance(v, (bytes, np.bytes_)):
        return "bytes"  # b"a" != "a": never one label type with strings
    if isinstance(v, (numbers.Number, np.number, np.bool_)):
        return "number"
    return type(v).__name__


def sequence_kinds(x) -> set[str] | None:
    """The kinds (``"string"``, ``"bytes"``, ``"number"`` or a type name) of the elements of a plain
    Python list or tuple, before numpy merges them (``[1, "1"]`` becomes two strings
    in ``np.asarray``); None for arrays, tensors and anything else."""
    if not isinstance(x, (list, tuple)):
        return None
    return {_kind_of(v) for v in x}
