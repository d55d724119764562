"""Per-query baseline units keyed by query id (issue 25, item 6): a BEIR or run dataset's
per-query values were stored as ``query <row>``, so a paired significance test paired
whichever queries sat on the same row, and reordering (or adding one) silently changed
the comparison. With ids, reordering changes nothing, and a baseline keyed by rows is
never paired with one keyed by ids."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
from shared_setup import BEIR_EMBEDDER, beir_corpus, write_beir

import retrieval_checks as rc
from retrieval_checks import InputError, SuiteRunner, load_suite
from retrieval_checks.gates import assert_no_regression, baseline_record


def _run_and_qrels(order, seed=0):
    rng = np.random.default_rng(seed)
    qids = [f"q{i}" for i in range(30)]
    run = {q: {f"d{j}": float(rng.normal()) for j in range(8)} for q in qids}
    qrels = {q: {f"d{j}": 1 for j in rng.choice(8, 2, replace=False)} for q in qids}
    return {qids[i]: run[qids[i]] for i in order}, qrels


def _embedded(order, shift=0.0):
    """A labelless relevance result with query ids, its queries in ``order``."""
    rng = np.random.default_rng(1)
    q, g = rng.normal(size=(40, 6)), rng.normal(size=(25, 6))
    q = q + shift * rng.normal(size=q.shape)
    relevance = {i: {int(d): 1 for d in rng.choice(25, 3, replace=False)} for i in range(40)}
    ids = np.array([f"query-{i:02d}" for i in range(40)])
    order = np.asarray(order)
    return rc.evaluate(
        q[order],
        g,
        relevance={r: relevance[i] for r, i in enumerate(order)},
        metrics=["map"],
        query_ids=ids[order],
        gallery_ids=np.array([f"doc-{j}" for j in range(25)]),
    )


def test_units_are_keyed_by_query_id_and_reordering_changes_nothing():
    forward, backward = _embedded(range(40)), _embedded(range(39, -1, -1))
    a, b = baseline_record(forward, "map"), baseline_record(backward, "map")
    assert a["units_are"] == "queries" and set(a["units"]) == {
        f"query id query-{i:02d}" for i in range(40)
    }
    for key, (total, count) in a["units"].items():
        assert b["units"][key] == [pytest.approx(total, abs=1e-12), count]
    assert a["value"] == pytest.approx(
        b["value"], abs=1e-12
    )  # (the bootstrap interval resamples rows: it may move)
    # the paired test of a changed model gives the same p(worse) whichever order either run used
    worse_fwd, worse_bwd = _embedded(range(40), shift=0.7), _embedded(range(39, -1, -1), shift=0.7)
    p = [
        assert_no_regression(
            baseline_record(cur, "map"), base, significant=True, max_drop=0.1
        ).p_worse
        for base in (a, b)
        for cur in (worse_fwd, worse_bwd)
    ]
    assert p == pytest.approx([p[0]] * 4)


def test_run_results_are_keyed_by_query_id():
    run, qrels = _run_and_qrels(range(30))
    rec = baseline_record(rc.evaluate_run(run, qrels, ["map"]), "map")
    assert set(rec["units"]) == {f"query id q{i}" for i in range(30)}
    fewer = {q: v for q, v in run.items() if q != "q0"}
    other = baseline_record(
        rc.evaluate_run(fewer, {q: v for q, v in qrels.items() if q != "q0"}, ["map"]), "map"
    )
    with pytest.raises(
        InputError, match="different units"
    ):  # a missing query is named, never a shifted row
        assert_no_regression(other, rec, significant=True, max_drop=0.1)


def test_row_keys_remain_for_results_without_ids_and_never_pair_with_id_keys():
    rng = np.random.default_rng(2)
    q, g = rng.normal(size=(20, 4)), rng.normal(size=(10, 4))
    relevance = {i: {int(rng.integers(10)): 1} for i in range(20)}
    rows = baseline_record(rc.evaluate(q, g, relevance=relevance, metrics=["map"]), "map")
    assert set(rows["units"]) == {f"query {i}" for i in range(20)}
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
    assert not set(rows["units"]) & set(ids["units"])  # "query 3" (row 3) is never "query id 3"


def test_a_beir_suite_result_carries_its_query_ids(tmp_path):
    rng = np.random.default_rng(0)
    docs, queries, qrels = beir_corpus(rng, n_queries=10)
    records = []
    for name, order in (("fwd", queries), ("bwd", queries[::-1])):
        root = tmp_path / name
        write_beir(root / "toy", docs, order, qrels)
        (root / "embedder.py").write_text(BEIR_EMBEDDER)
        (root / "rc_s.yaml").write_text(
            textwrap.dedent("""
            datasets:
              toy: {type: beir, path: toy}
            models:
              bow: {callable: embedder.py:embed}
            checks:
              - {metric: map, at_least: 0.01}
            """)
        )
        suite = load_suite(root / "rc_s.yaml")
        runner = SuiteRunner()
        with pytest.warns(RuntimeWarning, match="no judgement"):
            for case in suite.cases:
                runner.run(suite, case)
        (result,) = runner.evaluations._results.values()
        records.append(baseline_record(result, "map"))
    fwd, bwd = records
    assert set(fwd["units"]) == {f"query id q{i}" for i in range(8)}  # the 8 judged queries
    assert fwd["units"] == bwd["units"] and fwd["value"] == bwd["value"]
    json.dumps(fwd)  # plain data
