"""The exception hierarchy of retrieval-checks.

Every error the library raises on purpose derives from :class:`RetrievalChecksError`,
so ``except RetrievalChecksError`` catches all of them. Errors about the caller's
input also derive from :class:`ValueError` so that generic handlers keep working.
Messages name the array, field or metric at fault and say how to fix it.

Warnings the library issues about a statistic that says little or looks wrong are
:class:`IntervalWarning` (a ``RuntimeWarning``, so existing filters keep working).
"""

from __future__ import annotations

import sys
import warnings

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
    "SelfMatchWarning",
]


class RetrievalChecksError(Exception):
    """Base class of every error raised by retrieval-checks.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> try:
    ...     rc.evaluate(x, query_labels=[0, 0, 1], metrics=["map"])
    ... except rc.RetrievalChecksError as err:  # every error the library raises on purpose
    ...     print(type(err).__name__, "-", err)
    InputError - query_labels has 3 labels but there are 4 items; give exactly one label per row.
    """


class InputError(RetrievalChecksError, ValueError):
    """An input array, label set, id set or option is invalid.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> rc.evaluate(x, query_labels=[0, 0, 1], metrics=["map"])
    Traceback (most recent call last):
    retrieval_checks.errors.InputError: query_labels has 3 labels but there are 4 items; give exactly one label per row.
    >>> issubclass(rc.InputError, ValueError)  # generic handlers keep working
    True
    """


class MetricNameError(InputError):
    """A metric name is unknown or malformed.

    ``suggestion`` holds the closest canonical name, when one is close enough.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> try:
    ...     rc.evaluate(x, query_labels=[0, 0, 1, 1], metrics=["mAP@rr"])
    ... except rc.MetricNameError as err:
    ...     print(err.name, "->", err.suggestion)
    mAP@rr -> map@R
    """

    def __init__(self, message: str, *, name: str, suggestion: str | None = None):
        super().__init__(message)
        self.name = name
        self.suggestion = suggestion


class EmptyQueriesError(InputError):
    """Queries without any relevant gallery item, under ``empty_queries="error"``
    (or when no query at all has a relevant item).

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> try:
    ...     rc.evaluate(x, query_labels=[0, 1, 2, 3], metrics=["map"], empty_queries="error")
    ... except rc.EmptyQueriesError as err:
    ...     print(err.indices)
    [0 1 2 3]
    """

    def __init__(self, message: str, *, indices):
        super().__init__(message)
        self.indices = indices


class BackendError(RetrievalChecksError):
    """The requested compute device or backend is not available.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> rc.evaluate(x, query_labels=[0, 0, 1, 1], metrics=["map"], device="cuda:one")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    retrieval_checks.errors.BackendError: device='cuda:one' ...
    """


class SuiteError(InputError):
    """A YAML suite is malformed or refers to something that does not exist.

    ``path``, ``line`` (1-based, or None) and ``field`` (dotted, e.g.
    ``checks[2].at_least``) locate the problem; the message says what is expected.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import retrieval_checks as rc
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = pathlib.Path(tmp.name) / "suite.yaml"
    >>> _ = path.write_text("version: 1")
    >>> try:
    ...     rc.load_suite(path)
    ... except rc.SuiteError as err:
    ...     print(err.field, err.line, "|", err.detail)
    version 1 | unknown field 'version'. Expected one of: suite, markers, options, correction, datasets, models, checks.
    >>> tmp.cleanup()
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
    ``--rc-timeout``); ``timeout`` holds the limit in seconds.

    Examples
    --------
    >>> import retrieval_checks as rc
    >>> err = rc.ModelTimeoutError("model 'resnet' did not return within 30 s", timeout=30.0)
    >>> err.timeout, isinstance(err, TimeoutError), isinstance(err, rc.RetrievalChecksError)
    (30.0, True, True)
    """

    def __init__(self, message: str, *, timeout: float):
        super().__init__(message)
        self.timeout = timeout


class IntervalWarning(RuntimeWarning):
    """An interval or gap that says little or points the wrong way: it rests on fewer
    than a handful of independent units (groups, classes), or a generalization gap's
    whole interval lies below zero (train and test look swapped). Gates record it on
    their event as well; ``warnings.simplefilter("error", IntervalWarning)`` makes it
    fail.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(4), 3)  # 4 classes: fewer than MIN_INTERVAL_UNITS (5)
    >>> x = rng.normal(size=(4, 8))[y] + 0.5 * rng.normal(size=(12, 8))
    >>> res = rc.evaluate(x, query_labels=y, metrics=["map"])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     iv = rc.bootstrap_interval(res, "map")
    >>> caught[0].category.__name__, iv.notes[0][:45]
    ('IntervalWarning', 'map: its interval rests on 4 classes, fewer t')
    """


class PowerWarning(RuntimeWarning):
    """A significance-gated check whose test cannot see the drop it is meant to catch:
    its minimum detectable drop (at the stated power, 0.8 by default) exceeds the gate's
    tolerance, so a real drop of that size would most likely pass as "not significant".
    The message says how many queries (or classes) would be needed; ``min_power`` on
    the check makes it a failure, and ``warnings.simplefilter("error", PowerWarning)``
    does too.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(10), 3)
    >>> x = rng.normal(size=(10, 8))[y] + 0.3 * rng.normal(size=(30, 8))
    >>> record = rc.baseline_record(rc.evaluate(x, query_labels=y, metrics=["map"]), "map")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = rc.assert_no_regression(record, record, max_drop=0.001, significant=True)
    >>> caught[0].category.__name__
    'PowerWarning'
    >>> print(caught[0].message)  # doctest: +ELLIPSIS
    retrieval-checks: assert_no_regression: map cannot see the drop it gates: minimum detectable drop ...
    """


class SelfMatchWarning(RuntimeWarning):
    """Queries that are also gallery rows relevant to them, value for value: each
    retrieves itself (first, under cosine or euclidean), which raises its scores whatever
    the model (the same array or file given as queries and gallery, or queries stacked
    into the gallery). ``n_found`` of the ``n_queries`` queries are such rows. A YAML
    suite fails the check, and a gate refuses the result, when every query is one and
    some of its equal rows are not all of the query's relevant items, and there is more
    than one query; equal rows that are all of a query's relevant items (an oracle's
    one-hot class vectors) are ties and are not counted. ``warnings.simplefilter("error",
    SelfMatchWarning)`` makes any of them fail. The fix: leave-one-out (the items once,
    with no gallery), or ids on both sides, which take each query's own item out of its
    ranking. In leave-one-out, items equal to other items relevant to them (the same
    rows stacked twice) are counted the same way; copies of one id leave each other's
    ranking.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(5), 4)
    >>> x = rng.normal(size=(5, 8))[y] + 0.5 * rng.normal(size=(20, 8))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     res = rc.evaluate(x, x, query_labels=y, gallery_labels=y, metrics=["hit_rate@1"])
    >>> w = caught[0].message
    >>> type(w).__name__, w.n_found, w.n_queries, res["hit_rate@1"]
    ('SelfMatchWarning', 20, 20, 1.0)
    >>> res = rc.evaluate(x, query_labels=y, metrics=["hit_rate@1"])  # leave-one-out: no warning
    """

    def __init__(self, message: str, *, n_found: int, n_queries: int):
        super().__init__(message)
        self.n_found = n_found
        self.n_queries = n_queries


#: The packages whose frames a user-facing warning is not attributed to: the library and
#: its pytest plugin (a fixture such as ``rc_evaluate`` is the library, not the test).
_OURS = ("retrieval_checks", "pytest_retrieval_checks")


def _ours(frame) -> bool:
    name = frame.f_globals.get("__name__") or ""
    return any(name == p or name.startswith(p + ".") for p in _OURS)


def warn_outside(message, category: type[Warning] | None = None) -> None:
    """:func:`warnings.warn` attributed to the first frame outside retrieval-checks (the
    library and its pytest plugin): the user's line that called into it, however deep
    the library's own calls ran (the ``rc_evaluate`` fixture's cache, a gate calling
    another), so the warning's file and line, and the filters keyed on the module, are
    the user's. ``message`` a string (with ``category``) or a Warning instance. A stack
    that is the library's all the way up (a thread it started) names the caller."""
    frame, level = sys._getframe(1), 2  # stacklevel 2: the caller of this function
    while frame is not None and _ours(frame):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level if frame is not None else 2)
