"""--rc-mlflow and --rc-wandb (pytester) against the real packages, offline: a local
MLflow file store read back with ``MlflowClient``, and a W&B offline run read back from
its ``.wandb`` file (LevelDB log records of W&B's protobuf ``Record``s, decoded here
without the W&B API) and its table JSON. The logged values are compared with the
plugin's own JSON report of the same session.

Cost: the sessions run in-process (mlflow, imported once when the module's first test
starts, stays imported), except the two
that start a W&B run (a subprocess each: W&B's service process, the point of those
tests, on numpy: no torch import there): about 17 CPU-s for the file alone (``-n 0``,
28 November 2026; 23 when those two imported torch, 46 measured earlier, 90 when each
of its 9 sessions was a subprocess). mlflow and wandb are imported by a module fixture, not at the module's
import, so a worker that runs none of these tests never pays their import."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True, scope="module")
def _trackers_imported():
    """mlflow and wandb imported once, when this module's first test starts, outside any
    in-process run: imported during a run, the runs after it no longer found the plugin's
    options (measured: "unrecognized arguments: --rc-mlflow"). Here rather than at the
    module's import, so an xdist worker that runs none of these tests never pays them."""
    for name in ("mlflow", "wandb.proto.wandb_internal_pb2"):  # the test extra has both
        pytest.importorskip(
            name, reason=f"{name.split('.')[0]} is not installed (pip install -e '.[test]')"
        )


SUITE = """\
datasets:
  set: {queries: set.npz}
checks:
  - {metric: map, at_least: 0.05}
  - {metric: hit_rate@1, at_least: 0.999}
"""


@pytest.fixture
def project(pytester):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 6)
    x = np.random.default_rng(5).normal(size=(10, 8))[y] + 1.5 * rng.normal(size=(60, 8))
    np.savez(pytester.path / "set.npz", embeddings=x.astype(np.float32), labels=y)
    (pytester.path / "rc_quality.yaml").write_text(SUITE)
    return pytester


def _run(pytester, *args, subprocess=False):
    """The session, in this process (the root conftest's pytester keeps mlflow, imported
    above, imported: never a second import), or in a subprocess where W&B runs: its
    ``wandb.init`` starts a service process tied to the process that started it, and a
    run's settings are read once per process."""
    run = pytester.runpytest_inprocess
    if subprocess:  # on numpy (no torch import: ~2 CPU-s) and without pytest's closing
        # garbage collections (~0.7 CPU-s; unraisable exceptions: none is checked here)
        run = pytester.runpytest_subprocess
        args = ("--rc-device=numpy", "-p", "no:unraisableexception", *args)
    return run("-p", "no:cacheprovider", "--rc-history=none", "--rc-json=gates.json", *args)


def _gates(pytester) -> list[dict]:
    return json.loads((pytester.path / "gates.json").read_text())["gates"]


def _key(gate: dict) -> str:
    check = gate["test"].rsplit("/", 1)[-1]
    # MLflow's portable key characters: letters, digits, '_', '.', '-', ' ' and '/'
    return re.sub(r"[^A-Za-z0-9_.\- /]", "_", f"rc/{check}/{gate['metric']}")


def test_mlflow_logs_every_gate_to_a_new_run_in_the_file_store(project, monkeypatch, tmp_path):
    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.as_uri())
    monkeypatch.setenv(
        "MLFLOW_ALLOW_FILE_STORE", "true"
    )  # MLflow 3 keeps the file store behind this switch
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "rc-tests")
    result = _run(project, "--rc-mlflow")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*2 gates logged to MLflow run *"])
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=store.as_uri())
    experiment = client.get_experiment_by_name("rc-tests")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"  # the run the plugin started is ended
    metrics = run.data.metrics
    gates = _gates(project)
    assert metrics["rc/n_gates"] == 2 and metrics["rc/n_failed"] == 1
    for gate in gates:
        key = _key(gate)
        assert metrics[f"{key}/value"] == pytest.approx(gate["value"], rel=1e-12)
        assert metrics[f"{key}/threshold"] == gate["threshold"]
        assert metrics[f"{key}/passed"] == float(gate["passed"])
        if gate.get("low") is not None:
            assert metrics[f"{key}/low"] == pytest.approx(gate["low"], rel=1e-12)
            assert metrics[f"{key}/high"] == pytest.approx(gate["high"], rel=1e-12)
    local = client.download_artifacts(
        run.info.run_id, "retrieval_checks/gates.json", str(tmp_path / "dl")
    )
    table = json.loads(Path(local).read_text())
    rows = [dict(zip(table["columns"], r)) for r in table["data"]]
    assert [(r["test"], r["metric"], r["passed"], r["model"], r["dataset"]) for r in rows] == [
        (g["test"], g["metric"], g["passed"], g["model"], g["dataset"]) for g in gates
    ]
    assert rows[1]["rule"] == "value >= 0.999" and rows[1]["key"] == _key(gates[1])


def test_mlflow_logs_to_the_run_a_conftest_started(project, monkeypatch, tmp_path):
    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    project.makeconftest("""
import mlflow

def pytest_configure(config):
    mlflow.start_run(run_name="training-42")

def pytest_unconfigure(config):
    mlflow.end_run()
""")
    _run(project, "--rc-mlflow").assert_outcomes(passed=1, failed=1)
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=store.as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("Default").experiment_id])
    assert run.info.run_name == "training-42" and run.data.metrics["rc/n_gates"] == 2


def _wandb_records(path: Path):
    """The protobuf records of a ``.wandb`` file: a 7-byte header, then the LevelDB log
    format (32 KiB blocks; chunks of crc32, length, type: full, first, middle, last)."""
    from wandb.proto import wandb_internal_pb2

    raw, block, pos, pending = path.read_bytes(), 32768, 7, b""
    while pos + 7 <= len(raw):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", raw[pos : pos + 7])
        data, pos = raw[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending + data if kind == 4 else data)
            pending = b""
            yield record
        elif kind == 2:
            pending = data
        elif kind == 3:
            pending += data


def test_wandb_offline_run_holds_the_table_and_the_summary(project, monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_PROJECT", "rc-tests")
    result = _run(project, "--rc-wandb", subprocess=True)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*2 gates logged to W&B run * (offline mode)*"])
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    summary = {}
    for record in _wandb_records(next(run_dir.glob("run-*.wandb"))):
        if record.WhichOneof("record_type") == "summary":
            for item in record.summary.update:
                if item.key:
                    summary[item.key] = json.loads(item.value_json)
    gates = _gates(project)
    assert summary["rc/n_gates"] == 2 and summary["rc/n_failed"] == 1
    for gate in gates:
        key = _key(gate)
        assert summary[f"{key}/value"] == pytest.approx(gate["value"], rel=1e-12)
        assert (
            summary[f"{key}/passed"] == float(gate["passed"])
            and summary[f"{key}/threshold"] == gate["threshold"]
        )
    (table_file,) = run_dir.glob("files/media/table/retrieval_checks/gates_*.table.json")
    table = json.loads(table_file.read_text())
    rows = [dict(zip(table["columns"], r)) for r in table["data"]]
    assert [(r["test"], r["metric"], r["passed"]) for r in rows] == [
        (g["test"], g["metric"], g["passed"]) for g in gates
    ]
    assert rows[0]["value"] == pytest.approx(gates[0]["value"], rel=1e-12)


@pytest.mark.parametrize("tracker", ["mlflow", "wandb"])
def test_a_missing_package_is_a_usage_error_naming_the_extra(project, tracker, monkeypatch):
    # the package made unfindable by a conftest, which pytest loads before the plugin's start-up
    # check; the session runs in this process, so the real find_spec is put back after the test
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", importlib.util.find_spec)
    project.makeconftest(f"""
import importlib.util

_real = importlib.util.find_spec
def find_spec(name, package=None):
    return None if name == {tracker!r} else _real(name, package)
importlib.util.find_spec = find_spec
""")
    result = _run(project, f"--rc-{tracker}")
    assert result.ret == 4  # pytest's usage error
    result.stderr.fnmatch_lines(
        [
            f"*--rc-{tracker} (ini rc_{tracker}): the package '{tracker}' is not installed; "
            "install the trackers extra: pip install 'retrieval-checks[[]trackers[]]'*"
        ]
    )


def test_the_ini_setting_turns_a_tracker_on_and_a_bad_value_is_refused(
    project, monkeypatch, tmp_path
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    project.makeini("[pytest]\nrc_mlflow = true\n")
    _run(project).stdout.fnmatch_lines(["*2 gates logged to MLflow run *"])
    project.makeini("[pytest]\nrc_mlflow = maybe\n")
    result = _run(project)
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*ini rc_mlflow: *maybe*write true or false*"])


def test_a_session_without_gates_says_nothing_was_logged(project, monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    result = _run(project, "--rc-wandb", "-k", "no_such_test")
    text = " ".join(result.stdout.str().split())  # the notes are wrapped to the terminal's width
    assert "warning: no gate ran in this session: nothing was logged to wandb" in text
    assert not (tmp_path / "wandb").exists()


def test_wandb_logs_to_the_run_a_conftest_started(project, monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    project.makeconftest("""
import wandb

def pytest_configure(config):
    config._training_run = wandb.init(project="train", name="training-42")

def pytest_unconfigure(config):
    config._training_run.summary["finished_by"] = "conftest"
    config._training_run.finish()
""")
    _run(project, "--rc-wandb", subprocess=True).assert_outcomes(passed=1, failed=1)
    (run_dir,) = (tmp_path / "wandb").glob(
        "offline-run-*"
    )  # one run: the conftest's, not a second one
    keys = {
        item.key
        for record in _wandb_records(next(run_dir.glob("run-*.wandb")))
        if record.WhichOneof("record_type") == "summary"
        for item in record.summary.update
    }
    assert {"rc/n_gates", "finished_by"} <= keys


def _closed_port() -> int:
    import socket

    with socket.socket() as s:  # bound, never listening: a connection to it is refused at once
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_mlflow_server_fails_fast_and_says_what_was_not_logged(monkeypatch):
    """MLflow's own retries (7, with exponential backoff) stalled every --rc-mlflow session
    about 4 minutes on a server that does not answer; the plugin bounds them."""
    import time

    from pytest_retrieval_checks import _trackers

    for name in (
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
        "MLFLOW_HTTP_REQUEST_TIMEOUT",
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
        "MLFLOW_EXPERIMENT_NAME",
        "MLFLOW_RUN_ID",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{_closed_port()}")
    gates = [
        {"test": "t.py::test_a", "metric": "map", "value": 0.5, "threshold": 0.4, "passed": True},
        {"test": "t.py::test_b", "metric": "hit_rate@1", "value": 0.7, "passed": False},
    ]
    notes: list[str] = []
    start = time.monotonic()
    assert (
        _trackers.publish(["mlflow"], gates, {}, notes) is False
    )  # not logged: the session must not look green
    assert time.monotonic() - start < 20
    errors = [n for n in notes if n.startswith("error:")]
    assert (
        len(errors) == 1
        and "mlflow" in errors[0]
        and "2 gates" in errors[0]
        and "not logged" in errors[0]
    )
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" in errors[0]  # how to allow more
    import os

    assert (
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ
    )  # the bound is the plugin's, not left behind


def test_a_tracker_that_hangs_is_abandoned_at_the_deadline(monkeypatch):
    """Any other stall (a W&B service that never answers, an upload) ends at the
    deadline: the session goes on and says what was not logged."""
    import threading
    import time

    from pytest_retrieval_checks import _trackers

    release = threading.Event()
    monkeypatch.setattr(
        _trackers, "log_wandb", lambda rows, metrics, run: release.wait(30) and "never"
    )
    notes: list[str] = []
    start = time.monotonic()
    try:
        assert (
            _trackers.publish(
                ["wandb"],
                [{"test": "t", "metric": "map", "value": 0.5, "passed": True}],
                {},
                notes,
                deadline=0.5,
            )
            is False
        )
    finally:
        release.set()
    assert time.monotonic() - start < 5
    assert any(
        "wandb" in n and "no answer within 0.5 s" in n and "not logged" in n for n in notes
    ), notes
