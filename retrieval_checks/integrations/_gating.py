"""What every training-loop integration shares: gates and options checked when the
integration is built, evaluation of collected embeddings, the logged values, and the
removal of the items a distributed sampler repeats.

No third-party training library is imported here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .._arrays import as_numpy, is_torch_tensor
from .._suggest import hint, shown
from ..engine import check_device, evaluate
from ..engine._inputs import check_embeddings
from ..errors import InputError, MetricNameError, warn_outside
from ..gates import assert_metric
from ..gates._spec import GATE_FIELDS as _TABLE
from ..gates._spec import fields_of
from ..metrics import metric_spec
from ..options import DEFAULTS, check_option, positive_int

__all__ = [
    "GateOutcome",
    "check_gates",
    "check_evaluate_options",
    "run_gates",
    "gates_never_ran",
    "model_embeddings",
    "logged_values",
    "dedupe_by_id",
    "to_numpy_rows",
    "to_labels",
    "GATE_FIELDS",
    "EVALUATE_OPTIONS",
]

#: The fields of one gate: the bounds, whether the point value or the interval's bound
#: is checked, how many skipped queries fail it, the interval's confidence (the rows of
#: the gate-field table, retrieval_checks.gates._spec, that the integrations take).
GATE_FIELDS = tuple(g.name for g in fields_of(integration=True))


def _gate_fields() -> tuple:
    return tuple(g.name for g in fields_of(integration=True))


#: Options passed through to :func:`retrieval_checks.evaluate`, and the option of the
#: table (``retrieval_checks.options``) that validates each.
EVALUATE_OPTIONS = {
    "similarity": "similarity",
    "ties": "ties",
    "empty_queries": "empty_queries",
    "confidence": "confidence",
    "group_size": "group_size",
    "group_repeats": "group_repeats",
    "group_seed": "seed",
    "device": "device",
    "max_memory": "max_memory",
    "relevance_level": None,
}

#: Metric kinds :func:`retrieval_checks.evaluate` computes from embeddings.
_EVALUATE_KINDS = ("query", "pair", "grouped", "embedding")


@dataclass(frozen=True)
class GateOutcome:
    """One gate checked at one evaluation: the canonical ``metric``, whether it
    ``passed``, and the gate's message when it failed ("" when it passed)."""

    metric: str
    passed: bool
    message: str = ""


def _metric(name, field: str):
    """The spec of a metric ``evaluate`` computes, or an InputError naming ``field``."""
    if not isinstance(name, str):
        raise InputError(f"{field}={shown(name)}: a metric name is a string such as 'map@R'.")
    try:
        spec = metric_spec(name)
    except MetricNameError as exc:
        raise MetricNameError(f"{field}: {exc}", name=exc.name, suggestion=exc.suggestion) from None
    if spec.kind not in _EVALUATE_KINDS:
        raise InputError(
            f"{field}={name!r}: {spec.name} is not computed by retrieval_checks.evaluate from "
            "embeddings (it is an image-text or classifier metric); use a retrieval metric such as "
            "'map@R' or 'hit_rate@1'."
        )
    return spec


def _one_gate(metric: str, gate, owner: str) -> tuple[str, dict]:
    field = f"{owner}[{metric!r}]"
    names = _gate_fields()
    if not isinstance(gate, Mapping):
        raise InputError(
            f"{field}={shown(gate)}: a gate is a dict of bounds, e.g. {{'at_least': 0.5}} "
            f"(fields: {', '.join(names)})."
        )
    unknown = [k for k in gate if k not in names]
    if unknown:
        raise InputError(
            f"{field}: unknown field {unknown[0]!r}.{hint(unknown[0], names)} A gate takes "
            f"{', '.join(names)}."
        )
    if gate.get("at_least") is None and gate.get("at_most") is None:
        raise InputError(
            f"{field}: a gate needs at_least, at_most or both (numbers such as 0.5); without a bound "
            "it could never fail."
        )
    spec = _metric(metric, f"{owner} key")
    out = {
        name: _TABLE[name].check(gate[name], kind="threshold", metric=spec, field=f"{field}.{name}")
        for name in names
        if gate.get(name) is not None
    }
    if "at_least" in out and "at_most" in out and out["at_least"] > out["at_most"]:
        raise InputError(
            f"{field}: at_least={out['at_least']:g} > at_most={out['at_most']:g}; no value passes "
            "both: swap them (at_least is the lower bound)."
        )
    out.setdefault("on", _TABLE["on"].default_for("threshold"))
    if _TABLE["on"].unmet(spec, out["on"]):
        raise InputError(f"{field}.on={out['on']!r}: {spec.name} has no interval; use on='value'.")
    return spec.name, out


def check_gates(gates, metrics=None, *, owner: str = "gates") -> tuple[list[str], dict[str, dict]]:
    """Validate ``gates`` (``{metric: {"at_least": x, "at_most": y, "on": "value" |
    "interval", "max_skipped": n, "confidence": c}}``) and ``metrics`` (names, or None
    for the gated metrics) when an integration is built, so that a typo fails before
    training starts, not at the first validation.

    Returns the canonical metric names to compute and the gates keyed by canonical
    name, thresholds as floats. Refused (:class:`~retrieval_checks.InputError`, naming
    the field): an unknown metric or field, a gate without a bound, a threshold that is
    NaN, on the wrong scale or makes a gate that could never fail, a gated metric that
    is not among ``metrics``, a metric named twice, and nothing to compute.
    """
    if gates is None:
        gates = {}
    if not isinstance(gates, Mapping):
        raise InputError(
            f"{owner}={shown(gates)}: pass a dict {{metric: {{'at_least': x}}}}, e.g. "
            "{'map@R': {'at_least': 0.5}}, or None."
        )
    checked: dict[str, dict] = {}
    for metric, gate in gates.items():
        name, out = _one_gate(metric, gate, owner)
        if name in checked:
            raise InputError(
                f"{owner}: {metric!r} and another key both name {name}; keep one gate per metric."
            )
        checked[name] = out
    if metrics is None:
        names = list(checked)
    else:
        if isinstance(metrics, str) or not isinstance(metrics, (list, tuple)):
            raise InputError(
                f"metrics={shown(metrics)}: pass a list of metric names, e.g. ['map@R', 'hit_rate@1']."
            )
        names = []
        for i, m in enumerate(metrics):
            name = _metric(m, f"metrics[{i}]").name
            if name in names:
                raise InputError(
                    f"metrics[{i}]={m!r}: {name} is listed twice; list each metric once."
                )
            names.append(name)
        missing = [n for n in checked if n not in names]
        if missing:
            raise InputError(
                f"{owner}[{missing[0]!r}]: {missing[0]} is gated but not in metrics={list(metrics)}; "
                "add it to metrics (or leave metrics out to compute the gated metrics)."
            )
    if not names:
        raise InputError(
            "metrics: nothing to compute; name at least one metric (metrics=['map@R']) or gate one."
        )
    return names, checked


def check_evaluate_options(options: Mapping) -> dict:
    """The options an integration passes to :func:`retrieval_checks.evaluate`, each
    validated now (an unknown name or a bad value is an InputError naming it). The
    ``device`` is resolved now too, by the check the pytest plugin makes of
    ``--rc-device`` (:func:`retrieval_checks.engine.check_device`): a CUDA device on a
    machine without one is a :class:`~retrieval_checks.BackendError` when the
    integration is built, not at the first evaluation after training steps."""
    out = {}
    for name, value in options.items():
        if name not in EVALUATE_OPTIONS:
            raise InputError(
                f"{name}={shown(value)}: not an option of retrieval_checks.evaluate the integrations "
                f"pass on.{hint(name, EVALUATE_OPTIONS)} Options: {', '.join(EVALUATE_OPTIONS)}."
            )
        table = EVALUATE_OPTIONS[name]
        if table is None:  # relevance_level
            out[name] = positive_int(
                value, "relevance_level", "the lowest grade that counts as relevant"
            )
        else:
            out[name] = check_option(table, value, argument=name)
    if "device" in out:  # a CUDA device on a machine without one: now, not after training steps
        check_device(out["device"])
    return out


def run_gates(result, gates: Mapping[str, dict]) -> list[GateOutcome]:
    """Check every gate on ``result`` with :func:`retrieval_checks.assert_metric` (each
    emits its gate event); a failed gate becomes an outcome holding its message."""
    outcomes = []
    for metric, gate in gates.items():
        try:
            assert_metric(result, metric, **gate)
        except AssertionError as exc:
            outcomes.append(GateOutcome(metric, False, str(exc)))
        else:
            outcomes.append(GateOutcome(metric, True))
    return outcomes


def logged_values(result, prefix: str, outcomes=()) -> dict[str, float]:
    """The values an integration logs: every metric of ``result`` under
    ``prefix + name``; where the metric carries an interval, its bounds as
    ``name + "_low"`` / ``"_high"``; the count of skipped queries (``n_skipped``: no
    relevant gallery item); and 1.0 / 0.0 for each gate passed / failed
    (``gate/`` + metric)."""
    out: dict[str, float] = {}
    for name in result:
        m = result.measure(name)
        out[prefix + name] = float(m.value)
        if m.interval is not None:
            out[prefix + name + "_low"], out[prefix + name + "_high"] = (
                float(m.interval[0]),
                float(m.interval[1]),
            )
    out[prefix + "n_skipped"] = float(result.n_skipped)
    for o in outcomes:
        out[prefix + "gate/" + o.metric] = 1.0 if o.passed else 0.0
    return out


def to_numpy_rows(x, what: str) -> np.ndarray:
    """A (n x d) batch of embeddings (tensor on any device, array or list) as numpy,
    detached from any graph."""
    if is_torch_tensor(x):
        x = x.detach()
        if x.dtype.is_floating_point and x.element_size() < 4:
            x = x.float()  # float16 / bfloat16 (numpy has no bfloat16): exact in float32
        x = x.cpu()
    a = as_numpy(x, what)
    if a.ndim != 2:
        raise InputError(
            f"{what} has shape {a.shape}; expected a (batch x dimension) matrix of embeddings."
        )
    return a


def to_labels(y, n: int, what: str) -> np.ndarray:
    """One label (or id) per row as a 1-D numpy array."""
    if is_torch_tensor(y):
        y = y.detach().cpu()
    a = np.asarray(y) if not isinstance(y, np.ndarray) else y
    if a.ndim != 1 or a.shape[0] != n:
        raise InputError(f"{what} has shape {a.shape}; expected one per embedding ({n},).")
    return a


def _plain(v):
    """A numpy scalar as the Python value (for messages: 5, not np.int64(5))."""
    return v.item() if isinstance(v, np.generic) else v


def _repeats(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(keep, owner, dup)`` for ids in their gathered order: the rows kept (the first
    occurrence of each id, ascending), the kept row of every row's id, and the rows
    that repeat an earlier one."""
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    owner = first[inverse.reshape(-1)]
    return np.sort(first), owner, np.flatnonzero(owner != np.arange(ids.size))


def _check_repeat_labels(ids, y, owner, dup) -> None:
    bad_label = dup[y[dup] != y[owner[dup]]]
    if bad_label.size:
        i = int(bad_label[0])
        raise InputError(
            f"id {_plain(ids[i])!r} appears twice with different labels ({_plain(y[owner[i]])!r} and "
            f"{_plain(y[i])!r}): the ids "
            "are not global item ids; return each item's dataset index (or another unique id)."
        )


def _check_repeat_rows(ids, dup, x_dup, x_owner, scale: float, tolerance: float) -> None:
    """A repeated id's embedding (rows ``x_dup``) must equal its first occurrence's
    (``x_owner``) within ``tolerance`` times ``scale``, the largest magnitude."""
    if not dup.size:
        return
    diff = np.abs(np.asarray(x_dup, np.float64) - np.asarray(x_owner, np.float64)).max(axis=1)
    far = np.flatnonzero(diff > tolerance * max(scale, np.finfo(np.float64).tiny))
    if far.size:
        j = int(far[0])
        raise InputError(
            f"id {_plain(ids[dup[j]])!r} appears twice with different embeddings (largest difference "
            f"{float(diff[j]):.3g}, scale {scale:.3g}): the ids are not global item ids, or "
            "the model changed between the two; return each item's dataset index."
        )


def dedupe_by_id(
    embeddings, labels, ids, *, tolerance: float = 1e-4
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Drop the repeated items of gathered embeddings: a ``DistributedSampler`` pads
    every rank to the same length by repeating items, so all-gathered validation sets
    hold some items twice. Items are identified by ``ids`` (global, e.g. the dataset
    index); the first occurrence of each id is kept, in the gathered order.

    Returns ``(embeddings, labels, ids, n_dropped)``. A repeated id must be the same
    item: its label must be equal and its embedding equal within ``tolerance`` times the
    largest magnitude in the batch (ranks may compute an item in batches of different
    shapes, which can change the last bits); otherwise the ids are not global item ids
    and an :class:`~retrieval_checks.InputError` says so rather than dropping data.
    """
    x = np.asarray(embeddings)
    y = np.asarray(labels)
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.shape[0] != x.shape[0] or y.shape[0] != x.shape[0]:
        raise InputError(
            f"ids {ids.shape}, labels {y.shape} and embeddings {x.shape} must hold one entry per item."
        )
    keep, owner, dup = _repeats(ids)
    if keep.size == ids.size:
        return x, y, ids, 0
    _check_repeat_labels(ids, y, owner, dup)
    scale = float(np.abs(x).max()) if x.size else 0.0
    _check_repeat_rows(ids, dup, x[dup], x[owner[dup]], scale, tolerance)
    return x[keep], y[keep], ids[keep], int(dup.size)


@dataclass(frozen=True)
class Shard:
    """One rank's part of a sharded validation set after :func:`dedupe_shard`: its kept
    ``embeddings``, ``labels`` and ``ids`` (in its own order), their ``positions`` in
    the de-duplicated whole (the ranks' kept items concatenated in rank order), the
    whole's size ``n_total`` and the number of repeats dropped over all ranks."""

    embeddings: np.ndarray
    labels: np.ndarray
    ids: np.ndarray
    positions: np.ndarray
    n_total: int
    n_dropped: int


def dedupe_shard(
    embeddings, labels, ids, *, gather, rank: int, tolerance: float = 1e-4
) -> Shard | None:
    """:func:`dedupe_by_id` on the concatenation of every rank's shard (in rank order)
    without gathering the embeddings: ``gather(obj)`` is an all-gather of Python objects
    over the ranks (every rank calls it; it returns the list of every rank's ``obj``, in
    rank order), as ``torch.distributed.all_gather_object``; ``rank`` is this rank's
    index in that list.

    First exchange: the ids, labels, row count, dimension, dtype and largest magnitude of
    each shard (``embeddings=None``: the rank holds no items). Every rank then finds the
    same repeats (a later occurrence of an id, on a later rank or later on the same
    rank) and refuses a repeat whose label differs. Second exchange: only the rows of the
    repeated ids (the repeats and their first occurrences), to refuse a repeat whose
    embedding differs by more than ``tolerance`` times the largest magnitude over all
    ranks (the check :func:`dedupe_by_id` makes). Each rank keeps its rows that are no
    repeat. Returns None when no rank holds an item; every rank gets the same answer
    (or raises the same error).
    """
    if embeddings is None:
        meta = None
    else:
        x, y, ids = np.asarray(embeddings), np.asarray(labels), np.asarray(ids)
        if ids.ndim != 1 or ids.shape[0] != x.shape[0] or y.shape[0] != x.shape[0]:
            raise InputError(
                f"ids {ids.shape}, labels {y.shape} and embeddings {x.shape} must hold one entry per "
                "item."
            )
        meta = (ids, y, x.shape, x.dtype.str, float(np.abs(x).max()) if x.size else 0.0)
    metas = gather(meta)
    rank = None if meta is None else int(rank)
    present = [m for m in metas if m is not None]
    if not present:
        return None
    dims = {m[2][1:] for m in present}
    if len(dims) > 1:
        raise InputError(
            f"the ranks' validation embeddings have different shapes per item ({sorted(dims)}); every "
            "rank must embed with the same model."
        )
    sizes = [0 if m is None else m[2][0] for m in metas]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    all_ids = np.concatenate([m[0] for m in present])
    all_y = np.concatenate([m[1] for m in present])
    keep, owner, dup = _repeats(all_ids)
    _check_repeat_labels(all_ids, all_y, owner, dup)
    involved = np.unique(np.concatenate([dup, owner[dup]]))
    return _finish_shard(
        embeddings, labels, ids, metas, rank, offsets, keep, owner, dup, involved, gather, tolerance
    )


def _finish_shard(
    x, y, ids, metas, rank, offsets, keep, owner, dup, involved, gather, tolerance
) -> Shard:
    """The second exchange of :func:`dedupe_shard` and the rank's kept rows."""
    present = [m for m in metas if m is not None]
    if rank is None:  # this rank holds no items: it still joins the exchange
        lo = hi = 0
        sent = {}
    else:
        lo, hi = int(offsets[rank]), int(offsets[rank + 1])
        mine = involved[(involved >= lo) & (involved < hi)]
        sent = {int(g): np.asarray(x)[g - lo] for g in mine}
    rows: dict = {}
    for part in gather(sent):
        rows.update(part)
    all_ids = np.concatenate([m[0] for m in present])
    if dup.size:
        scale = max(m[4] for m in present)
        _check_repeat_rows(
            all_ids,
            dup,
            np.stack([rows[int(g)] for g in dup]),
            np.stack([rows[int(g)] for g in owner[dup]]),
            scale,
            tolerance,
        )
    kept = np.zeros(all_ids.size, bool)
    kept[keep] = True
    position = np.cumsum(kept) - 1
    if rank is None:
        d = present[0][2][1:]
        dtype = np.dtype(present[0][3])
        x = np.zeros((0, *d), dtype)
        y = present[0][1][:0]
        ids = present[0][0][:0]
        local = np.zeros(0, bool)
    else:
        x, y, ids = np.asarray(x), np.asarray(y), np.asarray(ids)
        local = kept[lo:hi]
    return Shard(
        x[local], y[local], ids[local], position[lo:hi][local], int(keep.size), int(dup.size)
    )


def evaluate_split(
    queries,
    query_labels,
    gallery=None,
    gallery_labels=None,
    *,
    metrics,
    options,
    query_ids=None,
    gallery_ids=None,
):
    """``evaluate`` on collected arrays: leave-one-out when ``gallery`` is None."""
    if gallery is None:
        return evaluate(
            queries, query_labels=query_labels, query_ids=query_ids, metrics=metrics, **options
        )
    return evaluate(
        queries,
        gallery,
        query_labels=query_labels,
        gallery_labels=gallery_labels,
        query_ids=query_ids,
        gallery_ids=gallery_ids,
        metrics=metrics,
        **options,
    )


def report_failures(outcomes, where: str) -> list[GateOutcome]:
    """Warn once per failed gate (``RuntimeWarning``, at the first frame outside the
    library: the training loop's) and return the failed ones."""
    failed = [o for o in outcomes if not o.passed]
    for o in failed:
        warn_outside(
            f"retrieval-checks: gate on {o.metric} failed at {where}:\n{o.message}",
            RuntimeWarning,
        )
    return failed


def gates_never_ran(
    gates, *, ended: str, missing: str, causes: str, remedy: str, fail: bool = False
) -> None:
    """Say that training ended without one evaluation, so that ``gates`` never ran and
    none could fail (a new user's trial: Lightning with ``limit_val_batches=0``, a
    Trainer with ``eval_strategy="no"``, each ended quietly under
    ``raise_on_failure=True``): a ``RuntimeWarning``, under ``raise_on_failure`` too,
    for every training loop alike: training then evaluating once (``trainer.train();
    trainer.evaluate()``, ``trainer.fit(m); trainer.validate(m)``) is the common way to
    gate the final model, and the gates run and raise there; raised at the end of
    training, this would stop that second call from ever running. ``fail``: no later call
    can run them (the trainer validates nothing: ``limit_val_batches=0``), so under
    ``raise_on_failure`` it is an ``AssertionError``, as a failed gate is. Nothing
    without gates.

    ``ended``: how training ended ("fit ended after 3 epoch(s)"); ``missing``: what
    never happened ("no validation epoch was evaluated"); ``causes``: the settings that
    do that; ``remedy``: how to evaluate at least once."""
    if not gates:
        return
    message = (
        f"retrieval-checks: {ended} and {missing}, so the gates ({', '.join(gates)}) never ran "
        f"and could not fail ({causes}). {remedy}, or gate the model after training with "
        "retrieval_checks.assert_metric."
    )
    if fail:
        raise AssertionError(message)
    warn_outside(message, RuntimeWarning)


def _refusal(x, name: str, similarity: str) -> str | None:
    """The message of the engine's embedding checks on ``x`` (NaN, Inf, all-zero rows
    under cosine, ...), or None when they pass."""
    try:
        check_embeddings(x, name, similarity=similarity)
    except InputError as exc:
        return str(exc)
    return None


@contextmanager
def model_embeddings(where: str | None, sides: Mapping, options: Mapping) -> Iterator[None]:
    """Around an integration's evaluation of the model's embeddings (``sides``: the
    arrays by the name evaluate gives them, ``queries``, ``gallery``; None skipped): an
    InputError of the engine's embedding checks (``queries has 40 row(s) with NaN or
    Inf ... drop or repair those items``) blamed the data when the model made the rows
    (a new user's trial: a diverged model). It is raised again, the message kept, saying
    that the rows are the model's embeddings at ``where`` ("step 120", "epoch 3"; None:
    no training step) and what NaN, Inf or zero rows from a model usually mean. Found by
    checking the sides again only after a refusal, on this process's own arrays: no
    cost when they pass, and no collective (a rank without such rows keeps the
    engine's message). Any other error (one whose message is not the check's) passes
    unchanged."""
    try:
        yield
    except InputError as exc:
        similarity = options.get("similarity", DEFAULTS["similarity"])
        found = [
            _refusal(x, name, similarity)
            for name, x in sides.items()
            if x is not None and len(x)  # a rank's empty shard is no finding
        ]
        if type(exc) is not InputError or not any(m and m in str(exc) for m in found):
            raise
        at = f" at {where}" if where else ""
        raise InputError(
            f"embeddings of the model{at}: {exc} These rows are the model's output, not the "
            "data's: NaN or Inf embeddings usually mean that training diverged (check the loss "
            "and the learning rate), all-zero ones that the model collapsed."
        ) from exc
