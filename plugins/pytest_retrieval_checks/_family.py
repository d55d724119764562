"""The family's verdict on each test: a check that a multiplicity correction fails is a
failed test, on its own line, in pytest's counts and exit status and in its own JUnit
testcase.

A significance-gated check under a correction (``--rc-correction holm``, a suite's
``correction:``, a gate's ``correction=``) whose drop is significant at its own level
cannot be decided when its test runs: the correction needs the p-values of the whole
family, every test's (every pytest-xdist worker's). Such a test's reports are **held**:
its call and teardown reports (and, in one process, its setup report) are not logged
when the test ends, but when the test loop has ended and the family is complete. The
family is then decided (:func:`retrieval_checks.gates.decide_family`), each held
report's gate records and JUnit properties get their decision and adjusted p-value, a
test whose check the correction fails becomes a failure (an expected failure of an
``xfail`` test: xfailed) whose message names the check, its raw and adjusted p-values
and the family, and the reports are logged: the terminal prints those tests last (in
collection order), the counts, the exit status and the JUnit testcase are the decided
ones. Only tests with such a check wait; every other test is reported as it ends.

In one process the plugin runs pytest's own test protocol, phase by phase, and holds
the call and teardown reports of a test whose call carries a deferred check (when no
other plugin runs the protocol: pytest-rerunfailures and the like keep theirs, and then
the fallback below applies); under pytest-xdist the
controller holds the reports its workers send. When a report could not be held, a check
the correction fails is reported as a failed item of its own at the end of the run,
``<test>::family[<metric>]``, so that it is never only a line in a summary.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import retrieval_checks as rc

from . import _reports

__all__ = ["Held", "run_holding", "hold_xdist", "decide_and_log", "is_deferred"]


def is_deferred(report, prop: str) -> bool:
    """Whether ``report`` carries a gate record deferred to its family's correction."""
    for name, value in getattr(report, "user_properties", ()) or ():
        if name == prop and '"deferred"' in value:
            try:
                if json.loads(value).get("decision") == "deferred":
                    return True
            except (TypeError, ValueError):
                continue
    return False


class Held:
    """The held reports of one test and how to log them (pytest's hooks in one process,
    the pytest-xdist controller's own handlers under it)."""

    def __init__(self, nodeid: str, log, finish=None):
        self.nodeid = nodeid
        self.reports: list = []
        self.log = log  # log(report)
        self.finish = finish  # finish(): pytest_runtest_logfinish, when it came


def _protocol_is_ours(item) -> bool:
    """Whether only pytest's runner (and wrappers) would run ``item``'s protocol: another
    plugin's protocol (pytest-rerunfailures, pytest-repeat...) keeps precedence."""
    try:
        impls = item.config.pluginmanager.hook.pytest_runtest_protocol.get_hookimpls()
    except AttributeError:
        return False
    others = [
        i
        for i in impls
        if not (i.hookwrapper or getattr(i, "wrapper", False))
        and getattr(i.plugin, "__name__", "")
        not in ("_pytest.runner", __name__.rsplit(".", 1)[0] + ".plugin")
    ]
    return not others


def run_holding(item, nextitem, held: dict, prop: str):
    """pytest's test protocol for ``item`` (``_pytest.runner.runtestprotocol``, phase by
    phase with the same hooks at the same moments), except that a call report carrying
    a deferred check is not logged: it and the teardown report are kept in ``held`` for
    :func:`decide_and_log`. Returns None (pytest's own protocol runs) when the protocol
    is not ours to run."""
    try:
        from _pytest.runner import call_and_report, show_test_item
    except ImportError:  # pragma: no cover - a pytest without them: the fallback applies
        return None
    if not _protocol_is_ours(item):
        return None
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    hasrequest = hasattr(item, "_request")
    if hasrequest and not item._request:  # re-run items (as pytest's own protocol does)
        item._initrequest()
    reports = [call_and_report(item, "setup", True)]
    wait = False
    if reports[0].passed:
        if item.config.getoption("setupshow", False):
            show_test_item(item)
        if not item.config.getoption("setuponly", False):
            call = call_and_report(item, "call", False)
            wait = is_deferred(call, prop)
            if not wait:
                ihook.pytest_runtest_logreport(report=call)
            reports.append(call)
    if item.session.shouldfail or item.session.shouldstop:
        nextitem = None  # tear everything down, as pytest does when the session stops
    reports.append(call_and_report(item, "teardown", not wait, nextitem=nextitem))
    if hasrequest:
        item._request = False
        item.funcargs = None
    if wait:
        entry = Held(
            item.nodeid,
            lambda report: ihook.pytest_runtest_logreport(report=report),
            lambda: ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location),
        )
        entry.reports.extend(reports[1:])  # the setup report is logged already
        held[item.nodeid] = entry
        return True
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def hold_xdist(config, held: dict, prop: str) -> bool:
    """On the pytest-xdist controller, hold the reports of a test whose call carries a
    deferred check (and the rest of that test's reports and its logfinish). False when
    the controller's handlers are not there to wrap (the fallback applies)."""
    dsession = config.pluginmanager.getplugin("dsession")
    testreport = getattr(dsession, "worker_testreport", None)
    logfinish = getattr(dsession, "worker_logfinish", None)
    if testreport is None or logfinish is None:
        return False

    def worker_testreport(node, rep):
        entry = held.get(rep.nodeid)
        if entry is None and rep.when == "call" and is_deferred(rep, prop):
            entry = held[rep.nodeid] = Held(rep.nodeid, lambda r: testreport(node, r))
        if entry is None:
            return testreport(node, rep)
        entry.reports.append(rep)
        return None

    def worker_logfinish(node, nodeid, location):
        entry = held.get(nodeid)
        if entry is None:
            return logfinish(node, nodeid, location)
        entry.finish = lambda: logfinish(node, nodeid, location)
        return None

    dsession.worker_testreport = worker_testreport
    dsession.worker_logfinish = worker_logfinish
    return True


class _Crash(SimpleNamespace):
    """The crash line of pytest's short summary and of ``--tb=line``."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class _Failure:
    """A held report's failure: the text pytest prints and JUnit keeps, and the crash
    line of pytest's short summary (``FAILED <test> - <message>``)."""

    def __init__(self, text: str, message: str, location):
        self.text = text
        path, lineno = (location[0], location[1]) if location else ("", None)
        self.reprcrash = _Crash(path=path, lineno=lineno, message=message)

    def toterminal(self, tw) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:
        return self.text


def _check_text(record: dict, families: dict, held: bool = True) -> tuple[str, str]:
    """The failure's one-line message and its full text, for one check the correction
    failed."""
    c = record.get("correction")
    fam = families.get(c, {})
    size = record.get("family_size") or fam.get("size")
    p, adj, level = record.get("p_raw"), record.get("p_adjusted"), record.get("significance_level")
    name = {"holm": "Holm's step-down", "bh": "Benjamini-Hochberg"}.get(c, c)
    rate = {"holm": "family-wise error rate", "bh": "false discovery rate"}.get(c, "level")
    if str(record.get("decision", "")).endswith("underpowered"):
        message = (
            f"{record.get('metric')} failed after {c}: underpowered (min_power "
            f"{record.get('power'):g}) at the corrected level {record.get('power_level'):.3g} "
            f"of the family of {size} significance-gated checks"
        )
        text = (
            f"{record.get('gate')}: {record.get('power_failure')}.\n"
            f"{record.get('power_correction')}: a check that requires a power (min_power) must have "
            "it at the level its correction tests it at. Evaluate on more units (the count above), "
            "allow a larger drop, require less power, or gate fewer checks in the family.\n"
            "A check under a correction is decided when its whole family is known, after the last "
            "test, "
            + (
                "so this test was reported then."
                if held
                else f"after {record.get('test')} was reported: this item of its own is its failure."
            )
        )
        return message, text
    message = (
        f"{record.get('metric')} failed after {c}: adjusted p {adj:.3g} < {level:.3g} "
        f"in the family of {size} significance-gated checks (raw p {p:.3g})"
    )
    rule = _reports.rule_text(record) if record.get("on") else ""
    seen = f"{record.get('value')}"
    if record.get("baseline") is not None:
        seen += f" (baseline {record['baseline']})"
    text = (
        f"{record.get('gate')}: {record.get('metric')} = {seen}"
        + (f", rule {rule}" if rule else "")
        + f": failed after {c}.\n"
        f"Beyond its tolerance and significant after {name} over the run's family of {size} "
        f"significance-gated checks ({rate} {level:.3g}): p {p:.3g}, adjusted {adj:.3g} < {level:.3g}.\n"
        "A check under a correction is decided when its whole family is known, after the last "
        "test (every pytest-xdist worker's checks included), "
        + (
            "so this test was reported then."
            if held
            else f"after {record.get('test')} was reported (another plugin ran its test protocol): "
            "this item of its own is its failure."
        )
    )
    return message, text


def _decided_properties(report, prop: str, decided: list) -> None:
    """Replace each deferred record of ``report``'s properties (and its JUnit decision
    property) by its decided one, in order."""
    props = list(report.user_properties)
    queue = list(decided)
    for i, (name, value) in enumerate(props):
        if name != prop or not queue:
            continue
        try:
            old = json.loads(value)
        except (TypeError, ValueError):
            continue
        if old.get("decision") != "deferred":
            continue
        new = {k: v for k, v in queue.pop(0).items() if k not in ("test", "xfail")}
        props[i] = (name, _reports.strict_json(new))
        metric = old.get("metric")
        for j in range(i - 1, -1, -1):  # its JUnit properties come just before it
            if props[j][0] == f"rc:{metric}:decision":
                props[j] = (props[j][0], new.get("decision"))
                props.insert(j + 1, (f"rc:{metric}:p_adjusted", new.get("p_adjusted")))
                break
    report.user_properties[:] = props


def decide_and_log(config, held: dict, prop: str) -> list[dict]:
    """Decide the families over the session's records (``config._rc_outcomes``, logged)
    and the held tests' records, give each held report its decision, and log the held
    tests in collection order. A check the correction failed in a test whose reports
    were not held (logged green before the family was known) gets a failed item of its
    own. Returns the family summaries."""
    order = getattr(config, "_rc_order", None) or {}
    entries = sorted(held.values(), key=lambda e: order.get(e.nodeid, len(order)))
    records = {}  # nodeid -> the held call report's deferred records, in order
    for e in entries:
        call = next((r for r in e.reports if r.when == "call"), None)
        xfail = hasattr(call, "wasxfail")
        recs = []
        for name, value in getattr(call, "user_properties", ()):
            if name == prop:
                r = json.loads(value)
                if r.get("decision") == "deferred":
                    recs.append({"test": e.nodeid, **r, **({"xfail": True} if xfail else {})})
        records[e.nodeid] = recs
    logged = [r for r in config._rc_outcomes if r.get("decision") == "deferred"]
    families = rc.gates.decide_family(
        [*config._rc_outcomes, *(r for recs in records.values() for r in recs)]
    )
    by_correction = {f["correction"]: f for f in families}
    for e in entries:
        recs = records[e.nodeid]
        for report in e.reports:
            _decided_properties(report, prop, recs)
        failed = [r for r in recs if str(r.get("decision", "")).startswith("failed after")]
        call = next((r for r in e.reports if r.when == "call"), None)
        if failed and call is not None:
            _fail(call, [_check_text(r, by_correction) for r in failed])
        for report in e.reports:
            e.log(report)
        if e.finish is not None:
            e.finish()
    _unheld_failures(config, logged, by_correction)
    return families


def _fail(call, texts: list) -> None:
    """Turn a held call report into the failure the family decided (an ``xfail`` test's
    into xfailed; a report that already failed keeps its failure, the decision added)."""
    message = "; ".join(m for m, _ in texts)
    text = "\n\n".join(t for _, t in texts)
    if call.failed:
        call.sections.append(("retrieval-checks: decided after the test", text))
        return
    if hasattr(call, "wasxfail"):  # expected to fail, and it did: xfailed
        call.outcome = "skipped"
        call.longrepr = _Failure(text, message, call.location)
        return
    call.outcome = "failed"
    call.longrepr = _Failure(text, message, call.location)


def _unheld_failures(config, logged: list, families: dict) -> None:
    """A check the correction failed whose test was reported before the family was
    known (its reports could not be held): a failed item of its own, named after the
    test and the metric, so that pytest's counts, exit status and JUnit show it."""
    import pytest

    for r in logged:
        if not str(r.get("decision", "")).startswith("failed after") or r.get("xfail"):
            continue
        message, text = _check_text(r, families, held=False)
        test = str(r.get("test"))
        nodeid = f"{test}::family[{r.get('metric')}]"
        location = (test.split("::")[0], None, nodeid.split("::", 1)[-1])
        report = pytest.TestReport(
            nodeid=nodeid,
            location=location,
            keywords={},
            outcome="failed",
            longrepr=_Failure(text, message, location),
            when="call",
            user_properties=[(f"rc:{r.get('metric')}:decision", r.get("decision"))],
        )
        config.hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        config.hook.pytest_runtest_logreport(report=report)
        config.hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
