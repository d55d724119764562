"""Correlating a generalization measure with the gaps of several models
(rc.correlate_with_gap, rc.selection_accuracy): bad input is refused with the library's
errors naming the argument (values against scipy: tests/classifiers'
test_correlations_against_scipy_and_selection_accuracy). Cost: milliseconds."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc


@pytest.mark.parametrize(
    "measures,gaps,match",
    [
        ({"m": [1, 2, "x", 4]}, [1, 2, 3, 4], "measures\\['m'\\]"),
        ({"m": [1, 2, 3, 4]}, ["a", "b", "c", "d"], "gaps"),
        ({"m": [1, 2, np.nan, 4]}, [1, 2, 3, 4], "NaN"),
        ({"m": [1, 2, 3, 4]}, [1, 2, np.inf, 4], "gaps"),
        ([1, 2, 3], [1, 2, 3], "measures must be"),
        ({}, [1, 2, 3], "measures must be"),
        ({"m": [1, 2, 3]}, [1, 2, 3, 4], "3 values for 4 models"),
        ({"m": [1, 2]}, [1, 2], "at least 3"),
    ],
)
def test_correlate_with_gap_arguments(measures, gaps, match):
    with pytest.raises(rc.InputError, match=match):
        rc.correlate_with_gap(measures, gaps)


@pytest.mark.parametrize(
    "m,g,match",
    [
        (["a", "b"], [1, 2], "measure"),
        ([1, 2], [1, np.nan], "gaps"),
        ([1, 2, 3], [1, 2], "one value per model"),
        ("abc", [1, 2, 3], "measure"),
    ],
)
def test_selection_accuracy_arguments(m, g, match):
    with pytest.raises(rc.InputError, match=match):
        rc.selection_accuracy(m, g)
