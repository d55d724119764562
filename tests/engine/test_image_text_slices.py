"""Slices of an image-text evaluation (issue 28): ``evaluate_image_text(...,
slices=per-image metadata, caption_slices=per-caption metadata)``. An image slice is its
images with their captions (i2t over its images, t2i over their captions, rsum over
both), each query ranking the whole gallery; a caption slice holds t2i metrics only,
and a gate of an i2t metric or rsum on it is refused saying why. Every slice gate takes
the result; intervals resample the slice's images.

Cost: about 3 s idle (a few evaluations of 60 images x 180 captions; three coverage
simulations of 300 bootstraps each, ~0.3 s apiece); 25 s at load 24 on 2 cores.
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks import InputError

N = 60


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    imgs = rng.normal(size=(N, 16)).astype(np.float32)
    cap_img = np.repeat(np.arange(N), 3)
    caps = (imgs[cap_img] + 1.0 * rng.normal(size=(3 * N, 16))).astype(np.float32)
    cat = np.where(np.arange(N) < 20, "dog", "cat")
    lang = np.tile(["en", "de", "fr"], N)
    return imgs, caps, cap_img, cat, lang


@pytest.fixture(scope="module")
def sliced(data):
    imgs, caps, cap_img, cat, lang = data
    return rc.evaluate_image_text(
        imgs, caps, cap_img, slices={"cat": cat}, caption_slices={"lang": lang}
    )


def test_an_image_slice_is_its_images_with_their_captions(data, sliced):
    imgs, caps, cap_img, cat, lang = data
    i_rank, t_rank = sliced.i2t_ranks[0], sliced.t2i_ranks[0]
    dog = sliced.slices["cat=dog"]
    assert dog.side == "images" and dog.n_images == 20 and dog.n_captions == 60
    mine = cat[cap_img] == "dog"
    want = {}
    for k in (1, 5, 10):
        want[f"i2t_recall@{k}"] = np.mean(i_rank[cat == "dog"] <= k)
        want[f"t2i_recall@{k}"] = np.mean(t_rank[mine] <= k)
    for name, v in want.items():
        assert dog[name] == pytest.approx(v, abs=1e-12), name
    assert dog["rsum"] == pytest.approx(100 * sum(want.values()), abs=1e-9)
    assert dog["mean_recall"] == pytest.approx(dog["rsum"] / 6, abs=1e-9)
    assert dog["i2t_meanr"] == pytest.approx(np.mean(i_rank[cat == "dog"]))
    assert dog["t2i_medr"] == np.floor(np.median(t_rank[mine] - 1)) + 1


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "average"])
def test_one_slice_of_every_image_is_the_whole_result(data, ties):
    imgs, caps, cap_img, *_ = data
    imgs = np.round(imgs, 1)  # ties
    caps = np.round(caps, 1)
    r = rc.evaluate_image_text(imgs, caps, cap_img, ties=ties, slices=["all"] * N)
    for name, v in r.items():
        assert r.slices["all"][name] == pytest.approx(v, abs=1e-9), name


def test_a_caption_slice_holds_t2i_metrics_only(data, sliced):
    imgs, caps, cap_img, cat, lang = data
    en = sliced.slices["lang=en"]
    assert en.side == "captions" and en.n_captions == N
    assert set(en) == {m for m in sliced if m.startswith("t2i")}
    assert en["t2i_recall@1"] == pytest.approx(np.mean(sliced.t2i_ranks[0][lang == "en"] <= 1))
    with pytest.raises(
        InputError, match="rsum has no value on the caption slice 'lang=en'.*adds both directions"
    ):
        rc.assert_slices_at_least(sliced, "rsum", 100, slices=["lang=en"])
    with pytest.raises(InputError, match="i2t metrics rank captions for image queries"):
        rc.assert_slices_at_least(sliced, "i2t_recall@1", 0.1, slices=["lang=de"])
    # every slice of an i2t metric: the image slices (caption slices have no image queries)
    rc.assert_slices_at_least(sliced, "i2t_recall@1", 0.1)
    rc.assert_slices_at_least(sliced, "t2i_recall@1", 0.1)  # image and caption slices


def test_every_slice_gate_takes_an_image_text_result(data, sliced):
    events = []
    with rc.gates.listening(events.append):
        rc.assert_slices(sliced, "rsum", at_least=300, on="interval")
        rc.assert_worst_slice_at_least(sliced, "t2i_recall@1", 0.5)
    rows = events[0].extra["slices"]
    assert [r["slice"] for r in rows] == ["cat=dog", "cat=cat"]
    assert rows[0]["unit"] == "images" and rows[0]["n"] == 20 and rows[0]["n_queries"] == 80
    assert rows[0]["low"] <= rows[0]["value"] <= rows[0]["high"]
    assert events[1].extra["worst_slice"] in sliced.slices
    with pytest.raises(AssertionError, match="worst slice"):
        rc.assert_worst_slice_at_least(sliced, "i2t_recall@1", 0.99)
    base = rc.slice_baseline(sliced, "i2t_recall@1")
    assert set(base) == {"cat=dog", "cat=cat"}  # caption slices hold no i2t value
    rc.assert_no_slice_regression(sliced, base, "i2t_recall@1", max_drop=0.0)
    imgs, caps, cap_img, cat, lang = data
    worse = rc.evaluate_image_text(
        imgs,
        caps + 1.5 * np.random.default_rng(1).normal(size=caps.shape).astype(np.float32),
        cap_img,
        slices={"cat": cat},
    )
    with pytest.raises(AssertionError, match="dropped by more than max_drop"):
        rc.assert_no_slice_regression(worse, base, "i2t_recall@1", max_drop=0.01)


def test_a_slice_of_fewer_than_five_images_is_refused(data):
    imgs, caps, cap_img, *_ = data
    small = np.where(np.arange(N) < 3, "rare", "common")
    r = rc.evaluate_image_text(imgs, caps, cap_img, slices=small)
    with pytest.raises(InputError, match="'rare': 3 images .*2 more images would give it one"):
        rc.assert_slices_at_least(r, "rsum", 100)
    rc.assert_slices_at_least(r, "rsum", 100, slices=["common"])


def test_slices_are_checked_before_the_pass(data):
    imgs, caps, cap_img, cat, lang = data
    from shared_setup import EngineStarted, engine_must_not_start

    with engine_must_not_start():
        with pytest.raises(EngineStarted):  # the probe is live: valid slices reach the pass
            rc.evaluate_image_text(imgs, caps, cap_img, slices=cat)
        _refused_before_the_pass(imgs, caps, cap_img, cat, lang)


def _refused_before_the_pass(imgs, caps, cap_img, cat, lang):
    with pytest.raises(InputError, match="slices: 59 values for 60 queries"):
        rc.evaluate_image_text(imgs, caps, cap_img, slices=cat[:-1])
    with pytest.raises(InputError, match=r"caption_slices\['lang'\]: query 3 has NaN"):
        rc.evaluate_image_text(
            imgs,
            caps,
            cap_img,
            caption_slices={"lang": [1.0, 2.0, 1.0, np.nan] + [1.0] * (3 * N - 4)},
        )
    with pytest.raises(InputError, match="both name the dimension 'slice'"):
        rc.evaluate_image_text(imgs, caps, cap_img, slices=cat, caption_slices=lang)


def test_the_repeated_layout_takes_one_value_per_row_and_one_per_image(data):
    imgs, _, _, cat, _ = data
    cap_img = np.repeat(np.arange(N), 5)  # the papers' layout: five rows per image
    caps = (imgs[cap_img] + np.random.default_rng(1).normal(size=(5 * N, 16))).astype(np.float32)
    rows = imgs[cap_img]  # one row per caption, each image repeated
    r = rc.evaluate_image_text(rows, caps, slices=cat[cap_img])
    assert r.slices["dog"]["rsum"] == pytest.approx(
        rc.evaluate_image_text(imgs, caps, cap_img, slices=cat).slices["dog"]["rsum"]
    )
    bad = cat[cap_img].copy()
    bad[1] = "cat"  # image 0's second row
    with pytest.raises(InputError, match="rows 0 and 1 of images are the same image"):
        rc.evaluate_image_text(rows, caps, slices=bad)


def test_dropped_images_leave_their_slice_values(data):
    imgs, caps, cap_img, cat, lang = data
    extra = np.vstack([imgs, imgs[:2]])  # two images without a caption
    r = rc.evaluate_image_text(
        extra,
        caps,
        cap_img,
        images_without_captions="drop",
        slices=np.r_[cat, ["ghost", "ghost"]],
    )
    assert "ghost" not in r.slices and r.config["images_dropped"] == 2
    assert r.slices["dog"].n_images == 20


def test_the_result_dict_carries_its_slices(sliced):
    d = sliced.to_dict()["slices"]
    assert d["sides"] == {"cat": "images", "lang": "captions"}
    assert d["slices"]["lang=fr"]["metrics"].keys() == {m for m in sliced if m.startswith("t2i")}


@pytest.mark.parametrize("metric", ["i2t_recall@1", "t2i_recall@1", "rsum"])
def test_slice_intervals_cover_at_their_nominal_rate(metric):
    """The slice bootstrap (images resampled, each with its captions) covers the
    population value ~95% of the time: 300 slices of 80 images, 5 captions each, whose
    hits share the image's difficulty (captions of one image are not independent)."""
    from types import SimpleNamespace

    from retrieval_checks.engine._image_text import ImageTextSlice, _Units

    rng = np.random.default_rng(7)
    n, per, runs = 80, 5, 300
    a, b = 4.0, 2.0  # each image's hit probability ~ Beta(4, 2), mean 2/3
    p5 = 0.9  # hit within 5 / 10: a fixed chance beyond the first
    truth = {
        "i2t_recall@1": a / (a + b),
        "t2i_recall@1": a / (a + b),
        "rsum": 100 * 2 * (a / (a + b) + 2 * (a / (a + b) + (1 - a / (a + b)) * p5)),
    }[metric]
    covered = 0
    for run in range(runs):
        p = rng.beta(a, b, n)
        i1 = rng.random(n) < p
        t_img = np.repeat(np.arange(n), per)
        t1 = rng.random(n * per) < p[t_img]
        i5 = i1 | (rng.random(n) < p5)
        t5 = t1 | (rng.random(n * per) < p5)
        q = SimpleNamespace(
            i_img=np.arange(n),
            i_rank=np.where(i1, 1.0, 2.0),
            i_hit={1: i1 * 1.0, 5: i5 * 1.0, 10: i5 * 1.0},
            t_cap=np.arange(n * per),
            t_img=t_img,
            t_rank=np.where(t1, 1.0, 2.0),
            t_hit={1: t1 * 1.0, 5: t5 * 1.0, 10: t5 * 1.0},
            ks=(1, 5, 10),
        )
        units = _Units(q, np.arange(n), np.arange(n * per))
        s = ImageTextSlice("x", "d", "x", "images", None, units, None, None)
        s._parent = SimpleNamespace(index_of=lambda name: 0)
        low, high = s.interval(metric, 0.95, 400, run)
        covered += low <= truth <= high
    assert 0.91 <= covered / runs <= 0.985, covered / runs
