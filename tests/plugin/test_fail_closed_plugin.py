"""Fail-closed battery for the pytest plugin (issue 12), with pytester in-process:
a bad option or output path is one usage error at start-up (exit 4) naming the flag and
its ini name; --rc-max-skipped fails a plain test whose gate skipped too many queries
(also under xdist); the queries used / skipped and both bounds reach the table, JSON,
JUnit, history and HTML; the JSON is strict; a writer that fails at the end is reported
and never stops the others; a damaged history or an unusable cache never turns a
session red."""

from __future__ import annotations

import json
import sqlite3
import xml.etree.ElementTree as ET

import pytest

import retrieval_checks as rc

pytest_plugins = ["pytester"]

SKIPPING = """
import numpy as np
import retrieval_checks as rc

def test_gate():
    y = np.array([0, 0, 1, 1, 2, 3, 4, 5])  # 4 of 8 queries have no relevant item
    x = np.random.default_rng(0).normal(size=(8, 8)).astype(np.float32)
    rc.assert_metric(rc.evaluate(x, query_labels=y, metrics=["map"]), "map", at_least=0.05, at_most=0.99GATE_ARGS)
"""


def _run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


def _project(pytester, gate_args=""):
    pytester.makepyfile(test_gate=SKIPPING.replace("GATE_ARGS", gate_args))


def _strict(text):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


# ------------------------------------------------------------------ options: one usage error at start-up
BAD_FLAGS = [
    ("--rc-seed", "abc", "integer"),
    ("--rc-seed", "-1", "integer >= 0"),
    ("--rc-seed", "1.5", "integer"),
    ("--rc-confidence", "2", "strictly between 0 and 1"),
    ("--rc-confidence", "nan", "strictly between 0 and 1"),
    ("--rc-confidence", "inf", "strictly between 0 and 1"),
    ("--rc-confidence", "0", "strictly between 0 and 1"),
    ("--rc-confidence", "95", "did you mean 0.95"),
    ("--rc-confidence", "x", "strictly between 0 and 1"),
    ("--rc-device", "gpu", "auto, cpu"),
    ("--rc-device", "cuda:x", "auto, cpu"),
    ("--rc-max-memory", "10", "at least a few MiB"),
    ("--rc-max-memory", "lots", "not a size"),
    ("--rc-ties", "random", "pessimistic"),
    ("--rc-max-skipped", "-1", "a count of queries"),
    ("--rc-max-skipped", "1.5", "a count of queries"),
    ("--rc-max-skipped", "x", "a count of queries"),
    ("--rc-max-skipped", "nan", "a count of queries"),
    ("--rc-timeout", "0", "seconds > 0"),
    ("--rc-timeout", "-5", "seconds > 0"),
    ("--rc-timeout", "nan", "seconds > 0"),
    ("--rc-timeout", "soon", "seconds > 0"),
]


@pytest.mark.parametrize(
    "flag, value, expected", BAD_FLAGS, ids=[f"{f}={v}" for f, v, _ in BAD_FLAGS]
)
def test_a_bad_flag_is_one_usage_error(pytester, flag, value, expected):
    pytester.makepyfile(test_a="def test_a(): pass\ndef test_b(): pass\n")
    result = _run(pytester, f"{flag}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    ini = "rc_" + flag[5:].replace("-", "_")
    assert (
        err.count("ERROR: retrieval-checks:") == 1
        and flag in err
        and f"ini {ini}" in err
        and expected in err
    )
    assert "Traceback" not in err + result.stdout.str()


@pytest.mark.parametrize(
    "ini, value, expected",
    [
        ("rc_seed", "x", "integer"),
        ("rc_confidence", "95", "did you mean 0.95"),
        ("rc_device", "tpu", "auto, cpu"),
        ("rc_max_skipped", "-2", "a count of queries"),
        ("rc_timeout", "0", "seconds > 0"),
        ("rc_max_memory", "1KB", "at least a few MiB"),
    ],
)
def test_a_bad_ini_value_is_one_usage_error_naming_it(pytester, ini, value, expected):
    pytester.makepyfile(test_a="def test_a(): pass\n")
    pytester.makeini(f"[pytest]\n{ini} = {value}\n")
    result = _run(pytester)
    err = result.stderr.str()
    assert (
        result.ret == pytest.ExitCode.USAGE_ERROR
        and ini in err
        and expected in err
        and "Traceback" not in err
    )


def test_cuda_without_a_cuda_device_is_a_usage_error(pytester):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    pytester.makepyfile(test_a="def test_a(): pass\n")
    result = _run(pytester, "--rc-device=cuda")
    err = result.stderr.str()
    assert (
        result.ret == pytest.ExitCode.USAGE_ERROR
        and "--rc-device" in err
        and "ini rc_device" in err
    )
    assert "device='cpu'" in err


def test_max_skipped_and_timeout_reach_the_options_and_the_suite_runner(pytester):
    pytester.makepyfile(
        test_a="""
from pytest_retrieval_checks.plugin import suite_runner

def test_a(rc_options, pytestconfig):
    assert rc_options["max_skipped"] == 0.25 and rc_options["timeout"] == 30.0
    defaults = suite_runner(pytestconfig).defaults
    assert defaults["max_skipped"] == 0.25 and defaults["timeout"] == 30.0 and defaults["seed"] == 3
"""
    )
    _run(pytester, "--rc-max-skipped=0.25", "--rc-timeout=30", "--rc-seed=3").assert_outcomes(
        passed=1
    )
    pytester.makeini("[pytest]\nrc_max_skipped = none\nrc_timeout = none\n")
    pytester.makepyfile(
        test_a="""
def test_a(rc_options):
    assert rc_options["max_skipped"] is None and rc_options["timeout"] is None
"""
    )
    _run(pytester).assert_outcomes(passed=1)


# ------------------------------------------------------------------ --rc-max-skipped
@pytest.mark.parametrize(
    "limit, fails",
    [
        ("0", True),
        ("3", True),
        ("4", False),
        ("10", False),
        ("0.0", True),
        ("0.4", True),
        ("0.5", False),
        ("0.9", False),
    ],
)
def test_max_skipped_fails_a_plain_test(pytester, limit, fails):
    _project(pytester)
    result = _run(pytester, f"--rc-max-skipped={limit}", "--rc-json=g.json", "--rc-history=none")
    gate = _strict((pytester.path / "g.json").read_text())["gates"][0]
    if fails:
        result.assert_outcomes(failed=1)
        out = result.stdout.str()
        assert (
            "assert_metric" in out and "n_used 4 / n_skipped 4" in out and "--rc-max-skipped" in out
        )
        assert gate["passed"] is False and gate["max_skipped"] == json.loads(limit)
    else:
        result.assert_outcomes(passed=1)
        assert gate["passed"] is True


def test_max_skipped_works_under_xdist(pytester):
    pytest.importorskip("xdist")
    _project(pytester)
    # one worker: the project has one test, so a second worker would only start, import and
    # collect (the cost of this test); the option still has to reach a worker process and
    # the failed gate's record come back to the controller's JSON
    result = _run(
        pytester, "-n", "1", "--rc-max-skipped=1", "--rc-json=g.json", "--rc-history=none"
    )
    result.assert_outcomes(failed=1)
    assert "n_used 4 / n_skipped 4" in result.stdout.str()
    assert _strict((pytester.path / "g.json").read_text())["gates"][0]["passed"] is False


def test_the_gates_own_max_skipped_wins_over_the_session(pytester):
    _project(pytester, ", max_skipped=5")
    _run(pytester, "--rc-max-skipped=0", "--rc-history=none").assert_outcomes(passed=1)


def test_without_max_skipped_the_skipped_queries_are_a_warning(pytester):
    _project(pytester)
    result = _run(pytester, "--rc-history=none")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*n_used / n_skipped*",
            "test_gate*map*0.05 <= value <= 0.99*4 / 4*PASS*",
            "warning: test_gate map: *skipped*",
        ]
    )


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


# ------------------------------------------------------------------ every failed suite item leaves a record (review)
def _suites_project(pytester):
    """A passing check, a suite with a typo, and a gap check whose train set skips 10 of 40
    queries under max_skipped: 0."""
    import numpy as np

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(8), 5)
    x = (rng.normal(size=(40, 8)) + 3 * np.eye(8)[y]).astype(np.float32)
    skip = y.copy()
    skip[:10] = np.arange(100, 110)  # 10 queries whose label nobody else has
    np.savez(pytester.path / "emb.npz", embeddings=x, labels=y)
    np.savez(pytester.path / "skip.npz", embeddings=x, labels=skip)
    pytester.makefile(
        ".yaml",
        rc_a="datasets:\n  d: {queries: emb.npz}\nchecks:\n  - {metric: map, at_least: 0.1}\n",
        rc_b="datasets:\n  d: {queries: emb.npz}\nchecks:\n  - {metric: map, at_lest: 0.5}\n",
        rc_c="datasets:\n  d: {queries: skip.npz}\n  e: {queries: emb.npz}\nchecks:\n"
        "  - {metric: map, gap: {train: d, test: e}, below: 0.5, max_skipped: 0}\n",
    )


def test_every_failed_suite_item_is_recorded_everywhere_and_show_check_is_red(
    pytester, monkeypatch
):
    monkeypatch.setenv(
        "COLUMNS", "200"
    )  # wide enough for the whole gate table on one line per gate
    _suites_project(pytester)
    result = _run(
        pytester,
        "--rc-json",
        "o.json",
        "--rc-history",
        "h.sqlite",
        "--junitxml",
        "j.xml",
        "--rc-html",
        "r.html",
        "--continue-on-collection-errors",
    )
    assert result.ret == 1
    gates = _strict((pytester.path / "o.json").read_text())["gates"]
    by_test = {g["test"].split("::")[0]: g for g in gates}
    assert len(gates) == 3 and by_test["rc_a.yaml"]["passed"]
    error = by_test["rc_b.yaml"]
    assert error["gate"] == "error" and error["passed"] is False and error["value"] is None
    assert "at_lest" in error["message"] and "rc_b.yaml" in error["message"]
    skipped = by_test["rc_c.yaml"]
    assert (
        skipped["passed"] is False
        and skipped["gate"] == "assert_gap_below"
        and skipped["metric"] == "map"
    )
    assert (skipped["n_used"], skipped["n_skipped"]) == (30, 10) and skipped["bounds"] == {
        "max_skipped": 0
    }
    result.stdout.fnmatch_lines(
        ["*rc_c.yaml::map_gap*n_skipped <= 0*30 / 10*FAIL*", "rc_b.yaml*(suite)*FAIL"]
    )
    h = rc.tracking.History(pytester.path / "h.sqlite")
    run = h.runs()[0]
    assert (run["n_gates"], run["n_failed"], run["exitstatus"]) == (3, 2, 1)
    junit = ET.parse(pytester.path / "j.xml")
    props = {
        tc.get("name"): [p.get("name") for p in tc.iter("property")]
        for tc in junit.iter("testcase")
    }
    assert any(n.startswith("rc:") for n in props["map_gap[precomputed-d-e]"])
    assert "rc_b.yaml" in {
        tc.get("name") for tc in junit.iter("testcase") if tc.find("error") is not None
    }
    assert "FAIL" in (pytester.path / "r.html").read_text()
    from retrieval_checks.tracking import main as cli

    assert cli(["--db", str(pytester.path / "h.sqlite"), "show", "latest", "--check"]) == 1


def test_a_model_timeout_is_recorded_as_a_failed_gate(pytester):
    import numpy as np

    y = np.repeat(np.arange(4), 3)
    np.savez(pytester.path / "d.npz", inputs=np.zeros((12, 4), np.float32), labels=y)
    pytester.makepyfile(slow="import time\ndef embed(x):\n    time.sleep(5)\n    return x\n")
    pytester.makefile(
        ".yaml",
        rc_t="models:\n  m: {callable: 'slow:embed', timeout: 0.5}\ndatasets:\n"
        "  d: {queries: d.npz}\nchecks:\n  - {metric: map, at_least: 0.1}\n",
    )
    pytester.syspathinsert()
    result = _run(pytester, "--rc-json", "o.json", "--rc-history", "none")
    assert result.ret == 1
    gates = _strict((pytester.path / "o.json").read_text())["gates"]
    assert len(gates) == 1 and gates[0]["gate"] == "error" and gates[0]["metric"] == "map"
    assert (
        gates[0]["model"] == "m"
        and gates[0]["dataset"] == "d"
        and "did not finish within" in gates[0]["message"]
    )


def test_a_failing_gate_is_not_recorded_twice(pytester):
    _suites_project(pytester)
    (pytester.path / "rc_a.yaml").write_text(
        "datasets:\n  d: {queries: emb.npz}\nchecks:\n  - {metric: map, at_least: 0.99}\n"
    )
    result = _run(pytester, "--rc-json", "o.json", "--rc-history", "none", "rc_a.yaml")
    assert result.ret == 1
    gates = _strict((pytester.path / "o.json").read_text())["gates"]
    assert [g["gate"] for g in gates] == ["assert_map_at_least"]


def test_a_compare_check_over_max_skipped_is_a_failed_gate_record(pytester):
    _suites_project(pytester)
    (pytester.path / "rc_a.yaml").write_text(
        "models:\n  a: {embeddings: {d: skip.npz}}\n  b: {embeddings: {d: skip.npz}}\n"
        "datasets:\n  d: {queries: skip.npz}\nchecks:\n"
        "  - {metric: map, models: [a], compare: {baseline: b}, max_skipped: 2}\n"
    )
    result = _run(pytester, "--rc-json", "o.json", "--rc-history", "none", "rc_a.yaml")
    assert result.ret == 1
    gates = _strict((pytester.path / "o.json").read_text())["gates"]
    assert (
        len(gates) == 1 and gates[0]["passed"] is False and gates[0]["gate"] == "assert_not_worse"
    )
    assert gates[0]["n_skipped"] == 10 and gates[0]["bounds"] == {"max_skipped": 2}
