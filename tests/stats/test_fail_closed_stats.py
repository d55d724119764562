"""Fail-closed battery of the statistics (issue 12): arguments type-checked with the
library's errors naming them, paired comparisons refused across different queries,
discriminant ratio stable at any scale, accuracy refusing mixed label types."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc

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
            lambda: rc.evaluate(X[:20], X, query_labels=Y[:20], gallery_labels=Y, metrics=["map"]),
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
    R = Y[:, None] == Y[None, :]
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


# ----------------------------------------------------------------------------- correlations
@pytest.mark.parametrize(
    "measures,gaps,match",
    [
        ({"m": [1, 2, "x", 4]}, [1, 2, 3, 4], "measures\\['m'\\]"),
        ({"m": [1, 2, 3, 4]}, ["a", "b", "c", "d"], "gaps"),
        ({"m": [1, 2, np.nan, 4]}, [1, 2, 3, 4], "NaN"),
        ({"m": [1, 2, 3, 4]}, [1, 2, np.inf, 4], "gaps"),
        ([1, 2, 3], [1, 2, 3], "measures must be"),
        ({}, [1, 2, 3], "measures must be"),
        ({"m": [1, 2, 3]}, [1, 2, 3, 4], "3 values for 4 models"),
        ({"m": [1, 2]}, [1, 2], "at least 3"),
    ],
)
def test_correlate_with_gap_arguments(measures, gaps, match):
    with pytest.raises(rc.InputError, match=match):
        rc.correlate_with_gap(measures, gaps)


@pytest.mark.parametrize(
    "m,g,match",
    [
        (["a", "b"], [1, 2], "measure"),
        ([1, 2], [1, np.nan], "gaps"),
        ([1, 2, 3], [1, 2], "one value per model"),
        ("abc", [1, 2, 3], "measure"),
    ],
)
def test_selection_accuracy_arguments(m, g, match):
    with pytest.raises(rc.InputError, match=match):
        rc.selection_accuracy(m, g)


# ----------------------------------------------------------------------------- accuracy
@pytest.mark.parametrize(
    "pred,labels,match",
    [
        (["1", "2"], [1, 2], "predictions are strings but labels are numbers"),
        ([1, 2], ["1", "2"], "predictions are numbers but labels are strings"),
        ([1, "2"], [1, 2], "predictions mixes label types"),
        ([1, 2], [1, "2"], "labels mixes label types"),
        ([1.0, np.nan], [1, 2], "NaN or Inf"),
        ([1, 2], [1.0, np.nan], "NaN or Inf"),
        ([1, 2, 3], [1, 2], "must match"),
        ([], [], "empty"),
    ],
)
def test_accuracy_refuses_mixed_or_broken_labels(pred, labels, match):
    with pytest.raises(rc.InputError, match=match):
        rc.accuracy(pred, labels)


def test_accuracy_right_values():
    assert rc.accuracy(["a", "b", "c"], np.array(["a", "b", "x"])).value == pytest.approx(2 / 3)
    assert rc.accuracy(np.array([[0.1, 0.9], [0.8, 0.2]]), [1, 1]).value == 0.5


# ----------------------------------------------------------------------------- discriminant ratio
@pytest.mark.parametrize(
    "scale,dtype",
    [
        (1e200, np.float64),
        (1e-200, np.float64),
        (1e30, np.float32),
        (1e-30, np.float32),
        (1.0, np.float64),
    ],
)
def test_discriminant_ratio_is_scale_invariant(scale, dtype):
    base = rc.discriminant_ratio(X.astype(np.float64), Y)
    got = rc.discriminant_ratio((X.astype(np.float64) * scale).astype(dtype), Y)
    assert np.isfinite(got) and got == pytest.approx(base, rel=1e-6)


@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_discriminant_ratio_torch_is_scale_invariant(scale):
    torch = pytest.importorskip("torch")
    base = rc.discriminant_ratio(X.astype(np.float64), Y)
    got = rc.discriminant_ratio(torch.from_numpy(X) * scale, torch.from_numpy(Y))
    assert float(got) == pytest.approx(base, rel=1e-4)


def test_discriminant_ratio_in_evaluate_at_large_scale():
    res = rc.evaluate(X.astype(np.float64) * 1e200, query_labels=Y, metrics=["discriminant_ratio"])
    assert res["discriminant_ratio"] == pytest.approx(rc.discriminant_ratio(X, Y), rel=1e-6)


@pytest.mark.parametrize(
    "x,y,match",
    [
        (np.full((4, 2), np.nan), [0, 0, 1, 1], "NaN or Inf"),
        (np.ones((4, 2)), [0, 1], "one label per embedding"),
        (np.ones((4, 2)), [0, "0", 1, 1], "mixes label types"),
        (np.ones((4, 2)), [0.0, np.nan, 1, 1], "NaN or Inf"),
        (np.ones(4), [0, 0, 1, 1], "2-D"),
    ],
)
def test_discriminant_ratio_refuses_bad_inputs(x, y, match):
    with pytest.raises(rc.InputError, match=match):
        rc.discriminant_ratio(x, y)


# ----------------------------------------------------------------------------- property
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st

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
    "pred,labels,match,names",
    [
        ([b"a"], ["a"], "bytes strings but labels are strings", "decode"),
        (np.array([0.9, 0.1]), [1, 0], "non-integer numbers", "score matrix"),
        ([1.5, 2.0], [1, 2], "non-integer numbers", "integer class indices"),
        ([1, 2], [1.5, 2.0], "labels holds non-integer", "integer class indices"),
    ],
)
def test_accuracy_refuses_what_it_cannot_compare(pred, labels, match, names):
    with pytest.raises(rc.InputError, match=match) as info:
        rc.accuracy(pred, labels)
    assert names in str(info.value)


def test_accuracy_still_reads_integral_floats_and_bytes_against_bytes():
    assert rc.accuracy([1.0, 2.0], [1, 2]).value == 1.0
    assert rc.accuracy([b"a", b"b"], [b"a", b"a"]).value == 0.5
    assert rc.accuracy(np.array([[0.9, 0.1], [0.2, 0.8]]), [0, 0]).value == 0.5


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize(
    "x,labels,match,fix",
    [
        (X, np.arange(40), "every class has a single item", "2 or more items"),
        (X, np.zeros(40, int), "single class", "2 classes"),
        (np.ones((40, 8)), Y, "within-class scatter S_W is 0", "check the embeddings"),
        (np.zeros((40, 8)), Y, "within-class scatter S_W is 0", "check the embeddings"),
        (np.repeat(np.eye(5, 8), 8, axis=0), np.repeat(np.arange(5), 8), "identical", "duplicated"),
    ],
)
def test_discriminant_ratio_refuses_an_undefined_ratio(kind, x, labels, match, fix):
    if kind == "torch":
        torch = pytest.importorskip("torch")
        x = torch.as_tensor(np.asarray(x, dtype=np.float32))
    with pytest.raises(rc.InputError, match=match) as info:
        rc.discriminant_ratio(x, labels)
    assert fix in str(info.value)


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
