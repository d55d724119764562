"""bpref and the RBP residual in ``rc.evaluate`` (issue 31): labels (or ``relevance=``)
judge every gallery item, so bpref's judged non-relevant items are the ranked items that
are not relevant, and RBP's residual is 0 (nothing is unjudged, nothing lies below the
ranking). Checked against an oracle that enumerates every ordering of tied items
(``average`` is their mean, ``pessimistic`` / ``optimistic`` their extremes), against
``evaluate_run`` on the same scores with qrels that judge every document, and through a
YAML suite and a baseline. Cost: about 2 s (tiny inputs) plus the engine's one-time start."""

from __future__ import annotations

import itertools
import textwrap
from fractions import Fraction

import numpy as np
import pytest

import retrieval_checks as rc

POLICIES = ("pessimistic", "optimistic", "average")


def orderings(flags, scores):
    """Relevance flags in rank order, once per distinct ordering of the tied items."""
    blocks = []
    for v in sorted(set(scores), reverse=True):
        size = sum(x == v for x in scores)
        k = sum(f for f, x in zip(flags, scores) if x == v)
        blocks.append(
            [[i in c for i in range(size)] for c in itertools.combinations(range(size), k)]
        )
    for choice in itertools.product(*blocks):
        yield [f for block in choice for f in block]


def bpref_of(ranked, R):
    """trec_eval's bpref of a ranking whose every item is judged (exact fraction)."""
    N = sum(not f for f in ranked)
    nonrel, total = 0, Fraction(0)
    for f in ranked:
        if not f:
            nonrel += 1
        elif nonrel:
            total += 1 - Fraction(min(nonrel, R), min(N, R))
        else:
            total += 1
    return total / R


def oracle(scores, relevant, R):
    """bpref per policy over every ordering of the tied items of one query."""
    values = [bpref_of(o, R) for o in orderings(relevant, scores)]
    return {
        "pessimistic": min(values),
        "optimistic": max(values),
        "average": sum(values, Fraction(0)) / len(values),
    }


def _tie_heavy(seed, n_q, n_g):
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 3, size=(n_q, 2)).astype(np.float32)
    g = rng.integers(0, 3, size=(n_g, 2)).astype(np.float32)
    return q, g, rng


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bpref_under_every_tie_policy_equals_the_enumeration(seed):
    q, g, rng = _tie_heavy(seed, 6, 9)
    ql = rng.integers(0, 3, size=6)
    gl = rng.integers(0, 3, size=9)
    ql[0] = 7  # a query without a relevant item: skipped, as every metric
    S = q @ g.T
    for ties in POLICIES:
        res = rc.evaluate(
            q,
            g,
            query_labels=ql,
            gallery_labels=gl,
            metrics=["bpref", "rbp_residual@0.8"],
            ties=ties,
            similarity="dot",
            empty_queries="skip",
        )
        want = []
        for i in range(6):
            rel = [bool(x) for x in gl == ql[i]]
            if not any(rel):
                assert np.isnan(res.per_query["bpref"][i])
                continue
            w = oracle(list(S[i]), rel, sum(rel))
            assert res.per_query["bpref"][i] == pytest.approx(float(w[ties]), abs=1e-12)
            want.append(w)
        n = len(want)
        assert res["bpref"] == pytest.approx(float(sum(w[ties] for w in want) / n), abs=1e-12)
        # the extremes over every ordering: each query's worst and best, averaged
        lo = float(sum(w["pessimistic"] for w in want) / n)
        hi = float(sum(w["optimistic"] for w in want) / n)
        assert res.tie_range("bpref") == pytest.approx((lo, hi), abs=1e-12)
        assert res.n_skipped == 6 - n
        # every gallery item is judged and ranked: nothing left for RBP to gain
        assert res["rbp_residual@0.8"] == 0.0
        residual = res.per_query["rbp_residual@0.8"]
        assert np.array_equal(np.isnan(residual), np.isnan(res.per_query["bpref"]))
        assert np.all(residual[~np.isnan(residual)] == 0.0)


def test_bpref_with_graded_relevance_a_level_and_identical_ids():
    """relevance_level=2: grade 1 is a judged non-relevant item; ignore_identical_ids: the
    query's own document is relevant (in R) but never ranked, so it adds no term."""
    q, g, rng = _tie_heavy(5, 4, 8)
    grades = rng.integers(0, 4, size=(4, 8))
    grades[0, 0] = 3  # query 0's own document (id d0), relevant
    relevance = {i: {j: int(grades[i, j]) for j in range(8) if grades[i, j]} for i in range(4)}
    ids_q = ["d0", "x1", "x2", "x3"]
    ids_g = [f"d{j}" for j in range(8)]
    S = q @ g.T
    for ties in POLICIES:
        res = rc.evaluate(
            q,
            g,
            relevance=relevance,
            relevance_level=2,
            query_ids=ids_q,
            gallery_ids=ids_g,
            ignore_identical_ids=True,
            metrics=["bpref"],
            ties=ties,
            similarity="dot",
            empty_queries="zero",
        )
        for i in range(4):
            keep = [j for j in range(8) if ids_g[j] != ids_q[i]]
            rel = [bool(grades[i, j] >= 2) for j in keep]
            R = int((grades[i] >= 2).sum())
            if R == 0:
                assert res.per_query["bpref"][i] == 0.0
                continue
            w = oracle([S[i, j] for j in keep], rel, R)
            assert res.per_query["bpref"][i] == pytest.approx(float(w[ties]), abs=1e-12), (
                ties,
                i,
            )


@pytest.mark.parametrize("ties", POLICIES)
def test_bpref_equals_evaluate_run_with_qrels_that_judge_every_document(ties):
    q, g, rng = _tie_heavy(11, 5, 10)
    ql, gl = rng.integers(0, 2, size=5), rng.integers(0, 2, size=10)
    S = q @ g.T
    run = {f"q{i}": {f"d{j}": float(S[i, j]) for j in range(10)} for i in range(5)}
    qrels = {f"q{i}": {f"d{j}": int(gl[j] == ql[i]) for j in range(10)} for i in range(5)}
    got = rc.evaluate(
        q, g, query_labels=ql, gallery_labels=gl, metrics=["bpref"], ties=ties, similarity="dot"
    )
    want = rc.evaluate_run(run, qrels, ["bpref"], ties=ties)
    assert got["bpref"] == pytest.approx(want["bpref"], abs=1e-12)
    assert got.tie_range("bpref") == pytest.approx(want.tie_range("bpref"), abs=1e-12)


@pytest.fixture
def _unheard():
    """This file's gates (one fails on purpose) are not the session's gates."""
    from shared_setup import unheard

    with unheard():
        yield


def test_bpref_and_rbp_residual_in_a_suite_and_a_baseline(tmp_path, _unheard):
    """A YAML check on a retrieval dataset (labels) gets evaluate's bpref and a residual
    of 0; a baseline records bpref and gates a drop; a beir dataset refuses both at load
    (its qrels judge a few documents of the corpus, the rest would count as judged)."""
    from shared_setup import write_beir

    from retrieval_checks import SuiteError, SuiteRunner, load_suite
    from retrieval_checks.gates import assert_no_regression, baseline_record

    rng = np.random.default_rng(3)
    y = np.arange(36) % 6
    centers = rng.normal(size=(6, 4))
    x = (centers[y] + 0.8 * rng.normal(size=(36, 4))).astype(np.float32)
    np.savez(tmp_path / "emb.npz", embeddings=x, labels=y)
    (tmp_path / "suite.yaml").write_text(
        textwrap.dedent(
            """
            datasets:
              emb: {type: retrieval, queries: emb.npz}
            checks:
              - {metric: bpref, dataset: emb, at_least: 0.01}
              - {metric: rbp_residual@0.8, dataset: emb, at_most: 0.0}
            """
        )
    )
    suite = load_suite(tmp_path / "suite.yaml")
    runner = SuiteRunner()
    for case in suite.cases:
        runner.run(suite, case)
    (got,) = runner.evaluations._results.values()
    want = rc.evaluate(x, query_labels=y, metrics=["bpref", "rbp_residual@0.8"])
    assert 0 < want["bpref"] < 1
    assert got["bpref"] == want["bpref"] and got["rbp_residual@0.8"] == 0.0
    rec = baseline_record(want, "bpref")
    assert_no_regression(rec, rec, max_drop=0.0)
    noisy = (centers[y] + 3.0 * rng.normal(size=(36, 4))).astype(np.float32)
    worse = rc.evaluate(noisy, query_labels=y, metrics=["bpref"])
    assert worse["bpref"] < want["bpref"]
    with pytest.raises(AssertionError, match="bpref"):
        assert_no_regression(baseline_record(worse, "bpref"), rec, max_drop=0.0)

    write_beir(
        tmp_path / "toy",
        [{"_id": "d0", "text": "a"}, {"_id": "d1", "text": "b"}],
        [{"_id": "q0", "text": "a"}],
        {"q0": {"d0": 1}},
    )
    for metric in ("bpref", "rbp_residual@0.8"):
        (tmp_path / "beir.yaml").write_text(
            "datasets:\n  toy: {type: beir, path: toy}\nmodels:\n  m: {callable: e.py:f}\n"
            f"checks:\n  - {{metric: {metric}, dataset: toy, at_most: 0.5}}\n"
        )
        (tmp_path / "e.py").write_text("def f(x):\n    return x\n")
        with pytest.raises(SuiteError, match="qrels that judge a few documents"):
            load_suite(tmp_path / "beir.yaml")
