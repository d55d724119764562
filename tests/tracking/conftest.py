"""Fixtures of the tracking tests.

``db``: a history of one run (exit status 1) with two gates: t.py::test_a passed with
both bounds and 10 skipped queries (shared_setup.HISTORY_GATE), t.py::test_b failed.
Used by test_history.py, test_cli.py and test_html_report.py; test_cli_history.py and
test_cli_compare_runs.py define a ``db`` of their own (several runs), which overrides
this one in those files."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_setup import HISTORY_GATE as GATE
from shared_setup import HISTORY_META as META

from retrieval_checks.tracking import History


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "h.sqlite"
    History(path).record(
        META,
        [
            GATE,
            {
                **GATE,
                "test": "t.py::test_b",
                "metric": "hit_rate@1",
                "value": 0.4,
                "passed": False,
                "bounds": {},
                "comparison": ">=",
                "n_skipped": 0,
            },
        ],
        exitstatus=1,
    )
    return path
