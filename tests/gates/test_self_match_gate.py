"""Queries that are also gallery rows relevant to them (h5's finding F6): each retrieves
itself first and scores near 1 whatever the model. ``rc.evaluate`` warns
(SelfMatchWarning: 61 of the project's tests pass equal arrays on purpose), a YAML suite
fails the check where every query does, and now a gate does too: the result records
how many queries retrieved themselves (``result.self_matched``) and the gates' common
path refuses a result in which every query did, with the suite's message; a partial
self-match stays a warning. The warning names the user's line (the first frame outside
retrieval-checks), not the library's cache or stages. Cost: about 2 s (small
evaluations, one in-process pytest session)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.engine import EvaluationCache
from retrieval_checks.errors import InputError, SelfMatchWarning, warn_outside

pytest_plugins = ["pytester"]

SAYS = "queries and gallery: each of the 60 queries is also a gallery row relevant to it"


def _data():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(20), 3)
    return rng.normal(size=(60, 8)), y  # a model that knows nothing


def _evaluate(*args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = rc.evaluate(*args, **kwargs)
    return res, [w for w in caught if w.category is SelfMatchWarning]


@pytest.mark.parametrize(
    "gate",
    [
        lambda r: rc.assert_recall_at_least(r, 0.99, on="interval"),
        lambda r: rc.assert_metric(r, "hit_rate@1", at_least=0.5),
        lambda r: rc.assert_metric(r, "map", at_least=0.5, on="interval"),
        lambda r: rc.assert_map_at_least(r, 0.1),
    ],
)
def test_a_gate_refuses_a_result_in_which_every_query_retrieved_itself(gate):
    x, y = _data()
    res, said = _evaluate(x, x, query_labels=y, gallery_labels=y, metrics=["hit_rate@1", "map"])
    assert len(said) == 1 and res["hit_rate@1"] == 1.0  # evaluate only warns ...
    assert res.self_matched == res.n_queries == 60
    with pytest.raises(InputError) as info:  # ... a gate refuses, with the suite's message
        gate(res)
    assert SAYS in str(info.value) and "query_ids=... and gallery_ids=..." in str(info.value)


def test_baselines_comparisons_gaps_and_slice_gates_refuse_it_too():
    """Not only the value gates: a baseline recorded from such a result, a comparison or a
    gap with it on either side, and a slice gate all refuse it, with the same message."""
    x, y = _data()
    slices = np.where(np.arange(60) % 2, "a", "b")
    leaked, _ = _evaluate(
        x, x, query_labels=y, gallery_labels=y, metrics=["hit_rate@1", "map"], slices=slices
    )
    honest = rc.evaluate(x, query_labels=y, metrics=["hit_rate@1", "map"], slices=slices)
    for call, who in [
        (lambda: rc.baseline_record(leaked, "map"), "baseline_record"),
        (lambda: rc.compare(leaked, honest, "map"), "compare, the candidate"),
        (lambda: rc.compare(honest, leaked, "map"), "compare, the baseline"),
        (lambda: rc.generalization_gap(leaked, honest, "map"), "generalization_gap, the train"),
        (lambda: rc.assert_slices(leaked, "map", at_least=0.1), "assert_slices"),
        (lambda: rc.assert_worst_slice_at_least(leaked, "map", 0.1), "assert_worst_slice"),
        (lambda: rc.slice_baseline(leaked, "map"), "slice_baseline"),
    ]:
        with pytest.raises(InputError, match=rf"^{who}.*: {SAYS}"):
            call()
    rc.baseline_record(honest, "map")  # the honest result is recorded


def test_a_partial_self_match_stays_a_warning():
    x, y = _data()
    gallery = x.copy()
    gallery[:30] += 0.01  # half the queries are no longer gallery rows
    res, said = _evaluate(x, gallery, query_labels=y, gallery_labels=y, metrics=["hit_rate@1"])
    assert len(said) == 1 and said[0].message.n_found == 30 and res.self_matched == 30
    rc.assert_metric(res, "hit_rate@1", at_least=0.5)  # judged on its data


@pytest.mark.parametrize(
    "kwargs",
    [
        {},  # leave-one-out
        {"gallery": True, "query_ids": np.arange(60), "gallery_ids": np.arange(60)},
    ],
)
def test_no_self_match_where_each_query_leaves_its_own_item(kwargs):
    x, y = _data()
    if kwargs.pop("gallery", False):
        kwargs.update(gallery=x, gallery_labels=y)
    res, said = _evaluate(x, query_labels=y, metrics=["hit_rate@1"], **kwargs)
    assert not said and res.self_matched == 0
    rc.assert_metric(res, "hit_rate@1", at_least=0.01)


def test_the_warning_names_the_callers_line_and_the_cache_keeps_the_fact():
    x, y = _data()
    cache = EvaluationCache()
    for _ in range(2):  # the second call is a cache hit: no pass, no warning, the same result
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = cache.evaluate(x, x, query_labels=y, gallery_labels=y, metrics=["map"])
        said = [w for w in caught if w.category is SelfMatchWarning]
        assert all(w.filename == __file__ for w in said), [w.filename for w in said]
        with pytest.raises(InputError, match="queries and gallery"):
            rc.assert_metric(res, "map", at_least=0.1)
    assert cache.misses == 1 and cache.hits == 1


def test_warn_outside_skips_the_librarys_frames():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_outside("plain", UserWarning)
    assert caught[0].filename == __file__ and caught[0].category is UserWarning


def test_a_pytest_test_on_queries_equal_to_the_gallery_fails(pytester):
    """h5's repro: rc_evaluate with the gallery equal to the queries and a gate on the
    interval at 0.99 passed with only a warning pointing into engine/_cache.py."""
    pytester.makepyfile(
        test_selfmatch="""
        import numpy as np
        import retrieval_checks as rc

        def test_gallery_is_the_queries(rc_evaluate):
            rng = np.random.default_rng(0); y = np.repeat(np.arange(20), 3)
            X = rng.normal(size=(60, 8))
            res = rc_evaluate(X, X, query_labels=y, gallery_labels=y, metrics=["hit_rate@1"])
            rc.assert_recall_at_least(res, 0.99, on="interval")
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--rc-history=none")
    result.assert_outcomes(failed=1)
    text = "\n".join(result.outlines)
    assert SAYS in text
    assert "test_selfmatch.py:7: SelfMatchWarning" in text and "_cache.py" not in text


def test_equal_items_and_a_single_query_are_not_refused():
    """A reviewer's findings: an oracle's one-hot class vectors (every query equal to the
    five gallery items of its class: equal items, not the same array twice) and the
    one-query idiom (a query equal to one relevant gallery row) pass the gates; the same
    array twice is still refused."""
    classes = 20
    q = np.eye(classes)
    q[:, 0] += np.arange(classes)  # each class's vector its own first value
    g = np.repeat(q, 5, axis=0)
    oracle, said = _evaluate(
        q,
        g,
        query_labels=np.arange(classes),
        gallery_labels=np.repeat(np.arange(classes), 5),
        metrics=["hit_rate@1"],
    )
    assert said == [] and oracle.self_matched == 0 and not oracle.self_matched_all  # ties
    rc.assert_metric(oracle, "hit_rate@1", at_least=0.5)
    one, _ = _evaluate(
        [[1.0]], [[0.9], [1.0], [0.2]], relevance=[[1]], metrics=["mrr"], similarity="dot"
    )
    rc.assert_metric(one, "mrr", at_least=0.5)
    x, y = _data()
    twice, _ = _evaluate(x, x, query_labels=y, gallery_labels=y, metrics=["map"])
    assert twice.self_matched_all
    with pytest.raises(InputError, match=SAYS):
        rc.assert_metric(twice, "map", at_least=0.1)


def test_leave_one_out_over_rows_stacked_twice_is_refused():
    """Leave-one-out over the same rows twice (h13): each item retrieves its copy first,
    hit_rate@1 is 1 for random embeddings. evaluate warns, a gate refuses; giving the
    copies one id leaves them out of each other's ranking, and nothing is said."""
    x, y = _data()
    xx, yy = np.vstack([x, x]), np.concatenate([y, y])
    res, said = _evaluate(xx, query_labels=yy, metrics=["hit_rate@1", "map"])
    assert res["hit_rate@1"] == 1.0 and res.self_matched == 120 and len(said) == 1
    assert "each of the 120 items equals another item relevant to it" in str(said[0].message)
    with pytest.raises(InputError, match="queries: each of the 120 items equals another item"):
        rc.assert_recall_at_least(res, 0.5, k=1)
    with pytest.raises(InputError, match="the same rows stacked twice"):
        rc.baseline_record(res, "map")
    ids = np.concatenate([np.arange(60), np.arange(60)])
    res, said = _evaluate(xx, query_labels=yy, query_ids=ids, metrics=["hit_rate@1"])
    assert said == [] and res.self_matched == 0 and res["hit_rate@1"] < 0.5
    rc.assert_metric(res, "hit_rate@1", at_most=0.9)


def test_leave_one_out_with_a_few_copies_warns_and_equal_items_are_ties():
    x, y = _data()
    res, said = _evaluate(
        np.vstack([x, x[:5]]), query_labels=np.concatenate([y, y[:5]]), metrics=["map"]
    )
    assert res.self_matched == 10 and len(said) == 1  # 5 pairs: warned, not refused
    assert "10 of 65 items equal another item relevant to them" in str(said[0].message)
    rc.assert_map_at_least(res, 0.01)
    oracle = np.eye(20)[y]  # class vectors: equal items in threes are ties
    res, said = _evaluate(oracle, query_labels=y, metrics=["map"])
    assert said == [] and res.self_matched == 0
    # classes of two, each collapsed to one point: each item's only relevant item equals
    # it, which items given twice (one-item classes stacked) look like too: fail closed
    pairs = np.eye(30)[np.repeat(np.arange(30), 2)]
    res, said = _evaluate(pairs, query_labels=np.repeat(np.arange(30), 2), metrics=["map"])
    assert res.self_matched_all and len(said) == 1
    with pytest.raises(InputError, match="each of the 60 items equals another item"):
        rc.assert_map_at_least(res, 0.5)


def test_the_same_array_with_one_relevant_item_a_query_is_refused():
    """q == g with instance labels (each query's only relevant item is its own copy):
    random embeddings scored hit_rate@1 1.0 with no warning, and every gate passed (h20:
    the exemption of equal rows that are all the relevant items covered it)."""
    x = np.random.default_rng(0).normal(size=(50, 16)).astype(np.float32)
    for labels in (np.arange(50), np.arange(50) // 2):
        res, said = _evaluate(x, x, query_labels=labels, gallery_labels=labels, metrics=["map"])
        assert res.self_matched_all and len(said) == 1
        with pytest.raises(InputError, match="each of the 50 queries is also a gallery row"):
            rc.assert_map_at_least(res, 0.01)


def test_a_model_of_a_few_points_a_class_warns_and_is_not_refused():
    """int8 codes that take 3 points per class: every item equals others of its class, in
    counts that are not the same rows twice (h20: every gate refused a map of 0.46 as
    'stacked twice', and a training callback aborted). Warned, counted, gated; the same
    rows stacked twice are still refused."""
    rng = np.random.default_rng(0)
    centers = rng.integers(-100, 100, size=(30, 32)).astype(np.float32)
    labels = np.repeat(np.arange(10), 20)
    x = centers[labels * 3 + rng.integers(0, 3, size=labels.size)]
    res, said = _evaluate(x, query_labels=labels, metrics=["map"])
    assert not res.self_matched_all and len(said) == 1
    assert "not the same rows stacked twice" in str(said[0].message)
    rc.assert_map_at_least(res, 0.2)
    q_labels = np.repeat(np.arange(10), 5)
    q = centers[q_labels * 3 + rng.integers(0, 3, size=q_labels.size)]
    res, _ = _evaluate(q, x, query_labels=q_labels, gallery_labels=labels, metrics=["map"])
    assert not res.self_matched_all
    rc.assert_map_at_least(res, 0.2)
    twice, _ = _evaluate(np.vstack([x, x]), query_labels=np.r_[labels, labels], metrics=["map"])
    assert twice.self_matched_all


def test_rows_equal_in_their_first_16_columns_are_told_apart_by_the_whole_row():
    """Keys of the first 16 columns group rows whose start is equal; the whole-row keys
    then find the copies (h20: replacing that re-key by the 16-column keys left every
    test green). d = 32, the first 16 columns zero: stacked twice is refused, once is not."""
    rng = np.random.default_rng(0)
    x = np.zeros((1000, 32), np.float32)
    x[:, 16:] = rng.normal(size=(1000, 16))
    y = np.repeat(np.arange(100), 10)
    once, said = _evaluate(x, query_labels=y, metrics=["hit_rate@1"])
    assert said == [] and once.self_matched == 0
    twice, _ = _evaluate(np.vstack([x, x]), query_labels=np.r_[y, y], metrics=["hit_rate@1"])
    assert twice.self_matched_all and twice["hit_rate@1"] == 1.0


def test_quantized_rows_given_twice_are_refused_on_both_sides():
    """Rows of few distinct values (h16): keyed by their first two columns, many rows
    shared a key and no copy looked like a query's own, so the same rows twice passed.
    Whole-row keys find each row's copies; an item whose equal rows are all its relevant
    items (a class mapped to one point) stays a tie."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(100), 10)
    x = rng.integers(-3, 4, size=(1000, 16)).astype(np.float32)
    twice, said = _evaluate(x, x, query_labels=y, gallery_labels=y, metrics=["hit_rate@1"])
    assert twice.self_matched_all and len(said) == 1
    loo, said = _evaluate(np.vstack([x, x]), query_labels=np.r_[y, y], metrics=["hit_rate@1"])
    assert loo.self_matched_all and loo["hit_rate@1"] == 1.0
    with pytest.raises(InputError, match="each of the 2000 items equals another item"):
        rc.assert_metric(loo, "hit_rate@1", at_least=0.5)


def test_one_enrolment_an_identity_matched_by_several_queries_is_judged():
    """A gallery of one enrolment per identity and a near-perfect int8 model: each query's
    code equals its identity's, and each gallery row is matched by three queries, which
    queries given twice cannot make (h27: every gate refused it as the same array)."""
    rng = np.random.default_rng(0)
    codes = rng.integers(-100, 100, size=(200, 32)).astype(np.float32)
    identity = np.repeat(np.arange(200), 3)
    res, said = _evaluate(
        codes[identity],
        codes,
        query_labels=identity,
        gallery_labels=np.arange(200),
        metrics=["map"],
    )
    assert not res.self_matched_all
    rc.assert_map_at_least(res, 0.5)
