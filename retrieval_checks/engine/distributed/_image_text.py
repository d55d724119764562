"""Image-text retrieval sharded over ``torch.distributed`` ranks
(``evaluate_image_text(..., process_group=g)``).

Each rank holds a shard of the images and a shard of the captions, and the global
image index of each of its captions. The caption-to-image map (a few bytes per
caption) is all-gathered; the embeddings are not. Each fold's two directions are two
sharded rank passes (:func:`._sharded.sharded_pass`): image-to-text over the
fold's images (queries) and captions (gallery), text-to-image the other way, each
with the relevance one process would build, so every rank gets the first relevant
ranks of one process, bit for bit, and the folds, values, tie values and bootstrap
intervals follow unchanged.
"""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...metrics._names import parse_metric
from .._backend import default_memory_budget, parse_memory, resolve_backend
from .._blocks import RelevanceSource
from .._inputs import Csr, as_numpy, captioned_images, check_score_range
from .._partial import FirstRanks
from ._comm import Comm
from ._sharded import Layout, joined, on_rank, shard_rows, sharded_pass, whole_dims

__all__ = ["evaluate_image_text_sharded"]


def evaluate_image_text_sharded(
    group,
    images,
    captions,
    caption_image,
    *,
    images_without_captions,
    prepare,
    options: dict,
    similarity,
    device,
    max_memory,
    progress,
    use_kernels: bool = True,
):
    """The sharded front of :func:`~retrieval_checks.evaluate_image_text`. ``prepare``
    checks the options and returns ``finish``, which runs the folds with the sharded
    rank pass; it runs once the ranks talk, so a bad option on one rank raises on
    every rank. ``options``: the other options by name, which every rank must pass
    alike."""
    comm = Comm(group)
    try:
        comm.agree_call("retrieval_checks.evaluate_image_text(..., process_group=g)")
        finish = prepare()
        common = dict(
            similarity=similarity, device=device, max_memory=max_memory, progress=progress
        )
        result = _run(
            comm,
            images,
            captions,
            caption_image,
            images_without_captions,
            finish,
            common,
            use_kernels,
            {"similarity": similarity, "max_memory": max_memory, **options},
        )
        comm.finish()
        return result
    except BaseException as exc:
        comm.fail(exc)
        raise


def _local(comm: Comm, images, captions, caption_image, common: dict) -> dict:
    similarity = common["similarity"]
    if similarity == "hamming":
        raise InputError(
            "similarity='hamming' is not supported by evaluate_image_text with process_group; "
            "evaluate in one process, or use similarity='dot' on +-1 codes (the same ranking)."
        )
    if caption_image is None:
        raise InputError(
            "caption_image is missing: with process_group each rank passes the index of every one of "
            "its captions' images in the whole image set (the repeated-images layout cannot be "
            "detected across ranks)."
        )
    imgs, n_i, d_i = shard_rows(images, on_rank("images", comm), similarity)
    caps, n_c, d_c = shard_rows(captions, on_rank("captions", comm), similarity)
    if n_i and n_c and d_i != d_c:
        raise InputError(
            f"images have dimension {d_i} but captions have dimension {d_c} on rank {comm.rank}; both "
            "must come from the same joint embedding space."
        )
    cap_img = as_numpy(caption_image, "caption_image")
    if cap_img.ndim != 1 or cap_img.shape[0] != n_c:
        raise InputError(
            f"caption_image on rank {comm.rank} must hold one image index per caption of the rank "
            f"({n_c}), got shape {cap_img.shape}."
        )
    if cap_img.size and cap_img.dtype.kind not in "iu":
        raise InputError(
            f"caption_image has dtype {cap_img.dtype}; it holds integer image indices."
        )
    backend = resolve_backend(
        common["device"], [a for a in (imgs, caps) if a is not None], collectives=comm.backend
    )
    return {
        "images": imgs,
        "captions": caps,
        "n_i": n_i,
        "n_c": n_c,
        "d": d_i if n_i else d_c,
        "cap_img": cap_img.astype(np.int64),
        "backend": backend,
        "budget": parse_memory(common["max_memory"]) or default_memory_budget(backend),
        "cuda": backend.is_cuda,
    }


def _run(
    comm: Comm,
    images,
    captions,
    caption_image,
    images_without_captions,
    finish,
    common: dict,
    use_kernels: bool,
    options: dict,
):
    mine = _local(comm, images, captions, caption_image, common)
    mine["options"] = {k: repr(v) for k, v in options.items()}
    infos = comm.gather_objects(
        {k: mine[k] for k in ("n_i", "n_c", "d", "cap_img", "budget", "options", "cuda")}
    )
    for r, info in enumerate(infos):
        for key, value in infos[0]["options"].items():
            if info["options"][key] != value:
                raise InputError(
                    f"The ranks called evaluate_image_text differently: {key}={info['options'][key]} on "
                    f"rank {r} but {value} on rank 0; pass the same options on every rank."
                )
        if info["cuda"] != infos[0]["cuda"]:
            where = ["the CPU", "CUDA"]
            raise InputError(
                f"The ranks called evaluate_image_text differently: rank {r} computes on "
                f"{where[info['cuda']]}, rank 0 on {where[infos[0]['cuda']]}; pass the same device on "
                "every rank."
            )
    dims = {i["d"] for i in infos if i["n_i"] or i["n_c"]}
    if len(dims) > 1:
        raise InputError(f"The ranks' embeddings have different dimensions ({sorted(dims)}).")
    d = dims.pop() if dims else mine["d"]
    # the scores' range over the whole image and caption sets (a large image on one rank and
    # a large caption on another overflow, though neither shard does alone), as one process
    check_score_range(
        whole_dims(mine["images"], d),
        whole_dims(mine["captions"], d),
        common["similarity"],
        names=("images", "captions"),
        combine=joined(comm),
    )
    img_off = np.concatenate([[0], np.cumsum([i["n_i"] for i in infos])]).astype(np.int64)
    cap_off = np.concatenate([[0], np.cumsum([i["n_c"] for i in infos])]).astype(np.int64)
    cap_img = (
        np.concatenate([i["cap_img"] for i in infos]) if cap_off[-1] else np.zeros(0, np.int64)
    )
    N = int(img_off[-1])
    keep = captioned_images(cap_img, N, images_without_captions, " over the ranks")
    imgs = mine["images"]
    dropped = 0
    if keep is not None:
        lo, hi = int(img_off[comm.rank]), int(img_off[comm.rank + 1])
        imgs = imgs[_index(imgs, np.flatnonzero(keep[lo:hi]))]
        img_off = np.concatenate(
            [
                [0],
                np.cumsum(
                    [int(keep[img_off[r] : img_off[r + 1]].sum()) for r in range(comm.world)]
                ),
            ]
        ).astype(np.int64)
        cap_img = (np.cumsum(keep) - 1)[cap_img]
        dropped, N = N - int(keep.sum()), int(keep.sum())
    budget = infos[0]["budget"]
    fold = _FoldRanker(
        comm,
        imgs,
        mine["captions"],
        img_off,
        cap_off,
        d,
        common,
        mine["backend"],
        budget,
        use_kernels,
    )
    return finish(None, None, cap_img, "indexed", dropped, rank_fold=fold, n_images=N)


def _index(x, idx: np.ndarray):
    if hasattr(x, "device") and not isinstance(x, np.ndarray):
        import torch

        return torch.as_tensor(idx, device=x.device)
    return idx


class _FoldRanker:
    """``rank_fold`` of :func:`.._image_text._evaluate_pairs` over the ranks' shards."""

    def __init__(
        self, comm, images, captions, img_off, cap_off, d, common, backend, budget, use_kernels
    ):
        self.comm, self.images, self.captions = comm, images, captions
        self.img_off, self.cap_off, self.d = img_off, cap_off, d
        self.common, self.budget, self.use_kernels = common, budget, use_kernels
        self.backend = backend  # resolved once, under the group's collectives (_local)

    def __call__(self, _images, _captions, cap_img, a: int, b: int, common: dict):
        r = self.comm.rank
        inside = (cap_img >= a) & (cap_img < b)
        cap_idx = np.flatnonzero(inside)
        local = cap_img[cap_idx] - a
        n_i, n_c = b - a, cap_idx.size
        order = np.argsort(local, kind="stable")
        indptr = np.zeros(n_i + 1, np.int64)
        np.cumsum(np.bincount(local, minlength=n_i), out=indptr[1:])
        i2t_rel = Csr(indptr, order.astype(np.int64))
        t2i_rel = Csr(np.arange(n_c + 1, dtype=np.int64), local.astype(np.int64))
        # this rank's fold images and fold captions, and every rank's counts of them
        i_lo, i_hi = max(a, int(self.img_off[r])), min(b, int(self.img_off[r + 1]))
        img_sizes = [
            max(0, min(b, int(self.img_off[q + 1])) - max(a, int(self.img_off[q])))
            for q in range(self.comm.world)
        ]
        cap_sizes = [
            int(inside[self.cap_off[q] : self.cap_off[q + 1]].sum()) for q in range(self.comm.world)
        ]
        img_f = self.images[i_lo - int(self.img_off[r]) : max(i_lo, i_hi) - int(self.img_off[r])]
        mine = np.flatnonzero(inside[self.cap_off[r] : self.cap_off[r + 1]])
        cap_f = (
            self.captions
            if mine.size == self.captions.shape[0]
            else self.captions[_index(self.captions, mine)]
        )
        i2t, backend = self._first(img_f, cap_f, img_sizes, cap_sizes, i2t_rel)
        t2i, _ = self._first(cap_f, img_f, cap_sizes, img_sizes, t2i_rel)
        return i2t, t2i, local, backend

    def _first(self, queries, gallery, q_sizes, g_sizes, relevance: Csr):
        """:func:`.._evaluate.first_relevant_ranks`, sharded."""
        layout = Layout(
            np.concatenate([[0], np.cumsum(q_sizes)]).astype(np.int64),
            np.concatenate([[0], np.cumsum(g_sizes)]).astype(np.int64),
        )
        n_q, n_g = int(layout.q_off[-1]), int(layout.g_off[-1])
        own = Csr(np.zeros(n_q + 1, np.int64), np.zeros(0, np.int64))
        source = RelevanceSource(csr=relevance, self_pairs=own, n_g=n_g)
        info = {"Q": queries, "G": gallery, "n_q": int(queries.shape[0]), "d": self.d}
        totals, _, plan = sharded_pass(
            self.comm,
            info,
            layout,
            source,
            own,
            d=self.d,
            loo=False,
            n_relevant=np.diff(relevance.indptr),
            query_specs=[parse_metric("mrr")],
            pair_specs=[],
            ties="pessimistic",
            similarity=self.common["similarity"],
            relevance_level=1,
            device=self.backend,
            budget=self.budget,
            tile=None,
            progress=self.common["progress"],
            use_kernels=self.use_kernels,
        )
        first = FirstRanks(
            totals.first_rank["pessimistic"],
            totals.first_rank["optimistic"],
            totals.first_group,
            totals.provenance(),
        )
        return first, plan.backend.name
