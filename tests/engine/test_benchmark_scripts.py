"""The benchmark scripts keep running (smoke runs at tiny sizes; timings are not checked)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_gpu_benchmark_runs_on_the_cpu_and_prints_its_table():
    out = subprocess.run(
        [
            sys.executable,
            str(BENCH / "bench_gpu.py"),
            "--device",
            "cpu",
            "--sizes",
            "1000x8",
            "--block-bytes",
            "4000000",
            "--image-text",
            "100",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert (
        "| 1000, 8 |" in out.stdout
        and "ours-rank / GEMM" in out.stdout
        and "image_text:" in out.stdout
    )


@pytest.mark.slow  # starts early (tests/conftest.py: slow modules first)
def test_hamming_benchmark_runs_and_hamming_equals_dot():
    out = subprocess.run(
        [
            sys.executable,
            str(BENCH / "bench_hamming.py"),
            "--n",
            "20000",
            "--queries",
            "100",
            "--repeat",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "kernel-numba" in out.stdout and "(identical)" in out.stdout


def test_import_benchmark_runs_and_the_import_stays_light():
    """Start-up: importing the package pulls in none of the heavy dependencies (they are
    imported on first use); the time itself is printed by the script, not asserted."""
    out = subprocess.run(
        [sys.executable, str(BENCH / "bench_import.py"), "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "heavy modules loaded by the import: none" in out.stdout
