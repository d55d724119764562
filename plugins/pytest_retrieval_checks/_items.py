"""Collection of YAML suites: one pytest item per (model, dataset, check).

A suite that cannot be read or validated is a collection error of its file, as a test
module that cannot be imported is: its message names the file, the line and the field;
``-m``, ``-k`` and ``--deselect`` cannot hide it (an item standing for it would carry
none of the suite's markers or check names, and any selection would drop it, leaving a
green run with no gate run); pytest stops before running tests (exit 2), unless
``--continue-on-collection-errors``. The error is also a failed record of the suite
(:func:`collect_error_record`) in the table, JSON and history.
"""

from __future__ import annotations

import fnmatch
import json

import pytest

from retrieval_checks import RetrievalChecksError, SuiteError
from retrieval_checks.gates import GateEvent, skipped_limit
from retrieval_checks.suites import suite_errors


def matches(path, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(path.name, p) for p in patterns)


class SuiteFile(pytest.File):
    """A YAML suite file."""

    def collect(self):
        try:
            suite, errors = suite_errors(self.path)
        except SuiteError as exc:
            suite, errors = None, [exc]
        except (
            Exception
        ) as exc:  # a bug of ours: still this file's collection error, never a quiet pass
            self.rc_error = SuiteError(
                f"could not read the suite ({type(exc).__name__}: {exc}); please report "
                "this with the file.",
                path=self.path,
            )
            raise self.CollectError(f"invalid retrieval-checks suite\n{self.rc_error}") from None
        if errors:  # every independent error of the file, in file order (as `validate`)
            self.rc_error = errors[0]
            listed = "\n".join(str(e) for e in errors)
            more = f"\n({len(errors)} errors)" if len(errors) > 1 else ""
            raise self.CollectError(f"invalid retrieval-checks suite\n{listed}{more}")
        known = {line.split(":")[0].split("(")[0].strip() for line in self.config.getini("markers")}
        for name, _, _ in {
            m[0]: m for c in suite.checks for m in (*suite.markers, *c.markers)
        }.values():
            if name not in known:  # markers declared in a suite are registered, as in an ini file
                self.config.addinivalue_line(
                    "markers", f"{name}: declared in suite {self.path.name}"
                )
                known.add(name)
        for case in suite.cases:
            # the node id is passed whole: pytest >= 9.2 parses it into name and [params] the same way
            # as the ids it reads back for --lf; built from the name alone, the two would not compare equal
            item = SuiteItem.from_parent(
                self, name=case.name, nodeid=f"{self.nodeid}::{case.name}", suite=suite, case=case
            )
            for name, args, kwargs in (*suite.markers, *case.check.markers):
                item.add_marker(getattr(pytest.mark, name)(*args, **kwargs))
            yield item


class SuiteItem(pytest.Item):
    """One check of a suite, applied to one model on one dataset (or a train/test pair)."""

    def __init__(self, *, suite, case, **kwargs):
        super().__init__(**kwargs)
        self.suite = suite
        self.case = case

    def runtest(self):
        from .plugin import queue_baselines, suite_runner

        runner = suite_runner(self.config)
        try:
            runner.run(self.suite, self.case)
        finally:
            queue_baselines(self, runner.baselines.pending)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, (AssertionError, RetrievalChecksError)):
            return str(excinfo.value)  # the gate's message: no traceback from inside the library
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        line = self.case.check.line
        return self.path, (line - 1 if line else None), f"{self.suite.name}: {self.name}"


def _too_many(n_used, n_skipped, limit) -> bool:
    if not isinstance(n_skipped, int) or isinstance(n_skipped, bool):
        return False
    n_used = n_used if isinstance(n_used, int) and not isinstance(n_used, bool) else 0
    return skipped_limit(n_skipped, n_used, limit) is not None  # the gates' one rule, exact


def fail_on_skipped(item, start: int, limit, prop: str) -> None:
    """Fail ``item`` when a gate it ran (its records from ``start`` on in the item's
    properties) skipped more queries than the session's ``max_skipped`` allows; a gate
    given its own ``max_skipped=`` has applied it already. The records are marked failed
    so that the summary, JSON, JUnit and history agree with the test's outcome."""
    problems = []
    for i in range(start, len(item.user_properties)):
        name, value = item.user_properties[i]
        if name != prop:
            continue
        record = json.loads(value)
        if (
            record.get("max_skipped") is not None
            or (record.get("bounds") or {}).get("max_skipped") is not None
        ):
            continue
        used, skipped = record.get("n_used"), record.get("n_skipped")
        if not _too_many(used, skipped, limit):
            continue
        what = (
            f"{limit} queries" if isinstance(limit, int) else f"a fraction {limit:g} of the queries"
        )
        problem = (
            f"gate {record.get('gate')} ({record.get('metric')}): {skipped} queries skipped, n_used {used} / "
            f"n_skipped {skipped}; --rc-max-skipped (ini rc_max_skipped) allows at most {what}"
        )
        problems.append(problem)
        record["passed"] = False
        record["max_skipped"] = limit
        record["warnings"] = [*(record.get("warnings") or []), problem]
        item.user_properties[i] = (name, json.dumps(record))
    if problems:
        pytest.fail(
            "too many skipped queries (queries without a relevant gallery item do not count in the value):\n"
            + "\n".join(problems)
            + "\nGive every query a relevant gallery item, or raise --rc-max-skipped.",
            pytrace=False,
        )


def error_record(item, report, prop: str) -> dict | None:
    """The FAIL record of a YAML suite item (a check) that failed without recording a
    failed gate: gate ``error``, the check's metric, no value, and the failure's
    message. None for other items, and for items whose failure a gate already
    recorded."""
    case = getattr(item, "case", None)
    if case is None:
        return None
    for name, value in item.user_properties:
        if name == prop:
            try:
                if not json.loads(value).get("passed", True):
                    return None
            except (ValueError, AttributeError):
                continue
    message = (getattr(report, "longreprtext", "") or "the item failed")[-4000:]
    return _error(
        case.check.metric.name,
        suite=item.suite.name,
        model=case.model,
        dataset="/".join(case.datasets),
        line=case.check.line,
        message=message,
    )


def _error(metric: str, *, suite, model, dataset, line, message: str) -> dict:
    """The record of a failure no gate recorded: a failed gate event of gate ``error``
    (the one record shape: GateEvent.to_dict), with the suite, its line and the message."""
    event = GateEvent(
        gate="error",
        metric=metric,
        value=None,
        passed=False,
        on="error",
        model=model,
        dataset=dataset,
        extra={"suite": suite, "line": line, "message": message},
    )
    return event.to_dict()


def collect_error_record(collector, report) -> dict | None:
    """The FAIL record of a suite file that could not be loaded (its collection error):
    gate ``error``, metric ``(suite)``, the error's line and message. None for other
    collectors and for collections that did not fail."""
    if not isinstance(collector, SuiteFile) or not report.failed:
        return None
    error = getattr(collector, "rc_error", None)
    message = (
        getattr(report, "longreprtext", "") or str(error or "") or "the suite could not be loaded"
    )[-4000:]
    return _error(
        "(suite)",
        suite=collector.path.name,
        model=None,
        dataset=None,
        line=getattr(error, "line", None),
        message=message,
    )
