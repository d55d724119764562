"""Where a model runs: torch when it is installed, and the device a name means. What
``embed`` (:mod:`._embed`) and the hub models (:mod:`._hub`) share, in a module below
both (``_embed`` dispatches to ``_hub``, whose models resolve their own device)."""

from __future__ import annotations

from ..errors import BackendError, InputError
from ..options import OPTIONS

__all__ = ["optional_torch", "device_name"]


def optional_torch():
    """The torch module, or None when PyTorch is not installed. Imported here, on first
    use: ``import retrieval_checks`` does not load torch (about 2 s)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def device_name(device: str | None, torch_of=None) -> str:
    """``auto``/None: cuda when available, else cpu; ``numpy`` and ``torch-cpu`` (engine
    backends) mean cpu. An unknown name is an InputError; ``cuda`` without a CUDA device a
    :class:`~retrieval_checks.BackendError`. ``torch_of``: how torch is found (a function
    returning the module or None; :func:`optional_torch` by default), called only for
    ``auto`` and CUDA names: any other name is resolved without importing torch."""
    torch_of = optional_torch if torch_of is None else torch_of
    if device in (None, "", "auto"):
        torch = torch_of()
        return "cuda" if torch is not None and torch.cuda.is_available() else "cpu"
    problem = OPTIONS["device"].problem(device)
    if problem is not None:
        raise InputError(
            f"device={device!r}: {problem} Use 'auto' (CUDA when available), 'cpu' or 'cuda:N'."
        )
    device = device.strip()
    if device in ("numpy", "torch-cpu"):
        return "cpu"
    if device.startswith("cuda") and (
        (torch := torch_of()) is None or not torch.cuda.is_available()
    ):
        raise BackendError(
            f"device={device!r} was asked for but torch sees no CUDA device; use device='cpu' "
            "or 'auto'."
        )
    return device
