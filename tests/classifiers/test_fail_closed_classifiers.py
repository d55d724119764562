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
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 3),
    )


NET = _net()
IMAGES = np.random.default_rng(0).normal(size=(6, 1, 8, 8)).astype(np.float32)
LABELS = np.array([0, 1, 2, 0, 1, 2])
BOXES = np.array([[0, 0, 4, 4]] * 6)


def _bad(kind):
    x = IMAGES.copy()
    x[2, 0, 1, 1] = np.nan if kind == "nan" else np.inf
    return x


@pytest.mark.parametrize("kind", ["nan", "inf"])
@pytest.mark.parametrize(
    "call",
    [
        lambda x: rc.grad_cam(NET, x, "0", device="cpu"),
        lambda x: rc.grad_cam(NET, torch.from_numpy(x), "0", device="cpu"),
        lambda x: rc.evaluate_classifier(
            NET, x, metrics=["cam_iou"], layer="0", boxes=BOXES, device="cpu"
        ),
        lambda x: rc.evaluate_classifier(
            NET, x, metrics=["cam_iou_box"], layer="0", boxes=BOXES, device="cpu"
        ),
        lambda x: rc.evaluate_classifier(NET, x, LABELS, metrics=["accuracy"], device="cpu"),
        lambda x: rc.effective_invariance(NET, x, device="cpu"),
        lambda x: rc.nuclear_norm(NET, x, device="cpu"),
        lambda x: rc.classifier_accuracy(NET, x, LABELS, device="cpu"),
        lambda x: rc.predict_proba(NET, x, device="cpu"),
    ],
)
def test_non_finite_images_are_refused_everywhere(kind, call):
    with pytest.raises(
        rc.InputError, match=r"images has NaN or Inf in 1 image\(s\) \(images 2\)"
    ) as info:
        call(_bad(kind))
    assert "drop or repair" in str(info.value)


@pytest.mark.parametrize(
    "convert",
    [
        lambda x: x.astype(">f4"),
        lambda x: x.astype(">f8"),
        lambda x: torch.from_numpy(x).bfloat16().float().bfloat16(),
    ],
)
def test_big_endian_and_bfloat16_images_are_converted(convert):
    x = convert(IMAGES)
    ref_images = (
        torch.from_numpy(IMAGES).bfloat16().float().numpy() if torch.is_tensor(x) else IMAGES
    )
    ref = rc.grad_cam(NET, ref_images, "0", device="cpu")
    got = rc.grad_cam(NET, x, "0", device="cpu")
    np.testing.assert_allclose(got, ref, atol=1e-6)
    p_ref = rc.predict_proba(NET, ref_images, device="cpu")
    np.testing.assert_allclose(rc.predict_proba(NET, x, device="cpu"), p_ref, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(rho=2), "rho"),
        (dict(rho="x"), "rho"),
        (dict(confidence=2), "confidence"),
        (dict(n_resamples="10"), "n_resamples"),
        (dict(seed=-1), "seed"),
        (dict(cam_method="cam"), "cam_method"),
        (dict(percentile=0), "percentile"),
        (dict(batch_size=0), "batch_size"),
        (dict(batch_size="8"), "batch_size"),
        (dict(metrics="acc"), "acc"),
        (dict(metrics=5), "metrics"),
        (dict(metrics=[]), "metrics is empty"),
    ],
)
def test_evaluate_classifier_arguments(kwargs, match):
    args = dict(metrics=["cam_iou"], layer="0", boxes=BOXES, device="cpu")
    args.update(kwargs)
    with pytest.raises(rc.InputError, match=match):
        rc.evaluate_classifier(NET, IMAGES, **args)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(rho=-0.1), "rho"),
        (dict(rho="a"), "rho"),
        (dict(confidence=float("nan")), "confidence"),
        (dict(n_resamples=-1), "n_resamples"),
        (dict(seed="s"), "seed"),
    ],
)
def test_cam_iou_arguments(kwargs, match):
    cams = np.random.default_rng(1).random((6, 8, 8))
    for fn in (rc.cam_iou, rc.cam_iou_box):
        with pytest.raises(rc.InputError, match=match):
            fn(cams, boxes=BOXES, **kwargs)


@pytest.mark.parametrize(
    "cams,match",
    [
        (np.full((6, 8, 8), np.nan), "NaN or Inf"),
        (np.ones(6), "shape"),
        (np.array([["a"] * 8] * 8)[None].repeat(6, 0), "dtype"),
    ],
)
def test_cam_iou_refuses_bad_cams(cams, match):
    with pytest.raises(rc.InputError, match=match):
        rc.cam_iou(cams, boxes=BOXES)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: rc.nuclear_norm([["a", "b"]]), "dtype"),
        (lambda: rc.nuclear_norm(np.array([[np.nan, 1.0]])), "NaN or Inf"),
        (lambda: rc.nuclear_norm(np.array([[0.2, 0.2]])), "probability vectors"),
        (
            lambda: rc.effective_invariance(NET, IMAGES, transforms=[], device="cpu"),
            "transforms is empty",
        ),
        (
            lambda: rc.effective_invariance(NET, IMAGES, transforms=lambda x: x, device="cpu"),
            "list of callables",
        ),
        (lambda: rc.effective_invariance(NET, IMAGES, transforms=[5], device="cpu"), "callable"),
        (
            lambda: rc.spectral_measure(NET, IMAGES, LABELS, percentile="x", device="cpu"),
            "percentile",
        ),
        (
            lambda: rc.spectral_measure(NET, IMAGES, LABELS.astype(float), device="cpu"),
            "class indices",
        ),
        (lambda: rc.grad_cam(NET, IMAGES, "0", target="a", device="cpu"), "target"),
        (lambda: rc.grad_cam(NET, IMAGES, "0", batch_size=0, device="cpu"), "batch_size"),
        (lambda: rc.grad_cam(NET, IMAGES[:0], "0", device="cpu"), "images"),
        (lambda: rc.boxes_to_masks(BOXES, (8,)), "shape"),
        (lambda: rc.boxes_to_masks([["a", "b", "c", "d"]], (8, 8)), "not \\(k x 4\\) numbers"),
        (lambda: rc.classifier_accuracy(NET, IMAGES, ["a"] * 6, device="cpu"), "class indices"),
    ],
)
def test_classifier_function_arguments(call, match):
    with pytest.raises(rc.InputError, match=match):
        call()


def test_classifier_config_carries_confidence_and_seed():
    res = rc.evaluate_classifier(
        NET,
        IMAGES,
        metrics=["cam_iou"],
        layer="0",
        boxes=BOXES,
        device="cpu",
        confidence=0.8,
        seed=5,
        n_resamples=50,
    )
    assert res.config["confidence"] == 0.8 and res.config["seed"] == 5


# ----------------------------------------------------------------------------- review of issue 12
def test_evaluate_classifier_refuses_labels_outside_the_models_classes_like_accuracy():
    with pytest.raises(rc.InputError, match=r"outside \[0, 3\)") as info:
        rc.evaluate_classifier(NET, IMAGES, LABELS + 5, metrics=["accuracy"], device="cpu")
    assert "labels must index" in str(info.value) and "label encoding" in str(info.value)
    logits = rc.predict_proba(NET, IMAGES, device="cpu")
    with pytest.raises(rc.InputError, match=r"outside \[0, 3\)"):
        rc.accuracy(logits, LABELS + 5)
    ok = rc.evaluate_classifier(NET, IMAGES, LABELS, metrics=["accuracy"], device="cpu")
    assert ok["accuracy"] == rc.accuracy(logits.argmax(axis=1), LABELS).value


@pytest.mark.parametrize("coord", [10**400, -(10**400)])
@pytest.mark.parametrize("as_array", [False, True])
def test_cam_iou_refuses_a_box_too_large_for_a_float(coord, as_array):
    boxes = [[0, 0, coord, 8]] + [[0, 0, 4, 4]] * 5
    boxes = np.array(boxes, dtype=object) if as_array else boxes
    cams = np.random.default_rng(0).random((6, 8, 8))
    with pytest.raises(rc.InputError, match="boxes of image 0") as info:
        rc.cam_iou(cams, boxes=boxes)
    assert "(x0, y0, x1, y1)" in str(info.value) and len(str(info.value)) < 300


@pytest.mark.parametrize(
    "coord,match", [(float("inf"), "not finite"), (1e300, "outside"), (float("nan"), "not finite")]
)
def test_cam_iou_names_boxes_and_the_image_for_bad_coordinates(coord, match):
    cams = np.random.default_rng(0).random((6, 8, 8))
    boxes = [[0, 0, 4, 4]] * 3 + [[0, 0, coord, 8]] + [[0, 0, 4, 4]] * 2
    with pytest.raises(rc.InputError, match=match) as info:
        rc.cam_iou_box(cams, boxes=boxes)
    assert "boxes: image 3" in str(info.value)


def test_nuclear_norm_of_a_model_without_images_says_images_is_missing():
    with pytest.raises(rc.InputError, match="images= is missing") as info:
        rc.nuclear_norm(NET)
    assert "nuclear_norm(model, images)" in str(info.value)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_nuclear_norm_takes_low_precision_softmax(dtype):
    p = torch.softmax(torch.randn(50, 10, generator=torch.Generator().manual_seed(0)), dim=1)
    want = rc.nuclear_norm(p.double().numpy()).value
    got = rc.nuclear_norm(p.to(getattr(torch, dtype))).value
    assert got == pytest.approx(want, abs=2e-2)
    with pytest.raises(rc.InputError, match="probability vectors"):
        rc.nuclear_norm((p * 1.2).to(getattr(torch, dtype)))


@pytest.mark.parametrize("upsample", ["no", 1, None, [True]])
def test_grad_cam_type_checks_upsample(upsample):
    with pytest.raises(rc.InputError, match="upsample=") as info:
        rc.grad_cam(NET, IMAGES, "0", device="cpu", upsample=upsample)
    assert "True" in str(info.value) and "False" in str(info.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda y: rc.classifier_accuracy(NET, IMAGES, y, device="cpu"),
        lambda y: rc.classification_gap(NET, (IMAGES, y), (IMAGES, LABELS), device="cpu"),
    ],
)
def test_every_classifier_accuracy_refuses_labels_outside_the_models_classes(call):
    with pytest.raises(rc.InputError, match=r"outside \[0, 3\)"):
        call(LABELS + 5)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"batch_size": "a"}, "batch_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"device": 5}, "device"),
        ({"device": "gpu"}, "device"),
    ],
)
def test_nuclear_norm_checks_its_arguments_also_for_a_probability_matrix(kwargs, field):
    with pytest.raises(rc.InputError, match=field):
        rc.nuclear_norm(np.full((4, 3), 1 / 3), **kwargs)
