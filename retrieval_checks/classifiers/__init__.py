"""Classifier generalization measures: Grad-CAM (and ++), CAM IoU, effective
invariance, the nuclear norm, the spectral measure, accuracy gaps, and
``evaluate_classifier`` for all of them in one call."""

from ._gradcam import find_layer, grad_cam
from ._localization import LocalizationResult, boxes_to_masks, cam_iou, cam_iou_box
from ._measures import (
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

__all__ = [
    "grad_cam",
    "find_layer",
    "cam_iou",
    "cam_iou_box",
    "boxes_to_masks",
    "LocalizationResult",
    "evaluate_classifier",
    "ClassifierResult",
    "effective_invariance",
    "nuclear_norm",
    "NuclearNorm",
    "spectral_measure",
    "SpectralMeasure",
    "predict_proba",
    "classifier_accuracy",
    "classification_gap",
]
