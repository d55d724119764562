"""The scans' stream compaction and 16-slot placement (``engine/counting/_simd_numba.py``): the
vectorised form (LLVM's compress-store and 16-lane compares, where this machine has
them) and the scalar loop give the same values, in the same order, as numpy's
selection. About 1 s (one compile of each form)."""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from retrieval_checks.engine.counting import _simd_numba as S  # noqa: E402


@numba.njit
def _compact(row, base, width, thr, buf, vector):
    return S.compact_at_least(row, base, width, thr, buf, vector)


@numba.njit
def _compact_lanes(row, base, width, thr, vals, idx, vector):
    return S.compact_lanes_at_least(row, base, width, thr, vals, idx, vector)


@numba.njit
def _place(pads, at, s, vector):
    return S.place16(pads, at, s, vector)


def _rows(rng, n_rows: int):
    """Rows of 0 to 70 scores (whole vectors of 16 lanes, a partial one, none) with
    ties, -inf (masked pairs) and values equal to the threshold."""
    for _ in range(n_rows):
        width = int(rng.integers(0, 71))
        base = int(rng.integers(0, 5))
        row = np.round(rng.standard_normal(base + width + 3), 1).astype(np.float32)
        row[rng.integers(0, row.size, 3)] = -np.inf
        yield row, base, width


@pytest.mark.parametrize("vector", [True, False])
def test_compaction_keeps_the_scores_at_or_above_the_threshold_in_order(vector):
    rng = np.random.default_rng(5)
    for row, base, width in _rows(rng, 150):
        seg = row[base : base + width]
        for thr in (np.float32(np.round(rng.standard_normal(), 1)), np.float32(-np.inf)):
            buf = np.full(width, np.nan, np.float32)
            n = _compact(row, base, width, thr, buf, vector)
            np.testing.assert_array_equal(buf[:n], seg[seg >= thr])
        # a threshold per column, with the columns' numbers
        th = np.round(rng.standard_normal(width), 1).astype(np.float32)
        vals, idx = np.empty(width, np.float32), np.empty(width, np.int32)
        n = _compact_lanes(row, base, width, th, vals, idx, vector)
        want = np.flatnonzero(seg >= th)
        np.testing.assert_array_equal(idx[:n], want)
        np.testing.assert_array_equal(vals[:n], seg[want])


@pytest.mark.parametrize("vector", [True, False])
def test_place16_counts_the_slots_at_or_below_and_equal(vector):
    rng = np.random.default_rng(6)
    for r in range(17):
        pads = np.full(3 * 16, np.inf, np.float32)
        pads[16 : 16 + r] = np.sort(np.round(rng.standard_normal(r), 1))
        row = pads[16 : 16 + r]
        probes = np.concatenate([row, row + 0.05, [-5.0, 5.0], np.round(rng.standard_normal(9), 1)])
        for s in probes.astype(np.float32):
            p, e = _place(pads, 16, s, vector)
            assert (p, e) == (int((row <= s).sum()), int((row == s).sum())), (r, s)


def test_vector_compress_follows_numba_target(monkeypatch):
    """A ``NUMBA_CPU_NAME`` other than the host (portable caches) is believed only with
    its ``NUMBA_CPU_FEATURES``: without ``+avx512f`` the kernels take the scalar loop;
    so do they with the JIT disabled."""
    monkeypatch.setattr(numba.config, "CPU_NAME", "generic")
    monkeypatch.setattr(numba.config, "CPU_FEATURES", "")
    assert S._host_compresses() is False
    monkeypatch.setattr(numba.config, "CPU_FEATURES", "+avx2,+avx512f")
    assert S._host_compresses() is True
    monkeypatch.setattr(numba.config, "DISABLE_JIT", True)  # kernels run as Python
    assert S._host_compresses() is False


def test_without_the_jit_the_scalar_loops_run_as_python():
    """``NUMBA_DISABLE_JIT=1`` (coverage runs): the compaction and the placement run as
    plain Python through their scalar loops and give numpy's selection."""
    row = np.array([0.5, -np.inf, 2.0, 1.0, 3.0] * 5, np.float32)
    buf = np.empty(row.size, np.float32)
    n = S.compact_at_least.py_func(row, 0, row.size, np.float32(1.0), buf, False)
    np.testing.assert_array_equal(buf[:n], row[row >= 1.0])
    pads = np.array([0.5, 1.0, 1.0] + [np.inf] * 13, np.float32)
    assert S.place16.py_func(pads, 0, np.float32(1.0), False) == (3, 2)
