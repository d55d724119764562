"""Models of the libraries retrieval teams use, read from local files only.

:func:`load` builds a :class:`HubModel` of one of four kinds:

- ``sentence_transformers``: a saved ``SentenceTransformer`` directory; queries go
  through ``encode_query`` and documents through ``encode_document`` (so the model's own
  ``query`` / ``document`` prompts apply), or through the prompt (``query_prompt``,
  ``document_prompt``: a text put before each input) or prompt name
  (``query_prompt_name``, ``document_prompt_name``) given; ``normalize`` divides each
  embedding by its L2 norm; ``max_length`` caps the tokens per input.
- ``huggingface``: ``AutoModel`` + ``AutoTokenizer`` from a directory; the embedding is
  the mean of the last hidden states over the attention mask (``pooling: mean``, the
  default) or the first token's state (``pooling: cls``); inputs are cut at
  ``max_length`` tokens (default: the smaller of the tokenizer's ``model_max_length``
  and the model's ``max_position_embeddings``); optional prompts and ``normalize``.
- ``open_clip``: an architecture name (``model_name``, e.g. ``ViT-B-32``; ``config``: a
  JSON model config to register first) and a checkpoint file; images go through the
  image tower after the model's own preprocessing, texts through its tokenizer and the
  text tower.
- ``timm``: a directory as timm saves it (``config.json`` with the pretrained config, and
  the weights; ``local-dir:``), or an architecture name (``model_name``) and a checkpoint
  file, with an optional ``config``: a JSON pretrained config (the ``config.json`` timm
  writes, or its ``pretrained_cfg`` object alone: input size, mean, std, crop) laid over
  the architecture's own; the classifier head is removed (``num_classes=0``: pooled
  features) and images go through the transform of the model's data config.

Nothing is downloaded: ``HF_HUB_OFFLINE`` is set to 1 unless the caller set it, every
library call passes ``local_files_only=True`` (or a local file), and a path that is not
on disk is an :class:`~retrieval_checks.InputError` naming it. Texts are a list of
strings (or a numpy string array); images are uint8 arrays (n x H x W x C, or n x H x W),
each turned into a PIL image for the model's preprocessing. A text model given images,
or an image model given texts, is an error naming the modality.

:meth:`HubModel.fingerprint` hashes the kind, the settings, the library's version and
every file of the model directory (weights, config, tokenizer) or the checkpoint and
config files, so changed weights never reuse cached embeddings.
"""

from __future__ import annotations

import hashlib
import json
import numbers
import os
import sys
from pathlib import Path

import numpy as np

from ..errors import InputError, warn_outside
from ._code import file_digest
from ._device import device_name
from ._outputs import as_embeddings

__all__ = ["HubModel", "load", "HUB_KINDS", "SETTINGS"]

#: The model kinds read with a library, and the modalities each embeds.
HUB_KINDS = {
    "sentence_transformers": ("text",),
    "huggingface": ("text",),
    "open_clip": ("image", "text"),
    "timm": ("image",),
}
_PROMPTS = ("query_prompt", "document_prompt")
#: The settings of each kind (besides the path, batch_size and device).
SETTINGS = {
    "sentence_transformers": (
        *_PROMPTS,
        "query_prompt_name",
        "document_prompt_name",
        "normalize",
        "max_length",
    ),
    "huggingface": ("pooling", "max_length", "normalize", *_PROMPTS),
    "open_clip": ("model_name", "config", "normalize"),
    "timm": ("model_name", "config", "normalize"),
}
_PACKAGES = {
    "sentence_transformers": "sentence-transformers",
    "huggingface": "transformers",
    "open_clip": "open_clip_torch",
    "timm": "timm",
}
_DOCUMENT_PARTS = ("gallery",)


def _offline() -> None:
    """No network for Hugging Face code: HF_HUB_OFFLINE=1 unless the caller set it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def _import(kind: str):
    _offline()
    module = {
        "sentence_transformers": "sentence_transformers",
        "huggingface": "transformers",
        "open_clip": "open_clip",
        "timm": "timm",
    }[kind]
    try:
        return __import__(module)
    except (
        Exception
    ) as exc:  # ImportError, or a broken install (torchvision's operators missing...)
        raise InputError(
            f"model kind {kind!r} needs the {_PACKAGES[kind]} package, which cannot be imported here "
            f"({type(exc).__name__}: {str(exc)[:300]}); pip install 'retrieval-checks"
            f"[{'text' if kind in ('sentence_transformers', 'huggingface') else 'vision'}]'."
        ) from None


def check_settings(kind: str, path, settings: dict) -> tuple[Path, dict]:
    """``path`` as an existing local path and ``settings`` checked for ``kind``;
    InputError naming the field otherwise."""
    if kind not in HUB_KINDS:
        raise InputError(f"kind={kind!r}: expected one of {', '.join(HUB_KINDS)}.")
    unknown = [k for k in settings if k not in SETTINGS[kind]]
    if unknown:
        raise InputError(
            f"{kind} model: unknown setting {unknown[0]!r}; {kind} takes {', '.join(SETTINGS[kind])}."
        )
    if (
        path is None
        or isinstance(path, bytes)
        or not isinstance(path, (str, os.PathLike))
        or not str(path).strip()
    ):
        raise InputError(
            f"{kind} model: path={path!r}: expected the local path of the model's "
            f"{'checkpoint file' if _wants_file(kind, settings) else 'directory'}."
        )
    p = Path(os.fspath(path)).expanduser()
    wants_file = _wants_file(kind, settings)
    if not p.exists():
        raise InputError(
            f"{kind} model: {p} does not exist (looked for the model's "
            f"{'checkpoint file' if wants_file else 'directory'} there; nothing is downloaded: save the "
            "model there first, e.g. model.save_pretrained(path) / model.save(path))."
        )
    if wants_file and not p.is_file():
        raise InputError(
            f"{kind} model: {p} is not a file; with model_name, give the checkpoint file."
        )
    if not wants_file and not p.is_dir():
        raise InputError(
            f"{kind} model: {p} is not a directory; give the directory the model was saved to"
            + (" (or model_name with a checkpoint file)." if kind == "timm" else ".")
        )
    out = dict(settings)
    for k, v in settings.items():
        if k == "normalize" and not isinstance(v, bool):
            raise InputError(f"{kind} model: normalize={v!r}: expected true or false.")
        if k == "max_length" and (
            isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1
        ):
            raise InputError(
                f"{kind} model: max_length={v!r}: expected an integer >= 1 (tokens per input)."
            )
        if k == "pooling" and v not in ("mean", "cls"):
            raise InputError(f"{kind} model: pooling={v!r}: expected mean or cls.")
        if k in (*_PROMPTS, "query_prompt_name", "document_prompt_name", "model_name") and (
            not isinstance(v, str) or not v
        ):
            raise InputError(f"{kind} model: {k}={v!r}: expected a non-empty text.")
        if k == "config":
            c = Path(os.fspath(v)).expanduser() if isinstance(v, (str, os.PathLike)) else None
            if c is None or not c.is_file():
                raise InputError(
                    f"{kind} model: config={v!r}: expected an existing JSON model config file."
                )
            out[k] = c
    for a, b in (
        ("query_prompt", "query_prompt_name"),
        ("document_prompt", "document_prompt_name"),
    ):
        if a in settings and b in settings:
            raise InputError(f"{kind} model: give {a} or {b}, not both.")
    if kind == "timm" and "config" in settings and "model_name" not in settings:
        raise InputError(
            "timm model: config goes with model_name and a checkpoint file (a directory brings its own "
            "config.json)."
        )
    if kind == "open_clip" and "model_name" not in settings:
        raise InputError(
            "open_clip model: model_name is required (the architecture, e.g. ViT-B-32), with the "
            "checkpoint file as the path."
        )
    return p, out


def _wants_file(kind: str, settings: dict) -> bool:
    return kind == "open_clip" or (kind == "timm" and "model_name" in settings)


def _digest_tree(p: Path) -> dict:
    """SHA-256 of every file under ``p`` (a file, or a directory walked in sorted order)."""
    if p.is_file():
        return {p.name: file_digest(p, "model file")}
    out = {}
    for root, dirs, files in os.walk(p):
        dirs.sort()
        for name in sorted(files):
            f = Path(root) / name
            out[f.relative_to(p).as_posix()] = file_digest(f, "model file")
    if not out:
        raise InputError(f"{p}: the model directory is empty; save the model there first.")
    return out


def _version(kind: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version  # ~20 ms: only for a fingerprint

    try:
        return version(_PACKAGES[kind])
    except PackageNotFoundError:
        return None


def hub_fingerprint(kind: str, path: Path, settings: dict) -> str:
    """Content hash of a hub model: kind, settings, library version, and the bytes of
    every file of its directory (or its checkpoint and config files)."""
    parts = {
        "kind": kind,
        "settings": {k: str(v) for k, v in sorted(settings.items())},
        "version": _version(kind),
        "files": _digest_tree(path),
    }
    if "config" in settings:
        parts["config"] = _digest_tree(Path(settings["config"]))
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class HubModel:
    """A model of a library (:data:`HUB_KINDS`) loaded from local files: call
    :meth:`encode` (or :func:`~retrieval_checks.embed`) with texts or images.
    ``kind``, ``path``, ``settings``, ``modalities``; :meth:`fingerprint` is the
    content hash the embedding cache keys on."""

    def __init__(
        self, kind: str, path, settings: dict | None = None, *, device: str | None = "cpu"
    ):
        self.path, self.settings = check_settings(kind, path, dict(settings or {}))
        self.kind = kind
        self.modalities = HUB_KINDS[kind]
        self._fingerprint: str | None = None
        self._device: str | None = None
        self._parts = _LOADERS[kind](self)
        self.to(device)

    def __repr__(self) -> str:
        return f"HubModel({self.kind!r}, {str(self.path)!r})"

    def __call__(self, inputs, part: str | None = None) -> np.ndarray:
        """:meth:`encode` with the default batch size, where the model is."""
        return self.encode(inputs, part=part)

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = hub_fingerprint(self.kind, self.path, self.settings)
        return self._fingerprint

    def to(self, device: str | None) -> "HubModel":
        dev = device_name(device)
        if dev != self._device:
            for module in self._parts.get("modules", ()):
                module.to(dev)
            self._device = dev
        return self

    def encode(
        self,
        inputs,
        *,
        part: str | None = None,
        batch_size: int = 32,
        device: str | None = None,
        progress: bool | None = None,
    ) -> np.ndarray:
        """Embeddings (n x d float32) of texts or images, in batches of ``batch_size``
        on ``device`` (None: where the model is); ``part`` (``queries``, ``gallery``,
        ``images``, ``captions``) picks query or document prompts."""
        if device is not None:
            self.to(device)
        modality, items = _modality(inputs)
        if modality not in self.modalities:
            raise InputError(
                f"{self.kind} model {self.path}: embeds {' and '.join(self.modalities)}, but the "
                f"{part or 'inputs'} are {_describe_modality(modality, inputs)}; give it "
                f"{'texts (a list of strings)' if 'text' in self.modalities else 'images (uint8 arrays)'}"
                f", or use {'a text' if modality == 'text' else 'an image'} model."
            )
        if (
            isinstance(batch_size, bool)
            or not isinstance(batch_size, numbers.Integral)
            or batch_size < 1
        ):
            raise InputError(f"batch_size={batch_size!r}: expected a positive integer.")
        if len(items) == 0:
            raise InputError(f"{part or 'inputs'}: nothing to embed (0 {modality}s).")
        run = self._parts[modality]
        bar = _bar(len(items), batch_size, progress, part)
        outs = []
        try:
            import torch  # loaded with the model's library; not by `import retrieval_checks`

            with torch.inference_mode():
                for start in range(0, len(items), batch_size):
                    batch = items[start : start + batch_size]
                    try:
                        out = run(batch, part)
                    except (InputError, MemoryError, KeyboardInterrupt):
                        raise
                    except Exception as exc:  # the library's own error on this batch
                        raise InputError(
                            f"{self.kind} model {self.path}: embedding {part or 'inputs'} rows "
                            f"{start}-{start + len(batch) - 1} failed ({type(exc).__name__}: "
                            f"{str(exc)[:300]})."
                        ) from exc
                    outs.append(
                        np.asarray(
                            out.detach().float().cpu().numpy() if hasattr(out, "detach") else out,
                            dtype=np.float32,
                        )
                    )
                    if bar is not None:
                        bar.update(len(batch))
        finally:
            if bar is not None:
                bar.close()
        cut = self._parts.get("too_long")
        n_cut = cut(items, part) if cut is not None and modality == "text" else 0
        if n_cut:
            limit = self._parts["max_length"]
            warn_outside(
                f"{self.kind} model {self.path}: {n_cut} of {len(items)} texts ({part or 'inputs'}) are "
                f"longer than max_length={limit} tokens and were cut to it (their ends are not embedded); raise "
                "max_length (up to the model's limit) or shorten the texts.",
                RuntimeWarning,
            )
        return as_embeddings(np.concatenate(outs), len(items), f"{self.kind} model {self.path}")


def _bar(n: int, batch_size: int, progress, part):
    if progress is None:
        progress = -(-n // batch_size) > 8 and sys.stderr.isatty()
    if not progress:
        return None
    from tqdm.auto import tqdm  # ~80 ms: only when a bar is shown

    return tqdm(total=n, desc=f"embedding {part or 'inputs'}", unit="row", leave=False)


def _modality(inputs) -> tuple[str, object]:
    """``("text", list of str)`` or ``("image", uint8 array)``; other inputs are errors."""
    if isinstance(inputs, str):
        raise InputError("inputs: one string; give a list of texts (one per item).")
    if isinstance(inputs, (list, tuple)):
        if inputs and all(isinstance(t, str) for t in inputs):
            return "text", list(inputs)
        if not inputs:
            return "text", []
        arr = np.asarray(inputs) if not any(isinstance(t, str) for t in inputs) else None
        if arr is None:
            bad = next(i for i, t in enumerate(inputs) if not isinstance(t, str))
            raise InputError(
                f"inputs[{bad}] is {type(inputs[bad]).__name__}, not a text; give every item as a "
                "string."
            )
        inputs = arr
    if hasattr(inputs, "detach"):
        inputs = inputs.detach().cpu().numpy()
    arr = np.asarray(inputs)
    if arr.dtype.kind in "US":
        if arr.ndim != 1:
            raise InputError(f"texts: an array of shape {arr.shape}; give one text per item (1-D).")
        return "text", [str(t) for t in arr.tolist()]
    if arr.dtype.kind in "biuf" and arr.ndim in (3, 4):
        return "image", arr
    raise InputError(
        f"inputs: dtype {arr.dtype}, shape {arr.shape}; expected texts (a list of strings) or images "
        "(an n x H x W x C or n x H x W uint8 array)."
    )


def _describe_modality(modality: str, inputs) -> str:
    if modality == "text":
        return "texts"
    arr = np.asarray(inputs)
    return f"images (a {arr.dtype} array of shape {arr.shape})"


def _pil_images(images: np.ndarray):
    """PIL images of a uint8 n x H x W [x C] batch (C 1, 3 or 4)."""
    from PIL import Image  # Pillow: for image inputs only

    if images.dtype != np.uint8:
        raise InputError(
            f"images: dtype {images.dtype}; the model's own preprocessing takes uint8 pixels (0-255), "
            "n x H x W x C: store the images as uint8, not as preprocessed tensors."
        )
    if images.ndim == 4 and images.shape[-1] not in (1, 3, 4):
        raise InputError(
            f"images: shape {images.shape}; expected n x H x W x C with C 1, 3 or 4 (channels last)."
        )
    out = []
    for img in images:
        if img.ndim == 3 and img.shape[-1] == 1:
            img = img[..., 0]
        out.append(Image.fromarray(np.ascontiguousarray(img)).convert("RGB"))
    return out


def _too_long(tokenizer, limit: int, prompt_of):
    """A counter of the texts whose tokens (with the part's prompt and the special
    tokens) exceed ``limit``: the texts the model truncates."""

    def count(texts, part) -> int:
        prompt = prompt_of(part)
        n = 0
        for start in range(0, len(texts), 1024):
            enc = tokenizer(
                [prompt + t for t in texts[start : start + 1024]], truncation=False, verbose=False
            )
            n += sum(len(ids) > limit for ids in enc["input_ids"])
        return n

    return count


def _prompt(model: HubModel, part) -> str:
    key = "document_prompt" if part in _DOCUMENT_PARTS else "query_prompt"
    return model.settings.get(key, "")


# ---------------------------------------------------------------- loaders: kind -> {modality: run(batch, part)}
def _load_sentence_transformers(model: HubModel) -> dict:
    st = _import("sentence_transformers")
    try:
        encoder = st.SentenceTransformer(
            str(model.path), device="cpu", local_files_only=True, trust_remote_code=False
        )
    except Exception as exc:
        raise InputError(
            f"{model.path}: not a sentence-transformers model directory, or an incomplete one "
            f"({type(exc).__name__}: {str(exc)[:300]}); save one with model.save(path)."
        ) from None
    if "max_length" in model.settings:
        encoder.max_seq_length = int(model.settings["max_length"])
    normalize = bool(model.settings.get("normalize", False))

    def run(batch, part):
        doc = part in _DOCUMENT_PARTS
        kw = {}
        for k in (
            ("document_prompt", "document_prompt_name")
            if doc
            else ("query_prompt", "query_prompt_name")
        ):
            if k in model.settings:
                kw[k.replace("document_", "").replace("query_", "")] = model.settings[k]
        encode = getattr(encoder, "encode_document" if doc else "encode_query", None)
        if (
            encode is None
        ):  # sentence-transformers < 5: the model's own prompt of that name, if it has one
            encode = encoder.encode
            own = "document" if doc else "query"
            if not kw and own in (getattr(encoder, "prompts", None) or {}):
                kw = {"prompt_name": own}
        return encode(
            batch,
            batch_size=len(batch),
            show_progress_bar=False,
            convert_to_numpy=True,
            normalize_embeddings=normalize,
            **kw,
        )

    def prompt_of(part) -> str:  # the prompt text encode_query / encode_document put first
        doc = part in _DOCUMENT_PARTS
        side = "document" if doc else "query"
        if f"{side}_prompt" in model.settings:
            return model.settings[f"{side}_prompt"]
        prompts = getattr(encoder, "prompts", None) or {}
        return prompts.get(model.settings.get(f"{side}_prompt_name", side), "")

    tokenizer = getattr(encoder, "tokenizer", None)
    limit = getattr(encoder, "max_seq_length", None)
    counter = (
        _too_long(tokenizer, limit, prompt_of)
        if tokenizer is not None and isinstance(limit, int)
        else None
    )
    return {"text": run, "modules": (encoder,), "max_length": limit, "too_long": counter}


def _load_huggingface(model: HubModel) -> dict:
    transformers = _import("huggingface")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            str(model.path), local_files_only=True, trust_remote_code=False
        )
        encoder = transformers.AutoModel.from_pretrained(
            str(model.path), local_files_only=True, trust_remote_code=False
        )
    except Exception as exc:
        raise InputError(
            f"{model.path}: not a Hugging Face model directory with a tokenizer, or an incomplete one "
            f"({type(exc).__name__}: {str(exc)[:300]}); save both with model.save_pretrained(path) and "
            "tokenizer.save_pretrained(path)."
        ) from None
    encoder.eval()
    max_length = model.settings.get("max_length") or _max_length(tokenizer, encoder, model.path)
    pooling = model.settings.get("pooling", "mean")
    normalize = bool(model.settings.get("normalize", False))

    def run(batch, part):
        import torch  # loaded with the model's library; not by `import retrieval_checks`

        prompt = _prompt(model, part)
        dev = next(encoder.parameters()).device
        enc = tokenizer(
            [prompt + t for t in batch],
            padding=True,
            truncation=True,
            max_length=max_length,
            return_tensors="pt",
        )
        enc = {k: v.to(dev) for k, v in enc.items()}
        hidden = encoder(**enc).last_hidden_state
        if pooling == "cls":
            out = hidden[:, 0]
        else:
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            out = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        return torch.nn.functional.normalize(out, dim=-1) if normalize else out

    return {
        "text": run,
        "modules": (encoder,),
        "max_length": max_length,
        "too_long": _too_long(tokenizer, max_length, lambda part: _prompt(model, part)),
    }


def _max_length(tokenizer, encoder, path) -> int:
    limits = [
        n
        for n in (
            getattr(tokenizer, "model_max_length", None),
            getattr(encoder.config, "max_position_embeddings", None),
        )
        if isinstance(n, int) and 0 < n < 1_000_000
    ]
    if not limits:
        raise InputError(
            f"{path}: neither the tokenizer (model_max_length) nor the config "
            "(max_position_embeddings) says how many tokens the model takes; set max_length."
        )
    return min(limits)


def _load_open_clip(model: HubModel) -> dict:
    open_clip = _import("open_clip")
    name = model.settings["model_name"]
    if "config" in model.settings:
        open_clip.add_model_config(str(model.settings["config"]))
    try:
        encoder, _, preprocess = open_clip.create_model_and_transforms(
            name, pretrained=str(model.path), weights_only=True
        )
        tokenizer = open_clip.get_tokenizer(name)
    except Exception as exc:
        raise InputError(
            f"{model.path}: cannot build open_clip model {name!r} from this checkpoint "
            f"({type(exc).__name__}: {str(exc)[:300]}); check model_name (open_clip.list_models(), or "
            "config: a JSON model config) and that the checkpoint is that model's state_dict."
        ) from None
    encoder.eval()
    normalize = bool(model.settings.get("normalize", False))

    def images(batch, part):
        import torch  # loaded with the model's library; not by `import retrieval_checks`

        dev = next(encoder.parameters()).device
        x = torch.stack([preprocess(im) for im in _pil_images(batch)]).to(dev)
        return encoder.encode_image(x, normalize=normalize)

    def texts(batch, part):
        dev = next(encoder.parameters()).device
        return encoder.encode_text(tokenizer(list(batch)).to(dev), normalize=normalize)

    return {
        "image": images,
        "text": texts,
        "modules": (encoder,),
        "preprocess": preprocess,
        "tokenizer": tokenizer,
        "model": encoder,
    }


def _load_timm(model: HubModel) -> dict:
    timm = _import("timm")
    name = model.settings.get("model_name")
    overlay = {
        **(_timm_cfg(model.settings["config"]) if "config" in model.settings else {}),
        "file": str(model.path),
    }
    try:
        if name is None:
            encoder = timm.create_model(f"local-dir:{model.path}", pretrained=True, num_classes=0)
        else:
            encoder = timm.create_model(
                name, pretrained=True, pretrained_cfg_overlay=overlay, num_classes=0
            )
        # timm's own submodule, for timm models only
        from timm.data import create_transform, resolve_data_config

        transform = create_transform(**resolve_data_config({}, model=encoder))
    except Exception as exc:
        raise InputError(
            f"{model.path}: cannot build the timm model {name or '(from its config.json)'} "
            f"({type(exc).__name__}: {str(exc)[:300]}); give a directory saved by timm "
            "(config.json + weights) or model_name with its checkpoint file."
        ) from None
    encoder.eval()
    normalize = bool(model.settings.get("normalize", False))

    def images(batch, part):
        import torch  # loaded with the model's library; not by `import retrieval_checks`

        dev = next(encoder.parameters()).device
        out = encoder(torch.stack([transform(im) for im in _pil_images(batch)]).to(dev))
        return torch.nn.functional.normalize(out, dim=-1) if normalize else out

    return {"image": images, "modules": (encoder,), "transform": transform, "model": encoder}


def _timm_cfg(path: Path) -> dict:
    """The pretrained config of a JSON file: timm's ``config.json`` (its
    ``pretrained_cfg``) or that object alone; an InputError names a bad file."""
    try:
        data = json.loads(
            Path(path).read_text(encoding="utf-8-sig")
        )  # UTF-8, a leading BOM dropped (_textfiles)
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{path}: not a JSON pretrained config ({type(exc).__name__}: {exc})."
        ) from None
    cfg = data.get("pretrained_cfg", data) if isinstance(data, dict) else None
    if not isinstance(cfg, dict):
        raise InputError(
            f"{path}: expected a JSON object (timm's pretrained config: input_size, mean, std, ...)."
        )
    return {
        k: v for k, v in cfg.items() if k not in ("file", "hf_hub_id", "url")
    }  # the weights are the checkpoint


_LOADERS = {
    "sentence_transformers": _load_sentence_transformers,
    "huggingface": _load_huggingface,
    "open_clip": _load_open_clip,
    "timm": _load_timm,
}


def load(kind: str, path, *, device: str | None = "auto", **settings) -> HubModel:
    """A :class:`HubModel` of ``kind`` (``sentence_transformers``, ``huggingface``,
    ``open_clip``, ``timm``) from ``path``, a local model directory (or, for
    ``open_clip`` and timm with ``model_name=``, a checkpoint file), on ``device``.
    ``settings``: the kind's options (:data:`SETTINGS`): ``query_prompt``,
    ``document_prompt``, ``query_prompt_name``, ``document_prompt_name``, ``normalize``,
    ``max_length``, ``pooling`` (mean or cls), ``model_name``, ``config``. Nothing is
    downloaded; embed with :func:`~retrieval_checks.embed` or :meth:`HubModel.encode`."""
    return HubModel(kind, path, settings, device=device)
