"""YAML ``min_power:`` on every check whose gate has a power to require (issue 28):
a baseline check with ``significant: true`` and a tolerance (``baseline:``), a
non-inferiority comparison (``compare: {rule: non_inferior, min_power: ...}``) and a gap
on its upper bound (``min_power:`` beside ``below:``). Each is validated when the suite
is loaded, before any evaluation: its range, and a check whose gate has no power to
require it at is an error on its line saying why. The runner hands it to the Python
gate, which warns by default and fails with it.

Cost: about 2 s idle (load_suite on small files; four in-process pytest sessions on 24
items; 11 s at load 24 on the 2-core machine, plus pytester's one-time start).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from retrieval_checks import SuiteError, load_suite

pytest_plugins = ["pytester"]

HEAD = (
    "datasets:\n  a: {queries: a.npz}\n  b: {queries: b.npz}\n"
    "models:\n  m: {embeddings: {a: a.npz, b: b.npz}}\n  n: {embeddings: {a: n.npz, b: b.npz}}\n"
    "checks:\n"
)


def _data(path, noise=0.6):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(8), 3)
    centers = rng.normal(size=(8, 6))
    for name, s in (("a", 0.3), ("b", noise), ("n", 0.35)):
        x = centers[y] + s * rng.normal(size=(24, 6))
        np.savez(path / f"{name}.npz", embeddings=x.astype(np.float32), labels=y)


def _load(tmp_path, check: str):
    _data(tmp_path)
    p = tmp_path / "rc_power.yaml"
    p.write_text(HEAD + f"  - {check}\n")
    return load_suite(p)


@pytest.mark.parametrize(
    "check, gate, kw",
    [
        (
            "{metric: map, dataset: a, models: [n], compare: {baseline: m, rule: non_inferior, "
            "margin: 0.05, min_power: 0.8}}",
            "assert_not_worse",
            {"rule": "non_inferior", "margin": 0.05, "min_power": 0.8},
        ),
        (
            "{metric: map, gap: {train: a, test: b}, below: 0.3, min_power: 0.9}",
            "assert_gap_below",
            {"on": "upper", "below": 0.3, "min_power": 0.9},
        ),
        (
            "{metric: map, dataset: a, baseline: {max_drop: 0.01, significant: true, min_power: 0.7}}",
            "assert_no_regression",
            {"max_drop": 0.01, "significant": True, "min_power": 0.7},
        ),
    ],
)
def test_min_power_is_read_where_the_gate_has_a_power(tmp_path, check, gate, kw):
    c = _load(tmp_path, check).checks[0]
    assert c.gate_kwargs(gate) == kw, c.gate


@pytest.mark.parametrize(
    "check, field, says",
    [
        # the rules without a power to require
        (
            "{metric: map, dataset: a, models: [n], compare: {baseline: m, min_power: 0.8}}",
            "checks[0].compare.min_power",
            "rule: non_inferior",
        ),
        (
            "{metric: map, dataset: a, models: [n], compare: {baseline: m, rule: value, margin: 0.01, "
            "min_power: 0.8}}",
            "checks[0].compare.min_power",
            "rule: value has no test",
        ),
        (
            "{metric: map, gap: {train: a, test: b}, below: 0.3, on: value, min_power: 0.8}",
            "checks[0].min_power",
            "on: value has no test",
        ),
        (
            "{metric: map, dataset: a, baseline: {max_drop: 0.01, min_power: 0.8}}",
            "checks[0].baseline.min_power",
            "significant: true",
        ),
        (
            "{metric: map, dataset: a, baseline: {significant: true, min_power: 0.8}}",
            "checks[0].baseline.min_power",
            "max_drop",
        ),
        # out of range, on each kind
        (
            "{metric: map, dataset: a, models: [n], compare: {baseline: m, rule: non_inferior, "
            "margin: 0.05, min_power: 80}}",
            "checks[0].compare.min_power",
            "strictly between 0 and 1",
        ),
        (
            "{metric: map, gap: {train: a, test: b}, below: 0.3, min_power: 1}",
            "checks[0].min_power",
            "strictly between 0 and 1",
        ),
        (
            "{metric: map, gap: {train: a, test: b}, below: 0.3, min_power: .nan}",
            "checks[0].min_power",
            "min_power",
        ),
        # written where its check does not read it
        (
            "{metric: map, dataset: a, models: [n], min_power: 0.8, compare: {baseline: m, "
            "rule: non_inferior, margin: 0.05}}",
            "checks[0].min_power",
            "compare:",
        ),
        (
            "{metric: map, dataset: a, min_power: 0.8, baseline: {max_drop: 0.01, significant: true}}",
            "checks[0].min_power",
            "baseline:",
        ),
        (
            "{metric: map, dataset: a, at_least: 0.1, min_power: 0.8}",
            "checks[0].min_power",
            "threshold",
        ),
    ],
)
def test_min_power_without_a_power_to_require_is_an_error_on_its_line(tmp_path, check, field, says):
    with pytest.raises(SuiteError) as info:
        _load(tmp_path, check)
    err = info.value
    assert err.field == field and err.line == 8, str(err)
    assert says in str(err), str(err)


# ------------------------------------------------------------------ the gates act on it
def _run(pytester, check):
    _data(pytester.path, noise=0.6)
    pytester.path.joinpath("rc_power.yaml").write_text(HEAD + f"  - {check}\n")
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-history=none", "--rc-json=g.json", "-W", "default"
    )
    gate = json.loads((pytester.path / "g.json").read_text())["gates"][0]
    return result, gate


@pytest.mark.parametrize(
    "check, power_test",
    [
        (
            "{metric: map, dataset: a, models: [n], compare: {baseline: m, rule: non_inferior, "
            "margin: 0.02MINPOWER}}",
            "non_inferiority",
        ),
        ("{metric: map, models: [m], gap: {train: a, test: b}, below: 0.02MINPOWER}", "gap"),
    ],
)
def test_an_underpowered_yaml_gate_warns_and_fails_with_min_power(pytester, check, power_test):
    """8 classes cannot show a margin of 0.02: the gate warns (and fails on the data);
    with min_power it fails as underpowered, naming the units it needs."""
    result, gate = _run(pytester, check.replace("MINPOWER", ""))
    assert gate["power_test"] == power_test and gate["underpowered"] is True
    assert gate["units_needed"] > gate["power_units"]
    assert "PowerWarning" in "\n".join(result.outlines)
    result, gate = _run(pytester, check.replace("MINPOWER", ", min_power: 0.8"))
    result.assert_outcomes(failed=1)
    assert gate["passed"] is False and gate["underpowered"] is True
    assert "would be needed" in "\n".join(result.outlines)


def test_the_json_schema_takes_min_power_where_the_loader_does():
    jsonschema = pytest.importorskip("jsonschema")
    from retrieval_checks.suites._jsonschema import suite_json_schema

    schema = suite_json_schema()

    def ok(check) -> bool:
        suite = {"datasets": {"a": {"queries": "a.npz"}}, "checks": [check]}
        return jsonschema.Draft202012Validator(schema).is_valid(suite)

    gap = {"metric": "map", "gap": {"train": "a", "test": "b"}, "below": 0.1}
    assert ok({**gap, "min_power": 0.8})
    assert not ok({**gap, "min_power": 1.5})
    compare = {"baseline": "m", "rule": "non_inferior", "margin": 0.05}
    assert ok({"metric": "map", "dataset": "a", "compare": {**compare, "min_power": 0.8}})
    # a check's own min_power is a gap's: beside compare: it is refused
    assert not ok({"metric": "map", "dataset": "a", "compare": compare, "min_power": 0.8})
