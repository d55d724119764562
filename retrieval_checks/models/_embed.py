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
  the model (its code as loaded: its module and every local module it imports, see
  :mod:`._code`; function name, keyword arguments and weights or TorchScript bytes)
  and of the inputs (bytes, dtype, shape), so a second run does not recompute them;
  writes are atomic, so parallel workers can share the directory.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import io
import json
import numbers
import os
import pickle
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from .._paths import check_file, unpickler_complaint, verify_zip_crc
from ..errors import InputError, warn_outside
from ._code import code_digests, file_digest
from ._device import device_name, optional_torch
from ._folders import folder_imports, folders_of
from ._hub import HUB_KINDS, HubModel, hub_fingerprint
from ._outputs import as_embeddings, clip, host_array, shape_of

__all__ = ["embed", "load_model", "model_fingerprint", "EmbeddingCache", "check_exported_archive"]

_CACHE_FORMAT = "retrieval-checks-embeddings-3"


#: How this module finds torch (the module, or None when it is not installed): embed,
#: resolve_device and the model loaders all ask here, so a stand-in for it sees every
#: torch import they would make (tests/models/test_lazy_torch.py).
_torch = optional_torch


def require_torch(what: str):
    """The torch module, or an InputError saying that ``what`` needs PyTorch."""
    torch = _torch()
    if torch is None:
        raise InputError(f"{what} needs PyTorch (pip install torch).")
    return torch


def resolve_device(device: str | None) -> str:
    """``auto``/None: cuda when available, else cpu; ``numpy`` and ``torch-cpu`` (engine
    backends) mean cpu. An unknown name is an InputError; ``cuda`` without a CUDA device a
    :class:`~retrieval_checks.BackendError` (:func:`._device.device_name`, finding torch
    through this module's ``_torch``)."""
    return device_name(device, _torch)


def float_tensor(inputs, torch):
    """``inputs`` as a floating tensor: tensors stay where they are; integer, boolean and
    float64 data become float32."""
    x = (
        inputs
        if isinstance(inputs, torch.Tensor)
        else torch.from_numpy(np.ascontiguousarray(inputs))
    )
    if not torch.is_floating_point(x) or x.dtype == torch.float64:
        x = x.float()
    return x


def embed(  # long: the argument checks, then one path per model kind (hub, texts, module, callable)
    model,
    inputs,
    *,
    batch_size: int = 256,
    device: str | None = "auto",
    part: str | None = None,
    progress: bool | None = None,
    transform=None,
    _output: str = "embeddings",
) -> np.ndarray:
    """Embeddings (n x d float32 numpy) of ``inputs`` (n x ...), computed in batches.

    ``model`` is a ``torch.nn.Module`` (TorchScript included), run in eval mode under
    ``torch.inference_mode()`` on ``device`` (its training mode is restored after), or
    any callable taking an array and returning an (n x d) array or tensor, called once
    on all inputs (with ``part=`` when its signature accepts it: ``queries``,
    ``gallery``, ``images`` or ``captions``). Texts, a list of strings, go to a callable
    as that list, or to a :class:`~retrieval_checks.models.HubModel` (a library's model
    from :func:`~retrieval_checks.models.load`), which runs its own batches of
    ``batch_size`` on ``device``; a torch module given texts is an error.

    ``progress``: a progress bar over batches; None (default) shows one only in a
    terminal and for more than 8 batches, so CI logs stay quiet. ``transform``: for
    torch modules, a callable applied to each batch tensor (on the device) before the
    model, e.g. a rotation for invariance measures. Torch inputs may live on any device.

    Parameters
    ----------
    model:
        A ``torch.nn.Module``, a :class:`~retrieval_checks.models.HubModel`, or a
        callable returning (n x d) embeddings.
    inputs:
        (n x ...) numbers (numpy array or torch tensor), or a list of n strings.
    batch_size:
        Rows per batch for torch modules and hub models (default 256).
    device:
        ``"auto"`` (default: CUDA when available, else CPU), ``"cpu"``, ``"cuda"``,
        ``"cuda:N"``; None is ``"auto"``.
    part:
        ``"queries"``, ``"gallery"``, ``"images"`` or ``"captions"``, passed to a callable
        whose signature takes ``part`` and to a hub model.
    progress:
        A progress bar over batches (default None: only in a terminal, for more than
        8 batches).
    transform:
        For torch modules: a callable applied to each batch tensor before the model.

    Returns
    -------
    numpy.ndarray
        (n x d) float32 embeddings, one row per input.

    Raises
    ------
    InputError
        A model that is neither a module nor a callable, an invalid ``batch_size``,
        ``part``, ``progress``, ``transform`` or device name, empty, complex or
        non-numeric inputs, texts given to a torch module, a model output that is not
        (n x d) finite numbers.
    BackendError
        ``device="cuda"`` without a CUDA device.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> import retrieval_checks as rc
    >>> model = torch.nn.Linear(4, 2, bias=False)
    >>> with torch.no_grad():
    ...     _ = model.weight.copy_(torch.eye(2, 4))
    >>> x = np.arange(12, dtype=np.float32).reshape(3, 4)
    >>> rc.embed(model, x, batch_size=2, device="cpu")
    array([[0., 1.],
           [4., 5.],
           [8., 9.]], dtype=float32)
    >>> rc.embed(lambda a: a[:, :2] * 2, x)  # any callable, called once
    array([[ 0.,  2.],
           [ 8., 10.],
           [16., 18.]], dtype=float32)
    """
    # a torch module or tensor exists only once torch is imported: a numpy callable on
    # arrays never imports it (~4 s of CPU in every process that runs such a suite)
    torch = sys.modules.get("torch")
    is_module = torch is not None and isinstance(model, torch.nn.Module)
    if not is_module and not callable(model):
        raise InputError(
            f"model={type(model).__name__}: must be a torch.nn.Module or a callable taking an array of "
            "inputs and returning (n_inputs x dim) embeddings."
        )
    if (
        not isinstance(batch_size, numbers.Integral)
        or isinstance(batch_size, bool)
        or batch_size < 1
    ):
        raise InputError(f"batch_size={batch_size!r}: expected a positive integer (e.g. 256).")
    if part is not None and not isinstance(part, str):
        raise InputError(
            f"part={part!r}: expected None or a string such as 'queries' or 'gallery'."
        )
    if progress is not None and not isinstance(progress, (bool, np.bool_)):
        raise InputError(
            f"progress={progress!r}: expected True, False or None (a bar only in a terminal)."
        )
    if transform is not None and not callable(transform):
        raise InputError(
            f"transform={transform!r}: expected None or a callable applied to each batch tensor."
        )
    # "auto" is resolved (probing CUDA through torch) only for the models that run on a
    # device; any other name is checked whatever the model, as before
    uses_device = is_module or isinstance(model, HubModel)
    dev_name = resolve_device(device) if uses_device or device not in (None, "", "auto") else "cpu"
    if isinstance(model, HubModel):
        if transform is not None:
            raise InputError(
                f"transform= applies to torch modules' input tensors; {model!r} preprocesses its own "
                "inputs (texts, or uint8 images): transform them before embedding."
            )
        return model.encode(
            inputs, part=part, batch_size=int(batch_size), device=dev_name, progress=progress
        )
    texts = _texts(inputs)
    if texts is not None:
        if is_module:
            raise InputError(
                f"inputs: {len(texts)} texts, but model={type(model).__name__} is a torch module, which "
                "takes numeric tensors; embed texts with a text model (retrieval_checks.models.load("
                "'sentence_transformers' or 'huggingface', path)) or a callable taking a list of strings."
            )
        kwargs = {"part": part} if part is not None and accepts_keyword(model, "part") else {}
        return as_embeddings(
            model(texts, **kwargs),
            len(texts),
            getattr(model, "__name__", type(model).__name__),
            _output,
        )
    x = _inputs(inputs, torch, is_module)
    if not is_module:
        kwargs = {"part": part} if part is not None and accepts_keyword(model, "part") else {}
        out = model(x, **kwargs)
        return as_embeddings(
            out, x.shape[0], getattr(model, "__name__", type(model).__name__), _output
        )
    batch_size = int(batch_size)
    dev = torch.device(dev_name)
    was_training = model.training
    params = list(model.parameters()) if hasattr(model, "parameters") else []
    original_device = params[0].device if params else None
    param_dtype = params[0].dtype if params and params[0].is_floating_point() else None
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
            from tqdm.auto import tqdm  # ~80 ms: only when a bar is shown

            bar = tqdm(
                total=x.shape[0], desc=f"embedding {part or 'inputs'}", unit="row", leave=False
            )
        with torch.inference_mode():
            for start in range(0, x.shape[0], batch_size):
                batch = x[start : start + batch_size].to(dev)
                if (
                    param_dtype is not None
                    and batch.is_floating_point()
                    and batch.dtype != param_dtype
                ):
                    batch = batch.to(
                        param_dtype
                    )  # bfloat16/float16 inputs for a float32 model, or the reverse
                out = model(batch if transform is None else transform(batch))
                if not hasattr(out, "detach"):
                    raise InputError(
                        f"the model returned {type(out).__name__}; it must return one tensor of "
                        f"{_output} {shape_of(_output)}. Wrap it to pick that output."
                    )
                outs.append(host_array(out, None, type(model).__name__, _output))
                if bar is not None:
                    bar.update(min(batch_size, x.shape[0] - start))
    finally:
        if bar is not None:
            bar.close()
        if switch_mode:
            model.train(was_training)
        if original_device is not None:
            model.to(original_device)
    return as_embeddings(np.concatenate(outs), x.shape[0], type(model).__name__, _output)


def _texts(inputs) -> list | None:
    """``inputs`` as a list of texts when it is a non-empty list or tuple of strings (the
    inputs of text datasets); None for anything else. A list mixing texts and other
    values is an error."""
    if (
        not isinstance(inputs, (list, tuple))
        or not inputs
        or not any(isinstance(t, str) for t in inputs)
    ):
        return None
    bad = next((i for i, t in enumerate(inputs) if not isinstance(t, str)), None)
    if bad is not None:
        raise InputError(
            f"inputs[{bad}] is {type(inputs[bad]).__name__} among texts; give every item as a string."
        )
    return list(inputs)


def _inputs(inputs, torch, is_module: bool):
    """``inputs`` as the model will see them: a float tensor for torch modules, a numpy
    array for callables (tensors moved to the CPU); refused when not an array, ragged,
    empty, of Python objects, or holding NaN or Inf."""
    is_tensor = torch is not None and isinstance(inputs, torch.Tensor)
    if (
        inputs is None
        or isinstance(inputs, (str, bytes, dict, set))
        or callable(inputs)
        and not is_tensor
    ):
        raise InputError(
            f"inputs={type(inputs).__name__}: expected an array or tensor of inputs (n_inputs x ...), "
            "one row per item."
        )
    if is_tensor:
        if inputs.is_complex():
            raise InputError("inputs: a complex tensor; models take real-valued inputs.")
        x = inputs.detach()
    else:
        try:
            x = np.asarray(inputs)
        except (ValueError, TypeError) as exc:
            raise InputError(
                f"inputs: not a rectangular array ({type(exc).__name__}: {exc}); give every input the "
                "same shape (pad or resize them)."
            ) from None
        if x.dtype.hasobject:
            raise InputError(
                f"inputs: an array of Python objects (dtype object; ragged rows or mixed types), "
                f"shape {x.shape}; give every input the same shape and a numeric dtype."
            )
        if x.dtype.kind == "c":
            raise InputError("inputs: complex numbers; models take real-valued inputs.")
        if is_module and x.dtype.kind not in "biuf":
            raise InputError(
                f"inputs: dtype {x.dtype}; a torch module needs numeric inputs (strings need a "
                "callable model that tokenizes them)."
            )
        if not x.dtype.isnative:
            x = x.astype(x.dtype.newbyteorder("="))
    if x.ndim < 1 or x.shape[0] == 0:
        raise InputError(f"inputs have shape {tuple(x.shape)}; need at least one row to embed.")
    if is_tensor:
        if torch.is_floating_point(x):
            finite = torch.isfinite(x.reshape(x.shape[0], -1)).all(dim=1)
            if not bool(finite.all()):
                bad = torch.nonzero(~finite).flatten().cpu().numpy()
                raise InputError(
                    f"inputs: NaN or Inf in {bad.size} input(s), first rows {bad[:5].tolist()}; fix "
                    "or drop those inputs."
                )
        return float_tensor(x, torch) if is_module else _tensor_numpy(x, torch)
    if x.dtype.kind == "f":
        finite = np.isfinite(x.reshape(x.shape[0], -1)).all(axis=1)
        if not finite.all():
            bad = np.flatnonzero(~finite)
            raise InputError(
                f"inputs: NaN or Inf in {bad.size} input(s), first rows {bad[:5].tolist()}; fix or "
                "drop those inputs."
            )
    return float_tensor(x, torch) if is_module else x


def _tensor_numpy(x, torch) -> np.ndarray:
    x = x.detach().cpu()
    if x.is_floating_point() and x.dtype not in (torch.float32, torch.float64):
        x = x.float()  # numpy has no bfloat16
    return x.numpy()


def accepts_keyword(fn, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _local_file(module_name: str, base_dir: Path | None) -> Path | None:
    """The file a target names: a ``.py`` path, or a dotted module found next to the suite."""
    if module_name.endswith(".py"):
        path = Path(module_name)
        return path if path.is_absolute() or base_dir is None else base_dir / path
    if base_dir is None:
        return None
    parts = module_name.split(".")
    for candidate in (
        base_dir.joinpath(*parts).with_suffix(".py"),
        base_dir.joinpath(*parts, "__init__.py"),
    ):
        if candidate.is_file():
            return candidate
    return None


def _load_file_module(path: Path, label: str, base_dir: Path | None = None):
    """Import a file under a name unique to its path, so two suites' ``embedder.py``
    never stand in for each other in ``sys.modules``; the modules beside it (and beside
    the suite, ``base_dir``) import as :func:`._folders.folder_imports` says."""
    name = f"_rc_suite_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]}_{path.stem}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            with folder_imports(folders_of(path, base_dir)):
                spec.loader.exec_module(module)
        except SyntaxError as exc:
            del sys.modules[name]
            raise InputError(
                f"{path}:{exc.lineno}: the model's module {label!r} has a syntax error ({exc.msg}); "
                "fix the file."
            ) from exc
        except Exception as exc:
            del sys.modules[name]
            raise InputError(
                f"{path}: importing the model's module {label!r} failed ({type(exc).__name__}: "
                f"{exc}); fix the module (it runs like a conftest.py)."
            ) from exc
        except BaseException:
            del sys.modules[name]
            raise
    return module


def _import_target(target: str, base_dir: Path | None):
    """The object named by ``module:function``: a ``.py`` file or a top-level module next
    to the suite file (imported by path), else an installed module."""
    return _import_target_module(target, base_dir)[1]


def _import_target_module(target: str, base_dir: Path | None):
    """(the module, the object) named by ``module:function`` (see :func:`_import_target`)."""
    if not isinstance(target, str) or target.count(":") != 1 or not all(target.partition(":")[::2]):
        raise InputError(
            f"target={target!r}: expected 'module:function' (a dotted module or a .py file, a colon, "
            "then the function's name)."
        )
    module_name, _, attr = target.partition(":")
    local = _local_file(module_name, base_dir)
    if local is not None and (module_name.endswith(".py") or "." not in module_name):
        if not local.is_file():
            raise InputError(f"{target}: no file {local}.")
        module = _load_file_module(local, module_name, base_dir)
    else:
        try:  # packages next to the suite file import as in a test directory (the package stays imported)
            with folder_imports([base_dir], keep=(module_name.partition(".")[0],)):
                module = importlib.import_module(module_name)
        except ImportError as exc:
            raise InputError(
                f"{target}: cannot import module {module_name!r} ({exc}). Name an installed module, "
                "a module next to the suite file, or a .py file relative to it."
            ) from None
        except Exception as exc:  # the module's own code failed while importing
            raise InputError(
                f"{target}: importing module {module_name!r} failed ({type(exc).__name__}: {exc}); "
                "fix the module (it runs like a conftest.py)."
            ) from exc
        if (
            local is not None
            and Path(getattr(module, "__file__", "") or "").resolve() != local.resolve()
        ):
            raise InputError(
                f"{target}: {module_name!r} is already imported from {module.__file__}, not from "
                f"{local}; two suites use packages of the same name. Name the file instead "
                f"({local.relative_to(base_dir).as_posix()}:{attr})."
            )
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [
                n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))
            ]
            raise InputError(
                f"{target}: module {module_name!r} has no {attr!r}; its callables: "
                f"{', '.join(names[:20]) or 'none'}."
            )
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError(f"{target}: {attr!r} is not callable.")
    return module, obj


def model_fingerprint(model) -> str:
    """Content hash of a suite model: its kind, target, kwargs (with the contents of any
    kwarg string that names a file), its code (the target's module, imported here, and
    every local module it imports: :func:`._code.code_digests`) and its weights or
    program bytes."""
    if model.kind in HUB_KINDS:
        return hub_fingerprint(model.kind, Path(model.path), model.settings)
    parts = {"kind": model.kind, "target": model.target, "kwargs": model.kwargs}
    if model.path is not None:
        parts["file"] = file_digest(Path(model.path), _FILE_ROLE.get(model.kind, "model file"))
    files = {}
    for k, v in _kwarg_strings(model.kwargs or {}):
        p = Path(v)
        for cand in (p,) if p.is_absolute() else (Path(model.base_dir or ".") / p, p):
            try:
                is_file, is_dir = cand.is_file(), cand.is_dir()
            except OSError:  # a name too long to be a path, and the like: not a file
                is_file = is_dir = False
            if is_file:
                files[k] = file_digest(cand, f"file of kwargs.{k}")
                break
            if is_dir and v.strip(
                "./\\"
            ):  # a folder the model reads (not ".", "/": separators), all its files
                files[k] = _folder_digest(cand, f"kwargs.{k}")
                break
    parts["kwarg_files"] = files
    if model.target is not None:  # the code as loaded: the module and every local module it imports
        module, _ = _import_target_module(
            model.target, Path(model.base_dir) if model.base_dir is not None else None
        )
        computed: list[str] = []
        source = _source_file(module)
        parts["code"] = code_digests(
            module,
            computed=computed,
            folders=folders_of(source, Path(model.base_dir) if model.base_dir else None),
        )
        if (
            computed
        ):  # the key cannot tell which code runs: a key of this session only, never served later
            warn_outside(
                f"model {model.name!r}: {computed[0]} imports a module under a name computed at run time; "
                "the embedding cache cannot tell which code the model runs, so its embeddings are "
                "computed afresh in each session (never served from an earlier one). Import the module "
                "by its name to let the cache serve them.",
                RuntimeWarning,
            )
            parts["session"] = os.urandom(16).hex()
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _source_file(module) -> Path | None:
    file = getattr(module, "__file__", None)
    return Path(file) if isinstance(file, str) and file else None


def _kwarg_strings(value, where: str = ""):
    """(dotted place, string) of every string in the kwargs, nested lists and mappings
    included (``kwargs: {paths: [a.npy, b.npy]}``)."""
    if isinstance(value, str):
        if value and "\0" not in value:
            yield where, value
    elif isinstance(value, dict):
        for k, v in sorted(value.items(), key=lambda kv: str(kv[0])):
            yield from _kwarg_strings(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _kwarg_strings(v, f"{where}[{i}]")


#: A kwarg folder with more files than this is not hashed: its model is keyed for this session only.
_MAX_FOLDER_FILES = 2000


def _folder_digest(path: Path, what: str) -> dict | str:
    """SHA-256 of every file under ``path`` (sorted walk); a folder too big to hash makes
    the key one of this session only (with a RuntimeWarning): never served later."""
    out = {}
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            if len(out) >= _MAX_FOLDER_FILES:
                warn_outside(
                    f"{what} names the folder {path}, which holds more than {_MAX_FOLDER_FILES} files: "
                    "the embedding cache does not hash it, so this model's embeddings are computed afresh "
                    "in each session (never served from an earlier one). Name the files the model reads.",
                    RuntimeWarning,
                )
                return f"session:{os.urandom(16).hex()}"
            f = Path(root) / name
            if f.is_file():
                out[f.relative_to(path).as_posix()] = file_digest(f, f"file of {what}")
    return out


_FILE_ROLE = {
    "torchscript": "TorchScript file",
    "exported": "torch.export program",
    "factory": "weights file",
}


def load_model(model):
    """The callable or torch module a suite model names (not for file-based models).

    Which kinds run code: ``callable`` and ``factory`` import and run the user's Python
    module (trusted like a ``conftest.py``); ``torchscript`` runs the TorchScript program
    in the file (torch's interpreter, no Python imports, no pickle); ``exported``
    programs are loaded only after :func:`check_exported_archive` proves that nothing in
    the archive would be unpickled or be compiled code; factory weights are read with
    ``torch.load(weights_only=True)`` or from ``.safetensors`` (data only); the library
    kinds (``sentence_transformers``, ``huggingface``, ``open_clip``, ``timm``) load a
    local :class:`~retrieval_checks.models.HubModel` without remote code
    (``trust_remote_code=False``) and without the network.
    """
    if model.kind in HUB_KINDS:
        return HubModel(model.kind, model.path, model.settings, device="cpu")
    if model.kind == "callable":
        fn = _import_target(model.target, model.base_dir)
        _check_kwargs(fn, model, positional=1)
        return functools.partial(fn, **model.kwargs) if model.kwargs else fn
    torch = _torch()
    if torch is None:
        raise InputError(f"model {model.name!r} ({model.kind}) needs PyTorch: pip install torch.")
    if model.kind == "torchscript":
        path = check_file(model.path, what="TorchScript file")
        try:
            return torch.jit.load(str(path), map_location="cpu")
        except Exception as exc:
            raise InputError(
                f"{path}: not a TorchScript file, or a damaged one ({type(exc).__name__}: "
                f"{clip(exc)}). Save one with torch.jit.save(torch.jit.script(model), path), or use "
                "factory + weights."
            ) from None
    if model.kind == "exported":
        path = check_file(model.path, what="torch.export program")
        try:
            data = path.read_bytes()  # one read: the archive checked is the archive loaded
        except OSError as exc:
            raise InputError(f"{path}: cannot read the torch.export program ({exc}).") from None
        check_exported_archive(data, path, torch)
        try:
            return torch.export.load(io.BytesIO(data)).module()
        except Exception as exc:
            raise InputError(
                f"{path}: not a saved torch.export program, or a damaged one ({type(exc).__name__}: "
                f"{clip(exc)}). Save one with torch.export.save(torch.export.export(model.eval(), "
                "example_inputs, dynamic_shapes=...), path)."
            ) from None
    if model.kind == "factory":
        factory = _import_target(model.target, model.base_dir)
        _check_kwargs(factory, model, positional=0)
        weights = _read_weights(Path(model.path), torch) if model.path is not None else None
        try:
            module = factory(**model.kwargs)
        except Exception as exc:
            raise InputError(
                f"{model.target}(**kwargs) raised {type(exc).__name__}: {clip(exc)} (model "
                f"{model.name!r}); fix the factory or its kwargs."
            ) from exc
        if not isinstance(module, torch.nn.Module):
            raise InputError(
                f"{model.target} returned {type(module).__name__}; a factory must return a "
                "torch.nn.Module."
            )
        if weights is not None:
            try:
                module.load_state_dict(weights)
            except Exception as exc:
                raise InputError(
                    f"{model.path}: these weights do not fit the module {model.target} builds "
                    f"({type(exc).__name__}: {clip(exc, 600)}). Save the state_dict of that module "
                    "(torch.save(model.state_dict(), path)) or fix the factory's kwargs."
                ) from None
        return module
    raise InputError(
        f"model {model.name!r} of kind {model.kind!r} reads embeddings from files; nothing to load."
    )


def _check_kwargs(fn, model, *, positional: int) -> None:
    """The model's ``kwargs`` fit ``fn``'s signature (after ``positional`` arguments)."""
    kwargs = model.kwargs or {}
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise InputError(
            f"model {model.name!r}: kwargs={kwargs!r}; expected a mapping of argument names to values."
        )
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin without a signature: the call itself will tell
    try:
        sig.bind_partial(*([None] * positional), **kwargs)
    except TypeError as exc:
        names = [n for n in sig.parameters][positional:]
        raise InputError(
            f"model {model.name!r}: kwargs {sorted(kwargs)} do not fit {model.target}{sig} ({exc}); "
            f"its parameters are {', '.join(names) or 'none'}."
        ) from None


#: Prefixes of torch.export archive records that torch unpickles (or loads as code).
_PICKLED_CONSTANTS = ("custom_obj_", "opaque_obj_")


def check_exported_archive(data: bytes, path, torch) -> None:
    """Refuse a ``torch.export`` archive (``.pt2``) that ``torch.export.load`` would load
    with pickle or run as compiled code.

    ``torch.export.load`` unpickles in several places: legacy archives (no
    ``archive_version`` record; their state dict and example inputs go through
    ``torch.load`` with a ``weights_only=False`` fallback), weights and constants whose
    config says ``use_pickle``, ``custom_obj_`` / ``opaque_obj_`` constants (pickle and
    TorchBind objects), legacy ``data/weights/<model>.pt`` / ``data/constants/<model>.pt``
    records, and sample inputs that ``weights_only=True`` refuses (it then retries with
    ``weights_only=False``). AOTInductor records are shared libraries. An archive
    without any of these loads as data: a JSON graph of torch operators and raw tensor
    bytes."""

    def refuse(why: str) -> InputError:
        return InputError(
            f"{path}: refused: {why}, so loading it would run code from the file. Export the model "
            "again with this torch (torch.export.save(torch.export.export(model.eval(), "
            "example_inputs), path)) keeping only plain tensors as weights and buffers, or load it as "
            "a factory (Python code you trust) plus a weights file."
        )

    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        names = zf.namelist()
    except Exception as exc:
        raise InputError(
            f"{path}: not a torch.export program (.pt2 zip archive) or a damaged one "
            f"({type(exc).__name__}: {clip(exc)}). Save one with torch.export.save(program, "
            "path)."
        ) from None
    with zf:
        if (
            not names
            or any("/" not in n for n in names)
            or len({n.split("/", 1)[0] for n in names}) != 1
        ):
            raise refuse(
                "its records are not in one top folder (the legacy torch.export format, read with "
                "pickle)"
            )
        records = {n.split("/", 1)[1]: n for n in names}
        if "archive_version" not in records:
            raise refuse(
                "it has no archive_version record (the legacy torch.export format, read with pickle)"
            )
        if any(r.startswith("data/aotinductor/") for r in records):
            raise refuse("it holds AOTInductor compiled code (shared libraries)")
        programs = [
            r[len("models/") : -len(".json")]
            for r in records
            if r.startswith("models/") and r.endswith(".json")
        ]
        if "model" not in programs:
            raise InputError(
                f"{path}: holds no program named 'model' (found {programs or 'none'}); save it with "
                "torch.export.save(program, path)."
            )

        def read(record: str) -> bytes:
            try:
                return zf.read(records[record])
            except Exception as exc:  # bad CRC-32, truncated record
                raise InputError(
                    f"{path}: record {record!r} is damaged ({type(exc).__name__}: {clip(exc)}); "
                    "save the program again."
                ) from None

        for name in programs:
            for legacy in (f"data/weights/{name}.pt", f"data/constants/{name}.pt"):
                if legacy in records:
                    raise refuse(f"it stores {legacy} in the legacy pickled format")
            for kind in ("weights", "constants"):
                config = f"data/{kind}/{name}_{kind}_config.json"
                if config not in records:
                    continue
                try:
                    entries = json.loads(read(config)).get("config", {})
                    items = list(entries.items())
                except (ValueError, AttributeError, TypeError) as exc:
                    raise InputError(
                        f"{path}: record {config!r} is not valid JSON ({clip(exc)}); save the program "
                        "again."
                    ) from None
                for fqn, meta in items:
                    if not isinstance(meta, dict):
                        raise InputError(
                            f"{path}: record {config!r} entry {fqn!r} is malformed; save the program "
                            "again."
                        )
                    if meta.get("use_pickle"):
                        raise refuse(f"its {kind[:-1]} {fqn!r} is stored pickled (use_pickle)")
                    if str(meta.get("path_name", "")).startswith(_PICKLED_CONSTANTS):
                        raise refuse(
                            f"its constant {fqn!r} is a pickled Python or TorchBind object"
                        )
            sample = f"data/sample_inputs/{name}.pt"
            if sample in records:
                try:
                    torch.load(io.BytesIO(read(sample)), map_location="cpu", weights_only=True)
                except InputError:
                    raise
                except Exception:
                    raise refuse(
                        f"its sample inputs ({sample}) are not plain tensors (torch.export.load would "
                        "retry them with weights_only=False)"
                    ) from None


def _read_weights(path: Path, torch) -> dict:
    path = check_file(path, what="weights file")
    if path.suffix.lower() == ".safetensors":
        try:
            from safetensors.torch import load_file
        except ImportError:
            raise InputError(
                f"{path}: reading .safetensors needs the safetensors package."
            ) from None
        try:
            return load_file(str(path))
        except Exception as exc:
            raise InputError(
                f"{path}: cannot read the weights as .safetensors: the file is truncated, damaged or "
                f"not a .safetensors file ({type(exc).__name__}: {clip(exc)}). Save them again with "
                "safetensors.torch.save_file(model.state_dict(), path)."
            ) from None
    if zipfile.is_zipfile(path):
        try:
            verify_zip_crc(path)
        except Exception as exc:
            raise InputError(
                f"{path}: the weights file is damaged ({type(exc).__name__}: {clip(exc)}); save it "
                "again with torch.save(model.state_dict(), path)."
            ) from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise InputError(
            f"{path}: torch.load(weights_only=True) refused the file ({unpickler_complaint(exc)}). "
            "Save the state_dict (torch.save(model.state_dict(), path)), not the "
            "pickled model: no code in a weights file runs."
        ) from None
    except Exception as exc:
        raise InputError(
            f"{path}: cannot read the weights file: it is truncated, damaged or not a torch file "
            f"({type(exc).__name__}: {clip(exc)}). Save it again with "
            "torch.save(model.state_dict(), path)."
        ) from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise InputError(
            f"{path}: expected a state_dict (a mapping of tensors), found {type(state).__name__}."
        )
    return state


class EmbeddingCache:
    """Embeddings on disk, keyed by the model's fingerprint and the inputs' content.

    ``directory=None`` disables it. ``hits`` and ``misses`` count lookups. The cache
    never turns a gate red and never serves a wrong number: a directory that is a file
    or cannot be written warns once (a :class:`RuntimeWarning` naming it) and the
    session runs without the cache; each entry stores its key and a SHA-256 of the key
    and its embeddings, and an entry that is damaged, truncated, of the wrong shape, not
    a regular file, or another key's (copied or renamed) warns naming it and is
    recomputed.
    """

    def __init__(self, directory=None):
        if directory is not None and (
            isinstance(directory, bytes) or not isinstance(directory, (str, os.PathLike))
        ):
            raise InputError(
                f"cache directory={directory!r}: expected a path (a str or pathlib.Path), or None for "
                "no cache."
            )
        self.directory = Path(os.fspath(directory)) if directory is not None else None
        self.hits = 0
        self.misses = 0
        self.disabled_reason: str | None = None
        if self.directory is not None and self.directory.exists() and not self.directory.is_dir():
            self._disable("it exists and is not a directory")

    def _disable(self, why: str) -> None:
        warn_outside(
            f"embedding cache {self.directory}: {why}; running without the cache (embeddings are "
            "computed, nothing is stored). Point the cache at a writable directory, or remove the file "
            "in the way.",
            RuntimeWarning,
        )
        self.disabled_reason = why
        self.directory = None

    @staticmethod
    def key(fingerprint: str, inputs, part: str | None) -> str:
        """SHA-256 of the model's fingerprint, the part and the inputs: an array's
        dtype, shape and bytes, or a list of texts (each one's UTF-8 bytes and length)."""
        texts = _texts(inputs)
        if texts is not None:
            h = hashlib.sha256(f"{_CACHE_FORMAT}|{fingerprint}|{part}|texts|{len(texts)}".encode())
            for t in texts:
                b = t.encode("utf-8", "surrogatepass")
                h.update(len(b).to_bytes(8, "little"))
                h.update(b)
            return h.hexdigest()
        x = np.ascontiguousarray(inputs)
        if x.dtype.hasobject:
            raise InputError(
                f"inputs of dtype {x.dtype} (Python objects) cannot be hashed for the cache; store "
                "numeric arrays."
            )
        h = hashlib.sha256()
        h.update(f"{_CACHE_FORMAT}|{fingerprint}|{part}|{x.dtype.str}|{x.shape}".encode())
        h.update(memoryview(x).cast("B"))
        return h.hexdigest()

    @staticmethod
    def _digest(arr: np.ndarray, key: str) -> np.ndarray:
        """SHA-256 of the entry's key and embeddings: an entry moved onto another key's
        name (another model's, other inputs') does not match there."""
        h = hashlib.sha256(f"{_CACHE_FORMAT}|{key}|{arr.dtype.str}|{arr.shape}".encode())
        h.update(memoryview(np.ascontiguousarray(arr)).cast("B"))
        return np.frombuffer(h.digest(), dtype=np.uint8)

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.npz"

    def get(self, key: str) -> np.ndarray | None:
        if self.directory is None:
            return None
        path = self._path(key)
        try:
            if (
                path.exists() and not path.is_file()
            ):  # a directory, a named pipe (np.load would block on it)...
                return self._corrupt(path, "not a regular file")
            with np.load(path, allow_pickle=False) as data:
                arr, digest, stored = data["embeddings"], data["sha256"], data["key"]
        except FileNotFoundError:
            self.misses += 1
            return None
        except NotADirectoryError:  # the directory was replaced by a file since
            self.misses += 1
            self._disable("it is not a directory")
            return None
        except Exception as exc:  # damaged, truncated, not a zip, a directory in the way...
            return self._corrupt(path, f"{type(exc).__name__}: {exc}")
        if not (
            isinstance(arr, np.ndarray)
            and arr.ndim == 2
            and arr.dtype == np.float32
            and np.array_equal(digest, self._digest(arr, str(stored)))
        ):
            return self._corrupt(path, "its checksum or shape does not match its embeddings")
        if str(stored) != key:
            return self._corrupt(
                path,
                f"it holds the embeddings of another key ({str(stored)[:16]}...): copied or "
                "renamed",
            )
        self.hits += 1
        return arr

    def _corrupt(self, path: Path, why: str) -> None:
        warn_outside(
            f"embedding cache entry {path} is damaged ({why[:200]}); recomputing it.",
            RuntimeWarning,
        )
        self.misses += 1
        try:
            if path.is_file() or path.is_symlink():
                path.unlink()
            elif path.is_dir():
                path.rmdir()  # only when empty: nothing but the entry's name is lost
        except OSError:
            pass  # put() replaces it atomically anyway
        return None

    def put(self, key: str, embeddings: np.ndarray) -> None:
        if self.directory is None:
            return
        embeddings = np.ascontiguousarray(embeddings)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        except OSError as exc:  # a file in the way, a read-only directory, a full disk
            self._disable(f"cannot write there ({type(exc).__name__}: {exc.strerror or exc})")
            return
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(
                    f,
                    embeddings=embeddings,
                    sha256=self._digest(embeddings, key),
                    key=np.array(key),
                )
            os.replace(tmp, self._path(key))  # atomic: readers never see half a file
        except OSError as exc:
            self._disable(f"cannot write there ({type(exc).__name__}: {exc.strerror or exc})")
        finally:
            if os.path.exists(tmp):
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
