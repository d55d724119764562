"""Options, hooks and fixtures of the retrieval-checks pytest plugin.

Options (each a command-line flag and an ini setting of the same name with ``_``):
``--rc-device``, ``--rc-max-memory``, ``--rc-seed``, ``--rc-confidence``,
``--rc-ties``, ``--rc-json`` (JSON report), ``--rc-html`` (HTML report),
``--rc-history`` (SQLite run history), ``--rc-embedding-cache``; the flags
``--rc-force-regen`` / ``--rc-regen-all`` regenerate baselines; the ini setting
``rc_suite_files`` names the YAML suites to collect (``_items.py``).

Fixtures: ``rc_options`` (the resolved options), ``rc_evaluate`` (``evaluate`` with the
session's options, cached per model and dataset so that many tests share one engine
pass), ``rc_load`` (``load_embeddings`` with paths relative to the rootdir),
``rc_baseline`` (a metric against its stored baseline), ``rc_report`` (figures for the
HTML report).

Every gate (``assert_*``) run inside a test is recorded in the test's
``user_properties`` (so it reaches JUnit XML, and the controller under pytest-xdist);
at the end of the session the controller prints the summary table and writes baselines,
the run history and the JSON and HTML reports (``_reports.py``).
"""

from __future__ import annotations

import contextvars
import json
from pathlib import Path

import pytest

import retrieval_checks as rc
from retrieval_checks.gates import BaselineStore, baseline_path, baseline_record
from retrieval_checks.suites import SuiteRunner
from retrieval_checks.tracking import run_metadata

from . import _items, _reports

# the session's evaluation options, validated against the library's option table
_SESSION_OPTIONS = ("device", "max_memory", "seed", "confidence", "ties")
_OPTIONS = [
    *((name.replace("_", "-"), f"{rc.options.OPTIONS[name].help}: {rc.options.OPTIONS[name].expected}",
       "" if rc.options.DEFAULTS[name] is None else str(rc.options.DEFAULTS[name])) for name in _SESSION_OPTIONS),
    ("json", "write every gate's outcome to this JSON file", ""),
    ("html", "write the session's HTML report to this file", ""),
    ("history", "SQLite run history, relative to the rootdir; 'none' disables "
                "(default: .retrieval-checks/history.sqlite)", ""),
    ("embedding-cache", "directory of cached model embeddings; 'none' disables "
                        "(default: inside pytest's cache, cleared by --cache-clear)", ""),
]
_PROPERTY = "retrieval_checks"
_BASELINE_PROPERTY = "retrieval_checks_baseline"
_FIGURE_PROPERTY = "retrieval_checks_figure"
_current_item: contextvars.ContextVar = contextvars.ContextVar("retrieval_checks_item", default=None)


def pytest_addoption(parser):
    group = parser.getgroup("retrieval-checks", "model quality gates (retrieval-checks)")
    for name, help_text, default in _OPTIONS:
        dest = "rc_" + name.replace("-", "_")
        group.addoption(f"--rc-{name}", dest=dest, default=None, help=f"{help_text} (ini: {dest})")
        parser.addini(dest, help_text, default=default)
    group.addoption("--rc-force-regen", action="store_true", default=False,
                    help="rewrite missing or changed baselines, and fail those checks (as pytest-regressions' "
                         "--force-regen)")
    group.addoption("--rc-regen-all", action="store_true", default=False,
                    help="rewrite every baseline and pass (as pytest-regressions' --regen-all)")
    parser.addini("rc_suite_files", "glob patterns of YAML suite files to collect", type="args",
                  default=["rc_*.yaml", "rc_*.yml"])


def pytest_collect_file(file_path, parent):
    if file_path.name.endswith((".baselines.yaml", ".baselines.yml")):
        return None  # baseline files live next to the suites
    if file_path.suffix in (".yaml", ".yml") and _items.matches(file_path, parent.config.getini("rc_suite_files")):
        return _items.SuiteFile.from_parent(parent, path=file_path)
    return None


def regen_mode(config) -> str | None:
    """None, "force" (--rc-force-regen) or "all" (--rc-regen-all)."""
    if config.getoption("rc_regen_all"):
        return "all"
    return "force" if config.getoption("rc_force_regen") else None


def queue_baselines(item, entries: list) -> None:
    """Send baseline records to the controller, which writes them at the end of the session."""
    for path, key, record in entries:
        item.user_properties.append((_BASELINE_PROPERTY, json.dumps([path, key, record])))
    entries.clear()


def suite_runner(config) -> SuiteRunner:
    """The session's (or xdist worker's) runner of YAML suite cases, created on first use."""
    runner = getattr(config, "_rc_runner", None)
    if runner is None:
        options = _resolve_options(config)
        cache = _option(config, "embedding-cache")
        if cache.lower() == "none":
            cache_dir = None
        elif cache:
            cache_dir = Path(cache) if Path(cache).is_absolute() else Path(config.rootpath) / cache
        elif getattr(config, "cache", None) is not None:
            cache_dir = config.cache.mkdir("retrieval_checks_embeddings")
        else:
            cache_dir = None
        runner = SuiteRunner(defaults={"confidence": options["confidence"], "seed": options["seed"],
                                       "ties": options["ties"]},
                             device=options["device"], max_memory=options["max_memory"], cache_dir=cache_dir,
                             regen=regen_mode(config))
        config._rc_runner = runner
    return runner


def _option(config, name: str) -> str:
    dest = "rc_" + name.replace("-", "_")
    value = config.getoption(dest)
    return value if value is not None else config.getini(dest)


def _record(event) -> None:
    """A gate listener: the event of a gate run inside a test joins that test's properties."""
    item = _current_item.get()
    if item is None:
        return
    clean = event.to_dict()
    case = getattr(item, "case", None)
    if case is not None:  # a YAML suite item: say which suite, model and dataset(s)
        clean.update(suite=item.suite.name, model=case.model, dataset="/".join(case.datasets))
    item.user_properties.append((f"rc:{clean['metric']}", clean["value"]))
    item.user_properties.append((_PROPERTY, json.dumps(clean, default=str)))


def pytest_configure(config):
    _resolve_options(config)
    config._rc_outcomes = []
    config._rc_baseline_writes = []
    config._rc_notes = []
    config._rc_figures = []
    config._rc_run = None
    config._rc_subscription = rc.gates.subscribe(_record)


def pytest_unconfigure(config):
    subscription = getattr(config, "_rc_subscription", None)
    if subscription is not None:
        subscription.cancel()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    token = _current_item.set(item)
    try:
        yield
    finally:
        _current_item.reset(token)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    config = _config()
    if config is None or _is_worker(config):
        return  # under xdist the controller collects (the worker forwards the report as it is)
    # baseline records and figures travel to the controller in user_properties (a copy rides on
    # every phase's report); take them out before the JUnit writer sees them: they are files and
    # pictures, not test properties
    carried = [(n, v) for n, v in report.user_properties if n in (_BASELINE_PROPERTY, _FIGURE_PROPERTY)]
    if carried:
        report.user_properties[:] = [(n, v) for n, v in report.user_properties
                                     if n not in (_BASELINE_PROPERTY, _FIGURE_PROPERTY)]
    if report.when != "call":
        return
    for n, v in carried:
        if n == _BASELINE_PROPERTY:
            config._rc_baseline_writes.append(tuple(json.loads(v)))
        else:
            config._rc_figures.append({"test": report.nodeid, **json.loads(v)})
    xfail = hasattr(report, "wasxfail")
    extra = {"xfail": True} if xfail else {}
    if report.failed:
        extra["message"] = (getattr(report, "longreprtext", "") or "")[-4000:]
    for name, value in report.user_properties:
        if name == _PROPERTY:
            config._rc_outcomes.append({"test": report.nodeid, **json.loads(value), **extra})


_CONFIG = []


def _config():
    return _CONFIG[-1] if _CONFIG else None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _CONFIG.append(session.config)
    if not _is_worker(session.config) and _history_path(session.config) is not None:
        session.config._rc_run = run_metadata(session.config.rootpath)


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _is_worker(config):
        return
    tr = terminalreporter
    outcomes = getattr(config, "_rc_outcomes", [])
    if outcomes:
        tr.write_sep("=", "retrieval-checks gates")
        for line in _reports.summary_lines(outcomes):
            tr.write_line(line)
    for line in getattr(config, "_rc_notes", []):
        tr.write_line(f"retrieval-checks: {line}")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if not _is_worker(config):
        _finish(config, exitstatus)
    if _CONFIG and _CONFIG[-1] is config:
        _CONFIG.pop()


def _finish(config, exitstatus) -> None:
    """Baselines, history, JSON and HTML, once per session (on the controller)."""
    notes = config._rc_notes = []
    outcomes = getattr(config, "_rc_outcomes", [])
    if config._rc_baseline_writes:
        for path in _reports.flush_baselines(config._rc_baseline_writes):
            notes.append(f"baselines written to {path}")
    run = None
    history = _history_path(config)
    if history is not None and outcomes:
        try:
            run_id = _reports.record_history(history, config._rc_run, outcomes, exitstatus)
            run = {"id": run_id, "history": str(history), **config._rc_run}
            notes.append(f"run {run_id} recorded in {history} ({len(outcomes)} gates)")
        except Exception as exc:  # the history must never turn a green session red
            notes.append(f"could not record the run in {history}: {exc}")
    path = _option(config, "json")
    if path:
        _reports.write_json(path, outcomes, exitstatus, run)
    path = _option(config, "html")
    if path:
        target = Path(path) if Path(path).is_absolute() else Path(config.invocation_params.dir) / path
        meta = run or {**(config._rc_run or {}), "exitstatus": int(exitstatus)}
        meta.setdefault("exitstatus", int(exitstatus))
        _reports.write_html(target, outcomes, meta, history if run else None, config._rc_figures)
        notes.append(f"HTML report written to {target}")


def _history_path(config):
    value = _option(config, "history")
    if value.lower() == "none":
        return None
    p = Path(value or ".retrieval-checks/history.sqlite")
    return p if p.is_absolute() else Path(config.rootpath) / p


# ----------------------------------------------------------------------------- fixtures
def _resolve_options(config) -> dict:
    """The session options (flags override ini), validated once at start-up: a bad value
    is one usage error naming the flag, not a traceback in every test."""
    resolved = getattr(config, "_rc_options", None)
    if resolved is not None:
        return resolved
    resolved = {}
    for name in _SESSION_OPTIONS:
        flag = "--rc-" + name.replace("_", "-")
        try:
            resolved[name] = rc.options.parse_text(name, _option(config, flag[5:]))
        except rc.InputError as exc:
            raise pytest.UsageError(f"retrieval-checks: {flag} (ini rc_{name}): {exc}") from None
    if resolved["device"].startswith("cuda"):
        try:
            rc.engine.check_device(resolved["device"])
        except rc.RetrievalChecksError as exc:
            raise pytest.UsageError(f"retrieval-checks: --rc-device: {exc}") from None
    config._rc_options = resolved
    return resolved


@pytest.fixture(scope="session")
def rc_options(pytestconfig) -> dict:
    """The session's retrieval-checks options, resolved (flags override ini)."""
    return _resolve_options(pytestconfig)


class _Evaluator:
    """``rc_evaluate(queries, gallery=None, *, model=..., dataset=..., **evaluate_kwargs)``:
    ``evaluate`` with the session's options. Results are cached for the session by the
    content of the arrays and the options (the library's ``EvaluationCache``), so tests
    that ask for the same evaluation share one engine pass, and other embeddings under
    the same names are evaluated anew. ``model`` and ``dataset`` name the result in gate
    messages and records."""

    def __init__(self, options: dict):
        self.options = options
        self.cache = rc.engine.EvaluationCache()

    @property
    def passes(self) -> int:
        return self.cache.misses

    def __call__(self, queries, gallery=None, *, model=None, dataset=None, **kwargs):
        kw = {"device": self.options["device"], "max_memory": self.options["max_memory"],
              "ties": self.options["ties"], "confidence": self.options["confidence"],
              "group_seed": self.options["seed"], **kwargs}
        return self.cache.evaluate(queries, gallery, context={"model": model, "dataset": dataset}, **kw)


@pytest.fixture(scope="session")
def rc_evaluate(rc_options) -> _Evaluator:
    """``evaluate`` with the session's options, cached per (model, dataset)."""
    return _Evaluator(rc_options)


@pytest.fixture(scope="session")
def rc_load(pytestconfig):
    """``load_embeddings(path, ...)`` with relative paths resolved against the rootdir
    (cached per path and keys)."""
    cache: dict = {}

    def load(path, **kwargs):
        p = Path(path)
        if not p.is_absolute():
            p = Path(pytestconfig.rootpath) / p
        key = (str(p), tuple(sorted(kwargs.items())))
        if key not in cache:
            cache[key] = rc.load_embeddings(p, **kwargs)
        return cache[key]

    return load


class _Baselines:
    """``rc_baseline(result, metric, *, key=None, max_drop=None, max_relative_drop=None,
    direction=None, significant=False)``: compare a metric with its baseline in
    ``<test module>.baselines.yaml`` (created and updated with ``--rc-regen-all`` /
    ``--rc-force-regen``); returns the :class:`~retrieval_checks.Change`
    (None when the baseline was rewritten)."""

    def __init__(self, request, options: dict):
        self.request = request
        self.options = options
        self.path = baseline_path(request.path)

    def __call__(self, result, metric: str, *, key: str | None = None, **tolerances):
        __tracebackhide__ = True
        config = self.request.config
        store = getattr(config, "_rc_baseline_store", None)
        if store is None:  # one per session (per xdist worker): each baseline file is read once
            store = config._rc_baseline_store = BaselineStore(regen_mode(config))
        record = baseline_record(result, metric, confidence=self.options["confidence"], seed=self.options["seed"])
        name = f"{self.request.node.name}::{record['metric']}" + (f"::{key}" if key else "")
        try:
            return store.check(record, path=self.path, key=name, confidence=self.options["confidence"],
                               **tolerances)
        finally:
            queue_baselines(self.request.node, store.pending)


@pytest.fixture
def rc_baseline(request, rc_options) -> _Baselines:
    """Gate a result against its stored baseline (see ``_Baselines``)."""
    return _Baselines(request, rc_options)


class _Report:
    """``rc_report.add_sweep(table, title=None)``: put a class-count sweep
    (:func:`retrieval_checks.class_count_sweep`) in the session's HTML report."""

    def __init__(self, item):
        self.item = item

    def add_sweep(self, table, title: str | None = None) -> None:
        rows = [{k: r[k] for k in ("n_classes", "metric", "value", "low", "high") if k in r} for r in table.to_rows()]
        self.item.user_properties.append((_FIGURE_PROPERTY, json.dumps({"kind": "sweep", "title": title,
                                                                         "rows": rows}, default=float)))


@pytest.fixture
def rc_report(request) -> _Report:
    """Add figures to the HTML report (``--rc-html``)."""
    return _Report(request.node)
