"""Power and multiplicity in YAML suites (issue 28): a significance-gated baseline
check on 30 classes reports the drop it can detect and warns when that exceeds its
max_drop (the issue's silent pass), min_power fails it naming the classes it would
need, and a suite's ``correction:`` puts its checks in the session's family. pytester
in-process; cost: about 4 s (four small sessions)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest_plugins = ["pytester"]

SUITE = """
CORRECTION
datasets:
  set: {queries: set.npz}
checks:
  - metric: map
    baseline: BASELINE
"""


def _write_data(path: Path, noise: float, seed: int = 0) -> None:
    """150 items of 30 classes (as test_plugin_tracking's)."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(30), 5)
    centers = np.random.default_rng(42).normal(size=(30, 16))
    x = centers[y] + noise * rng.normal(size=(150, 16))
    np.savez(path / "set.npz", embeddings=x.astype(np.float32), labels=y)


def _suite(pytester, baseline: str, correction: str = "", noise=0.7, seed=0) -> None:
    _write_data(pytester.path, noise, seed)
    text = SUITE.replace("BASELINE", baseline).replace("CORRECTION", correction)
    pytester.path.joinpath("rc_power.yaml").write_text(text.lstrip())


def _run(pytester, *args):
    return pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-history=none", "--rc-json=g.json", *args
    )


def _text(result) -> str:
    return " ".join(line.strip() for line in result.outlines)


def _gate(pytester) -> dict:
    data = json.loads((pytester.path / "g.json").read_text())
    return data, data["gates"][0]


@pytest.fixture
def regenerated(pytester):
    _suite(pytester, "{max_drop: 0.01, significant: true}")
    _run(pytester, "--rc-regen-all").assert_outcomes(passed=1)
    return pytester


def test_an_underpowered_significance_gate_warns_and_min_power_fails_it(regenerated):
    pytester = regenerated
    _suite(pytester, "{max_drop: 0.01, significant: true}", seed=2)  # retrained: 0.027 lower
    result = _run(pytester)
    result.assert_outcomes(passed=1)  # not significant over 30 classes: the silent pass ...
    text = _text(result)
    assert "cannot see the drop it gates" in text  # ... is no longer silent
    assert "classes would be needed" in text
    _, gate = _gate(pytester)
    assert gate["mdd"] > 0.01 and gate["power_unit"] == "classes" and gate["power_units"] == 30
    assert gate["units_needed"] > 30 and gate["underpowered"] is True

    _suite(pytester, "{max_drop: 0.01, significant: true, min_power: 0.8}", seed=2)
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    assert "underpowered (min_power 0.8)" in _text(result)
    assert f"about {gate['units_needed']} classes would be needed" in _text(result)


def test_a_suite_correction_defers_a_significant_drop_to_the_session(regenerated):
    pytester = regenerated
    _suite(pytester, "{max_drop: 0.01, significant: true}", "correction: holm", noise=0.9)
    result = _run(pytester)
    assert result.ret == 1  # a real drop (0.18): failed after the correction, at the end
    result.assert_outcomes(failed=1)  # the suite's item itself, not a green item in a red run
    data, gate = _gate(pytester)
    assert gate["decision"] == "failed after holm" and gate["passed"] is False
    assert gate["correction"] == "holm" and gate["p_adjusted"] == gate["p_raw"]  # family of 1
    assert data["families"][0]["failed"] == [gate["test"]]
    assert "family of 1 significance-gated check: family-wise error rate 0.05 (holm)" in _text(
        result
    )


@pytest.mark.parametrize(
    "baseline, correction, says",
    [
        ("{max_drop: 0.01, significant: true, min_power: 1.5}", "", "min_power"),
        ("{max_drop: 0.01, significant: true}", "correction: bonferroni", "correction"),
    ],
)
def test_bad_power_or_correction_is_an_error_on_its_line(pytester, baseline, correction, says):
    _suite(pytester, baseline, correction)
    result = _run(pytester)
    assert result.ret != 0
    assert "rc_power.yaml:" in _text(result) and says in _text(result)
