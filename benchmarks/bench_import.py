"""Start-up cost: the time of ``import retrieval_checks`` in a fresh interpreter, as a
ratio to ``import numpy`` measured the same way in the same run, and the heavy
dependencies the import pulls in (none of torch, numba, scipy.stats should be: they are
imported on first use).

    python benchmarks/bench_import.py            # 7 fresh interpreters each, minimum
    python benchmarks/bench_import.py --runs 3

Both with Python's bytecode cache ("cached": a private ``PYTHONPYCACHEPREFIX`` filled by
one untimed import, what a developer's second run sees) and without it ("uncached":
``PYTHONDONTWRITEBYTECODE=1``, as in sandboxes and CI images that set it, where every
module is compiled again on each start).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

_HEAVY = (
    "torch",
    "numba",
    "scipy",
    "scipy.stats",
    "sklearn",
    "matplotlib",
    "pyarrow",
    "safetensors",
    "pytest",
)

_PROBE = """
import json, sys, time
t = time.perf_counter()
import {module}
dt = time.perf_counter() - t
print(json.dumps({{"seconds": dt, "loaded": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def _time(module: str, runs: int, env: dict) -> tuple[float, list[str]]:
    best, loaded = float("inf"), []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", _PROBE.format(module=module, heavy=_HEAVY)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        rec = json.loads(out.stdout.strip().splitlines()[-1])
        best, loaded = min(best, rec["seconds"]), rec["loaded"]
    return best, loaded


def _env(prefix: str | None) -> dict:
    env = dict(os.environ)
    if prefix is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = prefix
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--runs", type=int, default=7, help="fresh interpreters per module (the minimum is used)"
    )
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as prefix:
        _time("retrieval_checks", 1, _env(prefix))  # warm-up: fills the bytecode cache
        for label, env in (("cached", _env(prefix)), ("uncached", _env(None))):
            base, _ = _time("numpy", args.runs, env)
            ours, loaded = _time("retrieval_checks", args.runs, env)
            print(
                f"bytecode {label:8s}  import numpy {base:6.3f} s   import retrieval_checks {ours:6.3f} s   "
                f"({ours / base:.1f}x numpy's import)"
            )
    print(f"heavy modules loaded by the import: {', '.join(loaded) if loaded else 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
