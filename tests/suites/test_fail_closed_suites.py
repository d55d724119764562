"""YAML suites fail closed: a battery of bad, hostile and borderline suite files.

Every refusal is a :class:`SuiteError` with the file, the line and the field, whose
message says what to do; no suite runs code (string skipif/xfail conditions), no
threshold makes a gate that can never fail, no file hangs the loader or eats memory,
and the runner's limits (``max_skipped``, ``timeout``), confidence and seed reach
the gates.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from retrieval_checks import SuiteError, SuiteRunner, load_suite
from retrieval_checks.errors import InputError, ModelTimeoutError
from retrieval_checks.gates import listening

HEAD = "datasets:\n  a: {queries: data/set.npz}\n"
TWO = "datasets:\n  a: {queries: data/set.npz}\n  b: {queries: data/set.npz}\n"
MODELS = "models:\n  m: {callable: emb.py:f}\n  n: {callable: emb.py:f}\n"
PAIRS = (
    "datasets:\n  p:\n    type: image_text\n    images: {file: data/pairs.npz, embeddings: images}\n"
    "    captions: {file: data/pairs.npz, embeddings: captions}\n"
)

EMB = """
import numpy as np

def f(x):
    return np.asarray(x, dtype=np.float64)
"""

SLOW = """
import time
import numpy as np

def f(x):
    time.sleep(30)  # never returns within the test's timeout
    return np.asarray(x)
"""


@pytest.fixture
def where(tmp_path):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 4)
    e = (rng.normal(size=(10, 8))[y] + 1.0 * rng.normal(size=(40, 8))).astype(np.float32)
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data/set.npz", embeddings=e, inputs=e, labels=y)
    y2 = y.copy()
    y2[::2] = 100 + np.arange(20)  # half the queries have no relevant item: skipped
    np.savez(tmp_path / "data/skip.npz", embeddings=e, inputs=e, labels=y2)
    images = rng.normal(size=(20, 8)).astype(np.float32)
    image = np.repeat(np.arange(20), 5)
    captions = (images[image] + 1.0 * rng.normal(size=(100, 8))).astype(np.float32)
    np.savez(tmp_path / "data/pairs.npz", images=images, captions=captions, image=image)
    (tmp_path / "emb.py").write_text(EMB)
    (tmp_path / "slow.py").write_text(SLOW)
    return tmp_path


def _write(where, text, name="rc_suite.yaml"):
    p = where / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


def _refused(where, text, line, field, words):
    p = _write(where, text)
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


# ---------------------------------------------------------------- no code from data: markers
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
        _write(
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


# ---------------------------------------------------------------- thresholds on the metric's scale
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
    load_suite(_write(where, text))


# ---------------------------------------------------------------- limits: max_skipped and timeout
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
        PAIRS + TH % ("rsum", "at_least: 250, max_skipped: 3"),
        7,
        "checks[0].max_skipped",
        ["does not apply to image_text"],
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
        _write(
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


# ---------------------------------------------------------------- hostile files: bombs, depth, size
def _bomb(levels=9, width=10):
    lines = ["    l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"    l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return "\n".join(lines)


def _timed_refusal(where, text, words, line=None):
    p = _write(where, text)
    start = time.perf_counter()
    with pytest.raises(SuiteError) as info:
        load_suite(p)
    elapsed = time.perf_counter() - start
    # expanded, the bombs hold ~10^9 nodes (hours of work); a refusal that reads only the
    # text takes milliseconds. The bound sits far from both, so a loaded machine does not
    # flake it (it did at 2 s) while an expansion still fails it
    assert elapsed < 30.0, f"took {elapsed:.1f} s: the aliases were expanded"
    message = str(info.value)
    assert len(message) < 1500
    for w in words:
        assert w in message, (w, message)
    if line is not None:
        assert info.value.line == line, message
    return info.value


def test_alias_bomb_in_kwargs_is_refused_quickly(where):
    text = (
        HEAD
        + "models:\n  m:\n    callable: emb.py:f\n    kwargs:\n"
        + _bomb()
        + "\n"
        + TH % ("map", "at_least: 0.5")
    )
    _timed_refusal(where, text, ["alias", "100000", "alias bomb"])


def test_alias_bomb_in_metric_is_refused_quickly(where):
    text = (
        "bomb: &b\n"
        + _bomb().replace("    ", "  ")
        + "\n"
        + HEAD
        + "checks:\n  - {metric: *b, at_least: 0.5}\n"
    )
    _timed_refusal(where, text, ["alias"])


def test_alias_bomb_through_merge_keys_is_refused(where):
    lines = ["x0: &x0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9, j: 10}"]
    for i in range(1, 8):
        lines.append(f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * 10) + "]")
    text = "\n".join(lines) + "\n" + HEAD + "checks:\n  - {<<: *x0, metric: map, at_least: 0.5}\n"
    _timed_refusal(where, text, ["alias"])


def test_one_alias_that_expands_beyond_the_limit_names_its_line(where):
    text = (
        "big: &big ["
        + ", ".join(["1"] * 1000)
        + "]\nrefs: ["
        + ", ".join(["*big"] * 200)
        + "]\n"
        + HEAD
        + TH % ("map", "at_least: 0.5")
    )
    _timed_refusal(where, text, ["alias"], line=2)


def test_a_recursive_alias_is_refused(where):
    text = (
        HEAD
        + "models:\n  m:\n    callable: emb.py:f\n    kwargs: &k {a: *k}\n"
        + TH % ("map", "at_least: 0.5")
    )
    _timed_refusal(where, text, ["alias", "inside its own anchor"], line=6)


def test_small_aliases_still_work(where):
    suite = load_suite(
        _write(
            where,
            HEAD + "models:\n  m:\n    callable: emb.py:f\n    kwargs: &k {dim: 4}\n"
            "  n:\n    callable: emb.py:f\n    kwargs: *k\n" + TH % ("map", "at_least: 0.5"),
        )
    )
    assert suite.models["n"].kwargs == {"dim": 4}


@pytest.mark.parametrize(
    "nested",
    [
        "[" * 5000 + "]" * 5000,
        "{a: " * 5000 + "1" + "}" * 5000,
    ],
)
def test_deep_nesting_is_a_suite_error_not_a_recursion_error(where, nested):
    text = (
        HEAD
        + "models:\n  m:\n    callable: emb.py:f\n    kwargs: {x: "
        + nested
        + "}\n"
        + TH % ("map", "at_least: 0.5")
    )
    _timed_refusal(where, text, ["nesting deeper than", "levels"], line=6)


def test_aliases_that_nest_deeper_than_the_limit_are_refused(where):
    lines = ["d0: &d0 [1]"] + [f"d{i}: &d{i} [*d{i - 1}]" for i in range(1, 200)]
    _timed_refusal(
        where, "\n".join(lines) + "\n" + HEAD + TH % ("map", "at_least: 0.5"), ["deeper than"]
    )


@pytest.mark.parametrize(
    "place, line",
    [
        ("checks:\n  - {metric: map, at_least: %s}\n", 4),
        ("checks:\n  - {metric: map, at_least: 0.5, seed: %s}\n", 4),
        (
            "models:\n  m: {callable: emb.py:f, batch_size: %s}\nchecks:\n  - {metric: map, at_least: 0.5}\n",
            4,
        ),
        (
            "models:\n  m: {callable: emb.py:f, kwargs: {n: -%s}}\nchecks:\n  - {metric: map, at_least: 0.5}\n",
            4,
        ),
    ],
)
def test_5000_digit_integers_are_suite_errors(where, place, line):
    _timed_refusal(where, HEAD + place % ("9" * 5000), ["5000 digits"], line=line)


def test_huge_values_are_cut_in_messages(where):
    huge = "x" * 1_000_000
    err = _timed_refusal(
        where,
        HEAD + f"checks:\n  - {{metric: map, at_least: 0.5, {huge[:1000]}: 1}}\n",
        ["unknown field", "(1000 characters)"],
        line=4,
    )
    assert huge[:200] not in str(err)
    err = _timed_refusal(
        where, HEAD + f"checks:\n  - {{metric: {huge}, at_least: 0.5}}\n", ["metric name"], line=4
    )
    assert err.field == "checks[0].metric" and len(str(err)) < 400
    err = _timed_refusal(
        where,
        HEAD + f"checks:\n  - {{metric: map, at_least: 0.5, similarity: {huge}}}\n",
        ["similarity"],
        line=4,
    )
    assert huge[:200] not in str(err)
    err = _timed_refusal(
        where,
        HEAD + f"checks:\n  - {{metric: map, dataset: {huge}, at_least: 0.5}}\n",
        ["no dataset named"],
        line=4,
    )
    assert huge[:200] not in str(err)


# ---------------------------------------------------------------- malformed files
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


def test_a_suite_path_that_is_a_directory_or_missing(where):
    with pytest.raises(SuiteError, match="directory, not a suite file"):
        load_suite(where)
    with pytest.raises(SuiteError, match="cannot read the file") as info:
        load_suite(where / "missing.yaml")
    assert info.value.path == where / "missing.yaml"


# ---------------------------------------------------------------- running: limits, confidence, bounds
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
    suite = load_suite(_write(where, SKIP + TH % ("map", f"at_least: 0.01, max_skipped: {limit}")))
    outcomes, events = _run_all(suite, SuiteRunner())
    (outcome,) = outcomes.values()
    assert (outcome == "pass") is passes, outcome
    if not passes:
        assert "n_used 20 / n_skipped 20" in outcome and "max_skipped" in outcome
    assert events[-1].n_used == 20 and events[-1].n_skipped == 20


def test_max_skipped_session_default_and_check_override(where):
    suite = load_suite(
        _write(
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
        _write(
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
    suite = load_suite(_write(where, SLOW_SUITE % model_timeout))
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
        _write(
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
    suite = load_suite(_write(where, options + HEAD + TH % ("map", "at_least: 0.05, on: interval")))
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
        suite = load_suite(_write(where, f"options: {{confidence: {conf}}}\n" + text))
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
    suite = load_suite(_write(where, HEAD + TH % ("map", bounds)))
    outcomes, events = _run_all(suite, SuiteRunner())
    (event,) = events
    assert event.comparison == "between" and set(event.bounds) == {"at_least", "at_most"}
    assert event.passed is passed
    if not passed:
        assert "> 0.1" in list(outcomes.values())[0]


# ---------------------------------------------------------------- property: load_suite raises only SuiteError
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

    load_suite(_write(where, FUZZ_BASE))  # the base is valid
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
            load_suite(_write(where, text, "fuzz.yaml"))
        except SuiteError as exc:
            refused += 1
            assert exc.line is None or 1 <= exc.line <= text.count("\n") + 1
            assert len(str(exc)) < 1500
    assert refused > 200


def test_a_model_whose_code_never_finishes_importing_times_out(where):
    (where / "hang_on_import.py").write_text(
        "import time\ntime.sleep(30)\n\ndef f(x):\n    return x\n"
    )
    suite = load_suite(
        _write(
            where,
            "datasets:\n  a: {queries: {file: data/set.npz, inputs: inputs}}\nmodels:\n"
            "  h: {callable: hang_on_import.py:f, timeout: 0.5}\n" + TH % ("map", "at_least: 0.01"),
        )
    )
    start = time.perf_counter()
    with pytest.raises(ModelTimeoutError, match="loading model 'h'"):
        SuiteRunner().run(suite, suite.cases[0])
    assert time.perf_counter() - start < 3.0


def test_files_that_are_too_big_not_regular_or_looping_are_refused(where):
    big = _write(where, "suite: x\n# " + "x" * (9 * 2**20) + "\n", "big.yaml")
    start = time.perf_counter()
    with pytest.raises(SuiteError, match="larger than 8 MiB"):
        load_suite(big)
    assert time.perf_counter() - start < 2.0
    loop = where / "loop.yaml"
    loop.symlink_to(where / "loop.yaml")
    with pytest.raises(SuiteError, match="cannot read the file"):
        load_suite(loop)
    import os

    if hasattr(os, "mkfifo"):
        fifo = where / "pipe.yaml"
        os.mkfifo(fifo)
        with pytest.raises(SuiteError, match="not a regular file"):
            load_suite(fifo)  # reading it would block forever


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
        _write(
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


# ---------------------------------------------------------------- one metric's error fails only its check (review)
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
        _write(
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
        _write(
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
        _write(
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
        _write(
            where,
            "datasets:\n  d: {queries: {file: data/set.npz, labels: nope}}\nchecks:\n"
            "  - {metric: map, at_least: 0.1}\n  - {metric: medr, at_most: 5}\n",
        )
    )
    outcomes = _run_errors(suite, SuiteRunner())
    assert all(v.startswith("error") and "nope" in v for v in outcomes.values()), outcomes


def test_an_unattainable_bound_found_at_gate_time_names_the_checks_line(collapsed):
    suite = load_suite(
        _write(
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
        _write(
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
