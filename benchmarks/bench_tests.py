"""The test suite's time budget: runs the suite as ``./dev test`` does (``-n auto --dist
loadgroup``) with a JUnit XML report, then prints the slowest tests, the cost of each
test file and the wall time against the budget (6 minutes on a 2-core machine;
CONTRIBUTING.md). Over budget is a warning, never a failure: machines vary. The exit
status is pytest's.

    python benchmarks/bench_tests.py                       # the whole suite, 25 slowest
    python benchmarks/bench_tests.py --top 40 tests/plugin  # arguments after the options go to pytest
    python benchmarks/bench_tests.py --junit report.xml --no-run   # read a report already written

The per-test times are JUnit's (setup + call + teardown, as xdist's workers measured
them): their sum is the suite's cost in worker-seconds, the wall time is what a
contributor waits. Read both with the load average printed beside them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

BUDGET_S = 6 * 60
ROOT = Path(__file__).resolve().parents[1]


def read_junit(path: str | os.PathLike) -> list[tuple[str, float, str]]:
    """(test id, seconds, outcome) for every test case of a JUnit XML report."""
    cases = []
    for case in ET.parse(path).iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
                break
        classname, name = case.get("classname", ""), case.get("name", "")
        test_id = f"{classname.replace('.', '/')}.py::{name}" if classname else name
        cases.append((test_id, float(case.get("time") or 0.0), outcome))
    return cases


def report(
    cases: list[tuple[str, float, str]],
    wall_s: float | None,
    *,
    top: int = 25,
    budget_s: float = BUDGET_S,
    workers: str = "auto",
) -> list[str]:
    """The lines printed: slowest tests, slowest files, totals, the budget line."""
    lines = [
        f"slowest {min(top, len(cases))} of {len(cases)} tests (seconds, setup + call + teardown):"
    ]
    for test_id, seconds, outcome in sorted(cases, key=lambda c: -c[1])[:top]:
        mark = "" if outcome == "passed" else f"  [{outcome}]"
        lines.append(f"  {seconds:8.2f}  {test_id}{mark}")
    per_file: dict[str, list[float]] = defaultdict(list)
    for test_id, seconds, _ in cases:
        per_file[test_id.split("::", 1)[0]].append(seconds)
    lines.append(f"slowest {min(top, len(per_file))} of {len(per_file)} files (seconds, tests):")
    for name, times in sorted(per_file.items(), key=lambda kv: -sum(kv[1]))[:top]:
        lines.append(f"  {sum(times):8.2f}  {name} ({len(times)})")
    total = sum(seconds for _, seconds, _ in cases)
    skipped = sum(1 for *_, outcome in cases if outcome == "skipped")
    lines.append(f"total: {len(cases)} tests ({skipped} skipped), {total:.0f} worker-seconds")
    if wall_s is None:
        lines.append("budget: no wall time measured (--no-run); the per-test total is above")
        return lines
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    line = (
        f"test budget: {wall_s:.0f} s wall with {workers} xdist workers, load average {load}; "
        f"budget {budget_s / 60:g} minutes"
    )
    lines.append(
        line
        + (
            ": within it"
            if wall_s <= budget_s
            else f": WARNING over it by {wall_s - budget_s:.0f} s (machines vary: this never fails the run)"
        )
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--top", type=int, default=25, help="how many tests and files to list (default 25)"
    )
    parser.add_argument(
        "--budget", type=float, default=BUDGET_S, help="seconds of wall time (default 360)"
    )
    parser.add_argument(
        "--workers", default="auto", help="pytest-xdist -n (default auto; 0: one process)"
    )
    parser.add_argument("--junit", help="where the JUnit XML goes (default: a temporary file)")
    parser.add_argument(
        "--no-run", action="store_true", help="only read --junit, written by an earlier run"
    )
    args, pytest_args = parser.parse_known_args(argv)
    if args.no_run:
        if not args.junit:
            parser.error("--no-run reads the report named by --junit")
        for line in report(read_junit(args.junit), None, top=args.top, budget_s=args.budget):
            print(line)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        junit = args.junit or str(Path(tmp) / "junit.xml")
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            f"--junitxml={junit}",
            "-o",
            "junit_family=xunit1",
        ]
        if args.workers != "0":
            cmd += ["-n", args.workers, "--dist", "loadgroup"]
        start = time.monotonic()
        status = subprocess.call(cmd + pytest_args, cwd=ROOT)
        wall = time.monotonic() - start
        if not Path(junit).exists():
            print(f"bench_tests: pytest wrote no report (exit status {status})", file=sys.stderr)
            return status or 1
        print()
        for line in report(
            read_junit(junit), wall, top=args.top, budget_s=args.budget, workers=args.workers
        ):
            print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
