"""What an evaluation loads in a fresh process that needs little: grouped recall's Student
t interval takes its quantile from ``scipy.special`` (what ``scipy.stats.t.ppf``
computes, the same float), never importing ``scipy.stats`` (~1.1 CPU-s: its
distributions' docstrings are built at import), which a rank, an xdist worker or a CLI
run paid for this one quantile. In-process (the modules are loaded already: the
evaluation's requests for ``scipy.stats`` are recorded instead). Cost: well under a
second."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest
from scipy import special, stats

import retrieval_checks as rc


def test_grouped_recall_asks_for_no_scipy_stats(monkeypatch):
    real, asked = importlib.import_module, []

    def spy(name, *args, **kwargs):
        asked.append(name)
        return real(name, *args, **kwargs)

    x = np.random.default_rng(0).normal(size=(40, 4)).astype(np.float32)
    y = np.repeat(np.arange(8), 5)
    monkeypatch.setattr(importlib, "import_module", spy)  # what retrieval_checks._lazy calls
    res = rc.evaluate(
        x, query_labels=y, metrics=["grouped_recall@1", "map"], group_size=2, device="numpy"
    )
    assert "scipy.stats" not in asked, asked
    g = res.grouped["grouped_recall@1"]
    r = g.n_groups
    half = float(stats.t.ppf((1 + g.confidence) / 2, r - 1)) * g.std_error
    assert (g.low, g.high) == (g.value - half, g.value + half)  # scipy.stats' quantile, bit for bit
    rc.bootstrap_interval(res, "map", n_resamples=200, method="bca")  # the normal quantile
    assert "scipy.stats" not in asked, asked  # special's ndtri (tests/test_lazy_distributions.py)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 5 models are few: not the point here
        rc.correlate_with_gap({"m": [0.1, 0.4, 0.2, 0.8, 0.5]}, [0.3, 0.1, 0.2, 0.0, 0.4])
    assert "scipy.stats" in asked  # the spy sees the lazy module's import where one is needed


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.99, 0.999])
def test_stdtrit_is_scipy_stats_t_quantile_bit_for_bit(confidence):
    q = (1 + confidence) / 2
    for df in [*range(1, 200), 1_000, 100_000]:
        assert special.stdtrit(df, q) == stats.t.ppf(q, df), (df, q)
