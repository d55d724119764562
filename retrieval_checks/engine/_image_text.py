"""Image-text retrieval: i2t / t2i recall, Rsum and mean recall, with the Flickr30k /
MS-COCO protocols.

Definitions (METRICS.md, "Cross-modal retrieval"). Images and captions, each caption
describing one image (any number of captions per image):

- ``i2t_recall@K``: image queries rank all captions; an image's rank is the best rank
  among its own captions; the fraction of images with that rank <= K. This is
  ``hit_rate@K`` with the image's captions as its relevant items.
- ``t2i_recall@K``: caption queries rank all images; the fraction of captions whose
  image ranks <= K (``hit_rate@K`` with one relevant image).
- ``rsum`` = 100 * (i2t_recall@1 + @5 + @10 + t2i_recall@1 + @5 + @10), in percentage
  points (0-600); ``mean_recall`` = rsum / 6, in percent.
- ``i2t_medr``, ``t2i_medr`` (floor(median of 0-based ranks) + 1) and ``i2t_meanr``,
  ``t2i_meanr`` (mean 1-based rank) of the first relevant item. Unit: rank.

Both directions run on the streaming engine with explicit relevance, so no N x M
matrix exists beyond a tile, on CPU or CUDA, with the engine's exact tie handling. A
K larger than the gallery of a direction counts every item as retrieved (recall 1),
as the papers' evaluation code does.

Protocols: ``5k`` / ``all`` (every image), ``1k`` (exactly 1000 images with their
captions), ``5fold1k`` (exactly 5000 images: five contiguous blocks of 1000 with their
captions; every metric, rsum included, is the mean of its per-fold values). Other image
counts are refused for ``1k`` / ``5fold1k``: images a protocol would not score are
never counted in the result.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from .._suggest import hint
from ..errors import InputError, SelfMatchWarning, warn_outside
from ..metrics._binomial import binomial_floor
from ..metrics._measurement import Measurement
from ..metrics._names import MetricSpec, parse_metric
from ..options import DEFAULTS, check_embedding_ties, check_option
from ._backend import check_run_options
from ._first_ranks import first_relevant_ranks
from ._fused_tasks import fused_image_text
from ._hamming import pack_sides
from ._inputs import (
    Csr,
    as_numpy,
    captioned_images,
    check_embeddings,
    check_score_range,
    is_torch_tensor,
)
from ._result import ByMetric, Provenance, tie_note
from ._slices import SliceSet, make_slices, slice_name
from ._stream import FirstRanks
from .distributed._image_text import evaluate_image_text_sharded

__all__ = ["evaluate_image_text", "ImageTextResult", "IMAGE_TEXT_METRICS"]

IMAGE_TEXT_METRICS = (
    "i2t_recall@1",
    "i2t_recall@5",
    "i2t_recall@10",
    "t2i_recall@1",
    "t2i_recall@5",
    "t2i_recall@10",
    "rsum",
    "mean_recall",
    "i2t_medr",
    "t2i_medr",
    "i2t_meanr",
    "t2i_meanr",
)
_RSUM_K = (1, 5, 10)
_PAPERS_REPEATS = 5  # the repeated layout inferred: each image repeated 5 times (5 captions)
_PROTOCOLS = {"5k": "all", "all": "all", "1k": "1k", "5fold1k": "5fold1k"}


class ImageTextResult(Mapping):
    """Mapping from canonical metric name to value (averaged over folds for 5fold1k).

    ``intervals[name]``: bootstrap interval over images (each image with its
    captions); ``per_fold``: one dict of values per fold; ``n_images``,
    ``n_captions`` (after deduplication), ``layout`` (``"indexed"`` or
    ``"repeated"``), ``protocol``, ``confidence``; ``i2t_ranks`` / ``t2i_ranks``: the
    rank of the first relevant item per image / caption, per fold; ``slices``: with
    ``evaluate_image_text(..., slices=, caption_slices=)``, each slice's metrics on its
    own queries (``result.slices["category=dog"]["rsum"]``; docs/slices.md), else None.

    Built by :func:`~retrieval_checks.evaluate_image_text`; read, not constructed, by
    users.

    Parameters
    ----------
    values:
        ``{canonical name: value}`` (recalls as fractions, ``rsum`` and
        ``mean_recall`` in percentage points, ranks for ``medr`` / ``meanr``).
    intervals:
        ``{name: (low, high)}``: the bootstrap intervals over images.
    per_fold:
        One dict of values per fold.
    n_images, n_captions:
        The numbers of images and of captions (after deduplication).
    layout:
        ``"indexed"`` or ``"repeated"``: how captions map to images.
    protocol:
        The evaluation protocol (``"5k"``, ``"1k"``, ``"5fold1k"``...).
    confidence, n_resamples:
        Of the bootstrap intervals.
    i2t_ranks, t2i_ranks:
        Per fold, the rank of the first relevant item per image / per caption.
    config:
        The options of the evaluation (ties, backend...).
    tie_values, tied_share:
        The values under each tie order; the share of queries whose best relevant item
        ties with a non-relevant one.
    provenance:
        Which counters counted the passes (:class:`~retrieval_checks.engine.Provenance`:
        both directions of every fold added up; ``"triton-image-text"`` counts a fold
        both of whose directions the fused image-text kernel ran), or None.

    Raises
    ------
    KeyError
        ``result[name]`` for a metric it does not hold.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> images = np.eye(4, dtype=np.float32)
    >>> captions = np.repeat(images, 2, axis=0) + 0.1  # two captions per image
    >>> res = rc.evaluate_image_text(images, captions, np.repeat(np.arange(4), 2))
    >>> res["rsum"], res["i2t_recall@1"], res["t2i_medr"]
    (600.0, 1.0, 1.0)
    >>> res.n_images, res.n_captions, res.protocol
    (4, 8, '5k')

    Four perfect images show little: the bootstrap over them is [600, 600], and the
    interval is the sum of the six recalls' exact binomial intervals (4 of 4 images, 8 of
    8 captions):

    >>> [round(v, 1) for v in res.intervals["rsum"]]
    [308.5, 600.0]
    """

    def __init__(
        self,
        values,
        intervals,
        per_fold,
        *,
        n_images,
        n_captions,
        layout,
        protocol,
        confidence,
        n_resamples,
        i2t_ranks,
        t2i_ranks,
        config,
        tie_values=None,
        tied_share: float = 0.0,
        provenance: Provenance | None = None,
    ):
        self._values = ByMetric(values)
        self.intervals = ByMetric(intervals)
        self.per_fold = per_fold
        self.n_images = n_images
        self.n_captions = n_captions
        self.layout = layout
        self.protocol = protocol
        self.confidence = confidence
        self.n_resamples = n_resamples
        self.i2t_ranks = i2t_ranks
        self.t2i_ranks = t2i_ranks
        self.config = config
        self.tie_values = ByMetric(tie_values or {})
        self.tied_share = float(tied_share)
        #: which counters counted the folds' passes (:class:`~retrieval_checks.engine.Provenance`,
        #: both directions and every fold added up), or None where not recorded
        self.provenance = provenance
        #: ``evaluate_image_text(..., slices=, caption_slices=)``: the slices
        #: (:class:`ImageTextSliceSet`), else None
        self.slices = None

    def tie_range(self, name: str) -> tuple[float, float] | None:
        """(lowest, highest) value of ``name`` over every order of tied scores (every
        image-text metric is monotone in rank: the pessimistic and optimistic values)."""
        v = self.tie_values.get(parse_metric(name).name)
        return None if v is None else (v["min"], v["max"])

    def tie_note(self, name: str, tolerance: float | None = None) -> str:
        """A line saying how much ``name`` depends on the order of tied scores, or ""."""
        spec = parse_metric(name)
        return tie_note(
            spec,
            self.tie_values.get(spec.name),
            self.config.get("ties"),
            f"{self.tied_share:.1%} of queries' best relevant item ties with a non-relevant one",
            tolerance,
        )

    def __getitem__(self, name: str) -> float:
        return self._values[name]  # aliases resolve to canonical names

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def units(self) -> dict[str, str]:
        return {n: parse_metric(n).unit for n in self._values}

    def __contains__(self, name: object) -> bool:
        try:
            self._values[name]
        except (KeyError, TypeError):
            return False
        return True

    def measure(self, name: str) -> Measurement:
        """The :class:`~retrieval_checks.metrics.Measurement` of one computed metric."""
        spec = parse_metric(name)
        value = self._values[spec.name]
        low, high = self.intervals.get(spec.name, (None, None))
        details = ()
        if spec.family in ("rsum", "mean_recall"):
            parts = ", ".join(
                f"{k} {self._values[k] * 100:.1f}"
                for d in ("i2t", "t2i")
                for k in (f"{d}_recall@1", f"{d}_recall@5", f"{d}_recall@10")
                if k in self._values
            )
            details = (f"components (percent): {parts}",) if parts else ()
        note = self.tie_note(spec.name)
        details += (note,) if note else ()
        extra = {}
        if spec.name in self.tie_values:
            extra = {
                "tie_range": list(self.tie_range(spec.name)),
                "tied_share": self.tied_share,
                "ties": self.config.get("ties"),
            }
        has = low is not None and math.isfinite(low)
        # the dropped images are image queries (i2t, and rsum / mean_recall that add i2t up);
        # a t2i metric's queries are the captions, none of which was dropped
        dropped = 0 if spec.name.startswith("t2i_") else self.dropped_images()
        sample = f"{self.n_images} images, {self.n_captions} captions, protocol {self.protocol}"
        if dropped:  # images_without_captions="drop": skipped image queries, as evaluate's
            sample += f"; {dropped} images without a caption dropped (not scored)"
        return Measurement(
            metric=spec.name,
            value=float(value),
            unit=spec.unit,
            higher_is_better=spec.higher_is_better,
            interval=(float(low), float(high)) if has else None,
            confidence=self.confidence if has else None,
            method=f"percentile bootstrap over images, {self.n_resamples} resamples"
            if has
            else None,
            n=self.n_images,
            n_unit="images",
            # dropped images are image queries without a relevant caption: reported (and
            # limited by max_skipped) where the gates report evaluate's skipped queries
            n_used=self.n_images if dropped else None,
            n_skipped=dropped if dropped else None,
            context=dict(self.config.get("context", {})),
            sample=sample,
            details=details,
            extra=extra,
        )

    def dropped_images(self) -> int:
        """Images left out for having no caption (``images_without_captions="drop"``),
        0 when none (and on a slice, whose images were all scored)."""
        config = self.config if isinstance(self.config, dict) else {}
        n = config.get("images_dropped")
        return int(n) if isinstance(n, int) and n > 0 and "slice" not in config else 0

    def self_match_refusal(self) -> str | None:
        """The error a gate gives this result when every caption equals its own image's
        row value for value (image features written as the captions: each caption
        retrieves its image first whatever the model, Rsum 600), else None; a warning
        (:class:`~retrieval_checks.errors.SelfMatchWarning`) counts them when some do."""
        n = int((self.config or {}).get("self_matched", 0) or 0)
        if n == 0 or n != self.n_captions or self.n_images < 2:
            return None
        return f"captions: {self_match_text(n, self.n_captions)}"

    def vacuous(self) -> str | None:
        """Why no gate can judge this result (:meth:`self_match_refusal`), else None:
        the one test gates, baselines and comparisons share
        (:func:`~retrieval_checks.engine._result.refuse_vacuous`)."""
        return self.self_match_refusal()

    def to_dict(self) -> dict[str, Any]:
        return {
            "metrics": dict(self._values),
            "intervals": {k: list(v) for k, v in self.intervals.items()},
            "per_fold": self.per_fold,
            "n_images": self.n_images,
            "n_captions": self.n_captions,
            "layout": self.layout,
            "protocol": self.protocol,
            "confidence": self.confidence,
            "config": dict(self.config),
            "ties": {k: dict(v) for k, v in self.tie_values.items()},
            "tied_share": self.tied_share,
            "provenance": None if self.provenance is None else self.provenance.to_dict(),
            **({} if self.slices is None else {"slices": self.slices.to_dict()}),
        }

    def __repr__(self) -> str:
        dropped = self.dropped_images()
        dropped = f", {dropped} images without a caption dropped" if dropped else ""
        lines = [
            f"ImageTextResult({self.n_images} images, {self.n_captions} captions{dropped}, protocol "
            f"{self.protocol}, {self.layout} layout; {self.confidence:.0%} bootstrap intervals over images)"
        ]
        width = max(len(k) for k in self._values)
        for name, v in self._values.items():
            lo, hi = self.intervals.get(name, (math.nan, math.nan))
            lines.append(f"  {name:<{width}}  {v:9.3f}  [{lo:.3f}, {hi:.3f}]")
        return "\n".join(lines)


def _take(x, idx: np.ndarray):
    """Rows ``idx`` of a numpy array or torch tensor (on its own device)."""
    if is_torch_tensor(x):
        import torch

        return x[torch.as_tensor(idx, device=x.device)]
    return x[idx]


def _dedupe_repeated(images, n_captions: int):
    """Detect the layout where row i of ``images`` belongs to caption i and each image is
    repeated once per caption in consecutive rows; return (unique rows, caption_image)."""
    arr = as_numpy(images, "images")
    if arr.shape[0] != n_captions:
        raise InputError(
            f"caption_image is missing and images has {arr.shape[0]} rows for {n_captions} captions: pass the "
            "image index of every caption, or images repeated once per caption (one row per caption)."
        )
    new_run = np.ones(arr.shape[0], bool)
    new_run[1:] = (arr[1:] != arr[:-1]).any(axis=1)
    starts = np.flatnonzero(new_run)
    caption_image = np.cumsum(new_run) - 1
    layout = "repeated" if starts.size < arr.shape[0] else "indexed"
    if layout == "repeated":
        _check_runs(np.diff(np.append(starts, arr.shape[0])))
    return _take(images, starts), caption_image.astype(np.int64), layout


def _check_runs(lengths: np.ndarray) -> None:
    """The repeated layout tells images apart only by their rows: two neighbouring
    images whose embeddings are equal (an image encoder that collapsed, or near it) read
    as one image with both images' captions, and a constant encoder as one image owning
    every caption (Rsum 600). Papers' evaluation code repeats each image the same number
    of times (5), so runs of unequal length, or a single run, are refused, naming the
    fix: ``caption_image``. Runs of one other length are refused too: runs of 10 rows are
    images of 10 captions or pairs of equal images of 5 (1000 images read as 500, Rsum
    514 for 381), and the rows cannot tell; of 5, the alternative is every five
    neighbouring images equal with one caption each, which only the papers' layout's
    own convention rules out."""
    fix = (
        "pass caption_image (the image index of every caption) with one row of images per "
        "image, which does not depend on telling images apart by their embeddings"
    )
    if lengths.size < 2:
        raise InputError(
            f"images (caption_image=None: one row per caption, each image repeated in consecutive rows) "
            f"holds one distinct row for all {int(lengths[0])} captions: they would all belong to one "
            "image, and every recall would be 1 whatever the model (an image encoder whose output does "
            f"not depend on its input gives this); {fix}."
        )
    sizes, counts = np.unique(lengths, return_counts=True)
    if sizes.size == 1 and int(sizes[0]) != _PAPERS_REPEATS:
        L = int(sizes[0])
        others = [k for k in range(1, L) if L % k == 0]
        alt = ", ".join(
            f"{L // k} equal neighbouring images of {k} caption{'s' if k > 1 else ''}"
            for k in others
        )
        raise InputError(
            f"images (caption_image=None: one row per caption, each image repeated in consecutive rows) "
            f"repeats each of its {int(counts[0])} distinct rows {L} times: that reads as {int(counts[0])} "
            f"images of {L} captions, but each run of {L} equal rows is as well {alt} (equal neighbouring "
            "embeddings: an export that wrote each image twice, a collapsed encoder), and the rows cannot "
            f"tell which; the count would be guessed. The inference serves the papers' layout only (each "
            f"image repeated {_PAPERS_REPEATS} times: Flickr30k and MS-COCO's five captions); {fix}."
        )
    if sizes.size > 1:
        seen = ", ".join(
            f"{int(c)} image{'s' if c != 1 else ''} of {int(z)} rows" for z, c in zip(sizes, counts)
        )
        single = (
            " (one caption per image, with neighbouring images whose embeddings are equal? then "
            "caption_image=numpy.arange(len(images)))"
            if sizes[np.argmax(counts)] == 1
            else ""
        )
        raise InputError(
            f"images (caption_image=None: one row per caption, each image repeated in consecutive rows) "
            f"repeats its images unequally: {seen}{single}. Two neighbouring images with equal embeddings read "
            "as one image with both images' captions (an image encoder that collapsed gives this), so "
            f"this layout needs every image repeated the same number of times; {fix}."
        )


def _certain_k(folds, cap_img) -> dict:
    """The smallest K at which every query of a direction is certain to hit, in every
    fold: ``{"i2t": captions - fewest captions of an image + 1, "t2i": images}``. A
    recall at such a K is 1 whatever the model (the papers' evaluation code counts K
    past the gallery as retrieved, and so does this one), so the gates refuse a
    threshold on it: such a gate could never fail."""
    i2t, t2i = [], []
    for a, b in folds:
        inside = (cap_img >= a) & (cap_img < b)
        n_cap = int(np.count_nonzero(inside))
        per_image = np.bincount(cap_img[inside] - a, minlength=b - a)
        fewest = int(per_image[per_image > 0].min()) if n_cap else 1
        i2t.append(n_cap - fewest + 1)
        t2i.append(b - a)
    return {"i2t": int(max(i2t)), "t2i": int(max(t2i))}


def _fold_slices(n_images: int, protocol: str):
    """The protocol's folds over ``n_images`` images. ``1k`` scores exactly 1000
    images and ``5fold1k`` exactly 5000 (five blocks of 1000): other counts are refused,
    not cut (fail closed: a result over 5600 images that scored 5000, or over 5000 that
    scored 1000, would report images nobody ranked; which images to leave out is the
    user's choice, and says so in the data rather than in a silent slice)."""
    if protocol == "all":
        return [(0, n_images)]
    need, what = (1000, "one block of 1000") if protocol == "1k" else (5000, "five blocks of 1000")
    if n_images < need:
        raise InputError(
            f"protocol={protocol!r} needs exactly {need} images ({what}), got {n_images}; use "
            "protocol='5k' (all images)"
            + (" or '1k'." if protocol == "5fold1k" and n_images >= 1000 else ".")
        )
    if n_images > need:
        raise InputError(
            f"protocol={protocol!r} scores exactly {need} images ({what}) and got {n_images}: the last "
            f"{n_images - need} would not be scored, yet the result would count them. Pass the {need} images "
            f"to score (images[:{need}] with their captions, caption_image indexing them), or "
            "protocol='5k' to score every image"
            + (
                " (or '5fold1k' on 5000 images: the mean of five blocks)."
                if protocol == "1k"
                else "."
            )
        )
    if protocol == "1k":
        return [(0, 1000)]
    return [(1000 * f, 1000 * (f + 1)) for f in range(5)]


def evaluate_image_text(
    images,
    captions,
    caption_image=None,
    *,
    metrics=IMAGE_TEXT_METRICS,
    protocol: str = "5k",
    similarity: str = DEFAULTS["similarity"],
    ties: str = DEFAULTS["ties"],
    images_without_captions: str = "error",
    device=DEFAULTS["device"],
    max_memory=DEFAULTS["max_memory"],
    confidence: float = DEFAULTS["confidence"],
    n_resamples: int = DEFAULTS["n_resamples"],
    seed: int = DEFAULTS["seed"],
    progress: bool | None = None,
    process_group=None,
    slices=None,
    caption_slices=None,
) -> ImageTextResult:
    """Image-to-text and text-to-image retrieval metrics with bootstrap intervals.

    Parameters
    ----------
    images, captions:
        (N x d) image and (M x d) caption embeddings (numpy or torch, any device).
    caption_image:
        The image index of every caption (length M; any number of captions per
        image). ``None``: ``images`` holds one row per caption, each image repeated in
        consecutive rows (the layout of many papers' evaluation code); it is detected
        and deduplicated. Every image must then be repeated 5 times (the papers'
        layout: five captions per image), and the rows must hold more than one image:
        equal neighbouring images (a collapsed encoder, an image written twice) cannot
        be told apart in this layout, so other counts are refused (pass
        ``caption_image``).
    metrics:
        Names from ``IMAGE_TEXT_METRICS`` (any K for the recalls).
    protocol:
        ``"5k"`` / ``"all"`` (every image), ``"1k"`` (exactly 1000 images) or
        ``"5fold1k"`` (exactly 5000: five blocks of 1000); other counts are refused.
    images_without_captions:
        ``"error"`` (default) or ``"drop"`` (the image is removed and counted in
        ``config["images_dropped"]``; the gates report the dropped images as skipped
        queries, ``n_skipped``, and ``max_skipped`` limits them).
    confidence, n_resamples, seed:
        Percentile bootstrap over images, each resampled with all its captions
        (stratified by fold for 5fold1k).
    similarity, ties, device, max_memory, progress:
        As in :func:`retrieval_checks.evaluate`.
    process_group:
        A ``torch.distributed`` process group: each rank passes its shard of the
        images and of the captions, and ``caption_image`` for its captions as indices
        into the whole image set (the shards concatenated in rank order); every rank
        returns the result of one process on the concatenation, bit for bit
        (``docs/distributed.md``).
    slices:
        Per-image metadata (a COCO category...), in the forms of
        :func:`~retrieval_checks.evaluate`'s ``slices=``, one value per row of
        ``images`` as passed (in the repeated layout, the rows of one image carry its
        value). Each slice is its images **with their captions**: ``i2t_*`` over its
        images, ``t2i_*`` over their captions, ``rsum`` / ``mean_recall`` over both;
        ``result.slices`` (docs/slices.md).
    caption_slices:
        Per-caption metadata (one value per caption): slices of caption queries,
        holding the ``t2i_*`` metrics only (``i2t_*`` and ``rsum`` need image
        queries: gating them on a caption slice is refused).

    Returns
    -------
    ImageTextResult
        A mapping from canonical metric name to value (``rsum`` in percentage points,
        0-600; recalls as fractions), with ``intervals``, ``per_fold`` and the
        per-image and per-caption ranks.

    Raises
    ------
    InputError
        Captions pointing at a missing image, images without captions (unless
        ``images_without_captions="drop"``), an image count the protocol cannot use
        whole, an ambiguous repeated layout, mismatched dimensions, or an invalid
        option.
    MetricNameError
        A name that is not an image-text metric.

    Examples
    --------
    Four images and two captions each, every caption close to its own image:

    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> images = np.eye(4, dtype=np.float32)
    >>> captions = np.repeat(images, 2, axis=0) + 0.1
    >>> res = rc.evaluate_image_text(images, captions, np.repeat(np.arange(4), 2),
    ...                              metrics=["i2t_recall@1", "t2i_recall@1", "rsum"])
    >>> res["i2t_recall@1"], res["t2i_recall@1"], res["rsum"]  # rsum: R@1, 5, 10 both ways
    (1.0, 1.0, 600.0)
    """
    common = dict(similarity=similarity, device=device, max_memory=max_memory, progress=progress)

    def checked():
        """The options checked; the function that finishes the evaluation."""
        specs = _parse(metrics)
        check_run_options(device, max_memory, progress)
        protocol_key = _check_options(
            protocol, similarity, ties, images_without_captions, confidence, n_resamples, seed
        )
        return lambda *pairing, rank_fold=None, n_images=None, slicing=None: _evaluate_pairs(
            specs,
            *pairing,
            protocol=protocol,
            protocol_key=protocol_key,
            common=common,
            ties=ties,
            confidence=confidence,
            n_resamples=n_resamples,
            seed=seed,
            rank_fold=rank_fold,
            n_images=n_images,
            slicing=slicing,
        )

    if process_group is not None and (slices is not None or caption_slices is not None):
        raise InputError(
            "slices= / caption_slices= with process_group: each rank holds a shard, so its values would "
            "not line up with the gathered images; evaluate_image_text on one process for slices."
        )
    if (
        process_group is not None
    ):  # checked on every rank once the ranks talk: a bad option raises on all of them
        return evaluate_image_text_sharded(
            process_group,
            images,
            captions,
            caption_image,
            images_without_captions=images_without_captions,
            prepare=checked,
            options=dict(
                metrics=list(metrics) if isinstance(metrics, tuple) else metrics,
                protocol=protocol,
                ties=ties,
                confidence=confidence,
                images_without_captions=images_without_captions,
                n_resamples=n_resamples,
                seed=seed,
            ),
            **common,
        )
    finish = checked()
    slicing = None
    if slices is not None or caption_slices is not None:  # checked before the pass
        slicing = check_image_text_slices(
            slices, caption_slices, int(images.shape[0]), int(captions.shape[0])
        )
    pairing = _pairing(
        images, captions, caption_image, similarity, images_without_captions, rows=slicing
    )
    if slicing is not None:
        pairing, rows = pairing
        slicing = (*slicing, rows)
    matched = 0 if similarity == "hamming" else _self_matched(*pairing[:3])
    if matched:  # before the pass: the warning comes first, and the result records it
        warn_outside(
            SelfMatchWarning(
                f"captions: {self_match_text(matched, int(pairing[2].size))}",
                n_found=matched,
                n_queries=int(pairing[2].size),
            )
        )
    result = finish(*pairing, slicing=slicing)
    if matched:  # a gate refuses a result where every caption is one (absent: none found,
        # or not checked: the sharded pass holds no whole array, Hamming codes)
        result.config["self_matched"] = matched
    return result


def self_match_text(n_found: int, n_captions: int) -> str:
    """What the :class:`~retrieval_checks.errors.SelfMatchWarning` of
    :func:`evaluate_image_text` says, and a gate's refusal when every caption is such a
    row (:meth:`ImageTextResult.self_match_refusal`)."""
    every = n_found == n_captions
    return (
        f"{n_found} of {n_captions} captions equal their own image's row of images, value for value "
        "(the image features written as the captions? an export that saved the image encoder's output "
        "to the captions file gives this): each such caption ranks its image first, and its image ranks it "
        "first, whatever the model"
        + (
            ", so Rsum is 600 for any model and a gate on this result could never fail"
            if every
            else f" (they raise every recall; {n_found / n_captions:.1%} of the captions)"
        )
        + ". Export the text encoder's features as the captions (each caption's own embedding)."
    )


def _self_matched(images, captions, cap_img: np.ndarray) -> int:
    """How many captions equal their own image's row of ``images`` value for value (in
    chunks: no M x d copy beyond a block). Hamming codes are not checked (a perfect
    hashing model gives a caption its image's code)."""
    if is_torch_tensor(images) != is_torch_tensor(captions):
        images, captions = as_numpy(images, "images"), as_numpy(captions, "captions")
    M = int(cap_img.size)
    step = max(1, (1 << 22) // max(1, int(captions.shape[1])))
    n = 0
    for a in range(0, M, step):
        block = captions[a : a + step]
        n += int((block == _take(images, cap_img[a : a + step])).all(1).sum())
    return n


def _evaluate_pairs(
    specs,
    images,
    captions,
    cap_img,
    layout,
    dropped,
    *,
    protocol,
    protocol_key,
    common,
    ties,
    confidence,
    n_resamples,
    seed,
    rank_fold=None,
    n_images=None,
    slicing=None,
) -> ImageTextResult:
    """Folds, both directions' ranks (``rank_fold``: :func:`_rank_fold`, or the sharded
    pass's), values, tie values and bootstrap intervals."""
    similarity = common["similarity"]
    rank_fold = rank_fold or _rank_fold
    N = int(images.shape[0]) if n_images is None else n_images
    folds = _fold_slices(N, protocol_key)
    certain = _certain_k(folds, cap_img)
    ks = sorted({1, 5, 10} | {s.k for s in specs if s.k is not None})
    fold_data, backend, records = [], None, []
    for a, b in folds:
        i2t, t2i, local, backend = rank_fold(images, captions, cap_img, a, b, common)
        records += [i2t.provenance, t2i.provenance]
        fold = _Fold(i2t, t2i, local, b - a, ties, ks)
        fold_data.append(fold)
    # what counted every fold's passes (None: a pass that did not record it)
    provenance = None if any(r is None for r in records) else Provenance.combined(records)
    per_fold = [f.values(specs, ks, np.ones(f.n_images)) for f in fold_data]
    values = {s.name: float(np.mean([f[s.name] for f in per_fold])) for s in specs}
    tie_values, tied_share = _tie_values(specs, ks, fold_data)
    intervals = {}
    if n_resamples:
        boot = _bootstrap(specs, fold_data, ks, n_resamples, np.random.default_rng(seed))
        q = [(1 - confidence) / 2, (1 + confidence) / 2]
        intervals = {name: tuple(float(x) for x in np.quantile(v, q)) for name, v in boot.items()}
        _exact_floors(specs, fold_data, confidence, intervals)
    config = {
        "similarity": similarity,
        "ties": ties,
        "images_dropped": dropped,
        "backend": backend,
        "certain_k": certain,
        "folds": [list(f) for f in folds],
        "seed": seed,
        "confidence": confidence,
        "n_resamples": n_resamples,
    }
    result = ImageTextResult(
        values,
        intervals,
        per_fold,
        n_images=N,
        n_captions=int(cap_img.size),
        layout=layout,
        protocol=protocol,
        confidence=confidence,
        n_resamples=n_resamples,
        i2t_ranks=[f.i2t_first for f in fold_data],
        t2i_ranks=[f.t2i_first for f in fold_data],
        config=config,
        tie_values=tie_values,
        tied_share=tied_share,
        provenance=provenance,
    )
    if slicing is not None:
        img_dims, cap_dims, rows = slicing
        q = QueryRanks(folds, fold_data, cap_img, ties, ks)
        result.slices = image_text_slices(result, q, specs, img_dims, cap_dims, rows)
    return result


def _tie_values(specs, ks, folds) -> tuple[dict, float]:
    """Every metric under the pessimistic and optimistic orders, its min and max (every
    image-text metric is monotone in rank), and the share of queries (both directions)
    whose best relevant item ties with a non-relevant one."""
    out = {s.name: {} for s in specs}
    for policy in ("pessimistic", "optimistic"):
        per_fold = [f.under(policy).values(specs, ks, np.ones(f.n_images)) for f in folds]
        for s in specs:
            out[s.name][policy] = float(np.mean([v[s.name] for v in per_fold]))
    for v in out.values():
        v["min"], v["max"] = (
            min(v["pessimistic"], v["optimistic"]),
            max(v["pessimistic"], v["optimistic"]),
        )
    tied = sum(int((r.pessimistic != r.optimistic).sum()) for f in folds for r in f.first)
    total = sum(int(r.pessimistic.size) for f in folds for r in f.first)
    return out, tied / total if total else 0.0


def _check_options(
    protocol, similarity, ties, images_without_captions, confidence, n_resamples, seed
) -> str:
    """Validate the options; the protocol's canonical key."""
    if not isinstance(protocol, str) or protocol not in _PROTOCOLS:
        raise InputError(
            f"protocol={protocol!r} is not one of '5k', 'all', '1k', '5fold1k'.{hint(protocol, _PROTOCOLS)}"
        )
    if not isinstance(images_without_captions, str) or images_without_captions not in (
        "error",
        "drop",
    ):
        raise InputError(
            f"images_without_captions={images_without_captions!r}: use 'error' or 'drop'."
        )
    check_option("similarity", similarity)
    check_embedding_ties(ties)
    check_option("confidence", confidence)
    check_option("n_resamples", n_resamples)
    check_option("seed", seed)
    return _PROTOCOLS[protocol]


def _pairing(images, captions, caption_image, similarity, images_without_captions, rows=None):
    """Validated embeddings and the image of every caption: (images, captions,
    caption_image, layout, number of images dropped for having no caption). ``rows``
    (the validated slices): also the input row of ``images`` of each image kept, and
    the repeated layout's rows of one image checked to carry one slice value."""
    if similarity == "hamming":
        # validated now, compared in bits; unpacked (bool) so that both sides have one column per bit
        imgs, caps = pack_sides(images, captions, names=("images", "captions"))
        images, captions = imgs.unpacked().astype(bool), caps.unpacked().astype(bool)
    captions = check_embeddings(captions, "captions", similarity=similarity)
    images = check_embeddings(images, "images", similarity=similarity)
    if int(images.shape[1]) != int(captions.shape[1]):
        raise InputError(
            f"images have dimension {int(images.shape[1])} but captions have dimension {int(captions.shape[1])}; "
            "both must come from the same joint embedding space."
        )
    check_score_range(images, captions, similarity, names=("images", "captions"))
    M = int(captions.shape[0])
    if caption_image is None:
        images, cap_img, layout = _dedupe_repeated(images, M)
        if rows is not None:
            check_repeated_rows(rows[0], cap_img)
    else:
        cap_img = as_numpy(caption_image, "caption_image")
        if cap_img.ndim != 1 or cap_img.shape[0] != M:
            raise InputError(
                f"caption_image must hold one image index per caption ({M}), got shape {cap_img.shape}."
            )
        if cap_img.dtype.kind not in "iu":
            raise InputError(
                f"caption_image has dtype {cap_img.dtype}; it holds integer image indices."
            )
        cap_img = cap_img.astype(np.int64)
        layout = "indexed"
    N = int(images.shape[0])
    # the input row of each image: its first row in the repeated layout
    first_rows = (
        np.flatnonzero(np.r_[True, cap_img[1:] != cap_img[:-1]])
        if caption_image is None
        else np.arange(N)
    )
    keep = captioned_images(cap_img, N, images_without_captions)
    if keep is None:
        out = images, captions, cap_img, layout, 0
        return out if rows is None else (out, first_rows)
    remap = np.cumsum(keep) - 1
    out = (
        _take(images, np.flatnonzero(keep)),
        captions,
        remap[cap_img],
        layout,
        N - int(keep.sum()),
    )
    return out if rows is None else (out, first_rows[keep])


def _rank_fold(images, captions, cap_img, a: int, b: int, common: dict):
    """One fold (images a..b-1 with their captions): both directions' first relevant
    ranks (:class:`FirstRanks`) from the engine's rank pass, each caption's image inside
    the fold, and the backend's name."""
    cap_idx = np.flatnonzero((cap_img >= a) & (cap_img < b))
    local = cap_img[cap_idx] - a
    n_i, n_c = b - a, cap_idx.size
    # i2t: image j's relevant captions; t2i: caption i's relevant image
    order = np.argsort(local, kind="stable")
    indptr = np.zeros(n_i + 1, np.int64)
    np.cumsum(np.bincount(local, minlength=n_i), out=indptr[1:])
    i2t_rel = Csr(indptr, order.astype(np.int64))
    t2i_rel = Csr(np.arange(n_c + 1, dtype=np.int64), local.astype(np.int64))
    img_f = images[a:b]
    # every caption, in order (the 5k protocol): no copy
    M = int(captions.shape[0])
    cap_f = (
        captions
        if cap_idx.size == M and (cap_idx == np.arange(M)).all()
        else _take(captions, cap_idx)
    )
    # both directions in one pass where the fused kernel serves (the Counter seam's choice)
    fused = fused_image_text(img_f, cap_f, local, **common)
    if fused is not None:
        i2t, t2i, backend = fused
        # one fused pass for both directions: one block of the image-text kernel
        i2t = dataclasses.replace(i2t, provenance=Provenance({"triton-image-text": 1}))
        t2i = dataclasses.replace(t2i, provenance=Provenance())
    else:
        i2t, backend = first_relevant_ranks(img_f, cap_f, i2t_rel, **common)
        t2i, _ = first_relevant_ranks(cap_f, img_f, t2i_rel, **common)
    return i2t, t2i, local, backend


def _parse(metrics) -> list[MetricSpec]:
    if isinstance(metrics, str):
        metrics = [metrics]
    if not isinstance(metrics, (list, tuple)):
        raise InputError(
            f"metrics must be a name or a list of names, got {type(metrics).__name__}; "
            "e.g. metrics=['rsum', 'i2t_recall@1']."
        )
    specs: dict[str, MetricSpec] = {}
    for m in metrics:
        s = parse_metric(m)
        if s.kind != "crossmodal":
            raise InputError(
                f"{s.name!r} is not an image-text metric; evaluate_image_text computes "
                f"{', '.join(IMAGE_TEXT_METRICS)} (any K for the recalls). Use retrieval_checks.evaluate for {s.name}."
            )
        specs.setdefault(s.name, s)
    if not specs:
        raise InputError("metrics is empty: name at least one image-text metric, e.g. 'rsum'.")
    return list(specs.values())


class _Fold:
    """One fold's first-relevant ranks, sorted once so that replicates only reweight.
    Under ``ties="average"`` a query's rank is its expected first relevant rank and its
    recall@K the probability that the first relevant item is within K (exact over the
    orders of its tie group); medr is then the median of the expected ranks."""

    def __init__(self, i2t: FirstRanks, t2i: FirstRanks, cap_image, n_images, ties: str, ks):
        self.n_images = n_images
        self.ties = ties
        self.first, self.cap_image, self.ks = (i2t, t2i), cap_image, ks
        i2t_rank, t2i_rank = i2t.under(ties), t2i.under(ties)
        # per image / per caption, input order (integers under the two orderings)
        self.i2t_first = i2t_rank if ties == "average" else getattr(i2t, ties)
        self.t2i_first = t2i_rank if ties == "average" else getattr(t2i, ties)
        self.i_order = np.argsort(i2t_rank, kind="stable")
        self.i_rank = i2t_rank[self.i_order]
        self.t_order = np.argsort(t2i_rank, kind="stable")
        self.t_rank = t2i_rank[self.t_order]
        self.t_image = cap_image[self.t_order]  # image of each caption, in rank order
        self.i_hit = self.t_hit = None
        if ties == "average":  # hit probabilities, in the same sorted orders
            self.i_hit = {k: i2t.under(ties, k)[self.i_order] for k in ks}
            self.t_hit = {k: t2i.under(ties, k)[self.t_order] for k in ks}

    def under(self, ties: str) -> "_Fold":
        """The same fold under another tie policy."""
        return (
            self
            if ties == self.ties
            else _Fold(*self.first, self.cap_image, self.n_images, ties, self.ks)
        )

    def _recall(self, side: str, w, k) -> float:
        if self.ties == "average":
            hit = (self.i_hit if side == "i" else self.t_hit)[k]
            return float(np.dot(w, hit) / w.sum())
        return _weighted_recall(self.i_rank if side == "i" else self.t_rank, w, k)

    def hits(self, side: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Each query's recall@k (0 or 1; a probability under ``ties="average"``) and its
        image: images for ``"i"`` (i2t), captions for ``"t"`` (t2i), in rank order."""
        if side == "i":
            hit = self.i_hit[k] if self.ties == "average" else (self.i_rank <= k) * 1.0
            return hit, self.i_order
        hit = self.t_hit[k] if self.ties == "average" else (self.t_rank <= k) * 1.0
        return hit, self.t_image

    def values(self, specs, ks, image_weight: np.ndarray) -> dict[str, float]:
        """All metrics with each image counted ``image_weight`` times (1: the data;
        bootstrap multiplicities: a replicate), each caption as often as its image."""
        wi = image_weight[self.i_order]
        wt = image_weight[self.t_image]
        base = {}
        for k in ks:
            base[f"i2t_recall@{k}"] = self._recall("i", wi, k)
            base[f"t2i_recall@{k}"] = self._recall("t", wt, k)
        rsum = 100.0 * sum(base[f"i2t_recall@{k}"] + base[f"t2i_recall@{k}"] for k in _RSUM_K)
        out = {}
        for s in specs:
            if s.name in base:
                out[s.name] = base[s.name]
            elif s.family == "rsum":
                out[s.name] = rsum
            elif s.family == "mean_recall":
                out[s.name] = rsum / 6.0
            elif s.family == "i2t_medr":
                out[s.name] = _weighted_medr(self.i_rank, wi)
            elif s.family == "t2i_medr":
                out[s.name] = _weighted_medr(self.t_rank, wt)
            elif s.family == "i2t_meanr":
                out[s.name] = float(np.dot(wi, self.i_rank) / wi.sum())
            elif s.family == "t2i_meanr":
                out[s.name] = float(np.dot(wt, self.t_rank) / wt.sum())
        return out


def _weighted_recall(sorted_ranks, w, k) -> float:
    """Weighted fraction of ranks <= k (ranks sorted ascending)."""
    n_within = np.searchsorted(sorted_ranks, k, side="right")
    return float(w[:n_within].sum() / w.sum())


def _weighted_medr(sorted_ranks, w) -> float:
    """floor(median of the 0-based ranks) + 1 of the multiset in which rank i appears
    w[i] times (integer weights; ranks sorted ascending), as numpy's median computes it."""
    cw = np.cumsum(w)
    total = int(round(cw[-1]))

    def at(p):  # the p-th (0-based) element of the expanded sorted multiset
        return sorted_ranks[np.searchsorted(cw, p, side="right")]

    med = at((total - 1) // 2) if total % 2 else (at(total // 2 - 1) + at(total // 2)) / 2
    return float(math.floor(med - 1) + 1)


def _exact_floors(specs, folds, confidence: float, intervals: dict) -> None:
    """Widen each recall's bootstrap interval, in place, to contain the exact binomial
    interval of its hits (:func:`..metrics._binomial.binomial_floor`, a recall being a
    proportion: a bootstrap of images that all hit is [1, 1]). i2t: the images are the
    queries; t2i: the captions (taken as independent: a floor under the bootstrap over
    images)."""

    parts: dict = {}

    def hits(side: str, k: int) -> list:  # each fold's (hits, image), once a recall
        if (side, k) not in parts:
            parts[side, k] = [f.hits(side, k) for f in folds]
        return parts[side, k]

    def floored(side: str, k: int, low: float, high: float) -> tuple[float, float]:
        x = np.concatenate([hit for hit, _ in hits(side, k)])
        low, high, _ = binomial_floor(x, (0.0, 1.0), confidence, low, high, True)
        return low, high

    def shortfall(side: str, k: int) -> float:
        """How far the recall's images are from all hitting, in images (t2i: the sum
        over images of the share of their captions missed)."""
        if side == "i":
            return float(sum(hit.size - hit.sum() for hit, _ in hits(side, k)))
        total = 0.0
        for (hit, img), f in zip(hits(side, k), folds):
            n_cap = np.bincount(img, minlength=f.n_images)
            got = np.bincount(img, weights=hit, minlength=f.n_images)
            total += float(((n_cap - got) / np.maximum(n_cap, 1)).sum())
        return total

    for s in specs:
        side = {"i2t_recall": "i", "t2i_recall": "t"}.get(s.family)
        if side is not None and s.name in intervals:
            intervals[s.name] = floored(side, s.k, *intervals[s.name])
    # a sum of the six recalls whose images are all within one image of hitting (every
    # image and caption of a perfect model): the sum of their exact intervals' ends
    # (each recall's own value as the point it widens from), not the bootstrap's
    # [600, 600], or its [580, 600] when one caption of 100 misses
    sums = [s for s in specs if s.family in ("rsum", "mean_recall") and s.name in intervals]
    pairs = [(side, k) for side in ("i", "t") for k in _RSUM_K]
    if not sums or any(shortfall(side, k) > 1.0 for side, k in pairs):
        return
    ends = []
    for side, k in pairs:
        value = float(np.concatenate([hit for hit, _ in hits(side, k)]).mean())
        ends.append(floored(side, k, value, value))
    for s in sums:
        scale = 100.0 if s.family == "rsum" else 100.0 / 6.0
        low, high = intervals[s.name]
        intervals[s.name] = (
            min(low, scale * sum(e[0] for e in ends)),
            max(high, scale * sum(e[1] for e in ends)),
        )


def _bootstrap(specs, folds, ks, n_resamples, rng) -> dict[str, np.ndarray]:
    """Percentile-bootstrap replicates: images resampled with replacement inside each
    fold, each with all its captions (weights = how often its image was drawn)."""
    reps = {s.name: np.empty(n_resamples) for s in specs}
    for b in range(n_resamples):
        vals = [
            f.values(
                specs,
                ks,
                np.bincount(rng.integers(0, f.n_images, f.n_images), minlength=f.n_images).astype(
                    np.float64
                ),
            )
            for f in folds
        ]
        for s in specs:
            reps[s.name][b] = np.mean([v[s.name] for v in vals])
    return reps


# ----------------------------------------------------------------------------- slices
# Slices of an image-text evaluation (``evaluate_image_text(..., slices=,
# caption_slices=)``), in the shape of :mod:`._slices`: ``result.slices`` maps a slice
# name to a slice whose metrics are computed on its own queries, each ranking the whole
# gallery of its fold (as every slice does: the gallery does not change).
#
# - ``slices=``: per-image metadata (a COCO category, a source). An image slice is a set
#   of images **with their captions**: ``i2t_*`` metrics over its images as queries,
#   ``t2i_*`` over their captions as queries, and ``rsum`` / ``mean_recall`` the sum of
#   those six recalls (the paper's Rsum restricted to the slice's image-caption pairs).
# - ``caption_slices=``: per-caption metadata (a caption's language, its length). A
#   caption slice is a set of caption queries: only ``t2i_*`` metrics. ``i2t_*`` rank
#   captions for *image* queries and ``rsum`` adds both directions, so they have no value
#   on a set of captions: gating them there is refused, saying so.
#
# Under ``5fold1k`` a slice's value is the mean over its queries (each ranked in its own
# fold), not a mean of per-fold means (a slice can be absent from a fold). Intervals:
# percentile bootstrap over the slice's images (each with its captions in the slice), the
# unit of the whole result's intervals.


def check_image_text_slices(slices, caption_slices, n_image_rows: int, n_captions: int):
    """Validate ``slices=`` (one value per row of ``images`` as passed) and
    ``caption_slices=`` (one per caption) before any work: ``(image dims, caption
    dims)``, each None when not given."""
    img = None if slices is None else make_slices(slices, n_image_rows, where="slices")
    cap = (
        None
        if caption_slices is None
        else make_slices(caption_slices, n_captions, where="caption_slices")
    )
    if img is not None and cap is not None:
        shared = {d.name for d in img} & {d.name for d in cap}
        if shared:
            raise InputError(
                f"slices and caption_slices both name the dimension {sorted(shared)[0]!r}: image slices and "
                "caption slices would print the same; give them distinct names, e.g. {'img_lang': ...} and "
                "{'cap_lang': ...} (in a suite: slices: {category: cat}, caption_slices: {lang: lang})."
            )
    return img, cap


class QueryRanks:
    """Every query of both directions, pooled over the folds: per image query its
    image, first relevant rank and hit (indicator, or probability under
    ``ties="average"``) at each K; per caption query its caption, its image, rank and
    hits."""

    def __init__(self, folds, fold_data, cap_img: np.ndarray, ties: str, ks):
        i_img, i_rank, t_cap, t_img, t_rank = [], [], [], [], []
        i_hit = {k: [] for k in ks}
        t_hit = {k: [] for k in ks}
        for (a, b), f in zip(folds, fold_data):
            i2t, t2i = f.first
            i_img.append(np.arange(a, b, dtype=np.int64))
            i_rank.append(i2t.under(ties))
            cap_idx = np.flatnonzero((cap_img >= a) & (cap_img < b))
            t_cap.append(cap_idx)
            t_img.append(cap_img[cap_idx])
            t_rank.append(t2i.under(ties))
            for k in ks:
                i_hit[k].append(i2t.under(ties, k))
                t_hit[k].append(t2i.under(ties, k))
        self.i_img = np.concatenate(i_img)
        self.i_rank = np.concatenate(i_rank)
        self.t_cap = np.concatenate(t_cap)
        self.t_img = np.concatenate(t_img)
        self.t_rank = np.concatenate(t_rank)
        self.i_hit = {k: np.concatenate(v) for k, v in i_hit.items()}
        self.t_hit = {k: np.concatenate(v) for k, v in t_hit.items()}
        self.ks = tuple(ks)


def _side(spec) -> str:
    """``"i2t"``, ``"t2i"`` or ``"both"`` (rsum, mean_recall)."""
    fam = spec.family
    if fam.startswith("i2t"):
        return "i2t"
    if fam.startswith("t2i"):
        return "t2i"
    return "both"


def _weighted_medr_any(ranks: np.ndarray, w: np.ndarray) -> float:
    """floor(median of the 0-based ranks) + 1 of the multiset in which ``ranks[i]``
    appears ``w[i]`` times (integer weights), as numpy's median computes it."""
    order = np.argsort(ranks, kind="stable")
    r, cw = ranks[order], np.cumsum(w[order])
    total = int(round(cw[-1]))

    def at(p):
        return r[np.searchsorted(cw, p, side="right")]

    med = at((total - 1) // 2) if total % 2 else (at(total // 2 - 1) + at(total // 2)) / 2
    return float(math.floor(med - 1) + 1)


class _Units:
    """One slice's queries grouped by their image (the bootstrap's unit): per unit, its
    image queries' sums and its caption queries' sums, so a replicate's value is a
    ratio of two dot products with the units' counts."""

    def __init__(self, q: QueryRanks, img_sel: np.ndarray | None, cap_sel: np.ndarray):
        imgs = [q.t_img[cap_sel]]
        if img_sel is not None:
            imgs.append(q.i_img[img_sel])
        self.images = np.unique(np.concatenate(imgs))
        U = self.images.size
        t_unit = np.searchsorted(self.images, q.t_img[cap_sel])
        self.t_unit, self.t_rank = t_unit, q.t_rank[cap_sel]
        self.t_n = np.bincount(t_unit, minlength=U).astype(np.float64)
        self.t_hit = {k: np.bincount(t_unit, q.t_hit[k][cap_sel], U) for k in q.ks}
        self.t_rsum = np.bincount(t_unit, self.t_rank, U)
        self.has_images = img_sel is not None
        if self.has_images:
            i_unit = np.searchsorted(self.images, q.i_img[img_sel])
            self.i_unit, self.i_rank = i_unit, q.i_rank[img_sel]
            self.i_n = np.bincount(i_unit, minlength=U).astype(np.float64)
            self.i_hit = {k: np.bincount(i_unit, q.i_hit[k][img_sel], U) for k in q.ks}
            self.i_rsum = np.bincount(i_unit, self.i_rank, U)

    def values(self, specs, counts: np.ndarray) -> dict[str, np.ndarray]:
        """Each metric for each row of ``counts`` (replicates x units; ones: the data)."""
        out = {}

        def ratio(num, den):
            with np.errstate(invalid="ignore", divide="ignore"):
                return (counts @ num) / (counts @ den)

        rec = {}
        for k in set(_RSUM_K) | {s.k for s in specs if s.k is not None}:
            rec[f"t2i_recall@{k}"] = ratio(self.t_hit[k], self.t_n)
            if self.has_images:
                rec[f"i2t_recall@{k}"] = ratio(self.i_hit[k], self.i_n)
        for s in specs:
            side = _side(s)
            if s.name in rec:
                out[s.name] = rec[s.name]
            elif s.family in ("rsum", "mean_recall"):
                rsum = 100.0 * sum(rec[f"{d}_recall@{k}"] for d in ("i2t", "t2i") for k in _RSUM_K)
                out[s.name] = rsum if s.family == "rsum" else rsum / 6.0
            elif s.family.endswith("meanr"):
                out[s.name] = (
                    ratio(self.i_rsum, self.i_n) if side == "i2t" else ratio(self.t_rsum, self.t_n)
                )
            elif s.family.endswith("medr"):
                unit, ranks = (
                    (self.i_unit, self.i_rank) if side == "i2t" else (self.t_unit, self.t_rank)
                )
                out[s.name] = np.array([_weighted_medr_any(ranks, c[unit]) for c in counts])
        return out


class ImageTextSlice(Mapping):
    """One slice of an image-text evaluation: a mapping from metric name to its value on
    the slice's queries; ``side`` (``"images"``: images with their captions;
    ``"captions"``: caption queries only), ``n_images`` (its images: the bootstrap's
    units), ``n_captions``, ``n_queries`` (image and caption queries it holds), and
    ``result``, an :class:`~retrieval_checks.ImageTextResult` of the slice (values and
    intervals over its images), which every gate and baseline reads."""

    def __init__(self, name, dimension, value, side, index, units: _Units, result, parent):
        self.name, self.dimension, self.value, self.side = name, dimension, value, side
        self.index = index  # images (image slice) or captions (caption slice), of the result
        self._units = units
        self.result = result
        self._parent = parent

    @property
    def n_images(self) -> int:
        return int(self._units.images.size)

    @property
    def n_captions(self) -> int:
        return int(self._units.t_rank.size)

    @property
    def n_queries(self) -> int:
        return self.n_captions + (int(self._units.i_rank.size) if self._units.has_images else 0)

    n_used = n_queries
    n_skipped = 0
    n_classes = None

    def queries_of(self, metric) -> int:
        """The queries ``metric`` averages over on this slice (images for i2t, captions
        for t2i, both for rsum)."""
        side = _side(parse_metric(metric) if isinstance(metric, str) else metric)
        n_i = int(self._units.i_rank.size) if self._units.has_images else 0
        return {"i2t": n_i, "t2i": self.n_captions}.get(side, n_i + self.n_captions)

    def lacks(self, metric: str) -> str | None:
        """Why ``metric`` has no value on this slice (None when it has one)."""
        spec = parse_metric(metric)
        if self.side == "captions" and _side(spec) != "t2i":
            return (
                f"{spec.name} has no value on the caption slice {self.name!r}: a caption slice holds caption "
                "queries (t2i) only; "
                + (
                    "i2t metrics rank captions for image queries"
                    if _side(spec) == "i2t"
                    else f"{spec.name} adds both directions"
                )
                + ". Slice the images (slices=, per-image metadata: each slice is its images with their "
                "captions) for it, or gate a t2i metric."
            )
        if spec.name not in self.result:
            return f"{spec.name} was not computed (computed: {', '.join(self.result)})."
        return None

    def interval(self, metric: str, confidence: float, n_resamples: int, seed: int):
        """The percentile-bootstrap interval of ``metric`` over the slice's images."""
        spec = parse_metric(metric)
        if n_resamples <= 0:
            return None
        rng = np.random.default_rng([int(seed), int(self._parent.index_of(self.name))])
        U = self.n_images
        draws = rng.integers(0, U, size=(n_resamples, U))  # each replicate: U images drawn
        draws += (np.arange(n_resamples) * U)[:, None]
        counts = np.bincount(draws.ravel(), minlength=n_resamples * U).reshape(n_resamples, U)
        counts = counts.astype(np.float64)
        reps = self._units.values([spec], counts)[spec.name]
        reps = reps[np.isfinite(reps)]
        if reps.size == 0:
            return None
        q = [(1 - confidence) / 2, (1 + confidence) / 2]
        lo, hi = np.quantile(reps, q)
        return float(lo), float(hi)

    def __getitem__(self, metric: str) -> float:
        return self.result[metric]

    def __iter__(self) -> Iterator[str]:
        return iter(self.result)

    def __len__(self) -> int:
        return len(self.result)

    def __repr__(self) -> str:
        vals = ", ".join(f"{k}={v:.4f}" for k, v in self.result.items())
        return f"ImageTextSlice({self.name!r}: {self.n_images} images, {self.n_captions} captions, {vals})"


class ImageTextSliceSet(SliceSet):
    """``result.slices`` of an image-text evaluation: image slices and caption slices
    by name, ``missing`` (per dimension, images or captions without a value),
    ``dimensions`` and ``sides`` (``{dimension: "images" | "captions"}``)."""

    def __init__(self, slices: dict, missing: dict, dimensions: tuple, sides: dict):
        super().__init__(slices, missing, dimensions)
        self.sides = sides
        self._order = {n: i for i, n in enumerate(slices)}

    def index_of(self, name: str) -> int:
        return self._order[name]

    def of_metric(self, metric: str) -> list[str]:
        """The slices that hold ``metric`` (caption slices hold t2i metrics only)."""
        return [n for n, s in self._slices.items() if s.lacks(metric) is None]

    def unit_of(self, dimension) -> tuple[str, str]:
        """Image dimensions count images, caption dimensions captions."""
        side = self.sides.get(dimension)
        if side in ("images", "captions"):
            return side, f"n_{side}"
        return super().unit_of(dimension)

    def to_dict(self) -> dict:
        def clean(v):
            return None if isinstance(v, float) and math.isnan(v) else v

        return {
            "dimensions": list(self.dimensions),
            "sides": dict(self.sides),
            "missing": dict(self.missing),
            "slices": {
                name: {
                    "dimension": s.dimension,
                    "value": s.value,
                    "side": s.side,
                    "n_images": s.n_images,
                    "n_captions": s.n_captions,
                    "n_queries": s.n_queries,
                    "metrics": {k: clean(v) for k, v in s.items()},
                }
                for name, s in self._slices.items()
            },
        }


def image_text_slices(result, q: QueryRanks, specs, img_dims, cap_dims, image_rows):
    """Build ``result.slices``. ``image_rows``: the input row of ``images`` of each
    evaluated image; the image dimensions' values are read at those rows (in the
    repeated layout every row of one image must carry the same value)."""
    slices: dict = {}
    missing: dict = {}
    sides: dict = {}
    dims: list = []
    evaluated_images = np.zeros(int(result.n_images), bool)
    evaluated_images[q.i_img] = True
    evaluated_caps = np.zeros(int(result.n_captions), bool)
    evaluated_caps[q.t_cap] = True
    conf, n_res, seed = result.confidence, result.n_resamples, int(result.config.get("seed", 0))

    def add(name, dim, value, side, index, units):
        if name in slices:
            raise InputError(f"slices: two slices are named {name!r}; rename a dimension.")
        own = [s for s in specs if side == "images" or _side(s) == "t2i"]
        counts = np.ones((1, units.images.size))
        vals = {k: float(v[0]) for k, v in units.values(own, counts).items()}
        sub = ImageTextResult(
            vals,
            {},
            [vals],
            n_images=int(units.images.size),
            n_captions=int(units.t_rank.size),
            layout=result.layout,
            protocol=result.protocol,
            confidence=conf,
            n_resamples=n_res,
            i2t_ranks=[units.i_rank] if units.has_images else [],
            t2i_ranks=[units.t_rank],
            config={**result.config, "slice": name},
            provenance=result.provenance,  # the slice's ranks come from the same passes
        )
        slices[name] = ImageTextSlice(name, dim, value, side, index, units, sub, None)

    for d in img_dims or ():
        values = _image_values(d, image_rows)
        missing[d.name] = sum(v is None for v in values)
        sides[d.name] = "images"
        dims.append(d.name)
        for v, index in _value_groups(values):
            index = index[evaluated_images[index]]
            if index.size == 0:
                continue  # outside the protocol's images (the 1k protocol's first 1000)
            img_sel = np.flatnonzero(np.isin(q.i_img, index))
            cap_sel = np.flatnonzero(np.isin(q.t_img, index))
            add(slice_name(d.name, v), d.name, v, "images", index, _Units(q, img_sel, cap_sel))
    for d in cap_dims or ():
        missing[d.name] = sum(v is None for v in d.values)
        sides[d.name] = "captions"
        dims.append(d.name)
        for v, index in _value_groups(d.values):
            index = index[evaluated_caps[index]]
            if index.size == 0:
                continue
            cap_sel = np.flatnonzero(np.isin(q.t_cap, index))
            add(slice_name(d.name, v), d.name, v, "captions", index, _Units(q, None, cap_sel))
    out = ImageTextSliceSet(slices, missing, tuple(dims), sides)
    for s in slices.values():
        s._parent = out
        if n_res:
            s.result.intervals.update(
                {
                    name: iv
                    for name in s.result
                    if (iv := s.interval(name, conf, n_res, seed)) is not None
                }
            )
    return out


def _value_groups(values: list):
    """(value, positions) of each distinct non-None value, in order of first
    appearance (one Python type per dimension: make_slices checked it)."""
    present = np.flatnonzero(np.fromiter((v is not None for v in values), bool, len(values)))
    if present.size == 0:
        return []
    keys, first, inv = np.unique(
        np.array([values[i] for i in present]), return_index=True, return_inverse=True
    )
    inv = inv.reshape(-1)
    return [
        (keys[k].item() if isinstance(keys[k], np.generic) else keys[k], present[inv == k])
        for k in np.argsort(first, kind="stable")
    ]


def _image_values(d, image_rows: np.ndarray) -> list:
    """A dimension's value of each evaluated image, read at its input row; the rows of
    one image (the repeated layout) must agree."""
    values = d.values
    out = [values[int(r)] for r in image_rows]
    return out


def check_repeated_rows(img_dims, cap_img_rows: np.ndarray) -> None:
    """In the repeated layout (one row of ``images`` per caption), the rows of one
    image must carry one slice value: else the image's slice is undefined."""
    if img_dims is None:
        return
    for d in img_dims:
        vals = d.values
        for i in range(1, len(vals)):
            if cap_img_rows[i] == cap_img_rows[i - 1] and vals[i] != vals[i - 1]:
                raise InputError(
                    f"slices[{d.name!r}]: rows {i - 1} and {i} of images are the same image (the repeated layout: "
                    f"one row per caption) with slice values {vals[i - 1]!r} and {vals[i]!r}; an image has one "
                    "slice value: give the image's value on each of its rows (per-caption metadata goes in "
                    "caption_slices=)."
                )
