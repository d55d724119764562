"""Produce the digits example's shipped files (run from anywhere; takes about a minute).

    python example_suites/digits/make_assets.py

Writes, next to this script:

- ``data/digits_train.npz``, ``data/digits_test.npz``: scikit-learn's digits split 70/30
  (stratified, seed 0) as ``inputs`` (n x 64, uint8 0-16) and ``labels``;
- ``data/digits_views.npz``: a paired dataset for image-text style metrics: every test
  image (``images``) with five "captions", each a different view of it (shifted by up
  to one pixel, with pixel noise), and ``image``, the index of each view's image;
- ``digits_cnn.pt``: the trained weights of ``digits_model.DigitsEmbedder`` (a
  state_dict: loads with ``torch.load(weights_only=True)``);
- ``embeddings/pca_*.npz``: the "production" model's precomputed embeddings
  (PCA to 16 dimensions, fitted on the training split), to compare against.

Training: a cosine-softmax classifier head (scale 16) over L2-normalised embeddings,
Adam, 60 epochs, random one-pixel shifts as augmentation, torch seed 0. The head is
thrown away; only the embedder is saved.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from digits_model import build
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.model_selection import train_test_split
from torch import nn

HERE = Path(__file__).resolve().parent


def shift(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Shift each 8x8 image by up to one pixel in each direction (zero fill)."""
    out = np.zeros_like(images)
    imgs = images.reshape(-1, 8, 8)
    res = out.reshape(-1, 8, 8)
    for i, (dy, dx) in enumerate(rng.integers(-1, 2, size=(len(imgs), 2))):
        src = imgs[i, max(0, -dy) : 8 - max(0, dy), max(0, -dx) : 8 - max(0, dx)]
        res[i, max(0, dy) : max(0, dy) + src.shape[0], max(0, dx) : max(0, dx) + src.shape[1]] = src
    return out


def views(
    images: np.ndarray, per_image: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    rep = np.repeat(images, per_image, axis=0)
    noisy = shift(rep, rng).astype(np.int16) + rng.integers(-2, 3, size=rep.shape)
    return np.clip(noisy, 0, 16).astype(np.uint8), np.repeat(np.arange(len(images)), per_image)


def train(x: np.ndarray, y: np.ndarray, epochs: int = 60) -> nn.Module:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = build()
    head = nn.Linear(16, 10, bias=False)
    opt = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=3e-3)
    yt = torch.from_numpy(y).long()
    for _ in range(epochs):
        xs = torch.from_numpy(shift(x, rng).astype(np.float32))
        perm = torch.randperm(len(x))
        for start in range(0, len(x), 64):
            idx = perm[start : start + 64]
            emb = nn.functional.normalize(model(xs[idx]), dim=1)
            logits = 16.0 * emb @ nn.functional.normalize(head.weight, dim=1).T
            loss = nn.functional.cross_entropy(logits, yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval()


def main() -> None:
    X, y = load_digits(return_X_y=True)
    X = X.astype(np.uint8)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    (HERE / "data").mkdir(exist_ok=True)
    (HERE / "embeddings").mkdir(exist_ok=True)
    np.savez_compressed(HERE / "data/digits_train.npz", inputs=X_tr, labels=y_tr)
    np.savez_compressed(HERE / "data/digits_test.npz", inputs=X_te, labels=y_te)
    caption_inputs, image = views(X_te, 5, np.random.default_rng(1))
    np.savez_compressed(
        HERE / "data/digits_views.npz", images=X_te, captions=caption_inputs, image=image
    )

    model = train(X_tr, y_tr)
    torch.save(model.state_dict(), HERE / "digits_cnn.pt")

    pca = PCA(n_components=16, random_state=0).fit(X_tr)
    for name, part in (("train", X_tr), ("test", X_te)):
        np.savez_compressed(
            HERE / f"embeddings/pca_{name}.npz", embeddings=pca.transform(part).astype(np.float32)
        )
    sizes = {
        p.name: p.stat().st_size for p in sorted(HERE.rglob("*")) if p.suffix in (".npz", ".pt")
    }
    print("wrote", ", ".join(f"{k} ({v / 1024:.0f} KiB)" for k, v in sizes.items()))


if __name__ == "__main__":
    main()
