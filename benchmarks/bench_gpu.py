#!/usr/bin/env python
"""The CUDA path against its floors, in one run on one GPU.

For each (N, d) it times, on the same data (leave-one-out, 10 items per class, cosine,
the generator of ``bench_engine.py``):

  ours-rank   rc.evaluate(..., metrics=RANK_ONLY, device="cuda"): exact ranks of every
              relevant item, the full rank metric set.
  ours-full   the same plus recall_at_precision@0.9 (exact over all N^2 pairs).
  gemm        the fp32 products the engine needs (all N x N scores, TF32 off), written to
              a reused block buffer and discarded: the floor of any exact method that
              computes every score.
  topk        brute-force top-10: the same products plus torch.topk(k=11) per block (an
              approximate top-10 evaluation, not exact full-ranking metrics).
  triton      ours-rank on the fused Triton kernel (RC_TRITON=1): tile product, score
              epilogue and rank counts in one kernel, no score block in memory
              (docs/gpu.md). ours-rank above runs with RC_TRITON=0: today's torch path.
  screened    the same with bf16 screening and exact fp32 recompute (RC_TRITON_SCREEN=bf16).
  tf32        the same with TF32 screening (RC_TRITON_SCREEN=tf32). Both screened columns
              give the share of tiles the screen decided alone ("N% screened"); the
              others were recomputed in exact fp32.
  triton-full ours-full on the fused kernel: the pair outputs (tail, thresholds) in the
              same launch. Every Triton column must give the torch path's numbers: the
              table says "same" or "DIFFERS", and "fell back" when the kernel's
              self-check refused it.

Every timed region is wrapped in torch.cuda.synchronize() after a warm-up call; the
report gives ours / gemm and ours / topk ratios measured in the same run, and the peak
GPU memory of each call (torch.cuda.max_memory_allocated, reset before it). Optional
rows: grouped recall on 10M items (--grouped-n), and image-text both directions
(--image-text N_IMAGES: 5 captions per image).

``--device cpu`` runs the same script on the CPU at small sizes (a smoke test the test
suite runs); its timings mean nothing about a GPU.

    python benchmarks/bench_gpu.py                                  # the issue's table
    python benchmarks/bench_gpu.py --sizes 100000x128 200000x512 --grouped-n 10000000
    python benchmarks/bench_gpu.py --device cpu --sizes 2000x16     # smoke
    python benchmarks/bench_gpu.py --device cpu --sizes 300x8 --triton on   # + the kernel, interpreted
    python benchmarks/bench_gpu.py --skip-full --sizes 1000000x128 --tiles 64x64x32 64x128x32 128x128x32

On the CPU the Triton rows run only with ``--triton on``, in Triton's interpreter
(TRITON_INTERPRET=1; slow, a correctness smoke run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_engine import FULL, RANK_ONLY, auto_spread, make_data  # noqa: E402

DEFAULT_SIZES = ["100000x128", "200000x128", "200000x512", "1000000x128"]


def _sync(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


#: ``--warmup none`` turns the warm-up call off (a large size's warm-up doubles its cost;
#: run a small size first, e.g. ``--sizes 20000x128 1000000x128``, to compile the kernels)
WARMUP = True


def _timed(torch, device, fn, repeats: int = 1):
    """(seconds of the fastest of ``repeats`` calls after a warm-up, peak bytes, result)."""
    if WARMUP:
        fn()  # warm-up: kernels compiled, allocator primed
    best, peak, out = float("inf"), 0, None
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        _sync(torch, device)
        t = time.perf_counter()
        out = fn()
        _sync(torch, device)
        best = min(best, time.perf_counter() - t)
        if device.type == "cuda":
            peak = max(peak, torch.cuda.max_memory_allocated(device))
    return best, peak, out


def _block_rows(n: int, budget_bytes: int) -> int:
    return max(1, min(n, budget_bytes // (4 * n)))


def gemm_floor(torch, X, block: int):
    """All N x N fp32 products in blocks of rows into one reused buffer."""
    n = X.shape[0]
    buf = torch.empty((block, n), dtype=torch.float32, device=X.device)
    for s in range(0, n, block):
        e = min(n, s + block)
        torch.mm(X[s:e], X.T, out=buf[: e - s])
    return buf[0, 0].item()


def topk_baseline(torch, X, y, block: int, k: int = 10):
    """Brute-force top-k (self excluded): hit_rate@1 and @10 from mm + topk per block."""
    n = X.shape[0]
    hits1 = hits10 = 0
    buf = torch.empty((block, n), dtype=torch.float32, device=X.device)
    for s in range(0, n, block):
        e = min(n, s + block)
        S = buf[: e - s]
        torch.mm(X[s:e], X.T, out=S)
        S[torch.arange(e - s, device=X.device), torch.arange(s, e, device=X.device)] = -float("inf")
        idx = torch.topk(S, k, dim=1).indices
        same = y[idx] == y[s:e, None]
        hits1 += int(same[:, 0].sum())
        hits10 += int(same.any(dim=1).sum())
    return {"hit_rate@1": hits1 / n, "hit_rate@10": hits10 / n}


@contextlib.contextmanager
def environ(**values):
    """``os.environ`` with ``values`` set for the block, restored after (the engine's
    switches are read per call); gpu_exactness.py's variants use it too."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_triton(
    torch, rc, device, X, y_np, args, screen: str, want: dict, metrics=RANK_ONLY
) -> dict:
    """``metrics`` on the fused kernel (CUDA; on CPU in the interpreter), screened by
    ``screen`` (``0``, ``bf16`` or ``tf32``): time, peak, and whether its numbers equal
    the torch path's (``want``)."""
    from retrieval_checks.engine.gpu import _triton

    cuda = device.type == "cuda"
    dev_name = "cuda" if cuda else "torch-cpu"
    ctx = contextlib.nullcontext() if cuda else _triton.on_cpu(screen=screen)
    _triton.SCREEN_STATS.update(screened=0, recomputed=0)
    with (
        environ(RC_TRITON="1", RC_TRITON_SCREEN=screen),
        ctx,
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always", RuntimeWarning)
        t, peak, res = _timed(
            torch,
            device,
            lambda: rc.evaluate(
                X,
                query_labels=y_np,
                metrics=metrics,
                device=dev_name,
                max_memory=args.max_memory,
                similarity=args.similarity,
                _use_kernels=cuda,
            ),
        )
    fell_back = any("Triton" in str(w.message) for w in caught)
    same = all(res[k] == v for k, v in want.items())
    check = "fell back" if fell_back else ("same" if same else "DIFFERS")
    if not want and not fell_back:
        check = "not compared"
    tiles = _triton.SCREEN_STATS["screened"] + _triton.SCREEN_STATS["recomputed"]
    if (
        screen != "0" and tiles
    ):  # how often the screen alone decided a tile (else it was recomputed in fp32)
        check += f", {100 * _triton.SCREEN_STATS['screened'] / tiles:.0f}% screened"
    keys = want or ("map@R", "hit_rate@1")
    return {"s": t, "peak": peak, "check": check, **{k: res[k] for k in keys if k in res}}


def run_size(
    torch, rc, device, n: int, d: int, args
) -> dict:  # long: one row of the table, every column
    X_np, y_np = make_data(n, d, auto_spread(d), args.seed)
    X = torch.from_numpy(X_np).to(device)
    X = X / X.norm(dim=1, keepdim=True)  # cosine: the same products the engine computes
    y = torch.from_numpy(y_np).to(device)
    budget = args.block_bytes
    block = _block_rows(n, budget)
    dev_name = "cuda" if device.type == "cuda" else "torch-cpu"
    rows = {}
    old = None
    if device.type == "cuda":
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
    try:
        with environ(RC_TRITON="0") if not args.skip_torch else contextlib.nullcontext():
            t, peak, res = (
                (0.0, 0, {})
                if args.skip_torch
                else _timed(
                    torch,
                    device,
                    lambda: rc.evaluate(
                        X,
                        query_labels=y_np,
                        metrics=RANK_ONLY,
                        device=dev_name,
                        max_memory=args.max_memory,
                        similarity=args.similarity,
                    ),
                )
            )
            if not args.skip_torch:
                rows["ours-rank"] = {
                    "s": t,
                    "peak": peak,
                    "map@R": res["map@R"],
                    "hit_rate@1": res["hit_rate@1"],
                }
            if not args.skip_full and not args.skip_torch:
                t, peak, res = _timed(
                    torch,
                    device,
                    lambda: rc.evaluate(
                        X,
                        query_labels=y_np,
                        metrics=FULL,
                        device=dev_name,
                        max_memory=args.max_memory,
                        similarity=args.similarity,
                    ),
                )
                rows["ours-full"] = {
                    "s": t,
                    "peak": peak,
                    "recall_at_precision@0.9": res["recall_at_precision@0.9"],
                }
        if args.triton_rows:
            # --skip-torch: nothing to compare with (the check says "not compared")
            want = {k: rows["ours-rank"][k] for k in ("map@R", "hit_rate@1") if "ours-rank" in rows}
            for screen, name in (("0", "triton"), ("bf16", "screened"), ("tf32", "tf32")):
                if screen in args.screens:
                    rows[name] = run_triton(torch, rc, device, X, y_np, args, screen, want)
            for shape in args.tiles:  # the fp32 kernel's time for each tile shape (RC_TRITON_TILE)
                with environ(RC_TRITON_TILE=shape):
                    rows[f"tile {shape}"] = run_triton(torch, rc, device, X, y_np, args, "0", want)
            if not args.skip_full and not args.skip_torch:
                want_full = {
                    "recall_at_precision@0.9": rows["ours-full"]["recall_at_precision@0.9"]
                }
                rows["triton-full"] = run_triton(
                    torch, rc, device, X, y_np, args, "0", want_full, FULL
                )
        t, peak, _ = _timed(torch, device, lambda: gemm_floor(torch, X, block))
        rows["gemm"] = {"s": t, "peak": peak}
        t, peak, res = _timed(torch, device, lambda: topk_baseline(torch, X, y, block))
        rows["topk"] = {"s": t, "peak": peak, **res}
    finally:
        if old is not None:
            torch.backends.cuda.matmul.allow_tf32 = old
    return rows


def _with_and_without_kernels(torch, device, args, fn, key: str) -> dict:
    """``fn()`` on today's path (RC_TRITON=0) and, with the Triton rows, on the fused
    kernel (RC_TRITON=1; on CPU in the interpreter): time, peak, ``key``'s value, and
    whether the fused run's value equals today's."""
    from retrieval_checks.engine.gpu import _triton

    if getattr(args, "fused_only", False) and args.triton_rows:
        out = {"s": float("nan"), "peak": 0, key: float("nan")}
    else:
        with environ(RC_TRITON="0"):
            t, peak, res = _timed(torch, device, fn)
        out = {"s": t, "peak": peak, key: res[key]}
    if args.triton_rows:
        ctx = contextlib.nullcontext() if device.type == "cuda" else _triton.on_cpu()
        with environ(RC_TRITON="1"), ctx, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            t, peak, fused = _timed(torch, device, fn)
        fell_back = any("Triton" in str(w.message) for w in caught)
        out["triton"] = {
            "s": t,
            "peak": peak,
            key: fused[key],
            "check": "fell back"
            if fell_back
            else (
                "not compared"
                if out[key] != out[key]
                else ("same" if fused[key] == out[key] else "DIFFERS")
            ),
        }
    return out


def run_grouped(torch, rc, device, n: int, args) -> dict:
    """Grouped recall@1 (groups of 1000 labels) on n items, d = 128: the numpy path
    today, the fused grouped kernel with the Triton rows."""
    X_np, y_np = make_data(n, 128, auto_spread(128), args.seed)
    X = torch.from_numpy(X_np).to(device)
    dev_name = "cuda" if device.type == "cuda" else "torch-cpu"
    group = min(1000, max(2, len(set(y_np.tolist())) // 4))
    return _with_and_without_kernels(
        torch,
        device,
        args,
        lambda: rc.evaluate(
            X,
            query_labels=y_np,
            metrics=["grouped_recall@1"],
            group_size=group,
            device=dev_name,
            max_memory=args.max_memory,
            _use_kernels=device.type == "cuda",
        ),
        "grouped_recall@1",
    )


def run_image_text(torch, rc, device, n_images: int, args) -> dict:
    """Both directions, 5 captions per image, d = 256: two engine passes today, one
    fused pass over shared tiles with the Triton rows."""
    import numpy as np

    rng = np.random.default_rng(args.seed)
    images = rng.standard_normal((n_images, 256), dtype=np.float32)
    cap_img = np.repeat(np.arange(n_images), 5)
    captions = images[cap_img] + 1.5 * rng.standard_normal((cap_img.size, 256), dtype=np.float32)
    I, C = torch.from_numpy(images).to(device), torch.from_numpy(captions).to(device)
    dev_name = "cuda" if device.type == "cuda" else "torch-cpu"
    return _with_and_without_kernels(
        torch,
        device,
        args,
        lambda: rc.evaluate_image_text(
            I, C, cap_img, n_resamples=0, device=dev_name, max_memory=args.max_memory
        ),
        "rsum",
    )


def _cell(row: dict | None) -> str:
    if row is None:
        return "-"
    return f"{row['s']:.2f} s ({row['check']})"


def report(results: dict, device_name: str) -> str:
    lines = [
        f"device: {device_name}",
        "",
        "| N, d | ours, rank metrics | ours, + recall_at_precision@0.9 | Triton fused, rank metrics | "
        "Triton screened bf16 | Triton screened TF32 | Triton fused, + recall_at_precision@0.9 | "
        "fp32 GEMM of the same products | "
        "brute-force top-10 (mm + topk) | ours-rank / GEMM | Triton / GEMM | ours-rank / top-10 | "
        "peak GPU MB (ours-full) | peak GPU MB (Triton) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, rows in results.items():
        if not key.startswith("size "):
            continue
        r = dict(rows)
        r.setdefault("ours-rank", {"s": float("nan"), "peak": 0})
        full = r.get("ours-full", {})
        tri = r.get("triton")
        lines.append(
            f"| {key[5:]} | {r['ours-rank']['s']:.2f} s | {full.get('s', float('nan')):.2f} s | {_cell(tri)} | "
            f"{_cell(r.get('screened'))} | {_cell(r.get('tf32'))} | {_cell(r.get('triton-full'))} | "
            f"{r['gemm']['s']:.2f} s | "
            f"{r['topk']['s']:.2f} s | {r['ours-rank']['s'] / r['gemm']['s']:.1f}x | "
            f"{'-' if tri is None else format(tri['s'] / r['gemm']['s'], '.1f') + 'x'} | "
            f"{r['ours-rank']['s'] / r['topk']['s']:.1f}x | {full.get('peak', r['ours-rank']['peak']) / 2**20:.0f} | "
            f"{'-' if tri is None else format(tri['peak'] / 2**20, '.0f')} |"
        )
    for key, rows in results.items():
        sweep = (
            [f"{name[5:]} {_cell(row)}" for name, row in rows.items() if name.startswith("tile ")]
            if key.startswith("size ")
            else []
        )
        if sweep:
            lines.append(
                f"\ntile sweep (Triton fp32, rank metrics), {key[5:]}: " + "; ".join(sweep)
            )
    for key in ("grouped", "image_text"):
        if key in results:
            r = results[key]
            value = next(k for k in r if k not in ("s", "peak", "triton"))
            line = f"\n{key}: today's path {r['s']:.2f} s, peak {r['peak'] / 2**20:.0f} MB, {value} {r[value]:.4f}"
            if "triton" in r:
                t = r["triton"]
                line += f"; fused {_cell(t)}, peak {t['peak'] / 2**20:.0f} MB ({r['s'] / t['s']:.1f}x faster)"
            lines.append(line)
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", nargs="*", default=DEFAULT_SIZES, help="NxD, e.g. 100000x128")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (smoke run)")
    p.add_argument(
        "--max-memory", default=None, help="the engine's budget (default: the library's)"
    )
    p.add_argument(
        "--block-bytes",
        type=int,
        default=2 * 2**30,
        help="score buffer of the GEMM and top-k floors",
    )
    p.add_argument("--skip-full", action="store_true", help="skip the pair-metric run")
    p.add_argument(
        "--grouped-n", type=int, default=0, help="also time grouped recall on this many items"
    )
    p.add_argument(
        "--image-text", type=int, default=0, help="also time image-text with this many images"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--similarity",
        choices=("cosine", "dot", "neg_l2"),
        default="cosine",
        help="the main pass's similarity (the rows are unit vectors, so every choice has the "
        "same products: cosine's time minus dot's is the cost of its exact epilogue)",
    )
    p.add_argument(
        "--triton",
        choices=("auto", "on", "off"),
        default="auto",
        help="the fused-kernel rows: auto = on CUDA only; on = also on the CPU (Triton's interpreter)",
    )
    p.add_argument(
        "--tiles",
        nargs="*",
        default=[],
        metavar="BMxBNxBK",
        help="also time the fp32 kernel with each tile shape (RC_TRITON_TILE), e.g. 64x128x32",
    )
    p.add_argument(
        "--skip-torch",
        action="store_true",
        help="skip today's torch-path rows (at 1M they take minutes); the fused rows are then 'not compared'",
    )
    p.add_argument(
        "--screens",
        nargs="+",
        default=["0", "bf16", "tf32"],
        choices=("0", "bf16", "tf32"),
        help="the fused rows to time: fp32 (0), bf16- and TF32-screened",
    )
    p.add_argument(
        "--fused-only",
        action="store_true",
        help="grouped and image-text: time the fused kernel only, not today's path",
    )
    p.add_argument(
        "--warmup",
        choices=("call", "none"),
        default="call",
        help="call: one untimed call before each timed one; none: no warm-up (put a small size first to compile)",
    )
    p.add_argument("--json", help="write the raw results here")
    args = p.parse_args(argv)
    global WARMUP
    WARMUP = args.warmup == "call"
    on_cpu = not args.device.startswith("cuda")
    args.triton_rows = args.triton == "on" or (args.triton == "auto" and not on_cpu)
    if on_cpu and args.triton_rows:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is first imported
    import torch

    import retrieval_checks as rc

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            "bench_gpu: no CUDA device on this machine; run it where a GPU is present "
            "(or --device cpu for a smoke run)."
        )
        return 0
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (smoke run)"
    results: dict = {"device": name, "torch": torch.__version__}

    def keep(key: str, row: dict) -> None:
        """Each row is printed (and the JSON rewritten) as soon as it is measured: a run
        stopped at a device machine's time limit still reports what it measured."""
        results[key] = row
        print(f"row {key}: {json.dumps(row, default=float)}", flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(results, fh, indent=2, default=float)

    for size in args.sizes:
        n, d = (int(v) for v in size.lower().split("x"))
        keep(f"size {n}, {d}", run_size(torch, rc, device, n, d, args))
    if args.grouped_n:
        keep("grouped", run_grouped(torch, rc, device, args.grouped_n, args))
    if args.image_text:
        keep("image_text", run_image_text(torch, rc, device, args.image_text, args))
    print(report(results, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
