"""retrieval-checks: exact retrieval and metric-learning metrics, and quality gates.

The public surface is what ``__all__`` lists here and in the subpackages, one per
layer (imports flow one way, top to bottom):

- ``retrieval_checks.metrics``: names, the capability registry, per-family definitions;
- ``retrieval_checks.data``: embedding files;
- ``retrieval_checks.engine``: ``evaluate``, grouped recall, image-text, results;
- ``retrieval_checks.models``: running models (``embed``), the embedding cache;
- ``retrieval_checks.stats``: intervals, gaps, comparisons (pure functions of results);
- ``retrieval_checks.classifiers`` and ``retrieval_checks.experiments``: classifier
  measures and protocols that evaluate, then compute statistics;
- ``retrieval_checks.gates``: assertions, baselines, drops, the gate-event hook;
- ``retrieval_checks.suites``: YAML suites;
- ``retrieval_checks.tracking``: run history, HTML report, command line;
- ``retrieval_checks.options`` and ``retrieval_checks.errors``: the option table and
  the exception hierarchy every layer shares.

Modules with a leading underscore are private. Metric names follow the contract
(``docs/metrics.md``): each canonical name means one quantity, and results always
report canonical names.
"""

from . import (  # noqa: F401  (the subpackages, reachable as rc.engine, rc.gates, ...)
    classifiers,
    data,
    engine,
    errors,
    experiments,
    gates,
    metrics,
    models,
    options,
    stats,
    suites,
    tracking,
)
from ._version import __version__
from .classifiers import (
    ClassifierResult,
    LocalizationResult,
    NuclearNorm,
    SpectralMeasure,
    boxes_to_masks,
    cam_iou,
    cam_iou_box,
    classification_gap,
    classifier_accuracy,
    effective_invariance,
    evaluate_classifier,
    grad_cam,
    nuclear_norm,
    predict_proba,
    spectral_measure,
)
from .data import EmbeddingSet, load_embeddings
from .engine import (
    IMAGE_TEXT_METRICS,
    EvaluationResult,
    GroupedRecall,
    ImageTextResult,
    ann_recall,
    evaluate,
    evaluate_image_text,
    evaluate_run,
    label_partition,
    with_slices,
)
from .errors import (
    BackendError,
    EmptyQueriesError,
    InputError,
    IntervalWarning,
    MetricNameError,
    ModelTimeoutError,
    PowerWarning,
    RetrievalChecksError,
    SelfMatchWarning,
    SuiteError,
)
from .experiments import class_count_sweep, split_difference
from .gates import (
    BaselineFile,
    Change,
    GateEvent,
    adjust_pvalues,
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
    baseline_record,
    measure_change,
    slice_baseline,
)
from .metrics import (
    METRIC_TEMPLATES,
    AccuracyResult,
    Measurement,
    MetricSpec,
    accuracy,
    canonical_metric_name,
    discriminant_ratio,
    parse_metric,
)
from .models import embed
from .stats import (
    Comparison,
    Gap,
    Interval,
    MeasureCorrelation,
    SweepTable,
    bootstrap_interval,
    compare,
    correlate_with_gap,
    generalization_gap,
    plan_queries,
    selection_accuracy,
    slice_intervals,
)
from .suites import Suite, SuiteRunner, load_suite
from .tracking import History, render_report

__all__ = [
    "evaluate",
    "evaluate_image_text",
    "evaluate_run",
    "with_slices",
    "slice_intervals",
    "ann_recall",
    "load_embeddings",
    "embed",
    "load_suite",
    "Suite",
    "SuiteRunner",
    "EmbeddingSet",
    "ImageTextResult",
    "IMAGE_TEXT_METRICS",
    "EvaluationResult",
    "GroupedRecall",
    "label_partition",
    "accuracy",
    "AccuracyResult",
    "discriminant_ratio",
    "bootstrap_interval",
    "generalization_gap",
    "split_difference",
    "compare",
    "class_count_sweep",
    "Interval",
    "Gap",
    "Comparison",
    "SweepTable",
    "assert_metric",
    "assert_map_at_least",
    "assert_recall_at_least",
    "assert_recall_at_precision",
    "assert_grouped_recall_ci",
    "assert_gap_below",
    "assert_not_worse",
    "assert_rsum",
    "assert_slices",
    "assert_slices_at_least",
    "assert_worst_slice",
    "assert_worst_slice_at_least",
    "assert_no_slice_regression",
    "slice_baseline",
    "assert_no_regression",
    "assert_cam_iou_at_least",
    "evaluate_classifier",
    "ClassifierResult",
    "grad_cam",
    "cam_iou",
    "cam_iou_box",
    "boxes_to_masks",
    "LocalizationResult",
    "effective_invariance",
    "nuclear_norm",
    "NuclearNorm",
    "spectral_measure",
    "SpectralMeasure",
    "predict_proba",
    "classifier_accuracy",
    "classification_gap",
    "correlate_with_gap",
    "selection_accuracy",
    "MeasureCorrelation",
    "baseline_record",
    "BaselineFile",
    "measure_change",
    "Change",
    "History",
    "render_report",
    "canonical_metric_name",
    "parse_metric",
    "MetricSpec",
    "METRIC_TEMPLATES",
    "Measurement",
    "GateEvent",
    "RetrievalChecksError",
    "InputError",
    "MetricNameError",
    "EmptyQueriesError",
    "BackendError",
    "SuiteError",
    "ModelTimeoutError",
    "IntervalWarning",
    "PowerWarning",
    "SelfMatchWarning",
    "plan_queries",
    "adjust_pvalues",
    "__version__",
]
