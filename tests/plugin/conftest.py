"""In-process pytester runs of the plugin's tests keep the modules they import.

pytester restores ``sys.modules`` after each in-process run, dropping what the run
imported; torch, numba and numpy's or scipy's extension modules cannot be imported a
second time in one process (``cannot load module more than once per process``, or
memory corruption), and the next test would import them again. Here only the modules of the test's own project (files under
``pytester.path``: its test modules, suite model modules and their helpers) are
dropped, so that two runs of one project (or two projects) never share them."""

from __future__ import annotations

import sys

import pytest
from _pytest.pytester import SysModulesSnapshot


@pytest.fixture
def pytester(pytester, monkeypatch):
    root = str(pytester.path)

    def snapshot():
        def preserve(name: str) -> bool:
            file = getattr(sys.modules.get(name), "__file__", None)
            return not (isinstance(file, str) and file.startswith(root))

        return SysModulesSnapshot(preserve=preserve)

    monkeypatch.setattr(pytester, "_Pytester__take_sys_modules_snapshot", snapshot)  # each in-process run
    pytester._sys_modules_snapshot = snapshot()  # and the test's end (taken by pytester before this fixture ran)
    return pytester
