"""Shared test setup: the oracles (``reference.py``, a dense brute-force implementation)
are importable from every layer's tests; the hypothesis profiles; ``--rc-exhaustive``
(the exhaustive sweeps, skipped by default); the suite's time budget; in a whole-suite
xdist run, each worker first compiles its share of the library's numba kernels
(``warm_kernels.py``: each kernel compiled once per clean clone, not once per worker).

Hypothesis profiles: ``ci`` (chosen when ``CI`` is set, as in ``.ci/run`` and GitHub
Actions) is derandomised, so every run tries the same examples, writes no example
database and prints the blob that reproduces a failure; ``dev`` (the default elsewhere)
draws new examples on every run and replays the failures it saved in ``.hypothesis/``;
``explore`` (``HYPOTHESIS_PROFILE=explore``) is ``dev`` with more examples where a test
does not fix its own number. A failure found by exploring becomes an explicit
``@example`` on its test, so CI checks it on every run.
"""

from __future__ import annotations

import functools
import gc
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

_STARTED = time.monotonic()
BUDGET_S = 6 * 60  # the whole suite, `./dev test`, on a 2-core machine (CONTRIBUTING.md)
EXHAUSTIVE_ENV = "RC_TESTS_EXHAUSTIVE"

# OpenMP's idle threads sleep instead of spinning. The numba kernels (the omp threading
# layer) and torch's CPU ops run OpenMP regions of a few milliseconds, thousands per file;
# after each, libgomp's threads spun for a while by default, burning the core the other
# xdist worker (or another rank) needed: measured on the 2-core machine, the three ranks
# of test_distributed's launch cost 27.7 CPU-s, 22.5 passive (wall 22 -> 15 s), and
# test_ties_end_to_end 17.0 -> 13.7. Nothing a test checks depends on it (the same
# threads run the same regions). libgomp reads it when it loads (torch's import, numba's
# first parallel kernel: both after this file, in pytest and in every xdist worker), and
# the processes the tests start inherit it; a value set outside is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
# The same for numpy's BLAS (OpenBLAS, pthreads): after a threaded product its threads
# spin 2**28 cycles (~0.1 s) before they sleep, by default; 2**4 here. OpenBLAS reads it
# when numpy is imported, which in this process happened already (the plugin imports
# the library), but the xdist workers, where every test of `./dev test` runs, start
# after this file and inherit it, as do the processes the tests start. The same threads
# compute the same products (the thread count is unchanged). Measured on the 2-core
# machine: 300 products of (300 x 64) by (64 x 400) with Python work between them, 0.47
# -> 0.30 CPU-s at the same wall time; on test files of small problems (most products
# run on one thread) the difference stays within the noise of a shared machine.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


try:
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    settings = None
else:
    # each from hypothesis's own "default" (under CI, hypothesis's default is its derandomised "ci")
    _base = settings.get_profile("default")
    settings.register_profile(
        "ci",
        _base,
        derandomize=True,
        database=None,
        print_blob=True,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.register_profile("dev", _base, derandomize=False, deadline=None, print_blob=True)
    settings.register_profile(
        "explore", _base, derandomize=False, deadline=None, print_blob=True, max_examples=1000
    )


def hypothesis_profile(environ) -> str:
    """``HYPOTHESIS_PROFILE`` if set, else ``ci`` under CI, else ``dev``."""
    return environ.get("HYPOTHESIS_PROFILE") or ("ci" if _truthy(environ.get("CI")) else "dev")


if settings is not None:
    settings.load_profile(hypothesis_profile(os.environ))


# In-process pytester runs (``runpytest_inprocess``: no fresh interpreter, torch import and
# collection per case) drop from sys.modules, when they end, what they imported. A module
# with C state imported a second time in one process (torch, numba, mlflow...) leaves
# builtin functions pointing at freed memory: a segfault in the garbage collector, later.
# So the modules a run imported stay imported (only the run's own files, under its
# temporary directory, are dropped), and the heaviest are imported before the first run.
PRELOAD = (
    "torch",
    "numba",
    "scipy.stats",
    "scipy.special",
    "retrieval_checks.engine.counting._kernels_numba",
    "retrieval_checks.tracking",
)


def preload() -> list[str]:
    """Imports :data:`PRELOAD` (what is installed); returns the names imported."""
    import importlib

    done = []
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        done.append(name)
    return done


@functools.lru_cache(maxsize=None)
def _real(path: str) -> str:
    """``path`` with its links resolved, once per path per process (imported modules'
    files do not move; a pytester project's path is new each time)."""
    return os.path.realpath(path)


def own_module(name: str, root: str) -> bool:
    """A module whose file lies under ``root`` (a pytester run's project: its test
    modules, suite model modules and their helpers): the modules such a run drops.
    Asked for every module in sys.modules twice per in-process run, so each file is
    resolved once per process (resolving every path cost about a second per run)."""
    path = getattr(sys.modules.get(name), "__file__", None)
    if not isinstance(path, str):
        return False
    inside = root.rstrip(os.sep) + os.sep
    return path.startswith(inside) or path == root or _real(path).startswith(inside)


@pytest.fixture(scope="session")
def _preloaded():
    return preload()


@pytest.fixture
def pytester(pytester, _preloaded, monkeypatch):
    """pytester, whose in-process runs drop only the modules of the test's own project
    (files under ``pytester.path``), so that two runs or two projects never share them,
    and keep every other module they imported."""
    from _pytest import pytester as _pytester

    root = str(pytester.path)

    class KeepOthers(_pytester.SysModulesSnapshot):
        def __init__(self, preserve=None):
            super().__init__(preserve=self._keep)
            self._outer = preserve
            # what the snapshot saved (the same moment): a module still bound to the same
            # object restores to itself whether kept or not, so only the modules a run
            # imported or replaced are asked about (a few, where every module of the
            # process was: 2,400 to 5,000 own_module calls per restore, ~30 ms a run)
            self._before = dict(sys.modules)

        def _keep(self, name: str) -> bool:
            if sys.modules.get(name) is self._before.get(name, self):
                return True
            return not own_module(name, root) or bool(self._outer and self._outer(name))

    monkeypatch.setattr(_pytester, "SysModulesSnapshot", KeepOthers)  # each in-process run
    pytester._sys_modules_snapshot = (
        KeepOthers()
    )  # and the test's end (pytester took it before this ran)
    return pytester


def pytest_addoption(parser):
    parser.addoption(
        "--rc-exhaustive",
        action="store_true",
        default=_truthy(os.environ.get(EXHAUSTIVE_ENV)),
        help="also run the exhaustive sweeps (tests marked 'exhaustive': the same behaviours as the default "
        f"tests at more shapes and sizes; slow, e.g. in the Triton interpreter); or set {EXHAUSTIVE_ENV}=1",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "exhaustive: a sweep that repeats behaviours the default tests cover, at more sizes; "
        f"skipped unless --rc-exhaustive (or {EXHAUSTIVE_ENV}=1)",
    )
    config.addinivalue_line(
        "markers",
        "default_cases(*cases): on a parametrized test, the parameter combinations that run by "
        "default, each a dict of parameter values (a subset of the names, fixture params included); "
        "the test's other combinations are exhaustive",
    )


def _default_cases(items):
    """Marks 'exhaustive' the combinations of a ``default_cases`` test that no case names.
    A case naming an unknown parameter, or matching none of the test's collected
    combinations (a typo would move every combination out of the default run), is an error."""
    matched: dict[tuple, set] = {}
    for item in items:
        marker = item.get_closest_marker("default_cases")
        if marker is None:
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        key = (item.path, item.originalname)
        seen = matched.setdefault(key, {"items": 0, "cases": marker.args, "hits": set()})
        seen["items"] += 1
        hit = False
        for i, case in enumerate(marker.args):
            unknown = sorted(set(case) - set(params))
            if unknown:
                raise pytest.UsageError(
                    f"{item.nodeid}: default_cases names {unknown}, not parameters of the "
                    f"test (they are {sorted(params)})"
                )
            if all(params[k] == v for k, v in case.items()):
                seen["hits"].add(i)
                hit = True
        if not hit:
            item.add_marker(pytest.mark.exhaustive)
    for (path, name), seen in matched.items():
        missed = [seen["cases"][i] for i in range(len(seen["cases"])) if i not in seen["hits"]]
        if missed and seen["items"] > 1:
            raise pytest.UsageError(
                f"{path}::{name}: default_cases {missed} match none of its parameter "
                "combinations (a typo?)"
            )


def slow_modules_first(items):
    """Reorders ``items`` in place: the modules holding a test marked ``slow`` first, each
    module's tests together and in their order (module fixtures are set up once). Under
    ``--dist loadgroup`` xdist hands out the tests in this order (after the xdist groups),
    so the long tests start early and the run does not end waiting on one of them."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)  # stable: the order within each part


def pytest_collection_modifyitems(config, items):
    _default_cases(items)
    slow_modules_first(items)
    if config.getoption("--rc-exhaustive"):
        return
    skip = pytest.mark.skip(
        reason=f"exhaustive sweep: run with --rc-exhaustive or {EXHAUSTIVE_ENV}=1"
    )
    for item in items:
        if item.get_closest_marker("exhaustive") is not None:
            item.add_marker(skip)


def pytest_collection_finish(session):
    """Moves what collection built (the test modules, torch, numba, the library: about
    300,000 objects, kept until the end) out of the garbage collector's sight
    (``gc.freeze``), so each of the session's automatic full collections scans only what
    the tests themselves allocate: each cost ~0.4 s with the collected heap in view, and
    gc took 10-15% of a worker's CPU time (measured on tests/stats + tests/classifiers:
    2.4-2.6 -> 1.7 CPU-s of gc). Nothing a test creates is frozen."""
    gc.collect()
    gc.freeze()


WARM_ENV = "RC_TESTS_WARM_KERNELS"


def whole_suite(config) -> bool:
    """The run is the whole suite (``./dev test``, CI: no test paths given), not a
    selection, and runs tests (not ``--collect-only``)."""
    return (
        config.args_source is pytest.Config.ArgsSource.TESTPATHS and not config.option.collectonly
    )


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown where xdist is not installed
def pytest_configure_node(node):
    """The controller asks each xdist worker of a whole-suite run to compile the library's
    numba kernels first (``warm_kernels.py``: once, split between the workers, instead of
    every worker compiling all of them at once in a clean clone); ``RC_TESTS_WARM_KERNELS=0``
    turns it off. A selection of tests compiles only what it calls, as before."""
    node.workerinput["rc_warm_kernels"] = whole_suite(node.config) and _truthy(
        os.environ.get(WARM_ENV, "1")
    )


def pytest_sessionstart(session):
    workerinput = getattr(session.config, "workerinput", None)
    if workerinput and workerinput.get("rc_warm_kernels"):
        import warm_kernels

        warm_kernels.warm(workerinput.get("workerid", "gw0"))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The whole suite's wall time against its budget: a warning line, never a failure."""
    if (
        hasattr(config, "workerinput")
        or config.args_source is not pytest.Config.ArgsSource.TESTPATHS
        or config.option.collectonly  # nothing ran: no suite time to report
    ):
        return
    elapsed = time.monotonic() - _STARTED
    workers = getattr(config.option, "numprocesses", None) or "no"
    line = f"test budget: the suite took {elapsed:.0f} s wall ({workers} xdist workers)"
    if elapsed <= BUDGET_S:
        terminalreporter.write_line(f"{line}, within its {BUDGET_S // 60}-minute budget")
    else:
        terminalreporter.write_line(
            f"WARNING {line}, over its {BUDGET_S // 60}-minute budget: see the slowest tests above "
            "(--durations) and CONTRIBUTING.md",
            yellow=True,
            bold=True,
        )
    cpu = cpu_seconds()
    if cpu is not None:  # what a busy machine's wall time hides: the work itself
        terminalreporter.write_line(
            f"test budget: {cpu:.0f} CPU-s (pytest, its xdist workers and the processes they "
            f"started), {cpu / 2 / 60:.1f} minutes on 2 idle cores"
        )


def cpu_seconds() -> float | None:
    """User + system time of this process and of the child processes it waited for (the
    xdist workers, reaped before the terminal summary, with theirs); None where the
    platform does not say (no ``resource`` module)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
