"""Quality gates: assertions on results, baselines and drops, and the gate-event hook.

Every gate reports its outcome as a :class:`GateEvent` to the listeners registered
with :func:`subscribe` or :func:`listening` (the pytest plugin is one of them).
"""

from ._assertions import (
    assert_cam_iou_at_least,
    assert_gap_below,
    assert_grouped_recall_ci,
    assert_map_at_least,
    assert_metric,
    assert_not_worse,
    assert_recall_at_least,
    assert_recall_at_precision,
    assert_rsum,
)
from ._baselines import (
    BaselineFile,
    BaselineStore,
    assert_no_regression,
    baseline_path,
    baseline_record,
    records_differ,
    write_records,
)
from ._events import (
    GateEvent,
    Subscription,
    emit,
    listening,
    rule_text,
    slice_verdict,
    subscribe,
    tally,
    verdict,
)
from ._family import (
    CORRECTIONS,
    adjust_pvalues,
    check_correction,
    claim,
    decide_family,
    family_error_rate,
    family_line,
    session_correction,
    set_session_correction,
)
from ._regression import Change, higher_is_better, measure_change
from ._slices import (
    assert_no_slice_regression,
    assert_slices,
    assert_slices_at_least,
    assert_worst_slice,
    assert_worst_slice_at_least,
    check_slice_baselines,
    slice_baseline,
    slice_key,
)
from ._spec import skipped_limit

__all__ = [
    "assert_metric",
    "assert_map_at_least",
    "assert_recall_at_least",
    "assert_recall_at_precision",
    "assert_grouped_recall_ci",
    "assert_gap_below",
    "assert_not_worse",
    "assert_rsum",
    "assert_cam_iou_at_least",
    "assert_no_regression",
    "assert_slices",
    "assert_slices_at_least",
    "assert_worst_slice",
    "assert_worst_slice_at_least",
    "assert_no_slice_regression",
    "slice_baseline",
    "check_slice_baselines",
    "slice_key",
    "baseline_record",
    "BaselineFile",
    "BaselineStore",
    "baseline_path",
    "records_differ",
    "write_records",
    "skipped_limit",
    "Change",
    "measure_change",
    "higher_is_better",
    "GateEvent",
    "Subscription",
    "subscribe",
    "listening",
    "emit",
    "rule_text",
    "verdict",
    "tally",
    "slice_verdict",
    "CORRECTIONS",
    "adjust_pvalues",
    "check_correction",
    "claim",
    "decide_family",
    "family_error_rate",
    "family_line",
    "session_correction",
    "set_session_correction",
]
