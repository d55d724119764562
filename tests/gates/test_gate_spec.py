"""The gate-field table (retrieval_checks.gates._spec.GATE_FIELDS) is the one home of a
gate field: tests derived from the table, in the spirit of scikit-learn's test_common.

- every row is well formed, and every Python gate it names takes it as a keyword;
- every row refuses a bad value the same way in each consumer that reads it: the
  Python gates, the YAML loader (file, line, field), the training-loop integrations;
- a row registered at run time reaches the YAML loader (check keys, compare: /
  baseline: keys, values with their line, Check.gate and the runner's keywords), the
  JSON schema and the integrations, with no other edit: a new gate field is one row;
- one max_skipped rule (counts and exact fractions) for every gate.

Cost: about 1 s (load_suite on small files, one tiny evaluate).
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks import InputError, SuiteError, load_suite
from retrieval_checks.gates import _spec
from retrieval_checks.gates._spec import CHECK_KINDS, GATE_FIELDS, GateSpec, skipped_limit
from retrieval_checks.integrations._gating import check_gates
from retrieval_checks.options import Option
from retrieval_checks.suites._jsonschema import suite_json_schema

ROWS = list(GATE_FIELDS.values())

#: A value each kind of row refuses, and the words of its refusal.
_BAD = {"threshold": math.nan, "choice": "bogus", "flag": "maybe", "value": -1}

# the smallest check of each kind, to which a row's field is added
_CHECK = {
    "threshold": {"metric": "map", "dataset": "a", "at_least": 0.1},
    "gap": {"metric": "map", "gap": {"train": "a", "test": "b"}, "below": 0.2},
    "compare": {"metric": "map", "dataset": "a", "compare": {"baseline": "m"}},
    "baseline": {"metric": "map", "dataset": "a", "baseline": {"max_drop": 0.05}},
}


def _flow(v) -> str:
    """``v`` in YAML's flow style, on one line."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and math.isnan(v):
        return ".nan"
    return str(v)


@pytest.fixture
def where(tmp_path):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(6), 3)
    e = rng.normal(size=(18, 4)).astype(np.float32)
    np.savez(tmp_path / "set.npz", embeddings=e, labels=y)
    (tmp_path / "emb.py").write_text("def f(x):\n    return x\n")
    return tmp_path


#: What a row needs beside it in a check of a kind (min_power: a test with a power)
_NEEDS = {
    ("min_power", "compare"): {"rule": "non_inferior", "margin": 0.05},
    ("min_power", "baseline"): {"significant": True},
}


def _suite(where, row: GateSpec, kind: str, value):
    """A suite file with one check of ``kind`` (on line 8) writing ``row``'s field as
    ``value``."""
    check = {k: dict(v) if isinstance(v, dict) else v for k, v in _CHECK[kind].items()}
    section = row.section_for(kind)
    place = check[section] if section else check
    place.update(_NEEDS.get((row.name, kind), {}))
    place[row.name] = value
    p = where / "rc_suite.yaml"
    p.write_text(
        "datasets:\n  a: {queries: set.npz}\n  b: {queries: set.npz}\n"
        "models:\n  m: {callable: emb.py:f}\n  n: {callable: emb.py:f}\n"
        f"checks:\n  - {_flow(check)}\n"
    )
    return p


def _good(row: GateSpec, kind: str):
    if row.kind == "threshold":
        return 0.95 if row.name == "at_most" else 0.05
    if row.kind == "choice":
        return row.choices_for(kind)[-1] if row.name != "on" else row.choices_for(kind)[0]
    if row.kind == "flag":
        return True
    return _valid(row.value)


def _valid(o: Option):
    """A value the option ``o`` accepts, from its own bounds (a new row needs no case here)."""
    if o.kind == "skipped":
        return 2
    low = 0 if o.low is None else o.low
    if o.kind == "integer":
        return int(low) + 1
    return (low + o.high) / 2 if o.high is not None else low + 1


# --------------------------------------------------------------------------- the table itself
@pytest.mark.parametrize("row", ROWS, ids=lambda g: g.name)
def test_every_row_is_well_formed_and_its_python_gates_take_it(row):
    assert row.kind in ("threshold", "choice", "flag", "value")
    assert row.checks and set(row.checks) <= set(CHECK_KINDS)
    for kind in row.checks:  # a section is its own check kind's
        assert row.section_for(kind) in ("", kind) and row.section_for(kind) != "threshold"
    assert row.help
    if row.kind == "value":
        assert isinstance(row.value, Option)
    if row.kind == "choice":
        for kind in row.checks:
            assert row.choices_for(kind), (row.name, kind)
    for gate in row.python:
        fn = getattr(rc, gate)
        assert row.name in inspect.signature(fn).parameters, (gate, row.name)


@pytest.mark.parametrize("row", ROWS, ids=lambda g: g.name)
def test_every_row_refuses_a_bad_value_with_its_own_message(row):
    bad = _BAD[row.kind]
    with pytest.raises(InputError) as info:
        row.check(bad, kind=row.checks[0], metric=rc.metrics.metric_spec("map"))
    assert str(info.value).startswith(f"{row.name}=")


# a result whose map gate passes, for the Python consumers
@pytest.fixture(scope="module")
def result():
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(8), 3)
    x = (rng.normal(size=(8, 6))[y] + 0.3 * rng.normal(size=(24, 6))).astype(np.float32)
    return rc.evaluate(x, query_labels=y, metrics=["map"])


@pytest.mark.parametrize(
    "row", [g for g in ROWS if "assert_metric" in g.python], ids=lambda g: g.name
)
def test_assert_metric_validates_each_of_its_rows_before_measuring(row, result):
    kw = {"at_least": 0.01, row.name: _BAD[row.kind]}
    with pytest.raises(InputError) as info:
        rc.assert_metric(result, "map", **kw)
    assert str(info.value).startswith(f"{row.name}=")


@pytest.mark.parametrize("row", [g for g in ROWS if g.integration], ids=lambda g: g.name)
def test_the_integrations_validate_each_of_their_rows(row):
    gate = {"at_least": 0.1, row.name: _BAD[row.kind]}
    with pytest.raises(InputError) as info:
        check_gates({"map": gate})
    assert f"gates['map'].{row.name}=" in str(info.value)
    names, checked = check_gates({"map": {"at_least": 0.1, row.name: _good(row, "threshold")}})
    assert names == ["map"] and row.name in checked["map"]


@pytest.mark.parametrize(
    "row, kind",
    [(g, k) for g in ROWS if not g.shared for k in g.checks],
    ids=lambda v: getattr(v, "name", v),
)
def test_the_yaml_loader_reads_and_refuses_each_row_on_its_line(where, row, kind):
    check = load_suite(_suite(where, row, kind, _good(row, kind))).checks[0]
    assert check.kind == kind and check.gate[row.name] == _good(row, kind)
    with pytest.raises(SuiteError) as info:
        load_suite(_suite(where, row, kind, _BAD[row.kind]))
    err = info.value
    assert err.line == 8, str(err)
    assert err.field.endswith(f".{row.name}"), err.field


@pytest.mark.parametrize("row", [g for g in ROWS if not g.section and not g.shared])
def test_the_yaml_loader_refuses_a_row_on_a_check_kind_it_does_not_belong_to(where, row):
    kind = next(k for k in CHECK_KINDS if k not in row.checks)
    with pytest.raises(SuiteError) as info:
        load_suite(_suite(where, row, kind, _good(row, row.checks[0])))
    assert info.value.field.endswith(row.name) and info.value.line == 8


def test_the_json_schema_has_every_row():
    check = suite_json_schema()["$defs"]["check"]
    props = check["properties"]
    for row in ROWS:
        for section in row.sections:
            if section == "compare":
                assert row.name in props["compare"]["anyOf"][1]["properties"]
            elif section == "baseline":
                assert row.name in props["baseline"]["anyOf"][2]["properties"]
            else:
                assert row.name in props, row.name


# ------------------------------------------------------------ a new row: one edit, every consumer
@pytest.fixture
def new_rows(monkeypatch):
    """Two rows registered at run time: a check's own field of threshold checks that the
    integrations take, and a field of baseline: mappings."""
    widgets = GateSpec(
        "min_widgets",
        "value",
        "the fewest widgets a gate accepts",
        ("threshold",),
        value=Option("min_widgets", "integer", None, "an integer >= 1", low=1, optional=True),
        python=("assert_metric",),
        integration=True,
    )
    power = GateSpec(
        "min_confidence_of_drop",
        "value",
        "a made-up baseline field",
        ("baseline",),
        section="baseline",
        value=Option("min_confidence_of_drop", "number", None, "a number in (0, 1)", low=0, high=1),
        python=("assert_no_regression",),
    )
    monkeypatch.setitem(_spec.GATE_FIELDS, widgets.name, widgets)
    monkeypatch.setitem(_spec.GATE_FIELDS, power.name, power)
    return widgets, power


def test_a_new_row_reaches_the_yaml_loader(where, new_rows):
    widgets, power = new_rows
    check = load_suite(_suite(where, widgets, "threshold", 3)).checks[0]
    assert check.gate["min_widgets"] == 3
    assert check.gate_kwargs("assert_metric") == {"at_least": 0.1, "min_widgets": 3}
    with pytest.raises(SuiteError, match=r"expected an integer >= 1, found int 0") as info:
        load_suite(_suite(where, widgets, "threshold", 0))
    assert (info.value.line, info.value.field) == (8, "checks[0].min_widgets")
    with pytest.raises(SuiteError, match="does not apply to gap checks"):
        load_suite(_suite(where, widgets, "gap", 3))
    check = load_suite(_suite(where, power, "baseline", 0.5)).checks[0]
    assert check.gate_kwargs("assert_no_regression") == {
        "max_drop": 0.05,
        "min_confidence_of_drop": 0.5,
    }
    with pytest.raises(SuiteError) as info:
        load_suite(_suite(where, power, "baseline", 2))
    assert info.value.field == "checks[0].baseline.min_confidence_of_drop"


def test_a_new_row_reaches_the_json_schema(new_rows):
    check = suite_json_schema()["$defs"]["check"]
    assert check["properties"]["min_widgets"]["anyOf"][1] == {"type": "integer", "minimum": 1}
    baseline = check["properties"]["baseline"]["anyOf"][2]["properties"]
    assert baseline["min_confidence_of_drop"]["type"] == "number"


def test_a_new_row_reaches_the_integrations(new_rows):
    _, checked = check_gates({"map": {"at_least": 0.1, "min_widgets": 4}})
    assert checked["map"]["min_widgets"] == 4
    with pytest.raises(InputError, match=r"gates\['map'\]\.min_widgets=0"):
        check_gates({"map": {"at_least": 0.1, "min_widgets": 0}})
    with pytest.raises(InputError, match="unknown field 'min_widget'"):
        check_gates({"map": {"at_least": 0.1, "min_widget": 3}})


# ------------------------------------------------------------------ one max_skipped rule
@pytest.mark.parametrize(
    "n_skipped, n_used, limit, over",
    [
        (0, 10, 0, False),
        (3, 97, 3, False),
        (4, 96, 3, True),
        (29, 71, 0.29, False),  # 0.29 * 100 is 28.999999999999996 in floats: exact rule
        (30, 70, 0.29, True),
        (5, 5, None, False),
    ],
)
def test_one_max_skipped_rule(n_skipped, n_used, limit, over):
    assert (skipped_limit(n_skipped, n_used, limit) is not None) is over


def test_the_plugin_session_limit_is_the_same_rule():
    """--rc-max-skipped (the plugin's session limit) decides with the gates' own rule."""
    from pytest_retrieval_checks._items import _too_many

    for n_skipped in range(0, 12):
        for n_used in (0, 1, 7, 88):
            for limit in (0, 1, 3, 0.0, 0.05, 0.1, 0.29, 0.5, 0.999):
                want = skipped_limit(n_skipped, n_used, limit) is not None
                assert _too_many(n_used, n_skipped, limit) is want, (n_used, n_skipped, limit)
    assert rc.gates.skipped_limit is skipped_limit


# ------------------------------------------------------------------ a metric parsed once
def _count_parses(monkeypatch) -> list:
    from retrieval_checks.metrics import _names

    calls = []
    real = _names.parse_metric

    def counted(name):
        calls.append(name)
        return real(name)

    monkeypatch.setattr(_names, "parse_metric", counted)
    return calls


@pytest.mark.parametrize("on", ["value", "interval"])
def test_assert_metric_given_a_parsed_metric_does_not_parse_it_again(result, monkeypatch, on):
    spec = rc.metrics.metric_spec("map")
    calls = _count_parses(monkeypatch)
    rc.assert_metric(result, spec, at_least=0.01, on=on)
    assert calls == []
    rc.assert_metric(result, "map", at_least=0.01, on=on)
    assert len(calls) == 1  # a name is parsed once, at the gate's door


def test_a_suite_check_reaches_its_verdict_without_parsing_its_metric_again(where, monkeypatch):
    p = where / "rc_precomputed.yaml"
    p.write_text("datasets:\n  a: {queries: set.npz}\nchecks:\n  - {metric: map, at_least: 0.01}\n")
    suite = load_suite(p)
    runner = rc.SuiteRunner()
    (case, *_) = suite.cases
    runner.run(suite, case)  # evaluates once (the engine reads its metric list)
    calls = _count_parses(monkeypatch)
    runner.run(suite, case)  # the result is reused: from the check to the verdict
    assert calls == []
