"""Drops against baselines: direction, tolerances, significance; baseline records and files.

Fail closed (issue 12): tolerances, records and hand-edited baselines files are checked
when a gate is called, with the library's error naming the file, the key, the field
and the fix; a tolerance that could never fail is refused; skipped queries are
reported and limited; concurrent writers of one baselines file lose no record. Cost:
about 3 s of CPU (small evaluations; the file is read and written with libyaml where
PyYAML has it: the four forked writers of one file cost 4 CPU-s with PyYAML's
pure-Python parser, 0.6 with libyaml).
"""

from __future__ import annotations

import multiprocessing
import os
import stat
import sys

import numpy as np
import pytest
from scipy import stats
from shared_setup import FixedMeasurementResult as Fake
from shared_setup import expect_error as _expect

import retrieval_checks as rc
from retrieval_checks.gates import (
    BaselineFile,
    BaselineStore,
    _baselines,
    assert_no_regression,
    baseline_record,
    measure_change,
    records_differ,
    write_records,
)

NAN, INF = float("nan"), float("inf")


def _pair(seed=0, noise=1.0, n_classes=15, per_class=6):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), per_class)
    centers = rng.normal(size=(n_classes, 8))
    x = centers[y] + noise * rng.normal(size=(y.size, 8))
    worse = x + 0.6 * rng.normal(size=x.shape)
    metrics = ["map", "hit_rate@1", "grouped_recall@1", "recall_at_precision@0.5"]
    a = rc.evaluate(x.astype(np.float32), query_labels=y, metrics=metrics, group_size=3)
    b = rc.evaluate(worse.astype(np.float32), query_labels=y, metrics=metrics, group_size=3)
    return a, b


def test_drop_direction_and_tolerances():
    ch = measure_change("map", {"value": 0.80}, {"value": 0.78}, max_drop=0.01)
    assert ch.failed and ch.drop == pytest.approx(0.02) and ch.relative_drop == pytest.approx(0.025)
    assert not measure_change("map", {"value": 0.80}, {"value": 0.78}, max_drop=0.03).failed
    assert not measure_change(
        "map", {"value": 0.80}, {"value": 0.78}, max_relative_drop=0.03
    ).failed
    assert measure_change("map", {"value": 0.80}, {"value": 0.78}, max_relative_drop=0.02).failed
    # lower is better for ranks: a rising median rank is the drop
    ch = measure_change("medr", {"value": 3.0}, {"value": 5.0}, max_drop=1)
    assert ch.failed and ch.drop == 2.0 and not ch.higher_is_better
    assert not measure_change("medr", {"value": 5.0}, {"value": 3.0}).failed
    assert measure_change(
        "map difference", {"value": 0.1}, {"value": 0.0}
    ).failed  # recorded comparisons
    assert measure_change(
        "map gap", {"value": 0.01}, {"value": 0.05}
    ).failed  # a growing gap is worse
    with pytest.raises(rc.InputError, match="direction"):
        measure_change("my_score", {"value": 1.0}, {"value": 0.5})
    assert (
        measure_change("my_score", {"value": 1.0}, {"value": 0.5}, direction="lower").drop == -0.5
    )


def test_interval_significance_decides_the_gate():
    z = stats.norm.ppf(0.975)
    b = {"value": 0.80, "low": 0.80 - 0.02 * z, "high": 0.80 + 0.02 * z}
    c = {"value": 0.75, "low": 0.75 - 0.03 * z, "high": 0.75 + 0.03 * z}
    p = stats.norm.sf(0.05 / np.hypot(0.02, 0.03))
    ch = measure_change("map", b, c, max_drop=0.01, significant=True)
    assert (
        ch.p_worse == pytest.approx(p)
        and p > 0.05
        and not ch.failed
        and "not significant" in ch.reasons[0]
    )
    tight = {"value": 0.75, "low": 0.75 - 0.005 * z, "high": 0.75 + 0.005 * z}
    b_tight = {"value": 0.80, "low": 0.80 - 0.005 * z, "high": 0.80 + 0.005 * z}
    assert measure_change("map", b_tight, tight, max_drop=0.01, significant=True).failed
    # no interval: untestable, fails on the tolerance and says so
    ch = measure_change("map", {"value": 0.8}, {"value": 0.7}, max_drop=0.01, significant=True)
    assert ch.failed and "untestable" in ch.reasons[-1]


@pytest.mark.parametrize("metric", ["map", "hit_rate@1", "grouped_recall@1"])
def test_paired_significance_from_stored_units_equals_compare(metric):
    good, bad = _pair()
    rec_good, rec_bad = baseline_record(good, metric), baseline_record(bad, metric)
    cmp = rc.compare(bad, good, metric)  # candidate = the worse model
    b = {"value": rec_good["value"], "units": {k: tuple(v) for k, v in rec_good["units"].items()}}
    c = {"value": rec_bad["value"], "units": {k: tuple(v) for k, v in rec_bad["units"].items()}}
    ch = measure_change(metric, b, c, max_drop=0.0, significant=True)
    assert ch.p_worse == pytest.approx(cmp.p_value_worse, rel=1e-9)
    assert ch.drop == pytest.approx(-cmp.difference, abs=1e-12)


def test_baseline_records_files_and_the_gate(tmp_path):
    good, bad = _pair()
    rec = baseline_record(good, "map")
    assert rec["unit"] == "queries" and rec["units_are"] == "classes" and len(rec["units"]) == 15
    assert sum(n for _, n in rec["units"].values()) == rec["n"] == 90
    assert rec["interval"][0] < rec["value"] < rec["interval"][1]
    f = BaselineFile(tmp_path / "x.baselines.yaml")
    f.update({"b::map": rec, "a::map": baseline_record(bad, "map")})
    text = (tmp_path / "x.baselines.yaml").read_text()
    assert text.startswith("# retrieval-checks baselines") and text.index("a::map") < text.index(
        "b::map"
    )
    again = BaselineFile(tmp_path / "x.baselines.yaml").get("b::map")
    # the file holds 6 significant digits: the round trip is exact at that precision
    assert (
        not records_differ(again, rec)
        and again["value"] == float(f"{rec['value']:.6g}") != rec["value"]
    )
    assert records_differ(again, baseline_record(bad, "map"))
    assert_no_regression(rec, again)  # unchanged: passes
    with pytest.raises(
        AssertionError, match=r"map regressed: .* -> .*\n  drop \+0\.\d+ .*\n.*p\(worse\)="
    ) as info:
        assert_no_regression(baseline_record(bad, "map"), rec, max_drop=0.01, significant=True)
    assert "paired t over 15 units" in str(info.value)
    # image-text and pair metrics keep value and interval only
    assert "units" not in baseline_record(good, "recall_at_precision@0.5")


# --- fail closed: baseline records honour confidence and seed ---
def test_baseline_record_honours_confidence_and_seed(res):
    a, b = baseline_record(res, "map", confidence=0.5), baseline_record(res, "map", confidence=0.99)
    assert a["confidence"] == 0.5 and b["confidence"] == 0.99
    assert b["interval"][0] < a["interval"][0] and b["interval"][1] > a["interval"][1]
    assert (
        baseline_record(res, "map", seed=1)["interval"]
        != baseline_record(res, "map", seed=0)["interval"]
    )
    for kw, fragment in [
        (dict(confidence=95), "confidence=95"),
        (dict(confidence=NAN), "confidence=nan"),
        (dict(seed=-3), "seed=-3"),
        (dict(seed="x"), "seed='x'"),
    ]:
        _expect(rc.InputError, lambda: baseline_record(res, "map", **kw), fragment)


def test_baseline_record_refuses_non_results_and_nan_values():
    _expect(
        rc.InputError, lambda: baseline_record({"map": 0.5}, "map"), "evaluation results", "dict"
    )
    _expect(rc.InputError, lambda: baseline_record(Fake(value=NAN), "map"), "finite value")


# --- fail closed: regressions ---
BASE = {
    "metric": "map",
    "value": 0.7,
    "interval": [0.65, 0.75],
    "confidence": 0.95,
    "n": 100,
    "unit": "queries",
}

CHANGE_CASES = {
    "max_drop-nan": (dict(max_drop=NAN), ["max_drop=nan", "finite"]),
    "max_drop-inf": (dict(max_drop=INF), ["max_drop=inf", "finite"]),
    "max_drop-one": (dict(max_drop=1), ["max_drop=1", "never fail"]),
    "max_drop-negative": (dict(max_drop=-0.1), ["max_drop=-0.1", ">= 0"]),
    "max_drop-string": (dict(max_drop="0.1"), ["max_drop='0.1'", "number"]),
    "max_relative_drop-five": (dict(max_relative_drop=5), ["max_relative_drop=5", "0.05"]),
    "max_relative_drop-nan": (dict(max_relative_drop=NAN), ["max_relative_drop=nan", "finite"]),
    "max_relative_drop-negative": (
        dict(max_relative_drop=-0.1),
        ["max_relative_drop=-0.1", ">= 0"],
    ),
    "direction-typo": (dict(direction="hihger"), ["direction='hihger'", "Did you mean 'higher'"]),
    "direction-contradicts": (dict(direction="lower"), ["direction='lower'", "higher is better"]),
    "confidence-percent": (dict(confidence=95), ["confidence=95", "0.95"]),
    "significant-string": (dict(significant="yes"), ["significant='yes'", "True or False"]),
}


@pytest.mark.parametrize("case", list(CHANGE_CASES), ids=list(CHANGE_CASES))
def test_no_regression_checks_its_tolerances(case):
    kw, fragments = CHANGE_CASES[case]
    _expect(rc.InputError, lambda: assert_no_regression(dict(BASE), dict(BASE), **kw), *fragments)


BAD_BASELINES = {
    "value-nan": ({"value": NAN}, ["value", "finite"]),
    "value-inf": ({"value": INF}, ["value", "finite"]),
    "value-string": ({"value": "abc"}, ["'value'", "number"]),
    "value-none": ({"value": None}, ["'value'", "null"]),
    "value-out-of-range": ({"value": 72.0}, ["'value'", "0.72"]),
    "interval-nan": ({"interval": [NAN, 0.8]}, ["'interval'", "finite"]),
    "interval-short": ({"interval": [0.1]}, ["'interval'", "[low, high]"]),
    "interval-reversed": ({"interval": [0.9, 0.1]}, ["'interval'", "low 0.9 > high 0.1"]),
    "metric-unknown": ({"metric": "mapp"}, ["'metric'", "Did you mean 'map'"]),
    "confidence-percent": ({"confidence": 95}, ["'confidence'", "between 0 and 1"]),
}


@pytest.mark.parametrize("case", list(BAD_BASELINES), ids=list(BAD_BASELINES))
def test_no_regression_refuses_a_bad_baseline(case):
    patch, fragments = BAD_BASELINES[case]
    _expect(rc.InputError, lambda: assert_no_regression(dict(BASE), {**BASE, **patch}), *fragments)


@pytest.mark.parametrize("current", [None, "map", [0.5], {"value": 0.5}])
def test_no_regression_refuses_what_is_not_a_record(current):
    _expect(
        rc.InputError,
        lambda: assert_no_regression(current, dict(BASE)),
        "current record",
        "baseline_record",
    )


@pytest.mark.parametrize(
    "side,patch,fragment",
    [
        ("baseline", {"value": NAN}, "baseline value=nan"),
        ("current", {"value": INF}, "current value=inf"),
        ("baseline", {"low": 0.9, "high": 0.1}, "low=0.9 > high=0.1"),
        ("current", {"low": NAN, "high": 0.9}, "low"),
        ("baseline", {"low": 0.1}, "both 'low' and 'high'"),
        ("current", {"value": "x"}, "current value='x'"),
    ],
)
def test_measure_change_refuses_undefined_sides(side, patch, fragment):
    sides = {"baseline": {"value": 0.7}, "current": {"value": 0.6}}
    sides[side] = {**sides[side], **patch}
    _expect(
        rc.InputError, lambda: measure_change("map", sides["baseline"], sides["current"]), fragment
    )


def test_measure_change_still_decides_known_drops():
    assert measure_change("map", {"value": 0.8}, {"value": 0.7}, max_drop=0.05).failed
    assert not measure_change("map", {"value": 0.8}, {"value": 0.78}, max_drop=0.05).failed
    assert measure_change("map gap", {"value": 0.01}, {"value": 0.2}, max_drop=0.1).failed
    _expect(
        rc.InputError,
        lambda: measure_change("map gap", {"value": 0.0}, {"value": 0.1}, max_drop=2),
        "max_drop=2",
    )


def test_regression_message_formats_intervals():
    worse = {**BASE, "value": 0.6, "interval": [0.5512345678, 0.6587654321]}
    with pytest.raises(AssertionError) as info:
        assert_no_regression(worse, dict(BASE), max_drop=0.05)
    msg = str(info.value)
    assert (
        "current interval [0.5512, 0.6588]" in msg and "baseline interval [0.6500, 0.7500]" in msg
    )


def test_regression_skipped_queries_are_reported_and_limited(skipped):
    rec = baseline_record(skipped, "map")
    assert rec["n_skipped"] == 10 and rec["n"] == 100
    heard = []
    with rc.gates.listening(heard.append):
        with pytest.warns(RuntimeWarning, match="n_used 100 / n_skipped 10"):
            assert_no_regression(rec, rec)
        with (
            pytest.warns(RuntimeWarning),
            pytest.raises(AssertionError, match="more than max_skipped=0.05"),
        ):
            assert_no_regression(rec, rec, max_skipped=0.05)
    assert heard[0].n_used == 100 and heard[0].n_skipped == 10 and heard[0].warnings
    assert heard[0].passed and not heard[1].passed


# --- fail closed: hand-edited files ---
GOOD = (
    "k:\n  metric: map\n  value: 0.5\n  interval: [0.4, 0.6]\n  confidence: 0.95\n  n: 100\n"
    "  unit: queries\n"
)

BAD_FILES = {
    "value-string": ("k:\n  metric: map\n  value: abc\n", ["'k'", "'value'", "string"]),
    "value-null": ("k:\n  metric: map\n  value: null\n", ["'k'", "'value'", "null"]),
    "value-missing": ("k:\n  metric: map\n", ["'k'", "'value'", "missing"]),
    "value-nan": ("k:\n  metric: map\n  value: .nan\n", ["'k'", "'value'", "finite"]),
    "value-inf": ("k:\n  metric: map\n  value: .inf\n", ["'k'", "'value'", "finite"]),
    "value-bool": ("k:\n  metric: map\n  value: yes\n", ["'k'", "'value'", "boolean"]),
    "value-out-of-range": ("k:\n  metric: map\n  value: 1.5\n", ["'k'", "'value'", "range"]),
    "record-null": ("k: null\n", ["'k'", "mapping", "null"]),
    "record-list": ("k: [1, 2]\n", ["'k'", "mapping", "list"]),
    "record-string": ("k: fine\n", ["'k'", "mapping", "string"]),
    "interval-one": (
        "k:\n  metric: map\n  value: 0.5\n  interval: [1]\n",
        ["'k'", "'interval'", "[low, high]"],
    ),
    "interval-reversed": (
        "k:\n  metric: map\n  value: 0.5\n  interval: [0.9, 0.1]\n",
        ["'k'", "'interval'", "low"],
    ),
    "interval-string": (
        "k:\n  metric: map\n  value: 0.5\n  interval: wide\n",
        ["'k'", "'interval'", "string"],
    ),
    "interval-strings": (
        "k:\n  metric: map\n  value: 0.5\n  interval: [a, b]\n",
        ["'k'", "'interval'", "finite"],
    ),
    "interval-nan": (
        "k:\n  metric: map\n  value: 0.5\n  interval: [.nan, 0.6]\n",
        ["'k'", "'interval'", "finite"],
    ),
    "metric-unknown": (
        "k:\n  metric: mapp\n  value: 0.5\n",
        ["'k'", "'metric'", "Did you mean 'map'"],
    ),
    "metric-number": ("k:\n  metric: 5\n  value: 0.5\n", ["'k'", "'metric'", "metric name"]),
    "metric-alias": ("k:\n  metric: mAP\n  value: 0.5\n", ["'k'", "'metric'", "write 'map'"]),
    "confidence": (
        "k:\n  metric: map\n  value: 0.5\n  confidence: 95\n",
        ["'k'", "'confidence'", "0.95"],
    ),
    "n-negative": ("k:\n  metric: map\n  value: 0.5\n  n: -4\n", ["'k'", "'n'", "integer >= 0"]),
    "n-float": ("k:\n  metric: map\n  value: 0.5\n  n: 4.5\n", ["'k'", "'n'", "integer >= 0"]),
    "units-list": (
        "k:\n  metric: map\n  value: 0.5\n  units: [1, 2]\n",
        ["'k'", "'units'", "mapping"],
    ),
    "units-entry": (
        "k:\n  metric: map\n  value: 0.5\n  units: {a: [1]}\n",
        ["'k'", "units.a", "[sum, count]"],
    ),
    "units-count": (
        "k:\n  metric: map\n  value: 0.5\n  units: {a: [1.0, 0]}\n",
        ["'k'", "units.a", ">= 1"],
    ),
    "partition-number": (
        "k:\n  metric: map\n  value: 0.5\n  partition: 3\n",
        ["'k'", "'partition'", "string"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_FILES), ids=list(BAD_FILES))
def test_a_hand_edited_record_names_file_key_field_and_fix(tmp_path, case):
    body, fragments = BAD_FILES[case]
    path = tmp_path / "suite.baselines.yaml"
    path.write_text(body)
    rec = dict(BASE)
    for call in (
        lambda: BaselineFile(path).get("k"),
        lambda: BaselineStore().check(rec, path=path, key="k"),
    ):
        _expect(rc.InputError, call, str(path), "--rc-force-regen", *fragments)


WHOLE_FILES = {
    "top-level-list": ("- a\n- b\n", ["mapping of check names", "list"]),
    "top-level-string": ("just text\n", ["mapping of check names", "string"]),
    "invalid-yaml": ("k: [\n", ["invalid YAML", ":2"]),
    "tab-yaml": ("k:\n\tmetric: map\n", ["invalid YAML"]),
    "int-keys": ("1: {metric: map, value: 0.5}\n", ["record names must be strings", "1"]),
    "binary": (b"\xff\xfe\x00garbage", ["UTF-8"]),
    "merge-key-bomb": (
        "a0: &a0 {x: 1, y: 2}\n"
        + "".join(f"a{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}'] * 10)}]}}\n" for i in range(1, 9)),
        ["merge keys"],
    ),
    "huge-integer": ("k:\n  metric: map\n  value: " + "9" * 5000 + "\n", ["cannot read"]),
    "deep-nesting": ("k: " + "[" * 5000 + "]" * 5000 + "\n", ["cannot read"]),
}


@pytest.mark.parametrize("case", list(WHOLE_FILES), ids=list(WHOLE_FILES))
def test_an_unreadable_file_is_an_input_error_naming_it(tmp_path, case):
    body, fragments = WHOLE_FILES[case]
    path = tmp_path / "suite.baselines.yaml"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    _expect(rc.InputError, lambda: BaselineFile(path), str(path), "--rc-force-regen", *fragments)
    _expect(rc.InputError, lambda: BaselineStore().check(dict(BASE), path=path, key="k"), str(path))


def test_nesting_through_aliases_is_refused_like_nesting_in_the_text(tmp_path):
    """A file 70 levels deep through aliases (each line one level: shallow text, which
    neither parser's recursion notices) is refused when read, like a 5000-deep text, not
    handed to the checks that recurse into a record."""
    lines = ["a0: &a0 [1]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, 70)]
    path = tmp_path / "suite.baselines.yaml"
    path.write_text("\n".join(lines) + "\n")
    _expect(
        rc.InputError,
        lambda: BaselineFile(path),
        str(path),
        "nested too deeply",
        "--rc-force-regen",
    )
    # a file that shares one list many times (aliases) is walked once per list, not per path
    wide = ["b0: &b0 [1, 2]"] + [
        f"b{i}: &b{i} [{', '.join([f'*b{i - 1}'] * 8)}]" for i in range(1, 30)
    ]
    path.write_text("\n".join(wide) + "\n")
    assert set(BaselineFile(path).records) == {f"b{i}" for i in range(30)}


def test_libyaml_writes_the_text_pyyaml_writes(tmp_path):
    """Where PyYAML has libyaml, the file is read and written with it (about 8x less CPU
    per record written); the text is the pure-Python emitter's, byte for byte, so a
    file's diff never depends on which PyYAML a machine has."""
    import yaml

    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML without libyaml: the pure-Python parser and emitter serve")
    assert issubclass(_baselines._Loader, yaml.CSafeLoader)
    assert _baselines._Dumper is yaml.CSafeDumper
    path = tmp_path / "suite.baselines.yaml"
    entries = {
        f"gate [é-{i}] 'q': x": {
            **BASE,
            "value": (i + 5.5) / 17,  # the mean of the units
            "n": 12,
            "interval": [0.25 + i / 90, 0.75],
            "units": {f"q{j} / ü": [(i + j) / 17, 1] for j in range(12)},
        }
        for i in range(5)
    }
    BaselineFile(path).update(entries)
    text = path.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    python_text = BaselineFile.HEADER + yaml.safe_dump(
        data, sort_keys=False, default_flow_style=None, width=120, allow_unicode=True
    )
    assert text == python_text
    assert BaselineFile(path).records == data


def test_a_directory_where_the_file_should_be(tmp_path):
    path = tmp_path / "suite.baselines.yaml"
    path.mkdir()
    for call in (
        lambda: BaselineFile(path),
        lambda: write_records([(path, "k", dict(BASE))]),
        lambda: BaselineStore("force").check(dict(BASE), path=path, key="k"),
    ):
        _expect(rc.InputError, call, str(path), "is a directory", "remove or rename")


def test_a_good_file_still_reads_and_empty_is_empty(tmp_path):
    path = tmp_path / "suite.baselines.yaml"
    path.write_text(GOOD)
    assert BaselineFile(path).get("k")["value"] == 0.5 and BaselineFile(path).get("other") is None
    path.write_text("# only a comment\n")
    assert BaselineFile(path).records == {}


def test_force_regen_rewrites_a_malformed_record_and_keeps_the_rest(tmp_path):
    path = tmp_path / "suite.baselines.yaml"
    path.write_text(GOOD + "bad:\n  metric: map\n  value: abc\n")
    store = BaselineStore("force")
    with pytest.raises(AssertionError, match="created"):
        store.check(dict(BASE), path=path, key="bad")
    store.write()
    f = BaselineFile(path)
    assert f.get("bad")["value"] == 0.7 and f.get("k")["value"] == 0.5


def test_regeneration_replaces_an_unreadable_file_and_keeps_a_copy(tmp_path):
    path = tmp_path / "suite.baselines.yaml"
    path.write_text("k: [\n")
    store = BaselineStore("all")
    assert store.check(dict(BASE), path=path, key="k") is None
    with pytest.warns(RuntimeWarning, match="invalid YAML"):
        store.write()
    assert BaselineFile(path).get("k")["value"] == 0.7
    assert (tmp_path / "suite.baselines.yaml.corrupt").read_text() == "k: [\n"


def test_a_misspelt_tolerance_of_a_baseline_check_is_named(tmp_path):
    _expect(
        rc.InputError,
        lambda: BaselineStore().check(dict(BASE), path=tmp_path / "a.yaml", key="k", max_dorp=0.1),
        "max_dorp=",
        "Did you mean 'max_drop'",
    )


def test_store_regen_mode_and_write_entries_are_checked(tmp_path):
    _expect(rc.InputError, lambda: BaselineStore("forse"), "regen='forse'", "'force'")
    _expect(rc.InputError, lambda: write_records([("a.yaml", "k")]), "(path, key, record)")
    _expect(rc.InputError, lambda: write_records([(tmp_path / "a.yaml", 3, {})]), "strings")
    _expect(rc.InputError, lambda: BaselineFile(3), "str or Path")


# --- fail closed: concurrent writers ---
def _writer(path: str, worker: int) -> None:
    for j in range(20):
        BaselineFile(path).update(
            {
                f"w{worker}-k{j:02d}": {
                    **BASE,
                    "value": 0.5 + worker / 100 + j / 10000,
                    "interval": None,
                }
            }
        )


@pytest.mark.skipif(sys.platform == "win32", reason="fork start method")
def test_four_processes_writing_one_file_lose_no_record_and_keep_its_mode(tmp_path):
    path = tmp_path / "suite.baselines.yaml"
    BaselineFile(path).update({"existing": dict(BASE)})
    os.chmod(path, 0o640)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    f = BaselineFile(path)
    assert len(f.records) == 81 and f.get("existing")["value"] == 0.7
    assert all(f.get(f"w{i}-k{j:02d}") is not None for i in range(4) for j in range(20))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "suite.baselines.yaml"
    ]  # no lock or temp file left


def test_a_new_file_gets_the_umask_mode_not_0600(tmp_path):
    path = tmp_path / "new.baselines.yaml"
    old = os.umask(0o022)
    try:
        BaselineFile(path).update({"k": dict(BASE)})
    finally:
        os.umask(old)
    if sys.platform != "win32":
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644


def test_a_writer_merges_what_another_wrote_since_it_read(tmp_path):
    path = tmp_path / "suite.baselines.yaml"
    first, second = BaselineFile(path), BaselineFile(path)  # both read an empty file
    first.update({"a": dict(BASE)})
    second.update({"b": dict(BASE)})
    assert set(BaselineFile(path).records) == {"a", "b"}


def test_the_portable_lock_serves_without_fcntl(tmp_path, monkeypatch):
    monkeypatch.setattr(_baselines, "fcntl", None)
    path = tmp_path / "suite.baselines.yaml"
    BaselineFile(path).update({"a": dict(BASE)})
    BaselineFile(path).update({"b": dict(BASE)})
    assert set(BaselineFile(path).records) == {"a", "b"}
    assert not (tmp_path / ".suite.baselines.yaml.lock").exists()


# --- fail closed: tolerances that could never fail ---
@pytest.mark.parametrize("max_drop", [0.48, 0.99])
def test_max_drop_covering_the_baselines_whole_attainable_drop_is_refused(small, max_drop):
    base = dict(
        baseline_record(small, "map"), value=0.48, interval=None, units=None, units_are=None
    )
    cur = baseline_record(small, "map")
    _expect(
        rc.InputError,
        lambda: assert_no_regression(cur, base, max_drop=max_drop),
        f"max_drop={max_drop:g}",
        "at most 0.48",
        "never fail",
        "below 0.48",
    )
    assert (
        assert_no_regression(cur, base, max_drop=0.47).failed is False
    )  # a drop of 0.35 is tolerated


def test_max_drop_on_an_unbounded_ratio_is_checked_against_the_baseline(small):
    rec = baseline_record(small, "discriminant_ratio")
    _expect(
        rc.InputError,
        lambda: assert_no_regression(rec, rec, max_drop=10**6),
        "max_drop=1e+06",
        "at most",
        "never fail",
        "discriminant_ratio",
    )
    assert not assert_no_regression(rec, rec, max_drop=rec["value"] / 2).failed


def test_rank_records_carry_their_max_rank_and_bound_tolerances(small):
    rec = baseline_record(small, "medr")
    assert rec["max_rank"] == 56  # 59 candidates - 4 other relevant items + 1
    for kw, fragments in (
        (dict(max_drop=10**6), ["max_drop=1e+06", "max_rank", "below"]),
        (dict(max_relative_drop=100), ["max_relative_drop=100", "relative drop of", "never fail"]),
    ):
        _expect(rc.InputError, lambda: assert_no_regression(rec, rec, **kw), *fragments)
    meanr = baseline_record(small, "meanr")
    _expect(
        rc.InputError,
        lambda: assert_no_regression(meanr, meanr, max_drop=10**6),
        "max_drop",
        "never fail",
    )
    assert not assert_no_regression(rec, rec, max_drop=5).failed
    worse = dict(rec, value=30.0, units=None)
    with pytest.raises(AssertionError, match="regressed"):
        assert_no_regression(worse, dict(rec, units=None), max_drop=5)


def test_a_rank_record_beyond_its_max_rank_is_refused():
    rec = {
        "metric": "medr",
        "value": 80.0,
        "interval": None,
        "n": 10,
        "unit": "queries",
        "max_rank": 56,
    }
    _expect(rc.InputError, lambda: _baselines.check_record(rec), "'value'", "56", "max_rank")
    _expect(
        rc.InputError,
        lambda: _baselines.check_record({**rec, "value": 5.0, "max_rank": 0}),
        "'max_rank'",
        ">= 1",
    )
    _expect(
        rc.InputError,
        lambda: _baselines.check_record({**BASE, "max_rank": 10}),
        "'max_rank'",
        "rank metrics",
    )


def test_measure_change_refuses_a_metric_other_than_the_records(small):
    base, cur = baseline_record(small, "map"), baseline_record(small, "map")
    _expect(
        rc.InputError,
        lambda: measure_change("hit_rate@1", base, cur),
        "metric='hit_rate@1'",
        "'map'",
        "pass metric='map'",
    )
    assert measure_change("MAP", base, cur).metric == "MAP"  # an alias of the records' metric


# --- fail closed: review: baselines files ---
def test_update_writes_numpy_numbers_as_plain_numbers(tmp_path):
    path = tmp_path / "b.baselines.yaml"
    rec = dict(BASE, value=np.float64(0.7), n=np.int64(100), interval=np.array([0.65, 0.75]))
    BaselineFile(path).update({"k": rec})
    text = path.read_text()
    assert "numpy" not in text and "!!" not in text
    got = BaselineFile(path).get("k")
    assert got["value"] == 0.7 and type(got["value"]) is float and got["interval"] == [0.65, 0.75]


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda f: f.update(["x"]), ["update", "entries", "a list", "mapping of record names"]),
        (lambda f: f.update({1: dict(BASE)}), ["entries key 1", "strings"]),
        (lambda f: f.get(["k"]), ["get", "key=['k']", "a string"]),
        (
            lambda f: f.update({"k": {"value": NAN}}),
            ["entries['k']", "'metric'", "baseline_record"],
        ),
        (lambda f: f.update({"k": {**BASE, "value": NAN}}), ["entries['k']", "'value'", "nan"]),
        (lambda f: f.update({"k": None}), ["entries['k']", "found null", "baseline_record"]),
        (
            lambda f: f.update({"k": {**BASE, "value": 0.9}}),
            ["'interval'", "outside its own interval"],
        ),
        (
            lambda f: f.update({"k": {**BASE, "unit": "bananas"}}),
            ["'unit'", "'bananas'", "queries"],
        ),
    ],
)
def test_update_and_get_refuse_bad_arguments_and_write_nothing(tmp_path, call, fragments):
    path = tmp_path / "b.baselines.yaml"
    _expect(rc.InputError, lambda: call(BaselineFile(path)), *fragments)
    assert not path.exists()


def test_a_duplicated_key_in_a_baselines_file_is_refused_with_its_line(tmp_path):
    path = tmp_path / "b.baselines.yaml"
    path.write_text(
        "k:\n  metric: map\n  value: 0.5\nj:\n  metric: map\n  value: 0.5\nk:\n  metric: map\n"
        "  value: 0.6\n"
    )
    _expect(
        rc.InputError, lambda: BaselineFile(path), str(path), ":7", "duplicate key 'k'", "line 1"
    )
    path.write_text("k:\n  metric: map\n  value: 0.5\n  value: 0.6\n")
    _expect(rc.InputError, lambda: BaselineFile(path), "duplicate key 'value'", "line 3")


@pytest.mark.parametrize(
    "patch,fragments",
    [
        ({"value": 0.9}, ["'interval'", "0.9", "outside its own interval"]),
        ({"unit": "bananas"}, ["'unit'", "bananas", "queries, groups"]),
        ({"units": {"a": [NAN, 2], "b": [1.0, 2]}}, ["units.a", "unit a holds a sum of nan"]),
        ({"units": {"a": ["x", 2]}}, ["units.a", "sum must be a finite number"]),
    ],
)
def test_a_record_inconsistent_with_itself_is_refused(patch, fragments):
    _expect(rc.InputError, lambda: _baselines.check_record({**BASE, **patch}), *fragments)


# --- fail closed: review: messages ---
def test_a_result_where_a_record_is_expected_says_baseline_record(small):
    rec = baseline_record(small, "medr")
    for args in ((small, rec), (rec, small)):
        msg = _expect(
            rc.InputError,
            lambda: assert_no_regression(*args),
            "evaluation result",
            "rc.baseline_record(result, metric)",
        )
        assert "Did you mean" not in msg
    _expect(
        rc.InputError,
        lambda: measure_change("medr", small, rec),
        "baseline",
        "evaluation result",
        "baseline_record",
    )


def test_record_messages_cut_huge_values():
    msg = _expect(
        rc.InputError,
        lambda: _baselines.check_record({**BASE, "n": "9" * 5000}),
        "'n'",
        "characters",
    )
    assert len(msg) < 600
    msg = _expect(
        rc.InputError,
        lambda: _baselines.check_record({**BASE, "confidence": 10**5000}),
        "'confidence'",
        "digits",
    )
    assert len(msg) < 600


def test_a_nan_unit_in_a_baselines_file_names_the_unit(tmp_path):
    path = tmp_path / "b.baselines.yaml"
    path.write_text("k:\n  metric: map\n  value: 0.5\n  units: {cats: [.nan, 2], dogs: [1.0, 2]}\n")
    msg = _expect(
        rc.InputError,
        lambda: BaselineFile(path).get("k"),
        "units.cats",
        "unit cats holds a sum of nan",
    )
    assert "a list of 2" not in msg


def test_accuracy_records_carry_wilsons_interval_and_name_what_they_hold():
    acc = rc.accuracy([1, 2, 3, 1], [1, 2, 2, 1])
    rec = baseline_record(acc, "accuracy", confidence=0.9)
    assert rec["interval"][0] < 0.75 < rec["interval"][1] and rec["confidence"] == 0.9
    _expect(
        rc.InputError,
        lambda: baseline_record(acc, "map"),
        "map was not computed",
        "holds: accuracy",
    )


# --- fail closed: units that contradict the value (review) ---
@pytest.fixture(scope="module")
def unit_record():
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(10), 6)
    x = (rng.normal(size=(60, 8)) + 1.5 * np.eye(8)[y % 8]).astype(np.float32)
    return baseline_record(rc.evaluate(x, query_labels=y, metrics=["map"]), "map")


def test_units_zeroed_by_hand_are_refused_as_contradicting_the_value(unit_record):
    from retrieval_checks.gates._baselines import check_record

    edited = dict(unit_record, units={k: [0.0, n] for k, (_, n) in unit_record["units"].items()})
    _expect(
        rc.InputError,
        lambda: check_record(edited, where="rc_t.baselines.yaml, key 'k'"),
        "'k'",
        "'units'",
        "contradict the value",
        f"{unit_record['value']:.9g}",
    )
    _expect(
        rc.InputError,
        lambda: assert_no_regression(unit_record, edited, significant=True, max_drop=0.01),
        "'units'",
        "contradict",
    )


def test_a_unit_whose_mean_is_off_the_metrics_range_is_refused(unit_record):
    from retrieval_checks.gates._baselines import check_record

    units = dict(unit_record["units"])
    units["0"] = [520.3, 54]
    _expect(
        rc.InputError,
        lambda: check_record(dict(unit_record, units=units), where="f.yaml, key 'k'"),
        "units.0",
        "mean of 9.6",
        "outside the range of map",
    )


def test_units_counting_other_queries_than_n_are_refused(unit_record):
    from retrieval_checks.gates._baselines import check_record

    units = {
        k: [s * 2, n * 2] for k, (s, n) in unit_record["units"].items()
    }  # same mean, twice the queries
    _expect(
        rc.InputError, lambda: check_record(dict(unit_record, units=units)), "'units'", "but n is"
    )


def test_consistent_units_of_every_kind_are_accepted():
    from retrieval_checks.gates._baselines import check_record

    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(12), 5)
    x = (rng.normal(size=(60, 16)) + 2 * np.eye(16)[y % 16]).astype(np.float32)
    r = rc.evaluate(
        x,
        query_labels=y,
        metrics=["map", "hit_rate@1", "precision@5", "mrr", "meanr", "map@R", "grouped_recall@1"],
        group_size=3,
    )
    for metric in ("map", "hit_rate@1", "precision@5", "mrr", "meanr", "map@R", "grouped_recall@1"):
        rec = baseline_record(r, metric)
        assert rec.get("units"), metric
        assert check_record(rec) == rec


def test_a_hand_edited_baselines_file_with_contradicting_units_names_the_file_and_key(
    tmp_path, unit_record
):
    from retrieval_checks.gates import BaselineFile

    units = "".join(f"    '{k}': [0.0, {n}]\n" for k, (_, n) in unit_record["units"].items())
    path = tmp_path / "rc_t.baselines.yaml"
    path.write_text(
        f"k:\n  metric: map\n  value: {unit_record['value']}\n  n: {unit_record['n']}\n"
        f"  unit: queries\n  units_are: classes\n  units:\n{units}"
    )
    _expect(
        rc.InputError,
        lambda: BaselineFile(path).get("k"),
        "rc_t.baselines.yaml",
        "'k'",
        "'units'",
        "contradict the value",
    )


def test_a_record_whose_confidence_is_null_reads_the_interval_at_the_given_confidence():
    """History rows of gates that kept no confidence hold "confidence": None; the
    interval z-test then uses the caller's confidence (it raised a TypeError)."""
    b = {"metric": "map", "value": 0.6, "low": 0.55, "high": 0.65, "confidence": None}
    c = {"metric": "map", "value": 0.5, "low": 0.45, "high": 0.55, "confidence": None}
    change = rc.measure_change("map", b, c, max_drop=0.01, significant=True, confidence=0.95)
    assert change.failed and change.p_worse is not None and change.p_worse < 0.05
