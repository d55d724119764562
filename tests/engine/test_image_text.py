"""Image-text retrieval against a brute-force implementation written from the definitions
(argsort of the full similarity matrix), a hand-checked example, layouts and protocols;
and the fail-closed battery (issue 12, at the end): overflowing and subnormal scores,
bfloat16 inputs, every argument type-checked, the caption-image mapping checked, and a
property test that only the library's errors escape ``evaluate_image_text``.
Cost: about 18 s at a load average of 14 (measured, the whole file)."""

from __future__ import annotations

import numpy as np
import pytest
from harness import IMAGE_TEXT_PATHS, check_image_text
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_setup import engine_junk
from shared_setup import only_library_errors as _call

import retrieval_checks as rc

torch = pytest.importorskip("torch")

ALL = list(rc.IMAGE_TEXT_METRICS)


def _data(n_images, ratio, d=16, noise=1.2, seed=0, variable=False):
    rng = np.random.default_rng(seed)
    images = rng.normal(size=(n_images, d)).astype(np.float32)
    if variable:
        per = rng.integers(1, 8, n_images)
    else:
        per = np.full(n_images, ratio)
    caption_image = np.repeat(np.arange(n_images), per)
    captions = (images[caption_image] + noise * rng.normal(size=(caption_image.size, d))).astype(
        np.float32
    )
    return images, captions, caption_image


@pytest.mark.parametrize("variable", [False, True], ids=["1:5", "variable ratio"])
@pytest.mark.parametrize("device", ["cpu", "numpy"])
def test_equals_brute_force(variable, device):
    """The harness (tests/harness.py): the reference on this device, captions in any
    order, images renumbered (the variable-ratio case)."""
    images, captions, ci = _data(120, 5, variable=variable, seed=3)
    perm = np.random.default_rng(1).permutation(ci.size)  # captions in any order
    captions, ci = captions[perm], ci[perm]
    paths = [
        p for p in IMAGE_TEXT_PATHS if p.name == ("numpy" if device == "numpy" else "torch-cpu")
    ]
    ref = check_image_text(images, captions, ci, ALL, paths=paths, permute=variable)
    assert 0 < ref["t2i_recall@1"] < 1 and 0 < ref["i2t_recall@1"] < 1  # a non-trivial case


def test_worked_example_two_images_ten_captions():
    """Hand-checked: 2 images, 5 captions each, 2-d embeddings.

    Image 0 = (1, 0), image 1 = (0, 1). Captions of image 0 point at angles 10, 20, 30,
    60, 80 degrees; captions of image 1 at 85, 70, 50, 40, 5 degrees (from the x axis).
    The cosine of a caption at angle a is cos(a) with image 0 and sin(a) with image 1.
    i2t: image 0's best own caption (10 deg, cos 0.985) is beaten by image 1's caption at
    5 deg (cos 0.996), so image 0 ranks 2; image 1's best own caption (85 deg, 0.996)
    beats image 0's best (80 deg, 0.985), so image 1 ranks 1. i2t_recall@1 = 0.5,
    @5 = @10 = 1; i2t ranks [2, 1]: medr = floor(median(1, 0)) + 1 = 1, meanr = 1.5.
    t2i: a caption prefers image 0 when a < 45 deg. Image-0 captions at 60 and 80 and
    image-1 captions at 40 and 5 rank their image 2nd: t2i_recall@1 = 0.6, @5 = @10 = 1;
    t2i ranks [1,1,1,2,2, 1,1,1,2,2]: medr 1, meanr 1.4.
    rsum = 100 * (0.5 + 1 + 1 + 0.6 + 1 + 1) = 510; mean_recall = 85.
    """
    images = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    angles = np.radians([10, 20, 30, 60, 80, 85, 70, 50, 40, 5])
    captions = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    ci = np.repeat([0, 1], 5)
    res = rc.evaluate_image_text(images, captions, ci, n_resamples=0)
    assert res["i2t_recall@1"] == 0.5
    assert res["i2t_recall@5"] == 1.0 and res["i2t_recall@10"] == 1.0
    assert res["t2i_recall@1"] == pytest.approx(0.6)
    assert res["t2i_recall@5"] == 1.0 and res["t2i_recall@10"] == 1.0
    assert res["rsum"] == pytest.approx(510.0)
    assert res["mean_recall"] == pytest.approx(85.0)
    assert res["t2i_medr"] == 1 and res["t2i_meanr"] == pytest.approx(1.4)
    assert res["i2t_medr"] == 1 and res["i2t_meanr"] == 1.5
    np.testing.assert_array_equal(res.i2t_ranks[0], [2, 1])
    np.testing.assert_array_equal(res.t2i_ranks[0], [1, 1, 1, 2, 2, 1, 1, 1, 2, 2])


def test_repeated_image_layout_is_detected_and_deduplicated():
    images, captions, ci = _data(60, 5, seed=2)
    ref = rc.evaluate_image_text(images, captions, ci, n_resamples=200)
    rep = rc.evaluate_image_text(np.repeat(images, 5, axis=0), captions, n_resamples=200)
    assert rep.layout == "repeated" and rep.n_images == 60 and ref.layout == "indexed"
    for name in ALL:
        assert rep[name] == ref[name], name
        assert rep.intervals[name] == ref.intervals[name]
    # a variable ratio in the repeated layout is refused (two neighbouring images with
    # equal embeddings would read as one image of more captions): caption_image serves it
    images, captions, ci = _data(40, 0, variable=True, seed=4)
    assert np.unique(np.bincount(ci)).size > 1
    with pytest.raises(rc.InputError, match=r"repeats its images unequally: .* pass caption_image"):
        rc.evaluate_image_text(images[ci], captions, n_resamples=0)


def test_the_repeated_layout_refuses_what_it_cannot_tell_apart():
    """A new user's trial: a collapsed image encoder (one constant row for every caption)
    read as one image owning all 500 captions, Rsum 600; two neighbouring images with
    equal embeddings merged silently (50 -> 49 images)."""
    rng = np.random.default_rng(0)
    captions = rng.normal(size=(500, 16))
    with pytest.raises(rc.InputError, match="one distinct row for all 500 captions"):
        rc.evaluate_image_text(np.ones((500, 16)), captions, None)
    img = rng.normal(size=(50, 16))
    img[1] = img[0]
    ci = np.repeat(np.arange(50), 5)
    with pytest.raises(rc.InputError, match="48 images of 5 rows, 1 image of 10 rows"):
        rc.evaluate_image_text(img[ci], img[ci] + rng.normal(size=(250, 16)), None)
    # the same data with caption_image: 50 images, the equal two tie
    res = rc.evaluate_image_text(img, img[ci] + rng.normal(size=(250, 16)), ci)
    assert res.n_images == 50


@pytest.mark.slow
def test_5fold1k_is_the_mean_of_five_1k_evaluations():
    images, captions, ci = _data(5000, 5, d=8, noise=0.5, seed=5)
    five = rc.evaluate_image_text(images, captions, ci, protocol="5fold1k", n_resamples=0)
    folds = []
    for f in range(5):
        keep = (ci >= 1000 * f) & (ci < 1000 * (f + 1))
        one = rc.evaluate_image_text(
            images[1000 * f : 1000 * (f + 1)],
            captions[keep],
            ci[keep] - 1000 * f,
            protocol="1k",
            n_resamples=0,
        )
        folds.append(one)
        for name in ALL:
            assert five.per_fold[f][name] == one[name], (f, name)
    for name in ALL:
        assert five[name] == pytest.approx(np.mean([o[name] for o in folds])), name
    # rsum of 5fold1k is the mean of the per-fold rsums
    assert five["rsum"] == pytest.approx(np.mean([fo["rsum"] for fo in five.per_fold]))
    # '1k' on the 5000 images would score the first 1000 and count 5000: refused
    with pytest.raises(
        rc.InputError, match=r"protocol='1k' scores exactly 1000 images .* got 5000"
    ):
        rc.evaluate_image_text(images, captions, ci, protocol="1k", n_resamples=0)


def test_bootstrap_over_images():
    images, captions, ci = _data(150, 5, seed=6)
    res = rc.evaluate_image_text(images, captions, ci, n_resamples=500, seed=1)
    again = rc.evaluate_image_text(images, captions, ci, n_resamples=500, seed=1)
    assert res.intervals == again.intervals
    for name in ALL:
        lo, hi = res.intervals[name]
        assert lo <= res[name] <= hi or name.endswith("medr"), name
    lo, hi = res.intervals["rsum"]
    assert 0 <= lo < hi <= 600
    # the rsum interval is built from the same replicates as its parts
    assert res.intervals["mean_recall"] == pytest.approx((lo / 6, hi / 6))


def test_assert_rsum():
    images, captions, ci = _data(150, 5, seed=6)
    res = rc.evaluate_image_text(images, captions, ci, n_resamples=300)
    rc.assert_rsum(res, at_least=res["rsum"] - 1e-6)
    with pytest.raises(AssertionError) as info:
        rc.assert_rsum(res, at_least=res.intervals["rsum"][0] + 1e-6, on="lower")
    msg = str(info.value)
    for fragment in [
        "rsum interval's lower bound",
        "percentage points",
        "95% interval",
        "i2t_recall@1",
        "150 images, 750 captions",
        "rule: fail when the interval's lower bound",
    ]:
        assert fragment in msg, fragment
    with pytest.raises(rc.InputError, match="needs the bootstrap interval"):
        rc.assert_rsum(rc.evaluate_image_text(images, captions, ci, n_resamples=0), 100, on="lower")


def test_torch_inputs():
    torch = pytest.importorskip("torch")
    images, captions, ci = _data(50, 5, seed=8)
    a = rc.evaluate_image_text(images, captions, ci, n_resamples=0)
    b = rc.evaluate_image_text(
        torch.from_numpy(images), torch.from_numpy(captions), torch.from_numpy(ci), n_resamples=0
    )
    c = rc.evaluate_image_text(
        torch.from_numpy(np.repeat(images, 5, axis=0)), torch.from_numpy(captions), n_resamples=0
    )
    for name in ALL:
        assert a[name] == b[name] == c[name], name


@pytest.mark.parametrize(
    "call, fragment",
    [
        (
            lambda im, c, ci: rc.evaluate_image_text(im, c, np.r_[ci[:-1], 99]),
            "point at a missing image",
        ),
        (
            lambda im, c, ci: rc.evaluate_image_text(np.r_[im, im[:1]], c, ci),
            "1 image(s) have no caption",
        ),
        (
            lambda im, c, ci: rc.evaluate_image_text(im, c, ci, protocol="5fold1k"),
            "needs exactly 5000 images",
        ),
        (
            lambda im, c, ci: rc.evaluate_image_text(im, c, ci, protocol="1k"),
            "needs exactly 1000 images",
        ),
        (
            lambda im, c, ci: rc.evaluate_image_text(im[:, :3], c, ci),
            "images have dimension 3 but captions",
        ),
        (lambda im, c, ci: rc.evaluate_image_text(im, c, ci, protocol="10k"), "protocol='10k'"),
        (
            lambda im, c, ci: rc.evaluate_image_text(im, c, ci, metrics=["map"]),
            "not an image-text metric",
        ),
        (lambda im, c, ci: rc.evaluate_image_text(im, c, ci[:-1]), "one image index per caption"),
        (lambda im, c, ci: rc.evaluate_image_text(im, c), "caption_image is missing"),
    ],
)
def test_bad_input(call, fragment):
    images, captions, ci = _data(20, 5, seed=9)
    with pytest.raises(rc.InputError) as info:
        call(images, captions, ci)
    assert fragment in str(info.value)


def test_images_without_captions_can_be_dropped():
    images, captions, ci = _data(20, 5, seed=9)
    extra = np.r_[images[:3], images]  # three images nobody describes, first
    res = rc.evaluate_image_text(
        extra, captions, ci + 3, images_without_captions="drop", n_resamples=0
    )
    ref = rc.evaluate_image_text(images, captions, ci, n_resamples=0)
    assert res.config["images_dropped"] == 3
    assert all(res[n] == ref[n] for n in ALL)


def test_image_text_names_are_canonical_and_kept_out_of_evaluate():
    assert rc.canonical_metric_name("I2T_Recall@05") == "i2t_recall@5"
    assert rc.parse_metric("rsum").unit == "percentage points"
    assert rc.parse_metric("mean_recall").unit == "percent"
    assert not rc.parse_metric("t2i_medr").higher_is_better
    with pytest.raises(rc.MetricNameError, match="evaluate_image_text"):
        rc.evaluate(np.eye(3, dtype=np.float32), query_labels=[0, 0, 1], metrics=["rsum"])


# --- the data of the fail-closed battery below ---
RNG = np.random.default_rng(12)
_junk = engine_junk()


# --- fail closed (issue 12): float32 range, bfloat16 and subnormal inputs ---
def test_image_text_refuses_overflowing_dot_scores():
    img = RNG.normal(size=(5, 4)).astype(np.float32)
    with pytest.raises(rc.InputError, match="images and captions are too large"):
        rc.evaluate_image_text(
            img * np.float32(1e20),
            img * np.float32(1e20),
            np.arange(5),
            similarity="dot",
            n_resamples=0,
        )


def test_bfloat16_image_text():
    img = torch.from_numpy(RNG.normal(size=(6, 4)).astype(np.float32))
    ref = rc.evaluate_image_text(
        img.bfloat16().float(), img.bfloat16().float(), np.arange(6), n_resamples=0
    )
    got = rc.evaluate_image_text(img.bfloat16(), img.bfloat16(), np.arange(6), n_resamples=0)
    assert dict(got) == dict(ref)


@pytest.mark.parametrize("device", ["numpy", "torch-cpu"])
def test_image_text_cosine_of_subnormal_rows_equals_the_unscaled_result(device):
    rng = np.random.default_rng(1)
    imgs = rng.normal(size=(20, 8))
    caps = imgs.repeat(5, axis=0) + rng.normal(size=(100, 8)) * 2
    cap_img = np.arange(100) // 5
    kw = dict(metrics=["rsum"], device=device, n_resamples=100)
    want = rc.evaluate_image_text(imgs, caps, cap_img, **kw)["rsum"]
    got = rc.evaluate_image_text(imgs * 1e-310, caps * 1e-310, cap_img, **kw)["rsum"]
    assert got == pytest.approx(want)
    assert got < 600


# --- fail closed: arguments type-checked, the caption-image mapping checked ---
IMG = RNG.normal(size=(6, 4)).astype(np.float32)


CAP = RNG.normal(size=(12, 4)).astype(np.float32)


CI = np.repeat(np.arange(6), 2)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(n_resamples="10"), "n_resamples"),
        (dict(n_resamples=-1), "n_resamples"),
        (dict(confidence=2), "confidence"),
        (dict(confidence=float("nan")), "confidence"),
        (dict(confidence="x"), "confidence"),
        (dict(seed=-1), "seed"),
        (dict(seed="a"), "seed"),
        (dict(protocol=["5k"]), "protocol"),
        (dict(protocol="5K"), "protocol"),
        (dict(images_without_captions=["drop"]), "images_without_captions"),
        (dict(metrics=5), "metrics"),
        (dict(metrics=["map"]), "not an image-text metric"),
        (dict(metrics=["i2t_recall@0"]), "positive integer"),
        (dict(similarity="l2"), "similarity"),
        (dict(progress="no"), "progress"),
    ],
)
def test_image_text_arguments_are_type_checked(kwargs, match):
    with pytest.raises(rc.InputError, match=match):
        rc.evaluate_image_text(IMG, CAP, CI, **kwargs)


@pytest.mark.parametrize(
    "ci,match",
    [
        (np.repeat(np.arange(6), 2) + 1, "point at a missing image"),
        (np.repeat(np.arange(6), 2) - 1, "point at a missing image"),
        (np.repeat(np.arange(6), 2).astype(float), "integer image indices"),
        (np.arange(5), "one image index per caption"),
        ({0: [0, 1]}, "one image index per caption"),
        (np.repeat(np.arange(6), 2) > 2, "integer image indices"),
    ],
)
def test_caption_image_mapping_is_checked(ci, match):
    with pytest.raises(rc.InputError, match=match) as info:
        rc.evaluate_image_text(IMG, CAP, ci, n_resamples=0)
    assert "caption" in str(info.value)


def test_image_text_config_carries_confidence_and_seed():
    res = rc.evaluate_image_text(IMG, CAP, CI, confidence=0.9, seed=3, n_resamples=100)
    assert res.config["confidence"] == 0.9 and res.config["seed"] == 3 and res.confidence == 0.9


# --- fail closed, property: only library errors escape evaluate_image_text ---
@settings(max_examples=50, deadline=None)
@given(
    images=_junk,
    caption_image=_junk,
    option=st.sampled_from(
        [
            "protocol",
            "confidence",
            "n_resamples",
            "seed",
            "similarity",
            "metrics",
            "images_without_captions",
        ]
    ),
    value=_junk,
)
def test_image_text_raises_only_library_errors(images, caption_image, option, value):
    _call(lambda: rc.evaluate_image_text(images, CAP, caption_image))
    _call(lambda: rc.evaluate_image_text(IMG, CAP, CI, **{option: value}))
    _call(lambda: rc.evaluate_image_text(IMG, CAP, caption_image, n_resamples=0))
