"""The warm-up of the library's numba kernels (``tests/warm_kernels.py``, run by each
xdist worker of a whole-suite run): it reaches every cached kernel, splits the parts
between the workers, waits on a part another worker is compiling, and is asked for
only by whole-suite runs. In a worker that has warmed (or a warm numba cache) about a
second; in a clean clone the first test here compiles the kernels (~20 CPU-s) that the
engine tests would compile anyway.
"""

from __future__ import annotations

import importlib
import pathlib
import time
from types import SimpleNamespace

import pytest
import warm_kernels
from shared_setup import root_conftest

import retrieval_checks

numba = pytest.importorskip("numba")

PACKAGE = pathlib.Path(retrieval_checks.__file__).parent


def cached_kernels():
    """``{"module.function": dispatcher}``: every ``@njit(cache=True)`` function of the
    package that is compiled on its own (not ``inline="always"``: those compile into
    their callers)."""
    from numba.core.dispatcher import Dispatcher

    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "njit" not in path.read_text(encoding="utf-8"):
            continue
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        module = importlib.import_module(".".join(rel.parts))
        for name, obj in vars(module).items():
            if (
                isinstance(obj, Dispatcher)
                and obj.__module__ == module.__name__
                and obj.targetoptions.get("inline") != "always"
                and type(obj._cache).__name__ != "NullCache"
            ):
                found[f"{module.__name__}.{name}"] = obj
    return found


def test_the_warm_up_compiles_every_cached_kernel():
    kernels = cached_kernels()
    assert len(kernels) >= 15  # the scored, fused, Hamming, grouped and run-reading kernels
    assert warm_kernels.warm("gw0") == []
    cold = sorted(name for name, f in kernels.items() if not f.signatures)
    assert not cold, (
        f"{cold}: kernels the warm-up (tests/warm_kernels.py) does not reach: add a call "
        "of the public API that runs them to one of its PARTS"
    )


def test_each_worker_starts_with_its_own_part():
    n = len(warm_kernels.PARTS)
    assert n == 2
    assert warm_kernels.order("gw0") == [0, 1]
    assert warm_kernels.order("gw1") == [1, 0]
    assert warm_kernels.order("gw2") == [0, 1]
    assert warm_kernels.order("master") == [0, 1]


def test_a_part_another_worker_holds_is_waited_for_then_run(monkeypatch, tmp_path):
    """The second worker waits while the first compiles a part, then runs it (loading
    what the first wrote); past its wait it runs the part anyway, never skips it."""
    fcntl = pytest.importorskip("fcntl")
    ran = []
    monkeypatch.setattr(
        warm_kernels,
        "PARTS",
        (
            lambda: ran.append(("p0", time.monotonic())),
            lambda: ran.append(("p1", time.monotonic())),
        ),
    )
    monkeypatch.setattr(warm_kernels, "_lock_path", lambda part: str(tmp_path / f"{part}.lock"))
    with open(tmp_path / "1.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # "gw1" compiling part 1
        start = time.monotonic()
        assert warm_kernels.warm("gw0", wait_s=0.6) == []
    assert [p for p, _ in ran] == ["p0", "p1"]
    assert ran[0][1] - start < 0.3  # its own part at once
    assert ran[1][1] - start >= 0.6  # the other's after waiting (here: past the wait)
    ran.clear()
    assert warm_kernels.warm("gw1", wait_s=0.6) == []  # the locks are free again
    assert [p for p, _ in ran] == ["p1", "p0"]


def test_an_error_is_returned_not_raised(monkeypatch, tmp_path):
    def broken():
        raise RuntimeError("no compiler")

    monkeypatch.setattr(warm_kernels, "PARTS", (broken, lambda: None))
    monkeypatch.setattr(warm_kernels, "_lock_path", lambda part: str(tmp_path / f"{part}.lock"))
    assert warm_kernels.warm("gw0") == ["broken: RuntimeError: no compiler"]


@pytest.mark.parametrize(
    "source, collect_only, env, want",
    [
        ("TESTPATHS", False, None, True),  # ./dev test, CI
        ("TESTPATHS", False, "0", False),  # RC_TESTS_WARM_KERNELS=0
        ("ARGS", False, None, False),  # a selection: compiles only what it calls
        ("TESTPATHS", True, None, False),  # --collect-only runs nothing
    ],
)
def test_only_whole_suite_runs_ask_the_workers_to_warm(
    monkeypatch, pytestconfig, source, collect_only, env, want
):
    conftest = root_conftest(pytestconfig)

    if env is None:
        monkeypatch.delenv(conftest.WARM_ENV, raising=False)
    else:
        monkeypatch.setenv(conftest.WARM_ENV, env)
    config = SimpleNamespace(
        args_source=getattr(pytest.Config.ArgsSource, source),
        option=SimpleNamespace(collectonly=collect_only),
    )
    node = SimpleNamespace(config=config, workerinput={})
    conftest.pytest_configure_node(node)
    assert node.workerinput["rc_warm_kernels"] is want
