"""Start-up cost: the time of ``import retrieval_checks`` in a fresh interpreter, as a
ratio to ``import numpy`` measured the same way in the same run, and the heavy
dependencies the import pulls in (none of torch, numba, scipy.stats should be: they are
imported on first use).

    python benchmarks/bench_import.py            # 7 fresh interpreters each, minimum
    python benchmarks/bench_import.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

_HEAVY = ("torch", "numba", "scipy", "scipy.stats", "sklearn", "matplotlib", "pyarrow", "safetensors", "pytest")

_PROBE = """
import json, sys, time
t = time.perf_counter()
import {module}
dt = time.perf_counter() - t
print(json.dumps({{"seconds": dt, "loaded": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def _time(module: str, runs: int) -> tuple[float, list[str]]:
    best, loaded = float("inf"), []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _PROBE.format(module=module, heavy=_HEAVY)],
                             capture_output=True, text=True, check=True)
        rec = json.loads(out.stdout.strip().splitlines()[-1])
        best, loaded = min(best, rec["seconds"]), rec["loaded"]
    return best, loaded


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="fresh interpreters per module (the minimum is used)")
    args = ap.parse_args(argv)
    base, _ = _time("numpy", args.runs)
    ours, loaded = _time("retrieval_checks", args.runs)
    print(f"import numpy              {base:7.3f} s")
    print(f"import retrieval_checks   {ours:7.3f} s   ({ours / base:.1f}x numpy's import)")
    print(f"heavy modules loaded by the import: {', '.join(loaded) if loaded else 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
