"""A small CNN classifier for the canvas digits, laid out for Grad-CAM.

Layout of ``build(width, depth)``:

- ``features`` (``nn.Sequential``): ``depth`` conv blocks. Block k (k = 0 .. depth-1)
  is ``MaxPool2d(2) + Conv2d(3x3, padding 1, width * 2**k channels) + BatchNorm2d +
  ReLU``. Pooling comes *before* each block's conv, never after the last block, so the
  last layer of ``features`` is a ReLU and the output of ``features`` (equivalently of
  ``features[-1]``) IS the last conv activation: hook it for Grad-CAM. On a 40x40
  canvas its spatial size is 40 / 2**depth: 20, 10 or 5 cells of 2, 4 or 8 pixels.
  Pooling the input before the first conv as well makes training about 4x cheaper on
  CPU and gives receptive fields of 6, 16 and 36 input pixels for depth 1, 2 and 3
  (the pasted digit is 16x16), so depth 1 cannot see a whole digit and underfits.
- ``pool``: global average pooling to one value per channel.
- ``dropout``: ``nn.Dropout(dropout)`` (identity when ``dropout == 0``).
- ``classifier``: ``nn.Linear(width * 2**(depth-1), n_classes)`` giving logits.

Input: float (n, 1, H, W) intensities in [0, 1]; output: (n, n_classes) logits.
"""

from __future__ import annotations

import torch
from torch import nn


class CanvasCNN(nn.Module):
    def __init__(self, width: int = 16, depth: int = 2, dropout: float = 0.0, n_classes: int = 10):
        super().__init__()
        layers: list[nn.Module] = []
        in_ch = 1
        for k in range(depth):
            out_ch = width * 2**k
            layers += [
                nn.MaxPool2d(2),
                nn.Conv2d(in_ch, out_ch, 3, padding=1),
                nn.BatchNorm2d(out_ch),
                nn.ReLU(),
            ]
            in_ch = out_ch
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(in_ch, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x)).flatten(1)
        return self.classifier(self.dropout(x))


def build(width: int = 16, depth: int = 2, dropout: float = 0.0, n_classes: int = 10) -> nn.Module:
    """The factory: an untrained ``CanvasCNN`` (see the module docstring for the layout)."""
    if depth < 1:
        raise ValueError("depth must be at least 1")
    return CanvasCNN(width, depth, dropout, n_classes)


def n_parameters(model: nn.Module) -> int:
    """The number of trainable parameters (BatchNorm running statistics not counted)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
