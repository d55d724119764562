"""Heavy dependencies imported on first use, so that ``import retrieval_checks`` stays
fast (scipy.stats alone takes about half a second to import)."""

from __future__ import annotations

__all__ = ["stats"]


class _LazyModule:
    """A module imported when one of its attributes is first read."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        import importlib

        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


#: ``scipy.stats``, imported on first use.
stats = _LazyModule("scipy.stats")
