"""Every option of every entry point that does real work is judged before that work
starts (issue 26: "every option validated before any work starts"), including the
options that can only be judged together (with the metrics asked for, or with the
labels' count). A table of (entry point, option, bad value) for each kind of work:

- the engine's pass (``evaluate``, ``evaluate_image_text``, ``ann_recall``): no stage
  of :data:`shared_setup.ENGINE_STAGES` runs (``engine_must_not_start``); options the
  option table covers are in ``test_options_before_work``, the rest are here;
- reading the inputs (``evaluate``'s ``relevance_level``: its type and its conflict
  with pair metrics need no data): the embeddings are never read;
- reading a run (``evaluate_run`` on files, dicts and arrays): the reader never runs;
- running a model (the classifier measures): its forward pass never runs.

Found by this audit (each failed before its fix): ``group_size`` too large for the
labels was refused only after the whole pass (grouped recall partitions the labels
while aggregating: 190 s at 40k queries before the error); ``relevance_level`` after the
embeddings and labels were read; ``evaluate_classifier``'s ``transforms=`` after two
model passes, its ``layer=`` (missing or unknown) after one; ``classification_gap``'s
``confidence=`` after both accuracies. Found later, strict xfails until their fixes:
``evaluate``'s ``tile=`` (checked when the pass was planned) and ``evaluate_run``'s
``slices=`` form (an empty ``{}`` or a bad dimension name refused only after the run
was read: 14 s on a 1M-line run).

Cost: about 2 s (tiny inputs: the work never runs; most of it imports torch).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from shared_setup import EngineStarted, engine_must_not_start

import retrieval_checks as rc
from retrieval_checks.engine import _evaluate, _runs


class WorkStarted(Exception):
    """Raised by a spied stage of work (reading inputs, reading a run, a model's forward)."""


def _started(*args, **kwargs):
    raise WorkStarted


_X = np.random.default_rng(0).normal(size=(12, 4)).astype(np.float32)
_Y = np.repeat(np.arange(4), 3)  # 4 labels: at most 2 groups of 2
_NB = np.argsort(-_X @ _X.T, axis=1)[:, :3]
_IMAGE = np.repeat(np.arange(4), 2)

# ----------------------------------------------------------------------------- the engine's pass
_ENGINE = {
    "evaluate": (rc.evaluate, (_X,), {"query_labels": _Y, "metrics": ["map"]}),
    "grouped": (
        rc.evaluate,
        (_X,),
        {"query_labels": _Y, "metrics": ["map", "grouped_recall@1"], "group_size": 2},
    ),
    "evaluate_image_text": (rc.evaluate_image_text, (_X[:4], _X[:8], _IMAGE), {}),
    "ann_recall": (rc.ann_recall, (_X, _X, _NB), {"k": 3}),
}

#: (entry, option, bad value, words the error names)
_ENGINE_CASES = [
    # grouped recall: group_size against the labels (4 here), refused after the pass before
    ("grouped", "group_size", 5, "larger than the number of labels (4)"),
    ("grouped", "group_size", 3, "Only 1 group of 3 labels fits the 4 labels"),
    ("grouped", "group_size", 1, "group_size=1"),
    ("grouped", "group_seed", -1, "group_seed=-1"),
    ("grouped", "group_repeats", 0, "group_repeats=0"),
    ("grouped", "confidence", 1.0, "confidence=1.0"),
    ("grouped", "ignore_identical_ids", True, "ignore_identical_ids=True"),
    # evaluate's options outside the option table
    ("evaluate", "relevance_level", 0, "relevance_level=0"),
    ("evaluate", "relevance_level", 1.5, "relevance_level=1.5"),
    ("evaluate", "relevance_level", True, "relevance_level=True"),
    ("evaluate", "ignore_identical_ids", "yes", "ignore_identical_ids='yes'"),
    ("evaluate", "progress", 1, "progress=1"),
    ("evaluate", "device", 3, "device='3'"),
    ("evaluate", "max_memory", -1, "max_memory=-1"),
    ("evaluate", "metrics", [3], "Metric names are strings"),
    ("evaluate", "metrics", [], "metrics is empty"),
    ("evaluate", "slices", [1, 2], "slices: 2 values for 12 queries"),
    ("evaluate", "checkpoint", b"dir", "checkpoint=b'dir'"),
    ("evaluate", "executor", 4, "executor=4 has no submit()"),
    ("evaluate", "tile", (0, 16), "tile=(0, 16)"),
    ("evaluate", "tile", "x", "tile='x'"),
    # evaluate_image_text's own options
    ("evaluate_image_text", "protocol", "5K", "protocol='5K'"),
    ("evaluate_image_text", "images_without_captions", True, "images_without_captions=True"),
    ("evaluate_image_text", "metrics", ["map"], "'map' is not an image-text metric"),
    ("evaluate_image_text", "slices", [1, 2], "slices: 2 values for 4 queries"),
    ("evaluate_image_text", "caption_slices", [1], "caption_slices: 1 values for 8 queries"),
    # ann_recall's own options
    ("ann_recall", "k", 0, "k=0"),
    ("ann_recall", "k", math.nan, "k=nan"),
    ("ann_recall", "k", 4, "k=4 but neighbors has 3 columns"),
    ("ann_recall", "slices", [1, 2], "slices: 2 values for 12 queries"),
]


@pytest.mark.parametrize("entry, option, bad, words", _ENGINE_CASES, ids=str)
def test_an_option_is_refused_before_the_engine_starts(entry, option, bad, words):
    fn, args, kwargs = _ENGINE[entry]
    with engine_must_not_start(), pytest.raises(rc.InputError) as info:
        fn(*args, **{**kwargs, option: bad})
    assert words in str(info.value), str(info.value)


@pytest.mark.parametrize("entry", list(_ENGINE))
def test_the_engine_probe_is_live(entry):
    """With valid options each entry point reaches an engine stage (grouped recall too:
    2 groups of 2 of the 4 labels fit)."""
    fn, args, kwargs = _ENGINE[entry]
    with engine_must_not_start(), pytest.raises(EngineStarted):
        fn(*args, **kwargs)


# ----------------------------------------------------------------------------- reading the inputs
@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"relevance_level": "1"}, "relevance_level='1'"),
        ({"relevance_level": None}, "relevance_level=None"),
        # a pair metric with a level above 1 is refused whatever the data
        (
            {"metrics": ["pair_f1@t=0.5"], "relevance_level": 2},
            "pair metrics with relevance_level=2",
        ),
    ],
    ids=str,
)
def test_relevance_level_is_judged_before_the_inputs_are_read(monkeypatch, kwargs, words):
    monkeypatch.setattr(_evaluate, "embedding_sides", _started)
    with pytest.raises(rc.InputError, match=words):
        rc.evaluate(_X, **{"query_labels": _Y, "metrics": ["map"], **kwargs})
    with pytest.raises(WorkStarted):  # the probe is live
        rc.evaluate(_X, query_labels=_Y, metrics=["map"])


# ----------------------------------------------------------------------------- reading a run
_RUN = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.0, "d1": 0.5}}
_QRELS = {"q1": {"d2": 1}, "q2": {"d3": 2}}

_RUN_CASES = [
    ("ties", "bogus", "ties='bogus'"),
    ("relevance_level", 0, "relevance_level=0"),
    ("relevance_level", "1", "relevance_level='1'"),
    ("empty_queries", "never", "empty_queries='never'"),
    ("confidence", 95, "did you mean 0.95?"),
    ("k", 0, "k=0"),
    ("k", 2.5, "k=2.5"),
    ("queries", "RUN", "did you mean 'run'?"),
    ("ignore_identical_ids", 1, "ignore_identical_ids=1"),
    ("metrics", ["grouped_recall@1"], "cannot be computed from a run"),
    ("metrics", [], "metrics is empty"),
    ("slices", ["a", "b"], "by query id"),
    ("slices", {}, "slices is empty"),
    ("slices", {"": {"q1": "a"}}, "dimension names are non-empty strings"),
]


@pytest.fixture(params=["files", "dicts", "arrays"])
def run_form(request, tmp_path):
    """A run and its qrels in each form evaluate_run reads."""
    if request.param == "files":
        run, qrels = tmp_path / "run.txt", tmp_path / "qrels.txt"
        run.write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")
        qrels.write_text("q1 0 d2 1\n")
        return str(run), str(qrels)
    if request.param == "dicts":
        return _RUN, _QRELS
    return (np.array([[0, 1]]), np.array([[1.0, 0.5]])), [[1]]


@pytest.fixture
def reader_must_not_run(monkeypatch):
    """Reading the run (files, mappings or arrays) raises WorkStarted."""
    for name in ("_read", "_read_run_file", "_read_qrels_file", "_read_arrays", "_read_string_ids"):
        monkeypatch.setattr(_runs, name, _started)


@pytest.mark.parametrize("option, bad, words", _RUN_CASES, ids=str)
def test_a_run_option_is_refused_before_the_run_is_read(
    run_form, reader_must_not_run, option, bad, words
):
    run, qrels = run_form
    kwargs = {"metrics": ["map"], option: bad}
    with pytest.raises(rc.InputError) as info:
        rc.evaluate_run(run, qrels, **kwargs)
    assert words in str(info.value), str(info.value)


def test_the_run_reader_probe_is_live(run_form, reader_must_not_run):
    with pytest.raises(WorkStarted):
        rc.evaluate_run(*run_form, metrics=["map"])


# ----------------------------------------------------------------------------- running a model
def _model():
    """A tiny convolutional classifier that counts its forward passes."""
    torch = pytest.importorskip("torch")

    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
            self.head = torch.nn.Linear(4, 3)
            self.forwards = 0

        def forward(self, x):
            self.forwards += 1
            return self.head(torch.relu(self.conv(x)).mean(dim=(2, 3)))

    return Counting(), torch.rand(12, 1, 8, 8, generator=torch.Generator().manual_seed(1))


_LABELS = np.array([0, 1, 2] * 4)
_BOXES = np.array([[0, 0, 4, 4]] * 12)

#: (entry, metrics, option, bad value, words the error names)
_MODEL_CASES = [
    # evaluate_classifier ran accuracy (and Grad-CAM) before judging these
    (
        "evaluate_classifier",
        ["accuracy", "effective_invariance"],
        "transforms",
        [3],
        "transforms holds",
    ),
    (
        "evaluate_classifier",
        ["accuracy", "effective_invariance"],
        "transforms",
        [],
        "transforms is empty",
    ),
    (
        "evaluate_classifier",
        ["accuracy", "effective_invariance"],
        "transforms",
        "flip",
        "list of callables",
    ),
    ("evaluate_classifier", ["accuracy", "cam_iou"], "layer", None, "cam_iou needs layer="),
    ("evaluate_classifier", ["accuracy", "cam_iou_box"], "layer", "conv2", "no layer 'conv2'"),
    ("evaluate_classifier", ["accuracy", "cam_iou"], "layer", 3, "no layer 3"),
    # already judged first: the table's options and batch_size
    ("evaluate_classifier", ["accuracy"], "cam_method", "gradcam+", "cam_method='gradcam+'"),
    ("evaluate_classifier", ["accuracy"], "rho", 1.5, "rho=1.5"),
    ("evaluate_classifier", ["accuracy"], "percentile", 100, "percentile=100"),
    ("evaluate_classifier", ["accuracy"], "n_resamples", -1, "n_resamples=-1"),
    ("evaluate_classifier", ["accuracy"], "seed", 1.5, "seed=1.5"),
    ("evaluate_classifier", ["accuracy"], "batch_size", 0, "batch_size=0"),
    ("evaluate_classifier", ["accuracy"], "device", "tpu", "device='tpu'"),
    # classification_gap ran both accuracies before judging its confidence
    ("classification_gap", None, "confidence", math.nan, "confidence=nan"),
    ("classification_gap", None, "confidence", 95, "did you mean 0.95?"),
    ("classification_gap", None, "batch_size", 0, "batch_size=0"),
    ("effective_invariance", None, "transforms", [3], "transforms holds"),
    ("spectral_measure", None, "percentile", 0, "percentile=0"),
    ("nuclear_norm", None, "batch_size", 0, "batch_size=0"),
    ("grad_cam", None, "method", "cam", "method='cam'"),
    ("grad_cam", None, "upsample", "yes", "upsample='yes'"),
]


def _model_call(entry, metrics, model, images):
    """(function, positional arguments, keyword arguments) of a valid call."""
    if entry == "evaluate_classifier":
        kw = {"metrics": metrics, "boxes": _BOXES, "layer": "conv", "device": "cpu"}
        return rc.evaluate_classifier, (model, images, _LABELS), kw
    if entry == "classification_gap":
        train, test = (images[:6], _LABELS[:6]), (images[6:], _LABELS[6:])
        return rc.classification_gap, (model, train, test), {"device": "cpu"}
    if entry == "grad_cam":
        return rc.grad_cam, (model, images, "conv"), {"device": "cpu"}
    if entry == "spectral_measure":
        return rc.spectral_measure, (model, images, _LABELS), {"device": "cpu"}
    return getattr(rc, entry), (model, images), {"device": "cpu"}


@pytest.mark.parametrize("entry, metrics, option, bad, words", _MODEL_CASES, ids=str)
def test_a_classifier_option_is_refused_before_the_model_runs(entry, metrics, option, bad, words):
    model, images = _model()
    fn, args, kwargs = _model_call(entry, metrics, model, images)
    with pytest.raises(rc.InputError) as info:
        fn(*args, **{**kwargs, option: bad})
    assert words in str(info.value), str(info.value)
    assert model.forwards == 0, (
        f"{entry}({option}={bad!r}) ran the model {model.forwards} times first"
    )


@pytest.mark.parametrize(
    "entry, metrics",
    [
        ("evaluate_classifier", ["accuracy", "effective_invariance", "cam_iou"]),
        ("classification_gap", None),
        ("effective_invariance", None),
        ("grad_cam", None),
    ],
    ids=str,
)
def test_the_model_probe_is_live(entry, metrics):
    """With valid options the model runs (the counter counts)."""
    model, images = _model()
    fn, args, kwargs = _model_call(entry, metrics, model, images)
    try:
        fn(*args, **kwargs)
    except rc.InputError:  # a verdict on the data (e.g. the spectral margins), after the model ran
        pass
    assert model.forwards > 0
