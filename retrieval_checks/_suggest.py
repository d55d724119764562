"""How a message shows what it rejects: one "did you mean" for every message that
rejects a name, and one way to show a rejected value (:func:`shown`).

A suggestion is the closest candidate by :func:`difflib.get_close_matches` (case
folded, one cutoff everywhere) and never the rejected name itself: suggesting what the
user just wrote would send them in a circle.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean", "hint", "shown", "CUTOFF"]

#: Similarity ratio a candidate needs to be suggested (difflib's measure, 0 to 1).
CUTOFF = 0.6


def did_you_mean(value, candidates: Iterable) -> str | None:
    """The candidate closest to ``value`` (compared case-insensitively), or None when
    nothing is close enough; never ``value`` itself."""
    text = str(value).strip()
    options = {}
    for c in candidates:
        c = str(c)
        if c != text:
            options.setdefault(c.lower(), c)
    close = difflib.get_close_matches(text.lower(), list(options), n=3, cutoff=CUTOFF)
    if not close:
        return None
    # difflib's ratio favours the longer candidate sharing more letters ('querys' reads as
    # 'query_ids'); of the close ones, the fewest edits away wins (then difflib's order)
    best = min(close, key=lambda c: (_edits(text.lower(), c), close.index(c)))
    return options[best]


def _edits(a: str, b: str) -> int:
    """The Levenshtein distance of two short names (insertions, deletions, substitutions)."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def hint(value, candidates: Iterable) -> str:
    """``" Did you mean 'x'?"`` for the closest candidate, or ``""``."""
    close = did_you_mean(value, candidates)
    return f" Did you mean {close!r}?" if close is not None else ""


def shown(value, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for a message: a 400-digit number,
    a megabyte string or a hostile ``__repr__`` never fills (or breaks) an error."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        # str() of a 5000-digit int raises, and its digits say nothing
        return f"{'-' if value < 0 else ''}an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[: limit - 20]}...({len(text)} characters)"
