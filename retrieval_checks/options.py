"""Evaluation options: one table of what each option accepts and its default.

The engine (:func:`retrieval_checks.evaluate` and its siblings), the YAML suite schema
and the pytest plugin all validate options against :data:`OPTIONS`, so an option means
the same thing and fails the same way wherever it is written: a keyword argument, a
suite's ``options:`` or a check's field, or a ``--rc-...`` flag.

>>> OPTIONS["ties"].check("optimistic")
'optimistic'
>>> OPTIONS["confidence"].problem(95)
'expected a number strictly between 0 and 1 (e.g. 0.95), found 95 (did you mean 0.95?).'
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, field
from typing import Any

from ._suggest import hint, shown
from .errors import InputError

__all__ = [
    "Option",
    "OPTIONS",
    "DEFAULTS",
    "check_option",
    "check_embedding_ties",
    "parse_text",
    "parse_memory",
    "positive_int",
    "DATASET_TYPES",
    "MIN_RESAMPLES",
]

#: The kinds of dataset a suite declares; each option applies to some of them.
DATASET_TYPES = ("retrieval", "image_text", "images", "run", "ann")

_DEVICE = re.compile(r"^(auto|cpu|torch-cpu|numpy|cuda(:[0-9]+)?)$")


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def positive_int(value, name: str, fix: str = "") -> int:
    """``value`` as an int when it is a whole number >= 1 (a bool is not); else an
    InputError naming ``name`` (``fix``: what the number means, shown in brackets)."""
    if not _is_int(value) or value < 1:
        raise InputError(
            f"{name}={shown(value)}: expected an integer >= 1{f' ({fix})' if fix else ''}."
        )
    return int(value)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _finite(value) -> bool:
    """A real number that is finite as a float (an int too large for a float is not)."""
    if not _is_real(value):
        return False
    try:
        return math.isfinite(float(value))
    except (OverflowError, ValueError):
        return False


@dataclass(frozen=True)
class Option:
    """One option: its kind, bounds or choices, default and where it applies.

    ``kind``: ``choice`` (one of ``choices``), ``number`` (a finite real within the
    bounds), ``integer`` (an int within the bounds), ``device`` or ``memory`` (checked
    by the engine's parsers; only their type here). ``applies_to``: the dataset types
    (:data:`DATASET_TYPES`) a suite may set it for; empty for session-level options.
    ``value_applies_to``: a value that only some of those types take, with them (``ties:
    docid``, trec_eval's order of document ids, belongs to runs): the one home of that
    rule, which :func:`check_embedding_ties`, the suite loader and the JSON schema read.
    ``zero_or_least``: (least, why) for an integer that is 0 or at least ``least``.
    """

    name: str
    kind: str
    default: Any
    expected: str
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    applies_to: tuple = ()
    help: str = ""
    aliases: dict = field(default_factory=dict)
    optional: bool = False  # None is a valid value (e.g. "no limit")
    value_applies_to: dict = field(default_factory=dict)
    #: an ``integer`` that is 0 or at least this (``n_resamples``: 0 is no interval, a
    #: handful of resamples is no interval either), with the reason, or None
    zero_or_least: tuple | None = None

    def takes(self, value, dataset_types) -> bool:
        """Whether a dataset of one of ``dataset_types`` takes ``value`` of this option
        (``value_applies_to``; every valid value otherwise)."""
        only = self.value_applies_to.get(value) if isinstance(value, str) else None
        return only is None or any(t in only for t in dataset_types)

    def problem(self, value) -> str | None:
        """What is wrong with ``value`` (a sentence naming what was expected), or None."""
        found = f"found {shown(value)}"
        if value is None and self.optional:
            return None
        if self.kind == "skipped":
            return _skipped(value)
        if self.kind == "choice":
            if isinstance(value, str) and value in self.choices:
                return None
            return f"expected {self.expected}, {found}.{hint(value, self.choices)}"
        if self.kind == "device":
            if isinstance(value, str) and _DEVICE.match(value.strip()):
                return None
            return f"expected {self.expected}, {found}."
        if self.kind == "memory":
            return _memory(value)[1]
        if self.kind == "integer":
            if not _is_int(value):
                return f"expected {self.expected}, {found}."
        elif not _finite(value):
            return f"expected {self.expected}, {found}."
        v = float(value) if _finite(value) else (math.inf if value > 0 else -math.inf)  # a huge int
        below = self.low is not None and (v < self.low or (self.open_low and v == self.low))
        above = self.high is not None and (v > self.high or (self.open_high and v == self.high))
        if below or above:
            meant = ""
            if self.name == "confidence" and 50 <= v < 100:  # written in percent
                meant = f" (did you mean {v / 100:g}?)"
            return f"expected {self.expected}, {found}{meant}."
        if self.zero_or_least is not None and 0 < v < self.zero_or_least[0]:
            return f"expected {self.expected}, {found}: {self.zero_or_least[1]}"
        return None

    def check(self, value, *, name: str | None = None):
        """``value`` when valid; else :class:`~retrieval_checks.InputError` naming the
        option (as ``name``, e.g. ``group_seed`` for the ``seed`` option) and what is
        expected."""
        problem = self.problem(value)
        if problem is not None:
            raise InputError(f"{name or self.name}={shown(value)}: {problem}")
        return value


def _skipped(value) -> str | None:
    """``max_skipped``: a count (an int >= 0) or a fraction of the queries (a float in [0, 1))."""
    expected = (
        "a count of queries (an int >= 0) or a fraction of them (a float in [0, 1), e.g. 0.05)"
    )
    if _is_int(value):
        return None if value >= 0 else f"expected {expected}, found {shown(value)}."
    if _finite(value) and 0.0 <= float(value) < 1.0:
        return None
    meant = ""
    if _finite(value) and float(value) == int(value) and value >= 0:
        meant = f" (write {int(value)} for a count)"
    elif _finite(value) and 1 < value <= 100:
        meant = f" (did you mean {float(value) / 100:g}, i.e. {float(value):g}%?)"
    return f"expected {expected}, found {shown(value)}{meant}."


def _choice(name, choices, default, help_text, applies_to=(), value_applies_to=None):
    return Option(
        name,
        "choice",
        default,
        "one of " + ", ".join(choices),
        choices=tuple(choices),
        applies_to=applies_to,
        help=help_text,
        value_applies_to=dict(value_applies_to or {}),
    )


_RET, _IT, _IMG, _RUN, _ANN = DATASET_TYPES

#: The fewest bootstrap resamples an interval takes (``n_resamples`` of the option
#: table, and every statistics function): fewer leave the tail quantiles of a 95%
#: interval to one or two draws.
MIN_RESAMPLES = 100

#: The dataset types whose evaluation ranks embeddings (what a model is evaluated on).
EMBEDDING_TYPES = (_RET, _IT)

#: Every evaluation option, by the name suites and the plugin use.
OPTIONS: dict[str, Option] = {
    o.name: o
    for o in (
        _choice(
            "similarity",
            ("cosine", "dot", "neg_l2", "hamming"),
            "cosine",
            "similarity of two embeddings (hamming: binary codes); pair thresholds are in its units "
            "(neg_l2: minus the distance; hamming: a distance in bits)",
            (_RET, _IT, _ANN),
        ),
        _choice(
            "ties",
            ("pessimistic", "optimistic", "average", "docid"),
            "pessimistic",
            "where a relevant item ranks among non-relevant items with an equal score: after them, before "
            "them, the exact mean over every order of the tie, or (runs only) trec_eval's order: "
            "document id, descending",
            (_RET, _IT, _RUN),
            {"docid": (_RUN,)},  # trec_eval's order of document ids: only runs have them
        ),
        _choice(
            "empty_queries",
            ("skip", "error", "zero"),
            "skip",
            "queries without a relevant gallery item: skip (counted), error, or score zero",
            (_RET, _RUN),
        ),
        Option(
            "confidence",
            "number",
            0.95,
            "a number strictly between 0 and 1 (e.g. 0.95)",
            low=0.0,
            high=1.0,
            open_low=True,
            open_high=True,
            applies_to=DATASET_TYPES,
            help="confidence of every interval",
        ),
        Option(
            "seed",
            "integer",
            0,
            "an integer >= 0",
            low=0,
            applies_to=DATASET_TYPES,
            help="seed of label partitions and bootstrap resamples",
        ),
        Option(
            "group_size",
            "integer",
            10,
            "an integer >= 2 (labels per group)",
            low=2,
            applies_to=(_RET,),
            help="labels per group of grouped_recall@K (S)",
        ),
        Option(
            "group_repeats",
            "integer",
            1,
            "an integer >= 1",
            low=1,
            applies_to=(_RET,),
            help="label partitions averaged by grouped_recall@K",
        ),
        Option(
            "n_resamples",
            "integer",
            1000,
            f"an integer in [0, 1000000] (bootstrap resamples; 0: no interval, else at least {MIN_RESAMPLES})",
            low=0,
            high=1_000_000,
            applies_to=(_IT, _IMG),
            help="bootstrap resamples of image-text and CAM intervals (0: no interval; at least "
            f"{MIN_RESAMPLES} otherwise)",
            zero_or_least=(
                MIN_RESAMPLES,
                "a bootstrap of a handful of resamples is no interval (its bounds are a few "
                "draws: the lower one can lie above the value, and an on: interval gate then "
                f"passes where the value fails); use at least {MIN_RESAMPLES} (the default, "
                "1000, for 95% intervals), or 0 for no interval.",
            ),
        ),
        Option(
            "rho",
            "number",
            0.1,
            "a number in [0, 1] (the CAM threshold)",
            low=0.0,
            high=1.0,
            applies_to=(_IMG,),
            help="threshold of the normalised CAM for cam_iou",
        ),
        _choice(
            "cam_method",
            ("gradcam", "gradcam++"),
            "gradcam",
            "class activation maps: Grad-CAM or Grad-CAM++",
            (_IMG,),
        ),
        Option(
            "percentile",
            "number",
            10.0,
            "a number in (0, 100) (the margin percentile of spectral_measure)",
            low=0.0,
            high=100.0,
            open_low=True,
            open_high=True,
            applies_to=(_IMG,),
            help="percentile of the training margins behind spectral_measure's gamma",
        ),
        Option(
            "max_skipped",
            "skipped",
            None,
            "a count of queries (an int >= 0) or a fraction of them (a float in [0, 1))",
            applies_to=(_RET, _RUN),
            optional=True,
            help="most queries a gate may skip (no relevant item) before it fails; default: no "
            "limit, a warning. The most specific setting wins, looser or stricter: a gate's own "
            "max_skipped= (a YAML check's field, else its suite's options:) over the session's",
        ),
        Option(
            "timeout",
            "number",
            None,
            "a number of seconds > 0",
            low=0.0,
            open_low=True,
            optional=True,
            applies_to=(_RET, _IT, _IMG, _ANN),
            help="seconds a model may take for one dataset before the check fails "
            "(default: no limit)",
        ),
        Option(
            "device",
            "device",
            "auto",
            "auto, cpu, torch-cpu, numpy, cuda or cuda:N",
            help="where similarities (and models) are computed",
        ),
        Option(
            "max_memory",
            "memory",
            None,
            "bytes, or a size such as '2GiB'",
            help="working-set budget of the engine (default: the library's)",
        ),
    )
}

#: The default of every option, in one place.
DEFAULTS: dict[str, Any] = {name: o.default for name, o in OPTIONS.items()}


def check_embedding_ties(value) -> str:
    """The ``ties`` option of an evaluation that ranks embeddings: ``"docid"`` (trec_eval's
    order of document ids) belongs to runs, whose documents have ids, and is refused."""
    ties = check_option("ties", value)
    if not OPTIONS["ties"].takes(ties, EMBEDDING_TYPES):
        raise InputError(
            "ties='docid' orders equal scores by document id as trec_eval does, which only "
            "evaluate_run (a run with document ids) has; an embedding evaluation takes "
            "'pessimistic', 'optimistic' or 'average'."
        )
    return ties


def check_option(name: str, value, *, argument: str | None = None):
    """Validate ``value`` for option ``name`` (see :data:`OPTIONS`); ``argument`` is
    the name the caller's user wrote (e.g. ``group_seed``)."""
    return OPTIONS[name].check(value, name=argument)


def parse_text(name: str, text: str):
    """An option's value from text (a command-line flag or an ini setting), validated:
    ``"0.9"`` -> 0.9 for numbers, ``"3"`` -> 3 for integers, bytes for ``max_memory``;
    an empty text is the default. Raises :class:`~retrieval_checks.InputError`."""
    opt = OPTIONS[name]
    text = text.strip() if isinstance(text, str) else text
    if text in ("", None) or (opt.optional and isinstance(text, str) and text.lower() == "none"):
        return opt.default
    value = text
    if opt.kind == "integer":
        try:
            value = int(text, 10)
        except ValueError:
            raise InputError(f"{name}={text!r}: expected {opt.expected}, found {text!r}.") from None
    elif opt.kind == "skipped":
        try:
            value = int(text, 10)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise InputError(
                    f"{name}={text!r}: expected {opt.expected}, found {text!r}."
                ) from None
    elif opt.kind == "number":
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{name}={text!r}: expected {opt.expected}, found {text!r}.") from None
    opt.check(value)
    return parse_memory(value) if opt.kind == "memory" else value


_UNITS = {
    "": 1,
    "b": 1,
    "k": 1e3,
    "kb": 1e3,
    "m": 1e6,
    "mb": 1e6,
    "g": 1e9,
    "gb": 1e9,
    "t": 1e12,
    "tb": 1e12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def _memory(value) -> tuple[int | None, str | None]:
    """(bytes, None) for a valid size, else (None, what is wrong)."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        return None, f"expected a number of bytes or a size such as '2GiB', found {shown(value)}."
    if isinstance(value, numbers.Real):
        if not _finite(value):
            return None, f"{shown(value)} is not a finite number of bytes."
        n = int(value)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(value))
        if not m or m.group(2).lower() not in _UNITS:
            return None, "not a size; write bytes as an int or a string such as '512MiB' or '2GB'."
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n < 2**20:
        return None, "below 1 MiB; give the engine at least a few MiB."
    return n, None


def parse_memory(value) -> int | None:
    """Bytes from an int or a string such as ``"512MiB"``, ``"2GB"``, ``"1.5 GiB"``
    (None stays None: the library's default budget)."""
    n, problem = _memory(value)
    if problem is not None:
        raise InputError(f"max_memory={shown(value)}: {problem}")
    return n
