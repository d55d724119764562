"""The slice sweep of issue 28: every input format carries slice metadata. A run
dataset's query-metadata file may be JSON lines (BEIR's ``queries.jsonl`` form: one
object per query, its id under ``_id`` / ``qid`` / ``query_id`` / ``id``), as it may be
.tsv / .txt / .csv / .json; bad lines are located errors.

Cost: about 1 s (24-query runs).
"""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from retrieval_checks import SuiteError, SuiteRunner, load_suite

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


def _data(tmp_path):
    """A TREC run over 24 queries and their qrels; each query's language and length."""
    rng = np.random.default_rng(5)
    (tmp_path / "data").mkdir()
    run, qrels = [], []
    for q in range(24):
        docs = rng.permutation(40)[:20]
        rel = docs[:3] if q < 12 else docs[10:13]
        run += [f"q{q} Q0 d{d} {r + 1} {100 - r} tag" for r, d in enumerate(docs)]
        qrels += [f"q{q} 0 d{d} 1" for d in rel]
    (tmp_path / "data/r.run").write_text("\n".join(run) + "\n")
    (tmp_path / "data/q.qrels").write_text("\n".join(qrels) + "\n")
    lang = {f"q{q}": ("de" if q < 12 else "en") for q in range(24)}
    return lang, {f"q{q}": 3 + q for q in range(24)}


def _write(tmp_path, text):
    p = tmp_path / "rc_suite.yaml"
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


def _run_case(suite):
    runner = SuiteRunner()
    runner.run(suite, suite.cases[0])
    return runner


def _result(runner):
    [result] = runner.evaluations._results.values()
    return result


def _jsonl(tmp_path, rows) -> None:
    (tmp_path / "data/topics.jsonl").write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    )


@pytest.mark.parametrize("id_key", ["_id", "qid", "query_id", "id"])
def test_a_run_dataset_reads_slices_from_json_lines(tmp_path, id_key):
    lang, length = _data(tmp_path)
    rows = [{id_key: q, "metadata": {"lang": v}, "len": length[q]} for q, v in lang.items()]
    _jsonl(tmp_path, rows[:5] + [""] + rows[5:])  # a blank line is skipped
    slices = "{lang: {file: data/topics.jsonl, column: metadata.lang}}"
    suite = load_suite(_write(tmp_path, RUN.format(slices=slices, at_least=0.01)))
    result = _result(_run_case(suite))
    assert list(result.slices) == ["lang=de", "lang=en"]
    assert result.slices["lang=de"].n_queries == 12


@pytest.mark.parametrize(
    "rows, column, message",
    [
        ([{"_id": "q0", "lang": "de"}], None, "name the field with column:"),
        (['{"_id": "q0", "lang": "de"'], "lang", "topics.jsonl:1: not a JSON object"),
        ([{"lang": "de"}], "lang", "topics.jsonl:1: no query id"),
        ([{"_id": "q0", "lang": "de"}, {"_id": "q0", "lang": "en"}], "lang", "given twice"),
        ([{"_id": "q0", "lang": ["de"]}], "lang", "a slice value is a string"),
    ],
)
def test_bad_json_lines_are_located_errors(tmp_path, rows, column, message):
    _data(tmp_path)
    _jsonl(tmp_path, rows)
    col = "" if column is None else f", column: {column}"
    path = _write(
        tmp_path, RUN.format(slices=f"{{lang: {{file: data/topics.jsonl{col}}}}}", at_least=0.01)
    )
    with pytest.raises(SuiteError) as info:  # at load (no column:), else when read
        _run_case(load_suite(path))
    assert message in str(info.value) and "rc_suite.yaml:6" in str(info.value), str(info.value)


# ------------------------------------------------------- parquet nulls are "no slice value"
def _parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(6), 4)
    e = (rng.normal(size=(6, 8))[y] + 0.3 * rng.normal(size=(24, 8))).astype(np.float32)
    lang = ["de" if i % 2 else "en" for i in range(24)]
    lang[3] = None  # a query whose language is unknown
    cat = [int(v) for v in y % 2]
    cat[5] = None
    table = pa.table(
        {
            "embeddings": pa.array(list(e)),
            "labels": pa.array(y),
            "lang": pa.array(lang),
            "cat": pa.array(cat, type=pa.int64()),
            "bad_labels": pa.array([None] + list(y[1:]), type=pa.int64()),
        }
    )
    (tmp_path / "data").mkdir(exist_ok=True)
    pq.write_table(table, tmp_path / "data/set.parquet")
    return tmp_path / "data/set.parquet"


def test_a_parquet_null_is_a_query_without_a_slice_value(tmp_path):
    import retrieval_checks as rc

    s = rc.load_embeddings(_parquet(tmp_path), columns=["lang", "cat"])
    assert s.columns["lang"][3] is None and s.columns["cat"][5] is None
    r = rc.evaluate(s.embeddings, query_labels=s.labels, metrics=["map"], slices=s.columns)
    assert r.slices.missing == {"lang": 1, "cat": 1}  # counted, not dropped
    assert sorted(r.slices) == ["cat=0", "cat=1", "lang=de", "lang=en"]
    assert r.slices["lang=de"].n_queries == 11
    # labels and embeddings still refuse a null: a row without a label is not a query
    with pytest.raises(rc.InputError, match="null"):
        rc.load_embeddings(_parquet(tmp_path), labels="bad_labels")


def test_a_suite_reads_parquet_nulls_as_missing_slice_values(tmp_path):
    _parquet(tmp_path)
    suite = load_suite(
        _write(
            tmp_path,
            """
            datasets:
              set: {queries: data/set.parquet, slices: {lang: lang}}
            checks:
              - {metric: map, dataset: set, slices: all, at_least: 0.01}
            """,
        )
    )
    runner = SuiteRunner()
    try:  # (a gate over every slice may fail while a query has no value: not this test's point)
        runner.run(suite, suite.cases[0])
    except AssertionError:
        pass
    assert _result(runner).slices.missing == {"lang": 1}


# ------------------------------------------- a blank text value in a file is "no slice value"
def _npz_blank(tmp_path):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(6), 4)
    e = (rng.normal(size=(6, 8))[y] + 0.3 * rng.normal(size=(24, 8))).astype(np.float32)
    lang = np.array(["de", "en"] * 12)
    lang[[3, 7]] = ["", "  "]  # npz has no None: an empty text is the file's missing value
    (tmp_path / "data").mkdir(exist_ok=True)
    np.savez(tmp_path / "data/set.npz", embeddings=e, labels=y, lang=lang)
    return tmp_path / "data/set.npz"


def test_a_blank_text_in_a_files_slice_column_is_a_missing_value(tmp_path):
    import retrieval_checks as rc

    s = rc.load_embeddings(_npz_blank(tmp_path), columns=["lang"])
    r = rc.evaluate(s.embeddings, query_labels=s.labels, metrics=["map"], slices=s.columns)
    assert r.slices.missing == {"lang": 2} and sorted(r.slices) == ["lang=de", "lang=en"]
    with pytest.raises(rc.InputError, match="empty slice value"):  # in Python, None says it
        rc.evaluate(s.embeddings, query_labels=s.labels, metrics=["map"], slices=["", *["de"] * 23])


def test_a_suite_reads_a_blank_text_as_a_missing_slice_value(tmp_path):
    _npz_blank(tmp_path)
    suite = load_suite(
        _write(
            tmp_path,
            """
            datasets:
              set: {queries: data/set.npz, slices: {lang: lang}}
            checks:
              - {metric: map, dataset: set, slices: all, at_least: 0.01}
            """,
        )
    )
    runner = SuiteRunner()
    try:
        runner.run(suite, suite.cases[0])
    except AssertionError:
        pass
    assert _result(runner).slices.missing == {"lang": 2}
