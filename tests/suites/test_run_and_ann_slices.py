"""Slices of YAML run datasets (``type: run``: a file of query ids and values per
dimension) and ann datasets (``type: ann``: a column of the queries' file, as a
retrieval dataset's), and ``ann_recall(..., slices=)``: each slice's values equal the
evaluation on its queries alone, the slice gates pass and fail, and every bad slice
file or value is a located error (issue 28).

Cost: about 1 s (24-query runs, a 40-query exact search)."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks import SuiteError, SuiteRunner, load_suite
from retrieval_checks.errors import InputError


def _data(tmp_path):
    """A TREC run over 24 queries (q0..q11 good, q12..q23 poor), their qrels, topic
    files, and an ann set of 40 queries whose neighbours miss more on half of them."""
    rng = np.random.default_rng(5)
    (tmp_path / "data").mkdir()
    run, qrels = [], []
    for q in range(24):
        docs = rng.permutation(40)[:20]
        rel = docs[:3] if q < 12 else docs[10:13]  # good queries rank their relevant first
        for r, d in enumerate(docs):
            run.append(f"q{q} Q0 d{d} {r + 1} {100 - r} tag")
        qrels += [f"q{q} 0 d{d} 1" for d in rel]
    (tmp_path / "data/r.run").write_text("\n".join(run) + "\n")
    (tmp_path / "data/q.qrels").write_text("\n".join(qrels) + "\n")
    lang = {f"q{q}": ("de" if q < 12 else "en") for q in range(24)}
    length = {f"q{q}": 3 + q for q in range(24)}
    (tmp_path / "data/lang.tsv").write_text("".join(f"{q}\t{v}\n" for q, v in lang.items()))
    (tmp_path / "data/topics.csv").write_text(
        "qid,lang,length\n" + "".join(f"{q},{lang[q]},{length[q]}\n" for q in lang)
    )
    (tmp_path / "data/topics.json").write_text(
        json.dumps({q: {"lang": lang[q], "length": length[q]} for q in lang})
    )
    qe = rng.normal(size=(40, 8)).astype(np.float32)
    ge = rng.normal(size=(80, 8)).astype(np.float32)
    s = qe @ ge.T / np.linalg.norm(qe, axis=1)[:, None] / np.linalg.norm(ge, axis=1)
    nb = np.argsort(-s, axis=1)[:, :10]
    nb[20:, 2:6] = np.argsort(s, axis=1)[20:, :4]  # the second half misses 4 of 10
    region = np.where(np.arange(40) < 20, "north", "south")
    np.savez(tmp_path / "data/queries.npz", embeddings=qe, region=region)
    np.savez(tmp_path / "data/gallery.npz", embeddings=ge)
    np.save(tmp_path / "data/nb.npy", nb)
    return lang, length, qe, ge, nb, region


def _write(tmp_path, text):
    p = tmp_path / "rc_suite.yaml"
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


def _run_case(suite, index=0, runner=None):
    runner = runner or SuiteRunner()
    runner.run(suite, suite.cases[index])
    return runner


def _result(runner):
    [result] = runner.evaluations._results.values()
    return result


RUN = """
datasets:
  bm25:
    type: run
    run: data/r.run
    qrels: data/q.qrels
    slices: {slices}
checks:
  - {{metric: map, dataset: bm25, slices: all, at_least: {at_least}}}
"""


@pytest.mark.parametrize(
    "slices, names",
    [
        ("{file: data/lang.tsv}", ["de", "en"]),
        ("{lang: {file: data/topics.csv, column: lang}}", ["lang=de", "lang=en"]),
        ("{lang: {file: data/topics.json, column: lang}}", ["lang=de", "lang=en"]),
        (
            "{length: {file: data/topics.csv, column: length, bins: [0, 15, 30]}}",
            ["length=[0, 15)", "length=[15, 30]"],
        ),
    ],
)
def test_run_dataset_slices_equal_evaluate_run_on_each_slice(tmp_path, slices, names):
    lang, *_ = _data(tmp_path)
    suite = load_suite(_write(tmp_path, RUN.format(slices=slices, at_least=0.01)))
    result = _result(_run_case(suite))
    assert list(result.slices) == names
    run, qrels = str(tmp_path / "data/r.run"), str(tmp_path / "data/q.qrels")
    direct = rc.evaluate_run(run, qrels, ["map"], slices={"lang": lang})
    first = {q: v for q, v in lang.items() if v == "de"}  # q0..q11 in every slicing above
    want = rc.evaluate_run(run, qrels, ["map"])
    sub = [i for i, q in enumerate(want.query_ids) if q in first]
    assert result.slices[names[0]]["map"] == pytest.approx(
        float(np.mean(want.per_query["map"][sub]))
    )
    assert result.slices[names[0]]["map"] == pytest.approx(direct.slices["lang=de"]["map"])


def test_run_dataset_slice_gate_fails_on_the_poor_slice(tmp_path):
    _data(tmp_path)
    suite = load_suite(_write(tmp_path, RUN.format(slices="{file: data/lang.tsv}", at_least=0.6)))
    with pytest.raises(AssertionError) as info:
        _run_case(suite)
    assert "en" in str(info.value)


@pytest.mark.parametrize(
    "slices, message",
    [
        ("lang", "a run dataset has no queries file to read column 'lang' from"),
        ("{file: data/r.run}", "read from a text file of query ids and values"),
    ],
)
def test_run_dataset_slices_need_a_file_of_ids(tmp_path, slices, message):
    _data(tmp_path)
    with pytest.raises(SuiteError) as info:
        load_suite(_write(tmp_path, RUN.format(slices=slices, at_least=0.1)))
    assert message in str(info.value) and "datasets.bm25.slices" in str(info.value)
    assert "rc_suite.yaml:6" in str(info.value)


@pytest.mark.parametrize(
    "content, name, column, message",
    [
        ("qid,lang\nq0,de\n", "t.csv", "lnag", "column 'lnag' is not in t.csv's header"),
        ("q0\tde\nq0\ten\n", "t.tsv", None, "t.tsv:2: query 'q0' is given twice"),
        ("q0\tde\tx\n", "t.tsv", None, "expected a query id and a value"),
        ("q0 1.5\nq1 nan\n", "t.txt", None, "query 'q1' has NaN metadata"),
        ('{"q0": "de", "q1": 1}', "t.json", None, "mixed types"),
        ('{"q0": ["de"]}', "t.json", None, "a slice value is a string, number or boolean"),
        ("x1\tde\nx2\ten\n", "t.tsv", None, "none of the 2 query ids of t.tsv"),
    ],
)
def test_bad_run_slice_files_are_located_errors(tmp_path, content, name, column, message):
    _data(tmp_path)
    (tmp_path / "data" / name).write_text(content)
    spec = f"{{file: data/{name}" + (f", column: {column}" if column else "") + "}"
    suite = load_suite(_write(tmp_path, RUN.format(slices=spec, at_least=0.1)))
    with pytest.raises(SuiteError) as info:
        _run_case(suite)
    text = str(info.value)
    assert message in text and "rc_suite.yaml:6" in text and "slices" in text


def test_ids_of_the_file_that_are_not_evaluated_are_named(tmp_path):
    _data(tmp_path)
    with open(tmp_path / "data/lang.tsv", "a") as f:
        f.write("q99\tfr\n")
    suite = load_suite(_write(tmp_path, RUN.format(slices="{file: data/lang.tsv}", at_least=0.01)))
    with pytest.warns(RuntimeWarning, match="1 query ids of lang.tsv are not evaluated.*'q99'"):
        result = _result(_run_case(suite))
    assert list(result.slices) == ["de", "en"]


ANN = """
datasets:
  idx:
    type: ann
    queries: data/queries.npz
    gallery: data/gallery.npz
    neighbors: data/nb.npy
    slices: {slices}
checks:
  - {{metric: ann_recall@10, dataset: idx, slices: {which}, at_least: 0.8}}
"""


def test_ann_recall_slices_equal_the_index_on_each_slice(tmp_path):
    *_, qe, ge, nb, region = _data(tmp_path)
    result = rc.ann_recall(qe, ge, nb, k=10, slices={"region": region})
    for name, rows in (("region=north", slice(0, 20)), ("region=south", slice(20, 40))):
        alone = rc.ann_recall(qe[rows], ge, nb[rows], k=10)["ann_recall@10"]
        assert result.slices[name]["ann_recall@10"] == pytest.approx(alone)
    assert result.slices["region=south"]["ann_recall@10"] <= 0.6
    ids = np.array([f"q{i}" for i in range(40)])
    gids = np.array([f"g{i}" for i in range(80)])
    by_id = rc.ann_recall(
        qe, ge, nb, k=10, query_ids=ids, gallery_ids=gids, slices={"q0": "a", "q1": "a"}
    )
    assert by_id.slices.missing == {"slice": 38} and by_id.slices["a"].n_queries == 2
    with pytest.raises(InputError, match="NaN"):
        rc.ann_recall(qe, ge, nb, k=10, slices=np.where(np.arange(40) < 3, np.nan, 1.0))
    with pytest.raises(InputError, match="mixed types"):
        rc.ann_recall(qe, ge, nb, k=10, slices=[1] * 39 + ["1"])


def test_ann_dataset_slices_gate_each_slice(tmp_path):
    _data(tmp_path)
    suite = load_suite(_write(tmp_path, ANN.format(slices="region", which="[north]")))
    result = _result(_run_case(suite))
    assert list(result.slices) == ["north", "south"]
    suite = load_suite(_write(tmp_path, ANN.format(slices="region", which="worst")))
    with pytest.raises(AssertionError) as info:
        _run_case(suite)
    assert "south" in str(info.value)


def test_ann_dataset_unknown_slice_column_is_located(tmp_path):
    _data(tmp_path)
    suite = load_suite(_write(tmp_path, ANN.format(slices="regoin", which="all")))
    with pytest.raises(SuiteError) as info:
        _run_case(suite)
    assert "column 'regoin' is not in queries.npz" in str(info.value)
    assert "Did you mean 'region'" in str(info.value) and "rc_suite.yaml:7" in str(info.value)
