"""``unsliced:`` in YAML suites (review finding, issue 28): a check over every slice
(``slices: all`` / ``worst``, a baseline check's ``slices: all``) fails while queries of
its dataset have no slice value, unless ``unsliced: ignore``; the field is refused, on
its line, where it has no meaning (no slices:, named slices) or with another value.

Cost: about 2 s (a 24-query TREC run, evaluated once per case).
"""

from __future__ import annotations

import pytest

from retrieval_checks import SuiteError, load_suite
from tests.suites.test_run_and_ann_slices import _data, _run_case, _write

SUITE = """
datasets:
  bm25:
    type: run
    run: data/r.run
    qrels: data/q.qrels
    slices: {{file: data/part.tsv}}
checks:
  - {{metric: map, dataset: bm25, slices: {slices}, at_least: 0.01{extra}}}
"""


def _lost(tmp_path):
    """The topic file lost the 12 poor queries (q12..q23): only 'de' remains."""
    lang, *_ = _data(tmp_path)
    (tmp_path / "data/part.tsv").write_text(
        "".join(f"{q}\t{v}\n" for q, v in lang.items() if v == "de")
    )


@pytest.mark.parametrize("slices", ["all", "worst"])
def test_a_check_over_every_slice_fails_while_queries_have_no_value(tmp_path, slices):
    _lost(tmp_path)
    suite = load_suite(_write(tmp_path, SUITE.format(slices=slices, extra="")))
    with pytest.raises(AssertionError, match="12 of 24 queries \\(50%\\) have no slice value"):
        _run_case(suite)
    suite = load_suite(_write(tmp_path, SUITE.format(slices=slices, extra=", unsliced: ignore")))
    assert suite.checks[0].unsliced == "ignore"
    _run_case(suite)


def test_named_slices_pass_without_unsliced(tmp_path):
    _lost(tmp_path)
    _run_case(load_suite(_write(tmp_path, SUITE.format(slices="[de]", extra=""))))


@pytest.mark.parametrize(
    "slices, extra, message",
    [
        ("[de]", ", unsliced: ignore", "a check that names its slices gates those only"),
        ("all", ", unsliced: skip", "use fail \\(the default"),
        ("all", ", unsliced: true", "use fail \\(the default"),
    ],
)
def test_unsliced_is_refused_on_its_line_where_it_means_nothing(tmp_path, slices, extra, message):
    _lost(tmp_path)
    with pytest.raises(SuiteError, match=message) as info:
        load_suite(_write(tmp_path, SUITE.format(slices=slices, extra=extra)))
    assert info.value.line == 8 and info.value.field.endswith(".unsliced")


def test_unsliced_without_slices_is_refused(tmp_path):
    _data(tmp_path)
    path = _write(
        tmp_path,
        """
        datasets:
          bm25: {type: run, run: data/r.run, qrels: data/q.qrels}
        checks:
          - {metric: map, dataset: bm25, at_least: 0.01, unsliced: ignore}
        """,
    )
    with pytest.raises(SuiteError, match="this check has no slices:") as info:
        load_suite(path)
    assert info.value.line == 4
