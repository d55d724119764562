"""Reading a user's text file (TREC run and qrels, BEIR jsonl and tsv): one home for the
rules every text reader follows, so no reader decides them differently.

- Encoding: UTF-8, strictly. A UTF-8 byte-order mark (EF BB BF, written by Windows
  editors and Excel) at the very start of the file is accepted and removed: it marks
  the encoding and is no part of the first field (left in, it would turn query ``1``
  into ``\\ufeff1``, a different query). One starting a later line (two files joined
  with ``cat``), bytes that are not UTF-8 (Latin-1, a UTF-16 file) and
  unreadable files are each an :class:`~retrieval_checks.InputError` naming the file,
  the line and the fix; inside a line U+FEFF is left to the format (text in JSON, an
  invisible character refused in an id by :func:`check_field`).
- Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (as Python's text mode reads them); nothing
  else ends a line.
- Whitespace-separated formats (TREC) split fields on ASCII spaces and tabs (trec_eval's
  separators); a field holding another space or an invisible character (no-break
  space, zero-width space, a control character) is refused: it would be a different id
  to trec_eval, or a separator trec_eval does not see.
- Numbers follow the file format's grammar, not Python's ``int()`` / ``float()``
  (which read ``1_0`` as 10, ``١`` as 1 and surrounding Unicode spaces): ASCII digits
  only, an optional leading sign, for decimals an optional fraction and exponent
  (``-1.5e-3``), and ``inf`` / ``nan`` (``infinity``, any case) where the reader allows
  them (trec_eval reads numbers with C's ``strtod`` / ``atol``). Integers beyond int64
  and finite decimals beyond float64 are refused, not wrapped or rounded to infinity.
- TREC files (run, qrels) skip blank lines and comment lines, as trec_eval does: a line
  whose first character after any leading spaces or tabs is ``#`` (:func:`trec_records`).
  A ``#`` anywhere else is text (a docid ``#7`` in the third field is a docid).
"""

from __future__ import annotations

import errno
import os
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

from ._paths import missing_file, short
from .errors import InputError

__all__ = [
    "text_lines",
    "split_fields",
    "check_field",
    "parse_int",
    "parse_float",
    "INT64_MAX",
    "id_mismatch",
    "trec_records",
    "is_comment",
]

BOM = "\ufeff"
INT64_MAX = 2**63 - 1
_INT = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SPECIAL = re.compile(r"[+-]?(?:inf|infinity|nan)", re.IGNORECASE)
_ASCII_SPACE = re.compile(r"[ \t\v\f\r]+")


def _open_error(p: Path, what: str, exc: OSError) -> InputError:
    if isinstance(exc, PermissionError):
        return InputError(
            f"{p}: the {what} file is not readable (permission denied); make it readable (chmod u+r) "
            "or run as a user who may read it."
        )
    if isinstance(exc, IsADirectoryError) or exc.errno == errno.EISDIR:
        return InputError(
            f"{p}: the {what} file is a directory; give the path of the {what} file inside it."
        )
    why = missing_file(p)
    if why == "is a file":
        why = f"cannot be read ({short(exc)})"
    return InputError(
        f"{p}: the {what} file {why}; check the path (relative to {os.getcwd()} unless absolute)."
    )


def _decode(raw: bytes, p: Path, what: str, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if number == 1 and raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
            found = "UTF-16 text (it starts with a UTF-16 byte-order mark)"
        else:
            found = f"byte 0x{raw[exc.start]:02x} at column {exc.start + 1} is not UTF-8"
        raise InputError(
            f"{p}:{number}: the {what} file is not UTF-8: {found}. Save it as UTF-8 (e.g. iconv -f "
            f"latin1 -t utf-8, or your editor's 'UTF-8' encoding)."
        ) from None


def text_lines(path, what: str) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line of the UTF-8 text file ``path`` (numbered
    from 1, without the line end; a byte-order mark at the start removed); ``what``
    names the file's role (``"TREC run"``) in the messages."""
    p = Path(os.fspath(path))
    why = missing_file(p)  # before opening: a FIFO would block until a writer comes
    if (
        why != "is a file"
        and why != "cannot be reached (permission denied on a directory of its path)"
    ):
        raise InputError(
            f"{p}: the {what} file {why}; check the path (relative to {os.getcwd()} unless "
            "absolute)."
        )
    try:
        fh = open(p, "rb")
    except OSError as exc:
        raise _open_error(p, what, exc) from None
    number = 0
    with fh:
        lines = iter(fh)
        while True:
            try:
                raw = next(lines, b"")
            except OSError as exc:  # a directory on some systems, an I/O error
                raise _open_error(p, what, exc) from None
            if not raw:
                return
            parts = (
                raw.splitlines() or [b""] if b"\r" in raw else [raw.rstrip(b"\n")]
            )  # \n, \r\n, \r only
            for part in parts:
                number += 1
                text = _decode(part, p, what, number)
                if number == 1 and text.startswith(BOM):
                    text = text[1:]
                elif text.startswith(
                    BOM
                ):  # inside a line, U+FEFF is text (JSON) or refused in an id
                    raise InputError(
                        f"{p}:{number}: a byte-order mark (U+FEFF) starts this line of the {what} file: "
                        "two files were joined (cat), or an editor inserted it; remove it (a byte-order "
                        "mark is accepted only as the file's first character)."
                    )
                yield number, text


def _invisible(ch: str) -> bool:
    """Not a plain space but white or invisible: other spaces, control and format characters."""
    return ch != " " and (
        ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Zs")
    )


def check_field(text: str, where: str, name: str) -> str:
    """``text`` unless it holds a space other than U+0020 or an invisible character
    (no-break space, zero-width space, a tab or other control character): such a field
    is another id than it looks, and trec_eval would not split at it."""
    if text.isascii() and text.isprintable():  # the common case, at C speed: nothing invisible
        return text
    for i, ch in enumerate(text):
        if _invisible(ch):
            label = unicodedata.name(ch, f"U+{ord(ch):04X}")
            raise InputError(
                f"{where}: the {name} {text[:60]!r} holds U+{ord(ch):04X} ({label}) at character {i + 1}: "
                "an invisible character, which makes it another id than it looks and is not a field "
                "separator; remove it (or separate the fields with a plain space or tab)."
            )
    return text


def split_fields(text: str, where: str) -> list[str]:
    """The fields of a whitespace-separated line: split on ASCII spaces and tabs, as
    trec_eval splits; each field checked by :func:`check_field`."""
    plain = text.replace("\t", " ")
    if (
        plain.isascii() and plain.isprintable()
    ):  # the common case: only spaces separate, nothing invisible
        return plain.split()  # printable ASCII holds no whitespace but the space
    fields = [f for f in _ASCII_SPACE.split(text) if f]
    for n, f in enumerate(fields, 1):
        check_field(f, where, f"field {n}")
    return fields


def is_comment(text: str) -> bool:
    """A TREC comment line: ``#`` is its first character after leading spaces and tabs
    (trec_eval skips such lines in qrels and runs)."""
    return text.lstrip(" \t").startswith("#")


def trec_records(path, what: str) -> Iterator[tuple[str, list[str]]]:
    """``("file:line", fields)`` of each record of a TREC file: every line but the blank
    ones and the ``#`` comment lines (:func:`is_comment`), split by :func:`split_fields`."""
    name = str(path)
    for n, text in text_lines(path, what):
        if is_comment(text):
            continue
        where = f"{name}:{n}"
        fields = split_fields(text, where)
        if fields:
            yield where, fields


def parse_int(text: str, where: str, name: str, fix: str) -> int:
    """The integer ``text`` spells in the file grammar (ASCII digits, optional sign; not
    ``1_0``, ``١`` or ``1.0``), within int64; else an InputError ``where: name ...
    fix``."""
    if not _INT.fullmatch(text):
        raise InputError(
            f"{where}: {name} {text[:40]!r} is not a whole number (ASCII digits with an optional "
            f"sign); {fix}"
        )
    value = int(text)
    if abs(value) > INT64_MAX:
        raise InputError(
            f"{where}: {name} {text[:40]!r} is beyond the 64-bit integer range (|value| <= "
            f"{INT64_MAX}); {fix}"
        )
    return value


def parse_float(text: str, where: str, name: str, *, special: bool = True) -> float:
    """The number ``text`` spells in the file grammar (``12``, ``-0.5``, ``.5``,
    ``1e-3``; with ``special``, ``inf`` / ``nan`` too, which the caller judges); a
    finite spelling beyond float64 (``1e400``) is refused rather than read as inf."""
    if _DECIMAL.fullmatch(text):
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise InputError(
                f"{where}: {name} {text[:40]!r} is beyond the float64 range (about 1.8e308); "
                "give a smaller number."
            )
        return value
    if special and _SPECIAL.fullmatch(text):
        return float(text)
    raise InputError(
        f"{where}: {name} {text[:40]!r} is not a number (a decimal such as 12, -0.5 or 1e-3, in "
        "ASCII digits; no digit separators such as 1_0)."
    )


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def id_mismatch(unknown, ids, file: str) -> str:
    """Why ids ``unknown`` (in the order met) are not among ``ids`` (those of ``file``, in
    file order), when it can be told: one side names rows by number (counting from 0),
    the other has real ids; or both are numbers (rows counted from 0 against ids from
    1 shift every judgement). "" when nothing is recognised."""
    unknown, ids = list(unknown), list(ids)
    if not unknown or not ids:
        return ""
    sample = ", ".join(repr(i[:40]) for i in ids[:3])
    known_digits = all(_digits(i) for i in ids)
    if all(_digits(u) for u in unknown):
        if known_digits:
            return (
                f"both are numbers ({file} has {sample}...): if one side counts rows (from 0 or 1) and the other "
                "holds ids, every judgement names another query or document than meant"
            )
        rows = [int(u) for u in unknown[:1] if int(u) < len(ids)]
        at = f" (row {rows[0]} of {file} (from 0) is {ids[rows[0]]!r})" if rows else ""
        return f"it looks like a row number, not an id: ids there look like {sample}{at}"
    if known_digits and all(i == str(n) or i == str(n + 1) for n, i in enumerate(ids[:50])):
        return (
            f"the _id values there look like row numbers ({sample}), while this names {unknown[0][:40]!r}: write "
            f"the real ids into {file}, or name the rows here"
        )
    return f"ids there look like {sample}"
