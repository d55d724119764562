"""Every evaluate entry point validates all its options before any work starts: for each
entry point, each option it takes (from the option table, retrieval_checks.options, and
``progress``) with a bad value is an InputError naming it, raised before the engine
plans, prepares or streams a single block (a spy on those stages fails the test if it
runs). ``progress=`` was once checked only after the whole pass.

Cost: about 1 s (tiny inputs; the engine never runs; most of it is importing torch).
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from shared_setup import EngineStarted, engine_must_not_start

import retrieval_checks as rc
from retrieval_checks.options import OPTIONS

#: A value each kind of option refuses.
_BAD = {
    "choice": "bogus",
    "number": math.nan,
    "integer": -7,
    "device": "tpu",
    "memory": "lots",
    "skipped": -1,
}

# the keyword each entry point writes for an option of the table (evaluate's group seed)
_ARGUMENT = {"seed": ("seed", "group_seed")}

_X = np.random.default_rng(0).normal(size=(12, 4)).astype(np.float32)
_Y = np.repeat(np.arange(4), 3)


def _calls():
    """(entry point, positional and keyword inputs that would run the engine)."""
    image = np.repeat(np.arange(4), 2)
    return {
        "evaluate": (rc.evaluate, (_X,), {"query_labels": _Y, "metrics": ["map"]}),
        "evaluate_image_text": (rc.evaluate_image_text, (_X[:4], _X[:8], image), {}),
        "ann_recall": (rc.ann_recall, (_X, _X, np.argsort(-_X @ _X.T, axis=1)[:, :3]), {"k": 3}),
    }


def _cases():
    out = []
    for name, (fn, _, _) in _calls().items():
        params = inspect.signature(fn).parameters
        for option, o in OPTIONS.items():
            for argument in _ARGUMENT.get(option, (option,)):
                if argument in params:
                    out.append((name, argument, _BAD[o.kind]))
        if "progress" in params:
            out.append((name, "progress", "yes"))
    return out


@pytest.fixture
def spy():
    """Every engine stage, in every engine module that holds it, raises EngineStarted."""
    with engine_must_not_start():
        yield


@pytest.mark.parametrize("entry, argument, bad", _cases(), ids=lambda v: str(v))
def test_a_bad_option_is_refused_before_any_work(spy, entry, argument, bad):
    fn, args, kwargs = _calls()[entry]
    try:
        fn(*args, **kwargs, **{argument: bad})
    except rc.InputError as exc:
        assert argument in str(exc) or "max_memory" in str(exc), str(exc)
    except EngineStarted:
        pytest.fail(f"{entry}({argument}={bad!r}) started the engine before refusing the option")
    else:
        pytest.fail(f"{entry}({argument}={bad!r}) was accepted")


@pytest.mark.parametrize("entry", list(_calls()))
def test_the_spy_sees_work_with_valid_options(spy, entry):
    """The spy is live: with valid options, each entry point reaches an engine stage."""
    fn, args, kwargs = _calls()[entry]
    with pytest.raises(EngineStarted):
        fn(*args, **kwargs)


@pytest.mark.parametrize("bad", ["number", "file", "unwritable", "executor"])
def test_checkpoint_and_executor_are_refused_before_any_work(spy, tmp_path, bad):
    """``checkpoint=`` (not a path, a file, a directory that cannot be created) and
    ``executor=`` (no ``submit``) are checked with the other options: before the engine
    plans or prepares (they were checked when the pass began streaming)."""
    afile = tmp_path / "a-file"
    afile.write_text("x")
    kwargs = {
        "number": {"checkpoint": 42},
        "file": {"checkpoint": afile},
        "unwritable": {"checkpoint": afile / "below-a-file"},
        "executor": {"executor": object()},
    }[bad]
    fn, args, base = _calls()["evaluate"]
    name = next(iter(kwargs))
    try:
        fn(*args, **base, **kwargs)
    except rc.InputError as exc:
        assert f"{name}=" in str(exc), str(exc)
    except EngineStarted:
        pytest.fail(f"evaluate({name}={kwargs[name]!r}) started the engine before refusing it")
    else:
        pytest.fail(f"evaluate({name}={kwargs[name]!r}) was accepted")
