"""YAML suites on precomputed rankings (``type: run``: a TREC run and its qrels) and on
an approximate index's neighbours (``type: ann``): the values are evaluate_run's and
ann_recall's, the gates pass and fail, and every bad field is a located schema error."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks import SuiteError, SuiteRunner, load_suite

pytest_plugins = ["pytester"]

EMBEDDER = """
import numpy as np

def embed(x):
    return np.asarray(x, dtype=np.float64)[:, ::-1] * 2.0
"""


def _data(tmp_path):
    """A TREC run and qrels over 6 queries (ties included), exact embeddings and a noisy
    neighbour table (n_q x 12, a few -1)."""
    rng = np.random.default_rng(3)
    (tmp_path / "data").mkdir()
    run, qrels = [], []
    for q in range(6):
        for r, d in enumerate(
            rng.permutation(30)[:15]
        ):  # pairs of documents tie, never across rank 10
            run.append(f"q{q} Q0 d{d} {r + 1} {8 - r // 2}.5 tag")
        for d in rng.permutation(30)[:5]:
            qrels.append(f"q{q} 0 d{d} {int(rng.integers(0, 3))}")
    (tmp_path / "data/r.run").write_text("\n".join(run) + "\n")
    (tmp_path / "data/q.qrels").write_text("\n".join(qrels) + "\n")
    qe = rng.normal(size=(20, 8)).astype(np.float32)
    ge = rng.normal(size=(60, 8)).astype(np.float32)
    np.savez(tmp_path / "data/queries.npz", embeddings=qe, inputs=qe)
    np.savez(tmp_path / "data/gallery.npz", embeddings=ge, inputs=ge)
    s = qe @ ge.T / np.linalg.norm(qe, axis=1)[:, None] / np.linalg.norm(ge, axis=1)
    nb = np.argsort(-s, axis=1)[:, :12]
    nb[:, 3] = np.argsort(s, axis=1)[:, 0]  # the worst match in 4th place: a miss for every query
    nb[:4, 8] = -1
    np.save(tmp_path / "data/nb.npy", nb)
    np.savez(tmp_path / "data/nb.npz", idx=nb)
    (tmp_path / "embedder.py").write_text(EMBEDDER)
    return qe, ge, nb


def _write(tmp_path, text, name="rc_suite.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


SUITE = """
datasets:
  bm25: {type: run, run: data/r.run, qrels: data/q.qrels, relevance_level: 2, depth: 10}
  idx: {type: ann, queries: data/queries.npz, gallery: data/gallery.npz, neighbors: data/nb.npy, k: 12}
  idx2: {type: ann, queries: data/queries.npz, gallery: data/gallery.npz, neighbors: {file: data/nb.npz, neighbors: idx}}
checks:
  - {metric: ndcg@10, dataset: bm25, at_least: 0.01}
  - {metric: map, dataset: bm25, at_least: 0.01, ties: average}
  - {metric: mrr, dataset: bm25, model: run, at_least: 0.01, empty_queries: zero}
  - {metric: ann_recall@10, datasets: [idx, idx2], at_least: 0.5}
  - {metric: ann_recall@12, dataset: idx, at_least: 0.5, on: interval}
"""


def _results(runner):
    return {
        (k[1], k[2], tuple(k[4]) if len(k) > 4 else None): v
        for k, v in runner.evaluations._results.items()
    }


def test_suite_values_equal_direct_evaluate_run_and_ann_recall(tmp_path):
    qe, ge, nb = _data(tmp_path)
    suite = load_suite(_write(tmp_path, SUITE))
    assert [c.name for c in suite.cases] == [
        "ndcg@10_at_least[run-bm25]",
        "map_at_least[run-bm25]",
        "mrr_at_least[run-bm25]",
        "ann_recall@10_at_least[precomputed-idx]",
        "ann_recall@10_at_least[precomputed-idx2]",
        "ann_recall@12_ci_at_least[precomputed-idx]",
    ]
    runner = SuiteRunner()
    for case in suite.cases:
        runner.run(suite, case)
    run, qrels = str(tmp_path / "data/r.run"), str(tmp_path / "data/q.qrels")
    got = {
        (k[1], k[2], dict(k[3]).get("ties"), dict(k[3]).get("empty_queries"), k[4:]): v
        for k, v in runner.evaluations._results.items()
    }
    pess = got[("run", "bm25", "pessimistic", "skip", ())]
    want = rc.evaluate_run(run, qrels, ["ndcg@10"], relevance_level=2, k=10)
    assert pess["ndcg@10"] == want["ndcg@10"]
    assert (
        got[("run", "bm25", "average", "skip", ())]["map"]
        == rc.evaluate_run(run, qrels, ["map"], ties="average", relevance_level=2, k=10)["map"]
    )
    zero = rc.evaluate_run(run, qrels, ["mrr"], empty_queries="zero", relevance_level=2, k=10)
    assert got[("run", "bm25", "pessimistic", "zero", ())]["mrr"] == zero["mrr"]
    for k in (10, 12):
        want = rc.ann_recall(qe, ge, nb, k=k)[f"ann_recall@{k}"]
        assert (
            got[("precomputed", "idx", None, None, ((f"ann_recall@{k}",),))][f"ann_recall@{k}"]
            == want
        )
    assert (
        got[("precomputed", "idx2", None, None, (("ann_recall@10",),))]["ann_recall@10"]
        == rc.ann_recall(qe, ge, nb, k=10)["ann_recall@10"]
    )
    assert runner.passes == 6


def test_ann_embeddings_come_from_the_model(tmp_path):
    qe, ge, nb = _data(tmp_path)
    p = _write(
        tmp_path,
        """
        datasets:
          idx: {type: ann, queries: data/queries.npz, gallery: data/gallery.npz, neighbors: data/nb.npy, k: 12}
        models:
          flip: {callable: embedder.py:embed}
        checks:
          - {metric: ann_recall@5, at_least: 0.1, similarity: dot}
        """,
    )
    suite = load_suite(p)
    runner = SuiteRunner()
    runner.run(suite, suite.cases[0])
    (value,) = [v["ann_recall@5"] for v in runner.evaluations._results.values()]
    assert (
        value
        == rc.ann_recall(qe[:, ::-1] * 2.0, ge[:, ::-1] * 2.0, nb, k=5, similarity="dot")[
            "ann_recall@5"
        ]
    )


def test_gates_fail_with_model_dataset_and_line(tmp_path):
    _data(tmp_path)
    p = _write(
        tmp_path,
        """
        datasets:
          bm25: {type: run, run: data/r.run, qrels: data/q.qrels}
          idx: {type: ann, queries: data/queries.npz, gallery: data/gallery.npz, neighbors: data/nb.npy}
        checks:
          - {metric: ndcg@10, at_least: 0.99}
          - {metric: ann_recall@10, at_least: 0.95}
          - {metric: ann_recall@10, at_most: 0.95, id: below}
        """,
    )
    suite = load_suite(p)
    runner = SuiteRunner()
    with pytest.raises(AssertionError) as info:
        runner.run(suite, suite.cases[0])
    assert str(info.value).startswith(
        "model 'run' on dataset 'bm25' [suite rc_suite, rc_suite.yaml:5]"
    )
    assert "ndcg@10" in str(info.value)
    with pytest.raises(AssertionError) as info:
        runner.run(suite, suite.cases[1])
    assert "model 'precomputed' on dataset 'idx'" in str(info.value) and "rc_suite.yaml:6" in str(
        info.value
    )
    runner.run(suite, suite.cases[2])  # every query misses its 4th neighbour: at most 0.9


def test_through_pytest(pytester):
    _data(pytester.path)
    _write(
        pytester.path,
        SUITE.replace("at_least: 0.01, ties: average", "at_least: 0.999, ties: average"),
        name="rc_runs.yaml",
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q", "rc_runs.yaml")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*map_at_least[[]run-bm25[]]*"])


def test_run_and_ann_file_errors_at_run_time_name_the_dataset(tmp_path):
    _data(tmp_path)
    (tmp_path / "data/bad.run").write_text("q1 Q0 d1 1\n")
    np.save(tmp_path / "data/float.npy", np.zeros((20, 12)))
    p = _write(
        tmp_path,
        """
        datasets:
          bm25: {type: run, run: data/bad.run, qrels: data/q.qrels}
          idx: {type: ann, queries: data/queries.npz, gallery: data/gallery.npz, neighbors: data/float.npy}
        checks:
          - {metric: map, at_least: 0.1}
          - {metric: ann_recall@10, at_least: 0.1}
        """,
    )
    suite = load_suite(p)
    with pytest.raises(SuiteError) as info:
        SuiteRunner().run(suite, suite.cases[0])
    assert info.value.line == 2 and "bad.run" in str(info.value)
    with pytest.raises(SuiteError) as info:
        SuiteRunner().run(suite, suite.cases[1])
    assert (
        info.value.line == 3
        and info.value.field == "datasets.idx.neighbors"
        and "dtype" in str(info.value)
    )


RUN = "  bm25: {type: run, run: data/r.run, qrels: data/q.qrels}\n"
ANN = "  idx: {type: ann, queries: data/queries.npz, gallery: data/gallery.npz, neighbors: data/nb.npy, k: 12}\n"
M = "models:\n  m: {callable: embedder.py:embed}\n"
BAD = [
    (
        "datasets:\n  bm25: {type: run, run: data/r.run, qrel: data/q.qrels}\nchecks:\n  - {metric: map, at_least: 0.1}\n",
        2,
        "datasets.bm25.qrel",
        ["unknown field", "qrels"],
    ),
    (
        "datasets:\n  bm25: {type: run, run: data/r.run}\nchecks:\n  - {metric: map, at_least: 0.1}\n",
        2,
        "datasets.bm25",
        ["missing required field 'qrels'"],
    ),
    (
        "datasets:\n  bm25: {type: run, run: data/nope.run, qrels: data/q.qrels}\nchecks:\n  - {metric: map, at_least: 0.1}\n",
        2,
        "datasets.bm25.run",
        ["nope.run", "does not exist"],
    ),
    (
        "datasets:\n  bm25:\n    type: run\n    run: data/r.run\n    qrels: data/q.qrels\n    relevance_level: 0\n"
        "checks:\n  - {metric: map, at_least: 0.1}\n",
        6,
        "datasets.bm25.relevance_level",
        ["integer >= 1"],
    ),
    (
        "datasets:\n  bm25:\n    type: run\n    run: data/r.run\n    qrels: data/q.qrels\n    depth: ten\n"
        "checks:\n  - {metric: map, at_least: 0.1}\n",
        6,
        "datasets.bm25.depth",
        ["integer >= 1", "ten"],
    ),
    (
        "datasets:\n  bm25: {type: run, run: 3, qrels: data/q.qrels}\nchecks:\n  - {metric: map, at_least: 0.1}\n",
        2,
        "datasets.bm25.run",
        ["expected a file path"],
    ),
    (
        "datasets:\n  bm25: {type: runs, run: data/r.run}\nchecks:\n  - {metric: map, at_least: 0.1}\n",
        2,
        "datasets.bm25.type",
        ["run"],
    ),
    (
        "datasets:\n"
        + RUN
        + "checks:\n  - {metric: pair_f1@t=0.5, dataset: bm25, at_least: 0.1}\n",
        4,
        "checks[0]",
        ["'bm25'", "cannot be computed from a run", "pair metrics"],
    ),
    (
        "datasets:\n"
        + RUN
        + "checks:\n  - {metric: discriminant_ratio, dataset: bm25, at_least: 0.1}\n",
        4,
        "checks[0]",
        ["cannot be computed from a run", "embedding set"],
    ),
    (
        "datasets:\n"
        + RUN
        + "checks:\n  - {metric: grouped_recall@1, dataset: bm25, at_least: 0.1}\n",
        4,
        "checks[0]",
        ["cannot be computed from a run", "grouped"],
    ),
    (
        "datasets:\n"
        + RUN
        + "checks:\n  - {metric: ann_recall@10, dataset: bm25, at_least: 0.1}\n",
        4,
        "checks[0]",
        ["ann_recall@10", "approximate index"],
    ),
    (
        "datasets:\n"
        + RUN
        + M
        + "checks:\n  - {metric: map, dataset: bm25, model: m, at_least: 0.1}\n",
        6,
        "checks[0].model",
        ["run", "no model", "'m'"],
    ),
    (
        "datasets:\n"
        + RUN
        + ANN
        + M
        + "checks:\n  - {metric: map, dataset: bm25, models: [m, run], at_least: 0.1}\n",
        7,
        "checks[0].models",
        ["no model", "'m'"],
    ),
    (
        "datasets:\n"
        + RUN
        + ANN
        + M
        + "checks:\n  - {metric: ann_recall@5, dataset: idx, model: run, at_least: 0.1}\n",
        7,
        "checks[0].model",
        ["model of run datasets"],
    ),
    (
        "datasets:\n"
        + RUN
        + "checks:\n  - {metric: map, dataset: bm25, at_least: 0.1, similarity: dot}\n",
        4,
        "checks[0].similarity",
        ["does not apply to run"],
    ),
    (
        "datasets:\n"
        + RUN
        + "models:\n  run: {callable: embedder.py:embed}\nchecks:\n  - {metric: map, at_least: 0.1}\n",
        4,
        "models",
        ["'run'", "rename"],
    ),
    (
        "datasets:\n" + RUN + M + "checks:\n  - {metric: map, dataset: bm25, compare: m}\n",
        6,
        "checks[0].compare",
        ["no model"],
    ),
    (
        "datasets:\n"
        + RUN
        + "  r: {queries: data/queries.npz}\nchecks:\n  - {metric: map, datasets: [bm25, r], at_least: 0.1}\n",
        5,
        "checks[0]",
        ["not both"],
    ),
    (
        "datasets:\n" + ANN + "checks:\n  - {metric: map, dataset: idx, at_least: 0.1}\n",
        4,
        "checks[0]",
        ["not measured on ann datasets", "ann_recall@K"],
    ),
    (
        "datasets:\n" + ANN + "checks:\n  - {metric: ann_recall@20, dataset: idx, at_least: 0.1}\n",
        4,
        "checks[0]",
        ["top 20", "k: 12"],
    ),
    (
        "datasets:\n  r: {queries: data/queries.npz}\nchecks:\n  - {metric: ann_recall@5, dataset: r, at_least: 0.1}\n",
        4,
        "checks[0]",
        ["measured on ann datasets", "retrieval"],
    ),
    (
        "datasets:\n  idx: {type: ann, queries: data/queries.npz, neighbors: data/nb.npy, k: 13}\n"
        "checks:\n  - {metric: ann_recall@5, at_least: 0.1}\n",
        2,
        "datasets.idx.k",
        ["12 neighbour columns", "k=13"],
    ),
    (
        "datasets:\n  idx: {type: ann, queries: data/queries.npz, neighbors: data/nb.npy, k: 0}\n"
        "checks:\n  - {metric: ann_recall@5, at_least: 0.1}\n",
        2,
        "datasets.idx.k",
        ["integer >= 1"],
    ),
    (
        "datasets:\n  idx: {type: ann, queries: data/queries.npz}\n"
        "checks:\n  - {metric: ann_recall@5, at_least: 0.1}\n",
        2,
        "datasets.idx",
        ["missing required field 'neighbors'"],
    ),
    (
        "datasets:\n  idx: {type: ann, queries: data/queries.npz, neighbours: data/nb.npy}\n"
        "checks:\n  - {metric: ann_recall@5, at_least: 0.1}\n",
        2,
        "datasets.idx.neighbours",
        ["neighbors"],
    ),
    (
        "datasets:\n  idx:\n    type: ann\n    queries: data/queries.npz\n    neighbors: {file: data/nb.npz, labels: x}\n"
        "checks:\n  - {metric: ann_recall@5, at_least: 0.1}\n",
        5,
        "datasets.idx.neighbors.labels",
        ["unknown field"],
    ),
    (
        "datasets:\n  idx:\n    type: ann\n    queries: data/queries.npz\n    neighbors: data/none.npy\n"
        "checks:\n  - {metric: ann_recall@5, at_least: 0.1}\n",
        5,
        "datasets.idx.neighbors",
        ["none.npy"],
    ),
    (
        "datasets:\n" + ANN + "checks:\n  - {metric: ann_recall@5, at_least: 0.1, ties: average}\n",
        4,
        "checks[0].ties",
        ["does not apply to ann"],
    ),
]


@pytest.mark.parametrize("text, line, field, words", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_run_and_ann_datasets_name_file_line_and_field(tmp_path, text, line, field, words):
    _data(tmp_path)
    p = _write(tmp_path, text)
    with pytest.raises(SuiteError) as info:
        load_suite(p)
    message = str(info.value)
    assert info.value.line == line, message
    assert info.value.field == field, message
    assert message.startswith(f"{p}:{line}: "), message
    for w in words:
        assert w in message, message


def test_run_files_with_a_bom_gate_as_without_and_bad_text_names_file_and_line(tmp_path):
    """The suite reads run and qrels files by the library's text rules: a Windows editor's
    byte-order mark changes nothing; Latin-1 text or a grade written 1_0 is a SuiteError
    naming the dataset, the file and its line."""
    _data(tmp_path)
    text = "datasets:\n  bm25: {type: run, run: data/%s, qrels: data/%s}\nchecks:\n  - {metric: map, at_least: 0.01}\n"
    for name in ("r.run", "q.qrels"):
        (tmp_path / "data" / f"bom_{name}").write_text(
            (tmp_path / "data" / name).read_text(), encoding="utf-8-sig"
        )
    values = []
    for run, qrels in (("r.run", "q.qrels"), ("bom_r.run", "bom_q.qrels")):
        suite = load_suite(_write(tmp_path, text % (run, qrels)))
        runner = SuiteRunner()
        runner.run(suite, suite.cases[0])
        values.append([v["map"] for v in runner.evaluations._results.values()])
    assert values[0] == values[1] and len(values[0]) == 1
    (tmp_path / "data/latin.run").write_bytes(
        (tmp_path / "data/r.run").read_bytes() + b"q9 Q0 caf\xe9 1 1.0 t\n"
    )
    (tmp_path / "data/sep.qrels").write_text(
        (tmp_path / "data/q.qrels").read_text() + "q9 0 d1 1_0\n"
    )
    for run, qrels, where in (
        ("latin.run", "q.qrels", r"latin.run:91: .*not UTF-8"),
        ("r.run", "sep.qrels", r"sep.qrels:31: grade '1_0' is not a whole number"),
    ):
        suite = load_suite(_write(tmp_path, text % (run, qrels)))
        with pytest.raises(SuiteError, match=where) as info:
            SuiteRunner().run(suite, suite.cases[0])
        assert info.value.line == 2


def test_run_datasets_take_trec_evals_query_set_and_beirs_identical_ids(tmp_path):
    """``queries: run`` (trec_eval's default), ``ignore_identical_ids`` and issue 31's
    measures in a suite equal evaluate_run's; a bad value is a located schema error."""
    _data(tmp_path)
    (tmp_path / "data/q.qrels").write_text(
        (tmp_path / "data/q.qrels").read_text() + "q9 0 d1 1\nq0 0 q0 1\n"
    )
    suite = load_suite(
        _write(
            tmp_path,
            """
            datasets:
              trec: {type: run, run: data/r.run, qrels: data/q.qrels, queries: run, ignore_identical_ids: true}
            checks:
              - {metric: map, dataset: trec, at_least: 0.01}
              - {metric: bpref, dataset: trec, at_least: 0.01}
              - {metric: mrr@10, dataset: trec, at_least: 0.01}
              - {metric: map, dataset: trec, at_least: 0.01, ties: docid}
            """,
        )
    )
    runner = SuiteRunner()
    for case in suite.cases:
        runner.run(suite, case)
    by_ties = {v.config["ties"]: v for v in runner.evaluations._results.values()}
    result = by_ties["pessimistic"]
    run, qrels = str(tmp_path / "data/r.run"), str(tmp_path / "data/q.qrels")
    want = rc.evaluate_run(
        run, qrels, ["map", "bpref", "mrr@10"], queries="run", ignore_identical_ids=True
    )
    for m in ("map", "bpref", "mrr@10"):
        assert result[m] == want[m]
    docid = rc.evaluate_run(
        run, qrels, ["map"], queries="run", ignore_identical_ids=True, ties="docid"
    )
    assert by_ties["docid"]["map"] == docid["map"]  # trec_eval's order, from the suite
    assert result.config["queries"] == "run" and "q9" not in [
        q
        for i, q in enumerate(result.query_ids)
        if i not in set(result.skipped_queries) | set(result.outside_queries)
    ]
    bad = _write(
        tmp_path,
        """
        datasets:
          trec: {type: run, run: data/r.run, qrels: data/q.qrels, queries: trec}
        checks:
          - {metric: map, dataset: trec, at_least: 0.01}
        """,
        name="bad.yaml",
    )
    with pytest.raises(SuiteError, match="expected one of 'both', 'run'"):
        load_suite(bad)


def test_judgement_measures_are_refused_on_ann_datasets_at_load(tmp_path):
    """bpref is measured on run and retrieval datasets (labels judge every gallery item;
    tests/metrics/test_bpref_rbp_evaluate.py), not on an ann dataset's neighbours."""
    _data(tmp_path)
    bad = _write(
        tmp_path,
        """
        datasets:
          nn: {type: ann, queries: data/queries.npz, gallery: data/gallery.npz, neighbors: data/nb.npy, k: 12}
        checks:
          - {metric: bpref, dataset: nn, at_least: 0.1}
        """,
    )
    with pytest.raises(SuiteError, match="bpref is not measured on ann datasets"):
        load_suite(bad)
