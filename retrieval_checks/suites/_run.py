"""Running the cases of YAML suites: embeddings, one engine pass per (model, dataset)
and options, and the gate each check names.

:class:`SuiteRunner` holds the caches of a session (or of one pytest-xdist worker):
arrays read from files, models built, embeddings (also on disk through
:class:`~retrieval_checks._models.EmbeddingCache`) and evaluation results. Every
check on the same (model, dataset, evaluation options) shares one evaluation whose
metrics are the union of what those checks measure.
"""

from __future__ import annotations

import contextlib
import numbers
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._suggest import did_you_mean, hint
from ..classifiers._measures import evaluate_classifier
from ..data import read_arrays, read_npy
from ..data._beir import read_beir
from ..data._files import closest_key
from ..engine import EvaluationCache, evaluate, evaluate_image_text
from ..engine._ann import ann_recall
from ..engine._runs import evaluate_run
from ..errors import (
    EmptyQueriesError,
    InputError,
    MetricNameError,
    ModelTimeoutError,
    RetrievalChecksError,
    SuiteError,
    warn_outside,
)
from ..gates._assertions import assert_gap_below, assert_metric, assert_not_worse
from ..gates._baselines import BaselineStore, baseline_path, baseline_record
from ..gates._events import GateEvent, emit
from ..gates._spec import skipped_limit
from ..metrics._names import parse_metric
from ..models._embed import (
    EmbeddingCache,
    accepts_keyword,
    embed,
    load_model,
    model_fingerprint,
    resolve_device,
)
from ..models._timeout import call_with_timeout
from ..options import DEFAULTS, OPTIONS, check_option
from ..stats._compare import compare
from ..stats._gaps import generalization_gap
from ._schema import Case, Source, Suite
from ._slices import array_names, attach_run_slices, beir_slices, dataset_slices, gate_slices

__all__ = ["SuiteRunner"]


def _takes_part(fn) -> bool:
    return callable(fn) and accepts_keyword(fn, "part")


@dataclass(frozen=True)
class _Part:
    embeddings: np.ndarray
    labels: np.ndarray | None
    ids: np.ndarray | None
    source: Source


def _examples(values, limit: int = 3) -> str:
    """A few ids, as a message shows them: ``'img7', 'img9', ... (12 in all)``."""
    values = list(values)
    shown_ids = ", ".join(repr(v) for v in values[:limit])
    return shown_ids + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def _ids(values) -> str:
    return f"{len(values)} id{'' if len(values) == 1 else 's'}"


def _are(values) -> str:
    return "is" if len(values) == 1 else "are"


def _repeat(values) -> str:
    return "repeats" if len(values) == 1 else "repeat"


def _repeated(values: list) -> list:
    """The values that occur more than once, in first-seen order."""
    seen, out = set(), {}
    for v in values:
        if v in seen:
            out[v] = None
        seen.add(v)
    return list(out)


def _id_order(dataset_ids: np.ndarray, model_ids: np.ndarray) -> np.ndarray | None:
    """The rows of the model's file in the dataset's order (``index`` with
    ``model_ids[index] == dataset_ids``), None when they are in it already; a
    ValueError describing the difference when the two are not the same ids, each once."""
    if dataset_ids.shape == model_ids.shape and np.array_equal(dataset_ids, model_ids):
        return None
    if dataset_ids.dtype != object and model_ids.dtype != object:
        try:
            od = np.argsort(dataset_ids, kind="stable")
            om = np.argsort(model_ids, kind="stable")
        except TypeError:  # unorderable values: the general path below
            pass
        else:
            sd = dataset_ids[od]
            if (
                sd.shape == model_ids.shape
                and np.all(sd[1:] != sd[:-1])
                and np.array_equal(sd, model_ids[om])
            ):
                index = np.empty(len(od), dtype=np.intp)
                index[od] = om
                return index
    d, m = dataset_ids.tolist(), model_ids.tolist()
    rep_d, rep_m = _repeated(d), _repeated(m)
    if not rep_d and not rep_m and set(d) == set(m):
        where = {v: i for i, v in enumerate(m)}
        return np.array([where[v] for v in d], dtype=np.intp)
    sd, sm = set(d), set(m)
    missing = [v for v in d if v not in sm]
    extra = [v for v in m if v not in sd]
    why = [f"{len(m)} rows in the file, {len(d)} in the dataset"]
    if missing:
        why.append(
            f"{len(missing)} of the dataset's ids {_are(missing)} not in the file "
            f"({_examples(missing)})"
        )
    if extra:
        why.append(
            f"{_ids(extra)} of the file {_are(extra)} not the dataset's ({_examples(extra)})"
        )
    if rep_m:
        why.append(f"{_ids(rep_m)} {_repeat(rep_m)} in the file ({_examples(rep_m)})")
    if rep_d:
        why.append(
            f"{_ids(rep_d)} {_repeat(rep_d)} in the dataset ({_examples(rep_d)}), so rows cannot be "
            "matched by id"
        )
    if missing and len(missing) == len(d) and dataset_ids.dtype.kind != model_ids.dtype.kind:
        why.append(
            f"the dataset's ids are {dataset_ids.dtype}, the file's {model_ids.dtype}: write them "
            "as the same type"
        )
    raise ValueError("; ".join(why))


def _model_rows(
    suite: Suite,
    source: Source,
    msource: Source,
    mfield: str,
    emb: np.ndarray,
    labels,
    ids,
    mlabels,
    mids,
):
    """The one rule matching the rows of a model's embeddings file to its dataset's.

    When both the dataset and the file carry ids, rows are matched by id: the same
    ids in another order are put in the dataset's order (the file's labels with them);
    ids that differ (missing, extra, repeated) are a SuiteError naming the file, the
    field, the counts and a few ids. Then the file's labels, if any, must be the
    dataset's, row for row (a file without ids, in another order, is caught there). A
    file with neither, beside a dataset with ids, is taken in order with a warning.
    Returns the embeddings, labels and ids of the part, in the dataset's order."""
    if ids is not None and mids is not None and np.ndim(ids) == 1:  # (else the part's shape check)
        if mids.ndim != 1 or mids.shape[0] != emb.shape[0]:
            raise SuiteError(
                f"the ids {msource.ids!r} in {msource.file.name} have shape {mids.shape} but the file "
                f"has {emb.shape[0]} embeddings; give one id per row.",
                path=suite.path,
                line=msource.line,
                field=mfield,
            )
        try:
            order = _id_order(np.asarray(ids), mids)
        except ValueError as exc:
            raise SuiteError(
                f"the ids {msource.ids!r} in {msource.file.name} are not the dataset's ids "
                f"{source.ids!r} in {source.file.name}: {exc}. The rows of a model's embeddings file "
                "are matched to the dataset's by id (any order). Fix: write one row per item of the "
                f"dataset, each id once, or set {mfield}.ids: <name> to read another array.",
                path=suite.path,
                line=msource.line,
                field=f"{mfield}.ids",
            ) from None
        if order is not None:
            emb = emb[order]
            if mlabels is not None and mlabels.ndim == 1 and mlabels.shape[0] == order.shape[0]:
                mlabels = mlabels[order]
    if ids is not None and mids is None and mlabels is None:
        warn_outside(
            f"{mfield}: {msource.file.name} has neither ids nor labels, so its rows are taken in the "
            f"dataset's order ({source.file.name}) unchecked: a file written in another order scores "
            "another model, silently. Store the dataset's ids in it (the array ids, or "
            f"{mfield}.ids: <name>) so that rows are matched by id.",
            RuntimeWarning,
        )
    if labels is None:
        labels = mlabels
    elif mlabels is not None and (
        mlabels.shape != labels.shape or not np.array_equal(mlabels, labels)
    ):
        matched = ids is not None and mids is not None
        if matched:
            why = (
                "for the same ids (rows matched by id), so one of the two files labels its items "
                "wrongly. Fix: write the dataset's labels in the model's file, or drop them from it."
            )
        else:
            why = (
                "the embedding rows are not in the dataset's order. Fix: write the rows in the "
                "dataset's order, or store ids in both files (the array ids, or ids: <name>) so that "
                "rows are matched by id."
            )
        raise SuiteError(
            f"the labels in {msource.file.name} differ from the dataset's labels in "
            f"{source.file.name}: {why}",
            path=suite.path,
            line=msource.line,
            field=mfield,
        )
    return emb, labels, ids if ids is not None else mids


@contextlib.contextmanager
def _at_the_check(suite: Suite, check):
    """The warnings a check's evaluation and gate give (skipped queries, intervals,
    power, queries also in the gallery), each shown at the suite file's line of the
    check, not at the library's line that raised it: pytest's summary then points a user
    at the YAML they wrote. The warning filters stay as they are (an "error" filter
    still raises where the warning is given)."""
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            yield
    finally:  # a failing gate's warnings too
        for w in caught:
            warnings.warn_explicit(
                w.message, w.category, filename=str(suite.path), lineno=check.line or 0
            )


class SuiteRunner:
    """Runs :class:`~retrieval_checks._suite.Case` objects of loaded suites.

    ``defaults``: evaluation options every suite starts from (``similarity``,
    ``ties``, ``confidence``, ``seed``, ...), each validated against the option table;
    a suite's ``options``, a model's own ``similarity`` / ``ties`` and a check's own
    fields override them, in that order. Two are limits, not
    evaluation options: ``max_skipped`` (the most queries, a count or a fraction, a
    check may skip before it fails) and ``timeout`` (seconds a model may take to embed
    one part of a dataset, or to run its classifier measures, before the check fails
    with :class:`~retrieval_checks.errors.ModelTimeoutError`; a model's ``timeout:``
    overrides it, and a check's own field overrides both). None: no limit.

    ``device`` and ``max_memory`` go to the engine and to model runners;
    ``cache_dir`` holds computed embeddings (None: no disk cache).

    ``regen``: None, ``"force"`` or ``"all"``, the baseline regeneration mode of
    :class:`retrieval_checks._baselines.BaselineStore`; records to write are queued in
    ``baselines.pending`` (the pytest plugin writes them at the end of the session,
    from the controller under xdist; ``baselines.write()`` writes them).

    ``passes`` counts evaluations, ``embedded`` counts embedding computations and
    ``cache`` (hits / misses) the disk cache.

    Parameters
    ----------
    defaults:
        Evaluation options (and the limits ``max_skipped``, ``timeout``) every suite
        starts from; default: the library's defaults.
    device:
        The engine's and the models' device (default ``"auto"``).
    max_memory:
        The engine's memory budget (default: the engine's).
    cache_dir:
        A directory for computed embeddings (None: no disk cache).
    progress:
        Progress bars: True, False or None (automatic).
    regen:
        None, ``"force"`` or ``"all"``: the baseline regeneration mode.

    Raises
    ------
    InputError
        An unknown or invalid option in ``defaults``, an invalid ``device``,
        ``max_memory`` or ``progress``. :meth:`run` raises ``AssertionError`` when the
        gate fails (naming the model, dataset, suite and line), a
        :class:`~retrieval_checks.SuiteError` for any other library error of the case,
        and a :class:`~retrieval_checks.ModelTimeoutError` for a model past its
        ``timeout``.

    Examples
    --------
    Outside pytest (which runs a suite's items itself):

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
    >>> runner = rc.SuiteRunner(device="cpu")
    >>> runner.run(suite, suite.cases[0])  # map 0.75 >= 0.7
    >>> runner.run(suite, suite.cases[1])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    AssertionError: model 'precomputed' on dataset 'test' [suite rc_demo, rc_demo.yaml:6]
    hit_rate@1 value 0.5000 < 0.9 (short by 0.4000; unit: fraction)
    ...
    >>> runner.passes  # both checks shared one engine pass
    1
    >>> tmp.cleanup()
    """

    def __init__(
        self,
        *,
        defaults: dict | None = None,
        device: str = "auto",
        max_memory=None,
        cache_dir=None,
        progress: bool | None = None,
        regen: str | None = None,
    ):
        given = dict(defaults or {})
        for k, v in given.items():
            if k not in OPTIONS:
                raise InputError(
                    f"SuiteRunner(defaults=...): unknown option {k!r}.{hint(k, OPTIONS)} Options: "
                    f"{', '.join(OPTIONS)}."
                )
            check_option(k, v)
        self.defaults = {**{k: v for k, v in DEFAULTS.items() if OPTIONS[k].applies_to}, **given}
        check_option("device", device)
        check_option("max_memory", max_memory)
        if progress is not None and not isinstance(progress, bool):
            raise InputError(
                f"SuiteRunner(progress={progress!r}): use True, False or None (automatic)."
            )
        self.device = device
        self.max_memory = max_memory
        self.progress = progress
        self.baselines = BaselineStore(regen)
        self.cache = EmbeddingCache(cache_dir)
        self.embedded = 0
        self._arrays: dict = {}
        self._loaded: dict = {}
        self._fingerprints: dict = {}
        self._parts: dict = {}
        self._timed_out: dict = {}  # (model, inputs, part) -> (timeout, message) of a run that did not return
        self.evaluations = EvaluationCache()
        self._shared_failed: set = set()  # shared passes that failed on one metric's error

    # ------------------------------------------------------------------ data
    def _arrays_of(self, path: Path) -> dict:
        key = str(path)
        if key not in self._arrays:
            if (
                path.suffix.lower() == ".npy"
            ):  # damaged, empty or pickled files are the reader's errors
                self._arrays[key] = {"": read_npy(path)}
            else:
                self._arrays[key] = read_arrays(path)
        return self._arrays[key]

    def _array(self, source: Source, key: str, what: str, suite: Suite, field: str, required: bool):
        arrays = self._arrays_of(source.file)
        required = (
            required or key != what
        )  # a key the suite names itself must exist (load_embeddings' rule)
        if "" in arrays:  # a .npy file holds one array: the embeddings or the inputs
            if what in ("embeddings", "inputs", "neighbors"):
                return arrays[""]
            if required:
                raise SuiteError(
                    f"{source.file.name} is a .npy file (one array); {what} need a file with named "
                    "arrays (.npz, .safetensors, .pt, .parquet).",
                    path=suite.path,
                    line=source.line,
                    field=field,
                )
            return None
        if key not in arrays:
            if required:
                raise _no_array(source, key, what, arrays, suite, field)
            return None
        return np.asarray(arrays[key])

    def timeout(self, suite: Suite, model_name: str, dataset_name: str, check=None) -> float | None:
        """Seconds ``model_name`` may take on ``dataset_name``: the check's ``timeout``,
        else the model's ``timeout:``, else the suite's ``options``, else the
        session's; None: no limit."""
        if check is not None:
            return suite.gate_options(check, model_name, dataset_name, self.defaults)["timeout"]
        model = suite.models.get(model_name)
        if model is not None and model.timeout is not None:
            return model.timeout
        return suite.options.get("timeout", self.defaults.get("timeout"))

    def part(
        self, suite: Suite, model_name: str, dataset_name: str, part: str, *, timeout=False
    ) -> _Part:
        """Embeddings, labels and ids of one part (queries, gallery, images, captions);
        a model runs under ``timeout`` seconds (default: :meth:`timeout`)."""
        key = (str(suite.path), model_name, dataset_name, part)
        if key in self._parts:
            return self._parts[key]
        dataset = suite.datasets[dataset_name]
        model = suite.models[model_name]
        source = dataset.parts[part]
        field = f"datasets.{dataset_name}.{part}"
        labels = self._array(source, source.labels, "labels", suite, field, required=False)
        ids = self._array(source, source.ids, "ids", suite, field, required=False)
        if model.kind == "precomputed":
            emb = self._array(source, source.embeddings, "embeddings", suite, field, required=True)
        elif model.kind == "embeddings":
            msource = model.files[dataset_name][part]
            mfield = f"models.{model_name}.embeddings.{dataset_name}.{part}"
            emb = self._array(
                msource, msource.embeddings, "embeddings", suite, mfield, required=True
            )
            mlabels = self._array(msource, msource.labels, "labels", suite, mfield, required=False)
            mids = self._array(msource, msource.ids, "ids", suite, mfield, required=False)
            emb, labels, ids = _model_rows(
                suite, source, msource, mfield, emb, labels, ids, mlabels, mids
            )
        else:
            inputs = self._array(source, source.inputs, "inputs", suite, field, required=True)
            if timeout is False:
                timeout = self.timeout(suite, model_name, dataset_name)
            emb = self._embed(
                suite, model_name, inputs, part, dataset=dataset_name, timeout=timeout
            )
        emb = np.asarray(emb)
        if emb.ndim != 2:
            raise SuiteError(
                f"embeddings have shape {emb.shape}; they must be 2-D (n_items x dim).",
                path=suite.path,
                line=source.line,
                field=field,
            )
        for name, arr in (("labels", labels), ("ids", ids)):
            if arr is not None and (arr.ndim != 1 or arr.shape[0] != emb.shape[0]):
                raise SuiteError(
                    f"{name} have shape {arr.shape} but there are {emb.shape[0]} embeddings "
                    f"(model {model_name!r}); give one per row.",
                    path=suite.path,
                    line=source.line,
                    field=field,
                )
        out = _Part(emb, labels, ids, source)
        self._parts[key] = out
        return out

    def _model(self, suite: Suite, model_name: str):
        """The callable or torch module of a suite model, built once per session."""
        mkey = (str(suite.path), model_name)
        if mkey not in self._loaded:
            self._loaded[mkey] = load_model(suite.models[model_name])
        return self._loaded[mkey]

    def _embed(
        self,
        suite: Suite,
        model_name: str,
        inputs: np.ndarray,
        part: str,
        *,
        dataset: str = "?",
        timeout: float | None = None,
    ) -> np.ndarray:
        model = suite.models[model_name]
        mkey = (str(suite.path), model_name)
        field = f"models.{model_name}"
        what = (
            f"model {model_name!r} embedding the {part} of dataset {dataset!r} (suite {suite.name}, "
            f"{suite.path.name}:{model.line})"
        )

        def fail(exc: BaseException) -> SuiteError:
            detail = str(exc) if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"
            return SuiteError(
                f"{detail} (model {model_name!r}, embedding the {part} inputs)",
                path=suite.path,
                line=model.line,
                field=field,
            )

        try:
            # the part (queries, gallery, ...) changes the output only for callables that take it;
            # importing a function is cheap, while a torch model is built only on a cache miss
            takes_part = model.kind == "callable" and _takes_part(
                call_with_timeout(
                    lambda: self._model(suite, model_name),
                    timeout=timeout,
                    what=f"loading model {model_name!r} (suite {suite.name}, {suite.path.name}:{model.line})",
                )
            )
            if (
                mkey not in self._fingerprints
            ):  # after the import above: it hashes the code as loaded
                self._fingerprints[mkey] = model_fingerprint(model)
            key = EmbeddingCache.key(self._fingerprints[mkey], inputs, part if takes_part else None)
            cached = self.cache.get(key)
            if cached is not None:
                return cached
            late = self._timed_out.get(key)
            if late is not None and timeout is not None and timeout <= late[0]:
                raise ModelTimeoutError(
                    late[1] + " (it timed out before in this session: not run again)",
                    timeout=timeout,
                )
            if (
                timeout is not None
            ):  # one-off costs (importing torch, probing CUDA) are not the model's time
                resolve_device(model.device or self.device)
            try:
                out = call_with_timeout(
                    lambda: embed(
                        self._model(suite, model_name),
                        inputs,
                        batch_size=model.batch_size,
                        device=model.device or self.device,
                        part=part,
                        progress=self.progress,
                    ),
                    timeout=timeout,
                    what=what,
                )
            except ModelTimeoutError as exc:
                self._timed_out[key] = (timeout, str(exc))
                raise
        except (KeyboardInterrupt, SystemExit, MemoryError, ModelTimeoutError):
            raise
        except (
            Exception
        ) as exc:  # building the model, loading its weights, or the model's own errors
            raise fail(exc) from exc
        self.embedded += 1
        self.cache.put(key, out)
        return out

    # ------------------------------------------------------------------ evaluation
    def result(
        self,
        suite: Suite,
        model_name: str,
        dataset_name: str,
        options: dict,
        *,
        timeout=False,
        metrics=None,
    ):
        """The (cached) evaluation of a model on a dataset with these options; the
        model runs under ``timeout`` seconds (default: :meth:`timeout`).

        One pass measures every metric of the suite's checks on this model and dataset.
        When that shared pass fails because of one metric (a discriminant ratio of
        collapsed embeddings, grouped recall with singleton classes...) and ``metrics``
        (the metrics the asking check needs) is given, those metrics are evaluated on
        their own: only the check whose metric is at fault fails, with that metric
        named; the checks of other metrics still run."""
        key = (str(suite.path), model_name, dataset_name, tuple(sorted(options.items())))
        if timeout is False:
            timeout = self.timeout(suite, model_name, dataset_name)
        shared = suite.metrics_for(model_name, dataset_name, options, self.defaults)
        own = None if metrics is None else [m for m in dict.fromkeys(metrics)]
        if suite.datasets[dataset_name].type == "ann":  # ann_recall measures one K per pass
            shared = own if own is not None else shared[:1]
            key = (*key, tuple(shared))
        if key not in self._shared_failed:
            try:
                return self.evaluations.get_or_compute(
                    key,
                    lambda: self._evaluate(
                        suite, model_name, dataset_name, options, timeout, shared
                    ),
                )
            except (KeyboardInterrupt, SystemExit, MemoryError, ModelTimeoutError):
                raise
            except RetrievalChecksError as exc:
                if own is None or set(own) >= set(shared) or not _metric_error(exc):
                    raise
                self._shared_failed.add(key)  # not tried again: each check measures its own metrics
        return self.evaluations.get_or_compute(
            (*key, tuple(own)),
            lambda: self._evaluate(suite, model_name, dataset_name, options, timeout, own),
        )

    @property
    def passes(self) -> int:
        """Evaluations computed (cache misses)."""
        return self.evaluations.misses

    def _evaluate(
        self,
        suite: Suite,
        model_name: str,
        dataset_name: str,
        options: dict,
        timeout=None,
        metrics=None,
    ):
        if metrics is None:
            metrics = suite.metrics_for(model_name, dataset_name, options, self.defaults)
        dataset = suite.datasets[dataset_name]
        if dataset.type == "images":
            return self._classify(suite, model_name, dataset_name, metrics, options, timeout)
        if dataset.type == "run":
            return self._run_file(suite, dataset, metrics, options)
        if dataset.type == "ann":
            return self._ann(suite, model_name, dataset, metrics, options, timeout)
        if dataset.type == "beir":
            return self._beir(suite, model_name, dataset, metrics, options, timeout)
        common = dict(
            similarity=options["similarity"],
            ties=options["ties"],
            device=self.device,
            max_memory=self.max_memory,
            confidence=options["confidence"],
            progress=self.progress,
        )
        if dataset.type == "image_text":
            images = self.part(suite, model_name, dataset_name, "images", timeout=timeout)
            captions = self.part(suite, model_name, dataset_name, "captions", timeout=timeout)
            src = dataset.parts["captions"]
            caption_image = self._array(
                src, src.image, "image", suite, f"datasets.{dataset_name}.captions", required=True
            )
            return evaluate_image_text(
                images.embeddings,
                captions.embeddings,
                caption_image,
                metrics=metrics,
                protocol=dataset.protocol,
                images_without_captions=dataset.images_without_captions,
                n_resamples=options["n_resamples"],
                seed=options["seed"],
                slices=dataset_slices(self, suite, dataset, images) if dataset.slices else None,
                caption_slices=dataset_slices(
                    self, suite, dataset, captions, dims=dataset.caption_slices
                )
                if dataset.caption_slices
                else None,
                **common,
            )
        q = self.part(suite, model_name, dataset_name, "queries", timeout=timeout)
        g = (
            self.part(suite, model_name, dataset_name, "gallery", timeout=timeout)
            if "gallery" in dataset.parts
            else None
        )
        for name, p in (("queries", q), ("gallery", g)):
            if p is not None and p.labels is None:
                keys = [
                    k for k in self._arrays_of(p.source.file) if k
                ]  # "" is a .npy file's one array
                close = closest_key(
                    "labels", p.source.labels, keys, (p.source.embeddings, p.source.ids)
                )
                has = (f"; it has {', '.join(map(repr, keys))}" if keys else "") + (
                    f". Did you mean {close!r}? Set"
                    if close
                    else "; retrieval datasets need one label per row (set"
                )
                raise SuiteError(
                    f"{p.source.file.name} has no labels array {p.source.labels!r}{has} {name}: "
                    "{file: ..., labels: <name>}" + (")." if not close else "."),
                    path=suite.path,
                    line=p.source.line,
                    field=f"datasets.{dataset_name}.{name}",
                )
        return evaluate(
            q.embeddings,
            None if g is None else g.embeddings,
            _self_match_fails=True,  # a gate on queries that retrieve themselves fails
            query_labels=q.labels,
            gallery_labels=None if g is None else g.labels,
            query_ids=q.ids,
            gallery_ids=None if g is None else g.ids,
            metrics=metrics,
            slices=dataset_slices(self, suite, dataset, q) if dataset.slices else None,
            empty_queries=options["empty_queries"],
            group_size=options["group_size"],
            group_seed=options["seed"],
            group_repeats=options["group_repeats"],
            **common,
        )

    def _run_file(self, suite: Suite, dataset, metrics: list, options: dict):
        """A TREC run against its qrels (:func:`~retrieval_checks.evaluate_run`); a file
        it cannot read is an error at the dataset's line."""
        try:
            empty = options["empty_queries"]
            if dataset.queries != "both" and empty == "skip":
                empty = None  # trec_eval's query sets score a judged query without relevant 0
            result = evaluate_run(
                dataset.run,
                dataset.qrels,
                metrics,
                ties=options["ties"],
                relevance_level=dataset.relevance_level,
                empty_queries=empty,
                confidence=options["confidence"],
                k=dataset.depth,
                queries=dataset.queries,
                ignore_identical_ids=dataset.ignore_identical_ids,
            )
        except (MetricNameError, EmptyQueriesError):
            raise
        except InputError as exc:
            raise SuiteError(
                f"{exc} (run {dataset.run.name}, qrels {dataset.qrels.name})",
                path=suite.path,
                line=dataset.line,
                field=f"datasets.{dataset.name}",
            ) from None
        # the slice files' values of the evaluated queries (errors at the slices' lines)
        return attach_run_slices(suite, dataset, result) if dataset.slices else result

    def beir_data(self, suite: Suite, dataset_name: str):
        """The split of a beir dataset (:func:`~retrieval_checks.data._beir.read_beir`),
        read once per session; queries its qrels do not judge are reported in a
        RuntimeWarning (they are not evaluated, as in BEIR)."""
        dataset = suite.datasets[dataset_name]
        key = ("beir", str(dataset.path), dataset.split)
        if key not in self._arrays:
            try:
                data = read_beir(dataset.path, dataset.split)
            except InputError as exc:
                raise SuiteError(
                    f"{exc} (dataset {dataset_name!r})",
                    path=suite.path,
                    line=dataset.line,
                    field=f"datasets.{dataset_name}",
                ) from None
            if data.unjudged:
                n_all = len(data.unjudged) + len(data.query_ids)
                warn_outside(
                    f"dataset {dataset_name!r} ({dataset.path}): {len(data.unjudged)} of {n_all} queries "
                    f"in queries.jsonl have no judgement in qrels/{dataset.split}.tsv (first: "
                    f"{', '.join(map(repr, data.unjudged[:5]))}); they are not evaluated: the split's "
                    f"{len(data.query_ids)} judged queries are.",
                    RuntimeWarning,
                )
            self._arrays[key] = data
        return self._arrays[key]

    def _beir(
        self, suite: Suite, model_name: str, dataset, metrics: list, options: dict, timeout=None
    ):
        """Ranking metrics of a text model on a BEIR split: the judged queries against the
        whole corpus, with the qrels' grades as graded relevance."""
        data = self.beir_data(suite, dataset.name)
        q, g = (
            self._beir_part(suite, model_name, dataset.name, texts, part, timeout)
            for texts, part in ((data.queries, "queries"), (data.documents, "gallery"))
        )
        ids = {}
        if dataset.ignore_identical_ids:  # BEIR's rule: out of the ranking, still judged
            ids = {
                "query_ids": np.array(data.query_ids),
                "gallery_ids": np.array(data.doc_ids),
                "ignore_identical_ids": True,
            }
        result = evaluate(
            q,
            g,
            relevance=data.relevance,
            relevance_level=dataset.relevance_level,
            metrics=metrics,
            slices=beir_slices(suite, dataset, data) if dataset.slices else None,
            similarity=options["similarity"],
            ties=options["ties"],
            empty_queries=options["empty_queries"],
            confidence=options["confidence"],
            device=self.device,
            max_memory=self.max_memory,
            progress=self.progress,
            **ids,
        )
        if (
            result.query_ids is None
        ):  # the queries' own ids: baselines key per-query values by them, not by row
            result.query_ids = np.array(data.query_ids)
        return result

    def _beir_part(
        self, suite: Suite, model_name: str, dataset_name: str, texts: list, part: str, timeout
    ):
        """Embeddings of a beir dataset's query or document texts, computed once per session."""
        key = (str(suite.path), model_name, dataset_name, part)
        if key not in self._parts:
            self._parts[key] = self._embed(
                suite, model_name, texts, part, dataset=dataset_name, timeout=timeout
            )
        return self._parts[key]

    def _ann(
        self, suite: Suite, model_name: str, dataset, metrics: list, options: dict, timeout=None
    ):
        """ann_recall@K of the dataset's neighbours against exact search over the model's
        embeddings (:func:`~retrieval_checks.ann_recall`); one K per pass."""
        (k,) = {parse_metric(m).k for m in metrics}
        q = self.part(suite, model_name, dataset.name, "queries", timeout=timeout)
        g = (
            self.part(suite, model_name, dataset.name, "gallery", timeout=timeout)
            if "gallery" in dataset.parts
            else None
        )
        src = dataset.neighbors
        field = f"datasets.{dataset.name}.neighbors"
        neighbors = self._array(src, src.neighbors, "neighbors", suite, field, required=True)
        try:
            return ann_recall(
                q.embeddings,
                None if g is None else g.embeddings,
                neighbors,
                k=k,
                similarity=options["similarity"],
                query_ids=q.ids,
                gallery_ids=None if g is None else g.ids,
                device=self.device,
                max_memory=self.max_memory,
                confidence=options["confidence"],
                progress=self.progress,
                slices=dataset_slices(self, suite, dataset, q) if dataset.slices else None,
            )
        except InputError as exc:
            if "neighbors" not in str(exc):
                raise
            raise SuiteError(
                f"{exc} ({src.file.name}, model {model_name!r})",
                path=suite.path,
                line=src.line,
                field=field,
            ) from None

    def _classify(
        self,
        suite: Suite,
        model_name: str,
        dataset_name: str,
        metrics: list,
        options: dict,
        timeout=None,
    ):
        """Classifier measures of a torch model on an images dataset."""
        model = suite.models[model_name]
        src = suite.datasets[dataset_name].parts["images"]
        field = f"datasets.{dataset_name}.images"
        images = self._array(src, src.inputs, "inputs", suite, field, required=True)
        labels = self._array(
            src,
            src.labels,
            "labels",
            suite,
            field,
            required=any(m in ("accuracy", "spectral_measure") for m in metrics),
        )
        needs_truth = any(m in ("cam_iou", "cam_iou_box") for m in metrics)
        boxes = self._array(src, src.boxes, "boxes", suite, field, required=False)
        masks = (
            None
            if boxes is not None
            else self._array(src, src.masks, "masks", suite, field, required=False)
        )
        if needs_truth and boxes is None and masks is None:
            raise _no_truth(src, suite, field)
        what = (
            f"model {model_name!r} measuring {', '.join(metrics)} on dataset {dataset_name!r} (suite "
            f"{suite.name}, {suite.path.name}:{model.line})"
        )
        try:
            return call_with_timeout(
                lambda: evaluate_classifier(
                    self._model(suite, model_name),
                    images,
                    labels,
                    metrics=metrics,
                    boxes=boxes,
                    masks=masks,
                    layer=model.cam_layer,
                    cam_method=options["cam_method"],
                    rho=options["rho"],
                    percentile=options["percentile"],
                    batch_size=model.batch_size,
                    device=model.device or self.device,
                    confidence=options["confidence"],
                    n_resamples=options["n_resamples"],
                    seed=options["seed"],
                ),
                timeout=timeout,
                what=what,
            )
        except (KeyboardInterrupt, SystemExit, MemoryError, ModelTimeoutError):
            raise
        except SuiteError:
            raise
        except Exception as exc:
            detail = str(exc) if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"
            error = SuiteError(
                f"{detail} (model {model_name!r} on dataset {dataset_name!r})",
                path=suite.path,
                line=model.line,
                field=f"models.{model_name}",
            )
            error.rc_measure_error = isinstance(
                exc, RetrievalChecksError
            )  # a measure's error, maybe one metric's
            raise error from exc

    def run(self, suite: Suite, case: Case) -> None:
        """Run one case: evaluate (or reuse) and apply its gate. Raises AssertionError
        with the model and dataset named when the gate fails."""
        __tracebackhide__ = True
        check = case.check
        opts = {
            d: suite.evaluation_options(check, d, self.defaults, case.model) for d in case.datasets
        }
        where = (
            f"model {case.model!r} on dataset {case.datasets[0]!r}"
            if check.kind != "gap"
            else f"model {case.model!r}, gap between {case.datasets[0]!r} (train) and {case.datasets[1]!r} (test)"
        )
        where += f" [suite {suite.name}, {suite.path.name}:{check.line}]"
        try:
            with _at_the_check(suite, check):
                self._gate(suite, case, opts)
        except AssertionError as exc:
            raise AssertionError(f"{where}\n{exc}") from None
        except (
            SuiteError,
            ModelTimeoutError,
        ):  # a model that never returns fails this check; the session goes on
            raise
        except RetrievalChecksError as exc:
            raise SuiteError(
                f"{exc} ({where})", path=suite.path, line=check.line, field=f"checks[{check.index}]"
            ) from None

    def _gate(self, suite: Suite, case: Case, opts: dict) -> None:
        __tracebackhide__ = True
        check = case.check
        if check.kind == "gap":
            return self._gap(suite, case, opts)
        dataset = case.datasets[0]
        o = opts[dataset]
        limits = suite.gate_options(check, case.model, dataset, self.defaults)
        name = check.metric.name
        result = self.result(
            suite, case.model, dataset, o, timeout=limits["timeout"], metrics=[name]
        )
        if check.kind != "threshold":  # assert_metric checks max_skipped itself
            _skip_limit(
                result, name, limits["max_skipped"], case.model, dataset, _GATES[check.kind]
            )
        if check.slices is not None:  # the check gates slices (suites/_slices.py)
            if check.kind == "threshold":
                _skip_limit(
                    result, name, limits["max_skipped"], case.model, dataset, "assert_slices"
                )
            return gate_slices(self, suite, case, result, o)
        if check.kind == "baseline":
            record = baseline_record(result, name, confidence=o["confidence"], seed=o["seed"])
            record.update(model=case.model, dataset=dataset)
            self.baselines.check(
                record,
                path=baseline_path(suite.path),
                key=case.name,
                confidence=o["confidence"],
                **check.gate_kwargs("assert_no_regression"),
                **({} if suite.correction is None else {"correction": suite.correction}),
            )
        elif check.kind == "compare":
            blimits = suite.gate_options(check, check.baseline, dataset, self.defaults)
            bo = suite.evaluation_options(
                check, dataset, self.defaults, check.baseline
            )  # its own similarity, ties
            baseline = self.result(
                suite, check.baseline, dataset, bo, timeout=blimits["timeout"], metrics=[name]
            )
            _skip_limit(
                baseline, name, limits["max_skipped"], check.baseline, dataset, _GATES["compare"]
            )
            comparison = compare(result, baseline, name, confidence=o["confidence"], seed=o["seed"])
            assert_not_worse(
                comparison,
                **check.gate_kwargs("assert_not_worse"),
                **({} if suite.correction is None else {"correction": suite.correction}),
            )
        else:
            gate = check.metric.capabilities.gate if check.at_most is None else "assert_metric"
            # both bounds in one call, so the record shows "between" and both of them
            assert_metric(
                result,
                check.metric,  # parsed once, when the suite was loaded
                **check.gate_kwargs("assert_metric"),
                confidence=o["confidence"],
                seed=o["seed"],
                max_skipped=limits["max_skipped"],
                _gate=gate,
            )

    def _gap(self, suite: Suite, case: Case, opts: dict) -> None:
        """metric(train) - metric(test) of one model, gated on its interval or value."""
        __tracebackhide__ = True
        check = case.check
        train, test = case.datasets
        o = opts[train]
        own = [check.metric.name]
        a = self.result(
            suite,
            case.model,
            train,
            o,
            timeout=suite.gate_options(check, case.model, train, self.defaults)["timeout"],
            metrics=own,
        )
        b = self.result(
            suite,
            case.model,
            test,
            opts[test],
            timeout=suite.gate_options(check, case.model, test, self.defaults)["timeout"],
            metrics=own,
        )
        if check.metric.kind != "classifier":
            for ds, res in ((train, a), (test, b)):
                _skip_limit(
                    res,
                    check.metric.name,
                    suite.gate_options(check, case.model, ds, self.defaults)["max_skipped"],
                    case.model,
                    ds,
                    _GATES["gap"],
                )
        if check.metric.kind == "classifier":
            gap = generalization_gap(
                a.accuracy_result,
                b.accuracy_result,
                confidence=o["confidence"],
                labels=(train, test),
            )
        else:
            gap = generalization_gap(
                a,
                b,
                check.metric.name,
                confidence=o["confidence"],
                seed=o["seed"],
                labels=(train, test),
            )
        assert_gap_below(gap, **check.gate_kwargs("assert_gap_below"))


def _metric_error(exc: BaseException) -> bool:
    """Whether a failed evaluation may be one metric's fault (the engine's or a
    classifier measure's error), not the data's or the model's (a suite error about a
    file, an array, a model that raised)."""
    if not isinstance(exc, SuiteError):
        return True
    return bool(getattr(exc, "rc_measure_error", False))


_GATES = {
    "gap": "assert_gap_below",
    "compare": "assert_not_worse",
    "baseline": "assert_no_regression",
}


def _skip_limit(
    result, name: str, max_skipped, model: str, dataset: str, gate: str = "max_skipped"
) -> None:
    """AssertionError when ``result`` skipped more queries for ``name`` than
    ``max_skipped`` allows (a count, or a fraction of the queries; None: no limit), for
    the checks whose gate has no max_skipped of its own (gap, compare, baseline). The
    failure is a failed gate event of ``gate`` (the check's gate) with the metric, its
    value on this dataset and n_used / n_skipped, so every report records it."""
    __tracebackhide__ = True
    if max_skipped is None or not callable(getattr(result, "measure", None)):
        return
    m = result.measure(name)
    n_skipped, n_used = int(getattr(m, "n_skipped", 0) or 0), int(getattr(m, "n_used", 0) or 0)
    n_queries = n_used + n_skipped
    count = isinstance(max_skipped, numbers.Integral)
    limit = skipped_limit(n_skipped, n_used, max_skipped)
    if limit is not None:
        message = (
            f"{name} of model {model!r} on dataset {dataset!r}: {n_skipped} of {n_queries} queries "
            f"skipped (n_used {n_used} / n_skipped {n_skipped}), more than max_skipped="
            f"{max_skipped!r} ({limit}); queries without a relevant gallery item change the value "
            "without notice: fix the labels or raise max_skipped."
        )
        value = getattr(m, "value", None)
        try:
            value = None if value is None else float(value)
        except (TypeError, ValueError):
            value = None
        emit(
            GateEvent(
                gate=gate,
                metric=name,
                value=value,
                passed=False,
                on="n_skipped",
                comparison="<=",
                threshold=float(max_skipped) if not count else int(max_skipped),
                bounds={"max_skipped": max_skipped},
                n_used=n_used,
                n_skipped=n_skipped,
                model=model,
                dataset=dataset,
                warnings=[message],
                extra={"max_skipped": max_skipped},
            )
        )
        raise AssertionError(message)


def _no_array(source: Source, key: str, what: str, names, suite: Suite, field: str) -> SuiteError:
    """The error of a part's file that lacks the array ``key`` it names for ``what``."""
    close = did_you_mean(key, names)
    fix = (
        f" Did you mean {close!r}? Set {field}.{what}: <name>."
        if close
        else f" Set {field}.{what}: <name> to read another array."
    )
    return SuiteError(
        f"{source.file.name} has no array {key!r} for {what}; it has "
        f"{', '.join(map(repr, names)) or 'none'}.{fix}",
        path=suite.path,
        line=source.line,
        field=field,
    )


def _no_truth(src: Source, suite: Suite, field: str) -> SuiteError:
    """The error of an images file without the boxes or masks that cam_iou needs."""
    return SuiteError(
        f"{src.file.name} has neither boxes {src.boxes!r} nor masks {src.masks!r}; cam_iou "
        "needs the objects' boxes (N x 4: x0, y0, x1, y1) or binary masks.",
        path=suite.path,
        line=src.line,
        field=field,
    )


def array_errors(suite: Suite) -> list[SuiteError]:
    """``retrieval-checks validate``'s look at the datasets' files, with the run's own
    errors, for the datasets some check measures: the labels and ids a part names that
    its file lacks (read with every part: a name the suite writes must exist, as the run
    requires); the arrays the checks' models read (the datasets' ``embeddings`` for
    precomputed models, a model's embeddings files, ``inputs`` for the models that run;
    captions' ``image``; an ann dataset's neighbours); and an images dataset measured by
    ``cam_iou`` whose file has neither its boxes nor its masks. Only the array names are
    read (no data); a file that cannot be read and a ``.npy`` file are left to the run,
    which reports them."""
    wanted: dict = {}  # (field, what) -> Source: the arrays some check reads
    truth = set()
    used = {name for check in suite.checks for name in check.datasets}
    for dataset in (d for d in suite.datasets.values() if d.name in used):
        parts = dataset.parts if isinstance(dataset.parts, dict) else {}
        sources = [(f"datasets.{dataset.name}.{name}", src) for name, src in parts.items()]
        if dataset.neighbors is not None:
            sources.append((f"datasets.{dataset.name}.neighbors", dataset.neighbors))
        for field, src in sources:
            for what in ("labels", "ids"):  # read with every part: a name written must exist
                if getattr(src, what, what) != what:
                    wanted[field, what] = src
        if dataset.type == "ann" and isinstance(dataset.neighbors, Source):
            wanted[f"datasets.{dataset.name}.neighbors", "neighbors"] = dataset.neighbors
        if dataset.type == "image_text" and isinstance(parts.get("captions"), Source):
            wanted[f"datasets.{dataset.name}.captions", "image"] = parts["captions"]
    for check in suite.checks:
        if check.metric.name in ("cam_iou", "cam_iou_box"):
            truth.update(check.datasets)
        for model_name in (*check.models, *((check.baseline,) if check.baseline else ())):
            model = suite.models.get(model_name)
            for name in check.datasets:
                dataset = suite.datasets.get(name)
                if model is not None and dataset is not None:
                    wanted.update(_model_reads(model, dataset))
    out = []
    for (field, what), src in wanted.items():
        names = _names_of(src)
        if names is not None and getattr(src, what) not in names:
            out.append(_no_array(src, getattr(src, what), what, names, suite, field))
    for name in sorted(truth):
        dataset = suite.datasets.get(name)
        src = (
            dataset.parts.get("images")
            if dataset is not None and dataset.type == "images"
            else None
        )
        names = _names_of(src)
        if names is not None and src.boxes not in names and src.masks not in names:
            out.append(_no_truth(src, suite, f"datasets.{name}.images"))
    return out


def _model_reads(model, dataset) -> dict:
    """``(field, what) -> Source`` of the embeddings or inputs that :meth:`SuiteRunner.part`
    (and the classifier's run) reads for ``model`` on ``dataset``."""
    parts = dataset.parts if isinstance(dataset.parts, dict) else {}
    if dataset.type == "images":  # the classifier reads its inputs, and boxes and masks named
        src = parts.get("images")
        field = f"datasets.{dataset.name}.images"
        named = [w for w in ("boxes", "masks") if getattr(src, w, w) != w]
        return {(field, "inputs"): src, **{(field, w): src for w in named}}
    if dataset.type not in ("retrieval", "image_text", "ann"):
        return {}
    out = {}
    for part, src in parts.items():
        if model.kind == "embeddings":
            msrc = (model.files.get(dataset.name) or {}).get(part)
            out[f"models.{model.name}.embeddings.{dataset.name}.{part}", "embeddings"] = msrc
        else:
            what = "embeddings" if model.kind == "precomputed" else "inputs"
            out[f"datasets.{dataset.name}.{part}", what] = src
    return out


def _names_of(src) -> list | None:
    """The array names of a part's file; None where the run must say why (not a
    Source, a .npy file, a file that cannot be read)."""
    return array_names(src.file) if isinstance(src, Source) else None
