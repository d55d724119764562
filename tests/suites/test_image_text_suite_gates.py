"""Image-text checks of YAML suites that passed where they should have failed (h19/h24):
captions that are the image vectors, an rsum whose component recalls are 1 whatever
the model (4 images), 5fold1k on 5600 images, 900 of 1000 images dropped under a
suite's max_skipped: 0; and the messages for retrieval metrics asked of image-text
data. Cost: about 2 s (SuiteRunner in process on small arrays)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks import SuiteError, SuiteRunner, load_suite


def _suite(tmp_path, images, captions, image, checks: str, dataset: str = "", options: str = ""):
    np.savez(tmp_path / "imgs.npz", embeddings=images)
    np.savez(tmp_path / "caps.npz", embeddings=captions, image=image)
    p = tmp_path / "rc_it.yaml"
    p.write_text(
        "datasets:\n  v:\n    type: image_text\n"
        "    images: imgs.npz\n    captions: caps.npz\n"
        + (f"    {dataset}\n" if dataset else "")
        + (f"options: {options}\n" if options else "")
        + "checks:\n"
        + textwrap.indent(checks.strip() + "\n", "  ")
    )
    return load_suite(p)


def _data(n_images, per=5, seed=3, d=8):
    rng = np.random.default_rng(seed)
    images = rng.normal(size=(n_images, d)).astype(np.float32)
    image = np.repeat(np.arange(n_images), per)
    captions = (images[image] + rng.normal(size=(image.size, d))).astype(np.float32)
    return images, captions, image


def _run(suite, i=0):
    SuiteRunner().run(suite, suite.cases[i])


def test_captions_that_are_the_images_fail_the_check(tmp_path):
    images, _, image = _data(30)
    suite = _suite(tmp_path, images, images[image], image, "- {metric: rsum, at_least: 590}")
    with (
        pytest.warns(rc.SelfMatchWarning),
        pytest.raises(SuiteError, match="150 of 150 captions equal their own image's row"),
    ):
        _run(suite)


def test_rsum_with_certain_components_is_refused(tmp_path):
    rng = np.random.default_rng(5)
    images = rng.normal(size=(4, 32)).astype(np.float32)
    image = np.repeat(np.arange(4), 5)
    captions = rng.normal(size=(20, 32)).astype(np.float32)  # a random model
    suite = _suite(tmp_path, images, captions, image, "- {metric: rsum, at_least: 300}")
    with pytest.raises(
        SuiteError, match="recalls it adds up are 1 whatever the model.*t2i_recall@5.*more images"
    ):
        _run(suite)


def test_5fold1k_on_5600_images_is_refused(tmp_path):
    images, captions, image = _data(5600, per=1, d=4)
    suite = _suite(
        tmp_path, images, captions, image, "- {metric: rsum, at_least: 450}", "protocol: 5fold1k"
    )
    with pytest.raises(SuiteError, match="got 5600: the last 600 would not be scored"):
        _run(suite)


def test_dropped_images_count_against_max_skipped(tmp_path):
    images, captions, image = _data(200)
    keep = image < 20
    suite = _suite(
        tmp_path,
        images,
        captions[keep],
        image[keep],
        "- {metric: rsum, at_least: 10}\n- {metric: rsum, at_least: 10, max_skipped: 0.95}",
        "images_without_captions: drop",
        "{max_skipped: 0}",
    )
    events = []
    with (
        rc.gates.listening(events.append),
        pytest.raises(AssertionError, match="180 of 200 queries skipped"),
    ):
        _run(suite, 0)
    assert events[-1].n_skipped == 180 and not events[-1].passed
    with pytest.warns(RuntimeWarning, match="skipped 180 of 200"):
        _run(suite, 1)  # the check's own limit (a fraction) allows them, and says so


def test_retrieval_metrics_asked_of_image_text_data_point_to_its_own(tmp_path):
    images, captions, image = _data(30)
    with pytest.raises(SuiteError, match=r"hit_rate@1 is i2t_recall@1 .* or t2i_recall@1"):
        _suite(
            tmp_path, images, captions, image, "- {metric: hit_rate@1, dataset: v, at_least: 0.1}"
        )
    with pytest.raises(SuiteError, match=r"medr.* i2t_medr .* or t2i_medr"):
        _suite(tmp_path, images, captions, image, "- {metric: medr, dataset: v, at_most: 3}")
    with pytest.raises(SuiteError, match=r"0 retrieval .* Image-text metrics: i2t_recall@K"):
        _suite(tmp_path, images, captions, image, "- {metric: map, at_least: 0.1}")
