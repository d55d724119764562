"""Experiment trackers: every gate of the session logged to MLflow (``--rc-mlflow``)
and / or Weights & Biases (``--rc-wandb``) at the end of the session (on the controller
under xdist).

Per gate: the metric, value, interval (low, high), threshold, rule, pass (1 / 0),
model, dataset and test id. Metric keys are ``rc/<check>/<metric>/value``, ``/low``,
``/high``, ``/threshold`` and ``/passed`` (no key is a prefix of another, as MLflow's
file store needs), where ``<check>`` is the
node id without its directories; characters MLflow refuses become ``_`` (the exact
names are in the table), and a key that two gates would share gets ``_2``, ``_3``...
(reported). ``rc/n_gates`` and ``rc/n_failed`` count the session's gates.

- MLflow: the active run, else a new run (named ``retrieval-checks``) under the tracking
  URI and experiment the environment gives (``MLFLOW_TRACKING_URI``,
  ``MLFLOW_EXPERIMENT_NAME``), ended when the session ends. ``mlflow.log_metrics`` with
  the keys above, tags ``retrieval_checks.*`` (counts, commit), and the table of gates as
  the artifact ``retrieval_checks/gates.json`` (``{"columns": [...], "data": [[...]]}``).
- W&B: the active run (``wandb.run``), else ``wandb.init`` (job type
  ``retrieval-checks``; project ``$WANDB_PROJECT`` or ``retrieval-checks``; ``WANDB_MODE``
  as set, e.g. ``offline``), finished when the session ends. A ``wandb.Table`` logged as
  ``retrieval_checks/gates`` and the keys above in the run's summary.

Both packages are imported only when a session asks for them; a missing one is a usage
error at start-up naming the extra to install.

A tracker that cannot be reached never stalls the session: MLflow's HTTP calls are
bounded (no retry, 10 s per request, unless ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` /
``MLFLOW_HTTP_REQUEST_TIMEOUT`` are set), W&B gets ``WANDB_INIT_TIMEOUT`` (30 s unless
set) and its whole logging is abandoned after :data:`DEADLINE` seconds. Either way one
error note says what was not logged, and the session's exit status is non-zero.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import re
import threading

import pytest

from retrieval_checks.gates import rule_text, tally

EXTRA = "pip install 'retrieval-checks[trackers]'"
TRACKERS = {"mlflow": "mlflow", "wandb": "wandb"}  # option name -> the package it needs
COLUMNS = (
    "test",
    "check",
    "model",
    "dataset",
    "metric",
    "value",
    "low",
    "high",
    "threshold",
    "rule",
    "passed",
    "gate",
    "key",
)


def _flag(config, name: str) -> bool:
    value = config.getoption(f"rc_{name}")
    if value is not None:
        return bool(value)
    raw = str(config.getini(f"rc_{name}") or "").strip().lower()
    if raw in ("", "false", "no", "0", "off"):
        return False
    if raw in ("true", "yes", "1", "on"):
        return True
    raise pytest.UsageError(
        f"retrieval-checks: ini rc_{name}: invalid truth value {raw!r}; write true or false."
    )


def requested(config) -> list[str]:
    """The trackers this session logs to, each checked at start-up: a package that is not
    installed is a usage error naming the extra that brings it."""
    names = [name for name in TRACKERS if _flag(config, name)]
    for name in names:
        if importlib.util.find_spec(TRACKERS[name]) is None:
            raise pytest.UsageError(
                f"retrieval-checks: --rc-{name} (ini rc_{name}): the package {TRACKERS[name]!r} "
                f"is not installed; install the trackers extra: {EXTRA}"
            )
    return names


_UNSAFE = re.compile(r"[^A-Za-z0-9_.\- /]")


def sanitize_key(key: str) -> str:
    """A metric key MLflow accepts on every platform: letters, digits, ``_ . - /`` and
    spaces; no empty, ``.`` or ``..`` path segment; at most 250 characters."""
    parts = [p.strip() for p in _UNSAFE.sub("_", key).split("/")]
    parts = [("_" if p in ("", ".", "..") else p) for p in parts]
    return "/".join(parts)[:250]


def _check(test: str) -> str:
    path, sep, rest = test.partition("::")
    return path.rsplit("/", 1)[-1] + sep + rest


def _finite(x):
    return (
        float(x)
        if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
        else None
    )


def gate_rows(outcomes: list[dict], notes: list[str]) -> tuple[list[list], dict[str, float]]:
    """The table rows (``COLUMNS``) and the metric values by key. Two gates that would
    share a key get ``_2``, ``_3``... and a note says so."""
    rows, metrics, used = [], {}, set()
    for o in outcomes:
        test = str(o.get("test") or "")
        base = sanitize_key(f"rc/{_check(test)}/{o.get('metric')}")
        key, n = base, 1
        while key in used:
            n += 1
            key = f"{base}_{n}"
        if key != base:
            notes.append(
                f"warning: tracker key {base!r} is shared by two gates; the gate of {test} ({o.get('metric')}) "
                f"is logged as {key!r}"
            )
        used.add(key)
        try:
            rule = rule_text(o)
        except Exception:
            rule = ""
        passed = bool(o.get("passed"))
        rows.append(
            [
                test,
                _check(test),
                o.get("model"),
                o.get("dataset"),
                str(o.get("metric")),
                _finite(o.get("value")),
                _finite(o.get("low")),
                _finite(o.get("high")),
                _finite(o.get("threshold")),
                rule,
                passed,
                o.get("gate"),
                key,
            ]
        )
        for suffix, v in (
            ("/value", o.get("value")),
            ("/low", o.get("low")),
            ("/high", o.get("high")),
            ("/threshold", o.get("threshold")),
        ):
            if _finite(v) is not None:
                metrics[key + suffix] = _finite(v)
        metrics[key + "/passed"] = 1.0 if passed else 0.0
    metrics["rc/n_gates"] = float(len(outcomes))
    metrics["rc/n_failed"] = float(tally(outcomes)["FAIL"])
    return rows, metrics


#: Seconds the W&B logging may take in all (start, upload, finish); past it the session
#: goes on without it and says so. MLflow's calls run on this thread (its active run is
#: per thread) and are bounded by its own settings instead (:data:`MLFLOW_BOUNDS`).
DEADLINE = 60.0
#: MLflow's HTTP settings for the plugin's calls, where the environment sets none: its
#: defaults (7 retries with exponential backoff, 120 s per request) stalled a session
#: about 4 minutes on a server that does not answer.
MLFLOW_BOUNDS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
WANDB_BOUNDS = {"WANDB_INIT_TIMEOUT": "30"}


@contextlib.contextmanager
def _bounded_env(bounds: dict):
    """``bounds`` set in the environment for the duration, each only where unset."""
    added = [k for k in bounds if k not in os.environ]
    for k in added:
        os.environ[k] = bounds[k]
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def _within(seconds: float, fn, *args):
    """``fn(*args)`` on a daemon thread; a TimeoutError when it has not returned after
    ``seconds`` (it is left running: nothing else can stop it)."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # re-raised on the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=target, name="retrieval-checks tracker", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TimeoutError(f"no answer within {seconds:g} s; the logging was abandoned")
    if "error" in box:
        raise box["error"]
    return box["value"]


def log_mlflow(rows: list[list], metrics: dict, run: dict) -> str:
    """Log to the active MLflow run, or to a new one ended here; returns where."""
    import mlflow

    with _bounded_env(MLFLOW_BOUNDS):
        return _log_mlflow(mlflow, rows, metrics, run)


def _log_mlflow(mlflow, rows: list[list], metrics: dict, run: dict) -> str:
    active = mlflow.active_run()
    current = active or mlflow.start_run(run_name="retrieval-checks")
    try:
        mlflow.log_metrics(metrics)
        mlflow.set_tags(
            {
                "retrieval_checks.n_gates": len(rows),
                "retrieval_checks.n_failed": int(metrics["rc/n_failed"]),
                **(
                    {"retrieval_checks.git_commit": run["git_commit"]}
                    if run.get("git_commit")
                    else {}
                ),
            }
        )
        mlflow.log_dict({"columns": list(COLUMNS), "data": rows}, "retrieval_checks/gates.json")
    finally:
        if active is None:
            mlflow.end_run()
    return f"MLflow run {current.info.run_id} (tracking URI {mlflow.get_tracking_uri()})"


def log_wandb(rows: list[list], metrics: dict, run: dict) -> str:
    """Log to the active W&B run, or to a new one (``wandb.init``) finished here."""
    import wandb

    active = wandb.run
    current = active
    if current is None:
        current = wandb.init(
            project=None if os.environ.get("WANDB_PROJECT") else "retrieval-checks",
            job_type="retrieval-checks",
            config={"git_commit": run.get("git_commit")},
        )
    try:
        current.log({"retrieval_checks/gates": wandb.Table(columns=list(COLUMNS), data=rows)})
        current.summary.update(metrics)
    finally:
        if active is None:
            current.finish()
    return f"W&B run {current.id} ({os.environ.get('WANDB_MODE') or 'online'} mode)"


def publish(
    names: list[str],
    outcomes: list[dict],
    run: dict | None,
    notes: list[str],
    *,
    deadline: float | None = None,
) -> bool:
    """Log the session's gates to each requested tracker; False (and an error note) when
    one failed: a run the user asked for that was not logged must not look green.
    ``deadline``: seconds the W&B logging may take in all (default :data:`DEADLINE`)."""
    deadline = DEADLINE if deadline is None else deadline
    if not names:
        return True
    if (
        not outcomes
    ):  # said, not silently skipped: a tracker run with nothing in it would read as a pass
        notes.append(
            f"warning: no gate ran in this session: nothing was logged to {' or '.join(names)}"
        )
        return True
    rows, metrics = gate_rows(outcomes, notes)
    ok = True
    for name in names:
        try:
            if name == "mlflow":
                where = log_mlflow(rows, metrics, run or {})
            else:
                with _bounded_env(WANDB_BOUNDS):
                    where = _within(deadline, log_wandb, rows, metrics, run or {})
            notes.append(f"{len(rows)} gates logged to {where}")
        except Exception as exc:
            ok = False
            text = " ".join(str(exc).split())
            text = text if len(text) <= 300 else text[:300] + "..."
            bounds = ", ".join(
                f"{k}={v}" for k, v in (MLFLOW_BOUNDS if name == "mlflow" else WANDB_BOUNDS).items()
            )
            notes.append(
                f"error: could not log the gates to {name} ({type(exc).__name__}: {text}); not logged: "
                f"{len(rows)} gates ({len(metrics)} metric values and the gates table). Check the "
                "tracker's environment (MLFLOW_TRACKING_URI, WANDB_MODE / WANDB_API_KEY) or drop "
                f"--rc-{name}; the plugin bounds the tracker's network calls ({bounds} where unset"
                + ("" if name == "mlflow" else f", {deadline:g} s in all")
                + ")"
            )
    return ok
