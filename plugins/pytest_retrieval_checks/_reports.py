"""What the plugin reports at the end of a session (on the controller under xdist):
the terminal table, the JSON file, the run history, baseline files and the HTML report,
and the start-up checks of the paths they are written to."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from retrieval_checks.gates import rule_text, write_records
from retrieval_checks.tracking import History, render_report


def _queries(o: dict) -> str:
    used, skipped = o.get("n_used"), o.get("n_skipped")
    if used is None and skipped is None:
        return ""
    return f"{'?' if used is None else used} / {'?' if skipped is None else skipped}"


def _num(v, digits: int = 4) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return f"{v:.{digits}f}"
    return "" if v is None else str(v)


def _test_name(o: dict) -> str:
    parts = str(o.get("test", "")).split("::")
    return "::".join((parts[0].rsplit("/", 1)[-1], *parts[1:])) if parts[0].endswith((".yaml", ".yml")) else parts[-1]


def summary_lines(outcomes: list[dict]) -> list[str]:
    """The gate table: value, interval, the rule with every bound, the queries used and
    skipped (``n_used / n_skipped``) and the verdict."""
    rows = [("test", "metric", "value", "interval", "rule", "n_used / n_skipped", "result")]
    for o in outcomes:
        interval = "" if o.get("low") is None else f"[{_num(o['low'])}, {_num(o.get('high'))}]"
        verdict = "PASS" if o.get("passed") else ("XFAIL" if o.get("xfail") else "FAIL")
        rows.append((_test_name(o), str(o.get("metric")), _num(o.get("value")), interval, rule_text(o),
                     _queries(o), verdict))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def gate_warnings(o: dict) -> list[str]:
    """A gate's warnings; skipped queries are always among them (the value is over the
    queries used only)."""
    out = [str(w) for w in (o.get("warnings") or [])]
    skipped, used = o.get("n_skipped"), o.get("n_used")
    if isinstance(skipped, int) and skipped > 0 and not any("skip" in w for w in out):
        total = f" of {skipped + used}" if isinstance(used, int) else ""
        out.append(f"{skipped}{total} queries skipped (no relevant gallery item): the value is over the "
                   f"{used if used is not None else 'remaining'} queries used; set max_skipped (--rc-max-skipped) "
                   "to fail on this")
    return out


def warning_lines(outcomes: list[dict]) -> list[str]:
    return [f"warning: {_test_name(o)} {o.get('metric')}: {w}" for o in outcomes for w in gate_warnings(o)]


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


def write_json(path, outcomes: list[dict], exitstatus: int, run: dict | None) -> None:
    out = {"gates": outcomes, "exitstatus": int(exitstatus), "run": run}
    _write_text(Path(path), strict_json(out, indent=2) + "\n")


def record_history(path, metadata: dict, outcomes: list[dict], exitstatus: int, figures=None) -> int:
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
            return (f"{existing} is a file, so {path} cannot be created under it; give a path in a directory "
                    "(or remove the file)")
        if existing != path.parent:
            root = Path(rootdir).resolve()
            parent = path.parent.resolve()
            if parent != root and root not in parent.parents:
                return (f"the directory {path.parent} does not exist and is outside the rootdir {root}; create it "
                        f"first (mkdir -p {path.parent}) or give a path inside the rootdir")
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
