"""Fail-closed battery of the engine's inputs (issue 12): every user mistake is the
library's error naming the argument and the fix; conversions that used to misread
data (big-endian, bfloat16, float32 overflow) give the right numbers or a refusal."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import retrieval_checks as rc

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(12)
X = RNG.normal(size=(24, 8)).astype(np.float32)
Y = np.arange(24) % 4
M = ["map", "hit_rate@1"]


def _eval(x, sim, **kw):
    return rc.evaluate(x, query_labels=Y, metrics=M, similarity=sim, device="cpu", **kw)


# ----------------------------------------------------------------------------- float32 range
@pytest.mark.parametrize("sim", ["dot", "neg_l2"])
@pytest.mark.parametrize(
    "scale,word", [(1e20, "too large"), (1e-30, "too small"), (1e-22, "too small")]
)
@pytest.mark.parametrize("kind", ["np32", "np64", "torch64", "torch32"])
def test_scores_that_overflow_or_underflow_float32_are_refused(sim, scale, word, kind):
    x64 = X.astype(np.float64) * scale
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
            X,
            X.astype(np.float64) * 1e38,
            query_labels=Y,
            gallery_labels=Y,
            metrics=M,
            similarity="dot",
        )


@pytest.mark.parametrize("scale", [1e20, 1e-30, 1e200, 1e-200])
@pytest.mark.parametrize("as_torch", [False, True])
def test_cosine_is_scale_invariant_at_any_finite_scale(scale, as_torch):
    base = _eval(X, "cosine")
    x = X.astype(np.float64) * scale
    got = _eval(torch.from_numpy(x) if as_torch else x, "cosine")
    assert dict(got) == dict(base)


@pytest.mark.parametrize("sim", ["dot", "neg_l2"])
@pytest.mark.parametrize("scale", [1e-3, 1e3, 1e8])
def test_moderate_scales_are_not_refused(sim, scale):
    res = _eval(X * np.float32(scale), sim)
    assert 0 < res["map"] <= 1


def test_image_text_refuses_overflowing_dot_scores():
    img = RNG.normal(size=(5, 4)).astype(np.float32)
    with pytest.raises(rc.InputError, match="images and captions are too large"):
        rc.evaluate_image_text(
            img * np.float32(1e20),
            img * np.float32(1e20),
            np.arange(5),
            similarity="dot",
            n_resamples=0,
        )


# ----------------------------------------------------------------------------- labels
@pytest.mark.parametrize(
    "labels", [[1, "1"] * 12, ["a", 2] * 12, [1.0, "x"] * 12, [b"a", "a"] * 12]
)
def test_mixed_label_types_in_a_list_are_refused(labels):
    with pytest.raises(rc.InputError, match="query_labels mixes label types") as info:
        rc.evaluate(X, query_labels=labels, metrics=M)
    assert "one type" in str(info.value)


def test_mixed_gallery_labels_named():
    with pytest.raises(rc.InputError, match="gallery_labels mixes label types"):
        rc.evaluate(X, X, query_labels=list(Y), gallery_labels=[1, "1"] * 12, metrics=M)


@pytest.mark.parametrize("q,g", [([1] * 24, ["1"] * 24), (["a"] * 24, list(range(24)))])
def test_query_and_gallery_label_types_must_agree(q, g):
    with pytest.raises(rc.InputError, match="convert both to the same type"):
        rc.evaluate(X, X, query_labels=q, gallery_labels=g, metrics=M)


def test_int_and_float_labels_are_one_kind():
    assert (
        rc.evaluate(X, query_labels=[float(v) for v in Y], metrics=M)["map"]
        == _eval(X, "cosine")["map"]
    )


def test_nan_labels_refused():
    with pytest.raises(rc.InputError, match="NaN or Inf labels"):
        rc.evaluate(X, query_labels=np.where(Y == 0, np.nan, Y), metrics=M)


# ----------------------------------------------------------------------------- relevance
R = Y[:, None] == Y[None, :]


def test_zero_one_integer_rows_are_refused_as_ambiguous():
    with pytest.raises(rc.InputError, match="zeros and ones") as info:
        rc.evaluate(X, X, relevance=R.astype(int).tolist(), metrics=M)
    assert "boolean" in str(info.value) and "indices" in str(info.value)


def test_zero_one_rows_as_arrays_and_in_a_dict_refused():
    with pytest.raises(rc.InputError, match="zeros and ones"):
        rc.evaluate(X, X, relevance=list(R.astype(np.int64)), metrics=M)
    with pytest.raises(rc.InputError, match="zeros and ones"):
        rc.evaluate(X, X, relevance={i: list(R[i].astype(int)) for i in range(24)}, metrics=M)


def test_the_unambiguous_forms_of_the_same_relevance_agree():
    ref = rc.evaluate(X, X, relevance=R, metrics=M)
    for rel in (
        R.astype(int),
        [np.flatnonzero(r).tolist() for r in R],
        R.tolist(),
        sp.csr_matrix(R),
        torch.from_numpy(R),
    ):
        assert dict(rc.evaluate(X, X, relevance=rel, metrics=M)) == dict(ref)


@pytest.mark.parametrize("value", [-1.0, np.nan, 0.5, np.inf])
def test_sparse_relevance_values_other_than_0_1_refused(value):
    """Negative, NaN, fractional and infinite values are neither 0/1 nor grades (whole
    numbers >= 0, which are graded relevance)."""
    m = sp.lil_matrix(R.astype(float))
    m[0, 1] = value
    with pytest.raises(rc.InputError, match="neither 0/1 nor grades") as info:
        rc.evaluate(X, X, relevance=m.tocsr(), metrics=M)
    assert "query 0, gallery item 1" in str(info.value)


def test_sparse_explicit_zeros_are_not_relevant():
    m = sp.csr_matrix(R.astype(float))
    ref = rc.evaluate(X, X, relevance=m, metrics=M)
    rows, cols = np.nonzero(~R)
    z = sp.csr_matrix(
        (
            np.concatenate([m.data, np.zeros(rows.size)]),
            (np.concatenate([m.tocoo().row, rows]), np.concatenate([m.tocoo().col, cols])),
        ),
        shape=m.shape,
    )
    assert z.nnz > m.nnz
    assert dict(rc.evaluate(X, X, relevance=z, metrics=M)) == dict(ref)


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
        rc.evaluate(X, X, relevance=rel, metrics=M)
    assert "relevance" in str(info.value)


# ----------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("dtype", [">f4", ">f8", "<f2", ">i4"])
def test_big_endian_and_small_dtypes_are_converted(dtype):
    x = (X * 4).round() if dtype.endswith("i4") else X
    ref = _eval(x.astype(np.float32), "cosine")
    got = _eval(x.astype(dtype), "cosine")
    if dtype == "<f2":
        assert got["map"] == pytest.approx(ref["map"], abs=0.05)
    else:
        assert dict(got) == dict(ref)


def test_big_endian_labels_and_gallery():
    ref = rc.evaluate(X, X, query_labels=Y, gallery_labels=Y, metrics=M, device="cpu")
    got = rc.evaluate(
        X.astype(">f4"),
        X.astype(">f8"),
        query_labels=Y.astype(">i8"),
        gallery_labels=Y.astype(">i2"),
        metrics=M,
        device="numpy",
    )
    assert dict(got) == dict(ref)


@pytest.mark.parametrize("device", ["cpu", "numpy"])
def test_bfloat16_tensors_are_converted(device):
    xb = torch.from_numpy(X).bfloat16()
    ref = _eval(xb.float().numpy(), "cosine")
    assert dict(rc.evaluate(xb, query_labels=Y, metrics=M, device=device)) == dict(ref)
    labels = torch.from_numpy(Y).bfloat16()
    assert rc.evaluate(X, query_labels=labels, metrics=M)["map"] == _eval(X, "cosine")["map"]


def test_bfloat16_image_text():
    img = torch.from_numpy(RNG.normal(size=(6, 4)).astype(np.float32))
    ref = rc.evaluate_image_text(
        img.bfloat16().float(), img.bfloat16().float(), np.arange(6), n_resamples=0
    )
    got = rc.evaluate_image_text(img.bfloat16(), img.bfloat16(), np.arange(6), n_resamples=0)
    assert dict(got) == dict(ref)


# ----------------------------------------------------------------------------- plain mistakes
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
        rc.evaluate(X, query_labels=Y, **kwargs)


def test_shape_mismatches_name_both_sides():
    with pytest.raises(rc.InputError, match="dimension 8 but gallery has dimension 3"):
        rc.evaluate(X, X[:, :3], query_labels=Y, gallery_labels=Y, metrics=M)
    with pytest.raises(rc.InputError, match="query_labels has 3 labels but there are 24 items"):
        rc.evaluate(X, query_labels=Y[:3], metrics=M)


def test_no_shared_labels_is_an_empty_queries_error():
    with pytest.raises(rc.EmptyQueriesError, match="share values"):
        rc.evaluate(X, X, query_labels=Y, gallery_labels=Y + 10, metrics=M)


# ----------------------------------------------------------------------------- image-text arguments
IMG = RNG.normal(size=(6, 4)).astype(np.float32)
CAP = RNG.normal(size=(12, 4)).astype(np.float32)
CI = np.repeat(np.arange(6), 2)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(n_resamples="10"), "n_resamples"),
        (dict(n_resamples=-1), "n_resamples"),
        (dict(confidence=2), "confidence"),
        (dict(confidence=float("nan")), "confidence"),
        (dict(confidence="x"), "confidence"),
        (dict(seed=-1), "seed"),
        (dict(seed="a"), "seed"),
        (dict(protocol=["5k"]), "protocol"),
        (dict(protocol="5K"), "protocol"),
        (dict(images_without_captions=["drop"]), "images_without_captions"),
        (dict(metrics=5), "metrics"),
        (dict(metrics=["map"]), "not an image-text metric"),
        (dict(metrics=["i2t_recall@0"]), "positive integer"),
        (dict(similarity="l2"), "similarity"),
        (dict(progress="no"), "progress"),
    ],
)
def test_image_text_arguments_are_type_checked(kwargs, match):
    with pytest.raises(rc.InputError, match=match):
        rc.evaluate_image_text(IMG, CAP, CI, **kwargs)


@pytest.mark.parametrize(
    "ci,match",
    [
        (np.repeat(np.arange(6), 2) + 1, "point at a missing image"),
        (np.repeat(np.arange(6), 2) - 1, "point at a missing image"),
        (np.repeat(np.arange(6), 2).astype(float), "integer image indices"),
        (np.arange(5), "one image index per caption"),
        ({0: [0, 1]}, "one image index per caption"),
        (np.repeat(np.arange(6), 2) > 2, "integer image indices"),
    ],
)
def test_caption_image_mapping_is_checked(ci, match):
    with pytest.raises(rc.InputError, match=match) as info:
        rc.evaluate_image_text(IMG, CAP, ci, n_resamples=0)
    assert "caption" in str(info.value)


# ----------------------------------------------------------------------------- config carries confidence, seed
def test_evaluate_config_carries_confidence_and_seed():
    res = rc.evaluate(X, query_labels=Y, metrics=M, confidence=0.8, group_seed=7)
    assert res.config["confidence"] == 0.8 and res.config["seed"] == 7


def test_image_text_config_carries_confidence_and_seed():
    res = rc.evaluate_image_text(IMG, CAP, CI, confidence=0.9, seed=3, n_resamples=50)
    assert res.config["confidence"] == 0.9 and res.config["seed"] == 3 and res.confidence == 0.9


# ----------------------------------------------------------------------------- property: only library errors
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st

_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.lists(st.one_of(st.integers(-2, 30), st.text(max_size=2), st.floats()), max_size=6),
    st.sampled_from(
        [
            np.zeros((0, 3)),
            np.full((4, 3), np.nan),
            np.ones((4, 3)),
            np.ones((3, 4, 2)),
            np.ones(4),
            np.array([["a"]]),
            {"a": 1},
            {0: [1]},
            (1, 2),
            np.ones((4, 3), ">f4"),
        ]
    ),
)


def _call(fn):
    try:
        fn()
    except (rc.RetrievalChecksError, AssertionError):
        pass


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
    _call(lambda: rc.evaluate(X, X, relevance=labels, metrics=["map"]))
    _call(lambda: rc.evaluate(X, query_labels=labels, metrics=["map"]))


@settings(max_examples=50, deadline=None)
@given(
    images=_junk,
    caption_image=_junk,
    option=st.sampled_from(
        [
            "protocol",
            "confidence",
            "n_resamples",
            "seed",
            "similarity",
            "metrics",
            "images_without_captions",
        ]
    ),
    value=_junk,
)
def test_image_text_raises_only_library_errors(images, caption_image, option, value):
    _call(lambda: rc.evaluate_image_text(images, CAP, caption_image))
    _call(lambda: rc.evaluate_image_text(IMG, CAP, CI, **{option: value}))
    _call(lambda: rc.evaluate_image_text(IMG, CAP, caption_image, n_resamples=0))


# ----------------------------------------------------------------------------- review of issue 12
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


@pytest.mark.parametrize("device", ["numpy", "torch-cpu"])
def test_image_text_cosine_of_subnormal_rows_equals_the_unscaled_result(device):
    rng = np.random.default_rng(1)
    imgs = rng.normal(size=(20, 8))
    caps = imgs.repeat(5, axis=0) + rng.normal(size=(100, 8)) * 2
    cap_img = np.arange(100) // 5
    kw = dict(metrics=["rsum"], device=device, n_resamples=100)
    want = rc.evaluate_image_text(imgs, caps, cap_img, **kw)["rsum"]
    got = rc.evaluate_image_text(imgs * 1e-310, caps * 1e-310, cap_img, **kw)["rsum"]
    assert got == pytest.approx(want)
    assert got < 600


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


# ----------------------------------------------------------------------------- review: labels, ids, relevance
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
