"""A pytest plugin for device runs (benchmarks/gpu_session.sh): every failure's report is
appended to $OUT/failures.txt as soon as it happens, so a run stopped at its time limit
still says what failed and why (pytest prints its summary only at the end)."""

import os


def pytest_runtest_logreport(report):
    if not report.failed or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller writes once; a worker's report reaches it too
    path = os.path.join(os.environ.get("OUT", "."), "failures.txt")
    with open(path, "a") as f:
        f.write(f"=== {report.nodeid} [{report.when}]\n{str(report.longrepr)[-2500:]}\n")
        # what the test printed (a doctest runner's report of the failing example is there)
        for name, text in report.sections:
            f.write(f"--- {name}\n{text[-2500:]}\n")
