#!/usr/bin/env python
"""Sharded evaluation (``evaluate(..., process_group=g)``): wall time and peak memory
per rank at world sizes 1 and 2 (Gloo on CPU, ranks on one machine).

Data: the leave-one-out set of ``bench_engine.py`` (N items in d dims, 10 per class,
Gaussian clusters), regenerated from the seed in every rank; each rank takes a
contiguous shard of ``N / world`` items and passes it with its global ids.

For each world size the ranks are spawned (``torch.multiprocessing``, a ``file://``
rendezvous), each warms up on a small set, resets its peak RSS (``VmHWM``, the helpers
of ``bench_engine.py``), then times one ``evaluate`` call. Reported per rank: wall time
of the call, base RSS (imports + data), peak RSS during the call and the increase. A
row "one process" times plain ``evaluate`` on the whole set in a spawned process, for
comparison. Every rank's metric values are checked equal to the one-process values
(the script exits 1 otherwise). Threads: each rank gets ``cores / world`` threads.

    python benchmarks/bench_distributed.py                      # N=50000, d=128, worlds 1 2
    python benchmarks/bench_distributed.py --n 5000 --d 32      # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

METRICS = ["map", "map@R", "r_precision", "mrr", "hit_rate@1", "recall@10"]


def _data(n: int, d: int, seed: int):
    from bench_engine import make_data  # the same synthetic set as the engine benchmark

    return make_data(n, d, 0.5, seed)


def _threads(world: int) -> int:
    return max(1, (os.cpu_count() or 1) // world)


def _measure(call):
    from bench_engine import peak_rss, proc_status, reset_peak

    base = proc_status().get("VmRSS", 0)
    ok = reset_peak()
    t0 = time.perf_counter()
    result = call()
    wall = time.perf_counter() - t0
    peak = peak_rss(ok)
    return result, {
        "wall_s": wall,
        "base_mb": base / 2**20,
        "peak_mb": peak / 2**20,
        "plus_mb": (peak - base) / 2**20,
        "peak_reset": ok,
    }


def _rank(
    rank: int, world: int, init: str, n: int, d: int, seed: int, max_memory: str, out: str
) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist

    import retrieval_checks as rc

    torch.set_num_threads(_threads(world))
    os.environ["NUMBA_NUM_THREADS"] = str(_threads(world))
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world)
    try:
        X, y = _data(n, d, seed)
        lo, hi = n * rank // world, n * (rank + 1) // world
        ids = np.arange(lo, hi)
        small = slice(lo, lo + min(200, hi - lo))
        rc.evaluate(
            X[small],
            None,
            query_labels=y[small],
            query_ids=ids[: small.stop - small.start],
            metrics=METRICS,
            process_group=dist.group.WORLD,
        )  # warm-up (kernels compiled, group)
        result, row = _measure(
            lambda: rc.evaluate(
                X[lo:hi],
                None,
                query_labels=y[lo:hi],
                query_ids=ids,
                metrics=METRICS,
                max_memory=max_memory,
                process_group=dist.group.WORLD,
            )
        )
        row.update(
            rank=rank,
            world=world,
            shard=hi - lo,
            values=dict(result),
            block=result.config["block"],
            chunk=result.config["chunk"],
        )
        Path(out, f"rank{rank}.json").write_text(json.dumps(row))
    finally:
        dist.destroy_process_group()


def _single(_rank_unused: int, n: int, d: int, seed: int, max_memory: str, out: str) -> None:
    import torch

    import retrieval_checks as rc

    torch.set_num_threads(_threads(1))
    X, y = _data(n, d, seed)
    rc.evaluate(X[:200], None, query_labels=y[:200], metrics=METRICS)  # warm-up
    result, row = _measure(
        lambda: rc.evaluate(X, None, query_labels=y, metrics=METRICS, max_memory=max_memory)
    )
    row.update(
        rank="-",
        world="one process",
        shard=n,
        values=dict(result),
        block=result.config["block"],
        chunk=result.config["chunk"],
    )
    Path(out, "single.json").write_text(json.dumps(row))


def main(argv=None) -> int:
    import torch.multiprocessing as mp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--worlds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-memory", default="256MiB")
    ap.add_argument("--json", help="write the rows to this file")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(
            _single,
            args=(args.n, args.d, args.seed, args.max_memory, tmp),
            nprocs=1,
            start_method="spawn",
        )
        single = json.loads(Path(tmp, "single.json").read_text())
        rows.append(single)
        for world in args.worlds:
            out = Path(tmp, f"w{world}")
            out.mkdir()
            mp.start_processes(
                _rank,
                args=(
                    world,
                    str(Path(tmp, f"rdv{world}")),
                    args.n,
                    args.d,
                    args.seed,
                    args.max_memory,
                    str(out),
                ),
                nprocs=world,
                start_method="spawn",
            )
            rows += [json.loads(Path(out, f"rank{r}.json").read_text()) for r in range(world)]
    print(
        f"sharded evaluate, leave-one-out N={args.n}, d={args.d}, max_memory={args.max_memory}, "
        f"{os.cpu_count()} cores, metrics {', '.join(METRICS)}"
    )
    print("| world | rank | items | block x chunk | wall s | base MB | peak MB | + MB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['world']} | {r['rank']} | {r['shard']} | {r['block']} x {r['chunk']} | {r['wall_s']:.2f} | "
            f"{r['base_mb']:.0f} | {r['peak_mb']:.0f} | {r['plus_mb']:.0f}"
            f"{'' if r['peak_reset'] else ' (lifetime peak)'} |"
        )
    same = all(r["values"] == single["values"] for r in rows)
    print("metric values equal to one process on every rank:", "yes" if same else "NO")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
