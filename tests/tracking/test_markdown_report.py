"""The markdown gate table (pull-request comments, the GitHub step summary) line by
line, its escaping against a cell splitter that follows GFM's rule (a ``|`` not
preceded by a backslash ends a cell), and ``retrieval-checks report --format markdown``
on a recorded run."""

from __future__ import annotations

import re

import pytest

from retrieval_checks.tracking import History, main, render_markdown

GATES = [
    {
        "test": "suites/rc_quality.yaml::map_at_least[model-set]",
        "metric": "map",
        "value": 0.61234,
        "low": 0.58,
        "high": 0.64,
        "on": "value",
        "comparison": ">=",
        "threshold": 0.5,
        "bounds": {"at_least": 0.5},
        "passed": True,
    },
    {
        "test": "tests/test_model.py::test_recall",
        "metric": "hit_rate@1",
        "value": 0.4,
        "low": 0.35,
        "high": 0.45,
        "on": "interval",
        "comparison": ">=",
        "threshold": 0.42,
        "bounds": {"at_least": 0.42},
        "passed": False,
    },
    {
        "test": "suites/rc_quality.yaml::map_vs_baseline[model-set]",
        "metric": "map",
        "value": 0.6,
        "passed": False,
        "on": "baseline",
        "comparison": ">=",
        "threshold": 0.61,
        "baseline": 0.62,
        "bounds": {"max_drop": 0.01},
    },
    {
        "test": "suites/rc_quality.yaml::broken[model-set]",
        "metric": "mrr",
        "value": None,
        "passed": False,
        "gate": "error",
        "on": "error",
        "comparison": "",
        "threshold": None,
    },
]


def _cells(row: str) -> list[str]:
    """A GFM table row's cells: split on pipes that no backslash escapes."""
    assert row.startswith("| ") and row.endswith(" |"), row
    return [c.strip() for c in re.split(r"(?<!\\)\|", row[1:-1])]


def test_table_line_by_line_failures_first_with_changes():
    previous = [
        {"test": GATES[0]["test"], "metric": "map", "value": 0.6},
        {"test": GATES[1]["test"], "metric": "hit_rate@1", "value": 0.45},
    ]
    run = {
        "id": 7,
        "git_commit": "0123456789abcdef",
        "git_dirty": 1,
        "branch": "feature/x",
        "exitstatus": 1,
    }
    lines = render_markdown(GATES, run=run, previous=previous, previous_label="run 6").splitlines()
    assert lines == [
        "### retrieval-checks gates: FAILED",
        "",
        "4 gates: 1 passed, 3 failed (run 7 · commit 0123456789ab (uncommitted changes) · branch feature/x · "
        "exit status 1)",
        "",
        "| result | check | metric | value [interval] | rule | change |",
        "|---|---|---|---|---|---|",
        "| FAIL | test\\_model.py::test\\_recall | hit\\_rate@1 | 0.4000 [0.3500, 0.4500] | interval >= 0.42 | "
        "-0.0500 vs run 6 |",
        "| FAIL | rc\\_quality.yaml::map\\_vs\\_baseline\\[model-set\\] | map | 0.6000 | baseline >= 0.61 | "
        "-0.0200 vs baseline 0.6200 |",
        "| FAIL | rc\\_quality.yaml::broken\\[model-set\\] | mrr | no value | error | new |",
        "| PASS | rc\\_quality.yaml::map\\_at\\_least\\[model-set\\] | map | 0.6123 [0.5800, 0.6400] | "
        "value >= 0.5 | +0.0123 vs run 6 |",
    ]
    # every row has the header's six cells
    for row in (lines[4], *lines[6:]):
        assert len(_cells(row)) == 6


def test_passing_run_without_previous_has_empty_changes_and_one_gate():
    lines = render_markdown(GATES[:1], run={"id": 3}).splitlines()
    assert lines[0] == "### retrieval-checks gates: passed"
    assert lines[2] == "1 gate: 1 passed, 0 failed (run 3)"
    assert _cells(lines[-1]) == [
        "PASS",
        "rc\\_quality.yaml::map\\_at\\_least\\[model-set\\]",
        "map",
        "0.6123 [0.5800, 0.6400]",
        "value >= 0.5",
        "",
    ]


def test_expected_failures_are_counted_apart_and_no_gates_is_said():
    lines = render_markdown([{**GATES[1], "xfail": True}, GATES[0]]).splitlines()
    assert lines[0] == "### retrieval-checks gates: passed"
    assert lines[2] == "2 gates: 1 passed, 0 failed, 1 expected to fail"
    assert [_cells(r)[0] for r in lines[6:]] == ["XFAIL", "PASS"]
    assert render_markdown([]).splitlines()[-1] == "No gate was recorded."


@pytest.mark.parametrize(
    "name", ["a|b", "x\ny", "<script>alert(1)</script>", "**bold** `code` [link](u)", "a\\|b"]
)
def test_hostile_names_stay_in_their_cell(name):
    row = render_markdown([{**GATES[0], "test": f"t.py::{name}", "metric": name}]).splitlines()[-1]
    cells = _cells(row)
    assert len(cells) == 6 and "<" not in row and "\n" not in row
    # unescaping the cell gives the name back (line breaks become spaces)
    unescaped = re.sub(r"\\(.)", r"\1", cells[2]).replace("&lt;", "<").replace("&amp;", "&")
    assert unescaped == name.replace("\n", " ")


def _record_two_runs(db):
    h = History(db)
    h.record(
        {"started": "2026-11-01T00:00:00+00:00", "git_commit": "aaaaaaaaaaaaaaaa"},
        [GATES[0], GATES[1]],
        exitstatus=1,
    )
    return h


def test_cli_report_markdown_to_stdout_and_to_a_md_file(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    h = _record_two_runs(db)
    assert (
        main(["--db", str(db), "report", "latest", "--format", "markdown"]) == 0
    )  # no -o: printed
    printed = capsys.readouterr().out
    assert printed == render_markdown(h.results(1), run=h.runs()[0])
    assert "commit aaaaaaaaaaaa" in printed and printed.index("| FAIL |") < printed.index(
        "| PASS |"
    )
    out = tmp_path / "comment.md"
    assert main(["--db", str(db), "report", "latest", "-o", str(out)]) == 0  # .md implies markdown
    assert out.read_text() == printed
    html = tmp_path / "r.html"
    assert (
        main(["--db", str(db), "report", "latest", "-o", str(html)]) == 0
    )  # html stays the default
    assert html.read_text().startswith("<!DOCTYPE html>")


def test_cli_report_refuses_conflicting_format_and_extension(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    _record_two_runs(db)
    assert (
        main(
            ["--db", str(db), "report", "latest", "--format", "html", "-o", str(tmp_path / "x.md")]
        )
        == 2
    )
    assert "--format html" in capsys.readouterr().err
    assert (
        main(
            [
                "--db",
                str(db),
                "report",
                "latest",
                "--format",
                "markdown",
                "-o",
                str(tmp_path / "x.html"),
            ]
        )
        == 2
    )
    assert main(["--db", str(db), "report", "latest", "--format", "pdf"]) == 2
