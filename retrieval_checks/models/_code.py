"""The code a suite model runs: its module and every local module it imports.

The embedding cache keys a model by this code (:func:`code_digests`), so that changing
a helper module the model imports misses the cache instead of serving the embeddings
of the old helper. A module is **local** when its file lies outside the Python
installation (the standard library, ``site-packages`` / ``dist-packages``) and outside
retrieval-checks itself: the user's own code. From the model's module, the local
modules are found two ways, and both are followed from every local module found:

- at run time: the modules in its namespace (``import helper``), and the modules that
  define its functions and classes (``from helper import scale_fn``), as loaded;
- in its source: every ``import`` / ``from ... import`` statement, at the top or inside
  a function (imported only when the model runs), relative ones included, and
  ``importlib.import_module("name")`` / ``__import__("name")`` with a constant name; a
  module not imported yet is found on ``sys.path`` as Python would find it.

A module imported under a name computed at run time (``import_module(name)``) cannot
be covered: such a model's embeddings are never served from the cache (a
RuntimeWarning names the import). Not covered either: data files a module reads (name
those in the model's ``kwargs``: their contents are hashed).
"""

from __future__ import annotations

import ast
import hashlib
import os
import site
import sys
import sysconfig
import types
from pathlib import Path

from .._paths import check_file
from ..errors import InputError

__all__ = ["model_code_files", "code_digests", "file_sha256", "file_digest"]

_MAX_FILES = 5000  # a model importing more local files than this is hashed up to here, then refused


def _installed_roots() -> tuple[str, ...]:
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            roots.add(sysconfig.get_paths()[key])
        except (KeyError, OSError):  # pragma: no cover - a broken installation scheme
            pass
    try:
        roots.update(site.getsitepackages())
        roots.add(site.getusersitepackages())
    except AttributeError:  # pragma: no cover - virtualenv's old site module
        pass
    roots.add(str(Path(__file__).resolve().parents[1]))  # retrieval-checks itself
    out = []
    for r in roots:
        real = os.path.realpath(r)
        if real and real != os.sep:
            out.append(real.rstrip(os.sep) + os.sep)
    return tuple(out)


def _is_local(path: str, roots: tuple[str, ...]) -> bool:
    real = os.path.realpath(path)
    parts = Path(real).parts
    return not (real.startswith(roots) or "site-packages" in parts or "dist-packages" in parts)


def _source_of(module) -> str | None:
    file = getattr(module, "__file__", None)
    if not isinstance(file, str) or not file:
        return None
    if file.endswith((".pyc", ".pyo")):
        source = file[:-1]
        if os.path.isfile(source):
            return source
    return file if os.path.isfile(file) else None


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _imports(
    tree: ast.AST, module_name: str | None, is_package: bool, computed: list | None = None
) -> set[str]:
    """The dotted names the source imports (anywhere in it), relative ones resolved;
    ``computed`` gets the line of each import under a name computed at run time."""
    names: set[str] = set()
    package = (module_name if is_package else (module_name or "").rpartition(".")[0]) or ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.update(_parents(alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                if node.level - 1 > len(parts) or not parts:
                    continue  # a relative import outside a package: Python refuses it too
                base = ".".join(parts[: len(parts) - (node.level - 1)])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            if not base:
                continue
            names.update(_parents(base))
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Call):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if called not in ("import_module", "__import__"):
                continue
            if (
                node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names.update(_parents(node.args[0].value))
            elif computed is not None:
                computed.append(node.lineno)
    return names


def _module_file(folder: str, name: str) -> str | None:
    """``folder/name.py``, else ``folder/name/__init__.py``, else None."""
    for path in (os.path.join(folder, f"{name}.py"), os.path.join(folder, name, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def _find_file(
    name: str, near: str, roots: tuple[str, ...], folders: tuple = (), beside_only: bool = False
) -> str | None:
    """Where ``import name`` would find a module not imported yet (or imported from the
    suite's folders, whose modules leave ``sys.modules`` after the model's import: see
    :mod:`._folders`): in ``folders``, next to the importing file, then on ``sys.path``,
    as ``a/b.py`` or ``a/b/__init__.py``; ``beside_only``: in ``folders`` and next to the
    importing file only."""
    parent, _, last = name.rpartition(".")
    package = sys.modules.get(parent) if parent else None
    if package is not None:  # a submodule: in its (imported) package's folders
        rel = Path(last)
        dirs = [p for p in getattr(package, "__path__", None) or [] if isinstance(p, str)]
    else:
        rel = Path(*name.split("."))
        dirs = [*folders, os.path.dirname(near)]
        if not beside_only:
            dirs += [p or os.getcwd() for p in sys.path if isinstance(p, str)]
    for d in dirs:
        cand = _module_file(d, str(rel)) if os.path.isdir(d) else None
        if cand is not None:
            return cand if _is_local(cand, roots) else None
    return None


def _referenced(module) -> list:
    """Modules in ``module``'s namespace and those defining its functions and classes."""
    out = []
    try:
        values = list(vars(module).values())
    except TypeError:
        return out
    for value in values:
        if isinstance(value, types.ModuleType):
            out.append(value)
            continue
        try:
            name = getattr(value, "__module__", None)
        except Exception:  # a proxy object whose attributes raise
            continue
        if isinstance(name, str) and name in sys.modules:
            out.append(sys.modules[name])
    return out


def model_code_files(
    module, always: str | os.PathLike | None = None, computed: list | None = None, folders=()
) -> list[Path]:
    """The source files of ``module`` and of every local module it imports (see the
    module doc), sorted; ``always``: a file included even when it is not local (the
    model's own module, installed in site-packages); ``computed`` gets ``file:line``
    of each import under a name computed at run time (which the files cannot cover);
    ``folders``: the folders the model's module imported beside (its own, the suite's)."""
    roots = _installed_roots()
    folders = tuple(str(f) for f in folders if f is not None)
    files: dict[str, Path] = {}
    if always is not None:
        files[os.path.realpath(always)] = Path(always)
    todo: list = [(module, None)]
    done: set[str] = set()
    while todo:
        mod, file = todo.pop()
        name = None
        if mod is not None:
            file = _source_of(mod)
            name = getattr(mod, "__name__", None)
            if file is None:
                continue
        real = os.path.realpath(file)
        if real in done or (mod is not module and not _is_local(real, roots)):
            continue
        done.add(real)
        files[real] = Path(file)
        if len(files) > _MAX_FILES:
            raise InputError(
                f"model module {getattr(module, '__name__', module)!r} imports more than {_MAX_FILES} "
                "local files; the embedding cache cannot key it by its code. Turn the cache off "
                "(--rc-embedding-cache none), or install the package it imports."
            )
        if mod is not None:
            todo.extend((m, None) for m in _referenced(mod))
            if isinstance(name, str):  # parent packages: their __init__ runs on import
                todo.extend((sys.modules[p], None) for p in _parents(name)[:-1] if p in sys.modules)
        try:
            with open(file, "rb") as fh:
                tree = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError):
            continue  # not Python source (an extension module): its bytes are hashed all the same
        lines: list = []
        for imported in _imports(tree, name, os.path.basename(file) == "__init__.py", lines):
            loaded = sys.modules.get(imported)
            # a top-level name is looked up beside the model first, where its import finds it
            # (the suite's folders go first on sys.path while it is imported): a module of the
            # same name already loaded from elsewhere is another file and must not key it
            beside = (
                None
                if "." in imported
                else _find_file(imported, file, roots, folders, beside_only=True)
            )
            if beside is not None and (
                loaded is None
                or _source_of(loaded) is None
                or os.path.realpath(_source_of(loaded)) != os.path.realpath(beside)
            ):
                if os.path.realpath(beside) not in done:
                    todo.append((None, beside))
            elif loaded is not None:
                todo.append((loaded, None))
            else:
                found = _find_file(imported, file, roots, folders)
                if found is not None and os.path.realpath(found) not in done:
                    todo.append((None, found))
        if name is None:  # a file reached by its path: its relative imports, by path too
            for found in _relative_files(tree, file):
                if os.path.realpath(found) not in done:
                    todo.append((None, found))
        if computed is not None:
            computed.extend(f"{file}:{line}" for line in sorted(lines))
    return sorted(files.values(), key=str)


def _relative_files(tree: ast.AST, file: str) -> list[str]:
    """The files a module known only by its path (a package beside the suite, reached
    as a file) imports relatively: ``from .cfg import X``, ``from . import cfg``,
    ``from ..util import y``, resolved from its folder, with the ``__init__.py`` of each
    package on the way (they run on import). Without this an edit to ``pkg/cfg.py``
    left the embedding cache's key unchanged (a new user's trial: stale embeddings
    served, the gate passed)."""
    out = []
    here = os.path.dirname(os.path.abspath(file))
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        folder = here
        for _ in range(node.level - 1):
            folder = os.path.dirname(folder)
        init = os.path.join(folder, "__init__.py")
        if os.path.isfile(init):
            out.append(init)
        parts = node.module.split(".") if node.module else []
        for i in range(len(parts)):  # the packages on the way, then the module
            found = _module_file(os.path.join(folder, *parts[:i]), parts[i])
            if found is not None:
                out.append(found)
        target = os.path.join(folder, *parts)
        for alias in node.names:  # names that are submodules: from . import cfg
            if alias.name != "*":
                found = _module_file(target, alias.name)
                if found is not None:
                    out.append(found)
    return out


def code_digests(module, always=None, computed: list | None = None, folders=()) -> dict[str, str]:
    """SHA-256 of each file of :func:`model_code_files`, keyed by its path relative to
    the model module's folder (so a moved checkout keys the same); ``computed``,
    ``folders``: as there."""
    base = os.path.dirname(os.path.realpath(_source_of(module) or always or "."))
    out = {}
    for path in model_code_files(module, always, computed, folders):
        out[os.path.relpath(os.path.realpath(path), base)] = file_sha256(
            path, "this module of the model's code"
        )
    return out


def file_sha256(path, what: str) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB chunks; an unreadable file is an
    InputError saying it cannot read ``what`` (e.g. "the weights file")."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what} ({type(exc).__name__}: {exc}).") from None
    return h.hexdigest()


def file_digest(path, what: str = "file") -> str:
    """The SHA-256 of a model's file (weights, checkpoint, a file a kwarg names), which
    must exist and be a regular file (checked as every file a suite names)."""
    return file_sha256(check_file(path, what=what), f"the {what}")
