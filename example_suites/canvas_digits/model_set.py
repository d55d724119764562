"""A set of 12 canvas-digit CNNs whose generalization gaps differ, for gap-vs-measure studies.

    python example_suites/canvas_digits/model_set.py

trains every entry of ``CONFIGS`` on the canvas digits (``canvas_data.make_canvases``,
40x40 canvases, seed 0, stratified 70/30 split, seed 0) and writes, into
``example_suites/canvas_digits/models/``:

- ``model_{i:02d}.pt``: the state_dict of ``cnn.build(width, depth, dropout)`` for config i
  (loads with ``torch.load(..., weights_only=True)``);
- ``models.json``: one row per model, ``{"index", **config, "n_parameters",
  "train_accuracy", "test_accuracy", "gap", "train_seconds"}``.

Definitions:

- ``train_accuracy``: fraction (0-1) of the training images the model actually trained
  on (the ``train_fraction`` subsample) classified as their TRUE label (label noise is
  applied to the labels used for training only, never to the ones scored against);
- ``test_accuracy``: fraction (0-1) of the whole test split classified correctly;
- ``gap`` (the generalization gap): ``train_accuracy - test_accuracy``, in accuracy units.

Training (``train_model``): Adam, learning rate 2e-3, ``weight_decay`` as configured (Adam's
L2 penalty), batch size 64, cross-entropy, ``epochs`` passes over the subsample,
``torch.manual_seed(seed)``; optional augmentation by random translations of the whole
canvas by up to 2 pixels in x and y (zero fill). No flips, rotations or re-placement of
the digit: those would change a digit's meaning or its box.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.model_selection import train_test_split
from torch import nn

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # sibling modules, also when imported from elsewhere
    sys.path.insert(0, str(HERE))

from canvas_data import make_canvases, split  # noqa: E402
from cnn import build, n_parameters  # noqa: E402

BATCH_SIZE = 64
LEARNING_RATE = 2e-3
MAX_SHIFT = 2  # pixels, for ``augment``

# Hand-picked to span generalization, from "generalizes" to "overfits". In brackets: the
# (train accuracy, test accuracy, gap) measured with seed 0 on a 2-core CPU.
#  0-2  depth 3 on all training data with augmentation + weight decay (+ dropout): high
#       test accuracy, gap near 0 [0.95/0.92/0.03, 0.95/0.90/0.04, 0.83/0.80/0.03];
#  3    depth 3 on all data, no regularization: fits the training set [1.00/0.81/0.19];
#  4    width 32, depth 2 on all data, no regularization: its receptive field (16 px) is
#       just the digit, so it fits less well [0.66/0.59/0.07];
#  5    one block (receptive field 6 px): underfits, train and test accuracy near chance
#       [0.12/0.09/0.02]; a "no signal" baseline rather than a "generalizes" model;
#  6    depth 3 on a 30% subsample, no regularization: memorizes [1.00/0.70/0.30];
#  7    width 32, depth 2 on a 30% subsample: large gap at lower accuracy [0.69/0.49/0.20];
#  8    20% label noise on all data, no regularization: fits the noisy labels, so only
#       ~80% of the true training labels [0.81/0.62/0.19];
#  9    width 8, depth 3 on a 30% subsample with augmentation + weight decay [0.66/0.59/0.07];
#  10   20% label noise on a 30% subsample, no regularization: the strongest overfitting
#       [0.80/0.46/0.34];
#  11   20% label noise on all data, with augmentation, weight decay and dropout: does
#       not fit the noise [0.67/0.65/0.02].
# width 32 is only used with depth <= 2 (depth 3 would be ~93k parameters).
CONFIGS: list[dict] = [
    dict(
        width=16,
        depth=3,
        weight_decay=5e-4,
        dropout=0.3,
        augment=True,
        label_noise=0.0,
        train_fraction=1.0,
        epochs=30,
    ),
    dict(
        width=16,
        depth=3,
        weight_decay=5e-4,
        dropout=0.0,
        augment=True,
        label_noise=0.0,
        train_fraction=1.0,
        epochs=40,
    ),
    dict(
        width=8,
        depth=3,
        weight_decay=5e-4,
        dropout=0.3,
        augment=True,
        label_noise=0.0,
        train_fraction=1.0,
        epochs=40,
    ),
    dict(
        width=16,
        depth=3,
        weight_decay=0.0,
        dropout=0.0,
        augment=False,
        label_noise=0.0,
        train_fraction=1.0,
        epochs=30,
    ),
    dict(
        width=32,
        depth=2,
        weight_decay=0.0,
        dropout=0.0,
        augment=False,
        label_noise=0.0,
        train_fraction=1.0,
        epochs=25,
    ),
    dict(
        width=8,
        depth=1,
        weight_decay=0.0,
        dropout=0.0,
        augment=False,
        label_noise=0.0,
        train_fraction=1.0,
        epochs=15,
    ),
    dict(
        width=16,
        depth=3,
        weight_decay=0.0,
        dropout=0.0,
        augment=False,
        label_noise=0.0,
        train_fraction=0.3,
        epochs=40,
    ),
    dict(
        width=32,
        depth=2,
        weight_decay=0.0,
        dropout=0.0,
        augment=False,
        label_noise=0.0,
        train_fraction=0.3,
        epochs=40,
    ),
    dict(
        width=16,
        depth=3,
        weight_decay=0.0,
        dropout=0.0,
        augment=False,
        label_noise=0.2,
        train_fraction=1.0,
        epochs=40,
    ),
    dict(
        width=8,
        depth=3,
        weight_decay=5e-4,
        dropout=0.0,
        augment=True,
        label_noise=0.0,
        train_fraction=0.3,
        epochs=40,
    ),
    dict(
        width=16,
        depth=3,
        weight_decay=0.0,
        dropout=0.0,
        augment=False,
        label_noise=0.2,
        train_fraction=0.3,
        epochs=40,
    ),
    dict(
        width=16,
        depth=3,
        weight_decay=5e-4,
        dropout=0.3,
        augment=True,
        label_noise=0.2,
        train_fraction=1.0,
        epochs=30,
    ),
]


def training_subset(config: dict, train: dict, seed: int = 0) -> dict:
    """The part of ``train`` a config trains on: a stratified ``train_fraction`` subsample.

    Deterministic for ``seed``; the whole split when ``train_fraction >= 1``. Labels are
    the true ones (label noise is added inside ``train_model``).
    """
    fraction = config.get("train_fraction", 1.0)
    if fraction >= 1.0:
        return dict(train)
    index = np.arange(len(train["labels"]))
    keep, _ = train_test_split(
        index, train_size=fraction, random_state=seed, stratify=train["labels"]
    )
    keep = np.sort(keep)
    return {k: v[keep] for k, v in train.items()}


def noisy_labels(
    labels: np.ndarray, fraction: float, seed: int = 0, n_classes: int = 10
) -> np.ndarray:
    """A copy of ``labels`` with round(fraction * n) of them, chosen at random, replaced by
    a different class drawn uniformly from the other ``n_classes - 1``."""
    rng = np.random.default_rng(seed)
    out = labels.copy()
    flip = rng.choice(len(labels), size=int(round(fraction * len(labels))), replace=False)
    out[flip] = (labels[flip] + rng.integers(1, n_classes, size=len(flip))) % n_classes
    return out


def shift_batch(
    x: torch.Tensor, generator: torch.Generator, max_shift: int = MAX_SHIFT
) -> torch.Tensor:
    """Translate each image of a (n, 1, H, W) batch by an integer offset in
    [-max_shift, max_shift] pixels along x and y independently, filling with zeros."""
    n, _, h, w = x.shape
    padded = nn.functional.pad(x, (max_shift,) * 4)
    offsets = torch.randint(0, 2 * max_shift + 1, (n, 2), generator=generator)
    return torch.stack(
        [padded[i, :, dy : dy + h, dx : dx + w] for i, (dy, dx) in enumerate(offsets.tolist())]
    )


def train_model(config: dict, train: dict, seed: int = 0) -> nn.Module:
    """Train ``cnn.build`` with ``config`` on ``training_subset(config, train, seed)``.

    Returns the model in eval mode. See the module docstring for the recipe.
    """
    torch.set_num_threads(2)
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    subset = training_subset(config, train, seed)
    labels = subset["labels"]
    if config.get("label_noise", 0.0) > 0:
        labels = noisy_labels(labels, config["label_noise"], seed)
    x = torch.from_numpy(subset["images"])
    y = torch.from_numpy(labels)
    model = build(config["width"], config["depth"], config.get("dropout", 0.0))
    opt = torch.optim.Adam(
        model.parameters(), lr=LEARNING_RATE, weight_decay=config.get("weight_decay", 0.0)
    )
    model.train()
    for _ in range(config["epochs"]):
        perm = torch.randperm(len(x), generator=generator)
        for start in range(0, len(x), BATCH_SIZE):
            idx = perm[start : start + BATCH_SIZE]
            xb = x[idx]
            if config.get("augment", False):
                xb = shift_batch(xb, generator)
            loss = nn.functional.cross_entropy(model(xb), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval()


@torch.no_grad()
def accuracy(model: nn.Module, data: dict, batch_size: int = 256) -> float:
    """Fraction (0-1) of ``data["images"]`` whose argmax logit equals ``data["labels"]``."""
    model.eval()
    x = torch.from_numpy(data["images"])
    y = torch.from_numpy(data["labels"])
    correct = 0
    for start in range(0, len(x), batch_size):
        correct += (
            (model(x[start : start + batch_size]).argmax(1) == y[start : start + batch_size])
            .sum()
            .item()
        )
    return correct / len(x)


def train_all(out_dir, seed: int = 0) -> list[dict]:
    """Train every config of ``CONFIGS``; save ``model_{i:02d}.pt`` and ``models.json``
    into ``out_dir`` and return the rows (see the module docstring for their fields)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    train, test = split(make_canvases(seed=seed), seed=seed)
    rows = []
    for i, config in enumerate(CONFIGS):
        start = time.perf_counter()
        model = train_model(config, train, seed)
        seconds = time.perf_counter() - start
        torch.save(model.state_dict(), out_dir / f"model_{i:02d}.pt")
        train_acc = accuracy(model, training_subset(config, train, seed))
        test_acc = accuracy(model, test)
        rows.append(
            {
                "index": i,
                **config,
                "n_parameters": n_parameters(model),
                "train_accuracy": train_acc,
                "test_accuracy": test_acc,
                "gap": train_acc - test_acc,
                "train_seconds": round(seconds, 2),
            }
        )
        print(f"model {i:2d} trained in {seconds:5.1f} s", flush=True)
    (out_dir / "models.json").write_text(json.dumps(rows, indent=2) + "\n")
    return rows


def format_table(rows: list[dict]) -> str:
    """The rows as a fixed-width text table."""
    head = f"{'i':>2} {'width':>5} {'depth':>5} {'wd':>6} {'drop':>4} {'aug':>5} {'noise':>5} {'frac':>4} {'ep':>3} {'params':>6} {'train':>6} {'test':>6} {'gap':>6} {'sec':>5}"
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['index']:>2} {r['width']:>5} {r['depth']:>5} {r['weight_decay']:>6g} {r['dropout']:>4g} "
            f"{str(r['augment']):>5} {r['label_noise']:>5g} {r['train_fraction']:>4g} {r['epochs']:>3} "
            f"{r['n_parameters']:>6} {r['train_accuracy']:6.3f} {r['test_accuracy']:6.3f} {r['gap']:6.3f} {r['train_seconds']:5.1f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    t0 = time.perf_counter()
    rows = train_all(HERE / "models")
    print(format_table(rows))
    print(f"total {time.perf_counter() - t0:.1f} s")
