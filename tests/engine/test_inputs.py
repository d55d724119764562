"""Bad input to the engine gets a clear error naming the array, the problem and the fix."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc

RNG = np.random.default_rng(0)


X = RNG.normal(size=(20, 4)).astype(np.float32)


Y = np.repeat(np.arange(5), 4)


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
    with pytest.raises(
        rc.InputError, match=r"gallery has 2 row\(s\) with NaN or Inf \(rows 2, 4\)"
    ):
        rc.evaluate(X, G, query_labels=Y, gallery_labels=np.arange(6), metrics=["map"])


def test_zero_vectors_are_fine_without_cosine():
    Q = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], np.float32)
    res = rc.evaluate(Q, query_labels=[0, 0, 1, 1], metrics=["map"], similarity="dot")
    assert 0 <= res["map"] <= 1


def test_shape_and_length_mismatches():
    with pytest.raises(rc.InputError, match="dimension 4 but gallery has dimension 3"):
        rc.evaluate(
            X,
            np.ones((5, 3), np.float32),
            query_labels=Y,
            gallery_labels=np.arange(5),
            metrics=["map"],
        )
    with pytest.raises(rc.InputError, match="query_labels has 19 labels but there are 20 items"):
        rc.evaluate(X, query_labels=Y[:-1], metrics=["map"])
    with pytest.raises(rc.InputError, match="gallery_labels is missing"):
        rc.evaluate(X, X, query_labels=Y, metrics=["map"])


def test_label_types_must_match():
    with pytest.raises(
        rc.InputError, match="query_labels are integers but gallery_labels are strings"
    ):
        rc.evaluate(X, X, query_labels=Y, gallery_labels=Y.astype(str), metrics=["map"])
    res = rc.evaluate(
        X, X, query_labels=Y.astype(str), gallery_labels=[str(v) for v in Y], metrics=["map"]
    )
    assert res.n_used == 20
    with pytest.raises(rc.InputError, match="mixes label types"):
        rc.evaluate(X, query_labels=np.array([1, "a"] * 10, dtype=object), metrics=["map"])


def test_k_larger_than_the_gallery():
    with pytest.raises(
        rc.InputError, match=r"recall@20: K=20 is larger than the gallery a query ranks \(19 items"
    ):
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
        rc.evaluate(
            X, X, query_labels=Y, gallery_labels=Y, query_ids=np.arange(20), metrics=["map"]
        )


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
    res = rc.evaluate(
        X,
        G,
        query_labels=Y,
        gallery_labels=RNG.integers(0, 5, 5000),
        metrics=["map"],
        max_memory="1MiB",
    )
    # one row of scores is 5008 * 4 bytes; 1 MiB holds fewer than 53 of them
    assert 1 <= res.config["block"] <= 52
    full = rc.evaluate(
        X, G, query_labels=Y, gallery_labels=RNG.integers(0, 5, 5000), metrics=["map"]
    )
    assert full.config["block"] == 20


def test_string_ids_and_partial_overlap_self_exclusion():
    Q = RNG.normal(size=(4, 3)).astype(np.float32)
    G = np.concatenate([Q[[2, 0]], RNG.normal(size=(3, 3)).astype(np.float32), Q[[2]]])
    q_ids = np.array(["a", "b", "c", "d"])
    g_ids = np.array(["c", "a", "x", "y", "z", "c"])  # "c" twice: both copies are the query itself
    res = rc.evaluate(
        Q,
        G,
        query_labels=[0, 0, 0, 1],
        gallery_labels=[0, 0, 1, 0, 1, 0],
        query_ids=q_ids,
        gallery_ids=g_ids,
        metrics=["hit_rate@1"],
    )
    assert list(res.n_candidates) == [5, 6, 4, 6]
    assert list(res.n_relevant) == [3, 4, 2, 2]


def test_progress_bar_on_request_and_quiet_by_default(capsys):
    G = RNG.normal(size=(64, 4)).astype(np.float32)
    gl = RNG.integers(0, 5, 64)
    quiet = rc.evaluate(X, G, query_labels=Y, gallery_labels=gl, metrics=["map"], tile=(2, 16))
    assert capsys.readouterr().err == ""
    loud = rc.evaluate(
        X, G, query_labels=Y, gallery_labels=gl, metrics=["map"], tile=(2, 16), progress=True
    )
    assert "retrieval-checks" in capsys.readouterr().err
    assert loud["map"] == quiet["map"]


_Q = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
_G = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)


def test_zero_one_relevance_matrices_are_masks_not_index_lists():
    ref = rc.evaluate(_Q, _G, relevance=np.eye(3, 5, dtype=bool), metrics=["map"])
    for rel in [np.eye(3, 5, dtype=int), np.eye(3, 5), [list(r) for r in np.eye(3, 5, dtype=bool)]]:
        got = rc.evaluate(_Q, _G, relevance=rel, metrics=["map"])
        assert got["map"] == ref["map"] and list(got.n_relevant) == [1, 1, 1]
    torch = pytest.importorskip("torch")
    assert (
        rc.evaluate(_Q, _G, relevance=torch.eye(3, 5, dtype=torch.bool), metrics=["map"])["map"]
        == ref["map"]
    )
    with pytest.raises(rc.InputError, match="neither 0/1 nor whole grades"):
        rc.evaluate(_Q, _G, relevance=0.5 * np.eye(3, 5), metrics=["map"])
    # whole numbers are grades (binary metrics count grade >= relevance_level)
    assert rc.evaluate(_Q, _G, relevance=2 * np.eye(3, 5), metrics=["map"])["map"] == ref["map"]
    with pytest.raises(rc.InputError, match=r"relevance\[0\] holds float64 values"):
        rc.evaluate(_Q, _G, relevance=[[0.7], [2.9], [3]], metrics=["map"])


def test_object_labels_are_not_truncated():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4, 3)).astype(np.float32)
    with pytest.raises(rc.EmptyQueriesError):
        rc.evaluate(
            X,
            X,
            query_labels=np.array([1, 1, 2, 2], dtype=object),
            gallery_labels=[1.5, 1.5, 2.5, 2.5],
            metrics=["map"],
        )


def test_side_mappings_answer_to_aliases():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4)).astype(np.float32)
    y = np.repeat(np.arange(12), 5)
    r = rc.evaluate(
        X,
        query_labels=y,
        metrics=["map@R", "recall_at_precision@1.0", "grouped_recall@1"],
        group_size=3,
    )
    assert r.per_query["MAP@R"] is r.per_query["map@R"]
    assert (
        "recall_at_precision@1" in r.thresholds and r.thresholds["recall_at_precision@1.0"] is None
    )
    assert r.intervals["Grouped_Recall@1"] == r.intervals["grouped_recall@1"]


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(tile=4), "two positive integers"),
        (dict(tile=(0, 4)), "two positive integers"),
        (dict(max_memory=float("nan")), "not a finite number"),
        (dict(metrics={"map", "mrr"}), None),
        (dict(metrics=iter(["map"])), None),
    ],
)
def test_argument_checks(kwargs, fragment):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(10, 3)).astype(np.float32)
    call = dict(query_labels=np.repeat([0, 1], 5), metrics=["map"])
    call.update(kwargs)
    if fragment is None:
        assert "map" in rc.evaluate(X, **call)
    else:
        with pytest.raises(rc.InputError, match=fragment):
            rc.evaluate(X, **call)


# ---------------------------------------------------------------- ragged and mixed relevance lists (issue 25)
@pytest.mark.parametrize(
    "rel, row, says",
    [
        (
            [[0, [1]], [2], [3]],
            0,
            r"is ragged or nested",
        ),  # a list inside an index list: np.size raised ValueError
        ([[0, 1], [[2], [3, 4]], [3]], 1, r"is ragged or nested"),
        ([[0], [[1, 2], [3, 4]], [2]], 1, r"is nested"),  # nested deeper: a list of lists
        ([[0, 1], None, [2]], 1, r"is None"),
        ([[0, 1], {2: 1}, [3]], 1, r"is a dict, but other rows are lists"),
        ([[0, 1], 3, [2]], 1, r"is a single int \(3\), but other rows are lists"),
        (
            [[1, 0, 1, 0, 0], [2], [3]],
            0,
            r"looks like a 0/1 mask row \(5 values",
        ),  # mask row among index lists
        ([[True, False, True, False, False], [2], [3]], 0, r"holds bool values"),
    ],
)
def test_ragged_or_mixed_relevance_rows_name_the_row_and_the_accepted_forms(rel, row, says):
    with pytest.raises(rc.InputError, match=rf"relevance\[{row}\] {says}") as info:
        rc.evaluate(_Q, _G, relevance=rel, metrics=["map"])
    assert "accepted forms" in str(info.value) and "boolean (n_queries x n_gallery)" in str(
        info.value
    )


@pytest.mark.parametrize(
    "rel", [{0: [0, [1]], 1: [2], 2: [3]}, {0: None, 1: [2], 2: [3]}, {0: [0], 1: {2: 1}, 2: [1]}]
)
def test_mixed_rows_in_a_relevance_dict_name_the_key(rel):
    with pytest.raises(rc.InputError, match=r"relevance\[[01]\] .*accepted forms"):
        rc.evaluate(_Q, _G, relevance=rel, metrics=["map"])


def test_consistent_relevance_lists_are_still_read():
    ref = rc.evaluate(_Q, _G, relevance=np.eye(3, 5, dtype=bool), metrics=["map"])
    for rel in ([[0], [1], [2]], [[0], [1, 1], np.array([2])], {0: [0], 1: (1,), 2: np.array([2])}):
        assert rc.evaluate(_Q, _G, relevance=rel, metrics=["map"])["map"] == ref["map"]
    assert list(
        rc.evaluate(_Q, _G, relevance=[[0, 1], [], [2, 3, 4]], metrics=["map"]).n_relevant
    ) == [2, 0, 3]
