"""Slices (``evaluate(..., slices=...)``): each slice equals the evaluation of its own
queries alone (brute force, exact), and bad slice input fails closed.

Cost: about 2 s (small random sets, numpy backend).
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.errors import InputError

METRICS = ["map", "hit_rate@1", "recall@5", "ndcg@10", "mrr", "medr", "map@R", "precision@3"]


def _data(seed=0, n_q=90, n_g=200, d=6, classes=12):
    rng = np.random.default_rng(seed)
    q = rng.integers(-3, 4, size=(n_q, d)).astype(np.float32)  # integer rows: many exact ties
    g = rng.integers(-3, 4, size=(n_g, d)).astype(np.float32)
    yq = rng.integers(0, classes, n_q)
    yg = rng.integers(0, classes, n_g)
    return q, g, yq, yg


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "average"])
def test_each_slice_equals_evaluating_its_queries_alone(ties):
    q, g, yq, yg = _data()
    lang = np.array(["de", "en", "fr", "ja"])[np.random.default_rng(1).integers(0, 4, len(q))]
    common = dict(gallery_labels=yg, metrics=METRICS, ties=ties, device="numpy")
    r = rc.evaluate(q, g, query_labels=yq, slices=lang, **common)
    assert set(r.slices) == set(lang.tolist())
    for name, s in r.slices.items():
        mask = lang == name
        alone = rc.evaluate(q[mask], g, query_labels=yq[mask], **common)
        assert s.n_queries == int(mask.sum())
        assert s.n_used == alone.n_used and s.n_skipped == alone.n_skipped
        for m in METRICS:
            assert s[m] == alone[m], (name, m)  # exact: the same per-query values, the same mean
        assert np.array_equal(s.result.per_query["map"], alone.per_query["map"], equal_nan=True)


def test_named_dimensions_functions_and_skipped_queries():
    q, g, yq, yg = _data(seed=3)
    yq[:4] = 99  # no relevant gallery item: skipped, and counted per slice
    lengths = np.arange(len(q))
    r = rc.evaluate(
        q,
        g,
        query_labels=yq,
        gallery_labels=yg,
        metrics=["map"],
        device="numpy",
        slices={
            "half": (lengths, lambda n: "first" if n < 45 else "second"),
            "parity": lengths % 2,
        },
    )
    assert list(r.slices) == ["half=first", "half=second", "parity=0", "parity=1"]
    first = r.slices["half=first"]
    assert first.n_queries == 45 and first.n_skipped == 4 and first.n_used == 41
    expect = np.nanmean(r.per_query["map"][:45])
    assert first["map"] == pytest.approx(expect, abs=1e-15)
    assert r.slices.missing == {"half": 0, "parity": 0}
    assert r.to_dict()["slices"]["slices"]["parity=1"]["n_queries"] == 45


def test_missing_values_are_counted_never_dropped_silently():
    q, g, yq, yg = _data()
    lang = ["de", "en", None] * 30
    r = rc.evaluate(
        q, g, query_labels=yq, gallery_labels=yg, metrics=["map"], slices=lang, device="numpy"
    )
    assert set(r.slices) == {"de", "en"}
    assert r.slices.missing == {"slice": 30}
    assert "30 queries have no slice value" in r.slices.missing_note()
    assert "30 queries have no slice value" in repr(r.slices)


def test_global_metrics_are_not_sliced():
    q, g, yq, yg = _data()
    r = rc.evaluate(
        q,
        g,
        query_labels=yq,
        gallery_labels=yg,
        metrics=["map", "pair_f1@t=0.5"],
        slices=yq % 2,
        device="numpy",
    )
    assert list(r.slices["0"]) == ["map"]


@pytest.mark.parametrize(
    "slices, message",
    [
        (["a"] * 10, "10 values for 90 queries"),
        (["a", 1] * 45, "mixed types"),
        ([1.0, float("nan")] * 45, "NaN metadata"),
        ({"x": ([1] * 90, lambda v: float("nan"))}, "NaN"),
        ({"x": ([0] * 90, lambda v: 1 / v)}, "failed on query 0"),
        ({"": ["a"] * 90}, "dimension names"),
        ({"a=b": ["a"] * 90}, "dimension names"),
        ([{"a": 1}] * 90, "type dict"),
        ({}, "empty"),
        ("abc", "one value per query"),
        (np.zeros((90, 2)), "1-D"),
    ],
)
def test_bad_slices_fail_closed_before_the_pass(slices, message):
    q, g, yq, yg = _data()
    with pytest.raises(InputError, match=message):
        rc.evaluate(
            q, g, query_labels=yq, gallery_labels=yg, metrics=["map"], slices=slices, device="numpy"
        )


def test_evaluate_run_slices_by_query_id_and_with_slices():
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"a": 1.0, "b": 2.0}, "q3": {"b": 1.0}}
    qrels = {"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"b": 1}}
    r = rc.evaluate_run(run, qrels, ["mrr"], slices={"q1": "x", "q2": "y"})
    assert r.slices["x"]["mrr"] == 1.0 and r.slices["y"]["mrr"] == 0.5
    assert r.slices.missing == {"slice": 1}  # q3 named by no slice: counted
    with pytest.raises(InputError, match="not queries of this evaluation"):
        rc.evaluate_run(run, qrels, ["mrr"], slices={"q9": "x"})
    plain = rc.evaluate_run(run, qrels, ["mrr"])
    assert plain.slices is None
    rc.with_slices(plain, {"kind": {"q1": "x", "q2": "x", "q3": "z"}})
    assert plain.slices["kind=x"]["mrr"] == 0.75 and plain.slices["kind=z"]["mrr"] == 1.0


def test_the_evaluation_cache_keys_slices_by_their_values():
    """rc_evaluate's cache digests its arguments: a slice function has no content (it
    recursed forever), and two slicings of the same evaluation are two results."""
    q, g, yq, yg = _data()
    cache = rc.engine.EvaluationCache()
    common = dict(gallery_labels=yg, query_labels=yq, metrics=["map"], device="numpy")
    by_fn = cache.evaluate(q, g, slices={"half": (np.arange(90), lambda i: i < 45)}, **common)
    assert list(by_fn.slices) == ["half=True", "half=False"]
    two = cache.evaluate(q, g, slices=(yq % 2).tolist(), **common)
    three = cache.evaluate(q, g, slices=(yq % 3).tolist(), **common)
    assert list(two.slices) != list(three.slices) and len(three.slices) == 3
    again = cache.evaluate(q, g, slices={"half": (np.arange(90), lambda i: i < 45)}, **common)
    assert again is by_fn  # the same values: one pass


def test_pandas_metadata_series_and_dataframe_rows():
    pd = pytest.importorskip("pandas")
    q, g, yq, yg = _data()
    meta = pd.DataFrame({"lang": ["de", "en", None] * 30, "n_tokens": np.arange(90)})
    common = dict(query_labels=yq, gallery_labels=yg, metrics=["map"], device="numpy")
    r = rc.evaluate(
        q,
        g,
        slices={
            "lang": meta["lang"],  # a Series with missing values: counted
            "size": (meta, lambda row: "long" if row["n_tokens"] >= 60 else "short"),
            "kind": ([{"k": i % 3} for i in range(90)], lambda d: f"k{d['k']}"),
        },
        **common,
    )
    assert r.slices.missing == {"lang": 30, "size": 0, "kind": 0}
    assert r.slices["size=long"].n_queries == 30 and r.slices["kind=k2"].n_queries == 30


def test_pandas_na_is_missing_but_a_float_nan_is_an_error():
    pd = pytest.importorskip("pandas")
    q, g, yq, yg = _data()
    common = dict(query_labels=yq, gallery_labels=yg, metrics=["map"], device="numpy")
    lang = pd.Series(["de", "en", pd.NA] * 30, dtype="string")
    assert rc.evaluate(q, g, slices=lang, **common).slices.missing == {"slice": 30}
    with pytest.raises(InputError, match="NaN metadata"):
        rc.evaluate(q, g, slices=pd.Series([1.0, np.nan, 2.0] * 30), **common)


def test_many_slices_and_unusual_values_group_exactly():
    """Grouping sorts once (2000 slices of 20 000 queries in well under a second); ints
    beyond int64, bytes and booleans are slice values like any other."""
    q, g, yq, yg = _data()
    common = dict(query_labels=yq, gallery_labels=yg, metrics=["map"], device="numpy")
    big = [2**70 + (i % 3) for i in range(90)]
    r = rc.evaluate(
        q, g, slices={"big": big, "b": np.array([b"x", b"y"] * 45), "t": yq > 5}, **common
    )
    assert list(r.slices)[:3] == [f"big={2**70}", f"big={2**70 + 1}", f"big={2**70 + 2}"]
    assert {"b=x", "b=y", "t=True", "t=False"} <= set(r.slices)
    for name, s in r.slices.items():  # each slice's queries, in order, and its value
        assert s["map"] == pytest.approx(np.nanmean(r.per_query["map"][s.index]), abs=1e-15)
        assert np.all(np.diff(s.index) > 0)
    from retrieval_checks.engine._slices import _groups

    values = np.random.default_rng(0).integers(0, 2000, 20_000).tolist()
    groups = _groups(values)
    assert len(groups) == 2000 and sum(len(ix) for _, ix in groups) == 20_000
    assert [v for v, _ in groups[:3]] == list(dict.fromkeys(values))[
        :3
    ]  # order of first appearance
    assert all(all(values[i] == v for i in ix) for v, ix in groups[:50])


def test_a_run_takes_slice_values_by_query_id_only():
    """A run has no query order a user can know (evaluate_run sorts the ids: q1, q10, q2),
    so a list or array given in the file's order would put values on the wrong queries
    without an error: positional forms are refused, for evaluate_run and with_slices."""
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"a": 2.0, "b": 1.0}, "q10": {"a": 2.0, "b": 1.0}}
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q10": {"a": 1}}
    positional = (
        ["en", "de", "en"],
        np.array(["en", "de", "en"]),
        {"lang": ["en", "de", "en"]},
        {"lang": {"q1": "en", "q2": "de", "q10": "en"}, "len": [1, 2, 3]},
        (["en", "de", "en"], str.upper),
    )
    for spec in positional:
        with pytest.raises(InputError, match=r"by query id.*\{qid: value\}"):
            rc.evaluate_run(run, qrels, ["map"], slices=spec)
        plain = rc.evaluate_run(run, qrels, ["map"])
        with pytest.raises(InputError, match="by query id"):
            rc.with_slices(plain, spec)
    r = rc.evaluate_run(run, qrels, ["map"], slices={"q1": "en", "q2": "de", "q10": "en"})
    assert r.slices["en"]["map"] == 1.0 and r.slices["de"]["map"] == 0.5
