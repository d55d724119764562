"""A model's output as an embeddings array: one dense real (n x d) array or tensor, else
an InputError naming the model and the fix. What ``embed`` (:mod:`._embed`) and the hub
models (:mod:`._hub`) share, in a module below both."""

from __future__ import annotations

import sys

import numpy as np

from ..errors import InputError

__all__ = ["as_embeddings", "host_array", "shape_of", "clip"]


def shape_of(what: str) -> str:
    """How errors name the shape an output must have."""
    return f"(n_inputs x {'classes' if what == 'logits' else 'dim'})"


def _is_sparse(out) -> bool:
    """A scipy.sparse matrix or array, a pydata ``sparse`` array, or the like."""
    sp = sys.modules.get("scipy.sparse")
    if sp is not None and sp.issparse(out):
        return True
    return not isinstance(out, np.ndarray) and (hasattr(out, "toarray") or hasattr(out, "todense"))


def host_array(out, n: int | None, who: str, what: str) -> np.ndarray:
    """A model's output as a numpy array; anything that is not one dense real array or
    tensor (sparse, a dict or tuple of outputs, ragged rows, masked or complex values)
    is an InputError naming the model and the fix."""
    must = f"{what} must be one dense {shape_of(what)} array or tensor"
    if out is None or isinstance(out, (str, bytes)):
        raise InputError(f"{who} returned {'None' if out is None else type(out).__name__}; {must}.")
    if hasattr(out, "detach"):  # a torch tensor
        layout = str(getattr(out, "layout", "torch.strided"))
        if getattr(out, "is_sparse", False) or layout != "torch.strided":
            raise InputError(
                f"{who} returned a sparse tensor ({layout}); {must}: call .to_dense() on it."
            )
        if callable(getattr(out, "is_complex", None)) and out.is_complex():
            raise InputError(
                f"{who} returned complex values ({out.dtype}); {must} of real numbers (.real, .abs() "
                "or torch.view_as_real, as the model means it)."
            )
        try:
            return out.detach().float().cpu().numpy()
        except Exception as exc:  # the meta device, a nested (ragged) tensor...
            raise InputError(
                f"{who} returned a tensor that cannot be read on the CPU ({type(exc).__name__}: "
                f"{clip(exc)}); {must}."
            ) from None
    if _is_sparse(out):
        raise InputError(
            f"{who} returned a sparse matrix ({type(out).__name__}); {must}: call .toarray() (or "
            ".todense()) on it."
        )
    if isinstance(out, dict) or (
        hasattr(out, "keys") and hasattr(out, "__getitem__") and not hasattr(out, "shape")
    ):
        keys = ", ".join(repr(k) for k in list(out.keys())[:8])
        raise InputError(
            f"{who} returned a {type(out).__name__} with keys {keys}; {must}: pick the embeddings "
            "(wrap the model to return e.g. out['pooled'])."
        )
    if isinstance(out, np.ma.MaskedArray) and np.ma.is_masked(out):
        raise InputError(
            f"{who} returned a masked array with {int(np.ma.count_masked(out))} masked value(s), "
            f"which have no value; {must}: fill them (.filled(value)) or drop those inputs."
        )
    if isinstance(out, (tuple, list)) and n is not None and len(out) != n:
        raise InputError(
            f"{who} returned a {type(out).__name__} of {len(out)} items for {n} inputs; {must}: pick "
            "the embeddings (wrap the model to return one of the items)."
        )
    if (
        isinstance(out, (tuple, list))
        and all(hasattr(r, "__len__") for r in out)
        and len({len(r) for r in out}) > 1
    ):
        lengths = sorted({len(r) for r in out})
        raise InputError(
            f"{who} returned rows of different lengths ({lengths[:6]}); {must}, every row of the same "
            "dimension."
        )
    try:
        arr = np.asarray(out)
    except Exception as exc:
        raise InputError(
            f"{who} returned {type(out).__name__}, which is not one array ({type(exc).__name__}: "
            f"{clip(exc)}); {must}."
        ) from None
    if arr.dtype.hasobject:
        raise InputError(
            f"{who} returned an array of Python objects (dtype object: ragged rows, None or mixed "
            f"types), shape {arr.shape}; {must} of numbers."
        )
    return arr


def as_embeddings(out, n: int, who: str, what: str = "embeddings") -> np.ndarray:
    """``out``, a model's output for ``n`` inputs, as an (n x d) float32 array of finite
    values (:func:`host_array`'s checks, then shape, dtype and NaN/Inf); ``who`` names
    the model in the errors, ``what`` the output (``embeddings`` or ``logits``)."""
    arr = host_array(out, n, who, what)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise InputError(
            f"{who} returned shape {arr.shape} for {n} inputs; {what} must be {shape_of(what)}."
        )
    if arr.dtype.kind not in "fiu":
        raise InputError(f"{who} returned dtype {arr.dtype}; {what} must be numeric.")
    arr = arr.astype(np.float32, copy=False)
    if not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr).all(axis=1))
        raise InputError(
            f"{who} returned NaN or Inf {what} for {bad.size} input(s), first rows {bad[:5].tolist()}."
        )
    return arr


def clip(exc: BaseException, limit: int = 300) -> str:
    """An exception's text, cut to ``limit`` characters (for an error message)."""
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "..."
