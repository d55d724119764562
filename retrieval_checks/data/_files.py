"""Loading embeddings, labels and ids from files.

One function, :func:`load_embeddings`, reads every format a model repository is likely
to hold, by extension:

- ``.npy``: one array, the embeddings (labels and ids from other files or arrays);
- ``.npz``: named arrays (``numpy.load`` with ``allow_pickle=False``);
- ``.safetensors``: named tensors (needs the ``safetensors`` package; bfloat16 and
  float8 tensors need PyTorch to be converted);
- ``.pt`` / ``.pth``: a dict of tensors, arrays or lists, read with
  ``torch.load(weights_only=True)``, so no code in the file runs;
- ``.parquet``: columns; the embedding column holds one list (or fixed-size list) of
  floats per row (needs ``pyarrow``).

Keys default to ``embeddings``, ``labels`` and ``ids``; pass other names to match a
file. A missing key is an error that lists the keys the file has and suggests the
closest one: spelt alike, or a usual other name (``targets`` / ``y`` for labels,
``features`` for embeddings); an absent default ``labels`` / ``ids`` key is skipped
only when no such array (one value per row) is there.

Every file fails closed: a missing, empty, truncated or damaged file, a directory, a
broken symbolic link or a loop, an unreadable file, a file holding pickled Python
objects (a ``.npy`` object array is named as such) and a sparse tensor are each an
:class:`~retrieval_checks.InputError` naming the file and what to do, never a raw
``zipfile`` / ``pickle`` / ``OSError`` / Arrow traceback. ``.npz`` members are checked
against their CRC-32 and ``.pt`` archives against their records' CRC-32 (when the
writer stored one); ``.npy``, ``.safetensors`` and ``.parquet`` carry no checksum of
their data, so a flipped bit inside the numbers cannot be detected.

Only the arrays asked for are read: :func:`read_arrays` returns a lazy mapping whose
listing costs nothing, so a huge member nobody uses is never decompressed. Arrays come
back in native byte order (big-endian files are converted, not misread), and
bfloat16 / float16 / float8 tensors as float32 (numpy has no bfloat16).
"""

from __future__ import annotations

import os
import pickle
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._paths import FORMATS as _FORMATS
from .._paths import HOW_TO_WRITE as _HOW_TO_WRITE
from .._paths import check_file, unpickler_complaint
from .._paths import short as _short
from .._paths import verify_zip_crc as _verify_zip_crc
from .._suggest import did_you_mean
from ..errors import InputError

__all__ = ["EmbeddingSet", "load_embeddings", "read_arrays", "read_npy", "check_file"]


@dataclass(frozen=True)
class EmbeddingSet:
    """Embeddings (n x d) with optional labels and ids (n each), and where they came from;
    ``columns``: the per-row metadata asked for with ``load_embeddings(columns=...)``
    (``{name: array}``, e.g. ``evaluate(..., slices=s.columns)``).

    Built by :func:`~retrieval_checks.load_embeddings`.

    Parameters
    ----------
    embeddings:
        (n x d) array.
    labels, ids:
        One label / id per row, or None.
    source:
        Where the embeddings came from (a path, or a model and its input).
    columns:
        ``{name: array}``: per-row metadata (default empty).

    Raises
    ------
    None
        A plain frozen record; the loaders check what they put in it.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> import retrieval_checks as rc
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = pathlib.Path(tmp.name) / "queries.npz"
    >>> np.savez(path, embeddings=np.eye(3, dtype=np.float32), labels=np.array([0, 0, 1]),
    ...          lang=np.array(["de", "en", "de"]))
    >>> s = rc.load_embeddings(path, columns=["lang"])
    >>> res = rc.evaluate(s.embeddings, query_labels=s.labels, metrics=["hit_rate@1"],
    ...                   slices=s.columns)
    >>> sorted(res.slices)
    ['lang=de', 'lang=en']
    >>> tmp.cleanup()
    """

    embeddings: np.ndarray
    labels: np.ndarray | None
    ids: np.ndarray | None
    source: str
    columns: dict = field(default_factory=dict)


def _ext(path: Path) -> str:
    return path.suffix.lower()


def _damaged(path: Path, exc: BaseException, member: str | None = None) -> InputError:
    ext = _ext(path)
    what = f"member {member!r} of {path}" if member is not None else str(path)
    return InputError(
        f"{what}: cannot read it as {ext or 'a data file'}: the file is truncated, damaged or not a {ext} file "
        f"({_short(exc)}). Write it again with {_HOW_TO_WRITE.get(ext, 'the tool that made it')}."
    )


def _native(arr: np.ndarray, where: str) -> np.ndarray:
    """``arr`` in native byte order, half and smaller floats as float32; object arrays refused."""
    arr = np.asarray(arr)
    if arr.dtype.hasobject:
        raise InputError(f"{where}: holds Python objects (dtype object); store numbers or strings.")
    if arr.dtype.kind == "f" and arr.dtype.itemsize < 4:
        arr = arr.astype(np.float32)
    if not arr.dtype.isnative:
        arr = arr.astype(
            arr.dtype.newbyteorder("=")
        )  # big-endian data read as numbers, not misread
    return arr


class _LazyArrays(Mapping):
    """The arrays of one file by name; each is read (and converted) on first access only,
    so listing the names, ``in`` and ``len`` never touch the data."""

    def __init__(self, path: Path, names, read_one, read_nullable=None):
        self.path = path
        self._names = list(dict.fromkeys(names))
        self._read_one = read_one
        self._read_nullable = read_nullable
        self._loaded: dict = {}

    def nullable(self, key):
        """Array ``key`` read as per-row metadata (slice values): a format's missing
        marker (a parquet null) is None in an object array, a missing value that is
        counted, where :meth:`__getitem__` (embeddings, labels, ids) refuses it."""
        if self._read_nullable is None or key not in self._names:
            return self[key]
        return self._read_nullable(key)

    def __getitem__(self, key):
        if key not in self._names:
            raise KeyError(key)
        if key not in self._loaded:
            self._loaded[key] = _native(self._read_one(key), f"{self.path}: {key!r}")
        return self._loaded[key]

    def __contains__(self, key) -> bool:
        return key in self._names

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"<arrays of {self.path}: {', '.join(map(repr, self._names))}>"


def _np_load(p: Path, not_numpy: str, rewrite: str, mmap_mode: str | None = None):
    """``np.load(p)`` without pickle: an array or an open NpzFile. A file numpy would read
    as a pickle is refused saying so (``not_numpy``: why it is not a numpy file;
    ``rewrite``: how to write it again); any other failure is the file's damage.
    ``mmap_mode`` maps a .npy file instead of reading it (ignored for .npz)."""
    try:
        return np.load(p, allow_pickle=False, mmap_mode=mmap_mode)
    except ValueError as exc:
        text = str(exc).lower()
        if (
            "object arrays" in text or "python objects" in text
        ):  # a sound .npy whose dtype is object
            raise InputError(
                f"{p}: holds an object array (dtype object: Python objects that numpy stores as a "
                "pickle, written with allow_pickle=True), which is refused (no code runs from data "
                "files). Save numbers or strings: numpy.save(path, np.asarray(values, "
                "dtype=np.float32)); rows of different lengths cannot be embeddings."
            ) from None
        if "pickle" in text:
            raise InputError(
                f"{p}: {not_numpy}, so numpy would read it as a pickle of Python objects, which is "
                f"refused (no code runs from data files). {rewrite}"
            ) from None
        raise _damaged(p, exc) from None
    except Exception as exc:  # EOFError, a damaged header's tokenizer errors, OSError...
        raise _damaged(p, exc) from None


def read_npy(path) -> np.ndarray:
    """The one array of a ``.npy`` file (no pickle), in native byte order; every
    problem is an :class:`~retrieval_checks.InputError` naming the file. The file is
    memory-mapped copy-on-write: pages are read when the engine's chunks reach them, so
    a gallery larger than memory streams (a writable array; writes never reach the file)."""
    p = check_file(path)
    arr = _np_load(
        p,
        "has no .npy header",
        "If it is damaged or not a .npy file, write it again with numpy.save(path, embeddings).",
        mmap_mode="c",
    )
    if not isinstance(arr, np.ndarray):
        close = getattr(arr, "close", None)
        if close is not None:
            close()
        raise InputError(
            f"{p}: is a .npz archive (named arrays), not a .npy file; rename it to .npz."
        )
    return _native(arr, str(p))


def _read_npz(p: Path) -> Mapping:
    data = _np_load(
        p,
        "is not a .npz (zip) archive",
        "If it is damaged, write it again with numpy.savez(path, embeddings=..., labels=...).",
    )
    if isinstance(data, np.ndarray):
        raise InputError(f"{p}: is a .npy file (one array), not a .npz archive; rename it to .npy.")
    with data:
        names = list(data.files)  # the zip directory only: no member is decompressed

    def read_one(key):
        try:
            with np.load(p, allow_pickle=False) as data:
                value = data[key]  # this member only (numpy's NpzFile is lazy per member)
        except ValueError as exc:
            if "object arrays" in str(exc).lower() or "pickle" in str(exc).lower():
                raise InputError(
                    f"{p}: member {key!r} holds Python objects (pickle), which are refused; "
                    "store numbers or strings."
                ) from None
            raise _damaged(p, exc, key) from None
        except Exception as exc:  # bad CRC-32, truncated deflate stream, EOF...
            raise _damaged(p, exc, key) from None
        if not isinstance(value, np.ndarray):
            raise InputError(
                f"{p}: member {key!r} is not a .npy array (it holds raw bytes); write the file "
                "with numpy.savez."
            )
        return value

    return _LazyArrays(p, names, read_one)


_TORCH_CONVERTED = ("BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0")


def _read_safetensors(p: Path) -> Mapping:
    try:
        from safetensors import safe_open
    except ImportError:
        raise InputError(
            f"{p}: reading .safetensors needs the safetensors package (pip install safetensors)."
        ) from None
    try:
        with safe_open(str(p), framework="np") as f:
            names = list(f.keys())
            dtypes = {k: f.get_slice(k).get_dtype() for k in names}
    except Exception as exc:  # SafetensorError on a damaged header, OSError...
        raise _damaged(p, exc) from None

    def read_one(key):
        try:
            if dtypes[key] in _TORCH_CONVERTED or dtypes[key].startswith("F8"):
                try:
                    import torch  # noqa: F401  (numpy has no bfloat16)
                except ImportError:
                    raise InputError(
                        f"{p}: tensor {key!r} is {dtypes[key]}, which numpy cannot hold; converting "
                        "it needs PyTorch (pip install torch), or save it as float32."
                    ) from None
                with safe_open(str(p), framework="pt") as f:
                    return f.get_tensor(key).float().numpy()
            with safe_open(str(p), framework="np") as f:
                return f.get_tensor(key)
        except InputError:
            raise
        except Exception as exc:
            raise _damaged(p, exc, key) from None

    return _LazyArrays(p, names, read_one)


def _pt_value(p: Path, key: str, value, torch):
    where = f"{p}: {key!r}"
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.layout != torch.strided:
            raise InputError(
                f"{where}: is a sparse tensor (layout {value.layout}), which is not read as an array "
                f"(its implicit zeros would be guesses); save it dense: torch.save({{{key!r}: "
                "tensor.to_dense(), ...}, path)."
            )
        if value.is_complex():
            raise InputError(f"{where}: is a complex tensor; store real numbers.")
        if value.is_floating_point() and value.dtype not in (torch.float32, torch.float64):
            value = value.float()  # bfloat16, float16, float8: numpy has no bfloat16
        return value.numpy()
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (list, tuple)):
        return _list_array(where, value)
    if isinstance(value, (bool, int, float, str)):
        return np.asarray(value)
    raise InputError(
        f"{where}: holds a {type(value).__name__}; each entry must be a tensor, an array or a list "
        "of numbers or strings."
    )


def _list_array(where: str, values) -> np.ndarray:
    """A list as an array without numpy's silent merges (``[1, "1"]`` would become strings)."""
    kinds = set()
    for v in values:
        if isinstance(v, (list, tuple)):
            kinds.add("list")
        elif isinstance(v, str):
            kinds.add("str")
        elif isinstance(v, (bool, np.bool_)):
            kinds.add("bool")
        elif isinstance(v, (int, np.integer)):
            kinds.add("int")
        elif isinstance(v, (float, np.floating)):
            kinds.add("float")
        else:
            kinds.add(type(v).__name__)
    if kinds == {"int", "float"}:
        kinds = {"float"}
    if len(kinds) > 1:
        raise InputError(
            f"{where}: the list mixes {', '.join(sorted(kinds))} values; numpy would silently merge "
            "them (1 and '1' become the same string). Make every entry the same type."
        )
    if kinds - {"list", "str", "bool", "int", "float"}:
        raise InputError(f"{where}: the list holds {kinds.pop()} values; store numbers or strings.")
    try:
        arr = np.asarray(values)
    except ValueError as exc:
        raise InputError(
            f"{where}: the nested lists are ragged (rows of different lengths: {_short(exc, 80)}); "
            "give every row the same length."
        ) from None
    if arr.dtype.hasobject:
        raise InputError(
            f"{where}: the nested lists are ragged or mix types; give every row the same length "
            "and type."
        )
    return arr


def _read_pt(p: Path) -> Mapping:
    try:
        import torch
    except ImportError:
        raise InputError(f"{p}: reading .pt files needs PyTorch (pip install torch).") from None
    if zipfile.is_zipfile(p):
        try:
            _verify_zip_crc(p)
        except Exception as exc:  # a flipped bit in the data: the stored CRC-32 no longer matches
            raise _damaged(p, exc) from None
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:  # weights_only refuses pickled code: say so
        raise InputError(
            f"{p}: torch.load(weights_only=True) refused the file ({unpickler_complaint(exc)}). Only tensors, "
            "arrays, numbers, strings and containers of them are read, so no code in the file runs: save a dict of "
            f"tensors instead ({_HOW_TO_WRITE['.pt']}); if the file is damaged, write it again."
        ) from None
    except Exception as exc:  # a truncated archive, a torn record, EOF
        raise _damaged(p, exc) from None
    if isinstance(obj, torch.Tensor):
        obj = {"embeddings": obj}
    if not isinstance(obj, dict):
        raise InputError(
            f"{p}: expected a tensor or a dict of tensors, found {type(obj).__name__}; save "
            f"{_HOW_TO_WRITE['.pt']}."
        )
    values = {str(k): v for k, v in obj.items()}
    return _LazyArrays(p, list(values), lambda key: _pt_value(p, key, values[key], torch))


def _read_parquet(p: Path) -> Mapping:
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"{p}: reading .parquet needs pyarrow (pip install pyarrow).") from None
    try:
        names = list(pq.ParquetFile(p).schema_arrow.names)
    except Exception as exc:  # ArrowInvalid, OSError: a damaged footer or not parquet at all
        raise _damaged(p, exc) from None

    def column(name):
        try:
            return pq.read_table(p, columns=[name]).column(name).combine_chunks()
        except Exception as exc:
            raise _damaged(p, exc, name) from None

    def read_nullable(name):
        """A scalar column with nulls as an object array, None at the nulls."""
        col = column(name)
        if not col.null_count or pa.types.is_nested(col.type):
            return read_one(name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        return np.array(col.to_pylist(), dtype=object)

    def read_one(name):
        col = column(name)
        where = f"{p}: column {name!r}"
        if col.null_count:
            raise InputError(
                f"{where} has {col.null_count} null row(s); fill or drop them (a slice column's nulls are "
                "queries without a value: read it with load_embeddings(columns=) or a suite's slices:)."
            )
        t = col.type
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            inner = t.value_type
            if not (pa.types.is_floating(inner) or pa.types.is_integer(inner)):
                raise InputError(
                    f"{where} holds lists of {inner}; embeddings need lists of numbers."
                )
            flat = pc.list_flatten(col)
            if flat.null_count:
                raise InputError(
                    f"{where} has {flat.null_count} null value(s) inside its lists; fill them."
                )
            lengths = np.asarray(pc.list_value_length(col).to_numpy(zero_copy_only=False))
            if len(col) and len(set(lengths.tolist())) != 1:
                raise InputError(
                    f"{where} holds lists of different lengths {sorted(set(lengths.tolist()))[:5]}; "
                    "every row needs the same dimension."
                )
            dim = int(lengths[0]) if len(col) else 0
            # a copy: arrow's buffers are read-only, and torch.from_numpy warns about (and may not write to) them;
            # floats become float32 (the engine's precision), integers keep their type (binary codes, token ids)
            dtype = np.float32 if pa.types.is_floating(inner) else inner.to_pandas_dtype()
            return np.array(flat.to_numpy(zero_copy_only=False), dtype=dtype).reshape(len(col), dim)
        if pa.types.is_nested(t) or pa.types.is_dictionary(t) and pa.types.is_nested(t.value_type):
            raise InputError(
                f"{where} has the nested type {t}; store numbers, strings or lists of numbers."
            )
        return _scalar_column(col, pa)

    return _LazyArrays(p, names, read_one, read_nullable)


def _scalar_column(col, pa) -> np.ndarray:
    """A column of scalars as numpy, by arrow's vectorised conversion: integers, floats and
    booleans keep their type (int64 labels stay int64), texts become a numpy string array
    (dictionary-encoded columns are decoded first); other types go through Python values."""
    if pa.types.is_dictionary(col.type):
        col = (
            col.dictionary_decode()
            if hasattr(col, "dictionary_decode")
            else col.cast(col.type.value_type)
        )
    t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return np.array(
            col.to_numpy(zero_copy_only=False), dtype=t.to_pandas_dtype()
        )  # a writable copy
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return col.to_numpy(zero_copy_only=False).astype(str)
    return np.asarray(col.to_pylist())


_READERS = {
    ".npz": _read_npz,
    ".safetensors": _read_safetensors,
    ".pt": _read_pt,
    ".pth": _read_pt,
    ".parquet": _read_parquet,
}


def read_arrays(path) -> Mapping:
    """The named arrays of a ``.npz``, ``.safetensors``, ``.pt``/``.pth`` or ``.parquet``
    file, as a read-only mapping that reads each array on first access (listing the
    names reads no data). ``.npy`` files hold one array: use :func:`read_npy`."""
    p = Path(os.fspath(path))
    reader = _READERS.get(_ext(p))
    if reader is None:
        extra = " (a .npy file holds one array: read it with read_npy)" if _ext(p) == ".npy" else ""
        raise InputError(
            f"{p}: unknown file type {_ext(p) or '(no extension)'!r}{extra}; use {_FORMATS}."
        )
    return reader(check_file(p))


#: The names other tools give each array, for "did you mean" when no name is spelt alike
#: (sklearn's X / y, PyTorch datasets' targets, feature extractors' features...).
_SYNONYMS = {
    "embeddings": (
        "embedding",
        "emb",
        "embs",
        "features",
        "feats",
        "feature",
        "vectors",
        "vecs",
        "x",
        "reps",
        "representations",
        "encodings",
    ),
    "labels": (
        "label",
        "targets",
        "target",
        "y",
        "classes",
        "class_ids",
        "class_id",
        "label_ids",
        "categories",
        "pids",
        "person_ids",
        "identities",
    ),
    "ids": ("id", "item_ids", "uids", "image_ids", "doc_ids", "filenames"),
}


def closest_key(
    what: str, key: str, available: list[str], exclude: tuple = (), fits=None
) -> str | None:
    """The name in ``available`` most likely meant for ``what`` asked as ``key``: one spelt
    alike, else (for the default key) one of the usual other names of ``what`` for which
    ``fits(name)`` holds (when given: its array has the shape ``what`` needs)."""
    candidates = [k for k in available if k not in exclude and k != key]
    close = did_you_mean(key, candidates)
    if close is None and key == what:
        folded = {k.lower(): k for k in candidates}
        close = next(
            (
                folded[n]
                for n in _SYNONYMS.get(what, ())
                if n in folded and (fits is None or fits(folded[n]))
            ),
            None,
        )
    return close


def _missing(
    path: Path, what: str, key: str, available: list[str], exclude: tuple = (), fits=None
) -> InputError:
    close = closest_key(what, key, available, exclude, fits)
    return InputError(
        f"{path}: no {what} named {key!r}; the file has {', '.join(map(repr, available)) or 'nothing'}."
        f"{f' Did you mean {close!r}?' if close is not None else ''} "
        f"Pass {what}=<name> to choose another"
        + (" (or None to read none)." if what != "embeddings" else ".")
    )


def _check_key(name: str, value, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value:
        expected = "a non-empty string (the array's name in the file)" + (
            " or None" if optional else ""
        )
        raise InputError(f"{name}={value!r}: expected {expected}.")


def load_embeddings(
    path,
    *,
    embeddings: str = "embeddings",
    labels: str | None = "labels",
    ids: str | None = "ids",
    labels_required: bool = False,
    columns=(),
) -> EmbeddingSet:
    """Read embeddings (and, when present, labels and ids) from ``path``.

    ``labels`` / ``ids``: the key to read, or None to skip. The default keys
    (``labels``, ``ids``) may be absent, unless ``labels_required``, or unless the file
    holds a close name (``label``), which is then suggested; a key you name yourself
    must exist. Paths may be strings or ``pathlib.Path``. Embeddings must be a
    non-empty, finite 2-D numeric array; they come back in native byte order, with
    half-precision and bfloat16 values as float32.

    ``columns``: names of other arrays to read, one value per row (per-query metadata
    such as a language or a category, for ``evaluate(..., slices=s.columns)``); each
    must exist (a .npy file holds none).

    Parameters
    ----------
    path:
        The file (str or ``pathlib.Path``): ``.npy`` (the embeddings alone), ``.npz``,
        ``.pt``, ``.safetensors`` or ``.parquet``.
    embeddings:
        The key of the embeddings (default ``"embeddings"``).
    labels, ids:
        The keys of the labels and ids (default ``"labels"``, ``"ids"``), or None to
        read none.
    labels_required:
        Refuse a file without labels (default False).
    columns:
        Names of other per-row arrays to read into ``EmbeddingSet.columns``.

    Returns
    -------
    EmbeddingSet
        The embeddings, labels and ids (None when absent), the source path and the
        columns.

    Raises
    ------
    InputError
        A path that is not one, a missing, damaged or unsupported file, a missing key
        (with the closest name the file has), embeddings that are not a non-empty
        finite 2-D numeric array, labels, ids or columns without one value per row,
        columns asked of a ``.npy`` file.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> import retrieval_checks as rc
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = pathlib.Path(tmp.name) / "queries.npz"
    >>> np.savez(path, embeddings=np.eye(3, dtype=np.float32), labels=np.array([0, 0, 1]),
    ...          lang=np.array(["de", "en", "de"]))
    >>> s = rc.load_embeddings(path, columns=["lang"])
    >>> s.embeddings.shape, s.labels, s.ids, s.columns["lang"]
    ((3, 3), array([0, 0, 1]), None, array(['de', 'en', 'de'], dtype='<U2'))
    >>> rc.load_embeddings(path, labels="label")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    retrieval_checks.errors.InputError: ...queries.npz: no labels named 'label'; ... Did you mean 'labels'? ...
    >>> tmp.cleanup()
    """
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise InputError(
            f"path={path!r}: expected a file path (a str or pathlib.Path) of a {_FORMATS} file."
        )
    _check_key("embeddings", embeddings, optional=False)
    _check_key("labels", labels, optional=True)
    _check_key("ids", ids, optional=True)
    if not isinstance(labels_required, (bool, np.bool_)):
        raise InputError(f"labels_required={labels_required!r}: expected True or False.")
    if labels_required and labels is None:
        raise InputError(
            "labels=None with labels_required=True: name the labels' key (labels='<name>') or drop "
            "labels_required."
        )
    columns = _column_names(columns)
    p = Path(os.fspath(path))
    if _ext(p) == ".npy":
        if columns:
            raise InputError(
                f"{p}: a .npy file holds one array (the embeddings); columns {', '.join(map(repr, columns))} need "
                "a file with named arrays (.npz, .pt, .safetensors, .parquet)."
            )
        emb = read_npy(p)
        if labels_required:
            raise InputError(
                f"{p}: a .npy file holds one array (the embeddings); give labels in another file or "
                "use .npz."
            )
        return EmbeddingSet(_check_2d(emb, p), None, None, str(p))
    data = read_arrays(p)
    available = list(data)
    if embeddings not in data:
        raise _missing(p, "embeddings", embeddings, available)
    emb = _check_2d(data[embeddings], p, embeddings)
    out_labels = out_ids = None
    for key, name, default in ((labels, "labels", "labels"), (ids, "ids", "ids")):
        if key is None:
            continue
        if key not in data:
            named = key != default or (name == "labels" and labels_required)
            taken = (
                embeddings,
                labels,
                ids,
            )  # never suggest an array already read as something else

            def fits(k, n=emb.shape[0]):  # an array under another usual name: one value per row?
                try:
                    return np.ndim(data[k]) == 1 and len(data[k]) == n
                except InputError:  # a damaged or refused member is no candidate
                    return False

            if named or closest_key(name, key, available, taken, fits) is not None:
                raise _missing(p, name, key, available, taken, fits)
            continue
        arr = np.asarray(data[key])
        if arr.ndim != 1 or arr.shape[0] != emb.shape[0]:
            raise InputError(
                f"{p}: {name} {key!r} has shape {arr.shape} but there are {emb.shape[0]} embeddings; "
                f"give one {name[:-1]} per row."
            )
        if name == "labels":
            out_labels = arr
        else:
            out_ids = arr
    out_columns = {}
    for key in columns:
        if key not in data:
            close = did_you_mean(key, available)
            raise InputError(
                f"{p}: no column named {key!r}; the file has {', '.join(map(repr, available))}."
                + (f" Did you mean {close!r}?" if close else "")
            )
        # per-row metadata: a null or a blank text is a row without a value (None), not an error
        arr = metadata_column(data.nullable(key) if hasattr(data, "nullable") else data[key])
        if arr.ndim != 1 or arr.shape[0] != emb.shape[0]:
            raise InputError(
                f"{p}: column {key!r} has shape {arr.shape} but there are {emb.shape[0]} embeddings; give one "
                "value per row."
            )
        out_columns[key] = arr
    return EmbeddingSet(emb, out_labels, out_ids, str(p), out_columns)


def metadata_column(values) -> np.ndarray:
    """A file's per-row metadata column (slice values) as numpy: a blank text ("" or
    spaces) is the file's "no value" (None, in an object array), as a null is: a text
    array of npz or safetensors has no other way to say it (a text file's empty field
    reads the same)."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        return arr
    if arr.dtype.kind in "US":
        text = arr.astype(str)
        blank = np.char.str_len(np.char.strip(text)) == 0
        if not blank.any():
            return arr
        out = text.astype(object)
        out[blank] = None
        return out
    if arr.dtype == object:
        blank = np.fromiter((isinstance(v, str) and not v.strip() for v in arr), bool, arr.size)
        if blank.any():
            arr = arr.copy()
            arr[blank] = None
    return arr


def _column_names(columns) -> tuple:
    """``columns=`` as a tuple of distinct array names."""
    if isinstance(columns, str):
        columns = (columns,)
    try:
        names = tuple(columns)
    except TypeError:
        raise InputError(
            f"columns={columns!r}: expected the names of arrays in the file (a list of strings)."
        ) from None
    for c in names:
        if not isinstance(c, str) or not c:
            raise InputError(f"columns: {c!r} is not an array name (a non-empty string).")
    if len(set(names)) != len(names):
        raise InputError(f"columns={list(names)!r}: a name is given twice.")
    return names


def _check_2d(arr, p: Path, key: str = "embeddings") -> np.ndarray:
    arr = _native(arr, f"{p}: {key!r}")
    if arr.ndim != 2:
        raise InputError(
            f"{p}: {key!r} has shape {arr.shape}; embeddings must be 2-D (n_items x dim)."
        )
    if arr.dtype.kind not in "fiu":
        raise InputError(f"{p}: {key!r} has dtype {arr.dtype}; embeddings must be numeric.")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(
            f"{p}: {key!r} has shape {arr.shape}: no {'rows' if arr.shape[0] == 0 else 'dimensions'}; "
            "write the embeddings into the file."
        )
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            rows = np.flatnonzero(bad)
            raise InputError(
                f"{p}: {key!r} has NaN or Inf in {rows.size} row(s), first rows {rows[:5].tolist()}; "
                "recompute or drop those embeddings."
            )
    return arr
