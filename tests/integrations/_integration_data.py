"""Tiny models and synthetic data shared by the integration tests (no download)."""

from __future__ import annotations

import numpy as np


def blobs(n_per_class: int = 12, n_classes: int = 4, d: int = 8, seed: int = 0, spread: float = 1.0):
    """Gaussian blobs: ``n_classes`` labels, ``n_per_class`` items each, float32."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, d)) * 2.0
    y = np.repeat(np.arange(n_classes), n_per_class)
    x = centres[y] + spread * rng.normal(size=(y.size, d))
    order = rng.permutation(y.size)
    return x[order].astype(np.float32), y[order]
