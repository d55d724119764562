#!/usr/bin/env python
"""Benchmark rc.evaluate_image_text against a dense numpy evaluation of the same metrics.

Every method runs on the SAME synthetic joint embeddings (regenerated from the seed
inside each worker) in its OWN subprocess, one after the other, so that each method's
peak RSS is its own. Ratios are against the dense numpy baseline of the same run;
absolute times depend on the machine and are never asserted.

Data (COCO-5k-like): N images ~ N(0, I_d), R captions per image (caption i describes
image i // R), caption = its image + spread * N(0, I_d), float32. The default spread
holds sqrt(d) / sqrt(1 + spread^2) = 3.45 (6.48 at d=512), which gives t2i_recall@1
about 0.4 and i2t_recall@1 about 0.6 at N=5000, R=5 (higher at --quick's 1000 images).

Methods (``--methods``):

  ours       rc.evaluate_image_text(images, captions, caption_image, protocol="5k",
             n_resamples=0): the 12 metrics of rc.IMAGE_TEXT_METRICS, no intervals.
  ours-boot  the same with the default n_resamples=1000 (percentile bootstrap over
             images): what the intervals cost on top.
  dense      numpy, written here from the definitions (METRICS.md, "Cross-modal
             retrieval"): L2-normalise both sides (float32), the full N x M similarity
             matrix S = I @ C.T (float32), then exact pessimistic ranks by counting:
               i2t rank of image i = 1 + #{non-relevant captions c : S[i, c] >= b_i},
                 b_i = the best score among image i's own captions;
               t2i rank of caption c = 1 + #{images i != img(c) : S[i, c] >= S[img(c), c]};
             then recall@1/5/10 = mean(rank <= K), rsum = 100 * (sum of the six recalls),
             mean_recall = rsum / 6, medr = floor(median(rank - 1)) + 1, meanr =
             mean(rank). The counting runs over blocks of rows of S (bool temporaries of
             a few MB), so the dense method's working set is essentially S itself.
             Outside the timed call it checks its counting against the argsort
             definition (lexsort: score descending, non-relevant first on ties) on a
             sample of images and captions.

The driver compares every metric (max |ours - dense|; recalls, rsum, mean_recall must
agree within 1e-6, medr exactly, meanr within 1e-9) and the per-image / per-caption
ranks themselves (counts of ranks that differ; float32 GEMMs of different libraries
may round a near-tie differently, which would show here).

Worker protocol: ``bench_image_text.py --worker METHOD ...`` prints one line
``@@RESULT@@ {json}`` and writes its ranks to ``--ranks-out`` (.npz).

Memory: peak RSS is /proc/self/status VmHWM, reset (``echo 5 > /proc/self/clear_refs``)
right before the timed call (helpers imported from bench_engine.py), so it is the peak
of the timed call on top of the base RSS (imports + data + warm-up) measured just
before it. Where the reset is not possible the lifetime peak is reported and flagged.

    python benchmarks/bench_image_text.py --quick            # 1000 images, 5000 captions
    python benchmarks/bench_image_text.py                    # 5000 images, 25000 captions, d=512
    python benchmarks/bench_image_text.py --json benchmarks/results/image_text.json
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_engine import (  # noqa: E402 - the engine benchmark's memory, environment, table and worker helpers
    _loadavg,
    _mb,
    _ratio,
    _table,
    _thread_info,
    env_info,
    noisy_rows,
    peak_rss,
    proc_status,
    reset_peak,
    run_worker_process,
)

MARK = "@@RESULT@@ "
ALL_METHODS = ["ours", "ours-boot", "dense"]
METRICS = [
    "i2t_recall@1",
    "i2t_recall@5",
    "i2t_recall@10",
    "t2i_recall@1",
    "t2i_recall@5",
    "t2i_recall@10",
    "rsum",
    "mean_recall",
    "i2t_medr",
    "t2i_medr",
    "i2t_meanr",
    "t2i_meanr",
]
RSUM_K = (1, 5, 10)
TOL = {m: 1e-6 for m in METRICS if "recall" in m or m == "rsum"}  # recalls, rsum, mean_recall
TOL.update({"i2t_medr": 0.0, "t2i_medr": 0.0, "i2t_meanr": 1e-9, "t2i_meanr": 1e-9})
SEPARATION = 3.45  # sqrt(d) / sqrt(1 + spread^2), see auto_spread


# ----------------------------------------------------------------------------- data
def auto_spread(d: int) -> float:
    """Caption noise for d dims. A caption's cosine with its own image sits about
    sqrt(d) / sqrt(1 + spread^2) standard deviations above its cosine with another
    image; holding that at 3.45 gives t2i_recall@1 ~0.4 among 5000 images (measured:
    spread 6.0 -> 0.51, 6.5 -> 0.42, 7.0 -> 0.34 at d=512)."""
    s2 = d / SEPARATION**2 - 1.0
    return round(math.sqrt(s2), 3) if s2 > 0.0625 else 0.25


def make_data(n_images: int, ratio: int, d: int, spread: float, seed: int):
    """images (N x d), captions (N*ratio x d) float32 and caption_image (int64):
    caption i describes image i // ratio; generated in chunks."""
    import numpy as np

    rng = np.random.default_rng(seed)
    images = rng.standard_normal((n_images, d), dtype=np.float32)
    caption_image = np.repeat(np.arange(n_images, dtype=np.int64), ratio)
    return images, noisy_rows(rng, images, caption_image, spread), caption_image


# ----------------------------------------------------------------------------- dense baseline
def metrics_from_ranks(i2t_rank, t2i_rank) -> dict:
    """The 12 metrics from 1-based first-relevant ranks, straight from the definitions."""
    import numpy as np

    out = {}
    for k in RSUM_K:
        out[f"i2t_recall@{k}"] = float(np.mean(i2t_rank <= k))
        out[f"t2i_recall@{k}"] = float(np.mean(t2i_rank <= k))
    out["rsum"] = 100.0 * sum(out[f"{side}_recall@{k}"] for side in ("i2t", "t2i") for k in RSUM_K)
    out["mean_recall"] = out["rsum"] / 6.0
    out["i2t_medr"] = float(math.floor(np.median(i2t_rank - 1)) + 1)
    out["t2i_medr"] = float(math.floor(np.median(t2i_rank - 1)) + 1)
    out["i2t_meanr"] = float(np.mean(i2t_rank))
    out["t2i_meanr"] = float(np.mean(t2i_rank))
    return {m: out[m] for m in METRICS}


def dense_eval(images, captions, caption_image, row_block: int = 500):
    """Full similarity matrix and exact pessimistic ranks by counting (see the module
    docstring). Returns (i2t_rank, t2i_rank, S)."""
    import numpy as np

    In = images / np.linalg.norm(images, axis=1, keepdims=True)
    Cn = captions / np.linalg.norm(captions, axis=1, keepdims=True)
    S = In @ Cn.T  # (N, M) float32
    n, m = S.shape
    own = S[caption_image, np.arange(m)]  # each caption's score with its own image
    best = np.full(n, -np.inf, np.float32)
    np.maximum.at(best, caption_image, own)  # best own-caption score per image
    # own captions tied with the best one are relevant: they do not push the rank down
    n_own_at_best = np.bincount(
        caption_image, weights=own >= best[caption_image], minlength=n
    ).astype(np.int64)
    i2t_rank = np.empty(n, np.int64)
    t2i_ge = np.zeros(m, np.int64)
    for a in range(0, n, row_block):
        blk = S[a : a + row_block]
        sl = slice(a, a + row_block)
        i2t_rank[sl] = 1 + (blk >= best[sl, None]).sum(axis=1) - n_own_at_best[sl]
        t2i_ge += (blk >= own[None, :]).sum(axis=0)
    t2i_rank = t2i_ge  # the own image is counted once in t2i_ge (its own score): 1 + others
    return i2t_rank, t2i_rank, S


def argsort_check(S, caption_image, i2t_rank, t2i_rank, n_sample: int, seed: int) -> dict:
    """The argsort definition on a sample: order by score descending with non-relevant
    items first among equal scores (pessimistic); rank = 1 + position of the first
    relevant item. Returns mismatch counts (must be 0)."""
    import numpy as np

    rng = np.random.default_rng(seed + 7)
    n, m = S.shape
    bad_i = bad_t = 0
    imgs = rng.choice(n, size=min(n_sample, n), replace=False)
    for i in imgs:
        row = S[i]
        rel = caption_image == i
        order = np.lexsort((rel, -row))  # primary: -score, secondary: relevant last
        r = int(np.flatnonzero(rel[order])[0]) + 1
        bad_i += r != int(i2t_rank[i])
    caps = rng.choice(m, size=min(n_sample, m), replace=False)
    for c in caps:
        col = S[:, c]
        rel = np.arange(n) == caption_image[c]
        order = np.lexsort((rel, -col))
        r = int(np.flatnonzero(rel[order])[0]) + 1
        bad_t += r != int(t2i_rank[c])
    return {
        "images_checked": int(imgs.size),
        "captions_checked": int(caps.size),
        "i2t_mismatches": int(bad_i),
        "t2i_mismatches": int(bad_t),
    }


# ----------------------------------------------------------------------------- workers
def _setup_ours(args, images, captions, caption_image):
    import retrieval_checks as rc

    n_resamples = 0 if args.worker == "ours" else 1000
    kw = {"max_memory": args.max_memory} if args.max_memory else {}
    wi, wc, wci = make_data(60, args.ratio, 16, 1.0, 1)  # warm-up: numba kernels, torch
    rc.evaluate_image_text(
        wi, wc, wci, protocol="5k", n_resamples=min(n_resamples, 100), progress=False, **kw
    )

    def call():
        return rc.evaluate_image_text(
            images,
            captions,
            caption_image,
            protocol="5k",
            n_resamples=n_resamples,
            progress=False,
            **kw,
        )

    def extract(res):
        vals = {k: float(res[k]) for k in METRICS}
        extra = {
            "config": {k: v for k, v in res.config.items() if k != "folds"},
            "n_resamples": n_resamples,
            "intervals": {k: list(v) for k, v in res.intervals.items()},
        }
        return vals, res.i2t_ranks[0], res.t2i_ranks[0], extra

    return call, extract


def _setup_dense(args, images, captions, caption_image):
    wi, wc, wci = make_data(60, args.ratio, 16, 1.0, 1)
    dense_eval(wi, wc, wci)

    def call():
        i2t, t2i, S = dense_eval(images, captions, caption_image)
        return metrics_from_ranks(i2t, t2i), i2t, t2i, S

    def extract(out):
        vals, i2t, t2i, S = out
        check = argsort_check(S, caption_image, i2t, t2i, args.check_sample, args.seed)
        return vals, i2t, t2i, {"argsort_check": check, "S_bytes": int(S.nbytes)}

    return call, extract


def run_worker(args) -> dict:
    import numpy as np

    rec = {
        "method": args.worker,
        "n_images": args.n_images,
        "ratio": args.ratio,
        "d": args.d,
        "spread": args.spread,
        "seed": args.seed,
    }
    t0 = time.perf_counter()
    images, captions, caption_image = make_data(
        args.n_images, args.ratio, args.d, args.spread, args.seed
    )
    rec["datagen_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    setup = _setup_dense if args.worker == "dense" else _setup_ours
    call, extract = setup(args, images, captions, caption_image)
    if args.threads and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(args.threads)
    rec["warmup_s"] = time.perf_counter() - t0
    rec.update(_thread_info(only_loaded=True))

    gc.collect()
    rec["base_rss"] = proc_status().get("VmRSS")
    reset_ok = reset_peak()
    rec["peak_is_reset"] = reset_ok
    times, out = [], None
    try:
        for _ in range(args.repeat):
            out = None
            t0 = time.perf_counter()
            out = call()
            times.append(time.perf_counter() - t0)
    except (MemoryError, RuntimeError) as exc:
        rec.update(
            status="error",
            error=f"{type(exc).__name__}: {str(exc)[:300]}",
            peak_rss=peak_rss(reset_ok),
        )
        return rec
    rec["peak_rss"] = peak_rss(reset_ok)
    rec["times_s"] = times
    rec["wall_s"] = min(times)
    vals, i2t, t2i, extra = extract(out)
    rec["metrics"] = vals
    rec.update(extra)
    if args.ranks_out:
        np.savez(args.ranks_out, i2t=np.asarray(i2t, np.int64), t2i=np.asarray(t2i, np.int64))
    rec["status"] = "ok"
    return rec


# ----------------------------------------------------------------------------- driver
def launch(method, args, ranks_out) -> dict:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        method,
        "--n-images",
        str(args.n_images),
        "--ratio",
        str(args.ratio),
        "--d",
        str(args.d),
        "--spread",
        repr(args.spread),
        "--seed",
        str(args.seed),
        "--repeat",
        str(args.repeat),
        "--check-sample",
        str(args.check_sample),
        "--ranks-out",
        ranks_out,
    ]
    if args.max_memory:
        cmd += ["--max-memory", args.max_memory]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    return run_worker_process(
        cmd, threads=args.threads, timeout=args.timeout, identity={"method": method}
    )


def compare_ranks(ranks: dict) -> list[dict]:
    """Per-item rank agreement of every method with dense."""
    import numpy as np

    out = []
    if "dense" not in ranks:
        return out
    ref = ranks["dense"]
    for m, r in ranks.items():
        if m == "dense":
            continue
        row = {"method": m}
        for side in ("i2t", "t2i"):
            a, b = r[side], ref[side]
            if a.shape != b.shape:
                row[side] = {"error": f"shape {a.shape} vs {b.shape}"}
                continue
            diff = np.flatnonzero(a != b)
            row[side] = {
                "n": int(a.size),
                "mismatches": int(diff.size),
                "max_abs_diff": int(np.abs(a - b).max()) if a.size else 0,
                "first": [[int(i), int(a[i]), int(b[i])] for i in diff[:3]],
            }
        out.append(row)
    return out


def report(args, recs, rank_cmp) -> tuple[str, bool]:
    by = {r["method"]: r for r in recs}
    de = by.get("dense") if by.get("dense", {}).get("status") == "ok" else None
    n_cap = args.n_images * args.ratio
    out = [
        f"\n=== {args.n_images} images x {n_cap} captions ({args.ratio} per image), d={args.d}, "
        f"spread={args.spread}, protocol 5k (all images) ==="
    ]
    rows = []
    de_extra = de["peak_rss"] - de["base_rss"] if de else None
    for r in recs:
        if r["status"] != "ok":
            rows.append([r["method"], r["status"]] + ["-"] * 7)
            continue
        extra = r["peak_rss"] - r["base_rss"]
        rows.append(
            [
                r["method"],
                "ok",
                f"{r['wall_s']:.3f}",
                _ratio(r["wall_s"], de and de["wall_s"]),
                _mb(r["base_rss"]),
                _mb(r["peak_rss"]),
                _mb(extra),
                _ratio(r["peak_rss"], de and de["peak_rss"]),
                _ratio(extra, de_extra),
            ]
        )
    out.append(
        _table(
            [
                "method",
                "status",
                "wall_s",
                "time/dense",
                "base_MB",
                "peak_MB",
                "+MB",
                "peak/dense",
                "+MB/dense",
            ],
            rows,
        )
    )
    for r in recs:
        if r["status"] != "ok":
            out.append(f"  {r['method']}: {r['status']}: {r.get('error', '')}")
            continue
        bits = [f"warm-up {r['warmup_s']:.2f}s", f"process {r['process_s']:.1f}s"]
        if r.get("config"):
            bits.insert(0, f"backend={r['config'].get('backend')}")
        if r.get("S_bytes"):
            bits.insert(0, f"S = {r['S_bytes'] / 2**20:.0f} MiB float32")
        if len(r.get("times_s", [])) > 1:
            bits.append("times " + " ".join(f"{t:.3f}" for t in r["times_s"]) + " (min used)")
        if not r.get("peak_is_reset", True):
            bits.append("PEAK IS LIFETIME (VmHWM reset unavailable)")
        t = [f"{k.split('_')[0]}={r[k]}" for k in ("torch_threads", "numba_threads") if k in r]
        if t:
            bits.append("threads " + " ".join(t))
        out.append(f"  {r['method']}: " + "; ".join(bits))

    ok = True
    ours = next((by[m] for m in ("ours", "ours-boot") if by.get(m, {}).get("status") == "ok"), None)
    boot = by.get("ours-boot") if by.get("ours-boot", {}).get("status") == "ok" else None
    if ours or de:
        cols = [m for m in ("ours", "ours-boot", "dense") if by.get(m, {}).get("status") == "ok"]
        hdr = ["metric"] + cols
        if ours and de:
            hdr += ["|ours-dense|", "tol", "ok"]
        if boot:
            hdr += ["95% interval (ours-boot)"]
        mrows = []
        for k in METRICS:
            row = [k] + [f"{by[m]['metrics'][k]:.6f}" for m in cols]
            if ours and de:
                diff = abs(ours["metrics"][k] - de["metrics"][k])
                if boot:
                    diff = max(diff, abs(boot["metrics"][k] - de["metrics"][k]))
                good = diff <= TOL[k]
                ok &= good
                row += [
                    f"{diff:.2e}",
                    "exact" if TOL[k] == 0 else f"{TOL[k]:.0e}",
                    "yes" if good else "NO",
                ]
            if boot:
                lo, hi = boot["intervals"].get(k, (float("nan"), float("nan")))
                row += [f"[{lo:.4f}, {hi:.4f}]"]
            mrows.append(row)
        out.append("")
        out.append(_table(hdr, mrows))
    for c in rank_cmp:
        parts = []
        for side in ("i2t", "t2i"):
            s = c[side]
            if "error" in s:
                parts.append(f"{side}: {s['error']}")
                ok = False
                continue
            ok &= s["mismatches"] == 0
            parts.append(
                f"{side} {s['mismatches']}/{s['n']} differ (max |diff| {s['max_abs_diff']})"
                + (f", e.g. [item, ours, dense] {s['first']}" if s["mismatches"] else "")
            )
        out.append(f"  per-item ranks, {c['method']} vs dense: " + "; ".join(parts))
    if de and de.get("argsort_check"):
        a = de["argsort_check"]
        ok &= a["i2t_mismatches"] == 0 and a["t2i_mismatches"] == 0
        out.append(
            f"  dense counting vs argsort definition (pessimistic lexsort) on {a['images_checked']} images / "
            f"{a['captions_checked']} captions: {a['i2t_mismatches']} / {a['t2i_mismatches']} mismatches"
        )
    if any(r["status"] != "ok" for r in recs):
        ok = False
    if ours and de:
        out.append("  agreement: " + ("ALL OK" if ok else "FAILED (see above)"))
    return "\n".join(out), ok


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--n-images", type=int, default=5000, help="number of images (default 5000)")
    p.add_argument("--ratio", type=int, default=5, help="captions per image (default 5)")
    p.add_argument("--d", type=int, default=512, help="embedding dimension (default 512)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1000 images")
    p.add_argument(
        "--methods",
        nargs="+",
        default=ALL_METHODS,
        choices=ALL_METHODS,
        help=f"default: {' '.join(ALL_METHODS)}",
    )
    p.add_argument(
        "--spread",
        type=float,
        default=None,
        help="caption noise; default sqrt(d / 3.45^2 - 1) (6.48 at d=512)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--max-memory",
        default=None,
        help="max_memory for rc.evaluate_image_text (default: its own)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="timed calls per worker, the minimum is used (default 3: single calls of ~2 s on a shared "
        "machine vary by more than the bootstrap costs)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="set OMP/MKL/OpenBLAS/numba/torch threads in every worker (default: libraries' own)",
    )
    p.add_argument(
        "--check-sample",
        type=int,
        default=64,
        help="images and captions whose dense ranks are re-checked by argsort (untimed; default 64)",
    )
    p.add_argument("--timeout", type=float, default=1800, help="seconds per worker")
    p.add_argument("--json", metavar="PATH", help="also write all records as JSON")
    p.add_argument("--worker", choices=ALL_METHODS, help=argparse.SUPPRESS)
    p.add_argument("--ranks-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.n_images = 1000
    if args.n_images < 1 or args.ratio < 1 or args.d < 1 or args.repeat < 1:
        p.error("--n-images, --ratio, --d and --repeat must be >= 1")
    if args.spread is None:
        args.spread = auto_spread(args.d)
    return args


def main(argv=None):
    import numpy as np

    args = parse_args(argv)
    if args.worker:
        rec = run_worker(args)
        print(MARK + json.dumps(rec), flush=True)
        return 0

    info = env_info()
    print(
        "retrieval-checks image-text benchmark (ratios are what to read; absolute times are this machine's)"
    )
    print(
        f"CPU: {info.get('cpu_model')}  cores visible: {info.get('affinity', info['cpu_count'])}  "
        f"MemAvailable: {info['mem_available_gb']} GiB"
    )
    print(
        "versions: "
        + "  ".join(
            f"{k}={info[k]}" for k in ("python", "numpy", "torch", "numba", "retrieval_checks")
        )
    )
    print(
        "ours: rc.evaluate_image_text(images, captions, caption_image, protocol='5k', n_resamples=0 | 1000 "
        f"(ours-boot)){', max_memory=' + args.max_memory if args.max_memory else ''}"
    )
    print(
        "dense: numpy, full N x M float32 cosine matrix, exact pessimistic ranks by counting, metrics from the "
        "definitions"
    )
    print(
        f"each method: own subprocess, data regenerated from seed {args.seed}; peak RSS = VmHWM reset before the "
        f"timed call; base = RSS of imports+data+warm-up; repeat={args.repeat} (fastest counts)"
    )
    load0 = _loadavg()
    print(
        f"load average at start (1/5/15 min): {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}"
        + ("  <- other work is running: timings will be noisy" if load0[0] > 0.5 else "")
    )

    recs, ranks = [], {}
    with tempfile.TemporaryDirectory(prefix="bench_image_text_") as tmp:
        for m in dict.fromkeys(args.methods):
            path = os.path.join(tmp, f"{m}.npz")
            print(
                f"  {m:9s} {args.n_images} images x {args.n_images * args.ratio} captions ...",
                end="",
                flush=True,
                file=sys.stderr,
            )
            rec = launch(m, args, path)
            print(
                f" {rec['status']} {rec.get('wall_s', float('nan')):.3f}s",
                file=sys.stderr,
                flush=True,
            )
            rec["loadavg_after"] = _loadavg()
            recs.append(rec)
            if rec["status"] == "ok" and os.path.exists(path):
                with np.load(path) as z:
                    ranks[m] = {"i2t": z["i2t"], "t2i": z["t2i"]}
    ref = next((r for r in recs if r.get("status") == "ok"), None)
    if ref:
        mm = ref["metrics"]
        print(
            f"data ({ref['method']}): i2t_recall@1/5/10 = {mm['i2t_recall@1']:.3f} / {mm['i2t_recall@5']:.3f} / "
            f"{mm['i2t_recall@10']:.3f}; t2i_recall@1/5/10 = {mm['t2i_recall@1']:.3f} / {mm['t2i_recall@5']:.3f} / "
            f"{mm['t2i_recall@10']:.3f}; rsum = {mm['rsum']:.1f}"
        )
    rank_cmp = compare_ranks(ranks)
    text, ok = report(args, recs, rank_cmp)
    print(text, flush=True)

    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "env": info,
                    "args": {
                        k: v for k, v in vars(args).items() if k not in ("worker", "ranks_out")
                    },
                    "metrics": METRICS,
                    "records": recs,
                    "rank_comparison": rank_cmp,
                    "agreement_ok": ok,
                },
                fh,
                indent=2,
            )
        print(f"\nwrote {args.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
