"""The digits quality gates written as Python tests (the same model as rc_digits.yaml).

The model under test is the small CNN in ``digits_model.py`` with the weights in
``digits_cnn.pt`` (produced by ``make_assets.py``, read with ``weights_only=True``);
the model in production is a PCA whose embeddings ship as files. Each test is one
quality gate a team keeps in its model repository: a deployment is blocked when any
of them fails.

Run:  python -m pytest example_suites -v
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import retrieval_checks as rc

HERE = Path(__file__).parent
# digits has only 10 classes: groups of S=2 labels give r=5 groups; 5 partitions averaged
GROUPED = dict(group_size=2, group_repeats=5, confidence=0.95)


@pytest.fixture(scope="module")
def model():
    # torch is imported here, when a test runs, not at collection (it takes ~1 s to import)
    torch = pytest.importorskip(
        "torch", reason="the digits model needs PyTorch (pip install torch)"
    )
    import sys

    sys.path.insert(0, str(HERE))
    try:
        from digits_model import build
    finally:
        sys.path.remove(str(HERE))
    net = build()
    net.load_state_dict(torch.load(HERE / "digits_cnn.pt", map_location="cpu", weights_only=True))
    return net


@pytest.fixture(scope="module")
def data():
    def load(name):
        with np.load(HERE / "data" / name) as f:
            return {k: f[k] for k in f.files}

    return {
        "train": load("digits_train.npz"),
        "test": load("digits_test.npz"),
        "views": load("digits_views.npz"),
    }


@pytest.fixture(scope="module")
def emb(model, data):
    """Embeddings of every split, computed once (in batches, eval mode, no autograd)."""
    return {
        "train": rc.embed(model, data["train"]["inputs"]),
        "test": rc.embed(model, data["test"]["inputs"]),
        "images": rc.embed(model, data["views"]["images"]),
        "captions": rc.embed(model, data["views"]["captions"]),
    }


@pytest.fixture(scope="module")
def test_result(emb, data):
    """Held-out queries against the training gallery: one engine pass serves the gates below."""
    return rc.evaluate(
        emb["test"],
        emb["train"],
        query_labels=data["test"]["labels"],
        gallery_labels=data["train"]["labels"],
        metrics=["map", "map@R", "hit_rate@1", "recall_at_precision@0.9", "grouped_recall@1"],
        **GROUPED,
    )


def test_map_gate(test_result):
    rc.assert_map_at_least(test_result, 0.90)
    rc.assert_map_at_least(test_result, 0.85, metric="map@R")


def test_top1_gate(test_result):
    # hit_rate@1 (metric learning's Recall@1); the class-cluster bootstrap interval's lower bound
    rc.assert_recall_at_least(test_result, 0.95, k=1, on="interval")


def test_recall_at_precision_gate(test_result):
    rc.assert_recall_at_precision(test_result, 0.85, precision=0.9)


def test_grouped_recall_interval_gate(test_result):
    # fails when the 95% interval's lower bound is below the gate, not only the value
    rc.assert_grouped_recall_ci(test_result, at_least=0.95)


def test_generalization_gap_gate(emb, data):
    # Welch interval of grouped_recall@1(train) - grouped_recall@1(test), both leave-one-out
    train = rc.evaluate(
        emb["train"], query_labels=data["train"]["labels"], metrics=["grouped_recall@1"], **GROUPED
    )
    test = rc.evaluate(
        emb["test"], query_labels=data["test"]["labels"], metrics=["grouped_recall@1"], **GROUPED
    )
    gap = rc.generalization_gap(train, test, "grouped_recall@1")
    print(f"\n{gap}")
    rc.assert_gap_below(gap, below=0.05)


def test_candidate_is_not_worse_than_production(emb, data):
    labels = data["test"]["labels"]
    production = rc.load_embeddings(
        HERE / "embeddings" / "pca_test.npz"
    )  # precomputed by the deployed model
    metrics = ["map", "hit_rate@1"]
    candidate = rc.evaluate(emb["test"], query_labels=labels, metrics=metrics)
    baseline = rc.evaluate(production.embeddings, query_labels=labels, metrics=metrics)
    # paired over the 10 classes (cluster-robust): queries of one class are not independent
    rc.assert_not_worse(rc.compare(candidate, baseline, "map"), rule="non_inferior", margin=0.01)
    rc.assert_not_worse(
        rc.compare(candidate, baseline, "hit_rate@1")
    )  # fails only on a significant drop


def test_rsum_gate(emb, data):
    # every test image with five noisy shifted views as its "captions"
    result = rc.evaluate_image_text(
        emb["images"], emb["captions"], data["views"]["image"], n_resamples=1000
    )
    print(f"\nrsum {result['rsum']:.1f}, 95% interval {result.intervals['rsum']}")
    rc.assert_rsum(result, at_least=250, on="lower")


def test_no_query_is_silently_dropped(test_result):
    assert test_result.n_skipped == 0


def test_map_has_not_regressed(test_result, rc_baseline):
    # the baseline lives in test_digits_gates.baselines.yaml (pytest --rc-regen-all writes it)
    # 10 classes see a drop of about 0.077 at 80% power (a smaller max_drop warns that the
    # gate cannot see the drop it gates: docs/power.md); 0.08 is a drop this set can detect
    rc_baseline(test_result, "map@R", max_drop=0.08, significant=True)
