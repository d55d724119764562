"""The benchmark scripts keep running (smoke runs at tiny sizes; timings are not checked).

A script's ``main`` runs in the test's process where the script itself is not the thing
measured (a subprocess for it cost an interpreter and a torch import, ~5 CPU-s each); the
processes a script starts on purpose (one of bench_hamming's workers, bench_import's
fresh interpreters) still start. About 8 CPU-s in all (measured 8.0 at a load average of
8), most of it bench_gpu's table and bench_import's five interpreters.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

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


def test_hamming_benchmark_runs_and_hamming_equals_dot(monkeypatch, capsys):
    """Every method's worker runs (hamming, dot, faiss, kernel-numba, kernel-numpy) and
    hamming's metrics equal dot's on the same codes. The script starts one process per
    method (its memory figures are the worker's own); here faiss's worker is a real
    process (the driver's command line, the worker's ``--worker`` entry and the record
    it prints are read back; and faiss's OpenMP stays out of this process) and the
    other four run the same worker function, ``run_worker`` on the same command line,
    in this process (an interpreter and a numba start each, ~3 CPU-s). 2,000 codes, 20
    queries: every method's code path, timings not checked."""
    monkeypatch.syspath_prepend(str(BENCH))  # run alone (-k), no earlier test has added it
    import bench_engine

    real, started = bench_engine.run_worker_process, []

    def run_worker_process(cmd, *, threads=None, timeout=None, identity):
        assert cmd[:3] == [sys.executable, str(BENCH / "bench_hamming.py"), "--worker"], cmd
        started.append(cmd[3])
        if cmd[3] == "faiss":
            return real(cmd, threads=threads, timeout=timeout, identity=identity)
        module = sys.modules["bench_hamming"]
        return module.run_worker(module.parse_args(cmd[2:]))

    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(bench_engine, "run_worker_process", run_worker_process)
    code, out, err = _main(
        "bench_hamming",
        ["--n", "2000", "--queries", "20", "--repeat", "1"],
        monkeypatch,
        capsys,
    )
    assert code == 0, out + err
    assert started == ["hamming", "dot", "faiss", "kernel-numba", "kernel-numpy"]
    assert "kernel-numba" in out and "(identical)" in out
    rows = [line.split() for line in out.splitlines()]
    faiss_here = importlib.util.find_spec("faiss") is not None  # a test extra; not on a GPU image
    for method in started:  # every worker's row (the first table's), none failed
        row = next(r for r in rows if r and r[0] == method)
        assert row[1] == ("ok" if faiss_here or method != "faiss" else "error"), (method, row)


def test_import_benchmark_runs_and_the_import_stays_light(monkeypatch, capsys):
    """Start-up: importing the package pulls in none of the heavy dependencies (they are
    imported on first use); the time itself is printed by the script, not asserted. The
    script's main runs here; its probes are the fresh interpreters it starts (five at
    ``--runs 1``: its point, an import in a clean process)."""
    code, out, err = _main("bench_import", ["--runs", "1"], monkeypatch, capsys)
    assert code == 0, err
    assert "heavy modules loaded by the import: none" in out
    assert "bytecode cached" in out and "bytecode uncached" in out


def test_gpu_exactness_compares_what_the_devices_must_agree_on(monkeypatch):
    """benchmarks/gpu_exactness.py's comparison, run here between two CPU backends (it
    exits at once without CUDA): equal results compare equal, a changed per-query value is
    found, and what differs between devices by design (``config``, ``provenance``) is left
    out. Found on an H200: once results carried their provenance, every case of every
    variant read "DIFFERS .provenance..." and the session's exactness run told nothing."""
    monkeypatch.syspath_prepend(str(BENCH))
    import gpu_exactness as gx
    import numpy as np

    import retrieval_checks as rc

    cases = dict(gx._cases(np.random.default_rng(0), quick=True))
    ran = {}
    for name in (
        "random floats, cosine, rank + pair",
        "image-text, tie-heavy integers, protocol 1k",
    ):
        cpu, numpy_ = cases[name](rc, "cpu"), cases[name](rc, "numpy")
        a, b = gx._summary(cpu), gx._summary(numpy_)
        assert gx._first_difference(a, b) == "", name
        ran[name] = gx._counters(cpu), gx._counters(numpy_)
    # the fused CPU pass against numba's scored one: provenances that differ, left out
    assert ran["random floats, cosine, rank + pair"] == ("fused-cpu", "numba")
    grouped = cases["grouped recall, tie-heavy integers, neg_l2"](rc, "cpu")
    assert gx._counters(grouped) == "grouped-numba"  # grouped recall's path is named too
    res = cases["random floats, cosine, rank + pair"](rc, "cpu")
    a, b = gx._summary(res), gx._summary(res)
    b["per_query"]["map"][3] = float(np.nextafter(b["per_query"]["map"][3], 2.0))  # one ulp
    assert gx._first_difference(a, b).startswith(".per_query.map[3]:")
