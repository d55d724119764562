"""Edge cases for the fused main-pass Triton kernel (engine/gpu/_triton.py), run in Triton's
interpreter on the CPU: tiny and one-tile galleries, one query, d = 1, everything tied,
empty and all-relevant rows, rows on both sides of the linear/binary-search switch,
8 and 9 self items, duplicate ids, graded and explicit relevance spanning many tiles,
pair thresholds beyond every score, rows scaled by 1e15 / 1e-15 under screening, zero
rows, 1- and 1000-bit Hamming codes and other tile shapes.

Every case is compared with ``==`` against two independent paths: the CPU kernels
(``device="numpy"``) and the torch path without the kernel (``_use_kernels=False``
outside :func:`_triton.on_cpu`); the result's provenance proves the kernel counted every
block (or, with 9 self items, that it handed the block back to the torch path).

Cost: about 21 CPU-s for the default run (issue 27: 119 worker-s before), each problem
sized by the tiles it must cross (16 x 32 tiles in the interpreter: 20 items span 2 x 1
with a partial one); the kernel's counts do not depend on the tie policy, so a test runs
``ties="average"`` and compares every policy's values (``tie_values``). The other tie
policies, tile shapes, similarities and relevance levels with ``--rc-exhaustive``.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import retrieval_checks as rc  # noqa: E402
from retrieval_checks.engine.gpu import _triton  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1" or (
    "retrieval_checks.engine.gpu._triton_kernels" in sys.modules and not _triton._interpreting()
):
    pytest.skip(
        "TRITON_INTERPRET is not 1 in this process: the kernel would need a GPU",
        allow_module_level=True,
    )

from interpreter_check import interpreter_blocker  # noqa: E402

if interpreter_blocker():  # an interpreter that cannot run any kernel (triton 3.6 + numpy 2.4)
    pytest.skip(interpreter_blocker(), allow_module_level=True)

RANKED = ["map", "map@R", "hit_rate@1", "mrr", "meanr", "precision@3"]
PAIRS = [
    "pair_recall@t=0.5",
    "pair_precision@t=-0.5",
    "recall_at_precision@0.5",
    "precision_at_recall@0.5",
]
TIES = ["pessimistic", "optimistic", "average"]


def _one_label_per_id(ids, labels, n_q=None):
    """The labels with each id's items given its first item's label: an id names one
    item, and the engine refuses an id held by items of different labels. ``n_q``: the
    first ``n_q`` of ``ids`` / ``labels`` are the queries; returns (query, gallery)."""
    _, first, inv = np.unique(ids, return_index=True, return_inverse=True)
    out = labels[first][inv.ravel()]
    return out if n_q is None else (out[:n_q], out[n_q:])


def _ints(rng, n, d, lo=-2, hi=3):
    """Small integers: exact products in any summation order, many ties."""
    return rng.integers(lo, hi, size=(n, d)).astype(np.float32)


def _check(args, *, metrics=RANKED, screen=0, tile=None, fused=True, **kw):
    """The kernel's values equal the CPU kernels' and the torch path's, with ``==``;
    every block was counted by the kernel (``fused``), or none (handed back to the torch
    path), as the result's provenance records it."""
    kw = dict(metrics=metrics, empty_queries="skip", **kw)
    ref = rc.evaluate(*args, device="numpy", **kw)
    torch_path = rc.evaluate(*args, device="torch-cpu", _use_kernels=False, tile=tile, **kw)
    with _triton.on_cpu(screen=screen):
        got = rc.evaluate(*args, device="torch-cpu", _use_kernels=False, tile=tile, **kw)
    assert got.provenance.counter == ("triton" if fused else "torch"), got.provenance
    for m in metrics:
        if m in ref.per_query:
            np.testing.assert_array_equal(got.per_query[m], ref.per_query[m], err_msg=m)
            np.testing.assert_array_equal(got.per_query[m], torch_path.per_query[m], err_msg=m)
        else:
            assert got[m] == ref[m] == torch_path[m], (m, got[m], ref[m], torch_path[m])
    _same_tie_values(got, ref, torch_path)
    return got, ref


def _same_tie_values(got, *refs):
    """Every metric's value under each tie policy and at both extremes over tie orders
    (``tie_values``): the kernel returns counts (items above, items tied) that no tie
    policy enters, so one launch under ``ties="average"`` checks the counts behind
    every policy (run the policies one by one with --rc-exhaustive)."""
    for ref in refs:
        np.testing.assert_equal(dict(got.tie_values), dict(ref.tie_values))


@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
def test_tiny_shapes(similarity):
    """One query against a gallery beyond one 32-column tile; d = 1 (dot, neg_l2: cosine
    refuses zero rows) and d = 17, not a multiple of BLOCK_K = 16 (two k-steps, the
    second partial), over a partial second row tile."""
    rng = np.random.default_rng(1)
    X = _ints(rng, 40, 6)
    y = rng.integers(0, 4, 40)
    _check((X[:1], X), query_labels=y[:1], gallery_labels=y, similarity=similarity)
    if similarity != "cosine":
        _check((_ints(rng, 20, 1),), query_labels=rng.integers(0, 3, 20), similarity=similarity)
    _check((_ints(rng, 20, 17),), query_labels=rng.integers(0, 3, 20), similarity=similarity)


# the tile edges are the same masks under every similarity: dot by default
@pytest.mark.default_cases(dict(similarity="dot"))
@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
def test_galleries_around_one_tile(similarity):
    """Galleries below one 32-column tile, of exactly one and of one more."""
    rng = np.random.default_rng(1)
    for n in (6, 31, 32, 33):
        _check(
            (_ints(rng, n, 5),),
            query_labels=rng.integers(0, 3, n),
            similarity=similarity,
            metrics=["map", "hit_rate@1", "mrr", "meanr"],
        )


# each similarity and each tie policy once (a Latin square); the 3 x 3 with --rc-exhaustive
@pytest.mark.default_cases(
    dict(similarity="cosine", ties="pessimistic"),
    dict(similarity="dot", ties="optimistic"),
    dict(similarity="neg_l2", ties="average"),
)
@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
@pytest.mark.parametrize("ties", TIES)
def test_everything_tied(similarity, ties):
    """All embeddings identical: every score ties, under every tie policy and screening."""
    rng = np.random.default_rng(2)
    X = np.ones((20, 7), np.float32)  # 2 x 1 tiles, the second partial
    got, _ = _check(
        (X,),
        query_labels=rng.integers(0, 3, 20),
        similarity=similarity,
        ties=ties,
        screen="bf16",
    )
    assert got.tied_share > 0.9


# the kernel's counts do not depend on the policy: one policy (every policy's values
# through tie_values), the others with --rc-exhaustive
@pytest.mark.default_cases(dict(ties="average"))
@pytest.mark.parametrize("ties", TIES)
def test_empty_and_all_relevant_rows_in_every_empty_queries_mode(ties):
    rng = np.random.default_rng(3)
    X = _ints(rng, 30, 6)
    y = np.arange(30)
    y[:10] = 0  # ten queries with nine relevant items each, twenty with none
    for mode in ("skip", "zero"):
        kw = dict(query_labels=y, similarity="dot", ties=ties)
        with _triton.on_cpu():
            got = rc.evaluate(
                X, metrics=RANKED, device="torch-cpu", _use_kernels=False, empty_queries=mode, **kw
            )
        ref = rc.evaluate(X, metrics=RANKED, device="numpy", empty_queries=mode, **kw)
        assert got.provenance.counter == "triton", got.provenance
        for m in RANKED:
            np.testing.assert_array_equal(got.per_query[m], ref.per_query[m], err_msg=f"{m} {mode}")
        _same_tie_values(got, ref)
        assert np.isnan(got.per_query["map"]).sum() == (20 if mode == "skip" else 0)  # skipped: NaN
    from retrieval_checks.errors import EmptyQueriesError

    with _triton.on_cpu(), pytest.raises(EmptyQueriesError):
        rc.evaluate(
            X,
            query_labels=y,
            metrics=["map"],
            similarity="dot",
            device="torch-cpu",
            _use_kernels=False,
            empty_queries="error",
        )
    _check((X,), query_labels=np.zeros(30, int), similarity="dot", ties=ties)  # every item relevant


@pytest.mark.default_cases(
    dict(screen=0, ties="average"),
    dict(screen="bf16", ties="pessimistic"),
    dict(screen="tf32", ties="optimistic"),
)
@pytest.mark.parametrize("screen", [0, "bf16", "tf32"])
@pytest.mark.parametrize("ties", TIES)
def test_many_relevant_beside_few_in_one_block(screen, ties):
    """19 relevant items in some rows (over LINEAR_MAX: binary-search counting) and 1 in
    the others, in the same block of 2 x 1 tiles; integer (tied) and float data."""
    rng = np.random.default_rng(4)
    y = np.concatenate([np.zeros(20, int), np.arange(1, 11) // 2 + 1])
    _check((_ints(rng, 30, 8),), query_labels=y, similarity="cosine", ties=ties, screen=screen)
    Xf = rng.standard_normal((30, 8)).astype(np.float32)
    Xf[1::4] = Xf[0::4]
    _check((Xf,), query_labels=y, similarity="neg_l2", ties=ties, screen=screen)


@pytest.mark.default_cases(dict(r=16, ties="average"), dict(r=17, ties="average"))
@pytest.mark.parametrize("r", [16, 17])
@pytest.mark.parametrize("ties", TIES)
def test_linear_counting_boundary(r, ties, monkeypatch):
    """Rows with exactly LINEAR_MAX (16) relevant items (the linear count) and with one
    more (binary search), beside rows with one, in one block of 2 x 1 tiles. The counts
    do not depend on the tie policy: ``average`` checks every policy's values through
    ``tie_values``; each policy on its own with --rc-exhaustive."""
    assert _triton.LINEAR_MAX == 16
    linear = []
    real = _triton._count
    monkeypatch.setattr(
        _triton, "_count", lambda L, rs, r_max, *a: linear.append(a[-1]) or real(L, rs, r_max, *a)
    )
    rng = np.random.default_rng(r)
    y = np.concatenate([np.zeros(r + 1, int), np.arange(1, 15) // 2 + 1])
    _check(
        (_ints(rng, y.size, 5),),
        query_labels=y,
        similarity="dot",
        ties=ties,
        screen="bf16",
        metrics=RANKED + PAIRS,
    )
    assert linear and set(linear) == {r == 16}, linear  # the branch each side of the switch


@pytest.mark.parametrize("k,fused", [(8, True), (9, False)])
def test_eight_self_items_on_the_kernel_nine_on_the_torch_path(k, fused):
    """A query with k gallery items carrying its id: 8 are masked in the kernel, 9 send
    the block to the torch path; the numbers are the same either way."""
    rng = np.random.default_rng(5)
    Q, G = _ints(rng, 20, 5), _ints(rng, 50, 5)
    gid = np.arange(50) + 100
    gid[:k] = 0
    gid[20 : 20 + k] = 1
    ql, gl = _one_label_per_id(np.concatenate([np.arange(20), gid]), rng.integers(0, 3, 70), n_q=20)
    _check(
        (Q, G),
        query_labels=ql,
        gallery_labels=gl,
        query_ids=np.arange(20),
        gallery_ids=gid,
        similarity="dot",
        fused=fused,
        metrics=RANKED + PAIRS,
    )
    X = _ints(rng, 50, 5)
    qid = np.arange(50)
    qid[:k] = 7  # leave-one-out with k queries sharing one id
    _check(
        (X,),
        query_labels=_one_label_per_id(qid, rng.integers(0, 3, 50)),
        query_ids=qid,
        similarity="cosine",
        fused=fused,
    )


def test_duplicate_gallery_ids_and_no_ids():
    rng = np.random.default_rng(6)
    Q, G = _ints(rng, 25, 5), _ints(rng, 70, 5)
    ql, gl = rng.integers(0, 3, 25), rng.integers(0, 3, 70)
    gid = rng.integers(0, 30, 70)
    qlo, glo = _one_label_per_id(np.concatenate([np.arange(25), gid]), np.concatenate([ql, gl]), 25)
    _check(
        (Q, G),
        query_labels=qlo,
        gallery_labels=glo,
        query_ids=np.arange(25),
        gallery_ids=gid,
        similarity="cosine",
    )
    _check((Q, G), query_labels=ql, gallery_labels=gl, similarity="neg_l2")
    _check(
        (Q, G[:1]),
        query_labels=ql,
        gallery_labels=gl[:1],
        similarity="dot",
        metrics=["map", "hit_rate@1", "mrr", "meanr"],
    )  # a gallery of one item


@pytest.mark.default_cases(dict(level=1, ties="average"), dict(level=3, ties="pessimistic"))
@pytest.mark.parametrize("level", [1, 2, 3])
@pytest.mark.parametrize("ties", ["pessimistic", "average"])
def test_graded_relevance_with_many_grades(level, ties):
    """Grades 0..5 on up to 24 items per row (over 16 for some rows: both counting
    branches), the relevance level at 1 and 3 (2 as well with --rc-exhaustive);
    ``average`` also checks the pessimistic values (``tie_values``)."""
    rng = np.random.default_rng(7)
    X = _ints(rng, 40, 6)
    grades = {
        i: {
            int(j): int(rng.integers(0, 6))
            for j in rng.choice(40, size=int(rng.integers(0, 25)), replace=False)
        }
        for i in range(40)
    }
    _check(
        (X, X),
        relevance=grades,
        relevance_level=level,
        similarity="dot",
        ties=ties,
        query_ids=np.arange(40),
        gallery_ids=np.arange(40),
        metrics=RANKED + ["ndcg", "ndcg@5"],
    )


# three gallery tiles by default; the former ten (300 items) with --rc-exhaustive
@pytest.mark.default_cases(dict(n_g=80))
@pytest.mark.parametrize("n_g", [80, 300])
@pytest.mark.parametrize("screen", [0, "bf16"])
def test_explicit_relevance_unsorted_across_many_tiles(screen, n_g):
    """Up to 40 relevant columns per row, unsorted, spread over three 32-column tiles
    (the last partial); a first block whose queries have none (with the pair outputs)."""
    rng = np.random.default_rng(8)
    Q, G = _ints(rng, 32, 6), _ints(rng, n_g, 6)  # two blocks of 16 queries (tile=(16, 32))
    rel = {
        i: []
        if i < 16
        else rng.permutation(rng.choice(n_g, size=int(rng.integers(1, 40)), replace=False)).tolist()
        for i in range(32)
    }
    got, _ = _check(
        (Q, G),
        relevance=rel,
        similarity="dot",
        screen=screen,
        metrics=RANKED + PAIRS,
        tile=(16, 32),
    )
    # two blocks of 16 queries, the first without relevant items
    assert dict(got.provenance.blocks) == {"triton": 2}, got.provenance
    ids = np.arange(32)
    self_rel = {
        i: [i] + rng.choice(32, size=5, replace=False).tolist() for i in range(32)
    }  # self pairs listed
    _check(
        (Q, Q),
        relevance=self_rel,
        query_ids=ids,
        gallery_ids=ids,
        similarity="cosine",
        screen=screen,
        metrics=RANKED + PAIRS,
    )


EXTREME = [
    "pair_precision@t=1000",
    "pair_recall@t=1000",
    "pair_f1@t=1000",
    "pair_precision@t=-1000",
    "pair_recall@t=-1000",
    "pair_f1@t=-1000",
    "recall_at_precision@1.0",
    "recall_at_precision@0.01",
    "precision_at_recall@0.01",
    "precision_at_recall@1.0",
]


@pytest.mark.default_cases(
    dict(similarity="dot", screen=0),
    dict(similarity="neg_l2", screen="bf16"),
    dict(similarity="dot", screen="tf32"),
)
@pytest.mark.parametrize("screen", [0, "bf16", "tf32"])
@pytest.mark.parametrize("similarity", ["dot", "neg_l2"])
def test_pair_thresholds_beyond_every_score(similarity, screen):
    """Fixed thresholds above and below every score; recall_at_precision at 1.0 and 0.01;
    several blocks (the tail threshold rises between them)."""
    rng = np.random.default_rng(9)
    X = _ints(rng, 40, 6)  # three blocks of 16 queries (tile=(16, 16)), two gallery tiles
    y = rng.integers(0, 6, 40)
    got, _ = _check(
        (X,),
        query_labels=y,
        similarity=similarity,
        screen=screen,
        metrics=["map"] + EXTREME,
        tile=(16, 16),
    )
    # three blocks: the tail's threshold carried between them
    assert dict(got.provenance.blocks) == {"triton": 3}, got.provenance
    assert got["pair_recall@t=1000"] == 0.0 and got["pair_recall@t=-1000"] == 1.0


@pytest.mark.default_cases(
    dict(scale=1e15, similarity="cosine"),
    dict(scale=1e-15, similarity="dot"),
    dict(scale=1e15, similarity="neg_l2"),
    dict(scale=1e-15, similarity="cosine"),
)
@pytest.mark.parametrize("scale", [1e15, 1e-15])
@pytest.mark.parametrize("similarity", ["cosine", "dot", "neg_l2"])
def test_rows_scaled_far_from_one_under_screening(scale, similarity):
    """A third of the rows scaled by 1e15 or 1e-15 (norms far from 1: the screening
    bound's size), and near ties a few ulps apart, for fp32, bf16 and TF32 screening."""
    rng = np.random.default_rng(10)
    X = _ints(rng, 16, 6)  # one tile each: the bound is per pair, not per tile position
    X[::3] *= np.float32(scale)
    y = rng.integers(0, 5, 16)
    base = rng.standard_normal((2, 16)).astype(np.float32)
    near = np.array(
        [b * np.float32(1 + k * 2.0**-23) for b in base for k in range(-4, 4)], np.float32
    )
    near_y = np.array(
        [g if k % 2 == 0 else 100 + 10 * g + k for g in range(2) for k in range(-4, 4)]
    )
    for screen in (0, "bf16", "tf32"):
        _check(
            (X,),
            query_labels=y,
            similarity=similarity,
            screen=screen,
            metrics=RANKED[:4] + PAIRS[:2],
        )
        _check(
            (near * np.float32(scale),),
            query_labels=near_y,
            similarity=similarity,
            screen=screen,
            metrics=RANKED[:5],
        )


@pytest.mark.parametrize("similarity", ["dot", "neg_l2"])
def test_zero_rows(similarity):
    rng = np.random.default_rng(11)
    X = _ints(rng, 16, 6)  # one tile: a zero row's scores do not depend on where it lies
    X[::4] = 0
    for screen in (0, "bf16", "tf32"):
        _check(
            (X,),
            query_labels=rng.integers(0, 5, 16),
            similarity=similarity,
            screen=screen,
            metrics=RANKED[:4] + ["pair_recall@t=-0.5"],
        )


# every width under ties="average" (every policy's values through tie_values); the
# policies one by one with --rc-exhaustive
@pytest.mark.default_cases(
    dict(bits=1, ties="average"), dict(bits=65, ties="average"), dict(bits=1000, ties="average")
)
@pytest.mark.parametrize("bits", [1, 65, 1000])
@pytest.mark.parametrize("ties", TIES)
def test_hamming_codes_of_one_65_and_1000_bits(bits, ties):
    rng = np.random.default_rng(bits)
    B = rng.integers(0, 2, size=(20, bits)).astype(bool)  # 2 x 1 tiles, a partial one
    B[1::4] = B[0::4]
    y = rng.integers(0, 4, 20)
    _check(
        (np.packbits(B, axis=1),),
        query_labels=y,
        similarity="hamming",
        ties=ties,
        metrics=RANKED[:5] + ["pair_recall@t=0", "pair_precision@t=400"],
    )
    if bits == 65:  # bool codes with the top bit of the first word set in most rows
        B[:, 0] = True
        _check((B,), query_labels=y, similarity="hamming", metrics=RANKED[:5])


# the smallest tile (most tile edges) and one taller than the problem by default; the
# others (the same masks at other sizes) with --rc-exhaustive
@pytest.mark.default_cases(dict(tile="16x16x16"), dict(tile="256x16x32"))
@pytest.mark.parametrize("tile", ["16x16x16", "64x32x128", "16x16x256", "256x16x32"])
def test_other_tile_shapes(tile, monkeypatch):
    monkeypatch.setenv("RC_TRITON_TILE", tile)
    assert _triton.tile_shape() == tuple(int(v) for v in tile.split("x"))
    rng = np.random.default_rng(12)
    n = 20  # 16x16x16: a partial tile after a full one along both axes; 256x16x32: BM > n
    X = _ints(rng, n, 20)
    y = rng.integers(0, 4, n)
    for similarity in ("cosine", "neg_l2"):
        _check(
            (X,),
            query_labels=y,
            similarity=similarity,
            screen="bf16",
            metrics=RANKED[:4] + PAIRS[:1],
        )
    _check(
        (_ints(rng, n, 1),),
        query_labels=y,
        similarity="dot",
        screen="tf32",
        metrics=RANKED[:4],
    )
    C = np.packbits(rng.integers(0, 2, size=(n, 200)).astype(bool), axis=1)
    _check((C,), query_labels=y, similarity="hamming", metrics=RANKED[:4])


@pytest.fixture(params=["linear", "search"])
def counting(request, monkeypatch):
    """Both ways the count launch counts (compare with each relevant score, or binary search)."""
    monkeypatch.setattr(_triton, "LINEAR_MAX", 10**6 if request.param == "linear" else 0)
    return request.param


@pytest.mark.default_cases(
    dict(screen="bf16", counting="linear"), dict(screen="tf32", counting="search")
)
@pytest.mark.parametrize("screen", ["bf16", "tf32"])
def test_screened_fast_branch_runs_and_equals_the_reference(screen, counting, monkeypatch):
    """Clustered data (a good model: relevant scores far above the negatives) so that the
    screened interval decides most count tiles (the ``S = lo`` branch, which random data
    never reach: every tile is recomputed there) and a few tiles still hold near ties;
    the numbers equal the CPU kernels' and the torch path's under every tie policy."""
    from retrieval_checks.engine.gpu import _triton_kernels

    calls = []
    real = _triton_kernels.exact_tile
    monkeypatch.setattr(
        _triton_kernels, "exact_tile", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    rng = np.random.default_rng(14)
    y = rng.integers(0, 12, 48)  # 3 x 2 tiles
    centres = rng.standard_normal((12, 32)).astype(np.float32)
    X = (centres[y] + 0.8 * rng.standard_normal((48, 32))).astype(np.float32)
    X[5] = X[4]  # an exact duplicate: a tie the screen must hand to the exact tile
    y[5] = y[4] + 1 if y[4] < 11 else 0
    with _triton.on_cpu():
        rc.evaluate(
            X,
            query_labels=y,
            metrics=["map"],
            similarity="cosine",
            device="torch-cpu",
            _use_kernels=False,
        )
    exact_calls = len(calls)
    del calls[:]
    got, _ = _check(
        (X,),
        query_labels=y,
        similarity="cosine",
        ties="average",
        screen=screen,
        metrics=RANKED,
    )
    assert 0 < len(calls) < exact_calls, (
        len(calls),
        exact_calls,
    )  # some tiles screened, some recomputed
    for policy in (
        "pessimistic",
        "optimistic",
    ):  # the counts behind the average: ties and strict ranks
        ref = rc.evaluate(
            X, query_labels=y, metrics=RANKED, similarity="cosine", ties=policy, device="numpy"
        )
        for m in RANKED:
            assert got.tie_values[m][policy] == ref[m], (m, policy)
