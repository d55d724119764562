"""``ties: docid`` (trec_eval's order of document ids) in a suite's ``options`` or a
check's own fields is refused at load time (so ``retrieval-checks validate``) where a
check evaluates an embedding dataset with it (review finding 10): it passed
validation and failed every such check at run time. A model's own ``ties:`` already
was; run datasets keep taking it.

Cost: under 1 s (suites loaded, nothing evaluated).
"""

from __future__ import annotations

import pytest

from retrieval_checks import SuiteError, load_suite


def _load(tmp_path, text):
    for name in ("q.npz", "e.npz", "run.txt", "qrels.txt"):
        (tmp_path / name).write_bytes(b"")  # loading checks that files exist, not their content
    p = tmp_path / "rc_t.yaml"
    p.write_text(text.lstrip())
    return load_suite(p)


EMBEDDING = """
suite: t
options: {ties: docid}
datasets:
  d: {queries: {file: q.npz}}
models:
  m: {embeddings: {d: e.npz}}
checks:
  - {metric: map, dataset: d, at_least: 0.3}
"""


def test_docid_in_the_suites_options_is_refused_for_an_embedding_dataset(tmp_path):
    with pytest.raises(SuiteError) as info:
        _load(tmp_path, EMBEDDING)
    text = str(info.value)
    assert "rc_t.yaml:2" in text and "options.ties" in text, text
    assert "type: run" in text and "pessimistic" in text and "map" in text and "'d'" in text


def test_a_models_own_ties_overrides_the_suites_docid(tmp_path):
    suite = _load(
        tmp_path,
        EMBEDDING.replace("{embeddings: {d: e.npz}}", "{embeddings: {d: e.npz}, ties: average}"),
    )
    assert suite.options["ties"] == "docid"


def test_docid_on_a_run_dataset_is_taken(tmp_path):
    suite = _load(
        tmp_path,
        """
suite: t
options: {ties: docid}
datasets:
  r: {type: run, run: run.txt, qrels: qrels.txt}
checks:
  - {metric: map, dataset: r, at_least: 0.3}
""",
    )
    assert suite.options["ties"] == "docid"
