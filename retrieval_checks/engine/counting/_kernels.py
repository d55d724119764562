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
import threading

from . import _kernels_numpy
from ._kernels_numpy import key_to_float

__all__ = [
    "count_above_relevant",
    "collect_rows",
    "bin_against_sorted",
    "key_histogram",
    "key_to_float",
    "cosine_kernels",
    "ACCELERATOR",  # noqa: F822 (served by the module __getattr__)
    "FALLBACK_REASON",  # noqa: F822
    "use",
]

_STATE: tuple | None = (
    None  # (implementation module, "numba" / "numpy", fallback reason), chosen on first use
)

# numba's default threading layer (workqueue) aborts the process when two threads launch
# parallel kernels at once ("Fatal Python error: Aborted"; evaluate(..., executor=a
# ThreadPoolExecutor) did). Every parallel numba kernel of the engine runs under this
# lock; each kernel already uses every core, so nothing is lost.
NUMBA_LOCK = threading.Lock()


def _impl():
    return _state()[0]


def _serial(impl):
    return NUMBA_LOCK if impl is not _kernels_numpy else contextlib.nullcontext()


def _choose() -> tuple:
    """numba's kernels unless RETRIEVAL_CHECKS_KERNELS=numpy or numba cannot be imported
    (deferred to the first kernel call: importing numba costs ~0.15 s)."""
    if os.environ.get("RETRIEVAL_CHECKS_KERNELS", "").strip().lower() == "numpy":
        return _kernels_numpy, "numpy", "RETRIEVAL_CHECKS_KERNELS=numpy"
    try:
        from . import _kernels_numba
    except (
        Exception
    ) as exc:  # ImportError, or numba failing on an interpreter it does not support yet
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
    impl = _impl()
    with _serial(impl):
        impl.count_above_relevant(
            S, n_rows, n_cols, rel_ptr, rel_sorted, out, tied, tau, tail_counts
        )


def collect_rows(S, rows, offsets, n_cols, tau, out):
    impl = _impl()
    with _serial(impl):
        impl.collect_rows(S, rows, offsets, n_cols, tau, out)


def bin_against_sorted(S, n_rows, n_cols, sorted_values, out):
    impl = _impl()
    with _serial(impl):
        impl.bin_against_sorted(S, n_rows, n_cols, sorted_values, out)


def key_histogram(U, n_rows, n_cols, out):
    impl = _impl()
    with _serial(impl):
        impl.key_histogram(U, n_rows, n_cols, out)


def cosine_kernels():
    """The implementation (numba's or numpy's module, the same bits) of the three steps
    that prepare cosine rows (:meth:`.._backend.Backend.cosine_rows_into`):
    ``cosine_row_scales``, ``cosine_scaled_rows``, ``cosine_divide_rows``. Serial
    kernels: no lock."""
    return _impl()


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
