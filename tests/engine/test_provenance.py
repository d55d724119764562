"""``result.provenance`` (issue 26): which counter counted a pass's blocks, recorded by
the pass's one loop from what each block task ran, not from what was selected.

- each counter shows up under its name with the blocks it counted (numba or numpy, the
  vectorised torch counter, the fused CPU pass), the binning pass's blocks apart;
- it fails closed: a fused counter that declines every block shows up as its fallback,
  never under its own name, and a block that names no counter is an error;
- checkpointed blocks given back are counted as resumed, an executor's blocks under their
  counter, a slice carries its pass's record, a sharded pass says so; ``config`` does not
  depend on it;
- the fused CPU pass's mode (mirrored / one-sided), where the counter reports it.

In-process and small: about 3 s on 2 cores (numba's first compile aside).
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.engine import Provenance
from retrieval_checks.engine._backend import Backend
from retrieval_checks.engine._blocks import RelevanceSource, plan_blocks
from retrieval_checks.engine._inputs import Csr
from retrieval_checks.engine._partial import BlockPartial
from retrieval_checks.engine._plan import plan_pass, prepare_problem
from retrieval_checks.engine._stream import PassTotals, binning_pass, stream
from retrieval_checks.engine.counting import _kernels
from retrieval_checks.engine.counting._counters import CpuCounter
from retrieval_checks.metrics._names import parse_metric

ACC = _kernels.ACCELERATOR  # the CPU kernels' name: "numba" (or "numpy" by the switch)


def _data(n=60, d=5, seed=4):
    rng = np.random.default_rng(seed)
    return np.round(rng.standard_normal((n, d)), 1).astype(np.float32), rng.integers(0, 6, n)


def _needs_fused_cpu():
    pytest.importorskip("torch")
    if ACC != "numba":
        pytest.skip("the fused CPU counter needs the compiled (numba) kernels")


def test_each_scored_counter_is_recorded_with_the_blocks_it_counted(monkeypatch):
    X, y = _data()
    n_blocks = len(plan_blocks(60, 7))
    res = rc.evaluate(X, query_labels=y, metrics=["map"], device="numpy", tile=(7, 13))
    assert res.provenance == Provenance({ACC: n_blocks})
    assert res.provenance.counter == ACC and res.provenance.counters == (ACC,)
    assert res.provenance.mode is None and res.provenance.resumed == 0
    assert not res.provenance.sharded and not res.provenance.binning
    vec = rc.evaluate(
        X, query_labels=y, metrics=["map"], device="numpy", tile=(7, 13), _use_kernels=False
    )
    assert dict(vec.provenance.blocks) == {"torch": n_blocks}
    pytest.importorskip("torch")
    monkeypatch.setenv("RC_CPU_COUNTER", "scored")
    scored = rc.evaluate(X, query_labels=y, metrics=["map"], device="cpu", tile=(7, 13))
    assert dict(scored.provenance.blocks) == {ACC: n_blocks}
    # the record is not part of config: the same options, whatever counted
    assert scored.config == {**res.config, "backend": scored.config["backend"]}


def test_the_fused_cpu_counter_is_recorded_and_blocks_it_declines_under_the_fallback(
    monkeypatch,
):
    """RC_CPU_COUNTER=fused: the fused pass counts every block of a query/gallery pass,
    pair metrics included. Unset (auto), the same small pass selects the fused counter,
    which declines every block (below its one-sided size): the record names the scored
    counter that counted them, not the one selected."""
    _needs_fused_cpu()
    import torch

    from retrieval_checks.engine._counting import select
    from retrieval_checks.engine.counting._fused_cpu import FusedCpuCounter

    X, y = _data(90)
    kw = dict(
        gallery=X[30:],
        gallery_labels=y[30:],
        metrics=["map", "recall_at_precision@0.5"],
        device="cpu",
        tile=(8, 16),
    )
    monkeypatch.setenv("RC_CPU_COUNTER", "fused")
    fused = rc.evaluate(X[:30], query_labels=y[:30], **kw)
    # every block on the fused pass (how many: its own plan, one task or the plan's blocks)
    assert set(fused.provenance.blocks) == {"fused-cpu"}
    assert fused.provenance.counter == "fused-cpu"
    monkeypatch.setenv("RC_CPU_COUNTER", "auto")
    source = RelevanceSource(
        q_codes=y[:30],
        g_codes=y[30:],
        self_pairs=Csr(np.zeros(31, np.int64), np.zeros(0, np.int64)),
        n_g=60,
    )
    chosen = select(Backend("torch", torch.device("cpu")), "cosine", source)
    assert isinstance(chosen, FusedCpuCounter)  # selected...
    auto = rc.evaluate(X[:30], query_labels=y[:30], **kw)
    assert set(auto.provenance.blocks) == {ACC}  # ...but it counted nothing
    assert auto.provenance.counter == ACC and "fused-cpu" not in auto.provenance.counters
    assert auto["map"] == fused["map"]
    assert auto.config == fused.config


class _Declines:
    """A fused counter that declines every block (and the binning pass's)."""

    fused = True
    torch_path = False
    name = "declines-everything"

    def __init__(self):
        self.fallback = CpuCounter()
        self.asked = 0

    def rows(self, p, want_pairs, binning=False):
        return p.b

    def run_block(self, p, start, stop, pairs):
        self.asked += 1
        return None

    def run_binning(self, p, start, stop, sorted_positive, out):
        self.asked += 1
        return False


def _problem(n_q=23, n_g=41, seed=2):
    rng = np.random.default_rng(seed)
    Q = rng.integers(-2, 3, size=(n_q, 4)).astype(np.float32)
    G = rng.integers(-2, 3, size=(n_g, 4)).astype(np.float32)
    yq, yg = rng.integers(0, 3, n_q), rng.integers(0, 3, n_g)
    own = Csr(np.zeros(n_q + 1, np.int64), np.zeros(0, np.int64))
    source = RelevanceSource(q_codes=yq, g_codes=yg, self_pairs=own, n_g=n_g)
    plan = plan_pass(
        [Q, G],
        n_q=n_q,
        n_g=n_g,
        d=4,
        loo=False,
        n_relevant=source.counts(n_q),
        device="numpy",
        max_memory="64MB",
        tile=(5, 16),
        pairs=True,
    )
    problem = prepare_problem(plan, Q, G, n_g=n_g, similarity="dot", source=source, self_pairs=own)
    return problem, int(source.counts(n_q).sum())


def test_a_fused_counter_that_declines_every_block_shows_up_as_its_fallback():
    """Fail closed: the record names what counted, never the counter that was chosen."""
    problem, n_pos = _problem()
    counter = _Declines()
    totals = stream(
        problem,
        query_specs=[parse_metric("map")],
        pair_specs=[parse_metric("recall_at_precision@0.5")],
        n_positive=n_pos,
        counter=counter,
    )
    n_blocks = len(plan_blocks(problem.n_q, problem.b))
    assert counter.asked == n_blocks > 1
    assert totals.provenance() == Provenance({ACC: n_blocks})
    assert "declines-everything" not in totals.provenance().counters
    record: dict = {}
    binning_pass(problem, totals.pair_counts(10**6), counter, record=record)
    assert record == {ACC: n_blocks} and counter.asked == 2 * n_blocks


def test_a_block_that_names_no_counter_is_an_error():
    """A partial no block task tagged is never tallied under a guessed name."""
    totals = PassTotals(2, [parse_metric("map")], [], 0)
    part = BlockPartial(0, 2, np.array([0, 1, 1]), np.array([1]), np.array([0]), np.array([0]))
    with pytest.raises(RuntimeError, match="names no counter"):
        totals.add(part)
    totals.add(part, resumed=True)  # a checkpoint's block: counted by an earlier run
    part.counter = "numba"
    totals.add(part)
    assert totals.provenance() == Provenance({"numba": 1}, resumed=1)


def test_checkpointed_blocks_count_as_resumed_and_executor_blocks_under_their_counter(
    tmp_path,
):
    X, y = _data()
    kw = dict(query_labels=y, metrics=["map"], device="numpy", tile=(16, 32))
    n_blocks = len(plan_blocks(60, 16))
    first = rc.evaluate(X, **kw, checkpoint=tmp_path / "run")
    again = rc.evaluate(X, **kw, checkpoint=tmp_path / "run")
    assert first.provenance == Provenance({ACC: n_blocks})
    assert again.provenance == Provenance(resumed=n_blocks)
    assert again.provenance.counter is None and again.provenance.counters == ()
    assert again.config == first.config and again["map"] == first["map"]
    with ThreadPoolExecutor(2) as pool:
        ex = rc.evaluate(X, **kw, executor=pool)
    assert ex.provenance == Provenance({ACC: n_blocks})


def test_the_record_is_read_only_and_travels_with_slices_and_to_dict():
    X, y = _data()
    res = rc.evaluate(X, query_labels=y, metrics=["map"], device="numpy", tile=(16, 32))
    prov = res.provenance
    with pytest.raises(dataclasses.FrozenInstanceError):
        prov.blocks = {}
    with pytest.raises(TypeError):
        prov.blocks["torch"] = 1
    assert repr(prov) == f"Provenance(blocks={{'{ACC}': 4}})"
    assert hash(prov) == hash(Provenance({ACC: 4}))
    # the fused pass's one mode: only when every one of its blocks reported the same one
    assert Provenance({"fused-cpu": 2}, {"mirrored": 2}).mode == "mirrored"
    assert Provenance({"fused-cpu": 2}, {"mirrored": 1}).mode is None  # one unreported
    assert Provenance({"fused-cpu": 2}, {"mirrored": 1, "one-sided": 1}).mode is None
    assert Provenance({"fused-cpu": 1, ACC: 1}, {"one-sided": 1}).mode is None  # not all fused
    both = Provenance.combined([Provenance({ACC: 2}, resumed=1), Provenance({ACC: 1, "torch": 1})])
    assert both == Provenance({ACC: 3, "torch": 1}, resumed=1)
    assert res.to_dict()["provenance"] == {
        "blocks": {ACC: 4},
        "modes": {},
        "binning": {},
        "resumed": 0,
        "sharded": False,
        "grouped": {},  # grouped recall's partitions by path (none here)
    }
    # a result pickles and copies, its record with it (sent between processes, cached)
    for copied in (pickle.loads(pickle.dumps(res)), copy.deepcopy(res)):
        assert copied.provenance == prov and isinstance(copied.provenance.blocks, MappingProxyType)
    sliced = rc.with_slices(res, {"even": np.arange(60) % 2 == 0})
    assert sliced.slices["even=True"].result.provenance == prov
    with pytest.raises(TypeError, match="provenance must be a Provenance"):
        type(res)(
            specs=[],
            values={},
            per_query={},
            thresholds={},
            pair_counts={},
            n_relevant=res.n_relevant,
            n_candidates=res.n_candidates,
            first_relevant_rank=res.first_relevant_rank,
            skipped_queries=res.skipped_queries,
            config={},
            provenance={"numba": 1},
        )


def test_a_result_without_a_streamed_pass_has_an_empty_record():
    run = {"q1": {"d1": 2.0, "d2": 1.0}}
    qrels = {"q1": {"d1": 1}}
    res = rc.evaluate_run(run, qrels, metrics=["map"])
    assert res.provenance == Provenance() and res.provenance.counters == ()


def test_the_fused_cpu_mode_is_recorded_where_the_counter_reports_it(monkeypatch):
    """Mirrored (leave-one-out, one task) or one-sided (query/gallery blocks), as the
    fused counter marks each partial it returns."""
    _needs_fused_cpu()
    X, y = _data(90)
    monkeypatch.setenv("RC_CPU_COUNTER", "fused")
    loo = rc.evaluate(X, query_labels=y, metrics=["map"], device="cpu", similarity="cosine")
    qg = rc.evaluate(
        X[:30],
        query_labels=y[:30],
        gallery=X[30:],
        gallery_labels=y[30:],
        metrics=["map"],
        device="cpu",
        tile=(8, 16),
    )
    assert dict(loo.provenance.blocks) == {"fused-cpu": 1}
    assert set(qg.provenance.blocks) == {"fused-cpu"}
    n_qg = qg.provenance.blocks["fused-cpu"]
    assert loo.provenance.mode == "mirrored" and dict(loo.provenance.modes) == {"mirrored": 1}
    assert qg.provenance.mode == "one-sided" and dict(qg.provenance.modes) == {"one-sided": n_qg}


class _OneRank:
    """A Reduce of one rank that is not the local identity (a sharded pass's shape)."""

    local = False

    def __call__(self, state, value):
        return value

    def queries(self, p, start, stop, Qb, qa):  # the one rank holds every query row
        Qb[: stop - start] = p.Q[start:stop]
        if p.qa is not None:
            qa[: stop - start] = p.qa[start:stop]


def test_a_sharded_pass_is_recorded_as_such_with_the_scored_counter():
    """A sharded pass (a Reduce that is not the identity) counts on the scored counter
    (its phases meet across ranks) and says so."""
    problem, n_pos = _problem()
    kw = dict(query_specs=[parse_metric("map")], pair_specs=[], n_positive=n_pos)
    local = stream(problem, **kw).provenance()
    sharded = stream(problem, reduce=_OneRank(), **kw).provenance()
    n_blocks = len(plan_blocks(problem.n_q, problem.b))
    assert local == Provenance({ACC: n_blocks}) and not local.sharded
    assert sharded == Provenance({ACC: n_blocks}, sharded=True)
    assert repr(sharded) == f"Provenance(blocks={{'{ACC}': {n_blocks}}}, sharded=True)"


def test_an_image_text_result_adds_up_both_directions_of_every_fold():
    """Image-text: each fold's two rank passes (i2t, t2i), added up; a slice carries it."""
    rng = np.random.default_rng(3)
    images = rng.standard_normal((20, 6)).astype(np.float32)
    captions = np.repeat(images, 2, axis=0) + rng.normal(0, 0.3, (40, 6)).astype(np.float32)
    cap_img = np.repeat(np.arange(20), 2)
    res = rc.evaluate_image_text(images, captions, cap_img, device="numpy", max_memory="1MiB")
    # one fold (every image), two passes of one block each at this size
    assert res.provenance == Provenance({ACC: 2})
    assert res.to_dict()["provenance"]["blocks"] == {ACC: 2}
    sliced = rc.evaluate_image_text(
        images, captions, cap_img, device="numpy", slices={"half": np.arange(20) < 10}
    )
    assert sliced.slices["half=True"].result.provenance == sliced.provenance
