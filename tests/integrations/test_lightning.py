"""The Lightning callback and the discriminant-ratio monitor, with the real Lightning
on a tiny model trained on synthetic blobs (CPU, no download): what the logger wrote
equals retrieval_checks.evaluate / discriminant_ratio recomputed on the same
embeddings, a failing gate stops or raises, and DDP's padded gather is de-duplicated
by id and reported."""

from __future__ import annotations

import csv
import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

# One xdist worker runs this module, the Lightning DDP launch (test_lightning_ddp.py) and
# the Hugging Face modules (test_hf_trainer.py, test_sentence_transformers.py): each of
# Lightning and transformers (with accelerate, datasets) costs ~4.6 CPU-s to import after
# torch, paid by every worker that runs one of their tests (Lightning pulls transformers
# in too, through torchmetrics); under `--dist loadgroup` both workers did. The
# "processes" group already holds the DDP launch, whose worker imports Lightning.
pytestmark = pytest.mark.xdist_group("processes")

from _integration_data import blobs  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import retrieval_checks as rc  # noqa: E402

# Lightning (and the integrations' Lightning classes, which import it) is imported by the
# module's autouse fixture, not at collection: the import costs seconds (tens of seconds
# on a loaded 2-core machine), paid by every xdist worker that collects this module, also
# those that run none of its tests. Skipped, saying why, where it is not installed.
pl = CSVLogger = DiscriminantRatioMonitor = RetrievalChecksCallback = Embedder = None


@pytest.fixture(scope="module", autouse=True)
def _lightning():
    global pl, CSVLogger, DiscriminantRatioMonitor, RetrievalChecksCallback, Embedder
    pytest.importorskip("lightning")
    import lightning.pytorch as pl
    from lightning.pytorch.loggers import CSVLogger

    from retrieval_checks.integrations import DiscriminantRatioMonitor, RetrievalChecksCallback

    Embedder = _embedder_class()


def _embedder_class():
    class Embedder(pl.LightningModule):
        """A linear embedding trained with a softmax head; validation_step returns the
        embeddings, labels and dataset ids of the batch."""

        def __init__(self, d=8, k=4, out=4):
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Linear(d, out)
            self.head = torch.nn.Linear(out, k)
            self.seen = []  # (epoch, embeddings of the whole validation set) after each validation

        def training_step(self, batch, _):
            x, y, _ids = batch
            e = self.net(x)
            return {
                "loss": torch.nn.functional.cross_entropy(self.head(e), y),
                "embeddings": e,
                "labels": y,
            }

        def validation_step(self, batch, _, dataloader_idx=0):
            x, y, ids = batch
            return {"embeddings": self.net(x), "labels": y, "ids": ids}

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Embedder


def _loaders(seed=0):
    x, y = blobs(n_per_class=12, seed=seed)
    xv, yv = blobs(n_per_class=10, seed=seed + 1)
    train = TensorDataset(torch.from_numpy(x), torch.from_numpy(y), torch.arange(len(y)))
    val = TensorDataset(torch.from_numpy(xv), torch.from_numpy(yv), torch.arange(len(yv)))
    return DataLoader(train, batch_size=16, shuffle=False), DataLoader(val, batch_size=7), (xv, yv)


def _trainer(tmp_path, callbacks, max_epochs=2):
    return pl.Trainer(
        accelerator="cpu",
        max_epochs=max_epochs,
        logger=CSVLogger(tmp_path),
        enable_checkpointing=False,
        callbacks=callbacks,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
        num_sanity_val_steps=1,
    )


def _rows(trainer):
    with open(f"{trainer.logger.log_dir}/metrics.csv") as f:
        return list(csv.DictReader(f))


def _val_embeddings(model, xv):
    with torch.no_grad():
        return model.net(torch.from_numpy(xv)).numpy()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two epochs with the callback (two metrics, a gate that passes) and the monitor."""
    tmp = tmp_path_factory.mktemp("lightning")
    train, val, (xv, yv) = _loaders()
    model = Embedder()
    snapshots = []

    class Snapshot(
        pl.Callback
    ):  # the validation embeddings the callback saw, recomputed independently
        def on_validation_epoch_end(self, trainer, pl_module):
            if not trainer.sanity_checking:
                snapshots.append(_val_embeddings(pl_module, xv))

    cb = RetrievalChecksCallback(
        ["map@R", "hit_rate@1", "grouped_recall@1"],
        gates={"map@R": {"at_least": 0.05}},
        group_size=2,
    )
    monitor = DiscriminantRatioMonitor()
    trainer = _trainer(tmp, [Snapshot(), cb, monitor])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice on num_workers and the like
        trainer.fit(model, train, val)
    return trainer, cb, monitor, snapshots, (xv, yv), train


def test_logged_metrics_equal_evaluate_on_the_same_embeddings(trained):
    trainer, cb, _, snapshots, (xv, yv), _ = trained
    rows = [r for r in _rows(trainer) if r.get("rc/map@R")]
    assert len(rows) == 2 == len(snapshots)  # one evaluation per epoch, none at the sanity check
    for row, emb in zip(rows, snapshots):
        ref = rc.evaluate(
            emb, query_labels=yv, metrics=["map@R", "hit_rate@1", "grouped_recall@1"], group_size=2
        )
        for name in ("map@R", "hit_rate@1", "grouped_recall@1"):
            assert float(row["rc/" + name]) == pytest.approx(float(np.float32(ref[name])), abs=0), (
                name
            )
        low, high = ref.intervals["grouped_recall@1"]
        assert float(row["rc/grouped_recall@1_low"]) == pytest.approx(float(np.float32(low)), abs=0)
        assert float(row["rc/grouped_recall@1_high"]) == pytest.approx(
            float(np.float32(high)), abs=0
        )
        assert float(row["rc/gate/map@R"]) == 1.0
        assert float(row["rc/n_duplicates_dropped"]) == 0.0
    final = rc.evaluate(snapshots[-1], query_labels=yv, metrics=["map@R"])
    assert cb.last_values["rc/map@R"] == final["map@R"]  # float64, exact
    assert not trainer.should_stop


def test_monitor_logs_the_discriminant_ratio_of_every_training_batch(trained):
    trainer, _, monitor, _, _, train = trained
    logged = [
        float(r["rc/discriminant_ratio"]) for r in _rows(trainer) if r.get("rc/discriminant_ratio")
    ]
    assert len(monitor.values) == 2 * len(train) == len(logged)
    # the values themselves are checked against an independent computation in the next test
    for j, logged_j in zip(monitor.values, logged):
        assert logged_j == float(np.float32(j))
        assert math.isfinite(j) and j > 0


def test_monitor_value_equals_discriminant_ratio_of_the_batch(tmp_path):
    train, val, _ = _loaders()
    model = Embedder()
    x, y, _ = next(iter(train))
    seen = []

    def embed(pl_module, batch):
        e = pl_module.net(batch[0])
        seen.append((e.detach().numpy().copy(), batch[1].numpy().copy()))
        return e, batch[1]

    monitor = DiscriminantRatioMonitor(embed, name="J")
    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=2,
        logger=False,
        enable_checkpointing=False,
        callbacks=[monitor],
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model, train)
    assert len(seen) == 2 == len(monitor.values)
    for (e, labels), j in zip(seen, monitor.values):
        # an independent trace computation of Tr(S_B) / Tr(S_W)
        mu = e.astype(np.float64).mean(0)
        tb = sum(
            (labels == c).sum() * ((e[labels == c].mean(0) - mu) ** 2).sum()
            for c in np.unique(labels)
        )
        tw = sum(((e[labels == c] - e[labels == c].mean(0)) ** 2).sum() for c in np.unique(labels))
        assert j == pytest.approx(tb / tw, rel=1e-6)


def test_a_failing_gate_stops_training(tmp_path):
    train, val, _ = _loaders()
    cb = RetrievalChecksCallback(gates={"hit_rate@1": {"at_least": 0.999}}, stop_on_failure=True)
    trainer = _trainer(tmp_path, [cb], max_epochs=5)
    with pytest.warns(RuntimeWarning, match="gate on hit_rate@1 failed at epoch 0"):
        trainer.fit(Embedder(), train, val)
    assert (
        trainer.should_stop and trainer.current_epoch == 1
    )  # stopped after the first epoch, not 5
    assert [o.passed for o in cb.last_outcomes] == [False]
    assert "hit_rate@1 value" in cb.last_outcomes[0].message
    assert cb.last_values["rc/gate/hit_rate@1"] == 0.0


def test_a_failing_gate_can_raise(tmp_path):
    train, val, _ = _loaders()
    cb = RetrievalChecksCallback(
        ["map@R"], gates={"map@R": {"at_least": 0.999}}, raise_on_failure=True
    )
    with pytest.raises(AssertionError, match="map@R value"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _trainer(tmp_path, [cb]).fit(Embedder(), train, val)


@pytest.mark.parametrize("validation", [{"limit_val_batches": 0}, {"check_val_every_n_epoch": 5}])
def test_a_fit_whose_gates_never_ran_says_so(tmp_path, validation):
    """No validation epoch evaluated (a new user's trial: fit ended quietly with
    raise_on_failure=True, the gate never having run): warned, under raise_on_failure too
    (h20: raised at on_fit_end it stopped fit(); validate() before validate ran the gates,
    where the HF callback warns); validate() after fit then runs the gates and raises."""
    import lightning.pytorch as pl

    train, val, _ = _loaders()

    def trainer(cb):
        return pl.Trainer(
            max_epochs=1,
            callbacks=[cb],
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=tmp_path,
            **validation,
        )

    gates = {"map@R": {"at_least": 0.999}}
    cb = RetrievalChecksCallback(["map@R"], gates=gates, raise_on_failure=True)
    model, fitted = Embedder(), trainer(cb)
    if "limit_val_batches" in validation:  # validates nothing, later either: raised (h27)
        with pytest.raises(AssertionError, match=r"no validation epoch was evaluated.*never ran"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fitted.fit(model, train, val)
    else:
        with pytest.warns(RuntimeWarning, match=r"no validation epoch was evaluated.*never ran"):
            fitted.fit(model, train, val)
        with pytest.raises(AssertionError, match="map@R"):  # the gate runs, and fails, there
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fitted.validate(model, val)
    cb = RetrievalChecksCallback(["map@R"], gates=gates)
    with pytest.warns(RuntimeWarning, match=r"gates \(map@R\) never ran"):
        trainer(cb).fit(Embedder(), train, val)


def test_query_gallery_split_from_two_dataloaders(tmp_path):
    train, val, (xv, yv) = _loaders()
    gallery = DataLoader(val.dataset, batch_size=5)
    q, qy = blobs(n_per_class=3, seed=7)
    queries = DataLoader(
        TensorDataset(torch.from_numpy(q), torch.from_numpy(qy), torch.arange(len(qy))),
        batch_size=4,
    )
    cb = RetrievalChecksCallback(["map", "hit_rate@1"], split="dataloaders", prefix="val/")
    model = Embedder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _trainer(tmp_path, [cb], max_epochs=1).fit(model, train, [queries, gallery])
    ref = rc.evaluate(
        _val_embeddings(model, q),
        _val_embeddings(model, xv),
        query_labels=qy,
        gallery_labels=yv,
        metrics=["map", "hit_rate@1"],
    )
    assert (
        cb.last_values["val/map"] == ref["map"]
        and cb.last_values["val/hit_rate@1"] == ref["hit_rate@1"]
    )
    assert cb.last_result.n_queries == len(qy) and cb.last_result.config["n_gallery"] == len(yv)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"gates": {"map@R": {"at_least": 50}}}, r"gates\['map@R'\]\.at_least.*0\.5"),
        ({"gates": {"map@RR": {"at_least": 0.5}}}, r"gates key.*map@R"),
        (
            {"gates": {"map@R": {"atleast": 0.5}}},
            r"gates\['map@R'\]: unknown field 'atleast'.*at_least",
        ),
        ({"gates": {"map@R": {}}}, r"needs at_least, at_most"),
        ({"gates": {"map@R": {"at_least": float("nan")}}}, r"at_least.*NaN"),
        ({"gates": {"map@R": {"at_least": 0.0}}}, r"never fail"),
        (
            {"metrics": ["hit_rate@1"], "gates": {"map@R": {"at_least": 0.5}}},
            r"map@R is gated but not in metrics",
        ),
        ({"metrics": ["i2t_recall@1"]}, r"not computed by retrieval_checks.evaluate"),
        ({"metrics": ["map"], "split": "loo"}, r"split='loo'"),
        ({"metrics": ["map"], "simlarity": "dot"}, r"simlarity.*similarity"),
        ({"metrics": ["map"], "ties": "random"}, r"ties"),
        ({"metrics": ["map"], "stop_on_failure": True, "raise_on_failure": True}, r"choose one"),
        ({"metrics": ["map"], "stop_on_failure": "yes"}, r"stop_on_failure='yes'"),
        ({}, r"nothing to compute"),
    ],
)
def test_options_are_checked_when_the_callback_is_built(kwargs, match):
    with pytest.raises(rc.InputError, match=match):
        RetrievalChecksCallback(**kwargs)


def test_a_cuda_device_is_checked_when_the_callback_is_built(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(rc.BackendError, match=r"device='cuda:1'.*no CUDA device.*'cpu'"):
        RetrievalChecksCallback(["map@R"], device="cuda:1")


def test_nan_embeddings_are_said_to_be_the_models(tmp_path):
    """A diverged model's NaN validation embeddings: the engine's message is kept,
    saying that the rows are the model's embeddings at this epoch, not bad data."""

    class Diverged(Embedder):
        def validation_step(self, batch, _, dataloader_idx=0):
            out = super().validation_step(batch, _, dataloader_idx)
            out["embeddings"] = out["embeddings"] * float("nan")
            return out

    train, val, _ = _loaders()
    cb = RetrievalChecksCallback(["map@R"])
    with pytest.raises(rc.InputError, match=r"embeddings of the model at epoch 0: queries has"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _trainer(tmp_path, [cb], max_epochs=1).fit(Diverged(), train, val)


def test_validation_outputs_without_embeddings_are_refused(tmp_path):
    class Bare(Embedder):
        def validation_step(self, batch, _, dataloader_idx=0):
            return None

    train, val, _ = _loaders()
    with (
        pytest.raises(rc.InputError, match="validation_step returned None"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        _trainer(tmp_path, [RetrievalChecksCallback(["map"])], max_epochs=1).fit(Bare(), train, val)


def _single_class_batches():
    """Training batches of one class each: J is undefined for every batch."""
    x, y = blobs(n_per_class=8, seed=5)
    order = np.argsort(y, kind="stable")
    data = TensorDataset(
        torch.from_numpy(x[order]), torch.from_numpy(y[order]), torch.arange(len(y))
    )
    return DataLoader(data, batch_size=8)


def test_monitor_refuses_a_batch_where_j_is_undefined():
    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=1,
        logger=False,
        enable_checkpointing=False,
        callbacks=[DiscriminantRatioMonitor()],
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
    )
    with pytest.raises(
        rc.InputError, match="training_step \\(batch 0\\): the discriminant ratio is undefined"
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.fit(Embedder(), _single_class_batches())


def test_monitor_skips_and_counts_undefined_batches_when_asked(tmp_path):
    monitor = DiscriminantRatioMonitor(undefined="skip")
    trainer = _trainer(tmp_path, [monitor], max_epochs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Embedder(), _single_class_batches())
    assert monitor.values == [] and monitor.n_undefined == 4
    counts = [
        float(r["rc/discriminant_ratio_undefined_batches"])
        for r in _rows(trainer)
        if r.get("rc/discriminant_ratio_undefined_batches")
    ]
    assert counts == [4.0]


def test_ids_that_are_not_item_ids_are_refused(tmp_path):
    class BatchIds(Embedder):  # ids restart at 0 in every batch: a common slip
        def validation_step(self, batch, batch_idx, dataloader_idx=0):
            x, y, _ = batch
            return self.net(x), y, torch.arange(len(y))

    train, val, _ = _loaders()
    with (
        pytest.raises(rc.InputError, match="appears twice with different"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        _trainer(tmp_path, [RetrievalChecksCallback(["map"])], max_epochs=1).fit(
            BatchIds(), train, val
        )


def test_model_checkpoint_and_early_stopping_read_the_logged_metric(tmp_path):
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    train, val, _ = _loaders()
    cb = RetrievalChecksCallback(["map@R"])
    best = ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="rc/map@R", mode="max")
    stop = EarlyStopping(
        monitor="rc/map@R", mode="max", patience=0, min_delta=1.0
    )  # no epoch improves by 1
    trainer = pl.Trainer(
        accelerator="cpu",
        max_epochs=4,
        logger=CSVLogger(tmp_path),
        callbacks=[cb, best, stop],
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Embedder(), train, val)
    logged = [float(r["rc/map@R"]) for r in _rows(trainer) if r.get("rc/map@R")]
    assert len(logged) == 2  # early stopping ended training at the second epoch
    assert float(best.best_model_score) == max(logged)


def test_a_rejected_name_is_a_sentence_then_its_suggestion():
    """'... 'querys' Did you mean ...' ran two sentences together (h13)."""
    from retrieval_checks.errors import InputError
    from retrieval_checks.integrations._gating import check_evaluate_options

    with pytest.raises(InputError) as info:
        check_evaluate_options({"simlarity": "cosine"})
    text = str(info.value)
    assert "pass on. Did you mean 'similarity'? Options: " in text, text
