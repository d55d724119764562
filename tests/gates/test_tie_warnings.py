"""Gates on values that depend on the order of tied scores: the RuntimeWarning (range
over tie orders, tied share, tie policy, whether the verdict depends on the order), the
gate event that records it, the "ties:" line of a failing gate, silence on tie-free
data and below the tolerance, and map@K, whose extremes are not the two policies
(checked against an enumeration of every order of the tied items)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from reference import query_metric, sorted_relevance

import retrieval_checks as rc

TIE_METRICS = ["hit_rate@1", "map", "map@R", "meanr"]


# ----------------------------------------------------------------------------- helpers
def _codes_8bit(seed: int = 0):
    """60 items in 6 classes with 8-bit codes: distances take 9 values, so most
    relevant items tie with a non-relevant one."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(6), 10)
    proto = rng.random((6, 8)) < 0.5
    return proto[y] ^ (rng.random((60, 8)) < 0.15), y


@pytest.fixture(scope="module")
def tied():
    B, y = _codes_8bit()
    return (
        {
            ties: rc.evaluate(
                B, query_labels=y, metrics=TIE_METRICS, similarity="hamming", ties=ties
            )
            for ties in ("pessimistic", "optimistic", "average")
        },
        B,
        y,
    )


def _gate(fn, *args, **kwargs):
    """Run a gate; (warning texts, events, AssertionError or None)."""
    heard, error = [], None
    with warnings.catch_warnings(record=True) as caught, rc.gates.listening(heard.append):
        warnings.simplefilter("always")
        try:
            fn(*args, **kwargs)
        except AssertionError as exc:
            error = exc
    texts = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    return texts, heard, error, caught


def _every_order(scores: np.ndarray, rel: np.ndarray):
    """The relevance vector of every order of the items consistent with decreasing
    score (tied items permuted in every way; distinct relevance patterns only)."""
    groups = [rel[scores == s] for s in sorted(set(scores.tolist()), reverse=True)]
    per_group = [sorted(set(itertools.permutations(g.tolist()))) for g in groups]
    for combo in itertools.product(*per_group):
        yield np.array([x for part in combo for x in part])


# ----------------------------------------------------------------------------- tie-heavy data
def test_tie_values_of_8bit_codes_are_the_brute_force_orders(tied):
    results, B, y = tied
    D = (B[:, None, :] != B[None, :, :]).sum(-1)
    rel = y[:, None] == y[None, :]
    keep = ~np.eye(y.size, dtype=bool)
    for name in ["hit_rate@1", "map", "map@R"]:
        pess = np.mean(
            [
                query_metric(name, sorted_relevance(-D[i], rel[i], keep[i], "pessimistic"))
                for i in range(y.size)
            ]
        )
        opt = np.mean(
            [
                query_metric(name, sorted_relevance(-D[i], rel[i], keep[i], "optimistic"))
                for i in range(y.size)
            ]
        )
        for r in results.values():
            assert r.tie_range(name) == pytest.approx((pess, opt), abs=1e-12)
        assert opt - pess > 0.05  # tie-heavy: the gates below must warn
    # the share of relevant items tied with a non-relevant item, counted per query
    n_tied = n_rel = 0
    for i in range(y.size):
        r_d, n_d = D[i][keep[i] & rel[i]], D[i][keep[i] & ~rel[i]]
        n_tied += int(np.isin(r_d, n_d).sum())
        n_rel += r_d.size
    assert results["average"].tied_share == pytest.approx(n_tied / n_rel)
    assert 0.2 < n_tied / n_rel < 1


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "average"])
def test_threshold_inside_the_range_warns_that_the_verdict_depends_on_the_order(tied, ties):
    results, _, _ = tied
    r = results[ties]
    lo, hi = r.tie_range("hit_rate@1")
    at_least = round((lo + hi) / 2, 3)
    assert lo < at_least < hi
    texts, heard, error, _ = _gate(rc.assert_metric, r, "hit_rate@1", at_least=at_least)
    assert (error is None) == (r["hit_rate@1"] >= at_least)  # optimistic passes, pessimistic fails
    (text,) = [t for t in texts if "tie" in t]
    for fragment in [
        f"assert_metric: hit_rate@1 ranges from {lo:.4f} to {hi:.4f}",
        f"{r.tied_share:.1%} of relevant items tie with a non-relevant one",
        f"ties={ties!r}",
        "the verdict depends on it",
        f"at_least={at_least:g} lies inside that range",
        "another tie order would decide otherwise",
    ]:
        assert fragment in text, fragment
    assert "the verdict is the same" not in text
    (event,) = heard
    assert event.passed == (error is None)
    assert event.warnings == [text.removeprefix("retrieval-checks: ")]
    assert event.extra["tie_range"] == [lo, hi] and event.extra["ties"] == ties
    assert event.extra["tied_share"] == r.tied_share
    assert event.to_dict()["warnings"] == event.warnings


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_threshold_outside_the_range_warns_that_the_verdict_does_not_depend_on_it(tied, ties):
    results, _, _ = tied
    r = results[ties]
    lo, hi = r.tie_range("map")
    for kwargs, passes in [
        ({"at_least": lo / 2}, True),
        ({"at_least": (1 + hi) / 2}, False),
        ({"at_most": (1 + hi) / 2}, True),
        ({"at_least": lo}, True),
        ({"at_most": hi}, True),
    ]:
        texts, heard, error, _ = _gate(rc.assert_metric, r, "map", **kwargs)
        assert (error is None) == passes, kwargs
        (text,) = [t for t in texts if "tie" in t]
        assert f"map ranges from {lo:.4f} to {hi:.4f}" in text and f"ties={ties!r}" in text
        assert "the verdict is the same under every tie order" in text, kwargs
        assert "depends on it" not in text
        assert (
            heard[0].warnings == [text.removeprefix("retrieval-checks: ")]
            and heard[0].passed == passes
        )


def test_at_most_inside_the_range_and_rank_metrics(tied):
    results, _, _ = tied
    r = results["average"]
    lo, hi = r.tie_range("meanr")  # a rank: lower is better, pessimistic is the high end
    assert 1.1 < lo
    assert r.tie_values["meanr"]["pessimistic"] == hi and r.tie_values["meanr"]["optimistic"] == lo
    at_most = round((lo + hi) / 2, 2)
    texts, heard, _, _ = _gate(rc.assert_metric, r, "meanr", at_most=at_most)
    (text,) = [t for t in texts if "tie" in t]
    assert f"meanr ranges from {lo:.2f} to {hi:.2f}" in text
    assert f"at_most={at_most:g} lies inside that range" in text and heard[0].warnings == [
        text.removeprefix("retrieval-checks: ")
    ]
    # both bounds: only the one inside the range is named
    texts, _, _, _ = _gate(rc.assert_metric, r, "meanr", at_least=1.1, at_most=at_most)
    (text,) = [t for t in texts if "tie" in t]
    assert f"at_most={at_most:g} lies inside" in text and "at_least=" not in text


def test_wrapper_gates_warn_under_their_own_name_at_the_callers_line(tied):
    results, _, _ = tied
    r = results["optimistic"]
    for gate, kwargs, name in [
        (rc.assert_map_at_least, {"metric": "map@R"}, "map@R"),
        (rc.assert_recall_at_least, {"k": 1}, "hit_rate@1"),
    ]:
        lo, hi = r.tie_range(name)
        texts, heard, error, caught = _gate(gate, r, (lo + hi) / 2, **kwargs)
        assert error is None  # optimistic value: the high end
        (text,) = [t for t in texts if "tie" in t]
        assert (
            text.startswith(f"retrieval-checks: {gate.__name__}: {name} ranges from")
            and "depends on it" in text
        )
        assert heard[0].gate == gate.__name__ and heard[0].warnings == [
            text.removeprefix("retrieval-checks: ")
        ]
        (w,) = [w for w in caught if "tie" in str(w.message)]
        assert w.filename == __file__  # stacklevel points past the library


def test_failing_gate_message_has_the_ties_line(tied):
    results, _, _ = tied
    r = results["pessimistic"]
    lo, hi = r.tie_range("hit_rate@1")
    with (
        pytest.warns(RuntimeWarning, match="verdict depends on it"),
        pytest.raises(AssertionError) as info,
    ):
        rc.assert_recall_at_least(r, (lo + hi) / 2)
    msg = str(info.value)
    lines = [line.strip() for line in msg.splitlines()]
    (ties_line,) = [line for line in lines if line.startswith("ties:")]
    assert ties_line == r.tie_note("hit_rate@1")
    assert (
        f"{lo:.4f} to {hi:.4f} over every order" in ties_line and "ties='pessimistic'" in ties_line
    )
    assert f"{r.tied_share:.1%} of relevant items tie" in ties_line
    assert lines[0].startswith("hit_rate@1 value") and "< " in lines[0]


# ----------------------------------------------------------------------------- no ties
def test_no_tie_warning_on_tie_free_data():
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(10), 8)
    X = (rng.normal(size=(10, 16))[y] + rng.normal(size=(80, 16))).astype(np.float32)
    r = rc.evaluate(X, query_labels=y, metrics=TIE_METRICS)
    assert r.tied_share == 0.0
    for name in TIE_METRICS:
        lo, hi = r.tie_range(name)
        assert lo == hi == r[name] and r.tie_note(name) == ""
        assert not any(d.startswith("ties:") for d in r.measure(name).details)
    for gate, args, kwargs, passes in [
        (rc.assert_metric, ("map",), {"at_least": r["map"] - 0.01}, True),
        (rc.assert_map_at_least, (r["map@R"] - 0.01,), {"metric": "map@R"}, True),
        (rc.assert_recall_at_least, (r["hit_rate@1"] - 0.01,), {}, True),
        (rc.assert_metric, ("map",), {"at_least": r["map"] + 0.01}, False),
    ]:
        texts, heard, error, _ = _gate(gate, r, *args, **kwargs)
        assert texts == [] and heard[0].warnings == [] and "tie_range" in heard[0].extra
        assert (error is None) == passes
        if error is not None:
            assert "ties:" not in str(error)


@pytest.mark.parametrize("n_queries,warns", [(999, True), (1001, False)])
def test_a_range_within_the_tolerance_is_not_worth_a_warning(n_queries, warns):
    """One query of n has its best relevant item tied with a non-relevant one: the
    range of hit_rate@1 is 1/n, above the 1e-3 tolerance for 999 queries, below it for 1001."""
    q = np.ones((n_queries, 1))
    G = np.array([[4.0], [4.0], [3.0], [1.0]])
    relevance = [[1]] + [[0, 1]] * (n_queries - 1)  # query 0: item 1 ties with non-relevant item 0
    r = rc.evaluate(
        q, G, relevance=relevance, metrics=["hit_rate@1"], similarity="dot", ties="optimistic"
    )
    lo, hi = r.tie_range("hit_rate@1")
    assert (lo, hi) == pytest.approx(((n_queries - 1) / n_queries, 1.0))
    assert r.tied_share == pytest.approx(1 / (2 * n_queries - 1))
    assert (r.tie_note("hit_rate@1") != "") == warns
    texts, heard, error, _ = _gate(rc.assert_recall_at_least, r, 0.5)
    assert error is None and bool(texts) == warns and bool(heard[0].warnings) == warns
    if warns:
        assert "the verdict is the same under every tie order" in texts[0]


# ----------------------------------------------------------------------------- map@K
def _enumerated(scores, relevant, name):
    rel = np.zeros(scores.size, int)
    rel[relevant] = 1
    values = [query_metric(name, order) for order in _every_order(scores, rel)]
    return min(values), max(values)


def _one_query(scores, relevant, name, ties):
    # scores 0.5 x (2 x scores): no gallery row equals the query (a gate refuses a query
    # that is a gallery row relevant to it: it retrieves itself)
    G = 2 * np.asarray(scores, float)[:, None]
    return rc.evaluate(
        np.full((1, 1), 0.5), G, relevance=[relevant], metrics=[name], similarity="dot", ties=ties
    )


def test_map_at_k_extremes_3_2_1_1_0_0():
    """Scores 3 (relevant), 2, 1 (relevant), 1, 0, 0 and K=3: the relevant item tied at
    score 1 ranks 3rd (optimistic: AP over hits (1 + 2/3) / 2 = 5/6) or 4th
    (pessimistic: one hit, 1/1 = 1). Pessimistic is the higher value."""
    scores, relevant = np.array([3, 2, 1, 1, 0, 0]), [0, 2]
    rel = np.array([1, 0, 1, 0, 0, 0])
    pess = query_metric(
        "map@3", sorted_relevance(scores.astype(float), rel, np.ones(6, bool), "pessimistic")
    )
    opt = query_metric(
        "map@3", sorted_relevance(scores.astype(float), rel, np.ones(6, bool), "optimistic")
    )
    low, high = _enumerated(scores, relevant, "map@3")
    assert (pess, opt) == pytest.approx((1.0, 5 / 6)) and (low, high) == pytest.approx((5 / 6, 1.0))
    results = {
        t: _one_query(scores, relevant, "map@3", t)
        for t in ("pessimistic", "optimistic", "average")
    }
    for ties, r in results.items():
        assert r.tie_range("map@3") == pytest.approx((low, high), abs=1e-15)
        v = r.tie_values["map@3"]
        assert v["pessimistic"] == pytest.approx(pess) and v["optimistic"] == pytest.approx(opt)
        assert r.tied_share == 0.5
        note = r.tie_note("map@3")
        assert (
            "0.8333 to 1.0000 over every order" in note
            and "pessimistic 1.0000, optimistic 0.8333" in note
        )
        assert (
            "map@K is not monotone in rank, so these are its true extremes, not the two policies"
            in note
        )
        assert f"ties={ties!r}" in note
    assert results["pessimistic"]["map@3"] == pytest.approx(1.0)
    assert results["optimistic"]["map@3"] == pytest.approx(5 / 6)
    assert results["average"]["map@3"] == pytest.approx(
        (1.0 + 5 / 6) / 2
    )  # two orders, equally likely
    # plain map is monotone: no "true extremes" remark
    r = _one_query(scores, relevant, "map", "average")
    assert r.tie_note("map") and "true extremes" not in r.tie_note("map")
    texts, heard, error, _ = _gate(
        rc.assert_map_at_least, results["pessimistic"], 0.9, metric="map@3"
    )
    assert error is None and "at_least=0.9 lies inside that range" in texts[0]
    assert "map@3 ranges from 0.8333 to 1.0000" in texts[0] and heard[0].extra[
        "tie_range"
    ] == pytest.approx([5 / 6, 1.0])


def test_map_at_k_true_extremes_lie_beyond_both_policies():
    """Scores 0 1 2 1 0 2 (relevant: items 0, 3, 5), K=5: an order that neither policy
    takes (relevant first in one tie group, last in another) reaches 5/6, above both."""
    scores, relevant, name = np.array([0, 1, 2, 1, 0, 2]), [0, 3, 5], "map@5"
    low, high = _enumerated(scores, relevant, name)
    r = _one_query(scores, relevant, name, "optimistic")
    v = r.tie_values[name]
    assert r.tie_range(name) == pytest.approx((low, high), abs=1e-12)
    assert high > max(v["pessimistic"], v["optimistic"]) + 0.05  # the policies miss the top
    assert low == pytest.approx(min(v["pessimistic"], v["optimistic"]))
    # a threshold between the optimistic value and the true maximum: another order passes
    at_least = round((v["optimistic"] + high) / 2, 3)
    texts, heard, error, _ = _gate(rc.assert_map_at_least, r, at_least, metric=name)
    assert error is not None and "ties:" in str(error) and "true extremes" in str(error)
    assert (
        f"at_least={at_least:g} lies inside that range" in texts[0] and f"to {high:.4f}" in texts[0]
    )
    assert heard[0].passed is False and heard[0].warnings


@pytest.mark.parametrize("seed", range(4))
def test_map_at_k_range_equals_enumeration_on_random_small_rankings(seed):
    rng = np.random.default_rng(seed)
    for _ in range(25):
        n = int(rng.integers(3, 8))
        scores = rng.integers(0, 3, n)
        relevant = sorted(set(rng.choice(n, int(rng.integers(1, n)), replace=False).tolist()))
        k = int(rng.integers(1, n + 1))
        for name in (f"map@{k}", "map", f"hit_rate@{k}", "mrr"):
            r = _one_query(scores, relevant, name, "average")
            assert r.tie_range(name) == pytest.approx(
                _enumerated(scores, relevant, name), abs=1e-12
            ), (scores, relevant, name)


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "average"])
def test_the_advice_names_the_worst_order_and_never_asks_for_what_was_already_done(ties):
    """Under ties='pessimistic' a monotone metric already is its worst order: the warning
    says so instead of advising ties='pessimistic'; otherwise it gives the worst order's
    value (for map@K, no policy gives it: its true minimum)."""
    B, y = _codes_8bit()
    r = rc.evaluate(
        B, query_labels=y, metrics=["hit_rate@1", "map@5"], similarity="hamming", ties=ties
    )
    for name in ("hit_rate@1", "map@5"):
        lo, hi = r.tie_range(name)
        texts, _, _, _ = _gate(rc.assert_metric, r, name, at_least=lo / 2)
        (text,) = [t for t in texts if "tie" in t]
        if ties == "pessimistic" and name == "hit_rate@1":
            assert "already the worst order's" in text and "gate on" not in text
        elif r[name] != lo:
            assert f"the worst order gives {lo:.4f}" in text
            assert ("no policy gives it" in text) == (name == "map@5")
