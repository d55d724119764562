"""The Lightning callback under real DDP: two CPU processes (ddp_spawn on gloo), an odd
validation set that DistributedSampler pads with one repeated item. The callback drops
the repeat by id and says so; what rank 0 logged equals retrieval_checks.evaluate on the
whole validation set with the trained weights. The sharded path
(``distributed="shard"``, ``evaluate(..., process_group=WORLD)``) and the all-gather path
give, on every rank, the values of one process's ``evaluate`` on the embeddings the
ranks computed, concatenated in rank order with the repeats dropped, bit for bit.

Cost: one ddp_spawn launch for both splits (validation dataloader 0 leave-one-out, 1 and
2 queries and gallery; each callback sees its own through ``Only``), two fresh rank
interpreters that import torch and Lightning (~10 CPU-s each): 31 CPU-s for the file at a
load average of 12 (two launches: 39 s wall at load 2.2). The launch serves every check;
add a check to it, not a launch."""

from __future__ import annotations

import csv

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from _integration_data import blobs  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import retrieval_checks as rc  # noqa: E402
from retrieval_checks.errors import InputError  # noqa: E402

# Lightning (and the integrations' Lightning classes, which import it) is imported by the
# module's autouse fixture, not at collection: the import costs seconds (tens on a loaded
# 2-core machine), paid by every xdist worker that collects this module, also the one that
# runs none of its tests. The model and callbacks the spawned ranks unpickle live in
# _lightning_ddp_parts.py (importable by name in a rank). Skipped, saying why, where
# Lightning is not installed.
CSVLogger = RetrievalChecksCallback = parts = None


@pytest.fixture(scope="module", autouse=True)
def _lightning():
    global CSVLogger, RetrievalChecksCallback, parts
    pytest.importorskip("lightning")
    import _lightning_ddp_parts as parts
    from lightning.pytorch.loggers import CSVLogger

    from retrieval_checks.integrations import RetrievalChecksCallback


# one xdist worker runs the DDP launches (here and tests/engine/test_distributed.py) one at a
# time: two ddp_spawn runs at once could pick the same free port, and 2 cores hold 2 ranks
pytestmark = pytest.mark.xdist_group("processes")


def test_the_distributed_option_is_checked_when_the_callback_is_built():
    with pytest.raises(
        InputError, match="distributed='shard' with metrics \\['discriminant_ratio'\\]"
    ):
        RetrievalChecksCallback(["map@R", "discriminant_ratio"], distributed="shard")
    with pytest.raises(InputError, match="distributed='all'.*'auto'.*'shard'.*'gather'"):
        RetrievalChecksCallback(["map@R"], distributed="all")
    assert (
        RetrievalChecksCallback(["map@R", "discriminant_ratio"], distributed="gather").distributed
        == "gather"
    )
    assert RetrievalChecksCallback(["map@R"]).distributed == "auto"


def _rank_order_deduplicated(arrays, side: int):
    """The ranks' items of one dataloader concatenated in rank order, each id's first
    occurrence kept (a plain loop, not the package's code); and the count dropped."""
    x, y, ids = (np.concatenate([a[f"{side}_{i}"] for a in arrays]) for i in range(3))
    seen, keep = set(), []
    for row, i in enumerate(ids.tolist()):
        if i not in seen:
            seen.add(i)
            keep.append(row)
    return x[keep], y[keep], ids[keep], ids.size - len(keep)


def _loader(x, y, batch_size=5):
    return DataLoader(
        TensorDataset(torch.from_numpy(x), torch.from_numpy(y), torch.arange(len(y))),
        batch_size=batch_size,
    )


LOO_METRICS = ["map@R", "hit_rate@1", "mrr", "recall@5"]
SPLIT_METRICS = ["map@R", "hit_rate@1", "ndcg@10"]


def _loo_set():
    xv, yv = blobs(n_per_class=6, seed=1)
    return xv[:23], yv[:23]  # odd: two ranks of 12, one item repeated


def _split_sets():
    xq, yq = blobs(n_per_class=3, seed=2)
    xg, yg = blobs(n_per_class=6, seed=3)
    return xq[:11], yq[:11], xg[:23], yg[:23]  # both padded by DistributedSampler


@pytest.fixture(scope="module")
def launch(tmp_path_factory):
    """The one ddp_spawn launch of this file (two fresh rank interpreters that import
    torch and Lightning, ~10 CPU-s each): validation dataloader 0 is a leave-one-out set,
    read by the leave-one-out callbacks, and dataloaders 1 and 2 a query and a gallery
    set, read by the split='dataloaders' callbacks as their 0 and 1. What the ranks wrote
    on stderr (the file descriptor, inherited by the spawned ranks) comes back too."""
    import os
    import tempfile

    tmp = tmp_path_factory.mktemp("ddp")
    xv, yv = _loo_set()
    xq, yq, xg, yg = _split_sets()
    gates = {"map@R": {"at_least": 0.05}}
    loo, split = {0: 0}, {1: 0, 2: 1}
    callbacks = [
        (
            RetrievalChecksCallback(LOO_METRICS, gates=gates, distributed="shard", prefix="shard/"),
            loo,
        ),
        (
            RetrievalChecksCallback(
                LOO_METRICS, gates=gates, distributed="gather", prefix="gather/"
            ),
            loo,
        ),
        (RetrievalChecksCallback(["map@R", "discriminant_ratio"], prefix="auto/"), loo),
        *(
            (
                RetrievalChecksCallback(
                    SPLIT_METRICS, split="dataloaders", distributed=mode, prefix=f"dl_{mode}/"
                ),
                split,
            )
            for mode in ("shard", "gather")
        ),
    ]  # auto falls back to gather
    default = RetrievalChecksCallback(["map@R", "hit_rate@1"], gates={"map@R": {"at_least": 0.05}})
    saved = os.dup(2)
    with tempfile.TemporaryFile() as err:
        os.dup2(err.fileno(), 2)
        try:
            values, arrays, trainer, model = parts._fit(
                tmp,
                [_loader(xv, yv), _loader(xq, yq, 4), _loader(xg, yg)],
                callbacks,
                others=[parts.Only(default, loo)],
                logger=CSVLogger(tmp / "logs", version=0),
            )
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    return dict(values=values, arrays=arrays, trainer=trainer, model=model, stderr=stderr)


@pytest.mark.slow
def test_leave_one_out_ddp_drops_the_repeat_and_every_mode_equals_one_process(launch):
    """The launch's leave-one-out set (dataloader 0), two sets of checks:

    - the default callback (all-gather, prefix rc/) logged through Lightning's logger, on
      rank 0, the values of ``evaluate`` on the whole validation set with the trained
      weights (sent back from rank 0), and dropped the padded repeat (counted);
    - the sharded path, the all-gather path and 'auto' (which falls back to gather for
      discriminant_ratio, saying so) give, on every rank, bit for bit, one process's
      ``evaluate`` on the ranks' embeddings concatenated in rank order, repeats dropped."""
    xv, yv = _loo_set()
    values, arrays, trainer, model = (launch[k] for k in ("values", "arrays", "trainer", "model"))
    assert "discriminant_ratio reads every embedding at once" in launch["stderr"]

    # the default callback, as logged by Lightning on rank 0
    with open(f"{trainer.logger.log_dir}/metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get("rc/map@R")]
    assert len(rows) == 1
    with torch.no_grad():
        emb = model.net(torch.from_numpy(xv)).numpy()  # the trained weights, sent back from rank 0
    ref = rc.evaluate(emb, query_labels=yv, metrics=["map@R", "hit_rate@1"])
    assert float(rows[0]["rc/n_duplicates_dropped"]) == 1.0
    for name in ("map@R", "hit_rate@1"):
        assert float(rows[0]["rc/" + name]) == pytest.approx(
            float(np.float32(ref[name])), rel=1e-6
        ), name

    # shard, gather and auto, on every rank, against the rank-order concatenation
    x, y, ids, dropped = _rank_order_deduplicated(arrays, 0)
    assert dropped == 1 and sorted(ids.tolist()) == list(range(23))
    assert ids.tolist() != list(
        range(23)
    )  # rank order is not the dataset's order: the test tells them apart
    ref = rc.evaluate(x, query_labels=y, query_ids=ids, metrics=LOO_METRICS)
    ref_j = rc.evaluate(x, query_labels=y, query_ids=ids, metrics=["map@R", "discriminant_ratio"])
    assert values[0] == values[1]  # every rank, the same float64 values
    shard, gather, auto = values[0][:3]
    for m in LOO_METRICS:
        assert shard["shard/" + m] == gather["gather/" + m] == ref[m], m
    assert shard["shard/n_duplicates_dropped"] == gather["gather/n_duplicates_dropped"] == 1.0
    assert shard["shard/gate/map@R"] == gather["gather/gate/map@R"] == 1.0
    assert shard["shard/n_skipped"] == gather["gather/n_skipped"] == float(ref.n_skipped)
    assert (
        auto["auto/discriminant_ratio"] == ref_j["discriminant_ratio"]
        and auto["auto/map@R"] == ref["map@R"]
    )


@pytest.mark.slow
def test_sharded_dataloaders_split_equals_one_process(launch):
    """The launch's query (dataloader 1) and gallery (2) sets, each padded by
    DistributedSampler: shard and gather equal one process's ``evaluate`` on the ranks'
    embeddings in rank order, repeats dropped, on every rank."""
    values, arrays = launch["values"], launch["arrays"]
    q, qy, _, q_dropped = _rank_order_deduplicated(arrays, 1)
    g, gy, _, g_dropped = _rank_order_deduplicated(arrays, 2)
    assert (q_dropped, g_dropped) == (1, 1)
    ref = rc.evaluate(q, g, query_labels=qy, gallery_labels=gy, metrics=SPLIT_METRICS)
    assert values[0] == values[1]
    shard, gather = values[0][3:]
    for m in SPLIT_METRICS:
        assert shard["dl_shard/" + m] == gather["dl_gather/" + m] == ref[m], m
    assert shard["dl_shard/n_duplicates_dropped"] == gather["dl_gather/n_duplicates_dropped"] == 2.0
