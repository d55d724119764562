"""Cross-checks of the engine against independent, established libraries.

Each test computes the same quantity with ``retrieval_checks.evaluate`` and with a
library that shares no code with it, on the same small data:

- pytorch-metric-learning ``AccuracyCalculator`` (faiss k-NN): ``precision_at_1``,
  ``r_precision``, ``mean_average_precision_at_r``, ``mean_average_precision`` and
  ``mean_reciprocal_rank``, leave-one-out, query/gallery split and "queries are part
  of the gallery";
- torchmetrics' functional retrieval metrics, per query;
- scikit-learn: ``calinski_harabasz_score`` for the discriminant ratio, and
  ``precision_score`` / ``recall_score`` / ``f1_score`` / ``precision_recall_curve``
  on the explicit list of all (query, gallery) pairs for the pair-threshold metrics.

The libraries are test-only dependencies; each test skips (``pytest.importorskip``)
when its library is missing. No GPU is used (``device="cpu"`` (torch BLAS) / ``"numpy"``).

Why the data is "tie-free" and how that is guaranteed
-----------------------------------------------------
The engine scores in float32; the references score in float32 too (faiss) or in
float64 (torchmetrics and sklearn get float64 scores computed from the same
normalised float32 embeddings). Two scores closer than the float32 rounding error
may be ordered differently by different summation orders, and then the libraries
would legitimately disagree on a rank. For unit vectors in d dimensions a float32
dot product is within gamma_d = d * 2**-24 / (1 - d * 2**-24) of the exact value
(about 4.8e-7 for d = 8), plus at most 2 ulp from the normalisation; faiss' L2 path
(|x|^2 + |y|^2 - 2 x.y) is within a similar bound in cosine units. ``DELTA`` bounds
all of these with margin. The data generators pick the first seed for which every
relevant / non-relevant pair of scores of a query that are adjacent in the float64
ranking differ by more than 2 * DELTA, so every implementation must produce the same
ranking and every comparison below can be tight (1e-6 or better) with no luck
involved. The pair-threshold metrics look at the global ranking of all pairs,
where such a gap cannot be had; there, the sklearn reference is evaluated twice
with every score moved by DELTA in the worst and in the best direction for the
metric, and the test requires both to agree (the metrics are monotone in that
move, so the engine's float32 answer is then pinned down exactly).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import retrieval_checks as rc

# the worker of the "processes" xdist group, which imports Lightning (and torchmetrics with
# it) for the integration tests, runs this module too: torchmetrics alone costs ~2 CPU-s
# to import after torch, which both workers paid (CONTRIBUTING.md, "Parallel runs")
pytestmark = pytest.mark.xdist_group("processes")

D = 8  # embedding dimension: small, so that the float32 error bound is small
DELTA = 1.5e-6  # > any |float32 score - exact score| here (see the module docstring)


# ----------------------------------------------------------------------------- data
def _clusters(rng, centers, labels, *, rescale=True):
    """Gaussian class clusters with per-class spread; optional random row norms."""
    n_classes = centers.shape[0]
    spread = rng.uniform(0.6, 1.4, size=n_classes)
    x = centers[labels] + rng.normal(size=(labels.size, centers.shape[1])) * spread[labels, None]
    if rescale:
        # random norms: cosine must ignore them, raw L2 would not
        x = x * rng.uniform(0.5, 2.0, size=(labels.size, 1))
    return x.astype(np.float32)


def normalize32(x: np.ndarray) -> np.ndarray:
    """Row-normalised float32, rounded from float64 (the engine's own recipe)."""
    x64 = np.asarray(x, np.float64)
    return (x64 / np.sqrt((x64 * x64).sum(axis=1))[:, None]).astype(np.float32)


def cosine64(q: np.ndarray, g: np.ndarray) -> np.ndarray:
    """float64 cosine scores from the normalised float32 embeddings."""
    return normalize32(q).astype(np.float64) @ normalize32(g).astype(np.float64).T


def min_mixed_gap(scores: np.ndarray, rel: np.ndarray) -> float:
    """Smallest score gap between a relevant and a non-relevant item adjacent in a
    row's ranking; excluded (self) entries are -inf and ignored."""
    order = np.argsort(-scores, axis=1, kind="stable")
    s = np.take_along_axis(scores, order, axis=1)
    r = np.take_along_axis(rel, order, axis=1)
    with np.errstate(invalid="ignore"):
        gap = s[:, :-1] - s[:, 1:]
    mixed = (r[:, :-1] != r[:, 1:]) & np.isfinite(s[:, :-1]) & np.isfinite(s[:, 1:])
    return float(gap[mixed].min()) if mixed.any() else np.inf


def _first_stable_seed(build, max_seed=200):
    """The data of the first seed whose rankings no float32 rounding can change."""
    for seed in range(max_seed):
        data = build(seed)
        if all(min_mixed_gap(S, rel) > 2 * DELTA for S, rel in data["rankings"]):
            return data
    raise AssertionError(
        "no seed gives a ranking that is stable under float32 rounding"
    )  # pragma: no cover


@functools.lru_cache(maxsize=None)
def loo_data():
    """Leave-one-out: 300 items, 12 classes of 25, d = 8 (R = 24 per query)."""

    def build(seed):
        rng = np.random.default_rng(seed)
        n_classes, per = 12, 25
        centers = rng.normal(size=(n_classes, D)) * 2.0
        labels = rng.permutation(np.repeat(np.arange(n_classes), per))
        x = _clusters(rng, centers, labels)
        S = cosine64(x, x)
        np.fill_diagonal(S, -np.inf)  # self-exclusion
        rel = labels[:, None] == labels[None, :]
        np.fill_diagonal(rel, False)
        return {"seed": seed, "x": x, "labels": labels, "S": S, "rel": rel, "rankings": [(S, rel)]}

    return _first_stable_seed(build)


@functools.lru_cache(maxsize=None)
def split_data():
    """Separate query and gallery sets; the queries of class 12 have no relevant
    gallery item (the gallery has classes 0..11), so they are skipped / lone."""

    def build(seed):
        rng = np.random.default_rng(1000 + seed)
        n_classes = 13
        centers = rng.normal(size=(n_classes, D)) * 2.0
        g_labels = rng.permutation(np.repeat(np.arange(12), 25))
        q_labels = rng.permutation(np.repeat(np.arange(n_classes), [12] * 12 + [6]))
        g = _clusters(rng, centers, g_labels)
        q = _clusters(rng, centers, q_labels)
        S = cosine64(q, g)
        rel = q_labels[:, None] == g_labels[None, :]
        return {
            "seed": seed,
            "q": q,
            "g": g,
            "q_labels": q_labels,
            "g_labels": g_labels,
            "S": S,
            "rel": rel,
            "rankings": [(S, rel)],
        }

    return _first_stable_seed(build)


@functools.lru_cache(maxsize=None)
def crossmodal_data():
    """50 "images" and 250 "captions"; caption i belongs to image i // 5."""

    def build(seed):
        rng = np.random.default_rng(2000 + seed)
        n_img, per = 50, 5
        img = rng.normal(size=(n_img, D)).astype(np.float32)
        owner = np.repeat(np.arange(n_img), per)
        cap = (img[owner] + 0.8 * rng.normal(size=(n_img * per, D))).astype(np.float32)
        S_t2i = cosine64(cap, img)
        rel_t2i = owner[:, None] == np.arange(n_img)[None, :]
        S_i2t, rel_i2t = S_t2i.T.copy(), rel_t2i.T.copy()
        return {
            "seed": seed,
            "img": img,
            "cap": cap,
            "owner": owner,
            "S_t2i": S_t2i,
            "rel_t2i": rel_t2i,
            "S_i2t": S_i2t,
            "rel_i2t": rel_i2t,
            "rankings": [(S_t2i, rel_t2i), (S_i2t, rel_i2t)],
        }

    return _first_stable_seed(build)


def test_data_is_nontrivial():
    """Guard the fixtures: the rankings are neither perfect nor random."""
    d = loo_data()
    r = rc.evaluate(d["x"], query_labels=d["labels"], metrics=["hit_rate@1", "map"], device="cpu")
    assert 0.6 < r["hit_rate@1"] < 0.99 and 0.3 < r["map"] < 0.95


# ----------------------------------------------------------------- pytorch-metric-learning
# PML's AccuracyCalculator (2.9), read from its source:
# - k=None ranks the whole reference set (minus the query itself when
#   ref_includes_query), k="max_bin_count" ranks the largest class size (minus self),
#   an int k ranks the top k.
# - mean_average_precision = sum_{i <= k} P@i * rel(i) / R with R the query's number
#   of relevant references, whatever k is. With k=None this is the full-ranking AP,
#   our `map`; with an integer k it is trec_eval's map_cut@k (divided by R, not by the
#   number H of relevant items in the top k, so it is NOT our `map@K` nor
#   torchmetrics' AP@k).
# - mean_average_precision_at_r = our `map@R`; r_precision = ours (both need k >= R:
#   k="max_bin_count" or None); precision_at_1 = our hit_rate@1 (= precision@1);
#   mean_reciprocal_rank = our `mrr` when k=None (PML scores 0 for a query whose first
#   relevant item is beyond k).
# - Queries whose label has no reference (other than themselves) are "lone" and left
#   out of every mean: our empty_queries="skip".
# - Self-exclusion (reference=None, or ref_includes_query=True with the queries as the
#   first rows of the reference) removes the k-NN result whose index equals the
#   query's row index.
# - The default knn_func is faiss IndexFlatL2 (Euclidean); on unit vectors it ranks as
#   cosine does. FaissKNN(index_init_fn=faiss.IndexFlatIP) ranks by inner product.
# Its numbers are float64 except mean_reciprocal_rank (float32 reciprocals averaged in
# float32: error < 1e-7 for these sizes), so 1e-6 holds throughout.

PML_METRICS = (
    "precision_at_1",
    "r_precision",
    "mean_average_precision_at_r",
    "mean_average_precision",
    "mean_reciprocal_rank",
)
OURS_FOR_PML = {
    "precision_at_1": "hit_rate@1",
    "r_precision": "r_precision",
    "mean_average_precision_at_r": "map@R",
    "mean_average_precision": "map",
    "mean_reciprocal_rank": "mrr",
}


def _pml():
    pytest.importorskip("faiss")
    torch = pytest.importorskip("torch")
    ac = pytest.importorskip("pytorch_metric_learning.utils.accuracy_calculator")
    inference = pytest.importorskip("pytorch_metric_learning.utils.inference")
    return torch, ac, inference


def _pml_calculator(knn: str, k=None, include=PML_METRICS):
    torch, ac, inference = _pml()
    import faiss

    knn_func = (
        inference.FaissKNN(index_init_fn=faiss.IndexFlatIP) if knn == "ip" else None
    )  # None: IndexFlatL2
    return ac.AccuracyCalculator(
        include=include, k=k, device=torch.device("cpu"), knn_func=knn_func
    )


def _pml_accuracy(
    calc, query, query_labels, reference=None, reference_labels=None, ref_includes_query=False
):
    out = calc.get_accuracy(query, query_labels, reference, reference_labels, ref_includes_query)
    return {k: float(v) for k, v in out.items()}


# (knn of PML, what we pass, our similarity): all three rank alike on this data
PML_SETUPS = [
    pytest.param("l2", "normalized", "neg_l2", id="pml_l2-ours_neg_l2"),
    pytest.param("l2", "normalized", "cosine", id="pml_l2_unit-ours_cosine"),
    pytest.param("ip", "raw", "cosine", id="pml_ip_unit-ours_cosine_raw"),
]


@pytest.mark.parametrize("device", ["cpu", "numpy"])
@pytest.mark.parametrize("knn, ours_input, similarity", PML_SETUPS)
def test_pml_leave_one_out(knn, ours_input, similarity, device):
    d = loo_data()
    unit = normalize32(d["x"])
    calc = _pml_calculator(knn)
    ref = _pml_accuracy(calc, unit, d["labels"])  # reference=None: leave-one-out
    ours_x = unit if ours_input == "normalized" else d["x"]
    r = rc.evaluate(
        ours_x,
        query_labels=d["labels"],
        metrics=list(OURS_FOR_PML.values()),
        similarity=similarity,
        device=device,
    )
    assert r.n_skipped == 0
    for name in PML_METRICS:
        assert r[OURS_FOR_PML[name]] == pytest.approx(ref[name], abs=1e-6), name


def test_pml_k_conventions():
    """PML's k settings: "max_bin_count" suffices for MAP@R and R-precision, and an
    integer k turns mean_average_precision into map_cut@k (divided by R)."""
    d = loo_data()
    unit = normalize32(d["x"])
    ref_bin = _pml_accuracy(
        _pml_calculator(
            "ip", k="max_bin_count", include=("r_precision", "mean_average_precision_at_r")
        ),
        unit,
        d["labels"],
    )
    k = 10
    ref_k = _pml_accuracy(
        _pml_calculator("ip", k=k, include=("mean_average_precision", "precision_at_1")),
        unit,
        d["labels"],
    )
    r = rc.evaluate(
        d["x"],
        query_labels=d["labels"],
        device="cpu",
        metrics=["r_precision", "map@R", f"map_cut@{k}", f"map@{k}", "hit_rate@1"],
    )
    assert r["r_precision"] == pytest.approx(ref_bin["r_precision"], abs=1e-6)
    assert r["map@R"] == pytest.approx(ref_bin["mean_average_precision_at_r"], abs=1e-6)
    assert r[f"map_cut@{k}"] == pytest.approx(ref_k["mean_average_precision"], abs=1e-6)
    assert r["hit_rate@1"] == pytest.approx(ref_k["precision_at_1"], abs=1e-6)
    # and it is not map@K (normalised by the hits in the top K): a real difference here
    assert abs(r[f"map@{k}"] - ref_k["mean_average_precision"]) > 0.05


@pytest.mark.parametrize("knn, ours_input, similarity", PML_SETUPS)
def test_pml_query_gallery_split(knn, ours_input, similarity):
    d = split_data()
    calc = _pml_calculator(knn)
    ref = _pml_accuracy(
        calc, normalize32(d["q"]), d["q_labels"], normalize32(d["g"]), d["g_labels"], False
    )
    q, g = (
        (normalize32(d["q"]), normalize32(d["g"]))
        if ours_input == "normalized"
        else (d["q"], d["g"])
    )
    r = rc.evaluate(
        q,
        g,
        query_labels=d["q_labels"],
        gallery_labels=d["g_labels"],
        metrics=list(OURS_FOR_PML.values()),
        similarity=similarity,
        device="cpu",
    )
    # the 6 queries of class 12 are PML's "lone" queries and our skipped ones
    assert r.n_skipped == 6 and r.n_used == d["q"].shape[0] - 6
    assert np.isnan(r.per_query["map"][d["q_labels"] == 12]).all()
    for name in PML_METRICS:
        assert r[OURS_FOR_PML[name]] == pytest.approx(ref[name], abs=1e-6), name


@pytest.mark.parametrize("shuffle", [False, True], ids=["prefix", "shuffled"])
def test_pml_queries_inside_gallery(shuffle):
    """PML's ref_includes_query=True (queries = the first rows of the reference)
    against our id-based self-exclusion; our queries may also come in any order."""
    d = loo_data()
    unit = normalize32(d["x"])
    n_q = 120
    ref = _pml_accuracy(
        _pml_calculator("ip"), unit[:n_q], d["labels"][:n_q], unit, d["labels"], True
    )
    ids = np.arange(n_q)
    if shuffle:
        ids = np.random.default_rng(7).permutation(n_q)
    gallery_ids = np.array([f"item{i}" for i in range(unit.shape[0])])
    r = rc.evaluate(
        d["x"][ids],
        d["x"],
        query_labels=d["labels"][ids],
        gallery_labels=d["labels"],
        query_ids=gallery_ids[ids],
        gallery_ids=gallery_ids,
        metrics=list(OURS_FOR_PML.values()),
        device="cpu",
    )
    assert (r.n_candidates == unit.shape[0] - 1).all()
    for name in PML_METRICS:  # means are invariant under the query order
        assert r[OURS_FOR_PML[name]] == pytest.approx(ref[name], abs=1e-6), name
    # and the per-query values equal leave-one-out's for those items
    loo = rc.evaluate(d["x"], query_labels=d["labels"], metrics=["map", "mrr"], device="cpu")
    np.testing.assert_allclose(r.per_query["map"], loo.per_query["map"][ids], rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.per_query["mrr"], loo.per_query["mrr"][ids], rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- torchmetrics
# torchmetrics 1.x functional retrieval metrics (read from their source):
# - preds are cast to float32 and ranked with topk / argsort (descending);
# - retrieval_average_precision, retrieval_precision, retrieval_recall and
#   retrieval_reciprocal_rank zero the target where preds <= 0, i.e. an item with a
#   non-positive score counts as "not retrieved" even when it is relevant
#   (retrieval_hit_rate and retrieval_r_precision do not). Cosine scores are
#   negative for far-away relevant items, so we pass cosine + 2 (in [1, 3]): the same
#   ranking with every item retrieved. The float32 cast of it moves a score by at most
#   1.2e-7 < DELTA, so the ranking is still the float64 one.
# - retrieval_average_precision without top_k averages precision over the relevant
#   items (= our `map` when every item is retrieved); with top_k it divides by the
#   number of relevant items in the top k (= our `map@K`).
# - The arithmetic is float32 (AP: float32 quotients i / rank averaged in float32,
#   at most 25 terms here; relative error < 25 * 2**-24 < 1.5e-6 in the worst case),
#   hence atol 2e-6 for AP and 1e-6 for everything else; the means are taken in
#   float64 over the per-query values.

KS = (1, 5, 10, 30)


def _tm():
    pytest.importorskip("torch")
    return pytest.importorskip("torchmetrics.functional.retrieval")


def _tm_per_query(S, rel, fn, **kw):
    import torch

    out = np.empty(S.shape[0])
    for i, (s, r) in enumerate(zip(S, rel)):
        keep = np.isfinite(s)  # drop the self entry
        out[i] = float(fn(torch.from_numpy(s[keep] + 2.0), torch.from_numpy(r[keep]), **kw))
    return out


def _tm_reference(S, rel, ks):
    tm = _tm()
    ref = {
        "map": (_tm_per_query(S, rel, tm.retrieval_average_precision), 2e-6),
        "mrr": (_tm_per_query(S, rel, tm.retrieval_reciprocal_rank), 1e-6),
        "r_precision": (_tm_per_query(S, rel, tm.retrieval_r_precision), 1e-6),
    }
    for k in ks:
        ref[f"map@{k}"] = (_tm_per_query(S, rel, tm.retrieval_average_precision, top_k=k), 2e-6)
        ref[f"precision@{k}"] = (_tm_per_query(S, rel, tm.retrieval_precision, top_k=k), 1e-6)
        ref[f"recall@{k}"] = (_tm_per_query(S, rel, tm.retrieval_recall, top_k=k), 1e-6)
        ref[f"hit_rate@{k}"] = (_tm_per_query(S, rel, tm.retrieval_hit_rate, top_k=k), 1e-6)
    return ref


def _compare_per_query(result, ref):
    for name, (values, atol) in ref.items():
        np.testing.assert_allclose(result.per_query[name], values, rtol=0, atol=atol, err_msg=name)
        assert result[name] == pytest.approx(float(np.mean(values)), abs=atol), name


@functools.lru_cache(maxsize=None)
def _tm_loo_reference():
    d = loo_data()
    return _tm_reference(d["S"], d["rel"], KS)


@pytest.mark.parametrize(
    "device, ties, tile",
    [("cpu", "pessimistic", None), ("numpy", "pessimistic", None), ("cpu", "optimistic", (37, 50))],
    ids=["torch", "numpy", "torch-optimistic-small-tiles"],
)
def test_torchmetrics_leave_one_out(device, ties, tile):
    d = loo_data()
    ref = _tm_loo_reference()
    r = rc.evaluate(
        d["x"], query_labels=d["labels"], metrics=list(ref), device=device, ties=ties, tile=tile
    )
    assert r.n_used == d["x"].shape[0]
    _compare_per_query(r, ref)
    # non-trivial values: torchmetrics' map@K and map really differ here
    assert abs(r["map@10"] - r["map"]) > 0.05


def test_torchmetrics_query_gallery_split():
    d = split_data()
    used = d["rel"].any(axis=1)
    ref = _tm_reference(d["S"][used], d["rel"][used], KS)
    r = rc.evaluate(
        d["q"],
        d["g"],
        query_labels=d["q_labels"],
        gallery_labels=d["g_labels"],
        metrics=list(ref),
        device="cpu",
    )
    assert r.n_skipped == int((~used).sum())
    for name, (values, atol) in ref.items():
        assert np.isnan(r.per_query[name][~used]).all()
        np.testing.assert_allclose(r.per_query[name][used], values, rtol=0, atol=atol, err_msg=name)
        assert r[name] == pytest.approx(float(np.mean(values)), abs=atol), name


# ------------------------------------------------------------------ explicit relevance
@pytest.mark.parametrize("direction", ["t2i", "i2t"])
@pytest.mark.parametrize("form", ["lists", "dict", "bool_matrix"])
def test_explicit_relevance_crossmodal(direction, form):
    """Image-text style 1:5 pairing given as explicit relevance, against torchmetrics."""
    d = crossmodal_data()
    owner = d["owner"]
    if direction == "t2i":  # caption i -> image i // 5 (R = 1)
        queries, gallery, S, rel = d["cap"], d["img"], d["S_t2i"], d["rel_t2i"]
        lists = [[int(owner[i])] for i in range(owner.size)]
        ks = (1, 5, 10)
    else:  # image j -> captions 5j .. 5j + 4 (R = 5)
        queries, gallery, S, rel = d["img"], d["cap"], d["S_i2t"], d["rel_i2t"]
        lists = [list(np.flatnonzero(owner == j)) for j in range(d["img"].shape[0])]
        ks = (1, 5, 10, 50)
    relevance = {"lists": lists, "dict": dict(enumerate(lists)), "bool_matrix": rel}[form]
    ref = _tm_reference(S, rel, ks)
    r = rc.evaluate(queries, gallery, relevance=relevance, metrics=list(ref), device="cpu")
    assert r.n_skipped == 0
    _compare_per_query(r, ref)
    if direction == "t2i":  # with R = 1 these coincide
        np.testing.assert_allclose(r.per_query["map"], r.per_query["mrr"], rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- scikit-learn
def _sk():
    return pytest.importorskip("sklearn.metrics")


@pytest.mark.parametrize("case", ["loo", "split"])
def test_discriminant_ratio_is_calinski_harabasz(case):
    """J = Tr(S_B) / Tr(S_W) = CH * (k - 1) / (n - k)."""
    skm = _sk()
    torch = pytest.importorskip("torch")
    d = loo_data() if case == "loo" else split_data()
    x, y = (d["x"], d["labels"]) if case == "loo" else (d["g"], d["g_labels"])
    n, k = x.shape[0], np.unique(y).size
    expected = skm.calinski_harabasz_score(x.astype(np.float64), y) * (k - 1) / (n - k)

    assert rc.discriminant_ratio(x, y) == pytest.approx(expected, rel=1e-10)
    assert rc.discriminant_ratio(x, [f"c{v}" for v in y]) == pytest.approx(expected, rel=1e-10)
    # torch float64: the same arithmetic
    t64 = rc.discriminant_ratio(torch.from_numpy(x.astype(np.float64)), torch.from_numpy(y))
    assert float(t64) == pytest.approx(expected, rel=1e-10)
    # torch float32 keeps the input dtype: sums of n * d float32 terms (a relative
    # error of a few 1e-7 in practice, n * 2**-24 ~ 2e-5 at worst) -> rel 1e-4
    t32 = rc.discriminant_ratio(torch.from_numpy(x), torch.from_numpy(y))
    assert t32.dtype == torch.float32 and float(t32) == pytest.approx(expected, rel=1e-4)
    # through evaluate: leave-one-out uses the queries, a split uses the gallery
    if case == "loo":
        r = rc.evaluate(x, query_labels=y, metrics=["discriminant_ratio"], device="cpu")
    else:
        r = rc.evaluate(
            d["q"],
            x,
            query_labels=d["q_labels"],
            gallery_labels=y,
            metrics=["discriminant_ratio"],
            device="cpu",
        )
    assert r["discriminant_ratio"] == pytest.approx(expected, rel=1e-10)


def test_discriminant_ratio_torch_is_differentiable():
    skm = _sk()
    torch = pytest.importorskip("torch")
    d = loo_data()
    x = torch.from_numpy(d["x"].copy()).requires_grad_(True)
    y = torch.from_numpy(d["labels"])
    j = rc.discriminant_ratio(x, y)
    j.backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    # gradient ascent on J raises J and the Calinski-Harabasz index with it
    x2 = (x + 0.5 * x.grad / x.grad.norm()).detach().numpy()
    assert skm.calinski_harabasz_score(
        x2.astype(np.float64), d["labels"]
    ) > skm.calinski_harabasz_score(d["x"].astype(np.float64), d["labels"])
    # the analytic gradient matches finite differences (float64, small batch)
    rng = np.random.default_rng(3)
    xs = torch.from_numpy(rng.normal(size=(15, 3))).requires_grad_(True)
    ys = torch.from_numpy(np.repeat(np.arange(3), 5))
    assert torch.autograd.gradcheck(lambda t: rc.discriminant_ratio(t, ys), (xs,))


def _all_pairs(case):
    """float64 scores and relevance of every (query, gallery) pair after self-exclusion."""
    d = loo_data() if case == "loo" else split_data()
    S, rel = d["S"], d["rel"]
    keep = np.isfinite(S)  # leave-one-out: the diagonal is -inf
    return d, S[keep], rel[keep]


def _robust(fn, scores, y):
    """fn on the worst-case and best-case DELTA-moved scores; both must agree."""
    worst = fn(np.where(y, scores - DELTA, scores + DELTA), y)
    best = fn(np.where(y, scores + DELTA, scores - DELTA), y)
    assert worst == pytest.approx(best, abs=1e-12), "data too close to a tie for this check"
    return worst


def _evaluate_pairs(d, case, metrics, device="cpu"):
    if case == "loo":
        return rc.evaluate(d["x"], query_labels=d["labels"], metrics=metrics, device=device)
    return rc.evaluate(
        d["q"],
        d["g"],
        query_labels=d["q_labels"],
        gallery_labels=d["g_labels"],
        metrics=metrics,
        device=device,
    )


def _clear_threshold(scores, t):
    for j in range(100):
        c = round(t + 0.001 * j, 3)
        if np.abs(scores - c).min() > DELTA:
            return c
    raise AssertionError(f"no clear threshold near {t}")  # pragma: no cover


@pytest.mark.parametrize("case", ["loo", "split"])
def test_pair_threshold_metrics_against_sklearn(case):
    skm = _sk()
    d, s, y = _all_pairs(case)
    # thresholds near these, nudged (by 0.001 steps) until no score lies within DELTA
    # of one, so that the float32 and float64 predictions are certainly the same
    thresholds = [_clear_threshold(s, t) for t in (0.3, 0.6, 0.85, 0.95)]
    names = [f"pair_{m}@t={t}" for t in thresholds for m in ("precision", "recall", "f1")]
    r = _evaluate_pairs(d, case, names)
    for t in thresholds:
        pred = s >= t
        tn, fp, fn, tp = skm.confusion_matrix(y, pred, labels=[False, True]).ravel()
        assert r[f"pair_precision@t={t}"] == pytest.approx(skm.precision_score(y, pred), abs=1e-12)
        assert r[f"pair_recall@t={t}"] == pytest.approx(skm.recall_score(y, pred), abs=1e-12)
        assert r[f"pair_f1@t={t}"] == pytest.approx(skm.f1_score(y, pred), abs=1e-12)
        assert {k: r.pair_counts[f"pair_f1@t={t}"][k] for k in ("tp", "fp", "fn")} == {
            "tp": tp,
            "fp": fp,
            "fn": fn,
        }
        assert r.pair_counts[f"pair_f1@t={t}"]["n_positive"] == int(y.sum())
        assert r.pair_counts[f"pair_f1@t={t}"]["n_negative"] == int((~y).sum())


def _recall_at_precision(skm, p):
    def fn(scores, y):
        precision, recall, _ = skm.precision_recall_curve(y, scores)
        ok = precision >= p  # the final (precision 1, recall 0) point adds recall 0 only
        return float(recall[ok].max()) if ok.any() else 0.0

    return fn


def _precision_at_recall(skm, q):
    def fn(scores, y):
        precision, recall, _ = skm.precision_recall_curve(y, scores)
        return float(precision[recall >= q].max())

    return fn


@pytest.mark.parametrize("case", ["loo", "split"])
@pytest.mark.parametrize("device", ["cpu", "numpy"])
def test_pr_curve_metrics_against_sklearn(case, device):
    skm = _sk()
    d, s, y = _all_pairs(case)
    levels_p = (0.5, 0.8, 0.9, 0.95, 0.99)
    levels_q = (0.1, 0.5, 0.8, 0.9, 0.99, 1.0)
    names = [f"recall_at_precision@{p}" for p in levels_p] + [
        f"precision_at_recall@{q}" for q in levels_q
    ]
    r = _evaluate_pairs(d, case, names, device=device)
    for p in levels_p:
        expected = _robust(_recall_at_precision(skm, p), s, y)
        assert r[f"recall_at_precision@{p}"] == pytest.approx(expected, abs=1e-12), p
    for q in levels_q:
        expected = _robust(_precision_at_recall(skm, q), s, y)
        assert r[f"precision_at_recall@{q}"] == pytest.approx(expected, abs=1e-12), q
    # the values are informative (neither 0 nor 1 everywhere)
    assert 0.0 < r["recall_at_precision@0.9"] < 1.0
    assert 0.0 < r["precision_at_recall@0.9"] < 1.0
