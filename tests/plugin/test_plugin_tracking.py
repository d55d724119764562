"""Regression tracking through the pytest plugin (pytester, in-process): baselines
with pytest-regressions' regeneration semantics, drop tolerances and significance, the
run history under concurrent writers, and the HTML report rendered in headless
Chromium."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest_plugins = ["pytester"]

SUITE = """
datasets:
  set: {queries: set.npz}
checks:
  - metric: map
    baseline: BASELINE
"""


def _write_data(path: Path, noise: float, seed: int = 0) -> None:
    """150 items of 30 classes; another seed at the same noise is like a retrained model of equal quality."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(30), 5)
    centers = np.random.default_rng(42).normal(size=(30, 16))
    x = centers[y] + noise * rng.normal(size=(150, 16))
    np.savez(path / "set.npz", embeddings=x.astype(np.float32), labels=y)


@pytest.fixture
def tracked(pytester):
    def setup(baseline="{max_drop: 0.01}", noise=0.7, seed=0):
        _write_data(pytester.path, noise, seed)
        pytester.path.joinpath("rc_track.yaml").write_text(
            SUITE.replace("BASELINE", baseline).lstrip()
        )

    return setup


def _run(pytester, *args):
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--rc-history=none", *args)


def test_regenerate_compare_and_fail_on_drop(pytester, tracked):
    tracked()
    baseline_file = pytester.path / "rc_track.baselines.yaml"
    first = _run(pytester)
    first.assert_outcomes(failed=1)  # a missing baseline never passes silently
    first.stdout.fnmatch_lines(
        [
            "*no baseline 'map_vs_baseline[[]precomputed-set[]]' in rc_track.baselines.yaml.*",
            "*Create it: run pytest with --rc-regen-all*",
        ]
    )
    assert not baseline_file.exists()

    _run(pytester, "--rc-regen-all").assert_outcomes(passed=1)  # writes every baseline and passes
    stored = baseline_file.read_text()
    assert "map_vs_baseline[precomputed-set]:" in stored and "units_are: classes" in stored
    _run(pytester).assert_outcomes(passed=1)
    _run(pytester, "--rc-force-regen").assert_outcomes(
        passed=1
    )  # nothing changed: nothing rewritten
    assert baseline_file.read_text() == stored

    _write_data(pytester.path, 1.1)  # a worse model
    drop = _run(pytester)
    drop.assert_outcomes(failed=1)
    drop.stdout.fnmatch_lines(
        [
            "model 'precomputed' on dataset 'set'*",
            "map regressed: 0.* -> 0.* (dropped by *> max_drop 0.01)",
            "*rule: max drop 0.01",
        ]
    )
    assert baseline_file.read_text() == stored  # a failing comparison does not touch the file

    forced = _run(pytester, "--rc-force-regen")
    forced.assert_outcomes(failed=1)  # rewritten, and failed so that someone reviews it
    forced.stdout.fnmatch_lines(
        ["*baseline 'map_vs_baseline[[]precomputed-set[]]' updated (0.* -> 0.*)*"]
    )
    assert baseline_file.read_text() != stored
    _run(pytester).assert_outcomes(passed=1)


def test_within_tolerance_and_significance(pytester, tracked):
    tracked("{max_drop: 0.05}")
    _run(pytester, "--rc-regen-all").assert_outcomes(passed=1)
    _write_data(pytester.path, 0.7, seed=2)  # retrained, same noise: mAP 0.027 lower by chance
    _run(pytester).assert_outcomes(passed=1)  # within max_drop 0.05
    tracked("{max_drop: 0.01}", seed=2)
    result = _run(pytester)
    result.assert_outcomes(failed=1)  # beyond a tighter tolerance
    result.stdout.fnmatch_lines(["*dropped by 0.02* > max_drop 0.01*"])
    tracked("{max_drop: 0.01, significant: true}", seed=2)
    _run(pytester).assert_outcomes(
        passed=1
    )  # beyond the tolerance, but not significant over 30 classes (p=0.21)
    tracked("{max_drop: 0.01, significant: true}", noise=0.9)
    result = _run(pytester)
    result.assert_outcomes(failed=1)  # a real drop (0.18) is significant
    result.stdout.fnmatch_lines(
        ["*significant (p(worse)=*", "*paired t over 30 units (cluster-robust)*"]
    )


def test_python_tests_use_the_rc_baseline_fixture(pytester):
    _write_data(pytester.path, 0.7)
    pytester.makepyfile(
        test_model="""
import numpy as np
import retrieval_checks as rc

def test_map(rc_baseline):
    with np.load("set.npz") as f:
        res = rc.evaluate(f["embeddings"], query_labels=f["labels"], metrics=["map", "grouped_recall@1"], group_size=3)
    rc_baseline(res, "map", max_drop=0.01)
    rc_baseline(res, "grouped_recall@1", max_drop=0.05, significant=True)
"""
    )
    _run(pytester).assert_outcomes(failed=1)
    _run(pytester, "--rc-regen-all", "--junitxml=j.xml").assert_outcomes(passed=1)
    text = (pytester.path / "test_model.baselines.yaml").read_text()
    assert (
        "test_map::map:" in text
        and "test_map::grouped_recall@1:" in text
        and "unit: groups" in text
    )
    assert (
        "retrieval_checks_baseline" not in (pytester.path / "j.xml").read_text()
    )  # not a JUnit property
    _run(pytester).assert_outcomes(passed=1)


@pytest.mark.slow  # starts early (tests/conftest.py: slow modules first)
def test_history_with_xdist_and_a_second_session_at_once(pytester, tracked):
    pytest.importorskip("xdist")
    tracked()
    pytester.makepyfile(
        test_more="""
import numpy as np, pytest, retrieval_checks as rc

@pytest.mark.parametrize("i", range(12))
def test_gate(i):
    rng = np.random.default_rng(i)
    y = np.repeat(np.arange(10), 4)
    x = (rng.normal(size=(10, 8))[y] + rng.normal(size=(40, 8))).astype(np.float32)
    rc.assert_map_at_least(rc.evaluate(x, query_labels=y, metrics=["map"], device="numpy"), 0.01)
"""
    )
    # on numpy (the same numbers on every backend), so the sessions below (four interpreters) never
    # import torch (~2 CPU-s each), and without pytest's five closing garbage collections
    # (unraisable exceptions: none is checked here; ~0.7 CPU-s each)
    light = ["--rc-device=numpy", "-p", "no:unraisableexception"]
    _run(pytester, "--rc-regen-all", *light)
    db = pytester.path / "hist.sqlite"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--rc-history={db}"]
    cmd += light
    procs = [
        subprocess.Popen(
            [*cmd, "-n", "2"],
            cwd=pytester.path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        ),
        subprocess.Popen(
            cmd, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        ),
    ]
    outs = [p.communicate(timeout=300)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    con = sqlite3.connect(db)
    runs = con.execute("SELECT id, n_gates, n_failed, git_commit FROM runs ORDER BY id").fetchall()
    assert len(runs) == 2 and all(r[1] == 13 and r[2] == 0 for r in runs)
    for run_id, *_ in runs:
        tests = {t for (t,) in con.execute("SELECT test FROM results WHERE run_id=?", (run_id,))}
        assert len(tests) == 13 and "rc_track.yaml::map_vs_baseline[precomputed-set]" in tests
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_html_report_renders_in_headless_chromium(pytester, tracked):
    browser = _chromium()
    if browser is None:
        pytest.skip(
            "headless Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)"
        )
    tracked()
    _run(pytester, "--rc-regen-all")
    _write_data(pytester.path, 1.1)  # one failing gate, so the page shows both outcomes
    pytester.makepyfile(
        test_pr="""
import numpy as np, retrieval_checks as rc
def test_pairs(rc_report):
    with np.load("set.npz") as f:
        x, y = f["embeddings"], f["labels"]
    res = rc.evaluate(x, query_labels=y, metrics=["recall_at_precision@0.8"])
    rc.assert_recall_at_precision(res, 0.001, precision=0.8)
    rc_report.add_sweep(rc.class_count_sweep(x, y, metrics=["hit_rate@1"], class_counts=[5, 10, 20], trials=2),
                        title="Recall@1 vs. classes")
"""
    )
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--rc-history=h.sqlite", "--rc-html=report.html"
    )
    result.assert_outcomes(passed=1, failed=1)
    report = pytester.path / "report.html"
    assert report.exists()
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={pytester.path / 'chrome-profile'}",
        "--enable-logging=stderr",
        "--v=0",
    ]
    artifacts = Path(
        os.environ.get("RC_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts")
    )
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "report.png"
    # one launch: the rendered DOM (--dump-dom) and the screenshot together (two cost ~3 s more)
    dom = subprocess.run(
        [
            browser,
            *flags,
            "--window-size=1400,1000",
            f"--screenshot={shot}",
            "--dump-dom",
            report.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-ready="1"' in dom.stdout  # the page's script ran to its end: no JavaScript error
    assert "Uncaught" not in dom.stderr and "CONSOLE" not in dom.stderr, dom.stderr[-2000:]
    assert dom.stdout.count("<tr class=") == 2 and ">FAIL<" in dom.stdout and ">PASS<" in dom.stdout
    assert "precision-recall over pairs" in dom.stdout and "Recall@1 vs. classes" in dom.stdout
    assert shot.stat().st_size > 10_000, dom.stderr[-2000:]
    shutil.copy(report, artifacts / "report.html")
