"""The import path of a suite model's module: its folder, the same way every time.

A suite's ``callable: emb.py:f`` (or ``factory``) module may import the modules beside
it (``import helpers``, ``from helpers import scale``, a package folder). Whether that
worked used to depend on what pytest had put on ``sys.path`` (the rootdir, the files it
was given, ``--import-mode``), and a ``helpers`` already imported by another suite (or
by the project's tests) silently stood in for this folder's own.

:func:`folder_imports` makes it one rule: while the model's module is imported, the
suite's folder (and the module's own folder) come first on ``sys.path``; a same-named
module imported from elsewhere is set aside meanwhile (and put back after); the
modules this import brought in from the folders then leave ``sys.modules`` (the
model's module holds them), so another folder's ``helpers.py`` is imported on its own
and a new load reads the files again. Imports run later, inside the model's functions
(``def f(x): import helpers``), do not see the folder: import at the top of the
module.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from pathlib import Path

__all__ = ["folder_imports"]

_lock = threading.RLock()


def _installed(real: str) -> bool:
    """Whether a file belongs to the Python installation: the interpreter's prefixes (a
    virtualenv's included) or a site-packages / dist-packages folder. A project's
    ``.venv`` often lies inside the suite's folder: its packages are not the suite's."""
    parts = Path(real).parts
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix) if p}
    return any(real.startswith(p.rstrip(os.sep) + os.sep) for p in prefixes if p != os.sep)


def _inside(module, dirs: tuple) -> bool:
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        paths = [p for p in getattr(module, "__path__", None) or [] if isinstance(p, str)]
        file = paths[0] if paths else None
    if not file:
        return False
    real = os.path.realpath(file)
    return any(real.startswith(d + os.sep) for d in dirs) and not _installed(real)


def _shadows(top: str, dirs: tuple) -> bool:
    """Whether one of the folders holds a module or package named ``top``."""
    return any(
        os.path.isfile(os.path.join(d, top + ".py"))
        or os.path.isfile(os.path.join(d, top, "__init__.py"))
        for d in dirs
    )


@contextlib.contextmanager
def folder_imports(folders, keep: tuple = ()):
    """Import from ``folders`` (see the module doc). ``keep``: top-level names left as
    they are (the model module's own package, which its caller checks)."""
    dirs = tuple(dict.fromkeys(os.path.realpath(str(f)) for f in folders if f is not None))
    if not dirs:
        yield
        return

    def kept(name: str) -> bool:
        return name.partition(".")[0] in keep or name.startswith("_rc_suite_")

    with _lock:
        aside = {
            name: sys.modules.pop(name)
            for name in list(sys.modules)
            if not kept(name)
            and _shadows(name.partition(".")[0], dirs)
            and not _inside(sys.modules.get(name), dirs)
        }
        before = set(sys.modules)
        sys.path[:0] = dirs
        try:
            yield
        finally:
            for d in dirs:
                with contextlib.suppress(ValueError):
                    sys.path.remove(d)
            for name in [n for n in sys.modules if n not in before and not kept(n)]:
                if _inside(sys.modules.get(name), dirs):
                    del sys.modules[
                        name
                    ]  # the model's module holds them; the next suite imports its own
            sys.modules.update(aside)


def folders_of(path: Path | None, base_dir: Path | None) -> list:
    """The folders a model module imports beside: its own and the suite's."""
    return [
        p for p in ((Path(path).parent if path is not None else None), base_dir) if p is not None
    ]
