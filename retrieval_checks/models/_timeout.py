"""A time limit on running a model: a model that never returns must not hang the session.

Python cannot stop a thread from outside, so :func:`call_with_timeout` runs the call
in a daemon thread and stops *waiting* for it after ``timeout`` seconds: the caller
gets :class:`~retrieval_checks.errors.ModelTimeoutError` (the check fails, the session
goes on), and the abandoned call keeps its thread until it returns or the process
exits. Its result, if it ever comes, is dropped.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from ..errors import ModelTimeoutError
from ..options import check_option

__all__ = ["call_with_timeout"]


def call_with_timeout(fn: Callable[[], Any], *, timeout: float | None, what: str) -> Any:
    """``fn()``, or :class:`ModelTimeoutError` naming ``what`` when it takes longer than
    ``timeout`` seconds (None: no limit, called in this thread). Exceptions of ``fn``
    propagate unchanged."""
    check_option("timeout", timeout)
    if timeout is None:
        return fn()
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"retrieval-checks model: {what}", daemon=True)
    thread.start()
    thread.join(float(timeout))
    if thread.is_alive():
        raise ModelTimeoutError(
            f"{what} did not finish within timeout={timeout:g} s; the check fails and the "
            "session goes on (the call is abandoned, not stopped). Raise the model's "
            "'timeout:' (or --rc-timeout) if it is merely slow.",
            timeout=float(timeout),
        )
    if "error" in box:
        raise box["error"]
    return box.get("value")
