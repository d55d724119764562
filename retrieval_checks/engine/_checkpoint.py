"""Restartable passes (``evaluate(..., checkpoint=DIR)``): finished blocks' partial
results on disk.

Each finished query block's :class:`~._blocks.BlockPartial` is written to ``DIR`` as
one ``.npz`` file, atomically (written under a temporary name, flushed, then renamed),
so a run killed at any moment leaves only whole files. A restarted run with the same
inputs and options reads the leading finished blocks back, merges them in order (the
merge is the one of the original run, so the negative tail and every value come out the
same) and computes the rest. Files are keyed by a **fingerprint** of the inputs'
content, the options and the tile plan, written in ``DIR/<part>.json``: a directory
holding another run's blocks is refused, never mixed in. In a sharded run each rank
keeps its own files (``part`` = ``rank<r>of<W>``), so ``DIR`` may be shared or local.
Only the first pass is checkpointed (the pair metrics' binning pass, when one is
needed, runs again).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import InputError
from ._blocks import BlockPartial

__all__ = ["Checkpoint", "stream_checkpointed"]

_ARRAYS = ("indptr", "rank", "position", "tied", "positives", "negatives", "fixed_fp", "grade", "score")


def _atomic_write(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


class Checkpoint:
    """The finished blocks of one pass under ``directory`` (see the module doc)."""

    def __init__(self, directory, fingerprint: str, part: str = "single"):
        if not isinstance(directory, (str, os.PathLike)):
            raise InputError(f"checkpoint={directory!r}: give a directory path (str or pathlib.Path).")
        self.dir = Path(directory)
        if self.dir.exists() and not self.dir.is_dir():
            raise InputError(f"checkpoint={str(self.dir)!r} is a file; give a directory (it is created if missing).")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.part = part
        self.fingerprint = fingerprint
        manifest = self.dir / f"{part}.json"
        if manifest.exists():
            try:
                stored = json.loads(manifest.read_text()).get("fingerprint")
            except (OSError, ValueError, AttributeError):
                stored = None
            if stored != fingerprint:
                raise InputError(
                    f"checkpoint={str(self.dir)!r} holds the blocks of another run ({manifest.name}: fingerprint "
                    f"{stored} != {fingerprint} of these inputs and options); delete the directory or pass a new one."
                )
        else:
            text = json.dumps({"fingerprint": fingerprint, "part": part}).encode()
            _atomic_write(manifest, lambda fh: fh.write(text))

    def _path(self, start: int) -> Path:
        return self.dir / f"{self.part}-block{start:012d}.npz"

    def finished(self, blocks: list[tuple[int, int]]) -> int:
        """How many leading blocks of ``blocks`` are stored."""
        n = 0
        for start, _ in blocks:
            if not self._path(start).exists():
                break
            n += 1
        return n

    def save(self, part: BlockPartial) -> None:
        arrays = {name: np.asarray(getattr(part, name)) for name in _ARRAYS if getattr(part, name) is not None}
        arrays["bounds"] = np.array([part.start, part.stop], np.int64)
        arrays["negatives_tau"] = np.array(part.negatives_tau, np.float64)
        _atomic_write(self._path(part.start), lambda fh: np.savez(fh, **arrays))

    def load(self, start: int, stop: int) -> BlockPartial:
        try:
            with np.load(self._path(start), allow_pickle=False) as z:
                data = {name: z[name] for name in z.files}
        except (OSError, ValueError) as exc:
            raise InputError(f"checkpoint block {self._path(start)} cannot be read ({exc}); delete it (the block "
                             "is then computed again).") from None
        if tuple(int(v) for v in data["bounds"]) != (start, stop):
            raise InputError(f"checkpoint block {self._path(start)} covers queries {tuple(data['bounds'])}, not "
                             f"{(start, stop)}; delete the directory.")
        part = BlockPartial(start, stop, data["indptr"], data["rank"], data["position"], data["tied"])
        for name in ("positives", "negatives", "fixed_fp", "grade", "score"):
            if name in data:
                setattr(part, name, data[name])
        part.negatives_tau = float(data["negatives_tau"])
        return part


def stream_checkpointed(problem, store: Checkpoint, *, query_specs, pair_specs, n_positive: int, ties: str,
                        progress=None, use_kernels: bool = True, relevance_level: float = 1):
    """:func:`._stream.stream` with the finished blocks read from ``store`` and every
    newly finished block written to it."""
    import math

    from ._blocks import plan_blocks, run_block
    from ._stream import PassTotals, each_block

    if pair_specs and n_positive == 0:
        raise InputError("Pair metrics need at least one relevant (positive) pair; none was found.")
    totals = PassTotals(problem.n_q, query_specs, pair_specs, n_positive, ties, problem.similarity, relevance_level)
    blocks = plan_blocks(problem.n_q, problem.b) if (query_specs or pair_specs) else []
    done = store.finished(blocks)
    for start, stop in blocks[:done]:
        totals.add(store.load(start, stop))
    for start, stop in each_block(problem, blocks[done:], progress):
        part = run_block(
            problem, start, stop, want_pairs=totals.want_pairs,
            tail_tau=totals.tail.tau if totals.tail is not None else -math.inf,
            fixed_thresholds=totals.fixed_f32, use_kernels=use_kernels,
            tail_capacity=totals.tail.capacity if totals.tail is not None else None,
        )
        totals.add(part)
        store.save(part)
    return totals
