"""Heavy dependencies imported on first use, so that ``import retrieval_checks`` stays
fast (scipy.stats alone takes about half a second to import)."""

from __future__ import annotations

import importlib

import numpy as np

__all__ = ["norm_cdf", "norm_ppf", "norm_sf", "special", "stats", "t_cdf", "t_ppf", "t_sf"]


class LazyModule:
    """A module imported when one of its attributes is first read."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


#: ``scipy.stats``, imported on first use.
stats = LazyModule("scipy.stats")


#: ``scipy.special``, imported on first use: it holds the functions behind the
#: distributions below, and imports in about a third of scipy.stats' time (~0.5 s
#: against ~1.6 s in a fresh process: every pytest session, xdist worker or rank that
#: evaluates a significance-gated check, an interval or a comparison pays it).
special = LazyModule("scipy.special")

# The normal and Student's t functions the library uses, as scipy.stats computes them
# (its norm._cdf is special.ndtr, norm._ppf ndtri, t._cdf stdtr(df, x), t._sf
# stdtr(df, -x), t._ppf stdtrit(df, q)): the same floats, checked equal to
# scipy.stats' on a grid with the edges (tests/test_lazy_distributions.py), without
# scipy.stats' import.


def norm_cdf(x):
    """``scipy.stats.norm.cdf(x)``."""
    return special.ndtr(x)


def norm_sf(x):
    """``scipy.stats.norm.sf(x)``."""
    return special.ndtr(-np.asarray(x, dtype=float))


def norm_ppf(q):
    """``scipy.stats.norm.ppf(q)``."""
    return special.ndtri(q)


def t_cdf(x, df):
    """``scipy.stats.t.cdf(x, df)``."""
    return special.stdtr(df, x)


def t_sf(x, df):
    """``scipy.stats.t.sf(x, df)``."""
    return special.stdtr(df, -np.asarray(x, dtype=float))


def t_ppf(q, df):
    """``scipy.stats.t.ppf(q, df)``; at ``q == 0`` -inf for a valid ``df``, as scipy.stats
    returns (special's stdtrit returns +inf there)."""
    q = np.asarray(q, dtype=float)
    out = special.stdtrit(df, q)
    edge = (q == 0) & (np.asarray(df, dtype=float) > 0)
    return np.where(edge, -np.inf, out)[()] if np.any(edge) else out
