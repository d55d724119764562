"""retrieval-checks: exact retrieval and metric-learning metrics, and quality gates.

The public surface is what ``__all__`` lists; modules with a leading underscore are
private. Metric names follow the project's contract (METRICS.md): each canonical
name means one quantity, and results always report canonical names.
"""

from ._classification import AccuracyResult, accuracy
from ._embedding import discriminant_ratio
from ._evaluate import evaluate
from ._metric_names import METRIC_TEMPLATES, MetricSpec, canonical_metric_name, parse_metric
from ._result import EvaluationResult
from .errors import (
    BackendError,
    EmptyQueriesError,
    InputError,
    MetricNameError,
    RetrievalChecksError,
)

__version__ = "0.1.0"

__all__ = [
    "evaluate",
    "EvaluationResult",
    "accuracy",
    "AccuracyResult",
    "discriminant_ratio",
    "canonical_metric_name",
    "parse_metric",
    "MetricSpec",
    "METRIC_TEMPLATES",
    "RetrievalChecksError",
    "InputError",
    "MetricNameError",
    "EmptyQueriesError",
    "BackendError",
    "__version__",
]
