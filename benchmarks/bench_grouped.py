#!/usr/bin/env python
"""Benchmark grouped_recall@1 on all N items against plain hit_rate@1 on a subset.

Two ways to get a recall figure with an error bar from a large labelled set:

  grouped  rc.evaluate(X, query_labels=y, metrics=["grouped_recall@1"], group_size=S)
           on all N items: the labels are split into groups of S, every group is
           evaluated leave-one-out on its own items (about N * S * 10 similarity
           products with 10 items per class), the interval comes from the spread of
           the group values (Student's t).
  subset   rc.evaluate(Xs, query_labels=ys, metrics=["hit_rate@1"]) leave-one-out on a
           random subset of the classes (--subset items, all items of each chosen
           class): subset^2 similarity products. Its interval (printed, NOT timed) is a
           class-cluster percentile bootstrap (rc.bootstrap_interval, cluster="label").

The two values measure different things (hit rate among S classes vs among
subset/10 classes) and are not expected to agree; the point is what each costs.

Data: the generator of bench_engine.py (imported): leave-one-out over N items in d
dims, 10 items per class, class centres ~ N(0, I_d), item = centre + spread * N(0, I_d),
float32, seeded; the subset is a seeded random choice of those classes, taken from the
same N items.

The floor: the fp32 GEMMs of the same products alone (each group's items against
themselves, unpadded, batched np.matmul of stacked equal-size groups, operands gathered
untimed), with numpy's BLAS as set and with one BLAS thread; wall / the faster is x_GEMM.

Each measurement runs in its own subprocess (``--worker grouped|subset``), which
regenerates the data from the seed, warms up on tiny data, then times one call.
Peak RSS is /proc/self/status VmHWM reset right before the timed call (as in
bench_engine.py), reported with the base RSS (imports + data + warm-up) of that moment.

    python benchmarks/bench_grouped.py                         # N=1,000,000, subset 50,000, d=128
    python benchmarks/bench_grouped.py --n 100000 --subset 20000 --json benchmarks/results/grouped.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_engine import (  # noqa: E402 - the engine benchmark's data, memory and worker helpers
    ITEMS_PER_CLASS,
    _loadavg,
    auto_spread,
    make_data,
    mem_available,
    peak_rss,
    proc_status,
    reset_peak,
    run_worker_process,
)

MARK = "@@RESULT@@ "
WORKERS = ("grouped", "subset")


def subset_of_classes(y, n_items: int, seed: int):
    """Indices of the items of a seeded random choice of n_items / 10 classes."""
    import numpy as np

    n_classes = int(y.max()) + 1
    want = min(n_items // ITEMS_PER_CLASS, n_classes)
    chosen = np.random.default_rng(seed + 1).choice(n_classes, size=want, replace=False)
    return np.flatnonzero(np.isin(y, chosen))


def gemm_floor(X, group_of_query, n_groups: int, chunk: int = 1000) -> dict:
    """Seconds of the fp32 GEMMs of the same products alone: each group's items against
    themselves (unpadded), groups of equal size stacked into batched ``np.matmul`` calls
    of ``chunk`` groups, operands gathered and copied beforehand (two buffers: numpy
    would run ``A @ A.T`` as a SYRK, half the work), not timed. Both with numpy's BLAS
    as set (``blas_default``) and with one BLAS thread (``blas_1_thread``), where
    threadpoolctl is installed; ``best`` is the smaller."""
    import numpy as np

    order = np.argsort(group_of_query, kind="stable")
    order = order[group_of_query[order] >= 0]
    sizes = np.bincount(group_of_query[order], minlength=n_groups)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])

    def run() -> float:
        total = 0.0
        for m in np.unique(sizes):
            gs = np.flatnonzero(sizes == m)
            for a in range(0, gs.size, chunk):
                pick = gs[a : a + chunk]
                rows = (starts[pick][:, None] + np.arange(m)).ravel()
                A = np.ascontiguousarray(X[order[rows]].reshape(pick.size, m, -1))
                B = A.copy()
                t0 = time.perf_counter()
                np.matmul(A, B.transpose(0, 2, 1))
                total += time.perf_counter() - t0
        return total

    out = {"blas_default": run()}
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None:
        with threadpool_limits(1, user_api="blas"):
            out["blas_1_thread"] = run()
    out["best"] = min(out.values())
    return out


def run_worker(args) -> dict:
    import numpy as np

    import retrieval_checks as rc

    rec = {
        "method": args.worker,
        "n": args.n,
        "d": args.d,
        "spread": args.spread,
        "seed": args.seed,
        "group_size": args.group_size,
    }
    t0 = time.perf_counter()
    X, y = make_data(args.n, args.d, args.spread, args.seed)
    if args.worker == "subset":
        idx = subset_of_classes(y, args.subset, args.seed)
        X, y = np.ascontiguousarray(X[idx]), y[idx]
        gc.collect()  # the full N set is freed: base RSS holds the subset only
    rec["items"] = int(y.size)
    rec["classes"] = int(np.unique(y).size)
    rec["datagen_s"] = time.perf_counter() - t0

    if args.worker == "grouped":
        metric = "grouped_recall@1"
        kw = dict(metrics=[metric], group_size=args.group_size, group_seed=args.seed)
    else:
        metric = "hit_rate@1"
        kw = dict(metrics=[metric])
    # warm-up: imports, torch initialisation, numba kernels
    t0 = time.perf_counter()
    Xw, yw = make_data(400, 8, 0.5, 1)
    rc.evaluate(Xw, query_labels=yw, progress=False, **kw)  # 40 classes: 4 groups of 10
    rec["warmup_s"] = time.perf_counter() - t0
    try:
        import torch

        rec["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass

    gc.collect()
    rec["base_rss"] = proc_status().get("VmRSS")
    reset_ok = reset_peak()
    rec["peak_is_reset"] = reset_ok
    t0 = time.perf_counter()
    res = rc.evaluate(X, query_labels=y, progress=False, **kw)
    rec["wall_s"] = time.perf_counter() - t0
    rec["peak_rss"] = peak_rss(reset_ok)
    rec["metric"] = metric
    rec["value"] = float(res[metric])
    rec["engine_config"] = {k: res.config[k] for k in ("backend", "max_memory")}
    if args.worker == "grouped":
        g = res.grouped[metric]
        rec.update(
            interval=list(g.interval),
            n_groups=g.n_groups,
            group_std=g.group_std,
            std_error=g.std_error,
            n_dropped=len(g.dropped_labels),
            n_queries_used=g.n_queries_used,
            n_queries_skipped=g.n_queries_skipped,
        )
        # similarity products actually needed: every group against itself
        sizes = np.bincount(g.group_of_query[g.group_of_query >= 0], minlength=g.n_groups)
        rec["products"] = int((sizes.astype(np.int64) ** 2).sum())
        rec["gemm_floor_s"] = gemm_floor(X, g.group_of_query, g.n_groups)
    else:
        rec["n_queries_used"] = int(res.n_used)
        rec["products"] = int(y.size) ** 2
        t0 = time.perf_counter()
        iv = rc.bootstrap_interval(
            res, metric, method="percentile", cluster="label", n_resamples=1000, seed=args.seed
        )
        rec["bootstrap_s"] = time.perf_counter() - t0
        rec["interval"] = [float(iv.low), float(iv.high)]
    rec["status"] = "ok"
    return rec


def launch(worker: str, args) -> dict:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        worker,
        "--n",
        str(args.n),
        "--subset",
        str(args.subset),
        "--d",
        str(args.d),
        "--group-size",
        str(args.group_size),
        "--seed",
        str(args.seed),
        "--spread",
        repr(args.spread),
    ]
    return run_worker_process(cmd, timeout=args.timeout, identity={"method": worker})


def _mb(x):
    return "-" if x is None else f"{x / 2**20:.0f}"


def report(recs: dict, args) -> str:
    out = [
        f"\n=== grouped_recall@1 on N={args.n} vs hit_rate@1 on a {args.subset}-item class subset; d={args.d}, "
        f"spread={args.spread}, S={args.group_size}, seed={args.seed} ==="
    ]
    rows = [
        [
            "method",
            "items",
            "classes",
            "wall_s",
            "us/item",
            "base_MB",
            "peak_MB",
            "+MB",
            "products/item",
            "GEMM_s",
            "x_GEMM",
            "value",
            "interval",
        ]
    ]
    for name in WORKERS:
        r = recs[name]
        if r.get("status") != "ok":
            rows.append([name, r.get("status", "?")] + ["-"] * 11)
            continue
        lo, hi = r["interval"]
        rows.append(
            [
                name,
                str(r["items"]),
                str(r["classes"]),
                f"{r['wall_s']:.3f}",
                f"{1e6 * r['wall_s'] / r['items']:.2f}",
                _mb(r["base_rss"]),
                _mb(r["peak_rss"]),
                _mb(r["peak_rss"] - r["base_rss"]),
                f"{r['products'] / r['items']:.0f}",
                f"{r['gemm_floor_s']['best']:.3f}" if "gemm_floor_s" in r else "-",
                f"{r['wall_s'] / r['gemm_floor_s']['best']:.1f}" if "gemm_floor_s" in r else "-",
                f"{r['value']:.6f}",
                f"[{lo:.6f}, {hi:.6f}]",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    out += lines
    for name in WORKERS:
        r = recs[name]
        if r.get("status") != "ok":
            out.append(f"  {name}: {r.get('status')}: {r.get('error', '')}")
    g, s = recs["grouped"], recs["subset"]
    if g.get("status") == "ok":
        out.append(
            f"  grouped: r={g['n_groups']} groups of S={args.group_size}, s={g['group_std']:.4f}, "
            f"SE={g['std_error']:.5f}, {g['n_dropped']} labels dropped, {g['n_queries_used']} queries used "
            f"({g['n_queries_skipped']} skipped); 95% Student-t interval; "
            f"backend={g['engine_config']['backend']} max_memory={g['engine_config']['max_memory'] / 2**20:.0f}MiB"
            f"; warm-up {g['warmup_s']:.2f}s"
        )
    if s.get("status") == "ok":
        out.append(
            f"  subset: interval = 95% class-cluster percentile bootstrap (1000 resamples, "
            f"{s['bootstrap_s']:.2f}s, not in wall_s); backend={s['engine_config']['backend']}; "
            f"warm-up {s['warmup_s']:.2f}s"
        )
    if g.get("status") == "ok" and s.get("status") == "ok":
        per_g, per_s = g["wall_s"] / g["items"], s["wall_s"] / s["items"]
        out.append(
            f"  cost per item: grouped / subset hit_rate = {per_g / per_s:.3f} "
            f"(products per item: {g['products'] / g['items']:.0f} vs {s['products'] / s['items']:.0f}); "
            f"whole calls: grouped on {g['items']} items takes {g['wall_s'] / s['wall_s']:.2f}x the subset's time"
        )
        out.append(
            "  (the two values measure different things: hit rate among S classes vs among "
            f"{s['classes']} classes)"
        )
    if g.get("status") == "ok":
        f = g["gemm_floor_s"]
        out.append(
            "  GEMM_s = the fp32 GEMMs of the same products alone (each group against itself, "
            "unpadded, batched np.matmul, operands gathered untimed): "
            + ", ".join(f"{k} {v:.3f}s" for k, v in f.items())
            + "; x_GEMM = wall_s / its best"
        )
    out.append(
        f"  peak = VmHWM reset before the timed call ({'yes' if g.get('peak_is_reset') else 'NO: lifetime peak'}); "
        "base = RSS of imports + data + warm-up; +MB = peak - base"
    )
    return "\n".join(out)


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--n", type=int, default=1_000_000, help="items for grouped_recall@1 (default 1000000)"
    )
    p.add_argument(
        "--subset",
        type=int,
        default=50_000,
        help="items of the random class subset for plain hit_rate@1 (default 50000)",
    )
    p.add_argument("--d", type=int, default=128, help="dimension (default 128)")
    p.add_argument("--group-size", type=int, default=10, help="labels per group S (default 10)")
    p.add_argument(
        "--seed", type=int, default=0, help="data, subset and partition seed (default 0)"
    )
    p.add_argument(
        "--spread",
        type=float,
        default=None,
        help="noise level; default: bench_engine.py's sqrt(sqrt(d)/3.5 - 1)",
    )
    p.add_argument("--timeout", type=float, default=3600, help="seconds per worker (default 3600)")
    p.add_argument("--json", metavar="PATH", help="also write the records as JSON")
    p.add_argument("--worker", choices=WORKERS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.n % ITEMS_PER_CLASS or args.subset % ITEMS_PER_CLASS:
        p.error(f"--n and --subset must be multiples of {ITEMS_PER_CLASS}")
    if args.subset > args.n:
        p.error("--subset must not exceed --n")
    if args.spread is None:
        args.spread = auto_spread(args.d)
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        print(MARK + json.dumps(run_worker(args)), flush=True)
        return 0
    load = _loadavg()
    print("retrieval-checks grouped-recall benchmark (absolute times are this machine's)")
    print(
        f"cores visible: {len(os.sched_getaffinity(0))}  MemAvailable: {mem_available() / 2**30:.1f} GiB  "
        f"load average (1/5/15 min): {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        + ("  <- other work is running: timings will be noisy" if load[0] > 0.5 else "")
    )
    recs = {}
    for w in WORKERS:
        print(f"  {w:8s} ...", end="", flush=True, file=sys.stderr)
        recs[w] = launch(w, args)
        print(
            f" {recs[w]['status']} {recs[w].get('wall_s', float('nan')):.3f}s",
            file=sys.stderr,
            flush=True,
        )
        recs[w]["loadavg_after"] = _loadavg()
    print(report(recs, args), flush=True)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "args": {k: v for k, v in vars(args).items() if k != "worker"},
                    "loadavg_start": load,
                    "records": recs,
                },
                fh,
                indent=2,
            )
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
