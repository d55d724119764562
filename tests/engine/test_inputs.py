"""Bad input to the engine gets a clear error naming the array, the problem and the fix.

The fail-closed battery (issue 12, below the first tests): scores beyond float32's range
refused, labels of mixed or disagreeing types, ambiguous 0/1 relevance rows, big-endian,
small and bfloat16 dtypes converted to the right numbers, bad options named, subnormal and
tiny rows, and a property test that only the library's errors escape ``evaluate``.
Cost: about 11 s at a load average of 14 (measured; the two float32-range sweeps and the
hypothesis property test are most of it)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_setup import engine_junk
from shared_setup import only_library_errors as _call

import retrieval_checks as rc

torch = pytest.importorskip("torch")

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


# --- fail closed (issue 12): scores beyond float32's range. X24 / Y24: 24 items of 4 classes
# (X / Y above: 20 of 5) ---
X24 = np.random.default_rng(12).normal(size=(24, 8)).astype(np.float32)
Y24 = np.arange(24) % 4
_junk = engine_junk()
M = ["map", "hit_rate@1"]


def _eval(x, sim, **kw):
    return rc.evaluate(x, query_labels=Y24, metrics=M, similarity=sim, device="cpu", **kw)


@pytest.mark.parametrize("sim", ["dot", "neg_l2"])
@pytest.mark.parametrize(
    "scale,word", [(1e20, "too large"), (1e-30, "too small"), (1e-22, "too small")]
)
@pytest.mark.parametrize("kind", ["np32", "np64", "torch64", "torch32"])
def test_scores_that_overflow_or_underflow_float32_are_refused(sim, scale, word, kind):
    x64 = X24.astype(np.float64) * scale
    x = {
        "np32": x64.astype(np.float32),
        "np64": x64,
        "torch64": torch.from_numpy(x64),
        "torch32": torch.from_numpy(x64.astype(np.float32)),
    }[kind]
    with pytest.raises(rc.InputError, match=word) as info:
        _eval(x, sim)
    msg = str(info.value)
    assert "queries" in msg and "float32" in msg and "normalise" in msg


@pytest.mark.parametrize("sim", ["dot", "neg_l2"])
def test_beyond_float32_values_refused_for_numpy_and_torch_alike(sim):
    big = np.full((4, 2), 1e39)
    for x in (big, torch.from_numpy(big)):
        with pytest.raises(rc.InputError, match="beyond float32 range"):
            rc.evaluate(x, query_labels=[0, 0, 1, 1], metrics=["map"], similarity=sim)


def test_gallery_side_named_when_only_it_is_out_of_range():
    with pytest.raises(rc.InputError, match="gallery"):
        rc.evaluate(
            X24,
            X24.astype(np.float64) * 1e38,
            query_labels=Y24,
            gallery_labels=Y24,
            metrics=M,
            similarity="dot",
        )


@pytest.mark.parametrize("scale", [1e20, 1e-30, 1e200, 1e-200])
@pytest.mark.parametrize("as_torch", [False, True])
def test_cosine_is_scale_invariant_at_any_finite_scale(scale, as_torch):
    base = _eval(X24, "cosine")
    x = X24.astype(np.float64) * scale
    got = _eval(torch.from_numpy(x) if as_torch else x, "cosine")
    assert dict(got) == dict(base)


@pytest.mark.parametrize("sim", ["dot", "neg_l2"])
@pytest.mark.parametrize("scale", [1e-3, 1e3, 1e8])
def test_moderate_scales_are_not_refused(sim, scale):
    res = _eval(X24 * np.float32(scale), sim)
    assert 0 < res["map"] <= 1


# --- fail closed: labels ---
@pytest.mark.parametrize(
    "labels", [[1, "1"] * 12, ["a", 2] * 12, [1.0, "x"] * 12, [b"a", "a"] * 12]
)
def test_mixed_label_types_in_a_list_are_refused(labels):
    with pytest.raises(rc.InputError, match="query_labels mixes label types") as info:
        rc.evaluate(X24, query_labels=labels, metrics=M)
    assert "one type" in str(info.value)


def test_mixed_gallery_labels_named():
    with pytest.raises(rc.InputError, match="gallery_labels mixes label types"):
        rc.evaluate(X24, X24, query_labels=list(Y24), gallery_labels=[1, "1"] * 12, metrics=M)


@pytest.mark.parametrize("q,g", [([1] * 24, ["1"] * 24), (["a"] * 24, list(range(24)))])
def test_query_and_gallery_label_types_must_agree(q, g):
    with pytest.raises(rc.InputError, match="convert both to the same type"):
        rc.evaluate(X24, X24, query_labels=q, gallery_labels=g, metrics=M)


def test_int_and_float_labels_are_one_kind():
    assert (
        rc.evaluate(X24, query_labels=[float(v) for v in Y24], metrics=M)["map"]
        == _eval(X24, "cosine")["map"]
    )


def test_nan_labels_refused():
    with pytest.raises(rc.InputError, match="NaN or Inf labels"):
        rc.evaluate(X24, query_labels=np.where(Y24 == 0, np.nan, Y24), metrics=M)


# --- fail closed: relevance ---
R = Y24[:, None] == Y24[None, :]


def test_zero_one_integer_rows_are_refused_as_ambiguous():
    with pytest.raises(rc.InputError, match="zeros and ones") as info:
        rc.evaluate(X24, X24, relevance=R.astype(int).tolist(), metrics=M)
    assert "boolean" in str(info.value) and "indices" in str(info.value)


def test_zero_one_rows_as_arrays_and_in_a_dict_refused():
    with pytest.raises(rc.InputError, match="zeros and ones"):
        rc.evaluate(X24, X24, relevance=list(R.astype(np.int64)), metrics=M)
    with pytest.raises(rc.InputError, match="zeros and ones"):
        rc.evaluate(X24, X24, relevance={i: list(R[i].astype(int)) for i in range(24)}, metrics=M)


def test_the_unambiguous_forms_of_the_same_relevance_agree():
    ref = rc.evaluate(X24, X24, relevance=R, metrics=M)
    for rel in (
        R.astype(int),
        [np.flatnonzero(r).tolist() for r in R],
        R.tolist(),
        sp.csr_matrix(R),
        torch.from_numpy(R),
    ):
        assert dict(rc.evaluate(X24, X24, relevance=rel, metrics=M)) == dict(ref)


@pytest.mark.parametrize("value", [-1.0, np.nan, 0.5, np.inf])
def test_sparse_relevance_values_other_than_0_1_refused(value):
    """Negative, NaN, fractional and infinite values are neither 0/1 nor grades (whole
    numbers >= 0, which are graded relevance)."""
    m = sp.lil_matrix(R.astype(float))
    m[0, 1] = value
    with pytest.raises(rc.InputError, match="neither 0/1 nor grades") as info:
        rc.evaluate(X24, X24, relevance=m.tocsr(), metrics=M)
    assert "query 0, gallery item 1" in str(info.value)


def test_sparse_explicit_zeros_are_not_relevant():
    m = sp.csr_matrix(R.astype(float))
    ref = rc.evaluate(X24, X24, relevance=m, metrics=M)
    rows, cols = np.nonzero(~R)
    z = sp.csr_matrix(
        (
            np.concatenate([m.data, np.zeros(rows.size)]),
            (np.concatenate([m.tocoo().row, rows]), np.concatenate([m.tocoo().col, cols])),
        ),
        shape=m.shape,
    )
    assert z.nnz > m.nnz
    assert dict(rc.evaluate(X24, X24, relevance=z, metrics=M)) == dict(ref)


@pytest.mark.parametrize(
    "rel,match",
    [
        (np.zeros((24, 24, 1), bool), "shape"),
        ({True: [0]}, "keys must be query indices"),
        ({99: [0]}, "keys must be query indices"),
        ([[0.5]] * 24, "integer gallery indices"),
        ([[30]] * 24, "outside"),
        ([[0]] * 3, "one entry per query"),
        (sp.csr_matrix((3, 3)), "shape"),
        (5, "must be a scipy sparse matrix"),
    ],
)
def test_bad_relevance_forms_name_the_argument(rel, match):
    with pytest.raises(rc.InputError, match=match) as info:
        rc.evaluate(X24, X24, relevance=rel, metrics=M)
    assert "relevance" in str(info.value)


# --- fail closed: dtypes converted (big-endian, small, bfloat16) ---
@pytest.mark.parametrize("dtype", [">f4", ">f8", "<f2", ">i4"])
def test_big_endian_and_small_dtypes_are_converted(dtype):
    x = (X24 * 4).round() if dtype.endswith("i4") else X24
    ref = _eval(x.astype(np.float32), "cosine")
    got = _eval(x.astype(dtype), "cosine")
    if dtype == "<f2":
        assert got["map"] == pytest.approx(ref["map"], abs=0.05)
    else:
        assert dict(got) == dict(ref)


def test_big_endian_labels_and_gallery():
    ref = rc.evaluate(X24, X24, query_labels=Y24, gallery_labels=Y24, metrics=M, device="cpu")
    got = rc.evaluate(
        X24.astype(">f4"),
        X24.astype(">f8"),
        query_labels=Y24.astype(">i8"),
        gallery_labels=Y24.astype(">i2"),
        metrics=M,
        device="numpy",
    )
    assert dict(got) == dict(ref)


@pytest.mark.parametrize("device", ["cpu", "numpy"])
def test_bfloat16_tensors_are_converted(device):
    xb = torch.from_numpy(X24).bfloat16()
    ref = _eval(xb.float().numpy(), "cosine")
    assert dict(rc.evaluate(xb, query_labels=Y24, metrics=M, device=device)) == dict(ref)
    labels = torch.from_numpy(Y24).bfloat16()
    assert rc.evaluate(X24, query_labels=labels, metrics=M)["map"] == _eval(X24, "cosine")["map"]


# --- fail closed: plain mistakes, options, the config a result carries ---
@pytest.mark.parametrize(
    "x,match",
    [
        (np.full((4, 3), np.nan), "NaN or Inf"),
        (np.array([[1.0, np.inf], [0, 1]]), "NaN or Inf"),
        (torch.full((4, 3), float("nan")), "NaN or Inf"),
        (np.zeros((0, 3)), "empty"),
        (np.zeros((3, 0)), "zero columns"),
        (np.ones(5), "must be 2-D"),
        (np.array([["a", "b"]] * 4), "numeric"),
        (np.zeros((4, 3)), "all-zero"),
        (None, "is None"),
    ],
)
def test_bad_embeddings_name_queries_and_the_fix(x, match):
    with pytest.raises(rc.InputError, match=match) as info:
        rc.evaluate(
            x,
            query_labels=[0, 0, 1, 1][: len(x)] if x is not None and np.ndim(x) == 2 else [0, 1],
            metrics=M,
        )
    assert "queries" in str(info.value)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(metrics=["mAP@R", "no_such_metric"]), "no_such_metric"),
        (dict(metrics=[]), "metrics is empty"),
        (dict(metrics=["map"], similarity="cos"), "similarity"),
        (dict(metrics=["map"], ties="random"), "ties"),
        (dict(metrics=["map"], empty_queries="drop"), "empty_queries"),
        (dict(metrics=["map"], confidence=95), "did you mean 0.95"),
        (dict(metrics=["map"], confidence=float("nan")), "confidence"),
        (dict(metrics=["map"], group_seed=-1), "group_seed"),
        (dict(metrics=["map"], group_seed="a"), "group_seed"),
        (dict(metrics=["map"], progress="yes"), "progress"),
        (dict(metrics=["map"], tile=(0, 16)), "tile"),
        (dict(metrics=["map"], max_memory="lots"), "max_memory"),
        (dict(metrics=["map"], device="gpu"), "device"),
        (dict(metrics=["hit_rate@99"]), "K=99"),
    ],
)
def test_bad_options_name_the_option(kwargs, match):
    with pytest.raises(rc.InputError, match=match):
        rc.evaluate(X24, query_labels=Y24, **kwargs)


def test_shape_mismatches_name_both_sides():
    with pytest.raises(rc.InputError, match="dimension 8 but gallery has dimension 3"):
        rc.evaluate(X24, X24[:, :3], query_labels=Y24, gallery_labels=Y24, metrics=M)
    with pytest.raises(rc.InputError, match="query_labels has 3 labels but there are 24 items"):
        rc.evaluate(X24, query_labels=Y24[:3], metrics=M)


def test_no_shared_labels_is_an_empty_queries_error():
    with pytest.raises(rc.EmptyQueriesError, match="share values"):
        rc.evaluate(X24, X24, query_labels=Y24, gallery_labels=Y24 + 10, metrics=M)


def test_evaluate_config_carries_confidence_and_seed():
    res = rc.evaluate(X24, query_labels=Y24, metrics=M, confidence=0.8, group_seed=7)
    assert res.config["confidence"] == 0.8 and res.config["seed"] == 7


# --- fail closed, property: only library errors escape evaluate ---
@settings(max_examples=50, deadline=None)
@given(
    queries=_junk,
    labels=_junk,
    metrics=_junk,
    option=st.sampled_from(
        [
            "similarity",
            "ties",
            "empty_queries",
            "group_size",
            "group_seed",
            "confidence",
            "tile",
            "device",
            "max_memory",
        ]
    ),
    value=_junk,
)
def test_evaluate_raises_only_library_errors(queries, labels, metrics, option, value):
    _call(lambda: rc.evaluate(queries, query_labels=labels, metrics=metrics))
    _call(
        lambda: rc.evaluate(
            np.ones((4, 3)) + np.arange(4)[:, None],
            query_labels=[0, 0, 1, 1],
            metrics=["map"],
            **{option: value},
        )
    )
    _call(lambda: rc.evaluate(X24, X24, relevance=labels, metrics=["map"]))
    _call(lambda: rc.evaluate(X24, query_labels=labels, metrics=["map"]))


# --- fail closed (review of issue 12): subnormal and tiny rows ---
X60 = np.random.default_rng(0).normal(size=(60, 8)).astype(np.float32)


Y60 = np.arange(60) % 6


@pytest.mark.parametrize("device", ["auto", "numpy", "torch-cpu", "cpu"])
@pytest.mark.parametrize("kind", ["np64", "torch64"])
def test_cosine_of_subnormal_rows_equals_the_unscaled_result_on_every_backend(device, kind):
    want = rc.evaluate(X60, query_labels=Y60, metrics=["map"], device="numpy")["map"]
    x64 = X60.astype(np.float64) * 1e-310
    x = torch.from_numpy(x64) if kind == "torch64" else x64
    got = rc.evaluate(x, query_labels=Y60, metrics=["map"], device=device)["map"]
    assert got == pytest.approx(want, abs=1e-12)
    assert got < 0.9


@pytest.mark.parametrize("sim", ["dot", "neg_l2"])
@pytest.mark.parametrize("kind", ["np64", "torch64"])
def test_many_tiny_rows_beside_one_ordinary_row_are_refused(sim, kind):
    x64 = np.vstack([X60[:-1].astype(np.float64) * 1e-25, X60[-1:]])
    x = torch.from_numpy(x64) if kind == "torch64" else x64
    with pytest.raises(rc.InputError, match="rows too small for float32") as info:
        rc.evaluate(x, query_labels=Y60, metrics=["map"], similarity=sim)
    msg = str(info.value)
    assert "queries" in msg and "normalise" in msg and "rescale" in msg


@pytest.mark.parametrize("sim", ["dot", "neg_l2"])
def test_tiny_query_rows_against_an_ordinary_gallery_with_dot_are_judged_per_row(sim):
    q = np.vstack([X60[:9].astype(np.float64) * 1e-40, X60[9:10]])
    g = np.vstack([X60[:30].astype(np.float64) * 1e-5, X60[30:]])
    if sim == "dot":  # the largest score is ordinary, those of the tiny queries underflow
        with pytest.raises(rc.InputError, match="queries and gallery hold rows too small") as info:
            rc.evaluate(
                q, g, query_labels=Y60[:10], gallery_labels=Y60, metrics=["map"], similarity=sim
            )
        assert "row norms" in str(info.value) and "normalise" in str(info.value)
    else:  # distances to ordinary gallery rows are ordinary
        got = rc.evaluate(
            q, g, query_labels=Y60[:10], gallery_labels=Y60, metrics=["map"], similarity=sim
        )
        assert 0 <= got["map"] <= 1


@pytest.mark.parametrize("sim", ["dot", "neg_l2"])
def test_one_tiny_row_and_zero_rows_are_not_refused(sim):
    base = np.vstack([X60[:-1], X60[-1:] * 1e-6]).astype(np.float64)
    want = rc.evaluate(base, query_labels=Y60, metrics=["map"], similarity=sim)["map"]
    one = np.vstack([X60[:-1], X60[-1:] * 1e-30]).astype(np.float64)
    assert rc.evaluate(one, query_labels=Y60, metrics=["map"], similarity=sim)[
        "map"
    ] == pytest.approx(want)
    zeros = X60.copy()
    zeros[:3] = 0
    assert 0 <= rc.evaluate(zeros, query_labels=Y60, metrics=["map"], similarity=sim)["map"] <= 1
    ints = np.random.default_rng(3).integers(-3, 4, size=(60, 8))
    assert 0 <= rc.evaluate(ints, query_labels=Y60, metrics=["map"], similarity=sim)["map"] <= 1


# --- fail closed (review of issue 12): labels, ids, relevance, a huge K ---
@pytest.mark.parametrize("arg", ["query_labels", "query_ids"])
@pytest.mark.parametrize(
    "values", [[None] * 60, [1, None] * 30, np.array([None] * 60), np.array(["a", None] * 30)]
)
def test_none_labels_and_ids_say_they_may_not_be_none(arg, values):
    kw = {"query_labels": Y60, arg: values}
    with pytest.raises(rc.InputError, match=f"{arg} holds None") as info:
        rc.evaluate(X60, metrics=["map"], **kw)
    msg = str(info.value)
    assert "may not be None" in msg and "placeholder" in msg and "e.g. 1 and '1'" not in msg


@pytest.mark.parametrize(
    "q,g,words",
    [
        ((np.arange(10) % 2).astype(bool), Y60, ("booleans", "integers", "astype(int)")),
        ([True, False] * 5, list(Y60), ("booleans", "integers", "astype(int)")),
        ([b"a"] * 10, ["a"] * 60, ("bytes strings", "strings", "decode")),
        (np.array([b"a"] * 10), np.array(["a"] * 60), ("bytes strings", "strings", "decode")),
        (np.arange(10).astype(str), Y60, ("strings", "integers", "str(label)")),
    ],
)
def test_labels_of_different_kinds_across_sides_are_refused(q, g, words):
    with pytest.raises(rc.InputError, match="query_labels are") as info:
        rc.evaluate(X60[:10], X60, query_labels=q, gallery_labels=g, metrics=["map"])
    assert all(w in str(info.value) for w in words) and "gallery_labels" in str(info.value)


def test_ids_of_different_kinds_across_sides_are_refused():
    with pytest.raises(
        rc.InputError, match="query_ids are bytes strings but gallery_ids are strings"
    ):
        rc.evaluate(
            X60[:10],
            X60,
            query_labels=Y60[:10],
            gallery_labels=Y60,
            query_ids=[b"a"] * 10,
            gallery_ids=["a"] * 60,
            metrics=["map"],
        )


def test_labels_of_one_kind_still_match():
    want = rc.evaluate(X60[:10], X60, query_labels=Y60[:10], gallery_labels=Y60, metrics=["map"])[
        "map"
    ]
    for q, g in [
        (Y60[:10].astype(float), Y60),
        (Y60[:10].astype(str).astype("S"), Y60.astype(str).astype("S")),
        ([str(v) for v in Y60[:10]], [str(v) for v in Y60]),
    ]:
        assert (
            rc.evaluate(X60[:10], X60, query_labels=q, gallery_labels=g, metrics=["map"])["map"]
            == want
        )
    b = (Y60 % 2).astype(bool)
    assert 0 <= rc.evaluate(X60, query_labels=b, metrics=["map"])["map"] <= 1


@pytest.mark.parametrize("rel", ["abc", b"abc", "x" * 500])
def test_a_string_is_not_a_relevance(rel):
    with pytest.raises(rc.InputError, match="not a relevance") as info:
        rc.evaluate(X60, relevance=rel, metrics=["map"])
    msg = str(info.value)
    assert "boolean" in msg and "list of relevant gallery indices" in msg and len(msg) < 400


@pytest.mark.parametrize("first", [[[1]], [[1, 2], [3, 4]], np.array([[1]])])
def test_nested_relevance_rows_are_refused(first):
    with pytest.raises(rc.InputError, match=r"relevance\[0\] is nested") as info:
        rc.evaluate(X60, relevance=[first] + [[2]] * 59, metrics=["map"])
    assert "flat list" in str(info.value)


def test_a_huge_k_is_not_echoed_in_full():
    with pytest.raises(rc.InputError, match="K=a 39-digit number") as info:
        rc.evaluate(X60, query_labels=Y60, metrics=["recall@" + "9" * 39])
    assert len(str(info.value)) < 300 and "use K <= 59" in str(info.value)
    # past 40 characters the name itself is refused, before any number is built (issue 25)
    with pytest.raises(rc.MetricNameError, match="at most 40 are read") as info:
        rc.evaluate(X60, query_labels=Y60, metrics=["recall@" + "9" * 400])
    assert len(str(info.value)) < 300


# The row checks read each row once (a sum of squares) and decide the rows it flags entry by
# entry: rows whose squares overflow or underflow must be judged by their entries.
_EDGE_ROWS = {
    "plain": [0.5, -1.0, 2.0, 0.25],
    "large finite (squares overflow float32)": [3e38, -3e38, 1e30, 1.0],
    "tiny (squares underflow to 0)": [1e-30, 0.0, -1e-40, 0.0],
    "negative zeros": [-0.0, 0.0, -0.0, 0.0],
    "zeros": [0.0, 0.0, 0.0, 0.0],
    "a NaN": [1.0, np.nan, 0.0, 1.0],
    "+inf": [np.inf, 0.0, 0.0, 0.0],
    "inf and -inf (squares sum to inf, entries would sum to NaN)": [np.inf, -np.inf, 1, 1],
}


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_row_checks_judge_overflowing_and_underflowing_rows_by_their_entries(dtype, as_tensor):
    from retrieval_checks.engine._inputs import check_embeddings

    names = list(_EDGE_ROWS)
    X = np.array([_EDGE_ROWS[k] for k in names], dtype=np.float64)
    with np.errstate(over="ignore"):
        X = X.astype(dtype)
    want_bad = ~np.isfinite(X).all(axis=1)
    want_zero = ~X.any(axis=1) & ~want_bad
    for i, name in enumerate(names):
        row = X[i : i + 1]
        arg = torch.from_numpy(row.copy()) if as_tensor else row
        for similarity in ("cosine", "dot"):
            if want_bad[i]:
                with pytest.raises(rc.InputError, match="NaN or Inf"):
                    check_embeddings(arg, "gallery", similarity=similarity)
            elif want_zero[i] and similarity == "cosine":
                with pytest.raises(rc.InputError, match="all-zero row"):
                    check_embeddings(arg, "gallery", similarity=similarity)
            else:
                assert check_embeddings(arg, "gallery", similarity=similarity) is arg, name
    # all rows at once: the counts and the first rows named are those of the entries
    arg = torch.from_numpy(X.copy()) if as_tensor else X
    n_bad = int(want_bad.sum())
    with pytest.raises(rc.InputError, match=rf"has {n_bad} row\(s\) with NaN or Inf"):
        check_embeddings(arg, "queries", similarity="cosine")
    ok = X[~want_bad]
    n_zero = int((~ok.any(axis=1)).sum())
    arg = torch.from_numpy(ok.copy()) if as_tensor else ok
    with pytest.raises(rc.InputError, match=rf"has {n_zero} all-zero row\(s\)"):
        check_embeddings(arg, "queries", similarity="cosine")


def test_row_checks_match_the_entrywise_definition_on_random_rows():
    """Random rows with entries drawn from every edge (NaN, +-inf, huge, tiny, zeros,
    plain) are flagged exactly as ``isfinite(x).all(1)`` and ``~x.any(1)`` flag them."""
    from retrieval_checks.engine._inputs import _flagged_rows

    rng = np.random.default_rng(7)
    pool = np.array([np.nan, np.inf, -np.inf, 3e38, -2e38, 1e-30, -1e-45, 0.0, -0.0, 1.5])
    for _ in range(20):
        X = rng.choice(
            pool, size=(200, 5), p=[0.01, 0.01, 0.01, 0.05, 0.05, 0.1, 0.1, 0.3, 0.2, 0.17]
        )
        X = X.astype(np.float32)
        bad, zero = _flagged_rows(X)
        np.testing.assert_array_equal(bad, ~np.isfinite(X).all(axis=1))
        np.testing.assert_array_equal(zero & ~bad, ~X.any(axis=1) & ~bad)
        strided = X[:, ::2]  # a view that is not contiguous
        bad, zero = _flagged_rows(strided)
        np.testing.assert_array_equal(bad, ~np.isfinite(strided).all(axis=1))


@pytest.mark.parametrize("similarity", ["dot", "cosine", "neg_l2"])
def test_tensors_that_require_grad_are_scored_as_their_values(similarity):
    """A model's output still in its autograd graph (requires_grad=True): the same numbers
    as its detached values (dot raised "Can't call numpy() on Tensor that requires grad")."""
    rng = np.random.default_rng(5)
    q = torch.tensor(rng.normal(size=(12, 6)), dtype=torch.float32, requires_grad=True)
    g = torch.tensor(rng.normal(size=(18, 6)), dtype=torch.float32, requires_grad=True)
    yq, yg = np.repeat(np.arange(6), 2), np.repeat(np.arange(6), 3)
    kw = dict(query_labels=yq, gallery_labels=yg, metrics=["map", "mrr"], similarity=similarity)
    got = rc.evaluate(q, g, **kw)
    want = rc.evaluate(q.detach().numpy(), g.detach().numpy(), **kw)
    assert dict(got) == dict(want)
