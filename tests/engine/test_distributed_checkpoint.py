"""``evaluate(..., checkpoint=DIR)`` in one process: a run that raises or is killed
mid-pass leaves its finished blocks; the restart reads them back (it does not
recompute them) and gives the result of a run without a checkpoint, bit for bit; a
directory of another run is refused. (The sharded restart is tested in
test_distributed.py.)"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from test_distributed import _float_problem, _same, _summary

import retrieval_checks as rc
from retrieval_checks.engine import _stream

METRICS = ["map", "mrr", "map@R", "ndcg@5", "recall_at_precision@0.5", "pair_precision@t=0.3"]


def _problem():
    Q, G, ql, gl, qi, gi = _float_problem(11)
    return dict(
        queries=Q,
        gallery=G,
        query_labels=ql,
        gallery_labels=gl,
        query_ids=qi,
        gallery_ids=gi,
        metrics=METRICS,
        tile=(3, 16),
        empty_queries="skip",
    )


def _counting_run_block(monkeypatch, fail_at=None):
    calls = []
    original = _stream.run_block  # the pass's one loop calls it for every block

    def run_block(*args, **kwargs):
        calls.append(args[1])
        if fail_at is not None and len(calls) == fail_at:
            raise RuntimeError("stopped mid-run")
        return original(*args, **kwargs)

    monkeypatch.setattr(_stream, "run_block", run_block)
    return calls


def test_a_run_that_raises_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    p = _problem()
    expected = _summary(rc.evaluate(**p))
    n_blocks = -(-len(p["queries"]) // 3)
    _counting_run_block(monkeypatch, fail_at=4)
    with pytest.raises(RuntimeError, match="stopped mid-run"):
        rc.evaluate(**p, checkpoint=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 3
    monkeypatch.undo()
    resumed = rc.evaluate(**p, checkpoint=tmp_path)
    # only the unfinished blocks ran: the result's provenance counts each merged block
    assert resumed.provenance.resumed == 3
    assert sum(resumed.provenance.blocks.values()) == n_blocks - 3
    _same(expected, _summary(resumed))
    again = rc.evaluate(**p, checkpoint=tmp_path)  # everything stored: nothing recomputed
    assert again.provenance.resumed == n_blocks and not again.provenance.blocks
    _same(expected, _summary(again))


def test_a_killed_run_resumes_from_its_checkpoint(tmp_path):
    """The child reads the problem from a pickle and runs on device="numpy" (so does the
    resume here): it imports neither this module's helpers (test_distributed imports
    torch) nor torch (~2.5 CPU-s). The raising run above resumes on the default device."""
    p = dict(_problem(), device="numpy")
    problem, blocks = tmp_path / "problem.pkl", tmp_path / "blocks"
    problem.write_bytes(pickle.dumps(p))
    script = textwrap.dedent(f"""
        import os, pickle
        import retrieval_checks as rc
        from retrieval_checks.engine import _stream
        original, calls = _stream.run_block, []
        def run_block(*a, **k):
            calls.append(1)
            if len(calls) == 3:
                os._exit(7)  # killed: no cleanup, no exception
            return original(*a, **k)
        _stream.run_block = run_block
        with open({str(problem)!r}, "rb") as f:
            p = pickle.load(f)
        rc.evaluate(**p, checkpoint={str(blocks)!r})
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 7, out.stderr
    assert "torch" not in out.stderr
    assert len(list(blocks.glob("*.npz"))) == 2
    assert not list(blocks.glob(".*.tmp"))  # no partial file left behind
    resumed = rc.evaluate(**p, checkpoint=blocks)
    assert resumed.provenance.resumed == 2  # the killed run's blocks were read, not recomputed
    _same(_summary(rc.evaluate(**p)), _summary(resumed))


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


# ----------------------------------------------------------------------------- blocks tied to their run
def _other_run_blocks(tmp_path):
    """A directory whose blocks were written by a run of other inputs."""
    p = _problem()
    rc.evaluate(**dict(p, queries=p["queries"] + np.float32(0.5)), checkpoint=tmp_path)
    return p


def test_blocks_of_another_run_are_refused_when_the_manifest_is_lost(tmp_path):
    p = _other_run_blocks(tmp_path)
    (tmp_path / "single.json").unlink()  # the manifest lost: only the blocks tell whose they are
    with pytest.raises(
        rc.InputError, match=r"single-block000000000000\.npz belongs to another run.*delete"
    ):
        rc.evaluate(**p, checkpoint=tmp_path)


def test_a_block_of_another_run_among_this_runs_blocks_is_refused(tmp_path):
    p = _problem()
    other = tmp_path / "other"
    _other_run_blocks(other)
    mine = tmp_path / "mine"
    rc.evaluate(**p, checkpoint=mine)
    (mine / "single-block000000000006.npz").write_bytes(
        (other / "single-block000000000006.npz").read_bytes()
    )
    with pytest.raises(rc.InputError, match=r"block000000000006\.npz belongs to another run"):
        rc.evaluate(**p, checkpoint=mine)


def test_two_runs_starting_at_once_in_one_directory_do_not_mix(tmp_path):
    """Both runs find no manifest; the second to write its manifest must not replace the
    first one's (and then mix its blocks with the first run's)."""
    from shared_setup import on_open

    p = _problem()
    raced = []

    def race(name):
        if not raced and ".json" in name:
            raced.append(1)  # this run decided that there is no manifest; another run starts now
            rc.evaluate(**dict(p, ties="optimistic"), checkpoint=tmp_path)

    with (
        on_open(tmp_path, race, writes=True),
        pytest.raises(rc.InputError, match="holds the blocks of another run"),
    ):
        rc.evaluate(**p, checkpoint=tmp_path)
    assert raced


def _damage(kind, path):
    raw = path.read_bytes()
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif kind == "garbage":
        path.write_bytes(b"PK\x03\x04 not a zip" * 8)
    elif kind == "flipped":  # one bit of a stored array, inside an archive that still opens
        with np.load(path) as z:
            rank = z["rank"]
        at = raw.find(rank.tobytes())
        data = bytearray(raw)
        data[at] ^= 0x04
        path.write_bytes(bytes(data))
    elif kind == "missing_array":
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files if k != "rank"}
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)
    elif kind == "directory":
        path.unlink()
        path.mkdir()


@pytest.mark.parametrize(
    "kind", ["empty", "truncated", "garbage", "flipped", "missing_array", "directory"]
)
def test_a_damaged_block_is_recomputed_with_a_warning_naming_it(tmp_path, kind):
    p = _problem()
    expected = _summary(rc.evaluate(**p))
    rc.evaluate(**p, checkpoint=tmp_path)
    n_blocks = -(-len(p["queries"]) // 3)
    damaged = tmp_path / "single-block000000000006.npz"
    _damage(kind, damaged)
    with pytest.warns(
        RuntimeWarning,
        match=r"single-block000000000006\.npz is damaged .*it and the "
        rf"{n_blocks - 3} block\(s\) after it are computed again",
    ):
        resumed = rc.evaluate(**p, checkpoint=tmp_path)
    # blocks 0 and 1 read back, the rest computed
    assert resumed.provenance.resumed == 2
    assert sum(resumed.provenance.blocks.values()) == n_blocks - 2
    _same(expected, _summary(resumed))


def test_threads_of_one_process_share_a_checkpoint_directory(tmp_path):
    """Two threads writing the same file at once: each has its own temporary file."""
    import threading

    from retrieval_checks.engine import _checkpoint

    barrier = threading.Barrier(2, timeout=10)
    errors = []

    def write(fh):
        fh.write(b"x" * 64)
        barrier.wait()  # both threads hold their temporary file open before either renames it

    def worker():
        try:
            _checkpoint._atomic_write(tmp_path / "f.bin", write)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert errors == [] and (tmp_path / "f.bin").read_bytes() == b"x" * 64
    assert not list(tmp_path.glob(".*.tmp"))


def test_threads_evaluating_into_one_checkpoint_directory(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    p = _problem()
    expected = _summary(rc.evaluate(**p))
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: rc.evaluate(**p, checkpoint=tmp_path), range(3)))
    for r in results:
        _same(expected, _summary(r))
    _same(expected, _summary(rc.evaluate(**p, checkpoint=tmp_path)))


@pytest.mark.parametrize("restart", [False, True])
def test_a_read_only_checkpoint_directory_is_refused_before_the_pass(
    tmp_path, monkeypatch, restart
):
    p = _problem()
    if restart:  # this run's manifest is already there: nothing is written at start to trip over
        rc.evaluate(**p, checkpoint=tmp_path)
        for f in tmp_path.glob("*.npz"):
            f.unlink()
    from shared_setup import permission_denied

    calls = _counting_run_block(monkeypatch)
    # writes under the directory fail as in a read-only one (root, who runs the tests in
    # containers, writes whatever the mode)
    with (
        permission_denied(tmp_path, writes=True),
        pytest.raises(
            rc.InputError, match=rf"checkpoint={str(tmp_path)!r} cannot be written.*writable"
        ),
    ):
        rc.evaluate(**p, checkpoint=tmp_path)
    assert calls == []  # refused before any block was computed


@pytest.mark.skipif(
    not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() == 0,
    reason="root writes into read-only directories",
)
def test_a_read_only_checkpoint_directory_for_real(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    try:
        with pytest.raises(rc.InputError, match="cannot be written"):
            rc.evaluate(**_problem(), checkpoint=d)
    finally:
        d.chmod(0o755)


@pytest.mark.parametrize("content", ["", '{"fingerp', "[1, 2]"])
def test_a_damaged_manifest_is_rewritten_with_a_warning(tmp_path, content):
    """The blocks carry their run's fingerprint: a damaged manifest need not stop the run."""
    p = _problem()
    expected = _summary(rc.evaluate(**p, checkpoint=tmp_path))
    (tmp_path / "single.json").write_text(content)
    with pytest.warns(RuntimeWarning, match=r"single\.json is damaged.*rewritten"):
        again = rc.evaluate(**p, checkpoint=tmp_path)
    _same(expected, _summary(again))
    assert '"fingerprint"' in (tmp_path / "single.json").read_text()
