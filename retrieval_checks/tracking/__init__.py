"""Regression tracking beyond one session: the SQLite run history, the HTML and markdown
reports and the ``retrieval-checks`` command line."""

from ._cli import main
from ._history import History, run_metadata
from ._markdown import render_markdown
from ._report import render_report

__all__ = ["History", "run_metadata", "render_report", "render_markdown", "main"]
