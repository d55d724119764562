"""Options, fixtures and report hooks of the retrieval-checks pytest plugin.

Options (each a command-line flag and an ini setting of the same name with ``_``):
``--rc-device``, ``--rc-max-memory``, ``--rc-seed``, ``--rc-confidence``,
``--rc-ties``, ``--rc-json`` (path of the JSON report).

Fixtures: ``rc_options`` (the resolved options), ``rc_evaluate`` (``evaluate`` with the
session's options, cached per model and dataset so that many tests share one engine
pass), ``rc_load`` (``load_embeddings`` with paths relative to the rootdir).

Reports: every gate (``assert_*``) run inside a test is recorded in the test's
``user_properties`` (so it reaches JUnit XML, and the controller under pytest-xdist),
listed in a terminal summary table and written to the JSON report.
"""

from __future__ import annotations

import contextvars
import json
import math
from pathlib import Path

import pytest

import retrieval_checks as rc
from retrieval_checks import _assertions
from retrieval_checks._suite_run import SuiteRunner

from . import _items

_OPTIONS = [
    ("device", "compute device for evaluations: auto, cpu, cuda, cuda:N, numpy", "auto"),
    ("max-memory", "memory budget of the engine, e.g. 2GiB (default: the library's)", ""),
    ("seed", "seed of label partitions and bootstraps", "0"),
    ("confidence", "confidence of intervals", "0.95"),
    ("ties", "tie policy: pessimistic or optimistic", "pessimistic"),
    ("json", "write every gate's outcome to this JSON file", ""),
    ("embedding-cache", "directory of cached model embeddings; 'none' disables "
                        "(default: inside pytest's cache, cleared by --cache-clear)", ""),
]
_PROPERTY = "retrieval_checks"
_current_item: contextvars.ContextVar = contextvars.ContextVar("retrieval_checks_item", default=None)


def pytest_addoption(parser):
    group = parser.getgroup("retrieval-checks", "model quality gates (retrieval-checks)")
    for name, help_text, default in _OPTIONS:
        dest = "rc_" + name.replace("-", "_")
        group.addoption(f"--rc-{name}", dest=dest, default=None, help=f"{help_text} (ini: {dest})")
        parser.addini(dest, help_text, default=default)
    parser.addini("rc_suite_files", "glob patterns of YAML suite files to collect", type="args",
                  default=["rc_*.yaml", "rc_*.yml"])


def pytest_collect_file(file_path, parent):
    if file_path.suffix in (".yaml", ".yml") and _items.matches(file_path, parent.config.getini("rc_suite_files")):
        return _items.SuiteFile.from_parent(parent, path=file_path)
    return None


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
                             device=options["device"], max_memory=options["max_memory"], cache_dir=cache_dir)
        config._rc_runner = runner
    return runner


def _option(config, name: str) -> str:
    dest = "rc_" + name.replace("-", "_")
    value = config.getoption(dest)
    return value if value is not None else config.getini(dest)


def _record(outcome: dict) -> None:
    item = _current_item.get()
    if item is None:
        return
    clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in outcome.items()}
    case = getattr(item, "case", None)
    if case is not None:  # a YAML suite item: say which suite, model and dataset(s)
        clean.update(suite=item.suite.name, model=case.model, dataset="/".join(case.datasets))
    item.user_properties.append((f"rc:{clean['metric']}", clean["value"]))
    item.user_properties.append((_PROPERTY, json.dumps(clean, default=str)))


def pytest_configure(config):
    config._rc_outcomes = []
    if _record not in _assertions.OBSERVERS:
        _assertions.OBSERVERS.append(_record)


def pytest_unconfigure(config):
    if _record in _assertions.OBSERVERS:
        _assertions.OBSERVERS.remove(_record)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    token = _current_item.set(item)
    try:
        yield
    finally:
        _current_item.reset(token)


def pytest_runtest_logreport(report):
    if report.when != "call":
        return
    outcomes = getattr(_config(), "_rc_outcomes", None)
    if outcomes is None:
        return
    for name, value in report.user_properties:
        if name == _PROPERTY:
            outcomes.append({"test": report.nodeid, **json.loads(value)})


_CONFIG = []


def _config():
    return _CONFIG[-1] if _CONFIG else None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _CONFIG.append(session.config)


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    outcomes = getattr(config, "_rc_outcomes", [])
    if _is_worker(config) or not outcomes:
        return
    tr = terminalreporter
    tr.write_sep("=", "retrieval-checks gates")
    rows = [("test", "metric", "value", "interval", "rule", "result")]
    for o in outcomes:
        interval = "" if o.get("low") is None else f"[{o['low']:.4f}, {o['high']:.4f}]"
        rule = f"{o.get('on')} {o.get('comparison')} {o.get('threshold')}"
        rows.append((o["test"].split("::")[-1], o["metric"], f"{o['value']:.4f}", interval, rule,
                     "PASS" if o["passed"] else "FAIL"))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        tr.write_line("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    path = _option(config, "json")
    if path and not _is_worker(config):
        out = {"gates": getattr(config, "_rc_outcomes", []), "exitstatus": int(exitstatus)}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(out, indent=2, default=str))
    if _CONFIG and _CONFIG[-1] is config:
        _CONFIG.pop()


# ----------------------------------------------------------------------------- fixtures
def _resolve_options(config) -> dict:
    try:
        confidence = float(_option(config, "confidence"))
        seed = int(_option(config, "seed"))
    except ValueError as exc:
        raise pytest.UsageError(f"retrieval-checks: --rc-confidence / --rc-seed: {exc}") from None
    return {
        "device": _option(config, "device") or "auto",
        "max_memory": _option(config, "max-memory") or None,
        "seed": seed,
        "confidence": confidence,
        "ties": _option(config, "ties") or "pessimistic",
    }


@pytest.fixture(scope="session")
def rc_options(pytestconfig) -> dict:
    """The session's retrieval-checks options, resolved (flags override ini)."""
    return _resolve_options(pytestconfig)


class _Evaluator:
    """``rc_evaluate(queries, gallery=None, *, model=..., dataset=..., **evaluate_kwargs)``.

    With ``model`` and ``dataset`` names the result is cached for the session: tests
    that ask for the same (model, dataset, metrics, options) share one engine pass.
    """

    def __init__(self, options: dict):
        self.options = options
        self.cache: dict = {}
        self.passes = 0

    def __call__(self, queries, gallery=None, *, model=None, dataset=None, **kwargs):
        kw = {"device": self.options["device"], "max_memory": self.options["max_memory"],
              "ties": self.options["ties"], "confidence": self.options["confidence"],
              "group_seed": self.options["seed"], **kwargs}
        key = None
        if model is not None and dataset is not None:
            metrics = kw.get("metrics")
            metrics = (metrics,) if isinstance(metrics, str) else tuple(metrics or ())
            key = (model, dataset, metrics, repr(sorted((k, v) for k, v in kw.items() if k != "metrics")))
            if key in self.cache:
                return self.cache[key]
        result = rc.evaluate(queries, gallery, **kw)
        if model is not None or dataset is not None:
            result.config.update(model=model, dataset=dataset)  # named in gate messages
        self.passes += 1
        if key is not None:
            self.cache[key] = result
        return result


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
