"""Per-slice baselines written by ``--rc-regen-all`` in the run's records (review
finding 3): the regenerating run records each check as one slice gate, a row per
slice, as a comparing run does, so that ``show`` and ``compare`` match them slice by
slice; and each slice's record holds the slice's own interval (finding 4: the class
bootstrap of the slice gates, not a query bootstrap); and --rc-prune-baselines keeps the per-slice
records of a live check (finding 8).

Cost: about 5 s (nine in-process pytester sessions on evaluations of 120 to 240 queries).
"""

from __future__ import annotations

import io

import numpy as np
import yaml

import retrieval_checks as rc
from retrieval_checks.tracking._cli import main

pytest_plugins = ["pytester"]

FIXTURE_TEST = """
import numpy as np
import retrieval_checks as rc

def test_slices(rc_evaluate, rc_slice_baseline):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(40), 6)
    X = (rng.normal(size=(40, 16))[y] + rng.normal(size=(240, 16))).astype(np.float32)
    lang = np.where(y < 14, "de", np.where(y < 30, "en", "fr"))
    result = rc_evaluate(X, query_labels=y, metrics=["map"], slices=lang, model="m")
    rc_slice_baseline(result, "map", max_drop=0.01)
"""


def _result():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(40), 6)
    X = (rng.normal(size=(40, 16))[y] + rng.normal(size=(240, 16))).astype(np.float32)
    lang = np.where(y < 14, "de", np.where(y < 30, "en", "fr"))
    return rc.evaluate(X, query_labels=y, metrics=["map"], slices=lang)


def test_a_regenerating_run_compares_slice_by_slice_with_a_comparing_run(pytester):
    pytester.makepyfile(test_fx=FIXTURE_TEST)
    db = str(pytester.path / "h.sqlite")
    pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-regen-all", f"--rc-history={db}"
    ).assert_outcomes(passed=1)
    pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--rc-history={db}").assert_outcomes(
        passed=1
    )
    for a, b in (("1", "2"), ("2", "1")):
        out = io.StringIO()
        assert main(["--db", db, "compare", a, b], out=out) == 0, out.getvalue()
        text = out.getvalue()
        assert "3 compared" in text and f"0 only in run {a}, 0 only in run {b}" in text, text
        for s in ("de", "en", "fr"):
            assert f"test_slices [slice {s}]" in text, text
    out = io.StringIO()
    assert main(["--db", db, "show", "1"], out=out) == 0
    text = out.getvalue()
    assert "run 1: 1 gate" in text and "regenerated baseline" in text, text


def test_a_slice_baseline_record_holds_the_slice_gates_interval(pytester):
    pytester.makepyfile(test_fx=FIXTURE_TEST)
    pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-regen-all", "--rc-history=none"
    ).assert_outcomes(passed=1)
    stored = yaml.safe_load((pytester.path / "test_fx.baselines.yaml").read_text())
    intervals = rc.slice_intervals(_result(), "map")
    for s in ("de", "en", "fr"):
        record = stored[f"test_slices::map slice={s}"]
        iv = intervals[s]
        assert record["n"] == record["n_queries"] == iv.n_queries and record["unit"] == "queries"
        assert record["interval_method"] == f"bca bootstrap over classes ({iv.n_units} classes)"
        assert np.allclose(record["interval"], [iv.interval.low, iv.interval.high], atol=1e-5)


SUITE = """
datasets:
  set: {queries: set.npz, slices: lang}
checks:
  - {metric: map, slices: all, baseline: {max_drop: 0.02}}
  - {metric: map, slices: [en], baseline: {max_drop: 0.02}}
"""


def test_pruning_keeps_the_per_slice_records_of_a_suites_live_checks(pytester):
    """Review finding 8: --rc-prune-baselines removed every ``<case> slice=<name>``
    record of a suite's slice baseline checks that still exist (their key is not the
    case's name), and the way back (--rc-regen-all) re-records from the current model."""
    y = np.repeat(np.arange(20), 6)
    x = np.random.default_rng(4).normal(size=(20, 12))[y] + 0.5 * np.random.default_rng(5).normal(
        size=(120, 12)
    )
    lang = np.where(y < 10, "de", "en")
    np.savez(pytester.path / "set.npz", embeddings=x.astype(np.float32), labels=y, lang=lang)
    (pytester.path / "rc_sl.yaml").write_text(SUITE.lstrip())
    args = ("-p", "no:cacheprovider", "--rc-history=none")
    pytester.runpytest_inprocess(*args, "--rc-regen-all").assert_outcomes(passed=2)
    path = pytester.path / "rc_sl.baselines.yaml"
    before = sorted(yaml.safe_load(path.read_text()))
    assert len(before) == 3 and all(" slice=" in k for k in before), before
    pytester.runpytest_inprocess(*args, "--rc-prune-baselines").assert_outcomes(passed=2)
    assert sorted(yaml.safe_load(path.read_text())) == before
    # a check removed from the suite: its slice records go, the other check's stay
    (pytester.path / "rc_sl.yaml").write_text(
        SUITE.lstrip().rsplit("  - {metric: map, slices: [en]", 1)[0]
    )
    result = pytester.runpytest_inprocess(*args, "--rc-prune-baselines")
    result.assert_outcomes(passed=1)
    after = sorted(yaml.safe_load(path.read_text()))
    assert after == [k for k in before if not k.startswith("map_vs_baseline_slices_2")], after


def test_a_force_regen_run_names_the_slice_of_each_rewritten_record(pytester):
    """The sibling of finding 3 under --rc-force-regen: each rewritten slice record is a
    failed 'regenerated' gate record naming its slice (it named none: one unnamed row
    per slice in show, unmatched in compare)."""
    pytester.makepyfile(test_fx=FIXTURE_TEST)
    db = str(pytester.path / "h.sqlite")
    args = ("-p", "no:cacheprovider", f"--rc-history={db}")
    pytester.runpytest_inprocess(*args, "--rc-force-regen").assert_outcomes(failed=1)
    rows = [r for r in rc.tracking.History(db).results(1) if r.get("on") == "regenerated"]
    assert sorted(r["slices"][0]["slice"] for r in rows) == ["de", "en", "fr"], rows
    pytester.runpytest_inprocess(*args).assert_outcomes(passed=1)
    out = io.StringIO()
    main(["--db", db, "compare", "1", "2"], out=out)
    assert "0 only in run 1, 0 only in run 2" in out.getvalue(), out.getvalue()
    assert "test_slices [slice de]" in out.getvalue()
