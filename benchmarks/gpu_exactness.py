#!/usr/bin/env python
"""Every CUDA path against the CPU path, bit for bit, on data built to break them.

For each case the CPU path (``device="cpu"``: torch's CPU products and the numba
kernels) is the reference, and each CUDA variant must give the same result, compared
exactly: every aggregate, every per-query value, tie ranges, thresholds, pair counts,
grouped-recall statistics (``EvaluationResult.to_dict(per_query=True)`` without its
``config``), and for image-text every value, fold and first-relevant rank.

CUDA variants: the torch path (``RC_TRITON=0``), the same with TF32 switched on by the
user (``torch.backends.cuda.matmul.allow_tf32 = True``: the engine must not inherit
it), and the fused Triton kernels (``RC_TRITON=1``) unscreened, with bf16 screening and
with TF32 screening. A kernel that falls back (its self-check refused it, a launch
failed) is reported as ``fell back``, never as equal.

Cases (the issue's list): tie-heavy integer rows (cosine, dot, neg_l2), +-1 and {0, 1}
codes (as floats and as ``similarity="hamming"``), near-tie floats, graded explicit
relevance (nDCG), ids with self items (leave-one-out and a gallery holding the
queries), image-text under every protocol (5k, 1k, 5fold1k), grouped recall with
groups split across blocks.

    python benchmarks/gpu_exactness.py              # on a GPU: exit 1 if any case differs
    python benchmarks/gpu_exactness.py --quick      # smaller sizes
    python benchmarks/gpu_exactness.py --json out.json

Without CUDA it exits 0 after saying so (the test suite runs it only on a GPU).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_gpu import environ  # noqa: E402

RANK = [
    "map",
    "map@R",
    "r_precision",
    "hit_rate@1",
    "hit_rate@5",
    "recall@1",
    "recall@10",
    "precision@3",
    "mrr",
    "meanr",
    "map_cut@5",
]
PAIR = [
    "recall_at_precision@0.9",
    "recall_at_precision@0.5",
    "precision_at_recall@0.5",
    "pair_precision@t=0.5",
    "pair_recall@t=0.5",
    "pair_f1@t=0.2",
]
GRADED = ["ndcg", "ndcg@10", "ndcg_exp@10", "map", "hit_rate@5", "mrr"]
GROUPED = ["grouped_recall@1", "grouped_recall@5"]
CUDA_VARIANTS = {
    "cuda-torch": dict(RC_TRITON="0", RC_TRITON_SCREEN="0"),
    "cuda-torch+tf32": dict(RC_TRITON="0", RC_TRITON_SCREEN="0", _tf32=True),
    "cuda-fused": dict(RC_TRITON="1", RC_TRITON_SCREEN="0"),
    "cuda-fused-bf16": dict(RC_TRITON="1", RC_TRITON_SCREEN="bf16"),
    "cuda-fused-tf32": dict(RC_TRITON="1", RC_TRITON_SCREEN="tf32"),
}


@contextlib.contextmanager
def _variant(torch, spec: dict):
    """A variant's switches (``os.environ``, by bench_gpu's ``environ``) and TF32 matmuls
    (``_tf32``), restored after."""
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = bool(spec.get("_tf32", False))
    try:
        with environ(**{k: v for k, v in spec.items() if not k.startswith("_")}):
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32


def _canon(x):
    """JSON-like value with NaN as a marker, so == compares bit for bit (floats exactly).
    ``config`` (the backend's name, the budget) and ``provenance`` (which counters ran)
    differ between the CPU and a CUDA variant by design: left out of the comparison, and
    the counters reported beside it (:func:`_counters`)."""
    if isinstance(x, dict):
        return {k: _canon(v) for k, v in x.items() if k not in ("config", "provenance")}
    if isinstance(x, (list, tuple)):
        return [_canon(v) for v in x]
    if isinstance(x, np.ndarray):
        return _canon(x.tolist())
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return "nan" if math.isnan(x) else x
    if isinstance(x, np.integer):
        return int(x)
    return x


def _summary(res) -> dict:
    if hasattr(res, "i2t_ranks"):  # ImageTextResult
        return _canon(
            {
                "values": dict(res),
                "per_fold": res.per_fold,
                "i2t": [np.asarray(r) for r in res.i2t_ranks],
                "t2i": [np.asarray(r) for r in res.t2i_ranks],
                "ties": {k: dict(v) for k, v in res.tie_values.items()},
                "intervals": {k: list(v) for k, v in res.intervals.items()},
            }
        )
    return _canon(res.to_dict(per_query=True))


def _counters(res) -> str:
    """What computed the result (its provenance): the counters of the main pass's blocks,
    e.g. ``triton`` or ``torch``, and grouped recall's paths, e.g. ``triton-grouped``: a
    fused variant that the torch path or the host served says so in the table (the
    comparison alone cannot tell)."""
    prov = getattr(res, "provenance", None)
    if prov is None:
        return ""
    return "+".join(sorted(prov.blocks) + sorted(getattr(prov, "grouped", {})))


def _first_difference(a, b, path="") -> str:
    if type(a) is not type(b):
        return f"{path}: {a!r} vs {b!r}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{path}.{k}: missing on one side"
            d = _first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return ""
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return ""
    return "" if a == b else f"{path}: {a!r} vs {b!r}"


def _cases(rng, quick: bool):
    """(name, kind, callable(rc, device) -> result)."""
    n = 1500 if quick else 4000
    d = 48

    def tie_heavy():
        X = rng.integers(-2, 3, size=(n, d)).astype(np.float32)
        X[1::4] = X[0::4][: X[1::4].shape[0]]  # exact duplicates, often of other labels
        return X, rng.integers(0, n // 8, n)

    Xi, yi = tie_heavy()
    B = rng.integers(0, 2, size=(n, 96)).astype(np.float32)  # {0, 1} codes
    S = np.where(B > 0, 1.0, -1.0).astype(np.float32)  # +-1 codes
    yb = rng.integers(0, n // 10, n)
    base = rng.standard_normal((n // 4, d)).astype(np.float32)
    Xn = np.repeat(base, 4, axis=0) + rng.standard_normal((n, d)).astype(np.float32) * 1e-6
    yn = rng.integers(0, n // 6, n)
    Xf = rng.standard_normal((n, d)).astype(np.float32)
    yf = rng.integers(0, n // 10, n)
    graded = {
        q: {int(g): int(rng.integers(1, 5)) for g in rng.choice(n, 7, replace=False)}
        for q in range(0, n, 3)
    }
    ids = np.arange(n)
    cases = []
    for sim in ("cosine", "dot", "neg_l2"):
        cases.append(
            (
                f"tie-heavy integers, {sim}, labels, rank + pair",
                lambda rc, dev, sim=sim: rc.evaluate(
                    Xi, query_labels=yi, metrics=RANK + PAIR, similarity=sim, device=dev
                ),
            )
        )
    cases += [
        (
            "random floats, cosine, rank + pair",
            lambda rc, dev: rc.evaluate(Xf, query_labels=yf, metrics=RANK + PAIR, device=dev),
        ),
        (
            "tie-heavy integers, cosine, ties=pessimistic",
            lambda rc, dev: rc.evaluate(
                Xi, query_labels=yi, metrics=RANK, ties="pessimistic", device=dev
            ),
        ),
        (
            "{0,1} codes as floats, dot, rank + pair",
            lambda rc, dev: rc.evaluate(
                B, query_labels=yb, metrics=RANK + PAIR, similarity="dot", device=dev
            ),
        ),
        (
            "+-1 codes as floats, cosine",
            lambda rc, dev: rc.evaluate(S, query_labels=yb, metrics=RANK + PAIR, device=dev),
        ),
        (
            "{0,1} codes, hamming, rank + pair",
            lambda rc, dev: rc.evaluate(
                B.astype(bool),
                query_labels=yb,
                metrics=RANK + PAIR,
                similarity="hamming",
                device=dev,
            ),
        ),
        (
            "+-1 codes, hamming, gallery with ids",
            lambda rc, dev: rc.evaluate(
                S[: n // 3].astype(np.int8),
                S.astype(np.int8),
                query_labels=yb[: n // 3],
                gallery_labels=yb,
                query_ids=ids[: n // 3],
                gallery_ids=ids,
                metrics=RANK,
                similarity="hamming",
                device=dev,
            ),
        ),
        (
            "near-tie floats (1e-6 apart), cosine, rank + pair",
            lambda rc, dev: rc.evaluate(Xn, query_labels=yn, metrics=RANK + PAIR, device=dev),
        ),
        (
            "near-tie floats, neg_l2",
            lambda rc, dev: rc.evaluate(
                Xn, query_labels=yn, metrics=RANK, similarity="neg_l2", device=dev
            ),
        ),
        (
            "graded explicit relevance, cosine, gallery = queries with ids",
            lambda rc, dev: rc.evaluate(
                Xf[::3],
                Xf,
                relevance={q // 3: rel for q, rel in graded.items()},
                query_ids=ids[::3],
                gallery_ids=ids,
                metrics=GRADED,
                empty_queries="skip",
                device=dev,
            ),
        ),
        (
            "ids with self items: gallery holds the queries twice",
            lambda rc, dev: rc.evaluate(
                Xi[: n // 2],
                np.concatenate([Xi, Xi[: n // 4]]),
                query_labels=yi[: n // 2],
                gallery_labels=np.concatenate([yi, yi[: n // 4]]),
                query_ids=ids[: n // 2],
                gallery_ids=np.concatenate([ids, ids[: n // 4]]),
                metrics=RANK + PAIR,
                device=dev,
            ),
        ),
        (
            "grouped recall, groups split (labels of 7 items, group_size 5)",
            lambda rc, dev: rc.evaluate(
                Xf[: (n // 7) * 7],
                query_labels=np.repeat(np.arange(n // 7), 7),
                metrics=GROUPED,
                group_size=5,
                device=dev,
            ),
        ),
        (
            "grouped recall, tie-heavy integers, neg_l2",
            lambda rc, dev: rc.evaluate(
                Xi, query_labels=yi, metrics=GROUPED, group_size=4, similarity="neg_l2", device=dev
            ),
        ),
    ]
    n_img = 5000
    imgs = rng.integers(-2, 3, size=(n_img, 32)).astype(np.float32)  # tie-heavy
    caps = np.repeat(imgs, 5, axis=0) + rng.integers(-1, 2, size=(5 * n_img, 32)).astype(np.float32)
    cap_img = np.repeat(np.arange(n_img), 5)
    for protocol in ("5k", "1k", "5fold1k"):
        m = 1000 if protocol == "1k" else n_img  # 1k scores exactly 1000 images (refused else)
        cases.append(  # (not n: the cases above read n when they run)
            (
                f"image-text, tie-heavy integers, protocol {protocol}",
                lambda rc, dev, p=protocol, m=m: rc.evaluate_image_text(
                    imgs[:m],
                    caps[: 5 * m],
                    cap_img[: 5 * m],
                    protocol=p,
                    device=dev,
                    n_resamples=200,
                ),
            )
        )
    return cases


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--json", help="write the table as JSON here")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--variants",
        default=",".join(CUDA_VARIANTS),
        help="comma-separated CUDA variants to run (default: all): " + ", ".join(CUDA_VARIANTS),
    )
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("gpu_exactness: torch is not installed; nothing to check")
        return 0
    if not torch.cuda.is_available():
        print("gpu_exactness: no CUDA device; nothing to check")
        return 0
    import retrieval_checks as rc

    wanted = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in wanted if v not in CUDA_VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {unknown}; choose from {list(CUDA_VARIANTS)}")
    rng = np.random.default_rng(args.seed)
    rows, bad = [], 0
    for name, fn in _cases(rng, args.quick):
        t = time.perf_counter()
        want = _summary(fn(rc, "cpu"))
        row = {"case": name, "cpu_s": round(time.perf_counter() - t, 3)}
        for label in wanted:
            spec = CUDA_VARIANTS[label]
            with _variant(torch, spec), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t = time.perf_counter()
                try:
                    result = fn(rc, "cuda")
                    got, ran = _summary(result), _counters(result)
                except Exception as e:  # reported, and counted as a difference
                    row[label] = f"ERROR {type(e).__name__}: {str(e)[:300]}"
                    bad += 1
                    continue
                torch.cuda.synchronize()
                secs = time.perf_counter() - t
            fell = [str(w.message)[:200] for w in caught if "Triton" in str(w.message)]
            diff = _first_difference(want, got)
            if diff:
                bad += 1
                row[label] = f"DIFFERS {diff[:300]}"
            elif fell and spec["RC_TRITON"] == "1":
                bad += 1
                row[label] = f"fell back: {fell[0]}"
            else:
                row[label] = f"same ({secs:.2f} s{', ' + ran if ran else ''})"
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    print(f"gpu_exactness: {len(rows)} cases, {bad} differences or failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
