"""Baselines files: pruning the records of checks that no longer exist (BaselineFile.prune
and pytest --rc-prune-baselines, full runs only), numbers stored at 6 significant digits
and compared at that precision (a result equal to its baseline passes, a drop beyond
the precision still fails), and intervals in the regression message."""

from __future__ import annotations

import math
import os
import re
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

import retrieval_checks as rc
from retrieval_checks.gates import (
    BaselineFile,
    assert_no_regression,
    baseline_record,
    records_differ,
)
from retrieval_checks.gates._baselines import SIGNIFICANT_DIGITS, rounded_record

pytest_plugins = ["pytester"]


def _result(noise: float = 0.8, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(15), 6)
    x = np.random.default_rng(1).normal(size=(15, 12))[y] + noise * rng.normal(size=(90, 12))
    return rc.evaluate(x.astype(np.float32), query_labels=y, metrics=["map", "mrr"])


def _significant_digits(x: float) -> int:
    """Significant digits of the shortest text that reads back as ``x`` (as YAML writes it)."""
    digits = repr(abs(float(x))).lower().split("e")[0].replace(".", "")
    return len(digits.strip("0")) or 1


def test_prune_removes_only_the_records_whose_check_is_gone(tmp_path):
    path = tmp_path / "test_m.baselines.yaml"
    rec = baseline_record(_result(), "map")
    BaselineFile(path).update(
        {
            "test_a::map": rec,
            "test_a::map::small": rec,
            "test_gone::map": rec,
            "case[m-d]": rec,
            "old_case[m-d]": rec,
        }
    )
    names = {"test_a", "case[m-d]"}
    removed = BaselineFile(path).prune(
        lambda k: k in names or any(k.startswith(f"{n}::") for n in names)
    )
    assert removed == ["old_case[m-d]", "test_gone::map"]
    assert sorted(BaselineFile(path).records) == ["case[m-d]", "test_a::map", "test_a::map::small"]
    before = path.read_text()
    os.utime(path, (1, 1))
    assert (
        BaselineFile(path).prune(lambda k: True) == [] and path.stat().st_mtime == 1
    )  # nothing to remove: untouched
    assert path.read_text() == before


def test_prune_never_rewrites_an_unreadable_file(tmp_path):
    path = tmp_path / "x.baselines.yaml"
    path.write_text("a: [unclosed\n")
    f = BaselineFile.__new__(BaselineFile)  # as if the file was damaged after it was read
    f.path, f.records = path, {}
    with pytest.raises(rc.InputError, match="invalid YAML"):
        f.prune(lambda k: False)
    assert (
        path.read_text() == "a: [unclosed\n" and not path.with_name(path.name + ".corrupt").exists()
    )
    with pytest.raises(rc.InputError, match="function"):
        BaselineFile(tmp_path / "y.baselines.yaml").prune({"a"})


def test_numbers_are_stored_at_six_significant_digits(tmp_path):
    path = tmp_path / "x.baselines.yaml"
    rec = baseline_record(_result(), "map")
    assert _significant_digits(rec["value"]) > SIGNIFICANT_DIGITS == 6  # the record itself is exact
    BaselineFile(path).update({"t::map": rec})
    text = path.read_text()
    assert "6 significant digits" in text.splitlines()[1]
    stored = yaml.safe_load(text)["t::map"]
    floats = [stored["value"], *stored["interval"], *(s for s, _ in stored["units"].values())]
    assert all(_significant_digits(x) <= 6 for x in floats)
    assert stored["value"] == float(f"{rec['value']:.6g}")
    for got, exact in zip(stored["interval"], rec["interval"]):
        assert math.isclose(got, exact, rel_tol=5e-6) or got == stored["value"]
    # the stored record is valid, and equal to the exact one at the stored precision
    assert not records_differ(BaselineFile(path).get("t::map"), rec)


def test_a_result_equal_to_its_baseline_passes_and_a_real_drop_fails():
    """Against brute force over many values: rounding never fails an unchanged result,
    and never hides a drop larger than twice the rounding step."""
    rng = np.random.default_rng(7)
    for value in rng.uniform(0.001, 0.999, size=300):
        base = {
            "metric": "map",
            "value": float(value),
            "interval": None,
            "n": 10,
            "unit": "queries",
        }
        stored = rounded_record(base)
        assert_no_regression(
            base, stored
        )  # the unrounded result against its stored baseline: no drop
        dropped = {**base, "value": float(value) * (1 - 2.5e-5)}
        with pytest.raises(AssertionError, match="regressed"):
            assert_no_regression(dropped, stored)


def test_rounding_keeps_an_interval_around_its_value_and_refuses_one_that_was_not():
    rec = {
        "metric": "map",
        "value": 0.5000004,
        "interval": [0.4000001, 0.5000001],
        "n": 10,
        "unit": "queries",
    }
    assert rounded_record(rec)["interval"] == [0.4, 0.5]  # the rounded value 0.5 is held
    rec = {"metric": "map", "value": 0.9, "interval": [0.4, 0.6], "n": 10, "unit": "queries"}
    assert rounded_record(rec)["interval"] == [0.4, 0.6]  # not widened: check_record refuses it
    with pytest.raises(rc.InputError, match="outside its own interval"):
        assert_no_regression(rec, rec)


def test_the_regression_message_shows_values_with_their_intervals():
    good = baseline_record(_result(0.6), "map")
    bad = baseline_record(_result(1.6), "map")
    with pytest.raises(AssertionError) as info:
        assert_no_regression(bad, good, max_drop=0.01)
    head = str(info.value).splitlines()[0]
    assert re.match(
        r"map regressed: 0\.\d{4} \[0\.\d{4}, 0\.\d{4}\] -> 0\.\d{4} \[0\.\d{4}, 0\.\d{4}\] \(",
        head,
    ), head


SUITE = """
datasets:
  set: {queries: set.npz}
checks:
  - metric: map
    baseline: {max_drop: 0.01}
  - metric: mrr
    baseline: {max_drop: 0.01}
"""

MODULE = """
import numpy as np

rng = np.random.default_rng(0)
y = np.repeat(np.arange(10), 4)
X = (rng.normal(size=(10, 8))[y] + 0.5 * rng.normal(size=(40, 8))).astype(np.float32)

def test_a(rc_evaluate, rc_baseline):
    rc_baseline(rc_evaluate(X, query_labels=y, metrics=["map"], model="m", dataset="d"), "map", max_drop=0.01)

def NAME(rc_evaluate, rc_baseline):
    rc_baseline(rc_evaluate(X, query_labels=y, metrics=["map"], model="m", dataset="d"), "map", max_drop=0.01)
"""


@pytest.fixture
def run(pytester, monkeypatch):
    """pytest in the project, in-process: its exit code, stdout and stderr."""
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)

    def go(*args: str) -> SimpleNamespace:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--rc-history=none", *args)
        return SimpleNamespace(
            returncode=int(result.ret), stdout=result.stdout.str(), stderr=result.stderr.str()
        )

    return go


@pytest.fixture
def project(pytester):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(20), 5)
    x = np.random.default_rng(42).normal(size=(20, 12))[y] + 0.7 * rng.normal(size=(100, 12))
    np.savez(pytester.path / "set.npz", embeddings=x.astype(np.float32), labels=y)
    (pytester.path / "rc_track.yaml").write_text(SUITE.lstrip())
    (pytester.path / "test_mod.py").write_text(MODULE.replace("NAME", "test_b"))
    return pytester.path


def test_pytest_prunes_the_records_of_removed_checks_in_a_full_run(project, run):
    first = run("--rc-regen-all")
    assert first.returncode == 0, first.stdout[-3000:]
    suite_file, module_file = (
        project / "rc_track.baselines.yaml",
        project / "test_mod.baselines.yaml",
    )
    assert sorted(BaselineFile(module_file).records) == ["test_a::map", "test_b::map"]
    assert (
        BaselineFile(module_file).get("test_a::map")["model"] == "m"
    )  # rc_evaluate's names reach the baseline
    assert len(BaselineFile(suite_file).records) == 2
    # the mrr check and test_b are removed; test_c is new (its missing baseline fails, as always)
    (project / "rc_track.yaml").write_text(SUITE.lstrip().rsplit("  - metric: mrr", 1)[0])
    (project / "test_mod.py").write_text(MODULE.replace("NAME", "test_c"))

    narrowed = run("--rc-prune-baselines", "-k", "test_a")
    assert (
        narrowed.returncode == 4 and "--rc-prune-baselines: it needs a full run" in narrowed.stderr
    )
    assert "-k test_a" in narrowed.stderr and len(BaselineFile(suite_file).records) == 2

    pruned = run("--rc-prune-baselines")
    assert pruned.returncode == 1, pruned.stdout[-3000:]  # test_c has no baseline yet
    out = " ".join(pruned.stdout.split())
    assert "pruned 1 baseline record of checks that no longer exist from" in out
    assert "'mrr_vs_baseline[precomputed-set]'" in out and "'test_b::map'" in out
    assert sorted(BaselineFile(module_file).records) == ["test_a::map"]
    assert sorted(BaselineFile(suite_file).records) == ["map_vs_baseline[precomputed-set]"]


def test_pruning_is_refused_when_a_suite_cannot_be_loaded(project, run):
    assert run("--rc-regen-all").returncode == 0
    (project / "rc_track.yaml").write_text("checks: [")
    result = run("--rc-prune-baselines")
    out = " ".join(
        result.stdout.split()
    )  # a broken suite is a collection error: the run is partial
    assert "ERROR collecting rc_track.yaml" in out and result.returncode != 0
    assert "partial (1 collection error); nothing was pruned" in out
    assert len(BaselineFile(project / "rc_track.baselines.yaml").records) == 2
