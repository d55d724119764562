"""The plugin's writers (issue 12): both bounds and the queries used / skipped reach
the JSON, JUnit, history and HTML records; the JSON is strict (no NaN or Infinity); an
output path that cannot be written is a usage error at start-up, a missing directory
inside the rootdir is created; a writer that fails at the end is reported and never
stops the others; a damaged history or an unusable embedding cache never turns a session
red, and the HTML report escapes what the history holds. pytester in-process, one
session per case: about 0.2-0.3 CPU-s each (see test_plugin_options.py's measurement)."""

from __future__ import annotations

import sqlite3
import xml.etree.ElementTree as ET

import pytest
from shared_setup import skipping_project as _project
from shared_setup import strict_json_loads as _strict

import retrieval_checks as rc

pytest_plugins = ["pytester"]


def _run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


# ------------------------------------------------------------------ every record: both bounds, used / skipped
def test_both_bounds_and_skipped_queries_reach_every_record(pytester):
    _project(pytester)
    result = _run(
        pytester,
        "--rc-json=g.json",
        "--junitxml=j.xml",
        "--rc-history=h.sqlite",
        "--rc-html=r.html",
    )
    result.assert_outcomes(passed=1)
    gate = _strict((pytester.path / "g.json").read_text())["gates"][0]
    assert gate["bounds"] == {"at_least": 0.05, "at_most": 0.99} and (
        gate["n_used"],
        gate["n_skipped"],
    ) == (4, 4)
    props = {
        p.get("name"): p.get("value") for p in ET.parse(pytester.path / "j.xml").iter("property")
    }
    assert props["rc:map:n_used"] == "4" and props["rc:map:n_skipped"] == "4"
    assert props["rc:map:rule"] == "0.05 <= value <= 0.99"
    row = rc.History(pytester.path / "h.sqlite").results(1)[0]
    assert row["bounds"] == {"at_least": 0.05, "at_most": 0.99} and (
        row["n_used"],
        row["n_skipped"],
    ) == (4, 4)
    con = sqlite3.connect(pytester.path / "h.sqlite")
    assert con.execute("SELECT n_used, n_skipped FROM results").fetchone() == (4, 4)
    page = (pytester.path / "r.html").read_text()
    assert "0.05 &lt;= value &lt;= 0.99" in page and ">4 / 4<" in page and "skipped" in page


def test_json_is_strict_with_infinite_and_nan_values(pytester):
    pytester.makepyfile(
        test_inf="""
import retrieval_checks as rc
def test_inf():
    rc.gates.emit(rc.GateEvent(gate="g", metric="map", value=float("-inf"), passed=True, low=float("nan"),
                               high=float("inf"), extra={"curve": {"recall": [float("nan"), 1.0]}}))
"""
    )
    _run(pytester, "--rc-json=g.json", "--junitxml=j.xml", "--rc-history=none").assert_outcomes(
        passed=1
    )
    text = (pytester.path / "g.json").read_text()
    gate = _strict(text)["gates"][0]
    assert "Infinity" not in text and "NaN" not in text
    assert gate["value"] is None and gate["low"] is None and gate["curve"]["recall"] == [None, 1.0]
    for prop in ET.parse(pytester.path / "j.xml").iter("property"):
        if prop.get("name") == "retrieval_checks":
            _strict(prop.get("value"))


# ------------------------------------------------------------------ output paths
@pytest.mark.parametrize("flag", ["json", "html", "history"])
@pytest.mark.parametrize(
    "where", ["a directory", "under a file", "missing dir outside the rootdir"]
)
def test_an_unwritable_output_is_a_usage_error_at_start_up(pytester, tmp_path_factory, flag, where):
    pytester.makepyfile(test_a="def test_a(): pass\n")
    (pytester.path / "adir").mkdir()
    (pytester.path / "afile").write_text("x")
    outside = tmp_path_factory.mktemp("outside") / "missing" / "deeper"
    path = {
        "a directory": "adir",
        "under a file": "afile/out.x",
        "missing dir outside the rootdir": f"{outside}/o.x",
    }
    result = _run(pytester, f"--rc-{flag}={path[where]}")
    err = result.stderr.str()
    assert (
        result.ret == pytest.ExitCode.USAGE_ERROR
        and f"--rc-{flag}=" in err
        and f"ini rc_{flag}" in err
    )
    fix = {
        "a directory": "give a file path",
        "under a file": "is a file",
        "missing dir outside the rootdir": "create it first",
    }[where]
    assert fix in err and "Traceback" not in err
    assert not outside.parent.exists()  # never created silently


def test_missing_directories_inside_the_rootdir_are_created(pytester):
    _project(pytester)
    result = _run(
        pytester, "--rc-json=out/a/g.json", "--rc-html=out/b/r.html", "--rc-history=out/c/h.sqlite"
    )
    assert result.ret == 0
    assert all(
        (pytester.path / p).is_file() for p in ("out/a/g.json", "out/b/r.html", "out/c/h.sqlite")
    )


REMOVE_DIR = """
import shutil, pathlib
def test_breaks_the_output():
    shutil.rmtree("out")
    pathlib.Path("out").write_text("now a file")  # the path was fine at start-up; now nothing can be written there
"""


@pytest.mark.parametrize("broken", ["json", "html"])
def test_a_writer_that_fails_at_the_end_is_reported_and_the_others_still_write(pytester, broken):
    _project(pytester)
    pytester.makepyfile(test_zz=REMOVE_DIR)
    (pytester.path / "out").mkdir()
    other = "html" if broken == "json" else "json"
    result = _run(
        pytester,
        f"--rc-{broken}=out/report.{broken}",
        f"--rc-{other}=ok.{other}",
        "--rc-history=h.sqlite",
    )
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR  # never green with a report missing
    out = result.stdout.str()
    assert (
        f"retrieval-checks: error: could not write the {broken.upper()} report" in out
        and f"--rc-{broken}" in out
    )
    assert (pytester.path / f"ok.{other}").is_file() and rc.History(
        pytester.path / "h.sqlite"
    ).runs()


# ------------------------------------------------------------------ history and cache never turn a session red
@pytest.mark.parametrize("kind", ["text file", "foreign tables", "garbage row"])
def test_a_damaged_history_is_a_warning_not_a_red_session(pytester, kind):
    _project(pytester)
    db = pytester.path / "h.sqlite"
    if kind == "text file":
        db.write_text("not a database")
    elif kind == "foreign tables":
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE customers (id INTEGER)")
        con.commit()
        con.close()
    else:
        rc.History(db).record(
            {"started": "s"},
            [{"test": "test_gate.py::test_gate", "metric": "map", "value": 0.5, "passed": True}],
        )
        con = sqlite3.connect(db)
        con.execute("UPDATE results SET value='<script>alert(1)</script>'")
        con.commit()
        con.close()
    result = _run(pytester, "--rc-history=h.sqlite", "--rc-json=g.json", "--rc-html=r.html")
    assert result.ret == 0
    page = (pytester.path / "r.html").read_text()
    assert "<script>alert" not in page and (pytester.path / "g.json").is_file()
    if kind != "garbage row":
        assert (
            "retrieval-checks: warning: the run was not recorded in the history"
            in result.stdout.str()
        )
        assert "h.sqlite" in result.stdout.str()
    else:
        assert "history not shown" in page and "results row 1" in page


def test_the_html_report_escapes_hostile_history_fields(pytester):
    _project(pytester)
    hostile = "<script>alert('x')</script>\"'><img src=x onerror=alert(1)>"
    rc.History(pytester.path / "h.sqlite").record(
        {"started": hostile, "command": hostile, "machine": hostile, "git_commit": hostile},
        [
            {
                "test": "test_gate.py::test_gate",
                "metric": "map",
                "value": 0.2,
                "passed": True,
                "model": hostile,
                "unit": hostile,
                "comparison": hostile,
                "warnings": [hostile],
            }
        ],
    )
    _run(pytester, "--rc-history=h.sqlite", "--rc-html=r.html").assert_outcomes(passed=1)
    page = (pytester.path / "r.html").read_text()
    assert "<script>alert" not in page and "<img" not in page and page.count("<script>") == 1


@pytest.mark.parametrize("cache", ["afile", "afile/sub"])
def test_an_unusable_embedding_cache_warns_and_runs_without_it(pytester, cache):
    _project(pytester)
    (pytester.path / "afile").write_text("x")
    result = _run(pytester, f"--rc-embedding-cache={cache}", "--rc-history=none")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "retrieval-checks: warning: --rc-embedding-cache (ini rc_embedding_cache)" in out
    assert "running without the embedding cache" in out
