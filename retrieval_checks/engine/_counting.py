"""The Counter seam: which code counts a block, chosen in one place (:func:`select`).

Every pass (one process, checkpointed, on an executor, sharded over ranks) runs the
same block task (:func:`._blocks.run_block`) with a *counter*. Two shapes:

- a **scored** counter (:mod:`.counting._counters`: :class:`~.counting._counters.CpuCounter` on numba or
  numpy, :class:`~.counting._counters.TorchCounter`) reads a block of scores that the task
  computed and masked;
- a **fused** counter computes its own scores and counts in one go (the Triton kernels
  on CUDA, :mod:`.gpu._triton`; the fused CPU pass, :mod:`.counting._fused_cpu`):
  ``rows(p, want_pairs, binning)`` query rows per task (of the binning pass: ``binning``),
  ``run_block(p, start, stop, pairs)`` the block's
  :class:`~._partial.BlockPartial` or None, ``run_binning(p, start, stop, u, out)``
  True when it added the binning pass's counts; ``fallback`` the scored counter that
  serves a block it returns None (or False) for. Fused counters serve one-process
  passes; a sharded pass gets the scored counter (its phases meet across ranks).

Nothing else in the pass names a kernel family: :func:`select` is the only place that
imports the GPU modules (and only when they may serve).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from .counting._counters import CpuCounter, TorchCounter

__all__ = ["PairRequest", "TritonCounter", "select"]


@dataclass
class PairRequest:
    """What the pair metrics need from a block: every negative ``>= tau`` (``tau``
    raised while at least ``capacity`` negatives stay above it) and the negatives
    ``>=`` each of the ascending float32 ``fixed`` thresholds."""

    tau: float = -math.inf
    fixed: np.ndarray | None = None
    capacity: int | None = None


FUSED_ROWS_MAX = 1 << 16  # query rows per task on the fused kernel


class TritonCounter:
    """The fused Triton kernels (:mod:`.gpu._triton`), where the torch path would run and
    the kernel serves (CUDA by ``RC_TRITON``; CPU tensors only in its tests). Each block
    asks again (a kernel failure warns and hands the block, and the device, back to the
    torch path)."""

    fused = True
    torch_path = True
    name = "triton"

    def __init__(self):
        self.fallback = TorchCounter()

    @staticmethod
    def _serves(p) -> bool:
        from .gpu import _triton

        return _triton.supports(p) and _triton.wanted(p.backend)

    def rows(self, p, want_pairs: bool, binning: bool = False) -> int:
        """Query rows per task: on the fused kernel, which keeps no score block in
        memory, as many rows as the score block's budget holds of the kernel's per-row
        arrays (counts per relevant item, the relevant pairs), up to
        :data:`FUSED_ROWS_MAX`: fewer, larger launches. With pair metrics the plan's
        ``b`` stays: a block's negative tail is bounded by its score block's size.
        Per-query results do not depend on the blocks."""
        if want_pairs or not self._serves(p):
            return p.b
        counts = p.relevant.counts(p.n_q)
        r_max = int(counts.max()) if counts.size else 0
        # bytes: int32 counts and their int64 sums, pair arrays
        per_row = 40 * (r_max + 1) + 64 * r_max + 64
        budget = p.score_block_bytes  # the score block the torch path would hold
        return int(max(p.b, min(p.n_q, FUSED_ROWS_MAX, budget // per_row)))

    def run_block(self, p, start: int, stop: int, pairs: PairRequest | None):
        if not self._serves(p):
            return None
        from .gpu import _triton

        return _triton.guarded(p, start, stop, pairs)

    def run_binning(self, p, start: int, stop: int, sorted_positive, out) -> bool:
        if not self._serves(p):
            return False
        from .gpu import _triton

        return bool(
            _triton.guarded(
                p,
                start,
                stop,
                run=lambda: _triton.run_binning_triton(p, start, stop, sorted_positive, out),
            )
        )


def select(
    backend, similarity: str, relevant=None, *, use_kernels: bool = True, sharded: bool = False
):
    """The counter of a pass on ``backend``: the fused Triton kernels where they serve
    (torch on CUDA with ``RC_TRITON``, or the kernel's CPU tests; one process; the
    problem's ``similarity`` and ``relevant`` source supported), else the vectorised
    torch counter (CUDA, or ``use_kernels=False``), else the CPU kernels (numba, or
    numpy by ``RETRIEVAL_CHECKS_KERNELS=numpy``)."""
    from .gpu import _triton

    _triton.check_switches()  # on every device: a typo is an error where it is set
    torch_path = backend.is_cuda or not use_kernels
    if backend.kind == "torch" and torch_path and not sharded and relevant is not None:
        if _triton.supports(SimpleNamespace(similarity=similarity, relevant=relevant)):
            if _triton.wanted(backend):
                return TritonCounter()
    if backend.kind == "torch" and not torch_path and not sharded:
        from .counting import _fused_cpu  # the fused CPU tile pass (issue 32), where it is wanted

        if _fused_cpu.wanted() and _fused_cpu.supports(backend, similarity, relevant):
            return _fused_cpu.FusedCpuCounter(CpuCounter())
    return TorchCounter() if torch_path else CpuCounter()
