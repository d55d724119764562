"""Array helpers shared by every layer: numpy views of array-likes and torch tensors.

torch is never imported here: a tensor is recognised by its type's module.
"""

from __future__ import annotations

import numpy as np

from .errors import InputError

__all__ = ["is_torch_tensor", "as_numpy"]


def is_torch_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def as_numpy(x, name: str) -> np.ndarray:
    """A numpy view or copy of an array-like (torch tensors on any device included)."""
    if is_torch_tensor(x):
        return x.detach().cpu().numpy()
    try:
        return np.asarray(x)
    except Exception as exc:  # ragged lists and the like
        raise InputError(f"{name} could not be read as an array: {exc}") from None
