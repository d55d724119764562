"""An id names one item (h21, found by a new user): with label relevance, an id that items
of different labels share is a contradiction, refused with an :class:`rc.InputError`
that names the arrays, the number of such ids, the first ones with their labels and the
fix. Row numbers 0..n-1 as the ids of both files (a common export habit) made query i
drop gallery item i, of another label 540 times in 597, from its ranking as "itself",
and changed map and recall@5 without a word. Ids that are the labels emptied every
query; the error now says the ids did it, not the labels. What still runs: copies that
keep their original's id and label, leave-one-out with ids, disjoint ids, and ids with
explicit relevance (no labels to check). The sharded pass refuses the same way
(test_distributed.py, ``row-number-ids``).

Cost: about 2 s (arrays of a few hundred rows on the numpy backend; one suite run
in-process).
"""

from __future__ import annotations

import numpy as np
import pytest

import retrieval_checks as rc

RNG = np.random.default_rng(21)
NQ, NG = 60, 150
Q = RNG.standard_normal((NQ, 8)).astype(np.float32)
G = RNG.standard_normal((NG, 8)).astype(np.float32)
QL = np.arange(NQ) % 7
GL = (np.arange(NG) * 3) % 7  # row i of each side: mostly another label than the query's row i
KW = dict(metrics=["map", "recall@5"], device="numpy", progress=False)


def _refused(**kw):
    with pytest.raises(rc.InputError) as info:
        rc.evaluate(**kw, **KW)
    return str(info.value)


@pytest.fixture(scope="module")
def row_numbers_refused() -> str:
    """The refusal of row numbers 0..n-1 given as both sides' ids."""
    return _refused(
        queries=Q,
        gallery=G,
        query_labels=QL,
        gallery_labels=GL,
        query_ids=np.arange(NQ),
        gallery_ids=np.arange(NG),
    )


def test_row_numbers_as_both_sides_ids_are_refused_naming_arrays_count_examples_and_fix(
    row_numbers_refused,
):
    text = row_numbers_refused
    n = int((QL != GL[:NQ]).sum())
    assert "query_ids and gallery_ids give one id to items of different labels" in text
    assert "(query_labels and gallery_labels)" in text
    assert f"{n} ids of {NG} name items whose labels differ" in text
    first = int(np.flatnonzero(QL != GL[:NQ])[0])
    assert f"id {first} (query label {QL[first]}; gallery label {GL[first]})" in text
    assert "Both are row numbers" in text
    assert "its own id" in text and "leave query_ids and gallery_ids out" in text


def test_string_ids_and_labels_are_shown_quoted():
    qi = np.array([f"img{i}" for i in range(NQ)])
    gi = np.array([f"img{i}" for i in range(NG)])
    text = _refused(
        queries=Q,
        gallery=G,
        query_labels=np.array([f"c{v}" for v in QL]),
        gallery_labels=np.array([f"c{v}" for v in GL]),
        query_ids=qi,
        gallery_ids=gi,
    )
    assert "id 'img1' (query label 'c1'; gallery label 'c3')" in text
    assert "Both are row numbers" not in text  # strings: not the row-number note


def test_two_items_of_one_side_with_one_id_and_different_labels_are_refused():
    """Leave-one-out: two items of different labels under one id silently left each
    other's ranking; in a gallery, two items under one id no query holds."""
    y = np.arange(NQ) % 5
    ids = np.arange(NQ).astype(str)
    ids[1] = ids[0]  # labels 0 and 1
    text = _refused(queries=Q, query_labels=y, query_ids=ids)
    assert "query_ids gives one id to items of different labels (query_labels)" in text
    assert (
        f"1 id of {NQ - 1} names items whose labels differ, e.g. id '0' (query labels 0, 1)."
        in text
    )
    assert "leave query_ids out" in text
    gi = 1000 + np.arange(NG)
    gi[7] = gi[8]  # labels 0 and 3, no query of that id: 1 of 209 ids, warned (label noise)
    with pytest.warns(RuntimeWarning) as said:
        rc.evaluate(
            Q,
            G,
            query_labels=QL,
            gallery_labels=GL,
            query_ids=np.arange(NQ),
            gallery_ids=gi,
            metrics=["map"],
        )
    text = " ".join(str(w.message) for w in said)
    assert f"id {gi[8]} (gallery labels {min(GL[7], GL[8])}, {max(GL[7], GL[8])})" in text


def test_more_than_three_conflicts_are_counted_and_three_shown(row_numbers_refused):
    text = row_numbers_refused
    n = int((QL != GL[:NQ]).sum())
    assert f" and {n - 3} more." in text
    assert text.count("(query label") == 3


def test_ids_that_are_the_labels_are_named_as_the_cause_not_the_labels():
    """Every relevant item shares its query's id and is excluded as the query itself."""
    for kw in (
        dict(
            queries=Q, gallery=G, query_labels=QL, gallery_labels=GL, query_ids=QL, gallery_ids=GL
        ),
        dict(queries=Q, query_labels=QL, query_ids=QL),
    ):
        with pytest.raises(rc.EmptyQueriesError) as info:
            rc.evaluate(**kw, **KW)
        text = str(info.value)
        assert f"None of the {NQ} queries has a relevant gallery item left" in text, text
        assert "exclude every relevant item" in text and "Are the ids labels?" in text
        assert "check that query and gallery labels share values" not in text
        with pytest.raises(rc.EmptyQueriesError, match="Are the ids labels?"):
            rc.evaluate(**kw, **dict(KW, empty_queries="error"))


def test_an_empty_query_not_caused_by_ids_keeps_the_labels_message():
    y = np.arange(NQ) % 7
    y[0] = 99  # a class of one item: empty in leave-one-out, whatever the ids
    with pytest.raises(rc.EmptyQueriesError) as info:
        rc.evaluate(Q, query_labels=y, query_ids=np.arange(NQ), **dict(KW, empty_queries="error"))
    assert "fix the labels" in str(info.value) and "ids" not in str(info.value)


def test_copies_with_their_originals_id_and_label_still_run():
    """A gallery that holds copies of some queries under the queries' ids and labels
    (self-exclusion's purpose), and a second copy of one of them: each copy leaves
    its original's ranking."""
    G2 = np.concatenate([G, Q[:10], Q[:1]])
    gl = np.concatenate([GL, QL[:10], QL[:1]])
    qi = np.arange(NQ) + 10_000
    gi = np.concatenate([np.arange(NG), qi[:10], qi[:1]])
    res = rc.evaluate(Q, G2, query_labels=QL, gallery_labels=gl, query_ids=qi, gallery_ids=gi, **KW)
    # query 0 leaves out its two copies, query 1 its one, query 20 (no copy) ranks all
    assert list(res.n_candidates[[0, 1, 20]]) == [NG + 9, NG + 10, NG + 11]


def test_leave_one_out_with_copies_and_disjoint_ids_equal_their_plain_results():
    y = np.arange(NQ) % 7
    X = np.concatenate([Q, Q[:5]])
    yy = np.concatenate([y, y[:5]])
    ids = np.concatenate([np.arange(NQ), np.arange(5)])  # the copies keep their originals' ids
    res = rc.evaluate(X, query_labels=yy, query_ids=ids, **KW)
    assert res.n_candidates[0] == NQ + 5 - 2  # itself and its copy left out
    plain = rc.evaluate(Q, G, query_labels=QL, gallery_labels=GL, **KW)
    disjoint = rc.evaluate(
        Q,
        G,
        query_labels=QL,
        gallery_labels=GL,
        query_ids=np.arange(NQ),
        gallery_ids=NQ + np.arange(NG),
        **KW,
    )
    assert dict(disjoint) == dict(plain)
    np.testing.assert_array_equal(disjoint.per_query["map"], plain.per_query["map"])


def test_explicit_relevance_with_row_number_ids_is_left_alone():
    """No labels: an id names a judged item, and nothing contradicts it."""
    rel = [[int(j)] for j in (np.arange(NQ) + 1) % NG]
    res = rc.evaluate(
        Q,
        G,
        relevance=rel,
        query_ids=np.arange(NQ),
        gallery_ids=np.arange(NG),
        **KW,
    )
    assert res.n_candidates[0] == NG - 1


def test_a_yaml_suite_with_row_number_ids_in_its_files_errors_with_the_message(tmp_path):
    """The user's suite: q.npz and g.npz with ``ids`` 0..n-1 each; the check errors with
    the library's message instead of passing on a silently changed ranking."""
    from shared_setup import write_suite

    from retrieval_checks import SuiteError, SuiteRunner, load_suite

    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data/q.npz", embeddings=Q, labels=QL, ids=np.arange(NQ))
    np.savez(tmp_path / "data/g.npz", embeddings=G, labels=GL, ids=np.arange(NG))
    np.savez(tmp_path / "data/g2.npz", embeddings=G, labels=GL, ids=NQ + np.arange(NG))
    suite = load_suite(
        write_suite(
            tmp_path,
            "datasets:\n  rows: {queries: data/q.npz, gallery: data/g.npz}\n"
            "  own: {queries: data/q.npz, gallery: data/g2.npz}\n"
            "checks:\n  - {metric: map, dataset: rows, at_least: 0.01}\n"
            "  - {metric: map, dataset: own, at_least: 0.01}\n",
        )
    )
    rows, own = suite.cases
    with pytest.raises(SuiteError, match="give one id to items of different labels"):
        SuiteRunner().run(suite, rows)
    SuiteRunner().run(suite, own)


def test_one_file_under_two_labels_among_many_ids_warns_and_runs():
    """One real duplicate (one file filed under two classes) among 1% or fewer of the ids is
    label noise: warned with the count, and the evaluation runs, the duplicate out of its
    own query's ranking (h27: it refused the whole evaluation, with a fix that cannot apply
    to one item)."""
    rng = np.random.default_rng(0)
    n = 400
    x = rng.normal(size=(n, 8)).astype(np.float32)
    y = np.arange(n) % 20
    ids = np.arange(n)
    ids[1] = ids[0]  # labels 0 and 1 under one id: 1 of 399 ids
    with pytest.warns(RuntimeWarning, match="1 id of 399 names items whose labels differ"):
        res = rc.evaluate(x, query_labels=y, query_ids=ids, metrics=["map"])
    assert 0 <= res["map"] <= 1
