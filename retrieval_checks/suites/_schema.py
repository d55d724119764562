"""YAML suites: datasets, models and checks, validated against a schema.

:func:`load_suite` reads one suite file (safe YAML) into a :class:`Suite`: its
datasets, its models and one :class:`Case` per (model, dataset, check). Every error
is a :class:`~retrieval_checks.errors.SuiteError` naming the file, the line and the
field, what was found and what is expected. Paths resolve relative to the suite file.
Nothing is loaded or computed here; :class:`~retrieval_checks.suites.SuiteRunner` runs the cases.

The format is documented in docs/suites.md, field by field in the generated reference
(docs site: Reference, "YAML suite fields").
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .._paths import missing_file
from .._suggest import hint as _hint
from .._suggest import shown
from ..data._beir import beir_files
from ..engine._runs import RUN_FAMILIES as _RUN_FAMILIES
from ..engine._runs import parse_run_metrics as _run_metrics
from ..errors import InputError, MetricNameError, SuiteError
from ..gates._family import check_correction
from ..gates._spec import GATE_FIELDS, GateSpec, fields_of
from ..metrics._names import MetricSpec, image_text_analogue, metric_spec
from ..metrics._thresholds import check_threshold
from ..models._hub import HUB_KINDS
from ..models._hub import SETTINGS as _HUB_SETTINGS
from ..options import DATASET_TYPES, EMBEDDING_TYPES, OPTIONS
from ._slices import (
    check_slices,
    check_unsliced,
    parse_dataset_slices,
    run_dataset_slices,
    slice_check_id,
)
from ._yaml import Node, NodeList, describe_value, join_field, load_yaml, short

__all__ = ["Suite", "Dataset", "Model", "Source", "Check", "Case", "load_suite"]

#: The implicit model of a suite without ``models``: the datasets' own embeddings.
PRECOMPUTED = "precomputed"

_PROTOCOLS = ("5k", "all", "1k", "5fold1k")
# evaluation options valid in `options:` and in each check: the shared table's options that
# apply to some dataset type (device and max_memory belong to the session)
_OPTIONS = {name: o for name, o in OPTIONS.items() if o.applies_to}
# options of the gate and of running the model, not of the evaluation: they never split one
# engine pass into several (a check with max_skipped shares the evaluation of one without)
_GATE_OPTIONS = ("max_skipped", "timeout")
#: Evaluation options a model entry may set for itself (a TF-IDF model scored by dot
#: products beside a normalised encoder scored by cosine; a model whose scores tie): they
#: override the suite's ``options``, and a check's own field overrides them. The others
#: (confidence, seed, group_size, ...) are the measurement's protocol, the same for every
#: model so that models compare.
MODEL_OPTIONS = ("similarity", "ties")
# markers whose conditions pytest evaluates as Python source when given as strings
_CONDITION_MARKERS = ("skipif", "xfail")
_PART_NAMES = {
    "retrieval": ("queries", "gallery"),
    "image_text": ("images", "captions"),
    "images": ("images",),
    "run": (),
    "ann": ("queries", "gallery"),
    "beir": (),
}
#: Every dataset type of a suite: the option table's, and beir (texts of a BEIR directory).
DATASET_KINDS = (*DATASET_TYPES, "beir")
# beir datasets are text retrieval with graded qrels: the options of ranking metrics on embeddings
_BEIR_OPTIONS = (
    "similarity",
    "ties",
    "empty_queries",
    "confidence",
    "seed",
    "max_skipped",
    "timeout",
)
_SOURCE_KEYS = ("file", "embeddings", "inputs", "labels", "ids", "image", "boxes", "masks")
#: The model name of the items of checks on run datasets (a run is a search's output: no model).
RUN_MODEL = "run"
_RUNNERS = ("embeddings", "callable", "torchscript", "exported", "factory", *HUB_KINDS)
#: The model kinds that embed texts (beir datasets' queries and documents).
TEXT_KINDS = ("callable", *(k for k, modalities in HUB_KINDS.items() if "text" in modalities))
_HUB_KEYS = tuple(
    dict.fromkeys(
        k for kind in HUB_KINDS for k in (*_HUB_SETTINGS[kind], "checkpoint") if k != "model_name"
    )
)


#: Options that apply to image_text datasets beyond the shared table's: ``max_skipped``
#: limits the images dropped for having no caption (``images_without_captions: drop``),
#: which the gates report as skipped image queries (900 of 1000 dropped passed a suite
#: whose options said max_skipped: 0).
_IMAGE_TEXT_OPTIONS = ("max_skipped",)


def applies(option: str, kind: str) -> bool:
    """Whether the evaluation option ``option`` applies to datasets of type ``kind``."""
    if kind == "beir":
        return option in _BEIR_OPTIONS
    if kind == "image_text" and option in _IMAGE_TEXT_OPTIONS:
        return True
    return kind in _OPTIONS[option].applies_to


def _applies_to(option: str) -> tuple:
    return (
        *_OPTIONS[option].applies_to,
        *(("beir",) if option in _BEIR_OPTIONS else ()),
        *(("image_text",) if option in _IMAGE_TEXT_OPTIONS else ()),
    )


@dataclass(frozen=True)
class Source:
    """One file of arrays and the keys to read from it (``image``: captions' image index)."""

    file: Path
    embeddings: str = "embeddings"
    inputs: str = "inputs"
    labels: str = "labels"
    ids: str = "ids"
    image: str = "image"
    boxes: str = "boxes"
    masks: str = "masks"
    neighbors: str = "neighbors"
    line: int | None = None


@dataclass(frozen=True)
class Dataset:
    """``type`` retrieval (parts ``queries`` [+ ``gallery``]), image_text (parts
    ``images`` + ``captions``), images (part ``images``: classifier inputs with
    labels and boxes or masks), run (a TREC ``run`` file and its ``qrels``: no parts,
    no model), ann (parts ``queries`` [+ ``gallery``] and an index's ``neighbors``) or
    beir (a BEIR directory ``path`` and its qrels ``split``: texts for a text model)."""

    name: str
    type: str
    parts: dict
    protocol: str = "5k"
    images_without_captions: str = "error"
    run: Path | None = None
    qrels: Path | None = None
    relevance_level: int = 1
    depth: int | None = None
    neighbors: Source | None = None
    k: int = 10
    path: Path | None = None
    split: str = "test"
    ignore_identical_ids: bool = False
    queries: str = "both"  # type run: evaluate_run's query set
    slices: tuple = ()  # SliceColumn dimensions (suites/_slices.py)
    #: image_text: SliceColumn dimensions of the captions' file (per-caption metadata)
    caption_slices: tuple = ()
    line: int | None = None

    @property
    def leave_one_out(self) -> bool:
        return self.type == "retrieval" and "gallery" not in self.parts


@dataclass(frozen=True)
class Model:
    """How embeddings are obtained: ``kind`` is ``precomputed`` (the datasets' own
    embeddings), ``embeddings`` (files per dataset), ``callable`` (``module:function``),
    ``torchscript`` (a TorchScript file), ``factory`` (``module:function`` returning a
    torch module, plus an optional ``weights`` file read with ``weights_only=True``), or a
    library's model from local files (``sentence_transformers``, ``huggingface``,
    ``open_clip``, ``timm``: ``path`` the directory or checkpoint, ``settings`` the kind's
    options, see :mod:`retrieval_checks.models._hub`)."""

    name: str
    kind: str
    files: dict = field(default_factory=dict)  # dataset -> {part: Source}
    target: str | None = None  # module:function
    path: Path | None = None  # torchscript file or weights file
    kwargs: dict = field(default_factory=dict)
    batch_size: int = 256
    device: str | None = None
    cam_layer: str | None = None
    timeout: float | None = (
        None  # seconds one embedding (or classifier) run may take; None: the session's
    )
    options: dict = field(default_factory=dict)  # MODEL_OPTIONS: the model's own similarity, ties
    base_dir: Path | None = None
    settings: dict = field(
        default_factory=dict
    )  # library kinds: prompts, pooling, max_length, model_name...
    line: int | None = None


@dataclass(frozen=True)
class Check:
    """One entry of ``checks``: a metric, where to measure it and the rule."""

    index: int
    metric: MetricSpec
    kind: str  # threshold | gap | compare | baseline
    datasets: tuple
    models: tuple
    at_least: float | None = None
    at_most: float | None = None
    on: str = "value"
    below: float | None = None
    baseline: str | None = None
    rule: str = "significant"
    margin: float = 0.0
    tolerances: dict = field(
        default_factory=dict
    )  # baseline: max_drop, max_relative_drop, direction, significant
    options: dict = field(default_factory=dict)
    markers: tuple = ()
    id: str = ""
    line: int | None = None
    slices: Any = None  # "all", "worst" or slice names (suites/_slices.py)
    #: beside slices: all / worst: "fail" (default) or "ignore" the queries without a slice value
    unsliced: str = "fail"
    #: every gate field the check wrote (the table's rows: retrieval_checks.gates._spec),
    #: by name, besides the evaluation options; a row without an attribute above lives only here
    gate: dict = field(default_factory=dict)

    def gate_kwargs(self, gate: str) -> dict:
        """The fields this check wrote that the Python gate ``gate`` takes as keywords
        (``assert_metric``: at_least, at_most, on; ``assert_not_worse``: rule, margin;
        ...), read from the gate-field table, so a new row reaches its gate unchanged.
        Fields shared with the evaluation options (max_skipped, confidence) are not
        among them: the runner resolves them with the suite's and session's options."""
        rows = {g.name: g for g in fields_of(check=self.kind) if not g.shared}
        return {k: v for k, v in self.gate.items() if k in rows and gate in rows[k].python}


@dataclass(frozen=True)
class Case:
    """One test item: a check applied to one model (and one dataset, or a train/test
    pair for a gap)."""

    check: Check
    model: str
    datasets: tuple
    id: str

    @property
    def name(self) -> str:
        return f"{self.check.id}[{'-'.join((self.model, *self.datasets))}]"


@dataclass
class Suite:
    """A loaded, validated YAML suite (:func:`~retrieval_checks.load_suite`): its
    datasets, models and checks, and the test items they make (:attr:`cases`).

    Parameters
    ----------
    name:
        The suite's ``suite:`` name, else the file's stem.
    path:
        The suite file.
    datasets, models:
        ``{name: Dataset}`` and ``{name: Model}`` as declared (without ``models:``,
        one ``precomputed`` model: the datasets' own embeddings).
    checks:
        The checks, in file order.
    markers:
        The pytest markers of every item.
    options:
        The suite's evaluation options.
    correction:
        The suite's ``correction:`` (holm, bh, none) of its significance-gated
        checks; None: the session's (``--rc-correction``).

    Raises
    ------
    None
        A plain record; :func:`~retrieval_checks.load_suite` validates the file.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> import retrieval_checks as rc
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = pathlib.Path(tmp.name)
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> np.savez(folder / "test.npz", embeddings=x, labels=np.array([0, 0, 1, 1]))
    >>> _ = (folder / "rc_demo.yaml").write_text('''
    ... datasets:
    ...   test: {queries: test.npz}
    ... checks:
    ...   - {metric: map, dataset: test, at_least: 0.7}
    ...   - {metric: hit_rate@1, dataset: test, at_least: 0.9}
    ... ''')
    >>> suite = rc.load_suite(folder / "rc_demo.yaml")
    >>> list(suite.datasets), list(suite.models), [c.metric.name for c in suite.checks]
    (['test'], ['precomputed'], ['map', 'hit_rate@1'])
    >>> tmp.cleanup()
    """

    name: str
    path: Path
    datasets: dict
    models: dict
    checks: list
    markers: tuple
    options: dict
    #: the suite's ``correction:`` (holm, bh, none) of its significance-gated checks; None:
    #: the session's (--rc-correction)
    correction: str | None = None

    @property
    def cases(self) -> list[Case]:
        out = []
        for check in self.checks:
            models = [m for m in check.models if m != check.baseline]
            sets = [check.datasets] if check.kind == "gap" else [(d,) for d in check.datasets]
            for m in models:
                for ds in sets:
                    out.append(Case(check, m, ds, check.id))
        return out

    def evaluation_options(
        self, check: Check, dataset: str, defaults: dict, model: str | None = None
    ) -> dict:
        """The evaluation options of ``check`` on ``dataset`` for ``model``: session
        defaults, then the suite's ``options``, then the model's own (``similarity``,
        ``ties``: :data:`MODEL_OPTIONS`), then the check's own fields (``max_skipped``
        and ``timeout`` are not evaluation options: see :meth:`gate_options`)."""
        m = self.models.get(model) if model is not None else None
        opts = {**defaults, **self.options, **(m.options if m is not None else {}), **check.options}
        kind = self.datasets[dataset].type
        return {
            k: v
            for k, v in opts.items()
            if k in _OPTIONS and k not in _GATE_OPTIONS and applies(k, kind)
        }

    def gate_options(self, check: Check, model: str, dataset: str, defaults: dict) -> dict:
        """``max_skipped`` and ``timeout`` of ``check`` on (model, dataset): the
        check's own field, else (timeout only) the model's ``timeout:``, else the
        suite's ``options``, else the session's defaults; None is no limit."""
        kind = self.datasets[dataset].type
        out = {}
        for k in _GATE_OPTIONS:
            value = defaults.get(k)
            if k in self.options:
                value = self.options[k]
            m = self.models.get(model)
            if k == "timeout" and m is not None and m.timeout is not None:
                value = m.timeout
            if k in check.options:
                value = check.options[k]
            out[k] = value if applies(k, kind) else None
        return out

    def metrics_for(self, model: str, dataset: str, options: dict, defaults: dict) -> list[str]:
        """Every metric any check measures on (model, dataset) with these options, so
        one engine pass serves them all."""
        names = []
        for check in self.checks:
            if (
                dataset not in check.datasets
                or self.evaluation_options(check, dataset, defaults, model) != options
            ):
                continue
            if model in check.models or model == check.baseline:
                if check.metric.name not in names:
                    names.append(check.metric.name)
        return names


class _Reader:
    """Validation helpers that know the file and build located errors."""

    def __init__(self, path: Path, collect: bool = False):
        self.path = path
        self.base = path.parent
        # validate's mode (suite_errors): every independent error is kept here and the
        # reading goes on with the next independent part; None: the first error is raised
        self.found: list[SuiteError] | None = [] if collect else None
        self.failed: set = set()  # names of the datasets and models that had an error
        # those names by kind: an error about an unknown name still lists them as declared
        self.left_out: dict[str, list] = {"dataset": [], "model": []}
        self.order: dict[str, list] = {"dataset": [], "model": []}

    def declared(self, what: str, names) -> dict:
        """``names`` (the valid datasets or models an error lists) with those left out for
        an error of their own, in the file's order."""
        left = set(self.left_out[what])
        if not left:
            return names
        return {k: None for k in self.order[what] if k in names or k in left} | dict(names)

    def error(self, message: str, field: str | None, line: int | None) -> SuiteError:
        return SuiteError(message, path=self.path, line=line, field=field)

    def part(self, read, *args, name=None):
        """``read(*args)``, one independent part of the suite (a dataset, a model, a check,
        an option...). Collecting, its error is kept, ``name`` is marked failed and
        :data:`_FAILED` is returned so that the caller leaves the part out; else it raises."""
        try:
            return read(*args)
        except SuiteError as exc:
            if self.found is None:
                raise
            self.keep(exc)
            if name is not None:
                self.failed.add(name)
            return _FAILED

    def mapping(self, value, field: str, line: int | None, what: str) -> Node:
        if not isinstance(value, dict):
            raise self.error(
                f"expected a mapping ({what}), found {describe_value(value)}.", field, line
            )
        return value

    def keep(self, exc: SuiteError) -> None:
        if not any(exc is e for e in self.found):
            self.found.append(exc)

    def keys(
        self, node: Node, field: str, allowed, required=(), go_on: bool = False, only=None
    ) -> None:
        """Unknown keys (of ``node``, or its key ``only``), each its own error (all of them
        are collected; the first is raised unless ``go_on``, where the rest of ``node`` does
        not depend on them), then the missing required ones."""
        unknown = []
        for key in node if only is None else (only,):
            if key not in allowed and key in OPTIONS and not OPTIONS[key].applies_to:
                unknown.append(
                    self.error(
                        f"{key} is an option of the session, not of a suite: set it with "
                        f"--rc-{key.replace('_', '-')} (or SuiteRunner({key}=...))"
                        + (", or a model's own device:" if key == "device" else "")
                        + ".",
                        join_field(field, key),
                        node.line_of(key),
                    )
                )
            elif key not in allowed:
                unknown.append(
                    self.error(
                        f"unknown field {short(key)}.{hint(key, allowed)} Expected one of: "
                        f"{', '.join(allowed)}.",
                        join_field(field, short(key, 40).strip("'")),
                        node.line_of(key),
                    )
                )
        if unknown:
            if self.found is None:
                raise unknown[0]
            self.found.extend(unknown)  # in file order; part() does not keep the raised one again
            if not go_on:
                raise unknown[0]
        for key in required:
            if key not in node:
                raise self.error(f"missing required field {key!r}.", field or None, node.line)

    def name(self, value, field: str, line) -> str:
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_.][A-Za-z0-9_.\-]*", value):
            raise self.error(
                f"names use letters, digits, '_', '-' and '.', found {describe_value(value)}.",
                field,
                line,
            )
        if len(value) > 100:  # names make test ids, table rows and history keys
            raise self.error(
                f"a name of {len(value)} characters; names have at most 100 ({short(value, 40)}).",
                field,
                line,
            )
        return value

    def integer(self, value, field: str, line, low: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.error(
                f"expected an integer >= {low}, found {describe_value(value)}.", field, line
            )
        return value

    def choice(self, value, allowed, field: str, line) -> str:
        if value not in allowed:
            raise self.error(
                f"expected one of {', '.join(allowed)}, found {describe_value(value)}.{hint(value, allowed)}",
                field,
                line,
            )
        return value

    def file(self, value, field: str, line) -> Path:
        if not isinstance(value, str) or not value.strip():
            raise self.error(
                f"expected a file path (relative to the suite file), found {describe_value(value)}.",
                field,
                line,
            )
        try:
            p = Path(value).expanduser()
            p = p if p.is_absolute() else self.base / p
            found = p.is_file()
        except (OSError, ValueError):  # a name too long, a NUL byte
            p, found = None, False
        if not found:
            looked = (
                f"looked for {short(str(p.absolute()), 200)}"
                if p is not None
                else "not a valid path"
            )
            kind = " " + missing_file(p) if p is not None else " does not exist"
            raise self.error(
                f"file {short(value)}{kind} ({looked}); paths are relative to the suite file.",
                field,
                line,
            )
        return p

    def directory(self, value, field: str, line) -> Path:
        """An existing directory, relative to the suite file."""
        if not isinstance(value, str) or not value.strip():
            raise self.error(
                f"expected a directory path (relative to the suite file), found {describe_value(value)}.",
                field,
                line,
            )
        try:
            p = Path(value).expanduser()
            p = p if p.is_absolute() else self.base / p
            found = p.is_dir()
            exists = p.exists()
        except (OSError, ValueError):
            p, found, exists = None, False, False
        if not found:
            state = "is not a directory" if exists else "does not exist"
            raise self.error(
                f"directory {short(value)} {state} (looked for {short(str(p.absolute()), 200)}); paths are "
                "relative to the suite file.",
                field,
                line,
            )
        return p

    def target(self, value, field: str, line) -> str:
        if not isinstance(value, str) or not re.fullmatch(
            r"[^:\s]+:[A-Za-z_][A-Za-z0-9_.]*", value
        ):
            raise self.error(
                "expected 'module:function' (a dotted module, or a .py file relative to the suite file, "
                f"then ':' and the function's name), found {describe_value(value)}.",
                field,
                line,
            )
        module = value.split(":", 1)[0]
        if module.endswith(".py"):
            self.file(module, field, line)
        return value

    def threshold(self, spec: MetricSpec, value, role: str, field: str, line) -> float:
        """A threshold, margin or tolerance of ``role``, checked against the metric's
        unit and attainable range (:func:`~retrieval_checks.metrics.check_threshold`):
        finite, on the right scale (``at_least: 70`` on a fraction: did you mean 0.7?)
        and able to fail."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"expected a number, found {describe_value(value)}.", field, line)
        key = field.rpartition(".")[2]
        try:
            return check_threshold(spec.capabilities, value, role=role, field=key, metric=spec.name)
        except InputError as exc:
            message = str(exc)
            if "Did you mean" not in message:
                message += (
                    f" Give {key} a value that a real model could fail, on {spec.name}'s scale."
                )
            raise self.error(message, field, line) from None

    def gate_field(self, g: GateSpec, kind: str, spec: MetricSpec, node, where: str):
        """The gate field ``g`` of a check of ``kind`` (in ``node``, a check or its
        ``compare:`` / ``baseline:`` mapping at ``where``), checked by its row of the
        gate-field table: a threshold on ``spec``'s scale, a choice, a flag or a value."""
        value, field, line = node[g.name], join_field(where, g.name), node.line_of(g.name)
        if g.kind == "threshold":
            return self.threshold(spec, value, g.role or g.name, field, line)
        if g.kind == "choice":
            return self.choice(value, g.choices_for(kind), field, line)
        if isinstance(value, (dict, list)):  # never render a tree into a message
            raise self.error(
                f"expected a single value, found {describe_value(value)}.", field, line
            )
        problem = g.problem(value, kind=kind)
        if problem is not None:
            raise self.error(
                problem.replace(f"found {shown(value)}", f"found {describe_value(value)}"),
                field,
                line,
            )
        return value

    def option(self, key: str, value, field: str, line):
        """An evaluation option, checked against the shared table (``retrieval_checks.options``)."""
        if isinstance(value, (dict, list)):  # never render a tree into a message
            raise self.error(
                f"expected {_OPTIONS[key].expected}, found {describe_value(value)}.", field, line
            )
        problem = _OPTIONS[key].problem(value)
        if problem is not None:
            raise self.error(
                problem.replace(f"found {value!r}", f"found {describe_value(value)}"), field, line
            )
        return value

    def markers(self, value, field: str, line) -> tuple:
        """``markers``: a list of names, or of one-key mappings ``{name: args}`` where
        args is a mapping (keyword arguments), a list (positional) or one value."""
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise self.error(
                f"expected a list of marker names, found {describe_value(value)}.", field, line
            )
        out = []
        for i, m in enumerate(value):
            where, mline = (
                f"{field}[{i}]",
                value.line_of(i) if isinstance(value, NodeList) else line,
            )
            if isinstance(m, str) and _marker_name(m):
                out.append((m, (), {}))
            elif isinstance(m, dict) and len(m) == 1 and _marker_name(next(iter(m))):
                name, args = next(iter(m.items()))
                if isinstance(args, dict):
                    bad = [k for k in args if not (isinstance(k, str) and k.isidentifier())]
                    if bad:
                        raise self.error(
                            f"marker {name!r}: keyword argument names must be identifiers, found "
                            f"{short(bad[0])}.",
                            where,
                            mline,
                        )
                    marker = (name, (), dict(args))
                elif isinstance(args, list):
                    marker = (name, tuple(args), {})
                else:
                    marker = (name, (args,), {})
                self.conditions(marker, args, where, mline)
                out.append(marker)
            else:
                raise self.error(
                    "a marker is a name (slow; not starting with '_') or a one-key mapping "
                    "({xfail: {reason: ...}}), "
                    f"found {describe_value(m)}.",
                    where,
                    mline,
                )
        return tuple(out)

    def conditions(self, marker: tuple, args, field: str, line) -> None:
        """No code from data: pytest evaluates a string condition of skipif and xfail
        as Python source (``skipif: "__import__('os').system(...)"``), so a suite's
        conditions must be true or false, and a boolean needs a reason (pytest's rule)."""
        name, positional, keywords = marker
        if (
            name == "filterwarnings"
        ):  # pytest imports a dotted category's module: code named by data
            for i, spec in enumerate(positional):
                at = f"{field}.{name}" + (f"[{i}]" if isinstance(args, list) else "")
                if not isinstance(spec, str):
                    raise self.error(
                        f"a warning filter is a text such as 'ignore::UserWarning', found "
                        f"{describe_value(spec)}.",
                        at,
                        line,
                    )
                category = spec.split(":")[2].strip() if spec.count(":") >= 2 else ""
                if "." in category:
                    raise self.error(
                        f"the warning category {short(category)} names a module that pytest would "
                        "import; suites never run code from data. Use a built-in category "
                        "(UserWarning, RuntimeWarning, ...) or set the filter in a conftest.py / "
                        "pytest.ini.",
                        at,
                        line,
                    )
            return
        if name not in _CONDITION_MARKERS:
            return
        allowed = ("condition", "reason") + (("run", "strict") if name == "xfail" else ())
        for k, v in keywords.items():
            if k == "raises" and name == "xfail":
                raise self.error(
                    "raises: needs a Python exception class, which a suite cannot name; drop it (any "
                    "failure then counts as the expected one) or write the check in Python.",
                    f"{field}.{name}.raises",
                    line,
                )
            if k not in allowed:
                raise self.error(
                    f"{name} takes {', '.join(allowed)}; found {short(k)}.{hint(k, allowed)}",
                    f"{field}.{name}.{k}",
                    line,
                )
            if k in ("run", "strict") and not isinstance(v, bool):
                raise self.error(
                    f"{k} is true or false, found {describe_value(v)}.", f"{field}.{name}.{k}", line
                )
        conds = (
            [(f"{field}.{name}.condition", keywords["condition"])]
            if "condition" in keywords
            else []
        )
        conds += [
            (f"{field}.{name}" + (f"[{i}]" if isinstance(args, list) else ""), c)
            for i, c in enumerate(positional)
        ]
        for at, c in conds:
            if isinstance(c, str):
                raise self.error(
                    f"a condition of {name} written as a string ({short(c)}) is Python source that pytest "
                    "would evaluate; suites never run code from data. Write true or false (with "
                    "reason: ...), or put the condition in a conftest.py / Python test.",
                    at,
                    line,
                )
            if not isinstance(c, bool):
                raise self.error(
                    f"a condition of {name} is true or false, found {describe_value(c)}.", at, line
                )
        if any(isinstance(c, bool) for _, c in conds) and not isinstance(
            keywords.get("reason"), str
        ):
            raise self.error(
                f"{name} with a true/false condition needs reason: (pytest refuses a boolean condition "
                f"without one), e.g. {{{name}: {{condition: true, reason: why}}}}.",
                f"{field}.{name}",
                line,
            )
        if "reason" in keywords and not isinstance(keywords["reason"], str):
            raise self.error(
                f"reason is a text, found {describe_value(keywords['reason'])}.",
                f"{field}.{name}.reason",
                line,
            )


def _marker_name(name) -> bool:
    return isinstance(name, str) and name.isidentifier() and not name.startswith("_")


def hint(value, allowed) -> str:
    """The closest name, for short texts only (a huge key is not compared against every name)."""
    return _hint(value, allowed) if isinstance(value, str) and len(value) <= 200 else ""


def _source(r: _Reader, value, field: str, line, allowed: tuple = _SOURCE_KEYS) -> Source:
    if isinstance(value, str):
        return Source(file=r.file(value, field, line), line=line)
    node = r.mapping(
        value, field, line, f"a file path, or {{{', '.join(k + ': ...' for k in allowed[:5])}}}"
    )
    r.keys(node, field, allowed, required=("file",))
    keys = {}
    for k in allowed[1:]:
        if k in node:
            if not isinstance(node[k], str):
                raise r.error(
                    f"expected the name of an array in the file, found {describe_value(node[k])}.",
                    join_field(field, k),
                    node.line_of(k),
                )
            keys[k] = node[k]
    return Source(
        file=r.file(node["file"], join_field(field, "file"), node.line_of("file")),
        line=node.line,
        **keys,
    )


def _dataset(r: _Reader, name: str, node, line) -> Dataset:
    field = f"datasets.{name}"
    node = r.mapping(node, field, line, "type, queries, gallery, ... or images, captions, ...")
    kind = r.choice(
        node.get("type", "retrieval"),
        DATASET_KINDS,
        join_field(field, "type"),
        node.line_of("type"),
    )
    if kind in _OWN_FIELDS:
        return _OWN_FIELDS[kind](r, name, node, line, field)
    parts_names = _PART_NAMES[kind]
    extra = ("protocol", "images_without_captions") if kind == "image_text" else ()
    extra += ("slices",) if kind == "retrieval" else ()
    extra += ("slices", "caption_slices") if kind == "image_text" else ()
    r.keys(
        node,
        field,
        ("type", *parts_names, *extra),
        required=parts_names if kind != "retrieval" else parts_names[:1],
    )
    parts = {
        p: _source(r, node[p], join_field(field, p), node.line_of(p))
        for p in parts_names
        if p in node
    }
    kw = {}
    if "protocol" in node:
        kw["protocol"] = r.choice(
            node["protocol"], _PROTOCOLS, join_field(field, "protocol"), node.line_of("protocol")
        )
    if "images_without_captions" in node:
        kw["images_without_captions"] = r.choice(
            node["images_without_captions"],
            ("error", "drop"),
            join_field(field, "images_without_captions"),
            node.line_of("images_without_captions"),
        )
    for key in ("slices", "caption_slices"):  # image_text: of the images' / captions' files
        if key in node:
            kw[key] = parse_dataset_slices(r, node[key], join_field(field, key), node.line_of(key))
    return Dataset(name=name, type=kind, parts=parts, line=line, **kw)


def _run_dataset(r: _Reader, name: str, node, line, field: str) -> Dataset:
    """``type: run``: a TREC ``run`` file and a TREC ``qrels`` file (paths relative to the
    suite), ``relevance_level`` (the least relevant grade) and ``depth`` (the top
    ``depth`` documents of each query; evaluate_run's ``k``)."""
    r.keys(
        node,
        field,
        (
            "type",
            "run",
            "qrels",
            "relevance_level",
            "depth",
            "queries",
            "ignore_identical_ids",
            "slices",
        ),
        required=("run", "qrels"),
    )
    kw = {k: r.file(node[k], join_field(field, k), node.line_of(k)) for k in ("run", "qrels")}
    if "slices" in node:  # a file of query ids and values per dimension (suites/_slices.py)
        kw["slices"] = run_dataset_slices(
            r, node["slices"], join_field(field, "slices"), node.line_of("slices")
        )
    for k, attr in (("relevance_level", "relevance_level"), ("depth", "depth")):
        if k in node:
            kw[attr] = r.integer(node[k], join_field(field, k), node.line_of(k), 1)
    if "queries" in node:  # evaluate_run's query set: trec_eval's default ("run") and -c ("qrels")
        if node["queries"] not in ("both", "run", "qrels"):
            raise r.error(
                f"expected one of 'both', 'run' (trec_eval's default), 'qrels' (trec_eval -c), "
                f"found {describe_value(node['queries'])}.",
                join_field(field, "queries"),
                node.line_of("queries"),
            )
        kw["queries"] = node["queries"]
    if "ignore_identical_ids" in node:
        if not isinstance(node["ignore_identical_ids"], bool):
            raise r.error(
                f"expected true or false, found {describe_value(node['ignore_identical_ids'])}.",
                join_field(field, "ignore_identical_ids"),
                node.line_of("ignore_identical_ids"),
            )
        kw["ignore_identical_ids"] = node["ignore_identical_ids"]
    return Dataset(name=name, type="run", parts={}, line=line, **kw)


def _ann_dataset(r: _Reader, name: str, node, line, field: str) -> Dataset:
    """``type: ann``: ``queries`` [+ ``gallery``] (embedded by the model as a retrieval
    dataset's; labels are not needed), the index's ``neighbors`` (a .npy file, or a file
    with a ``neighbors`` array: n_queries x >= k gallery indices, -1 missing) and ``k``."""
    r.keys(
        node,
        field,
        ("type", "queries", "gallery", "neighbors", "k", "slices"),
        required=("queries", "neighbors"),
    )
    kw = {}
    if "slices" in node:  # arrays of the queries' file, as a retrieval dataset's
        kw["slices"] = parse_dataset_slices(
            r, node["slices"], join_field(field, "slices"), node.line_of("slices")
        )
    parts = {
        p: _source(r, node[p], join_field(field, p), node.line_of(p))
        for p in ("queries", "gallery")
        if p in node
    }
    where = join_field(field, "neighbors")
    neighbors = _source(
        r, node["neighbors"], where, node.line_of("neighbors"), ("file", "neighbors")
    )
    k = r.integer(node["k"], join_field(field, "k"), node.line_of("k"), 1) if "k" in node else 10
    columns = _npy_columns(neighbors.file)
    if columns is not None and columns < k:
        at = ("k", node.line_of("k")) if "k" in node else ("neighbors", node.line_of("neighbors"))
        raise r.error(
            f"{neighbors.file.name} has {columns} neighbour columns, fewer than k={k}"
            f"{'' if 'k' in node else ' (the default)'}: search the index for at least k neighbours, or "
            f"set k: {columns} or less.",
            join_field(field, at[0]),
            at[1],
        )
    return Dataset(name=name, type="ann", parts=parts, neighbors=neighbors, k=k, line=line, **kw)


def _npy_columns(path: Path) -> int | None:
    """The columns of a 2-D .npy array, from its header only (None: not a readable 2-D .npy)."""
    if path.suffix.lower() != ".npy":
        return None
    try:
        shape = np.load(
            path, mmap_mode="r", allow_pickle=False
        ).shape  # maps the file: reads the header only
    except Exception:  # a damaged file is the reader's error, at run time
        return None
    return int(shape[1]) if len(shape) == 2 else None


def _beir_dataset(r: _Reader, name: str, node, line, field: str) -> Dataset:
    """``type: beir``: a BEIR directory ``path`` (corpus.jsonl, queries.jsonl,
    qrels/<split>.tsv; relative to the suite), ``split`` (default test) and
    ``relevance_level`` (the least grade the binary metrics count as relevant) and
    ``ignore_identical_ids`` (a document whose id is the query's is removed from that
    query's ranking and stays relevant, as BEIR's evaluation does by default). The files
    are read when a check runs; their errors name file:line."""
    r.keys(
        node,
        field,
        ("type", "path", "split", "relevance_level", "ignore_identical_ids", "slices"),
        required=("path",),
    )
    kw: dict[str, Any] = {}
    if "slices" in node:  # fields of each query's queries.jsonl object
        kw["slices"] = parse_dataset_slices(
            r, node["slices"], join_field(field, "slices"), node.line_of("slices")
        )
    if "ignore_identical_ids" in node:
        if not isinstance(node["ignore_identical_ids"], bool):
            raise r.error(
                f"expected true or false, found {describe_value(node['ignore_identical_ids'])}.",
                join_field(field, "ignore_identical_ids"),
                node.line_of("ignore_identical_ids"),
            )
        kw["ignore_identical_ids"] = node["ignore_identical_ids"]
    if "split" in node:
        split = node["split"]
        if (
            not isinstance(split, str)
            or not re.fullmatch(r"[A-Za-z0-9_.\-]+", split)
            or split in (".", "..")
        ):
            raise r.error(
                f"expected the name of a qrels split (test, dev, train), found {describe_value(split)}.",
                join_field(field, "split"),
                node.line_of("split"),
            )
        kw["split"] = split
    if "relevance_level" in node:
        kw["relevance_level"] = r.integer(
            node["relevance_level"],
            join_field(field, "relevance_level"),
            node.line_of("relevance_level"),
            1,
        )
    path = r.directory(node["path"], join_field(field, "path"), node.line_of("path"))
    try:
        beir_files(path, kw.get("split", "test"))
    except InputError as exc:
        at = "split" if "split" in node and "qrels" in str(exc) else "path"
        raise r.error(str(exc), join_field(field, at), node.line_of(at)) from None
    return Dataset(name=name, type="beir", parts={}, path=path, line=line, **kw)


_OWN_FIELDS = {"run": _run_dataset, "ann": _ann_dataset, "beir": _beir_dataset}


def _model(r: _Reader, name: str, node, line, datasets: dict) -> Model:
    field = f"models.{name}"
    node = r.mapping(node, field, line, f"one of {', '.join(_RUNNERS)}")
    r.keys(
        node,
        field,
        (
            *_RUNNERS,
            "weights",
            "kwargs",
            "batch_size",
            "device",
            "cam_layer",
            "timeout",
            *MODEL_OPTIONS,
            *_HUB_KEYS,
        ),
    )
    kinds = [k for k in _RUNNERS if k in node]
    if len(kinds) != 1:
        found = f"found {', '.join(kinds)}" if kinds else "found none"
        raise r.error(f"give exactly one of {', '.join(_RUNNERS)} ({found}).", field, node.line)
    kind = kinds[0]
    wrong = [k for k in _HUB_KEYS if k in node and kind not in _hub_owners(k)]
    if wrong:
        owners = _hub_owners(wrong[0])
        raise r.error(
            f"{wrong[0]} goes with {' or '.join(owners)} models, not {kind}.",
            join_field(field, wrong[0]),
            node.line_of(wrong[0]),
        )
    if "weights" in node and kind != "factory":
        raise r.error(
            "weights go with factory (a function that builds the torch module).",
            join_field(field, "weights"),
            node.line_of("weights"),
        )
    kw = _model_settings(r, node, field, kind, datasets)
    if kind == "embeddings":
        files = _embedding_files(r, node, field, datasets)
        return Model(name=name, kind=kind, files=files, base_dir=r.base, line=line, **kw)
    if kind in ("torchscript", "exported"):
        return Model(
            name=name,
            kind=kind,
            path=r.file(node[kind], join_field(field, kind), node.line_of(kind)),
            base_dir=r.base,
            line=line,
            **kw,
        )
    if kind in HUB_KINDS:
        if "cam_layer" in node:
            raise r.error(
                f"cam_layer goes with torch classifiers (factory, torchscript, exported); a {kind} model "
                "is an embedding model.",
                join_field(field, "cam_layer"),
                node.line_of("cam_layer"),
            )
        return _hub_model(r, name, node, line, field, kind, kw)
    target = r.target(node[kind], join_field(field, kind), node.line_of(kind))
    path = (
        r.file(node["weights"], join_field(field, "weights"), node.line_of("weights"))
        if "weights" in node
        else None
    )
    return Model(name=name, kind=kind, target=target, path=path, base_dir=r.base, line=line, **kw)


def _model_settings(r: _Reader, node, field: str, kind: str, datasets: dict) -> dict:
    """A model's settings besides what runs it: batch_size, device, timeout, its own
    evaluation options, cam_layer and kwargs, each checked on its line."""
    kw: dict[str, Any] = {"batch_size": 256}
    if "batch_size" in node:
        kw["batch_size"] = r.integer(
            node["batch_size"], join_field(field, "batch_size"), node.line_of("batch_size"), 1
        )
    if "device" in node:
        if (
            not isinstance(node["device"], str)
            or OPTIONS["device"].problem(node["device"]) is not None
        ):
            raise r.error(
                f"expected a device name (auto, cpu, cuda, cuda:1), found {describe_value(node['device'])}."
                f"{hint(node['device'], ('auto', 'cpu', 'cuda'))}",
                join_field(field, "device"),
                node.line_of("device"),
            )
        kw["device"] = node["device"].strip()
    if "timeout" in node and node["timeout"] is not None:
        kw["timeout"] = float(
            r.option(
                "timeout", node["timeout"], join_field(field, "timeout"), node.line_of("timeout")
            )
        )
    own = _model_options(r, node, field, datasets)
    if own:
        kw["options"] = own
    if "cam_layer" in node:
        if not isinstance(node["cam_layer"], str) or not node["cam_layer"]:
            raise r.error(
                f"expected a layer name from model.named_modules(), found {describe_value(node['cam_layer'])}.",
                join_field(field, "cam_layer"),
                node.line_of("cam_layer"),
            )
        kw["cam_layer"] = node["cam_layer"]
    if "kwargs" in node:
        if kind not in ("callable", "factory"):
            raise r.error(
                "kwargs go with callable or factory.",
                join_field(field, "kwargs"),
                node.line_of("kwargs"),
            )
        kw["kwargs"] = dict(
            r.mapping(
                node["kwargs"],
                join_field(field, "kwargs"),
                node.line_of("kwargs"),
                "keyword arguments of the function",
            )
        )
    return kw


def _embedding_files(r: _Reader, node, field: str, datasets: dict) -> dict:
    """The files of an ``embeddings`` model: per dataset, one source per part."""
    files_node = r.mapping(
        node["embeddings"],
        join_field(field, "embeddings"),
        node.line_of("embeddings"),
        "dataset name: file, or dataset name: {part: file}",
    )
    files = {}
    for ds, spec in files_node.items():
        where = f"{field}.embeddings.{ds}"
        if ds not in datasets:
            declared = r.declared("dataset", datasets)  # with those left out for their own error
            raise r.error(_unknown("dataset", ds, declared), where, files_node.line_of(ds))
        if datasets[ds].type == "run":
            raise r.error(
                f"dataset {ds!r} is a run (rankings and qrels): there is nothing to embed.",
                where,
                files_node.line_of(ds),
            )
        if datasets[ds].type == "beir":
            raise r.error(
                f"dataset {ds!r} is a BEIR directory of texts: a text model embeds it ("
                f"{', '.join(TEXT_KINDS)}), not embedding files.",
                where,
                files_node.line_of(ds),
            )
        parts = datasets[ds].parts
        if isinstance(spec, str) and len(parts) == 1:
            spec = {next(iter(parts)): spec}
        elif isinstance(spec, str):
            raise r.error(
                f"dataset {ds!r} has parts {', '.join(parts)}: give one file per part, e.g. "
                f"{{{', '.join(f'{p}: ...' for p in parts)}}}.",
                where,
                files_node.line_of(ds),
            )
        spec_node = r.mapping(spec, where, files_node.line_of(ds), "part: file")
        r.keys(spec_node, where, tuple(parts), required=tuple(parts))
        files[ds] = {
            p: _source(
                r,
                spec_node[p],
                f"{where}.{p}",
                spec_node.line_of(p) if isinstance(spec_node, Node) else files_node.line_of(ds),
            )
            for p in parts
        }
    return files


def _model_options(r: _Reader, node, field: str, datasets: dict) -> dict:
    """A model's own evaluation options (:data:`MODEL_OPTIONS`), each checked against
    the option table and refused when it applies to none of the suite's datasets."""
    own = {
        k: r.option(k, node[k], join_field(field, k), node.line_of(k))
        for k in MODEL_OPTIONS
        if k in node
    }
    # a model ranks embeddings: no document ids to order by (the option table's rule)
    if "ties" in own and not OPTIONS["ties"].takes(own["ties"], EMBEDDING_TYPES):
        raise r.error(
            "ties: docid orders equal scores by document id as trec_eval does, which only run "
            "datasets (type: run) have; a model's embeddings take pessimistic, optimistic or "
            "average.",
            join_field(field, "ties"),
            node.line_of("ties"),
        )
    types = sorted({d.type for d in datasets.values()})
    for k in own:
        if not any(applies(k, t) for t in types):
            raise r.error(
                f"{k} does not apply to this suite's datasets ({', '.join(types)}; only to: "
                f"{', '.join(_applies_to(k))}).",
                join_field(field, k),
                node.line_of(k),
            )
    return own


def _hub_owners(key: str) -> list:
    """The library model kinds that take the field ``key`` (checkpoint: open_clip, timm)."""
    return [
        m
        for m in HUB_KINDS
        if key in _HUB_SETTINGS[m] or key == "checkpoint" and m in ("open_clip", "timm")
    ]


def _hub_model(r: _Reader, name: str, node, line, field: str, kind: str, kw: dict) -> Model:
    """A library's model: ``sentence_transformers`` / ``huggingface``: a directory;
    ``open_clip``: an architecture name with its ``checkpoint`` file (``config``: a JSON
    model config); ``timm``: a directory saved by timm, or an architecture name with its
    ``checkpoint``. The kind's settings are checked here, each at its line."""
    where = join_field(field, kind)
    by_name = kind == "open_clip" or (kind == "timm" and "checkpoint" in node)
    settings: dict[str, Any] = {}
    if by_name:
        if "checkpoint" not in node:
            raise r.error(
                f"{kind}: names the architecture; give its weights in checkpoint: (a local file).",
                field,
                node.line,
            )
        value = node[kind]
        if not isinstance(value, str) or not value.strip():
            raise r.error(
                f"expected the architecture's name (e.g. ViT-B-32), found {describe_value(value)}.",
                where,
                node.line_of(kind),
            )
        settings["model_name"] = value.strip()
        path = r.file(
            node["checkpoint"], join_field(field, "checkpoint"), node.line_of("checkpoint")
        )
    else:
        path = r.directory(node[kind], where, node.line_of(kind))
        if kind == "timm" and "config" in node:
            raise r.error(
                "config goes with timm: <architecture> and checkpoint: (a directory brings its own "
                "config.json).",
                join_field(field, "config"),
                node.line_of("config"),
            )
    for k in _HUB_SETTINGS[kind]:
        if k not in node or k == "model_name":
            continue
        v, at, kline = node[k], join_field(field, k), node.line_of(k)
        if k == "normalize":
            if not isinstance(v, bool):
                raise r.error(f"expected true or false, found {describe_value(v)}.", at, kline)
        elif k == "max_length":
            v = r.integer(v, at, kline, 1)
        elif k == "pooling":
            v = r.choice(v, ("mean", "cls"), at, kline)
        elif k == "config":
            v = r.file(v, at, kline)
        elif not isinstance(v, str) or not v:
            raise r.error(f"expected a non-empty text, found {describe_value(v)}.", at, kline)
        settings[k] = v
    for a, b in (
        ("query_prompt", "query_prompt_name"),
        ("document_prompt", "document_prompt_name"),
    ):
        if a in settings and b in settings:
            raise r.error(f"give {a} or {b}, not both.", join_field(field, b), node.line_of(b))
    return Model(
        name=name, kind=kind, path=path, settings=settings, base_dir=r.base, line=line, **kw
    )


def _unknown(what: str, name, known) -> str:
    if not isinstance(name, str):
        quote = (
            f" (quote it: '{name}')"
            if isinstance(name, (int, float, bool)) and len(str(name)) < 40
            else ""
        )
        return f"{what} names are strings; found {describe_value(name)}{quote}."
    return f"no {what} named {short(name)}.{hint(name, known)} Declared: {', '.join(map(str, known)) or 'none'}."


_RULE_KEYS = ("gap", "compare", "baseline")


def check_keys() -> tuple:
    """The fields of a check: where it applies, its rule (a check's own gate fields,
    from the gate-field table), its id and markers, and the evaluation options."""
    own = [g.name for g in fields_of(section="") if not g.shared]
    return (
        "metric",
        "dataset",
        "datasets",
        "model",
        "models",
        *own,
        *_RULE_KEYS,
        "id",
        "markers",
        "slices",
        "unsliced",
        *_OPTIONS,
    )


def section_keys(section: str) -> tuple:
    """The fields of a check's ``compare:`` (``baseline`` and the table's compare rows)
    or ``baseline:`` mapping (the table's baseline rows)."""
    rows = tuple(g.name for g in fields_of(section=section))
    return ("baseline", *rows) if section == "compare" else rows


def _ref(r: _Reader, value, known: dict, what: str, field: str, line, declared=None) -> str:
    """A reference to a declared dataset or model by name; ``declared`` (default
    ``known``): the names an error lists and suggests from, which are only names the
    suite declares."""
    if not isinstance(value, str):
        plural = {"dataset": "datasets", "model": "models"}[what]
        hint = f" (use {plural}: [...] for several)" if isinstance(value, list) else ""
        raise r.error(f"expected a {what} name, found {describe_value(value)}{hint}.", field, line)
    if value not in known:
        names = r.declared(what, known if declared is None else declared)
        raise r.error(_unknown(what, value, names), field, line)
    return value


def _names(
    r: _Reader, node: Node, one: str, many: str, field: str, known: dict, what: str, declared=None
):
    if one in node and many in node:
        raise r.error(f"give {one} or {many}, not both.", field, node.line_of(many))
    if one in node:
        values, line, key = [node[one]], node.line_of(one), one
    elif many in node:
        values, line, key = node[many], node.line_of(many), many
        if isinstance(values, str):
            values = [values]
        if not isinstance(values, list) or not values:
            raise r.error(
                f"expected a non-empty list of {what} names, found {describe_value(values)}.",
                join_field(field, many),
                line,
            )
    else:
        return None
    out = tuple(_ref(r, v, known, what, join_field(field, key), line, declared) for v in values)
    if len(set(out)) != len(out):
        dup = next(v for v in out if out.count(v) > 1)
        raise r.error(f"{what} {dup!r} is listed twice.", join_field(field, key), line)
    return out


def _check(r: _Reader, index: int, node, line, suite_datasets: dict, suite_models: dict) -> Check:
    """One entry of ``checks:``: the metric, the rule (a threshold, a gap, a comparison
    or a baseline), where it applies, its options, markers and id."""
    field = f"checks[{index}]"
    node = r.mapping(node, field, line, "metric, dataset, at_least / at_most / gap / compare, ...")
    r.keys(node, field, check_keys(), required=("metric",))
    spec = _check_metric(r, node, field)  # parsed once: the check carries it to its verdict
    kind = _check_kind(r, node, field, line)
    options = {
        k: r.option(k, node[k], join_field(field, k), node.line_of(k))
        for k in _OPTIONS
        if k in node
    }
    # `run` is accepted here so that naming it on a model dataset gets its own message (_check_models); a
    # misspelt name is answered from the models the suite declares (and `run` only if it has run datasets)
    runs = {RUN_MODEL: None} if any(d.type == "run" for d in suite_datasets.values()) else {}
    named = _names(
        r,
        node,
        "model",
        "models",
        field,
        {**suite_models, RUN_MODEL: None},
        "model",
        declared={**suite_models, **runs},
    )
    models = named or tuple(suite_models)
    datasets = _names(r, node, "dataset", "datasets", field, suite_datasets, "dataset")
    kw = _RULES[kind](r, node, field, line, spec, suite_models)
    _refuse_others(r, node, field, kind)
    if kind == "gap":
        if datasets is not None:
            raise r.error(
                "a gap names its datasets in gap: {train: ..., test: ...}; remove dataset: / datasets: "
                "from this check.",
                field,
                line,
            )
        datasets = _gap_datasets(r, node, field, suite_datasets)
    datasets = _check_datasets(r, spec, datasets, suite_datasets, field, line)
    models = _check_models(
        r, node, field, kind, named, models, [suite_datasets[d] for d in datasets], suite_models
    )
    if kind == "compare" and not [m for m in models if m != kw["baseline"]]:
        raise r.error(
            f"compare: every model of this check is the baseline {kw['baseline']!r}; name others "
            "in models:.",
            field,
            line,
        )
    _options_apply(r, node, field, options, dict.fromkeys(suite_datasets[d].type for d in datasets))
    if spec.kind == "classifier":
        _check_classifier_models(r, spec, models, suite_models, field, line)
    markers = (
        r.markers(node["markers"], join_field(field, "markers"), node.line_of("markers"))
        if "markers" in node
        else ()
    )
    slices = check_slices(r, node, field, kind, spec, datasets, suite_datasets)
    unsliced = check_unsliced(r, node, field, slices)
    check_id = node.get("id")
    check_id = (
        _default_id(spec.name, kind, kw)
        if check_id is None
        else r.name(check_id, join_field(field, "id"), node.line_of("id"))
    )
    return Check(
        index=index,
        metric=spec,
        kind=kind,
        datasets=datasets,
        models=models,
        options=options,
        markers=markers,
        id=slice_check_id(check_id, slices, "id" in node),
        line=line,
        slices=slices,
        unsliced=unsliced,
        gate={k: v for k, v in kw.items() if k in GATE_FIELDS} | kw.get("tolerances", {}),
        **{k: v for k, v in kw.items() if k in _CHECK_ATTRIBUTES},
    )


_CHECK_ATTRIBUTES = (
    "at_least",
    "at_most",
    "on",
    "below",
    "baseline",
    "rule",
    "margin",
    "tolerances",
)


def _fields(r: _Reader, node, where: str, kind: str, spec, section: str = "") -> dict:
    """Every gate field of a check of ``kind`` written in ``node`` (the check, or its
    ``section`` mapping at ``where``), each checked by its row of the gate-field table;
    fields shared with the evaluation options are read with the options."""
    return {
        g.name: r.gate_field(g, kind, spec, node, where)
        for g in fields_of(check=kind, section=section)
        if not g.shared and g.name in node
    }


def _refuse_others(r: _Reader, node, field: str, kind: str) -> None:
    """A check's own gate field that belongs to other kinds of check (not refused with
    a message of its own by the kind's rule) is an error on its line."""
    for g in fields_of(section=""):
        if g.name in node and kind not in g.checks and not g.shared:
            raise r.error(
                f"{g.name} does not apply to {kind} checks (only to: {', '.join(g.checks)} checks).",
                join_field(field, g.name),
                node.line_of(g.name),
            )
        if g.name in node and kind in g.checks and g.section_for(kind):
            section = g.section_for(kind)
            raise r.error(
                f"{g.name} of a {kind} check goes in its {section}: mapping ({section}: {{..., "
                f"{g.name}: {shown(node[g.name])}}}).",
                join_field(field, g.name),
                node.line_of(g.name),
            )


def _check_metric(r: _Reader, node, field: str) -> MetricSpec:
    """A check's metric, parsed (an error on its line names the closest metric)."""
    metric = node["metric"]
    if not isinstance(metric, str) or len(metric) > 100:
        what = (
            describe_value(metric)
            if not isinstance(metric, str)
            else f"a text of {len(metric)} characters"
        )
        raise r.error(
            f"expected a metric name such as map or hit_rate@1, found {what}.",
            join_field(field, "metric"),
            node.line_of("metric"),
        )
    try:
        return metric_spec(metric)
    except MetricNameError as exc:
        raise r.error(str(exc), join_field(field, "metric"), node.line_of("metric")) from None


def _check_kind(r: _Reader, node, field: str, line) -> str:
    """threshold, or the one rule key the check names (gap, compare, baseline)."""
    rules = [k for k in _RULE_KEYS if k in node]
    if len(rules) > 1:
        raise r.error(
            f"a check is a threshold, a gap, a comparison or a baseline check: give one of gap, compare, "
            f"baseline (found {', '.join(rules)}).",
            field,
            line,
        )
    return rules[0] if rules else "threshold"


def _options_apply(r: _Reader, node, field: str, options: dict, kinds) -> None:
    """Each evaluation option a check sets applies to every dataset type it measures."""
    for k in options:
        for wanted in kinds:
            if not applies(k, wanted):
                raise r.error(
                    f"{k} does not apply to {wanted} datasets (only to: "
                    f"{', '.join(_applies_to(k))}).",
                    join_field(field, k),
                    node.line_of(k),
                )


def _refuse(r: _Reader, node, field: str, keys: tuple, why: str) -> None:
    """Keys that do not belong to this kind of check are errors, each on its line."""
    for k in keys:
        if k in node:
            raise r.error(why.format(key=k), join_field(field, k), node.line_of(k))


def _threshold_rule(r: _Reader, node, field: str, line, spec, _models) -> dict:
    if "at_least" not in node and "at_most" not in node:
        raise r.error(
            "missing threshold: give at_least, at_most (or gap: / compare: / baseline:).",
            field,
            line,
        )
    _refuse(r, node, field, ("below",), "{key} goes with gap:.")
    kw = _fields(r, node, field, "threshold", spec)
    if "on" in kw:
        if GATE_FIELDS["on"].unmet(spec, kw["on"]):
            raise r.error(
                f"{spec.name} has no interval (pair and embedding metrics are single numbers over all "
                "pairs; medr is a median rank); use on: value.",
                join_field(field, "on"),
                node.line_of("on"),
            )
    if "at_least" in kw and "at_most" in kw and kw["at_least"] > kw["at_most"]:
        raise r.error(
            f"at_least {kw['at_least']:g} > at_most {kw['at_most']:g}: no value passes.",
            field,
            line,
        )
    return kw


_NOT_A_THRESHOLD = "{key} is a threshold; a {kind} check uses {uses}."


def _not_thresholds(r: _Reader, node, field: str, kind: str, uses: str) -> None:
    _refuse(
        r,
        node,
        field,
        ("at_least", "at_most"),
        _NOT_A_THRESHOLD.replace("{kind}", kind).replace("{uses}", uses),
    )


def _gap_rule(r: _Reader, node, field: str, line, spec, _models) -> dict:
    _not_thresholds(r, node, field, "gap", "below")
    if not spec.capabilities.gap:
        if spec.unit == "rank":
            raise r.error(
                f"{spec.name} is a rank (lower is better); a gap is metric(train) - metric(test) of a "
                "higher-is-better metric. Gate a fraction such as map or hit_rate@1.",
                join_field(field, "metric"),
                node.line_of("metric"),
            )
        raise r.error(
            f"a gap compares a per-query or grouped metric between datasets; {spec.name} has no "
            "per-query values.",
            join_field(field, "metric"),
            node.line_of("metric"),
        )
    if "below" not in node:
        raise r.error("a gap check needs below: (the largest gap allowed).", field, line)
    kw = {"on": GATE_FIELDS["on"].default_for("gap"), **_fields(r, node, field, "gap", spec)}
    if "min_power" in kw and kw["on"] != "upper":
        raise r.error(
            "min_power: a gap gated with on: value has no test to state the power of; gate the upper "
            "bound (on: upper, the default: its power is its chance to pass a model with no gap), or "
            "leave min_power out.",
            join_field(field, "min_power"),
            node.line_of("min_power"),
        )
    return kw


def _gap_datasets(r: _Reader, node, field: str, suite_datasets: dict) -> tuple:
    gap = r.mapping(
        node["gap"],
        join_field(field, "gap"),
        node.line_of("gap"),
        "{train: dataset, test: dataset}",
    )
    r.keys(gap, join_field(field, "gap"), ("train", "test"), required=("train", "test"))
    datasets = tuple(
        _ref(r, gap[k], suite_datasets, "dataset", f"{field}.gap.{k}", gap.line_of(k))
        for k in ("train", "test")
    )
    if datasets[0] == datasets[1]:
        raise r.error(
            "train and test are the same dataset; a gap compares two different sets.",
            join_field(field, "gap"),
            node.line_of("gap"),
        )
    return datasets


def _compare_rule(r: _Reader, node, field: str, line, spec, suite_models) -> dict:
    _not_thresholds(r, node, field, "compare", "compare.margin and compare.rule")
    if not spec.capabilities.compare or spec.kind == "grouped":
        raise r.error(
            f"compare pairs per-query values; {spec.name} has none (compare a ranking metric such as "
            "map or hit_rate@1).",
            join_field(field, "metric"),
            node.line_of("metric"),
        )
    _refuse(r, node, field, ("below",), "{key} goes with gap:.")
    _refuse(
        r,
        node,
        field,
        ("on",),
        "a comparison's rule is compare.rule (significant, non_inferior, value).",
    )
    cmp = node["compare"]
    if isinstance(cmp, str):
        cmp = Node(baseline=cmp)
        cmp.line, cmp.key_lines = node.line_of("compare"), {}
    cmp = r.mapping(
        cmp,
        join_field(field, "compare"),
        node.line_of("compare"),
        "{baseline: model, rule: ..., margin: ...}",
    )
    r.keys(cmp, join_field(field, "compare"), section_keys("compare"), required=("baseline",))
    kw = {
        "baseline": _ref(
            r,
            cmp["baseline"],
            suite_models,
            "model",
            f"{field}.compare.baseline",
            cmp.line_of("baseline"),
        )
    }
    kw.update(_fields(r, cmp, f"{field}.compare", "compare", spec, "compare"))
    rule = kw.get("rule", GATE_FIELDS["rule"].default)
    if "min_power" in kw and (rule == "value" or (rule == "significant" and not kw.get("margin"))):
        why = (
            "rule: significant needs a margin for it: its power is its chance of failing on a drop "
            "of the margin beyond the margin, and with margin 0 no drop is tolerated, so none is to "
            "be detected (a baseline check without max_drop has none either)"
            if rule == "significant"
            else "rule: value has no test, so no power"
        )
        raise r.error(
            "min_power goes with rule: significant with a margin (its chance of failing on a drop "
            "of twice the margin) or rule: non_inferior (its chance of passing an unchanged model); "
            f"{why}. Give a margin, use rule: non_inferior with a margin, or leave min_power out.",
            join_field(f"{field}.compare", "min_power"),
            cmp.line_of("min_power"),
        )
    return kw


def _baseline_rule(r: _Reader, node, field: str, line, spec, _models) -> dict:
    _not_thresholds(r, node, field, "baseline", "baseline.max_drop / baseline.max_relative_drop")
    _refuse(r, node, field, ("below",), "{key} goes with gap:.")
    _refuse(
        r,
        node,
        field,
        ("on",),
        "a baseline check has no on:; use baseline.significant: true to fail only on "
        "significant drops.",
    )
    b = node["baseline"]
    if b is True or b is None:
        b = Node()
        b.line, b.key_lines = node.line_of("baseline"), {}
    where = join_field(field, "baseline")
    b = r.mapping(
        b,
        where,
        node.line_of("baseline"),
        "{max_drop: ..., max_relative_drop: ..., direction: higher/lower, significant: true/false}",
    )
    r.keys(b, where, section_keys("baseline"))
    kw = _fields(r, b, where, "baseline", spec, "baseline")
    if "min_power" in kw:
        need = (
            "significant: true (the power is that of the significance test)"
            if kw.get("significant") is not True
            else "a tolerance, max_drop or max_relative_drop (the drop the test must detect)"
            if "max_drop" not in kw and "max_relative_drop" not in kw
            else None
        )
        if need is not None:
            raise r.error(
                f"min_power needs {need}; add it, or leave min_power out.",
                join_field(where, "min_power"),
                b.line_of("min_power"),
            )
    return {"tolerances": kw}


_RULES = {
    "threshold": _threshold_rule,
    "gap": _gap_rule,
    "compare": _compare_rule,
    "baseline": _baseline_rule,
}


def _types_of(spec: MetricSpec) -> tuple:
    """The dataset types a metric is measured on: ann_recall@K on ann datasets; bpref
    and rbp_residual (they tell judged from unjudged documents) on run datasets and on
    retrieval datasets (labels judge every gallery item), not on beir ones (BEIR's qrels
    judge a few documents of the corpus); the other ranking metrics evaluate_run
    computes on retrieval, run and beir datasets; the rest on the family's own type."""
    if spec.capabilities.entry == "ann_recall":
        return ("ann",)
    if spec.family in _JUDGED_ONLY:
        return ("retrieval", "run")
    if spec.family in _RUN_FAMILIES:
        return (spec.capabilities.dataset, "run", "beir")
    return (spec.capabilities.dataset,)


#: Measures that tell judged from unjudged documents (refused on beir datasets).
_JUDGED_ONLY = ("bpref", "rbp_residual")


def _refused(spec: MetricSpec, kind: str) -> str:
    """Why ``spec`` is not measured on a dataset of type ``kind``."""
    if kind == "beir" and spec.family in _JUDGED_ONLY:
        return (
            f"{spec.name} tells judged from unjudged documents, and a beir dataset ranks the whole corpus "
            "against qrels that judge a few documents of it: every other document would count as judged "
            "non-relevant. Measure it on a run dataset (the model's run and the qrels, trec_eval's bpref / "
            "RBP residual) or on a retrieval dataset with labels (every gallery item judged)."
        )
    if kind == "beir":
        return (
            f"{spec.name} is not measured on beir datasets: a BEIR split holds graded qrels, not labels; its "
            f"metrics are the ranking metrics of judged queries: {', '.join(_RUN_FAMILIES)}."
        )
    if kind == "run":
        try:
            _run_metrics([spec.name])
        except MetricNameError as exc:
            return f"{exc} ('run' datasets hold a search's rankings, not embeddings.)"
    if kind == "ann":
        return (
            f"{spec.name} is not measured on ann datasets: an ann dataset compares an approximate index's "
            "neighbours with exact search, and gates ann_recall@K (K at most its k); measure ranking metrics "
            "on a retrieval dataset."
        )
    return (
        f"{spec.name} is measured on {' or '.join(_types_of(spec))} datasets; this one is {kind}."
        + (image_text_analogue(spec) if kind == "image_text" else "")
    )


def _check_datasets(r: _Reader, spec, datasets, suite_datasets: dict, field: str, line) -> tuple:
    """The check's datasets (the only one of the right type when none is named), each of
    a type the metric is measured on."""
    wanted = _types_of(spec)
    if datasets is None:
        compatible = [d for d, ds in suite_datasets.items() if ds.type in wanted]
        if len(compatible) != 1:
            image_text = not compatible and any(
                ds.type == "image_text" for ds in suite_datasets.values()
            )
            raise r.error(
                f"name the dataset (dataset: or datasets:); the suite has {len(compatible)} "
                f"{' or '.join(wanted)} datasets ({', '.join(compatible) or 'none'})."
                + (image_text_analogue(spec) if image_text else ""),
                field,
                line,
            )
        datasets = tuple(compatible)
    for d in datasets:
        ds = suite_datasets[d]
        if ds.type not in wanted:
            raise r.error(f"dataset {d!r}: {_refused(spec, ds.type)}", field, line)
        if ds.type == "ann" and spec.k is not None and spec.k > ds.k:
            raise r.error(
                f"{spec.name} compares the top {spec.k} neighbours, but dataset {d!r} has k: "
                f"{ds.k}; use K <= {ds.k} or raise the dataset's k (the neighbours' columns).",
                field,
                line,
            )
    if len({suite_datasets[d].type == "run" for d in datasets}) > 1:
        raise r.error(
            "a check measures run datasets (no model) or model datasets, not both: split it in two.",
            field,
            line,
        )
    return datasets


def _check_models(
    r: _Reader,
    node,
    field: str,
    kind: str,
    named,
    models: tuple,
    datasets: list,
    suite_models: dict,
) -> tuple:
    """A check on run datasets has the one model ``run`` (a run is a search's output);
    a check on other datasets names declared models only."""
    where = (
        ("model", node.line_of("model")) if "model" in node else ("models", node.line_of("models"))
    )
    if datasets[0].type != "run":
        if RUN_MODEL in models and RUN_MODEL not in suite_models:
            raise r.error(
                f"model {RUN_MODEL!r} is the model of run datasets (a run has no model); "
                f"{datasets[0].name!r} is a {datasets[0].type} dataset.{_declared(suite_models)}",
                join_field(field, where[0]),
                where[1],
            )
        return models
    if named is not None and named != (RUN_MODEL,):
        other = next(m for m in named if m != RUN_MODEL)
        raise r.error(
            f"dataset {datasets[0].name!r} is a run (a search's rankings and qrels): it has no model, so "
            f"model {other!r} cannot be measured on it; its items use the model name {RUN_MODEL!r} "
            f"(leave model: out, or write model: {RUN_MODEL}).",
            join_field(field, where[0]),
            where[1],
        )
    if kind == "compare":
        raise r.error(
            "compare pairs two models on one dataset; a run dataset has no model. Compare two runs with "
            "retrieval_checks.compare on two evaluate_run results in Python.",
            join_field(field, "compare"),
            node.line_of("compare"),
        )
    return (RUN_MODEL,)


def _declared(models: dict) -> str:
    return f" Declared models: {', '.join(models)}."


def _check_classifier_models(
    r: _Reader, spec, models, suite_models: dict, field: str, line
) -> None:
    for m in models:
        mk = suite_models[m].kind
        if mk in ("precomputed", "embeddings", "callable", *HUB_KINDS):
            raise r.error(
                f"{spec.name} runs a torch classifier; model {m!r} is {mk} (use factory, torchscript "
                "or exported).",
                field,
                line,
            )
        if spec.name in ("cam_iou", "cam_iou_box") and suite_models[m].cam_layer is None:
            raise r.error(
                f"{spec.name} needs the layer whose Grad-CAM is measured: set models.{m}.cam_layer "
                "(a name from model.named_modules()).",
                field,
                line,
            )


def _default_id(metric: str, kind: str, kw: dict) -> str:
    """A stable name: the metric and the rule, not the threshold (editing a threshold
    keeps the item's id, its --lf entry and its history)."""
    if kind == "gap":
        return f"{metric}_gap" + ("" if kw.get("on") == "upper" else "_value")
    if kind == "compare":
        return f"{metric}_vs_{kw['baseline']}"
    if kind == "baseline":
        return f"{metric}_vs_baseline"
    ci = "_ci" if kw.get("on") == "interval" else ""
    rule = (
        "between"
        if "at_least" in kw and "at_most" in kw
        else ("at_least" if "at_least" in kw else "at_most")
    )
    return f"{metric}{ci}_{rule}"


_TOP_KEYS = ("suite", "markers", "options", "correction", "datasets", "models", "checks")


def load_suite(path) -> Suite:
    """Read and validate a YAML suite; raises :class:`~retrieval_checks.errors.SuiteError`.

    Paths in the suite are relative to its file; without ``models:`` the datasets' own
    embeddings are the model (``precomputed``). The fields: docs/suites.md and the
    generated YAML reference.

    Parameters
    ----------
    path:
        The YAML file (str or Path).

    Returns
    -------
    Suite
        The validated suite; ``suite.cases`` are its (check, model, dataset) items.

    Raises
    ------
    SuiteError
        A file that cannot be read, invalid YAML, an unknown or missing field, a bad
        value (an unknown metric, a threshold on the wrong scale...), a reference to a
        dataset or model that does not exist, colliding item names; the error names the
        file, the line and the field (``path``, ``line``, ``field``).

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> import retrieval_checks as rc
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = pathlib.Path(tmp.name)
    >>> x = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    >>> np.savez(folder / "test.npz", embeddings=x, labels=np.array([0, 0, 1, 1]))
    >>> _ = (folder / "rc_demo.yaml").write_text('''
    ... datasets:
    ...   test: {queries: test.npz}
    ... checks:
    ...   - {metric: map, dataset: test, at_least: 0.7}
    ...   - {metric: hit_rate@1, dataset: test, at_least: 0.9}
    ... ''')
    >>> suite = rc.load_suite(folder / "rc_demo.yaml")
    >>> suite.name, [case.name for case in suite.cases]
    ('rc_demo', ['map_at_least[precomputed-test]', 'hit_rate@1_at_least[precomputed-test]'])
    >>> _ = (folder / "rc_bad.yaml").write_text('''
    ... datasets: {test: {queries: test.npz}}
    ... checks: [{metric: mapp, dataset: test, at_least: 0.7}]
    ... ''')
    >>> try:
    ...     rc.load_suite(folder / "rc_bad.yaml")
    ... except rc.SuiteError as err:
    ...     print(err.field, err.line, err.detail[:69])
    checks[0].metric 3 Unknown or malformed metric name 'mapp': no such metric. Did you mean
    >>> tmp.cleanup()
    """
    p = Path(path)
    return _load(p, _Reader(p))


def suite_errors(path) -> tuple[Suite | None, list[SuiteError]]:
    """The suite and every independent error of its file, in file order (``validate``).

    :func:`load_suite` stops at the first error; this reads on after one: each unknown
    top-level key, ``suite:``, ``markers:``, each option, ``correction:``, each dataset,
    each model and each check is checked on its own (a dataset, a model or a check with
    unknown keys reports them all and stops there, else it stops at its first error:
    the rest of it may depend on what the misspelt key meant).
    Errors that would only echo an earlier one are skipped: a model or a check that
    names a dataset or model with an error of its own is not checked (it would read
    "unknown dataset"), and the checks across the whole suite (unique ids and item
    names, ``ties``, each model's files for each dataset) run only on an otherwise valid
    suite. Returns ``(suite, [])`` for a valid file, ``(None, errors)`` otherwise.
    """
    p = Path(path)
    r = _Reader(p, collect=True)
    try:
        suite = _load(p, r)
    except SuiteError as exc:  # a part the others depend on (the YAML, datasets:, checks:)
        r.keep(exc)
    found = sorted(r.found, key=lambda e: e.line or 0)  # stable: one line's errors keep their order
    return (None, found) if found else (suite, [])


_FAILED = object()  # a part of the suite whose error is kept (suite_errors); left out


def _load(p: Path, r: _Reader) -> Suite:
    data = load_yaml(p)
    if data is None:
        raise r.error(
            "the suite is empty; it needs datasets: and checks: (see docs/suites.md).",
            None,
            1,
        )
    top = r.mapping(data, "", 1, "suite, datasets, models, checks")
    r.keys(top, "", _TOP_KEYS, required=("datasets", "checks"), go_on=True)
    name = (
        r.part(r.name, top["suite"], "suite", top.line_of("suite"))
        if "suite" in top
        else re.sub(r"[^A-Za-z0-9_.\-]", "_", p.stem)
    )
    markers = (
        r.part(r.markers, top["markers"], "markers", top.line_of("markers"))
        if "markers" in top
        else ()
    )
    options = {}
    if "options" in top:
        node = r.part(
            r.mapping, top["options"], "options", top.line_of("options"), "evaluation options"
        )
        for k, v in node.items() if node is not _FAILED else ():  # each key on its own, in order
            if k not in _OPTIONS:
                r.part(functools.partial(r.keys, only=k), node, "options", tuple(_OPTIONS))
                continue
            value = r.part(r.option, k, v, f"options.{k}", node.line_of(k))
            if value is not _FAILED:
                options[k] = value
    correction = None
    if "correction" in top:  # the multiplicity correction of the suite's significance-gated checks
        correction = r.part(_correction, r, top)
    datasets = _datasets(r, top)
    models = _models(r, top, datasets)
    checks_node = top["checks"]
    if not isinstance(checks_node, list) or not checks_node:
        raise r.error(
            f"expected a non-empty list of checks, found {describe_value(checks_node)}.",
            "checks",
            top.line_of("checks"),
        )
    checks = [
        # a check naming a dataset or model with its own error is left out: its error would echo that one
        # (and with no model left, every check would be checked against none)
        r.part(_check, r, i, c, checks_node.line_of(i), datasets, models)
        if models and not _mentions(c, r.failed)
        else _FAILED
        for i, c in enumerate(checks_node)
    ]
    if r.found:  # the checks below span the whole suite: they would report parts left out
        raise r.found[0]
    checks = _unique_ids(r, checks_node, checks)
    suite = Suite(
        name=name,
        path=p,
        datasets=datasets,
        models=models,
        checks=checks,
        markers=markers,
        options=options,
        correction=correction,
    )
    _check_ties(r, suite, top["options"].line_of("ties") if "options" in top else None)
    _check_cases(r, suite)
    return suite


def _correction(r: _Reader, top: Node):
    try:
        return check_correction(top["correction"], "correction")
    except InputError as exc:
        raise r.error(
            str(exc).split(": ", 1)[-1], "correction", top.line_of("correction")
        ) from None


def _mentions(node, names: set) -> bool:
    """Whether a part of the suite names one of ``names`` (a key or a string value at
    any depth): a model's files for a dataset, a check's dataset, models or baseline."""
    if not names:
        return False
    if isinstance(node, dict):
        return any(_mentions(k, names) or _mentions(v, names) for k, v in node.items())
    if isinstance(node, list):
        return any(_mentions(v, names) for v in node)
    return isinstance(node, str) and node in names


def _check_ties(r: _Reader, suite, options_line) -> None:
    """A ``ties`` value that an embedding dataset cannot take (``docid``: document ids,
    which only runs have) refused where a check would evaluate one with it: from the
    suite's ``options`` (unless the model sets its own) or the check's own field.
    (A model's own ``ties:`` is refused when it is read.)"""
    for check in suite.checks:
        for ds in check.datasets:
            if suite.datasets[ds].type not in EMBEDDING_TYPES:
                continue
            for model in check.models or (None,):
                ties = suite.evaluation_options(check, ds, {}, model).get("ties")
                if ties is None or OPTIONS["ties"].takes(ties, EMBEDDING_TYPES):
                    continue
                own = "ties" in check.options
                raise r.error(
                    f"ties: {ties} orders equal scores by document id as trec_eval does, which only run "
                    f"datasets (type: run) have; check {check.id or check.index} ({check.metric.name}) "
                    f"evaluates the embedding dataset {ds!r}"
                    + (f" with model {model!r}" if model else "")
                    + " under it. Use pessimistic, optimistic or average"
                    + ("" if own else ", or set ties: on the model")
                    + ".",
                    f"checks[{check.index}].ties" if own else "options.ties",
                    check.line if own else options_line,
                )


def _datasets(r: _Reader, top: Node) -> dict:
    ds_node = r.mapping(top["datasets"], "datasets", top.line_of("datasets"), "dataset name: {...}")
    if not ds_node:
        raise r.error("declare at least one dataset.", "datasets", top.line_of("datasets"))
    datasets = {
        k: r.part(_named, r, _dataset, "datasets", k, v, ds_node.line_of(k), name=k)
        for k, v in ds_node.items()
    }
    r.left_out["dataset"] = [k for k, v in datasets.items() if v is _FAILED]
    r.order["dataset"] = list(datasets)
    return {k: v for k, v in datasets.items() if v is not _FAILED}


def _named(r: _Reader, read, section: str, key, node, line):
    """A dataset or model: its name checked, then the entry itself."""
    r.name(key, section, line)
    return read(r, key, node, line)


def _models(r: _Reader, top: Node, datasets: dict) -> dict:
    """The suite's models; without ``models:``, the datasets' own embeddings."""
    if "models" not in top or top["models"] is None:
        return {
            PRECOMPUTED: Model(name=PRECOMPUTED, kind="precomputed", base_dir=r.base, line=None)
        }
    m_node = r.mapping(top["models"], "models", top.line_of("models"), "model name: {...}")
    models = {}
    for k, v in m_node.items():
        if _mentions(
            v, r.failed
        ):  # it names a dataset with its own error: its error would echo that one
            r.failed.add(k)
            continue
        read = functools.partial(_model, datasets=datasets)
        model = r.part(_named, r, read, "models", k, v, m_node.line_of(k), name=k)
        if model is not _FAILED:
            models[k] = model
    r.left_out["model"] = [k for k in m_node if k not in models]
    r.order["model"] = list(m_node)
    if RUN_MODEL in models and any(d.type == "run" for d in datasets.values()):
        raise r.error(
            f"the model name {RUN_MODEL!r} is the model of the suite's run datasets; rename this model.",
            "models",
            m_node.line_of(RUN_MODEL),
        )
    if not models and not m_node:  # (models that all had errors of their own are not 'no model')
        raise r.error(
            "declare at least one model, or leave models: out to use the datasets' own embeddings.",
            "models",
            top.line_of("models"),
        )
    return models


def _targets(c: Check) -> set:
    """The (model, datasets) items a check produces."""
    models = [m for m in c.models if m != c.baseline]
    sets = [c.datasets] if c.kind == "gap" else [(d,) for d in c.datasets]
    return {(m, ds) for m in models for ds in sets}


def _unique_ids(r: _Reader, checks_node, checks: list) -> list:
    """Explicit ids must be unique; a generated one gets _2, _3 only when its items would
    otherwise share a name with an earlier check's (same id, model and datasets)."""
    seen: dict[str, int] = {}
    taken: dict[str, set] = {}
    for i, c in enumerate(checks):
        explicit = "id" in checks_node[i]
        if explicit and c.id in seen:
            raise r.error(
                f"id {c.id!r} is already used by checks[{seen[c.id]}]; ids must be unique.",
                f"checks[{i}].id",
                checks_node[i].line_of("id"),
            )
        if not explicit and taken.get(c.id, set()) & _targets(c):
            n = 2
            while taken.get(f"{c.id}_{n}", set()) & _targets(c):
                n += 1
            checks[i] = c = replace(c, id=f"{c.id}_{n}")
        seen.setdefault(c.id, i)
        taken.setdefault(c.id, set()).update(_targets(c))
    return checks


def _check_cases(r: _Reader, suite: Suite) -> None:
    """Item names are unique, and file-based models have files for every dataset they meet."""
    names: dict = {}
    for case in suite.cases:
        if case.name in names:
            other = names[case.name]
            raise r.error(
                f"two items would both be named {case.name!r} (checks[{other.check.index}] on "
                f"{'/'.join((other.model, *other.datasets))} and this one on "
                f"{'/'.join((case.model, *case.datasets))}: names joined by '-' collide); give the "
                "check an id:, or rename a model or dataset.",
                f"checks[{case.check.index}]",
                case.check.line,
            )
        names[case.name] = case
        for m in (case.model, case.check.baseline):
            model = suite.models.get(m)
            beir = [d for d in case.datasets if suite.datasets[d].type == "beir"]
            if model is not None and beir and model.kind not in TEXT_KINDS:
                raise r.error(
                    f"dataset {beir[0]!r} holds texts (BEIR); model {m!r} is {model.kind}, which does "
                    f"not embed texts: use a {', '.join(TEXT_KINDS)} model, or limit the check with models:.",
                    f"checks[{case.check.index}]",
                    case.check.line,
                )
            if model is None or model.kind != "embeddings":
                continue
            for d in case.datasets:
                if d not in model.files:
                    raise r.error(
                        f"model {m!r} has embedding files for {', '.join(model.files)}, not for dataset "
                        f"{d!r}; add models.{m}.embeddings.{d}, or limit the check with models:.",
                        f"checks[{case.check.index}]",
                        case.check.line,
                    )
