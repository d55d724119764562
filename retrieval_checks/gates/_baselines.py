"""Baselines: a metric's recorded value, interval and per-unit summary, kept in a
reviewable YAML file next to the suite or test module, and the gate that compares a
new result with it.

A baseline record holds ``metric``, ``value``, ``interval`` ([low, high] or null),
``confidence``, ``n`` and ``unit`` (what was counted), and ``units``: per class (or
grouped-recall group, or query when there are no labels and at most 5000 of them) the
sum and count of the per-query values, which is exactly what the paired cluster-robust
test of :func:`retrieval_checks.compare` needs, in a few lines per class. Records of
metrics without per-query values (pair metrics, the discriminant ratio, image-text
metrics) keep the value and interval only.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import yaml

from ..metrics._names import metric_spec
from ._events import GateEvent, emit
from ._regression import Change, measure_change
from ..errors import InputError
from ..stats._intervals import bootstrap_interval

__all__ = ["baseline_record", "BaselineFile", "BaselineStore", "assert_no_regression", "records_differ",
           "write_records", "baseline_path"]

_MAX_QUERY_UNITS = 5000


def _clean(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


def baseline_record(result, metric: str, *, confidence: float = 0.95, seed: int = 0) -> dict:
    """The record of ``metric`` in ``result`` (any result that answers ``measure``)."""
    if not callable(getattr(result, "measure", None)):
        raise InputError(f"baselines record evaluation results, got {type(result).__name__}.")
    spec = metric_spec(metric)
    if spec.name not in result:
        raise InputError(f"{spec.name} was not computed; computed: {', '.join(result)}.")
    m = result.measure(spec.name)
    rec: dict = {"metric": spec.name, "value": float(m.value), "interval": None, "confidence": confidence,
                 "n": m.n, "unit": m.n_unit}
    if m.interval is not None and _clean(m.interval[0]) is not None:
        rec.update(interval=[float(m.interval[0]), float(m.interval[1])], confidence=m.confidence)
    if spec.kind == "grouped":
        rec.update(_grouped_units(result.grouped[spec.name]))
    elif spec.capabilities.per_query and spec.name in getattr(result, "per_query", {}):
        rec.update(_query_units(result, spec, confidence, seed))
    return rec


def _grouped_units(g) -> dict:
    """Grouped recall: the partition's fingerprint and one unit per group."""
    partition = hashlib.sha256(np.ascontiguousarray(g.group_of_query, dtype=np.int64).tobytes()).hexdigest()[:16]
    values = g.group_values.mean(axis=0)
    return {"partition": f"S={g.group_size} seed={g.seed} repeats={g.repeats} {partition}",
            "units": {f"group {i}": [float(v), 1] for i, v in enumerate(values)}}


def _query_units(result, spec, confidence: float, seed: int) -> dict:
    """A per-query metric: its bootstrap interval and per-class (or per-query) sums."""
    values = result.per_query[spec.name]
    used = ~np.isnan(values)
    out: dict = {"n": int(used.sum()), "unit": "queries"}
    if spec.capabilities.interval == "bootstrap":
        try:
            iv = bootstrap_interval(result, spec.name, confidence=confidence, n_resamples=1000,
                                    method="percentile", seed=seed)
            out["interval"] = [float(iv.low), float(iv.high)]
        except InputError:
            pass
    if spec.family == "medr":
        return out
    codes = getattr(result, "query_label_codes", None)
    if codes is not None:
        labels = result.label_values
        inv_codes, inv = np.unique(codes[used], return_inverse=True)
        sums = np.bincount(inv, weights=values[used])
        counts = np.bincount(inv)
        keys = [str(labels[c].item() if hasattr(labels[c], "item") else labels[c]) if labels is not None else str(c)
                for c in inv_codes]
        out.update(units_are="classes", units={k: [float(s), int(n)] for k, s, n in zip(keys, sums, counts)})
    elif used.sum() <= _MAX_QUERY_UNITS:
        out.update(units_are="queries", units={f"query {i}": [float(values[i]), 1] for i in np.flatnonzero(used)})
    return out


def records_differ(a: dict | None, b: dict | None, tol: float = 1e-9) -> bool:
    """Whether two records differ beyond float noise (for --force-regen)."""
    if a is None or b is None:
        return a is not b
    if a.get("metric") != b.get("metric") or a.get("n") != b.get("n") or a.get("partition") != b.get("partition"):
        return True

    def close(x, y):
        if x is None or y is None:
            return x is y
        return abs(float(x) - float(y)) <= tol * max(1.0, abs(float(x)), abs(float(y)))

    if not close(a.get("value"), b.get("value")):
        return True
    ia, ib = a.get("interval"), b.get("interval")
    if (ia is None) != (ib is None) or (ia is not None and not all(close(x, y) for x, y in zip(ia, ib))):
        return True
    ua, ub = a.get("units") or {}, b.get("units") or {}
    if set(ua) != set(ub):
        return True
    return any(not close(ua[k][0], ub[k][0]) or ua[k][1] != ub[k][1] for k in ua)


def _as_change_input(rec: dict) -> dict:
    iv = rec.get("interval") or (None, None)
    units = rec.get("units")
    return {"value": rec["value"], "low": iv[0], "high": iv[1], "confidence": rec.get("confidence", 0.95),
            "units": {k: tuple(v) for k, v in units.items()} if units else None}


def assert_no_regression(current: dict, baseline: dict, *, max_drop: float | None = None,
                         max_relative_drop: float | None = None, direction: str | None = None,
                         significant: bool = False, confidence: float = 0.95, where: str = "") -> Change:
    """Fail when ``current`` (a :func:`baseline_record`) dropped from ``baseline``
    beyond the tolerances (see :func:`retrieval_checks._regression.measure_change`)."""
    __tracebackhide__ = True
    if current.get("metric") != baseline.get("metric"):
        raise InputError(f"the baseline is for {baseline.get('metric')!r}, the result for {current.get('metric')!r}.")
    if baseline.get("partition") != current.get("partition"):
        raise InputError(f"{current['metric']}: the baseline used label partition {baseline.get('partition')!r}, this "
                         f"run {current.get('partition')!r}; regenerate the baseline (same labels, group_size, seed).")
    use_units = significant and bool(baseline.get("units")) and bool(current.get("units"))
    b_in, c_in = _as_change_input(baseline), _as_change_input(current)
    if not use_units:
        b_in["units"] = c_in["units"] = None
    ch = measure_change(current["metric"], b_in, c_in, max_drop=max_drop, max_relative_drop=max_relative_drop,
                        direction=direction, significant=significant, confidence=confidence)
    iv = current.get("interval") or (None, None)
    allowed = [v for v in (max_drop, None if max_relative_drop is None else max_relative_drop * abs(ch.baseline))
               if v is not None]
    threshold = ch.baseline - (min(allowed) if allowed else 0.0) * (1 if ch.higher_is_better else -1)
    emit(GateEvent(gate="assert_no_regression", metric=ch.metric, value=ch.current, passed=not ch.failed, low=iv[0],
                   high=iv[1], confidence=current.get("confidence"), on="baseline",
                   comparison=">=" if ch.higher_is_better else "<=", threshold=threshold,
                   bounds={k: v for k, v in (("max_drop", max_drop), ("max_relative_drop", max_relative_drop))
                           if v is not None},
                   n=current.get("n"), unit=current.get("unit"), model=current.get("model"),
                   dataset=current.get("dataset"), extra={"baseline": ch.baseline, "drop": ch.drop,
                                                          "p_worse": ch.p_worse}))
    if ch.failed:
        biv = baseline.get("interval")
        raise AssertionError(
            (f"{where}\n" if where else "")
            + f"{ch.metric} regressed: {ch.baseline:.4f} -> {ch.current:.4f} ({'; '.join(ch.reasons)})\n"
            f"  drop {ch.drop:+.4f} ({ch.relative_drop:+.2%} of the baseline); "
            f"{'higher' if ch.higher_is_better else 'lower'} is better\n"
            f"  baseline interval {biv}, current interval {current.get('interval')}; "
            + (f"p(worse)={ch.p_worse:.3g} ({ch.method})\n" if ch.p_worse is not None else f"{ch.method}\n")
            + f"  sample: {current.get('n')} {current.get('unit')} now, {baseline.get('n')} in the baseline\n"
            f"  rule: {ch.tolerance}{', only when significant' if significant else ''}"
        )
    return ch


class BaselineFile:
    """A YAML file of baseline records keyed by check or test name."""

    HEADER = ("# retrieval-checks baselines: review changes like code.\n"
              "# Regenerate: pytest --rc-force-regen (rewrite what changed, and fail) or --rc-regen-all.\n")

    def __init__(self, path):
        self.path = Path(path)
        self.records: dict = {}
        if self.path.exists():
            try:
                data = yaml.safe_load(self.path.read_text(encoding="utf-8"))
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                line = f":{mark.line + 1}" if mark is not None else ""
                raise InputError(f"{self.path}{line}: cannot read the baseline file ({exc}); regenerate it with "
                                 "--rc-regen-all.") from None
            if data is not None and not isinstance(data, dict):
                raise InputError(f"{self.path}: a baseline file is a mapping of names to records.")
            self.records = dict(data or {})

    def get(self, key: str) -> dict | None:
        return self.records.get(key)

    def update(self, entries: dict) -> None:
        """Set records and write the file atomically (keys sorted, for stable diffs)."""
        self.records.update(entries)
        text = self.HEADER + yaml.safe_dump({k: self.records[k] for k in sorted(self.records)}, sort_keys=False,
                                            default_flow_style=None, width=120, allow_unicode=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def baseline_path(path) -> Path:
    """Where the baselines of a suite or test module live: ``<stem>.baselines.yaml`` beside it."""
    p = Path(path)
    return p.with_name(f"{p.stem}.baselines.yaml")


def write_records(entries) -> list[str]:
    """Write (path, key, record) entries, one atomic rewrite per file; returns the paths."""
    by_file: dict = {}
    for path, key, record in entries:
        by_file.setdefault(str(path), {})[key] = record
    for path, records in by_file.items():
        BaselineFile(path).update(records)
    return sorted(by_file)


class BaselineStore:
    """The baseline gate of a session, with pytest-regressions' regeneration semantics.

    ``regen=None``: compare (a missing baseline fails and says how to create it);
    ``"force"``: a missing or different baseline is rewritten and the check fails
    (review the diff, then rerun); ``"all"``: every baseline is rewritten and the
    check passes. Baseline files are read once; records to write are queued in
    ``pending`` as (path, key, record), for :meth:`write` or, under pytest, for the
    controller at the end of the session.
    """

    def __init__(self, regen: str | None = None):
        if regen not in (None, "force", "all"):
            raise InputError(f"regen={regen!r}: use None, 'force' or 'all'.")
        self.regen = regen
        self.pending: list = []
        self._files: dict = {}

    def stored(self, path, key: str) -> dict | None:
        if str(path) not in self._files:
            self._files[str(path)] = BaselineFile(path)
        return self._files[str(path)].get(key)

    def check(self, record: dict, *, path, key: str, **tolerances) -> Change | None:
        """Gate ``record`` against the baseline ``key`` of the file ``path``: returns the
        :class:`~retrieval_checks._regression.Change` when compared, None when the
        baseline was (re)written; raises AssertionError when the check fails."""
        __tracebackhide__ = True
        path = Path(path)
        stored = self.stored(path, key)
        if self.regen == "all":
            self.pending.append((str(path), key, record))
            return None
        if self.regen == "force" and records_differ(stored, record):
            self.pending.append((str(path), key, record))
            was = "created" if stored is None else f"updated ({stored.get('value')!r} -> {record['value']!r})"
            self._notify_unchecked(record, "regenerated")
            raise AssertionError(f"baseline {key!r} {was} in {path.name}; review the change and commit it, then run "
                                 "again without --rc-force-regen.")
        if stored is None:
            self._notify_unchecked(record, "missing")
            raise AssertionError(f"no baseline {key!r} in {path.name}.\n  Create it: run pytest with --rc-regen-all "
                                 "(writes every baseline and passes) or --rc-force-regen (writes missing or changed "
                                 "ones and fails), review the file and commit it.")
        return assert_no_regression(record, stored, **tolerances)

    @staticmethod
    def _notify_unchecked(record: dict, why: str) -> None:
        emit(GateEvent(gate="assert_no_regression", metric=record["metric"], value=record["value"], passed=False,
                       on=why, comparison="baseline", n=record.get("n"), unit=record.get("unit"),
                       model=record.get("model"), dataset=record.get("dataset")))

    def write(self) -> list[str]:
        """Write the queued records; returns the files written."""
        written = write_records(self.pending)
        self.pending.clear()
        return written
