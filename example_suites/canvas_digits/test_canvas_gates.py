"""The canvas-digits classifier gates written as Python tests (the models of rc_canvas.yaml).

Grad-CAM IoU on the training images predicts which of two models generalizes better,
without test labels; the accuracy gap confirms it with test labels.

Run:  python -m pytest example_suites -v
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import retrieval_checks as rc

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def data():
    """The canvases conftest.py wrote for the YAML suite (train, the overfit model's 30%, test)."""
    out = {}
    for name in ("train", "train_30", "test"):
        with np.load(HERE / "data" / f"{name}.npz") as f:
            out[name] = {k: f[k] for k in f.files}
    return out


@pytest.fixture(scope="module")
def models():
    # torch is imported here, when a test runs, not at collection (it takes ~1 s to import)
    torch = pytest.importorskip(
        "torch", reason="the canvas example needs PyTorch (pip install torch)"
    )
    sys.path.insert(0, str(HERE))
    try:
        from cnn import build
    finally:
        sys.path.remove(str(HERE))
    out = {}
    for name in ("good", "overfit"):
        net = build(width=16, depth=3)
        net.load_state_dict(torch.load(HERE / "weights" / f"{name}.pt", weights_only=True))
        out[name] = net.eval()
    return out


def _pair(d):
    return d["images"], d["labels"]


def test_good_model_looks_at_the_digit(models, data):
    train = data["train"]
    res = rc.evaluate_classifier(
        models["good"],
        train["images"],
        train["labels"],
        boxes=train["boxes"],
        layer="features",
        metrics=["cam_iou", "cam_iou_box", "accuracy"],
    )
    print(f"\n{res}")
    rc.assert_cam_iou_at_least(res, 0.27, on="lower", metric="cam_iou")


def test_good_model_generalizes(models, data):
    gap = rc.classification_gap(models["good"], _pair(data["train"]), _pair(data["test"]))
    rc.assert_gap_below(gap, 0.08)


def test_iou_ranks_the_two_models_like_their_gaps(models, data):
    """The paper's model selection: the higher training-set IoU picks the smaller gap."""
    ious, gaps = {}, {}
    for name, train_set in (("good", "train"), ("overfit", "train_30")):
        d = data[train_set]
        cams = rc.grad_cam(models[name], d["images"], "features")
        ious[name] = rc.cam_iou(cams, boxes=d["boxes"]).value
        gaps[name] = rc.classification_gap(models[name], _pair(d), _pair(data["test"])).value
    print(f"\nIoU {ious}, gap {gaps}")
    assert (
        rc.selection_accuracy([ious["good"], ious["overfit"]], [gaps["good"], gaps["overfit"]])
        == 1.0
    )


def test_overfit_model_would_be_caught(models, data):
    # the gate above would fail this model: its whole interval lies above the 0.08 limit
    gap = rc.classification_gap(models["overfit"], _pair(data["train_30"]), _pair(data["test"]))
    print(f"\n{gap}")
    assert gap.low > 0.08
