#!/usr/bin/env python
"""Benchmark ``evaluate_run`` against ranx and pytrec-eval-terrier on the same run.

Data: ``--queries`` queries (default 10,000), each with ``--docs`` retrieved documents
(default 1,000) of random float scores, and graded qrels: ``--judged`` judged documents
per query (default 30; grades 0-3, about half of them retrieved, the rest missing from
the run). Metrics every library computes the same way: ``map``, ``ndcg@10``,
``precision@10``, ``recall@100`` and ``mrr`` (ranx: ``map``, ``ndcg@10``,
``precision@10``, ``recall@100``, ``mrr``; pytrec_eval: ``map``, ``ndcg_cut_10``,
``P_10``, ``recall_100``, ``recip_rank``).

Each method is timed from the same ``{qid: {docid: score}}`` dicts to its means, in this
process: the one input form all three take (pytrec_eval takes only dicts; ranx also
reads TREC files and DataFrames; evaluate_run also TREC files and an ANN search's
``(indices, scores)`` arrays). Numba's compiles (ranx's, and evaluate_run's kernels in
``engine/_runs_numba``, cached on disk) happen in a warm-up call, reported on its own
line. After the rounds, one more call of ours is split into its phases (reading and
conversion of the dicts, sorting, per-query ranks and tie groups, per-query measures,
aggregation, result building). Rounds interleave the methods (ours, ranx,
pytrec_eval, ours, ...) against a drifting load; the report gives the median and range
of each method's seconds and of the per-round ratios to ours, and checks that the three
agree to 1e-9 (pytrec_eval and ranx already agree with each other).

Run: ``python benchmarks/bench_runs.py [--queries 10000 --docs 1000 --rounds 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

OURS = ["map", "ndcg@10", "precision@10", "recall@100", "mrr"]
RANX = {"map": "map", "ndcg@10": "ndcg@10", "precision@10": "precision@10"}
RANX.update({"recall@100": "recall@100", "mrr": "mrr"})
TREC = {"map": "map", "ndcg@10": "ndcg_cut_10", "precision@10": "P_10"}
TREC.update({"recall@100": "recall_100", "mrr": "recip_rank"})


def make(n_q: int, n_docs: int, n_judged: int, seed: int):
    """(run, qrels) dicts: random scores (float64, distinct with probability one) over a
    pool of documents; each query judges ``n_judged``, half of them retrieved."""
    rng = np.random.default_rng(seed)
    pool = max(10 * n_docs, 100_000)
    run, qrels = {}, {}
    for q in range(n_q):
        docs = rng.choice(pool, n_docs + n_judged // 2, replace=False)
        scores = rng.standard_normal(n_docs)
        qid = f"q{q}"
        run[qid] = {f"d{d}": float(s) for d, s in zip(docs[:n_docs], scores)}
        judged = np.concatenate([docs[: n_judged - n_judged // 2], docs[n_docs:]])
        grades = rng.integers(0, 4, judged.size)
        grades[0] = max(grades[0], 1)  # every query has a relevant document
        qrels[qid] = {f"d{d}": int(g) for d, g in zip(judged, grades)}
    return run, qrels


def ours(run, qrels):
    import retrieval_checks as rc

    res = rc.evaluate_run(run, qrels, OURS)
    return {m: float(res[m]) for m in OURS}


def ranx_eval(run, qrels):
    from ranx import Qrels, Run, evaluate

    out = evaluate(Qrels(qrels), Run(run), list(RANX.values()))
    return {m: float(out[RANX[m]]) for m in OURS}


def trec_eval(run, qrels):
    import pytrec_eval

    ev = pytrec_eval.RelevanceEvaluator(qrels, set(TREC.values()))
    per_q = ev.evaluate(run)
    return {m: statistics.fmean(v[TREC[m]] for v in per_q.values()) for m in OURS}


METHODS = {"ours": ours, "ranx": ranx_eval, "pytrec_eval": trec_eval}

# evaluate_run's phases, each the time spent in its functions less the time of the
# phases they call (a stack of timers): reading and converting the dicts to flat arrays,
# sorting each query's documents, the per-query values (binary measures: tie groups and
# ranks; graded: DCG), and the aggregation and result building (the rest)
PHASES = {
    "_read": "reading/conversion of the dicts",
    "_rank_run": "sorting",
    "_binary_items": "per-query ranks and tie groups",
    "binary_policy_values": "per-query binary measures",
    "_graded_values": "per-query graded measures (DCG)",
    "aggregate": "aggregation (means, tie values)",
}


def phases(run, qrels) -> dict[str, float]:
    """Seconds of each phase of one ``evaluate_run`` call; "result building" the rest."""
    from retrieval_checks.engine import _runs

    spent = dict.fromkeys(PHASES, 0.0)
    stack: list[list] = []  # [name, start, time of the phases it called]

    def timed(name, fn):
        def inner(*a, **kw):
            stack.append([name, time.perf_counter(), 0.0])
            try:
                return fn(*a, **kw)
            finally:
                _, t0, inside = stack.pop()
                took = time.perf_counter() - t0
                spent[name] += took - inside
                if stack:
                    stack[-1][2] += took

        return inner

    saved = {name: getattr(_runs, name) for name in PHASES}
    try:
        for name, fn in saved.items():
            setattr(_runs, name, timed(name, fn))
        t0 = time.perf_counter()
        _runs.evaluate_run(run, qrels, OURS)
        total = time.perf_counter() - t0
    finally:
        for name, fn in saved.items():
            setattr(_runs, name, fn)
    out = {PHASES[name]: spent[name] for name in PHASES}
    out["result building (the rest)"] = total - sum(spent.values())
    out["total"] = total
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--docs", type=int, default=1_000)
    ap.add_argument("--judged", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    run, qrels = make(args.queries, args.docs, args.judged, args.seed)
    small = make(50, 20, 6, 1)
    for name, fn in METHODS.items():  # imports, numba compiles (ranx; ours on first use)
        t0 = time.perf_counter()
        fn(*small)
        print(f"warm-up {name}: {time.perf_counter() - t0:.2f} s (imports, numba compile)")
    times = {m: [] for m in METHODS}
    values = {}
    loads = []
    for _ in range(args.rounds):
        loads.append(os.getloadavg()[0])
        for name, fn in METHODS.items():
            t0 = time.perf_counter()
            values[name] = fn(run, qrels)
            times[name].append(time.perf_counter() - t0)
    print(
        f"evaluate_run benchmark: {args.queries} queries x {args.docs} documents, graded qrels "
        f"({args.judged} judged per query), metrics {', '.join(OURS)}; {args.rounds} interleaved "
        f"rounds on {os.cpu_count()} CPUs, load average (1 min) before each: "
        + " ".join(f"{x:.2f}" for x in loads)
    )
    print(f"{'method':12s} {'median s':>9s} {'range s':>15s} {'vs ours (per round)':>26s}")
    for name in METHODS:
        t = times[name]
        ratio = [a / b for a, b in zip(t, times["ours"])]
        spread = f"{statistics.median(ratio):.2f}x ({min(ratio):.2f}-{max(ratio):.2f})"
        print(
            f"{name:12s} {statistics.median(t):9.3f} {min(t):7.3f}-{max(t):7.3f} "
            f"{'-' if name == 'ours' else spread:>26s}"
        )
    worst = max(
        abs(values["ours"][m] - values[o][m]) for o in ("ranx", "pytrec_eval") for m in OURS
    )
    split = phases(run, qrels)
    print(
        "ours, by phase (one more call): " + "; ".join(f"{k} {v:.3f} s" for k, v in split.items())
    )
    print(f"max |ours - ranx, pytrec_eval| over {', '.join(OURS)}: {worst:.1e}")
    return 0 if worst < 1e-9 else 1


if __name__ == "__main__":
    raise SystemExit(main())
