"""Embedding-space measures."""

from __future__ import annotations

import math

import numpy as np

from .._arrays import as_numpy, is_torch_tensor, sequence_kinds
from ..errors import InputError

__all__ = ["discriminant_ratio"]


def discriminant_ratio(embeddings, labels, *, eps: float = 1e-12):
    """Discriminant ratio J = Tr(S_B) / (Tr(S_W) + eps).

    S_B = sum_c n_c (mu_c - mu)(mu_c - mu)^T and S_W = sum_c sum_{i in c}
    (x_i - mu_c)(x_i - mu_c)^T. Only the traces are needed, and those are sums of
    squared norms: Tr(S_B) = sum_c n_c ||mu_c - mu||^2, Tr(S_W) = sum_i ||x_i - mu_c(i)||^2,
    so no d x d matrix is formed; cost O(n d). Unitless; higher means tighter,
    better separated classes. J = Tr(B)/Tr(W) relates to the Calinski-Harabasz index
    CH by J = CH * (k - 1) / (n - k) for k classes and n items.

    With a torch tensor the result is a differentiable 0-d tensor in the input's
    dtype (for monitoring or regularising a training mini-batch); otherwise a float
    computed in float64.

    J is scale invariant (J(c x) = J(x)), and it is computed so: the embeddings are
    first divided by a power of two near their largest magnitude (exact), so values
    near 1e200 (float64) or 1e30 (float32) give the same J as the unscaled data
    instead of an overflow to NaN, and ``eps`` acts at that normalised scale.

    Refused (:class:`~retrieval_checks.InputError`): a single class, and a within-class
    scatter of 0 (every class a singleton, or identical items in every class), where J
    is undefined.

    Parameters
    ----------
    embeddings:
        (n x d) numbers: a numpy array, or a floating-point torch tensor (the result is
        then a differentiable tensor).
    labels:
        One label per row (ints or strings), at least 2 classes.
    eps:
        Added to Tr(S_W) (default 1e-12), at the normalised scale.

    Returns
    -------
    float or torch.Tensor
        J, a float (float64 arithmetic), or a 0-d tensor for a tensor input.

    Raises
    ------
    InputError
        Embeddings that are not a non-empty finite numeric 2-D array, labels of mixed
        types or not one per row, a single class, a within-class scatter of 0.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> import retrieval_checks as rc
    >>> x = np.array([[0.0, 0], [0, 1], [4, 0], [4, 1]])  # two classes 4 apart, spread 1
    >>> round(rc.discriminant_ratio(x, [0, 0, 1, 1]), 6)
    16.0
    >>> j = rc.discriminant_ratio(torch.tensor(x, requires_grad=True), [0, 0, 1, 1])
    >>> j.requires_grad, round(j.item(), 6)
    (True, 16.0)
    """
    kinds = sequence_kinds(labels)
    if kinds and len(kinds) > 1 and not kinds & {"list", "tuple", "ndarray"}:
        raise InputError(
            f"labels mixes label types ({', '.join(sorted(kinds))}), e.g. 1 and '1', which numpy would "
            "merge into one type; use one type (all ints or all strings)."
        )
    if is_torch_tensor(embeddings):
        import torch  # a tensor was given, so torch is loaded; not by `import retrieval_checks`

        x = embeddings
        if x.ndim != 2 or x.shape[0] == 0:
            raise InputError(
                f"embeddings must be a non-empty 2-D batch, got shape {tuple(x.shape)}."
            )
        if x.is_complex() or not (x.is_floating_point()):
            raise InputError(
                f"embeddings have dtype {x.dtype}; pass a floating-point tensor (e.g. x.float())."
            )
        peak = x.detach().abs().max()
        if not bool(torch.isfinite(peak)):
            raise InputError("embeddings contain NaN or Inf; drop or repair those rows.")
        if float(peak) > 0:
            x = torch.ldexp(
                x, x.new_tensor(float(-math.frexp(float(peak))[1]))
            )  # exact: J is scale invariant
        if is_torch_tensor(labels):
            y = labels
        else:  # any label type (strings too): integer codes first
            y = torch.as_tensor(np.unique(np.asarray(labels), return_inverse=True)[1].ravel())
        if y.ndim != 1 or y.shape[0] != x.shape[0]:
            raise InputError(
                f"labels must hold one label per embedding ({x.shape[0]}), got shape {tuple(y.shape)}."
            )
        _, codes = torch.unique(y.to(x.device), return_inverse=True)
        k = int(codes.max()) + 1
        counts = torch.bincount(codes, minlength=k).to(x.dtype)
        sums = torch.zeros((k, x.shape[1]), dtype=x.dtype, device=x.device).index_add(0, codes, x)
        mu_c = sums / counts[:, None]
        mu = x.mean(dim=0)
        tr_b = (counts * ((mu_c - mu) ** 2).sum(dim=1)).sum()
        tr_w = ((x - mu_c[codes]) ** 2).sum()
        _check_defined(k, counts.detach().cpu().numpy(), float(tr_w.detach()), eps)
        return tr_b / (tr_w + eps)
    x = as_numpy(embeddings, "embeddings")
    if x.dtype.kind not in "biuf":
        raise InputError(f"embeddings have dtype {x.dtype}; pass a numeric (n x d) array.")
    x = x.astype(np.float64, copy=False)
    if x.ndim != 2 or x.shape[0] == 0:
        raise InputError(f"embeddings must be a non-empty 2-D array, got shape {x.shape}.")
    if not np.isfinite(x).all():
        raise InputError("embeddings contain NaN or Inf; drop or repair those rows.")
    peak = float(np.abs(x).max())
    if peak > 0:
        x = np.ldexp(
            x, -math.frexp(peak)[1]
        )  # exact: J is scale invariant, and squares no longer overflow
    y = as_numpy(labels, "labels")
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise InputError(
            f"labels must hold one label per embedding ({x.shape[0]}), got shape {y.shape}."
        )
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise InputError(
            "labels contain NaN or Inf; give every embedding a finite (integer or string) label."
        )
    if y.dtype.kind not in "biufUSO":
        raise InputError(f"labels have dtype {y.dtype}; use integer or string labels.")
    _, codes = np.unique(y, return_inverse=True)
    codes = codes.ravel()
    k = int(codes.max()) + 1
    counts = np.bincount(codes, minlength=k).astype(np.float64)
    sums = np.zeros((k, x.shape[1]))
    np.add.at(sums, codes, x)
    mu_c = sums / counts[:, None]
    mu = x.mean(axis=0)
    tr_b = float((counts * ((mu_c - mu) ** 2).sum(axis=1)).sum())
    tr_w = float(((x - mu_c[codes]) ** 2).sum())
    _check_defined(k, counts, tr_w, eps)
    return tr_b / (tr_w + eps)


def _check_defined(k: int, counts, tr_w: float, eps: float) -> None:
    """J = Tr(S_B) / Tr(S_W) needs two classes and some within-class scatter: with one
    class there is no between-class scatter to compare, and with S_W = 0 (singleton
    classes, or identical items in every class) J is a division by ``eps``, a number of
    no meaning (1e13 for random data with one item per class)."""
    if k < 2:
        raise InputError(
            "labels hold a single class: the discriminant ratio compares between-class with within-class scatter, "
            "so it needs embeddings of at least 2 classes; pass items of 2 or more classes."
        )
    if tr_w <= eps:
        if not (np.asarray(counts) >= 2).any():
            raise InputError(
                f"every class has a single item ({k} classes for {k} embeddings), so the within-class scatter S_W is "
                "0 and J = Tr(S_B) / Tr(S_W) is undefined; give classes 2 or more items each (J measures how tight "
                "the items of one label are), or check that labels are class labels, not item ids."
            )
        raise InputError(
            "the within-class scatter S_W is 0 (the items of every class are identical"
            + (", or the embeddings are constant" if tr_w == 0 else ", up to eps")
            + "), so J = Tr(S_B) / Tr(S_W) is undefined; check the embeddings (duplicated or collapsed rows) and the "
            "labels, or use a measure defined for collapsed embeddings."
        )
