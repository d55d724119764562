"""The pass's two seams (issue 26): the Counter chosen in one ``select()``, and the Reduce
that joins the ranks' states; one ``run_block`` and one ``prepare_problem`` (with a
column window) serve the one-process and the sharded pass.

- ``select`` picks one counter per backend and never a fused one for a sharded pass;
- the scored counters (numba, numpy, torch) are twins on the same masked blocks, pair
  outputs included;
- two column windows of one gallery, each a "rank" in a thread, joined by an in-process
  Reduce that runs every declared state's operation, give the one-process pass bit for
  bit (rank metrics, tie values, positives, negative tail, fixed-threshold counts).

In-process and small: about 3 s on 2 cores (numba's first compile aside).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval_checks.engine._backend import Backend
from retrieval_checks.engine._blocks import RelevanceSource, masked_scores, plan_blocks
from retrieval_checks.engine._counting import TritonCounter, select
from retrieval_checks.engine._inputs import Csr
from retrieval_checks.engine._plan import Window, plan_pass, prepare_problem
from retrieval_checks.engine._reduce import LOCAL, STATES
from retrieval_checks.engine._stream import binning_pass, stream
from retrieval_checks.engine.counting import _kernels
from retrieval_checks.engine.counting._counters import CpuCounter, TorchCounter, sort_within_rows
from retrieval_checks.engine.gpu import _triton
from retrieval_checks.metrics._names import parse_metric

NUMPY = Backend("numpy")
TORCH_CPU = Backend("torch", torch.device("cpu"))


def _data(seed=3, n_q=29, n_g=53, d=6):
    """Small integer embeddings (exact products, many ties) with duplicate rows."""
    rng = np.random.default_rng(seed)
    Q = rng.integers(-2, 3, size=(n_q, d)).astype(np.float32)
    G = rng.integers(-2, 3, size=(n_g, d)).astype(np.float32)
    G[10:20] = G[30:40]  # duplicates: exact ties across labels
    Q[:5] = G[:5]
    return Q, G, rng.integers(0, 4, n_q), rng.integers(0, 4, n_g)


def _no_self(n_q):
    return Csr(np.zeros(n_q + 1, np.int64), np.zeros(0, np.int64))


def _problem(
    Q, G, yq, yg, similarity, backend, window=None, G_local=None, reduce=LOCAL, Q_local=None
):
    n_q, n_g = len(Q), len(G)
    own = _no_self(n_q)
    source = RelevanceSource(q_codes=yq, g_codes=yg, self_pairs=own, n_g=n_g)
    plan = plan_pass(
        [Q, G],
        n_q=n_q,
        n_g=n_g,
        d=Q.shape[1],
        loo=False,
        n_relevant=source.counts(n_q),
        device="cpu" if backend.kind == "torch" else "numpy",
        max_memory="64MB",
        tile=(8, 16),
        pairs=True,
    )
    gallery = G if G_local is None else G_local
    return prepare_problem(
        plan,
        Q if Q_local is None else Q_local,
        gallery,
        n_g=n_g,
        similarity=similarity,
        source=source,
        self_pairs=own,
        window=window,
        reduce=reduce,
    )


def test_select_picks_one_counter_per_backend_and_no_fused_one_for_ranks(monkeypatch):
    monkeypatch.setenv("RC_CPU_COUNTER", "scored")  # the fused CPU counter is opt-in
    yq = np.array([0, 1])
    source = RelevanceSource(q_codes=yq, g_codes=yq, self_pairs=_no_self(2), n_g=2)
    assert isinstance(select(NUMPY, "cosine", source), CpuCounter)
    assert isinstance(select(TORCH_CPU, "cosine", source), CpuCounter)
    assert isinstance(select(TORCH_CPU, "cosine", source, use_kernels=False), TorchCounter)
    with _triton.on_cpu():  # the fused kernel's CPU tests: the torch path would run
        assert isinstance(select(TORCH_CPU, "dot", source, use_kernels=False), TritonCounter)
        assert isinstance(select(TORCH_CPU, "hamming", source, use_kernels=False), TritonCounter)
        # a sharded pass joins its phases over ranks: always a scored counter
        got = select(TORCH_CPU, "dot", source, use_kernels=False, sharded=True)
        assert isinstance(got, TorchCounter)
        assert isinstance(select(NUMPY, "dot", source, use_kernels=False), TorchCounter)
    assert select(NUMPY, "dot", source).fused is False


def _counted(counter, p, fixed):
    """Every output of one counter on every block of ``p`` (a fresh buffer each time)."""
    out = []
    u = np.array([-3.0, 0.0, 2.0, 5.0], np.float32)
    for start, stop in plan_blocks(p.n_q, p.b):
        p._buffers = None
        S, rel, vals = masked_scores(p, start, stop, counter)
        rel_sorted, order = counter.sort_within_rows(vals, rel)
        m = stop - start
        above, tied, tails = counter.count(S, m, p.n_cols, rel.indptr, rel_sorted, -1.0)
        negatives = counter.negatives(S, m, p.n_cols, -1.0, tails)
        binned = np.zeros(u.size + 1, np.int64)
        counter.bin(S, m, p.n_cols, u, binned)
        seed = counter.seed_tail(S, m, p.n_cols, 7, LOCAL)
        out.append(
            (
                counter.host(rel_sorted),
                order,
                above,
                tied,
                np.sort(negatives),
                counter.fixed_fp(S, m, p.n_cols, fixed),
                binned,
                seed,
            )
        )
    return out


_SPECIAL = [-0.0, 0.0, 0.5, -0.5, 1.5, np.inf, -np.inf, 1e-45, -1e-45, 3.4e38, -3.4e38]


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(0, 12), min_size=1, max_size=20),
    picks=st.lists(st.sampled_from(_SPECIAL), min_size=1, max_size=240),
)
def test_sorting_within_rows_is_lexsorts_order_ties_and_signed_zeros_in_place(counts, picks):
    """The numpy sort of relevant scores within rows (one uint64 key per value) gives
    ``np.lexsort((vals, rows))``'s permutation exactly: ties keep their places, ``-0.0``
    and ``0.0`` count as equal (they keep theirs too), infinities and subnormals sort;
    the torch twin gives the same."""
    indptr = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    n = int(indptr[-1])
    vals = np.array([picks[i % len(picks)] for i in range(n)], np.float32)
    rel = Csr(indptr, np.zeros(n, np.int64))
    want = np.lexsort((vals, rel.row_ids()))
    got_sorted, got = sort_within_rows(vals, rel, False)
    np.testing.assert_array_equal(got, want)
    assert got_sorted.tobytes() == vals[want].tobytes()  # -0.0 where lexsort put it
    t_sorted, t_order = sort_within_rows(torch.from_numpy(vals), rel, True)
    np.testing.assert_array_equal(t_order, want)
    assert t_sorted.numpy().tobytes() == vals[want].tobytes()


@pytest.mark.parametrize("similarity", ["dot", "cosine", "neg_l2"])
def test_the_scored_counters_are_twins(similarity):
    """numba, numpy and torch count the same masked blocks alike (the tail seed apart: the
    CPU counters seed from a key histogram, torch from the exact capacity-th score; both
    are valid thresholds, so only their ordering is checked)."""
    Q, G, yq, yg = _data()
    p = _problem(Q, G, yq, yg, similarity, TORCH_CPU)
    fixed = np.array([-1.0, 0.5, 3.0], np.float32)
    runs = {}
    for name in ("numba", "numpy"):
        with _kernels.use(name):
            runs[name] = _counted(CpuCounter(), p, fixed)
    runs["torch"] = _counted(TorchCounter(), p, fixed)
    for name in ("numpy", "torch"):
        for got, want in zip(runs[name], runs["numba"]):
            for a, b in zip(got[:7], want[:7]):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)
            assert got[7] >= want[7] if name == "torch" else got[7] == want[7]


class _ThreadRanks:
    """An in-process Reduce over ``world`` threads: every declared state's operation
    (max, sum, gather in rank order, min) over the threads' values; a block's query rows
    come from the ranks that hold them (each rank's problem holds its own queries)."""

    local = False

    def __init__(self, rank: int, shared: dict):
        self.rank, self.shared = rank, shared

    def __call__(self, state: str, value):
        op = STATES[state]
        slots, barrier = self.shared["slots"], self.shared["barrier"]
        host = value.cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        slots[self.rank] = host
        barrier.wait()
        parts = [slots[r] for r in range(len(slots))]
        barrier.wait()
        if op == "gather":
            got = np.concatenate(parts)
        elif op == "sum":
            got = np.sum(parts, axis=0)
        elif op == "max":
            got = np.max(parts, axis=0)
        else:
            got = np.min(parts, axis=0)
        got = got.astype(host.dtype)
        return torch.from_numpy(got).to(value.device) if isinstance(value, torch.Tensor) else got

    def queries(self, p, start, stop, Qb, qa):
        for q in self.shared["problems"]:  # "broadcast" by the owners of the rows
            lo, hi = max(start, q.q0), min(stop, q.q0 + int(q.Q.shape[0]))
            if lo < hi:
                Qb[lo - start : hi - start] = q.Q[lo - q.q0 : hi - q.q0]
                if q.qa is not None:
                    qa[lo - start : hi - start] = q.qa[lo - q.q0 : hi - q.q0]


def _summary(totals, problem, reduce=LOCAL):
    # the binning pass (precision_at_recall's exact fallback), over every rank
    counts = totals.pair_counts(n_negative=0)
    return {
        "bins": binning_pass(problem, counts, totals.counter, reduce),
        **{f"q:{k}": v for k, v in totals.per_query.items()},
        **{f"{t}:{k}": v for t, d in totals.tie_values.items() for k, v in d.items()},
        "first_p": totals.first_rank["pessimistic"],
        "first_o": totals.first_rank["optimistic"],
        "group": totals.first_group,
        "positives": np.sort(np.concatenate(totals.positives)),
        "tau": np.array([totals.tail.tau]),
        "tail": totals.tail.sorted_values(),
        "fixed_fp": totals.fixed_fp,
    }


@pytest.mark.parametrize(
    "similarity, backend, use_kernels",
    [
        ("cosine", TORCH_CPU, True),
        ("neg_l2", NUMPY, True),
        ("dot", TORCH_CPU, False),  # the torch counter: its tail seed gathers every rank's top
    ],
)
def test_two_column_windows_joined_by_a_reduce_equal_one_process(similarity, backend, use_kernels):
    Q, G, yq, yg = _data(seed=5)
    specs = [parse_metric(m) for m in ("map", "hit_rate@1", "ndcg", "map@R")]
    pairs = [parse_metric(m) for m in ("recall_at_precision@0.5", "pair_recall@t=0.5")]
    n_pos = int((yq[:, None] == yg[None, :]).sum())
    kw = dict(query_specs=specs, pair_specs=pairs, n_positive=n_pos, use_kernels=use_kernels)
    whole = _problem(Q, G, yq, yg, similarity, backend)
    # a small tail capacity: later blocks keep the tail threshold the first ones raised
    want = _summary(stream(whole, **kw), whole)
    bounds = [(0, 21), (21, len(G))]  # the first window ends inside a chunk of 16
    q_bounds = [(0, 12), (12, len(Q))]  # each rank holds its own queries too
    barrier = threading.Barrier(2, timeout=60)
    shared = {"slots": [None, None], "barrier": barrier, "problems": [None, None]}
    got, errors = [None, None], []

    def rank(r):
        try:
            (g0, g1), (q0, q1) = bounds[r], q_bounds[r]
            window = Window(g0, g1, q0, len(Q))
            ranks = _ThreadRanks(r, shared)
            p = _problem(Q, G, yq, yg, similarity, backend, window, G[g0:g1], ranks, Q[q0:q1])
            assert p.windowed and p.n_chunks == (2 if r == 0 else 3) and p.n_q == len(Q)
            shared["problems"][r] = p
            barrier.wait()
            got[r] = _summary(stream(p, reduce=ranks, **kw), p, ranks)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            shared["barrier"].abort()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for r in range(2):
        assert got[r].keys() == want.keys()
        for key in want:
            np.testing.assert_array_equal(got[r][key], want[key], err_msg=f"rank {r}: {key}")


def test_every_exchanged_state_is_declared_with_its_operation():
    """The identity Reduce refuses a state the table does not declare (a new exchange is
    declared once, with how ranks combine it)."""
    assert set(STATES.values()) <= {"max", "sum", "gather", "min"}
    x = np.arange(3)
    assert LOCAL("counts", x) is x
    with pytest.raises(KeyError):
        LOCAL("undeclared", x)
