"""Issue 25, suites: a misspelt model name is answered from the suite's declared models
only; per-model evaluation options (``similarity``, ...) override the suite's."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_checks import SuiteError, SuiteRunner, load_suite

EMB = '''
import numpy as np

def f(x):
    return np.asarray(x, dtype=np.float64)

def scaled(x):
    # rows of very different norms: dot products rank by norm, cosine does not
    x = np.asarray(x, dtype=np.float64)
    return x * (1.0 + 50.0 * np.arange(len(x))[:, None] % 7)
'''


@pytest.fixture
def where(tmp_path):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 4)
    e = (rng.normal(size=(10, 8))[y] + 1.0 * rng.normal(size=(40, 8))).astype(np.float32)
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data/set.npz", embeddings=e, inputs=e, labels=y)
    (tmp_path / "emb.py").write_text(EMB)
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 1.0 r\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\n")
    return tmp_path


def _error(where, text) -> SuiteError:
    p = where / "rc_suite.yaml"
    p.write_text(text)
    with pytest.raises(SuiteError) as info:
        load_suite(p)
    return info.value


MODELS = "models:\n  alpha: {callable: emb.py:f}\n  beta: {callable: emb.py:f}\n"
HEAD = "datasets:\n  a: {queries: data/set.npz}\n"


@pytest.mark.parametrize("field", ["model", "models"])
def test_a_model_typo_lists_only_the_declared_models(where, field):
    value = "rnu" if field == "model" else "[alpha, rnu]"
    err = _error(where, HEAD + MODELS + f"checks:\n  - {{metric: map, at_least: 0.1, {field}: {value}}}\n")
    message = str(err)
    assert "Declared: alpha, beta." in message, message
    assert "run" not in message.replace("'rnu'", ""), message  # 'run' is no model of this suite
    assert err.line == 7


def test_a_typo_of_a_declared_model_is_suggested(where):
    err = _error(where, HEAD + MODELS + "checks:\n  - {metric: map, at_least: 0.1, model: alpah}\n")
    assert "Did you mean 'alpha'?" in str(err) and "Declared: alpha, beta." in str(err)


def test_the_run_model_is_listed_when_the_suite_has_run_datasets(where):
    text = (HEAD + "  r: {type: run, run: run.txt, qrels: qrels.txt}\n" + MODELS
            + "checks:\n  - {metric: map, at_least: 0.1, dataset: r, model: rnu}\n")
    message = str(_error(where, text))
    assert "Did you mean 'run'?" in message and "Declared: alpha, beta, run." in message, message


def test_compare_baseline_typo_lists_only_the_declared_models(where):
    err = _error(where, HEAD + MODELS + "checks:\n  - {metric: map, compare: {baseline: rnu}}\n")
    assert "Declared: alpha, beta." in str(err) and "'run'" not in str(err)


def test_the_implicit_model_is_the_one_listed_without_models(where):
    err = _error(where, HEAD + "checks:\n  - {metric: map, at_least: 0.1, model: precomputd}\n")
    assert "Did you mean 'precomputed'?" in str(err) and "Declared: precomputed." in str(err)
