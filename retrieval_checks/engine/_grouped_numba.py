"""The compiled counter of grouped recall's host path (:mod:`._grouped`): each query's
first relevant rank inside its group, from a batch of padded scores, in one pass.

The same numbers as :func:`._grouped.count_batch` (the rule's numpy form, which the
sharded pass and the numpy kernels use); ``tests/engine/test_grouped.py`` checks the two
agree. Imported on first use (numba costs ~0.15 s to import); compiled with
``cache=True``; ``nogil``: the batch's worker threads run it at once.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["count_batch"]


@njit(cache=True, nogil=True)
def count_batch(S, qc, gc, qid, gid, qidx, gidx, has, above, tied, group, n_valid):
    """For every query row ``i`` of unit ``t`` (``qidx[t, i] >= 0``): over the valid
    columns (``gidx[t, j] >= 0`` and a different id), the best relevant score (same label
    code; NaN if any relevant score is NaN, as numpy's max), then the non-relevant
    scores above and equal to it and the relevant ones equal to it. Fills the outputs
    (B, mq) in place; rows of padding keep theirs."""
    B, mq, mg = S.shape
    for t in range(B):
        for i in range(mq):
            if qidx[t, i] < 0:
                continue
            code, ident = qc[t, i], qid[t, i]
            # first pass, branch-free: the best relevant score, NaN noted apart
            best = np.float32(-np.inf)
            found = False
            nan = False
            nv = 0
            for j in range(mg):
                ok = (gidx[t, j] >= 0) & (gid[t, j] != ident)
                r = ok & (gc[t, j] == code)
                s = S[t, i, j]
                nv += ok
                found |= r
                nan |= r & (s != s)
                best = s if r & (s > best) else best
            if nan:
                best = np.float32(np.nan)
            a = 0
            e = 0
            g = 0
            for j in range(mg):
                ok = (gidx[t, j] >= 0) & (gid[t, j] != ident)
                r = gc[t, j] == code
                s = S[t, i, j]
                hi = s > best
                eq = s == best
                a += ok & ~r & hi
                e += ok & ~r & eq
                g += ok & r & eq
            has[t, i] = found
            above[t, i] = a
            tied[t, i] = e
            group[t, i] = g
            n_valid[t, i] = nv
