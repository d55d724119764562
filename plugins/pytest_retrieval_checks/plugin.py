"""Options, hooks and fixtures of the retrieval-checks pytest plugin.

Options (each a command-line flag and an ini setting of the same name with ``_``):
``--rc-device``, ``--rc-max-memory``, ``--rc-seed``, ``--rc-confidence``,
``--rc-ties``, ``--rc-max-skipped`` (most queries a gate may skip), ``--rc-timeout``
(seconds a suite's model may take), ``--rc-json`` (JSON report), ``--rc-html`` (HTML report),
``--rc-history`` (SQLite run history), ``--rc-embedding-cache``; the flags
``--rc-force-regen`` / ``--rc-regen-all`` regenerate baselines, ``--rc-mlflow`` /
``--rc-wandb`` log every gate to an experiment tracker (``_trackers.py``); the ini setting
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
import functools
import json
import os
import shlex
from pathlib import Path

import pytest

import retrieval_checks as rc
from retrieval_checks.gates import BaselineStore, baseline_path, baseline_record
from retrieval_checks.suites import SuiteRunner
from retrieval_checks.tracking import default_history_path, run_metadata

from . import _family, _github, _items, _reports, _selection, _trackers
from . import _slices as _slice_report

# the session's evaluation options, validated against the library's option table
_SESSION_OPTIONS = ("device", "max_memory", "seed", "confidence", "ties", "max_skipped", "timeout")
_OPTIONS = [
    *(
        (
            name.replace("_", "-"),
            f"{rc.options.OPTIONS[name].help}: {rc.options.OPTIONS[name].expected}",
            "" if rc.options.DEFAULTS[name] is None else str(rc.options.DEFAULTS[name]),
        )
        for name in _SESSION_OPTIONS
    ),
    ("json", "write every gate's outcome to this JSON file", ""),
    ("html", "write the session's HTML report to this file", ""),
    (
        "history",
        "SQLite run history, relative to the rootdir; 'none' disables "
        "(default: .retrieval-checks/history.sqlite in the project root, where the retrieval-checks "
        "command looks)",
        "",
    ),
    (
        "summary",
        "the gate table at the end: full (every gate), failed (the failed ones) or none (default: full; "
        "failed under -q, none under -qq)",
        "",
    ),
    (
        "correction",
        "multiplicity correction over the session's significance-gated checks: holm (family-wise "
        "error rate), bh (false discovery rate) or none (each at its own level; default)",
        "none",
    ),
    (
        "embedding-cache",
        "directory of cached model embeddings; 'none' disables "
        "(default: inside pytest's cache, cleared by --cache-clear)",
        "",
    ),
]
_PROPERTY = "retrieval_checks"
_BASELINE_PROPERTY = "retrieval_checks_baseline"
_FIGURE_PROPERTY = "retrieval_checks_figure"
_current_item: contextvars.ContextVar = contextvars.ContextVar(
    "retrieval_checks_item", default=None
)


def pytest_addoption(parser):
    group = parser.getgroup("retrieval-checks", "model quality gates (retrieval-checks)")
    for name, help_text, default in _OPTIONS:
        dest = "rc_" + name.replace("-", "_")
        group.addoption(f"--rc-{name}", dest=dest, default=None, help=f"{help_text} (ini: {dest})")
        parser.addini(dest, help_text, default=default)
    group.addoption(
        "--rc-force-regen",
        action="store_true",
        default=False,
        help="rewrite missing or changed baselines, and fail those checks (as pytest-regressions' "
        "--force-regen)",
    )
    group.addoption(
        "--rc-regen-all",
        action="store_true",
        default=False,
        help="rewrite every baseline and pass (as pytest-regressions' --regen-all)",
    )
    group.addoption(
        "--rc-prune-baselines",
        action="store_true",
        default=False,
        help="remove the baseline records of checks that no longer exist, from the baselines files of "
        "the suites and test modules collected (only in a full run: refused with -k, -m, --lf, node "
        "ids, deselection, collection errors or a run stopped early)",
    )
    for name, where in (
        ("mlflow", "the active MLflow run, else a new run under MLFLOW_TRACKING_URI"),
        ("wandb", "the active W&B run, else wandb.init (WANDB_MODE, WANDB_PROJECT)"),
    ):
        text = f"log every gate (value, interval, threshold, pass) to {where}; needs retrieval-checks[trackers]"
        group.addoption(
            f"--rc-{name}",
            action="store_const",
            const=True,
            dest=f"rc_{name}",
            default=None,
            help=f"{text} (ini: rc_{name} = true)",
        )
        parser.addini(
            f"rc_{name}", text, type="string", default=""
        )  # parsed by _trackers: the same message on every pytest
    parser.addini(
        "rc_suite_files",
        "glob patterns of YAML suite files to collect",
        type="args",
        default=["rc_*.yaml", "rc_*.yml"],
    )


def pytest_collect_file(file_path, parent):
    if file_path.name.endswith((".baselines.yaml", ".baselines.yml")):
        return None  # baseline files live next to the suites
    if file_path.suffix in (".yaml", ".yml") and _items.matches(
        file_path, parent.config.getini("rc_suite_files")
    ):
        return _items.SuiteFile.from_parent(parent, path=file_path)
    return None


def regen_mode(config) -> str | None:
    """None, "force" (--rc-force-regen) or "all" (--rc-regen-all)."""
    if config.getoption("rc_regen_all"):
        return "all"
    return "force" if config.getoption("rc_force_regen") else None


def queue_baselines(item, entries: list) -> None:
    """Send baseline records to the controller, which writes them at the end of the
    session. Under --rc-regen-all each rewritten baseline is also a gate record of the
    test (``regenerated baseline``, passed: nothing was compared), so that the table,
    JSON and history count what the run did in gates, as for every other check (a test
    that only rewrote baselines was absent from them)."""
    regen_all = regen_mode(item.config) == "all"
    sliced: dict = {}  # per-slice records of one check: one slice gate, as a comparing run records
    for path, key, record in entries:
        item.user_properties.append((_BASELINE_PROPERTY, json.dumps([path, key, record])))
        if regen_all and isinstance(record, dict) and isinstance(record.get("slice"), str):
            suffix = f" slice={record['slice']}"
            if key.endswith(suffix):
                sliced.setdefault((path, key[: -len(suffix)]), []).append(record)
                continue
        if regen_all and isinstance(record, dict):
            interval = record.get("interval")
            low, high = (
                interval
                if isinstance(interval, (list, tuple)) and len(interval) == 2
                else (None, None)
            )
            rc.gates.emit(
                rc.gates.GateEvent(
                    gate="assert_no_regression",
                    metric=str(record.get("metric")),
                    value=record.get("value"),
                    passed=True,
                    low=low,
                    high=high,
                    confidence=record.get("confidence"),
                    on="regenerated",
                    comparison="baseline",
                    n=record.get("n"),
                    unit=record.get("unit"),
                    n_skipped=record.get("n_skipped"),
                    n_used=record.get("n") if record.get("n_skipped") is not None else None,
                    model=record.get("model"),
                    dataset=record.get("dataset"),
                    extra={
                        "baseline_key": key,
                        "baselines_file": Path(path).name,
                        # what the value was computed under (ties, protocol...): compare refuses
                        # a regenerated value under other options, as it does a checked one's
                        **({"options": record["options"]} if record.get("options") else {}),
                    },
                )
            )
    for (path, key), records in sliced.items():
        _emit_regenerated_slices(path, key, records)
    entries.clear()


def _emit_regenerated_slices(path, key: str, records: list[dict]) -> None:
    """The per-slice baselines of one check rewritten by --rc-regen-all, as one gate
    record with a row per slice (``slices``), as a comparing run records the check: a
    report or ``compare`` matches them slice by slice (one gate per slice, named only by
    its baseline key, matched nothing in a comparing run). Its value is the worst slice's."""
    rows = [BaselineStore.slice_row(record, passed=True) for record in records]
    metric = str(records[0].get("metric"))
    try:
        higher = rc.parse_metric(metric).higher_is_better
    except rc.RetrievalChecksError:
        higher = True
    valued = [r for r in rows if isinstance(r["value"], (int, float))]
    worst = (min if higher else max)(valued, key=lambda r: r["value"]) if valued else {}
    rc.gates.emit(
        rc.gates.GateEvent(
            gate="assert_no_slice_regression",
            metric=metric,
            value=worst.get("value"),
            passed=True,
            low=worst.get("low"),
            high=worst.get("high"),
            confidence=worst.get("confidence"),
            on="regenerated",
            comparison="baseline",
            n=len(rows),
            unit="slices",
            model=records[0].get("model"),
            dataset=records[0].get("dataset"),
            extra={
                "slices": rows,
                "worst_slice": worst.get("slice"),
                "baseline_key": key,
                "baselines_file": Path(path).name,
            },
        )
    )


def suite_runner(config) -> SuiteRunner:
    """The session's (or xdist worker's) runner of YAML suite cases, created on first use."""
    runner = getattr(config, "_rc_runner", None)
    if runner is None:
        options = _resolve_options(config)
        cache_dir, _ = _embedding_cache(config)
        defaults = {k: options[k] for k in ("confidence", "seed", "ties", "max_skipped", "timeout")}
        runner = SuiteRunner(
            defaults=defaults,
            device=options["device"],
            max_memory=options["max_memory"],
            cache_dir=cache_dir,
            regen=regen_mode(config),
        )
        config._rc_runner = runner
    return runner


def _embedding_cache(config) -> tuple[Path | None, str | None]:
    """The embedding cache directory (None: no cache) and, when the one asked for cannot
    be used (a file, under a file, not writable), why: the session then runs without the
    cache, with a warning; a cache never turns a gate red."""
    cached = getattr(config, "_rc_cache_dir", None)
    if cached is not None:
        return cached
    cache = _option(config, "embedding-cache").strip()
    problem = None
    if cache.lower() == "none":
        cache_dir = None
    elif cache:
        cache_dir = Path(cache) if Path(cache).is_absolute() else Path(config.rootpath) / cache
        problem = _reports.cache_problem(cache_dir)
    elif getattr(config, "cache", None) is not None:
        try:
            cache_dir = config.cache.mkdir("retrieval_checks_embeddings")
            problem = _reports.cache_problem(Path(cache_dir))
        except OSError as exc:
            cache_dir, problem = None, f"pytest's cache directory cannot hold it ({exc})"
    else:
        cache_dir = None
    if problem is not None:
        problem = (
            f"--rc-embedding-cache (ini rc_embedding_cache): {problem}; running without the embedding cache "
            "(give a writable directory, or 'none' to turn the cache off)"
        )
        cache_dir = None
    config._rc_cache_dir = (cache_dir, problem)
    return cache_dir, problem


def _option(config, name: str) -> str:
    dest = "rc_" + name.replace("-", "_")
    value = config.getoption(dest)
    return value if value is not None else config.getini(dest)


def _record(config, event) -> None:
    """A gate listener of ``config``'s session: the event of a gate run inside one of its
    tests joins that test's properties (a pytest session run inside a test, as pytester's
    in-process runs are, records its gates once, in its own session only)."""
    item = _current_item.get()
    if item is None or item.config is not config:
        return
    if event.extra.get("decision") == "deferred" and config is not _config():
        return  # the innermost session's family decides it (or, unrecorded, the gate at once)
    clean = event.to_dict()
    case = getattr(item, "case", None)
    named = getattr(item, "_rc_named", None)
    if (
        case is None and named
    ):  # a Python test: the names given to rc_evaluate, for a gate that did not carry them
        for key in ("model", "dataset"):
            values = list(dict.fromkeys(n[key] for n in named if n.get(key) is not None))
            if clean.get(key) is None and values:
                clean[key] = "/".join(values)
    if (
        case is not None
    ):  # a YAML suite item: say which suite, model and dataset(s), and how it was scored
        clean.update(
            suite=item.suite.name,
            model=case.model,
            dataset="/".join(case.datasets),
            line=case.check.line,
        )
        try:
            options = item.suite.evaluation_options(
                case.check, case.datasets[0], suite_runner(item.config).defaults, case.model
            )
        except Exception:  # the record is still written without them
            options = {}
        for key in (
            "similarity",
            "ties",
        ):  # a model's own (MODEL_OPTIONS) may differ from the suite's
            if key in options and clean.get(key) is None:
                clean[key] = options[key]
    item.user_properties.extend(_reports.junit_properties(clean))
    item.user_properties.extend(_slice_report.junit_properties(clean))
    item.user_properties.append((_PROPERTY, _reports.strict_json(clean)))
    if clean.get("decision") == "deferred":  # the session's end decides it: it is not lost
        rc.gates.claim(event)


def pytest_configure(config):
    _resolve_options(config)
    config._rc_outputs = _resolve_outputs(config)
    config._rc_trackers = _trackers.requested(config)
    config._rc_outcomes = []
    config._rc_baseline_writes = []
    config._rc_baseline_writes_by = []  # (test, (file, key)) of each baseline written
    config._rc_notes = []
    config._rc_startup_notes = []
    if not _is_worker(config):
        _, problem = _embedding_cache(config)
        if problem is not None:
            config._rc_startup_notes.append(f"warning: {problem}")
        if getattr(config, "_rc_history_problem", None):
            config._rc_startup_notes.append(config._rc_history_problem)
    config._rc_figures = []
    config._rc_run = None
    config._rc_deselected = config._rc_collect_errors = 0
    config._rc_summary = _summary_mode(config)
    if config.getoption("rc_prune_baselines") and not _is_worker(config):
        refusal = _selection.prune_refusal(config)
        if refusal is not None:
            raise pytest.UsageError(f"retrieval-checks: --rc-prune-baselines: {refusal}.")
    config._rc_subscription = rc.gates.subscribe(functools.partial(_record, config))
    config._rc_families = []
    config._rc_held = {}  # tests whose verdict waits for their family (_family.py)
    config._rc_family_decided = False
    try:
        correction = rc.gates.check_correction(_option(config, "correction") or "none")
    except rc.InputError as exc:
        raise pytest.UsageError(
            f"retrieval-checks: --rc-correction (ini rc_correction): {exc}"
        ) from None
    rc.gates.set_session_correction(correction)
    config._rc_correction_open = True


def _summary_mode(config) -> str:
    """--rc-summary (ini rc_summary), else from -q / -qq; a value that is not full,
    failed or none is a usage error."""
    try:
        return _reports.summary_mode(config.get_verbosity(), _option(config, "summary"))
    except ValueError as exc:
        raise pytest.UsageError(
            f"retrieval-checks: --rc-summary (ini rc_summary): {exc}."
        ) from None


def pytest_deselected(items):
    """Deselected tests make a run partial (recorded with it; no pruning)."""
    if items:
        config = items[0].config
        config._rc_deselected = getattr(config, "_rc_deselected", 0) + len(items)


def pytest_collection_finish(session):
    """The collection order: the summary's order, the same under pytest-xdist."""
    if session.items:
        session.config._rc_order = {item.nodeid: i for i, item in enumerate(session.items)}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """Under pytest-xdist the controller learns the collection order from the workers."""
    config = node.config
    if not getattr(config, "_rc_order", None):
        config._rc_order = {nodeid: i for i, nodeid in enumerate(ids)}


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """A suite file that could not be loaded carries its FAIL record on its collection
    report (a text: it travels from a pytest-xdist worker to the controller)."""
    report = yield
    record = _items.collect_error_record(collector, report)
    if record is not None:
        report.rc_record = _reports.strict_json(record)
    return report


def pytest_collectreport(report):
    config = _config()
    if report.failed and config is not None:
        config._rc_collect_errors = getattr(config, "_rc_collect_errors", 0) + 1
        record = getattr(report, "rc_record", None)
        seen = config.__dict__.setdefault("_rc_collect_recorded", set())
        if record is not None and not _is_worker(config) and report.nodeid not in seen:
            seen.add(report.nodeid)  # (each pytest-xdist worker may report the same file)
            config._rc_outcomes.append({"test": report.nodeid, **json.loads(record)})


def pytest_unconfigure(config):
    subscription = getattr(config, "_rc_subscription", None)
    if subscription is not None:
        subscription.cancel()
    if getattr(config, "_rc_correction_open", False):
        config._rc_correction_open = False
        rc.gates.set_session_correction(None)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    """When the test loop ends, the session's families are complete: decide them and log
    the tests held for them with their decided verdicts (``_family.py``), before pytest
    counts the failures (so its exit status and JUnit are the decided ones)."""
    config = session.config
    if _is_worker(config):
        return (yield)
    if config.pluginmanager.getplugin("dsession") is not None:
        _family.hold_xdist(config, config._rc_held, _PROPERTY)
    try:
        return (yield)
    finally:
        config._rc_families = _family.decide_and_log(config, config._rc_held, _PROPERTY)
        config._rc_family_decided = True


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """pytest's protocol, with the reports of a test whose check waits for its family held
    until the family is decided (``_family.py``); None (pytest's own) on an xdist worker
    (the controller holds) or when another plugin runs the protocol."""
    if _is_worker(item.config):
        return None
    return _family.run_holding(item, nextitem, item.config._rc_held, _PROPERTY)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Gates run in the test are recorded on it; then, in a plain Python test, a gate that
    skipped more queries than --rc-max-skipped allows fails the test (a YAML suite's
    checks apply the session's max_skipped themselves, with the check's own overriding)."""
    token = _current_item.set(item)
    start = len(item.user_properties)
    try:
        result = yield
    finally:
        _current_item.reset(token)
    limit = _resolve_options(item.config)["max_skipped"]
    if limit is not None and getattr(item, "case", None) is None:
        _items.fail_on_skipped(item, start, limit, _PROPERTY)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A YAML suite item that failed without a failed gate record (a suite that could not
    be loaded, a model error or timeout, a runner error) gets a FAIL record of its own,
    so that the table, JSON, JUnit, history and HTML never show a red item as absent."""
    report = yield
    if report.failed and report.when in ("setup", "call"):
        record = _items.error_record(item, report, _PROPERTY)
        if record is not None:
            props = [*_reports.junit_properties(record), (_PROPERTY, _reports.strict_json(record))]
            item.user_properties.extend(props)
            report.user_properties.extend(props)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    config = _config()
    if config is None or _is_worker(config):
        return  # under xdist the controller collects (the worker forwards the report as it is)
    # baseline records and figures travel to the controller in user_properties (a copy rides on
    # every phase's report); take them out before the JUnit writer sees them: they are files and
    # pictures, not test properties
    carried = [
        (n, v) for n, v in report.user_properties if n in (_BASELINE_PROPERTY, _FIGURE_PROPERTY)
    ]
    if carried:
        report.user_properties[:] = [
            (n, v)
            for n, v in report.user_properties
            if n not in (_BASELINE_PROPERTY, _FIGURE_PROPERTY)
        ]
    if report.when != "call" and not (report.when == "setup" and report.failed):
        return
    for n, v in carried:
        if n == _BASELINE_PROPERTY:
            entry = tuple(json.loads(v))
            config._rc_baseline_writes.append(entry)
            config._rc_baseline_writes_by.append((report.nodeid, tuple(entry[:2])))
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
        # the command as the user wrote it (pytest's arguments), not the interpreter's path to pytest's main module
        args = [str(a) for a in session.config.invocation_params.args]
        session.config._rc_run = run_metadata(
            session.config.rootpath, command=shlex.join(["pytest", *args])
        )


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def _failed_outside_the_gates(tr, outcomes: list) -> int:
    """Failed or errored tests (and collection errors) of the session that left no gate
    record: a test that raised before its gate, a plain ``assert``. A new user read "3
    gates: 3 passed" above a red session."""
    gated = {str(o.get("test", "")) for o in outcomes}
    ids = {
        getattr(r, "nodeid", "")
        for key in ("failed", "error")
        for r in tr.stats.get(key, [])
        if getattr(r, "when", "call") != "teardown" or key == "error"
    }
    return len({i for i in ids if i not in gated})


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _is_worker(config):
        return
    tr = terminalreporter
    outcomes = getattr(config, "_rc_outcomes", [])
    mode = getattr(config, "_rc_summary", "full")
    width = _terminal_width(tr)
    if outcomes and mode != "none":
        tr.write_sep("=", "retrieval-checks gates")
        order = getattr(config, "_rc_order", None)
        for line in _reports.summary_lines(outcomes, width=width, mode=mode, order=order):
            tr.write_line(line, red=line.startswith("FAIL"))
        for line in _reports.warning_lines(outcomes, width=width, order=order):
            tr.write_line(line, yellow=True)
        for line in _slice_report.summary_lines(outcomes, width=width, mode=mode, order=order):
            tr.write_line(line, red=line.rstrip().endswith("FAIL"))
        other = _failed_outside_the_gates(tr, outcomes)
        if other:  # the table counts gates: a red session must not read green from it
            note = (
                f"retrieval-checks: {_reports.plural(other, 'other test')} of this session "
                f"{'fails' if other == 1 else 'fail'} outside the gates above (not in their count)."
            )
            for line in _reports.wrapped(note, width):
                tr.write_line(line, red=True)
    for family in getattr(config, "_rc_families", []):
        if not family["failed"] and (
            mode == "none" or (family["correction"] == "none" and family["size"] < 2)
        ):
            continue  # -qq, or one uncorrected check: no multiplicity to state
        for line in _reports.wrapped(f"retrieval-checks: {rc.gates.family_line(family)}", width):
            tr.write_line(line, red=bool(family["failed"]))
        for r in family["failed"]:
            why = (
                f"underpowered: power {r.get('power_at_tolerance', 0):.0%} < min_power {r.get('power'):g} "
                f"at the corrected level {r.get('power_level'):.3g}"
                if str(r.get("decision", "")).endswith("underpowered")
                else f"p {r.get('p_raw'):.3g}, adjusted {r.get('p_adjusted'):.3g} < "
                f"{r.get('significance_level'):.3g}"
            )
            line = f"  FAIL after {family['correction']}: {r.get('test')} {r.get('metric')} ({why})"
            tr.write_line(line, red=True)
    for note in (*getattr(config, "_rc_startup_notes", []), *getattr(config, "_rc_notes", [])):
        alarm = note.startswith(("error:", "warning:"))
        if mode == "none" and not alarm:
            continue  # -qq: errors and warnings only
        for line in _reports.wrapped(f"retrieval-checks: {note}", width):
            tr.write_line(line, red=note.startswith("error:"), yellow=note.startswith("warning:"))


def _terminal_width(tr) -> int | None:
    """The terminal's width (pytest's writer), or None when unknown."""
    width = getattr(getattr(tr, "_tw", None), "fullwidth", None)
    return width if isinstance(width, int) and width > 0 else None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if not _is_worker(config):
        config._rc_session = session
        if config._rc_run is not None:  # full, or what narrowed the run (-k, --lf, node ids, ...)
            config._rc_run["selection"] = _selection.selection(config, session)
        # the session's family of significance-gated checks (every worker's records): decided
        # when the test loop ended (pytest_runtestloop), else now; one it fails turns it red
        if not config._rc_family_decided:
            config._rc_families = rc.gates.decide_family(config._rc_outcomes)
        if any(f["failed"] for f in config._rc_families) and session.exitstatus == 0:
            session.exitstatus = exitstatus = pytest.ExitCode.TESTS_FAILED
        if not _finish(config, exitstatus) and session.exitstatus == 0:
            # a report, history or baseline file the user asked for was not written: the session
            # must not look green (1 stays "a test failed"; 3: the session's outputs are incomplete)
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
    if _CONFIG and _CONFIG[-1] is config:
        _CONFIG.pop()


def _finish(config, exitstatus) -> bool:
    """Baselines, history, JSON and HTML, once per session (on the controller), each
    isolated: one that fails is reported in a note and never stops the others. Returns
    False when baselines, the JSON or the HTML report could not be written (the history
    alone never turns a session red: its failure is a warning)."""
    notes = config._rc_notes = []
    outcomes = getattr(config, "_rc_outcomes", [])
    outputs = getattr(config, "_rc_outputs", {})
    ok = True
    if config._rc_baseline_writes:
        try:
            for path in _reports.flush_baselines(config._rc_baseline_writes):
                notes.append(f"baselines written to {path}")
            gone = [(p, k) for p, k, record in config._rc_baseline_writes if record is None]
            if gone:  # per-slice baselines of slices no longer in the result
                notes.append(
                    f"removed {_reports.plural(len(gone), 'slice record')} of slices no longer in the "
                    f"result: {', '.join(f'{k!r} ({Path(p).name})' for p, k in gone)}"
                )
            if (
                regen_mode(config) == "all"
            ):  # in both units: baselines (gate records) and tests (items)
                tests = {t for t, _ in config._rc_baseline_writes_by}
                notes.append(
                    f"--rc-regen-all: {_reports.plural(len(config._rc_baseline_writes_by) - len(gone), 'baseline')} "
                    f"rewritten by {_reports.plural(len(tests), 'test')}, each a passed 'regenerated "
                    "baseline' gate: not compared; review the files' diff and commit them"
                )
        except Exception as exc:
            ok = False
            notes.append(
                f"error: could not write the baselines ({type(exc).__name__}: {exc}); nothing was "
                "regenerated by this run: fix the file and run again"
            )
    if config.getoption("rc_prune_baselines"):
        try:
            notes.extend(
                _selection.prune(config, getattr(config, "_rc_session", None))
                or ["no baseline records to prune"]
            )
        except RuntimeError as exc:
            ok = False
            notes.append(f"error: {exc}")
        except Exception as exc:
            ok = False
            notes.append(
                f"error: could not prune the baselines ({type(exc).__name__}: {exc}); fix the file and run "
                "again"
            )
    run = None
    history = outputs.get("history")
    if history is not None and outcomes:
        try:
            run_id = _reports.record_history(
                history, config._rc_run or {}, outcomes, exitstatus, figures=config._rc_figures
            )
            run = {"id": run_id, "history": str(history), **(config._rc_run or {})}
            notes.append(
                f"run {run_id} recorded in {history} ({_reports.plural(len(outcomes), 'gate')})"
            )
        except Exception as exc:  # the history must never turn a session red: a warning
            notes.append(
                f"warning: the run was not recorded in the history {history} ({type(exc).__name__}: "
                f"{exc}); set --rc-history (ini rc_history) to a writable database file, or 'none'"
            )
    path = outputs.get("json")
    if path is not None:
        try:
            _reports.write_json(path, outcomes, exitstatus, run, config._rc_families)
            notes.append(f"JSON report written to {path}")
        except Exception as exc:
            ok = False
            notes.append(
                f"error: could not write the JSON report {path} ({type(exc).__name__}: {exc}); "
                "fix --rc-json (ini rc_json)"
            )
    path = outputs.get("html")
    if path is not None:
        try:
            meta = dict(run or {**(config._rc_run or {}), "exitstatus": int(exitstatus)})
            meta.setdefault("exitstatus", int(exitstatus))
            _reports.write_html(path, outcomes, meta, history if run else None, config._rc_figures)
            notes.append(f"HTML report written to {path}")
        except Exception as exc:
            ok = False
            notes.append(
                f"error: could not write the HTML report {path} ({type(exc).__name__}: {exc}); "
                "fix --rc-html (ini rc_html)"
            )
    _github.publish(config, outcomes, run, history if run else None, notes)
    ok = (
        _trackers.publish(
            getattr(config, "_rc_trackers", []), outcomes, run or config._rc_run, notes
        )
        and ok
    )
    return ok


def _resolve_outputs(config) -> dict:
    """The JSON, HTML and history paths, checked once at start-up: a path that cannot be
    written (a directory, under a regular file, a missing directory outside the rootdir)
    is one usage error naming the flag; the default history path, which nobody asked
    for, is dropped with a warning instead."""
    outputs = {}
    invocation = Path(config.invocation_params.dir)
    rootdir = Path(config.rootpath)
    for name, base in (("json", invocation), ("html", invocation)):
        value = _option(config, name).strip()
        if value:
            outputs[name] = _checked_output(config, name, value, base, rootdir)
    value = _option(config, "history").strip()
    if value.lower() != "none":
        if value:
            outputs["history"] = _checked_output(config, "history", value, rootdir, rootdir)
        else:
            # the project root by the command line's rule, from the rootdir: both find the same database
            default = default_history_path(rootdir)
            problem = _reports.output_problem(default, default.parent.parent, "history.sqlite")
            if problem is None:
                outputs["history"] = default
            else:
                outputs["history"] = None
                config._rc_history_problem = (
                    f"warning: the run history is off for this session: {problem} "
                    "(set --rc-history / ini rc_history to a database file, or 'none')"
                )
    return outputs


def _checked_output(config, name: str, value: str, base: Path, rootdir: Path) -> Path:
    path = Path(os.path.expanduser(value))
    path = path if path.is_absolute() else base / path
    suggested = {"json": "gates.json", "html": "report.html", "history": "history.sqlite"}[name]
    problem = _reports.output_problem(path, rootdir, suggested)
    if problem is not None:
        raise pytest.UsageError(f"retrieval-checks: --rc-{name}={value} (ini rc_{name}): {problem}")
    return path


def _history_path(config):
    outputs = getattr(config, "_rc_outputs", None)
    if outputs is None:
        outputs = config._rc_outputs = _resolve_outputs(config)
    return outputs.get("history")


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
            raise pytest.UsageError(
                f"retrieval-checks: --rc-device (ini rc_device): {exc}"
            ) from None
    config._rc_options = resolved
    return resolved


@pytest.fixture(scope="session")
def rc_options(pytestconfig) -> dict:
    """The session's retrieval-checks options, resolved (flags override ini).

    Parameters
    ----------
    pytestconfig:
        pytest's config (a fixture pytest supplies).

    Returns
    -------
    dict
        ``device``, ``max_memory``, ``seed``, ``confidence``, ``ties``,
        ``max_skipped`` and ``timeout``, from ``--rc-<name>`` or the ini's
        ``rc_<name>``, else the library's defaults.

    Raises
    ------
    pytest.UsageError
        At start-up, for a value the option table refuses (naming the flag and the ini
        key), or a CUDA device where there is none.

    Examples
    --------
    A test reading the session's options, run with ``--rc-confidence 0.9``:

    >>> import pathlib, tempfile
    >>> import pytest
    >>> quiet = ["-p", "no:terminal", "-p", "no:cacheprovider", "--rc-history", "none",
    ...          "--import-mode=importlib"]
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = pathlib.Path(tmp.name)
    >>> test = folder / "test_options_example.py"
    >>> _ = test.write_text('''
    ... def test_session_options(rc_options):
    ...     assert rc_options["confidence"] == 0.9
    ...     assert rc_options["ties"] == "pessimistic"
    ... ''')
    >>> pytest.main([str(test), "--rc-confidence", "0.9", *quiet])
    <ExitCode.OK: 0>
    >>> tmp.cleanup()
    """
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
        item = _current_item.get()
        if item is not None and (model is not None or dataset is not None):
            # the test's gates that do not carry a result's names (gaps, comparisons) are named by these
            named = item.__dict__.setdefault("_rc_named", [])
            named.append(
                {
                    "model": None if model is None else str(model),
                    "dataset": None if dataset is None else str(dataset),
                }
            )
        kw = {
            "device": self.options["device"],
            "max_memory": self.options["max_memory"],
            "ties": self.options["ties"],
            "confidence": self.options["confidence"],
            "group_seed": self.options["seed"],
            **kwargs,
        }
        return self.cache.evaluate(
            queries, gallery, context={"model": model, "dataset": dataset}, **kw
        )


@pytest.fixture(scope="session")
def rc_evaluate(rc_options) -> _Evaluator:
    """``evaluate`` with the session's options, cached per (model, dataset).

    The fixture is a callable: ``rc_evaluate(queries, gallery=None, *, model=None,
    dataset=None, **evaluate_kwargs)``, :func:`~retrieval_checks.evaluate` with the
    session's ``device``, ``max_memory``, ``ties``, ``confidence`` and ``seed`` (the
    keywords override them); results are cached for the session by the arrays' content
    and the options, so tests asking for the same evaluation share one pass.
    ``model`` and ``dataset`` name the result in gate messages, records and reports.

    Parameters
    ----------
    rc_options:
        The session's options (the :func:`rc_options` fixture).

    Returns
    -------
    callable
        The cached evaluator; each call returns an
        :class:`~retrieval_checks.EvaluationResult`.

    Raises
    ------
    InputError
        From a call: the errors of :func:`~retrieval_checks.evaluate`.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import pytest
    >>> quiet = ["-p", "no:terminal", "-p", "no:cacheprovider", "--rc-history", "none",
    ...          "--import-mode=importlib"]
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = pathlib.Path(tmp.name)
    >>> test = folder / "test_evaluate_example.py"
    >>> _ = test.write_text('''
    ... import numpy as np
    ... import retrieval_checks as rc
    ...
    ... X = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.6, 0.8]], dtype=np.float32)
    ...
    ... def test_map(rc_evaluate):
    ...     res = rc_evaluate(X, query_labels=[0, 0, 1, 1], metrics=["map"], model="demo")
    ...     rc.assert_metric(res, "map", at_least=0.7)
    ...
    ... def test_top1(rc_evaluate):  # the same evaluation: no second pass
    ...     res = rc_evaluate(X, query_labels=[0, 0, 1, 1], metrics=["map"], model="demo")
    ...     rc.assert_metric(res, "map", at_least=0.9)
    ... ''')
    >>> pytest.main([str(test), *quiet])  # map is 0.75: the second test fails
    <ExitCode.TESTS_FAILED: 1>
    >>> tmp.cleanup()
    """
    return _Evaluator(rc_options)


@pytest.fixture(scope="session")
def rc_load(pytestconfig):
    """``load_embeddings(path, ...)`` with relative paths resolved against the rootdir
    (cached per path and keys).

    The fixture is a callable: ``rc_load(path, **load_kwargs)``, a relative ``path``
    read against the rootdir.

    Parameters
    ----------
    pytestconfig:
        pytest's config (a fixture pytest supplies): its rootdir.

    Returns
    -------
    callable
        The cached loader; each call returns an
        :class:`~retrieval_checks.EmbeddingSet`.

    Raises
    ------
    InputError
        From a call: the errors of :func:`~retrieval_checks.load_embeddings`.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import pytest
    >>> quiet = ["-p", "no:terminal", "-p", "no:cacheprovider", "--rc-history", "none",
    ...          "--import-mode=importlib"]
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = pathlib.Path(tmp.name)
    >>> import numpy as np
    >>> np.savez(folder / "queries.npz", embeddings=np.eye(4, dtype=np.float32),
    ...          labels=np.array([0, 0, 1, 1]))
    >>> test = folder / "test_load_example.py"
    >>> _ = test.write_text('''
    ... def test_load(rc_load):
    ...     s = rc_load("queries.npz")  # relative to the rootdir
    ...     assert s.embeddings.shape == (4, 4) and list(s.labels) == [0, 0, 1, 1]
    ... ''')
    >>> pytest.main([str(test), "--rootdir", str(folder), *quiet])
    <ExitCode.OK: 0>
    >>> tmp.cleanup()
    """
    cache: dict = {}

    def load(path, **kwargs):
        p = Path(path)
        if not p.is_absolute():
            p = Path(pytestconfig.rootpath) / p
        key = (str(p), _hashable(kwargs))
        try:
            hash(key)
        except TypeError:  # an argument that cannot be a key (an array): read, not cached
            return rc.load_embeddings(p, **kwargs)
        if key not in cache:
            cache[key] = rc.load_embeddings(p, **kwargs)
        return cache[key]

    return load


def _hashable(value):
    """``value`` with its lists, tuples, sets and mappings made tuples (``columns=[...]``
    is a list): a key for ``rc_load``'s cache."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), _hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(map(repr, value)))
    return value


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
        record = baseline_record(
            result, metric, confidence=self.options["confidence"], seed=self.options["seed"]
        )
        context = getattr(
            result, "context", None
        )  # the model and dataset given to rc_evaluate, as suites record
        if isinstance(context, dict):
            record.update(
                {
                    k: str(v)
                    for k, v in context.items()
                    if k in ("model", "dataset") and v is not None
                }
            )
        name = f"{self.request.node.name}::{record['metric']}" + (f"::{key}" if key else "")
        try:
            return store.check(
                record,
                path=self.path,
                key=name,
                confidence=self.options["confidence"],
                **tolerances,
            )
        finally:
            queue_baselines(self.request.node, store.pending)


@pytest.fixture
def rc_baseline(request, rc_options) -> _Baselines:
    """Gate a metric of a result against its baseline stored beside the test module.

    The fixture is a callable: ``rc_baseline(result, metric, *, key=None, max_drop=None,
    max_relative_drop=None, direction=None, significant=False, ...)`` (the tolerances
    of :func:`~retrieval_checks.assert_no_regression`). It compares the metric with its
    record ``<test name>::<metric>[::key]`` in ``<test module>.baselines.yaml``; a
    missing record fails the test (fail closed). ``--rc-regen-all`` writes every
    record, ``--rc-force-regen`` rewrites the changed ones and fails.

    Parameters
    ----------
    request:
        pytest's request (a fixture pytest supplies): the test and its module.
    rc_options:
        The session's options (``confidence``, ``seed`` of the records' intervals).

    Returns
    -------
    callable
        The gate; each call returns the :class:`~retrieval_checks.Change` (None when
        the record was written instead).

    Raises
    ------
    AssertionError
        From a call: the metric regressed beyond the tolerances, or it has no record.
    InputError
        From a call: the errors of :func:`~retrieval_checks.baseline_record` and
        :func:`~retrieval_checks.assert_no_regression`, an unreadable baselines file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import pytest
    >>> quiet = ["-p", "no:terminal", "-p", "no:cacheprovider", "--rc-history", "none",
    ...          "--import-mode=importlib"]
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = pathlib.Path(tmp.name)
    >>> test = folder / "test_baseline_example.py"
    >>> _ = test.write_text('''
    ... import numpy as np
    ...
    ... rng = np.random.default_rng(0)
    ... Y = np.repeat(np.arange(12), 3)
    ... X = rng.normal(size=(12, 8))[Y] + 0.5 * rng.normal(size=(36, 8))
    ... LANG = np.where(Y < 6, "de", "en")
    ...
    ... def test_map_kept(rc_evaluate, rc_baseline):
    ...     res = rc_evaluate(X, query_labels=Y, metrics=["map"], model="demo")
    ...     rc_baseline(res, "map", max_drop=0.01)
    ... ''')
    >>> pytest.main([str(test), *quiet])  # no baseline yet: the gate fails
    <ExitCode.TESTS_FAILED: 1>
    >>> pytest.main([str(test), "--rc-regen-all", *quiet])  # write it
    <ExitCode.OK: 0>
    >>> pytest.main([str(test), *quiet])  # compare with it
    <ExitCode.OK: 0>
    >>> print((folder / "test_baseline_example.baselines.yaml").read_text())  # doctest: +ELLIPSIS
    # retrieval-checks baselines: review changes like code.
    ...
    test_map_kept::map:
      metric: map
      value: 0.830787
    ...
    >>> tmp.cleanup()
    """
    return _Baselines(request, rc_options)


class _SliceBaselines(_Baselines):
    """``rc_slice_baseline(result, metric, *, key=None, slices=None, max_drop=None,
    max_relative_drop=None)``: compare each slice of a result evaluated with ``slices=``
    with its baseline in ``<test module>.baselines.yaml`` (one record per slice, written
    with ``--rc-regen-all`` / ``--rc-force-regen``): one gate over the slices
    (:func:`retrieval_checks.gates.check_slice_baselines`); a slice of the file missing
    now is an error."""

    def __call__(self, result, metric: str, *, key: str | None = None, slices=None, **tolerances):
        __tracebackhide__ = True
        config = self.request.config
        store = getattr(config, "_rc_baseline_store", None)
        if store is None:
            store = config._rc_baseline_store = BaselineStore(regen_mode(config))
        context = getattr(result, "context", None)
        name = f"{self.request.node.name}::{rc.metrics.parse_metric(metric).name}" + (
            f"::{key}" if key else ""
        )
        try:
            rc.gates.check_slice_baselines(
                store,
                result,
                metric,
                path=self.path,
                key=name,
                slices=slices,
                confidence=self.options["confidence"],
                seed=self.options["seed"],
                context=context if isinstance(context, dict) else None,
                **tolerances,
            )
        finally:
            queue_baselines(self.request.node, store.pending)


@pytest.fixture
def rc_slice_baseline(request, rc_options) -> _SliceBaselines:
    """Gate each slice of a result against its baseline stored beside the test module.

    The fixture is a callable: ``rc_slice_baseline(result, metric, *, key=None,
    slices=None, max_drop=None, max_relative_drop=None)``. It keeps one record per
    slice in ``<test module>.baselines.yaml`` (written with ``--rc-regen-all`` /
    ``--rc-force-regen``) and gates every slice in one gate; a slice of the file
    missing from the result is an error, never skipped.

    Parameters
    ----------
    request:
        pytest's request (a fixture pytest supplies): the test and its module.
    rc_options:
        The session's options (``confidence``, ``seed``).

    Returns
    -------
    callable
        The gate; each call returns None.

    Raises
    ------
    AssertionError
        From a call: a slice dropped beyond the tolerances, or has no record.
    InputError
        From a call: a result without slices, a slice of the baseline missing now, a
        slice too small for an interval, and the errors of
        :func:`~retrieval_checks.assert_no_slice_regression`.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import pytest
    >>> quiet = ["-p", "no:terminal", "-p", "no:cacheprovider", "--rc-history", "none",
    ...          "--import-mode=importlib"]
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = pathlib.Path(tmp.name)
    >>> test = folder / "test_slice_baseline_example.py"
    >>> _ = test.write_text('''
    ... import numpy as np
    ...
    ... rng = np.random.default_rng(0)
    ... Y = np.repeat(np.arange(12), 3)
    ... X = rng.normal(size=(12, 8))[Y] + 0.5 * rng.normal(size=(36, 8))
    ... LANG = np.where(Y < 6, "de", "en")
    ...
    ... def test_no_language_got_worse(rc_evaluate, rc_slice_baseline):
    ...     res = rc_evaluate(X, query_labels=Y, metrics=["map"], slices=LANG, model="demo")
    ...     rc_slice_baseline(res, "map", max_drop=0.01)
    ... ''')
    >>> pytest.main([str(test), "--rc-regen-all", *quiet])
    <ExitCode.OK: 0>
    >>> pytest.main([str(test), *quiet])
    <ExitCode.OK: 0>
    >>> text = (folder / "test_slice_baseline_example.baselines.yaml").read_text()
    >>> [line for line in text.splitlines() if line.startswith("test_")]
    ['test_no_language_got_worse::map slice=de:', 'test_no_language_got_worse::map slice=en:']
    >>> tmp.cleanup()
    """
    return _SliceBaselines(request, rc_options)


class _Report:
    """``rc_report.add_sweep(table, title=None, *, model=None, dataset=None)``: put a
    class-count sweep (:func:`retrieval_checks.class_count_sweep`) in the session's HTML
    report, named by its model and dataset (the figure says when none was given)."""

    def __init__(self, item):
        self.item = item

    def add_sweep(
        self,
        table,
        title: str | None = None,
        *,
        model: str | None = None,
        dataset: str | None = None,
    ) -> None:
        rows = [
            {k: r[k] for k in ("n_classes", "metric", "value", "low", "high") if k in r}
            for r in table.to_rows()
        ]
        self.item.user_properties.append(
            (
                _FIGURE_PROPERTY,
                json.dumps(
                    {
                        "kind": "sweep",
                        "title": title,
                        "model": model,
                        "dataset": dataset,
                        "rows": rows,
                    },
                    default=float,
                ),
            )
        )


@pytest.fixture
def rc_report(request) -> _Report:
    """Add figures to the HTML report (``--rc-html``).

    The fixture has one method: ``rc_report.add_sweep(table, title=None, *, model=None,
    dataset=None)`` puts a class-count sweep (:func:`~retrieval_checks.class_count_sweep`)
    in the session's HTML report (``--rc-html``), named by its model and dataset.

    Parameters
    ----------
    request:
        pytest's request (a fixture pytest supplies): the test item.

    Returns
    -------
    object
        The report handle of the test.

    Raises
    ------
    None
        Figures are JSON records; the report is written at the end of the session.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import pytest
    >>> quiet = ["-p", "no:terminal", "-p", "no:cacheprovider", "--rc-history", "none",
    ...          "--import-mode=importlib"]
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = pathlib.Path(tmp.name)
    >>> test = folder / "test_report_example.py"
    >>> _ = test.write_text('''
    ... import numpy as np
    ... import retrieval_checks as rc
    ...
    ... rng = np.random.default_rng(0)
    ... Y = np.repeat(np.arange(12), 3)
    ... X = rng.normal(size=(12, 8))[Y] + 0.5 * rng.normal(size=(36, 8))
    ... LANG = np.where(Y < 6, "de", "en")
    ...
    ... def test_sweep(rc_report):
    ...     table = rc.class_count_sweep(X, Y, class_counts=[6, 12], metrics=["hit_rate@1"], trials=1)
    ...     rc_report.add_sweep(table, title="hit_rate@1 by classes", model="demo")
    ... ''')
    >>> pytest.main([str(test), "--rc-html", str(folder / "report.html"), *quiet])
    <ExitCode.OK: 0>
    >>> "hit_rate@1 by classes" in (folder / "report.html").read_text()
    True
    >>> tmp.cleanup()
    """
    return _Report(request.node)
