"""Planning an evaluation set's size (issue 28): rc.plan_queries from two results
(measured paired differences), one result (an assumed correlation), a gate record
or a history run, and the ``retrieval-checks plan`` command. The plan's size is
checked by simulation: at the planned number of queries the gate's paired test
detects the drop with the stated power. Cost: about 1 s."""

from __future__ import annotations

import math

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.stats._power import power_at
from retrieval_checks.tracking import History, main


def _results(n=120, seed=0, drop=0.0):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(n // 3), 3)
    q = rng.normal(size=(n, 16)).astype(np.float32)
    g = q + rng.normal(scale=1.5, size=q.shape).astype(np.float32)
    g2 = g + rng.normal(scale=0.4 + drop, size=q.shape).astype(np.float32)
    a = rc.evaluate(q, g, query_labels=labels, gallery_labels=labels, metrics=["map"])
    b = rc.evaluate(q, g2, query_labels=labels, gallery_labels=labels, metrics=["map"])
    return a, b


def test_plan_from_two_results_uses_the_paired_differences():
    a, b = _results()
    plan = rc.plan_queries(b, "map", 0.01, baseline=a, cluster="query")
    d = b.per_query["map"] - a.per_query["map"]
    assert plan.sd == pytest.approx(float(np.std(d, ddof=1)))
    assert plan.unit == "queries" and plan.n_units == 120
    need = plan.units_needed
    se = plan.sd / math.sqrt(need)
    assert power_at(0.01, se, level=0.05, dof=need - 1) >= 0.8
    se1 = plan.sd / math.sqrt(need - 1)
    assert power_at(0.01, se1, level=0.05, dof=need - 2) < 0.8
    assert "queries" in str(plan) and "paired differences" in str(plan)
    by_class = rc.plan_queries(b, "map", 0.01, baseline=a)  # labelled: clustered by class
    assert by_class.unit == "classes" and by_class.n_units == 40


def test_plan_is_detected_with_the_stated_power_in_simulation():
    """Queries drawn from the pilot's spread: at the planned size the paired t test
    detects the drop in about 80% of simulated runs."""
    from scipy import stats

    sd, drop = 0.15, 0.02
    pilot = {"metric": "map", "power_se": sd / math.sqrt(50), "power_units": 50}
    plan = rc.plan_queries(pilot, "map", drop)
    n = plan.units_needed
    rng = np.random.default_rng(1)
    diffs = rng.normal(-drop, sd, size=(4000, n))
    t = diffs.mean(axis=1) / (diffs.std(axis=1, ddof=1) / math.sqrt(n))
    rate = np.mean(stats.t.cdf(t, n - 1) < 0.05)
    assert abs(rate - 0.8) < 0.03, (n, rate)


def test_plan_from_one_result_states_its_assumption():
    a, _ = _results()
    plan = rc.plan_queries(a, "map", 0.02, cluster="query")
    assert "correlation 0.5" in plan.assumption
    sd = float(np.nanstd(a.per_query["map"], ddof=1))
    assert plan.sd == pytest.approx(sd)  # sd * sqrt(2 (1 - 0.5))
    assert rc.plan_queries(a, "map", 0.02, cluster="query", correlation=0.0).sd == pytest.approx(
        sd * math.sqrt(2)
    )


def test_plan_from_an_interval_record():
    rec = {
        "test": "t",
        "metric": "map",
        "value": 0.5,
        "low": 0.45,
        "high": 0.55,
        "n": 100,
        "confidence": 0.95,
        "unit": "queries",
    }
    plan = rc.plan_queries([rec], "map", 0.01)
    z = 1.959963984540054
    assert plan.sd == pytest.approx(0.05 / z * 10)
    assert plan.n_units == 100 and plan.units_needed > 100


@pytest.mark.parametrize(
    "kw, says",
    [
        ({"drop": 0}, "drop > 0"),
        ({"drop": -0.1}, "drop > 0"),
        ({"drop": float("nan")}, "drop="),
        ({"power": 1.2}, "power="),
        ({"power": 0}, "power="),
        ({"correlation": 1}, "correlation="),
        ({"confidence": 95}, "confidence"),
        # a drop the metric cannot have (map is a fraction in [0, 1]): "2 points" is 0.02
        ({"drop": 2}, "drop=2.*attainable range"),
        ({"drop": 1.0}, "drop=1.*attainable range"),
    ],
)
def test_plan_refuses_bad_arguments(kw, says):
    rec = {"metric": "map", "power_se": 0.01, "power_units": 50}
    args = {"drop": 0.01, **kw}
    drop = args.pop("drop")
    with pytest.raises(rc.InputError, match=says):
        rc.plan_queries(rec, "map", drop, **args)


def test_plan_names_what_is_missing():
    with pytest.raises(rc.InputError, match="no gate of 'ndcg@10'.*the run's metrics: map"):
        rc.plan_queries([{"metric": "map", "low": 0.1, "high": 0.2, "n": 10}], "ndcg@10", 0.01)
    with pytest.raises(rc.InputError, match="no interval and no power"):
        rc.plan_queries([{"metric": "map", "value": 0.5}], "map", 0.01)
    with pytest.raises(rc.InputError, match="EvaluationResult, a gate record"):
        rc.plan_queries("run 3", "map", 0.01)


def _history(tmp_path):
    db = tmp_path / "h.sqlite"
    gate = {
        "test": "tests/test_search.py::test_map",
        "gate": "assert_no_regression",
        "metric": "map",
        "value": 0.5,
        "passed": True,
        "n": 80,
        "unit": "queries",
        "power_se": 0.012,
        "power_units": 80,
        "power_unit": "queries",
        "mdd": 0.03,
    }
    History(db).record({"command": "pytest"}, [gate], exitstatus=0)
    return db


def test_plan_command_reads_a_history_run(tmp_path, capsys):
    db = _history(tmp_path)
    code = main(["--db", str(db), "plan", "latest", "--metric", "map", "--drop", "0.01"])
    out = capsys.readouterr().out
    assert code == 0, out
    expected = rc.plan_queries(History(db).results(1), "map", 0.01)
    assert f"{expected.units_needed} queries" in out and "gate's own significance test" in out


@pytest.mark.parametrize(
    "args, says",
    [
        (["--metric", "map", "--drop", "0"], "drop > 0"),
        (["--metric", "map", "--drop", "5"], "attainable range"),
        (["--metric", "map", "--drop", "0.01", "--power", "80"], "0.8"),
        (["--metric", "nope@3", "--drop", "0.01"], "recorded metrics: map"),
    ],
)
def test_plan_command_refuses_bad_arguments(tmp_path, capsys, args, says):
    db = _history(tmp_path)
    assert main(["--db", str(db), "plan", *args]) == 2
    assert says in capsys.readouterr().err


def _slice_gate_record(tmp_path):
    """A history run whose only gate of map is a slice gate (n = its number of slices)."""
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(30), 6)
    X = (rng.normal(size=(30, 16))[y] + rng.normal(size=(180, 16))).astype(np.float32)
    r = rc.evaluate(X, query_labels=y, metrics=["map"], slices=y % 3)
    events = []
    with rc.gates.listening(events.append):
        rc.assert_slices_at_least(r, "map", 0.01)
    rec = {**events[0].to_dict(), "test": "tests/test_model.py::test_slices"}
    assert rec["n"] == 3 and rec["unit"] == "slices"
    db = tmp_path / "h.sqlite"
    History(db).record({"command": "pytest"}, [rec], exitstatus=0)
    return rec, db


def test_a_slice_gate_is_not_a_pilot(tmp_path, capsys):
    """A slice gate's n is its number of slices and its interval the worst slice's: no
    per-unit spread to plan from; refused, saying what to plan from instead."""
    rec, db = _slice_gate_record(tmp_path)
    with pytest.raises(rc.InputError, match="slice gate.*3 slices"):
        rc.plan_queries([rec], "map", 0.01)
    with pytest.raises(rc.InputError, match="slice gate"):
        rc.plan_queries(rec, "map", 0.01)
    # beside a plain gate of the metric, the plain gate is the pilot
    plain = {"test": "t", "metric": "map", "low": 0.45, "high": 0.55, "n": 100, "unit": "queries"}
    assert rc.plan_queries([rec, plain], "map", 0.01).n_units == 100
    assert main(["--db", str(db), "plan", "latest", "--metric", "map", "--drop", "0.01"]) == 2
    err = capsys.readouterr().err
    assert "slice gate" in err and "141" not in err


def test_identical_results_are_not_a_paired_pilot():
    """A baseline equal to the pilot has no spread of paired differences: refused, not
    'minimum detectable drop 0, power 100%'."""
    a, _ = _results()
    with pytest.raises(rc.InputError, match="identical"):
        rc.plan_queries(a, "map", 0.01, baseline=a)
    with pytest.raises(rc.InputError, match="identical"):
        rc.plan_queries(a, "map", 0.01, baseline=a, cluster="query")


def test_a_record_without_spread_is_not_a_pilot():
    flat = {"test": "t", "metric": "map", "low": 0.5, "high": 0.5, "n": 100, "unit": "queries"}
    with pytest.raises(rc.InputError, match="recorded no spread"):
        rc.plan_queries([flat], "map", 0.01)
    with pytest.raises(rc.InputError, match="recorded no spread"):
        rc.plan_queries({"metric": "map", "power_se": 0.0, "power_units": 50}, "map", 0.01)
