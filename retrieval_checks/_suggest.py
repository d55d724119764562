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
    match = difflib.get_close_matches(text.lower(), list(options), n=1, cutoff=CUTOFF)
    return options[match[0]] if match else None


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
