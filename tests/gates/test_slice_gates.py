"""Slice gates and per-slice intervals: a threshold on every or named slices, the worst
slice, baseline drops per slice; small slices refused with the size they need; a
baseline slice missing now is an error; events carry every slice's row.

Cost: about 2 s (one small evaluation per module, 2000-resample bootstraps).
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.errors import InputError
from retrieval_checks.stats._intervals import MIN_INTERVAL_UNITS, bootstrap_interval


def _data(seed=0, classes=40, per=6, d=16, spread=1.0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), per)
    X = (rng.normal(size=(classes, d))[y] + spread * rng.normal(size=(classes * per, d))).astype(
        np.float32
    )
    return X, y


@pytest.fixture(scope="module")
def sliced():
    X, y = _data()
    # slices follow the class (as a language or a category does): "a" classes 0-19, "b" 20-37, "c" 38-39
    group = np.where(y < 20, "a", np.where(y < 38, "b", "c"))
    return rc.evaluate(X, query_labels=y, metrics=["map", "hit_rate@1", "medr"], slices=group)


@pytest.fixture(scope="module")
def big():  # every slice large enough for an interval
    X, y = _data(seed=1)
    group = np.where(y % 2 == 0, "even", "odd")
    return rc.evaluate(X, query_labels=y, metrics=["map", "hit_rate@1", "medr"], slices=group)


def test_slice_intervals_are_bootstraps_of_each_slice_alone(big):
    ivs = rc.slice_intervals(big, "map")
    assert set(ivs) == {"even", "odd"}
    for name, iv in ivs.items():
        alone = bootstrap_interval(big.slices[name].result, "map")
        assert (iv.low, iv.high) == (alone.low, alone.high)
        assert iv.low <= iv.value <= iv.high
        assert iv.unit == "classes" and iv.n_units == 20
        assert iv.value == big.slices[name]["map"]


def test_too_small_slice_has_no_interval_and_says_what_it_needs(sliced):
    ivs = rc.slice_intervals(sliced, "map")
    c = ivs["c"]
    assert c.interval is None and c.n_units == 2
    assert f"{MIN_INTERVAL_UNITS - 2} more classes" in c.refused
    assert ivs["a"].interval is not None
    # medr: a median of ranks, percentile bootstrap
    assert rc.slice_intervals(sliced, "medr")["a"].interval.method.startswith("percentile")


def test_threshold_on_every_slice_refuses_small_slices(sliced):
    events = []
    with rc.gates.listening(events.append):
        with pytest.raises(InputError, match=r"refused to gate 1 slice.*'c': 2 classes.*needs.*5"):
            rc.assert_slices_at_least(sliced, "map", 0.1)
    (refused,) = events  # reported as a failed gate first: every output shows the sizes
    assert (
        not refused.passed and refused.on == "refused" and "refused to gate" in refused.warnings[0]
    )
    rows = {r["slice"]: r for r in refused.extra["slices"]}
    assert rows["c"]["refused"] and rows["c"]["n"] == 2 and rows["a"]["refused"] is None
    with pytest.raises(InputError, match="refused"):
        rc.assert_worst_slice_at_least(sliced, "map", 0.1)
    # naming the large slices gates them alone
    rc.assert_slices_at_least(sliced, "map", 0.05, slices=["a", "b"])


def test_threshold_per_slice_pass_fail_and_event(big):
    events = []
    values = big.slices.by_metric("map")
    low = min(values.values())
    with rc.gates.listening(events.append):
        rc.assert_slices_at_least(big, "map", low)  # exactly on the threshold passes
        with pytest.raises(AssertionError) as info:
            rc.assert_slices_at_least(big, "map", max(values.values()) - 1e-9 + 1e-12)
    worst = min(values, key=values.get)
    assert f"{worst}: map" in str(info.value) and "1 of 2 slices fail" in str(info.value)
    ok, bad = events
    assert ok.passed and not bad.passed
    rows = {r["slice"]: r for r in bad.extra["slices"]}
    assert rows[worst]["passed"] is False and rows[worst]["value"] == values[worst]
    assert bad.to_dict()["slices"][0]["n_queries"] == 120
    assert ok.value == low and ok.extra["worst_slice"] == worst


def test_interval_gate_uses_each_slice_lower_bound(big):
    ivs = rc.slice_intervals(big, "map")
    lowest = min(iv.low for iv in ivs.values())
    rc.assert_slices(big, "map", at_least=lowest, on="interval")
    with pytest.raises(AssertionError, match="interval bound"):
        rc.assert_slices(big, "map", at_least=lowest + 1e-6, on="interval")


def test_worst_slice_gate_and_rank_metrics(big):
    values = big.slices.by_metric("hit_rate@1")
    worst = min(values.values())
    rc.assert_worst_slice_at_least(big, "hit_rate@1", worst)
    with pytest.raises(AssertionError, match="worst slice"):
        rc.assert_worst_slice_at_least(big, "hit_rate@1", worst + 0.001)
    medr = big.slices.by_metric("medr")
    rc.assert_worst_slice(big, "medr", at_most=max(medr.values()))
    if max(medr.values()) > 1:
        with pytest.raises(AssertionError):
            rc.assert_worst_slice(big, "medr", at_most=max(medr.values()) - 1)


def test_named_slice_that_does_not_exist_is_an_error(big):
    with pytest.raises(InputError, match="no slice named 'de'.*'even', 'odd'"):
        rc.assert_slices_at_least(big, "map", 0.1, slices=["de"])


def test_baseline_drop_per_slice(big):
    base = rc.slice_baseline(big, "map")
    rc.assert_no_slice_regression(big, base, "map", max_drop=0.0)
    rc.assert_no_slice_regression(big, big, "map", max_drop=0.0)  # a sliced result as baseline
    higher = {k: {"value": v["value"] + 0.03} for k, v in base.items()}
    with pytest.raises(AssertionError, match="dropped by more than max_drop 0.02"):
        rc.assert_no_slice_regression(big, higher, "map", max_drop=0.02)
    rc.assert_no_slice_regression(big, higher, "map", max_drop=0.031)
    # relative: 0.03 is within 10% of a baseline near 0.5, not within 1%; both given: the smaller
    rc.assert_no_slice_regression(big, higher, "map", max_relative_drop=0.1)
    with pytest.raises(AssertionError, match="max_relative_drop 0.01"):
        rc.assert_no_slice_regression(big, higher, "map", max_relative_drop=0.01)
    with pytest.raises(AssertionError):
        rc.assert_no_slice_regression(big, higher, "map", max_drop=0.5, max_relative_drop=0.01)
    # neither: no drop tolerated
    with pytest.raises(AssertionError):
        rc.assert_no_slice_regression(big, higher, "map")
    # rank metrics: a rise is the drop
    medr = {k: v - 1 for k, v in big.slices.by_metric("medr").items()}
    with pytest.raises(AssertionError):
        rc.assert_no_slice_regression(big, medr, "medr", max_drop=0.5)


def test_baseline_slice_missing_now_is_an_error_never_a_skip(big):
    base = {**{k: v["value"] for k, v in rc.slice_baseline(big, "map").items()}, "gone": 0.5}
    with pytest.raises(InputError, match="'gone' of the baseline are missing"):
        rc.assert_no_slice_regression(big, base, "map", max_drop=0.5)


def test_new_slices_are_reported_not_gated(big):
    base = {"even": big.slices["even"]["map"]}
    events = []
    with rc.gates.listening(events.append):
        rc.assert_no_slice_regression(big, base, "map", max_drop=0.0)
    assert events[0].extra["new_slices"] == ["odd"]
    assert [r["slice"] for r in events[0].extra["slices"]] == ["even"]


def test_gates_fail_closed_on_bad_input(big):
    X, y = _data()
    plain = rc.evaluate(X, query_labels=y, metrics=["map", "pair_f1@t=0.5"])
    with pytest.raises(InputError, match="no slices; evaluate with slices="):
        rc.assert_slices_at_least(plain, "map", 0.1)
    with pytest.raises(InputError, match="threshold|fraction|percent|70"):
        rc.assert_slices_at_least(big, "map", 70)
    with pytest.raises(InputError, match="on="):
        rc.assert_slices(big, "map", at_least=0.1, on="upper")
    with pytest.raises(InputError, match="medr has no interval"):
        rc.assert_worst_slice(big, "medr", at_most=10, on="interval")
    with pytest.raises(InputError, match="no per-query values"):
        rc.with_slices(plain, y % 2)
        rc.slice_intervals(plain, "pair_f1@t=0.5")
    with pytest.raises(InputError, match="finite number"):
        rc.assert_no_slice_regression(big, {"even": float("nan")}, "map", max_drop=0.1)


def test_missing_slice_values_are_reported_on_the_gate(big):
    X, y = _data(seed=1)
    group = np.where(y % 2 == 0, "even", "odd").astype(object)
    group[:6] = None
    r = rc.evaluate(X, query_labels=y, metrics=["map"], slices=group)
    events = []
    with rc.gates.listening(events.append):
        # unsliced="ignore": counted and reported (the default fails the gate:
        # tests/gates/test_unsliced_queries.py)
        with pytest.raises(AssertionError, match="6 queries have no slice value"):
            rc.assert_slices_at_least(r, "map", 0.99, unsliced="ignore")
        with pytest.raises(AssertionError, match="also: 6 of 240 queries"):
            rc.assert_slices_at_least(r, "map", 0.99)
    assert events[0].extra["slice_missing"] == {"slice": 6}
    assert any("6 queries have no slice value" in w for w in events[0].warnings)
    assert any("6 of 240 queries (2%) have no slice value" in w for w in events[1].warnings)


def test_slice_baseline_of_another_metric_is_refused(big):
    """A baseline records its metric (and tie policy): comparing hit_rate@1 with map's
    per-slice values is an error naming both, never a silent pass."""
    base = rc.slice_baseline(big, "map")
    assert all(r["metric"] == "map" and r["ties"] == "pessimistic" for r in base.values())
    with pytest.raises(InputError, match=r"baseline.* map.*hit_rate@1|hit_rate@1.*baseline.* map"):
        rc.assert_no_slice_regression(big, base, "hit_rate@1", max_drop=0.02)
    # a sliced result as baseline must hold the metric per slice
    X, y = _data(seed=1)
    only_map = rc.evaluate(
        X, query_labels=y, metrics=["map"], slices=np.where(y % 2 == 0, "even", "odd")
    )
    with pytest.raises(InputError, match="hit_rate@1"):
        rc.assert_no_slice_regression(big, only_map, "hit_rate@1", max_drop=0.02)
    # another tie policy: the values are of another rule
    optimistic = rc.evaluate(
        X,
        query_labels=y,
        metrics=["map"],
        slices=np.where(y % 2 == 0, "even", "odd"),
        ties="optimistic",
    )
    with pytest.raises(
        InputError, match="ties='optimistic'.*ties='pessimistic'|pessimistic.*optimistic"
    ):
        rc.assert_no_slice_regression(big, optimistic, "map", max_drop=0.02)
    with pytest.raises(InputError, match="optimistic"):
        rc.assert_no_slice_regression(
            big, rc.slice_baseline(optimistic, "map"), "map", max_drop=0.5
        )
    # records of two metrics mixed: refused
    mixed = {**base, "odd": {**base["odd"], "metric": "mrr"}}
    with pytest.raises(InputError, match="mrr"):
        rc.assert_no_slice_regression(big, mixed, "map", max_drop=0.5)


def test_slice_regression_without_tolerance_says_any_drop_fails(big):
    higher = {k: v + 0.01 for k, v in big.slices.by_metric("map").items()}
    events = []
    with rc.gates.listening(events.append):
        with pytest.raises(AssertionError, match="no tolerance given: any drop fails") as info:
            rc.assert_no_slice_regression(big, higher, "map")
    assert "max_drop 0" not in str(info.value)
    assert events[0].bounds == {} and "no tolerance given" in events[0].comparison
    rc.assert_no_slice_regression(big, big, "map")  # equal: no drop


def test_blank_slice_values_are_refused_and_a_plain_id_map_is_named_as_given():
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"a": 1.0, "b": 2.0}}
    qrels = {"q1": {"a": 1}, "q2": {"a": 1}}
    for blank in ("", "  "):
        with pytest.raises(InputError, match="empty slice value|blank"):
            rc.evaluate_run(run, qrels, ["map"], slices={"q1": blank, "q2": "x"})
        with pytest.raises(InputError, match="empty slice value|blank"):
            rc.evaluate_run(run, qrels, ["map"], slices={"lang": {"q1": "x", "q2": blank}})
        with pytest.raises(InputError, match="query 0"):  # by position: an embedding evaluation
            rc.evaluate(
                np.eye(2, dtype=np.float32),
                query_labels=[0, 1],
                metrics=["map"],
                slices=np.array([blank, "x"]),
            )
    with pytest.raises(InputError) as info:
        rc.evaluate_run(run, qrels, ["map"], slices={"q1": "x", "q9": "y"})
    assert "['slice']" not in str(info.value) and str(info.value).startswith("slices:")
    r = rc.evaluate_run(run, qrels, ["map"], slices={"q1": "x", "q2": "y"})
    assert set(r.slices) == {"x", "y"}


def test_stored_slice_baselines_of_another_metric_are_refused(big, tmp_path):
    """The baselines-file path (rc_slice_baseline, YAML slice checks): a key's slice
    records hold their metric; gating another metric against them is refused."""
    from retrieval_checks.gates import BaselineStore, check_slice_baselines

    path = tmp_path / "t.baselines.yaml"
    writer = BaselineStore("all")
    check_slice_baselines(writer, big, "map", path=path, key="k")
    writer.write()
    check_slice_baselines(BaselineStore(), big, "map", path=path, key="k", max_drop=0.0)
    with pytest.raises(InputError, match=r"map.*hit_rate@1"):
        check_slice_baselines(BaselineStore(), big, "hit_rate@1", path=path, key="k", max_drop=0.5)


def test_the_worst_slice_on_an_interval_is_the_lowest_bound_not_the_lowest_value():
    """A small slice's wide interval can reach below the threshold while a large slice has
    the lowest value: the worst-slice gate on the interval must fail as the every-slice
    gate does, naming the small slice (review finding 13: it passed, gating the large
    slice's bound). Rank metrics: the highest upper bound against at_most."""
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(60, 8))
    y = rng.integers(0, 60, 600)
    sl = np.where(np.arange(600) < 560, "big", "small")
    X = centers[y] + rng.normal(size=(600, 8)) * np.where(sl == "big", 1.0, 0.9)[:, None]
    r = rc.evaluate(X, query_labels=y, metrics=["map", "meanr"], slices=sl)
    iv = rc.slice_intervals(r, "map")
    assert iv["big"].value < iv["small"].value and iv["small"].interval.low < iv["big"].interval.low
    thr = (iv["small"].interval.low + iv["big"].interval.low) / 2
    with pytest.raises(AssertionError, match="slices fail"):
        rc.assert_slices(r, "map", at_least=thr, on="interval")
    with pytest.raises(AssertionError, match="worst slice 'small'"):
        rc.assert_worst_slice(r, "map", at_least=thr, on="interval")
    rc.assert_worst_slice(r, "map", at_least=thr)  # on the value, 'big' is the worst and passes
    ranks = rc.slice_intervals(r, "meanr")
    top = max(ranks.values(), key=lambda v: v.interval.high)
    limit = top.interval.high - 1e-9
    with pytest.raises(AssertionError, match=f"worst slice '{top.slice}'"):
        rc.assert_worst_slice(r, "meanr", at_most=limit, on="interval")


def test_slice_regression_that_can_never_fail_is_refused_and_a_partly_dead_one_warns(big):
    """A tolerance at or past a slice's whole baseline (map 0.08 under max_drop 0.5: h14)
    lets any model pass that slice. Every gated slice so: refused, as the whole-set gate
    refuses; only some: a warning naming them, the others gated."""
    values = big.slices.by_metric("map")
    low = {k: 0.08 for k in values}
    with pytest.raises(InputError, match="no slice can drop by more than the tolerance"):
        rc.assert_no_slice_regression(big, low, "map", max_drop=0.5)
    with pytest.raises(InputError, match="could never fail"):
        rc.assert_no_slice_regression(big, {k: 0.0 for k in values}, "map")  # at the floor
    names = list(values)
    mixed = {**values, names[0]: 0.08}
    with pytest.warns(RuntimeWarning, match=f"1 of {len(names)} slices cannot drop") as said:
        rc.assert_no_slice_regression(big, mixed, "map", max_drop=0.1)
    assert names[0] in str(said[0].message) and said[0].filename == __file__
    rc.assert_no_slice_regression(big, values, "map", max_drop=0.05)  # every slice can fail


def test_a_rank_metric_slice_regression_that_can_never_fail_is_refused(big):
    """A rank metric's rise is bounded by the slice's largest attainable rank (240 items,
    classes of 6: a query ranks at most 235th): max_drop 300 on medr cannot fail, whatever
    the model, and passed (rank metrics were not judged: their range is unbounded). Every
    slice so: refused; some: a warning naming them."""
    values = big.slices.by_metric("medr")
    with pytest.raises(InputError, match="no slice can drop by more than the tolerance") as err:
        rc.assert_no_slice_regression(big, values, "medr", max_drop=300)
    assert "to rise" in str(err.value)
    names = list(values)
    mixed = {**values, names[0]: 200.0}  # 35 ranks from the worst: max_drop 100 cannot fail it
    with pytest.warns(RuntimeWarning, match=f"1 of {len(names)} slices cannot drop") as said:
        rc.assert_no_slice_regression(big, mixed, "medr", max_drop=100)
    assert names[0] in str(said[0].message) and "at most 35 to rise" in str(said[0].message)
    rc.assert_no_slice_regression(big, values, "medr", max_drop=2)  # every slice can fail


def test_a_baseline_at_the_floor_is_refused_by_the_whole_set_and_slice_gates_alike(big):
    """A baseline of map 0 cannot drop: a strict gate (no tolerance: any drop fails) or
    max_drop 0 could never fail. The slice gate refused it and told the user to write a
    tolerance below the baseline (impossible), while the whole-set gate passed it (h20):
    one rule now (metrics._thresholds.no_drop_left), and a fix that can be done."""
    current = rc.baseline_record(big, "map")
    floor = {"metric": "map", "value": 0.0}
    for tolerance in ({}, {"max_drop": 0.0}):
        with pytest.raises(InputError, match="already at the end a drop goes toward"):
            rc.assert_no_regression(current, floor, **tolerance)
    with pytest.raises(InputError, match="no tolerance helps: record the baselines"):
        rc.assert_no_slice_regression(big, {k: 0.0 for k in big.slices.by_metric("map")}, "map")
    rc.assert_no_regression(current, {"metric": "map", "value": 0.01})  # a drop can happen
