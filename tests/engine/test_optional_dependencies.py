"""Optional dependencies: the CPU engine needs neither torch nor numba. Each is blocked
in a fresh interpreter; the numpy kernels also run in-process against numba's.

Cost: about 10 CPU-s, most of it the two fresh interpreters (the point: a module
cannot be un-imported); the property test draws 12 problems beside its examples (40
in its ``_sweep`` twin, ``--rc-exhaustive``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import retrieval_checks as rc
from retrieval_checks.engine.counting import _kernels

_BLOCK = """
import sys

class Block:  # as if the package were not installed: every `import {name}...` fails
    def find_spec(self, name, path=None, target=None):
        if name == "{name}" or name.startswith("{name}."):
            raise ImportError(f"No module named {{name!r}} (blocked for this test)")
        return None

sys.meta_path.insert(0, Block())
"""


def test_everything_cpu_works_without_torch():
    code = _BLOCK.format(name="torch") + textwrap.dedent(
        """
        import numpy as np
        import retrieval_checks as rc

        rng = np.random.default_rng(0)
        y = np.repeat(np.arange(30), 5)
        X = (rng.normal(size=(30, 8))[y] + rng.normal(size=(150, 8))).astype(np.float32)
        r = rc.evaluate(X, query_labels=y, metrics=["map", "map@R", "hit_rate@1", "recall_at_precision@0.5",
                                                    "precision_at_recall@0.5", "grouped_recall@1",
                                                    "discriminant_ratio"], group_size=5)
        assert r.config["backend"] == "numpy", r.config
        assert 0 < r["map"] < 1 and r.intervals["grouped_recall@1"]
        rc.bootstrap_interval(r, "map", n_resamples=200)
        img = rng.normal(size=(40, 8)).astype(np.float32)
        ci = np.repeat(np.arange(40), 3)
        t = rc.evaluate_image_text(img, img[ci] + rng.normal(size=(120, 8)).astype(np.float32), ci, n_resamples=100)
        assert 0 <= t["rsum"] <= 600
        try:
            rc.evaluate(X, query_labels=y, metrics=["map"], device="cuda")
        except rc.BackendError as exc:
            assert "needs PyTorch" in str(exc)
        else:
            raise AssertionError("device='cuda' without torch must fail clearly")
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")


def test_without_numba_the_vectorised_kernels_give_the_same_numbers():
    code = _BLOCK.format(name="numba") + textwrap.dedent(
        """
        import json
        import numpy as np
        import retrieval_checks as rc
        from retrieval_checks.engine.counting import _kernels

        assert _kernels.ACCELERATOR == "numpy" and "numba" in _kernels.FALLBACK_REASON
        rng = np.random.default_rng(1)
        y = np.repeat(np.arange(40), 5)
        X = np.round(rng.normal(size=(200, 8)), 1).astype(np.float32)
        r = rc.evaluate(X, query_labels=y, metrics=METRICS, device="numpy", tile=(32, 48))
        print(json.dumps({m: r[m] for m in METRICS}))
        """
    ).replace("METRICS", repr(_METRICS))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(40), 5)
    X = np.round(rng.normal(size=(200, 8)), 1).astype(np.float32)
    want = rc.evaluate(X, query_labels=y, metrics=_METRICS, device="numpy", tile=(32, 48))
    assert _kernels.ACCELERATOR == "numba"
    assert got == {m: want[m] for m in _METRICS}


_METRICS = [
    "map",
    "map@R",
    "hit_rate@1",
    "recall@5",
    "mrr",
    "medr",
    "recall_at_precision@0.5",
    "precision_at_recall@0.6",
    "pair_f1@t=0.3",
]


NUMPY_VS_NUMBA = dict(
    n=st.integers(4, 90),
    d=st.integers(1, 6),
    classes=st.integers(1, 12),
    block=st.integers(1, 40),
    chunk=st.integers(1, 70),
    decimals=st.integers(0, 2),
    seed=st.integers(0, 10_000),
    similarity=st.sampled_from(["cosine", "dot", "neg_l2"]),
    ties=st.sampled_from(["pessimistic", "optimistic"]),
)


@settings(max_examples=12, deadline=None)
@given(**NUMPY_VS_NUMBA)  # and every similarity, every policy, several blocks and chunks:
@example(
    n=60,
    d=3,
    classes=5,
    block=7,
    chunk=9,
    decimals=1,
    seed=1,
    similarity="cosine",
    ties="pessimistic",
)
@example(
    n=45,
    d=2,
    classes=4,
    block=40,
    chunk=11,
    decimals=0,
    seed=2,
    similarity="dot",
    ties="optimistic",
)
@example(
    n=33,
    d=4,
    classes=3,
    block=5,
    chunk=70,
    decimals=1,
    seed=3,
    similarity="neg_l2",
    ties="pessimistic",
)
def test_numpy_kernels_equal_numba_kernels(
    n, d, classes, block, chunk, decimals, seed, similarity, ties
):
    """The three examples and twelve drawn problems; 40 in the exhaustive sweep below."""
    check_numpy_vs_numba(n, d, classes, block, chunk, decimals, seed, similarity, ties)


@pytest.mark.exhaustive
@settings(max_examples=40, deadline=None)
@given(**NUMPY_VS_NUMBA)
def test_numpy_kernels_equal_numba_kernels_sweep(
    n, d, classes, block, chunk, decimals, seed, similarity, ties
):
    check_numpy_vs_numba(n, d, classes, block, chunk, decimals, seed, similarity, ties)


def check_numpy_vs_numba(n, d, classes, block, chunk, decimals, seed, similarity, ties):
    n = max(n, 6)  # recall@5 needs 5 candidates
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, d)), decimals).astype(np.float32)
    X[np.abs(X).sum(axis=1) == 0, 0] = 1.0  # cosine needs non-zero rows
    y = rng.integers(0, classes, n)
    if np.bincount(y).max() < 2:
        y[1] = y[0]
    kw = dict(
        query_labels=y,
        metrics=_METRICS,
        similarity=similarity,
        ties=ties,
        device="numpy",
        tile=(block, chunk),
    )
    want = rc.evaluate(X, **kw)
    with _kernels.use("numpy"):
        got = rc.evaluate(X, **kw)
    for m in _METRICS:
        assert got[m] == want[m] or (np.isnan(got[m]) and np.isnan(want[m])), m
    assert got.thresholds == want.thresholds
    assert np.array_equal(got.first_relevant_rank, want.first_relevant_rank)
