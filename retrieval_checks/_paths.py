"""Opening a user's file safely: one check that a path is a readable, non-empty regular
file (naming it and the fix when it is not), a CRC-32 pass over zip-based files, and a
one-line rendering of a third-party exception for messages.

Shared by the layers that read files (``data`` reads embeddings, ``models`` reads
TorchScript, torch.export and weights files); it imports no layer.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import zipfile
from pathlib import Path

from .errors import InputError

__all__ = ["check_file", "missing_file", "verify_zip_crc", "short", "HOW_TO_WRITE", "FORMATS"]

#: How to write each format again, for the messages about damaged files.
HOW_TO_WRITE = {
    ".npy": "numpy.save(path, embeddings)",
    ".npz": "numpy.savez(path, embeddings=..., labels=..., ids=...)",
    ".pt": "torch.save({'embeddings': tensor, 'labels': tensor}, path)",
    ".pth": "torch.save({'embeddings': tensor, 'labels': tensor}, path)",
    ".safetensors": "safetensors.numpy.save_file({'embeddings': array, ...}, path)",
    ".parquet": "pyarrow.parquet.write_table(table, path)",
}
FORMATS = ".npy, .npz, .safetensors, .pt/.pth or .parquet"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def short(exc: BaseException, limit: int = 200) -> str:
    """``Type: message`` on one line, without terminal colour codes, at most ``limit`` characters."""
    text = " ".join(_ANSI.sub("", f"{type(exc).__name__}: {exc}").split())
    return text if len(text) <= limit else text[:limit] + "..."


def check_file(path, *, what: str = "file") -> Path:
    """``path`` as a :class:`~pathlib.Path` once it is known to be a readable, non-empty
    regular file; else an :class:`~retrieval_checks.InputError` naming it and the fix
    (missing, a broken symbolic link or a loop, a directory, a FIFO or device, empty,
    not readable). ``what`` names the role of the file in the message."""
    p = Path(os.fspath(path))
    try:
        st = os.stat(p)
    except FileNotFoundError:
        if os.path.islink(p):
            raise InputError(
                f"{p}: the {what} is a broken symbolic link (to {os.readlink(p)!r}, which does not "
                "exist); point it at the real file."
            ) from None
        raise InputError(
            f"{p}: no such {what} (resolved to {os.path.abspath(p)}); check the path, which is "
            f"relative to the current directory {os.getcwd()} unless absolute."
        ) from None
    except PermissionError:
        raise InputError(
            f"{p}: the {what} cannot be reached (permission denied on a directory of its path); "
            "make its directories searchable (chmod +x) or move the file."
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(
                f"{p}: the {what} is a symbolic link loop (it points back to itself); point the "
                "link at a real file."
            ) from None
        if exc.errno == errno.ENOTDIR:
            raise InputError(
                f"{p}: a part of the path is a file, not a directory; check the path of the {what}."
            ) from None
        raise InputError(f"{p}: cannot open the {what} ({short(exc)}); check the path.") from None
    except (ValueError, TypeError) as exc:  # embedded NUL bytes and the like
        raise InputError(f"{path!r}: not a usable path for the {what} ({short(exc)}).") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(
            f"{p}: is a directory, not a {what}; give the path of a {FORMATS} file inside it."
        )
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{p}: is not a regular file (a FIFO, socket or device); give the path of a {what} "
            f"({FORMATS})."
        )
    if st.st_size == 0:
        raise InputError(
            f"{p}: the {what} is empty (0 bytes), so it was not written completely; write it again"
            f"{' with ' + HOW_TO_WRITE[p.suffix.lower()] if p.suffix.lower() in HOW_TO_WRITE else ''}."
        )
    try:
        with open(p, "rb") as f:
            f.read(1)
    except PermissionError:
        raise InputError(
            f"{p}: the {what} is not readable (permission denied); make it readable "
            "(chmod u+r) or run as a user who may read it."
        ) from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read the {what} ({short(exc)}).") from None
    return p


def missing_file(path) -> str:
    """Why ``path`` is not a regular file, in a few words (for a message that names the
    file first): "is a symbolic link loop (...)", "is a broken symbolic link to ...",
    "is a directory, not a file", "is not a regular file", "cannot be reached (...)" or
    "does not exist"."""
    p = Path(os.fspath(path))
    try:
        st = os.stat(p)
    except FileNotFoundError:
        if os.path.islink(p):
            return f"is a broken symbolic link (to {os.readlink(p)!r}, which does not exist)"
        return "does not exist"
    except PermissionError:
        return "cannot be reached (permission denied on a directory of its path)"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return (
                "is a symbolic link loop (it points back to itself; point the link at a real file)"
            )
        if exc.errno == errno.ENOTDIR:
            return "cannot exist (a part of its path is a file, not a directory)"
        return f"cannot be opened ({short(exc)})"
    except (ValueError, TypeError) as exc:
        return f"is not a usable path ({short(exc)})"
    if stat.S_ISDIR(st.st_mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a FIFO, socket or device)"
    return "is a file"


def verify_zip_crc(path: Path) -> None:
    """Read every record of a zip-based file once, so zipfile checks its CRC-32 (records
    whose writer stored no CRC, 0, cannot be checked and are skipped)."""
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if info.CRC == 0 or info.is_dir():
                continue
            with zf.open(info) as member:
                while member.read(1 << 22):
                    pass


def unpickler_complaint(exc) -> str:
    """What ``torch.load(weights_only=True)`` objected to, in one line, without torch's
    advice to re-run with ``weights_only=False`` (which would run the file's code)."""
    text = str(exc)
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(
            (
                "WeightsUnpickler error:",
                "Unsupported global",
                "Unsupported operand",
                "Trying to load unsupported",
            )
        ):
            line = " ".join(_ANSI.sub("", line).split())
            return line if len(line) <= 200 else line[:200] + "..."
    return "the file holds pickled Python objects, not only tensors"
