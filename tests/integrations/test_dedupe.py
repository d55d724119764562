"""De-duplication of gathered validation sets: the items torch's own DistributedSampler
repeats to pad the ranks are dropped by id and counted, and the metrics then equal
evaluate on the original set; ids that are not item ids are refused, not merged."""

from __future__ import annotations

import numpy as np
import pytest
from _integration_data import blobs

import retrieval_checks as rc
from retrieval_checks.integrations import dedupe_by_id


@pytest.mark.parametrize(
    "n, world, shuffle", [(10, 4, True), (11, 2, False), (7, 3, True), (12, 4, False)]
)
def test_padded_all_gather_is_deduplicated(n, world, shuffle):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DistributedSampler

    x, y = blobs(n_per_class=n, n_classes=3, seed=n)
    data = list(range(len(y)))
    per_rank = [
        list(DistributedSampler(data, num_replicas=world, rank=r, shuffle=shuffle, seed=3))
        for r in range(world)
    ]
    gathered = np.concatenate(
        per_rank
    )  # what all_gather returns: rank 0's items, then rank 1's, ...
    assert gathered.size == world * -(-len(y) // world)
    gx, gy, gids, dropped = dedupe_by_id(x[gathered], y[gathered], gathered)
    assert dropped == gathered.size - len(y)
    assert sorted(gids.tolist()) == list(range(len(y)))
    assert np.array_equal(gx, x[gids]) and np.array_equal(gy, y[gids])
    metrics = ["map@R", "hit_rate@1", "mrr"]
    got = rc.evaluate(gx, query_labels=gy, query_ids=gids, metrics=metrics)
    ref = rc.evaluate(x, query_labels=y, metrics=metrics)
    for m in metrics:
        assert got[m] == pytest.approx(ref[m], rel=1e-12, abs=1e-15), m
    assert torch is not None


def test_nothing_repeated_nothing_dropped():
    x, y = blobs(seed=1)
    ids = np.arange(len(y))
    gx, gy, gids, dropped = dedupe_by_id(x, y, ids)
    assert dropped == 0 and gx is x


def test_repeats_computed_with_different_rounding_are_still_the_same_item():
    x, y = blobs(seed=2)
    ids = np.r_[np.arange(len(y)), [0, 1]]
    xx = np.vstack([x, x[:2] * (1 + 1e-7)]).astype(
        np.float32
    )  # another rank's batch shape: last bits differ
    _, _, _, dropped = dedupe_by_id(xx, np.r_[y, y[:2]], ids)
    assert dropped == 2


def test_an_id_with_two_labels_is_refused():
    x, y = blobs(seed=3)
    ids = np.r_[np.arange(len(y)), [5]]
    with pytest.raises(rc.InputError, match="id 5 appears twice with different labels"):
        dedupe_by_id(np.vstack([x, x[5:6]]), np.r_[y, [y[5] + 1]], ids)


def test_an_id_with_two_embeddings_is_refused():
    x, y = blobs(seed=4)
    ids = np.r_[np.arange(len(y)), [5]]
    with pytest.raises(rc.InputError, match="id 5 appears twice with different embeddings"):
        dedupe_by_id(np.vstack([x, x[6:7]]), np.r_[y, y[5:6]], ids)


def test_lengths_must_agree():
    x, y = blobs(seed=5)
    with pytest.raises(rc.InputError, match="one entry per item"):
        dedupe_by_id(x, y, np.arange(len(y) - 1))


def test_importing_the_integrations_loads_no_training_library():
    """``import retrieval_checks.integrations`` stays light: each integration imports
    its library on first use (a fresh interpreter, so nothing is loaded already)."""
    import subprocess
    import sys

    code = (
        "import sys, retrieval_checks, retrieval_checks.integrations as i; "
        "heavy = ['torch', 'lightning', 'pytorch_lightning', 'transformers', 'sentence_transformers']; "
        "print([m for m in heavy if m in sys.modules]); print(sorted(i.__all__) == sorted(dir(i)) or dir(i))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == "[]", out[0]
