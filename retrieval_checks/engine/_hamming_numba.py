"""The numba Hamming tile kernel (imported on first use by :mod:`._hamming`, so that
``import retrieval_checks`` does not pay for numba)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# the SWAR popcount masks (the same as the torch twin's in :mod:`._hamming`, which imports
# this module only when numba is there: no import back)
_M1 = 0x5555555555555555
_M2 = 0x3333333333333333
_M4 = 0x0F0F0F0F0F0F0F0F

__all__ = ["tile"]


@njit(cache=True, nogil=True, inline="always")
def _popcount64(x):
    """Set bits of a uint64 (SWAR; LLVM turns this into ``popcnt``)."""
    x = x - ((x >> np.uint64(1)) & np.uint64(_M1))
    x = (x & np.uint64(_M2)) + ((x >> np.uint64(2)) & np.uint64(_M2))
    x = (x + (x >> np.uint64(4))) & np.uint64(_M4)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(parallel=True, cache=True, nogil=True)
def tile(Qw, GT, out):
    """``out[i, j] = -popcount(Qw[i] ^ GT[:, j])``; ``GT`` is the gallery word-major
    (``n_words x c``) so that the inner loop runs over contiguous words and vectorises.
    The sum accumulates in ``out`` itself (faster than a local integer buffer, and
    exact: every partial sum is an integer below 2**24)."""
    b, w = Qw.shape
    c = GT.shape[1]
    for i in prange(b):
        q = Qw[i, 0]
        for j in range(c):  # the first word writes, the others subtract: one pass for 64-bit codes
            out[i, j] = -np.float32(_popcount64(q ^ GT[0, j]))
        for t in range(1, w):
            q = Qw[i, t]
            for j in range(c):
                out[i, j] -= np.float32(_popcount64(q ^ GT[t, j]))
