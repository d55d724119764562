"""De-duplication of a sharded validation set without gathering the embeddings
(``dedupe_shard``, what the Lightning callback's sharded path runs under DDP): every
simulated rank (a thread; the all-gather pickles each rank's object, as
``torch.distributed.all_gather_object`` does) keeps exactly its rows that
``dedupe_by_id`` keeps on the concatenation of the shards in rank order, and refuses
what it refuses, on every rank."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest
from _integration_data import blobs

from retrieval_checks.errors import InputError
from retrieval_checks.integrations import dedupe_by_id
from retrieval_checks.integrations._gating import dedupe_shard


def run_ranks(shards, **kwargs):
    """``dedupe_shard`` on every shard at once, one thread per rank; a rank's result or
    the exception it raised."""
    world = len(shards)
    barrier = threading.Barrier(world, timeout=20)
    slots: list = [None] * world
    out: list = [None] * world

    def work(r):
        def gather(obj):
            slots[r] = pickle.dumps(obj)
            barrier.wait()
            got = [pickle.loads(s) for s in slots]
            barrier.wait()
            return got

        try:
            out[r] = dedupe_shard(*shards[r], gather=gather, rank=r, **kwargs)
        except Exception as exc:  # noqa: BLE001 - returned to the test
            out[r] = exc

    threads = [threading.Thread(target=work, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def sampler_shards(x, y, world, shuffle):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DistributedSampler

    data = list(range(len(y)))
    idx = [
        np.asarray(
            list(DistributedSampler(data, num_replicas=world, rank=r, shuffle=shuffle, seed=5)),
            np.int64,
        )
        for r in range(world)
    ]
    assert torch is not None
    return [(x[i], y[i], i) for i in idx]


@pytest.mark.parametrize(
    "n, world, shuffle", [(10, 4, True), (11, 2, False), (7, 3, True), (12, 4, False)]
)
def test_each_rank_keeps_what_dedupe_by_id_keeps_on_the_concatenation(n, world, shuffle):
    x, y = blobs(n_per_class=n, n_classes=3, seed=n)
    shards = sampler_shards(x, y, world, shuffle)
    gx, gy, gids, dropped = dedupe_by_id(
        *(np.concatenate([s[i] for s in shards]) for i in range(3))
    )
    got = run_ranks(shards)
    assert all(not isinstance(g, Exception) for g in got), got
    assert {g.n_dropped for g in got} == {dropped} and dropped == world * -(-len(y) // world) - len(
        y
    )
    assert {g.n_total for g in got} == {len(y)}
    assert np.array_equal(np.concatenate([g.positions for g in got]), np.arange(len(y)))
    assert np.array_equal(np.concatenate([g.embeddings for g in got]), gx)
    assert np.array_equal(np.concatenate([g.labels for g in got]), gy)
    assert np.array_equal(np.concatenate([g.ids for g in got]), gids)


def test_repeats_within_one_rank_and_a_rank_without_items():
    x, y = blobs(n_per_class=4, n_classes=2, seed=3)
    ids = np.arange(len(y))
    shards = [
        (x[[0, 1, 1, 2]], y[[0, 1, 1, 2]], ids[[0, 1, 1, 2]]),
        (None, None, None),
        (x[[2, 3, 0, 4]], y[[2, 3, 0, 4]], ids[[2, 3, 0, 4]]),
    ]
    got = run_ranks(shards)
    assert [g.n_dropped for g in got] == [3, 3, 3]
    assert [g.ids.tolist() for g in got] == [[0, 1, 2], [], [3, 4]]
    assert [g.positions.tolist() for g in got] == [[0, 1, 2], [], [3, 4]]
    assert got[1].embeddings.shape == (0, x.shape[1]) and got[1].embeddings.dtype == x.dtype
    assert run_ranks([(None, None, None)] * 2) == [None, None]


def test_a_repeat_with_another_label_is_refused_on_every_rank():
    x, y = blobs(n_per_class=4, n_classes=2, seed=4)
    y2 = y.copy()
    y2[0] = y[0] + 1
    got = run_ranks([(x[:5], y[:5], np.arange(5)), (x[:2], y2[:2], np.arange(2))])
    assert all(isinstance(g, InputError) and "different labels" in str(g) for g in got), got


def test_a_repeat_with_another_embedding_is_refused_on_every_rank_and_rounding_is_not():
    x, y = blobs(n_per_class=4, n_classes=2, seed=6)
    near = (x[3:5] * (1 + 1e-7)).astype(np.float32)  # another batch shape: the last bits differ
    got = run_ranks([(x[:5], y[:5], np.arange(5)), (near, y[3:5], np.arange(3, 5))])
    assert [g.n_dropped for g in got] == [2, 2] and got[1].ids.size == 0
    far = x[3:5] + 1.0
    got = run_ranks([(x[:5], y[:5], np.arange(5)), (far, y[3:5], np.arange(3, 5))])
    assert all(
        isinstance(g, InputError) and "different embeddings" in str(g) and "id 3" in str(g)
        for g in got
    ), got
    with pytest.raises(
        InputError, match="different embeddings"
    ):  # the same check as dedupe_by_id's
        dedupe_by_id(np.vstack([x[:5], far]), np.r_[y[:5], y[3:5]], np.r_[np.arange(5), [3, 4]])
