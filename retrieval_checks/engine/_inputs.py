"""Validation and encoding of user inputs: embeddings, labels, ids, relevance.

Every check raises :class:`~retrieval_checks.errors.InputError` naming the argument,
what is wrong (with the first offending indices) and how to fix it.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._arrays import as_numpy, is_torch_tensor
from ..errors import InputError

__all__ = [
    "is_torch_tensor",
    "as_numpy",
    "check_embeddings",
    "encode_labels",
    "encode_ids",
    "Csr",
    "relevance_to_csr",
    "ranges_to_csr",
]


def _first(indices, n: int = 5) -> str:
    indices = np.asarray(indices).ravel()
    shown = ", ".join(str(int(i)) for i in indices[:n])
    return shown + (", ..." if indices.size > n else "")


def check_embeddings(x, name: str, *, similarity: str):
    """Validate a 2-D embedding array; return it unchanged (numpy or torch).

    Checks: two dimensions, at least one row and one column, a numeric dtype,
    finite values, and no all-zero rows under cosine similarity.
    """
    if x is None:
        raise InputError(f"{name} is None: pass a 2-D array of embeddings (n_items x dim).")
    torch_in = is_torch_tensor(x)
    if not torch_in:
        x = as_numpy(x, name)
        if x.dtype == object or x.dtype.kind not in "fiub":
            raise InputError(
                f"{name} has dtype {x.dtype}; embeddings must be numeric (float32 is used internally)."
            )
    else:
        if x.is_complex():
            raise InputError(f"{name} has dtype {x.dtype}; embeddings must be real numbers.")
    if x.ndim != 2:
        raise InputError(
            f"{name} must be 2-D (n_items x dim), got shape {tuple(x.shape)}; "
            "reshape a single vector with x[None, :] or flatten extra axes."
        )
    if x.shape[0] == 0:
        raise InputError(f"{name} is empty (shape {tuple(x.shape)}): at least one item is needed.")
    if x.shape[1] == 0:
        raise InputError(f"{name} has zero columns (shape {tuple(x.shape)}).")
    if torch_in:
        import torch

        xf = x if x.is_floating_point() else x.float()
        bad = (~torch.isfinite(xf)).any(dim=1)
        if bool(bad.any()):
            idx = torch.nonzero(bad).flatten().cpu().numpy()
            raise InputError(
                f"{name} has {idx.size} row(s) with NaN or Inf (rows {_first(idx)}); "
                "drop or repair those items before evaluating."
            )
        if similarity == "cosine":
            zero = (xf == 0).all(dim=1)
            if bool(zero.any()):
                idx = torch.nonzero(zero).flatten().cpu().numpy()
                raise InputError(
                    f"{name} has {idx.size} all-zero row(s) (rows {_first(idx)}), whose cosine similarity "
                    "is undefined; remove them or use similarity='dot' or 'neg_l2'."
                )
        return x
    if x.dtype.kind == "f":
        if x.dtype.itemsize > 4 and np.isfinite(x).all() and np.abs(x).max() > np.finfo(np.float32).max / 2:
            raise InputError(
                f"{name} holds values beyond float32 range (max |x| = {np.abs(x).max():.3g}); the engine computes in "
                "float32: rescale the embeddings."
            )
        bad = ~np.isfinite(x).all(axis=1)
        if bad.any():
            idx = np.flatnonzero(bad)
            raise InputError(
                f"{name} has {idx.size} row(s) with NaN or Inf (rows {_first(idx)}); "
                "drop or repair those items before evaluating."
            )
    if similarity == "cosine":
        zero = ~x.any(axis=1)
        if zero.any():
            idx = np.flatnonzero(zero)
            raise InputError(
                f"{name} has {idx.size} all-zero row(s) (rows {_first(idx)}), whose cosine similarity "
                "is undefined; remove them or use similarity='dot' or 'neg_l2'."
            )
    return x


def _label_kind(arr: np.ndarray, name: str) -> str:
    kind = arr.dtype.kind
    if kind in "iub":
        return "integer"
    if kind == "f":
        if not np.isfinite(arr).all():
            idx = np.flatnonzero(~np.isfinite(arr))
            raise InputError(f"{name} has NaN or Inf labels (positions {_first(idx)}).")
        return "number"
    if kind in "US":
        return "string"
    if kind == "O":
        if all(isinstance(v, str) for v in arr):
            return "string"
        if all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in arr):
            return "integer"
        types = sorted({type(v).__name__ for v in arr})
        raise InputError(
            f"{name} mixes label types ({', '.join(types)}); use one type (all ints or all strings)."
        )
    raise InputError(f"{name} has dtype {arr.dtype}; labels must be integers or strings.")


def _labels_1d(labels, name: str, n: int) -> np.ndarray:
    arr = as_numpy(labels, name)
    if arr.ndim != 1:
        raise InputError(f"{name} must be 1-D (one label per item), got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise InputError(
            f"{name} has {arr.shape[0]} labels but there are {n} items; give exactly one label per row."
        )
    return arr


def encode_labels(query_labels, gallery_labels, n_q: int, n_g: int, g_name: str):
    """Integer codes of query and gallery labels in one shared vocabulary, and the
    vocabulary (``values[code]`` is the label)."""
    ql = _labels_1d(query_labels, "query_labels", n_q)
    gl = _labels_1d(gallery_labels, g_name, n_g)
    kq, kg = _label_kind(ql, "query_labels"), _label_kind(gl, g_name)
    numeric = {"integer", "number"}
    if (kq in numeric) != (kg in numeric):
        raise InputError(
            f"query_labels are {kq}s but {g_name} are {kg}s, so no query could match a gallery item; "
            "convert both to the same type (e.g. str(label) or int(label))."
        )
    if kq == "string":
        ql, gl = ql.astype(str), gl.astype(str)
    elif ql.dtype == object or gl.dtype == object:
        both_int = kq == "integer" and kg == "integer"
        try:
            ql, gl = (ql.astype(np.int64), gl.astype(np.int64)) if both_int else (ql.astype(float), gl.astype(float))
        except OverflowError:
            raise InputError("Integer labels must fit in 64 bits; map them to smaller codes or strings.") from None
    values, inverse = np.unique(np.concatenate([ql, gl]), return_inverse=True)
    inverse = inverse.astype(np.int64).ravel()
    return inverse[:n_q], inverse[n_q:], values


def encode_ids(query_ids, gallery_ids, n_q: int, n_g: int, g_name: str):
    """Integer codes of item ids shared between queries and gallery."""
    qi = _labels_1d(query_ids, "query_ids", n_q)
    gi = _labels_1d(gallery_ids, g_name, n_g)
    kq, kg = _label_kind(qi, "query_ids"), _label_kind(gi, g_name)
    if (kq == "string") != (kg == "string"):
        raise InputError(
            f"query_ids are {kq}s but {g_name} are {kg}s, so self matches cannot be found; "
            "use the same id type for both."
        )
    if kq == "string":
        qi, gi = qi.astype(str), gi.astype(str)
    _, inverse = np.unique(np.concatenate([qi, gi]), return_inverse=True)
    inverse = inverse.astype(np.int64).ravel()
    return inverse[:n_q], inverse[n_q:]


@dataclass(frozen=True)
class Csr:
    """Row-compressed (query -> gallery indices) pairs; each row sorted, no duplicates."""

    indptr: np.ndarray  # int64, n_rows + 1
    indices: np.ndarray  # int64

    @property
    def n_rows(self) -> int:
        return self.indptr.shape[0] - 1

    def row_counts(self) -> np.ndarray:
        return np.diff(self.indptr)

    def rows(self, start: int, stop: int) -> "Csr":
        a, b = self.indptr[start], self.indptr[stop]
        return Csr(self.indptr[start : stop + 1] - a, self.indices[a:b])

    def row_ids(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_rows, dtype=np.int64), self.row_counts())


def ranges_to_csr(order: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Csr:
    """Row i takes ``order[lo[i]:hi[i]]``; vectorised. With ``order`` from a stable
    argsort of codes, each row comes out in ascending gallery order."""
    counts = (hi - lo).astype(np.int64)
    indptr = np.zeros(counts.shape[0] + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    total = int(indptr[-1])
    if total == 0:
        return Csr(indptr, np.zeros(0, np.int64))
    starts = np.repeat(lo.astype(np.int64) - indptr[:-1], counts)
    return Csr(indptr, order[np.arange(total, dtype=np.int64) + starts])


def relevance_to_csr(relevance, n_q: int, n_g: int) -> Csr:
    """Explicit relevance: a scipy sparse (n_q x n_g) matrix, a dense boolean matrix,
    a sequence of gallery-index collections (one per query) or a mapping
    ``{query index: gallery indices}``."""
    name = "relevance"
    rows: list[np.ndarray]
    if hasattr(relevance, "tocsr") and hasattr(relevance, "shape"):
        m = relevance.tocsr()
        if m.shape != (n_q, n_g):
            raise InputError(f"{name} has shape {m.shape} but (n_queries, n_gallery) is {(n_q, n_g)}.")
        m = m.copy()
        m.eliminate_zeros()
        m.sort_indices()
        m.sum_duplicates()
        return Csr(m.indptr.astype(np.int64), m.indices.astype(np.int64))
    if is_torch_tensor(relevance):
        relevance = relevance.detach().cpu().numpy()
    if isinstance(relevance, np.ndarray) and relevance.ndim == 2:
        if relevance.shape != (n_q, n_g):
            raise InputError(f"{name} has shape {relevance.shape} but (n_queries, n_gallery) is {(n_q, n_g)}.")
        if relevance.dtype != bool:
            if relevance.dtype.kind not in "iuf" or not np.isin(relevance, (0, 1)).all():
                raise InputError(
                    f"{name} is a {relevance.shape} matrix of dtype {relevance.dtype} with values other than 0 and 1; "
                    "pass a boolean (n_queries x n_gallery) mask, or one list of gallery indices per query."
                )
            relevance = relevance.astype(bool)
        rid, cols = np.nonzero(relevance)
        indptr = np.zeros(n_q + 1, np.int64)
        np.cumsum(np.bincount(rid, minlength=n_q), out=indptr[1:])
        return Csr(indptr, cols.astype(np.int64))
    if isinstance(relevance, Mapping):
        rows = [np.zeros(0, np.int64)] * n_q
        for key, value in relevance.items():
            if not isinstance(key, numbers.Integral) or not 0 <= int(key) < n_q:
                raise InputError(f"{name} has key {key!r}; keys must be query indices in [0, {n_q}).")
            rows[int(key)] = value
    else:
        try:
            rows = list(relevance)
        except TypeError:
            raise InputError(
                f"{name} must be a scipy sparse matrix, a boolean (n_queries x n_gallery) array, "
                "a list of gallery-index lists or a dict {query: gallery indices}."
            ) from None
        if len(rows) != n_q:
            raise InputError(f"{name} has {len(rows)} rows but there are {n_q} queries; give one entry per query.")
    counts = np.zeros(n_q, np.int64)
    parts = []
    if n_q and n_g and len(rows) == n_q and all(np.ndim(r) == 1 and np.size(r) == n_g for r in rows) and all(
        np.asarray(r).dtype == bool for r in rows
    ):
        return relevance_to_csr(np.asarray(rows, dtype=bool), n_q, n_g)  # a list of boolean rows is a mask
    for i, row in enumerate(rows):
        raw = np.asarray(row).ravel() if np.size(row) else np.zeros(0, np.int64)
        if raw.size and (raw.dtype == bool or raw.dtype.kind not in "iu"):
            raise InputError(
                f"{name}[{i}] holds {raw.dtype} values; each entry is a list of integer gallery indices "
                "(use a boolean (n_queries x n_gallery) mask for 0/1 relevance)."
            )
        arr = np.unique(raw.astype(np.int64))
        if arr.size and (arr[0] < 0 or arr[-1] >= n_g):
            raise InputError(
                f"{name}[{i}] points at gallery index {int(arr[0] if arr[0] < 0 else arr[-1])}, "
                f"outside [0, {n_g})."
            )
        counts[i] = arr.size
        parts.append(arr)
    indptr = np.zeros(n_q + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return Csr(indptr, indices)
