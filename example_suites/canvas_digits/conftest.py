"""Writes the canvas datasets the YAML suite reads (data/*.npz, not committed) before
collection: they are generated from scikit-learn's digits, deterministically, in about
a second, so the repository ships code and two small weight files, not data."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FILES = ("train.npz", "train_30.npz", "test.npz")


def _save(path: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz")  # atomic: xdist workers may race
    os.close(fd)
    np.savez(tmp, **data)
    os.replace(tmp, path)


def write_datasets(out: Path = HERE / "data") -> None:
    if all((out / f).exists() for f in FILES):
        return
    sys.path.insert(0, str(HERE))
    try:
        from canvas_data import make_canvases, split
        from model_set import CONFIGS, training_subset
    finally:
        sys.path.remove(str(HERE))
    out.mkdir(exist_ok=True)
    train, test = split(make_canvases())
    _save(out / "train.npz", train)
    _save(
        out / "train_30.npz", training_subset(CONFIGS[6], train, seed=0)
    )  # what weights/overfit.pt saw
    _save(out / "test.npz", test)


def pytest_configure(config):
    write_datasets()
