"""The collectives of a sharded evaluation, over a ``torch.distributed`` process group.

Every data collective is preceded by a **status exchange** (an all-reduce of one
int64 flag): a rank whose local work raised joins the next exchange with its flag
set, every rank then learns which rank failed and why (an all-gather of the
messages) and raises, instead of waiting in a collective that never comes. A rank
that dies outright (killed, out of memory) breaks the group's connections: the
others' next collective fails, and :class:`Comm` turns that into a clear error too
(Gloo reports a closed peer at once; otherwise the group's own ``timeout``, set in
``torch.distributed.init_process_group(timeout=...)``, bounds the wait).
"""

from __future__ import annotations

import numpy as np

from ...errors import BackendError, InputError, RetrievalChecksError

__all__ = ["Comm", "RemoteFailure"]

#: The version of the ranks' message sequence: ranks of different versions refuse each other.
_PROTOCOL = 1


class RemoteFailure(RetrievalChecksError):
    """Raised on the ranks that did not fail, when another rank did."""


def _remote_error(rank: int, kind: str, name: str, text: str) -> RetrievalChecksError:
    message = f"rank {rank} of the process group failed ({name}): {text}"
    if kind == "input":
        return InputError(message)
    if kind == "backend":
        return BackendError(message)
    return RemoteFailure(message)


def _kind(exc: BaseException) -> str:
    if isinstance(exc, InputError):
        return "input"
    if isinstance(exc, BackendError):
        return "backend"
    return "other"


class Comm:
    """A process group's rank, size and collectives (tensors on the group's device:
    the current CUDA device for NCCL, the CPU otherwise). ``done`` is set once the
    ranks have agreed to stop (success or a reported failure): no collective after it."""

    def __init__(self, group):
        try:
            import torch
            import torch.distributed as dist
        except ImportError:  # pragma: no cover - torch is a dependency of the sharded path
            raise BackendError(
                "process_group=... needs PyTorch (torch.distributed); install torch."
            ) from None
        if not dist.is_available() or not dist.is_initialized():
            raise InputError(
                "process_group=... needs an initialised torch.distributed: call "
                "torch.distributed.init_process_group(...) on every rank first (torchrun sets the "
                "environment, the script still calls it)."
            )
        try:
            self.rank = int(dist.get_rank(group))
            self.world = int(dist.get_world_size(group))
            self.backend = str(dist.get_backend(group))
        except (RuntimeError, ValueError, TypeError, AttributeError) as exc:
            raise InputError(
                f"process_group={group!r} is not a torch.distributed process group "
                f"({type(exc).__name__}: {exc}); pass torch.distributed.group.WORLD or a group from "
                "torch.distributed.new_group(...)."
            ) from None
        if self.rank < 0:
            raise InputError(
                "This process is not a member of process_group; call evaluate(..., process_group=g) "
                "only on the ranks of g."
            )
        self.torch, self.dist, self.group = torch, dist, group
        self.device = (
            torch.device("cuda", torch.cuda.current_device())
            if self.backend == "nccl"
            else torch.device("cpu")
        )
        self.done = False
        self.broken = False

    # --- failure handling -------------------------------------------------------
    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, group=self.group, **kwargs)
        except Exception as exc:
            self.broken = True
            raise RemoteFailure(
                f"rank {self.rank}: a collective over process_group failed ({type(exc).__name__}: {exc}); another "
                "rank probably stopped (crashed, killed or timed out): see its log."
            ) from exc

    def sync(self, failure: BaseException | None = None) -> None:
        """The status exchange. Without ``failure``: return if every rank is well,
        else raise the first failing rank's error. With ``failure`` (this rank's own
        exception): tell the others, then return (the caller re-raises)."""
        torch = self.torch
        flag = torch.tensor([0 if failure is None else 1], dtype=torch.int64, device=self.device)
        self._call(self.dist.all_reduce, flag, op=self.dist.ReduceOp.MAX)
        if int(flag.item()) == 0:
            return
        mine = None if failure is None else (_kind(failure), type(failure).__name__, str(failure))
        everyone: list = [None] * self.world
        self._call(self.dist.all_gather_object, everyone, mine)
        self.done = True
        if failure is not None:
            return
        rank, (kind, name, text) = next((r, m) for r, m in enumerate(everyone) if m is not None)
        raise _remote_error(rank, kind, name, text)

    def fail(self, exc: BaseException) -> None:
        """This rank raised ``exc``: report it at the status exchange the others wait in."""
        if self.done or self.broken or isinstance(exc, RemoteFailure):
            return
        try:
            self.sync(exc)
        except RemoteFailure:
            pass

    def finish(self) -> None:
        """The last status exchange: every rank got through (or the failure is raised)."""
        self.sync()
        self.done = True

    # --- the call ------------------------------------------------------------------
    def agree_call(self, call: str) -> None:
        """The first exchange of a sharded call: every rank names the call it makes
        (with the wire protocol's version); ranks that make different calls (one
        ``evaluate``, another ``evaluate_image_text``) would read each other's messages,
        so every rank raises an InputError naming both calls instead."""
        tags = self.gather_objects((call, _PROTOCOL))
        if len(set(tags)) == 1:
            return
        calls: dict = {}
        for r, tag in enumerate(tags):
            calls.setdefault(tag, []).append(r)
        what = "; ".join(
            f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))} called {name}"
            + (f" (retrieval-checks protocol {version})" if len({t[1] for t in tags}) > 1 else "")
            for (name, version), rs in calls.items()
        )
        raise InputError(
            f"The ranks of process_group made different calls: {what}. Every rank must make the same "
            "call (each with its own shard), in the same order, with the same retrieval-checks version."
        )

    # --- data collectives (each after a status exchange) ---------------------------
    def global_rank(self, r: int) -> int:
        return int(self.dist.get_global_rank(self.group, r)) if self.group is not None else r

    def gather_objects(self, obj) -> list:
        """Every rank's ``obj`` (picklable), in rank order."""
        self.sync()
        out: list = [None] * self.world
        self._call(self.dist.all_gather_object, out, obj)
        return out

    def broadcast(self, tensor, src: int):
        """``tensor`` (on the group's device) from group rank ``src`` to every rank."""
        self.sync()
        self._call(self.dist.broadcast, tensor, src=self.global_rank(src))
        return tensor

    def all_reduce(self, array, op: str):
        """Element-wise ``"sum"`` or ``"max"`` over ranks; numpy in, numpy out (torch
        tensors too: on the group's device)."""
        self.sync()
        torch = self.torch
        host = isinstance(array, np.ndarray)
        t = torch.from_numpy(np.ascontiguousarray(array)) if host else array
        moved = t.device != self.device
        if moved:
            t = t.to(self.device)
        red = self.dist.ReduceOp.SUM if op == "sum" else self.dist.ReduceOp.MAX
        self._call(self.dist.all_reduce, t, op=red)
        if host:
            return t.cpu().numpy()
        return t.to(array.device) if moved else t

    def all_gather_varlen(self, values: np.ndarray) -> np.ndarray:
        """Every rank's 1-D ``values`` (one dtype everywhere), concatenated in rank order."""
        n = np.array([values.size], np.int64)
        sizes = [int(s) for s in self._gather_fixed(n)]
        width = max(max(sizes), 1)
        pad = np.zeros(width, values.dtype)
        pad[: values.size] = values
        rows = self._gather_fixed(pad).reshape(self.world, width)
        return np.concatenate([rows[r, : sizes[r]] for r in range(self.world)])

    def _gather_fixed(self, values: np.ndarray) -> np.ndarray:
        self.sync()
        torch = self.torch
        t = torch.from_numpy(np.ascontiguousarray(values)).to(self.device)
        out = [torch.empty_like(t) for _ in range(self.world)]
        self._call(self.dist.all_gather, out, t)
        return torch.cat(out).cpu().numpy()
