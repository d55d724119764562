"""Rsum and mean recall refused where a recall they add up could never fail.

``rsum`` adds six recalls (``i2t_recall@1, @5, @10`` and ``t2i_recall@1, @5, @10``).
A recall whose K reaches past every non-relevant candidate of its direction (the
result's ``config["certain_k"]``, :func:`~retrieval_checks.engine._image_text._certain_k`:
a caption ranks the images of its fold, an image the captions) is 1 whatever the model,
and :func:`~retrieval_checks.gates._assertions.threshold_bounds` refuses a gate on it.
A gate on the sum held those 100 points too: on 4 images a random model scored 450 and
``assert_rsum(r, 300)`` passed. The same rule now covers the sum: a threshold on
``rsum`` / ``mean_recall`` is refused when any of its components is certain, naming
them and the fix.
"""

from __future__ import annotations

import numbers

from ..errors import InputError

__all__ = ["refuse_certain_components"]

_COMPONENT_K = (1, 5, 10)
#: what each direction's query ranks (the certain K's reason, here and in gates.certain_k)
RANKED_BY = {
    "i2t": "captions an image ranks",
    "t2i": "images a caption ranks",
}


def certain_components(result) -> list[tuple[str, int, int]]:
    """The component recalls of ``result``'s Rsum that are 1 whatever the model, each
    as (name, its K, the K from which its direction is certain); [] when none, or when the result
    does not record ``config["certain_k"]`` (not an image-text result)."""
    config = getattr(result, "config", None)
    certain = config.get("certain_k") if isinstance(config, dict) else None
    if not isinstance(certain, dict):
        return []
    out = []
    for side in ("i2t", "t2i"):
        k_all = certain.get(side)
        if not isinstance(k_all, numbers.Integral) or isinstance(k_all, bool):
            continue
        out += [(f"{side}_recall@{k}", k, int(k_all)) for k in _COMPONENT_K if k >= k_all]
    return out


def refuse_certain_components(result, spec, gated: bool = True) -> None:
    """InputError when ``spec`` is ``rsum`` or ``mean_recall``, ``gated`` (a threshold is
    given) and one of the recalls it adds up is 1 whatever the model (its K reaches past
    every non-relevant candidate): the sum then holds 100 points per such recall for any
    model, and a gate on it passes a random one. The message names the components, the
    images the result would need, and the recalls that can still be gated."""
    if not gated or getattr(spec, "family", None) not in ("rsum", "mean_recall"):
        return
    found = certain_components(result)
    if not found:
        return
    names = ", ".join(
        f"{name} (K={k} >= {k_all}: past the non-relevant {RANKED_BY[name[:3]]})"
        for name, k, k_all in found
    )
    points = 100 * len(found)
    scale = (
        f"{points} of the 600 points"
        if spec.family == "rsum"
        else f"{points / 6:.1f} of the 100 percent"
    )
    fixed = {name for name, _, _ in found}
    free = [
        f"{d}_recall@{k}"
        for d in ("i2t", "t2i")
        for k in _COMPONENT_K
        if f"{d}_recall@{k}" not in fixed
    ]
    gate_these = (
        f"or gate the recalls that can fail ({', '.join(free)}: assert_metric(result, {free[0]!r}, at_least=...))"
        if free
        else "no component recall can fail on this data"
    )
    n_images = getattr(result, "n_images", None)
    held = f" ({n_images} images)" if isinstance(n_images, numbers.Integral) else ""
    raise InputError(
        f"{spec.name}: {len(found)} of the six recalls it adds up {'is' if len(found) == 1 else 'are'} 1 "
        f"whatever the model on this data{held}: {names}. They give any model {scale}, so a gate on "
        f"{spec.name} could pass a random model. Evaluate on more images (every component can fail with at "
        "least 11 images in every fold and, for every image, at least 10 captions of other images), "
        f"{gate_these}."
    )
