"""What the gates say about image-text results (h19, h24's notes): a retrieval metric
names its image-text counterparts, a skip names the image-text option that refuses it,
and no scale hint suggests a value outside the metric's range."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import retrieval_checks as rc


@pytest.fixture(scope="module")
def dropped():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(20, 16))
    cap = np.repeat(np.arange(12), 5)  # images 12-19 have no caption: dropped
    captions = images[cap] + rng.normal(size=(60, 16))
    return rc.evaluate_image_text(
        images, captions, cap, images_without_captions="drop", n_resamples=0
    )


def test_a_retrieval_metric_names_its_image_text_counterparts(dropped):
    with pytest.raises(rc.InputError, match="hit_rate@1 is i2t_recall@1 .* or t2i_recall@1"):
        rc.assert_metric(dropped, "hit_rate@1", at_least=0.1)


def test_skipped_images_name_images_without_captions(dropped):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc.assert_metric(dropped, "i2t_recall@10", at_least=0.01)
    text = " ".join(str(w.message) for w in caught)
    assert "images without a caption" in text and "images_without_captions='error'" in text
    assert "empty_queries" not in text


def test_no_scale_hint_outside_the_range():
    """-1 on rsum suggested -100, as impossible as -1."""
    images = np.eye(12)
    cap = np.repeat(np.arange(12), 5)
    res = rc.evaluate_image_text(images, images[cap] + 0.1, cap, n_resamples=0)
    with pytest.raises(rc.InputError) as err:
        rc.assert_rsum(res, at_least=-1)
    assert "Did you mean" not in str(err.value)


def test_dropped_images_are_image_queries_only_and_rsum_limits_them(dropped):
    """A t2i metric's queries are the captions: none was dropped, so none is reported
    skipped (h27: '8 of 20 queries skipped' on t2i_recall@1); assert_rsum takes
    max_skipped, which its warning told users to set (it raised TypeError), and its
    failure names the cause (images without a caption), not the labels."""
    t2i = dropped.measure("t2i_recall@1")
    assert not t2i.n_skipped and "dropped" not in t2i.sample
    assert dropped.measure("i2t_recall@1").n_skipped == 8
    with pytest.raises(AssertionError, match="images without a caption, dropped.*give each image"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rc.assert_rsum(dropped, at_least=10, max_skipped=0)
