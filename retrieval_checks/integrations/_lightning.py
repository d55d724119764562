"""PyTorch Lightning: a callback that evaluates and gates the validation embeddings at
the end of every validation epoch, and a monitor of the discriminant ratio J of every
training batch.

Importing this module imports Lightning (``lightning.pytorch``, or the older
``pytorch_lightning`` package when only that one is installed); ``import
retrieval_checks.integrations`` does not.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

import numpy as np

from .._suggest import shown
from ..engine import evaluate
from ..errors import InputError
from ..metrics import discriminant_ratio, metric_spec
from ..options import positive_int
from ._gating import (
    check_evaluate_options,
    check_gates,
    dedupe_by_id,
    dedupe_shard,
    evaluate_split,
    gates_never_ran,
    logged_values,
    model_embeddings,
    report_failures,
    run_gates,
    to_labels,
    to_numpy_rows,
)

try:
    from lightning.pytorch import Callback
    from lightning.pytorch.utilities import rank_zero_info
except ImportError:  # pragma: no cover - the standalone package
    try:
        from pytorch_lightning import Callback
        from pytorch_lightning.utilities import rank_zero_info
    except ImportError:
        raise ImportError(
            "the Lightning callbacks of retrieval_checks.integrations need PyTorch Lightning: "
            "pip install 'retrieval-checks[lightning]'"
        ) from None

import torch  # Lightning's own dependency: loaded by the import above
import torch.distributed as dist

__all__ = ["RetrievalChecksCallback", "DiscriminantRatioMonitor"]

_SPLITS = ("leave_one_out", "dataloaders")
_DISTRIBUTED = ("auto", "shard", "gather")


def unpack(value, where: str, *, need_ids: bool) -> tuple:
    """(embeddings, labels, ids or None) from what ``embed`` or a step returned: a
    tuple ``(embeddings, labels)`` / ``(embeddings, labels, ids)`` or a dict with keys
    ``embeddings``, ``labels`` and optionally ``ids``."""
    if isinstance(value, Mapping):
        missing = [k for k in ("embeddings", "labels") if k not in value]
        if missing:
            raise InputError(
                f"{where} returned a dict without {missing[0]!r}; return {{'embeddings': (batch x d), "
                f"'labels': (batch,), 'ids': (batch,) optional}}; it has keys {list(value)}."
            )
        parts = (value["embeddings"], value["labels"], value.get("ids"))
    elif isinstance(value, (tuple, list)) and len(value) in (2, 3):
        parts = (value[0], value[1], value[2] if len(value) == 3 else None)
    else:
        raise InputError(
            f"{where} returned {type(value).__name__}; return (embeddings, labels), (embeddings, labels, "
            "ids) or a dict with keys 'embeddings', 'labels' and 'ids' (optional)."
        )
    x = to_numpy_rows(parts[0], f"{where}: embeddings")
    y = to_labels(parts[1], x.shape[0], f"{where}: labels")
    if parts[2] is None:
        if need_ids:
            raise InputError(
                f"{where} returned no ids, and validation runs on several processes (DDP): the "
                "callback needs each item's global id (e.g. its dataset index) to drop the items "
                "DistributedSampler repeats; return (embeddings, labels, ids)."
            )
        return x, y, None
    return x, y, to_labels(parts[2], x.shape[0], f"{where}: ids")


def _flag(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"{name}={shown(value)}: expected True or False.")
    return value


def _distributed(value, metrics: list[str]) -> tuple[str, list[str]]:
    """The ``distributed`` option checked against the metrics: ``(mode, names)``, the
    names being the metrics that make ``"auto"`` all-gather (they read every embedding
    at once, which the sharded path refuses)."""
    if value not in _DISTRIBUTED:
        raise InputError(
            f"distributed={shown(value)}: use 'auto' (default: sharded unless a metric needs every "
            "embedding), 'shard' (exact sharded evaluation, evaluate(..., process_group=...)) or "
            "'gather' (all-gather the embeddings on every rank)."
        )
    whole = [m for m in metrics if metric_spec(m).kind == "embedding"]
    if value == "shard" and whole:
        raise InputError(
            f"distributed='shard' with metrics {whole}: the sharded evaluation does not compute "
            f"{', '.join(whole)} (it reads every embedding at once); use distributed='gather' or "
            "'auto' (all-gathers for these), or drop them from metrics."
        )
    return value, whole


def _prefix(value) -> str:
    if not isinstance(value, str):
        raise InputError(
            f"prefix={shown(value)}: expected a string such as 'rc/' (put before every logged name)."
        )
    return value


class RetrievalChecksCallback(Callback):
    """Evaluate retrieval metrics on the validation embeddings at the end of every
    validation epoch, log them, and gate them.

    Collection: each validation batch gives (embeddings, labels[, ids]) either from
    ``embed(pl_module, batch)`` or, with ``embed=None``, from what ``validation_step``
    returns (a tuple, or a dict with keys ``embeddings``, ``labels``, ``ids``). The
    sanity check's batches are not evaluated. ``split``: ``"leave_one_out"`` (default:
    each item queries all the others) or ``"dataloaders"`` (validation dataloader 0
    holds the queries, dataloader 1 the gallery).

    Under DDP (world size > 1) ids are required: each item's global id, e.g. its dataset
    index. The items that ``DistributedSampler`` repeats to pad the ranks are dropped by
    id (the first occurrence, in rank order, is kept; a repeat whose label or embedding
    differs is refused), the count dropped is logged (``n_duplicates_dropped``) and
    printed. ``distributed`` chooses how the ranks evaluate:

    - ``"shard"``: exact sharded evaluation, ``evaluate(..., process_group=WORLD)``
      (``docs/distributed.md``): only the ids and labels are all-gathered (and the rows
      of repeated ids, to check them); each rank evaluates its own de-duplicated shard,
      memory per rank is its shard plus one tile. Refuses metrics that read every
      embedding at once (``discriminant_ratio``). Without a ``device`` option the ranks
      compute on the CPU over Gloo and on their current CUDA device over NCCL.
    - ``"gather"``: every rank all-gathers all embeddings and evaluates the whole set.
    - ``"auto"`` (default): ``"shard"``, unless a metric needs ``"gather"``
      (``discriminant_ratio``): then ``"gather"``, with a note printed once.

    Both give the same values, bit for bit: those of one process on the ranks' items
    concatenated in rank order, de-duplicated. Every rank computes the same result, so
    every rank takes the same decision. On one process ``distributed`` has no effect.

    Logged (``pl_module.log``, epoch level, under ``prefix``): every metric, interval
    bounds where a metric has one, ``n_skipped`` (queries without a relevant item),
    ``n_duplicates_dropped`` and 1/0 per gate (``gate/<metric>``). Lightning stores
    logged scalars in float32; the float64 values are in ``last_values`` and the full
    :class:`~retrieval_checks.EvaluationResult` in ``last_result``.

    Gates (``{"map@R": {"at_least": 0.5}}``, checked when the callback is built, see
    :func:`~retrieval_checks.integrations.check_gates`) run through
    :func:`~retrieval_checks.assert_metric`. A failed gate warns, and
    ``stop_on_failure=True`` sets ``trainer.should_stop`` (training ends after this
    epoch); ``raise_on_failure=True`` raises the gate's ``AssertionError`` instead.
    ``every_n_epochs``: evaluate on every n-th validation epoch only (others collect
    nothing). Further keyword arguments go to :func:`~retrieval_checks.evaluate`
    (``similarity``, ``ties``, ``empty_queries``, ``device``, ``max_memory``, ...).
    """

    def __init__(
        self,
        metrics=None,
        *,
        gates=None,
        embed=None,
        split: str = "leave_one_out",
        prefix: str = "rc/",
        stop_on_failure: bool = False,
        raise_on_failure: bool = False,
        every_n_epochs: int = 1,
        distributed: str = "auto",
        **evaluate_options,
    ):
        super().__init__()
        self.metrics, self.gates = check_gates(gates, metrics)
        if embed is not None and not callable(embed):
            raise InputError(
                f"embed={shown(embed)}: expected a function (pl_module, batch) -> (embeddings, labels"
                "[, ids]), or None to read validation_step's outputs."
            )
        if split not in _SPLITS:
            raise InputError(
                f"split={shown(split)}: use 'leave_one_out' (every item queries the others) or "
                "'dataloaders' (validation dataloader 0: queries, 1: gallery)."
            )
        positive_int(every_n_epochs, "every_n_epochs")
        self.stop_on_failure = _flag(stop_on_failure, "stop_on_failure")
        self.raise_on_failure = _flag(raise_on_failure, "raise_on_failure")
        if stop_on_failure and raise_on_failure:
            raise InputError(
                "stop_on_failure=True and raise_on_failure=True: choose one (stop: end training after "
                "this epoch; raise: raise the gate's AssertionError now)."
            )
        self.embed, self.split, self.prefix = embed, split, _prefix(prefix)
        self.distributed, self._gather_for = _distributed(distributed, self.metrics)
        self.every_n_epochs = int(every_n_epochs)
        self.options = check_evaluate_options(evaluate_options)
        self.last_result = None
        self.last_values: dict[str, float] = {}
        self.last_outcomes: list = []
        self.last_n_dropped = 0
        self._parts: dict[int, list] = {}
        self._active = False
        self._noted = False
        self._evaluated = 0  # validation epochs evaluated in this fit

    def on_fit_start(self, trainer, pl_module) -> None:
        self._evaluated = 0

    def on_fit_end(self, trainer, pl_module) -> None:
        """A fit in which no validation epoch was evaluated ran no gate, and none could
        fail (a new user's trial: limit_val_batches=0, or check_val_every_n_epoch past the
        last epoch, ended fit quietly with raise_on_failure=True): said, with a warning, as
        the HF callback says it (:func:`gates_never_ran`). Not raised, even under
        raise_on_failure: ``trainer.fit(m); trainer.validate(m)`` evaluates once after fit,
        and the gates (which raise there) run then."""
        if self._evaluated:
            return
        gates_never_ran(
            self.gates,
            ended=f"fit ended after {trainer.current_epoch} epoch(s)",
            missing="no validation epoch was evaluated",
            causes="validation did not run: limit_val_batches=0, check_val_every_n_epoch past the "
            f"last epoch, or every_n_epochs={self.every_n_epochs} skipping every validation epoch",
            remedy="Run validation at least once (trainer.validate(model) after fit runs the "
            "gates, and raises under raise_on_failure)",
            # limit_val_batches=0: this trainer validates nothing, validate() after fit too,
            # so the gates can never run: under raise_on_failure that fails, fail closed (h27)
            fail=self.raise_on_failure and getattr(trainer, "limit_val_batches", None) == 0,
        )

    def on_validation_epoch_start(self, trainer, pl_module) -> None:
        self._parts = {}
        self._active = (not trainer.sanity_checking) and (
            trainer.current_epoch % self.every_n_epochs == 0
        )

    def on_validation_batch_end(
        self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0
    ) -> None:
        if not self._active:
            return
        if dataloader_idx > (1 if self.split == "dataloaders" else 0):
            raise InputError(
                f"validation dataloader {dataloader_idx}: split={self.split!r} reads "
                + (
                    "dataloader 0 (queries) and 1 (gallery) only"
                    if self.split == "dataloaders"
                    else "one dataloader; use split='dataloaders' for queries (0) and gallery (1)"
                )
                + "; pass only those to the Trainer."
            )
        where = "embed(pl_module, batch)" if self.embed is not None else "validation_step"
        value = self.embed(pl_module, batch) if self.embed is not None else outputs
        if value is None:
            raise InputError(
                "validation_step returned None: return (embeddings, labels[, ids]) from it, or pass "
                "embed=fn(pl_module, batch) to the callback."
            )
        x, y, ids = unpack(
            value, f"{where} (validation batch {batch_idx})", need_ids=trainer.world_size > 1
        )
        self._parts.setdefault(int(dataloader_idx), []).append((x, y, ids))

    def _local(self, idx: int) -> tuple:
        """This rank's collected (embeddings, labels, ids) of one side, or Nones."""
        parts = self._parts.get(idx, [])
        if not parts:
            return None, None, None
        with_ids = {p[2] is not None for p in parts}
        if len(with_ids) > 1:
            raise InputError(
                "some validation batches came with ids and some without; return ids for every "
                "batch or for none."
            )
        x = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        ids = np.concatenate([p[2] for p in parts]) if with_ids == {True} else np.arange(x.shape[0])
        return x, y, ids

    def _side(self, trainer, idx: int) -> tuple:
        """One side (queries or gallery), gathered from every rank, deduplicated by id
        (repeated ids are dropped and counted on one process too: a sampler that
        repeats items, or ids that are not item ids, which are refused)."""
        x, y, ids = self._local(idx)
        if trainer.world_size > 1:
            gathered = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, (x, y, ids))
            gathered = [g for g in gathered if g[0] is not None]
            if not gathered:
                return None, None, 0
            x, y, ids = (np.concatenate([g[i] for g in gathered]) for i in range(3))
        if x is None:
            return None, None, 0
        x, y, ids, dropped = dedupe_by_id(x, y, ids)
        return (x, y), ids, dropped

    def _shard_side(self, idx: int):
        """One side as this rank's shard, repeats dropped over all ranks
        (:class:`~retrieval_checks.integrations._gating.Shard`, or None: no rank has items)."""
        x, y, ids = self._local(idx)

        def gather(obj):
            out = [None] * dist.get_world_size()
            dist.all_gather_object(out, obj)
            return out

        return dedupe_shard(x, y, ids, gather=gather, rank=dist.get_rank())

    def _sharded(self, trainer) -> bool:
        """Whether this epoch evaluates sharded (DDP, torch.distributed initialised, and
        ``distributed`` allows it); prints the fallback note of ``"auto"`` once."""
        if trainer.world_size <= 1 or self.distributed == "gather":
            return False
        if not (dist.is_available() and dist.is_initialized()):
            return False
        if self._gather_for:  # "auto" with a metric the sharded path refuses
            if not self._noted:
                rank_zero_info(
                    f"retrieval-checks: {', '.join(self._gather_for)} reads every embedding at once, "
                    "so the callback all-gathers the validation embeddings on every rank "
                    "(distributed='gather') instead of evaluating them sharded."
                )
                self._noted = True
            return False
        return True

    def _evaluate_sharded(self, where: str) -> tuple:
        """(result, dropped) of ``evaluate(..., process_group=WORLD)`` on this rank's
        de-duplicated shards."""
        shards = [self._shard_side(i) for i in ((0, 1) if self.split == "dataloaders" else (0,))]
        self._parts = {}
        for i, shard in enumerate(shards):
            if shard is None:
                raise InputError(
                    f"{self._side_name(i)} gave no batches to evaluate on any rank; check "
                    "limit_val_batches and the dataloaders."
                )
        options = dict(self.options)
        if "device" not in options:  # Gloo computes on the CPU, NCCL on this rank's CUDA device
            options["device"] = (
                f"cuda:{torch.cuda.current_device()}" if dist.get_backend() == "nccl" else "cpu"
            )
        q = shards[0]
        sides = {"queries": q.embeddings}
        if self.split == "dataloaders":
            sides["gallery"] = shards[1].embeddings
        with model_embeddings(where, sides, self.options):
            if self.split == "dataloaders":
                g = shards[
                    1
                ]  # ids: positions, the gallery's after the queries' (no query is a gallery item)
                result = evaluate(
                    q.embeddings,
                    g.embeddings,
                    query_labels=q.labels,
                    gallery_labels=g.labels,
                    query_ids=q.positions,
                    gallery_ids=q.n_total + g.positions,
                    metrics=self.metrics,
                    process_group=dist.group.WORLD,
                    **options,
                )
            else:
                result = evaluate(
                    q.embeddings,
                    query_labels=q.labels,
                    query_ids=q.ids,
                    metrics=self.metrics,
                    process_group=dist.group.WORLD,
                    **options,
                )
        return result, sum(s.n_dropped for s in shards)

    def _side_name(self, i: int) -> str:
        return (
            "the validation dataloader"
            if self.split == "leave_one_out"
            else f"validation dataloader {i} ({'queries' if i == 0 else 'gallery'})"
        )

    def _evaluate_gathered(self, trainer, where: str) -> tuple:
        """(result, dropped) of one process's ``evaluate`` on the gathered, de-duplicated sides."""
        sides = [self._side(trainer, i) for i in ((0, 1) if self.split == "dataloaders" else (0,))]
        self._parts = {}
        for i, (data, _, _) in enumerate(sides):
            if data is None:
                raise InputError(
                    f"{self._side_name(i)} gave no batches to evaluate; check limit_val_batches and "
                    "the dataloaders."
                )
        (q, qy), q_ids = sides[0][0], sides[0][1]
        g, gy = sides[1][0] if self.split == "dataloaders" else (None, None)
        with model_embeddings(where, {"queries": q, "gallery": g}, self.options):
            if g is not None:
                result = evaluate_split(q, qy, g, gy, metrics=self.metrics, options=self.options)
            else:
                result = evaluate_split(
                    q, qy, metrics=self.metrics, options=self.options, query_ids=q_ids
                )
        return result, sum(s[2] for s in sides)

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if not self._active:
            return
        sharded = self._sharded(trainer)
        where = f"epoch {trainer.current_epoch}"
        result, dropped = (
            self._evaluate_sharded(where) if sharded else self._evaluate_gathered(trainer, where)
        )
        if trainer.world_size > 1 or dropped:
            rank_zero_info(
                f"retrieval-checks: dropped {dropped} repeated item(s) (by id) before evaluating"
                + (
                    f": DistributedSampler pads {trainer.world_size} ranks to equal length"
                    if trainer.world_size > 1
                    else ""
                )
                + (" (sharded evaluation)" if sharded else "")
                + "."
            )
        outcomes = run_gates(result, self.gates)
        values = logged_values(result, self.prefix, outcomes)
        values[self.prefix + "n_duplicates_dropped"] = float(dropped)
        self.last_result, self.last_values, self.last_outcomes, self.last_n_dropped = (
            result,
            values,
            outcomes,
            dropped,
        )
        for (
            name,
            v,
        ) in values.items():  # equal on every rank: a max over ranks is that value, exactly
            pl_module.log(
                name,
                v,
                on_step=False,
                on_epoch=True,
                batch_size=1,
                reduce_fx="max",
                sync_dist=trainer.world_size > 1,
            )
        self._evaluated += 1
        failed = report_failures(outcomes, f"epoch {trainer.current_epoch}")
        if failed and self.raise_on_failure:
            raise AssertionError(failed[0].message)
        if failed and self.stop_on_failure:
            trainer.should_stop = True


class DiscriminantRatioMonitor(Callback):
    """Log the discriminant ratio J = Tr(S_B) / (Tr(S_W) + eps) of every training batch
    (:func:`retrieval_checks.discriminant_ratio`: between-class over within-class
    scatter; unitless, higher is better), as the seed on few-shot logo metrics monitors
    cluster quality during training.

    The batch's embeddings and labels come from ``embed(pl_module, batch)`` (run
    without gradients) or, with ``embed=None``, from what ``training_step`` returns: a
    dict with keys ``embeddings`` and ``labels`` (besides ``loss``). Logged under
    ``name`` (default ``rc/discriminant_ratio``) per step (the logger writes every
    ``Trainer(log_every_n_steps=...)`` steps; every value is kept in ``values``, float64,
    where Lightning's logged scalars are float32). Under DDP each rank's J is that of its own batch; the logger
    records rank 0's.

    J is undefined for a batch of one class, or where every class is a single item:
    ``undefined="error"`` (default) raises; ``undefined="skip"`` logs nothing for that
    batch, counts it in ``n_undefined`` and logs the count per epoch as
    ``name + "_undefined_batches"``. ``every_n_steps`` computes J on every n-th batch.
    """

    def __init__(
        self,
        embed=None,
        *,
        name: str = "rc/discriminant_ratio",
        undefined: str = "error",
        every_n_steps: int = 1,
        eps: float = 1e-12,
    ):
        super().__init__()
        if embed is not None and not callable(embed):
            raise InputError(
                f"embed={shown(embed)}: expected a function (pl_module, batch) -> (embeddings, labels), "
                "or None to read training_step's outputs."
            )
        if not isinstance(name, str) or not name:
            raise InputError(
                f"name={shown(name)}: expected the logged name, e.g. 'rc/discriminant_ratio'."
            )
        if undefined not in ("error", "skip"):
            raise InputError(
                f"undefined={shown(undefined)}: use 'error' (raise on a batch where J is undefined) or "
                "'skip' (log nothing for it, and count it)."
            )
        positive_int(every_n_steps, "every_n_steps")
        if (
            isinstance(eps, bool)
            or not isinstance(eps, numbers.Real)
            or not (math.isfinite(eps) and eps >= 0)
        ):
            raise InputError(f"eps={shown(eps)}: expected a finite number >= 0 (added to Tr(S_W)).")
        self.embed, self.name, self.undefined = embed, name, undefined
        self.every_n_steps, self.eps = int(every_n_steps), float(eps)
        self.values: list[float] = []
        self.n_undefined = 0
        self._epoch_undefined = 0

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._epoch_undefined = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if batch_idx % self.every_n_steps:
            return
        if self.embed is not None:
            with torch.no_grad():
                value = self.embed(pl_module, batch)
            where = f"embed(pl_module, batch) (training batch {batch_idx})"
        else:
            value = outputs
            where = f"training_step (batch {batch_idx})"
            if not isinstance(value, Mapping):
                raise InputError(
                    f"{where} returned {type(value).__name__}; return a dict with 'loss', 'embeddings' "
                    "and 'labels', or pass embed=fn(pl_module, batch) to the monitor."
                )
        x, y, _ = unpack(value, where, need_ids=False)
        try:
            j = float(discriminant_ratio(x, y, eps=self.eps))
        except InputError as exc:
            if self.undefined == "error":
                raise InputError(
                    f"{where}: the discriminant ratio is undefined for this batch: {exc} Use "
                    "batches with at least two classes and two items in some class, or "
                    "undefined='skip'."
                ) from None
            self.n_undefined += 1
            self._epoch_undefined += 1
            return
        self.values.append(j)
        pl_module.log(self.name, j, on_step=True, on_epoch=False, batch_size=x.shape[0])

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if self.undefined == "skip":
            pl_module.log(
                self.name + "_undefined_batches",
                float(self._epoch_undefined),
                on_step=False,
                on_epoch=True,
                batch_size=1,
            )
