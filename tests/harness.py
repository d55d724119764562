"""The shared harness per metric family (in the spirit of torchmetrics'
``RetrievalMetricTester``): one routine per family takes metric names and a problem,
computes the dense brute-force reference once (:mod:`reference`, the only reference) and
checks the library's value through every path that must agree with it, with one
tolerance rule (:func:`tolerance`).

- :func:`check_rank`: ``rc.evaluate``'s query metrics (leave-one-out and query/gallery,
  binary and graded relevance, both deterministic tie policies);
- :func:`check_empty_queries`: the ``skip`` / ``zero`` / ``error`` policies for queries
  without a relevant item, on every rank metric;
- :func:`check_pairs`: the pair metrics (``pair_*@t=T``, ``recall_at_precision@P``,
  ``precision_at_recall@Q``), which no tie policy changes;
- :func:`check_grouped`: grouped recall, its groups, interval and per-query record;
- :func:`check_image_text`: i2t / t2i recall, rsum, mean_recall, medr, meanr;
- :func:`check_run`: ``evaluate_run`` on the ranking a score matrix gives (every
  document retrieved and judged), as a dict, as TREC files, as an ANN search's
  ``(indices, scores)`` arrays, with its queries and documents in any order.

It lives beside ``reference.py`` at the top of ``tests/`` (on the path the root conftest
sets), not in ``tests/metrics/``, because the engine's tests (``tests/engine/``) and the
metrics' tests both use it, as they use the reference.

The paths (:data:`RANK_PATHS`): the compiled CPU kernels (``CpuCounter``), the CUDA
code path's vectorised counter run on CPU (``_use_kernels=False``: ``TorchCounter``),
torch on CPU under each ``RC_CPU_COUNTER`` (scored; fused and auto:
``FusedCpuCounter``), query blocks and gallery chunks of one and a few rows/columns
(``tile=``: the way to small blocks, since ``max_memory`` takes no less than 1 MiB,
which holds a small problem in one block; its path checks the option's plumbing);
then the queries permuted (each per-query value moves with its query), and the
gallery permuted (every metric here is invariant: ties are broken by relevance, never
by position). Every run of a path checks its result's ``provenance``: only the
counters the path may reach counted its blocks (:attr:`EnginePath.counters`; a fused
path's fallback included, for the problems the fused pass does not serve), and
``test_every_metric.py`` checks that each path's blocks are all counted by the counter
it is named after. A test passes ``paths=`` to run a part (a hypothesis test draws one path
per example, as the tests did before the harness, so the suite costs what it did).

Metric lists come from the registry (:func:`registered`, :func:`instances`), so a metric
added to ``retrieval_checks/metrics/_registry.py`` is covered by construction; a
registered family the reference cannot compute fails ``test_every_metric.py``'s
coverage test, naming the metric and the fix.

Tolerance, one rule: exact data (small integers, whose float32 scores are exact whatever
the summation order, and every tie a true tie on both sides) agree to 1e-12; float data
(Gaussian rows: float32 scores against the float64 reference) to 1e-6. NaN (a skipped
query) must sit at the same queries on both sides.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest
from reference import (
    aggregate,
    grouped_reference,
    image_text_reference,
    pair_reference,
    query_metric,
    reference,
)

import retrieval_checks as rc
from retrieval_checks.engine.counting import _kernels
from retrieval_checks.metrics import FAMILIES

EXACT_ATOL = 1e-12
FLOAT_ATOL = 1e-6


def tolerance(exact: bool) -> float:
    """The harness's one tolerance rule (see the module docstring)."""
    return EXACT_ATOL if exact else FLOAT_ATOL


# ----------------------------------------------------------------------------- registry
def registered(kind: str, entry: str | None = None) -> tuple[str, ...]:
    """The registered family names of a kind (``query``, ``pair``, ``grouped``,
    ``crossmodal``), optionally of one entry point, in the registry's order."""
    return tuple(
        f.name for f in FAMILIES.values() if f.kind == kind and (entry is None or f.entry == entry)
    )


#: the query families ``rc.evaluate`` computes (ann_recall has its own entry point)
RANK_FAMILIES = registered("query", "evaluate")
PAIR_FAMILIES = registered("pair")
GROUPED_FAMILIES = registered("grouped")
IMAGE_TEXT_FAMILIES = registered("crossmodal")

# the values a family's parameter takes in the harness (the template's letter)
_PARAMS = {"P": ("0.5", "0.9"), "Q": ("0.25", "1.0"), "T": ("0.0", "0.3"), "L": ("0.3",)}
_PARAMS["p"] = ("0.5", "0.8")
_INTEGER_KS = (1, 2, 5)


def instances(family, n_candidates: int = 5) -> list[str]:
    """Metric names of a registered family as a user writes them: its plain name where
    the template has none, else a few values of its parameter (K clipped to the
    smallest candidate count, so that every K is defined on the problem). A family
    whose template also has a plain form (``map``, ``ndcg``, ``mrr``) gets both.
    ``family``: a registered name or a ``Family`` record."""
    f = FAMILIES[family] if isinstance(family, str) else family
    family = f.name
    base, at, _ = f.template.partition("@")
    param = f.param
    if not at or param is None:
        names = [f.template]
        if f.template == f.name and _truncatable(family):
            names += [f"{family}@{k}" for k in _ks(n_candidates)]
        return names
    if param == "K":
        return [f"{base}@{k}" for k in _ks(n_candidates)]
    if param not in _PARAMS:
        raise KeyError(
            f"{f.template}: the harness has no values for the parameter {param!r}; add a "
            "few to tests/harness.py's _PARAMS"
        )
    prefix = f.template[: -len(param)]
    return [prefix + v for v in _PARAMS[param]]


def _truncatable(family: str) -> bool:
    """Whether the library also takes ``family@K`` for a family written without a
    parameter (docs/metrics.md: map@K, mrr@K, ndcg@K, dcg@K): asked of the name parser,
    so a new family that takes a cut is run with it."""
    try:
        rc.canonical_metric_name(f"{family}@5")
    except rc.MetricNameError:
        return False
    return True


def _ks(n_candidates):
    return sorted({min(k, max(1, n_candidates)) for k in _INTEGER_KS})


def rank_metrics(n_candidates: int, families=RANK_FAMILIES) -> list[str]:
    """Every registered rank metric's instances (:func:`instances`)."""
    return [m for f in families for m in instances(f, n_candidates)]


def reference_gap(family) -> str | None:
    """Why the reference cannot compute a registered family (a name or a ``Family``
    record; None: it can): its instances are computed on a small ranking and must give
    finite numbers."""
    kind = (FAMILIES[family] if isinstance(family, str) else family).kind
    probe = np.array([0, 1, 0, 1, 1, 0])
    try:
        for name in instances(family, 3):
            if kind == "query":
                value = query_metric(name, probe)
                aggregate(name, np.array([value, value]))
            elif kind == "pair":
                value = pair_reference(np.array([0.4, 0.9]), np.array([0.1, 0.5]), name)
            elif kind == "crossmodal":
                images = np.eye(3, 4, dtype=np.float32) + 0.1
                ci = np.array([0, 1, 2, 0])
                out = image_text_reference(images, images[ci], ci, ks=_ks(3))
                value = out[name]
            elif kind == "grouped":
                y = np.array([0, 1, 2, 3, 0, 1, 2, 3])
                X = np.eye(4, dtype=np.float32)[[0, 1, 2, 3, 1, 0, 3, 2]]
                value = grouped_reference(X, None, y, None, 1, S=2)["value"]
            else:
                return f"the harness has no tester for kind {kind!r}"
            if not np.isfinite(value):
                return f"{name}: the reference gives {value}"
    except (KeyError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


# ----------------------------------------------------------------------------- problems
@dataclass
class Problem:
    """One retrieval problem: ``G`` None is leave-one-out over ``Q`` (the query ids are
    then the rows). ``relevance``: a bool or grade matrix instead of labels. ``exact``:
    every score exact in float32 (the tolerance, :func:`tolerance`). ``decimals``: the
    reference rounds its float64 scores (duplicated float rows tie again)."""

    Q: np.ndarray
    G: np.ndarray | None
    q_labels: np.ndarray | None = None
    g_labels: np.ndarray | None = None
    relevance: np.ndarray | None = None
    q_ids: np.ndarray | None = None
    g_ids: np.ndarray | None = None
    similarity: str = "cosine"
    exact: bool = False
    decimals: int | None = None
    relevance_level: int = 1
    extra: dict = field(default_factory=dict)

    @property
    def loo(self) -> bool:
        return self.G is None

    def keep(self) -> np.ndarray:
        n_q = len(self.Q)
        if self.loo:
            return ~np.eye(n_q, dtype=bool)
        if self.q_ids is None:
            return np.ones((n_q, len(self.G)), bool)
        return self.q_ids[:, None] != self.g_ids[None, :]

    def min_candidates(self) -> int:
        return int(self.keep().sum(1).min())

    def reference(self, metrics, ties):
        """(per-query values, positive pair scores, negative pair scores)."""
        n = len(self.Q)
        G = self.Q if self.loo else self.G
        gl = self.q_labels if self.loo else self.g_labels
        ids = (np.arange(n), np.arange(n)) if self.loo else (self.q_ids, self.g_ids)
        return reference(
            self.Q,
            G,
            self.q_labels,
            gl,
            metrics,
            q_ids=ids[0],
            g_ids=ids[1],
            relevance=self.relevance,
            similarity=self.similarity,
            ties=ties,
            decimals=self.decimals,
            relevance_level=self.relevance_level,
        )

    def evaluate(self, metrics, **kw):
        args = dict(
            metrics=metrics,
            similarity=self.similarity,
            relevance_level=self.relevance_level,
            **self.extra,
        )
        if self.relevance is not None:
            args["relevance"] = self.relevance
        else:
            args["query_labels"] = self.q_labels
            if not self.loo:
                args["gallery_labels"] = self.g_labels
        if not self.loo and self.q_ids is not None:
            args.update(query_ids=self.q_ids, gallery_ids=self.g_ids)
        args.update(kw)
        return rc.evaluate(self.Q, self.G, **args)

    def permute_queries(self, perm) -> Problem:
        """The queries in the order ``perm`` (leave-one-out: the whole set)."""
        rel = None if self.relevance is None else self.relevance[perm]
        if self.loo and rel is not None:
            rel = rel[:, perm]
        return replace(
            self,
            Q=self.Q[perm],
            q_labels=None if self.q_labels is None else self.q_labels[perm],
            q_ids=None if self.q_ids is None else self.q_ids[perm],
            relevance=rel,
        )

    def permute_gallery(self, perm) -> Problem:
        assert not self.loo
        return replace(
            self,
            G=self.G[perm],
            g_labels=None if self.g_labels is None else self.g_labels[perm],
            g_ids=None if self.g_ids is None else self.g_ids[perm],
            relevance=None if self.relevance is None else self.relevance[:, perm],
        )


def labels_follow_ids(q_ids, q_labels, g_ids, g_labels) -> None:
    """An id names one item, of one label: each gallery item that shares an id (with a
    query, or an earlier gallery item) takes that item's label, in place (the engine
    refuses ids that name items of different labels)."""
    label_of = dict(zip(np.asarray(q_ids).tolist(), np.asarray(q_labels).tolist()))
    for i, g in enumerate(np.asarray(g_ids).tolist()):
        g_labels[i] = label_of.setdefault(g, g_labels[i].item())


def tie_heavy(seed, n_q=12, n_g=20, d=3, n_labels=3, *, loo=False, ids=False, similarity="dot"):
    """Small integer rows in {-2..2}^d: few distinct scores, many exact ties."""
    rng = np.random.default_rng(seed)
    Q = rng.integers(-2, 3, (n_q, d)).astype(np.float32)
    ql = rng.integers(0, n_labels, n_q)
    if loo:
        return Problem(Q, None, ql, similarity=similarity, exact=True)
    G = rng.integers(-2, 3, (n_g, d)).astype(np.float32)
    gl = rng.integers(0, n_labels, n_g)
    q_ids = g_ids = None
    if ids:  # gallery ids from a pool that overlaps the query ids
        q_ids = rng.permutation(n_q)
        g_ids = rng.integers(0, n_q + n_g, n_g)
        labels_follow_ids(q_ids, ql, g_ids, gl)
    return Problem(Q, G, ql, gl, q_ids=q_ids, g_ids=g_ids, similarity=similarity, exact=True)


def gaussian(seed, n_q=15, n_g=30, d=6, n_labels=4, *, loo=False, similarity="cosine"):
    """Gaussian rows: tie-free float scores."""
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=(n_q, d)).astype(np.float32)
    ql = rng.integers(0, n_labels, n_q)
    if loo:
        return Problem(Q, None, ql, similarity=similarity)
    G = rng.normal(size=(n_g, d)).astype(np.float32)
    return Problem(Q, G, ql, rng.integers(0, n_labels, n_g), similarity=similarity)


def hamming_codes(problem: Problem) -> Problem:
    """The problem's rows as binary codes (bool: a bit set where the entry is positive)
    under ``hamming``: at most d + 1 distinct scores, exact ties everywhere."""
    return replace(
        problem,
        Q=problem.Q > 0,
        G=None if problem.loo else problem.G > 0,
        similarity="hamming",
        exact=True,
    )


def graded(problem: Problem, seed, max_grade=3, level=1) -> Problem:
    """The problem with a matrix of grades 0..max_grade instead of labels."""
    rng = np.random.default_rng(seed)
    n_g = len(problem.Q) if problem.loo else len(problem.G)
    grades = rng.integers(0, max_grade + 1, (len(problem.Q), n_g))
    return replace(problem, q_labels=None, g_labels=None, relevance=grades, relevance_level=level)


def with_duplicates(problem: Problem, seed=0) -> Problem:
    """Every gallery row twice (the copy in reverse order, far from the original, so
    in another gallery chunk of a small tile): exact ties between distinct items; float
    data are then compared on scores rounded to 9 decimals."""
    assert not problem.loo
    n = len(problem.G)
    back = np.arange(n)[::-1]
    rel = problem.relevance
    if rel is not None:
        rel = np.concatenate([rel, rel[:, back]], axis=1)
    return replace(
        problem,
        G=np.concatenate([problem.G, problem.G[back]]),
        g_labels=None
        if problem.g_labels is None
        else np.concatenate([problem.g_labels, problem.g_labels[back]]),
        g_ids=None
        if problem.g_ids is None
        else np.concatenate([problem.g_ids, problem.g_ids[back] + 10**6]),
        relevance=rel,
        decimals=None if problem.exact else 9,
    )


# ----------------------------------------------------------------------------- paths
@contextlib.contextmanager
def _env(name, value):
    old = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


#: the CPU kernels' counter in a result's provenance: numba or numpy, whichever
#: ``_kernels.ACCELERATOR`` is when the pass runs
KERNELS = "kernels"


@contextlib.contextmanager
def _torch_threads(most: int | None):
    """At most ``most`` torch threads inside (None: as they are)."""
    if most is None:
        yield
        return
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(min(old, most))
    try:
        yield
    finally:
        torch.set_num_threads(old)


@dataclass(frozen=True)
class EnginePath:
    """One way through the engine: ``rc.evaluate`` keywords, and ``RC_CPU_COUNTER``
    (None: left as it is). ``counters``: the counters that may count its blocks (a
    result's ``provenance.blocks``; :data:`KERNELS` for the CPU kernels), checked on
    every run (None: not checked)."""

    name: str
    kwargs: tuple = ()
    counter: str | None = None
    torch: bool = False
    counters: frozenset | None = None
    threads: int | None = None  # at most this many torch threads while it runs

    def run(self, call, **kw):
        if self.torch:
            pytest.importorskip("torch")
        with (
            _env("RC_CPU_COUNTER", self.counter) if self.counter else contextlib.nullcontext(),
            _torch_threads(self.threads),
        ):
            result = call(**dict(self.kwargs), **kw)
        self.check_counters(result)
        return result

    def allowed(self) -> set[str] | None:
        """The provenance names of :attr:`counters` (None: not checked)."""
        if self.counters is None:
            return None
        return {_kernels.ACCELERATOR if c == KERNELS else c for c in self.counters}

    def check_counters(self, result) -> None:
        """Only the counters this path may reach counted ``result``'s blocks (results
        without a streamed pass, or without a provenance, have nothing to check)."""
        allowed, provenance = self.allowed(), getattr(result, "provenance", None)
        if allowed is None or provenance is None:
            return
        auto = dict(self.kwargs).get("device", "auto") == "auto"
        if auto and "cuda" in str(result.config.get("backend", "")):
            allowed = {"torch", "triton"}  # the device the machine chose: CUDA
        assert set(provenance.counters) <= allowed, (
            f"path {self.name}: counted by {dict(provenance.blocks)} "
            f"(binning {dict(provenance.binning)}), expected only {sorted(allowed)}"
        )

    def __repr__(self):
        return self.name


def _counters_of(kw, counter) -> frozenset | None:
    """The counters a path's options may reach on the CPU (``device="auto"`` on a CUDA
    machine: :meth:`EnginePath.check_counters` allows the CUDA counters; another device:
    None, not checked)."""
    device = kw.get("device", "auto")
    if device not in ("numpy", "torch-cpu", "cpu", "auto"):
        return None
    if not kw.get("_use_kernels", True):
        return frozenset({"torch"})
    if device == "numpy" or counter == "scored":
        return frozenset({KERNELS})
    return frozenset({KERNELS, "fused-cpu"})  # declined blocks: the kernels count them


def _p(name, counter=None, threads=None, **kw):
    torch = kw.get("device") == "torch-cpu"
    return EnginePath(name, tuple(kw.items()), counter, torch, _counters_of(kw, counter), threads)


RANK_PATHS = (
    _p("numpy", device="numpy"),
    _p("numpy-vectorised", device="numpy", _use_kernels=False),
    _p("torch-scored", "scored", device="torch-cpu"),
    # two workers, as on this project's machines: on a 16-core host the cases' small
    # blocks fell into 1-row panels, which the fused pass declines (found on an H200's host)
    _p("torch-fused", "fused", 2, device="torch-cpu"),
    _p("torch-auto", "auto", device="torch-cpu"),
    _p("tile-1x7", device="numpy", tile=(1, 7)),
    _p("tile-3x5-vectorised", device="numpy", tile=(3, 5), _use_kernels=False),
    # blocks of 4 rows on 2 workers: panels of 2 rows (the fused pass declines a block
    # of 1-row panels where their products are not the scored path's bits, as with
    # blocks of 2 rows on 2 workers: then the scored counter would count every block)
    _p("tile-4x3-torch-fused", "fused", 2, device="torch-cpu", tile=(4, 3)),
    _p("max_memory-1MiB", device="numpy", max_memory="1MiB"),
)
#: the paths of a problem drawn by hypothesis: one per example (tests/engine)
TILES = (None, (1, 1), (1, 7), (2, 3), (3, 5), (7, 13), (64, 1000))
PATHS_BY_NAME = {p.name: p for p in RANK_PATHS}


def path(device="auto", tile=None, kernels=True, counter=None) -> EnginePath:
    """A path from its parts (what a hypothesis test draws); ``device="auto"`` is the
    backend a user gets (torch on CPU where torch is installed)."""
    kw = dict(device=device, _use_kernels=kernels)
    if tile is not None:
        kw["tile"] = tile
    return _p(f"{device}-{tile}-{'kernels' if kernels else 'vectorised'}-{counter}", counter, **kw)


# ----------------------------------------------------------------------------- comparisons
def assert_per_query(got, want, atol, what):
    """NaN at the same queries, the rest within ``atol``."""
    got, want = np.asarray(got, float), np.asarray(want, float)
    assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: skipped queries differ"
    np.testing.assert_allclose(
        got[~np.isnan(got)], want[~np.isnan(want)], atol=atol, rtol=0, err_msg=what
    )


def assert_rank_result(result, ref_values, atol, what=""):
    """Per-query values and means of ``result`` against the reference's."""
    for name, ref in ref_values.items():
        label = f"{name} [{what}]"
        assert_per_query(result.per_query[name], ref, atol, label)
        if (~np.isnan(ref)).any():
            assert result[name] == pytest.approx(aggregate(name, ref), abs=atol), label
    some = next(iter(ref_values.values()), None)
    if some is not None:
        assert result.n_skipped == int(np.isnan(some).sum()), f"n_skipped [{what}]"


def check_rank(
    problem: Problem,
    metrics,
    *,
    ties="pessimistic",
    paths=RANK_PATHS,
    permute=True,
    seed=0,
):
    """``rc.evaluate``'s per-query values and means of ``metrics`` equal the reference
    through every path of ``paths``, then with the queries and the gallery permuted;
    a problem with no candidate or no relevant item must be refused as the library
    documents it. Returns the reference's per-query values."""
    assert paths or permute, "check_rank with no path and no permutation checks nothing"
    atol = tolerance(problem.exact)
    if problem.min_candidates() == 0:
        with pytest.raises(rc.InputError, match="no gallery item left"):
            problem.evaluate(metrics)
        return None
    ref, _, _ = problem.reference(metrics, ties)
    if all(np.isnan(v).all() for v in ref.values()):
        with pytest.raises(rc.EmptyQueriesError):
            problem.evaluate(metrics, ties=ties)
        return ref
    for p in paths:
        res = p.run(problem.evaluate, metrics=metrics, ties=ties)
        assert_rank_result(res, ref, atol, p.name)
    if permute:
        rng = np.random.default_rng(seed)
        pq = rng.permutation(len(problem.Q))
        res = problem.permute_queries(pq).evaluate(metrics, ties=ties)
        assert_rank_result(res, {m: v[pq] for m, v in ref.items()}, atol, "queries permuted")
        if not problem.loo:
            pg = rng.permutation(len(problem.G))
            res = problem.permute_gallery(pg).evaluate(metrics, ties=ties)
            assert_rank_result(res, ref, atol, "gallery permuted")
    return ref


def check_empty_queries(problem: Problem, metrics, *, ties="pessimistic"):
    """The empty-query policies (docs/metrics.md) on a problem with queries without a
    relevant item: ``skip`` leaves them out and counts them, ``zero`` scores them 0 (rank
    metrics: the candidates + 1) in every mean, ``error`` refuses naming how many."""
    ref, _, _ = problem.reference(metrics, ties)
    empty = np.isnan(next(iter(ref.values())))
    assert empty.any() and not empty.all(), "the problem needs empty and non-empty queries"
    assert_rank_result(problem.evaluate(metrics, ties=ties), ref, tolerance(problem.exact), "skip")
    rank_after = problem.keep().sum(1) + 1.0
    zero = {}
    for name, values in ref.items():
        filled = values.copy()
        filled[empty] = rank_after[empty] if name in ("medr", "meanr") else 0.0
        zero[name] = filled
    res = problem.evaluate(metrics, ties=ties, empty_queries="zero")
    assert_rank_result(res, zero, tolerance(problem.exact), "zero")
    with pytest.raises(rc.EmptyQueriesError, match=f"{int(empty.sum())} of {empty.size} queries"):
        problem.evaluate(metrics, ties=ties, empty_queries="error")


def check_pairs(
    problem: Problem,
    metrics,
    *,
    paths=RANK_PATHS,
    policies=("optimistic", "average"),
    permute=True,
    seed=0,
):
    """Pair metrics equal the full threshold sweep of the reference through every path
    and under the tie ``policies`` besides the default (none changes them), and under
    permutations."""
    assert paths or policies or permute, "check_pairs with nothing to run checks nothing"
    _, pos, neg = problem.reference([], "pessimistic")
    if pos.size == 0:
        with pytest.raises(rc.InputError):
            problem.evaluate(metrics)
        return
    want = {rc.canonical_metric_name(m): pair_reference(pos, neg, m) for m in metrics}
    atol = tolerance(problem.exact)
    runs = [(p.name, lambda p=p: p.run(problem.evaluate, metrics=metrics)) for p in paths]
    runs += [(f"ties={t}", lambda t=t: problem.evaluate(metrics, ties=t)) for t in policies]
    if permute:
        rng = np.random.default_rng(seed)
        pq = rng.permutation(len(problem.Q))
        runs.append(("queries permuted", lambda: problem.permute_queries(pq).evaluate(metrics)))
        if not problem.loo:
            pg = rng.permutation(len(problem.G))
            runs.append(("gallery permuted", lambda: problem.permute_gallery(pg).evaluate(metrics)))
    for what, run in runs:
        res = run()
        for name, value in want.items():
            assert res[name] == pytest.approx(value, abs=atol), f"{name} [{what}]"


GROUPED_PATHS = tuple(
    PATHS_BY_NAME[n] for n in ("numpy", "numpy-vectorised", "torch-scored", "tile-1x7")
)


def check_grouped(
    problem: Problem,
    ks,
    *,
    ties="pessimistic",
    group_size=5,
    group_seed=3,
    repeats=1,
    paths=None,
    permute=True,
    seed=0,
):
    """Grouped recall@k for each k: value, groups, standard error, interval, per-query
    record and counts equal :func:`reference.grouped_reference` on every path and with
    the items permuted (the partition depends on the labels only)."""
    metrics = [f"grouped_recall@{k}" for k in ks]
    G = None if problem.loo else problem.G
    want = {
        k: grouped_reference(
            problem.Q,
            G,
            problem.q_labels,
            problem.g_labels,
            k,
            S=group_size,
            seed=group_seed,
            repeats=repeats,
            q_ids=problem.q_ids,
            g_ids=problem.g_ids,
            similarity=problem.similarity,
            ties=ties,
        )
        for k in ks
    }
    opts = dict(ties=ties, group_size=group_size, group_seed=group_seed, group_repeats=repeats)
    for p in GROUPED_PATHS if paths is None else paths:
        res = p.run(problem.evaluate, metrics=metrics, **opts)
        for k in ks:
            assert_grouped_result(res, f"grouped_recall@{k}", want[k], p.name)
    if permute:
        pq = np.random.default_rng(seed).permutation(len(problem.Q))
        res = problem.permute_queries(pq).evaluate(metrics, **opts)
        for k in ks:
            g = res.grouped[f"grouped_recall@{k}"]
            assert g.value == pytest.approx(want[k]["value"], abs=EXACT_ATOL), "permuted"
            np.testing.assert_array_equal(g.per_query, want[k]["per_query"][pq])


def assert_grouped_result(res, name, bf, what=""):
    """Everything a grouped result reports equals :func:`reference.grouped_reference`'s
    record ``bf``."""
    atol = EXACT_ATOL  # a mean of 0/1 hits: exact on every path
    g = res.grouped[name]
    assert res[name] == pytest.approx(bf["value"], abs=atol), what
    assert g.value == res[name]
    np.testing.assert_allclose(g.group_values, bf["group_values"], rtol=0, atol=atol)
    assert g.n_groups == bf["r"]
    assert g.std_error == pytest.approx(bf["se"], abs=atol)
    assert g.group_std == pytest.approx(bf["group_std"], abs=atol)
    assert g.interval == pytest.approx((bf["low"], bf["high"]), abs=atol)
    assert res.intervals[name] == g.interval
    np.testing.assert_array_equal(g.per_query, bf["per_query"])  # NaN where equal NaN
    np.testing.assert_array_equal(g.group_of_query, bf["group_of_query"])
    np.testing.assert_array_equal(g.dropped_labels, bf["dropped"])
    used = int((~np.isnan(bf["per_query"])).sum())
    dropped = int((bf["group_of_query"] < 0).sum())
    assert (g.n_queries_used, g.n_queries_skipped, g.n_queries_dropped) == (
        used,
        bf["per_query"].size - used - dropped,
        dropped,
    ), what


IMAGE_TEXT_PATHS = (
    _p("numpy", device="numpy"),
    _p("torch-cpu", device="cpu"),
    _p("max_memory-1MiB", device="numpy", max_memory="1MiB"),
)


def check_image_text(
    images,
    captions,
    caption_image,
    metrics=None,
    *,
    ties="pessimistic",
    similarity="cosine",
    exact=False,
    paths=IMAGE_TEXT_PATHS,
    permute=True,
    seed=0,
):
    """Every image-text metric equals :func:`reference.image_text_reference` on every
    path, with the captions in any order and the images renumbered."""
    metrics = list(rc.IMAGE_TEXT_METRICS) if metrics is None else list(metrics)
    ks = {int(m.rpartition("@")[2]) for m in metrics if "_recall@" in m}
    want = image_text_reference(
        images, captions, caption_image, ties=ties, ks=ks, similarity=similarity
    )
    atol = tolerance(exact)

    def compare(res, what):
        for name in metrics:
            assert res[name] == pytest.approx(want[name], abs=atol), f"{name} [{what}]"

    def call(I, C, ci, **kw):
        return rc.evaluate_image_text(
            I, C, ci, metrics=metrics, ties=ties, similarity=similarity, n_resamples=0, **kw
        )

    for p in paths:
        compare(p.run(lambda **kw: call(images, captions, caption_image, **kw)), p.name)
    if permute:
        rng = np.random.default_rng(seed)
        pc = rng.permutation(len(captions))
        compare(call(images, captions[pc], caption_image[pc]), "captions permuted")
        pi = rng.permutation(len(images))
        new_index = np.argsort(pi)  # image pi[j] is now image j
        compare(call(images[pi], captions, new_index[caption_image]), "images permuted")
    return want


# ----------------------------------------------------------------------------- runs
def run_from_scores(scores, grades):
    """``({qid: {docid: score}}, {qid: {docid: grade}})``: every document retrieved and
    judged, as ``rc.evaluate`` sees a gallery."""
    n_q, n_d = scores.shape
    run = {f"q{i}": {f"d{j}": float(scores[i, j]) for j in range(n_d)} for i in range(n_q)}
    qrels = {f"q{i}": {f"d{j}": int(grades[i, j]) for j in range(n_d)} for i in range(n_q)}
    return run, qrels


def _write_trec(run, qrels, folder):
    lines = []
    for q, docs in run.items():
        ranked = sorted(docs.items(), key=lambda x: -x[1])
        lines += [f"{q} Q0 {d} {r} {s!r} tag" for r, (d, s) in enumerate(ranked, 1)]
    (folder / "run").write_text("\n".join(lines) + "\n")
    lines = [f"{q} 0 {d} {g}" for q, docs in qrels.items() for d, g in docs.items()]
    (folder / "qrels").write_text("\n".join(lines) + "\n")
    return folder / "run", folder / "qrels"


def check_run(scores, grades, metrics, *, ties="pessimistic", level=1, exact=True, seed=0):
    """``evaluate_run`` on the ranking of a score matrix (every document retrieved and
    judged) equals the reference's per-query values (taken from the same matrix) as a
    dict, as TREC files, as an ANN search's ``(indices, scores)`` arrays, with queries
    and documents in any order."""
    evaluate_run = rc.evaluate_run
    scores = np.asarray(scores, np.float64)
    grades = np.asarray(grades)
    rel = grades >= level
    order = [_ranked(scores[i], rel[i], grades[i], ties) for i in range(scores.shape[0])]
    want = {m: np.array([query_metric(m, r, g) for r, g in order]) for m in metrics}
    atol = tolerance(exact)
    run, qrels = run_from_scores(scores, grades)
    rng = np.random.default_rng(seed)
    shuffled = {
        q: dict(sorted(run[q].items(), key=lambda _: rng.random()))
        for q in rng.permutation(list(run))
    }

    def compare(res, what, prefix="q"):
        ids = [str(q) for q in res.query_ids]
        for m, ref in want.items():
            got = np.array([res.per_query[m][ids.index(f"{prefix}{i}")] for i in range(len(ref))])
            assert_per_query(got, ref, atol, f"{m} [{what}]")
            if (~np.isnan(ref)).any():
                assert res[m] == pytest.approx(aggregate(m, ref), abs=atol), f"{m} [{what}]"

    kw = dict(ties=ties, relevance_level=level)
    compare(evaluate_run(run, qrels, metrics, **kw), "dict")
    compare(evaluate_run(shuffled, qrels, metrics, **kw), "dict, any order")
    with tempfile.TemporaryDirectory() as tmp:
        run_file, qrels_file = _write_trec(run, qrels, Path(tmp))
        compare(evaluate_run(run_file, qrels_file, metrics, **kw), "TREC files")
    # an ANN search's arrays: row i is query "i", its columns the documents in any order
    n_q, n_d = scores.shape
    columns = np.array([rng.permutation(n_d) for _ in range(n_q)])
    ann_qrels = {i: {j: int(grades[i, j]) for j in range(n_d)} for i in range(n_q)}
    ann = (columns, np.take_along_axis(scores, columns, axis=1))
    compare(evaluate_run(ann, ann_qrels, metrics, **kw), "(indices, scores)", prefix="")
    return want


def _ranked(scores_row, rel_row, grade_row, ties):
    from reference import sorted_relevance

    keep = np.ones(scores_row.size, bool)
    return sorted_relevance(scores_row, rel_row, keep, ties, grade_row)
