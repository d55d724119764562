"""The exact, memory-bounded scoring engine: ``evaluate`` (a streamed pass over tiles),
grouped recall, image-text retrieval, precomputed rankings (``evaluate_run``), the recall of an approximate index against exact
search (``ann_recall``) and their results."""

from ._ann import ann_recall
from ._backend import check_device
from ._cache import EvaluationCache, content_digest
from ._evaluate import evaluate
from ._grouped import GroupedRecall, label_partition
from ._image_text import IMAGE_TEXT_METRICS, ImageTextResult, evaluate_image_text
from ._result import EvaluationResult, Provenance
from ._runs import evaluate_run
from ._slices import Slice, SliceSet, with_slices

__all__ = [
    "evaluate",
    "evaluate_image_text",
    "evaluate_run",
    "ann_recall",
    "EvaluationResult",
    "Provenance",
    "ImageTextResult",
    "IMAGE_TEXT_METRICS",
    "GroupedRecall",
    "label_partition",
    "Slice",
    "SliceSet",
    "with_slices",
    "check_device",
    "EvaluationCache",
    "content_digest",
]
