"""Set-ups several test files share (importable from every layer's tests, as
``reference.py`` is: tests/conftest.py puts this folder on sys.path). A helper moves
here when a second file needs it, instead of a copy."""

from __future__ import annotations

import warnings

import retrieval_checks as rc


def run_gate(gate, warning: type[Warning] = Warning):
    """Calls ``gate()`` and returns ``(events, messages, error)``: the gate events it
    published (``rc.gates.listening``), the messages of the warnings of class ``warning``
    it raised (every one recorded, none filtered out), and its AssertionError (None if
    it passed)."""
    events = []
    with rc.gates.listening(events.append), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            gate()
            error = None
        except AssertionError as exc:
            error = exc
    return events, [str(w.message) for w in caught if issubclass(w.category, warning)], error
