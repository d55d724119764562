"""Gate fields: one table of what each field of a gate accepts, where it is written and
which gates read it, beside the evaluation-option table (:mod:`retrieval_checks.options`).

Every consumer reads :data:`GATE_FIELDS` instead of keeping its own copy of a field's
rule: the Python assertions (:func:`~retrieval_checks.assert_metric` and its siblings),
the YAML suite schema (:mod:`retrieval_checks.suites._schema`: the keys of a check and
of its ``compare:`` / ``baseline:`` mappings, their values, with the file and line in
errors), the JSON schema (``retrieval-checks schema``) and the training-loop
integrations' ``gates={metric: {...}}``. A new gate field is one :class:`GateSpec`
row here (and the code of the gate that acts on it); the tests derive their cases
from this table (tests/gates/test_gate_spec.py).

>>> GATE_FIELDS["on"].check("interval", kind="threshold")
'interval'
>>> GATE_FIELDS["max_skipped"].problem(5.0)
'expected a count of queries (an int >= 0) or a fraction of them (a float in [0, 1), e.g. 0.05), found 5.0 (write 5 for a count).'
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from .._suggest import hint, shown
from ..errors import InputError
from ..metrics._thresholds import check_finite, check_threshold
from ..options import OPTIONS, Option
from ._exact import exceeds

__all__ = [
    "GateSpec",
    "GATE_FIELDS",
    "CHECK_KINDS",
    "fields_of",
    "skipped_limit",
]

#: The kinds of check a YAML suite writes; each gate field belongs to some of them.
CHECK_KINDS = ("threshold", "gap", "compare", "baseline")


@dataclass(frozen=True)
class GateSpec:
    """One gate field.

    ``kind``: ``threshold`` (a number on the metric's own scale, checked by
    :func:`~retrieval_checks.metrics.check_threshold` with ``role``: its unit,
    attainable range and the end that makes a gate that cannot fail), ``choice`` (one
    of ``choices``, which may differ per check kind: a dict kind -> tuple), ``flag``
    (true or false) or ``value`` (a number or count checked by the :class:`Option`
    ``value``: its expected text, bounds and JSON schema). ``scale``: what a threshold
    is measured in (``metric``: the metric's unit; ``difference``: a difference of two
    values; ``tolerance``: a tolerated drop; ``relative``: a fraction of the baseline;
    for other kinds the option's own). ``checks``: the check kinds of a YAML suite that
    take it; ``section``: where a YAML check writes it (``""``: the check's own field,
    ``compare`` or ``baseline``: inside that mapping; a dict ``{check kind: section}``
    where the kinds write it in different places: :meth:`section_for`). ``shared``: the field is also an
    evaluation option of the same name (a suite's ``options:`` may set it for every
    check; the YAML reads it with the options). ``python``: the Python gates that take
    it as a keyword; ``integration``: whether a training-loop integration's
    ``gates={metric: {...}}`` takes it. ``metrics``: the metric capability the field
    needs (``interval``, ``gap``, ``compare``) for the choices in ``needs`` (``on:
    interval`` needs an interval), or for any value when ``needs`` is empty.
    """

    name: str
    kind: str
    help: str
    checks: tuple
    section: str = ""
    scale: str = "metric"
    role: str | None = None
    choices: Any = ()
    meaning: str = ""
    default: Any = None
    value: Option | None = None
    shared: bool = False
    python: tuple = ()
    integration: bool = False
    metrics: str | None = None
    needs: tuple = ()

    def section_for(self, kind: str) -> str:
        """Where a check of ``kind`` writes this field (``""``: the check's own field)."""
        return self.section.get(kind, "") if isinstance(self.section, dict) else self.section

    @property
    def sections(self) -> tuple:
        """Every place a check writes this field."""
        if isinstance(self.section, dict):
            return tuple(dict.fromkeys(self.section.get(k, "") for k in self.checks))
        return (self.section,)

    def choices_for(self, kind: str | None = None) -> tuple:
        """The values a ``choice`` field takes in a check of ``kind`` (every one when None)."""
        if isinstance(self.choices, dict):
            if kind is None:
                return tuple(dict.fromkeys(c for cs in self.choices.values() for c in cs))
            return tuple(self.choices.get(kind, ()))
        return tuple(self.choices)

    def meaning_for(self, kind: str | None = None) -> str:
        if isinstance(self.meaning, dict):
            return self.meaning.get(kind) or next(iter(self.meaning.values()))
        return self.meaning

    def default_for(self, kind: str):
        return self.default.get(kind) if isinstance(self.default, dict) else self.default

    def problem(self, value, *, kind: str | None = None) -> str | None:
        """What is wrong with ``value`` as a sentence (``expected ..., found ...``), or
        None. A ``threshold`` is only checked to be a number here: its scale needs the
        metric (:meth:`check`)."""
        if self.kind == "value":
            return self.value.problem(value)
        if self.kind == "choice":
            allowed = self.choices_for(kind)
            if isinstance(value, str) and value in allowed:
                return None
            close = hint(value, allowed) if isinstance(value, str) else ""
            return f"expected one of {', '.join(allowed)}, found {shown(value)}.{close}"
        if self.kind == "flag":
            return (
                None
                if isinstance(value, bool)
                else f"expected true or false, found {shown(value)}."
            )
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return f"expected a number, found {shown(value)}."
        return None

    def check(
        self,
        value,
        *,
        kind: str | None = None,
        metric=None,
        field: str | None = None,
        **threshold,
    ):
        """``value`` checked (a threshold as a float), else an
        :class:`~retrieval_checks.InputError` naming ``field`` (default: the field's
        name). ``metric``: the :class:`~retrieval_checks.metrics.MetricSpec` (or its
        registry family) a threshold is on, None when the registry does not know it (a
        threshold is then only finite, and a tolerance >= 0); ``threshold``: the
        tighter range a caller knows (``high``, ``high_why``, ``low``, ``low_why``,
        ``baseline``)."""
        name = field or self.name
        if self.kind == "threshold":
            fam = getattr(metric, "capabilities", metric)
            if fam is not None:
                shown_name = getattr(metric, "name", None) or fam.name
                return check_threshold(
                    fam,
                    value,
                    role=self.role or self.name,
                    field=name,
                    metric=threshold.pop("metric_name", shown_name),
                    **threshold,
                )
            v = check_finite(value, name)
            if self.scale in ("tolerance", "relative") and v < 0:
                raise InputError(
                    f"{name}={v:.6g}: a tolerated drop must be >= 0 (0: no drop tolerated); write "
                    f"{-v:.6g} for a drop of {-v:.6g}."
                )
            return v
        if self.kind == "choice":
            allowed = self.choices_for(kind)
            if not isinstance(value, str) or value not in allowed:
                close = hint(value, allowed) if isinstance(value, str) else ""
                raise InputError(
                    f"{name}={shown(value)}: use {' or '.join(repr(a) for a in allowed)} "
                    f"({self.meaning_for(kind)}).{close}"
                )
            return value
        if self.kind == "value":
            try:
                return self.value.check(value, name=name)
            except OverflowError:  # an int too large for a float
                raise InputError(
                    f"{name}: expected {self.value.expected}, found an integer too large for a float."
                ) from None
        problem = self.problem(value, kind=kind)
        if problem is not None:
            raise InputError(f"{name}={shown(value)}: {problem}")
        return value

    def unmet(self, metric, value=None) -> bool:
        """Whether ``metric`` (a MetricSpec) lacks the capability this field (or this
        choice of it) needs."""
        if self.metrics is None or (self.needs and value not in self.needs):
            return False
        caps = getattr(metric, "capabilities", None)
        return caps is not None and not getattr(caps, self.metrics, None)


def _option(name: str) -> Option:
    return OPTIONS[name]


_ALL = CHECK_KINDS

#: Every gate field, by the name a YAML check, a Python gate and an integration use.
GATE_FIELDS: dict[str, GateSpec] = {
    g.name: g
    for g in (
        GateSpec(
            "at_least",
            "threshold",
            "the lowest acceptable value, on the metric's scale",
            ("threshold",),
            python=("assert_metric",),
            integration=True,
        ),
        GateSpec(
            "at_most",
            "threshold",
            "the highest acceptable value, on the metric's scale",
            ("threshold",),
            python=("assert_metric",),
            integration=True,
        ),
        GateSpec(
            "on",
            "choice",
            "threshold checks: value or interval; gap checks: upper or value",
            ("threshold", "gap"),
            choices={"threshold": ("value", "interval"), "gap": ("upper", "value")},
            meaning={
                "threshold": "the point value, or the interval's bound",
                "gap": "the interval's upper bound, or the value",
            },
            default={"threshold": "value", "gap": "upper"},
            python=("assert_metric", "assert_gap_below"),
            integration=True,
            metrics="interval",
            needs=("interval",),
        ),
        GateSpec(
            "below",
            "threshold",
            "the largest gap allowed",
            ("gap",),
            scale="difference",
            python=("assert_gap_below",),
            metrics="gap",
        ),
        GateSpec(
            "rule",
            "choice",
            "how a drop is judged: significant, non_inferior or value",
            ("compare",),
            section="compare",
            choices=("significant", "non_inferior", "value"),
            meaning="how a drop is judged",
            default="significant",
            python=("assert_not_worse",),
            metrics="compare",
        ),
        GateSpec(
            "margin",
            "threshold",
            "the tolerated drop, in the metric's unit",
            ("compare",),
            section="compare",
            scale="tolerance",
            default=0.0,
            python=("assert_not_worse",),
            metrics="compare",
        ),
        GateSpec(
            "max_drop",
            "threshold",
            "the largest drop from the baseline allowed, in the metric's unit",
            ("baseline",),
            section="baseline",
            scale="tolerance",
            python=("assert_no_regression",),
        ),
        GateSpec(
            "max_relative_drop",
            "threshold",
            "the largest drop allowed as a fraction of the baseline (0.05 for 5%)",
            ("baseline",),
            section="baseline",
            scale="relative",
            python=("assert_no_regression",),
        ),
        GateSpec(
            "direction",
            "choice",
            "which way is better, for metrics the registry does not know",
            ("baseline",),
            section="baseline",
            choices=("higher", "lower"),
            meaning="which way is better",
            python=("assert_no_regression",),
        ),
        GateSpec(
            "significant",
            "flag",
            "fail only on drops that are significant at the run's confidence",
            ("baseline",),
            section="baseline",
            default=False,
            python=("assert_no_regression",),
        ),
        GateSpec(
            "min_power",
            "value",
            "fail when the gate's test has less than this power (default: warn only, at 0.8): "
            "a baseline check's significance test to detect a drop of its tolerance, a "
            "comparison's on significance to detect twice its margin; a non-inferiority "
            "comparison's or a gap's to pass a model with nothing wrong",
            ("gap", "compare", "baseline"),
            section={"gap": "", "compare": "compare", "baseline": "baseline"},
            value=Option(
                "min_power",
                "number",
                None,
                "a number strictly between 0 and 1 (e.g. 0.8)",
                low=0.0,
                high=1.0,
                open_low=True,
                open_high=True,
                optional=True,
            ),
            python=("assert_no_regression", "assert_not_worse", "assert_gap_below"),
        ),
        GateSpec(
            "max_skipped",
            "value",
            _option("max_skipped").help,
            _ALL,
            scale="queries",
            value=_option("max_skipped"),
            shared=True,
            python=(
                "assert_metric",
                "assert_gap_below",
                "assert_not_worse",
                "assert_no_regression",
            ),
            integration=True,
        ),
        GateSpec(
            "confidence",
            "value",
            _option("confidence").help,
            _ALL,
            scale="probability",
            value=_option("confidence"),
            shared=True,
            python=("assert_metric",),
            integration=True,
        ),
    )
}


def fields_of(
    *, check: str | None = None, section: str | None = None, integration: bool | None = None
) -> list[GateSpec]:
    """The rows of :data:`GATE_FIELDS` (in table order) for a check kind, a YAML
    section and/or the integrations."""
    return [
        g
        for g in GATE_FIELDS.values()
        if (check is None or check in g.checks)
        and (
            section is None
            or (g.section_for(check) == section if check is not None else section in g.sections)
        )
        and (integration is None or g.integration == integration)
    ]


def skipped_limit(n_skipped, n_used, max_skipped) -> str | None:
    """The one ``max_skipped`` rule: None when ``n_skipped`` of the ``n_used +
    n_skipped`` queries are within ``max_skipped`` (a count, or a fraction of the
    queries decided exactly by :func:`~retrieval_checks.gates._exact.exceeds`: 29 of
    100 is within 0.29; None: no limit); else the limit as words (``3 queries``,
    ``0.05 of the queries (5 of 100)``) for the gate's message."""
    n_skipped = int(n_skipped or 0)
    if max_skipped is None or not n_skipped:
        return None
    n_queries = int(n_used or 0) + n_skipped
    if isinstance(max_skipped, numbers.Integral):
        return f"{max_skipped} queries" if n_skipped > max_skipped else None
    if not exceeds(n_skipped, max_skipped, scale=n_queries):
        return None
    return f"{max_skipped:g} of the queries ({max_skipped * n_queries:g} of {n_queries})"
