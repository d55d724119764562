"""``evaluate(..., checkpoint=DIR)`` in one process: a run that raises or is killed
mid-pass leaves its finished blocks; the restart reads them back (it does not
recompute them) and gives the result of a run without a checkpoint, bit for bit; a
directory of another run is refused. (The sharded restart is tested in
test_distributed.py.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.engine import _blocks

from test_distributed import _float_problem, _same, _summary

METRICS = ["map", "mrr", "map@R", "ndcg@5", "recall_at_precision@0.5", "pair_precision@t=0.3"]


def _problem():
    Q, G, ql, gl, qi, gi = _float_problem(11)
    return dict(queries=Q, gallery=G, query_labels=ql, gallery_labels=gl, query_ids=qi, gallery_ids=gi,
                metrics=METRICS, tile=(3, 16), empty_queries="skip")


def _counting_run_block(monkeypatch, fail_at=None):
    calls = []
    original = _blocks.run_block

    def run_block(*args, **kwargs):
        calls.append(args[1])
        if fail_at is not None and len(calls) == fail_at:
            raise RuntimeError("stopped mid-run")
        return original(*args, **kwargs)

    monkeypatch.setattr(_blocks, "run_block", run_block)
    return calls


def test_a_run_that_raises_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    p = _problem()
    expected = _summary(rc.evaluate(**p))
    n_blocks = -(-len(p["queries"]) // 3)
    _counting_run_block(monkeypatch, fail_at=4)
    with pytest.raises(RuntimeError, match="stopped mid-run"):
        rc.evaluate(**p, checkpoint=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 3
    calls = _counting_run_block(monkeypatch)
    resumed = rc.evaluate(**p, checkpoint=tmp_path)
    assert len(calls) == n_blocks - 3 and calls[0] == 9  # only the unfinished blocks ran
    _same(expected, _summary(resumed))
    calls.clear()
    again = rc.evaluate(**p, checkpoint=tmp_path)  # everything stored: nothing recomputed
    assert calls == []
    _same(expected, _summary(again))


def test_a_killed_run_resumes_from_its_checkpoint(tmp_path):
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(tmp_path.parent)!r})
        sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parent)!r})
        import retrieval_checks as rc
        from retrieval_checks.engine import _blocks
        from test_distributed_checkpoint import _problem
        original, calls = _blocks.run_block, []
        def run_block(*a, **k):
            calls.append(1)
            if len(calls) == 3:
                os._exit(7)  # killed: no cleanup, no exception
            return original(*a, **k)
        _blocks.run_block = run_block
        rc.evaluate(**_problem(), checkpoint={str(tmp_path)!r})
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 7, out.stderr
    assert len(list(tmp_path.glob("*.npz"))) == 2
    assert not list(tmp_path.glob(".*.tmp"))  # no partial file left behind
    p = _problem()
    _same(_summary(rc.evaluate(**p)), _summary(rc.evaluate(**p, checkpoint=tmp_path)))


def test_a_checkpoint_of_other_inputs_or_options_is_refused(tmp_path):
    p = _problem()
    rc.evaluate(**p, checkpoint=tmp_path)
    other = dict(p, queries=p["queries"] + np.float32(0.5))
    with pytest.raises(rc.InputError, match="holds the blocks of another run"):
        rc.evaluate(**other, checkpoint=tmp_path)
    with pytest.raises(rc.InputError, match="holds the blocks of another run"):
        rc.evaluate(**dict(p, ties="optimistic"), checkpoint=tmp_path)
    with pytest.raises(rc.InputError, match="holds the blocks of another run"):
        rc.evaluate(**dict(p, tile=(5, 16)), checkpoint=tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(rc.InputError, match="is a file"):
        rc.evaluate(**p, checkpoint=tmp_path / "file")
