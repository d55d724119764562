"""Whether this Triton's interpreter can run the engine's kernels at all.

Triton 3.6's interpreter converts a loop bound held in a one-element array with ``int()``,
which NumPy >= 2.4 refuses ("only 0-dimensional arrays can be converted to Python
scalars"); the engine's kernels loop ``for k0 in range(0, d, BK)`` over the embedding
dimension, so under that pair every interpreted launch fails (seen on the H200 machine:
triton 3.6.0, numpy 2.5.2). The compiled kernels are unaffected. The interpreter test files
call :func:`interpreter_blocker` after importing triton with ``TRITON_INTERPRET=1`` and
skip with its reason instead of failing on a bug that is not this project's; the pinned
triton (constraints.txt) has no such bug, so CI runs them.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _count_steps(d, BK: tl.constexpr):
    n = 0
    for _ in range(0, d, BK):  # the kernels' loop over the embedding dimension
        n += 1
    return n


@triton.jit
def _probe(out, d, BK: tl.constexpr):
    tl.store(out, _count_steps(d, BK))


@functools.lru_cache(maxsize=None)
def interpreter_blocker() -> str | None:
    """None when the interpreter runs the probe right, else the reason to skip."""
    out = torch.zeros(1, dtype=torch.int32)
    try:
        _probe[(1,)](out, 5, BK=2)
    except Exception as exc:  # the interpreter's own failure, reported as the skip reason
        return (
            f"triton {triton.__version__}'s interpreter cannot run the kernels beside numpy "
            f"{np.__version__} ({type(exc).__name__}: {str(exc)[:160]}); the compiled kernels "
            "are unaffected (their CUDA tests run where a GPU is present)"
        )
    if int(out[0]) != 3:
        return f"triton {triton.__version__}'s interpreter counts a loop wrong ({int(out[0])} != 3)"
    return None
