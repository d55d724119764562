"""Start-up: collecting the example suites loads no model, no torch and no other heavy
dependency (they are imported when a test runs). The times themselves are printed by
benchmarks/bench_collect.py, not asserted.

Cost: about 4 CPU-s: two fresh interpreters that collect (the point: a module loaded by
this process would hide one loaded by collection; the second imports numba, not torch, to
show the probe sees a heavy import; a third where the first collection of a fresh clone
writes the example data and loads scikit-learn for it), the benchmark's own code run here
in-process (loaded from its path) rather than in another interpreter."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_SPEC = importlib.util.spec_from_file_location(
    "bench_collect", ROOT / "benchmarks" / "bench_collect.py"
)
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


def test_collecting_the_examples_imports_no_heavy_module(capsys):
    assert bench.main(["--modules-only"]) == 0  # one fresh collection (two on a fresh clone)
    out = capsys.readouterr().out
    assert "heavy modules loaded by collection: none" in out, out
    # every example was collected (a collection error would also leave torch unloaded)
    items = [int(line.split()[1]) for line in out.splitlines() if line.startswith("collected ")]
    assert items and items[0] >= 30, out


def test_the_benchmark_sees_a_heavy_import_when_one_happens(tmp_path):
    """The probe is not blind: a test module that imports a heavy module at collection is
    reported (one fresh collection: nothing is written by the first one here). The module
    is numba (0.6 CPU-s to import), else scipy.stats (1.3, always installed), the lightest
    of bench_collect.HEAVY: torch, as before, cost 2.3 CPU-s for the same check."""
    heavy = "numba" if importlib.util.find_spec("numba") else "scipy.stats"
    assert heavy in bench.HEAVY
    (tmp_path / "test_heavy.py").write_text(f"import {heavy}\n\ndef test_x():\n    pass\n")
    _, record, stderr = bench._collect(str(tmp_path), dict(os.environ))
    assert record["exit"] == 0 and record["items"] == 1, stderr
    assert record["loaded"] == [heavy], record
