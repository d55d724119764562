"""Checks the one-process pass makes and the sharded pass (``process_group=``) made
differently: each rank judged only its own shard, so a check over the whole set passed
where one process refuses.

- The scores' float32 range (``check_score_range``): a large query on one rank and a
  large gallery row on another overflow float32 (``dot``: inf scores that rank at
  random), as do a tiny query and a tiny gallery row (their products underflow and
  tie); each rank's shard alone was in range, so the sharded pass returned a value where
  one process raised. Now every rank judges the whole sets from the ranks' joined
  peaks, sums and smallest rows: the same error, word for word, on every rank. The same
  for ``evaluate_image_text(..., process_group=g)`` (images on one rank, captions on
  another).
- A rank's own row errors (NaN, all-zero rows, relevance rows) name the rows of its shard:
  they now say so (``gallery on rank 1 ... rows 12``), where they read as the whole
  gallery's row 12.
- Ids and labels of different kinds on different ranks (one rank's integers, another's
  strings) are refused, naming both ranks: numpy's concatenation turned the integers into
  text (the result's ``query_ids`` strings, where every rank but one passed integers), or
  a refusal blamed the two sides (``query_labels are integers but gallery_labels are
  strings``) for what one rank did.
- ``checkpoint=`` is checked first, as one process checks it: with grouped recall alone
  (no block to keep) an unwritable directory passed unseen.
- Queries that are also gallery rows (``result.self_matched``): a group of one rank
  (the only sharded pass without ids: more ranks need them, and one process does not
  check named items either) warns, counts and refuses as one process does; and
  leave-one-out over the same rows stacked twice (which one process checks with ids
  too) is checked over the ranks from each item's first two values and a hash of its
  row, all-gathered: the same count, warning and refusal on every rank.

Ranks are real processes on Gloo (:mod:`test_distributed`'s launcher): world size 2,
one launch (about 15 s on 2 cores: two interpreters and torch's import).
"""

from __future__ import annotations

import os
import pickle
import traceback
import warnings

import numpy as np
import pytest
from test_distributed import (
    _bounds,
    _float_problem,
    _image_text_scenarios,
    _labelled_base,
    _launch,
    _single,
)

import retrieval_checks as rc
from retrieval_checks.engine._result import refuse_vacuous
from retrieval_checks.errors import InputError, SelfMatchWarning

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

pytestmark = pytest.mark.xdist_group("processes")  # never two groups of ranks at a time


def _scenarios() -> list[dict]:
    """At world size 2 rank 0 holds queries [0, 7) and gallery rows [0, 28), rank 1 the
    rest (test_distributed._bounds): row 0 of the queries and the last gallery row are on
    different ranks."""
    Q, G, kw = _labelled_base()
    big_q, big_g = Q.copy(), G.copy()
    big_q[0] *= 1e20
    big_g[-1] *= 1e20
    nan_g = G.copy()
    nan_g[-1, 0] = np.nan  # the whole gallery's row 40, rank 1's row 12
    tiny_q, tiny_g = Q.copy(), G.copy()
    tiny_q[0] *= 1e-30
    tiny_g[-1] *= 1e-30
    images, captions, it_kw = (lambda s: (s["Q"], s["G"], s["kw"]))(_image_text_scenarios()[0])
    big_i, big_c = images.copy(), captions.copy()
    big_i[0] *= 1e20  # rank 0's images
    big_c[-1] *= 1e20  # rank 1's captions
    return [
        dict(name="dot-overflow", Q=big_q, G=big_g, kw=dict(kw, similarity="dot")),
        dict(name="neg_l2-overflow", Q=big_q, G=big_g, kw=dict(kw, similarity="neg_l2")),
        dict(name="dot-tiny-rows", Q=tiny_q, G=tiny_g, kw=dict(kw, similarity="dot")),
        dict(
            name="image-text-dot-overflow",
            entry="image_text",
            Q=big_i,
            G=big_c,
            kw=dict(it_kw, similarity="dot"),
        ),
        dict(name="dot-in-range", Q=Q, G=G, kw=dict(kw, similarity="dot")),  # still a result
        dict(name="nan-on-rank-1", Q=Q, G=nan_g, kw=kw),
        dict(  # rank 1's last query (the whole set's query 22) points past the gallery
            name="relevance-on-rank-1",
            Q=Q,
            G=G,
            kw=dict(
                {k: v for k, v in kw.items() if "labels" not in k},
                relevance=[[i % 41] for i in range(22)] + [[41]],
            ),
        ),
        dict(  # rank 1's ids as text: numpy made rank 0's integers text too
            name="ids-of-two-kinds",
            Q=Q,
            G=G,
            kw=kw,
            rank_kw={1: {"query_ids": kw["query_ids"][7:].astype(str)}},
        ),
        dict(  # no block is kept (grouped recall alone): the directory was never looked at
            name="unwritable-checkpoint",
            Q=Q,
            G=G,
            kw=dict(kw, metrics=["grouped_recall@1"], group_size=2, checkpoint="/proc/no/such"),
        ),
    ]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    scenarios = _scenarios()
    out = _launch(tmp_path_factory.mktemp("seams"), 2, [(2, sc) for sc in scenarios])
    return scenarios, [r[2] for r in out]


def _message(outcome) -> tuple:
    """(kind, message) of an outcome, the message without the remote rank's prefix."""
    if outcome[0] != "error":
        return ("ok",)
    text = outcome[2]
    if text.startswith("rank ") and "): " in text:
        text = text.split("): ", 1)[1]
    return outcome[1], text


@pytest.mark.parametrize(
    "name",
    [
        "dot-overflow",
        "neg_l2-overflow",
        "dot-tiny-rows",
        "image-text-dot-overflow",
        "unwritable-checkpoint",
    ],
)
def test_what_one_process_refuses_is_refused_on_every_rank(ranks, name):
    scenarios, results = ranks
    sc = next(s for s in scenarios if s["name"] == name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = _single(sc)
    assert one[0] == "error" and one[1] == "InputError", one  # one process refuses
    assert "float32" in one[2] or "checkpoint" in one[2]
    for rank, got in enumerate(results):
        assert _message(got[name]) == _message(one), f"rank {rank}: {got[name]}"


def test_a_pass_in_range_still_gives_the_one_process_result(ranks):
    scenarios, results = ranks
    sc = next(s for s in scenarios if s["name"] == "dot-in-range")
    one = _single(sc)
    assert one[0] == "ok"
    for got in results:
        assert got["dot-in-range"][0] == "ok"
        assert got["dot-in-range"][1]["values"] == one[1]["values"]


@pytest.fixture
def group_of_one(tmp_path):
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def test_a_group_of_one_checks_queries_that_are_gallery_rows_as_one_process(group_of_one):
    """The same array as both sides, without ids: one process warns, counts every query
    (each with its own copy) and a gate refuses the result; a group of one rank did none
    of it (self_matched 0: the gates passed it)."""
    X, _, ql, *_ = _float_problem(4)
    kw = dict(query_labels=ql, gallery_labels=ql, metrics=["map"], device="cpu")
    with pytest.warns(SelfMatchWarning) as one_warned:
        one = rc.evaluate(X, X, **kw)
    with pytest.warns(SelfMatchWarning) as warned:
        got = rc.evaluate(X, X, process_group=group_of_one, **kw)
    assert str(warned[0].message) == str(one_warned[0].message)
    assert (got.self_matched, got.self_matched_all) == (one.self_matched, one.self_matched_all)
    assert got.self_matched_all and got.self_matched == X.shape[0]
    assert got["map"] == one["map"]
    with pytest.raises(InputError, match="retrieve"):
        refuse_vacuous(got, "assert_metric")
    # a suite's check raises instead (evaluate's _self_match_fails), with one process's message
    with pytest.raises(InputError) as one_raised:
        rc.evaluate(X, X, _self_match_fails=True, **kw)
    with pytest.raises(InputError) as raised:
        rc.evaluate(X, X, process_group=group_of_one, _self_match_fails=True, **kw)
    assert str(raised.value) == str(one_raised.value)


def test_a_group_of_one_with_ids_checks_nothing_as_one_process(group_of_one):
    """Named items (ids): each query's own item leaves its ranking; nothing to check."""
    X, _, ql, *_ = _float_problem(4)
    ids = np.arange(X.shape[0])
    kw = dict(query_labels=ql, gallery_labels=ql, query_ids=ids, gallery_ids=ids, metrics=["map"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelfMatchWarning)
        got = rc.evaluate(X, X, process_group=group_of_one, device="cpu", **kw)
        one = rc.evaluate(X, X, device="cpu", **kw)
    assert (got.self_matched, got.self_matched_all) == (one.self_matched, one.self_matched_all)
    assert got["map"] == one["map"]


def test_a_rank_names_the_rows_of_its_own_shard(ranks):
    """One process names the whole gallery's row 40; rank 1 sees its shard's row 12, and
    says whose rows they are (every rank gets its message)."""
    _, results = ranks
    for rank, got in enumerate(results):
        kind, text = _message(got["nan-on-rank-1"])
        assert kind == "InputError", got
        assert text.startswith("gallery on rank 1 has 1 row(s) with NaN or Inf (rows 12)"), text


def test_ids_of_two_kinds_on_two_ranks_are_refused_naming_both(ranks):
    _, results = ranks
    for got in results:
        assert _message(got["ids-of-two-kinds"]) == (
            "InputError",
            "query_ids are numbers on rank 0 but strings on rank 1; every rank must pass its "
            "query_ids as the same kind of values (e.g. str(x) or int(x) on every rank).",
        )


def test_a_rank_names_its_own_relevance_rows(ranks):
    _, results = ranks
    for got in results:
        kind, text = _message(got["relevance-on-rank-1"])
        assert (kind, text) == (
            "InputError",
            "relevance on rank 1 (row i: the rank's own query i): relevance[15] points at gallery "
            "index 41, outside [0, 41).",
        )


# ----------------------------------------------------------------------------- leave-one-out copies
def _stacked():
    """Leave-one-out over 20 items stacked twice (40 rows, ids 0..39): each item's copy
    is one of its relevant items, and each has others (4 labels)."""
    rng = np.random.default_rng(11)
    X = rng.standard_normal((20, 6)).astype(np.float32)
    labels = rng.integers(0, 4, 20)
    X2, l2 = np.concatenate([X, X]), np.concatenate([labels, labels])
    half = X.copy()
    half[10:] = rng.standard_normal((10, 6)).astype(np.float32)  # 10 items keep a copy
    return {"every": (X2, l2), "some": (np.concatenate([X, half]), l2)}


def _loo_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    """Each case on this rank's rows: (self_matched, self_matched_all, warnings) of a
    plain call, and the outcome of a suite's (``_self_match_fails``)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        got = {}
        for name, (X, labels) in _stacked().items():
            b = _bounds(len(X), world, "q")
            lo, hi = b[rank], b[rank + 1]
            kw = dict(
                query_labels=labels[lo:hi],
                query_ids=np.arange(lo, hi),
                metrics=["map"],
                process_group=dist.group.WORLD,
            )
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                res = rc.evaluate(X[lo:hi], **kw)
            said = [str(w.message) for w in seen if issubclass(w.category, SelfMatchWarning)]
            try:
                rc.evaluate(X[lo:hi], _self_match_fails=True, **kw)
                refused = None
            except InputError as exc:
                refused = str(exc)
            got[name] = (res.self_matched, res.self_matched_all, said, refused, res["map"])
        with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as fh:
            pickle.dump(got, fh)
    except BaseException:
        with open(os.path.join(out_dir, f"rank{rank}.err"), "w") as fh:
            fh.write(traceback.format_exc())
        raise
    finally:
        dist.destroy_process_group()


def _one_process(X, labels) -> tuple:
    kw = dict(query_labels=labels, query_ids=np.arange(len(X)), metrics=["map"], device="cpu")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        res = rc.evaluate(X, **kw)
    said = [str(w.message) for w in seen if issubclass(w.category, SelfMatchWarning)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SelfMatchWarning)
            rc.evaluate(X, _self_match_fails=True, **kw)
        refused = None
    except InputError as exc:
        refused = str(exc)
    return res.self_matched, res.self_matched_all, said, refused, res["map"]


def test_a_group_of_one_checks_leave_one_out_copies_as_one_process(group_of_one):
    X, labels = _stacked()["every"]
    kw = dict(query_labels=labels, query_ids=np.arange(len(X)), metrics=["map"], device="cpu")
    with pytest.warns(SelfMatchWarning):
        got = rc.evaluate(X, process_group=group_of_one, **kw)
    one = _one_process(X, labels)
    assert (got.self_matched, got.self_matched_all) == one[:2] == (len(X), True)


def test_leave_one_out_copies_are_checked_over_the_ranks_as_in_one_process(tmp_path):
    """20 items stacked twice, over two ranks (rank 0 holds 13 rows, rank 1 27: most
    copies on the other rank): one process warns, counts 40 and refuses; the ranks said
    nothing and counted 0 (every gate passed). Half the copies: a warning with the
    count, no refusal."""
    import torch.multiprocessing as mp

    out = tmp_path / "out"
    out.mkdir()
    ctx = mp.start_processes(
        _loo_worker,
        args=(2, str(tmp_path / "rendezvous"), str(out)),
        nprocs=2,
        join=False,
        start_method="spawn",
    )
    for proc in ctx.processes:
        proc.join(300)
    errors = [f.read_text() for f in sorted(out.glob("*.err"))]
    assert not errors, "\n".join(errors)
    ranks = [pickle.loads((out / f"rank{r}.pkl").read_bytes()) for r in range(2)]
    for name, (X, labels) in _stacked().items():
        one = _one_process(X, labels)
        assert one[0] > 0 and one[2], one  # one process finds them
        assert (one[1], one[3] is not None) == ((True, True) if name == "every" else (False, False))
        for rank, got in enumerate(ranks):
            assert got[name][:4] == one[:4], (name, rank, got[name], one)
            assert got[name][4] == one[4]


def test_joined_ids_of_the_ranks_keep_their_values_or_are_refused():
    """h16: bytes ids of different lengths were refused as different kinds, and int64
    ids joined with floats (or uint64) as float64, merging ids above 2**53 unseen."""
    from retrieval_checks.engine.distributed._sharded import _concat

    assert _concat([np.array([b"a"]), np.array([b"abc"])], "query_ids").tolist() == [b"a", b"abc"]
    assert _concat([np.array([1, 2]), np.array([3.5])], "query_ids").tolist() == [1.0, 2.0, 3.5]
    for other in (np.array([3.0]), np.array([3], np.uint64)):
        with pytest.raises(InputError, match=r"changes one rank's int64 integers beyond 2\*\*53"):
            _concat([np.array([2**60 + 1]), other], "query_ids")
