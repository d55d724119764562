"""Label-free and weight-based generalization measures of torch classifiers, and the
classification accuracy gap.

- ``effective_invariance`` (Deng et al., 2022): for each image x and transform t, with
  p_hat(x) the top softmax probability and c(x) the predicted class,
  EI = sqrt(p_hat(x) * p_hat(t(x))) when c(x) = c(t(x)), else 0; averaged over images
  and transforms (default: rotations by 90, 180 and 270 degrees).
- ``nuclear_norm`` (Deng et al., 2023): the nuclear norm (sum of singular values) of
  the N x K softmax prediction matrix P, normalised by sqrt(min(N, K) * N), in [0, 1];
  the raw nuclear norm is reported too.
- ``spectral_measure`` (Jiang et al., 2020, "Fantastic generalization measures"):
  prod_l ||W_l||_2^2 * sum_l ||W_l||_F^2 / ||W_l||_2^2, divided by gamma^2. Choices,
  all fixed here: the layers are every ``Conv2d`` and ``Linear`` (biases and
  normalisation layers are left out); a convolution's kernel (out x in x kh x kw) is
  reshaped to an (out x in*kh*kw) matrix and ||W||_2 is that matrix's largest singular
  value (the reshaped-kernel norm used in the PGDL measures, not the exact operator
  norm of the convolution); ||W||_F is the Frobenius norm of the weights; the margin
  of a training example is its true-class logit minus the largest other logit, and
  gamma is the 10th percentile of the margins over the training set (percentile
  configurable). A gamma <= 0 (a tenth of the training set misclassified or tied) makes
  the measure undefined: an error says so. ``log_value`` avoids overflow in deep nets.
- ``classifier_accuracy`` and ``classification_gap``: top-1 accuracy of a model on a
  dataset, and train - test accuracy with Newcombe's interval
  (:func:`retrieval_checks.generalization_gap`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._arrays import as_numpy, is_torch_tensor
from ..errors import InputError
from ..metrics._accuracy import AccuracyResult, accuracy
from ..metrics._measurement import Measurement
from ..metrics._names import classifier_metric, metric_spec
from ..models._embed import embed, require_torch
from ..options import check_option
from ..stats._gaps import generalization_gap
from ..stats._intervals import check_count, wilson_interval
from ._gradcam import check_images, find_layer, grad_cam
from ._localization import cam_iou, cam_iou_box

__all__ = [
    "evaluate_classifier",
    "ClassifierResult",
    "effective_invariance",
    "nuclear_norm",
    "spectral_measure",
    "classifier_accuracy",
    "classification_gap",
    "predict_proba",
    "NuclearNorm",
    "SpectralMeasure",
]


def _torch():
    return require_torch("this measure (it runs a torch model)")


def _run(model, images, *, batch_size: int, device, transform=None) -> np.ndarray:
    """Logits (N x K float64) of ``model`` on ``images``: :func:`~retrieval_checks.embed`
    (batches, eval mode with the mode restored, no autograd), read as logits."""
    torch = _torch()
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"expected a torch.nn.Module, got {type(model).__name__}.")
    check_count(batch_size, "batch_size", low=1)
    if transform is not None and not callable(transform):
        raise InputError(
            f"transform={transform!r} is not callable; give a function of a batch tensor."
        )
    images = check_images(images, model, torch)
    return embed(
        model, images, batch_size=batch_size, device=device, transform=transform, _output="logits"
    ).astype(np.float64)


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def predict_proba(model, images, *, batch_size: int = 256, device="auto") -> np.ndarray:
    """Softmax probabilities (N x K) of a classifier.

    Parameters
    ----------
    model:
        A ``torch.nn.Module`` classifier returning (N x K) logits.
    images:
        (N x ...) inputs (numpy array or torch tensor), e.g. (N x C x H x W).
    batch_size:
        Images per forward pass (default 256).
    device:
        ``"auto"`` (default), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Returns
    -------
    numpy.ndarray
        (N x K) float64 softmax probabilities, rows summing to 1.

    Raises
    ------
    InputError
        A model that is not a torch module, invalid images, an invalid ``batch_size``
        or device, logits that are not (N x K) finite numbers.
    BackendError
        A CUDA device asked for where there is none.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> import retrieval_checks as rc
    >>> _ = torch.manual_seed(0)
    >>> model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
    ...     torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3))
    >>> images = torch.rand(12, 1, 8, 8)
    >>> labels = np.array([2, 2, 2, 2, 0, 0, 2, 0, 0, 0, 0, 2])
    >>> p = rc.predict_proba(model, images, device="cpu")
    >>> p.shape, p[0].round(3)
    ((12, 3), array([0.308, 0.295, 0.397]))
    """
    return _softmax(_run(model, images, batch_size=batch_size, device=device))


def _rotations():
    torch = _torch()
    return [
        (f"rot{90 * k}", (lambda k: lambda x: torch.rot90(x, k, dims=(-2, -1)))(k))
        for k in (1, 2, 3)
    ]


def check_transforms(transforms) -> list[tuple[str, object]]:
    """``transforms=`` of :func:`effective_invariance` as ``(name, callable)`` pairs
    (None: the three rotations), checked before any model runs; else an InputError
    naming the entry and the fix."""
    if transforms is not None and (
        callable(transforms) or not isinstance(transforms, (list, tuple))
    ):
        raise InputError(
            f"transforms must be a list of callables (or (name, callable) pairs), got "
            f"{type(transforms).__name__}."
        )
    transforms = (
        _rotations()
        if transforms is None
        else [
            t if isinstance(t, tuple) else (getattr(t, "__name__", "transform"), t)
            for t in transforms
        ]
    )
    if not transforms:
        raise InputError("transforms is empty: give at least one transform.")
    for t in transforms:
        if len(t) != 2 or not callable(t[1]):
            raise InputError(
                f"transforms holds {t!r}; each entry is a callable or a (name, callable) pair."
            )
    return transforms


def effective_invariance(
    model, images, *, transforms=None, batch_size: int = 256, device="auto"
) -> float:
    """Mean EI over images and transforms (callables on batched tensors; default:
    rotations by 90, 180, 270 degrees), in [0, 1].

    EI of an image and a transform is sqrt(p * p') when the predicted class is the same
    before and after the transform (p, p': the predicted class's probabilities), else 0.

    Parameters
    ----------
    model:
        A ``torch.nn.Module`` classifier returning (N x K) logits.
    images:
        (N x ...) inputs (numpy array or torch tensor), e.g. (N x C x H x W).
    transforms:
        A list of callables on batched tensors, or (name, callable) pairs (default:
        rotations by 90, 180 and 270 degrees).
    batch_size:
        Images per forward pass (default 256).
    device:
        ``"auto"`` (default), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Returns
    -------
    float
        The mean EI, in [0, 1].

    Raises
    ------
    InputError
        ``transforms`` that is not a non-empty list of callables or (name, callable)
        pairs, and the errors of :func:`predict_proba`.
    BackendError
        A CUDA device asked for where there is none.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> import retrieval_checks as rc
    >>> _ = torch.manual_seed(0)
    >>> model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
    ...     torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3))
    >>> images = torch.rand(12, 1, 8, 8)
    >>> labels = np.array([2, 2, 2, 2, 0, 0, 2, 0, 0, 0, 0, 2])
    >>> round(rc.effective_invariance(model, images, device="cpu"), 3)
    0.397
    >>> flip = ("flip", lambda x: torch.flip(x, dims=(-1,)))
    >>> round(rc.effective_invariance(model, images, transforms=[flip], device="cpu"), 3)
    0.397
    """
    transforms = check_transforms(transforms)
    p = predict_proba(model, images, batch_size=batch_size, device=device)
    c, ph = p.argmax(axis=1), p.max(axis=1)
    total = []
    for _, t in transforms:
        pt = _softmax(_run(model, images, batch_size=batch_size, device=device, transform=t))
        ct, pht = pt.argmax(axis=1), pt.max(axis=1)
        total.append(np.where(c == ct, np.sqrt(ph * pht), 0.0))
    return float(np.mean(total))


@dataclass(frozen=True)
class NuclearNorm:
    """``value``: ||P||_* / sqrt(min(N, K) * N) in [0, 1]; ``raw``: ||P||_*.

    Parameters
    ----------
    value:
        ||P||_* / sqrt(min(N, K) * N), in [0, 1].
    raw:
        ||P||_*, the sum of the singular values of the prediction matrix P.
    n, k:
        The numbers of images and of classes.

    Raises
    ------
    None
        A plain frozen record; :func:`~retrieval_checks.nuclear_norm` checks its inputs.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> import retrieval_checks as rc
    >>> _ = torch.manual_seed(0)
    >>> model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
    ...     torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3))
    >>> images = torch.rand(12, 1, 8, 8)
    >>> labels = np.array([2, 2, 2, 2, 0, 0, 2, 0, 0, 0, 0, 2])
    >>> nn = rc.nuclear_norm(model, images, device="cpu")
    >>> round(nn.value, 4), nn.n, nn.k, round(float(nn), 4)
    (0.3373, 12, 3, 0.3373)
    """

    value: float
    raw: float
    n: int
    k: int

    def __float__(self) -> float:
        return self.value


def nuclear_norm(
    model_or_probabilities, images=None, *, batch_size: int = 256, device="auto"
) -> NuclearNorm:
    """Nuclear norm of the softmax prediction matrix: from a model and images, or from an
    (N x K) probability matrix directly.

    Parameters
    ----------
    model_or_probabilities:
        A ``torch.nn.Module`` classifier (with ``images``), or an (N x K) matrix of
        softmax probabilities.
    images:
        The inputs of the model; None when a probability matrix is given.
    batch_size:
        Images per forward pass (default 256).
    device:
        ``"auto"`` (default), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Returns
    -------
    NuclearNorm
        The normalised nuclear norm in [0, 1] and the raw one.

    Raises
    ------
    InputError
        A model without images, a matrix that is not (N x K) finite probability rows
        (non-negative, summing to 1), an invalid ``batch_size`` or device.
    BackendError
        A CUDA device asked for where there is none.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rc.nuclear_norm(np.eye(3)).value  # confident and diverse predictions
    1.0
    >>> rc.nuclear_norm(np.full((4, 2), 0.5)).value  # the same uncertain prediction for all
    0.5
    """
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, numbers.Integral)
        or batch_size < 1
    ):
        raise InputError(
            f"batch_size={batch_size!r}: expected an integer >= 1 (rows per forward pass)."
        )
    check_option("device", device)
    if images is None:
        given = model_or_probabilities
        if callable(given) and not hasattr(given, "__array__") and not is_torch_tensor(given):
            raise InputError(
                f"images= is missing: nuclear_norm got a {type(given).__name__} (a model) but no images; call "
                "nuclear_norm(model, images) or pass an (N images x K classes) matrix of softmax probabilities."
            )
        # rounding of a low-precision dtype moves each row's sum by up to its epsilon
        source = str(getattr(given, "dtype", ""))
        low = {
            "torch.bfloat16": 2.0**-8,
            "bfloat16": 2.0**-8,
            "torch.float16": 2.0**-11,
            "float16": 2.0**-11,
            "torch.half": 2.0**-11,
        }.get(source)
        p = as_numpy(given, "probabilities")
        if p.dtype.kind not in "biuf":
            raise InputError(
                f"the prediction matrix has dtype {p.dtype}; pass an (N images x K classes) array of "
                "softmax probabilities, or the model and the images (nuclear_norm(model, images))."
            )
        p = p.astype(np.float64)
        if p.ndim != 2 or p.size == 0:
            raise InputError(
                f"the prediction matrix has shape {p.shape}; need (N images x K classes)."
            )
        if not np.isfinite(p).all():
            raise InputError(
                "the prediction matrix has NaN or Inf values; pass softmax probabilities."
            )
        tol = 1e-6 if low is None else 2 * low
        if (p < 0).any() or not np.allclose(p.sum(axis=1), 1.0, rtol=0.0, atol=tol):
            raise InputError(
                "rows of the prediction matrix must be probability vectors (non-negative, sum 1); "
                "pass softmax outputs, or the model and the images."
            )
        if low is not None:  # rounded softmax: renormalised in float64
            p = p / p.sum(axis=1, keepdims=True)
    else:
        p = predict_proba(model_or_probabilities, images, batch_size=batch_size, device=device)
    n, k = p.shape
    raw = float(np.linalg.svd(p, compute_uv=False).sum())
    return NuclearNorm(raw / math.sqrt(min(n, k) * n), raw, n, k)


@dataclass(frozen=True)
class SpectralMeasure:
    """``value`` (may overflow to inf for deep nets; use ``log_value``), ``gamma`` (the
    margin percentile), per-layer spectral and Frobenius norms.

    Parameters
    ----------
    value:
        The measure (inf where it overflows).
    log_value:
        Its natural logarithm.
    gamma:
        The margin at ``percentile``.
    percentile:
        The percentile of the training margins used.
    layers:
        One dict per Conv or Linear layer: ``layer``, ``spectral``, ``frobenius``.

    Raises
    ------
    None
        A plain frozen record; :func:`~retrieval_checks.spectral_measure` checks its
        inputs.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> import retrieval_checks as rc
    >>> _ = torch.manual_seed(0)
    >>> model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
    ...     torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3))
    >>> images = torch.rand(12, 1, 8, 8)
    >>> labels = np.array([2, 2, 2, 2, 0, 0, 2, 0, 0, 0, 0, 2])
    >>> sm = rc.spectral_measure(model, images, np.full(12, 2), device="cpu")
    >>> sm.percentile, round(sm.value, 2), round(sm.layers[0]["spectral"], 3)
    (10.0, 26.87, 0.751)
    """

    value: float
    log_value: float
    gamma: float
    percentile: float
    layers: list

    def __float__(self) -> float:
        return self.value


def spectral_measure(
    model, images, labels, *, percentile: float = 10.0, batch_size: int = 256, device="auto"
) -> SpectralMeasure:
    """Jiang et al.'s spectral measure on the training set (``images``, ``labels``).

    The measure is prod_i ||W_i||_2^2 * sum_i ||W_i||_F^2 / ||W_i||_2^2 / gamma^2 over
    the Conv and Linear layers, with gamma the ``percentile``-th percentile of the
    training margins (the true class's logit minus the largest other one).

    Parameters
    ----------
    model:
        A ``torch.nn.Module`` classifier returning (N x K) logits.
    images:
        (N x ...) inputs (numpy array or torch tensor), e.g. (N x C x H x W).
    labels:
        The true class index of every training image.
    percentile:
        Of the margins (default 10).
    batch_size:
        Images per forward pass (default 256).
    device:
        ``"auto"`` (default), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Returns
    -------
    SpectralMeasure
        The measure (``value``, and ``log_value`` where it overflows), gamma and the
        per-layer norms.

    Raises
    ------
    InputError
        Labels that are not one class index per image within the logits' columns, a
        margin percentile <= 0 (too many misclassified training images), a layer of
        all-zero weights, a model without Conv or Linear layers, an invalid
        ``percentile``.
    BackendError
        A CUDA device asked for where there is none.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> import retrieval_checks as rc
    >>> _ = torch.manual_seed(0)
    >>> model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
    ...     torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3))
    >>> images = torch.rand(12, 1, 8, 8)
    >>> labels = np.array([2, 2, 2, 2, 0, 0, 2, 0, 0, 0, 0, 2])
    >>> sm = rc.spectral_measure(model, images, np.full(12, 2), device="cpu")
    >>> round(sm.log_value, 3), round(sm.gamma, 3), [layer["layer"] for layer in sm.layers]
    (3.291, 0.247, ['0', '4'])
    """
    torch = _torch()
    check_option("percentile", percentile)
    y = as_numpy(labels, "labels")
    logits = _run(model, images, batch_size=batch_size, device=device)
    if y.shape != (logits.shape[0],):
        raise InputError(
            f"labels have shape {y.shape}; give one class per image ({logits.shape[0]})."
        )
    if y.dtype.kind not in "iu":
        raise InputError(
            f"labels have dtype {y.dtype}; the spectral measure needs class indices (ints)."
        )
    if y.min() < 0 or y.max() >= logits.shape[1]:
        raise InputError(f"labels must be class indices in [0, {logits.shape[1]}).")
    true = logits[np.arange(y.size), y]
    other = logits.copy()
    other[np.arange(y.size), y] = -np.inf
    margins = true - other.max(axis=1)
    gamma = float(np.percentile(margins, percentile))
    if gamma <= 0:
        raise InputError(
            f"the {percentile:g}th percentile of the training margins is {gamma:.4g} <= 0 (too many "
            "misclassified training examples); the spectral measure is undefined."
        )
    layers = []
    log_prod, ratio_sum = 0.0, 0.0
    for name, m in model.named_modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv1d, torch.nn.Conv3d, torch.nn.Linear)):
            w = m.weight.detach().double().cpu().reshape(m.weight.shape[0], -1).numpy()
            spec = float(np.linalg.norm(w, 2))
            frob = float(np.linalg.norm(w))
            if spec == 0:
                raise InputError(
                    f"layer {name!r} has all-zero weights; the spectral measure is undefined."
                )
            layers.append({"layer": name, "spectral": spec, "frobenius": frob})
            log_prod += 2 * math.log(spec)
            ratio_sum += frob**2 / spec**2
    if not layers:
        raise InputError("the model has no Conv or Linear layers.")
    log_value = log_prod + math.log(ratio_sum) - 2 * math.log(gamma)
    value = math.exp(log_value) if log_value < 700 else math.inf
    return SpectralMeasure(value, log_value, gamma, percentile, layers)


def classifier_accuracy(
    model, images, labels, *, batch_size: int = 256, device="auto"
) -> AccuracyResult:
    """Top-1 accuracy of ``model`` on (images, labels), with the labels kept for gaps.

    Parameters
    ----------
    model:
        A ``torch.nn.Module`` classifier returning (N x K) logits.
    images:
        (N x ...) inputs (numpy array or torch tensor), e.g. (N x C x H x W).
    labels:
        The true class index (a logit column) of every image.
    batch_size:
        Images per forward pass (default 256).
    device:
        ``"auto"`` (default), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Returns
    -------
    AccuracyResult
        The accuracy, its counts, and the labels (for
        :func:`~retrieval_checks.generalization_gap`).

    Raises
    ------
    InputError
        Labels that are not integer class indices within the logits' columns, or not
        one per image, and the errors of :func:`predict_proba`.
    BackendError
        A CUDA device asked for where there is none.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> import retrieval_checks as rc
    >>> _ = torch.manual_seed(0)
    >>> model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
    ...     torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3))
    >>> images = torch.rand(12, 1, 8, 8)
    >>> labels = np.array([2, 2, 2, 2, 0, 0, 2, 0, 0, 0, 0, 2])
    >>> acc = rc.classifier_accuracy(model, images, labels, device="cpu")
    >>> acc.value, acc.n_correct, acc.n
    (0.5, 6, 12)
    """
    logits = _run(model, images, batch_size=batch_size, device=device)
    y = as_numpy(labels, "labels")
    if y.dtype.kind not in "iu":
        raise InputError(
            f"labels have dtype {y.dtype}; a classifier's accuracy needs class indices (ints, the "
            "logit columns)."
        )
    return accuracy(
        logits, y
    )  # the score matrix: labels must index its columns (the model's classes)


def classification_gap(
    model, train, test, *, confidence: float = 0.95, batch_size: int = 256, device="auto"
):
    """Accuracy(train) - accuracy(test) of a classifier with Newcombe's interval.
    ``train`` and ``test`` are (images, labels) pairs.

    Parameters
    ----------
    model:
        A ``torch.nn.Module`` classifier returning logits.
    train, test:
        ``(images, labels)`` pairs of the training and the test set (the same classes).
    confidence:
        Of Newcombe's interval (default 0.95).
    batch_size:
        Images per forward pass (default 256).
    device:
        ``"auto"`` (default), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Returns
    -------
    Gap
        Accuracy(train) - accuracy(test), with its interval; gate it with
        :func:`~retrieval_checks.assert_gap_below`.

    Raises
    ------
    InputError
        ``train`` or ``test`` not an (images, labels) pair, sets with different
        classes, the same data on both sides, and the errors of
        :func:`classifier_accuracy`.
    BackendError
        A CUDA device asked for where there is none.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> import retrieval_checks as rc
    >>> _ = torch.manual_seed(0)
    >>> model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
    ...     torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3))
    >>> images = torch.rand(12, 1, 8, 8)
    >>> labels = np.array([2, 2, 2, 2, 0, 0, 2, 0, 0, 0, 0, 2])
    >>> gap = rc.classification_gap(model, (images[:6], labels[:6]), (images[6:], labels[6:]),
    ...                             device="cpu")
    >>> print(gap)
    accuracy gap (train - test) = +0.3333 [-0.1852, +0.6679] (95% Newcombe score interval; train 0.6667 on 6 samples, test 0.3333 on 6 samples)
    """
    for name, pair in (("train", train), ("test", test)):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InputError(f"{name} must be an (images, labels) pair.")
    if confidence is not None:  # None: generalization_gap's default; checked before the model runs
        check_option("confidence", confidence)
    a = classifier_accuracy(model, *train, batch_size=batch_size, device=device)
    b = classifier_accuracy(model, *test, batch_size=batch_size, device=device)
    return generalization_gap(a, b, confidence=confidence)


class ClassifierResult(Mapping):
    """Mapping from classifier metric name to value, with ``intervals`` (bootstrap over
    images for ``cam_iou`` / ``cam_iou_box``, Wilson for ``accuracy``), the full
    ``localization`` results, ``accuracy_result`` (for gaps), ``spectral`` and
    ``nuclear`` details, ``n_images`` and ``config``.

    Built by :func:`~retrieval_checks.evaluate_classifier`; read, not constructed, by
    users.

    Parameters
    ----------
    values:
        ``{metric name: value}``.
    intervals:
        ``{metric name: (low, high)}``.
    n_images:
        The number of images.
    config:
        The options of the evaluation (layer, cam_method, rho, percentile, confidence,
        seed, n_resamples).
    localization:
        ``{"cam_iou" | "cam_iou_box": LocalizationResult}``.
    accuracy_result:
        The :class:`~retrieval_checks.AccuracyResult` (for gaps), or None.
    spectral, nuclear:
        The :class:`~retrieval_checks.SpectralMeasure` and
        :class:`~retrieval_checks.NuclearNorm`, or None.

    Raises
    ------
    KeyError
        ``result[name]`` for a metric it does not hold.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> import retrieval_checks as rc
    >>> _ = torch.manual_seed(0)
    >>> model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
    ...     torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3))
    >>> images = torch.rand(12, 1, 8, 8)
    >>> labels = np.array([2, 2, 2, 2, 0, 0, 2, 0, 0, 0, 0, 2])
    >>> res = rc.evaluate_classifier(model, images, labels, metrics=["accuracy", "nuclear_norm"],
    ...                              device="cpu")
    >>> list(res), res.n_images, res.accuracy_result.n_correct, round(res.nuclear.value, 3)
    (['accuracy', 'nuclear_norm'], 12, 6, 0.337)
    """

    def __init__(
        self,
        values,
        intervals,
        *,
        n_images,
        config,
        localization=None,
        accuracy_result=None,
        spectral=None,
        nuclear=None,
    ):
        self._values = dict(values)
        self.intervals = dict(intervals)
        self.n_images = n_images
        self.config = config
        self.localization = localization or {}
        self.accuracy_result = accuracy_result
        self.spectral = spectral
        self.nuclear = nuclear

    def __getitem__(self, name):
        return self._values[str(name).strip().lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.strip().lower() in self._values

    def measure(self, name: str) -> Measurement:
        """The :class:`~retrieval_checks.metrics.Measurement` of one computed metric."""
        key = str(name).strip().lower()
        spec = metric_spec(key)
        value = self._values[key]
        if key in self.localization:
            m = self.localization[key].measure()
            return Measurement(**{**m.__dict__, "context": dict(self.config.get("context", {}))})
        iv = self.intervals.get(key)
        has = iv is not None and np.isfinite(iv[0])
        return Measurement(
            metric=key,
            value=float(value),
            unit=spec.unit,
            higher_is_better=spec.higher_is_better,
            interval=tuple(iv) if has else None,
            confidence=self.config.get("confidence") if has else None,
            method="Wilson score interval" if has and key == "accuracy" else None,
            n=self.n_images,
            n_unit="images",
            sample=f"{self.n_images} images",
            context=dict(self.config.get("context", {})),
        )

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __repr__(self) -> str:
        lines = [f"ClassifierResult({self.n_images} images)"]
        for k, v in self._values.items():
            iv = self.intervals.get(k)
            lines.append(f"  {k:<22} {v:.6g}" + (f"  [{iv[0]:.4f}, {iv[1]:.4f}]" if iv else ""))
        return "\n".join(lines)


def _check_needs(names: list[str], model, y, layer, transforms):
    """What the measures asked for need, checked before any model runs: labels, the
    Grad-CAM layer (given, and a layer of the model) and the transforms (returned as
    ``(name, callable)`` pairs where ``effective_invariance`` uses them)."""
    needs_labels = [m for m in names if m in ("accuracy", "spectral_measure")]
    if needs_labels and y is None:
        raise InputError(f"{', '.join(needs_labels)} need labels.")
    for m in ("cam_iou", "cam_iou_box"):
        if m in names and layer is None:
            raise InputError(
                f"{m} needs layer= (the convolutional layer whose Grad-CAM is measured)."
            )
        if m in names:
            find_layer(model, layer)
    return check_transforms(transforms) if "effective_invariance" in names else transforms


def evaluate_classifier(
    model,
    images,
    labels=None,
    *,
    metrics,
    boxes=None,
    masks=None,
    layer=None,
    cam_method: str = "gradcam",
    rho: float = 0.1,
    transforms=None,
    percentile: float = 10.0,
    batch_size: int = 64,
    device="auto",
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> ClassifierResult:
    """Classifier measures on one dataset, in one call (the classifier counterpart of
    :func:`retrieval_checks.evaluate`).

    ``metrics`` from ``accuracy`` (needs labels), ``cam_iou`` and ``cam_iou_box``
    (need ``layer`` and ``boxes`` or ``masks``; the CAM of the predicted class),
    ``effective_invariance``, ``nuclear_norm`` and ``spectral_measure`` (needs labels:
    give the training set).

    Parameters
    ----------
    model:
        A ``torch.nn.Module`` classifier returning logits.
    images:
        (N x C x H x W) array or tensor.
    labels:
        The true class index of every image (needed by ``accuracy`` and
        ``spectral_measure``).
    metrics:
        A name or a list of names from the list above.
    boxes, masks:
        The objects' boxes or truth masks for ``cam_iou`` / ``cam_iou_box`` (see
        :func:`~retrieval_checks.cam_iou`).
    layer:
        The layer of the Grad-CAM (a name from ``model.named_modules()`` or the module).
    cam_method:
        ``"gradcam"`` (default) or ``"gradcam++"``.
    rho:
        The CAM threshold of the IoU (default 0.1).
    transforms:
        Of ``effective_invariance`` (default: the three rotations).
    percentile:
        Of the margins of ``spectral_measure`` (default 10).
    batch_size:
        Images per forward pass (default 64).
    device:
        ``"auto"`` (default), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    confidence:
        Of the intervals (Wilson for accuracy, bootstrap over images for the IoUs).
    n_resamples, seed:
        Of the bootstrap over images (default 1000, 0).

    Returns
    -------
    ClassifierResult
        A mapping from metric name to value, with ``intervals`` and the details; the
        gates (:func:`~retrieval_checks.assert_metric`...) take it.

    Raises
    ------
    InputError
        An unknown or empty list of metrics, a metric without what it needs (labels,
        ``layer``, boxes or masks), a model that is not a torch module, invalid images,
        labels or options, and the errors of each measure.
    MetricNameError
        A name that is no classifier metric.
    BackendError
        A CUDA device asked for where there is none.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> import retrieval_checks as rc
    >>> _ = torch.manual_seed(0)
    >>> model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
    ...     torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3))
    >>> images = torch.rand(12, 1, 8, 8)
    >>> labels = np.array([2, 2, 2, 2, 0, 0, 2, 0, 0, 0, 0, 2])
    >>> res = rc.evaluate_classifier(model, images, labels, metrics=["accuracy", "cam_iou"],
    ...                              layer="0", boxes=np.array([[0, 0, 4, 4]] * 12), device="cpu")
    >>> res["accuracy"], [round(float(v), 4) for v in res.intervals["accuracy"]]
    (0.5, [0.2538, 0.7462])
    >>> round(res["cam_iou"], 2)
    0.26
    >>> rc.assert_metric(res, "accuracy", at_least=0.4)
    """
    if not isinstance(metrics, (str, list, tuple)):
        raise InputError(
            f"metrics must be a name or a list of names, got {type(metrics).__name__}."
        )
    specs = [classifier_metric(m) for m in ([metrics] if isinstance(metrics, str) else metrics)]
    if not specs:
        raise InputError(
            "metrics is empty: name at least one, e.g. metrics=['accuracy', 'cam_iou']."
        )
    names = list(dict.fromkeys(s.name for s in specs))
    check_option("cam_method", cam_method)
    check_option("rho", rho)
    check_option("percentile", percentile)
    check_option("confidence", confidence)
    check_option("n_resamples", n_resamples)
    check_option("seed", seed)
    check_count(batch_size, "batch_size", low=1)
    torch = _torch()
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    images = check_images(images, model, torch)
    n = int(images.shape[0])
    y = None
    if labels is not None:
        y = as_numpy(labels, "labels")
        if y.shape != (n,):
            raise InputError(f"labels have shape {y.shape}; give one class per image ({n}).")
        if y.dtype.kind not in "iu":
            raise InputError(
                f"labels have dtype {y.dtype}; give class indices (ints, the logit columns)."
            )
    transforms = _check_needs(names, model, y, layer, transforms)
    values, intervals, loc = {}, {}, {}
    acc = spectral = nuclear = None
    if "accuracy" in names or "nuclear_norm" in names:
        logits = _run(model, images, batch_size=batch_size, device=device)
        if "accuracy" in names:
            acc = accuracy(
                logits, y
            )  # the score matrix: labels must index its columns (the model's classes)
            values["accuracy"] = float(acc.value)
            low, high = wilson_interval(int(round(acc.value * acc.n)), acc.n, confidence)
            intervals["accuracy"] = (max(0.0, low), min(1.0, high))
        if "nuclear_norm" in names:
            nuclear = nuclear_norm(_softmax(logits))
            values["nuclear_norm"] = nuclear.value
    cams = None
    for m in ("cam_iou", "cam_iou_box"):
        if m not in names:
            continue
        if cams is None:
            cams = grad_cam(
                model, images, layer, method=cam_method, batch_size=batch_size, device=device
            )
        fn = cam_iou if m == "cam_iou" else cam_iou_box
        loc[m] = fn(
            cams,
            boxes=boxes,
            masks=masks,
            rho=rho,
            confidence=confidence,
            n_resamples=n_resamples,
            seed=seed,
        )
        values[m] = loc[m].value
        intervals[m] = (loc[m].low, loc[m].high)
    if "effective_invariance" in names:
        values["effective_invariance"] = effective_invariance(
            model, images, transforms=transforms, batch_size=batch_size, device=device
        )
    if "spectral_measure" in names:
        spectral = spectral_measure(
            model, images, y, percentile=percentile, batch_size=batch_size, device=device
        )
        values["spectral_measure"] = spectral.value
    values = {m: values[m] for m in names}
    config = {
        "layer": layer,
        "cam_method": cam_method,
        "rho": rho,
        "percentile": percentile,
        "confidence": confidence,
        "seed": seed,
        "n_resamples": n_resamples,
    }
    return ClassifierResult(
        values,
        intervals,
        n_images=n,
        config=config,
        localization=loc,
        accuracy_result=acc,
        spectral=spectral,
        nuclear=nuclear,
    )
