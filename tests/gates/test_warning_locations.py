"""Every warning the library says is attributed to the user's line, however deep the
library's own calls ran (``errors.warn_outside``, the one routine that warns; the
architecture test keeps ``warnings.warn`` out of the rest of the library)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.errors import IntervalWarning


def _small(seed: int):
    rng = np.random.default_rng(seed)
    labels = np.array([0, 0, 1, 1])
    emb = rng.normal(size=(4, 8)).astype(np.float32) + labels[:, None]
    return rc.evaluate(emb, query_labels=labels, metrics=["map", "hit_rate@1"])


@pytest.fixture(scope="module")
def small():
    return _small(0)


def _said(call, category):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    found = [w for w in caught if issubclass(w.category, category)]
    assert found, [str(w.message) for w in caught]
    return found


def test_a_few_units_interval_warns_at_the_callers_line(small):
    found = _said(lambda: rc.bootstrap_interval(small, "map", n_resamples=200), IntervalWarning)
    assert all(w.filename == __file__ for w in found), [(w.filename, w.lineno) for w in found]


def test_a_gap_warns_at_the_callers_line(small):
    found = _said(
        lambda: rc.generalization_gap(small, _small(1), "map", n_resamples=200), IntervalWarning
    )
    assert all(w.filename == __file__ for w in found), [(w.filename, w.lineno) for w in found]


def test_a_gate_warns_at_the_callers_line_through_a_wrapper(small):
    def gate():
        rc.assert_recall_at_least(small, 0.01, k=1, on="interval")

    found = _said(gate, IntervalWarning)
    assert all(w.filename == __file__ for w in found), [(w.filename, w.lineno) for w in found]


def test_a_failing_listener_warns_at_the_gates_caller(small):
    def broken(event):
        raise ValueError("listener bug")

    with rc.gates.listening(broken):
        found = _said(lambda: rc.assert_metric(small, "map", at_least=0.01), RuntimeWarning)
    (w,) = [w for w in found if "listener failed" in str(w.message)]
    assert w.filename == __file__, (w.filename, w.lineno)
