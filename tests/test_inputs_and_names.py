"""Bad input gets a clear error naming the array, the problem and the fix; metric names
are canonical."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc

RNG = np.random.default_rng(0)
X = RNG.normal(size=(20, 4)).astype(np.float32)
Y = np.repeat(np.arange(5), 4)


@pytest.mark.parametrize(
    "alias, canonical",
    [
        ("cmc@5", "hit_rate@5"),
        ("mAP", "map"),
        ("AP", "map"),
        ("MAP@R", "map@R"),
        ("map@r", "map@R"),
        ("mAP@10", "map@10"),
        ("R-precision", "r_precision"),
        ("recall_at_precision@0.90", "recall_at_precision@0.9"),
        ("pair_f1@t=0.50", "pair_f1@t=0.5"),
        ("pair_precision@ t=-1", "pair_precision@t=-1"),
        ("hit_rate@05", "hit_rate@5"),
    ],
)
def test_aliases_resolve_to_canonical_names(alias, canonical):
    assert rc.canonical_metric_name(alias) == canonical


@pytest.mark.parametrize(
    "name, suggestion",
    [("hitrate@1", "hit_rate@1"), ("recal@5", "recall@5"), ("mrrr", "mrr"), ("r_precison", "r_precision"),
     ("recall_at_precison@0.9", "recall_at_precision@0.9")],
)
def test_unknown_metric_suggests_the_closest(name, suggestion):
    with pytest.raises(rc.MetricNameError) as info:
        rc.evaluate(X, query_labels=Y, metrics=[name])
    assert info.value.suggestion == suggestion
    assert f"Did you mean '{suggestion}'" in str(info.value)


@pytest.mark.parametrize(
    "name, fragment",
    [("recall@0", "positive integer"), ("recall@x", "positive integer"), ("recall", "needs a parameter"),
     ("recall_at_precision@1.5", "(0, 1]"), ("pair_f1@0.5", "'@t=T'"), ("mrr@3", "takes no parameter"),
     ("pair_f1@t=abc", "not a number")],
)
def test_malformed_metric_names(name, fragment):
    with pytest.raises(rc.MetricNameError, match=None) as info:
        rc.parse_metric(name)
    assert fragment in str(info.value)


def test_accuracy_in_evaluate_points_to_the_right_function():
    with pytest.raises(rc.MetricNameError, match="retrieval_checks.accuracy"):
        rc.evaluate(X, query_labels=Y, metrics=["accuracy"])


def test_result_lookup_by_alias_and_order():
    res = rc.evaluate(X, query_labels=Y, metrics=["cmc@1", "mAP", "map"])
    assert list(res) == ["hit_rate@1", "map"]
    assert res["cmc@1"] == res["hit_rate@1"]
    assert "MAP" in res and "recall@3" not in res
    with pytest.raises(KeyError, match="was not computed"):
        res["recall@3"]


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(queries=np.full((3, 2), np.nan, np.float32)), "NaN or Inf"),
        (dict(queries=np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]], np.float32)), "all-zero row"),
        (dict(queries=np.zeros((0, 4), np.float32)), "is empty"),
        (dict(queries=np.ones(4, np.float32)), "must be 2-D"),
        (dict(queries=np.array([["a", "b"]])), "numeric"),
    ],
)
def test_bad_embeddings(kwargs, fragment):
    q = kwargs["queries"]
    labels = np.arange(q.shape[0]) if q.ndim >= 1 else None
    with pytest.raises(rc.InputError) as info:
        rc.evaluate(q, query_labels=labels, metrics=["map"])
    assert fragment in str(info.value)
    assert "queries" in str(info.value)


def test_inf_in_gallery_names_the_rows():
    G = RNG.normal(size=(6, 4)).astype(np.float32)
    G[[2, 4], 1] = np.inf
    with pytest.raises(rc.InputError, match=r"gallery has 2 row\(s\) with NaN or Inf \(rows 2, 4\)"):
        rc.evaluate(X, G, query_labels=Y, gallery_labels=np.arange(6), metrics=["map"])


def test_zero_vectors_are_fine_without_cosine():
    Q = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], np.float32)
    res = rc.evaluate(Q, query_labels=[0, 0, 1, 1], metrics=["map"], similarity="dot")
    assert 0 <= res["map"] <= 1


def test_shape_and_length_mismatches():
    with pytest.raises(rc.InputError, match="dimension 4 but gallery has dimension 3"):
        rc.evaluate(X, np.ones((5, 3), np.float32), query_labels=Y, gallery_labels=np.arange(5), metrics=["map"])
    with pytest.raises(rc.InputError, match="query_labels has 19 labels but there are 20 items"):
        rc.evaluate(X, query_labels=Y[:-1], metrics=["map"])
    with pytest.raises(rc.InputError, match="gallery_labels is missing"):
        rc.evaluate(X, X, query_labels=Y, metrics=["map"])


def test_label_types_must_match():
    with pytest.raises(rc.InputError, match="query_labels are integers but gallery_labels are strings"):
        rc.evaluate(X, X, query_labels=Y, gallery_labels=Y.astype(str), metrics=["map"])
    res = rc.evaluate(X, X, query_labels=Y.astype(str), gallery_labels=[str(v) for v in Y], metrics=["map"])
    assert res.n_used == 20
    with pytest.raises(rc.InputError, match="mixes label types"):
        rc.evaluate(X, query_labels=np.array([1, "a"] * 10, dtype=object), metrics=["map"])


def test_k_larger_than_the_gallery():
    with pytest.raises(rc.InputError, match=r"recall@20: K=20 is larger than the gallery a query ranks \(19 items"):
        rc.evaluate(X, query_labels=Y, metrics=["recall@20"])


def test_options_are_checked():
    with pytest.raises(rc.InputError, match="similarity='euclid'"):
        rc.evaluate(X, query_labels=Y, metrics=["map"], similarity="euclid")
    with pytest.raises(rc.InputError, match="ties="):
        rc.evaluate(X, query_labels=Y, metrics=["map"], ties="random")
    with pytest.raises(rc.InputError, match="max_memory='lots'"):
        rc.evaluate(X, query_labels=Y, metrics=["map"], max_memory="lots")
    with pytest.raises(rc.InputError, match="device='tpu'"):
        rc.evaluate(X, query_labels=Y, metrics=["map"], device="tpu")
    with pytest.raises(rc.MetricNameError, match="metrics is empty"):
        rc.evaluate(X, query_labels=Y, metrics=[])


def test_cuda_request_without_cuda_is_a_clear_error():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(rc.BackendError, match="no CUDA device"):
        rc.evaluate(X, query_labels=Y, metrics=["map"], device="cuda")


def test_ids_on_one_side_only():
    with pytest.raises(rc.InputError, match="gallery_ids is missing"):
        rc.evaluate(X, X, query_labels=Y, gallery_labels=Y, query_ids=np.arange(20), metrics=["map"])


def test_relevance_errors():
    with pytest.raises(rc.InputError, match=r"relevance\[1\] points at gallery index 50"):
        rc.evaluate(X, X, relevance=[[0], [50]] + [[1]] * 18, metrics=["map"])
    with pytest.raises(rc.InputError, match="either labels or relevance"):
        rc.evaluate(X, X, query_labels=Y, gallery_labels=Y, relevance=[[0]] * 20, metrics=["map"])
    with pytest.raises(rc.InputError, match="20 queries"):
        rc.evaluate(X, X, relevance=[[0]] * 3, metrics=["map"])


def test_no_relevant_anywhere_is_an_error_not_a_zero():
    with pytest.raises(rc.EmptyQueriesError, match="None of the 20 queries"):
        rc.evaluate(X, query_labels=np.arange(20), metrics=["map"])


def test_all_errors_share_one_base():
    for cls in (rc.InputError, rc.MetricNameError, rc.EmptyQueriesError, rc.BackendError):
        assert issubclass(cls, rc.RetrievalChecksError)
    assert issubclass(rc.InputError, ValueError)


def test_memory_budget_sets_the_block_height():
    G = RNG.normal(size=(5000, 4)).astype(np.float32)
    res = rc.evaluate(X, G, query_labels=Y, gallery_labels=RNG.integers(0, 5, 5000), metrics=["map"],
                      max_memory="1MiB")
    # one row of scores is 5008 * 4 bytes; 1 MiB holds fewer than 53 of them
    assert 1 <= res.config["block"] <= 52
    full = rc.evaluate(X, G, query_labels=Y, gallery_labels=RNG.integers(0, 5, 5000), metrics=["map"])
    assert full.config["block"] == 20


def test_string_ids_and_partial_overlap_self_exclusion():
    Q = RNG.normal(size=(4, 3)).astype(np.float32)
    G = np.concatenate([Q[[2, 0]], RNG.normal(size=(3, 3)).astype(np.float32), Q[[2]]])
    q_ids = np.array(["a", "b", "c", "d"])
    g_ids = np.array(["c", "a", "x", "y", "z", "c"])  # "c" twice: both copies are the query itself
    res = rc.evaluate(Q, G, query_labels=[0, 0, 0, 1], gallery_labels=[0, 0, 1, 0, 1, 0],
                      query_ids=q_ids, gallery_ids=g_ids, metrics=["hit_rate@1"])
    assert list(res.n_candidates) == [5, 6, 4, 6]
    assert list(res.n_relevant) == [3, 4, 2, 2]


def test_discriminant_ratio_and_accuracy():
    emb = np.array([[0.0, 0.0], [0.0, 2.0], [4.0, 0.0], [4.0, 2.0]])
    # class means (0,1) and (4,1); mu (2,1): Tr(S_B) = 2*4 + 2*4 = 16; Tr(S_W) = 4 * 1 = 4
    assert rc.discriminant_ratio(emb, [0, 0, 1, 1]) == pytest.approx(4.0)
    res = rc.evaluate(emb.astype(np.float32) + 1, query_labels=[0, 0, 1, 1], metrics=["discriminant_ratio"])
    assert res["discriminant_ratio"] == pytest.approx(4.0)
    acc = rc.accuracy(np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]), np.array([1, 1, 1]))
    assert acc.value == pytest.approx(2 / 3) and acc.n_correct == 2 and float(acc) == acc.value
    assert rc.accuracy(["a", "b"], ["a", "a"]).value == 0.5
    with pytest.raises(rc.InputError, match="cover 2 samples but labels cover 3"):
        rc.accuracy([0, 1], [0, 1, 1])


def test_progress_bar_on_request_and_quiet_by_default(capsys):
    G = RNG.normal(size=(64, 4)).astype(np.float32)
    gl = RNG.integers(0, 5, 64)
    quiet = rc.evaluate(X, G, query_labels=Y, gallery_labels=gl, metrics=["map"], tile=(2, 16))
    assert capsys.readouterr().err == ""
    loud = rc.evaluate(X, G, query_labels=Y, gallery_labels=gl, metrics=["map"], tile=(2, 16), progress=True)
    assert "retrieval-checks" in capsys.readouterr().err
    assert loud["map"] == quiet["map"]
