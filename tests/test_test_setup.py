"""tests/conftest.py: the hypothesis profiles, the ``--rc-exhaustive`` option and the
suite's time-budget line (pytester in-process, about a second in all)."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest
from shared_setup import root_conftest

pytest_plugins = ["pytester"]
hypothesis = pytest.importorskip("hypothesis")


@pytest.fixture
def setup_module():
    """tests/conftest.py loaded under its own name, to register as a plugin in pytester runs."""
    spec = importlib.util.spec_from_file_location(
        "rc_tests_conftest", Path(__file__).with_name("conftest.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_ci_profile_is_derandomised_writes_no_database_and_prints_the_blob():
    ci = hypothesis.settings.get_profile("ci")
    assert (
        ci.derandomize is True
        and ci.database is None
        and ci.print_blob is True
        and ci.deadline is None
    )
    dev = hypothesis.settings.get_profile("dev")
    assert dev.derandomize is False and dev.database is not None


@pytest.mark.parametrize(
    "environ,profile",
    [
        ({}, "dev"),
        ({"CI": "true"}, "ci"),
        ({"CI": "1"}, "ci"),
        ({"CI": "false"}, "dev"),
        ({"CI": ""}, "dev"),
        ({"CI": "true", "HYPOTHESIS_PROFILE": "explore"}, "explore"),
        ({"HYPOTHESIS_PROFILE": "ci"}, "ci"),
    ],
)
def test_the_profile_follows_ci_unless_named(setup_module, environ, profile):
    assert setup_module.hypothesis_profile(environ) == profile


SWEEP = """
import pytest

def test_small():
    pass

@pytest.mark.exhaustive
@pytest.mark.parametrize("n", [1, 2, 3])
def test_sweep(n):
    pass
"""


def test_exhaustive_sweeps_are_skipped_and_counted_by_default(pytester, setup_module, monkeypatch):
    monkeypatch.delenv(setup_module.EXHAUSTIVE_ENV, raising=False)
    pytester.makepyfile(test_s=SWEEP)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rs", plugins=[setup_module])
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(
        ["*exhaustive sweep: run with --rc-exhaustive or RC_TESTS_EXHAUSTIVE=1*"]
    )


@pytest.mark.parametrize("how", ["option", "environment"])
def test_the_option_or_the_environment_runs_the_sweeps(pytester, setup_module, monkeypatch, how):
    pytester.makepyfile(test_s=SWEEP)
    args = ["-p", "no:cacheprovider"]
    if how == "option":
        monkeypatch.delenv(setup_module.EXHAUSTIVE_ENV, raising=False)
        args.append("--rc-exhaustive")
    else:
        monkeypatch.setenv(setup_module.EXHAUSTIVE_ENV, "1")
    pytester.runpytest_inprocess(*args, plugins=[setup_module]).assert_outcomes(passed=4)


def test_the_whole_suite_prints_its_time_against_the_budget(pytester, setup_module, monkeypatch):
    pytester.makeini("[pytest]\ntestpaths = sub\n")
    pytester.mkpydir("sub")
    (pytester.path / "sub" / "test_a.py").write_text("def test_a():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", plugins=[setup_module])
    result.stdout.fnmatch_lines(
        [
            "test budget: the suite took * s wall (no xdist workers), within its 6-minute budget",
            "test budget: * CPU-s (pytest, its xdist workers and the processes they started), "
            "* minutes on 2 idle cores",
        ]
    )
    assert setup_module.cpu_seconds() >= time.process_time() > 0
    monkeypatch.setattr(
        setup_module, "_STARTED", setup_module._STARTED - 400
    )  # over budget: a warning, not a failure
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", plugins=[setup_module])
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["WARNING test budget: the suite took * s wall *, over its 6-minute budget*"]
    )
    # a chosen file or directory is not the whole suite, a collection runs nothing: no budget line
    for args in (["sub"], ["--collect-only"]):
        result = pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", *args, plugins=[setup_module]
        )
        assert "test budget" not in result.stdout.str(), args


def test_modules_with_a_slow_test_come_first_each_whole_and_in_order(pytester, setup_module):
    """Long tests start first under xdist (it hands tests out in collection order):
    a module with a ``slow`` test moves to the front, whole (its module fixtures are set
    up once) and in its own order; the other modules keep theirs."""
    pytester.makepyfile(
        test_a="def test_a1():\n    pass\n\ndef test_a2():\n    pass\n",
        test_b=(
            "import pytest\n\ndef test_b1():\n    pass\n\n@pytest.mark.slow\n"
            "def test_b2():\n    pass\n\ndef test_b3():\n    pass\n"
        ),
        test_c="def test_c1():\n    pass\n",
    )
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--collect-only", "-q", plugins=[setup_module]
    )
    ids = [line for line in result.outlines if "::" in line]
    assert ids == [
        "test_b.py::test_b1",
        "test_b.py::test_b2",
        "test_b.py::test_b3",
        "test_a.py::test_a1",
        "test_a.py::test_a2",
        "test_c.py::test_c1",
    ]


CASES = """
import pytest

@pytest.fixture(params=["linear", "search"])
def counting(request):
    return request.param

@pytest.mark.default_cases(dict(kind="int", screen=0, counting="linear"), dict(kind="float", screen=1))
@pytest.mark.parametrize("kind", ["int", "float"])
@pytest.mark.parametrize("screen", [0, 1])
def test_sweep(kind, screen, counting):
    pass
"""


def test_default_cases_run_the_named_combinations_and_the_rest_only_when_exhaustive(
    pytester, setup_module, monkeypatch
):
    monkeypatch.delenv(setup_module.EXHAUSTIVE_ENV, raising=False)
    pytester.makepyfile(test_s=CASES)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-v", plugins=[setup_module])
    result.assert_outcomes(passed=3, skipped=5)  # int-0-linear, float-1 with both countings
    passed = sorted(
        line.split("::")[1].split()[0]
        for line in result.stdout.lines
        if line.endswith("%]") and " PASSED " in line
    )
    assert passed == [
        "test_sweep[linear-0-int]",
        "test_sweep[linear-1-float]",
        "test_sweep[search-1-float]",
    ]
    pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-exhaustive", plugins=[setup_module]
    ).assert_outcomes(passed=8)


@pytest.mark.parametrize(
    "case,message",
    [
        ('dict(kind="int", scren=0)', "names ['scren'], not parameters"),
        ('dict(kind="innt")', "match none of its parameter combinations"),
    ],
)
def test_a_default_case_that_selects_nothing_is_an_error(pytester, setup_module, case, message):
    pytester.makepyfile(test_s=CASES.replace('dict(kind="float", screen=1)', case))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", plugins=[setup_module])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str() + result.stdout.str()


def test_pytester_runs_start_with_torch_already_imported(pytester):
    """pytester removes what an in-process run imported; torch imported a second time in
    the same process crashes it (a segfault in the garbage collector), so the pytester
    fixture of these tests imports it first."""
    import sys

    pytest.importorskip("torch")
    assert "torch" in sys.modules and "numba" in sys.modules
    pytester.makepyfile(
        test_t="import torch\n\ndef test_t():\n    assert torch.ones(1).item() == 1\n"
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    import torch  # the run left it in sys.modules: the same module object, not a second import

    assert sys.modules["torch"] is torch and torch.ones(2).sum().item() == 2


def test_pytester_runs_drop_their_own_modules_and_ask_only_about_what_they_imported(
    pytester, monkeypatch, request
):
    """An in-process run drops its project's modules and keeps every other module it
    imported; only the modules the run imported or replaced are asked about (a module
    bound to the same object restores to itself either way): before, every module of the
    process was, twice a run (thousands of own_module calls, ~30 ms a run in a worker)."""
    conftest = root_conftest(request.config)
    asked, real = [], conftest.own_module
    monkeypatch.setattr(
        conftest, "own_module", lambda name, root: asked.append(name) or real(name, root)
    )
    pytester.makepyfile(
        helper_mod="X = 1\n",
        test_m="import colorsys, helper_mod\n\ndef test_m():\n    assert helper_mod.X == 1\n",
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert "helper_mod" not in sys.modules and "test_m" not in sys.modules  # the run's own
    assert "colorsys" in sys.modules  # imported by the run, kept (never imported twice)
    assert "helper_mod" in asked
    assert len(asked) < len(sys.modules) / 4, len(asked)


def test_own_module_follows_links_and_resolves_each_directory_once(
    tmp_path, monkeypatch, pytestconfig
):
    """The pytester fixture asks ``own_module`` about every module in sys.modules twice per
    in-process run (thousands): resolving each path cost about a second per run. It still
    sees a module under the run's root through a linked directory or a linked file, refuses
    a sibling directory sharing the root's prefix, and resolves each directory once."""
    import os
    import sys
    import types

    conftest = root_conftest(pytestconfig)

    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "m.py").write_text("")
    (tmp_path / "proj0").mkdir()
    (tmp_path / "link").symlink_to(root / "pkg")
    (tmp_path / "filelink.py").symlink_to(root / "pkg" / "m.py")
    files = {
        "rc_t_direct": root / "pkg" / "m.py",
        "rc_t_dirlink": tmp_path / "link" / "m.py",
        "rc_t_filelink": tmp_path / "filelink.py",
        "rc_t_sibling": tmp_path / "proj0" / "m.py",
        "rc_t_elsewhere": Path(pytest.__file__),
    }
    for name, file in files.items():
        module = types.ModuleType(name)
        module.__file__ = str(file)
        monkeypatch.setitem(sys.modules, name, module)
    resolved = []
    real = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda p, **kw: resolved.append(p) or real(p, **kw))
    conftest._real.cache_clear()
    owned = {name for name in files for _ in range(3) if conftest.own_module(name, str(root))}
    assert owned == {"rc_t_direct", "rc_t_dirlink", "rc_t_filelink"}
    assert len(resolved) == len(set(resolved))  # each path resolved once, however often asked


def test_no_test_module_binds_a_top_level_name_twice():
    """A fixture rebound by a later helper of the same name is gone without a word: pytest
    never sees it, and ruff's F811 does not flag decorated functions. Found on a GPU
    machine without ranx: tests/oracles/test_ranx.py's skipping fixture ``_ranx`` was
    rebound by its helper ``_ranx``, so every test there failed on ``import ranx``
    instead of skipping."""
    import ast

    twice = []
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        seen: dict[str, int] = {}
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name in seen:
                    twice.append(
                        f"{path.name}:{node.lineno} {node.name} (first at {seen[node.name]})"
                    )
                seen[node.name] = node.lineno
    assert not twice, twice
