"""The task seam: the fused GPU kernels of the tasks beside the pass, grouped recall
and image-text.

The pass's counter is chosen by :func:`._counting.select`; the two tasks that run their
own kernels (:mod:`.gpu._triton_grouped`, :mod:`.gpu._triton_image_text`) are chosen
here, the only other place in the core that names them. Each kernel is imported only
when asked, and each answers with its own self-check (a failure warns and the host path
serves). The kernels import nothing above the counters: what they need from the engine
above (the image-text fold's preparation) is handed to them from here.
"""

from __future__ import annotations

import time

import numpy as np

from ._blocks import RelevanceSource
from ._first_ranks import first_relevant_ranks
from ._inputs import Csr
from ._plan import plan_pass, prepare_problem

__all__ = ["benchmark_image_text", "fused_image_text", "grouped_kernel", "prepare_image_text"]


def grouped_kernel(backend, similarity: str):
    """Grouped recall's fused kernel (``fused=`` of
    :func:`._grouped.grouped_recall_values`) where it runs (``RC_TRITON`` on CUDA; the
    kernel's CPU tests), else None: the prepared device tensors are then handed over as
    they are. The kernel answers with its name (``"triton-grouped"``) for each
    partition it fills, which the result's provenance records (``grouped``); a partition
    it does not fill is recorded under the host path that scored it."""
    from .gpu._triton import check_switches
    from .gpu._triton_grouped import fused_groups, usable

    check_switches()  # on every device: a typo is an error where it is set
    return fused_groups if usable(backend, similarity) else None


def fused_image_text(images, captions, cap_image, **common):
    """Both directions' first relevant ranks of one image-text fold in one fused pass,
    ``(i2t, t2i, backend name)``, or None where the fused kernel does not serve."""
    from .gpu._triton import check_switches
    from .gpu._triton_image_text import fused_fold

    check_switches()  # on every device: a typo is an error where it is set
    return fused_fold(images, captions, cap_image, prepare=prepare_image_text, **common)


def prepare_image_text(images, captions, cap_image, similarity, device, max_memory):
    """The i2t pass's problem (images the queries, captions the gallery): the same plan
    and float32 copies as :func:`._first_ranks.first_relevant_ranks` makes
    (the fused image-text kernel runs on it)."""
    n_i, n_c, d = int(images.shape[0]), int(captions.shape[0]), int(images.shape[1])
    per_image = np.bincount(cap_image, minlength=n_i)
    indptr = np.zeros(n_i + 1, np.int64)
    np.cumsum(per_image, out=indptr[1:])
    rel = Csr(indptr, np.argsort(cap_image, kind="stable").astype(np.int64))
    own = Csr(np.zeros(n_i + 1, np.int64), np.zeros(0, np.int64))
    plan = plan_pass(
        [images, captions],
        n_q=n_i,
        n_g=n_c,
        d=d,
        loo=False,
        n_relevant=per_image,
        device=device,
        max_memory=max_memory,
    )
    return prepare_problem(
        plan,
        images,
        captions,
        n_g=n_c,
        similarity=similarity,
        source=RelevanceSource(csr=rel, self_pairs=own, n_g=n_c),
        self_pairs=own,
    )


def benchmark_image_text(
    images, captions, cap_image, *, similarity: str = "cosine", device="cuda", max_memory=None
) -> dict:
    """One fold (every image) both ways, for a benchmark row: ``{"two_pass_s": the
    two existing rank passes, "fused_s": the fused pass (its preparation included, the
    switch bypassed), "same": whether both directions' FirstRanks are equal}``, in
    seconds of wall time (CUDA synchronised). ``cap_image``: each caption's image
    (every image with a caption). On CPU tensors the fused pass runs in Triton's
    interpreter (``TRITON_INTERPRET=1``): small sizes only. The first call on a device
    also compiles the kernels: time a second call."""
    import torch

    from .gpu._triton_image_text import fused_pass

    cap_image = np.asarray(cap_image, np.int64)
    n_i, n_c = int(images.shape[0]), int(captions.shape[0])
    indptr = np.zeros(n_i + 1, np.int64)
    np.cumsum(np.bincount(cap_image, minlength=n_i), out=indptr[1:])
    i2t_rel = Csr(indptr, np.argsort(cap_image, kind="stable").astype(np.int64))
    t2i_rel = Csr(np.arange(n_c + 1, dtype=np.int64), cap_image)
    kw = dict(similarity=similarity, device=device, max_memory=max_memory)

    def sync():
        if torch.cuda.is_available() and str(device).startswith("cuda"):
            torch.cuda.synchronize()

    sync()
    t0 = time.perf_counter()
    want = (
        first_relevant_ranks(images, captions, i2t_rel, **kw)[0],
        first_relevant_ranks(captions, images, t2i_rel, **kw)[0],
    )
    sync()
    t1 = time.perf_counter()
    got = fused_pass(
        prepare_image_text(images, captions, cap_image, similarity, device, max_memory), cap_image
    )
    sync()
    t2 = time.perf_counter()
    same = all(
        np.array_equal(getattr(g, f), getattr(w, f))
        for g, w in zip(got, want)
        for f in ("pessimistic", "optimistic", "group")
    )
    return {"two_pass_s": t1 - t0, "fused_s": t2 - t1, "same": bool(same)}
