"""A JSON Schema (draft 2020-12) of the YAML suite format, generated from the project's own
records so that it cannot drift from the loader: the option table
(:data:`retrieval_checks.options.OPTIONS`: types, choices, ranges, defaults), the metric
templates (:data:`retrieval_checks.metrics.METRIC_TEMPLATES` and the classifier metrics,
as a pattern), the dataset types with their parts and fields, the model kinds and the
check fields of :mod:`retrieval_checks.suites._schema`.

The schema is for editors and CI linters: it catches a misspelt field, a wrong type or an
option out of range as one types. :func:`~retrieval_checks.suites.load_suite` stays the
authority: it also checks what a schema cannot (that files exist, that a metric is measured
on the dataset's type, that a threshold is on the metric's scale, that names refer to
declared datasets and models). ``retrieval-checks schema`` prints it.
"""

from __future__ import annotations

import re

from ..gates._spec import GateSpec, fields_of
from ..metrics import CLASSIFIER_METRICS, METRIC_TEMPLATES
from ..metrics._names import ALIASES, TREC_CUT_NAMES, WHOLE_ALIASES
from ..options import EMBEDDING_TYPES, OPTIONS, Option
from . import _schema as s
from ._slices import (
    CHECK_SLICES_SCHEMA,
    DATASET_SLICES_SCHEMA,
    RUN_SLICES_SCHEMA,
    UNSLICED_SCHEMA,
)

__all__ = ["suite_json_schema", "metric_pattern", "SCHEMA_DIALECT"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

# the loader's rules written inline in _Reader (name, target, marker) and the fields of
# run and ann datasets (read by their own functions); tests/tracking/test_cli_validate.py
# checks them against the loader's own "Expected one of" messages
_NAME = r"^[A-Za-z0-9_.][A-Za-z0-9_.\-]*$"
_TARGET = r"^[^:\s]+:[A-Za-z_][A-Za-z0-9_.]*$"
_MARKER = r"^[A-Za-z][A-Za-z0-9_]*$"
_OWN_FIELDS = {
    "run": (
        "type",
        "run",
        "qrels",
        "relevance_level",
        "depth",
        "queries",
        "ignore_identical_ids",
        "slices",
    ),
    "ann": ("type", "queries", "gallery", "neighbors", "k", "slices"),
    "beir": ("type", "path", "split", "relevance_level", "ignore_identical_ids", "slices"),
}
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
# a template's parameter as a pattern: K a positive integer, P and Q precision or
# recall levels, p rbp's persistence, L an interpolated recall level, T a threshold
_PARAMS = {
    "K": "[1-9][0-9]*",
    "t=T": "t=" + _NUMBER,
    "P": _NUMBER,
    "Q": _NUMBER,
    "R": "R",
    "p": _NUMBER,
    "L": _NUMBER,
}


def metric_pattern() -> str:
    """A regular expression of the metric names a suite may write, built from
    :data:`METRIC_TEMPLATES` (K a positive integer, P and Q a number in (0, 1], T a
    similarity threshold), their aliases and the classifier metrics. Canonical
    spelling only: the loader also forgives case and spaces."""
    bases: dict[str, set] = {}
    for template in (*METRIC_TEMPLATES, *CLASSIFIER_METRICS):
        base, at, param = template.partition("@")
        if base == "map" and param == "R":
            bases.setdefault(base, set()).add("R")
            continue
        bases.setdefault(base, set()).add(_PARAMS[param] if at else None)
    for alias, target in ALIASES.items():
        if target in bases:
            bases.setdefault(alias, set()).update(bases[target])
    parts = []
    for base in sorted(bases):
        params = sorted(p for p in bases[base] if p is not None)
        tail = f"(?:@(?:{'|'.join(params)}))" if params else ""
        tail += "?" if None in bases[base] and params else ""
        parts.append(re.escape(base) + tail)
    # trec_eval's names with the parameter after an underscore, and other libraries' names
    parts += [f"{re.escape(b)}[_.](?:{_PARAMS[p]})" for b, p in sorted(TREC_CUT_NAMES.items())]
    parts += [re.escape(name) for name in (*sorted(WHOLE_ALIASES), "Rprec")]
    return "^(?:" + "|".join(parts) + ")$"


def _option(o: Option) -> dict:
    """One option of the shared table as a schema: its type, choices or range."""
    out: dict = {
        "description": f"{o.help} ({o.expected}; default {o.default!r})",
        "default": o.default,
    }
    if o.kind == "choice":
        out["enum"] = list(o.choices)
    elif o.kind == "skipped":
        out["anyOf"] = [
            {"type": "integer", "minimum": 0},
            {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
        ]
    elif o.kind in ("number", "integer"):
        out["type"] = o.kind
        if o.low is not None:
            out["exclusiveMinimum" if o.open_low else "minimum"] = o.low
        if o.high is not None:
            out["exclusiveMaximum" if o.open_high else "maximum"] = o.high
        if o.zero_or_least is not None:  # 0, or at least the table's least (n_resamples)
            least = {**out, "minimum": o.zero_or_least[0]}
            out = {k: v for k, v in out.items() if k in ("description", "default")}
            out["anyOf"] = [{"const": 0}, {k: v for k, v in least.items() if k not in out}]
    else:  # device, memory: the engine's parsers decide
        out["type"] = ["string", "integer"] if o.kind == "memory" else "string"
    if o.optional:
        out = {
            "description": out.pop("description"),
            "default": out.pop("default"),
            "anyOf": [{"type": "null"}, out],
        }
    return out


def _model_option(name: str) -> dict:
    """A model's own option: as the option table says, less the values only other dataset
    types take (``ties: docid``, trec_eval's order of document ids, which a model's
    embeddings do not have; the loader refuses it): ``Option.value_applies_to``."""
    option = OPTIONS[name]
    prop = _option(option)
    if "enum" in prop:
        prop = {**prop, "enum": [v for v in prop["enum"] if option.takes(v, EMBEDDING_TYPES)]}
    return prop


def _gate_field(g: GateSpec) -> dict:
    """One row of the gate-field table as a schema (a threshold's scale is the metric's:
    load_suite checks it)."""
    if g.kind == "value":  # the option's type and range, the row's meaning
        return {**_option(g.value), "description": f"{g.help} ({g.value.expected})"}
    out: dict = {"description": g.help}
    if g.kind == "choice":
        out["enum"] = list(g.choices_for())
    elif g.kind == "flag":
        out["type"] = "boolean"
    else:
        out["type"] = "number"
    if g.default is not None and not isinstance(g.default, dict):
        out["default"] = g.default
    return out


def _own(g: GateSpec) -> list:
    """The check kinds that write ``g`` as a check's own field (not inside a section)."""
    return [k for k in g.checks if g.section_for(k) == ""]


def _section(section: str) -> dict:
    """The gate fields of a check's ``compare:`` or ``baseline:`` mapping."""
    return {g.name: _gate_field(g) for g in fields_of(section=section)}


def _names_list(ref: str) -> dict:
    return {
        "anyOf": [
            {"$ref": ref},
            {"type": "array", "items": {"$ref": ref}, "minItems": 1, "uniqueItems": True},
        ]
    }


def _source(keys: tuple) -> dict:
    """A file of arrays: its path (relative to the suite), or {file: ..., key: array name}."""
    return {
        "anyOf": [
            {"$ref": "#/$defs/file"},
            {
                "type": "object",
                "required": ["file"],
                "additionalProperties": False,
                "properties": {
                    "file": {"$ref": "#/$defs/file"},
                    **{
                        k: {"type": "string", "description": f"the name of the {k} array"}
                        for k in keys[1:]
                    },
                },
            },
        ]
    }


def _dataset(kind: str) -> dict:
    """The fields of a dataset of type ``kind``."""
    parts = s._PART_NAMES[kind]
    props: dict = {"type": {"const": kind}}
    props.update({p: {"$ref": "#/$defs/source"} for p in parts})
    required = list(parts if kind != "retrieval" else parts[:1])
    if kind == "retrieval":
        props["slices"] = DATASET_SLICES_SCHEMA
    if kind == "image_text":
        props["protocol"] = {"enum": list(s._PROTOCOLS)}
        props["images_without_captions"] = {"enum": ["error", "drop"]}
        props["slices"] = DATASET_SLICES_SCHEMA  # columns of the images' file: per image
        props["caption_slices"] = DATASET_SLICES_SCHEMA  # of the captions' file: per caption
    elif kind == "run":
        props.update(
            run={"$ref": "#/$defs/file", "description": "a TREC run file"},
            qrels={"$ref": "#/$defs/file", "description": "a TREC qrels file"},
            relevance_level={"type": "integer", "minimum": 1},
            depth={"type": "integer", "minimum": 1},
            queries={
                "enum": ["both", "run", "qrels"],
                "default": "both",
                "description": "the queries averaged over: every query (both), the run's judged "
                "ones (run: trec_eval's default) or every judged one (qrels: trec_eval -c)",
            },
            ignore_identical_ids={
                "type": "boolean",
                "default": False,
                "description": "remove a retrieved document whose id is the query's from the run; "
                "it stays relevant (BEIR's rule)",
            },
            slices=RUN_SLICES_SCHEMA,
        )
        required = ["run", "qrels"]
    elif kind == "beir":
        props.update(
            path={
                "type": "string",
                "minLength": 1,
                "description": "a BEIR directory (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), "
                "relative to the suite file",
            },
            split={
                "type": "string",
                "pattern": r"^[A-Za-z0-9_.\-]+$",
                "default": "test",
                "description": "the qrels file qrels/<split>.tsv",
            },
            relevance_level={"type": "integer", "minimum": 1, "default": 1},
            slices=DATASET_SLICES_SCHEMA,
            ignore_identical_ids={
                "type": "boolean",
                "default": False,
                "description": "remove a document whose id is the query's from its "
                "ranking; it stays relevant (BEIR's rule and default)",
            },
        )
        required = ["path"]
    elif kind == "ann":
        props.update(
            queries={"$ref": "#/$defs/source"},
            gallery={"$ref": "#/$defs/source"},
            neighbors=_source(("file", "neighbors")),
            k={"type": "integer", "minimum": 1, "default": 10},
            slices=DATASET_SLICES_SCHEMA,
        )
        required = ["queries", "neighbors"]
    if kind != "retrieval":
        required.insert(0, "type")
    assert set(props) == set(_OWN_FIELDS.get(kind, props)), (
        kind
    )  # the table above names every field
    return {
        "type": "object",
        "title": f"a {kind} dataset",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def _model() -> dict:
    runners = s._RUNNERS
    props: dict = {
        "embeddings": {
            "type": "object",
            "propertyNames": {"$ref": "#/$defs/name"},
            "additionalProperties": {
                "anyOf": [
                    {"$ref": "#/$defs/source"},
                    {"type": "object", "additionalProperties": {"$ref": "#/$defs/source"}},
                ]
            },
            "description": "embedding files per dataset: dataset: file, or dataset: {part: file}",
        },
        "callable": {"$ref": "#/$defs/target"},
        "factory": {"$ref": "#/$defs/target"},
        "torchscript": {"$ref": "#/$defs/file"},
        "exported": {"$ref": "#/$defs/file"},
        "weights": {
            "$ref": "#/$defs/file",
            "description": "weights of a factory's module (weights_only=True)",
        },
        "kwargs": {"type": "object", "description": "keyword arguments of a callable or factory"},
        "batch_size": {"type": "integer", "minimum": 1, "default": 256},
        "device": {"type": "string", "description": OPTIONS["device"].expected},
        "cam_layer": {
            "type": "string",
            "minLength": 1,
            "description": "a name from model.named_modules()",
        },
        "timeout": _option(OPTIONS["timeout"]),
        **{
            k: {
                **_model_option(k),
                "description": f"this model's own {k} (overrides the suite's options; a "
                f"check's own field overrides it): {OPTIONS[k].help}",
            }
            for k in s.MODEL_OPTIONS
        },
        **_hub_props(),
    }
    assert set(runners) <= set(props)
    assert set(s._HUB_KEYS) <= set(props)
    return {
        "type": "object",
        "title": "a model",
        "properties": props,
        "additionalProperties": False,
        "oneOf": [{"required": [r]} for r in runners],
        "dependentRequired": {"weights": ["factory"], "config": ["checkpoint"]},
        "dependentSchemas": {
            "kwargs": {"anyOf": [{"required": ["callable"]}, {"required": ["factory"]}]},
            **{
                k: {"anyOf": [{"required": [kind]} for kind in s._hub_owners(k)]}
                for k in s._HUB_KEYS
            },
        },
        "description": f"exactly one of {', '.join(runners)}",
    }


def _hub_props() -> dict:
    """The fields of the library model kinds (sentence_transformers, huggingface,
    open_clip, timm) and of their settings."""
    text = {"type": "string", "minLength": 1}
    return {
        "sentence_transformers": {
            "$ref": "#/$defs/file",
            "description": "a saved SentenceTransformer directory",
        },
        "huggingface": {
            "$ref": "#/$defs/file",
            "description": "a directory with AutoModel and AutoTokenizer files",
        },
        "open_clip": {
            **text,
            "description": "the open_clip architecture (e.g. ViT-B-32); weights in checkpoint:",
        },
        "timm": {
            **text,
            "description": "a directory saved by timm, or an architecture with checkpoint:",
        },
        "checkpoint": {"$ref": "#/$defs/file", "description": "open_clip / timm weights file"},
        "config": {
            "$ref": "#/$defs/file",
            "description": "an open_clip JSON model config to register",
        },
        "query_prompt": {**text, "description": "text put before each query"},
        "document_prompt": {**text, "description": "text put before each document"},
        "query_prompt_name": {
            **text,
            "description": "a prompt name of the sentence-transformers model",
        },
        "document_prompt_name": {
            **text,
            "description": "a prompt name of the sentence-transformers model",
        },
        "normalize": {
            "type": "boolean",
            "default": False,
            "description": "L2-normalise the embeddings",
        },
        "max_length": {
            "type": "integer",
            "minimum": 1,
            "description": "tokens per input (longer ones are cut)",
        },
        "pooling": {"enum": ["mean", "cls"], "default": "mean"},
    }


def _rule_properties() -> dict:
    """The rule keys of a check: gap (its datasets), compare and baseline (their gate
    fields, from the gate-field table)."""
    return {
        "gap": {
            "type": "object",
            "properties": {"train": {"$ref": "#/$defs/name"}, "test": {"$ref": "#/$defs/name"}},
            "required": ["train", "test"],
            "additionalProperties": False,
        },
        "compare": {
            "anyOf": [
                {"$ref": "#/$defs/name"},
                {
                    "type": "object",
                    "required": ["baseline"],
                    "additionalProperties": False,
                    "properties": {"baseline": {"$ref": "#/$defs/name"}, **_section("compare")},
                },
            ]
        },
        "baseline": {
            "anyOf": [
                {"const": True},
                {"type": "null"},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": _section("baseline"),
                },
            ]
        },
    }


def _check() -> dict:
    rules = ("gap", "compare", "baseline")
    thresholds = {"anyOf": [{"required": ["at_least"]}, {"required": ["at_most"]}]}
    props: dict = {
        "metric": {
            "type": "string",
            "pattern": metric_pattern(),
            "description": "one of: "
            + ", ".join((*METRIC_TEMPLATES, *CLASSIFIER_METRICS))
            + " (K a positive integer, P and Q in (0, 1], p a persistence in (0, 1), L a recall level, T a similarity threshold)",
        },
        "dataset": {"$ref": "#/$defs/name"},
        "datasets": _names_list("#/$defs/name"),
        "model": {"$ref": "#/$defs/name"},
        "models": _names_list("#/$defs/name"),
        **{g.name: _gate_field(g) for g in fields_of(section="") if not g.shared},
        **_rule_properties(),
        "id": {"$ref": "#/$defs/name"},
        "markers": {"$ref": "#/$defs/markers"},
        "slices": CHECK_SLICES_SCHEMA,
        "unsliced": UNSLICED_SCHEMA,
        **{k: {"$ref": f"#/$defs/options/properties/{k}"} for k in s._OPTIONS},
    }
    only = [
        g
        for g in fields_of(section="")
        if not g.shared and "threshold" not in g.checks and set(g.checks) <= set(rules)
    ]
    assert set(props) == set(s.check_keys()), set(props) ^ set(s.check_keys())
    assert set(props["baseline"]["anyOf"][2]["properties"]) == set(s.section_keys("baseline"))
    return {
        "type": "object",
        "title": "a check",
        "properties": props,
        "required": ["metric"],
        "additionalProperties": False,
        "anyOf": [thresholds, *({"required": [r]} for r in rules)],
        "allOf": [
            {"not": {"required": list(pair)}}
            for pair in (
                ("gap", "compare"),
                ("gap", "baseline"),
                ("compare", "baseline"),
                ("dataset", "datasets"),
                ("model", "models"),
            )
        ],
        # a field of gap, compare or baseline checks only needs its rule's key (the kinds that
        # write it as a check's own field: min_power is a gap's own, inside compare: / baseline:)
        "dependentRequired": {g.name: _own(g) for g in only if len(_own(g)) == 1},
        "dependentSchemas": {
            **{r: {"not": thresholds} for r in rules},
            **{
                g.name: {"anyOf": [{"required": [k]} for k in _own(g)]}
                for g in only
                if len(_own(g)) > 1
            },
        },
    }


def _marker() -> dict:
    """One marker: a name, or a one-key mapping {name: args}."""
    return {
        "anyOf": [
            {"type": "string", "pattern": _MARKER},
            {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "propertyNames": {"pattern": _MARKER},
            },
        ]
    }


#: What a field means, where the schema built above has no description of its own (or,
#: with a leading "+ ", what to add to it), keyed by (where, field): where is "suite" (the
#: top level), "source", "model", "check" or a dataset type. The docs' YAML pages render
#: their field tables from the schema (docs/_hooks.py), so this is the one place these
#: meanings are written.
_MEANINGS = {
    ("suite", "suite"): "+; shown in messages",
    ("suite", "markers"): "pytest markers for every item: names (slow) or one-key mappings with "
    "arguments ({xfail: {reason: known, strict: true}}, {timeout: [60]}); markers named in a "
    "suite are registered, so --strict-markers accepts them",
    ("suite", "datasets"): "name: dataset",
    ("suite", "models"): "name: model; leave it out to evaluate the embeddings stored in the "
    "dataset files (the model is then called precomputed)",
    ("suite", "checks"): "the checks, a list",
    ("source", "file"): "path of the file of arrays, relative to the suite file",
    ("source", "embeddings"): "the (n x d) embeddings, for the precomputed model and for "
    "embedding files (default: embeddings)",
    ("source", "inputs"): "the (n x ...) model inputs, for callable, torchscript, exported and "
    "factory models (default: inputs)",
    ("source", "labels"): "one label per row, ints or strings; required for retrieval datasets "
    "(default: labels)",
    ("source", "ids"): "optional item ids: a gallery item with the query's id is the query "
    "itself (default: ids)",
    ("source", "image"): "captions only: the index of each caption's image (default: image)",
    ("source", "boxes"): "images datasets: each image's object box (default: boxes)",
    ("source", "masks"): "images datasets: each image's binary object mask (default: masks)",
    ("dataset", "type"): "retrieval (default), image_text, images (a classifier's inputs), run "
    "(a search's precomputed rankings), ann (an approximate index's neighbours) or beir (a "
    "directory in the BEIR layout, embedded by a text model)",
    ("retrieval", "queries"): "the query source",
    ("retrieval", "gallery"): "the gallery source; without it, leave-one-out (every query "
    "ranks the other queries)",
    ("image_text", "images"): "the images' source",
    ("image_text", "captions"): "the captions' source; it carries the image index array",
    ("image_text", "protocol"): "5k / all (default 5k), 1k or 5fold1k",
    ("image_text", "images_without_captions"): "error (default) or drop",
    ("image_text", "slices"): "per-image metadata: columns of the images' file (as a retrieval "
    "dataset's slices:); each slice is its images with their captions (i2t, t2i, rsum)",
    ("image_text", "caption_slices"): "per-caption metadata: columns of the captions' file; "
    "caption slices hold the t2i metrics only",
    ("images", "images"): "the source: inputs (N x C x H x W), labels, and boxes (N x 4: x0, "
    "y0, x1, y1, ends exclusive) or masks (N x H x W)",
    ("run", "run"): "+ (qid Q0 docid rank score tag; the score orders, the rank column and "
    "fields after the sixth are ignored; # comment lines skipped as trec_eval does), evaluated "
    "by rc.evaluate_run",
    ("run", "qrels"): "+ (qid 0 docid grade; grade -1: in the pool, not judged; # comment "
    "lines skipped)",
    ("run", "relevance_level"): "the least grade that counts as relevant (default 1; "
    "trec_eval's -l); ndcg uses the grades themselves",
    ("run", "depth"): "evaluate the top depth documents of each query (evaluate_run's k; "
    "default: the whole run)",
    ("run", "queries"): "+; with run or qrels a judged query without a relevant document "
    "scores 0 as in trec_eval (empty_queries: error still refuses it)",
    ("beir", "relevance_level"): "the least grade that counts as relevant (default 1)",
    ("ann", "queries"): "the query source, as for retrieval; labels are not needed, ids are "
    "used when present",
    ("ann", "gallery"): "the gallery source, as for retrieval (optional: leave-one-out)",
    ("ann", "neighbors"): "the index's results: a .npy file, or a source whose neighbors array "
    "holds them (an array named neighbors unless renamed): (n_queries x >= k) gallery row "
    "indices, best first, -1 for a missing result",
    ("ann", "k"): "the neighbours searched (default 10): checks gate ann_recall@K with K <= k, "
    "and a .npy with fewer columns is refused at load",
    ("model", "embeddings"): "precomputed embedding files, per dataset: {dataset: file} for a "
    "dataset with one part, {dataset: {queries: file, gallery: file}} (or images / captions) "
    "otherwise; each is a source. When both the file and the dataset's source carry ids, rows "
    "are matched by id: the same ids in another order are put in the dataset's order, other ids "
    "(missing, extra or repeated) are an error. Labels in these files, when present, must then "
    "equal the dataset's (without ids, a check that the rows are in the dataset's order)",
    ("model", "callable"): "module:function turning a dataset's inputs (a numpy array) into "
    "(n x d) embeddings (one dense real array or tensor: a sparse matrix, a dict or tuple of "
    "outputs, ragged rows, masked or complex values are refused naming the model); called with "
    "part= (queries, gallery, images, captions) when it accepts it. The module is a dotted "
    "name (modules next to the suite file import too) or a .py file relative to the suite",
    ("model", "torchscript"): "a TorchScript file (torch.jit.save; deprecated by torch 2.13 "
    "but still read)",
    ("model", "exported"): "a torch.export program saved with torch.export.save (e.g. "
    "model.pt2), exported with a dynamic batch dimension",
    ("model", "factory"): "module:function returning a torch.nn.Module; with weights: a "
    "state_dict file read with torch.load(weights_only=True) (or .safetensors) and loaded "
    "strictly",
    ("model", "weights"): "factory only: " + "the weights file, read with weights_only=True",
    ("model", "kwargs"): "callable and factory: keyword arguments of the function",
    ("model", "batch_size"): "torch models: rows per forward pass (default 256)",
    ("model", "device"): "torch models: overrides --rc-device: auto, cpu, torch-cpu, numpy, "
    "cuda or cuda:N",
    ("model", "cam_layer"): "classifiers: the layer whose Grad-CAM cam_iou measures (a name "
    "from model.named_modules())",
    ("model", "timeout"): "+; default --rc-timeout, else no limit; past it, the model's checks "
    "fail with ModelTimeoutError and the session goes on",
    ("model", "similarity"): "+. A compare check evaluates its baseline model with the "
    "baseline's own; refused when it applies to none of the suite's datasets; the result's "
    "config records what was used",
    ("model", "ties"): "+. As similarity above",
    ("check", "metric"): "any canonical metric name or alias (map, MAP@R, hit_rate@1, "
    "recall_at_precision@0.9, ...); an unknown name is an error with the closest name. ",
    ("check", "dataset"): "where to measure it; may be left out when the suite has a single "
    "dataset of the metric's type (retrieval, or image_text for cross-modal metrics)",
    ("check", "datasets"): "where to measure it, a list (or one name)",
    ("check", "model"): "which model (default: all)",
    ("check", "models"): "which models, a list (default: all)",
    ("check", "on"): "+: interval compares the interval's lower bound with at_least and its "
    "upper bound with at_most (grouped recall and image-text metrics have their own "
    "intervals, per-query metrics a 1000-resample bootstrap over classes); default value, "
    "upper for gaps",
    ("check", "gap"): "{train: dataset, test: dataset}: the generalization gap metric(train) "
    "- metric(test) with its interval (rc.generalization_gap); needs below:",
    ("check", "compare"): "a model name, or {baseline: model, rule: significant / "
    "non_inferior / value, margin: 0.01, min_power: 0.8}: a paired comparison of each model with "
    "the baseline on the same queries (rc.compare, then rc.assert_not_worse; rules as there; "
    "min_power needs a margin under rule significant, and is not read under rule value)",
    ("check", "baseline"): "{max_drop, max_relative_drop, direction, significant, min_power}, "
    "every field optional (baseline: true allows no drop at all): compare with the recorded "
    "baseline",
    ("check", "id"): "the item's name (default: the metric and the rule: map_at_least, "
    "grouped_recall@1_ci_at_least, map_between, map_gap, map_vs_production, map_vs_baseline; "
    "a repeat gets _2); unique within the suite, and two items whose names would collide "
    "(model and dataset names joined by -) are an error",
    ("check", "markers"): "pytest markers for this check's items, as at the top level "
    "(booleans only: a string condition such as skipif: 'sys.platform == \"win32\"' would be "
    "evaluated by pytest, so suites refuse it)",
}


def _describe(schema: dict) -> dict:
    """Write ``_MEANINGS`` into the schema's properties (every key must name a field)."""
    defs = schema["$defs"]
    places = {
        "suite": [schema["properties"]],
        "source": [defs["source"]["anyOf"][1]["properties"]],
        "model": [defs["model"]["properties"]],
        "check": [defs["check"]["properties"]],
        "dataset": [v["properties"] for v in defs["dataset"]["anyOf"]],
    }
    for variant in defs["dataset"]["anyOf"]:
        places[variant["properties"]["type"]["const"]] = [variant["properties"]]
    for (where, field), meaning in _MEANINGS.items():
        targets = [props for props in places[where] if field in props]
        assert targets, (where, field)  # a meaning of a field the schema no longer has
        for props in targets:  # a copy: one schema object can stand for several fields
            spec = props[field] = dict(props[field])
            if meaning.startswith("+"):
                spec["description"] = (spec.get("description", "") + meaning[1:]).strip()
            else:
                spec["description"] = meaning
    return schema


def suite_json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of a YAML suite, as a dict (``json.dumps`` it)."""
    top = {
        "suite": {
            "$ref": "#/$defs/name",
            "description": "the suite's name (default: the file's stem)",
        },
        "markers": {"$ref": "#/$defs/markers"},
        "options": {"$ref": "#/$defs/options"},
        "correction": {
            "enum": ["holm", "bh", "none"],
            "description": "multiplicity correction of the suite's significance-gated checks: holm "
            "(family-wise error rate), bh (false discovery rate) or none (default: the session's "
            "--rc-correction)",
        },
        "datasets": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"$ref": "#/$defs/name"},
            "additionalProperties": {"$ref": "#/$defs/dataset"},
        },
        "models": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "minProperties": 1,
                    "propertyNames": {"$ref": "#/$defs/name"},
                    "additionalProperties": {"$ref": "#/$defs/model"},
                },
            ]
        },
        "checks": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/check"}},
    }
    assert tuple(top) == s._TOP_KEYS
    marker = _marker()
    defs = {
        "name": {"type": "string", "pattern": _NAME, "maxLength": 100},
        "file": {
            "type": "string",
            "minLength": 1,
            "description": "a path relative to the suite file",
        },
        "target": {
            "type": "string",
            "pattern": _TARGET,
            "description": "module:function (a dotted module, or a .py file relative to the suite)",
        },
        "source": _source(s._SOURCE_KEYS),
        "markers": {"anyOf": [marker, {"type": "array", "items": marker}]},
        "options": {
            "type": "object",
            "additionalProperties": False,
            "properties": {k: _option(o) for k, o in s._OPTIONS.items()},
            "description": "evaluation options of every check (a check may override them)",
        },
        "dataset": {"anyOf": [_dataset(kind) for kind in s.DATASET_KINDS]},
        "model": _model(),
        "check": _check(),
    }
    return _describe(
        {
            "$schema": SCHEMA_DIALECT,
            "title": "retrieval-checks YAML suite",
            "description": "A YAML suite of retrieval-checks: datasets, models and checks (generated from the "
            "library's option table, metric templates and suite fields; load_suite also checks "
            "files, references and metric scales, which a schema cannot).",
            "type": "object",
            "properties": top,
            "required": ["datasets", "checks"],
            "additionalProperties": False,
            "$defs": defs,
        }
    )
