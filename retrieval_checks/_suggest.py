"""One "did you mean" for every message that rejects a name.

A suggestion is the closest candidate by :func:`difflib.get_close_matches` (case
folded, one cutoff everywhere) and never the rejected name itself: suggesting what the
user just wrote would send them in a circle.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean", "hint", "CUTOFF"]

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
    match = difflib.get_close_matches(text.lower(), list(options), n=1, cutoff=CUTOFF)
    return options[match[0]] if match else None


def hint(value, candidates: Iterable) -> str:
    """``" Did you mean 'x'?"`` for the closest candidate, or ``""``."""
    close = did_you_mean(value, candidates)
    return f" Did you mean {close!r}?" if close is not None else ""
