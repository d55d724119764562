"""Canonical metric names: parsing, aliases and suggestions.

``docs/metrics.md`` is the contract: each canonical name means exactly one quantity.
Users may write aliases (``cmc@5``, ``mAP@R``, ``ap``); results and reports always use
the canonical spelling returned by :func:`canonical_metric_name`. What each family can
do (unit, range, intervals, gaps) is in :mod:`._registry`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from .._suggest import did_you_mean, shown
from ..errors import MetricNameError
from ._registry import FAMILIES, Family, families_of_kind

__all__ = [
    "MetricSpec",
    "image_text_analogue",
    "parse_metric",
    "canonical_metric_name",
    "metric_spec",
    "classifier_metric",
    "METRIC_TEMPLATES",
    "CLASSIFIER_METRICS",
    "MAX_PARAM_CHARS",
    "MAX_LEVEL_PLACES",
    "naming_note",
    "TREC_CUT_NAMES",
    "WHOLE_ALIASES",
]

#: The longest parameter after '@' that :func:`parse_metric` reads (a cut-off K, a
#: level P / Q or a threshold T); longer ones are refused before any number is built.
MAX_PARAM_CHARS = 40

#: The most decimal places of a level P / Q (0.9: 1 place). Levels are exact decimal
#: fractions (9/10, not the float 0.9), so this bounds their denominators (10^30).
MAX_LEVEL_PLACES = 30

#: Metrics of classifiers (``evaluate_classifier``), not of embeddings.
CLASSIFIER_METRICS = families_of_kind("classifier")

#: Families written with or without a cut-off K (``map`` and ``map@K``).
_OPTIONAL_K = ("map", "ndcg", "ndcg_exp", "mrr", "dcg", "dcg_exp")

#: Families whose parameter is a fraction: (least, greatest, whether the least is allowed,
#: whether the greatest is) -- rbp's persistence p in (0, 1), a recall level in [0, 1].
_FRACTION_PARAM = {
    "rbp": (False, False),
    "rbp_residual": (False, False),
    "iprec_at_recall": (True, True),
}

#: One line per family that :func:`parse_metric` reads, as a user would write it
#: (``map`` also takes a cut-off: ``map@K``).
METRIC_TEMPLATES: tuple[str, ...] = tuple(
    t
    for f in FAMILIES.values()
    if f.kind != "classifier"
    for t in ((f.template, f"{f.name}@K") if f.name in _OPTIONAL_K else (f.template,))
)

ALIASES = {
    "cmc": "hit_rate",
    "ap": "map",
    "r-precision": "r_precision",
    "rprecision": "r_precision",
    "ndcg_cut": "ndcg",
    # trec_eval's and other libraries' names of the same quantities (docs/metrics.md)
    "success": "hit_rate",
    "recip_rank": "mrr",
    "rprec": "r_precision",
    "r_cap": "recall_cap",
    "11pt_avg": "iprec_11pt",
    "p": "precision",  # BEIR's P@K
    "ndcg_burges": "ndcg_exp",  # ranx's names of the 2^grade - 1 gain
    "dcg_burges": "dcg_exp",
    "median_rank": "medr",  # the words of the image-text papers' MedR and MeanR
    "mean_rank": "meanr",
}

#: trec_eval's measure names with their cut-off after an underscore (``P_10``,
#: ``ndcg_cut_10``, ``iprec_at_recall_0.50``): the family each one is.
# trec_eval's result keys (P_10, ndcg_cut_10) and pytrec_eval's measure requests (P.10,
# ndcg_cut.10: the parameter after a dot, as trec_eval's -m takes it)
_TREC_CUT = re.compile(
    r"(p|recall|success|map_cut|ndcg_cut|iprec_at_recall)[_.](\d+(?:\.\d+)?)", re.I
)
#: the same names as trec_eval spells them, with their parameter (the suites' JSON schema)
TREC_CUT_NAMES = {
    "P": "K",
    "recall": "K",
    "success": "K",
    "map_cut": "K",
    "ndcg_cut": "K",
    "iprec_at_recall": "L",
}
_TREC_BASE = {
    "p": "precision",
    "recall": "recall",
    "success": "hit_rate",
    "map_cut": "map_cut",
    "ndcg_cut": "ndcg",
    "iprec_at_recall": "iprec_at_recall",
}

#: Whole names of other libraries that are one of ours (pytorch-metric-learning's
#: result keys). Its ``mean_average_precision`` is not one: its measure depends on k.
WHOLE_ALIASES = {
    "mean_average_precision_at_r": "map@R",
    "precision_at_1": "hit_rate@1",
    "mean_reciprocal_rank": "mrr",
}
_TAKES_K = {f.name for f in FAMILIES.values() if f.param == "K"} | set(_OPTIONAL_K)

# Names defined in the contract that evaluate() does not compute (other entry points).
_ELSEWHERE = {
    "accuracy": "accuracy is a classifier metric: call retrieval_checks.accuracy(predictions, labels); "
    "for 1-nearest-neighbour accuracy of embeddings use 'hit_rate@1'",
}


@dataclass(frozen=True)
class MetricSpec:
    """A parsed metric: its canonical name and parameters.

    ``kind`` is ``"query"`` (one value per query, averaged), ``"pair"`` (counted over
    all query-gallery pairs), ``"grouped"`` (grouped recall: a mean over label groups,
    with an interval), ``"embedding"`` (a property of the embedding set),
    ``"crossmodal"`` (image-text metrics of ``evaluate_image_text``) or
    ``"classifier"`` (``evaluate_classifier``). ``k`` is the rank cut-off, ``level``
    the precision / recall level or the threshold. ``capabilities`` is the family's
    record in the registry.

    Built by :func:`parse_metric`; frozen.

    Parameters
    ----------
    name:
        The canonical name.
    family:
        The metric family in the registry (``"hit_rate"``, ``"map@R"``...).
    kind:
        ``"query"``, ``"pair"``, ``"grouped"``, ``"embedding"``, ``"crossmodal"`` or
        ``"classifier"``.
    k:
        The rank cut-off K, or None.
    level:
        The level P / Q or the threshold T, as a float, or None.
    exact:
        The level exactly as written (a :class:`fractions.Fraction`), or None.

    Raises
    ------
    None
        A plain frozen record; :func:`parse_metric` refuses bad names.

    Examples
    --------
    >>> import retrieval_checks as rc
    >>> spec = rc.parse_metric("MAP@R")
    >>> spec.name, spec.kind, spec.unit, spec.higher_is_better, (spec.low, spec.high)
    ('map@R', 'query', 'fraction', True, (0.0, 1.0))
    >>> rc.parse_metric("medr").higher_is_better
    False
    """

    name: str
    family: str
    kind: str
    k: int | None = None
    level: float | None = None
    #: the level P / Q exactly as written (a decimal fraction: 0.9 is 9/10); ``level`` is
    #: its nearest float, for display. Pair decisions use :attr:`level_fraction`.
    exact: Fraction | None = field(default=None, compare=False, repr=False)

    @property
    def level_fraction(self) -> Fraction | None:
        """The level as an exact fraction: ``exact``, else the shortest decimal that
        reads back as ``level`` (0.9 -> 9/10), never the float's binary value."""
        if self.exact is not None:
            return self.exact
        return None if self.level is None else Fraction(repr(float(self.level)))

    @property
    def capabilities(self) -> Family:
        return FAMILIES[self.family]

    @property
    def unit(self) -> str:
        """``"fraction"``, ``"rank"``, ``"ratio"``, ``"percentage points"`` or ``"percent"``."""
        return self.capabilities.unit

    @property
    def higher_is_better(self) -> bool:
        return self.capabilities.higher_is_better

    @property
    def low(self) -> float:
        """The smallest attainable value."""
        return self.capabilities.low

    @property
    def high(self) -> float:
        """The largest attainable value (``inf`` when unbounded)."""
        if self.family == "precision" and self.k is not None:
            return 1.0
        return self.capabilities.high


def _fmt(x: float) -> str:
    s = repr(float(x))
    return s[:-2] if s.endswith(".0") else s


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# what a suggestion puts in place of a placeholder the user copied from a template
# (``recall@K`` -> ``recall@10``): a suggestion is a name that parses
_EXAMPLES = {"K": "10", "P": "0.9", "Q": "0.9", "t=T": "t=0.5", "p": "0.8", "L": "0.5"}


def _concrete(template: str, param: str) -> str:
    """A template with the user's parameter where it fits (a level written in percent
    becomes a fraction: ``@90`` -> ``@0.9``, ``@90%`` too; a threshold without ``t=``
    gets it: ``pair_f1@0.5`` -> ``pair_f1@t=0.5``; a placeholder copied from the
    template becomes an example value: ``recall@K`` -> ``recall@10``), else the
    template itself."""
    base, _, t_param = template.partition("@")
    param = param.strip().replace(" ", "")
    if t_param in _EXAMPLES and param.lower() == t_param.lower():
        return f"{base}@{_EXAMPLES[t_param]}"
    if t_param == "K" and param.isdigit() and int(param) >= 1:
        return f"{base}@{int(param)}"
    if t_param in ("P", "Q"):
        percent = param.endswith("%")
        text = param[:-1] if percent else param
        if _is_float(text) and math.isfinite(float(text)):
            level = float(text)
            if percent or 1 < level <= 100:
                level = round(level / 100, 12)  # 0.9% -> 0.009, not 0.009000000000000001
            if 0 < level <= 1:
                return f"{base}@{_fmt(level)}"
    if t_param == "t=T":
        text = param[2:] if param.lower().startswith("t=") else param
        if _is_float(text) and math.isfinite(float(text)):
            return f"{base}@t={_fmt(float(text))}"
    return template


def _suggest(name: str) -> str | None:
    if len(name.strip().partition("@")[2]) > MAX_PARAM_CHARS:
        return None  # nothing sensible to suggest for a parameter of thousands of digits
    lowered = name.strip().lower()
    base, _, param = lowered.partition("@")
    base = base.strip()
    base = ALIASES.get(base, base)  # cmc@0 -> hit_rate@K, as cmc@5 means hit_rate@5
    param = name.strip().partition("@")[2]  # the user's own case: map@R, recall@K
    lowered = f"{base}@{param.lower()}" if "@" in lowered else base
    candidates = {_concrete(t, param) for t in METRIC_TEMPLATES}
    # a placeholder copied from a template (map@K, recall_at_precision@P): that template, made concrete
    placeholder = [
        _concrete(t, param)
        for t in METRIC_TEMPLATES
        if t.partition("@")[0] == base
        and t.partition("@")[2].lower() == param.strip().lower()
        and t.partition("@")[2] in _EXAMPLES
    ]
    found = placeholder[0] if placeholder else did_you_mean(lowered, candidates)
    if found is None:  # the base alone: 'recal' -> 'recall@K' with the user's K
        by_base = {c.partition("@")[0]: c for c in candidates}
        close = did_you_mean(base, by_base)
        found = by_base[close] if close is not None else None
    if found is not None and found.lower().replace(" ", "") in (
        lowered.replace(" ", ""),
        name.strip().lower().replace(" ", ""),
    ):
        return None  # never suggest what was rejected
    return found


def _fail(name: str, reason: str) -> MetricNameError:
    suggestion = _suggest(name)
    hint = f" Did you mean '{suggestion}'?" if suggestion else ""
    return MetricNameError(
        f"Unknown or malformed metric name {shown(name, 80)}: {reason if len(reason) <= 200 else reason[:197] + '...'}."
        f"{hint} "
        f"Known metrics: {', '.join(METRIC_TEMPLATES)} (K a positive integer, "
        f"P and Q in (0, 1], T a similarity threshold, p in (0, 1), L in [0, 1]).",
        name=name,
        suggestion=suggestion,
    )


_K_RE = re.compile(r"^\+?0*(\d+)$")


def _example_param(base: str) -> str:
    fam = FAMILIES.get(base)
    if fam is None or base in _TAKES_K:
        return "10"
    return _EXAMPLES.get(fam.param or "", "10") if fam.param != "T" else "t=0.5"


def _with_k(raw: str, base: str, param: str) -> MetricSpec:
    m = _K_RE.match(param)
    if not m or int(m.group(1)) < 1:
        raise _fail(raw, f"the cut-off K after '@' must be a positive integer, got {param!r}")
    k = int(m.group(1))
    return MetricSpec(f"{base}@{k}", base, FAMILIES[base].kind, k=k)


def _with_threshold(raw: str, base: str, param: str) -> MetricSpec:
    p = param.replace(" ", "")
    if not p.lower().startswith("t="):
        raise _fail(raw, f"pair metrics take a threshold written '@t=T', got '@{param}'")
    try:
        t = float(p[2:])
    except ValueError:
        raise _fail(raw, f"the threshold {p[2:]!r} is not a number") from None
    if not math.isfinite(t):
        raise _fail(raw, "the threshold must be finite")
    d = _decimal(p[2:])
    if (
        d is None
    ):  # a spelling float() reads and a decimal does not (1_0): the float is the threshold
        return MetricSpec(f"{base}@t={_fmt(t)}", base, "pair", level=t)
    places = _places(d)
    if places > MAX_THRESHOLD_PLACES:
        raise _fail(
            raw,
            f"the threshold has {places} decimal places; at most {MAX_THRESHOLD_PLACES} are read "
            "(thresholds are exact decimals, compared with float32 scores): round it",
        )
    exact = Fraction(d)
    name = _fmt(t) if Fraction(repr(t)) == exact else _decimal_text(exact)
    return MetricSpec(f"{base}@t={name}", base, "pair", level=t, exact=exact)


#: The most decimal places of a pair threshold T (float32 scores end near 1e-45).
MAX_THRESHOLD_PLACES = 60

_DECIMAL_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _decimal(text: str) -> Decimal | None:
    """``text`` as an exact, finite Decimal when it is written as a plain decimal number."""
    if not _DECIMAL_RE.match(text):
        return None
    try:
        d = Decimal(text)
    except InvalidOperation:  # pragma: no cover - the pattern admits only decimals
        return None
    return d if d.is_finite() else None


def _places(d: Decimal) -> int:
    """Decimal places of ``d`` once trailing zeros are dropped (no context: exact)."""
    _, digits, exponent = d.as_tuple()
    mantissa = "".join(map(str, digits))
    return max(-(exponent + len(mantissa) - len(mantissa.rstrip("0"))), 0)


def _with_level(raw: str, base: str, param: str) -> MetricSpec:
    """A level P / Q, read exactly: ``0.9`` is 9/10 (the float 0.9 is a little more,
    and a pair precision of exactly 9/10 must reach it). The canonical name keeps the
    float's shortest spelling where it is the same number, else the exact decimal."""
    text = param.replace(" ", "")
    exact = None
    d = _decimal(text)
    if d is not None and 0 < d <= 1:
        places = _places(d)
        if places > MAX_LEVEL_PLACES:
            raise _fail(
                raw,
                f"the level after '@' has {places} decimal places; at most {MAX_LEVEL_PLACES} are "
                f"read (levels are exact decimal fractions): round it to {MAX_LEVEL_PLACES} places or "
                "fewer",
            )
        exact = Fraction(d)
    if exact is None:
        try:
            level = float(text)
        except ValueError:
            raise _fail(
                raw, f"the level after '@' must be a number in (0, 1], got {param!r}"
            ) from None
        meant = f" (a fraction: {_fmt(level / 100)} for {param}%)" if 1 < level <= 100 else ""
        raise _fail(raw, f"the level after '@' must be in (0, 1], got {param}{meant}")
    level = float(exact)
    shortest = _fmt(level)
    name = shortest if Fraction(repr(level)) == exact else _decimal_text(exact)
    return MetricSpec(f"{base}@{name}", base, "pair", level=level, exact=exact)


def _with_fraction(raw: str, base: str, param: str) -> MetricSpec:
    """rbp's persistence p in (0, 1), a recall level L in [0, 1]: exact decimals, named by
    their shortest spelling (``rbp@0.80`` is ``rbp@0.8``)."""
    zero_ok, one_ok = _FRACTION_PARAM[base]
    what = "a recall level in [0, 1]" if zero_ok else "a persistence p strictly between 0 and 1"
    d = _decimal(param.replace(" ", ""))
    if d is None or not ((0 < d or (zero_ok and d == 0)) and (d < 1 or (one_ok and d == 1))):
        raise _fail(raw, f"'{base}' takes {what} after '@' (e.g. {base}@0.8), got {param!r}")
    if _places(d) > MAX_LEVEL_PLACES:
        raise _fail(raw, f"the parameter has more than {MAX_LEVEL_PLACES} decimal places: round it")
    exact = Fraction(d)
    level = float(exact)
    name = _fmt(level) if Fraction(repr(level)) == exact else _decimal_text(exact)
    return MetricSpec(f"{base}@{name}", base, FAMILIES[base].kind, level=level, exact=exact)


def _decimal_text(x: Fraction) -> str:
    """The decimal spelling of a fraction whose denominator divides a power of ten."""
    sign, x = ("-" if x < 0 else ""), abs(x)
    places = 0
    while (x * 10**places).denominator != 1:
        places += 1
    digits = str((x * 10**places).numerator).rjust(places + 1, "0")
    return sign + (f"{digits[:-places]}.{digits[-places:]}" if places else digits)


def parse_metric(name: str) -> MetricSpec:
    """Parse a metric name or alias into a :class:`MetricSpec` with its canonical name.

    Raises :class:`~retrieval_checks.errors.MetricNameError` with the closest
    canonical name for anything unknown or malformed. Classifier metrics are read by
    :func:`metric_spec`.

    Parameters
    ----------
    name:
        A canonical name (``map@R``), an alias (``MAP@R``, ``cmc@5``) or trec_eval's
        spelling (``P_10``, ``ndcg_cut_10``).

    Returns
    -------
    MetricSpec
        The canonical name, family, kind and parameters (K, level).

    Raises
    ------
    MetricNameError
        A name that is not a string, empty, unknown or malformed (``suggestion``: the
        closest canonical name), or BEIR's ``MAP@K`` (here ``map_cut@K``).

    Examples
    --------
    >>> import retrieval_checks as rc
    >>> rc.parse_metric("cmc@5")
    MetricSpec(name='hit_rate@5', family='hit_rate', kind='query', k=5, level=None)
    >>> spec = rc.parse_metric("recall_at_precision@0.9")
    >>> spec.kind, spec.level_fraction, spec.unit
    ('pair', Fraction(9, 10), 'fraction')
    >>> rc.parse_metric("hitrate@1")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    retrieval_checks.errors.MetricNameError: Unknown or malformed metric name 'hitrate@1': no such metric. Did you mean 'hit_rate@1'? ...
    """
    if not isinstance(name, str):
        raise MetricNameError(
            f"Metric names are strings, got {type(name).__name__}: {name!r}.", name=str(name)
        )
    raw = name
    text = name.strip()
    if not text:
        raise _fail(raw, "the name is empty")
    text = WHOLE_ALIASES.get(text.lower(), text)
    if re.fullmatch(r"MAP@\s*0*[1-9][0-9]{0,17}", text):  # BEIR's spelling of another measure
        k = int(text.partition("@")[2])
        raise MetricNameError(
            f"{raw!r} is BEIR's (and ranx's map@K) mean of AP cut at K and divided by R: here "
            f"that is map_cut@{k}. This library's map@{k} divides by the relevant items found in "
            f"the top {k} (torchmetrics' AP at K). Write map_cut@{k} or map@{k}.",
            name=raw,
            suggestion=f"map_cut@{k}",
        )
    trec = _TREC_CUT.fullmatch(text)
    if trec:  # trec_eval's P_10, ndcg_cut_10, iprec_at_recall_0.50; pytrec_eval's P.10
        text = f"{_TREC_BASE[trec[1].lower()]}@{trec[2]}"
    base, at, param = text.partition("@")
    base = base.strip().lower().replace("-", "_") if base.lower() not in ALIASES else base.lower()
    base = ALIASES.get(base, base)
    param = param.strip()
    if len(param) > MAX_PARAM_CHARS:
        raise MetricNameError(
            f"Metric name {shown(raw, 80)}: the parameter after '@' has {len(param)} characters; at most "
            f"{MAX_PARAM_CHARS} are read. Write a short cut-off, level or threshold, e.g. "
            f"{base if base in FAMILIES else 'recall'}@{_example_param(base)}.",
            name=raw,
        )
    if base in _ELSEWHERE:
        raise MetricNameError(
            f"{raw!r} is not computed by evaluate(): {_ELSEWHERE[base]}.", name=raw
        )
    fam = FAMILIES.get(base)
    if fam is None or fam.kind == "classifier":
        raise _fail(raw, "no such metric")
    if not at:
        if fam.param is not None or fam.name == "map@R":
            raise _fail(raw, f"'{base}' needs a parameter after '@'")
        return MetricSpec(base, base, fam.kind)
    if base == "map" and param in ("R", "r"):
        return MetricSpec("map@R", "map@R", "query")
    if base in _TAKES_K:
        return _with_k(raw, base, param)
    if base in _FRACTION_PARAM:
        return _with_fraction(raw, base, param)
    if fam.param == "T":
        return _with_threshold(raw, base, param)
    if fam.param in ("P", "Q"):
        return _with_level(raw, base, param)
    raise _fail(raw, f"'{base}' takes no parameter")


def classifier_metric(name: str) -> MetricSpec:
    """The spec of a classifier metric (``CLASSIFIER_METRICS``); an error suggests the closest."""
    text = str(name).strip().lower().replace("-", "_")
    if text in CLASSIFIER_METRICS:
        return MetricSpec(text, text, "classifier")
    close = did_you_mean(text, CLASSIFIER_METRICS)
    hint = f" Did you mean '{close}'?" if close else ""
    raise MetricNameError(
        f"Unknown classifier metric {name!r}.{hint} Classifier metrics: "
        f"{', '.join(CLASSIFIER_METRICS)}.",
        name=str(name),
        suggestion=close,
    )


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
        close = did_you_mean(text, CLASSIFIER_METRICS) if text else None
        if exc.suggestion is not None or not close:
            raise
        raise MetricNameError(
            f"unknown metric {name!r}. Did you mean '{close}'? Classifier metrics (images "
            f"datasets): {', '.join(CLASSIFIER_METRICS)}.",
            name=name,
            suggestion=close,
        ) from None


def canonical_metric_name(name: str) -> str:
    """The canonical spelling of a metric name or alias (``"cmc@5"`` -> ``"hit_rate@5"``).

    Parameters
    ----------
    name:
        A metric name or alias (see :func:`parse_metric`).

    Returns
    -------
    str
        The canonical name.

    Raises
    ------
    MetricNameError
        An unknown or malformed name, with the closest canonical one.

    Examples
    --------
    >>> import retrieval_checks as rc
    >>> [rc.canonical_metric_name(n) for n in ("cmc@5", "P_10", "ndcg_cut_10", "MAP@R")]
    ['hit_rate@5', 'precision@10', 'ndcg@10', 'map@R']
    >>> try:
    ...     rc.canonical_metric_name("MAP@10")  # BEIR's MAP@10 is another measure here
    ... except rc.MetricNameError as err:
    ...     print(err.suggestion)
    map_cut@10
    """
    return parse_metric(name).name


def naming_note(spec: MetricSpec, *, class_labels: bool) -> str:
    """A line for messages about ``recall@K`` measured with class labels, the metric
    learning setting, where papers' "Recall@K" is another quantity: ``hit_rate@K``
    (METRICS.md). Empty for every other metric, and with explicit relevance."""
    if spec.family != "recall" or not class_labels:
        return ""
    k = spec.k
    return (
        f"naming: {spec.name} is retrieval recall (items of the query's class in the top {k} / all items of its "
        f"class); metric learning's \"Recall@{k}\" (an item of the query's class in the top {k}: CMC, top-{k} "
        f"accuracy) is hit_rate@{k}"
    )


def image_text_analogue(spec: MetricSpec) -> str:
    """The image-text metrics that measure what ``spec`` (a retrieval metric) does, for
    the message of a retrieval metric asked of image-text data (a suite's image_text
    dataset, a gate on an image-text result)."""
    k = spec.k if spec.k is not None else 1
    if spec.family in ("hit_rate", "recall"):
        return (
            f" On image-text data, {spec.name} is i2t_recall@{k} (image queries ranking the captions) "
            f"or t2i_recall@{k} (caption queries ranking the images); rsum adds both directions at "
            "K = 1, 5 and 10."
        )
    if spec.family in ("medr", "meanr"):
        return f" On image-text data: i2t_{spec.family} (image queries) or t2i_{spec.family} (caption queries)."
    return (
        " Image-text metrics: i2t_recall@K, t2i_recall@K, rsum, mean_recall, i2t_medr, t2i_medr, "
        "i2t_meanr, t2i_meanr."
    )
