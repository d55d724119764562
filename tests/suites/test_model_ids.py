"""The rows of an ``embeddings:`` model's file are matched to the dataset's by id (h5's
F2): a file written in another order that says so with its own ``ids`` array was read
row for row as if in the dataset's order, so a production model scored map 0.05
instead of 0.70 and a worse candidate passed ``compare: non_inferior``. When the
dataset and the file both carry ids, the same ids in another order are put in the
dataset's order, and ids that differ (missing, extra, repeated, another type) are a
SuiteError naming the file, the field, the counts and a few ids; labels are checked
after, on the matched rows."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from retrieval_checks import SuiteError, SuiteRunner, load_suite

N_CLASSES, PER, DIM = 30, 5, 16


def _data(tmp_path, seed=0):
    """A dataset with string ids and labels, and a model's embeddings of it, in order."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(N_CLASSES), PER)
    x = (rng.normal(size=(N_CLASSES, DIM))[y] + 0.4 * rng.normal(size=(len(y), DIM))).astype(
        np.float32
    )
    ids = np.array([f"img{i:04d}" for i in range(len(y))])
    np.savez(tmp_path / "test.npz", embeddings=x, labels=y, ids=ids)
    return x, y, ids


def _suite(tmp_path, models: str, checks: str, dataset="{queries: test.npz}"):
    def block(text):
        return textwrap.indent(textwrap.dedent(text).strip(), "  ")

    path = tmp_path / "rc_ids.yaml"
    path.write_text(
        f"suite: ids\ndatasets:\n  test: {dataset}\nmodels:\n{block(models)}\n"
        f"checks:\n{block(checks)}\n"
    )
    return load_suite(path)


def _case(suite, name):
    (case,) = [c for c in suite.cases if c.name == name]
    return case


def test_a_file_in_another_order_with_the_dataset_ids_is_put_in_the_dataset_order(tmp_path):
    x, y, ids = _data(tmp_path)
    perm = np.random.default_rng(1).permutation(len(y))
    np.savez(tmp_path / "prod.npz", embeddings=x[perm], ids=ids[perm])
    np.savez(tmp_path / "prod_labels.npz", embeddings=x[perm], ids=ids[perm], labels=y[perm])
    suite = _suite(
        tmp_path,
        """
        prod: {embeddings: {test: prod.npz}}
        prod_labels: {embeddings: {test: prod_labels.npz}}
        """,
        "- {id: good, metric: map, dataset: test, at_least: 0.6}",
    )
    runner = SuiteRunner()
    for model in ("prod", "prod_labels"):
        part = runner.part(suite, model, "test", "queries")
        np.testing.assert_array_equal(part.embeddings, x)
        np.testing.assert_array_equal(part.labels, y)
        np.testing.assert_array_equal(part.ids, ids)
        # read row for row, the shuffled file scored map ~0.05 and failed this gate
        runner.run(suite, _case(suite, f"good[{model}-test]"))


def test_a_worse_candidate_no_longer_passes_against_a_reordered_production_file(tmp_path):
    """h5's repro: the candidate is worse than production; read in the file's order,
    production looked far worse still and the candidate passed non-inferiority."""
    x, y, ids = _data(tmp_path)
    rng = np.random.default_rng(2)
    worse = (x + 1.2 * rng.normal(size=x.shape)).astype(np.float32)
    np.savez(tmp_path / "cand.npz", embeddings=worse, labels=y)
    perm = rng.permutation(len(y))
    np.savez(tmp_path / "prod.npz", embeddings=x[perm], ids=ids[perm])
    suite = _suite(
        tmp_path,
        """
        cand: {embeddings: {test: cand.npz}}
        prod: {embeddings: {test: prod.npz}}
        """,
        """
        - {id: ni, metric: map, dataset: test, models: [cand], compare: {baseline: prod, rule: non_inferior, margin: 0.02}}
        """,
    )
    with pytest.raises(AssertionError, match="not shown to be within 0.02"):
        SuiteRunner().run(suite, _case(suite, "ni[cand-test]"))


def test_a_gallery_file_in_another_order_is_matched_by_id(tmp_path):
    x, y, ids = _data(tmp_path)
    rng = np.random.default_rng(3)
    gx = (x + 0.1 * rng.normal(size=x.shape)).astype(np.float32)
    gids = np.array([f"doc{i:04d}" for i in range(len(y))])
    np.savez(tmp_path / "gallery.npz", embeddings=gx, labels=y, ids=gids)
    perm = rng.permutation(len(y))
    np.savez(tmp_path / "m_q.npz", embeddings=x, ids=ids)
    np.savez(tmp_path / "m_g.npz", embeddings=gx[perm], ids=gids[perm], labels=y[perm])
    suite = _suite(
        tmp_path,
        "m: {embeddings: {test: {queries: m_q.npz, gallery: m_g.npz}}}",
        "- {id: good, metric: map, dataset: test, at_least: 0.9}",
        dataset="{queries: test.npz, gallery: gallery.npz}",
    )
    runner = SuiteRunner()
    np.testing.assert_array_equal(runner.part(suite, "m", "test", "gallery").embeddings, gx)
    runner.run(suite, _case(suite, "good[m-test]"))


@pytest.mark.parametrize(
    "change, expect",
    [
        (
            "missing",
            r"149 rows in the file, 150 in the dataset; 1 of the dataset's ids is not in the file \('img0007'\)",
        ),
        ("extra", r"1 id of the file is not the dataset's \('other'\)"),
        ("repeated", r"1 id repeats in the file \('img0003'\)"),
        (
            "renamed",
            r"150 of the dataset's ids are not in the file \('img0000', 'img0001', 'img0002', \.\.\. \(150 in all\)\)",
        ),
    ],
    ids=["missing", "extra", "repeated", "renamed"],
)
def test_ids_that_are_not_the_dataset_ids_are_refused_naming_them(tmp_path, change, expect):
    x, y, ids = _data(tmp_path)
    perm = np.random.default_rng(4).permutation(len(y))
    fx, fids = x[perm], ids[perm].astype(object)
    if change == "missing":
        keep = fids != "img0007"
        fx, fids = fx[keep], fids[keep]
    elif change == "extra":
        fids[fids == "img0011"] = "other"
    elif change == "repeated":
        fids[fids == "img0012"] = "img0003"
    else:
        fids = np.array([f"IMG-{v}" for v in fids], dtype=object)
    np.savez(tmp_path / "prod.npz", embeddings=fx, ids=fids.astype(str))
    suite = _suite(
        tmp_path,
        "prod: {embeddings: {test: prod.npz}}",
        "- {id: good, metric: map, dataset: test, at_least: 0.01}",
    )
    with pytest.raises(SuiteError, match=expect) as info:
        SuiteRunner().run(suite, _case(suite, "good[prod-test]"))
    message = str(info.value)
    assert "the ids 'ids' in prod.npz are not the dataset's ids 'ids' in test.npz" in message
    assert "models.prod.embeddings.test.queries" in message
    assert "matched to the dataset's by id" in message and "Fix:" in message


def test_ids_of_another_type_are_refused_naming_both_types(tmp_path):
    x, y, _ = _data(tmp_path)
    np.savez(tmp_path / "test.npz", embeddings=x, labels=y, ids=np.arange(len(y)))
    np.savez(tmp_path / "prod.npz", embeddings=x, ids=np.array([str(i) for i in range(len(y))]))
    suite = _suite(
        tmp_path,
        "prod: {embeddings: {test: prod.npz}}",
        "- {id: good, metric: map, dataset: test, at_least: 0.01}",
    )
    with pytest.raises(SuiteError, match=r"the dataset's ids are int64, the file's <U3"):
        SuiteRunner().run(suite, _case(suite, "good[prod-test]"))


def test_repeated_dataset_ids_are_matched_only_in_the_same_order(tmp_path):
    x, y, _ = _data(tmp_path)
    ids = np.array([f"img{i // 2:04d}" for i in range(len(y))])  # each id twice
    y = y.copy()
    y[1::2] = y[0::2][: y[1::2].size]  # ... on one item's two rows, of one label (h21)
    np.savez(tmp_path / "test.npz", embeddings=x, labels=y, ids=ids)
    np.savez(tmp_path / "same.npz", embeddings=x, ids=ids)
    np.savez(tmp_path / "rev.npz", embeddings=x[::-1], ids=ids[::-1])
    suite = _suite(
        tmp_path,
        """
        same: {embeddings: {test: same.npz}}
        rev: {embeddings: {test: rev.npz}}
        """,
        "- {id: good, metric: map, dataset: test, at_least: 0.01}",
    )
    runner = SuiteRunner()
    runner.run(suite, _case(suite, "good[same-test]"))
    with pytest.raises(SuiteError, match="ids repeat in the dataset .* cannot be matched by id"):
        runner.run(suite, _case(suite, "good[rev-test]"))


def test_labels_are_checked_on_the_rows_matched_by_id(tmp_path):
    x, y, ids = _data(tmp_path)
    perm = np.random.default_rng(5).permutation(len(y))
    wrong = y[perm].copy()
    j = int(np.flatnonzero(wrong != wrong[0])[0])
    wrong[[0, j]] = wrong[[j, 0]]  # two rows' labels swapped
    np.savez(tmp_path / "prod.npz", embeddings=x[perm], ids=ids[perm], labels=wrong)
    suite = _suite(
        tmp_path,
        "prod: {embeddings: {test: prod.npz}}",
        "- {id: good, metric: map, dataset: test, at_least: 0.01}",
    )
    with pytest.raises(SuiteError, match=r"labels in prod.npz differ .* for the same ids"):
        SuiteRunner().run(suite, _case(suite, "good[prod-test]"))


def test_without_ids_on_both_sides_rows_stay_in_the_file_order(tmp_path):
    """Only the dataset or only the file has ids: nothing to match; the file's ids are
    the part's ids when the dataset has none, and labels still catch a reordered file."""
    x, y, ids = _data(tmp_path)
    np.savez(tmp_path / "plain.npz", embeddings=x, labels=y)
    perm = np.random.default_rng(6).permutation(len(y))
    np.savez(tmp_path / "prod.npz", embeddings=x[perm], ids=ids[perm])
    np.savez(tmp_path / "shuffled.npz", embeddings=x[perm], labels=y[perm])
    suite = _suite(
        tmp_path,
        """
        prod: {embeddings: {test: prod.npz}}
        shuffled: {embeddings: {test: shuffled.npz}}
        """,
        "- {id: good, metric: map, dataset: test, at_least: 0.01}",
        dataset="{queries: plain.npz}",
    )
    runner = SuiteRunner()
    part = runner.part(suite, "prod", "test", "queries")
    np.testing.assert_array_equal(part.embeddings, x[perm])
    np.testing.assert_array_equal(part.ids, ids[perm])
    with pytest.raises(SuiteError, match="rows are not in the dataset's order.*store ids in both"):
        runner.run(suite, _case(suite, "good[shuffled-test]"))


def test_a_file_with_neither_ids_nor_labels_beside_a_dataset_with_ids_warns(tmp_path):
    """Nothing can check its order (h13: a shuffled file then passed a compare against a
    baseline written the same way): read in the dataset's order, with a warning that says
    how to have the rows matched. With ids, or labels, nothing is said."""
    x, y, ids = _data(tmp_path)
    np.savez(tmp_path / "bare.npz", embeddings=x)
    np.savez(tmp_path / "labelled.npz", embeddings=x, labels=y)
    suite = _suite(
        tmp_path,
        """
        bare: {embeddings: {test: bare.npz}}
        labelled: {embeddings: {test: labelled.npz}}
        """,
        "- {id: good, metric: map, dataset: test, at_least: 0.6}",
    )
    with pytest.warns(RuntimeWarning, match="has neither ids nor labels") as said:
        SuiteRunner().part(suite, "bare", "test", "queries")
    assert "so that rows are matched by id" in str(said[0].message)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SuiteRunner().part(suite, "labelled", "test", "queries")
