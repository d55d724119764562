"""Slices in YAML suites: where a dataset's per-query slice values come from, and the
``slices:`` field of a check.

A dataset declares its slices beside its parts (retrieval and BEIR datasets)::

    datasets:
      products:
        queries: {file: data/products.npz}
        slices: lang                      # an array of the queries' file, one value per query
      shop:
        queries: {file: data/shop.parquet}
        slices:                           # several dimensions, slices named "dimension=value"
          lang: lang
          category: {column: cat_id, map: {1: shoes, 2: bags}, default: other}
          length: {column: n_tokens, bins: [0, 8, 32, 1000]}
          region: {file: data/regions.npy}   # a file of its own (.npy: the column itself)

A column is read from the queries' file (any format the suites read: npz, pt,
safetensors, parquet; for BEIR a field of each query in ``queries.jsonl``), or from
``file:`` (``column:`` names the array; a ``.npy`` file is the column). ``map:`` turns
values into slice names (a value the map does not name is an error unless
``default:`` names its slice; ``null`` maps a value to "no slice"); ``bins:`` (rising
numbers) turn numbers into ``[a, b)`` slices, the last one closed. Nothing here runs
code from the YAML.

A check gates slices with ``slices:``: ``all`` (every slice), ``worst`` (the worst
slice, thresholds only) or a list of slice names; with ``at_least`` / ``at_most`` (and
``on``) it is :func:`~retrieval_checks.assert_slices` /
:func:`~retrieval_checks.assert_worst_slice`, with ``baseline:`` each slice is one
baseline record (``<check id>[model-dataset] slice=<name>``) gated by the baseline's
tolerances; a slice of the baselines file missing now is an error.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._suggest import did_you_mean
from ..data._files import metadata_column, read_arrays
from ..engine._slices import SINGLE, with_slices
from ..errors import InputError, SuiteError, warn_outside
from ..gates import assert_slices, assert_worst_slice, baseline_path, check_slice_baselines
from ..stats._slices import require_slices
from ._yaml import describe_value, join_field

__all__ = [
    "SliceColumn",
    "parse_dataset_slices",
    "parse_check_slices",
    "slice_values",
    "run_dataset_slices",
    "run_slices",
    "attach_run_slices",
]

_SPEC_KEYS = ("column", "file", "map", "default", "bins")


@dataclass(frozen=True)
class SliceColumn:
    """One slice dimension of a dataset: the column (or file) its values come from and
    the declared mapping (``map`` / ``default``) or ``bins``."""

    dimension: str
    column: str | None = None
    file: Path | None = None
    mapping: dict | None = None
    has_default: bool = False
    default: object = None
    bins: tuple | None = None
    line: int | None = None
    where: str = ""  # the YAML field, for errors

    def convert(self, values: list, where: str) -> list:
        """The slice value of each query (None: none)."""
        if self.mapping is not None:
            out, unmapped = [], []
            for v in values:
                key = _key(v)
                if key in self.mapping:
                    out.append(self.mapping[key])
                elif self.has_default:
                    out.append(self.default)
                else:
                    out.append(None)
                    if v is not None and key not in unmapped:
                        unmapped.append(key)
            if unmapped:
                shown = ", ".join(map(repr, unmapped[:8])) + (" ..." if len(unmapped) > 8 else "")
                raise InputError(
                    f"{where}: values {shown} are not in map: (it names {', '.join(map(repr, self.mapping))}); add "
                    "them to map:, or set default: <slice> for every other value."
                )
            return out
        if self.bins is not None:
            edges = self.bins
            out = []
            for i, v in enumerate(values):
                if v is None:
                    out.append(None)
                    continue
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise InputError(
                        f"{where}: query {i} has value {v!r}; bins: take finite numbers (NaN metadata is not a slice "
                        "value: give another column or fill it)."
                    )
                if not edges[0] <= v <= edges[-1]:
                    raise InputError(
                        f"{where}: query {i} has value {v!r}, outside bins [{_g(edges[0])}, {_g(edges[-1])}]; extend "
                        "the bins so that every value falls in one."
                    )
                j = min(int(np.searchsorted(edges, v, side="right")) - 1, len(edges) - 2)
                close = "]" if j == len(edges) - 2 else ")"
                out.append(f"[{_g(edges[j])}, {_g(edges[j + 1])}{close}")
            return out
        return values


def _g(x) -> str:
    return f"{x:g}"


def _key(v):
    """A value as a map key: numpy scalars as Python values."""
    return v.item() if isinstance(v, np.generic) else v


def _scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _one(r, name: str, value, field: str, line) -> SliceColumn:
    if isinstance(value, str):
        if not value:
            raise r.error("expected the name of a column of the queries' file.", field, line)
        return SliceColumn(name, column=value, line=line, where=field)
    node = r.mapping(value, field, line, "a column name, or {column: ..., map: ... | bins: ...}")
    r.keys(node, field, _SPEC_KEYS)
    if "column" not in node and "file" not in node:
        raise r.error(
            "give column: (an array of the queries' file) or file: (a file of its own).",
            field,
            line,
        )
    column = node.get("column")
    if column is not None and (not isinstance(column, str) or not column):
        raise r.error(
            f"expected the name of a column, found {describe_value(column)}.",
            join_field(field, "column"),
            node.line_of("column"),
        )
    path = None
    if "file" in node:
        path = r.file(node["file"], join_field(field, "file"), node.line_of("file"))
    if "map" in node and "bins" in node:
        raise r.error("give map: or bins:, not both.", field, line)
    mapping = _map_spec(r, node, field)
    if "default" in node and mapping is None:
        raise r.error(
            "default: goes with map:.", join_field(field, "default"), node.line_of("default")
        )
    if "default" in node and not _scalar(node["default"]):
        raise r.error(
            f"expected a slice name, found {describe_value(node['default'])}.",
            join_field(field, "default"),
            node.line_of("default"),
        )
    bins = _bins_spec(r, node, field)
    return SliceColumn(
        name,
        column=column,
        file=path,
        mapping=mapping,
        has_default="default" in node,
        default=node.get("default"),
        bins=bins,
        line=line,
        where=field,
    )


def _map_spec(r, node, field: str) -> dict | None:
    """A column's ``map:`` (value -> slice name), checked; None without one."""

    mapping = None
    if "map" in node:
        m = node["map"]
        mfield, mline = join_field(field, "map"), node.line_of("map")
        if not isinstance(m, dict) or not m:
            raise r.error(
                f"expected a mapping {{value: slice name}}, found {describe_value(m)}.",
                mfield,
                mline,
            )
        for k, v in m.items():
            if not _scalar(k) or k is None or not _scalar(v):
                raise r.error(
                    f"map: {k!r}: {v!r}: keys are the column's values and values slice names (strings, numbers; "
                    "null: no slice).",
                    mfield,
                    mline,
                )
        kinds = {type(v) for v in m.values() if v is not None}
        if len(kinds) > 1:
            raise r.error(
                f"map: slice names of mixed types ({', '.join(sorted(t.__name__ for t in kinds))}); quote them "
                "so that all are strings.",
                mfield,
                mline,
            )
        mapping = dict(m)
    return mapping


def _bins_spec(r, node, field: str) -> tuple | None:
    """A column's ``bins:`` (rising finite edges), checked; None without them."""

    bins = None
    if "bins" in node:
        b = node["bins"]
        bfield, bline = join_field(field, "bins"), node.line_of("bins")
        ok = (
            isinstance(b, list)
            and len(b) >= 2
            and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                for x in b
            )
        )
        if not ok or any(b[i] >= b[i + 1] for i in range(len(b) - 1)):
            raise r.error(
                f"expected at least two rising finite numbers (the edges: [0, 10, 100] gives [0, 10) and [10, "
                f"100]), found {describe_value(b)}.",
                bfield,
                bline,
            )
        bins = tuple(float(x) for x in b)
    return bins


def parse_dataset_slices(r, value, field: str, line) -> tuple:
    """A dataset's ``slices:`` as :class:`SliceColumn` dimensions."""
    if isinstance(value, str) or (
        isinstance(value, dict) and ("column" in value or "file" in value)
    ):
        return (_one(r, SINGLE, value, field, line),)
    node = r.mapping(value, field, line, "a column name, or {dimension: column, ...}")
    if not node:
        raise r.error("slices: is empty; name a column, or {dimension: column, ...}.", field, line)
    out = []
    for name, spec in node.items():
        sub = f"{field}.{name}"
        if not isinstance(name, str) or not name or "=" in name or name == SINGLE:
            raise r.error(
                f"dimension names are non-empty strings without '=' (and not {SINGLE!r}), found {name!r}.",
                sub,
                node.line_of(name),
            )
        out.append(_one(r, name, spec, sub, node.line_of(name)))
    return tuple(out)


#: What a check's ``slices:`` may say besides a list of names.
CHECK_CHOICES = ("all", "worst")


def parse_check_slices(r, value, field: str, line):
    """A check's ``slices:``: ``"all"``, ``"worst"`` or a tuple of slice names."""
    if isinstance(value, str):
        if value not in CHECK_CHOICES:
            raise r.error(
                f"expected all, worst or a list of slice names, found {value!r} (one named slice: [{value}]).",
                field,
                line,
            )
        return value
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value)
    ):
        raise r.error(
            f"expected all, worst or a non-empty list of slice names, found {value!r}.", field, line
        )
    names = tuple(str(v) for v in value)
    if len(set(names)) != len(names):
        raise r.error("a slice is named twice.", field, line)
    return names


def slice_values(columns: tuple, read, n_queries: int, dataset: str, suite_path) -> dict:
    """``{dimension: values}`` for ``evaluate(..., slices=...)``: each dimension's column
    read by ``read(column)`` (an array of the queries' file, or ``column.file``'s),
    converted by its map or bins; errors name the suite file, line and field."""
    out = {}
    for col in columns:
        try:
            raw = read(col)
            arr = np.asarray(raw)
            if arr.ndim != 1 or arr.shape[0] != n_queries:
                raise InputError(
                    f"the slice column has shape {arr.shape} for {n_queries} queries; give one value per query, "
                    "in the queries' order."
                )
            values = [_key(v) for v in arr.tolist()]
            for i, v in enumerate(values):
                if isinstance(v, float) and math.isnan(v):
                    raise InputError(
                        f"query {i} has NaN metadata; NaN is not a slice value (fill it, or map the column's "
                        "values with map:)."
                    )
            values = col.convert(values, f"column {col.column or col.file.name!r}")
        except InputError as exc:
            raise SuiteError(
                f"{exc}" if str(exc).startswith("column") else f"dataset {dataset!r} slices: {exc}",
                path=suite_path,
                line=col.line,
                field=col.where,
            ) from None
        out[col.dimension] = values
    if list(out) == [SINGLE]:
        return out[SINGLE]
    return out


def _threshold_kwargs(check) -> dict:
    if hasattr(check, "gate_kwargs"):
        return check.gate_kwargs("assert_metric")
    return {
        k: v
        for k, v in (("at_least", check.at_least), ("at_most", check.at_most), ("on", check.on))
        if v is not None
    }


def _baseline_kwargs(check) -> dict:
    if hasattr(check, "gate_kwargs"):
        return check.gate_kwargs("assert_no_regression")
    return dict(check.tolerances)


def gate_slices(runner, suite, case, result, options: dict) -> None:
    """Apply a check's ``slices:`` to ``result`` (a sliced evaluation): thresholds on
    every, the named or the worst slice; or each slice's baseline record."""
    __tracebackhide__ = True
    check = case.check
    name = check.metric.name
    require_slices(result, f"check {check.id!r}")
    if check.kind == "threshold":
        kw = _threshold_kwargs(check)
        if check.slices == "worst":
            assert_worst_slice(
                result,
                check.metric.name,
                confidence=options["confidence"],
                seed=options["seed"],
                unsliced=check.unsliced,
                **kw,
            )
            return
        assert_slices(
            result,
            name,
            slices=None if check.slices == "all" else list(check.slices),
            confidence=options["confidence"],
            seed=options["seed"],
            unsliced=check.unsliced,
            **kw,
        )
        return
    _baseline_slices(runner, suite, case, result, options)


def _baseline_slices(runner, suite, case, result, options) -> None:
    """A baseline check per slice: :func:`~retrieval_checks.gates.check_slice_baselines`
    on the suite's baselines file, keyed by the case."""
    __tracebackhide__ = True
    check = case.check
    tolerances = _baseline_kwargs(check)
    check_slice_baselines(
        runner.baselines,
        result,
        check.metric.name,
        path=baseline_path(suite.path),
        key=case.name,
        slices=None if check.slices == "all" else list(check.slices),
        max_drop=tolerances.get("max_drop"),
        max_relative_drop=tolerances.get("max_relative_drop"),
        confidence=options["confidence"],
        seed=options["seed"],
        context={"model": case.model, "dataset": case.datasets[0]},
        unsliced=check.unsliced,
    )


#: Baseline fields a check with ``slices:`` takes (each slice is compared with its own
#: stored value; a significance test per slice is not offered).
SLICE_BASELINE_FIELDS = ("max_drop", "max_relative_drop")


def check_slices(r, node, field: str, kind: str, spec, datasets, suite_datasets: dict):
    """A check's ``slices:`` (None without one), checked against its kind, its metric
    and its datasets (each must declare ``slices:``)."""
    if "slices" not in node:
        return None
    sfield, sline = f"{field}.slices", node.line_of("slices")
    value = parse_check_slices(r, node["slices"], sfield, sline)
    if kind not in ("threshold", "baseline"):
        raise r.error(
            f"slices: goes with a threshold (at_least / at_most) or a baseline: check; a {kind} check compares "
            "whole evaluations.",
            sfield,
            sline,
        )
    if value == "worst" and kind != "threshold":
        raise r.error(
            "slices: worst goes with at_least / at_most; a baseline check gates every slice (all) or named ones.",
            sfield,
            sline,
        )
    section = node.get("baseline") if kind == "baseline" else None
    if isinstance(section, dict):
        for k in section:
            if k not in SLICE_BASELINE_FIELDS:
                raise r.error(
                    f"{k} is not taken by a baseline check with slices: (each slice is compared with its own "
                    f"stored value by {' / '.join(SLICE_BASELINE_FIELDS)}); drop {k}, or gate the whole "
                    "evaluation in a check without slices:.",
                    f"{field}.baseline.{k}",
                    section.line_of(k) if hasattr(section, "line_of") else sline,
                )
    if spec.kind not in ("query", "crossmodal"):
        raise r.error(
            f"{spec.name} has no per-query values (a {spec.kind} metric), so it has no value per slice; slice a "
            "query-level metric (map, ndcg@10, hit_rate@1, ...) or an image-text one.",
            sfield,
            sline,
        )
    for d in datasets:
        ds = suite_datasets[d]
        if ds.type == "image_text":
            if not ds.slices and not ds.caption_slices:
                raise r.error(
                    f"dataset {d!r} declares no slices; add slices: <column> (an array of its images' file, one "
                    f"value per image) or caption_slices: <column> (of its captions' file) to datasets.{d}.",
                    sfield,
                    sline,
                )
            if not ds.slices and not spec.family.startswith("t2i"):
                raise r.error(
                    f"{spec.name} needs image slices: dataset {d!r} declares caption_slices only, and "
                    "caption_slices hold t2i metrics only (a caption slice has no image queries; rsum adds "
                    f"both directions). Add slices: <column of the images' file> to datasets.{d}, or gate a "
                    "t2i metric.",
                    sfield,
                    sline,
                )
            continue
        if not getattr(ds, "slices", ()):
            raise r.error(
                f"dataset {d!r} declares no slices; add slices: <column> to datasets.{d} (an array of its queries' "
                "file, one value per query).",
                sfield,
                sline,
            )
    return value


def dataset_slices(runner, suite, dataset, part, dims=None) -> dict | list:
    """The slice values of a retrieval dataset's queries (``part``: its queries part), or
    of an image_text dataset's images or captions (``dims``: the dataset's
    ``caption_slices``, read from the captions' part)."""
    n = int(part.embeddings.shape[0])

    def read(col: SliceColumn):
        source = col.file if col.file is not None else part.source.file
        arrays = runner._arrays_of(source)
        if "" in arrays:  # a .npy file: one array
            if col.file is not None:
                return metadata_column(arrays[""])
            raise InputError(
                f"{source.name} is a .npy file (one array, the embeddings); slice values need a file with named arrays "
                "(.npz, .pt, .safetensors, .parquet), or file: <a .npy of the slice values>."
            )
        if col.column is None:
            raise InputError(
                f"{source.name} holds several arrays ({', '.join(map(repr, arrays))}); name one with column:."
            )
        if col.column not in arrays:
            close = did_you_mean(col.column, arrays)
            raise InputError(
                f"column {col.column!r} is not in {source.name}; it has {', '.join(map(repr, arrays)) or 'none'}."
                + (f" Did you mean {close!r}?" if close else "")
            )
        # a null (parquet) or a blank text is a query without a value, counted as missing
        return metadata_column(
            arrays.nullable(col.column) if hasattr(arrays, "nullable") else arrays[col.column]
        )

    return slice_values(dataset.slices if dims is None else dims, read, n, dataset.name, suite.path)


def slice_column_errors(suite) -> list[SuiteError]:
    """``retrieval-checks validate``'s look at the data: each slice column that a readable
    queries file (an image_text dataset: its images' or captions' file; or ``file:``)
    lacks, located at the column's line. Only the array names are read (no data); a file
    that cannot be read, a ``.npy`` file and BEIR fields are left to the run, which
    reports them."""
    out = []
    for dataset in suite.datasets.values():
        parts = dataset.parts if isinstance(dataset.parts, dict) else {}
        # (columns, the part whose file they read): an image_text dataset's images and captions
        if dataset.type == "image_text":
            pairs = [
                (dataset.slices, parts.get("images")),
                (dataset.caption_slices, parts.get("captions")),
            ]
        elif dataset.type == "beir":
            pairs = []
        else:
            pairs = [(dataset.slices, parts.get("queries"))]
        for columns, part in pairs:
            out += _missing_columns(suite, dataset, columns or (), part)
    return out


def array_names(file) -> list | None:
    """The array names of a data file (only the names are read); None for a ``.npy``
    file (one array, no names) or a file that cannot be read here: the run says why.
    The one reader behind ``retrieval-checks validate``'s look at the data:
    :func:`slice_column_errors` here and ``array_errors`` in ``suites._run``."""
    if Path(file).suffix.lower() == ".npy":
        return None
    try:
        return list(read_arrays(file))
    except (InputError, OSError, ValueError):
        return None


def _missing_columns(suite, dataset, columns, part) -> list[SuiteError]:
    """The errors of :func:`slice_column_errors` for the columns read from ``part``'s
    file (or their own ``file:``)."""
    out = []
    for col in columns if part is not None else ():
        source = col.file if col.file is not None else getattr(part, "file", None)
        if col.column is None or source is None:
            continue
        names = array_names(source)
        if names is not None and col.column not in names:
            close = did_you_mean(col.column, names)
            out.append(
                SuiteError(
                    f"dataset {dataset.name!r} slices: column {col.column!r} is not in "
                    f"{Path(source).name}; it has {', '.join(map(repr, names)) or 'none'}."
                    + (f" Did you mean {close!r}?" if close else ""),
                    path=suite.path,
                    line=col.line,
                    field=col.where,
                )
            )
    return out


#: JSON schema (``retrieval-checks schema``) of a check's ``slices:``.
#: ``unsliced:`` beside ``slices: all`` / ``worst`` (gates/_slices.py: UNSLICED)
UNSLICED_CHOICES = ("fail", "ignore")

UNSLICED_SCHEMA = {
    "description": "beside slices: all / worst (or a baseline check's slices: all): what the gate does "
    "while queries have no slice value: fail (default: the gate cannot see them) or ignore (count and "
    "report them, gate the slices only)",
    "enum": list(UNSLICED_CHOICES),
}


def check_unsliced(r, node, field: str, slices) -> str:
    """A check's ``unsliced:`` ("fail" when absent), which only a gate over every slice
    takes: ``slices: all`` or ``worst``."""
    if "unsliced" not in node:
        return "fail"
    ufield, uline = f"{field}.unsliced", node.line_of("unsliced")
    if slices is None:
        raise r.error(
            "unsliced: goes with slices: all or slices: worst (what a gate over every slice does with queries "
            "that have no slice value); this check has no slices:.",
            ufield,
            uline,
        )
    if slices not in CHECK_CHOICES:
        raise r.error(
            "unsliced: goes with slices: all or slices: worst; a check that names its slices gates those only, "
            "so queries without a value do not concern it. Drop unsliced:, or gate every slice.",
            ufield,
            uline,
        )
    value = node["unsliced"]
    if not isinstance(value, str) or value not in UNSLICED_CHOICES:
        raise r.error(
            f"unsliced: {value!r}: use fail (the default: the gate fails while queries have no slice value, "
            "since it cannot see them) or ignore (count and report them, gate the slices only).",
            ufield,
            uline,
        )
    return value


CHECK_SLICES_SCHEMA = {
    "description": "gate the slices of the dataset: all, the worst, or the named ones",
    "anyOf": [
        {"enum": list(CHECK_CHOICES)},
        {
            "type": "array",
            "minItems": 1,
            "uniqueItems": True,
            "items": {"type": ["string", "integer"]},
        },
    ],
}

_COLUMN = {
    "anyOf": [
        {"type": "string", "minLength": 1, "description": "an array of the queries' file"},
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "column": {"type": "string", "minLength": 1},
                "file": {"type": "string", "minLength": 1},
                "map": {"type": "object", "minProperties": 1},
                "default": {"type": ["string", "number", "boolean", "null"]},
                "bins": {"type": "array", "minItems": 2, "items": {"type": "number"}},
            },
        },
    ]
}

#: JSON schema of a dataset's ``slices:``: one column (or spec), or named dimensions.
DATASET_SLICES_SCHEMA = {
    "description": "per-query slice values: a column of the queries' file, or {dimension: column}",
    "anyOf": [_COLUMN, {"type": "object", "minProperties": 1, "additionalProperties": _COLUMN}],
}

_RUN_COLUMN = {
    "type": "object",
    "additionalProperties": False,
    "required": ["file"],
    "properties": {
        **_COLUMN["anyOf"][1]["properties"],
        "file": {
            "type": "string",
            "pattern": r"(?i)\.(tsv|txt|csv|json)$",
            "description": "query ids and values: 'qid value' lines (.tsv/.txt/.csv; with column: a "
            "header line, the query id first) or a .json object {qid: value}",
        },
    },
}

#: JSON schema of a run dataset's ``slices:``: files of query ids and values.
RUN_SLICES_SCHEMA = {
    "description": "per-query slice values of a run dataset: a file of query ids and values, or "
    "{dimension: {file: ...}}",
    "anyOf": [
        _RUN_COLUMN,
        {"type": "object", "minProperties": 1, "additionalProperties": _RUN_COLUMN},
    ],
}


def slice_check_id(check_id: str, slices, given: bool) -> str:
    """A slice check's default id: the plain check's with ``_slices`` (``_worst_slice``)
    appended, so that it differs from a check of the whole evaluation; an id the suite
    gives is kept."""
    if given or slices is None:
        return check_id
    return f"{check_id}_{'worst_slice' if slices == 'worst' else 'slices'}"


def _field_of(record: dict, path: str):
    """``record[path]``, a dotted path reaching into objects (``metadata.lang``); None
    when absent."""
    value = record
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def beir_slices(suite, dataset, data) -> dict | list:
    """The slice values of a BEIR dataset's judged queries: each column is a field of the
    query's ``queries.jsonl`` object (a dotted path reaches into ``metadata``); a query
    without the field has no value (counted as missing)."""
    n = len(data.query_ids)

    def read(col: SliceColumn):
        if col.file is not None or col.column is None:
            raise InputError(
                "a BEIR dataset's slices name a field of each query in queries.jsonl (column: metadata.lang), "
                "not a file."
            )
        values = []
        for qid, record in zip(data.query_ids, data.query_fields or [{}] * n):
            v = _field_of(record, col.column)
            if isinstance(v, (dict, list)):
                raise InputError(
                    f"queries.jsonl: query {qid!r} has {type(v).__name__} {str(v)[:40]} in {col.column!r}; a slice "
                    "value is a string, number or boolean (name a field inside it: column: a.b)."
                )
            values.append(v)
        return np.array(values, dtype=object)

    return slice_values(dataset.slices, read, n, dataset.name, suite.path)


# ----------------------------------------------------------------------------- run datasets
#: The files a run dataset's slice values come from (a run has no queries file).
RUN_SLICE_SUFFIXES = (".tsv", ".txt", ".csv", ".json", ".jsonl")

#: The fields a JSON-lines query record names its id with (BEIR's ``_id`` first).
JSONL_ID_KEYS = ("_id", "qid", "query_id", "id")


def run_dataset_slices(r, value, field: str, line) -> tuple:
    """A ``type: run`` dataset's ``slices:``: each dimension a file of query ids and
    values (``file: topics.tsv``, lines ``qid value``; with ``column:``, a header line
    naming the columns, the query id first; ``.json``: ``{qid: value}`` or, with
    ``column:``, ``{qid: {field: value}}``), converted by ``map:`` / ``bins:``."""
    columns = parse_dataset_slices(r, value, field, line)
    for col in columns:
        if col.file is None:
            raise r.error(
                f"a run dataset has no queries file to read column {col.column!r} from: give the slice "
                f"values in a file of their own, {{file: topics.tsv}} (lines 'qid value'), {{file: topics.tsv, "
                f"column: {col.column or 'lang'}}} (a header line naming the columns, the query id first) or "
                "{file: topics.json} ({qid: value}).",
                col.where,
                col.line,
            )
        if col.file.suffix.lower() not in RUN_SLICE_SUFFIXES:
            raise r.error(
                f"{col.file.name}: a run dataset's slice values are read from a text file of query ids and "
                f"values ({', '.join(RUN_SLICE_SUFFIXES)}), found {col.file.suffix or 'no suffix'}.",
                col.where,
                col.line,
            )
        if col.file.suffix.lower() == ".jsonl" and col.column is None:
            raise r.error(
                f"{col.file.name}: JSON lines hold one object per query; name the field with column: "
                f"({{file: {col.file.name}, column: lang}}, or column: metadata.lang for a nested one).",
                col.where,
                col.line,
            )
    return columns


def _numbers(values: list) -> list:
    """A text column's values as numbers when every present one reads as a number
    (integers when all are integers), else as they are (text)."""
    present = [v for v in values if v is not None]
    if not present or not all(isinstance(v, str) for v in present):
        return values
    for kind in (int, float):
        try:
            converted = {v: kind(v) for v in set(present)}
        except ValueError:
            continue
        return [None if v is None else converted[v] for v in values]
    return values


def _read_run_text(path: Path, column: str | None) -> dict:
    """``{qid: value}`` from a text file: ``qid value`` lines, or with ``column`` a header
    line naming the columns (the query id first); ``#`` lines and blank lines skipped;
    an empty field is no value (None)."""
    suffix = path.suffix.lower()
    delimiter = {".csv": ",", ".tsv": "\t"}.get(suffix)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path.name} could not be read ({type(exc).__name__}: {exc}).") from None
    rows = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if (
            delimiter is None
        ):  # .txt: whitespace; without a column, the rest of the line is the value
            fields = raw.split(None, 1 if column is None else -1)
        else:
            fields = next(csv.reader([raw], delimiter=delimiter))
        rows.append((number, [f.strip() for f in fields]))
    if not rows:
        raise InputError(f"{path.name} holds no query ids and values.")
    at = 1
    if column is not None:
        (hline, header), rows = rows[0], rows[1:]
        if column not in header[1:]:
            close = did_you_mean(column, header[1:])
            raise InputError(
                f"column {column!r} is not in {path.name}'s header (line {hline}: "
                f"{', '.join(map(repr, header))}; the query id is the first column)."
                + (f" Did you mean {close!r}?" if close else "")
            )
        at = header.index(column)
    out: dict = {}
    for number, fields in rows:
        if len(fields) <= at or (column is None and len(fields) != 2):
            want = "a query id and a value" if column is None else f"{at + 1} fields"
            raise InputError(
                f"{path.name}:{number}: expected {want}, found {len(fields)} field(s): {fields!r}."
            )
        qid, value = fields[0], fields[at]
        if qid in out:
            raise InputError(
                f"{path.name}:{number}: query {qid!r} is given twice; one value per query."
            )
        out[qid] = value if value != "" else None
    keys = list(out)
    return dict(zip(keys, _numbers([out[k] for k in keys])))


def _read_run_json(path: Path, column: str | None) -> dict:
    """``{qid: value}`` from a JSON object (``{qid: {field: value}}`` with ``column``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path.name} could not be read ({type(exc).__name__}: {exc}).") from None
    if not isinstance(data, dict) or not data:
        raise InputError(
            f"{path.name}: expected a JSON object {{query id: value}}, found {type(data).__name__}."
        )
    out = {}
    for qid, v in data.items():
        if column is not None:
            if not isinstance(v, dict):
                raise InputError(
                    f"{path.name}: query {qid!r} holds {type(v).__name__}, not an object with field "
                    f"{column!r} (without column:, the file maps each query id to its value)."
                )
            v = _field_of(v, column)
        if isinstance(v, (dict, list)):
            raise InputError(
                f"{path.name}: query {qid!r} has {type(v).__name__} {str(v)[:40]}; a slice value is a string, "
                "number or boolean" + ("" if column else " (name a field of it with column:)") + "."
            )
        out[str(qid)] = v
    return out


def _read_run_jsonl(path: Path, column: str | None) -> dict:
    """``{qid: value}`` from JSON lines, one object per query (BEIR's ``queries.jsonl``
    form): its id under one of :data:`JSONL_ID_KEYS`, its value the field ``column``
    (a dotted path reaches into nested objects: ``metadata.lang``); blank lines skipped."""
    if column is None:
        raise InputError(
            f"{path.name}: JSON lines hold one object per query; name the field with column: (column: lang, "
            "or column: metadata.lang for a nested one)."
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path.name} could not be read ({type(exc).__name__}: {exc}).") from None
    out: dict = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            record, why = None, f" ({exc})"
        else:
            why = ""
        if not isinstance(record, dict):
            raise InputError(f"{path.name}:{number}: not a JSON object{why}; one object per line.")
        key = next((k for k in JSONL_ID_KEYS if k in record), None)
        if key is None:
            raise InputError(
                f"{path.name}:{number}: no query id (a field {' / '.join(JSONL_ID_KEYS)}); found "
                f"{', '.join(map(repr, list(record)[:6])) or 'an empty object'}."
            )
        qid = str(record[key])
        if qid in out:
            raise InputError(
                f"{path.name}:{number}: query {qid!r} is given twice; one value per query."
            )
        v = _field_of(record, column)
        if isinstance(v, (dict, list)):
            raise InputError(
                f"{path.name}:{number}: query {qid!r} has {type(v).__name__} {str(v)[:40]} in {column!r}; a slice "
                "value is a string, number or boolean (name a field inside it: column: a.b)."
            )
        out[qid] = v
    if not out:
        raise InputError(f"{path.name} holds no query records.")
    return out


_RUN_READERS = {".json": _read_run_json, ".jsonl": _read_run_jsonl}


def run_slices(suite, dataset) -> dict:
    """``{dimension: {query id: slice value}}`` of a run dataset (map / bins applied);
    errors name the suite file, the column's line and field."""
    out = {}
    for col in dataset.slices:
        try:
            read = _RUN_READERS.get(col.file.suffix.lower(), _read_run_text)
            by_id = read(col.file, col.column)
            for qid, v in by_id.items():
                if isinstance(v, float) and math.isnan(v):
                    raise InputError(
                        f"{col.file.name}: query {qid!r} has NaN metadata; NaN is not a slice value (leave the "
                        "field empty for a query without a value, or fill it)."
                    )
            ids = list(by_id)
            converted = col.convert(
                [by_id[q] for q in ids], f"column {col.column or col.file.name!r}"
            )
        except InputError as exc:
            raise SuiteError(
                f"dataset {dataset.name!r} slices: {exc}",
                path=suite.path,
                line=col.line,
                field=col.where,
            ) from None
        out[col.dimension] = dict(zip(ids, converted))
    return out


def attach_run_slices(suite, dataset, result):
    """Set a run dataset's slices on its result: each file's values of the evaluated
    queries. Ids of the file that are not evaluated (a topics file covering more
    queries than the run) are named in a RuntimeWarning; a file none of whose ids is
    an evaluated query (another id format) is an error."""
    evaluated = [str(q) for q in result.query_ids]
    known = set(evaluated)
    spec = {}
    by_dim = run_slices(suite, dataset)
    for col in dataset.slices:
        by_id = by_dim[col.dimension]
        extra = [q for q in by_id if q not in known]
        if len(extra) == len(by_id):
            raise SuiteError(
                f"dataset {dataset.name!r} slices: none of the {len(by_id)} query ids of {col.file.name} "
                f"({', '.join(map(repr, list(by_id)[:3]))} ...) is a query of the run's evaluation "
                f"({', '.join(map(repr, evaluated[:3]))} ...); give the ids as the run and qrels write them.",
                path=suite.path,
                line=col.line,
                field=col.where,
            )
        if extra:
            warn_outside(
                f"dataset {dataset.name!r} slices: {len(extra)} query ids of {col.file.name} are not evaluated "
                f"queries ({', '.join(map(repr, extra[:5]))}{' ...' if len(extra) > 5 else ''}); their "
                "values are not used.",
                RuntimeWarning,
            )
        spec[col.dimension] = {q: v for q, v in by_id.items() if q in known}
    try:
        return with_slices(result, spec)
    except InputError as exc:  # mixed types, blank names: at the dimension's line
        col = next((c for c in dataset.slices if repr(c.dimension) in str(exc)), dataset.slices[0])
        raise SuiteError(
            f"dataset {dataset.name!r} slices ({col.file.name}): {exc}",
            path=suite.path,
            line=col.line,
            field=col.where,
        ) from None
