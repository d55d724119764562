"""Set-ups several test files share (importable from every layer's tests, as
``reference.py`` is: tests/conftest.py puts this folder on sys.path). A helper moves
here when a second file needs it, instead of a copy."""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import retrieval_checks as rc
from retrieval_checks.metrics import Measurement


def run_gate(gate, warning: type[Warning] = Warning):
    """Calls ``gate()`` and returns ``(events, messages, error)``: the gate events it
    published (``rc.gates.listening``), the messages of the warnings of class ``warning``
    it raised (every one recorded, none filtered out), and its AssertionError (None if
    it passed)."""
    events = []
    with rc.gates.listening(events.append), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            gate()
            error = None
        except AssertionError as exc:
            error = exc
    return events, [str(w.message) for w in caught if issubclass(w.category, warning)], error


@contextlib.contextmanager
def unheard(*listeners):
    """Gates run inside the block are not the running pytest session's: only
    ``listeners`` hear them (the plugin running this suite listens too, and would put
    them in its summary, JSON and history), and no session's family correction decides
    their deferred checks. The one home of the gate modules' private state that tests
    replace (``_events._listeners``, ``_family._session``)."""
    from retrieval_checks.gates import _events, _family

    with pytest.MonkeyPatch.context() as m:
        m.setattr(_events, "_listeners", [])
        m.setattr(_family, "_session", [])
        with contextlib.ExitStack() as stack:
            for listener in listeners:
                stack.enter_context(rc.gates.listening(listener))
            yield


#: The engine's stages of work: planning a pass, preparing it, streaming its blocks, the
#: first relevant ranks, the binning pass, the fused image-text task.
ENGINE_STAGES = (
    "plan_pass",
    "prepare_problem",
    "stream",
    "each_block",
    "run_block",
    "first_relevant_ranks",
    "binning_pass",
    "fused_image_text",
)


class EngineStarted(Exception):
    """Raised by :func:`engine_must_not_start`'s stages."""


@contextlib.contextmanager
def engine_must_not_start():
    """Inside the block, every stage of :data:`ENGINE_STAGES`, in every engine module
    that holds it, raises :class:`EngineStarted`: a call that reaches the engine's work
    fails (the probe of "refused before any work"; each user also checks that valid
    inputs do raise it, so the probe is live). The one home of the engine's private
    stage names that tests replace."""
    import retrieval_checks.engine  # noqa: F401  (the engine's modules, loaded)

    def started(*args, **kwargs):
        raise EngineStarted

    with pytest.MonkeyPatch.context() as m:
        for name, module in list(sys.modules.items()):
            if not name.startswith("retrieval_checks.engine") or module is None:
                continue
            for stage in ENGINE_STAGES:
                if callable(getattr(module, stage, None)):
                    m.setattr(module, stage, started)
        yield


@contextlib.contextmanager
def on_open(path, action, *, writes: bool = False):
    """Inside the block, ``action(name)`` runs just before ``path`` (or a file under it,
    when it is a directory) is opened for reading, or for writing (modes with ``w``,
    ``a``, ``x`` or ``+``) when ``writes``: it may raise (a file the user may not read)
    or act (another run starting at that moment). The interpreter's ``open`` is
    filtered (``builtins.open`` and ``io.open``, which pathlib uses), not a library
    module's name: the test need not know which module opens the file."""
    real = io.open
    root = str(Path(path))

    def guarded(file, mode="r", *args, **kwargs):
        name = str(file) if isinstance(file, (str, os.PathLike)) else ""
        hit = name == root or name.startswith(root.rstrip("/") + "/")
        if hit and writes == any(c in mode for c in "wax+"):
            action(name)
        return real(file, mode, *args, **kwargs)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(builtins, "open", guarded)
        m.setattr(io, "open", guarded)
        yield


def permission_denied(path, *, writes: bool = False):
    """Inside the block, opening ``path`` (or a file under it) for reading, or for
    writing when ``writes``, raises ``PermissionError(13, "Permission denied")``, as for
    a user without the permission (chmod does not stop root, who runs these tests in
    containers): :func:`on_open`."""

    def deny(name):
        raise PermissionError(13, "Permission denied", name)

    return on_open(path, deny, writes=writes)


# a bag-of-words embedder: a text model as a callable of a list of strings
BEIR_EMBEDDER = """
import hashlib
import numpy as np

def embed(texts, part=None):
    out = np.zeros((len(texts), 32))
    for i, t in enumerate(texts):
        for w in t.lower().split():
            out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 32] += 1.0
    return out + 0.01 * (part == "queries")
"""
BEIR_WORDS = (
    "cat dog bird fish red blue green text search model query document river stone tree".split()
)


def beir_corpus(rng, n_docs=40, n_queries=12):
    """BEIR documents (one without a title), queries and graded qrels (the last two
    queries unjudged) over a small vocabulary."""
    docs = [
        {
            "_id": f"d{i}",
            "title": " ".join(rng.choice(BEIR_WORDS, 2)),
            "text": " ".join(rng.choice(BEIR_WORDS, 6)),
        }
        for i in range(n_docs)
    ]
    docs[3].pop("title")  # the title is optional
    queries = [
        {"_id": f"q{i}", "text": " ".join(rng.choice(BEIR_WORDS, 3))} for i in range(n_queries)
    ]
    qrels = {}
    for i in range(n_queries - 2):  # the last two queries have no judgement in this split
        for d in rng.choice(n_docs, 4, replace=False):
            qrels.setdefault(f"q{i}", {})[f"d{d}"] = int(rng.integers(0, 4))
    return docs, queries, qrels


def write_beir(root, docs, queries, qrels, split="test"):
    """A BEIR directory: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    lines = ["query-id\tcorpus-id\tscore"] + [
        f"{q}\t{d}\t{g}" for q, ds in qrels.items() for d, g in ds.items()
    ]
    (root / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return root


# three Python tests gated through rc_evaluate (the second reuses the first one's pass;
# THRESHOLD: the grouped-recall CI gate's bound), for pytester projects
RC_EVALUATE_TESTS = """
import numpy as np
import retrieval_checks as rc
from pytest_retrieval_checks import assert_map_at_least, assert_recall_at_least, assert_grouped_recall_ci

rng = np.random.default_rng(0)
y = np.repeat(np.arange(40), 5)
X = (rng.normal(size=(40, 16))[y] + 0.8 * rng.normal(size=(200, 16))).astype(np.float32)
METRICS = ["map", "hit_rate@1", "grouped_recall@1"]

def test_map(rc_evaluate):
    res = rc_evaluate(X, query_labels=y, metrics=METRICS, model="m", dataset="d", group_size=5)
    assert_map_at_least(res, 0.3)

def test_top1(rc_evaluate):
    res = rc_evaluate(X, query_labels=y, metrics=METRICS, model="m", dataset="d", group_size=5)
    assert_recall_at_least(res, 0.5, k=1)
    assert rc_evaluate.passes == 1  # the second test reused the first test's pass

def test_grouped(rc_evaluate):
    res = rc_evaluate(X, query_labels=y, metrics=METRICS, model="m", dataset="d", group_size=5)
    assert_grouped_recall_ci(res, at_least=THRESHOLD)
"""


# a YAML suite project: the toy suite of tests/plugin/test_plugin_suites.py, also run under
# xdist by tests/plugin/test_terminal_summary.py
SUITE_EMBEDDER = """
import os
import numpy as np

def project(x, part=None):
    with open(os.environ["RC_TEST_LOG"], "a") as f:  # one line per computation
        f.write(f"{part}\\n")
    w = np.random.default_rng(7).normal(size=(x.shape[1], 8))
    return np.asarray(x, dtype=np.float64) @ w
"""

TOY_SUITE = """
suite: toy
markers: [quality]
options: {group_size: 3}
datasets:
  set: {queries: data/set.npz}
  train: {queries: data/train.npz}
models:
  proj: {callable: embedder.py:project}
checks:
  - {metric: map, dataset: set, at_least: MAP_THRESHOLD}
  - {metric: hit_rate@1, dataset: set, at_least: 0.5, on: interval, markers: [slow]}
  - {metric: grouped_recall@1, dataset: set, at_least: 0.5, on: interval}
  - {metric: grouped_recall@1, gap: {train: train, test: set}, below: 0.5}
"""


def toy_suite_project(root, monkeypatch):
    """A YAML suite's project under ``root`` (a pytester path): two labelled sets of raw
    inputs, a numpy model that logs each embedding call to ``RC_TEST_LOG`` (set here, with
    ``monkeypatch``), and ``write(threshold=0.2, name="rc_toy.yaml", text=None)``, which
    writes the suite (``TOY_SUITE``, four checks: map, two CI gates, a gap); ``write.log``: the
    log of embedding calls."""
    (root / "data").mkdir()
    for name, seed in (("set", 0), ("train", 1)):
        rng = np.random.default_rng(seed)
        y = np.repeat(np.arange(12), 6)
        centers = np.random.default_rng(99).normal(size=(12, 12))
        x = (2.0 * centers[y] + rng.normal(size=(72, 12))).astype(np.float32)
        np.savez(root / f"data/{name}.npz", inputs=x, labels=y)
    root.joinpath("embedder.py").write_text(SUITE_EMBEDDER)
    log = root / "calls.log"
    monkeypatch.setenv("RC_TEST_LOG", str(log))

    def write(threshold=0.2, name="rc_toy.yaml", text=None):
        root.joinpath(name).write_text(
            (text or TOY_SUITE).replace("MAP_THRESHOLD", str(threshold)).lstrip()
        )

    write.log = log
    return write


# --- set-ups of the fail-closed tests, shared by the unit files they were folded into (issue 26)


def seeded_linear():
    """A torch.nn.Linear(4, 2) with the weights of seed 0: the module of the embed and
    load_model tests (tests/models/test_embed.py, test_load_model.py)."""
    import torch

    torch.manual_seed(0)
    return torch.nn.Linear(4, 2)


def engine_junk():
    """A hypothesis strategy of junk arguments for the engine's entry points (None, bools,
    odd numbers, texts, lists, empty / NaN / 3-D / string / big-endian arrays, dicts):
    the property tests of tests/engine/test_inputs.py and test_image_text.py."""
    from hypothesis import strategies as st

    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-5, 5),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=4),
        st.lists(st.one_of(st.integers(-2, 30), st.text(max_size=2), st.floats()), max_size=6),
        st.sampled_from(
            [
                np.zeros((0, 3)),
                np.full((4, 3), np.nan),
                np.ones((4, 3)),
                np.ones((3, 4, 2)),
                np.ones(4),
                np.array([["a"]]),
                {"a": 1},
                {0: [1]},
                (1, 2),
                np.ones((4, 3), ">f4"),
            ]
        ),
    )


def only_library_errors(fn):
    """Call ``fn``: the library's errors (and a gate's AssertionError) are expected answers
    to junk; any other exception escapes and fails the property test calling this."""
    try:
        fn()
    except (rc.RetrievalChecksError, AssertionError):
        pass


#: a run's metadata and a gate record with both bounds and skipped queries: the history of
#: the tracking tests' ``db`` fixture (tests/tracking/conftest.py) and their own records
HISTORY_META = {
    "started": "2026-01-01T00:00:00+00:00",
    "git_commit": "abc123",
    "git_dirty": 0,
    "machine": "m",
}
HISTORY_GATE = {
    "test": "t.py::test_a",
    "metric": "map",
    "gate": "assert_metric",
    "value": 0.72,
    "low": 0.65,
    "high": 0.78,
    "threshold": 0.5,
    "comparison": "between",
    "on": "value",
    "bounds": {"at_least": 0.5, "at_most": 0.9},
    "passed": True,
    "n": 40,
    "unit": "queries",
    "n_used": 40,
    "n_skipped": 10,
    "warnings": ["10 of 50 queries skipped"],
}


def history_cli(*args):
    """``retrieval-checks ARGS`` in process: (exit code, what it printed to stdout)."""
    import io

    from retrieval_checks.tracking import main as cli

    out = io.StringIO()
    return cli(list(args), out=out), out.getvalue()


def ranx_evaluate(qrels: dict, run: dict, metrics):
    """``ranx.evaluate`` of ``metrics`` (a list, or one name) on a ``{qid: {docid: grade}}``
    qrels and a ``{qid: {docid: score}}`` run, as ``{metric: value}``: ranx's own
    conversion of plain dicts and its compiled metrics, the numbers a ranx user gets.

    Plain dicts, not ``ranx.Qrels``/``ranx.Run``: those build numba typed dicts whose
    compiled builders cost 61 CPU-s in a fresh environment (its numba cache empty, as in
    CI) and 4 CPU-s in every later process, while the metrics are the same compiled
    functions either way. ranx pairs plain dicts' queries by position, so the run is put
    in the qrels' query order here; both must hold the same queries (ranx's
    ``make_comparable`` would add the missing ones, which these tests never need)."""
    import ranx

    if set(run) != set(qrels):
        raise ValueError(
            "ranx_evaluate: the run and the qrels must hold the same queries (run only: "
            f"{sorted(set(run) - set(qrels))[:5]}, qrels only: {sorted(set(qrels) - set(run))[:5]})"
        )
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    qrels = {q: {str(d): int(g) for d, g in docs.items()} for q, docs in qrels.items()}
    run = {q: {str(d): float(s) for d, s in run[q].items()} for q in qrels}
    values = ranx.evaluate(qrels, run, names)
    return dict(values) if isinstance(values, dict) else {names[0]: float(values)}


# ----------------------------------------------------------------------------- gate tests
def expect_error(exc_type, fn, *fragments) -> str:
    """Calls ``fn()``, which must raise ``exc_type`` with a message holding every one of
    ``fragments``; returns the message."""
    with pytest.raises(exc_type) as info:
        fn()
    msg = str(info.value)
    for fragment in fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"
    return msg


class FixedMeasurementResult:
    """A result that answers ``measure`` with a fixed Measurement (NaN values etc.)."""

    def __init__(self, **kw):
        kw.setdefault("metric", "map")
        kw.setdefault("unit", "fraction")
        self.m = Measurement(**kw)
        self.config = {}

    def measure(self, name):
        return self.m

    def __contains__(self, name):
        return name == self.m.metric

    def __iter__(self):
        return iter([self.m.metric])


def labelled_clusters(seed=0, classes=20, per=5, singletons=0, d=8, noise=1.0):
    """``(X, y)``: ``classes`` classes of ``per`` float32 embeddings around normal centres
    (``noise``: the spread around them), then ``singletons`` one-item classes (labels
    1000, 1001, ...), whose queries have no relevant item under leave-one-out."""
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.repeat(np.arange(classes), per), 1000 + np.arange(singletons)]).astype(
        np.int64
    )
    centers = rng.normal(size=(y.max() + 1, d))
    X = (centers[y] + noise * rng.normal(size=(y.size, d))).astype(np.float32)
    return X, y


# ----------------------------------------------------------------------------- suite tests
def write_suite(root, text, name="rc_suite.yaml"):
    """Writes ``text`` (str, or bytes for a file that is not UTF-8) to ``root / name`` as
    it is (no dedent: a test of bad files controls every byte); returns the path."""
    p = root / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


SKIPPING_TEST = """
import numpy as np
import retrieval_checks as rc

def test_gate():
    y = np.array([0, 0, 1, 1, 2, 3, 4, 5])  # 4 of 8 queries have no relevant item
    x = np.random.default_rng(0).normal(size=(8, 8)).astype(np.float32)
    rc.assert_metric(rc.evaluate(x, query_labels=y, metrics=["map"], device="numpy"), "map", at_least=0.05, at_most=0.99GATE_ARGS)
"""  # on numpy: an xdist worker that runs it never imports torch (~2 CPU-s)


def skipping_project(pytester, gate_args=""):
    """A pytester project of one plain test whose gate (map in [0.05, 0.99]) skips 4 of
    its 8 queries (no relevant item); ``gate_args`` are more keyword arguments of the gate,
    e.g. ``", max_skipped=5"``."""
    pytester.makepyfile(test_gate=SKIPPING_TEST.replace("GATE_ARGS", gate_args))


def strict_json_loads(text: str):
    """``json.loads`` that refuses NaN, Infinity and -Infinity (strict JSON)."""

    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def root_conftest(config):
    """The tests' root conftest module (tests/conftest.py), as pytest loaded it. Not
    ``import conftest``: with the layers' own conftest.py files (tests/gates, tests/suites,
    tests/tracking), that name is whichever conftest pytest imported last."""
    from pathlib import Path

    want = Path(__file__).with_name("conftest.py")
    for plugin in config.pluginmanager.get_plugins():
        where = getattr(plugin, "__file__", None)
        if where and Path(where) == want:
            return plugin
    raise LookupError(f"{want} is not among pytest's plugins")
