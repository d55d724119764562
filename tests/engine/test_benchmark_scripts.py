"""The benchmark scripts keep running (smoke runs at tiny sizes; timings are not checked).

A script's ``main`` runs in the test's process where the script itself is not the thing
measured (a subprocess for it cost an interpreter and a torch import, ~5 CPU-s each); the
processes a script starts on purpose (bench_hamming's one worker per method,
bench_import's fresh interpreters) still start. About 15 CPU-s in all, most of it
bench_hamming's five workers.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _main(name: str, argv: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    """``benchmarks/<name>.py``'s ``main(argv)`` in this process: (exit code, stdout,
    stderr); the script's sys.path entry and its module are taken back after the test."""
    monkeypatch.syspath_prepend(str(BENCH))  # restores sys.path, the scripts' own insert too
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    code = module.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_gpu_benchmark_runs_on_the_cpu_and_prints_its_table(monkeypatch, capsys):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the script may set it
    code, out, err = _main(
        "bench_gpu",
        [
            "--device",
            "cpu",
            "--sizes",
            "1000x8",
            "--block-bytes",
            "4000000",
            "--image-text",
            "100",
        ],
        monkeypatch,
        capsys,
    )
    assert code == 0, err
    assert "| 1000, 8 |" in out and "ours-rank / GEMM" in out and "image_text:" in out


@pytest.mark.slow  # starts early (tests/conftest.py: slow modules first)
def test_hamming_benchmark_runs_and_hamming_equals_dot(monkeypatch, capsys):
    code, out, err = _main(
        "bench_hamming",
        ["--n", "20000", "--queries", "100", "--repeat", "1"],
        monkeypatch,
        capsys,
    )
    assert code == 0, out + err
    assert "kernel-numba" in out and "(identical)" in out


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
