"""The embedding cache's key covers the model's code as loaded: the model module and
every local module it imports (at import time or inside a function), so changing a
helper module misses the cache instead of serving the old helper's embeddings.
Installed packages (site-packages) and the standard library are not hashed."""

from __future__ import annotations

import sys
import textwrap
import uuid

import numpy as np
import pytest

from retrieval_checks.suites import SuiteRunner, load_suite

X = np.random.default_rng(0).normal(size=(12, 5)).astype(np.float32)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A suite folder with a package ``<pkg>`` (unique per test); its modules are
    forgotten afterwards, as a new pytest session would."""
    pkg = f"rcpkg_{uuid.uuid4().hex[:8]}"
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text("")
    np.savez(tmp_path / "d.npz", inputs=X, labels=np.repeat(np.arange(4), 3))
    yield tmp_path, pkg
    for name in [n for n in sys.modules if pkg in n or n.startswith("_rc_suite_")]:
        del sys.modules[name]


def _suite(root, target):
    (root / "s.yaml").write_text(
        f"datasets: {{a: {{queries: d.npz}}}}\nmodels: {{m: {{callable: '{target}'}}}}\n"
        "checks: [{metric: map, at_least: 0.1}]\n"
    )
    return load_suite(root / "s.yaml")


def _new_session(pkg):
    """A new session imports the modules again (a second pytest run)."""
    for name in [n for n in sys.modules if pkg in n or n.startswith("_rc_suite_")]:
        del sys.modules[name]


def _embed_twice(root, pkg, target, change):
    first = SuiteRunner(cache_dir=root / "cache")
    before = first.part(_suite(root, target), "m", "a", "queries").embeddings.copy()
    change()
    _new_session(pkg)
    second = SuiteRunner(cache_dir=root / "cache")
    after = second.part(_suite(root, target), "m", "a", "queries").embeddings
    return before, after, second


@pytest.mark.parametrize("how", ["relative", "absolute", "inside_function", "module_attribute"])
def test_changing_a_helper_module_misses_the_cache(project, how):
    root, pkg = project
    use = {
        "relative": ("from .helper import scale\n", "scale"),
        "absolute": (f"from {pkg}.helper import scale\n", "scale"),
        "inside_function": ("", f"__import__('{pkg}.helper', fromlist=['x']).scale"),
        "module_attribute": (f"import {pkg}.helper as helper\n", "helper.scale"),
    }[how]
    if how == "inside_function":  # imported when the model runs, not when the module is imported
        code = f"def f(x):\n    from {pkg} import helper\n    return x[:, :3] * helper.scale\n"
    else:
        code = use[0] + f"def f(x):\n    return x[:, :3] * {use[1]}\n"
    (root / pkg / "enc.py").write_text(code)
    (root / pkg / "helper.py").write_text("scale = 2.0\n")
    before, after, second = _embed_twice(
        root, pkg, f"{pkg}.enc:f", lambda: (root / pkg / "helper.py").write_text("scale = -3.0\n")
    )
    np.testing.assert_array_equal(before, X[:, :3] * 2.0)
    assert second.cache.misses == 1 and second.cache.hits == 0 and second.embedded == 1
    np.testing.assert_array_equal(
        after, X[:, :3] * -3.0
    )  # the changed helper's numbers, not the cached ones


def test_a_helper_next_to_a_file_model_on_sys_path(project, monkeypatch):
    """A ``.py`` model that imports a module found on sys.path (a conftest put its
    folder there)."""
    root, pkg = project
    monkeypatch.syspath_prepend(str(root / pkg))
    helper = f"{pkg}_flat_helper"
    (root / pkg / f"{helper}.py").write_text("scale = 2.0\n")
    (root / pkg / "enc.py").write_text(
        f"import {helper}\ndef f(x):\n    return x[:, :3] * {helper}.scale\n"
    )

    def change():
        (root / pkg / f"{helper}.py").write_text("scale = 5.0\n")
        sys.modules.pop(helper, None)

    before, after, second = _embed_twice(root, pkg, f"{pkg}/enc.py:f", change)
    assert second.embedded == 1
    np.testing.assert_array_equal(after, X[:, :3] * 5.0)


@pytest.mark.parametrize(
    "init",
    [
        "from .net import scale\n",
        "from . import net\nscale = net.scale\n",
        "def _load():\n    from .net import scale\n    return scale\nscale = _load()\n",
    ],
)
def test_a_package_beside_a_file_model_is_followed_through_its_relative_imports(project, init):
    """A ``.py`` model (``enc.py:f``) that imports a package beside it whose
    ``__init__.py`` reaches its modules relatively (a new user's trial: an edit to
    ``pkg/net.py`` left the cache key unchanged, and the stale embeddings passed the
    gate)."""
    root, pkg = project
    (root / pkg / "__init__.py").write_text(init)
    (root / pkg / "net.py").write_text("scale = 2.0\n")
    (root / "enc.py").write_text(
        f"from {pkg} import scale\ndef f(x):\n    return x[:, :3] * scale\n"
    )

    before, after, second = _embed_twice(
        root, pkg, "enc.py:f", lambda: (root / pkg / "net.py").write_text("scale = 7.0\n")
    )
    np.testing.assert_array_equal(before, X[:, :3] * 2.0)
    assert second.cache.hits == 0 and second.embedded == 1
    np.testing.assert_array_equal(after, X[:, :3] * 7.0)


def test_an_unchanged_helper_still_hits_and_installed_packages_are_not_hashed(project):
    root, pkg = project
    (root / pkg / "enc.py").write_text(
        "import json, numpy\nfrom .helper import scale\n"
        "def f(x):\n    return numpy.asarray(x)[:, :3] * scale\n"
    )
    (root / pkg / "helper.py").write_text("scale = 2.0\n")
    before, after, second = _embed_twice(root, pkg, f"{pkg}.enc:f", lambda: None)
    assert second.cache.hits == 1 and second.embedded == 0
    np.testing.assert_array_equal(before, after)


def test_code_files_of_the_key_are_listed(project):
    from retrieval_checks.models._code import model_code_files

    root, pkg = project
    (root / pkg / "enc.py").write_text(
        textwrap.dedent("""
        import numpy
        from . import helper
        def f(x):
            from .lazy import g
            return g(x)
    """)
    )
    (root / pkg / "helper.py").write_text("from .deep import k\n")
    (root / pkg / "deep.py").write_text("k = 1\n")
    (root / pkg / "lazy.py").write_text("def g(x):\n    return x\n")
    _new_session(pkg)
    import importlib

    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(f"{pkg}.enc")
    finally:
        sys.path.remove(str(root))
    names = sorted(p.name for p in model_code_files(module))
    assert names == ["__init__.py", "deep.py", "enc.py", "helper.py", "lazy.py"]


def test_a_module_imported_under_a_computed_name_is_never_served_from_the_cache(project):
    """The key cannot tell which code such a model runs: it is computed afresh each
    session, with a warning naming the import."""
    root, pkg = project
    (root / pkg / "enc.py").write_text(
        "import importlib\nWHICH = 'helper'\n"
        "def f(x):\n    mod = importlib.import_module(__package__ + '.' + WHICH)\n"
        "    return x[:, :3] * mod.scale\n"
    )
    (root / pkg / "helper.py").write_text("scale = 2.0\n")
    with pytest.warns(
        RuntimeWarning,
        match=r"enc\.py:4 imports a module under a name computed at run time.*"
        r"computed afresh",
    ):
        before, after, second = _embed_twice(
            root,
            pkg,
            f"{pkg}.enc:f",
            lambda: (root / pkg / "helper.py").write_text("scale = 4.0\n"),
        )
    assert second.embedded == 1 and second.cache.hits == 0
    np.testing.assert_array_equal(after, X[:, :3] * 4.0)


def test_a_kwarg_naming_a_directory_keys_by_its_files(project):
    """kwargs: {assets: folder}: the model reads files there; changing one misses."""
    root, pkg = project
    (root / "assets").mkdir()
    np.save(root / "assets" / "w.npy", np.full(3, 2.0, np.float32))
    (root / pkg / "enc.py").write_text(
        "import os, numpy as np\ndef f(x, assets):\n"
        "    return x[:, :3] * np.load(os.path.join(assets, 'w.npy'))\n"
    )
    (root / "s.yaml").write_text(
        f"datasets: {{a: {{queries: d.npz}}}}\nmodels: {{m: {{callable: '{pkg}.enc:f', "
        f"kwargs: {{assets: {root / 'assets'}}}}}}}\n"
        "checks: [{metric: map, at_least: 0.1}]\n"
    )
    first = SuiteRunner(cache_dir=root / "cache")
    first.part(load_suite(root / "s.yaml"), "m", "a", "queries")
    np.save(root / "assets" / "w.npy", np.full(3, -1.0, np.float32))
    _new_session(pkg)
    second = SuiteRunner(cache_dir=root / "cache")
    after = second.part(load_suite(root / "s.yaml"), "m", "a", "queries").embeddings
    assert second.embedded == 1
    np.testing.assert_array_equal(after, X[:, :3] * -1.0)


def test_kwargs_that_are_separators_or_nested_paths(project):
    """ "." or "/" as a kwarg (a separator) is not read as the folder to hash; a path
    inside a list of kwargs is."""
    from types import SimpleNamespace

    from retrieval_checks.models import model_fingerprint

    root, pkg = project
    (root / pkg / "enc.py").write_text("def f(x, sep='.', paths=()):\n    return x[:, :3]\n")
    np.save(root / "w.npy", np.ones(3))
    model = SimpleNamespace(
        name="m",
        kind="callable",
        target=f"{pkg}.enc:f",
        path=None,
        base_dir=root,
        kwargs={"sep": ".", "paths": ["w.npy"]},
        settings={},
    )
    before = model_fingerprint(model)
    (root / "unrelated.txt").write_text("changes in the suite folder do not matter")
    assert model_fingerprint(model) == before
    np.save(root / "w.npy", np.zeros(3))
    assert model_fingerprint(model) != before


def test_a_helper_in_the_suite_folder_of_a_model_in_a_subfolder(project):
    """models/enc.py imports helpers.py from the suite's folder (which leads sys.path
    only while the model's module is imported, and whose modules leave sys.modules
    after): the key still covers it."""
    root, pkg = project
    helper = f"{pkg}_suite_helper"
    (root / f"{helper}.py").write_text("scale = 2.0\n")
    (root / "models").mkdir()
    (root / "models" / "enc.py").write_text(
        f"from {helper} import scale\ndef f(x):\n    return x[:, :3] * scale\n"
    )

    def change():
        (root / f"{helper}.py").write_text("scale = 6.0\n")
        sys.modules.pop(helper, None)

    before, after, second = _embed_twice(root, pkg, "models/enc.py:f", change)
    np.testing.assert_array_equal(before, X[:, :3] * 2.0)
    assert second.embedded == 1
    np.testing.assert_array_equal(after, X[:, :3] * 6.0)


def test_a_same_named_module_loaded_from_elsewhere_does_not_key_the_model(tmp_path, monkeypatch):
    """``import helpers`` inside the model's function finds the ``helpers.py`` beside it
    (the suite's folder goes first on sys.path): an unrelated ``helpers`` already in
    sys.modules (another suite's, an installed one) is another file and must not stand
    for it, or changing the real helper would be served from the cache."""
    import importlib.util
    import types

    from retrieval_checks.models._code import model_code_files

    suite, other = tmp_path / "suite", tmp_path / "other"
    suite.mkdir()
    other.mkdir()
    (suite / "helpers.py").write_text("SCALE = 2\n")
    (other / "helpers.py").write_text("SCALE = 3\n")
    name = f"rcmodel_{uuid.uuid4().hex[:8]}"
    (suite / f"{name}.py").write_text(
        "def embed(x):\n    import helpers\n    return x * helpers.SCALE\n"
    )
    stranger = types.ModuleType("helpers")
    stranger.__file__ = str(other / "helpers.py")
    monkeypatch.setitem(sys.modules, "helpers", stranger)
    spec = importlib.util.spec_from_file_location(name, suite / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    files = {p.resolve() for p in model_code_files(module, folders=[suite])}
    assert (suite / "helpers.py").resolve() in files
    assert (other / "helpers.py").resolve() not in files
