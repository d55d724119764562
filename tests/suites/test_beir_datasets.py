"""YAML suites on BEIR directories (``type: beir``): a text model embeds the judged
queries and the corpus (title + text), the value of an ndcg@10 gate equals
``rc.evaluate`` with the qrels' grades, unjudged queries are counted and reported, and
every bad file, line or field is an error naming file:line."""

from __future__ import annotations

import textwrap
import warnings

import numpy as np
import pytest
from shared_setup import BEIR_EMBEDDER as EMBEDDER
from shared_setup import BEIR_WORDS as WORDS
from shared_setup import beir_corpus as _corpus
from shared_setup import ranx_evaluate, write_beir

import retrieval_checks as rc
from retrieval_checks import InputError, SuiteError, SuiteRunner, load_suite
from retrieval_checks.data._beir import read_beir


def _model_kinds():
    """tests/models/test_model_kinds.py, whose builders make the tiny models."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "models" / "test_model_kinds.py"
    spec = importlib.util.spec_from_file_location("_rc_test_model_kinds", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(tmp_path, text, name="rc_suite.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


def _embed(texts, part):
    import hashlib

    out = np.zeros((len(texts), 32))
    for i, t in enumerate(texts):
        for w in t.lower().split():
            out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 32] += 1.0
    return (out + 0.01 * (part == "queries")).astype(np.float32)


SUITE = """
datasets:
  toy: {type: beir, path: toy, relevance_level: 2}
models:
  bow: {callable: embedder.py:embed}
checks:
  - {metric: ndcg@10, at_least: 0.05}
  - {metric: map, at_least: 0.01}
  - {metric: recall@10, at_least: 0.01, ties: average}
"""


def test_gate_values_equal_evaluate_with_the_qrels(tmp_path):
    rng = np.random.default_rng(0)
    docs, queries, qrels = _corpus(rng)
    write_beir(tmp_path / "toy", docs, queries, qrels)
    (tmp_path / "embedder.py").write_text(EMBEDDER)
    suite = load_suite(_write(tmp_path, SUITE))
    runner = SuiteRunner()
    with pytest.warns(
        RuntimeWarning,
        match=r"2 of 12 queries in queries.jsonl have no judgement in "
        r"qrels/test.tsv \(first: 'q10', 'q11'\)",
    ):
        for case in suite.cases:
            runner.run(suite, case)
    # the reference: texts and grades built here from the dicts, not from the reader
    qids = [q["_id"] for q in queries if q["_id"] in qrels]
    q_texts = [q["text"] for q in queries if q["_id"] in qrels]
    d_texts = [(d.get("title", "") + " " + d["text"]).strip() for d in docs]
    row = {d["_id"]: i for i, d in enumerate(docs)}
    relevance = {i: {row[d]: g for d, g in qrels[q].items()} for i, q in enumerate(qids)}
    qe, de = _embed(q_texts, "queries"), _embed(d_texts, "gallery")
    got = {(dict(k[3]).get("ties")): v for k, v in runner.evaluations._results.items()}
    want = rc.evaluate(qe, de, relevance=relevance, relevance_level=2, metrics=["ndcg@10", "map"])
    for m in ("ndcg@10", "map"):
        assert got["pessimistic"][m] == want[m]
    avg = rc.evaluate(
        qe, de, relevance=relevance, relevance_level=2, metrics=["recall@10"], ties="average"
    )
    assert got["average"]["recall@10"] == avg["recall@10"]
    assert runner.embedded == 2  # queries and corpus, once each


def test_a_sentence_transformers_model_on_beir_and_the_cache(tmp_path):
    pytest.importorskip("sentence_transformers")
    st_dir = _model_kinds().make_sentence_transformer(tmp_path / "st")
    rng = np.random.default_rng(1)
    docs, queries, qrels = _corpus(rng, n_queries=6)
    write_beir(tmp_path / "toy", docs, queries, qrels)
    p = _write(
        tmp_path,
        f"""
        datasets:
          toy: {{type: beir, path: toy}}
        models:
          st: {{sentence_transformers: {st_dir}, normalize: true, batch_size: 4}}
        checks:
          - {{metric: ndcg@10, at_least: 0.01}}
        """,
    )
    suite = load_suite(p)
    runner = SuiteRunner(cache_dir=tmp_path / "cache", device="cpu")
    with pytest.warns(RuntimeWarning, match="2 of 6 queries"):
        runner.run(suite, suite.cases[0])
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(st_dir), local_files_only=True, device="cpu")
    data = read_beir(tmp_path / "toy")
    qe = st.encode_query(data.queries, normalize_embeddings=True)
    de = st.encode_document(data.documents, normalize_embeddings=True)
    want = rc.evaluate(qe, de, relevance=data.relevance, metrics=["ndcg@10"])["ndcg@10"]
    (got,) = [v["ndcg@10"] for v in runner.evaluations._results.values()]
    assert got == pytest.approx(want, abs=1e-6)
    again = SuiteRunner(cache_dir=tmp_path / "cache", device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        again.run(suite, suite.cases[0])
    assert (again.cache.hits, again.cache.misses, again.embedded) == (2, 0, 0)


def test_the_reader_joins_title_and_text_and_keeps_grades(tmp_path):
    rng = np.random.default_rng(2)
    docs, queries, qrels = _corpus(rng)
    write_beir(tmp_path / "b", docs, queries, qrels, split="dev")
    data = read_beir(tmp_path / "b", "dev")
    assert data.documents[0] == docs[0]["title"] + " " + docs[0]["text"]
    assert data.documents[3] == docs[3]["text"]
    assert data.query_ids == [f"q{i}" for i in range(10)] and data.unjudged == ["q10", "q11"]
    assert data.n_judgements == sum(len(v) for v in qrels.values())
    for i, q in enumerate(data.query_ids):
        assert {data.doc_ids[d]: g for d, g in data.relevance[i].items()} == qrels[q]


@pytest.mark.parametrize(
    "where, content, message",
    [
        (
            "corpus.jsonl",
            '{"_id": "d0", "text": "a"}\n{"_id": "d1", "text": "b"\n',
            r"corpus.jsonl:2: not a JSON object",
        ),
        (
            "corpus.jsonl",
            '{"_id": "d0", "text": "a"}\n{"_id": "d0", "text": "b"}\n',
            r"corpus.jsonl:2: duplicate _id 'd0' \(first at line 1\)",
        ),
        (
            "corpus.jsonl",
            '{"_id": "d0", "text": "a"}\n{"_id": "d1"}\n',
            r"corpus.jsonl:2: text is missing",
        ),
        (
            "corpus.jsonl",
            '{"_id": "d0", "text": "a"}\n{"_id": "d1", "text": "b", "title": 3}\n',
            r"corpus.jsonl:2: title is int 3",
        ),
        ("corpus.jsonl", '["d0", "a"]\n', r"corpus.jsonl:1: a JSON list, not an object"),
        ("queries.jsonl", '{"text": "a"}\n', r"queries.jsonl:1: _id is missing"),
        (
            "qrels/test.tsv",
            "query-id\tcorpus-id\tscore\nq0\td0\t1.5\n",
            r"test.tsv:2: score '1.5' is not a whole number",
        ),
        (
            "qrels/test.tsv",
            "query-id\tcorpus-id\tscore\nq0\td0\t-1\n",
            r"test.tsv:2: score -1 is negative",
        ),
        (
            "qrels/test.tsv",
            "query-id\tcorpus-id\tscore\nq0\tzz\t1\n",
            r"test.tsv:2: corpus-id 'zz' is not an _id in corpus",
        ),
        (
            "qrels/test.tsv",
            "query-id\tcorpus-id\tscore\nqq\td0\t1\n",
            r"test.tsv:2: query-id 'qq' is not an _id in queries",
        ),
        (
            "qrels/test.tsv",
            "query-id\tcorpus-id\tscore\nq0\td0\t1\nq0\td0\t2\n",
            r"test.tsv:3: query 'q0' judges document 'd0' again \(first at line 2\)",
        ),
        (
            "qrels/test.tsv",
            "query-id\tcorpus-id\tscore\nq0 d0 1\n",
            r"test.tsv:2: 1 tab-separated field",
        ),
        ("qrels/test.tsv", "q0\td0\t1\n", r"test.tsv:1: expected the header"),
        ("qrels/test.tsv", "query-id\tcorpus-id\tscore\n", r"test.tsv: no judgements"),
    ],
)
def test_bad_files_name_file_and_line(tmp_path, where, content, message):
    root = write_beir(
        tmp_path / "b",
        [{"_id": "d0", "text": "a"}],
        [{"_id": "q0", "text": "a"}],
        {"q0": {"d0": 1}},
    )
    (root / where).write_text(content)
    with pytest.raises(InputError, match=message):
        read_beir(root)
    # through a suite: the same message, with the suite's dataset named
    (tmp_path / "embedder.py").write_text(EMBEDDER)
    suite = load_suite(
        _write(
            tmp_path,
            """
        datasets:
          toy: {type: beir, path: b}
        models:
          bow: {callable: embedder.py:embed}
        checks:
          - {metric: ndcg@10, at_least: 0.1}
        """,
        )
    )
    with pytest.raises(SuiteError, match=message) as info:
        SuiteRunner().run(suite, suite.cases[0])
    assert "rc_suite.yaml:2: datasets.toy" in str(info.value)


@pytest.mark.parametrize(
    "missing, message",
    [
        ("corpus.jsonl", r"corpus.jsonl: missing"),
        ("queries.jsonl", r"queries.jsonl: missing"),
        (
            "qrels/test.tsv",
            r"test.tsv: missing: a BEIR directory needs qrels/test.tsv \(splits found: dev; set split:\)",
        ),
    ],
)
def test_missing_files_are_schema_errors(tmp_path, missing, message):
    root = write_beir(
        tmp_path / "b",
        [{"_id": "d0", "text": "a"}],
        [{"_id": "q0", "text": "a"}],
        {"q0": {"d0": 1}},
    )
    write_beir(
        root,
        [{"_id": "d0", "text": "a"}],
        [{"_id": "q0", "text": "a"}],
        {"q0": {"d0": 1}},
        split="dev",
    )
    (root / missing).unlink()
    (tmp_path / "embedder.py").write_text(EMBEDDER)
    p = _write(
        tmp_path,
        """
        datasets:
          toy: {type: beir, path: b}
        models:
          bow: {callable: embedder.py:embed}
        checks:
          - {metric: ndcg@10, at_least: 0.1}
        """,
    )
    with pytest.raises(SuiteError, match=message) as info:
        load_suite(p)
    assert "rc_suite.yaml:2: datasets.toy.path" in str(info.value)


@pytest.mark.parametrize(
    "dataset, model, check, message",
    [
        (
            "{type: beir, path: nowhere}",
            "{callable: embedder.py:embed}",
            "{metric: ndcg@10, at_least: 0.1}",
            r"rc_suite.yaml:2: datasets.toy.path: directory 'nowhere' does not exist",
        ),
        (
            "{type: beir, path: b, split: 3}",
            "{callable: embedder.py:embed}",
            "{metric: ndcg@10, at_least: 0.1}",
            r"datasets.toy.split: expected the name of a qrels split",
        ),
        (
            "{type: beir, path: b, relevance_level: 0}",
            "{callable: embedder.py:embed}",
            "{metric: ndcg@10, at_least: 0.1}",
            r"datasets.toy.relevance_level: expected an integer >= 1",
        ),
        (
            "{type: beir, path: b, queries: x}",
            "{callable: embedder.py:embed}",
            "{metric: ndcg@10, at_least: 0.1}",
            r"datasets.toy.queries: unknown field 'queries'",
        ),
        (
            "{type: beir, path: b}",
            "{callable: embedder.py:embed}",
            "{metric: grouped_recall@1, dataset: toy, at_least: 0.1}",
            r"checks\[0\]: dataset 'toy': grouped_recall@1 is not measured on beir datasets: a BEIR split holds "
            r"graded qrels, not labels",
        ),
        (
            "{type: beir, path: b}",
            "{callable: embedder.py:embed}",
            "{metric: ndcg@10, at_least: 0.1, group_size: 4}",
            r"checks\[0\].group_size: group_size does not apply to beir datasets",
        ),
        (
            "{type: beir, path: b}",
            "{torchscript: embedder.py}",
            "{metric: ndcg@10, at_least: 0.1}",
            r"dataset 'toy' holds texts \(BEIR\); model 'm' is torchscript, which does not embed texts",
        ),
    ],
)
def test_bad_suite_fields_are_located(tmp_path, dataset, model, check, message):
    write_beir(
        tmp_path / "b",
        [{"_id": "d0", "text": "a"}],
        [{"_id": "q0", "text": "a"}],
        {"q0": {"d0": 1}},
    )
    (tmp_path / "embedder.py").write_text(EMBEDDER)
    p = _write(
        tmp_path,
        f"""
        datasets:
          toy: {dataset}
        models:
          m: {model}
        checks:
          - {check}
        """,
    )
    with pytest.raises(SuiteError, match=message):
        load_suite(p)


def test_judged_queries_without_a_relevant_grade_are_empty_queries(tmp_path):
    """A query judged only with grades below relevance_level is evaluated and skipped
    (counted in n_skipped), never dropped silently."""
    docs = [{"_id": f"d{i}", "text": w} for i, w in enumerate(WORDS)]
    queries = [{"_id": "q0", "text": "cat dog"}, {"_id": "q1", "text": "red"}]
    write_beir(tmp_path / "b", docs, queries, {"q0": {"d0": 2, "d1": 1}, "q1": {"d4": 1}})
    (tmp_path / "embedder.py").write_text(EMBEDDER)
    suite = load_suite(
        _write(
            tmp_path,
            """
        datasets:
          toy: {type: beir, path: b, relevance_level: 2}
        models:
          bow: {callable: embedder.py:embed}
        checks:
          - {metric: map, at_least: 0.5, max_skipped: 0}
        """,
        )
    )
    with pytest.raises(AssertionError, match=r"1 of 2 queries skipped|n_skipped"):
        SuiteRunner().run(suite, suite.cases[0])
    runner = SuiteRunner()
    result = runner.result(
        suite, "bow", "toy", suite.evaluation_options(suite.checks[0], "toy", runner.defaults)
    )
    assert (result.n_used, result.n_skipped) == (1, 1)


def test_the_json_schema_takes_beir_datasets_and_library_models(tmp_path):
    """The schema (retrieval_checks.suites._jsonschema) accepts what the loader accepts
    here, and refuses a misspelt setting, a setting of another kind and a bad split."""
    import jsonschema
    import yaml

    from retrieval_checks.suites._jsonschema import suite_json_schema

    validator = jsonschema.Draft202012Validator(suite_json_schema())
    write_beir(
        tmp_path / "b",
        [{"_id": "d0", "text": "a"}],
        [{"_id": "q0", "text": "a"}],
        {"q0": {"d0": 1}},
    )
    for d in ("st", "bert", "vit"):
        (tmp_path / d).mkdir()
    (tmp_path / "c.pt").write_bytes(b"x")
    good = """
        datasets:
          toy: {type: beir, path: b, split: test, relevance_level: 1}
        models:
          st: {sentence_transformers: st, query_prompt: 'query: ', document_prompt_name: doc, normalize: true,
               max_length: 128, batch_size: 8, device: cpu}
          bert: {huggingface: bert, pooling: cls, max_length: 64, query_prompt: 'q ', normalize: false}
          clip: {open_clip: ViT-B-32, checkpoint: c.pt, normalize: true}
          vit: {timm: vit}
          vit2: {timm: vit_small_patch16_224, checkpoint: c.pt}
        checks:
          - {metric: ndcg@10, dataset: toy, models: [st, bert], at_least: 0.1}
        """
    p = _write(tmp_path, good)
    load_suite(p)  # the loader takes it: the schema must too
    data = yaml.safe_load(p.read_text())
    assert list(validator.iter_errors(data)) == []
    for model, dataset in (
        ({"huggingface": "bert", "pooling": "max"}, None),
        ({"huggingface": "bert", "query_prompt_name": "q"}, None),
        ({"sentence_transformers": "st", "pooling": "cls"}, None),
        ({"timm": "vit", "config": "c.json"}, None),
        (None, {"type": "beir", "path": "b", "split": "a/b"}),
        (None, {"type": "beir", "path": "b", "queries": "q.npz"}),
    ):
        bad = yaml.safe_load(p.read_text())
        if model is not None:
            bad["models"]["st"] = model
        if dataset is not None:
            bad["datasets"]["toy"] = dataset
        assert list(validator.iter_errors(bad)), (model, dataset)


RANDOM_EMBEDDER = """
import zlib
import numpy as np

def embed(texts):
    return np.stack([np.random.default_rng(zlib.crc32(t.encode())).normal(size=16) for t in texts])
"""


@pytest.mark.xdist_group("ranx")  # with tests/oracles/test_ranx.py: one worker compiles ranx
def test_ignore_identical_ids_equals_ranx_without_the_identical_documents(tmp_path):
    """Queries whose ids are also corpus ids (ArguAna-style): with ignore_identical_ids the
    values equal ranx's on a run without each query's own document and the qrels as they
    are (BEIR's rule: a judged own document stays relevant, never retrieved); without it,
    on the full run."""
    pytest.importorskip("ranx")
    import zlib

    rng = np.random.default_rng(4)
    docs = [
        {"_id": f"x{i}", "title": "", "text": " ".join(rng.choice(WORDS, 5))} for i in range(30)
    ]
    queries = [{"_id": f"x{i}", "text": " ".join(rng.choice(WORDS, 5))} for i in range(10)]
    qrels = {
        f"x{i}": {
            f"x{int(d)}": int(rng.integers(1, 3))
            for d in rng.choice(np.arange(10, 30), 3, replace=False)
        }
        for i in range(10)
    }
    (tmp_path / "embedder.py").write_text(RANDOM_EMBEDDER)
    metrics = ["ndcg@10", "map", "mrr", "recall@5"]

    def vec(t):
        v = np.random.default_rng(zlib.crc32(t.encode())).normal(size=16)
        return v / np.linalg.norm(v)

    def check(qrels, ignore):
        write_beir(tmp_path / "b", docs, queries, qrels)
        text = (
            f"datasets:\n  toy: {{type: beir, path: b, ignore_identical_ids: {str(ignore).lower()}}}\n"
            "models:\n  rnd: {callable: embedder.py:embed}\nchecks:\n"
            + "".join(f"  - {{metric: {m}, at_least: 0.01}}\n" for m in metrics)
        )
        suite = load_suite(_write(tmp_path, text))
        runner = SuiteRunner()
        for case in suite.cases:
            try:
                runner.run(suite, case)
            except AssertionError:
                pass  # random embeddings: the verdicts do not matter, the values do
        (got,) = runner.evaluations._results.values()
        run = {
            q["_id"]: {
                d["_id"]: float(vec(q["text"]) @ vec(d["text"]))
                for d in docs
                if not (ignore and d["_id"] == q["_id"])
            }
            for q in queries
        }
        want = ranx_evaluate(qrels, run, metrics)  # plain dicts: no ranx.Qrels compile
        for m in metrics:
            assert got[m] == pytest.approx(want[m], abs=1e-6), (ignore, m)
        return got

    for ignore in (True, False):
        check(qrels, ignore)
    # the query's own document judged: relevant, and out of the ranking (BEIR counts it missed)
    qrels["x0"]["x0"] = 2
    qrels["x1"] = {"x1": 1}  # its only relevant document is its own: 0 for every measure
    got = check(qrels, True)
    assert got.n_relevant[1] == 1 and got.per_query["mrr"][1] == 0.0
    assert got.config["identical_ids_dropped"] == 10
    assert check(qrels, False).per_query["mrr"][1] > 0  # ranked, found


# ---------------------------------------------------------------- text rules shared with the TREC readers
def _tiny(tmp_path):
    return write_beir(
        tmp_path / "b",
        [{"_id": "d0", "text": "a"}, {"_id": "d1", "text": "b"}],
        [{"_id": "q0", "text": "a"}, {"_id": "q1", "text": "b"}],
        {"q0": {"d0": 1}, "q1": {"d1": 2}},
    )


@pytest.mark.parametrize("where", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_a_leading_byte_order_mark_is_dropped_in_every_file(tmp_path, where):
    root = _tiny(tmp_path)
    expected = read_beir(root)
    f = root / where
    f.write_text(f.read_text(encoding="utf-8"), encoding="utf-8-sig")
    got = read_beir(root)
    assert (got.query_ids, got.doc_ids, got.relevance) == (
        expected.query_ids,
        expected.doc_ids,
        expected.relevance,
    )


@pytest.mark.parametrize(
    "grade, message",
    [
        ("1_0", "not a whole number"),
        ("\u0661", "not a whole number"),
        ("\uff12", "not a whole number"),
        ("0x1", "not a whole number"),
        ("99999999999999999999", "beyond the 64-bit integer range"),
        ("9223372036854775808", "beyond the 64-bit integer range"),
    ],
)
def test_grades_follow_the_file_grammar_not_python_int(tmp_path, grade, message):
    root = _tiny(tmp_path)
    (root / "qrels" / "test.tsv").write_text(
        f"query-id\tcorpus-id\tscore\nq0\td0\t{grade}\n", encoding="utf-8"
    )
    with pytest.raises(InputError, match=rf"test.tsv:2: score .*{message}"):
        read_beir(root)


@pytest.mark.parametrize("field", ["q0\u00a0", "\u200bq0", "q\u20280"])
def test_invisible_characters_in_qrels_ids_are_named(tmp_path, field):
    root = _tiny(tmp_path)
    (root / "qrels" / "test.tsv").write_text(
        f"query-id\tcorpus-id\tscore\n{field}\td0\t1\n", encoding="utf-8"
    )
    with pytest.raises(InputError, match=r"test.tsv:2: the query-id .* holds U\+"):
        read_beir(root)


@pytest.mark.parametrize("where", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_files_that_are_not_utf8_or_unreadable_name_the_file(tmp_path, where):
    root = _tiny(tmp_path)
    f = root / where
    f.write_bytes(f.read_bytes() + "caf\u00e9\n".encode("latin-1"))
    with pytest.raises(
        InputError, match=r"(corpus|queries).jsonl:3: .*not UTF-8|test.tsv:4: .*not UTF-8"
    ):
        read_beir(root)
    from shared_setup import permission_denied

    with (
        permission_denied(f),
        pytest.raises(
            InputError,
            match=rf"{where.split('/')[-1]}: the .* file is not readable \(permission "
            r"denied\); make it readable",
        ),
    ):
        read_beir(root)


def _named_by_rows(tmp_path, query_ids, qrels_ids):
    docs = [{"_id": f"d{i}", "text": "a"} for i in range(3)]
    queries = [{"_id": q, "text": "a"} for q in query_ids]
    return write_beir(tmp_path / "b", docs, queries, {q: {"d0": 1} for q in qrels_ids})


def test_qrels_naming_queries_by_row_number_say_so(tmp_path):
    root = _named_by_rows(tmp_path, ["q1", "q2", "q3", "q4"], ["q1", "2", "3"])
    with pytest.raises(InputError) as info:
        read_beir(root)
    text = str(info.value)
    assert "test.tsv:3: query-id '2' is not an _id in queries.jsonl" in text
    assert "2 of the 3 query ids of the qrels are not" in text  # counted, not only the first
    assert "row number" in text and "ids there look like 'q1', 'q2', 'q3'" in text
    assert "row 2 of queries.jsonl (from 0) is 'q3'" in text


def test_queries_whose_ids_look_like_row_numbers_say_so(tmp_path):
    root = _named_by_rows(tmp_path, ["0", "1", "2"], ["0", "q1"])
    with pytest.raises(
        InputError,
        match=r"query-id 'q1' is not an _id in queries.jsonl.*the _id values there look "
        r"like row numbers \('0', '1', '2'\)",
    ):
        read_beir(root)


def test_numeric_ids_off_by_one_are_flagged(tmp_path):
    root = _named_by_rows(
        tmp_path, ["1", "2", "3"], ["0", "1"]
    )  # the qrels count rows from 0, ids from 1
    with pytest.raises(InputError, match=r"query-id '0' is not an _id.*both are numbers"):
        read_beir(root)


def test_documents_named_by_row_number_say_so(tmp_path):
    root = write_beir(
        tmp_path / "b",
        [{"_id": f"doc{i}", "text": "a"} for i in range(3)],
        [{"_id": "q0", "text": "a"}],
        {"q0": {"doc0": 1, "2": 1}},
    )
    with pytest.raises(
        InputError,
        match=r"test.tsv:3: corpus-id '2' is not an _id in corpus.jsonl.*row number.*"
        r"row 2 of corpus.jsonl \(from 0\) is 'doc2'",
    ):
        read_beir(root)


def test_u_feff_inside_a_text_is_text_but_starting_a_later_line_is_refused(tmp_path):
    root = _tiny(tmp_path)
    (root / "corpus.jsonl").write_text(
        '{"_id": "d0", "text": "a\ufeffb"}\n{"_id": "d1", "text": "b"}\n', encoding="utf-8"
    )
    assert (
        read_beir(root).documents[0] == "a\ufeffb"
    )  # scraped text may hold one: not a reason to refuse
    (root / "corpus.jsonl").write_text(
        '{"_id": "d0", "text": "a"}\n\ufeff{"_id": "d1", "text": "b"}\n', encoding="utf-8"
    )  # two files joined with cat
    with pytest.raises(
        InputError, match=r"corpus.jsonl:2: a byte-order mark \(U\+FEFF\) starts this line"
    ):
        read_beir(root)
