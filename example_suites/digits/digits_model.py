"""A small convolutional embedder for scikit-learn's 8x8 handwritten digits.

``build()`` is the factory a suite names (``factory: digits_model.py:build``); the
trained weights ship next to this file as ``digits_cnn.pt`` (a state_dict, read with
``torch.load(weights_only=True)``) and are produced by ``make_assets.py``.

Inputs: (n, 64) pixel intensities 0-16, as ``sklearn.datasets.load_digits`` gives them.
Output: (n, 16) embeddings, compared by cosine similarity.
"""

from __future__ import annotations

import torch
from torch import nn


class DigitsEmbedder(nn.Module):
    def __init__(self, dim: int = 16):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 16 x 4 x 4
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(-1, 1, 8, 8).float() / 16.0
        return self.head(self.features(x))


def build(dim: int = 16) -> DigitsEmbedder:
    """The factory: an untrained embedder; the suite loads the weights into it."""
    return DigitsEmbedder(dim)
