"""Fail-closed battery of the classifier measures (issue 12): NaN/Inf images refused by
every measure alike, big-endian and bfloat16 images converted, arguments type-checked."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc

torch = pytest.importorskip("torch")
nn = torch.nn


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 3))


NET = _net()
IMAGES = np.random.default_rng(0).normal(size=(6, 1, 8, 8)).astype(np.float32)
LABELS = np.array([0, 1, 2, 0, 1, 2])
BOXES = np.array([[0, 0, 4, 4]] * 6)


def _bad(kind):
    x = IMAGES.copy()
    x[2, 0, 1, 1] = np.nan if kind == "nan" else np.inf
    return x


@pytest.mark.parametrize("kind", ["nan", "inf"])
@pytest.mark.parametrize("call", [
    lambda x: rc.grad_cam(NET, x, "0", device="cpu"),
    lambda x: rc.grad_cam(NET, torch.from_numpy(x), "0", device="cpu"),
    lambda x: rc.evaluate_classifier(NET, x, metrics=["cam_iou"], layer="0", boxes=BOXES, device="cpu"),
    lambda x: rc.evaluate_classifier(NET, x, metrics=["cam_iou_box"], layer="0", boxes=BOXES, device="cpu"),
    lambda x: rc.evaluate_classifier(NET, x, LABELS, metrics=["accuracy"], device="cpu"),
    lambda x: rc.effective_invariance(NET, x, device="cpu"),
    lambda x: rc.nuclear_norm(NET, x, device="cpu"),
    lambda x: rc.classifier_accuracy(NET, x, LABELS, device="cpu"),
    lambda x: rc.predict_proba(NET, x, device="cpu"),
])
def test_non_finite_images_are_refused_everywhere(kind, call):
    with pytest.raises(rc.InputError, match=r"images has NaN or Inf in 1 image\(s\) \(images 2\)") as info:
        call(_bad(kind))
    assert "drop or repair" in str(info.value)


@pytest.mark.parametrize("convert", [lambda x: x.astype(">f4"), lambda x: x.astype(">f8"),
                                     lambda x: torch.from_numpy(x).bfloat16().float().bfloat16()])
def test_big_endian_and_bfloat16_images_are_converted(convert):
    x = convert(IMAGES)
    ref_images = torch.from_numpy(IMAGES).bfloat16().float().numpy() if torch.is_tensor(x) else IMAGES
    ref = rc.grad_cam(NET, ref_images, "0", device="cpu")
    got = rc.grad_cam(NET, x, "0", device="cpu")
    np.testing.assert_allclose(got, ref, atol=1e-6)
    p_ref = rc.predict_proba(NET, ref_images, device="cpu")
    np.testing.assert_allclose(rc.predict_proba(NET, x, device="cpu"), p_ref, atol=1e-6)


@pytest.mark.parametrize("kwargs,match", [
    (dict(rho=2), "rho"), (dict(rho="x"), "rho"), (dict(confidence=2), "confidence"),
    (dict(n_resamples="10"), "n_resamples"), (dict(seed=-1), "seed"), (dict(cam_method="cam"), "cam_method"),
    (dict(percentile=0), "percentile"), (dict(batch_size=0), "batch_size"), (dict(batch_size="8"), "batch_size"),
    (dict(metrics="acc"), "acc"), (dict(metrics=5), "metrics"), (dict(metrics=[]), "metrics is empty"),
])
def test_evaluate_classifier_arguments(kwargs, match):
    args = dict(metrics=["cam_iou"], layer="0", boxes=BOXES, device="cpu")
    args.update(kwargs)
    with pytest.raises(rc.InputError, match=match):
        rc.evaluate_classifier(NET, IMAGES, **args)


@pytest.mark.parametrize("kwargs,match", [
    (dict(rho=-0.1), "rho"), (dict(rho="a"), "rho"), (dict(confidence=float("nan")), "confidence"),
    (dict(n_resamples=-1), "n_resamples"), (dict(seed="s"), "seed"),
])
def test_cam_iou_arguments(kwargs, match):
    cams = np.random.default_rng(1).random((6, 8, 8))
    for fn in (rc.cam_iou, rc.cam_iou_box):
        with pytest.raises(rc.InputError, match=match):
            fn(cams, boxes=BOXES, **kwargs)


@pytest.mark.parametrize("cams,match", [
    (np.full((6, 8, 8), np.nan), "NaN or Inf"), (np.ones(6), "shape"), (np.array([["a"] * 8] * 8)[None].repeat(6, 0),
                                                                           "dtype"),
])
def test_cam_iou_refuses_bad_cams(cams, match):
    with pytest.raises(rc.InputError, match=match):
        rc.cam_iou(cams, boxes=BOXES)


@pytest.mark.parametrize("call,match", [
    (lambda: rc.nuclear_norm([["a", "b"]]), "dtype"),
    (lambda: rc.nuclear_norm(np.array([[np.nan, 1.0]])), "NaN or Inf"),
    (lambda: rc.nuclear_norm(np.array([[0.2, 0.2]])), "probability vectors"),
    (lambda: rc.effective_invariance(NET, IMAGES, transforms=[], device="cpu"), "transforms is empty"),
    (lambda: rc.effective_invariance(NET, IMAGES, transforms=lambda x: x, device="cpu"), "list of callables"),
    (lambda: rc.effective_invariance(NET, IMAGES, transforms=[5], device="cpu"), "callable"),
    (lambda: rc.spectral_measure(NET, IMAGES, LABELS, percentile="x", device="cpu"), "percentile"),
    (lambda: rc.spectral_measure(NET, IMAGES, LABELS.astype(float), device="cpu"), "class indices"),
    (lambda: rc.grad_cam(NET, IMAGES, "0", target="a", device="cpu"), "target"),
    (lambda: rc.grad_cam(NET, IMAGES, "0", batch_size=0, device="cpu"), "batch_size"),
    (lambda: rc.grad_cam(NET, IMAGES[:0], "0", device="cpu"), "images"),
    (lambda: rc.boxes_to_masks(BOXES, (8,)), "shape"),
    (lambda: rc.boxes_to_masks([["a", "b", "c", "d"]], (8, 8)), "not \\(k x 4\\) numbers"),
    (lambda: rc.classifier_accuracy(NET, IMAGES, ["a"] * 6, device="cpu"), "class indices"),
])
def test_classifier_function_arguments(call, match):
    with pytest.raises(rc.InputError, match=match):
        call()


def test_classifier_config_carries_confidence_and_seed():
    res = rc.evaluate_classifier(NET, IMAGES, metrics=["cam_iou"], layer="0", boxes=BOXES, device="cpu",
                                 confidence=0.8, seed=5, n_resamples=50)
    assert res.config["confidence"] == 0.8 and res.config["seed"] == 5
