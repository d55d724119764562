"""Intervals of means whose values sit at the ends of their range are never narrower than
the exact binomial (Clopper-Pearson) interval (a new user's trial: a bootstrap of 20 hits
in 20 queries gave [1, 1], and an ``on="interval"`` gate "hit_rate@1 >= 0.95" passed in
35% of samples from queries whose true rate is 0.95)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import binomtest

import retrieval_checks as rc
from retrieval_checks.metrics._binomial import binomial_floor, clopper_pearson_interval


def _run_result(hits) -> rc.EvaluationResult:
    """A run of independent queries, one relevant document each, ranked first or second."""
    run = {
        f"q{i}": ({"rel": 2.0, "x": 1.0} if h else {"rel": 1.0, "x": 2.0})
        for i, h in enumerate(hits)
    }
    qrels = {f"q{i}": {"rel": 1} for i in range(len(hits))}
    return rc.evaluate_run(run, qrels, ["hit_rate@1", "map"])


@pytest.mark.parametrize("k, n", [(0, 1), (0, 7), (3, 7), (7, 7), (20, 20), (59, 60), (1, 500)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_clopper_pearson_is_scipys_exact_interval(k, n, confidence):
    want = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    got = clopper_pearson_interval(k, n, confidence)
    assert got == pytest.approx((want.low, want.high), abs=1e-12)


def test_all_hits_on_twenty_queries_give_the_exact_interval_and_the_gate_fails():
    res = _run_result([True] * 20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iv = rc.bootstrap_interval(res, "hit_rate@1", cluster="query")
    assert iv.low == pytest.approx(0.025 ** (1 / 20)) and iv.high == 1.0  # [0.8316, 1]
    assert "exact binomial interval of 20 of 20 queries" in iv.method
    with pytest.raises(AssertionError, match="lower bound 0.83"):
        rc.assert_recall_at_least(res, 0.95, k=1, on="interval")


def test_one_miss_in_sixty_is_no_longer_shown_to_be_above_095():
    res = _run_result([True] * 59 + [False])
    iv = rc.bootstrap_interval(res, "hit_rate@1", cluster="query")
    assert iv.low <= clopper_pearson_interval(59, 60, 0.95)[0] + 1e-12  # 0.911, the bootstrap 0.95
    with pytest.raises(AssertionError):
        rc.assert_recall_at_least(res, 0.95, k=1, on="interval")


def test_a_gate_at_the_true_rate_passes_at_most_the_nominal_share():
    """Queries whose true hit rate is the gate's threshold: the gate on the interval's lower
    end may pass in at most (1 - confidence) / 2 = 2.5% of samples (it passed in 35% at 20
    queries, 18% at 60 before). Exact, not simulated: the gate's verdict for every count
    of hits, weighted by the count's binomial probability."""
    from scipy.stats import binom

    for p, n in ((0.95, 20), (0.95, 60), (0.9, 30)):
        passing = 0.0
        for k in range(n + 1):
            res = _run_result([True] * k + [False] * (n - k))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    rc.assert_recall_at_least(res, p, k=1, on="interval")
                except AssertionError:
                    continue
            passing += binom.pmf(k, n, p)
        assert passing <= 0.025, (p, n, passing)


def test_the_class_bootstrap_takes_the_queries_floor():
    """Leave-one-out, 2 items a class, every query right: the class bootstrap gave [1, 1];
    now it holds the exact interval of 20 of 20 queries (the classes' own binomial
    interval, sound but far too wide for few large classes, is not used: 10 perfect
    classes of 180 queries would give [0.69, 1])."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 2)
    X = np.eye(10)[y] * 10 + rng.normal(size=(20, 10)) * 0.01
    res = rc.evaluate(X, query_labels=y, metrics=["hit_rate@1"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iv = rc.bootstrap_interval(res, "hit_rate@1")
    assert iv.unit == "classes"
    assert iv.low == pytest.approx(0.025 ** (1 / 20))
    assert "exact binomial interval of 20 of 20 queries" in iv.method


def test_few_large_classes_near_the_top_keep_a_useful_interval():
    """A reviewer's finding: digits-like data, 10 classes of 180 queries, 20 misses: the
    interval must stay near the queries' exact one (it was [0.674, 1] for a while, and a
    98.9% model failed a 0.9 gate on it)."""
    y = np.repeat(np.arange(10), 180)
    hits = np.ones(1800, bool)
    hits[::90] = False  # 20 misses, two a class
    run = {
        f"q{i}": ({"rel": 2.0, "x": 1.0} if h else {"rel": 1.0, "x": 2.0})
        for i, h in enumerate(hits)
    }
    del y
    res = rc.evaluate_run(run, {f"q{i}": {"rel": 1} for i in range(1800)}, ["hit_rate@1"])
    iv = rc.bootstrap_interval(res, "hit_rate@1", cluster="query")
    cl, _ = clopper_pearson_interval(1780, 1800, 0.95)
    assert iv.low == pytest.approx(min(cl, iv.low)) and iv.low > 0.98
    rc.assert_recall_at_least(res, 0.9, k=1, on="interval")


def test_metrics_inside_their_range_keep_the_bootstrap_interval():
    """map of spread values (none at 0 or 1 for every query): nothing is widened, and the
    numbers are the bootstrap's (the docstring example's)."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 3)
    x = rng.normal(size=(10, 8))[y] + 0.3 * rng.normal(size=(30, 8))
    res = rc.evaluate(x, query_labels=y, metrics=["map"])
    iv = rc.bootstrap_interval(res, "map")
    assert "widened" not in iv.method
    assert (round(iv.low, 4), round(iv.high, 4)) == (0.9045, 0.9889)


def test_the_floor_is_symmetric_at_zero_and_keeps_a_wider_interval():
    low, high, what = binomial_floor(np.zeros(20), (0, 1), 0.95, 0.0, 0.0)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 20)) and "0 of 20" in what
    # a bootstrap interval already wider than the exact one is kept as it is
    x = np.array([1.0] * 8 + [0.0] * 2)
    cl, ch = clopper_pearson_interval(8, 10, 0.95)
    assert binomial_floor(x, (0, 1), 0.95, cl - 0.1, ch + 0.01) == (cl - 0.1, ch + 0.01, "")
    # values of another range are scaled to it (a metric in [0, 100])
    low, high, _ = binomial_floor(np.full(20, 100.0), (0, 100), 0.95, 100.0, 100.0)
    assert low == pytest.approx(100 * 0.025 ** (1 / 20)) and high == 100.0


def test_grouped_recall_of_perfect_groups_is_not_certain():
    """Two groups, both perfect: the t interval was [1, 1]; now the exact interval of 2 of
    2 groups."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(20), 3)
    X = np.eye(20)[y] * 10 + rng.normal(size=(60, 20)) * 0.01
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = rc.evaluate(X, query_labels=y, metrics=["grouped_recall@1"], group_size=10)
    g = res.grouped["grouped_recall@1"]
    assert g.value == 1.0 and g.n_groups == 2
    assert g.low == pytest.approx(0.025 ** (1 / 2)) and g.high == 1.0


def test_image_text_recalls_and_rsum_of_a_perfect_model_are_not_certain():
    """30 images, 5 captions each, every query right: the bootstrap over images gave
    [1, 1] and rsum [600, 600]. i2t: 30 of 30 images; t2i: 150 of 150 captions; rsum: the
    sum of its six recalls' exact intervals."""
    rng = np.random.default_rng(0)
    n = 30
    images = rng.normal(size=(n, 16))
    owner = np.repeat(np.arange(n), 5)
    captions = images[owner] + 0.01 * rng.normal(size=(n * 5, 16))
    res = rc.evaluate_image_text(
        images, captions, caption_image=owner, metrics=["i2t_recall@1", "t2i_recall@5", "rsum"]
    )
    images, captions_ = 0.025 ** (1 / n), 0.025 ** (1 / (5 * n))  # 30 of 30, 150 of 150
    assert res.intervals["i2t_recall@1"] == pytest.approx((images, 1.0))
    assert res.intervals["t2i_recall@5"] == pytest.approx((captions_, 1.0))
    assert res.intervals["rsum"] == pytest.approx((300 * images + 300 * captions_, 600.0))
    with pytest.raises(AssertionError):
        rc.assert_rsum(res, at_least=560, on="lower")


def test_image_text_intervals_inside_the_range_are_the_bootstrap_s():
    """A model with misses on both sides: no interval is widened where the bootstrap's is
    at least as wide as the exact one (the recalls here are binary, so the exact interval
    is near the bootstrap's and only replaces the part that is narrower)."""
    rng = np.random.default_rng(1)
    n = 60
    images = rng.normal(size=(n, 8))
    owner = np.repeat(np.arange(n), 2)
    captions = images[owner] + 1.2 * rng.normal(size=(n * 2, 8))
    res = rc.evaluate_image_text(images, captions, caption_image=owner, metrics=["i2t_recall@1"])
    low, high = res.intervals["i2t_recall@1"]
    k = round(res["i2t_recall@1"] * n)
    cl, ch = clopper_pearson_interval(k, n, 0.95)
    assert 0 < k < n
    assert low <= cl + 1e-12 and high >= ch - 1e-12
    assert high - low < 1.3 * (ch - cl)  # not much wider than the exact interval


def test_a_sample_one_hit_worse_never_has_a_higher_lower_bound():
    """The floor is continuous where a bootstrap is not (a reviewer's finding): 60 queries
    all right, then one of them half right (a tie under ties="average", 59.5 hits: it was
    [0.95, 1], above the perfect sample's [0.94, 1]), then one wrong."""
    lows = []
    for hits in ([True] * 60, None, [True] * 59 + [False]):
        if hits is None:  # one query's relevant document tied with a non-relevant one
            run = {f"q{i}": {"rel": 2.0, "x": 1.0} for i in range(59)}
            run["q59"] = {"rel": 2.0, "x": 2.0}
            qrels = {f"q{i}": {"rel": 1} for i in range(60)}
            res = rc.evaluate_run(run, qrels, ["hit_rate@1"], ties="average")
            assert res["hit_rate@1"] == pytest.approx(59.5 / 60)
        else:
            res = _run_result(hits)
        lows.append(rc.bootstrap_interval(res, "hit_rate@1", cluster="query").low)
    assert lows[0] >= lows[1] >= lows[2], lows
    assert lows[1] == pytest.approx(clopper_pearson_interval(59.5, 60, 0.95)[0])


def test_image_text_one_missed_caption_is_not_more_certain_than_none():
    """20 images x 5 captions: a perfect model's t2i_recall@1 and Rsum intervals, then the
    same with one caption of 100 missing: the one-miss lower bounds are not above the
    perfect model's (the bootstrap's Rsum was [580, 600] against the perfect's floor)."""
    rng = np.random.default_rng(3)
    n = 20
    images = rng.normal(size=(n, 16))
    owner = np.repeat(np.arange(n), 5)
    captions = images[owner] + 0.01 * rng.normal(size=(n * 5, 16))
    names = ["t2i_recall@1", "rsum"]
    perfect = rc.evaluate_image_text(images, captions, caption_image=owner, metrics=names)
    worse = captions.copy()
    worse[7] = -images[1]  # caption 7 (of image 1) now matches no image
    miss = rc.evaluate_image_text(images, worse, caption_image=owner, metrics=names)
    assert miss["t2i_recall@1"] == pytest.approx(0.99) and perfect["t2i_recall@1"] == 1.0
    for name in names:
        assert miss.intervals[name][0] <= perfect.intervals[name][0] + 1e-9, name
