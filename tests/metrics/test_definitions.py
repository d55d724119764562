"""Definitions of the embedding-space and classification metrics, and the bad input they
refuse (the fail-closed battery at the end: accuracy refusing mixed label types, the
discriminant ratio stable at any scale and refusing an undefined ratio)."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc


def test_discriminant_ratio_and_accuracy():
    emb = np.array([[0.0, 0.0], [0.0, 2.0], [4.0, 0.0], [4.0, 2.0]])
    # class means (0,1) and (4,1); mu (2,1): Tr(S_B) = 2*4 + 2*4 = 16; Tr(S_W) = 4 * 1 = 4
    assert rc.discriminant_ratio(emb, [0, 0, 1, 1]) == pytest.approx(4.0)
    res = rc.evaluate(
        emb.astype(np.float32) + 1, query_labels=[0, 0, 1, 1], metrics=["discriminant_ratio"]
    )
    assert res["discriminant_ratio"] == pytest.approx(4.0)
    acc = rc.accuracy(np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]), np.array([1, 1, 1]))
    assert acc.value == pytest.approx(2 / 3) and acc.n_correct == 2 and float(acc) == acc.value
    assert rc.accuracy(["a", "b"], ["a", "a"]).value == 0.5
    with pytest.raises(rc.InputError, match="cover 2 samples but labels cover 3"):
        rc.accuracy([0, 1], [0, 1, 1])


def test_discriminant_ratio_torch_with_string_labels():
    torch = pytest.importorskip("torch")
    emb = np.array([[0.0, 0.0], [0.0, 2.0], [4.0, 0.0], [4.0, 2.0]])
    assert float(
        rc.discriminant_ratio(torch.from_numpy(emb), ["a", "a", "b", "b"])
    ) == pytest.approx(4.0)


# --- fail closed (issue 12): accuracy refusing mixed label types, discriminant ratio stable
# at any scale and refusing an undefined ratio ---
X = np.random.default_rng(7).normal(size=(40, 8)).astype(np.float32)
Y = np.arange(40) % 5


@pytest.mark.parametrize(
    "pred,labels,match",
    [
        (["1", "2"], [1, 2], "predictions are strings but labels are numbers"),
        ([1, 2], ["1", "2"], "predictions are numbers but labels are strings"),
        ([1, "2"], [1, 2], "predictions mixes label types"),
        ([1, 2], [1, "2"], "labels mixes label types"),
        ([1.0, np.nan], [1, 2], "NaN or Inf"),
        ([1, 2], [1.0, np.nan], "NaN or Inf"),
        ([1, 2, 3], [1, 2], "must match"),
        ([], [], "empty"),
    ],
)
def test_accuracy_refuses_mixed_or_broken_labels(pred, labels, match):
    with pytest.raises(rc.InputError, match=match):
        rc.accuracy(pred, labels)


def test_accuracy_right_values():
    assert rc.accuracy(["a", "b", "c"], np.array(["a", "b", "x"])).value == pytest.approx(2 / 3)
    assert rc.accuracy(np.array([[0.1, 0.9], [0.8, 0.2]]), [1, 1]).value == 0.5


@pytest.mark.parametrize(
    "pred,labels,match,names",
    [
        ([b"a"], ["a"], "bytes strings but labels are strings", "decode"),
        (np.array([0.9, 0.1]), [1, 0], "non-integer numbers", "score matrix"),
        ([1.5, 2.0], [1, 2], "non-integer numbers", "integer class indices"),
        ([1, 2], [1.5, 2.0], "labels holds non-integer", "integer class indices"),
    ],
)
def test_accuracy_refuses_what_it_cannot_compare(pred, labels, match, names):
    with pytest.raises(rc.InputError, match=match) as info:
        rc.accuracy(pred, labels)
    assert names in str(info.value)


def test_accuracy_still_reads_integral_floats_and_bytes_against_bytes():
    assert rc.accuracy([1.0, 2.0], [1, 2]).value == 1.0
    assert rc.accuracy([b"a", b"b"], [b"a", b"a"]).value == 0.5
    assert rc.accuracy(np.array([[0.9, 0.1], [0.2, 0.8]]), [0, 0]).value == 0.5


# ----------------------------------------------------------------------------- discriminant ratio
@pytest.mark.parametrize(
    "scale,dtype",
    [
        (1e200, np.float64),
        (1e-200, np.float64),
        (1e30, np.float32),
        (1e-30, np.float32),
        (1.0, np.float64),
    ],
)
def test_discriminant_ratio_is_scale_invariant(scale, dtype):
    base = rc.discriminant_ratio(X.astype(np.float64), Y)
    got = rc.discriminant_ratio((X.astype(np.float64) * scale).astype(dtype), Y)
    assert np.isfinite(got) and got == pytest.approx(base, rel=1e-6)


@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_discriminant_ratio_torch_is_scale_invariant(scale):
    torch = pytest.importorskip("torch")
    base = rc.discriminant_ratio(X.astype(np.float64), Y)
    got = rc.discriminant_ratio(torch.from_numpy(X) * scale, torch.from_numpy(Y))
    assert float(got) == pytest.approx(base, rel=1e-4)


def test_discriminant_ratio_in_evaluate_at_large_scale():
    res = rc.evaluate(X.astype(np.float64) * 1e200, query_labels=Y, metrics=["discriminant_ratio"])
    assert res["discriminant_ratio"] == pytest.approx(rc.discriminant_ratio(X, Y), rel=1e-6)


@pytest.mark.parametrize(
    "x,y,match",
    [
        (np.full((4, 2), np.nan), [0, 0, 1, 1], "NaN or Inf"),
        (np.ones((4, 2)), [0, 1], "one label per embedding"),
        (np.ones((4, 2)), [0, "0", 1, 1], "mixes label types"),
        (np.ones((4, 2)), [0.0, np.nan, 1, 1], "NaN or Inf"),
        (np.ones(4), [0, 0, 1, 1], "2-D"),
    ],
)
def test_discriminant_ratio_refuses_bad_inputs(x, y, match):
    with pytest.raises(rc.InputError, match=match):
        rc.discriminant_ratio(x, y)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize(
    "x,labels,match,fix",
    [
        (X, np.arange(40), "every class has a single item", "2 or more items"),
        (X, np.zeros(40, int), "single class", "2 classes"),
        (np.ones((40, 8)), Y, "within-class scatter S_W is 0", "check the embeddings"),
        (np.zeros((40, 8)), Y, "within-class scatter S_W is 0", "check the embeddings"),
        (np.repeat(np.eye(5, 8), 8, axis=0), np.repeat(np.arange(5), 8), "identical", "duplicated"),
    ],
)
def test_discriminant_ratio_refuses_an_undefined_ratio(kind, x, labels, match, fix):
    if kind == "torch":
        torch = pytest.importorskip("torch")
        x = torch.as_tensor(np.asarray(x, dtype=np.float32))
    with pytest.raises(rc.InputError, match=match) as info:
        rc.discriminant_ratio(x, labels)
    assert fix in str(info.value)
