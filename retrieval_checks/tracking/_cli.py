"""The ``retrieval-checks`` command line: list, show, compare and export recorded runs.

    retrieval-checks runs --branch main --full-only   # newest first, as every listing
    retrieval-checks show latest
    retrieval-checks compare -2 -1 --max-drop 0.01 --significant
    retrieval-checks compare 3f2a9c1                  # that commit's latest run against the latest
    retrieval-checks history ndcg_cut@10 --test test_search --limit 5
    retrieval-checks export -o runs.csv               # the format from the extension (.csv, .json)
    retrieval-checks report latest -o report.html
    retrieval-checks plan latest --metric ndcg@10 --drop 0.01 --power 0.8
    retrieval-checks validate example_suites    # suites and baselines files, no model run
    retrieval-checks schema -o suite.schema.json

``--db`` names the history database, before or after the command; by default it is
``.retrieval-checks/history.sqlite`` in the project root, found from the working
directory as pytest finds its rootdir (:func:`~retrieval_checks.tracking.default_history_path`,
the same rule the pytest plugin writes by), so any subdirectory of the project works.
Every listing is newest first (runs, history, export).
Exit codes: 0 success, 1 a comparison found a regression (a worse value, a gate that
errored, or a gate of the baseline run missing from the candidate unless
``--allow-missing``) or a candidate run that failed its own gates, or ``show --check`` found a failed gate or a non-zero recorded
exit status, or ``validate`` found an invalid suite or baselines file; 2 bad usage (an
unknown metric, nothing to compare, a path to validate that does not exist or is not a
suite or baselines file, two names of the same run given to ``compare``) or a database problem. Runs are named
by id, ``latest``, ``-1``, ``-2``, ... (newest first), or a git commit (its latest clean run: a dirty run, made with
uncommitted changes, stands for its commit only with ``--allow-dirty``).
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import io
import json
import math
import os
import re
import sqlite3
import sys
from pathlib import Path

import yaml

from .._suggest import did_you_mean
from .._version import __version__
from ..errors import InputError, MetricNameError, RetrievalChecksError, SuiteError
from ..gates import (
    BaselineFile,
    adjust_pvalues,
    decide_family,
    family_line,
    rule_text,
    tally,
    verdict,
)
from ..gates._baselines import round_stored
from ..gates._regression import higher_is_better, measure_change
from ..metrics._measurement import RETIRED_OPTIONS
from ..metrics._names import metric_spec
from ..options import parse_text
from ..stats._plan import plan_queries
from ..stats._power import check_power
from ..suites import suite_errors
from ..suites._jsonschema import suite_json_schema
from ..suites._run import array_errors
from ..suites._slices import slice_column_errors
from ._history import (
    DEFAULT_HISTORY,
    RECORD_COLUMNS,
    History,
    default_history_path,
    project_root,
)
from ._markdown import absent_text, render_markdown, sets_differ
from ._report import render_report
from ._slices import per_slice_records

DEFAULT_DB = DEFAULT_HISTORY  # relative to the project root
ORDER = "newest first"
# the run's columns, a gate record's scalar columns (the history's, in its order), its rule
_EXPORT_COLUMNS = ("run_id", "started", "git_commit", "git_dirty", *RECORD_COLUMNS, "rule")


def _queries(r: dict) -> str:
    if r.get("n_used") is None and r.get("n_skipped") is None:
        return ""
    return f"{_fmt(r.get('n_used')) or '?'} / {_fmt(r.get('n_skipped')) or '?'}" + _outside(r)


def _outside(o: dict) -> str:
    """`` (+2 outside queries='run')`` for a gate whose queries outside trec_eval's query
    set were left out (not skipped), else ""."""
    n = o.get("queries_outside")
    return f" (+{n} outside queries={o.get('queries')!r})" if n else ""


def _fmt(v, digits: int = 4) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _table(rows: list[tuple], out) -> None:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)


def _selection(run: dict) -> str:
    """``full``, ``partial: <what narrowed it>``, or ``?`` (recorded before runs kept it)."""
    sel = run.get("selection")
    if sel is None:
        return "?"
    return "full" if sel == "" else f"partial: {sel}"


def _cmd_runs(h: History, args, out) -> int:
    runs = h.runs(
        limit=args.limit, commit=args.commit, branch=args.branch, full_only=args.full_only
    )
    if not runs:
        filters = [
            f
            for f, on in (
                (f"--commit {args.commit}", args.commit),
                (f"--branch {args.branch}", args.branch),
                ("--full-only", args.full_only),
            )
            if on
        ]
        print(f"no runs in {h.path}" + (f" for {' '.join(filters)}" if filters else ""), file=out)
        return 0
    rows = [
        (
            "run",
            "started (UTC)",
            "commit",
            "branch",
            "gates",
            "failed",
            "exit",
            "selection",
            "command",
        )
    ]
    for r in runs:
        commit = (r["git_commit"] or "-")[:10] + ("+dirty" if r["git_dirty"] else "")
        rows.append(
            (
                r["id"],
                r["started"],
                commit,
                r.get("git_branch") or "-",
                r["n_gates"],
                r["n_failed"],
                _fmt(r["exitstatus"]),
                _selection(r),
                r["command"] or "",
            )
        )
    _table(rows, out)
    if any(r.get("selection") is None for r in runs):
        print(
            "selection '?': recorded before retrieval-checks stored how a run was selected (full or partial)",
            file=out,
        )
    return 0


def _resolve(h: History, ref, args, say) -> int:
    """The run ``ref`` names (a commit: its latest clean run unless --allow-dirty), with
    what resolving it skipped or used said on ``say``."""
    notes: list[str] = []
    run_id = h.resolve(ref, allow_dirty=bool(getattr(args, "allow_dirty", False)), notes=notes)
    for note in notes:
        print(f"note: {note}", file=say)
    return run_id


def _own_failures(results: list[dict]) -> list[dict]:
    """The gates of a run that failed (an expected failure, xfail, is not one)."""
    return [r for r in results if verdict(r) == "FAIL"]


def _cmd_show(h: History, args, out) -> int:
    run_id = _resolve(h, args.run, args, out)
    results = h.results(run_id)
    rows = [("test", "metric", "value", "interval", "rule", "n_used / n_skipped", "result")]
    for r in results:
        interval = "" if r["low"] is None else f"[{_fmt(r['low'])}, {_fmt(r['high'])}]"
        rule = rule_text(r)
        rows.append(
            (
                r["test"],
                r["metric"],
                _fmt(r["value"]),
                interval,
                rule,
                _queries(r),
                verdict(r),
            )
        )
    print(f"run {run_id}: {len(results)} gate{'' if len(results) == 1 else 's'}", file=out)
    _table(rows, out)
    if not args.check:
        return 0
    # a red run never checks green: failed gates, or a non-zero exit status of the recorded session
    # (a test that failed without a gate, an interrupted session, a report that was not written)
    reasons = []
    n_failed = len(_own_failures(results))  # an expected failure (xfail) fails no run
    if n_failed:
        reasons.append(f"{n_failed} of {len(results)} gates failed")
    status = next((r.get("exitstatus") for r in h.runs() if r["id"] == run_id), None)
    if status not in (0, None):
        reasons.append(
            f"the recorded pytest session exited with status {status} (non-zero: a test failed, or the "
            "session was interrupted or its reports incomplete)"
        )
    if reasons:
        print(f"check failed for run {run_id}: {'; '.join(reasons)}", file=out)
        return 1
    n_xfail = tally(results)["XFAIL"]
    expected = f" ({n_xfail} expected to fail, xfail)" if n_xfail else ""
    print(
        f"check passed for run {run_id}: no gate failed{expected} and the session exited with "
        "status 0",
        file=out,
    )
    return 0


def _at_stored_precision(b: dict, c: dict) -> tuple[dict, dict]:
    """Two records of one gate, both at a baselines file's precision when either is a
    regenerated baseline (``--rc-regen-all`` records the rounded value it wrote): the
    same model's full-precision value would otherwise differ from it in the 7th digit
    and read as a drop."""
    if "regenerated" not in (b.get("on"), c.get("on")):
        return b, c
    return tuple(
        {**r, **{k: round_stored(r.get(k)) for k in ("value", "low", "high")}} for r in (b, c)
    )


def _judge(metric: str, b: dict, c: dict, args) -> tuple[tuple, str, object]:
    """One compared gate's table row and its verdict: ``ok``, ``regressed`` or
    ``untested`` (under --significant, a drop beyond the tolerance whose significance
    cannot be tested: a run recorded no interval for it)."""
    ch = measure_change(
        metric,
        b,
        c,
        max_drop=args.max_drop,
        max_relative_drop=args.max_relative_drop,
        significant=args.significant,
        confidence=args.confidence,
    )
    verdict = "regressed" if ch.failed else "ok"
    text = "REGRESSED" if ch.failed else "ok"
    if args.significant and ch.p_worse is None:
        missing = " and ".join(
            f"run {r['run_id']}" for r in (b, c) if r.get("low") is None or r.get("high") is None
        )
        if ch.failed:
            verdict, text = (
                "untested",
                (
                    f"UNTESTED (dropped beyond the tolerance; no interval in {missing or 'a run'}"
                    ": significance cannot be tested)"
                ),
            )
        elif missing:
            text = f"ok (within the tolerance; no interval in {missing}: significance not testable)"
    elif ch.power is not None and ch.power.underpowered and not ch.failed:
        # a pass the test could not have turned into a failure: say what it can see
        text = (
            f"ok (underpowered: minimum detectable drop {ch.power.mdd:.4g} at "
            f"{ch.power.power:.0%} power > the tolerance)"
        )
    row = (
        c["test"],
        metric,
        _fmt(ch.baseline),
        _fmt(ch.current),
        f"{ch.drop:+.4f}",
        "" if ch.p_worse is None else f"{ch.p_worse:.3g}",
        text,
    )
    return row, verdict, ch


def _correct(judged: list, rows: list, counts: dict, args) -> list[str]:
    """--correction: the significance-gated gates of the comparison are one family; a
    regression that is significant alone but not after the correction is ok (said so),
    its p-value column shows both; a regression on anything else stays."""
    family = [(i, ch) for i, ch in judged if ch.significance_gated]
    if args.correction == "none" or not family:
        return []
    adjusted = adjust_pvalues([ch.p_worse for _, ch in family], args.correction)
    for (i, ch), p in zip(family, adjusted):
        row = list(rows[i])
        row[5] = f"{ch.p_worse:.3g} -> {p:.3g}"
        power_failed = ch.power is not None and ch.power.required and ch.power.underpowered
        if ch.failed and not power_failed and p >= ch.level:
            counts["regressed"] -= 1
            counts["ok"] += 1
            row[6] = f"ok (significant alone; not after {args.correction}: adjusted p {p:.3g})"
        rows[i] = tuple(row)
    records = [
        {
            "family": True,
            "p_raw": ch.p_worse,
            "significance_level": ch.level,
            "correction": args.correction,
        }
        for _, ch in family
    ]
    return [family_line(summary) for summary in decide_family(records)]


def _options_differ(b: dict, c: dict) -> str:
    """The options that changed between two runs' records of a gate (the options that
    change a value, as the gate's event recorded them): ``"options differ: ties
    'pessimistic' -> 'average'"``, or "" when they agree or a record has none (a run
    recorded before events held them)."""
    bo, co = b.get("options"), c.get("options")
    if not isinstance(bo, dict) or not isinstance(co, dict):
        return ""
    # an option an earlier version recorded that changes no value now (similarity) is not compared
    bo, co = ({k: v for k, v in d.items() if k not in RETIRED_OPTIONS} for d in (bo, co))
    if bo == co:
        return ""
    keys = sorted(k for k in set(bo) | set(co) if bo.get(k) != co.get(k))

    def shown(d: dict, k: str) -> str:
        return repr(d[k]) if k in d else "unset"

    return "options differ: " + ", ".join(f"{k} {shown(bo, k)} -> {shown(co, k)}" for k in keys)


def _cmd_compare(
    h: History, args, out
) -> int:  # long: the verdicts, the summary line and the missing gates
    said = io.StringIO()
    base_id, cand_id = (
        _resolve(h, args.baseline, args, said),
        _resolve(h, args.candidate, args, said),
    )
    if base_id == cand_id:  # after aliases: latest and -1, a commit and its latest run, run:N and N
        raise _UsageError(
            f"compare {args.baseline} {args.candidate}: both name run {base_id}, and a run compared "
            "with itself shows no change; name two different runs (e.g. compare -2 -1, or a commit "
            "and latest)."
        )
    runs = {r["id"]: r for r in h.runs()}
    for run_id, role in ((base_id, "baseline"), (cand_id, "candidate")):
        run = runs[run_id]
        if run["git_dirty"] and f"run {run_id} is a dirty run" not in said.getvalue():
            print(
                f"note: run {run_id} ({role}) is a dirty run: its working tree held uncommitted changes on top of "
                f"commit {(run['git_commit'] or '?')[:10]}",
                file=said,
            )
    out.write(said.getvalue())
    base_results, cand_results = h.results(base_id), h.results(cand_id)
    # a slice gate is judged slice by slice (its own value is the worst slice of each run)
    base = {(r["test"], r["metric"]): r for r in per_slice_records(base_results)}
    cand = {(r["test"], r["metric"]): r for r in per_slice_records(cand_results)}
    known = {m for (_, m) in (*base, *cand)}
    wanted = {
        _metric_name(
            h, m, known, f"--metric {m}: no gate of run {base_id} or run {cand_id} measured it"
        )
        for m in (args.metric or ())
    }
    rows = [("test", "metric", f"run {base_id}", f"run {cand_id}", "drop", "p(worse)", "result")]
    counts = {"regressed": 0, "untested": 0, "ok": 0}
    skipped, judged, refused = 0, [], []
    for key in sorted(set(base) & set(cand)):
        test, metric = key
        if wanted and metric not in wanted:
            continue
        b, c = _at_stored_precision(base[key], cand[key])
        if b["value"] is not None and c["value"] is None and higher_is_better(metric) is not None:
            counts["regressed"] += (
                1  # the gate errored (or lost its value) in the candidate: a regression, not a skip
            )
            rows.append(
                (
                    test,
                    metric,
                    _fmt(b["value"]),
                    "none",
                    "",
                    "",
                    "REGRESSED (no value: the gate errored)",
                )
            )
            continue
        if b["value"] is None or c["value"] is None or higher_is_better(metric) is None:
            skipped += 1
            continue
        sets = sets_differ(b, c)
        differ = _options_differ(b, c) or (f"evaluated sets differ: {sets}" if sets else "")
        if differ:  # another option or another set, another number: never compared silently
            refused.append(key)
            rows.append(
                (
                    test,
                    metric,
                    _fmt(b["value"]),
                    _fmt(c["value"]),
                    "",
                    "",
                    f"NOT COMPARED ({differ})",
                )
            )
            continue
        row, verdict, ch = _judge(metric, b, c, args)
        counts[verdict] += 1
        judged.append((len(rows), ch))
        rows.append(row)
    if args.correction != "none" and not args.significant:
        raise _UsageError(
            f"--correction {args.correction} adjusts significance tests: add --significant, or leave "
            "--correction out."
        )
    lines = _correct(judged, rows, counts, args)
    _table(rows, out)
    for line in lines:
        print(line, file=out)
    lost = sorted(k for k in set(base) - set(cand) if not wanted or k[1] in wanted)
    only_b, only_c = (
        len(lost),
        len({k for k in set(cand) - set(base) if not wanted or k[1] in wanted}),
    )
    tol = []
    if args.max_drop is not None:
        tol.append(f"max drop {args.max_drop:g}")
    if args.max_relative_drop is not None:
        tol.append(f"max relative drop {args.max_relative_drop:.2%}")
    untested = (
        f", {counts['untested']} untested (significance cannot be tested)"
        if args.significant
        else ""
    )
    print(
        f"{len(rows) - 1} compared ({', '.join(tol) or 'no drop allowed'}"
        f"{', only significant drops' if args.significant else ''}), {counts['regressed']} regressed{untested}; "
        f"{skipped} skipped (no value or direction), {only_b} only in run {base_id}, {only_c} only in run {cand_id}",
        file=out,
    )
    status = 1 if counts["regressed"] else 0
    if refused:
        print(
            f"{len(refused)} gate(s) not compared: computed under different options or over different "
            "evaluated sets (the table names them: ties, protocol, relevance_level, queries, n_used, dataset...), so "
            f"the two values are different numbers, not a change; rerun the candidate with run {base_id}'s "
            "options on its set, or compare runs computed the same way",
            file=out,
        )
        status = 1
    if _failed_itself(cand_id, cand_results, runs[cand_id], out):
        status = 1
    base_failed = _own_failures(base_results)
    if base_failed:
        print(
            f"note: the baseline run {base_id} failed {len(base_failed)} of its {len(base_results)} gates itself",
            file=out,
        )
    if counts["untested"] and not args.allow_untested:
        print(
            f"{counts['untested']} gate(s) dropped beyond the tolerance, and whether the drop is significant cannot "
            "be tested (no recorded interval): not judged as regressed, but not passed either (rerun the gates "
            "with intervals, compare without --significant, or pass --allow-untested to accept them)",
            file=out,
        )
        status = 1
    if lost and not args.allow_missing:  # a gate that disappeared is a regression, not a pass
        for test, metric in lost:
            print(f"MISSING  {test}  {metric}: in run {base_id}, not in run {cand_id}", file=out)
        print(
            f"{len(lost)} gate(s) of run {base_id} missing from run {cand_id}: a lost gate counts as a regression "
            "(pass --allow-missing to accept it)",
            file=out,
        )
        return 1
    if len(rows) == 1:
        raise _UsageError(
            f"nothing to judge: no gate of run {base_id} has a value in run {cand_id} to compare with "
            f"({skipped} skipped, {only_b} only in run {base_id}, {only_c} only in run {cand_id}); "
            "compare runs of the same tests, or check --metric."
        )
    return status


def _failed_itself(run_id: int, results: list[dict], run: dict, out) -> bool:
    """Whether the candidate run failed on its own (a failed gate, or a non-zero exit
    status of its session), said on ``out``: no regression does not make it ok."""
    failed = _own_failures(results)
    for r in failed:
        print(
            f"FAILED  {r['test']}  {r['metric']}: {_fmt(r['value']) or 'no value'} ({rule_text(r) or 'its gate'})",
            file=out,
        )
    reasons = []
    if failed:
        reasons.append(f"run {run_id} failed {len(failed)} of its {len(results)} gates itself")
    if run.get("exitstatus") not in (0, None):
        reasons.append(f"its pytest session exited with status {run['exitstatus']}")
    if reasons:
        print(
            f"{'; '.join(reasons)}: not ok, whatever the comparison found (a candidate must pass its own gates)",
            file=out,
        )
    return bool(reasons)


def _metric_name(h: History, name: str, known: set, problem: str) -> str:
    """The recorded metric ``name`` stands for: itself when recorded, else its canonical
    name by the metric registry's aliases (``ndcg_cut@10`` -> ``ndcg@10``, also in
    ``<metric> gap`` / ``<metric> difference``); a name neither recorded nor known is a
    usage error with the closest recorded name."""
    if name in known:
        return name
    base, suffix = name, ""
    for tail in (" gap", " difference"):
        if name.endswith(tail):
            base, suffix = name[: -len(tail)], tail
    try:
        canonical = metric_spec(base.strip()).name + suffix
    except MetricNameError:
        canonical = None
    if canonical is not None and canonical in known:
        return canonical
    everywhere = known | set(h.metrics())
    alias = (
        f" (the metric registry reads it as {canonical!r})" if canonical not in (None, name) else ""
    )
    raise _UsageError(
        f"{problem}{alias}{_closest(canonical or name, everywhere)}; recorded metrics: "
        f"{', '.join(sorted(known)[:20]) or 'none'}."
    )


def _test_names(h: History, given: str, metric: str) -> list[str]:
    """The recorded test(s) ``--test`` names: the node id itself, or the one node id it
    ends (``test_x``, ``module.py::test_x``, ``test_x[param]``, a suite's case name);
    several matches are an error listing them."""
    tests = h.tests(metric)
    if given in tests:
        return [given]
    found = [
        t
        for t in tests
        if t.endswith(("::" + given, "/" + given)) or t.split("::")[-1].split("[")[0] == given
    ]
    if len(found) == 1:
        return found
    if found:
        raise _UsageError(
            f"--test {given}: matches {len(found)} recorded tests of {metric}: "
            f"{', '.join(found[:10])}{' ...' if len(found) > 10 else ''}; give a longer part of the "
            "node id (or the whole)."
        )
    names = {t.split("::")[-1] for t in tests} | set(tests)
    raise _UsageError(
        f"--test {given}: no recorded test of {metric} is named so{_closest(given, names)}; "
        f"tests of {metric}: {', '.join(tests[:10]) or 'none'}{' ...' if len(tests) > 10 else ''}."
    )


def _cmd_history(h: History, args, out) -> int:
    known = set(h.metrics())
    metric = _metric_name(
        h, args.metric, known, f"metric {args.metric!r} was never recorded in {h.path}"
    )
    tests = None if args.test is None else _test_names(h, args.test, metric)
    rows = h.metric_runs(
        metric, model=args.model, dataset=args.dataset, tests=tests, limit=args.limit
    )
    if not rows:
        print(
            f"no recorded values of {metric!r} for these filters (--model, --dataset, --test)",
            file=out,
        )
        return 0
    shown_as = "" if metric == args.metric else f" ({args.metric!r} is {metric!r})"
    n_runs = len({r["run_id"] for r in rows})
    print(
        f"{metric}{shown_as}: {len(rows)} value(s) in the newest {n_runs} run(s), {ORDER}", file=out
    )
    table = [
        (
            "run",
            "started (UTC)",
            "commit",
            "test",
            "model",
            "dataset",
            "value",
            "interval",
            "result",
        )
    ]
    for r in rows:
        interval = "" if r["low"] is None else f"[{_fmt(r['low'])}, {_fmt(r['high'])}]"
        commit = (r["git_commit"] or "-")[:10] + ("+dirty" if r.get("git_dirty") else "")
        table.append(
            (
                r["run_id"],
                r["started"],
                commit,
                r["test"],
                r.get("model") or "",
                r.get("dataset") or "",
                _fmt(r["value"]),
                interval,
                verdict(r),
            )
        )
    _table(table, out)
    return 0


_FORMATS = {".csv": "csv", ".json": "json"}


def _export_format(args) -> str:
    """The export format: from the ``-o`` file's extension (.csv, .json); ``--format``
    when there is no file, or one with another extension; a conflict is an error."""
    if not args.output:
        return args.format or "csv"
    by_name = _FORMATS.get(Path(args.output).suffix.lower())
    if by_name is None and args.format is None:
        raise _UsageError(
            f"-o {args.output}: cannot tell the format from the extension "
            f"{Path(args.output).suffix or '(none)'}; name the file .csv or .json, or pass --format."
        )
    if by_name is not None and args.format is not None and args.format != by_name:
        raise _UsageError(
            f"--format {args.format} conflicts with -o {args.output} (a {by_name} file by its "
            f"extension); drop --format, or name the file .{args.format}."
        )
    return by_name or args.format


def _cmd_export(h: History, args, out) -> int:
    fmt = _export_format(args)
    runs = {r["id"]: r for r in h.runs()}
    say = out if args.output else sys.stderr  # a note beside CSV or JSON on stdout would corrupt it
    ids = (
        [_resolve(h, args.run, args, say)] if args.run is not None else sorted(runs, reverse=True)
    )  # newest first
    rows = []
    for run_id in ids:
        meta = runs[run_id]
        for r in h.results(run_id):
            rows.append(
                {
                    "run_id": run_id,
                    "started": meta["started"],
                    "git_commit": meta["git_commit"],
                    "git_dirty": meta["git_dirty"],
                    **{k: r.get(k) for k in _EXPORT_COLUMNS[4:-1]},
                    "bounds": r.get("bounds") or None,
                    "rule": rule_text(r),
                    # queries outside trec_eval's query set (queries="run"): not skipped
                    **{k: r[k] for k in ("queries", "queries_outside") if r.get("queries_outside")},
                }
            )
    if fmt == "json":
        text = (
            json.dumps(
                {"runs": [runs[i] for i in ids], "results": rows},
                indent=2,
                default=str,
                allow_nan=False,
            )
            + "\n"
        )
    else:
        buf = io.StringIO()
        writer = csv.DictWriter(
            buf, fieldnames=_EXPORT_COLUMNS, lineterminator="\n", extrasaction="ignore"
        )
        writer.writeheader()
        writer.writerows(rows)
        text = buf.getvalue()
    if args.output:
        _write(args.output, text)
        print(
            f"wrote {len(rows)} results of {len(ids)} run(s) to {args.output} ({fmt}, {ORDER})",
            file=out,
        )
    else:
        out.write(text)
    return 0


def _report_format(args) -> str:
    """``html`` or ``markdown``: ``--format`` when given, else from ``-o``'s extension
    (``.md`` / ``.markdown``: markdown), else html; a ``--format`` that contradicts the
    extension is a usage error (nothing is written)."""
    suffix = Path(args.output).suffix.lower() if args.output else ""
    implied = (
        "markdown"
        if suffix in (".md", ".markdown")
        else ("html" if suffix in (".html", ".htm") else None)
    )
    if args.format is not None and implied is not None and args.format != implied:
        raise _UsageError(
            f"--format {args.format} contradicts -o {args.output} (a {implied} file name); drop "
            "--format, or give a file name with the format's extension (.html, .md)."
        )
    return args.format or implied or "html"


def _cmd_plan(h: History, args, out) -> int:
    """Queries (or classes) needed to detect a drop, from a recorded run's gates."""
    run_id = _resolve(h, args.run, args, out)
    results = h.results(run_id)
    metric = _metric_name(
        h, args.metric, {r["metric"] for r in results}, f"no gate of that metric in run {run_id}"
    )
    plan = plan_queries(
        results,
        metric,
        args.drop,
        power=args.power,
        confidence=args.confidence,
        correlation=args.correlation,
        test=args.test,
    )
    print(f"run {run_id}: {plan}", file=out)
    return 0


def _cmd_report(h: History, args, out) -> int:
    fmt = _report_format(args)
    run_id = _resolve(h, args.run, args, out if fmt == "html" or args.output else sys.stderr)
    runs = h.runs()
    meta = next(r for r in runs if r["id"] == run_id)
    if fmt == "html":
        text = render_report(h.results(run_id), run=meta, history=h, figures=h.figures(run_id))
        output = args.output or "retrieval-checks-report.html"
    else:  # changes against the run recorded just before this one
        before = max((r for r in runs if r["id"] < run_id), key=lambda r: r["id"], default=None)
        previous = h.results(before["id"]) if before is not None else None
        label = f"run {before['id']}" if before is not None else ""
        text = render_markdown(
            h.results(run_id),
            run=meta,
            previous=previous,
            previous_label=label,
            absent=absent_text(before, label),
        )  # a partial run's missing gates are not new
        output = args.output
        if not output:  # a pull-request comment: printed, e.g. for gh pr comment --body-file -
            out.write(text)
            return 0
    _write(output, text)
    print(f"wrote {output}", file=out)
    return 0


#: What ``validate`` looks for in a directory: the plugin's default ``rc_suite_files`` and
#: the baselines files that pytest writes beside suites and test modules.
SUITE_PATTERNS = ("rc_*.yaml", "rc_*.yml")
_BASELINE_SUFFIXES = (".baselines.yaml", ".baselines.yml")
# directories pytest does not recurse into (its default norecursedirs), and hidden ones
_SKIP_DIRS = (
    "*.egg",
    ".*",
    "_darcs",
    "build",
    "CVS",
    "dist",
    "node_modules",
    "venv",
    "{arch}",
    "__pycache__",
)


def _file_kind(path: Path, patterns, explicit: bool) -> str | None:
    """``baselines``, ``suite`` or None: a baselines file by its name; a suite by the
    plugin's patterns in a directory, or any .yaml / .yml file named on the command line."""
    if path.name.endswith(_BASELINE_SUFFIXES):
        return "baselines"
    if path.suffix in (".yaml", ".yml") and (
        explicit or any(fnmatch.fnmatch(path.name, p) for p in patterns)
    ):
        return "suite"
    return None


def _walk(root: Path, patterns) -> list[tuple[Path, str]]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not any(fnmatch.fnmatch(d, p) for p in _SKIP_DIRS))
        for name in sorted(files):
            kind = _file_kind(Path(folder) / name, patterns, explicit=False)
            if kind is not None:
                found.append((Path(folder) / name, kind))
    return found


def _targets(paths, patterns) -> list[tuple[Path, str]]:
    """Every (file, kind) to validate; a missing path, a file that is neither a suite nor a
    baselines file, or a directory without either is a usage error (nothing is judged)."""
    out = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            found = _walk(path, patterns)
            if not found:
                raise _UsageError(
                    f"{text}: no suites ({', '.join(patterns)}) or baselines files (*.baselines.yaml) "
                    "in this directory or below it."
                )
            out.extend(found)
        elif path.is_file():
            kind = _file_kind(path, patterns, explicit=True)
            if kind is None:
                raise _UsageError(
                    f"{text}: not a YAML suite (.yaml, .yml) or a baselines file (*.baselines.yaml); "
                    "name a suite, a baselines file or a directory."
                )
            out.append((path, kind))
        else:
            raise _UsageError(f"{text}: no such file or directory.")
    return list(dict.fromkeys(out))


def _suite_errors(path: Path) -> list[str]:
    """The suite's errors as ``path:line: field: message``: every independent one, in file order."""
    try:
        suite, found = suite_errors(path)
        if found:
            return [_located(path, exc) for exc in found]
    except SuiteError as exc:
        return [_located(path, exc)]
    except Exception as exc:  # a bug of ours is still reported on this file, as the plugin does
        return [
            f"{path}:1: could not read the suite ({type(exc).__name__}: {exc}); please report this with the "
            "file."
        ]
    found = slice_column_errors(suite) + array_errors(suite)
    return [_located(path, exc) for exc in sorted(found, key=lambda e: e.line or 0)]


def _located(path: Path, exc: SuiteError) -> str:
    field = f"{exc.field}: " if exc.field else ""
    return f"{path}:{exc.line or 1}: {field}{exc.detail}"


def _record_lines(text: str) -> dict:
    """Record name -> (its line, {field: line}) from the YAML's node tree (empty when it
    cannot be composed: the reader's error then names the line)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError, ValueError):
        return {}
    lines = {}
    for key, value in root.value if isinstance(root, yaml.MappingNode) else ():
        fields = {}
        for k, _ in value.value if isinstance(value, yaml.MappingNode) else ():
            fields[str(k.value)] = k.start_mark.line + 1
        lines[str(key.value)] = (key.start_mark.line + 1, fields)
    return lines


def _baselines_errors(path: Path) -> list[str]:
    """Every malformed record of a baselines file as ``path:line: message`` (the line of
    the record's field when the reader names one), or the file's own error."""
    try:
        records = BaselineFile(path)
    except InputError as exc:
        message = str(exc)
        line = "1"
        if message.startswith(str(path)):
            rest = message[len(str(path)) :]
            head, sep, tail = rest.partition(": ")
            message = tail if sep else rest
            line = head.lstrip(":") or "1"
        return [f"{path}:{line}: {message}"]
    lines = _record_lines(path.read_text(encoding="utf-8"))
    errors = []
    for key in records.records:
        try:
            records.get(key)
        except InputError as exc:
            line, fields = lines.get(key, (1, {}))
            field = re.search(r"field '([^'.]+)", str(exc))
            line = fields.get(field.group(1), line) if field else line
            message = str(exc).removeprefix(f"{path}: ")
            errors.append(f"{path}:{line}: {message}")
    return errors


def _cmd_validate(args, out) -> int:
    targets = _targets(args.paths, tuple(args.suite_files or SUITE_PATTERNS))
    errors, bad = [], 0
    for path, kind in targets:
        found = _suite_errors(path) if kind == "suite" else _baselines_errors(path)
        errors.extend(found)
        bad += bool(found)
    for line in errors:
        print(line, file=out)
    n_suites = sum(1 for _, kind in targets if kind == "suite")
    summary = (
        f"{len(targets)} file(s) checked ({n_suites} suite(s), {len(targets) - n_suites} baselines file(s)): "
        f"{bad} invalid, {len(errors)} error(s)"
    )
    print(summary if errors else f"{summary}; all valid", file=out)
    return 1 if errors else 0


def _cmd_schema(args, out) -> int:
    text = json.dumps(suite_json_schema(), indent=2) + "\n"
    if args.output:
        _write(args.output, text)
        print(f"wrote the suite schema to {args.output}", file=out)
    else:
        out.write(text)
    return 0


def _write(path, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _UsageError(
            f"-o {path}: cannot write there ({exc.strerror or exc}); give a file path in an existing, "
            "writable directory."
        ) from None


def _closest(name: str, names) -> str:
    close = did_you_mean(name, sorted(n for n in names if n != name))
    return f" (did you mean {close!r}?)" if close else ""


class _UsageError(Exception):
    """A user's mistake found while running a command (exit 2)."""


def _positive_int(text: str) -> int:
    try:
        n = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, found {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer (1 or more), found {text!r}")
    return n


def _drop(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, found {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, found {text!r}")
    return v


def _confidence(text: str) -> float:
    """``--confidence``: the option table's rule (a number strictly between 0 and 1, with
    "did you mean 0.95" for a percentage), as argparse's type error."""
    if (
        not text.strip()
    ):  # parse_text reads an empty text as "the default"; a flag written empty is a slip
        raise argparse.ArgumentTypeError(
            "expected a number strictly between 0 and 1 (e.g. 0.95), found ''"
        )
    try:
        return float(parse_text("confidence", text))
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None


def _suite_commands(sub) -> None:
    """``validate`` and ``schema``: they read files, not the history database (no --db)."""
    s = sub.add_parser(
        "validate",
        parents=[],
        help="check YAML suites and baselines files without running a model; "
        "exit 1 when any is invalid",
        description="Check YAML suites (with the loader the pytest "
        "plugin uses: fields, types, options, metric names, references and that data files exist) "
        "and baselines files (every record), without running any model. Prints each error as "
        "path:line: message, then a summary line. Exit 0: all valid; 1: an error; 2: bad usage.",
    )
    s.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="a suite (.yaml/.yml), a baselines file (*.baselines.yaml) or a directory: every suite "
        f"matching --suite-files ({', '.join(SUITE_PATTERNS)}) and every baselines file in it and "
        "below it",
    )
    s.add_argument(
        "--suite-files",
        action="append",
        metavar="GLOB",
        help="a file-name pattern of suites inside directories (repeatable; default: the plugin's "
        f"rc_suite_files default, {' '.join(SUITE_PATTERNS)})",
    )
    s = sub.add_parser(
        "schema",
        parents=[],
        help="print the JSON Schema (draft 2020-12) of the suite format",
        description="Print the JSON Schema (draft 2020-12) of YAML suites, generated from the "
        "library's option table, metric templates, dataset types, model kinds and check fields "
        "(for editors and linters; load_suite also checks files, references and metric scales).",
    )
    s.add_argument(
        "-o", "--output", metavar="FILE", help="write the schema to FILE instead of printing it"
    )


_RUN_REF = (
    "an id, latest, -1, -2, ... (newest first), or a git commit of 4 to 40 hex digits (its latest clean "
    "run; see --allow-dirty)"
)
_DIRTY_HELP = (
    "let a git commit stand for its latest run even when that run was dirty (its working tree held "
    "uncommitted changes: maybe the very change under review); without it a commit's dirty runs are "
    "skipped, and said so"
)


def _history_commands(sub) -> None:  # long: every argument of the history commands, with its help
    """``runs``, ``show``, ``compare``, ``history`` and ``export``: they read the history database."""
    s = sub.add_parser(
        "runs",
        help=f"list recorded runs, {ORDER}",
        description=f"Recorded runs, {ORDER}: the "
        "commit (+dirty: uncommitted changes), branch, gates, failures, exit status, whether the run "
        "was full or partial (-k, -m, --lf, node ids, deselected tests) and the command line.",
    )
    s.add_argument("--limit", type=_positive_int, default=20, help="the newest N runs (default 20)")
    s.add_argument(
        "--commit", metavar="HEX", help="only runs of the commit starting with these hex digits"
    )
    s.add_argument("--branch", help="only runs on this git branch")
    s.add_argument(
        "--full-only",
        action="store_true",
        help="only full runs (not narrowed by -k, -m, --lf, node ids or deselection); runs recorded "
        "before the selection was stored are left out",
    )
    s = sub.add_parser(
        "show",
        help="the gates of one run",
        description="The gates of one run, in the order recorded.",
    )
    s.add_argument("run", nargs="?", default="latest", help=f"the run: {_RUN_REF}; default latest")
    s.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when any gate of the run failed (an xfail is an expected failure, not one) "
        "or the recorded session exited non-zero",
    )
    s.add_argument("--allow-dirty", action="store_true", help=_DIRTY_HELP)
    s = sub.add_parser(
        "compare",
        help="compare two runs gate by gate; exit 1 on a regression",
        description="Compare the gates of two runs (same test and metric). Exit 1 on a regression, a "
        "gate missing from the candidate, a gate the candidate run failed itself (or a non-zero exit "
        "status of its session), or (with --significant) a drop whose significance cannot be "
        "tested. Two names of the same run are an error (exit 2).",
    )
    s.add_argument("baseline", help=f"the reference run: {_RUN_REF}")
    s.add_argument(
        "candidate", nargs="?", default="latest", help=f"the run judged: {_RUN_REF}; default latest"
    )
    s.add_argument(
        "--max-drop", type=_drop, default=None, help="largest allowed absolute drop (default 0)"
    )
    s.add_argument(
        "--max-relative-drop",
        type=_drop,
        default=None,
        help="largest allowed drop / |baseline| (e.g. 0.02 for 2%%)",
    )
    s.add_argument(
        "--significant",
        action="store_true",
        help="fail only on drops significant at 1 - confidence (z test from the recorded intervals); a gate "
        "without an interval cannot be tested and is reported as UNTESTED",
    )
    s.add_argument(
        "--allow-untested",
        action="store_true",
        help="with --significant: do not fail on drops whose significance cannot be tested",
    )
    s.add_argument(
        "--correction",
        choices=("holm", "bh", "none"),
        default="none",
        help="with --significant: multiplicity correction over the compared gates' p-values: holm "
        "(family-wise error rate), bh (false discovery rate) or none (each at its own level; default)",
    )
    s.add_argument(
        "--confidence",
        type=_confidence,
        default=0.95,
        help="confidence of the intervals' test, strictly between 0 and 1 (default 0.95)",
    )
    s.add_argument(
        "--metric",
        action="append",
        help="only this metric (repeatable; aliases such as ndcg_cut@10 are accepted)",
    )
    s.add_argument(
        "--allow-missing",
        action="store_true",
        help="do not fail when gates of the baseline run are missing from the candidate run",
    )
    s.add_argument("--allow-dirty", action="store_true", help=_DIRTY_HELP)
    s = sub.add_parser(
        "history",
        help=f"one metric's values over past runs, {ORDER}",
        description=f"One metric's recorded values, {ORDER}, with each run's commit.",
    )
    s.add_argument(
        "metric",
        help="the metric: a recorded name or an alias of it (ndcg_cut@10 for ndcg@10, "
        "'map gap' for a gap gate)",
    )
    s.add_argument("--model", help="only values of this model")
    s.add_argument("--dataset", help="only values of this dataset")
    s.add_argument(
        "--test",
        help="only this test: its node id or the end of it (test_x, module.py::test_x, a "
        "suite's case name); a name matching several tests is an error listing them",
    )
    s.add_argument(
        "--limit",
        type=_positive_int,
        default=50,
        help="the newest N runs that recorded the metric (default 50; every value of those runs)",
    )
    s = sub.add_parser(
        "export",
        help="export results as CSV or JSON",
        description=f"Every gate of the recorded runs ({ORDER}) as CSV or JSON.",
    )
    s.add_argument("--run", default=None, help=f"one run: {_RUN_REF} (default: every run)")
    s.add_argument(
        "--format",
        choices=("csv", "json"),
        default=None,
        help="csv or json; by default taken from the -o extension (.csv, .json), else csv",
    )
    s.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write to FILE (its extension sets the format) instead of printing",
    )
    s.add_argument("--allow-dirty", action="store_true", help=_DIRTY_HELP)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="retrieval-checks",
        description="Recorded quality-gate runs: list, compare, "
        "export, report; the evaluation-set size a gate needs (plan); and YAML suites checked "
        "without running a model (validate, schema).",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    db_help = (
        f"the history database (default: {DEFAULT_DB} in the project root, found from the working directory "
        "upwards as pytest finds its rootdir: the first directory with pytest.ini, .pytest.ini, or a "
        "pyproject.toml / tox.ini / setup.cfg with a pytest section, else with pyproject.toml / setup.py / "
        "setup.cfg, else with .git)"
    )
    p.add_argument("--db", default=None, metavar="FILE", help=db_help)
    # --db is accepted after the command too; there it overrides the one given before
    db = argparse.ArgumentParser(add_help=False)
    db.add_argument("--db", dest="sub_db", default=None, metavar="FILE", help=db_help)
    sub = p.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        parser_class=lambda **kw: argparse.ArgumentParser(**{"parents": [db], **kw}),
    )
    _suite_commands(sub)
    _history_commands(sub)
    s = sub.add_parser(
        "report",
        help="write a run's HTML report, or its gate table as markdown (a pull-request comment)",
        description="The HTML report of a recorded run (figures and history included), or "
        "its gate table as markdown: failures first, the commit and branch, each value's change against "
        "its baseline or the run recorded before it.",
    )
    s.add_argument("run", nargs="?", default="latest", help=f"the run: {_RUN_REF}; default latest")
    s.add_argument(
        "--format",
        choices=("html", "markdown"),
        default=None,
        help="html (default) or markdown; -o FILE.md implies markdown",
    )
    s.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="FILE",
        help="where to write it (html default: retrieval-checks-report.html; markdown default: printed)",
    )
    s.add_argument("--allow-dirty", action="store_true", help=_DIRTY_HELP)
    _plan_command(sub)
    return p


def _probability(text: str) -> float:
    try:
        return check_power(float(text), "power")
    except (ValueError, InputError) as exc:
        raise argparse.ArgumentTypeError(
            str(exc).split(": ", 1)[-1]
            if isinstance(exc, InputError)
            else f"expected a number, found {text!r}"
        ) from None


def _correlation(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [-1, 1), found {text!r}") from None
    if not -1 <= v < 1:
        raise argparse.ArgumentTypeError(f"expected a number in [-1, 1), found {text!r}")
    return v


def _positive_drop(text: str) -> float:
    v = _drop(text)
    if v == 0:
        raise argparse.ArgumentTypeError(
            "expected a drop > 0 (no evaluation set detects a drop of 0)"
        )
    return v


def _plan_command(sub) -> None:
    s = sub.add_parser(
        "plan",
        help="queries (or classes) needed to detect a drop of a metric, from a recorded run",
        description="Plan an evaluation set's size (Sakai's topic-set-size design; Webber, Moffat and "
        "Zobel 2008): from a recorded run's gate of --metric, the queries (or classes) a one-sided "
        "paired t test at level 1 - confidence needs to detect a true drop of --drop with --power. "
        "The spread comes from the gate's own significance test when it had one, else from its "
        "interval and an assumed --correlation between two runs.",
    )
    s.add_argument(
        "run", nargs="?", default="latest", help=f"the pilot run: {_RUN_REF}; default latest"
    )
    s.add_argument("--metric", required=True, help="the metric, as recorded (ndcg@10, map, ...)")
    s.add_argument(
        "--drop",
        required=True,
        type=_positive_drop,
        help="the drop to detect, in the metric's unit",
    )
    s.add_argument("--power", type=_probability, default=0.8, help="the power wanted (default 0.8)")
    s.add_argument(
        "--confidence",
        type=_confidence,
        default=None,
        help="the gate's confidence (default: the run's, else 0.95); the test's level is 1 - confidence",
    )
    s.add_argument(
        "--correlation",
        type=_correlation,
        default=0.5,
        help="correlation of two runs' per-query values, when the spread comes from an interval (default 0.5)",
    )
    s.add_argument(
        "--test",
        default=None,
        help="a glob on the test's name, when several gates measure the metric",
    )
    s.add_argument("--allow-dirty", action="store_true", help=_DIRTY_HELP)


def _quiet_stdout(out) -> None:
    """After a broken pipe: point the process's stdout at /dev/null, so that Python's
    flush of it at exit does not report the same broken pipe again."""
    if out is not sys.stdout:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv=None, out=None) -> int:
    """Run one command; returns the exit code (0 success, 1 a regression, a failed
    gate under ``show --check`` or an invalid file under ``validate``, 2 a user's mistake:
    bad arguments, a missing or damaged database, an unknown run, an unwritable output, a
    path to validate that is missing or of an unknown kind; 141 when the reader of its
    output stopped reading, as ``| head`` does)."""
    out = out or sys.stdout
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage and the problem
        return 2 if exc.code not in (0, None) else 0
    if getattr(args, "sub_db", None) is not None:
        args.db = args.sub_db
    defaulted = args.db is None and args.command not in ("validate", "schema")
    if defaulted:
        args.db = str(default_history_path())
    commands = {
        "runs": _cmd_runs,
        "show": _cmd_show,
        "compare": _cmd_compare,
        "history": _cmd_history,
        "export": _cmd_export,
        "report": _cmd_report,
        "plan": _cmd_plan,
    }
    try:
        if args.command in ("validate", "schema"):  # files, not the history: no database is opened
            return (_cmd_validate if args.command == "validate" else _cmd_schema)(args, out)
        if defaulted and not Path(args.db).exists():
            raise _UsageError(
                f"no run history at {args.db} (the default: {DEFAULT_DB} in the project root "
                f"{project_root()}, found from {Path.cwd()}); run pytest in the project first, or "
                "give --db."
            )
        return commands[args.command](History(args.db), args, out)
    except (RetrievalChecksError, _UsageError) as exc:
        print(f"retrieval-checks: error: {exc}", file=sys.stderr)
    except BrokenPipeError:
        # the reader stopped reading (`... | head`): not the database's fault. Quiet, as
        # other Unix tools are, and 141 (128 + SIGPIPE), their status: a pipeline under
        # `set -o pipefail` must not take a cut-short `compare` for a clean one
        _quiet_stdout(out)
        return 141
    except sqlite3.Error as exc:
        print(
            f"retrieval-checks: error: {args.db}: the history database cannot be read ({exc}); point --db at the "
            "database pytest writes.",
            file=sys.stderr,
        )
    except OSError as exc:
        print(
            f"retrieval-checks: error: {exc.filename or args.db}: {exc.strerror or exc}.",
            file=sys.stderr,
        )
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
