"""The scored counters: above / tied counts and pair outputs from a block of scores.

A *scored* counter reads one query block's scores ``S`` laid out ``(n_chunks, b, c)``
(``S[k, i, j]``: block row ``i`` against gallery column ``k * c + j`` of the problem's
column window; masked pairs hold ``-inf``) and gives, for every relevant score of a row
(sorted ascending inside the row), the non-relevant scores ``>=`` it (``above``) and
``==`` it (``tied``), and the pair metrics' outputs: the negatives ``>= tau``, the
negatives ``>=`` each fixed threshold and the binning pass's histogram. Two twins:

- :class:`CpuCounter`: the compiled CPU kernels of :mod:`._kernels` (numba, or their
  numpy twins) on numpy arrays (torch CPU tensors are viewed without a copy);
- :class:`TorchCounter`: vectorised torch (``searchsorted`` and ``scatter_add``), on
  CUDA and, on request (``use_kernels=False``), on CPU, where tests run the CUDA code.

Both give the same numbers bit for bit (tests/engine/test_kernels.py and the engine's
twin tests). Which one runs is :func:`.._counting.select`'s decision, made once per pass;
a counter never decides how partial results meet across ranks (the ``reduce`` it is
handed does: :mod:`.._reduce`).
"""

from __future__ import annotations

import math

import numpy as np

from .._inputs import Csr
from . import _kernels

__all__ = [
    "CpuCounter",
    "TorchCounter",
    "count_torch",
    "row_value_keys",
    "sort_within_rows",
    "tail_histogram",
    "tail_threshold",
]


def sort_within_rows(vals, rel: Csr, torch_path: bool):
    """Relevant scores sorted ascending inside each row, and the permutation (numpy)
    that sorts them."""
    if torch_path:
        import torch

        rid = torch.from_numpy(rel.row_ids()).to(vals.device)
        # stable two-key sort: by value, then by row
        v_sorted, order = torch.sort(vals, stable=True)
        r2 = rid[order]
        r_sorted, order2 = torch.sort(r2, stable=True)
        return v_sorted[order2], order[order2].cpu().numpy()
    order = np.argsort(row_value_keys(vals, rel.row_ids()), kind="stable")
    return vals[order], order


def row_value_keys(vals: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """One uint64 key per float32 value whose stable sort is ``np.lexsort((vals,
    rows))``'s order (by row, then value; ties in place), five times faster: the row in
    the high word, the value's bits made monotonic in the low word. ``-0.0`` is keyed as
    ``+0.0`` (the two compare equal, so they keep their places, as lexsort keeps them)."""
    v = np.asarray(vals, np.float32)
    bits = (v + np.float32(0.0)).view(np.uint32)  # -0.0 + 0.0 is +0.0
    flip = np.where(bits >> np.uint32(31), np.uint32(0xFFFFFFFF), np.uint32(0x80000000))
    return (np.asarray(rows).astype(np.uint64) << np.uint64(32)) | (bits ^ flip).astype(np.uint64)


def count_torch(S, m: int, n_cols: int, indptr: np.ndarray, rel_sorted):
    """The vectorised twin of :func:`_kernels.count_above_relevant` (CUDA, or tests):
    non-relevant scores ``>=`` each relevant score, and those ``==`` it."""
    import torch

    dev = S.device
    counts = np.diff(indptr)
    r_max = int(counts.max()) if counts.size else 0
    if r_max == 0:
        return np.zeros(rel_sorted.shape[0], np.int64), np.zeros(rel_sorted.shape[0], np.int64)
    rid = torch.from_numpy(np.repeat(np.arange(m), counts)).to(dev)
    col = torch.from_numpy(np.arange(indptr[-1]) - np.repeat(indptr[:-1], counts)).to(dev)
    padded = torch.full((m, r_max), math.inf, dtype=torch.float32, device=dev)
    padded[rid, col] = rel_sorted
    hist = torch.zeros((m, r_max + 1), dtype=torch.int64, device=dev)
    tie_diff = torch.zeros((m, r_max + 1), dtype=torch.int64, device=dev)
    for k in range(S.shape[0]):
        tile = S[k, :m].contiguous()
        right = torch.searchsorted(padded, tile, right=True)
        hist.scatter_add_(1, right, torch.ones_like(right))
        # a score equal to relevant items left..right-1 ties with each of them
        left = torch.searchsorted(padded, tile, right=False)
        eq = (left < right).to(torch.int64)
        tie_diff.scatter_add_(1, left, eq)
        tie_diff.scatter_add_(1, right, -eq)
    # negatives with insertion position p count against relevant items 0..p-1
    suffix = hist.flip(1).cumsum(1).flip(1)  # suffix[t] = sum_{p >= t} hist[p]
    above = suffix[rid, col + 1]
    tied = tie_diff.cumsum(1)[rid, col]
    return above.cpu().numpy(), tied.cpu().numpy()


def tail_histogram(Sn: np.ndarray, m: int, n_cols: int) -> np.ndarray:
    """The 65536-bin histogram of the order-preserving keys of the finite scores of
    rows ``< m``, columns ``< n_cols`` (counts add over gallery shards)."""
    hist = np.zeros(65536, np.int64)
    _kernels.key_histogram(Sn.view(np.uint32), m, n_cols, hist)
    return hist


def tail_threshold(hist: np.ndarray, capacity: int) -> float:
    """The highest bin floor with at least ``capacity`` scores at or above it (-inf if none)."""
    above = np.cumsum(hist[::-1])[::-1]  # above[t] = values in bins >= t
    ok = np.flatnonzero(above >= capacity)
    if ok.size == 0:
        return -math.inf
    t = int(ok[-1])
    return _kernels.key_to_float(np.uint32(t << 16))


def _window_pairs(p, rel: Csr, own: Csr):
    """The block's relevant and self pairs inside the problem's column window, as
    (chunk, row, column-in-chunk) index arrays, and which relevant pairs those are
    (None: all of them)."""
    base, c = p.k0 * p.c, p.c
    rid, cols = rel.row_ids(), rel.indices
    orow, ocol = own.row_ids(), own.indices
    mine = None
    if p.windowed:
        mine = (cols >= p.g0) & (cols < p.g1)
        rid, cols = rid[mine], cols[mine] - base
        omine = (ocol >= p.g0) & (ocol < p.g1)
        orow, ocol = orow[omine], ocol[omine] - base
    return (cols // c, rid, cols % c), (ocol // c, orow, ocol % c), mine


class CpuCounter:
    """The CPU kernels of :mod:`._kernels` (numba or numpy: :data:`._kernels.ACCELERATOR`)."""

    fused = False
    torch_path = False

    @property
    def name(self) -> str:
        return _kernels.ACCELERATOR

    def scores(self, S, backend):
        """The block as a numpy array (a view of a torch CPU tensor)."""
        return backend.to_numpy(S)

    def take_and_mask(self, p, S, rel: Csr, own: Csr):
        """Relevant scores (float32, block-CSR order; -inf outside the column window);
        relevant and self pairs set to -inf."""
        at, own_at, mine = _window_pairs(p, rel, own)
        if mine is None:
            vals = S[at].copy()
        else:
            vals = np.full(mine.size, -np.inf, np.float32)
            vals[mine] = S[at]
        S[at] = -np.inf
        if own_at[0].size:
            S[own_at] = -np.inf
        return vals

    def sort_within_rows(self, vals, rel: Csr):
        return sort_within_rows(vals, rel, False)

    def count(self, S, m: int, n_cols: int, indptr, rel_sorted, tau: float):
        """(above, tied, tail_counts): ``tail_counts[i]`` row ``i``'s scores ``>= tau``."""
        above = np.empty(rel_sorted.shape[0], np.int64)
        tied = np.empty(rel_sorted.shape[0], np.int64)
        tail_counts = np.zeros(m, np.int64)
        _kernels.count_above_relevant(
            S, m, n_cols, indptr, rel_sorted, above, tied, np.float32(tau), tail_counts
        )
        return above, tied, tail_counts

    def seed_tail(self, S, m: int, n_cols: int, capacity: int, reduce) -> float:
        """A threshold with at least ``capacity`` of this block's negatives (over every
        rank) at or above it, from a 65536-bin histogram of order-preserving float keys:
        keeps the first block from collecting every negative while the tail threshold is
        still -inf. Any such threshold is a valid (exact) tail threshold, since the whole
        pass has at least as many negatives above it as this block has."""
        return tail_threshold(reduce("tail_histogram", tail_histogram(S, m, n_cols)), capacity)

    def negatives(self, S, m: int, n_cols: int, tau: float, tail_counts) -> np.ndarray:
        rows = np.flatnonzero(tail_counts).astype(np.int64)
        offsets = np.zeros(rows.size + 1, np.int64)
        np.cumsum(tail_counts[rows], out=offsets[1:])
        out = np.empty(int(offsets[-1]), np.float32)
        _kernels.collect_rows(S, rows, offsets, n_cols, np.float32(tau), out)
        return out

    def fixed_fp(self, S, m: int, n_cols: int, thresholds: np.ndarray) -> np.ndarray:
        """Negatives ``>=`` each of the ascending float32 ``thresholds``."""
        hist = np.zeros(thresholds.size + 1, np.int64)
        _kernels.bin_against_sorted(S, m, n_cols, thresholds, hist)
        return np.cumsum(hist[::-1])[::-1][1:].copy()

    def bin(self, S, m: int, n_cols: int, sorted_positive: np.ndarray, out: np.ndarray) -> None:
        """``out[p]`` += negatives with exactly ``p`` of ``sorted_positive`` ``<=`` them."""
        _kernels.bin_against_sorted(S, m, n_cols, sorted_positive, out)

    def host(self, values) -> np.ndarray:
        return values


class TorchCounter:
    """The vectorised torch twin (CUDA; on CPU with ``use_kernels=False``)."""

    fused = False
    torch_path = True
    name = "torch"

    def scores(self, S, backend):
        if isinstance(S, np.ndarray):
            import torch

            return torch.from_numpy(S)
        return S

    def take_and_mask(self, p, S, rel: Csr, own: Csr):
        import torch

        dev = S.device
        at, own_at, mine = _window_pairs(p, rel, own)
        idx = tuple(torch.from_numpy(a).to(dev) for a in at)
        if mine is None:
            vals = S[idx].clone()
        else:
            vals = torch.full((mine.size,), -math.inf, dtype=torch.float32, device=dev)
            vals[torch.from_numpy(np.flatnonzero(mine)).to(dev)] = S[idx]
        S[idx] = -math.inf
        if own_at[0].size:
            S[tuple(torch.from_numpy(a).to(dev) for a in own_at)] = -math.inf
        return vals

    def sort_within_rows(self, vals, rel: Csr):
        return sort_within_rows(vals, rel, True)

    def count(self, S, m: int, n_cols: int, indptr, rel_sorted, tau: float):
        above, tied = count_torch(S, m, n_cols, indptr, rel_sorted)
        return above, tied, None

    def seed_tail(self, S, m: int, n_cols: int, capacity: int, reduce) -> float:
        """The ``capacity``-th largest finite score of the block over every rank (each
        rank's top ``capacity`` gathered), or -inf when the block has no more."""
        import torch

        view = S[:, :m]
        finite = view > -math.inf
        n_local = int(finite.sum())
        n_block = int(reduce("tail_size", np.array([n_local], np.int64))[0])
        if n_block <= capacity:
            return -math.inf
        top = torch.topk(view[finite], min(capacity, n_local)).values.cpu().numpy()
        every = reduce("tail_top", top)
        return float(np.partition(every, every.size - capacity)[every.size - capacity])

    def negatives(self, S, m: int, n_cols: int, tau: float, tail_counts) -> np.ndarray:
        view = S[:, :m]
        return view[view >= tau].cpu().numpy()

    def fixed_fp(self, S, m: int, n_cols: int, thresholds: np.ndarray) -> np.ndarray:
        import torch

        view = S[:, :m]
        thr = torch.from_numpy(thresholds).to(S.device)
        return np.array([int((view >= t).sum()) for t in thr], np.int64)

    def bin(self, S, m: int, n_cols: int, sorted_positive: np.ndarray, out: np.ndarray) -> None:
        import torch

        u = torch.from_numpy(sorted_positive).to(S.device)
        view = S[:, :m].reshape(-1)
        view = view[view >= u[0]]
        pos = torch.searchsorted(u, view, right=True)
        out += torch.bincount(pos, minlength=u.numel() + 1).cpu().numpy()

    def host(self, values) -> np.ndarray:
        return values.cpu().numpy()
