"""The fused GPU kernels of the tasks beside the pass: grouped recall and image-text.

The pass's counter is chosen by :func:`._counting.select`; the two tasks that run their
own kernels (:mod:`._triton_grouped`, :mod:`._triton_image_text`) are chosen here, the
only other place in the core that names them. Each kernel is imported only when asked,
and each answers with its own self-check (a failure warns and the host path serves).
"""

from __future__ import annotations

__all__ = ["fused_image_text", "grouped_on_device"]


def grouped_on_device(backend, similarity: str) -> bool:
    """Whether grouped recall runs on its fused kernel (``RC_TRITON`` on CUDA; the
    kernel's CPU tests): the prepared device tensors are then handed over as they are."""
    from ._triton_grouped import usable

    return usable(backend, similarity)


def fused_image_text(images, captions, cap_image, **common):
    """Both directions' first relevant ranks of one image-text fold in one fused pass,
    ``(i2t, t2i, backend name)``, or None where the fused kernel does not serve."""
    from ._triton_image_text import fused_fold

    return fused_fold(images, captions, cap_image, **common)
