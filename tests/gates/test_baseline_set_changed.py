"""A baseline is compared only with a result over the set it was recorded on (h5's F4):
a check without ``significant:`` (``max_drop``, ``max_relative_drop``) passed a worse
model evaluated on half of the recorded classes, comparing the two values as if they
were the same number. Every baseline comparison (Python and YAML, with or without
``significant:``) now refuses when the records tell the set changed: another ``n``,
other units, or units that count other queries; the message names what changed, both
counts and how to re-record. Records without ``n`` or ``units`` (old or hand-written
files) are compared as they are."""

from __future__ import annotations

import textwrap
import warnings

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks import InputError, SuiteError, SuiteRunner, load_suite
from retrieval_checks.gates import BaselineFile, assert_no_regression, baseline_record
from retrieval_checks.gates._baselines import BaselineStore

pytestmark = pytest.mark.filterwarnings("ignore::retrieval_checks.IntervalWarning")

L, PER, D = 40, 5, 32


@pytest.fixture(autouse=True)
def _unheard():
    """This file's gates (some refused on purpose) are not the session's gates."""
    from shared_setup import unheard

    with unheard():
        yield


def _sets():
    """h5's data: a release model on 40 classes; a worse model on the 20 classes the
    release model did best on (its mean map rises: the drop is hidden)."""
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(L, D))
    y = np.repeat(np.arange(L), PER)
    x = centers[y] + rng.normal(size=(len(y), D)) * 1.1
    x2 = centers[y] + rng.normal(size=(len(y), D)) * 1.35
    full = rc.evaluate(x, query_labels=y, metrics=["map"])
    per_class = np.array([full.per_query["map"][y == c].mean() for c in range(L)])
    keep = np.isin(y, np.argsort(per_class)[L // 2 :])
    return x, x2, y, keep


@pytest.fixture(scope="module")
def records():
    x, x2, y, keep = _sets()
    release = baseline_record(rc.evaluate(x, query_labels=y, metrics=["map"]), "map")
    half = baseline_record(rc.evaluate(x2[keep], query_labels=y[keep], metrics=["map"]), "map")
    return release, half


@pytest.mark.parametrize(
    "tolerance",
    [{"max_drop": 0.02}, {"max_relative_drop": 0.03}, {"max_drop": 0.02, "significant": True}],
)
def test_a_result_over_half_of_the_recorded_classes_is_refused(records, tolerance):
    release, half = records
    assert half["value"] > release["value"] - 0.02  # compared, it would pass
    with pytest.raises(InputError) as info:
        assert_no_regression(half, release, where="rc_x.baselines.yaml: 'k'", **tolerance)
    message = str(info.value)
    assert message.startswith("rc_x.baselines.yaml: 'k': map: the evaluated set is not the one")
    assert "n 200 queries in the baseline, 100 queries now" in message
    assert (
        "different units (classes: 40 in the baseline, 20 now; 20 only in the baseline (" in message
    )
    assert "--rc-force-regen" in message and "--rc-regen-all" in message


def test_the_same_classes_counting_other_queries_are_refused(records):
    release, _ = records
    moved = {**release, "units": dict(release["units"])}
    (a, (sa, ca)), (b, (sb, cb)) = list(moved["units"].items())[:2]
    # one query moved from class a to class b, same n, same value: only the counts tell
    moved["units"][a], moved["units"][b] = [sa * (ca - 1) / ca, ca - 1], [sb + sa / ca, cb + 1]
    with pytest.raises(
        InputError,
        match=rf"the same classes count different queries \(2 of 40 changed: '{a}': 5 -> 4",
    ):
        assert_no_regression(moved, release, max_drop=0.5)


def test_the_same_n_over_other_classes_is_refused(records):
    release, _ = records
    other = {**release, "units": {f"x{k}": v for k, v in release["units"].items()}}
    with pytest.raises(
        InputError,
        match=r"40 only in the baseline \('0', '1', '2', '3', '4', \.\.\. \(40 in all\)\); 40 only now",
    ):
        assert_no_regression(other, release, max_drop=0.5)


def test_the_same_set_is_compared_as_before(records):
    release, _ = records
    assert assert_no_regression(release, release, max_drop=0.0).drop == 0.0
    worse = {**release, "value": release["value"] - 0.1, "interval": None, "units": None}
    with pytest.raises(AssertionError, match="map regressed"):
        assert_no_regression(worse, release, max_drop=0.02)


def test_records_without_n_or_units_are_compared_with_a_note(records):
    release, half = records
    old = {k: release[k] for k in ("metric", "value", "interval", "confidence")}
    with pytest.warns(RuntimeWarning, match="baseline record has no n .* is not checked"):
        assert_no_regression(half, old, max_drop=0.05)
    # n alone (no units): n decides
    with pytest.raises(InputError, match="n 200 queries in the baseline, 100 queries now"):
        assert_no_regression(half, {**old, "n": 200, "unit": "queries"}, max_drop=0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert_no_regression({**release, "units": None}, {**old, "n": 200}, max_drop=0.05)


def test_units_named_another_way_are_not_compared_by_name():
    """A baseline keyed by rows (``query 3``) and a result keyed by ids (``query id 3``)
    may hold the same queries: only n is compared."""
    rng = np.random.default_rng(2)
    q, g = rng.normal(size=(20, 4)), rng.normal(size=(10, 4))
    relevance = {i: {int(rng.integers(10)): 1} for i in range(20)}
    rows = baseline_record(rc.evaluate(q, g, relevance=relevance, metrics=["map"]), "map")
    ids = baseline_record(
        rc.evaluate(
            q,
            g,
            relevance=relevance,
            metrics=["map"],
            query_ids=np.array([str(i) for i in range(20)]),
            gallery_ids=np.array([f"d{j}" for j in range(10)]),
        ),
        "map",
    )
    assert assert_no_regression(ids, rows, max_drop=0.0).drop == pytest.approx(0.0, abs=1e-6)


def test_the_store_refuses_naming_the_file_and_key(tmp_path, records):
    release, half = records
    path = tmp_path / "test_x.baselines.yaml"
    writer = BaselineStore(regen="all")
    writer.check(release, path=path, key="k")
    writer.write()
    assert BaselineFile(path).get("k")["n"] == 200
    with pytest.raises(InputError, match=r"test_x.baselines.yaml: 'k': map: the evaluated set"):
        BaselineStore().check(half, path=path, key="k", max_relative_drop=0.03)
    # --rc-force-regen re-records it (and fails, as it does for any changed record)
    force = BaselineStore(regen="force")
    with pytest.raises(AssertionError, match="updated"):
        force.check(half, path=path, key="k")
    force.write()
    assert BaselineStore().check(half, path=path, key="k", max_drop=0.0).drop == 0.0


def test_a_yaml_baseline_check_refuses_a_changed_set(tmp_path):
    x, x2, y, keep = _sets()
    np.savez(tmp_path / "data.npz", embeddings=x, labels=y)
    (tmp_path / "rc_f5.yaml").write_text(
        textwrap.dedent("""
        suite: f5
        datasets:
          test: {queries: data.npz}
        checks:
          - {id: drop, metric: map, dataset: test, baseline: {max_drop: 0.02}}
          - {id: rel, metric: map, dataset: test, baseline: {max_relative_drop: 0.03}}
        """)
    )
    suite = load_suite(tmp_path / "rc_f5.yaml")
    writer = SuiteRunner(regen="all")
    for case in suite.cases:
        writer.run(suite, case)
    writer.baselines.write()
    runner = SuiteRunner()
    for case in suite.cases:  # the same set: compared, and passes
        runner.run(suite, case)
    np.savez(tmp_path / "data.npz", embeddings=x2[keep], labels=y[keep])
    suite = load_suite(tmp_path / "rc_f5.yaml")
    runner = SuiteRunner()
    for case in suite.cases:
        with pytest.raises(SuiteError) as info:
            runner.run(suite, case)
        message = str(info.value)
        assert (
            f"rc_f5.baselines.yaml: {case.name!r}: map: the evaluated set is not the one" in message
        )
        assert "n 200 queries in the baseline, 100 queries now" in message
        assert "--rc-force-regen" in message
