"""A suite's dataset file without its labels array (issue 25): the error lists the
arrays the file has and suggests the closest, by spelling or usual other name
(``targets``, ``y``), as ``load_embeddings`` does."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from retrieval_checks import SuiteError, SuiteRunner, load_suite

E = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)
SUITE = """
datasets:
  d: {queries: q.npz}
checks:
  - {metric: map, at_least: 0.1}
"""


@pytest.mark.parametrize("name", ["targets", "y", "label"])
def test_a_missing_labels_array_lists_the_arrays_and_suggests_the_closest(tmp_path, name):
    np.savez(tmp_path / "q.npz", embeddings=E, **{name: np.repeat(np.arange(5), 4)})
    (tmp_path / "rc_s.yaml").write_text(textwrap.dedent(SUITE))
    suite = load_suite(tmp_path / "rc_s.yaml")
    with pytest.raises(
        SuiteError,
        match=rf"q.npz has no labels array 'labels'; it has 'embeddings', '{name}'\. "
        rf"Did you mean '{name}'\?",
    ) as info:
        SuiteRunner().run(suite, suite.cases[0])
    assert info.value.field == "datasets.d.queries"


def test_without_a_close_name_the_arrays_are_listed(tmp_path):
    np.savez(tmp_path / "q.npz", embeddings=E, weights=np.ones(20))
    (tmp_path / "rc_s.yaml").write_text(textwrap.dedent(SUITE))
    suite = load_suite(tmp_path / "rc_s.yaml")
    with pytest.raises(
        SuiteError,
        match=r"has no labels array 'labels'; it has 'embeddings', 'weights'; retrieval "
        r"datasets need",
    ) as info:
        SuiteRunner().run(suite, suite.cases[0])
    assert "Did you mean" not in str(info.value)


@pytest.mark.parametrize("field, file", [("ids: idz", "q.npz"), ("labels: lbl", "q.npz")])
def test_a_key_the_suite_names_must_exist(tmp_path, field, file):
    """A misspelt ``ids:`` key was ignored silently: the ids (self-match exclusion) were
    not used and the gate measured something else; load_embeddings refuses it too."""
    np.savez(tmp_path / "q.npz", embeddings=E, labels=np.repeat(np.arange(5), 4), ids=np.arange(20))
    np.save(tmp_path / "q.npy", E)
    text = SUITE.replace("{queries: q.npz}", f"{{queries: {{file: {file}, {field}}}}}")
    (tmp_path / "rc_s.yaml").write_text(textwrap.dedent(text))
    suite = load_suite(tmp_path / "rc_s.yaml")
    key = field.split(": ")[1]
    with pytest.raises(SuiteError, match=rf"{file} has no (labels )?array '{key}'") as info:
        SuiteRunner().run(suite, suite.cases[0])
    assert info.value.field == "datasets.d.queries"
