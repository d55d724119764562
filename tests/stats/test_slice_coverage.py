"""Slice intervals cover at their nominal rate (issue 28's proof): simulated evaluations
whose queries are clustered in classes (60 per slice) (a class's queries share its difficulty), sliced
by a class-level attribute; each slice's class-cluster bootstrap interval holds the
slice's true mean in about 95% of runs, while resampling queries one by one (wrong
for clustered queries) covers visibly less.

Cost: about 3 s of CPU (200 simulated results x 2 slices of 60 classes, 600 resamples
each; the query bootstrap on 60 of them).
"""

from __future__ import annotations

import warnings

import numpy as np

import retrieval_checks as rc
from retrieval_checks.engine import EvaluationResult
from retrieval_checks.metrics import parse_metric

N_RUNS = 200
N_QUERY_RUNS = 60  # the (wrong) query bootstrap, for contrast
CLASSES = 120  # 60 per slice
PER_CLASS = 5


def _result(rng) -> tuple[EvaluationResult, np.ndarray]:
    """A result whose per-query map values are Beta draws around a per-class mean; the
    slice of a class is its parity: slice 'even' has mean 0.6, 'odd' mean 0.4."""
    codes = np.repeat(np.arange(CLASSES), PER_CLASS)
    slice_of_class = np.where(np.arange(CLASSES) % 2 == 0, "even", "odd")
    class_mean = np.where(slice_of_class == "even", 0.6, 0.4) + rng.normal(0, 0.15, CLASSES)
    class_mean = np.clip(class_mean, 0.02, 0.98)
    k = 4.0  # within-class spread: Beta(k m, k (1 - m)) has mean m
    values = rng.beta(k * class_mean[codes], k * (1 - class_mean[codes]))
    n = values.size
    r = EvaluationResult(
        specs=[parse_metric("map")],
        values={"map": float(values.mean())},
        per_query={"map": values},
        thresholds={},
        pair_counts={},
        n_relevant=np.full(n, PER_CLASS - 1),
        n_candidates=np.full(n, n - 1),
        first_relevant_rank=np.ones(n),
        skipped_queries=np.zeros(0, np.int64),
        config={"confidence": 0.95, "seed": 0},
        query_label_codes=codes,
        label_values=np.arange(CLASSES),
    )
    return rc.with_slices(r, slice_of_class[codes]), slice_of_class


def _true_mean(slice_mean: float, rng_sd: float = 0.15) -> float:
    """E[clip(m + N(0, sd), 0.02, 0.98)], the slice's population mean (numerically)."""
    z = np.random.default_rng(123).normal(slice_mean, rng_sd, 2_000_000)
    return float(np.clip(z, 0.02, 0.98).mean())


def test_class_cluster_slice_intervals_cover_at_the_nominal_rate():
    truth = {"even": _true_mean(0.6), "odd": _true_mean(0.4)}
    rng = np.random.default_rng(2026)
    hits = {"label": 0, "query": 0}
    total = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for run in range(N_RUNS):
            r, _ = _result(rng)
            for cluster in ("label", "query") if run < N_QUERY_RUNS else ("label",):
                ivs = rc.slice_intervals(r, "map", cluster=cluster, n_resamples=600, seed=run)
                for name, iv in ivs.items():
                    hits[cluster] += iv.low <= truth[name] <= iv.high
            total += len(ivs)
    coverage = {"label": hits["label"] / total, "query": hits["query"] / (2 * N_QUERY_RUNS)}
    # 400 intervals: the binomial sd at 95% is 1.1 points
    assert 0.92 <= coverage["label"] <= 0.98, coverage
    assert coverage["query"] < 0.9, coverage  # resampling clustered queries one by one undercovers
