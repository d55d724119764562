"""Scikit-learn's 8x8 digits pasted at random positions on larger noisy canvases.

Every image therefore has a known bounding box of the object the label is about, which
is what a localisation measure such as Grad-CAM IoU needs.

Layout and units (``make_canvases``):

- ``images``: float32, shape (N, 1, size, size), channel-first, intensities in [0, 1].
  The digit (scikit-learn intensities 0-16, divided by 16) is upscaled by ``scale`` with
  ``np.kron`` (each pixel becomes a ``scale`` x ``scale`` block: 8x8 -> 16x16 for
  ``scale=2``) and pasted at a uniformly random position on a canvas of uniform
  background noise in [0, ``noise``) plus 2 to 4 distractors (short straight strokes and
  Gaussian blobs, intensities 0.4-1.0) that are not digits and never touch the digit's
  box. Where they overlap, the brighter of digit and background wins.
- ``labels``: int64, shape (N,), the digit class 0-9.
- ``boxes``: int64, shape (N, 4), ``(x0, y0, x1, y1)`` in pixels of the canvas: x is the
  column, y the row, x1 and y1 are exclusive, so ``images[i, 0, y0:y1, x0:x1]`` is the
  pasted ``8*scale`` x ``8*scale`` patch (the patch's box, not the tight box of the ink).
- N = 1797, all of ``sklearn.datasets.load_digits``, in its order.

Everything is deterministic for a given ``seed``.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

KEYS = ("images", "labels", "boxes")


def _stroke(size: int, rng: np.random.Generator) -> np.ndarray:
    """A straight stroke: length 5-14 px, 1-2 px thick, random angle and intensity."""
    layer = np.zeros((size, size), dtype=np.float32)
    y, x = rng.uniform(0, size, size=2)
    angle = rng.uniform(0, np.pi)
    length = rng.uniform(5, 14)
    thick = int(rng.integers(1, 3))
    value = rng.uniform(0.4, 1.0)
    for t in np.linspace(0, length, int(length * 2) + 1):
        r, c = int(y + t * np.sin(angle)), int(x + t * np.cos(angle))
        layer[max(r, 0) : max(r + thick, 0), max(c, 0) : max(c + thick, 0)] = value
    return layer


def _blob(size: int, rng: np.random.Generator) -> np.ndarray:
    """A Gaussian blob: standard deviation 1-2.5 px, peak intensity 0.4-1.0."""
    y, x = rng.uniform(0, size, size=2)
    sigma = rng.uniform(1.0, 2.5)
    rows, cols = np.mgrid[0:size, 0:size]
    d2 = (rows - y) ** 2 + (cols - x) ** 2
    return (rng.uniform(0.4, 1.0) * np.exp(-d2 / (2 * sigma**2))).astype(np.float32)


def make_canvases(size: int = 40, scale: int = 2, seed: int = 0, noise: float = 0.15) -> dict:
    """All 1797 digits, each on its own ``size`` x ``size`` canvas (see the module docstring).

    ``size``: canvas side in pixels; ``scale``: integer upscaling of the 8x8 digit;
    ``noise``: the upper bound of the uniform background noise (intensity units, 0-1).
    Returns ``{"images", "labels", "boxes"}`` as numpy arrays.
    """
    digits = load_digits()
    side = 8 * scale
    if side > size:
        raise ValueError(f"a {side}x{side} digit does not fit on a {size}x{size} canvas")
    rng = np.random.default_rng(seed)
    n = len(digits.target)
    images = np.empty((n, 1, size, size), dtype=np.float32)
    boxes = np.empty((n, 4), dtype=np.int64)
    block = np.ones((scale, scale), dtype=np.float32)
    for i, digit in enumerate(digits.images):
        canvas = rng.uniform(0.0, noise, size=(size, size)).astype(np.float32)
        y0, x0 = rng.integers(0, size - side + 1, size=2)
        y1, x1 = y0 + side, x0 + side
        # Distractors: rejected (up to 20 tries each) if they reach into the digit's box.
        for _ in range(int(rng.integers(2, 5))):
            for _try in range(20):
                layer = _stroke(size, rng) if rng.random() < 0.6 else _blob(size, rng)
                if layer[y0:y1, x0:x1].max() < 0.05:
                    canvas = np.maximum(canvas, layer)
                    break
        patch = np.kron(digit.astype(np.float32) / 16.0, block)
        canvas[y0:y1, x0:x1] = np.maximum(canvas[y0:y1, x0:x1], patch)
        images[i, 0] = np.clip(canvas, 0.0, 1.0)
        boxes[i] = (x0, y0, x1, y1)
    return {"images": images, "labels": digits.target.astype(np.int64), "boxes": boxes}


def split(data: dict, test_size: float = 0.3, seed: int = 0) -> tuple[dict, dict]:
    """A stratified (by label) train/test split of a ``make_canvases`` dict.

    ``test_size`` is the fraction of images in the test part. Both parts are dicts with
    the same keys as ``data``; rows keep their relative order within a part only as
    ``train_test_split`` returns them (shuffled, deterministic for ``seed``).
    """
    index = np.arange(len(data["labels"]))
    train_idx, test_idx = train_test_split(
        index, test_size=test_size, random_state=seed, stratify=data["labels"]
    )
    return ({k: v[train_idx] for k, v in data.items()}, {k: v[test_idx] for k, v in data.items()})
