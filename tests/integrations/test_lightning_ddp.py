"""The Lightning callback under real DDP: two CPU processes (ddp_spawn on gloo), an odd
validation set that DistributedSampler pads with one repeated item. The callback
all-gathers, drops the repeat by id and says so; what rank 0 logged equals
retrieval_checks.evaluate on the whole validation set with the trained weights."""

from __future__ import annotations

import csv
import warnings

import numpy as np
import pytest

pytest.importorskip("lightning")
torch = pytest.importorskip("torch")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

import lightning.pytorch as pl  # noqa: E402
from lightning.pytorch.loggers import CSVLogger  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import retrieval_checks as rc  # noqa: E402
from retrieval_checks.integrations import RetrievalChecksCallback  # noqa: E402

from _integration_data import blobs  # noqa: E402


class DdpEmbedder(pl.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Linear(8, 4)
        self.head = torch.nn.Linear(4, 4)

    def training_step(self, batch, _):
        x, y, _ids = batch
        return torch.nn.functional.cross_entropy(self.head(self.net(x)), y)

    def validation_step(self, batch, _):
        x, y, ids = batch
        return self.net(x), y, ids

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.slow
def test_two_process_ddp_gathers_and_drops_the_padded_repeat(tmp_path):
    x, y = blobs(n_per_class=8, seed=0)
    xv, yv = blobs(n_per_class=6, seed=1)
    xv, yv = xv[:23], yv[:23]  # odd: two ranks of 12, one item repeated
    train = DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y), torch.arange(len(y))), batch_size=8)
    val = DataLoader(TensorDataset(torch.from_numpy(xv), torch.from_numpy(yv), torch.arange(len(yv))), batch_size=5)
    cb = RetrievalChecksCallback(["map@R", "hit_rate@1"], gates={"map@R": {"at_least": 0.05}})
    model = DdpEmbedder()
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp_spawn", max_epochs=1,
                         logger=CSVLogger(tmp_path, version=0), enable_checkpointing=False, callbacks=[cb],
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         log_every_n_steps=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model, train, val)
    with open(f"{trainer.logger.log_dir}/metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get("rc/map@R")]
    assert len(rows) == 1
    with torch.no_grad():
        emb = model.net(torch.from_numpy(xv)).numpy()  # the trained weights, sent back from rank 0
    ref = rc.evaluate(emb, query_labels=yv, metrics=["map@R", "hit_rate@1"])
    assert float(rows[0]["rc/n_duplicates_dropped"]) == 1.0
    for name in ("map@R", "hit_rate@1"):
        assert float(rows[0]["rc/" + name]) == pytest.approx(float(np.float32(ref[name])), rel=1e-6), name
