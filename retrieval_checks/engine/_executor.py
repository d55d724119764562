"""Block tasks on a ``concurrent.futures.Executor`` (``evaluate(..., executor=pool)``).

The pass's query blocks are independent tasks (:func:`~._blocks.run_block`, with the pass's counter); here
they are submitted to the caller's executor (a ``ThreadPoolExecutor``, a
``ProcessPoolExecutor``, Dask's ``client.get_executor()``...) in groups of consecutive
blocks, and their partial results are merged in block order, so the result is the one
of the sequential pass, bit for bit. Each task gets the prepared problem (process and
remote pools receive a pickled copy: the gallery must fit on every worker) and its own
score buffer, so memory grows by one block's scores per task running at once.

Pair metrics are not run on an executor: their negative tail's threshold passes from
one block to the next, which makes the blocks a sequence.
"""

from __future__ import annotations

import dataclasses

from ..errors import InputError
from ._blocks import Problem, run_block
from ._partial import BlockPartial

__all__ = ["check_executor", "executor_parts"]


def check_executor(executor, pair_specs) -> None:
    """``executor`` is a ``concurrent.futures.Executor`` (has ``submit``), and no pair
    metric is asked for."""
    if not callable(getattr(executor, "submit", None)):
        raise InputError(
            f"executor={executor!r} has no submit(): pass a concurrent.futures.Executor, e.g. "
            "ThreadPoolExecutor(4), ProcessPoolExecutor(4) or a Dask client.get_executor()."
        )
    context = getattr(executor, "_mp_context", None)
    if context is not None and getattr(context, "get_start_method", lambda: None)() == "fork":
        raise InputError(
            "executor is a ProcessPoolExecutor that forks its workers: a child forked from a process "
            "whose OpenMP threads already ran (numba's kernels, torch's matmul) can hang or abort. "
            "Pass mp_context=multiprocessing.get_context('spawn') (or 'forkserver')."
        )
    if pair_specs:
        names = ", ".join(s.name for s in pair_specs)
        raise InputError(
            f"{names}: pair metrics are not run on an executor (their negative tail passes from "
            "block to block); evaluate them without executor=."
        )


def _task(problem: Problem, blocks: list[tuple[int, int]], counter) -> list:
    """One task: consecutive blocks, with this task's own score buffer."""
    with problem.backend.exact_matmul():
        return [run_block(problem, start, stop, counter) for start, stop in blocks]


def _groups(blocks: list, executor) -> list[list]:
    """Consecutive blocks per task: about four tasks per worker where the pool says how
    many it has, else one block per task."""
    workers = getattr(executor, "_max_workers", None)
    per = (
        max(1, -(-len(blocks) // (4 * workers))) if isinstance(workers, int) and workers > 0 else 1
    )
    return [blocks[i : i + per] for i in range(0, len(blocks), per)]


def executor_parts(executor, problem: Problem, counter, blocks: list[tuple[int, int]]):
    """The blocks' partial results, run on ``executor`` and yielded in block order (the
    pass's loop, :func:`._stream.stream`, merges them); unstarted tasks are cancelled
    when the loop stops early."""
    # a copy per task: each gets its own score buffer (a thread pool shares memory)
    groups = _groups(blocks, executor)
    futures = [
        executor.submit(_task, dataclasses.replace(problem, _buffers=None), group, counter)
        for group in groups
    ]
    try:
        for group, future in zip(groups, futures):
            yield from _checked(future.result(), group, executor)
    finally:
        for future in futures:
            future.cancel()


def _checked(parts, group: list[tuple[int, int]], executor) -> list:
    """The task's partial results, when they are the blocks it was given (a future of
    another executor than concurrent.futures' may resolve to anything: None, another
    task's result); else an InputError naming the blocks and the executor, not a
    TypeError or a merge that blames the library (a new user's trial)."""
    got = (
        [(p.start, p.stop) for p in parts]
        if isinstance(parts, list) and all(isinstance(p, BlockPartial) for p in parts)
        else None
    )
    if got != [tuple(b) for b in group]:
        seen = (
            f"the results of blocks {got}"
            if got is not None
            else f"{type(parts).__name__} {str(parts)[:60]!r}"
        )
        raise InputError(
            f"executor={type(executor).__name__}: the task of query rows {group[0][0]}..{group[-1][1]} "
            f"came back as {seen}, not the results of those blocks. An executor's future must resolve "
            "to what the submitted function returned (concurrent.futures' contract)."
        )
    return parts
