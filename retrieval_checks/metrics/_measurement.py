"""The result protocol: what a gate needs to know about one metric of a result.

Every result class (:class:`~retrieval_checks.EvaluationResult`,
:class:`~retrieval_checks.ImageTextResult`, :class:`~retrieval_checks.ClassifierResult`,
:class:`~retrieval_checks.LocalizationResult`, :class:`~retrieval_checks.AccuracyResult`)
answers ``result.measure(name)`` with a :class:`Measurement`: the value, the interval
the result carries (if any), the sample behind it and lines that explain it. Gates,
baselines and reports read measurements, so they need no knowledge of result classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["Measurement", "Measurable", "VALUE_OPTIONS", "OPTION_METRICS", "value_options"]

#: The options of a result's ``config`` that change what a metric measures: two values
#: computed under different ones are different quantities (baselines, ``compare`` and
#: ``rc.compare`` refuse to compare them). ``ties`` (the order of equal scores),
#: ``relevance_level`` (trec_eval's -l), ``empty_queries`` (skip or zero),
#: ``ignore_identical_ids`` (BEIR's rule), ``queries`` (evaluate_run's query set:
#: trec_eval's default or -c), ``k`` (evaluate_run's depth, trec_eval's -M),
#: ``protocol`` (evaluate_image_text's: 5k ranks every image, 1k the first 1000,
#: 5fold1k averages five blocks of 1000; an rsum under 1k is not one under 5k), and the
#: classifier measures' ``cam_method``, ``rho`` (cam_iou's threshold) and
#: ``percentile`` (spectral_measure's margin percentile). Not ``similarity``: it is
#: part of the system measured (a model scored by dot product instead of cosine is a
#: change a baseline should judge, not refuse).
VALUE_OPTIONS = (
    "ties",
    "relevance_level",
    "empty_queries",
    "ignore_identical_ids",
    "queries",
    "k",
    "protocol",
    "cam_method",
    "rho",
    "percentile",
)

#: Options that records written by earlier versions hold but that no longer change a
#: value (``similarity`` until 38702e7): a baselines file or a history run that records
#: one is read as if it did not (a tool's own files keep working), never refused.
RETIRED_OPTIONS = ("similarity",)

#: Options that change the values of some metrics only (the classifier measures share
#: one config): a record of another metric leaves them out, so an accuracy baseline is
#: not refused because cam_iou's threshold moved.
OPTION_METRICS = {
    "cam_method": ("cam_iou", "cam_iou_box"),
    "rho": ("cam_iou", "cam_iou_box"),
    "percentile": ("spectral_measure",),
}

#: The value an option has when a ranking result's config leaves it out (evaluate
#: writes ignore_identical_ids only when True).
_OPTION_DEFAULTS = {"ignore_identical_ids": False}


def value_options(config, metric: str | None = None) -> dict:
    """The :data:`VALUE_OPTIONS` of a result's ``config`` as plain values: those it holds
    (None left out), the defaults filled in for a ranking result (one with ``ties``);
    with ``metric`` (a canonical name), only the options that change its value
    (:data:`OPTION_METRICS`)."""
    if not isinstance(config, Mapping):
        return {}
    out = {}
    for key in VALUE_OPTIONS:
        if metric is not None and metric not in OPTION_METRICS.get(key, (metric,)):
            continue
        value = config.get(key, _OPTION_DEFAULTS.get(key) if "ties" in config else None)
        if value is not None:
            out[key] = value.item() if hasattr(value, "item") else value
    return out


@dataclass(frozen=True)
class Measurement:
    """One metric of one result.

    - ``metric``: canonical name; ``value``; ``unit`` and ``higher_is_better`` from the
      registry;
    - ``interval`` ((low, high) or None), ``confidence`` and ``method``: the interval the
      result itself carries (grouped recall's, an image bootstrap, Wilson's); per-query
      metrics have none here, a gate bootstraps one on demand;
    - ``n`` and ``n_unit``: how many independent units the value averages over;
      ``n_used`` / ``n_skipped``: queries used and skipped (None where not applicable);
    - ``sample``: one line describing the sample; ``details``: further lines for
      messages (operating threshold, group layout, components, worst classes);
    - ``context``: model and dataset names when known; ``extra``: fields for gate
      events (e.g. the pair operating threshold and the PR curve).

    Parameters
    ----------
    metric:
        The canonical metric name.
    value:
        Its value.
    unit:
        ``"fraction"``, ``"rank"``, ``"ratio"``, ``"percentage points"``...
    higher_is_better:
        The metric's direction (default True).
    interval, confidence, method:
        The interval the result carries, its confidence and how it was made (None
        when it carries none).
    n, n_unit:
        How many independent units the value averages over, and what they are
        (default ``"queries"``).
    n_used, n_skipped:
        Queries used and skipped, where applicable.
    sample:
        One line describing the sample.
    details:
        Further lines for gate messages.
    context:
        Model and dataset names when known.
    extra:
        Fields for gate events.

    Raises
    ------
    None
        A plain frozen record; each result's ``measure`` builds it.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> m = rc.evaluate(x, query_labels=[0, 0, 1, 1], metrics=["map"]).measure("map")
    >>> m.metric, m.value, m.unit, m.interval, m.n, m.n_unit
    ('map', 0.75, 'fraction', None, 4, 'queries')
    >>> m.sample
    '4 queries used, 0 skipped, gallery 4'
    """

    metric: str
    value: float
    unit: str
    higher_is_better: bool = True
    interval: tuple | None = None
    confidence: float | None = None
    method: str | None = None
    n: int | None = None
    n_unit: str = "queries"
    n_used: int | None = None
    n_skipped: int | None = None
    sample: str = ""
    details: tuple = ()
    context: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)


@runtime_checkable
class Measurable(Protocol):
    """A result a gate can read: ``name in result`` and ``result.measure(name)``."""

    def measure(self, name: str) -> Measurement: ...

    def __contains__(self, name: object) -> bool: ...
