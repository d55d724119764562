"""pytest plugin of retrieval-checks: model quality gates as ordinary pytest tests.

Registered through the ``pytest11`` entry point (``plugin.py`` holds the options,
fixtures and report hooks). The gate assertions are the library's, re-exported here
for hand-written tests; under pytest every gate's outcome is recorded for the
terminal summary, the JUnit XML properties and the JSON report.
"""

from retrieval_checks import (
    assert_cam_iou_at_least,
    assert_gap_below,
    assert_grouped_recall_ci,
    assert_map_at_least,
    assert_metric,
    assert_no_regression,
    assert_no_slice_regression,
    assert_not_worse,
    assert_recall_at_least,
    assert_recall_at_precision,
    assert_rsum,
    assert_slices,
    assert_slices_at_least,
    assert_worst_slice,
    assert_worst_slice_at_least,
)

__all__ = [
    "assert_metric",
    "assert_map_at_least",
    "assert_recall_at_least",
    "assert_recall_at_precision",
    "assert_grouped_recall_ci",
    "assert_gap_below",
    "assert_not_worse",
    "assert_rsum",
    "assert_no_regression",
    "assert_cam_iou_at_least",
    "assert_slices",
    "assert_slices_at_least",
    "assert_worst_slice",
    "assert_worst_slice_at_least",
    "assert_no_slice_regression",
]
