"""Start-up: collecting the example suites loads no model, no torch and no other heavy
dependency (they are imported when a test runs). The times themselves are printed by
benchmarks/bench_collect.py, not asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_collecting_the_examples_imports_no_heavy_module():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_collect.py"), "--modules-only"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "heavy modules loaded by collection: none" in out.stdout, out.stdout
    # every example was collected (a collection error would also leave torch unloaded)
    items = [
        int(line.split()[1]) for line in out.stdout.splitlines() if line.startswith("collected ")
    ]
    assert items and items[0] >= 30, out.stdout


def test_the_benchmark_sees_a_heavy_import_when_one_happens(tmp_path):
    """The probe is not blind: a test module that imports torch at collection is reported."""
    (tmp_path / "test_heavy.py").write_text("import torch\n\ndef test_x():\n    pass\n")
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_collect.py"),
            "--modules-only",
            "--path",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "heavy modules loaded by collection: torch" in out.stdout, out.stdout
