"""Slice gates in the reports: one small chart per metric over its slices (HTML) and a
table per slice gate (markdown). A slice gate's record carries its rows in ``slices``
(value, interval, units, verdict, the refusal of a slice too small for an interval,
the baseline value of a per-slice drop)."""

from __future__ import annotations

import html
import math

from ..gates import slice_verdict as _verdict
from ..gates import verdict as gate_verdict

__all__ = ["per_slice_records", "slice_rows", "slices_html", "slices_markdown"]


def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _num(x, digits: int = 4) -> str:
    return f"{x:.{digits}f}" if _is_num(x) else ""


def slice_rows(record: dict) -> list[dict]:
    rows = record.get("slices") if isinstance(record, dict) else None
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def per_slice_records(records: list[dict]) -> list[dict]:
    """The records with each slice gate as one record per slice (``test`` named
    ``"<test> [slice <name>]"``, the slice's own value, interval and units): what a
    comparison of two runs judges, slice by slice. A slice gate's own value is its
    worst slice, which can be another slice in each run: compared as one number, a
    slice that fell would hide behind another that did not."""
    out = []
    for r in records:
        rows = slice_rows(r)
        if not rows:
            out.append(r)
            continue
        for row in rows:
            one = {
                k: v for k, v in r.items() if k not in ("slices", "worst_slice", "slice_missing")
            }
            one.update(
                test=f"{r.get('test')} [slice {row.get('slice')}]",
                value=row.get("value") if _is_num(row.get("value")) else None,
                low=row.get("low") if _is_num(row.get("low")) else None,
                high=row.get("high") if _is_num(row.get("high")) else None,
                n=row.get("n"),
                unit=row.get("unit"),
                n_used=row.get("n_used"),
                confidence=row.get("confidence", r.get("confidence")),
                passed=row.get("passed", r.get("passed")),
            )
            out.append(one)
    return out


def _e(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def chart_svg(rows: list[dict], threshold=None, width: int = 420) -> str:
    """One lane per slice: its interval as a bar, its value as a dot (red when the
    slice failed), its baseline as a hollow ring; the threshold as one red line."""
    pts = [
        v
        for r in rows
        for v in (r.get("value"), r.get("low"), r.get("high"), r.get("baseline"))
        if _is_num(v)
    ]
    if _is_num(threshold):
        pts.append(threshold)
    if not pts:
        return ""
    lo, hi = min(pts), max(pts)
    pad = (hi - lo) * 0.08 or 0.05
    lo, hi = lo - pad, hi + pad
    label_w, lane, top = 110, 18, 6
    right = width - 10
    height = top + lane * len(rows) + 18

    def x(v):
        return label_w + (float(v) - lo) / (hi - lo) * (right - label_w)

    out = [
        f'<svg class="slices" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
    ]
    for i, r in enumerate(rows):
        y = top + lane * i + lane / 2
        name = str(r.get("slice"))
        shown = name if len(name) <= 16 else name[:15] + "\u2026"
        out.append(
            f'<text x="{label_w - 6}" y="{y + 3:.1f}" font-size="10" text-anchor="end" fill="#333">'
            f"{_e(shown)}<title>{_e(name)}</title></text>"
            f'<line x1="{label_w}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#eef0f4"/>'
        )
        if _is_num(r.get("low")) and _is_num(r.get("high")):
            out.append(
                f'<rect x="{x(r["low"]):.1f}" y="{y - 4:.1f}" width="{max(x(r["high"]) - x(r["low"]), 1.5):.1f}" '
                f'height="8" rx="3" fill="#9db7e8"><title>interval [{_num(r["low"])}, {_num(r["high"])}]</title></rect>'
            )
        if _is_num(r.get("baseline")):
            out.append(
                f'<circle cx="{x(r["baseline"]):.1f}" cy="{y:.1f}" r="4" fill="none" stroke="#555">'
                f"<title>baseline {_num(r['baseline'])}</title></circle>"
            )
        if _is_num(r.get("value")):
            colour = "#c5221f" if r.get("passed") is False else "#1a3f8f"
            note = f" ({_e(r['refused'])})" if r.get("refused") else ""
            out.append(
                f'<circle cx="{x(r["value"]):.1f}" cy="{y:.1f}" r="4" fill="{colour}"><title>{_e(name)}: '
                f"{_num(r['value'])}, {r.get('n_queries')} queries{note}</title></circle>"
            )
    if _is_num(threshold):
        out.append(
            f'<line x1="{x(threshold):.1f}" y1="{top - 2}" x2="{x(threshold):.1f}" y2="{height - 16}" '
            f'stroke="#c5221f" stroke-width="2"><title>threshold {threshold:.6g}</title></line>'
        )
    axis_y = height - 4
    for v in (lo + pad, (lo + hi) / 2, hi - pad):
        out.append(
            f'<text x="{x(v):.1f}" y="{axis_y}" font-size="9" text-anchor="middle" fill="#5a6272">{v:.3f}</text>'
        )
    return "".join(out) + "</svg>"


def slices_html(outcomes: list[dict]) -> str:
    """A "Slices" section: per slice gate, one chart of its metric over the slices,
    and a note for slices too small for an interval and queries without a slice."""
    blocks = []
    for i, o in enumerate(outcomes, 1):
        rows = slice_rows(o)
        if not rows:
            continue
        threshold = o.get("threshold") if o.get("on") != "slice baseline" else None
        verdict = gate_verdict(o)
        notes = [r["refused"] for r in rows if r.get("refused")]
        missing = {k: v for k, v in (o.get("slice_missing") or {}).items() if v}
        notes += [f"{n} queries have no {k} value (in no slice)" for k, n in missing.items()]
        blocks.append(
            f"<div class='fig'><div class='cap'><a href='#g{i}'>{_e(o.get('test', ''))}</a> "
            f"<span class='{verdict}'>{verdict}</span> {_e(o.get('metric'))} over slices "
            f"({_e(o.get('on'))})</div>"
            + chart_svg(rows, threshold)
            + "".join(f"<div class='cap'>{_e(n)}</div>" for n in notes)
            + "</div>"
        )
    return ("<h2>Slices</h2>" + "".join(blocks)) if blocks else ""


def _md(text) -> str:
    special = str.maketrans(
        {c: "\\" + c for c in "\\`*_[]|~"} | {"<": "&lt;", "&": "&amp;", "\n": " ", "\r": " "}
    )
    return ("" if text is None else str(text)).translate(special)


def slices_markdown(outcomes: list[dict]) -> list[str]:
    """Markdown lines: per slice gate, a heading line and a table of its slices."""
    lines: list[str] = []
    for o in outcomes:
        rows = slice_rows(o)
        if not rows:
            continue
        test = str(o.get("test") or "")
        path, sep, rest = test.partition("::")
        name = path.rsplit("/", 1)[-1] + sep + rest
        lines += [
            "",
            f"**slices of {_md(name)}: {_md(o.get('metric'))}** ({_md(o.get('on'))})",
            "",
            "| slice | value [interval] | baseline | queries | units | result |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows:
            value = _num(r.get("value")) or "no value"
            if _is_num(r.get("low")) and _is_num(r.get("high")):
                value += f" [{_num(r['low'])}, {_num(r['high'])}]"
            lines.append(
                "| "
                + " | ".join(
                    (
                        _md(r.get("slice")),
                        value,
                        _num(r.get("baseline")),
                        _md(r.get("n_queries")),
                        _md(f"{r.get('n')} {r.get('unit')}"),
                        _md(_verdict(r)),
                    )
                )
                + " |"
            )
        missing = {k: v for k, v in (o.get("slice_missing") or {}).items() if v}
        for k, n in missing.items():
            lines.append(f"\n{n} queries have no {_md(k)} value (in no slice).")
    return lines
