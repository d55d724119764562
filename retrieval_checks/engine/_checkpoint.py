"""Restartable passes (``evaluate(..., checkpoint=DIR)``): finished blocks' partial
results on disk.

Each finished query block's :class:`~._partial.BlockPartial` is written to ``DIR`` as
one ``.npz`` file, atomically (written under a temporary name unique to the process,
thread and call, flushed, then renamed), so a run killed at any moment leaves only
whole files. A restarted run with the same inputs and options reads the leading
finished blocks back, merges them in order (the merge is the one of the original run,
so the negative tail and every value come out the same) and computes the rest. Files
are keyed by a **fingerprint** of the inputs' content, the options and the tile plan,
written in ``DIR/<part>.json`` (created once: of two runs starting at once, the second
sees the first's) and in **every block**, with a SHA-256 of the block's arrays. A
directory or a block of another run is refused (an InputError naming the file), never
mixed in, even with the manifest lost; a damaged block (empty, truncated, not matching
its checksum) is computed again, with a RuntimeWarning naming it (a damaged manifest
is rewritten, warned: the blocks still say whose they are). A directory that
cannot be written is refused before the pass runs. In a sharded run each rank keeps its
own files (``part`` = ``rank<r>of<W>``), so ``DIR`` may be shared or local. Only the
first pass is checkpointed (the pair metrics' binning pass, when one is needed, runs
again). The store is handed to the pass's one loop (:func:`._stream.stream`'s
``store``), which reads the finished blocks back and saves each new one.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
from pathlib import Path

import numpy as np

from ..errors import InputError, warn_outside
from ._partial import BlockPartial

__all__ = ["Checkpoint", "check_directory"]

_ARRAYS = (
    "indptr",
    "rank",
    "position",
    "tied",
    "positives",
    "negatives",
    "fixed_fp",
    "grade",
    "score",
)
_FORMAT = "retrieval-checks-checkpoint-2"
_OWNER = ("format", "fingerprint", "part")  # whose block it is: checked before its numbers are read
_NEEDED = ("indptr", "rank", "position", "tied", "bounds", "negatives_tau", "checksum")


def _tmp_name(path: Path) -> Path:
    """A temporary name next to ``path``, unique to this process, thread and call: two
    processes or two threads writing the same file never share one."""
    return path.with_name(
        f".{path.name}.{os.getpid()}.{threading.get_ident()}.{secrets.token_hex(6)}.tmp"
    )


def _atomic_write(path: Path, write) -> None:
    tmp = _tmp_name(path)
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _create_once(path: Path, data: bytes) -> bool:
    """Write ``path`` whole, unless it exists (then False): of two runs creating it at
    once, one wins and the other sees the winner's file, never half of it."""
    tmp = _tmp_name(path)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # atomic, and fails where the file exists
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: last writer wins, as before
            if path.exists():
                return False
            os.replace(tmp, path)
        return True
    finally:
        if tmp.exists():
            tmp.unlink()


def _checksum(arrays: dict) -> np.ndarray:
    """SHA-256 over every array's name, dtype, shape and bytes (``checksum`` excluded)."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        if name == "checksum":
            continue
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape};".encode())
        h.update(a.tobytes())
    return np.frombuffer(h.digest(), np.uint8)


def _unwritable(path: Path, exc: OSError) -> InputError:
    return InputError(
        f"checkpoint={str(path)!r} cannot be written ({type(exc).__name__}: "
        f"{exc.strerror or exc}); the run would compute blocks it cannot keep. Make the "
        "directory writable, or pass a writable checkpoint= directory (or none)."
    )


def check_directory(directory) -> Path:
    """The ``checkpoint=`` directory, checked before any work (:func:`rc.evaluate` calls
    this first, :class:`Checkpoint` again): a path (str or PathLike), not a file, created
    if missing, and able to take a file; else an InputError naming it and the fix."""
    if not isinstance(directory, (str, os.PathLike)):
        raise InputError(f"checkpoint={directory!r}: give a directory path (str or pathlib.Path).")
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise InputError(
            f"checkpoint={str(path)!r} is a file; give a directory (it is created if missing)."
        )
    probe = _tmp_name(path / ".write-probe")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as fh:
            fh.write(b"probe")
    except OSError as exc:
        raise _unwritable(path, exc) from None
    finally:
        try:
            probe.unlink()
        except OSError:
            pass
    return path


class Checkpoint:
    """The finished blocks of one pass under ``directory`` (see the module doc).

    ``recomputed`` lists the damaged block files found (each is computed again, with a
    RuntimeWarning naming it)."""

    def __init__(self, directory, fingerprint: str, part: str = "single"):
        self.dir = check_directory(directory)
        self.part = part
        self.fingerprint = fingerprint
        self.recomputed: list[str] = []
        manifest = self.dir / f"{part}.json"
        text = json.dumps({"fingerprint": fingerprint, "part": part}).encode()
        if manifest.exists() or not self._create_manifest(manifest, text):
            try:
                stored = json.loads(manifest.read_text())["fingerprint"]
            except (
                OSError,
                ValueError,
                KeyError,
                TypeError,
            ) as exc:  # the blocks still say whose they are
                warn_outside(
                    f"checkpoint manifest {manifest} is damaged ({type(exc).__name__}: {exc}); it is "
                    "rewritten for this run (each block is checked against the run's fingerprint).",
                    RuntimeWarning,
                )
                try:
                    _atomic_write(manifest, lambda fh: fh.write(text))
                except OSError as err:
                    raise _unwritable(self.dir, err) from None
                stored = fingerprint
            if stored != fingerprint:
                raise InputError(
                    f"checkpoint={str(self.dir)!r} holds the blocks of another run ({manifest.name}: fingerprint "
                    f"{stored} != {fingerprint} of these inputs and options); delete the directory or pass a new one."
                )

    def _create_manifest(self, manifest: Path, text: bytes) -> bool:
        try:
            return _create_once(manifest, text)
        except OSError as exc:
            raise _unwritable(self.dir, exc) from None

    def _path(self, start: int) -> Path:
        return self.dir / f"{self.part}-block{start:012d}.npz"

    def _read(self, start: int, stop: int):
        """(the block's partial, None), or (None, why it is damaged). A whole block of
        another run (or of another rank's part) is an InputError: two runs share the
        directory."""
        path = self._path(start)
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {name: z[name] for name in z.files}
        except (
            Exception
        ) as exc:  # empty, truncated, not a zip, a directory in the way, a bad CRC...
            return None, f"{type(exc).__name__}: {str(exc)[:200]}"
        missing = [k for k in _NEEDED if k not in data]
        if missing:
            return None, f"arrays {missing} are missing"
        if not np.array_equal(data["checksum"], _checksum(data)):
            return None, "its checksum does not match its arrays"
        owner = tuple(str(data[k]) if k in data and data[k].ndim == 0 else None for k in _OWNER)
        if owner != (_FORMAT, self.fingerprint, self.part):
            raise InputError(
                f"checkpoint={str(self.dir)!r}: {path.name} belongs to another run (its format, fingerprint and "
                f"part {owner} != {(_FORMAT, self.fingerprint, self.part)} of these inputs and options): two runs "
                "share this directory, or its manifest was lost or replaced. Give each run its own directory; delete "
                "this one (or its files) to start again."
            )
        bounds = tuple(int(v) for v in data["bounds"])
        if bounds != (start, stop):
            return None, f"it covers queries {bounds}, not {(start, stop)}"
        part = BlockPartial(
            start, stop, data["indptr"], data["rank"], data["position"], data["tied"]
        )
        for name in ("positives", "negatives", "fixed_fp", "grade", "score"):
            if name in data:
                setattr(part, name, data[name])
        part.negatives_tau = float(data["negatives_tau"])
        return part, None

    def finished(self, blocks: list[tuple[int, int]]) -> int:
        """How many leading blocks of ``blocks`` are stored whole. The first damaged one
        (empty, truncated, not matching its checksum) ends them: it and the blocks after
        it are computed again, with a RuntimeWarning naming it."""
        n = 0
        for start, stop in blocks:
            if not os.path.lexists(self._path(start)):
                break
            part, why = self._read(start, stop)
            if part is None:
                self.recomputed.append(str(self._path(start)))
                warn_outside(
                    f"checkpoint block {self._path(start)} is damaged ({why}): it and the {len(blocks) - n - 1} "
                    f"block(s) after it are computed again (and the file rewritten).",
                    RuntimeWarning,
                )
                if self._path(start).is_dir() and not self._path(start).is_symlink():
                    try:
                        self._path(start).rmdir()  # only when empty; else save() reports it
                    except OSError:
                        pass
                break
            n += 1
        return n

    def save(self, part: BlockPartial) -> None:
        arrays = {
            name: np.asarray(getattr(part, name))
            for name in _ARRAYS
            if getattr(part, name) is not None
        }
        arrays["bounds"] = np.array([part.start, part.stop], np.int64)
        arrays["negatives_tau"] = np.array(part.negatives_tau, np.float64)
        arrays["format"], arrays["fingerprint"], arrays["part"] = (
            np.array(_FORMAT),
            np.array(self.fingerprint),
            np.array(self.part),
        )
        arrays["checksum"] = _checksum(arrays)
        try:
            _atomic_write(self._path(part.start), lambda fh: np.savez(fh, **arrays))
        except OSError as exc:
            raise InputError(
                f"checkpoint block {self._path(part.start)} cannot be written ({type(exc).__name__}: "
                f"{exc.strerror or exc}); free space or make checkpoint={str(self.dir)!r} writable, "
                "then run again (the blocks written so far are kept)."
            ) from None

    def load(self, start: int, stop: int) -> BlockPartial:
        """A block that :meth:`finished` counted (read again: it may have changed since)."""
        part, why = self._read(start, stop)
        if part is None:
            raise InputError(
                f"checkpoint block {self._path(start)} cannot be read ({why}); it changed while this run "
                "read the directory (another run writing into it?). Run again: a damaged block is then "
                "computed again."
            )
        return part
