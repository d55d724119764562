"""Compute backends: where similarity tiles are computed (numpy, torch CPU, torch CUDA)
and how much memory a pass may use."""

from __future__ import annotations

import contextlib
import os

import numpy as np

from ..errors import BackendError, InputError
from ..options import parse_memory
from ._inputs import as_numpy, is_torch_tensor
from .counting import _kernels_numpy

__all__ = [
    "Backend",
    "resolve_backend",
    "check_device",
    "check_run_options",
    "parse_memory",
    "default_memory_budget",
    "SCORES_VERSION",
]

# The scores' definition (the products and the epilogues below). Checkpoint fingerprints
# include it, so blocks written by an engine that scored differently are never merged with
# this one's: change it whenever a score may change in any bit (2: cosine factors became
# squared norms, sign(m) sqrt(m|m| / (|q|^2 |g|^2)) in float64).
SCORES_VERSION = "scores-2"


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

    def float32_into(self, x, out, *, center=None, chunk_bytes: int = 16 * 2**20):
        """``out`` = float32 of x (rows minus ``center``), the arithmetic done in
        float64, ``chunk_bytes`` of rows at a time (no full float64 copy). Exact for
        integer data (``center`` holds integers), so exact ties stay tied."""
        rows = max(1, chunk_bytes // (8 * max(int(x.shape[1]), 1)))
        for s in range(0, int(x.shape[0]), rows):
            part = x[s : s + rows]
            p64 = part.astype(np.float64) if self.kind == "numpy" else part.double()
            if center is not None:
                if self.kind == "numpy":
                    p64 = p64 - center
                else:
                    import torch

                    p64 = p64 - torch.as_tensor(center, dtype=p64.dtype, device=p64.device)
            out[s : s + rows] = p64
        return out

    def cosine_rows_into(
        self, x, out, chunk_bytes: int = 16 * 2**20, kernels=None, workers: int = 1
    ) -> np.ndarray:
        """Write the float32 rows cosine multiplies into ``out`` and return their factors
        for the score epilogue (float32, host), all computed on the host in float64, so
        every backend gets the same bits.

        - A row that is a multiple of an integer vector (binary and quantised codes, and
          their multiples by any scale) becomes its primitive integer vector (divided by
          the gcd of its entries) times a power of two: exact. Its factor is its squared
          norm |row|^2 (exact in float32 while the primitive vector's |x|^2 < 2^24),
          used after the product (:meth:`finish_scores`): equal cosines of integer rows
          of any norms give equal scores, and parallel rows become identical.
        - Any other row is normalised in float64 and rounded (parallel rows round to the
          same float32 row); its factor is 1.

        ``kernels``: the module of the per-row steps (:func:`.counting._kernels.cosine_kernels`:
        numba's, one pass each, or numpy's; the same bits); None: numpy's. float32 and
        float64 rows (numpy, or CPU tensors) are read in place; other dtypes go through
        a float64 copy. ``workers`` > 1: the chunks (at least one a worker) on that many
        threads (the kernels release the GIL; each row's steps are its own, so the bits
        are the same: 50k x 128 took 0.062 s on one thread of the 2-core machine)."""
        kernels = _kernels_numpy if kernels is None else kernels
        n, d = int(x.shape[0]), int(x.shape[1])
        factors = np.ones(n, np.float32)
        rows = max(1, chunk_bytes // (8 * max(d, 1)))
        if workers > 1 and n >= 2048:
            rows = min(rows, -(-n // workers))
        else:
            workers = 1

        def chunk(s: int) -> None:
            part = _host_rows(x[s : s + rows])
            m = int(part.shape[0])
            e = np.empty(m, np.int64)
            integral = np.empty(m, bool)
            kernels.cosine_row_scales(part, e, integral)
            block = _host_view(out[s : s + rows])  # written in place where out is on the host
            block = np.empty((m, d), np.float32) if block is None else block
            if integral.any():
                yi = np.ldexp(np.asarray(part[integral], np.float64), (24 - e[integral])[:, None])
                prim = (
                    yi / np.gcd.reduce(np.abs(yi).astype(np.int64), axis=1)[:, None]
                )  # exact integers
                _, e2 = np.frexp(np.abs(prim).max(axis=1))
                v = np.ldexp(prim, -e2[:, None])
                block[integral] = v
                factors[s : s + rows][integral] = _sum_squares(v)
            rest = np.flatnonzero(~integral)
            if rest.size:
                z = np.empty((rest.size, d), np.float64)
                kernels.cosine_scaled_rows(part, e, rest, z)  # exact; no overflow or underflow
                kernels.cosine_divide_rows(z, np.einsum("ij,ij->i", z, z), rest, block)
            if not _shares(block, out):
                out[s : s + rows] = self.from_numpy(block)

        starts = range(0, n, rows)
        if workers == 1 or len(starts) == 1:
            for s in starts:
                chunk(s)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(workers, len(starts))) as pool:
                list(pool.map(chunk, starts))
        return factors

    def sqnorm64(self, x, chunk_bytes: int = 16 * 2**20) -> np.ndarray:
        """Squared row norms of the float32 array ``x`` in float64, on the host, summed
        column after column: the same fixed order on every backend, so every backend gets
        the same bits (exact for integer data below 2**53)."""
        n, d = int(x.shape[0]), int(x.shape[1])
        out = np.zeros(n, np.float64)
        rows = max(1, chunk_bytes // (8 * max(d, 1)))
        for s in range(0, n, rows):
            out[s : s + rows] = _sum_squares(
                np.asarray(self.to_numpy(x[s : s + rows]), dtype=np.float64)
            )
        return out

    def row_factors(self, x, similarity: str, n_rows: int | None = None):
        """The per-row numbers the neg_l2 tile epilogue needs: |x|^2 as float32 on the
        backend (zero beyond the first ``len(x)`` of ``n_rows``); None for dot. (Cosine's
        come from :meth:`cosine_rows_into`.)"""
        if similarity != "neg_l2":
            return None
        sq = self.sqnorm64(x)
        host = np.zeros(n_rows if n_rows is not None else sq.shape[0], np.float32)
        host[: sq.shape[0]] = sq
        return self.from_numpy(host)

    def colsum64(self, x) -> np.ndarray:
        """Column sums in float64 (chunked; each chunk summed on the backend, the chunks
        added on the host in order), as a numpy array. neg_l2's centre is these sums over
        the whole gallery (every rank's, in a sharded pass) divided by its size and
        rounded to integers: subtracting an integer keeps integer data exact (and exact
        ties tied) while removing large offsets."""
        total = np.zeros(int(x.shape[1]), np.float64)
        rows = max(1, (16 * 2**20) // (8 * max(int(x.shape[1]), 1)))
        for s in range(0, int(x.shape[0]), rows):
            part = x[s : s + rows]
            total += (
                part.astype(np.float64).sum(axis=0)
                if self.kind == "numpy"
                else part.double().sum(dim=0).cpu().numpy()
            )
        return total

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

    def finish_scores(self, S, similarity: str, qa, ga) -> None:
        """Turn the products ``S`` = q.g (in place) into scores, with the row factors of
        :meth:`row_factors` (``qa`` over S's rows, ``ga`` over its columns; S may carry
        leading batch axes, the factors then carry them too).

        cosine (factors: squared norms, :meth:`cosine_rows_into`): the cosine
        sign(m) sqrt(m^2 / (|q|^2 |g|^2)) of the product m = q.g, in float64 (m^2 and
        |q|^2 |g|^2 are exact: products of two float32 numbers), one correctly rounded
        division, then a correctly rounded square root and the sign, rounded to float32
        (:func:`cosine_epilogue`). For integer rows the division's operands are exact
        integers (times powers of two), so equal cosines are equal rationals and give
        the same float64 and the same score, whatever the norms, and a larger cosine never
        scores lower (every step is monotone). Rows normalised in float64 (factor 1)
        keep their product m itself.
        neg_l2: -|q - g|^2 = (2 q.g - |g|^2) - |q|^2, clamped at 0 from above: exact for
        integer data (no rounding of a square root or of a difference of large
        squares); ranking by it is ranking by distance, and pair thresholds are mapped
        to it (:func:`~retrieval_checks.metrics._pairs.score_units`). Elementwise IEEE
        operations in a fixed order: the same bits on every backend for the same S."""
        if similarity == "cosine":
            cosine_epilogue(S, qa, ga)
        elif similarity == "neg_l2":
            S *= 2.0
            S -= ga[..., None, :]
            S -= qa[..., :, None]
            if self.kind == "numpy" or isinstance(S, np.ndarray):
                np.minimum(S, 0.0, out=S)
            else:
                S.clamp_(max=0.0)

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


def cosine_epilogue(S, qa, ga, rows_per_step: int | None = None) -> None:
    """``S`` (float32 products m = q.g, numpy or torch, ``(..., r, c)``) becomes the
    cosines ``sign(m) sqrt(m^2 / (qa ga))`` in place, with ``qa`` / ``ga`` the squared
    norms of S's rows / columns (``(..., r)`` / ``(..., c)``; a factor of 0, a padding
    row, counts as 1). The IEEE operations, each correctly rounded, in this order:
    ``x = float64(m)``; ``x * x`` (exact); ``float64(qa) * float64(ga)`` (exact); the
    division; ``sqrt``; the sign of ``m`` (a zero product stays as it is); rounding to
    float32. The fused kernels repeat them (``gpu._triton_kernels.epilogue``). Factors of 1
    on both sides leave ``S`` unchanged (sqrt(m^2) = |m| exactly), so CPU tiles of
    normalised float rows skip the work. Float64 temporaries are bounded: ``rows_per_step``
    rows at a time (default: about 2^16 elements, cache-sized); torch CPU tensors are
    done through numpy views (the same operations; torch's CPU elementwise kernels were
    several times slower here)."""
    if S.ndim > 2:
        for t in range(S.shape[0]):
            cosine_epilogue(S[t], qa[t], ga[t], rows_per_step)
        return
    r, c = int(S.shape[0]), int(S.shape[1])
    step = rows_per_step or max(1, (1 << 16) // max(c, 1))
    if not isinstance(S, np.ndarray) and not S.is_cuda:
        S, qa, ga = S.numpy(), qa.numpy(), ga.numpy()  # views: S is written in place
    if isinstance(S, np.ndarray):
        qa64 = np.asarray(qa, np.float64)
        ga64 = np.asarray(ga, np.float64)
        qa64 = np.where(qa64 == 0, 1.0, qa64)
        ga64 = np.where(ga64 == 0, 1.0, ga64)
        if (qa64 == 1).all() and (ga64 == 1).all():
            return
        buf = np.empty((min(step, r), c), np.float64)
        den = np.empty((min(step, r), c), np.float64)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            for a in range(0, r, step):
                part = S[a : a + step]
                k = part.shape[0]
                x, dn = buf[:k], den[:k]
                x[...] = part
                np.multiply(x, x, out=x)
                np.multiply.outer(qa64[a : a + k], ga64, out=dn)
                np.divide(x, dn, out=x)
                np.sqrt(x, out=x)
                np.copysign(x, part, out=x)
                part[...] = x
        return
    _cosine_epilogue_torch(
        S, qa, ga, rows_per_step or max(1, (1 << 22) // max(c, 1))
    )  # GPU: larger steps


def _cosine_epilogue_torch(S, qa, ga, step: int) -> None:
    """:func:`cosine_epilogue`'s operations with torch (CUDA tensors; tests run it on CPU)."""
    import torch

    r = int(S.shape[0])
    qa64 = qa.double()
    ga64 = ga.double()
    qa64 = torch.where(qa64 == 0, torch.ones_like(qa64), qa64)
    ga64 = torch.where(ga64 == 0, torch.ones_like(ga64), ga64)
    for a in range(0, r, step):
        part = S[a : a + step]
        x = part.double()
        x = (x * x) / (qa64[a : a + step, None] * ga64[None, :])
        part.copy_(x.sqrt_().copysign_(part))


def _host_rows(part) -> np.ndarray:
    """A chunk of rows on the host as float32 or float64 numpy (in place where it is
    one already: a numpy array or a CPU tensor), else a float64 copy (bfloat16 has no
    numpy twin)."""
    if isinstance(part, np.ndarray):
        return part if part.dtype in (np.float32, np.float64) else part.astype(np.float64)
    import torch

    if part.device.type == "cpu" and part.dtype in (torch.float32, torch.float64):
        return part.detach().numpy()
    return part.detach().double().cpu().numpy()


def _host_view(rows):
    """A C-contiguous float32 host array as a numpy view (no copy), else None."""
    if isinstance(rows, np.ndarray):
        ok = rows.dtype == np.float32 and rows.flags.c_contiguous
        return rows if ok else None
    import torch

    if rows.device.type == "cpu" and rows.dtype == torch.float32 and rows.is_contiguous():
        return rows.detach().numpy()
    return None


def _shares(block: np.ndarray, out) -> bool:
    if isinstance(out, np.ndarray):
        return np.shares_memory(block, out)
    return out.device.type == "cpu" and np.shares_memory(block, out.detach().numpy())


def _sum_squares(rows: np.ndarray) -> np.ndarray:
    """Sum of squares of each float64 row, column after column (a fixed order)."""
    acc = np.zeros(rows.shape[0], np.float64)
    for col in np.ascontiguousarray(rows.T):
        acc += col * col
    return acc


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def resolve_backend(device, arrays, *, collectives: str | None = None) -> Backend:
    """``auto``: the CUDA device of CUDA tensors, else CUDA when available, else CPU.
    ``collectives`` names the process group's backend of a sharded call: under one that
    does not carry CUDA tensors (gloo), ``auto`` computes on the CPU unless an input
    already lives on a CUDA device (then the ranks' check names the mismatch). Without
    it, a gloo group on a GPU machine was refused under the default device (found on
    an H200).

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
    if device == "numpy":  # before torch's import: a process that never needs it skips it
        return Backend("numpy")
    torch = _torch()
    if device in ("cpu", "torch-cpu"):
        if torch is None:
            if device == "torch-cpu":
                raise BackendError(
                    "device='torch-cpu' needs PyTorch; install torch or use device='numpy'."
                )
            return Backend("numpy")
        return Backend("torch", torch.device("cpu"))
    if device == "auto":
        if torch is None:
            return Backend("numpy")
        for a in arrays:
            if is_torch_tensor(a) and a.device.type == "cuda":
                return Backend("torch", a.device)
        if torch.cuda.is_available() and collectives in (None, "nccl"):
            return Backend("torch", torch.device("cuda"))
        return Backend("torch", torch.device("cpu"))
    if device.startswith("cuda"):
        if torch is None:
            raise BackendError(
                f"device={device!r} needs PyTorch with CUDA; install torch or use device='cpu'."
            )
        if not torch.cuda.is_available():
            raise BackendError(
                f"device={device!r} was asked for but torch sees no CUDA device; use device='cpu'."
            )
        try:
            dev = torch.device(device)
        except RuntimeError:
            raise BackendError(
                f"device={device!r} is not a valid CUDA device name (e.g. 'cuda' or 'cuda:0')."
            ) from None
        return Backend("torch", dev)
    raise InputError(
        f"device={device!r} is unknown; use 'auto', 'cpu', 'torch-cpu', 'cuda', 'cuda:N' or 'numpy'."
    )


def check_device(device) -> str:
    """The name of the backend ``device`` resolves to; raises
    :class:`~retrieval_checks.BackendError` when it is unavailable (CUDA without a GPU,
    torch-cpu without torch) and :class:`~retrieval_checks.InputError` when unknown."""
    return resolve_backend(device, []).name


def check_tile(tile) -> tuple[int, int]:
    """``tile=``: (query block height, gallery chunk width), two integers >= 1."""
    if (
        not isinstance(tile, (tuple, list))
        or len(tile) != 2
        or not all(
            isinstance(t, (int, np.integer)) and not isinstance(t, bool) and t >= 1 for t in tile
        )
    ):
        raise InputError(
            f"tile={tile!r}: give (query block height, gallery chunk width), two positive integers."
        )
    return int(tile[0]), int(tile[1])


def check_run_options(device, max_memory, progress, tile=None) -> None:
    """Where and how a pass runs, checked before any work (an entry point calls it
    first, so a typo never costs a pass): ``device`` (:func:`check_device`),
    ``max_memory`` (:func:`parse_memory`), ``progress`` (True, False or None) and
    ``tile`` (:func:`check_tile`; None: the planner's)."""
    check_device(device)
    parse_memory(max_memory)
    if progress is not None and not isinstance(progress, bool):
        raise InputError(f"progress={progress!r}: use True, False or None (only on a terminal).")
    if tile is not None:
        check_tile(tile)
