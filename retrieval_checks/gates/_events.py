"""Gate events: every gate reports its outcome, passed or failed, to its listeners.

A listener is any callable taking a :class:`GateEvent`. The pytest plugin listens to
put gates in its summary, JUnit properties, JSON, history and HTML; a training loop or
an experiment tracker can listen the same way::

    with rc.gates.listening(print):
        rc.assert_metric(result, "map", at_least=0.5)

:func:`subscribe` returns a :class:`Subscription` for listeners that live longer than
a ``with`` block. A listener that raises does not change the gate's verdict: the
error is kept on the event's ``listener_errors`` and reported as a ``RuntimeWarning``.
"""

from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass, field, fields
from typing import Any, Callable

from ..errors import InputError, warn_outside

__all__ = [
    "GateEvent",
    "Subscription",
    "subscribe",
    "listening",
    "emit",
    "emit_warned",
    "rule_text",
    "RECORD_FIELDS",
]


@dataclass
class GateEvent:
    """The outcome of one gate.

    ``gate``: the assertion's name; ``metric``: canonical name (``"<metric> gap"`` and
    ``"<metric> difference"`` for gaps and comparisons); ``value`` and the interval
    (``low``, ``high``, ``confidence``) when one was used or known; ``on``: what was
    checked (``value``, ``interval``, ``upper``, ``baseline``...); ``comparison`` and
    ``threshold``: the rule as one line (``>=`` and the lower bound, ``<=``, or
    ``between``); ``bounds``: every bound of the rule by name (``at_least``,
    ``at_most``, ``below``, ``margin``, ...); ``passed``; the sample (``n`` units of
    ``unit``, ``n_used`` / ``n_skipped`` queries); ``model`` / ``dataset`` when known;
    ``warnings``: what the gate thinks the reader should know (skipped queries, ties,
    an interval resting on fewer than 5 groups or classes, a gap whose sides look
    swapped); ``extra``: gate-specific fields (the operating threshold, a PR curve, a
    baseline, ``sides_swapped`` for a gap whose whole interval lies below 0).

    Parameters
    ----------
    gate:
        The assertion's name.
    metric:
        The metric's canonical name (``"<metric> gap"``, ``"<metric> difference"``).
    value:
        The value checked (or None).
    passed:
        The verdict.
    low, high, confidence:
        The interval, when one was used or known.
    on:
        What was checked (default ``"value"``).
    comparison, threshold:
        The rule as one line.
    bounds:
        Every bound of the rule by name.
    n, unit:
        The sample: ``n`` units of ``unit``.
    n_used, n_skipped:
        Queries used and skipped.
    model, dataset:
        Names, when known.
    warnings:
        What the reader should know.
    extra:
        Gate-specific fields.
    listener_errors:
        Errors raised by listeners (they do not change the verdict).

    Raises
    ------
    None
        A plain record; :meth:`from_record` raises
        :class:`~retrieval_checks.InputError` for a dict that is no gate record.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> res = rc.evaluate(x, query_labels=[0, 0, 1, 1], metrics=["map"])
    >>> events = []
    >>> with rc.gates.listening(events.append):
    ...     rc.assert_metric(res, "map", at_least=0.7)
    >>> e = events[0]
    >>> e.gate, e.metric, e.value, e.passed, e.comparison, e.threshold, e.n, e.unit
    ('assert_metric', 'map', 0.75, True, '>=', 0.7, 4, 'queries')
    >>> e.to_dict()["bounds"]
    {'at_least': 0.7}
    """

    gate: str
    metric: str
    value: float | None
    passed: bool
    low: float | None = None
    high: float | None = None
    confidence: float | None = None
    on: str = "value"
    comparison: str = ""
    threshold: float | None = None
    bounds: dict = field(default_factory=dict)
    n: int | None = None
    unit: str | None = None
    n_used: int | None = None
    n_skipped: int | None = None
    model: str | None = None
    dataset: str | None = None
    warnings: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    listener_errors: list = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A flat, JSON-ready dict (NaN and infinities become None; ``extra`` merged in)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name in ("extra", "listener_errors"):
                continue
            out[f.name] = _clean(getattr(self, f.name))
        for k, v in self.extra.items():
            out.setdefault(k, _clean(v))
        return out

    @classmethod
    def from_record(cls, record) -> "GateEvent":
        """The event a record stands for (:meth:`to_dict`'s dict, as the pytest plugin's
        JSON report and the history's rows hold it): the fields of :data:`RECORD_FIELDS`
        by name, everything else (a gate's own fields, the context the plugin adds:
        ``test``, ``suite``, ``line``...) in ``extra``. ``from_record(e.to_dict())``
        equals ``e`` up to what JSON cannot hold (NaN becomes None, tuples lists)."""
        if not isinstance(record, dict) or "metric" not in record or "gate" not in record:
            raise InputError(
                "a gate record is a dict with at least 'gate', 'metric' and 'passed' (GateEvent.to_dict), "
                f"got {type(record).__name__}."
            )
        own = {k: record[k] for k in RECORD_FIELDS if k in record}
        own.setdefault("value", None)
        own["passed"] = bool(record.get("passed"))
        own["bounds"] = dict(own.get("bounds") or {})
        own["warnings"] = list(own.get("warnings") or [])
        extra = {k: v for k, v in record.items() if k not in RECORD_FIELDS}
        return cls(**own, extra=extra)


#: The named fields of a gate's record, in order (the event's fields but ``extra`` and
#: ``listener_errors``): the one shape from the gate to the plugin's JSON report and the
#: history's rows; any other key of a record is a gate's own field (``extra``) or the
#: context the pytest plugin adds (``test``, ``suite``, ``line``, ``similarity``, ``ties``).
RECORD_FIELDS = tuple(
    f.name for f in fields(GateEvent) if f.name not in ("extra", "listener_errors")
)


def _clean(v):
    """``v`` as strict JSON can hold it: NaN and infinities become None, numpy
    scalars and arrays become Python numbers and lists, tuples and sets lists."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {
            str(k) if not isinstance(k, (str, int, float, bool)) and k is not None else k: _clean(x)
            for k, x in v.items()
        }
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return [_clean(x) for x in sorted(v, key=str)]
    if hasattr(v, "item") and getattr(v, "ndim", 1) == 0:  # numpy scalars
        return _clean(v.item())
    if hasattr(v, "tolist") and getattr(v, "ndim", 0) >= 1:  # numpy arrays
        return _clean(v.tolist())
    return v


_lock = threading.Lock()
_listeners: list[Callable[[GateEvent], Any]] = []


class Subscription:
    """A listener's registration; ``cancel()`` (or leaving a ``with`` block) ends it."""

    def __init__(self, listener: Callable[[GateEvent], Any]):
        self.listener = listener
        with _lock:
            _listeners.append(listener)

    def cancel(self) -> None:
        with _lock:
            if self.listener in _listeners:
                _listeners.remove(self.listener)

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc) -> None:
        self.cancel()


def subscribe(listener: Callable[[GateEvent], Any]) -> Subscription:
    """Call ``listener(event)`` for every gate from now on, until cancelled."""
    if not callable(listener):
        raise InputError(f"a gate listener must be callable, got {type(listener).__name__}.")
    return Subscription(listener)


@contextlib.contextmanager
def listening(listener: Callable[[GateEvent], Any]):
    """``with listening(fn): ...``: ``fn`` hears every gate inside the block."""
    sub = subscribe(listener)
    try:
        yield sub
    finally:
        sub.cancel()


def emit(event: GateEvent) -> GateEvent:
    """Tell every listener about ``event`` (the gates call this)."""
    with _lock:
        current = list(_listeners)
    for listener in current:
        try:
            listener(event)
        except (
            Exception
        ) as exc:  # a broken listener must not change the gate's verdict, nor go unseen
            problem = f"{getattr(listener, '__name__', listener)!s}: {type(exc).__name__}: {exc}"
            event.listener_errors.append(problem)
            warn_outside(
                f"retrieval-checks: a gate listener failed ({problem})",
                RuntimeWarning,
            )
    return event


def emit_warned(event: GateEvent, said) -> GateEvent:
    """Say a gate's warnings (``said``: ``(text, category)`` pairs), then :func:`emit` its
    event. A warning that the user's filters turn into an error (``-W
    error::retrieval_checks.PowerWarning``, ``warnings.simplefilter("error", ...)``)
    fails the gate: the event says so before the listeners (the plugin's table, JSON,
    history) record it, and the warning is raised after, so the record and the test's
    verdict agree. Each is said at the user's line (:func:`~retrieval_checks.errors.warn_outside`)."""
    raised = None
    for text, category in said:
        try:
            warn_outside(text, category)
        except Warning as exc:  # a warnings filter set to "error"
            raised = exc
            event.passed = False
            event.warnings.append(
                f"failed: this {category.__name__} was raised as an error (a warnings filter): {text}"
            )
            break
    emit(event)
    if raised is not None:
        raise raised
    return event


def _g(x) -> str:
    return f"{x:.6g}" if isinstance(x, (int, float)) else str(x)


def _as_record(record, name: str) -> dict:
    if isinstance(record, GateEvent):
        return record.to_dict()
    if not isinstance(record, dict):
        raise InputError(
            f"{name} takes a GateEvent or its record (a dict), got {type(record).__name__}."
        )
    return record


def verdict(record) -> str:
    """A gate's verdict, from an event or its record (JSON, history): ``PASS``, ``XFAIL``
    (it failed in a test marked xfail: an expected failure, which fails no run) or
    ``FAIL``. Every report, the CLI and the trackers read it here."""
    record = _as_record(record, "verdict")
    return "PASS" if record.get("passed") else ("XFAIL" if record.get("xfail") else "FAIL")


def tally(records) -> dict[str, int]:
    """How many gates of ``records`` have each verdict: ``{"PASS": n, "FAIL": n, "XFAIL": n}``."""
    counts = {"PASS": 0, "FAIL": 0, "XFAIL": 0}
    for record in records:
        counts[verdict(record)] += 1
    return counts


def slice_verdict(row: dict) -> str:
    """A slice row's verdict (:func:`~retrieval_checks.gates.assert_slices` and the slice
    baselines' rows): ``too small`` (refused: too few queries to judge), ``PASS``,
    ``FAIL``, or ``""`` for a row no rule judged (shown for its value only)."""
    if row.get("refused"):
        return "too small"
    passed = row.get("passed")
    return "" if passed is None else ("PASS" if passed else "FAIL")


def rule_text(record) -> str:
    """A gate's rule in one line, from an event or its record (JSON, history):
    ``0.5 <= value <= 0.9`` when both bounds were checked, else ``value >= 0.5``,
    ``interval >= 0.7``, ``upper <= 0.05``, ``baseline >= 0.61``..."""
    record = _as_record(record, "rule_text")
    on, comparison = record.get("on") or "", record.get("comparison") or ""
    bounds = record.get("bounds") or {}
    if comparison == "between" and "at_least" in bounds and "at_most" in bounds:
        what = "value" if on == "value" else "interval"
        return f"{_g(bounds['at_least'])} <= {what} <= {_g(bounds['at_most'])}"
    threshold = record.get("threshold")
    return f"{on} {comparison}".strip() + ("" if threshold is None else f" {_g(threshold)}")
