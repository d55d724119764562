"""GitHub Actions: the gate table in the job's step summary and one error annotation
per failed gate, when the session runs under Actions (``GITHUB_ACTIONS=true``).

The step summary is the markdown table of :func:`retrieval_checks.tracking.render_markdown`
appended to the file ``$GITHUB_STEP_SUMMARY`` names, with each value's change against its
baseline, or against the previous run of the history when the session recorded one (a
gate that run lacks is ``new`` only when it was a full run; after a partial run the cell
says the run was partial and not comparable).

An annotation is a workflow command printed on its own line of standard output::

    ::error file=suites/rc_quality.yaml,line=12,title=retrieval-checks: map gate failed::map = 0.4123 ...

``file`` is relative to the repository root (``git rev-parse --show-toplevel``, else
``$GITHUB_WORKSPACE``, else the rootdir) and ``line`` is the line of the suite's check
(the YAML line of the ``- metric:`` entry), or for a gate in a Python test the test
file's line named last in the failure's traceback (the assertion), else none. Data is
escaped as GitHub's toolkit does (``%``, ``\\r``, ``\\n``), properties also ``:`` and ``,``.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from retrieval_checks.gates import rule_text, verdict
from retrieval_checks.tracking import History, absent_text, render_markdown


def enabled(environ=None) -> bool:
    """Whether this session runs under GitHub Actions (``GITHUB_ACTIONS=true``)."""
    return (os.environ if environ is None else environ).get("GITHUB_ACTIONS") == "true"


def escape_data(text) -> str:
    """A workflow command's message, escaped as ``@actions/core`` does."""
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text) -> str:
    """A workflow command's property value (``file=``, ``title=``): data escaping plus
    ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def repository_root(rootdir: Path, environ=None) -> Path:
    """The repository's top directory (annotations' paths are relative to it)."""
    environ = os.environ if environ is None else environ
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=rootdir,
            capture_output=True,
            text=True,
            timeout=10,
        )
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    workspace = environ.get("GITHUB_WORKSPACE")
    return Path(workspace) if workspace else Path(rootdir)


def _relative(path: Path, root: Path) -> str:
    path, root = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    try:
        return path.relative_to(root).as_posix()
    except ValueError:  # outside the repository: the absolute path (GitHub then shows it unlinked)
        return path.as_posix()


_TRACEBACK_LINE = re.compile(r"^(?P<path>[^\s:][^:\n]*\.py):(?P<line>\d+): ", re.MULTILINE)


def _python_line(message: str, test_file: str) -> int | None:
    """The last line of ``test_file`` the failure's traceback names (``path:line: ...``)."""
    name = test_file.rsplit("/", 1)[-1]
    found = None
    for m in _TRACEBACK_LINE.finditer(message or ""):
        if m.group("path").replace("\\", "/").rsplit("/", 1)[-1] == name:
            found = int(m.group("line"))
    return found


def _where(o: dict, rootdir: Path, repo: Path) -> tuple[str, int | None]:
    test_file = str(o.get("test") or "").split("::", 1)[0]
    file = _relative(Path(rootdir) / test_file, repo) if test_file else ""
    line = o.get("line")
    if not (isinstance(line, int) and not isinstance(line, bool) and line > 0):
        line = (
            _python_line(str(o.get("message") or ""), test_file)
            if test_file.endswith(".py")
            else None
        )
    return file, line


def _num(x) -> str:
    return f"{x:.4f}" if isinstance(x, float) else str(x)


def _message(o: dict) -> str:
    """The annotation's text: the value with its interval, the rule, model and dataset,
    the baseline, and the first lines of the failure's message."""
    value = o.get("value")
    text = f"{o.get('metric')} = {'no value' if value is None else _num(value)}"
    if o.get("low") is not None and o.get("high") is not None:
        text += f" [{_num(o['low'])}, {_num(o['high'])}]"
    try:
        rule = rule_text(o)
    except Exception:
        rule = ""
    if rule:
        text += f"; rule: {rule}"
    if o.get("baseline") is not None:
        text += f"; baseline {_num(o['baseline'])}"
    if o.get("model") or o.get("dataset"):
        text += f"; model {o.get('model') or '?'} on dataset {o.get('dataset') or '?'}"
    message = str(o.get("message") or "").strip().splitlines()
    raised = [
        line[1:].strip() for line in message if line.startswith("E ")
    ]  # pytest's "E   " lines: the error
    if raised or message:
        text += "\n" + "\n".join((raised or message)[:8])
    return text


def annotations(outcomes: list[dict], rootdir: Path, repo: Path) -> list[str]:
    """One ``::error`` workflow command per failed gate (expected failures excluded)."""
    lines = []
    for o in outcomes:
        if verdict(o) != "FAIL":
            continue
        file, line = _where(o, rootdir, repo)
        check = str(o.get("test") or "").split("::", 1)[-1]
        props = [f"file={escape_property(file)}"] if file else []
        if line is not None:
            props.append(f"line={line}")
        props.append(
            "title=" + escape_property(f"retrieval-checks: {o.get('metric')} gate failed ({check})")
        )
        lines.append(f"::error {','.join(props)}::{escape_data(_message(o))}")
    return lines


def _previous(history_path, run: dict | None) -> tuple[list[dict] | None, str, str]:
    """The gate records of the run recorded before this session's, its name, and the
    change to show for a gate it lacks: ``new`` after a full run; after a partial run
    (``-k``, ``-m``, ``--lf``, deselection, collection errors, stopped early) or one
    whose selection was not recorded, a gate it lacks may simply not have been run
    then, so the cell says that instead of calling the gate new."""
    if history_path is None or not run or run.get("id") is None:
        return None, "", "new"
    h = History(history_path)
    before = max((r for r in h.runs() if r["id"] < run["id"]), key=lambda r: r["id"], default=None)
    if before is None:
        return None, "", "new"
    label = f"run {before['id']}"
    return h.results(before["id"]), label, absent_text(before, label)


def publish(
    config, outcomes: list[dict], run: dict | None, history_path, notes: list[str], environ=None
) -> None:
    """Under GitHub Actions: append the gate table to ``$GITHUB_STEP_SUMMARY`` and print
    an annotation per failed gate. Problems are warnings in ``notes``: the session's
    gates, not its CI decorations, decide its outcome."""
    environ = os.environ if environ is None else environ
    if not enabled(environ) or not outcomes:
        return
    rootdir = Path(config.rootpath)
    meta = dict(run or {})
    if not (
        meta.get("git_branch") or meta.get("branch")
    ):  # a pull request's branch, else the pushed ref
        meta["branch"] = environ.get("GITHUB_HEAD_REF") or environ.get("GITHUB_REF_NAME") or None
    if not meta.get(
        "git_commit"
    ):  # no history recorded this session: the commit Actions checked out
        meta["git_commit"] = environ.get("GITHUB_SHA") or None
    try:
        previous, label, absent = _previous(history_path, run)
    except Exception as exc:
        previous, label, absent = None, "", "new"
        notes.append(
            f"warning: the step summary shows no change against the previous run: the history could not "
            f"be read ({type(exc).__name__}: {exc})"
        )
    summary = environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(
                    render_markdown(
                        outcomes, run=meta, previous=previous, previous_label=label, absent=absent
                    )
                    + "\n"
                )
            notes.append(f"gate table appended to the GitHub step summary {summary}")
        except OSError as exc:
            notes.append(
                f"warning: could not append the gate table to the GitHub step summary {summary} "
                f"({exc.strerror or exc})"
            )
    else:
        notes.append(
            "warning: GITHUB_ACTIONS=true but GITHUB_STEP_SUMMARY is not set: no step summary written"
        )
    lines = annotations(outcomes, rootdir, repository_root(rootdir, environ))
    writer = config.pluginmanager.get_plugin("terminalreporter")
    if (
        lines
        and writer is not None
        and getattr(getattr(writer, "_tw", None), "width_of_current_line", 1)
    ):
        writer.write(
            "\n"
        )  # end a progress line (xdist's "F.F  [100%]" has none): commands start a line
    for line in lines:
        if writer is not None:
            writer.write_line(line)  # on a line of its own, as GitHub reads workflow commands
        else:
            print(line, flush=True)
