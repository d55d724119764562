"""A checkpoint's blocks are tied to the scores' definition as well as to the inputs and
options: blocks written by an engine that scored differently (the cosine epilogue
changed in issue 25) are another run's, never merged into this one's result."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.engine import _backend


def _problem():
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, size=(24, 4)).astype(np.float32)
    return dict(
        queries=x, query_labels=np.repeat(np.arange(6), 4), metrics=["map", "mrr"], tile=(4, 16)
    )


def test_blocks_of_an_engine_that_scored_differently_are_refused(tmp_path, monkeypatch):
    p = _problem()
    first = rc.evaluate(**p, checkpoint=tmp_path)
    assert rc.evaluate(**p, checkpoint=tmp_path)["map"] == first["map"]  # same engine: resumed
    monkeypatch.setattr(_backend, "SCORES_VERSION", "scores-next")
    with pytest.raises(rc.InputError, match="another run"):
        rc.evaluate(**p, checkpoint=tmp_path)
