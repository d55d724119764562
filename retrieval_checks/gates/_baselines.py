"""Baselines: a metric's recorded value, interval and per-unit summary, kept in a
reviewable YAML file next to the suite or test module, and the gate that compares a
new result with it.

A baseline record holds ``metric``, ``value``, ``interval`` ([low, high] or null),
``confidence``, ``n`` and ``unit`` (what was counted), and ``units``: per class (or
grouped-recall group, or query when there are no labels and at most 5000 of them) the
sum and count of the per-query values, which is exactly what the paired cluster-robust
test of :func:`retrieval_checks.compare` needs, in a few lines per class. A rank
metric's record also holds ``max_rank``, the largest rank a query could get (from the
gallery), against which drop tolerances are checked. Records of
metrics without per-query values (pair metrics, the discriminant ratio, image-text
metrics) keep the value and interval only.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import numbers
import os
import stat
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import yaml

try:  # POSIX: an advisory lock on a sibling file serialises writers
    import fcntl
except ImportError:  # pragma: no cover - Windows: an O_EXCL lock file instead
    fcntl = None

from .._suggest import did_you_mean, hint, shown
from ..engine._result import refuse_vacuous
from ..errors import InputError, MetricNameError, PowerWarning, warn_outside
from ..metrics._measurement import RETIRED_OPTIONS, VALUE_OPTIONS
from ..metrics._measurement import value_options as _options_of
from ..metrics._names import metric_spec
from ..metrics._thresholds import check_threshold
from ..options import DEFAULTS
from ..stats._intervals import bootstrap_interval, wilson_interval
from ._assertions import computed_metrics, max_rank
from ._events import GateEvent, emit, emit_warned
from ._family import claimed, deferrable, family_fields, family_of, power_note, unclaimed
from ._regression import Change, measure_change
from ._regression import checked_option as check_option
from ._spec import GATE_FIELDS, skipped_limit

__all__ = [
    "baseline_record",
    "BaselineFile",
    "BaselineStore",
    "assert_no_regression",
    "records_differ",
    "write_records",
    "baseline_path",
    "check_record",
    "rounded_record",
    "SIGNIFICANT_DIGITS",
    "VALUE_OPTIONS",
    "value_options",
    "check_same_options",
    "check_same_set",
]

_MAX_QUERY_UNITS = 5000

#: What a record's ``n`` counts (``unit``): the units of evaluation results.
RECORD_UNITS = ("queries", "groups", "images", "samples", "classes", "pairs")

#: How to repair a malformed record of a baselines file.
REGEN_FIX = (
    "edit the record, or delete it and regenerate it with pytest --rc-force-regen (writes missing or "
    "changed baselines) or --rc-regen-all (rewrites every baseline)"
)


#: Significant digits of the numbers a baselines file stores (value, interval, unit sums):
#: readable, and small pull-request diffs. The store rounds a new result the same way
#: before comparing it, so a result equal to its baseline compares equal.
SIGNIFICANT_DIGITS = 6
# the units' mean against the value, both rounded: each is off by at most 5e-6 (relative) at 6 digits
_ROUNDED_REL_TOL = 2e-5


def round_stored(x):
    """A float rounded to SIGNIFICANT_DIGITS significant digits; anything else as it is
    (integers, and what check_record will refuse)."""
    if isinstance(x, float) and math.isfinite(x):
        return float(f"{x:.{SIGNIFICANT_DIGITS}g}")
    return x


#: evaluate_image_text's protocols by the name a record holds ("all" is "5k": every image)
_PROTOCOL_KEYS = {"all": "5k"}


def value_options(result, metric: str | None = None) -> dict:
    """The options of ``result`` that change a metric's value (:data:`VALUE_OPTIONS`;
    with ``metric``, those that change its value). An image-text result's protocol is
    one, read from ``result.protocol`` where its config does not hold it: an rsum over
    the first 1000 images is not one over 5000."""
    config = getattr(result, "config", None)
    protocol = getattr(result, "protocol", None)
    if isinstance(config, Mapping) and isinstance(protocol, str) and "protocol" not in config:
        config = {**config, "protocol": protocol}
    options = _options_of(config, metric)
    if isinstance(options.get("protocol"), str):
        options["protocol"] = _PROTOCOL_KEYS.get(options["protocol"], options["protocol"])
    return options


def _options_text(options: Mapping, keys) -> str:
    return ", ".join(f"{k}={options[k]!r}" if k in options else f"{k} unset" for k in keys)


def check_same_options(baseline: Mapping, current: Mapping, where: str = "") -> None:
    """Refuse to compare records whose results were computed under different
    :data:`VALUE_OPTIONS`, naming each one that differs and the two fixes. A record
    without ``options`` (written before records held them) is compared as it is."""
    b, c = baseline.get("options"), current.get("options")
    if b is None or c is None:
        return
    b, c = ({k: v for k, v in o.items() if k not in RETIRED_OPTIONS} for o in (b, c))
    differ = sorted(k for k in set(b) | set(c) if b.get(k, _MISSING) != c.get(k, _MISSING))
    if not differ:
        return
    same = ", ".join(f"{k}={b[k]!r}" for k in differ if k in b)
    unknown = [k for k in differ if k not in b]
    older = (
        f" (a record written before records held {', '.join(unknown)}: what it was computed "
        "under is not known, so it is not taken to be this one)"
        if unknown
        else ""
    )
    raise InputError(
        f"{where + ': ' if where else ''}{current.get('metric')}: the baseline was recorded with "
        f"{_options_text(b, differ)}{older}, this result was computed with "
        f"{_options_text(c, differ)}; under other options the metric measures another number, so "
        "the two are not compared. "
        + (
            "Fix: re-record the baseline, so that it holds what it is computed under (pytest "
            "--rc-force-regen writes changed baselines and fails, --rc-regen-all rewrites every "
            "one; review and commit the file)."
            if unknown and not same
            else f"Fix: evaluate with the baseline's options{f' ({same})' if same else ''}, "
            "or re-record the baseline under the new ones (pytest --rc-force-regen writes changed "
            "baselines and fails, --rc-regen-all rewrites every one; review and commit the file)."
        )
    )


_MISSING = object()


def _unit_scheme(rec: Mapping):
    """How a record names its units: per class, per grouped-recall group, per query by
    id (``query id <id>``) or per query by row (``query <i>``). Only units named the
    same way are the same units: a baseline keyed by rows and a run keyed by ids (a
    result that now carries query ids) may hold the same queries."""
    units = rec.get("units") or {}
    if rec.get("units_are") == "queries":
        by_id = all(str(k).startswith("query id ") for k in units)
        return ("queries", "ids" if by_id else "rows")
    return (rec.get("units_are"),)


def _some(keys, limit: int = 5) -> str:
    keys = sorted(map(str, keys), key=lambda k: (len(k), k))
    shown_keys = ", ".join(repr(k) for k in keys[:limit])
    return shown_keys + (f", ... ({len(keys)} in all)" if len(keys) > limit else "")


def check_same_set(baseline: Mapping, current: Mapping, where: str = "") -> None:
    """Refuse to compare records of different evaluated sets, as far as the records
    tell: a different ``n`` (the queries, classes, images ... the value averages over),
    different units (classes, groups or queries named the same way: some only in the
    baseline or only now) or units that count different queries. A value over
    another set is another number: a drop tolerance, with or without a significance
    test, would compare it as if it were the same one. A record without ``n`` or
    ``units`` (written before records held them, or by hand) is compared as it is."""
    why = []
    nb, nc = baseline.get("n"), current.get("n")
    if nb is not None and nc is not None and int(nb) != int(nc):
        unit_b, unit_c = baseline.get("unit"), current.get("unit")
        why.append(
            f"n {nb} {unit_b or ''}".rstrip()
            + f" in the baseline, {nc} {unit_c or ''}".rstrip()
            + " now"
        )
    ub, uc = baseline.get("units") or {}, current.get("units") or {}
    if ub and uc and _unit_scheme(baseline) == _unit_scheme(current):
        kind = baseline.get("units_are") or ("groups" if baseline.get("partition") else "units")
        only_b, only_c = set(ub) - set(uc), set(uc) - set(ub)
        if only_b or only_c:
            parts = [
                f"{len(keys)} only {side} ({_some(keys)})"
                for keys, side in ((only_b, "in the baseline"), (only_c, "now"))
                if keys
            ]
            why.append(
                f"the baseline and this run have different units ({kind}: {len(ub)} in the "
                f"baseline, {len(uc)} now; {'; '.join(parts)})"
            )
        else:
            moved = [k for k in ub if int(ub[k][1]) != int(uc[k][1])]
            if moved:
                shown_moved = ", ".join(
                    f"{k!r}: {int(ub[k][1])} -> {int(uc[k][1])}"
                    for k in sorted(map(str, moved))[:5]
                )
                why.append(
                    f"the same {kind} count different queries ({len(moved)} of {len(ub)} changed: "
                    f"{shown_moved}{', ...' if len(moved) > 5 else ''})"
                )
    if not why:
        return
    raise InputError(
        f"{where + ': ' if where else ''}{current.get('metric')}: the evaluated set is not the one the "
        f"baseline was recorded on: {'; '.join(why)}. A value over other queries is another number, so "
        "the two are not compared (with or without significant:). Fix: evaluate on the set the "
        "baseline was recorded on, or, when the set changed on purpose, re-record the baseline "
        "(pytest --rc-force-regen writes changed baselines and fails, --rc-regen-all rewrites every "
        "one; review and commit the file)."
    )


def _unchecked_set_note(baseline: Mapping, current: Mapping, metric: str) -> str | None:
    """A note when the baseline cannot tell whether the evaluated set changed: a record
    without ``n`` (an old or hand-written one) against a run that has one."""
    if baseline.get("n") is not None or current.get("n") is None:
        return None
    return (
        f"assert_no_regression: the {metric} baseline record has no n (the number of "
        f"{current.get('unit') or 'queries'} it was measured on), so whether this run evaluated the "
        f"same set ({current['n']} {current.get('unit') or 'queries'}) is not checked. Re-record it "
        "(pytest --rc-force-regen) to have it checked."
    )


def rounded_record(rec):
    """A copy of the record ``rec`` with its value, interval and unit sums rounded to
    :data:`SIGNIFICANT_DIGITS` significant digits (what a baselines file stores); the
    interval is widened, if rounding moved it past the rounded value, to hold it. A
    record that is not a mapping is returned as it is (:func:`check_record` refuses it)."""
    if not isinstance(rec, Mapping):
        return rec
    out = dict(rec)
    if "value" in out:
        out["value"] = round_stored(out["value"])
    iv = out.get("interval")
    if isinstance(iv, (list, tuple)) and len(iv) == 2:
        low, high = round_stored(iv[0]), round_stored(iv[1])
        v, v0 = out.get("value"), rec.get("value")
        held = (
            all(isinstance(x, float) and math.isfinite(x) for x in (*iv, low, high))
            and isinstance(v, numbers.Real)
            and not isinstance(v, bool)
            and iv[0] <= v0 <= iv[1]
        )
        if held:  # only rounding's own slip is mended; an interval that missed its value stays for check_record
            low, high = min(low, float(v)), max(high, float(v))
        out["interval"] = [low, high]
    units = out.get("units")
    if isinstance(units, Mapping):
        out["units"] = {
            k: [round_stored(u[0]), u[1]] if isinstance(u, (list, tuple)) and len(u) == 2 else u
            for k, u in units.items()
        }
    return out


def _clean(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


def _config_option(result, name: str, *fallbacks: str):
    config = getattr(result, "config", None)
    config = config if isinstance(config, dict) else {}
    for key in (name, *fallbacks):
        if config.get(key) is not None:
            return config[key]
    return DEFAULTS[name]


def baseline_record(
    result, metric: str, *, confidence: float | None = None, seed: int | None = None
) -> dict:
    """The record of ``metric`` in ``result`` (any result that answers ``measure``).

    ``confidence`` and ``seed`` of the bootstrap interval of a per-query metric:
    explicit, else the result's ``config`` (``confidence``; ``seed`` or
    ``group_seed``), else the defaults. A value that is not finite is refused: a
    baseline of NaN would make every later check pass.

    Parameters
    ----------
    result:
        An evaluation result (of :func:`~retrieval_checks.evaluate`,
        :func:`~retrieval_checks.evaluate_run`, :func:`~retrieval_checks.evaluate_image_text`,
        :func:`~retrieval_checks.evaluate_classifier`, ...).
    metric:
        The metric to record (a canonical name or an alias); the result must hold it.
    confidence, seed:
        Of the bootstrap interval of a per-query metric (default: the result's own).

    Returns
    -------
    dict
        The record: ``metric``, ``value``, ``interval`` (``[low, high]`` or None),
        ``confidence``, ``n`` and ``unit`` (the sample), and when known
        ``n_skipped``, ``max_rank`` and the per-unit sums (``units_are``, ``units``)
        that a significance test pairs.

    Raises
    ------
    InputError
        Not an evaluation result, a metric it does not hold, a value that is not
        finite, an invalid ``confidence`` or ``seed``.
    MetricNameError
        An unknown metric name.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(10), 3)
    >>> x = rng.normal(size=(10, 8))[y] + 0.3 * rng.normal(size=(30, 8))
    >>> res = rc.evaluate(x, query_labels=y, metrics=["map"])
    >>> rec = rc.baseline_record(res, "map")
    >>> rec["metric"], rec["value"], rec["n"], rec["unit"], rec["units_are"]
    ('map', 0.9625, 30, 'queries', 'classes')
    >>> [round(v, 4) for v in rec["interval"]]
    [0.9208, 0.9944]
    """
    refuse_vacuous(result, "baseline_record")
    if not callable(getattr(result, "measure", None)) or not hasattr(result, "__contains__"):
        raise InputError(
            f"baselines record evaluation results (from evaluate, evaluate_image_text, "
            f"evaluate_classifier, ...), got {type(result).__name__}."
        )
    confidence = _config_option(result, "confidence") if confidence is None else confidence
    seed = _config_option(result, "seed", "group_seed") if seed is None else seed
    confidence = float(check_option("confidence", confidence))
    seed = int(check_option("seed", seed))
    spec = metric_spec(metric)
    if spec.name not in result:
        held = ", ".join(computed_metrics(result)) or "nothing the gates know"
        raise InputError(
            f"{spec.name} was not computed; this {type(result).__name__} holds: {held[:400]}. Record "
            f"one of those, or evaluate it with metrics=[{spec.name!r}]."
        )
    m = result.measure(spec.name)
    if not math.isfinite(float(m.value)):
        raise InputError(
            f"{spec.name} is {m.value} in this result: a baseline needs a finite value (check the "
            "inputs; an undefined value cannot be gated)."
        )
    rec: dict = {
        "metric": spec.name,
        "value": float(m.value),
        "interval": None,
        "confidence": confidence,
        "n": m.n,
        "unit": m.n_unit,
    }
    if m.n_skipped is not None:
        rec["n_skipped"] = int(m.n_skipped)
    options = value_options(result, spec.name)
    if options:
        rec["options"] = options
    top, _ = max_rank(result, spec.name)
    if top is not None:
        rec["max_rank"] = int(top)
    if (
        m.interval is not None
        and _clean(m.interval[0]) is not None
        and _clean(m.interval[1]) is not None
    ):
        rec.update(interval=[float(m.interval[0]), float(m.interval[1])], confidence=m.confidence)
    elif (
        spec.capabilities.interval == "wilson"
    ):  # accuracy's result holds the counts, not the interval
        n_correct, n = getattr(result, "n_correct", None), getattr(result, "n", None)
        if (
            isinstance(n_correct, numbers.Integral)
            and isinstance(n, numbers.Integral)
            and 0 <= n_correct <= n > 0
        ):
            low, high = wilson_interval(int(n_correct), int(n), confidence)
            rec.update(
                interval=[max(0.0, float(low)), min(1.0, float(high))], confidence=confidence
            )
    _around_value(rec)
    if spec.kind == "grouped":
        rec.update(_grouped_units(result.grouped[spec.name]))
    elif spec.capabilities.per_query and spec.name in getattr(result, "per_query", {}):
        rec.update(_query_units(result, spec, confidence, seed))
    _around_value(rec)
    return rec


def _around_value(rec: dict) -> None:
    """A percentile bootstrap interval of a tiny or discrete sample can, rarely, miss
    its own point value by a hair; a record's interval holds its value (check_record
    refuses one that does not), so such an interval is widened to the value: the
    conservative side for a significance test."""
    iv = rec.get("interval")
    if iv is not None:
        rec["interval"] = [min(float(iv[0]), rec["value"]), max(float(iv[1]), rec["value"])]


def _grouped_units(g) -> dict:
    """Grouped recall: the partition's fingerprint and one unit per group."""
    partition = hashlib.sha256(
        np.ascontiguousarray(g.group_of_query, dtype=np.int64).tobytes()
    ).hexdigest()[:16]
    values = g.group_values.mean(axis=0)
    return {
        "partition": f"S={g.group_size} seed={g.seed} repeats={g.repeats} {partition}",
        "units": {f"group {i}": [float(v), 1] for i, v in enumerate(values)},
    }


def _query_units(result, spec, confidence: float, seed: int) -> dict:
    """A per-query metric: its bootstrap interval and per-class (or per-query) sums."""
    values = result.per_query[spec.name]
    used = ~np.isnan(values)
    out: dict = {"n": int(used.sum()), "unit": "queries"}
    if spec.capabilities.interval == "bootstrap":
        try:
            iv = bootstrap_interval(
                result,
                spec.name,
                confidence=confidence,
                n_resamples=1000,
                method="percentile",
                seed=seed,
            )
            out["interval"] = [float(iv.low), float(iv.high)]
            out["confidence"] = float(iv.confidence)
        except InputError:
            pass
    if spec.family in ("medr", "gm_map"):  # not means: per-class sums would not rebuild them
        return out
    codes = getattr(result, "query_label_codes", None)
    if codes is not None:
        labels = result.label_values
        inv_codes, inv = np.unique(codes[used], return_inverse=True)
        sums = np.bincount(inv, weights=values[used])
        counts = np.bincount(inv)
        keys = [
            str(labels[c].item() if hasattr(labels[c], "item") else labels[c])
            if labels is not None
            else str(c)
            for c in inv_codes
        ]
        out.update(
            units_are="classes",
            units={k: [float(s), int(n)] for k, s, n in zip(keys, sums, counts)},
        )
    elif used.sum() <= _MAX_QUERY_UNITS:
        rows = np.flatnonzero(used)
        out.update(
            units_are="queries",
            units={k: [float(values[i]), 1] for k, i in zip(_query_keys(result, rows), rows)},
        )
    return out


def _query_keys(result, rows) -> list[str]:
    """The units' names of per-query units: ``query id <id>`` when the result carries
    one distinct id per query (BEIR and run datasets, ``query_ids=``), so that a paired
    test pairs the same queries whatever their order in either run; else the row,
    ``query <i>`` (a name no id key shares: a baseline keyed one way is never paired
    with a run keyed the other)."""
    ids = getattr(result, "query_ids", None)
    if ids is not None:
        ids = np.asarray(ids)
        if ids.ndim == 1 and ids.shape[0] == int(result.n_queries):
            names = [str(x.item() if hasattr(x, "item") else x) for x in ids]
            if len(set(names)) == len(names):
                return [f"query id {names[i]}" for i in rows]
    return [f"query {i}" for i in rows]


def _finite(x) -> bool:
    """Whether ``x`` (a real number) is finite as a float (a huge integer is not)."""
    try:
        return math.isfinite(float(x))
    except (OverflowError, ValueError, TypeError):
        return False


def _kind(x) -> str:
    if x is None:
        return "null"
    if isinstance(x, bool):
        return f"a boolean ({x})"
    if isinstance(x, str):
        return f"a string ({shown(x, 50)})"
    if isinstance(x, (list, tuple)):
        return f"a list of {len(x)}"
    if isinstance(x, Mapping):
        return "a mapping"
    if isinstance(x, float) and not math.isfinite(x):
        return f"{x} (not a finite number)"
    return f"{type(x).__name__} {shown(x)}"


def _name(k, limit: int = 60) -> str:
    """A key as written in the file, cut to ``limit`` characters."""
    text = str(k)
    return text if len(text) <= limit else f"{text[: limit - 20]}...({len(text)} characters)"


def _is_count(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and x >= 0


def check_record(  # long: one check per field of a hand-edited record, each naming the field
    rec, *, where: str = "baseline record", fix: str = REGEN_FIX
) -> dict:
    """``rec`` when it is a well-formed baseline record; else an
    :class:`~retrieval_checks.InputError` naming ``where`` (the file and key), the
    field, what was found and ``fix``. Never a KeyError or TypeError: records are
    often edited by hand."""

    def bad(field: str, problem: str):
        problem = problem.rstrip()
        sep = " " if problem.endswith((".", "?")) else ". "
        raise InputError(f"{where}, field {field!r}: {problem}{sep}Fix: {fix}.")

    if not isinstance(rec, Mapping):
        bad(
            "(record)",
            f"expected a mapping with metric, value, interval, confidence, n, unit; found {_kind(rec)}",
        )
    for field in ("metric", "value"):  # required: a misspelt one is named, not reported missing
        if field not in rec:
            _misspelt(rec, field, where, fix)
    metric = rec.get("metric")
    if not isinstance(metric, str):
        bad("metric", f"expected a metric name (a string), found {_kind(metric)}")
    try:
        spec = metric_spec(metric)
    except MetricNameError as exc:
        bad("metric", str(exc))
    if spec.name != metric:
        bad("metric", f"{metric!r} is not a canonical name; write {spec.name!r}")
    if "value" not in rec:
        bad("value", f"missing; found fields {sorted(map(str, rec))}")
    value = rec["value"]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        bad("value", f"expected a number, found {_kind(value)}")
    top = rec.get("max_rank")
    if top is not None and (not _is_count(top) or top < 1):
        bad(
            "max_rank",
            f"expected an integer >= 1 (the largest rank a query can get), found {_kind(top)}",
        )
    if top is not None and spec.capabilities.unit != "rank":
        bad(
            "max_rank",
            f"only rank metrics have a max_rank, and {spec.name} is in {spec.capabilities.unit}; "
            "remove it",
        )
    try:
        check_threshold(
            spec.capabilities,
            value,
            role="baseline",
            field="value",
            metric=spec.name,
            high=None if top is None else float(top),
            high_why="the record's max_rank",
        )
    except InputError as exc:
        bad("value", str(exc))
    iv = rec.get("interval")
    if iv is not None:
        if not isinstance(iv, (list, tuple)) or len(iv) != 2:
            bad("interval", f"expected [low, high] (two numbers) or null, found {_kind(iv)}")
        for side, x in zip(("low", "high"), iv):
            if isinstance(x, bool) or not isinstance(x, numbers.Real) or not _finite(x):
                bad("interval", f"the {side} bound must be a finite number, found {_kind(x)}")
        if float(iv[0]) > float(iv[1]):
            bad("interval", f"low {shown(iv[0])} > high {shown(iv[1])}; write [low, high]")
        slack = 1e-9 * max(1.0, abs(float(value)))
        if not float(iv[0]) - slack <= float(value) <= float(iv[1]) + slack:
            bad(
                "interval",
                f"the value {float(value):.6g} lies outside its own interval [{float(iv[0]):.6g}, "
                f"{float(iv[1]):.6g}]; an interval is around its value",
            )
    conf = rec.get("confidence")
    if conf is not None:
        if (
            isinstance(conf, bool)
            or not isinstance(conf, numbers.Real)
            or not _finite(conf)
            or not 0 < float(conf) < 1
        ):
            bad(
                "confidence",
                f"expected a number strictly between 0 and 1 (e.g. 0.95), found {_kind(conf)}",
            )
    for field in ("n", "n_skipped"):
        if rec.get(field) is not None and not _is_count(rec[field]):
            bad(field, f"expected an integer >= 0, found {_kind(rec[field])}")
    for field in ("unit", "units_are", "partition", "model", "dataset"):
        if rec.get(field) is not None and not isinstance(rec[field], str):
            bad(field, f"expected a string, found {_kind(rec[field])}")
    options = rec.get("options")
    if options is not None:
        if not isinstance(options, Mapping):
            bad("options", f"expected a mapping of option name to value, found {_kind(options)}")
        for k, v in options.items():
            if k in RETIRED_OPTIONS:
                continue  # written by an earlier version; read as absent (below)
            if k not in VALUE_OPTIONS:
                bad(
                    f"options.{_name(k)}",
                    f"not an option that changes a value; the options are {', '.join(VALUE_OPTIONS)}"
                    f"{hint(str(k), VALUE_OPTIONS)}",
                )
            if not isinstance(v, (str, bool, int)) and not (
                isinstance(v, float) and math.isfinite(v)
            ):
                bad(
                    f"options.{_name(k)}",
                    f"expected a string, a boolean or a finite number, found {_kind(v)}",
                )
    if rec.get("unit") is not None and rec["unit"] not in RECORD_UNITS:
        bad(
            "unit",
            f"unknown unit {shown(rec['unit'])} (what n counts); use one of {', '.join(RECORD_UNITS)}"
            f"{hint(rec['unit'], RECORD_UNITS)}",
        )
    if rec.get("units_are") is not None and rec["units_are"] not in ("classes", "queries"):
        bad("units_are", f"unknown {shown(rec['units_are'])}; use 'classes' or 'queries'")
    units = rec.get("units")
    if units is not None:
        if not isinstance(units, Mapping):
            bad("units", f"expected a mapping of unit name to [sum, count], found {_kind(units)}")
        for k, v in units.items():
            if not isinstance(v, (list, tuple)) or len(v) != 2:
                bad(
                    f"units.{_name(k)}",
                    f"expected [sum, count] (a finite number and an integer >= 1), found "
                    f"{_kind(v)}",
                )
            if isinstance(v[0], bool) or not isinstance(v[0], numbers.Real):
                bad(f"units.{_name(k)}", f"the sum must be a finite number, found {_kind(v[0])}")
            if not _finite(v[0]):
                bad(
                    f"units.{_name(k)}",
                    f"unit {_name(k)} holds a sum of {shown(v[0])} (not a finite number)",
                )
            if not _is_count(v[1]) or v[1] < 1:
                bad(f"units.{_name(k)}", f"the count must be an integer >= 1, found {_kind(v[1])}")
        _check_units(spec, rec, units, top, bad)
    out = dict(rec)
    if isinstance(options, Mapping) and any(k in RETIRED_OPTIONS for k in options):
        out["options"] = {k: v for k, v in options.items() if k not in RETIRED_OPTIONS}
    return out


#: The fields a record may hold (what the writers store; a slice's record also its
#: slice and n_queries); a key close to a missing required field but not one of these
#: is that field misspelt.
RECORD_FIELDS = (
    "metric",
    "value",
    "interval",
    "confidence",
    "n",
    "n_skipped",
    "unit",
    "units",
    "units_are",
    "partition",
    "model",
    "dataset",
    "options",
    "max_rank",
    "slice",
    "n_queries",
)


def _misspelt(rec, field: str, where: str, fix: str) -> None:
    """An error naming the key of ``rec`` that is ``field`` misspelt (``valeu:`` for
    ``value:``), when one is close; else nothing (the caller reports ``field`` missing)."""
    unknown = [str(k) for k in rec if str(k) not in RECORD_FIELDS]
    close = did_you_mean(field, unknown)
    if close is None:
        return
    key = _name(close)
    raise InputError(
        f"{where}, field {key!r}: unknown field {key!r} (did you mean {field!r}?); the record has no "
        f"{field!r}. Fix: rename {key!r} to {field!r}, or {fix}."
    )


def _check_units(spec, rec, units, top, bad) -> None:
    """The units must agree with the record's value: a hand-edited unit that
    contradicts it would decide a significance test on numbers nobody measured. Every
    unit's mean (sum / count) lies in the metric's range, and the count-weighted mean
    of the units is the value (exact for every kind baseline_record writes: per-class
    sums and counts of a per-query metric, one query per unit, or grouped recall's
    group means, one per group over the same repeats); per-class or per-query units
    count the n queries used."""
    if not units:
        return
    high = None if top is None else float(top)
    total = count = 0.0
    for k, (s, c) in units.items():
        mean = float(s) / int(c)
        try:
            check_threshold(
                spec.capabilities,
                mean,
                role="baseline",
                field=f"units.{_name(k)}",
                metric=spec.name,
                high=high,
                high_why="the record's max_rank",
            )
        except InputError as exc:
            bad(
                f"units.{_name(k)}",
                f"unit {_name(k)} has a mean of {mean:.6g} (sum {float(s):.6g} / count "
                f"{int(c)}), outside the range of {spec.name} ({exc})",
            )
        total += float(s)
        count += int(c)
    mean = total / count
    value = float(rec["value"])
    if not math.isclose(mean, value, rel_tol=_ROUNDED_REL_TOL, abs_tol=1e-9):
        bad(
            "units",
            f"the units contradict the value: their count-weighted mean (sum of sums / sum of counts) is "
            f"{mean:.9g}, the value is {value:.9g}; the units must be the per-unit sums and counts the value "
            "was computed from",
        )
    n = rec.get("n")
    if rec.get("units_are") in ("classes", "queries") and n is not None and int(count) != int(n):
        bad(
            "units",
            f"the units count {int(count)} queries, but n is {int(n)} (the queries used); they must agree",
        )


def records_differ(a: dict | None, b: dict | None, tol: float = 1e-9) -> bool:
    """Whether two records differ at the precision a baselines file stores
    (:data:`SIGNIFICANT_DIGITS` significant digits, then float noise; for
    --force-regen); records are checked first (:func:`check_record`)."""
    if a is None or b is None:
        return a is not b
    a, b = (
        rounded_record(_plain(a)),
        rounded_record(_plain(b)),
    )  # at the precision a baselines file stores
    a = check_record(a, where="first record", fix="pass records from baseline_record()")
    b = check_record(b, where="second record", fix="pass records from baseline_record()")
    if (
        a.get("metric") != b.get("metric")
        or a.get("n") != b.get("n")
        or a.get("partition") != b.get("partition")
        or a.get("options") != b.get("options")
    ):
        return True

    def close(x, y):
        if x is None or y is None:
            return x is y
        return abs(float(x) - float(y)) <= tol * max(1.0, abs(float(x)), abs(float(y)))

    if not close(a.get("value"), b.get("value")):
        return True
    ia, ib = a.get("interval"), b.get("interval")
    if (ia is None) != (ib is None) or (
        ia is not None and not all(close(x, y) for x, y in zip(ia, ib))
    ):
        return True
    ua, ub = a.get("units") or {}, b.get("units") or {}
    if set(ua) != set(ub):
        return True
    return any(not close(ua[k][0], ub[k][0]) or ua[k][1] != ub[k][1] for k in ua)


def _as_change_input(rec: dict) -> dict:
    iv = rec.get("interval") or (None, None)
    units = rec.get("units")
    return {
        "value": rec["value"],
        "low": iv[0],
        "high": iv[1],
        "confidence": rec.get("confidence") or 0.95,
        "units": {k: tuple(v) for k, v in units.items()} if units else None,
        "max_rank": rec.get("max_rank"),
        # what the power of a significance test counts: the paired units, else the record's n
        "unit": (rec.get("units_are") if units else None) or rec.get("unit"),
        "n": rec.get("n"),
    }


def _fmt_iv(iv) -> str:
    return "none" if not iv else f"[{float(iv[0]):.4f}, {float(iv[1]):.4f}]"


def _with_iv(value: float, iv) -> str:
    """``0.7120 [0.6880, 0.7350]``: a value and its interval (the value alone without one)."""
    return f"{value:.4f}" + (f" {_fmt_iv(iv)}" if iv else "")


def assert_no_regression(
    current: dict,
    baseline: dict,
    *,
    max_drop: float | None = None,
    max_relative_drop: float | None = None,
    direction: str | None = None,
    significant: bool = False,
    confidence: float = 0.95,
    where: str = "",
    max_skipped: int | float | None = None,
    power: float | None = None,
    min_power: float | None = None,
    correction: str | None = None,
) -> Change:
    """Fail when ``current`` (a :func:`baseline_record`) dropped from ``baseline``
    beyond the tolerances (see :func:`retrieval_checks._regression.measure_change`).

    Both records are compared at the precision a baselines file stores
    (:func:`rounded_record`: a result equal to its stored baseline compares equal; a
    drop smaller than the last stored digit is not seen) and checked first
    (:func:`check_record`): a NaN or malformed value,
    interval or tolerance is an :class:`~retrieval_checks.InputError`, never a pass.
    ``max_skipped`` fails the gate when the current run skipped more queries (a
    count, or a fraction of the queries); any skipped query gives a warning.

    With ``significant=True`` the gate reports its power (``power``, default 0.8: the
    minimum detectable drop, on the event as ``mdd``): a test that cannot detect a drop
    of the tolerance with that power gives a :class:`~retrieval_checks.PowerWarning`
    naming the queries (or classes) it would need, and with ``min_power`` fails.
    ``correction`` (holm, bh, none; default: the pytest session's ``--rc-correction``)
    puts the check in the run's family of significance-gated checks
    (:mod:`retrieval_checks.gates._family`): a significant drop is then decided at the
    end of the session, on the adjusted p-value.

    Parameters
    ----------
    current:
        The record of this run (:func:`baseline_record`).
    baseline:
        The record to compare with, of the same metric (:func:`baseline_record`, or
        :meth:`BaselineFile.get` for a stored one).
    max_drop:
        The largest tolerated drop, in the metric's unit (a rise for rank metrics).
    max_relative_drop:
        The largest tolerated drop as a fraction of the baseline value; with neither
        tolerance, any drop fails.
    direction:
        ``"higher"`` or ``"lower"`` (which is better), for a metric the registry does
        not know (default: the metric's own).
    significant:
        Fail only when the drop is also significant at level ``1 - confidence``
        (default False).
    confidence:
        Of the significance test (default 0.95).
    where:
        A line naming the check, put first in the failure message.
    max_skipped:
        The most queries (a count) or fraction of queries the current run may have
        skipped.
    power:
        The power at which the minimum detectable drop is stated (default 0.8);
        with ``significant=True``.
    min_power:
        Fail when the test detects a drop of the tolerance with less power than this;
        needs ``significant=True`` and a tolerance.
    correction:
        ``"holm"``, ``"bh"`` or ``"none"``: the correction of the run's family of
        significance-gated checks (default: the session's ``--rc-correction``).

    Returns
    -------
    Change
        The change measured (baseline, current, drop, p-value, power, reasons).

    Raises
    ------
    AssertionError
        The metric regressed beyond the tolerances (or too many queries were skipped,
        or the test is underpowered under ``min_power``): the message names both
        values with their intervals, the drop, the p-value, the sample and the rule.
    InputError
        A record that is not one (an evaluation result, a NaN or malformed value or
        interval), records of different metrics or label partitions, a tolerance that
        is NaN, negative or could never fail.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(10), 3)
    >>> x = rng.normal(size=(10, 8))[y] + 0.3 * rng.normal(size=(30, 8))
    >>> res = rc.evaluate(x, query_labels=y, metrics=["map"])
    >>> baseline = rc.baseline_record(res, "map")
    >>> rc.assert_no_regression(baseline, baseline, max_drop=0.01).drop
    0.0
    >>> worse = rc.evaluate(x + 0.5 * rng.normal(size=x.shape), query_labels=y, metrics=["map"])
    >>> current = rc.baseline_record(worse, "map")
    >>> rc.assert_no_regression(current, baseline, max_drop=0.02)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    AssertionError: map regressed: 0.9625 [0.9208, 0.9944] -> 0.8329 [0.6986, 0.9372] (dropped by 0.1296 > max_drop 0.02)
    ...
    """
    __tracebackhide__ = True
    for name, arg in (("current", current), ("baseline", baseline)):
        if not isinstance(arg, Mapping) or callable(getattr(arg, "measure", None)):
            what = "an evaluation result" if callable(getattr(arg, "measure", None)) else _kind(arg)
            raise InputError(
                f"assert_no_regression: the {name} record is {what} ({type(arg).__name__}); "
                f"assert_no_regression expects a record from rc.baseline_record(result, metric)"
                + (
                    " (for a stored baseline: BaselineFile(path).get(key))"
                    if name == "baseline"
                    else ""
                )
                + "."
            )
    max_skipped = GATE_FIELDS["max_skipped"].check(max_skipped)
    # both at the precision a baselines file stores, so a result equal to its stored baseline compares equal
    current, baseline = rounded_record(_plain(current)), rounded_record(_plain(baseline))
    current = check_record(
        current, where="current record", fix="pass a record from baseline_record(result, metric)"
    )
    baseline = check_record(baseline, where=f"{where} baseline" if where else "baseline record")
    if current["metric"] != baseline["metric"]:
        raise InputError(
            f"the baseline is for {baseline['metric']!r}, the result for {current['metric']!r}: "
            "compare records of the same metric."
        )
    if baseline.get("partition") != current.get("partition"):
        raise InputError(
            f"{current['metric']}: the baseline used label partition {baseline.get('partition')!r}, this "
            f"run {current.get('partition')!r}; regenerate the baseline (same labels, group_size, seed)."
        )
    check_same_options(baseline, current, where)
    check_same_set(baseline, current, where)
    use_units = significant is True and bool(baseline.get("units")) and bool(current.get("units"))
    b_in, c_in = _as_change_input(baseline), _as_change_input(current)
    if not use_units:
        b_in["units"] = c_in["units"] = None
    ch = measure_change(
        current["metric"],
        b_in,
        c_in,
        max_drop=max_drop,
        max_relative_drop=max_relative_drop,
        direction=direction,
        significant=significant,
        confidence=confidence,
        power=power,
        min_power=min_power,
    )
    correction = family_of(correction, ch)
    max_drop = None if max_drop is None else float(max_drop)
    max_relative_drop = None if max_relative_drop is None else float(max_relative_drop)
    iv = current.get("interval") or (None, None)
    allowed = [
        v
        for v in (
            max_drop,
            None if max_relative_drop is None else max_relative_drop * abs(ch.baseline),
        )
        if v is not None
    ]
    threshold = ch.baseline - (min(allowed) if allowed else 0.0) * (
        1 if ch.higher_is_better else -1
    )
    n_skipped = current.get("n_skipped")
    n_used = current.get("n") if n_skipped is not None else None
    notes, skip_failure = [], None
    if n_skipped:
        n_queries = int(n_used or 0) + int(n_skipped)
        notes.append(
            f"assert_no_regression: {ch.metric} skipped {n_skipped} of {n_queries} queries (no relevant "
            f"gallery item): n_used {n_used} / n_skipped {n_skipped}. To fail the gate instead, set "
            f"max_skipped= (a count, or a fraction of the queries) or evaluate with empty_queries='error'."
        )
        if skipped_limit(n_skipped, n_used, max_skipped) is not None:
            skip_failure = (
                f"{ch.metric}: {n_skipped} of {n_queries} queries skipped (n_used {n_used} / n_skipped "
                f"{n_skipped}), more than max_skipped={max_skipped!r}"
            )
    unchecked = _unchecked_set_note(baseline, current, ch.metric)
    notes += [unchecked] if unchecked else []
    weak = power_note("assert_no_regression", ch, correction)
    notes += [weak] if weak else []
    required = ch.power is not None and ch.power.required and ch.power.underpowered
    deferred = deferrable(ch, correction, ch.failed, skip_failure is not None or required)
    failed = (ch.failed or skip_failure is not None) and not deferred
    event = emit_warned(
        GateEvent(
            gate="assert_no_regression",
            metric=ch.metric,
            value=ch.current,
            passed=not failed,
            low=iv[0],
            high=iv[1],
            confidence=current.get("confidence"),
            on="baseline",
            comparison=">=" if ch.higher_is_better else "<=",
            threshold=threshold,
            bounds={
                k: v
                for k, v in (("max_drop", max_drop), ("max_relative_drop", max_relative_drop))
                if v is not None
            },
            n=current.get("n"),
            unit=current.get("unit"),
            n_used=n_used,
            n_skipped=n_skipped,
            model=current.get("model"),
            dataset=current.get("dataset"),
            warnings=list(notes),
            extra={
                **({"options": current["options"]} if current.get("options") else {}),
                "baseline": ch.baseline,
                "drop": ch.drop,
                "p_worse": ch.p_worse,
                **({} if max_skipped is None else {"max_skipped": max_skipped}),
                **family_fields(ch, correction, deferred),
            },
        ),
        [(f"retrieval-checks: {n}", PowerWarning if n is weak else RuntimeWarning) for n in notes],
    )
    if deferred and not claimed(event):  # no session recorded it: decided now, never unseen
        failed = True
        ch = unclaimed(ch)
    if failed:
        biv = baseline.get("interval")
        weak = not ch.beyond_tolerance and any(r.startswith("underpowered") for r in ch.reasons)
        verdict = "gate is underpowered (the drop is within tolerance)" if weak else "regressed"
        head = (
            f"{ch.metric} {verdict}: {_with_iv(ch.baseline, biv)} -> "
            f"{_with_iv(ch.current, current.get('interval'))} ({'; '.join(ch.reasons)})\n"
            if ch.failed
            else f"{skip_failure}\n"
        )
        raise AssertionError(
            (f"{where}\n" if where else "")
            + head
            + f"  drop {ch.drop:+.4f} ({ch.relative_drop:+.2%} of the baseline); "
            f"{'higher' if ch.higher_is_better else 'lower'} is better\n"
            f"  baseline interval {_fmt_iv(biv)}, current interval {_fmt_iv(current.get('interval'))}; "
            + (
                f"p(worse)={ch.p_worse:.3g} ({ch.method})\n"
                if ch.p_worse is not None
                else f"{ch.method}\n"
            )
            + (f"  power: {ch.power.describe()}\n" if ch.power is not None else "")
            + f"  sample: {current.get('n')} {current.get('unit')} now"
            + (f" (n_used {n_used} / n_skipped {n_skipped})" if n_skipped is not None else "")
            + f", {baseline.get('n')} in the baseline\n"
            + (f"  also: {skip_failure}\n" if skip_failure and ch.failed else "")
            + f"  rule: {ch.tolerance}{', only when significant' if significant else ''}"
            + ("; and at most max_skipped skipped queries" if max_skipped is not None else "")
        )
    return ch


# ----------------------------------------------------------------------------- files
_LOCK_TIMEOUT = 120.0  # seconds a writer waits for another, and after which an O_EXCL lock is stale


def _lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def _exclusive(path: Path):
    """Hold the write lock of ``path``: ``flock`` on a sibling ``.<name>.lock`` file
    (POSIX), else an ``O_EXCL`` lock file polled until free (Windows, or file systems
    without flock). The lock file is removed on release; a waiter that locked a file
    since removed tries again, so two writers never hold it at once."""
    lock = _lock_path(path)
    if fcntl is not None:
        fd = None
        while True:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # no flock on this file system: the portable lock instead
                os.close(fd)
                fd = None
                break
            try:
                same = os.fstat(fd).st_ino == os.stat(lock).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        if fd is not None:
            try:
                yield
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(lock)
                os.close(fd)  # releases the flock
            return
    deadline = time.monotonic() + _LOCK_TIMEOUT
    while True:
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            break
        except FileExistsError:
            with contextlib.suppress(OSError):
                if (
                    time.time() - os.stat(lock).st_mtime > _LOCK_TIMEOUT
                ):  # left by a writer that died
                    os.unlink(lock)
                    continue
            if time.monotonic() > deadline:
                raise InputError(
                    f"{lock}: another process has held the baselines lock for {_LOCK_TIMEOUT:g} s; "
                    "if none is writing, delete the lock file."
                ) from None
            time.sleep(0.02)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)


def _default_mode() -> int:
    """0o666 less the process umask: the mode a new file gets from open()."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


class BaselineFile:
    """A YAML file of baseline records keyed by check or test name.

    Reading is strict: a file that is not YAML, not a mapping, or a directory is an
    :class:`~retrieval_checks.InputError` naming the file; a malformed record is one
    when :meth:`get` reads it (naming the file, the key and the field). Writing
    (:meth:`update`) holds a lock, re-reads the file and merges, then replaces it
    atomically and keeps its permission mode: concurrent writers lose no record.

    Parameters
    ----------
    path:
        The YAML file (str or Path); a file that does not exist yet holds no records.

    Raises
    ------
    InputError
        A path that is not a str or Path, a directory, a file that is not UTF-8, not
        YAML or not a mapping of names to records.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(10), 3)
    >>> x = rng.normal(size=(10, 8))[y] + 0.3 * rng.normal(size=(30, 8))
    >>> res = rc.evaluate(x, query_labels=y, metrics=["map"])
    >>> import tempfile, pathlib
    >>> tmp = tempfile.TemporaryDirectory()
    >>> f = rc.BaselineFile(pathlib.Path(tmp.name) / "baselines.yaml")
    >>> f.update({"test_map": rc.baseline_record(res, "map")})
    >>> stored = rc.BaselineFile(f.path).get("test_map")
    >>> stored["value"], stored["interval"]
    (0.9625, [0.920833, 0.994444])
    >>> tmp.cleanup()
    """

    HEADER = (
        "# retrieval-checks baselines: review changes like code.\n"
        f"# Numbers are stored rounded to {SIGNIFICANT_DIGITS} significant digits; new results are compared at "
        "that precision.\n"
        "# Regenerate: pytest --rc-force-regen (rewrite what changed, and fail) or --rc-regen-all; remove the "
        "records of checks that no longer exist: --rc-prune-baselines.\n"
    )

    def __init__(self, path):
        if not isinstance(path, (str, os.PathLike)):
            raise InputError(f"a baselines file path is a str or Path, got {type(path).__name__}.")
        self.path = Path(path)
        self.records: dict = self._read()

    def _read(self) -> dict:
        """The records of the file ({} when it does not exist)."""
        path = self.path
        if path.is_dir():
            raise InputError(
                f"{path}: is a directory, where the baselines file should be; remove or rename the "
                "directory (baselines are written to this path)."
            )
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{path}: not a UTF-8 text file ({exc.reason} at byte {exc.start}); restore it from "
                "version control or regenerate it with --rc-force-regen or --rc-regen-all."
            ) from None
        except OSError as exc:
            raise InputError(
                f"{path}: cannot read the baselines file ({exc.strerror or exc}); check its "
                "permissions."
            ) from None
        try:
            data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a (C)SafeLoader subclass
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or type(exc).__name__
            raise InputError(
                f"{path}{line}: cannot read the baselines file: invalid YAML ({problem}); fix it, or "
                "regenerate it with --rc-force-regen or --rc-regen-all."
            ) from None
        except RecursionError:
            data = _DEEP
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            raise InputError(
                f"{path}: cannot read the baselines file ({exc}); fix the value, or regenerate it "
                "with --rc-force-regen or --rc-regen-all."
            ) from None
        if data is _DEEP or _too_deep(data):
            raise InputError(
                f"{path}: cannot read the baselines file: nested too deeply (more than "
                f"{MAX_DEPTH} levels of lists or mappings); regenerate it with "
                "--rc-force-regen or --rc-regen-all."
            )
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise InputError(
                f"{path}: a baselines file is a mapping of check names to records, found "
                f"{_kind(data)}; fix it, or regenerate it with --rc-force-regen or --rc-regen-all."
            )
        bad_keys = [k for k in data if not isinstance(k, str)]
        if bad_keys:
            raise InputError(
                f"{path}: record names must be strings, found {bad_keys[0]!r}; quote it, or "
                "regenerate the file with --rc-force-regen or --rc-regen-all."
            )
        return dict(data)

    def get(self, key: str) -> dict | None:
        """The record ``key`` (checked: see :func:`check_record`), None when absent."""
        if not isinstance(key, str):
            raise InputError(
                f"BaselineFile.get: key={shown(key)}: expected the name of a record (a string), found "
                f"{type(key).__name__}; the file's keys are check or test names."
            )
        if key not in self.records:
            return None
        return check_record(self.records[key], where=f"{self.path}: baseline {key!r}")

    def update(self, entries: dict) -> None:
        """Set records and write the file: under the file's lock, re-read it, merge
        ``entries`` into what is there now, write a temporary file beside it and
        replace the file atomically (keys sorted, for stable diffs; mode kept).

        ``entries`` maps record names (strings) to records (as from
        :func:`baseline_record`); numpy numbers and arrays are written as plain
        numbers and lists, numbers rounded to :data:`SIGNIFICANT_DIGITS` significant
        digits (:func:`rounded_record`), and every record is checked
        (:func:`check_record`) before anything is written: an invalid record is an
        InputError, never a bad file."""
        entries = self._checked_entries(entries)
        self._rewrite(lambda records: records.update(entries))

    def _update_and_remove(self, entries: dict, removed) -> None:
        """:meth:`update`, and remove the records named in ``removed`` (those of slices
        that are gone, on regeneration), in one locked rewrite."""
        entries = self._checked_entries(entries)
        removed = [k for k in removed if k not in entries]

        def change(records: dict) -> None:
            records.update(entries)
            for k in removed:
                records.pop(k, None)

        self._rewrite(change)

    def prune(self, exists) -> list[str]:
        """Remove the records of checks that no longer exist, under the file's lock:
        ``exists(name)`` says whether the check a record is named after still exists.
        Returns the names removed, sorted (the file is rewritten only when there are
        some; an unreadable file is an InputError, never rewritten)."""
        if not callable(exists):
            raise InputError(
                f"BaselineFile.prune takes a function name -> bool, got {type(exists).__name__}."
            )
        removed: list[str] = []

        def drop(records: dict) -> None:
            removed.extend(sorted(k for k in records if not exists(k)))
            for k in removed:
                del records[k]

        if self.path.exists():
            self._rewrite(drop, strict=True, only_if=lambda: bool(removed))
        return removed

    def _rewrite(self, change, *, strict: bool = False, only_if=None) -> None:
        """Lock, re-read, ``change(records)`` in place, write atomically (mode kept);
        ``strict``: an unreadable file is an error instead of being moved aside;
        ``only_if()`` false: nothing is written."""
        path = Path(os.path.realpath(self.path)) if self.path.is_symlink() else self.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(
                f"{path.parent}: cannot create the baselines directory ({exc.strerror or exc})."
            ) from None
        if path.is_dir():
            raise InputError(
                f"{path}: is a directory, where the baselines file should be; remove or rename the "
                "directory (baselines are written to this path)."
            )
        try:
            with _exclusive(path):
                records = BaselineFile(path).records if strict else self._merge_base(path)
                change(records)
                if only_if is not None and not only_if():
                    self.records = records
                    return
                text = self.HEADER + yaml.dump(
                    {k: records[k] for k in sorted(records)},
                    sort_keys=False,
                    default_flow_style=None,
                    width=120,
                    allow_unicode=True,
                    Dumper=_Dumper,
                )
                try:
                    mode = stat.S_IMODE(os.stat(path).st_mode)
                except FileNotFoundError:
                    mode = _default_mode()
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
                try:
                    with os.fdopen(fd, "w", encoding="utf-8") as f:
                        f.write(text)
                        f.flush()
                        os.fsync(f.fileno())
                    os.chmod(tmp, mode)
                    os.replace(tmp, path)
                except BaseException:
                    if os.path.exists(tmp):
                        os.unlink(tmp)
                    raise
        except OSError as exc:
            raise InputError(
                f"{path}: cannot write the baselines file ({exc.strerror or exc}); check the "
                "directory's permissions."
            ) from None
        self.records = records

    def _checked_entries(self, entries) -> dict:
        if not isinstance(entries, Mapping):
            raise InputError(
                f"BaselineFile.update: entries is {_kind(entries)} ({type(entries).__name__}); expected a "
                "mapping of record names to records, e.g. {'my check': rc.baseline_record(result, "
                "'map')}."
            )
        out = {}
        for key, rec in entries.items():
            if not isinstance(key, str):
                raise InputError(
                    f"BaselineFile.update: entries key {shown(key)} is {type(key).__name__}; record "
                    "names are strings (the check or test name): write it as a string."
                )
            rec = rounded_record(_plain(rec))
            out[key] = check_record(
                rec,
                where=f"BaselineFile.update: entries[{_name(key)!r}] (for {self.path})",
                fix="pass a record from rc.baseline_record(result, metric)",
            )
        return out

    @staticmethod
    def _merge_base(path: Path) -> dict:
        """The records in the file now; an unreadable file (being regenerated) is kept
        beside it as ``<name>.corrupt`` and replaced, with a warning."""
        try:
            return BaselineFile(path).records
        except InputError as exc:
            backup = path.with_name(path.name + ".corrupt")
            os.replace(path, backup)
            warn_outside(
                f"retrieval-checks: {exc} It was moved to {backup} and rewritten with the new records.",
                RuntimeWarning,
            )
            return {}


def _plain(x, depth: int = 0):
    """``x`` with numpy numbers and arrays as plain Python numbers and lists (YAML's
    safe dumper writes only plain types); mappings and sequences recursively."""
    if depth > 50:
        return x
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, Mapping):
        return {
            (_plain(k, depth + 1) if isinstance(k, np.generic) else k): _plain(v, depth + 1)
            for k, v in x.items()
        }
    if isinstance(x, (list, tuple)):
        return [_plain(v, depth + 1) for v in x]
    return x


# libyaml's parser and emitter (PyYAML's C extension, in its wheels) where PyYAML has
# them, else its pure-Python ones: the same documents, the same text written (the
# representer and constructor stay Python's), about 8x less CPU for a file of 80 records
# (a session's regeneration re-reads and rewrites the file once per record written).
_DEEP = object()  # what a RecursionError leaves
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
#: nesting deeper than any record (record, units, unit, value: 4) by far, and shallow
#: enough for the recursive checks that read a record
MAX_DEPTH = 64


def _too_deep(data, limit: int = MAX_DEPTH) -> bool:
    """Whether lists or mappings nest deeper than ``limit`` in ``data`` (walked without
    recursion: libyaml's parser reads a 5000-deep ``[[[...]]]`` that Python's raised a
    RecursionError on, and the checks that read a record recurse). Each list or mapping
    is walked once: YAML aliases may share one many times, or hold itself."""
    stack, seen = [(data, 0)], set()
    while stack:
        x, depth = stack.pop()
        if isinstance(x, dict):
            children = x.values()
        elif isinstance(x, list):
            children = x
        else:
            continue
        if depth >= limit:
            return True
        if id(x) in seen:
            continue
        seen.add(id(x))
        stack.extend((c, depth + 1) for c in children)
    return False


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """YAML's safe loader without merge keys (``<<``): the library never writes them,
    and merges of merges expand exponentially (a hand-edited file must not hang a
    session); and without duplicate keys, which YAML would resolve silently (the last
    one wins): a record written twice is an error naming its line."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping",
                        node.start_mark,
                        f"duplicate key {_name(key_node.value)!r} (first on line {seen[key] + 1}); each name may "
                        "appear once: remove or rename one of them",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)

    def flatten_mapping(self, node):
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    "merge keys (<<) are not allowed in a baselines file; write each record in full",
                    key_node.start_mark,
                )
        return super().flatten_mapping(node)


def baseline_path(path) -> Path:
    """Where the baselines of a suite or test module live: ``<stem>.baselines.yaml`` beside it."""
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip() or not Path(path).name:
        raise InputError(
            f"baseline_path takes the path of a suite or test module (a str or Path), got {path!r}."
        )
    p = Path(path)
    return p.with_name(f"{p.stem}.baselines.yaml")


def write_records(entries) -> list[str]:
    """Write (path, key, record) entries, one locked, merged, atomic rewrite per file;
    returns the paths. A record None removes the record ``key`` (regenerating per-slice
    baselines removes the records of slices that are gone)."""
    if isinstance(entries, (str, bytes, Mapping)) or not hasattr(entries, "__iter__"):
        raise InputError(
            f"write_records takes a list of (path, key, record) entries, got {_kind(entries)}."
        )
    by_file: dict = {}
    removed: dict = {}
    for entry in entries:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise InputError(
                f"write_records takes (path, key, record) entries, got {_kind(entry)}."
            )
        path, key, record = entry
        if not isinstance(path, (str, os.PathLike)):
            raise InputError(
                f"write_records: a baselines file path is a str or Path, got {_kind(path)}."
            )
        if not isinstance(key, str):
            raise InputError(f"baseline names are strings, got {_kind(key)} (for {path}).")
        if record is None:
            removed.setdefault(str(path), []).append(key)
            by_file.setdefault(str(path), {})
        else:
            by_file.setdefault(str(path), {})[key] = record
    for path, records in by_file.items():
        _for_writing(path)._update_and_remove(records, removed.get(path, ()))
    return sorted(by_file)


def _for_writing(path) -> BaselineFile:
    """The file at ``path`` for :meth:`BaselineFile.update`, even when it cannot be
    read (it is being regenerated: update() moves an unreadable one aside); a
    directory in its place is still an error."""
    try:
        return BaselineFile(path)
    except InputError:
        if Path(path).is_dir():
            raise
        f = BaselineFile.__new__(BaselineFile)
        f.path, f.records = Path(path), {}
        return f


#: The keyword arguments of a baseline check (those of :func:`assert_no_regression`).
_TOLERANCES = (
    "max_drop",
    "max_relative_drop",
    "direction",
    "significant",
    "confidence",
    "max_skipped",
    "power",
    "min_power",
    "correction",
)


class BaselineStore:
    """The baseline gate of a session, with pytest-regressions' regeneration semantics.

    ``regen=None``: compare (a missing baseline fails and says how to create it; a
    malformed file or record is an :class:`~retrieval_checks.InputError` that says how
    to fix it); ``"force"``: a missing, malformed or different baseline is rewritten
    and the check fails (review the diff, then rerun); ``"all"``: every baseline is
    rewritten and the check passes. Baseline files are read once; records to write are
    queued in ``pending`` as (path, key, record), for :meth:`write` or, under pytest,
    for the controller at the end of the session.
    """

    def __init__(self, regen: str | None = None):
        if regen not in (None, "force", "all"):
            raise InputError(f"regen={regen!r}: use None, 'force' or 'all'.")
        self.regen = regen
        self.pending: list = []
        self._files: dict = {}

    def _file(self, path) -> BaselineFile:
        key = str(path)
        if key not in self._files:
            # regenerating: an unreadable file is about to be rewritten, so it reads as empty
            self._files[key] = BaselineFile(path) if self.regen is None else _for_writing(path)
        return self._files[key]

    def stored(self, path, key: str) -> dict | None:
        """The checked record ``key`` of the file ``path``; under regeneration a
        malformed record reads as missing (it is about to be rewritten)."""
        f = self._file(path)
        try:
            return f.get(key)
        except InputError:
            if self.regen is None:
                raise
            return None

    def check(self, record: dict, *, path, key: str, **tolerances) -> Change | None:
        """Gate ``record`` against the baseline ``key`` of the file ``path``: returns the
        :class:`~retrieval_checks._regression.Change` when compared, None when the
        baseline was (re)written; raises AssertionError when the check fails."""
        __tracebackhide__ = True
        unknown = sorted(set(tolerances) - set(_TOLERANCES))
        if unknown:
            raise InputError(
                f"{unknown[0]}=: not an option of a baseline check; use "
                f"{', '.join(_TOLERANCES)}.{hint(unknown[0], _TOLERANCES)}"
            )
        path = Path(path)
        # compared and written at the precision the file stores: a result equal to its baseline compares equal
        record = rounded_record(_plain(record))
        check_record(
            record, where=f"the record for {key!r}", fix="pass a record from baseline_record()"
        )
        stored = self.stored(path, key)
        if self.regen == "all":
            self.pending.append((str(path), key, record))
            return None
        if self.regen == "force" and records_differ(stored, record):
            self.pending.append((str(path), key, record))
            was = (
                "created"
                if stored is None
                else f"updated ({stored.get('value')!r} -> {record['value']!r})"
            )
            self._notify_unchecked(record, "regenerated")
            raise AssertionError(
                f"baseline {key!r} {was} in {path.name}; review the change and commit it, then run "
                "again without --rc-force-regen."
            )
        if stored is None:
            self._notify_unchecked(record, "missing")
            raise AssertionError(
                f"no baseline {key!r} in {path.name}.\n  Create it: run pytest with --rc-regen-all "
                "(writes every baseline and passes) or --rc-force-regen (writes missing or changed "
                "ones and fails), review the file and commit it."
            )
        return assert_no_regression(record, stored, where=f"{path.name}: {key!r}", **tolerances)

    @staticmethod
    def slice_row(record: dict, passed) -> dict:
        """The row of one slice's baseline record, as a slice gate's rows are (the
        events of a check's per-slice records, here and in the plugin's regenerated
        ones)."""
        iv = record.get("interval")
        low, high = iv if isinstance(iv, (list, tuple)) and len(iv) == 2 else (None, None)
        return {
            "slice": record["slice"],
            "metric": record.get("metric"),
            "value": record.get("value"),
            "low": low,
            "high": high,
            "confidence": record.get("confidence"),
            "n": record.get("n"),
            "unit": record.get("unit"),
            "n_queries": record.get("n_queries"),
            "passed": passed,
        }

    @staticmethod
    def _notify_unchecked(record: dict, why: str) -> None:
        # one slice of per-slice baselines (check_slice_baselines): its row names the slice,
        # so reports and compare tell the slices' records apart
        sliced = (
            {
                "slices": [BaselineStore.slice_row(record, passed=False)],
                "worst_slice": record["slice"],
            }
            if isinstance(record.get("slice"), str)
            else {}
        )
        emit(
            GateEvent(
                gate="assert_no_regression",
                metric=record["metric"],
                value=record["value"],
                passed=False,
                on=why,
                comparison="baseline",
                n=record.get("n"),
                unit=record.get("unit"),
                n_skipped=record.get("n_skipped"),
                n_used=record.get("n") if record.get("n_skipped") is not None else None,
                model=record.get("model"),
                dataset=record.get("dataset"),
                # the options behind the value, as a checked gate's event holds them, so that
                # compare refuses a regenerated value computed under other ones (a protocol)
                extra={
                    **sliced,
                    **({"options": record["options"]} if record.get("options") else {}),
                },
            )
        )

    def write(self) -> list[str]:
        """Write the queued records; returns the files written."""
        written = write_records(self.pending)
        self.pending.clear()
        return written
