#!/usr/bin/env python
"""Benchmark the exact engine (``rc.evaluate``) against faiss and pytorch-metric-learning.

Every method runs on the SAME synthetic data (regenerated from the seed inside each
worker) in its OWN subprocess, one after the other, so that each method's peak RSS is
its own. The report gives ratios against the faiss k-NN baseline measured in the same
run; absolute times depend on the machine and are never asserted.

Data: leave-one-out retrieval over N items in d dims, 10 items per class,
C = N / 10 class centres ~ N(0, I_d), item = centre + spread * N(0, I_d), float32.

Methods (``--methods``):

  ours      rc.evaluate(X, query_labels=y, metrics=FULL, similarity="cosine",
            max_memory=--max-memory): exact ranks of every relevant item, all 11 metrics.
  ours-rank the same without the pair metric recall_at_precision@0.9 (opt-in).
  ours-fused / ours-scored  ``ours`` with the CPU counter forced (RC_CPU_COUNTER=fused:
            the fused tile pass; scored: whole-block products, then the compiled scan).
  gemm      the fp32 GEMM floor: torch.mm of the same products (L2-normalised rows, every
            query against every gallery item) into one reused block of 1024 rows.
  faiss     faiss.IndexFlatIP on L2-normalised X, all N queries searched with k=11,
            the self match dropped -> top-10 neighbours (normalise + add + search +
            drop-self are timed). Only gives the top 10, not exact full-ranking metrics.
  pml       pytorch-metric-learning AccuracyCalculator, k="max_bin_count" (9 neighbours),
            leave-one-out (reference=None): mean_average_precision_at_r, r_precision,
            precision_at_1. knn_func = FaissKNN(IndexFlatIP) on L2-normalised X so that
            its ranking is the cosine ranking we compute.
  pml-full  the same calculator with k=None (full ranking of all N-1 items) and
            mean_average_precision added: full mAP. Memory grows like N^2; it is skipped
            when the estimate exceeds --pml-max-gb.

Worker protocol: ``bench_engine.py --worker METHOD --n N --d D --spread S --seed SEED``
prints one line ``@@RESULT@@ {json}``.

Memory: peak RSS is /proc/self/status VmHWM, reset (``echo 5 > /proc/self/clear_refs``)
right before the timed call, so it is the peak of the timed call itself on top of the
"base" RSS (imports + data + warm-up) measured at the same moment. Where the reset is
not possible the lifetime peak (ru_maxrss) is reported and flagged.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time

FULL = [
    "map",
    "map@R",
    "r_precision",
    "hit_rate@1",
    "hit_rate@5",
    "hit_rate@10",
    "recall@1",
    "recall@5",
    "recall@10",
    "mrr",
    "recall_at_precision@0.9",
]
RANK_ONLY = [m for m in FULL if not m.startswith("recall_at_precision")]
ITEMS_PER_CLASS = 10
ALL_METHODS = ["ours", "ours-rank", "ours-fused", "ours-scored", "gemm", "faiss", "pml", "pml-full"]
OURS = ("ours", "ours-rank", "ours-fused", "ours-scored")
COUNTER = {"ours-fused": "fused", "ours-scored": "scored"}  # RC_CPU_COUNTER in the worker
DEFAULT_METHODS = ["ours", "ours-fused", "gemm", "faiss", "pml", "pml-full"]
MARK = "@@RESULT@@ "

# Which of our canonical metrics each baseline reports, under its own key.
PML_KEYS = {
    "map@R": "mean_average_precision_at_r",
    "r_precision": "r_precision",
    "hit_rate@1": "precision_at_1",  # leave-one-out precision@1 == hit_rate@1
    "map": "mean_average_precision",  # pml-full only
}
FAISS_KEYS = ["hit_rate@1", "hit_rate@5", "hit_rate@10", "recall@1", "recall@5", "recall@10"]


# ----------------------------------------------------------------------------- data
def auto_spread(d: int) -> float:
    """Default noise level for d dims, aimed at mAP ~ 0.4-0.7 for N = 5k..200k.

    Same-class and different-class cosine scores separate by roughly
    z = sqrt(d) / (1 + spread^2) standard deviations, so a fixed spread makes the task
    trivial at d = 512 and hard at d = 64. We hold z = 3.5 (calibrated on N = 5000 and
    20000: z = 3.5 gives mAP ~0.7 and ~0.55; it falls slowly as N grows).
    """
    s2 = math.sqrt(d) / 3.5 - 1.0
    return round(math.sqrt(s2), 3) if s2 > 0.0625 else 0.25


def make_data(n: int, d: int, spread: float, seed: int):
    """X (n x d float32) and labels y (int64), 10 items per class, shuffled order.

    Generated in float32 chunks so that generation never holds more than X plus a
    small chunk (its peak does not leak into the measured peak anyway: the high-water
    mark is reset before the timed call).
    """
    import numpy as np

    if n % ITEMS_PER_CLASS:
        raise SystemExit(f"--n must be a multiple of {ITEMS_PER_CLASS}, got {n}")
    rng = np.random.default_rng(seed)
    n_classes = n // ITEMS_PER_CLASS
    centres = rng.standard_normal((n_classes, d), dtype=np.float32)
    y = rng.permutation(np.repeat(np.arange(n_classes, dtype=np.int64), ITEMS_PER_CLASS))
    return noisy_rows(rng, centres, y, spread), y


def noisy_rows(rng, centres, index, spread):
    """Row i = centres[index[i]] + spread * N(0, I), float32, drawn 16384 rows at a time
    (bounded temporaries; the draw order fixes the data for a seed)."""
    import numpy as np

    out = np.empty((index.size, centres.shape[1]), np.float32)
    step = 16384
    for s in range(0, index.size, step):
        e = min(index.size, s + step)
        out[s:e] = rng.standard_normal((e - s, centres.shape[1]), dtype=np.float32)
        out[s:e] *= np.float32(spread)
        out[s:e] += centres[index[s:e]]
    return out


def split(X, y, n_queries):
    """(queries, query labels, gallery, gallery labels): the first ``n_queries`` items
    query the rest (None: leave-one-out, the gallery is X itself)."""
    if not n_queries:
        return X, y, None, None
    return X[:n_queries], y[:n_queries], X[n_queries:], y[n_queries:]


# ----------------------------------------------------------------------------- memory
def proc_status() -> dict:
    out = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM", "VmSize"):
                    out[key] = int(rest.split()[0]) * 1024  # kB -> bytes
    except OSError:
        pass
    return out


def reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def peak_rss(reset_ok: bool) -> int:
    st = proc_status()
    if reset_ok and "VmHWM" in st:
        return st["VmHWM"]
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kB


def mem_available() -> int:
    from retrieval_checks.engine._backend import _available_ram  # the engine's own reading

    return _available_ram()


def pml_estimate_bytes(method: str, n: int) -> int:
    """Rough peak of the PML paths beyond the data (measured on this code: see README).

    pml-full materialises N x (N-1) neighbour distances, indices, labels, masks,
    cumulative sums and float64 precisions; pml builds a (C x N) label-match matrix
    in get_label_match_counts and sums it in int64.
    """
    if method == "pml-full":
        return int(72 * n * n)  # measured: +276 MB at N=2000, +1.54 GB at N=5000
    # (C x N) bool label comparison summed as int64: ~9 bytes x C x N (+27 MB at N=5000;
    # at N=200000 it asks for one 32 GB block)
    return int(0.95 * n * n) + 2000 * n


# ----------------------------------------------------------------------------- workers
def _set_threads(threads):
    if threads:
        for var in (
            "OMP_NUM_THREADS",
            "MKL_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "NUMBA_NUM_THREADS",
        ):
            os.environ[var] = str(threads)


def _thread_info(only_loaded: bool = False) -> dict:
    """Thread counts of torch, faiss and numba. Workers pass ``only_loaded`` so that
    asking does not import a library the method does not use (it would count in RSS)."""
    info = {}
    probes = (
        ("torch", "torch_threads", "get_num_threads"),
        ("faiss", "faiss_omp_threads", "omp_get_max_threads"),
        ("numba", "numba_threads", "get_num_threads"),
    )
    for mod, key, fn in probes:
        if only_loaded and mod not in sys.modules:
            continue
        try:
            info[key] = getattr(__import__(mod), fn)()
        except ImportError:
            pass
    return info


def _setup_ours(args, X, y):
    if args.worker in COUNTER:
        os.environ["RC_CPU_COUNTER"] = COUNTER[args.worker]
    import retrieval_checks as rc

    metrics = RANK_ONLY if args.worker == "ours-rank" else FULL
    # Warm-up: loads (or compiles) the numba kernels and initialises torch.
    Xw, yw = make_data(200, 8, 0.5, 1)
    rc.evaluate(Xw, query_labels=yw, metrics=metrics, similarity="cosine", progress=False)
    Q, yq, G, yg = split(X, y, args.queries)

    def call():
        return rc.evaluate(
            Q,
            query_labels=yq,
            gallery=G,
            gallery_labels=yg,
            metrics=metrics,
            similarity="cosine",
            max_memory=args.max_memory,
            progress=False,
        )

    def extract(res):
        vals = {k: float(res[k]) for k in metrics}
        return vals, {
            "engine_config": {
                k: res.config[k] for k in ("backend", "block", "chunk", "max_memory")
            },
            "n_skipped": int(res.n_skipped) if hasattr(res, "n_skipped") else None,
        }

    return call, extract


def _faiss_topk(X, k_plus_self):
    import faiss
    import numpy as np

    n, d = X.shape
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    index = faiss.IndexFlatIP(d)
    index.add(Xn)
    _, I = index.search(Xn, k_plus_self)
    is_self = I == np.arange(n)[:, None]
    missing = ~is_self.any(axis=1)  # self not in the top k+1 (exact duplicates): drop the last
    is_self[missing, -1] = True
    return I[~is_self].reshape(n, k_plus_self - 1)


def _faiss_topk_qg(Q, G, k):
    import faiss
    import numpy as np

    index = faiss.IndexFlatIP(G.shape[1])
    index.add(G / np.linalg.norm(G, axis=1, keepdims=True))
    _, I = index.search(Q / np.linalg.norm(Q, axis=1, keepdims=True), k)
    return I


def _setup_faiss(args, X, y):
    Xw, _ = make_data(200, 8, 0.5, 1)
    _faiss_topk(Xw, 11)
    Q, yq, G, yg = split(X, y, args.queries)

    def call():
        return _faiss_topk(X, 11) if G is None else _faiss_topk_qg(Q, G, 10)

    def extract(I):
        import numpy as np

        if G is not None:
            hit = yg[I] == yq[:, None]
            R = np.maximum(np.bincount(yg, minlength=int(y.max()) + 1)[yq], 1)[:, None]
            vals = {}
            for k in (1, 5, 10):
                vals[f"hit_rate@{k}"] = float(hit[:, :k].any(axis=1).mean())
                vals[f"recall@{k}"] = float((hit[:, :k].sum(axis=1, keepdims=True) / R).mean())
            return vals, {"k_searched": 10, "k_kept": int(I.shape[1])}
        hit = y[I] == y[:, None]  # (n, 10)
        R = ITEMS_PER_CLASS - 1
        vals = {}
        for k in (1, 5, 10):
            vals[f"hit_rate@{k}"] = float(hit[:, :k].any(axis=1).mean())
            vals[f"recall@{k}"] = float((hit[:, :k].sum(axis=1) / R).mean())
        return vals, {"k_searched": 11, "k_kept": int(I.shape[1])}

    return call, extract


def _setup_gemm(args, X, y):
    """The fp32 GEMM floor: every product of the pass (L2-normalised rows), 1024 query
    rows at a time, into one reused block; nothing else."""
    import numpy as np
    import torch

    Q, _, G, _ = split(X, y, args.queries)
    G = Q if G is None else G

    def unit(a):
        return torch.from_numpy(a / np.linalg.norm(a, axis=1, keepdims=True))

    def call():
        Qt, Gt = unit(Q), unit(G)
        block = torch.empty((min(1024, Qt.shape[0]), Gt.shape[0]), dtype=torch.float32)
        total = 0.0
        for s in range(0, Qt.shape[0], block.shape[0]):
            part = Qt[s : s + block.shape[0]]
            torch.mm(part, Gt.T, out=block[: part.shape[0]])
            total += float(block[0, 0])
        return total

    Xw, _ = make_data(200, 8, 0.5, 1)
    torch.mm(torch.from_numpy(Xw), torch.from_numpy(Xw).T)

    def extract(_):
        return {}, {"block_rows": 1024}

    return call, extract


def _setup_pml(args, X, y):
    import faiss
    import torch
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    from pytorch_metric_learning.utils.inference import FaissKNN

    full = args.worker == "pml-full"
    include = ["mean_average_precision_at_r", "r_precision", "precision_at_1"]
    if full:
        include.append("mean_average_precision")

    def call_on(Xa, ya):
        calc = AccuracyCalculator(
            include=tuple(include),
            k=None if full else "max_bin_count",
            device=torch.device("cpu"),
            knn_func=FaissKNN(index_init_fn=faiss.IndexFlatIP),
        )
        Xt = torch.nn.functional.normalize(torch.from_numpy(Xa), p=2, dim=1)
        return calc.get_accuracy(Xt, torch.from_numpy(ya))  # reference=None: leave-one-out

    Xw, yw = make_data(200, 8, 0.5, 1)
    call_on(Xw, yw)

    def extract(out):
        vals = {ours: float(out[theirs]) for ours, theirs in PML_KEYS.items() if theirs in out}
        return vals, {"k": None if full else "max_bin_count"}

    return (lambda: call_on(X, y)), extract


def run_worker(args) -> dict:
    rec = {
        "method": args.worker,
        "n": args.n[0],
        "d": args.d[0],
        "spread": args.spread,
        "seed": args.seed,
    }
    t0 = time.perf_counter()
    import numpy as np  # noqa: F401

    X, y = make_data(rec["n"], rec["d"], args.spread, args.seed)
    rec["datagen_s"] = time.perf_counter() - t0
    setup = {
        "ours": _setup_ours,
        "ours-rank": _setup_ours,
        "ours-fused": _setup_ours,
        "ours-scored": _setup_ours,
        "gemm": _setup_gemm,
        "faiss": _setup_faiss,
        "pml": _setup_pml,
        "pml-full": _setup_pml,
    }[args.worker]
    t0 = time.perf_counter()
    call, extract = setup(args, X, y)
    if args.threads and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(args.threads)
    rec["warmup_s"] = time.perf_counter() - t0
    rec.update(_thread_info(only_loaded=True))

    if args.worker.startswith("pml") and args.pml_max_gb:
        # A guard against taking the shared machine down: allocations beyond the budget
        # fail with MemoryError / RuntimeError instead of waking the OOM killer.
        vm = proc_status().get("VmSize", 0)
        limit = vm + int(args.pml_max_gb * 2**30)
        try:
            resource.setrlimit(
                resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1])
            )
        except (ValueError, OSError):
            pass

    import gc

    gc.collect()
    rec["base_rss"] = proc_status().get("VmRSS")
    reset_ok = reset_peak()
    rec["peak_is_reset"] = reset_ok
    times = []
    out = None
    try:
        for _ in range(args.repeat):
            out = None
            t0 = time.perf_counter()
            out = call()
            times.append(time.perf_counter() - t0)
    except (MemoryError, RuntimeError) as exc:
        msg = str(exc)
        oom = isinstance(exc, MemoryError) or any(s in msg.lower() for s in ("memory", "alloc"))
        rec.update(status="oom" if oom else "error", error=f"{type(exc).__name__}: {msg[:300]}")
        out = None
        rec["peak_rss"] = peak_rss(reset_ok)
        return rec
    rec["peak_rss"] = peak_rss(reset_ok)
    rec["times_s"] = times
    rec["wall_s"] = min(times)
    vals, extra = extract(out)
    rec["metrics"] = vals
    rec.update(extra)
    rec["status"] = "ok"
    return rec


# ----------------------------------------------------------------------------- driver
def run_worker_process(cmd: list[str], *, threads=None, timeout=None, identity: dict) -> dict:
    """Run one worker command and return its record: the JSON on the stdout line that
    starts with ``MARK``, plus ``process_s``. A timeout, a crash or an OOM kill comes
    back as a record with ``status`` and ``error`` (and the ``identity`` fields)."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if threads:
        for var in (
            "OMP_NUM_THREADS",
            "MKL_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "NUMBA_NUM_THREADS",
        ):
            env[var] = str(threads)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**identity, "status": "timeout", "error": f"worker ran past --timeout {timeout}s"}
    elapsed = time.perf_counter() - t0
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            rec = json.loads(line[len(MARK) :])
            rec["process_s"] = elapsed
            return rec
    status = "killed" if proc.returncode < 0 else "error"  # -9: most likely the OOM killer
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
    return {
        **identity,
        "status": status,
        "error": f"exit code {proc.returncode}: " + " | ".join(tail),
    }


def launch(method, n, d, spread, args) -> dict:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        method,
        "--n",
        str(n),
        "--d",
        str(d),
        "--spread",
        repr(spread),
        "--seed",
        str(args.seed),
        "--repeat",
        str(args.repeat),
        "--max-memory",
        args.max_memory,
        "--queries",
        str(args.queries or 0),
    ]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.pml_max_gb:
        cmd += ["--pml-max-gb", repr(args.pml_max_gb)]
    return run_worker_process(
        cmd,
        threads=args.threads,
        timeout=args.timeout,
        identity={"method": method, "n": n, "d": d, "spread": spread},
    )


def _loadavg():
    try:
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


def merge_rounds(recs: list[dict]) -> dict:
    """One record per method: the fastest successful round, with every time kept and
    the largest peak over rounds (peaks should agree; the maximum is the safe figure)."""
    ok = [r for r in recs if r.get("status") == "ok"]
    if not ok:
        return recs[0]
    best = dict(min(ok, key=lambda r: r["wall_s"]))
    best["times_s"] = [t for r in ok for t in r["times_s"]]
    best["peak_rss"] = max(r["peak_rss"] for r in ok)
    best["rounds_ok"] = len(ok)
    best["rounds_failed"] = [r.get("status") for r in recs if r.get("status") != "ok"]
    return best


def env_info() -> dict:
    info = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        info["cpu_model"] = platform.processor() or "?"
    try:
        info["affinity"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    info["mem_available_gb"] = round(mem_available() / 2**30, 1)
    info["loadavg_start"] = _loadavg()
    for mod in ("numpy", "torch", "faiss", "numba", "pytorch_metric_learning", "retrieval_checks"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - an absent baseline is reported, not fatal
            info[mod] = "not installed"
    info.update(_thread_info())
    return info


def _mb(x):
    return "-" if x is None else f"{x / 2**20:.0f}"


def _ratio(a, b, digits=2):
    if a is None or b is None or b <= 0:
        return "-"
    return f"{a / b:.{digits}f}"


def _table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    lines = [
        "  ".join(
            str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))
        )
        for r in [header] + rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def report(n, d, spread, recs) -> str:
    by = {r["method"]: r for r in recs}
    fa = by.get("faiss") if by.get("faiss", {}).get("status") == "ok" else None
    out = [
        f"\n=== N={n}  d={d}  classes={n // ITEMS_PER_CLASS} (10 items each, leave-one-out)  spread={spread} ==="
    ]
    rows = []
    for r in recs:
        if r["status"] != "ok":
            rows.append([r["method"], r["status"]] + ["-"] * 7)
            continue
        extra = r["peak_rss"] - r["base_rss"]
        fa_extra = fa["peak_rss"] - fa["base_rss"] if fa else None
        rows.append(
            [
                r["method"],
                "ok",
                f"{r['wall_s']:.3f}",
                _ratio(r["wall_s"], fa and fa["wall_s"]),
                _mb(r["base_rss"]),
                _mb(r["peak_rss"]),
                _mb(extra),
                _ratio(r["peak_rss"], fa and fa["peak_rss"]),
                _ratio(extra, fa_extra),
            ]
        )
    out.append(
        _table(
            [
                "method",
                "status",
                "wall_s",
                "time/faiss",
                "base_MB",
                "peak_MB",
                "+MB",
                "peak/faiss",
                "+MB/faiss",
            ],
            rows,
        )
    )
    for r in recs:
        if r["status"] != "ok":
            out.append(f"  {r['method']}: {r['status']}: {r.get('error', '')}")
        elif r.get("engine_config"):
            c = r["engine_config"]
            out.append(
                f"  {r['method']}: backend={c['backend']} block={c['block']} chunk={c['chunk']} "
                f"max_memory={c['max_memory'] / 2**20:.0f}MiB; warm-up {r['warmup_s']:.2f}s"
            )
        if r["status"] == "ok" and len(r.get("times_s", [])) > 1:
            out.append(
                f"  {r['method']}: times "
                + " ".join(f"{t:.3f}" for t in r["times_s"])
                + " (min used)"
            )

    thr = []
    for r in recs:
        if r["status"] == "ok":
            t = [
                f"{k.split('_')[0]}={r[k]}"
                for k in ("torch_threads", "faiss_omp_threads", "numba_threads")
                if k in r
            ]
            thr.append(f"{r['method']}: {' '.join(t)}")
    if thr:
        out.append("  threads in workers: " + "; ".join(thr))

    ours = next((by[m] for m in OURS if by.get(m, {}).get("status") == "ok"), None)
    shown = ["map", "map@R", "r_precision", "hit_rate@1", "hit_rate@10", "recall@10"]
    mrows = []
    for r in recs:
        if r["status"] != "ok":
            continue
        mrows.append(
            [r["method"]] + [f"{r['metrics'][k]:.6f}" if k in r["metrics"] else "-" for k in shown]
        )
    if mrows:
        out.append("")
        out.append(_table(["metrics"] + shown, mrows))
    if ours is not None:
        om = ours["metrics"]
        out.append("  ours, all: " + "  ".join(f"{k}={v:.6f}" for k, v in om.items()))
        for r in recs:
            if r is ours or r["status"] != "ok" or r["method"].startswith("ours"):
                continue
            common = [k for k in r["metrics"] if k in om]
            if not common:
                continue
            diffs = {k: abs(r["metrics"][k] - om[k]) for k in common}
            worst = max(diffs, key=diffs.get)
            out.append(
                f"  cross-check ours vs {r['method']}: max |diff| = {diffs[worst]:.2e} "
                f"(at {worst}; over {', '.join(common)})"
            )
    return "\n".join(out)


def spread_report(per_method: dict, loads: list) -> str:
    """Medians and spreads over the interleaved rounds: each method's wall time, and its
    ratio to faiss and to the GEMM floor taken round by round (the same load)."""
    import statistics

    def walls(m):
        return [r.get("wall_s") if r.get("status") == "ok" else None for r in per_method.get(m, [])]

    base = {b: walls(b) for b in ("faiss", "gemm")}
    rows = []
    for m, recs in per_method.items():
        w = [x for x in walls(m) if x is not None]
        if not w:
            continue
        row = [m, f"{statistics.median(w):.3f}", f"{min(w):.3f}-{max(w):.3f}", str(len(w))]
        for b in ("faiss", "gemm"):
            pairs = [
                a / c
                for a, c in zip(walls(m), base[b])
                if a is not None and c is not None and c > 0
            ]
            row.append(
                f"{statistics.median(pairs):.2f}x ({min(pairs):.2f}-{max(pairs):.2f})"
                if pairs and m != b
                else "-"
            )
        rows.append(row)
    out = [
        "",
        "medians over interleaved rounds (ratios taken within each round):",
        _table(["method", "median_s", "range_s", "rounds", "vs faiss", "vs gemm"], rows),
        "  load average (1 min) before each round: " + " ".join(f"{x:.2f}" for x in loads),
    ]
    fused, scored = per_method.get("ours-fused"), per_method.get("ours-scored")
    if fused and scored:
        same = [
            a["metrics"] == b["metrics"]
            for a in fused
            for b in scored
            if a.get("status") == "ok" and b.get("status") == "ok"
        ]
        out.append(f"  ours-fused metrics == ours-scored metrics, bit for bit: {all(same)}")
    return "\n".join(out)


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--n", type=int, nargs="+", default=[50000], help="number of items (default 50000)"
    )
    p.add_argument(
        "--d", type=int, nargs="+", default=[128, 512], help="dimensions (default 128 512)"
    )
    p.add_argument(
        "--methods",
        nargs="+",
        default=DEFAULT_METHODS,
        choices=ALL_METHODS,
        help=f"default: {' '.join(DEFAULT_METHODS)}",
    )
    p.add_argument("--max-memory", default="1GiB", help="max_memory for rc.evaluate (default 1GiB)")
    p.add_argument(
        "--repeat", type=int, default=1, help="timed calls per worker; the minimum is used"
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every method's worker this many times, interleaved (ours, faiss, pml, ours, ...); "
        "the fastest round counts. Use 3+ on a busy machine",
    )
    p.add_argument("--quick", action="store_true", help="smoke run: N=5000")
    p.add_argument(
        "--queries",
        type=int,
        default=0,
        help="query/gallery instead of leave-one-out: the first QUERIES items query the rest "
        "(ours, gemm and faiss; PML runs leave-one-out only and is skipped)",
    )
    p.add_argument(
        "--spread",
        type=float,
        default=None,
        help="noise level; default: sqrt(sqrt(d)/3.5 - 1) per d (mAP ~0.4-0.7)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="also write all records as JSON")
    p.add_argument("--no-pml", action="store_true", help="skip both PML methods")
    p.add_argument(
        "--pml-max-gb",
        type=float,
        default=None,
        help="skip a PML method whose estimated extra memory exceeds this, and cap its address "
        "space (default: 60%% of MemAvailable)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="set OMP/MKL/OpenBLAS/numba/torch threads in every worker (default: libraries' own)",
    )
    p.add_argument("--timeout", type=float, default=3600, help="seconds per worker")
    p.add_argument("--worker", choices=ALL_METHODS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.repeat < 1 or args.rounds < 1:
        p.error("--repeat and --rounds must be >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        _set_threads(args.threads)
        rec = run_worker(args)
        print(MARK + json.dumps(rec), flush=True)
        return 0

    _set_threads(args.threads)  # so that the header reports what the workers get
    sizes = [5000] if args.quick else args.n
    methods = [
        m
        for m in dict.fromkeys(args.methods)
        if not ((args.no_pml or args.queries) and m.startswith("pml"))
    ]
    if args.pml_max_gb is None:
        args.pml_max_gb = round(0.6 * mem_available() / 2**30, 1)
    info = env_info()
    print(
        "retrieval-checks engine benchmark (ratios are what to read; absolute times are this machine's)"
    )
    print(
        f"CPU: {info.get('cpu_model')}  cores visible: {info.get('affinity', info['cpu_count'])}  "
        f"MemAvailable: {info['mem_available_gb']} GiB"
    )
    print(
        f"threads: torch.get_num_threads()={info.get('torch_threads')}  "
        f"faiss.omp_get_max_threads()={info.get('faiss_omp_threads')}  numba={info.get('numba_threads')}"
        + (f"  (forced --threads {args.threads})" if args.threads else "")
    )
    print(
        "versions: "
        + "  ".join(
            f"{k}={info[k]}"
            for k in (
                "python",
                "numpy",
                "torch",
                "faiss",
                "numba",
                "pytorch_metric_learning",
                "retrieval_checks",
            )
        )
    )
    print(
        f"ours: rc.evaluate(similarity='cosine', max_memory={args.max_memory}) with {len(FULL)} metrics: "
        f"{', '.join(FULL)}"
    )
    print(
        "faiss: IndexFlatIP on L2-normalised X, k=11 searched, self dropped -> top 10 "
        "(normalise+add+search timed)"
    )
    print(
        "pml: AccuracyCalculator leave-one-out, FaissKNN(IndexFlatIP) on L2-normalised X; "
        "pml = k='max_bin_count' (MAP@R path), pml-full = k=None (+ full mAP)"
    )
    print(
        f"each method: own subprocess, data regenerated from seed {args.seed}; peak RSS = VmHWM reset "
        f"before the timed call; base = RSS of imports+data+warm-up; repeat={args.repeat} x rounds={args.rounds} "
        f"(fastest counts)"
    )

    load0 = _loadavg()
    busy = load0[0] > 0.5
    print(
        f"load average at start (1/5/15 min): {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} on "
        f"{os.cpu_count()} CPUs"
        + ("  <- other work is running: timings will be noisy, use --rounds 3" if busy else "")
    )
    records = []
    for n in sizes:
        for d in args.d:
            spread = args.spread if args.spread is not None else auto_spread(d)
            load_before = _loadavg()
            per_method: dict[str, list[dict]] = {m: [] for m in methods}
            round_loads = []
            for rnd in range(args.rounds):  # rounds interleave the methods against drifting load
                round_loads.append(_loadavg()[0])
                for m in methods:
                    if m.startswith("pml"):
                        est = pml_estimate_bytes(m, n)
                        if est > args.pml_max_gb * 2**30:
                            if rnd == 0:
                                per_method[m].append(
                                    {
                                        "method": m,
                                        "n": n,
                                        "d": d,
                                        "spread": spread,
                                        "status": "skipped",
                                        "error": f"estimated ~{est / 2**30:.1f} GiB > --pml-max-gb "
                                        f"{args.pml_max_gb} GiB",
                                    }
                                )
                            continue
                    print(
                        f"  [round {rnd + 1}/{args.rounds}] {m:9s} N={n} d={d} ...",
                        end="",
                        flush=True,
                        file=sys.stderr,
                    )
                    rec = launch(m, n, d, spread, args)
                    print(
                        f" {rec['status']} {rec.get('wall_s', float('nan')):.3f}s",
                        file=sys.stderr,
                        flush=True,
                    )
                    per_method[m].append(rec)
            recs = [merge_rounds(v) for v in per_method.values() if v]
            for r in recs:
                r["loadavg_before"], r["loadavg_after"] = load_before, _loadavg()
            print(report(n, d, spread, recs), flush=True)
            print(spread_report(per_method, round_loads), flush=True)
            records.extend(recs)

    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "env": info,
                    "args": {k: v for k, v in vars(args).items() if k != "worker"},
                    "metrics": FULL,
                    "records": records,
                },
                fh,
                indent=2,
            )
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
