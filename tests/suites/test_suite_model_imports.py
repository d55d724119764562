"""Issue 25: a suite model's module imports its sibling modules the same way whatever
pytest was given (rootdir, file arguments, import mode): the suite's folder is on the
import path while the module is imported, and two folders' same-named helpers never
stand in for each other (nor for a same-named module imported from elsewhere)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from retrieval_checks import SuiteRunner, load_suite

SUITE = (
    "datasets: {a: {queries: data.npz}}\nmodels: {m: {callable: 'TARGET'}}\n"
    "checks: [{metric: map, at_least: 0.001}]\n"
)


def _folder(root, name, scale, target="emb.py:f", helper="helpers"):
    d = root / name
    d.mkdir()
    x = np.random.default_rng(0).normal(size=(12, 4)).astype(np.float32)
    np.savez(d / "data.npz", inputs=x, labels=np.repeat(np.arange(4), 3))
    (d / "emb.py").write_text(f"from {helper} import scale\n\ndef f(x):\n    return scale(x)\n")
    (d / f"{helper}.py").write_text(
        f"SCALE = {scale}\n\ndef scale(x):\n    return x * SCALE + SCALE\n"
    )
    (d / "rc_s.yaml").write_text(SUITE.replace("TARGET", target))
    return d, x


def _first_value(folder):
    suite = load_suite(folder / "rc_s.yaml")
    runner = SuiteRunner()
    runner.run(suite, suite.cases[0])
    return float(runner.part(suite, "m", "a", "queries").embeddings[0, 0])


def test_a_sibling_module_imports_without_the_folder_on_sys_path(tmp_path):
    d, x = _folder(tmp_path, "s1", 3.0, helper="helpers_s1")
    assert str(d) not in sys.path
    before = set(sys.modules)
    assert _first_value(d) == pytest.approx(x[0, 0] * 3 + 3)
    assert str(d) not in sys.path  # the folder was on the path only while the module was imported
    assert "helpers_s1" not in sys.modules and not (set(sys.modules) - before) & {"helpers_s1"}


def test_two_folders_same_helper_name_each_use_their_own(tmp_path):
    (d1, x), (d2, _) = _folder(tmp_path, "s1", 2.0), _folder(tmp_path, "s2", -1.0)
    assert _first_value(d1) == pytest.approx(x[0, 0] * 2 + 2)
    assert _first_value(d2) == pytest.approx(-x[0, 0] - 1)


def test_a_same_named_module_imported_elsewhere_is_neither_used_nor_replaced(tmp_path, monkeypatch):
    other = type(sys)("helpers")
    other.scale = (
        lambda x: x * 0
    )  # a different 'helpers' already imported (e.g. the project's tests' own)
    monkeypatch.setitem(sys.modules, "helpers", other)
    d, x = _folder(tmp_path, "s1", 5.0)
    assert _first_value(d) == pytest.approx(x[0, 0] * 5 + 5)
    assert sys.modules["helpers"] is other


def test_a_dotted_target_also_sees_its_siblings(tmp_path):
    d, x = _folder(tmp_path, "s1", 4.0, target="emb:f", helper="helpers_dotted")
    assert _first_value(d) == pytest.approx(x[0, 0] * 4 + 4)
    assert "helpers_dotted" not in sys.modules


pytest_plugins = ["pytester"]


@pytest.mark.parametrize(
    "args",
    [(), ("suites/rc_s.yaml",), ("--import-mode=importlib",), ("--rootdir=suites", "suites")],
)
def test_the_same_under_any_pytest_arguments(pytester, args):
    d, _ = _folder(pytester.path, "suites", 2.0, helper="helpers_args")
    pytester.makeconftest("")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--rc-history", "none", *args)
    result.assert_outcomes(passed=1)


def test_installed_packages_inside_the_suite_folder_stay_imported(tmp_path, monkeypatch):
    """A project's ``.venv`` often lies inside the suite's folder: a package the model
    imports from its site-packages for the first time is installed code, not the suite's,
    and must stay in sys.modules (imported twice, torch and its kin crash)."""
    import uuid

    from retrieval_checks.models._folders import folder_imports

    site = tmp_path / ".venv" / "lib" / "python3" / "site-packages"
    site.mkdir(parents=True)
    installed, local = f"rcinst_{uuid.uuid4().hex[:8]}", f"rclocal_{uuid.uuid4().hex[:8]}"
    (site / f"{installed}.py").write_text("X = 1\n")
    (tmp_path / f"{local}.py").write_text("Y = 2\n")
    monkeypatch.syspath_prepend(str(site))
    try:
        with folder_imports([tmp_path]):
            __import__(installed)
            __import__(local)
        assert installed in sys.modules  # installed code: kept
        assert local not in sys.modules  # the suite's own module: the model's module holds it
    finally:
        sys.modules.pop(installed, None)
        sys.modules.pop(local, None)
