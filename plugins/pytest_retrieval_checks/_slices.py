"""Slice gates in the plugin's outputs: one block of lines per slice gate under the
terminal's gate table (every gated slice: value, interval, units, verdict; slices too
small for an interval; queries without a slice value), and one JUnit property per
slice."""

from __future__ import annotations

from retrieval_checks.gates import slice_verdict as _verdict

from . import _reports


def _cell(v) -> str:
    return _reports._num(v) if v is not None else ""


def slice_rows(record: dict) -> list[dict]:
    """The slice rows of a gate record (empty for a gate that is not a slice gate)."""
    rows = record.get("slices")
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def summary_lines(
    outcomes: list[dict], width: int | None = None, mode: str = "full", order: dict | None = None
) -> list[str]:
    """Under the gate table: for each slice gate (``mode="failed"``: each failed one),
    a heading naming the test, metric and rule, then one aligned row per slice."""
    if mode == "none":
        return []
    out: list[str] = []
    for o in _reports.sorted_outcomes(outcomes, order):
        rows = slice_rows(o)
        if not rows or (mode == "failed" and o.get("passed")):
            continue
        rule = _reports.rule_text(o)
        head = f"slices of {_reports._test_name(o)} {o.get('metric')}" + (
            f": {rule}" if rule else ""
        )
        out.extend(_reports.wrapped(head, width))
        table = [("  slice", "value", "interval", "baseline", "n", "queries", "result")]
        for r in rows:
            interval = "" if r.get("low") is None else f"[{_cell(r['low'])}, {_cell(r['high'])}]"
            table.append(
                (
                    f"  {r.get('slice')}",
                    _cell(r.get("value")),
                    interval,
                    _cell(r.get("baseline")),
                    f"{r.get('n')} {r.get('unit')}",
                    str(r.get("n_queries", "")),
                    _verdict(r),
                )
            )
        lines = _reports._columns(table, width)
        if lines is None:  # too narrow: one wrapped line per slice
            lines = [table[0][0].strip()] + [
                "  " + "  ".join(c.strip() for c in row if c) for row in table[1:]
            ]
            lines = [part for line in lines for part in _reports.wrapped(line, width)]
        out.extend(lines)
        for r in rows:
            if r.get("refused"):
                out.extend(_reports.wrapped(f"  note: {r['refused']}", width))
        missing = {k: v for k, v in (o.get("slice_missing") or {}).items() if v}
        for dim, n in missing.items():
            what = "slice value" if dim == "slice" else f"{dim} value"
            out.extend(_reports.wrapped(f"  note: {n} queries have no {what} (in no slice)", width))
        if o.get("new_slices"):
            out.extend(
                _reports.wrapped(
                    f"  note: new slices, not in the baseline (not gated): {', '.join(map(str, o['new_slices']))}",
                    width,
                )
            )
    return out


def junit_properties(record: dict) -> list[tuple[str, object]]:
    """``rc:<metric>:slice:<name>`` = the slice's value, and its interval and verdict."""
    metric = record.get("metric")
    props: list[tuple[str, object]] = []
    for r in slice_rows(record):
        key = f"rc:{metric}:slice:{r.get('slice')}"
        props.append((key, r.get("value")))
        if r.get("low") is not None:
            props.append((f"{key}:interval", f"[{_cell(r['low'])}, {_cell(r['high'])}]"))
        props.append((f"{key}:n_queries", r.get("n_queries")))
        verdict = _verdict(r)
        if verdict:
            props.append((f"{key}:result", verdict))
    return props
