"""Suite gaps whose two datasets hold the same data under two names (issue 25): the suite
loader refuses one dataset named twice; the same file under two names reached the gap
and passed ``below:`` whatever the model. The gap refuses it now, naming the fix."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks import SuiteRunner, load_suite


def _suite(tmp_path, second):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(12), 6)
    e = (2.0 * rng.normal(size=(12, 8))[y] + rng.normal(size=(72, 8))).astype(np.float32)
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data/set.npz", embeddings=e, labels=y)
    np.savez(tmp_path / "data/copy.npz", embeddings=e.copy(), labels=y.copy())
    other = (2.0 * rng.normal(size=(12, 8))[y] + 2.0 * rng.normal(size=(72, 8))).astype(np.float32)
    np.savez(tmp_path / "data/other.npz", embeddings=other, labels=y)
    p = tmp_path / "rc_suite.yaml"
    p.write_text(
        textwrap.dedent(f"""
        datasets:
          train: {{queries: data/set.npz}}
          test: {{queries: {second}}}
        checks:
          - {{metric: map, gap: {{train: train, test: test}}, below: 0.9}}
        """).lstrip("\n")
    )
    return load_suite(p)


@pytest.mark.parametrize("second", ["data/set.npz", "data/copy.npz"])
def test_a_suite_gap_of_one_dataset_under_two_names_is_refused(tmp_path, second):
    suite = _suite(tmp_path, second)
    (case,) = suite.cases
    with pytest.raises(rc.InputError, match="same data"):
        SuiteRunner().run(suite, case)


def test_a_suite_gap_of_two_datasets_runs(tmp_path):
    suite = _suite(tmp_path, "data/other.npz")
    (case,) = suite.cases
    SuiteRunner().run(suite, case)  # a real gap, below 0.9
