"""Baseline records hold the options that change a metric's value (issue 31): ``ties``,
``relevance_level``, ``empty_queries``, ``ignore_identical_ids`` and evaluate_run's
``queries`` and ``k`` (not ``similarity``: part of the system measured); a baseline recorded under one and checked under
another is refused, naming what differs and the two fixes, never compared. Cost: about
1 s (tiny inputs, in process) plus the engine's one-time start."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.gates import (
    BaselineFile,
    assert_no_regression,
    baseline_record,
    records_differ,
)
from retrieval_checks.gates._baselines import BaselineStore, check_record

# tiny inputs: their bootstrap intervals rest on few units (the records' options are the point)
pytestmark = [
    pytest.mark.filterwarnings("ignore::retrieval_checks.IntervalWarning"),
    pytest.mark.filterwarnings("ignore:.*skipped .* queries:RuntimeWarning"),
]


@pytest.fixture(autouse=True)
def _unheard():
    """This file's gates (some refused on purpose) are not the session's gates."""
    from shared_setup import unheard

    with unheard():
        yield


RUN = {
    "q1": {"d1": 3.0, "d2": 2.0, "d3": 2.0, "d4": 1.0},
    "q2": {"d1": 1.0, "d5": 0.5},
}
QRELS = {
    "q1": {"d2": 2, "d4": 1, "d9": 1},
    "q2": {"d5": 0},
    "q3": {"d1": 1},
}


def _run(**kw):
    return rc.evaluate_run(RUN, QRELS, ["map", "ndcg@3", "bpref"], **kw)


def _emb(**kw):
    rng = np.random.default_rng(0)
    x = np.round(rng.normal(size=(12, 3)), 1).astype(np.float32)
    return rc.evaluate(x, query_labels=np.arange(12) % 3, metrics=["map", "bpref"], **kw)


def test_records_hold_the_options_that_change_a_value():
    rec = baseline_record(_run(queries="run", relevance_level=2, ties="docid"), "map")
    assert rec["options"] == {
        "ties": "docid",
        "relevance_level": 2,
        "empty_queries": "zero",
        "ignore_identical_ids": False,
        "queries": "run",
    }
    assert baseline_record(_run(k=3), "map")["options"]["k"] == 3
    emb = baseline_record(_emb(ties="average"), "bpref")["options"]
    assert emb == {
        "ties": "average",
        "relevance_level": 1,
        "empty_queries": "skip",
        "ignore_identical_ids": False,
    }


@pytest.mark.parametrize(
    "base, now, differs",
    [
        (dict(ties="pessimistic"), dict(ties="docid"), "ties='pessimistic'"),
        (dict(relevance_level=1), dict(relevance_level=2), "relevance_level=1"),
        (dict(queries="both"), dict(queries="qrels"), "queries='both'"),
        (
            dict(ignore_identical_ids=False),
            dict(ignore_identical_ids=True),
            "ignore_identical_ids=False",
        ),
        (dict(empty_queries="skip"), dict(empty_queries="zero"), "empty_queries='skip'"),
        (dict(), dict(k=3), "k unset"),
    ],
)
def test_a_baseline_under_other_options_is_refused_naming_them(base, now, differs):
    baseline = baseline_record(_run(**base), "map")
    current = baseline_record(_run(**now), "map")
    with pytest.raises(rc.InputError, match="the baseline was recorded with") as exc:
        assert_no_regression(
            current, baseline, max_drop=0.5
        )  # a tolerance any of these values passes
    text = str(exc.value)
    assert differs in text and "re-record the baseline" in text and "--rc-force-regen" in text
    assert records_differ(current, baseline)  # --rc-force-regen rewrites it
    assert_no_regression(current, current, max_drop=0.0)  # the same options: compared


def test_embedding_results_ties_refused_and_a_new_similarity_judged():
    base = baseline_record(_emb(), "map")
    with pytest.raises(rc.InputError, match="ties="):
        assert_no_regression(baseline_record(_emb(ties="average"), "map"), base, max_drop=0.5)
    # a model scored by dot product instead of cosine: a change of the system, judged
    dot = baseline_record(_emb(similarity="dot"), "map")
    assert "similarity" not in dot["options"]
    assert_no_regression(dot, base, max_drop=0.3)


def test_a_stored_baseline_keeps_its_options_and_the_store_refuses_others(tmp_path):
    path = tmp_path / "test_x.baselines.yaml"
    BaselineFile(path).update({"case::map": baseline_record(_run(ties="docid"), "map")})
    stored = BaselineFile(path).get("case::map")
    assert stored["options"]["ties"] == "docid"
    store = BaselineStore()
    store.check(baseline_record(_run(ties="docid"), "map"), path=path, key="case::map")
    with pytest.raises(
        rc.InputError, match=r"test_x.baselines.yaml: 'case::map': map: the baseline"
    ):
        store.check(baseline_record(_run(), "map"), path=path, key="case::map")


def test_a_record_without_options_is_compared_and_bad_options_are_located():
    old = baseline_record(_run(), "map")
    del old["options"]  # written before records held options
    assert_no_regression(baseline_record(_run(), "map"), old, max_drop=0.05)
    bad = dict(old, options={"tie": "docid"})
    with pytest.raises(rc.InputError, match=r"field 'options.tie'.*Did you mean 'ties'"):
        check_record(bad)
    with pytest.raises(rc.InputError, match=r"field 'options.ties'"):
        check_record(dict(old, options={"ties": [1]}))


def test_rc_compare_refuses_results_under_different_options():
    with pytest.raises(rc.InputError, match=r"ties: candidate 'average', baseline 'pessimistic'"):
        rc.compare(_emb(ties="average"), _emb(), "map")
    assert rc.compare(_emb(similarity="dot"), _emb(), "map").n_used == 12  # another system: paired
