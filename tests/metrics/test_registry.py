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
    example = f.template.replace("@K", "@3").replace("@P", "@0.9").replace("@Q", "@0.5").replace("@t=T", "@t=0.2")
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
