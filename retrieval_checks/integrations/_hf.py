"""Hugging Face ``transformers``: a ``TrainerCallback`` that, at every evaluation,
embeds a validation set with the model, evaluates it exactly, adds the metrics to the
evaluation's metrics and the log history, and gates them.

Importing this module imports transformers; ``import retrieval_checks.integrations``
does not.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._suggest import hint, shown
from ..engine import evaluate
from ..errors import InputError, warn_outside
from ..metrics import metric_spec
from ._gating import (
    check_evaluate_options,
    check_gates,
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
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover
    raise ImportError(
        "RetrievalChecksTrainerCallback needs transformers: pip install 'retrieval-checks[text]'"
    ) from None

__all__ = ["RetrievalChecksTrainerCallback"]

#: What ``embed`` may return in a dict: the inputs of ``retrieval_checks.evaluate``.
_INPUTS = (
    "queries",
    "gallery",
    "query_labels",
    "gallery_labels",
    "relevance",
    "query_ids",
    "gallery_ids",
)


def _inputs(value) -> dict:
    """evaluate's inputs from what ``embed(model)`` returned."""
    if isinstance(value, Mapping):
        unknown = [k for k in value if k not in _INPUTS]
        if unknown:
            raise InputError(
                f"embed(model) returned a dict with the key {unknown[0]!r}, which is not one it "
                f"takes.{hint(unknown[0], _INPUTS)} Keys: {', '.join(_INPUTS)}."
            )
        if "queries" not in value:
            raise InputError(
                "embed(model) returned a dict without 'queries'; return {'queries': ..., "
                "'query_labels': ...} (and 'gallery', 'gallery_labels' or 'relevance')."
            )
        out = dict(value)
        for side in ("queries", "gallery"):
            if out.get(side) is not None:
                out[side] = to_numpy_rows(out[side], f"embed(model)[{side!r}]")
        return out
    if isinstance(value, (tuple, list)) and len(value) == 2:
        x = to_numpy_rows(value[0], "embed(model): embeddings")
        return {
            "queries": x,
            "query_labels": to_labels(value[1], x.shape[0], "embed(model): labels"),
        }
    raise InputError(
        f"embed(model) returned {type(value).__name__}; return (embeddings, labels) for leave-one-out, "
        "or a dict of retrieval_checks.evaluate's inputs ('queries', 'gallery', 'query_labels', "
        "'gallery_labels', 'relevance')."
    )


class RetrievalChecksTrainerCallback(TrainerCallback):
    """At every evaluation of a ``transformers.Trainer`` (``on_evaluate``): embed a
    validation set with ``embed(model)``, evaluate it with
    :func:`retrieval_checks.evaluate`, add the values to the evaluation's metrics, and
    gate them.

    ``embed(model)`` runs with the model in eval mode and without gradients, and
    returns ``(embeddings, labels)`` (leave-one-out) or a dict of evaluate's inputs
    (``queries``, ``gallery``, ``query_labels``, ``gallery_labels``, ``relevance``,
    ``query_ids``, ``gallery_ids``). Under several processes every process embeds the
    whole set, so every process takes the same decision.

    The values (every metric, interval bounds where a metric has one, ``n_skipped``,
    1/0 per gate as ``gate/<metric>``, under ``prefix``, default ``eval_rc_``) are
    added to the metrics dict that ``trainer.evaluate()`` returns and that
    ``metric_for_best_model`` reads (``metric_for_best_model="rc_map@R"``), and
    appended to ``trainer.state.log_history`` as their own entry (the trainer has
    already sent the evaluation's log to ``report_to`` integrations when callbacks see
    it). ``last_values`` and ``last_result`` keep the latest.

    Gates (checked now, :func:`~retrieval_checks.integrations.check_gates`): a failed
    gate warns; ``stop_on_failure=True`` sets ``control.should_training_stop``;
    ``raise_on_failure=True`` raises the gate's ``AssertionError``. A training run
    that ends without one evaluation (``eval_strategy="no"``) ran no gate: it warns at
    the end of training, and raises an ``AssertionError`` under ``raise_on_failure``.
    Further keyword arguments go to :func:`~retrieval_checks.evaluate`.
    """

    def __init__(
        self,
        embed,
        metrics=None,
        *,
        gates=None,
        prefix: str = "eval_rc_",
        stop_on_failure: bool = False,
        raise_on_failure: bool = False,
        **evaluate_options,
    ):
        if not callable(embed):
            raise InputError(
                f"embed={shown(embed)}: expected a function model -> (embeddings, labels) or a dict of "
                "retrieval_checks.evaluate's inputs."
            )
        self.metrics, self.gates = check_gates(gates, metrics)
        self.options = check_evaluate_options(evaluate_options)
        for flag, value in (
            ("stop_on_failure", stop_on_failure),
            ("raise_on_failure", raise_on_failure),
        ):
            if not isinstance(value, bool):
                raise InputError(f"{flag}={shown(value)}: expected True or False.")
        if stop_on_failure and raise_on_failure:
            raise InputError(
                "stop_on_failure=True and raise_on_failure=True: choose one (stop: end training after "
                "this evaluation; raise: raise the gate's AssertionError now)."
            )
        if not isinstance(prefix, str) or not prefix.startswith("eval_"):
            raise InputError(
                f"prefix={shown(prefix)}: expected a string that starts with eval_, such as "
                "'eval_rc_': the Trainer looks its evaluation metrics up under eval_ "
                "(metric_for_best_model='rc_map@R' reads eval_rc_map@R), so values logged "
                "under another prefix could not be found."
            )
        self.embed, self.prefix = embed, prefix
        self.stop_on_failure, self.raise_on_failure = stop_on_failure, raise_on_failure
        self.last_result = None
        self.last_values: dict[str, float] = {}
        self.last_outcomes: list = []
        self._evaluated = 0  # evaluations in this training run

    def on_train_begin(self, args, state, control, **kwargs):
        self._evaluated = 0
        self._check_best_model_direction(args)
        return control

    def _direction(self, key: str) -> bool | None:
        """Whether a higher value of the logged ``key`` (with ``eval_``) is better; None
        when the key is not one this callback logs."""
        if not key.startswith(self.prefix):
            return None
        name = key[len(self.prefix) :]
        if name == "n_skipped":
            return False
        if name.startswith("gate/"):
            return True
        for base in (name, name.removesuffix("_low"), name.removesuffix("_high")):
            if base in self.metrics:
                return bool(metric_spec(base).capabilities.higher_is_better)
        return None

    def _check_best_model_direction(self, args) -> None:
        """``metric_for_best_model`` naming one of these values whose direction is not
        ``greater_is_better``'s (a new user's trial: ``"rc_medr"``, a rank where lower is
        better, with the Trainer's default ``greater_is_better=True``, kept the worst
        checkpoint as the best): warned before training."""
        chosen = getattr(args, "metric_for_best_model", None)
        if not isinstance(chosen, str):
            return
        key = chosen if chosen.startswith("eval_") else "eval_" + chosen
        higher = self._direction(key)
        greater = getattr(args, "greater_is_better", None)
        if higher is None or greater is None or bool(greater) == higher:
            return
        warn_outside(
            f"retrieval-checks: TrainingArguments(metric_for_best_model={chosen!r}, "
            f"greater_is_better={greater}): {key[len(self.prefix) :]} is better when "
            f"{'higher' if higher else 'lower'}, so the Trainer would keep the worst checkpoint as "
            f"the best; set greater_is_better={higher}.",
            RuntimeWarning,
        )

    def on_train_end(self, args, state, control, **kwargs):
        """A training run in which the Trainer never evaluated ran no gate, and none
        could fail (a new user's trial: eval_strategy="no" ended training quietly with
        raise_on_failure=True): said, with a warning. Not raised, even under
        raise_on_failure: ``trainer.train(); trainer.evaluate()`` is the common way to
        evaluate once, after training, and the gates (which raise there) run then."""
        if self._evaluated:
            return control
        strategy = getattr(args, "eval_strategy", None)
        strategy = getattr(strategy, "value", strategy)
        gates_never_ran(
            self.gates,
            ended=f"training ended at step {state.global_step}",
            missing="the Trainer never evaluated",
            causes=f"TrainingArguments(eval_strategy={strategy!r}): the Trainer evaluates while "
            "training only under eval_strategy='steps' or 'epoch'",
            remedy="Call trainer.evaluate() after train() (the gates run there, and raise under "
            "raise_on_failure), set eval_strategy='steps' (with eval_steps) or 'epoch'",
        )
        return control

    def _embed(self, model) -> dict:
        if model is None:
            raise InputError(
                "on_evaluate received no model; RetrievalChecksTrainerCallback runs inside "
                "transformers.Trainer, which passes it."
            )
        import torch  # transformers imports without torch; embedding needs it

        was_training = getattr(model, "training", False)
        model.eval()
        try:
            with torch.no_grad():
                value = self.embed(model)
        finally:
            model.train(was_training)
        return _inputs(value)

    def on_evaluate(self, args, state, control, model=None, metrics=None, **kwargs):
        data = self._embed(model)
        queries, labels = data.pop("queries"), data.pop("query_labels", None)
        sides = {"queries": queries, "gallery": data.get("gallery")}
        with model_embeddings(f"step {state.global_step}", sides, self.options):
            if data.get("gallery") is None and data.get("relevance") is None:
                result = evaluate_split(
                    queries,
                    labels,
                    metrics=self.metrics,
                    options=self.options,
                    query_ids=data.get("query_ids"),
                )
            else:
                result = evaluate(
                    queries, query_labels=labels, metrics=self.metrics, **data, **self.options
                )
        outcomes = run_gates(result, self.gates)
        values = logged_values(result, self.prefix, outcomes)
        self.last_result, self.last_values, self.last_outcomes = result, values, outcomes
        self._evaluated += 1
        if metrics is not None:
            metrics.update(values)
        state.log_history.append({**values, "epoch": state.epoch, "step": state.global_step})
        failed = report_failures(outcomes, f"step {state.global_step}")
        if failed and self.raise_on_failure:
            raise AssertionError(failed[0].message)
        if failed and self.stop_on_failure:
            control.should_training_stop = True
        return control
