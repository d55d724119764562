"""Image-text evaluations that passed gates they should have failed (a new user's
trial, h19/h24): captions that are the image vectors (Rsum 600, no warning), the 1k /
5fold1k protocols on image counts they cannot use whole (5600 images: the last 600
never scored, yet counted), images dropped for having no caption (900 of 1000, said
nowhere), and the repeated layout inferred from runs that equal neighbouring images
could have made (1000 images read as 500). Cost: about 2 s."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc


def _pairs(n_images=40, per=5, d=16, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.normal(size=(n_images, d)).astype(np.float32)
    ci = np.repeat(np.arange(n_images), per)
    captions = (images[ci] + rng.normal(size=(ci.size, d))).astype(np.float32)
    return images, captions, ci


# --------------------------------------------------------------- protocols


@pytest.mark.parametrize(
    "protocol,n,match",
    [
        (
            "5fold1k",
            5600,
            r"scores exactly 5000 images .* got 5600: the last 600 would not be scored",
        ),
        ("1k", 1200, r"scores exactly 1000 images .* got 1200: the last 200 would not be scored"),
        ("1k", 999, r"needs exactly 1000 images .* got 999"),
    ],
)
def test_protocols_refuse_image_counts_they_cannot_use_whole(protocol, n, match):
    images, captions, ci = _pairs(n, per=1, d=4, seed=1)
    with pytest.raises(rc.InputError, match=match):
        rc.evaluate_image_text(images, captions, ci, protocol=protocol, n_resamples=0)


def test_1k_on_1000_images_reports_the_1000_it_scored():
    images, captions, ci = _pairs(1000, per=1, d=4, seed=1)
    r = rc.evaluate_image_text(images, captions, ci, protocol="1k", n_resamples=0)
    assert r.n_images == 1000 and r.config["folds"] == [[0, 1000]]
