"""What the plugin reports at the end of a session (on the controller under xdist):
the terminal table, the JSON file, the run history, baseline files and the HTML report,
and the start-up checks of the paths they are written to."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from retrieval_checks.gates import rule_text, tally, verdict, write_records
from retrieval_checks.tracking import History, render_report


def _queries(o: dict) -> str:
    used, skipped = o.get("n_used"), o.get("n_skipped")
    if used is None and skipped is None:
        return ""
    return f"{'?' if used is None else used} / {'?' if skipped is None else skipped}" + _outside(o)


def _outside(o: dict) -> str:
    """`` (+2 outside queries='run')`` for a gate whose queries outside trec_eval's query
    set were left out (not skipped), else ""."""
    n = o.get("queries_outside")
    return f" (+{n} outside queries={o.get('queries')!r})" if n else ""


def _num(v, digits: int = 4) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return f"{v:.{digits}f}"
    return "" if v is None else str(v)


def _test_name(o: dict) -> str:
    parts = str(o.get("test", "")).split("::")
    return (
        "::".join((parts[0].rsplit("/", 1)[-1], *parts[1:]))
        if parts[0].endswith((".yaml", ".yml"))
        else parts[-1]
    )


#: What the terminal summary shows: every gate, the failed ones, or nothing but errors.
SUMMARY_MODES = ("full", "failed", "none")


def plural(n: int, noun: str) -> str:
    """``1 gate``, ``2 gates``, ``0 gates``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def summary_mode(verbosity: int, option: str | None) -> str:
    """``--rc-summary`` (ini ``rc_summary``) when set, else from pytest's verbosity:
    ``full``, ``failed`` under ``-q``, ``none`` under ``-qq``. A value that is not one of
    :data:`SUMMARY_MODES` is a ValueError naming them."""
    if option is not None and str(option).strip():
        mode = str(option).strip().lower()
        if mode not in SUMMARY_MODES:
            raise ValueError(
                f"{option!r} is not a summary mode; use one of {', '.join(SUMMARY_MODES)}"
            )
        return mode
    return "full" if verbosity >= 0 else ("failed" if verbosity == -1 else "none")


def sorted_outcomes(outcomes: list[dict], order: dict | None = None) -> list[dict]:
    """Gates in the order of their tests' collection (``order``: node id -> position;
    tests it lacks after those, by node id), each test's gates in the order they ran:
    the same order whatever order pytest-xdist's workers finished in."""
    order = order or {}
    last = len(order)

    def key(pair):
        i, o = pair
        test = str(o.get("test", ""))
        return order.get(test, last), test, i

    return [o for _, o in sorted(enumerate(outcomes), key=key)]


def count_line(outcomes: list[dict]) -> str:
    """``3 gates: 2 passed, 1 failed`` (and xfailed when any)."""
    counted = tally(outcomes)
    passed, failed, xfailed = counted["PASS"], counted["FAIL"], counted["XFAIL"]
    parts = [f"{passed} passed", f"{failed} failed"] + ([f"{xfailed} xfailed"] if xfailed else [])
    return f"{plural(len(outcomes), 'gate')}: {', '.join(parts)}"


def summary_lines(
    outcomes: list[dict], width: int | None = None, mode: str = "full", order: dict | None = None
) -> list[str]:
    """The gate table: value, interval, the rule with every bound, the queries used and
    skipped (``n_used / n_skipped``) and the verdict; in collection order (``order``,
    see :func:`sorted_outcomes`: stable under xdist), headed by the count of gates.
    ``mode``: ``full`` (every gate), ``failed`` (the count and the failed gates),
    ``none`` (nothing). ``width``: the terminal's; no line is longer (the rule and the
    queries move to a line below each gate, then each gate gets a block of wrapped
    lines; test names are wrapped, never cut)."""
    if mode not in SUMMARY_MODES:
        raise ValueError(f"mode={mode!r}: use one of {', '.join(SUMMARY_MODES)}")
    if mode == "none" or not outcomes:
        return []
    outcomes = sorted_outcomes(outcomes, order)
    shown = outcomes if mode == "full" else [o for o in outcomes if not o.get("passed")]
    noun = "failed or xfailed gate" if any(o.get("xfail") for o in shown) else "failed gate"
    head = count_line(outcomes) + ("" if mode == "full" else f"; {plural(len(shown), noun)} shown")
    rows = [("test", "metric", "value", "interval", "rule", "n_used / n_skipped", "result")]
    for o in shown:
        interval = "" if o.get("low") is None else f"[{_num(o['low'])}, {_num(o.get('high'))}]"
        result = verdict(o)
        rows.append(
            (
                _test_name(o),
                str(o.get("metric")),
                _num(o.get("value")),
                interval,
                rule_text(o),
                _queries(o),
                result,
            )
        )
    lines = wrapped(head, width) + (_layout(rows, width) if len(rows) > 1 else [])
    return [line if width is None else _cut_line(line, width) for line in lines]


def _columns(rows: list[tuple], width: int | None) -> list[str] | None:
    """``rows`` as aligned columns, or None when they do not fit in ``width``. A column
    no gate has a value in (no interval, no query counts) is left out."""
    keep = [0, *(i for i in range(1, len(rows[0])) if any(r[i] for r in rows[1:]))]
    rows = [tuple(r[i] for i in keep) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    if width is not None and sum(widths) + 2 * (len(widths) - 1) > width:
        return None
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _layout(rows: list[tuple], width: int | None) -> list[str]:
    """The whole table when it fits in ``width``; else test, metric, value, interval and
    verdict as columns, each gate's rule and queries on an indented line below; else
    one block per gate: the verdict and the test, then its fields, wrapped (test names
    are never cut)."""
    rows = [tuple(str(c) for c in r) for r in rows]
    full = _columns(rows, width)
    if full is not None:
        return full
    short = _columns([(t, m, v, iv, res) for t, m, v, iv, _, _, res in rows], width)
    if short is None:
        return _blocks(rows[1:], width)
    out = [short[0]]
    for line, (_, _, _, _, rule, queries, _) in zip(short[1:], rows[1:]):
        out.append(line)
        detail = "; ".join(
            x
            for x in (
                f"rule {rule}" if rule else "",
                f"n_used / n_skipped {queries}" if queries else "",
            )
            if x
        )
        out.extend(wrapped("    " + detail, width) if detail else [])
    return out


def _blocks(rows: list[tuple], width: int) -> list[str]:
    import textwrap

    out = []
    for test, metric, value, interval, rule, queries, result in rows:
        out.extend(
            textwrap.wrap(
                f"{result}  {test}",
                width=max(width, 8),
                subsequent_indent="      ",
                break_long_words=True,
                break_on_hyphens=False,
            )
        )
        fields = "  ".join(
            x
            for x in (
                metric,
                f"value {value}" if value else "",
                interval,
                rule,
                f"n_used / n_skipped {queries}" if queries else "",
            )
            if x
        )
        out.extend(
            textwrap.wrap(
                fields,
                width=max(width, 8),
                initial_indent="    ",
                subsequent_indent="      ",
                break_long_words=True,
            )
            or []
        )
    return out


def wrapped(text: str, width: int | None) -> list[str]:
    """``text`` wrapped to ``width`` (continuation lines indented), or as it is."""
    import textwrap

    if width is None or len(text) <= width:
        return [text]
    return textwrap.wrap(
        text, width=max(width, 8), subsequent_indent="  ", break_long_words=True
    ) or [text]


def _cut_line(line: str, width: int) -> str:
    return line if len(line) <= width else line[: max(width - 3, 0)] + "..."[:width]


def gate_warnings(o: dict) -> list[str]:
    """A gate's warnings; skipped queries are always among them (the value is over the
    queries used only)."""
    out = [str(w) for w in (o.get("warnings") or [])]
    skipped, used = o.get("n_skipped"), o.get("n_used")
    if isinstance(skipped, int) and skipped > 0 and not any("skip" in w for w in out):
        total = f" of {skipped + used}" if isinstance(used, int) else ""
        out.append(
            f"{skipped}{total} queries skipped (no relevant gallery item): the value is over the "
            f"{used if used is not None else 'remaining'} queries used; set max_skipped (--rc-max-skipped) "
            "to fail on this"
        )
    return out


def warning_lines(
    outcomes: list[dict], width: int | None = None, order: dict | None = None
) -> list[str]:
    """Every gate's warnings, in the table's order, each wrapped to ``width`` when given."""
    import textwrap

    lines = [
        f"warning: {_test_name(o)} {o.get('metric')}: {w}"
        for o in sorted_outcomes(outcomes, order)
        for w in gate_warnings(o)
    ]
    if width is None:
        return lines
    return [
        part
        for line in lines
        for part in textwrap.wrap(
            line, width=max(width, 8), subsequent_indent="  ", break_long_words=True
        )
    ]


def junit_properties(record: dict) -> list[tuple[str, object]]:
    """The JUnit properties of one gate: its value, and the queries used and skipped and
    its rule when known."""
    metric = record.get("metric")
    props = [(f"rc:{metric}", record.get("value"))]
    for key in ("n_used", "n_skipped"):
        if record.get(key) is not None:
            props.append((f"rc:{metric}:{key}", record[key]))
    rule = rule_text(record)
    if rule:
        props.append((f"rc:{metric}:rule", rule))
    # a significance-gated gate: its raw p-value and power; a deferred check's test is held until
    # its family is decided, and _family.py then replaces "deferred to" by the decision and adds
    # rc:<metric>:p_adjusted (the other members' adjusted p-values are in the JSON and history)
    for key, name in (("p_raw", "p"), ("mdd", "mdd"), ("power", "power")):
        if record.get(key) is not None:
            props.append((f"rc:{metric}:{name}", record[key]))
    if record.get("decision") == "deferred":
        props.append((f"rc:{metric}:decision", f"deferred to {record.get('correction')}"))
    return props


def _clean(v):
    """JSON-ready: NaN and infinities become None, numpy scalars Python numbers, anything
    else unknown its text."""
    if v is None or isinstance(v, (bool, str, int)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set)):
        return [_clean(x) for x in v]
    if hasattr(v, "item") and getattr(v, "ndim", 1) == 0:  # numpy scalars
        return _clean(v.item())
    if hasattr(v, "tolist"):
        return _clean(v.tolist())
    return str(v)


def strict_json(obj, **kwargs) -> str:
    """Strict JSON (RFC 8259): no NaN, Infinity or -Infinity tokens."""
    return json.dumps(_clean(obj), allow_nan=False, **kwargs)


def _write_text(path: Path, text: str) -> None:
    """Write the whole file or nothing (a temporary file beside it, then a rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)  # inside the rootdir only: checked at start-up
    try:
        mode = path.stat().st_mode & 0o7777  # an existing file keeps its mode
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json(
    path, outcomes: list[dict], exitstatus: int, run: dict | None, families=None
) -> None:
    out = {"gates": outcomes, "exitstatus": int(exitstatus), "run": run}
    if families:  # each family of significance-gated checks: its correction, size, level, rate
        out["families"] = [
            {
                **{k: v for k, v in f.items() if k != "failed"},
                "failed": [r.get("test") for r in f["failed"]],
            }
            for f in families
        ]
    _write_text(Path(path), strict_json(out, indent=2) + "\n")


def record_history(
    path, metadata: dict, outcomes: list[dict], exitstatus: int, figures=None
) -> int:
    return History(path).record(metadata, outcomes, exitstatus=int(exitstatus), figures=figures)


def flush_baselines(entries: list) -> list[str]:
    """Write queued baseline records ((path, key, record) triples from every worker)."""
    return write_records(entries)


def write_html(path, outcomes: list[dict], run: dict, history_path, figures: list[dict]) -> None:
    history = History(history_path) if history_path is not None else None
    html = render_report(outcomes, run=run, history=history, figures=figures)
    _write_text(Path(path), html)


def _first_existing(path: Path) -> Path:
    p = path
    while not (p.exists() or p.is_symlink()) and p.parent != p:
        p = p.parent
    return p


def _can_write_in(directory: Path) -> str | None:
    try:
        fd, tmp = tempfile.mkstemp(prefix=".rc-write-check.", dir=directory)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        return f"the directory {directory} is not writable ({exc.strerror or exc})"
    return None


def output_problem(path: Path, rootdir: Path, suggested: str) -> str | None:
    """Why a report, history or baseline file cannot be written at ``path`` (None when
    it can): a directory, a path under a regular file, an unwritable directory, or a
    missing directory outside the rootdir (which is never created silently)."""
    try:
        if path.is_dir():
            return f"{path} is a directory; give a file path, such as {path / suggested}"
        if path.exists() and not path.is_file():
            return f"{path} exists and is not a regular file; give a file path"
        if path.is_symlink() and not path.exists():
            return f"{path} is a dangling symbolic link; remove it or give another path"
        if path.exists() and not os.access(path, os.W_OK):
            return f"{path} is not writable; make it writable or give another path"
        existing = _first_existing(path.parent)
        if not existing.is_dir():
            return (
                f"{existing} is a file, so {path} cannot be created under it; give a path in a directory "
                "(or remove the file)"
            )
        if existing != path.parent:
            root = Path(rootdir).resolve()
            parent = path.parent.resolve()
            if parent != root and root not in parent.parents:
                return (
                    f"the directory {path.parent} does not exist and is outside the rootdir {root}; create it "
                    f"first (mkdir -p {path.parent}) or give a path inside the rootdir"
                )
        return _can_write_in(existing)
    except OSError as exc:  # a symlink loop, a name too long, ...
        return f"{path} cannot be used ({exc.strerror or exc}); give another path"


def cache_problem(directory: Path) -> str | None:
    """Why the embedding cache cannot live in ``directory`` (None when it can; a missing
    directory is created)."""
    try:
        if directory.exists() and not directory.is_dir():
            return f"{directory} is a file, not a directory"
        existing = _first_existing(directory)
        if not existing.is_dir():
            return f"{directory} cannot be created: {existing} is a file"
        directory.mkdir(parents=True, exist_ok=True)
        return _can_write_in(directory)
    except OSError as exc:
        return f"{directory} cannot be used ({exc.strerror or exc})"
