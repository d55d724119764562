"""Sharded evaluation (``evaluate(..., process_group=g)``) equals single-process
``evaluate`` on the concatenated shards, bit for bit.

Ranks are real processes (``torch.multiprocessing``) on Gloo with a ``file://``
rendezvous in ``tmp_path``. Each world size (1, 2, 3) runs every scenario: world
size 1 in the test's own process (a group of one needs no other), 3 and 2 in one launch
of three ranks (world size 2 on the subgroup of ranks 0 and 1, after the world-size-3
scenarios); the shards are uneven (an empty one at world size 3), the gallery's shard
boundaries differ from the queries', duplicate vectors straddle the boundaries, the
data are tie-heavy integers and Gaussian floats, query and gallery ids overlap, and
relevance comes from labels and explicit (binary and graded) rows. Every metric
value, per-query array, tie value, first relevant rank, pair count, threshold and
PR-curve point is compared with ``==`` / ``array_equal``.

Cost: about 60 CPU-s for the file at a load average of 12-15 (the tests but the
benchmark's: 59 CPU-s, pytest's own start included, against 70 with two launches of
five ranks): three spawned ranks, each an interpreter, a torch import and the kernels'
load (~6 CPU-s), and bench_distributed's two; add a scenario to the launch, not a
launch.
"""

from __future__ import annotations

import math
import os
import pickle
import sys
import traceback

import numpy as np
import pytest

import retrieval_checks as rc

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

# one xdist worker runs this file and the Lightning DDP tests, one after the other: the
# module-scoped launches (`runs`) happen once, and never two groups of ranks at a time
pytestmark = pytest.mark.xdist_group("processes")
if not dist.is_available():  # pragma: no cover
    pytest.skip("torch.distributed is not available", allow_module_level=True)

QUERY_METRICS = [
    "map",
    "map@R",
    "r_precision",
    "mrr",
    "medr",
    "meanr",
    "hit_rate@1",
    "recall@5",
    "precision@3",
    "map@5",
    "ndcg@5",
    "ndcg",
    "bpref",  # each query's ranking size: the gallery less its own items, from the global pairs
    "rbp_residual@0.8",
]
PAIR_METRICS = [
    "pair_precision@t=0.5",
    "pair_recall@t=0.25",
    "pair_f1@t=0.0",
    "recall_at_precision@0.8",
    "precision_at_recall@0.5",
]


# ----------------------------------------------------------------------------- scenarios
def _float_problem(seed, n_q=23, n_g=41, d=12, n_labels=5, dup_every=4):
    """Gaussian embeddings with many exact duplicate gallery rows (neighbours, so
    that some pairs straddle every shard boundary) and overlapping ids."""
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((n_q, d)).astype(np.float32)
    G = rng.standard_normal((n_g, d)).astype(np.float32)
    G[1::dup_every] = G[0::dup_every][: G[1::dup_every].shape[0]]
    G[5] = Q[2]  # a query's own vector in the gallery
    ql = rng.integers(0, n_labels, n_q)
    gl = rng.integers(0, n_labels, n_g)
    q_ids = np.arange(100, 100 + n_q)
    g_ids = np.arange(90, 90 + n_g)  # gallery ids 100.. overlap the queries' (self matches)
    g_ids[31] = g_ids[
        30
    ]  # a duplicated id (query 20's), inside one gallery shard at every world size
    return Q, G, *_one_label_per_id(q_ids, ql, g_ids, gl), q_ids, g_ids


def _one_label_per_id(q_ids, ql, g_ids, gl):
    """The labels with every item of an id given its first item's label (the queries
    first): an id names one item, of one label; the engine refuses an id held by items
    of different labels."""
    _, first, inv = np.unique(
        np.concatenate([q_ids, g_ids]), return_index=True, return_inverse=True
    )
    labels = np.concatenate([ql, gl])[first][inv.ravel()]
    return labels[: q_ids.size], labels[q_ids.size :]


def _int_problem(seed, n_q=19, n_g=37, d=3):
    """Tie-heavy: integer embeddings in [-2, 2]; every tie is a true tie."""
    rng = np.random.default_rng(seed)
    Q = rng.integers(-2, 3, (n_q, d)).astype(np.float32)
    G = rng.integers(-2, 3, (n_g, d)).astype(np.float32)
    for X in (Q, G):
        X[~X.any(axis=1), 0] = 1  # no all-zero rows (cosine refuses them)
    ql = rng.integers(0, 3, n_q)
    gl = rng.integers(0, 3, n_g)
    q_ids = np.array([f"item{i}" for i in range(n_q)])
    g_ids = np.array([f"item{i}" for i in range(n_q // 2, n_q // 2 + n_g)])
    return Q, G, *_one_label_per_id(q_ids, ql, g_ids, gl), q_ids, g_ids


def _scenarios() -> list[dict]:
    out = []
    Q, G, ql, gl, qi, gi = _float_problem(0)
    labels = dict(query_labels=ql, gallery_labels=gl, query_ids=qi, gallery_ids=gi)
    for sim in ("cosine", "dot", "neg_l2"):
        out.append(
            dict(
                name=f"float-{sim}",
                Q=Q,
                G=G,
                kw=dict(
                    labels,
                    similarity=sim,
                    metrics=QUERY_METRICS,
                    tile=(5, 16),
                    empty_queries="skip",
                ),
            )
        )
    # d=128 and short blocks: here the GEMM's last bits depend on the product's shape (MKL: a
    # 1- to 5-row product differs from a 37-row one), so a shard computed in other tiles would differ
    Q8, G8, ql8, gl8, qi8, gi8 = _float_problem(2, d=128)
    # (pair thresholds and the PR curve are scores themselves: they show every last bit)
    wide = dict(
        query_labels=ql8,
        gallery_labels=gl8,
        query_ids=qi8,
        gallery_ids=gi8,
        empty_queries="skip",
        metrics=QUERY_METRICS + ["recall_at_precision@0.3", "precision_at_recall@0.5"],
    )
    out.append(dict(name="float-d128-blocks-of-5", Q=Q8, G=G8, kw=dict(wide, tile=(5, 16))))
    out.append(
        dict(
            name="float-d128-blocks-of-1-dot",
            Q=Q8,
            G=G8,
            kw=dict(wide, tile=(1, 32), similarity="dot"),
        )
    )
    # the vectorised torch path (the one CUDA runs), here on the CPU
    out.append(
        dict(
            name="float-neg_l2-torch-path",
            Q=Q,
            G=G,
            kw=dict(
                labels,
                similarity="neg_l2",
                metrics=QUERY_METRICS + PAIR_METRICS,
                tile=(6, 16),
                empty_queries="skip",
                _use_kernels=False,
            ),
        )
    )
    out.append(
        dict(
            name="d128-torch-path-pairs",
            Q=Q8,
            G=G8,
            kw=dict(wide, tile=(5, 16), _use_kernels=False),
        )
    )
    # a small negative tail (recall at high precision): the first block seeds its threshold
    seeded = dict(
        labels,
        metrics=["map", "recall_at_precision@0.9", "pair_f1@t=0.1"],
        tile=(6, 16),
        empty_queries="skip",
    )
    out.append(dict(name="tail-seeded-kernels", Q=Q, G=G, kw=seeded))
    out.append(dict(name="tail-seeded-torch-path", Q=Q, G=G, kw=dict(seeded, _use_kernels=False)))
    out.append(
        dict(
            name="float-cosine-default-tile-average",
            Q=Q,
            G=G,
            kw=dict(labels, metrics=QUERY_METRICS, ties="average", empty_queries="zero"),
        )
    )
    out.append(
        dict(
            name="float-pairs",
            Q=Q,
            G=G,
            kw=dict(
                labels, metrics=QUERY_METRICS + PAIR_METRICS, tile=(4, 16), empty_queries="skip"
            ),
        )
    )
    Qi, Gi, qli, gli, qii, gii = _int_problem(1)
    ints = dict(query_labels=qli, gallery_labels=gli, query_ids=qii, gallery_ids=gii)
    for sim, ties in (("dot", "pessimistic"), ("neg_l2", "optimistic"), ("cosine", "average")):
        out.append(
            dict(
                name=f"ties-{sim}-{ties}",
                Q=Qi,
                G=Gi,
                kw=dict(
                    ints,
                    similarity=sim,
                    ties=ties,
                    metrics=QUERY_METRICS + PAIR_METRICS[:3],
                    tile=(3, 16),
                    empty_queries="skip",
                ),
            )
        )
    # leave-one-out: each rank's shard of one set, query ids on both sides
    Ql = np.concatenate([Q, Q[:6]])  # six exact duplicates of other items
    ll = np.concatenate([ql, ql[:6]])
    out.append(
        dict(
            name="loo-cosine",
            Q=Ql,
            G=None,
            kw=dict(
                query_labels=ll,
                query_ids=np.arange(Ql.shape[0]) * 3,
                metrics=QUERY_METRICS + ["recall_at_precision@0.5"],
                tile=(6, 16),
                empty_queries="skip",
            ),
        )
    )
    out.append(
        dict(
            name="loo-ties-neg_l2",
            Q=Gi,
            G=None,
            kw=dict(
                query_labels=gli,
                query_ids=np.arange(Gi.shape[0]),
                similarity="neg_l2",
                metrics=QUERY_METRICS,
                empty_queries="skip",
            ),
        )
    )
    # explicit relevance: columns are positions in the whole gallery
    rng = np.random.default_rng(5)
    rel = [
        sorted(rng.choice(G.shape[0], int(rng.integers(1, 6)), replace=False).tolist())
        for _ in range(len(Q))
    ]
    out.append(
        dict(
            name="relevance-lists",
            Q=Q,
            G=G,
            kw=dict(
                relevance=rel,
                query_ids=qi,
                gallery_ids=gi,
                metrics=QUERY_METRICS + PAIR_METRICS,
                tile=(7, 16),
                empty_queries="skip",
            ),
        )
    )
    graded = {
        i: {int(j): int(rng.integers(0, 4)) for j in rng.choice(Gi.shape[0], 5, replace=False)}
        for i in range(len(Qi))
    }
    out.append(
        dict(
            name="relevance-graded",
            Q=Qi,
            G=Gi,
            kw=dict(
                relevance=graded,
                query_ids=qii,
                gallery_ids=gii,
                similarity="dot",
                metrics=["ndcg", "ndcg@5", "map", "hit_rate@2"],
                relevance_level=2,
                empty_queries="skip",
            ),
        )
    )
    # BEIR's identical-id rule: own items judged relevant leave the ranking, stay in R
    own = {i: int(np.flatnonzero(gii == qii[i])[0]) for i in range(len(Qi)) if qii[i] in gii}
    beir = {i: {**row, **({own[i]: 1 + i % 3} if i in own else {})} for i, row in graded.items()}
    out.append(
        dict(
            name="relevance-graded-identical-ids",
            Q=Qi,
            G=Gi,
            kw=dict(
                relevance=beir,
                query_ids=qii,
                gallery_ids=gii,
                similarity="dot",
                metrics=["ndcg", "ndcg@5", "map", "hit_rate@2", "mrr", "medr", "recall@5"],
                relevance_level=2,
                ignore_identical_ids=True,
                ties="average",
                empty_queries="skip",
            ),
        )
    )
    # binary codes: +-1 rows on some shards' terms, np.packbits bytes (the same bits) compared in one process
    rng = np.random.default_rng(12)
    bits = rng.integers(0, 2, (40, 70)).astype(bool)
    bits[1::5] = bits[0::5]  # duplicate codes: ties
    yb = rng.integers(0, 6, 40)
    out.append(
        dict(
            name="hamming-loo",
            Q=bits,
            G=None,
            kw=dict(
                query_labels=yb,
                query_ids=np.arange(40),
                similarity="hamming",
                tile=(6, 16),
                metrics=QUERY_METRICS
                + ["pair_recall@t=30", "recall_at_precision@0.5", "grouped_recall@2"],
                group_size=2,
                empty_queries="skip",
            ),
        )
    )
    out.append(
        dict(
            name="hamming-query-gallery",
            Q=np.packbits(bits[:15], axis=1),
            G=np.packbits(bits[10:], axis=1),
            kw=dict(
                query_labels=yb[:15],
                gallery_labels=yb[10:],
                query_ids=np.arange(15),
                gallery_ids=np.arange(10, 40),
                similarity="hamming",
                metrics=QUERY_METRICS,
                empty_queries="skip",
            ),
        )
    )
    out += _image_text_scenarios()
    out += _grouped_scenarios()
    return out


def _grouped_scenarios() -> list[dict]:
    """Grouped recall: groups of labels spread over the ranks (float and tie-heavy data)."""
    rng = np.random.default_rng(9)
    X = rng.standard_normal((60, 6)).astype(np.float32)
    X[1::7] = X[0::7][: X[1::7].shape[0]]  # duplicates
    y = np.repeat(np.arange(12), 5)[rng.permutation(60)]
    grouped = ["grouped_recall@1", "grouped_recall@5", "map"]
    out = [
        dict(
            name="grouped-loo-cosine",
            Q=X,
            G=None,
            kw=dict(
                query_labels=y,
                query_ids=np.arange(60),
                metrics=grouped,
                group_size=3,
                group_repeats=2,
                tile=(7, 16),
            ),
        ),
        dict(
            name="grouped-loo-neg_l2-ties",
            Q=np.round(X),
            G=None,
            kw=dict(
                query_labels=y,
                query_ids=np.arange(60),
                metrics=grouped,
                group_size=4,
                similarity="neg_l2",
                ties="average",
                empty_queries="skip",
            ),
        ),
    ]
    Q, G, ql, gl, qi, gi = _float_problem(10, n_q=30, n_g=48, n_labels=8)
    out.append(
        dict(
            name="grouped-query-gallery-dot",
            Q=Q,
            G=G,
            kw=dict(
                query_labels=ql,
                gallery_labels=gl,
                query_ids=qi,
                gallery_ids=gi,
                similarity="dot",
                metrics=["grouped_recall@2", "mrr"],
                group_size=2,
                empty_queries="skip",
                tile=(5, 16),
            ),
        )
    )
    return out


def _image_text_scenarios() -> list[dict]:
    """Images (queries side) and captions (gallery side) with global caption_image."""
    rng = np.random.default_rng(7)
    n_img, d = 26, 8
    images = rng.standard_normal((n_img, d)).astype(np.float32)
    images[3] = images[4]  # a duplicate image, and duplicate captions below
    cap_img = np.sort(np.concatenate([np.arange(n_img), rng.integers(0, n_img, 20)]))
    captions = (images[cap_img] + 0.8 * rng.standard_normal((cap_img.size, d))).astype(np.float32)
    captions[10] = captions[11]
    kw = dict(
        caption_image=cap_img,
        metrics=["rsum", "i2t_recall@1", "t2i_recall@5", "i2t_medr", "t2i_meanr"],
        n_resamples=100,
    )
    out = [
        dict(name="image-text-cosine", entry="image_text", Q=images, G=captions, kw=kw),
        dict(
            name="image-text-ints-dot",
            entry="image_text",
            Q=np.round(images),
            G=np.round(captions),
            kw=dict(kw, similarity="dot", ties="average"),
        ),
    ]
    lonely = cap_img[cap_img != 7]  # image 7 has no caption: dropped
    out.append(
        dict(
            name="image-text-drop",
            entry="image_text",
            Q=images,
            G=captions[cap_img != 7],
            kw=dict(kw, caption_image=lonely, images_without_captions="drop"),
        )
    )
    return out


def _bounds(n: int, world: int, side: str) -> list[int]:
    """Uneven shard boundaries; at world size 3 one rank holds nothing (the middle
    one for queries, the first for the gallery)."""
    if world == 1:
        return [0, n]
    if world == 2:
        cut = n // 3 if side == "q" else n - n // 3
        return [0, cut, n]
    return [0, n // 2, n // 2, n] if side == "q" else [0, 0, n // 3, n]


def _shard(sc: dict, rank: int, world: int) -> tuple:
    Q, G, kw = sc["Q"], sc["G"], dict(sc["kw"])
    qb = _bounds(Q.shape[0], world, "q")
    q0, q1 = qb[rank], qb[rank + 1]
    if G is None:
        g0, g1 = q0, q1
    else:
        gb = _bounds(G.shape[0], world, "g")
        g0, g1 = gb[rank], gb[rank + 1]
    for key in ("query_labels", "query_ids"):
        if key in kw:
            kw[key] = kw[key][q0:q1]
    for key in ("gallery_labels", "gallery_ids", "caption_image"):
        if key in kw:
            kw[key] = kw[key][g0:g1]
    if isinstance(kw.get("relevance"), list):
        kw["relevance"] = kw["relevance"][q0:q1]
    elif isinstance(kw.get("relevance"), dict):
        kw["relevance"] = {i - q0: row for i, row in kw["relevance"].items() if q0 <= i < q1}
    return Q[q0:q1], None if G is None else G[g0:g1], kw


# ----------------------------------------------------------------------------- results
def _summary(res) -> dict:
    """Everything a result reports, as plain data."""
    if isinstance(res, rc.ImageTextResult):
        return {
            "values": dict(res),
            "intervals": dict(res.intervals),
            "per_fold": res.per_fold,
            "i2t": [np.asarray(r) for r in res.i2t_ranks],
            "t2i": [np.asarray(r) for r in res.t2i_ranks],
            "tie_values": {k: dict(v) for k, v in res.tie_values.items()},
            "tied_share": res.tied_share,
            "n": (res.n_images, res.n_captions, res.layout),
            "config": res.config,
        }
    return {
        "values": dict(res),
        "per_query": {k: np.asarray(v) for k, v in res.per_query.items()},
        "tie_values": {k: dict(v) for k, v in res.tie_values.items()},
        "first": np.asarray(res.first_relevant_rank),
        "n_relevant": res.n_relevant,
        "n_candidates": res.n_candidates,
        "skipped": res.skipped_queries,
        "thresholds": dict(res.thresholds),
        "pair_counts": dict(res.pair_counts),
        "pr_curve": res.pr_curve,
        "tied_share": res.tied_share,
        "query_ids": res.query_ids,
        "intervals": dict(res.intervals),
        "grouped": {
            k: {
                f: getattr(g, f)
                for f in (
                    "value",
                    "low",
                    "high",
                    "group_values",
                    "per_query",
                    "group_of_query",
                    "tie_values",
                    "n_queries_used",
                    "n_queries_skipped",
                    "dropped_labels",
                )
            }
            for k, g in res.grouped.items()
        },
        # the code length is the inputs' (np.packbits bytes in one process: 72 bits for 70)
        "config": {k: v for k, v in res.config.items() if k not in ("world_size", "n_bits")},
    }


def _same(a, b, where="") -> None:
    """Exact equality of nested results (NaN equals NaN; no tolerance)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        b = np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, (
            f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        )
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), f"{where}: {a} != {b}"
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), f"{where}: nan != {b}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


# ----------------------------------------------------------------------------- ranks
def _init(rank: int, world: int, init_file: str) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)


def _outcome(fn):
    try:
        return ("ok", _summary(fn()))
    except Exception as exc:  # recorded for the parent to compare
        return ("error", type(exc).__name__, str(exc))


def _worker(rank: int, world: int, init_file: str, job: str, out_dir: str) -> None:
    """Runs the job's scenarios on this rank: each a (world size, scenario) pair, on the
    whole group when the world size is the launch's, else on the subgroup of the first
    ranks (its ranks run it, the others skip it), so that one launch serves two world
    sizes. Results under ``results[world size][name]``."""
    _init(rank, world, init_file)
    try:
        with open(job, "rb") as fh:
            scenarios = pickle.load(fh)
        sizes = sorted({w for w, _ in scenarios})
        groups = {  # every rank makes every group (new_group is a collective of the world)
            w: dist.group.WORLD if w == world else dist.new_group(list(range(w))) for w in sizes
        }
        results = {w: {"_gallery_rows": []} for w in sizes if rank < w}
        sink = [None]
        _record_shard_rows(sink)
        for w, sc in scenarios:
            if rank >= w:
                continue
            group, mine = groups[w], results[w]
            sink[0] = mine["_gallery_rows"]
            if sc.get("entry") == "example":  # examples/ddp_validation.py on this group
                try:
                    mine[sc["name"]] = ("ok", _example_run(rank, w, group))
                except Exception as exc:  # recorded for the parent, as _outcome does
                    mine[sc["name"]] = ("error", type(exc).__name__, str(exc))
                continue
            own = sc.get("rank_scenario", {}).get(rank, sc)  # a rank may make another call
            Q, G, kw = _shard(own, rank, w)
            kw.update(sc.get("rank_kw", {}).get(rank, {}))
            Q = kw.pop("queries", Q)
            if sc.get("explode_on") == rank:
                if sc.get("how") == "exit":  # this rank dies: what it has so far is written first
                    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as fh:
                        pickle.dump(results, fh)
                _explode_in_second_block(sc.get("how", "raise"))
            entry = rc.evaluate_image_text if own.get("entry") == "image_text" else rc.evaluate
            mine[sc["name"]] = _outcome(lambda: entry(Q, G, process_group=group, **kw))
            _restore()
        with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as fh:
            pickle.dump(results, fh)
    except BaseException:
        with open(os.path.join(out_dir, f"rank{rank}.err"), "w") as fh:
            fh.write(traceback.format_exc())
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


_SAVED = {}


def _record_shard_rows(sink: list) -> None:
    """Record (rank's gallery rows, rows of its padded float32 gallery, chunk width) of
    every pass, in the list ``sink[0]`` (the world size's list, set before each scenario)."""
    from retrieval_checks.engine.distributed import _sharded as _distributed

    original = _distributed.prepare_problem

    def prepare(plan, queries, gallery, **kw):
        p = original(plan, queries, gallery, **kw)
        sink[0].append((p.g1 - p.g0, int(p.Gp.shape[0]), p.c, p.n_g))
        return p

    _distributed.prepare_problem = prepare


def _explode_in_second_block(how: str) -> None:
    """This rank raises (or dies, ``how="exit"``) in its second block."""
    from retrieval_checks.engine import _stream

    original = _SAVED.setdefault("run_block", _stream.run_block)  # the pass's one loop
    calls = []

    def boom(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            if how == "exit":
                os._exit(3)
            raise RuntimeError("injected failure in the second block")
        return original(*args, **kwargs)

    _stream.run_block = boom


def _restore() -> None:
    if "run_block" in _SAVED:
        from retrieval_checks.engine import _stream

        _stream.run_block = _SAVED.pop("run_block")


def _launch(tmp_path, world: int, scenarios: list[tuple], timeout: float = 300.0) -> list:
    """Run ``scenarios`` ((world size, scenario) pairs, :func:`_worker`) on ``world``
    ranks (``timeout``: when a rank still running is a hang; generous, since a busy
    machine slowed a 2-minute limit's launches past it); each rank's {world size: {name:
    outcome}} with its exit code under ``"_exitcode"`` (a rank that died wrote what it
    had before), or the exit code alone where it wrote none."""
    import torch.multiprocessing as mp

    job = tmp_path / f"job{world}.pkl"
    job.write_bytes(pickle.dumps(scenarios))
    out = tmp_path / f"out{world}"
    out.mkdir()
    init = tmp_path / f"rendezvous{world}"
    ctx = mp.start_processes(
        _worker,
        args=(world, str(init), str(job), str(out)),
        nprocs=world,
        join=False,
        start_method="spawn",
    )
    for p in ctx.processes:
        p.join(timeout)
    alive = [p for p in ctx.processes if p.is_alive()]
    for p in alive:
        p.terminate()
    assert not alive, f"{len(alive)} rank(s) still running after {timeout} s (a hang)"
    errors = [f.read_text() for f in sorted(out.glob("*.err"))]
    assert not errors, "\n".join(errors)
    return [
        dict(pickle.loads((out / f"rank{r}.pkl").read_bytes()), _exitcode=ctx.processes[r].exitcode)
        if (out / f"rank{r}.pkl").exists()
        else ctx.processes[r].exitcode
        for r in range(world)
    ]


def _launch_here(tmp_path, scenarios: list[dict]) -> list:
    """World size 1 in this process (a group of one rank needs no other process: a spawn
    cost an interpreter, a torch import and the kernels' load, ~10 CPU-s); what
    :func:`_worker` changes here (threads, OMP_NUM_THREADS, the spy on the prepared
    gallery) is put back after."""
    from retrieval_checks.engine.distributed import _sharded

    job = tmp_path / "job1.pkl"
    job.write_bytes(pickle.dumps([(1, sc) for sc in scenarios]))
    out = tmp_path / "out1"
    out.mkdir()
    threads, omp = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    prepare = _sharded.prepare_problem
    try:
        _worker(0, 1, str(tmp_path / "rendezvous1"), str(job), str(out))
    finally:
        _sharded.prepare_problem = prepare
        torch.set_num_threads(threads)
        if omp is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = omp
        _restore()
    assert not dist.is_initialized()
    return [dict(pickle.loads((out / "rank0.pkl").read_bytes())[1], _exitcode=0)]


def _single(sc: dict):
    kw = dict(sc["kw"])
    # the ranks run under gloo, whose device="auto" is the CPU: the one-process reference
    # runs there too (on a CUDA machine its auto would pick the GPU and another budget)
    kw.setdefault("device", "cpu")
    entry = rc.evaluate_image_text if sc.get("entry") == "image_text" else rc.evaluate
    return _outcome(lambda: entry(sc["Q"], sc["G"], **kw))


def _labelled_base():
    """The float problem of 23 queries and 41 gallery rows with its labels and ids, and
    the options the failure scenarios share (here and in test_seams_sharded_checks)."""
    Q, G, ql, gl, qi, gi = _float_problem(3)
    kw = dict(
        query_labels=ql,
        gallery_labels=gl,
        query_ids=qi,
        gallery_ids=gi,
        metrics=["map", "mrr"],
        tile=(4, 16),
        empty_queries="skip",
    )
    return Q, G, kw


def _failures(world: int, tmp) -> list[dict]:
    """Scenarios where some rank's input or work fails; every rank must raise. Then a
    run that raises mid-pass with ``checkpoint=`` and its restart, which resumes."""
    Q, G, base = _labelled_base()
    gi = base["gallery_ids"]
    last = world - 1
    spread = gi.copy()
    spread[-1] = spread[0]  # first and last gallery item share an id, on different ranks
    nan_q = Q[_bounds(len(Q), world, "q")[last] :].copy()
    nan_q[0, 0] = np.nan
    return [
        dict(name="id-on-two-ranks", Q=Q, G=G, kw=dict(base, gallery_ids=spread)),
        dict(
            name="ids-missing-on-one-rank", Q=Q, G=G, kw=base, rank_kw={last: {"gallery_ids": None}}
        ),
        dict(name="nan-on-one-rank", Q=Q, G=G, kw=base, rank_kw={last: {"queries": nan_q}}),
        dict(name="metrics-differ", Q=Q, G=G, kw=base, rank_kw={last: {"metrics": ["map"]}}),
        _row_number_ids(),
        dict(name="rank-raises", Q=Q, G=G, kw=base, explode_on=last),
        dict(name="after-a-failure", Q=Q, G=G, kw=base),  # the group still works
        dict(
            name="checkpointed-run-raises",
            Q=Q,
            G=G,
            kw=dict(base, checkpoint=str(tmp / "ckpt")),
            explode_on=last,
        ),
        dict(
            name="checkpointed-run-resumes", Q=Q, G=G, kw=dict(base, checkpoint=str(tmp / "ckpt"))
        ),
    ]


def _row_number_ids() -> dict:
    """Row numbers 0..n-1 as the ids of both sides (h21: query i dropped gallery item i,
    of another label, from its ranking): an id held by items of different labels is
    refused, by the global id join of every rank as by one process."""
    Q, G, ql, gl, _, _ = _float_problem(3)
    kw = dict(
        query_labels=ql,
        gallery_labels=gl,
        query_ids=np.arange(len(Q)),
        gallery_ids=np.arange(len(G)),
        metrics=["map"],
        empty_queries="skip",
    )
    return dict(name="row-number-ids", Q=Q, G=G, kw=kw)


def _calls_differ() -> list[dict]:
    """Ranks that make different calls, or one call with an option that differs on one
    rank: every rank raises the library's error; then the group still works."""
    Q, G, ql, gl, qi, gi = _float_problem(5)
    plain = dict(
        name="same-call",
        Q=Q,
        G=G,
        kw=dict(
            query_labels=ql,
            gallery_labels=gl,
            query_ids=qi,
            gallery_ids=gi,
            metrics=["map"],
            empty_queries="skip",
        ),
    )
    it = _image_text_scenarios()[0]
    return [
        dict(plain, name="different-calls", rank_scenario={1: it}),
        dict(
            it, name="it-bad-metric", rank_kw={1: {"metrics": ["i2t_recall@5", "no_such_metric"]}}
        ),
        dict(it, name="it-seed-differs", rank_kw={1: {"seed": 7}}),
        dict(it, name="it-protocol-differs", rank_kw={1: {"protocol": "1k"}}),
        dict(plain, name="executor-on-one-rank", rank_kw={1: {"executor": "a pool"}}),
        plain,
    ]


def _rank_dies() -> dict:
    """Rank 1 dies (exits) in its second block: the last scenario of a launch (the group
    is gone after it)."""
    Q, G, ql, gl, qi, gi = _float_problem(4)
    return dict(
        name="rank-dies",
        Q=Q,
        G=G,
        explode_on=1,
        how="exit",
        kw=dict(
            query_labels=ql,
            gallery_labels=gl,
            query_ids=qi,
            gallery_ids=gi,
            metrics=["map"],
            tile=(4, 16),
        ),
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """World size 1 in this process; world sizes 2 and 3 in one launch of three ranks:
    every world-size-3 scenario on the whole group, then every world-size-2 one on the
    subgroup of ranks 0 and 1 (rank 2 skips them), with the different calls of
    test_ranks_calling_different_functions..., the DDP example and, last, a rank that
    dies. One launch instead of two (a rank costs an interpreter, a torch import and the
    kernels' load); a group of two that is a subgroup takes the path of a whole group
    (the library asks the group for its ranks), and tests it too."""
    cache = {}

    def get(world: int):
        if world in cache:
            return cache[world]
        if world == 1:
            tmp = tmp_path_factory.mktemp("world1")
            cache[1], cache[1, "tmp"] = _launch_here(tmp, _scenarios()), tmp
            return cache[1]
        tmps = {w: tmp_path_factory.mktemp(f"world{w}") for w in (2, 3)}
        job = [(3, sc) for sc in _scenarios() + _failures(3, tmps[3])]
        job += [
            (2, sc)
            for sc in _scenarios()
            + _failures(2, tmps[2])
            + _calls_differ()
            + [dict(name="ddp-example", entry="example"), _rank_dies()]
        ]
        ranks = _launch(tmps[3], 3, job)
        for w in (2, 3):
            cache[w] = [
                dict(r[w], _exitcode=r["_exitcode"]) if isinstance(r, dict) else r
                for r in ranks[:w]
            ]
            cache[w, "tmp"] = tmps[w]
        return cache[world]

    get.cache = cache
    return get


@pytest.fixture(scope="module")
def single():
    """Each scenario's one-process outcome, computed once for the three world sizes."""
    cache = {}

    def get(sc: dict):
        if sc["name"] not in cache:
            cache[sc["name"]] = _single(sc)
        return cache[sc["name"]]

    return get


# ----------------------------------------------------------------------------- tests
@pytest.mark.slow
@pytest.mark.parametrize("world", [1, 2, 3])
def test_every_rank_equals_one_process_bit_for_bit(runs, single, world):
    per_rank = runs(world)
    for sc in _scenarios():
        expected = single(sc)
        assert expected[0] == "ok", (sc["name"], expected)
        for rank, results in enumerate(per_rank):
            got = results[sc["name"]]
            assert got[0] == "ok", (sc["name"], rank, got)
            _same(expected[1], got[1], f"{sc['name']} rank {rank}")
            assert got[1]["values"], sc["name"]


EXPECTED_ERRORS = {
    "id-on-two-ranks": ("InputError", "appear on more than one rank"),
    "ids-missing-on-one-rank": ("InputError", "gallery_ids is None on rank"),
    "nan-on-one-rank": ("InputError", "NaN"),
    "metrics-differ": ("InputError", "metrics="),
    "row-number-ids": ("InputError", "give one id to items of different labels"),
}


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_each_rank_holds_its_gallery_shard_not_the_gallery(runs, world):
    """Memory per rank: the prepared gallery is the rank's shard padded to whole chunks
    (at most one chunk on each side), never the whole gallery."""
    for rank, results in enumerate(runs(world)):
        rows = results["_gallery_rows"]
        assert rows
        for own, held, c, total in rows:
            assert held <= -(-own // c) * c + c, (rank, own, held, c)
        assert any(held < total for own, held, c, total in rows if own < total and total > 2 * c)


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_a_bad_shard_or_option_raises_on_every_rank(runs, world):
    per_rank = runs(world)
    for name, (kind, text) in EXPECTED_ERRORS.items():
        for rank, results in enumerate(per_rank):
            got = results[name]
            assert got[0] == "error" and got[1] == kind and text in got[2], (name, rank, got)


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_ids_naming_items_of_different_labels_are_refused_as_in_one_process(runs, world):
    """Row numbers as both sides' ids: every rank raises one process's error, word for word."""
    expected = _single(_row_number_ids())
    assert expected[:2] == ("error", "InputError"), expected
    assert "query_ids and gallery_ids give one id to items of different labels" in expected[2]
    for rank, results in enumerate(runs(world)):
        assert results["row-number-ids"] == expected, (rank, results["row-number-ids"])


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_a_rank_that_raises_stops_the_others_with_its_error(runs, world):
    per_rank = runs(world)
    last = world - 1
    for rank, results in enumerate(per_rank):
        got = results["rank-raises"]
        assert got[0] == "error", (rank, got)
        if rank == last:
            assert got[1] == "RuntimeError" and "injected failure" in got[2]
        else:
            assert (
                got[1] == "RemoteFailure" and f"rank {last} of the process group failed" in got[2]
            ), got
            assert "injected failure in the second block" in got[2]
        assert results["after-a-failure"][0] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_a_restarted_sharded_run_resumes_from_its_checkpoint(runs, world):
    """The run that raised in its second block left block 0 on every rank; the restart
    reads it back, computes the rest, and equals one process without a checkpoint."""
    per_rank = runs(world)
    sc = [
        s for s in _failures(world, _tmp_of(runs, world)) if s["name"] == "checkpointed-run-resumes"
    ][0]
    expected = _single(dict(sc, kw={k: v for k, v in sc["kw"].items() if k != "checkpoint"}))
    files = sorted(p.name for p in (_tmp_of(runs, world) / "ckpt").glob("*.npz"))
    n_blocks = -(-len(sc["Q"]) // 4)
    assert len(files) == world * n_blocks, files
    for rank, results in enumerate(per_rank):
        assert results["checkpointed-run-raises"][0] == "error"
        got = results["checkpointed-run-resumes"]
        assert got[0] == "ok", got
        _same(expected[1], got[1], f"resumed rank {rank}")


@pytest.mark.slow
def test_ranks_calling_different_functions_raise_on_every_rank_naming_both(runs):
    """Rank 0 ``evaluate``, rank 1 ``evaluate_image_text`` on one group: the library's
    error on every rank, naming both calls, instead of failing on each other's
    messages; the group stays usable."""
    for rank, results in enumerate(runs(2)):
        got = results["different-calls"]
        assert got[0] == "error" and got[1] == "InputError", (rank, got)
        assert (
            "rank 0 called retrieval_checks.evaluate(" in got[2]
            and "rank 1 called retrieval_checks.evaluate_image_text(" in got[2]
        ), got
        assert results["same-call"][0] == "ok", (rank, results["same-call"])


@pytest.mark.slow
def test_a_bad_or_differing_option_on_one_rank_raises_on_every_rank(runs):
    """Options checked before the ranks talk left the other ranks waiting in the call's
    first exchange (or pairing it with the failing rank's next call); options the ranks
    did not compare (protocol, seed...) ran different collectives or gave each rank its
    own numbers."""
    expected = {
        "it-bad-metric": "no_such_metric",
        "it-seed-differs": "seed",
        "it-protocol-differs": "protocol",
        "executor-on-one-rank": "executor= and process_group= do not combine",
    }
    for rank, results in enumerate(runs(2)):
        for name, word in expected.items():
            got = results[name]
            assert got[0] == "error" and word in got[2], (name, rank, got)
            assert issubclass(getattr(rc, got[1], Exception), rc.InputError), (name, rank, got)
        assert results["same-call"][0] == "ok", (rank, results["same-call"])


def _tmp_of(runs, world):
    runs(world)
    return runs.cache[world, "tmp"]


@pytest.mark.slow
def test_a_rank_that_dies_stops_the_others_with_a_clear_error(runs):
    """The world-size-2 launch's last scenario: rank 1 exits in its second block."""
    survivor, dead = runs(2)
    assert dead["_exitcode"] == 3 and "rank-dies" not in dead
    assert survivor["_exitcode"] == 0
    got = survivor["rank-dies"]
    assert got[0] == "error" and got[1] == "RemoteFailure", got
    assert (
        "collective over process_group failed" in got[2]
        and "another rank probably stopped" in got[2]
    )


# ----------------------------------------------------------------------------- the DDP example
EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "ddp_validation.py")


def _example():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ddp_validation", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _example_run(rank: int, world: int, group):
    """On a rank: the example's validate (it evaluates and gates; an exception if the
    gate fails) and the rank's embeddings, as (summary, embeddings)."""
    ex = _example()
    result = ex.validate(group, rank, world)  # evaluates and gates
    inputs, _ = ex.validation_set()
    with torch.no_grad():
        emb = ex.model()(torch.from_numpy(inputs[ex.rank_slice(len(inputs), rank, world)])).numpy()
    return _summary(result), emb


@pytest.mark.slow
def test_the_ddp_example_gives_every_rank_the_global_metrics(runs):
    """examples/ddp_validation.py on 2 ranks (a scenario of the world-size-2 launch):
    each rank's result equals one process's evaluation of the ranks' embeddings
    concatenated, and the gate passes."""
    got = [results["ddp-example"] for results in runs(2)]
    assert all(g[0] == "ok" for g in got), got
    (s0, e0), (s1, e1) = (g[1] for g in got)
    ex = _example()
    _, labels = ex.validation_set()
    whole = rc.evaluate(
        np.concatenate([e0, e1]),
        None,
        query_labels=labels,
        query_ids=np.arange(len(labels)),
        metrics=["map@R", "hit_rate@1", "mrr"],
        device="cpu",
    )
    _same(_summary(whole), s0, "rank 0")
    _same(_summary(whole), s1, "rank 1")
    assert whole["hit_rate@1"] >= 0.5


@pytest.mark.slow
def test_the_benchmark_runs_and_checks_its_ranks(capsys, monkeypatch):
    """benchmarks/bench_distributed.py at a tiny size and world size 2 only: its table,
    and every rank's values equal to one process (main returns 1 otherwise); timings are
    not checked. Its main runs here, and so does its one-process row (``_single``, which
    the script spawns so that its memory figures are its own: here it would cost an
    interpreter, a torch import and the kernels' load); the two ranks are spawned by the
    script itself, as it does."""
    import importlib.util

    import torch.multiprocessing as mp

    script = os.path.join(
        os.path.dirname(__file__), "..", "..", "benchmarks", "bench_distributed.py"
    )
    spec = importlib.util.spec_from_file_location("bench_distributed", script)
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_distributed", bench)  # the spawned ranks import it
    monkeypatch.syspath_prepend(os.path.dirname(script))
    spec.loader.exec_module(bench)
    spawn, spawned = mp.start_processes, []

    def start_processes(fn, args=(), nprocs=1, **kw):
        spawned.append((fn.__name__, nprocs))
        if fn is not bench._single:
            return spawn(fn, args=args, nprocs=nprocs, **kw)
        threads = torch.get_num_threads()
        try:
            fn(0, *args)  # what a spawned process runs: (its index, *args)
        finally:
            torch.set_num_threads(threads)

    monkeypatch.setattr(mp, "start_processes", start_processes)
    code = bench.main(["--n", "400", "--d", "16", "--worlds", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert spawned == [("_single", 1), ("_rank", 2)]
    assert "| 2 | 1 | 200 |" in out and "equal to one process on every rank: yes" in out
    assert "| one process | - | 400 |" in out
    assert "| 1 | 0 |" not in out  # only the world size asked for
