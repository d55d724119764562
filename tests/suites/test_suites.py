"""YAML suites without pytest-in-pytest: the schema and its located errors, the model
runners, the embedding cache and the gates a suite runs."""

from __future__ import annotations

import textwrap
import warnings

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks import SuiteError, SuiteRunner, load_suite

torch = pytest.importorskip("torch")

EMBEDDER = """
import numpy as np

CALLS = []

def project(x, part=None):
    CALLS.append(part)
    w = np.random.default_rng(7).normal(size=(x.shape[1], 8))
    return np.asarray(x, dtype=np.float64) @ w
"""

NET = """
import torch

def build(dim=8):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.Tanh(), torch.nn.Dropout(0.5), torch.nn.Linear(16, dim))
"""


def _data(tmp_path):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(12), 6)
    x = (2.0 * rng.normal(size=(12, 12))[y] + rng.normal(size=(72, 12))).astype(np.float32)
    e = (x @ rng.normal(size=(12, 8))).astype(np.float32)
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data/set.npz", inputs=x, embeddings=e, labels=y)
    np.savez(
        tmp_path / "data/other_emb.npz",
        embeddings=e + 0.5 * rng.normal(size=e.shape).astype(np.float32),
    )
    (tmp_path / "embedder.py").write_text(EMBEDDER)
    (tmp_path / "net.py").write_text(NET)
    return x, e, y


def _write(tmp_path, text, name="rc_suite.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


VALID = """
suite: toy
datasets:
  set: {queries: data/set.npz}
models:
  proj: {callable: embedder.py:project}
checks:
  - {metric: map, dataset: set, at_least: 0.1}
"""


def test_a_valid_suite_has_one_case_per_model_dataset_check(tmp_path):
    _data(tmp_path)
    p = _write(
        tmp_path,
        """
        suite: toy
        markers: [slow, {xfail: {reason: known, strict: false}}]
        datasets:
          a: {queries: data/set.npz}
          b: {queries: {file: data/set.npz, labels: labels}, gallery: data/set.npz}
        models:
          m1: {callable: embedder.py:project}
          m2: {factory: net.py:build, kwargs: {dim: 4}}
        checks:
          - {metric: MAP@r, datasets: [a, b], at_least: 0.1}
          - {metric: map, at_least: 0.2, dataset: a, on: interval, markers: [gpu]}
          - {metric: map, gap: {train: a, test: b}, below: 0.5, models: [m1]}
          - {metric: hit_rate@1, dataset: a, compare: {baseline: m2, margin: 0.05}}
        """,
    )
    suite = load_suite(p)
    names = [c.name for c in suite.cases]
    # ids name the metric and the rule, not the threshold: editing a threshold keeps them
    assert names == [
        "map@R_at_least[m1-a]",
        "map@R_at_least[m1-b]",
        "map@R_at_least[m2-a]",
        "map@R_at_least[m2-b]",
        "map_ci_at_least[m1-a]",
        "map_ci_at_least[m2-a]",
        "map_gap[m1-a-b]",
        "hit_rate@1_vs_m2[m1-a]",
    ]
    assert suite.checks[0].metric.name == "map@R"  # aliases become canonical names
    assert suite.markers == (("slow", (), {}), ("xfail", (), {"reason": "known", "strict": False}))
    assert suite.checks[1].markers == (("gpu", (), {}),) and suite.checks[1].line == 11
    assert suite.models["m2"].kwargs == {"dim": 4}
    assert (
        suite.datasets["b"].parts["gallery"].file == tmp_path / "data/set.npz"
    )  # relative to the suite file
    # one engine pass per (model, dataset, options): the union of the checks' metrics
    opts = suite.evaluation_options(suite.checks[0], "a", SuiteRunner().defaults)
    assert suite.metrics_for("m2", "a", opts, SuiteRunner().defaults) == [
        "map@R",
        "map",
        "hit_rate@1",
    ]


# (suite text, line, field, words the message must contain)
BAD = [
    (
        "suite: x\ndatasets: {a: {queries: data/set.npz}}\nchekcs: []\n",
        3,
        "chekcs",
        ["unknown field 'chekcs'", "Did you mean 'checks'?"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - metric: map\n    dataset: a\n    at_lest: 0.5\n",
        6,
        "checks[0].at_lest",
        ["Did you mean 'at_least'?"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, at_least: 0.5}\n  - metric: grouped_recal@1\n"
        "    at_least: 0.5\n",
        5,
        "checks[1].metric",
        ["Did you mean 'grouped_recall@1'?"],
    ),
    (
        "datasets:\n  a: {queries: data/nope.npz}\nchecks:\n  - {metric: map, at_least: 0.5}\n",
        2,
        "datasets.a.queries",
        ["does not exist", "relative to the suite file"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, dataset: b, at_least: 0.5}\n",
        4,
        "checks[0].dataset",
        ["no dataset named 'b'", "Declared: a"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\n  a: {queries: data/set.npz}\nchecks: []\n",
        3,
        None,
        ["appears twice", "first on line 2"],
    ),
    ("datasets:\n  a: {queries: data/set.npz\nchecks: []\n", 3, None, ["YAML syntax error"]),
    ("datasets: !!python/object/apply:os.system [echo hi]\nchecks: []\n", 1, None, ["safe YAML"]),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, dataset: a}\n",
        4,
        "checks[0]",
        ["missing threshold"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, at_least: 0.5, confidence: 1.5}\n",
        4,
        "checks[0].confidence",
        ["strictly between 0 and 1"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, at_least: 0.5, on: lower}\n",
        4,
        "checks[0].on",
        ["value, interval"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nmodels:\n  m: {callable: embedder.py:project, torchscript: x.pt}\n"
        "checks:\n  - {metric: map, at_least: 0.5}\n",
        4,
        "models.m",
        ["exactly one of"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nmodels:\n  m:\n    callable: embedder.py:project\n"
        "    weights: data/set.npz\nchecks:\n  - {metric: map, at_least: 0.5}\n",
        6,
        "models.m.weights",
        ["weights go with factory"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\n  b: {queries: data/set.npz}\nmodels:\n  m: {embeddings: {a: data/set.npz}}\n"
        "checks:\n  - {metric: map, dataset: b, at_least: 0.5}\n",
        7,
        "checks[0]",
        ["not for dataset 'b'"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - metric: rsum\n    gap: {train: a, test: a}\n    below: 1\n",
        4,
        "checks[0].metric",
        ["no per-query values"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: rsum, at_least: 400}\n",
        4,
        "checks[0]",
        ["0 image_text datasets"],
    ),
    ("", 1, None, ["empty"]),
    (
        "datasets:\n  a: {queries: data/set.npz}\nmodels:\n  m: {callable: embedder}\nchecks:\n  - {metric: map, at_least: 1}\n",
        4,
        "models.m.callable",
        ["'module:function'"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, at_least: .nan}\n",
        4,
        "checks[0].at_least",
        ["finite number"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, at_least: 0.5, id: x}\n"
        "  - {metric: map, at_least: 0.6, id: x}\n",
        5,
        "checks[1].id",
        ["already used"],
    ),
    # found in review: a list or mapping where a name belongs must not crash collection
    (
        "datasets:\n  a: {queries: data/set.npz}\n  b: {queries: data/set.npz}\nchecks:\n"
        "  - {metric: map, dataset: [a, b], at_least: 0.1}\n",
        5,
        "checks[0].dataset",
        ["expected a dataset name, found a list", "datasets: [...]"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\n  b: {queries: data/set.npz}\nchecks:\n"
        "  - {metric: map, gap: {train: [a], test: b}, below: 0.1}\n",
        5,
        "checks[0].gap.train",
        ["expected a dataset name"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nmodels:\n  m: {callable: embedder.py:project}\nchecks:\n"
        "  - {metric: map, compare: {baseline: [m]}}\n",
        6,
        "checks[0].compare.baseline",
        ["expected a model name"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, datasets: [a, a], at_least: 0.1}\n",
        4,
        "checks[0].datasets",
        ["listed twice"],
    ),
    (
        "markers: [_private]\ndatasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, at_least: 0.1}\n",
        1,
        "markers[0]",
        ["not starting with '_'"],
    ),
    (
        "markers: [{xfail: {1: 2}}]\ndatasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, at_least: 0.1}\n",
        1,
        "markers[0]",
        ["keyword argument names"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: recall_at_precision@0.5, at_least: 0.1, on: interval}\n",
        4,
        "checks[0].on",
        ["has no interval"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\n  b: {queries: data/set.npz}\nchecks:\n"
        "  - {metric: medr, gap: {train: a, test: b}, below: 0.1}\n",
        5,
        "checks[0].metric",
        ["lower is better"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, gap: {train: a, test: a}, below: 0.1}\n",
        4,
        "checks[0].gap",
        ["same dataset"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, at_least: 0.9, at_most: 0.1}\n",
        4,
        "checks[0]",
        ["no value passes"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, at_least: 0.9, n_resamples: 10}\n",
        4,
        "checks[0].n_resamples",
        ["does not apply to retrieval"],
    ),
    (
        "datasets:\n  a-b: {queries: data/set.npz}\n  b: {queries: data/set.npz}\nmodels:\n"
        "  m: {callable: embedder.py:project}\n  m-a: {callable: embedder.py:project}\nchecks:\n"
        "  - {metric: map, datasets: [a-b, b], at_least: 0.1}\n",
        8,
        "checks[0]",
        ["would both be named 'map_at_least[m-a-b]'"],
    ),
]


@pytest.mark.parametrize("text, line, field, words", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_suites_name_file_line_and_field(tmp_path, text, line, field, words):
    _data(tmp_path)
    p = _write(tmp_path, text)
    with pytest.raises(SuiteError) as info:
        load_suite(p)
    err = info.value
    message = str(err)
    assert err.line == line, message
    assert err.field == field, message
    assert message.startswith(f"{p}:{line}: "), message
    for w in words:
        assert w in message, message
    assert isinstance(err, rc.InputError) and isinstance(err, rc.RetrievalChecksError)


def test_yaml_1_2_booleans_numbers_and_merge_keys(tmp_path):
    # YAML 1.1 reads on / yes / no as booleans (a field named `on` would become True), 1e-3 as a string
    # and 010 as octal; suites follow YAML 1.2. Merge keys: explicit keys override the merged ones.
    _data(tmp_path)
    p = _write(
        tmp_path,
        """
        datasets:
          a: {queries: data/set.npz}
          b: {queries: data/set.npz}
        checks:
          - &base {metric: map, dataset: a, at_least: 1e-3, on: value, seed: 010}
          - {<<: *base, dataset: b, id: on_b}
        """,
    )
    suite = load_suite(p)
    assert suite.checks[0].on == "value" and suite.checks[0].at_least == 0.001
    assert suite.checks[0].options["seed"] == 10
    assert suite.checks[1].datasets == ("b",) and suite.checks[1].at_least == 0.001


def test_precomputed_suite_equals_a_direct_evaluation(tmp_path):
    _, e, y = _data(tmp_path)
    p = _write(
        tmp_path,
        """
        datasets:
          set: {queries: data/set.npz}
        options: {group_size: 3}
        checks:
          - {metric: map, at_least: 0.01}
          - {metric: grouped_recall@1, at_least: 0.01, on: interval}
          - {metric: hit_rate@1, at_least: 0.01, similarity: neg_l2}
        """,
    )
    suite = load_suite(p)
    runner = SuiteRunner()
    for case in suite.cases:
        runner.run(suite, case)
    assert runner.passes == 2  # cosine checks share a pass; the neg_l2 check needs its own
    key = next(k for k in runner.evaluations._results if dict(k[3])["similarity"] == "cosine")
    got = runner.evaluations._results[key]
    want = rc.evaluate(e, query_labels=y, metrics=["map", "grouped_recall@1"], group_size=3)
    assert got["map"] == want["map"] and got["grouped_recall@1"] == want["grouped_recall@1"]
    assert got.intervals["grouped_recall@1"] == want.intervals["grouped_recall@1"]


def test_failure_names_model_dataset_and_suite_line(tmp_path):
    _data(tmp_path)
    p = _write(tmp_path, VALID.replace("at_least: 0.1", "at_least: 0.999"))
    suite = load_suite(p)
    with pytest.raises(AssertionError) as info:
        SuiteRunner().run(suite, suite.cases[0])
    msg = str(info.value)
    assert msg.startswith("model 'proj' on dataset 'set' [suite toy, rc_suite.yaml:7]")
    assert "map value" in msg and "< 0.999" in msg and "worst classes" in msg


def test_callable_models_are_cached_by_content(tmp_path):
    _data(tmp_path)
    p = _write(tmp_path, VALID)
    suite = load_suite(p)
    cache = tmp_path / "cache"
    first = SuiteRunner(cache_dir=cache)
    first.run(suite, suite.cases[0])
    assert first.embedded == 1 and first.cache.misses == 1
    second = SuiteRunner(cache_dir=cache)
    second.run(suite, suite.cases[0])
    assert second.embedded == 0 and second.cache.hits == 1
    np.testing.assert_array_equal(
        second.part(suite, "proj", "set", "queries").embeddings,
        first.part(suite, "proj", "set", "queries").embeddings,
    )
    # editing the model's code changes its fingerprint: embeddings are recomputed
    (tmp_path / "embedder.py").write_text(
        EMBEDDER.replace("normal(size=(x.shape[1], 8))", "normal(size=(x.shape[1], 6))")
    )
    third = SuiteRunner(cache_dir=cache)
    third.run(load_suite(p), suite.cases[0])
    assert third.embedded == 1
    assert (
        third.part(suite, "proj", "set", "queries").embeddings.shape[1] == 6
        or third.cache.misses == 1
    )


def test_torch_runners_factory_weights_torchscript_and_export(tmp_path):
    x, _, y = _data(tmp_path)
    import importlib.util

    spec = importlib.util.spec_from_file_location("net_for_test", tmp_path / "net.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    net = mod.build()
    with torch.no_grad():
        for prm in net.parameters():
            prm.mul_(2.0)
    torch.save(net.state_dict(), tmp_path / "w.pt")
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", DeprecationWarning
        )  # torch 2.13 deprecates TorchScript; still supported
        torch.jit.save(torch.jit.script(net), tmp_path / "net.ts")
    batch = torch.export.Dim("batch")
    torch.export.save(
        torch.export.export(net.eval(), (torch.from_numpy(x[:4]),), dynamic_shapes=({0: batch},)),
        tmp_path / "net.pt2",
    )
    net.train()
    p = _write(
        tmp_path,
        """
        datasets:
          set: {queries: data/set.npz}
        models:
          fw: {factory: net.py:build, weights: w.pt, batch_size: 5}
          ts: {torchscript: net.ts}
          ex: {exported: net.pt2, batch_size: 7}
        checks:
          - {metric: map, at_least: 0.001}
        """,
    )
    suite = load_suite(p)
    runner = SuiteRunner()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for case in suite.cases:
            runner.run(suite, case)
    net.eval()
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    for m in ("fw", "ts", "ex"):
        got = runner.part(suite, m, "set", "queries").embeddings
        np.testing.assert_allclose(
            got, want, rtol=1e-5, atol=1e-6
        )  # eval mode: dropout off, weights loaded
    # a second session served from the embedding cache does not even build the torch models
    first, second = (
        SuiteRunner(cache_dir=tmp_path / "cache"),
        SuiteRunner(cache_dir=tmp_path / "cache"),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for r in (first, second):
            for case in suite.cases:
                r.run(suite, case)
    assert len(first._loaded) == 3 and second._loaded == {} and second.cache.hits == 3


def test_weights_are_read_with_weights_only(tmp_path):
    _data(tmp_path)

    class Evil:
        def __reduce__(self):
            return (print, ("pickled code ran",))

    torch.save({"0.weight": Evil()}, tmp_path / "evil.pt")
    p = _write(
        tmp_path,
        """
        datasets: {set: {queries: data/set.npz}}
        models: {m: {factory: net.py:build, weights: evil.pt}}
        checks: [{metric: map, at_least: 0.001}]
        """,
    )
    suite = load_suite(p)
    with pytest.raises(SuiteError, match="weights_only=True"):
        SuiteRunner().run(suite, suite.cases[0])


def test_missing_arrays_and_misaligned_files_are_named(tmp_path):
    _data(tmp_path)
    np.savez(tmp_path / "data/nolabels.npz", embeddings=np.eye(4, dtype=np.float32))
    np.savez(
        tmp_path / "data/shuffled.npz",
        embeddings=np.zeros((72, 8), np.float32),
        labels=np.roll(np.repeat(np.arange(12), 6), 1),
    )
    p = _write(
        tmp_path,
        """
        datasets:
          a: {queries: data/nolabels.npz}
          b: {queries: {file: data/set.npz, embeddings: embedding}}
          c: {queries: data/set.npz}
        models:
          m: {embeddings: {a: data/nolabels.npz, b: data/set.npz, c: data/shuffled.npz}}
          pre: {embeddings: {a: data/nolabels.npz, b: {queries: {file: data/set.npz, embeddings: embeding}}, c: data/set.npz}}
        checks:
          - {metric: map, dataset: a, models: [m], at_least: 0.001}
          - {metric: map, dataset: b, models: [pre], at_least: 0.001}
          - {metric: map, dataset: c, models: [m], at_least: 0.001}
        """,
    )
    suite = load_suite(p)
    runner = SuiteRunner()
    with pytest.raises(SuiteError, match="nolabels.npz has no labels array 'labels'"):
        runner.run(suite, suite.cases[0])
    with pytest.raises(
        SuiteError, match="no array 'embeding' for embeddings.*Did you mean 'embeddings'"
    ) as info:
        runner.run(suite, suite.cases[1])
    assert info.value.line == 7
    with pytest.raises(SuiteError, match="labels in shuffled.npz differ from the dataset's labels"):
        runner.run(suite, suite.cases[2])


def test_image_text_dataset_runs_rsum_through_assert_rsum(tmp_path):
    rng = np.random.default_rng(3)
    images = rng.normal(size=(30, 8)).astype(np.float32)
    image = np.repeat(np.arange(30), 5)
    captions = (images[image] + 1.0 * rng.normal(size=(150, 8))).astype(np.float32)
    np.savez(tmp_path / "pairs.npz", images=images, captions=captions, image=image)
    p = _write(
        tmp_path,
        """
        datasets:
          pairs:
            type: image_text
            images: {file: pairs.npz, embeddings: images}
            captions: {file: pairs.npz, embeddings: captions}
        options: {n_resamples: 200}
        checks:
          - {metric: rsum, at_least: 599.9, on: interval}
        """,
    )
    suite = load_suite(p)
    with pytest.raises(AssertionError, match=r"rsum interval's lower bound .* < 599.9") as info:
        SuiteRunner().run(suite, suite.cases[0])
    want = rc.evaluate_image_text(images, captions, image, n_resamples=200)
    assert f"value {want['rsum']:.2f}" in str(info.value)


def test_embed_batches_restore_mode_and_pass_the_part(tmp_path):
    net = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Dropout(0.9))
    net.train()
    x = np.random.default_rng(0).normal(size=(23, 5))
    a = rc.embed(net, x, batch_size=4, device="cpu")
    b = rc.embed(net, x, batch_size=100, device="cpu")
    # float32 BLAS (cuBLAS on a GPU, MKL/OpenBLAS blocking) sums the 5 products in an order that
    # depends on the batch shape: results differ by a few float32 ulps (eps 1.2e-7), relative
    # errors near 1e-6 and absolute ones near zero outputs, so allow 1e-5 relative plus 1e-6 absolute
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert net.training  # restored
    seen = []
    out = rc.embed(lambda v, part=None: seen.append(part) or v[:, :2], x, part="gallery")
    assert seen == ["gallery"] and out.dtype == np.float32 and out.shape == (23, 2)
    with pytest.raises(rc.InputError, match="returned shape"):
        rc.embed(lambda v: v[:3], x)
    with pytest.raises(rc.InputError, match="NaN or Inf"):
        rc.embed(lambda v: v * np.nan, x)


def test_same_module_name_in_two_suites_runs_each_suites_own_file(tmp_path):
    # found in review: `callable: embedder:project` in two folders used whichever was imported first
    _data(tmp_path)
    results = {}
    for name, scale in (("s1", 1.0), ("s2", -1.0)):
        d = tmp_path / name
        d.mkdir()
        (d / "embedder.py").write_text(f"def project(x):\n    return x * {scale} + {scale}\n")
        (d / "data").symlink_to(tmp_path / "data")
        p = _write(
            d,
            "datasets: {a: {queries: data/set.npz}}\nmodels: {m: {callable: 'embedder:project'}}\n"
            "checks: [{metric: map, at_least: 0.001}]\n",
        )
        suite = load_suite(p)
        runner = SuiteRunner(cache_dir=tmp_path / "cache")
        runner.run(suite, suite.cases[0])
        results[name] = runner.part(suite, "m", "a", "queries").embeddings[0, 0]
    x0 = np.load(tmp_path / "data/set.npz")["inputs"][0, 0]
    assert results["s1"] == pytest.approx(x0 + 1) and results["s2"] == pytest.approx(-x0 - 1)


def test_model_errors_name_the_suite_model_and_part(tmp_path):
    _data(tmp_path)
    (tmp_path / "bad.py").write_text(
        "def short(x):\n    return x[:3]\ndef boom(x):\n    raise RuntimeError('kaboom')\n"
    )
    torch.save({"nope.weight": torch.zeros(1)}, tmp_path / "w.pt")
    p = _write(
        tmp_path,
        """
        datasets: {a: {queries: data/set.npz}}
        models:
          short: {callable: bad.py:short}
          boom: {callable: bad.py:boom}
          fw: {factory: net.py:build, weights: w.pt}
        checks: [{metric: map, at_least: 0.001}]
        """,
    )
    suite = load_suite(p)
    messages = {}
    for case in suite.cases:
        with pytest.raises(SuiteError) as info:
            SuiteRunner().run(suite, case)
        messages[case.model] = (str(info.value), info.value.line)
    assert (
        "returned shape (3, 12) for 72 inputs" in messages["short"][0] and messages["short"][1] == 3
    )
    assert (
        "RuntimeError: kaboom (model 'boom', embedding the queries inputs)" in messages["boom"][0]
    )
    assert "models.fw" in messages["fw"][0] and "state_dict" in messages["fw"][0]


def test_kwargs_naming_files_are_part_of_the_cache_key(tmp_path):
    _data(tmp_path)
    np.save(tmp_path / "w.npy", np.eye(12, 4))
    (tmp_path / "lin.py").write_text(
        "import numpy as np\ndef proj(x, weights):\n    return x @ np.load(weights)\n"
    )
    p = _write(
        tmp_path,
        f"""
        datasets: {{a: {{queries: data/set.npz}}}}
        models: {{m: {{callable: lin.py:proj, kwargs: {{weights: {tmp_path / "w.npy"}}}}}}}
        checks: [{{metric: map, at_least: 0.001}}]
        """,
    )
    suite = load_suite(p)
    first = SuiteRunner(cache_dir=tmp_path / "cache")
    first.run(suite, suite.cases[0])
    np.save(tmp_path / "w.npy", np.eye(12, 4)[::-1])
    second = SuiteRunner(cache_dir=tmp_path / "cache")
    second.run(load_suite(p), suite.cases[0])
    assert second.embedded == 1  # the weights file changed: recomputed, not served stale


CLASSIFIER = """
import torch
from torch import nn

def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 2))
"""


def _images_dataset(path, seed):
    """16x16 images: class 1 has a bright 4x4 square at a random place (its box), class 0 only noise."""
    rng = np.random.default_rng(seed)
    n = 40
    x = 0.1 * rng.random((n, 1, 16, 16)).astype(np.float32)
    y = np.repeat([0, 1], n // 2)
    boxes = np.zeros((n, 4), np.int64)
    for i in range(n):
        x0, y0 = rng.integers(0, 12, 2)
        boxes[i] = (x0, y0, x0 + 4, y0 + 4)
        if y[i] == 1:
            x[i, 0, y0 : y0 + 4, x0 : x0 + 4] = 1.0
    np.savez(path, images=x, labels=y, boxes=boxes)
    return x, y, boxes


def test_images_datasets_run_classifier_measures(tmp_path):
    x_tr, y_tr, _ = _images_dataset(tmp_path / "train.npz", 0)
    x_te, y_te, b_te = _images_dataset(tmp_path / "test.npz", 1)
    (tmp_path / "clf.py").write_text(CLASSIFIER)
    import importlib.util

    spec = importlib.util.spec_from_file_location("clf_for_test", tmp_path / "clf.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    net = mod.build()
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    for _ in range(60):
        loss = torch.nn.functional.cross_entropy(
            net(torch.from_numpy(x_tr)), torch.from_numpy(y_tr)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save(net.state_dict(), tmp_path / "clf.pt")
    p = _write(
        tmp_path,
        """
        datasets:
          train: {type: images, images: {file: train.npz, inputs: images}}
          test: {type: images, images: {file: test.npz, inputs: images}}
        models:
          clf: {factory: clf.py:build, weights: clf.pt, cam_layer: "1"}
        options: {rho: 0.2, n_resamples: 200}
        checks:
          - {metric: accuracy, dataset: test, at_least: 0.9}
          - {metric: cam_iou, dataset: test, at_least: 0.001, on: interval}
          - {metric: cam_iou_box, dataset: test, at_least: 0.001}
          - {metric: effective_invariance, dataset: test, at_least: 0.001}
          - {metric: nuclear_norm, dataset: test, at_least: 0.001}
          - {metric: spectral_measure, dataset: train, at_most: 1.0e12}
          - {metric: accuracy, gap: {train: train, test: test}, below: 0.5}
        """,
    )
    suite = load_suite(p)
    runner = SuiteRunner()
    for case in suite.cases:
        runner.run(suite, case)
    assert runner.passes == 2  # one pass per dataset serves every check on it
    key = next(k for k in runner.evaluations._results if k[2] == "test")
    got = runner.evaluations._results[key]
    net.eval()
    want = rc.evaluate_classifier(
        net,
        x_te,
        y_te,
        metrics=["accuracy", "cam_iou"],
        boxes=b_te,
        layer="1",
        rho=0.2,
        n_resamples=200,
    )
    assert got["accuracy"] == want["accuracy"] >= 0.9
    assert (
        got["cam_iou"] == pytest.approx(want["cam_iou"])
        and got.intervals["cam_iou"] == want.intervals["cam_iou"]
    )
    failing = _write(
        tmp_path,
        p.read_text().replace(
            "metric: cam_iou, dataset: test, at_least: 0.001",
            "metric: cam_iou, dataset: test, at_least: 0.99",
        ),
        "rc_fail.yaml",
    )
    suite = load_suite(failing)
    case = next(c for c in suite.cases if c.check.metric.name == "cam_iou")
    with pytest.raises(
        AssertionError, match=r"model 'clf' on dataset 'test'.*\n.*cam_iou interval's lower bound"
    ):
        SuiteRunner().run(suite, case)


@pytest.mark.parametrize(
    "check, words",
    [
        ("{metric: cam_iou, dataset: img, models: [plain], at_least: 0.1}", "needs the layer"),
        (
            "{metric: accuracy, dataset: img, models: [proj], at_least: 0.1}",
            "runs a torch classifier",
        ),
        (
            "{metric: cam_iou, dataset: set, models: [plain], at_least: 0.1}",
            "measured on images datasets",
        ),
        (
            "{metric: nuclear_norm, dataset: img, models: [plain], at_least: 0.1, on: interval}",
            "has no interval",
        ),
        ("{metric: cam_iuo, dataset: img, at_least: 0.1}", "Did you mean 'cam_iou'"),
        (
            "{metric: accuracy, dataset: img, models: [plain], at_least: 0.1, group_size: 3}",
            "does not apply to images",
        ),
    ],
)
def test_classifier_checks_are_validated(tmp_path, check, words):
    _data(tmp_path)
    _images_dataset(tmp_path / "img.npz", 0)
    (tmp_path / "clf.py").write_text(CLASSIFIER)
    p = _write(
        tmp_path,
        f"""
        datasets:
          set: {{queries: data/set.npz}}
          img: {{type: images, images: {{file: img.npz, inputs: images}}}}
        models:
          proj: {{callable: embedder.py:project}}
          plain: {{factory: clf.py:build}}
        checks:
          - {check}
        """,
    )
    with pytest.raises(SuiteError, match=words):
        load_suite(p)
