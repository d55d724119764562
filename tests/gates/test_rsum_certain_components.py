"""Rsum and mean recall gates refused where a recall they add up is 1 whatever the
model (h19/h24): on 4 images a caption ranks 4 images, so t2i_recall@5 and @10 are 1
for any model; assert_metric refused a gate on them ("could never fail") but
assert_rsum added them up and passed a random model at 300 (its Rsum 450). Python and
YAML checks share the rule (gates._rsum, from threshold_bounds). Cost: well under 1 s."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.gates._rsum import certain_components


def _random(n_images, per=5, seed=5):
    rng = np.random.default_rng(seed)
    images = rng.normal(size=(n_images, 32)).astype(np.float32)
    ci = np.repeat(np.arange(n_images), per)
    captions = rng.normal(size=(ci.size, 32)).astype(np.float32)  # unrelated to the images
    return rc.evaluate_image_text(images, captions, ci)


def test_rsum_of_four_images_is_refused_naming_the_certain_recalls():
    r = _random(4)
    assert r["rsum"] >= 200  # t2i_recall@5 and @10 are 1: 200 points for any model
    assert [c[0] for c in certain_components(r)] == ["t2i_recall@5", "t2i_recall@10"]
    for gate in (
        lambda: rc.assert_rsum(r, 300),
        lambda: rc.assert_rsum(r, 300, on="lower"),
        lambda: rc.assert_metric(r, "rsum", at_least=300),
        lambda: rc.assert_metric(r, "mean_recall", at_least=50),
    ):
        with pytest.raises(
            rc.InputError,
            match=r"2 of the six recalls it adds up are 1 whatever the model on this data \(4 images\): "
            r"t2i_recall@5 \(K=5 >= 4.*Evaluate on more images.*or gate the recalls that can fail "
            r"\(i2t_recall@1, i2t_recall@5, i2t_recall@10, t2i_recall@1",
        ):
            gate()
    with pytest.raises(AssertionError, match="i2t_recall@1"):  # a component that can fail: judged
        rc.assert_metric(r, "i2t_recall@1", at_least=0.9)


def test_one_image_leaves_no_component_to_gate():
    r = _random(1)
    assert len(certain_components(r)) == 6
    with pytest.raises(rc.InputError, match="6 of the six recalls.*no component recall can fail"):
        rc.assert_rsum(r, 599)


def test_rsum_is_gated_where_every_component_can_fail():
    r = _random(11, per=1)  # 11 images: a caption ranks 11, an image 10 other captions
    assert certain_components(r) == []
    with pytest.raises(AssertionError, match="rsum"):
        rc.assert_rsum(r, 500)
