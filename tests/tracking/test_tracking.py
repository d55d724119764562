"""Run history (SQLite, concurrent writers), the command line and the HTML report."""

from __future__ import annotations

import csv
import io
import json
import multiprocessing as mp
import threading

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.tracking import History, render_report
from retrieval_checks.tracking import main as cli


def _pair(seed=0, noise=1.0, n_classes=15, per_class=6):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), per_class)
    centers = rng.normal(size=(n_classes, 8))
    x = centers[y] + noise * rng.normal(size=(y.size, 8))
    worse = x + 0.6 * rng.normal(size=x.shape)
    metrics = ["map", "hit_rate@1", "grouped_recall@1", "recall_at_precision@0.5"]
    a = rc.evaluate(x.astype(np.float32), query_labels=y, metrics=metrics, group_size=3)
    b = rc.evaluate(worse.astype(np.float32), query_labels=y, metrics=metrics, group_size=3)
    return a, b


def test_history_records_and_reads_back(tmp_path):
    h = History(tmp_path / "h.sqlite")
    meta = {
        "started": "2026-01-01T00:00:00+00:00",
        "git_commit": "abc",
        "git_dirty": 1,
        "machine": "m",
    }
    outcomes = [
        {
            "test": "t::a",
            "metric": "map",
            "value": 0.5,
            "low": 0.4,
            "high": 0.6,
            "threshold": 0.3,
            "comparison": ">=",
            "on": "value",
            "passed": True,
            "n": 10,
            "unit": "queries",
            "gate": "assert_metric",
            "suite": "s",
            "model": "m",
            "dataset": "d",
            "curve": {"recall": [0.1], "precision": [1.0]},
        },
        {"test": "t::b", "metric": "hit_rate@1", "value": 0.2, "passed": False},
    ]
    r1 = h.record(meta, outcomes, exitstatus=1)
    r2 = h.record(meta, outcomes[:1], exitstatus=0)
    runs = h.runs()
    assert (
        [r["id"] for r in runs] == [r2, r1]
        and runs[1]["n_failed"] == 1
        and runs[1]["exitstatus"] == 1
    )
    rows = h.results(r1)
    assert rows[0]["curve"] == {"recall": [0.1], "precision": [1.0]} and rows[0]["on"] == "value"
    assert rows[1]["passed"] is False and rows[1]["low"] is None
    assert [p["run_id"] for p in h.metric_history("map", model="m")] == [r1, r2]
    assert h.resolve("latest") == r2 and h.resolve(-2) == r1
    with pytest.raises(rc.InputError, match="only 2 run"):
        h.resolve(-3)
    with h._connect() as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _writer(path, tag, n_runs):
    h = History(path)
    for i in range(n_runs):
        h.record(
            {"started": "x", "command": f"{tag}-{i}"},
            [
                {"test": f"{tag}::t{j}", "metric": "map", "value": j / 10, "passed": True}
                for j in range(25)
            ],
        )


def test_concurrent_writers_leave_every_row(tmp_path):
    path = tmp_path / "h.sqlite"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, f"p{i}", 8)) for i in range(3)]
    threads = [threading.Thread(target=_writer, args=(path, f"t{i}", 8)) for i in range(2)]
    for w in (*procs, *threads):
        w.start()
    for w in (*procs, *threads):
        w.join(120)
    assert all(p.exitcode == 0 for p in procs)
    h = History(path)
    runs = h.runs()
    assert len(runs) == 5 * 8 and len({r["command"] for r in runs}) == 40
    assert all(len(h.results(r["id"])) == 25 == r["n_gates"] for r in runs)


def _cli(*args):
    out = io.StringIO()
    code = cli(list(args), out=out)
    return code, out.getvalue()


def test_command_line_lists_compares_and_exports(tmp_path, capsys):
    db = str(tmp_path / "h.sqlite")
    h = History(db)
    base = [
        {"test": "t", "metric": "map", "value": 0.80, "low": 0.78, "high": 0.82, "passed": True},
        {"test": "t", "metric": "medr", "value": 3.0, "passed": True},
    ]
    worse = [
        {"test": "t", "metric": "map", "value": 0.70, "low": 0.68, "high": 0.72, "passed": True},
        {"test": "t", "metric": "medr", "value": 3.0, "passed": True},
    ]
    r1 = h.record({"started": "s1", "git_commit": "aaa"}, base)
    h.record({"started": "s2", "git_commit": "bbb"}, worse)
    code, out = _cli("--db", db, "runs")
    assert code == 0 and "aaa" in out and "bbb" in out
    code, out = _cli("--db", db, "compare", str(r1), "latest", "--max-drop", "0.05")
    assert code == 1 and "REGRESSED" in out and "1 regressed" in out
    code, out = _cli("--db", db, "compare", "-2", "-1", "--max-drop", "0.2")
    assert code == 0 and "0 regressed" in out
    code, out = _cli("--db", db, "compare", "-2", "-1", "--max-drop", "0.05", "--significant")
    assert code == 1  # intervals of +-0.02 around 0.80 and 0.70: a significant drop
    code, out = _cli("--db", db, "export", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    # newest run first, as every listing of the command line; a run's gates in the order recorded
    assert (
        code == 0
        and len(rows) == 4
        and rows[0]["git_commit"] == "bbb"
        and rows[2]["git_commit"] == "aaa"
    )
    assert rows[0]["metric"] == "map" and rows[2]["metric"] == "map"
    code, out = _cli("--db", db, "export", "--run", "latest", "--format", "json")
    data = json.loads(out)
    assert [r["value"] for r in data["results"]] == [0.70, 3.0] and data["runs"][0][
        "git_commit"
    ] == "bbb"
    code, out = _cli("--db", db, "show", "-1", "--check")
    assert code == 0 and "map" in out
    assert _cli("--db", db, "compare", "99")[0] == 2
    assert "run 99 is not in" in capsys.readouterr().err
    assert _cli("--db", str(tmp_path / "missing.sqlite"), "runs")[0] == 2
    code, out = _cli("--db", db, "report", "latest", "-o", str(tmp_path / "r.html"))
    assert code == 0 and "<table class='gates'" in (tmp_path / "r.html").read_text()


def test_report_escapes_and_draws(tmp_path):
    good, _ = _pair()
    outcomes = [
        {
            "test": "x.py::<script>alert(1)</script>",
            "metric": "recall_at_precision@0.5",
            "value": 0.5,
            "threshold": 0.4,
            "comparison": ">=",
            "on": "value",
            "passed": False,
            "curve": good.pr_curve,
            "message": "a < b",
        },
        {
            "test": "x.py::t",
            "metric": "map",
            "value": 0.8,
            "low": 0.7,
            "high": 0.9,
            "threshold": 0.75,
            "passed": True,
        },
    ]
    page = render_report(
        outcomes,
        run={"id": 3, "git_commit": "abcdef", "git_dirty": 1},
        figures=[
            {
                "kind": "sweep",
                "rows": [
                    {"n_classes": n, "metric": "hit_rate@1", "value": v}
                    for n, v in ((10, 0.9), (20, 0.8), (40, 0.7))
                ],
            }
        ],
    )
    assert (
        "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    )
    assert (
        page.count("<tr class=") == 2
        and "precision-recall over pairs" in page
        and "a &lt; b" in page
    )
    assert "Recall vs. number of classes" in page and "(uncommitted changes)" in page
    assert page.count("<svg") >= 4  # two interval bars, the PR curve, the sweep


def test_pr_curve_matches_sklearn():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(12), 5)
    x = (rng.normal(size=(12, 6))[y] + rng.normal(size=(60, 6))).astype(np.float32)
    res = rc.evaluate(x, query_labels=y, metrics=["precision_at_recall@1.0"])
    c = res.pr_curve
    assert c["complete"] and len(c["recall"]) <= 100 and c["recall"][-1] == 1.0
    xn = x.astype(np.float64) / np.linalg.norm(x, axis=1, keepdims=True)
    s = xn @ xn.T
    off = ~np.eye(60, dtype=bool)
    P, R, T = sklearn_metrics.precision_recall_curve((y[:, None] == y[None, :])[off], s[off])
    for t, p, r in zip(c["threshold"], c["precision"], c["recall"]):
        i = int(np.argmin(np.abs(T - t)))
        assert (p, r) == pytest.approx((P[i], R[i]), abs=1e-12)
