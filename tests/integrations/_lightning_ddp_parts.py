"""The Lightning pieces of tests/integrations/test_lightning_ddp.py's ddp_spawn launch:
the model and the callbacks the spawned ranks unpickle, so they live at the top level of
an importable module, and ``_fit``. Importing this module imports Lightning: the test
module imports it from its launch fixture, never at collection."""

from __future__ import annotations

import json
import warnings

import lightning.pytorch as pl
import numpy as np
import torch
from _integration_data import blobs
from torch.utils.data import DataLoader, TensorDataset


class DdpEmbedder(pl.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Linear(8, 4)
        self.head = torch.nn.Linear(4, 4)

    def training_step(self, batch, _):
        x, y, _ids = batch
        return torch.nn.functional.cross_entropy(self.head(self.net(x)), y)

    def validation_step(self, batch, _, dataloader_idx=0):
        x, y, ids = batch
        return self.net(x), y, ids

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Dump(pl.Callback):
    """Saves, on every rank, what validation_step returned (its own copy, collected here)
    and the float64 values each callback of ``watched`` computed; runs after them."""

    def __init__(self, out, watched):
        self.out, self.watched, self.parts = out, watched, {}

    def on_validation_epoch_start(self, trainer, pl_module):
        self.parts = {}

    def on_validation_batch_end(
        self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0
    ):
        if not trainer.sanity_checking:
            self.parts.setdefault(dataloader_idx, []).append([t.detach().numpy() for t in outputs])

    def on_validation_epoch_end(self, trainer, pl_module):
        r = trainer.global_rank
        arrays = {
            f"{k}_{i}": np.concatenate([p[i] for p in parts])
            for k, parts in self.parts.items()
            for i in range(3)
        }
        np.savez(self.out / f"rank{r}.npz", **arrays)
        with open(self.out / f"rank{r}.json", "w") as f:
            json.dump([cb.last_values for cb in self.watched], f)


class Only(pl.Callback):
    """Feeds ``inner`` the batches of some validation dataloaders only, renumbered
    (``loaders``: the trainer's index -> the index ``inner`` sees), so that one launch
    validates on a leave-one-out set (dataloader 0) and a query/gallery pair (1, 2),
    each callback seeing what its split reads; the other hooks pass through."""

    def __init__(self, inner, loaders: dict):
        self.inner, self.loaders = inner, loaders

    def on_validation_epoch_start(self, trainer, pl_module):
        self.inner.on_validation_epoch_start(trainer, pl_module)

    def on_validation_batch_end(
        self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0
    ):
        if dataloader_idx in self.loaders:
            self.inner.on_validation_batch_end(
                trainer, pl_module, outputs, batch, batch_idx, self.loaders[dataloader_idx]
            )

    def on_validation_epoch_end(self, trainer, pl_module):
        self.inner.on_validation_epoch_end(trainer, pl_module)


def _fit(tmp_path, val, callbacks, others=(), logger=False):
    """One ddp_spawn launch (2 ranks, one epoch); ``callbacks`` (each with the
    dataloaders it reads, as :class:`Only` takes them) are watched by :class:`Dump`,
    ``others`` only run. Returns (values, arrays, trainer, model)."""
    x, y = blobs(n_per_class=8, seed=0)
    train = DataLoader(
        TensorDataset(torch.from_numpy(x), torch.from_numpy(y), torch.arange(len(y))), batch_size=8
    )
    dump = Dump(tmp_path, [cb for cb, _ in callbacks])
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp_spawn",
        max_epochs=1,
        logger=logger,
        enable_checkpointing=False,
        callbacks=[*others, *(Only(cb, loaders) for cb, loaders in callbacks), dump],
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        log_every_n_steps=1,
    )
    model = DdpEmbedder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model, train, val)
    values = [json.load(open(tmp_path / f"rank{r}.json")) for r in range(2)]
    arrays = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(2)]
    return values, arrays, trainer, model
