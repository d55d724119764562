"""Image-text evaluations that passed gates they should have failed (a new user's
trial, h19/h24): captions that are the image vectors (Rsum 600, no warning), the 1k /
5fold1k protocols on image counts they cannot use whole (5600 images: the last 600
never scored, yet counted), images dropped for having no caption (900 of 1000, said
nowhere), and the repeated layout inferred from runs that equal neighbouring images
could have made (1000 images read as 500). Cost: about 2 s."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.errors import SelfMatchWarning


def _pairs(n_images=40, per=5, d=16, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.normal(size=(n_images, d)).astype(np.float32)
    ci = np.repeat(np.arange(n_images), per)
    captions = (images[ci] + rng.normal(size=(ci.size, d))).astype(np.float32)
    return images, captions, ci


# --------------------------------------------------------------- captions == images


def test_captions_that_are_the_image_vectors_warn_and_every_gate_refuses():
    images, _, ci = _pairs()
    with pytest.warns(
        SelfMatchWarning, match="200 of 200 captions equal their own image's row"
    ) as w:
        r = rc.evaluate_image_text(images, images[ci], ci)
    assert (w[0].message.n_found, w[0].message.n_queries) == (200, 200)
    assert r["rsum"] == 600.0 and r.config["self_matched"] == 200
    for gate in (
        lambda: rc.assert_rsum(r, 599, on="lower"),
        lambda: rc.assert_rsum(r, 300),
        lambda: rc.assert_metric(r, "i2t_recall@1", at_least=0.5),
    ):
        with pytest.raises(
            rc.InputError, match="Rsum is 600 for any model.*text encoder's features"
        ):
            gate()


def test_some_captions_equal_to_their_image_are_counted_not_refused():
    images, captions, ci = _pairs()
    captions[:30] = images[ci[:30]]
    with pytest.warns(SelfMatchWarning, match=r"30 of 200 captions .*15\.0% of the captions") as w:
        r = rc.evaluate_image_text(images, captions, ci)
    assert w[0].message.n_found == 30
    rc.assert_metric(r, "t2i_recall@1", at_least=0.01)  # judged: not every caption is one


def test_captions_of_their_own_are_not_counted_and_torch_inputs_are_checked():
    torch = pytest.importorskip("torch")
    images, captions, ci = _pairs()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelfMatchWarning)
        r = rc.evaluate_image_text(images, captions, ci, n_resamples=0)
    assert "self_matched" not in r.config
    with pytest.warns(SelfMatchWarning, match="200 of 200"):
        rc.evaluate_image_text(
            torch.from_numpy(images), torch.from_numpy(images[ci]), ci, n_resamples=0
        )


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


# --------------------------------------------------------------- dropped images


def test_dropped_images_are_skipped_queries_reported_and_limited():
    images, captions, ci = _pairs(200, seed=5)
    keep = ci < 20  # only the first 20 images have captions
    r = rc.evaluate_image_text(images, captions[keep], ci[keep], images_without_captions="drop")
    assert r.n_images == 20 and r.dropped_images() == 180
    m = r.measure("rsum")
    assert (m.n_used, m.n_skipped) == (20, 180)
    assert "180 images without a caption dropped" in m.sample and "180 images" in repr(r)
    events = []
    with (
        rc.gates.listening(events.append),
        pytest.warns(RuntimeWarning, match="skipped 180 of 200"),
    ):
        rc.assert_rsum(r, 10)
    assert events[-1].n_skipped == 180 and events[-1].passed
    with (
        pytest.raises(AssertionError, match="180 of 200 queries skipped"),
        pytest.warns(RuntimeWarning),
    ):
        rc.assert_metric(r, "rsum", at_least=10, max_skipped=0)
    # nothing dropped: nothing reported
    full = rc.evaluate_image_text(*_pairs(20, seed=5), n_resamples=0)
    assert full.dropped_images() == 0 and full.measure("rsum").n_skipped is None


# --------------------------------------------------------------- the repeated layout


def test_the_repeated_layout_refuses_runs_equal_neighbours_could_have_made():
    """1000 images repeated 5 times, every two neighbours equal: read as 500 images of 10
    captions (Rsum 514 for 381). The rows cannot tell: refused, naming caption_image."""
    rng = np.random.default_rng(1)
    images = rng.normal(size=(40, 16)).astype(np.float32)
    images[1::2] = images[0::2]
    ci = np.repeat(np.arange(40), 5)
    captions = (images[ci] + rng.normal(size=(200, 16))).astype(np.float32)
    with pytest.raises(
        rc.InputError,
        match=r"repeats each of its 20 distinct rows 10 times.*2 equal neighbouring images of 5 captions"
        r".*pass caption_image",
    ):
        rc.evaluate_image_text(images[ci], captions, None, n_resamples=0)
    assert rc.evaluate_image_text(images, captions, ci, n_resamples=0).n_images == 40
    # runs of 3 (or any count but the papers' 5) are refused the same way
    with pytest.raises(rc.InputError, match="distinct rows 3 times"):
        rc.evaluate_image_text(np.repeat(images[::2], 3, axis=0), captions[:60], None)
    # five rows per image: the papers' layout, inferred
    ok = rc.evaluate_image_text(np.repeat(images[::2], 5, axis=0), captions[:100], None)
    assert ok.layout == "repeated" and ok.n_images == 20
