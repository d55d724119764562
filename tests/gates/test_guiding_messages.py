"""Messages that say what the user probably meant: a floor on a lower-is-better rank
metric (at_least on medr) or a cap on a higher-is-better one, a recall assertion whose
kind is the other one the result holds, a misspelt required field of a baselines record.

Cost: well under 1 s (tiny evaluate results, small YAML files, no model).
"""

from __future__ import annotations

import io

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.gates import _baselines
from retrieval_checks.suites._schema import suite_errors


@pytest.fixture(scope="module")
def res():
    x = np.random.default_rng(0).normal(size=(24, 4)).astype(np.float32)
    return rc.evaluate(
        x, query_labels=np.arange(24) % 4, metrics=["medr", "meanr", "recall@5", "hit_rate@1"]
    )


def _suite(tmp_path, check: str):
    (tmp_path / "q.npz").write_bytes(b"")  # the loader checks that files exist, never reads them
    path = tmp_path / "rc_s.yaml"
    path.write_text(f"datasets:\n  test: {{queries: q.npz}}\nchecks:\n  - {check}\n")
    return suite_errors(path)[1]


# -------------------------------------------------- at_least on a lower-is-better metric


@pytest.mark.parametrize("metric", ["medr", "meanr", "i2t_medr"])
@pytest.mark.parametrize("value", [0.5, 1])
def test_a_floor_on_a_rank_metric_points_to_at_most_in_yaml(tmp_path, metric, value):
    (err,) = _suite(tmp_path, f"{{metric: {metric}, dataset: test, at_least: {value}}}")
    assert err.field == "checks[0].at_least" and err.line == 4
    assert "could never fail" in err.detail
    assert f"{metric} is lower-is-better" in err.detail and "at_most" in err.detail, err.detail


@pytest.mark.parametrize("metric", ["medr", "meanr"])
def test_a_floor_on_a_rank_metric_points_to_at_most_in_python(res, metric):
    with pytest.raises(rc.InputError) as exc:
        rc.assert_metric(res, metric, at_least=0.5)
    assert "could never fail" in str(exc.value)
    assert f"{metric} is lower-is-better" in str(exc.value) and "at_most" in str(exc.value)


def test_a_cap_on_a_higher_is_better_metric_points_to_at_least(res, tmp_path):
    with pytest.raises(rc.InputError) as exc:
        rc.assert_metric(res, "hit_rate@1", at_most=1)
    assert "higher-is-better" in str(exc.value) and "at_least" in str(exc.value)
    (err,) = _suite(tmp_path, "{metric: map, dataset: test, at_most: 1.0}")
    assert "map is higher-is-better" in err.detail and "at_least" in err.detail, err.detail


def test_the_direction_hint_is_only_given_for_the_wrong_direction(res, tmp_path):
    with pytest.raises(rc.InputError) as exc:  # a cap below a rank's range: the direction is right
        rc.assert_metric(res, "medr", at_most=0.5)
    assert "lower-is-better" not in str(exc.value) and "never pass" in str(exc.value)
    with pytest.raises(rc.InputError) as exc:  # a floor of 0 on a fraction: the value is the slip
        rc.assert_metric(res, "hit_rate@1", at_least=0)
    assert "higher-is-better" not in str(exc.value) and "could never fail" in str(exc.value)


# ------------------------------------------------ assert_recall_at_least: the other kind


def test_recall_at_least_names_kind_recall_when_only_recall_was_computed(res):
    with pytest.raises(rc.InputError) as exc:
        rc.assert_recall_at_least(res, 0.95, k=5)
    text = str(exc.value)
    assert "hit_rate@5 was not computed" in text
    assert "recall@5" in text and "kind='recall'" in text, text


def test_recall_at_least_names_the_default_kind_when_only_hit_rate_was_computed(res):
    with pytest.raises(rc.InputError) as exc:
        rc.assert_recall_at_least(res, 0.95, k=1, kind="recall")
    text = str(exc.value)
    assert "recall@1 was not computed" in text
    assert "hit_rate@1" in text and "kind='hit_rate'" in text, text


def test_recall_at_least_without_either_kind_keeps_the_plain_message(res):
    with pytest.raises(rc.InputError) as exc:
        rc.assert_recall_at_least(res, 0.95, k=3)
    assert "hit_rate@3 was not computed" in str(exc.value) and "kind=" not in str(exc.value)


# ------------------------------------------------ a misspelt required field of a record

RECORD = {"metric": "map", "value": 0.5, "n": 10, "unit": "queries"}


@pytest.mark.parametrize(
    "wrong, right", [("valeu", "value"), ("Value", "value"), ("metrc", "metric")]
)
def test_a_misspelt_required_field_is_named_with_the_fix(wrong, right):
    rec = {(wrong if k == right else k): v for k, v in RECORD.items()}
    with pytest.raises(rc.InputError) as exc:
        _baselines.check_record(rec, where="baseline 'a'")
    text = str(exc.value)
    assert f"field {wrong!r}: unknown field {wrong!r} (did you mean {right!r}?)" in text, text


def test_a_missing_field_with_nothing_close_stays_missing():
    rec = {k: v for k, v in RECORD.items() if k != "value"} | {"score": 0.5}
    with pytest.raises(rc.InputError) as exc:
        _baselines.check_record(rec, where="baseline 'a'")
    assert "field 'value': missing" in str(exc.value) and "did you mean" not in str(exc.value)


def test_validate_names_the_line_of_the_misspelt_field(tmp_path):
    from retrieval_checks.tracking import main

    path = tmp_path / "rc_x.baselines.yaml"
    path.write_text("a[m-t]:\n  metric: map\n  n: 10\n  valeu: 0.5\n")
    out = io.StringIO()
    assert main(["validate", str(path)], out=out) == 1
    first = out.getvalue().splitlines()[0]
    assert first.startswith(f"{path}:4: baseline 'a[m-t]', field 'valeu': unknown field 'valeu'"), (
        first
    )
