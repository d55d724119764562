"""Class activation maps of torch CNNs: Grad-CAM and Grad-CAM++ on hooks.

For an image x, a layer with activations A (C x h x w) and the logit y_c of a class c
(by default the predicted one):

- **Grad-CAM** (Selvaraju et al., 2017): channel weights w_k = mean over (i, j) of
  dy_c / dA_k(i, j); map = ReLU(sum_k w_k A_k).
- **Grad-CAM++** (Chattopadhay et al., 2018), with g = dy_c / dA: alpha_k(i, j) =
  g^2 / (2 g^2 + sum_(a,b) A_k(a, b) g^3) (0 where the denominator is 0); w_k =
  sum_(i,j) alpha_k(i, j) ReLU(g_k(i, j)); map = ReLU(sum_k w_k A_k). This is the
  closed form for an exponential of the score applied to the raw logit's gradients,
  as common implementations do.

Each map is then min-max normalised per image to [0, 1] (a constant map, e.g. all
zero after the ReLU, becomes all zeros, never NaN) and bilinearly upsampled to the
input's spatial size (``align_corners=False``). Bilinear weights are convex, so values
stay in [0, 1]. Runs in batches on any device, in eval mode (the model's mode is
restored after), with gradients enabled only for this computation.
"""

from __future__ import annotations

import numpy as np

from .._arrays import as_numpy
from .._suggest import hint
from ..errors import InputError
from ..models._embed import float_tensor, require_torch, resolve_device

__all__ = ["grad_cam", "find_layer", "check_images"]


def check_images(images, model, torch, *, name: str = "images"):
    """``images`` as a floating tensor for ``model``: numpy arrays of any byte order
    (big-endian files too) and tensors of any floating type (bfloat16 included) are
    converted to the model's parameter dtype; non-numeric, empty and non-finite inputs
    are refused. Every classifier measure reads its images through here, so a NaN
    image fails the same way everywhere (a NaN image's Grad-CAM would silently become
    an all-zero map, and its IoU 0)."""
    if not isinstance(images, torch.Tensor):
        a = as_numpy(images, name)
        if a.dtype.kind not in "biuf":
            raise InputError(
                f"{name} has dtype {a.dtype}; pass numeric image arrays (N x C x H x W)."
            )
        images = a
    elif images.is_complex():
        raise InputError(f"{name} has dtype {images.dtype}; pass real-valued images.")
    x = float_tensor(images, torch)
    if x.ndim < 1 or x.shape[0] == 0:
        raise InputError(
            f"{name} has shape {tuple(x.shape)}; need at least one image (N x C x H x W)."
        )
    finite = torch.isfinite(x.reshape(x.shape[0], -1)).all(dim=1)
    if not bool(finite.all()):
        bad = torch.nonzero(~finite).flatten().cpu().tolist()
        raise InputError(
            f"{name} has NaN or Inf in {len(bad)} image(s) (images {', '.join(map(str, bad[:5]))}"
            f"{', ...' if len(bad) > 5 else ''}); drop or repair those images before measuring."
        )
    params = (
        [p for p in model.parameters() if p.is_floating_point()]
        if isinstance(model, torch.nn.Module)
        else []
    )
    if params and x.dtype != params[0].dtype:
        x = x.to(params[0].dtype)  # bfloat16 images for a float32 model, or the reverse
    return x


def _torch():
    return require_torch("Grad-CAM")


def find_layer(model, layer):
    """The submodule named ``layer`` (a dotted name from ``model.named_modules()``), or
    ``layer`` itself when it is a module of ``model``."""
    torch = _torch()
    if isinstance(layer, torch.nn.Module):
        if not any(m is layer for m in model.modules()):
            raise InputError("the layer module given is not part of the model.")
        return layer
    modules = dict(model.named_modules())
    if not isinstance(layer, str) or layer not in modules or layer == "":
        convs = [
            n
            for n, m in modules.items()
            if n and isinstance(m, (torch.nn.Conv2d, torch.nn.ReLU, torch.nn.Sequential))
        ]
        raise InputError(
            f"the model has no layer {layer!r}.{hint(layer, [n for n in modules if n])} Convolutional and block layers: "
            f"{', '.join(convs[-12:]) or 'none'}; all layers: {', '.join(n for n in modules if n)}."
        )
    return modules[layer]


def grad_cam(
    model,
    images,
    layer,
    *,
    target=None,
    method: str = "gradcam",
    batch_size: int = 64,
    device: str | None = "auto",
    upsample: bool = True,
) -> np.ndarray:
    """Class activation maps, (N x H x W) float32 in [0, 1] (N x h x w at the layer's
    resolution with ``upsample=False``).

    ``images``: (N x C x H x W) array or tensor. ``layer``: a name from
    ``model.named_modules()`` (e.g. ``"features"`` or ``"layer4.1.conv2"``) or the module.
    ``target``: None (each image's predicted class), an int (one class for all) or N
    class indices. ``method``: ``"gradcam"`` or ``"gradcam++"``.

    Parameters
    ----------
    model:
        A ``torch.nn.Module`` classifier.
    images:
        (N x C x H x W) array or tensor.
    layer:
        The layer whose activations and gradients make the map: a name from
        ``model.named_modules()`` or the module itself.
    target:
        None (each image's predicted class), one class for all, or N class indices.
    method:
        ``"gradcam"`` (default) or ``"gradcam++"``.
    batch_size:
        Images per pass (default 64).
    device:
        ``"auto"`` (default), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    upsample:
        Maps at the images' size (default True) or at the layer's resolution.

    Returns
    -------
    numpy.ndarray
        (N x H x W) float32 maps in [0, 1].

    Raises
    ------
    InputError
        An unknown ``method`` or layer (the message lists the model's layers), a
        model that is not a torch module, images that are not (N, C, H, W) or empty,
        invalid targets, ``batch_size`` or ``upsample``.
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
    >>> cams = rc.grad_cam(model, images, "0", device="cpu")  # layer "0": the convolution
    >>> cams.shape, cams.dtype, float(cams.min()), float(cams.max())
    ((12, 8, 8), dtype('float32'), 0.0, 1.0)
    """
    torch = _torch()
    if method not in ("gradcam", "gradcam++"):
        raise InputError(f"method={method!r}: use 'gradcam' or 'gradcam++'.")
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"grad_cam needs a torch.nn.Module, got {type(model).__name__}.")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InputError(f"batch_size={batch_size!r}: use a positive integer.")
    if not isinstance(upsample, (bool, np.bool_)):
        shown = repr(upsample)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise InputError(
            f"upsample={shown}: use True (maps at the images' size) or False (at the layer's "
            "resolution)."
        )
    upsample = bool(upsample)
    x_all = check_images(images, model, torch)
    if x_all.ndim != 4:
        raise InputError(f"images have shape {tuple(x_all.shape)}; Grad-CAM needs (N, C, H, W).")
    if x_all.shape[0] == 0:
        raise InputError("images is empty.")
    n = x_all.shape[0]
    if target is not None:
        t = as_numpy(target, "target")
        if t.dtype.kind not in "iu" or t.dtype == bool:
            raise InputError(
                f"target has dtype {t.dtype}; give class indices (ints), one per image or one for all."
            )
        if t.ndim == 0:
            t = np.full(n, int(t))
        if t.shape != (n,):
            raise InputError(
                f"target has shape {t.shape}; give one class per image ({n}) or one int."
            )
        target = torch.from_numpy(t.astype(np.int64))
    module = find_layer(model, layer)
    dev = torch.device(resolve_device(device))
    was_training = model.training
    model.eval()
    store: dict = {}

    def forward_hook(_module, _inputs, output):
        if not isinstance(output, torch.Tensor):
            raise InputError(
                f"layer {layer!r} returns {type(output).__name__}; pick a layer that returns one tensor."
            )
        store["A"] = output

    handle = module.register_forward_hook(forward_hook)
    params = list(model.parameters())
    original_device = params[0].device if params else None
    out = []
    try:
        model.to(dev)
        with torch.inference_mode(False), torch.enable_grad():
            for start in range(0, n, batch_size):
                xb = x_all[start : start + batch_size].to(dev).detach().clone().requires_grad_(True)
                tb = None if target is None else target[start : start + batch_size].to(dev)
                out.append(_batch_maps(model, xb, tb, store, layer, method, upsample, torch))
    finally:
        handle.remove()
        model.train(was_training)
        if original_device is not None:
            model.to(original_device)
    return np.concatenate(out)


def _batch_maps(
    model, xb, tb, store: dict, layer, method: str, upsample: bool, torch
) -> np.ndarray:
    """One batch's maps: forward, gradients of the target logits at the layer, weights,
    ReLU, min-max normalisation and upsampling."""
    store.clear()
    logits = model(xb)
    if logits.ndim != 2:
        raise InputError(
            f"the model returned shape {tuple(logits.shape)}; Grad-CAM needs logits "
            "(batch x classes)."
        )
    if "A" not in store:
        raise InputError(f"layer {layer!r} did not run in the forward pass.")
    tb = logits.argmax(dim=1) if tb is None else tb
    if (tb < 0).any() or (tb >= logits.shape[1]).any():
        raise InputError(f"target classes must be in [0, {logits.shape[1]}).")
    # gradients of the target logits with respect to the layer only: the parameters'
    # .grad stay untouched (frozen models work too, since the input requires grad)
    (G,) = torch.autograd.grad(logits.gather(1, tb[:, None]).sum(), store["A"])
    A = store["A"].detach()
    if A.ndim != 4:
        raise InputError(
            f"layer {layer!r} outputs shape {tuple(A.shape)}; pick a convolutional layer "
            "(batch x channels x height x width)."
        )
    if method == "gradcam":
        weights = G.mean(dim=(2, 3))
    else:
        g2, g3 = G.pow(2), G.pow(3)
        denom = 2 * g2 + (A * g3).sum(dim=(2, 3), keepdim=True)
        alpha = torch.where(
            denom != 0,
            g2 / torch.where(denom != 0, denom, torch.ones_like(denom)),
            torch.zeros_like(denom),
        )
        weights = (alpha * torch.relu(G)).sum(dim=(2, 3))
    cam = torch.relu((weights[:, :, None, None] * A).sum(dim=1))
    flat = cam.flatten(1)
    lo, hi = flat.min(dim=1).values, flat.max(dim=1).values
    span = (hi - lo)[:, None, None]
    cam = torch.where(
        span > 0,
        (cam - lo[:, None, None]) / torch.where(span > 0, span, 1.0),
        torch.zeros_like(cam),
    )
    if upsample:
        cam = torch.nn.functional.interpolate(
            cam[:, None], size=tuple(xb.shape[-2:]), mode="bilinear", align_corners=False
        )[:, 0]
    return cam.clamp_(0, 1).float().cpu().numpy()
