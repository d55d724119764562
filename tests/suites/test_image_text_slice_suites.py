"""Image-text slices in YAML suites (issue 28): an image_text dataset declares
``slices:`` (columns of its images' file, one value per image) and ``caption_slices:``
(columns of its captions' file); a check's ``slices: all / worst / [names]`` gates
them as a retrieval dataset's. Cost: about 2 s (SuiteRunner on 30 images x 150
captions, in process)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks import SuiteError, SuiteRunner, load_suite


def _write(
    tmp_path, checks: str, slices: str = "slices: {cat: cat}\n    caption_slices: {lang: lang}"
):
    rng = np.random.default_rng(3)
    images = rng.normal(size=(30, 8)).astype(np.float32)
    image = np.repeat(np.arange(30), 5)
    captions = (images[image] + 1.0 * rng.normal(size=(150, 8))).astype(np.float32)
    cat = np.where(np.arange(30) < 10, "dog", "cat")
    lang = np.tile(["en", "de", "fr", "en", "de"], 30)
    np.savez(tmp_path / "pairs.npz", images=images, captions=captions, image=image, cat=cat)
    np.savez(tmp_path / "caps.npz", captions=captions, image=image, lang=lang)
    p = tmp_path / "rc_it.yaml"
    p.write_text(
        "datasets:\n  pairs:\n    type: image_text\n"
        "    images: {file: pairs.npz, embeddings: images}\n"
        "    captions: {file: caps.npz, embeddings: captions}\n"
        f"    {slices}\n"
        "options: {n_resamples: 200}\n"
        "checks:\n" + textwrap.indent(checks.strip() + "\n", "  ")
    )
    want = rc.evaluate_image_text(
        images,
        captions,
        image,
        n_resamples=200,
        slices={"cat": cat},
        caption_slices={"lang": lang},
    )
    return load_suite(p), want


def _run(suite, i):
    events = []
    with rc.gates.listening(events.append):
        SuiteRunner().run(suite, suite.cases[i])
    return events[-1]


def test_image_and_caption_slices_are_gated_from_yaml(tmp_path):
    suite, want = _write(
        tmp_path,
        """
- {metric: rsum, dataset: pairs, slices: all, at_least: 100}
- {metric: t2i_recall@1, dataset: pairs, slices: worst, at_least: 0.99}
- {metric: t2i_recall@1, dataset: pairs, slices: [lang=en, cat=dog], at_least: 0.01, on: interval}
""",
    )
    event = _run(suite, 0)
    rows = {r["slice"]: r for r in event.extra["slices"]}
    assert set(rows) == {"cat=dog", "cat=cat"}  # rsum: the image slices
    assert rows["cat=dog"]["value"] == pytest.approx(want.slices["cat=dog"]["rsum"])
    assert rows["cat=dog"]["unit"] == "images" and rows["cat=dog"]["n"] == 10
    with pytest.raises(AssertionError, match="worst slice"):
        SuiteRunner().run(suite, suite.cases[1])
    event = _run(suite, 2)
    assert [r["slice"] for r in event.extra["slices"]] == ["lang=en", "cat=dog"]


def test_an_i2t_gate_on_a_caption_slice_says_why(tmp_path):
    suite, _ = _write(
        tmp_path, "- {metric: i2t_recall@1, dataset: pairs, slices: [lang=de], at_least: 0.1}"
    )
    with pytest.raises(SuiteError, match="i2t metrics rank captions for image queries"):
        SuiteRunner().run(suite, suite.cases[0])


def test_a_slice_check_on_an_image_text_dataset_without_slices_is_refused(tmp_path):
    with pytest.raises(
        SuiteError, match="declares no slices; add slices: <column> .* or caption_slices"
    ):
        _write(
            tmp_path,
            "- {metric: rsum, dataset: pairs, slices: all, at_least: 100}",
            slices="protocol: 5k",
        )


def test_per_slice_baselines_of_an_image_text_dataset(tmp_path):
    """An i2t baseline check keeps one record per image slice (caption slices hold no
    i2t value), reads them back and gates them in one gate."""
    suite, want = _write(
        tmp_path, "- {metric: i2t_recall@1, dataset: pairs, slices: all, baseline: {max_drop: 0.0}}"
    )
    writer = SuiteRunner(regen="all")
    writer.run(suite, suite.cases[0])
    assert [k.rsplit(" ", 1)[1] for _, k, _ in writer.baselines.pending] == [
        "slice=cat=dog",
        "slice=cat=cat",
    ]
    writer.baselines.write()
    event = _run(load_suite(tmp_path / "rc_it.yaml"), 0)
    rows = {r["slice"]: r for r in event.extra["slices"]}
    assert set(rows) == {"cat=dog", "cat=cat"} and rows["cat=dog"]["drop"] == 0.0
    assert rows["cat=dog"]["baseline"] == pytest.approx(want.slices["cat=dog"]["i2t_recall@1"])
    assert "new_slices" not in event.extra  # the caption slices are not i2t slices


def test_validate_names_a_slice_column_the_images_or_captions_file_lacks(tmp_path):
    """``retrieval-checks validate`` looks at the data's array names: a slice column of an
    image_text dataset missing from its images' (or captions') file is located."""
    from retrieval_checks.suites._slices import slice_column_errors

    suite, _ = _write(
        tmp_path,
        "- {metric: rsum, dataset: pairs, slices: all, at_least: 100}",
        slices="slices: {cat: catt}\n    caption_slices: {lang: lnag}",
    )
    errors = slice_column_errors(suite)
    assert [e.field for e in errors] == [
        "datasets.pairs.slices.cat",
        "datasets.pairs.caption_slices.lang",
    ]
    assert "column 'catt' is not in pairs.npz" in str(errors[0]) and "'cat'" in str(errors[0])
    assert "column 'lnag' is not in caps.npz" in str(errors[1])


def test_an_i2t_slice_check_on_caption_slices_only_is_refused_at_load(tmp_path):
    with pytest.raises(SuiteError, match="caption_slices hold t2i metrics only") as info:
        _write(
            tmp_path,
            "- {metric: rsum, dataset: pairs, slices: all, at_least: 100}",
            slices="caption_slices: {lang: lang}",
        )
    assert info.value.field == "checks[0].slices" and info.value.line == 9
