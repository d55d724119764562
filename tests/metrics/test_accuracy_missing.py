"""accuracy() on object arrays with None (or NaN) in them: a clear InputError naming the
array and the position, never a numpy TypeError or a sample silently counted wrong
(issue 25)."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc


@pytest.mark.parametrize(
    "predictions, labels, match",
    [
        (
            np.array([1, None, 2], object),
            [1, 2, 2],
            r"^predictions holds None at position 1: .*prediction",
        ),
        ([1, None, 2], [1, 2, 2], r"^predictions holds None at position 1"),
        ([1, 2, 2], [None, 2, 2], r"^labels holds None at position 0: .*label"),
        (["a", None], ["a", "b"], r"^predictions holds None at position 1"),
        ([None, None, 1], [1, 1, 1], r"position 0; 2 in all: position 0; position 1"),
        # a score matrix of objects: argmax raised TypeError ('>' between float and NoneType)
        (
            np.array([[0.1, 0.9], [None, 0.2]], object),
            [1, 0],
            r"^predictions holds None at row 1, column 0: .*score",
        ),
        ([[0.1, 0.9], [0.3, None]], [1, 0], r"row 1, column 1"),
        (np.array([[0.1, 0.9], ["x", 0.2]], object), [1, 0], r"holds 'x' at row 1, column 0"),
        # a NaN among Python objects: compared unequal to everything, a sample silently counted wrong
        (np.array([1, float("nan")], object), [1, 1], r"^predictions holds nan at position 1"),
        ([1, 1], np.array([1, float("nan")], object), r"^labels holds nan at position 1"),
    ],
)
def test_missing_values_are_named_with_their_position(predictions, labels, match):
    with pytest.raises(rc.InputError, match=match):
        rc.accuracy(predictions, labels)


def test_object_arrays_without_missing_values_still_work():
    assert rc.accuracy(np.array([1, 2, 3], object), [1, 2, 0]).value == pytest.approx(2 / 3)
    assert rc.accuracy(np.array([[0.1, 0.9], [0.8, 0.2]], object), [1, 1]).value == 0.5
    assert rc.accuracy(np.array(["a", "b"], object), ["a", "a"]).value == 0.5


def test_pandas_missing_values():
    pd = pytest.importorskip("pandas")
    with pytest.raises(rc.InputError, match=r"^labels holds <NA> at position 2"):
        rc.accuracy([1, 2, 3], pd.array([1, 2, None], dtype="Int64").astype(object))
    with pytest.raises(rc.InputError, match=r"^predictions holds (None|nan) at position 1"):
        rc.accuracy(pd.Series(["a", None]), ["a", "b"])
