"""The metric vocabulary (canonical names, aliases, the capability registry) and the
per-family definitions: ranking metrics from exact ranks, pair metrics, the
discriminant ratio and accuracy. ``docs/metrics.md`` is the contract."""

from ._accuracy import AccuracyResult, accuracy
from ._embedding import discriminant_ratio
from ._measurement import Measurable, Measurement
from ._names import (
    CLASSIFIER_METRICS,
    METRIC_TEMPLATES,
    MetricSpec,
    canonical_metric_name,
    classifier_metric,
    metric_spec,
    parse_metric,
)
from ._registry import FAMILIES, Family
from ._thresholds import check_finite, check_threshold, probable_meaning

__all__ = [
    "MetricSpec",
    "parse_metric",
    "canonical_metric_name",
    "metric_spec",
    "classifier_metric",
    "METRIC_TEMPLATES",
    "CLASSIFIER_METRICS",
    "Family",
    "FAMILIES",
    "Measurement",
    "Measurable",
    "accuracy",
    "AccuracyResult",
    "discriminant_ratio",
    "check_threshold",
    "check_finite",
    "probable_meaning",
]
