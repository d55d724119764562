"""The HTML report of a session: one self-contained file (inline CSS, SVG and a few
lines of JavaScript; nothing fetched), readable offline and attachable to CI runs.

Contents: the run (time, commit, machine, exit status), a summary table with every
gate's value, interval, rule and result, an interval bar per gate (the interval, the
value and the threshold on one axis with round tick labels: the metric's attainable
range from the registry for a gate without an interval, round bounds around the
interval otherwise) and a sparkline of the metric over past runs
(from the run history), then one detail block per gate with the pair precision-recall
curve when the gate measured one, and the recall-versus-number-of-classes figures
recorded in the session.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import math

from ..errors import RetrievalChecksError
from ..gates import rule_text, tally
from ..gates import verdict as _verdict
from ..metrics import metric_spec
from ._markdown import family_text
from ._slices import slices_html

__all__ = ["render_report"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde1e8;padding-bottom:4px}
.meta{color:#5a6272;font-size:13px} .meta td{padding:1px 12px 1px 0}
.counts span{display:inline-block;margin-right:14px;font-weight:600}
table.gates{border-collapse:collapse;width:100%;font-size:13px}
table.gates th{text-align:left;background:#f3f5f8;cursor:pointer;user-select:none;padding:6px 8px;border-bottom:2px solid #dde1e8}
table.gates td{padding:5px 8px;border-bottom:1px solid #eceef2;vertical-align:middle}
td.rule{font-size:12px;color:#3c4350} td.num{font-variant-numeric:tabular-nums;text-align:right;white-space:nowrap}
.PASS{color:#137333;font-weight:600} .FAIL{color:#b3261e;font-weight:600} .XFAIL{color:#8a6d00;font-weight:600}
tr.failrow{background:#fdf3f2}
details{margin:6px 0;border:1px solid #e3e6eb;border-radius:6px;padding:6px 10px}
summary{cursor:pointer;font-weight:600} .kv td{padding:1px 14px 1px 0;font-size:13px} .kv td:first-child{color:#5a6272}
pre{background:#f6f7f9;padding:8px;overflow:auto;font-size:12px}
.fig{display:inline-block;margin:6px 18px 6px 0;vertical-align:top} .fig .cap{font-size:12px;color:#5a6272}
"""

_JS = """
(function(){
  var table=document.getElementById('gates');
  if(table){
    var ths=table.tHead.rows[0].cells;
    for(var i=0;i<ths.length;i++){(function(col){
      ths[col].addEventListener('click',function(){
        var body=table.tBodies[0], rows=Array.prototype.slice.call(body.rows);
        var dir=ths[col].getAttribute('data-dir')==='asc'?-1:1; ths[col].setAttribute('data-dir',dir===1?'asc':'desc');
        rows.sort(function(a,b){
          var x=a.cells[col].getAttribute('data-sort')||a.cells[col].textContent;
          var y=b.cells[col].getAttribute('data-sort')||b.cells[col].textContent;
          var nx=parseFloat(x), ny=parseFloat(y);
          if(!isNaN(nx)&&!isNaN(ny)) return dir*(nx-ny);
          return dir*x.localeCompare(y);
        });
        rows.forEach(function(r){body.appendChild(r);});
      });
    })(i);}
  }
  document.body.setAttribute('data-ready','1');
})();
"""


def _e(x) -> str:
    return html.escape("" if x is None else str(x))


def _f(x, digits: int = 4) -> str:
    """A number formatted, anything else (a damaged record's text) escaped: safe in HTML."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return ""
    if isinstance(x, bool):
        return _e(x)
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    if isinstance(x, int):
        return str(x)
    return _e(x)


def _is_num(x) -> bool:
    """A number that can be drawn: finite, and at most 1e300 in size (a span between
    larger ones overflows to infinity; such a value is shown as text, not drawn)."""
    return (
        isinstance(x, (int, float))
        and not isinstance(x, bool)
        and math.isfinite(x)
        and abs(x) <= 1e300
    )


def _finite(*xs) -> list[float]:
    return [float(x) for x in xs if _is_num(x)]


def nice_step(span: float, n: int = 5) -> float:
    """A round tick step (1, 2, 2.5 or 5 times a power of ten) giving about ``n`` ticks
    over ``span``."""
    if not (span > 0 and math.isfinite(span)):
        return 1.0
    raw = span / max(n - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick positions covering [lo, hi]: from the step's multiple at or below ``lo``
    to the one at or above ``hi``."""
    step = nice_step(hi - lo, n)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(k * step, 12) for k in range(first, last + 1)]


def tick_label(v: float, step: float) -> str:
    """A tick's text with as many decimals as the step needs (0.25 -> ``0.25``, 5 -> ``5``)."""
    digits = 0
    while digits < 12 and abs(round(step, digits) - step) > 1e-9 * max(abs(step), 1e-300):
        digits += 1
    text = f"{v:.{digits}f}"
    return f"{0:.{digits}f}" if float(text) == 0 else text  # never "-0.0"


def axis_ticks(
    lo: float, hi: float, n: int = 5, *, whole: bool = False, step: float | None = None
) -> tuple[list[float], float]:
    """The ticks of an axis [lo, hi] and their step (``step``, else a round one for about
    ``n`` ticks): both ends, and the multiples of the step between them (those too close
    to an end to be read apart left out); whole-number steps when ``whole``."""
    step = step or nice_step(hi - lo, n)
    if whole and not float(step).is_integer():
        step = float(math.ceil(step))
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    margin = 0.12 * (hi - lo)
    inner = [round(k * step, 12) for k in range(first, last + 1)]
    return [lo, *(t for t in inner if lo + margin < t < hi - margin), hi], step


def metric_range(metric) -> tuple[float, float] | None:
    """The attainable range of a recorded metric name (the registry's ``low`` / ``high``;
    ``high`` is ``inf`` for unbounded metrics such as ranks); for ``<metric> gap`` and
    ``<metric> difference`` of a bounded metric, plus or minus its width. None when the
    name is not a metric of the contract."""
    name = str(metric)
    signed = name.endswith((" gap", " difference"))
    base = name.rsplit(" ", 1)[0] if signed else name
    try:
        family = metric_spec(base).capabilities
    except (RetrievalChecksError, KeyError, AttributeError):
        return None
    if signed:
        width = family.high - family.low
        return (-width, width) if math.isfinite(width) else None
    return float(family.low), float(family.high)


def axis_domain(points: list[float], metric=None, *, zoom: bool = False) -> tuple[float, float]:
    """The axis of a gate's figure: the metric's attainable range (an unbounded end: the
    round value above the largest point), or with ``zoom`` (an interval to show) round
    bounds around the points inside that range; a point outside the range widens it."""
    lo, hi = min(points), max(points)
    known = metric_range(metric)
    if known is not None and not zoom:
        top = (
            known[1]
            if math.isfinite(known[1])
            else nice_ticks(known[0], max(hi, known[0] + 1) * 1.1, 4)[-1]
        )
        return min(known[0], lo), max(top, hi)
    span = hi - lo
    pad = span * 0.1 if span > 0 else max(abs(hi) * 0.1, 0.05)
    ticks = nice_ticks(lo - pad, hi + pad, 4)
    a, b = ticks[0], ticks[-1]
    if known is not None:  # never past what the metric can reach
        a, b = max(a, min(known[0], lo)), min(b, max(known[1], hi))
    return a, b


def interval_svg(
    value, low, high, threshold, width: int = 190, height: int = 34, *, metric=None
) -> str:
    """One axis with round tick labels: the interval as a bar, the value as a dot, the
    threshold as a red tick. Without an interval the axis is the metric's attainable
    range (``[0, 1]`` for a fraction), so the distance to the threshold reads true; with
    one, the axis zooms to round bounds around the interval."""
    pts = _finite(value, low, high, threshold)
    if not pts:
        return ""
    has_interval = len(_finite(low, high)) == 2
    lo, hi = axis_domain(pts, metric, zoom=has_interval)
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    left, right, mid = 10, width - 10, 12

    def x(v):
        return left + (float(v) - lo) / (hi - lo) * (right - left)

    parts = [
        f'<svg class="ibar" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">',
        f'<line x1="{left}" y1="{mid}" x2="{right}" y2="{mid}" stroke="#c9ced8"/>',
    ]
    ticks, step = axis_ticks(lo, hi, 4)
    for t in ticks:
        parts.append(
            f'<line x1="{x(t):.1f}" y1="{mid + 3}" x2="{x(t):.1f}" y2="{mid + 6}" stroke="#9aa1ad"/>'
            f'<text class="tick" x="{x(t):.1f}" y="{height - 3}" font-size="9" text-anchor="middle" '
            f'fill="#5a6272">{tick_label(t, step)}</text>'
        )
    if has_interval:
        parts.append(
            f'<rect x="{x(low):.1f}" y="{mid - 4}" width="{max(x(high) - x(low), 1.5):.1f}" '
            f'height="8" rx="3" fill="#9db7e8"><title>interval [{_f(low)}, {_f(high)}]</title></rect>'
        )
    if _finite(threshold):
        parts.append(
            f'<line x1="{x(threshold):.1f}" y1="2" x2="{x(threshold):.1f}" y2="{mid + 8}" stroke="#c5221f" '
            f'stroke-width="2"><title>threshold {_f(threshold, 6)}</title></line>'
        )
    if _finite(value):
        parts.append(
            f'<circle cx="{x(value):.1f}" cy="{mid}" r="4" fill="#1a3f8f"><title>value {_f(value)}'
            f"</title></circle>"
        )
    return "".join(parts) + "</svg>"


def _whole(values) -> bool:
    return all(float(v).is_integer() for v in values)


def _span(values: list[float], fixed: tuple | None) -> tuple[float, float, float | None]:
    """An axis's bounds and, when it chose them, its tick step: ``fixed`` widened to
    every value; else the values (a single one padded) out to multiples of a round step."""
    lo, hi = min(values), max(values)
    if fixed is not None:
        lo, hi = min(float(fixed[0]), lo), max(float(fixed[1]), hi)
        return (lo - 0.5, hi + 0.5, None) if hi == lo else (lo, hi, None)
    if hi == lo:
        pad = 1.0 if _whole(values) else max(abs(lo) * 0.1, 0.05)
        lo, hi = lo - pad, hi + pad
    step = nice_step(hi - lo, 5)
    if _whole(values) and not float(step).is_integer():
        step = float(math.ceil(step))
    return math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step, step


def line_svg(
    series: list[tuple[str, list, list]],
    *,
    width: int = 360,
    height: int = 220,
    xlabel: str = "",
    ylabel: str = "",
    hline: float | None = None,
    title: str = "",
    markers: bool = True,
    fixed_y: tuple | None = None,
    fixed_x: tuple | None = None,
    bare: bool = False,
) -> str:
    """A small line chart: ``series`` is [(name, xs, ys)]; optional horizontal line.
    Axes span round bounds (``fixed_x`` / ``fixed_y`` when given, widened to any point
    outside them, so nothing is drawn past the frame) with round tick labels; an axis of
    whole numbers (run ids, class counts) gets whole ticks."""
    series = [
        (
            name,
            [a for a, b in zip(sx, sy) if _is_num(a) and _is_num(b)],
            [b for a, b in zip(sx, sy) if _is_num(a) and _is_num(b)],
        )
        for name, sx, sy in series
    ]
    xs = [float(v) for _, sx, _ in series for v in sx]
    ys = [float(v) for _, _, sy in series for v in sy]
    if not _is_num(hline):
        hline = None
    if hline is not None:
        ys.append(float(hline))
    if not xs or not ys:
        return ""
    x0, x1, xstep = _span(xs, fixed_x)
    y0, y1, ystep = _span(ys, fixed_y)
    L, R, T, B = (4, 4, 4, 4) if bare else (48, 14, 20 if title else 10, 34)

    def px(v):
        return L + (float(v) - x0) / (x1 - x0) * (width - L - R)

    def py(v):
        return height - B - (float(v) - y0) / (y1 - y0) * (height - T - B)

    colors = ["#1a3f8f", "#c26b00", "#137333", "#8e24aa", "#00838f", "#6d4c41"]
    out = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">']
    if title:
        out.append(f'<text x="{L}" y="13" font-size="12" font-weight="600">{_e(title)}</text>')
    out.append(
        f'<rect x="{L}" y="{T}" width="{width - L - R}" height="{height - T - B}" fill="none" stroke="#d5d9e0"/>'
    )
    yticks, ystep = axis_ticks(y0, y1, 5, step=ystep)
    xticks, xstep = axis_ticks(x0, x1, 5, whole=_whole(xs) and fixed_x is None, step=xstep)
    for v in [] if bare else yticks:
        out.append(
            f'<line x1="{L}" y1="{py(v):.1f}" x2="{width - R}" y2="{py(v):.1f}" stroke="#f0f1f4"/>'
            f'<text class="tick" x="{L - 4}" y="{py(v) + 4:.1f}" font-size="10" text-anchor="end">'
            f"{tick_label(v, ystep)}</text>"
        )
    for u in [] if bare else xticks:
        out.append(
            f'<text class="tick" x="{px(u):.1f}" y="{height - B + 13}" font-size="10" text-anchor="middle">'
            f"{tick_label(u, xstep)}</text>"
        )
    if xlabel:
        out.append(
            f'<text x="{(L + width - R) / 2}" y="{height - 4}" font-size="11" text-anchor="middle">'
            f"{_e(xlabel)}</text>"
        )
    if ylabel:
        out.append(
            f'<text x="11" y="{(T + height - B) / 2}" font-size="11" text-anchor="middle" '
            f'transform="rotate(-90 11 {(T + height - B) / 2})">{_e(ylabel)}</text>'
        )
    if hline is not None:
        out.append(
            f'<line x1="{L}" y1="{py(hline):.1f}" x2="{width - R}" y2="{py(hline):.1f}" stroke="#c5221f" '
            f'stroke-dasharray="4 3"><title>threshold {hline:.6g}</title></line>'
        )
    for k, (name, sx, sy) in enumerate(series):
        pts = [
            (px(a), py(b))
            for a, b in zip(sx, sy)
            if a is not None and b is not None and math.isfinite(b)
        ]
        if not pts:
            continue
        c = colors[k % len(colors)]
        out.append(
            f'<polyline fill="none" stroke="{c}" stroke-width="1.8" points="'
            + " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
            + f'"><title>{_e(name)}</title></polyline>'
        )
        if markers and len(pts) <= 60:
            out.extend(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.3" fill="{c}"/>' for a, b in pts)
        if len(series) > 1:
            out.append(
                f'<text x="{width - R - 4}" y="{T + 12 + 12 * k}" font-size="10" text-anchor="end" '
                f'fill="{c}">{_e(name)}</text>'
            )
    return "".join(out) + "</svg>"


def _history_of(history, o: dict, problems: list[str]) -> list[dict]:
    """The metric's past values; a missing, foreign or damaged database leaves the
    sparklines out and says why on the page (it never breaks the report)."""
    if history is None:
        return []
    try:
        return history.metric_history(str(o.get("metric")), test=o.get("test"), limit=30)
    except Exception as exc:
        problem = f"history not shown: {exc}"
        if problem not in problems:
            problems.append(problem)
        return []


def render_report(
    outcomes: list[dict],
    *,
    run: dict | None = None,
    history=None,
    figures: list[dict] | None = None,
    title: str = "retrieval-checks report",
) -> str:
    """The report as one HTML string. ``outcomes``: gate records (as in the JSON report
    or the history); ``run``: run metadata; ``history``: a
    :class:`~retrieval_checks.tracking.History` for the sparklines; ``figures``:
    ``{"kind": "sweep", "title", "rows"}`` records (class-count sweeps).

    Parameters
    ----------
    outcomes:
        Gate records (:meth:`~retrieval_checks.GateEvent.to_dict`, plus ``test``).
    run:
        Run metadata (commit, command, machine...), shown in the header.
    history:
        A :class:`~retrieval_checks.History` for each gate's sparkline, or None.
    figures:
        ``{"kind": "sweep", "title", "rows"}`` records (class-count sweeps).
    title:
        The page's title (default ``"retrieval-checks report"``).

    Returns
    -------
    str
        A self-contained HTML page.

    Raises
    ------
    None
        A history that cannot be read leaves the sparklines out and says why on the
        page; the report itself never fails.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> res = rc.evaluate(x, query_labels=[0, 0, 1, 1], metrics=["map"])
    >>> events = []
    >>> with rc.gates.listening(events.append):
    ...     rc.assert_metric(res, "map", at_least=0.7)
    >>> records = [dict(events[0].to_dict(), test="test_map")]
    >>> html = rc.render_report(records, title="nightly")
    >>> html.startswith("<!DOCTYPE html>"), "<title>nightly</title>" in html, "test_map" in html
    (True, True, True)
    """
    head = _head(outcomes, run or {}, title)
    body = [
        "<h2>Gates</h2><table class='gates' id='gates'><thead><tr>",
        "".join(
            f"<th>{h}</th>"
            for h in (
                "#",
                "test",
                "model",
                "dataset",
                "metric",
                "value",
                "interval",
                "rule",
                "n_used / n_skipped",
                "result",
                "interval and threshold",
                "history",
            )
        ),
        "</tr></thead><tbody>",
    ]
    details = ["<h2>Details</h2>"]
    problems: list[str] = []
    for i, o in enumerate(outcomes, 1):
        past = _history_of(history, o, problems)
        body.append(_gate_row(i, o, past))
        details.append(_gate_details(i, o, past))
    body.append("</tbody></table>")
    warned = [(i, o, w) for i, o in enumerate(outcomes, 1) for w in _warnings(o)]
    if warned or problems:
        body.append(
            "<h2>Warnings</h2><ul class='warnings'>"
            + "".join(
                f"<li><a href='#g{i}'>{_e(o.get('test', ''))}</a> {_e(o.get('metric'))}: {_e(w)}</li>"
                for i, o, w in warned
            )
            + "".join(f"<li>{_e(p)}</li>" for p in problems)
            + "</ul>"
        )
    body.append(slices_html(outcomes))  # one chart per slice gate's metric over its slices
    sweeps = _sweeps(figures or [])
    if sweeps:
        body.append("<h2>Recall vs. number of classes</h2>" + sweeps)
    return "".join(head + body + details) + f"<script>{_JS}</script></body></html>"


def _warnings(o: dict) -> list[str]:
    out = (
        [str(w) for w in (o.get("warnings") or []) if w]
        if isinstance(o.get("warnings"), list)
        else []
    )
    skipped, used = o.get("n_skipped"), o.get("n_used")
    if (
        isinstance(skipped, int)
        and not isinstance(skipped, bool)
        and skipped > 0
        and not any("skip" in w for w in out)
    ):
        out.append(
            f"{skipped} queries skipped (no relevant gallery item); the value is over the {_f(used) or '?'} "
            "queries used"
        )
    return out


def _queries(o: dict) -> str:
    used, skipped = o.get("n_used"), o.get("n_skipped")
    if used is None and skipped is None:
        return ""
    return f"{_f(used) or '?'} / {_f(skipped) or '?'}" + html.escape(_outside(o))


def _outside(o: dict) -> str:
    """`` (+2 outside queries='run')`` for a gate whose queries outside trec_eval's query
    set were left out (not skipped), else ""."""
    n = o.get("queries_outside")
    return f" (+{n} outside queries={o.get('queries')!r})" if n else ""


def _rule(o: dict) -> str:
    try:
        text = rule_text(o)
    except Exception:  # a damaged record: its fields are shown in the details
        text = ""
    p = family_text(o)  # raw and adjusted p-values of a significance-gated gate
    return f"{text}; {p}" if text and p else text or p


def _head(outcomes: list[dict], run: dict, title: str) -> list[str]:
    """The document head, the run's metadata and the counts of passed and failed gates."""
    counted = tally(outcomes)
    n_fail, n_xfail = counted["FAIL"], counted["XFAIL"]
    head = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>",
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
    ]
    meta_rows = [
        ("run", run.get("id")),
        ("started (UTC)", run.get("started")),
        (
            "commit",
            str(run.get("git_commit") or "")[:12]
            + (" (uncommitted changes)" if run.get("git_dirty") else ""),
        ),
        ("machine", run.get("machine")),
        ("python", run.get("python")),
        ("command", run.get("command")),
        ("exit status", run.get("exitstatus")),
        ("generated", _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")),
    ]
    head.append(
        "<table class='meta'>"
        + "".join(
            f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>"
            for k, v in meta_rows
            if v not in (None, "")
        )
        + "</table>"
    )
    head.append(
        f"<p class='counts'><span>{len(outcomes)} gate{'' if len(outcomes) == 1 else 's'}</span><span class='PASS'>"
        f"{len(outcomes) - n_fail - n_xfail} passed</span><span class='FAIL'>{n_fail} failed</span>"
        + (f"<span class='XFAIL'>{n_xfail} expected failures</span>" if n_xfail else "")
        + "</p>"
    )
    return head


def _gate_row(i: int, o: dict, past: list[dict]) -> str:
    """One row of the gate table: value, interval, rule, result, interval bar, sparkline."""
    verdict = _verdict(o)
    low, high = o.get("low"), o.get("high")
    interval = f"[{_f(low)}, {_f(high)}]" if _finite(low) and _finite(high) else ""
    threshold = o.get("threshold")
    spark = ""
    if len(past) >= 2:
        spark = line_svg(
            [(str(o.get("metric")), list(range(len(past))), [p.get("value") for p in past])],
            width=130,
            height=40,
            bare=True,
            hline=threshold if _finite(threshold) else None,
            markers=False,
        )
    test = str(o.get("test", ""))
    value = o.get("value")
    return (
        f"<tr class='{'failrow' if verdict == 'FAIL' else ''}'><td class='num'>{i}</td>"
        f"<td><a href='#g{i}'>{_e(test.split('::', 1)[-1] if '::' in test else test)}</a></td>"
        f"<td>{_e(o.get('model'))}</td><td>{_e(o.get('dataset'))}</td><td>{_e(o.get('metric'))}</td>"
        f"<td class='num' data-sort='{_e(value if _is_num(value) else '')}'>{_f(value)}</td>"
        f"<td class='num'>{interval}</td><td class='rule'>{_e(_rule(o))}</td>"
        f"<td class='num'>{_queries(o)}</td><td class='{verdict}'>{verdict}</td>"
        f"<td>{interval_svg(o.get('value'), low, high, threshold, metric=o.get('metric'))}</td><td>{spark}</td></tr>"
    )


def _number(x: float) -> str:
    """A float for reading: 4 decimals, or 4 significant digits when that would show
    nothing (``1.234e-05``); whole floats without decimals."""
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.4f}" if abs(x) >= 1e-3 else f"{x:.4g}"


def display(v, depth: int = 0) -> str:
    """A detail field as text: numbers formatted (in lists and mappings too), long lists
    cut with their length said."""
    if isinstance(v, float):
        return _number(v) if math.isfinite(v) else str(v)
    if isinstance(v, dict) and depth < 4:
        return "{" + ", ".join(f"{k}: {display(x, depth + 1)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)) and depth < 4:
        shown = ", ".join(display(x, depth + 1) for x in v[:12])
        return "[" + shown + (f", ... ({len(v)} in all)" if len(v) > 12 else "") + "]"
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, default=str)[:200]
    return "" if v is None else str(v)


def _gate_details(i: int, o: dict, past: list[dict]) -> str:
    """A gate's detail block: every recorded field, the failure message, the PR curve and
    the metric's history against its threshold."""
    verdict = _verdict(o)
    threshold = o.get("threshold")
    fields = {k: v for k, v in o.items() if k not in ("curve", "message")}
    kv = "".join(f"<tr><td>{_e(k)}</td><td>{_e(display(v))}</td></tr>" for k, v in fields.items())
    figs = []
    curve = o.get("curve")
    if (
        isinstance(curve, dict)
        and isinstance(curve.get("recall"), list)
        and isinstance(curve.get("precision"), list)
    ):
        figs.append(
            "<div class='fig'>"
            + line_svg(
                [("precision", curve["recall"], curve["precision"])],
                xlabel="pair recall",
                ylabel="pair precision",
                title="precision-recall over pairs",
                markers=False,
                fixed_x=(0.0, 1.0),
                fixed_y=(0.0, 1.0),
            )
            + "<div class='cap'>"
            + (
                "exact over all pairs"
                if curve.get("complete")
                else "exact above the negative tail's cut (the high-precision end)"
            )
            + "</div></div>"
        )
    if len(past) >= 2:
        figs.append(
            "<div class='fig'>"
            + line_svg(
                [
                    (
                        str(o.get("metric")),
                        [p.get("run_id") for p in past],
                        [p.get("value") for p in past],
                    )
                ],
                xlabel="run",
                ylabel=str(o.get("metric")),
                title="history",
                hline=threshold if _finite(threshold) else None,
            )
            + "</div>"
        )
    message = o.get("message")
    return (
        f"<details id='g{i}'{' open' if verdict == 'FAIL' else ''}><summary><span class='{verdict}'>"
        f"{verdict}</span> {_e(o.get('test', ''))} &middot; {_e(o.get('metric'))} {_f(o.get('value'))}</summary>"
        f"<table class='kv'>{kv}</table>"
        + (f"<pre>{_e(message)}</pre>" if message else "")
        + "".join(figs)
        + "</details>"
    )


def _sweeps(figures: list[dict]) -> str:
    """Recall against the number of classes, one figure per recorded sweep."""
    out = []
    for fig in figures:
        if fig.get("kind") != "sweep":
            continue
        by_metric: dict = {}
        for r in fig.get("rows") or []:
            if isinstance(r, dict) and _is_num(r.get("n_classes")) and _is_num(r.get("value")):
                by_metric.setdefault(str(r.get("metric")), {}).setdefault(
                    r["n_classes"], []
                ).append(r["value"])
        series = [
            (m, sorted(d), [sum(d[k]) / len(d[k]) for k in sorted(d)]) for m, d in by_metric.items()
        ]
        model, dataset = fig.get("model"), fig.get("dataset")
        title = fig.get("title") or "recall vs. number of classes"
        named = (
            f"model {model}" if model else "model not named (rc_report.add_sweep(..., model=...))"
        )
        caption = (
            named
            + (f" on dataset {dataset}" if dataset else "")
            + (f" · {fig['test']}" if fig.get("test") else "")
        )
        out.append(
            "<div class='fig sweep'>"
            + line_svg(
                series,
                xlabel="number of classes",
                ylabel="value",
                title=f"{title} ({model})" if model else title,
                width=420,
                height=260,
                fixed_y=(0.0, 1.0),
            )
            + f"<div class='cap'>{_e(caption)}</div></div>"
        )
    return "".join(out)
