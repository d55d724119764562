"""Turning a dataset's inputs into embeddings: model runners and their cache.

- :func:`embed` runs a torch module (or any callable) over an array of inputs in
  batches, in eval mode and without autograd, on a chosen device, and restores the
  module's training mode afterwards.
- :func:`load_model` builds the callable a suite's model names: a ``module:function``
  (a dotted module, or a ``.py`` file relative to the suite), a TorchScript file, or a
  ``torch.export`` program (``torch.export.save``), or a factory returning a torch
  module plus a weights file read with
  ``torch.load(weights_only=True)`` (or a ``.safetensors`` file).
- :class:`EmbeddingCache` stores computed embeddings on disk under a content hash of
  the model (its code file, function name, keyword arguments and weights or
  TorchScript bytes) and of the inputs (bytes, dtype, shape), so a second run does not
  recompute them; writes are atomic, so parallel workers can share the directory.
  The hash covers the model's own file, not the modules it imports: clear the cache
  (``pytest --cache-clear``) after changing those.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..errors import InputError

__all__ = ["embed", "load_model", "model_fingerprint", "EmbeddingCache"]

_CACHE_FORMAT = "retrieval-checks-embeddings-1"


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def require_torch(what: str):
    """The torch module, or an InputError saying that ``what`` needs PyTorch."""
    torch = _torch()
    if torch is None:
        raise InputError(f"{what} needs PyTorch (pip install torch).")
    return torch


def resolve_device(device: str | None) -> str:
    """``auto``/None: cuda when available, else cpu; ``numpy`` (an engine backend) means cpu."""
    torch = _torch()
    if device in (None, "", "auto"):
        return "cuda" if torch is not None and torch.cuda.is_available() else "cpu"
    if device == "numpy":
        return "cpu"
    return str(device)


def float_tensor(inputs, torch):
    """``inputs`` as a floating tensor: tensors stay where they are; integer, boolean and
    float64 data become float32."""
    x = inputs if isinstance(inputs, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(inputs))
    if not torch.is_floating_point(x) or x.dtype == torch.float64:
        x = x.float()
    return x


def embed(model, inputs, *, batch_size: int = 256, device: str | None = "auto", part: str | None = None,
          progress: bool | None = None, transform=None, _output: str = "embeddings") -> np.ndarray:
    """Embeddings (n x d float32 numpy) of ``inputs`` (n x ...), computed in batches.

    ``model`` is a ``torch.nn.Module`` (TorchScript included), run in eval mode under
    ``torch.inference_mode()`` on ``device`` (its training mode is restored after), or
    any callable taking an array and returning an (n x d) array or tensor, called once
    on all inputs (with ``part=`` when its signature accepts it: ``queries``,
    ``gallery``, ``images`` or ``captions``).

    ``progress``: a progress bar over batches; None (default) shows one only in a
    terminal and for more than 8 batches, so CI logs stay quiet. ``transform``: for
    torch modules, a callable applied to each batch tensor (on the device) before the
    model, e.g. a rotation for invariance measures. Torch inputs may live on any device.
    """
    torch = _torch()
    is_module = torch is not None and isinstance(model, torch.nn.Module)
    x = float_tensor(inputs, torch) if is_module else np.asarray(inputs)
    if x.ndim < 1 or x.shape[0] == 0:
        raise InputError(f"inputs have shape {tuple(x.shape)}; need at least one row to embed.")
    if not is_module:
        if not callable(model):
            raise InputError(f"model must be a torch module or a callable, got {type(model).__name__}.")
        kwargs = {"part": part} if part is not None and _accepts(model, "part") else {}
        out = model(x, **kwargs)
        return _as_embeddings(out, x.shape[0], getattr(model, "__name__", type(model).__name__))
    if batch_size < 1:
        raise InputError(f"batch_size={batch_size}; use a positive integer.")
    dev = torch.device(resolve_device(device))
    was_training = model.training
    params = list(model.parameters()) if hasattr(model, "parameters") else []
    original_device = params[0].device if params else None
    try:
        model.eval()
        switch_mode = True
    except NotImplementedError:  # torch.export programs keep the mode they were exported in
        switch_mode = False
    outs = []
    bar = None
    try:
        model.to(dev)
        n_batches = -(-x.shape[0] // batch_size)
        if progress is None:
            progress = n_batches > 8 and sys.stderr.isatty()
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=x.shape[0], desc=f"embedding {part or 'inputs'}", unit="row", leave=False)
        with torch.inference_mode():
            for start in range(0, x.shape[0], batch_size):
                batch = x[start:start + batch_size].to(dev)
                out = model(batch if transform is None else transform(batch))
                if not hasattr(out, "detach"):
                    raise InputError(f"the model returned {type(out).__name__}; it must return one tensor of "
                                     f"{_output} {_shape_of(_output)}. Wrap it to pick that output.")
                outs.append(out.detach().float().cpu().numpy())
                if bar is not None:
                    bar.update(min(batch_size, x.shape[0] - start))
    finally:
        if bar is not None:
            bar.close()
        if switch_mode:
            model.train(was_training)
        if original_device is not None:
            model.to(original_device)
    return _as_embeddings(np.concatenate(outs), x.shape[0], type(model).__name__, _output)


def _accepts(fn, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _shape_of(what: str) -> str:
    return f"(n_inputs x {'classes' if what == 'logits' else 'dim'})"


def _as_embeddings(out, n: int, who: str, what: str = "embeddings") -> np.ndarray:
    if hasattr(out, "detach"):
        out = out.detach().float().cpu().numpy()
    arr = np.asarray(out)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise InputError(f"{who} returned shape {arr.shape} for {n} inputs; {what} must be {_shape_of(what)}.")
    if arr.dtype.kind not in "fiu":
        raise InputError(f"{who} returned dtype {arr.dtype}; {what} must be numeric.")
    arr = arr.astype(np.float32, copy=False)
    if not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr).all(axis=1))
        raise InputError(f"{who} returned NaN or Inf {what} for {bad.size} input(s), first rows {bad[:5].tolist()}.")
    return arr


def _local_file(module_name: str, base_dir: Path | None) -> Path | None:
    """The file a target names: a ``.py`` path, or a dotted module found next to the suite."""
    if module_name.endswith(".py"):
        path = Path(module_name)
        return path if path.is_absolute() or base_dir is None else base_dir / path
    if base_dir is None:
        return None
    parts = module_name.split(".")
    for candidate in (base_dir.joinpath(*parts).with_suffix(".py"), base_dir.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def _load_file_module(path: Path, label: str):
    """Import a file under a name unique to its path, so two suites' ``embedder.py``
    never stand in for each other in ``sys.modules``."""
    name = f"_rc_suite_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]}_{path.stem}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return module


def _import_target(target: str, base_dir: Path | None):
    """The object named by ``module:function``: a ``.py`` file or a top-level module next
    to the suite file (imported by path), else an installed module."""
    module_name, _, attr = target.partition(":")
    local = _local_file(module_name, base_dir)
    if local is not None and (module_name.endswith(".py") or "." not in module_name):
        if not local.is_file():
            raise InputError(f"{target}: no file {local}.")
        module = _load_file_module(local, module_name)
    else:
        added = base_dir is not None and str(base_dir) not in sys.path
        if added:
            sys.path.insert(0, str(base_dir))  # packages next to the suite file import as in a test directory
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise InputError(f"{target}: cannot import module {module_name!r} ({exc}). Name an installed module, "
                             "a module next to the suite file, or a .py file relative to it.") from None
        finally:
            if added:
                sys.path.remove(str(base_dir))
        if local is not None and Path(getattr(module, "__file__", "") or "").resolve() != local.resolve():
            raise InputError(f"{target}: {module_name!r} is already imported from {module.__file__}, not from "
                             f"{local}; two suites use packages of the same name. Name the file instead "
                             f"({local.relative_to(base_dir).as_posix()}:{attr}).")
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
            raise InputError(f"{target}: module {module_name!r} has no {attr!r}; its callables: "
                             f"{', '.join(names[:20]) or 'none'}.")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError(f"{target}: {attr!r} is not callable.")
    return obj


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_fingerprint(model) -> str:
    """Content hash of a suite model: its kind, target, kwargs (with the contents of any
    kwarg string that names a file), its code file and its weights or program bytes."""
    parts = {"kind": model.kind, "target": model.target, "kwargs": model.kwargs}
    if model.path is not None:
        parts["file"] = _file_digest(Path(model.path))
    files = {}
    for k, v in sorted((model.kwargs or {}).items()):
        if isinstance(v, str) and v:
            p = Path(v)
            for cand in ((p,) if p.is_absolute() else (Path(model.base_dir or ".") / p, p)):
                if cand.is_file():
                    files[k] = _file_digest(cand)
                    break
    parts["kwarg_files"] = files
    if model.target is not None:
        module_name = model.target.partition(":")[0]
        source = _local_file(module_name, Path(model.base_dir) if model.base_dir is not None else None)
        if source is None:
            try:
                spec = importlib.util.find_spec(module_name)
            except (ImportError, ValueError):
                spec = None
            if spec is not None and spec.origin and os.path.isfile(spec.origin):
                source = Path(spec.origin)
        parts["code"] = _file_digest(source) if source is not None and source.is_file() else None
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def load_model(model):
    """The callable or torch module a suite model names (not for file-based models)."""
    if model.kind == "callable":
        fn = _import_target(model.target, model.base_dir)
        return functools.partial(fn, **model.kwargs) if model.kwargs else fn
    torch = _torch()
    if torch is None:
        raise InputError(f"model {model.name!r} ({model.kind}) needs PyTorch: pip install torch.")
    if model.kind == "torchscript":
        try:
            return torch.jit.load(str(model.path), map_location="cpu")
        except Exception as exc:
            raise InputError(f"{model.path}: not a TorchScript file ({type(exc).__name__}: {exc}). Save one with "
                             "torch.jit.save(torch.jit.script(model), path), or use factory + weights.") from None
    if model.kind == "exported":
        try:
            return torch.export.load(str(model.path)).module()
        except Exception as exc:
            raise InputError(f"{model.path}: not a saved torch.export program ({type(exc).__name__}: {exc}). Save "
                             "one with torch.export.save(torch.export.export(model.eval(), example_inputs, "
                             "dynamic_shapes=...), path).") from None
    if model.kind == "factory":
        factory = _import_target(model.target, model.base_dir)
        module = factory(**model.kwargs)
        if not isinstance(module, torch.nn.Module):
            raise InputError(f"{model.target} returned {type(module).__name__}; a factory must return a "
                             "torch.nn.Module.")
        if model.path is not None:
            module.load_state_dict(_read_weights(Path(model.path), torch))
        return module
    raise InputError(f"model {model.name!r} of kind {model.kind!r} reads embeddings from files; nothing to load.")


def _read_weights(path: Path, torch) -> dict:
    if path.suffix.lower() == ".safetensors":
        try:
            from safetensors.torch import load_file
        except ImportError:
            raise InputError(f"{path}: reading .safetensors needs the safetensors package.") from None
        return load_file(str(path))
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise InputError(f"{path}: torch.load(weights_only=True) refused the file ({type(exc).__name__}: {exc}). "
                         "Save the state_dict (torch.save(model.state_dict(), path)), not the pickled model.") from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise InputError(f"{path}: expected a state_dict (a mapping of tensors), found {type(state).__name__}.")
    return state


class EmbeddingCache:
    """Embeddings on disk, keyed by the model's fingerprint and the inputs' content.

    ``directory=None`` disables it. ``hits`` and ``misses`` count lookups.
    """

    def __init__(self, directory=None):
        self.directory = Path(directory) if directory is not None else None
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(fingerprint: str, inputs: np.ndarray, part: str | None) -> str:
        x = np.ascontiguousarray(inputs)
        if x.dtype.hasobject:
            raise InputError(f"inputs of dtype {x.dtype} (Python objects) cannot be hashed for the cache; store "
                             "numeric arrays.")
        h = hashlib.sha256()
        h.update(f"{_CACHE_FORMAT}|{fingerprint}|{part}|{x.dtype.str}|{x.shape}".encode())
        h.update(memoryview(x).cast("B"))
        return h.hexdigest()

    def get(self, key: str) -> np.ndarray | None:
        if self.directory is None:
            return None
        path = self.directory / f"{key}.npy"
        try:
            arr = np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return arr

    def put(self, key: str, embeddings: np.ndarray) -> None:
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.save(f, embeddings, allow_pickle=False)
            os.replace(tmp, self.directory / f"{key}.npy")  # atomic: readers never see half a file
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
