"""Regenerating per-slice baselines writes exactly the slices the result has now (review
finding 12): the record of a slice dropped on purpose is removed by --rc-regen-all /
--rc-force-regen (it stayed, so the gate failed forever with "re-record the baseline"),
and the missing-slice error names those options.

Cost: about 1 s (two evaluations of 300 queries, a few 2000-resample bootstraps), plus
the engine's one-time start (about 5 s) when it runs first.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

import retrieval_checks as rc
from retrieval_checks.errors import InputError
from retrieval_checks.gates import BaselineStore, check_slice_baselines


@pytest.fixture(scope="module")
def results():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 20, 300)
    x = rng.normal(size=(20, 8))[y] + rng.normal(size=(300, 8))
    lang = np.array(["en", "de", "fr"])[np.arange(300) % 3]
    full = rc.evaluate(x, query_labels=y, metrics=["map"], slices=lang)
    nofr = rc.evaluate(
        x, query_labels=y, metrics=["map"], slices=np.where(lang == "fr", None, lang)
    )
    return full, nofr


def _keys(path):
    return sorted(yaml.safe_load(path.read_text()))


def _record(path, result, regen="all"):
    store = BaselineStore(regen)
    try:
        check_slice_baselines(
            store, result, "map", path=path, key="k", max_drop=0.01, confidence=0.95
        )
    finally:
        store.write()


def test_regen_all_removes_the_record_of_a_slice_that_is_gone(results, tmp_path):
    full, nofr = results
    path = tmp_path / "t.baselines.yaml"
    _record(path, full)
    assert _keys(path) == ["k slice=de", "k slice=en", "k slice=fr"]
    with pytest.raises(InputError, match=r"'fr'.*--rc-regen-all.*removes"):
        check_slice_baselines(BaselineStore(), nofr, "map", path=path, key="k", max_drop=0.01)
    _record(path, nofr)
    assert _keys(path) == ["k slice=de", "k slice=en"]
    # the fr queries have no slice value now: a gate over every slice fails unless told
    # to ignore them (tests/gates/test_unsliced_queries.py)
    with pytest.raises(AssertionError, match="100 of 300 queries"):
        check_slice_baselines(BaselineStore(), nofr, "map", path=path, key="k", max_drop=0.01)
    check_slice_baselines(
        BaselineStore(), nofr, "map", path=path, key="k", max_drop=0.01, unsliced="ignore"
    )


def test_force_regen_removes_it_and_fails_naming_it(results, tmp_path):
    full, nofr = results
    path = tmp_path / "t.baselines.yaml"
    _record(path, full)
    with pytest.raises(AssertionError, match=r"removed the record of slice 'fr'"):
        _record(path, nofr, regen="force")
    assert _keys(path) == ["k slice=de", "k slice=en"]
    _record(path, nofr, regen="force")  # nothing left to change: passes
    check_slice_baselines(
        BaselineStore(), nofr, "map", path=path, key="k", max_drop=0.01, unsliced="ignore"
    )


def test_other_keys_and_named_slices_are_kept(results, tmp_path):
    full, nofr = results
    path = tmp_path / "t.baselines.yaml"
    _record(path, full)
    store = BaselineStore("all")
    check_slice_baselines(store, full, "map", path=path, key="other", slices=["en"])
    store.write()
    _record(path, nofr)  # key "k" loses fr; "other" is another check's
    assert _keys(path) == ["k slice=de", "k slice=en", "other slice=en"]


def test_write_records_removes_a_record_given_as_none(tmp_path):
    path = tmp_path / "b.yaml"
    rec = {"metric": "map", "value": 0.5, "n": 10, "unit": "queries"}
    rc.gates.write_records([(path, "a", rec), (path, "b", rec)])
    rc.gates.write_records([(path, "a", None)])
    assert _keys(path) == ["b"]


def test_a_named_slice_without_a_record_says_to_record_it(results, tmp_path):
    """Review finding 5: `slices: [en]` -> `[en, de]` failed with "no slice named 'de' in
    this result" (the result meant the stored baseline) and no fix."""
    full, _ = results
    path = tmp_path / "t.baselines.yaml"
    store = BaselineStore("all")
    check_slice_baselines(store, full, "map", path=path, key="k", slices=["en"])
    store.write()
    with pytest.raises(
        AssertionError,
        match=r"slice\(s\) 'de' of 'k' have no record in t\.baselines\.yaml "
        r"\(records: 'en'\).*--rc-force-regen",
    ):
        check_slice_baselines(
            BaselineStore(), full, "map", path=path, key="k", slices=["en", "de"], max_drop=0.01
        )
