"""What the plugin reports at the end of a session (on the controller under xdist):
the terminal table, the JSON file, the run history, baseline files and the HTML report."""

from __future__ import annotations

import json
from pathlib import Path

from retrieval_checks.gates import rule_text, write_records
from retrieval_checks.tracking import History, render_report


def summary_lines(outcomes: list[dict]) -> list[str]:
    rows = [("test", "metric", "value", "interval", "rule", "result")]
    for o in outcomes:
        interval = "" if o.get("low") is None else f"[{o['low']:.4f}, {o['high']:.4f}]"
        rule = rule_text(o)
        value = "" if o.get("value") is None else f"{o['value']:.4f}"
        verdict = "PASS" if o["passed"] else ("XFAIL" if o.get("xfail") else "FAIL")
        parts = o["test"].split("::")
        test = "::".join((parts[0].rsplit("/", 1)[-1], *parts[1:])) if parts[0].endswith((".yaml", ".yml")) else parts[-1]
        rows.append((test, o["metric"], value, interval, rule, verdict))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def write_json(path, outcomes: list[dict], exitstatus: int, run: dict | None) -> None:
    out = {"gates": outcomes, "exitstatus": int(exitstatus), "run": run}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(out, indent=2, default=str))


def record_history(path, metadata: dict, outcomes: list[dict], exitstatus: int) -> int:
    return History(path).record(metadata, outcomes, exitstatus=int(exitstatus))


def flush_baselines(entries: list) -> list[str]:
    """Write queued baseline records ((path, key, record) triples from every worker)."""
    return write_records(entries)


def write_html(path, outcomes: list[dict], run: dict, history_path, figures: list[dict]) -> None:
    history = History(history_path) if history_path is not None else None
    html = render_report(outcomes, run=run, history=history, figures=figures)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(html, encoding="utf-8")
