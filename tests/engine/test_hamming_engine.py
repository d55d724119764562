"""similarity="hamming" end to end through ``rc.evaluate``: every input form of the same
codes (np.packbits uint8, bool, {0,1} floats, +-1 ints, torch tensors) gives the same
results, equal to ``dot`` on the +-1 form (the same ranking: dot = n_bits - 2 distance)
and to a brute force written here from integer Hamming distances; pair thresholds in
bits; code lengths across word boundaries; fail-closed inputs; grouped recall,
image-text, backends and tiles; a YAML suite over a .npy file of packed codes."""

from __future__ import annotations

import itertools
import textwrap
import warnings

import numpy as np
import pytest
from reference import aggregate, query_metric, sorted_relevance

import retrieval_checks as rc
from retrieval_checks import SuiteRunner, load_suite
from retrieval_checks.engine.counting import _kernels

try:
    import torch
except ImportError:  # pragma: no cover - torch is a test dependency
    torch = None

RANK = [
    "map",
    "map@R",
    "r_precision",
    "mrr",
    "medr",
    "meanr",
    "hit_rate@1",
    "hit_rate@5",
    "recall@5",
    "precision@5",
    "map@5",
    "map_cut@5",
    "map_capped@5",
]
TIES = ["pessimistic", "optimistic", "average"]


# ----------------------------------------------------------------------------- data
def _codes(n: int, bits: int, *, n_classes: int = 5, flip: float = 0.25, seed: int = 0):
    """Class-clustered bool codes with labels; rows 0 and 1 are a relevant duplicate
    (distance 0), rows 2 and 3 a non-relevant duplicate."""
    rng = np.random.default_rng(seed * 1000 + bits)
    y = np.arange(n) % n_classes
    proto = rng.random((n_classes, bits)) < 0.5
    B = proto[y] ^ (rng.random((n, bits)) < flip)
    B[1], y[1] = B[0], y[0]
    B[3], y[3] = B[2], (y[2] + 1) % n_classes
    return B, y


def _forms(B: np.ndarray) -> dict:
    """The same codes in every accepted form."""
    out = {
        "packed": np.packbits(B, axis=1),
        "bool": B,
        "01-float": B.astype(np.float32),
        "pm1-int": np.where(B, 1, -1).astype(np.int64),
        "01-int8": B.astype(np.int8),
    }
    if torch is not None:
        out.update(
            {
                "torch-bool": torch.from_numpy(B.copy()),
                "torch-packed": torch.from_numpy(np.packbits(B, axis=1)),
                "torch-pm1-float": torch.from_numpy(np.where(B, 1.0, -1.0).astype(np.float32)),
            }
        )
    return out


def _problem(mode: str, bits: int = 12, seed: int = 0):
    """(queries, gallery or None, evaluate kwargs, rel, keep) as bool codes. In "qg" the
    queries hold 6 gallery items (same ids, one id twice in the gallery) and 6 new ones."""
    B, y = _codes(36, bits, seed=seed)
    if mode == "loo":
        keep = ~np.eye(y.size, dtype=bool)
        return B, None, dict(query_labels=y), y[:, None] == y[None, :], keep
    G, gy = B[:30], y[:30].copy()
    g_ids = np.arange(100, 130)
    g_ids[5] = g_ids[4]  # a duplicate id: a query with it excludes both items
    gy[5] = gy[4]  # ... one item (a copy), so of one label: the engine refuses two
    Q = np.concatenate([B[[4, 0, 9, 13, 21, 2]], B[30:]])
    qy = np.concatenate([y[[4, 0, 9, 13, 21, 2]], y[30:]])
    q_ids = np.concatenate([g_ids[[4, 0, 9, 13, 21, 2]], np.arange(200, 206)])
    keep = q_ids[:, None] != g_ids[None, :]
    kwargs = dict(query_labels=qy, gallery_labels=gy, query_ids=q_ids, gallery_ids=g_ids)
    return Q, G, kwargs, qy[:, None] == gy[None, :], keep


def _pm1(B):
    return np.where(B, 1.0, -1.0).astype(np.float32)


def _distances(Q, G):
    G = Q if G is None else G
    return (Q[:, None, :] != G[None, :, :]).sum(-1)


def _same(a, b, names):
    """Every value, per-query value and tie value of two results is identical."""
    for name in names:
        assert a[name] == b[name] or (np.isnan(a[name]) and np.isnan(b[name])), name
        if name in a.per_query:
            np.testing.assert_array_equal(a.per_query[name], b.per_query[name], err_msg=name)
        if name in a.tie_values:
            assert a.tie_values[name] == b.tie_values[name], name
        if name in a.thresholds:
            assert (
                a.thresholds[name] == b.thresholds[name]
                and a.pair_counts[name] == b.pair_counts[name]
            ), name
    np.testing.assert_array_equal(a.first_relevant_rank, b.first_relevant_rank)
    assert a.tied_share == b.tied_share


def _orders(scores: np.ndarray, rel: np.ndarray):
    """Every relevance vector in an order consistent with decreasing score: the
    relevant items of a tie group in every set of its positions (each equally likely)."""
    groups = [rel[scores == s] for s in np.unique(scores)[::-1]]
    choices = [list(itertools.combinations(range(g.size), int(g.sum()))) for g in groups]
    for combo in itertools.product(*choices):
        parts = []
        for g, pos in zip(groups, combo):
            part = np.zeros(g.size, int)
            part[list(pos)] = 1
            parts.append(part)
        yield np.concatenate(parts)


# ----------------------------------------------------------------------------- input forms
@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("mode", ["loo", "qg"])
def test_every_code_form_gives_identical_results_equal_to_dot_on_pm1(mode, ties):
    Q, G, kwargs, _, _ = _problem(mode)
    base = rc.evaluate(Q, G, metrics=RANK, similarity="hamming", ties=ties, **kwargs)
    assert base.config["similarity"] == "hamming" and base.tied_share > 0.1  # ties are exercised
    fq, fg = _forms(Q), (None if G is None else _forms(G))
    for form in fq:
        r = rc.evaluate(
            fq[form],
            None if G is None else fg[form],
            metrics=RANK,
            similarity="hamming",
            ties=ties,
            **kwargs,
        )
        _same(r, base, RANK)
    dot = rc.evaluate(
        _pm1(Q), None if G is None else _pm1(G), metrics=RANK, similarity="dot", ties=ties, **kwargs
    )
    _same(dot, base, RANK)


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
@pytest.mark.parametrize("mode", ["loo", "qg"])
def test_packed_codes_equal_the_brute_force_on_integer_distances(mode, ties):
    Q, G, kwargs, rel, keep = _problem(mode)
    packed = np.packbits(Q, axis=1), None if G is None else np.packbits(G, axis=1)
    r = rc.evaluate(*packed, metrics=RANK, similarity="hamming", ties=ties, **kwargs)
    S = -_distances(Q, G).astype(np.float64)
    for name in RANK:
        want = np.array(
            [
                query_metric(name, sorted_relevance(S[i], rel[i], keep[i], ties))
                for i in range(len(S))
            ]
        )
        np.testing.assert_allclose(r.per_query[name], want, rtol=1e-12, err_msg=name)
        assert r[name] == pytest.approx(aggregate(name, want), rel=1e-12), name
    if mode == "qg":
        np.testing.assert_array_equal(r.n_relevant, (rel & keep).sum(1))
        assert (
            r.n_candidates[0] == 28 and r.n_candidates[-1] == 30
        )  # a duplicated id excludes both items


@pytest.mark.parametrize("mode", ["loo", "qg"])
def test_average_ties_equal_the_mean_over_every_order_of_tied_items(mode):
    B, y = _codes(20, 6, n_classes=4, seed=1)
    if mode == "loo":
        Q, G, qy, gy = B[:12], None, y[:12], y[:12]
        kwargs, keep = dict(query_labels=qy), ~np.eye(12, dtype=bool)
    else:
        q_ids, g_ids = np.array([0, 2, 5, 14, 15, 16]), np.arange(14)
        Q, G, qy, gy = B[q_ids], B[:14], y[q_ids], y[:14]
        kwargs = dict(query_labels=qy, gallery_labels=gy, query_ids=q_ids, gallery_ids=g_ids)
        keep = q_ids[:, None] != g_ids[None, :]
    rel = qy[:, None] == gy[None, :]
    names = ["map", "map@R", "mrr", "meanr", "hit_rate@1", "recall@5", "map@5", "map_cut@5"]
    r = rc.evaluate(
        np.packbits(Q, axis=1),
        None if G is None else np.packbits(G, axis=1),
        metrics=names,
        similarity="hamming",
        ties="average",
        **kwargs,
    )
    S = -_distances(Q, G)
    for i in range(len(S)):
        s, rl = S[i][keep[i]], rel[i][keep[i]].astype(int)
        orders = list(_orders(s, rl))
        assert 1 < len(orders) < 5000
        for name in names:
            vals = [query_metric(name, o) for o in orders]
            assert r.per_query[name][i] == pytest.approx(np.mean(vals), rel=1e-9), (i, name)
            assert r.tie_values[name]["min"] <= r[name] <= r.tie_values[name]["max"]


# ----------------------------------------------------------------------------- pair metrics
def _pair_distances(mode):
    Q, G, kwargs, rel, keep = _problem(mode, bits=16)
    D = _distances(Q, G)
    return Q, G, kwargs, D[keep & rel], D[keep & ~rel]


@pytest.mark.parametrize("T", [0, 3, 7.5])
@pytest.mark.parametrize("mode", ["loo", "qg"])
def test_pair_thresholds_are_distances_in_bits(mode, T):
    Q, G, kwargs, pos, neg = _pair_distances(mode)
    names = [f"pair_precision@t={T}", f"pair_recall@t={T}", f"pair_f1@t={T}"]
    r = rc.evaluate(
        np.packbits(Q, axis=1),
        None if G is None else np.packbits(G, axis=1),
        metrics=names,
        similarity="hamming",
        **kwargs,
    )
    tp, fp = int((pos <= T).sum()), int((neg <= T).sum())
    fn = pos.size - tp
    if T == 0:
        assert tp >= 1 and fp >= 1  # the planted duplicates
    else:
        assert tp > 1 and fp > 1 and fn > 1
    want = [tp / (tp + fp) if tp + fp else 0.0, tp / pos.size, 2 * tp / (2 * tp + fp + fn)]
    for name, value in zip(names, want):
        assert r[name] == pytest.approx(value, rel=1e-12), name
        assert r.thresholds[name] == T
        c = r.pair_counts[name]
        assert (c["tp"], c["fp"], c["fn"], c["n_positive"], c["n_negative"]) == (
            tp,
            fp,
            fn,
            pos.size,
            neg.size,
        )
        line = r.measure(name).details[0]
        assert line.startswith(f"at Hamming distance <= {T:g} bits; TP {tp}, FP {fp}, FN {fn}")
        assert r.measure(name).extra["operating_threshold"] == T


@pytest.mark.parametrize("kw", [{}, {"device": "torch-cpu"}, {"_use_kernels": False}], ids=str)
def test_several_pair_thresholds_in_one_pass(kw):
    """Levels 3, 7.5 and 0 bits are scores -3, -7.5, 0: the kernels must bin negatives
    against them in ascending score order (they counted FP of the wrong level before)."""
    if kw.get("device") == "torch-cpu" and torch is None:
        pytest.skip("torch is not installed")
    Q, G, kwargs, pos, neg = _pair_distances("loo")
    names = ["pair_recall@t=3", "pair_precision@t=7.5", "pair_f1@t=0"]
    r = rc.evaluate(np.packbits(Q, axis=1), metrics=names, similarity="hamming", **kwargs, **kw)
    for name in names:
        T = float(name.rpartition("=")[2])
        assert r.pair_counts[name]["fp"] == int((neg <= T).sum()), name
        assert r.pair_counts[name]["tp"] == int((pos <= T).sum()), name


@pytest.mark.parametrize("mode", ["loo", "qg"])
def test_recall_at_precision_threshold_is_a_positive_pairs_distance(mode):
    Q, G, kwargs, pos, neg = _pair_distances(mode)
    names = ["recall_at_precision@0.5", "recall_at_precision@0.3", "precision_at_recall@0.5"]
    r = rc.evaluate(
        np.packbits(Q, axis=1),
        None if G is None else np.packbits(G, axis=1),
        metrics=names,
        similarity="hamming",
        **kwargs,
    )
    ds = np.unique(pos)
    tp = np.array([(pos <= d).sum() for d in ds])
    fp = np.array([(neg <= d).sum() for d in ds])
    precision, recall = tp / (tp + fp), tp / pos.size
    for level in (0.5, 0.3):
        name = f"recall_at_precision@{level:g}"
        ok = np.flatnonzero(precision >= level)
        assert ok.size and ok[-1] < ds.size - 1  # a threshold that is not the trivial one
        assert r[name] == pytest.approx(recall[ok[-1]], rel=1e-12)
        assert r.thresholds[name] == ds[ok[-1]] and r.thresholds[name] in set(pos.tolist())
        assert r.measure(name).details[0].startswith(f"at Hamming distance <= {ds[ok[-1]]:g} bits")
    ok = np.flatnonzero(recall >= 0.5)
    best = ok[precision[ok] == precision[ok].max()][0]  # the smallest distance among the best
    assert r["precision_at_recall@0.5"] == pytest.approx(precision[best], rel=1e-12)
    assert r.thresholds["precision_at_recall@0.5"] == ds[best]
    curve = r.pr_curve
    for t, p, q in zip(curve["threshold"], curve["precision"], curve["recall"]):
        i = int(np.flatnonzero(ds == t)[0])  # every curve threshold is a positive distance in bits
        assert (p, q) == pytest.approx((precision[i], recall[i]), rel=1e-12)


# ----------------------------------------------------------------------------- code lengths
@pytest.mark.parametrize("bits", [8, 24, 32, 48, 64, 70, 128])
def test_code_lengths_packed_and_unpacked(bits):
    B, y = _codes(40, bits, flip=0.2, seed=2)
    if bits > 64:  # the first word is the same for every code: only the later words rank
        B[:, :64] = B[0, :64]
    names = ["map", "hit_rate@1", "meanr", "pair_recall@t=3"]
    packed = np.packbits(B, axis=1)
    assert packed.shape[1] == -(-bits // 8)
    r = rc.evaluate(packed, query_labels=y, metrics=names, similarity="hamming")
    _same(rc.evaluate(B, query_labels=y, metrics=names, similarity="hamming"), r, names)
    _same(
        rc.evaluate(
            np.where(B, 1, -1).astype(np.int8), query_labels=y, metrics=names, similarity="hamming"
        ),
        r,
        names,
    )
    D = _distances(B, None).astype(np.float64)
    rel, keep = y[:, None] == y[None, :], ~np.eye(y.size, dtype=bool)
    for name in names[:3]:
        want = [
            query_metric(name, sorted_relevance(-D[i], rel[i], keep[i], "pessimistic"))
            for i in range(y.size)
        ]
        np.testing.assert_allclose(r.per_query[name], want, rtol=1e-12, err_msg=name)
    assert r.pair_counts["pair_recall@t=3"]["tp"] == int((D[keep & rel] <= 3).sum())
    # query / gallery split at the same length
    qg = rc.evaluate(
        packed[:10],
        packed[10:],
        query_labels=y[:10],
        gallery_labels=y[10:],
        metrics=["map"],
        similarity="hamming",
    )
    want = [
        query_metric(
            "map", sorted_relevance(-D[i, 10:], rel[i, 10:], np.ones(30, bool), "pessimistic")
        )
        for i in range(10)
    ]
    np.testing.assert_allclose(qg.per_query["map"], want, rtol=1e-12)


# ----------------------------------------------------------------------------- fail closed
def _bad(B):
    nan = B.astype(np.float64)
    nan[3, 2] = np.nan
    two = B.astype(np.float32)
    two[5, 0] = 2.0
    half = np.where(B, 1.0, -1.0)
    half[1, 1] = 0.5
    mixed = B.astype(np.int16)
    mixed[7] = np.where(B[7], 1, -1)
    return {
        "nan": (
            nan,
            ["has NaN in row(s) 3", "binary codes must be bool", "np.packbits(bits, axis=1)"],
        ),
        "two": (
            two,
            [
                "values other than {0, 1} or {-1, +1}",
                "row 5 has 2.0",
                "np.packbits(bits, axis=1)",
                "Threshold real-valued embeddings first (e.g. {name} > 0)",
            ],
        ),
        "half": (half, ["row 1 has 0.5", "Threshold real-valued embeddings first"]),
        "mixed": (
            mixed,
            [
                "mixes the {0, 1} and {-1, +1} conventions",
                "row 7 holds -1",
                "use one of them throughout, or pass bool codes",
            ],
        ),
        "uint8-bits": (
            B.astype(np.uint8),
            [
                "is uint8 and holds only 0 and 1",
                "{name}.astype(bool)",
                "np.packbits({name}.astype(bool), axis=1)",
            ],
        ),
    }


@pytest.mark.parametrize("side", ["queries", "gallery"])
@pytest.mark.parametrize("case", ["nan", "two", "half", "mixed", "uint8-bits"])
def test_bad_codes_are_refused_naming_the_array_and_the_fix(case, side):
    B, y = _codes(12, 16)
    bad, fragments = _bad(B)[case]
    Q, G = (bad, B) if side == "queries" else (B, bad)
    with pytest.raises(rc.InputError) as info:
        rc.evaluate(Q, G, query_labels=y, gallery_labels=y, metrics=["map"], similarity="hamming")
    msg = str(info.value)
    assert msg.startswith(side), msg
    for fragment in fragments:
        assert fragment.replace("{name}", side) in msg, (fragment, msg)
    if case == "two" and torch is not None:  # torch tensors are checked the same way
        with pytest.raises(rc.InputError, match="row 5 has 2.0"):
            rc.evaluate(
                torch.from_numpy(bad), metrics=["map"], query_labels=y, similarity="hamming"
            )


def test_codes_of_different_lengths_are_refused():
    """Lengths are compared in bits, after packing: never in columns (a packed uint8 side
    has 8 bits per column), and the message says how to fix it."""
    B, y = _codes(12, 24)
    kw = dict(query_labels=y, gallery_labels=y, metrics=["map"], similarity="hamming")
    with pytest.raises(
        rc.InputError, match=r"queries hold 16-bit codes but gallery holds 24-bit codes"
    ):
        rc.evaluate(B[:, :16], B, **kw)
    with pytest.raises(
        rc.InputError, match=r"queries hold 24-bit codes but gallery holds 16-bit codes"
    ):
        rc.evaluate(np.packbits(B, axis=1), np.packbits(B[:, :16], axis=1), **kw)
    # as many columns but not as many bits: 3 packed bytes (24 bits) against 3 unpacked bits
    with pytest.raises(rc.InputError) as info:
        rc.evaluate(np.packbits(B, axis=1), B[:, :3], **kw)
    assert str(info.value).startswith("queries hold 24-bit codes but gallery holds 3-bit codes")
    assert "8 bits per column" in str(info.value) and "pack both sides the same way" in str(
        info.value
    )
    with pytest.raises(
        rc.InputError, match="queries hold 3-bit codes but gallery holds 24-bit codes"
    ):
        rc.evaluate(B[:, :3], np.packbits(B, axis=1), **kw)


def test_packed_queries_and_unpacked_gallery_of_equal_bits_are_accepted():
    B, y = _codes(12, 24)
    kw = dict(query_labels=y, gallery_labels=y, metrics=["map"], similarity="hamming")
    want = rc.evaluate(B, B, **kw)
    assert rc.evaluate(np.packbits(B, axis=1), B, **kw)["map"] == want["map"]
    assert rc.evaluate(B, np.packbits(B, axis=1), **kw)["map"] == want["map"]


# ----------------------------------------------------------------------------- grouped, image-text
@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_grouped_recall_with_hamming_equals_dot_on_pm1(ties):
    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(12), 5)
    B = (rng.random((12, 10)) < 0.5)[y] ^ (rng.random((60, 10)) < 0.25)
    kw = dict(metrics=["grouped_recall@1", "grouped_recall@2"], group_size=3, ties=ties)
    for args, labels in [
        ((B,), dict(query_labels=y)),
        ((B[::2], B[1::2]), dict(query_labels=y[::2], gallery_labels=y[1::2])),
    ]:
        r = rc.evaluate(*args, similarity="hamming", **labels, **kw)
        packed = rc.evaluate(
            *(np.packbits(a, axis=1) for a in args), similarity="hamming", **labels, **kw
        )
        dot = rc.evaluate(*(_pm1(a) for a in args), similarity="dot", **labels, **kw)
        for name in kw["metrics"]:
            assert 0 < r[name] < 1
            assert r[name] == packed[name] == dot[name], name
            assert r.intervals[name] == packed.intervals[name] == dot.intervals[name]
            np.testing.assert_array_equal(r.per_query[name], dot.per_query[name])


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_image_text_with_hamming_equals_dot_on_pm1(ties):
    rng = np.random.default_rng(6)
    images = rng.random((12, 8)) < 0.5
    ci = np.repeat(np.arange(12), 3)
    captions = images[ci] ^ (rng.random((36, 8)) < 0.3)  # 8 bits: many ties
    kw = dict(n_resamples=0, ties=ties)
    r = rc.evaluate_image_text(images, captions, ci, similarity="hamming", **kw)
    packed = rc.evaluate_image_text(
        np.packbits(images, axis=1), np.packbits(captions, axis=1), ci, similarity="hamming", **kw
    )
    dot = rc.evaluate_image_text(_pm1(images), _pm1(captions), ci, similarity="dot", **kw)
    assert dict(r) == dict(packed) == dict(dot)
    assert 0 < r["i2t_recall@1"] < 1 and 0 < r["t2i_recall@1"] < 1
    # brute force: first relevant rank from integer distances, ties by policy
    D = _distances(images, captions)
    i2t = [
        np.flatnonzero(sorted_relevance(-D[i].astype(float), ci == i, np.ones(36, bool), ties))[0]
        + 1
        for i in range(12)
    ]
    t2i = [
        np.flatnonzero(
            sorted_relevance(
                -D[:, j].astype(float), np.arange(12) == ci[j], np.ones(12, bool), ties
            )
        )[0]
        + 1
        for j in range(36)
    ]
    assert r["i2t_recall@1"] == pytest.approx(np.mean(np.array(i2t) <= 1))
    assert r["t2i_recall@5"] == pytest.approx(np.mean(np.array(t2i) <= 5))
    assert r["i2t_meanr"] == pytest.approx(np.mean(i2t)) and r["t2i_meanr"] == pytest.approx(
        np.mean(t2i)
    )


# ----------------------------------------------------------------------------- backends and tiles
@pytest.mark.parametrize("ties", TIES)
def test_backends_kernels_and_tiles_agree_exactly(ties):
    Q, G, kwargs, _, _ = _problem("qg", bits=70)
    Q, G = np.packbits(Q, axis=1), np.packbits(G, axis=1)
    names = RANK + ["pair_recall@t=30", "recall_at_precision@0.4", "precision_at_recall@0.5"]
    kw = dict(metrics=names, similarity="hamming", ties=ties, **kwargs)
    base = rc.evaluate(Q, G, **kw)
    variants = {
        "numpy": dict(device="numpy"),
        "no kernels": dict(_use_kernels=False),
        "tile (3, 16)": dict(tile=(3, 16)),
        "tile (1, 16) numpy": dict(tile=(1, 16), device="numpy"),
    }
    if torch is not None:
        variants["torch-cpu"] = dict(device="torch-cpu")
        variants["torch-cpu tile"] = dict(device="torch-cpu", tile=(3, 16))
        if torch.cuda.is_available():  # the overflow-free SWAR tile and the vectorised pair path
            variants["cuda"] = dict(device="cuda")
            variants["cuda tile"] = dict(device="cuda", tile=(3, 16))
    for label, extra in variants.items():
        r = rc.evaluate(Q, G, **kw, **extra)
        _same(r, base, names)
        if label.startswith("tile"):
            assert (r.config["block"], r.config["chunk"]) == (extra["tile"][0], 16)
    with _kernels.use("numpy"):  # the numpy twins of every CPU kernel
        _same(rc.evaluate(Q, G, **kw), base, names)
        _same(rc.evaluate(Q, G, tile=(3, 16), **kw), base, names)
    if torch is not None:
        _same(
            rc.evaluate(torch.from_numpy(Q), torch.from_numpy(G), device="torch-cpu", **kw),
            base,
            names,
        )


# ----------------------------------------------------------------------------- YAML suite
SUITE = """
suite: codes
datasets:
  d: {queries: data/set.npz}
models:
  hash: {embeddings: {d: data/codes.npy}}
options: {similarity: hamming}
checks:
  - {metric: map, at_least: MAP_PASS}
  - {metric: hit_rate@1, at_least: HIT_FAIL}
  - {metric: pair_recall@t=6, at_least: PAIR_PASS}
"""


def test_yaml_suite_gates_packed_codes_from_a_npy_file(tmp_path):
    B, y = _codes(40, 32, n_classes=8, flip=0.2, seed=3)
    packed = np.packbits(B, axis=1)
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data/set.npz", inputs=np.zeros((40, 2), np.float32), labels=y)
    np.save(tmp_path / "data/codes.npy", packed)
    want = rc.evaluate(
        packed,
        query_labels=y,
        metrics=["map", "hit_rate@1", "pair_recall@t=6"],
        similarity="hamming",
    )
    assert want["hit_rate@1"] > 0.1
    text = (
        textwrap.dedent(SUITE)
        .replace("MAP_PASS", f"{want['map'] - 0.01:.4f}")
        .replace("HIT_FAIL", f"{min(want['hit_rate@1'] + 0.05, 0.99):.4f}")
        .replace("PAIR_PASS", f"{want['pair_recall@t=6'] - 0.01:.4f}")
    )
    (tmp_path / "rc_suite.yaml").write_text(text)
    suite = load_suite(tmp_path / "rc_suite.yaml")
    runner = SuiteRunner()
    outcomes = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # tie notes of 32-bit codes
        for case in suite.cases:
            try:
                runner.run(suite, case)
                outcomes[case.check.metric.name] = "pass"
            except AssertionError as exc:
                outcomes[case.check.metric.name] = str(exc)
    assert outcomes["map"] == "pass" and outcomes["pair_recall@t=6"] == "pass"
    msg = outcomes["hit_rate@1"]
    assert (
        msg.startswith("model 'hash' on dataset 'd'")
        and f"hit_rate@1 value {want['hit_rate@1']:.4f} <" in msg
    )
    seen = set()
    for key, got in runner.evaluations._results.items():  # the suite's passes, read back
        assert dict(key[3])["similarity"] == "hamming" and got.config["similarity"] == "hamming"
        for name in got:
            assert got[name] == want[name], name
            seen.add(name)
    assert seen == {"map", "hit_rate@1", "pair_recall@t=6"}


def test_image_text_codes_are_compared_in_bits_packed_or_not():
    rng = np.random.default_rng(4)
    B = rng.random((20, 24)) < 0.5
    C = np.repeat(B, 2, 0) ^ (rng.random((40, 24)) < 0.1)
    ci = np.repeat(np.arange(20), 2)
    kw = dict(metrics=["rsum", "i2t_meanr"], protocol="all", similarity="hamming", n_resamples=0)
    want = rc.evaluate_image_text(B, C, ci, **kw)
    for images, captions in ((np.packbits(B, axis=1), C), (B, np.packbits(C, axis=1))):
        got = rc.evaluate_image_text(images, captions, ci, **kw)
        assert dict(got) == dict(want)
    with pytest.raises(
        rc.InputError, match="images hold 16-bit codes but captions hold 24-bit codes"
    ):
        rc.evaluate_image_text(B[:, :16], C, ci, **kw)
