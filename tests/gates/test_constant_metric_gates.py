"""Gates on metrics whose value is the same whatever the model are refused (h22, found by
a new user): grouped recall at a K past every non-relevant item of the query's group,
recall at a precision level at or below the share of positive pairs, and pair recall,
precision and F1 at a threshold every pair clears (or none does). A random model gave
1.0 on each and the gates passed; the hit_rate@K analogue was already refused.
Precision at a recall level is never below the positive share: an ``at_least`` at or
below it could never fail either. The cases beside them must still be gated."""

from __future__ import annotations

import textwrap
from fractions import Fraction

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.suites import load_suite
from retrieval_checks.suites._run import SuiteRunner


# 100 classes x 10 items, a model that ignores its input; with group_size=2 a query
# ranks 19 items of its group: 9 relevant, 10 non-relevant, so K=11 always hits
@pytest.fixture(scope="module")
def grouped():
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(100), 10)
    x = rng.normal(size=(1000, 16))
    metrics = ["grouped_recall@1", "grouped_recall@10", "grouped_recall@11", "grouped_recall@12"]
    return rc.evaluate(x, query_labels=y, metrics=metrics, group_size=2)


# two balanced classes: about half of the pairs are positive
@pytest.fixture(scope="module")
def pairs():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(2), 10)
    metrics = [
        "recall_at_precision@0.45",
        "recall_at_precision@0.4736",
        "recall_at_precision@0.4737",
        "precision_at_recall@0.9",
        "pair_recall@t=-1",
        "pair_precision@t=-1",
        "pair_f1@t=-1",
        "pair_recall@t=-1.5",
        "pair_recall@t=1.5",
        "pair_precision@t=1.5",
        "pair_recall@t=-0.99",
        "pair_recall@t=0",
        "pair_precision@t=0",
    ]
    return rc.evaluate(rng.normal(size=(20, 16)), query_labels=y, metrics=metrics)


# ---------------------------------------------------------------- grouped recall


def test_grouped_recall_records_its_certain_k(grouped):
    g = grouped.grouped["grouped_recall@11"]
    assert g.certain_k == 11
    assert grouped["grouped_recall@11"] == 1.0 and grouped["grouped_recall@1"] < 0.6


@pytest.mark.parametrize("metric", ["grouped_recall@11", "grouped_recall@12"])
@pytest.mark.parametrize(
    "gate",
    [
        lambda r, m: rc.assert_grouped_recall_ci(r, 0.99, metric=m),
        lambda r, m: rc.assert_grouped_recall_ci(r, 0.9, metric=m),
        lambda r, m: rc.assert_grouped_recall_ci(r, 0.99, metric=m, on="value"),
        lambda r, m: rc.assert_metric(r, m, at_least=0.5),
        lambda r, m: rc.assert_metric(r, m, at_most=0.5),
    ],
)
def test_grouped_recall_past_every_non_relevant_item_is_refused(grouped, metric, gate):
    with pytest.raises(
        rc.InputError,
        match=rf"{metric}: K=\d+ reaches past every non-relevant item of every query's group "
        r"\(groups of 2 labels\) \(K >= 11\), so its value is 1 whatever the model.*"
        r"gate a smaller K \(< 11\)",
    ):
        gate(grouped, metric)


def test_grouped_recall_below_the_certain_k_is_gated(grouped):
    rc.assert_grouped_recall_ci(grouped, 0.3, metric="grouped_recall@1")
    with pytest.raises(AssertionError):
        rc.assert_grouped_recall_ci(grouped, 0.99, metric="grouped_recall@1")
    # K=10: a query whose 10 non-relevant items all rank first still misses
    rc.assert_metric(grouped, "grouped_recall@10", at_least=0.5)


def test_grouped_certain_k_counts_every_partition_and_group():
    # classes of unequal size: the certain K is the largest over the queries (a query of
    # a small class in a group with a large one has the most non-relevant items)
    rng = np.random.default_rng(1)
    sizes = [2, 2, 3, 3, 4, 4, 5, 5]
    y = np.repeat(np.arange(len(sizes)), sizes)
    x = rng.normal(size=(y.size, 8))
    res = rc.evaluate(
        x, query_labels=y, metrics=["grouped_recall@1"], group_size=2, group_repeats=3
    )
    g = res.grouped["grouped_recall@1"]
    # the worst case of any partition: a class of 2 grouped with one of 5 (5 non-relevant)
    # when some partition pairs them; never more than 5 + 1
    assert g.certain_k is not None and 2 <= g.certain_k <= 6
    want = 0
    for rep in range(3):
        groups, _ = rc.label_partition(np.unique(y), 2, seed=g.seed + rep)
        for a, b in groups:
            na, nb = sizes[a], sizes[b]
            want = max(want, nb + 1 if na >= 2 else 0, na + 1 if nb >= 2 else 0)
    assert g.certain_k == want


def test_grouped_certain_k_with_a_gallery_and_ids():
    # queries and gallery apart, and a gallery item with a query's id is its own (never
    # ranked): it is no relevant item of that query
    rng = np.random.default_rng(2)
    yq = np.repeat(np.arange(6), 2)
    yg = np.repeat(np.arange(6), 4)
    q, gal = rng.normal(size=(12, 8)), rng.normal(size=(24, 8))
    qid = [f"q{i}" for i in range(12)]
    gid = [f"g{i}" for i in range(24)]
    gid[0] = "q0"  # query 0's own item, label 0
    res = rc.evaluate(
        q,
        gal,
        query_labels=yq,
        gallery_labels=yg,
        query_ids=qid,
        gallery_ids=gid,
        metrics=["grouped_recall@1", "grouped_recall@5"],
        group_size=2,
    )
    g = res.grouped["grouped_recall@5"]
    # a query ranks 8 gallery items of its group (7 for query 0): 4 relevant (3), 4 not
    assert g.certain_k == 5
    with pytest.raises(rc.InputError, match=r"K=5 reaches .*K >= 5"):
        rc.assert_metric(res, "grouped_recall@5", at_least=0.5)
    rc.assert_metric(res, "grouped_recall@1", at_least=0.01)


# ---------------------------------------------------------------- pair metrics


def _share(res, name):
    c = res.pair_counts[name]
    return Fraction(c["n_positive"], c["n_positive"] + c["n_negative"])


def test_the_pair_fixture_has_the_share_the_cases_assume(pairs):
    assert _share(pairs, "recall_at_precision@0.45") == Fraction(9, 19)  # 0.47368...
    assert pairs["recall_at_precision@0.45"] == 1.0


@pytest.mark.parametrize("metric", ["recall_at_precision@0.45", "recall_at_precision@0.4736"])
@pytest.mark.parametrize("bound", [{"at_least": 0.99}, {"at_most": 0.5}])
def test_recall_at_a_precision_at_or_below_the_positive_share_is_refused(pairs, metric, bound):
    assert pairs[metric] == 1.0
    with pytest.raises(
        rc.InputError,
        match=r"at or below the share of positive pairs among all pairs \(180 of 380: 0\.4737\).*"
        r"its value is 1 whatever the model.*gate a precision level above 0\.4737 \(P >= 0\.4737\)",
    ):
        rc.assert_metric(pairs, metric, **bound)


def test_assert_recall_at_precision_refuses_it_too(pairs):
    with pytest.raises(rc.InputError, match="whatever the model"):
        rc.assert_recall_at_precision(pairs, 0.99, precision=0.45)


def test_recall_at_a_precision_above_the_share_is_gated(pairs):
    # 0.4737 > 9/19: a model that ranks every negative pair first gets 0 there, so the
    # gate is judged (this model's value passes or fails it; neither is refused)
    value = pairs["recall_at_precision@0.4737"]
    rc.assert_metric(pairs, "recall_at_precision@0.4737", at_least=value)
    if value > 0.01:
        with pytest.raises(AssertionError):
            rc.assert_metric(pairs, "recall_at_precision@0.4737", at_most=value - 0.01)


@pytest.mark.parametrize(
    "metric, value",
    [
        ("pair_recall@t=-1", 1.0),
        ("pair_recall@t=-1.5", 1.0),
        ("pair_precision@t=-1", 9 / 19),
        ("pair_f1@t=-1", 2 * 180 / (2 * 180 + 200)),
    ],
)
def test_pair_metrics_at_a_threshold_every_pair_clears_are_refused(pairs, metric, value):
    assert pairs[metric] == pytest.approx(value)
    with pytest.raises(
        rc.InputError,
        match=r"at or below the lowest cosine similarity \(-1\): every pair is predicted positive.*"
        r"whatever the model.*gate a threshold above -1",
    ):
        rc.assert_metric(pairs, metric, at_least=0.3)


@pytest.mark.parametrize("metric", ["pair_recall@t=1.5", "pair_precision@t=1.5"])
def test_pair_metrics_at_a_threshold_no_pair_clears_are_refused(pairs, metric):
    assert pairs[metric] == 0.0
    with pytest.raises(rc.InputError, match=r"no pair is predicted positive.*its value is 0"):
        rc.assert_metric(pairs, metric, at_most=0.5)


@pytest.mark.parametrize("metric", ["pair_recall@t=0", "pair_precision@t=0"])
def test_pair_metrics_at_an_ordinary_threshold_are_gated(pairs, metric):
    rc.assert_metric(pairs, metric, at_least=0.0001)
    with pytest.raises(AssertionError):
        rc.assert_metric(pairs, metric, at_least=1.0 - 1e-9)


def test_a_threshold_just_above_the_lowest_score_is_not_refused(pairs):
    # every pair of this model clears -0.99, but a pair of opposite directions would not
    rc.assert_metric(pairs, "pair_recall@t=-0.99", at_least=0.5)


def test_precision_at_recall_is_never_below_the_positive_share(pairs):
    assert pairs["precision_at_recall@0.9"] >= 9 / 19
    with pytest.raises(
        rc.InputError,
        match=r"at_least=0\.47: the smallest value attainable here is 0\.4737 \(the share of "
        r"positive pairs.*could never fail; write a bound above 0\.4737 \(at_least >= 0\.4737\)",
    ):
        rc.assert_metric(pairs, "precision_at_recall@0.9", at_least=0.47)
    with pytest.raises(rc.InputError, match="could never fail"):
        rc.assert_metric(pairs, "precision_at_recall@0.9", at_least=9 / 19)
    with pytest.raises(rc.InputError, match="could never pass"):
        rc.assert_metric(pairs, "precision_at_recall@0.9", at_most=0.4)
    # a bound above the share can fail: a model that ranks negatives first gets the share
    rc.assert_metric(pairs, "precision_at_recall@0.9", at_least=0.474)


def test_constant_model_on_ten_classes():
    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(10), 8)
    c = np.ones((80, 4)) + 0 * rng.normal(size=(80, 4))
    res = rc.evaluate(c, query_labels=y, metrics=["recall_at_precision@0.05"])
    assert res["recall_at_precision@0.05"] == 1.0
    with pytest.raises(
        rc.InputError, match=r"share of positive pairs among all pairs \(560 of 6320"
    ):
        rc.assert_recall_at_precision(res, 0.99, precision=0.05)


def test_hamming_thresholds():
    rng = np.random.default_rng(4)
    y = np.repeat(np.arange(4), 5)
    codes = rng.random((20, 16)) > 0.5
    res = rc.evaluate(
        codes,
        query_labels=y,
        metrics=["pair_recall@t=-1", "pair_recall@t=4"],
        similarity="hamming",
    )
    with pytest.raises(rc.InputError, match="negative Hamming distance: no pair"):
        rc.assert_metric(res, "pair_recall@t=-1", at_most=0.5)
    rc.assert_metric(res, "pair_recall@t=4", at_least=0.0001)


# ---------------------------------------------------------------- the rule itself


def test_pair_constant_rule():
    from retrieval_checks.metrics._thresholds import pair_constant, pair_floor

    kw = dict(n_positive=180, n_negative=200)
    assert pair_constant("recall_at_precision", Fraction(9, 19), **kw)[0] == 1.0
    assert pair_constant("recall_at_precision", Fraction(9, 19) + Fraction(1, 10**9), **kw) is None
    for t in (16, 17):  # a distance of the code length or more: every pair
        value, why, fix = pair_constant("pair_recall", t, similarity="hamming", n_bits=16, **kw)
        assert value == 1.0 and "16 bits" in why and "below 16" in fix
    assert pair_constant("pair_recall", 15, similarity="hamming", n_bits=16, **kw) is None
    assert pair_constant("pair_recall", 64, similarity="hamming", **kw) is None  # length unknown
    assert pair_constant("pair_precision", 0.5, similarity="neg_l2", **kw)[0] == 0.0
    assert pair_constant("pair_precision", 0, similarity="neg_l2", **kw) is None
    assert pair_constant("pair_recall", -1e9, similarity="dot", **kw) is None  # unbounded
    assert pair_constant("pair_recall", 1, similarity="cosine", **kw) is None  # equal directions
    assert pair_constant("precision_at_recall", 0.01, **kw) is None
    assert pair_floor("precision_at_recall", **kw)[0] == 9 / 19
    assert pair_floor("recall_at_precision", **kw) is None


# ---------------------------------------------------------------- a YAML suite


def test_a_yaml_check_on_such_a_metric_is_refused(tmp_path):
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(20), 10)
    np.savez(
        tmp_path / "rand.npz", embeddings=rng.normal(size=(200, 8)).astype(np.float32), labels=y
    )
    (tmp_path / "rc_h22.yaml").write_text(
        textwrap.dedent(
            """
            suite: h22
            datasets:
              rand: {queries: rand.npz}
            options: {group_size: 2}
            checks:
              - {metric: grouped_recall@11, at_least: 0.9, on: interval}
              - {metric: recall_at_precision@0.01, at_least: 0.99}
              - {metric: pair_recall@t=-1, at_least: 0.99}
              - {metric: grouped_recall@1, at_least: 0.01, on: interval}
            """
        )
    )
    suite = load_suite(tmp_path / "rc_h22.yaml")
    runner = SuiteRunner()
    said = {}
    for case in suite.cases:
        try:
            runner.run(suite, case)
        except rc.InputError as exc:
            said[case.check.metric.name] = str(exc)
    assert set(said) == {"grouped_recall@11", "recall_at_precision@0.01", "pair_recall@t=-1"}
    assert all("whatever the model" in m for m in said.values())


def test_grouped_certain_k_in_leave_one_out_with_repeated_ids():
    # items 0 and 1 share an id (one item twice): each leaves the other's ranking, and
    # its non-relevant items are as many as anyone's
    rng = np.random.default_rng(6)
    y = np.repeat(np.arange(6), 4)
    ids = [f"i{i}" for i in range(24)]
    ids[1] = "i0"
    res = rc.evaluate(
        rng.normal(size=(24, 8)),
        query_labels=y,
        query_ids=ids,
        metrics=["grouped_recall@4", "grouped_recall@5"],
        group_size=2,
    )
    assert res.grouped["grouped_recall@5"].certain_k == 5
    with pytest.raises(rc.InputError, match=r"K=5 reaches .*\(K >= 5\)"):
        rc.assert_metric(res, "grouped_recall@5", at_least=0.5)
    rc.assert_metric(res, "grouped_recall@4", at_least=0.01)


def test_a_hamming_threshold_at_the_code_length_is_refused_end_to_end():
    """The result records the code length (config n_bits), so a pair threshold at or above
    it (every pair predicted positive) is refused from an evaluation, not only by the rule."""
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 2, size=(200, 32)).astype(bool)
    y = np.repeat(np.arange(20), 10)
    res = rc.evaluate(codes, query_labels=y, metrics=["pair_recall@t=32"], similarity="hamming")
    assert res.config["n_bits"] == 32
    with pytest.raises(rc.InputError, match="at or above the code length"):
        rc.assert_metric(res, "pair_recall@t=32", at_least=0.5)
