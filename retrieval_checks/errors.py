"""The exception hierarchy of retrieval-checks.

Every error the library raises on purpose derives from :class:`RetrievalChecksError`,
so ``except RetrievalChecksError`` catches all of them. Errors about the caller's
input also derive from :class:`ValueError` so that generic handlers keep working.
Messages name the array, field or metric at fault and say how to fix it.

Warnings the library issues about a statistic that says little or looks wrong are
:class:`IntervalWarning` (a ``RuntimeWarning``, so existing filters keep working).
"""

from __future__ import annotations

__all__ = [
    "RetrievalChecksError",
    "InputError",
    "MetricNameError",
    "EmptyQueriesError",
    "BackendError",
    "SuiteError",
    "ModelTimeoutError",
    "IntervalWarning",
    "PowerWarning",
]


class RetrievalChecksError(Exception):
    """Base class of every error raised by retrieval-checks."""


class InputError(RetrievalChecksError, ValueError):
    """An input array, label set, id set or option is invalid."""


class MetricNameError(InputError):
    """A metric name is unknown or malformed.

    ``suggestion`` holds the closest canonical name, when one is close enough.
    """

    def __init__(self, message: str, *, name: str, suggestion: str | None = None):
        super().__init__(message)
        self.name = name
        self.suggestion = suggestion


class EmptyQueriesError(InputError):
    """Queries without any relevant gallery item, under ``empty_queries="error"``
    (or when no query at all has a relevant item)."""

    def __init__(self, message: str, *, indices):
        super().__init__(message)
        self.indices = indices


class BackendError(RetrievalChecksError):
    """The requested compute device or backend is not available."""


class SuiteError(InputError):
    """A YAML suite is malformed or refers to something that does not exist.

    ``path``, ``line`` (1-based, or None) and ``field`` (dotted, e.g.
    ``checks[2].at_least``) locate the problem; the message says what is expected.
    """

    def __init__(
        self, message: str, *, path=None, line: int | None = None, field: str | None = None
    ):
        where = str(path) if path is not None else "<suite>"
        if line is not None:
            where += f":{line}"
        prefix = f"{where}: " + (f"{field}: " if field else "")
        super().__init__(prefix + message)
        self.path = path
        self.line = line
        self.field = field
        self.detail = message


class ModelTimeoutError(RetrievalChecksError, TimeoutError):
    """A model did not return within its time limit (a suite's ``timeout:`` or
    ``--rc-timeout``); ``timeout`` holds the limit in seconds."""

    def __init__(self, message: str, *, timeout: float):
        super().__init__(message)
        self.timeout = timeout


class IntervalWarning(RuntimeWarning):
    """An interval or gap that says little or points the wrong way: it rests on fewer
    than a handful of independent units (groups, classes), or a generalization gap's
    whole interval lies below zero (train and test look swapped). Gates record it on
    their event as well; ``warnings.simplefilter("error", IntervalWarning)`` makes it
    fail."""


class PowerWarning(RuntimeWarning):
    """A significance-gated check whose test cannot see the drop it is meant to catch:
    its minimum detectable drop (at the stated power, 0.8 by default) exceeds the gate's
    tolerance, so a real drop of that size would most likely pass as "not significant".
    The message says how many queries (or classes) would be needed; ``min_power`` on
    the check makes it a failure, and ``warnings.simplefilter("error", PowerWarning)``
    does too."""
