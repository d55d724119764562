"""``evaluate(..., executor=pool)``: the query blocks run as tasks on a thread or process
pool and merge in order; the result equals the sequential pass bit for bit (every
value, per-query array and tie value), with a checkpoint too; what cannot run on a
pool is refused."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest
from test_distributed import QUERY_METRICS, _float_problem, _int_problem, _same, _summary

import retrieval_checks as rc


def _problems():
    Q, G, ql, gl, qi, gi = _float_problem(21)
    yield dict(
        queries=Q,
        gallery=G,
        query_labels=ql,
        gallery_labels=gl,
        query_ids=qi,
        gallery_ids=gi,
        metrics=QUERY_METRICS,
        tile=(3, 16),
        empty_queries="skip",
    )
    Qi, Gi, qli, gli, _, _ = _int_problem(22)
    yield dict(
        queries=Gi,
        gallery=None,
        query_labels=gli,
        metrics=QUERY_METRICS,
        similarity="neg_l2",
        ties="average",
        tile=(4, 16),
        empty_queries="skip",
    )


def test_a_thread_pool_gives_the_sequential_result_bit_for_bit():
    with ThreadPoolExecutor(3) as pool:
        for p in _problems():
            _same(_summary(rc.evaluate(**p)), _summary(rc.evaluate(**p, executor=pool)))


@pytest.mark.slow
def test_a_process_pool_gives_the_sequential_result_bit_for_bit(tmp_path):
    """On device="numpy" (the sequential pass too): the spawned workers run the blocks
    with the compiled numba counters, as on the default CPU device, but with numpy's
    products instead of torch's, so each worker spares torch's import (7 -> 4 CPU-s). The
    pool's merge, order and checkpoints do not depend on the device; the default device's
    blocks on an executor are the thread pool test's, and each device's against the
    reference the harness's (tests/engine/test_engine_vs_reference.py)."""
    p = dict(next(_problems()), device="numpy")
    expected = _summary(rc.evaluate(**p))
    # spawn: forking a process that already runs OpenMP threads (numba, torch) is unsafe
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        _same(expected, _summary(rc.evaluate(**p, executor=pool)))
        _same(expected, _summary(rc.evaluate(**p, executor=pool, checkpoint=tmp_path)))
    assert len(list(tmp_path.glob("*.npz"))) == -(-len(p["queries"]) // 3)
    _same(
        expected, _summary(rc.evaluate(**p, checkpoint=tmp_path))
    )  # the pool's blocks resume a plain run


def test_what_cannot_run_on_a_pool_is_refused():
    p = next(_problems())
    with ThreadPoolExecutor(1) as pool:
        with pytest.raises(rc.InputError, match="pair metrics are not run on an executor"):
            rc.evaluate(**dict(p, metrics=["map", "recall_at_precision@0.5"]), executor=pool)
    with pytest.raises(rc.InputError, match="has no submit"):
        rc.evaluate(**p, executor=4)
    # with process_group, executor= is refused once the ranks talk (so on every rank, even when one rank alone
    # passes it: test_distributed.py, test_a_bad_or_differing_option_on_one_rank...); a group that is not one is refused first
    with pytest.raises(rc.InputError, match="needs an initialised torch.distributed"):
        rc.evaluate(**p, executor=ThreadPoolExecutor(1), process_group=object())
    assert np.isfinite(rc.evaluate(**p)["map"])


# device="numpy": on a GPU machine "auto" would not run numba at all, and numpy's products
# (not torch's) spare the child torch's import (5.3 -> 2.7 CPU-s): the same numba kernels
# run, from the pool's threads (without NUMBA_LOCK the child aborts on either device)
_THREADS_SCRIPT = """
import numpy as np
from concurrent.futures import ThreadPoolExecutor
import retrieval_checks as rc
rng = np.random.default_rng(0)
x = rng.standard_normal((1500, 16)).astype(np.float32); y = rng.integers(0, 150, 1500)
codes = rng.integers(0, 2, (1500, 64)).astype(bool)
ref = rc.evaluate(x, query_labels=y, metrics=["map", "mrr"], tile=(16, 512), device="numpy")
refh = rc.evaluate(codes, query_labels=y, metrics=["map"], similarity="hamming", tile=(16, 512), device="numpy")
with ThreadPoolExecutor(4) as pool:
    for _ in range(2):
        r = rc.evaluate(x, query_labels=y, metrics=["map", "mrr"], tile=(16, 512), executor=pool, device="numpy")
        h = rc.evaluate(codes, query_labels=y, metrics=["map"], similarity="hamming", tile=(16, 512), executor=pool, device="numpy")
        assert (r["map"], r["mrr"], h["map"]) == (ref["map"], ref["mrr"], refh["map"])
import numba
print("ok", numba.threading_layer())
"""


@pytest.mark.slow
def test_numba_kernels_from_pool_threads_under_the_workqueue_layer():
    """numba's workqueue threading layer aborts the whole process ("Concurrent access has
    been detected") when two threads launch parallel kernels at once; a fresh CI venv
    picked that layer and died here. The kernels run under one lock: run it in a child."""
    import os
    import subprocess
    import sys

    from retrieval_checks.engine.counting import _kernels

    if _kernels.ACCELERATOR != "numba":
        pytest.skip(f"numba is not the accelerator here: {_kernels.FALLBACK_REASON}")
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue")
    done = subprocess.run(
        [sys.executable, "-c", _THREADS_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["ok", "workqueue"]


def test_a_fork_started_process_pool_is_refused():
    """Forking after OpenMP threads ran (numba, torch) can hang the workers: refused
    before anything is submitted, naming the fix."""
    p = next(_problems())
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        with pytest.raises(rc.InputError, match="get_context\\('spawn'\\)"):
            rc.evaluate(**p, executor=pool)


class _Resolving:
    """An executor whose futures resolve to ``answer(task's own result, task index)``."""

    def __init__(self, answer):
        self.answer, self.n, self.first = answer, 0, None

    def submit(self, fn, *args, **kwargs):
        from concurrent.futures import Future

        result = fn(*args, **kwargs)
        self.first = result if self.first is None else self.first
        future = Future()
        future.set_result(self.answer(self, result, self.n))
        self.n += 1
        return future


@pytest.mark.parametrize(
    "answer, said",
    [
        (lambda ex, r, i: None if i % 2 else r, "came back as NoneType"),
        (lambda ex, r, i: ex.first, r"came back as the results of blocks \[\(0, "),
    ],
)
def test_an_executor_that_breaks_the_futures_contract_is_named(answer, said):
    """A future resolving to None, or to another task's result, is an InputError naming
    the blocks and the executor (it was a TypeError, or a merge error blaming the
    library: a new user's trial)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 32)).astype(np.float32)  # several blocks at 4 MB
    y = rng.integers(0, 50, 3000)
    with pytest.raises(rc.InputError, match=rf"executor=_Resolving: the task .* {said}"):
        rc.evaluate(
            x, query_labels=y, metrics=["map"], max_memory="4MB", executor=_Resolving(answer)
        )
