"""How well class activation maps cover the object: ``cam_iou`` and ``cam_iou_box``.

For an image with CAM M (values in [0, 1], at the image's size) and ground truth A_G
(the union of the object's bounding boxes, or any binary mask such as a saliency map):

- A_L = {pixels with M >= rho} (rho = 0.1 by default, as in the source paper);
- ``cam_iou`` = |A_L ∩ A_G| / |A_L ∪ A_G|; 1 when the union is empty (nothing
  highlighted and nothing to find). A CAM that is all zero highlights nothing, so
  its IoU is 0 against a non-empty object: never NaN;
- ``cam_iou_box`` (IoU-B): the same with A_L replaced by its minimum enclosing
  axis-aligned rectangle (empty A_L stays empty).

Boxes are (x0, y0, x1, y1) in pixels with x1 and y1 exclusive (a box covering the
whole H x W image is (0, 0, W, H)). The dataset value is the mean over images, with
a percentile bootstrap interval over images.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._arrays import as_numpy
from ..errors import InputError
from ..metrics._measurement import Measurement
from ..options import check_option
from ..stats._intervals import mean_rows, resample_stats

__all__ = ["cam_iou", "cam_iou_box", "boxes_to_masks", "LocalizationResult"]


@dataclass(frozen=True)
class LocalizationResult:
    """``value`` (mean over images) with a bootstrap interval; ``per_image`` values.

    Built by :func:`~retrieval_checks.cam_iou` and :func:`~retrieval_checks.cam_iou_box`;
    gated by :func:`~retrieval_checks.assert_cam_iou_at_least`.

    Parameters
    ----------
    metric:
        ``"cam_iou"`` or ``"cam_iou_box"``.
    value:
        The mean over images.
    low, high:
        The bootstrap interval's bounds (NaN when there is none: one image, or
        ``n_resamples=0``).
    confidence:
        The interval's confidence.
    per_image:
        One IoU per image.
    rho:
        The threshold on the maps.

    Raises
    ------
    None
        A plain frozen record; the functions that build it check their inputs.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> cams = np.zeros((2, 4, 4))
    >>> cams[:, :2, :2] = 1.0
    >>> res = rc.cam_iou(cams, boxes=np.array([[0, 0, 2, 2], [0, 0, 4, 4]]))
    >>> res.metric, res.value, res.n_images, res.per_image
    ('cam_iou', 0.625, 2, array([1.  , 0.25]))
    """

    metric: str
    value: float
    low: float
    high: float
    confidence: float
    per_image: np.ndarray
    rho: float

    @property
    def n_images(self) -> int:
        return int(self.per_image.size)

    def __float__(self) -> float:
        return self.value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.strip().lower() == self.metric

    def measure(self, name: str | None = None) -> Measurement:
        """The :class:`~retrieval_checks.metrics.Measurement` of this result's metric."""
        if name is not None and name not in self:
            raise KeyError(f"{name!r}: this result holds {self.metric}")
        worst = np.argsort(self.per_image, kind="stable")[:3]
        details = (
            f"threshold rho={self.rho}; {float(np.mean(self.per_image == 0)):.1%} of images with IoU 0",
            "worst images: " + "; ".join(f"#{i}: {self.per_image[i]:.3f}" for i in worst),
        )
        has = bool(np.isfinite(self.low))
        return Measurement(
            metric=self.metric,
            value=self.value,
            unit="fraction",
            interval=(self.low, self.high) if has else None,
            confidence=self.confidence if has else None,
            method="percentile bootstrap over images" if has else None,
            n=self.n_images,
            n_unit="images",
            sample=f"{self.n_images} images",
            details=details,
        )

    def __str__(self) -> str:
        return (
            f"{self.metric} = {self.value:.4f} [{self.low:.4f}, {self.high:.4f}] ({self.confidence:.0%} bootstrap "
            f"over {self.n_images} images, rho={self.rho})"
        )


def boxes_to_masks(boxes, shape: tuple[int, int]) -> np.ndarray:
    """(N x H x W) bool masks: the union of each image's boxes.

    ``boxes``: (N x 4) (one box per image), or a list of N arrays of shape (k_i x 4)
    (k_i may be 0: no object). A box outside the image, or with x1 <= x0 or y1 <= y0,
    is an error naming the image and the box.

    Parameters
    ----------
    boxes:
        (N x 4) boxes (x0, y0, x1, y1) in pixels, ends exclusive, one per image; or a
        list of N (k x 4) arrays (k may be 0: no object).
    shape:
        The image size (H, W), two positive integers.

    Returns
    -------
    numpy.ndarray
        (N x H x W) bool masks.

    Raises
    ------
    InputError
        An invalid ``shape``, boxes that are not (k x 4) numbers, a box that is not
        finite, outside the image or empty.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> masks = rc.boxes_to_masks([np.array([[0, 0, 1, 1], [2, 1, 4, 3]]), np.zeros((0, 4))], (3, 4))
    >>> masks.astype(int)
    array([[[1, 0, 0, 0],
            [0, 0, 1, 1],
            [0, 0, 1, 1]],
    <BLANKLINE>
           [[0, 0, 0, 0],
            [0, 0, 0, 0],
            [0, 0, 0, 0]]])
    >>> rc.boxes_to_masks(np.array([[0, 0, 5, 1]]), (3, 4))
    Traceback (most recent call last):
    retrieval_checks.errors.InputError: boxes: image 0: box [0, 0, 5, 1] lies outside the 4 x 3 image (x in [0, 4], y in [0, 3], ends exclusive); clip it or fix its coordinates.
    """
    if (
        not isinstance(shape, (tuple, list))
        or len(shape) != 2
        or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0 for v in shape
        )
    ):
        raise InputError(f"shape={shape!r}: give the image size (H, W), two positive integers.")
    H, W = int(shape[0]), int(shape[1])
    if isinstance(boxes, np.ndarray) and boxes.ndim == 2:
        raw = [boxes[i : i + 1] for i in range(boxes.shape[0])]
    elif isinstance(boxes, (list, tuple)) or (
        isinstance(boxes, np.ndarray) and boxes.dtype == object
    ):
        raw = list(boxes)
    else:
        raise InputError(
            f"boxes must be an (N x 4) array or a list of (k x 4) arrays, got {type(boxes).__name__} "
            f"of shape {getattr(boxes, 'shape', None)}."
        )
    per_image = []
    for i, b in enumerate(raw):
        try:
            a = np.asarray(b)
            per_image.append((a if a.dtype.kind in "iuf" else a.astype(float)).reshape(-1, 4))
        except OverflowError:
            raise InputError(
                f"boxes of image {i} hold a coordinate too large for a float (a number of hundreds of "
                f"digits); give pixel coordinates (x0, y0, x1, y1) inside the {W} x {H} image."
            ) from None
        except (TypeError, ValueError):
            shown = repr(b)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise InputError(
                f"boxes of image {i} ({shown}) are not (k x 4) numbers (x0, y0, x1, y1)."
            ) from None
    masks = np.zeros((len(per_image), H, W), dtype=bool)
    for i, bs in enumerate(per_image):
        bs = np.asarray(bs)
        if bs.size and bs.shape[-1] != 4:
            raise InputError(
                f"boxes of image {i} have shape {bs.shape}; each box is (x0, y0, x1, y1)."
            )
        for b in bs.reshape(-1, 4):
            if not np.all(np.isfinite(b)):
                raise InputError(
                    f"boxes: image {i}: box {b.tolist()} is not finite; give pixel coordinates "
                    f"(x0, y0, x1, y1) inside the {W} x {H} image."
                )
            x0, y0, x1, y1 = (int(round(v)) for v in b)
            if x0 < 0 or y0 < 0 or x1 > W or y1 > H:
                raise InputError(
                    f"boxes: image {i}: box {b.tolist()} lies outside the {W} x {H} image (x in [0, {W}], "
                    f"y in [0, {H}], ends exclusive); clip it or fix its coordinates."
                )
            if x1 <= x0 or y1 <= y0:
                raise InputError(
                    f"boxes: image {i}: box {b.tolist()} is empty (need x1 > x0 and y1 > y0)."
                )
            masks[i, y0:y1, x0:x1] = True
    return masks


def _check(cams, truth, rho):
    cams = as_numpy(cams, "cams")
    if cams.dtype.kind not in "biuf":
        raise InputError(f"cams have dtype {cams.dtype}; give numeric maps (grad_cam's output).")
    if cams.ndim == 4 and cams.shape[1] == 1:
        cams = cams[:, 0]
    if cams.ndim != 3:
        raise InputError(
            f"cams have shape {cams.shape}; give (N x H x W) maps (grad_cam's output)."
        )
    if cams.shape[0] == 0:
        raise InputError("cams is empty.")
    if not np.isfinite(cams).all():
        raise InputError("cams contain NaN or Inf.")
    low, high = float(cams.min()), float(cams.max())
    if low < 0 or high > 1:  # rho is a level of maps in [0, 1]: raw maps clear it anywhere
        raise InputError(
            f"cams hold values outside [0, 1] (from {low:.4g} to {high:.4g}): the maps are thresholded "
            f"at rho={rho!r} as grad_cam returns them, each min-max normalised to [0, 1]; normalise "
            "each map (m - m.min()) / (m.max() - m.min()) first (a raw map clears rho almost "
            "everywhere, and the IoU it gives measures the threshold, not the model)."
        )
    check_option("rho", rho)
    if truth.shape != cams.shape:
        raise InputError(
            f"the ground truth has shape {truth.shape} but the cams {cams.shape}: one mask per map, "
            "at the same size (grad_cam upsamples maps to the image size)."
        )
    return cams


def _truth(cams, boxes, masks):
    if (boxes is None) == (masks is None):
        raise InputError(
            "give boxes= (union of each image's boxes) or masks= (binary masks), one of them."
        )
    shape = as_numpy(cams, "cams").shape
    if len(shape) < 3:
        raise InputError(f"cams have shape {shape}; give (N x H x W) maps (grad_cam's output).")
    if boxes is not None:
        if not hasattr(boxes, "__len__"):
            raise InputError(
                f"boxes must be an (N x 4) array or a list of (k x 4) arrays, got {type(boxes).__name__}."
            )
        n = len(boxes)
        if n != shape[0]:
            raise InputError(f"{shape[0]} cams but boxes for {n} images; give one entry per image.")
        return _refuse_no_object(
            boxes_to_masks(boxes, shape[-2:]), "boxes", "boxes for the objects"
        )
    m = as_numpy(masks, "masks")
    if m.ndim == 4 and m.shape[1] == 1:  # (N x 1 x H x W), as cams are taken
        m = m[:, 0]
    if m.dtype != bool:
        if m.dtype.kind not in "iuf" or not np.isin(m, (0, 1)).all():
            raise InputError("masks must be boolean or 0/1.")
        m = m.astype(bool)
    return _refuse_no_object(m, "masks", "the objects' masks (True on the object)")


def _refuse_no_object(truth: np.ndarray, name: str, fix: str) -> np.ndarray:
    """IoU is 1 where both sides are empty (nothing to find, nothing highlighted): with no
    object in any image, a map that highlights nothing (a model that ignores its input)
    scores 1, so such truth is refused; some images without an object are kept."""
    if truth.ndim == 3 and truth.shape[0] and not truth.any():
        raise InputError(
            f"{name}: no image holds an object (all {truth.shape[0]} are empty): there is nothing to "
            "localise, and cam_iou would score a map that highlights nothing, as a model that "
            f"ignores its input gives, 1. Give {fix}."
        )
    return truth


def _iou(a: np.ndarray, g: np.ndarray) -> np.ndarray:
    inter = np.logical_and(a, g).sum(axis=(1, 2))
    union = np.logical_or(a, g).sum(axis=(1, 2))
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


def _enclosing_rectangles(a: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a)
    rows, cols = a.any(axis=2), a.any(axis=1)
    for i in range(a.shape[0]):
        r, c = np.flatnonzero(rows[i]), np.flatnonzero(cols[i])
        if r.size:
            out[i, r[0] : r[-1] + 1, c[0] : c[-1] + 1] = True
    return out


def _result(metric, values, rho, confidence, n_resamples, seed):
    n = values.size
    if (
        n >= 2 and n_resamples > 0
    ):  # images are independent units; resampled in memory-bounded chunks
        boot = resample_stats(values, None, mean_rows, n_resamples, np.random.default_rng(seed))
        low, high = (
            float(v) for v in np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
        )
    else:
        low = high = float("nan")
    return LocalizationResult(metric, float(values.mean()), low, high, confidence, values, rho)


def _check_options(rho, confidence, n_resamples, seed) -> None:
    check_option("rho", rho)
    check_option("confidence", confidence)
    check_option("n_resamples", n_resamples)
    check_option("seed", seed)


def cam_iou(
    cams,
    *,
    boxes=None,
    masks=None,
    rho: float = 0.1,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> LocalizationResult:
    """``cam_iou``: IoU of {M >= rho} with the union of each image's boxes (or masks).

    Parameters
    ----------
    cams:
        (N x H x W) class activation maps with values in [0, 1] (``grad_cam``'s output;
        (N x 1 x H x W) is accepted).
    boxes:
        The objects' boxes (x0, y0, x1, y1), pixels, ends exclusive: (N x 4), or a list
        of N (k x 4) arrays; their union per image is the truth.
    masks:
        Instead of ``boxes``: (N x H x W) boolean (or 0/1) truth masks.
    rho:
        The threshold on the map (default 0.1).
    confidence:
        Of the bootstrap interval over images (default 0.95).
    n_resamples:
        Bootstrap resamples (default 1000; 0: no interval).
    seed:
        Of the bootstrap (default 0).

    Returns
    -------
    LocalizationResult
        The mean over images with its interval (NaN bounds without one), and the
        per-image values.

    Raises
    ------
    InputError
        Both or neither of ``boxes`` and ``masks``, maps that are not (N x H x W)
        finite numbers, truth of another shape or count, boxes outside the image or
        empty, masks that are not boolean, an invalid ``rho``, ``confidence``,
        ``n_resamples`` or ``seed``.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> cams = np.zeros((2, 4, 4))
    >>> cams[0, 0, :2] = cams[0, 1, 0] = 1.0  # an L: three of the box's four pixels
    >>> cams[1, :2, :2] = 0.8  # the whole box
    >>> boxes = np.array([[0, 0, 2, 2], [0, 0, 2, 2]])
    >>> res = rc.cam_iou(cams, boxes=boxes)
    >>> res.per_image
    array([0.75, 1.  ])
    >>> print(res)
    cam_iou = 0.8750 [0.7500, 1.0000] (95% bootstrap over 2 images, rho=0.1)
    """
    _check_options(rho, confidence, n_resamples, seed)
    truth = _truth(cams, boxes, masks)
    cams = _check(cams, truth, rho)
    return _result("cam_iou", _iou(cams >= rho, truth), rho, confidence, n_resamples, seed)


def cam_iou_box(
    cams,
    *,
    boxes=None,
    masks=None,
    rho: float = 0.1,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> LocalizationResult:
    """``cam_iou_box`` (IoU-B): IoU of the rectangle enclosing {M >= rho} with the truth.

    Parameters
    ----------
    cams:
        (N x H x W) class activation maps with values in [0, 1] (``grad_cam``'s output;
        (N x 1 x H x W) is accepted).
    boxes:
        The objects' boxes (x0, y0, x1, y1), pixels, ends exclusive: (N x 4), or a list
        of N (k x 4) arrays; their union per image is the truth.
    masks:
        Instead of ``boxes``: (N x H x W) boolean (or 0/1) truth masks.
    rho:
        The threshold on the map (default 0.1).
    confidence:
        Of the bootstrap interval over images (default 0.95).
    n_resamples:
        Bootstrap resamples (default 1000; 0: no interval).
    seed:
        Of the bootstrap (default 0).

    Returns
    -------
    LocalizationResult
        The mean over images with its interval (NaN bounds without one), and the
        per-image values.

    Raises
    ------
    InputError
        Both or neither of ``boxes`` and ``masks``, maps that are not (N x H x W)
        finite numbers, truth of another shape or count, boxes outside the image or
        empty, masks that are not boolean, an invalid ``rho``, ``confidence``,
        ``n_resamples`` or ``seed``.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> cams = np.zeros((2, 4, 4))
    >>> cams[0, 0, :2] = cams[0, 1, 0] = 1.0  # an L: three of the box's four pixels
    >>> cams[1, :2, :2] = 0.8  # the whole box
    >>> boxes = np.array([[0, 0, 2, 2], [0, 0, 2, 2]])
    >>> rc.cam_iou_box(cams, boxes=boxes).per_image  # the L's enclosing rectangle is the box
    array([1., 1.])
    """
    _check_options(rho, confidence, n_resamples, seed)
    truth = _truth(cams, boxes, masks)
    cams = _check(cams, truth, rho)
    return _result(
        "cam_iou_box",
        _iou(_enclosing_rectangles(cams >= rho), truth),
        rho,
        confidence,
        n_resamples,
        seed,
    )
