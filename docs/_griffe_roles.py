"""A griffe extension for the docs site: Sphinx roles in docstrings read as code.

The docstrings cross-reference with Sphinx roles (``:func:`~retrieval_checks.evaluate```),
which markdown would print as they are. This turns each into inline code of the name a
reader sees (the last component after ``~``, else the whole target), before mkdocstrings
renders the docstring. Configured in ``mkdocs.yml`` (mkdocstrings' ``extensions``).
"""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|data|mod|meth|attr|exc|obj|const):`(~?)([^`]+)`")


def plain(text: str) -> str:
    """``text`` with each Sphinx role replaced by inline code of the name it shows."""

    def shown(m: re.Match) -> str:
        target = m.group(2).strip()
        if "<" in target and target.endswith(">"):  # :func:`title <target>`
            return f"`{target.split('<', 1)[0].strip()}`"
        name = target.rsplit(".", 1)[-1] if m.group(1) else target
        return f"`{name}`"

    return _ROLE.sub(shown, text)


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = plain(obj.docstring.value)
