"""Loading embeddings, labels and ids from files.

One function, :func:`load_embeddings`, reads every format a model repository is likely
to hold, by extension:

- ``.npy``: one array, the embeddings (labels and ids from other files or arrays);
- ``.npz``: named arrays (``numpy.load`` with ``allow_pickle=False``);
- ``.safetensors``: named tensors (needs the ``safetensors`` package);
- ``.pt`` / ``.pth``: a dict of tensors, arrays or lists, read with
  ``torch.load(weights_only=True)``, so no code in the file runs;
- ``.parquet``: columns; the embedding column holds one list (or fixed-size list) of
  floats per row (needs ``pyarrow``).

Keys default to ``embeddings``, ``labels`` and ``ids``; pass other names to match a
file. A missing key is an error that lists the keys the file has and suggests the
closest one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._suggest import hint
from ..errors import InputError

__all__ = ["EmbeddingSet", "load_embeddings", "read_arrays"]


@dataclass(frozen=True)
class EmbeddingSet:
    """Embeddings (n x d) with optional labels and ids (n each), and where they came from."""

    embeddings: np.ndarray
    labels: np.ndarray | None
    ids: np.ndarray | None
    source: str


def _missing(path: Path, what: str, key: str, available: list[str]) -> InputError:
    return InputError(
        f"{path}: no {what} named {key!r}; the file has {', '.join(map(repr, available)) or 'nothing'}."
        f"{hint(key, available)} "
        f"Pass {what}=<name> to choose another."
    )


def read_arrays(path: Path) -> dict[str, np.ndarray]:
    ext = "".join(path.suffixes[-1:]).lower()
    if ext == ".npz":
        try:
            with np.load(path, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        except (ValueError, OSError) as exc:
            raise InputError(f"{path}: cannot read it as .npz ({exc}); object arrays are refused (no pickle).") from None
    if ext == ".safetensors":
        try:
            from safetensors.numpy import load_file
        except ImportError:
            raise InputError(f"{path}: reading .safetensors needs the safetensors package (pip install safetensors).") from None
        return dict(load_file(str(path)))
    if ext in (".pt", ".pth"):
        try:
            import torch
        except ImportError:
            raise InputError(f"{path}: reading .pt files needs PyTorch (pip install torch).") from None
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # weights_only refuses pickled code: say so
            raise InputError(
                f"{path}: torch.load(weights_only=True) refused the file ({type(exc).__name__}: {exc}). Only tensors, "
                "arrays, numbers, strings and containers of them are read; save a dict of tensors instead."
            ) from None
        if hasattr(obj, "shape"):
            obj = {"embeddings": obj}
        if not isinstance(obj, dict):
            raise InputError(f"{path}: expected a tensor or a dict of tensors, found {type(obj).__name__}.")
        out = {}
        for k, v in obj.items():
            if hasattr(v, "detach"):
                v = v.detach().cpu()
                if v.dtype in (torch.bfloat16, torch.float16):
                    v = v.float()  # numpy has no bfloat16
                out[str(k)] = v.numpy()
            else:
                out[str(k)] = np.asarray(v)
        return out
    if ext == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError(f"{path}: reading .parquet needs pyarrow (pip install pyarrow).") from None
        table = pq.read_table(path)
        out = {}
        for name in table.column_names:
            col = table.column(name)
            values = col.to_pylist()
            if any(v is None for v in values):
                raise InputError(f"{path}: column {name!r} has {sum(v is None for v in values)} null row(s); fill or drop them.")
            if values and isinstance(values[0], (list, tuple)):
                lengths = {len(v) for v in values}
                if len(lengths) != 1:
                    raise InputError(f"{path}: column {name!r} holds lists of different lengths {sorted(lengths)[:5]}.")
                out[name] = np.asarray(values, dtype=np.float32)
            else:
                out[name] = np.asarray(values)
        return out
    raise InputError(
        f"{path}: unknown file type {ext or '(no extension)'!r}; use .npy, .npz, .safetensors, .pt/.pth or .parquet."
    )


def load_embeddings(path, *, embeddings: str = "embeddings", labels: str | None = "labels",
                    ids: str | None = "ids", labels_required: bool = False) -> EmbeddingSet:
    """Read embeddings (and, when present, labels and ids) from ``path``.

    ``labels`` / ``ids``: the key to read, or None to skip; a key that is absent is
    fine unless ``labels_required``. Paths may be strings or ``pathlib.Path``.
    """
    p = Path(os.fspath(path))
    if not p.exists():
        raise InputError(f"{p}: no such file (resolved to {p.resolve()}).")
    if p.suffix.lower() == ".npy":
        try:
            emb = np.load(p, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise InputError(f"{p}: cannot read it as .npy ({exc}); object arrays are refused (no pickle).") from None
        if labels_required:
            raise InputError(f"{p}: a .npy file holds one array (the embeddings); give labels in another file or use .npz.")
        return EmbeddingSet(_check_2d(emb, p), None, None, str(p))
    data = read_arrays(p)
    if embeddings not in data:
        raise _missing(p, "embeddings", embeddings, list(data))
    emb = _check_2d(data[embeddings], p, embeddings)
    out_labels = out_ids = None
    for key, name in ((labels, "labels"), (ids, "ids")):
        if key is None:
            continue
        if key not in data:
            if name == "labels" and labels_required:
                raise _missing(p, "labels", key, list(data))
            continue
        arr = np.asarray(data[key])
        if arr.ndim != 1 or arr.shape[0] != emb.shape[0]:
            raise InputError(
                f"{p}: {name} {key!r} has shape {arr.shape} but there are {emb.shape[0]} embeddings; "
                f"give one {name[:-1]} per row."
            )
        if name == "labels":
            out_labels = arr
        else:
            out_ids = arr
    return EmbeddingSet(emb, out_labels, out_ids, str(p))


def _check_2d(arr, p: Path, key: str = "embeddings") -> np.ndarray:
    arr = np.asarray(arr)
    if arr.ndim != 2:
        raise InputError(f"{p}: {key!r} has shape {arr.shape}; embeddings must be 2-D (n_items x dim).")
    if arr.dtype.kind not in "fiu":
        raise InputError(f"{p}: {key!r} has dtype {arr.dtype}; embeddings must be numeric.")
    return arr
