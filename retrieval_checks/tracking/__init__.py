"""Regression tracking beyond one session: the SQLite run history, the HTML and markdown
reports and the ``retrieval-checks`` command line."""

from ._cli import main
from ._history import History, default_history_path, run_metadata
from ._markdown import absent_text, render_markdown
from ._report import render_report

__all__ = [
    "History",
    "run_metadata",
    "default_history_path",
    "render_report",
    "render_markdown",
    "absent_text",
    "main",
]
