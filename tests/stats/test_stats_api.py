"""Gaps, paired comparisons and intervals: values against their formulas, and bad input
(the fail-closed battery at the end: every argument type-checked with the library's errors
naming it, paired comparisons refused across different queries, a property test that only
library errors escape). Cost: about 4 s at a load average of 9 (measured; the fail-closed
battery evaluates six 40-query results at import)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import retrieval_checks as rc


def _data(seed=0, classes=300, per=5, d=24, spread=1.2):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), per)
    X = (rng.normal(size=(classes, d))[y] + spread * rng.normal(size=(classes * per, d))).astype(
        np.float32
    )
    return X, y


@pytest.fixture(scope="module")
def two_models():
    X, y = _data()
    noisy = X + 0.5 * np.random.default_rng(1).normal(size=X.shape).astype(np.float32)
    metrics = ["map", "hit_rate@1", "grouped_recall@1", "medr"]
    return (
        rc.evaluate(X, query_labels=y, metrics=metrics),
        rc.evaluate(noisy, query_labels=y, metrics=metrics),
    )


def test_newcombe_matches_the_published_example():
    # Newcombe (1998), Statistics in Medicine 17:873, example (a): 56/70 vs 48/80, method 10
    a = rc.accuracy(np.r_[np.ones(56), np.zeros(14)].astype(int), np.ones(70, int))
    b = rc.accuracy(np.r_[np.ones(48), np.zeros(32)].astype(int), np.ones(80, int))
    gap = rc.generalization_gap(a, b)
    assert gap.value == pytest.approx(0.2)
    assert gap.low == pytest.approx(0.0524, abs=1e-4)
    assert gap.high == pytest.approx(0.3339, abs=1e-4)


def test_accuracy_gap_refuses_labels_present_only_in_train():
    a = rc.accuracy([0, 1, 2, 2], [0, 1, 2, 2])
    b = rc.accuracy([0, 1, 1], [0, 1, 1])
    with pytest.raises(rc.InputError, match=r"labels present only in train: \[2\]"):
        rc.generalization_gap(a, b)
    assert rc.generalization_gap(a, b, allow_label_mismatch=True).value == pytest.approx(1 - 1)


def test_welch_gap_for_grouped_recall_matches_its_formula(two_models):
    base, cand = two_models
    gap = rc.generalization_gap(base, cand, "grouped_recall@1")
    g1, g2 = base.grouped["grouped_recall@1"], cand.grouped["grouped_recall@1"]
    v1, v2 = g1.group_values[0], g2.group_values[0]
    se1, se2 = v1.std(ddof=1) / math.sqrt(v1.size), v2.std(ddof=1) / math.sqrt(v2.size)
    dof = (se1**2 + se2**2) ** 2 / (se1**4 / (v1.size - 1) + se2**4 / (v2.size - 1))
    half = stats.t.ppf(0.975, dof) * math.sqrt(se1**2 + se2**2)
    assert gap.value == pytest.approx(v1.mean() - v2.mean())
    assert (gap.low, gap.high) == pytest.approx((gap.value - half, gap.value + half))
    # scipy's Welch test agrees on the degrees of freedom and the interval
    ref = stats.ttest_ind(v1, v2, equal_var=False).confidence_interval(0.95)
    assert (gap.low, gap.high) == pytest.approx((ref.low, ref.high))


def test_paired_t_comparison_matches_scipy(two_models):
    base, cand = two_models
    c = rc.compare(cand, base, "map", cluster="query")
    d = cand.per_query["map"] - base.per_query["map"]
    ref = stats.ttest_rel(cand.per_query["map"], base.per_query["map"])
    assert c.difference == pytest.approx(d.mean())
    assert c.p_value == pytest.approx(ref.pvalue)
    ci = ref.confidence_interval(0.95)
    assert (c.low, c.high) == pytest.approx((ci.low, ci.high))
    assert c.p_value_worse == pytest.approx(
        stats.ttest_rel(cand.per_query["map"], base.per_query["map"], alternative="less").pvalue
    )


def test_rank_metrics_compare_in_the_right_direction(two_models):
    base, cand = two_models
    c = rc.compare(cand, base, "medr", n_resamples=500)
    assert not c.higher_is_better
    # for medr a higher candidate is worse: the improvement is baseline - candidate
    assert c.difference == cand["medr"] - base["medr"]


def test_cluster_robust_comparison_is_wider_than_per_query(two_models):
    base, cand = two_models
    per_q = rc.compare(cand, base, "map", cluster="query")
    per_c = rc.compare(cand, base, "map")  # auto: classes, since the results have labels
    assert per_c.n == 300 and per_c.unit == "classes"
    assert (per_c.high - per_c.low) >= (per_q.high - per_q.low) * 0.9


def test_bootstrap_is_seeded_and_has_the_right_units(two_models):
    base, _ = two_models
    a = rc.bootstrap_interval(base, "map", n_resamples=500, seed=3, cluster="query")
    b = rc.bootstrap_interval(base, "map", n_resamples=500, seed=3, cluster="query")
    assert a == b and a.n == 1500 and a.unit == "queries"
    c = rc.bootstrap_interval(base, "map", n_resamples=500)  # auto: classes
    assert c.n == 300 and c.unit == "classes" and c.low < c.value < c.high


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda r: rc.bootstrap_interval(r, "map", confidence=1.0), "confidence=1.0"),
        (lambda r: rc.bootstrap_interval(r, "map", confidence=0), "confidence=0"),
        (lambda r: rc.bootstrap_interval(r, "map", n_resamples=10), "at least 100 resamples"),
        (lambda r: rc.bootstrap_interval(r, "map", method="basic"), "method='basic'"),
        (lambda r: rc.bootstrap_interval(r, "map", cluster="class"), "cluster='class'"),
        (lambda r: rc.bootstrap_interval(r, "medr"), "BCa is unreliable"),
        (lambda r: rc.bootstrap_interval(r, "mrr"), "mrr was not computed"),
        (lambda r: rc.generalization_gap(r, r), "metric is missing"),
        (lambda r: rc.compare(r, r, "map", method="z"), "method='z'"),
        (lambda r: rc.compare(r, r, "map", cluster="labels"), "cluster='labels'"),
        (lambda r: rc.generalization_gap(r, r, "map", cluster="labels"), "cluster='labels'"),
    ],
)
def test_bad_statistics_input(two_models, call, fragment):
    base, _ = two_models
    with pytest.raises(rc.InputError) as info:
        call(base)
    assert fragment in str(info.value)


def test_paired_comparison_needs_the_same_queries(two_models):
    base, _ = two_models
    X, y = _data(seed=5, classes=100)
    other = rc.evaluate(X, query_labels=y, metrics=["map"])
    with pytest.raises(rc.InputError, match="same queries in the same order"):
        rc.compare(other, base, "map")


def test_grouped_gap_needs_the_same_group_size():
    X, y = _data(classes=200)
    a = rc.evaluate(X, query_labels=y, metrics=["grouped_recall@1"], group_size=10)
    b = rc.evaluate(X, query_labels=y, metrics=["grouped_recall@1"], group_size=20)
    with pytest.raises(rc.InputError, match="only comparable at the same S"):
        rc.generalization_gap(a, b, "grouped_recall@1")
    with pytest.raises(rc.InputError, match="different label partitions"):
        rc.compare(a, b, "grouped_recall@1")


def test_bootstrap_refuses_grouped_recall_and_compare_medr_honours_cluster():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(30), 10)
    X = (rng.normal(size=(30, 8))[y] + 1.5 * rng.normal(size=(300, 8))).astype(np.float32)
    r = rc.evaluate(X, query_labels=y, metrics=["grouped_recall@1", "medr"], group_size=5)
    with pytest.raises(rc.InputError, match="its own interval over groups"):
        rc.bootstrap_interval(r, "grouped_recall@1")
    by_class = rc.compare(r, r, "medr", n_resamples=200)
    by_query = rc.compare(r, r, "medr", cluster="query", n_resamples=200)
    assert (by_class.n, by_class.unit) == (30, "classes") and (by_query.n, by_query.unit) == (
        300,
        "queries",
    )


# --- fail closed (issue 12): arguments type-checked with the library's errors naming them,
# paired comparisons refused across different queries ---
RNG = np.random.default_rng(7)

X = RNG.normal(size=(40, 8)).astype(np.float32)

Y = np.arange(40) % 5

A = rc.evaluate(X, query_labels=Y, metrics=["map", "hit_rate@1"])

B = rc.evaluate(
    X + 0.2 * RNG.normal(size=X.shape).astype(np.float32),
    query_labels=Y,
    metrics=["map", "hit_rate@1"],
)


# ----------------------------------------------------------------------------- bootstrap_interval
@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(n_resamples="10"), "n_resamples"),
        (dict(n_resamples=10), "n_resamples"),
        (dict(n_resamples=True), "n_resamples"),
        (dict(confidence=2), "confidence"),
        (dict(confidence=float("nan")), "confidence"),
        (dict(confidence="x"), "confidence"),
        (dict(confidence=95), "did you mean 0.95"),
        (dict(seed=-1), "seed"),
        (dict(seed="a"), "seed"),
        (dict(seed=1.5), "seed"),
        (dict(method="x"), "method"),
        (dict(method=["bca"]), "method"),
        (dict(cluster="class"), "cluster"),
        (dict(cluster=["label"]), "cluster"),
    ],
)
def test_bootstrap_interval_arguments(kwargs, match):
    with pytest.raises(rc.InputError, match=match):
        rc.bootstrap_interval(A, "map", **kwargs)


@pytest.mark.parametrize(
    "metric,match", [("no_such", "no_such"), (5, "strings"), ("recall@3", "not computed")]
)
def test_bootstrap_interval_metric(metric, match):
    with pytest.raises(rc.InputError, match=match):
        rc.bootstrap_interval(A, metric)


def test_bootstrap_interval_needs_a_result():
    with pytest.raises(rc.InputError, match="EvaluationResult"):
        rc.bootstrap_interval({"map": 0.5}, "map")


# ----------------------------------------------------------------------------- compare: same queries
def test_compare_same_queries_works():
    c = rc.compare(A, B, "map")
    assert c.n == 5 and c.unit == "classes"


@pytest.mark.parametrize(
    "other,match",
    [
        (
            lambda: rc.evaluate(X[::-1].copy(), query_labels=Y[::-1].copy(), metrics=["map"]),
            "query labels differ",
        ),
        (
            lambda: rc.evaluate(X, query_labels=np.arange(40) % 4, metrics=["map"]),
            "query labels differ",
        ),
        (
            lambda: rc.evaluate(
                X[:20], X[20:], query_labels=Y[:20], gallery_labels=Y[20:], metrics=["map"]
            ),
            "queries",
        ),
    ],
)
def test_compare_refuses_different_queries(other, match):
    with pytest.raises(rc.InputError, match=match) as info:
        rc.compare(A, other(), "map")
    assert "same queries" in str(info.value)


def test_compare_refuses_different_ids():
    ids = np.arange(40)
    a = rc.evaluate(
        X, X, query_labels=Y, gallery_labels=Y, query_ids=ids, gallery_ids=ids, metrics=["map"]
    )
    b = rc.evaluate(
        X,
        X,
        query_labels=Y,
        gallery_labels=Y,
        query_ids=ids + 100,
        gallery_ids=ids + 100,
        metrics=["map"],
    )
    with pytest.raises(rc.InputError, match="query ids differ"):
        rc.compare(a, b, "map")


def test_compare_refuses_different_relevance_and_gallery():
    R = (Y[:, None] == Y[None, :]) & ~np.eye(Y.size, dtype=bool)  # not itself: no self-match
    a = rc.evaluate(X, X, relevance=R, metrics=["map"])
    R2 = R.copy()
    R2[0, :3] = True
    with pytest.raises(rc.InputError, match="relevant gallery items"):
        rc.compare(a, rc.evaluate(X, X, relevance=R2, metrics=["map"]), "map")
    with pytest.raises(rc.InputError, match="gallery of 40 items"):
        rc.compare(a, rc.evaluate(X, X[:30], relevance=R[:, :30], metrics=["map"]), "map")


def test_query_fingerprint():
    fp = A.query_fingerprint()
    assert fp["n_queries"] == 40 and fp["n_gallery"] == 40 and list(fp["labels"]) == list(Y)
    assert fp["ids"] is None and (fp["n_relevant"] == 7).all()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(method="z"), "method"),
        (dict(cluster="x"), "cluster"),
        (dict(confidence=0), "confidence"),
        (dict(seed=-2), "seed"),
        (dict(n_resamples="5"), "n_resamples"),
        (dict(method=["t"]), "method"),
    ],
)
def test_compare_arguments(kwargs, match):
    with pytest.raises(rc.InputError, match=match):
        rc.compare(A, B, "map", **kwargs)


def test_compare_needs_results():
    with pytest.raises(rc.InputError, match="candidate must be an EvaluationResult"):
        rc.compare(0.5, B, "map")


# ----------------------------------------------------------------------------- gaps, Wilson, Newcombe
@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(seed="x"), "seed"),
        (dict(confidence=1.0), "confidence"),
        (dict(labels="train"), "labels"),
        (dict(labels=("a", "b", "c")), "labels"),
        (dict(cluster="no"), "cluster"),
        (dict(n_resamples=5), "n_resamples"),
    ],
)
def test_generalization_gap_arguments(kwargs, match):
    with pytest.raises(rc.InputError, match=match):
        rc.generalization_gap(A, B, "map", **kwargs)


@pytest.mark.parametrize(
    "args,match",
    [
        ((3, 0, 0.95), "n=0"),
        ((5, 3, 0.95), "cannot exceed"),
        ((-1, 3, 0.95), "x=-1"),
        (("1", 3, 0.95), "x="),
        ((1, 3, 1.5), "confidence"),
        ((1.5, 3, 0.95), "x="),
    ],
)
def test_wilson_interval_arguments(args, match):
    with pytest.raises(rc.InputError, match=match):
        rc.stats.wilson_interval(*args)


def test_newcombe_interval_arguments():
    with pytest.raises(rc.InputError, match="n2=0"):
        rc.stats.newcombe_interval(1, 3, 0, 0, 0.95)
    lo, hi = rc.stats.newcombe_interval(5, 10, 5, 10, 0.95)
    assert lo < 0 < hi


_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3000),
    st.floats(),
    st.text(max_size=3),
    st.lists(st.one_of(st.integers(-1, 3), st.floats(), st.text(max_size=1)), max_size=5),
    st.sampled_from([np.zeros(0), np.full(3, np.nan), {"a": 1}, ("a", "b")]),
)


@settings(max_examples=50, deadline=None)
@given(
    option=st.sampled_from(["confidence", "n_resamples", "method", "cluster", "seed"]),
    value=_junk,
    metric=_junk,
    other=_junk,
)
def test_stats_raise_only_library_errors(option, value, metric, other):
    for call in (
        lambda: rc.bootstrap_interval(A, "map", **{option: value}),
        lambda: rc.compare(A, B, "map", **{option: value}),
        lambda: rc.bootstrap_interval(A, metric),
        lambda: rc.compare(A, other, "map"),
        lambda: rc.generalization_gap(A, other, "map"),
        lambda: rc.correlate_with_gap({"m": other}, metric),
        lambda: rc.selection_accuracy(other, metric),
        lambda: rc.accuracy(other, metric),
        lambda: rc.discriminant_ratio(other, metric),
        lambda: rc.stats.wilson_interval(value, other, 0.95),
    ):
        try:
            call()
        except rc.RetrievalChecksError:
            pass


# ----------------------------------------------------------------------------- review of issue 12
RANKS = ["map", "mrr", "medr", "meanr", "hit_rate@1"]

C50 = rc.evaluate(X, query_labels=Y, metrics=RANKS, confidence=0.5)

D50 = rc.evaluate(
    X + 0.5 * RNG.normal(size=X.shape).astype(np.float32),
    query_labels=Y,
    metrics=RANKS,
    confidence=0.5,
)

C95 = rc.evaluate(X, query_labels=Y, metrics=RANKS)

D95 = rc.evaluate(
    X + 0.5 * RNG.normal(size=X.shape).astype(np.float32), query_labels=Y, metrics=RANKS
)


def test_bootstrap_interval_takes_the_results_confidence_unless_given():
    iv = rc.bootstrap_interval(C50, "map")
    assert iv.confidence == 0.5 and "50%" in str(iv)
    wide = rc.bootstrap_interval(C50, "map", confidence=0.95)
    assert wide.confidence == 0.95 and (wide.high - wide.low) > (iv.high - iv.low)
    assert rc.bootstrap_interval(C95, "map").confidence == 0.95


def test_bootstrap_interval_takes_the_results_seed_unless_given():
    res = rc.evaluate(X, query_labels=Y, metrics=["map"])
    res.config["seed"] = 5
    assert rc.bootstrap_interval(res, "map") == rc.bootstrap_interval(res, "map", seed=5)


@pytest.mark.parametrize("fn", ["compare", "gap"])
def test_compare_and_gap_take_the_results_confidence_and_refuse_a_disagreement(fn):
    call = (
        (lambda a, b, **kw: rc.compare(a, b, "map", **kw))
        if fn == "compare"
        else (lambda a, b, **kw: rc.generalization_gap(a, b, "map", **kw))
    )
    assert call(C50, D50).confidence == 0.5
    assert call(C50, D50, confidence=0.9).confidence == 0.9
    # a gap of C50 and C95 (the same data) is refused once the confidence is settled: another data set
    other = C95 if fn == "compare" else D95
    with pytest.raises(rc.InputError, match="different confidences") as info:
        call(C50, other)
    assert "pass confidence=" in str(info.value)
    assert call(C50, other, confidence=0.8).confidence == 0.8


def test_an_accuracy_gap_refuses_a_metric_the_results_do_not_hold():
    a, b = rc.accuracy([1, 2, 3], [1, 2, 3]), rc.accuracy([1, 3, 2], [1, 2, 3])
    with pytest.raises(rc.InputError, match="hold only accuracy") as info:
        rc.generalization_gap(a, b, "map")
    assert "metric='accuracy'" in str(info.value)
    assert rc.generalization_gap(a, b, "accuracy").metric == "accuracy"
    assert rc.generalization_gap(a, b).metric == "accuracy"


@pytest.mark.parametrize("metric", ["medr", "meanr", "i2t_medr", "t2i_meanr"])
def test_a_gap_of_a_rank_metric_is_refused_with_the_reason_and_the_fix(metric):
    with pytest.raises(rc.InputError, match="rank metric") as info:
        rc.generalization_gap(C50, D50, metric)
    msg = str(info.value)
    assert "negative" in msg and "at_most" in msg and "hit_rate@K" in msg


@pytest.mark.parametrize(
    "call",
    [
        lambda n: rc.bootstrap_interval(A, "map", n_resamples=n),
        lambda n: rc.compare(A, B, "map", method="bootstrap", n_resamples=n),
        lambda n: rc.generalization_gap(A, B, "map", n_resamples=n),
    ],
)
@pytest.mark.parametrize("n", [10**400, 10**12, 1_000_001])
def test_huge_n_resamples_is_refused_before_any_allocation(call, n):
    with pytest.raises(rc.InputError, match="n_resamples") as info:
        call(n)
    msg = str(info.value)
    assert "1,000,000" in msg and len(msg) < 300


def test_the_option_table_bounds_n_resamples():
    from retrieval_checks.options import check_option

    assert check_option("n_resamples", 1_000_000) == 1_000_000
    for n in (10**400, 10**12):
        with pytest.raises(rc.InputError, match="n_resamples") as info:
            check_option("n_resamples", n)
        assert "1000000" in str(info.value)
    rng = np.random.default_rng(0)
    imgs = rng.normal(size=(10, 4))
    with pytest.raises(rc.InputError, match="n_resamples"):
        rc.evaluate_image_text(
            imgs, imgs.repeat(2, axis=0), np.arange(20) // 2, n_resamples=10**400
        )
    with pytest.raises(rc.InputError, match="n_resamples"):
        rc.cam_iou(np.zeros((2, 8, 8)), boxes=[[0, 0, 4, 4]] * 2, n_resamples=10**400)


@pytest.mark.parametrize(
    "n, words",
    [
        ("10", "expected an integer"),
        (2.5, "expected an integer"),
        (10, "at least 100"),
        pytest.param(10**5000, "about 5001 digits", id="huge"),
    ],
)
def test_check_resamples_names_the_type_and_never_prints_a_huge_number(n, words):
    from retrieval_checks.stats._intervals import check_resamples

    with pytest.raises(rc.InputError, match="n_resamples") as info:
        check_resamples(n)
    assert words in str(info.value) and len(str(info.value)) < 300


def test_a_class_count_sweep_too_small_for_grouped_recall_says_so_first():
    """Its smallest subset has fewer classes than two groups: said before any subset is
    evaluated, naming the default group_size the caller never wrote (h13: the error blamed
    'group_size=10' from evaluate)."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(20), 5)
    x = rng.normal(size=(100, 8))
    with pytest.raises(
        rc.InputError, match=r"4 classes while group_size is 10 \(evaluate's default\)"
    ):
        rc.class_count_sweep(x, y, class_counts=[4, 8], metrics=["grouped_recall@1"])
    with pytest.raises(rc.InputError, match="group_size=3; pass group_size=2 or less"):
        rc.class_count_sweep(x, y, class_counts=[4, 8], metrics=["grouped_recall@1"], group_size=3)
    table = rc.class_count_sweep(
        x, y, class_counts=[4, 8], metrics=["grouped_recall@1"], group_size=2, trials=1
    )
    assert len(table.summary()) == 2
