"""Compute backends: where similarity tiles are computed (numpy, torch CPU, torch CUDA)
and how much memory a pass may use."""

from __future__ import annotations

import contextlib
import os
import re

import numpy as np

from ._inputs import as_numpy, is_torch_tensor
from ..errors import BackendError, InputError
from ..options import parse_memory

__all__ = ["Backend", "resolve_backend", "check_device", "parse_memory", "default_memory_budget"]

def _available_ram() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 4 * 2**30


def default_memory_budget(backend: "Backend") -> int:
    """A quarter of free RAM (or free GPU memory), capped at 256 MiB on CPU and 8 GiB on GPU.

    Beyond a few hundred MiB larger tiles stop paying off on CPU; the cap keeps the
    engine a polite neighbour of the model that produced the embeddings.
    """
    if backend.is_cuda:
        import torch

        free, _ = torch.cuda.mem_get_info(backend.device)
        return int(min(free * 0.25, 8 * 2**30))
    return int(max(min(_available_ram() * 0.25, 256 * 2**20), 16 * 2**20))


class Backend:
    """Where tiles are computed. ``kind`` is ``"numpy"`` or ``"torch"``."""

    def __init__(self, kind: str, device=None):
        self.kind = kind
        self.device = device

    @property
    def is_cuda(self) -> bool:
        return self.kind == "torch" and self.device.type == "cuda"

    @property
    def name(self) -> str:
        return "numpy" if self.kind == "numpy" else f"torch:{self.device}"

    # --- arrays ---------------------------------------------------------------
    def native(self, x):
        """The input on this backend's device in its own precision (no float32 cast yet)."""
        if self.kind == "numpy":
            return as_numpy(x, "embeddings")
        import torch

        if not is_torch_tensor(x):
            x = torch.from_numpy(as_numpy(x, "embeddings"))
        return x.detach().to(self.device)

    def float32_into(self, x, out, *, normalize: bool = False, center=None, chunk_bytes: int = 16 * 2**20):
        """``out`` = float32 of x (rows minus ``center``, or divided by their norm), the
        arithmetic done in float64, ``chunk_bytes`` of rows at a time (no full float64
        copy). Normalising before the cast keeps parallel float64 rows identical."""
        rows = max(1, chunk_bytes // (8 * max(int(x.shape[1]), 1)))
        for s in range(0, int(x.shape[0]), rows):
            part = x[s : s + rows]
            p64 = part.astype(np.float64) if self.kind == "numpy" else part.double()
            if center is not None:
                p64 = p64 - center
            if normalize:
                # each row first scaled by a power of two that brings its largest entry
                # into [0.5, 1): exact, so ordinary rows give the very same bits, while
                # rows near 1e200 or 1e-200 no longer overflow or underflow in the norm
                if self.kind == "numpy":
                    _, e = np.frexp(np.abs(p64).max(axis=1))
                    p64 = np.ldexp(p64, -e[:, None])
                    p64 = p64 / np.sqrt(np.einsum("ij,ij->i", p64, p64))[:, None]
                else:
                    import torch

                    _, e = torch.frexp(p64.abs().amax(dim=1))
                    # torch.ldexp multiplies by 2.0**k, which overflows to inf for
                    # k > 1023 (rows of subnormal numbers need k near 1030): two
                    # exact half steps give numpy's np.ldexp bits on every row
                    k = (-e[:, None]).to(torch.int64)
                    half = torch.div(k, 2, rounding_mode="floor")
                    p64 = torch.ldexp(torch.ldexp(p64, half.to(p64.dtype)), (k - half).to(p64.dtype))
                    p64 = p64 / p64.pow(2).sum(dim=1).sqrt()[:, None]
            out[s : s + rows] = p64
        return out

    def mean64(self, x):
        """Column means in float64 (chunked), rounded to integers: subtracting an integer
        keeps integer data exact (and exact ties tied) while removing large offsets."""
        total = None
        rows = max(1, (16 * 2**20) // (8 * max(int(x.shape[1]), 1)))
        for s in range(0, int(x.shape[0]), rows):
            part = x[s : s + rows]
            add = part.astype(np.float64).sum(axis=0) if self.kind == "numpy" else part.double().sum(dim=0)
            total = add if total is None else total + add
        mean = total / int(x.shape[0])
        return np.round(mean) if self.kind == "numpy" else mean.round()

    def sqnorm(self, x):
        if self.kind == "numpy":
            return np.einsum("ij,ij->i", x, x).astype(np.float32)
        return (x * x).sum(dim=1)

    def zeros(self, shape):
        if self.kind == "numpy":
            return np.zeros(shape, np.float32)
        import torch

        return torch.zeros(shape, dtype=torch.float32, device=self.device)

    def empty(self, shape):
        if self.kind == "numpy":
            return np.empty(shape, np.float32)
        import torch

        return torch.empty(shape, dtype=torch.float32, device=self.device)

    def to_numpy(self, x) -> np.ndarray:
        if self.kind == "numpy":
            return x
        return x.detach().cpu().numpy()

    def from_numpy(self, a: np.ndarray):
        if self.kind == "numpy":
            return a
        import torch

        return torch.from_numpy(a).to(self.device)

    # --- the tile -------------------------------------------------------------
    def matmul_into(self, a, b, out) -> None:
        """out = a @ b.T (fixed shapes, so equal pairs give bit-identical scores)."""
        if self.kind == "numpy":
            np.matmul(a, b.T, out=out)
        else:
            import torch

            torch.mm(a, b.T, out=out)

    def neg_l2_inplace(self, S, qn, gn) -> None:
        """S holds q.g; turn it into -||q - g|| = -sqrt(max(|q|^2 + |g|^2 - 2 q.g, 0))."""
        if self.kind == "numpy":
            S *= -2.0
            S += qn[:, None]
            S += gn[None, :]
            np.maximum(S, 0.0, out=S)
            np.sqrt(S, out=S)
            np.negative(S, out=S)
        else:
            S.mul_(-2.0).add_(qn[:, None]).add_(gn[None, :]).clamp_(min=0.0).sqrt_().neg_()

    @contextlib.contextmanager
    def exact_matmul(self):
        """Full-precision float32 matmul on CUDA (no TF32) for the duration of a pass."""
        if not self.is_cuda:
            yield
            return
        import torch

        matmul = torch.backends.cuda.matmul
        if hasattr(matmul, "fp32_precision"):
            old = matmul.fp32_precision
            matmul.fp32_precision = "ieee"
            try:
                yield
            finally:
                matmul.fp32_precision = old
        else:  # pragma: no cover - older torch
            old = matmul.allow_tf32
            matmul.allow_tf32 = False
            try:
                yield
            finally:
                matmul.allow_tf32 = old


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def resolve_backend(device, arrays) -> Backend:
    """``auto``: the CUDA device of CUDA tensors, else CUDA when available, else CPU.

    ``cpu`` computes tiles with torch's CPU BLAS when torch is installed, else with
    numpy's, then runs the compiled (numba, OpenMP) kernels. Measured on this
    project's 2-core AMD machines: numpy's OpenBLAS multiplies slightly faster, but
    its idle pthreads keep spinning after each product and halve the kernels' speed,
    so torch (OpenMP, like numba) is faster overall (6.3 s vs 7.0 s at N=50k, d=128).
    ``torch-cpu`` and ``numpy`` force one of the two. The numbers are the same on
    every backend."""
    if device is None:
        device = "auto"
    if not isinstance(device, str):
        device = str(device)
    torch = _torch()
    if device == "numpy":
        return Backend("numpy")
    if device in ("cpu", "torch-cpu"):
        if torch is None:
            if device == "torch-cpu":
                raise BackendError("device='torch-cpu' needs PyTorch; install torch or use device='numpy'.")
            return Backend("numpy")
        return Backend("torch", torch.device("cpu"))
    if device == "auto":
        if torch is None:
            return Backend("numpy")
        for a in arrays:
            if is_torch_tensor(a) and a.device.type == "cuda":
                return Backend("torch", a.device)
        if torch.cuda.is_available():
            return Backend("torch", torch.device("cuda"))
        return Backend("torch", torch.device("cpu"))
    if device.startswith("cuda"):
        if torch is None:
            raise BackendError(f"device={device!r} needs PyTorch with CUDA; install torch or use device='cpu'.")
        if not torch.cuda.is_available():
            raise BackendError(f"device={device!r} was asked for but torch sees no CUDA device; use device='cpu'.")
        try:
            dev = torch.device(device)
        except RuntimeError:
            raise BackendError(f"device={device!r} is not a valid CUDA device name (e.g. 'cuda' or 'cuda:0').") from None
        return Backend("torch", dev)
    raise InputError(
        f"device={device!r} is unknown; use 'auto', 'cpu', 'torch-cpu', 'cuda', 'cuda:N' or 'numpy'."
    )


def check_device(device) -> str:
    """The name of the backend ``device`` resolves to; raises
    :class:`~retrieval_checks.BackendError` when it is unavailable (CUDA without a GPU,
    torch-cpu without torch) and :class:`~retrieval_checks.InputError` when unknown."""
    return resolve_backend(device, []).name
