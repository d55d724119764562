"""Slices: the queries of one evaluation split by per-query metadata (a language, a
product category, a length bucket), each slice's metrics computed exactly on its own
queries.

A query-level metric's value on a subset of the queries is the aggregate of those
queries' own values (their ranking over the same gallery does not change), so each
slice is the evaluation restricted to its queries: :func:`subset_result` builds it, and
it equals ``evaluate`` run on that subset alone. Global metrics (pair metrics, the
discriminant ratio) and grouped recall (an interval over groups of labels) have no
per-query value and are not sliced.

Input forms (``slices=`` of ``evaluate`` and ``evaluate_run``):

- one value per query (a list, numpy array, torch tensor, pandas Series): one slicing,
  the slices named by the values (``"de"``);
- ``{dimension: values}``: several slicings, the slices named ``"dimension=value"``;
- ``{dimension: (metadata, function)}``: the slice value of a query is
  ``function(metadata[i])`` (``(lengths, lambda n: "long" if n > 20 else "short")``);
  the metadata may be a list of dicts or a pandas DataFrame (each row as a dict).

Values are strings, integers, floats or booleans, one type per dimension (mixed types
are an error: ``1`` and ``"1"`` would name two slices that print the same). ``None``
marks a query without a value: it is counted (``result.slices.missing``) and reported,
never dropped silently. NaN metadata is an error (use ``None`` for "no value").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..metrics._ranking import aggregate
from ._result import EvaluationResult

__all__ = [
    "SliceSet",
    "Slice",
    "make_slices",
    "subset_result",
    "attach_slices",
    "with_slices",
    "SINGLE",
]

#: The dimension name of ``slices=`` given as one array (its slices are named by value).
SINGLE = "slice"

_KINDS = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _kind(v) -> type | None:
    """The slice value's Python type (numpy scalars as their Python kin); None for a
    missing value; raises TypeError for anything else."""
    if v is None:
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool):
        return bool
    for t in (str, int, float):
        if isinstance(v, t):
            return t
    raise TypeError(type(v).__name__)


def _as_list(values, where: str, n_queries: int) -> list:
    if isinstance(values, (str, bytes)) or isinstance(values, Mapping):
        raise InputError(
            f"{where}: expected one value per query (a list or array of {n_queries}), found "
            f"{type(values).__name__}."
        )
    if hasattr(values, "detach") and hasattr(values, "cpu"):  # a torch tensor
        values = values.detach().cpu().numpy()
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):  # pandas
        # pandas' missing markers (pd.NA, NaT, and NaN in a text or object column) are "no
        # value" (None); NaN in a float column stays NaN (an error below, as in numpy)
        floats = getattr(getattr(values, "dtype", None), "kind", "") == "f"
        values = [
            None if type(v).__name__ in ("NAType", "NaTType") or (not floats and _is_nan(v)) else v
            for v in values.to_numpy(dtype=object)
        ]
    try:
        arr = np.asarray(values, dtype=object)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: could not read the values as one per query: {exc}.") from None
    if arr.ndim != 1:
        raise InputError(
            f"{where}: expected one value per query (1-D), found shape {arr.shape}; give one column."
        )
    if arr.shape[0] != n_queries:
        raise InputError(
            f"{where}: {arr.shape[0]} values for {n_queries} queries; give exactly one value per query, "
            "in the queries' order (None for a query without a value)."
        )
    return arr.tolist()


def _is_nan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _dimension_values(name: str, spec, n_queries: int, where: str) -> list:
    """One slice value (or None) per query for one dimension."""
    fn: Callable | None = None
    if isinstance(spec, tuple):
        if len(spec) != 2 or not callable(spec[1]):
            raise InputError(
                f"{where}: a tuple must be (metadata, function), the function mapping one query's metadata "
                f"to its slice value; found a tuple of {len(spec)}."
            )
        spec, fn = spec
    if callable(spec) and not hasattr(spec, "__len__"):
        raise InputError(
            f"{where}: a function alone has nothing to read; give (metadata, function), the metadata one value "
            "per query."
        )
    if fn is None and hasattr(spec, "detach") and hasattr(spec, "cpu"):  # a torch tensor
        spec = spec.detach().cpu().numpy()
    if fn is None and isinstance(spec, np.ndarray) and spec.dtype.kind in "biufUS":
        return _typed_values(spec, n_queries, where)  # one type already: checked at C speed
    if fn is not None and hasattr(spec, "to_dict") and hasattr(spec, "columns"):
        spec = spec.to_dict("records")  # a pandas DataFrame: the function gets each row as a dict
    meta = _as_list(spec, where, n_queries)
    for i, m in enumerate(meta):
        if _is_nan(m):
            raise InputError(
                f"{where}: query {i} has NaN metadata; NaN is not a slice value (it equals nothing, not even "
                "itself). Give None for a query without a value (counted and reported as missing) or fill it."
            )
    if fn is None:
        values = meta
    else:
        values = []
        for i, m in enumerate(meta):
            try:
                values.append(fn(m))
            except Exception as exc:  # the user's function: name where it failed
                raise InputError(
                    f"{where}: the slice function failed on query {i} (metadata {m!r}): "
                    f"{type(exc).__name__}: {exc}."
                ) from None
    kinds: dict[type, int] = {}
    for i, v in enumerate(values):
        if _is_nan(v):
            raise InputError(
                f"{where}: the slice value of query {i} is NaN; return None for a query without a slice "
                "(counted and reported as missing)."
            )
        try:
            k = _kind(v)
        except TypeError as exc:
            raise InputError(
                f"{where}: query {i} has a slice value of type {exc}; slice values are strings, integers, "
                "numbers or booleans (None: no value)."
            ) from None
        if k is str and not v.strip():
            _refuse_blank(where, i, v)
        if k is not None:
            kinds.setdefault(k, i)
    if len(kinds) > 1:
        shown = ", ".join(f"{_KINDS[k]} (query {i}: {values[i]!r})" for k, i in kinds.items())
        raise InputError(
            f"{where}: slice values of mixed types: {shown}; one dimension holds one type (1 and '1' would be "
            "two slices that print the same). Convert them, e.g. all to strings."
        )
    return [None if v is None else (v.item() if isinstance(v, np.generic) else v) for v in values]


def _typed_values(arr: np.ndarray, n_queries: int, where: str) -> list:
    """The slice values of a numpy array of one plain type (strings, integers, floats,
    booleans): its shape and NaNs checked without a Python loop."""
    if arr.ndim != 1:
        raise InputError(
            f"{where}: expected one value per query (1-D), found shape {arr.shape}; give one column."
        )
    if arr.shape[0] != n_queries:
        raise InputError(
            f"{where}: {arr.shape[0]} values for {n_queries} queries; give exactly one value per query, "
            "in the queries' order (None for a query without a value)."
        )
    if arr.dtype.kind == "f":
        nan = np.flatnonzero(np.isnan(arr))
        if nan.size:
            raise InputError(
                f"{where}: query {int(nan[0])} has NaN metadata ({nan.size} queries); NaN is not a slice value (it "
                "equals nothing, not even itself). Give None for a query without a value (an object array; "
                "counted and reported as missing) or fill it."
            )
    if arr.dtype.kind == "S":
        arr = arr.astype(str)  # bytes as text, as a slice name prints
    if arr.dtype.kind == "U":
        blank = np.flatnonzero(np.char.str_len(np.char.strip(arr)) == 0)
        if blank.size:
            _refuse_blank(where, int(blank[0]), str(arr[blank[0]]), int(blank.size))
    return arr.tolist()


def _refuse_blank(where: str, i: int, v: str, n: int = 1) -> None:
    """A blank slice value would name a slice that prints as nothing."""
    more = f" ({n} queries)" if n > 1 else ""
    raise InputError(
        f"{where}: query {i} has an empty slice value {v!r}{more}: a slice needs a visible name. "
        "Give None for a query without a value (counted and reported as missing), or a name."
    )


@dataclass(frozen=True)
class _Dimension:
    name: str
    values: list  # one per query, None: missing


def _by_id(spec: Mapping, query_ids, where: str) -> list:
    """A ``{query id: value}`` mapping as one value per query, in the result's order
    (ids compared as text, as ``evaluate_run`` compares them); queries it does not name
    have no value (counted as missing); ids it names that are not queries are an error."""
    ids = [str(q.item() if isinstance(q, np.generic) else q) for q in query_ids]
    given = {str(k): v for k, v in spec.items()}
    stray = [k for k in given if k not in set(ids)]
    if stray:
        raise InputError(
            f"{where}: {len(stray)} query ids are not queries of this evaluation ({', '.join(map(repr, stray[:5]))}"
            f"{' ...' if len(stray) > 5 else ''}); give slice values only for its queries."
        )
    return [given.get(q) for q in ids]


def _is_dimension_map(slices: Mapping) -> bool:
    """``{dimension: values}`` rather than one ``{query id: value}`` mapping."""
    return all(
        isinstance(v, (Mapping, tuple))
        or (hasattr(v, "__len__") and not isinstance(v, (str, bytes)))
        for v in slices.values()
    )


def _refuse_empty(slices, where: str) -> None:
    """An empty ``{}`` holds no dimension and no query: nothing to slice by."""
    if isinstance(slices, Mapping) and not slices:
        raise InputError(f"{where} is empty: give one value per query, or {{name: values}}.")


def _check_name(name, where: str) -> None:
    if not isinstance(name, str) or not name or "=" in name:
        raise InputError(
            f"{where}: dimension names are non-empty strings without '=' (found {name!r})."
        )


def refuse_positional(slices, query_ids=None, where: str = "slices") -> None:
    """A run's queries have no order a user can know (``evaluate_run`` sorts their
    ids), so values given by position would land on other queries without an error:
    only ``{query id: value}`` forms are taken. Judged on the form alone (with what
    else the form alone decides: an empty ``{}``, a dimension's name), so
    ``evaluate_run`` calls it before reading the run (``query_ids`` None: the message
    names none)."""
    _refuse_empty(slices, where)
    if isinstance(slices, Mapping) and not _is_dimension_map(slices):
        return  # one {query id: value} mapping
    if isinstance(slices, Mapping):
        for name in slices:
            _check_name(name, where)
        bad = [k for k, v in slices.items() if not isinstance(v, Mapping)]
        if not bad:
            return
        where = f"{where}[{bad[0]!r}]"
    shown = "" if query_ids is None else f" {', '.join(map(repr, list(query_ids)[:3]))} ..."
    raise InputError(
        f"{where}: a run's queries take slice values by query id: the run has no query order to "
        f"follow (the evaluation orders its ids{shown}), so values given by position would "
        "land on other queries. Give {qid: value}, or {dimension: {qid: value}}."
    )


def make_slices(
    slices, n_queries: int, *, where: str = "slices", query_ids=None, by_id_only: bool = False
) -> list[_Dimension]:
    """Validate ``slices=`` (see the module) into one list of values per dimension.
    With ``query_ids`` (``evaluate_run``), a dimension may also be ``{query id: value}``,
    and ``slices`` itself one such mapping; ``by_id_only`` (a run's result) takes only
    those forms."""
    if by_id_only:
        refuse_positional(slices, query_ids, where)
    if query_ids is not None and isinstance(slices, Mapping) and slices:
        if not _is_dimension_map(slices):
            slices = {SINGLE: slices}
        slices = {
            k: (
                _by_id(
                    v, query_ids, where if k == SINGLE and len(slices) == 1 else f"{where}[{k!r}]"
                )
                if isinstance(v, Mapping)
                else v
            )
            for k, v in slices.items()
        }
        if list(slices) == [SINGLE]:
            slices = slices[SINGLE]
    if isinstance(slices, Mapping):
        _refuse_empty(slices, where)
        dims = []
        for name, spec in slices.items():
            _check_name(name, where)
            dims.append(
                _Dimension(name, _dimension_values(name, spec, n_queries, f"{where}[{name!r}]"))
            )
        return dims
    return [_Dimension(SINGLE, _dimension_values(SINGLE, slices, n_queries, where))]


def slice_name(dimension: str, value) -> str:
    """How a slice is named: its value for the one unnamed dimension, else
    ``"dimension=value"``."""
    return str(value) if dimension == SINGLE else f"{dimension}={value}"


def _sliceable(result: EvaluationResult) -> list[str]:
    return [
        name for name in result if name in result.per_query and result.spec(name).kind != "grouped"
    ]


def subset_result(
    result: EvaluationResult, index, skipped_mask: np.ndarray | None = None
) -> EvaluationResult:
    """The evaluation restricted to the queries ``index`` (positions): their own
    per-query values and facts, the query-level metrics aggregated over them (what
    ``evaluate`` gives on those queries alone); global metrics and grouped recall are
    left out (they have no per-query value)."""
    idx = np.asarray(index, dtype=np.int64)
    names = _sliceable(result)
    per_query = {n: np.asarray(result.per_query[n])[idx] for n in names}
    if skipped_mask is None:  # (build_slices computes it once for every slice)
        skipped_mask = _skipped_mask(result)
    code = skipped_mask[idx]  # 1: skipped (empty), 2: outside the query set
    sub_skipped = np.flatnonzero(code == 1)
    sub_outside = np.flatnonzero(code == 2)
    specs = [result.spec(n) for n in names]
    values = {s.name: aggregate(s, per_query[s.name], skipped=code > 0) for s in specs}
    return EvaluationResult(
        specs=specs,
        values=values,
        per_query=per_query,
        thresholds={},
        pair_counts={},
        n_relevant=np.asarray(result.n_relevant)[idx],
        n_candidates=np.asarray(result.n_candidates)[idx],
        first_relevant_rank=np.asarray(result.first_relevant_rank)[idx],
        skipped_queries=sub_skipped,
        outside_queries=sub_outside,
        config=dict(result.config),
        query_label_codes=None
        if result.query_label_codes is None
        else np.asarray(result.query_label_codes)[idx],
        label_values=result.label_values,
        query_ids=None if result.query_ids is None else np.asarray(result.query_ids)[idx],
        provenance=result.provenance,  # the slice's values come from the same pass
    )


class Slice(Mapping):
    """One slice: a mapping from metric name to its value on the slice's queries, and
    ``result`` (the evaluation restricted to them: per-query values, counts, classes)."""

    def __init__(self, name: str, dimension: str, value, index: np.ndarray, result):
        self.name = name
        self.dimension = dimension
        self.value = value
        self.index = index
        self.result = result

    @property
    def n_queries(self) -> int:
        return int(self.index.size)

    @property
    def n_used(self) -> int:
        return self.result.n_used

    @property
    def n_skipped(self) -> int:
        return self.result.n_skipped

    @property
    def n_classes(self) -> int | None:
        """Classes among the used queries (None without labels): the units of a
        class-cluster interval."""
        codes = self.result.query_label_codes
        if codes is None:
            return None
        used = np.ones(self.n_queries, bool)
        used[self.result.skipped_queries] = False
        used[self.result.outside_queries] = False
        return int(np.unique(codes[used]).size)

    def __getitem__(self, metric: str) -> float:
        return self.result[metric]

    def __iter__(self) -> Iterator[str]:
        return iter(self.result)

    def __len__(self) -> int:
        return len(self.result)

    def __repr__(self) -> str:
        vals = ", ".join(f"{k}={v:.4f}" for k, v in self.result.items())
        return f"Slice({self.name!r}: {self.n_queries} queries, {vals})"


class SliceSet(Mapping):
    """``result.slices``: a mapping from slice name to :class:`Slice` (``"de"``, or
    ``"lang=de"`` with named dimensions), in order of first appearance; ``missing``:
    per dimension, how many queries have no slice value (they belong to no slice of
    it); ``dimensions``: the dimension names."""

    def __init__(self, slices: dict, missing: dict, dimensions: tuple):
        self._slices = slices
        self.missing = missing
        self.dimensions = dimensions

    def __getitem__(self, name) -> Slice:
        key = str(name)
        if key not in self._slices:
            known = ", ".join(map(repr, self._slices)) or "none"
            raise KeyError(f"no slice named {key!r}; slices: {known}")
        return self._slices[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._slices)

    def __len__(self) -> int:
        return len(self._slices)

    def by_metric(self, metric: str) -> dict[str, float]:
        """``{slice name: value of metric}``."""
        return {name: s[metric] for name, s in self._slices.items()}

    def unit_of(self, dimension) -> tuple[str, str]:
        """What ``dimension``'s values are given per, and so what ``missing`` counts:
        ``(word, the Slice attribute of its size)``; queries here."""
        return "queries", "n_queries"

    def missing_note(self) -> str:
        """A line naming the queries (units) without a slice value, or ""."""
        parts = [
            f"{n} {self.unit_of(d)[0]} have no {d if d != SINGLE else 'slice'} value"
            for d, n in self.missing.items()
            if n
        ]
        return ("; ".join(parts) + " (in no slice; counted, not gated)") if parts else ""

    def to_dict(self) -> dict:
        def clean(v):
            return None if isinstance(v, float) and math.isnan(v) else v

        return {
            "dimensions": list(self.dimensions),
            "missing": dict(self.missing),
            "slices": {
                name: {
                    "dimension": s.dimension,
                    "value": s.value,
                    "n_queries": s.n_queries,
                    "n_used": s.n_used,
                    "n_skipped": s.n_skipped,
                    "n_outside": s.result.n_outside,
                    "n_classes": s.n_classes,
                    "metrics": {k: clean(v) for k, v in s.items()},
                }
                for name, s in self._slices.items()
            },
        }

    def __repr__(self) -> str:
        lines = [f"SliceSet({len(self)} slices over {', '.join(self.dimensions)})"]
        lines += [f"  {s!r}" for s in self._slices.values()]
        if self.missing_note():
            lines.append("  " + self.missing_note())
        return "\n".join(lines)


def _skipped_mask(result: EvaluationResult) -> np.ndarray:
    """Per query: 0 used, 1 skipped (no relevant item), 2 outside the query set."""
    mask = np.zeros(result.n_queries, np.int8)
    mask[np.asarray(result.skipped_queries, dtype=np.int64)] = 1
    mask[np.asarray(getattr(result, "outside_queries", ()), dtype=np.int64)] = 2
    return mask


def _key_value(k):
    return k.item() if isinstance(k, np.generic) else k  # (an int beyond int64 stays an object)


def _groups(values: list):
    """(value, positions) of each distinct non-None value, in order of first appearance
    (positions ascending); sorting once keeps this O(n log n) for any number of slices."""
    present = np.flatnonzero(np.fromiter((v is not None for v in values), bool, len(values)))
    if present.size == 0:
        return []
    # one Python type per dimension (make_slices), so a typed array sorts at C speed
    arr = np.array([values[i] for i in present])
    keys, first, inv = np.unique(arr, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(keys.size + 1))
    return [
        (_key_value(keys[k]), present[order[bounds[k] : bounds[k + 1]]])
        for k in np.argsort(first, kind="stable")
    ]


def build_slices(result: EvaluationResult, dims: list[_Dimension]) -> SliceSet:
    slices: dict[str, Slice] = {}
    missing = {}
    skipped_mask = _skipped_mask(result)
    for dim in dims:
        missing[dim.name] = sum(v is None for v in dim.values)
        for v, index in _groups(dim.values):
            name = slice_name(dim.name, v)
            if name in slices:
                raise InputError(
                    f"slices: two slices are named {name!r} (dimension {dim.name!r}); rename a dimension."
                )
            slices[name] = Slice(
                name, dim.name, v, index, subset_result(result, index, skipped_mask)
            )
    return SliceSet(slices, missing, tuple(d.name for d in dims))


def attach_slices(result: EvaluationResult, dims: list[_Dimension]) -> EvaluationResult:
    """Set ``result.slices`` from validated dimensions (:func:`make_slices`)."""
    result.slices = build_slices(result, dims)
    return result


def with_slices(result: EvaluationResult, slices) -> EvaluationResult:
    """``result`` with ``result.slices`` set from ``slices`` (the forms of
    ``evaluate(..., slices=...)``; ``{query id: value}`` where the result has query
    ids): for a result computed without them, e.g. gathered from distributed ranks.
    The result is changed in place and returned.

    Parameters
    ----------
    result:
        An :class:`~retrieval_checks.EvaluationResult` (of ``evaluate``,
        ``evaluate_run`` or ``ann_recall``).
    slices:
        Per-query metadata: one value per query, ``{dimension: values}``,
        ``{dimension: (metadata, function)}``, or ``{query id: value}`` where the result
        has query ids (a run's results take ids only).

    Returns
    -------
    EvaluationResult
        The same object, with ``result.slices`` set.

    Raises
    ------
    InputError
        Not an EvaluationResult, metadata without one value per query, mixed value
        types in a dimension, NaN or blank values, unknown query ids.

    Examples
    --------
    >>> import numpy as np
    >>> import retrieval_checks as rc
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat(np.arange(12), 3)
    >>> x = rng.normal(size=(12, 8))[y] + 0.5 * rng.normal(size=(36, 8))
    >>> res = rc.evaluate(x, query_labels=y, metrics=["map"])
    >>> res.slices is None
    True
    >>> rc.with_slices(res, {"lang": np.where(y < 6, "de", "en")}) is res
    True
    >>> sorted(res.slices), round(res.slices["lang=de"]["map"], 4), res.slices["lang=de"].n_queries
    (['lang=de', 'lang=en'], 0.731, 18)
    >>> rc.with_slices(res, ["de"] * 35)
    Traceback (most recent call last):
    retrieval_checks.errors.InputError: slices: 35 values for 36 queries; give exactly one value per query, in the queries' order (None for a query without a value).
    """
    if not isinstance(result, EvaluationResult):
        raise InputError(
            f"with_slices expects an EvaluationResult from retrieval_checks.evaluate, got {type(result).__name__}."
        )
    dims = make_slices(
        slices,
        result.n_queries,
        query_ids=result.query_ids,
        by_id_only=result.config.get("source") == "run",
    )
    return attach_slices(result, dims)


def resolve_slices(slices, n_queries: int, query_ids=None):
    """``slices=`` as plain values (functions applied, columns validated): one list per
    dimension (``{name: values}``), or one list for the unnamed dimension. What a cache
    keys on: a function has no content to digest, its values do."""
    dims = make_slices(slices, n_queries, query_ids=query_ids)
    if [d.name for d in dims] == [SINGLE]:
        return dims[0].values
    return {d.name: d.values for d in dims}
