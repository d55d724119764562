"""Collection cost: the wall time of ``python -m pytest example_suites --collect-only -q``
in a fresh interpreter, next to pytest collecting an empty directory (pytest and its
installed plugins alone), the heavy modules that collecting the examples loads (none:
models, torch and data are loaded when a test runs, not when it is collected), and
where the import time goes, by top-level package (``python -X importtime``).

    python benchmarks/bench_collect.py                 # 5 runs of each, minimum
    python benchmarks/bench_collect.py --runs 3 --path example_suites/digits
    python benchmarks/bench_collect.py --modules-only    # an untimed run: items and heavy modules

Python's bytecode cache matters here: every module of the package and of pytest is
compiled again on each run when no ``.pyc`` can be written (``PYTHONDONTWRITEBYTECODE``,
set in some sandboxes and CI images). Both are measured: "cached" runs with a private
``PYTHONPYCACHEPREFIX`` (filled by one untimed warm-up run; the working tree is not
touched), "uncached" with ``PYTHONDONTWRITEBYTECODE=1``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = (
    "torch",
    "numba",
    "scipy.stats",
    "sklearn",
    "transformers",
    "sentence_transformers",
    "lightning",
    "mlflow",
    "wandb",
    "matplotlib",
    "pyarrow",
    "safetensors",
    "faiss",
)

# pytest in this process, then the heavy modules present once collection is over
_PROBE = """
import json, sys, pytest
class _Probe:
    def pytest_collection_finish(self, session):
        self.n = len(session.items)
probe = _Probe()
code = pytest.main({args!r}, plugins=[probe])
print(json.dumps({{"exit": int(code), "items": getattr(probe, "n", 0),
                  "loaded": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def _env(cached: bool, prefix: str) -> dict[str, str]:
    env = dict(os.environ)
    if cached:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = prefix
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _collect(path: str, env: dict[str, str], importtime: bool = False) -> tuple[float, dict, str]:
    """One fresh interpreter collecting ``path``: (wall seconds, the probe's record, stderr)."""
    args = [path, "--collect-only", "-q", "-p", "no:cacheprovider"]
    cmd = (
        [sys.executable]
        + (["-X", "importtime"] if importtime else [])
        + ["-c", _PROBE.format(args=args, heavy=HEAVY)]
    )
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - t
    lines = out.stdout.strip().splitlines()
    if not lines or not lines[-1].startswith("{"):
        raise SystemExit(
            f"collecting {path} failed (exit {out.returncode}):\n{out.stdout}\n{out.stderr}"
        )
    return wall, json.loads(lines[-1]), out.stderr


def _best(path: str, env: dict[str, str], runs: int) -> tuple[float, dict]:
    best, rec = float("inf"), {}
    for _ in range(runs):
        wall, rec, _ = _collect(path, env)
        best = min(best, wall)
    return best, rec


def import_shares(stderr: str) -> list[tuple[str, float]]:
    """Cumulative import microseconds of each top-level import, summed by root package
    (``-X importtime`` lines at the first nesting level), largest first, in seconds."""
    by_root: dict[str, float] = defaultdict(float)
    for line in stderr.splitlines():
        m = re.match(
            r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", line
        )  # one space: a top-level import
        if m:
            by_root[m.group(2).strip().split(".")[0]] += int(m.group(1)) / 1e6
    return sorted(by_root.items(), key=lambda kv: -kv[1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--runs",
        type=int,
        default=5,
        help="fresh interpreters per measurement (the minimum is used)",
    )
    ap.add_argument(
        "--path", default="example_suites", help="what to collect (default: example_suites)"
    )
    ap.add_argument(
        "--top", type=int, default=8, help="packages listed in the import-time breakdown"
    )
    ap.add_argument(
        "--modules-only",
        action="store_true",
        help="an untimed collection (a second one where the first loaded a heavy module: a fresh "
        "clone's first writes example data): print the items and the heavy modules it loaded (the tests "
        "use it)",
    )
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    if args.modules_only:
        # the first collection of a fresh clone writes example data (canvas_digits' conftest,
        # with scikit-learn): when it loaded a heavy module or failed, a second one, which
        # finds the data, is the one reported; when it loaded none, a second would repeat it
        _, rec, _ = _collect(args.path, dict(os.environ))
        if rec["loaded"] or rec["exit"] != 0:
            _, rec, _ = _collect(args.path, dict(os.environ))
        print(f"collected {rec['items']} items from {args.path}")
        print(
            f"heavy modules loaded by collection: {', '.join(rec['loaded']) if rec['loaded'] else 'none'}"
        )
        return 0
    with tempfile.TemporaryDirectory() as prefix, tempfile.TemporaryDirectory() as empty:
        cached = _env(True, prefix)
        _collect(args.path, cached)  # warm-up: fills the bytecode cache
        _collect(empty, cached)
        rows = []
        for label, env in (("cached", cached), ("uncached", _env(False, prefix))):
            ours, rec = _best(args.path, env, args.runs)
            base, _ = _best(empty, env, args.runs)
            rows.append((label, ours, base, rec))
        _, _, stderr = _collect(args.path, cached, importtime=True)
    print(
        f"python -m pytest {args.path} --collect-only -q   (minimum of {args.runs} fresh interpreters)"
    )
    for label, ours, base, rec in rows:
        print(
            f"  bytecode {label:8s}  {ours:6.2f} s  for {rec['items']} items;  pytest on an empty directory "
            f"{base:5.2f} s;  the examples add {ours - base:5.2f} s"
        )
    loaded = rows[0][3]["loaded"]
    print(f"heavy modules loaded by collection: {', '.join(loaded) if loaded else 'none'}")
    shares = import_shares(stderr)
    total = sum(s for _, s in shares)
    print(
        f"import time by top-level package (-X importtime, cached bytecode; inflated by the "
        f"measurement, read the shares): {total:.2f} s in all"
    )
    for name, sec in shares[: args.top]:
        print(f"  {name:28s} {sec:6.3f} s  {100 * sec / total:5.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
