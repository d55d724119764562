"""Queries without a slice value under a gate over every slice (review finding, issue
28): the gate cannot see them, so it fails by default (``unsliced='fail'``) saying how
many and the fixes; ``unsliced='ignore'`` keeps counting and reporting them only. Gates
on named slices are not concerned. A multi-dimension gate counts each query once.

Cost: about 3 s (three small evaluations, 2000-resample bootstraps).
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.errors import InputError
from retrieval_checks.gates import _events


def _data(seed=0, classes=40, per=4, d=16):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), per)
    X = (rng.normal(size=(classes, d))[y] + rng.normal(size=(classes * per, d))).astype(np.float32)
    return X, y


@pytest.fixture(scope="module")
def lost():
    """'de' (classes 20-39) lost every slice value: the result has slice 'en' only, and
    the 'de' queries score badly (their embeddings are noise)."""
    X, y = _data()
    rng = np.random.default_rng(5)
    X[y >= 20] = rng.normal(size=X[y >= 20].shape).astype(np.float32)
    lang = [("en" if c < 20 else None) for c in y]
    return rc.evaluate(X, query_labels=y, metrics=["map", "hit_rate@1"], slices=lang)


@pytest.fixture
def events():
    seen = []
    with _events.listening(seen.append):
        yield seen


def test_every_slice_gate_fails_while_queries_have_no_value(lost):
    assert list(lost.slices) == ["en"] and lost.slices.missing
    with pytest.raises(AssertionError) as info:
        rc.assert_slices(lost, "map", at_least=0.1)
    msg = str(info.value)
    assert "80 of 160 queries (50%) have no slice value" in msg
    assert "unsliced='ignore'" in msg and "'unknown'" in msg
    with pytest.raises(AssertionError, match="80 of 160 queries"):
        rc.assert_slices_at_least(lost, "map", 0.1)
    with pytest.raises(AssertionError, match="the worst slice 'en' passes, but 80 of 160"):
        rc.assert_worst_slice(lost, "map", at_least=0.1)
    with pytest.raises(AssertionError, match="80 of 160"):
        rc.assert_worst_slice_at_least(lost, "map", 0.1)


def test_a_failing_slice_and_unseen_queries_say_both(lost):
    with pytest.raises(AssertionError) as info:
        rc.assert_slices(lost, "map", at_least=0.99)
    assert "1 of 1 slices fail" in str(info.value) and "also: 80 of 160" in str(info.value)


def test_ignore_counts_and_reports_them_only(lost):
    rc.assert_slices(lost, "map", at_least=0.1, unsliced="ignore")
    rc.assert_worst_slice(lost, "map", at_least=0.1, unsliced="ignore")
    with pytest.raises(AssertionError, match="1 of 1 slices fail"):
        rc.assert_slices(lost, "map", at_least=0.99, unsliced="ignore")


def test_named_slices_are_not_concerned(lost):
    rc.assert_slices(lost, "map", at_least=0.1, slices=["en"])


@pytest.mark.parametrize("bad", ["skip", None, True, "FAIL"])
def test_a_bad_unsliced_value_is_refused_before_any_work(lost, bad):
    with pytest.raises(InputError, match="unsliced="):
        rc.assert_slices(lost, "map", at_least=0.1, unsliced=bad)
    with pytest.raises(InputError, match="unsliced="):
        rc.assert_worst_slice(lost, "map", at_least=0.1, unsliced=bad)


def test_a_slice_baseline_over_every_slice_fails_when_queries_lost_their_value():
    """Half of 'de' lost its value since the baseline: the slice shrank to its good half,
    and its drop would be hidden."""
    X, y = _data(seed=2)
    lang = np.where(y < 20, "en", "de")
    full = rc.evaluate(X, query_labels=y, metrics=["map"], slices=lang)
    base = rc.slice_baseline(full, "map")
    partial = [None if (v == "de" and c >= 30) else v for v, c in zip(lang, y)]
    now = rc.evaluate(X, query_labels=y, metrics=["map"], slices=partial)
    with pytest.raises(AssertionError, match="no slice dropped from its baseline, but 40 of 160"):
        rc.assert_no_slice_regression(now, base, "map", max_drop=0.5)
    rc.assert_no_slice_regression(now, base, "map", max_drop=0.5, unsliced="ignore")
    rc.assert_no_slice_regression(now, base, "map", max_drop=0.5, slices=["en", "de"])


def test_a_gate_over_two_dimensions_counts_each_query_once(events):
    X, y = _data(seed=3)
    dims = {"lang": np.where(y < 20, "en", "de"), "size": np.where(y % 2 == 0, "s", "l")}
    res = rc.evaluate(X, query_labels=y, metrics=["map"], slices=dims)
    rc.assert_slices(res, "map", at_least=0.01)
    rc.assert_worst_slice(res, "map", at_least=0.01)
    assert [e.n_used for e in events] == [160, 160]
    assert [len(e.extra["slices"]) for e in events] == [4, 4]


def test_image_slices_count_images_without_a_value():
    rng = np.random.default_rng(4)
    images = rng.normal(size=(20, 8)).astype(np.float32)
    owner = np.repeat(np.arange(20), 5)
    captions = (images[owner] + rng.normal(size=(100, 8))).astype(np.float32)
    cat = ["a"] * 8 + ["b"] * 7 + [None] * 5
    res = rc.evaluate_image_text(images, captions, owner, slices=cat)
    with pytest.raises(AssertionError, match=r"5 of 20 images \(25%\) have no slice value"):
        rc.assert_slices(res, "i2t_recall@5", at_least=0.01)
    rc.assert_slices(res, "i2t_recall@5", at_least=0.01, unsliced="ignore")
