"""benchmarks/bench_tests.py: the slowest tests, the cost per file and the budget line,
read from a JUnit report that an in-process pytester run writes (about a second)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

_SPEC = importlib.util.spec_from_file_location(
    "bench_tests", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_tests.py"
)
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)

TESTS = """
import time
import pytest

def test_slow():
    time.sleep(0.2)

def test_fast():
    pass

@pytest.mark.skip(reason="not here")
def test_skipped():
    pass

def test_failing():
    assert False
"""


@pytest.fixture
def junit(pytester):
    pytester.makepyfile(test_mod=TESTS)
    pytester.mkpydir("sub")
    (pytester.path / "sub" / "test_other.py").write_text(
        "import time\n\ndef test_b():\n    time.sleep(0.05)\n"
    )
    path = pytester.path / "junit.xml"
    pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", f"--junitxml={path}", "-o", "junit_family=xunit1"
    )
    return path


def test_the_slowest_tests_and_files_come_first_with_their_outcomes(junit):
    cases = bench.read_junit(junit)
    assert sorted(c[0] for c in cases) == [
        "sub/test_other.py::test_b",
        "test_mod.py::test_failing",
        "test_mod.py::test_fast",
        "test_mod.py::test_skipped",
        "test_mod.py::test_slow",
    ]
    assert {c[0]: c[2] for c in cases}["test_mod.py::test_failing"] == "failed"
    lines = bench.report(cases, 10.0, top=2, budget_s=360)
    assert lines[0] == "slowest 2 of 5 tests (seconds, setup + call + teardown):"
    assert lines[1].endswith("test_mod.py::test_slow") and lines[2].endswith(
        "sub/test_other.py::test_b"
    )
    assert lines[3] == "slowest 2 of 2 files (seconds, tests):"
    assert lines[4].endswith("test_mod.py (4)") and lines[5].endswith("sub/test_other.py (1)")
    assert lines[6].startswith("total: 5 tests (1 skipped), ")
    assert lines[7].startswith("test budget: 10 s wall with auto xdist workers") and lines[
        7
    ].endswith(": within it")


def test_over_the_budget_is_a_warning_line(junit):
    line = bench.report(bench.read_junit(junit), 400.0, budget_s=360)[-1]
    assert "budget 6 minutes: WARNING over it by 40 s" in line and "never fails the run" in line


def test_reading_a_report_without_running(junit, capsys):
    assert bench.main(["--no-run", "--junit", str(junit), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "slowest 1 of 5 tests" in out and "no wall time measured" in out
    with pytest.raises(SystemExit):
        bench.main(["--no-run"])  # nothing to read: a usage error
