#!/usr/bin/env python
"""Benchmark exact evaluation of binary codes (similarity="hamming") against faiss.

Data (seeded): a gallery of N binary codes of B bits (default 1,000,000 x 64) and Q
queries (default 1000), packed as ``np.packbits`` uint8 bytes. Each query has a class
centre (random bits); the gallery holds R = 10 planted near-duplicates of it (the
centre with every bit flipped with probability --flip, default 0.1) with the query's
label, and the query is the centre flipped the same way; the other N - Q R gallery
codes are uniform random bits with a label no query has. Hamming distances take only
B + 1 values, so ties are everywhere.

Methods (``--methods``), each in its own subprocess (``--worker METHOD``), data
regenerated from the seed, warmed up on tiny data, then timed (minimum of --repeat):

  hamming       rc.evaluate(Q_u8, G_u8, query_labels=, gallery_labels=, metrics=RANK,
                similarity="hamming", max_memory=--max-memory): exact rank metrics on the
                packed codes. Reported as "not wired" while the engine refuses it.
  dot           the same codes as +-1 float32 with similarity="dot": the float path.
                dot = B - 2 * distance, so the ranking and every metric are identical
                (the script checks them, exact, and exits 1 if they differ).
  faiss         faiss.IndexBinaryFlat(B): add the gallery, search the Q queries, k=10
                (build + add + search timed). The baseline of every ratio; it only gives
                the top 10 (ties broken its own way), not exact full-ranking metrics.
  kernel-numba  the raw tile kernel alone: hamming_tile over the whole gallery in tiles of
                --block query rows x --chunk gallery codes, into one reused float32 tile
                (what the engine computes before it counts ranks; packing not timed).
  kernel-numpy  the same with the numpy fallback (_hamming_tile_numpy).
  kernel-torch  (opt-in) hamming_tile_torch on --torch-device (default cuda if available,
                else cpu, where it is ~100x slower than numba: the CPU engine never runs it).

Memory: base RSS (imports + data + warm-up) and peak RSS of the timed call (VmHWM reset
just before it), as in bench_engine.py; +MB = peak - base. No absolute time is asserted.

    python benchmarks/bench_hamming.py --quick          # N=100,000, 200 queries (~20 s)
    python benchmarks/bench_hamming.py                  # N=1,000,000 x 64 bits, 1000 queries
    python benchmarks/bench_hamming.py --bits 256 --methods kernel-numba faiss --json benchmarks/results/hamming.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_engine import (  # noqa: E402 - the engine benchmark's memory, worker and table helpers
    _loadavg,
    _mb,
    _ratio,
    _table,
    peak_rss,
    proc_status,
    reset_peak,
    run_worker_process,
)

RANK = [
    "map",
    "map@R",
    "r_precision",
    "hit_rate@1",
    "hit_rate@5",
    "hit_rate@10",
    "recall@1",
    "recall@10",
    "mrr",
]
ALL_METHODS = ["hamming", "dot", "faiss", "kernel-numba", "kernel-numpy", "kernel-torch"]
DEFAULT_METHODS = ["hamming", "dot", "faiss", "kernel-numba", "kernel-numpy"]
PER_CLASS = 10
MARK = "@@RESULT@@ "


# ----------------------------------------------------------------------------- data
def make_codes(n_g: int, n_q: int, n_bits: int, flip: float, seed: int):
    """(queries uint8 (Q, B/8), gallery uint8 (N, B/8), query labels, gallery labels)."""
    import numpy as np

    if n_bits % 8 or n_g < PER_CLASS * n_q:
        raise SystemExit(f"--bits must be a multiple of 8 and --n at least {PER_CLASS} x --queries")
    rng = np.random.default_rng(seed)
    n_bytes = n_bits // 8
    centres = rng.integers(0, 256, (n_q, n_bytes), dtype=np.uint8)

    def flipped(rows):
        return centres[rows] ^ np.packbits(rng.random((rows.size, n_bits)) < flip, axis=1)

    planted_of = np.repeat(np.arange(n_q), PER_CLASS)
    G = np.empty((n_g, n_bytes), np.uint8)
    G[: planted_of.size] = flipped(planted_of)
    G[planted_of.size :] = rng.integers(0, 256, (n_g - planted_of.size, n_bytes), dtype=np.uint8)
    yg = np.full(n_g, n_q, np.int64)  # a label no query has
    yg[: planted_of.size] = planted_of
    order = rng.permutation(n_g)
    return flipped(np.arange(n_q)), G[order], np.arange(n_q, dtype=np.int64), yg[order]


def plus_minus_one(codes):
    """uint8 packed codes as +-1 float32 (bit 1 -> +1), 16384 rows at a time."""
    import numpy as np

    out = np.empty((codes.shape[0], 8 * codes.shape[1]), np.float32)
    for s in range(0, codes.shape[0], 16384):
        out[s : s + 16384] = np.unpackbits(codes[s : s + 16384], axis=1)
    out *= 2
    out -= 1
    return out


# ----------------------------------------------------------------------------- workers
def _setup_evaluate(args, Q, G, yq, yg):
    import retrieval_checks as rc

    similarity = "hamming" if args.worker == "hamming" else "dot"
    if similarity == "dot":
        Q, G = plus_minus_one(Q), plus_minus_one(G)
    wq, wg, wyq, wyg = make_codes(400, 20, 64, 0.1, 1)
    if similarity == "dot":
        wq, wg = plus_minus_one(wq), plus_minus_one(wg)
    rc.evaluate(
        wq,
        wg,
        query_labels=wyq,
        gallery_labels=wyg,
        metrics=RANK,
        similarity=similarity,
        progress=False,
    )

    def call():
        return rc.evaluate(
            Q,
            G,
            query_labels=yq,
            gallery_labels=yg,
            metrics=RANK,
            similarity=similarity,
            max_memory=args.max_memory,
            progress=False,
        )

    def extract(res):
        return {
            "metrics": {k: float(res[k]) for k in RANK},
            "engine_config": {
                k: res.config.get(k) for k in ("backend", "block", "chunk", "max_memory")
            },
        }

    return call, extract


def _setup_faiss(args, Q, G, yq, yg):
    import faiss

    def search(q, g):
        index = faiss.IndexBinaryFlat(8 * g.shape[1])
        index.add(g)
        return index.search(q, 10)

    wq, wg, _, _ = make_codes(400, 20, 64, 0.1, 1)
    search(wq, wg)

    def extract(out):
        D, I = out
        hit = yg[I] == yq[:, None]
        return {
            "metrics": {
                "hit_rate@1": float(hit[:, 0].mean()),
                "hit_rate@5": float(hit[:, :5].any(1).mean()),
                "hit_rate@10": float(hit.any(1).mean()),
                "recall@1": float(hit[:, 0].mean() / PER_CLASS),
                "recall@10": float((hit.sum(1) / PER_CLASS).mean()),
            }
        }

    return (lambda: search(Q, G)), extract


def _tile_loop(kernel, Qw, Gw, out, block: int, chunk: int):
    """Every (query block, gallery chunk) tile of the full score matrix, into ``out``."""
    for s in range(0, Qw.shape[0], block):
        q = Qw[s : s + block]
        for j in range(0, Gw.shape[0], chunk):
            g = Gw[j : j + chunk]
            kernel(q, g, out[: q.shape[0], : g.shape[0]])


def _setup_kernel(args, Q, G, yq, yg):
    import numpy as np

    from retrieval_checks.engine import _hamming as h

    t0 = time.perf_counter()
    Qw, Gw = h.pack_codes(Q, "queries")[0], h.pack_codes(G, "gallery")[0]
    info = {"pack_s": time.perf_counter() - t0}
    block, chunk = min(args.block, Qw.shape[0]), args.chunk
    if args.worker == "kernel-torch":
        import torch

        dev = torch.device(args.torch_device or ("cuda" if torch.cuda.is_available() else "cpu"))
        Qw, Gw = h.words_to_torch(Qw, dev), h.words_to_torch(Gw, dev)
        out = torch.empty((block, chunk), dtype=torch.float32, device=dev)
        sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
        info["device"] = str(dev)

        def kernel(q, g, o):
            h.hamming_tile_torch(q, g, o)
    else:
        out = np.empty((block, chunk), np.float32)
        kernel = h.hamming_tile if args.worker == "kernel-numba" else h._hamming_tile_numpy
        sync = lambda: None  # noqa: E731
    # warm-up on a full and a partial tile (numba compiles, or loads, each array layout once)
    _tile_loop(kernel, Qw[:block], Gw[: chunk + 1], out, block, chunk)

    def call():
        _tile_loop(kernel, Qw, Gw, out, block, chunk)
        sync()
        return float(out[0, 0])

    info.update(block=block, chunk=chunk, pairs=int(Qw.shape[0]) * int(Gw.shape[0]))
    return call, (lambda _: info)


def run_worker(args) -> dict:
    rec = {"method": args.worker, "n": args.n, "queries": args.queries, "bits": args.bits}
    Q, G, yq, yg = make_codes(args.n, args.queries, args.bits, args.flip, args.seed)
    setup = {"hamming": _setup_evaluate, "dot": _setup_evaluate, "faiss": _setup_faiss}.get(
        args.worker, _setup_kernel
    )
    t0 = time.perf_counter()
    try:
        call, extract = setup(args, Q, G, yq, yg)
    except Exception as exc:  # noqa: BLE001 - e.g. similarity="hamming" not wired into the engine yet
        return {
            **rec,
            "status": "not wired" if args.worker == "hamming" else "error",
            "error": f"{type(exc).__name__}: {str(exc)[:300]}",
        }
    rec["warmup_s"] = time.perf_counter() - t0
    rec.update(_threads())
    gc.collect()
    rec["base_rss"] = proc_status().get("VmRSS")
    reset_ok = reset_peak()
    times, out = [], None
    for _ in range(args.repeat):
        out = None
        t0 = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - t0)
    rec.update(peak_rss=peak_rss(reset_ok), times_s=times, wall_s=min(times), status="ok")
    rec.update(extract(out))
    return rec


def _threads() -> dict:
    info = {}
    probes = (
        ("numba", "numba_threads", "get_num_threads"),
        ("faiss", "faiss_threads", "omp_get_max_threads"),
        ("torch", "torch_threads", "get_num_threads"),
    )
    for mod, key, fn in probes:
        if mod in sys.modules:
            info[key] = getattr(sys.modules[mod], fn)()
    return info


# ----------------------------------------------------------------------------- driver
def launch(method: str, args) -> dict:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        method,
        "--n",
        str(args.n),
        "--queries",
        str(args.queries),
        "--bits",
        str(args.bits),
        "--flip",
        repr(args.flip),
        "--seed",
        str(args.seed),
        "--repeat",
        str(args.repeat),
        "--max-memory",
        args.max_memory,
        "--block",
        str(args.block),
        "--chunk",
        str(args.chunk),
    ]
    if args.torch_device:
        cmd += ["--torch-device", args.torch_device]
    return run_worker_process(
        cmd, threads=args.threads, timeout=args.timeout, identity={"method": method}
    )


def report(args, recs) -> tuple[str, bool]:
    by = {r["method"]: r for r in recs}
    fa = by.get("faiss") if by.get("faiss", {}).get("status") == "ok" else None
    rows = []
    for r in recs:
        if r["status"] != "ok":
            rows.append([r["method"], r["status"]] + ["-"] * 8)
            continue
        extra = r["peak_rss"] - r["base_rss"]
        fa_extra = fa and fa["peak_rss"] - fa["base_rss"]
        pairs = r.get("pairs", args.n * args.queries)
        rows.append(
            [
                r["method"],
                "ok",
                f"{r['wall_s']:.3f}",
                _ratio(r["wall_s"], fa and fa["wall_s"]),
                f"{r['wall_s'] / pairs * 1e9:.3f}",
                _mb(r["base_rss"]),
                _mb(r["peak_rss"]),
                _mb(extra),
                _ratio(r["peak_rss"], fa and fa["peak_rss"]),
                _ratio(extra, fa_extra),
            ]
        )
    out = [
        f"\n=== gallery N={args.n:,}  queries={args.queries:,}  bits={args.bits}  "
        f"({PER_CLASS} planted near-duplicates per query, flip={args.flip}) ===",
        _table(
            [
                "method",
                "status",
                "wall_s",
                "time/faiss",
                "ns/pair",
                "base_MB",
                "peak_MB",
                "+MB",
                "peak/faiss",
                "+MB/faiss",
            ],
            rows,
        ),
    ]
    for r in recs:
        if r["status"] != "ok":
            out.append(f"  {r['method']}: {r['status']}: {r.get('error', '')}")
            continue
        notes = [
            f"{k}={r[k]}"
            for k in (
                "engine_config",
                "block",
                "chunk",
                "device",
                "numba_threads",
                "faiss_threads",
                "torch_threads",
            )
            if k in r
        ]
        if "pack_s" in r:
            notes.append(f"pack_codes {r['pack_s']:.3f}s (not timed)")
        out.append(
            f"  {r['method']}: times "
            + " ".join(f"{t:.3f}" for t in r["times_s"])
            + " (min used); "
            + " ".join(notes)
        )
    return _metrics_report(recs, out)


def _metrics_report(recs, out) -> tuple[str, bool]:
    with_metrics = [r for r in recs if r["status"] == "ok" and "metrics" in r]
    ok = True
    if with_metrics:
        out += [
            "",
            _table(
                ["metrics"] + RANK,
                [
                    [r["method"]]
                    + [f"{r['metrics'][k]:.6f}" if k in r["metrics"] else "-" for k in RANK]
                    for r in with_metrics
                ],
            ),
        ]
        out.append(
            "  faiss: top 10 with its own tie order; ours: exact ranks, ties counted pessimistically"
        )
    by = {r["method"]: r for r in with_metrics}
    if "hamming" in by and "dot" in by:
        diff = {k: abs(by["hamming"]["metrics"][k] - by["dot"]["metrics"][k]) for k in RANK}
        ok = max(diff.values()) == 0.0
        out.append(
            f"  cross-check hamming vs dot (same ranking): max |diff| = {max(diff.values()):.2e} "
            + (
                "(identical)"
                if ok
                else "<- DIFFERENT: " + ", ".join(k for k, v in diff.items() if v)
            )
        )
    return "\n".join(out), ok


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--n", type=int, default=1_000_000, help="gallery codes (default 1,000,000)")
    p.add_argument("--queries", type=int, default=1000, help="queries (default 1000)")
    p.add_argument(
        "--bits", type=int, default=64, help="bits per code, a multiple of 8 (default 64)"
    )
    p.add_argument(
        "--flip", type=float, default=0.1, help="bit flip probability of the planted codes"
    )
    p.add_argument("--quick", action="store_true", help="smoke run: N=100,000, 200 queries")
    p.add_argument("--methods", nargs="+", default=DEFAULT_METHODS, choices=ALL_METHODS)
    p.add_argument("--max-memory", default="1GiB", help="max_memory for rc.evaluate (default 1GiB)")
    p.add_argument(
        "--block", type=int, default=512, help="query rows per tile of the kernel-* methods"
    )
    p.add_argument(
        "--chunk", type=int, default=4096, help="gallery codes per tile of the kernel-* methods"
    )
    p.add_argument(
        "--torch-device", default=None, help="device of kernel-torch (default cuda if available)"
    )
    p.add_argument(
        "--repeat", type=int, default=3, help="timed calls per worker; the minimum is used"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--threads", type=int, default=None, help="OMP/numba/torch threads in every worker"
    )
    p.add_argument("--timeout", type=float, default=1800, help="seconds per worker")
    p.add_argument("--json", metavar="PATH", help="also write all records as JSON")
    p.add_argument("--worker", choices=ALL_METHODS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick and not args.worker:
        args.n, args.queries = 100_000, 200
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        print(MARK + json.dumps(run_worker(args)), flush=True)
        return 0
    load = _loadavg()
    print(
        "retrieval-checks Hamming benchmark (ratios are what to read; absolute times are this machine's)"
    )
    print(
        f"cores visible: {len(os.sched_getaffinity(0))}  load average at start: {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f}"
        + ("  <- other work is running: timings are noisy" if load[0] > 0.5 else "")
    )
    recs = []
    for m in dict.fromkeys(args.methods):
        print(f"  {m:13s} ...", end="", flush=True, file=sys.stderr)
        recs.append(launch(m, args))
        print(
            f" {recs[-1]['status']} {recs[-1].get('wall_s', float('nan')):.3f}s",
            file=sys.stderr,
            flush=True,
        )
    text, ok = report(args, recs)
    print(text, flush=True)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(
                {"args": {k: v for k, v in vars(args).items() if k != "worker"}, "records": recs},
                fh,
                indent=2,
            )
        print(f"\nwrote {args.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
