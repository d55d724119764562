"""Regression tests for defects found in review (each would have passed silently before)."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc

RNG = np.random.default_rng(0)
Q = RNG.normal(size=(3, 4)).astype(np.float32)
G = RNG.normal(size=(5, 4)).astype(np.float32)


def test_zero_one_relevance_matrices_are_masks_not_index_lists():
    ref = rc.evaluate(Q, G, relevance=np.eye(3, 5, dtype=bool), metrics=["map"])
    for rel in [np.eye(3, 5, dtype=int), np.eye(3, 5), [list(r) for r in np.eye(3, 5, dtype=bool)]]:
        got = rc.evaluate(Q, G, relevance=rel, metrics=["map"])
        assert got["map"] == ref["map"] and list(got.n_relevant) == [1, 1, 1]
    torch = pytest.importorskip("torch")
    assert rc.evaluate(Q, G, relevance=torch.eye(3, 5, dtype=torch.bool), metrics=["map"])["map"] == ref["map"]
    with pytest.raises(rc.InputError, match="values other than 0 and 1"):
        rc.evaluate(Q, G, relevance=2 * np.eye(3, 5), metrics=["map"])
    with pytest.raises(rc.InputError, match=r"relevance\[0\] holds float64 values"):
        rc.evaluate(Q, G, relevance=[[0.7], [2.9], [3]], metrics=["map"])


def test_value_gates_do_not_need_an_interval():
    X = RNG.normal(size=(6, 3)).astype(np.float32)
    r = rc.evaluate(X, query_labels=[0] * 6, metrics=["map"])  # one class: no class bootstrap exists
    rc.assert_metric(r, "map", at_least=0.0)
    r1 = rc.evaluate([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], query_labels=[0], gallery_labels=[0, 1],
                     metrics=["hit_rate@1"])
    rc.assert_recall_at_least(r1, 0.5)


def test_neg_l2_does_not_depend_on_where_the_data_sit():
    y = np.repeat(np.arange(40), 5)
    X = RNG.normal(size=(40, 16))[y] + RNG.normal(size=(200, 16))
    base = rc.evaluate(X.astype(np.float32), query_labels=y, metrics=["map", "hit_rate@1"], similarity="neg_l2")
    for off in (100.0, 1000.0):
        moved = rc.evaluate((X + off).astype(np.float32), query_labels=y, metrics=["map", "hit_rate@1"],
                            similarity="neg_l2")
        assert moved["map"] == pytest.approx(base["map"], abs=1e-9)


def test_parallel_float64_rows_tie_under_cosine():
    v = RNG.normal(size=(1, 8))
    X = RNG.uniform(0.5, 10, (200, 1)) * v  # one direction, many lengths: a constant scorer
    y = np.repeat(np.arange(40), 5)
    same = rc.evaluate(np.repeat(v, 200, 0), query_labels=y, metrics=["map"])["map"]
    assert rc.evaluate(X, query_labels=y, metrics=["map"])["map"] == same


def test_object_labels_are_not_truncated():
    X = RNG.normal(size=(4, 3)).astype(np.float32)
    with pytest.raises(rc.EmptyQueriesError):
        rc.evaluate(X, X, query_labels=np.array([1, 1, 2, 2], dtype=object), gallery_labels=[1.5, 1.5, 2.5, 2.5],
                    metrics=["map"])


def test_bootstrap_refuses_grouped_recall_and_compare_medr_honours_cluster():
    y = np.repeat(np.arange(30), 10)
    X = (RNG.normal(size=(30, 8))[y] + 1.5 * RNG.normal(size=(300, 8))).astype(np.float32)
    r = rc.evaluate(X, query_labels=y, metrics=["grouped_recall@1", "medr"], group_size=5)
    with pytest.raises(rc.InputError, match="its own interval over groups"):
        rc.bootstrap_interval(r, "grouped_recall@1")
    by_class = rc.compare(r, r, "medr", n_resamples=200)
    by_query = rc.compare(r, r, "medr", cluster="query", n_resamples=200)
    assert (by_class.n, by_class.unit) == (30, "classes") and (by_query.n, by_query.unit) == (300, "queries")


def test_side_mappings_answer_to_aliases():
    X = RNG.normal(size=(60, 4)).astype(np.float32)
    y = np.repeat(np.arange(12), 5)
    r = rc.evaluate(X, query_labels=y, metrics=["map@R", "recall_at_precision@1.0", "grouped_recall@1"], group_size=3)
    assert r.per_query["MAP@R"] is r.per_query["map@R"]
    assert "recall_at_precision@1" in r.thresholds and r.thresholds["recall_at_precision@1.0"] is None
    assert r.intervals["Grouped_Recall@1"] == r.intervals["grouped_recall@1"]


@pytest.mark.parametrize(
    "kwargs, fragment",
    [(dict(tile=4), "two positive integers"), (dict(tile=(0, 4)), "two positive integers"),
     (dict(max_memory=float("nan")), "not a finite number"), (dict(metrics={"map", "mrr"}), None),
     (dict(metrics=iter(["map"])), None)],
)
def test_argument_checks(kwargs, fragment):
    X = RNG.normal(size=(10, 3)).astype(np.float32)
    call = dict(query_labels=np.repeat([0, 1], 5), metrics=["map"])
    call.update(kwargs)
    if fragment is None:
        assert "map" in rc.evaluate(X, **call)
    else:
        with pytest.raises(rc.InputError, match=fragment):
            rc.evaluate(X, **call)


def test_names_and_ranges():
    with pytest.raises(rc.MetricNameError) as info:
        rc.parse_metric("hit_rate@0")
    assert info.value.suggestion != "hit_rate@0"
    big = np.full((4, 2), 1e39)
    with pytest.raises(rc.InputError, match="beyond float32 range"):
        rc.evaluate(big, query_labels=[0, 0, 1, 1], metrics=["map"], similarity="dot")
    X = RNG.normal(size=(6, 3)).astype(np.float32)
    with pytest.raises(rc.InputError, match="at least 4 labels"):
        rc.evaluate(X, query_labels=[0, 0, 0, 1, 1, 1], metrics=["grouped_recall@1"], group_size=3)


def test_discriminant_ratio_torch_with_string_labels():
    torch = pytest.importorskip("torch")
    emb = np.array([[0.0, 0.0], [0.0, 2.0], [4.0, 0.0], [4.0, 2.0]])
    assert float(rc.discriminant_ratio(torch.from_numpy(emb), ["a", "a", "b", "b"])) == pytest.approx(4.0)


def test_bfloat16_torch_files(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "bf16.pt"
    torch.save({"embeddings": torch.ones(3, 2, dtype=torch.bfloat16), "labels": torch.tensor([0, 1, 1])}, path)
    s = rc.load_embeddings(path)
    assert s.embeddings.dtype == np.float32 and s.embeddings.shape == (3, 2)
