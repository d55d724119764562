"""YAML suites without pytest-in-pytest: the schema and its located errors, the model
runners, the embedding cache and the gates a suite runs.

Fail closed (issue 12): a battery of bad and borderline suite files, each refused with
a :class:`SuiteError` naming the file, the line and the field, whose message says what
to do; no suite runs code (string skipif/xfail conditions); no threshold makes a gate
that can never fail; a mutated suite raises nothing but SuiteError; the runner's
limits (``max_skipped``, ``timeout``), confidence and seed reach the gates; one
metric's error fails only its own check. The YAML reader's own bounds (alias bombs,
nesting, file size) are in test_suite_yaml.py. Only the tests that build torch models
need torch (the rest run without the extra). Cost: about 20 s of CPU in all, in
process (measured; the torch model tests and the 400 mutated suites of
test_mutated_suites_raise_only_suite_errors dominate; the timeouts wait 0.3 to 0.5 s).
"""

from __future__ import annotations

import textwrap
import time
import warnings

import numpy as np
import pytest
from shared_setup import write_suite

import retrieval_checks as rc
from retrieval_checks import SuiteError, SuiteRunner, load_suite
from retrieval_checks.errors import InputError, ModelTimeoutError
from retrieval_checks.gates import listening

try:  # the torch extra: the tests that build torch models need it, the others do not
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="builds torch models: needs torch")

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
        "datasets:\n  a: {queries: data/set.npz}\nchecks:\n  - {metric: map, at_least: 0.9, n_resamples: 200}\n",
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


@needs_torch
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


@needs_torch
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


@needs_torch
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


@needs_torch
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


@needs_torch
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


# --- fail closed: bad, hostile and borderline suites (SuiteError with file, line, field, fix) ---
HEAD = "datasets:\n  a: {queries: data/set.npz}\n"
TWO = "datasets:\n  a: {queries: data/set.npz}\n  b: {queries: data/set.npz}\n"
MODELS = "models:\n  m: {callable: emb.py:f}\n  n: {callable: emb.py:f}\n"
PAIRS = (
    "datasets:\n  p:\n    type: image_text\n    images: {file: data/pairs.npz, embeddings: images}\n"
    "    captions: {file: data/pairs.npz, embeddings: captions}\n"
)


def _refused(where, text, line, field, words):
    p = write_suite(where, text)
    with pytest.raises(SuiteError) as info:
        load_suite(p)
    err = info.value
    message = str(err)
    assert err.path is not None and str(p) in message
    assert err.line == line, message
    assert err.field == field, message
    for w in words:
        assert w in message, (w, message)
    assert len(message) < 1500, "a message shows values, never whole trees"
    return err


# --- fail closed: no code from data: markers ---
MARKERS = [
    # (suite, line, field, words)
    (
        HEAD
        + "checks:\n  - {metric: map, at_least: 0.5, markers: [{skipif: \"__import__('os').system('touch "
        "PWNED')\"}]}\n",
        4,
        "checks[0].markers[0].skipif",
        ["Python source", "true or false", "conftest.py"],
    ),
    (
        HEAD
        + 'checks:\n  - metric: map\n    at_least: 0.5\n    markers:\n      - xfail: "1 == 1"\n',
        7,
        "checks[0].markers[0].xfail",
        ["Python source", "never run code from data"],
    ),
    (
        HEAD
        + 'checks:\n  - metric: map\n    at_least: 0.5\n    markers:\n      - xfail: {condition: "sys.platform", '
        "reason: x}\n",
        7,
        "checks[0].markers[0].xfail.condition",
        ["Python source", "true or false"],
    ),
    (
        HEAD
        + 'checks:\n  - metric: map\n    at_least: 0.5\n    markers:\n      - skipif: {condition: "True", '
        "reason: x}\n",
        7,
        "checks[0].markers[0].skipif.condition",
        ["Python source"],
    ),
    (
        HEAD
        + 'checks:\n  - metric: map\n    at_least: 0.5\n    markers:\n      - skipif: [true, "os.getcwd()"]\n',
        7,
        "checks[0].markers[0].skipif[1]",
        ["Python source"],
    ),
    (
        "markers:\n  - skipif: \"open('x', 'w')\"\n"
        + HEAD
        + "checks:\n  - {metric: map, at_least: 0.5}\n",
        2,
        "markers[0].skipif",
        ["Python source", "true or false"],
    ),
    (
        'markers: [slow, {xfail: {condition: "1", reason: r}}]\n'
        + HEAD
        + "checks:\n  - {metric: map, at_least: 0.5}\n",
        1,
        "markers[1].xfail.condition",
        ["Python source"],
    ),
    (
        HEAD + "checks:\n  - {metric: map, at_least: 0.5, markers: [{skipif: 1}]}\n",
        4,
        "checks[0].markers[0].skipif",
        ["true or false", "int 1"],
    ),
    (
        HEAD + "checks:\n  - {metric: map, at_least: 0.5, markers: [{skipif: true}]}\n",
        4,
        "checks[0].markers[0].skipif",
        ["needs reason:", "condition: true, reason: why"],
    ),
    (
        HEAD
        + "checks:\n  - {metric: map, at_least: 0.5, markers: [{xfail: {condition: false}}]}\n",
        4,
        "checks[0].markers[0].xfail",
        ["needs reason:"],
    ),
    (
        HEAD + "checks:\n  - {metric: map, at_least: 0.5, markers: [{xfail: {reason: [1, 2]}}]}\n",
        4,
        "checks[0].markers[0].xfail.reason",
        ["reason is a text"],
    ),
    (
        HEAD
        + "checks:\n  - {metric: map, at_least: 0.5, markers: [{filterwarnings: 'error::evil.module.Warning'}]}\n",
        4,
        "checks[0].markers[0].filterwarnings",
        ["would import", "never run code from data"],
    ),
    (
        HEAD
        + "checks:\n  - {metric: map, at_least: 0.5, markers: [{filterwarnings: [ignore, 'ignore::a.B']}]}\n",
        4,
        "checks[0].markers[0].filterwarnings[1]",
        ["would import"],
    ),
    (
        HEAD + "checks:\n  - {metric: map, at_least: 0.5, markers: [{filterwarnings: 3}]}\n",
        4,
        "checks[0].markers[0].filterwarnings",
        ["ignore::UserWarning"],
    ),
    (
        HEAD
        + "checks:\n  - {metric: map, at_least: 0.5, markers: [{xfail: {reason: r, raises: ValueError}}]}\n",
        4,
        "checks[0].markers[0].xfail.raises",
        ["exception class", "drop it"],
    ),
    (
        HEAD
        + "checks:\n  - {metric: map, at_least: 0.5, markers: [{xfail: {reason: r, strict: 'yes'}}]}\n",
        4,
        "checks[0].markers[0].xfail.strict",
        ["true or false"],
    ),
    (
        HEAD
        + "checks:\n  - {metric: map, at_least: 0.5, markers: [{xfail: {reason: r, stritc: true}}]}\n",
        4,
        "checks[0].markers[0].xfail.stritc",
        ["Did you mean 'strict'?"],
    ),
    (
        HEAD
        + "checks:\n  - {metric: map, at_least: 0.5, markers: [{skipif: {condition: false, reason: r, "
        "strict: true}}]}\n",
        4,
        "checks[0].markers[0].skipif.strict",
        ["skipif takes condition, reason"],
    ),
]


def _ids(cases):
    return [f"{i}-{c[2]}" for i, c in enumerate(cases)]


@pytest.mark.parametrize("text, line, field, words", MARKERS, ids=_ids(MARKERS))
def test_string_marker_conditions_are_refused(where, text, line, field, words):
    _refused(where, text, line, field, words)
    assert not (where / "PWNED").exists() and not (where / "x").exists()


def test_boolean_marker_conditions_with_a_reason_load(where):
    suite = load_suite(
        write_suite(
            where,
            HEAD + "checks:\n  - metric: map\n    at_least: 0.5\n    markers:\n"
            "      - skipif: {condition: false, reason: never}\n"
            "      - xfail: {reason: known, strict: true}\n"
            "      - filterwarnings: 'ignore::RuntimeWarning'\n"
            "      - slow\n",
        )
    )
    assert suite.checks[0].markers == (
        ("skipif", (), {"condition": False, "reason": "never"}),
        ("xfail", (), {"reason": "known", "strict": True}),
        ("filterwarnings", ("ignore::RuntimeWarning",), {}),
        ("slow", (), {}),
    )


# --- fail closed: thresholds on the metric's scale ---
TH = "checks:\n  - {metric: %s, %s}\n"
THRESHOLDS = [
    # (suite, line, field, words)
    (
        HEAD + TH % ("map", "at_least: 70"),
        4,
        "checks[0].at_least",
        ["Did you mean 0.7", "70 -> 0.7", "[0, 1]"],
    ),
    (
        HEAD + TH % ("map", "at_most: 95"),
        4,
        "checks[0].at_most",
        ["Did you mean 0.95", "never fail"],
    ),
    (
        HEAD + TH % ("hit_rate@1", "at_least: 80, on: interval"),
        4,
        "checks[0].at_least",
        ["Did you mean 0.8"],
    ),
    (HEAD + TH % ("recall@5", "at_least: .nan"), 4, "checks[0].at_least", ["NaN", "finite"]),
    (HEAD + TH % ("map", "at_least: .inf"), 4, "checks[0].at_least", ["finite"]),
    (HEAD + TH % ("map", "at_most: -.inf"), 4, "checks[0].at_most", ["finite"]),
    (HEAD + TH % ("map", "at_most: .NaN"), 4, "checks[0].at_most", ["finite"]),
    (
        HEAD + TH % ("map", "at_least: 0"),
        4,
        "checks[0].at_least",
        ["could never fail", "on map's scale"],
    ),
    (HEAD + TH % ("mrr", "at_most: 1"), 4, "checks[0].at_most", ["could never fail"]),
    (HEAD + TH % ("map", "at_least: -0.5"), 4, "checks[0].at_least", ["attainable range"]),
    (
        HEAD + TH % ("map", "at_least: true"),
        4,
        "checks[0].at_least",
        ["expected a number", "bool True"],
    ),
    (
        HEAD + TH % ("map", "at_least: '0.5'"),
        4,
        "checks[0].at_least",
        ["expected a number", "str '0.5'"],
    ),
    (
        HEAD + TH % ("map", "at_least: 100000000000000000000000000000000000000000000000000"),
        4,
        "checks[0].at_least",
        ["attainable range"],
    ),
    (HEAD + TH % ("medr", "at_most: 0.5"), 4, "checks[0].at_most", ["rank", "[1, inf)"]),
    (HEAD + TH % ("meanr", "at_least: 1"), 4, "checks[0].at_least", ["could never fail"]),
    (HEAD + TH % ("discriminant_ratio", "at_most: .inf"), 4, "checks[0].at_most", ["finite"]),
    (
        HEAD + TH % ("discriminant_ratio", "at_least: 0"),
        4,
        "checks[0].at_least",
        ["could never fail"],
    ),
    (HEAD + TH % ("map", "at_least: 0.9, at_most: 0.5"), 4, "checks[0]", ["no value passes"]),
    (PAIRS + TH % ("rsum", "at_least: 700"), 7, "checks[0].at_least", ["[0, 600]", "never pass"]),
    (PAIRS + TH % ("rsum", "at_most: 600"), 7, "checks[0].at_most", ["could never fail"]),
    (PAIRS + TH % ("mean_recall", "at_most: 100"), 7, "checks[0].at_most", ["could never fail"]),
    (PAIRS + TH % ("mean_recall", "at_least: 700"), 7, "checks[0].at_least", ["[0, 100]"]),
    (PAIRS + TH % ("i2t_recall@5", "at_least: 60"), 7, "checks[0].at_least", ["Did you mean 0.6"]),
    (PAIRS + TH % ("t2i_medr", "at_most: 0"), 7, "checks[0].at_most", ["rank"]),
    (
        TWO + "checks:\n  - {metric: map, gap: {train: a, test: b}, below: 5}\n",
        5,
        "checks[0].below",
        ["Did you mean 0.05", "could never fail"],
    ),
    (
        TWO + "checks:\n  - {metric: map, gap: {train: a, test: b}, below: 1}\n",
        5,
        "checks[0].below",
        ["could never fail"],
    ),
    (
        TWO + "checks:\n  - {metric: map, gap: {train: a, test: b}, below: .nan}\n",
        5,
        "checks[0].below",
        ["finite"],
    ),
    (
        TWO + "checks:\n  - {metric: map, gap: {train: a, test: b}, below: -1}\n",
        5,
        "checks[0].below",
        ["never pass"],
    ),
    (
        HEAD + MODELS + "checks:\n  - {metric: map, compare: {baseline: n, margin: 1}}\n",
        7,
        "checks[0].compare.margin",
        ["could never fail"],
    ),
    (
        HEAD + MODELS + "checks:\n  - {metric: map, compare: {baseline: n, margin: 5}}\n",
        7,
        "checks[0].compare.margin",
        ["Did you mean 0.05"],
    ),
    (
        HEAD + MODELS + "checks:\n  - {metric: map, compare: {baseline: n, margin: .nan}}\n",
        7,
        "checks[0].compare.margin",
        ["finite"],
    ),
    (
        HEAD + MODELS + "checks:\n  - {metric: map, compare: {baseline: n, margin: -0.01}}\n",
        7,
        "checks[0].compare.margin",
        [">= 0"],
    ),
    (
        HEAD + "checks:\n  - metric: map\n    baseline: {max_drop: 1}\n",
        5,
        "checks[0].baseline.max_drop",
        ["could never fail"],
    ),
    (
        HEAD + "checks:\n  - metric: map\n    baseline:\n      max_drop: .inf\n",
        6,
        "checks[0].baseline.max_drop",
        ["finite"],
    ),
    (
        HEAD + "checks:\n  - metric: map\n    baseline: {max_relative_drop: 5}\n",
        5,
        "checks[0].baseline.max_relative_drop",
        ["Did you mean 0.05", "100%"],
    ),
    (
        HEAD + "checks:\n  - metric: map\n    baseline: {max_relative_drop: .nan}\n",
        5,
        "checks[0].baseline.max_relative_drop",
        ["finite"],
    ),
    (
        HEAD + "checks:\n  - metric: map\n    baseline: {max_relative_drop: -0.1}\n",
        5,
        "checks[0].baseline.max_relative_drop",
        [">= 0"],
    ),
    (
        PAIRS + "checks:\n  - metric: rsum\n    baseline: {max_drop: 600}\n",
        8,
        "checks[0].baseline.max_drop",
        ["could never fail"],
    ),
]


@pytest.mark.parametrize("text, line, field, words", THRESHOLDS, ids=_ids(THRESHOLDS))
def test_thresholds_off_scale_unattainable_or_not_finite_are_refused_at_load(
    where, text, line, field, words
):
    _refused(where, text, line, field, words)


@pytest.mark.parametrize(
    "text",
    [
        HEAD + TH % ("map", "at_least: 0.5"),
        HEAD + TH % ("map", "at_least: 0.5, at_most: 0.99"),
        HEAD + TH % ("medr", "at_most: 5"),
        HEAD + TH % ("discriminant_ratio", "at_least: 2.0"),
        PAIRS + TH % ("rsum", "at_least: 250, on: interval"),
        PAIRS + TH % ("mean_recall", "at_least: 40"),
        TWO + "checks:\n  - {metric: map, gap: {train: a, test: b}, below: 0.05}\n",
        HEAD + MODELS + "checks:\n  - {metric: map, compare: {baseline: n, margin: 0.01}}\n",
        HEAD
        + "checks:\n  - metric: map\n    baseline: {max_drop: 0.01, max_relative_drop: 0.02}\n",
    ],
)
def test_thresholds_on_the_right_scale_load(where, text):
    load_suite(write_suite(where, text))


# --- fail closed: limits: max_skipped and timeout ---
LIMITS = [
    (
        HEAD + TH % ("map", "at_least: 0.5, max_skipped: -1"),
        4,
        "checks[0].max_skipped",
        ["int >= 0"],
    ),
    (
        HEAD + TH % ("map", "at_least: 0.5, max_skipped: 5.0"),
        4,
        "checks[0].max_skipped",
        ["write 5 for a count"],
    ),
    (
        HEAD + TH % ("map", "at_least: 0.5, max_skipped: 1.5"),
        4,
        "checks[0].max_skipped",
        ["[0, 1)"],
    ),
    (
        HEAD + TH % ("map", "at_least: 0.5, max_skipped: .nan"),
        4,
        "checks[0].max_skipped",
        ["fraction"],
    ),
    (
        HEAD + TH % ("map", "at_least: 0.5, max_skipped: true"),
        4,
        "checks[0].max_skipped",
        ["count"],
    ),
    (HEAD + TH % ("map", "at_least: 0.5, max_skipped: '3'"), 4, "checks[0].max_skipped", ["count"]),
    (
        HEAD + TH % ("map", "at_least: 0.5, max_skipped: [1, 2]"),
        4,
        "checks[0].max_skipped",
        ["found a list"],
    ),
    (
        "options: {max_skipped: 50.0}\n" + HEAD + TH % ("map", "at_least: 0.5"),
        1,
        "options.max_skipped",
        ["write 50 for a count"],
    ),
    (HEAD + TH % ("map", "at_least: 0.5, timeout: 0"), 4, "checks[0].timeout", ["seconds > 0"]),
    (
        "options: {timeout: .inf}\n" + HEAD + TH % ("map", "at_least: 0.5"),
        1,
        "options.timeout",
        ["seconds > 0"],
    ),
    (
        HEAD + "models:\n  m: {callable: emb.py:f, timeout: -1}\n" + TH % ("map", "at_least: 0.5"),
        4,
        "models.m.timeout",
        ["seconds > 0"],
    ),
    (
        HEAD
        + "models:\n  m: {callable: emb.py:f, timeout: .nan}\n"
        + TH % ("map", "at_least: 0.5"),
        4,
        "models.m.timeout",
        ["seconds > 0"],
    ),
    (
        HEAD + "models:\n  m: {callable: emb.py:f, timeout: 5s}\n" + TH % ("map", "at_least: 0.5"),
        4,
        "models.m.timeout",
        ["seconds > 0", "str '5s'"],
    ),
    (
        HEAD
        + "models:\n  m: {callable: emb.py:f, timeout: true}\n"
        + TH % ("map", "at_least: 0.5"),
        4,
        "models.m.timeout",
        ["seconds > 0"],
    ),
    (
        HEAD + "models:\n  m: {callable: emb.py:f, timout: 3}\n" + TH % ("map", "at_least: 0.5"),
        4,
        "models.m.timout",
        ["Did you mean 'timeout'?"],
    ),
    (
        # image_text takes max_skipped (images dropped for having no caption): checked as any
        PAIRS + TH % ("rsum", "at_least: 250, max_skipped: 1.5"),
        7,
        "checks[0].max_skipped",
        ["max_skipped"],
    ),
    (
        HEAD + "models:\n  m: {callable: emb.py:f, device: gpu}\n" + TH % ("map", "at_least: 0.5"),
        4,
        "models.m.device",
        ["expected a device name", "str 'gpu'"],
    ),
    (
        HEAD + "models:\n  m: {callable: emb.py:f, device: 0}\n" + TH % ("map", "at_least: 0.5"),
        4,
        "models.m.device",
        ["expected a device name", "int 0"],
    ),
]


OPTION_CASES = [
    (
        "options: {confidence: 95}\n" + HEAD + TH % ("map", "at_least: 0.5"),
        1,
        "options.confidence",
        ["did you mean 0.95"],
    ),
    (
        "options: {confidence: .nan}\n" + HEAD + TH % ("map", "at_least: 0.5"),
        1,
        "options.confidence",
        ["strictly between 0 and 1"],
    ),
    (
        HEAD + TH % ("map", "at_least: 0.5, confidence: 1"),
        4,
        "checks[0].confidence",
        ["strictly between 0 and 1"],
    ),
    (
        "options: {seed: -1}\n" + HEAD + TH % ("map", "at_least: 0.5"),
        1,
        "options.seed",
        ["integer >= 0"],
    ),
    (
        "options: {seed: 1.5}\n" + HEAD + TH % ("map", "at_least: 0.5"),
        1,
        "options.seed",
        ["integer >= 0"],
    ),
    (
        HEAD + TH % ("map", "at_least: 0.5, similarity: cosin"),
        4,
        "checks[0].similarity",
        ["Did you mean 'cosine'?"],
    ),
    (
        HEAD + TH % ("map", "at_least: 0.5, ties: optimistc"),
        4,
        "checks[0].ties",
        ["Did you mean 'optimistic'?"],
    ),
    (
        HEAD + TH % ("map", "at_least: 0.5, empty_queries: skipp"),
        4,
        "checks[0].empty_queries",
        ["'skip'"],
    ),
    (
        HEAD + TH % ("grouped_recall@1", "at_least: 0.5, group_size: 1"),
        4,
        "checks[0].group_size",
        [">= 2"],
    ),
    (
        "options: {device: cpu}\n" + HEAD + TH % ("map", "at_least: 0.5"),
        1,
        "options.device",
        ["option of the session", "--rc-device"],
    ),
    (
        HEAD + TH % ("map", "at_least: 0.5, max_memory: 1GB"),
        4,
        "checks[0].max_memory",
        ["option of the session", "--rc-max-memory"],
    ),
    (
        PAIRS + TH % ("rsum", "at_least: 250, n_resamples: -1"),
        7,
        "checks[0].n_resamples",
        ["[0, 1000000]", "0: no interval"],
    ),
]


@pytest.mark.parametrize("text, line, field, words", OPTION_CASES, ids=_ids(OPTION_CASES))
def test_evaluation_options_are_validated_with_the_option_table(where, text, line, field, words):
    _refused(where, text, line, field, words)


@pytest.mark.parametrize("text, line, field, words", LIMITS, ids=_ids(LIMITS))
def test_limits_are_validated_with_the_option_table(where, text, line, field, words):
    _refused(where, text, line, field, words)


def test_limits_load_and_do_not_split_the_evaluation(where):
    suite = load_suite(
        write_suite(
            where,
            "options: {max_skipped: 0.1, timeout: 30}\n"
            + HEAD
            + "models:\n  m: {callable: emb.py:f, timeout: 2.5}\n  n: {callable: emb.py:f}\n"
            "checks:\n  - {metric: map, at_least: 0.5, max_skipped: 3}\n"
            "  - {metric: hit_rate@1, at_least: 0.5, timeout: 7}\n",
        )
    )
    assert suite.models["m"].timeout == 2.5 and suite.models["n"].timeout is None
    first, second = suite.checks
    assert suite.gate_options(first, "m", "a", {}) == {"max_skipped": 3, "timeout": 2.5}
    assert suite.gate_options(second, "m", "a", {}) == {"max_skipped": 0.1, "timeout": 7}
    assert suite.gate_options(first, "n", "a", {"timeout": 1}) == {"max_skipped": 3, "timeout": 30}
    defaults = SuiteRunner().defaults
    assert suite.evaluation_options(first, "a", defaults) == suite.evaluation_options(
        second, "a", defaults
    )
    assert "max_skipped" not in suite.evaluation_options(first, "a", defaults)


# --- fail closed: malformed files ---
MALFORMED = [
    # (content, line, field, words)
    (
        "datasets:\n\ta: {queries: data/set.npz}\nchecks: []\n",
        2,
        None,
        ["YAML syntax error", "'\\t'"],
    ),
    (
        "datasets:\n  a: {queries: data/set.npz}\n  a: {queries: data/set.npz}\nchecks: []\n",
        3,
        None,
        ["appears twice", "first on line 2"],
    ),
    (
        HEAD + "checks:\n  - {metric: 'map, at_least: 0.5}\n",
        5,
        None,
        ["YAML syntax error", "quoted scalar", "starts on line 4"],
    ),
    (HEAD + "checks:\n  - {metric: map, at_least: 0.5\n", 5, None, ["YAML syntax error"]),
    ("", 1, None, ["the suite is empty", "datasets:"]),
    ("# only a comment\n", 1, None, ["the suite is empty"]),
    ("- datasets\n- checks\n", 1, "", ["expected a mapping", "found a list"]),
    ("just a word\n", 1, "", ["expected a mapping", "str 'just a word'"]),
    ("42\n", 1, "", ["expected a mapping"]),
    (
        HEAD + "checks:\n  - {metric: map, at_least: 0.5}\n---\nmore: 1\n",
        5,
        None,
        ["YAML syntax error", "single document"],
    ),
    (
        b"datasets:\n  a: {queries: data/set.npz}\n# caf\xe9\nchecks: []\n",
        3,
        None,
        ["not UTF-8", "save it as UTF-8"],
    ),
    ("datasets: !!python/object/apply:os.system [echo hi]\nchecks: []\n", 1, None, ["safe YAML"]),
    (
        HEAD + "options: {seed: !!timestamp 2020-13-99}\n" + TH % ("map", "at_least: 0.5"),
        3,
        None,
        ["as a YAML timestamp", "remove the '!!timestamp' tag"],
    ),
    (HEAD + "checks:\n  - {metric: map, at_least: !!float abc}\n", 4, None, ["as a YAML float"]),
    (HEAD + "checks:\n  - {metric: map, at_least: !!int 0x}\n", 4, None, ["as a YAML int"]),
    (HEAD + "checks:\n  - {metric: map, at_least: 0.5, id: !!binary a}\n", 4, None, ["base64"]),
    ("suite: x\n" + HEAD + "chekcs: []\n", 4, "chekcs", ["Did you mean 'checks'?"]),
    (
        HEAD + "checks:\n  - {metric: map, at_lest: 0.5}\n",
        4,
        "checks[0].at_lest",
        ["Did you mean 'at_least'?"],
    ),
    (
        HEAD + "models:\n  m: {calable: emb.py:f}\n" + TH % ("map", "at_least: 0.5"),
        4,
        "models.m.calable",
        ["Did you mean 'callable'?"],
    ),
    (
        HEAD + "checks:\n  - {metric: map, at_least: 0.5, confidnce: 0.9}\n",
        4,
        "checks[0].confidnce",
        ["Did you mean 'confidence'?"],
    ),
    (
        HEAD + "options: {sed: 3}\n" + TH % ("map", "at_least: 0.5"),
        3,
        "options.sed",
        ["Did you mean 'seed'?"],
    ),
    (
        HEAD + TH % ("recall_at_precision@90", "at_least: 0.5"),
        4,
        "checks[0].metric",
        ["Did you mean 'recall_at_precision@0.9'?"],
    ),
    (
        HEAD + TH % ("pair_f1@0.5", "at_least: 0.5"),
        4,
        "checks[0].metric",
        ["Did you mean 'pair_f1@t=0.5'?"],
    ),
    (
        HEAD + "checks:\n  - {metric: [map], at_least: 0.5}\n",
        4,
        "checks[0].metric",
        ["metric name", "a list"],
    ),
    (
        HEAD + "checks:\n  - {metric: map, dataset: nope, at_least: 0.5}\n",
        4,
        "checks[0].dataset",
        ["no dataset named 'nope'", "Declared: a"],
    ),
    (
        "datasets:\n  a: {queries: data}\n" + TH % ("map", "at_least: 0.5"),
        2,
        "datasets.a.queries",
        ["is a directory"],
    ),
    (
        'datasets:\n  a: {queries: "data/\\0x.npz"}\n' + TH % ("map", "at_least: 0.5"),
        2,
        "datasets.a.queries",
        ["not a usable path", "null byte"],
    ),
    (
        "datasets:\n  a: {queries: data/" + "x" * 5000 + ".npz}\n" + TH % ("map", "at_least: 0.5"),
        2,
        "datasets.a.queries",
        ["not a valid path", "(5009 characters)"],
    ),
]


@pytest.mark.parametrize("content, line, field, words", MALFORMED, ids=_ids(MALFORMED))
def test_malformed_files_give_located_suite_errors(where, content, line, field, words):
    _refused(where, content, line, field, words)


# --- fail closed: running: limits, confidence, bounds ---
def _run_all(suite, runner):
    outcomes, events = {}, []
    with listening(events.append):
        for case in suite.cases:
            try:
                runner.run(suite, case)
                outcomes[case.name] = "pass"
            except AssertionError as exc:
                outcomes[case.name] = f"fail: {exc}"
            except ModelTimeoutError as exc:
                outcomes[case.name] = f"timeout: {exc}"
    return outcomes, events


SKIP = "datasets:\n  s: {queries: data/skip.npz}\n"


@pytest.mark.parametrize(
    "limit, passes",
    [(2, False), (19, False), (20, True), (0.25, False), (0.5, True), (0.49, False)],
)
def test_max_skipped_fails_a_check_that_skips_more_queries(where, limit, passes):
    suite = load_suite(
        write_suite(where, SKIP + TH % ("map", f"at_least: 0.01, max_skipped: {limit}"))
    )
    outcomes, events = _run_all(suite, SuiteRunner())
    (outcome,) = outcomes.values()
    assert (outcome == "pass") is passes, outcome
    if not passes:
        assert "n_used 20 / n_skipped 20" in outcome and "max_skipped" in outcome
    assert events[-1].n_used == 20 and events[-1].n_skipped == 20


def test_a_checks_warnings_point_at_its_line_in_the_suite(where):
    """The skipped queries' warning (and every warning of a check's evaluation and gate)
    is shown at the suite file's line of the check, not at the library's line that
    gave it (a new user saw `retrieval_checks/suites/_run.py:792`); a failing gate's
    warnings too."""
    path = write_suite(
        where,
        SKIP + "checks:\n  - {metric: map, at_least: 0.01}\n  - {metric: map, at_least: 0.99}\n",
    )
    suite = load_suite(path)
    for case, line in zip(suite.cases, (4, 5)):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                SuiteRunner().run(suite, case)
            except AssertionError:
                assert line == 5
        skipped = [w for w in seen if "skipped" in str(w.message)]
        assert skipped, [str(w.message) for w in seen]
        assert all((w.filename, w.lineno) == (str(path), line) for w in seen), [
            (w.filename, w.lineno) for w in seen
        ]


def test_max_skipped_session_default_and_check_override(where):
    suite = load_suite(
        write_suite(
            where,
            SKIP + "checks:\n  - {metric: map, at_least: 0.01}\n"
            "  - {metric: hit_rate@1, at_least: 0.01, max_skipped: 0.5}\n",
        )
    )
    outcomes, _ = _run_all(suite, SuiteRunner(defaults={"max_skipped": 3}))
    assert (
        outcomes["map_at_least[precomputed-s]"].startswith("fail")
        and "n_skipped 20" in outcomes["map_at_least[precomputed-s]"]
    )
    assert outcomes["hit_rate@1_at_least[precomputed-s]"] == "pass"  # the check's own limit wins
    outcomes, _ = _run_all(suite, SuiteRunner())  # no limit: a warning, not a failure
    assert set(outcomes.values()) == {"pass"}


def test_max_skipped_suite_option_and_other_check_kinds(where):
    (where / "data/skip2.npz").write_bytes((where / "data/skip.npz").read_bytes())
    suite = load_suite(
        write_suite(
            where,
            "options: {max_skipped: 1}\ndatasets:\n  s: {queries: data/skip.npz}\n"
            "  t: {queries: data/skip2.npz}\nmodels:\n"
            "  m: {embeddings: {s: data/skip.npz, t: data/skip2.npz}}\n"
            "  n: {embeddings: {s: data/skip.npz, t: data/skip2.npz}}\n"
            "checks:\n  - {metric: map, dataset: s, compare: {baseline: n}}\n"
            "  - {metric: map, models: [m], gap: {train: s, test: t}, below: 0.5}\n",
        )
    )
    outcomes, _ = _run_all(suite, SuiteRunner())
    assert len(outcomes) == 2
    for outcome in outcomes.values():
        assert outcome.startswith("fail") and "n_used 20 / n_skipped 20" in outcome, outcome


@pytest.mark.parametrize(
    "defaults, words",
    [
        ({"max_skipped": 1.5}, "max_skipped"),
        ({"max_skipped": -1}, "max_skipped"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
        ({"confidence": 95}, "did you mean 0.95"),
        ({"max_skiped": 3}, "Did you mean 'max_skipped'?"),
    ],
)
def test_session_defaults_are_validated(defaults, words):
    with pytest.raises(InputError, match=None) as info:
        SuiteRunner(defaults=defaults)
    assert words in str(info.value)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"device": "gpu"}, "device='gpu'"),
        ({"max_memory": "lots"}, "max_memory"),
        ({"progress": "yes"}, "progress"),
        ({"regen": "sometimes"}, "regen"),
    ],
)
def test_runner_arguments_are_validated_at_construction(kwargs, words):
    with pytest.raises(InputError) as info:
        SuiteRunner(**kwargs)
    assert words in str(info.value)


SLOW_SUITE = (
    "suite: slowpoke\ndatasets:\n  a: {queries: {file: data/set.npz, inputs: inputs}}\nmodels:\n"
    "  stuck: {callable: slow.py:f%s}\n  fine: {callable: emb.py:f}\n"
    "checks:\n  - {metric: map, at_least: 0.01}\n  - {metric: hit_rate@1, at_least: 0.01}\n"
)


@pytest.mark.parametrize(
    "model_timeout, defaults", [(", timeout: 0.5", {}), ("", {"timeout": 0.5})]
)
def test_a_model_that_never_returns_fails_its_checks_and_the_session_goes_on(
    where, model_timeout, defaults
):
    suite = load_suite(write_suite(where, SLOW_SUITE % model_timeout))
    start = time.perf_counter()
    outcomes, _ = _run_all(suite, SuiteRunner(defaults=defaults))
    assert time.perf_counter() - start < 5.0  # one wait of 0.5 s, not one per check, never 30 s
    stuck = [v for k, v in outcomes.items() if "stuck" in k]
    fine = [v for k, v in outcomes.items() if "fine" in k]
    assert len(stuck) == 2 and all(v.startswith("timeout:") for v in stuck)
    assert all(w in stuck[0] for w in ("'stuck'", "'a'", "slowpoke", "timeout=0.5"))
    assert fine == ["pass", "pass"]


def test_a_check_timeout_overrides_the_model_timeout(where):
    suite = load_suite(
        write_suite(
            where,
            SLOW_SUITE.replace(
                "checks:\n",
                "checks:\n  - {metric: mrr, at_least: 0.01, models: [stuck], timeout: 0.3}\n",
            )
            % ", timeout: 600",
        )
    )
    case = suite.cases[0]
    start = time.perf_counter()
    with pytest.raises(ModelTimeoutError, match="timeout=0.3") as info:
        SuiteRunner().run(suite, case)
    assert time.perf_counter() - start < 3.0
    assert info.value.timeout == 0.3


def _interval(where, options, defaults=None):
    suite = load_suite(
        write_suite(where, options + HEAD + TH % ("map", "at_least: 0.05, on: interval"))
    )
    _, events = _run_all(suite, SuiteRunner(defaults=defaults))
    (event,) = events
    return event


def test_confidence_and_seed_reach_the_bootstrap_behind_on_interval(where):
    narrow = _interval(where, "options: {confidence: 0.8}\n")
    wide = _interval(where, "options: {confidence: 0.99}\n")
    assert narrow.confidence == 0.8 and wide.confidence == 0.99
    assert wide.low < narrow.low <= narrow.high < wide.high
    session = _interval(where, "", {"confidence": 0.8})
    assert (session.low, session.high, session.confidence) == (narrow.low, narrow.high, 0.8)
    seeded = [_interval(where, f"options: {{confidence: 0.8, seed: {s}}}\n") for s in (3, 3, 4)]
    assert (seeded[0].low, seeded[0].high) == (seeded[1].low, seeded[1].high)
    assert (seeded[0].low, seeded[0].high) != (seeded[2].low, seeded[2].high)


def test_the_confidence_changes_the_verdict(where):
    narrow = _interval(where, "options: {confidence: 0.8}\n")
    wide = _interval(where, "options: {confidence: 0.99}\n")
    threshold = round((narrow.low + wide.low) / 2, 4)
    text = HEAD + TH % ("map", f"at_least: {threshold}, on: interval")
    verdicts = []
    for conf in (0.8, 0.99):
        suite = load_suite(write_suite(where, f"options: {{confidence: {conf}}}\n" + text))
        verdicts.append(_run_all(suite, SuiteRunner())[0])
    assert list(verdicts[0].values()) == ["pass"]
    assert (
        list(verdicts[1].values())[0].startswith("fail") and "99%" in list(verdicts[1].values())[0]
    )


@pytest.mark.parametrize(
    "bounds, passed",
    [("at_least: 0.05, at_most: 0.99", True), ("at_least: 0.05, at_most: 0.1", False)],
)
def test_both_bounds_are_recorded_in_one_gate(where, bounds, passed):
    suite = load_suite(write_suite(where, HEAD + TH % ("map", bounds)))
    outcomes, events = _run_all(suite, SuiteRunner())
    (event,) = events
    assert event.comparison == "between" and set(event.bounds) == {"at_least", "at_most"}
    assert event.passed is passed
    if not passed:
        assert "> 0.1" in list(outcomes.values())[0]


# --- fail closed: property: load_suite raises only SuiteError ---
FUZZ_BASE = """suite: s
markers: [slow, {xfail: {reason: r, strict: true}}]
options: {confidence: 0.9, seed: 3, max_skipped: 2}
datasets:
  a: {queries: data/set.npz}
  b: {queries: {file: data/set.npz, labels: labels}, gallery: data/set.npz}
  p: {type: image_text, images: {file: data/pairs.npz, embeddings: images}, captions: {file: data/pairs.npz, embeddings: captions}}
models:
  m: {callable: emb.py:f, kwargs: {k: 1}, batch_size: 8, timeout: 3}
  n: {embeddings: {a: data/set.npz, b: {queries: data/set.npz, gallery: data/set.npz}}}
checks:
  - {metric: map, dataset: a, models: [m, n], at_least: 0.5, at_most: 0.99, on: interval}
  - {metric: hit_rate@1, datasets: [a, b], models: [m], at_least: 0.5, markers: [{skipif: {condition: false, reason: x}}]}
  - {metric: map, models: [m], gap: {train: a, test: b}, below: 0.1, on: value}
  - {metric: map, dataset: a, models: [m, n], compare: {baseline: n, rule: non_inferior, margin: 0.01}}
  - {metric: map, dataset: a, models: [m], baseline: {max_drop: 0.01, max_relative_drop: 0.1, significant: true}}
  - {metric: rsum, dataset: p, models: [m], at_least: 300}
"""
FUZZ_VALUES = [
    "null",
    "[]",
    "{}",
    "x",
    "1e309",
    "-1",
    "true",
    ".nan",
    "-.inf",
    "0",
    "1",
    "100",
    "'0.5'",
    "[1, [2]]",
    "{a: {b: 1}}",
    "*nope",
    "&a 1",
    "!!binary aGk=",
    "'" + "y" * 300 + "'",
    "9" * 200,
    "0x1F",
    "1:30",
    "~",
    "'@'",
    "map",
    "m",
    "a",
    "cuda:0",
    "2020-01-01",
    "!!timestamp 2020-99-01",
    "!!set {a, b}",
    "!!int z",
    '"\\0"',
    "\"__import__('os')\"",
    "-0",
]


def test_mutated_suites_raise_only_suite_errors(where):
    import random
    import re

    load_suite(write_suite(where, FUZZ_BASE))  # the base is valid
    tokens = [(m.start(), m.end()) for m in re.finditer(r"[A-Za-z_@0-9./]+", FUZZ_BASE)]
    rnd = random.Random(12)
    refused = 0
    for _ in range(400):
        text = FUZZ_BASE
        for _ in range(rnd.choice([1, 1, 2, 3])):
            a, b = rnd.choice(tokens)
            if b <= len(text):
                text = text[:a] + rnd.choice(FUZZ_VALUES) + text[b:]
        try:
            load_suite(write_suite(where, text, "fuzz.yaml"))
        except SuiteError as exc:
            refused += 1
            assert exc.line is None or 1 <= exc.line <= text.count("\n") + 1
            assert len(str(exc)) < 1500
    assert refused > 200


# --- fail closed: models that never load or never return time out ---
def test_a_model_whose_code_never_finishes_importing_times_out(where):
    (where / "hang_on_import.py").write_text(
        "import time\ntime.sleep(30)\n\ndef f(x):\n    return x\n"
    )
    suite = load_suite(
        write_suite(
            where,
            "datasets:\n  a: {queries: {file: data/set.npz, inputs: inputs}}\nmodels:\n"
            "  h: {callable: hang_on_import.py:f, timeout: 0.5}\n" + TH % ("map", "at_least: 0.01"),
        )
    )
    start = time.perf_counter()
    with pytest.raises(ModelTimeoutError, match="loading model 'h'"):
        SuiteRunner().run(suite, suite.cases[0])
    assert time.perf_counter() - start < 3.0


def test_a_classifier_that_never_returns_times_out(where):
    pytest.importorskip("torch")
    (where / "net.py").write_text(
        "import time\nimport torch\n\n\nclass Slow(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.lin = torch.nn.Linear(8, 3)\n\n    def forward(self, x):\n"
        "        time.sleep(30)\n        return self.lin(x.flatten(1))\n\n\ndef build():\n    return Slow()\n"
    )
    rng = np.random.default_rng(0)
    np.savez(
        where / "data/img.npz",
        images=rng.normal(size=(12, 8)).astype(np.float32),
        labels=np.arange(12) % 3,
    )
    suite = load_suite(
        write_suite(
            where,
            "suite: clf\ndatasets:\n  img: {type: images, images: {file: data/img.npz, "
            "inputs: images}}\nmodels:\n  slow: {factory: net.py:build, timeout: 0.5}\n"
            "checks:\n  - {metric: accuracy, at_least: 0.5}\n",
        )
    )
    start = time.perf_counter()
    with pytest.raises(ModelTimeoutError) as info:
        SuiteRunner(device="cpu").run(suite, suite.cases[0])
    assert time.perf_counter() - start < 5.0
    assert all(w in str(info.value) for w in ("'slow'", "'img'", "clf", "timeout=0.5"))


# --- fail closed: one metric's error fails only its check (review) ---
def _run_errors(suite, runner):
    outcomes = {}
    for case in suite.cases:
        try:
            runner.run(suite, case)
            outcomes[case.name] = "pass"
        except AssertionError as exc:
            outcomes[case.name] = f"fail: {exc}"
        except SuiteError as exc:
            outcomes[case.name] = f"error: {exc}"
    return outcomes


@pytest.fixture
def collapsed(where):
    y = np.repeat(np.arange(6), 5)
    np.savez(where / "data/collapsed.npz", embeddings=np.eye(8)[y].astype(np.float32), labels=y)
    return where


def test_a_metric_error_on_the_shared_pass_fails_only_its_own_check(collapsed):
    suite = load_suite(
        write_suite(
            collapsed,
            "datasets:\n  d: {queries: data/collapsed.npz}\nchecks:\n"
            "  - {metric: map, at_least: 0.5}\n"
            "  - {metric: discriminant_ratio, at_least: 1}\n"
            "  - {metric: medr, at_most: 3}\n",
        )
    )
    outcomes = _run_errors(suite, SuiteRunner())
    assert outcomes["map_at_least[precomputed-d]"] == "pass"
    assert outcomes["medr_at_most[precomputed-d]"] == "pass"
    error = outcomes["discriminant_ratio_at_least[precomputed-d]"]
    assert error.startswith("error") and "S_W" in error and "rc_suite.yaml:5" in error, error


def test_a_metric_error_leaves_the_other_checks_events_with_their_values(collapsed):
    suite = load_suite(
        write_suite(
            collapsed,
            "datasets:\n  d: {queries: data/collapsed.npz}\nchecks:\n"
            "  - {metric: discriminant_ratio, at_least: 1}\n"
            "  - {metric: map, at_least: 0.5}\n",
        )
    )
    runner = SuiteRunner()
    events = []
    with listening(events.append):
        outcomes = _run_errors(suite, runner)
    assert outcomes["map_at_least[precomputed-d]"] == "pass"
    assert [e.metric for e in events] == ["map"] and events[0].value == pytest.approx(1.0)


def test_a_gap_check_falls_back_to_its_own_metric_too(collapsed):
    (collapsed / "data/collapsed2.npz").write_bytes((collapsed / "data/collapsed.npz").read_bytes())
    suite = load_suite(
        write_suite(
            collapsed,
            "datasets:\n  d: {queries: data/collapsed.npz}\n"
            "  e: {queries: data/collapsed2.npz}\nchecks:\n"
            "  - {metric: discriminant_ratio, datasets: [d, e], at_least: 1}\n"
            "  - {metric: map, gap: {train: d, test: e}, below: 0.1}\n",
        )
    )
    outcomes = _run_errors(suite, SuiteRunner())
    assert [k for k, v in outcomes.items() if v == "pass"] == ["map_gap[precomputed-d-e]"], outcomes


def test_a_data_error_still_fails_every_check_without_retrying_per_metric(where):
    suite = load_suite(
        write_suite(
            where,
            "datasets:\n  d: {queries: {file: data/set.npz, labels: nope}}\nchecks:\n"
            "  - {metric: map, at_least: 0.1}\n  - {metric: medr, at_most: 5}\n",
        )
    )
    outcomes = _run_errors(suite, SuiteRunner())
    assert all(v.startswith("error") and "nope" in v for v in outcomes.values()), outcomes


def test_an_unattainable_bound_found_at_gate_time_names_the_checks_line(collapsed):
    suite = load_suite(
        write_suite(
            collapsed,
            "datasets:\n  d: {queries: data/collapsed.npz}\nchecks:\n"
            "  - {metric: map, at_least: 0.5}\n"
            "  - {metric: medr, at_most: 100000}\n",
        )
    )
    outcomes = _run_errors(suite, SuiteRunner())
    assert outcomes["map_at_least[precomputed-d]"] == "pass"
    error = outcomes["medr_at_most[precomputed-d]"]
    assert error.startswith("error") and "rc_suite.yaml:5" in error and "at_most=100000" in error
    assert "could never fail" in error


def test_a_max_skipped_failure_outside_a_gate_is_a_failed_gate_event(where):
    (where / "data/skip2.npz").write_bytes((where / "data/skip.npz").read_bytes())
    suite = load_suite(
        write_suite(
            where,
            "datasets:\n  s: {queries: data/skip.npz}\n  t: {queries: data/skip2.npz}\n"
            "checks:\n  - {metric: map, gap: {train: s, test: t}, below: 0.5, "
            "max_skipped: 0}\n",
        )
    )
    outcomes, events = _run_all(suite, SuiteRunner())
    (outcome,) = outcomes.values()
    assert outcome.startswith("fail")
    (event,) = events
    assert not event.passed and event.gate == "assert_gap_below" and event.metric == "map"
    assert (event.n_used, event.n_skipped, event.bounds) == (20, 20, {"max_skipped": 0})
    assert event.dataset == "s" and event.value is not None


def test_a_symlink_loop_or_broken_link_is_named_as_such(tmp_path):
    """A source that is a symbolic link loop, or a link to nothing, says so (not 'does
    not exist', which sends the user looking for a file that is there)."""
    (tmp_path / "l1").symlink_to(tmp_path / "l2")
    (tmp_path / "l2").symlink_to(tmp_path / "l1")
    (tmp_path / "broken").symlink_to(tmp_path / "nowhere")
    for name, words in (("l1", "symbolic link loop"), ("broken", "broken symbolic link")):
        p = tmp_path / f"rc_{name}.yaml"
        p.write_text(
            f"datasets:\n  d: {{type: retrieval, queries: {{file: {name}, embeddings: e}}}}\n"
            "checks:\n  - {metric: map, at_least: 0.5}\n"
        )
        with pytest.raises(SuiteError) as info:
            load_suite(p)
        assert info.value.line == 2 and words in str(info.value), str(info.value)
