"""A slice refused or unrecordable says the real cause (review findings 4 and 11): every
query skipped (no relevant gallery item) is named as such, with its fixes, not as "0
classes ... 5 more classes would give it one"; slice_baseline refuses a slice without a
value instead of storing NaN; the refusal no longer suggests a ``cluster=`` no slice gate
takes, and counts in plain words ("1 more class", "4 queries used of 5").

Cost: about 1 s (two evaluations of at most 300 queries), plus the engine's one-time
start (about 5 s) when it runs first.
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.errors import InputError


@pytest.fixture(scope="module")
def orphan():
    rng = np.random.default_rng(0)
    g, gl = rng.normal(size=(100, 8)), rng.integers(0, 10, 100)
    q, ql = rng.normal(size=(60, 8)), rng.integers(0, 10, 60)
    ql[:12] = 99  # no relevant gallery item
    sl = np.where(np.arange(60) < 12, "orphan", "main")
    return rc.evaluate(q, g, query_labels=ql, gallery_labels=gl, metrics=["map"], slices=sl)


def test_a_slice_whose_queries_are_all_skipped_names_the_cause(orphan):
    with pytest.raises(InputError) as info:
        rc.assert_slices_at_least(orphan, "map", 0.05)
    text = str(info.value)
    assert "slice 'orphan': all 12 queries skipped (no relevant gallery item" in text
    assert "empty_queries='zero'" in text and "more classes would give it one" not in text
    iv = rc.slice_intervals(orphan, "map")["orphan"]
    assert iv.interval is None and "all 12 queries skipped" in iv.refused


def test_slice_baseline_refuses_a_slice_without_a_value(orphan):
    with pytest.raises(
        InputError, match=r"slice 'orphan': all 12 queries skipped.*no value to record"
    ):
        rc.slice_baseline(orphan, "map")
    assert np.isnan(orphan.slices["orphan"]["map"])  # the NaN it stored before


def test_the_small_slice_refusal_has_no_cluster_hint_and_plain_counts():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 40, 300)
    x = rng.normal(size=(40, 8))[y] + rng.normal(size=(300, 8))
    sl = np.where(np.arange(300) < 4, "tiny", "big")
    r = rc.evaluate(x, query_labels=y, metrics=["map"], slices=sl)
    with pytest.raises(InputError) as info:
        rc.assert_slices_at_least(r, "map", 0.1)
    text = str(info.value)
    assert "cluster=" not in text
    assert (
        "slice 'tiny': 4 classes (4 queries), fewer than the 5 classes an interval needs; 1 more class would"
        in text
    )
    ivs = rc.slice_intervals(r, "map", cluster="query")
    assert (
        "4 queries used of 4" in ivs["tiny"].refused and "1 more query would" in ivs["tiny"].refused
    )
