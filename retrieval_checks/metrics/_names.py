"""Canonical metric names: parsing, aliases and suggestions.

``../shared/METRICS.md`` is the contract: each canonical name means exactly one
quantity. Users may write aliases (``cmc@5``, ``mAP@R``, ``ap``); results and
reports always use the canonical spelling returned by :func:`canonical_metric_name`.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass

from ..errors import MetricNameError

__all__ = ["MetricSpec", "parse_metric", "canonical_metric_name", "METRIC_TEMPLATES"]

# Families whose value is computed per query, then averaged over the queries used.
_QUERY_K = ("hit_rate", "recall", "precision", "map", "map_cut", "map_capped")
_QUERY_PLAIN = ("map", "map@R", "r_precision", "mrr", "medr", "meanr")
_PAIR_T = ("pair_precision", "pair_recall", "pair_f1")
_PAIR_LEVEL = ("recall_at_precision", "precision_at_recall")
_EMBEDDING = ("discriminant_ratio",)

#: One line per family, as a user would write it; used in messages and suggestions.
METRIC_TEMPLATES: tuple[str, ...] = (
    "hit_rate@K",
    "recall@K",
    "precision@K",
    "map",
    "map@K",
    "map_cut@K",
    "map_capped@K",
    "map@R",
    "r_precision",
    "mrr",
    "medr",
    "meanr",
    "pair_precision@t=T",
    "pair_recall@t=T",
    "pair_f1@t=T",
    "recall_at_precision@P",
    "precision_at_recall@Q",
    "discriminant_ratio",
    "grouped_recall@K",
    "i2t_recall@K",
    "t2i_recall@K",
    "rsum",
    "mean_recall",
    "i2t_medr",
    "t2i_medr",
    "i2t_meanr",
    "t2i_meanr",
)

_CROSSMODAL_K = ("i2t_recall", "t2i_recall")
_CROSSMODAL_PLAIN = ("rsum", "mean_recall", "i2t_medr", "t2i_medr", "i2t_meanr", "t2i_meanr")

_ALIASES = {"cmc": "hit_rate", "ap": "map", "r-precision": "r_precision", "rprecision": "r_precision"}

# Names defined in METRICS.md that evaluate() does not compute (other entry points).
_ELSEWHERE = {
    "accuracy": "accuracy is a classifier metric: call retrieval_checks.accuracy(predictions, labels); "
    "for 1-nearest-neighbour accuracy of embeddings use 'hit_rate@1'",
}

#: Metrics of classifiers (``evaluate_classifier``), not of embeddings.
CLASSIFIER_METRICS = ("accuracy", "cam_iou", "cam_iou_box", "effective_invariance", "nuclear_norm", "spectral_measure")


def classifier_metric(name: str) -> MetricSpec:
    """The spec of a classifier metric (``CLASSIFIER_METRICS``); an error suggests the closest."""
    text = str(name).strip().lower().replace("-", "_")
    if text in CLASSIFIER_METRICS:
        return MetricSpec(text, text, "classifier")
    close = difflib.get_close_matches(text, CLASSIFIER_METRICS, n=1, cutoff=0.6)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    raise MetricNameError(f"Unknown classifier metric {name!r}.{hint} Classifier metrics: "
                          f"{', '.join(CLASSIFIER_METRICS)}.", name=str(name), suggestion=close[0] if close else None)


def metric_spec(name) -> MetricSpec:
    """Any metric of the contract: a classifier metric (``CLASSIFIER_METRICS``) or an
    embedding-evaluation one (:func:`parse_metric`). An unknown name gets the closest
    name from either vocabulary."""
    text = name.strip().lower().replace("-", "_") if isinstance(name, str) else None
    if text in CLASSIFIER_METRICS:
        return MetricSpec(text, text, "classifier")
    try:
        return parse_metric(name)
    except MetricNameError as exc:
        close = difflib.get_close_matches(text, CLASSIFIER_METRICS, n=1, cutoff=0.6) if text else []
        if exc.suggestion is not None or not close:
            raise
        raise MetricNameError(f"unknown metric {name!r}. Did you mean '{close[0]}'? Classifier metrics (images "
                              f"datasets): {', '.join(CLASSIFIER_METRICS)}.", name=name, suggestion=close[0]) from None


_RANK_UNIT = ("medr", "meanr", "i2t_medr", "t2i_medr", "i2t_meanr", "t2i_meanr")


@dataclass(frozen=True)
class MetricSpec:
    """A parsed metric: its canonical name and parameters.

    ``kind`` is ``"query"`` (one value per query, averaged), ``"pair"`` (counted over
    all query-gallery pairs), ``"grouped"`` (grouped recall: a mean over label groups,
    with an interval), ``"embedding"`` (a property of the embedding set) or
    ``"crossmodal"`` (image-text metrics of ``evaluate_image_text``).
    ``k`` is the rank cut-off, ``level`` the precision / recall level or the threshold.
    """

    name: str
    family: str
    kind: str
    k: int | None = None
    level: float | None = None

    @property
    def unit(self) -> str:
        """``"rank"`` for medr / meanr, ``"ratio"`` for the discriminant ratio, else ``"fraction"``."""
        if self.family in _RANK_UNIT:
            return "rank"
        if self.family in ("discriminant_ratio", "spectral_measure"):
            return "ratio"
        if self.family == "rsum":
            return "percentage points"
        if self.family == "mean_recall":
            return "percent"
        return "fraction"

    @property
    def higher_is_better(self) -> bool:
        return self.family not in _RANK_UNIT and self.family != "spectral_measure"


def _fmt(x: float) -> str:
    s = repr(float(x))
    return s[:-2] if s.endswith(".0") else s


def _fail(name: str, reason: str) -> MetricNameError:
    suggestion = _suggest(name)
    hint = f" Did you mean '{suggestion}'?" if suggestion else ""
    return MetricNameError(
        f"Unknown or malformed metric name {name!r}: {reason}.{hint} "
        f"Known metrics: {', '.join(METRIC_TEMPLATES)} (K a positive integer, "
        f"P and Q in (0, 1], T a similarity threshold).",
        name=name,
        suggestion=suggestion,
    )


def _suggest(name: str) -> str | None:
    lowered = name.strip().lower()
    base, _, param = lowered.partition("@")
    # Suggest a concrete canonical name: keep the user's parameter where it fits.
    candidates: dict[str, str] = {}
    for template in METRIC_TEMPLATES:
        t_base, _, t_param = template.partition("@")
        if t_param in ("K",) and param.isdigit() and int(param) >= 1:
            concrete = f"{t_base}@{int(param)}"
        elif t_param in ("P", "Q") and _is_float(param):
            concrete = f"{t_base}@{param}"
        else:
            concrete = template
        candidates[concrete.lower()] = concrete
    match = difflib.get_close_matches(lowered, list(candidates), n=1, cutoff=0.6)
    if not match:
        match = difflib.get_close_matches(base, [c.partition("@")[0] for c in candidates], n=1, cutoff=0.6)
        if not match:
            return None
        for key, concrete in candidates.items():
            if key.partition("@")[0] == match[0]:
                return concrete
    return candidates[match[0]]


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_K_RE = re.compile(r"^\+?0*(\d+)$")


def parse_metric(name: str) -> MetricSpec:
    """Parse a metric name or alias into a :class:`MetricSpec` with its canonical name.

    Raises :class:`~retrieval_checks.errors.MetricNameError` with the closest
    canonical name for anything unknown or malformed.
    """
    if not isinstance(name, str):
        raise MetricNameError(f"Metric names are strings, got {type(name).__name__}: {name!r}.", name=str(name))
    raw = name
    text = name.strip()
    if not text:
        raise _fail(raw, "the name is empty")
    base, at, param = text.partition("@")
    base = base.strip().lower().replace("-", "_") if base.lower() not in _ALIASES else base.lower()
    base = _ALIASES.get(base, base)
    param = param.strip()

    if base in _ELSEWHERE and not at:
        raise MetricNameError(f"{raw!r} is not computed by evaluate(): {_ELSEWHERE[base]}.", name=raw)

    if not at:
        if base in _CROSSMODAL_PLAIN:
            return MetricSpec(base, base, "crossmodal")
        if base in ("map", "r_precision", "mrr", "medr", "meanr"):
            return MetricSpec(base, base, "query")
        if base in _EMBEDDING:
            return MetricSpec(base, base, "embedding")
        if base in _QUERY_K or base in _PAIR_T or base in _PAIR_LEVEL or base in _CROSSMODAL_K or base == "grouped_recall":
            raise _fail(raw, f"'{base}' needs a parameter after '@'")
        raise _fail(raw, "no such metric")

    if base == "map" and param in ("R", "r"):
        return MetricSpec("map@R", "map@R", "query")

    if base in _QUERY_K or base == "grouped_recall" or base in _CROSSMODAL_K:
        m = _K_RE.match(param)
        if not m or int(m.group(1)) < 1:
            raise _fail(raw, f"the cut-off K after '@' must be a positive integer, got {param!r}")
        k = int(m.group(1))
        kind = "grouped" if base == "grouped_recall" else "crossmodal" if base in _CROSSMODAL_K else "query"
        return MetricSpec(f"{base}@{k}", base, kind, k=k)

    if base in _PAIR_T:
        p = param.replace(" ", "")
        if not p.lower().startswith("t="):
            raise _fail(raw, f"pair metrics take a threshold written '@t=T', got '@{param}'")
        try:
            t = float(p[2:])
        except ValueError:
            raise _fail(raw, f"the threshold {p[2:]!r} is not a number") from None
        if not math.isfinite(t):
            raise _fail(raw, "the threshold must be finite")
        return MetricSpec(f"{base}@t={_fmt(t)}", base, "pair", level=t)

    if base in _PAIR_LEVEL:
        try:
            level = float(param)
        except ValueError:
            raise _fail(raw, f"the level after '@' must be a number in (0, 1], got {param!r}") from None
        if not (0.0 < level <= 1.0):
            raise _fail(raw, f"the level after '@' must be in (0, 1], got {param}")
        return MetricSpec(f"{base}@{_fmt(level)}", base, "pair", level=level)

    if base in _ELSEWHERE:
        raise MetricNameError(f"{raw!r} is not computed by evaluate(): {_ELSEWHERE[base]}.", name=raw)
    if base in ("r_precision", "mrr", "medr", "meanr", "discriminant_ratio") + _CROSSMODAL_PLAIN:
        raise _fail(raw, f"'{base}' takes no parameter")
    raise _fail(raw, "no such metric")


def canonical_metric_name(name: str) -> str:
    """The canonical spelling of a metric name or alias (``"cmc@5"`` -> ``"hit_rate@5"``)."""
    return parse_metric(name).name
