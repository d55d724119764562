"""The capability registry is the one home of each metric's unit, range, direction and
capabilities; the parser, the schema and the gates read it."""

from __future__ import annotations

import math

import pytest

import retrieval_checks as rc
from retrieval_checks.metrics import FAMILIES, METRIC_TEMPLATES, metric_spec


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_parses_from_its_template_and_reads_its_record(family):
    f = FAMILIES[family]
    example = (
        f.template.replace("@K", "@3")
        .replace("@P", "@0.9")
        .replace("@Q", "@0.5")
        .replace("@t=T", "@t=0.2")
        .replace("@p", "@0.8")
        .replace("@L", "@0.5")
    )
    spec = metric_spec(example)
    assert spec.family == family and spec.capabilities is f
    assert spec.unit == f.unit and spec.higher_is_better == f.higher_is_better
    assert f.low < f.high and (math.isinf(f.high) or f.high in (1.0, 100.0, 600.0))
    if f.kind != "classifier":
        assert f.template in METRIC_TEMPLATES


def test_capabilities_are_consistent():
    for f in FAMILIES.values():
        if f.per_query:
            assert f.kind == "query"
        if f.interval == "bootstrap":
            assert f.per_query
        if f.unit == "rank":
            assert not f.higher_is_better and not f.gap and f.low == 1.0
        if f.kind == "pair":
            assert (f.interval, f.gap, f.compare, f.per_query) == (None, False, False, False)
    assert FAMILIES["rsum"].high == 600.0 and FAMILIES["mean_recall"].high == 100.0
    assert not FAMILIES["spectral_measure"].higher_is_better
    assert FAMILIES["grouped_recall"].interval == "groups"


def test_map_at_k_and_aliases_share_the_family():
    assert rc.parse_metric("mAP@10").capabilities is FAMILIES["map"]
    assert rc.parse_metric("cmc@5").capabilities.gate == "assert_recall_at_least"


@pytest.mark.parametrize(
    "family,value,meant",
    [
        ("mean_recall", 0.5, 50.0),
        ("mean_recall", 1.0, 100.0),
        ("rsum", 4.5, 450.0),
        ("rsum", 6.0, 600.0),
        ("rsum", 7.0, None),
        ("mean_recall", 50.0, None),
        ("map", 70.0, 0.7),
    ],
)
def test_probable_meaning_matches_the_wrong_scale_check(family, value, meant):
    from retrieval_checks.metrics import check_threshold, probable_meaning

    fam = FAMILIES[family]
    assert probable_meaning(value, fam) == meant
    if meant is None or family == "map":
        return
    for role in ("at_least", "at_most"):
        with pytest.raises(rc.InputError, match=f"Did you mean {meant:g}"):
            check_threshold(fam, value, role=role)
    # a stored value may be that low (a weak model): baselines are not refused for scale
    assert check_threshold(fam, value, role="baseline") == value


def test_check_threshold_tightens_with_the_attainable_high_and_the_baseline():
    from retrieval_checks.metrics import check_threshold

    rank, frac = FAMILIES["medr"], FAMILIES["map"]
    with pytest.raises(
        rc.InputError, match="largest attainable value here is 56 \\(the gallery\\)"
    ):
        check_threshold(rank, 56, role="at_most", high=56, high_why="the gallery")
    assert check_threshold(rank, 55, role="at_most", high=56) == 55
    with pytest.raises(rc.InputError, match="never pass"):
        check_threshold(rank, 57, role="at_least", high=56)
    with pytest.raises(rc.InputError, match="at most 0.48"):
        check_threshold(frac, 0.5, role="max_drop", baseline=0.48)
    assert check_threshold(frac, 0.0, role="max_drop", baseline=0.1) == 0.0  # no drop tolerated
    with pytest.raises(rc.InputError, match="already at the end a drop goes toward"):
        check_threshold(frac, 0.0, role="max_drop", baseline=0.0)  # nothing can drop from 0
    with pytest.raises(rc.InputError, match="relative drop of 6"):
        check_threshold(rank, 6, role="max_relative_drop", baseline=8, high=56)
    assert check_threshold(rank, 5.9, role="max_relative_drop", baseline=8, high=56) == 5.9
    assert (
        check_threshold(rank, 10**6, role="max_drop", baseline=8) == 10**6
    )  # no max rank known: unbounded
