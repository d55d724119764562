"""retrieval-checks: exact retrieval and metric-learning metrics, and quality gates.

The public surface is what ``__all__`` lists; modules with a leading underscore are
private. Metric names follow the project's contract (METRICS.md): each canonical
name means one quantity, and results always report canonical names.
"""

from .gates._assertions import (
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
from .gates._baselines import BaselineFile, assert_no_regression, baseline_record
from .metrics._accuracy import AccuracyResult, accuracy
from .metrics._embedding import discriminant_ratio
from .engine._evaluate import evaluate
from .data._files import EmbeddingSet, load_embeddings
from .classifiers._measures import (
    ClassifierResult,
    NuclearNorm,
    SpectralMeasure,
    classification_gap,
    classifier_accuracy,
    effective_invariance,
    evaluate_classifier,
    nuclear_norm,
    predict_proba,
    spectral_measure,
)
from .classifiers._gradcam import grad_cam
from .engine._grouped import GroupedRecall, label_partition
from .tracking._history import History
from .engine._image_text import IMAGE_TEXT_METRICS, ImageTextResult, evaluate_image_text
from .classifiers._localization import LocalizationResult, boxes_to_masks, cam_iou, cam_iou_box
from .metrics._names import METRIC_TEMPLATES, MetricSpec, canonical_metric_name, parse_metric
from .stats._correlation import MeasureCorrelation, correlate_with_gap, selection_accuracy
from .models._embed import embed
from .gates._regression import Change, measure_change
from .tracking._report import render_report
from .engine._result import EvaluationResult
from .stats._stats import (
    Comparison,
    Gap,
    Interval,
    SweepTable,
    bootstrap_interval,
    class_count_sweep,
    compare,
    generalization_gap,
    split_difference,
)
from .suites._schema import Suite, load_suite
from .suites._run import SuiteRunner
from .errors import (
    BackendError,
    EmptyQueriesError,
    InputError,
    MetricNameError,
    RetrievalChecksError,
    SuiteError,
)

__version__ = "0.1.0"

__all__ = [
    "evaluate",
    "evaluate_image_text",
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
    "RetrievalChecksError",
    "InputError",
    "MetricNameError",
    "EmptyQueriesError",
    "BackendError",
    "SuiteError",
    "__version__",
]
