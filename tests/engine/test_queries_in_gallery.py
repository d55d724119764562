"""Queries that are also gallery rows relevant to them (found by a new user: the same
``queries.npz`` given as queries and gallery scored hit_rate@1 = 1.0 and passed its
gate): each retrieves its own row first, whatever the model. ``rc.evaluate`` warns
(:class:`rc.SelfMatchWarning`, with the counts), a YAML suite fails the check when every
query does, and nothing is said where ids name the items (self-exclusion), in
leave-one-out, or where the equal rows are not relevant to the query (ties).

Cost: about 3 s (arrays of a few hundred rows; one suite run in-process).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import retrieval_checks as rc

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
E = RNG.standard_normal((200, 16)).astype(np.float32)
L = np.arange(200) % 20
G = RNG.standard_normal((300, 16)).astype(np.float32)
GL = np.arange(300) % 20


def _caught(**kw):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = rc.evaluate(**kw, metrics=["hit_rate@1", "map"], device="cpu", progress=False)
    return result, [w.message for w in seen if isinstance(w.message, rc.SelfMatchWarning)]


@pytest.mark.parametrize(
    "gallery",
    [
        pytest.param(lambda: E, id="the same array"),
        pytest.param(lambda: E.copy(), id="an equal copy (one file read twice)"),
        pytest.param(lambda: E.astype(np.float64), id="another dtype, equal values"),
        pytest.param(lambda: np.vstack([G, E[::-1]]), id="stacked under other items, reordered"),
        pytest.param(lambda: torch.from_numpy(E), id="a torch tensor"),
    ],
)
def test_a_gallery_holding_every_query_warns_with_the_fix(gallery):
    G2 = gallery()
    n_extra = int(G2.shape[0]) - 200
    labels = L if n_extra == 0 else np.concatenate([GL[:n_extra], L[::-1]])
    queries = torch.from_numpy(E) if isinstance(G2, torch.Tensor) else E
    result, said = _caught(queries=queries, gallery=G2, query_labels=L, gallery_labels=labels)
    assert result["hit_rate@1"] == 1.0  # what the warning is about
    (w,) = said
    assert (w.n_found, w.n_queries) == (200, 200)
    text = str(w)
    assert "each of the 200 queries is also a gallery row relevant to it" in text
    assert "no gallery" in text and "query_ids=" in text and "gallery_ids=" in text


def test_negative_zero_equals_zero():
    """-0.0 and 0.0 are the same value: the queries with their zeros' signs flipped are
    still the queries."""
    Z = E.copy()
    Z[:, 3] = 0.0
    flipped = Z.copy()
    flipped[:, 3] = -0.0
    _, said = _caught(queries=Z, gallery=flipped, query_labels=L, gallery_labels=L)
    assert said and said[0].n_found == 200


def test_some_queries_in_the_gallery_are_counted_only_where_relevant():
    gallery = np.vstack([G, E[:10], E[10:13]])
    labels = np.concatenate([GL, L[:10], (L[10:13] + 1) % 20])  # 3 under another label
    result, said = _caught(queries=E, gallery=gallery, query_labels=L, gallery_labels=labels)
    (w,) = said
    assert (w.n_found, w.n_queries) == (10, 200)
    assert str(w).startswith("10 of 200 queries are also gallery rows relevant to them")
    assert result.n_used == 200


def test_equal_rows_that_are_not_relevant_say_nothing():
    """Equal rows under other labels (or outside an explicit relevance) are ties with
    other items, as discrete embeddings have: no warning."""
    for kw in (
        dict(query_labels=L, gallery_labels=(L + 1) % 20),
        dict(relevance=[[(i + 1) % 200] for i in range(200)]),
    ):
        _, said = _caught(queries=E, gallery=E, **kw)
        assert not said, kw.keys()


def test_explicit_relevance_that_lists_the_query_itself_warns():
    _, said = _caught(queries=E, gallery=E, relevance=[[i, (i + 1) % 200] for i in range(200)])
    assert said and said[0].n_found == 200


def test_no_warning_with_ids_in_leave_one_out_or_on_a_clean_gallery():
    ids = [f"x{i}" for i in range(200)]
    for kw in (
        dict(
            queries=E, gallery=E, query_labels=L, gallery_labels=L, query_ids=ids, gallery_ids=ids
        ),
        dict(queries=E, query_labels=L),
        dict(queries=E, gallery=G, query_labels=L, gallery_labels=GL),
    ):
        _, said = _caught(**kw)
        assert not said, kw.keys()


def test_rows_equal_in_their_first_columns_only_are_not_the_queries():
    """The candidates come from the first two columns: rows that share them but differ
    later are told apart by the whole-row comparison."""
    other = E.copy()
    other[:, 5:] += 1.0
    _, said = _caught(queries=E, gallery=other, query_labels=L, gallery_labels=L)
    assert not said


def test_the_warning_can_be_made_an_error():
    with warnings.catch_warnings():
        warnings.simplefilter("error", rc.SelfMatchWarning)
        with pytest.raises(rc.SelfMatchWarning):
            rc.evaluate(E, E, query_labels=L, gallery_labels=L, metrics=["map"], device="cpu")


def test_a_yaml_suite_with_one_file_as_queries_and_gallery_fails(tmp_path):
    """The user's case: the same .npz as queries and gallery in a suite; the check errors
    with the library's message instead of passing at hit_rate@1 = 1.0; the leave-one-out
    dataset of the same file runs."""
    from shared_setup import write_suite

    from retrieval_checks import SuiteError, SuiteRunner, load_suite

    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data/q.npz", embeddings=E, labels=L)
    suite = load_suite(
        write_suite(
            tmp_path,
            "datasets:\n  twice: {queries: data/q.npz, gallery: data/q.npz}\n"
            "  loo: {queries: data/q.npz}\n"
            "checks:\n  - {metric: hit_rate@1, dataset: twice, at_least: 0.9}\n"
            "  - {metric: hit_rate@1, dataset: loo, at_most: 0.9}\n",
        )
    )
    twice, loo = suite.cases
    with pytest.raises(SuiteError, match="each of the 200 queries is also a gallery row"):
        SuiteRunner().run(suite, twice)
    SuiteRunner().run(suite, loo)
