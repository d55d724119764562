"""evaluate_run reads plain ``{qid: {docid: value}}`` dicts at once (issue 32,
:func:`retrieval_checks.engine._runs._plain_flat`): ids checked and coded over whole
arrays (each id a number sorted with its index, or the number alone by an argsort, or
its bytes as 64-bit words, or a dict for ids over 64 bytes), values converted in one
pass; each query's block sorted on its own, or (numba) every entry by one sort of
(query, top bits of the score, index) with runs of equal top bits settled. The result
is the entry-by-entry reading's, bit for bit, whatever the ids' lengths, prefixes and
order, every tie policy and option, with numba's twins and without; anything not plain
takes the entry path and its message.

Cost: about 8 CPU-s (loaded 2-core machine), most of it the engine's one-time start
(importing numba, loading the cached kernels).
"""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.engine import _runs
from retrieval_checks.engine.counting import _kernels

METRICS = ["map", "ndcg@5", "ndcg_exp@10", "recall@3", "mrr", "precision@2", "bpref", "medr"]
METRICS += ["rbp_residual@0.8", "iprec_at_recall@0.5", "hit_rate@2"]


def _ids(rng, n: int, short: bool = False) -> list[str]:
    """Distinct ids of mixed lengths: prefixes of each other ("d1", "d10", "d100"), ids of
    exactly 8 and 16 bytes (whole words), long ones, and characters on both sides of the
    digits in code-point order. ``short``: a few characters, up to 6 of them (coded as
    numbers in a small base: one sort); else up to 30 (coded as 64-bit words)."""
    if short:
        pool = ["1", "10", "100", "2", "9", "0", "00", "a1", "a", "a10", "b", "d99999"]
        pool += [f"d{i:0{rng.integers(1, 5)}d}" for i in range(3 * n)]
        return list(dict.fromkeys(rng.permutation(pool).tolist()))[:n]
    pool = ["d1", "d10", "d100", "d2", "D1", "abcdefgh", "abcdefgh1", "abcdefg"]
    pool += ["x" * 16, "x" * 15 + "y", "x" * 17, "~", "!", "a-b_c.d/e:f", "Z" * 30, "0", "00"]
    pool += [f"doc{i:0{rng.integers(1, 6)}d}" for i in range(3 * n)]
    return list(dict.fromkeys(rng.permutation(pool).tolist()))[:n]


def _case(seed: int, levels: int = 4, short: bool = False):
    rng = np.random.default_rng(seed)
    docs = _ids(rng, 40, short)
    run = {
        f"q{q}": {docs[d]: float(rng.integers(0, levels)) for d in rng.choice(40, 12, False)}
        for q in range(9)
    }
    qrels = {
        f"q{q}": {docs[d]: int(rng.integers(-1, 4)) for d in rng.choice(40, 8, False)}
        for q in range(0, 11)
    }
    return run, qrels


def _same(a, b):
    assert list(a) == list(b)
    for k in a:
        assert a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])), k
    for k in a.per_query:
        assert np.array_equal(a.per_query[k], b.per_query[k], equal_nan=True), k
    assert dict(a.tie_values) == dict(b.tie_values)
    assert list(a.query_ids) == list(b.query_ids)
    assert np.array_equal(a.first_relevant_rank, b.first_relevant_rank)
    assert np.array_equal(a.skipped_queries, b.skipped_queries)
    assert np.array_equal(a.outside_queries, b.outside_queries)
    assert a.config == b.config
    assert a.tied_share == b.tied_share


def _entry_by_entry(monkeypatch, run, qrels, *args, **kw):
    """evaluate_run reading entry by entry: the run given as a defaultdict (as a loop
    builds it), which is not read whole at once (only plain dicts are), and no row read
    at once (forced: valid rows always are)."""
    run = collections.defaultdict(dict, run)
    assert _runs._plain_flat(run, qrels) is None
    with monkeypatch.context() as m:
        m.setattr(_runs, "_plain_row", lambda *a: None)
        return rc.evaluate_run(run, qrels, *args, **kw)


def _read_at_once(monkeypatch, *args, **kw):
    calls = []
    real = _runs._plain_flat
    with monkeypatch.context() as m:
        m.setattr(_runs, "_plain_flat", lambda *a: calls.append(real(*a)) or calls[-1])
        out = rc.evaluate_run(*args, **kw)
    assert calls and calls[0] is not None, "the plain dicts were not read at once"
    return out


@pytest.mark.parametrize("seed, short", [(0, False), (1, True), (2, False), (3, True)])
@pytest.mark.parametrize("ties", ["pessimistic", "optimistic", "average", "docid"])
@pytest.mark.parametrize(
    "options",
    [{}, {"queries": "run"}, {"queries": "qrels", "relevance_level": 2}, {"k": 5}],
    ids=["both", "run", "qrels-level2", "k5"],
)
def test_dicts_read_at_once_give_the_entry_by_entry_result(monkeypatch, seed, short, ties, options):
    run, qrels = _case(seed, levels=3 if ties != "docid" else 2, short=short)
    if "k" in options and ties != "docid":
        run = {q: {d: v + i * 1e-3 for i, (d, v) in enumerate(r.items())} for q, r in run.items()}
    args = (run, qrels, METRICS)
    _same(
        _read_at_once(monkeypatch, *args, ties=ties, **options),
        _entry_by_entry(monkeypatch, *args, ties=ties, **options),
    )


def test_docid_order_is_code_point_order_across_lengths(monkeypatch):
    """One tie of every id: trec_eval's order (strcmp, descending) decides every rank; the
    ids differ past the first 8-byte word, are prefixes of each other, or differ in case."""
    ids = ["x" * 16, "x" * 15 + "y", "x" * 17, "d1", "d10", "D1", "abcdefgh", "abcdefgh1", "~"]
    for rel in ids:
        run = {"q": dict.fromkeys(ids, 1.0)}
        qrels = {"q": {rel: 1}}
        res = _read_at_once(monkeypatch, run, qrels, ["mrr"], ties="docid")
        assert res.first_relevant_rank[0] == 1 + sorted(ids, reverse=True).index(rel)
        _same(res, _entry_by_entry(monkeypatch, run, qrels, ["mrr"], ties="docid"))


def test_one_long_id_among_short_ones_is_coded_by_a_dict(monkeypatch):
    """Padding every id to the longest (over 64 bytes) would take too much memory and
    time: the ids are then coded by a dict, with the same codes (code-point order) and
    result."""
    rng = np.random.default_rng(5)
    long_id = "L" * 65
    monkeypatch.setattr(_runs, "_padded", None)  # not padded
    run = {f"q{q}": {f"d{d}": float(rng.integers(0, 3)) for d in range(30)} for q in range(4)}
    run["q0"][long_id] = 1.0
    qrels = {"q0": {long_id: 2, "d3": 1}, "q1": {"d4": 1}, "q2": {"d0": 3}}
    ids = [d for r in run.values() for d in r] + [d for r in qrels.values() for d in r]
    codes, names = _runs._code_ids(_runs._plain_ids(ids))
    assert names == sorted(set(ids))
    assert [names[c] for c in codes] == ids
    for ties in ("docid", "average"):
        _same(
            _read_at_once(monkeypatch, run, qrels, METRICS, ties=ties),
            _entry_by_entry(monkeypatch, run, qrels, METRICS, ties=ties),
        )


@pytest.fixture(params=["numba", "numpy"])
def kernels(request):
    """The numba twins (:mod:`retrieval_checks.engine._runs_numba`) or the numpy code,
    chosen by the engine's one kernel switch (:func:`._kernels.use`)."""
    if request.param == "numba" and _runs._jit() is None:
        pytest.skip("numba is not the engine's accelerator here")
    with _kernels.use(request.param):
        assert (_runs._jit() is None) == (request.param == "numpy")
        yield request.param


@pytest.mark.parametrize("short", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_codes_are_the_ranks_of_the_ids_in_code_point_order(seed, short, kernels):
    rng = np.random.default_rng(seed)
    distinct = _ids(rng, 60, short)
    ids = [distinct[i] for i in rng.integers(0, 60, 500)]
    codes, names = _runs._code_ids(_runs._plain_ids(ids))
    assert names == sorted(set(ids))
    assert [names[c] for c in codes] == ids


def test_codes_and_names_of_many_distinct_ids(kernels):
    """5,004 distinct ids, each repeated, shuffled: the codes are the ranks in code-point
    order, and the names (cut from the joined bytes at once) the sorted ids."""
    rng = np.random.default_rng(7)
    distinct = [f"d{i}" for i in rng.permutation(5000)] + ["0", "00", "~", "D"]
    ids = [distinct[i] for i in rng.integers(0, len(distinct), 20_000)] + distinct
    codes, names = _runs._code_ids(_runs._plain_ids(ids))
    assert names == sorted(distinct)
    assert [names[c] for c in codes] == ids


@pytest.mark.parametrize("alphabet, width", [("ab", 40), ("d0123456789", 16)])
def test_ids_whose_numbers_fill_64_bits_are_coded_by_an_argsort(
    alphabet, width, kernels, monkeypatch
):
    """Ids whose number in the base of their bytes fits 64 bits but not with the index
    below it (40 bytes of two letters: 3**40 > 2**63; 16 of eleven: 11**16 > 2**54):
    numba codes the numbers alone by an argsort (nothing padded), numpy pads them into
    words; the same codes, prefixes first."""
    rng = np.random.default_rng(width)
    pool = {
        "".join(rng.choice(list(alphabet), int(rng.integers(1, width + 1)))) for _ in range(900)
    }
    distinct = sorted(pool | {alphabet[0] * width, alphabet[-1] * width, alphabet[0]})
    ids = [distinct[i] for i in rng.integers(0, len(distinct), 3000)] + distinct
    plain = _runs._plain_ids(ids)
    base = int(plain[3].sum()) + 1
    assert base**width > 1 << (64 - (len(ids) - 1).bit_length()) and base**width <= 1 << 64
    if kernels == "numba":
        monkeypatch.setattr(_runs, "_padded", None)  # not padded
    codes, names = _runs._code_ids(plain)
    assert names == distinct
    assert [names[c] for c in codes] == ids


@pytest.mark.parametrize("n", [1, 2, 3, 7, 200])
def test_the_numba_and_numpy_id_steps_agree(n):
    """Bounds, bytes used, codes and first ids: the same integers from both."""
    if _runs._jit() is None:
        pytest.skip("numba is not the engine's accelerator here")
    rng = np.random.default_rng(n)
    for short in (False, True):
        distinct = _ids(rng, 30, short)
        ids = [distinct[i] for i in rng.integers(0, 30, n)]
        fast = _runs._plain_ids(ids)
        fast_codes = _runs._code_ids(fast)
        with _kernels.use("numpy"):
            assert _runs._jit() is None
            slow = _runs._plain_ids(ids)
            slow_codes = _runs._code_ids(slow)
        for a, b in zip(fast, slow):
            assert np.array_equal(a, b)
        assert np.array_equal(fast_codes[0], slow_codes[0]) and fast_codes[1] == slow_codes[1]


@pytest.mark.parametrize(
    "ids",
    [["a", ""], ["", "a"], ["a", "", "b"], [""], ["a b"], ["a\nb"], ["a\n"], ["\na"]]
    + [["a\tb"], ["é"], ["a\x00"], [1], ["a", "b\x7f"], ["a", 2]],
)
def test_ids_that_are_not_plain_are_not_read_at_once(ids, kernels):
    assert _runs._plain_ids(ids) is None


def test_integer_query_ids_and_identical_ids(monkeypatch):
    """Integer query ids read as their text; ignore_identical_ids drops a query's own id."""
    run = {1: {"1": 3.0, "d2": 2.0, "d3": 1.0}, 2: {"d2": 1.0, "2": 0.5}}
    qrels = {"1": {"1": 1, "d3": 1}, "2": {"d2": 1}}
    for flag in (False, True):
        res = _read_at_once(monkeypatch, run, qrels, METRICS, ignore_identical_ids=flag)
        _same(res, _entry_by_entry(monkeypatch, run, qrels, METRICS, ignore_identical_ids=flag))
    assert res.config["identical_ids_dropped"] == 2


@pytest.mark.parametrize(
    "run, qrels",
    [
        ({1: {"d": 1.0}, "1": {"d": 2.0}}, {"1": {"d": 1}}),  # one query twice
        ({"q": {"d": np.float64(1.0)}}, {"q": {"d": 1}}),  # a numpy score
        ({"q": {"d": 1}}, {"q": {"d": 1}}),  # an int score
        ({"q": {"d": 1.0}}, {"q": {"d": 1.0}}),  # a float grade
        ({"q": {"d": 1.0}}, {"q": {"d": 2**63}}),  # a grade beyond int64
        ({"q": {5: 1.0}}, {"q": {"5": 1}}),  # an integer document id
        ({"q": [("d", 1.0)]}, {"q": {"d": 1}}),  # a row that is not a dict
        ({"q": {"d": 1.0}}, {True: {"d": 1}}),  # a bool query id
    ],
)
def test_anything_not_plain_takes_the_entry_path(run, qrels):
    assert _runs._plain_flat(run, qrels) is None


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("docid", [False, True])
def test_query_blocks_sorted_one_by_one_give_the_lexsort_order(seed, docid, kernels):
    """Each query's contiguous block sorted on its own (blocks of 64 entries or more on
    average): the order of one lexsort over everything, ties (equal scores, -0.0 and 0.0)
    in input order; blocks out of query order, or a query in two blocks, take the lexsort."""
    rng = np.random.default_rng(seed)
    n_q = int(rng.integers(1, 12))
    sizes = rng.integers(0 if seed % 2 else 60, 200, n_q)
    q = np.repeat(rng.permutation(n_q), sizes)
    if seed == 5 and q.size > 2:
        q[-1] = q[0]  # one query in two blocks
    score = rng.integers(-3, 4, q.size).astype(np.float64) * rng.choice([1.0, 0.5], q.size)
    score[score == 0] = rng.choice([0.0, -0.0], int((score == 0).sum()))
    key = rng.integers(0, 50, q.size) if docid else None
    want = np.lexsort((-score, q) if key is None else (-key, -score, q))
    assert np.array_equal(_runs._query_order(q, score, key), want)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("docid", [False, True])
def test_scores_equal_in_their_top_bits_are_ordered_by_their_full_value(seed, docid, kernels):
    """numba sorts (query, the top bits of the score, index) packed in one integer: scores
    that differ only below those bits (1 + j * 2**-45: the same top 40 bits of the
    mantissa), equal ones, and both signs of each, in blocks of up to 300 entries, still
    come out in the lexsort's order (decreasing score, then document key or input order)."""
    rng = np.random.default_rng(seed)
    n_q = 40
    q = np.repeat(rng.permutation(n_q), rng.integers(1, 300, n_q))
    score = 1.0 + rng.integers(0, 5, q.size) * 2.0**-45
    score *= rng.choice([1.0, -1.0, 2.0**-30], q.size)
    key = rng.permutation(q.size) if docid else None  # distinct per query, as document ids
    want = np.lexsort((-score, q) if key is None else (-key, -score, q))
    assert np.array_equal(_runs._query_order(q, score, key), want)


@pytest.mark.parametrize("ties", ["pessimistic", "average", "docid"])
def test_long_rankings_read_and_sorted_at_once_agree(monkeypatch, ties, kernels):
    """Queries of 150 documents (the blocks sorted one by one), scores with ties."""
    rng = np.random.default_rng(11)
    run = {
        f"q{q}": {f"d{d}": float(rng.integers(0, 40)) for d in rng.choice(400, 150, False)}
        for q in range(6)
    }
    qrels = {
        f"q{q}": {f"d{d}": int(rng.integers(0, 4)) for d in range(0, 400, 9)} for q in range(7)
    }
    metrics = [*METRICS, "map@R", "ndcg", "dcg_exp@20", "f1@50", "gm_map"]
    fast = _read_at_once(monkeypatch, run, qrels, metrics, ties=ties)
    with monkeypatch.context() as m:
        m.setattr(
            _runs,
            "_query_order",
            lambda q, s, key: np.lexsort((-s, q) if key is None else (-key, -s, q)),
        )
        _same(fast, _entry_by_entry(monkeypatch, run, qrels, metrics, ties=ties))


def test_huge_document_indices_do_not_alias_another_querys_judgements(kernels):
    """(indices, scores) with a document index near 2**60: (query, document) keys as
    query * n_docs + document would wrap around int64 and match query 0's document 16
    with query 16's judged document 0; the same run with a small index gives the truth."""
    n_q = 17
    for big in (2**60, 1000):
        indices = np.tile([[16, 0, big]], (n_q, 1))
        scores = np.tile([[3.0, 2.0, 1.0]], (n_q, 1))
        qrels = {16: {0: 1}, **{r: {big: 1} for r in range(16)}}
        res = rc.evaluate_run((indices, scores), qrels, ["mrr", "map"])
        if big != 1000:
            huge = res
    assert huge.per_query["mrr"].tolist() == res.per_query["mrr"].tolist()
    assert huge.per_query["mrr"][0] == pytest.approx(1 / 3)
