"""The CPU kernels of the scan, and which implementation runs them.

numba-compiled kernels (:mod:`._kernels_numba`) are the default accelerator. Where
numba cannot be imported (not installed, or not yet released for a new CPython) the
vectorised numpy twins (:mod:`._kernels_numpy`) serve, with the same results bit for
bit; ``RETRIEVAL_CHECKS_KERNELS=numpy`` forces them. :data:`ACCELERATOR` names the one
in use and :data:`FALLBACK_REASON` why numba is not.

All kernels read one query block's similarity tiles, stored as ``S[k, i, j]``: the
score of block row ``i`` against gallery item ``k * c + j``. Pairs that must not be
counted (relevant items, self matches, padding) hold ``-inf`` and are skipped by
every kernel because all thresholds they compare with are finite.

Ties. ``count_above_relevant`` counts the non-relevant scores ``>=`` each relevant
score and, apart, those ``==`` it: a non-relevant item with an equal score ranks
ahead of the relevant one under the pessimistic policy, after it under the
optimistic one, and each ordering of the tie group is equally likely under the
average policy; all three follow from the two counts of one scan.
"""

from __future__ import annotations

import contextlib
import os

from . import _kernels_numpy
from ._kernels_numpy import key_to_float

__all__ = ["count_above_relevant", "collect_rows", "bin_against_sorted", "key_histogram", "key_to_float",
           "ACCELERATOR", "FALLBACK_REASON", "use"]

_STATE: tuple | None = None  # (implementation module, "numba" / "numpy", fallback reason), chosen on first use


def _choose() -> tuple:
    """numba's kernels unless RETRIEVAL_CHECKS_KERNELS=numpy or numba cannot be imported
    (deferred to the first kernel call: importing numba costs ~0.15 s)."""
    if os.environ.get("RETRIEVAL_CHECKS_KERNELS", "").strip().lower() == "numpy":
        return _kernels_numpy, "numpy", "RETRIEVAL_CHECKS_KERNELS=numpy"
    try:
        from . import _kernels_numba
    except Exception as exc:  # ImportError, or numba failing on an interpreter it does not support yet
        return _kernels_numpy, "numpy", f"numba could not be imported ({type(exc).__name__}: {exc})"
    return _kernels_numba, "numba", None


def _state() -> tuple:
    global _STATE
    if _STATE is None:
        _STATE = _choose()
    return _STATE


def __getattr__(name: str):
    """``ACCELERATOR`` (``"numba"`` or ``"numpy"``: the implementation in use) and
    ``FALLBACK_REASON`` (why numba is not, or None), resolved on first access."""
    if name == "ACCELERATOR":
        return _state()[1]
    if name == "FALLBACK_REASON":
        return _state()[2]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def count_above_relevant(S, n_rows, n_cols, rel_ptr, rel_sorted, out, tied, tau, tail_counts):
    _state()[0].count_above_relevant(S, n_rows, n_cols, rel_ptr, rel_sorted, out, tied, tau, tail_counts)


def collect_rows(S, rows, offsets, n_cols, tau, out):
    _state()[0].collect_rows(S, rows, offsets, n_cols, tau, out)


def bin_against_sorted(S, n_rows, n_cols, sorted_values, out):
    _state()[0].bin_against_sorted(S, n_rows, n_cols, sorted_values, out)


def key_histogram(U, n_rows, n_cols, out):
    _state()[0].key_histogram(U, n_rows, n_cols, out)


@contextlib.contextmanager
def use(name: str):
    """Run the kernels of ``name`` (``"numba"`` or ``"numpy"``) inside the block (tests)."""
    global _STATE
    old = _state()
    if name == "numpy":
        impl = _kernels_numpy
    else:
        from . import _kernels_numba as impl
    _STATE = (impl, name, old[2])
    try:
        yield
    finally:
        _STATE = old
