"""Which tests a session ran: a full run, or a partial one (``-k``, ``-m``, ``--lf``,
node ids, deselection, collection errors, a run stopped early), recorded with the run
in the history; and ``--rc-prune-baselines``, which only a full run may do.

A record of a baselines file is kept while its check exists: a YAML suite's record is
named after the case (the item's name), a Python test's after the test
(``<test name>::<metric>[::<key>]``, see ``rc_baseline``), and a per-slice baseline's
after either, ``<name> slice=<slice>``. Only the baselines files
beside the suites and test modules the session collected are pruned; the files of
modules that were not collected are never touched. Pruning is refused under
pytest-xdist and when a suite could not be loaded (a collection error makes the run
partial).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from retrieval_checks.gates import BaselineFile, baseline_path, slice_key

_SHOWN_IDS = 5


def _last_failed(config, collected: bool) -> bool:
    """Whether ``--lf`` narrows the run. Before collection: whether failures are
    recorded at all; after it: whether it deselected tests or skipped files (it runs
    everything when none of the recorded failures is among the tests)."""
    if not getattr(config.option, "lf", False):
        return False
    plugin = config.pluginmanager.get_plugin("lfplugin")
    if not collected or not hasattr(
        plugin, "_previously_failed_count"
    ):  # (pytest's private counts, else unknown)
        return bool(getattr(plugin, "lastfailed", True))
    return bool(plugin._previously_failed_count or getattr(plugin, "_skipped_files", 0))


def requested_filters(config, collected: bool = False) -> list[str]:
    """The command-line options that narrow a run, as they were written (``collected``:
    judged after collection, when --lf is known to have narrowed it or not)."""
    opt = config.option
    parts = []
    if getattr(opt, "keyword", ""):
        parts.append(f"-k {shlex.quote(opt.keyword)}")
    if getattr(opt, "markexpr", ""):
        parts.append(f"-m {shlex.quote(opt.markexpr)}")
    if _last_failed(config, collected):
        parts.append("--lf")
    if getattr(opt, "stepwise", False) or getattr(opt, "stepwise_skip", False):
        parts.append("--sw")
    deselect = getattr(opt, "deselect", None) or []
    if deselect:
        parts.append(f"--deselect {len(deselect)} node id{'s' if len(deselect) != 1 else ''}")
    ids = [a for a in config.args if "::" in str(a)]
    if ids:
        more = f" and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else ""
        parts.append(f"node ids {' '.join(map(str, ids[:_SHOWN_IDS]))}{more}")
    return parts


def selection(config, session) -> str:
    """``""`` for a full run, else what made it partial, e.g. ``-k 'map'; 3 deselected``."""
    parts = requested_filters(config, collected=True)
    deselected = getattr(config, "_rc_deselected", 0)
    if deselected:
        parts.append(f"{deselected} deselected")
    errors = getattr(config, "_rc_collect_errors", 0)
    if errors:
        parts.append(f"{errors} collection error{'s' if errors != 1 else ''}")
    if getattr(session, "shouldfail", False) or getattr(session, "shouldstop", False):
        parts.append("stopped early")
    return "; ".join(parts)


def collected(session) -> dict[Path, set[str]]:
    """Baselines file -> the names of the checks collected beside it (YAML cases and
    Python tests), from the session's items."""
    out: dict[Path, set[str]] = {}
    for item in getattr(session, "items", None) or []:
        out.setdefault(baseline_path(Path(item.path)), set()).add(item.name)
    return out


def prune_refusal(config) -> str | None:
    """Why ``--rc-prune-baselines`` cannot run in this session, known before it starts
    (None when it can): a filter on the command line, or pytest-xdist (whose
    controller does not see the collected items)."""
    parts = requested_filters(config)
    if parts:
        return f"it needs a full run, and {'; '.join(parts)} narrow this one"
    if getattr(config.option, "numprocesses", None) or getattr(config.option, "dist", "no") not in (
        "no",
        None,
    ):
        return "it needs the collected items, which pytest-xdist's controller does not see: run it without -n"
    return None


def _exists(names: set[str]):
    # a check's records: its name (a YAML case), <test>::<metric>[::<key>] (a Python test),
    # and per-slice baselines <name> slice=<slice> (slice_key) of either
    def check(key: str) -> bool:
        return key in names or any(
            key.startswith(f"{n}::") or key.startswith(slice_key(n, "")) for n in names
        )

    return check


def prune(config, session) -> list[str]:
    """Remove the records of checks that no longer exist; returns one note per file
    pruned, naming the records removed. A partial run raises RuntimeError (nothing is
    removed)."""
    why = selection(config, session)
    if why:
        raise RuntimeError(
            f"--rc-prune-baselines needs a full run, and this one was partial ({why}); nothing was "
            "pruned: run the whole suite without filters to prune"
        )
    notes = []
    for path, names in sorted(collected(session).items()):
        if not path.is_file():
            continue
        removed = BaselineFile(path).prune(_exists(names))
        if removed:
            shown = ", ".join(repr(k) for k in removed)
            notes.append(
                f"pruned {len(removed)} baseline record{'s' if len(removed) != 1 else ''} of checks that no "
                f"longer exist from {path}: {shown}"
            )
    return notes
