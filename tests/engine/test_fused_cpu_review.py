"""Review of the fused CPU pass (issue review h3): regressions found against the scored
path (``RC_CPU_COUNTER=scored``); the lead fixes them and moves these tests into
tests/engine/test_fused_cpu.py. Reproducers and diagnosis: /tmp/coord7/review.md.

- a pass run from a thread other than the main one, on one worker, leaves that thread
  (and every thread started later) on one torch thread;
- ``result.pr_curve`` is not the scored path's: it keeps the points at or above the
  final negative tail's cut, which depends on how the pass was cut into tasks;
- ``max_memory`` does not bound the fused pass: the one-task pass allows itself at
  least 64 MiB of relevant-pair arrays, and the relevant sweep gathers a whole batch's
  relevant gallery rows (512 rows' items, times d) at once.

Cost: about 6 CPU-s (numba's kernels cached on disk; each test well under 2 s warm).
"""

from __future__ import annotations

import threading
import tracemalloc

import numpy as np
import pytest

import retrieval_checks as rc

torch = pytest.importorskip("torch")
pytest.importorskip("numba")


def _both(monkeypatch, **kw):
    kw.setdefault("device", "cpu")
    kw.setdefault("progress", False)
    monkeypatch.setenv("RC_CPU_COUNTER", "scored")
    scored = rc.evaluate(**kw)
    monkeypatch.setenv("RC_CPU_COUNTER", "fused")
    fused = rc.evaluate(**kw)
    return scored, fused


def _new_thread_threads() -> int:
    seen = []
    t = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    t.start()
    t.join()
    return seen[0]


@pytest.mark.parametrize("similarity", ["cosine", "neg_l2"])
def test_a_pass_on_another_thread_leaves_its_torch_threads(monkeypatch, similarity):
    """A small leave-one-out pass (one panel: the mirrored pass's one worker, and its
    probes, run on the calling thread) evaluated from a thread that is not the main
    one: the calling thread's torch threads, and those of threads started later, are
    what they were. (Fails: _mirror_worker / _relevant_worker / the probes call
    torch.set_num_threads(1) on the caller's thread outside _one_thread_products.)"""
    original = torch.get_num_threads()
    torch.set_num_threads(2)  # the leak shows against any count above 1
    before_main, before_new = torch.get_num_threads(), _new_thread_threads()
    monkeypatch.setenv("RC_CPU_COUNTER", "fused")
    X = np.round(np.random.default_rng(5).standard_normal((40, 6)), 1).astype(np.float32)
    y = np.arange(40) % 4
    seen = {}

    def go():
        seen["before"] = torch.get_num_threads()
        r = rc.evaluate(X, query_labels=y, metrics=["map"], similarity=similarity, device="cpu")
        seen["fused"] = r.provenance.blocks.get("fused-cpu", 0)
        seen["after"] = torch.get_num_threads()

    t = threading.Thread(target=go)
    t.start()
    t.join()
    try:
        assert seen["fused"] >= 1  # the fused counter ran
        assert seen["after"] == seen["before"]
        assert torch.get_num_threads() == before_main
        assert _new_thread_threads() == before_new
    finally:  # put the process default back for the tests after this one
        torch.set_num_threads(original)


def test_a_one_row_block_probed_on_another_thread_leaves_torch_threads(tmp_path):
    """The sibling on the one-sided pass: a checkpointed pass (the plan's blocks: 50,
    50 and 1 rows) from a thread that is not the main one; the last block's probe
    (one worker: on the caller's thread) must not leave threads started later on one
    torch thread. (Fails: _probe's panels() calls torch.set_num_threads(1) there.)"""
    import os

    original = torch.get_num_threads()
    torch.set_num_threads(2)
    rng = np.random.default_rng(5)
    X = np.round(rng.standard_normal((301, 6)), 1).astype(np.float32)
    y = rng.integers(0, 9, 301)
    seen = {}

    def go():
        old = os.environ.get("RC_CPU_COUNTER")
        os.environ["RC_CPU_COUNTER"] = "fused"
        try:
            r = rc.evaluate(
                queries=X[:101],
                query_labels=y[:101],
                gallery=X[101:],
                gallery_labels=y[101:],
                metrics=["map"],
                similarity="neg_l2",
                tile=(50, 200),
                checkpoint=tmp_path / "c",
                device="cpu",
                progress=False,
            )
            seen["fused"] = r.provenance.blocks.get("fused-cpu", 0)
        finally:
            if old is None:
                os.environ.pop("RC_CPU_COUNTER", None)
            else:
                os.environ["RC_CPU_COUNTER"] = old

    t = threading.Thread(target=go)
    t.start()
    t.join()
    try:
        assert seen["fused"] >= 1
        assert _new_thread_threads() == 2
    finally:
        torch.set_num_threads(original)


def test_pr_curve_is_the_scored_paths(monkeypatch):
    """result.pr_curve (the exact pair PR curve where the pass knows it) is the scored
    path's: the curve keeps the points at or above the final negative tail's tau, which
    the fused one-task pass (per-worker tails) and the scored pass's blocks leave at
    different values. (Fails: 100 points scored, 69 fused. The scored path itself gives
    another curve under another tile=/max_memory, against docs/evaluate.md's "the same,
    bit for bit, whatever the budget"; a plan-independent cut, the tail's
    capacity-th largest negative, fixes both.)"""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((3000, 16)).astype(np.float32)
    y = rng.integers(0, 60, 3000)
    kw = dict(queries=X[:1000], query_labels=y[:1000], gallery=X[1000:], gallery_labels=y[1000:])
    scored, fused = _both(monkeypatch, **kw, metrics=["recall_at_precision@0.9"], tile=(64, 512))
    assert fused.provenance.blocks.get("fused-cpu", 0) >= 1
    assert scored["recall_at_precision@0.9"] == fused["recall_at_precision@0.9"]
    assert scored.pr_curve == fused.pr_curve


def test_the_one_task_pass_keeps_to_max_memory(monkeypatch):
    """max_memory=8MB: the fused pass's host arrays (numpy, traced) stay within the
    scored pass's plus the budget. (Fails: _fits_one_task's budget is at least 64 MiB,
    so the one-task pass of 300k relevant pairs holds ~41 MiB against the scored
    pass's ~6 MiB.)"""
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((1000, 32)).astype(np.float32)
    G = rng.standard_normal((3000, 32)).astype(np.float32)
    yq = rng.integers(0, 10, 1000)
    kw = dict(
        queries=Q,
        query_labels=yq,
        gallery=G,
        gallery_labels=rng.integers(0, 10, 3000),
        metrics=["map"],
        device="cpu",
        progress=False,
        max_memory="8MB",
    )
    peaks = {}
    for counter in ("scored", "fused"):
        monkeypatch.setenv("RC_CPU_COUNTER", counter)
        rc.evaluate(**{**kw, "queries": Q[:600], "query_labels": yq[:600]})  # warm
        tracemalloc.start()
        try:
            result = rc.evaluate(**kw)
            peaks[counter] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert result.provenance.blocks.get("fused-cpu", 0) >= 1
    assert peaks["fused"] <= peaks["scored"] + 8 * 2**20, peaks


def test_the_relevant_sweep_gathers_within_the_score_blocks_budget(monkeypatch):
    """Rows of 1,000 relevant items each, few shared (a sub-panel of 32 rows gathers
    ~4,000 gallery rows of d = 256): no buffer the fused pass allocates is larger than
    the largest the scored pass allocates (its score block, which max_memory sizes).
    (Fails: a batch of sub-panels gathers its rows' distinct relevant gallery rows at
    once, ~d / 32 times the score block when rows share few items: 20 MiB against
    2.4 MiB here; 512 rows x R x d x 4 bytes per worker at most.)"""
    import scipy.sparse as sp

    rng = np.random.default_rng(1)
    nq, ng, d, r = 512, 4000, 256, 1000
    Q = rng.standard_normal((nq, d)).astype(np.float32)
    G = rng.standard_normal((ng, d)).astype(np.float32)
    cols = np.concatenate([rng.choice(ng, r, replace=False) for _ in range(nq)])
    rel = sp.csr_matrix(
        (np.ones(nq * r, np.int8), (np.repeat(np.arange(nq), r), cols)), shape=(nq, ng)
    )
    largest = [0]
    for name in ("empty", "zeros"):
        real = getattr(torch, name)

        def spy(*a, _real=real, **k):
            out = _real(*a, **k)
            largest[0] = max(largest[0], out.numel() * out.element_size())
            return out

        monkeypatch.setattr(torch, name, spy)
    kw = dict(queries=Q, gallery=G, relevance=rel, metrics=["map"], max_memory="16MB")
    seen = {}
    for counter in ("scored", "fused"):
        largest[0] = 0
        monkeypatch.setenv("RC_CPU_COUNTER", counter)
        result = rc.evaluate(**kw, device="cpu", progress=False)
        seen[counter] = largest[0]
    assert result.provenance.blocks.get("fused-cpu", 0) >= 1
    assert seen["fused"] <= seen["scored"], {k: f"{v / 2**20:.1f} MiB" for k, v in seen.items()}
