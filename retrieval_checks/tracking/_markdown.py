"""The gate table as GitHub-flavoured markdown: a pull-request comment
(``retrieval-checks report RUN --format markdown``) and the GitHub Actions step
summary (the pytest plugin, under ``GITHUB_ACTIONS=true``).

One heading with the counts, one line with the run (id, commit, branch, exit status),
then one table row per gate, failures first: the verdict, the check (the test or suite
check name), the metric, the value with its interval, the rule, and the change: against
the gate's stored baseline when it has one (``value - baseline``), else against the
same check's value in a previous run when one is given; ``new`` when the previous run
did not have that gate (a caller whose previous run was partial says so instead:
``absent``). Values are printed with 4 decimals; every cell is escaped so
that a name holding ``|``, ``*``, ``<`` or a newline cannot break the table.
"""

from __future__ import annotations

import math

from ..gates import rule_text, tally, verdict
from ._slices import slice_rows, slices_markdown

__all__ = ["render_markdown", "absent_text", "sets_differ"]

_SPECIAL = str.maketrans(
    {c: "\\" + c for c in "\\`*_[]|~"} | {"<": "&lt;", "&": "&amp;", "\n": " ", "\r": " "}
)


def md_escape(text) -> str:
    """``text`` safe in a markdown table cell: markdown's punctuation backslash-escaped,
    ``<`` and ``&`` as HTML entities (no tag, no entity of the text's own), line breaks
    as spaces."""
    return ("" if text is None else str(text)).translate(_SPECIAL)


def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _num(x, digits: int = 4) -> str:
    if not _is_num(x):
        return ""
    return str(x) if isinstance(x, int) else f"{x:.{digits}f}"


def check_name(o: dict) -> str:
    """The check as a reader knows it: the node id without the directories of its file
    (``rc_suite.yaml::map_at_least[m-d]``, ``test_model.py::test_map``)."""
    test = str(o.get("test") or "")
    path, sep, rest = test.partition("::")
    return path.rsplit("/", 1)[-1] + sep + rest


def value_text(o: dict) -> str:
    """``0.4123 [0.3800, 0.4400]``: the value and, when recorded, its interval; ``no
    value`` for a gate that errored before measuring."""
    value = _num(o.get("value"))
    if not value:
        return "no value"
    low, high = o.get("low"), o.get("high")
    return value + (f" [{_num(low)}, {_num(high)}]" if _is_num(low) and _is_num(high) else "")


def _rule(o: dict) -> str:
    try:
        text = rule_text(o)
    except Exception:  # a damaged record: the table still renders, without its rule
        text = ""
    p = family_text(o)
    return f"{text}; {p}" if text and p else text or p


def family_text(o: dict) -> str:
    """A significance-gated gate's p-values: ``p 0.012`` (raw, one-sided), and under a
    correction ``p 0.012, holm 0.048`` (adjusted over the run's family of N), so a gate
    decided after the correction shows both numbers; empty for other gates."""
    if not o.get("family") or not _is_num(o.get("p_raw")):
        return ""
    text = f"p {float(o['p_raw']):.3g}"
    correction = o.get("correction")
    if correction not in (None, "none") and _is_num(o.get("p_adjusted")):
        size = o.get("family_size")
        of = f" of {size}" if _is_num(size) else ""
        text += f", {correction} {float(o['p_adjusted']):.3g}{of}"
    return text


def sets_differ(b: dict, c: dict) -> str:
    """How the evaluated sets of two runs' records of a gate differ, as far as the records
    tell (the queries used; the dataset's name): ``"n_used 1797 -> 300"``, or "" when
    they agree or a record lacks the field. A value over another set is
    another number (a smaller, easier set raised map while the model got worse: a new
    user's trial passed such a compare), as a baseline check refuses it. The one rule of
    ``compare`` and of the report's change column."""
    diffs = []
    for key in ("n_used", "dataset"):
        x, y = b.get(key), c.get(key)
        if x is not None and y is not None and x != y:
            diffs.append(f"{key} {x!r} -> {y!r}")
    return ", ".join(diffs)


def change_text(o: dict, previous: dict | None, previous_label: str, absent: str = "new") -> str:
    """The change of the value: against the gate's baseline (``baseline`` field), else
    against ``previous[(test, metric)]`` (a slice gate: its worst slice against the same
    slice then, never the previous run's worst, which can be another slice); ``absent``
    (``new``) when a previous run is known but lacks the gate, empty when nothing is known."""
    value = o.get("value")
    baseline = o.get("baseline")
    if _is_num(value) and _is_num(baseline):
        return f"{value - baseline:+.4f} vs baseline {_num(baseline)}"
    if previous is None:
        return ""
    before = previous.get((str(o.get("test") or ""), str(o.get("metric"))))
    if before is None:
        return absent
    worst = o.get("worst_slice")
    if worst is not None and _is_num(value):  # a slice gate: its worst slice, then and now
        same = next((r for r in slice_rows(before) if r.get("slice") == worst), None)
        if same is None or not _is_num(same.get("value")):
            return f"slice {worst}: no value in {previous_label}"
        return f"{value - same['value']:+.4f} vs {previous_label} (slice {worst})"
    if _is_num(value) and _is_num(before.get("value")):
        differ = sets_differ(before, o)
        if differ:  # another set: not a change
            return f"not compared with {previous_label}: {differ}"
        return f"{value - before['value']:+.4f} vs {previous_label}"
    return f"{_num(before.get('value')) or 'no value'} in {previous_label}"


def absent_text(previous_run: dict | None, label: str) -> str:
    """The change cell of a gate the previous run (``previous_run``: its metadata, as
    ``History.runs`` gives it) lacks: ``new`` after a full run; after a partial run
    (``-k``, ``-m``, ``--lf``, deselection, a collection error, stopped early) or one
    whose selection was not recorded, the gate may simply not have run then, so the
    cell says so instead of calling it new."""
    selection = (previous_run or {}).get("selection")
    if selection == "":
        return "new"
    if selection is None:
        return f"not in {label} (not known to be a full run: not comparable)"
    return f"not in {label}, a partial run ({selection}): not comparable"


def _order(outcomes: list[dict]) -> list[dict]:
    """Failures first, then expected failures, then passes; recorded order within each."""
    rank = {"FAIL": 0, "XFAIL": 1, "PASS": 2}
    return sorted(outcomes, key=lambda o: rank[verdict(o)])


def run_line(run: dict) -> str:
    """``run 12 · commit `abcdef123456` (uncommitted changes) · branch `main` · exit status 1``."""
    parts = []
    if run.get("id") is not None:
        parts.append(f"run {md_escape(run['id'])}")
    commit = run.get("git_commit")
    if commit:
        parts.append(
            f"commit {md_escape(str(commit)[:12])}"
            + (" (uncommitted changes)" if run.get("git_dirty") else "")
        )
    branch = run.get("git_branch") or run.get("branch")
    if branch:
        parts.append(f"branch {md_escape(branch)}")
    if run.get("started"):
        parts.append(f"started {md_escape(run['started'])} UTC")
    if run.get("exitstatus") is not None:
        parts.append(f"exit status {md_escape(run['exitstatus'])}")
    return " · ".join(parts)


def render_markdown(
    outcomes: list[dict],
    *,
    run: dict | None = None,
    previous: list[dict] | None = None,
    previous_label: str = "previous run",
    title: str = "retrieval-checks gates",
    absent: str = "new",
) -> str:
    """The gate table as markdown (ending in a newline). ``outcomes``: gate records (as
    in the JSON report or ``History.results``); ``run``: the run's metadata (id,
    git_commit, git_dirty, branch, started, exitstatus); ``previous``: the gate records
    of an earlier run to compute changes against (named ``previous_label``); ``absent``:
    the change of a gate that run lacks (``new``; a partial run lacks gates that are
    not new: say so)."""
    counted = tally(outcomes)
    n_fail, n_xfail = counted["FAIL"], counted["XFAIL"]
    counts = (
        f"{len(outcomes)} gate{'s' if len(outcomes) != 1 else ''}: {len(outcomes) - n_fail - n_xfail} passed, "
        f"{n_fail} failed" + (f", {n_xfail} expected to fail" if n_xfail else "")
    )
    lines = [f"### {md_escape(title)}: {'FAILED' if n_fail else 'passed'}", "", counts]
    described = run_line(run or {})
    if described:
        lines[-1] += f" ({described})"
    lines.append("")
    if not outcomes:
        lines.append("No gate was recorded.")
        return "\n".join(lines) + "\n"
    before = None
    if previous is not None:
        before = {(str(p.get("test") or ""), str(p.get("metric"))): p for p in previous}
    lines.append("| result | check | metric | value [interval] | rule | change |")
    lines.append("|---|---|---|---|---|---|")
    for o in _order(outcomes):
        cells = (
            md_escape(verdict(o)),
            md_escape(check_name(o)),
            md_escape(o.get("metric")),
            value_text(o),  # numbers and brackets only: left as they are
            md_escape(_rule(o)),
            md_escape(change_text(o, before, previous_label, absent)),
        )
        lines.append("| " + " | ".join(cells) + " |")
    lines += slices_markdown(_order(outcomes))
    return "\n".join(lines) + "\n"
